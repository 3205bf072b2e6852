"""Serving servers over MCP with fastmcp (stdio or streamable HTTP).

Each tool is a thin fastmcp ``Tool`` whose ``run`` calls ``ServerRuntime.call`` — the same fast
path synthesis and rollouts use — so the JSON Schema, the validation, the result and the typed
error are identical on both paths. Several servers are mounted into one MCP server with
``<server>_`` tool prefixes.

The session key comes from the request's ``_meta.session_id`` (fastmcp 4 clients are stateless
by default, so a connection is not a session); over HTTP the ``X-Prove-Session`` header may
carry it instead. A call with neither uses the process's ``default`` session. The key used is
echoed in the result's ``_meta.session_id``. A key the server has never seen opens a fresh
session from the seed; the key of a session that expired or was evicted gets a typed
SESSION_EXPIRED error (see ``ServerRuntime``), never a fresh session in its place.

Over HTTP every request passes two ASGI guards before it reaches ``/mcp`` (or any other path):
``HostGuard`` (DNS-rebinding protection: a Host that is not loopback or allowed gets 421, an
Origin that is not allowed gets 403) and then ``BearerAuth`` (with a token: 401 without it).
``serverInfo`` names PROVE and its version.
"""

from __future__ import annotations

import hmac
import json
import math
import re
import weakref
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
import attrs
import structlog
from fastmcp import FastMCP
from fastmcp.exceptions import NotFoundError
from fastmcp.server.dependencies import get_context, get_http_headers
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import Tool
from fastmcp.tools.base import ToolResult as McpToolResult
from mcp.types import CallToolRequestParams, TextContent, ToolAnnotations

from prove_core import __version__
from prove_core.env.runtime import ServerRuntime, ToolResult, published_names, unknown_tool
from prove_core.errors import ConfigError, InvalidArgument
from prove_core.serve.fastlane import (
    DEFAULT_SESSION,
    ToolCallLane,
    header_session,
    read_body,
    replay,
    result_object,
    session_from,
)
from prove_core.serve.fleet import WILDCARD_HOSTS

log = structlog.get_logger()

SESSION_HEADER = "x-prove-session"
_PUBLISHED: weakref.WeakKeyDictionary[FastMCP, dict[str, tuple[ServerRuntime, str]]] = weakref.WeakKeyDictionary()
_MEMBERS: weakref.WeakKeyDictionary[FastMCP, Any] = weakref.WeakKeyDictionary()  # the fleet member it was built for


def session_key() -> str:
    """The session id of the current MCP request (``_meta``, then header, then default; see
    ``fastlane.session_from``, which raises InvalidArgument for a malformed ``_meta.session_id``)."""
    try:
        ctx = get_context()
    except RuntimeError:
        return DEFAULT_SESSION
    request = ctx.request_context
    meta = getattr(request, "meta", None) if request is not None else None
    header = get_http_headers(include={SESSION_HEADER}).get(SESSION_HEADER)
    return session_from(meta, header.encode("latin-1") if header else None)


def to_mcp_result(result: ToolResult, session_id: str | None) -> McpToolResult:
    """A tool result as fastmcp's result: the object ``fastlane.result_object`` defines, so both
    HTTP paths answer with the same content."""
    reply = result_object(result, session_id)
    return McpToolResult(content=[TextContent(**part) for part in reply["content"]],
                         structured_content=reply["structuredContent"], is_error=reply["isError"],
                         meta=reply.get("_meta"))


class RuntimeTool(Tool):
    """An MCP tool that forwards to one tool of a ``ServerRuntime``."""

    runtime: Any = None
    tool_name: str = ""
    member: Any = None  # a fleet worker's FleetMember: the call runs on the worker owning the session

    async def run(self, arguments: dict[str, Any]) -> McpToolResult:
        try:
            sid = session_key()
        except InvalidArgument as exc:
            return to_mcp_result(ToolResult(error=exc.to_dict()), None)
        # In a worker thread (acall): a slow tool (up to its deadline) must not stall the event loop
        # that serves every other session. The runtime is thread-safe (per-session locks).
        if self.member is not None:
            result = await self.member.call(self.runtime, sid, self.tool_name, arguments)
        else:
            result = await self.runtime.acall(sid, self.tool_name, arguments)
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


SERVER_NAME = "prove"  # serverInfo.name; serverInfo.version is PROVE's version


