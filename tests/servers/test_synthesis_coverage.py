"""Issues 7/8: on every bundled server, synthesis finds validated chains that together use at
least 90% of the server's tools, and the ground truth of every synthesized task scores the
maximum reward."""

import pytest

from prove_core.config import load_experiment
from prove_core.plugins import BUNDLED, Plugins
from prove_core.model import Example, from_json, read_jsonl
from prove_core.reward import Rollout, build_reward
from prove_core.synthesis import synthesize

SERVERS = [m.removeprefix("prove_servers.") for m in BUNDLED if m.startswith("prove_servers.")]


@pytest.fixture(scope="module")
def plugins():
    return Plugins().load(autoload=False)


@pytest.mark.parametrize("server", SERVERS)
def test_synthesis_covers_at_least_90_percent_of_the_tools(server, plugins, tmp_path):
    exp = load_experiment({"name": "cov", "output_dir": str(tmp_path), "servers": [{"name": server}],
                           "synth": {"examples": 300, "plots": False, "exports": [], "cache_dir": str(tmp_path / "c")}})
    report = synthesize(exp, plugins, echo=lambda _: None, progress=False)
    coverage = report["tool_coverage"][server]
    assert coverage["share"] >= 0.9, f"{server}: unused {coverage['unused']}"
    assert report["by_behaviour"]["call"] >= 150
    reward = build_reward(None, plugins.registry)
    scored = 0
    for record in read_jsonl(tmp_path / "cov" / "synth" / "corpus.jsonl"):
        example = from_json(record, Example)
        result = reward.score(Rollout.ground_truth(example.task, tools=example.tools))
        assert abs(result.total - result.best) < 1e-9, (example.id, result.to_json())
        scored += 1
    assert scored >= 150
