import copy
import time

import pytest

from prove_core.env.runtime import Environment, ServerRuntime
from prove_core.errors import NotFound, ResourceExhausted
from tests.support.toy import server


@pytest.fixture()
def rt():
    return ServerRuntime(server)


def first_wallet(rt, sid):
    return rt.state(sid).wallets.first()


def test_call_success_and_clock_ticks_on_write(rt):
    sid = rt.new_session()
    wallet = first_wallet(rt, sid)
    t0 = rt.state(sid).now()
    result = rt.call(sid, "spend", {"wallet_id": wallet["id"], "amount": 1.0})
    assert not result.is_error and result.data["balance"] == round(wallet["balance"] - 1.0, 2)
    assert rt.state(sid).now() > t0
    t1 = rt.state(sid).now()
    rt.call(sid, "list_wallets", {})
    assert rt.state(sid).now() == t1


def test_business_rule_failure_is_typed_and_rolled_back(rt):
    sid = rt.new_session()
    wallet = first_wallet(rt, sid)
    before = rt.state_hash(sid)
    result = rt.call(sid, "spend", {"wallet_id": wallet["id"], "amount": 9999.0})
    assert result.error["code"] == "FAILED_PRECONDITION" and result.error["reason"] == "INSUFFICIENT_FUNDS"
    assert rt.state_hash(sid) == before  # the tool wrote before failing; the write was undone


def test_crashing_tool_is_contained_as_internal_error(rt):
    sid = rt.new_session()
    before = rt.state_hash(sid)
    result = rt.call(sid, "explode", {"wallet_id": first_wallet(rt, sid)["id"]})
    assert result.code == "INTERNAL" and "ZeroDivisionError" in result.error["message"]
    assert rt.state_hash(sid) == before
    assert not rt.call(sid, "list_wallets", {}).is_error  # the session is still usable


@pytest.mark.parametrize(
    "args, field",
    [
        ({"amount": 1.0}, "(arguments)"),
        ({"wallet_id": "x", "amount": "1"}, "amount"),
        ({"wallet_id": "x", "amount": -3}, "amount"),
        ({"wallet_id": "x", "amount": 1.0, "extra": 1}, "(arguments)"),
        ({"wallet_id": 7, "amount": 1.0}, "wallet_id"),
    ],
)
def test_schema_violations_are_invalid_argument(rt, args, field):
    sid = rt.new_session()
    result = rt.call(sid, "spend", args)
    assert result.code == "INVALID_ARGUMENT" and result.error["details"]["field"] == field


def test_unknown_keys_are_named_in_sorted_order(rt):
    """Not in set order, which changes with each process's string hashing: a model reading the
    error would see other text from one run to the next."""
    result = rt.call(rt.new_session(), "spend", {"wallet_id": "x", "amount": 1.0, "zeta": 1, "alpha": 2, "mid": 3})
    assert result.error["message"] == ("invalid arguments: unknown keys 'alpha', 'mid', 'zeta'; "
                                       "accepted: amount, wallet_id")


def test_enum_is_enforced(rt):
    assert rt.call("s", "list_wallets", {"kind": "secret"}).code == "INVALID_ARGUMENT"
    assert not rt.call("s", "list_wallets", {"kind": "business"}).is_error


def test_unknown_tool_and_non_object_arguments(rt):
    assert rt.call("s", "nope", {}).code == "UNKNOWN_TOOL"
    assert rt.call("s", "spend", ["a"]).code == "INVALID_ARGUMENT"


def test_not_found_is_typed(rt):
    result = rt.call("s", "spend", {"wallet_id": "wal_missing", "amount": 1.0})
    assert result.code == "NOT_FOUND" and result.error["reason"] == "WALLET_NOT_FOUND"


def test_sessions_are_isolated_and_unknown_ids_start_fresh(rt):
    a, b = rt.new_session(), rt.new_session()
    assert a != b and len(a) >= 20  # unguessable: 18 random bytes, url-safe
    wallet = first_wallet(rt, a)
    rt.call(a, "spend", {"wallet_id": wallet["id"], "amount": 1.0})
    assert rt.state_hash(a) != rt.state_hash(b)
    assert rt.state_hash("never-seen") == rt.state_hash(b)


