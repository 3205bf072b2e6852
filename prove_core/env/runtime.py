"""The session runtime: live sessions of a server and the fast in-process executor.

``ServerRuntime`` holds one server's sessions. ``call(session_id, tool, args)`` is the fast
path synthesis, rewards and rollouts use: look the session up (an id never seen gets a fresh
session from the seed; an id whose session ended gets a typed error instead: SESSION_EXPIRED
when it expired or was evicted, unless the runtime re-creates such ids, SESSION_CLOSED when a
client closed it, SESSION_LOST when its process died), validate the arguments against the
published JSON Schema (a tool that checks its own, ``ToolDef.raw_arguments``, gets them as sent,
unchecked), run the tool atomically (a tool that raises leaves the state as it was), and return a
``ToolResult``. The MCP path calls this same method, so both paths give the same result or the
same error.

``build_runtime`` is the one way the framework makes a runtime: its session settings come from
the experiment's ``[sessions]`` table.

``Environment`` puts several runtimes behind one name space; with more than one server the
tool names get the ``<server>_`` prefix that ``prove serve`` uses when it mounts servers
(``public_name`` is that rule, for every place that names a tool). An environment built with the
plugins' hook relay reports every episode played on it to the lifecycle hooks.
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

import attrs
import fastjsonschema

from prove_core.errors import (
    DeadlineExceeded,
    ErrorCode,
    Internal,
    InvalidArgument,
    NotFound,
    ProveError,
    ResourceExhausted,
    ToolError,
    UnknownTool,
)
from prove_core.toolkit.server import Server, ToolSpec
from prove_core.toolkit.state import Snapshot, State

DEFAULT_TTL_S = 3600.0
DEFAULT_MAX_SESSIONS = 100_000
GONE_IDS_KEPT = 100_000  # ids of expired or evicted sessions a runtime remembers (the newest)
WORKERS = 32  # worker threads of a runtime's acall (calls of an MCP server)


@attrs.frozen
class ToolResult:
    """The outcome of one tool call: ``data`` on success, ``error`` (``{code, reason, message}``)
    on failure. ``structured`` is exactly the MCP ``structuredContent`` of the same call."""

    data: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def is_error(self) -> bool:
        return self.error is not None

    @property
    def structured(self) -> dict[str, Any]:
        return self.error if self.error is not None else self.data  # type: ignore[return-value]  # data is set when error is not

    @property
    def code(self) -> str | None:
        return None if self.error is None else self.error["code"]

    def to_dict(self) -> dict[str, Any]:
        return {"is_error": self.is_error, "content": self.structured}


def invalid_argument(exc: fastjsonschema.JsonSchemaValueException) -> InvalidArgument:
    path = ".".join(str(p) for p in exc.path[1:]) or "(arguments)"
    message = exc.message
    if exc.rule == "additionalProperties" and isinstance(exc.value, dict):
        # fastjsonschema names the extra keys as a set, whose order changes with every process's
        # string hashing (a model reading the error would see other text from run to run); name
        # them sorted, with the keys the tool does take so a caller can correct itself.
        known = (exc.definition or {}).get("properties", {})
        extra = sorted(str(k) for k in exc.value if k not in known)
        where = "" if path == "(arguments)" else f" in {path}"
        message = (f"unknown key{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}{where}; "
                   f"accepted: {', '.join(sorted(known)) or 'none'}")
    message = message.replace("data.", "", 1) if message.startswith("data.") else message
    return InvalidArgument(f"invalid arguments: {message}", reason="SCHEMA_VIOLATION", field=path, rule=exc.rule)


def json_values(schema: dict[str, Any], value: Any, path: str) -> Any:
    """Argument values as tools expect them, after schema validation. What JSON cannot carry but
    Python's parsers let through is refused: NaN and infinities (a NaN passes every bound and
    poisons whatever stores it) and lone surrogates (text that cannot be encoded). A whole float
    given for an integer (JSON Schema's 1.0 is an integer) becomes the int a slice or range() needs."""
    if value.__class__ is float:
        if not math.isfinite(value):
            raise InvalidArgument(f"invalid arguments: {path} must be a finite number", reason="SCHEMA_VIOLATION",
                                  field=path, rule="type")
        return int(value) if schema.get("type") == "integer" else value
    if value.__class__ is str:
        try:
            value.encode()
        except UnicodeEncodeError:
            raise InvalidArgument(f"invalid arguments: {path} is not valid Unicode text (a lone surrogate)",
                                  reason="SCHEMA_VIOLATION", field=path, rule="type") from None
        return value
    if value.__class__ is list:
        items = schema.get("items", {})
        return [json_values(items, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if value.__class__ is dict:
        props = schema.get("properties", {})
        return {k: json_values(props.get(k, {}), v, f"{path}.{k}") for k, v in value.items()}
    return value


def unknown_tool(name: str) -> ToolResult:
    """The typed result of calling a tool that does not exist (same on every path)."""
    return ToolResult(error=UnknownTool(f"no tool named {name!r}", reason="UNKNOWN_TOOL", tool=name).to_dict())


class Session:
    __slots__ = ("id", "state", "seed", "last_used", "lock")

    def __init__(self, session_id: str, state: State, seed: int) -> None:
        self.id = session_id
        self.state = state
        self.seed = seed
        self.last_used = time.monotonic()
        self.lock = threading.Lock()


class Workers:
    """Kept daemon threads (at most ``size``) that run submitted functions: a
    ``concurrent.futures`` executor whose threads never hold up the process's exit (a tool body
    that hangs past its deadline must not keep ``prove serve`` from stopping)."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = 0
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._idle == 0 and self._threads < self.size:
                self._threads += 1
                threading.Thread(target=self._work, name=f"{self.name}-{self._threads}", daemon=True).start()
        self._queue.put((future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            item = self._queue.get()
            with self._lock:
                self._idle -= 1
            if item is None:
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                future.set_exception(exc)

    def shutdown(self, wait: bool = False) -> None:
        """Let the threads end once they are done (``wait`` is accepted for the executor API)."""
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._queue.put(None)


class ServerRuntime:
    """Sessions of one server plus the fast executor.

    Sessions are created from a cached seed snapshot, so creating or resetting one costs the
    same whatever the size of the seed data. Idle sessions expire after ``ttl_s``; at most
    ``max_sessions`` live at once: at the bound expired ones are evicted first, then a new
    session is refused with RESOURCE_EXHAUSTED (``evict_lru``: the least recently used session
    is evicted instead). With ``call_timeout_s`` a call that runs longer gets DEADLINE_EXCEEDED
    and changes nothing.

    No state is lost silently: the id of a session that expired, was evicted, closed or lost is
    remembered (the newest ``GONE_IDS_KEPT``), and any use of it (a call, a read, a fork) gets a
    typed NOT_FOUND error (reason SESSION_EXPIRED, SESSION_CLOSED or SESSION_LOST; the id in its
    details, see ``ended_error``), instead of a fresh session that would look like the old one.
    ``recreate_expired`` restores the old behaviour for expired and evicted ids (they restart from
    the seed). An id the runtime has never seen still gets a fresh session on first use, and
    ``new_session(session_id=...)`` (an explicit open) makes any ended id usable again.
    """

    def __init__(
        self,
        server: Server,
        *,
        seed: int = 0,
        options: Any = None,
        ttl_s: float = DEFAULT_TTL_S,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        evict_lru: bool = False,
        recreate_expired: bool = False,
        call_timeout_s: float | None = None,
    ) -> None:
        check_session_settings(ttl_s=ttl_s, max_sessions=max_sessions, call_timeout_s=call_timeout_s)
        self.server = server
        self.seed = seed
        self.options = options if options is not None else server.options_type()
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self.evict_lru = evict_lru
        self.recreate_expired = recreate_expired
        self.call_timeout_s = call_timeout_s  # None: calls run inline (the fast path's default)
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._gone: dict[str, str] = {}  # gone_key(id) -> why its session ended, oldest first
        self._seed_snapshots: dict[int, Snapshot] = {}
        self._seed_hashing: dict[int, tuple[dict[str, Any], str]] = {}  # seed -> (table texts, hash)
        self._lock = threading.RLock()
        self._last_sweep = time.monotonic()
        self._pools: dict[str, Any] = {}  # kept worker threads (see _pool)
        self.on_open: Callable[[str], None] | None = None  # told each id it opens (a fleet worker's journal)

    def __repr__(self) -> str:
        return f"<ServerRuntime {self.server.name} seed={self.seed} sessions={len(self._sessions)}>"

    @property
    def name(self) -> str:
        return self.server.name

    # -- sessions ------------------------------------------------------------------------------
    def seed_snapshot(self, seed: int | None = None) -> Snapshot:
        seed = self.seed if seed is None else seed
        snap = self._seed_snapshots.get(seed)
        if snap is None:
            snap = self.server.build_state(seed, self.options).snapshot()
            self._seed_snapshots[seed] = snap
        return snap

    def new_session(self, *, seed: int | None = None, snapshot: Snapshot | None = None, session_id: str | None = None) -> str:
        """Start a session from the seed (or from ``snapshot``); returns its unguessable id.

        An explicit ``session_id`` is an explicit start: it replaces a live session of that id and
        makes the id of an expired or evicted one usable again. At the session bound (after the
        expired ones are swept) a new id raises RESOURCE_EXHAUSTED, or evicts the least recently
        used session with ``evict_lru``."""
        seed = self.seed if seed is None else seed
        snap = snapshot if snapshot is not None else self.seed_snapshot(seed)
        # Only a missing id gets a fresh one: "" is a key like any other (``or`` lost it to a KeyError).
        sid = secrets.token_urlsafe(18) if session_id is None else session_id
        if time.monotonic() - self._last_sweep > min(self.ttl_s, 60.0):
            self.evict_expired()
        with self._lock:
            if sid not in self._sessions:  # replacing a live session takes no room
                self._make_room()
            self._gone.pop(gone_key(sid), None)
            self._sessions[sid] = Session(sid, State.from_snapshot(snap), seed)
            self._sessions.move_to_end(sid)
        if self.on_open is not None:
            self.on_open(sid)
        return sid

    def fork(self, session_id: str) -> str:
        """A new session whose state is a copy of this session's current state."""
        source = self.session(session_id)
        with source.lock:  # never copy the half-applied writes of a call in progress
            snapshot = source.state.snapshot()
        return self.new_session(snapshot=snapshot, seed=source.seed)

    def reset(self, session_id: str) -> None:
        session = self.session(session_id)
        with session.lock:
            session.state.restore(self.seed_snapshot(session.seed))

    def close(self, session_id: str) -> None:
        """End a session (the caller's own act). Its id is remembered as closed: a later use gets
        SESSION_CLOSED, never a fresh session that looks like the old one; ``new_session(session_id=
        ...)`` opens it again."""
        with self._lock:
            if self._sessions.pop(session_id, None) is not None or gone_key(session_id) in self._gone:
                self._remember(session_id, "closed")

    def mark_lost(self, session_ids: Iterable[str]) -> None:
        """Remember these ids as lost (their process died with their state): a use gets SESSION_LOST."""
        with self._lock:
            for sid in session_ids:
                if sid not in self._sessions:
                    self._remember(sid, "lost")

    def session(self, session_id: str, *, create: bool = True) -> Session:
        """The live session with this id, used now (it moves to the end of the LRU order).

        An id never seen (or closed) gets a fresh session from the seed (with ``create`` false:
        NOT_FOUND, reason UNKNOWN_SESSION). The id of a session that expired or was evicted
        raises NOT_FOUND with reason SESSION_EXPIRED and the id in its details; with
        ``recreate_expired`` it restarts from the seed instead. Raises RESOURCE_EXHAUSTED when
        a fresh session would pass the bound."""
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.last_used < now - self.ttl_s:
                self._drop(session_id, "expired")
                session = None
            if session is None:
                why = self._gone.get(gone_key(session_id))
                if why is not None:
                    raise self._expired_error(session_id, why)
                if not create:
                    raise NotFound(f"{self.server.name}: no session {_shown(session_id)}", reason="UNKNOWN_SESSION",
                                   session_id=session_id, server=self.server.name)
                self.new_session(session_id=session_id)
                session = self._sessions[session_id]
            else:
                self._sessions.move_to_end(session_id)
            session.last_used = now
            return session

    def gone(self, session_id: str) -> str | None:
        """Why the session with this id ended (``"expired"``: idle past the TTL; ``"evicted"``:
        the least recently used at the session bound; ``"closed"``: a client closed it; ``"lost"``:
        its process died), or None: live or never seen. A
        session past its TTL that no sweep has dropped yet counts as expired."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None:
                return "expired" if session.last_used < time.monotonic() - self.ttl_s else None
            return self._gone.get(gone_key(session_id))

    def _drop(self, session_id: str, why: str) -> None:
        """Drop a live session that ended without its client asking (the lock is held): its id is
        remembered, so a later use is an error rather than a fresh session that looks like it."""
        del self._sessions[session_id]
        if not self.recreate_expired:
            self._remember(session_id, why)

    def _remember(self, session_id: str, why: str) -> None:
        """Keep why this id's session ended (the lock is held; the newest ``GONE_IDS_KEPT`` ids)."""
        key = gone_key(session_id)
        self._gone.pop(key, None)
        self._gone[key] = why
        if len(self._gone) > GONE_IDS_KEPT:
            del self._gone[next(iter(self._gone))]

    def _expired_error(self, session_id: str, why: str) -> NotFound:
        return ended_error(self.server.name, session_id, why, ttl_s=self.ttl_s, max_sessions=self.max_sessions)

    def state(self, session_id: str) -> State:
        return self.session(session_id).state

    def state_hash(self, session_id: str) -> str:
        session = self.session(session_id)
        with session.lock:  # a call in progress is hashed once it has finished or rolled back
            # A session shares every table it has not written with its seed, by identity: those
            # tables' text comes from the seed's, serialized once; a session that changed nothing
            # (every read-only rollout) gets the seed's hash, computed once.
            seed = self._seed_snapshots.get(session.seed)
            if seed is None:
                return session.state.state_hash()
            cached = self._seed_hashing.get(session.seed)
            if cached is None:
                state = State.from_snapshot(seed)
                texts = state.table_texts()
                cached = self._seed_hashing[session.seed] = (texts, state.state_hash(texts))
            texts, seed_hash = cached
            return seed_hash if not session.state.changed_since(seed) else session.state.state_hash(texts)

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def evict_expired(self) -> int:
        """Drop sessions idle for longer than the TTL. Sessions are kept in least-recently-used
        order, so the sweep stops at the first live one: it costs O(expired), not O(sessions)."""
        cutoff = time.monotonic() - self.ttl_s
        self._last_sweep = time.monotonic()
        evicted = 0
        with self._lock:
            while self._sessions:
                sid, oldest = next(iter(self._sessions.items()))
                if oldest.last_used >= cutoff:
                    break
                self._drop(sid, "expired")
                evicted += 1
        return evicted

    def _make_room(self) -> None:
        if len(self._sessions) < self.max_sessions:
            return
        self.evict_expired()  # re-entrant: the caller holds the lock
        if len(self._sessions) < self.max_sessions:
            return
        if not self.evict_lru:
            raise ResourceExhausted(
                f"{self.server.name}: {self.max_sessions} live sessions, the bound; close one, raise max_sessions "
                "or let the least recently used be evicted (evict_lru)",
                reason="TOO_MANY_SESSIONS", max_sessions=self.max_sessions,
            )
        self._drop(next(iter(self._sessions)), "evicted")

    # -- session control (the HTTP control API: prove_core.serve.control) --------------------------
    def live_session(self, session_id: str) -> Session | None:
        """The live session with this id, or None. Unlike ``session`` it never creates one and is
        not a use: reading a session's state neither keeps it alive nor moves it in the LRU order."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None or session.last_used < time.monotonic() - self.ttl_s:
            return None
        return session

    def reset_session(self, session_id: str, *, seed: int | None = None) -> None:
        """Put a session back to its seed's state, or to ``seed``'s (which becomes its seed). A
        session this runtime does not hold is started at that seed: a session that spans several
        mounted servers is reset on each, including those it has not called yet."""
        session = self.live_session(session_id)
        if session is not None:
            snapshot = self.seed_snapshot(session.seed if seed is None else seed)
            with session.lock:  # after any call in progress: never half a call's writes, then the seed
                session.state.restore(snapshot)
                session.seed = session.seed if seed is None else seed
            with self._lock:
                if self._sessions.get(session_id) is session:  # still held: a reset is a use
                    session.last_used = time.monotonic()
                    self._sessions.move_to_end(session_id)
                    return
            seed = session.seed  # evicted meanwhile: start it again, at the seed it was reset to
        self.new_session(session_id=session_id, seed=seed)

    def fork_session(self, session_id: str, new_id: str) -> None:
        """Start session ``new_id`` with a copy of session ``session_id``'s state (forks share the
        seed, so a fork's diff is also against the seed); a source this runtime does not hold
        (a mounted server the session has not called yet) gives a fresh session from the seed."""
        source = self.live_session(session_id)
        if source is None:
            self.new_session(session_id=new_id)
            return
        with source.lock:  # never copy the half-applied writes of a call in progress
            snapshot = source.state.snapshot()
        self.new_session(snapshot=snapshot, seed=source.seed, session_id=new_id)

    def seed_hash(self, seed: int | None = None) -> str:
        """The state hash of a fresh session at ``seed`` (default: the runtime's), computed once."""
        seed = self.seed if seed is None else seed
        cached = self._seed_hashing.get(seed)
        if cached is None:
            state = State.from_snapshot(self.seed_snapshot(seed))
            texts = state.table_texts()
            cached = self._seed_hashing[seed] = (texts, state.state_hash(texts))
        return cached[1]

    def session_report(self, session_id: str, *, diff: bool = False) -> dict[str, Any] | None:
        """``{"seed", "state_hash", "changed"}`` of a live session (``None`` if this runtime holds
        none with this id) and, with ``diff``, ``"diff"``: what differs from its seed, per table
        (``{table: {"added", "removed", "changed"}}``, sorted record ids; unchanged tables left
        out) and which variables (the clock ticks once per call that wrote)."""
        session = self.live_session(session_id)
        if session is None:
            return None
        seed_hash = self.seed_hash(session.seed)  # fills the seed's table texts the hash reuses
        seed = self.seed_snapshot(session.seed)
        with session.lock:  # a call in progress is seen once it has finished or rolled back
            now = session.state.snapshot()
        state = State.from_snapshot(now)
        changed = state.changed_since(seed)
        report: dict[str, Any] = {"seed": session.seed, "changed": changed,
                                  "state_hash": state.state_hash(self._seed_hashing[session.seed][0])
                                  if changed else seed_hash}
        if diff:
            report["diff"] = snapshot_diff(seed, now)
        return report

    # -- the fast path -----------------------------------------------------------------------
    def specs(self) -> list[ToolSpec]:
        return self.server.specs()

    def call(self, session_id: str, tool: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        """Run one tool call on one session; never raises for anything the call itself did."""
        prepared = self._prepare(session_id, tool, arguments)
        if isinstance(prepared, ToolResult):
            return prepared
        session, tool_def, args = prepared
        return self._locked(session, tool, tool_def, args)

    def _prepare(self, session_id: str, tool: str,
                 arguments: dict[str, Any] | None) -> ToolResult | tuple[Session, Any, dict[str, Any]]:
        """A call checked before it runs: ``(session, tool, validated arguments)``, or the typed
        error result (an unknown tool, arguments the schema rejects, an ended session)."""
        tool_def = self.server.tools.get(tool)
        if tool_def is None:
            return unknown_tool(tool)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            err = InvalidArgument("arguments must be a JSON object", reason="SCHEMA_VIOLATION")
            return ToolResult(error=err.to_dict())
        if tool_def.raw_arguments:  # the tool checks them itself, as its own benchmark does
            return self._with_session(session_id, tool_def, dict(arguments))
        try:
            args = tool_def.validate(dict(arguments))
            properties = tool_def.spec.parameters["properties"]
            for key, value in args.items():
                if value.__class__ in (float, list, dict) or (value.__class__ is str and not value.isascii()):
                    args[key] = json_values(properties.get(key, {}), value, key)
        except fastjsonschema.JsonSchemaValueException as exc:
            return ToolResult(error=invalid_argument(exc).to_dict())
        except InvalidArgument as exc:
            return ToolResult(error=exc.to_dict())
        except (ValueError, TypeError, OverflowError) as exc:  # the validator chokes (a NaN in a multipleOf)
            err = InvalidArgument(f"invalid arguments: {exc}", reason="SCHEMA_VIOLATION", field="(arguments)")
            return ToolResult(error=err.to_dict())
        return self._with_session(session_id, tool_def, args)

    def _with_session(self, session_id: str, tool_def: Any,
                      args: dict[str, Any]) -> ToolResult | tuple[Session, Any, dict[str, Any]]:
        try:
            session = self.session(session_id)
        except ToolError as exc:  # SESSION_EXPIRED, or RESOURCE_EXHAUSTED at the bound with evict_lru off
            return ToolResult(error=exc.to_dict())
        return session, tool_def, args

    async def acall(self, session_id: str, tool: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        """``call`` from an asyncio event loop (the MCP servers), with the same result: checks run
        on the loop (microseconds), the tool body in one of the runtime's kept worker threads on a
        copy of the state, so a slow tool (up to its deadline) never stalls the loop that serves
        every other session; the loop keeps the deadline and commits the copy, as ``call`` does
        with a deadline. A session busy with another call is left to a worker that waits for it
        (the loop never blocks on a session's lock)."""
        import asyncio

        loop = asyncio.get_running_loop()
        prepared = self._prepare(session_id, tool, arguments)
        if isinstance(prepared, ToolResult):
            return prepared
        session, tool_def, args = prepared
        if not session.lock.acquire(blocking=False):
            return await loop.run_in_executor(self._pool("_workers"), self._locked, session, tool, tool_def, args)
        try:
            before = session.state.snapshot()
            work = State.from_snapshot(before)
            future = asyncio.wrap_future(self._pool("_bodies").submit(_run_body, tool_def.fn, work, args))
            try:
                data, failure = await asyncio.wait_for(asyncio.shield(future), self.call_timeout_s)
            except TimeoutError:
                self._retire("_bodies")
                data, failure = None, self._deadline(tool)
            return self._finish(session.state, before, work, tool, data, failure)
        finally:
            session.lock.release()

    def _locked(self, session: Session, tool: str, tool_def: Any, args: dict[str, Any]) -> ToolResult:
        """A checked call run with its session's lock held (waiting for the call before it)."""
        with session.lock:
            return self._execute(session, tool, tool_def, args)

    def _deadline(self, tool: str) -> DeadlineExceeded:
        return DeadlineExceeded(f"{self.server.name}.{tool} did not finish within {self.call_timeout_s} s; "
                                "nothing was changed", reason="CALL_TIMEOUT", timeout_s=self.call_timeout_s)

    def _pool(self, which: str) -> Any:
        """A kept pool of threads: ``_workers`` (``acall``) or ``_bodies`` (tool bodies under a
        deadline), created on first use."""
        with self._lock:
            pool = self._pools.get(which)
            if pool is None:
                pool = self._pools[which] = Workers(f"prove-{self.server.name}{which}", WORKERS)
            return pool

    def _retire(self, which: str) -> None:
        """A fresh pool from now on (after a body overran: its thread must not hold a slot the next
        calls need); the old pool's threads end when their calls do."""
        with self._lock:
            pool = self._pools.pop(which, None)
        if pool is not None:
            pool.shutdown(wait=False)

    def _execute(self, session: Session, tool: str, tool_def: Any, args: dict[str, Any]) -> ToolResult:
        """Run one validated call atomically: the one run/rollback/clock path of the executor.

        The tool body runs on ``work``: the session's own state inline (the fast path's default),
        or a private copy in a worker thread when ``call_timeout_s`` is set (see ``_body``). A
        rejected or crashing call changes nothing: inline, the state is restored from the
        snapshot taken before; with a deadline the copy is simply dropped. A call that succeeds
        ticks the session clock once if it changed something, so timestamps order events while an
        idempotent repeat leaves the state hash alone; a copy is then committed to the session.
        """
        state = session.state
        before = state.snapshot()
        work = state if self.call_timeout_s is None else State.from_snapshot(before)
        try:
            data, failure = self._body(tool, tool_def, work, args)
        except BaseException:  # a real Ctrl-C: stop, with the call rolled back
            if work is state:
                state.restore(before)
            raise
        return self._finish(state, before, work, tool, data, failure)

    def _finish(self, state: State, before: Snapshot, work: State, tool: str, data: Any,
                failure: BaseException | None) -> ToolResult:
        """The end of a call (the session's lock held): a failure changes nothing (``work`` is the
        session's own state restored, or a copy dropped); a success ticks the clock once if it
        changed something and commits a copy."""
        if failure is not None:
            if work is state:
                state.restore(before)
            if isinstance(failure, ToolError):  # a rejected call (DEADLINE_EXCEEDED included)
                return ToolResult(error=failure.to_dict())
            return self._crashed(tool, failure)
        if work.changed_since(before):
            work.advance_clock()
            if work is not state:
                state.restore(work.snapshot())
        return ToolResult(data=data if isinstance(data, dict) else {"result": data})

    def _body(self, tool: str, tool_def: Any, work: State, args: dict[str, Any]) -> tuple[Any, BaseException | None]:
        """The tool body on ``work``: ``(data, None)``, or ``(None, what it raised)``. Inline a bug
        in a tool (even ``sys.exit``) is returned, not raised, so it cannot take the server down;
        only a real Ctrl-C (KeyboardInterrupt in the main thread) propagates. With a deadline the
        body runs in a daemon thread; a call that overruns gets DEADLINE_EXCEEDED and the thread may
        run on, but only ever on its abandoned copy."""
        if self.call_timeout_s is None:
            try:
                return tool_def.fn(work, **args), None
            except BaseException as exc:  # noqa: BLE001 - returned to _execute
                if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                    raise
                return None, exc
        from concurrent.futures import TimeoutError as FutureTimeout

        future = self._pool("_bodies").submit(_run_body, tool_def.fn, work, args)  # a kept thread, not one per call
        try:
            return future.result(timeout=self.call_timeout_s)  # type: ignore[no-any-return]
        except FutureTimeout:
            self._retire("_bodies")
            return None, self._deadline(tool)

    def _crashed(self, tool: str, exc: BaseException) -> ToolResult:
        err = Internal(f"{self.server.name}.{tool} failed: {type(exc).__name__}: {exc}", reason="TOOL_CRASHED")
        return ToolResult(error=err.to_dict())


def _run_body(fn: Any, work: State, args: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """A tool body in a worker thread: ``(data, None)`` or ``(None, what it raised)``; nothing it
    raises (a bug, ``sys.exit``) escapes the worker."""
    try:
        return fn(work, **args), None
    except BaseException as exc:  # noqa: BLE001 - returned to the caller
        return None, exc


def snapshot_diff(base: Snapshot, now: Snapshot) -> dict[str, Any]:
    """What differs between two snapshots of one server's state: ``{"tables": {table: {"added",
    "removed", "changed"}}, "vars": [...]}``, record ids and variable names sorted; tables that did
    not change are left out. A table both share by identity (one nobody wrote) costs nothing;
    records nobody wrote are the same objects in both, so a written table costs one pass of ids."""
    tables: dict[str, dict[str, list[str]]] = {}
    for name in now.state_type._table_specs:
        if base.tables.get(name) is now.tables.get(name):
            continue
        empty: dict[str, Any] = {}
        old: Any = base.tables.get(name, empty)
        new: Any = now.tables.get(name, empty)
        added = sorted(k for k in new if k not in old)
        removed = sorted(k for k in old if k not in new)
        changed = sorted(k for k in new if k in old and new[k] is not old[k] and new[k] != old[k])
        if added or removed or changed:
            tables[name] = {"added": added, "removed": removed, "changed": changed}
    names = set(base.vars.keys()) | set(now.vars.keys())
    missing = object()
    variables = sorted(str(n) for n in names if base.vars.get(n, missing) != now.vars.get(n, missing))
    return {"tables": tables, "vars": variables}


ENDED_REASONS = {"expired": "SESSION_EXPIRED", "evicted": "SESSION_EXPIRED", "closed": "SESSION_CLOSED",
                 "lost": "SESSION_LOST"}


def ended_error(server: str, session_id: str, why: str, *, ttl_s: float | None = None,
                max_sessions: int | None = None) -> NotFound:
    """The typed NOT_FOUND for a use of an id whose session ended: SESSION_EXPIRED (idle past the
    TTL, or evicted at the bound), SESSION_CLOSED (deleted by a client) or SESSION_LOST (its
    process died); ``details``: the id, the server and ``cause`` (why)."""
    shown = _shown(session_id)
    if why == "closed":
        message = (f"{server}: session {shown} was closed; open it again explicitly (POST /sessions with "
                   '{"id": ...}) or use a new id')
    elif why == "lost":
        message = (f"{server}: session {shown} was lost with the process that held it (it stopped and was "
                   "restarted empty); start a new session, or open this id again explicitly")
    else:
        ttl = "its" if ttl_s is None else f"the {ttl_s:g} s"
        bound = "the" if max_sessions is None else f"{max_sessions}"
        cause = (f"idle for more than {ttl} TTL" if why == "expired" else
                 f"evicted as the least recently used of {bound} live sessions")
        message = f"{server}: session {shown} expired ({cause}) and its state is gone; start a new session"
    return NotFound(message, reason=ENDED_REASONS.get(why, "SESSION_EXPIRED"), session_id=session_id, server=server,
                    cause=why)


def gone_key(session_id: str) -> str:
    """The key an ended session's id is remembered under: the id itself, or a digest of a long one
    (the memory of ``GONE_IDS_KEPT`` ids stays bounded whatever ids clients send)."""
    if len(session_id) <= 128:
        return session_id
    return "sha256:" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


def _shown(session_id: str) -> str:
    return repr(session_id if len(session_id) <= 80 else session_id[:77] + "...")


def check_session_settings(*, ttl_s: float, max_sessions: int, call_timeout_s: float | None) -> None:
    """Raise ValueError unless the session settings can work: a finite TTL above 0, a bound of at
    least one session, a per-call deadline that is None or a finite number above 0."""
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or not math.isfinite(ttl_s) or ttl_s <= 0:
        raise ValueError(f"the session TTL must be a finite number of seconds above 0, got {ttl_s!r}")
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ValueError(f"max_sessions must be a whole number of at least 1, got {max_sessions!r}")
    if call_timeout_s is not None and (isinstance(call_timeout_s, bool) or not isinstance(call_timeout_s, (int, float))
                                       or not math.isfinite(call_timeout_s) or call_timeout_s <= 0):
        raise ValueError(f"the call timeout must be a finite number of seconds above 0 (or none), got {call_timeout_s!r}")


def public_name(server: str, tool: str, *, prefixed: bool) -> str:
    """The name a tool is published under: ``<server>_<tool>`` when several servers share one name
    space (``prove serve a b`` mounts each server under its own name, an ``Environment`` of
    several servers routes the same names), else the tool's own name. Every place that names a
    tool to a model or an MCP client goes through this function (``published_names`` for a whole
    name space: it refuses two tools that would get one name)."""
    return f"{server}_{tool}" if prefixed else tool


class ToolNameCollision(ProveError, ValueError):
    """Two tools of the servers put in one name space would be published under one name."""


def published_names(tools: Iterable[tuple[str, str]], *, prefixed: bool) -> dict[str, tuple[str, str]]:
    """Public name -> (server, tool) for every ``(server, tool)`` of one name space, by
    ``public_name``. Prefixes can collide (server ``a`` with tool ``b_c`` and server ``a_b`` with
    tool ``c`` are both ``a_b_c``): that raises ToolNameCollision naming both tools, since one
    would hide the other."""
    names: dict[str, tuple[str, str]] = {}
    for server, tool in tools:
        public = public_name(server, tool, prefixed=prefixed)
        other = names.get(public)
        if other is not None:
            raise ToolNameCollision(f"tools {other[0]}.{other[1]} and {server}.{tool} would both be published as "
                                    f"{public!r}; serve these servers separately, or leave one of the tools out")
        names[public] = (server, tool)
    return names


def build_runtime(server: Server, *, seed: int = 0, options: Any = None, sessions: Any = None) -> ServerRuntime:
    """The one way the framework builds a ``ServerRuntime``: its session settings (idle TTL,
    session bound, per-call deadline) come from ``sessions``, the experiment's ``[sessions]``
    table (a ``prove_core.config.SessionsConfig``; ``None``: that table's defaults)."""
    if sessions is None:
        from prove_core.config import SessionsConfig

        sessions = SessionsConfig()
    return ServerRuntime(server, seed=seed, options=options, ttl_s=sessions.ttl_s, max_sessions=sessions.max_sessions,
                         evict_lru=sessions.evict_lru, recreate_expired=sessions.recreate_expired,
                         call_timeout_s=sessions.call_timeout_s)


class Environment:
    """One or several server runtimes behind one tool name space (prefixed when several).

    ``hooks`` is the plugin manager's hook relay (``Plugins.hook``): every episode played on the
    environment (a rollout, a synthesis replay, a scripted episode) reports its start and end to
    the plugins implementing ``prove_episode_start`` / ``prove_episode_end``.
    """

    def __init__(self, runtimes: Iterable[ServerRuntime], *, hooks: Any = None) -> None:
        self.runtimes = {rt.name: rt for rt in runtimes}
        if not self.runtimes:
            raise ValueError("an environment needs at least one server")
        self.prefixed = len(self.runtimes) > 1
        self.hooks = hooks
        names = published_names(((rt.name, name) for rt in self.runtimes.values() for name in rt.server.tools),
                                prefixed=self.prefixed)  # ToolNameCollision when two would share a name
        self._routes: dict[str, tuple[ServerRuntime, str]] = {
            public: (self.runtimes[server], tool) for public, (server, tool) in names.items()}

    def route(self, public: str) -> tuple[ServerRuntime, str]:
        """The runtime serving a public tool name, and the tool's own name there."""
        try:
            return self._routes[public]
        except KeyError:
            raise KeyError(f"no tool named {public!r}") from None

    def server_of(self, public: str) -> str:
        return self.route(public)[0].name

    def public_name(self, server: str, tool: str) -> str:
        return public_name(server, tool, prefixed=self.prefixed)

    def specs(self) -> list[ToolSpec]:
        out = []
        for rt in self.runtimes.values():
            for spec in rt.specs():
                out.append(attrs.evolve(spec, name=self.public_name(rt.name, spec.name)))
        return out

    def new_session(self, session_id: str | None = None) -> str:
        # Only a missing id gets a fresh one: "" is an id like any other (as in ServerRuntime).
        sid = secrets.token_urlsafe(18) if session_id is None else session_id
        started: list[ServerRuntime] = []
        try:
            for rt in self.runtimes.values():
                rt.new_session(session_id=sid)
                started.append(rt)
        except BaseException:  # one server at its bound: no half-opened session on the others
            for rt in started:
                rt.close(sid)
            raise
        return sid

    def close(self, session_id: str) -> None:
        for rt in self.runtimes.values():
            rt.close(session_id)

    def state_hash(self, session_id: str) -> str:
        return "|".join(f"{n}:{rt.state_hash(session_id)}" for n, rt in sorted(self.runtimes.items()))

    def call(self, session_id: str, tool: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        route = self._routes.get(tool)
        if route is None:
            return unknown_tool(tool)
        runtime, name = route
        return runtime.call(session_id, name, arguments)

    # -- lifecycle hooks ---------------------------------------------------------------------------
    @property
    def server(self) -> str:
        """The ``server`` argument of the lifecycle hooks: the server's name, or the names of the
        mounted servers joined with commas, sorted."""
        return ",".join(sorted(self.runtimes))

    def _lifecycle(self, name: str) -> Any:
        """The hook caller ``name`` when a plugin implements it, else ``None`` (so an episode costs
        one attribute lookup and a list check when nobody listens)."""
        caller = getattr(self.hooks, name, None) if self.hooks is not None else None
        return caller if caller is not None and caller.get_hookimpls() else None

    def episode_start(self, session_id: str, task: Any) -> None:
        """Fire ``prove_episode_start`` for an episode on ``session_id`` (already open)."""
        caller = self._lifecycle("prove_episode_start")
        if caller is not None:
            caller(server=self.server, session_id=session_id, task=task)

    def episode_end(self, session_id: str, task: Any, result: Any) -> None:
        """Fire ``prove_episode_end`` with the episode's result (its session is still open)."""
        caller = self._lifecycle("prove_episode_end")
        if caller is not None:
            caller(server=self.server, session_id=session_id, task=task, result=result)


class Environments:
    """``environments(task)``: an ``Environment`` of the task's servers at the task's seed (with the
    experiment's seed options), cached; each rollout opens its own session on it. Runtimes are
    built by ``build_runtime`` with ``sessions`` (the experiment's ``[sessions]``); ``hooks`` is
    the plugin hook relay the environments report episodes to."""

    def __init__(self, registry: Any, options: dict[str, Any] | None = None, *, sessions: Any = None,
                 hooks: Any = None) -> None:
        self.registry = registry
        self.options = options or {}
        self.sessions = sessions
        self.hooks = hooks
        self._cache: dict[tuple[tuple[str, ...], int, str], Environment] = {}
        self._lock = threading.Lock()

    def __call__(self, task: Any) -> Environment:
        recorded = (getattr(task, "meta", None) or {}).get("seed_options")
        key = (tuple(task.servers), task.seed, json.dumps(recorded, sort_keys=True, default=str) if recorded else "")
        with self._lock:
            env = self._cache.get(key)
            if env is None:
                env = self._cache[key] = Environment([
                    build_runtime(server, seed=task.seed, options=self._options(task, name, server),
                                  sessions=self.sessions)
                    for name, server in ((n, self.registry.load("servers", n)) for n in task.servers)
                ], hooks=self.hooks)
        return env

    def _options(self, task: Any, name: str, server: Any) -> Any:
        """The seed options the task was made with (recorded in its meta), else the experiment's."""
        recorded = (getattr(task, "meta", None) or {}).get("seed_options", {}).get(name)
        if recorded is not None and attrs.has(server.options_type):
            from prove_core.config import structure  # the options class's own checks and nesting

            return structure(recorded, server.options_type, path=f"$.task.meta.seed_options.{name}")
        return self.options.get(name)


def example_at(tool: Any, runtime: ServerRuntime, session_id: str, index: int) -> dict[str, Any]:
    """The arguments of example ``index`` of ``tool`` (a ``ToolDef``) for this session. A callable
    example computes them from the session's state and may prepare that state (e.g. create the
    loan a renewal needs), so the arguments are only valid on the session they were computed on."""
    example = tool.examples[index]
    return dict(example(runtime.state(session_id)) if callable(example) else example)


__all__ = ["Environment", "Environments", "ErrorCode", "ServerRuntime", "Session", "ToolNameCollision", "ToolResult",
           "build_runtime", "check_session_settings", "example_at", "public_name", "published_names"]
