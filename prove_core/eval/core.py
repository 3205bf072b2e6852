"""``prove eval``: the evaluator contract (component kind ``evaluators``), results and reports.

An **evaluator** plays a policy (a model client: component kind ``clients``) on a benchmark and
yields one ``Outcome`` per task::

    @attrs.frozen
    class Config:                         # its [[eval.benchmarks]] options, with defaults
        limit: int | None = None

    class MyBenchmark:
        name = "my_benchmark"
        Config = Config
        def __init__(self, config): self.config = config
        def evaluate(self, policy, context): # -> Iterator[Outcome]
            for task in ...:
                if context.wanted(task.id):   # resume: skip tasks already scored
                    begin_episode(policy, reference)   # lets the oracle replay the ground truth
                    ...
                    yield Outcome(task_id=..., category=..., success=...)

Outcomes go to ``<run_dir>/eval/results/<model>__<benchmark>.jsonl`` as they come (an
interrupted run resumes where it stopped); the report (``report.json``, ``report.md``, one PNG per
benchmark) compares every model side by side per benchmark and category, with the number of
tasks and a Wilson confidence interval of each success rate. The bundled evaluators are
``prove`` (held-out synthesized tasks), ``bfcl`` (BFCL v4 multi-turn, scored by BFCL's checker)
and ``tau2`` (τ²-bench, scored by τ²'s evaluator); see docs/evaluation.md.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

import attrs
import structlog

from prove_core.errors import ConfigError
from prove_core.model import JsonlWriter, read_jsonl
from prove_core.reward.rollout import Policy, PolicyTurn

log = structlog.get_logger()

ALL = "all"  # the category that pools every task of a benchmark


# -- results -------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Outcome:
    """One task played by one model. ``success`` is the benchmark's verdict (BFCL's checker, τ²'s
    reward of 1, PROVE's task success); ``score`` a graded value where the benchmark has one;
    ``metrics`` numbers averaged per category in the report (reward components, calls per task);
    ``details`` what explains the verdict (kept in the results file, not averaged). ``retry``: the
    task could not be played out (a model or simulator request failed for good); it is scored as
    the benchmark scores a failed run, and a resume plays it again."""

    task_id: str
    category: str
    success: bool
    score: float | None = None
    metrics: dict[str, float] = attrs.field(factory=dict)
    details: dict[str, Any] = attrs.field(factory=dict)
    retry: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "category": self.category, "success": self.success, "score": self.score,
                "metrics": self.metrics, "details": self.details, **({"retry": True} if self.retry else {})}


def _turns(turns: Iterable[Iterable[PolicyTurn]]) -> tuple[tuple[PolicyTurn, ...], ...]:
    return tuple(tuple(t) for t in turns)


@attrs.frozen(kw_only=True)
class Reference:
    """The reference solution of a task as assistant turns: ``turns[k]`` are the turns that answer
    user turn ``k``, in order. Scripted baselines (the oracle, the spammer) play from it."""

    turns: tuple[tuple[PolicyTurn, ...], ...] = attrs.field(converter=_turns)

    @property
    def calls(self) -> list[Any]:
        return [a for turn in self.turns for step in turn for a in step.attempts]


def begin_episode(policy: Policy, reference: Reference | None) -> None:
    """Tell a policy that a new task starts (only reference-aware policies listen)."""
    begin = getattr(policy, "begin", None)
    if callable(begin):
        begin(reference)


@attrs.define(kw_only=True)
class EvalContext:
    """What an evaluator gets besides the policy."""

    registry: Any
    experiment: Any
    out_dir: Path  # a folder of the benchmark's own (splits, transcripts)
    model: str
    wanted: Callable[[str], bool] = lambda task_id: True
    echo: Callable[[str], None] = lambda _line: None
    hooks: Any = None  # the plugins' hook relay: environments built for rollouts report episodes to it


class Evaluator(Protocol):
    name: ClassVar[str]
    Config: ClassVar[type]

    def evaluate(self, policy: Policy, context: EvalContext) -> Iterator[Outcome]: ...

    # Optional, the report's headline as the benchmark reports its numbers:
    # ``headline(records) -> {name: fraction or None}``, the benchmark's own summary of one
    # model's results records, first figure first (T-Eval's overall and per-ability scores);
    # ``headline_label``, one line saying how it is averaged; ``headline_notes(records) ->
    # [str]``, what a reader must know about one model's numbers (T-Eval's similarity fallback).
    # Without them the headline is ``macro_headline`` (``MACRO_LABEL``).


MACRO_LABEL = "the unweighted mean of the categories' success rates"


def category_rates(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The success rate of each category, in the order categories first appear."""
    by_category: dict[str, list[bool]] = defaultdict(list)
    for record in records:
        by_category[record["category"]].append(bool(record["success"]))
    return {category: sum(v) / len(v) for category, v in by_category.items() if v}