def test_fork_and_reset(rt):
    a = rt.new_session()
    seed_hash = rt.state_hash(a)
    rt.call(a, "spend", {"wallet_id": first_wallet(rt, a)["id"], "amount": 1.0})
    forked = rt.fork(a)
    assert rt.state_hash(forked) == rt.state_hash(a) != seed_hash
    rt.reset(a)
    assert rt.state_hash(a) == seed_hash and rt.state_hash(forked) != seed_hash


def test_seed_per_session(rt):
    assert rt.state_hash(rt.new_session(seed=1)) != rt.state_hash(rt.new_session(seed=2))


def test_idle_sessions_expire():
    rt = ServerRuntime(server, ttl_s=0.05)
    sid = rt.new_session()
    time.sleep(0.1)
    assert rt.evict_expired() == 1 and sid not in rt


def test_session_bound_evicts_least_recently_used_when_asked_to():
    rt = ServerRuntime(server, max_sessions=3, evict_lru=True)
    ids = [rt.new_session() for _ in range(3)]
    rt.session(ids[0])  # touch: ids[1] is now the least recently used
    rt.new_session()
    assert len(rt) == 3 and ids[1] not in rt and ids[0] in rt
    # the evicted id is not started again, on any path: reading it does not evict the next one
    assert rt.call(ids[1], "list_wallets", {}).error["reason"] == "SESSION_EXPIRED"
    with pytest.raises(NotFound) as err:
        rt.state_hash(ids[1])
    assert err.value.details == {"session_id": ids[1], "server": "wallet", "cause": "evicted"}
    assert len(rt) == 3 and ids[0] in rt and ids[2] in rt


def test_session_bound_refuses_a_new_session_by_default():
    rt = ServerRuntime(server, max_sessions=2)
    kept = [rt.new_session(), rt.new_session()]
    with pytest.raises(ResourceExhausted):
        rt.new_session()
    refused = rt.call("a-new-id", "list_wallets", {})
    assert refused.code == "RESOURCE_EXHAUSTED" and refused.error["reason"] == "TOO_MANY_SESSIONS"
    assert all(sid in rt for sid in kept) and "a-new-id" not in rt
    rt.new_session(session_id=kept[0])  # starting a live id again replaces it: no room needed
    rt.close(kept[1])
    assert not rt.call("a-new-id", "list_wallets", {}).is_error  # room again


def test_environment_prefixes_only_with_several_servers():
    single = Environment([ServerRuntime(server)])
    assert "spend" in {s.name for s in single.specs()}
    other = copy.copy(server)  # the same tools under a second server name
    other.name = "wallet2"
    env = Environment([ServerRuntime(server), ServerRuntime(other)])
    names = {s.name for s in env.specs()}
    assert {"wallet_spend", "wallet2_spend"} <= names
    sid = env.new_session()
    wallet = env.runtimes["wallet"].state(sid).wallets.first()
    assert not env.call(sid, "wallet_spend", {"wallet_id": wallet["id"], "amount": 1.0}).is_error
    assert env.call(sid, "spend", {}).code == "UNKNOWN_TOOL"


def test_an_expired_session_is_a_typed_error_not_a_fresh_session():
    rt = ServerRuntime(server, ttl_s=0.5)  # long enough that a busy machine does not expire it early
    sid = rt.new_session()
    rt.call(sid, "spend", {"wallet_id": first_wallet(rt, sid)["id"], "amount": 1.0})
    time.sleep(0.6)
    expired = rt.call(sid, "list_wallets", {})
    assert expired.code == "NOT_FOUND" and expired.error["reason"] == "SESSION_EXPIRED"
    assert expired.error["details"] == {"session_id": sid, "server": "wallet", "cause": "expired"}
    assert "0.5 s TTL" in expired.error["message"]
    for read in (rt.state_hash, rt.state, rt.fork, rt.reset):  # no read starts it again either
        with pytest.raises(NotFound):
            read(sid)
    assert sid not in rt and rt.gone(sid) == "expired"
    never_seen = rt.call("never-seen", "list_wallets", {})  # a new id is no loss: a fresh session
    assert not never_seen.is_error and "never-seen" in rt and rt.gone("never-seen") is None
    with pytest.raises(NotFound) as err:
        rt.session("another-new-id", create=False)
    assert err.value.reason == "UNKNOWN_SESSION" and "another-new-id" not in rt
    rt.new_session(session_id=sid)  # an explicit start makes the id usable again, from the seed
    assert not rt.call(sid, "list_wallets", {}).is_error and rt.gone(sid) is None


