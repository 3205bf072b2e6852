"""τ²-bench: its domains as PROVE servers and its own evaluator scoring conversations played on
them. Golden action replays score 1.0, truncated ones less; the user simulator is an endpoint."""

import json
from pathlib import Path

import attrs
import pytest

from prove_core.config import ModelConfig
from prove_core.env.runtime import ServerRuntime
from prove_core.eval.core import EvalContext, Reference, build_client
from prove_plugins.train.models.clients import OracleConfig, OraclePolicy
from tests.eval.conftest import message

# tasks whose golden actions write (so leaving one out must change the end state)
WRITES = {"mock": ["create_task_1", "create_task_1_with_env_assertions", "update_task_1",
                   "update_task_with_message_history", "update_task_with_initialization_data",
                   "update_task_with_initialization_actions", "impossible_task_1"],
          "retail": ["0"], "airline": ["2"]}


def _context(plugins):
    return EvalContext(registry=plugins.registry, experiment=None, out_dir=Path("."), model="m")


def _run(plugins, policy, domain, ids, **options):
    from prove_plugins.eval.tau2 import Tau2, Tau2Config, UserConfig

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

    from prove_plugins.eval.tau2 import GREETING

    assert messages[1] == {"role": "assistant", "content": GREETING} == {"role": "assistant",
                                                                          "content": DEFAULT_FIRST_AGENT_MESSAGE.content}
    assert messages[-1]["content"] == "###STOP###"


def test_max_steps_ends_a_conversation_and_scores_zero(tau2, plugins):
    spammer = build_client(ModelConfig(name="s", client="spammer", options={"turns": 50}), plugins.registry)
    outcome = _run(plugins, spammer, "mock", ["create_task_1"], max_steps=3)["mock_create_task_1"]
    assert outcome.details["termination"] == "max_steps" and outcome.score == 0.0


def test_tool_results_are_what_tau2s_environment_sends(tau2):
    from tau2.data_model.message import ToolCall

    from prove_plugins.eval.tau2 import render

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
    from prove_plugins.eval.tau2 import Tau2, Tau2Config, UserConfig

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
    from prove_plugins.eval.tau2 import Tau2Config, UserConfig

    with pytest.raises(ValueError, match="domains"):
        Tau2Config(domains=["telecom"])
    with pytest.raises(ValueError):
        UserConfig(client="human")
    assert attrs.fields_dict(Tau2Config)["evaluation"].default == "all"


def test_defaults_are_tau2s():
    import tau2.config as tc

    from prove_plugins.eval import tau2 as eval_tau2

    config = eval_tau2.Tau2Config()
    assert (config.max_steps, config.max_errors, config.seed) == (tc.DEFAULT_MAX_STEPS, tc.DEFAULT_MAX_ERRORS, tc.DEFAULT_SEED)
    assert (config.user.temperature, config.user.retries) == (tc.DEFAULT_LLM_TEMPERATURE_USER, tc.DEFAULT_MAX_RETRIES)
    assert config.user.max_tokens is None  # τ² sends no max_tokens
    import random

    random.seed(tc.DEFAULT_SEED)  # τ²'s run_tasks
    assert eval_tau2.trial_seed(tc.DEFAULT_SEED) == random.randint(0, 1000000)


def test_tool_messages_are_tau2s_text_for_every_kind_of_call(tau2):
    """Exactly the content and error flag of τ²'s ``Environment.get_response``: results (text
    ones included), τ²'s errors, bad arguments, odd keywords and unknown tools."""
    from tau2.data_model.message import ToolCall

    calls = {"retail": [("list_all_product_types", {}), ("calculate", {"expression": "2 * 3.5"}),
                        ("find_user_id_by_email", {"email": "nobody@example.com"}), ("get_order_details", {}),
                        ("get_order_details", {"order_id": "#W0000000", "requestor": "user"}),
                        ("lookup_everything", {}), ("lookup_everything", {"tool_name": "x"})],
             "mock": [("get_users", {}), ("create_task", {"user_id": "user_1", "title": "T"}), ("transfer_to_human_agents",
                                                                                                   {"summary": "s"}),
                      ("create_task", {"user_id": "user_1", "title": "T\ud800"}),  # a lone surrogate reaches τ²
                      ("create_task", {"user_id": float("nan"), "title": "T"})],
             # a whole float for an integer stays a float, as τ² passes it; non-finite numbers reach τ²
             "airline": [("send_certificate", {"user_id": "noah_muller_9847", "amount": 50.0}),
                         ("send_certificate", {"user_id": "noah_muller_9847", "amount": float("inf")}),
                         ("get_user_details", {"user_id": float("nan")})]}
    for domain, pairs in calls.items():
        env = tau2.environment(domain)
        runtime = ServerRuntime(getattr(tau2, f"tau2_{domain}"), seed=0)
        session = runtime.new_session()
        for name, args in pairs:
            theirs = env.get_response(ToolCall(id="1", name=name, arguments=args))
            result = runtime.call(session, name, args)
            ours = tau2.tool_message(result, runtime.state(session).backend(), name, args)
            assert ours == (theirs.content, theirs.error), (name, args)
    unknown = tau2.tool_message(runtime.call(session, "nope", {}), runtime.state(session).backend(), "nope", {})
    assert unknown == ("Error: Tool 'nope' not found.", True)


