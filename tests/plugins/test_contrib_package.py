"""The example third-party package, pip-installed for real, shows up everywhere."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRIB = ROOT / "contrib" / "prove-example-library"


def prove(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("PROVE_DISABLE_PLUGIN_AUTOLOAD", "PROVE_BLOCK_PLUGINS")}
    return subprocess.run([sys.executable, "-m", "prove_core.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture(scope="module")
def installed():
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", str(CONTRIB)],
                   check=True, capture_output=True)
    yield
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "prove-example-library"], capture_output=True)


@pytest.mark.slow
def test_contrib_components_are_listed_with_their_distribution(installed):
    data = json.loads(prove("plugins", "--json").stdout)
    mine = {(c["kind"], c["name"]): c["distribution"] for c in data["components"]}
    assert mine[("server", "library")] == "prove-example-library"
    assert mine[("sampler", "library_available_books")] == "prove-example-library"
    assert data["failures"] == []


@pytest.mark.slow
def test_contrib_server_is_listed_and_passes_the_audit(installed):
    rows = {r["name"]: r for r in json.loads(prove("servers", "list", "--json").stdout)}
    assert rows["library"]["tools"] == 6
    proc = prove("audit", "library", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], report
    assert {c["name"] for c in report["checks"]} >= {"schemas", "determinism", "path_equivalence", "bad_input"}


@pytest.mark.slow
def test_blocking_the_plugin_hides_it(installed):
    env_block = {**os.environ, "PROVE_BLOCK_PLUGINS": "library"}
    out = subprocess.run([sys.executable, "-m", "prove_core.cli", "servers", "list", "--json"],
                         capture_output=True, text=True, env=env_block, timeout=120).stdout
    assert "library" not in {r["name"] for r in json.loads(out)}


@pytest.mark.slow
def test_contrib_sampler_finds_live_entities(installed):
    code = (
        "from prove_core.plugin.manager import get_plugins\n"
        "from prove_core.env.runtime import ServerRuntime\n"
        "reg = get_plugins().registry\n"
        "rt = ServerRuntime(reg.load('servers', 'library'))\n"
        "sid = rt.new_session()\n"
        "ids = reg.load('samplers', 'library_available_books')(rt, sid)['book']\n"
        "assert ids and all(rt.state(sid).books.get(i)['available'] > 0 for i in ids), ids\n"
        "print('OK', len(ids))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "OK" in proc.stdout, proc.stderr
