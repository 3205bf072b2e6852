"""The ``teval`` evaluator: T-Eval's parsing and metrics reproduced sample by sample, its
aggregation, prompts, failures, resume and a run through ``prove eval``'s machinery.

The fixtures (``fixtures/teval/``) are small files in T-Eval's own data format; the expected
values below are worked out by hand with the ``lexical`` similarity (word-count cosine), whose
tool names in the fixtures share no words, so every plan match is decided by hand-checkable
numbers."""

import json
import math
import random
from pathlib import Path

import pytest

from prove_core.errors import ConfigError, RequestFailed
from prove_core.eval.core import EvalContext, outcomes_of, run_evaluation
from prove_core.model import ToolCall
from prove_core.plugin.manager import Plugins
from prove_core.reward.rollout import PolicyTurn
from prove_plugins.eval import teval as eval_teval
from prove_plugins.eval.teval import (
    LexicalSimilarity,
    TEval,
    TEvalConfig,
    aggregate,
    load_loose,
    max_weight_matching,
    plan_from_text,
    plan_match,
    response_text,
    review_choice,
    score_instruct,
    split_special_tokens,
)
from tests.eval.conftest import eval_experiment

FIXTURES = Path(__file__).parent / "fixtures" / "teval"

# one answer per sample, found by the "(case X)" tag of its prompt
ANSWERS = {
    # instruct, JSON: right name, 2 of 3 args (in a code fence); unclosed JSON; empty
    "I1": '```json\n{"thought": "get price", "name": "AirbnbSearch.get_property_checkout_price", '
          '"args": {"propertyId": 47215807, "checkIn": "2023-10-20", "checkOut": "2023-10-24"}}\n```',
    "I2": '{"thought": "search", "name": "AirbnbSearch.search_property_by_place", "args": {"place": "Berlin"}',
    "I5": "",
    # instruct, string template: perfect (with a stop marker and junk after it); parsed, wrong name, args not a literal
    "I3": "Thought: I need the reviews\nAction: AirbnbSearch.get_property_reviews\nAction Input: {'propertyId': 36339325}"
          "<|im_end|>\nuser: more",
    "I4": "Thought: day\nAction: TimeTool.get_time\nAction Input: none",
    # plan, JSON: an extra step and a missing one; two steps swapped; prose instead of a list
    "P1": json.dumps([{"id": 0, "name": "Weather.forecast", "args": "{'city': 'Paris'}"},
                      {"id": 1, "name": "Translator.translate_text", "args": "{'text': 'hi'}"},
                      {"id": 2, "name": "Email.send_mail", "args": "{'to': 'bob'}"},
                      {"id": 3, "name": "FinishAction", "args": "{}"}]),
    "P2": json.dumps([{"id": 0, "name": "Email.send_mail", "args": "{'to': 'ann'}"},
                      {"id": 1, "name": "Weather.forecast", "args": "{'city': 'Rome'}"}]),
    "P3": "I would call Weather.forecast then send mail",
    # plan, string: one step per line (a line naming no API is skipped); empty
    "S1": "1. Use Weather.forecast for city Oslo.\n2. Use Calendar.create_event titled Ski.\n3. Reply to the user.",
    "S2": "",
    # reason / retrieve / understand, string files
    "R1": "Now send the forecast to bob",
    "R2": "Weather in Paris please",
    "T1": "I will use Email.send_mail now",
    "T2": "Email.send_mail or Weather.forecast",
    "T3": "Email.send_mail, then FinishAction",
    "U1": "{'city': 'Paris', 'days': 3}",
    "U2": '{"city": "Paris", "days": 3}',
    # reason + retrieve + understand, JSON: one wrong argument; not JSON; a Python literal with empty args
    "J1": '{"thought": "Now send the forecast to bob", "name": "Email.send_mail", "args": {"to": "bob", "body": "rainy"}}',
    "J2": "Send it with Email.send_mail",
    "J3": "{'thought': 'All done', 'name': 'FinishAction', 'args': {}}",
    # review: "Answer: X"; a bare letter; no choice to read; a wrong choice; JSON is_finished
    "V1": "Answer: B",
    "V2": "A",
    "V3": "The answer is E",
    "V4": "Answer: D",
    "V5": '{"is_finished": true}',
}

R2 = 3 / (2 * math.sqrt(5))  # "weather in paris please" vs "check the weather in paris": 3 shared of 4 and 5 words
J1_ARGS = 1 / (2 + 1e-5)  # T-Eval's exact argument metric: hits / (true args + 1e-5)

