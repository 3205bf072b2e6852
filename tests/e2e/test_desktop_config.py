"""The README's desktop `mcpServers` snippet, launched exactly as a desktop client would: its
command and arguments over stdio, a bare GUI PATH (where `prove` is Perl's test harness or
nothing), working directory `/`, no plugin settings; the official MCP Python SDK lists the tools
and calls one."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
from pathlib import Path

from mcp import Client as SdkClient
from mcp.client.stdio import StdioServerParameters

from prove_core import __version__
from prove_core.env.runtime import ServerRuntime
from prove_servers.banking import server as banking

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = "/ABSOLUTE/PATH/TO/prove"
BARE_PATH = "/usr/bin:/bin"  # what a GUI app launched from the dock or a .desktop file gets


def readme_snippet() -> dict:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- desktop-config:[^>]*-->\s*```json\n(.*?)\n```", text, re.S)
    assert match, "README.md has no desktop-config snippet"
    return json.loads(match.group(1))


def test_the_readme_snippet_serves_banking_with_a_bare_path():
    config = readme_snippet()["mcpServers"]["prove-banking"]
    assert Path(config["command"]).is_absolute() and config["command"].startswith(PLACEHOLDER)
    assert "prove" not in Path(config["command"]).name.split(".")  # never the bare `prove` a GUI PATH resolves
    resolved = shutil.which("prove", path=BARE_PATH)
    assert resolved is None or not resolved.startswith(str(ROOT))  # Perl's harness (or nothing), not ours
    command = config["command"].replace(PLACEHOLDER, str(ROOT))
    if not Path(command).exists():  # a test environment whose venv is not <repo>/.venv: this interpreter
        command = sys.executable
    rt = ServerRuntime(banking)  # the served process builds the same seed state
    sid = rt.new_session()
    query = banking.tools["find_customers"].examples[0](rt.state(sid))
    expected = rt.call(sid, "find_customers", query).data
    params = StdioServerParameters(command=command, args=config["args"], env={"PATH": BARE_PATH}, cwd="/")

    async def main():
        async with SdkClient(params) as client:
            assert (client.server_info.name, client.server_info.version) == ("prove", __version__)
            tools = (await client.list_tools()).tools
            assert sorted(t.name for t in tools) == sorted(banking.tools)
            found = await client.call_tool("find_customers", query, meta={"session_id": "desktop"})
            assert not found.is_error and found.structured_content == expected and expected["customers"]

    asyncio.run(main())
