"""The core's seams: the core imports no plugin and no test-kit code (``prove audit`` aside)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_the_core_imports_no_plugin_and_no_test_kit():
    allowed = {("prove_core/cli.py", "prove_core.testing.conformance"),  # `prove audit` runs the kit
               # `prove openenv serve` runs the bundled adapter, lazily
               ("prove_core/cli.py", "prove_plugins.integrations.openenv_server")}
    offenders = []
    for path in sorted((ROOT / "prove_core").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("prove_core/testing/"):
            continue
        for name in _imports(path):
            if (name.startswith("prove_plugins") or name.startswith("prove_core.testing")) and (rel, name) not in allowed:
                offenders.append(f"{rel} imports {name}")
    assert offenders == []


# The core's packages, lowest first. A package may import its own modules and any package of a lower
# layer, never one of its own layer or above: env knows nothing of serving or rewards, the reward
# nothing of training. docs/architecture.md draws the same table.
LAYERS = (
    {"errors", "logging"},
    {"model", "config"},
    {"plugin"},
    {"toolkit"},
    {"env"},
    {"serve", "reward", "synth"},
    {"eval"},
    {"train"},
    {"testing"},
    {"stages"},
    {"cli"},
    {"__main__"},
)
LAYER_OF = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}


def _unit(path_or_module: str) -> str:
    """``prove_core/env/runtime.py`` and ``prove_core.env.runtime`` -> ``env``; a top module -> its name."""
    parts = path_or_module.removesuffix(".py").replace("/", ".").split(".")
    return parts[1]


def test_every_core_package_and_module_has_a_layer():
    units = {p.name.removesuffix(".py") for p in (ROOT / "prove_core").iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__init__.py"}
    assert units - {"defaults"} == set(LAYER_OF)


def test_no_core_package_imports_one_of_its_layer_or_above():
    offenders = []
    for path in sorted((ROOT / "prove_core").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "prove_core/__init__.py" or rel.startswith("prove_core/defaults/"):
            continue
        here = _unit(rel)
        for name in _imports(path):
            if not name.startswith("prove_core.") or _unit(name) in (here, "defaults"):
                continue
            if LAYER_OF[_unit(name)] >= LAYER_OF[here]:
                offenders.append(f"{rel} imports {name}")
    assert offenders == []