# (task id, category, score, success) for the answers above
EXPECTED = {
    "instruct/query_1_1_0": ("instruct_json", (1 + 3 / 4) / 2, False),  # format 1, args EM (name + 2 args) / 4
    "instruct/query_1_2_0": ("instruct_json", 0.0, False),
    "instruct/query_1_3_1": ("instruct_str", 1.0, True),
    "instruct/query_1_4_1": ("instruct_str", 0.5, False),  # parsed (format 1), name wrong, no args: EM 0 / 1
    "instruct/query_1_5_0": ("instruct_json", 0.0, False),
    "plan_json/query_2_1": ("plan_json", 2 / 3, False),  # 2 of 3 true steps, 2 of 3 predicted
    "plan_json/query_2_2": ("plan_json", 0.5, False),  # both match, in the wrong order: a chain of 1
    "plan_json/query_2_3": ("plan_json", 0.0, False),
    "plan_str/query_3_1": ("plan_str", 1.0, True),
    "plan_str/query_3_2": ("plan_str", 0.0, False),
    "reason_str/query_4_1": ("reason_str", 1.0, True),
    "reason_str/query_4_2": ("reason_str", R2, False),
    "retrieve_str/query_5_1": ("retrieve_str", 1.0, True),
    "retrieve_str/query_5_2": ("retrieve_str", 0.0, False),  # another tool name is mentioned
    "retrieve_str/query_5_3": ("retrieve_str", 0.0, False),  # FinishAction is mentioned
    "understand_str/query_6_1": ("understand_str", 1.0, True),
    "understand_str/query_6_2": ("understand_str", 0.0, False),  # JSON quotes: not the true args' text
    "reason_retrieve_understand_json/query_7_1/reason": ("reason_json", 1.0, True),
    "reason_retrieve_understand_json/query_7_1/retrieve": ("retrieve_json", 1.0, True),
    "reason_retrieve_understand_json/query_7_1/understand": ("understand_json", J1_ARGS, False),
    "reason_retrieve_understand_json/query_7_2/reason": ("reason_json", 0.0, False),
    "reason_retrieve_understand_json/query_7_2/retrieve": ("retrieve_json", 0.0, False),
    "reason_retrieve_understand_json/query_7_2/understand": ("understand_json", 0.0, False),
    "reason_retrieve_understand_json/query_7_3/reason": ("reason_json", 0.0, False),  # "All done" vs "Finish"
    "reason_retrieve_understand_json/query_7_3/retrieve": ("retrieve_json", 1.0, True),
    "reason_retrieve_understand_json/query_7_3/understand": ("understand_json", 1.0, True),  # both without args
    "review_str/query_8_1": ("review_str", 1.0, True),
    "review_str/query_8_2": ("review_str", 1.0, True),
    "review_str/query_8_3": ("review_str", 0.0, False),
    "review_str/query_8_4": ("review_str", 0.0, False),
    "review_str/query_8_5": ("review_json", 0.0, False),  # T-Eval: {"review": True} != True
}


class Scripted:
    """Answers each sample with ``ANSWERS`` (by the tag in its prompt); records what it was sent."""

    name = "scripted"

    def __init__(self, answers=ANSWERS, fail=()):
        self.answers, self.fail, self.seen = answers, set(fail), []

    def respond(self, messages, tools):
        self.seen.append((messages, tools))
        text = "\n".join(m["content"] for m in messages)
        tag = next(t for t in self.answers if f"(case {t})" in text)
        if tag in self.fail:
            raise RequestFailed("endpoint http://x/v1 failed: HTTP 400 context too long", status=400)
        return PolicyTurn(content=self.answers[tag].strip(), raw=self.answers[tag])


def context(tmp_path, model="m", wanted=lambda _id: True):
    lines = []
    return EvalContext(registry=None, experiment=None, out_dir=tmp_path, model=model, wanted=wanted, echo=lines.append), lines


def evaluator(**options):
    return TEval(TEvalConfig(data_dir=str(FIXTURES), similarity="lexical", **options))


