"""Exports of a PROVE corpus into the files trainers read, built from ``corpus.jsonl`` alone.
docs/exports.md has the table of which file feeds which trainer, with the exact flags.

Every message is an OpenAI chat message with only the keys it has (no ``null`` placeholders:
Llama 3.1's template tests ``'tool_calls' in message``), tool-call ``arguments`` are JSON objects
(chat templates serialize them once; a JSON string would be encoded twice) and ``tools`` are OpenAI
function schemas as objects, ready for ``apply_chat_template(messages, tools=tools)``.

Every row carries ``group``: the conversation it derives from (``Example.conversation``). A
clarification is a prefix of its conversation and a perturbed example a variant of it, so a
train/eval split of the rows must keep a ``group`` on one side (``prove train`` and ``prove eval``
do).

- ``sft`` -> ``sft.jsonl``: TRL prompt-completion rows ``{"id", "group", "prompt", "completion", "tools"}``
  for ``SFTTrainer`` with ``assistant_only_loss=True``: the loss covers the assistant turns of the
  completion and nothing else (not the prompt, not the tool results or user turns between them).
  A conversation is one row; an assistant turn marked ``mistake`` (a deliberately wrong call) ends
  a row and starts the next one, whose prompt holds the mistake and its tool result, so a mistake
  is only ever context and its recovery is trained. Rows without an assistant turn to train on
  are left out.
- ``rl`` -> ``rl.jsonl``: prompt-only rows ``{"id", "group", "prompt", "tools", "task"}`` for GRPO: the
  system prompt and the first user turn, the tools to render with them, and the task record the
  reward reads.
- ``openrlhf`` -> ``openrlhf.jsonl``: ``{"id", "input", "label"}`` for OpenRLHF's prompt dataset,
  which renders ``input`` with ``apply_chat_template`` and no tools: so the tools are written into
  the system message, in the Hermes block Qwen's templates write for ``tools=`` (byte-identical to
  ``apply_chat_template(prompt, tools=tools)`` with a Qwen2.5/Qwen3 template). ``label`` is
  ``{"example": <the corpus record>}`` as JSON: the task for a reward function, and everything
  PROVE's OpenRLHF agent needs to play the episode.
- ``hf`` -> ``hf/``: one ``datasets.DatasetDict`` with the ``sft`` and ``rl`` rows as its splits
  (``save_to_disk``; ``load_from_disk("hf")["sft"]``). Messages, tools and the task are
  ``datasets.Json`` values, so arguments and schemas come back exactly as written (Arrow structs
  would merge the keys of every row's arguments and fill the missing ones with ``null``).

Nothing here imports ``datasets`` (or torch) until the ``hf`` export runs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prove_core.errors import ConfigError, did_you_mean
from prove_core.model import conversation_of, read_jsonl

# The tool block Qwen2.5 and Qwen3 chat templates append to the system message for ``tools=``
# (Hermes function calling): what the ``hermes`` parser expects the model to answer in.
HERMES_TOOLS_HEAD = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                     "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
HERMES_TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                     "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                     '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')


def chat_message(message: dict[str, Any]) -> dict[str, Any]:
    """A corpus message as an OpenAI chat message: arguments stay objects, absent fields are left out
    and the ``mistake`` mark is dropped (exports keep mistakes out of the loss by where they put them)."""
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = [{"id": c["id"], "type": "function",
                              "function": {"name": c["name"], "arguments": c.get("arguments") or {}}}
                             for c in message["tool_calls"]]
    for key in ("tool_call_id", "name"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def _first_user(record: dict[str, Any]) -> int | None:
    return next((i for i, m in enumerate(record["messages"]) if m["role"] == "user"), None)


def prompt_messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompt of a corpus record: everything up to and including the first user turn."""
    first = _first_user(record)
    return [] if first is None else [chat_message(m) for m in record["messages"][: first + 1]]


