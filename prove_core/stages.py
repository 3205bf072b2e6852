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

from prove_core.config import (
    Experiment,
    RewardConfig,
    SynthConfig,
    TrainConfig,
    config_problems,
    listed_more_than_once,
    load_experiment,
    raise_problems,
    resolve,
)
from prove_core.env.episode import run_episode
from prove_core.env.runtime import Environment, build_runtime
from prove_core.errors import ConfigError, PluginError, UnknownComponent, did_you_mean
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


# -- the validation pass ---------------------------------------------------------------------------


def _collect(problems: list[str], check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one phase-2 builder; its ``ConfigError`` becomes problems instead of stopping the pass."""
    try:
        return check(*args, **kwargs)
    except ConfigError as exc:
        problems.extend(config_problems(exc))
    except PluginError as exc:
        problems.append(str(exc))
    return None


def _episode_problems(experiment: Experiment, registry: Any) -> list[str]:
    """Each scripted step names a tool of the experiment's servers (as the episode's environment
    publishes it: ``<server>_<tool>`` when there are several)."""
    from prove_core.env.runtime import public_name

    names = [s.name for s in experiment.servers]
    tools = []
    for name in names:
        try:
            server = registry.load("servers", name)
        except (UnknownComponent, PluginError):
            return []  # reported with the servers
        tools += [public_name(name, tool, prefixed=len(names) > 1) for tool in server.tools]
    assert experiment.episode is not None
    return [f"$.episode.steps[{i}].tool: no tool {step.tool!r} on {', '.join(names)}{did_you_mean(step.tool, tools)}"
            for i, step in enumerate(experiment.episode.steps) if step.tool not in tools]


def _synth_problems(experiment: Experiment, registry: Any, running: bool) -> list[str]:
    from prove_core.synth.exporters import export_problems
    from prove_core.synth.perturbation import build_perturber
    from prove_core.synth.pipeline import build_component

    cfg, problems = experiment.synth or SynthConfig(), list[str]()
    for role, kind in SynthConfig.COMPONENTS.items():
        try:
            registry.config_class(kind, getattr(cfg, role))
        except (UnknownComponent, PluginError) as exc:
            problems.append(f"$.synth.{role}: {exc}")
            continue
        _collect(problems, build_component, registry, cfg, role)
    if cfg.perturb:
        _collect(problems, build_perturber, cfg.perturbations, registry, path="$.synth.perturbations")
    names = [s.name for s in experiment.servers]
    for i, group in enumerate(cfg.mounts):
        unknown = [n for n in group if n not in names]
        if unknown:
            problems.append(f"$.synth.mounts[{i}]: {', '.join(map(repr, unknown))} is not one of the experiment's "
                            f"servers ({', '.join(names)}){did_you_mean(unknown[0], names)}")
        elif len(set(group)) < 2:
            problems.append(f"$.synth.mounts[{i}]: a mount names at least two of the experiment's servers")
    problems += export_problems(cfg.exports, check_packages=running)
    if running:
        problems += [f"$.synth.imports[{i}].path: {spec.path} does not exist" for i, spec in enumerate(cfg.imports)
                     if not Path(spec.path).expanduser().is_file()]
    return problems


def _parser_problem(registry: Any, name: str, where: str) -> list[str]:
    try:
        registry.component("parsers", name)
    except UnknownComponent as exc:
        return [f"{where}: {exc}"]
    return []


def _train_problems(experiment: Experiment, registry: Any, running: bool, produced: set[str]) -> list[str]:
    settings, problems = experiment.train or TrainConfig(), list[str]()
    checked = registry.check_entry("trainers", settings.backend, settings.options, where="$.train", name_key="backend",
                                   problems=problems)
    missing = registry.missing_requirements("trainers", settings.backend) if checked is not None and running else None
    if missing:
        problems.append(f"$.train.backend: {missing}")
    problems += _parser_problem(registry, settings.parser, "$.train.parser")
    if settings.perturb and (experiment.synth is None or not experiment.synth.perturb):
        from prove_core.synth.perturbation import build_perturber

        _collect(problems, build_perturber, (experiment.synth or SynthConfig()).perturbations, registry,
                 path="$.synth.perturbations")
    if running:
        if settings.corpus is not None and not Path(settings.corpus).is_file():
            problems.append(f"$.train.corpus: {settings.corpus} does not exist")
        elif settings.corpus is None and "synth" not in produced and \
                not (experiment.run_dir / "synth" / "corpus.jsonl").is_file():
            problems.append(f"$.train.corpus: {experiment.run_dir / 'synth' / 'corpus.jsonl'} does not exist; run the "
                            "'synth' stage first (stages = [\"synth\", \"train\"]) or point [train].corpus at a corpus")
        if settings.model.path is not None and not Path(settings.model.path).expanduser().is_dir():
            problems.append(f"$.train.model.path: {settings.model.path} is not a folder")
    return problems


def _eval_problems(experiment: Experiment, registry: Any, running: bool) -> list[str]:
    settings, problems = experiment.eval, list[str]()
    if settings is None:
        return ["$.eval: the 'eval' stage needs an [eval] section with [[eval.models]] and [[eval.benchmarks]]"]
    for i, model in enumerate(settings.models):  # checked, not built: a local model would load its weights
        checked = registry.check_entry("clients", model.client, model.options, where=f"$.eval.models[{i}]",
                                       name_key="client", problems=problems)
        missing = registry.missing_requirements("clients", model.client) if checked is not None and running else None
        if missing:
            problems.append(f"$.eval.models[{i}].client: {missing}")
    for i, bench in enumerate(settings.benchmarks):  # built when they run: that checks their data paths
        check = registry.build_entry if running else registry.check_entry
        check("evaluators", bench.name, bench.options, where=f"$.eval.benchmarks[{i}]", problems=problems)
    for what, names in (("model", [m.name for m in settings.models]),
                        ("benchmark", [b.label or b.name for b in settings.benchmarks])):
        problems += listed_more_than_once(names, where="$.eval", what=what, hint=" (give one a different name/label)")
    return problems


def check_experiment(experiment: Experiment, plugins: Any, *, run: list[str] | tuple[str, ...] | None = None) -> None:
    """The one validation pass, before any stage starts: every problem of the whole experiment
    in one ``ConfigError``, each with its path (and a did-you-mean for a near miss).

    Every section the config has is checked — its components' names, their options against
    each component's ``Config``, the training backend's options — whether or not this command
    runs it, and so is every section a stage of ``run`` (default: ``experiment.stages``) needs
    with its defaults. For the stages that run, what must exist before they start is checked
    too: input files and folders, optional packages (an ``hf`` export without ``datasets``),
    evaluators built (they check their data). Resume fingerprints are compared only after
    this passes, so a typo is never reported as a changed setting."""
    registry = plugins.registry
    stages = list(experiment.stages if run is None else run)
    problems = [f"$.stages: unknown stage {s!r}{did_you_mean(s, STAGES)} (stages: {', '.join(STAGES)})"
                for s in stages if s not in STAGES]
    _collect(problems, resolve, experiment, registry)
    if "episode" in stages and experiment.episode is None:
        problems.append("$.episode: the 'episode' stage needs an [episode] section with steps")
    elif experiment.episode is not None:
        problems += _episode_problems(experiment, registry)
    if experiment.synth is not None or "synth" in stages:
        problems += _synth_problems(experiment, registry, "synth" in stages)
    if experiment.reward is not None or {"reward", "train"} & set(stages):
        settings = experiment.reward or RewardConfig()
        from prove_core.reward.core import build_reward

        _collect(problems, build_reward, settings, registry)
        problems += _parser_problem(registry, settings.parser, "$.reward.parser")
        if "reward" in stages and settings.input is None and "synth" not in stages[:stages.index("reward")]:
            problems.append("$.reward.input: the 'reward' stage needs a rollouts file (or a 'synth' stage before it)")
        elif "reward" in stages and settings.input is not None and not Path(settings.input).is_file():
            problems.append(f"$.reward.input: {settings.input} does not exist")
    if experiment.train is not None or "train" in stages:
        produced = set(stages[:stages.index("train")]) if "train" in stages else set()
        problems += _train_problems(experiment, registry, "train" in stages, produced)
    if experiment.eval is not None or "eval" in stages:
        problems += _eval_problems(experiment, registry, "eval" in stages)
    raise_problems(list(dict.fromkeys(problems)))


def run_experiment(source: str | Path | None, *, plugins: Any, echo: Callable[[str], None] = print,
                   overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    experiment = load_experiment(source, overrides)
    check_experiment(experiment, plugins)
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
