"""The README's desktop `mcpServers` snippet, launched exactly as a desktop client would: its
command (the path the README's own command prints) and arguments over stdio, a bare GUI PATH
(where `prove` is Perl's test harness or nothing), working directory `/`, no plugin settings; the
official MCP Python SDK lists the tools and calls one."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
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


def readme_path_command() -> str:
    """The shell command the README gives to print the venv's Python (run in the project folder)."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"in the project folder,\s+`([^`]+)`\s+prints it", text)
    assert match, "README.md gives no command that prints the venv's Python"
    return match.group(1)


def venv_python() -> str | None:
    """What the README's command prints in this checkout (None when its venv is elsewhere)."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        return None
    out = subprocess.run(["bash", "-c", readme_path_command()], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_readme_path_command_prints_the_venv_python_unresolved():
    printed = venv_python()
    if printed is None:
        return  # a test environment whose venv is not <repo>/.venv
    assert printed == str(ROOT / ".venv" / "bin" / "python")
    # the venv's own path, not the base interpreter its symlink resolves to, imports PROVE from a bare environment
    venv = subprocess.run([printed, "-c", "import prove_core"], capture_output=True, text=True,
                          env={"PATH": BARE_PATH}, cwd="/")
    assert venv.returncode == 0, venv.stderr


def test_the_readme_snippet_serves_banking_with_a_bare_path():
    config = readme_snippet()["mcpServers"]["prove-banking"]
    assert Path(config["command"]).is_absolute() and config["command"].startswith(PLACEHOLDER)
    assert "prove" not in Path(config["command"]).name.split(".")  # never the bare `prove` a GUI PATH resolves
    resolved = shutil.which("prove", path=BARE_PATH)
    assert resolved is None or not resolved.startswith(str(ROOT))  # Perl's harness (or nothing), not ours
    printed = venv_python()  # what a user following the README pastes in place of the placeholder
    if printed is not None:
        assert config["command"] == PLACEHOLDER + "/.venv/bin/python"
        command = config["command"].replace(PLACEHOLDER + "/.venv/bin/python", printed)
    else:  # a test environment whose venv is not <repo>/.venv: this interpreter
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
