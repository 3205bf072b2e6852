"""Plugin discovery and registration: bundled list, entry points, isolation, switches, errors."""

import sys
import textwrap
import types
from pathlib import Path

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
    register("tp_reward_impl:Always", name="tp_reward", summary="a lazy reward")
"""
LAZY_TARGET = """
import json  # the lazy target is imported only on first use

class Always:
    name = "tp_reward"

    def __init__(self, config):
        self.config = config

    def range(self):
        return (0.0, 1.0)

    def score(self, rollout, context):
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
    assert plugins.registry.build("rewards", "tp_reward").score(None, None) == 1.0


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

    with pytest.raises(HookNameError, match="prove_register_server is not a PROVE hook "
                                           r"\(did you mean prove_register_servers\?\)"):
        plugins.add(make_module("typo", prove_register_server=prove_register_server), name="typo")
    with pytest.raises(HookNameError):
        plugins.add(make_module("typo2", prove_register_server=hookimpl(prove_register_server)), name="typo2")
    assert not plugins.pm.has_plugin("typo")


def test_a_plugin_is_registered_and_unregistered_like_in_llm_tests():
    plugins = Plugins().load(bundled=(), autoload=False)

    class Noop:
        name = "noop_eval"

        def __init__(self, config):
            self.config = config

    @hookimpl
    def prove_register_evaluators(register):
        register(Noop)

    plugins.add(make_module("tmp_plugin", prove_register_evaluators=prove_register_evaluators), name="tmp_plugin")
    try:
        assert plugins.registry.names("evaluators") == ["noop_eval"]
    finally:
        plugins.remove("tmp_plugin")
    with pytest.raises(UnknownComponent, match="noop_eval"):
        plugins.registry.component("evaluators", "noop_eval")


def test_lifecycle_hooks_are_called(tmp_path):
    """A plugin registered with the manager sees every episode start and end, with the hookspec's
    arguments: a rollout (the loop training and evaluation share), a synthesis replay and the
    scripted episode of `prove run`."""
    import json

    from prove_core.env.episode import EpisodeResult
    from prove_core.env.runtime import Environments
    from prove_core.model import Example, GroundTruthCall, Message, Task, ToolCall
    from prove_core.reward.rollout import Played, PolicyTurn, ScriptedPolicy, rollout
    from prove_core.stages import run_experiment
    from prove_core.synth.validation import Verdict, replay

    plugins = Plugins().load(bundled=(), autoload=False)
    seen = []

    @hookimpl
    def prove_register_servers(register):
        register(toy_server)

    @hookimpl
    def prove_episode_start(server, session_id, task):
        seen.append(("start", server, session_id, task))

    @hookimpl
    def prove_episode_end(server, session_id, task, result):
        seen.append(("end", server, session_id, task, result))

    plugins.add(make_module("watcher", prove_register_servers=prove_register_servers,
                            prove_episode_start=prove_episode_start, prove_episode_end=prove_episode_end), name="watcher")

    # A rollout on an environment built the way training and evaluation build them.
    task = Task(servers=["wallet"], seed=1, calls=[GroundTruthCall(id="c1", tool="list_wallets")])
    env = Environments(plugins.registry, hooks=plugins.hook)(task)
    calls = [ToolCall(id="c1", name="list_wallets")]
    messages = [Message(role="user", content="Show my wallets.")]
    example = Example(id="ex", messages=messages, tools=[], task=task)
    played = rollout(ScriptedPolicy([PolicyTurn(attempts=calls), PolicyTurn(content="Here.")]), example, env)
    assert [e[0] for e in seen] == ["start", "end"]
    (_, server, sid, started), (_, _, end_sid, ended, result) = seen
    assert (server, sid, end_sid, started, ended) == ("wallet", played.session_id, played.session_id, task, task)
    assert isinstance(result, Played) and result is played
    assert played.session_id not in env.runtimes["wallet"]  # closed after the end hook

    # The synthesis replay of the same conversation.
    seen.clear()
    listed = env.call(env.new_session(), "list_wallets", {})
    recorded = Example(id="ex", tools=[], task=task, messages=[
        *messages, Message(role="assistant", tool_calls=calls),
        Message(role="tool", tool_call_id="c1", name="list_wallets", content=json.dumps(listed.structured))])
    verdict = replay(recorded, env)
    assert verdict.ok and [e[0] for e in seen] == ["start", "end"]
    assert seen[0][1:] == ("wallet", seen[1][2], task) and seen[1][3] is task and seen[1][4] is verdict
    assert isinstance(verdict, Verdict)

    # The scripted episode of `prove run`.
    seen.clear()
    summary = run_experiment({"name": "hooks", "output_dir": str(tmp_path), "seed": 2, "stages": ["episode"],
                              "servers": [{"name": "wallet"}],
                              "episode": {"steps": [{"id": "all", "tool": "list_wallets", "args": {}}]}},
                             plugins=plugins, echo=lambda _line: None)
    assert summary["ok"] and [e[0] for e in seen] == ["start", "end"]
    (_, server, sid, started), (_, _, end_sid, ended, result) = seen
    assert server == "wallet" and sid == end_sid == result.session_id
    assert isinstance(started, Task) and started.servers == ["wallet"] and started.seed == 2 and started.calls == []
    assert isinstance(result, EpisodeResult) and ended is result.task and [c.id for c in ended.calls] == ["all"]