def test_every_sample_scores_as_worked_out_by_hand(tmp_path):
    ctx, lines = context(tmp_path)
    outcomes = {o.task_id: o for o in evaluator().evaluate(Scripted(), ctx)}
    assert set(outcomes) == set(EXPECTED)
    for task_id, (category, score, success) in EXPECTED.items():
        o = outcomes[task_id]
        assert (o.category, o.success) == (category, success), task_id
        assert o.score == pytest.approx(score, abs=1e-9), task_id
    # the metrics behind the scores
    assert outcomes["instruct/query_1_1_0"].metrics == {"format": 1.0, "args_em": 0.75}
    assert outcomes["instruct/query_1_4_1"].metrics == {"format": 1.0, "args_em": 0.0}
    assert outcomes["instruct/query_1_2_0"].metrics == {"format": 0.0, "args_em": 0.0}
    assert outcomes["plan_json/query_2_1"].metrics == pytest.approx(
        {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "parse_rate": 1.0})
    assert outcomes["plan_json/query_2_3"].metrics["parse_rate"] == 0.0
    assert outcomes["plan_str/query_3_1"].details["parsed"] == [
        {"id": 0, "name": "Weather.forecast", "args": "Use Weather.forecast for city Oslo."},
        {"id": 1, "name": "Calendar.create_event", "args": "Use Calendar.create_event titled Ski."}]
    assert outcomes["reason_retrieve_understand_json/query_7_2/reason"].metrics == {"thought": 0.0, "parse_rate": 0.0}
    assert outcomes["review_str/query_8_3"].metrics == {"review_quality": 0.0, "parse_rate": 0.0}
    assert outcomes["review_str/query_8_4"].metrics == {"review_quality": 0.0, "parse_rate": 1.0}
    assert outcomes["review_str/query_8_5"].metrics == {"review_quality": 0.0, "parse_rate": 1.0, "is_finished_right": 1.0}
    # what was kept: the answer as T-Eval stores it (cut at the stop marker), and the raw text
    i3 = outcomes["instruct/query_1_3_1"].details
    assert i3["answer"].endswith("{'propertyId': 36339325}") and "<|im_end|>" in i3["raw"]
    assert outcomes["plan_json/query_2_1"].details["similarity"] == "lexical"
    # T-Eval's aggregation: the mean per category, abilities over their formats, overall over abilities
    summary = json.loads((tmp_path / "m.summary.json").read_text())
    comps = {c: v["score"] for c, v in summary["components"].items()}
    expected_components = {
        "instruct_json": 0.875 / 3, "instruct_str": 0.75, "plan_json": (2 / 3 + 0.5) / 3, "plan_str": 0.5,
        "reason_str": (1 + R2) / 2, "reason_json": 1 / 3, "retrieve_str": 1 / 3, "retrieve_json": 2 / 3,
        "understand_str": 0.5, "understand_json": (J1_ARGS + 1) / 3, "review_str": 0.5, "review_json": 0.0}
    assert comps == pytest.approx(expected_components)
    abilities = {"instruct": (0.875 / 3 + 0.75) / 2, "plan": ((2 / 3 + 0.5) / 3 + 0.5) / 2, "reason": ((1 + R2) / 2 + 1 / 3) / 2,
                 "retrieve": 0.5, "understand": ((J1_ARGS + 1) / 3 + 0.5) / 2,
                 "review": 2 / 5}  # review: T-Eval's ReviewEvaluator, 2 right of the file's 5 samples
    assert summary["abilities"] == pytest.approx(abilities)
    assert summary["overall"] == pytest.approx(sum(abilities.values()) / 6)
    assert summary["complete"] and summary["not_averaged"] == [] and summary["similarity"] == "lexical"
    assert f"overall {100 * summary['overall']:.1f}" in lines[-1]
    assert "| instruct | 29.2 (n=3) | 75.0 (n=2) | 52.1 |" in (tmp_path / "m.summary.md").read_text()


def test_prompts_are_the_samples_messages_with_no_tools(tmp_path):
    policy = Scripted()
    list(evaluator(abilities=["reason"], formats=["json"]).evaluate(policy, context(tmp_path)[0]))
    data = json.loads((FIXTURES / "reason_retrieve_understand_json_v2.json").read_text())
    origin = data["query_7_1"]["origin_prompt"]
    sent, tools = policy.seen[0]
    assert tools == [] and len(policy.seen) == 3
    assert [m["role"] for m in origin] == ["system", "user", "assistant", "function"]
    assert sent == [{**m, "role": "user" if m["role"] == "function" else m["role"]} for m in origin]
    policy = Scripted()
    tool_role = evaluator(abilities=["reason"], formats=["json"], function_role="tool", limit=1)
    list(tool_role.evaluate(policy, context(tmp_path / "b")[0]))
    assert [m["role"] for m in policy.seen[0][0]] == ["system", "user", "assistant", "tool"]


