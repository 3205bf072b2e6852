"""Load, checked: N concurrent sessions over MCP and over threads, replayed call by call.

1. **MCP**: `prove serve SERVERS --transport http` runs in a subprocess on 127.0.0.1 with a
   bearer token. A few fastmcp clients each multiplex their share of the sessions through
   ``_meta.session_id``; every session runs its own deterministic script (reads, writes and a
   few invalid calls, built from the tools' examples) until the time or call budget is spent.
   Every recorded call is then replayed sequentially on the in-process fast path: each result
   or typed error must be the same, call by call, and each session's end ``state_hash`` must
   equal the one the served process reports through its session control API
   (``SessionClient.state``: ``GET /sessions/{id}/state``, beside ``/mcp``, under the same token).
2. **Threads**: the same check on the fast path, with threads sharing one ``Environment``.
3. **Behind the proxy** (``--workers N``): ``prove serve --workers N``'s deployment, N processes
   behind nginx (``prove_core.serve.fleet``), with ``--proxy-sessions`` concurrent sessions as raw
   HTTP requests carrying ``X-Prove-Session``; the same replay check, end states read through the
   proxy, and each session found live on exactly one process.
4. **Soak**: rounds of fresh sessions that write and then expire (``--ttl``; the served process
   also with a ``--max-sessions`` bound of half a round and ``--evict-lru``), in the served process and in this one;
   RSS after each round, flat once the warm-up half is over.

Baselines measured in the same run: one session at a time over the same server (latency and
calls/s), one thread on the fast path, and the RSS at the end of the soak's warm-up half. Exits 1
on any mismatch, unhandled error, session bound exceeded or memory growth past ``--max-growth``.

    python benchmarks/bench_load.py                       # 256 sessions, 20 s, every server
    python benchmarks/bench_load.py --sessions 2000 --duration 60
    python benchmarks/bench_load.py --servers banking     # one server, no mounting
    python benchmarks/bench_load.py --workers 2 --skip mcp threads soak   # the nginx deployment only
    python benchmarks/bench_load.py --quick               # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prove_core.env.runtime import (  # noqa: E402
    Environment,
    ServerRuntime,
    example_at,  # noqa: E402
)
from prove_core.logging import configure  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402
from prove_core.serve import fleet  # noqa: E402
from prove_core.serve.client import SessionClient, SessionNotFound  # noqa: E402
from prove_core.serve.fleet import free_port  # noqa: E402
from prove_core.testing.conformance import bad_calls  # noqa: E402

# The served child: the real `prove serve` command line.
CHILD = "import sys; from prove_core.cli import main; main(sys.argv[1:])"

Record = tuple[str, dict[str, Any], bool, Any]  # tool, arguments, is_error, structured result


def rss_of(pid: int | None = None) -> int:
    with open(f"/proc/{pid or 'self'}/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Served:
    """`prove serve SERVERS --transport http` in a subprocess (a context manager). ``control`` is
    a ``SessionClient`` of it (``hashes()`` reads sessions' end states through it); ``stop()``
    shuts it down with SIGINT."""

    def __init__(self, servers: Sequence[str], *, seed: int = 0, args: Sequence[str] = (),
                 token: str | None = None) -> None:
        self.servers = list(servers)
        self.port = free_port()
        self.token = token or secrets.token_urlsafe(16)
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.headers = {"Authorization": f"Bearer {self.token}"}
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.control = SessionClient(self.base_url, token=self.token)
        self._dir = tempfile.TemporaryDirectory(prefix="prove-load-")
        self.stderr_path = Path(self._dir.name) / "stderr.log"
        self.argv = ["serve", *self.servers, "--transport", "http", "--port", str(self.port), "--seed", str(seed), *args]
        self.proc: subprocess.Popen | None = None
        self.stopped = False

    def __enter__(self) -> Served:
        env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1", "PROVE_TOKEN": self.token,
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, *self.argv], env=env,
                                     stdout=subprocess.DEVNULL, stderr=self._stderr, cwd=ROOT)
        wait_for_port(self.port, self.proc, self.stderr_path)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._dir.cleanup()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss(self) -> int:
        return rss_of(self.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def hashes(self, sessions: Sequence[str]) -> dict[str, dict[str, str]]:
        """``{server: {session: state_hash}}`` of the live sessions among ``sessions``, read from
        the served process through its session control API (the shape of ``live_hashes``)."""
        out: dict[str, dict[str, str]] = {server: {} for server in self.servers}
        for sid in sessions:
            try:
                state = self.control.state(sid)
            except SessionNotFound:  # expired, evicted or never opened: no end state to compare
                continue
            for server, part in state["servers"].items():
                if part["live"]:
                    out[server][sid] = part["state_hash"]
        return out

    def live_sessions(self) -> dict[str, int]:
        """``{server: live sessions}`` as the served process counts them."""
        return {server: part["sessions"] for server, part in self.control.sessions()["servers"].items()}

    def stop(self) -> None:
        if self.stopped or self.proc is None:
            return
        self.stopped = True
        self.control.close_connection()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


def wait_for_port(port: int, proc: subprocess.Popen, stderr_path: Path, timeout: float = 60.0) -> None:
    """Until ``proc`` listens on 127.0.0.1:``port`` (ProveError with its stderr if it exits first)."""
    fleet.wait_for_port("127.0.0.1", port, proc, "server", stderr_path, timeout)


@contextlib.contextmanager
def listening(argv: Sequence[str], port: int, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen, Path]]:
    """``argv`` in a subprocess that listens on 127.0.0.1:``port``: yields the process and its
    stderr file once the port accepts connections, and terminates it at the end."""
    with tempfile.TemporaryDirectory() as tmp:
        stderr_path = Path(tmp) / "stderr.log"
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(list(argv), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)
            try:
                wait_for_port(port, proc, stderr_path)
                yield proc, stderr_path
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def server_errors(stderr: str) -> list[str]:
    """Lines of a served process's stderr that show an unhandled error."""
    return [line for line in stderr.splitlines() if "Traceback" in line or line.startswith("ERROR")]


# -- scripts -------------------------------------------------------------------------------------


@attrs.frozen
class Move:
    tool: str
    args: dict[str, Any]


def environment(servers: Sequence[str], seed: int = 0, **runtime_options: Any) -> Environment:
    """The servers as `prove serve` mounts them (``<server>_`` prefixes when there are several)."""
    registry = Plugins().load(autoload=False).registry
    return Environment([ServerRuntime(registry.load("servers", s), seed=seed, **runtime_options) for s in servers])


def moves(env: Environment) -> dict[str, list[Move]]:
    """Every example of every tool as a read or a write, plus one wrong-typed call per tool. Each
    example is computed on its own scratch session: scripts are plain data, the same on every path."""
    pool: dict[str, list[Move]] = {"read": [], "write": [], "bad": []}
    for rt in env.runtimes.values():
        scratch = ServerRuntime(rt.server, seed=rt.seed, options=rt.options)
        for tool in rt.server.tools.values():
            name = env.public_name(rt.name, tool.name)
            kind = "read" if tool.spec.annotations.read_only else "write"
            first: dict[str, Any] = {}
            for i in range(len(tool.examples)):
                args = json.loads(json.dumps(example_at(tool, scratch, scratch.new_session(), i)))
                first = first or args
                pool[kind].append(Move(name, args))
            wrong = next((a for label, a in bad_calls(tool, first) if label.endswith("wrong type")), None)
            if wrong is not None:
                pool["bad"].append(Move(name, json.loads(json.dumps(wrong))))
    return pool


def script(pool: dict[str, list[Move]], session: int, *, seed: int = 0, writes: float = 0.5,
           bad: float = 0.05) -> Iterator[Move]:
    """Session ``session``'s endless, deterministic call script."""
    rng = random.Random(f"load:{seed}:{session}")
    while True:
        draw = rng.random()
        kind = "bad" if draw < bad else "write" if draw < bad + writes else "read"
        yield rng.choice(pool[kind])


@attrs.define
class Run:
    """What one load phase did: per-session call logs, latencies and anything unhandled."""

    logs: dict[str, list[Record]] = attrs.field(factory=dict)
    latencies: list[float] = attrs.field(factory=list)
    unhandled: list[str] = attrs.field(factory=list)
    teardown: list[str] = attrs.field(factory=list)  # errors closing a client, after every call ended
    seconds: float = 0.0

    @property
    def calls(self) -> int:
        return sum(len(log) for log in self.logs.values())

    def record(self, sid: str, move: Move, is_error: bool, structured: Any) -> None:
        """Log one call's outcome for the replay (and note it when it is not a result or a typed error)."""
        problem = unhandled_result(move.tool, is_error, structured)
        if problem:
            self.unhandled.append(f"{sid} {problem}")
        self.logs.setdefault(sid, []).append((move.tool, move.args, is_error, structured))

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies) or [0.0]
        records = [r for log in self.logs.values() for r in log]
        return {"sessions": len(self.logs), "calls": self.calls, "seconds": round(self.seconds, 2),
                "calls_per_s": round(self.calls / self.seconds, 1) if self.seconds else 0.0,
                "p50_ms": round(1000 * lat[len(lat) // 2], 2),
                "p99_ms": round(1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2),
                "typed_errors": sum(r[2] for r in records), "unhandled": len(self.unhandled),
                "client_teardown_errors": len(self.teardown)}


def unhandled_result(tool: str, is_error: bool, structured: Any) -> str | None:
    """Why a recorded result is not a success or a typed error, or None."""
    if not is_error:
        return None if isinstance(structured, dict) else f"{tool}: success without structured content"
    if not isinstance(structured, dict) or "code" not in structured:
        return f"{tool}: untyped error {str(structured)[:120]}"
    if structured["code"] == "INTERNAL":
        return f"{tool}: INTERNAL {structured.get('message', '')[:120]}"
    return None


# -- driving the served process ------------------------------------------------------------------


async def drive_mcp(served: Served, pool: dict[str, list[Move]], *, sessions: int, clients: int = 4,
                    duration: float = 20.0, max_calls: int | None = None, in_flight: int = 64,
                    seed: int = 0, prefix: str | None = None) -> Run:
    """``sessions`` concurrent sessions over ``clients`` fastmcp clients (at most ``in_flight``
    requests in flight per client), each running its script until ``duration`` seconds pass or it
    made ``max_calls`` calls."""
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    run = Run()
    prefix = prefix or f"load-{secrets.token_hex(4)}"
    conns = [Client(StreamableHttpTransport(served.url, headers=served.headers)) for _ in range(clients)]
    for client in conns:
        await client.__aenter__()
    try:
        gates = [asyncio.Semaphore(in_flight) for _ in conns]
        started = time.perf_counter()
        deadline = started + duration

        async def session(index: int) -> None:
            sid, client, gate = f"{prefix}-{index:05d}", conns[index % clients], gates[index % clients]
            log = run.logs.setdefault(sid, [])
            for move in script(pool, index, seed=seed):
                if time.perf_counter() >= deadline or (max_calls is not None and len(log) >= max_calls):
                    return
                async with gate:
                    t0 = time.perf_counter()
                    try:
                        result = await client.call_tool_mcp(move.tool, move.args, meta={"session_id": sid})
                    except Exception as exc:  # noqa: BLE001 - counted; the outcome of this call is unknown
                        run.unhandled.append(f"{sid} {move.tool}: {type(exc).__name__}: {exc}")
                        return
                    run.latencies.append(time.perf_counter() - t0)
                run.record(sid, move, bool(result.is_error), result.structured_content)

        await asyncio.gather(*(session(i) for i in range(sessions)))
        run.seconds = time.perf_counter() - started
    finally:
        for client in conns:  # after the last call: a failure here loses no call's outcome
            try:
                await client.__aexit__(None, None, None)
            except Exception as exc:  # noqa: BLE001 - reported on its own
                run.teardown.append(f"closing a client: {type(exc).__name__}: {exc}")
    return run


def drive_threads(env: Environment, pool: dict[str, list[Move]], *, sessions: int, threads: int = 8,
                  duration: float = 20.0, max_calls: int | None = None, seed: int = 0) -> Run:
    """The same scripts on the fast path: ``threads`` threads share ``env``; each one takes
    every ``threads``-th session and runs its sessions round-robin, one call at a time."""
    run = Run()
    prefix = f"threads-{secrets.token_hex(4)}"
    for i in range(sessions):
        run.logs[f"{prefix}-{i:05d}"] = []
    lock = threading.Lock()
    started = time.perf_counter()
    deadline = started + duration

    def worker(first: int) -> None:
        mine = [(f"{prefix}-{i:05d}", script(pool, i, seed=seed)) for i in range(first, sessions, threads)]
        latencies: list[float] = []
        while mine and time.perf_counter() < deadline:
            for entry in list(mine):
                sid, steps = entry
                log = run.logs[sid]
                if max_calls is not None and len(log) >= max_calls:
                    mine.remove(entry)
                    continue
                move = next(steps)
                t0 = time.perf_counter()
                try:
                    result = env.call(sid, move.tool, move.args)
                except Exception as exc:  # noqa: BLE001
                    with lock:
                        run.unhandled.append(f"{sid} {move.tool}: raised {type(exc).__name__}: {exc}")
                    mine.remove(entry)
                    continue
                latencies.append(time.perf_counter() - t0)
                problem = unhandled_result(move.tool, result.is_error, result.structured)
                if problem:
                    with lock:
                        run.unhandled.append(f"{sid} {problem}")
                log.append((move.tool, move.args, result.is_error, result.structured))
        with lock:
            run.latencies.extend(latencies)

    pool_threads = [threading.Thread(target=worker, args=(t,)) for t in range(min(threads, sessions))]
    for t in pool_threads:
        t.start()
    for t in pool_threads:
        t.join()
    run.seconds = time.perf_counter() - started
    return run


# -- the check -----------------------------------------------------------------------------------


def live_hashes(env: Environment, sessions: Sequence[str]) -> dict[str, dict[str, str]]:
    """``{server: {session: state_hash}}`` for the sessions each runtime of ``env`` holds."""
    return {name: {sid: rt.state_hash(sid) for sid in sessions if sid in rt} for name, rt in env.runtimes.items()}


def replay_check(servers: Sequence[str], logs: dict[str, list[Record]], end_hashes: dict[str, dict[str, str]], *,
                 seed: int = 0) -> list[str]:
    """Replay every session's calls one after another on a fresh fast-path environment; return
    each disagreement: a result or error that differs, a session one side has and the other
    lacks, or an end state that differs."""
    env = environment(servers, seed)
    mismatches: list[str] = []
    for sid, log in logs.items():
        for n, (tool, args, is_error, structured) in enumerate(log):
            got = env.call(sid, tool, args)
            if got.is_error != is_error or got.structured != structured:
                recorded, replayed = (json.dumps(x, default=str)[:120] for x in (structured, got.structured))
                mismatches.append(f"{sid} call {n} {tool}({json.dumps(args)[:80]}): recorded {recorded}, replay {replayed}")
    replayed = live_hashes(env, list(logs))
    for server in env.runtimes:
        theirs = {sid: h for sid, h in end_hashes.get(server, {}).items() if sid in logs}
        ours = replayed[server]
        for sid in sorted(set(theirs) | set(ours)):
            if theirs.get(sid) != ours.get(sid):
                mismatches.append(f"{sid} on {server}: end state {str(theirs.get(sid))[:12]} under load, "
                                  f"{str(ours.get(sid))[:12]} replayed")
    return mismatches


def mcp_load(servers: Sequence[str], *, sessions: int, clients: int = 4, duration: float = 20.0,
             max_calls: int | None = None, baseline_calls: int = 0, seed: int = 0,
             serve_args: Sequence[str] = ()) -> dict[str, Any]:
    """Phase 1: the served process under load, then the replay check. With ``baseline_calls``
    one session first runs that many calls alone (the unloaded baseline)."""
    pool = moves(environment(servers, seed))
    with Served(servers, seed=seed, args=serve_args) as served:
        baseline = None
        if baseline_calls:
            baseline = asyncio.run(drive_mcp(served, pool, sessions=1, clients=1, duration=duration,
                                             max_calls=baseline_calls, seed=seed + 1, prefix="baseline"))
        loaded = asyncio.run(drive_mcp(served, pool, sessions=sessions, clients=clients, duration=duration,
                                       max_calls=max_calls, seed=seed))
        rss = served.rss()
        logs = {**(baseline.logs if baseline else {}), **loaded.logs}
        end_hashes = served.hashes(list(logs))
        served.stop()
        log = served.stderr()
        errors = server_errors(log)
    mismatches = replay_check(servers, logs, end_hashes, seed=seed)
    teardown = loaded.teardown + (baseline.teardown if baseline else [])
    report = {"load": loaded.summary(), "mismatches": len(mismatches), "mismatch_examples": mismatches[:5],
              "client_teardown_errors": len(teardown), "teardown_examples": teardown[:3],
              "unhandled": len(loaded.unhandled) + (len(baseline.unhandled) if baseline else 0) + len(errors),
              "unhandled_examples": (loaded.unhandled + (baseline.unhandled if baseline else []) + errors)[:5],
              "served_rss_mib": round(rss / 2**20, 1),
              "end_states_read": sum(len(h) for h in end_hashes.values())}
    if baseline:
        report["baseline"] = baseline.summary()
    if report["unhandled"] or teardown:
        report["server_log_tail"] = log[-3000:]
    return report


def thread_load(servers: Sequence[str], *, sessions: int, threads: int = 8, duration: float = 20.0,
                max_calls: int | None = None, seed: int = 0, baseline: bool = False) -> dict[str, Any]:
    """Phase 2: the fast path under threads, then the replay check; with ``baseline`` the same
    sessions first run on one thread (another environment)."""
    env = environment(servers, seed)
    pool = moves(env)
    report: dict[str, Any] = {}
    if baseline:
        single = drive_threads(environment(servers, seed), pool, sessions=sessions, threads=1, duration=duration,
                               max_calls=max_calls, seed=seed)
        report["baseline"] = single.summary()
    run = drive_threads(env, pool, sessions=sessions, threads=threads, duration=duration, max_calls=max_calls, seed=seed)
    mismatches = replay_check(servers, run.logs, live_hashes(env, list(run.logs)), seed=seed)
    report.update({"load": run.summary(), "mismatches": len(mismatches), "mismatch_examples": mismatches[:5],
                   "unhandled": len(run.unhandled), "unhandled_examples": run.unhandled[:5]})
    return report


# -- behind the proxy ----------------------------------------------------------------------------

MCP_VERSION = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MCP_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}


async def drive_http(url: str, token: str, pool: dict[str, list[Move]], *, sessions: int, connections: int = 8,
                     duration: float = 20.0, max_calls: int | None = None, seed: int = 0,
                     prefix: str | None = None, header: bool = True) -> Run:
    """``sessions`` concurrent sessions as raw streamable-HTTP ``tools/call`` requests (the 2026
    era), each carrying its session id in ``_meta.session_id`` and (with ``header``) in the
    ``X-Prove-Session`` header (what a proxy routes by), over at most ``connections`` keep-alive
    connections."""
    import httpx

    run = Run()
    prefix = prefix or f"proxy-{secrets.token_hex(4)}"
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    base = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream",
            "content-type": "application/json", "mcp-protocol-version": MCP_VERSION, "mcp-method": "tools/call"}
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        started = time.perf_counter()
        deadline = started + duration

        async def session(index: int) -> None:
            sid = f"{prefix}-{index:05d}"
            log = run.logs.setdefault(sid, [])
            for n, move in enumerate(script(pool, index, seed=seed)):
                if time.perf_counter() >= deadline or (max_calls is not None and len(log) >= max_calls):
                    return
                body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                        "params": {"name": move.tool, "arguments": move.args, "_meta": {**ENVELOPE, "session_id": sid}}}
                t0 = time.perf_counter()
                try:
                    named = {"x-prove-session": sid} if header else {}
                    response = await client.post(url, json=body, headers={**base, "mcp-name": move.tool, **named})
                    result = response.json()["result"]
                except Exception as exc:  # noqa: BLE001 - counted; the outcome of this call is unknown
                    run.unhandled.append(f"{sid} {move.tool}: {type(exc).__name__}: {exc}")
                    return
                run.latencies.append(time.perf_counter() - t0)
                run.record(sid, move, bool(result.get("isError")), result.get("structuredContent"))

        await asyncio.gather(*(session(i) for i in range(sessions)))
        run.seconds = time.perf_counter() - started
    return run


