"""The session control API: HTTP routes beside ``/mcp`` for trainers, never on the agent's tool list.

``prove serve --transport http`` mounts these routes in the same app as ``/mcp``, so the same
bearer token and the same Host/Origin checks guard them. A session id names one session on every
mounted server (as ``_meta.session_id`` does on the MCP path): each operation applies to every
server, and ``state`` reports each server under its name.

    POST   /sessions                 {"seed": 7}   → 201 a new session (server-issued id) + its state;
                                     {"id": "x"}   → 201 opens id "x" (409 while it is live): the
                                                     explicit way to open a closed, expired or lost id
    GET    /sessions                               → 200 live sessions per server, with the bounds
    GET    /sessions/{id}/state      ?diff=1       → 200 {"id", "state_hash", "servers": {...}}
    POST   /sessions/{id}/reset      {"seed": 7}?  → 200 back to its seed (or to seed 7), its state
    POST   /sessions/{id}/fork                     → 201 a new session with the same state; its id is
                                                     the parent's route key, a dot and a new suffix
    DELETE /sessions/{id}                          → 200 {"id", "closed": true, "servers": [...]}

A POST needs a JSON object body (``{}`` at least) sent as ``Content-Type: application/json``: no
web page can send one without a CORS preflight, which the Origin check refuses (docs/serving.md,
threat model). Errors are ``{code, reason, message, details}`` with the HTTP status of the
failure: 400 a bad body or query, 401 no or a wrong token (``BearerAuth``), 404 no live session
with that id (``SESSION_NOT_FOUND``; ``SESSION_EXPIRED``, ``SESSION_CLOSED`` or ``SESSION_LOST``
for an id whose session ended), 405 a wrong method, 409 opening an id that is live, 413 a body
over 64 KiB, 415 a body that is not JSON, 429 the session bound reached, 500 a server fault.

``state`` of a session: ``state_hash`` is ``Environment.state_hash``'s string
(``<server>:<sha256>`` joined with ``|``, servers sorted), ``servers`` maps each mounted server to
``{"live", "seed", "state_hash", "changed"}`` — ``live`` false where the session has not called
that server yet (its state there is the seed's) — and with ``?diff=1`` a ``diff`` of what differs
from the session's seed: ``{"tables": {table: {"added", "removed", "changed"}}, "vars": [...]}``.
A control read is not a use: it does not keep a session from expiring.

``prove_core.serve.client.SessionClient`` is the Python client.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

import anyio
import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from prove_core.env.runtime import ServerRuntime, ended_error
from prove_core.errors import ErrorCode, InvalidArgument, ToolError
from prove_core.serve.fastlane import check_session_id
from prove_core.serve.fleet import route_key

log = structlog.get_logger()

PREFIX = "/sessions"
MAX_BODY = 64 * 1024
EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]  # a route's own 405s are typed
SEED_RANGE = 2**63  # seeds are integers in [-2**63, 2**63)

# HTTP status of a tool error code raised by a runtime (the session bound: RESOURCE_EXHAUSTED)
_STATUS = {ErrorCode.NOT_FOUND.value: 404, ErrorCode.INVALID_ARGUMENT.value: 400,
           ErrorCode.RESOURCE_EXHAUSTED.value: 429, ErrorCode.FAILED_PRECONDITION.value: 409,
           ErrorCode.CONFLICT.value: 409, ErrorCode.PERMISSION_DENIED.value: 403}


class ControlError(Exception):
    """A refused control request: an HTTP status and the typed ``{code, reason, message, details}``."""

    def __init__(self, status: int, code: str, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "reason": self.reason, "message": self.message, "details": self.details}

    @classmethod
    def from_tool_error(cls, exc: ToolError) -> ControlError:
        return cls(_STATUS.get(exc.code.value, 500), exc.code.value, exc.reason, exc.message, **exc.details)


def not_found(session_id: str) -> ControlError:
    return ControlError(404, ErrorCode.NOT_FOUND.value, "SESSION_NOT_FOUND",
                        f"no live session {session_id[:80]!r} (never opened, closed or expired)", session_id=session_id)


def ended(session_id: str, server: str, why: str) -> ControlError:
    """404 for an id whose session ended: SESSION_EXPIRED, SESSION_CLOSED or SESSION_LOST."""
    return ControlError.from_tool_error(ended_error(server, session_id, why))


def bad_request(reason: str, message: str, **details: Any) -> ControlError:
    return ControlError(400, ErrorCode.INVALID_ARGUMENT.value, reason, message, **details)


class SessionControl:
    """The control operations on the mounted runtimes, synchronous (the routes run them in worker
    threads; a caller in the same process may use them directly). Each raises ``ControlError``."""

    def __init__(self, runtimes: Sequence[ServerRuntime]) -> None:
        self.runtimes = {rt.name: rt for rt in runtimes}

    def holders(self, session_id: str, *, whole: bool = False) -> list[ServerRuntime]:
        """The runtimes holding a live session with this id. None: 404, reason SESSION_EXPIRED,
        SESSION_CLOSED or SESSION_LOST if its session ended, else SESSION_NOT_FOUND. With ``whole``
        the session's state on every server must be there: a part that ended is such a 404 too (a
        state or a fork would otherwise silently stand the seed's state in for it)."""
        held = [rt for rt in self.runtimes.values() if rt.live_session(session_id) is not None]
        gone = self.gone(session_id)
        if gone and (whole or not held):
            server, why = next(iter(gone.items()))
            raise ended(session_id, server, why)
        if not held:
            raise not_found(session_id)
        return held

    def gone(self, session_id: str) -> dict[str, str]:
        """``{server: "expired" | "evicted" | "closed" | "lost"}`` where this id's session ended."""
        out = {}
        for name, rt in sorted(self.runtimes.items()):
            why = rt.gone(session_id)
            if why is not None:
                out[name] = why
        return out

    def state(self, session_id: str, *, diff: bool = False) -> dict[str, Any]:
        self.holders(session_id, whole=True)
        servers: dict[str, Any] = {}
        for name, rt in sorted(self.runtimes.items()):
            report = rt.session_report(session_id, diff=diff)
            if report is None:  # a server the session has not called yet: its state there is the seed's
                report = {"seed": rt.seed, "changed": False, "state_hash": rt.seed_hash()}
                if diff:
                    report["diff"] = {"tables": {}, "vars": []}
                servers[name] = {"live": False, **report}
            else:
                servers[name] = {"live": True, **report}
        if not any(s["live"] for s in servers.values()):  # it ended meanwhile
            self.holders(session_id)
        return {"id": session_id, "state_hash": "|".join(f"{n}:{s['state_hash']}" for n, s in servers.items()),
                "servers": servers}

    def create(self, *, seed: int | None = None, session_id: str | None = None) -> dict[str, Any]:
        """A new session: a server-issued id (``issue_id``), or ``session_id`` opened explicitly
        (409 SESSION_EXISTS while it is live; an ended id is opened afresh)."""
        if session_id is not None and any(rt.live_session(session_id) for rt in self.runtimes.values()):
            raise ControlError(409, ErrorCode.CONFLICT.value, "SESSION_EXISTS",
                               f"session {session_id[:80]!r} is live; reset it, or close it first",
                               session_id=session_id)
        sid = self.issue_id() if session_id is None else session_id
        self._on_every_runtime(sid, lambda rt: rt.new_session(session_id=sid, seed=seed))
        return self.state(sid)

    def issue_id(self) -> str:
        """A new unguessable session id (``prove_core.serve.fleet`` picks one its process owns)."""
        return secrets.token_urlsafe(18)

    def reset(self, session_id: str, *, seed: int | None = None) -> dict[str, Any]:
        self.holders(session_id)
        for rt in self.runtimes.values():
            try:
                rt.reset_session(session_id, seed=seed)
            except ToolError as exc:  # the bound, on a server the session had not called yet
                raise ControlError.from_tool_error(exc) from None
        return self.state(session_id)

    def fork(self, session_id: str) -> dict[str, Any]:
        self.holders(session_id, whole=True)
        # The parent's route key first: a proxy pinning sessions by it (env.fleet) sends the fork to
        # the process that holds its state.
        new_id = f"{route_key(session_id)}.{secrets.token_urlsafe(12)}"
        self._on_every_runtime(new_id, lambda rt: rt.fork_session(session_id, new_id))
        return {**self.state(new_id), "forked_from": session_id}

    def close(self, session_id: str) -> dict[str, Any]:
        """Close the session on every server: a later use of the id gets SESSION_CLOSED (an id
        whose state expired is closed too). 404 for an id no server holds or remembers, or one
        already closed (SESSION_CLOSED)."""
        held = [rt.name for rt in self.runtimes.values() if rt.live_session(session_id) is not None]
        gone = self.gone(session_id)
        if not held and not gone:
            raise not_found(session_id)
        if not held and set(gone.values()) == {"closed"}:
            raise ended(session_id, *next(iter(gone.items())))
        for rt in self.runtimes.values():
            rt.close(session_id)
        return {"id": session_id, "closed": True, "servers": sorted(held), "expired": gone}

    def stats(self) -> dict[str, Any]:
        return {"servers": {name: {"sessions": len(rt), "max_sessions": rt.max_sessions, "ttl_s": rt.ttl_s,
                                   "seed": rt.seed} for name, rt in sorted(self.runtimes.items())}}

    def _on_every_runtime(self, new_id: str, start: Callable[[ServerRuntime], Any]) -> None:
        """Start session ``new_id`` on every runtime; if one refuses (the session bound), close it
        on those that had started it: all or nothing."""
        done: list[ServerRuntime] = []
        try:
            for rt in self.runtimes.values():
                start(rt)
                done.append(rt)
        except ToolError as exc:
            for rt in done:
                rt.close(new_id)
            raise ControlError.from_tool_error(exc) from None


