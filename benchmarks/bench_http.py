"""MCP tool calls over streamable HTTP: the fast lane against the paths before it, one run, same clients.

Three servers of the same tools at the same seed run as subprocesses on 127.0.0.1:

- ``before``: the HTTP path as it was before the fast lane: fastmcp's pipeline for every
  request with SSE replies, uvicorn's pure-Python HTTP parser (h11) and asyncio's own loop, and
  each call's two thread hops (anyio's worker, then a thread started per tool body under the
  30 s deadline);
- ``plain``: ``prove serve --plain-http`` (fastmcp's pipeline and SSE replies) on today's stack
  (uvicorn with httptools and uvloop when installed, as the base install has them);
- ``fast``: ``prove serve`` as it runs by default (JSON replies, the ``tools/call`` fast lane).

Each is driven by the same two clients, one call at a time (the latency an agent waits for):

- ``raw``: a keep-alive ``httpx`` client posting 2026-era ``tools/call`` requests (the envelope
  ``_meta``, ``Mcp-Method``/``Mcp-Name`` headers) and reading JSON or SSE replies;
- ``sdk``: the official MCP Python SDK's ``Client`` (``streamable_http_client``).

Per server and client: calls/s, p50 and p99 latency, and the server process's CPU time per
call (read from ``/proc``: what the server itself spends, apart from the client). The script
checks that the three servers return the same results call for call, and exits 1 if not.

    python benchmarks/bench_http.py            # 3,000 raw and 1,000 SDK calls per server
    python benchmarks/bench_http.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_load import free_port, listening  # noqa: E402

V = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}

# The ``before`` server: the app as `prove serve --plain-http` builds it, on h11 and asyncio, with
# the runtime's calls as they ran before the fast lane: a hop into anyio's worker threads, and
# there a new thread started for every tool body under the deadline (both replaced by acall).
BEFORE = """
import sys, threading, anyio, uvicorn
from prove_core.env import runtime as rt
from prove_core.serve.app import build_app, http_app
from prove_core.config import SessionsConfig
from prove_core.logging import configure
from prove_core.plugin.manager import Plugins

async def acall(self, session_id, tool, arguments=None):
    return await anyio.to_thread.run_sync(self.call, session_id, tool, arguments)

