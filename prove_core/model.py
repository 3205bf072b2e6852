"""The data model: tool calls, messages, tasks and training examples, and their JSON Lines form.

A training example is an OpenAI-style chat (``messages`` with ``tool_calls`` and ``tool``
messages) plus ``tools`` (OpenAI function schemas) plus a ``task``: the servers and seed it
runs on, the ground-truth calls with their dependency edges, and the expected behaviour
(call / clarify / abstain). ``to_json``/``from_json`` round-trip losslessly.

``JsonlWriter`` appends one record per line with a single ``write`` on an ``O_APPEND`` file, so
a killed run never leaves half a record behind (a torn last line from a machine crash is ignored
and overwritten on resume), and it skips keys already written, so a resumed run neither loses
nor duplicates completed records.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs
import cattrs
import cattrs.gen

from prove_core.errors import ProveError

Behaviour = Literal["call", "clarify", "abstain"]
Role = Literal["system", "user", "assistant", "tool"]
_T = TypeVar("_T")


@attrs.frozen(kw_only=True)
class ToolCall:
    """One call as a model emits it (OpenAI ``tool_calls`` entry, arguments decoded)."""

    id: str
    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict)

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, sort_keys=True)},
        }


@attrs.frozen(kw_only=True)
class Message:
    """One chat message. ``mistake`` marks an assistant turn that is deliberately wrong (a call
    the schema rejects, kept so the data shows the recovery that follows): exporters keep it out
    of the training loss. It is written to JSON only when set."""

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = attrs.field(factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    mistake: bool = False

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out


@attrs.frozen(kw_only=True)
class GroundTruthCall:
    """A step of the reference solution; ``depends_on`` lists ids of steps that must run first."""

    id: str
    tool: str
    arguments: dict[str, Any] = attrs.field(factory=dict)
    depends_on: list[str] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class Task:
    servers: list[str]
    seed: int = 0
    calls: list[GroundTruthCall] = attrs.field(factory=list)
    expected: Behaviour = "call"
    initial_state_hash: str | None = None
    meta: dict[str, Any] = attrs.field(factory=dict)

    @calls.validator
    def _check_edges(self, _attr: Any, calls: list[GroundTruthCall]) -> None:
        ids = [c.id for c in calls]
        if len(set(ids)) != len(ids):
            raise ValueError("ground-truth call ids must be unique")
        seen: set[str] = set()
        for call in calls:
            missing = [d for d in call.depends_on if d not in seen]
            if missing:
                raise ValueError(f"call {call.id!r} depends on {missing}, which do not come before it")
            seen.add(call.id)


@attrs.frozen(kw_only=True)
class Example:
    """One training or evaluation example."""

    id: str
    messages: list[Message]
    tools: list[dict[str, Any]]
    task: Task

    @property
    def conversation(self) -> str:
        """The conversation this example derives from (``task.meta["conversation"]``): a
        clarification is a prefix of its conversation and a perturbed example a variant of it, so
        splits keep every example of one conversation on the same side."""
        return conversation_of({"id": self.id, "task": {"meta": self.task.meta}})


def conversation_of(record: dict[str, Any]) -> str:
    """``Example.conversation`` of a corpus record (a plain dict)."""
    meta = (record.get("task") or {}).get("meta") or {}
    found = meta.get("conversation")
    return found if isinstance(found, str) and found else str(record.get("id", "")).removesuffix("-clarify")


_converter = cattrs.Converter(forbid_extra_keys=True)
# Free-form JSON fields (tool arguments, tool schemas, task meta) are already plain JSON: pass
# them through instead of walking every nested value (the walk dominated corpus writing).
_JSON_SHAPES = (dict[str, Any], list[dict[str, Any]])
_converter.register_unstructure_hook_func(lambda t: t in _JSON_SHAPES, lambda value: value)
_converter.register_unstructure_hook(Message, cattrs.gen.make_dict_unstructure_fn(
    Message, _converter, mistake=cattrs.gen.override(omit_if_default=True)))


def to_json(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = _converter.unstructure(obj)  # an attrs instance unstructures to a dict
    return out


def from_json(data: dict[str, Any], cls: type[_T]) -> _T:
    try:
        return _converter.structure(data, cls)
    except Exception as exc:  # cattrs groups errors; show them with paths
        lines = cattrs.transform_error(exc, path="$") if isinstance(exc, cattrs.BaseValidationError) else [str(exc)]
        raise ProveError(f"not a valid {cls.__name__}: " + "; ".join(lines)) from None


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` so a reader (or a run resumed after a kill) sees the old file or
    the new one, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Records of a JSON Lines file; a torn last line (from a crash mid-write) is skipped."""
    path = Path(path)
    if not path.exists():
        return
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                return  # an interrupted write: the writer truncates it on resume
            line = raw.strip()
            if line:
                yield json.loads(line)


class JsonlWriter:
    """Append-only JSON Lines writer that resumes without losing or duplicating records.

    ``key`` names the field that identifies a record (``"id"``); records whose key is already in
    the file are skipped. Use as a context manager.
    """

    def __init__(self, path: str | Path, *, key: str = "id", sync_every: float = 1.0) -> None:
        self.path = Path(path)
        self.key = key
        # A killed process loses nothing already written (the kernel has it); fsync only guards
        # against a machine crash, so it runs at most every ``sync_every`` seconds and on close.
        self.sync_every = sync_every
        self._last_sync = time.monotonic()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._truncate_torn_tail()
        self.seen = {rec.get(key) for rec in read_jsonl(self.path)}
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _truncate_torn_tail(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with self.path.open("r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)

    def __contains__(self, key: object) -> bool:
        return key in self.seen

    def write(self, record: dict[str, Any]) -> bool:
        """Append ``record``; returns False (and writes nothing) if its key is already there."""
        key = record.get(self.key)
        if key is None:
            raise ValueError(f"record has no {self.key!r} field")
        if key in self.seen:
            return False
        line = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode()
        os.write(self._fd, line)  # one write on an O_APPEND fd: never interleaved, never partial
        if time.monotonic() - self._last_sync >= self.sync_every:
            os.fsync(self._fd)
            self._last_sync = time.monotonic()
        self.seen.add(key)
        return True

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
