"""The HTTP fast lane: ``tools/call`` answered without fastmcp's per-request pipeline.

Over streamable HTTP almost every request of an RL fleet is one ``tools/call``. Through fastmcp
and the MCP SDK each one is parsed and validated by pydantic several times, dispatched through
middleware, run in a worker thread and serialised back: about 2.5 ms per call, ten times the
tool itself. ``ToolCallLane`` sits in front of that app and answers the common case directly:

- a POST to the MCP path in the stateless 2026 protocol era (``MCP-Protocol-Version`` a modern
  revision; both fastmcp's and the official SDK's clients speak it), with ``Mcp-Method:
  tools/call``, a JSON body that is one JSON-RPC request naming a published tool, and no
  ``Mcp-Param-*`` headers;
- the request passes the SDK's own validation ladder (``mcp.shared.inbound``: envelope
  ``_meta``, routing headers equal to the body, a supported version);
- the tool runs on the same runtime as everywhere else (``ServerRuntime.acall``: in a worker
  thread, so a slow tool does not stall other sessions, under the same deadline) with the same
  session key (``_meta.session_id``, then ``X-Prove-Session``, then ``default``);
- the reply is the JSON body the SDK would have written: the same result object (content, the
  structured result, ``isError``, ``resultType``, ``_meta`` with the session id and the server's
  ``serverInfo`` stamp), as ``application/json``.

Everything else (the handshake era with its ``Mcp-Session-Id``, other methods, a malformed or
mismatched request, an unknown tool, task-augmented calls) goes to the app unchanged, with the
body replayed, so errors and every other behaviour are the SDK's own. A test compares the two
paths reply for reply. ``prove serve --plain-http`` turns the lane off.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import structlog

from prove_core.env.runtime import ServerRuntime, ToolResult
from prove_core.errors import InvalidArgument

log = structlog.get_logger()

SESSION_META_KEY = "session_id"
SESSION_HEADER = b"x-prove-session"
DEFAULT_SESSION = "default"
MAX_BODY = 8 * 1024 * 1024  # larger bodies take the app's own path


def check_session_id(sid: Any, where: str) -> str:
    """``sid`` when it is a usable session id: a non-empty string of Unicode text (any characters,
    ``/`` included, but no lone surrogate, which no UTF-8 reply could carry); else InvalidArgument
    BAD_SESSION_ID naming ``where`` it came from."""
    if not isinstance(sid, str) or not sid:
        shown = json.dumps(sid, default=str)[:40]
        raise InvalidArgument(f"{where} must be a non-empty string, got {shown}; send a string id, or none for the "
                              "shared default session", reason="BAD_SESSION_ID", field=where)
    try:
        sid.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{where} has a lone surrogate (\\ud800-\\udfff not in a pair): send the id as "
                              "valid Unicode text", reason="BAD_SESSION_ID", field=where) from None
    return sid


def header_session(header: bytes | None) -> str | None:
    """The ``X-Prove-Session`` header as text: its bytes read as UTF-8 (the same text a JSON
    ``_meta.session_id`` names); InvalidArgument BAD_SESSION_ID when they are not UTF-8."""
    if not header:
        return None
    try:
        return header.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgument("the X-Prove-Session header is not UTF-8 text: send the id's UTF-8 bytes",
                              reason="BAD_SESSION_ID", field="X-Prove-Session") from None


def session_from(meta: Any, header: bytes | None) -> str:
    """The PROVE session key of a request: ``_meta.session_id``, then the ``X-Prove-Session``
    header, then ``default``. A ``_meta.session_id`` that is present but not a usable id
    (``check_session_id``) raises InvalidArgument: quietly using the shared default session
    instead would mix that rollout with every other. So does one that differs from the header
    (both compared as text): which of the two did the client mean?"""
    named = header_session(header)
    if isinstance(meta, dict) and SESSION_META_KEY in meta:
        sid = check_session_id(meta[SESSION_META_KEY], f"_meta.{SESSION_META_KEY}")
        if named is not None and named != sid:
            raise InvalidArgument(f"_meta.{SESSION_META_KEY} {sid[:60]!r} and the X-Prove-Session header "
                                  f"{named[:60]!r} name different sessions; send one id",
                                  reason="SESSION_ID_MISMATCH", field=f"_meta.{SESSION_META_KEY}")
        return sid
    return named if named is not None else DEFAULT_SESSION


def result_object(result: ToolResult, session_id: str | None) -> dict[str, Any]:
    """The MCP ``CallToolResult`` of a tool result, as a JSON object (before the SDK's stamps)."""
    payload = result.structured
    out: dict[str, Any] = {
        "content": [{"type": "text", "text": json.dumps(payload, ensure_ascii=False, sort_keys=True)}],
        "structuredContent": payload,
        "isError": result.is_error,
    }
    if session_id is not None:
        out["_meta"] = {SESSION_META_KEY: session_id}
    return out


class ToolCallLane:
    """ASGI middleware answering modern-era ``tools/call`` requests directly (module docstring).

    ``published``: public tool name -> (runtime, tool) as the MCP app publishes them; ``path``: the
    MCP endpoint; ``server_info``: a callable returning the ``serverInfo`` stamp (a fresh dict)."""

    def __init__(self, app: Any, published: Mapping[str, tuple[ServerRuntime, str]], *, path: str = "/mcp",
                 server_info: Any = None, member: Any = None) -> None:
        from mcp.shared import inbound
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        self.app = app
        self.published = dict(published)
        self.path = path
        self.server_info = server_info
        self.inbound = inbound
        self.versions = {v.encode() for v in MODERN_PROTOCOL_VERSIONS}
        self.member = member  # a fleet worker's FleetMember: calls run on the worker owning the session
        self.served = 0  # calls answered here (tests and benchmarks read it)

    def _candidate(self, scope: dict[str, Any]) -> dict[bytes, bytes] | None:
        """The request's headers when it may be a fast call (decided from the headers alone)."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            return None
        headers: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:
            if key in headers or key.startswith(b"mcp-param-"):
                return None  # a repeated header or Mcp-Param-* headers: the SDK checks those
            headers[key] = value
        if (headers.get(b"mcp-method") != b"tools/call" or headers.get(b"mcp-protocol-version") not in self.versions
                or b"application/json" not in headers.get(b"content-type", b"")
                or b"application/json" not in headers.get(b"accept", b"")):
            return None
        return headers

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = self._candidate(scope)
        if headers is None:
            await self.app(scope, receive, send)
            return
        body, messages = await read_body(receive)
        answered = body is not None and await self._answer(body, headers, send)
        if not answered:
            await self.app(scope, replay(messages, receive), send)

    async def _answer(self, body: bytes, headers: dict[bytes, bytes], send: Any) -> bool:
        """Run and answer the call; False (nothing sent) when the app must take the request."""
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            return False
        if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" or request.get("method") != "tools/call":
            return False
        rid, params = request.get("id"), request.get("params")
        if isinstance(rid, bool) or not isinstance(rid, int | str) or not isinstance(params, dict):
            return False
        name, arguments = params.get("name"), params.get("arguments", {})
        if (not isinstance(name, str) or name not in self.published or not isinstance(arguments, dict)
                or "task" in params or set(request) - {"jsonrpc", "id", "method", "params"}):
            return False
        text = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers.items()}
        verdict = self.inbound.classify_inbound_request(request, headers=text)
        if not isinstance(verdict, self.inbound.InboundModernRoute):
            return False  # the SDK writes the rejection
        runtime, tool = self.published[name]
        try:
            sid: str | None = session_from(params.get("_meta"), headers.get(SESSION_HEADER))
        except InvalidArgument as exc:
            sid, result = None, ToolResult(error=exc.to_dict())
        else:
            assert sid is not None
            if self.member is not None:
                result = await self.member.call(runtime, sid, tool, arguments)
            else:
                result = await runtime.acall(sid, tool, arguments)
        log.debug("tool call", server=runtime.name, session=sid, tool=tool,
                  error=result.error["reason"] if result.error is not None else None)
        reply = result_object(result, sid)
        reply["resultType"] = "complete"
        if self.server_info is not None:
            reply.setdefault("_meta", {})["io.modelcontextprotocol/serverInfo"] = self.server_info()
        payload = json.dumps({"jsonrpc": "2.0", "id": rid, "result": reply}, ensure_ascii=False,
                             separators=(",", ":")).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})
        self.served += 1
        return True


async def read_body(receive: Any, timeout_s: float | None = None) -> tuple[bytes | None, list[dict[str, Any]]]:
    """The request body (None when the client went away or it is over ``MAX_BODY``) and the ASGI
    messages read, to replay to the app when the lane does not answer. With ``timeout_s`` a piece
    that takes longer raises TimeoutError."""
    import anyio

    messages: list[dict[str, Any]] = []
    size = 0
    while True:
        if timeout_s is None:
            message = await receive()
        else:
            with anyio.fail_after(timeout_s):
                message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None, messages
        size += len(message.get("body", b""))
        if size > MAX_BODY:
            return None, messages
        if not message.get("more_body"):
            return b"".join(m.get("body", b"") for m in messages), messages


def replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    """A ``receive`` that hands out ``messages`` first, then the real one."""
    pending = list(messages)

    async def replayed() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        return await receive()  # type: ignore[no-any-return]

    return replayed
