"""The training report: ``report.md`` with the before/after table of the held-out evaluation,
and PNG plots of every reward component (and the total) over the training steps."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prove_core.eval.core import paired_interval

REWARD_PREFIX = "reward/"


def _series(records: Sequence[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for record in records:
        for key, value in record.items():
            if key.startswith(REWARD_PREFIX) and key != "reward/best" and isinstance(value, int | float):
                out.setdefault(key[len(REWARD_PREFIX):], []).append((int(record["step"]), float(value)))
    return out


def _plots(out_dir: Path, series: dict[str, list[tuple[int, float]]], result: Any) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []
    if series:
        names = sorted(series, key=lambda n: (n != "total", n))
        cols = min(3, len(names))
        rows = (len(names) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
        for ax, name in zip(axes.flat, names):
            steps, values = zip(*series[name])
            color = "#3b6ea8" if name != "total" else "#b5462f"
            ax.plot(steps, values, color=color, lw=0.8, alpha=0.45)
            window = max(1, min(5, len(values) // 3))  # each step sees other prompts: show the trend too
            smooth = [sum(values[max(0, i - window + 1): i + 1]) / len(values[max(0, i - window + 1): i + 1])
                      for i in range(len(values))]
            ax.plot(steps, smooth, color=color, lw=1.8)
            ax.set_title(name, fontsize=10)
            ax.set_xlabel("step", fontsize=8)
            ax.tick_params(labelsize=8)
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        fig.suptitle(f"Mean reward per component over {_method(result)} steps (training rollouts; thick: moving average)",
                     fontsize=11)
        fig.tight_layout()
        fig.savefig(out_dir / "reward_components.png", dpi=110)
        plt.close(fig)
        paths.append(str(out_dir / "reward_components.png"))
    if result.before is not None and result.after is not None:
        phases = held_out_phases(result)
        names = ["total", *sorted(set().union(*(summary["components"] for _, summary in phases)))]
        fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(names)), 3.2))
        xs = range(len(names))
        width = 0.8 / len(phases)
        colors = ["#c9d3de", "#9aa9bb", "#3b6ea8"][-len(phases):]
        for k, ((label, summary), color) in enumerate(zip(phases, colors)):
            heights = [summary["total"] if n == "total" else summary["components"].get(n, 0.0) for n in names]
            ax.bar([x + (k - (len(phases) - 1) / 2) * width for x in xs], heights, width=width, label=label, color=color)
        ax.set_xticks(list(xs), names, rotation=20, fontsize=8)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_title("Held-out mean reward per component")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "before_after.png", dpi=110)
        plt.close(fig)
        paths.append(str(out_dir / "before_after.png"))
    return paths


def _method(result: Any) -> str:
    method: str | None = getattr(result, "method", "GRPO")
    return method or "training"


def _phase_names(result: Any) -> tuple[str, str]:
    """How the report names the held-out evaluations a backend returns as ``before`` and
    ``after``: around its ``method`` ("before GRPO", "after DPO"), "after SFT" when a warm-up ran
    first, and for a backend that trains nothing (``method=None``) the evaluations as they are."""
    method = getattr(result, "method", "GRPO")
    if method is None:
        return ("first evaluation", "second evaluation")
    return ("before " + method if getattr(result, "start", None) is None else "after SFT", "after " + method)


def held_out_phases(result: Any) -> list[tuple[str, dict[str, Any]]]:
    """The held-out evaluations in order, with their names: the starting model when a warm-up ran,
    then ``before`` and ``after`` (one column when a backend that trains nothing returns the same)."""
    before, after = _phase_names(result)
    if getattr(result, "method", "GRPO") is None and result.after == result.before:
        return [("held out", result.before)]
    return [(label, summary) for label, summary in (("start model", getattr(result, "start", None)),
                                                    (before, result.before), (after, result.after))
            if summary is not None]


# Rows of the held-out table besides the reward components: (summary key, label)
_HEADLINES = (("total", "**total**"), ("success", "**task success**"), ("success_call", "call tasks solved"),
              ("success_decline", "clarify/abstain right (no call)"), ("calls", "tool calls per rollout"))


def _value(summary: dict[str, Any], name: str) -> float | None:
    """``name``'s mean in an evaluation summary (``training.summarize``): a headline (the total,
    ``success``, ``success_call``, ``success_decline``, ``calls``, when the summary has it) or a
    component."""
    if name == "total":
        return float(summary["total"])
    if name in dict(_HEADLINES):
        value: float | None = summary.get(name)
        return value
    component: float | None = summary["components"].get(name)
    return component


def _pairs(before: dict[str, Any], after: dict[str, Any], name: str) -> list[tuple[float, float]]:
    """(before, after) of one component (or the total) for each task scored in both evaluations."""
    pairs = [(_value(before[t], name), _value(after[t], name)) for t in sorted(set(before) & set(after))]
    return [(x, y) for x, y in pairs if x is not None and y is not None]


def _held_out_table(result: Any) -> list[str]:
    """The held-out evaluations side by side (the starting model when a warm-up ran, before and
    after GRPO) and each phase's change with its paired interval."""
    phases = held_out_phases(result)
    paired = len(phases) > 1 and all("tasks" in summary for _, summary in phases)
    steps = list(zip(phases, phases[1:]))
    names = [k for k, _ in _HEADLINES if all(_value(summary, k) is not None for _, summary in phases)]
    names += sorted(set().union(*(summary["components"] for _, summary in phases)))
    first, last = phases[0][1], phases[-1][1]
    lines = ["## Held-out evaluation", "",
             f"{last['rollouts']} held-out rollouts (tasks never trained on), mean per rollout. **Task success**: "
             "the ground truth's end state reached on a call task (and, on a task that only reads, every one of its "
             "reads made), no call made on a clarify/abstain task. Reward components are each over the tasks they "
             "apply to."
             + (f" Each interval is a 95% paired bootstrap interval of that phase's change over the "
                f"{len(set(first['tasks']) & set(last['tasks']))} tasks: one that contains 0 is within the noise "
                "of this many tasks." if paired else ""), ""]
    header = "| | " + " | ".join(label for label, _ in phases) + " |"
    for (a, _), (b, _) in steps:
        header += f" {'change' if len(steps) == 1 else f'{a} -> {b}'} |" + (" 95% interval |" if paired else "")
    lines += [header, "| --- |" + " ---: |" * (len(phases) + len(steps) * (2 if paired else 1))]
    for name in names:
        label = dict(_HEADLINES).get(name, name)
        values = [_value(summary, name) for _, summary in phases]
        cells = ["" if v is None else f"{v:.3f}" for v in values]
        for (_, x), (_, y) in steps:
            xv, yv = _value(x, name), _value(y, name)
            cells.append("" if xv is None or yv is None else f"{yv - xv:+.3f}")
            if paired:
                interval = paired_interval(_pairs(x["tasks"], y["tasks"], name))
                cells.append(f"[{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else "")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", f"Best possible total on these tasks: {last['best']:.3f}.", ""]
    return lines


