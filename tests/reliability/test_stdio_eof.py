"""stdio: when stdin closes, every call already read is answered, or reported as cut off."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest, JSONRPCResponse

from prove_core.serve.app import StdioDrain

ENV = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}


@pytest.mark.slow
def test_every_call_in_flight_when_stdin_closes_is_answered():
    calls = 30
    requests = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "eof", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    requests += [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
        "name": "find_customers", "arguments": {"query": "example"}, "_meta": {"session_id": f"s{i}"}}}
        for i in range(1, calls + 1)]
    stdin = "".join(json.dumps(r) + "\n" for r in requests).encode()
    for _ in range(5):  # before the drain every run lost some (the SDK cancels what runs at EOF)
        done = subprocess.run([sys.executable, "-m", "prove_core", "serve", "banking"], input=stdin,
                              capture_output=True, env=ENV, timeout=120)
        answers = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
        assert sorted(a["id"] for a in answers) == list(range(calls + 1)), done.stderr.decode()[-2000:]
        assert not any(a.get("result", {}).get("isError") for a in answers)


def test_a_call_that_outlasts_the_drain_is_reported_once_and_nothing_follows():
    async def main():
        in_send, in_recv = anyio.create_memory_object_stream(10)
        out_send, out_recv = anyio.create_memory_object_stream(10)
        drain = StdioDrain(in_recv, out_send, drain_s=0.2)
        await in_send.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params={})))
        await in_send.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=2, method="tools/call", params={})))
        await in_send.aclose()  # stdin's end
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain.pump)
            first = await drain.read.receive()
            await drain.read.receive()
            with pytest.raises(TimeoutError):  # the server does not see the end while a call runs
                with anyio.fail_after(0.1):
                    await drain.read.receive()
            await drain.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=first.message.id, result={})))
        await drain.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=2, result={})))  # too late: dropped
        out = [out_recv.receive_nowait().message for _ in range(2)]
        with pytest.raises(anyio.WouldBlock):
            out_recv.receive_nowait()
        assert [type(m).__name__ for m in out] == ["JSONRPCResponse", "JSONRPCError"]
        assert out[1].id == 2 and "stdin closed" in out[1].error.message
        with pytest.raises(anyio.EndOfStream):
            await drain.read.receive()

    anyio.run(main)