def build_server(runtime: ServerRuntime, *, tools: Collection[str] | None = None, name: str | None = None,
                 member: Any = None) -> FastMCP:
    """One runtime as a fastmcp server (tool names unprefixed); ``tools``: publish only these;
    ``member``: this process is a fleet worker (``prove_core.serve.member``)."""
    mcp = FastMCP(name or runtime.name, instructions=runtime.server.description, version=__version__,
                  middleware=[TypedUnknownTool()])
    for spec in runtime.specs():
        if tools is not None and spec.name not in tools:
            continue
        mcp.add_tool(
            RuntimeTool(
                name=spec.name,
                description=spec.description,
                parameters=spec.parameters,
                annotations=ToolAnnotations.model_validate(spec.annotations.to_mcp()),  # keys are the MCP aliases
                meta={"prove": {"reads": list(spec.reads), "produces": list(spec.produces), "mutates": list(spec.mutates)}},
                runtime=runtime,
                tool_name=spec.name,
                member=member,
            )
        )
    return mcp


def parse_mount(arg: str) -> tuple[str, list[str] | None]:
    """``banking`` -> ("banking", None); ``banking:get_balance,transfer`` -> ("banking",
    ["get_balance", "transfer"]): a server and, optionally, the only tools of it to publish."""
    name, sep, listed = arg.partition(":")
    if not sep:
        return name, None
    tools = [t.strip() for t in listed.split(",") if t.strip()]
    if not name or not tools:
        raise ConfigError(f"{arg!r}: write SERVER, or SERVER:TOOL[,TOOL...] to publish only those tools")
    return name, tools


def published_tools(runtimes: Sequence[ServerRuntime],
                    tools: Mapping[str, Collection[str] | None] | None = None) -> dict[str, tuple[ServerRuntime, str]]:
    """Public name -> (runtime, tool) of what one MCP server of these runtimes publishes:
    ``<server>_`` prefixes when there are several; for a server ``tools`` has a list for, only
    those tools. Refuses a listed tool the server does not have, and two tools that would be
    published under one name (``ToolNameCollision``, naming both)."""
    tools = tools or {}
    chosen: list[tuple[str, str]] = []
    for rt in runtimes:
        wanted = tools.get(rt.name)
        if wanted is not None:
            unknown = sorted(set(wanted) - set(rt.server.tools))
            if unknown:
                raise ConfigError(f"server {rt.name!r} has no tool named {', '.join(map(repr, unknown))}; "
                                  f"its tools: {', '.join(sorted(rt.server.tools))}")
        chosen += [(rt.name, t) for t in rt.server.tools if wanted is None or t in wanted]
    by_name = {rt.name: rt for rt in runtimes}
    names = published_names(chosen, prefixed=len(runtimes) > 1)
    return {public: (by_name[server], tool) for public, (server, tool) in names.items()}


def build_app(runtimes: Sequence[ServerRuntime], *, tools: Mapping[str, Collection[str] | None] | None = None,
              member: Any = None) -> FastMCP:
    """One MCP server for one runtime, or several mounted with ``<server>_`` prefixes; ``tools``
    (server -> tool names) publishes only those tools of a server. Colliding prefixed names and
    unknown tool names are refused (see ``published_tools``). ``serverInfo`` is ``prove`` and
    PROVE's version, its title names the servers."""
    published = published_tools(runtimes, tools)
    keep = {rt.name: {t for r, t in published.values() if r is rt} for rt in runtimes}
    if len(runtimes) == 1:
        mcp = build_server(runtimes[0], tools=keep[runtimes[0].name], name=SERVER_NAME, member=member)
    else:
        mcp = FastMCP(SERVER_NAME, instructions="PROVE servers: " + ", ".join(rt.name for rt in runtimes),
                      version=__version__, middleware=[TypedUnknownTool()])
        for rt in runtimes:
            mcp.mount(build_server(rt, tools=keep[rt.name], member=member), namespace=rt.name)
    low_level = getattr(mcp, "_mcp_server", None)
    if low_level is not None and hasattr(low_level, "title"):
        low_level.title = "PROVE: " + ", ".join(rt.name for rt in runtimes)
    _MEMBERS[mcp] = member
    return _with_schema_lookup(mcp, published)