def test_selection_limit_ids_and_formats(tmp_path):
    ev = evaluator(abilities=["instruct", "review"], formats=["str"], limit=1)
    assert [(s.file.stem, s.id, s.fmt) for s in ev.samples()] == [("instruct", "query_1_3_1", "str"),
                                                                 ("review_str", "query_8_1", "str")]
    ev = evaluator(ids=["query_2_2", "plan_str/query_3_2"])
    assert [s.id for s in ev.samples()] == ["query_2_2", "query_3_2"]
    assert [f.stem for f in evaluator(abilities=["reason"], formats=["json"]).selected_files()] == [
        "reason_retrieve_understand_json"]


def test_a_failed_request_scores_zero_and_the_run_goes_on(tmp_path):
    outcomes = list(evaluator(abilities=["reason", "retrieve", "understand"], formats=["json"])
                    .evaluate(Scripted(fail={"J1"}), context(tmp_path)[0]))
    failed = [o for o in outcomes if "/query_7_1/" in o.task_id]
    assert len(failed) == 3 and not any(o.success for o in failed) and {o.score for o in failed} == {0.0}
    assert failed[0].details["status"] == 400 and "context too long" in failed[0].details["error"]
    assert failed[2].metrics == {"args": 0.0, "parse_rate": 0.0}
    assert [o.task_id for o in outcomes if o.success] == ["reason_retrieve_understand_json/query_7_3/retrieve",
                                                        "reason_retrieve_understand_json/query_7_3/understand"]


def test_resume_plays_only_what_is_missing_and_the_summary_covers_both_runs(tmp_path):
    ctx, _ = context(tmp_path)
    first = list(evaluator(abilities=["review"]).evaluate(Scripted(), ctx))
    done = {o.task_id for o in first[:3]}
    policy = Scripted()
    ctx2, _ = context(tmp_path, wanted=lambda task_id: task_id not in done)
    again = list(evaluator(abilities=["review"]).evaluate(policy, ctx2))
    assert [o.task_id for o in again] == [o.task_id for o in first[3:]] and len(policy.seen) == 2
    assert json.loads((tmp_path / "m.summary.json").read_text())["components"]["review_str"] == {"n": 4, "score": 0.5}
    # the results deleted, everything is played again: the summary holds the new scores only
    worse = Scripted({**ANSWERS, "V1": "Answer: E"})
    assert len(list(evaluator(abilities=["review"]).evaluate(worse, context(tmp_path)[0]))) == 5
    assert json.loads((tmp_path / "m.summary.json").read_text())["components"]["review_str"] == {"n": 4, "score": 0.25}


def test_concurrent_requests_give_the_same_outcomes(tmp_path):
    serial = [o.to_json() for o in evaluator().evaluate(Scripted(), context(tmp_path / "a")[0])]
    parallel = [o.to_json() for o in evaluator(workers=4).evaluate(Scripted(), context(tmp_path / "b")[0])]
    assert parallel == serial


# -- parsing and metrics, case by case -----------------------------------------------------------------


def test_answers_are_cleaned_and_parsed_like_t_eval():
    assert split_special_tokens("```json\n{\"a\": 1}\n```<|im_end|>trailing") == '{"a": 1}'
    assert split_special_tokens("  Answer: B\nuser: next turn") == "Answer: B"
    assert load_loose("{'a': 1, 'b': [2]}") == {"a": 1, "b": [2]}  # a Python literal
    assert load_loose('{"a": true, "b": null}') == {"a": True, "b": None}  # JSON
    assert load_loose("{'a': true}") == {"a": True}  # JSON once single quotes are made double
    assert load_loose("Plan: [1, 2] done", "[", "]") == [1, 2]
    for bad in ("", "{a: 1", "no list here"):
        with pytest.raises(ValueError):
            load_loose(bad, "[", "]")


