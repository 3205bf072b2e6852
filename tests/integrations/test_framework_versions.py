"""The verl and OpenRLHF integrations, tested inside each framework's own declared transformers range.

The test environment holds one transformers (the newest the `train` extra allows); verl 0.9.1
declares `transformers>=5.5.3,<5.11,!=5.6.0` and OpenRLHF 0.11.2 `transformers==5.15.0`, which no
single environment can hold together. For each framework this test builds an overlay folder
(cached in `.prove_cache/framework-envs/`) with the newest transformers the installed framework
declares, plus those of that transformers' own requirements (tokenizers, huggingface-hub) the
environment does not satisfy, and runs the framework's integration tests with the overlay first
on PYTHONPATH: a separate environment per framework, on top of the shared one.
Marked slow: it pip-installs (docs/integrations.md, "Tested versions").
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# framework distribution -> its integration tests
FRAMEWORKS = {"verl": "tests/integrations/test_verl.py", "openrlhf": "tests/training/test_openrlhf.py"}


def declared(distribution: str, name: str):
    """The version specifier ``distribution`` declares for ``name`` (its unconditional requirement)."""
    from packaging.requirements import Requirement

    for line in metadata.requires(distribution) or []:
        req = Requirement(line)
        if req.name.lower().replace("_", "-") == name and req.marker is None:
            return req.specifier
    raise AssertionError(f"{distribution} declares no requirement on {name}")


def pip_target(target: Path, *requirements: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target", str(target),
                    *requirements], check=True, capture_output=True, text=True, timeout=600)


def overlay(distribution: str) -> tuple[Path, str]:
    """A folder holding the newest transformers ``distribution`` declares and what that
    transformers needs beyond this environment; and that transformers' version."""
    from packaging.requirements import Requirement

    spec = declared(distribution, "transformers")
    target = ROOT / ".prove_cache" / "framework-envs" / f"{distribution}-{metadata.version(distribution)}"
    found = list(target.glob("transformers-*.dist-info"))
    if not found:
        pip_target(target, f"transformers{spec}")
        found = list(target.glob("transformers-*.dist-info"))
        for line in metadata.Distribution.at(found[0]).requires or []:
            req = Requirement(line)
            if req.marker is not None:
                continue
            try:
                ours = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                ours = None
            if ours is None or not req.specifier.contains(ours, prereleases=True):
                pip_target(target, str(req))
    version = metadata.Distribution.at(found[0]).version
    assert spec.contains(version), (distribution, spec, version)
    return target, version


@pytest.mark.slow
@pytest.mark.parametrize("distribution", sorted(FRAMEWORKS))
def test_the_integration_passes_with_the_transformers_its_framework_declares(distribution):
    try:
        metadata.version(distribution)
    except metadata.PackageNotFoundError:
        pytest.skip(f"{distribution} is not installed (the README's test command installs it with --no-deps)")
    target, version = overlay(distribution)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    seen = subprocess.run([sys.executable, "-c", "import transformers; print(transformers.__version__)"], env=env,
                          capture_output=True, text=True, cwd=ROOT)
    assert seen.stdout.strip() == version, seen.stderr[-2000:]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", FRAMEWORKS[distribution]],
                         env=env, capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and " skipped" not in run.stdout.splitlines()[-1], run.stdout[-500:]
