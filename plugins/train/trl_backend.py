"""The ``trl`` trainer: multi-turn GRPO with TRL's ``GRPOTrainer`` on one node (CPU or GPU).

TRL samples the prompts (each training example's system prompt and first user turn,
``num_generations`` = ``[train].group_size`` times each), computes the GRPO loss with the KL term
against the starting model, and checkpoints. The rollouts are ours, through TRL's ``rollout_func``:
every rollout plays its example on **its own live session** (``prove_plugins.train.models.hf.play_batch`` over
``prove_core.reward.rollout.rollout``): the model's turns are parsed for tool calls, the calls run on
the session, and results and later user turns come back through the chat template, up to the
turn limits. The returned ``env_mask`` keeps the environment's tokens out of the loss. Each
reward component is one TRL reward function with its weight, so TRL's total is exactly the
PROVE reward, and TRL logs each component; we also write them every step to ``metrics.jsonl``.

Flow: prepare the model (a named ``source``, ``[train.model].path`` or the tiny one; a chat template
that renders tools) -> measure the data with its tokenizer and refuse a cutting configuration ->
with a warm-up: held-out evaluation of the start model, then the SFT warm-up -> held-out
evaluation -> GRPO (resumes from the last checkpoint in ``<run>/train/grpo``) -> held-out
evaluation -> ``<run>/train/final``. ``[train] device`` picks the CPU or a GPU (bf16 there).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import attrs

from prove_core.model import write_atomic
from prove_core.train.core import TrainJob, TrainResult, evaluate, summarize

from .local import DONE, check_lengths, device_of, load, prepare_model, seed_everything, sft_warmup


@attrs.frozen(kw_only=True)
class TRLOptions:
    """``[train.options]`` of the ``trl`` backend."""

    micro_batch: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    generation_batch: int = attrs.field(default=16, validator=attrs.validators.gt(0))  # rollouts generated together
    loss_type: str = "grpo"  # TRL's loss_type: grpo, dapo, dr_grpo, bnpo
    tensorboard: bool = True
    args: dict[str, Any] = attrs.field(factory=dict)  # any other GRPOConfig field


def _grpo_trainer_class() -> type:
    from trl import GRPOTrainer

    class ProveGRPOTrainer(GRPOTrainer):
        """Keeps the batch's dataset rows where the rollout function can see which example each
        prompt is (two examples may share a prompt but not a task)."""

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            self.prove_rows = inputs
            return super()._generate_and_score_completions(inputs)

    return ProveGRPOTrainer


def _reward_function(name: str) -> Any:
    key = f"prove_{name}"

    def component(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
        return kwargs[key]

    component.__name__ = name
    return component


class TRLTrainer:
    """Multi-turn GRPO with TRL's GRPOTrainer over live sessions (single node)."""

    name = "trl"
    Config = TRLOptions
    # checked before any stage runs (prove_core.stages.check_experiment), and again by train()
    requires = ("torch", "transformers", "trl", "datasets", "accelerate")
    install = "pip install torch==2.13.0 && pip install -e '.[train]'"

    def __init__(self, config: TRLOptions = TRLOptions()) -> None:
        self.config = config

    def train(self, job: TrainJob) -> TrainResult:
        _require_train_extra()
        from transformers import TrainerCallback
        from trl import GRPOConfig

        from prove_plugins.train.models.hf import HFPolicy, Sampling, play_batch

        settings = job.settings
        _quiet()
        seed_everything(job.seed)
        device = device_of(job)
        start = prepare_model(job)
        model, tokenizer = load(start, job)
        positions = int(getattr(model.config, "max_position_embeddings", 4096))
        check_lengths(job, tokenizer, positions)
        max_context = max(64, positions - settings.max_new_tokens)
        greedy = Sampling(max_new_tokens=settings.max_new_tokens, temperature=settings.eval.temperature,
                          max_context=max_context)
        labels = {"start": "the start model", "before": "before GRPO", "after": "after GRPO"}

        def held_out(model: Any, tag: str) -> dict[str, Any] | None:
            if not job.held_out:
                return None
            cached = job.out_dir / f"eval_{tag}.json"
            if tag != "after" and settings.resume and cached.is_file():
                return json.loads(cached.read_text())
            seed_everything(job.seed)
            policy = HFPolicy(model, tokenizer, parser=settings.parser, registry=job.registry, sampling=greedy)
            summary = evaluate(policy, job.held_out, reward=job.reward, environment=job.environment,
                               limits=job.limits, samples=settings.eval.samples,
                               out=job.out_dir / f"eval_{tag}.jsonl", max_batch=self.config.generation_batch)
            write_atomic(cached, json.dumps(summary, indent=2))
            job.echo(f"eval {labels[tag]}: held-out mean reward {summary['total']:.3f}, task success "
                     f"{summary['success']:.2f}, {summary['calls']:.1f} calls/rollout; "
                     + " ".join(f"{k} {v:.2f}" for k, v in summary["components"].items())
                     + f" ({summary['seconds']:.0f} s)")
            return summary

        first = None
        if settings.sft.steps > 0:
            first = held_out(model, "start")
            start = sft_warmup(job, start)
            model, tokenizer = load(start, job)
        before = held_out(model, "before")

        # -- GRPO through TRL ---------------------------------------------------------------------
        examples = {e.id: e for e in job.prompts(job.train)}
        rows = [{"prompt": _prompt(e), "example_id": e.id} for e in examples.values()]
        import datasets

        dataset = datasets.Dataset.from_list(rows)
        group = settings.group_size
        completions = settings.batch_size * group
        micro = self.config.micro_batch or group
        if completions % micro:
            from prove_core.errors import ConfigError

            raise ConfigError(f"$.train.options.micro_batch: {micro} must divide batch_size x group_size = {completions}")
        names = [c.name for c in job.reward.components]
        out = job.out_dir / "grpo"
        report_to = ["tensorboard"] if self.config.tensorboard and _has_tensorboard() else "none"
        args = GRPOConfig(
            output_dir=str(out), num_generations=group, per_device_train_batch_size=micro,
            gradient_accumulation_steps=completions // micro, max_steps=settings.steps,
            learning_rate=settings.lr, beta=settings.kl, temperature=settings.temperature,
            loss_type=self.config.loss_type, scale_rewards="group", reward_weights=[c.weight for c in job.reward.components],
            logging_steps=1, save_strategy="steps", save_steps=settings.checkpoint_every, save_total_limit=2,
            report_to=report_to, seed=job.seed,
            use_cpu=device == "cpu", bf16=device == "cuda", max_completion_length=100_000,
            lr_scheduler_type="constant", warmup_steps=0, dataloader_num_workers=0,
            # recomputation only pays off on big models; TRL's own progress bar as TRL shows it
            **{"gradient_checkpointing": False, **trainer_progress(), **self.config.args},
        )
        sampling = Sampling(max_new_tokens=settings.max_new_tokens, temperature=settings.temperature,
                            max_context=max_context)
        pending: dict[str, Any] = {}

        def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            batch = [examples[row["example_id"]] for row in trainer.prove_rows]
            step = trainer.state.global_step + 1
            started = time.perf_counter()
            policy = HFPolicy(trainer.accelerator.unwrap_model(trainer.model), tokenizer, parser=settings.parser,
                              registry=job.registry, sampling=sampling)
            episodes = play_batch(policy, batch, job.environment, limits=job.limits,
                                  max_batch=self.config.generation_batch,
                                  rollout_ids=[f"{e.id}@{step}.{i}" for i, e in enumerate(batch)])
            rollout_s = time.perf_counter() - started
            results = [job.reward.score(ep.played.rollout) for ep in episodes]
            out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": None, "env_mask": []}
            for ep in episodes:
                rec = ep.recorder
                ids, mask = list(rec.completion_ids), list(rec.env_mask)
                if not ids:  # nothing generated (the prompt filled the context): one masked token
                    ids, mask = [tokenizer.eos_token_id], [0]
                out["prompt_ids"].append(list(rec.prompt_ids))
                out["completion_ids"].append(ids)
                out["env_mask"].append(mask)
            for name in names:
                out[f"prove_{name}"] = [r.scores[name].value if r.scores[name].applies else None for r in results]
            means = summarize(results)
            record: dict[str, Any] = {"step": step, "reward/total": means["total"], "reward/best": means["best"],
                                      **{f"reward/{name}": value for name, value in means["components"].items()}}
            calls = [len(ep.played.rollout.calls) for ep in episodes]
            record.update({"rollouts": len(results), "calls_per_rollout": statistics.fmean(calls),
                           "generated_tokens": statistics.fmean(sum(ep.recorder.env_mask) for ep in episodes),
                           "rollout_seconds": round(rollout_s, 3),
                           "reward_seconds": round(time.perf_counter() - started - rollout_s, 3)})
            pending.clear()
            pending.update(record)
            return out

        class Metrics(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                if not pending or logs is None or "loss" not in logs:
                    return
                record = dict(pending)
                for key in ("loss", "kl", "grad_norm", "learning_rate", "entropy"):
                    if isinstance(logs.get(key), int | float):
                        record[key] = logs[key]
                record["step"] = state.global_step
                job.metrics.write(record)
                pending.clear()
                job.echo(f"grpo: step {state.global_step}/{settings.steps}  reward {record['reward/total']:.3f}  "
                         + "  ".join(f"{n} {record[f'reward/{n}']:.2f}" for n in names if f"reward/{n}" in record)
                         + f"  kl {record.get('kl', 0.0):.4f}  ({record['rollout_seconds']:.1f} s rollouts)")

        trainer = _grpo_trainer_class()(
            model=str(start), reward_funcs=[_reward_function(n) for n in names], args=args, train_dataset=dataset,
            processing_class=tokenizer, rollout_func=rollout_func, callbacks=[Metrics()],
        )
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        for noisy in (PrinterCallback, ProgressCallback):  # progress is our Metrics callback's line
            trainer.remove_callback(noisy)
        checkpoint = _last_checkpoint(out) if settings.resume else None
        job.metrics.truncate(_checkpoint_step(checkpoint))
        if checkpoint:
            job.echo(f"grpo: resuming from {checkpoint}")
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        final = job.out_dir / "final"
        trainer.save_model(str(final))
        tokenizer.save_pretrained(final)
        (final / DONE).write_text(json.dumps({"steps": trainer.state.global_step}))
        after = held_out(trainer.accelerator.unwrap_model(trainer.model), "after")
        return TrainResult(ok=True, steps=trainer.state.global_step, model_dir=str(final), start=first, before=before,
                           after=after, details={"start_model": str(start)})


def _require_train_extra() -> None:
    """A clear error before anything runs when torch, transformers, TRL or datasets is missing."""
    import importlib.util

    from prove_core.errors import ProveError

    missing = [m for m in TRLTrainer.requires if importlib.util.find_spec(m) is None]
    if missing:
        raise ProveError(f"the trl backend needs {', '.join(missing)} (the train extra): {TRLTrainer.install}")


def _prompt(example: Any) -> list[dict[str, Any]]:
    from prove_core.reward.rollout import opening, user_turns

    turns = user_turns(example)
    return [*opening(example), {"role": "user", "content": turns[0] if turns else ""}]


def trainer_progress() -> dict[str, Any]:
    """TRL's own progress bar (tqdm: steps, rate, time left) on when stderr is a terminal, off in a
    log file or a pipe, where a bar is noise; ``[train.options] args = { disable_tqdm = ... }``
    decides otherwise."""
    import sys

    return {"disable_tqdm": not sys.stderr.isatty()}


def _quiet() -> None:
    """No download bars or experimental-feature warnings in the middle of our progress lines
    (the trainer's own progress bar is left as TRL shows it: ``trainer_progress``)."""
    import os
    import warnings

    from transformers.utils import logging as hf_logging

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*rollout_func.*")


def _has_tensorboard() -> bool:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


def _last_checkpoint(out: Path) -> Path | None:
    """The newest complete checkpoint. Transformers writes a checkpoint in place, its trainer state
    last, so a run killed while saving leaves a folder without a readable trainer state: skipped."""
    for path in sorted(out.glob("checkpoint-*"), key=_checkpoint_step, reverse=True):
        try:
            state = json.loads((path / "trainer_state.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(state, dict) and state.get("global_step") == _checkpoint_step(path):
            return path
    return None


def _checkpoint_step(path: Path | None) -> int:
    if path is None:
        return 0
    try:
        return int(path.name.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0
