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
import subprocess
import sys
import time

import httpx
import pytest

from benchmarks.bench_load import free_port, proxy_load, wait_for_port
from prove_core.errors import ConfigError
from prove_core.serve.client import SessionClient, SessionNotFound
from prove_core.serve.fleet import Fleet, nginx_config, route_key
from tests.reliability.test_control import freeze_args

NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (Debian: apt install nginx-light)")
pytestmark = pytest.mark.slow

V = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}
ENV = {"PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}


def call(client, url, tool, arguments, sid, token=None):
    headers = {"accept": "application/json", "content-type": "application/json", "mcp-protocol-version": V,
               "mcp-method": "tools/call", "mcp-name": tool, "x-prove-session": sid}
    if token:
        headers["authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {**ENVELOPE, "session_id": sid}}}
    return client.post(url, headers=headers, json=body)


def holds(port, token, sid) -> bool:
    """Whether the backend on ``port`` (asked directly, not through the proxy) holds ``sid``."""
    direct = SessionClient(f"http://127.0.0.1:{port}", token=token)
    try:
        return any(part["live"] for part in direct.state(sid)["servers"].values())
    except SessionNotFound:
        return False
    finally:
        direct.close_connection()


def test_route_keys_and_the_configuration():
    assert route_key("abc") == "abc" and route_key("abc.def.ghi") == "abc" and route_key("") == ""
    conf = nginx_config(listen="127.0.0.1:9000", backends=["127.0.0.1:9001", "127.0.0.1:9002"], workdir="/tmp/x")
    assert "hash $prove_route consistent;" in conf and conf.count("max_fails=0") == 2
    assert "proxy_next_upstream off;" in conf and "listen 127.0.0.1:9000;" in conf


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


@needs_nginx
def test_forks_follow_their_parent_and_a_dead_process_is_never_replaced_silently():
    token = secrets.token_urlsafe(12)
    with Fleet(["banking"], workers=2, port=free_port(), env={**ENV, "PROVE_TOKEN": token}) as fleet:
        control = SessionClient(fleet.url.removesuffix("/mcp"), token=token)
        with httpx.Client(timeout=30) as client:
            args = freeze_args()  # a card freeze on the seed state: a write
            frozen = call(client, fleet.url, "set_card_frozen", args, "parent", token)
            assert not frozen.json()["result"]["isError"], frozen.json()
            customer = args["customer_id"]
            twin = control.fork("parent")
            assert route_key(twin) == "parent"
            assert control.state_hash(twin) == control.state_hash("parent")  # the fork met its parent's state
            thawed = call(client, fleet.url, "set_card_frozen", {**args, "frozen": False}, twin, token)
            assert not thawed.json()["result"]["isError"]
            assert control.state_hash(twin) != control.state_hash("parent")
            # which process holds "parent"? kill it: its sessions answer 502, never a fresh session elsewhere
            homes = [i for i, (port, _) in enumerate(fleet.backends) if holds(port, token, "parent")]
            assert len(homes) == 1 and homes == [i for i, (port, _) in enumerate(fleet.backends)
                                                 if holds(port, token, twin)]
            home = homes[0]
            fleet.backends[home][1].kill()
            fleet.backends[home][1].wait()
            after = call(client, fleet.url, "list_cards", {"customer_id": customer}, "parent", token)
            assert after.status_code == 502
            assert "backend" in (fleet.dead() or "")
        control.close_connection()
        fleet.failed = True  # keep nothing running; the logs stay in workdir for a look


@needs_nginx
def fleet_processes() -> set[str]:
    found = subprocess.run(["pgrep", "-f", "prove-fleet-"], capture_output=True, text=True).stdout
    return set(found.split())


@needs_nginx
def test_prove_serve_workers_runs_the_deployment_and_stops_cleanly(tmp_path):
    before = fleet_processes()
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "prove_core", "serve", "banking", "--transport", "http",
                             "--workers", "2", "--port", str(port)], env={**os.environ, **ENV},
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "err", "wb"))
    try:
        wait_for_port(port, proc, tmp_path / "err")
        with httpx.Client(timeout=30) as client:
            answer = call(client, f"http://127.0.0.1:{port}/mcp", "find_customers", {"query": "example"}, "s1")
        assert answer.status_code == 200 and not answer.json()["result"]["isError"]
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0, (tmp_path / "err").read_text()
    assert "2 processes behind nginx" in (tmp_path / "err").read_text()
    time.sleep(0.5)
    assert fleet_processes() <= before  # nginx stopped with it
