"""The core reward contract: rollouts, the combiner, registry lookup, config, the JSONL format."""

import json
import types

import attrs
import pytest

from prove_core import hookimpl
from prove_core.config import RewardComponentConfig, RewardConfig, load_experiment
from prove_core.errors import ConfigError, ProveError
from prove_core.model import GroundTruthCall, Task, ToolCall, to_json
from prove_core.plugin.manager import Plugins
from prove_core.reward.core import Rollout, Score, align, build_reward, json_equal, rollout_from_record
from prove_core.reward.parsing import ParseFailure, load_parser
from tests.support.reward_tasks import banking_transfer_task


@pytest.fixture()
def plugins():
    return Plugins().load(autoload=False)


@attrs.frozen
class ShortConfig:
    max_calls: int = 2


class ShortAnswers:
    """A third-party component: 1 when the model made at most ``max_calls`` calls."""

    name = "short_answers"
    Config = ShortConfig
    default_weight = 0.25

    def __init__(self, config):
        self.config = config

    def range(self):
        return (0.0, 1.0)

    def score(self, rollout, context):
        n = rollout.n_attempts
        return Score(value=1.0 if n <= self.config.max_calls else 0.0, explanation=f"{n} calls")


def add_plugin(plugins, name, **hooks):
    module = types.ModuleType(name)
    for hook, fn in hooks.items():
        setattr(module, hook, hookimpl(fn))
    plugins.add(module, name=name)


def test_a_third_party_component_takes_part_without_core_changes(plugins):
    add_plugin(plugins, "tp_short", prove_register_rewards=lambda register: register(ShortAnswers))
    try:
        config = RewardConfig(components=[RewardComponentConfig(name="validity"),
                                          RewardComponentConfig(name="short_answers", options={"max_calls": 3})])
        reward = build_reward(config, plugins.registry)
        task = banking_transfer_task()
        result = reward.score(Rollout.from_calls(task, [(c.tool, c.arguments) for c in task.calls[:3]]))
        assert result.weights == {"validity": 0.5, "short_answers": 0.25}
        assert result.value("short_answers") == 1.0
        assert result.total == pytest.approx(0.5 * 1.0 + 0.25 * 1.0)
    finally:
        plugins.remove("tp_short")


def test_a_crashing_component_scores_zero_with_its_error_and_others_still_score(plugins):
    class Broken(ShortAnswers):
        name = "broken"

        def score(self, rollout, context):
            raise RuntimeError("bug")

    add_plugin(plugins, "tp_broken", prove_register_rewards=lambda register: register(Broken))
    try:
        reward = build_reward(RewardConfig(components=[RewardComponentConfig(name="broken"),
                                                       RewardComponentConfig(name="tool_name")]), plugins.registry)
        task = banking_transfer_task()
        result = reward.score(Rollout.ground_truth(task))
        assert result.scores["broken"].error == "RuntimeError: bug"
        assert result.total == pytest.approx(0.2)
    finally:
        plugins.remove("tp_broken")


def test_config_errors_name_their_paths(plugins):
    config = RewardConfig(components=[
        RewardComponentConfig(name="validity"),
        RewardComponentConfig(name="efficency"),
        RewardComponentConfig(name="efficiency", options={"alpha": "high"}),
        RewardComponentConfig(name="coverage", options={"bogus": 1}),
        RewardComponentConfig(name="validity"),
    ])
    with pytest.raises(ConfigError) as err:
        build_reward(config, plugins.registry)
    message = str(err.value)
    assert "$.reward.components[1].name: no reward named 'efficency'" in message
    assert "$.reward.components[2].options.alpha: expected float, got str" in message
    assert "$.reward.components[3].options" in message and "bogus" in message
    assert "'validity' is listed more than once" in message


def test_reward_section_of_an_experiment_is_checked_in_phase_one():
    with pytest.raises(ConfigError, match=r"\$\.reward\.components\[0\]\.weight: expected float, got str"):
        load_experiment({"servers": [{"name": "banking"}], "reward": {"components": [{"name": "validity", "weight": "x"}]}})
    with pytest.raises(ConfigError, match=r"\$\.reward"):
        load_experiment({"servers": [{"name": "banking"}], "reward": {"wieghts": {}}})
    exp = load_experiment({"servers": [{"name": "banking"}],
                           "reward": {"components": [{"name": "validity", "weight": 1}], "worst": 3}})
    assert exp.reward.components[0].weight == 1.0 and exp.reward.worst == 3


def test_weights_and_dropping_components_come_from_config(plugins):
    reward = build_reward(RewardConfig(components=[RewardComponentConfig(name="coverage", weight=2.0)]), plugins.registry)
    task = banking_transfer_task()
    assert reward.score(Rollout.ground_truth(task)).total == 2.0


def test_rollout_needs_a_turn_per_attempt():
    task = banking_transfer_task()
    with pytest.raises(ValueError):
        Rollout(id="x", task=task, attempts=[ToolCall(id="a", name="n")], turns=[0, 1])
    assert Rollout(id="x", task=task, attempts=[ToolCall(id="a", name="n")]).turns == (0,)


