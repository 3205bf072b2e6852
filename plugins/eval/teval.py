"""The ``teval`` evaluator: T-Eval (Chen et al., 2024, arXiv:2312.14033), which scores tool use
step by step — six abilities (instruct, plan, reason, retrieve, understand, review), each asked
for in a JSON and a string response format — from T-Eval's own data files.

**Data.** T-Eval's files are not packaged: ``data_dir`` names a folder with them, as T-Eval's
README distributes them (its Google Drive archive, or the Hugging Face dataset
``lovesnowbest/T-Eval``). Each file maps a sample id to ``origin_prompt`` (the chat messages),
``ground_truth`` and ``meta``/``meta_data``/``template``. The English v2 files are
``instruct_v2.json`` (JSON and string samples mixed), ``plan_json_v2.json``, ``plan_str_v2.json``,
``reason_str_v2.json``, ``retrieve_str_v2.json``, ``understand_str_v2.json``,
``reason_retrieve_understand_json_v2.json`` (reason, retrieve and understand in JSON, one answer
scored three ways) and ``review_str_v2.json``; ``language = "zh"`` reads the ``*_v2_zh.json``
files and ``subset = true`` T-Eval's smaller ``*_v2_subset.json`` dev files.

**Inference** follows T-Eval's ``test.py``: the sample's ``origin_prompt`` messages are sent as
they are (T-Eval's ``function`` role, a tool's response, becomes ``function_role``, ``user`` by
default, as T-Eval's meta templates map it), with no tools offered — T-Eval puts the tool
descriptions in the prompt and the model answers in text. The answer is cut at a chat template's
stop markers, stripped and freed of a leading code fence (T-Eval's ``split_special_tokens``).
T-Eval decodes greedily with at most 512 new tokens: give the model client the same.

**Scoring** reproduces T-Eval's evaluators (``teval/evaluators``) sample by sample:

- *instruct*: the answer parsed in the sample's format (JSON keys or the string template's
  markers): ``format`` is 1 when it parses; ``args_em`` = (action name equal + arguments equal to
  the ground truth's) / (number of ground-truth arguments + 1). ``score`` = (format + args_em) / 2,
  whose mean per format is T-Eval's (format metric + args EM metric) / 2.
- *plan*: the predicted plan (a JSON list of actions, or in the string format one action per line,
  named by the first API of the sample's ``API_list`` the line mentions) against the ground truth:
  similarity of every pair of steps = 0.75·sim(names) + 0.25·sim(args), a maximum-weight
  bipartite matching over the pairs above 0.8, then the longest order-preserving chain of matched
  steps gives precision, recall and ``score`` = F1 (T-Eval's ``bertscore_match``, with its quirks:
  a trailing ``FinishAction`` is dropped, and a non-empty plan counts at least one correct step).
- *reason*: ``score`` = max(0, cosine similarity of the predicted and the true thought).
- *retrieve*: JSON: the tool name equals the true one; string: the true name occurs in the answer
  and every ``a.b``-shaped name and ``FinishAction`` in it is the true name.
- *understand*: JSON: the share of true arguments whose value (as text) the answer gives, over
  (their number + 1e-5); 1 when both have none, 0 when only the answer has some; string: the answer,
  stripped of quotes, equals the true arguments' text (``understand_args = "exact"``, T-Eval's
  current evaluator; ``"similarity"`` is its earlier embedding similarity of the two texts).
- *review*: string: the first character after the answer's first ``:`` is the true choice (A–E);
  JSON: T-Eval compares the parsed ``{"review": is_finished}`` object with the true answer, which
  never equal, so a JSON sample scores 0 (``parse_rate`` 1 when it parses); whether
  ``is_finished`` is right is kept in ``metrics["is_finished_right"]``, outside T-Eval's score.

**Similarity.** T-Eval embeds texts with sentence-transformers' ``all-mpnet-base-v2`` (English)
and ``thenlper/gte-large-zh`` (Chinese) and takes cosine similarities. ``similarity = "auto"``
uses that model when it is available offline (``embedding_model``: a local folder, else the
official name in the local Hugging Face cache) and otherwise falls back to ``lexical``: cosine
similarity of word counts — scores then differ from T-Eval's and every outcome says which was
used. ``"embedding"`` insists on the model; ``"module:attr"`` plugs in any similarity.

**Outcomes.** One per sample and ability, ``category`` = ``<ability>_<format>``, ``score`` the
sample's T-Eval metric, ``metrics`` its parts. ``success`` is the metric's own pass: a parsed,
exactly right answer (instruct, retrieve, understand, review), a plan with F1 = 1, a thought
with similarity ≥ ``similarity_pass``. A failed request scores 0 with the error in ``details``.
**T-Eval's overall score** is ``aggregate``: the mean per category, each ability the mean of its
JSON and string categories (review: the mean over every sample of its file, both formats, as
T-Eval's ``ReviewEvaluator`` averages), the overall the mean of the six abilities —
written per model to the benchmark's folder (``<model>.summary.json``/``.md``) after a run.
"""

from __future__ import annotations

import ast
import importlib
import json
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import attrs
import structlog

from prove_core import hookimpl
from prove_core.errors import ConfigError, RequestFailed
from prove_core.eval.core import EvalContext, Outcome, Reference, begin_episode
from prove_core.model import JsonlWriter, read_jsonl
from prove_core.reward.rollout import Policy, PolicyTurn

log = structlog.get_logger()

ABILITIES = ("instruct", "plan", "reason", "retrieve", "understand", "review")
FORMATS = ("json", "str")
LANGUAGES = ("en", "zh")
DATA_URL = "https://huggingface.co/datasets/lovesnowbest/T-Eval (or the Google Drive archive T-Eval's README links)"
# T-Eval's sentence-embedding models (test.py: the _zh data is scored with the Chinese one)
OFFICIAL_MODELS = {"en": "sentence-transformers/all-mpnet-base-v2", "zh": "thenlper/gte-large-zh"}
# PlanningEvaluator's defaults
PLAN_NAME_WEIGHT, PLAN_ARGS_WEIGHT, PLAN_MATCH_THRESHOLD = 0.75, 0.25, 0.8
FINISH = "FinishAction"
# test.py's split_special_tokens: a chat template's stop markers, the answer ends at the first
STOP_MARKERS = ("<eoa>", "<TOKENS_UNUSED_1>", "<|im_end|>", "\nuser", "\nassistant", "\nUSER", "[INST]", "<|user|>")
EXACT_TOLERANCE = 1e-4  # understand's exact metric divides by (n + 1e-5): a perfect answer scores 0.99999