def test_instruct_arguments_compare_exactly_by_key():
    datum = {"meta_data": {"response_format": "json"}, "template": {"thought": "t", "action": "a", "args": "x"},
             "ground_truth": {"action": "f", "args": {"n": 1, "s": "1"}}}
    assert score_instruct('{"t": "", "a": "f", "x": {"n": 1.0, "s": 1}}', datum).metrics == {"format": 1.0, "args_em": 2 / 3}
    assert score_instruct('{"t": "", "a": "g", "x": "n=1"}', datum).metrics == {"format": 1.0, "args_em": 0.0}
    assert score_instruct('{"t": "", "a": "f"}', datum).metrics == {"format": 0.0, "args_em": 0.0}  # a key missing
    assert score_instruct("[1, 2]", datum).metrics["format"] == 0.0


class Table:
    """A similarity given as a table of (a, b) -> value (0 elsewhere, 1 on equal texts)."""

    name = "table"

    def __init__(self, values):
        self.values = values

    def matrix(self, left, right):
        return [[1.0 if a == b else self.values.get((a, b), 0.0) for b in right] for a in left]


def steps(*names):
    return [{"id": i, "name": n, "args": "{}"} for i, n in enumerate(names)]


def test_plan_matching_counts_the_longest_chain_of_matched_steps():
    exact = Table({})
    f1 = lambda p, g: plan_match(steps(*p), steps(*g), exact)["f1"]  # noqa: E731
    assert f1("abc", "abc") == 1.0
    assert f1("abxc", "abc") == pytest.approx(2 * (3 / 4) / (1 + 3 / 4))  # an extra step: precision 3/4
    assert f1("ac", "abc") == pytest.approx(0.8)  # a missing step: recall 2/3
    assert f1("cba", "abc") == pytest.approx(1 / 3)  # all matched, reversed: a chain of one
    assert f1("xy", "abc") == pytest.approx(0.4)  # nothing matches, yet T-Eval counts one step
    assert f1(["a", "FinishAction"], ["a", "FinishAction"]) == 1.0  # a trailing FinishAction is dropped
    assert plan_match([], steps("a"), exact)["f1"] == 0.0
    assert plan_match(steps("FinishAction"), steps("a"), exact)["f1"] == 0.0
    # weights: 0.75 name + 0.25 args must exceed 0.8, and the matching maximises the total weight
    near = Table({("a2", "a"): 0.9})  # equal args: 0.75 * 0.9 + 0.25 = 0.925
    assert plan_match(steps("a2", "b"), steps("a", "b"), near)["f1"] == 1.0
    far = Table({("a2", "a"): 0.7})  # 0.75 * 0.7 + 0.25 = 0.775: a2 is left unmatched
    assert plan_match(steps("a2", "b"), steps("a", "b"), far)["f1"] == pytest.approx(0.5)
    both = Table({("p", "a"): 0.95, ("p", "b"): 0.99, ("q", "b"): 0.95})
    assert max_weight_matching([[0.96, 0.99], [0.0, 0.96]], 0.8) == {0: 0, 1: 1}  # 1.92 beats 0.99
    assert plan_match(steps("p", "q"), steps("a", "b"), both)["f1"] == 1.0


def test_string_plans_take_the_first_listed_api_a_line_mentions_earliest():
    apis = ["Film.get_movie", "Film.get_movie_details", "Email.send_mail"]
    text = "Use Film.get_movie_details. Then Email.send_mail it, not Film.get_movie\nThank the user"
    assert [(s["id"], s["name"], s["args"]) for s in plan_from_text(text, "str", apis)] == [
        (0, "Film.get_movie", "Use Film.get_movie_details"),  # both names start there: the first listed wins
        (1, "Email.send_mail", "Then Email.send_mail it, not Film.get_movie")]


def test_the_answer_text_is_what_the_model_generated():
    assert response_text(PolicyTurn(content="parsed", raw="<tool_call>x</tool_call> parsed")) == "<tool_call>x</tool_call> parsed"
    assert response_text(PolicyTurn(content="plain")) == "plain"
    native = json.dumps({"role": "assistant", "content": "text", "tool_calls": [{"id": "a"}]})
    assert response_text(PolicyTurn(content="text", raw=native, attempts=[ToolCall(id="a", name="f", arguments={})])) == "text"


def test_the_matching_without_networkx_is_an_exact_maximum(monkeypatch):
    nx = pytest.importorskip("networkx")
    rng = random.Random(7)
    for _ in range(40):
        rows, cols = rng.randint(1, 6), rng.randint(1, 6)
        weights = [[rng.random() for _ in range(cols)] for _ in range(rows)]
        with_nx = max_weight_matching(weights, 0.5)
        monkeypatch.setitem(__import__("sys").modules, "networkx", None)  # import fails: the Hungarian fallback
        without = max_weight_matching(weights, 0.5)
        monkeypatch.setitem(__import__("sys").modules, "networkx", nx)
        assert sum(weights[i][j] for i, j in without.items()) == pytest.approx(sum(weights[i][j] for i, j in with_nx.items()))
        assert all(weights[i][j] > 0.5 for i, j in without.items()) and len(set(without.values())) == len(without)


