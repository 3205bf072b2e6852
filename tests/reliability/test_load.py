"""Load, CI-sized: concurrent sessions over streamable HTTP and over threads give, call by call,
the results and end states of a sequential replay on the fast path (benchmarks/bench_load.py
is the full-size run)."""

from __future__ import annotations

import asyncio
import threading
import time

import uvicorn
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.server.middleware import Middleware

from benchmarks import bench_load
from prove_core.env.runtime import ServerRuntime
from prove_core.serve.app import build_app, http_app

SERVERS = ["banking", "shopping", "filesystem", "calendar"]


def test_concurrent_sessions_over_http_match_a_sequential_replay():
    report = bench_load.mcp_load(SERVERS, sessions=16, max_calls=30, clients=4, duration=120)
    assert report["end_states_read"], "the served process did not report its end states"
    assert report["load"]["calls"] == 16 * 30
    assert report["mismatches"] == 0, report["mismatch_examples"]
    assert report["unhandled"] == 0, report["unhandled_examples"]
    assert 0 < report["load"]["typed_errors"] < report["load"]["calls"]  # the scripts exercise both outcomes


def test_concurrent_threads_on_the_fast_path_match_a_sequential_replay(registry):
    servers = registry.names("servers")  # every server: the fast path is cheap
    report = bench_load.thread_load(servers, sessions=64, threads=8, max_calls=40, duration=120)
    assert report["load"]["calls"] == 64 * 40
    assert report["mismatches"] == 0, report["mismatch_examples"]
    assert report["unhandled"] == 0, report["unhandled_examples"]


def test_the_replay_check_catches_a_lost_write_and_a_wrong_result():
    pool = bench_load.moves(bench_load.environment(["banking"]))
    env = bench_load.environment(["banking"])
    run = bench_load.drive_threads(env, pool, sessions=4, threads=2, max_calls=20, duration=60)
    hashes = bench_load.live_hashes(env, list(run.logs))
    assert bench_load.replay_check(["banking"], run.logs, hashes) == []
    sid = next(s for s, log in run.logs.items() if any(not r[2] and r[0] in {m.tool for m in pool["write"]} for r in log))
    tampered = {**hashes, "banking": {**hashes["banking"], sid: "0" * 64}}
    assert any("end state" in m for m in bench_load.replay_check(["banking"], run.logs, tampered))
    tool, args, is_error, structured = run.logs[sid][0]
    wrong = {**run.logs, sid: [(tool, args, not is_error, structured), *run.logs[sid][1:]]}
    assert any("call 0" in m for m in bench_load.replay_check(["banking"], wrong, hashes))


class CountListings(Middleware):
    def __init__(self) -> None:
        self.listings = 0

    async def on_list_tools(self, context, call_next):
        self.listings += 1
        return await call_next(context)


def test_a_tool_call_over_http_does_not_list_every_tool(all_servers):
    """The MCP SDK validates each streamable-HTTP tools/call against the tool's input schema; unless
    the server answers that lookup it lists every tool through every middleware per call (with
    all 343 tools mounted that made `prove serve` about 25x slower)."""
    runtimes = [ServerRuntime(s) for s in all_servers]
    app = build_app(runtimes)
    counter = CountListings()
    app.add_middleware(counter)
    port = bench_load.free_port()
    server = uvicorn.Server(uvicorn.Config(http_app(app), host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    banking = next(rt for rt in runtimes if rt.name == "banking")
    account = banking.state("probe").accounts.first()["id"]
    try:
        async def main():
            async with Client(StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")) as client:
                async def call():
                    result = await client.call_tool_mcp("banking_get_balance", {"account_id": account},
                                                        meta={"session_id": "s"})
                    assert not result.is_error

                await call()  # the client may list once when it connects
                before = counter.listings
                for _ in range(10):
                    await call()
                return counter.listings - before

        assert asyncio.run(main()) == 0
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    schema = app._mcp_server.get_tool_input_schema("banking_get_balance")
    assert schema == banking.server.tools["get_balance"].spec.parameters