def _openai(url, **options):
    from prove_plugins.train.models.clients import OpenAIConfig, OpenAIPolicy

    return OpenAIPolicy(OpenAIConfig(base_url=url, model="agent", **options))


def test_a_failed_model_request_fails_the_task_and_the_run_goes_on(tau2, plugins, endpoint):
    url, handler = endpoint
    handler.replies = [(400, {"error": "context length exceeded"}),  # task 1: the agent's request fails for good
                       (200, message(content="Here is what I found."))]  # task 2 answers
    outcomes = list(_run(plugins, _openai(url), "mock", ["create_task_1", "update_task_1"]).values())
    assert [o.task_id for o in outcomes] == ["mock_create_task_1", "mock_update_task_1"]
    failed, played = outcomes
    assert not failed.success and failed.score == 0.0 and failed.details["termination"] == "agent_error"
    assert "context length exceeded" in failed.details["error"] and failed.details["status"] == 400
    assert played.details["termination"] == "user_stop" and "error" not in played.details


def test_an_empty_answer_is_asked_again_then_fails_and_a_broken_call_fails_at_once(tau2, plugins, endpoint):
    import tau2.config as tc

    url, handler = endpoint
    handler.replies = [(200, message(content=""))] * (tc.DEFAULT_MAX_RETRIES + 1)
    handler.replies += [(200, message(tool_calls=[{"id": "c", "type": "function",
                                                   "function": {"name": "get_users", "arguments": "{oops"}}]))]
    empty, broken = _run(plugins, _openai(url), "mock", ["create_task_1", "update_task_1"]).values()
    assert empty.details["termination"] == broken.details["termination"] == "agent_error"
    assert "empty" in empty.details["error"] and "decode" in broken.details["error"]
    assert len(handler.requests) == tc.DEFAULT_MAX_RETRIES + 2 and not handler.replies


def test_requests_follow_tau2s_defaults_unless_the_options_set_them(tau2, plugins, endpoint):
    import tau2.config as tc

    from prove_plugins.eval.tau2 import Tau2, Tau2Config, UserConfig, trial_seed

    url, handler = endpoint
    config = Tau2Config(domains=["mock"], task_ids=["create_task_1"], user=UserConfig(base_url=url, model="sim"))
    for options, temperature in (({}, tc.DEFAULT_LLM_TEMPERATURE_AGENT), ({"temperature": 0.7}, 0.7)):
        handler.requests.clear()
        handler.replies = [(200, message(content="Create a task please.")), (200, message(content="Done.")),
                           (200, message(content="###STOP###"))]
        list(Tau2(config).evaluate(_openai(url, **options), _context(plugins)))
        user, agent, _ = (r["body"] for r in handler.requests)
        assert agent["model"] == "agent" and agent["temperature"] == temperature and "max_tokens" not in agent
        assert agent["seed"] == trial_seed(tc.DEFAULT_SEED)  # τ²'s Orchestrator seeds the agent with the trial seed
        assert user["model"] == "sim" and user["temperature"] == tc.DEFAULT_LLM_TEMPERATURE_USER
        assert user["seed"] == trial_seed(tc.DEFAULT_SEED) and "max_tokens" not in user


def test_the_agent_saying_stop_does_not_end_the_conversation(tau2, plugins):
    """τ²'s LLMAgent never stops: ###STOP### from the agent is prose for the user."""
    from prove_plugins.train.models.clients import NoCallConfig, NoCallPolicy

    outcome = _run(plugins, NoCallPolicy(NoCallConfig(reply="###STOP###")), "mock", ["create_task_1"])["mock_create_task_1"]
    assert outcome.details["termination"] == "user_stop"
    roles = [m["role"] for m in outcome.details["messages"]]
    assert roles == ["system", "assistant", "user", "assistant", "user"]  # greeting, scenario, stop text, user stop
    assert outcome.details["steps"] == 3  # user, agent, user: the greeting is not a step