def test_review_choices_are_read_after_the_first_colon():
    texts = ("Answer: C", "E", "Answer:  a", "Answer: Because it failed", "", "answer is B")
    # (T-Eval reads the first letter, even of a word)
    assert [review_choice(t, "str") for t in texts] == ["C", "E", None, "B", None, None]
    assert [review_choice(t, "json") for t in ('{"is_finished": false}', "{'is_finished': True}", '{"is_finished": "yes"}',
                                               "{}")] == [False, True, None, None]


def test_lexical_similarity_is_a_word_count_cosine():
    sim = LexicalSimilarity()
    assert sim.score("AirbnbSearch.get_property_details", "AirbnbSearch.get_property_reviews") == pytest.approx(4 / 5)
    assert sim.score("same text", "same text") == 1.0 and sim.score("", "") == 1.0 and sim.score("", "x") == 0.0
    assert sim.score("北京天气", "天气") == pytest.approx(2 / (2 * math.sqrt(2)))


def test_aggregate_averages_formats_then_abilities():
    records = [{"category": c, "score": s} for c, s in [("instruct_json", 1.0), ("instruct_json", 0.0), ("instruct_str", 1.0),
                                                         ("plan_str", 0.5), ("review_str", 1.0), ("review_str", 0.0),
                                                         ("review_json", 0.0)]]
    summary = aggregate(records)
    # review: over every sample of its file (1/3), not the mean of its two formats (0.25)
    assert summary["abilities"] == pytest.approx({"instruct": 0.75, "plan": 0.5, "reason": None, "retrieve": None,
                                                  "understand": None, "review": 1 / 3})
    assert summary["overall"] == pytest.approx((0.75 + 0.5 + 1 / 3) / 3) and not summary["complete"]
    assert aggregate([])["overall"] is None


# -- configuration, similarity loading, the plugin -------------------------------------------------------


