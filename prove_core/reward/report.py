"""``prove reward``: score a JSONL of rollouts and write a report.

Reads the rollouts (format: docs/reward.md), scores each with the configured ``Reward``, and
writes into the output folder:

- ``scores.jsonl`` — one line per rollout: total, every component's value and explanation;
- ``report.json`` — per-component mean/min/max/std over the rollouts it applies to, validity
  failures by tier, the worst rollouts with their explanations, invalid records;
- ``report.md`` — the same for people, with the histograms;
- ``hist_<component>.png`` — a histogram of each component and of the total (matplotlib,
  imported only here).
"""

from __future__ import annotations

import heapq
import json
import math
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from prove_core.errors import ProveError
from prove_core.reward.core import Reward, RewardResult, rollout_from_record
from prove_core.reward.parsing import Parser, load_parser

log = structlog.get_logger()


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "mean": None, "min": None, "max": None, "std": None}
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return {"n": len(values), "mean": round(mean, 6), "min": round(min(values), 6), "max": round(max(values), 6),
            "std": round(std, 6)}


class _Parsers:
    """Registered parsers by name, loaded once each."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self.cache: dict[str, Parser] = {}

    def __call__(self, name: str) -> Parser:
        parser = self.cache.get(name)
        if parser is None:
            parser = self.cache[name] = load_parser(self.registry, name)
        return parser


def reward_setup(config: str | Path | None, registry: Any) -> tuple[Reward, Any]:
    """The ``Reward`` and ``[reward]`` settings of an experiment file (``None``: the default
    preset's reward on the servers' default seed options)."""
    from prove_core.config import RewardConfig, load_experiment, resolve
    from prove_core.reward.core import build_reward

    if config is None:
        settings = RewardConfig()
        return build_reward(settings, registry), settings
    experiment = load_experiment(config)
    settings = experiment.reward or RewardConfig()
    options = {entry.name: entry.options for entry in resolve(experiment, registry)}
    return build_reward(settings, registry, server_options=options, sessions=experiment.sessions), settings


def score_rollouts(path: str | Path, *, reward: Reward, registry: Any, out_dir: str | Path, parser: str = "hermes",
                   worst: int = 10, plots: bool = True, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Score every rollout of ``path`` and write the report into ``out_dir``; returns the report."""
    path, out = Path(path), Path(out_dir)
    if not path.is_file():
        raise ProveError(f"rollouts file {path} does not exist")
    parsers = _Parsers(registry)
    parsers(parser)  # an unknown default parser is a user error, reported before any work
    out.mkdir(parents=True, exist_ok=True)
    values: dict[str, list[float]] = {c.name: [] for c in reward.components}
    errors: Counter[str] = Counter()
    totals: list[float] = []
    tiers: Counter[str] = Counter()
    invalid: list[dict[str, Any]] = []
    mismatches: dict[str, str] = {}
    checked: set[tuple[tuple[str, ...], int]] = set()
    heap: list[tuple[float, int, dict[str, Any]]] = []  # the `worst` lowest totals
    started = time.perf_counter()
    with (out / "scores.jsonl").open("w") as scores:
        for line_no, record in enumerate(_records(path, invalid), start=1):
            if record is None:
                continue
            try:
                rollout = rollout_from_record(record, parser=parsers, default_parser=parser, line=line_no)
            except ProveError as exc:
                invalid.append({"line": line_no, "id": record.get("id") if isinstance(record, dict) else None,
                                "error": str(exc)})
                continue
            key = (tuple(rollout.task.servers), rollout.task.seed)
            if key not in checked:
                checked.add(key)
                try:
                    problem = reward.servers.check_initial_state(rollout.task)
                except ProveError as exc:
                    problem = str(exc)
                if problem:
                    mismatches[f"{','.join(key[0])}@{key[1]}"] = problem
            result = reward.score(rollout)
            _collect(result, values, errors, tiers)
            totals.append(result.total)
            data = result.to_json()
            scores.write(json.dumps(data, sort_keys=True) + "\n")
            item = (result.shortfall, -len(totals), data)  # worst = furthest below its attainable best
            if len(heap) < worst:
                heapq.heappush(heap, item)
            elif worst and item > heap[0]:
                heapq.heapreplace(heap, item)
    seconds = time.perf_counter() - started
    report = {
        "input": str(path),
        "rollouts": len(totals),
        "invalid": invalid,
        "weights": reward.weights,
        "total": _stats(totals),
        "components": {name: {**_stats(v), "errors": errors[name]} for name, v in values.items()},
        "validity_failures_by_tier": dict(sorted(tiers.items())),
        "initial_state_mismatches": mismatches,
        "worst": [data for _, _, data in sorted(heap, reverse=True)],
        "seconds": round(seconds, 3),
        "rollouts_per_s": round(len(totals) / seconds, 1) if seconds > 0 and totals else None,
        "histograms": [],
    }
    if plots and totals:
        report["histograms"] = _histograms(out, totals, values)
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=False))
    (out / "report.md").write_text(_markdown(report))
    _echo_summary(report, out, echo)
    return report


