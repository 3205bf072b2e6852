"""The session control API over real HTTP: `prove serve banking shopping --transport http` in a
subprocess on 127.0.0.1 with a bearer token, driven by ``SessionClient`` and by raw requests.

A call through MCP changes a session's state; ``state`` shows the hash and the per-table diff
since the seed; ``fork`` gives an independent copy; ``reset`` restores the seed's hash (or
another seed's); ``DELETE`` closes; the token is required; unknown ids are 404; bodies are
checked; none of it is on the agent's tool list."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from benchmarks.bench_load import free_port, server_errors
from prove_core.env.runtime import Environment, ServerRuntime
from prove_core.serve.app import build_app, http_app
from prove_core.serve.client import (
    BadRequest,
    ControlUnavailable,
    SessionClient,
    SessionClosed,
    SessionExpired,
    TooManySessions,
    Unauthorized,
)
from prove_servers import banking, shopping
from tests.reliability.conftest import RawMcp


@pytest.fixture(scope="module")
def served(served_banking_shopping):
    return served_banking_shopping


@pytest.fixture(scope="module")
def control(served):
    with SessionClient(served.url, token=served.token) as client:  # the /mcp URL works as the base
        yield client


@pytest.fixture(scope="module")
def raw(served):
    client = RawMcp(served.url, served.headers)
    yield client
    client.close()


def freeze_args() -> dict:
    """Arguments of a card freeze (a write) on the seed state."""
    rt = ServerRuntime(banking.server)
    return banking.server.tools["set_card_frozen"].examples[0](rt.state(rt.new_session()))


def local_env() -> Environment:
    return Environment([ServerRuntime(banking.server), ServerRuntime(shopping.server)])


def test_a_call_through_mcp_shows_in_the_state_hash_and_the_diff(control, raw):
    sid = control.create()
    assert len(sid) == 24  # server-issued: 144 random bits
    env = local_env()
    seed_hash = env.state_hash(env.new_session())
    fresh = control.state(sid)
    assert fresh["id"] == sid and fresh["state_hash"] == seed_hash
    assert {name: part["live"] for name, part in fresh["servers"].items()} == {"banking": True, "shopping": True}
    assert not any(part["changed"] for part in fresh["servers"].values())

    args = freeze_args()
    result = raw.call("banking_set_card_frozen", args, sid)
    assert not result["isError"], result
    state = control.state(sid, diff=True)
    assert state["state_hash"] != seed_hash
    ours = env.new_session()
    assert not env.call(ours, "banking_set_card_frozen", args).is_error
    assert state["state_hash"] == env.state_hash(ours)  # what the same call gives on the fast path
    bank = state["servers"]["banking"]
    assert bank["changed"] and bank["state_hash"] == env.runtimes["banking"].state_hash(ours)
    assert bank["diff"]["tables"] == {"cards": {"added": [], "removed": [], "changed": [args["card_id"]]}}
    assert "__clock__" in bank["diff"]["vars"]  # a call that wrote ticks the session clock
    assert state["servers"]["shopping"]["diff"] == {"tables": {}, "vars": []}
    assert control.diff(sid)["banking"] == bank["diff"]
    assert control.state_hash(sid) == state["state_hash"]


def test_a_session_opened_by_mcp_alone_spans_the_servers(control, raw):
    """An id a client chose and used on one server: live there, the seed's state on the other."""
    sid = "chosen-by-the-client"
    assert not raw.call("banking_find_customers", {"query": "an"}, sid)["isError"]
    state = control.state(sid)
    assert state["servers"]["banking"]["live"] and not state["servers"]["shopping"]["live"]
    env = local_env()
    assert state["state_hash"] == env.state_hash(env.new_session())
    assert control.server_hashes(sid) == {"banking": state["servers"]["banking"]["state_hash"]}


