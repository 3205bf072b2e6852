"""Importers of published abstention and clarification data from local files.

No hub access is needed: download the files once, point ``[[synth.imports]]`` at them.

**When2Call** (NVIDIA; JSON Lines, one record per line, as in its test split)::

    {"uuid": "...", "question": "...", "tools": ["<tool JSON>", ...],
     "correct_answer": "cannot_answer" | "request_for_info" | "direct" | "tool_call",
     "answers": {"cannot_answer": "...", "request_for_info": "...", "direct": "...", "tool_call": "..."}}

``tools`` entries are JSON strings (or objects) with ``name``, ``description`` and a JSON Schema
``parameters``. ``cannot_answer`` and ``direct`` become *abstain* examples, ``request_for_info``
becomes *clarify*; ``tool_call`` records are skipped (no live server backs them).

**xLAM-Irrelevance** (Salesforce; a JSON array or JSON Lines)::

    {"id": 1, "query": "...", "tools": "<JSON list of tools>", "answers": "[]"}

where each tool is ``{"name", "description", "parameters": {"arg": {"type": "str", "description": ...}}}``
(xLAM's own parameter shape, converted to JSON Schema here). Every record becomes an *abstain*
example; the assistant's reply is written by the teacher.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prove_core.errors import ConfigError
from prove_core.model import Behaviour, Example, Message, Task

XLAM_TYPES = {"str": "string", "string": "string", "int": "integer", "integer": "integer", "float": "number",
              "number": "number", "bool": "boolean", "boolean": "boolean", "list": "array", "array": "array",
              "dict": "object", "object": "object"}


def _records(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise ConfigError(f"import file {path} does not exist")
    text = path.read_text()
    if text.lstrip().startswith("["):
        yield from json.loads(text)
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{n}: not valid JSON ({exc.msg})") from None


def _openai_tool(tool: Any) -> dict[str, Any]:
    if isinstance(tool, str):
        tool = json.loads(tool)
    fn = tool.get("function", tool)
    return {"type": "function", "function": {"name": fn["name"], "description": fn.get("description", ""),
                                             "parameters": fn.get("parameters") or {"type": "object", "properties": {}}}}


def _xlam_tool(tool: dict[str, Any]) -> dict[str, Any]:
    props, required = {}, []
    for name, spec in (tool.get("parameters") or {}).items():
        raw = str(spec.get("type", "str"))
        optional = "optional" in raw
        base = raw.replace(", optional", "").split("[")[0].strip().lower()
        props[name] = {"type": XLAM_TYPES.get(base, "string"), "description": spec.get("description", "")}
        if not optional and "default" not in spec:
            required.append(name)
    return {"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                             "parameters": {"type": "object", "properties": props, "required": required}}}


def when2call(path: Path, *, system: str, limit: int | None = None) -> Iterator[Example]:
    behaviours: dict[str, Behaviour] = {"cannot_answer": "abstain", "direct": "abstain", "request_for_info": "clarify"}
    count = 0
    for n, record in enumerate(_records(path)):
        expected = behaviours.get(record.get("correct_answer", ""))
        if expected is None:
            continue
        reply = (record.get("answers") or {}).get(record["correct_answer"]) or ""
        messages = [Message(role="system", content=system), Message(role="user", content=record["question"]),
                    Message(role="assistant", content=reply)]
        yield Example(id=f"when2call-{record.get('uuid', n)}", messages=messages,
                      tools=[_openai_tool(t) for t in record.get("tools", [])],
                      task=Task(servers=[], calls=[], expected=expected,
                                meta={"source": "when2call", "answer_kind": record["correct_answer"]}))
        count += 1
        if limit is not None and count >= limit:
            return


def xlam_irrelevance(path: Path, *, system: str, decline: Any, limit: int | None = None) -> Iterator[Example]:
    for n, record in enumerate(_records(path)):
        if limit is not None and n >= limit:
            return
        tools = record["tools"]
        tools = json.loads(tools) if isinstance(tools, str) else tools
        answers = record.get("answers", "[]")
        if (json.loads(answers) if isinstance(answers, str) else answers) not in ([], None):
            continue  # not an irrelevance record
        messages = [Message(role="system", content=system), Message(role="user", content=record["query"]),
                    Message(role="assistant", content=decline(n))]
        yield Example(id=f"xlam-irrelevance-{record.get('id', n)}", messages=messages,
                      tools=[_xlam_tool(t) for t in tools],
                      task=Task(servers=[], calls=[], expected="abstain", meta={"source": "xlam-irrelevance"}))


IMPORTERS = {"when2call": when2call, "xlam_irrelevance": xlam_irrelevance}
