"""``prove train``: the trainer contract, the held-out evaluation and the training report.

A **trainer** (component kind ``trainers``) is a backend that runs multi-turn GRPO::

    @attrs.frozen
    class Config:                       # the backend's own options: [train.options]
        micro_batch: int | None = None

    class MyTrainer:
        name = "my_trainer"
        Config = Config
        def __init__(self, config): self.config = config
        def train(self, job: TrainJob) -> TrainResult: ...

``job`` carries everything a backend needs: the experiment and its ``[train]`` settings, the
training examples and the held-out ones, the reward (``prove_core.reward.core``: the composed
components), ``environment(task)`` (the task's servers, from which every rollout forks its own
live session) with the rollout limits, the perturber (when ``[train].perturb`` asks to perturb
prompts again), the output folder, a metrics log and ``echo`` for progress. Rollouts go through
``prove_core.reward.rollout.rollout`` (a policy that can batch its episodes, such as a local model's
``prove_plugins.train.models.hf.HFPolicy``, plays them with its ``play_batch`` capability, which runs the
same loop), so tool calls are parsed from the model's text, run on that rollout's session and fed
back with the chat template.

Swapping the backend is one key: ``[train] backend = "openrlhf"``. Bundled: ``trl`` (single
node, CPU or GPU), ``openrlhf`` (Ray + vLLM + DeepSpeed) and ``verl`` (Ray + vLLM, an agent loop
on live sessions); see docs/training.md and docs/integrations.md.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
import structlog

from prove_core.config import Experiment, TrainConfig, resolve
from prove_core.env.runtime import Environment, Environments
from prove_core.errors import ConfigError, UnknownComponent
from prove_core.model import Example, from_json, read_jsonl, write_atomic
from prove_core.reward.core import Reward, RewardContext, RewardResult, Rollout, build_reward, check_scorable
from prove_core.reward.rollout import RolloutLimits

log = structlog.get_logger()

_DEFAULT_LIMITS = RolloutLimits()  # frozen, so one instance serves every call


# -- the contract ------------------------------------------------------------------------------------


class MetricsLog:
    """Per-step training metrics: one JSON object a line (``metrics.jsonl``), mirrored to
    TensorBoard when it is installed. A resumed run keeps earlier steps and replaces later ones."""

    def __init__(self, path: Path, *, tensorboard: bool = True) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._writer = SummaryWriter(str(path.parent / "tensorboard"))
            except Exception:  # tensorboard is optional
                self._writer = None

    def truncate(self, after_step: int) -> None:
        """Drop records past ``after_step`` (a resumed run redoes those steps)."""
        kept = [r for r in read_jsonl(self.path) if r.get("step", 0) <= after_step]  # a torn last line goes too
        write_atomic(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
        if self._writer is not None:
            step = int(record.get("step", 0))
            for key, value in record.items():
                if key != "step" and isinstance(value, int | float) and math.isfinite(value):
                    self._writer.add_scalar(key.replace(".", "/"), value, step)
            self._writer.flush()

    def records(self) -> list[dict[str, Any]]:
        return list(read_jsonl(self.path))


@attrs.frozen(kw_only=True)
class TrainJob:
    """What a backend receives (see the module docstring)."""

    experiment: Experiment
    settings: TrainConfig
    train: list[Example]
    held_out: list[Example]
    reward: Reward
    registry: Any
    environment: Environments
    perturber: Any | None
    out_dir: Path
    metrics: MetricsLog
    echo: Callable[[str], None] = print

    @property
    def limits(self) -> RolloutLimits:
        return RolloutLimits(max_user_turns=self.settings.max_user_turns,
                             max_assistant_turns=self.settings.max_assistant_turns)

    @property
    def seed(self) -> int:
        return self.experiment.seed if self.settings.seed is None else self.settings.seed

    def prompts(self, examples: Sequence[Example], epoch: int = 0) -> list[Example]:
        """Training examples as the backend should play them: perturbed again when asked."""
        if self.perturber is None:
            return list(examples)
        return [self.perturber(attrs.evolve(e, id=f"{e.id}~{epoch}")) or e for e in examples]


@attrs.frozen(kw_only=True)
class TrainResult:
    """What a backend reports. ``before``/``after`` are ``evaluate`` summaries before and after
    training (``None`` when the backend did not evaluate, e.g. when it only wrote a launch script);
    ``start`` is the starting model's, before a supervised warm-up (``None`` without one).
    ``method`` names what the ``steps`` are steps of, as the report and the console say it
    (``"GRPO"`` for the bundled backends, ``"DPO"``, ...); ``None``: the backend trains nothing
    (it evaluates, filters data or writes files), and the report says so instead of "GRPO"."""

    ok: bool
    steps: int = 0
    method: str | None = "GRPO"
    model_dir: str | None = None
    start: dict[str, Any] | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    details: dict[str, Any] = attrs.field(factory=dict)


class Trainer(Protocol):
    name: str

    def train(self, job: TrainJob) -> TrainResult: ...


# -- evaluation ----------------------------------------------------------------------------------------


def summarize(results: Sequence[RewardResult], successes: Sequence[bool] | None = None,
              played: Sequence[Rollout] | None = None) -> dict[str, Any]:
    """Mean total, best and per-component values (each over the rollouts it applies to), and with
    ``successes`` (one per result, see ``task_success``) the share of rollouts that did the task.
    With the ``played`` rollouts too: ``calls`` (tool calls made per rollout) and the success rate
    by expected behaviour, ``success_call`` (call tasks) and ``success_decline`` (clarify and
    abstain tasks), each present only when such tasks were played."""
    if not results:
        return {"rollouts": 0, "total": 0.0, "best": 0.0, "components": {}}
    names = list(results[0].scores)
    components = {}
    for name in names:
        values = [r.scores[name].value for r in results if r.scores[name].applies]
        if values:
            components[name] = statistics.fmean(values)
    out = {"rollouts": len(results), "total": statistics.fmean(r.total for r in results),
           "best": statistics.fmean(r.best for r in results), "components": components}
    if successes is not None:
        out["success"] = statistics.fmean(1.0 if ok else 0.0 for ok in successes)
    if played is not None:
        out["calls"] = statistics.fmean(r.n_attempts for r in played)
        for key, wanted in (("success_call", True), ("success_decline", False)):
            oks = [ok for ok, r in zip(successes or (), played) if (r.task.expected == "call") == wanted]
            if oks:
                out[key] = statistics.fmean(1.0 if ok else 0.0 for ok in oks)
    return out


def task_success(reward: Reward, rollout: Rollout) -> bool:
    """Did the rollout do its task, whatever the reward's preset: on a task that expects calls,
    its calls leave the servers in the end state the ground truth leaves them in (the test
    ``final_state`` makes: the same domain state, the clock and id counters aside) and, when the ground truth's end state
    is the one doing nothing leaves (a task that only reads), it made every ground-truth call with
    the ground truth's argument values: a rollout that never calls does not "solve" a lookup. On a
    clarify/abstain task: it made no call."""
    if rollout.task.expected != "call":
        return rollout.n_attempts == 0
    context = RewardContext(reward.servers, rollout)
    try:
        if not context.execution.end_state.same_as(context.ground_truth.end_state):
            return False
        idle = RewardContext(reward.servers, attrs.evolve(rollout, attempts=(), turns=()))
        try:
            writes = not idle.execution.end_state.same_as(context.ground_truth.end_state)
        finally:
            idle.close()
    finally:
        context.close()
    if writes:
        return True
    made = [(c.name, c.arguments) for c in rollout.calls]
    return all(any(name == g.tool and all(args.get(k) == v for k, v in g.arguments.items()) for name, args in made)
               for g in rollout.task.calls)


def evaluate(policy: Any, examples: Sequence[Example], *, reward: Reward, environment: Callable[[Any], Environment],
             limits: RolloutLimits = _DEFAULT_LIMITS, samples: int = 1, out: Path | None = None,
             max_batch: int = 16) -> dict[str, Any]:
    """Play every held-out example ``samples`` times and score it: the mean reward per component,
    and under ``tasks`` the same per example (what the report pairs before and after GRPO).
    A policy with the batching capability (``play_batch``, see ``prove_core.reward.rollout.BatchPolicy``;
    a local ``HFPolicy`` has it) plays the episodes in batches; any other policy plays them one by
    one. ``out`` receives one JSON line per rollout (transcript and scores)."""
    from prove_core.reward.rollout import rollout

    started = time.perf_counter()
    todo = [e for e in examples for _ in range(samples)]
    ids = [f"{e.id}#{k}" for e in examples for k in range(samples)]
    batched = getattr(policy, "play_batch", None)
    if callable(batched):
        played = list(batched(todo, environment, limits=limits, max_batch=max_batch, rollout_ids=ids))
    else:
        played = [rollout(policy, e, environment(e.task), limits=limits, rollout_id=i) for e, i in zip(todo, ids)]
    results = [reward.score(p.rollout) for p in played]
    successes = [task_success(reward, p.rollout) for p in played]
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w") as fh:
            for p, r, ok in zip(played, results, successes):
                fh.write(json.dumps({"id": p.rollout.id, "messages": p.messages, "reward": r.to_json(), "success": ok},
                                    ensure_ascii=False, default=str) + "\n")
    rollouts = [p.rollout for p in played]
    summary = summarize(results, successes, rollouts)
    summary["tasks"] = {e.id: summarize(results[k * samples:(k + 1) * samples], successes[k * samples:(k + 1) * samples],
                                        rollouts[k * samples:(k + 1) * samples])
                        for k, e in enumerate(examples)}
    summary["seconds"] = round(time.perf_counter() - started, 2)
    return summary


# -- data ------------------------------------------------------------------------------------------------


def load_corpus(path: Path) -> list[Example]:
    if not path.is_file():
        raise ConfigError(f"$.train.corpus: {path} does not exist; run the 'synth' stage first "
                          "(stages = [\"synth\", \"train\"]) or point [train].corpus at a corpus")
    examples = [from_json(record, Example) for record in read_jsonl(path)]
    for example in examples:  # a task the reward cannot score is refused before any training
        check_scorable(example.task, task_id=example.id)
    return examples


def task_tools(example: Example, min_tools: int) -> Example:
    """``example`` offering only the tools its conversation calls, the distractors a perturbation
    added, and other offered tools (chosen by the example's id) until there are ``min_tools``, in
    their offered order. A hidden tool stays hidden; a task with no call still gets a choice to
    decline."""
    offered = [t.get("function", t).get("name") for t in example.tools]
    keep = {c.name for m in example.messages for c in (m.tool_calls or ())} | {c.tool for c in example.task.calls}
    for record in example.task.meta.get("perturbations", ()):
        if isinstance(record, dict) and record.get("name") == "distractors":
            keep.update(record.get("tools", ()))
    keep &= set(offered)
    others = [n for n in offered if n not in keep]
    random.Random(f"tools:{example.id}").shuffle(others)
    keep.update(others[: max(0, min_tools - len(keep))])
    return attrs.evolve(example, tools=[t for t, n in zip(example.tools, offered) if n in keep])


def split(examples: Sequence[Example], held_out: int, seed: int) -> tuple[list[Example], list[Example]]:
    """A seeded held-out split, stratified by expected behaviour: each behaviour (call, clarify,
    abstain) is held out in proportion to its share of the corpus, and one with two examples or
    more gets at least one held-out task when there is room, so a small held-out set still scores
    clarification and abstention. Held-out tasks are never trained on, and neither is anything
    derived from the same conversation (a clarification is a prefix of its conversation, a
    perturbed example a variant): a conversation goes to one side whole, with its companions."""
    n = min(held_out, max(0, len(examples) - 1))
    rng = random.Random(f"held-out:{seed}")
    groups: dict[str, list[int]] = {}
    for i, example in enumerate(examples):
        groups.setdefault(example.task.expected, []).append(i)
    names = sorted(groups, key=lambda b: (-len(groups[b]), b))
    share = {b: n * len(groups[b]) / len(examples) for b in names}
    quota = {b: int(share[b]) for b in names}
    for b in sorted(names, key=lambda b: (quota[b] - share[b], names.index(b)))[: n - sum(quota.values())]:
        quota[b] += 1  # the largest remainders
    for b in names:  # every behaviour represented when it can spare one and the largest can give one
        donor = max(names, key=lambda d: (quota[d], -names.index(d)))
        if quota[b] == 0 and len(groups[b]) >= 2 and quota[donor] > 1:
            quota[b], quota[donor] = 1, quota[donor] - 1
    # whole conversations are drawn until each behaviour's quota is filled (one that would overfill
    # a quota is passed over), so a held-out task never has a companion in training
    together: dict[str, list[int]] = {}
    for i, example in enumerate(examples):
        together.setdefault(example.conversation, []).append(i)
    units = list(together.values())
    rng.shuffle(units)
    taken = dict.fromkeys(names, 0)
    chosen: set[int] = set()
    for members in units:
        adds: dict[str, int] = {}
        for i in members:
            adds[examples[i].task.expected] = adds.get(examples[i].task.expected, 0) + 1
        if all(taken[b] + k <= quota[b] for b, k in adds.items()):
            chosen.update(members)
            for b, k in adds.items():
                taken[b] += k
        if taken == quota:
            break
    return [e for i, e in enumerate(examples) if i not in chosen], [examples[i] for i in sorted(chosen)]


# -- the stage ---------------------------------------------------------------------------------------------


def load_trainer(registry: Any, settings: TrainConfig) -> Any:
    """The configured backend, built by the registry's loader with ``[train] options``."""
    try:
        registry.component("trainers", settings.backend)
    except UnknownComponent as exc:
        raise ConfigError(f"$.train.backend: {exc}") from None
    return registry.build("trainers", settings.backend, settings.options, path="$.train.options")


def run_training(experiment: Experiment, plugins: Any, *, echo: Callable[[str], None] = print,
                 backend: str | None = None) -> dict[str, Any]:
    """The ``train`` stage: build the job, run the configured backend, write the report."""
    settings = experiment.train or TrainConfig()
    if backend is not None:
        settings = attrs.evolve(settings, backend=backend)
        experiment = attrs.evolve(experiment, train=settings)
    registry = plugins.registry
    trainer = load_trainer(registry, settings)
    servers = {s.name: s.options for s in resolve(experiment, registry)}
    corpus = Path(settings.corpus) if settings.corpus else experiment.run_dir / "synth" / "corpus.jsonl"
    examples = load_corpus(corpus)
    seed = experiment.seed if settings.seed is None else settings.seed
    if settings.tools == "task":
        examples = [task_tools(e, settings.min_tools) for e in examples]
    train, held_out = split(examples, settings.eval.held_out, seed)
    if not train:
        raise ConfigError(f"$.train.eval.held_out: nothing is left to train on ({len(examples)} examples in {corpus})")
    reward = build_reward(experiment.reward, registry, server_options=servers, sessions=experiment.sessions)
    perturber = None
    if settings.perturb:
        from prove_core.config import SynthConfig
        from prove_core.synth.perturbation import build_perturber

        perturber = build_perturber((experiment.synth or SynthConfig()).perturbations, registry,
                                    path="$.synth.perturbations")
    out_dir = experiment.run_dir / "train"
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = MetricsLog(out_dir / "metrics.jsonl")
    job = TrainJob(experiment=experiment, settings=settings, train=train, held_out=held_out, reward=reward,
                   registry=registry, environment=Environments(registry, servers, sessions=experiment.sessions,
                                                               hooks=plugins.hook),
                   perturber=perturber, out_dir=out_dir, metrics=metrics, echo=echo)
    echo(f"train: backend {settings.backend}; {len(train)} training examples, {len(held_out)} held out; "
         f"{settings.steps} steps of {settings.batch_size} prompts x {settings.group_size} rollouts")
    started = time.perf_counter()
    result = trainer.train(job)
    seconds = round(time.perf_counter() - started, 1)
    summary = {"ok": result.ok, "backend": settings.backend, "steps": result.steps, "method": result.method,
               "model_dir": result.model_dir,
               "start": result.start, "before": result.before, "after": result.after, "seconds": seconds,
               **result.details}
    write_atomic(out_dir / "result.json", json.dumps(summary, indent=2, default=str))
    from prove_core.train.report import write_report

    report = write_report(out_dir, metrics.records(), result, settings=settings, seconds=seconds)
    summary["report"] = str(report)
    if result.before is not None and result.after is not None:
        from prove_core.train.report import held_out_phases, held_out_rows

        success = (f"; task success {result.before['success']:.3f} -> {result.after['success']:.3f}"
                   if "success" in result.before and "success" in result.after else "")
        shown = " -> ".join(f"{summary['total']:.3f} {label}" for label, summary in held_out_phases(result)[-2:])
        echo(f"held-out mean reward: {shown} (best possible {result.after['best']:.3f}){success}; report {report}")
        for line in held_out_rows(result):
            echo(line)
    return summary