@attrs.frozen
class DataFile:
    stem: str  # the file's name before _v2
    abilities: tuple[str, ...]
    fmt: str | None  # None: each sample says (meta_data.response_format)


DATA_FILES = (
    DataFile("instruct", ("instruct",), None),
    DataFile("plan_json", ("plan",), "json"),
    DataFile("plan_str", ("plan",), "str"),
    DataFile("reason_str", ("reason",), "str"),
    DataFile("retrieve_str", ("retrieve",), "str"),
    DataFile("understand_str", ("understand",), "str"),
    DataFile("reason_retrieve_understand_json", ("reason", "retrieve", "understand"), "json"),
    DataFile("review_str", ("review",), None),
)

# T-Eval's convert_results: each ability is the mean of these categories, the overall the mean of
# the abilities. Review has one file (review_str_v2.json) holding both formats; T-Eval's
# ReviewEvaluator averages over every sample of it (POOLED: a mean over samples, not categories).
OFFICIAL_COMPONENTS = {
    "instruct": ("instruct_json", "instruct_str"),
    "plan": ("plan_json", "plan_str"),
    "reason": ("reason_json", "reason_str"),
    "retrieve": ("retrieve_json", "retrieve_str"),
    "understand": ("understand_json", "understand_str"),
    "review": ("review_str", "review_json"),
}
POOLED = frozenset({"review"})


# -- loose parsing (T-Eval's format_load and parse_string) ------------------------------------------------


def split_special_tokens(text: str) -> str:
    """The answer as T-Eval stores it: cut at the first stop marker, stripped, a leading
    ```json fence and surrounding backticks removed."""
    for marker in STOP_MARKERS:
        text = text.split(marker)[0]
    text = text.strip()
    if text.startswith("```json"):
        text = text[len("```json"):]
    return text.strip("`").strip()


def load_loose(raw: Any, start: str = "", end: str = "") -> Any:
    """A Python or JSON literal read from ``raw`` as T-Eval's ``format_load`` reads it: after a
    ```json fence if there is one, from the first ``start`` to the last ``end``, tried as a Python
    literal, then JSON, then JSON with single quotes made double. Raises ``ValueError``."""
    if not isinstance(raw, str):
        return raw
    if "```json" in raw:
        raw = raw[raw.find("```json") + len("```json"):].strip("`")
    if start:
        raw = raw[raw.find(start):]  # (not found: T-Eval keeps the last character)
    if end:
        raw = raw[:raw.rfind(end) + len(end)]
    try:
        return ast.literal_eval(raw)
    except Exception:  # noqa: BLE001 - anything literal_eval raises means "not a literal"
        pass
    for text in (raw, raw.replace("'", '"')):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            pass
    raise ValueError("cannot parse the answer")


def parse_template(text: str, parts: Sequence[str], fields: Sequence[str]) -> dict[str, str] | None:
    """T-Eval's ``parse_string``: ``parts[0] {fields[0]} parts[1] ...`` matched against ``text``,
    each field any text (newlines included). The literal parts are regular expressions there too."""
    pattern = "".join(part + "(.*)" for part in parts[: len(fields)]) + "".join(parts[len(fields):])
    try:
        found = re.findall(pattern, text, re.S)
    except re.error:
        return None
    if not found:
        return None
    values = found[0] if isinstance(found[0], tuple) else (found[0],)
    return dict(zip(fields, values))


def response_format(datum: Mapping[str, Any], default: str = "json") -> str:
    """``json`` or ``str`` (T-Eval writes ``str`` and, for instruct, ``string``)."""
    meta = datum.get("meta_data") or {}
    value = meta.get("response_format", default) if isinstance(meta, Mapping) else default
    return "json" if value == "json" else "str"


# -- similarity ---------------------------------------------------------------------------------------


class Similarity(Protocol):
    """Cosine-like similarity of texts: ``matrix(a, b)[i][j]`` compares ``a[i]`` with ``b[j]``."""

    name: str

    def matrix(self, left: Sequence[str], right: Sequence[str]) -> list[list[float]]: ...


_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]")


def lexical_tokens(text: str) -> list[str]:
    """Words of ``text`` for the lexical fallback: camelCase and snake_case split, digits runs,
    any other letter (a Chinese character) alone; lower-cased."""
    return [t.lower() for t in _TOKEN.findall(text)]


class LexicalSimilarity:
    """The offline fallback: cosine similarity of word counts (``lexical_tokens``). Identical
    texts score 1, texts without a shared word 0. Not T-Eval's metric: scores differ."""

    name = "lexical"

    def score(self, a: str, b: str) -> float:
        if a == b:
            return 1.0
        ca, cb = Counter(lexical_tokens(a)), Counter(lexical_tokens(b))
        if not ca or not cb:
            return 1.0 if a.strip() == b.strip() else 0.0
        dot = sum(n * cb[t] for t, n in ca.items())
        norm = math.sqrt(sum(n * n for n in ca.values())) * math.sqrt(sum(n * n for n in cb.values()))
        return min(1.0, dot / norm)

    def matrix(self, left: Sequence[str], right: Sequence[str]) -> list[list[float]]:
        return [[self.score(a, b) for b in right] for a in left]


class PairSimilarity:
    """A plugged-in ``f(a, b) -> float`` as a ``Similarity``."""

    def __init__(self, fn: Callable[[str, str], float], name: str) -> None:
        self.fn, self.name = fn, name

    def matrix(self, left: Sequence[str], right: Sequence[str]) -> list[list[float]]:
        return [[float(self.fn(a, b)) for b in right] for a in left]


