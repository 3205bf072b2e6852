"""Exports of a PROVE corpus into the formats trainers read.

- ``trl``: TRL's conversational format, one JSON object a line:
  ``{"prompt": [system, first user turn], "completion": [the rest], "tools": [...], "task": {...}}``
  (``prompt`` alone feeds GRPO; ``prompt`` + ``completion`` feed SFT);
- ``openrlhf``: OpenRLHF prompt data: ``{"input": [system, first user turn], "label": "<task JSON>"}``
  (use ``--input_key input --label_key label --apply_chat_template``);
- ``hf``: a Hugging Face ``datasets`` folder (``save_to_disk``) when ``datasets`` is installed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prove_core.errors import ConfigError
from prove_core.model import read_jsonl


def prompt_messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompt of a corpus record (system prompt and first user turn), as OpenAI messages."""
    return _split(record)[0]


def _split(record: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    messages = [_openai(m) for m in record["messages"]]
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    return messages[: first_user + 1], messages[first_user + 1 :]


def _openai(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], sort_keys=True)}}
            for c in message["tool_calls"]
        ]
    for key in ("tool_call_id", "name"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def trl_rows(corpus: Path) -> Iterator[dict[str, Any]]:
    for record in read_jsonl(corpus):
        prompt, completion = _split(record)
        yield {"id": record["id"], "prompt": prompt, "completion": completion, "tools": record["tools"],
               "task": record["task"]}


def openrlhf_rows(corpus: Path) -> Iterator[dict[str, Any]]:
    for record in read_jsonl(corpus):
        yield {"id": record["id"], "input": prompt_messages(record), "tools": record["tools"],
               "label": json.dumps(record["task"], sort_keys=True)}


def _write(rows: Iterator[dict[str, Any]], path: Path) -> Path:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def _hf(corpus: Path, out_dir: Path) -> Path:
    try:
        import datasets
    except ImportError:
        raise ConfigError("the 'hf' export needs the datasets package: pip install datasets") from None
    target = out_dir / "hf"
    datasets.Dataset.from_list([{**r, "tools": json.dumps(r["tools"]), "task": json.dumps(r["task"])}
                                for r in trl_rows(corpus)]).save_to_disk(str(target))
    return target


EXPORTERS: dict[str, Callable[[Path, Path], Path]] = {
    "trl": lambda corpus, out: _write(trl_rows(corpus), out / "trl.jsonl"),
    "openrlhf": lambda corpus, out: _write(openrlhf_rows(corpus), out / "openrlhf.jsonl"),
    "hf": _hf,
}


def export(fmt: str, corpus: Path, out_dir: Path) -> Path:
    if fmt not in EXPORTERS:
        raise ConfigError(f"$.synth.exports: unknown format {fmt!r}; available: {sorted(EXPORTERS)}")
    return EXPORTERS[fmt](corpus, out_dir)
