"""Drift checks: does a live environment still match the task a record was made on?

A task record (``Task``) carries the hash of the tool schemas it was synthesised against
(``meta["schema_hash"]``) and the hash of the seed state its servers started from
(``initial_state_hash``). A trainer that plays the task on servers that have changed since (a new
server version, other seed options, another seed) would train on a prompt whose ids, tools or
ground truth no longer exist, with a reward that still looks plausible. Every adapter that opens
a session for a task (OpenEnv, TRL environments, verl, OpenRLHF) calls ``check_task`` first and
fails the rollout with ``TaskDrift`` instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import attrs

from prove_core.errors import ProveError
from prove_core.toolkit.server import ToolSpec


def schema_hash(specs: Iterable[ToolSpec]) -> str:
    """A hash of everything a labeller looks at: names, descriptions, schemas, annotations and
    entity metadata."""
    payload = [
        {
            "name": s.name,
            "description": s.description,
            "parameters": s.parameters,
            "annotations": attrs.asdict(s.annotations),
            "reads": s.reads,
            "produces": s.produces,
            "mutates": s.mutates,
        }
        for s in sorted(specs, key=lambda s: s.name)
    ]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=list).encode()).hexdigest()[:20]


class TaskDrift(ProveError):
    """The live servers no longer match a task record: their tool schemas or their seed state
    differ from the ones the record was made with. ``what`` is ``"schema"`` or ``"state"``."""

    def __init__(self, message: str, *, what: str, expected: str, actual: str) -> None:
        super().__init__(message)
        self.what = what
        self.expected = expected
        self.actual = actual


def state_matches(recorded: str, actual: str) -> bool:
    """Whether a recorded initial state hash names ``actual`` (an ``Environment.state_hash``,
    ``server:hash|server:hash``); a one-server record may hold the bare hash."""
    if recorded == actual:
        return True
    parts = actual.split("|")
    return len(parts) == 1 and recorded == parts[0].partition(":")[2]


def check_task(env: Any, task: Any, session_id: str | None = None) -> None:
    """Raise ``TaskDrift`` when ``env`` (an ``Environment``) does not match ``task``: the schema
    hash recorded in ``task.meta`` against the environment's tools, and the recorded initial
    state hash against the state of ``session_id`` (a session just opened for the task; without
    one a session is opened and closed for the check). A record without a hash is not checked
    for it (hand-written tasks)."""
    recorded_schema = (task.meta or {}).get("schema_hash")
    if recorded_schema:
        actual = schema_hash(env.specs())
        if actual != recorded_schema:
            raise TaskDrift(
                f"the tools of {', '.join(task.servers)} changed since this task was made (schema hash {actual}, "
                f"the task's {recorded_schema}): re-synthesise the data or serve the server version it was made with",
                what="schema", expected=recorded_schema, actual=actual)
    if task.initial_state_hash:
        sid = env.new_session() if session_id is None else session_id
        try:
            actual = env.state_hash(sid)
        finally:
            if session_id is None:
                env.close(sid)
        if not state_matches(task.initial_state_hash, actual):
            raise TaskDrift(
                f"servers {', '.join(task.servers)} at seed {task.seed} start from state {actual[:48]}, not the "
                f"task's {task.initial_state_hash[:48]}: check the server versions and seed options",
                what="state", expected=task.initial_state_hash, actual=actual)
