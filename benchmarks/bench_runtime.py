"""Runtime benchmarks: fast path vs fastmcp's in-memory client, fork cost, sessions per GiB.

Prints each figure with its ratio against a baseline measured in the same run:

1. a read tool call (banking.get_balance: schema-validated, session looked up) on the fast
   path vs fastmcp's own in-memory ``Client(server).call_tool`` on the same tool (goal >= 30x);
2. ``fork`` of a session from the seed snapshot for the default seed and a 10x larger one
   (goal: the same cost, ratio ~1);
3. RSS of 10,000 live banking sessions, each with one write (goal < 1 GiB);
4. a session's state hash (every rollout ends with one): the whole state serialized in one piece
   vs the runtime's, which reuses the seed's text of the tables the session has not written.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastmcp import Client  # noqa: E402

from prove_core.env.runtime import ServerRuntime  # noqa: E402
from prove_core.logging import configure  # noqa: E402
from prove_core.serve.app import build_app  # noqa: E402
from prove_servers.banking import BankOptions, server  # noqa: E402


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        import os

        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def best_rate(fn, n: int, repeats: int = 3) -> float:
    """Calls per second, best of ``repeats`` runs of ``n`` calls (best = least disturbed)."""
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = max(best, n / (time.perf_counter() - start))
    return best


def bench_fast_vs_mcp(quick: bool) -> dict:
    rt = ServerRuntime(server)
    sid = rt.new_session()
    args = {"account_id": rt.state(sid).accounts.first(status="active")["id"]}
    assert not rt.call(sid, "get_balance", args).is_error
    fast = best_rate(lambda: rt.call(sid, "get_balance", args), 2_000 if quick else 20_000)

    async def mcp_rate(n: int) -> float:
        async with Client(build_app([ServerRuntime(server)])) as client:
            await client.call_tool("get_balance", args, meta={"session_id": sid})
            best = 0.0
            for _ in range(3):
                start = time.perf_counter()
                for _ in range(n):
                    await client.call_tool("get_balance", args, meta={"session_id": sid})
                best = max(best, n / (time.perf_counter() - start))
            return best

    mcp = asyncio.run(mcp_rate(100 if quick else 1_000))
    return {"fast_calls_per_s": round(fast), "fastmcp_client_calls_per_s": round(mcp), "ratio": round(fast / mcp, 1)}


def bench_fork(quick: bool) -> dict:
    out = {}
    for label, options in (("default", BankOptions()), ("10x", BankOptions(customers=BankOptions().customers * 10))):
        rt = ServerRuntime(server, options=options, max_sessions=10**7)
        snap = rt.seed_snapshot()
        records = sum(rt.state(rt.new_session()).table_sizes().values())
        n = 2_000 if quick else 20_000
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(n):
                rt.close(rt.new_session(snapshot=snap))
            best = min(best, (time.perf_counter() - start) / n)
        out[label] = {"records": records, "fork_us": round(best * 1e6, 2)}
    out["ratio_10x_over_default"] = round(out["10x"]["fork_us"] / out["default"]["fork_us"], 2)
    return out


def bench_sessions_memory(quick: bool) -> dict:
    n = 1_000 if quick else 10_000
    rt = ServerRuntime(server, max_sessions=n + 1)
    probe = rt.new_session()
    args = {"account_id": rt.state(probe).accounts.first(status="active")["id"]}
    gc.collect()
    base = rss_bytes()
    for _ in range(n):
        sid = rt.new_session()
        rt.call(sid, "get_balance", args)
        rt.call(sid, "set_card_spending_limit", _limit_args(rt, sid))
    gc.collect()
    used = rss_bytes() - base
    return {"sessions": n, "rss_added_mib": round(used / 2**20, 1), "per_session_kib": round(used / n / 1024, 2),
            "projected_10k_mib": round(used / n * 10_000 / 2**20, 1)}


def bench_state_hash(quick: bool) -> dict:
    """A rollout's final state hash: the whole state serialized in one piece (the definition,
    ``State.state_hash()``) against the runtime's ``state_hash``, which reuses the seed's text for
    every table the session has not written (and the seed's hash for a session that wrote nothing)."""
    rt = ServerRuntime(server)
    unchanged, wrote = rt.new_session(), rt.new_session()
    rt.call(wrote, "set_card_spending_limit", _limit_args(rt, wrote))
    assert rt.state_hash(wrote) == rt.state(wrote).state_hash() != rt.state_hash(unchanged)
    n = 50 if quick else 300
    whole = best_rate(lambda: rt.state(wrote).state_hash(), n)
    after_write = best_rate(lambda: rt.state_hash(wrote), n)
    untouched = best_rate(lambda: rt.state_hash(unchanged), n * 10)
    return {"whole_ms": round(1e3 / whole, 3), "after_one_write_ms": round(1e3 / after_write, 3),
            "unchanged_ms": round(1e3 / untouched, 4), "ratio_after_write": round(after_write / whole, 1)}


def _limit_args(rt: ServerRuntime, sid: str) -> dict:
    example = server.tools["set_card_spending_limit"].examples[0]
    return example(rt.state(sid))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    ns = parser.parse_args()
    configure(level="warning")

    # memory first: the other benchmarks leave freed arenas behind that would hide new sessions
    results = {"sessions": bench_sessions_memory(ns.quick)}
    results["fast_path"] = bench_fast_vs_mcp(ns.quick)
    results["fork"] = bench_fork(ns.quick)
    results["state_hash"] = bench_state_hash(ns.quick)
    fp, fk, ss, sh = results["fast_path"], results["fork"], results["sessions"], results["state_hash"]
    print(f"fast path      {fp['fast_calls_per_s']:>10,} calls/s   fastmcp in-memory client "
          f"{fp['fastmcp_client_calls_per_s']:>8,} calls/s   ratio {fp['ratio']}x (goal >= 30x)")
    print(f"fork           default seed ({fk['default']['records']} records) {fk['default']['fork_us']} us   "
          f"10x seed ({fk['10x']['records']} records) {fk['10x']['fork_us']} us   ratio {fk['ratio_10x_over_default']} (goal ~1)")
    print(f"sessions       {ss['sessions']:,} live banking sessions with a write each: +{ss['rss_added_mib']} MiB RSS "
          f"({ss['per_session_kib']} KiB each; 10,000 -> {ss['projected_10k_mib']} MiB, goal < 1024 MiB)")
    print(f"state hash     whole state {sh['whole_ms']} ms   after one write {sh['after_one_write_ms']} ms "
          f"(ratio {sh['ratio_after_write']}x)   session that wrote nothing {sh['unchanged_ms']} ms")
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
