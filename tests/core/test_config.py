import pytest

from prove_core.config import load_experiment, resolve
from prove_core.errors import ConfigError
from prove_core.plugin.manager import Plugins
from tests.support.toy import server as toy


@pytest.fixture()
def registry():
    plugins = Plugins().load(bundled=(), autoload=False)
    import types

    module = types.ModuleType("toy_plugin")
    module.prove_register_servers = lambda register: register(toy)
    plugins.add(module, name="toy_plugin")
    return plugins.registry


def error_of(source):
    with pytest.raises(ConfigError) as err:
        load_experiment(source)
    return str(err.value)


def test_embedded_default_config_loads():
    exp = load_experiment(None)
    assert exp.servers and exp.stages == ["synth", "train"] and exp.train is not None and exp.train.sft.steps > 0


def test_embedded_episode_config_loads():
    from importlib import resources

    exp = load_experiment(str(resources.files("prove_core.defaults").joinpath("episode.toml")))
    assert exp.servers and exp.stages == ["episode"] and exp.episode is not None


def test_wrong_type_is_reported_with_its_path():
    msg = error_of({"servers": [{"name": "a"}, {"name": "b", "seed": "7"}]})
    assert "$.servers[1].seed: expected int, got str" in msg


def test_bool_is_not_an_int():
    assert "$.servers[0].seed: expected int, got bool" in error_of({"servers": [{"name": "a", "seed": True}]})


def test_unknown_keys_are_rejected_at_every_level():
    assert "$: extra fields found (bogus)" in error_of({"bogus": 1, "servers": [{"name": "a"}]})
    assert "$.servers[0]: extra fields found (sede)" in error_of({"servers": [{"name": "a", "sede": 1}]})
    msg = error_of({"servers": [{"name": "a"}], "episode": {"steps": [{"tool": "t", "argz": {}}]}})
    assert "$.episode.steps[0]: extra fields found (argz)" in msg


def test_all_problems_are_listed_at_once():
    msg = error_of({"servers": [{"name": 1, "seed": "x"}]})
    assert "$.servers[0].name" in msg and "$.servers[0].seed" in msg


def test_toml_file_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("servers = [\n")
    assert "not valid TOML" in error_of(bad)
    assert "does not exist" in error_of(tmp_path / "missing.toml")


def test_phase_two_structures_server_options(registry):
    exp = load_experiment({"servers": [{"name": "wallet", "seed": 3, "options": {"wallets": 9}}]})
    (resolved,) = resolve(exp, registry)
    assert resolved.options.wallets == 9 and resolved.seed == 3


def test_phase_two_errors_have_paths(registry):
    exp = load_experiment({"servers": [{"name": "wallet", "options": {"walets": 9}}, {"name": "nope"}]})
    with pytest.raises(ConfigError) as err:
        resolve(exp, registry)
    msg = str(err.value)
    assert "$.servers[0].options: extra fields found (walets)" in msg
    assert "$.servers[1].name: no server named 'nope'" in msg


def test_phase_two_runs_option_validators(registry):
    exp = load_experiment({"servers": [{"name": "wallet", "options": {"wallets": 0}}]})
    with pytest.raises(ConfigError, match=r"\$.servers\[0\].options.*wallets"):
        resolve(exp, registry)


def test_duplicate_servers_rejected(registry):
    exp = load_experiment({"servers": [{"name": "wallet"}, {"name": "wallet"}]})
    with pytest.raises(ConfigError, match="more than once"):
        resolve(exp, registry)


def test_the_examples_quickstart_is_the_embedded_one():
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "quickstart.toml"
    assert load_experiment(str(example)) == load_experiment(None)


def _documented(name: str, docs: str) -> bool:
    """A key is documented when the docs show it in code (`name`, `section.name`, `name.key`), assign
    it in a TOML example (`name = ...`) or open its table (`[section.name]`, `[[section.name]]`)."""
    import re

    return bool(re.search(rf"[`.]{re.escape(name)}`|`{re.escape(name)}\.|(^|[\s{{,`]){re.escape(name)} *=|\[{re.escape(name)}\]|"
                          rf"\.{re.escape(name)}\]", docs, re.M))


def test_every_config_key_is_documented():
    import typing
    from pathlib import Path

    import attrs

    from prove_core import config

    root = Path(__file__).resolve().parents[2]
    docs = "\n".join(p.read_text() for p in sorted((root / "docs").glob("*.md"))) + (root / "README.md").read_text()
    seen, missing = set(), []

    def walk(cls, path):
        if cls in seen:
            return
        seen.add(cls)
        hints = typing.get_type_hints(cls)
        for field in attrs.fields(cls):
            if not _documented(field.name, docs):
                missing.append(f"{path}.{field.name}")
            for arg in (hints[field.name], *typing.get_args(hints[field.name])):
                for kind in (arg, *typing.get_args(arg)):
                    if attrs.has(kind):
                        walk(kind, f"{path}.{field.name}")

    walk(config.Experiment, "$")
    assert len(seen) > 10  # every section was reached
    assert not missing, f"config keys the docs never mention: {missing}"
    assert not _documented("stepz", docs)  # the check itself can fail