def test_every_hook_is_documented_with_its_signature():
    import inspect
    from pathlib import Path

    from prove_core.plugin import hookspecs

    doc = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    for name, fn in vars(hookspecs).items():
        if name.startswith("prove_") and callable(fn):
            params = ", ".join(inspect.signature(fn).parameters)
            assert f"{name}({params})" in doc, f"docs/plugins.md does not document {name}({params})"
            assert fn.__doc__ and fn.__doc__.strip()


# -- a misspelled hook isolates its plugin -------------------------------------------------------------

TYPO = """
from prove_core import hookimpl

@hookimpl
def prove_register_server(register):  # missing the trailing "s"
    raise AssertionError("never called")
"""


def test_misspelled_hook_in_an_installed_plugin_is_isolated(fake_dist):
    fake_dist("tp-mixed", {"tp_good": GOOD, "tp_reward_impl": LAZY_TARGET, "tp_typo": TYPO},
              {"tp_good": "tp_good", "tp_typo": "tp_typo"})
    plugins = Plugins().load()
    assert "tp_reward" in plugins.registry.names("rewards") and "banking" in plugins.registry.names("servers")
    (failure,) = plugins.failures
    assert failure.plugin == "tp_typo" and failure.distribution == "tp-mixed"
    assert failure.error == ("plugin 'tp_typo' was not loaded: prove_register_server is not a PROVE hook "
                             "(did you mean prove_register_servers?)")
    assert not plugins.pm.has_plugin("tp_typo") and "tp_typo" not in plugins.distributions