def test_an_expired_session_restarts_from_the_seed_when_asked_to_and_sweeps_happen_without_pressure():
    rt = ServerRuntime(server, ttl_s=0.5, recreate_expired=True)
    sid = rt.new_session()
    seed_hash = rt.state_hash(sid)
    rt.call(sid, "spend", {"wallet_id": first_wallet(rt, sid)["id"], "amount": 1.0})
    assert rt.state_hash(sid) != seed_hash
    time.sleep(0.6)
    assert rt.state_hash(sid) == seed_hash  # idle past the TTL: the old state is gone
    others = [rt.new_session() for _ in range(5)]
    time.sleep(0.6)
    rt.new_session()  # creating a session sweeps expired ones even far below max_sessions
    assert not any(o in rt for o in others)


def test_a_closed_id_stays_closed_until_opened_again_and_the_memory_of_ended_ids_is_bounded(monkeypatch):
    from prove_core.env import runtime

    monkeypatch.setattr(runtime, "GONE_IDS_KEPT", 3)
    rt = ServerRuntime(server, max_sessions=1, evict_lru=True)
    ids = ["a", "b", "c", "d", "x" * 10_000]
    for sid in ids:
        rt.new_session(session_id=sid)
    assert [rt.gone(sid) for sid in ids] == [None, "evicted", "evicted", "evicted", None]  # "a" dropped: oldest
    assert max(len(key) for key in rt._gone) < 80  # a long id is remembered by its digest
    rt.close("c")
    closed = rt.call("c", "list_wallets", {})
    assert rt.gone("c") == "closed" and closed.error["reason"] == "SESSION_CLOSED"
    assert closed.error["details"]["session_id"] == "c" and "c" not in rt  # no fresh session in its place
    rt.new_session(session_id="c")  # the explicit open
    assert rt.gone("c") is None and not rt.call("c", "list_wallets", {}).is_error
    live = rt.new_session()
    rt.close(live)  # a live session closed is remembered as closed too
    assert rt.call(live, "list_wallets", {}).error["reason"] == "SESSION_CLOSED"
    rt.close("never-seen")  # an id never seen is not remembered: it may still start a session
    assert rt.gone("never-seen") is None
    rt.mark_lost(["gone-with-its-process", live])
    assert rt.call("gone-with-its-process", "list_wallets", {}).error["reason"] == "SESSION_LOST"
    assert len(rt._gone) <= 3  # still bounded


@pytest.mark.parametrize("settings", [{"ttl_s": 0}, {"ttl_s": -1}, {"ttl_s": float("nan")}, {"ttl_s": float("inf")},
                                      {"max_sessions": 0}, {"max_sessions": -3}, {"max_sessions": 1.5},
                                      {"call_timeout_s": 0}, {"call_timeout_s": float("inf")}])
def test_session_settings_that_cannot_work_are_refused(settings):
    with pytest.raises(ValueError):
        ServerRuntime(server, **settings)


def test_environment_refuses_tools_whose_prefixed_names_collide():
    from prove_core.env.runtime import ToolNameCollision, published_names

    a, a_b = copy.copy(server), copy.copy(server)
    a.name, a_b.name = "a", "a_b"
    a.tools = {"b_c": server.tools["spend"]}
    a_b.tools = {"c": server.tools["spend"]}
    with pytest.raises(ToolNameCollision, match=r"tools a\.b_c and a_b\.c would both be published as 'a_b_c'"):
        Environment([ServerRuntime(a), ServerRuntime(a_b)])
    assert published_names([("a", "b_c"), ("a_b", "c")], prefixed=False) == {"b_c": ("a", "b_c"), "c": ("a_b", "c")}


