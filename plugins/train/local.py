"""The model a backend starts from, and the supervised warm-up.

``prepare_model(job)`` returns a saved model folder (weights + tokenizer with its chat template):
``[train.model].path`` as given, or a tiny model with random weights and a tokenizer trained on the
training corpus (``prove_plugins.train.models.tiny``), built once into ``<run>/train/base``.

``sft_warmup`` trains on the assistant turns of the synthesized conversations (the chat template's
``{% generation %}`` marks them; a turn marked as a deliberate mistake stays out of the loss),
computing the output layer only where there is a target, which keeps a CPU warm-up of a tiny
model to a minute or two. A finished warm-up is kept in
``<run>/train/sft`` and not redone; an interrupted one continues from ``<run>/train/sft_resume.pt``
(weights, optimizer, schedule, sampler state and losses, written atomically every
``[train.sft] checkpoint_every`` steps), so a resumed warm-up ends with the weights an uninterrupted
one would have.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from prove_core.train.core import TrainJob

DONE = "prove_done.json"


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def prepare_model(job: TrainJob) -> Path:
    """The starting model folder (see the module docstring)."""
    cfg = job.settings.model
    if cfg.path:
        path = Path(cfg.path)
        if not path.is_dir():
            from prove_core.errors import ConfigError

            raise ConfigError(f"$.train.model.path: {path} is not a model folder")
        return path
    base = job.out_dir / "base"
    if (base / DONE).is_file():
        return base
    from prove_plugins.train.models.tiny import build_tiny_model, chat_template, corpus_texts, count_parameters, train_tokenizer

    started = time.perf_counter()
    template = chat_template(cfg.tool_detail, cfg.max_tool_chars)
    tokenizer = train_tokenizer(corpus_texts(job.train, template), vocab_size=cfg.vocab_size, template=template,
                                model_max_length=cfg.max_positions)
    model = build_tiny_model(tokenizer, hidden_size=cfg.hidden_size, layers=cfg.layers, heads=cfg.heads,
                             max_positions=cfg.max_positions, seed=job.seed, architecture=cfg.architecture)
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    params = count_parameters(model)
    (base / DONE).write_text(json.dumps({"parameters": params}))
    job.echo(f"model: tiny {cfg.architecture} ({params / 1e6:.2f}M parameters, {cfg.layers} layers, hidden "
             f"{cfg.hidden_size}), tokenizer of {len(tokenizer)} tokens trained on the corpus "
             f"({time.perf_counter() - started:.1f} s)")
    return base


def load(path: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model, tokenizer


def _encode(tokenizer: Any, example: Any, max_length: int) -> tuple[list[int], list[int]] | None:
    """Token ids and the loss mask of one example: its assistant turns, except a turn marked as a
    deliberate mistake (it stays in the context; the recovery after it is trained)."""
    from prove_plugins.train.models.tiny import openai_messages

    messages = openai_messages(example.messages)
    tools = example.tools or None
    rendered = tokenizer.apply_chat_template(messages, tools=tools, return_assistant_tokens_mask=True, return_dict=True)
    ids, mask = list(rendered["input_ids"]), list(rendered["assistant_masks"])
    for i, message in enumerate(example.messages):
        if getattr(message, "mistake", False):
            start = len(tokenizer.apply_chat_template(messages[:i], tools=tools, return_dict=True)["input_ids"])
            end = len(tokenizer.apply_chat_template(messages[: i + 1], tools=tools, return_dict=True)["input_ids"])
            mask[start:end] = [0] * (end - start)
    ids, mask = ids[:max_length], mask[:max_length]
    return (ids, mask) if any(mask) else None


def sft_warmup(job: TrainJob, start: Path) -> Path:
    """Supervised warm-up from ``start``; returns the folder of the warmed-up model."""
    import torch

    cfg = job.settings.sft
    out = job.out_dir / "sft"
    resume_file = job.out_dir / "sft_resume.pt"
    if job.settings.resume and (out / DONE).is_file():
        job.echo(f"sft: already done ({out})")
        return out
    seed_everything(job.seed)
    model, tokenizer = load(start)
    data = [d for d in (_encode(tokenizer, e, cfg.max_length) for e in job.train) if d is not None]
    if not data:
        return start
    rng = random.Random(job.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    warm = max(1, cfg.steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warm) * max(0.05, 1 - s / cfg.steps))
    first, losses = 0, []
    # What a resume point must have been written under to be continued (else the warm-up starts over).
    settings = {"steps": cfg.steps, "batch_size": cfg.batch_size, "lr": cfg.lr, "max_length": cfg.max_length,
                "examples": len(data), "seed": job.seed, "start": str(start)}
    if job.settings.resume and resume_file.is_file():
        saved = torch.load(resume_file, weights_only=False)
        if saved["settings"] == settings:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            schedule.load_state_dict(saved["schedule"])
            rng.setstate(saved["sampler"])
            torch.set_rng_state(saved["torch_rng"])
            first, losses = saved["step"], saved["losses"]
            job.echo(f"sft: resuming at step {first}/{cfg.steps} ({resume_file})")
        else:
            job.echo(f"sft: {resume_file} is from different warm-up settings; starting over")
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    pad = tokenizer.pad_token_id
    model.train()
    started = time.perf_counter()
    for step in range(first, cfg.steps):
        batch = rng.sample(data, min(cfg.batch_size, len(data)))
        width = max(len(ids) for ids, _ in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        target = torch.zeros((len(batch), width), dtype=torch.bool)
        for row, (tokens, mask) in enumerate(batch):
            ids[row, : len(tokens)] = torch.tensor(tokens)
            target[row, : len(mask)] = torch.tensor(mask, dtype=torch.bool)
        # Right padding needs no attention mask: under the causal mask no real token sees the pads
        # after it, and without a mask attention takes its fast causal path.
        hidden = base(input_ids=ids).last_hidden_state
        # position t predicts token t+1: keep the positions whose next token is an assistant token
        predict = target[:, 1:]
        logits = head(hidden[:, :-1][predict])
        loss = torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][predict])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if (step + 1) % max(1, cfg.steps // 10) == 0 or step + 1 == cfg.steps:
            recent = sum(losses[-10:]) / len(losses[-10:])
            job.echo(f"sft: step {step + 1}/{cfg.steps}  loss {recent:.3f}  ({time.perf_counter() - started:.0f} s)")
        if (step + 1) % cfg.checkpoint_every == 0 and step + 1 < cfg.steps:
            _save_resume_point(resume_file, {
                "step": step + 1, "settings": settings, "model": model.state_dict(),
                "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                "sampler": rng.getstate(), "torch_rng": torch.get_rng_state(), "losses": losses})
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (job.out_dir / "sft_loss.json").write_text(json.dumps(losses))
    (out / DONE).write_text(json.dumps({"steps": cfg.steps, "final_loss": losses[-1] if losses else None}))
    resume_file.unlink(missing_ok=True)  # the finished warm-up supersedes it
    return out


def _save_resume_point(path: Path, state: dict[str, Any]) -> None:
    """Write the warm-up's resume point so a kill leaves the old one or the new one, never half."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)