def _with_schema_lookup(mcp: FastMCP, published: Mapping[str, tuple[ServerRuntime, str]]) -> FastMCP:
    """Answer the MCP SDK's per-call input-schema lookup from a dict. Before every streamable-HTTP
    tools/call the SDK checks ``Mcp-Param-*`` headers against the tool's schema; without a lookup it
    runs a whole tools/list through every middleware to find it (343 mounted tools: ~11 calls/s)."""
    _PUBLISHED[mcp] = dict(published)
    low_level = getattr(mcp, "_mcp_server", None)
    if low_level is not None and getattr(low_level, "get_tool_input_schema", False) is None:
        schemas = {public: rt.server.tools[tool].spec.parameters for public, (rt, tool) in published.items()}
        low_level.get_tool_input_schema = schemas.get
    return mcp


# -- HTTP guards -------------------------------------------------------------------------------

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_.~-]+)(?::([0-9]{1,5}))?")


def _split_host(value: str) -> tuple[str, str | None] | None:
    """``(host, port or None)`` of a Host header or an allowed-host entry, lower-cased (an IPv6
    address in brackets, a trailing dot dropped); None when it is not of that form."""
    value = value.strip().lower()
    if value.count(":") > 1 and not value.startswith("["):
        value = f"[{value}]"  # a bare IPv6 address in an allowed-host entry
    match = _HOST.fullmatch(value)
    if match is None:
        return None
    host = match.group(1)
    host = host[:-1] if host.endswith(".") and len(host) > 1 else host
    return host, match.group(2)


def _origin(value: str) -> str | None:
    """``scheme://host[:port]`` of an Origin header or an allowed-origin entry, lower-cased; None
    for ``null`` and anything else that is not an http(s) origin."""
    try:
        parts = urlsplit(value.strip().lower().rstrip("/"))
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query or "@" in parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}"


