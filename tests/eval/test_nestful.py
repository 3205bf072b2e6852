"""NESTFUL: its metrics (reimplemented from NESTFUL's scorer) on hand-written cases, and the
evaluator end to end on samples of the ``nestful-wrapper`` package and on data_v2-style samples
with executable functions (the win rate): the oracle scores 100%, no-call 0%, a sequence that
loses its last call the values worked out by hand below."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from prove_core.errors import ConfigError, RequestFailed
from prove_core.eval.core import EvalContext, Reference
from prove_core.model import ToolCall
from prove_core.reward.rollout import PolicyTurn
from prove_plugins.eval import nestful as nf
from prove_plugins.train.models.clients import NoCallPolicy, OracleConfig, OraclePolicy

PIN = nf.PACKAGE_PIN


@pytest.fixture(scope="module")
def package():
    """The nestful-wrapper package (installed with --no-deps when missing; skipped, saying why, when it cannot be)."""
    if importlib.util.find_spec("nestful") is None:
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", PIN],
                              capture_output=True, text=True, timeout=600)
        importlib.invalidate_caches()
        if proc.returncode != 0:
            pytest.skip(f"pip install --no-deps {PIN} failed: {proc.stderr.strip()[-300:]}")
    try:
        return nf.package_data_dir()
    except Exception as exc:  # the package is there but holds no data_v1
        pytest.skip(str(exc))


def _context(tmp_path, **extra):
    return EvalContext(registry=None, experiment=None, out_dir=tmp_path, model="m", **extra)


def _run(tmp_path, policy, **options):
    return list(nf.Nestful(nf.NestfulConfig(**options)).evaluate(policy, _context(tmp_path)))


def call(name, label=None, **arguments):
    out = {"name": name, "arguments": arguments}
    if label is not None:
        out["label"] = label
    return out


# a gold sequence in NESTFUL's form: C reads A's output; the var_result pseudo-call collects C's
GOLD = [call("A", "$var_1", x=1), call("B", "$var_2", y="two"), call("C", "$var_3", z="$var_1.out$"),
        call("var_result", total="$var_3$")]


# -- grounding and the call strings ----------------------------------------------------------------------


def test_grounding_replaces_labels_with_the_names_they_point_to():
    grounded = nf.ground([call("A", "$var_1", x=1), call("B", "var2", xs=["$var_1.out$", "k"], y="$var_1.out$"),
                          call("C", "$var_3", w="$var_9.out$", v="$var_1"), call("var_result", r="$var_3$")])
    assert grounded == [{"name": "A", "arguments": {"x": 1}},
                        {"name": "B", "arguments": {"xs": ["$A.out$", "k"], "y": "$A.out$"}},
                        # an unknown label and a reference without a field stay as written
                        {"name": "C", "arguments": {"w": "$var_9.out$", "v": "$var_1"}}]
    # label names do not matter, what they point to does; "parameters" is read like "arguments"
    renamed = [{"name": "A", "label": "$var_a", "parameters": {"x": 1}}, call("B", "$var_b", y="$var_a.out$", w="$a.out$")]
    assert nf.ground(renamed) == [{"name": "A", "arguments": {"x": 1}},
                                  {"name": "B", "arguments": {"y": "$A.out$", "w": "$a.out$"}}]  # only "$var..." resolves
    assert nf.ground([call("A", "var1", x=1), call("B", "var2", y="$var1.out$")]) == \
        nf.ground([call("A", "$var_7", x=1), call("B", "$var_8", y="$var_7.out$")])


def test_call_strings_sort_arguments_and_print_values_as_python_does():
    assert nf.call_string({"name": "f", "arguments": {"b": [1, "x"], "a": 2.0, "c": True, "d": None}}) == \
        "f(a = 2.0, b = [1, 'x'], c = True, d = None)"
    assert nf.call_string({"name": "g", "arguments": {}}) == "g()"
    # a reference that lost its closing "$" is closed; gold values are closed the same way
    assert nf.closed("$A.result") == "$A.result$" and nf.closed("$100-$200") == "$100-$200$" and nf.closed(5) == 5


# -- partial and full sequence accuracy ------------------------------------------------------------------


def _accuracy(gold, predicted):
    return nf.partial_sequence_accuracy(nf.ground(gold), nf.ground(predicted))


def test_partial_sequence_accuracy_on_hand_written_cases():
    exact = [call("A", "$var_1", x=1), call("B", "$var_2", y="two"), call("C", "$var_3", z="$var_1.out$")]
    assert _accuracy(GOLD, exact) == 1.0
    assert _accuracy(GOLD, []) == 0.0  # nothing predicted
    # one call missing: aligned by name, the gold call set against a blank
    assert _accuracy(GOLD, [exact[0], exact[2]]) == pytest.approx(2 / 3)
    # a call too many: past the first name mismatch NESTFUL's alignment sets the remaining gold calls
    # against blanks, then the remaining predicted ones, so [A, X, B, C] against [A, B, C] keeps only A: 1 of 6
    assert _accuracy(GOLD, [exact[0], call("X", "$var_9"), *exact[1:]]) == pytest.approx(1 / 6)
    # the right calls in the wrong order: compared position by position
    assert _accuracy(GOLD, [exact[1], exact[0], exact[2]]) == pytest.approx(1 / 3)
    # a reference to the wrong call: C reads B's output instead of A's
    assert _accuracy(GOLD, [exact[0], exact[1], call("C", "$var_3", z="$var_2.out$")]) == pytest.approx(2 / 3)
    # other label names, and a reference that lost its closing "$": still the same sequence
    relabeled = [call("A", "$var_x", x=1), call("B", "$var_y", y="two"), call("C", "$var_z", z="$var_x.out")]
    assert _accuracy(GOLD, relabeled) == 1.0
    # NESTFUL resolves only references that start with "$var": with labels named otherwise C's is kept as written
    relabeled = [call("A", "first", x=1), call("B", "second", y="two"), call("C", "third", z="$first.out$")]
    assert _accuracy(GOLD, relabeled) == pytest.approx(2 / 3)
    # some arguments right, one missing: the call is wrong as a whole
    assert _accuracy(GOLD, [call("A", "$var_1"), exact[1], exact[2]]) == pytest.approx(2 / 3)


def test_alignment_is_nestfuls():
    assert nf.align(["A()", "B()"], ["A()", "B()"]) == (["A()", "B()"], ["A()", "B()"])
    assert nf.align(["A()", "B()", "C()"], ["A()", "C()"]) == (["A()", "B()", "C()"], ["A()", "", "C()"])
    assert nf.align(["A()", "B()"], ["A()", "X()", "B()"]) == (["A()", "B()", "", ""], ["A()", "", "X()", "B()"])
    assert nf.align(["A()"], []) == (["A()"], [""])


# -- F1 of function names and parameters ----------------------------------------------------------------


def test_per_sample_scores_of_hand_written_predictions():
    exact = [call("A", "$var_1", x=1), call("B", "$var_2", y="two"), call("C", "$var_3", z="$var_1.out$")]
    perfect = nf.score_sample(GOLD, exact).metrics
    assert perfect == {"partial_sequence_accuracy": 1.0, "full_sequence_accuracy": 1.0, "f1_function_names": 1.0,
                       "f1_parameters": 1.0, "parse_error": 0.0, "predicted_calls": 3.0, "gold_calls": 3.0}
    # C's argument missing and B's wrong: names all right; parameters: 1 of 3 gold, 2 predicted
    partial = nf.score_sample(GOLD, [exact[0], call("B", "$var_2", y="three"), call("C", "$var_3")]).metrics
    assert partial["f1_function_names"] == 1.0 and partial["f1_parameters"] == pytest.approx(2 * 1 / (3 + 2))
    assert partial["partial_sequence_accuracy"] == pytest.approx(1 / 3) and partial["full_sequence_accuracy"] == 0.0
    # an extra function: names 3 of 3 gold, 4 predicted
    extra = nf.score_sample(GOLD, [*exact, call("D", "$var_4", w=0)]).metrics
    assert extra["f1_function_names"] == pytest.approx(6 / 7) and extra["f1_parameters"] == pytest.approx(6 / 7)
    assert extra["partial_sequence_accuracy"] == pytest.approx(3 / 4)  # same names up to the end: D against a blank
    # the wrong reference counts as a wrong parameter
    wrong_ref = nf.score_sample(GOLD, [exact[0], exact[1], call("C", "$var_3", z="$var_2.out$")]).metrics
    assert wrong_ref["f1_parameters"] == pytest.approx(2 * 2 / 6)
    unreadable = nf.score_sample(GOLD, None).metrics
    assert unreadable == {"partial_sequence_accuracy": 0.0, "full_sequence_accuracy": 0.0, "f1_function_names": 0.0,
                          "f1_parameters": 0.0, "parse_error": 1.0, "predicted_calls": 0.0, "gold_calls": 3.0}
    assert nf.score_sample(GOLD, []).metrics["parse_error"] == 0.0  # "[]" is an answer: nothing to call


def test_parameter_rows_are_keyed_by_function_name_the_last_call_counting():
    gold = nf.ground([call("A", "$var_1", x=1), call("A", "$var_2", x=2), call("B", "$var_3")])
    predicted = nf.ground([call("A", "$var_1", x=2), call("C", "$var_2", q=1)])
    assert nf.parameter_rows(gold, predicted) == ([["x = 2"], [], []], [["x = 2"], [], ["q = 1"]])
    assert nf.function_names(nf.ground([call("A"), {"name": "dummy", "arguments": {}}])) == ["A"]


def test_macro_f1_is_scikit_learns_over_the_gold_labels():
    # a: TP 2 -> P = R = F = 1; b: missed -> 0; c is in no gold row: ignored
    assert nf.macro_prf([["a", "b"], ["a"]], [["a"], ["a", "c"]]) == (0.5, 0.5, 0.5)
    # a: missed (precision undefined -> 0); b: TP 1, FP 1 -> P 1/2, R 1, F 2/3
    p, r, f = nf.macro_prf([["a"], ["b"]], [["b"], ["b"]])
    assert (p, r, f) == (pytest.approx(0.25), pytest.approx(0.5), pytest.approx(1 / 3))
    assert nf.macro_prf([[]], [["a"]]) == (0.0, 0.0, 0.0)
    assert nf.set_f1([], []) == 1.0 and nf.set_f1(["a"], []) == 0.0 and nf.set_f1(["a", "b"], ["a"]) == pytest.approx(2 / 3)


def test_official_scores_pool_the_labels_of_a_category():
    records = []
    for task_id, category, predicted in (("t1", "x", GOLD[:3]), ("t2", "x", GOLD[:1]), ("t3", "y", None)):
        scored = nf.score_sample(GOLD, predicted)
        records.append({"task_id": task_id, "category": category, "metrics": scored.metrics,
                        "details": {"labels": scored.labels}})
    scores = nf.official_scores(records)
    assert set(scores) == {"all", "x", "y"} and scores["all"]["n"] == 3
    # names over t1, t2: A found twice, B and C once of twice -> F1s 1, 2/3, 2/3
    assert scores["x"]["f1_function_names"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    assert scores["x"]["partial_sequence_accuracy"] == pytest.approx((1 + 1 / 3) / 2)
    assert scores["y"]["f1_function_names"] == 0.0 and scores["y"]["parse_error"] == 1.0
    assert "win_rate" not in scores["all"]


# -- reading answers -------------------------------------------------------------------------------------


def test_answers_are_read_in_the_forms_nestfuls_parsers_accept():
    seq = [call("A", "$var_1", x=1)]
    text = json.dumps(seq)
    for answer in (text, f"<|tool_call|>{text}", f"```json\n{text}\n```", json.dumps({"tool_calls": seq}),
                   json.dumps(seq[0]), f"<tool_call>{json.dumps(seq[0])}</tool_call> <tool_call>oops</tool_call>"):
        assert nf.parse_response(answer) == (seq, None), answer
    assert nf.parse_response(json.dumps(seq[0]) + ", " + json.dumps(seq[0]))[0] == seq * 2
    assert nf.parse_response("[]") == ([], None)
    for bad in ("I'm sorry, I can't help with that.", "", "[1, 2]", '[{"name": "A", "arguments": [1]}]',
                '[{"arguments": {}}]', '[{"name": "A", "label": 3}]', "<tool_call>nope</tool_call>"):
        calls, why = nf.parse_response(bad)
        assert calls is None and why, bad


def test_structured_calls_take_their_labels_from_ids_or_positions():
    turn = PolicyTurn(attempts=[ToolCall(id="call_7", name="A", arguments={"x": 1}),
                                ToolCall(id="var2", name="B", arguments={"y": "$var_1.out$"})])
    calls, source, error = nf.prediction_of(turn)
    assert source == "tool_calls" and error is None
    assert calls == [call("A", "$var_1", x=1), call("B", "var2", y="$var_1.out$")]
    # text wins when it holds a sequence (it keeps the model's labels)
    text_turn = PolicyTurn(content=json.dumps([call("A", "v", x=1)]), attempts=turn.attempts)
    assert nf.prediction_of(text_turn)[1] == "text"


def test_tools_are_offered_as_function_calling_tools_with_their_outputs_described():
    tools = [{"name": "add", "description": "adds", "parameters": {"arg_0": {"type": "int or float", "description": "a"},
                                                                  "arg_1": {"type": "list of str", "description": "b"}},
              "output_parameters": {"result": {"type": "float"}}},
             {"name": "Buses.FindBus", "description": "find",
              "parameters": {"origin": {"description": "o", "required": True},
                             "fare": {"required": False, "allowed_values": ["E", "F"], "default_value": "E"}}}]
    add, bus = (t["function"] for t in nf.openai_tools(tools))
    assert add["parameters"]["properties"]["arg_0"] == {"type": "number", "description": "a (type: int or float)"}
    assert add["parameters"]["properties"]["arg_1"]["type"] == "array" and add["parameters"]["required"] == ["arg_0", "arg_1"]
    assert '"result"' in add["description"]
    assert bus["parameters"]["required"] == ["origin"]
    assert bus["parameters"]["properties"]["fare"] == {"description": "", "enum": ["E", "F"], "default": "E"}


class Recorder:
    name = "recorder"

    def __init__(self, reply="[]"):
        self.seen, self.reply = [], reply

    def respond(self, messages, tools):
        self.seen.append((messages, tools))
        return PolicyTurn(content=self.reply)


def _v2_sample(tmp_path, records):
    path = tmp_path / "nestful_data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))  # no final newline: every record is still read
    return path


MATH_TOOLS = [{"name": n, "description": d, "parameters": {"arg_0": {"type": "int or float"}, "arg_1": {"type": "int or float"}},
               "output_parameters": {"result": {"type": "int or float"}}}
              for n, d in (("add", "adds two numbers"), ("multiply", "multiplies"), ("divide", "divides"))]
WORD_TOOLS = [{"name": "split_words", "description": "words of a text", "parameters": {"text": {"type": "string"}},
               "output_parameters": {"output_0": {"type": "array"}}},
              {"name": "pair_up", "description": "(first, last) of a list", "parameters": {"items": {"type": "array"}},
               "output_parameters": {"output_0": {"type": "array"}}},
              {"name": "nap", "description": "sleeps", "parameters": {"seconds": {"type": "number"}},
               "output_parameters": {"output_0": {"type": "number"}}}]
V2 = [
    {"sample_id": "m1", "input": "What is (2 + 3) * 4 / 8?", "tools": MATH_TOOLS, "gold_answer": 2.5,
     "output": [call("add", "$var_1", arg_0=2, arg_1=3), call("multiply", "$var_2", arg_0="$var_1.result$", arg_1=4),
                call("divide", "$var_3", arg_0="$var_2.result$", arg_1=8)]},
    {"sample_id": "m2", "input": "Divide 1 by 3, then add 0.", "tools": json.dumps(MATH_TOOLS), "gold_answer": 0.333,
     "output": json.dumps([call("divide", "$var_1", arg_0=1, arg_1=3), call("add", "$var_2", arg_0="$var_1.result$", arg_1=0)])},
    {"sample_id": "w1", "input": "First and last word of 'a b c'", "tools": WORD_TOOLS, "gold_answer": ["a", "c"],
     "output": [call("split_words", "$var1", text="a b c"), call("pair_up", "$var2", items="$var1.output_0$")]},
]


def _functions(tmp_path):
    folder = tmp_path / "executable_functions"
    folder.mkdir()
    (folder / "basic_functions.py").write_text(
        "def add(a, b):\n    return a + b\n\ndef multiply(a, b):\n    return a * b\n\ndef divide(a, b):\n    return a / b\n")
    (folder / "py_code_file_1.py").write_text(
        "import time\n\ndef split_words(text):\n    print('noise on stdout')\n    return text.split()\n\n"
        "def pair_up(items):\n    return (items[0], items[-1])\n\ndef nap(seconds):\n    time.sleep(seconds)\n    return 0\n")
    (folder / "func_file_map.json").write_text(json.dumps({k: "py_code_file_1.py" for k in ("split_words", "pair_up", "nap")}))
    return folder


def test_the_prompt_is_nestfuls_instruction_with_tools_and_examples(tmp_path):
    path = _v2_sample(tmp_path, V2[:1])
    recorder = Recorder()
    _run(tmp_path, recorder, data_path=str(path))
    (messages, tools), = recorder.seen
    system, user = messages
    assert tools == [] and user == {"role": "user", "content": V2[0]["input"]}
    assert system["content"].startswith(nf.PREAMBLE + nf.TOOLS_INTRO + json.dumps(MATH_TOOLS) + "\nDO NOT try")
    assert "#Example-3\nInput: Given a string" in system["content"] and "#Example-4" not in system["content"]
    recorder = Recorder()
    _run(tmp_path, recorder, data_path=str(path), protocol="tools", icl_examples=1)
    (messages, tools), = recorder.seen
    assert [t["function"]["name"] for t in tools] == ["add", "multiply", "divide"]
    assert json.dumps(MATH_TOOLS) not in messages[0]["content"] and "#Example-2" not in messages[0]["content"]
    assert messages[0]["content"] == nf.PREAMBLE + "\n" + nf.FORMAT_INSTRUCTION + nf.icl_text(nf.ICL_EXAMPLES[:1]) + "\n"


# -- data_v2 samples and the win rate --------------------------------------------------------------------


class Replace(OraclePolicy):
    """Plays a fixed sequence per sample id instead of the gold one (the rest: the oracle)."""

    def __init__(self, answers):
        super().__init__(OracleConfig())
        self.answers, self.index = answers, 0

    def respond(self, messages, tools):
        query = messages[-1]["content"]
        for sample in V2:
            if sample["input"] == query and sample["sample_id"] in self.answers:
                return PolicyTurn(content=json.dumps(self.answers[sample["sample_id"]]))
        return super().respond(messages, tools)


def test_the_win_rate_executes_the_predicted_sequence(tmp_path):
    path, functions = _v2_sample(tmp_path, V2), _functions(tmp_path)
    for protocol in nf.PROTOCOLS:
        oracle = _run(tmp_path, OraclePolicy(OracleConfig()), data_path=str(path), functions_dir=str(functions),
                      protocol=protocol)
        assert [o.task_id for o in oracle] == ["m1", "m2", "w1"] and {o.category for o in oracle} == {"all"}
        assert all(o.success and o.metrics["win_rate"] == 1.0 for o in oracle), [o.details for o in oracle]
        assert not any(o.metrics["alternate_trajectory"] for o in oracle)
        assert oracle[2].details["execution"]["answer"] == "('a', 'c')"  # a tuple compared as a list
    answers = {
        # another way to the same answer: a win, but no sequence match
        "m1": [call("multiply", "$var_1", arg_0=2, arg_1=4), call("multiply", "$var_2", arg_0=3, arg_1=4),
               call("add", "$var_3", arg_0="$var_1.result$", arg_1="$var_2.result$"),
               call("divide", "$var_4", arg_0="$var_3.result$", arg_1=8)],
        # the right calls, the wrong number: the sequence half right, the answer wrong
        "m2": [call("divide", "$var_1", arg_0=1, arg_1=4), call("add", "$var_2", arg_0="$var_1.result$", arg_1=0)],
        # a reference to an output that does not exist: the sequence fails to run
        "w1": [call("split_words", "$var1", text="a b c"), call("pair_up", "$var2", items="$var1.words$")],
    }
    played = {o.task_id: o for o in _run(tmp_path, Replace(answers), data_path=str(path), functions_dir=str(functions))}
    assert played["m1"].metrics["win_rate"] == 1.0 and played["m1"].metrics["full_sequence_accuracy"] == 0.0
    assert played["m1"].metrics["alternate_trajectory"] == 1.0 and played["m2"].metrics["alternate_trajectory"] == 0.0
    official = json.loads((tmp_path / "m.official.json").read_text())["all"]
    assert official["win_rate"] == pytest.approx(1 / 3) and official["alternate_trajectory"] == pytest.approx(1 / 3)
    assert played["m1"].metrics["partial_sequence_accuracy"] == 0.0  # aligned by name: no call string equal
    assert played["m2"].metrics["win_rate"] == 0.0 and played["m2"].details["execution"]["answer"] == "0.25"
    assert played["m2"].metrics["partial_sequence_accuracy"] == 0.5
    assert played["w1"].metrics["win_rate"] == 0.0 and "KeyError" in played["w1"].details["execution"]["error"]
    # 0.333 has three decimals: 1/3 rounded to three is a win (m2's oracle above); without labels nothing runs
    assert nf.win([call("add", arg_0=1, arg_1=2)], MATH_TOOLS, 3, functions)[0] is False
    assert nf.win([call("add", "$var_1", arg_0=1, arg_1=2)], MATH_TOOLS, 3, functions)[0] is True
    assert nf.win([], MATH_TOOLS, 3, functions) == (False, {"error": "nothing predicted"})


def test_a_sequence_that_runs_too_long_does_not_win(tmp_path):
    won, verdict = nf.win([call("nap", "$var1", seconds=30)], WORD_TOOLS, 0, _functions(tmp_path), timeout=1)
    assert won is False and "TimeoutError" in verdict["error"]


def test_without_executable_functions_there_is_no_win_rate(tmp_path):
    outcomes = _run(tmp_path, OraclePolicy(OracleConfig()), data_path=str(_v2_sample(tmp_path, V2)))
    assert all(o.success and "win_rate" not in o.metrics for o in outcomes)


# -- the package's samples --------------------------------------------------------------------------------


def test_oracle_scores_100_and_no_call_0_on_the_packages_samples(package, tmp_path):
    lines = []
    for protocol in nf.PROTOCOLS:
        oracle = _run(tmp_path, OraclePolicy(OracleConfig()), limit=3, protocol=protocol)
        assert [o.task_id for o in oracle] == [f"{s}_{i}" for s in nf.SPLITS for i in range(3)]
        assert all(o.success and o.score == 1.0 for o in oracle), [o.details["aligned"] for o in oracle if not o.success]
        assert all(o.metrics["f1_parameters"] == 1.0 and o.details["protocol"] == protocol for o in oracle)
    nothing = list(nf.Nestful(nf.NestfulConfig(limit=3)).evaluate(NoCallPolicy(), _context(tmp_path, echo=lines.append)))
    assert len(nothing) == 9 and not any(o.success for o in nothing)
    assert all(o.score == 0.0 and o.metrics["f1_function_names"] == 0.0 and o.metrics["parse_error"] == 1.0 for o in nothing)
    official = json.loads((tmp_path / "m.official.json").read_text())
    assert official["all"]["f1_function_names"] == 0.0 and official["all"]["n"] == 9 and set(official) == {"all", *nf.SPLITS}
    assert lines and "F1 names 0.000" in lines[-1]


class DropLast(OraclePolicy):
    """The oracle without the last real call of each gold sequence."""

    def begin(self, reference):
        gold = json.loads(reference.turns[0][0].content)
        calls = [c for c in gold if c["name"] != "var_result"][:-1]
        super().begin(Reference(turns=[[PolicyTurn(content=json.dumps(calls))]]))


def test_a_sequence_without_its_last_call_scores_what_nestful_says(package, tmp_path):
    # glaive_0: route(3 args), lyrics(2), pace(2); glaive_1: news(1), sales(3), joke(0), sms(2);
    # glaive_2: tip(2), invoice(4), encrypt(2) — each loses its last call
    played = _run(tmp_path, DropLast(OracleConfig()), splits=["glaive"], limit=3)
    metrics = [o.metrics for o in played]
    assert [m["gold_calls"] for m in metrics] == [3, 4, 3] and not any(o.success for o in played)
    assert [o.score for o in played] == pytest.approx([2 / 3, 3 / 4, 2 / 3])
    assert [m["f1_function_names"] for m in metrics] == pytest.approx([2 * 2 / 5, 2 * 3 / 7, 2 * 2 / 5])
    assert [m["f1_parameters"] for m in metrics] == pytest.approx([2 * 5 / 12, 2 * 4 / 10, 2 * 6 / 14])
    official = json.loads((tmp_path / "m.official.json").read_text())["glaive"]
    # 10 distinct gold functions, 3 never predicted; 21 distinct gold "arg = value", 6 of them lost
    assert official["f1_function_names"] == pytest.approx(7 / 10)
    assert official["precision_function_names"] == official["recall_function_names"] == pytest.approx(7 / 10)
    assert official["f1_parameters"] == pytest.approx(15 / 21)
    assert official["partial_sequence_accuracy"] == pytest.approx((2 / 3 + 3 / 4 + 2 / 3) / 3)


class Flaky:
    name = "flaky"

    def __init__(self):
        self.calls = 0

    def respond(self, messages, tools):
        self.calls += 1
        if self.calls == 2:
            raise RequestFailed("endpoint http://x failed: HTTP 400: context length exceeded", status=400)
        return PolicyTurn(content="[]")


def test_a_failed_request_fails_its_sample_and_the_run_goes_on(package, tmp_path):
    played = _run(tmp_path, Flaky(), splits=["sgd"], limit=3)
    assert len(played) == 3 and not any(o.success for o in played)
    assert "HTTP 400" in played[1].details["request_failed"] and "request_failed" not in played[0].details
    assert played[1].metrics["partial_sequence_accuracy"] == 0.0 and played[1].metrics["gold_calls"] > 0
    assert played[1].metrics["parse_error"] == 0.0  # no answer came: not a parsing error


def test_resume_skips_scored_samples_and_options_select_them(package, tmp_path):
    done = {"glaive_0", "glaive_2"}
    context = _context(tmp_path, wanted=lambda task_id: task_id not in done)
    played = list(nf.Nestful(nf.NestfulConfig(splits=["glaive"], limit=3)).evaluate(OraclePolicy(OracleConfig()), context))
    assert [o.task_id for o in played] == ["glaive_1"]
    chosen = nf.Nestful(nf.NestfulConfig(ids=["sgd_4", "executable_1"], max_tools=5)).samples()
    assert [s.task_id for s in chosen] == ["executable_1", "sgd_4"] and all(len(s.tools) == 5 for s in chosen)
    assert {c["name"] for c in chosen[0].gold} - {"var_result"} <= {t["name"] for t in chosen[0].tools}


def test_prove_eval_runs_it_resumes_and_keeps_nestfuls_corpus_scores(package, tmp_path):
    from prove_core.eval.core import run_evaluation
    from prove_core.plugin.manager import BUNDLED, Plugins
    from tests.eval.conftest import eval_experiment

    plugins = Plugins().load(bundled=(*BUNDLED, "prove_plugins.eval.nestful"), autoload=False)
    models = [{"name": "oracle", "client": "oracle"}, {"name": "no_call", "client": "no_call"}]
    experiment = eval_experiment(tmp_path, models=models,
                                 benchmarks=[{"name": "nestful", "options": {"limit": 2, "protocol": "tools"}}])
    lines = []
    report = run_evaluation(experiment, plugins, echo=lines.append)
    cells = report["benchmarks"]["nestful"]["results"]
    assert set(cells) == {"all", *nf.SPLITS}
    assert (cells["all"]["oracle"]["rate"], cells["all"]["oracle"]["n"], cells["all"]["no_call"]["rate"]) == (1.0, 6, 0.0)
    assert cells["glaive"]["oracle"]["metrics"]["f1_parameters"] == 1.0
    assert cells["all"]["no_call"]["metrics"]["partial_sequence_accuracy"] == 0.0
    folder = tmp_path / "e" / "eval" / "benchmarks" / "nestful"
    again = run_evaluation(experiment, plugins, echo=lines.append)  # nothing left to play: the scores cover the first run's
    assert again["benchmarks"]["nestful"]["results"]["all"]["oracle"]["n"] == 6
    official = json.loads((folder / "oracle.official.json").read_text())
    assert official["all"]["n"] == 6 and official["all"]["f1_function_names"] == 1.0
    assert json.loads((folder / "no_call.official.json").read_text())["all"]["f1_parameters"] == 0.0
    assert any("0 tasks played" in line for line in lines)


def test_the_evaluator_registers_and_checks_its_options():
    from prove_core.plugin.manager import BUNDLED, Plugins

    plugins = Plugins().load(bundled=(*BUNDLED, "prove_plugins.eval.nestful"), autoload=False)
    evaluator = plugins.registry.build("evaluators", "nestful", {"protocol": "tools", "limit": 2})
    assert isinstance(evaluator, nf.Nestful) and evaluator.config.protocol == "tools"
    for bad in ({"protocol": "xml"}, {"splits": ["glaive", "toolbench"]}, {"limit": 0}):
        with pytest.raises(ConfigError):
            plugins.registry.build("evaluators", "nestful", bad)
    with pytest.raises(Exception, match="only 3 examples"):
        nf.Nestful(nf.NestfulConfig(icl_examples=4)).examples()


def test_a_missing_data_file_is_reported(tmp_path):
    with pytest.raises(Exception, match="is not a file"):
        nf.file_samples(tmp_path / "nope.jsonl")
    (tmp_path / "v1.json").write_text(json.dumps([{"input": "q", "output": []}]))
    with pytest.raises(Exception, match="has no tools"):
        nf.file_samples(tmp_path / "v1.json")


def test_icl_examples_come_from_a_file_when_given(tmp_path):
    path = tmp_path / "icl.json"
    path.write_text(json.dumps([{"input": "q1", "output": [call("f", "$var_1")]}, {"input": "q2", "output": []}]))
    examples = nf.Nestful(nf.NestfulConfig(icl_path=str(path), icl_examples=2)).examples()
    assert nf.icl_text(examples) == ('\n#Example-1\nInput: q1\nOutput: [{"name": "f", "arguments": {}, "label": "$var_1"}]\n'
                                     "\n#Example-2\nInput: q2\nOutput: []\n")
    assert Path(nf.__file__).as_posix().endswith("eval/nestful.py")
