"""Checks every synthesized example must pass (step 6 of docs/synthesis.md).

- **replay**: the conversation's calls run again, in order, on a fresh session from the task's
  seed and must give exactly the recorded results; more than ``max_error_rate`` schema or
  execution errors drops it (an empty result is not an error);
- **provenance** (checked in the same pass): every id or secret an assistant passes to a tool
  must appear earlier, in a user turn or a tool result — the model could not have known it;
- **grounding**: every id a user turn mentions exists in the seed state;
- **dedup**: Jaccard similarity of the examples' call sets; at or above the threshold the later
  example is a duplicate.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Iterable
from typing import Any

import attrs

from prove_core.env.runtime import Environment
from prove_core.model import Example
from prove_core.toolkit.state import Snapshot, unseen_writes

ID_PATTERN = re.compile(r"\b[a-z]{2,5}_[0-9a-z]{8}\b")
SECRET_WORDS = ("password", "token", "secret", "pin", "api_key", "otp", "passcode")
SCHEMA_CODES = {"INVALID_ARGUMENT", "UNKNOWN_TOOL"}


@attrs.frozen(kw_only=True)
class Verdict:
    ok: bool
    reason: str | None = None
    detail: str = ""
    calls: int = 0
    schema_errors: int = 0
    execution_errors: int = 0


def replay(example: Example, env: Environment, *, max_error_rate: float = 0.3) -> Verdict:
    """Replay every call on a fresh session: the results must equal the recorded ones, errors must
    stay within ``max_error_rate``, and (in the same pass) ids and secrets must have provenance.
    The replay is an episode for the lifecycle hooks: start with the example's task, end with the
    ``Verdict``."""
    sid = env.new_session()
    try:
        env.episode_start(sid, example.task)
        verdict = _replay(example, env, sid, max_error_rate)
        env.episode_end(sid, example.task, verdict)
        return verdict
    finally:
        env.close(sid)


def _replay(example: Example, env: Environment, sid: str, max_error_rate: float) -> Verdict:
    recorded = {m.tool_call_id: m.content for m in example.messages if m.role == "tool"}
    calls = schema = execution = 0
    failures: list[str] = []
    seen_text: list[str] = []
    for message in example.messages:
        if message.role in ("user", "tool") and message.content:
            seen_text.append(message.content)
        for call in message.tool_calls:
            calls += 1
            problem = _unsourced(call, env, sid, "\n".join(seen_text))
            if problem:
                return Verdict(ok=False, reason="provenance", detail=problem, calls=calls)
            result = env.call(sid, call.name, call.arguments)
            content = recorded.get(call.id)
            if content is None or json.loads(content) != result.structured:
                return Verdict(ok=False, reason="replay_mismatch",
                               detail=f"{call.name} gave a different result on replay", calls=calls)
            if result.is_error:
                if result.code in SCHEMA_CODES:
                    schema += 1
                else:
                    execution += 1
                error = result.error or {}
                failures.append(f"{call.name} {error.get('code')}/{error.get('reason')}: "
                                f"{str(error.get('message', ''))[:160]}")
    if calls and (schema + execution) / calls > max_error_rate:
        return Verdict(ok=False, reason="too_many_errors", calls=calls, schema_errors=schema,
                       execution_errors=execution,
                       detail=f"{schema + execution} of {calls} calls failed: " + " | ".join(failures))
    return Verdict(ok=True, calls=calls, schema_errors=schema, execution_errors=execution)


def _unsourced(call: Any, env: Environment, sid: str, seen: str) -> str | None:
    """The first id or secret in the call's arguments that no earlier user turn or tool result
    contains (an id is a key of a table of the session's current state)."""
    states = [(rt, rt.state(sid)) for rt in env.runtimes.values()]
    for key, value in _strings(call.arguments):
        secret = any(word in key.lower() for word in SECRET_WORDS)
        is_id = any(value in state._tables[name] for rt, state in states for name in rt.server.state_type._table_specs)
        if (is_id or secret) and value not in seen:
            return f"{call.name}.{key}={value!r} appears in no earlier turn"
    return None


def _strings(value: Any) -> Iterable[tuple[str, str]]:
    """(key path leaf name, string) pairs inside a JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str):
                yield k, v
            else:
                yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def provenance(example: Example, env: Environment) -> list[str]:
    """Ids and secrets in call arguments that appear in no earlier user turn or tool result."""
    verdict = replay(example, env, max_error_rate=1.0)
    return [verdict.detail] if verdict.reason == "provenance" else []


_SEED_IDS: weakref.WeakKeyDictionary[Environment, set[str]] = weakref.WeakKeyDictionary()


def mark_unseen_writes(example: Example, env: Environment) -> Example:
    """``example`` with ``task.meta["unseen_writes"]``: the ids of its ground-truth writes whose
    replay changes nothing an end-state comparison can see (``toolkit.state.unseen_writes``: a
    write that changes no domain state, or writes that cancel out), which the reward then
    requires by call. Unchanged when there are none."""
    task = example.task
    if task.expected != "call" or not task.calls:
        return example
    sid = env.new_session()
    try:
        def states() -> dict[str, Snapshot]:
            return {name: rt.state(sid).snapshot() for name, rt in env.runtimes.items()}

        start = states()
        read_only = {spec.name for spec in env.specs() if spec.annotations.read_only}
        results, snapshots = [], [start]
        for step in task.calls:
            results.append(env.call(sid, step.tool, step.arguments))
            snapshots.append(states())
    finally:
        env.close(sid)
    writes = [step.tool not in read_only and not r.is_error for step, r in zip(task.calls, results)]
    unseen = unseen_writes([s.id for s in task.calls], writes, snapshots, {n: snap.clock for n, snap in start.items()})
    if not unseen:
        return example
    return attrs.evolve(example, task=attrs.evolve(task, meta={**task.meta, "unseen_writes": unseen}))


def seed_ids(env: Environment) -> set[str]:
    """Every id-shaped string anywhere in the environment's seed state (record ids and nested
    ones such as order items); computed once per environment."""
    if env not in _SEED_IDS:
        sid = env.new_session()
        try:
            blob = json.dumps([rt.state(sid).to_json()["tables"] for rt in env.runtimes.values()], default=str)
        finally:
            env.close(sid)
        _SEED_IDS[env] = set(ID_PATTERN.findall(blob))
    return _SEED_IDS[env]


def ungrounded_mentions(example: Example, env: Environment) -> list[str]:
    """Id-like tokens in user turns that do not exist in the seed state."""
    existing = seed_ids(env)
    return [token for m in example.messages if m.role == "user" and m.content
            for token in ID_PATTERN.findall(m.content) if token not in existing]


def call_tokens(example: Example) -> frozenset[str]:
    if example.task.calls:
        return frozenset(f"{c.tool}:{json.dumps(c.arguments, sort_keys=True)}" for c in example.task.calls)
    first_user = next((m.content for m in example.messages if m.role == "user"), "")
    return frozenset({f"{example.task.expected}:{first_user}"})


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


class Deduper:
    """Near-duplicate filter: Jaccard on call sets, with an inverted index so each new example
    is compared only with examples that share a call."""

    def __init__(self, threshold: float = 0.7) -> None:
        self.threshold = threshold
        self._sets: list[frozenset[str]] = []
        self._index: dict[str, list[int]] = {}

    def is_duplicate(self, tokens: frozenset[str]) -> bool:
        candidates = {i for t in tokens for i in self._index.get(t, ())}
        return any(jaccard(tokens, self._sets[i]) >= self.threshold for i in candidates)

    def add(self, tokens: frozenset[str]) -> None:
        self._sets.append(tokens)
        for t in tokens:
            self._index.setdefault(t, []).append(len(self._sets) - 1)

    def offer(self, tokens: frozenset[str]) -> bool:
        """Add and return True unless it is a duplicate."""
        if self.is_duplicate(tokens):
            return False
        self.add(tokens)
        return True
