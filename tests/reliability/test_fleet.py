"""Scale-out on real parts: ``prove serve`` processes behind a real nginx, sessions pinned.

Needs nginx (Debian: ``apt install nginx-light``; CI installs it). The load check here is the
benchmark's proxy phase at test size (``benchmarks/bench_load.py --workers``): every call is
replayed on the fast path, every end state read through the proxy, every session found on one
process only.
"""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

import httpx
import pytest

from benchmarks.bench_load import free_port, proxy_load, wait_for_port
from prove_core.env.runtime import ServerRuntime
from prove_core.errors import ConfigError
from prove_core.serve.client import SessionClient, SessionLost
from prove_core.serve.fleet import Fleet, nginx_config, owner_of, route_key
from prove_servers import banking
from tests.reliability.conftest import RawMcp
from tests.reliability.test_control import freeze_args

NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (Debian: apt install nginx-light)")
pytestmark = pytest.mark.slow

V = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}
ENV = {"PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}


def call(client, url, tool, arguments, sid, token=None):
    headers = {"accept": "application/json", "content-type": "application/json", "mcp-protocol-version": V,
               "mcp-method": "tools/call", "mcp-name": tool, "x-prove-session": sid.encode()}
    if token:
        headers["authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {**ENVELOPE, "session_id": sid}}}
    return client.post(url, headers=headers, json=body)


def test_route_keys_and_the_configuration():
    assert route_key("abc") == "abc" and route_key("abc.def.ghi") == "abc" and route_key("") == ""
    conf = nginx_config(listen="127.0.0.1:9000", backends=["127.0.0.1:9001", "127.0.0.1:9002"], workdir="/tmp/x")
    assert "hash $prove_route;" in conf and conf.count("max_fails=0") == 4  # the hash group and one pinned each
    assert "proxy_next_upstream error;" in conf and "listen 127.0.0.1:9000;" in conf
    assert "client_header_timeout 10s;" in conf and "limit_conn prove_conns 4096;" in conf
    assert "limit_conn_zone $prove_everyone" in conf  # one key for all: an empty key would count nothing


@needs_nginx
def test_nginx_accepts_the_configuration(tmp_path):
    conf = tmp_path / "nginx.conf"
    conf.write_text(nginx_config(listen=f"127.0.0.1:{free_port()}", backends=["127.0.0.1:9001", "127.0.0.1:9002"],
                                 workdir=tmp_path))
    done = subprocess.run([NGINX, "-t", "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_a_fleet_without_nginx_is_refused_with_what_to_install(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    monkeypatch.setattr(os, "access", lambda *_a: False)
    with pytest.raises(ConfigError, match="apt install nginx-light"):
        Fleet(["banking"], workers=2)
    with pytest.raises(ConfigError, match="at least 2 workers"):
        Fleet(["banking"], workers=1, nginx="/bin/true")


@needs_nginx
def test_hundreds_of_sessions_through_the_proxy_lose_nothing():
    report = proxy_load(["banking", "calendar"], workers=2, sessions=96, duration=60, max_calls=6)
    assert report["unhandled"] == 0, report["unhandled_examples"]
    assert report["mismatches"] == 0, report["mismatch_examples"]
    assert report["load"]["calls"] == 96 * 6 and report["end_states_read"] > 0
    # pinned and spread: every session on exactly one process, both processes used
    assert sum(report["sessions_per_backend"]) == 96 and min(report["sessions_per_backend"]) > 0


def freeze_at(seed):
    """Arguments of a card freeze (a write) on seed ``seed``'s state."""
    rt = ServerRuntime(banking.server, seed=seed)
    return banking.server.tools["set_card_frozen"].examples[0](rt.state(rt.new_session()))


def call_meta_only(client, url, tool, arguments, sid, token=None):
    """A tools/call that names its session only in ``_meta.session_id`` (no header: nginx cannot see it)."""
    headers = {"accept": "application/json", "content-type": "application/json", "mcp-protocol-version": V,
               "mcp-method": "tools/call", "mcp-name": tool}
    if token:
        headers["authorization"] = f"Bearer {token}"
    meta = {**ENVELOPE, **({} if sid is None else {"session_id": sid})}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments,
                                                                          "_meta": meta}}
    return client.post(url, headers=headers, json=body)


def result_of(reply):
    assert reply.status_code == 200, reply.text
    return reply.json()["result"]


def live_counts(fleet, token):
    """Each worker's own count of live sessions (asked directly, not through the proxy)."""
    with httpx.Client(timeout=30, headers={"authorization": f"Bearer {token}"}) as http:
        return [http.get(f"http://127.0.0.1:{port}/sessions").json()["servers"]["banking"]["sessions"]
                for port, _ in fleet.backends]


def home_of(client, base, sid):
    """The worker that answers a session's state through the proxy (X-Prove-Worker), or None."""
    reply = client.get(f"{base}/sessions/{urllib.parse.quote(sid, safe='')}/state")
    return int(reply.headers["x-prove-worker"]) if reply.status_code == 200 else None


def test_owner_of_is_the_hash_nginx_routes_by():
    # Cache::Memcached's hash, as nginx's "hash $key" computes it for the first pick
    assert [owner_of(k, 2) for k in ("", "a", "abc", "abc.fork", "c")] == [0, 1, 0, 0, 1]
    assert owner_of("x.y", 3) == owner_of("x", 3) and {owner_of(f"id-{i}", 3) for i in range(50)} == {0, 1, 2}


@needs_nginx
def test_every_way_of_naming_a_session_reaches_the_one_process_that_holds_it(tmp_path):
    token = secrets.token_urlsafe(12)
    with Fleet(["banking"], workers=2, port=free_port(), env={**ENV, "PROVE_TOKEN": token}) as fleet:
        base = fleet.url.removesuffix("/mcp")
        control = SessionClient(base, token=token)
        args, args7 = freeze_args(), freeze_at(7)  # seed 7's records: a seed-0 session would not know them
        seeded = [control.create(seed=7) for _ in range(6)]  # server-issued: each on the worker that issued it
        chosen = [f"rollout/{i}/ü" for i in range(6)]  # client-chosen ids, with "/" and non-ASCII
        expected = {sid: control.state_hash(sid) for sid in seeded}
        with httpx.Client(timeout=30, headers={"authorization": f"Bearer {token}"}) as client:
            for sid in seeded + chosen:
                mine = args7 if sid in seeded else args
                # no header: nginx cannot see the id, the workers route it; the second freeze meets the first
                outcomes = [result_of(call_meta_only(client, fleet.url, "set_card_frozen", mine, sid, token))
                            for _ in range(3)]
                assert [o["structuredContent"].get("code") for o in outcomes] == [None, "CONFLICT", "CONFLICT"], outcomes
                assert all(o["_meta"]["session_id"] == sid for o in outcomes)
                reply = call(client, fleet.url, "list_cards", {"customer_id": mine["customer_id"]}, sid, token)
                assert not result_of(reply)["isError"], reply.text
                # nginx routed it by the header to the owner itself: nothing to pass on
                assert reply.headers["x-prove-worker"] == str(owner_of(sid, 2)), sid
            for sid in seeded:  # the calls met the seed-7 session, not a fresh seed-0 one elsewhere
                state = control.state(sid)
                assert state["servers"]["banking"]["seed"] == 7 and state["state_hash"] != expected[sid]
            # the shared default session is one session too
            defaults = [result_of(call_meta_only(client, fleet.url, "set_card_frozen", args, None, token))
                        for _ in range(4)]
            assert [d["structuredContent"].get("code") for d in defaults] == [None] + ["CONFLICT"] * 3
            homes = {sid: home_of(client, base, sid) for sid in [*seeded, *chosen, "default"]}
            assert all(home == owner_of(sid, 2) for sid, home in homes.items()), homes
            inside = client.post(f"{base}/_prove/call", json={"server": "banking", "tool": "list_cards",
                                                              "session_id": seeded[0], "arguments": {}})
            assert inside.status_code == 404  # the workers' own path is not reachable through the proxy
            twin = control.fork(seeded[0])  # a fork lives beside its parent
            assert route_key(twin) == route_key(seeded[0]) and home_of(client, base, twin) == homes[seeded[0]]
            control.reset(chosen[0], seed=3)
            assert control.state(chosen[0])["servers"]["banking"]["seed"] == 3
            control.close(chosen[1])
            closed = result_of(call_meta_only(client, fleet.url, "list_cards", {"customer_id": args["customer_id"]},
                                              chosen[1], token))
            assert closed["structuredContent"]["reason"] == "SESSION_CLOSED"
            # the MCP handshake era: its transport session is pinned to the worker that issued it,
            # and its calls still run on the worker that owns their session
            raw = RawMcp(fleet.url, {"authorization": f"Bearer {token}"})
            try:
                assert raw.headers["mcp-session-id"].startswith(("w0-", "w1-"))
                for sid in seeded[:3]:
                    assert not raw.call("list_cards", {"customer_id": args7["customer_id"]}, sid)["isError"]
                for sid in chosen[2:4]:
                    assert not raw.call("list_cards", {"customer_id": args["customer_id"]}, sid)["isError"]
            finally:
                raw.close()
        # nothing split and nothing fresh: the workers hold exactly the sessions named (twin included)
        assert sum(live_counts(fleet, token)) == len(seeded) + len(chosen) - 1 + 2
        control.close_connection()


@needs_nginx
def test_a_killed_worker_costs_only_its_own_sessions_each_with_a_typed_error():
    token = secrets.token_urlsafe(12)
    with Fleet(["banking"], workers=2, port=free_port(), env={**ENV, "PROVE_TOKEN": token}) as fleet:
        base = fleet.url.removesuffix("/mcp")
        control = SessionClient(base, token=token)
        ids = [f"s{i}" for i in range(24)]
        args = freeze_args()
        with httpx.Client(timeout=30, headers={"authorization": f"Bearer {token}"}) as client:
            for sid in ids:
                assert not result_of(call_meta_only(client, fleet.url, "set_card_frozen", args, sid, token))["isError"]
            victim = 0
            lost = [sid for sid in ids if owner_of(sid, 2) == victim]
            kept = [sid for sid in ids if sid not in lost]
            assert lost and kept
            fleet.backends[victim][1].kill()
            fleet.backends[victim][1].wait()
            for sid in ids:  # while it is down: its sessions typed, the others served as before
                answer = result_of(call_meta_only(client, fleet.url, "list_cards",
                                                  {"customer_id": args["customer_id"]}, sid, token))
                if sid in kept:
                    assert not answer["isError"], answer
                else:
                    assert answer["structuredContent"]["reason"] == "WORKER_UNAVAILABLE", answer
            fleet.check()  # the supervisor's step: restart it empty, record the loss once
            fleet.check()
            wait_for_port(fleet.backends[victim][0], fleet.backends[victim][1], fleet.workdir / "backend-0.log")
            for sid in ids:
                answer = result_of(call_meta_only(client, fleet.url, "list_cards",
                                                  {"customer_id": args["customer_id"]}, sid, token))
                if sid in kept:
                    assert not answer["isError"], answer
                else:  # never a fresh session in its place
                    assert answer["structuredContent"]["reason"] == "SESSION_LOST", answer
                    with pytest.raises(SessionLost):
                        control.state(sid)
            losses = control.sessions()["fleet"]["losses"]
            assert len(losses) == 1 and losses[0]["worker"] == victim and losses[0]["sessions_lost"] == len(lost)
            assert control.create(session_id=lost[0]) == lost[0]  # the explicit open works again
            assert live_counts(fleet, token)[victim] == 1
        control.close_connection()


def children_of(pid: int) -> set[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return {int(p) for p in found.split()}


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()[:1] != "Z"


def port_answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@needs_nginx
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL])
def test_prove_serve_workers_stops_everything_on_a_signal_and_frees_the_port(tmp_path, signum):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "prove_core", "serve", "banking", "--transport", "http",
                             "--workers", "2", "--port", str(port)], env={**os.environ, **ENV},
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "err", "wb"))
    try:
        wait_for_port(port, proc, tmp_path / "err")
        children = children_of(proc.pid)
        assert len(children) == 3  # nginx and two workers
        with httpx.Client(timeout=30) as client:
            answer = call(client, f"http://127.0.0.1:{port}/mcp", "find_customers", {"query": "example"}, "s1")
        assert answer.status_code == 200 and not answer.json()["result"]["isError"]
    finally:
        proc.send_signal(signum)
        code = proc.wait(timeout=120)  # a loaded machine: nginx drains, then the workers
    assert code == (-signal.SIGKILL if signum == signal.SIGKILL else 0), (tmp_path / "err").read_text()
    assert "2 processes behind nginx" in (tmp_path / "err").read_text()
    deadline = time.monotonic() + 15  # SIGKILL: the children get SIGTERM from the kernel and stop on their own
    while (port_answers(port) or [pid for pid in children if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not port_answers(port)
    assert not [pid for pid in children if running(pid)]  # nginx and the workers stopped with it


def _ignore_and_block_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


@needs_nginx
def test_prove_serve_workers_started_with_sigint_ignored_still_stops_on_sigint(tmp_path):
    """A job started in the background (``&``, a service manager) inherits SIGINT ignored, and a
    caller may pass it on blocked; the deployment still stops on it."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "prove_core", "serve", "banking", "--transport", "http",
                             "--workers", "2", "--port", str(port)], env={**os.environ, **ENV},
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "err", "wb"),
                            preexec_fn=_ignore_and_block_sigint)
    try:
        wait_for_port(port, proc, tmp_path / "err")
        children = children_of(proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    assert code == 0, (tmp_path / "err").read_text()
    deadline = time.monotonic() + 15
    while (port_answers(port) or [pid for pid in children if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not port_answers(port) and not [pid for pid in children if running(pid)]


def test_prove_serve_on_a_busy_port_says_so_in_one_line_before_serving(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for extra in ([], ["--workers", "2"]):
            done = subprocess.run([sys.executable, "-m", "prove_core", "serve", "banking", "--transport", "http",
                                   "--port", str(port), *extra], env={**os.environ, **ENV}, capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 1, done.stderr
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: ") and str(port) in lines[0], done.stderr
            assert "serving" not in done.stderr and "Traceback" not in done.stderr


@needs_nginx
def test_the_proxy_bounds_open_connections_with_a_typed_503():
    with Fleet(["banking"], workers=2, port=free_port(), env=ENV, max_connections=2, body_timeout_s=5) as fleet:
        held = []
        try:
            for _ in range(2):  # two requests in progress (their bodies still coming)
                conn = socket.create_connection(("127.0.0.1", fleet.port), timeout=5)
                conn.sendall(b"POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 50\r\n\r\n{")
                held.append(conn)
            time.sleep(0.5)
            with httpx.Client(timeout=10) as client:
                refused = client.get(fleet.url.removesuffix("/mcp") + "/sessions")
                assert refused.status_code == 503 and refused.json()["reason"] == "TOO_MANY_CONNECTIONS"
                for conn in held:
                    conn.close()
                held.clear()
                deadline = time.monotonic() + 10
                while client.get(fleet.url.removesuffix("/mcp") + "/sessions").status_code != 200:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
        finally:
            for conn in held:
                conn.close()
