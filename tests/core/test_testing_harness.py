"""The test harness for a server's own rules (``prove_core.testing.ServerHarness``), and proof that
its assertions can fail."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from prove_core.env.runtime import ServerRuntime
from prove_core.testing import ServerHarness, make_runtime, servers_registered_by
from prove_core.toolkit import State, Table, ref, require
from prove_core.toolkit.server import Server
from prove_servers import banking


class CounterState(State):
    counters = Table("counter", prefix="ctr")


def build_counters(rng, options) -> CounterState:
    state = CounterState(salt=str(rng.random()))
    for name in ("apples", "pears"):
        state.counters.insert({"name": name, "value": rng.randint(0, 3)})
    return state


server = Server("counters", domain="test", description="Counters for harness tests.", state=CounterState,
                seed=build_counters)
FIRST = [lambda s: {"counter_id": s.counters.first()["id"]}]


@server.tool(read_only=True, reads=["counter"], examples=[{}])
def list_counters(state: CounterState) -> dict:
    """All counters."""
    return {"counters": state.counters.all()}


@server.tool(mutates=["counter"], errors=["LIMIT_REACHED", "NOT_A_REASON_IT_GIVES"], examples=FIRST)
def bump(state: CounterState, counter_id: Annotated[str, ref("counter", "The counter.")],
         by: Annotated[int, Field(ge=1, le=100, description="How much to add.")] = 1) -> dict:
    """Add to a counter; fails with LIMIT_REACHED above 10, before it writes anything."""
    counter = state.counters.get(counter_id)
    require(counter["value"] + by <= 10, "a counter stops at 10", reason="LIMIT_REACHED", limit=10)
    return state.counters.update(counter_id, value=counter["value"] + by)


@server.tool(mutates=["counter"], errors=["LIMIT_REACHED"], examples=FIRST)
def sloppy_bump(state: CounterState, counter_id: Annotated[str, ref("counter", "The counter.")],
                by: Annotated[int, Field(ge=1, le=100, description="How much to add.")] = 1) -> dict:
    """Like bump, but writes first and checks after (the runtime's rollback hides it). Fails with
    LIMIT_REACHED."""
    counter = state.counters.update(counter_id, value=state.counters.get(counter_id)["value"] + by)
    require(counter["value"] <= 10, "a counter stops at 10", reason="LIMIT_REACHED")
    return counter


@server.tool(mutates=["counter"], examples=FIRST)
def touch(state: CounterState, counter_id: Annotated[str, ref("counter", "The counter.")]) -> dict:
    """A writer whose example writes nothing (the value it sets is the one already there)."""
    return state.counters.update(counter_id, value=state.counters.get(counter_id)["value"])


h = ServerHarness.fixture(server)


def counter(h, name: str = "apples") -> dict:
    return h.find("counters", name=name)


# -- sessions, state and entities -------------------------------------------------------------------

SEEN: list[ServerHarness] = []


def test_the_fixture_gives_each_test_a_fresh_session_a(h):
    SEEN.append(h)
    h.ok("bump", counter_id=counter(h)["id"])
    assert h.state_hash() != h.session().state_hash()


def test_the_fixture_gives_each_test_a_fresh_session_b(h):
    SEEN.append(h)
    first, second = SEEN[-2:]
    assert first.runtime is second.runtime and first.sid != second.sid  # the seed is built once
    assert second.state_hash() == second.session().state_hash() != first.state_hash()


def test_a_harness_builds_its_runtime_at_a_seed_with_options():
    runtime = make_runtime(server, seed=4)
    assert isinstance(runtime, ServerRuntime) and runtime.seed == 4
    at_four, at_five = ServerHarness(server, seed=4), ServerHarness(server, seed=5)
    assert at_four.state_hash() == ServerHarness(server, seed=4).state_hash() != at_five.state_hash()
    big = ServerHarness(banking.server, options=banking.BankOptions(customers=2))
    assert len(big.state.customers) == 2
    shared = ServerHarness(server, runtime=runtime, session_id="mine")
    assert shared.runtime is runtime and shared.sid == "mine" and "mine" in runtime


def test_sessions_and_forks_are_isolated(h):
    apples = counter(h)["id"]
    h.ok("bump", counter_id=apples, by=2)
    fork, fresh = h.fork(), h.session()
    assert fork.state_hash() == h.state_hash() != fresh.state_hash()
    fork.ok("bump", counter_id=apples)
    assert (fork.state.counters.get(apples)["value"], h.state.counters.get(apples)["value"]) == (
        fresh.state.counters.get(apples)["value"] + 3, fresh.state.counters.get(apples)["value"] + 2)


def test_find_and_where_look_records_up_in_the_session(h):
    assert counter(h, "pears")["name"] == "pears"
    assert [c["name"] for c in h.where("counters", lambda c: c["value"] >= 0)] == ["apples", "pears"]
    assert h.where("counters", name="plums") == []
    with pytest.raises(LookupError, match="no counters record"):
        h.find("counters", name="plums")


# -- ok and fails ---------------------------------------------------------------------------------


def test_ok_returns_the_data_and_fails_on_an_error(h):
    apples = counter(h)
    assert h.ok("bump", counter_id=apples["id"])["value"] == apples["value"] + 1
    with pytest.raises(AssertionError, match="LIMIT_REACHED"):
        h.ok("bump", counter_id=apples["id"], by=100)


def test_fails_returns_the_typed_error_and_leaves_the_state(h):
    apples = counter(h)["id"]
    before = h.state_hash()
    error = h.fails("bump", "LIMIT_REACHED", "FAILED_PRECONDITION", counter_id=apples, by=11)
    assert error["details"] == {"limit": 10} and h.state_hash() == before


def test_fails_fails_when_the_call_succeeds(h):
    apples = counter(h)["id"]
    before = h.state_hash()
    with pytest.raises(AssertionError, match="should fail with LIMIT_REACHED"):
        h.fails("bump", "LIMIT_REACHED", counter_id=apples, by=1)
    assert h.state_hash() == before  # it found out on a copy: the session did not take the call


def test_fails_fails_when_the_tool_wrote_before_failing(h):
    # The runtime rolls the session back either way; the copy run without rollback shows the write.
    with pytest.raises(AssertionError, match="wrote before failing"):
        h.fails("sloppy_bump", "LIMIT_REACHED", counter_id=counter(h)["id"], by=50)
    with pytest.raises(AssertionError, match="wrote before failing"):  # whatever the reason expected
        h.fails("sloppy_bump", "SOMETHING_ELSE", counter_id=counter(h)["id"], by=50)


def test_fails_fails_on_another_reason_another_code_or_an_undeclared_reason(h):
    apples = counter(h)["id"]
    with pytest.raises(AssertionError, match="expected NOT_A_REASON_IT_GIVES"):
        h.fails("bump", "NOT_A_REASON_IT_GIVES", counter_id=apples, by=11)
    with pytest.raises(AssertionError, match="expected code CONFLICT"):
        h.fails("bump", "LIMIT_REACHED", "CONFLICT", counter_id=apples, by=11)
    with pytest.raises(AssertionError, match="does not declare COUNTER_NOT_FOUND"):
        h.fails("bump", "COUNTER_NOT_FOUND", counter_id="ctr_missing")


def test_fails_accepts_the_runtimes_own_reasons_undeclared(h):
    error = h.fails("bump", "SCHEMA_VIOLATION", "INVALID_ARGUMENT", counter_id=counter(h)["id"], by=0)
    assert error["details"]["field"] == "by"
    h.fails("no_such_tool", "UNKNOWN_TOOL", "UNKNOWN_TOOL")


def test_reason_and_code_are_positional_so_tools_may_take_arguments_of_those_names():
    bank = ServerHarness(banking.server)  # report_card_lost takes an argument called reason
    card = bank.find("cards", status="active")
    error = bank.fails("report_card_lost", "CARD_NOT_OWNED", "PERMISSION_DENIED", reason="stolen",
                       customer_id=bank.find("customers", lambda c: c["id"] != card["customer_id"])["id"],
                       card_id=card["id"])
    assert error["reason"] == "CARD_NOT_OWNED"


# -- examples ---------------------------------------------------------------------------------------


def test_example_args_are_computed_on_the_session(h):
    assert h.examples() == [("list_counters", 0), ("bump", 0), ("sloppy_bump", 0), ("touch", 0)]
    assert h.example_args("bump") == {"counter_id": counter(h)["id"]}
    assert h.example_args("list_counters", 0) == {}
    assert h.run_examples() == 4


def test_write_examples_changing_nothing_are_named(h):
    assert h.write_examples_changing_nothing() == ["touch#0"]


def test_run_examples_fails_on_an_example_that_fails():
    broken = Server("broken", domain="test", description="An example that fails.", state=CounterState,
                    seed=build_counters)
    broken.tool(mutates=["counter"], errors=["LIMIT_REACHED"],
                examples=[lambda s: {"counter_id": s.counters.first()["id"], "by": 50}])(bump)
    with pytest.raises(AssertionError, match="LIMIT_REACHED"):
        ServerHarness(broken).run_examples()


def test_servers_registered_by_a_plugin_module():
    assert servers_registered_by(banking) == [banking.server]


# -- the documented example -------------------------------------------------------------------------


def test_the_example_in_docs_servers_md_runs():
    text = (Path(__file__).parents[2] / "docs" / "servers.md").read_text()
    section = text.split("## Testing your server's own rules", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/servers.md", "exec"), namespace)  # noqa: S102 - our own documentation
    tests = [fn for name, fn in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test(ServerHarness(namespace["server"]))
