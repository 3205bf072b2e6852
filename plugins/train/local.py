"""The model a backend starts from, and the supervised warm-up.

``prepare_model(job)`` returns a saved model folder (weights + tokenizer with its chat template):
a named pretrained source converted once into the cache (``prove_plugins.train.models.sources``),
``[train.model].path`` as given, or a tiny model with random weights and a tokenizer trained on the
training corpus (``prove_plugins.train.models.tiny``), built once into ``<run>/train/base``.
``load(path, job)`` loads one with a chat template that renders tool use: the model's own where it
can, else PROVE's ChatML + Hermes template (``prove_plugins.train.models.template``), said once.

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

from prove_core.model import write_atomic
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
    if cfg.source:
        from prove_plugins.train.models.sources import materialize

        return materialize(cfg.source, echo=job.echo)
    if cfg.path:
        path = Path(cfg.path)
        if not path.is_dir():
            from prove_core.errors import ConfigError

            raise ConfigError(f"$.train.model.path: {path} is not a model folder")
        return path
    base = job.out_dir / "base"
    if (base / DONE).is_file():
        return base
    from prove_plugins.train.models.template import chat_template
    from prove_plugins.train.models.tiny import build_tiny_model, corpus_texts, count_parameters, train_tokenizer

    started = time.perf_counter()
    template = chat_template(cfg.tool_detail or "signatures", cfg.max_tool_chars)
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


def device_of(job: TrainJob) -> str:
    """``[train] device`` resolved: ``auto`` is ``cuda`` when torch sees a GPU, else ``cpu``; asking
    for ``cuda`` without one is a ``ConfigError`` before any work."""
    import torch

    wanted = job.settings.device
    if wanted == "cuda" and not torch.cuda.is_available():
        from prove_core.errors import ConfigError

        raise ConfigError('$.train.device: "cuda", but torch sees no GPU here (use "auto" or "cpu")')
    return "cuda" if wanted == "cuda" or (wanted == "auto" and torch.cuda.is_available()) else "cpu"


def load(path: Path, job: TrainJob | None = None) -> tuple[Any, Any]:
    """The model and tokenizer of ``path``, with a chat template that renders tool use (see the
    module docstring). With a ``job``, PROVE's template takes its ``[train.model]`` tool settings."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from prove_plugins.train.models.template import apply_tool_settings, stop_at_turn_end

    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if job is not None:
        apply_tool_settings(tokenizer, job.settings.model.tool_detail, job.settings.model.max_tool_chars,
                            echo=job.echo, name=str(path))
    else:
        apply_tool_settings(tokenizer, None, None, name=str(path))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if job is not None and device_of(job) == "cuda":
        model = model.to("cuda")  # float32 weights; the trainers compute in bf16 under autocast
    stop_at_turn_end(model, tokenizer)
    return model, tokenizer


def measured(job: TrainJob, tokenizer: Any, train: Any) -> Any:
    """The ``Lengths`` of the training and held-out examples under ``tokenizer``, printed and kept
    in ``lengths.json``."""
    from prove_plugins.train.lengths import measure

    lengths = measure(tokenizer, [*train, *job.held_out])
    job.echo(f"lengths: {lengths.describe()}")
    write_atomic(job.out_dir / "lengths.json", json.dumps(lengths.to_json(), indent=2))
    return lengths


def check_lengths(job: TrainJob, tokenizer: Any, positions: int) -> None:
    """Measure the real data under the model's tokenizer, report it, and refuse a configuration
    that would cut a prompt (GRPO) or a conversation (the warm-up): ``prove_plugins.train.lengths``."""
    from prove_plugins.train.lengths import require

    lengths = measured(job, tokenizer, job.train)
    s = job.settings
    fixes = [*(['offer fewer tools ([train] tools = "task")'] if s.tools == "all" else []),
             *(["a shorter schema rendering ([train.model] tool_detail)"] if s.model.tool_detail != "signatures" else []),
             *(["shorter tool results ([train.model] max_tool_chars)"] if s.model.max_tool_chars is None else []),
             "a model with a longer context"]
    require(lengths.prompt_max + s.max_new_tokens, positions, "$.train.max_new_tokens",
            f"the longest prompt ({lengths.prompt_max} tokens) and a turn of {s.max_new_tokens} in the model's context",
            lengths.longest_prompt, ", ".join(fixes))
    if s.sft.steps > 0 and s.sft.too_long == "refuse":
        require(lengths.conversation_max, s.sft.max_length, "$.train.sft.max_length", "the longest warm-up conversation",
                lengths.longest_conversation, f'raise it to {lengths.conversation_max}, set [train.sft] too_long = "skip" '
                "to leave longer conversations out of the warm-up, or " + ", ".join(fixes))