async def refuse(scope: dict[str, Any], send: Any, status: int, reason: str, message: str,
                 extra_headers: Sequence[tuple[bytes, bytes]] = (), code: str = "PERMISSION_DENIED") -> None:
    """Answer an HTTP request with a typed JSON error ``{code, reason, message}`` (a WebSocket
    handshake is closed before it is accepted)."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps({"code": code, "reason": reason, "message": message}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra_headers]})
    await send({"type": "http.response.body", "body": body})


class HostGuard:
    """ASGI middleware against DNS rebinding (an MCP MUST for local servers): a request whose
    ``Host`` is neither loopback (127.0.0.1, localhost, [::1], any port) nor allowed gets 421
    HOST_NOT_ALLOWED; one whose ``Origin`` (browsers send it) is not allowed gets 403
    ORIGIN_NOT_ALLOWED. Checked before authentication, on every path, as typed JSON errors.

    ``allowed_hosts``: more hosts, ``name`` (any port) or ``name:port`` (that port), or ``*`` (any
    host: the check is off). An Origin is allowed when its host passes the Host check, or it is one
    of ``allowed_origins`` (``https://app.example.com``; ``*``: any); requests without an Origin
    (every non-browser client) are not checked for it."""

    def __init__(self, app: Any, *, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.any_host = self.any_origin = False
        self.hosts: set[tuple[str, str | None]] = {(h, None) for h in LOOPBACK_HOSTS}
        self.origins: set[str] = set()
        for entry in allowed_hosts:
            parsed = None if entry.strip() == "*" else _split_host(entry)
            if entry.strip() != "*" and parsed is None:
                raise ConfigError(f"--allow-host {entry!r}: write a host name or address, optionally with :PORT, or *")
            self.any_host = self.any_host or parsed is None
            if parsed is not None:
                self.hosts.add(parsed)
        for entry in allowed_origins:
            origin = None if entry.strip() == "*" else _origin(entry)
            if entry.strip() != "*" and origin is None:
                raise ConfigError(f"--allow-origin {entry!r}: write an origin, http(s)://HOST[:PORT], or *")
            self.any_origin = self.any_origin or origin is None
            if origin is not None:
                self.origins.add(origin)

    def host_allowed(self, value: str) -> bool:
        if self.any_host:
            return True
        parsed = _split_host(value)
        return parsed is not None and ((parsed[0], None) in self.hosts or parsed in self.hosts)

    def origin_allowed(self, value: str) -> bool:
        if self.any_origin:
            return True
        origin = _origin(value)
        return origin is not None and (origin in self.origins or self.host_allowed(urlsplit(origin).netloc))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            origin = headers.get(b"origin")
            if not self.host_allowed(host):
                await refuse(scope, send, 421, "HOST_NOT_ALLOWED",
                             f"Host {host[:100]!r} is not allowed (DNS rebinding protection); address the server "
                             "by a loopback name, or start prove serve with --allow-host HOST")
                return
            if origin is not None and not self.origin_allowed(origin.decode("latin-1")):
                await refuse(scope, send, 403, "ORIGIN_NOT_ALLOWED",
                             f"Origin {origin.decode('latin-1')[:100]!r} is not allowed; start prove serve with "
                             "--allow-origin ORIGIN to allow it")
                return
        await self.app(scope, receive, send)


class BearerAuth:
    """ASGI middleware: every HTTP request (and WebSocket handshake) must carry ``Authorization:
    Bearer <token>``; the scheme is case-insensitive (RFC 9110), the token compared in constant time."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    def authorized(self, header: bytes) -> bool:
        scheme, sep, credentials = header.partition(b" ")
        ok = bool(sep) and scheme.lower() == b"bearer"
        return hmac.compare_digest(credentials if ok else b"", self.expected) and ok

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not self.authorized(given):
                await refuse(scope, send, 401, "UNAUTHORIZED", "send Authorization: Bearer <token>",
                             [(b"www-authenticate", b"Bearer")])
                return
        await self.app(scope, receive, send)


class RequestCheck:
    """ASGI middleware: bad bytes naming a session get a typed 400 before anything runs, on both
    lanes (fast lane and fastmcp's pipeline). An ``X-Prove-Session`` header that is not UTF-8 (or
    sent twice), and on a POST to the MCP path a body that is not UTF-8, has a lone surrogate
    (a ``\\ud800``-``\\udfff`` escape outside a pair), or names a ``_meta.session_id`` that is
    unusable or differs from the header (``fastlane.session_from``). MCP bodies get a JSON-RPC
    error (``-32602``, the typed error as its ``data``), other paths the typed JSON error. A body
    is read whole first; a piece of it that takes longer than ``body_timeout_s`` gets a typed 408."""

    def __init__(self, app: Any, *, path: str = "/mcp", body_timeout_s: float = 30.0) -> None:
        self.app = app
        self.path = path
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        named = [v for k, v in scope["headers"] if k == SESSION_HEADER.encode()]
        try:
            if len(named) > 1:
                raise InvalidArgument("send one X-Prove-Session header", reason="BAD_SESSION_ID",
                                      field="X-Prove-Session")
            header_session(named[0] if named else None)
        except InvalidArgument as exc:
            await refuse(scope, send, 400, exc.reason, exc.message, code=exc.code.value)
            return
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        try:  # the whole body (up to fastlane.MAX_BODY) before anything runs, none of it slower than the limit
            body, messages = await read_body(receive, self.body_timeout_s)
        except TimeoutError:
            await refuse(scope, send, 408, "BODY_TIMEOUT", f"the request body did not arrive within "
                         f"{self.body_timeout_s:g} s", [(b"connection", b"close")], code="INVALID_ARGUMENT")
            return
        if scope["path"] != self.path:
            await self.app(scope, replay(messages, receive), send)
            return
        problem = None if body is None else body_problem(body, named[0] if named else None)
        if problem is None:
            await self.app(scope, replay(messages, receive), send)
            return
        rid, refused = problem
        payload = json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": refused.message,
                                                                      "data": refused.to_dict()}}).encode()
        await send({"type": "http.response.start", "status": 400, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


def body_problem(body: bytes, header: bytes | None) -> tuple[Any, InvalidArgument] | None:
    """What is wrong with the session naming of an MCP POST body: ``(request id, error)``, or None
    (also for a body that is not JSON at all: the SDK answers that one)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, InvalidArgument(f"the body is not UTF-8 text (byte {exc.start}): send JSON as UTF-8",
                                     reason="BAD_ENCODING")
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    messages = parsed if isinstance(parsed, list) else [parsed]
    for message in messages:
        rid = message.get("id") if isinstance(message, dict) else None
        rid = rid if isinstance(rid, int | str) and not isinstance(rid, bool) else None
        params = message.get("params") if isinstance(message, dict) else None
        try:
            if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
                session_from(params["_meta"], header)
        except InvalidArgument as exc:
            return rid, exc
    if "\\u" in text:  # escapes may spell a lone surrogate, which no UTF-8 reply can carry
        try:
            json.dumps(parsed, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            first = messages[0] if messages and isinstance(messages[0], dict) else {}
            rid = first.get("id") if isinstance(first.get("id"), int | str) else None
            return rid, InvalidArgument("the body has a lone surrogate (a \\ud800-\\udfff escape outside a "
                                        "pair): send valid Unicode text", reason="BAD_ENCODING")
    return None


def http_app(mcp: FastMCP, *, token: str | None = None, path: str = "/mcp",
             runtimes: Sequence[ServerRuntime] | None = None, allowed_hosts: Iterable[str] = (),
             allowed_origins: Iterable[str] = (), plain: bool = False, body_timeout_s: float = 30.0) -> Any:
    """The ASGI app serving ``mcp`` at ``path``; with ``runtimes`` (those ``mcp`` was built from)
    also the session control API (``prove_core.serve.control``: ``/sessions/...``, not MCP tools) in
    the same app, so the same token and middleware guard it. Every path is behind ``BearerAuth``
    (with a token), and that behind ``HostGuard`` (loopback hosts, plus ``allowed_hosts`` and
    ``allowed_origins``).

    Single replies are ``application/json`` (no SSE stream per call), and ``tools/call`` takes the
    fast lane (``prove_core.serve.fastlane``) behind the guards. ``plain``: neither, every request
    through fastmcp's own pipeline with SSE replies (``prove serve --plain-http``: the speed
    baseline, and a way to rule the lane out)."""
    app = mcp.http_app(path=path, json_response=not plain)
    member = _MEMBERS.get(mcp)
    if runtimes is not None:
        from prove_core.serve import control

        app.router.routes.extend(control.routes(runtimes, member))
        if member is not None:
            app.router.routes.append(member.call_route(runtimes))
    published = _PUBLISHED.get(mcp)
    inner: Any = app
    if not plain and published is not None:
        low_level = getattr(mcp, "_mcp_server", None)
        stamp = None if low_level is None or not hasattr(type(low_level), "server_info_stamp") else (
            lambda: low_level.server_info_stamp)  # the SDK's serverInfo stamp of 2026-era results
        inner = ToolCallLane(app, published, path=path, server_info=stamp, member=member)
    inner = RequestCheck(inner, path=path, body_timeout_s=body_timeout_s)
    if member is not None:
        from prove_core.serve.member import TransportPin

        inner = TransportPin(inner, member.index)
    guarded = BearerAuth(inner, token) if token else inner
    return HostGuard(guarded, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)


STDIO_DRAIN_S = 60.0  # at stdin's end, how long calls in flight may still take (with no call deadline)


class StdioDrain:
    """Between the stdio transport and the MCP server: when stdin ends, the server's loop would
    cancel every call still running (the SDK treats EOF as "the caller is gone"), and a client
    that writes its last requests and closes stdin would lose their answers. So the server sees
    stdin's end only once every request read has been answered; a call still running after
    ``drain_s`` gets a JSON-RPC error saying so, and nothing else after it. It is also the
    server's write stream (it notes which requests were answered)."""

    def __init__(self, read_stream: Any, write_stream: Any, drain_s: float) -> None:
        self.outer_read, self.outer_write, self.drain_s = read_stream, write_stream, drain_s
        self._send, self.read = anyio.create_memory_object_stream[Any](0)
        self.pending: dict[Any, None] = {}
        self.reported: set[Any] = set()

    async def pump(self) -> None:
        from mcp_types import JSONRPCRequest

        async with self._send:
            async for item in self.outer_read:
                message = getattr(item, "message", None)
                if isinstance(message, JSONRPCRequest):
                    self.pending[message.id] = None
                await self._send.send(item)
            with anyio.move_on_after(self.drain_s):
                while self.pending:
                    await anyio.sleep(0.01)
            for rid in list(self.pending):
                await self._report(rid)

    async def _report(self, rid: Any) -> None:
        from mcp.shared.message import SessionMessage
        from mcp_types import ErrorData, JSONRPCError

        self.reported.add(rid)
        self.pending.pop(rid, None)
        log.warning("call cut off at stdin's end", request_id=rid, waited_s=self.drain_s)
        await self.outer_write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(
            code=-32603, message=f"stdin closed while this call was running and it did not finish within "
                                 f"{self.drain_s:g} s: the server stopped; its effect on the session is unknown"))))

    async def send(self, item: Any) -> None:
        rid = getattr(getattr(item, "message", None), "id", None)
        if rid is not None and rid in self.reported:
            return  # answered as cut off already
        await self.outer_write.send(item)
        if rid is not None:  # only once it is out: the server cancels what still runs when it sees the end
            self.pending.pop(rid, None)

    async def aclose(self) -> None:
        await self.outer_write.aclose()

    async def __aenter__(self) -> StdioDrain:
        await self.outer_write.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.outer_write.__aexit__(*exc)


