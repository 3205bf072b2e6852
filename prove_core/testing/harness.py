"""A test harness for a server's own rules: call its tools on a session and assert outcomes.

The conformance kit (``ServerConformance``, ``prove audit``) checks what every server must
guarantee — valid schemas, working examples, typed rejection of bad calls, determinism, reset,
isolation, truthful annotations, the MCP path. What is left to test is a server's *own* business
rules: which calls fail in which state, what a tool computes, which records a call touches.
``ServerHarness`` makes those tests short::

    from prove_core.testing import ServerHarness
    from my_pkg.library import server

    h = ServerHarness.fixture(server)     # a pytest fixture: a fresh session for every test

    def test_the_last_copy_cannot_be_lent_twice(h):
        book = h.find("books", lambda b: b["available"] == 1)    # an entity of the seed state
        loan = h.ok("borrow_book", book_id=book["id"])            # succeeds; returns its data
        assert loan["book_id"] == book["id"]
        h.fails("borrow_book", "NO_COPY_AVAILABLE", "FAILED_PRECONDITION", book_id=book["id"])

The expected reason and code are positional (a tool may take arguments named ``reason`` or
``code``); everything after them is the call's arguments.

``fails`` asserts more than the reason: the tool declares it, the session's state is unchanged
after the call, and the tool itself wrote nothing before it raised (it is run once more on a copy
of the state, without the runtime's rollback) — so a refused call never half-happens.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from prove_core.env.runtime import ServerRuntime, ToolResult, build_runtime
from prove_core.toolkit.server import Server, ToolDef
from prove_core.toolkit.state import State

#: Reasons the runtime gives before or instead of running a tool (no tool declares them).
RUNTIME_REASONS = frozenset({"SCHEMA_VIOLATION", "UNKNOWN_TOOL", "TOO_MANY_SESSIONS", "CALL_TIMEOUT",
                             "TOOL_CRASHED", "BAD_SESSION_ID", "SESSION_EXPIRED", "UNKNOWN_SESSION"})


def make_runtime(server: Server, *, seed: int = 0, options: Any = None) -> ServerRuntime:
    """The runtime a harness calls tools through, built the framework's way with the default
    session settings (the one place a harness builds one)."""
    return build_runtime(server, seed=seed, options=options)


def _check(condition: bool, message: str) -> None:
    """An assertion that holds under ``python -O`` too (this module is not rewritten by pytest)."""
    if not condition:
        raise AssertionError(message)


def servers_registered_by(module: ModuleType) -> list[Server]:
    """The servers ``module`` registers through its ``prove_register_servers`` plugin hook."""
    import pluggy

    from prove_core.plugin import hookspecs

    manager = pluggy.PluginManager("prove")
    manager.add_hookspecs(hookspecs)
    manager.register(module)
    registered: list[Server] = []
    manager.hook.prove_register_servers(register=registered.append)
    return registered


class ServerHarness:
    """One session of a server under test, with assertions for calling its tools.

    ``ServerHarness(server, seed=0, options=None)`` builds a runtime for the server (its seed
    state built with ``options``) and starts a session on it; with ``runtime`` and
    ``session_id`` it uses those (an id the runtime does not know gets a fresh session).
    ``session()`` starts another session on the same runtime (the seed is built once).
    ``state`` is the session's live state: read it to find entities, or write it to arrange a
    test (writes are not tool calls).
    """

    def __init__(self, server: Server, *, seed: int = 0, options: Any = None,
                 runtime: ServerRuntime | None = None, session_id: str | None = None) -> None:
        self.server = server
        self.runtime = runtime if runtime is not None else make_runtime(server, seed=seed, options=options)
        self.sid = session_id if session_id is not None else self.runtime.new_session()
        self.runtime.session(self.sid)  # an id the runtime does not know gets a fresh session now

    def __repr__(self) -> str:
        return f"<ServerHarness {self.server.name} seed={self.runtime.seed} session={self.sid[:8]}>"

    @classmethod
    def fixture(cls, server: Server, *, seed: int = 0, options: Any = None, name: str = "h") -> Any:
        """A pytest fixture named ``name`` giving each test a harness on a fresh session. The
        runtime (and its seed state) is built once, on first use, and shared by those tests."""
        import pytest

        shared: list[ServerHarness] = []

        def harness() -> ServerHarness:
            if not shared:
                shared.append(cls(server, seed=seed, options=options))
                return shared[0]
            return shared[0].session()

        harness.__name__ = name
        harness.__doc__ = f"A fresh session of the {server.name} server (seed {seed})."
        return pytest.fixture(name=name)(harness)

    # -- sessions and state ---------------------------------------------------------------------
    def session(self) -> ServerHarness:
        """A harness on a fresh session of the same runtime (same seed and options)."""
        return type(self)(self.server, runtime=self.runtime)

    def fork(self) -> ServerHarness:
        """A harness on a new session holding a copy of this session's current state."""
        return type(self)(self.server, runtime=self.runtime, session_id=self.runtime.fork(self.sid))

    @property
    def tools(self) -> dict[str, ToolDef]:
        return self.server.tools

    @property
    def state(self) -> State:
        """The session's live state (the server's ``State`` subclass, with its tables)."""
        return self.runtime.state(self.sid)

    def state_hash(self) -> str:
        return self.runtime.state_hash(self.sid)

    def find(self, table: str, predicate: Callable[[dict[str, Any]], bool] | None = None,
             **equals: Any) -> dict[str, Any]:
        """The first record of ``table`` (a ``Table`` attribute name, e.g. ``"accounts"``) that
        matches ``predicate`` and ``equals``, in insertion order; ``LookupError`` when none does."""
        found: dict[str, Any] | None = getattr(self.state, table).first(predicate, **equals)
        if found is None:
            raise LookupError(f"{self.server.name}: no {table} record matches {equals or ''}"
                              f"{' and the predicate' if predicate else ''}")
        return found

    def where(self, table: str, predicate: Callable[[dict[str, Any]], bool] | None = None,
              **equals: Any) -> list[dict[str, Any]]:
        """Every record of ``table`` that matches (possibly none)."""
        found: list[dict[str, Any]] = getattr(self.state, table).where(predicate, **equals)
        return found

    # -- calls ----------------------------------------------------------------------------------
    def call(self, tool: str, args: Any = None) -> ToolResult:
        """Call ``tool`` with ``args`` (any value, passed on as is) and return the raw result."""
        return self.runtime.call(self.sid, tool, args)

    def ok(self, tool: str, /, **args: Any) -> dict[str, Any]:
        """Call ``tool``, assert it succeeded and return its data."""
        result = self.runtime.call(self.sid, tool, args)
        if result.data is None:
            raise AssertionError(f"{self.server.name}.{tool} failed: {result.error}")
        return result.data

    def fails(self, tool: str, reason: str, code: str | None = None, /, **args: Any) -> dict[str, Any]:
        """Call ``tool`` and assert it fails with ``reason`` (and ``code``, when given); return the
        error (``{code, reason, message, details}``).

        Also asserts that the tool declares ``reason`` in ``errors=[...]``, that the session's
        state is unchanged, and that the tool raised before writing anything: it is first run on
        a copy of the state without the runtime's rollback, which must be left as it was. (The
        expected reason and code are positional, so a tool argument may be called ``reason`` or
        ``code``.)"""
        where = f"{self.server.name}.{tool}"
        tool_def = self.tools.get(tool)
        before = self.state_hash()
        if tool_def is not None:
            try:
                validated = tool_def.validate(dict(args))
            except Exception:  # noqa: BLE001 - rejected before the tool runs: nothing to probe
                validated = None
            if validated is not None:
                probe = State.from_snapshot(self.state.snapshot())
                try:
                    data = tool_def.fn(probe, **validated)
                except Exception:  # noqa: BLE001 - a typed error (or a crash, which the call reports)
                    pass
                else:
                    raise AssertionError(f"{where} should fail with {reason}, returned {data}")
                _check(probe.state_hash() == before, f"{where} wrote before failing with {reason}")
        result = self.runtime.call(self.sid, tool, args)
        error = result.error
        if error is None:
            raise AssertionError(f"{where} should fail with {reason}, returned {result.data}")
        _check(error["reason"] == reason, f"{where}: expected {reason}, got {error}")
        if code is not None:
            _check(error["code"] == code, f"{where}: expected code {code}, got {error}")
        if reason not in RUNTIME_REASONS:
            _check(tool_def is not None and reason in tool_def.spec.errors, f"{where} does not declare {reason}")
        _check(self.state_hash() == before, f"{where} changed the state although it failed")
        return error

    # -- examples -------------------------------------------------------------------------------
    def example_args(self, tool: str, index: int = 0) -> dict[str, Any]:
        """The arguments of ``tool``'s example ``index`` computed on this session (a callable
        example may prepare the session's state)."""
        example = self.tools[tool].examples[index]
        return dict(example(self.state) if callable(example) else example)

    def examples(self) -> list[tuple[str, int]]:
        """``(tool, index)`` of every example of every tool, in the order the tools were registered."""
        return [(name, i) for name, tool in self.tools.items() for i in range(len(tool.examples))]

    def run_examples(self) -> int:
        """Run every example of every tool on its own fresh session of this runtime and assert
        each succeeds (e.g. on a runtime built with larger seed options); returns how many ran."""
        ran = 0
        for name, index in self.examples():
            fresh = self.session()
            fresh.ok(name, **fresh.example_args(name, index))
            ran += 1
        return ran

    def write_examples_changing_nothing(self) -> list[str]:
        """``tool#index`` of every example of a tool not marked read-only that, run on a fresh
        session, leaves the state as it was (an example that shows no write exercises nothing
        the reset and isolation checks look at). Empty when every write example writes."""
        idle = []
        for name, index in self.examples():
            if self.tools[name].spec.annotations.read_only:
                continue
            fresh = self.session()
            args = fresh.example_args(name, index)
            before = fresh.state_hash()
            fresh.ok(name, **args)
            if fresh.state_hash() == before:
                idle.append(f"{name}#{index}")
        return idle
