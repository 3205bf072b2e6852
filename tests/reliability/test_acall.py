"""``ServerRuntime.acall`` (what the MCP servers run calls with) keeps every promise of ``call``.

Same results and state as the synchronous path; concurrent calls on one session serialize (no
lost update, no torn write seen); a body that overruns its deadline gets DEADLINE_EXCEEDED,
changes nothing, and does not hold up the next call on the same session; a crash changes nothing.
"""

import asyncio
import time

import pytest

from prove_core.env.runtime import ServerRuntime
from tests.reliability import faulty


def runtime(timeout):
    return ServerRuntime(faulty.server, call_timeout_s=timeout)


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_acall_gives_the_results_and_state_of_call(timeout):
    sync, fast = runtime(timeout), runtime(timeout)
    calls = [("move", {"amount": 10.0}), ("balances", {}), ("move", {"amount": 1000.0}), ("move", {"amount": -1}),
             ("crash", {"kind": "runtime"}), ("move_then_fail", {"amount": 5.0}), ("nope", {}), ("balances", {})]

    async def play():
        return [await fast.acall("s", tool, args) for tool, args in calls]

    got = asyncio.run(play())
    want = [sync.call("s", tool, args) for tool, args in calls]
    assert [(r.is_error, r.structured) for r in got] == [(r.is_error, r.structured) for r in want]
    assert fast.state_hash("s") == sync.state_hash("s")
    assert got[2].error["reason"] == "INSUFFICIENT_FUNDS" and got[4].error["reason"] == "TOOL_CRASHED"
    assert got[-1].structured == {"accounts": {"alpha": 90.0, "beta": 110.0}, "total": 200.0}


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_concurrent_calls_on_one_session_never_lose_a_write(timeout):
    rt = runtime(timeout)

    async def play():
        moves = [rt.acall("s", "move", {"amount": 1.0, "pause_s": 0.01}) for _ in range(20)]
        reads = [rt.acall("s", "balances", {}) for _ in range(20)]
        return await asyncio.gather(*moves, *reads)

    results = asyncio.run(play())
    assert not any(r.is_error for r in results)
    assert all(r.structured["total"] == 200.0 for r in results)  # no read saw money in flight
    assert rt.call("s", "balances", {}).structured["accounts"] == {"alpha": 80.0, "beta": 120.0}


def test_an_overrunning_body_changes_nothing_and_does_not_hold_up_its_session():
    rt = runtime(0.5)
    faulty.RELEASE.clear()
    try:
        async def play():
            hung = await rt.acall("s", "hang", {"seconds": 30})
            started = time.perf_counter()
            after = await rt.acall("s", "balances", {})
            return hung, after, time.perf_counter() - started

        hung, after, waited = asyncio.run(play())
    finally:
        faulty.RELEASE.set()  # let the abandoned body finish; it ran on a copy nobody commits
    assert hung.error["code"] == "DEADLINE_EXCEEDED" and hung.error["reason"] == "CALL_TIMEOUT"
    assert not after.is_error and after.structured["accounts"] == {"alpha": 100.0, "beta": 100.0}
    assert waited < 0.4  # the next call did not wait for the hung one
    time.sleep(0.1)
    assert rt.call("s", "balances", {}).structured["accounts"]["alpha"] == 100.0  # still nothing committed