def test_a_fork_is_an_independent_copy(control, raw):
    sid = control.create()
    args = freeze_args()
    raw.call("banking_set_card_frozen", args, sid)
    before = control.state_hash(sid)
    twin = control.fork(sid)
    # a new id that starts with the parent's route key: a proxy pinning sessions by it (prove serve
    # --workers) sends the fork to the process holding the state; a fork of a fork keeps the key
    key, dot, suffix = twin.partition(".")
    assert twin != sid and key == sid and dot and len(suffix) == 16
    grandchild = control.fork(twin)
    assert grandchild.split(".")[0] == sid and grandchild not in (sid, twin)
    assert control.state_hash(twin) == before
    assert control.diff(twin)["banking"]["tables"]["cards"]["changed"] == [args["card_id"]]  # since the seed
    # a write on the fork leaves the original alone, and the other way round
    assert not raw.call("banking_set_card_frozen", {**args, "frozen": False}, twin)["isError"]
    assert control.state_hash(sid) == before != control.state_hash(twin)
    cards = raw.call("banking_list_cards", {"customer_id": args["customer_id"]}, sid)["structuredContent"]["cards"]
    assert next(c for c in cards if c["id"] == args["card_id"])["status"] == "frozen"


def test_reset_restores_the_seed_or_another_seed(control, raw):
    sid = control.create()
    seed_hash = control.state_hash(sid)
    raw.call("banking_set_card_frozen", freeze_args(), sid)
    assert control.state_hash(sid) != seed_hash
    assert control.reset(sid)["state_hash"] == seed_hash
    assert control.diff(sid)["banking"] == {"tables": {}, "vars": []}

    other = control.reset(sid, seed=7)
    env = Environment([ServerRuntime(banking.server, seed=7), ServerRuntime(shopping.server, seed=7)])
    assert other["state_hash"] == env.state_hash(env.new_session()) != seed_hash
    assert {part["seed"] for part in other["servers"].values()} == {7}
    assert control.reset(sid)["state_hash"] == other["state_hash"]  # seed 7 is its seed now
    assert control.reset(sid, seed=0)["state_hash"] == seed_hash
    fresh = control.create(seed=7)
    assert control.state_hash(fresh) == other["state_hash"]


def test_a_deleted_session_stays_closed_until_the_client_opens_it_again(control, raw):
    sid = control.create(seed=7)
    closed = control.close(sid)
    assert closed["closed"] and closed["servers"] == ["banking", "shopping"]
    for call in (control.state, control.fork, control.reset, control.close):
        with pytest.raises(SessionClosed) as err:
            call(sid)
        assert err.value.status == 404 and err.value.reason == "SESSION_CLOSED"
        assert err.value.details["session_id"] == sid
    on_mcp = raw.call("banking_find_customers", {"query": "example"}, sid)  # never a fresh session in its place
    assert on_mcp["isError"] and on_mcp["structuredContent"]["reason"] == "SESSION_CLOSED"
    assert control.create(session_id=sid) == sid  # the explicit open: from the server's seed
    assert not raw.call("banking_find_customers", {"query": "example"}, sid)["isError"]
    assert control.state(sid)["servers"]["banking"]["seed"] == 0
    with pytest.raises(BadRequest) as err:  # a live id cannot be opened over itself
        control.create(session_id=sid)
    assert err.value.status == 409 and err.value.reason == "SESSION_EXISTS"


def test_unknown_ids_are_404_with_a_typed_error(served):
    # the server is shared with other test files, which open sessions such as "" or "default"
    # through MCP: only ids no test opens are certain to be unknown here
    for sid in (f"never-opened-{uuid.uuid4().hex}", "x" * 300, "a/b", "%2e"):
        path = "/sessions/" + urllib.parse.quote(sid, safe="")
        response = httpx.get(f"{served.base_url}{path}/state", headers=served.headers)
        assert response.status_code == 404, (sid, response.text)
        body = response.json()
        assert set(body) == {"code", "reason", "message", "details"}
        assert (body["code"], body["reason"]) == ("NOT_FOUND", "SESSION_NOT_FOUND")


def test_the_token_is_required_on_every_route(served):
    routes = [("GET", "/sessions"), ("POST", "/sessions"), ("GET", "/sessions/x/state"),
              ("POST", "/sessions/x/reset"), ("POST", "/sessions/x/fork"), ("DELETE", "/sessions/x")]
    for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": served.token}):
        for method, path in routes:
            response = httpx.request(method, served.base_url + path, headers=auth, json={})
            assert response.status_code == 401, (method, path, auth)
    with pytest.raises(Unauthorized):
        SessionClient(served.base_url, token="wrong").create()
    with pytest.raises(Unauthorized):
        SessionClient(served.base_url).sessions()