def test_steps_count_every_message_as_tau2_does(tau2, plugins):
    """Golden run of create_task_1: user (1), call (2), tool answer (3), closing (4), user stop (5)."""
    outcome = _run(plugins, OraclePolicy(OracleConfig()), "mock", ["create_task_1"])["mock_create_task_1"]
    assert outcome.details["steps"] == 5 and outcome.score == 1.0
    tight = _run(plugins, OraclePolicy(OracleConfig()), "mock", ["create_task_1"], max_steps=5)["mock_create_task_1"]
    assert tight.details["termination"] == "max_steps" and tight.score == 0.0  # τ²: max_steps overrides the user's stop


def test_a_failing_user_simulator_fails_the_task_and_the_run_goes_on(tau2, plugins, endpoint):
    from prove_plugins.eval.tau2 import Tau2, Tau2Config, UserConfig

    url, handler = endpoint
    handler.replies = [(400, {"error": "bad request"}),  # task 1: the user simulator's first request
                       (200, message(content="Create a task.")), (200, message(content="###STOP###"))]
    config = Tau2Config(domains=["mock"], task_ids=["create_task_1", "update_task_1"],
                        user=UserConfig(base_url=url, model="sim", retries=0))
    failed, played = Tau2(config).evaluate(OraclePolicy(OracleConfig()), _context(plugins))
    assert failed.details["termination"] == "agent_error" and failed.details["error"].startswith("user simulator")
    assert failed.details["status"] == 400 and failed.score == 0.0
    assert played.details["termination"] == "user_stop" and played.score == 1.0


def _closed_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_user_simulator_stops_the_run_before_any_task(tau2, plugins, tmp_path):
    """Every task would be a failed run scoring 0: the run stops at the start, saying what to set."""
    from prove_core.errors import ProveError
    from prove_plugins.eval.tau2 import Tau2, Tau2Config, UserConfig

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    config = Tau2Config(domains=["mock"], task_ids=["create_task_1"], user=UserConfig(base_url=url, model="sim"))
    with pytest.raises(ProveError, match="nothing answers there") as info:
        next(Tau2(config).evaluate(OraclePolicy(OracleConfig()), _context(plugins)))
    assert url in str(info.value) and 'client = "scripted"' in str(info.value)


def test_prove_eval_tau2_without_a_config_says_what_to_configure_and_records_nothing(tau2, tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "prove_core.cli", "eval", "--benchmark", "tau2", "--model", "oracle",
                           "--limit", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if "nothing answers there" not in proc.stderr:  # something serves 127.0.0.1:8000 on this machine
        pytest.skip(f"an endpoint answers at τ²'s default user URL: {proc.stderr[-200:]}")
    assert proc.returncode == 1 and proc.stderr.startswith("error: τ²'s user simulator")
    assert 'client = "scripted"' in proc.stderr
    results = list((tmp_path / "runs" / "eval" / "results").glob("*.jsonl"))  # no run name given: runs/eval
    assert results and all(not p.read_text() for p in results)  # no failed runs recorded as done
    assert not (tmp_path / "runs" / "quickstart").exists()


def test_results_made_with_the_scripted_user_are_not_resumed_with_the_llm_user(tau2, plugins, tmp_path):
    """The issue's stale results: the user simulator switched, "6 from an earlier run" kept."""
    from prove_core.errors import ConfigError
    from prove_core.eval.core import run_evaluation
    from tests.eval.conftest import eval_experiment

    def experiment(user, ids=("create_task_1",)):
        return eval_experiment(tmp_path, models=[{"name": "oracle", "client": "oracle"}], plots=False,
                               benchmarks=[{"name": "tau2", "options": {"domains": ["mock"], "task_ids": list(ids),
                                                                         "user": user}}])

    report = run_evaluation(experiment({"client": "scripted"}), plugins, echo=lambda _: None)
    assert report["benchmarks"]["tau2"]["results"]["all"]["oracle"]["successes"] == 1
    lines = []  # another task list only chooses tasks: the run resumes and adds one
    more = run_evaluation(experiment({"client": "scripted"}, ("create_task_1", "update_task_1")), plugins, echo=lines.append)
    assert more["benchmarks"]["tau2"]["results"]["all"]["oracle"]["n"] == 2 and any("1 from an earlier run" in x for x in lines)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    changed = r"other options \(benchmark\.options\.user\.base_url, benchmark\.options\.user\.client"
    with pytest.raises(ConfigError, match=changed):
        run_evaluation(experiment({"client": "llm", "base_url": url}), plugins, echo=lambda _: None)