# -- HTTP ----------------------------------------------------------------------------------------


def error_response(exc: ControlError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(exc.to_dict(), status_code=exc.status, headers=headers)


async def json_body(request: Request, accepted: Sequence[str]) -> dict[str, Any]:
    """The request's JSON object body, with only ``accepted`` keys. It must be there (``{}`` at
    least) and declared ``application/json``: a browser cannot send that without a preflight."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise ControlError(413, ErrorCode.INVALID_ARGUMENT.value, "BODY_TOO_LARGE",
                           f"the body may be {MAX_BODY} bytes at most", limit=MAX_BODY)
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise ControlError(413, ErrorCode.INVALID_ARGUMENT.value, "BODY_TOO_LARGE",
                               f"the body may be {MAX_BODY} bytes at most", limit=MAX_BODY)
    request._body = raw  # starlette's cache: a fleet worker may pass the request on (serve.member)
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise ControlError(415, ErrorCode.INVALID_ARGUMENT.value, "UNSUPPORTED_MEDIA_TYPE",
                           "send a JSON object body ({} at least) as Content-Type: application/json",
                           content_type=media)
    if not raw.strip():
        raise bad_request("BAD_BODY", "send a JSON object body, {} at least, as Content-Type: application/json")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, a 5,000-digit number, deep nesting
        raise bad_request("BAD_JSON", f"the body is not valid JSON: {str(exc)[:120]}") from None
    if not isinstance(body, dict):
        raise bad_request("BAD_BODY", f"the body must be a JSON object, got {type(body).__name__}")
    try:
        json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise bad_request("BAD_JSON", "the body has a lone surrogate (a \\ud800-\\udfff escape that is not "
                          "part of a pair): send valid Unicode text") from None
    unknown = sorted(str(k) for k in body if k not in accepted)
    if unknown:
        raise bad_request("UNKNOWN_FIELD", f"unknown field{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(map(repr, unknown))}; accepted: {', '.join(accepted) or 'none'}",
                          fields=unknown, accepted=list(accepted))
    return body


def not_allowed(request: Request, allowed: str) -> ControlError:
    return ControlError(405, ErrorCode.INVALID_ARGUMENT.value, "METHOD_NOT_ALLOWED",
                        f"{request.method} is not allowed on {request.url.path[:120]}; allowed: {allowed}",
                        allowed=allowed.split(", "))


def seed_of(body: dict[str, Any]) -> int | None:
    seed = body.get("seed")
    if seed is None:
        return None
    if not isinstance(seed, int) or isinstance(seed, bool) or not -SEED_RANGE <= seed < SEED_RANGE:
        raise bad_request("BAD_SEED", f"seed must be an integer in [-2**63, 2**63), got {json.dumps(seed)[:40]}",
                          field="seed")
    return seed


def flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    if value is None:
        return False
    if value.lower() in ("1", "true", "yes", ""):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise bad_request("BAD_QUERY", f"?{name}= takes 1 or 0, got {value[:40]!r}", field=name)


def path_id(request: Request) -> str | None:
    """The session id in the request's path (``sid``), checked: the raw path must unquote to
    UTF-8 text (the server would otherwise read ``%FF`` as U+FFFD, another id)."""
    try:
        unquote_to_bytes(request.scope.get("raw_path", b"").decode("ascii")).decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request("BAD_SESSION_ID", "the path is not UTF-8 text once unquoted: quote the session id's "
                          "UTF-8 bytes") from None
    sid = request.path_params.get("sid")
    if sid is not None:
        try:
            check_session_id(sid, "path")
        except InvalidArgument as exc:
            raise ControlError.from_tool_error(exc) from None
    return sid


Handler = Callable[[Request], Awaitable[tuple[int, dict[str, Any]] | Response]]


def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A route endpoint: the handler's ``(status, body)`` as JSON (or its own ``Response``), a
    ``ControlError`` as its typed error, anything else as a typed INTERNAL (logged with its
    traceback). A path that is not UTF-8 once unquoted is refused before the handler runs."""

    async def run(request: Request) -> Response:
        try:
            path_id(request)
            answer = await handler(request)
            if isinstance(answer, Response):
                return answer
            status, body = answer
        except ControlError as exc:
            allow = exc.details.get("allowed") if exc.status == 405 else None
            return error_response(exc, {"Allow": ", ".join(allow)} if allow else None)
        except Exception as exc:  # noqa: BLE001 - a bug must not drop the connection
            log.exception("session control failed", path=request.url.path, method=request.method)
            return error_response(ControlError(500, ErrorCode.INTERNAL.value, "CONTROL_FAILED",
                                               f"{type(exc).__name__}: {str(exc)[:200]}"))
        return JSONResponse(body, status_code=status)

    return run


def routes(runtimes: Sequence[ServerRuntime], member: Any = None) -> list[BaseRoute]:
    """The control routes for these runtimes, to add to the app that serves ``/mcp``. With a
    ``member`` (``prove_core.serve.member.FleetMember``: this process is one worker of a fleet) a
    request for a session another worker owns is passed on to it, new ids are ones this worker
    owns, and ``GET /sessions`` reports the fleet (its losses included)."""
    control = SessionControl(runtimes)
    if member is not None:
        control.issue_id = member.issue_id  # type: ignore[method-assign]

    def elsewhere(sid: str) -> bool:
        return member is not None and not member.mine(sid)

    async def in_thread(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = await anyio.to_thread.run_sync(fn)
        return result

    async def sessions(request: Request) -> tuple[int, dict[str, Any]] | Response:
        if request.method == "POST":
            body = await json_body(request, ("seed", "id"))
            seed, sid = seed_of(body), body.get("id")
            if sid is not None and not (isinstance(sid, str) and sid):
                raise bad_request("BAD_SESSION_ID", f"id must be a non-empty string, got {json.dumps(sid)[:40]}",
                                  field="id")
            if sid is not None and elsewhere(sid):
                return await member.forward(request, sid)  # type: ignore[no-any-return]
            return 201, await in_thread(lambda: control.create(seed=seed, session_id=sid))
        if request.method in ("GET", "HEAD"):
            return 200, {**control.stats(), **({"fleet": member.report()} if member is not None else {})}
        raise not_allowed(request, "GET, POST")

    async def state(request: Request) -> tuple[int, dict[str, Any]] | Response:
        sid, diff = request.path_params["sid"], flag(request, "diff")
        if elsewhere(sid):
            return await member.forward(request, sid)  # type: ignore[no-any-return]
        return 200, await in_thread(lambda: control.state(sid, diff=diff))

    async def reset(request: Request) -> tuple[int, dict[str, Any]] | Response:
        sid = request.path_params["sid"]
        seed = seed_of(await json_body(request, ("seed",)))
        if elsewhere(sid):
            return await member.forward(request, sid)  # type: ignore[no-any-return]
        return 200, await in_thread(lambda: control.reset(sid, seed=seed))

    async def fork(request: Request) -> tuple[int, dict[str, Any]] | Response:
        sid = request.path_params["sid"]
        await json_body(request, ())
        if elsewhere(sid):
            return await member.forward(request, sid)  # type: ignore[no-any-return]
        return 201, await in_thread(lambda: control.fork(sid))

    async def close(request: Request) -> tuple[int, dict[str, Any]] | Response:
        sid = request.path_params["sid"]
        if elsewhere(sid):
            return await member.forward(request, sid)  # type: ignore[no-any-return]
        return 200, await in_thread(lambda: control.close(sid))

    async def other(request: Request) -> tuple[int, dict[str, Any]]:
        """Any other method on a session's path: a typed 405 naming the methods it takes."""
        path = request.url.path
        raise not_allowed(request, "POST" if path.endswith(("/reset", "/fork")) else
                          "GET" if path.endswith("/state") else "DELETE")

    return [
        Route(PREFIX, endpoint(sessions), methods=EVERY_METHOD),
        Route(PREFIX + "/{sid:path}/state", endpoint(state), methods=["GET"]),
        Route(PREFIX + "/{sid:path}/reset", endpoint(reset), methods=["POST"]),
        Route(PREFIX + "/{sid:path}/fork", endpoint(fork), methods=["POST"]),
        Route(PREFIX + "/{sid:path}", endpoint(close), methods=["DELETE"]),
        Route(PREFIX + "/{rest:path}", endpoint(other), methods=EVERY_METHOD),  # last: any other method, typed
    ]


__all__ = ["ControlError", "SessionControl", "routes"]