def test_missing_data_is_a_config_error_that_says_where_to_get_it(tmp_path, monkeypatch):
    monkeypatch.delenv("TEVAL_DATA_DIR", raising=False)
    with pytest.raises(ConfigError, match="set data_dir"):
        TEval(TEvalConfig())
    (tmp_path / "plan_json_v2.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"lacks plan_str_v2\.json.*lovesnowbest/T-Eval"):
        TEval(TEvalConfig(data_dir=str(tmp_path), abilities=["plan"]))
    assert TEval(TEvalConfig(data_dir=str(tmp_path), abilities=["plan"], formats=["json"])).samples() == []
    with pytest.raises(ConfigError, match="lacks plan_json_v2_subset_zh.json"):
        TEval(TEvalConfig(data_dir=str(tmp_path), abilities=["plan"], formats=["json"], language="zh", subset=True))
    monkeypatch.setenv("TEVAL_DATA_DIR", str(FIXTURES))
    assert TEval(TEvalConfig(abilities=["review"])).data_dir == FIXTURES


def test_without_the_official_model_auto_falls_back_to_lexical_and_says_so(tmp_path):
    ev = TEval(TEvalConfig(data_dir=str(FIXTURES), abilities=["reason"], formats=["str"], embedding_model="/nonexistent/mpnet"))
    ctx, lines = context(tmp_path)
    outcomes = list(ev.evaluate(Scripted(), ctx))
    assert ev.similarity().name == "lexical" and "/nonexistent/mpnet is not available offline" in lines[0]
    assert outcomes[0].details["similarity"] == "lexical"
    assert "differ from T-Eval's" in json.loads((tmp_path / "m.summary.json").read_text())["similarity"]
    with pytest.raises(ConfigError, match="is not available offline"):
        TEval(TEvalConfig(data_dir=str(FIXTURES), similarity="embedding", embedding_model="/nonexistent/mpnet"))
    plugged = TEval(TEvalConfig(data_dir=str(FIXTURES), similarity="difflib:SequenceMatcher"))
    with pytest.raises(ConfigError, match="neither a similarity"):
        plugged.similarity()
    pair = TEval(TEvalConfig(data_dir=str(FIXTURES), similarity="math:dist"))  # any f(a, b) -> float plugs in
    assert pair.similarity().name == "math:dist"


def test_a_local_sentence_transformers_folder_is_used_as_sentence_transformers_would(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "tiny-st"
    folder.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "weather", "in", "paris", "send", "mail", "to", "bob"]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=32)
    transformers.BertModel(config).save_pretrained(folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 8, "pooling_mode_cls_token": False,
                                                                  "pooling_mode_mean_tokens": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    ev = TEval(TEvalConfig(data_dir=str(FIXTURES), similarity="embedding", embedding_model=str(folder)))
    sim = ev.similarity()
    assert sim.name == "embedding:tiny-st"
    texts = ["weather in paris", "send mail to bob"]
    matrix = sim.matrix(texts[:1], texts)
    # by hand: mean of the token states over the attention mask, cosine of the two
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        enc = tok(texts, padding=True, return_tensors="pt")
        states = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    pooled = (states * mask).sum(1) / mask.sum(1)
    cosine = torch.nn.functional.cosine_similarity(pooled[0], pooled[1], dim=0).item()
    assert matrix[0][0] == pytest.approx(1.0, abs=1e-5) and matrix[0][1] == pytest.approx(cosine, abs=1e-5)


def test_the_oracle_and_a_silent_model_through_prove_eval(tmp_path):
    plugins = Plugins().load(autoload=False)
    plugins.add(eval_teval, name="prove_plugins.eval.teval")
    assert plugins.registry.component("evaluators", "teval").summary.startswith("T-Eval")
    models = [{"name": "oracle", "client": "oracle"}, {"name": "no_call", "client": "no_call"}]
    experiment = eval_experiment(tmp_path, models=models, plots=False,
                                 benchmarks=[{"name": "teval", "options": {"data_dir": str(FIXTURES), "similarity": "lexical"}}])
    lines = []
    report = run_evaluation(experiment, plugins, echo=lines.append)
    out = tmp_path / "e" / "eval"
    table = report["benchmarks"]["teval"]["results"]
    assert set(report["benchmarks"]["teval"]["categories"]) == {c for c, _, _ in EXPECTED.values()} | {"all"}
    # every answer right, but T-Eval scores a JSON review sample 0 whatever it says (review: 4 of 5)
    assert table["all"]["oracle"]["n"] == len(EXPECTED) and table["all"]["oracle"]["successes"] == len(EXPECTED) - 1
    oracle = json.loads((out / "benchmarks" / "teval" / "oracle.summary.json").read_text())
    assert oracle["abilities"]["review"] == pytest.approx(4 / 5) and oracle["complete"]
    assert oracle["overall"] == pytest.approx((5 + 4 / 5) / 6, abs=1e-5)
    silent = aggregate(outcomes_of(out, "no_call", "teval"))
    assert silent == {k: v for k, v in json.loads((out / "benchmarks" / "teval" / "no_call.summary.json").read_text()).items()
                      if k in silent}
    assert table["all"]["no_call"]["successes"] == 0 and silent["abilities"]["instruct"] == 0.0
    assert any(line.startswith(f"  teval oracle: overall {100 * (5 + 4 / 5) / 6:.1f}") for line in lines)
    headline = report["benchmarks"]["teval"]["headline"]  # the report's own: T-Eval's averaging, not the pooled rate
    assert headline["oracle"]["overall"] == pytest.approx(oracle["overall"]) and headline["no_call"]["instruct"] == 0.0
    assert headline["no_call"]["overall"] == pytest.approx(silent["overall"])
    again = []
    run_evaluation(experiment, plugins, echo=again.append)
    assert any("0 tasks played" in line and f"{len(EXPECTED)} from an earlier run" in line for line in again)


def test_the_config_is_checked_when_the_benchmark_is_built(tmp_path):
    plugins = Plugins().load(autoload=False)
    plugins.add(eval_teval, name="prove_plugins.eval.teval")  # (nothing happens when it is bundled)
    bad = eval_experiment(tmp_path, models=[{"name": "o", "client": "oracle"}],
                          benchmarks=[{"name": "teval", "options": {"data_dir": str(tmp_path), "abilities": ["plan", "nope"]}}])
    with pytest.raises(ConfigError, match=r"\$\.eval\.benchmarks\[0\]\.options.*abilities"):
        run_evaluation(bad, plugins)
