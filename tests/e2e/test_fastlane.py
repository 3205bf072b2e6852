"""The tools/call fast lane answers exactly as fastmcp's own pipeline does.

Two apps serve the same servers at the same seed on loopback: one as ``prove serve`` builds it
(JSON replies, the fast lane in front) and one with ``plain=True`` (``--plain-http``: fastmcp and
the SDK for every request, SSE replies). The same requests go to both, raw, and the replies must
be the same JSON-RPC messages: results, typed tool errors, the SDK's own rejections of malformed
or mismatched requests. The lane's counter shows which requests it answered itself, so a lane that
quietly passed everything through would fail too.
"""

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest
import uvicorn

from prove_core.env.runtime import build_runtime
from prove_core.plugin.manager import Plugins
from prove_core.serve.app import build_app, http_app

V = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Running:
    """An app on a loopback port in a background thread (lifespan on, as ``prove serve`` runs it)."""

    def __init__(self, app):
        self.port = _port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


def lane_of(app):
    """The ToolCallLane inside the guards of an http_app (None when there is none)."""
    while app is not None and type(app).__name__ != "ToolCallLane":
        app = getattr(app, "app", None)
    return app


def serve(servers, *, plain, tools=None):
    plugins = Plugins().load(autoload=False)
    runtimes = [build_runtime(plugins.registry.load("servers", name), seed=3) for name in servers]
    app = http_app(build_app(runtimes, tools=tools), runtimes=runtimes, plain=plain)
    return Running(app), lane_of(app)


@pytest.fixture(scope="module")
def pair():
    fast, lane = serve(["banking", "calendar"], plain=False)
    plain, no_lane = serve(["banking", "calendar"], plain=True)
    assert lane is not None and no_lane is None
    yield fast, plain, lane
    fast.stop()
    plain.stop()


def call(name, arguments, *, rid=1, session="s1", meta=None, headers=None, body=None):
    """A modern-era tools/call request: (headers, body)."""
    meta = {**ENVELOPE, "session_id": session} if meta is None else meta
    message = body if body is not None else {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                             "params": {"name": name, "arguments": arguments, "_meta": meta}}
    head = {"accept": "application/json, text/event-stream", "content-type": "application/json",
            "mcp-protocol-version": V, "mcp-method": "tools/call", "mcp-name": name, **(headers or {})}
    return head, message


