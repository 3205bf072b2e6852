"""`prove serve` as a spec-safe MCP server: DNS-rebinding protection (Host and Origin) over real
HTTP on 127.0.0.1 with forged headers, before the token and on every path; no silent state loss
(an expired or evicted session is a typed SESSION_EXPIRED error over the wire, the bound refuses
new sessions); options that cannot work stop the server at start with one line and exit 1;
prefixed-name collisions and unknown tools in a mount's tool filter are refused; ``serverInfo``
is PROVE's; the bearer scheme is case-insensitive; and the official conformance suite's
applicable server checks (when Node 22+ is present)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from fastmcp import Client

from benchmarks.bench_load import free_port, listening, server_errors
from prove_core import __version__, cli
from prove_core.env.runtime import ServerRuntime, ToolNameCollision
from prove_core.errors import ConfigError
from prove_core.serve.app import HostGuard, build_app, parse_mount, published_tools
from prove_servers.banking import server as banking
from prove_servers.shopping import server as shopping
from tests.reliability.conftest import RawMcp, jsonrpc_payload
from tests.support.toy import server as wallet

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@contextlib.contextmanager
def prove_serve(*args: str, token: str | None = None) -> Iterator[dict]:
    """`python -m prove_core serve ARGS --transport http` on 127.0.0.1, stopped at the end."""
    port = free_port()
    env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PROVE_TOKEN", None)
    argv = [sys.executable, "-m", "prove_core", "serve", *args, "--transport", "http", "--port", str(port)]
    with listening([*argv, *(["--token", token] if token else [])], port, env) as (proc, stderr_path):
        yield {"port": port, "url": f"http://127.0.0.1:{port}/mcp", "base": f"http://127.0.0.1:{port}",
               "token": token, "stderr": lambda: stderr_path.read_text(errors="replace"), "proc": proc}


def post(url: str, host: str | None = None, origin: str | None = None, token: str | None = None,
         body: dict | None = None, method: str = "POST") -> httpx.Response:
    headers = dict(MCP_HEADERS)
    if host is not None:
        headers["Host"] = host
    if origin is not None:
        headers["Origin"] = origin
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    content = json.dumps(body if body is not None else INITIALIZE).encode()
    with httpx.Client(timeout=30) as http:
        return http.request(method, url, headers=headers, content=content if method == "POST" else None)


def refused_as(response: httpx.Response, status: int, reason: str) -> bool:
    if response.status_code != status or response.headers.get("content-type") != "application/json":
        return False
    body = response.json()
    return body["code"] == "PERMISSION_DENIED" and body["reason"] == reason and body["message"]


# -- Host and Origin ------------------------------------------------------------------------------

LOOPBACK = ["127.0.0.1", "localhost", "LocalHost", "[::1]", "localhost."]
FOREIGN = ["evil.example.com", "127.0.0.1.evil.example.com", "localhost.evil.example.com", "evillocalhost",
           "127.0.0.2", "0.0.0.0", "[::2]", "10.0.0.1", "", "localhost:80:80", "user@localhost", "localhost/x",
           "[::1", "xn--localhost-9o3a"]


def test_a_foreign_host_gets_421_and_loopback_hosts_are_served_on_every_path():
    with prove_serve("banking") as served:
        port = served["port"]
        for name in LOOPBACK:
            for host in (name, f"{name}:{port}"):
                response = post(served["url"], host=host)
                assert response.status_code == 200, (host, response.status_code, response.text[:200])
                info = jsonrpc_payload(response.text)["result"]["serverInfo"]
                assert (info["name"], info["version"]) == ("prove", __version__)
        for host in FOREIGN + [f"evil.example.com:{port}", f"127.0.0.1.nip.io:{port}"]:
            response = post(served["url"], host=host)
            assert refused_as(response, 421, "HOST_NOT_ALLOWED"), (host, response.status_code, response.text[:200])
        for path in ("/", "/mcp/", "/sessions", "/sessions/x/state", "/.well-known/oauth-protected-resource",
                     "/%2e%2e/mcp", "/docs"):
            for method in ("GET", "POST", "DELETE", "OPTIONS"):
                response = post(served["base"] + path, host="evil.example.com", method=method)
                assert refused_as(response, 421, "HOST_NOT_ALLOWED"), (path, method, response.status_code)
        # a DNS-rebinding page sends its own name as Host and as Origin: both are wrong
        response = post(served["url"], host=f"evil.example.com:{port}", origin=f"http://evil.example.com:{port}")
        assert refused_as(response, 421, "HOST_NOT_ALLOWED")
        # a WebSocket handshake with a foreign Host never switches protocols
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: evil.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            assert b" 101 " not in sock.recv(4096).split(b"\r\n", 1)[0]
        assert not server_errors(served["stderr"]())


def test_a_foreign_origin_gets_403_and_loopback_origins_are_served():
    with prove_serve("banking") as served:
        port = served["port"]
        for origin in ("http://evil.example.com", f"http://evil.example.com:{port}", "https://127.0.0.1.evil.com",
                       "null", "file://", "http://localhost.evil.com", "chrome-extension://abc", "garbage",
                       "http://user@localhost", "http://localhost/path"):
            response = post(served["url"], host=f"127.0.0.1:{port}", origin=origin)
            assert refused_as(response, 403, "ORIGIN_NOT_ALLOWED"), (origin, response.status_code, response.text[:200])
        for origin in ("http://localhost:6274", f"http://127.0.0.1:{port}", "https://[::1]", "HTTP://LOCALHOST"):
            assert post(served["url"], host=f"localhost:{port}", origin=origin).status_code == 200, origin


def test_the_host_check_comes_before_the_token_and_the_token_scheme_is_case_insensitive():
    token = secrets.token_urlsafe(16)
    with prove_serve("banking", token=token) as served:
        port = served["port"]
        for credentials in (None, token, "wrong"):  # a foreign Host is refused whatever it carries
            response = post(served["url"], host="evil.example.com", token=credentials)
            assert refused_as(response, 421, "HOST_NOT_ALLOWED"), credentials
        response = post(served["url"], host=f"127.0.0.1:{port}", origin="http://evil.example.com", token=token)
        assert refused_as(response, 403, "ORIGIN_NOT_ALLOWED")
        assert refused_as(post(served["url"], host=f"127.0.0.1:{port}"), 401, "UNAUTHORIZED")
        with httpx.Client(timeout=30) as http:
            for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
                headers = {**MCP_HEADERS, "Authorization": f"{scheme} {token}"}
                assert http.post(served["url"], headers=headers, json=INITIALIZE).status_code == 200, scheme
            for bad in (f"Bearer{token}", f"Bearer  {token}", f"Basic {token}", f"Bearer {token.swapcase()}", token,
                        f"Bearer\t{token}", f"Bearer: {token}"):
                response = http.post(served["url"], headers={**MCP_HEADERS, "Authorization": bad}, json=INITIALIZE)
                assert refused_as(response, 401, "UNAUTHORIZED"), bad
                assert response.headers["www-authenticate"] == "Bearer"


def test_allow_host_and_allow_origin_accept_more():
    args = ("banking", "--allow-host", "prove.internal", "--allow-host", "gpu-7.lan:4000",
            "--allow-origin", "https://app.example.com")
    with prove_serve(*args) as served:
        port = served["port"]
        for host in ("prove.internal", f"prove.internal:{port}", "PROVE.INTERNAL", "gpu-7.lan:4000", "localhost"):
            assert post(served["url"], host=host).status_code == 200, host
        for host in (f"gpu-7.lan:{port}", "gpu-7.lan", "internal", "prove.internal.evil.com"):
            assert refused_as(post(served["url"], host=host), 421, "HOST_NOT_ALLOWED"), host
        for origin in ("https://app.example.com", "https://app.example.com/", "http://prove.internal:9999"):
            assert post(served["url"], host="prove.internal", origin=origin).status_code == 200, origin
        for origin in ("http://app.example.com", "https://app.example.com:8443", "https://evil.example.com"):
            assert refused_as(post(served["url"], host="prove.internal", origin=origin), 403, "ORIGIN_NOT_ALLOWED")


def test_host_guard_entries():
    guard = HostGuard(None, allowed_hosts=["Example.COM", "10.1.2.3:99", "::5"], allowed_origins=["https://a.b"])
    assert guard.host_allowed("example.com:1") and guard.host_allowed("10.1.2.3:99") and guard.host_allowed("[::5]:8")
    assert not guard.host_allowed("10.1.2.3") and not guard.host_allowed("10.1.2.3:98")
    assert guard.origin_allowed("https://a.b") and not guard.origin_allowed("https://a.b:1")
    wide = HostGuard(None, allowed_hosts=["*"], allowed_origins=["*"])
    assert wide.host_allowed("anything.example") and wide.origin_allowed("null")
    for bad in ("a b", "http://x", "x:y", ""):
        with pytest.raises(ConfigError, match="--allow-host"):
            HostGuard(None, allowed_hosts=[bad])
    for bad in ("example.com", "ftp://x", "https://x/path", "null"):
        with pytest.raises(ConfigError, match="--allow-origin"):
            HostGuard(None, allowed_origins=[bad])


# -- no silent state loss over the wire ----------------------------------------------------------


def transfer(raw: RawMcp, sid: str) -> dict:
    rt = ServerRuntime(banking)
    args = banking.tools["transfer_between_accounts"].examples[0](rt.state(rt.new_session()))
    return raw.call("transfer_between_accounts", args, sid)


def test_over_http_the_bound_refuses_new_sessions_and_an_expired_session_is_a_typed_error():
    with prove_serve("banking", "--max-sessions", "2", "--ttl", "6") as served:
        raw = RawMcp(served["url"], {})
        a, b, c = (f"rollout-{secrets.token_hex(8)}" for _ in range(3))
        try:
            assert not transfer(raw, a)["isError"]
            assert not raw.call("find_customers", {"query": "an"}, b)["isError"]
            refused = raw.call("find_customers", {"query": "an"}, c)
            assert refused["isError"] and refused["structuredContent"]["code"] == "RESOURCE_EXHAUSTED"
            assert refused["structuredContent"]["reason"] == "TOO_MANY_SESSIONS"
            time.sleep(6.5)  # a and b idle past the TTL
            for sid in (a, b, a):  # never a fresh session in their place, however often asked
                result = raw.call("find_customers", {"query": "an"}, sid)
                content = result["structuredContent"]
                assert result["isError"] and (content["code"], content["reason"]) == ("NOT_FOUND", "SESSION_EXPIRED")
                assert content["details"] == {"session_id": sid, "server": "banking", "cause": "expired"}
            assert not raw.call("find_customers", {"query": "an"}, c)["isError"]  # a new id: room again
        finally:
            raw.close()
        assert not server_errors(served["stderr"]())


def test_over_http_an_evicted_session_is_a_typed_error_with_evict_lru():
    rt = ServerRuntime(banking)  # the served process builds the same seed state
    args = banking.tools["transfer_between_accounts"].examples[0](rt.state(rt.new_session()))
    seed_balance = rt.call(rt.new_session(), "get_balance", {"account_id": args["from_account_id"]}).data
    with prove_serve("banking", "--max-sessions", "1", "--evict-lru") as served:
        raw = RawMcp(served["url"], {})
        a, b = f"a-{secrets.token_hex(8)}", f"b-{secrets.token_hex(8)}"
        try:
            assert not transfer(raw, a)["isError"]
            assert not transfer(raw, b)["isError"]  # evicts a
            for _ in range(2):  # reading a never starts it again (which would evict b)
                content = raw.call("find_customers", {"query": "an"}, a)["structuredContent"]
                assert content["reason"] == "SESSION_EXPIRED" and content["details"]["cause"] == "evicted"
            balance = raw.call("get_balance", {"account_id": args["from_account_id"]}, b)["structuredContent"]
            assert balance["current_balance"] == pytest.approx(seed_balance["current_balance"] - args["amount"])
        finally:
            raw.close()


# -- options checked at start ---------------------------------------------------------------------

BAD_OPTIONS = [
    (["--port", "0"], "--port must be in 1..65535, got 0"),
    (["--port", "70000"], "--port must be in 1..65535"),
    (["--port", "-1"], "--port must be in 1..65535"),
    (["--ttl", "0"], "--ttl must be a number of seconds above 0"),
    (["--ttl", "-5"], "--ttl must be"),
    (["--ttl", "nan"], "--ttl must be"),
    (["--ttl", "inf"], "--ttl must be"),
    (["--max-sessions", "0"], "--max-sessions must be at least 1, got 0"),
    (["--max-sessions", "-3"], "--max-sessions must be at least 1"),
    (["--call-timeout", "-1"], "--call-timeout must be"),
    (["--call-timeout", "nan"], "--call-timeout must be"),
    (["--token", "x"], "--token applies to --transport http only"),
    (["--allow-host", "x.example"], "apply to --transport http only"),
    (["--workers", "2"], "--workers apply to --transport http only"),
    (["--plain-http"], "--plain-http and --workers apply to --transport http only"),
    (["--transport", "http", "--workers", "0"], "--workers must be at least 1, got 0"),
    (["--transport", "http", "--allow-host", "a b"], "--allow-host 'a b'"),
    (["--transport", "http", "--allow-origin", "nope"], "--allow-origin 'nope'"),
]


@pytest.mark.parametrize(("extra", "message"), BAD_OPTIONS, ids=[" ".join(e) for e, _ in BAD_OPTIONS])
def test_options_that_cannot_work_stop_the_server_with_one_line(extra, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve", "banking", *extra])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 1 and err.startswith("error: ") and "\n" not in err and message in err, err


@pytest.mark.parametrize(("mounts", "message"), [
    (["banking:nope,get_balance"], "server 'banking' has no tool named 'nope'"),
    (["banking:"], "write SERVER, or SERVER:TOOL[,TOOL...]"),
    (["banking", "banking:get_balance"], "a server is named twice"),
])
def test_a_tool_filter_naming_unknown_tools_is_refused(mounts, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve", *mounts])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 1 and err.startswith("error: ") and "\n" not in err and message in err, err


def colliding() -> tuple:
    a, a_b = copy.copy(wallet), copy.copy(wallet)
    a.name, a_b.name = "a", "a_b"
    a.tools = {"b_c": wallet.tools["spend"], "list_wallets": wallet.tools["list_wallets"]}
    a_b.tools = {"c": wallet.tools["spend"]}
    return a, a_b


def test_a_mount_whose_prefixed_names_collide_is_refused_naming_both_tools(monkeypatch, capsys):
    a, a_b = colliding()
    with pytest.raises(ToolNameCollision, match=r"tools a\.b_c and a_b\.c would both be published as 'a_b_c'"):
        build_app([ServerRuntime(a), ServerRuntime(a_b)])
    # leaving one of them out resolves it
    assert set(published_tools([ServerRuntime(a), ServerRuntime(a_b)], {"a": ["list_wallets"]})) == {
        "a_list_wallets", "a_b_c"}
    monkeypatch.setattr(cli, "_server", {"a": a, "a_b": a_b}.__getitem__)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve", "a", "a_b", "--transport", "http", "--port", str(free_port())])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 1 and "\n" not in err, err
    assert err == ("error: tools a.b_c and a_b.c would both be published as 'a_b_c'; serve these servers "
                   "separately, or leave one of the tools out")


def test_a_bad_option_exits_1_from_the_real_command_line():
    env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-m", "prove_core", "serve", "banking", "--max-sessions", "0"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == "error: --max-sessions must be at least 1, got 0"


def test_an_inherited_prove_token_is_ignored_on_stdio_with_a_warning():
    env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1", "PROVE_TOKEN": "from-the-environment"}
    proc = subprocess.run([sys.executable, "-m", "prove_core", "serve", "banking"], input="", capture_output=True,
                          text=True, env=env, timeout=120)
    assert "PROVE_TOKEN is set but ignored" in proc.stderr and "error" not in proc.stderr.lower()


# -- what the MCP server publishes ----------------------------------------------------------------


def test_server_info_and_the_tool_filter():
    async def main():
        async with Client(build_app([ServerRuntime(banking), ServerRuntime(shopping)],
                                    tools={"banking": ["get_balance", "list_accounts"]})) as client:
            info = client.server_info
            assert (info.name, info.version, info.title) == ("prove", __version__, "PROVE: banking, shopping")
            names = {t.name for t in await client.list_tools()}
            assert {n for n in names if n.startswith("banking_")} == {"banking_get_balance", "banking_list_accounts"}
            assert len(names) == 2 + len(shopping.tools)
            hidden = await client.call_tool_mcp("banking_transfer_between_accounts", {}, meta={"session_id": "s"})
            assert hidden.is_error and hidden.structured_content["code"] == "UNKNOWN_TOOL"
        async with Client(build_app([ServerRuntime(banking)], tools={"banking": ["find_customers"]})) as client:
            assert (client.server_info.name, client.server_info.title) == ("prove", "PROVE: banking")
            assert [t.name for t in await client.list_tools()] == ["find_customers"]
            found = await client.call_tool_mcp("find_customers", {"query": "an"}, meta={"session_id": "s"})
            assert not found.is_error

    asyncio.run(main())
    assert parse_mount("banking") == ("banking", None)
    assert parse_mount("banking:get_balance, list_accounts") == ("banking", ["get_balance", "list_accounts"])
