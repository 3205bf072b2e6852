"""Security: session ids are unguessable; no session reaches another's state by id tricks (fast
path, MCP, HTTP, mounted servers); the filesystem server's virtual tree cannot be escaped; HTTP
binds 127.0.0.1 by default, refuses DNS rebinding (a foreign Host or Origin, before the token) and
enforces the bearer token on every request; no server evaluates its input. (The Host and Origin
checks in depth: ``test_serving.py``.)

The filesystem cases here are the ones tests/servers/test_filesystem.py does not already cover
(``..``, absolute and foreign roots, NUL and control characters, backslashes, escaping and
looping symlinks, hostile archive entries are covered there): encoded and look-alike separators,
symlinks into other users' files, and random sequences of tree operations on hostile paths.
"""

from __future__ import annotations

import ast
import asyncio
import collections
import inspect
import json
import math
import socket
import unicodedata
from pathlib import Path

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prove_core import cli
from prove_core.env.runtime import Environment, ServerRuntime
from prove_core.serve import app as serving
from prove_core.serve.app import build_app
from prove_servers import filesystem
from tests.support.toy import server as wallet

SERVERS_DIR = Path(filesystem.__file__).parents[1]  # servers/ (filesystem is a package in it)


# -- session ids ---------------------------------------------------------------------------------


def test_issued_session_ids_are_unguessable():
    rt, env = ServerRuntime(wallet), Environment([ServerRuntime(wallet)])
    ids = [rt.new_session() for _ in range(10_000)] + [env.new_session() for _ in range(2_000)]
    assert len(set(ids)) == len(ids)
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert all(len(sid) == 24 and set(sid) <= alphabet for sid in ids)  # 18 random bytes = 144 bits
    counts = collections.Counter("".join(ids))
    total = sum(counts.values())
    entropy = -sum(c / total * math.log2(c / total) for c in counts.values())
    assert entropy > 5.99  # bits per character; 6.0 is the most 64 symbols can carry
    for position in range(24):  # no position is fixed or skewed (a counter or a clock would be)
        column = collections.Counter(sid[position] for sid in ids)
        assert len(column) == 64 and max(column.values()) < 3 * len(ids) / 64
    other = ServerRuntime(wallet)  # same server, same seed: still unrelated ids
    assert not {other.new_session() for _ in range(1_000)} & set(ids)


VICTIM = "victim-café"  # NFC
TRICKS = [
    "victim-cafe\u0301",  # the same text in NFD
    "victim-caf\u00e9 ", " victim-café", "victim-café\n", "victim-café\u200b", "\u200bvictim-café",
    "VICTIM-CAFÉ", "vіctim-café",  # Cyrillic і
    "ｖｉｃｔｉｍ-café",  # fullwidth
    "victim-café/", "./victim-café", "victim-café/../victim-café", "../victim-café", "x/../victim-café",
    "victim-café\\", "victim-café%00", "victim%2Dcafé",
    "victim-café" + "x" * 100_000, "x" * 100_000 + "victim-café", "victim-caf",
    "banking_victim-café", "shopping_victim-café", "victim-café|shopping", "banking:victim-café",
    "", "default", "None", "null", "0",
]


def isolation_env():
    from prove_servers.banking import server as banking
    from prove_servers.shopping import server as shopping

    return Environment([ServerRuntime(banking), ServerRuntime(shopping)])


def write_in(env, sid):
    """A banking transfer and a shopping cart item in session ``sid``."""
    banking, shopping = env.runtimes["banking"], env.runtimes["shopping"]
    transfer = banking.server.tools["transfer_between_accounts"].examples[0](banking.state(sid))
    add = shopping.server.tools["add_to_cart"].examples[0](shopping.state(sid))
    assert not env.call(sid, "banking_transfer_between_accounts", transfer).is_error
    assert not env.call(sid, "shopping_add_to_cart", add).is_error
    return transfer, add