def test_bad_bodies_and_methods_get_typed_4xx(served, control):
    sid = control.create()
    url, headers = served.base_url, served.headers
    cases = [
        ("POST", f"/sessions/{sid}/reset", {"content": b"{nope"}, 400, "BAD_JSON"),
        ("POST", f"/sessions/{sid}/reset", {"json": [1]}, 400, "BAD_BODY"),
        ("POST", f"/sessions/{sid}/reset", {"json": {"seed": "7"}}, 400, "BAD_SEED"),
        ("POST", f"/sessions/{sid}/reset", {"json": {"seed": True}}, 400, "BAD_SEED"),
        ("POST", f"/sessions/{sid}/reset", {"json": {"seed": 2**70}}, 400, "BAD_SEED"),
        ("POST", f"/sessions/{sid}/reset", {"content": b'{"seed": NaN}'}, 400, "BAD_SEED"),
        ("POST", f"/sessions/{sid}/reset", {"content": b'{"seed": ' + b"9" * 5000 + b"}"}, 400, "BAD_JSON"),
        ("POST", f"/sessions/{sid}/reset", {"content": b"[" * 30_000 + b"]" * 30_000}, 400, "BAD_JSON"),
        ("POST", f"/sessions/{sid}/reset", {"json": {"seed": 1, "options": {}}}, 400, "UNKNOWN_FIELD"),
        ("POST", f"/sessions/{sid}/fork", {"json": {"id": "mine"}}, 400, "UNKNOWN_FIELD"),
        ("POST", "/sessions", {"json": {"seed": 1.5}}, 400, "BAD_SEED"),
        ("POST", f"/sessions/{sid}/reset", {"content": b"seed=7", "headers": {"Content-Type": "text/plain"}},
         415, "UNSUPPORTED_MEDIA_TYPE"),
        ("POST", f"/sessions/{sid}/reset", {"content": b'{"seed": 1, "pad": "' + b"x" * 70_000 + b'"}'},
         413, "BODY_TOO_LARGE"),
        ("GET", f"/sessions/{sid}/state?diff=maybe", {}, 400, "BAD_QUERY"),
        ("GET", f"/sessions/{sid}/reset", {}, 405, "METHOD_NOT_ALLOWED"),
        ("PUT", f"/sessions/{sid}", {}, 405, "METHOD_NOT_ALLOWED"),
        ("DELETE", "/sessions", {}, 405, "METHOD_NOT_ALLOWED"),
    ]
    for method, path, kwargs, status, reason in cases:
        extra = kwargs.pop("headers", {})
        if "content" in kwargs:
            extra = {"Content-Type": "application/json", **extra}
        response = httpx.request(method, url + path, headers={**headers, **extra}, **kwargs)
        assert response.status_code == status, (method, path, response.status_code, response.text[:200])
        body = response.json()
        assert set(body) == {"code", "reason", "message", "details"} and body["reason"] == reason, body
    assert httpx.request("GET", f"{url}/sessions/{sid}/reset", headers=headers).headers["allow"] == "POST"
    with pytest.raises(BadRequest) as err:
        control.reset(sid, seed="7")  # type: ignore[arg-type]
    assert err.value.reason == "BAD_SEED"
    assert control.state(sid)["id"] == sid  # the session is untouched by all of it


def test_the_control_routes_are_not_tools(raw):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = raw.http.post(raw.url, headers=raw.headers, json=body)
    from tests.reliability.conftest import jsonrpc_payload

    names = [tool["name"] for tool in jsonrpc_payload(response.text)["result"]["tools"]]
    assert len(names) == len(banking.server.tools) + len(shopping.server.tools)
    assert not [n for n in names if any(word in n for word in ("reset", "fork", "session", "state_hash"))]