async def serve_stdio(mcp: FastMCP, drain_s: float = STDIO_DRAIN_S) -> None:
    """Serve ``mcp`` over stdin/stdout (fastmcp's stdio runner, with ``StdioDrain`` between the
    transport and the server: every call in flight when stdin closes is answered or reported)."""
    from fastmcp.server.context import reset_transport, set_transport
    from mcp.server.stdio import stdio_server

    token = set_transport("stdio")
    try:
        async with mcp._lifespan_manager(), stdio_server() as (read_stream, write_stream):
            drain = StdioDrain(read_stream, write_stream, drain_s)
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain.pump)
                await mcp._mcp_server.run(drain.read, drain, mcp._mcp_server.create_initialization_options())
    finally:
        reset_transport(token)


@attrs.frozen(kw_only=True)
class HttpLimits:
    """What a client of the HTTP transport may take: ``header_timeout_s`` to send a request's
    headers (then the connection is closed), ``body_timeout_s`` between two pieces of its body
    (then a typed 408), ``max_connections`` open at once (past it a request gets 503)."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 1024

    def __attrs_post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a number of seconds above 0, got {value:g}")
        if self.max_connections < 1:
            raise ConfigError(f"max_connections must be at least 1, got {self.max_connections}")


def timed_h11(header_timeout_s: float) -> type:
    """uvicorn's h11 protocol, closing a connection whose request headers are not all in within
    ``header_timeout_s`` (uvicorn itself waits for them forever: a trickling client would hold a
    connection as long as it liked)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11(H11Protocol):
        _header_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(header_timeout_s, self._too_slow)

        def _too_slow(self) -> None:
            self._header_timer = None
            if self.cycle is None or self.cycle.response_complete:  # still no whole request
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.cycle is not None and not self.cycle.response_complete:  # the headers are in
                if self._header_timer is not None:
                    self._header_timer.cancel()
                    self._header_timer = None
            else:
                self._arm()

        def connection_lost(self, exc: Any) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
            super().connection_lost(exc)

    return TimedH11