def proxy_load(servers: Sequence[str], *, workers: int, sessions: int, duration: float = 20.0,
               max_calls: int | None = None, connections: int = 8, seed: int = 0,
               serve_args: Sequence[str] = (), header: bool = True) -> dict[str, Any]:
    """The scale-out deployment under load: ``workers`` ``prove serve`` processes behind nginx
    (``prove_core.serve.fleet``, as ``prove serve --workers`` runs it), ``sessions`` concurrent
    sessions through the proxy, then the replay check (end states read through the proxy's
    control API) and where the sessions lived (each worker's own count: every session on
    exactly one process). Without ``header`` the calls name their session in ``_meta`` only, so
    the workers pass on what nginx sent elsewhere."""
    import httpx

    from prove_core.serve.fleet import Fleet

    pool = moves(environment(servers, seed))
    token = secrets.token_urlsafe(16)
    env = {"PROVE_DISABLE_PLUGIN_AUTOLOAD": "1", "PROVE_TOKEN": token,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    port = free_port()
    with Fleet([*servers, "--seed", str(seed), *serve_args], workers=workers, port=port, env=env) as fleet:
        loaded = asyncio.run(drive_http(fleet.url, token, pool, sessions=sessions, connections=connections,
                                        duration=duration, max_calls=max_calls, seed=seed, header=header))
        control = SessionClient(f"http://127.0.0.1:{port}", token=token)
        hashes: dict[str, dict[str, str]] = {server: {} for server in servers}
        for sid in loaded.logs:
            try:
                state = control.state(sid)
            except SessionNotFound:
                continue
            for server, part in state["servers"].items():
                if part["live"]:
                    hashes[server][sid] = part["state_hash"]
        control.close_connection()
        # Where each session lives: the worker that answers its state (X-Prove-Worker; a worker passes a
        # request on to the owner), and each worker's own count of live sessions: a session split over
        # two processes would make the counts add up to more than the sessions read.
        homes: dict[str, list[int]] = {sid: [] for sid in loaded.logs}
        with httpx.Client(timeout=30, headers={"authorization": f"Bearer {token}"}) as http:
            for sid in loaded.logs:
                reply = http.get(f"http://127.0.0.1:{port}/sessions/{urllib.parse.quote(sid, safe='')}/state")
                if reply.status_code == 200:
                    homes[sid].append(int(reply.headers["x-prove-worker"]))
            counts = [http.get(f"http://127.0.0.1:{backend_port}/sessions").json()["servers"]
                      for backend_port, _ in fleet.backends]
        extra = sum(sum(c[server]["sessions"] for c in counts) - len(hashes[server]) for server in servers)
        problem = fleet.dead()
        logs = [path.read_text(errors="replace") for path in sorted(fleet.workdir.glob("backend-*.log"))]
    errors = [line for log in logs for line in server_errors(log)] + ([problem] if problem else [])
    mismatches = replay_check(servers, loaded.logs, hashes, seed=seed)
    split = sorted(sid for sid, where in homes.items() if len(where) > 1)
    mismatches += [f"{sid}: live on backends {homes[sid]} (a session must live on one process)" for sid in split]
    if extra:
        mismatches.append(f"the workers hold {extra} live sessions more than the sessions read: some live on two processes")
    per_backend = [sum(where == [i] for where in homes.values()) for i in range(workers)]
    return {"load": loaded.summary(), "workers": workers, "mismatches": len(mismatches),
            "mismatch_examples": mismatches[:5], "sessions_per_backend": per_backend,
            "unhandled": len(loaded.unhandled) + len(errors), "unhandled_examples": (loaded.unhandled + errors)[:5],
            "end_states_read": sum(len(h) for h in hashes.values())}


# -- soak ----------------------------------------------------------------------------------------


def mcp_soak(servers: Sequence[str], *, rounds: int, sessions: int, calls: int = 4, ttl: float = 1.0,
             clients: int = 4, seed: int = 0) -> dict[str, Any]:
    """Rounds of ``sessions`` fresh sessions, ``calls`` calls each, over MCP with ``--ttl`` and a
    ``--max-sessions`` bound of half a round and ``--evict-lru`` (so the bound evicts while a round runs); after each
    round the sessions expire and the next round's first call sweeps them. Returns the served
    process's RSS after each round and the most sessions any server held at the end."""
    pool = moves(environment(servers, seed))
    rss: list[int] = []
    unhandled: list[str] = []
    teardown: list[str] = []
    bound = max(1, sessions // 2)
    with Served(servers, seed=seed, args=["--ttl", str(ttl), "--max-sessions", str(bound), "--evict-lru"]) as served:
        for n in range(rounds):
            run = asyncio.run(drive_mcp(served, pool, sessions=sessions, clients=clients, duration=3600,
                                        max_calls=calls, seed=seed + n, prefix=f"soak{n}"))
            unhandled += run.unhandled
            teardown += run.teardown
            time.sleep(ttl * 1.5)
            rss.append(served.rss())
        alive = max(served.live_sessions().values(), default=0)
        served.stop()
        log = served.stderr()
        unhandled += server_errors(log)
    if alive > bound:
        unhandled.append(f"{alive} sessions alive, over the bound of {bound}")
    return {"rounds": rounds, "sessions_per_round": sessions, "calls_per_session": calls, "max_sessions": bound,
            "rss_mib": [round(r / 2**20, 1) for r in rss], "live_sessions_at_end": alive,
            "unhandled": len(unhandled), "unhandled_examples": unhandled[:5],
            "client_teardown_errors": len(teardown), "teardown_examples": teardown[:3],
            **({"server_log_tail": log[-3000:]} if unhandled or teardown else {})}


def local_soak(servers: Sequence[str], *, rounds: int, sessions: int, calls: int = 4, ttl: float = 0.2,
               seed: int = 0) -> dict[str, Any]:
    """The same rounds on the fast path in this process (RSS of this process)."""
    env = environment(servers, seed, ttl_s=ttl)
    pool = moves(env)
    rss = []
    for n in range(rounds):
        for i in range(sessions):
            steps = script(pool, i, seed=seed + n)
            for _ in range(calls):
                move = next(steps)
                env.call(f"soak{n}-{i}", move.tool, move.args)
        time.sleep(ttl * 1.5)
        for rt in env.runtimes.values():
            rt.evict_expired()
        gc.collect()
        rss.append(rss_of())
    alive = max(len(rt) for rt in env.runtimes.values())
    return {"rounds": rounds, "sessions_per_round": sessions, "calls_per_session": calls,
            "rss_mib": [round(r / 2**20, 1) for r in rss], "live_sessions_at_end": alive}


def growth(rss_mib: list[float]) -> float:
    """MiB gained from the end of the warm-up (the first half of the rounds: allocator arenas and
    caches fill there) to the end of the last round. Flat memory: about zero."""
    if len(rss_mib) < 2:
        return 0.0
    return round(rss_mib[-1] - max(rss_mib[: len(rss_mib) // 2]), 1)


# -- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", nargs="+", default=None, help="servers to serve (default: every registered one)")
    parser.add_argument("--sessions", type=int, default=256, help="concurrent sessions")
    parser.add_argument("--clients", type=int, default=4, help="MCP clients the sessions are spread over")
    parser.add_argument("--threads", type=int, default=8, help="threads on the fast path")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds each load phase runs")
    parser.add_argument("--baseline-calls", type=int, default=300, help="calls of the one-session baseline")
    parser.add_argument("--call-timeout", type=float, default=None,
                        help="prove serve --call-timeout (default: its own, 30 s; 0 runs calls inline)")
    parser.add_argument("--workers", type=int, default=0,
                        help="also run the proxy phase: this many prove serve processes behind nginx (prove serve "
                             "--workers), the sessions through the proxy")
    parser.add_argument("--proxy-sessions", type=int, default=512, help="concurrent sessions of the proxy phase")
    parser.add_argument("--proxy-meta-only", action="store_true",
                        help="run the proxy phase again with the session id in _meta only (the workers route it)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["mcp", "threads", "soak"], help="phases to leave out")
    parser.add_argument("--soak-rounds", type=int, default=10)
    parser.add_argument("--soak-sessions", type=int, default=256)
    parser.add_argument("--max-growth", type=float, default=32.0, help="MiB of RSS growth the soak tolerates")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 32 sessions, 4 s phases, 3 soak rounds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    ns = parser.parse_args()
    configure(level="warning")
    if ns.quick:
        ns.sessions, ns.duration, ns.baseline_calls, ns.soak_rounds, ns.soak_sessions = 32, 4.0, 50, 3, 32
    servers = ns.servers or Plugins().load(autoload=False).registry.names("servers")

    serve_args = [] if ns.call_timeout is None else ["--call-timeout", str(ns.call_timeout)]
    results: dict[str, Any] = {"servers": len(servers)}
    if "mcp" not in ns.skip:
        results["mcp"] = mcp_load(servers, sessions=ns.sessions, clients=ns.clients, duration=ns.duration,
                                  baseline_calls=ns.baseline_calls, serve_args=serve_args)
        report_mcp(results["mcp"], ns.clients, len(servers))
    if ns.workers:
        results["proxy"] = proxy_load(servers, workers=ns.workers, sessions=ns.proxy_sessions, duration=ns.duration,
                                      serve_args=serve_args)
        report_proxy(results["proxy"], len(servers))
        if ns.proxy_meta_only:
            results["proxy_meta_only"] = proxy_load(servers, workers=ns.workers, sessions=ns.proxy_sessions,
                                                    duration=ns.duration, serve_args=serve_args, header=False)
            print("  _meta only (no X-Prove-Session):")
            report_proxy(results["proxy_meta_only"], len(servers))
    if "threads" not in ns.skip:
        results["threads"] = thread_load(servers, sessions=ns.sessions, threads=ns.threads, duration=ns.duration,
                                         baseline=True)
        report_threads(results["threads"], ns.threads)
    if "soak" not in ns.skip:
        results["soak_mcp"] = mcp_soak(servers, rounds=ns.soak_rounds, sessions=ns.soak_sessions)
        results["soak_local"] = local_soak(servers, rounds=ns.soak_rounds, sessions=ns.soak_sessions * 4)
        for label, key in (("soak MCP", "soak_mcp"), ("soak local", "soak_local")):
            report_soak(label, results[key], ns.max_growth)
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=2))
    failed = [name for name in ("mcp", "proxy", "threads", "soak_mcp")
              if name in results and (results[name].get("mismatches") or results[name].get("unhandled"))]
    failed += [name for name in ("soak_mcp", "soak_local")
               if name in results and growth(results[name]["rss_mib"]) > ns.max_growth]
    for name in failed:
        part = results[name]
        print(f"FAILED {name}: {part.get('mismatch_examples') or part.get('unhandled_examples') or part['rss_mib']}")
    sys.exit(1 if failed else 0)


def report_mcp(mcp: dict[str, Any], clients: int, servers: int) -> None:
    load, base = mcp["load"], mcp.get("baseline", {})
    print(f"MCP load       {load['sessions']} sessions over {clients} clients, {servers} servers: "
          f"{load['calls']:,} calls in {load['seconds']} s = {load['calls_per_s']:,} calls/s, "
          f"p50 {load['p50_ms']} ms, p99 {load['p99_ms']} ms "
          f"({load['typed_errors']:,} typed errors)")
    if base:
        print(f"  baseline     one session alone: {base['calls_per_s']:,} calls/s, p50 {base['p50_ms']} ms   "
              f"throughput ratio {load['calls_per_s'] / max(base['calls_per_s'], 1e-9):.1f}x, "
              f"p50 ratio {load['p50_ms'] / max(base['p50_ms'], 1e-9):.1f}x")
    print(f"  check        {mcp['mismatches']} mismatches, {mcp['unhandled']} unhandled errors (replayed call by call, "
          f"{mcp['end_states_read']:,} end state hashes from the served process's control API)", flush=True)
    if mcp.get("client_teardown_errors"):
        print(f"  note         {mcp['client_teardown_errors']} errors closing clients after their last call: "
              f"{mcp['teardown_examples'][0]}")


def report_proxy(proxy: dict[str, Any], servers: int) -> None:
    load = proxy["load"]
    print(f"behind nginx   {load['sessions']} sessions, {proxy['workers']} prove serve processes, {servers} servers: "
          f"{load['calls']:,} calls in {load['seconds']} s = {load['calls_per_s']:,} calls/s, p50 {load['p50_ms']} ms, "
          f"p99 {load['p99_ms']} ms; sessions per process {proxy['sessions_per_backend']}")
    print(f"  check        {proxy['mismatches']} mismatches, {proxy['unhandled']} unhandled errors (replayed call by call, "
          f"{proxy['end_states_read']:,} end states read through the proxy)", flush=True)


def report_threads(threads: dict[str, Any], count: int) -> None:
    tl, tb = threads["load"], threads["baseline"]
    print(f"fast path      {tl['sessions']} sessions on {count} threads: {tl['calls']:,} calls = {tl['calls_per_s']:,} "
          f"calls/s, p50 {tl['p50_ms']} ms, p99 {tl['p99_ms']} ms; one thread {tb['calls_per_s']:,} calls/s "
          f"(ratio {tl['calls_per_s'] / max(tb['calls_per_s'], 1e-9):.2f}x)")
    print(f"  check        {threads['mismatches']} mismatches, {threads['unhandled']} unhandled errors", flush=True)


def report_soak(label: str, soak: dict[str, Any], limit: float) -> None:
    bound = f" (bound {soak['max_sessions']})" if "max_sessions" in soak else ""
    print(f"{label:<14} {soak['rounds']} rounds x {soak['sessions_per_round']} sessions: RSS {soak['rss_mib'][0]} -> "
          f"{soak['rss_mib'][-1]} MiB ({growth(soak['rss_mib']):+} MiB after the warm-up half, limit {limit}); "
          f"{soak['live_sessions_at_end']} sessions alive at the end{bound}", flush=True)
    if soak.get("client_teardown_errors"):
        print(f"  note         {soak['client_teardown_errors']} errors closing clients after their last call: "
              f"{soak['teardown_examples'][0]}")


if __name__ == "__main__":
    main()