def test_the_session_counts_and_the_server_log(served, control):
    stats = control.sessions()["servers"]
    assert set(stats) == {"banking", "shopping"}
    assert all(part["sessions"] >= 1 and part["max_sessions"] >= 1 for part in stats.values())
    assert served.alive()
    assert not server_errors(served.stderr()), served.stderr()[-2000:]
    assert json.dumps(stats)  # plain JSON


# -- expiry, the session bound, threads: runtimes served by uvicorn in a thread ------------------


@contextlib.contextmanager
def serving(runtimes: list[ServerRuntime], token: str = "t0ken") -> Iterator[SessionClient]:
    """These runtimes over real HTTP on 127.0.0.1 (uvicorn in a thread), and a client of them."""
    port = free_port()
    app = http_app(build_app(runtimes), token=token, runtimes=runtimes)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        with SessionClient(f"http://127.0.0.1:{port}", token=token) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_an_expired_session_is_a_typed_404_and_delete_closes_it():
    rts = [ServerRuntime(banking.server, ttl_s=0.3), ServerRuntime(shopping.server, ttl_s=0.3)]
    with serving(rts) as control:
        sid = control.create()
        time.sleep(0.5)
        for call in (control.state, control.fork, control.reset):
            with pytest.raises(SessionExpired) as err:
                call(sid)
            assert err.value.status == 404 and err.value.details["session_id"] == sid
        closed = control.close(sid)  # closed now: a later use is SESSION_CLOSED
        assert closed["servers"] == [] and set(closed["expired"]) == {"banking", "shopping"}
        with pytest.raises(SessionClosed) as err:
            control.state(sid)
        assert err.value.reason == "SESSION_CLOSED"


def test_a_session_whose_state_expired_on_one_server_is_not_passed_off_as_the_seed():
    """A session kept alive on one mounted server while its part on the other expires: state and
    fork refuse it (SESSION_EXPIRED, naming the server) rather than report the seed's state for
    the lost part; reset starts both parts again."""
    bank, shop = ServerRuntime(banking.server, ttl_s=1.0), ServerRuntime(shopping.server, ttl_s=1.0)
    with serving([bank, shop]) as control:
        sid = control.create()
        for _ in range(5):  # a call on banking keeps that part alive; shopping's part expires
            time.sleep(0.3)
            assert not bank.call(sid, "find_customers", {"query": "an"}).is_error
        for call in (control.state, control.fork):
            with pytest.raises(SessionExpired) as err:
                call(sid)
            assert err.value.details["server"] == "shopping"
        state = control.reset(sid)
        assert all(part["live"] for part in state["servers"].values())
        assert control.state(sid)["state_hash"] == state["state_hash"]


def test_at_the_session_bound_create_and_fork_get_429_and_start_nothing():
    bank, shop = ServerRuntime(banking.server, max_sessions=3), ServerRuntime(shopping.server, max_sessions=2)
    with serving([bank, shop]) as control:
        first, second = control.create(), control.create()
        for call in (control.create, lambda: control.fork(first)):
            with pytest.raises(TooManySessions) as err:
                call()
            assert err.value.status == 429 and err.value.code == "RESOURCE_EXHAUSTED"
        assert (len(bank), len(shop)) == (2, 2)  # all or nothing: banking's part was closed again
        control.close(second)
        assert control.state(control.fork(first))["state_hash"] == control.state_hash(first)


def test_one_client_shared_by_threads():
    rts = [ServerRuntime(banking.server)]
    with serving(rts) as control:
        base = control.create()
        errors: list[BaseException] = []

        def work() -> None:
            try:
                for _ in range(5):
                    twin = control.fork(base)
                    assert control.state_hash(twin) == control.state_hash(base)
                    control.close(twin)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert control.sessions()["servers"]["banking"]["sessions"] == 1


def test_the_client_names_an_unreachable_server_and_a_wrong_token():
    with pytest.raises(ControlUnavailable):
        SessionClient(f"http://127.0.0.1:{free_port()}", timeout=2).sessions()
    with serving([ServerRuntime(banking.server)], token="right") as control:
        wrong = SessionClient(f"http://{control.netloc}", token="wrong")
        with pytest.raises(Unauthorized) as err:
            wrong.create()
        assert err.value.status == 401
    with pytest.raises(ValueError):
        SessionClient("127.0.0.1:8000")