def kit_model(job: TrainJob) -> tuple[str, Any]:
    """For a launch kit: the model folder (``prepare_model``) and the real data's ``Lengths`` under
    its tokenizer, whose template is made to render tools as every path renders them (``None``
    when transformers is not installed here: the kit is then written unmeasured, and says so)."""
    import importlib.util

    model = str(prepare_model(job).resolve())
    if importlib.util.find_spec("transformers") is None:
        job.echo("lengths: transformers is not installed here, so the prompts were not measured against the kit's "
                 "limits; install it to have them checked before the cluster runs")
        return model, None
    from transformers import AutoTokenizer

    from prove_plugins.train.models.template import apply_tool_settings

    tokenizer = AutoTokenizer.from_pretrained(model)
    apply_tool_settings(tokenizer, job.settings.model.tool_detail, job.settings.model.max_tool_chars, echo=job.echo,
                        name=model)
    lengths = measured(job, tokenizer, job.prompts(job.train))
    return model, lengths


def tool_settings(job: TrainJob) -> dict[str, Any]:
    """What a kit's agents need to render tools as training here does (``template.apply_tool_settings``)."""
    return {"tool_detail": job.settings.model.tool_detail, "max_tool_chars": job.settings.model.max_tool_chars}


def _encode(tokenizer: Any, example: Any, max_length: int) -> tuple[list[int], list[int]] | str:
    """Token ids and the loss mask of one example: its assistant turns, except a turn marked as a
    deliberate mistake (it stays in the context; the recovery after it is trained). ``"too long"``
    for a conversation over ``max_length`` tokens, ``"nothing to train"`` for one without an
    assistant token to learn."""
    from prove_plugins.train.models.template import openai_messages

    messages = openai_messages(example.messages)
    tools = example.tools or None
    rendered = tokenizer.apply_chat_template(messages, tools=tools, return_assistant_tokens_mask=True, return_dict=True)
    ids, mask = list(rendered["input_ids"]), list(rendered["assistant_masks"])
    for i, message in enumerate(example.messages):
        if getattr(message, "mistake", False):
            start = len(tokenizer.apply_chat_template(messages[:i], tools=tools, return_dict=True)["input_ids"])
            end = len(tokenizer.apply_chat_template(messages[: i + 1], tools=tools, return_dict=True)["input_ids"])
            mask[start:end] = [0] * (end - start)
    if len(ids) > max_length:  # never cut: refused before training, or left out by too_long = "skip"
        return "too long"
    return (ids, mask) if any(mask) else "nothing to train"


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
    model, tokenizer = load(start, job)
    encoded = [_encode(tokenizer, e, cfg.max_length) for e in job.train]
    data = [d for d in encoded if isinstance(d, tuple)]
    too_long = sum(1 for d in encoded if d == "too long")
    if too_long:
        job.echo(f"sft: {too_long} of {len(job.train)} conversations are longer than max_length {cfg.max_length} "
                 f"tokens and are left out of the warm-up ({len(data)} trained on)")
    if not data:
        from prove_core.errors import ConfigError

        raise ConfigError(f"$.train.sft.max_length: no training conversation fits in {cfg.max_length} tokens with an "
                          "assistant token to train on; nothing was trained (lengths.json has the figures)")
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
        ids, target = ids.to(model.device), target.to(model.device)
        with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=model.device.type == "cuda"):
            hidden = base(input_ids=ids).last_hidden_state
        # position t predicts token t+1: keep the positions whose next token is an assistant token
        predict = target[:, 1:]
        with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=model.device.type == "cuda"):
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
