"""Shared fixtures: the registered servers, and servers running over HTTP in a subprocess."""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator

import pytest

from benchmarks.bench_load import ROOT, Served, free_port, listening
from prove_core.plugin.manager import Plugins

# The faulty test server over streamable HTTP: the same `serve()` that `prove serve` calls, for a
# server that is not registered as a plugin.
FAULTY_CHILD = """
import sys
from prove_core.env.runtime import ServerRuntime
from prove_core.serve.app import serve
from tests.reliability.faulty import server

port, timeout, token = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
serve([ServerRuntime(server, call_timeout_s=timeout or None)], transport="http", port=port, token=token)
"""


@pytest.fixture(scope="session")
def registry():
    return Plugins().load(autoload=False).registry


@pytest.fixture(scope="session")
def all_servers(registry):
    return [registry.load("servers", name) for name in registry.names("servers")]


@contextlib.contextmanager
def serve_faulty(call_timeout: float) -> Iterator[dict]:
    """The faulty server on 127.0.0.1 with a bearer token; ``call_timeout`` 0 runs calls inline."""
    port, token = free_port(), secrets.token_urlsafe(16)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", FAULTY_CHILD, str(port), str(call_timeout), token]
    with listening(argv, port, env) as (proc, stderr_path):
        yield {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"Authorization": f"Bearer {token}"},
               "proc": proc, "stderr": stderr_path}


@pytest.fixture(scope="session")
def served_banking_shopping():
    """`prove serve banking shopping --transport http` with a bearer token, shared by the tests."""
    with Served(["banking", "shopping"]) as served:
        yield served


class RawMcp:
    """Plain JSON-RPC over HTTP (the 2025-06-18 handshake), for requests a real client never sends:
    calls cut off mid-flight, malformed bodies, missing tokens."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        import httpx

        self.url = url
        self.base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **headers}
        self.http = httpx.Client(timeout=30)
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
        response = self.http.post(url, headers=self.base, json=init)
        response.raise_for_status()
        self.headers = {**self.base, "mcp-session-id": response.headers["mcp-session-id"]}
        self.http.post(url, headers=self.headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        self._id = 0

    def close(self) -> None:
        self.http.close()

    def call(self, tool: str, arguments: dict, session: str, *, timeout: float = 30.0) -> dict:
        """The tool result (``structuredContent`` and ``isError``) of one tools/call."""
        self._id += 1
        body = {"jsonrpc": "2.0", "id": self._id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments, "_meta": {"session_id": session}}}
        response = self.http.post(self.url, headers=self.headers, json=body, timeout=timeout)
        return jsonrpc_payload(response.text)["result"]


def jsonrpc_payload(text: str) -> dict:
    """The JSON-RPC message of a response body, plain JSON or a one-event SSE stream."""
    import json

    for line in text.splitlines():
        if line.startswith("data: "):
            return json.loads(line[len("data: "):])
    return json.loads(text)
