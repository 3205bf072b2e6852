"""Mounted servers: value flows across servers in the graph, and cross-server conversations."""

import pytest

from prove_core.config import load_experiment
from prove_core.env.runtime import Environment, ServerRuntime
from prove_core.errors import ConfigError
from prove_core.model import Example, from_json, read_jsonl
from prove_core.reward.core import Rollout, build_reward
from prove_core.synth.pipeline import synthesize
from prove_core.synth.validation import replay
from prove_plugins.synth.graph import SchemaLabeller


def test_graph_of_mounted_servers_has_verified_value_flows(plugins):
    env = Environment([ServerRuntime(plugins.registry.load("servers", n)) for n in ("crm", "email")])
    graph = SchemaLabeller().label(env)
    flows = [e for e in graph.edges if e.flow]
    assert flows and all(e.verified is True for e in flows)
    assert all(e.source.split("_", 1)[0] != e.target.split("_", 1)[0] for e in flows)  # they cross servers
    assert any(e.target == "email_send_message" and e.param == "to" and e.flow == "email" for e in flows)
    assert graph.edge("crm_get_account", "crm_create_contact") is not None  # same-server edges stay


def test_mounted_synthesis_makes_cross_server_conversations(tmp_path, plugins):
    exp = load_experiment({"name": "m", "output_dir": str(tmp_path), "servers": [{"name": "crm"}, {"name": "email"}],
                           "synth": {"examples": 40, "plots": False, "exports": [], "mounts": [["crm", "email"]],
                                     "cache_dir": str(tmp_path / "c")}})
    report = synthesize(exp, plugins, echo=lambda _: None, progress=False)
    assert report["by_server"].get("crm+email", 0) > 0
    examples = [from_json(r, Example) for r in read_jsonl(tmp_path / "m" / "synth" / "corpus.jsonl")]
    crossing = [e for e in examples if e.task.servers == ["crm", "email"] and e.task.expected == "call"
                and {c.tool.split("_", 1)[0] for c in e.task.calls} == {"crm", "email"}]
    assert crossing
    reward = build_reward(None, plugins.registry)
    flowed = 0
    for e in crossing:
        env = Environment([ServerRuntime(plugins.registry.load("servers", s), seed=e.task.seed) for s in e.task.servers])
        assert replay(e, env, max_error_rate=1.0).ok
        result = reward.score(Rollout.ground_truth(e.task, tools=e.tools))
        assert abs(result.total - result.best) < 1e-9
        outputs = ""
        for m in e.messages:
            if m.role == "tool" and m.name.startswith("crm_"):
                outputs += m.content
            for c in m.tool_calls:
                if c.name.startswith("email_"):
                    values = [x for v in c.arguments.values() for x in (v if isinstance(v, list) else [v])]
                    flowed += any(isinstance(x, str) and "@" in x and x in outputs for x in values)
    assert flowed > 0  # an address found in the CRM was e-mailed


def test_bad_mounts_are_config_errors(tmp_path, plugins):
    exp = load_experiment({"name": "m", "output_dir": str(tmp_path), "servers": [{"name": "crm"}],
                           "synth": {"examples": 2, "mounts": [["crm", "email"]], "cache_dir": str(tmp_path / "c")}})
    with pytest.raises(ConfigError, match=r"\$\.synth\.mounts\[0\]"):
        synthesize(exp, plugins, echo=lambda _: None, progress=False)