def with_tools_in_system(prompt: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``prompt`` with the tools written into its system message (see ``HERMES_TOOLS_HEAD``), for
    trainers that render prompts without ``tools=``."""
    if not tools:
        return list(prompt)
    block = HERMES_TOOLS_HEAD + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools) + HERMES_TOOLS_TAIL
    if prompt and prompt[0]["role"] == "system":
        return [{**prompt[0], "content": (prompt[0].get("content") or "") + block}, *prompt[1:]]
    return [{"role": "system", "content": block.lstrip("\n")}, *prompt]


def sft_examples(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The SFT rows of one corpus record (see the module docstring): each completion runs from a
    trainable assistant turn to the last one before the next mistake (or the end)."""
    first = _first_user(record)
    if first is None:
        return []
    messages = record["messages"]
    spans: list[tuple[int, int]] = []
    start: int | None = None
    end = 0
    for i in range(first + 1, len(messages)):
        message = messages[i]
        if message["role"] != "assistant":
            continue
        if message.get("mistake"):
            if start is not None:
                spans.append((start, end))
            start = None
        else:
            start = i if start is None else start
            end = i
    if start is not None:
        spans.append((start, end))
    chat = [chat_message(m) for m in messages]
    group = conversation_of(record)
    return [{"id": record["id"] if len(spans) == 1 else f"{record['id']}#{k}", "group": group,
             "prompt": chat[:a], "completion": chat[a: b + 1], "tools": record["tools"]}
            for k, (a, b) in enumerate(spans)]


def sft_rows(corpus: Path) -> Iterator[dict[str, Any]]:
    for record in read_jsonl(corpus):
        yield from sft_examples(record)


def rl_rows(corpus: Path) -> Iterator[dict[str, Any]]:
    for record in read_jsonl(corpus):
        prompt = prompt_messages(record)
        if prompt:
            yield {"id": record["id"], "group": conversation_of(record), "prompt": prompt, "tools": record["tools"],
                   "task": record["task"]}


def openrlhf_row(record: dict[str, Any]) -> dict[str, Any]:
    """One OpenRLHF prompt row (see the module docstring); the ``openrlhf`` trainer writes these too."""
    return {"id": record["id"], "input": with_tools_in_system(prompt_messages(record), record["tools"]),
            "label": json.dumps({"example": record}, sort_keys=True, ensure_ascii=False)}


def openrlhf_rows(corpus: Path) -> Iterator[dict[str, Any]]:
    for record in read_jsonl(corpus):
        if _first_user(record) is not None:
            yield openrlhf_row(record)


def _write(rows: Iterator[dict[str, Any]], path: Path) -> Path:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def hf_features() -> dict[str, Any]:
    """The ``datasets.Features`` of the ``hf`` export's ``sft`` and ``rl`` splits: free-form JSON values as ``Json``."""
    import datasets

    if not hasattr(datasets, "Json"):
        raise ConfigError(f"the 'hf' export needs datasets>=4.7 (found {datasets.__version__}), whose Json type keeps "
                          f"tool schemas and arguments exact: {REQUIRES['hf'][2].replace('pip install', 'pip install -U')}")
    text, messages = datasets.Value("string"), datasets.List(datasets.Json())
    return {"sft": datasets.Features({"id": text, "group": text, "prompt": messages, "completion": messages,
                                      "tools": messages}),
            "rl": datasets.Features({"id": text, "group": text, "prompt": messages, "tools": messages,
                                     "task": datasets.Json()})}


def _hf(corpus: Path, out_dir: Path) -> Path:
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"the 'hf' export needs the datasets package: {REQUIRES['hf'][2]}") from None
    features = hf_features()
    target = out_dir / "hf"
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # no bars in the middle of synthesis's own progress lines
    try:
        splits = datasets.DatasetDict({name: datasets.Dataset.from_list(list(rows), features=features[name])
                                       for name, rows in (("sft", sft_rows(corpus)), ("rl", rl_rows(corpus)))})
        tmp = out_dir / ".hf.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        splits.save_to_disk(str(tmp))
        shutil.rmtree(target, ignore_errors=True)
        tmp.replace(target)
    finally:
        if bars:
            datasets.enable_progress_bars()
    return target


def _trl(corpus: Path, out_dir: Path) -> Path:
    """The old ``trl`` format name: the SFT and RL files that replaced ``trl.jsonl``."""
    _write(rl_rows(corpus), out_dir / "rl.jsonl")
    return _write(sft_rows(corpus), out_dir / "sft.jsonl")


EXPORTERS: dict[str, Callable[[Path, Path], Path]] = {
    "sft": lambda corpus, out: _write(sft_rows(corpus), out / "sft.jsonl"),
    "rl": lambda corpus, out: _write(rl_rows(corpus), out / "rl.jsonl"),
    "openrlhf": lambda corpus, out: _write(openrlhf_rows(corpus), out / "openrlhf.jsonl"),
    "hf": _hf,
    "trl": _trl,
}


# What a format needs beyond PROVE's base install: (module, version floor, the install line).
REQUIRES: dict[str, tuple[str, str, str]] = {"hf": ("datasets", "4.7", "pip install 'datasets>=4.7'")}


def export_problems(formats: list[str], *, check_packages: bool = True) -> list[str]:
    """What stops ``formats`` from being written, found before synthesis starts: unknown names
    (with a did-you-mean) and, with ``check_packages``, optional packages that are missing or too
    old, each with the line that installs them."""
    import re
    from importlib import metadata

    def release(version: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3])

    problems = []
    for i, fmt in enumerate(formats):
        if fmt not in EXPORTERS:
            problems.append(f"$.synth.exports[{i}]: unknown format {fmt!r}{did_you_mean(fmt, EXPORTERS)} "
                            f"(formats: {', '.join(EXPORTERS)})")
        elif fmt in REQUIRES and check_packages:
            module, floor, install = REQUIRES[fmt]
            try:
                found = metadata.version(module)
            except metadata.PackageNotFoundError:
                problems.append(f"$.synth.exports[{i}]: the {fmt!r} export needs the {module} package: {install}")
                continue
            if release(found) < release(floor):
                problems.append(f"$.synth.exports[{i}]: the {fmt!r} export needs {module}>={floor} (found {found}): "
                                f"{install.replace('pip install', 'pip install -U')}")
    return problems


def export(fmt: str, corpus: Path, out_dir: Path) -> Path:
    problems = export_problems([fmt])
    if problems:
        raise ConfigError(problems[0].replace("[0]", ""))
    return EXPORTERS[fmt](corpus, out_dir)