def resolve_model(model: str) -> Path:
    """The local folder of a sentence-embedding model: ``model`` itself when it is a folder, else
    a Hugging Face id looked up in the local cache only (nothing is downloaded)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if path.is_absolute() or model.startswith((".", "~")):
        raise FileNotFoundError(f"no model folder {model}")
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model, local_files_only=True))


class EmbeddingSimilarity:
    """Cosine similarity of sentence embeddings, as T-Eval computes it with sentence-transformers
    (``SentenceTransformer(model).encode`` and ``util.cos_sim``). Uses sentence-transformers when
    it is installed; otherwise runs the folder's transformer with the pooling its sentence-
    transformers configuration names (``modules.json``, ``1_Pooling/config.json``), which is
    what sentence-transformers computes."""

    def __init__(self, folder: Path, *, device: str = "cpu", label: str = "", batch_size: int = 32) -> None:
        self.folder, self.device, self.batch_size = folder, device, batch_size
        self.name = f"embedding:{label or folder.name}"
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            self._encode = self._transformers_encoder()
        else:
            model = SentenceTransformer(str(folder), device=device)
            self._encode = lambda texts: model.encode(list(texts), convert_to_tensor=True, normalize_embeddings=True,
                                                      batch_size=batch_size, show_progress_bar=False).cpu()

    def _transformers_encoder(self) -> Callable[[Sequence[str]], Any]:
        import torch
        from transformers import AutoModel, AutoTokenizer

        folder = self.folder
        settings = _read_json(folder / "sentence_bert_config.json") or {}
        pooling = {"pooling_mode_mean_tokens": True}
        for module in _read_json(folder / "modules.json") or []:
            if str(module.get("type", "")).endswith("Pooling"):
                pooling = _read_json(folder / module.get("path", "1_Pooling") / "config.json") or pooling
        modes = [m for m in ("cls_token", "max_tokens", "mean_tokens") if pooling.get(f"pooling_mode_{m}")]
        unsupported = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v
                       and k.removeprefix("pooling_mode_") not in ("cls_token", "max_tokens", "mean_tokens")]
        if unsupported or not modes:
            raise ValueError(f"pooling {unsupported or pooling} needs sentence-transformers installed")
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModel.from_pretrained(folder, local_files_only=True).to(self.device).eval()
        max_length = int(settings.get("max_seq_length") or min(getattr(tokenizer, "model_max_length", 512), 512))
        lower = bool(settings.get("do_lower_case"))

        def encode(texts: Sequence[str]) -> Any:
            out = []
            for i in range(0, len(texts), self.batch_size):
                batch = [t.lower() if lower else t for t in texts[i:i + self.batch_size]]
                enc = tokenizer(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
                enc = {k: v.to(self.device) for k, v in enc.items()}
                with torch.no_grad():
                    hidden = model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                parts = []
                for mode in modes:
                    if mode == "cls_token":
                        parts.append(hidden[:, 0])
                    elif mode == "max_tokens":
                        parts.append(hidden.masked_fill(mask == 0, -1e9).max(dim=1).values)
                    else:
                        parts.append((hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9))
                out.append(torch.nn.functional.normalize(torch.cat(parts, dim=-1), dim=-1).cpu())
            return torch.cat(out) if out else torch.zeros((0, 1))

        return encode

    def _vectors(self, texts: Sequence[str]) -> list[Any]:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if missing:
                if len(self._cache) > 20000:
                    self._cache.clear()
                for text, vector in zip(missing, self._encode(missing)):
                    self._cache[text] = vector
            return [self._cache[t] for t in texts]

    def matrix(self, left: Sequence[str], right: Sequence[str]) -> list[list[float]]:
        if not left or not right:
            return [[] for _ in left]
        a, b = self._vectors(left), self._vectors(right)
        return [[float((x * y).sum()) for y in b] for x in a]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _plugged(spec: str) -> Similarity:
    module, _, attr = spec.partition(":")
    target = getattr(importlib.import_module(module), attr)
    if isinstance(target, type):
        target = target()
    if hasattr(target, "matrix"):
        if not getattr(target, "name", None):
            target.name = spec
        return target
    if callable(target):
        return PairSimilarity(target, spec)
    raise ConfigError(f"teval: similarity {spec!r} is neither a similarity (with `matrix`) nor a function (a, b) -> float")


def _sim(similarity: Similarity, a: str, b: str) -> float:
    return max(0.0, similarity.matrix([a], [b])[0][0])  # T-Eval clips negative cosines at 0


# -- metrics per ability ---------------------------------------------------------------------------------


@attrs.frozen
class Scored:
    ability: str
    fmt: str
    score: float
    metrics: dict[str, float]
    success: bool
    parsed: Any = None


def _instruct_parse(text: str, fmt: str, template: Any) -> dict[str, Any] | None:
    if fmt == "json":
        try:
            data = load_loose(text)
            parsed = {"thought": data[template["thought"]], "action": data[template["action"]]}
            args = data[template["args"]]
        except Exception:  # noqa: BLE001 - T-Eval: any failure means the format is not followed
            return None
        parsed["args"] = args if isinstance(args, dict) else {}
        return parsed
    template = template if isinstance(template, Mapping) else {}
    parts = [str(template.get(k, "")) for k in ("thought_start", "thought_end", "action_start", "action_end",
                                                 "args_start", "args_end")]
    found = parse_template(text, [parts[0], parts[1] + parts[2], parts[3] + parts[4], parts[5]],
                           ("thought", "action", "args"))
    if found is None:
        return None
    try:
        args = ast.literal_eval(found["args"].strip())
    except Exception:  # noqa: BLE001
        args = {}
    return {"thought": found["thought"], "action": found["action"].strip(), "args": args if isinstance(args, dict) else {}}


def args_exact_match(gt_action: Any, pred_action: Any, gt_args: Mapping[str, Any], pred_args: Mapping[str, Any]) -> float:
    """Instruct's args EM: (name equal + each true argument equal) / (true arguments + 1)."""
    hits = float(gt_action == pred_action)
    hits += sum(1.0 for key, value in gt_args.items() if pred_args.get(key, "") == value)
    return hits / (len(gt_args) + 1)


