"""Faults: a tool that raises, exits, hangs or spins is contained on the fast path, over MCP and
over HTTP (typed INTERNAL / DEADLINE_EXCEEDED, state unchanged, the session stays usable); a
call whose client disconnects is applied whole or not at all; the live-session bound and TTL
eviction hold under concurrent load; expired sessions are freed."""

from __future__ import annotations

import asyncio
import gc
import random
import threading
import time
import weakref

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from prove_core.env.runtime import ServerRuntime
from prove_core.serve.app import build_app
from tests.reliability import faulty
from tests.reliability.conftest import RawMcp, serve_faulty

CRASHES = ["runtime", "recursion", "assertion", "memory", "system_exit", "generator_exit"]
MODES = {"inline": None, "deadline": 2.0}


@pytest.fixture(autouse=True)
def release_hung_calls():
    faulty.RELEASE.clear()
    yield
    faulty.RELEASE.set()  # abandoned `hang` calls end with the test


def totals(rt: ServerRuntime, sid: str) -> dict:
    return rt.call(sid, "balances", {}).data


@pytest.mark.parametrize("timeout", MODES.values(), ids=MODES.keys())
@pytest.mark.parametrize("kind", CRASHES)
def test_a_crashing_tool_is_internal_rolled_back_and_the_session_stays_usable(kind, timeout):
    rt = ServerRuntime(faulty.server, call_timeout_s=timeout)
    sid = rt.new_session()
    before = rt.state_hash(sid)
    result = rt.call(sid, "crash", {"kind": kind})
    assert result.code == "INTERNAL" and result.error["reason"] == "TOOL_CRASHED", result
    assert rt.state_hash(sid) == before
    assert rt.call(sid, "move", {"amount": 5.0}).data["accounts"] == {"alpha": 95.0, "beta": 105.0}


def test_ctrl_c_still_stops_the_fast_path_but_rolls_the_call_back():
    rt = ServerRuntime(faulty.server)
    sid = rt.new_session()
    before = rt.state_hash(sid)
    with pytest.raises(KeyboardInterrupt):
        rt.call(sid, "crash", {"kind": "keyboard_interrupt"})  # in the main thread: taken as Ctrl-C
    assert rt.state_hash(sid) == before
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(rt.call(sid, "crash", {"kind": "keyboard_interrupt"})))
    worker.start()
    worker.join()
    assert outcome[0].code == "INTERNAL"  # in a worker thread (the MCP path) it can only be the tool's


def test_a_hanging_tool_gets_deadline_exceeded_while_other_sessions_keep_going():
    # Generous deadline: "not queued" is checked by order (the other calls finish while the hung
    # call is still running), not by a tight timing bound that a loaded CI machine could miss.
    rt = ServerRuntime(faulty.server, call_timeout_s=2.0)
    hung, other = rt.new_session(), rt.new_session()
    before = rt.state_hash(hung)
    outcome = {}

    def call_hang():
        started = time.perf_counter()
        outcome["result"] = rt.call(hung, "hang", {"seconds": 60})
        outcome["seconds"] = time.perf_counter() - started

    worker = threading.Thread(target=call_hang)
    worker.start()
    time.sleep(0.1)
    for _ in range(20):
        assert not rt.call(other, "move", {"amount": 1.0}).is_error
    assert worker.is_alive() and "result" not in outcome  # not queued behind the hung call
    worker.join()
    assert outcome["result"].code == "DEADLINE_EXCEEDED" and 2.0 <= outcome["seconds"] < 6.0
    assert rt.state_hash(hung) == before
    spun = rt.call(hung, "spin", {"seconds": 10})  # CPU-bound in pure Python: cut the same way
    assert spun.code == "DEADLINE_EXCEEDED" and rt.state_hash(hung) == before
    assert totals(rt, hung)["accounts"] == {"alpha": 100.0, "beta": 100.0}
    assert totals(rt, other)["accounts"] == {"alpha": 80.0, "beta": 120.0}


