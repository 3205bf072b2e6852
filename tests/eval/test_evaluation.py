"""The evaluation contract: statistics, reports, config, model clients, resume."""

import json
import types

import attrs
import pytest

from prove_core import hookimpl
from prove_core.config import ModelConfig
from prove_core.errors import ConfigError, ProveError, UnknownComponent
from prove_core.eval.core import (
    Outcome,
    Reference,
    build_client,
    build_report,
    markdown,
    paired_interval,
    run_evaluation,
    wilson,
    write_report,
)
from prove_core.model import JsonlWriter, ToolCall
from prove_core.plugin.manager import Plugins
from prove_core.reward.parsing import ParseFailure
from prove_core.reward.rollout import PolicyTurn
from prove_plugins.train.models.clients import OpenAIConfig, OpenAIPolicy
from tests.eval.conftest import eval_experiment, message


def test_paired_interval_brackets_the_mean_change_and_shrinks_with_more_tasks():
    assert paired_interval([(0.1, 0.6), (0.3, 0.8), (0.0, 0.5)]) == (0.5, 0.5)  # every task changed by +0.5
    assert paired_interval([(0.2, 0.4)]) is None  # one task: no interval
    noise = [(0.5, 0.5 + d) for d in (-0.3, 0.2, -0.1, 0.3, -0.2, 0.1)]  # mean change 0
    low, high = paired_interval(noise)
    assert low < 0 < high
    shifted = [(x, y + 0.4) for x, y in noise]
    assert paired_interval(shifted)[0] > 0  # a clear gain excludes 0
    # pairing matters: a constant per-task gain over widely varying tasks is certain
    assert paired_interval([(v, v + 0.1) for v in (0.0, 0.9, 0.2, 0.7)]) == pytest.approx((0.1, 0.1))
    wide, narrow = paired_interval(noise), paired_interval(noise * 8)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]


def test_wilson_interval_matches_known_values():
    low, high = wilson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    assert wilson(0, 10)[0] == 0.0 and round(wilson(0, 10)[1], 4) == 0.2775
    assert wilson(10, 10)[1] == 1.0 and round(wilson(10, 10)[0], 4) == 0.7225
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(50, 100, 0.99)[0] < wilson(50, 100, 0.9)[0]  # a wider interval at higher confidence


def _results(out, model, bench, outcomes):
    from prove_core.eval.core import results_path

    with JsonlWriter(results_path(out, model, bench), key="task_id") as writer:
        for o in outcomes:
            writer.write(o.to_json())


def test_report_compares_models_per_category_with_counts_intervals_and_plots(tmp_path):
    base = [Outcome(task_id=f"t{i}", category="a" if i < 4 else "b", success=i % 2 == 0, metrics={"calls": 2.0})
            for i in range(6)]
    trained = [attrs.evolve(o, success=True, metrics={"calls": 1.0}) for o in base]
    _results(tmp_path, "base", "bench", base)
    _results(tmp_path, "trained", "bench", trained)
    report = build_report(tmp_path, models=["base", "trained"], benchmarks=["bench"])
    table = report["benchmarks"]["bench"]["results"]
    assert report["benchmarks"]["bench"]["categories"] == ["a", "b", "all"]
    assert table["a"]["base"]["n"] == 4 and table["a"]["base"]["successes"] == 2
    assert table["all"]["trained"]["rate"] == 1.0 and table["all"]["trained"]["ci"] == list(wilson(6, 6))
    assert table["all"]["base"]["metrics"]["calls"] == 2.0
    # the headline without an evaluator's own: the unweighted mean of the categories (a: 2/4, b: 1/2)
    base_heavy = [*base, *[attrs.evolve(o, task_id=f"x{i}", category="b", success=True) for i, o in enumerate(base)]]
    _results(tmp_path, "skewed", "bench", base_heavy)
    skewed = build_report(tmp_path, models=["base", "trained", "skewed"], benchmarks=["bench"])["benchmarks"]["bench"]
    assert skewed["headline"]["base"] == {"macro": 0.5} and skewed["headline"]["trained"] == {"macro": 1.0}
    assert skewed["headline"]["skewed"]["macro"] == pytest.approx((2 / 4 + 7 / 8) / 2)  # not the pooled 9/12
    assert report["benchmarks"]["bench"]["headline"]["base"] == {"macro": 0.5}
    assert report["benchmarks"]["bench"]["protocol"] == {"base": [], "trained": []}
    _results(tmp_path, "prompted", "bench", [attrs.evolve(o, details={"protocol": "prompting"}) for o in base])
    named = build_report(tmp_path, models=["base", "prompted"], benchmarks=["bench"])
    assert named["benchmarks"]["bench"]["protocol"] == {"base": [], "prompted": ["prompting"]}
    assert "Protocol: prompted prompting" in markdown(named)
    text = markdown(report)
    assert "| base | 50.0 |" in text and "| trained | 100.0 |" in text
    assert "| a | 50.0 [15.0, 85.0] (n=4) | 100.0 [51.0, 100.0] (n=4) | +50.0 |" in text
    paths = write_report(report, tmp_path)
    assert {p.name for p in paths} == {"report.json", "report.md", "bench.png"}
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "report.json").read_text())["models"] == ["base", "trained"]