def score_instruct(text: str, datum: Mapping[str, Any]) -> Scored:
    fmt = response_format(datum)
    parsed = _instruct_parse(text, fmt, datum.get("template"))
    if parsed is None:
        return Scored("instruct", fmt, 0.0, {"format": 0.0, "args_em": 0.0}, False)
    gt = datum.get("ground_truth") or {}
    gt_args = gt.get("args") if isinstance(gt.get("args"), Mapping) else {}
    em = args_exact_match(gt.get("action"), parsed["action"], gt_args, parsed["args"])
    return Scored("instruct", fmt, (1.0 + em) / 2, {"format": 1.0, "args_em": em}, em >= 1.0, parsed)


def plan_steps(data: Any) -> list[dict[str, Any]]:
    """A plan as T-Eval normalises it: ``[{name, id, args}]`` with ``args`` as text, or ``[]``
    when it is not a list of such steps."""
    if not isinstance(data, list):
        return []
    try:
        return [{"name": str(s["name"]), "id": int(s["id"]), "args": str(s["args"])} for s in data]
    except Exception:  # noqa: BLE001
        return []


def plan_from_text(text: str, fmt: str, api_list: Sequence[str]) -> list[dict[str, Any]]:
    if fmt == "json":
        try:
            return plan_steps(load_loose(text, "[", "]"))
        except ValueError:
            return []
    steps: list[dict[str, Any]] = []
    for line in text.replace(". ", "\n").split("\n"):
        best, where = "", math.inf
        for api in api_list:
            at = line.find(api)
            if at != -1 and at < where:
                best, where = api, at
        if best:
            steps.append({"id": len(steps), "name": best, "args": line})
    return steps


