"""Errors: typed tool errors an agent can recover from, and framework errors a user can fix.

Tool errors carry a stable ``code`` (a small gRPC-like vocabulary) and a server-specific
``reason`` (``INSUFFICIENT_FUNDS``, ``OUT_OF_STOCK``) so a policy, a reward or a test can branch
on them. They reach the fast path as a value and MCP clients as an ``isError`` result whose
structured content is the same ``{code, reason, message, details}`` object.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar


class ErrorCode(str, enum.Enum):  # noqa: UP042 -- a StrEnum would change str() of a member
    NOT_FOUND = "NOT_FOUND"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    CONFLICT = "CONFLICT"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    INTERNAL = "INTERNAL"
    UNAVAILABLE = "UNAVAILABLE"  # serving: the process holding a session is not answering


class ToolError(Exception):
    """Base of every error a tool reports. Raise a subclass from a tool body."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL

    def __init__(self, message: str, *, reason: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.code.value
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code.value, "reason": self.reason, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out


class NotFound(ToolError):
    code = ErrorCode.NOT_FOUND


class InvalidArgument(ToolError):
    code = ErrorCode.INVALID_ARGUMENT


class FailedPrecondition(ToolError):
    code = ErrorCode.FAILED_PRECONDITION


class PermissionDenied(ToolError):
    code = ErrorCode.PERMISSION_DENIED


class Conflict(ToolError):
    code = ErrorCode.CONFLICT


class ResourceExhausted(ToolError):
    code = ErrorCode.RESOURCE_EXHAUSTED


class UnknownTool(ToolError):
    code = ErrorCode.UNKNOWN_TOOL


class DeadlineExceeded(ToolError):
    code = ErrorCode.DEADLINE_EXCEEDED


class Internal(ToolError):
    code = ErrorCode.INTERNAL


class ProveError(Exception):
    """A framework error a user can fix (bad config, missing plugin). The CLI prints it on one
    line and exits 1."""


class ConfigError(ProveError):
    pass


class RequestFailed(ProveError):
    """A model client's request for one turn failed for good (an HTTP 400 such as a context
    overflow, an endpoint down after its retries, a reply without choices). Evaluators record
    the task as failed with this error and go on with the next one; ``status`` is the HTTP
    status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class PluginError(ProveError):
    pass


class DuplicateComponent(PluginError):
    """Two plugins registered a component of the same kind under the same name."""


class HookNameError(PluginError):
    """A plugin defines a ``prove_*`` function that is not a known hook (usually a typo)."""


class PluginHookFailed(PluginError):
    """A plugin's registration hook raised; the plugin is dropped and reported by name."""


class UnknownComponent(ProveError):
    pass


def did_you_mean(name: str, choices: Any) -> str:
    """``"; did you mean 'x'?"`` when ``name`` is close to one of ``choices`` (a typo), else ``""``."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