def test_no_id_trick_reaches_another_session_on_the_fast_path():
    env = isolation_env()
    seed = env.state_hash(env.new_session())
    write_in(env, VICTIM)
    victim = env.state_hash(VICTIM)
    assert victim != seed
    for trick in TRICKS:
        assert env.state_hash(trick) == seed, repr(trick[:30])  # reads nothing of the victim's
        write_in(env, trick)
        assert env.state_hash(VICTIM) == victim, repr(trick[:30])  # and changes nothing of it
    # A session id issued by one mounted server is only a name to the other: nothing crosses.
    banking, shopping = env.runtimes["banking"], env.runtimes["shopping"]
    issued = banking.new_session()
    assert issued not in shopping
    seed_shopping = shopping.state_hash(shopping.new_session())
    assert shopping.state_hash(issued) == seed_shopping
    write_in(env, issued)
    assert env.state_hash(VICTIM) == victim


def test_no_id_trick_reaches_another_session_over_mcp():
    env = isolation_env()
    runtimes = list(env.runtimes.values())
    reference = isolation_env()
    transfer, add = write_in(reference, "reference")
    account = {"account_id": transfer["from_account_id"]}
    seed_balance = reference.runtimes["banking"].call("fresh", "get_balance", account).data

    async def main():
        async with Client(build_app(runtimes)) as client:
            async def call(sid, name, args):
                result = await client.call_tool_mcp(name, args, meta={"session_id": sid})
                return bool(result.is_error), result.structured_content

            await call(VICTIM, "banking_transfer_between_accounts", transfer)
            await call(VICTIM, "shopping_add_to_cart", add)
            victim = env.state_hash(VICTIM)
            for trick in [t for t in TRICKS if t]:
                is_error, balance = await call(trick, "banking_get_balance", account)
                assert not is_error and balance == seed_balance, repr(trick[:30])
                await call(trick, "banking_transfer_between_accounts", transfer)
                assert env.state_hash(VICTIM) == victim, repr(trick[:30])

    asyncio.run(main())


@pytest.mark.parametrize("bad_id", [5, 0, 1.5, True, [], {"id": "victim"}, ""])  # null: see test_http.py
def test_a_malformed_meta_session_id_is_refused_not_sent_to_the_shared_default_session(bad_id):
    rt = ServerRuntime(wallet)
    wallet_id = rt.state("probe").wallets.first()["id"]
    default_before = rt.state_hash(serving.DEFAULT_SESSION)

    async def main():
        async with Client(build_app([rt])) as client:
            result = await client.call_tool_mcp("spend", {"wallet_id": wallet_id, "amount": 5.0},
                                                meta={"session_id": bad_id})
            unknown = await client.call_tool_mcp("no_such_tool", {}, meta={"session_id": bad_id})
            return result, unknown

    result, unknown = asyncio.run(main())
    assert result.is_error and result.structured_content["code"] == "INVALID_ARGUMENT"
    assert result.structured_content["reason"] == "BAD_SESSION_ID"
    assert unknown.is_error and unknown.structured_content["code"] in ("INVALID_ARGUMENT", "UNKNOWN_TOOL")
    assert rt.state_hash(serving.DEFAULT_SESSION) == default_before