def _assignment(weights: Sequence[Sequence[float]]) -> list[int]:
    """The column of each row in a maximum-weight assignment of a square matrix (Hungarian)."""
    n = len(weights)
    inf = math.inf
    u, v, p, way = [0.0] * (n + 1), [0.0] * (n + 1), [0] * (n + 1), [0] * (n + 1)
    for i in range(1, n + 1):
        p[0], j0 = i, 0
        minv, used = [inf] * (n + 1), [False] * (n + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = p[j0], inf, 0
            for j in range(1, n + 1):
                if not used[j]:
                    cur = -weights[i0 - 1][j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(n + 1):
                if used[j]:
                    u[p[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    columns = [0] * n
    for j in range(1, n + 1):
        columns[p[j] - 1] = j - 1
    return columns


def max_weight_matching(weights: Sequence[Sequence[float]], threshold: float) -> dict[int, int]:
    """Row → column of a maximum-weight matching that uses only cells above ``threshold``
    (T-Eval: networkx's ``max_weight_matching`` on that bipartite graph, used when networkx is
    installed; otherwise an exact Hungarian assignment with the other cells at 0)."""
    rows = len(weights)
    cols = len(weights[0]) if rows else 0
    try:
        import networkx as nx
    except ImportError:
        n = max(rows, cols)
        padded = [[(weights[i][j] if i < rows and j < cols and weights[i][j] > threshold else 0.0) for j in range(n)]
                  for i in range(n)]
        return {i: j for i, j in enumerate(_assignment(padded)) if i < rows and j < cols and weights[i][j] > threshold}
    graph = nx.Graph()
    for i in range(rows):
        for j in range(cols):
            if weights[i][j] > threshold:
                graph.add_edge(i, str(j), weight=weights[i][j])
    mapping = {}
    for a, b in nx.max_weight_matching(graph):
        i, j = (a, b) if isinstance(a, int) else (b, a)
        mapping[int(i)] = int(j)
    return mapping


def plan_match(pred: Sequence[Mapping[str, Any]], gt: Sequence[Mapping[str, Any]], similarity: Similarity) -> dict[str, float]:
    """T-Eval's ``bertscore_match``: precision, recall and F1 of the predicted plan's steps."""
    zero = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    if not pred or not gt:
        return zero
    pred, gt = sorted(pred, key=lambda s: s["id"]), sorted(gt, key=lambda s: s["id"])
    if pred[-1]["name"] == FINISH:
        pred = pred[:-1]
    if gt[-1]["name"] == FINISH:
        gt = gt[:-1]
    if not pred or not gt:  # (T-Eval divides by zero here)
        return zero
    names = similarity.matrix([s["name"] for s in pred], [s["name"] for s in gt])
    args = similarity.matrix([str(s["args"]) for s in pred], [str(s["args"]) for s in gt])
    weights = [[max(0.0, names[i][j]) * PLAN_NAME_WEIGHT + max(0.0, args[i][j]) * PLAN_ARGS_WEIGHT
                for j in range(len(gt))] for i in range(len(pred))]
    mapping = max_weight_matching(weights, PLAN_MATCH_THRESHOLD)
    target = [mapping.get(i, -1) for i in range(len(pred))]
    # the longest chain of matched steps in the true order; every step starts a chain of one,
    # matched or not (T-Eval's dp starts at ones)
    chain = [1] * len(pred)
    for i in range(len(pred)):
        for j in range(i):
            if target[i] != -1 and target[j] != -1 and target[i] > target[j]:
                chain[i] = max(chain[i], chain[j] + 1)
    correct = max(chain)
    recall, precision = correct / len(gt), correct / len(pred)
    return {"precision": precision, "recall": recall, "f1": 2 * recall * precision / (recall + precision)}


def plan_format(datum: Mapping[str, Any], default: str) -> str:
    """A plan sample's format: its ``meta.prompt_type`` (T-Eval's), else the file's."""
    meta = datum.get("meta")
    fmt = meta.get("prompt_type", default) if isinstance(meta, Mapping) else default
    return fmt if fmt in FORMATS else default


def true_plan(datum: Mapping[str, Any]) -> list[dict[str, Any]]:
    try:
        return plan_steps(load_loose(datum.get("ground_truth"), "[", "]"))
    except ValueError:
        return []


def score_plan(text: str, datum: Mapping[str, Any], fmt: str, similarity: Similarity) -> Scored:
    """Plan: ``fmt`` is the sample's (``plan_format``)."""
    meta = datum.get("meta")
    pred = plan_from_text(text, fmt, list(meta.get("API_list") or []) if isinstance(meta, Mapping) else [])
    gt = true_plan(datum)
    result = plan_match(pred, gt, similarity)
    metrics = {**result, "parse_rate": float(bool(pred) and bool(gt))}
    return Scored("plan", fmt, result["f1"], metrics, result["f1"] >= 1.0 - EXACT_TOLERANCE, pred)


def _rru_fields(data: Any, json_args: bool) -> dict[str, Any]:
    """T-Eval's ``format_load`` of the reason/retrieve/understand evaluator: thought, name and
    args of an answer or a ground truth ({} when it does not parse)."""
    try:
        obj = load_loose(data, "{", "}")
    except ValueError:
        return {}
    if not isinstance(obj, dict):
        return {}
    out: dict[str, Any] = {"thought": str(obj["thought"]) if "thought" in obj else "",
                           "name": str(obj["name"]) if "name" in obj else ""}
    if json_args:
        out["args"] = obj["args"] if isinstance(obj.get("args"), dict) else {}
    else:
        out["args"] = str(obj["args"]) if "args" in obj else ""
    return out


def _retrieve_str(answer: str, name: str) -> float:
    if name not in answer:
        return 0.0
    mentioned = re.findall(r"\w+\.\w+", answer) + re.findall(FINISH, answer)
    return 0.0 if any(m != name for m in mentioned) else 1.0


def _understand_exact(pred: Any, gt: Any) -> float:
    if isinstance(gt, dict):
        pred = pred if isinstance(pred, dict) else {}
        if not gt:
            return 1.0 if not pred else 0.0
        hits = sum(1 for k, v in gt.items() if k in pred and str(pred[k]) == str(v))
        return hits / (len(gt) + 1e-5)
    return float(str(gt) == str(pred).strip("'").strip('"'))


def score_rru(text: str, datum: Mapping[str, Any], fmt: str, abilities: Sequence[str], similarity: Similarity, *,
              understand_args: str = "exact", similarity_pass: float = 0.8) -> list[Scored]:
    """Reason (thought similarity), retrieve (tool name) and understand (arguments) of one answer."""
    gt = _rru_fields(datum.get("ground_truth"), fmt == "json")
    if fmt == "json":
        pred = _rru_fields(text, True)
    else:
        key = {"reason": "thought", "retrieve": "name", "understand": "args"}
        pred = {key[a]: text for a in abilities}
    parse_rate = float(bool(pred))
    out = []
    for ability in abilities:
        if ability == "reason":
            value = _sim(similarity, pred["thought"], gt["thought"]) if "thought" in pred and "thought" in gt else 0.0
            out.append(Scored(ability, fmt, value, {"thought": value, "parse_rate": parse_rate},
                              value >= similarity_pass, pred.get("thought")))
        elif ability == "retrieve":
            if "name" in pred and "name" in gt:
                value = float(pred["name"] == gt["name"]) if fmt == "json" else _retrieve_str(pred["name"], gt["name"])
            else:
                value = 0.0
            out.append(Scored(ability, fmt, value, {"name": value, "parse_rate": parse_rate}, value >= 1.0, pred.get("name")))
        else:
            if "args" not in pred or "args" not in gt:
                value = 0.0
            elif understand_args == "similarity":
                value = _sim(similarity, str(pred["args"]), str(gt["args"]))
            else:
                value = _understand_exact(pred["args"], gt["args"])
            passed = value >= (similarity_pass if understand_args == "similarity" else 1.0 - EXACT_TOLERANCE)
            out.append(Scored(ability, fmt, value, {"args": value, "parse_rate": parse_rate}, passed, pred.get("args")))
    return out


def _truthy(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        return value.strip().lower() in ("true", "yes")
    return value


def review_choice(text: str, fmt: str) -> Any:
    """The review answer T-Eval reads: the choice letter after the first ``:`` (string format) or
    ``is_finished`` (JSON format); ``None`` when there is none."""
    if fmt == "json":
        try:
            value = load_loose(text)["is_finished"]
        except Exception:  # noqa: BLE001
            return None
        return value if value in (True, False) else None
    rest = text[text.find(":") + 1:].strip()
    return rest[0] if rest and rest[0] in "ABCDE" else None


def score_review(text: str, datum: Mapping[str, Any]) -> Scored:
    fmt = response_format(datum, "str")
    choice = review_choice(text, fmt)
    truth = (datum.get("ground_truth") or {}).get("answer")
    if fmt == "json":  # T-Eval compares {"review": choice} with the answer: never equal, 0
        right = float(choice is not None and choice == _truthy(truth))
        return Scored("review", fmt, 0.0, {"review_quality": 0.0, "parse_rate": float(choice is not None),
                                           "is_finished_right": right}, False, choice)
    right = float(choice is not None and choice == truth)
    return Scored("review", fmt, right, {"review_quality": right, "parse_rate": float(choice is not None)}, right == 1.0,
                  choice)


# -- T-Eval's aggregation ---------------------------------------------------------------------------------


def aggregate(outcomes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """T-Eval's overall score from outcome records (``Outcome.to_json()`` or results lines):
    the mean score per category (``<ability>_<format>``), each ability the mean of its categories
    that were played (``OFFICIAL_COMPONENTS``: JSON and string; review, ``POOLED``: the mean over
    every sample of both), the overall the mean of the abilities. Scores are fractions (T-Eval
    prints them ×100). ``complete`` says whether every category T-Eval averages was played; other
    categories are listed but not averaged."""
    sums: dict[str, list[float]] = {}
    for record in outcomes:
        score = record.get("score")
        sums.setdefault(record["category"], []).append(float(score) if score is not None else 0.0)
    components = {cat: {"n": len(v), "score": sum(v) / len(v)} for cat, v in sorted(sums.items())}
    abilities: dict[str, float | None] = {}
    for ability, cats in OFFICIAL_COMPONENTS.items():
        if ability in POOLED:
            pooled = [v for c in cats for v in sums.get(c, [])]
            abilities[ability] = sum(pooled) / len(pooled) if pooled else None
            continue
        values = [components[c]["score"] for c in cats if c in components]
        abilities[ability] = sum(values) / len(values) if values else None
    played = [v for v in abilities.values() if v is not None]
    official = {c for cats in OFFICIAL_COMPONENTS.values() for c in cats}
    return {"overall": sum(played) / len(played) if played else None, "abilities": abilities,
            "components": components, "complete": official <= set(components),
            "not_averaged": sorted(set(components) - official)}


def summary_markdown(summary: Mapping[str, Any], title: str = "T-Eval") -> str:
    def pct(value: float | None) -> str:
        return "–" if value is None else f"{100 * value:.1f}"

    comps = summary["components"]
    lines = [f"# {title}", "", "| ability | JSON | string | ability score |", "| --- | --- | --- | --- |"]
    for ability in ABILITIES:
        cells = [f"{pct(comps[c]['score'])} (n={comps[c]['n']})" if c in comps else "–"
                 for c in (f"{ability}_json", f"{ability}_str")]
        lines.append(f"| {ability} | {cells[0]} | {cells[1]} | {pct(summary['abilities'][ability])} |")
    lines += ["", f"**Overall: {pct(summary['overall'])}**" + ("" if summary["complete"] else
                                                                 " (not every T-Eval category was played)")]
    if summary.get("similarity"):
        lines += ["", f"Similarity: {summary['similarity']}."]
    return "\n".join(lines) + "\n"


# -- the evaluator ----------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TEvalConfig:
    data_dir: str = ""  # T-Eval's data files; "" reads $TEVAL_DATA_DIR
    language: str = attrs.field(default="en", validator=attrs.validators.in_(LANGUAGES))
    version: str = "v2"
    subset: bool = False  # T-Eval's *_subset dev files
    abilities: list[str] = attrs.field(factory=lambda: list(ABILITIES))
    formats: list[str] = attrs.field(factory=lambda: list(FORMATS))
    limit: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    ids: list[str] = attrs.field(factory=list)  # only these samples ("<id>" or "<file stem>/<id>")
    similarity: str = attrs.field(default="auto")  # "auto", "embedding", "lexical" or "module:attr"
    embedding_model: str = ""  # a local folder of the official model; "": its name in the local HF cache
    embedding_device: str = "cpu"
    understand_args: str = attrs.field(default="exact", validator=attrs.validators.in_(("exact", "similarity")))
    similarity_pass: float = attrs.field(default=0.8, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)])
    function_role: str = "user"  # the chat role T-Eval's "function" messages (tool responses) are sent as
    workers: int = attrs.field(default=1, validator=attrs.validators.gt(0))  # concurrent requests
    transcripts: bool = True  # keep each answer and its parse in details

    @abilities.validator
    def _check_abilities(self, _attr: Any, value: list[str]) -> None:
        if not value or set(value) - set(ABILITIES):
            raise ValueError(f"abilities must be a non-empty subset of {ABILITIES}")

    @formats.validator
    def _check_formats(self, _attr: Any, value: list[str]) -> None:
        if not value or set(value) - set(FORMATS):
            raise ValueError(f"formats must be a non-empty subset of {FORMATS}")

    @similarity.validator
    def _check_similarity(self, _attr: Any, value: str) -> None:
        if value not in ("auto", "embedding", "lexical") and ":" not in value:
            raise ValueError("similarity must be 'auto', 'embedding', 'lexical' or 'module:attr'")


@attrs.frozen
class Sample:
    file: DataFile
    id: str
    datum: dict[str, Any]
    messages: list[dict[str, Any]]
    abilities: tuple[str, ...]  # the abilities scored from this answer (all of the file's, for RRU)
    fmt: str

    def task_id(self, ability: str) -> str:
        base = f"{self.file.stem}/{self.id}"
        return f"{base}/{ability}" if len(self.file.abilities) > 1 else base


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def response_text(turn: PolicyTurn) -> str:
    """The model's text as it generated it: ``raw`` when the client parsed text (a local model,
    an endpoint with a parser), else ``content`` (also when ``raw`` is a native tool-call message)."""
    if turn.raw:
        if turn.attempts:
            try:
                message = json.loads(turn.raw)
            except ValueError:
                message = None
            if isinstance(message, dict) and "tool_calls" in message:
                return turn.content
        return turn.raw
    return turn.content


class TEval:
    """T-Eval: instruct, plan, reason, retrieve, understand and review, scored by T-Eval's metrics."""

    name = "teval"
    Config = TEvalConfig
    resumable_options = ("abilities", "formats", "ids", "workers")  # choose tasks: a resume may change them

    def __init__(self, config: TEvalConfig, *, similarity: Similarity | None = None) -> None:
        self.config = config
        self._similarity = similarity
        self.similarity_note = ""
        data_dir = config.data_dir or os.environ.get("TEVAL_DATA_DIR", "")
        if not data_dir:
            raise ConfigError(f"teval: set data_dir (or $TEVAL_DATA_DIR) to a folder with T-Eval's data files, from {DATA_URL}")
        self.data_dir = Path(data_dir).expanduser()
        self.files = {f.stem: self._locate(f) for f in self.selected_files()}
        missing = [name for name, path in self.files.items() if not path.is_file()]
        if missing:
            raise ConfigError(f"teval: {self.data_dir} lacks " + ", ".join(self.files[m].name for m in missing)
                              + f" (T-Eval's data: {DATA_URL})")
        if config.similarity == "embedding" and similarity is None and self._needs_similarity():
            try:
                resolve_model(self._model_name())
            except Exception as exc:  # noqa: BLE001
                raise ConfigError(f"teval: similarity = 'embedding' but the model {self._model_name()!r} is not "
                                  f"available offline ({exc}); give embedding_model a local folder") from None

    # -- data
    def selected_files(self) -> list[DataFile]:
        wanted = set(self.config.abilities)
        formats = set(self.config.formats)
        return [f for f in DATA_FILES if wanted & set(f.abilities) and (f.fmt is None or f.fmt in formats)]

    def _locate(self, data_file: DataFile) -> Path:
        cfg = self.config
        sub, zh = ("_subset" if cfg.subset else ""), ("_zh" if cfg.language == "zh" else "")
        names = dict.fromkeys([f"{data_file.stem}_{cfg.version}{sub}{zh}.json", f"{data_file.stem}_{cfg.version}{zh}{sub}.json"])
        for name in names:
            if (self.data_dir / name).is_file():
                return self.data_dir / name
        return self.data_dir / next(iter(names))

    def samples(self) -> list[Sample]:
        cfg = self.config
        out = []
        for data_file in self.selected_files():
            path = self.files[data_file.stem]
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(f"teval: cannot read {path}: {exc}") from None
            if not isinstance(data, dict):
                raise ConfigError(f"teval: {path} is not a T-Eval data file (an object of samples by id)")
            abilities = tuple(a for a in data_file.abilities if a in cfg.abilities)
            taken = 0
            for sample_id, datum in data.items():
                if cfg.ids and sample_id not in cfg.ids and f"{data_file.stem}/{sample_id}" not in cfg.ids:
                    continue
                if data_file.stem.startswith("plan"):
                    fmt = plan_format(datum, data_file.fmt or "json")
                else:
                    fmt = data_file.fmt or response_format(datum, "str" if data_file.stem == "review_str" else "json")
                if fmt not in cfg.formats:
                    continue
                if cfg.limit is not None and taken >= cfg.limit:
                    break
                taken += 1
                out.append(Sample(data_file, str(sample_id), datum, self.messages(datum), abilities, fmt))
        return out

    def messages(self, datum: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The sample's ``origin_prompt`` as chat messages (T-Eval's ``function`` role mapped)."""
        prompt = datum.get("origin_prompt") or []
        if isinstance(prompt, str):
            prompt = json.loads(prompt)
        out = []
        for message in prompt:
            role = message.get("role", "user")
            content = message.get("content", "")
            out.append({"role": self.config.function_role if role == "function" else role,
                        "content": content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)})
        return out

    # -- similarity
    def _needs_similarity(self) -> bool:
        abilities = set(self.config.abilities)
        return bool(abilities & {"plan", "reason"}) or ("understand" in abilities and self.config.understand_args == "similarity")

    def _model_name(self) -> str:
        return self.config.embedding_model or OFFICIAL_MODELS[self.config.language]

    def similarity(self) -> Similarity:
        """The similarity of this run (loaded once): see the module's docstring."""
        if self._similarity is not None:
            return self._similarity
        spec = self.config.similarity
        if spec == "lexical":
            self._similarity = LexicalSimilarity()
        elif spec not in ("auto", "embedding"):
            self._similarity = _plugged(spec)
        else:
            model = self._model_name()
            try:
                folder = resolve_model(model)
                self._similarity = EmbeddingSimilarity(folder, device=self.config.embedding_device,
                                                       label=model.rstrip("/").split("/")[-1])
            except Exception as exc:  # noqa: BLE001 - any failure to load means: not available offline
                if spec == "embedding":
                    raise ConfigError(f"teval: cannot load the embedding model {model!r}: {exc}") from None
                self.similarity_note = (f"{model} is not available offline ({type(exc).__name__}): the lexical "
                                        "similarity is used, so plan and reason scores differ from T-Eval's")
                log.warning("teval similarity fallback", model=model, error=str(exc))
                self._similarity = LexicalSimilarity()
        return self._similarity

    # -- playing
    def reference(self, sample: Sample) -> Reference:
        """The ground truth as the answer text the sample asks for (the oracle plays it)."""
        turns: list[list[PolicyTurn]] = []
        since = 0
        for message in sample.messages:
            if message["role"] == "user":
                turns.append([])
                since = 0
            elif message["role"] == "assistant":
                since += 1
        if not turns:
            turns.append([])
        try:
            gold = gold_answer(sample)
        except (KeyError, TypeError, AttributeError, ValueError, IndexError):  # a ground truth it cannot write
            gold = ""
        turns[-1] = [PolicyTurn(content="")] * since + [PolicyTurn(content=gold)]
        return Reference(turns=turns)

    def ask(self, policy: Policy, sample: Sample, lock: threading.Lock) -> tuple[str, str, RequestFailed | None]:
        """(the answer as T-Eval stores it, the raw text, the failure) of one sample."""
        try:
            if callable(getattr(policy, "begin", None)):
                with lock:  # a reference-aware policy holds one episode at a time
                    begin_episode(policy, self.reference(sample))
                    turn = policy.respond([dict(m) for m in sample.messages], [])
            else:
                turn = policy.respond([dict(m) for m in sample.messages], [])
        except RequestFailed as exc:
            return "", "", exc
        raw = response_text(turn) or ""
        return split_special_tokens(raw), raw, None

    def score(self, sample: Sample, text: str) -> list[Scored]:
        cfg = self.config
        stem = sample.file.stem
        if stem == "instruct":
            return [score_instruct(text, sample.datum)]
        if stem == "review_str":
            return [score_review(text, sample.datum)]
        if stem.startswith("plan"):
            return [score_plan(text, sample.datum, sample.fmt, self.similarity())]
        return score_rru(text, sample.datum, sample.fmt, sample.abilities, self._rru_similarity(sample),
                         understand_args=cfg.understand_args, similarity_pass=cfg.similarity_pass)

    def _rru_similarity(self, sample: Sample) -> Similarity:
        needs = "reason" in sample.abilities or ("understand" in sample.abilities and self.config.understand_args == "similarity")
        return self.similarity() if needs else LexicalSimilarity()  # (unused when not needed)

    def outcomes(self, sample: Sample, text: str, raw: str, failure: RequestFailed | None) -> list[Outcome]:
        base = {"file": self.files[sample.file.stem].name, "sample": sample.id, "format": sample.fmt}
        if failure is not None:
            details = {**base, "error": f"{type(failure).__name__}: {failure}", "status": failure.status}
            return [Outcome(task_id=sample.task_id(a), category=f"{a}_{sample.fmt}", success=False, score=0.0,
                            metrics=dict.fromkeys(METRICS[a], 0.0), details=details) for a in sample.abilities]
        out = []
        similarity = self._similarity.name if self._similarity is not None else None
        for scored in self.score(sample, text):
            details: dict[str, Any] = dict(base)
            if similarity and (scored.ability in ("plan", "reason")
                               or (scored.ability == "understand" and self.config.understand_args == "similarity")):
                details["similarity"] = similarity
            if self.config.transcripts:
                details["answer"] = text
                if raw.strip() != text:
                    details["raw"] = raw
                details["parsed"] = _jsonable(scored.parsed)
            out.append(Outcome(task_id=sample.task_id(scored.ability), category=f"{scored.ability}_{scored.fmt}",
                               success=scored.success, score=scored.score, metrics=dict(scored.metrics), details=details))
        return out

    def evaluate(self, policy: Policy, context: EvalContext) -> Iterator[Outcome]:
        samples = self.samples()
        selected = {s.task_id(a) for s in samples for a in s.abilities}
        pending = [s for s in samples if any(context.wanted(s.task_id(a)) for a in s.abilities)]
        if pending and self._needs_similarity():
            similarity = self.similarity()
            if self.similarity_note:
                context.echo(f"  teval: {self.similarity_note}")
            log.info("teval similarity", similarity=similarity.name)
        scores = context.out_dir / f"{_slug(context.model)}.teval.jsonl"
        _forget_wanted(scores, context.wanted)
        lock = threading.Lock()
        workers = self.config.workers
        pool: Any = ThreadPoolExecutor(max_workers=workers) if workers > 1 else _Inline()
        size = max(16, 4 * workers)
        with JsonlWriter(scores, key="task_id") as store, pool:
            for start in range(0, len(pending), size):
                chunk = pending[start:start + size]
                answers = pool.map(lambda s: self.ask(policy, s, lock), chunk)
                for sample, (text, raw, failure) in zip(chunk, answers):
                    for outcome in self.outcomes(sample, text, raw, failure):
                        if not context.wanted(outcome.task_id):
                            continue
                        store.write({"task_id": outcome.task_id, "category": outcome.category, "score": outcome.score,
                                     "metrics": outcome.metrics})
                        yield outcome
        summary = aggregate(r for r in read_jsonl(scores) if r["task_id"] in selected)
        summary["language"] = self.config.language
        if self._similarity is not None:
            summary["similarity"] = self._similarity.name + (f" ({self.similarity_note})" if self.similarity_note else "")
        name = _slug(context.model)
        (context.out_dir / f"{name}.summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
        (context.out_dir / f"{name}.summary.md").write_text(
            summary_markdown(summary, f"T-Eval ({self.config.language}): {context.model}"))
        if summary["overall"] is not None:
            parts = ", ".join(f"{a} {100 * v:.1f}" for a, v in summary["abilities"].items() if v is not None)
            context.echo(f"  teval {context.model}: overall {100 * summary['overall']:.1f} ({parts})")

    summary = staticmethod(aggregate)

    headline_label = "T-Eval's overall (the mean of its six abilities) and each ability, as convert_results averages them"

    @staticmethod
    def headline(records: list[dict[str, Any]]) -> dict[str, float | None]:
        """The report's headline: T-Eval's overall and per-ability scores (``aggregate``), as the
        paper's table reports them."""
        summary = aggregate(records)
        return {"overall": summary["overall"], **{a: summary["abilities"].get(a) for a in ABILITIES}}

    @staticmethod
    def headline_notes(records: list[dict[str, Any]]) -> list[str]:
        """Says when the scores are not T-Eval's: a similarity other than T-Eval's embedding model."""
        used = sorted({str(r["details"]["similarity"]) for r in records
                       if isinstance(r.get("details"), dict) and r["details"].get("similarity")})
        stand_ins = [name for name in used if name.split(" ")[0] == LexicalSimilarity.name]
        if not stand_ins:
            return []
        return [f"similarity {', '.join(stand_ins)}: a word-count cosine stood in for T-Eval's embedding model, so "
                "plan and reason (and similarity-scored understand) are not T-Eval's scores; compare them only with "
                "other lexical runs (docs/evaluation.md)"]


# the per-sample metrics of each ability (a failed request scores 0 in each)
METRICS = {"instruct": ("format", "args_em"), "plan": ("precision", "recall", "f1", "parse_rate"),
           "reason": ("thought", "parse_rate"), "retrieve": ("name", "parse_rate"), "understand": ("args", "parse_rate"),
           "review": ("review_quality", "parse_rate")}  # review JSON adds is_finished_right


def _forget_wanted(path: Path, wanted: Callable[[str], bool]) -> None:
    """Keep in this evaluator's score file only what the run's results still hold (the tasks it
    does not want again): a task played again (its results deleted) is scored afresh."""
    if not path.exists():
        return
    records = list(read_jsonl(path))
    kept = [r for r in records if not wanted(r["task_id"])]
    if len(kept) < len(records):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in kept))
        tmp.replace(path)


class _Inline:
    """A pool of one: ``map`` runs in the caller's thread, lazily."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        return map(fn, items)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def gold_answer(sample: Sample) -> str:
    """The ground truth written as a perfect answer in the sample's format."""
    datum, fmt, stem = sample.datum, sample.fmt, sample.file.stem
    gt = datum.get("ground_truth")
    if stem == "instruct":
        template = datum.get("template") or {}
        if fmt == "json":
            return json.dumps({template["thought"]: gt["thought"], template["action"]: gt["action"],
                               template["args"]: gt["args"]}, ensure_ascii=False)
        t = {k: str(template.get(k, "")) for k in ("thought_start", "thought_end", "action_start", "action_end",
                                                    "args_start", "args_end")}
        return (t["thought_start"] + str(gt["thought"]) + t["thought_end"] + t["action_start"] + str(gt["action"])
                + t["action_end"] + t["args_start"] + repr(gt["args"]) + t["args_end"])
    if stem == "review_str":
        answer = gt.get("answer")
        return json.dumps({"is_finished": _truthy(answer)}) if fmt == "json" else f"Answer: {answer}"
    if stem.startswith("plan"):
        steps = true_plan(datum)
        if fmt == "json":
            return json.dumps([{"id": s["id"], "name": s["name"], "args": s["args"]} for s in steps], ensure_ascii=False)
        return "\n".join(f"Use {s['name']} with {s['args']}" for s in steps if s["name"] != FINISH)
    fields = _rru_fields(gt, fmt == "json")
    if fmt == "json":
        return json.dumps(fields, ensure_ascii=False)
    key = {"reason": "thought", "retrieve": "name", "understand": "args"}[sample.abilities[0]]
    return str(fields.get(key, ""))


@hookimpl
def prove_register_evaluators(register: Any) -> None:
    register(TEval)