def held_out_rows(result: Any) -> list[str]:
    """The held-out table alone (its header and the headline rows), for the terminal."""
    table = [line for line in _held_out_table(result) if line.startswith("|")]
    keep = {label for _, label in _HEADLINES}
    return table[:2] + [line for line in table[2:] if line.split(" | ")[0].removeprefix("| ") in keep]


def write_report(out_dir: Path, records: Sequence[dict[str, Any]], result: Any, *, settings: Any,
                 seconds: float) -> Path:
    series = _series(records)
    plots = _plots(out_dir, series, result)
    method = getattr(result, "method", "GRPO")
    if method is None:
        what = "trains nothing (it reports no training method)"
    elif method == "GRPO":
        what = (f"{result.steps} GRPO steps of {settings.batch_size} prompts x {settings.group_size} rollouts; "
                f"KL {settings.kl}; lr {settings.lr}")
    else:
        what = f"{result.steps} {method} steps"
    lines = ["# Training report", "", f"Backend **{settings.backend}**; {what}; {seconds} s.", ""]
    if result.before is not None and result.after is not None:
        lines += _held_out_table(result)
    if series.get("total"):
        totals = [v for _, v in series["total"]]
        third = max(1, len(totals) // 3)
        lines += ["## Training rollouts", "",
                  f"Mean total reward of the training rollouts: {sum(totals[:third]) / third:.3f} over the first "
                  f"{third} step(s), {sum(totals[-third:]) / third:.3f} over the last {third} (each step plays other "
                  "prompts, so single steps are noisy; every step: `metrics.jsonl`).", ""]
    for path in plots:
        lines += [f"![{Path(path).stem}]({Path(path).name})", ""]
    for key, value in result.details.items():
        if isinstance(value, str | int | float):
            lines.append(f"- {key}: {value}")
    report = out_dir / "report.md"
    report.write_text("\n".join(lines).rstrip() + "\n")
    return report