def test_id_tricks_over_http_meta_and_header(served_banking_shopping):
    served = served_banking_shopping
    reference = isolation_env()
    transfer, _ = write_in(reference, "reference")
    account = {"account_id": transfer["from_account_id"]}

    async def main():
        transport = StreamableHttpTransport(served.url, headers=served.headers)
        async with Client(transport) as client:
            async def balance(sid):
                result = await client.call_tool_mcp("banking_get_balance", account, meta={"session_id": sid})
                return result.structured_content

            seed = await balance("fresh-x")
            await client.call_tool_mcp("banking_transfer_between_accounts", transfer, meta={"session_id": VICTIM})
            victim = await balance(VICTIM)
            assert victim != seed
            for trick in [t for t in TRICKS if t]:
                got = await client.call_tool_mcp("banking_get_balance", account, meta={"session_id": trick})
                assert got.structured_content == seed, repr(trick[:30])
        async def by_header(sid, name, args):  # the X-Prove-Session header (latin-1 text only)
            headers = {**served.headers, "X-Prove-Session": sid}
            async with Client(StreamableHttpTransport(served.url, headers=headers)) as client:
                got = await client.call_tool_mcp(name, args)
                assert got.meta["session_id"] == sid
                return got.structured_content

        await by_header("header-victim", "banking_transfer_between_accounts", transfer)
        assert await by_header("header-victim", "banking_get_balance", account) == victim
        for trick in ["header-victi", "HEADER-VICTIM", "header-victim/../header-victim", "./header-victim",
                      "header-victim%20", "header_victim", "x" * 8_000 + "header-victim"]:
            assert await by_header(trick, "banking_get_balance", account) == seed, trick[:30]

    asyncio.run(main())


# -- the filesystem tree -------------------------------------------------------------------------


@pytest.fixture()
def fs():
    rt = ServerRuntime(filesystem.server)
    return rt, rt.new_session()


def outside_home(rt, sid):
    """Every node that is not under the signed-in user's home, by id."""
    state = rt.state(sid)
    home = state.users.get(state.get_var("user"))["home"]
    return {n["id"]: n for n in state.nodes.all()
            if not (filesystem._path_of(state, n) + "/").startswith(home + "/")}


ENCODED = ["%2e%2e%2f%2e%2e%2fetc%2fpasswd", "..%2f..%2f..%2fetc%2fshadow", "%2F..%2F..%2Fetc", "..%252f..%252fetc",
           "..%c0%af..%c0%afetc", "..\u2215..\u2215etc\u2215passwd", "\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fetc",
           "..\uff0f..\uff0fetc", "\u2024\u2024/\u2024\u2024/\u2024\u2024/etc", "...", "..../..../etc",
           ". ./. ./etc", ".. /.. /etc", "..\u00a0/..\u00a0/etc", "..\u200b/..\u200b/etc", "\u202e..\u202c"]


@pytest.mark.parametrize("raw", ENCODED)
def test_encoded_and_look_alike_separators_are_plain_names(fs, raw):
    rt, sid = fs
    before = outside_home(rt, sid)
    for tool, args in (("create_file", {"path": raw, "content": "owned"}),
                       ("make_directory", {"path": f"~/{raw}", "parents": True}),
                       ("write_file", {"path": raw, "content": "owned"}),
                       ("create_symlink", {"path": f"~/l{len(raw)}", "target": raw}),
                       ("move_path", {"source": "~/notes/todo.md", "destination": raw}),
                       ("copy_path", {"source": "~/.bashrc", "destination": raw})):
        result = rt.call(sid, tool, args)
        assert result.code not in ("INTERNAL", "UNKNOWN_TOOL"), result.error
        if not result.is_error:
            for key in ("path", "destination"):
                if key in result.data:
                    assert result.data[key].startswith("/home/"), result.data
    assert outside_home(rt, sid) == before
    assert rt.call(sid, "read_file", {"path": "/etc/shadow"}).error["reason"] == "PERMISSION_DENIED"


