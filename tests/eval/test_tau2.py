"""τ²-bench: its domains as PROVE servers and its own evaluator scoring conversations played on
them. Golden action replays score 1.0, truncated ones less; the user simulator is an endpoint."""

import json
from pathlib import Path

import attrs
import pytest

from prove_core.config import ModelConfig
from prove_core.env.runtime import ServerRuntime
from prove_core.eval.core import EvalContext, Reference, build_client
from prove_plugins.models.clients import OracleConfig, OraclePolicy
from tests.eval.conftest import message

# tasks whose golden actions write (so leaving one out must change the end state)
WRITES = {"mock": ["create_task_1", "create_task_1_with_env_assertions", "update_task_1",
                   "update_task_with_message_history", "update_task_with_initialization_data",
                   "update_task_with_initialization_actions", "impossible_task_1"],
          "retail": ["0"], "airline": ["2"]}


def _context(plugins):
    return EvalContext(registry=plugins.registry, experiment=None, out_dir=Path("."), model="m")


def _run(plugins, policy, domain, ids, **options):
    from prove_plugins.eval_tau2 import Tau2, Tau2Config, UserConfig

    config = Tau2Config(domains=[domain], task_ids=ids, user=UserConfig(client="scripted"), **options)
    return {o.task_id: o for o in Tau2(config).evaluate(policy, _context(plugins))}


class TruncatedOracle(OraclePolicy):
    """The golden replay without its last action."""

    def begin(self, reference):
        *turns, last = reference.turns
        calls = [i for i, step in enumerate(last) if step.attempts]
        super().begin(Reference(turns=[*turns, [s for i, s in enumerate(last) if i != calls[-1]]]))


@pytest.mark.parametrize("domain", sorted(WRITES))
def test_golden_replay_scores_one_and_a_truncated_replay_less(tau2, plugins, domain):
    ids = WRITES[domain]
    golden = _run(plugins, OraclePolicy(OracleConfig()), domain, ids)
    assert len(golden) == len(ids)
    assert {k: o.score for k, o in golden.items()} == {f"{domain}_{i}": 1.0 for i in ids}
    assert all(o.success and o.details["termination"] == "user_stop" for o in golden.values())
    truncated = _run(plugins, TruncatedOracle(OracleConfig()), domain, ids)
    assert all(o.score < 1.0 and not o.success for o in truncated.values()), {k: o.score for k, o in truncated.items()}
    nothing = _run(plugins, build_client(ModelConfig(name="n", client="no_call"), plugins.registry), domain, ids)
    assert all(o.score == 0.0 for o in nothing.values())


def test_the_conversation_is_scored_by_tau2s_own_evaluator(tau2, plugins):
    outcome = _run(plugins, OraclePolicy(OracleConfig()), "mock", ["create_task_1"])["mock_create_task_1"]
    info = outcome.details["reward_info"]
    assert info["db_check"]["db_match"] is True and info["reward_breakdown"] == {"DB": 1.0, "COMMUNICATE": 1.0}
    messages = outcome.details["messages"]
    assert messages[0]["role"] == "system" and "<policy>" in messages[0]["content"]
    from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE

    from prove_plugins.eval_tau2 import GREETING

    assert messages[1] == {"role": "assistant", "content": GREETING} == {"role": "assistant",
                                                                          "content": DEFAULT_FIRST_AGENT_MESSAGE.content}
    assert messages[-1]["content"] == "###STOP###"


def test_max_steps_ends_a_conversation_and_scores_zero(tau2, plugins):
    spammer = build_client(ModelConfig(name="s", client="spammer", options={"turns": 50}), plugins.registry)
    outcome = _run(plugins, spammer, "mock", ["create_task_1"], max_steps=3)["mock_create_task_1"]
    assert outcome.details["termination"] == "max_steps" and outcome.score == 0.0


def test_tool_results_are_what_tau2s_environment_sends(tau2):
    from tau2.data_model.message import ToolCall

    from prove_plugins.eval_tau2 import render

    env = tau2.environment("mock")
    runtime = ServerRuntime(tau2.tau2_mock, seed=0)
    session = runtime.new_session()
    for name, args in [("get_users", {}), ("create_task", {"user_id": "user_1", "title": "T"}),
                       ("create_task", {"user_id": "nobody", "title": "T"}), ("create_task", {"title": "T"})]:
        theirs = env.get_response(ToolCall(id="1", name=name, arguments=args))
        ours, error = render(runtime.call(session, name, args))
        assert error == theirs.error
        assert (ours == theirs.content) if error else json.loads(ours) == json.loads(theirs.content)
    assert runtime.state(session).backend().get_db_hash() == env.get_db_hash()


def test_domains_are_prove_servers_with_sessions_and_tau2s_hash(tau2):
    from prove_core.testing import audit

    server = tau2.tau2_mock
    runtime = ServerRuntime(server, seed=0)
    a, b = runtime.new_session(), runtime.new_session()
    before = runtime.state_hash(b)
    assert not runtime.call(a, "create_task", {"user_id": "user_1", "title": "T"}).is_error
    assert runtime.state_hash(b) == before != runtime.state_hash(a)
    assert runtime.call(a, "get_users", {}).data  # a read leaves the state alone
    report = audit(server)
    passed = {c.name for c in report.checks if c.ok}
    assert {"schemas", "reachable", "reset", "isolation", "annotations", "path_equivalence"} <= passed
    spec = server.tools["create_task"].spec
    assert spec.annotations.read_only is False and server.tools["get_users"].spec.annotations.read_only is True


def test_llm_user_simulator_is_an_openai_compatible_endpoint(tau2, plugins, endpoint):
    from prove_plugins.eval_tau2 import Tau2, Tau2Config, UserConfig

    url, handler = endpoint
    handler.replies = [(200, message(content="Please create a task 'Important Meeting' for user_1.")),
                       (200, message(content="Thanks! ###STOP###"))]
    config = Tau2Config(domains=["mock"], task_ids=["create_task_1"], user=UserConfig(base_url=url, model="sim"))
    outcome = next(iter(Tau2(config).evaluate(OraclePolicy(OracleConfig()), _context(plugins))))
    assert outcome.score == 1.0 and outcome.details["termination"] == "user_stop"
    first, second = (r["body"] for r in handler.requests)
    assert first["model"] == "sim" and first["messages"][0]["role"] == "system"
    assert "<scenario>" in first["messages"][0]["content"] and "Important Meeting" in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "user", "content": "Hi! How can I help you today?"}  # roles flipped
    assert second["messages"][2]["role"] == "assistant" and all(m.get("content") for m in second["messages"])
    assert not any("tool" in m["role"] for m in second["messages"])  # the user never sees tool traffic


def test_options_are_checked():
    from prove_plugins.eval_tau2 import Tau2Config, UserConfig

    with pytest.raises(ValueError, match="domains"):
        Tau2Config(domains=["telecom"])
    with pytest.raises(ValueError):
        UserConfig(client="human")
    assert attrs.fields_dict(Tau2Config)["evaluation"].default == "all"
