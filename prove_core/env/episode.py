"""Scripted multi-step episodes on live sessions.

A step's string argument ``"${step_id.path}"`` is replaced by a value taken from the result of
an earlier step, so a script can sample live state (list accounts, pick the first active one)
and pass real ids forward, the way an agent would. Path syntax: ``.key``, ``[index]`` and
``[field=value]`` (the first list item whose field equals value), for example
``${accounts.accounts[status=active][0].id}``. Every reference is a dependency edge, which is
what the episode's ``Task`` records as ground truth.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import structlog

from prove_core.config import EpisodeConfig
from prove_core.env.runtime import Environment, ToolResult
from prove_core.errors import ConfigError
from prove_core.model import GroundTruthCall, Task

REF = re.compile(r"^\$\{([A-Za-z_][\w-]*)((?:\.[\w-]+|\[[^\]]+\])*)\}$")
SEGMENT = re.compile(r"\.([\w-]+)|\[([^\]]+)\]")

log = structlog.get_logger()


@attrs.frozen(kw_only=True)
class StepOutcome:
    id: str
    tool: str
    arguments: dict[str, Any]
    result: ToolResult
    expected_error: str | None = None

    @property
    def ok(self) -> bool:
        error = self.result.error
        if self.expected_error is not None:
            return error is not None and self.expected_error in (error["code"], error["reason"])
        return error is None


@attrs.frozen(kw_only=True)
class EpisodeResult:
    session_id: str
    steps: list[StepOutcome]
    task: Task
    final_state_hash: str

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps)


def _walk(value: Any, path: str, where: str) -> Any:
    for key, index in SEGMENT.findall(path):
        if key:
            if not isinstance(value, dict) or key not in value:
                raise ConfigError(f"{where}: no key {key!r} in {type(value).__name__}")
            value = value[key]
        elif "=" in index:
            field, _, raw = index.partition("=")
            try:  # [expired=false], [count=2] compare as JSON values; anything else as a string
                wanted = json.loads(raw)
            except ValueError:
                wanted = raw
            matches = [v for v in value if isinstance(v, dict) and v.get(field) == wanted] if isinstance(value, list) else []
            if not matches:
                raise ConfigError(f"{where}: no item with {field}={wanted}")
            value = matches
        else:
            if not isinstance(value, list) or not index.lstrip("-").isdigit() or int(index) >= len(value):
                raise ConfigError(f"{where}: index [{index}] out of range")
            value = value[int(index)]
    return value


def substitute(args: Any, results: dict[str, dict[str, Any]], used: set[str], where: str) -> Any:
    """Replace ``${step.path}`` strings in ``args`` with values from earlier results."""
    if isinstance(args, dict):
        return {k: substitute(v, results, used, f"{where}.{k}") for k, v in args.items()}
    if isinstance(args, list):
        return [substitute(v, results, used, f"{where}[{i}]") for i, v in enumerate(args)]
    if isinstance(args, str) and args.startswith("${"):
        match = REF.match(args)
        if not match:
            raise ConfigError(f"{where}: malformed reference {args!r}")
        step_id, path = match.groups()
        if step_id not in results:
            raise ConfigError(f"{where}: {step_id!r} is not an earlier step that succeeded")
        used.add(step_id)
        return _walk(results[step_id], path, where)
    return args


def run_episode(env: Environment, config: EpisodeConfig, *, seed: int = 0) -> EpisodeResult:
    """Play the scripted steps on a fresh session of ``env``. The lifecycle hooks see the episode
    (through ``env.hooks``): ``prove_episode_start`` with a ``Task`` of the environment's servers
    and seed whose ground-truth calls are not known yet, ``prove_episode_end`` with the finished
    ``Task`` and the ``EpisodeResult``."""
    sid = env.new_session()
    servers = sorted(env.runtimes)
    structlog.contextvars.bind_contextvars(session=sid, server=env.server)
    initial = env.state_hash(sid)
    env.episode_start(sid, Task(servers=servers, seed=seed, expected="call", initial_state_hash=initial))
    results: dict[str, dict[str, Any]] = {}
    outcomes: list[StepOutcome] = []
    calls: list[GroundTruthCall] = []
    for i, step in enumerate(config.steps):
        step_id = step.id or f"step{i + 1}"
        used: set[str] = set()
        args = substitute(step.args, results, used, f"$.episode.steps[{i}].args")
        result = env.call(sid, step.tool, args)
        outcome = StepOutcome(id=step_id, tool=step.tool, arguments=args, result=result, expected_error=step.expect_error)
        outcomes.append(outcome)
        log.info("step", step=step_id, tool=step.tool, ok=outcome.ok,
                 error=None if result.error is None else result.error["reason"])
        if not result.is_error:
            results[step_id] = result.structured  # a success's structured content is its data
            calls.append(GroundTruthCall(id=step_id, tool=step.tool, arguments=args, depends_on=sorted(used)))
    task = Task(servers=servers, seed=seed, calls=calls, expected="call", initial_state_hash=initial)
    episode = EpisodeResult(session_id=sid, steps=outcomes, task=task, final_state_hash=env.state_hash(sid))
    structlog.contextvars.unbind_contextvars("session", "server")
    env.episode_end(sid, task, episode)
    return episode