def macro_headline(records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """The default headline: the unweighted mean of the per-category success rates."""
    rates = list(category_rates(records).values())
    return {"macro": sum(rates) / len(rates) if rates else None}


# -- statistics ------------------------------------------------------------------------------------------


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a success rate (well-behaved at 0%, 100% and small n)."""
    if n == 0:
        return (0.0, 1.0)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact ends where rounding would blur them
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def paired_interval(pairs: Sequence[tuple[float, float]], confidence: float = 0.95, rounds: int = 2000,
                    seed: int = 0) -> tuple[float, float] | None:
    """A percentile bootstrap interval of the mean change ``after - before`` over paired values
    (one pair per task, resampled as pairs); ``None`` with fewer than two pairs."""
    if len(pairs) < 2:
        return None
    changes = [after - before for before, after in pairs]
    rng = random.Random(seed)
    n = len(changes)
    means = sorted(statistics.fmean(rng.choices(changes, k=n)) for _ in range(rounds))
    cut = (1 - confidence) / 2
    return (means[int(cut * rounds)], means[min(rounds - 1, int((1 - cut) * rounds))])


def summarize(outcomes: Sequence[Mapping[str, Any]], confidence: float) -> dict[str, Any]:
    """Success rate with its interval, mean score and mean of every metric over ``outcomes``."""
    n = len(outcomes)
    successes = sum(1 for o in outcomes if o["success"])
    low, high = wilson(successes, n, confidence)
    scores = [o["score"] for o in outcomes if o.get("score") is not None]
    metrics: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        for key, value in (o.get("metrics") or {}).items():
            if value is not None and math.isfinite(value):
                metrics[key].append(float(value))
    return {"n": n, "successes": successes, "rate": successes / n if n else 0.0, "ci": [low, high],
            "score": sum(scores) / len(scores) if scores else None,
            "metrics": {k: sum(v) / len(v) for k, v in sorted(metrics.items())}}


# -- running ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Planned:
    model: Any  # ModelConfig
    policy: Any
    benchmark: str  # the label results and reports use
    evaluator: Any


def _plan(settings: Any, registry: Any) -> list[_Planned]:
    """Phase 2 of ``[eval]``: every model client and evaluator built before anything runs, so a
    typo fails in a second, not after the first model finished."""
    from prove_core.config import listed_more_than_once, raise_problems

    problems: list[str] = []
    policies = {}
    for i, model in enumerate(settings.models):
        policy = registry.build_entry("clients", model.client, model.options, where=f"$.eval.models[{i}]",
                                      problems=problems, name_key="client", registry=registry)
        if policy is not None:
            policies[model.name] = policy
    evaluators = {}
    for i, bench in enumerate(settings.benchmarks):
        evaluator = registry.build_entry("evaluators", bench.name, bench.options, where=f"$.eval.benchmarks[{i}]",
                                         problems=problems)
        if evaluator is not None:
            evaluators[bench.label or bench.name] = evaluator
    for kind, names in (("model", [m.name for m in settings.models]),
                        ("benchmark", [b.label or b.name for b in settings.benchmarks])):
        problems += listed_more_than_once(names, where="$.eval", what=kind, hint=" (give one a different name/label)")
    raise_problems(problems)
    return [_Planned(model=m, policy=policies[m.name], benchmark=label, evaluator=ev)
            for m in settings.models for label, ev in evaluators.items()]


def build_client(model: Any, registry: Any, *, path: str = "$.eval.models[0]") -> Any:
    """The policy of one ``[[eval.models]]`` entry (a ``ModelConfig``): its ``client`` built by the
    registry's loader (kind ``clients``) with its ``options`` (errors name ``{path}.options``); an
    unknown client raises ``UnknownComponent`` listing the registered ones."""
    return registry.build("clients", model.client, model.options, path=f"{path}.options", registry=registry)


def results_path(out_dir: Path, model: str, benchmark: str) -> Path:
    return out_dir / "results" / f"{_slug(model)}__{_slug(benchmark)}.jsonl"


# Benchmark options that choose which tasks run or what is kept beside a verdict, not how a task is
# played or scored: a resume may change them (an evaluator names its own in ``resumable_options``).
RESUMABLE_OPTIONS = ("limit", "transcripts")


def fingerprint(model: Any, evaluator: Any, experiment: Any = None) -> dict[str, Any]:
    """What one model's results on one benchmark are a function of: the model's client and
    options, the evaluator and its options with their defaults filled in (``RESUMABLE_OPTIONS``
    and the evaluator's ``resumable_options`` left out), and what its optional
    ``data_identity(experiment)`` says of its data (the prove suite: its corpus's hash). A resume
    must match it."""
    import cattrs

    config = getattr(evaluator, "config", None)
    options = cattrs.Converter().unstructure(config) if attrs.has(type(config)) else {}
    skip = {*RESUMABLE_OPTIONS, *getattr(evaluator, "resumable_options", ())}
    plain = json.loads(json.dumps({k: v for k, v in options.items() if k not in skip}, default=str))
    benchmark = {"name": getattr(evaluator, "name", type(evaluator).__name__), "options": plain}
    identity = getattr(evaluator, "data_identity", None)
    if callable(identity):
        benchmark["data"] = json.loads(json.dumps(identity(experiment), default=str))
    return {"model": {"client": model.client, "options": json.loads(json.dumps(dict(model.options), default=str))},
            "benchmark": benchmark}


def _fingerprint_path(out_dir: Path, model: str, benchmark: str) -> Path:
    return results_path(out_dir, model, benchmark).with_suffix(".fingerprint.json")


def _check_resume(out_dir: Path, planned: Sequence[_Planned], fresh: bool, experiment: Any = None) -> None:
    """Start over when asked; refuse to add results to a file made with another model setup or
    other benchmark options (the report would average two different experiments). Every pair is
    checked before anything runs."""
    from prove_core.synth.pipeline import _differences

    problems = []
    for item in planned:
        results = results_path(out_dir, item.model.name, item.benchmark)
        stored_path = _fingerprint_path(out_dir, item.model.name, item.benchmark)
        if fresh:
            results.unlink(missing_ok=True)
            stored_path.unlink(missing_ok=True)
        if not (results.exists() and results.stat().st_size):
            continue
        current = fingerprint(item.model, item.evaluator, experiment)
        if not stored_path.exists():
            problems.append(f"{results} has no fingerprint (made by an older PROVE)")
            continue
        stored = json.loads(stored_path.read_text())
        if stored != current:
            changed = sorted(_differences(stored, current))
            problems.append(f"{results} was made with other options ({', '.join(changed[:8])})")
    if problems:
        raise ConfigError("; ".join(problems) + ". Resuming would mix results of two setups: start over with "
                          "`prove eval ... --fresh`, delete those files, or give another --out / run name")
    for item in planned:
        path = _fingerprint_path(out_dir, item.model.name, item.benchmark)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(fingerprint(item.model, item.evaluator, experiment), indent=2, sort_keys=True))


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def run_evaluation(experiment: Any, plugins: Any, *, echo: Callable[[str], None] = print,
                   fresh: bool = False) -> dict[str, Any]:
    """Run every model on every benchmark of ``experiment.eval`` and write the report. Results
    already in the folder are kept (a resume) when they were made with the same setup
    (``fingerprint``), else refused; ``fresh`` deletes them first."""
    settings = experiment.eval
    if settings is None:
        raise ConfigError("$.eval: `prove eval` needs an [eval] section with [[eval.models]] and [[eval.benchmarks]]")
    out_dir = Path(settings.output) if settings.output else experiment.run_dir / "eval"
    planned = _plan(settings, plugins.registry)
    _check_resume(out_dir, planned, fresh, experiment)
    for item in planned:
        path = results_path(out_dir, item.model.name, item.benchmark)
        with JsonlWriter(path, key="task_id") as writer:
            writer.seen -= {r.get("task_id") for r in _latest(read_jsonl(path)) if r.get("retry")}  # played again
            done_before = len(writer.seen)

            def wanted(task_id: str, w: JsonlWriter = writer) -> bool:
                return task_id not in w

            context = EvalContext(registry=plugins.registry, experiment=experiment, model=item.model.name,
                                  out_dir=out_dir / "benchmarks" / _slug(item.benchmark),
                                  wanted=wanted, echo=echo, hooks=plugins.hook)
            context.out_dir.mkdir(parents=True, exist_ok=True)
            played = passed = retry = 0
            for outcome in item.evaluator.evaluate(item.policy, context):
                if writer.write(outcome.to_json()):
                    played += 1
                    passed += outcome.success
                    retry += outcome.retry
                    if played % 50 == 0:
                        echo(f"  {item.model.name} on {item.benchmark}: {played} tasks so far ({passed} succeeded)")
            echo(f"eval {item.model.name} on {item.benchmark}: {played} tasks played ({passed} succeeded)"
                 + (f", {done_before} from an earlier run" if done_before else "")
                 + (f"; {retry} could not be played out (a request failed) and are played again on resume"
                    if retry else ""))
    report = build_report(out_dir, models=[m.name for m in settings.models],
                          benchmarks=[b.label or b.name for b in settings.benchmarks], confidence=settings.confidence,
                          evaluators={item.benchmark: item.evaluator for item in planned})
    write_report(report, out_dir, plots=settings.plots)
    for line in overview(report):
        echo(line)
    echo(f"report: {out_dir / 'report.md'}")
    return report


# -- reports ---------------------------------------------------------------------------------------------


def build_report(out_dir: Path, *, models: Sequence[str], benchmarks: Sequence[str], confidence: float = 0.95,
                 evaluators: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Per benchmark, per category (and ``all``), per model: n, successes, rate, CI, metrics; and
    per model the benchmark's ``headline`` figures as the benchmark reports them (the evaluator's
    own ``headline``, ``headline_label`` and ``headline_notes`` where it has them, from
    ``evaluators``; else ``macro_headline``)."""
    report: dict[str, Any] = {"confidence": confidence, "models": list(models), "benchmarks": {}}
    for bench in benchmarks:
        per_model: dict[str, dict[str, list[dict[str, Any]]]] = {}
        categories: list[str] = []
        for model in models:
            by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for record in _latest(read_jsonl(results_path(out_dir, model, bench))):
                by_category[record["category"]].append(record)
                if record["category"] not in categories:
                    categories.append(record["category"])
            per_model[model] = by_category
        table: dict[str, dict[str, Any]] = {}
        for category in [*categories, ALL]:
            table[category] = {}
            for model in models:
                outcomes = (per_model[model].get(category, []) if category != ALL
                            else [o for c in categories for o in per_model[model].get(c, [])])
                table[category][model] = summarize(outcomes, confidence)
        evaluator = (evaluators or {}).get(bench)
        headline = getattr(evaluator, "headline", None)
        headline = headline if callable(headline) else macro_headline
        label = getattr(evaluator, "headline_label", None) if headline is not macro_headline else MACRO_LABEL
        notes_of = getattr(evaluator, "headline_notes", None)
        records = {model: [o for c in categories for o in per_model[model].get(c, [])] for model in models}
        report["benchmarks"][bench] = {
            "categories": [*categories, ALL], "results": table,
            "headline": {model: headline(records[model]) for model in models},
            "headline_label": label or f"{bench}'s own averaging",
            "notes": {model: list(notes_of(records[model])) for model in models} if callable(notes_of) else {},
            # how each model was run where the benchmark records it (BFCL: "fc" or "prompting")
            "protocol": {model: sorted({str(o["details"]["protocol"]) for o in records[model]
                                        if isinstance(o.get("details"), dict) and o["details"].get("protocol")})
                         for model in models}}
    return report


def overview(report: Mapping[str, Any]) -> Iterator[str]:
    """One console line per benchmark and model: the pooled rate with its interval, then the
    benchmark's headline figure (its first: the one it leads with) and any note on it."""
    for bench, data in report["benchmarks"].items():
        for model in report["models"]:
            cell = data["results"][ALL][model]
            low, high = cell["ci"]
            line = (f"  {bench:<14} {model:<20} {100 * cell['rate']:6.1f}%  [{100 * low:.1f}, {100 * high:.1f}]  "
                    f"n={cell['n']}")
            figures = (data.get("headline") or {}).get(model) or {}
            if figures:
                name, value = next(iter(figures.items()))
                line += f"  headline {name} {'–' if value is None else f'{100 * value:.1f}'}"
            notes = (data.get("notes") or {}).get(model) or []
            yield line + ("  (see the report's notes)" if notes else "")


def _percent(cell: Mapping[str, Any]) -> str:
    if not cell["n"]:
        return "–"
    low, high = cell["ci"]
    return f"{100 * cell['rate']:.1f} [{100 * low:.1f}, {100 * high:.1f}] (n={cell['n']})"


def markdown(report: Mapping[str, Any]) -> str:
    models = report["models"]
    conf = f"{100 * report['confidence']:.0f}%"
    lines = ["# Evaluation report", "",
             f"Success rate in % with its {conf} Wilson interval and the number of tasks, per benchmark and "
             f"category; Δ is the difference to `{models[0]}` in points.", ""]
    for bench, data in report["benchmarks"].items():
        lines += [f"## {bench}", ""]
        protocols = {m: p for m, p in (data.get("protocol") or {}).items() if p}
        if protocols:
            lines += ["Protocol: " + ", ".join(f"{m} {'/'.join(p)}" for m, p in protocols.items()), ""]
        heads = data.get("headline") or {}
        names = list(dict.fromkeys(k for figures in heads.values() for k in figures))
        if names:
            label = data.get("headline_label") or f"{bench}'s own averaging"
            lines += [f"Headline, in %: {label}.", "", "| model | " + " | ".join(names) + " |",
                      "|" + " --- |" * (len(names) + 1)]
            lines += ["| " + " | ".join([model, *("–" if heads[model].get(k) is None else f"{100 * heads[model][k]:.1f}"
                                                  for k in names)]) + " |" for model in models]
            lines.append("")
        notes = [f"- {model}: {note}" for model, texts in (data.get("notes") or {}).items() for note in texts]
        if notes:
            lines += ["**Read with care:**", "", *notes, ""]
        header = ["category", *models, *(f"Δ {m}" for m in models[1:])]
        lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        for category in data["categories"]:
            row = data["results"][category]
            base = row[models[0]]
            deltas = [f"{100 * (row[m]['rate'] - base['rate']):+.1f}" if row[m]["n"] and base["n"] else "–"
                      for m in models[1:]]
            name = f"**{category}**" if category == ALL else category
            lines.append("| " + " | ".join([name, *(_percent(row[m]) for m in models), *deltas]) + " |")
        lines.append("")
        metric_names = sorted({k for row in data["results"].values() for cell in row.values() for k in cell["metrics"]})
        scored = any(cell["score"] is not None for row in data["results"].values() for cell in row.values())
        if scored:
            metric_names = ["score", *metric_names]
        if metric_names:
            lines += [f"Means per task ({bench}):", "",
                      "| model | category | " + " | ".join(metric_names) + " |", "|" + " --- |" * (len(metric_names) + 2)]
            for model in models:
                for category in data["categories"]:
                    cell = data["results"][category][model]
                    if not cell["n"]:
                        continue
                    values = [cell["score"] if name == "score" else cell["metrics"].get(name) for name in metric_names]
                    cells = " | ".join("–" if v is None else f"{v:.3f}" for v in values)
                    lines.append(f"| {model} | {category} | {cells} |")
            lines.append("")
    return "\n".join(lines)


def write_report(report: Mapping[str, Any], out_dir: Path, *, plots: bool = True) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    (out_dir / "report.md").write_text(markdown(report))
    written = [out_dir / "report.json", out_dir / "report.md"]
    if plots:
        written += plot(report, out_dir)
    return written


PLOT_WIDTH_IN, PLOT_DPI = 8.0, 120  # 960 px: readable at page width whatever the number of categories


def plot(report: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """One PNG per benchmark: success rate per category as horizontal bars, one per model, with
    interval whiskers. The width is fixed (``PLOT_WIDTH_IN``); more categories make it taller, not
    wider, so a benchmark with a dozen categories stays readable at page width."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plots")
        return []
    models = report["models"]
    paths = []
    for bench, data in report["benchmarks"].items():
        categories = data["categories"]
        height = 0.8 / max(1, len(models))
        fig, ax = plt.subplots(figsize=(PLOT_WIDTH_IN, 1.4 + 0.28 * len(categories) * max(1, len(models)) ** 0.6))
        for i, model in enumerate(models):
            cells = [data["results"][c][model] for c in categories]
            rates = [100 * c["rate"] for c in cells]
            errors = [[max(0.0, 100 * (c["rate"] - c["ci"][0])) for c in cells],
                      [max(0.0, 100 * (c["ci"][1] - c["rate"])) for c in cells]]
            ys = [j + (i - (len(models) - 1) / 2) * height for j in range(len(categories))]
            ax.barh(ys, rates, height=height, xerr=errors, capsize=2, label=model)
        ax.set_yticks(range(len(categories)))
        ax.set_yticklabels([f"{c} (n={max(data['results'][c][m]['n'] for m in models)})" for c in categories], fontsize=8)
        ax.invert_yaxis()  # first category on top, as in the tables
        ax.set_xlim(0, 100)
        ax.set_xlabel("success rate (%)")
        ax.set_title(f"{bench}: success rate, {100 * report['confidence']:.0f}% Wilson interval", fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        path = out_dir / f"{_slug(bench)}.png"
        fig.savefig(path, dpi=PLOT_DPI)
        plt.close(fig)
        paths.append(path)
    return paths


def _latest(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per task, the last written (a task played again on resume replaces its
    failed run), in the order tasks were first recorded."""
    latest: dict[Any, dict[str, Any]] = {}
    for record in records:
        latest[record.get("task_id")] = record
    return list(latest.values())


def outcomes_of(out_dir: Path, model: str, benchmark: str) -> list[dict[str, Any]]:
    """The recorded outcomes of one model on one benchmark (one per task)."""
    return _latest(read_jsonl(results_path(out_dir, model, benchmark)))
