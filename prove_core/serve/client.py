"""``SessionClient``: the session control API of ``prove serve --transport http`` from Python.

For trainers and harnesses: open sessions with server-issued ids, reset them (to their seed or
another), fork them, read their state hash and what changed since the seed, close them. The
agent never sees any of it: these are plain HTTP routes beside ``/mcp``, not MCP tools.

    from prove_core.serve.client import SessionClient

    with SessionClient("http://127.0.0.1:8000", token=token) as control:
        sid = control.create()                # a server-issued, unguessable id
        ...                                   # the agent calls tools with _meta.session_id = sid
        control.state_hash(sid)               # "banking:3f2a...|shopping:9c1d..."
        control.diff(sid)                     # {"banking": {"tables": {"cards": {"changed": [...]}}}}
        twin = control.fork(sid)              # same state, new id
        control.reset(sid, seed=7)            # back to seed 7's state
        control.close(sid)

Standard library only (``http.client``), one keep-alive connection per thread, so a client may be
shared by threads. Every refusal raises a ``ControlError`` subclass carrying the server's typed
``code``, ``reason``, ``message`` and ``details`` and the HTTP ``status``.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from typing import Any

__all__ = ["BadRequest", "ControlError", "ControlUnavailable", "Forbidden", "ServerFault", "SessionClient",
           "SessionClosed", "SessionExpired", "SessionLost", "SessionNotFound", "TooManySessions", "Unauthorized"]


class ControlError(Exception):
    """A refused control request."""

    def __init__(self, status: int, code: str, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}/{reason}: {message}")
        self.status = status
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}


class SessionNotFound(ControlError):
    """404: no live session with this id (never opened, or closed)."""


class SessionExpired(SessionNotFound):
    """404, reason SESSION_EXPIRED: the session expired or was evicted and its state is gone."""


class SessionClosed(SessionNotFound):
    """404, reason SESSION_CLOSED: a client closed the session (``create(session_id=...)`` opens it again)."""


class SessionLost(SessionNotFound):
    """404, reason SESSION_LOST: the process that held the session died (``prove serve --workers``)."""


class BadRequest(ControlError):
    """400, 405, 409, 413, 415: the request itself is wrong (a bad seed, an unknown field, opening a
    live id, ...)."""


class Unauthorized(ControlError):
    """401: no bearer token, or the wrong one."""


class Forbidden(ControlError):
    """403 or 421: refused by the server's Host/Origin checks."""


class TooManySessions(ControlError):
    """429: the server holds as many sessions as it may (close some, or raise --max-sessions)."""


class ServerFault(ControlError):
    """5xx: the server failed."""


class ControlUnavailable(ControlError):
    """The server could not be reached (status 0)."""


def _error_class(status: int, reason: str) -> type[ControlError]:
    if status == 404:
        return {"SESSION_EXPIRED": SessionExpired, "SESSION_CLOSED": SessionClosed,
                "SESSION_LOST": SessionLost}.get(reason, SessionNotFound)
    if status == 401:
        return Unauthorized
    if status in (403, 421):
        return Forbidden
    if status == 429:
        return TooManySessions
    if status >= 500:
        return ServerFault
    return BadRequest


