"""Malformed JSON-RPC over streamable HTTP: garbage, wrong methods and envelopes, values JSON
should not carry, huge and deeply nested bodies. Each is answered with an error (an HTTP 4xx, a
JSON-RPC error or a typed tool error, never a 5xx or a dropped connection) and the served
process keeps serving, without a traceback in its log."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import bench_fuzz
from benchmarks.bench_load import server_errors
from tests.reliability.conftest import RawMcp, jsonrpc_payload


def call_body(arguments, *, name="banking_get_balance", session="http-fuzz", request_id=7) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments, "_meta": {"session_id": session}}}).encode()


MALFORMED = {
    "empty": b"",
    "garbage": b"garbage{{",
    "invalid utf-8": b"\xff\xfe\x00{",
    "a bare number": b"42",
    "an empty batch": b"[]",
    "a batch": json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}] * 3).encode(),
    "no jsonrpc field": json.dumps({"id": 1, "method": "tools/list"}).encode(),
    "wrong jsonrpc version": json.dumps({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}).encode(),
    "unknown method": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/delete_everything"}).encode(),
    "method not a string": json.dumps({"jsonrpc": "2.0", "id": 1, "method": 5}).encode(),
    "initialize again": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode(),
    "tools/call without params": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}).encode(),
    "tools/call with a list of arguments": call_body([1, 2]),
    "tools/call with string arguments": call_body("account_id=acc_1"),
    "tools/call with a numeric name": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                  "params": {"name": 5, "arguments": {}}}).encode(),
    "tools/call of an unknown tool": call_body({}, name="rm_rf"),
    "a null session id": call_body({"account_id": "acc_x"}, session=None),
    "a numeric session id": call_body({"account_id": "acc_x"}, session=17),
    "NaN": call_body({"account_id": "acc_x"}).replace(b'"acc_x"', b"NaN"),
    "Infinity amount": call_body({"customer_id": "c", "from_account_id": "a", "to_account_id": "b", "amount": 1},
                                 name="banking_transfer_between_accounts").replace(b'"amount": 1', b'"amount": Infinity'),
    "a 5,000-digit number": call_body({"account_id": "acc_x"}).replace(b'"acc_x"', b"9" * 5000),
    "1e400": call_body({"account_id": "acc_x"}).replace(b'"acc_x"', b"1e400"),
    "a lone surrogate": call_body({"account_id": "acc_x"}).replace(b'"acc_x"', b'"\\ud800"'),
    "nested 100,000 deep": call_body({"account_id": "acc_x"}).replace(b'"acc_x"', b"[" * 100_000 + b"]" * 100_000),
    "a 20 MB argument": call_body({"account_id": "a" * 20_000_000}),
    "100,000 keys": call_body({f"k{i}": i for i in range(100_000)}),
    "duplicate keys": b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list","method":"tools/call"}',
    "trailing garbage": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode() + b"}}}",
}


def write_in(session: str, request_id) -> bytes:
    """A card freeze (a write) on the served seed state, as a JSON-RPC request with this id."""
    from prove_core.env.runtime import ServerRuntime
    from prove_servers.banking import server

    rt = ServerRuntime(server)
    args = server.tools["set_card_frozen"].examples[0](rt.state(rt.new_session()))
    body = json.loads(call_body(args, name="banking_set_card_frozen", session=session))
    return json.dumps({**body, "id": request_id}).encode()


@pytest.fixture(scope="module")
def raw(served_banking_shopping):
    client = RawMcp(served_banking_shopping.url, served_banking_shopping.headers)
    yield client
    client.close()


def answer(raw: RawMcp, body: bytes, headers: dict | None = None) -> tuple[int, dict | None]:
    response = raw.http.post(raw.url, headers={**raw.headers, **(headers or {})}, content=body)
    try:
        return response.status_code, jsonrpc_payload(response.text)
    except (ValueError, json.JSONDecodeError):
        return response.status_code, None


def still_serving(raw: RawMcp) -> None:
    result = raw.call("banking_find_customers", {"query": "an"}, "alive")
    assert not result["isError"], result


def refused(status: int, payload: dict | None) -> bool:
    """An error in any of the allowed forms: HTTP 4xx, a JSON-RPC error, a typed tool error."""
    if 400 <= status < 500:
        return True
    if status != 200 or payload is None:
        return False
    if "error" in payload:
        return True
    result = payload.get("result", {})
    return bool(result.get("isError")) and result.get("structuredContent", {}).get("code") not in (None, "INTERNAL")


@pytest.mark.parametrize("label", MALFORMED)
def test_malformed_requests_get_an_error_and_the_server_keeps_serving(raw, served_banking_shopping, label):
    status, payload = answer(raw, MALFORMED[label])
    assert refused(status, payload), (label, status, payload)
    still_serving(raw)
    assert not server_errors(served_banking_shopping.stderr())


def test_messages_the_protocol_acknowledges_and_drops_run_nothing(raw):
    """A response (clients may answer server requests) and a request whose id is an object are
    accepted with 202 and no answer: nothing may run."""
    for body in (json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode(), write_in("dropped", {"x": 1})):
        status, payload = answer(raw, body)
        assert status == 202 and payload is None
    args = json.loads(write_in("dropped", 1))["params"]["arguments"]
    cards = raw.call("banking_list_cards", {"customer_id": args["customer_id"]}, "dropped")["structuredContent"]["cards"]
    assert next(card for card in cards if card["id"] == args["card_id"])["status"] == "active"  # not frozen
    still_serving(raw)


def test_wrong_headers_and_methods_get_an_error(raw, served_banking_shopping):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    for headers in ({"Content-Type": "text/plain"}, {"Content-Type": "application/x-www-form-urlencoded"},
                    {"mcp-session-id": "not-a-session"}, {"mcp-session-id": ""}, {"mcp-session-id": "x" * 4000},
                    {"mcp-protocol-version": "1999-01-01"}, {"Accept": "image/png"}):
        status, payload = answer(raw, body, headers)
        assert refused(status, payload) or (status == 200 and "result" in (payload or {})), (headers, status)
    for method in ("PUT", "PATCH"):
        response = raw.http.request(method, raw.url, headers=raw.headers, content=body)
        assert 400 <= response.status_code < 500, method
    still_serving(raw)
    assert not server_errors(served_banking_shopping.stderr())


def test_a_connection_dropped_mid_body_does_not_hurt_the_server(raw, served_banking_shopping):
    import socket

    host, port = "127.0.0.1", served_banking_shopping.port
    for declared in (10, 1_000_000):
        with socket.create_connection((host, port), timeout=10) as sock:
            head = (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {served_banking_shopping.token}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n")
            sock.sendall(head.encode() + b'{"jsonrpc"')  # and hang up
    still_serving(raw)
    assert not server_errors(served_banking_shopping.stderr())


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(body=st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    bench_fuzz.junk(True).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"jsonrpc": st.sampled_from(["2.0", "2", 2.0, None]), "id": bench_fuzz.scalars(True),
                           "method": st.one_of(st.sampled_from(["tools/call", "tools/list", "ping", "initialize",
                                                                "notifications/cancelled"]), st.text(max_size=20)),
                           "params": bench_fuzz.junk(True)}).map(lambda v: json.dumps(v).encode()),
))
def test_fuzzed_bodies_get_an_answer_and_the_server_keeps_serving(raw, body):
    status, payload = answer(raw, body)
    assert status < 500, (body[:200], status)
    still_serving(raw)


@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_tool_arguments_over_http_get_a_result_or_a_typed_error(raw, served_banking_shopping, data):
    """The JSON path a real client takes, parser included (the in-memory client skips it)."""
    subjects = _http_subjects()
    subject = data.draw(st.sampled_from(subjects))
    args = data.draw(subject.mcp)
    status, payload = answer(raw, call_body(args, name=f"{subject.server.name}_{subject.tool.name}", session="args-fuzz"))
    assert status == 200 and "result" in payload, (status, payload)
    result = payload["result"]
    if result.get("isError"):
        assert result["structuredContent"]["code"] not in ("INTERNAL", "UNKNOWN_TOOL"), result
    still_serving(raw)


_SUBJECTS: list = []


def _http_subjects():
    if not _SUBJECTS:
        from prove_core.plugin.manager import Plugins

        registry = Plugins().load(autoload=False).registry
        for name in ("banking", "shopping"):
            _SUBJECTS.extend(bench_fuzz.subjects(registry.load("servers", name)))
    return _SUBJECTS


def test_the_server_log_is_clean_after_all_of_it(served_banking_shopping):
    assert served_banking_shopping.alive()
    assert not server_errors(served_banking_shopping.stderr())
