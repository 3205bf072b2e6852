"""The example third-party package, pip-installed for real, shows up everywhere.

It is installed into a temporary folder (``pip install --target``) on ``PYTHONPATH`` rather than
into the shared environment: entry points are found the same way, and other test processes never
see the package appear and disappear."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRIB = ROOT / "contrib" / "prove-example-library"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The environment for subprocesses that see the installed package."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", "--target",
                    str(target), str(CONTRIB)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PROVE_DISABLE_PLUGIN_AUTOLOAD", "PROVE_BLOCK_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def prove(env, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "prove_core.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=cwd)


@pytest.mark.slow
def test_contrib_components_are_listed_with_their_distribution(installed):
    data = json.loads(prove(installed, "plugins", "--json").stdout)
    mine = {(c["kind"], c["name"]): c["distribution"] for c in data["components"]}
    assert mine[("server", "library")] == "prove-example-library"
    assert mine[("sampler", "library_available_books")] == "prove-example-library"
    assert data["failures"] == []


@pytest.mark.slow
def test_contrib_server_is_listed_and_passes_the_audit(installed):
    rows = {r["name"]: r for r in json.loads(prove(installed, "servers", "list", "--json").stdout)}
    assert rows["library"]["tools"] == 6
    proc = prove(installed, "audit", "library", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], report
    assert {c["name"] for c in report["checks"]} >= {"schemas", "determinism", "path_equivalence", "bad_input",
                                                     "annotations", "unknown_ids", "declared_failures",
                                                     "documented_failures", "entity_names"}


@pytest.mark.slow
def test_blocking_the_plugin_hides_it(installed):
    out = prove({**installed, "PROVE_BLOCK_PLUGINS": "library"}, "servers", "list", "--json").stdout
    assert "library" not in {r["name"] for r in json.loads(out)}


@pytest.mark.slow
def test_contrib_sampler_finds_live_entities(installed):
    code = (
        "from prove_core.plugin.manager import get_plugins\n"
        "from prove_core.env.runtime import Environment, ServerRuntime\n"
        "from prove_core.synth.sampling import SupportRule\n"
        "reg = get_plugins().registry\n"
        "rt = ServerRuntime(reg.load('servers', 'library'))\n"
        "sampler = reg.build('samplers', 'library_available_books')\n"
        "context = sampler.sample(Environment([rt]), [SupportRule(entity='book', field='available', op='ge', value=2)])\n"
        "books = context.candidates('library', 'book')\n"
        "seed = rt.state(rt.new_session())\n"
        "assert books and all(seed.books.get(b['id'])['available'] >= 2 for b in books), books\n"
        "import random\n"
        "assert context.subset(random.Random(0), 1).candidates('library', 'book')[0] in books\n"
        "print('OK', len(books))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=installed)
    assert "OK" in proc.stdout, proc.stderr


@pytest.mark.slow
def test_contrib_sampler_named_in_a_synth_config(installed, tmp_path):
    """``[synth].sampler = "library_available_books"``: prove synth runs on it and every book the
    corpus's requests hand the assistant is one the sampler found on the shelf."""
    config = tmp_path / "library.toml"
    config.write_text(f"""
name = "library-synth"
seed = 0
output_dir = "{tmp_path / 'runs'}"

[[servers]]
name = "library"

[synth]
examples = 12
seeds = 1
plots = false
exports = []
sampler = "library_available_books"
""")
    proc = prove(installed, "synth", str(config), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    corpus = [json.loads(line) for line in (tmp_path / "runs" / "library-synth" / "synth" / "corpus.jsonl").open()]
    calls = [c for ex in corpus for c in ex["task"].get("calls", [])]
    assert {c["tool"] for c in calls} >= {"borrow_book"}
    code = (
        "import json, sys\n"
        "from prove_core.plugin.manager import get_plugins\n"
        "from prove_core.env.runtime import Environment, ServerRuntime\n"
        "reg = get_plugins().registry\n"
        "env = Environment([ServerRuntime(reg.load('servers', 'library'), seed=0)])\n"
        "ctx = reg.build('samplers', 'library_available_books').sample(env, [])\n"
        "print(json.dumps(sorted(b['id'] for b in ctx.candidates('library', 'book'))))\n"
    )
    sampled = set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                            timeout=120, env=installed).stdout.strip().splitlines()[-1]))
    borrowed = {c["arguments"]["book_id"] for c in calls if c["tool"] == "borrow_book"}
    assert borrowed and borrowed <= sampled, (borrowed, sampled)
