import copy
import time

import pytest

from prove_core.errors import ResourceExhausted
from prove_core.env.runtime import Environment, ServerRuntime
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


def test_session_bound_evicts_least_recently_used():
    rt = ServerRuntime(server, max_sessions=3)
    ids = [rt.new_session() for _ in range(3)]
    rt.session(ids[0])  # touch: ids[1] is now the least recently used
    rt.new_session()
    assert len(rt) == 3 and ids[1] not in rt and ids[0] in rt


def test_session_bound_can_refuse_instead():
    rt = ServerRuntime(server, max_sessions=2, evict_lru=False)
    rt.new_session(), rt.new_session()
    with pytest.raises(ResourceExhausted):
        rt.new_session()


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


def test_an_expired_session_comes_back_fresh_and_sweeps_happen_without_pressure():
    rt = ServerRuntime(server, ttl_s=0.5)  # long enough that a busy machine does not expire it early
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
    from prove_core.model import Task
    from prove_core.plugin.manager import Plugins
    from prove_core.env.runtime import Environments

    registry = Plugins().load(autoload=False).registry
    recorded = Task(servers=["banking"], seed=3, meta={"seed_options": {"banking": {"customers": 12}}})
    plain = Task(servers=["banking"], seed=4)
    envs = Environments(registry)
    assert envs(recorded).runtimes["banking"].options.customers == 12
    assert envs(plain).runtimes["banking"].options.customers == 8  # the server's default