def test_symlinks_into_other_users_files_carry_no_extra_rights(fs):
    rt, sid = fs
    state = rt.state(sid)
    me = state.get_var("user")
    others = [u["id"] for u in state.users.all() if u["id"] not in (me, "root") and u["home"]]
    private = next(n for n in state.nodes.all() if n["kind"] == "file" and n["owner"] in others
                   and not (n["mode"] & 0o004) and filesystem._path_of(state, n).startswith("/home/"))
    target = filesystem._path_of(state, private)
    before = outside_home(rt, sid)
    for link, to in (("~/peek", target), ("~/shadow", "/etc/shadow"), ("~/theirs", target.rsplit("/", 1)[0])):
        assert not rt.call(sid, "create_symlink", {"path": link, "target": to}).is_error
    assert rt.call(sid, "read_file", {"path": "~/peek"}).code == "PERMISSION_DENIED"
    assert rt.call(sid, "read_file", {"path": "~/shadow"}).code == "PERMISSION_DENIED"
    assert rt.call(sid, "write_file", {"path": "~/peek", "content": "owned"}).code == "PERMISSION_DENIED"
    assert rt.call(sid, "write_file", {"path": "~/shadow", "content": "owned"}).code == "PERMISSION_DENIED"
    assert rt.call(sid, "copy_path", {"source": "~/peek", "destination": "~/stolen"}).code == "PERMISSION_DENIED"
    assert rt.call(sid, "create_file", {"path": "~/theirs/planted", "content": "x"}).code == "PERMISSION_DENIED"
    assert rt.call(sid, "hash_file", {"path": "~/peek"}).code == "PERMISSION_DENIED"
    assert outside_home(rt, sid) == before


def system_nodes(rt, sid):
    state = rt.state(sid)
    return {n["id"]: n for n in state.nodes.all()
            if filesystem._path_of(state, n).split("/")[1:2] in (["etc"], ["usr"], ["var"], ["root"])}


FRAGMENTS = ["..", ".", "~", "", "a", "b", "link", "tmp", "etc", "%2e%2e", "..\u2215", "\uff0e\uff0e", "...", "/",
             "notes", "projects", "home", "root", "\u200b"]
PATHS = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6).map(lambda parts: "/".join(parts))
ABS_OR_REL = st.one_of(PATHS, PATHS.map(lambda p: "/" + p), PATHS.map(lambda p: "~/" + p))
OPS = st.one_of(
    st.tuples(st.just("make_directory"), st.fixed_dictionaries({"path": ABS_OR_REL, "parents": st.booleans()})),
    st.tuples(st.just("create_file"), st.fixed_dictionaries({"path": ABS_OR_REL, "content": st.just("x")})),
    st.tuples(st.just("create_symlink"), st.fixed_dictionaries({"path": ABS_OR_REL, "target": ABS_OR_REL})),
    st.tuples(st.just("move_path"), st.fixed_dictionaries({"source": ABS_OR_REL, "destination": ABS_OR_REL,
                                                           "overwrite": st.booleans()})),
    st.tuples(st.just("copy_path"), st.fixed_dictionaries({"source": ABS_OR_REL, "destination": ABS_OR_REL,
                                                           "recursive": st.booleans()})),
    st.tuples(st.just("change_directory"), st.fixed_dictionaries({"path": ABS_OR_REL})),
    st.tuples(st.just("move_to_trash"), st.fixed_dictionaries({"path": ABS_OR_REL})),
    st.tuples(st.just("remove_directory"), st.fixed_dictionaries({"path": ABS_OR_REL, "recursive": st.booleans()})),
    st.tuples(st.just("delete_file"), st.fixed_dictionaries({"path": ABS_OR_REL})),
    st.tuples(st.just("read_file"), st.fixed_dictionaries({"path": ABS_OR_REL})),
    st.tuples(st.just("list_directory"), st.fixed_dictionaries({"path": ABS_OR_REL})),
)


