"""Plugin discovery and registration: bundled list, entry points, isolation, switches, errors."""

import sys
import textwrap
import types

import pytest

from prove_core import hookimpl
from prove_core.errors import DuplicateComponent, HookNameError, UnknownComponent
from prove_core.plugin.manager import BUNDLED, Plugins
from tests.support.toy import server as toy_server


def make_module(name, **attrs):
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


@pytest.fixture()
def fake_dist(tmp_path, monkeypatch):
    """Install plugins through real entry points: a *.dist-info folder on sys.path."""

    def install(dist_name, modules, entry_points):
        for mod_name, source in modules.items():
            (tmp_path / f"{mod_name}.py").write_text(textwrap.dedent(source))
        info = tmp_path / f"{dist_name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 1.0\n")
        lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
        (info / "entry_points.txt").write_text(f"[prove.plugins]\n{lines}\n")
        return tmp_path

    monkeypatch.syspath_prepend(str(tmp_path))
    yield install
    for name in [m for m in sys.modules if m.startswith("tp_")]:
        del sys.modules[name]


GOOD = """
from prove_core import hookimpl

@hookimpl
def prove_register_rewards(register):
    register("tp_reward_impl:score", name="tp_reward", summary="a lazy reward")
"""
LAZY_TARGET = """
import json  # the lazy target is imported only on first use
def score(*a):
    return 1.0
"""


def test_bundled_plugins_load_with_autoload_disabled(monkeypatch):
    monkeypatch.setenv("PROVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    plugins = Plugins().load()
    assert {"banking", "shopping"} <= set(plugins.registry.names("servers"))
    assert all(plugins.registry.component("servers", n).distribution == "prove" for n in ("banking", "shopping"))
    assert "banking" in " ".join(BUNDLED)


def test_entry_point_plugin_is_discovered_with_its_distribution(fake_dist):
    fake_dist("tp-good", {"tp_good": GOOD, "tp_reward_impl": LAZY_TARGET}, {"tp_good": "tp_good"})
    plugins = Plugins().load()
    comp = plugins.registry.component("rewards", "tp_reward")
    assert comp.distribution == "tp-good" and comp.lazy
    assert "tp_reward_impl" not in sys.modules  # lazy: not imported by listing
    assert plugins.registry.load("rewards", "tp_reward")() == 1.0


def test_import_failure_is_reported_and_isolated(fake_dist):
    fake_dist("tp-mixed", {"tp_good": GOOD, "tp_broken": "import does_not_exist_anywhere\n"},
              {"tp_good": "tp_good", "tp_broken": "tp_broken"})
    plugins = Plugins().load()
    assert "tp_reward" in plugins.registry.names("rewards")
    (failure,) = [f for f in plugins.failures if f.plugin == "tp_broken"]
    assert "does_not_exist_anywhere" in failure.error and failure.distribution == "tp-mixed"


def test_blocked_plugins_are_not_even_imported(fake_dist, monkeypatch):
    fake_dist("tp-mixed", {"tp_good": GOOD, "tp_broken": "raise SystemExit('imported!')\n"},
              {"tp_good": "tp_good", "tp_broken": "tp_broken"})
    monkeypatch.setenv("PROVE_BLOCK_PLUGINS", "tp_broken, prove_servers.shopping")
    plugins = Plugins().load()
    assert not plugins.failures
    assert "shopping" not in plugins.registry.names("servers")
    assert "tp_reward" in plugins.registry.names("rewards")


def test_autoload_switch_skips_entry_points(fake_dist, monkeypatch):
    fake_dist("tp-good", {"tp_good": GOOD, "tp_reward_impl": LAZY_TARGET}, {"tp_good": "tp_good"})
    monkeypatch.setenv("PROVE_DISABLE_PLUGIN_AUTOLOAD", "true")
    assert "tp_reward" not in Plugins().load().registry.names("rewards")


def test_duplicate_component_names_are_an_error():
    plugins = Plugins().load(bundled=(), autoload=False)

    @hookimpl
    def prove_register_servers(register):
        register(toy_server)

    plugins.add(make_module("first", prove_register_servers=prove_register_servers), name="first")
    with pytest.raises(DuplicateComponent, match="'first'.*'second'"):
        plugins.add(make_module("second", prove_register_servers=prove_register_servers), name="second")


def test_misspelled_hook_is_an_error_decorated_or_not():
    plugins = Plugins().load(bundled=(), autoload=False)

    def prove_register_server(register):  # missing the trailing "s"
        pass

    with pytest.raises(HookNameError, match="prove_register_server"):
        plugins.add(make_module("typo", prove_register_server=prove_register_server), name="typo")
    with pytest.raises(HookNameError):
        plugins.add(make_module("typo2", prove_register_server=hookimpl(prove_register_server)), name="typo2")
    assert not plugins.pm.has_plugin("typo")


def test_a_plugin_is_registered_and_unregistered_like_in_llm_tests():
    plugins = Plugins().load(bundled=(), autoload=False)

    @hookimpl
    def prove_register_evaluators(register):
        register(lambda: None, name="noop_eval")

    plugins.add(make_module("tmp_plugin", prove_register_evaluators=prove_register_evaluators), name="tmp_plugin")
    try:
        assert plugins.registry.names("evaluators") == ["noop_eval"]
    finally:
        plugins.remove("tmp_plugin")
    with pytest.raises(UnknownComponent, match="noop_eval"):
        plugins.registry.component("evaluators", "noop_eval")


def test_lifecycle_hooks_are_called():
    plugins = Plugins().load(bundled=(), autoload=False)
    seen = []

    @hookimpl
    def prove_episode_start(server, session_id, task):
        seen.append(("start", server))

    plugins.add(make_module("watcher", prove_episode_start=prove_episode_start), name="watcher")
    plugins.hook.prove_episode_start(server="banking", session_id="s", task=None)
    assert seen == [("start", "banking")]


def test_every_hook_is_documented_with_its_signature():
    import inspect
    from pathlib import Path

    from prove_core import hookspecs

    doc = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    for name, fn in vars(hookspecs).items():
        if name.startswith("prove_") and callable(fn):
            params = ", ".join(inspect.signature(fn).parameters)
            assert f"{name}({params})" in doc, f"docs/plugins.md does not document {name}({params})"
            assert fn.__doc__ and fn.__doc__.strip()
