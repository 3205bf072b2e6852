"""On every bundled server, synthesis finds validated chains that together use at least 90% of
the server's tools, the ground truth of every synthesized task scores the maximum reward, and
the corpus is one to train on: every example has an assistant turn, every clarify/abstain
example ends with a written reply, no call guesses an entity, values vary, mistakes are marked,
and a hidden tool is always one the first request needs."""

import json
import random

import attrs
import pytest

from prove_core.config import load_experiment
from prove_core.model import Example, from_json, read_jsonl
from prove_core.plugin.manager import BUNDLED, Plugins
from prove_core.reward.core import Rollout, build_reward
from prove_core.synth.perturbation import PerturbationContext, tool_name
from prove_core.synth.pipeline import synthesize
from prove_plugins.synth.perturbations import HiddenTool

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
        # the reference: its calls, and its written reply — all of it on a clarify/abstain task
        # (honest_reply reads it), the last message on a call task whose calls all went through
        # (final_reply checks it; a conversation that recovered from a failure keeps the failed
        # call, which the ground truth leaves out)
        rollout = attrs.evolve(Rollout.ground_truth(example.task, tools=example.tools), content=reference_reply(example))
        result = reward.score(rollout)
        assert abs(result.total - result.best) < 1e-9, (example.id, result.to_json())
        scored += 1
    assert scored >= 150
    quality = report["quality"]
    assert quality["no_assistant_turn"] == 0.0 and quality["written_replies"] == 1.0
    assert quality["unnamed_entity_calls"] <= 0.01, quality["unnamed_entity_examples"]
    assert quality["mistakes"]["marked"] == quality["mistakes"]["schema_rejected_calls"]
    assert quality["slots"]["share_varied"] >= 0.5, quality["slots"]


def _failed(content: str | None) -> bool:
    try:
        data = json.loads(content or "null")
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("code"), str) and "message" in data


def reference_reply(example: Example) -> str:
    prose = [m.content for m in example.messages if m.role == "assistant" and m.content]
    if example.task.expected != "call":
        return "\n".join(prose)
    results = [m for m in example.messages if m.role == "tool"]
    clean = len(results) == len(example.task.calls) and not any(_failed(m.content) for m in results)
    last = example.messages[-1]
    return last.content if clean and last.role == "assistant" and last.content else ""


@pytest.mark.parametrize("server", SERVERS)
def test_a_hidden_tool_is_one_the_first_request_calls(server, plugins, tmp_path):
    exp = load_experiment({"name": "h", "output_dir": str(tmp_path), "servers": [{"name": server}],
                           "synth": {"examples": 40, "plots": False, "exports": [], "perturb": False,
                                     "cache_dir": str(tmp_path / "c")}})
    synthesize(exp, plugins, echo=lambda _: None, progress=False)
    hidden, context = HiddenTool(HiddenTool.Config()), PerturbationContext(plugins.registry)
    checked = found = 0
    for record in read_jsonl(tmp_path / "h" / "synth" / "corpus.jsonl"):
        example = from_json(record, Example)
        if example.task.expected != "call":
            continue
        out = hidden.apply(example, random.Random(0), context)
        if out is None:  # another offered tool finds what the hidden one would have: no clarification
            found += 1
            continue
        (change,) = out.task.meta["perturbations"]
        first_request = {c.id: c.tool for c in example.task.calls if c.id in example.task.meta["turns"][0]}
        assert change["tool"] in first_request.values()  # the first request calls it
        assert change["tool"] not in {tool_name(t) for t in out.tools}
        assert out.messages[-1].role == "assistant" and out.messages[-1].content  # a written reply
        users = [m for m in out.messages if m.role == "user"]
        assert len(users) == 1 and users[0].content == next(m.content for m in example.messages if m.role == "user")
        checked += 1
    assert checked + found >= 20 and checked >= 5, (checked, found)
