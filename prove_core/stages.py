"""``prove run``: load an experiment, resolve it against the plugins, run its stages in order.

Stages (``STAGES``): ``episode`` (a scripted multi-step episode on live sessions), ``synth`` (a
grounded corpus), ``reward`` (score rollouts), ``train`` (multi-turn GRPO) and ``eval``
(benchmarks), in the order ``stages`` lists them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from prove_core.config import Experiment, load_experiment, resolve
from prove_core.env.episode import run_episode
from prove_core.env.runtime import Environment, build_runtime
from prove_core.errors import ConfigError
from prove_core.model import JsonlWriter, to_json

log = structlog.get_logger()


def build_environment(experiment: Experiment, plugins: Any) -> Environment:
    """The experiment's servers in one environment, with its ``[sessions]`` settings and the
    plugins' lifecycle hooks."""
    return Environment([build_runtime(plugins.registry.load("servers", entry.name), seed=entry.seed,
                                      options=entry.options, sessions=experiment.sessions)
                        for entry in resolve(experiment, plugins.registry)], hooks=plugins.hook)


def _episode_stage(experiment: Experiment, env: Environment, plugins: Any, echo: Callable[[str], None]) -> dict[str, Any]:
    if experiment.episode is None:
        raise ConfigError("$.episode: the 'episode' stage needs an [episode] section with steps")
    result = run_episode(env, experiment.episode, seed=experiment.seed)
    for step in result.steps:
        mark = "ok  " if step.ok else "FAIL"
        shown = step.result.structured
        text = json.dumps(shown, sort_keys=True, ensure_ascii=False)
        echo(f"{mark} {step.id:<12} {step.tool}({json.dumps(step.arguments, sort_keys=True)})")
        echo(f"       -> {'error ' if step.result.is_error else ''}{text[:160]}{'...' if len(text) > 160 else ''}")
    record = {
        "id": f"{experiment.name}-episode",
        "session_id": result.session_id,
        "task": to_json(result.task),
        "steps": [{"id": s.id, "tool": s.tool, "arguments": s.arguments, **s.result.to_dict()} for s in result.steps],
        "final_state_hash": result.final_state_hash,
        "ok": result.ok,
    }
    out = experiment.run_dir / "episode.jsonl"
    out.unlink(missing_ok=True)
    with JsonlWriter(out) as writer:
        writer.write(record)
    failed = sum(not s.ok for s in result.steps)
    echo(f"episode: {len(result.steps)} calls, {failed} unexpected outcomes, "
         f"{len(result.task.calls)} ground-truth steps with "
         f"{sum(len(c.depends_on) for c in result.task.calls)} dependency edges; written to {out}")
    return {"ok": result.ok, "calls": len(result.steps), "failed": failed, "output": str(out)}


def _synth_stage(experiment: Experiment, env: Environment, plugins: Any, echo: Callable[[str], None]) -> dict[str, Any]:
    from prove_core.synth.pipeline import synthesize

    report = synthesize(experiment, plugins, echo=echo)
    return {"ok": report["reached_target"], "examples": report["examples"], "drops": report["drops"],
            "output": str(experiment.run_dir / "synth" / "corpus.jsonl")}


def _reward_stage(experiment: Experiment, env: Environment, plugins: Any, echo: Callable[[str], None]) -> dict[str, Any]:
    """Score ``[reward].input`` (default: the corpus the ``synth`` stage wrote, whose reference
    turns must score the maximum) into ``<run_dir>/reward``."""
    from prove_core.config import RewardConfig
    from prove_core.reward.core import build_reward
    from prove_core.reward.report import score_rollouts

    settings = experiment.reward or RewardConfig()
    source = settings.input
    if source is None:
        if "synth" not in experiment.stages:
            raise ConfigError("$.reward.input: the 'reward' stage needs a rollouts file (or a 'synth' stage before it)")
        source = str(experiment.run_dir / "synth" / "corpus.jsonl")
    options = {name: runtime.options for name, runtime in env.runtimes.items()}
    reward = build_reward(settings, plugins.registry, server_options=options, sessions=experiment.sessions)
    report = score_rollouts(source, reward=reward, registry=plugins.registry, out_dir=experiment.run_dir / "reward",
                            parser=settings.parser, worst=settings.worst, plots=settings.plots, echo=echo)
    return {"ok": not report["invalid"] and report["rollouts"] > 0, "rollouts": report["rollouts"],
            "mean_total": report["total"]["mean"], "invalid": len(report["invalid"]),
            "output": str(experiment.run_dir / "reward" / "report.json")}


def _eval_stage(experiment: Experiment, env: Environment, plugins: Any, echo: Callable[[str], None]) -> dict[str, Any]:
    """Every ``[[eval.models]]`` on every ``[[eval.benchmarks]]``; report in ``<run_dir>/eval``."""
    from prove_core.eval.core import ALL, run_evaluation

    report = run_evaluation(experiment, plugins, echo=echo)
    played = sum(cell["n"] for data in report["benchmarks"].values() for cell in data["results"][ALL].values())
    out = experiment.eval.output if experiment.eval and experiment.eval.output else experiment.run_dir / "eval"
    return {"ok": played > 0, "tasks": played, "output": str(Path(out) / "report.json")}


def _train_stage(experiment: Experiment, env: Environment, plugins: Any, echo: Callable[[str], None]) -> dict[str, Any]:
    """Multi-turn GRPO with the configured backend (``[train]``; docs/training.md)."""
    from prove_core.train.core import run_training

    return run_training(experiment, plugins, echo=echo)


STAGES: dict[str, Callable[..., dict[str, Any]]] = {"episode": _episode_stage, "synth": _synth_stage,
                                                    "reward": _reward_stage, "eval": _eval_stage,
                                                    "train": _train_stage}


def run_experiment(source: str | Path | None, *, plugins: Any, echo: Callable[[str], None] = print) -> dict[str, Any]:
    experiment = load_experiment(source)
    unknown = [s for s in experiment.stages if s not in STAGES]
    if unknown:
        raise ConfigError(f"$.stages: unknown stage(s) {unknown}; available: {sorted(STAGES)}")
    env = build_environment(experiment, plugins)
    structlog.contextvars.bind_contextvars(run=experiment.name)
    echo(f"experiment {experiment.name!r}: servers {', '.join(env.runtimes)}; stages {', '.join(experiment.stages)}")
    summary: dict[str, Any] = {"ok": True, "stages": {}}
    for stage in experiment.stages:
        started = time.perf_counter()
        outcome = STAGES[stage](experiment, env, plugins, echo)
        outcome["seconds"] = round(time.perf_counter() - started, 3)
        summary["stages"][stage] = outcome
        summary["ok"] = summary["ok"] and outcome["ok"]
    experiment.run_dir.mkdir(parents=True, exist_ok=True)
    (experiment.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    echo(f"{'done' if summary['ok'] else 'FAILED'}: summary in {experiment.run_dir / 'summary.json'}")
    return summary