def check_tree(state):
    """Every node hangs off the root (or a trashed top) without a cycle; names and dirents agree
    with parents; usage matches what users own."""
    root = state.get_var("root_id")
    trashed = {item["node_id"] for item in state.trash.all()}
    nodes = {n["id"]: n for n in state.nodes.all()}
    for node in nodes.values():
        seen, current = set(), node
        while current["parent_id"] is not None:
            assert current["id"] not in seen, f"cycle through {current['name']!r}"
            seen.add(current["id"])
            assert current["dirent"] == f"{current['parent_id']}/{current['name']}"
            assert "/" not in current["name"] and current["name"] not in ("", ".", "..")
            current = nodes[current["parent_id"]]
        assert current["id"] == root or current["id"] in trashed, "a node is detached from the tree"
    totals = collections.Counter()
    for node in nodes.values():
        if node["kind"] == "file":
            totals[node["owner"]] += node["size"]
    for archive in state.archives.all():
        totals[archive["owner"]] += archive["size"]
    booked = {u["id"]: u["used_bytes"] for u in state.users.all() if u["used_bytes"]}
    assert {u: b for u, b in totals.items() if b} == booked


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=12))
def test_random_tree_operations_on_hostile_paths_keep_the_tree_whole(ops):
    rt = ServerRuntime(filesystem.server)
    sid = rt.new_session()
    protected = system_nodes(rt, sid)
    for tool, args in ops:
        result = rt.call(sid, tool, args)
        assert result.code != "INTERNAL", result.error
        for key in ("path", "destination", "restored_path", "working_directory"):
            value = (result.data or {}).get(key)
            if isinstance(value, str) and value.startswith("/"):
                assert ".." not in value.split("/"), result.data
    check_tree(rt.state(sid))
    assert system_nodes(rt, sid) == protected  # nothing under /etc, /usr, /var or /root changed or appeared


# -- HTTP: bind address and token ----------------------------------------------------------------


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.rsplit(":", 1)
            if int(port_hex, 16) == port and state == "0A":  # 0A: LISTEN
                raw = bytes.fromhex(address)
                if len(raw) == 4:
                    found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:
                    found.add(socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))))
    return found


def test_http_binds_to_loopback_unless_told_otherwise(served_banking_shopping):
    assert "--host" not in served_banking_shopping.argv
    assert listening_addresses(served_banking_shopping.port) == {"127.0.0.1"}
    host = next(p for p in cli.serve_cmd.params if p.name == "host")
    assert host.default == "127.0.0.1"
    assert inspect.signature(serving.serve).parameters["host"].default == "127.0.0.1"


def bad_credentials(token: str) -> list[dict[str, str]]:
    return [{}, {"Authorization": ""}, {"Authorization": "Bearer"},
            {"Authorization": "Bearer wrong"}, {"Authorization": token}, {"Authorization": f"bearer{token}"},
            {"Authorization": f"Bearer {token[:-1]}"}, {"Authorization": f"Bearer {token}x"},
            {"Authorization": f"Bearer  {token}"}, {"Authorization": f"Basic {token}"},
            {"Authorization": f"Bearer {token.upper()}"}, {"X-Prove-Token": token}, {"Cookie": f"token={token}"}]


REQUESTS = st.tuples(
    st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]),
    st.sampled_from(["/mcp", "/mcp/", "/", "/docs", "/.well-known/oauth-protected-resource", "/mcp?x=1", "/%2e%2e/mcp",
                     "/MCP", "/mcp/../mcp", "/sse", "/messages/"]),
    st.one_of(st.just(b""), st.binary(max_size=64), st.just(b"{{{"), st.just(b"[]"),
              st.just(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()),
              st.just(b"x" * 200_000)),
)


