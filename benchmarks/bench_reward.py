"""Reward benchmark: rollouts scored per second, live tier included, vs fastmcp's in-memory client.

Single process. Each rollout has 3 calls on a bundled server and is scored with the paper's
reward (validity with its live tier, coverage, efficiency, tool name, arguments, abstention):
a fork of the task's initial state, the 3 calls run on it in order, then every component. The
baseline only *executes* the same 3 calls, on a fresh session, through fastmcp's own in-memory
``Client(server).call_tool`` — no scoring at all. Printed: rollouts/s for

1. pre-parsed rollouts, banking (find_customers -> list_accounts -> get_balance) and shopping
   (search_products -> get_product -> add_to_cart);
2. the same from raw Hermes text (parsing included);
3. the paper reward plus the final-state component (a second fork replays the ground truth);
4. the ``guarded`` preset (the default: every component it lists);

and the ratio of (1) to the baseline (goal: >= 2,000 rollouts/s), and of (4) to (1) (goal: >= 0.8).
Then one 40-call rollout (19 steps of one tool, each called twice, and two repeats) is scored
under both presets (goal: < 100 ms under ``guarded``). The variants are timed in
interleaved rounds (best round of each), so a ratio compares runs under the same machine load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastmcp import Client  # noqa: E402

from prove_core.config import RewardComponentConfig, RewardConfig  # noqa: E402
from prove_core.env.runtime import ServerRuntime  # noqa: E402
from prove_core.logging import configure  # noqa: E402
from prove_core.reward.core import DEFAULT_COMPONENTS, Rollout, build_reward, rollout_from_record  # noqa: E402
from prove_core.reward.parsing import load_parser  # noqa: E402
from prove_core.serve.app import build_app  # noqa: E402
from tests.support.reward_tasks import banking_balance_task, registry, shopping_cart_task  # noqa: E402


def timed(fn, n: int) -> float:
    """Items per second of ``n`` calls of ``fn``."""
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - start)


def hermes_text(task) -> str:
    return "".join(f'<tool_call>{json.dumps({"name": c.tool, "arguments": c.arguments})}</tool_call>\n'
                   for c in task.calls)


def bench_server(task, n: int, n_mcp: int, rounds: int) -> dict:
    """Each round times every variant once, back to back, so all see the same machine load (it is
    shared and noisy); the best round of each is reported."""
    reg = registry()
    reward = build_reward(RewardConfig(preset="paper"), reg)  # the paper's reward (the default is guarded)
    rollout = Rollout.ground_truth(task)
    result = reward.score(rollout)
    assert result.total == 1.3, result.to_json()  # every call succeeds live: the benchmark measures real work

    parser = load_parser(reg, "hermes")
    text = hermes_text(task)
    parsed = rollout_from_record({"id": "r", "task": _task_json(task), "completion": text}, parser=lambda _: parser)
    assert [(c.name, c.arguments) for c in parsed.calls] == [(c.name, c.arguments) for c in rollout.calls]

    def from_text() -> None:
        reward.score(Rollout(id="r", task=task, attempts=parser.parse(text).attempts))

    with_state = build_reward(RewardConfig(components=[RewardComponentConfig(name=c) for c in
                                                       (*DEFAULT_COMPONENTS, "final_state")]), reg)
    assert with_state.score(rollout).value("final_state") == 1.0

    guarded = build_reward(RewardConfig(preset="guarded"), reg)
    assert guarded.score(rollout).total == guarded.score(rollout).best

    server = reg.load("servers", task.servers[0])
    calls = [(c.tool, c.arguments) for c in task.calls]
    best = {"scored": 0.0, "text": 0.0, "final": 0.0, "guarded": 0.0, "mcp": 0.0}

    async def run_rounds() -> None:
        async with Client(build_app([ServerRuntime(server, max_sessions=10**6)])) as client:
            for r in range(rounds):
                start = time.perf_counter()
                for i in range(n_mcp):
                    meta = {"session_id": f"bench-{r}-{i}"}  # a fresh session per rollout, like a fork
                    for tool, args in calls:
                        res = await client.call_tool(tool, args, meta=meta, raise_on_error=False)
                        assert not res.is_error, res
                best["mcp"] = max(best["mcp"], n_mcp / (time.perf_counter() - start))
                best["scored"] = max(best["scored"], timed(lambda: reward.score(rollout), n))
                best["text"] = max(best["text"], timed(from_text, n))
                best["final"] = max(best["final"], timed(lambda: with_state.score(rollout), n))
                best["guarded"] = max(best["guarded"], timed(lambda: guarded.score(rollout), n))

    asyncio.run(run_rounds())
    return {"server": task.servers[0], "calls": [c.tool for c in task.calls],
            "scored_rollouts_per_s": round(best["scored"]), "from_hermes_text_per_s": round(best["text"]),
            "with_final_state_per_s": round(best["final"]), "guarded_per_s": round(best["guarded"]),
            "guarded_vs_paper": round(best["guarded"] / best["scored"], 2),
            "fastmcp_execute_only_rollouts_per_s": round(best["mcp"]), "ratio": round(best["scored"] / best["mcp"], 1)}


def bench_long_rollout(rounds: int) -> dict:
    """One 40-call rollout of one tool: 19 ground-truth steps (get_balance of 19 accounts), each
    called twice, then two repeats; best of ``rounds`` scorings per preset, in milliseconds."""
    from prove_core.model import GroundTruthCall, Task
    from tests.support.reward_tasks import runtime

    rt, sid = runtime("banking")
    accounts = [a["id"] for a in rt.state(sid).accounts.all()][:19]
    steps = [GroundTruthCall(id=f"s{i}", tool="get_balance", arguments={"account_id": a}) for i, a in enumerate(accounts)]
    task = Task(servers=["banking"], seed=0, calls=steps, expected="call")
    calls = [("get_balance", {"account_id": a}) for a in accounts] * 2 + [("get_balance", {"account_id": accounts[0]})] * 2
    rollout = Rollout.from_calls(task, calls)
    out = {"calls": len(calls)}
    for preset in ("paper", "guarded"):
        reward = build_reward(RewardConfig(preset=preset), registry())
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            reward.score(rollout)
            times.append(time.perf_counter() - start)
        out[f"{preset}_ms"] = round(min(times) * 1000, 1)
    return out


def _task_json(task) -> dict:
    from prove_core.model import to_json

    return to_json(task)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    ns = parser.parse_args()
    configure(level="warning")
    n, n_mcp, rounds = (300, 30, 2) if ns.quick else (3_000, 200, 5)
    results = {task.servers[0]: bench_server(task, n, n_mcp, rounds)
               for task in (banking_balance_task(), shopping_cart_task())}
    for r in results.values():
        print(f"{r['server']:<9} 3-call rollouts ({' -> '.join(r['calls'])})")
        print(f"  scored (paper reward, live tier)  {r['scored_rollouts_per_s']:>8,} rollouts/s   "
              f"fastmcp in-memory client, execute only {r['fastmcp_execute_only_rollouts_per_s']:>6,} rollouts/s   "
              f"ratio {r['ratio']}x (goal >= 2,000 rollouts/s)")
        print(f"  from raw Hermes text              {r['from_hermes_text_per_s']:>8,} rollouts/s")
        print(f"  + final_state (ground truth replayed on a second fork) {r['with_final_state_per_s']:>8,} rollouts/s")
        print(f"  guarded preset (the default)      {r['guarded_per_s']:>8,} rollouts/s   "
              f"{r['guarded_vs_paper']}x the paper preset (goal >= 0.8)")
    long = results["long_rollout"] = bench_long_rollout(rounds)
    print(f"one {long['calls']}-call rollout (19 steps of one tool): paper {long['paper_ms']} ms, "
          f"guarded {long['guarded_ms']} ms (goal < 100 ms)")
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
