"""A worker's side of ``prove serve --workers``: own a share of the session ids, pass on the rest.

``prove_core.serve.fleet`` starts each worker with its place in the fleet (``PROVE_FLEET``: its
index, every worker's port, the fleet's folder). ``FleetMember`` is that place:

- ``mine(id)``: whether this worker holds the session (``fleet.owner_of``);
- ``call(...)``: run a tool call on the worker that owns its session (``POST /_prove/call`` there,
  which only ever runs calls its own worker owns); a worker that does not answer gives a typed
  UNAVAILABLE ``WORKER_UNAVAILABLE`` result, never a fresh session here;
- ``forward(request)``: pass a control request on to the owner, unchanged;
- ``issue_id()``: a new unguessable id this worker owns (``POST /sessions`` answers here);
- the journal: every session id the worker opens is appended to a file, so the worker that
  replaces it after a crash answers SESSION_LOST for those ids (``load_lost``);
- ``TransportPin``: the ``Mcp-Session-Id`` its MCP SDK issues gets the prefix ``w<index>-``, which
  nginx routes by, and loses it again on the way in.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Sequence
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from prove_core.env.runtime import ServerRuntime, ToolResult
from prove_core.errors import ErrorCode, InvalidArgument
from prove_core.serve.fastlane import check_session_id
from prove_core.serve.fleet import FLEET_ENV, TRANSPORT_PREFIX, journal_path, lost_path, owner_of, read_ids

log = structlog.get_logger()

CALL_PATH = "/_prove/call"
WORKER_HEADER = b"x-prove-worker"
TOKEN_ENV = "PROVE_TOKEN"
_HOP_HEADERS = {b"host", b"content-length", b"connection", b"keep-alive", b"transfer-encoding"}


def unavailable(index: int, exc: BaseException) -> dict[str, Any]:
    """The typed error of a call or request for a session whose worker does not answer."""
    return {"code": ErrorCode.UNAVAILABLE.value, "reason": "WORKER_UNAVAILABLE",
            "message": f"worker {index}, which holds this session, is not answering ({type(exc).__name__}); it is "
                       "being restarted and the sessions it held are lost: retry, then start a new session",
            "details": {"worker": index}}


class FleetMember:
    """This process's place in a fleet (module docstring)."""

    def __init__(self, *, index: int, ports: Sequence[int], workdir: str, generation: int = 0,
                 token: str | None = None, call_timeout_s: float | None = None) -> None:
        self.index, self.ports, self.workdir, self.generation = index, list(ports), workdir, generation
        self.workers = len(self.ports)
        self.token = token
        self.timeout = (call_timeout_s or 3600.0) + 30.0
        self._client: Any = None
        self._journal = open(journal_path(workdir, index), "a", encoding="utf-8")  # noqa: SIM115 - process-long
        self._journal_lock = threading.Lock()
        self.passed_on = 0  # calls and control requests run on another worker (tests read it)

    @classmethod
    def from_env(cls, *, call_timeout_s: float | None = None) -> FleetMember | None:
        """The member ``PROVE_FLEET`` describes, or None when this process is not a fleet worker."""
        raw = os.environ.get(FLEET_ENV)
        if not raw:
            return None
        place = json.loads(raw)
        return cls(index=int(place["index"]), ports=[int(p) for p in place["ports"]], workdir=str(place["dir"]),
                   generation=int(place.get("generation", 0)), token=os.environ.get(TOKEN_ENV) or None,
                   call_timeout_s=call_timeout_s)

    # -- ownership -----------------------------------------------------------------------------
    def owner(self, session_id: str) -> int:
        return owner_of(session_id, self.workers)

    def mine(self, session_id: str) -> bool:
        return self.owner(session_id) == self.index

    def issue_id(self) -> str:
        while True:  # about ``workers`` draws
            sid = secrets.token_urlsafe(18)
            if self.mine(sid):
                return sid

    # -- the journal -----------------------------------------------------------------------------
    def attach(self, runtimes: Sequence[ServerRuntime]) -> None:
        """Journal every session the runtimes open, and answer SESSION_LOST for the ids this
        worker's predecessors held when they died."""
        lost = read_ids(lost_path(self.workdir, self.index))
        for rt in runtimes:
            rt.mark_lost(lost)
            rt.on_open = self.opened
        if lost:
            log.warning("sessions lost by this worker's predecessor", worker=self.index, generation=self.generation,
                        sessions_lost=len(lost))

    def opened(self, session_id: str) -> None:
        line = json.dumps(session_id) + "\n"
        with self._journal_lock:
            self._journal.write(line)
            self._journal.flush()

    def report(self) -> dict[str, Any]:
        """``fleet`` in ``GET /sessions``: this worker, the fleet's size, every loss so far."""
        losses = []
        path = os.path.join(self.workdir, "losses.jsonl")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as lines:
                losses = [json.loads(line) for line in lines if line.strip()]
        return {"worker": self.index, "workers": self.workers, "generation": self.generation, "losses": losses}

    # -- passing on ------------------------------------------------------------------------------
    def _http(self) -> Any:
        if self._client is None:
            import httpx

            headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
            self._client = httpx.AsyncClient(timeout=self.timeout, headers=headers,  # retries: connecting only
                                             transport=httpx.AsyncHTTPTransport(retries=1),
                                             limits=httpx.Limits(max_keepalive_connections=64))
        return self._client

    async def call(self, runtime: ServerRuntime, session_id: str, tool: str, arguments: Any) -> ToolResult:
        """Run ``tool`` of ``runtime`` for ``session_id`` on the worker that owns the session."""
        owner = self.owner(session_id)
        if owner == self.index:
            return await runtime.acall(session_id, tool, arguments)
        self.passed_on += 1
        body = {"server": runtime.name, "tool": tool, "session_id": session_id, "arguments": arguments}
        try:
            reply = await self._http().post(f"http://127.0.0.1:{self.ports[owner]}{CALL_PATH}", json=body)
            data = reply.json()
        except Exception as exc:  # noqa: BLE001 - a dead or restarting owner: typed, never a local session
            return ToolResult(error=unavailable(owner, exc))
        if reply.status_code != 200 or not isinstance(data, dict):
            return ToolResult(error=data if isinstance(data, dict) and "reason" in data else unavailable(
                owner, RuntimeError(f"HTTP {reply.status_code}")))
        return ToolResult(data=data.get("data"), error=data.get("error"))

    async def forward(self, request: Request, session_id: str) -> Response:
        """Pass a control request on to the worker that owns ``session_id``; its answer, unchanged
        (the request's body must have been read: starlette keeps it)."""
        owner = self.owner(session_id)
        self.passed_on += 1
        url = f"http://127.0.0.1:{self.ports[owner]}{request.scope.get('raw_path', b'').decode('ascii')}"
        query = request.scope.get("query_string", b"")
        headers = [(k, v) for k, v in request.scope["headers"] if k not in _HOP_HEADERS]
        try:
            reply = await self._http().request(request.method, url + ("?" + query.decode("ascii") if query else ""),
                                               headers=headers, content=await request.body())
        except Exception as exc:  # noqa: BLE001
            return JSONResponse(unavailable(owner, exc), status_code=503)
        keep = {k: v for k, v in reply.headers.items()
                if k.lower() in ("content-type", "allow", "www-authenticate", WORKER_HEADER.decode())}
        return Response(reply.content, status_code=reply.status_code, headers=keep)

    def call_route(self, runtimes: Sequence[ServerRuntime]) -> Route:
        """``POST /_prove/call``: a tool call another worker passes on; runs only sessions this
        worker owns (421 otherwise: no request is passed on twice)."""
        by_name = {rt.name: rt for rt in runtimes}

        async def run(request: Request) -> Response:
            try:
                body = json.loads(await request.body())
                runtime, sid = by_name[body["server"]], body["session_id"]
                tool, arguments = body["tool"], body.get("arguments")
            except (ValueError, KeyError, TypeError):
                return JSONResponse({"code": ErrorCode.INVALID_ARGUMENT.value, "reason": "BAD_FLEET_CALL",
                                     "message": "not a fleet call"}, status_code=400)
            try:
                check_session_id(sid, "session_id")
            except InvalidArgument as exc:
                return JSONResponse(exc.to_dict(), status_code=400)
            if not self.mine(sid):
                return JSONResponse({"code": ErrorCode.INVALID_ARGUMENT.value, "reason": "WRONG_WORKER",
                                     "message": f"worker {self.index} does not hold this session"}, status_code=421)
            result = await runtime.acall(sid, tool, arguments)
            return JSONResponse({"data": result.data, "error": result.error})

        return Route(CALL_PATH, run, methods=["POST"])


class TransportPin:
    """ASGI middleware: the ``Mcp-Session-Id`` the MCP SDK issues leaves with ``w<index>-`` before
    it (nginx routes by it to this worker) and comes back without it. An id of another worker
    reaching this one is left as it is (the SDK answers it is unknown). Every reply names the
    worker that answered it in ``X-Prove-Worker`` (a control request passed on: the owner)."""

    def __init__(self, app: Any, index: int) -> None:
        self.app = app
        self.prefix = TRANSPORT_PREFIX.format(index=index).encode()
        self.stamp = (WORKER_HEADER, str(index).encode())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = [(k, v[len(self.prefix):] if k == b"mcp-session-id" and v.startswith(self.prefix) else v)
                   for k, v in scope["headers"]]

        async def pinned_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                out = [(k, self.prefix + v if k.lower() == b"mcp-session-id" else v) for k, v in message.get("headers", [])]
                if not any(k.lower() == WORKER_HEADER for k, _ in out):
                    out.append(self.stamp)
                message = {**message, "headers": out}
            await send(message)

        await self.app({**scope, "headers": headers}, receive, pinned_send)