def body(self, tool, tool_def, work, args):
    outcome = {}
    def run():
        try:
            outcome["data"] = tool_def.fn(work, **args)
        except BaseException as exc:
            outcome["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(self.call_timeout_s)
    if thread.is_alive():
        return None, self._deadline(tool)
    return outcome.get("data"), outcome.get("error")

rt.ServerRuntime.acall, rt.ServerRuntime._body = acall, body
configure()
server = Plugins().load(autoload=False).registry.load("servers", sys.argv[1])
runtime = rt.build_runtime(server, seed=int(sys.argv[3]), sessions=SessionsConfig(call_timeout_s=30.0))
app = http_app(build_app([runtime]), runtimes=[runtime], plain=True)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", lifespan="on", http="h11", loop="asyncio")
"""


def script(server: str, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """The calls every client makes, in a loop: reads of live records (taken from the seed state)
    and a call the schema rejects (a typed error, answered on the same path)."""
    if server != "banking":
        raise SystemExit("the call script is written for banking")
    from prove_core.env.runtime import build_runtime
    from prove_core.plugin.manager import Plugins

    runtime = build_runtime(Plugins().load(autoload=False).registry.load("servers", server), seed=seed)
    sid = runtime.new_session()
    customer = runtime.call(sid, "find_customers", {"query": "example"}).structured["customers"][0]
    return [("find_customers", {"query": customer["name"].split()[-1]}),
            ("list_accounts", {"customer_id": customer["id"]}),
            ("find_customers", {"query": "x"}),
            ("list_cards", {"customer_id": customer["id"]})]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summary(latencies: list[float], cpu: float) -> dict[str, float]:
    ordered = sorted(latencies)
    n = len(ordered)
    return {"calls": n, "calls_per_s": n / sum(ordered), "p50_ms": ordered[n // 2] * 1e3,
            "p99_ms": ordered[min(n - 1, int(n * 0.99))] * 1e3, "server_cpu_us": cpu / n * 1e6}


def raw_client(port: int, calls: list[tuple[str, dict[str, Any]]], n: int, pid: int) -> tuple[dict[str, float], list[Any]]:
    import httpx

    url = f"http://127.0.0.1:{port}/mcp"
    base = {"accept": "application/json, text/event-stream", "content-type": "application/json",
            "mcp-protocol-version": V, "mcp-method": "tools/call"}
    bodies = []
    for i, (name, arguments) in enumerate(calls):
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": name, "arguments": arguments, "_meta": {**ENVELOPE, "session_id": "bench"}}}
        bodies.append(({**base, "mcp-name": name}, json.dumps(body).encode()))
    results: list[Any] = []
    with httpx.Client(timeout=30) as client:
        for i in range(min(50, n)):  # warm-up
            client.post(url, headers=bodies[i % len(bodies)][0], content=bodies[i % len(bodies)][1])
        latencies = []
        start = cpu_seconds(pid)
        for i in range(n):
            headers, content = bodies[i % len(bodies)]
            t0 = time.perf_counter()
            response = client.post(url, headers=headers, content=content)
            latencies.append(time.perf_counter() - t0)
            if i < len(bodies):
                results.append(reply(response))
        cpu = cpu_seconds(pid) - start
    return summary(latencies, cpu), results


def reply(response: Any) -> Any:
    """The JSON-RPC result of a reply, JSON or SSE (without the server's ``_meta`` stamp)."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = [line[5:].strip() for line in text.splitlines() if line.startswith("data:") and line[5:].strip()][-1]
    message = json.loads(text)
    result = message["result"]
    return {"isError": result["isError"], "structuredContent": result["structuredContent"], "status": response.status_code}


def sdk_client(port: int, calls: list[tuple[str, dict[str, Any]]], n: int, pid: int) -> dict[str, float]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> dict[str, float]:
        async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp")) as client:
            for i in range(min(20, n)):
                name, arguments = calls[i % len(calls)]
                await client.call_tool(name, arguments, meta={"session_id": "sdk"})
            latencies = []
            start = cpu_seconds(pid)
            for i in range(n):
                name, arguments = calls[i % len(calls)]
                t0 = time.perf_counter()
                await client.call_tool(name, arguments, meta={"session_id": "sdk"})
                latencies.append(time.perf_counter() - t0)
            return summary(latencies, cpu_seconds(pid) - start)

    return asyncio.run(main())


def argv_of(mode: str, server: str, port: int, seed: int) -> list[str]:
    if mode == "before":
        return [sys.executable, "-c", BEFORE, server, str(port), str(seed)]
    flags = ["--plain-http"] if mode == "plain" else []
    return [sys.executable, "-m", "prove_core", "serve", server, "--transport", "http", "--port", str(port),
            "--seed", str(seed), *flags]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="raw-client calls per server")
    parser.add_argument("--sdk-calls", type=int, default=1000, help="SDK-client calls per server")
    parser.add_argument("--server", default="banking")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 300 raw and 100 SDK calls")
    parser.add_argument("--json", dest="json_out", help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.sdk_calls = 300, 100
    calls = script(args.server, args.seed)
    env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    figures: dict[str, dict[str, Any]] = {}
    answers: dict[str, list[Any]] = {}
    for mode in ("before", "plain", "fast"):
        port = free_port()
        with listening(argv_of(mode, args.server, port, args.seed), port, env) as (proc, _):
            raw, answers[mode] = raw_client(port, calls, args.calls, proc.pid)
            sdk = sdk_client(port, calls, args.sdk_calls, proc.pid)
        figures[mode] = {"raw": raw, "sdk": sdk}
    print(f"{args.server}, one call at a time ({os.cpu_count()} cores; clients and server share them)")
    print(f"{'server':8} {'client':6} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'server CPU µs/call':>19}")
    for mode, by_client in figures.items():
        for client, f in by_client.items():
            print(f"{mode:8} {client:6} {f['calls_per_s']:9.0f} {f['p50_ms']:8.2f} {f['p99_ms']:8.2f} {f['server_cpu_us']:19.0f}")
    ratios = {}
    for client in ("raw", "sdk"):
        for base in ("before", "plain"):
            fast, slow = figures["fast"][client], figures[base][client]
            ratios[f"{client}_vs_{base}"] = {"calls_per_s": fast["calls_per_s"] / slow["calls_per_s"],
                                             "server_cpu": slow["server_cpu_us"] / fast["server_cpu_us"]}
            print(f"fast vs {base:6} ({client}): {ratios[f'{client}_vs_{base}']['calls_per_s']:.2f}× calls/s, "
                  f"{ratios[f'{client}_vs_{base}']['server_cpu']:.2f}× less server CPU per call")
    same = answers["before"] == answers["plain"] == answers["fast"]
    print("same results on the three servers:", "yes" if same else "NO")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"figures": figures, "ratios": ratios, "same": same}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