def test_prove_commands_work_beside_a_plugin_with_a_misspelled_hook(fake_dist, tmp_path):
    import json
    import os
    import subprocess

    root = fake_dist("tp-typo", {"tp_typo": TYPO}, {"tp_typo": "tp_typo"})
    env = {k: v for k, v in os.environ.items() if k not in ("PROVE_DISABLE_PLUGIN_AUTOLOAD", "PROVE_BLOCK_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])

    def prove(*args):
        return subprocess.run([sys.executable, "-m", "prove_core.cli", *args], capture_output=True, text=True, env=env,
                              timeout=120)

    listed = prove("servers", "list", "--json")
    assert listed.returncode == 0 and "banking" in {r["name"] for r in json.loads(listed.stdout)}, listed.stderr
    data = json.loads(prove("plugins", "--json").stdout)
    assert data["failures"] == [{"plugin": "tp_typo", "distribution": "tp-typo", "error": (
        "plugin 'tp_typo' was not loaded: prove_register_server is not a PROVE hook (did you mean prove_register_servers?)")}]
    table = prove("plugins")
    assert table.returncode == 0 and "failed to load plugin tp_typo (tp-typo)" in table.stderr


def test_a_bundled_plugin_that_breaks_the_contract_is_isolated_too():
    class Instance:
        name = "oops"

    @hookimpl
    def prove_register_samplers(register):
        register(Instance())

    plugins = Plugins()
    sys.modules["tp_bad_bundled"] = make_module("tp_bad_bundled", prove_register_samplers=prove_register_samplers)
    try:
        plugins.load(bundled=("tp_bad_bundled", "prove_plugins.synth.sampler"), autoload=False)
    finally:
        del sys.modules["tp_bad_bundled"]
    assert plugins.registry.names("samplers") == ["live"]
    (failure,) = plugins.failures
    assert failure.plugin == "tp_bad_bundled" and "registered sampler 'oops', which is a Instance, not a class" in failure.error


# -- kinds and their nouns -----------------------------------------------------------------------------


def test_every_kind_has_a_hook_and_a_singular_noun_in_messages():
    from prove_core.errors import PluginError
    from prove_core.plugin import hookspecs
    from prove_core.plugin.registry import KINDS, NOUNS, Registry, noun

    assert set(KINDS) == set(NOUNS) and "clients" in KINDS
    assert {f"prove_register_{k}" for k in KINDS} == {n for n in vars(hookspecs) if n.startswith("prove_register_")}
    expected = {"servers": "server", "samplers": "sampler", "extractors": "extractor", "teachers": "teacher",
                "rewards": "reward", "perturbations": "perturbation", "trainers": "trainer", "evaluators": "evaluator",
                "parsers": "parser", "clients": "client"}
    assert NOUNS == expected
    registry = Registry()
    for kind, what in expected.items():
        with pytest.raises(UnknownComponent) as info:
            registry.component(kind, "banking")
        assert str(info.value) == f"no {what} named 'banking' (registered: none)"
        register = registry.register_callable(kind, plugin="p1", distribution="d1")
        with pytest.raises(PluginError, match=f"^plugin 'p1' registered a {what} without a name$"):
            register(object, name="")
        register("tp_missing_module:Thing", name="thing")
        with pytest.raises(PluginError, match=f"^{what} 'thing' from plugin 'p1' failed to load"):
            registry.load(kind, "thing")
        with pytest.raises(DuplicateComponent, match=f"^duplicate {what} name 'thing': registered by 'p1'"):
            registry.register_callable(kind, plugin="p2", distribution="d2")("x:y", name="thing")
    with pytest.raises(PluginError, match="unknown component kind 'widgets'"):
        noun("widgets")


def test_prove_plugins_lists_every_kind_by_its_noun(monkeypatch):
    import json

    from click.testing import CliRunner

    from prove_core.cli import cli
    from prove_core.plugin import manager

    monkeypatch.setattr(manager, "_DEFAULT", Plugins().load(autoload=False))
    data = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    kinds = {(c["kind"], c["name"]) for c in data["components"]}
    assert {("client", n) for n in ("hf", "openai", "oracle", "no_call", "spammer")} <= kinds
    assert {("server", "banking"), ("sampler", "live"), ("extractor", "chains"), ("extractor", "schema"),
            ("teacher", "programmatic"), ("reward", "validity"), ("perturbation", "distractors"),
            ("parser", "qwen"), ("trainer", "trl"), ("evaluator", "prove")} <= kinds


# -- the component contract and the one loader -------------------------------------------------------


def test_the_loader_structures_options_with_the_component_config():
    import attrs

    from prove_core.errors import ConfigError, PluginError
    from prove_core.plugin.registry import NoConfig, Registry

    @attrs.frozen
    class Config:
        rounds: int = 3
        probes: tuple[str, ...] = ("a",)

    class Sampler:
        name = "tp_sampler"

        def __init__(self, config, **context):
            self.config, self.context = config, context

    Sampler.Config = Config

    class Bare:
        name = "tp_bare"

        def __init__(self, config):
            self.config = config

    registry = Registry()
    register = registry.register_callable("samplers", plugin="p", distribution="d")
    register(Sampler)
    register(Bare)
    register(Bare, name="tp_alias")
    built = registry.build("samplers", "tp_sampler", {"rounds": 5, "probes": ["x", "y"]}, path="$.synth", extra=1)
    assert isinstance(built, Sampler) and built.config == Config(rounds=5, probes=("x", "y"))
    assert built.context == {"extra": 1}
    assert registry.build("samplers", "tp_sampler").config == Config()
    assert registry.config_class("samplers", "tp_sampler") is Config
    assert registry.config_class("samplers", "tp_bare") is NoConfig
    assert registry.build("samplers", "tp_bare").config == NoConfig()
    assert type(registry.build("samplers", "tp_alias")) is Bare  # an alias builds the same class
    with pytest.raises(ConfigError, match=r"\$\.synth\.rounds: expected int, got str"):
        registry.build("samplers", "tp_sampler", {"rounds": "5"}, path="$.synth")
    with pytest.raises(ConfigError, match=r"\$\.x\.options: extra fields found \(rounds\)"):
        registry.build("samplers", "tp_bare", {"rounds": 1}, path="$.x.options")
    with pytest.raises(UnknownComponent, match=r"no sampler named 'nope' \(registered: tp_alias, tp_bare, tp_sampler\)"):
        registry.build("samplers", "nope")
    problems = []
    assert registry.build_entry("samplers", "nope", {}, where="$.a[0]", problems=problems) is None
    assert registry.build_entry("samplers", "tp_sampler", {"rounds": "x"}, where="$.a[1]", problems=problems) is None
    assert problems == ["$.a[0].name: no sampler named 'nope' (registered: tp_alias, tp_bare, tp_sampler)",
                        "$.a[1].options.rounds: expected int, got str"]
    with pytest.raises(PluginError, match="registered sampler 'obj', which is a Bare, not a class"):
        register(Bare(None), name="obj")
    Broken = type("Broken", (), {"name": "broken", "Config": dict})
    with pytest.raises(PluginError, match="has a `Config` that is not an attrs class"):
        register(Broken)
    register("tests.core.test_plugins:make_module", name="lazy_function")  # checked when built
    with pytest.raises(PluginError, match="sampler 'lazy_function' from plugin 'p' is a function, not a class"):
        registry.build("samplers", "lazy_function")
    registry.register_callable("servers", plugin="p", distribution="d")(toy_server)
    with pytest.raises(PluginError, match="servers are registered as objects"):
        registry.build("servers", toy_server.name)


def test_every_bundled_component_follows_the_contract(monkeypatch):
    import attrs

    # teval's data is not packaged: its default data_dir ("") reads $TEVAL_DATA_DIR, here the fixtures
    monkeypatch.setenv("TEVAL_DATA_DIR", str(Path(__file__).resolve().parents[1] / "eval" / "fixtures" / "teval"))

    from prove_core.plugin.registry import KINDS, OBJECT_KINDS, config_class

    registry = Plugins().load(autoload=False).registry
    needs_a_model = {("clients", "hf")}  # a checkpoint folder or a named source: no sensible default
    for kind in KINDS:
        if kind in OBJECT_KINDS:
            continue
        assert registry.names(kind), kind
        for comp in registry.components(kind):
            cls = registry.load(kind, comp.name)
            assert isinstance(cls, type) and isinstance(cls.name, str), (kind, comp.name)
            config = config_class(cls)
            no_default = {f.name for f in attrs.fields(config) if f.default is attrs.NOTHING}
            assert no_default == set(), (kind, comp.name, no_default)
            if (kind, comp.name) in needs_a_model:
                with pytest.raises(ValueError, match="path .*or source"):
                    config()
            else:
                instance = registry.build(kind, comp.name, registry=registry) if kind == "clients" else \
                    registry.build(kind, comp.name)
                assert isinstance(instance, cls) and instance.config == config()