@pytest.mark.parametrize("timeout", MODES.values(), ids=MODES.keys())
def test_faults_over_mcp_are_typed_and_the_server_keeps_serving(timeout):
    rt = ServerRuntime(faulty.server, call_timeout_s=timeout)

    async def main():
        async with Client(build_app([rt])) as client:
            async def call(name, args):
                result = await client.call_tool_mcp(name, args, meta={"session_id": "a"})
                return bool(result.is_error), result.structured_content

            for kind in [*CRASHES, "keyboard_interrupt"]:
                is_error, content = await call("crash", {"kind": kind})
                assert is_error and content["code"] == "INTERNAL", (kind, content)
            assert await call("move_then_fail", {"amount": 10.0}) == (True, {
                "code": "INTERNAL", "reason": "TOOL_CRASHED",
                "message": "faulty.move_then_fail failed: RuntimeError: bug after the write"})
            if timeout is not None:
                is_error, content = await call("hang", {"seconds": 60})
                assert is_error and content["code"] == "DEADLINE_EXCEEDED"
            return await call("balances", {})

    assert asyncio.run(main()) == (False, {"accounts": {"alpha": 100.0, "beta": 100.0}, "total": 200.0})


def test_a_hang_over_http_is_cut_at_the_deadline_and_other_sessions_are_served():
    with serve_faulty(call_timeout=3.0) as served:
        async def main():
            transport = StreamableHttpTransport(served["url"], headers=served["headers"])
            async with Client(transport) as client:
                hung = asyncio.create_task(client.call_tool_mcp("hang", {"seconds": 60}, meta={"session_id": "hung"}))
                await asyncio.sleep(0.2)
                for _ in range(5):
                    result = await client.call_tool_mcp("move", {"amount": 1.0}, meta={"session_id": "other"})
                    assert not result.is_error
                others = hung.done()
                result = await hung
                assert result.is_error and result.structured_content["code"] == "DEADLINE_EXCEEDED"
                crashed = await client.call_tool_mcp("crash", {"kind": "system_exit"}, meta={"session_id": "hung"})
                assert crashed.structured_content["code"] == "INTERNAL"
                balances = await client.call_tool_mcp("balances", {}, meta={"session_id": "hung"})
                return others, balances.structured_content

        others, balances = asyncio.run(main())
        assert others is False  # served while the hung call was still running
        assert balances["accounts"] == {"alpha": 100.0, "beta": 100.0}
        assert served["proc"].poll() is None


@pytest.mark.parametrize("call_timeout", [0.0, 5.0], ids=["inline", "deadline"])
def test_a_client_disconnect_mid_call_leaves_no_half_applied_write(call_timeout):
    """Cut `move` (debit, pause, credit) off at random points; a reader on another connection never
    sees money missing, and at the end each move was applied whole or not at all."""
    rng = random.Random(9)
    pause = 0.4
    with serve_faulty(call_timeout=call_timeout) as served:
        reader = RawMcp(served["url"], served["headers"])
        cut = RawMcp(served["url"], served["headers"])
        seen_totals = []
        for _ in range(4):
            with pytest.raises(httpx.TimeoutException):
                cut.call("move", {"amount": 10.0, "pause_s": pause}, "victim", timeout=rng.uniform(0.05, pause - 0.1))
            cut.close()
            cut = RawMcp(served["url"], served["headers"])  # the cut connection is gone for good
            seen_totals.append(reader.call("balances", {}, "victim")["structuredContent"]["total"])
        time.sleep(pause + 0.3)  # let the last cut call finish on the server
        final = reader.call("balances", {}, "victim")["structuredContent"]
        assert set(seen_totals) == {200.0} and final["total"] == 200.0
        moved = 100.0 - final["accounts"]["alpha"]
        assert moved % 10.0 == 0 and final["accounts"]["beta"] == 100.0 + moved
        assert not reader.call("move", {"amount": 1.0}, "victim")["isError"]  # still usable
        assert served["proc"].poll() is None


def test_a_fork_or_hash_taken_during_a_call_never_sees_its_half_applied_write():
    rt = ServerRuntime(faulty.server)
    sid = rt.new_session()
    seed_hash = rt.state_hash(sid)
    worker = threading.Thread(target=rt.call, args=(sid, "move_then_fail", {"amount": 10.0, "pause_s": 0.3}))
    worker.start()
    time.sleep(0.1)  # alpha is debited, beta not yet credited, and the call will be rolled back
    forked = rt.fork(sid)
    during = rt.state_hash(sid)
    worker.join()
    assert rt.state_hash(forked) == seed_hash and during == seed_hash