def test_a_call_past_its_deadline_is_typed_and_changes_nothing():
    rt = ServerRuntime(server, call_timeout_s=0.5)
    sid = rt.new_session()
    wallet = first_wallet(rt, sid)
    before = rt.state_hash(sid)
    result = rt.call(sid, "slow_spend", {"wallet_id": wallet["id"], "seconds": 1.5})
    assert result.code == "DEADLINE_EXCEEDED" and result.error["reason"] == "CALL_TIMEOUT"
    assert rt.state_hash(sid) == before
    time.sleep(1.5)  # the abandoned call finishes on its private copy...
    assert rt.state_hash(sid) == before  # ...and still changes nothing
    ok = rt.call(sid, "slow_spend", {"wallet_id": wallet["id"], "seconds": 0.0})
    assert not ok.is_error and ok.data["balance"] == round(wallet["balance"] - 1, 2)  # commits in time
    assert rt.call(sid, "explode", {"wallet_id": wallet["id"]}).code == "INTERNAL"
    assert rt.call(sid, "spend", {"wallet_id": wallet["id"], "amount": 9999.0}).error["reason"] == "INSUFFICIENT_FUNDS"
    assert rt.state(sid).wallets.get(wallet["id"])["balance"] == ok.data["balance"]


def test_an_unchanged_session_reuses_its_seeds_hash_and_a_changed_one_is_hashed_again(rt, monkeypatch):
    from prove_core.toolkit.state import State

    reader, writer = rt.new_session(), rt.new_session()
    rt.call(reader, "list_wallets", {})
    wallet = first_wallet(rt, writer)
    rt.call(writer, "spend", {"wallet_id": wallet["id"], "amount": 1.0})
    computed = []
    real = State.state_hash
    monkeypatch.setattr(State, "state_hash", lambda self, *texts: computed.append(1) or real(self, *texts))
    seed_hash = rt.state_hash(reader)
    assert seed_hash == real(rt.state(reader)) == real(State.from_snapshot(rt.seed_snapshot()))
    computed.clear()
    for _ in range(3):
        assert rt.state_hash(rt.new_session()) == seed_hash
    assert computed == []  # read from the cache, not recomputed
    changed = rt.state_hash(writer)  # hashed again, reusing the seed's text of the tables it did not write
    assert computed[0] == 1 and changed != seed_hash and changed == real(rt.state(writer))


def test_environments_rebuild_a_task_world_from_its_recorded_seed_options():
    """A synthesized task records its servers' seed options, so scoring it needs no config."""
    from prove_core.env.runtime import Environments
    from prove_core.model import Task
    from prove_core.plugin.manager import Plugins

    registry = Plugins().load(autoload=False).registry
    recorded = Task(servers=["banking"], seed=3, meta={"seed_options": {"banking": {"customers": 12}}})
    plain = Task(servers=["banking"], seed=4)
    envs = Environments(registry)
    assert envs(recorded).runtimes["banking"].options.customers == 12
    assert envs(plain).runtimes["banking"].options.customers == 8  # the server's default


# -- one run/rollback/clock path, inline and under a deadline ---------------------------------------------

BOTH_PATHS = pytest.mark.parametrize("timeout", [None, 5.0], ids=["inline", "deadline"])


@BOTH_PATHS
def test_the_clock_ticks_once_per_state_changing_call_on_both_paths(timeout):
    rt = ServerRuntime(server, call_timeout_s=timeout)
    sid = rt.new_session()
    wallet = first_wallet(rt, sid)
    t0 = rt.state(sid).now()
    assert not rt.call(sid, "spend", {"wallet_id": wallet["id"], "amount": 1.0}).is_error
    assert (rt.state(sid).now() - t0).total_seconds() == 60  # one tick, not two
    assert rt.state(sid).wallets.get(wallet["id"])["balance"] == round(wallet["balance"] - 1.0, 2)  # committed
    t1, changed = rt.state(sid).now(), rt.state_hash(sid)
    assert not rt.call(sid, "list_wallets", {}).is_error
    assert rt.state(sid).now() == t1 and rt.state_hash(sid) == changed  # a read changes nothing, clock included