def test_scripted_baselines_play_the_reference_by_user_turn():
    registry = Plugins().load(autoload=False).registry
    oracle = build_client(ModelConfig(name="o", client="oracle"), registry)
    call = ToolCall(id="c1", name="find", arguments={"q": 1})
    oracle.begin(Reference(turns=[[PolicyTurn(attempts=[call]), PolicyTurn(content="found")], []]))
    conversation = [{"role": "user", "content": "hi"}]
    assert oracle.respond(conversation, []).attempts == (call,)
    conversation.append({"role": "assistant", "content": None})
    assert oracle.respond(conversation, []).content == "found"
    conversation += [{"role": "assistant", "content": "found"}, {"role": "user", "content": "and?"}]
    assert oracle.respond(conversation, []) == PolicyTurn(content="Done.")
    spammer = build_client(ModelConfig(name="s", client="spammer", options={"calls_per_turn": 4}), registry)
    spammer.begin(Reference(turns=[[PolicyTurn(attempts=[call])]]))
    turn = spammer.respond([{"role": "user", "content": "hi"}], [])
    assert [a.name for a in turn.attempts] == ["find"] * 4 and len({a.id for a in turn.attempts}) == 4
    tools = [{"type": "function", "function": {"name": "get", "parameters": {
        "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}, "required": ["n", "s"]}}}]
    spammer.begin(None)
    assert spammer.respond([{"role": "user", "content": "hi"}], tools).attempts[0].arguments == {"n": 1, "s": "x"}
    no_call = build_client(ModelConfig(name="n", client="no_call"), registry)
    assert not no_call.respond([{"role": "user", "content": "hi"}], tools).attempts


def test_clients_are_looked_up_in_the_registry():
    plugins = Plugins().load(autoload=False)
    registry = plugins.registry
    assert registry.names("clients") == ["hf", "no_call", "openai", "oracle", "spammer"]
    assert all(registry.component("clients", n).plugin == "prove_plugins.train.models.clients" for n in registry.names("clients"))
    with pytest.raises(UnknownComponent, match=r"no client named 'oracel' \(registered: hf, no_call, openai, oracle, spammer\)"):
        build_client(ModelConfig(name="m", client="oracel"), registry)
    with pytest.raises(ConfigError, match=r"\$\.eval\.models\[3\]\.options: extra fields found \(replies\)"):
        build_client(ModelConfig(name="m", client="no_call", options={"replies": "x"}), registry, path="$.eval.models[3]")

    class Echo:
        """A third-party client: repeats the last user message."""

        name = "echo"

        @attrs.frozen
        class Config:
            prefix: str = ""

        def __init__(self, config, *, registry):
            self.config, self.registry = config, registry

        def respond(self, messages, tools):
            return PolicyTurn(content=self.config.prefix + messages[-1]["content"])

    plugins.add(types.SimpleNamespace(prove_register_clients=hookimpl(lambda register: register(Echo))), name="echo-plugin")
    echo = build_client(ModelConfig(name="e", client="echo", options={"prefix": "> "}), registry)
    assert echo.registry is registry and echo.respond([{"role": "user", "content": "hi"}], []).content == "> hi"


def test_model_and_benchmark_options_are_checked_with_paths(tmp_path):
    plugins = Plugins().load(autoload=False)
    bad = eval_experiment(tmp_path, models=[{"name": "m", "client": "oracel"},
                                            {"name": "x", "client": "openai", "options": {"temprature": 0}}],
                          benchmarks=[{"name": "bfcl", "options": {"categories": ["nope"]}}, {"name": "nope"}])
    with pytest.raises(ConfigError) as info:
        run_evaluation(bad, plugins)
    text = str(info.value)
    assert "$.eval.models[0].client: no client named 'oracel' (registered: hf, no_call, openai, oracle, spammer)" in text
    assert "$.eval.models[1].options" in text and "temprature" in text
    assert "$.eval.benchmarks[0].options" in text and "categories" in text
    assert "$.eval.benchmarks[1].name: no evaluator named 'nope'" in text
    with pytest.raises(ConfigError, match=r"\$\.eval: 'confidence' must be < 1"):
        eval_experiment(tmp_path, models=[{"name": "m", "client": "oracle"}], benchmarks=[{"name": "bfcl"}], confidence=2)


class _Counting:
    """A third-party evaluator: three tasks, the odd ones succeed."""

    name = "counting"

    @attrs.frozen
    class Config:
        tasks: int = 3

    def __init__(self, config):
        self.config = config
        self.played = []

    def evaluate(self, policy, context):
        for i in range(self.config.tasks):
            task_id = f"t{i}"
            if context.wanted(task_id):
                self.played.append(task_id)
                yield Outcome(task_id=task_id, category="only", success=i % 2 == 1, score=float(i))


def test_a_registered_evaluator_runs_and_an_interrupted_run_resumes(tmp_path):
    plugins = Plugins().load(autoload=False)
    plugin = types.SimpleNamespace(prove_register_evaluators=hookimpl(lambda register: register(_Counting)))
    plugins.add(plugin, name="counting-plugin")
    experiment = eval_experiment(tmp_path, models=[{"name": "m", "client": "no_call"}],
                                 benchmarks=[{"name": "counting"}])
    lines = []
    report = run_evaluation(experiment, plugins, echo=lines.append)
    cell = report["benchmarks"]["counting"]["results"]["all"]["m"]
    assert (cell["n"], cell["successes"], cell["score"]) == (3, 1, 1.0)
    again = run_evaluation(experiment, plugins, echo=lines.append)
    assert again["benchmarks"]["counting"]["results"]["all"]["m"]["n"] == 3
    assert any("0 tasks played" in line and "3 from an earlier run" in line for line in lines)


def test_openai_client_sends_tools_and_decodes_tool_calls(endpoint, monkeypatch):
    url, handler = endpoint
    monkeypatch.setenv("PROVE_TEST_KEY", "sekret")
    registry = Plugins().load(autoload=False).registry
    handler.replies = [
        (200, message(content=None, tool_calls=[
            {"id": "a", "type": "function", "function": {"name": "get_balance", "arguments": '{"account_id": "acc_1"}'}},
            {"id": "b", "type": "function", "function": {"name": "broken", "arguments": "{not json"}}])),
        (200, message(content='<tool_call>{"name": "ls", "arguments": {}}</tool_call>')),
        (500, {"error": "overloaded"}), (200, message(content="All done.")),
    ]
    policy = OpenAIPolicy(OpenAIConfig(base_url=url, model="qwen", api_key_env="PROVE_TEST_KEY", retries=1,
                                       extra_body={"top_p": 0.9}), registry=registry)
    tools = [{"type": "function", "function": {"name": "get_balance", "parameters": {"type": "object"}}}]
    turn = policy.respond([{"role": "user", "content": "balance?"}], tools)
    assert turn.attempts[0] == ToolCall(id="a", name="get_balance", arguments={"account_id": "acc_1"})
    assert isinstance(turn.attempts[1], ParseFailure) and turn.attempts[1].kind == "bad_arguments"
    sent = handler.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer sekret"
    assert sent["body"]["tools"] == tools and sent["body"]["model"] == "qwen" and sent["body"]["top_p"] == 0.9
    hermes = OpenAIPolicy(OpenAIConfig(base_url=url, parser="hermes", retries=1), registry=registry)
    assert hermes.respond([{"role": "user", "content": "ls"}], []).attempts[0].name == "ls"
    assert policy.respond([{"role": "user", "content": "thanks"}], []).content == "All done."  # after one retry
    handler.replies = [(400, {"error": "bad request"})]
    with pytest.raises(ProveError, match="HTTP 400"):
        policy.respond([{"role": "user", "content": "x"}], [])


def _counting_plugins():
    plugins = Plugins().load(autoload=False)
    plugins.add(types.SimpleNamespace(prove_register_evaluators=hookimpl(lambda register: register(_Counting))),
                name="counting-plugin")
    return plugins


def test_a_resume_with_other_options_is_refused_before_anything_runs_and_fresh_starts_over(tmp_path):
    """As synthesis does: results made with other benchmark or model options are not mixed in."""
    plugins = _counting_plugins()
    first = eval_experiment(tmp_path, models=[{"name": "m", "client": "no_call"}], benchmarks=[{"name": "counting"}])
    run_evaluation(first, plugins, echo=lambda _: None)
    for models, benchmarks, changed in (
            ([{"name": "m", "client": "no_call"}], [{"name": "counting", "options": {"tasks": 5}}], "benchmark.options.tasks"),
            ([{"name": "m", "client": "no_call", "options": {"reply": "hm"}}], [{"name": "counting"}], "model.options.reply")):
        other = eval_experiment(tmp_path, models=models, benchmarks=benchmarks)
        with pytest.raises(ConfigError, match=r"made with other options \(" + changed.replace(".", r"\.")) as info:
            run_evaluation(other, plugins, echo=lambda _: None)
        assert "--fresh" in str(info.value)
    # a limit only chooses how many tasks run: resuming with another one is fine
    limited = eval_experiment(tmp_path, models=[{"name": "m", "client": "no_call"}],
                              benchmarks=[{"name": "counting", "options": {"tasks": 3}}])
    assert run_evaluation(limited, plugins, echo=lambda _: None)["benchmarks"]["counting"]["results"]["all"]["m"]["n"] == 3
    other = eval_experiment(tmp_path, models=[{"name": "m", "client": "no_call"}],
                            benchmarks=[{"name": "counting", "options": {"tasks": 5}}])
    lines = []
    report = run_evaluation(other, plugins, echo=lines.append, fresh=True)
    assert report["benchmarks"]["counting"]["results"]["all"]["m"]["n"] == 5
    assert not any("earlier run" in line for line in lines)


class _Flaky(_Counting):
    """Task t1's request fails (a run that could not be played) until ``up`` is set."""

    name = "flaky"
    up = False

    def evaluate(self, policy, context):
        for outcome in super().evaluate(policy, context):
            if outcome.task_id == "t1" and not _Flaky.up:
                outcome = attrs.evolve(outcome, success=False, score=0.0, retry=True)
            yield outcome


def test_a_task_whose_run_failed_is_played_again_on_resume_and_replaces_the_failure(tmp_path):
    plugins = Plugins().load(autoload=False)
    plugins.add(types.SimpleNamespace(prove_register_evaluators=hookimpl(lambda register: register(_Flaky))),
                name="flaky-plugin")
    experiment = eval_experiment(tmp_path, models=[{"name": "m", "client": "no_call"}], benchmarks=[{"name": "flaky"}])
    lines = []
    _Flaky.up = False
    cell = run_evaluation(experiment, plugins, echo=lines.append)["benchmarks"]["flaky"]["results"]["all"]["m"]
    assert (cell["n"], cell["successes"]) == (3, 0)
    assert any("1 could not be played out" in line for line in lines)
    _Flaky.up = True
    lines.clear()
    cell = run_evaluation(experiment, plugins, echo=lines.append)["benchmarks"]["flaky"]["results"]["all"]["m"]
    assert (cell["n"], cell["successes"]) == (3, 1)  # t1 played again, counted once
    assert any("1 tasks played" in line and "2 from an earlier run" in line for line in lines)


def test_prove_eval_help_names_every_bundled_benchmark():
    from click.testing import CliRunner

    from prove_core.cli import cli

    text = " ".join(CliRunner().invoke(cli, ["eval", "--help"]).output.split())
    names = Plugins().load(autoload=False).registry.names("evaluators")
    assert len(names) >= 5 and all(name in text for name in names), (names, text)
    assert "--fresh" in text and "runs/eval without a CONFIG" in text