def test_the_bearer_token_is_enforced_on_every_request(served_banking_shopping):
    served = served_banking_shopping
    base = served.url.rsplit("/mcp", 1)[0]
    write = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "banking_freeze_card", "arguments": {"customer_id": "x", "card_id": "y"},
        "_meta": {"session_id": "token-probe"}}}).encode()
    statuses = collections.Counter()
    with httpx.Client(timeout=30) as http:
        for credentials in bad_credentials(served.token):
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **credentials}
            response = http.post(served.url, headers=headers, content=write)
            assert response.status_code == 401, (credentials, response.status_code)

        @settings(max_examples=60, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(REQUESTS, st.sampled_from(bad_credentials(served.token)))
        def anything_without_the_token(request, credentials):
            method, path, body = request
            response = http.request(method, base + path, headers=credentials, content=body or None)
            statuses[response.status_code] += 1
            assert response.status_code == 401, (method, path, credentials, response.status_code)
            assert b"banking" not in response.content and b"tools" not in response.content

        anything_without_the_token()
    assert statuses == {401: sum(statuses.values())}
    assert served.alive()


def test_a_websocket_upgrade_without_the_token_is_refused(served_banking_shopping):
    served = served_banking_shopping
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    request = (f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(request)
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert b" 101 " not in status_line  # never switched protocols


def test_a_dns_rebinding_request_with_the_token_is_still_refused(served_banking_shopping):
    """A page on a name that resolves to 127.0.0.1 cannot reach the server, token or not: its
    requests carry that name as Host (and Origin); the write it tries never runs."""
    served = served_banking_shopping
    write = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "banking_set_card_frozen", "arguments": {"customer_id": "x", "card_id": "y", "frozen": True},
        "_meta": {"session_id": "rebinding-probe"}}}).encode()
    attacker = f"rebind.evil.example:{served.port}"
    with httpx.Client(timeout=30) as http:
        for headers in ({"Host": attacker, "Origin": f"http://{attacker}"}, {"Host": attacker},
                        {"Host": f"127.0.0.1:{served.port}", "Origin": f"http://{attacker}"}):
            response = http.post(served.url, content=write, headers={
                **headers, **served.headers, "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream"})
            assert response.status_code in (421, 403), (headers, response.status_code)
            assert response.json()["reason"] in ("HOST_NOT_ALLOWED", "ORIGIN_NOT_ALLOWED")
    assert served.alive()


# -- no tool evaluates its input -----------------------------------------------------------------

BANNED_CALLS = {"eval", "exec", "compile", "__import__", "open", "input", "breakpoint", "execfile", "globals", "locals"}
BANNED_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "subprocess", "importlib", "ctypes", "code",
                  "codeop", "runpy", "pty", "os", "sys", "builtins", "shutil", "socket", "yaml", "multiprocessing"}


def tool_parameters(tree: ast.Module) -> dict[ast.FunctionDef, set[str]]:
    """Each function registered with ``@<server>.tool(...)`` and the names of its parameters."""
    tools = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "tool"
                for d in node.decorator_list):
            tools[node] = {a.arg for a in node.args.args[1:] + node.args.kwonlyargs}
    return tools


def test_no_server_evaluates_or_executes_its_input():
    problems, tools_seen = [], 0
    for path in sorted(SERVERS_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                problems += [f"{where} imports {a.name}" for a in node.names if a.name.split(".")[0] in BANNED_MODULES]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in BANNED_MODULES:
                problems.append(f"{where} imports from {node.module}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in BANNED_CALLS:
                    problems.append(f"{where} calls {node.func.id}()")
                if node.func.id in ("getattr", "setattr", "delattr") and (
                        len(node.args) < 2 or not isinstance(node.args[1], ast.Constant)):
                    problems.append(f"{where} {node.func.id}() with a computed attribute name")
        for fn, params in tool_parameters(tree).items():
            tools_seen += 1
            for node in ast.walk(fn):  # a template from the caller could read attributes: "{0.__class__}"
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("format", "format_map") and isinstance(node.func.value, ast.Name)
                        and node.func.value.id in params):
                    problems.append(f"{path.name}:{node.lineno} {fn.name} formats with its argument "
                                    f"{node.func.value.id!r}")
    assert tools_seen == 343
    assert not problems, problems


def test_unicode_normalization_is_not_applied_to_session_ids():
    # Guards the id-trick tests above: were ids normalized, NFD and NFC forms would collide.
    assert unicodedata.normalize("NFC", TRICKS[0]) == VICTIM and TRICKS[0] != VICTIM
    rt = ServerRuntime(wallet)
    wallet_id = rt.state(VICTIM).wallets.first()["id"]
    rt.call(VICTIM, "spend", {"wallet_id": wallet_id, "amount": 1.0})
    assert rt.state_hash(TRICKS[0]) != rt.state_hash(VICTIM)