@BOTH_PATHS
def test_a_rejected_or_crashing_call_changes_nothing_on_both_paths(timeout):
    rt = ServerRuntime(server, call_timeout_s=timeout)
    sid = rt.new_session()
    wallet = first_wallet(rt, sid)
    before, t0 = rt.state_hash(sid), rt.state(sid).now()
    rejected = rt.call(sid, "spend", {"wallet_id": wallet["id"], "amount": 9999.0})  # writes, then fails its rule
    assert rejected.error["reason"] == "INSUFFICIENT_FUNDS"
    crashed = rt.call(sid, "explode", {"wallet_id": wallet["id"]})  # writes, then crashes
    assert crashed.code == "INTERNAL" and crashed.error["reason"] == "TOOL_CRASHED"
    assert rt.state_hash(sid) == before and rt.state(sid).now() == t0


def _interrupting_server():
    from typing import Annotated

    from prove_core.toolkit import Server, ref
    from tests.support.toy import WalletOptions, WalletState, build_wallets

    srv = Server("interrupting", domain="test", description="A tool that raises KeyboardInterrupt.",
                 state=WalletState, seed=build_wallets, options=WalletOptions)

    @srv.tool(mutates=["wallet"], examples=[lambda s: {"wallet_id": s.wallets.first()["id"]}])
    def interrupt(state: WalletState, wallet_id: Annotated[str, ref("wallet", "Wallet to touch.")]) -> dict:
        """Write, then raise KeyboardInterrupt (as a Ctrl-C would while the tool runs)."""
        state.wallets.update(wallet_id, balance=-1.0)
        raise KeyboardInterrupt

    return srv


def test_a_real_ctrl_c_propagates_rolled_back_inline_and_is_a_crash_in_a_worker():
    srv = _interrupting_server()
    inline, worker = ServerRuntime(srv), ServerRuntime(srv, call_timeout_s=5.0)
    for rt in (inline, worker):
        sid = rt.new_session()
        before = rt.state_hash(sid)
        wallet_id = rt.state(sid).wallets.first()["id"]
        if rt is inline:  # in the main thread: a real Ctrl-C stops the caller, with the call rolled back
            with pytest.raises(KeyboardInterrupt):
                rt.call(sid, "interrupt", {"wallet_id": wallet_id})
        else:  # raised in the worker thread: a bug in the tool like any other
            assert rt.call(sid, "interrupt", {"wallet_id": wallet_id}).code == "INTERNAL"
        assert rt.state_hash(sid) == before


# -- Environment sessions ------------------------------------------------------------------------------------


def test_environment_new_session_keeps_a_falsy_but_given_id():
    """Only a missing id gets a fresh one: "" is an id like any other (``x or default`` lost it)."""
    env = Environment([ServerRuntime(server)])
    assert env.new_session("") == ""
    assert "" in env.runtimes["wallet"]
    assert env.new_session(None) != ""


# -- one factory, honouring [sessions] ------------------------------------------------------------------------


def test_build_runtime_takes_its_session_settings_from_the_sessions_table():
    from prove_core.config import SessionsConfig
    from prove_core.env.runtime import build_runtime

    rt = build_runtime(server, seed=4, sessions=SessionsConfig(ttl_s=12.0, max_sessions=7, call_timeout_s=3.0))
    assert (rt.seed, rt.ttl_s, rt.max_sessions, rt.call_timeout_s) == (4, 12.0, 7, 3.0)
    default = build_runtime(server)
    table = SessionsConfig()
    assert (default.ttl_s, default.max_sessions, default.call_timeout_s) == (table.ttl_s, table.max_sessions,
                                                                             table.call_timeout_s)


def test_every_framework_site_builds_runtimes_with_the_experiments_sessions(tmp_path):
    from prove_core.config import SessionsConfig, load_experiment
    from prove_core.env.runtime import Environments
    from prove_core.model import Task
    from prove_core.plugin.manager import Plugins
    from prove_core.reward.core import build_reward
    from prove_core.stages import build_environment

    plugins = Plugins().load(autoload=False)
    sessions = SessionsConfig(ttl_s=123.0, max_sessions=4567, call_timeout_s=8.0)
    experiment = load_experiment({"name": "t", "output_dir": str(tmp_path), "servers": [{"name": "banking"}],
                                  "sessions": {"ttl_s": 123.0, "max_sessions": 4567, "call_timeout_s": 8.0}})
    assert experiment.sessions == sessions

    def settings(rt):
        return rt.ttl_s, rt.max_sessions, rt.call_timeout_s

    wanted = (123.0, 4567, 8.0)
    assert settings(build_environment(experiment, plugins).runtimes["banking"]) == wanted  # `prove run`
    task = Task(servers=["banking"], seed=2)
    assert settings(Environments(plugins.registry, sessions=sessions)(task).runtimes["banking"]) == wanted  # train, eval
    reward = build_reward(None, plugins.registry, sessions=sessions)
    assert settings(reward.servers.runtime("banking")) == wanted  # the reward's live forks