def serve(
    runtimes: Sequence[ServerRuntime],
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    tools: Mapping[str, Collection[str] | None] | None = None,
    plain_http: bool = False,
    limits: HttpLimits | None = None,
) -> None:
    """Serve the runtimes over stdio or streamable HTTP (``/mcp``). ``token``, ``allowed_hosts`` and
    ``allowed_origins`` are HTTP settings: with stdio they are refused (a token there would guard
    nothing). A bind address other than a wildcard is an allowed host too. ``tools``: see
    ``build_app``; ``plain_http``: see ``http_app``; ``limits``: ``HttpLimits``. A process that
    ``prove serve --workers`` started (``PROVE_FLEET`` set) serves as one worker of that fleet
    (``prove_core.serve.member``)."""
    allowed_hosts, allowed_origins = list(allowed_hosts), list(allowed_origins)
    if transport == "stdio" and (token or allowed_hosts or allowed_origins):
        raise ConfigError("--token, --allow-host and --allow-origin apply to --transport http only: stdio is a "
                          "private pipe to the process that started the server")
    if not structlog.is_configured():  # stdout is the protocol channel on stdio: log to stderr
        from prove_core.logging import configure

        configure()
    member = None
    if transport == "http":
        from prove_core.serve.member import FleetMember

        member = FleetMember.from_env(call_timeout_s=max((rt.call_timeout_s or 0.0) for rt in runtimes) or None)
        if member is not None:
            member.attach(runtimes)
    mcp = build_app(runtimes, tools=tools, member=member)
    if transport == "stdio":
        drain_s = max((rt.call_timeout_s or 0.0) for rt in runtimes) + 5.0 if all(
            rt.call_timeout_s for rt in runtimes) else STDIO_DRAIN_S
        anyio.run(serve_stdio, mcp, drain_s)
        return
    import uvicorn

    limits = limits or HttpLimits()
    if host not in WILDCARD_HOSTS:  # clients of a specific address name it in Host
        allowed_hosts.append(host)
    app = http_app(mcp, token=token, runtimes=runtimes, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
                   plain=plain_http, body_timeout_s=limits.body_timeout_s)
    # lifespan must run: fastmcp's session manager starts there
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on", http=timed_h11(limits.header_timeout_s),
                limit_concurrency=limits.max_connections, timeout_keep_alive=5)