def reply(response: httpx.Response):
    """(status, JSON-RPC message) of a reply, whether it came as JSON or as an SSE stream."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
        text = data[-1] if data else ""
    try:
        return response.status_code, json.loads(text) if text else None
    except ValueError:
        return response.status_code, text


def both(pair, requests):
    fast, plain, _ = pair
    out = []
    with httpx.Client(timeout=30) as client:
        for head, body in requests:
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            a = reply(client.post(fast.url, headers=head, content=content))
            b = reply(client.post(plain.url, headers=head, content=content))
            out.append((a, b))
    return out


def test_tool_calls_get_the_same_replies_on_both_paths_and_the_lane_answers_them(pair):
    lane = pair[2]
    before = lane.served
    requests = [
        call("banking_find_customers", {"query": "an"}, rid=1),
        call("banking_find_customers", {"query": "a"}, rid="two"),  # schema violation: a typed tool error
        call("calendar_list_calendars", {}, rid=3, session="s2"),
        call("banking_find_customers", {"query": "an"}, rid=4, meta={**ENVELOPE, "session_id": 7}),  # BAD_SESSION_ID
        call("banking_find_customers", {"query": "an"}, rid=5, meta=dict(ENVELOPE), headers={"x-prove-session": "h"}),
        call("banking_find_customers", {"query": "an"}, rid=6, meta=dict(ENVELOPE)),  # the default session
    ]
    results = both(pair, requests)
    for (a, b), (_, body) in zip(results, requests, strict=True):
        assert a == b, body
        assert a[1]["id"] == body["id"]
        assert (a[0], "result" in a[1]) == ((400, False) if body["id"] == 4 else (200, True))
    assert results[1][0][1]["result"]["isError"] is True
    assert results[1][0][1]["result"]["structuredContent"]["reason"] == "SCHEMA_VIOLATION"
    # a bad id is refused before either path runs anything: 400, the typed error in the JSON-RPC error
    assert results[3][0][1]["error"]["data"]["reason"] == "BAD_SESSION_ID"
    assert results[4][0][1]["result"]["_meta"]["session_id"] == "h"
    assert results[0][0][1]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "prove"
    assert lane.served - before == len(requests) - 1


def test_writes_change_the_same_state_on_both_paths(pair):
    """A write through the lane lands on the runtime: the reads after it see it, as on the plain path."""
    fast, plain, lane = pair
    accounts = both(pair, [call("banking_find_customers", {"query": "an"}, session="w")])[0][0][1]
    customer = accounts["result"]["structuredContent"]["customers"][0]["id"]
    listed = both(pair, [call("banking_list_accounts", {"customer_id": customer}, session="w")])[0]
    assert listed[0] == listed[1]
    open_accounts = [a for a in listed[0][1]["result"]["structuredContent"]["accounts"] if a["status"] == "active"]
    assert len(open_accounts) >= 2
    src, dst = open_accounts[0]["id"], open_accounts[1]["id"]
    moves = [call("banking_transfer_between_accounts", {"customer_id": customer, "from_account_id": src,
                                                         "to_account_id": dst, "amount": 1.25}, rid=i, session="w")
             for i in range(3)]
    after = [call("banking_get_balance", {"account_id": src}, rid=9, session="w"),
             call("banking_get_balance", {"account_id": src}, rid=10, session="other")]
    served = lane.served
    results = both(pair, moves + after)
    for a, b in results:
        assert a == b
    assert lane.served - served == len(moves) + len(after)
    assert not any(r[0][1]["result"]["isError"] for r in results), results
    mine, fresh = (r[0][1]["result"]["structuredContent"] for r in results[-2:])
    assert mine != fresh  # the writes are in session "w" only


def test_what_the_lane_does_not_answer_gets_the_sdks_own_reply(pair):
    lane = pair[2]
    before = lane.served
    good = call("banking_find_customers", {"query": "an"})[1]
    requests = [
        call("banking_no_such_tool", {}),  # unknown tool: the typed UNKNOWN_TOOL result
        call("banking_find_customers", {"query": "an"}, headers={"mcp-name": "banking_list_accounts"}),  # mismatch
        call("banking_find_customers", {"query": "an"}, meta={"session_id": "x"}),  # no envelope
        call("banking_find_customers", {"query": "an"}, headers={"mcp-method": "tools/list"}),  # header lies
        call("x", {}, body=[good]),  # a batch
        call("x", {}, body=b"{not json"),
        call("banking_find_customers", {"query": "an"}, body={**good, "params": {**good["params"], "arguments": [1]}}),
        call("banking_find_customers", {"query": "an"}, body={**good, "id": None}),
    ]
    results = both(pair, requests)
    for (a, b), (_, body) in zip(results, requests, strict=True):
        assert a == b, body
    assert results[0][0][1]["result"]["structuredContent"]["reason"] == "UNKNOWN_TOOL"
    assert all(r[0][0] == 200 or r[0][0] >= 400 for r in results)
    assert lane.served == before  # none of them was answered by the lane


def test_real_clients_work_through_the_lane(pair):
    """fastmcp's client and the official SDK's (both speak the 2026 era) get their results from the lane."""
    from fastmcp import Client as FastMCPClient
    from mcp import Client as SdkClient
    from mcp.client.streamable_http import streamable_http_client

    fast, _, lane = pair

    async def main():
        before = lane.served
        async with FastMCPClient(fast.url) as client:
            result = await client.call_tool("banking_find_customers", {"query": "an"}, meta={"session_id": "c1"})
            assert result.structured_content["total"] >= 0 and result.meta["session_id"] == "c1"
        async with SdkClient(streamable_http_client(fast.url)) as client:
            result = await client.call_tool("banking_find_customers", {"query": "an"}, meta={"session_id": "c2"})
            assert not result.is_error and result.meta["session_id"] == "c2"
        assert lane.served - before == 2

    asyncio.run(main())


def test_a_tool_left_out_of_the_mount_is_not_reachable_through_the_lane():
    running, lane = serve(["banking"], plain=False, tools={"banking": ["find_customers"]})
    try:
        with httpx.Client(timeout=30) as client:
            head, body = call("get_balance", {"customer_id": "c", "account_id": "a"})
            status, message = reply(client.post(running.url, headers=head, json=body))
            head, body = call("find_customers", {"query": "an"})
            ok = reply(client.post(running.url, headers=head, json=body))
    finally:
        running.stop()
    assert status == 200 and message["result"]["structuredContent"]["reason"] == "UNKNOWN_TOOL"
    assert ok[0] == 200 and not ok[1]["result"]["isError"] and lane.served == 1


def test_a_header_and_a_meta_id_that_differ_are_refused_on_both_paths(pair):
    """Which of the two did the client mean? Refused with a 400 before either path runs anything."""
    lane = pair[2]
    before = lane.served
    head, body = call("banking_find_customers", {"query": "an"}, session="one", headers={"x-prove-session": "two"})
    (a, b), = both(pair, [(head, body)])
    assert a == b and a[0] == 400 and "result" not in a[1]
    assert a[1]["error"]["code"] == -32602 and a[1]["error"]["data"]["reason"] == "SESSION_ID_MISMATCH"
    assert lane.served == before