def test_no_framework_module_builds_a_runtime_but_the_factory():
    """Every ``ServerRuntime`` of the framework (the conformance kit and the test harness
    included) comes from ``build_runtime``."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = []
    for package in ("prove_core", "plugins"):
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel == "prove_core/env/runtime.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\bServerRuntime\(", line):
                    offenders.append(f"{rel}:{number}: {line.strip()}")
    assert offenders == []


# -- one public-name function -----------------------------------------------------------------------------------


def test_public_names_are_the_same_in_an_environment_over_mcp_and_for_perturbations():
    import asyncio

    from fastmcp import Client

    from prove_core.env.runtime import public_name
    from prove_core.plugin.manager import Plugins
    from prove_core.serve.app import build_app
    from prove_core.synth.perturbation import PerturbationContext

    registry = Plugins().load(autoload=False).registry
    runtimes = [ServerRuntime(registry.load("servers", n)) for n in ("banking", "payments")]
    env = Environment(runtimes)
    expected = {public_name(rt.name, spec.name, prefixed=True) for rt in runtimes for spec in rt.specs()}
    assert {s.name for s in env.specs()} == expected
    assert "banking_get_balance" in expected

    async def served() -> set[str]:
        async with Client(build_app(runtimes)) as client:
            return {t.name for t in await client.list_tools()}

    assert asyncio.run(served()) == expected
    context = PerturbationContext(registry)
    assert {context.public_name(["banking", "payments"], rt.name, s.name) for rt in runtimes for s in rt.specs()} == expected
    single = Environment([ServerRuntime(registry.load("servers", "banking"))])
    assert {s.name for s in single.specs()} == {s.name for s in runtimes[0].specs()}
    assert context.public_name(["banking"], "banking", "get_balance") == "get_balance"


def _echo_server(raw: bool):
    from prove_core.toolkit import Server, State

    echo_server = Server("echo", domain="test", description="Echoes its arguments.", state=State,
                         seed=lambda rng, options: State(salt="echo"))

    @echo_server.tool(read_only=True, examples=[{"n": 1, "s": "x"}])
    def echo(state: State, n: int, s: str) -> dict:
        """Says what it got."""
        return {"n": repr(n), "s": repr(s)}

    echo_server.tools["echo"].raw_arguments = raw
    return echo_server


def test_a_tool_that_checks_its_own_arguments_gets_them_as_sent_and_others_get_json_values():
    """Our servers: a whole float for an integer becomes an int, NaN and lone surrogates are refused;
    a wrapped benchmark's tool (raw_arguments: it checks them itself) gets exactly what was sent."""
    ours, raw = ServerRuntime(_echo_server(False)), ServerRuntime(_echo_server(True))
    a, b = ours.new_session(), raw.new_session()
    assert ours.call(a, "echo", {"n": 50.0, "s": "x"}).data == {"n": "50", "s": "'x'"}
    assert raw.call(b, "echo", {"n": 50.0, "s": "x"}).data == {"n": "50.0", "s": "'x'"}
    for bad in ({"n": float("nan"), "s": "x"}, {"n": 1, "s": "x\ud800"}):
        assert ours.call(a, "echo", bad).error["reason"] == "SCHEMA_VIOLATION"
    assert raw.call(b, "echo", {"n": float("inf"), "s": "x"}).data["n"] == "inf"
    assert raw.call(b, "echo", {"n": 1, "s": "x\ud800"}).data["s"] == repr("x\ud800")
    assert raw.call("gone", "nope", {}).error["reason"] == "UNKNOWN_TOOL"  # the rest of the checks stay
