"""What an HTTP client can send: bad bytes naming a session get a 400 before anything runs, on
both lanes; header and ``_meta`` ids are the same text; slow clients are cut off; open
connections are bounded; state-changing requests need what no web page can send unasked."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.reliability.conftest import RawMcp, jsonrpc_payload
from tests.reliability.test_serving import prove_serve

V = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}
MODERN = {"accept": "application/json, text/event-stream", "content-type": "application/json", "mcp-protocol-version": V,
          "mcp-method": "tools/call", "mcp-name": "find_customers"}


def modern_body(meta_id: str) -> bytes:
    """A tools/call body whose ``_meta.session_id`` is ``meta_id`` as raw JSON text (escapes kept)."""
    return (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"find_customers",'
            b'"arguments":{"query":"example"},"_meta":{"io.modelcontextprotocol/protocolVersion":"' + V.encode()
            + b'","io.modelcontextprotocol/clientCapabilities":{},"session_id":' + meta_id.encode() + b"}}}")


def live_sessions(http: httpx.Client, base: str) -> int:
    return http.get(f"{base}/sessions").json()["servers"]["banking"]["sessions"]


def refused(reply: httpx.Response, reason: str) -> bool:
    if reply.status_code != 400:
        return False
    body = reply.json()
    data = body["error"]["data"] if "error" in body else body
    return data["reason"] == reason


@pytest.mark.parametrize("lane", ["fast lane", "fastmcp pipeline"])
def test_bad_session_bytes_get_a_400_before_anything_runs(lane):
    with prove_serve("banking", *(["--plain-http"] if lane == "fastmcp pipeline" else [])) as served, \
            httpx.Client(timeout=30) as http:
        url, base = served["url"], served["base"]
        bad = [
            (modern_body(r'"\ud800"'), {}, "BAD_SESSION_ID"),  # a lone surrogate
            (modern_body(r'"a\udc00b"'), {}, "BAD_SESSION_ID"),
            (modern_body('""'), {}, "BAD_SESSION_ID"),
            (modern_body("17"), {}, "BAD_SESSION_ID"),
            (modern_body('"caf\xc3"').replace("Ã".encode(), b"\xc3"), {}, "BAD_ENCODING"),  # not UTF-8
            (modern_body('"ok"').replace(b'"example"', b'"ex\\ud83dample"'), {}, "BAD_ENCODING"),  # in arguments
            (modern_body('"ok"'), {"x-prove-session": b"\xff\xfe"}, "BAD_SESSION_ID"),  # header not UTF-8
            (modern_body('"one"'), {"x-prove-session": b"two"}, "SESSION_ID_MISMATCH"),
            (modern_body('"\xe9"'), {"x-prove-session": "e\u0301".encode()}, "SESSION_ID_MISMATCH"),  # NFC vs NFD
        ]
        for body, extra, reason in bad:
            reply = http.post(url, content=body, headers={**MODERN, **extra})
            assert refused(reply, reason), (body, reply.status_code, reply.text[:300])
            if "error" in reply.json():  # a body problem: a JSON-RPC error; a header problem: the typed error
                assert reply.json()["error"]["code"] == -32602 and reply.json()["id"] in (7, None)
        assert live_sessions(http, base) == 0  # nothing ran: no session was opened
        # the same text in the header (UTF-8 bytes) and in _meta is one id, on one session
        same = http.post(url, content=modern_body('"caf\u00e9/\u4e2d"'),
                         headers={**MODERN, "x-prove-session": "caf\u00e9/\u4e2d".encode()})
        assert same.status_code == 200, same.text
        assert jsonrpc_payload(same.text)["result"]["_meta"]["session_id"] == "caf\u00e9/\u4e2d"
        assert live_sessions(http, base) == 1
        raw = RawMcp(url, {})  # the handshake era goes through the same check
        try:
            reply = raw.http.post(url, headers=raw.headers, content=(
                b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"find_customers",'
                b'"arguments":{"query":"example"},"_meta":{"session_id":"\\udfff"}}}'))
            assert refused(reply, "BAD_SESSION_ID"), reply.text
        finally:
            raw.close()
        assert live_sessions(http, base) == 1
        assert "Traceback" not in served["stderr"]()


def test_state_changing_requests_need_a_json_body_that_no_page_can_send_unasked():
    with prove_serve("banking") as served, httpx.Client(timeout=30) as http:
        base = served["base"]
        for kwargs in ({}, {"content": b"{}", "headers": {"content-type": "text/plain"}},
                       {"content": b"seed=7", "headers": {"content-type": "application/x-www-form-urlencoded"}},
                       {"content": b"", "headers": {"content-type": "multipart/form-data; boundary=x"}}):
            reply = http.post(f"{base}/sessions", **kwargs)
            assert reply.status_code == 415 and reply.json()["reason"] == "UNSUPPORTED_MEDIA_TYPE", reply.text
        empty = http.post(f"{base}/sessions", content=b"", headers={"content-type": "application/json"})
        assert empty.status_code == 400 and empty.json()["reason"] == "BAD_BODY"
        for path in ("/sessions/%FF%FE/state", "/sessions/a%C3/reset"):  # not UTF-8 once unquoted
            reply = http.request("GET" if path.endswith("state") else "POST", base + path, json={})
            assert reply.status_code == 400 and reply.json()["reason"] == "BAD_SESSION_ID", reply.text
        lone = http.post(f"{base}/sessions", content=b'{"id": "x\\udc80"}', headers={"content-type": "application/json"})
        assert lone.status_code == 400 and lone.json()["reason"] == "BAD_JSON", lone.text
        sid = http.post(f"{base}/sessions", json={}).json()["id"]
        for action in ("reset", "fork"):
            reply = http.post(f"{base}/sessions/{sid}/{action}", content=b"", headers={"content-type": "text/plain"})
            assert reply.status_code == 415, reply.text
        plain_mcp = http.post(served["url"], content=modern_body('"page"'),
                              headers={**MODERN, "content-type": "text/plain"})
        assert 400 <= plain_mcp.status_code < 500
        assert live_sessions(http, base) == 1  # only the JSON create opened one


def test_slow_clients_are_cut_off_and_open_connections_are_bounded():
    with prove_serve("banking", "--header-timeout", "1", "--body-timeout", "1", "--max-connections", "4") as served:
        port = served["port"]
        trickle = socket.create_connection(("127.0.0.1", port), timeout=5)
        trickle.sendall(b"POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
        started = time.monotonic()
        assert trickle.recv(1024) == b"" and time.monotonic() - started < 4  # closed by the server
        trickle.close()
        slow_body = socket.create_connection(("127.0.0.1", port), timeout=5)
        slow_body.sendall(b"POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 100\r\n\r\n{\"seed\"")
        answer = b""
        while chunk := slow_body.recv(4096):  # the server closes the connection after its answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408") and b"BODY_TIMEOUT" in answer, answer
        slow_body.close()
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
        for conn in held:
            conn.sendall(b"GET /sessions HTTP/1.1\r\n")  # open, headers unfinished
        time.sleep(0.2)
        with httpx.Client(timeout=5) as http:
            assert http.get(f"{served['base']}/sessions").status_code == 503  # past the bound
            for conn in held:
                conn.close()
            deadline = time.monotonic() + 5
            while http.get(f"{served['base']}/sessions").status_code != 200:  # freed again
                assert time.monotonic() < deadline
                time.sleep(0.1)