class SessionClient:
    """The control API of one served process. ``url`` is its base (``http://127.0.0.1:8000``;
    the MCP endpoint's URL, ending in ``/mcp``, works too)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 30.0,
                 headers: dict[str, str] | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"an http(s) URL is needed, got {url!r}")
        self.scheme, self.netloc = parts.scheme, parts.netloc
        base = parts.path.rstrip("/")
        self.base = base[: -len("/mcp")] if base.endswith("/mcp") else base
        self.timeout = timeout
        self.headers = {"Accept": "application/json", **(headers or {})}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._local = threading.local()

    def __enter__(self) -> SessionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_connection()

    # -- the API -----------------------------------------------------------------------------------
    def create(self, *, seed: int | None = None, session_id: str | None = None) -> str:
        """A new session on every mounted server (at ``seed``, default the server's); its id: a
        server-issued one, or ``session_id`` (the explicit way to open again an id that was
        closed, expired or lost; 409 while it is live)."""
        body: dict[str, Any] = {} if seed is None else {"seed": seed}
        if session_id is not None:
            body["id"] = session_id
        return str(self._request("POST", "/sessions", body)["id"])

    def state(self, session_id: str, *, diff: bool = False) -> dict[str, Any]:
        """``{"id", "state_hash", "servers": {server: {"live", "seed", "state_hash", "changed"}}}``;
        with ``diff`` each server also has ``"diff"``: what differs from the session's seed."""
        return self._request("GET", f"{self._path(session_id)}/state" + ("?diff=1" if diff else ""))

    def state_hash(self, session_id: str) -> str:
        """``Environment.state_hash``'s string: ``<server>:<sha256>`` joined with ``|``."""
        return str(self.state(session_id)["state_hash"])

    def server_hashes(self, session_id: str) -> dict[str, str]:
        """``{server: state_hash}`` for the servers the session has called (holds state on)."""
        return {name: s["state_hash"] for name, s in self.state(session_id)["servers"].items() if s["live"]}

    def diff(self, session_id: str) -> dict[str, dict[str, Any]]:
        """``{server: {"tables": {table: {"added", "removed", "changed"}}, "vars": [...]}}`` since the seed."""
        return {name: s["diff"] for name, s in self.state(session_id, diff=True)["servers"].items()}

    def reset(self, session_id: str, *, seed: int | None = None) -> dict[str, Any]:
        """Back to the session's seed (or to ``seed``, which becomes its seed); its new state."""
        return self._request("POST", f"{self._path(session_id)}/reset", {} if seed is None else {"seed": seed})

    def fork(self, session_id: str) -> str:
        """A new session with the same state (a new, server-issued id); its id."""
        return str(self._request("POST", f"{self._path(session_id)}/fork", {})["id"])

    def close(self, session_id: str) -> dict[str, Any]:
        return self._request("DELETE", self._path(session_id))

    def sessions(self) -> dict[str, Any]:
        """``{"servers": {server: {"sessions", "max_sessions", "ttl_s", "seed"}}}``: live counts and bounds."""
        return self._request("GET", "/sessions")

    # -- HTTP --------------------------------------------------------------------------------------
    def _path(self, session_id: str) -> str:
        if not isinstance(session_id, str):
            raise TypeError(f"a session id is a string, got {type(session_id).__name__}")
        return "/sessions/" + urllib.parse.quote(session_id, safe="")

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            kind = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            conn = self._local.conn = kind(self.netloc, timeout=self.timeout)
            self._local.used = False
        return conn

    def close_connection(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        payload = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers)
        if payload is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn = self._connection()
            reused = bool(getattr(self._local, "used", False))
            try:
                conn.request(method, self.base + path, body=payload, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                self.close_connection()
                if reused and attempt == 1:  # the server closed an idle keep-alive connection: once more
                    continue
                raise ControlUnavailable(0, "UNAVAILABLE", "CONNECTION_FAILED", f"{type(exc).__name__}: {exc}") from exc
            except OSError as exc:
                self.close_connection()
                raise ControlUnavailable(0, "UNAVAILABLE", "CONNECTION_FAILED", f"{type(exc).__name__}: {exc}") from exc
            self._local.used = True
            if response.will_close:
                self.close_connection()
            return self._decode(response.status, raw)
        raise AssertionError("unreachable")

    @staticmethod
    def _decode(status: int, raw: bytes) -> dict[str, Any]:
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {"message": raw[:200].decode(errors="replace")}
        if status < 400:
            if not isinstance(data, dict):
                raise ServerFault(status, "INTERNAL", "BAD_RESPONSE", f"expected a JSON object, got {raw[:120]!r}")
            return data
        data = data if isinstance(data, dict) else {"message": str(data)[:200]}
        code = str(data.get("code") or ("UNAUTHENTICATED" if status == 401 else "HTTP_ERROR"))
        reason = str(data.get("reason") or code)
        message = str(data.get("message") or data.get("error") or f"HTTP {status}")
        details = data.get("details") if isinstance(data.get("details"), dict) else {}
        raise _error_class(status, reason)(status, code, reason, message, details)