def test_json_equal_is_strict_about_types():
    assert json_equal(25, 25.0) and json_equal({"a": [1, "x"]}, {"a": [1.0, "x"]})
    assert not json_equal(True, 1) and not json_equal("1", 1) and not json_equal(None, 0)
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})


def test_alignment_uses_each_call_once():
    task = Task(servers=["banking"], calls=[GroundTruthCall(id="a", tool="t", arguments={"x": 1}),
                                            GroundTruthCall(id="b", tool="t", arguments={"x": 2}, depends_on=["a"])])
    calls = [ToolCall(id="1", name="t", arguments={"x": 2}), ToolCall(id="2", name="t", arguments={"x": 1})]
    alignment = align(task, calls)
    # Coverage counts steps in order, not values: a takes call 0 and b call 1, both covered (the
    # greedy matching gave a the value match, call 1, and left b the earlier call: out of order).
    assert alignment.position == {"a": 0, "b": 1} and alignment.ordered == {"a": True, "b": True}
    assert alignment.candidates == {"a": [0, 1], "b": [0, 1]}
    # one call: covering a (no dependencies) beats matching b's values (b needs a before it)
    one = align(task, calls[:1])
    assert one.position == {"a": 0, "b": None} and one.matched == 1 and one.covered == 1


# -- the rollout record format -------------------------------------------------------------------


def parser_for(plugins):
    return lambda name: load_parser(plugins.registry, name)


def test_messages_records_decode_openai_tool_calls_and_parallel_turns(plugins):
    task = banking_transfer_task()
    find, accounts = task.calls[:2]
    record = {"id": "r1", "task": to_json(task), "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            ToolCall(id="a", name=find.tool, arguments=find.arguments).to_openai(),
            {"id": "b", "type": "function", "function": {"name": "list_accounts", "arguments": "{not json"}},
        ]},
        {"role": "tool", "tool_call_id": "a", "content": "{}"},
        {"role": "assistant", "content": f'<tool_call>{{"name": "list_accounts", "arguments": {{"customer_id": '
                                         f'"{accounts.arguments["customer_id"]}"}}}}</tool_call>'},
        {"role": "assistant", "content": "All done."},
    ]}
    rollout = rollout_from_record(record, parser=parser_for(plugins))
    assert [type(a).__name__ for a in rollout.attempts] == ["ToolCall", "ParseFailure", "ToolCall"]
    assert rollout.turns == (0, 0, 1)
    assert rollout.attempts[1].kind == "bad_arguments"
    assert rollout.content == "All done."
    assert len({a.id for a in rollout.calls}) == 2


def test_completion_records_use_their_parser_and_prompt_messages_are_skipped(plugins):
    task = banking_transfer_task()
    record = {"id": "r2", "task": to_json(task), "parser": "mistral",
              "completion": ['[TOOL_CALLS][{"name": "find_customers", "arguments": {"query": "Ng"}}]', "ok"]}
    rollout = rollout_from_record(record, parser=parser_for(plugins))
    assert [c.name for c in rollout.calls] == ["find_customers"] and rollout.content == "ok"
    example = {"id": "e", "task": to_json(task), "prompt_messages": 2, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [ToolCall(id="p", name="find_customers", arguments={"query": "zz"}).to_openai()]},
        {"role": "assistant", "tool_calls": [ToolCall(id="q", name="get_balance", arguments={"account_id": "a"}).to_openai()]},
    ]}
    assert [c.name for c in rollout_from_record(example, parser=parser_for(plugins)).calls] == ["get_balance"]


@pytest.mark.parametrize("record, fragment", [
    ({"id": "x"}, "needs a 'task'"),
    ({"id": "x", "task": {"servers": ["banking"]}}, "needs 'messages' or 'completion'"),
    ({"id": "x", "task": {"servers": "banking", "bogus": 1}, "completion": ""}, "not a valid Task"),
    ({"id": "x", "task": {"servers": ["banking"]}, "completion": "hi", "parser": "nope"}, "no parser named 'nope'"),
])
def test_bad_records_are_user_errors(plugins, record, fragment):
    with pytest.raises(ProveError, match=fragment):
        rollout_from_record(record, parser=parser_for(plugins))


def test_a_parse_failure_is_an_attempt():
    task = banking_transfer_task()
    rollout = Rollout.from_calls(task, [ParseFailure(kind="unterminated", message="m"), ("get_balance", {})])
    assert rollout.n_attempts == 2 and len(rollout.calls) == 1 and len(rollout.failures) == 1


def test_a_task_on_an_unregistered_server_is_reported_not_raised(plugins):
    task = Task(servers=["no_such_server"], calls=[GroundTruthCall(id="a", tool="t")])
    paper = build_reward(RewardConfig(preset="paper"), plugins.registry)  # guarded: more components need servers
    result = paper.score(Rollout.from_calls(task, [("t", {})]))
    assert "no server named 'no_such_server'" in result.scores["validity"].error
    assert result.scores["tool_name"].value == 1.0  # components that need no server still score