def _records(path: Path, invalid: list[dict[str, Any]]) -> Any:
    """Each line's JSON value, or ``None`` (recorded as invalid) when a line is not JSON."""
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            line = raw.strip()
            if not line:
                yield None
                continue
            try:
                yield json.loads(line)
            except (ValueError, RecursionError) as exc:
                invalid.append({"line": line_no, "id": None, "error": f"not JSON: {exc}"})
                yield None


def _collect(result: RewardResult, values: dict[str, list[float]], errors: Counter[str], tiers: Counter[str]) -> None:
    for name, score in result.scores.items():
        if score.error:
            errors[name] += 1
        elif score.applies:
            values.setdefault(name, []).append(score.value)
    validity = result.scores.get("validity")
    if validity is not None and validity.applies:
        for row in validity.details.get("calls", ()):
            tiers["passed" if row.get("failed_tier") is None else f"tier_{row['failed_tier']}"] += 1


def _histograms(out: Path, totals: list[float], values: dict[str, list[float]]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    written = []
    for name, data in [("total", totals), *values.items()]:
        if not data:
            continue
        fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
        low, high = min(data), max(data)
        bins = 20 if high > low else 1
        ax.hist(data, bins=bins, range=(low, high) if high > low else (low - 0.5, low + 0.5), color="#3b6ea5",
                edgecolor="white")
        ax.set_title(f"{name} (n={len(data)}, mean={sum(data) / len(data):.3f})")
        ax.set_xlabel("value")
        ax.set_ylabel("rollouts")
        fig.tight_layout()
        file = out / f"hist_{name}.png"
        fig.savefig(file)
        plt.close(fig)
        written.append(file.name)
    return written


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}"


def _markdown(report: dict[str, Any]) -> str:
    lines = [f"# Reward report: {report['input']}", "",
             f"{report['rollouts']} rollouts scored in {report['seconds']} s"
             + (f" ({report['rollouts_per_s']:,} rollouts/s)" if report["rollouts_per_s"] else "")
             + (f"; {len(report['invalid'])} invalid records" if report["invalid"] else "") + ".", "",
             "| component | weight | mean | min | max | std | rollouts it applies to | errors |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    t = report["total"]
    lines.append(f"| **total** | | {_fmt(t['mean'])} | {_fmt(t['min'])} | {_fmt(t['max'])} | {_fmt(t['std'])} | {t['n']} | |")
    for name, s in report["components"].items():
        lines.append(f"| {name} | {report['weights'][name]} | {_fmt(s['mean'])} | {_fmt(s['min'])} | {_fmt(s['max'])} | "
                     f"{_fmt(s['std'])} | {s['n']} | {s['errors']} |")
    if report["validity_failures_by_tier"]:
        tiers = ", ".join(f"{k} {v}" for k, v in report["validity_failures_by_tier"].items())
        lines += ["", "Validity, calls by outcome: " + tiers]
    for key, problem in report["initial_state_mismatches"].items():
        lines += ["", f"**Initial state mismatch** ({key}): {problem}"]
    if report["histograms"]:
        lines += ["", "## Histograms", ""] + [f"![{h}]({h})" for h in report["histograms"]]
    if report["worst"]:
        lines += ["", f"## The {len(report['worst'])} lowest-scoring rollouts (furthest below their best total)", ""]
        for item in report["worst"]:
            lines += [f"### {item['id']}: total {item['total']:.3f} of {item['best']:.3f}", ""]
            for name, score in item["components"].items():
                if score["applies"] or score.get("error"):
                    lines.append(f"- **{name}** {score['value']:.3f}: {score['explanation']}")
            lines.append("")
    if report["invalid"]:
        lines += ["", "## Invalid records", ""] + [f"- line {i['line']}: {i['error']}" for i in report["invalid"][:50]]
    return "\n".join(lines) + "\n"


def _echo_summary(report: dict[str, Any], out: Path, echo: Callable[[str], None]) -> None:
    rate = f" ({report['rollouts_per_s']:,} rollouts/s)" if report["rollouts_per_s"] else ""
    echo(f"{report['rollouts']} rollouts scored in {report['seconds']} s{rate}")
    width = max([len("total"), *(len(n) for n in report["components"])])
    echo(f"{'component'.ljust(width)}  weight    mean  applies")
    t = report["total"]
    echo(f"{'total'.ljust(width)}          {_fmt(t['mean']):>6}  {t['n']}")
    for name, s in report["components"].items():
        errors = f"  ({s['errors']} errors)" if s["errors"] else ""
        echo(f"{name.ljust(width)}  {report['weights'][name]:>6}  {_fmt(s['mean']):>6}  {s['n']}{errors}")
    for problem in report["initial_state_mismatches"].values():
        echo(f"warning: {problem}")
    for item in report["invalid"][:5]:
        echo(f"invalid record, line {item['line']}: {item['error']}")
    echo(f"report: {out / 'report.md'}")
