"""The report's headline of each benchmark is averaged and labelled as the benchmark reports it,
and the plots stay readable at page width."""

import struct

import pytest

from prove_core.eval.core import Outcome, build_report, markdown, overview, results_path, write_report
from prove_core.model import JsonlWriter


def _write(out, model, bench, outcomes):
    with JsonlWriter(results_path(out, model, bench), key="task_id") as writer:
        for o in outcomes:
            writer.write(o.to_json())


def _outcomes(spec):
    """spec: [(category, successes, n)] -> outcomes."""
    return [Outcome(task_id=f"{c}{i}", category=c, success=i < k) for c, k, n in spec for i in range(n)]


def test_the_prove_suite_leads_with_call_tasks_so_a_model_that_never_calls_does_not_score_two_thirds(tmp_path):
    from prove_plugins.eval.suites import ProveSuite, ProveSuiteConfig

    # a model that never calls: every clarify and abstain task, no call task (the 18.2% "all")
    _write(tmp_path, "silent", "prove", _outcomes([("call", 0, 9), ("clarify", 1, 1), ("abstain", 1, 1)]))
    report = build_report(tmp_path, models=["silent"], benchmarks=["prove"],
                          evaluators={"prove": ProveSuite(ProveSuiteConfig())})
    head = report["benchmarks"]["prove"]["headline"]["silent"]
    assert list(head)[:2] == ["call", "all tasks"] and "macro" not in head
    assert head["call"] == 0.0 and head["all tasks"] == pytest.approx(2 / 11)
    text = markdown(report)
    assert "Headline, in %: success on `call` tasks first" in text and "| silent | 0.0 | 18.2 | 100.0 | 100.0 |" in text
    (line,) = overview(report)
    assert "18.2%" in line and line.endswith("headline call 0.0")


def test_tau2s_average_leaves_its_test_domain_out(tmp_path):
    from prove_plugins.eval.tau2 import Tau2, Tau2Config

    _write(tmp_path, "m", "tau2", _outcomes([("airline", 1, 4), ("retail", 3, 4), ("mock", 4, 4)]))
    report = build_report(tmp_path, models=["m"], benchmarks=["tau2"], evaluators={"tau2": Tau2(Tau2Config())})
    head = report["benchmarks"]["tau2"]["headline"]["m"]
    assert head == {"average": pytest.approx(0.5), "airline": 0.25, "retail": 0.75, "mock": 1.0}
    assert "`mock`" in report["benchmarks"]["tau2"]["headline_label"]
    _write(tmp_path, "only_mock", "tau2", _outcomes([("mock", 4, 4)]))
    alone = build_report(tmp_path, models=["only_mock"], benchmarks=["tau2"], evaluators={"tau2": Tau2(Tau2Config())})
    assert alone["benchmarks"]["tau2"]["headline"]["only_mock"]["average"] is None


def test_bfcl_overall_is_the_unweighted_mean_of_its_categories(tmp_path):
    from prove_plugins.eval.bfcl import Bfcl, BfclConfig

    _write(tmp_path, "m", "bfcl", _outcomes([("base", 1, 1), ("miss_func", 0, 3)]))
    report = build_report(tmp_path, models=["m"], benchmarks=["bfcl"], evaluators={"bfcl": Bfcl(BfclConfig())})
    assert report["benchmarks"]["bfcl"]["headline"]["m"] == {"overall": 0.5, "base": 1.0, "miss_func": 0.0}


def test_nestful_weights_its_splits_by_size_and_leads_with_its_f1s_and_win_rate(tmp_path):
    """NESTFUL scores one file: its corpus-level F1 over every sample, not a mean over splits."""
    from prove_plugins.eval import nestful as nf

    def record(task_id, split, gold, predicted):
        scored = nf.score_sample(gold, predicted)
        return {"task_id": task_id, "category": split, "success": scored.metrics["full_sequence_accuracy"] == 1.0,
                "score": scored.metrics["partial_sequence_accuracy"], "metrics": scored.metrics,
                "details": {"labels": scored.labels}}

    def call(name, label, **args):
        return {"name": name, "label": label, "arguments": args}

    gold = [call("A", "$var_1", x=1), call("B", "$var_2", y=2)]
    records = [record(f"g{i}", "glaive", gold, gold) for i in range(9)] + [record("s0", "sgd", gold, None)]
    head = nf.Nestful.headline(records)
    assert list(head) == ["F1 names", "F1 parameters", "win rate", "partial sequence", "full sequence"]
    pooled = nf.official_scores(records)["all"]
    assert head["F1 names"] == pooled["f1_function_names"] and head["full sequence"] == pytest.approx(0.9)
    per_split = nf.official_scores(records)
    unweighted = (per_split["glaive"]["full_sequence_accuracy"] + per_split["sgd"]["full_sequence_accuracy"]) / 2
    assert unweighted == 0.5 and head["full sequence"] != unweighted
    assert head["win rate"] is None  # not executed: shown as "–", not 0


def test_teval_says_in_the_report_when_word_counts_stood_in_for_its_similarity(tmp_path):
    from prove_plugins.eval.teval import TEval, TEvalConfig
    from tests.eval.test_teval import FIXTURES

    lexical = [Outcome(task_id="p1", category="plan_json", success=True, score=1.0, details={"similarity": "lexical"})]
    embedded = [Outcome(task_id="p1", category="plan_json", success=True, score=1.0,
                        details={"similarity": "all-mpnet-base-v2"})]
    _write(tmp_path, "lex", "teval", lexical)
    _write(tmp_path, "emb", "teval", embedded)
    report = build_report(tmp_path, models=["lex", "emb"], benchmarks=["teval"],
                          evaluators={"teval": TEval(TEvalConfig(data_dir=str(FIXTURES)))})
    notes = report["benchmarks"]["teval"]["notes"]
    assert notes["emb"] == [] and "not T-Eval's scores" in notes["lex"][0]
    assert "**Read with care:**" in markdown(report) and "- lex: similarity lexical" in markdown(report)


def _png_size(path):
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


def test_plots_keep_page_width_however_many_categories(tmp_path):
    categories = [f"{a}_{f}" for a in ("instruct", "plan", "reason", "retrieve", "understand", "review") for f in ("json", "str")]
    for model in ("base", "trained"):
        _write(tmp_path, model, "teval", _outcomes([(c, 1, 2) for c in categories]))
    report = build_report(tmp_path, models=["base", "trained"], benchmarks=["teval"])
    write_report(report, tmp_path)
    width, height = _png_size(tmp_path / "teval.png")
    assert width <= 1000 and 400 <= height <= 1.2 * width  # was 3752 x 432
    _write(tmp_path, "base", "small", _outcomes([("a", 1, 2)]))
    write_report(build_report(tmp_path, models=["base"], benchmarks=["small"]), tmp_path)
    assert _png_size(tmp_path / "small.png")[0] == width