# -- issue 16: content parts, degenerate tasks ------------------------------------------------------


def test_assistant_prose_as_openai_content_parts_is_prose(plugins):
    """A decline sent as content parts on an abstain task scores 1 (it used to be a parse failure
    scoring 0, while evaluation read the same message as no call)."""
    task = attrs.evolve(banking_transfer_task(), calls=[], expected="abstain")
    decline = [{"type": "text", "text": "I can't move money with the tools I have."}]
    record = {"id": "parts", "task": to_json(task), "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Move $25 to savings."}]},
        {"role": "assistant", "content": decline}]}
    rollout = rollout_from_record(record, parser=parser_for(plugins))
    assert rollout.attempts == () and rollout.content == "I can't move money with the tools I have."
    paper = build_reward(RewardConfig(preset="paper"), plugins.registry)
    assert paper.score(rollout).total == 1.0
    # text parts holding a raw tool call are parsed like a string, and parts beside tool_calls are the prose
    find = banking_transfer_task().calls[0]
    raw = f'<tool_call>{{"name": "find_customers", "arguments": {{"query": "{find.arguments["query"]}"}}}}</tool_call>'
    record = {"id": "raw", "task": to_json(banking_transfer_task()), "messages": [
        {"role": "assistant", "content": [{"type": "text", "text": raw}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}],
         "tool_calls": [ToolCall(id="t", name="list_accounts", arguments={}).to_openai()]}]}
    rollout = rollout_from_record(record, parser=parser_for(plugins))
    assert [c.name for c in rollout.calls] == ["find_customers", "list_accounts"] and rollout.content == "Looking."
    # content that is neither text nor parts is still a typed parse failure
    odd = {"id": "odd", "task": to_json(banking_transfer_task()), "messages": [{"role": "assistant", "content": 42}]}
    (failure,) = rollout_from_record(odd, parser=parser_for(plugins)).attempts
    assert isinstance(failure, ParseFailure) and failure.kind == "not_a_call"


def test_the_evaluation_policy_reads_content_parts_the_same_way():
    from prove_plugins.train.models.clients import turn_from_message

    turn = turn_from_message({"role": "assistant", "content": [{"type": "text", "text": "I can't do that."}]})
    assert turn.attempts == () and turn.content == "I can't do that."
    hermes = load_parser(Plugins().load(autoload=False).registry, "hermes")
    raw = [{"type": "text", "text": '<tool_call>{"name": "x", "arguments": {}}</tool_call>'}]
    assert [c.name for c in turn_from_message({"role": "assistant", "content": raw}, hermes).calls] == ["x"]


def test_a_task_that_expects_calls_without_any_is_refused_with_its_id(plugins, tmp_path):
    from prove_core.reward.core import DegenerateTaskError

    degenerate = attrs.evolve(banking_transfer_task(), calls=[])  # expected stays "call"
    record = {"id": "task-7", "task": to_json(degenerate), "completion": "I did it."}
    with pytest.raises(DegenerateTaskError, match="task 'task-7' expects calls") as err:
        rollout_from_record(record, parser=parser_for(plugins))
    assert err.value.task_id == "task-7" and isinstance(err.value, ProveError)
    with pytest.raises(DegenerateTaskError, match="'r'"):
        Rollout.from_calls(degenerate, [("find_customers", {"query": "x"})], id="r")
    # clarify / abstain tasks have no calls by design
    Rollout.from_calls(attrs.evolve(degenerate, expected="abstain"), [])
    # `prove reward` lists it as an invalid record, scores the rest, and changes nothing else
    from prove_core.reward.report import score_rollouts

    good = {"id": "ok", "task": to_json(banking_transfer_task()), "completion": "no calls"}
    path = tmp_path / "rollouts.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (record, good)) + "\n")
    report = score_rollouts(path, reward=build_reward(RewardConfig(preset="paper"), plugins.registry),
                            registry=plugins.registry, out_dir=tmp_path / "out", plots=False, echo=lambda _: None)
    assert report["rollouts"] == 1
    (invalid,) = report["invalid"]
    assert invalid["id"] == "task-7" and "no ground-truth calls" in invalid["error"]


def test_a_training_corpus_with_a_degenerate_task_is_refused_at_load(tmp_path):
    from prove_core.reward.core import DegenerateTaskError
    from prove_core.train.core import load_corpus
    from tests.support.reward_tasks import example_for

    good = example_for(banking_transfer_task(), "good")
    bad = attrs.evolve(example_for(banking_transfer_task(), "bad"), task=attrs.evolve(banking_transfer_task(), calls=[]))
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(to_json(e)) for e in (good, bad)) + "\n")
    with pytest.raises(DegenerateTaskError, match="'bad'"):
        load_corpus(path)
