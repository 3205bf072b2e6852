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
               ("prove_core/cli.py", "prove_plugins.openenv_server")}  # `prove openenv serve` runs the bundled adapter, lazily
    offenders = []
    for path in sorted((ROOT / "prove_core").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("prove_core/testing/"):
            continue
        for name in _imports(path):
            if (name.startswith("prove_plugins") or name.startswith("prove_core.testing")) and (rel, name) not in allowed:
                offenders.append(f"{rel} imports {name}")
    assert offenders == []


def test_moved_types_are_the_cores_and_stay_importable_from_their_old_homes():
    from prove_core.env.runtime import example_at
    from prove_core.synth.sampling import SupportRule
    from prove_core.testing import conformance
    from prove_plugins import sampler

    assert conformance.example_at is example_at
    assert sampler.SupportRule is SupportRule
    rule = SupportRule(entity="account", field="balance", op="gt", value=0)
    assert rule.holds({"balance": 5}) and not rule.holds({"balance": 0}) and rule.holds({})
