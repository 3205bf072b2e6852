"""Packaging: every package is listed, and a built wheel installs and works on its own."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDER_TO_PACKAGE = {"prove_core": "prove_core", "plugins": "prove_plugins", "servers": "prove_servers"}


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for folder, package in FOLDER_TO_PACKAGE.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]))
    assert found == listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}; stale: {sorted(listed - found)}"


def test_installed_names_are_not_generic():
    import prove_plugins
    import prove_servers

    assert Path(prove_servers.__file__).parent.name == "servers"
    assert Path(prove_plugins.__file__).parent.name == "plugins"


@pytest.mark.slow
def test_wheel_installs_and_serves_from_site_packages(tmp_path):
    """Build a wheel, install it (no deps: they are in this environment) into a bare target
    folder, and run the CLI from there with the source tree out of reach."""
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)],
                   check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = dist.glob("prove-*.whl")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = (
        "import prove_core, prove_servers.banking, json\n"
        "from prove_core.cli import main\n"
        "print('FROM', prove_core.__file__)\n"
        "main(['servers', 'list', '--json'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target), "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"FROM {target}" in proc.stdout
    assert '"name": "banking"' in proc.stdout
    # the default experiment ships inside the wheel
    assert (target / "prove_core" / "defaults" / "quickstart.toml").is_file()


def _third_party_distributions(module_file: Path) -> set[str]:
    """The distributions a module's imports come from, besides the standard library and PROVE."""
    import ast
    from importlib import metadata

    owners = metadata.packages_distributions()
    tops = set()
    for node in ast.walk(ast.parse(module_file.read_text())):
        if isinstance(node, ast.Import):
            tops |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.add(node.module.split(".")[0])
    tops -= set(sys.stdlib_module_names) | {"prove_core", "prove_plugins", "prove_servers", "__future__"}
    return {dist.lower() for top in tops for dist in owners.get(top, [top])}


def _requirement_names(requirements: list[str]) -> set[str]:
    import re

    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_openenv_extra_installs_what_the_openenv_command_imports():
    """`prove openenv serve` without OpenEnv says `pip install 'prove[openenv]'`: that extra (with the
    base install) must bring every distribution the adapter imports, openenv-core first of all."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "pip install 'prove[openenv]'" in (ROOT / "prove_core" / "cli.py").read_text()
    provided = _requirement_names(project["dependencies"] + project["optional-dependencies"]["openenv"])
    needed = _third_party_distributions(ROOT / "plugins" / "integrations" / "openenv_server.py")
    assert "openenv-core" in needed  # the check reads the adapter's imports
    pulled_in = {"pydantic-core", "pydantic_core", "starlette"}  # come with pydantic and fastapi, which are listed
    assert needed - pulled_in <= provided, needed - pulled_in - provided
