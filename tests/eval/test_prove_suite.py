"""The prove suite: a held-out split that keeps chains (and tools) unseen, and per-behaviour
metrics that separate the sanity baselines."""

import json

from prove_core.eval.core import ALL, outcomes_of, run_evaluation
from prove_core.model import Example, from_json, read_jsonl
from prove_plugins.eval.suites import chain_key, reference_of, split_corpus, tools_called
from tests.eval.conftest import eval_experiment


def _examples(corpus):
    return [from_json(r, Example) for r in read_jsonl(corpus)]


def test_split_keeps_chains_and_held_out_tools_out_of_training(corpus):
    examples = _examples(corpus)
    train, test, facts = split_corpus(examples, heldout=0.3, unseen_tools_share=0.2, seed=3)
    assert len(train) + len(test) == len(examples) and train and test
    assert not {chain_key(e) for e in train} & {chain_key(e) for e in test}
    assert facts["chains_in_both"] == 0
    hidden = set(facts["unseen_tools"]["banking"])
    assert hidden and not any(tools_called(e) & hidden for e in train)  # not even a failed call
    assert any(tools_called(e) & hidden for e in test)
    ids = {e.id for e in examples}
    side = {e.id: "test" for e in test} | {e.id: "train" for e in train}
    companions = [e.id for e in examples if e.id.endswith("-clarify") and e.id.removesuffix("-clarify") in ids]
    assert companions and all(side[c] == side[c.removesuffix("-clarify")] for c in companions)
    again, _, _ = split_corpus(examples, heldout=0.3, unseen_tools_share=0.2, seed=3)
    assert [e.id for e in again] == [e.id for e in train]  # deterministic
    other, _, _ = split_corpus(examples, heldout=0.3, unseen_tools_share=0.2, seed=4)
    assert [e.id for e in other] != [e.id for e in train]


def test_reference_moves_prose_between_calls_onto_the_next_call(corpus):
    for example in _examples(corpus):
        reference = reference_of(example)
        assert len(reference.turns) == sum(1 for m in example.messages if m.role == "user")
        for turn in reference.turns:
            assert all(step.attempts for step in turn[:-1])  # only the last step of a turn is prose-only
        assert [c.name for c in reference.calls] == [c.name for m in example.messages for c in m.tool_calls]


def test_sanity_baselines_separate_per_behaviour(tmp_path, corpus, plugins):
    experiment = eval_experiment(
        tmp_path, models=[{"name": "oracle", "client": "oracle"}, {"name": "no_call", "client": "no_call"},
                          {"name": "spammer", "client": "spammer"}],
        benchmarks=[{"name": "prove", "options": {"corpus": str(corpus), "heldout": 0.5}}], plots=False)
    report = run_evaluation(experiment, plugins, echo=lambda _: None)
    table = report["benchmarks"]["prove"]["results"]
    assert set(report["benchmarks"]["prove"]["categories"]) >= {"call", "clarify", ALL}
    assert table[ALL]["oracle"]["rate"] == 1.0 and table["call"]["oracle"]["n"] >= 5
    assert table["call"]["no_call"]["rate"] == 0.0 and table["clarify"]["no_call"]["rate"] == 1.0
    assert table["clarify"]["spammer"]["rate"] == 0.0
    oracle, spammer = table["call"]["oracle"]["metrics"], table["call"]["spammer"]["metrics"]
    assert oracle["final_state"] == 1.0 and oracle["coverage"] == 1.0 and oracle["over_budget"] == 0.0
    assert spammer["over_budget"] == 1.0 and spammer["efficiency"] < 0 and spammer["calls"] > spammer["budget"]
    assert oracle["reward"] > spammer["reward"] > table["call"]["no_call"]["metrics"]["reward"]
    split = json.loads((tmp_path / "e" / "eval" / "benchmarks" / "prove" / "split" / "split.json").read_text())
    assert split["heldout"] == table[ALL]["oracle"]["n"]
    first = outcomes_of(tmp_path / "e" / "eval", "spammer", "prove")[0]
    assert first["details"]["messages"][-1]["role"] == "assistant" and "explanations" in first["details"]


def test_the_eval_stage_runs_after_synth(tmp_path, plugins):
    from prove_core.config import load_experiment
    from prove_core.stages import run_experiment

    config = tmp_path / "exp.toml"
    config.write_text(f'''name = "s"
output_dir = "{tmp_path}"
stages = ["synth", "eval"]
[[servers]]
name = "banking"
[synth]
examples = 12
plots = false
exports = []
cache_dir = "{tmp_path / 'cache'}"
[eval]
plots = false
[[eval.models]]
name = "oracle"
client = "oracle"
[[eval.benchmarks]]
name = "prove"
options = {{ heldout = 0.5, behaviours = ["call"] }}
''')
    assert load_experiment(config).eval.benchmarks[0].options["behaviours"] == ["call"]
    summary = run_experiment(config, plugins=plugins, echo=lambda _: None)
    assert summary["ok"] and summary["stages"]["eval"]["tasks"] > 0
    assert (tmp_path / "s" / "eval" / "report.md").is_file()


def test_a_failed_request_is_recorded_as_a_failed_task_and_the_run_goes_on(tmp_path, corpus, plugins, endpoint):
    """An endpoint that answers 400 (a context overflow) for the second request: that task is
    recorded as failed with the error and status, and the others are played."""
    url, handler = endpoint
    done = {"choices": [{"message": {"role": "assistant", "content": "Done."}}]}
    handler.replies = [(200, done), (400, {"error": {"message": "maximum context length exceeded"}})] + [(200, done)] * 400
    experiment = eval_experiment(tmp_path, models=[{"name": "m", "client": "openai", "options": {"base_url": url,
                                                                                                "retries": 0}}],
                                 benchmarks=[{"name": "prove", "options": {"corpus": str(corpus), "heldout": 0.5,
                                                                           "limit": 3}}], plots=False)
    report = run_evaluation(experiment, plugins, echo=lambda _: None)
    outcomes = outcomes_of(tmp_path / "e" / "eval", "m", "prove")
    failed = [o for o in outcomes if "error" in o["details"]]
    assert len(failed) == 1 and failed[0]["success"] is False and failed[0]["details"]["status"] == 400
    assert "maximum context length" in failed[0]["details"]["error"]
    assert len(outcomes) == report["benchmarks"]["prove"]["results"][ALL]["m"]["n"] > 1


def test_results_on_another_corpus_are_not_resumed(tmp_path, corpus, plugins):
    """A resynthesized corpus holds other held-out tasks: its results must not join the old ones."""
    import shutil

    import pytest

    from prove_core.errors import ConfigError

    mine = tmp_path / "corpus.jsonl"
    shutil.copy(corpus, mine)
    experiment = eval_experiment(tmp_path, models=[{"name": "no_call", "client": "no_call"}], plots=False,
                                 benchmarks=[{"name": "prove", "options": {"corpus": str(mine), "limit": 1}}])
    run_evaluation(experiment, plugins, echo=lambda _: None)
    run_evaluation(experiment, plugins, echo=lambda _: None)  # the same corpus resumes
    lines = mine.read_text().splitlines(keepends=True)
    mine.write_text("".join(lines[1:]))
    with pytest.raises(ConfigError, match=r"other options \(benchmark\.data\)"):
        run_evaluation(experiment, plugins, echo=lambda _: None)
