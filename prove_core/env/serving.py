"""Serving servers over MCP with fastmcp (stdio or streamable HTTP).

Each tool is a thin fastmcp ``Tool`` whose ``run`` calls ``ServerRuntime.call`` — the same fast
path synthesis and rollouts use — so the JSON Schema, the validation, the result and the typed
error are identical on both paths. Several servers are mounted into one MCP server with
``<server>_`` tool prefixes.

The session key comes from the request's ``_meta.session_id`` (fastmcp 4 clients are stateless
by default, so a connection is not a session); over HTTP the ``X-Prove-Session`` header may
carry it instead. A call with neither uses the process's ``default`` session. The key used is
echoed in the result's ``_meta.session_id``.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence
from typing import Any

import anyio
import structlog
from fastmcp import FastMCP
from fastmcp.exceptions import NotFoundError
from fastmcp.server.dependencies import get_context, get_http_headers
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import Tool
from fastmcp.tools.base import ToolResult as McpToolResult
from mcp.types import CallToolRequestParams, TextContent, ToolAnnotations

from prove_core.env.runtime import ServerRuntime, ToolResult, public_name, unknown_tool
from prove_core.errors import InvalidArgument

log = structlog.get_logger()

SESSION_META_KEY = "session_id"
SESSION_HEADER = "x-prove-session"
DEFAULT_SESSION = "default"


def session_key() -> str:
    """The session id of the current MCP request (``_meta``, then header, then default).

    A ``_meta.session_id`` that is present but not a non-empty string raises InvalidArgument:
    quietly using the shared default session instead would mix that rollout with every other.
    """
    try:
        ctx = get_context()
    except RuntimeError:
        return DEFAULT_SESSION
    request = ctx.request_context
    meta = getattr(request, "meta", None) if request is not None else None
    if isinstance(meta, dict) and SESSION_META_KEY in meta:
        sid = meta[SESSION_META_KEY]
        if isinstance(sid, str) and sid:
            return sid
        shown = json.dumps(sid, default=str)[:40]
        raise InvalidArgument(f"_meta.{SESSION_META_KEY} must be a non-empty string, got {shown}; send a string "
                              "id, or none for the shared default session", reason="BAD_SESSION_ID",
                              field=f"_meta.{SESSION_META_KEY}")
    headers = get_http_headers(include={SESSION_HEADER})
    sid = headers.get(SESSION_HEADER)
    return sid if sid else DEFAULT_SESSION


def to_mcp_result(result: ToolResult, session_id: str | None) -> McpToolResult:
    payload = result.structured
    return McpToolResult(
        content=[TextContent(type="text", text=json.dumps(payload, ensure_ascii=False, sort_keys=True))],
        structured_content=payload,
        is_error=result.is_error,
        meta={SESSION_META_KEY: session_id} if session_id is not None else None,
    )


class RuntimeTool(Tool):
    """An MCP tool that forwards to one tool of a ``ServerRuntime``."""

    runtime: Any = None
    tool_name: str = ""

    async def run(self, arguments: dict[str, Any]) -> McpToolResult:
        try:
            sid = session_key()
        except InvalidArgument as exc:
            return to_mcp_result(ToolResult(error=exc.to_dict()), None)
        # In a worker thread: a slow tool (up to its deadline) must not stall the event loop that
        # serves every other session. runtime.call is thread-safe (per-session locks).
        result = await anyio.to_thread.run_sync(self.runtime.call, sid, self.tool_name, arguments)
        log.debug("tool call", server=self.runtime.name, session=sid, tool=self.tool_name,
                  error=result.error["reason"] if result.is_error else None)
        return to_mcp_result(result, sid)


class TypedUnknownTool(Middleware):
    """An unknown tool name gets the same typed UNKNOWN_TOOL result as on the fast path."""

    async def on_call_tool(self, context: MiddlewareContext[CallToolRequestParams],
                           call_next: CallNext[CallToolRequestParams, McpToolResult]) -> McpToolResult:
        try:
            return await call_next(context)
        except NotFoundError:
            try:
                sid = session_key()
            except InvalidArgument as exc:
                return to_mcp_result(ToolResult(error=exc.to_dict()), None)
            return to_mcp_result(unknown_tool(context.message.name), sid)


def build_server(runtime: ServerRuntime) -> FastMCP:
    """One runtime as a fastmcp server (tool names unprefixed)."""
    mcp = FastMCP(runtime.name, instructions=runtime.server.description, middleware=[TypedUnknownTool()])
    for spec in runtime.specs():
        mcp.add_tool(
            RuntimeTool(
                name=spec.name,
                description=spec.description,
                parameters=spec.parameters,
                annotations=ToolAnnotations.model_validate(spec.annotations.to_mcp()),  # keys are the MCP aliases
                meta={"prove": {"reads": list(spec.reads), "produces": list(spec.produces), "mutates": list(spec.mutates)}},
                runtime=runtime,
                tool_name=spec.name,
            )
        )
    return mcp


def build_app(runtimes: Sequence[ServerRuntime]) -> FastMCP:
    """One MCP server for one runtime, or several mounted with ``<server>_`` prefixes."""
    if len(runtimes) == 1:
        return _with_schema_lookup(build_server(runtimes[0]), runtimes)
    root = FastMCP(
        "prove", instructions="PROVE servers: " + ", ".join(rt.name for rt in runtimes), middleware=[TypedUnknownTool()]
    )
    for rt in runtimes:
        root.mount(build_server(rt), namespace=rt.name)
    return _with_schema_lookup(root, runtimes)


def _with_schema_lookup(mcp: FastMCP, runtimes: Sequence[ServerRuntime]) -> FastMCP:
    """Answer the MCP SDK's per-call input-schema lookup from a dict. Before every streamable-HTTP
    tools/call the SDK checks ``Mcp-Param-*`` headers against the tool's schema; without a lookup it
    runs a whole tools/list through every middleware to find it (343 mounted tools: ~11 calls/s)."""
    low_level = getattr(mcp, "_mcp_server", None)
    if low_level is not None and getattr(low_level, "get_tool_input_schema", False) is None:
        prefixed = len(runtimes) > 1
        schemas = {public_name(rt.name, spec.name, prefixed=prefixed): spec.parameters
                   for rt in runtimes for spec in rt.specs()}
        low_level.get_tool_input_schema = schemas.get
    return mcp


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error":"unauthorized: send Authorization: Bearer <token>"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(mcp: FastMCP, *, token: str | None = None, path: str = "/mcp") -> Any:
    app = mcp.http_app(path=path)
    return BearerAuth(app, token) if token else app


def serve(
    runtimes: Sequence[ServerRuntime],
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
) -> None:
    if not structlog.is_configured():  # stdout is the protocol channel on stdio: log to stderr
        from prove_core.logging import configure

        configure()
    mcp = build_app(runtimes)
    if transport == "stdio":
        mcp.run(transport="stdio", show_banner=False)
        return
    import uvicorn

    app = http_app(mcp, token=token)
    # lifespan must run: fastmcp's session manager starts there
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")
