"""Multi-turn rollouts of a policy on live sessions: the loop training and evaluation share.

A **policy** answers one assistant turn at a time::

    class Policy(Protocol):
        name: str
        def respond(self, messages: list[dict], tools: list[dict]) -> PolicyTurn: ...

``messages`` are OpenAI-style chat messages so far and ``tools`` the offered tools (OpenAI
function format). A turn has prose and tool calls — already parsed into ``ToolCall``s and
``ParseFailure``s (a policy that generates text parses it with a registered parser; see
``prove_core.reward.parsing``) — plus the raw text it generated.

``rollout(policy, example, env)`` plays one example: the example's user turns are fed in order
(the task's ``meta["user_turns"]`` count, taken from the example's own messages); after each
user turn the policy may call tools — every call runs on **this rollout's own live session**,
forked from the task's seed, and its result (or typed error) goes back as a ``tool`` message —
until it answers in prose or the assistant-turn limit is reached. A call to a tool that was not
offered is not run: it gets a typed ``UNKNOWN_TOOL`` error, as the reward fails it on tier 1.
The result is a ``prove_core.reward.core.Rollout`` ready for the reward, plus the transcript. Every rollout reports
its start and end to the lifecycle hooks (``prove_episode_start`` with the example's task,
``prove_episode_end`` with the ``Played`` result) through ``env.hooks``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from prove_core.env.runtime import Environment, unknown_tool
from prove_core.model import Example, Message
from prove_core.reward.core import Rollout
from prove_core.reward.parsing import Attempt, AttemptViews


@attrs.frozen(kw_only=True)
class PolicyTurn(AttemptViews):
    content: str = ""
    attempts: tuple[Attempt, ...] = attrs.field(default=(), converter=tuple)
    raw: str = ""  # the text the policy generated, unparsed (empty for API policies)


class Policy(Protocol):
    name: str

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn: ...


@attrs.frozen(kw_only=True)
class RolloutLimits:
    """The paper's limits: at most 5 user turns and 10 assistant turns per episode."""

    max_user_turns: int = attrs.field(default=5, validator=attrs.validators.gt(0))
    max_assistant_turns: int = attrs.field(default=10, validator=attrs.validators.gt(0))


@attrs.frozen(kw_only=True)
class Played:
    rollout: Rollout
    messages: list[dict[str, Any]]
    session_id: str
    final_state_hash: str


class BatchPolicy(Policy, Protocol):
    """A policy that can play many episodes at once (a local model batching its generations
    across episodes). ``prove_core.train.core.evaluate`` uses ``play_batch`` when a policy has it;
    each episode must still be played by ``rollout`` on its own session of ``env_for(example.task)``,
    and the results come back in the order of ``examples``."""

    def play_batch(self, examples: Sequence[Example], env_for: Callable[[Any], Environment], *,
                   limits: RolloutLimits = RolloutLimits(), max_batch: int = 16,
                   rollout_ids: Sequence[str] | None = None) -> list[Played]: ...


def offered_names(tools: Sequence[dict[str, Any]]) -> set[str]:
    """The names of the offered tools (OpenAI function format, or bare ``{"name", ...}``), read
    the way the reward reads them (``RewardContext.tool_schemas``)."""
    names = set()
    for tool in tools:
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


def user_turns(example: Example) -> list[str]:
    """The user messages a rollout feeds, in order (the example's own conversation)."""
    return [m.content or "" for m in example.messages if m.role == "user"]


def opening(example: Example) -> list[dict[str, Any]]:
    """The messages before the first user turn (usually the system prompt)."""
    out = []
    for m in example.messages:
        if m.role == "user":
            break
        out.append(m.to_openai())
    return out


def rollout(policy: Policy, example: Example, env: Environment, *, limits: RolloutLimits = RolloutLimits(),
            rollout_id: str | None = None, tools: Sequence[dict[str, Any]] | None = None) -> Played:
    """Play ``example`` with ``policy`` on a fresh session of ``env`` (the task's servers)."""
    offered = list(tools if tools is not None else example.tools)
    names = offered_names(offered)
    messages = opening(example)
    attempts: list[Attempt] = []
    turn_of: list[int] = []
    prose: list[str] = []
    last = ""  # the prose of the last assistant turn
    sid = env.new_session()
    try:  # the session is closed however the episode ends (a policy whose request fails included)
        env.episode_start(sid, example.task)
        assistant_turns = 0
        for user_text in user_turns(example)[: limits.max_user_turns]:
            messages.append({"role": "user", "content": user_text})
            while assistant_turns < limits.max_assistant_turns:
                turn = policy.respond(messages, offered)
                assistant_turns += 1
                calls = turn.calls
                for attempt in turn.attempts:
                    attempts.append(attempt)
                    turn_of.append(assistant_turns - 1)
                last = turn.content or ""
                if turn.content:
                    prose.append(turn.content)
                messages.append(Message(role="assistant", content=turn.content or None, tool_calls=calls).to_openai())
                for failure in turn.failures:
                    messages.append({"role": "user", "content": f"(Your tool call could not be parsed: {failure.message}.)"})
                if not calls:
                    break  # the policy answered in prose: the next user turn follows
                for call in calls:
                    # A tool that was not offered (a hidden_tool example) is not run, even when the
                    # servers have it: the model gets the typed UNKNOWN_TOOL error a tool that does not
                    # exist gets, and the reward fails the call on tier 1 (docs/reward.md).
                    result = env.call(sid, call.name, call.arguments) if call.name in names else unknown_tool(call.name)
                    messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                                     "content": json.dumps(result.structured, sort_keys=True, ensure_ascii=False)})
        final = env.state_hash(sid)
        scored = Rollout(id=rollout_id or example.id, task=example.task, attempts=attempts, turns=turn_of,
                         tools=offered, content="\n".join(prose), reply=last)
        played = Played(rollout=scored, messages=messages, session_id=sid, final_state_hash=final)
        env.episode_end(sid, example.task, played)  # the session is still open for the hook
    finally:
        env.close(sid)
    return played


class ScriptedPolicy:
    """Replays a fixed list of turns (tests and sanity baselines build on it)."""

    def __init__(self, turns: Sequence[PolicyTurn], name: str = "scripted") -> None:
        self.name = name
        self._turns = list(turns)

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        return self._turns.pop(0) if self._turns else PolicyTurn(content="Done.")
