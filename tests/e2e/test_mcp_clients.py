"""Both Python MCP clients (fastmcp and the official SDK) over stdio and streamable HTTP, with
session isolation through `_meta.session_id`, the X-Prove-Session header and a bearer token."""

import asyncio
import json
import os
import urllib.error
import urllib.request
import uuid

import httpx2
import pytest
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from mcp import Client as SdkClient
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from prove_core.env.runtime import ServerRuntime
from prove_servers.banking import server as banking
from tests.e2e.conftest import SERVE_CMD

ENV = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}


def transfer_args():
    """A valid transfer on the seed state (the served process builds the same state)."""
    rt = ServerRuntime(banking)
    return banking.tools["transfer_between_accounts"].examples[0](rt.state(rt.new_session()))


async def isolation_scenario(call, prefix=""):
    """Write in session A; session B still sees the seed; A sees its write."""
    args = transfer_args()
    balance = {"account_id": args["from_account_id"]}
    a, b = f"session-a-{uuid.uuid4()}", f"session-b-{uuid.uuid4()}"
    seed_balance = await call(f"{prefix}get_balance", balance, b)
    written = await call(f"{prefix}transfer_between_accounts", args, a)
    assert not written["is_error"], written
    after_a = await call(f"{prefix}get_balance", balance, a)
    after_b = await call(f"{prefix}get_balance", balance, b)
    assert after_b["content"] == seed_balance["content"]
    assert after_a["content"]["current_balance"] == pytest.approx(seed_balance["content"]["current_balance"] - args["amount"])
    error = await call(f"{prefix}get_balance", {"account_id": "acc_missing"}, a)
    assert error["is_error"] and error["content"]["code"] == "NOT_FOUND"


def fastmcp_caller(client):
    async def call(name, args, sid):
        result = await client.call_tool_mcp(name, args, meta={"session_id": sid})
        return {"is_error": bool(result.is_error), "content": result.structured_content}

    return call


def sdk_caller(client):
    async def call(name, args, sid):
        result = await client.call_tool(name, args, meta={"session_id": sid})
        return {"is_error": bool(result.is_error), "content": result.structured_content}

    return call


def test_fastmcp_client_over_stdio():
    async def main():
        transport = StdioTransport(command=SERVE_CMD[0], args=[*SERVE_CMD[1:], "banking"], env=ENV)
        async with FastMCPClient(transport) as client:
            tools = await client.list_tools()
            assert len(tools) == 17
            await isolation_scenario(fastmcp_caller(client))

    asyncio.run(main())


def test_official_sdk_client_over_stdio():
    async def main():
        params = StdioServerParameters(command=SERVE_CMD[0], args=[*SERVE_CMD[1:], "banking"], env=ENV)
        async with SdkClient(params) as client:
            tools = (await client.list_tools()).tools
            by_name = {t.name: t for t in tools}
            assert by_name["get_balance"].annotations.read_only_hint is True
            assert by_name["get_balance"].input_schema == banking.tools["get_balance"].spec.parameters
            await isolation_scenario(sdk_caller(client))

    asyncio.run(main())


def test_fastmcp_client_over_http_with_mounted_servers(http_server):
    async def main():
        transport = StreamableHttpTransport(http_server["url"], headers={"Authorization": f"Bearer {http_server['token']}"})
        async with FastMCPClient(transport) as client:
            names = {t.name for t in await client.list_tools()}
            assert len(names) == 17 + 23
            assert "banking_get_balance" in names and "shopping_search_products" in names
            await isolation_scenario(fastmcp_caller(client), prefix="banking_")

    asyncio.run(main())


def test_official_sdk_client_over_http(http_server):
    async def main():
        headers = {"Authorization": f"Bearer {http_server['token']}"}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with SdkClient(streamable_http_client(http_server["url"], http_client=http)) as client:
                tools = (await client.list_tools()).tools
                assert len(tools) == 40
                await isolation_scenario(sdk_caller(client), prefix="banking_")

    asyncio.run(main())


def test_session_header_is_an_alternative_to_meta(http_server):
    async def call(sid, name, args):
        headers = {"Authorization": f"Bearer {http_server['token']}", "X-Prove-Session": sid}
        transport = StreamableHttpTransport(http_server["url"], headers=headers)
        async with FastMCPClient(transport) as client:
            result = await client.call_tool_mcp(name, args)
            assert result.meta["session_id"] == sid
            return result.structured_content

    async def main():
        args = transfer_args()
        before = await call("hdr-b", "banking_get_balance", {"account_id": args["from_account_id"]})
        await call("hdr-a", "banking_transfer_between_accounts", args)
        after_a = await call("hdr-a", "banking_get_balance", {"account_id": args["from_account_id"]})
        after_b = await call("hdr-b", "banking_get_balance", {"account_id": args["from_account_id"]})
        assert after_b == before and after_a != before

    asyncio.run(main())


def test_http_requires_the_bearer_token(http_server):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        request = urllib.request.Request(http_server["url"], data=body, method="POST",
                                         headers={"Content-Type": "application/json", **headers})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=10)
        assert err.value.code == 401