@pytest.mark.parametrize(("options", "allowed"), [
    ({}, {"TOO_MANY_SESSIONS"}),  # the default: a new session past the bound is refused
    ({"evict_lru": True}, {"SESSION_EXPIRED"}),  # an evicted session's id is an error, never a fresh session
    ({"evict_lru": True, "recreate_expired": True}, set()),  # the old behaviour, asked for
], ids=["refuse", "evict", "evict-and-recreate"])
def test_the_live_session_bound_holds_under_concurrent_load(options, allowed):
    rt = ServerRuntime(faulty.server, max_sessions=40, **options)
    stop, peak, problems = threading.Event(), [0], []

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], len(rt))

    def hammer(seed):
        rng = random.Random(seed)
        for _ in range(300):
            tool, args = rng.choice([("balances", {}), ("move", {"amount": 1.0})])
            result = rt.call(f"s{rng.randrange(400)}", tool, args)
            if result.is_error and result.error["reason"] not in {"INSUFFICIENT_FUNDS", *allowed}:
                problems.append(result.error)

    watcher = threading.Thread(target=watch)
    workers = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    watcher.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    watcher.join()
    assert not problems and 0 < peak[0] <= 40 and len(rt) <= 40


def test_at_the_bound_without_eviction_a_new_session_is_a_typed_error_on_both_paths():
    rt = ServerRuntime(faulty.server, max_sessions=2, evict_lru=False)
    kept = [rt.new_session(), rt.new_session()]
    refused = rt.call("one-too-many", "balances", {})
    assert refused.code == "RESOURCE_EXHAUSTED" and refused.error["reason"] == "TOO_MANY_SESSIONS"
    assert all(not rt.call(sid, "balances", {}).is_error for sid in kept)

    async def over_mcp():
        async with Client(build_app([rt])) as client:
            result = await client.call_tool_mcp("balances", {}, meta={"session_id": "another"})
            return bool(result.is_error), result.structured_content

    is_error, content = asyncio.run(over_mcp())
    assert is_error and content["code"] == "RESOURCE_EXHAUSTED"


def test_ttl_eviction_under_load_drops_idle_sessions_and_keeps_busy_ones():
    rt = ServerRuntime(faulty.server, ttl_s=1.0)  # a busy thread paused by a loaded machine must not expire
    idle = [rt.new_session() for _ in range(50)]
    for sid in idle:
        rt.call(sid, "move", {"amount": 1.0})
    busy = [f"busy-{n}" for n in range(4)]
    writes = {sid: 0 for sid in busy}
    deadline = time.perf_counter() + 2.5

    failed = []

    def keep_busy(sid):
        while time.perf_counter() < deadline:
            result = rt.call(sid, "move", {"amount": 0.1})  # 100 in the account: ~125 writes fit
            if result.is_error:
                failed.append((sid, result.error))
                return
            writes[sid] += 1
            time.sleep(0.02)

    def churn():
        while time.perf_counter() < deadline:
            rt.call(f"churn-{random.random()}", "balances", {})  # new sessions sweep the expired ones
            time.sleep(0.005)

    threads = [threading.Thread(target=keep_busy, args=(sid,)) for sid in busy] + [threading.Thread(target=churn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed, failed
    assert not any(sid in rt for sid in idle)
    for sid in busy:  # never expired while in use: every write is still there
        assert writes[sid] > 10 and totals(rt, sid)["accounts"]["alpha"] == pytest.approx(100.0 - 0.1 * writes[sid])


def test_expired_sessions_are_freed(all_servers):
    banking = next(s for s in all_servers if s.name == "banking")
    rt = ServerRuntime(banking, ttl_s=0.05)
    example = banking.tools["set_card_spending_limit"].examples[0]
    freed = []
    for _ in range(5):
        sids = [rt.new_session() for _ in range(200)]
        for sid in sids:
            rt.call(sid, "set_card_spending_limit", example(rt.state(sid)))
        freed += [weakref.ref(rt.state(sid)) for sid in sids]
        time.sleep(0.1)
        rt.evict_expired()
    gc.collect()
    assert len(rt) == 0 and all(ref() is None for ref in freed)
