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
        fig.suptitle("Mean reward per component over GRPO steps (training rollouts; thick: moving average)",
                     fontsize=11)
        fig.tight_layout()
        fig.savefig(out_dir / "reward_components.png", dpi=110)
        plt.close(fig)
        paths.append(str(out_dir / "reward_components.png"))
    if result.before is not None and result.after is not None:
        names = ["total", *sorted(set(result.before["components"]) | set(result.after["components"]))]
        before = [result.before["total"] if n == "total" else result.before["components"].get(n, 0.0) for n in names]
        after = [result.after["total"] if n == "total" else result.after["components"].get(n, 0.0) for n in names]
        fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(names)), 3.2))
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], before, width=0.4, label="before GRPO", color="#9aa9bb")
        ax.bar([x + 0.2 for x in xs], after, width=0.4, label="after GRPO", color="#3b6ea8")
        ax.set_xticks(list(xs), names, rotation=20, fontsize=8)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_title("Held-out mean reward per component")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "before_after.png", dpi=110)
        plt.close(fig)
        paths.append(str(out_dir / "before_after.png"))
    return paths


def _value(summary: dict[str, Any], name: str) -> float | None:
    """``name``'s mean in an evaluation summary (``training.summarize``): the total, the task
    success rate (``success``, when the summary has it) or a component."""
    if name == "success":
        success: float | None = summary.get("success")
        return success
    value: float | None = summary["total"] if name == "total" else summary["components"].get(name)
    return value


def _pairs(before: dict[str, Any], after: dict[str, Any], name: str) -> list[tuple[float, float]]:
    """(before, after) of one component (or the total) for each task scored in both evaluations."""
    pairs = [(_value(before[t], name), _value(after[t], name)) for t in sorted(set(before) & set(after))]
    return [(x, y) for x, y in pairs if x is not None and y is not None]


def write_report(out_dir: Path, records: Sequence[dict[str, Any]], result: Any, *, settings: Any,
                 seconds: float) -> Path:
    series = _series(records)
    plots = _plots(out_dir, series, result)
    lines = ["# Training report", "",
             f"Backend **{settings.backend}**; {result.steps} GRPO steps of {settings.batch_size} prompts x "
             f"{settings.group_size} rollouts; KL {settings.kl}; lr {settings.lr}; {seconds} s.", ""]
    if result.before is not None and result.after is not None:
        b, a = result.before, result.after
        paired = "tasks" in b and "tasks" in a
        lines += ["## Held-out evaluation", "",
                  f"{b['rollouts']} held-out rollouts (tasks never trained on), mean reward per component "
                  "(each over the tasks it applies to)."
                  + (" **Task success** is the share of rollouts that did the task, whatever the reward pays: "
                     "the ground truth's end state reached (a clarify/abstain task: no call made)."
                     if "success" in b and "success" in a else "")
                  + (f" The interval is a 95% paired bootstrap interval of the change over the "
                     f"{len(set(b['tasks']) & set(a['tasks']))} tasks: one that contains 0 is within the noise "
                     "of this many tasks." if paired else ""), "",
                  f"| | before GRPO | after GRPO | change |{' 95% interval |' if paired else ''}",
                  f"| --- | ---: | ---: | ---: |{' ---: |' if paired else ''}"]
        success = ["success"] if "success" in b and "success" in a else []
        for name in ["total", *success, *sorted(set(b["components"]) | set(a["components"]))]:
            x, y = _value(b, name), _value(a, name)
            change = f"{y - x:+.3f}" if x is not None and y is not None else ""
            label = {"total": "**total**", "success": "**task success**"}.get(name, name)
            row = f"| {label} | {'' if x is None else f'{x:.3f}'} | {'' if y is None else f'{y:.3f}'} | {change} |"
            if paired:
                interval = paired_interval(_pairs(b["tasks"], a["tasks"], name))
                row += f" [{interval[0]:+.3f}, {interval[1]:+.3f}] |" if interval else " |"
            lines.append(row)
        lines += ["", f"Best possible total on these tasks: {a['best']:.3f}.", ""]
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
