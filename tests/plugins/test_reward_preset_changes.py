"""A preset changed from TOML: `add`, `weights` and `remove` under [reward], as docs/reward.md shows."""

import re
import types
from pathlib import Path

import pytest

from prove_core.config import RewardConfig, load_experiment, parse_toml, structure
from prove_core.errors import ConfigError
from prove_core.plugin.manager import Plugins
from prove_core.reward.core import PRESETS, build_reward
from tests.core.test_docs_examples import DOC as PLUGINS_DOC
from tests.core.test_docs_examples import python_blocks

DOCS = Path(__file__).resolve().parents[2] / "docs"


def plugins_with_the_documented_reward():
    """The bundled plugins plus docs/plugins.md's `no_repeated_writes` component."""
    block = next(b for b in python_blocks(PLUGINS_DOC.read_text()) if "class NoRepeatedWrites" in b.code)
    namespace = {"__name__": "docs_reward_block"}
    exec(compile(block.code, f"{PLUGINS_DOC}:{block.line}", "exec"), namespace)  # noqa: S102 - our own docs
    plugins = Plugins().load(autoload=False)
    module = types.ModuleType("docs_reward_block")
    module.prove_register_rewards = namespace["prove_register_rewards"]
    plugins.add(module, name="docs_reward_block", distribution="docs")
    return plugins


def test_the_documented_preset_change_builds_the_preset_less_removed_reweighted_plus_added():
    text = (DOCS / "reward.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "[[reward.add]]" in b)
    experiment = load_experiment(parse_toml('[[servers]]\nname = "banking"\n' + block))
    reward = build_reward(experiment.reward, plugins_with_the_documented_reward().registry)
    names = [c.name for c in reward.components]
    guarded = [n for n, _, _ in PRESETS["guarded"]]
    assert names == [n for n in guarded if n != "precision"] + ["no_repeated_writes"]
    weights = {c.name: c.weight for c in reward.components}
    assert weights["efficiency"] == 0.3 and weights["final_state"] == 0.8 and weights["no_repeated_writes"] == 0.2
    added = next(c for c in reward.components if c.name == "no_repeated_writes")
    assert added.component.config.penalty == 0.25
    default = build_reward(None, plugins_with_the_documented_reward().registry)
    assert {c.name: c.weight for c in default.components}["coverage"] == weights["coverage"]  # the rest as in the preset


def test_without_a_preset_the_changes_apply_to_the_default_and_paper_can_be_changed_too():
    registry = Plugins().load(autoload=False).registry
    paper = build_reward(structure({"preset": "paper", "weights": {"efficiency": 0.0}, "remove": ["tool_name"],
                                    "add": [{"name": "final_state", "weight": 0.5}]}, RewardConfig), registry)
    assert [c.name for c in paper.components] == [n for n, _, _ in PRESETS["paper"] if n != "tool_name"] + ["final_state"]
    assert {c.name: c.weight for c in paper.components}["efficiency"] == 0.0
    default = build_reward(structure({"remove": ["honest_reply"]}, RewardConfig), registry)
    assert [c.name for c in default.components] == [n for n, _, _ in PRESETS["guarded"] if n != "honest_reply"]


def test_changes_name_their_paths_with_a_did_you_mean_and_never_mix_with_components():
    registry = Plugins().load(autoload=False).registry
    with pytest.raises(ConfigError) as err:
        build_reward(structure({"remove": ["precison"], "weights": {"efficency": 0.3},
                                "add": [{"name": "no_dob_echoo"}, {"name": "coverage"}]}, RewardConfig), registry)
    text = str(err.value)
    assert "$.reward.remove[0]: the 'guarded' preset has no component 'precison'; did you mean 'precision'?" in text
    assert "$.reward.weights.efficency: the 'guarded' preset has no component 'efficency'; did you mean 'efficiency'?" in text
    assert "$.reward.add[0].name: no reward named 'no_dob_echoo'" in text
    assert "component 'coverage' is listed more than once (it is in the preset already" in text
    with pytest.raises(ConfigError, match="'add' changes a preset"):
        structure({"components": [{"name": "validity"}], "add": [{"name": "coverage"}]}, RewardConfig, path="$.reward")
    with pytest.raises(ConfigError, match="removes every component"):
        build_reward(structure({"preset": "paper", "remove": [n for n, _, _ in PRESETS["paper"]]}, RewardConfig), registry)
