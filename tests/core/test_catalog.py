from pathlib import Path

from prove_core.env.catalog import render
from prove_core.plugin.manager import Plugins

CATALOG = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"


def current() -> str:
    registry = Plugins().load(autoload=False).registry
    return render([registry.load("servers", n) for n in registry.names("servers")])


def test_docs_catalog_is_current():
    assert CATALOG.read_text() == current(), "regenerate: prove servers catalog --out docs/catalog.md"


def test_catalog_lists_every_tool_parameter_and_failure_reason():
    registry = Plugins().load(autoload=False).registry
    text = current()
    for name in registry.names("servers"):
        server = registry.load("servers", name)
        for spec in server.specs():
            assert f"### `{name}.{spec.name}`" in text
            for param in spec.parameters.get("properties", {}):
                assert f"| `{param}` |" in text
            for reason in spec.errors:
                assert f"`{reason}`" in text
    assert "20 servers, 343 tools." in text
