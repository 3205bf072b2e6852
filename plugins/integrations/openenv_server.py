"""PROVE tasks as OpenEnv environments (``prove openenv serve``).

OpenEnv (``openenv-core``) is the environment contract of Hugging Face's trainers and several
others: a server exposes ``reset`` / ``step`` / ``state`` over a WebSocket (``/ws``, one
environment instance per connection) and stateless HTTP (``/reset``, ``/step``, ``/state``), and
a client (``GenericEnvClient``, ``MCPToolClient``, or an environment's own ``EnvClient``) drives
it. This module is that server for PROVE, built with OpenEnv's own app factory
(``create_fastapi_app``), so its routes and messages are exactly OpenEnv's.

One OpenEnv episode is one PROVE rollout on its own live session:

- ``reset(task_id=... | task={...} | seed=..., episode_id=...)`` picks a task (an id of the
  served corpus, a task or example record sent by the caller, or one sampled from the corpus; with
  no corpus, free play on the served servers at ``seed``), opens a fresh session at the task's
  seed, checks that the servers still match the record (``prove_core.env.drift.check_task``: a
  drifted task fails with ``TASK_DRIFT`` and nothing is played), and returns the example's opening
  (system prompt and first user turn) with the offered tools.
- ``step`` takes an action: a tool call (OpenEnv's MCP ``call_tool`` action, run on the session
  through the fast path ``Environment.call``: the observation carries the result or the typed
  error), ``list_tools``, a prose turn (``message``: the next user turn follows, or the episode
  ends) or ``end``. Every call and every prose turn is one assistant turn; the episode ends when
  the user turns run out, at ``RolloutLimits.max_assistant_turns``, or on ``end``.
- At the end the whole episode is scored like any PROVE rollout (``Reward.score`` of the
  ``Rollout`` it made): the observation's ``reward`` is the total, ``reward_components`` the
  values of the components that apply, ``reward_details`` every component's score.
- ``state`` is the session's PROVE state hash, the episode id, the step count and the progress.

Errors a client can fix are typed: over HTTP a JSON body ``{code, reason, message, details}``,
over the WebSocket OpenEnv's error message whose text starts with the reason (``TASK_DRIFT: ...``).
"""

from __future__ import annotations

import functools
import json
import random
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from openenv.core.env_server import (
    Action,
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Observation,
    State,
    Tool,
    create_fastapi_app,
)
from openenv.core.env_server import Environment as OpenEnvEnvironment
from openenv.core.env_server.types import EnvironmentMetadata
from pydantic import BaseModel, Field, model_validator
from pydantic_core import PydanticCustomError

from prove_core.env.drift import TaskDrift, check_task
from prove_core.env.runtime import Environment, Environments, ToolResult, unknown_tool
from prove_core.errors import ErrorCode, ProveError, ToolError
from prove_core.model import Example, Message, Task, ToolCall, from_json, read_jsonl
from prove_core.reward.core import Reward, Rollout, build_reward, check_scorable
from prove_core.reward.rollout import Played, RolloutLimits, offered_names, opening, user_turns

DEFAULT_MAX_ENVS = 64
STATUS = {ErrorCode.NOT_FOUND: 404, ErrorCode.FAILED_PRECONDITION: 409, ErrorCode.INVALID_ARGUMENT: 400}
RESET_ARGUMENTS = ("seed", "episode_id", "task_id", "task")


class EpisodeError(ToolError, ProveError):
    """A request the episode refuses: a typed error like a tool's (``to_dict``: code, reason,
    message, details), whose ``code`` is chosen per refusal and whose reason is a stable name
    (``TASK_DRIFT``, ``UNKNOWN_TASK``, ``BAD_TASK``, ``NO_EPISODE``, ``EPISODE_DONE``...).
    ``str()`` starts with the reason, which is what an OpenEnv WebSocket client sees."""

    def __init__(self, code: ErrorCode, reason: str, message: str, **details: Any) -> None:
        super().__init__(message, reason=reason, **details)
        self.code = code  # this refusal's, over ToolError's per-class code

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


# -- the wire types ---------------------------------------------------------------------------------


class ProveAction(Action):
    """One agent action. ``call_tool`` and ``list_tools`` are OpenEnv's MCP actions (the same
    fields as ``CallToolAction`` / ``ListToolsAction``, so ``MCPToolClient`` and plain dicts both
    work); ``message`` is an assistant turn in prose (the next user turn follows, or the episode
    ends); ``end`` ends the episode now (with ``content``: a last prose turn first)."""

    type: Literal["call_tool", "list_tools", "message", "end"] = "call_tool"
    tool_name: str | None = Field(default=None, description="call_tool: the tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="call_tool: its arguments")
    content: str = Field(default="", description="message / end: the assistant's prose")

    @model_validator(mode="after")
    def _named(self) -> ProveAction:
        if self.type == "call_tool" and not self.tool_name:
            # a PydanticCustomError: OpenEnv sends a validation error's details as JSON, and a
            # ValueError there would not serialize (the WebSocket session would end)
            raise PydanticCustomError("missing_tool_name", "a call_tool action needs a tool_name")
        return self


class EpisodeFields(BaseModel):
    """What every PROVE observation says about the episode; the reward fields are set on the
    observation that ends it."""

    episode_id: str | None = Field(default=None, description="this episode's id")
    assistant_turns: int = Field(default=0, description="assistant turns played so far (calls and prose turns)")
    end_reason: Literal["answered", "turn_limit", "ended"] | None = Field(
        default=None, description="why the episode ended: the user turns ran out, the turn limit, or an end action")
    reward_components: dict[str, float] = Field(
        default_factory=dict, description="at the end: the value of each reward component that applies to the task")
    reward_details: dict[str, Any] = Field(
        default_factory=dict, description="at the end: every component's score (value, applies, explanation)")
    reward_best: float | None = Field(default=None, description="at the end: the highest total this task allows")


class ProveResetObservation(EpisodeFields, Observation):
    """After ``reset``: the chat so far and the tools the task offers."""

    task_id: str | None = Field(default=None, description="the example's id (None: free play)")
    messages: list[dict[str, Any]] = Field(
        default_factory=list, description="OpenAI-style messages: the system prompt and the first user turn")
    tools: list[Tool] = Field(default_factory=list, description="the offered tools as MCP tools")
    openai_tools: list[dict[str, Any]] = Field(
        default_factory=list, description="the same tools in OpenAI function format (what chat templates take)")


class ProveTurnObservation(EpisodeFields, Observation):
    """After a prose turn (``message`` or ``end``): the next user turn, or the end."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description="new messages: the next user turn")


class ProveToolObservation(EpisodeFields, CallToolObservation):
    """After a tool call: OpenEnv's ``CallToolObservation`` whose ``result`` is MCP-shaped:
    ``structured_content`` (and ``data``) is the tool's result or its typed error
    ``{code, reason, message, details}``, ``is_error`` tells which, and ``content`` holds the text a
    model sees in the tool message."""


class ProveState(State):
    """``state``: the live session's PROVE state hash and the episode's progress."""

    state_hash: str | None = Field(default=None, description="Environment.state_hash of the episode's session")
    task_id: str | None = None
    servers: list[str] = Field(default_factory=list)
    seed: int | None = None
    assistant_turns: int = 0
    max_assistant_turns: int = 0
    user_turn: int = Field(default=0, description="user turns shown so far")
    user_turns: int = Field(default=0, description="user turns the episode has")
    calls: int = Field(default=0, description="tool calls made")
    done: bool = False
    reward: float | None = None


# -- the served environments ------------------------------------------------------------------------


class ProveOpenEnv:
    """What every episode of one server shares: the served servers, the environment factory, the
    reward, the corpus and the limits. ``app()`` is the OpenEnv ASGI app; ``environment()`` one
    OpenEnv environment (what the app makes per WebSocket session)."""

    def __init__(self, servers: Sequence[str], *, environments: Environments, reward: Reward,
                 examples: Sequence[Example] = (), seed: int = 0, limits: RolloutLimits = RolloutLimits()) -> None:
        self.servers = tuple(servers)
        self.environments = environments
        self.reward = reward
        self.examples = {e.id: e for e in examples}
        self.seed = seed
        self.limits = limits
        self._scoring = threading.Lock()  # the reward's caches are not made for concurrent writers
        self._sampling = threading.Lock()
        self._rng = random.Random()

    # -- tasks ---------------------------------------------------------------------------------
    def free_play(self, seed: int | None) -> Example:
        """An example without a conversation on the served servers: the agent acts on its own."""
        task = Task(servers=list(self.servers), seed=self.seed if seed is None else seed)
        tools = [spec.to_openai() for spec in self.environments(task).specs()]
        return Example(id="free-play", messages=[], tools=tools, task=task)

    def pick(self, *, seed: int | None, task_id: Any, task: Any) -> tuple[Example, bool]:
        """The example of a reset, and whether it is scored (free play is not)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise EpisodeError(ErrorCode.INVALID_ARGUMENT, "BAD_SEED", f"seed must be an integer >= 0, got {seed!r}")
        if task_id is not None and task is not None:
            raise EpisodeError(ErrorCode.INVALID_ARGUMENT, "BAD_TASK", "give task_id or task, not both")
        if task is not None:
            example = self.record(task)
        elif task_id is not None:
            if not self.examples:
                raise EpisodeError(ErrorCode.NOT_FOUND, "UNKNOWN_TASK",
                                   f"no corpus is served, so there is no task {task_id!r}; start with --corpus")
            if str(task_id) not in self.examples:
                raise EpisodeError(ErrorCode.NOT_FOUND, "UNKNOWN_TASK",
                                   f"no task {task_id!r} in the corpus ({len(self.examples)} tasks)", task_id=str(task_id))
            example = self.examples[str(task_id)]
        elif self.examples:
            ids = list(self.examples)
            with self._sampling:
                chosen = random.Random(seed).choice(ids) if seed is not None else self._rng.choice(ids)
            example = self.examples[chosen]
        else:
            return self.free_play(seed), False
        missing = [s for s in example.task.servers if s not in self.servers]
        if missing:
            raise EpisodeError(ErrorCode.INVALID_ARGUMENT, "SERVER_NOT_SERVED",
                               f"task {example.id!r} runs on {', '.join(missing)}, which this server does not serve "
                               f"(serving: {', '.join(self.servers)})")
        return example, True

    def record(self, record: Any) -> Example:
        """An example or task record a caller sent (a bare task gets all the tools and no chat)."""
        if not isinstance(record, Mapping):
            raise EpisodeError(ErrorCode.INVALID_ARGUMENT, "BAD_TASK",
                               f"task must be an example or task record (a JSON object), got {type(record).__name__}")
        try:
            if "task" in record:
                example = from_json(dict(record), Example)
            else:
                task = from_json(dict(record), Task)
                tools = [spec.to_openai() for spec in self.environments(task).specs()] if set(task.servers) <= set(
                    self.servers) else []
                example = Example(id=str(task.meta.get("id", "task")), messages=[], tools=tools, task=task)
            check_scorable(example.task, task_id=example.id)
        except ProveError as exc:
            raise EpisodeError(ErrorCode.INVALID_ARGUMENT, "BAD_TASK", str(exc)) from None
        return example

    def score(self, rollout: Rollout) -> Any:
        with self._scoring:
            return self.reward.score(rollout)

    # -- OpenEnv ---------------------------------------------------------------------------------
    def environment(self) -> ProveEnvironment:
        return ProveEnvironment(self)

    def app(self, *, max_concurrent_envs: int = DEFAULT_MAX_ENVS, allowed_hosts: Iterable[str] = (),
            allowed_origins: Iterable[str] = ()) -> Any:
        """OpenEnv's FastAPI app for these environments, typed errors as JSON, behind PROVE's
        DNS-rebinding guard (loopback hosts plus ``allowed_hosts``)."""
        from fastapi import Request
        from fastapi.responses import JSONResponse

        from prove_core.serve.app import HostGuard

        app = create_fastapi_app(functools.partial(ProveEnvironment, self), ProveAction, Observation,
                                 max_concurrent_envs=max_concurrent_envs)

        async def typed_error(request: Request, exc: Exception) -> JSONResponse:
            body = exc.to_dict() if isinstance(exc, EpisodeError) else {
                "code": ErrorCode.INVALID_ARGUMENT.value, "reason": "INVALID_REQUEST", "message": str(exc)}
            status = STATUS.get(exc.code, 400) if isinstance(exc, EpisodeError) else 400
            return JSONResponse(body, status_code=status)

        app.add_exception_handler(ProveError, typed_error)
        app.state.prove = self
        return HostGuard(QuietDisconnect(app), allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)


class QuietDisconnect:
    """ASGI middleware: OpenEnv 0.3.0 closes a WebSocket whose client has already gone (after it
    has released the session) and expects a ``RuntimeError``; Starlette raises
    ``WebSocketDisconnect`` there, which the server would log as a crash on every disconnect."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise


def build(servers: Sequence[str], *, corpus: str | Path | None = None, config: str | Path | None = None, seed: int = 0,
          plugins: Any = None, limits: RolloutLimits = RolloutLimits()) -> ProveOpenEnv:
    """The served environments: ``servers`` (registered names), the examples of ``corpus`` (a
    synthesis ``corpus.jsonl``), the reward, seed options and session settings of ``config`` (an
    experiment file; default: the default reward and each server's default options)."""
    from prove_core.config import RewardConfig, SessionsConfig, load_experiment, resolve

    if plugins is None:
        from prove_core.plugin.manager import get_plugins

        plugins = get_plugins()
    registry = plugins.registry
    if not servers:
        raise ProveError("name at least one server to serve")
    if len(set(servers)) != len(servers):
        raise ProveError(f"a server is named twice: {', '.join(servers)}")
    for name in servers:
        registry.load("servers", name)  # UnknownComponent (one line, with the registered names)
    options: dict[str, Any] = {}
    sessions, reward_config = SessionsConfig(), RewardConfig()
    if config is not None:
        experiment = load_experiment(config)
        options = {entry.name: entry.options for entry in resolve(experiment, registry)}
        sessions, reward_config = experiment.sessions, experiment.reward or RewardConfig()
    examples = load_corpus(corpus, servers) if corpus is not None else []
    environments = Environments(registry, options, sessions=sessions, hooks=plugins.hook)
    reward = build_reward(reward_config, registry, server_options=options, sessions=sessions)
    return ProveOpenEnv(servers, environments=environments, reward=reward, examples=examples, seed=seed, limits=limits)


def load_corpus(path: str | Path, servers: Sequence[str]) -> list[Example]:
    """The examples of a corpus file, each on servers that are served."""
    path = Path(path)
    if not path.is_file():
        raise ProveError(f"corpus {path} does not exist")
    examples: list[Example] = []
    try:
        for line, record in enumerate(read_jsonl(path), start=1):
            try:
                examples.append(from_json(record, Example))
            except ProveError as exc:
                raise ProveError(f"{path}:{line}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ProveError(f"{path} is not JSON Lines: {exc}") from None
    if not examples:
        raise ProveError(f"corpus {path} has no examples")
    unserved = sorted({s for e in examples for s in e.task.servers} - set(servers))
    if unserved:
        raise ProveError(f"corpus {path} has tasks on {', '.join(unserved)}, which are not served "
                         f"(serving: {', '.join(servers)}); name them too")
    return examples


def serve(served: ProveOpenEnv, *, host: str = "127.0.0.1", port: int = 8000, max_concurrent_envs: int = DEFAULT_MAX_ENVS,
          allowed_hosts: Iterable[str] = ()) -> None:
    """Run the OpenEnv server until interrupted."""
    import uvicorn

    hosts = list(allowed_hosts)
    if host not in ("", "0.0.0.0", "::", "[::]"):  # clients of a specific address name it in Host
        hosts.append(host)
    uvicorn.run(served.app(max_concurrent_envs=max_concurrent_envs, allowed_hosts=hosts), host=host, port=port,
                log_level="warning")


# -- one episode --------------------------------------------------------------------------------------


def mcp_result(result: ToolResult) -> dict[str, Any]:
    """A PROVE tool result in the shape of an MCP ``CallToolResult`` (as OpenEnv's MCP environments
    return it), with the tool message's text."""
    text = json.dumps(result.structured, sort_keys=True, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "structured_content": result.structured,
            "data": result.structured, "is_error": result.is_error}


def mcp_tools(tools: Sequence[dict[str, Any]]) -> list[Tool]:
    out = []
    for tool in tools:
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.append(Tool(name=fn["name"], description=fn.get("description") or "",
                            input_schema=fn.get("parameters") or {"type": "object", "properties": {}}))
    return out


class ProveEnvironment(OpenEnvEnvironment[ProveAction, Observation, ProveState]):
    """One OpenEnv environment instance: at most one PROVE episode at a time, on its own session
    (a new reset closes the previous one; ``close`` releases it)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # every episode has its own PROVE session

    def __init__(self, served: ProveOpenEnv) -> None:
        super().__init__()
        self.served = served
        self._lock = threading.RLock()
        self._clear()

    def _clear(self) -> None:
        self.example: Example | None = None
        self.env: Environment | None = None
        self.session_id: str | None = None
        self.episode_id: str | None = None
        self.scored = False
        self.offered: list[dict[str, Any]] = []
        self.names: set[str] = set()
        self.users: list[str] = []
        self.user_turn = 0
        self.assistant_turns = 0
        self.steps = 0
        self.attempts: list[ToolCall] = []
        self.turn_of: list[int] = []
        self.prose: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.done = False
        self.reward: float | None = None
        self.final_hash: str | None = None
        self.end_fields: dict[str, Any] = {}

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="prove", version="0.1.0",
            description=f"PROVE tasks on live, stateful MCP servers ({', '.join(self.served.servers)}): MCP tool-call "
                        "actions, a programmatic reward at the end of the episode")

    # -- reset -------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              task: dict[str, Any] | None = None, **kwargs: Any) -> ProveResetObservation:
        if kwargs:
            raise EpisodeError(ErrorCode.INVALID_ARGUMENT, "BAD_RESET",
                               f"unknown reset argument{'s' if len(kwargs) > 1 else ''} {', '.join(map(repr, sorted(kwargs)))}; "
                               f"accepted: {', '.join(RESET_ARGUMENTS)}")
        with self._lock:
            self._release()  # a new reset ends the previous episode, whether or not this one starts
            example, scored = self.served.pick(seed=seed, task_id=task_id, task=task)
            env = self.served.environments(example.task)
            sid = env.new_session()
            try:
                check_task(env, example.task, sid)
            except TaskDrift as exc:
                env.close(sid)
                raise EpisodeError(ErrorCode.FAILED_PRECONDITION, "TASK_DRIFT", str(exc), what=exc.what,
                                   expected=exc.expected, actual=exc.actual, task_id=example.id) from None
            except BaseException:
                env.close(sid)
                raise
            self.example, self.env, self.session_id, self.scored = example, env, sid, scored
            self.episode_id = episode_id or uuid.uuid4().hex
            self.offered = list(example.tools)
            self.names = offered_names(self.offered)
            self.users = user_turns(example)[: self.served.limits.max_user_turns]
            self.messages = opening(example)
            if self.users:
                self.messages.append({"role": "user", "content": self.users[0]})
                self.user_turn = 1
            env.episode_start(sid, example.task)
            return ProveResetObservation(
                episode_id=self.episode_id, task_id=example.id if scored else None, messages=list(self.messages),
                tools=mcp_tools(self.offered), openai_tools=self.offered,
                metadata={"servers": example.task.servers, "seed": example.task.seed, "expected": example.task.expected})

    # -- step --------------------------------------------------------------------------------------
    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        kind, name, arguments, content = self._parse(action)
        with self._lock:
            if kind == "list_tools":
                if self.example is not None:
                    self.steps += 1
                tools = self.offered if self.example is not None else self.served.free_play(None).tools
                return ListToolsObservation(tools=mcp_tools(tools))
            if self.example is None or self.env is None:
                raise EpisodeError(ErrorCode.FAILED_PRECONDITION, "NO_EPISODE", "reset before you step")
            if self.done:
                raise EpisodeError(ErrorCode.FAILED_PRECONDITION, "EPISODE_DONE",
                                   f"episode {self.episode_id} has ended; reset to start another")
            self.steps += 1
            if kind == "call_tool":
                return self._call(str(name), arguments)
            return self._prose(content, end=kind == "end")

    @staticmethod
    def _parse(action: Any) -> tuple[str, str | None, dict[str, Any], str]:
        if isinstance(action, CallToolAction):
            return "call_tool", action.tool_name, dict(action.arguments), ""
        if isinstance(action, ListToolsAction):
            return "list_tools", None, {}, ""
        if isinstance(action, ProveAction):
            return action.type, action.tool_name, dict(action.arguments), action.content
        if isinstance(action, Mapping):
            return ProveEnvironment._parse(ProveAction.model_validate(dict(action)))
        raise EpisodeError(ErrorCode.INVALID_ARGUMENT, "BAD_ACTION",
                           f"expected a ProveAction, CallToolAction or ListToolsAction, got {type(action).__name__}")

    def _call(self, name: str, arguments: dict[str, Any]) -> Observation:
        assert self.env is not None and self.session_id is not None
        self.assistant_turns += 1
        call = ToolCall(id=f"call_{len(self.attempts)}", name=name, arguments=arguments)
        self.attempts.append(call)
        self.turn_of.append(self.assistant_turns - 1)
        # A tool the task does not offer is not run (as in prove_core.reward.rollout): typed UNKNOWN_TOOL.
        result = self.env.call(self.session_id, name, arguments) if name in self.names else unknown_tool(name)
        shaped = mcp_result(result)
        self.messages.append(Message(role="assistant", tool_calls=[call]).to_openai())
        self.messages.append({"role": "tool", "tool_call_id": call.id, "name": name,
                              "content": shaped["content"][0]["text"]})
        if self.assistant_turns >= self.served.limits.max_assistant_turns:
            self._finish("turn_limit")
        return ProveToolObservation(tool_name=name, result=shaped, **self._fields())

    def _prose(self, content: str, *, end: bool) -> Observation:
        new: list[dict[str, Any]] = []
        if content or not end:
            self.assistant_turns += 1
            if content:
                self.prose.append(content)
            self.messages.append({"role": "assistant", "content": content or None})
        if end:
            self._finish("ended")
        elif self.assistant_turns >= self.served.limits.max_assistant_turns:
            self._finish("turn_limit")
        elif self.user_turn < len(self.users):
            new = [{"role": "user", "content": self.users[self.user_turn]}]
            self.messages.extend(new)
            self.user_turn += 1
        else:
            self._finish("answered")
        return ProveTurnObservation(messages=new, **self._fields())

    def _fields(self) -> dict[str, Any]:
        base = {"episode_id": self.episode_id, "assistant_turns": self.assistant_turns, "done": self.done}
        return {**base, **self.end_fields}

    def _finish(self, why: str) -> None:
        """Score the whole episode, report it to the lifecycle hooks, release the session."""
        assert self.example is not None and self.env is not None and self.session_id is not None
        task, sid = self.example.task, self.session_id
        self.final_hash = self.env.state_hash(sid)
        fields: dict[str, Any] = {"end_reason": why}
        metadata: dict[str, Any] = {"state_hash": self.final_hash, "calls": len(self.attempts)}
        played = None
        if self.scored:
            rollout = Rollout(id=self.example.id, task=task, attempts=self.attempts, turns=self.turn_of,
                              tools=self.offered, content="\n".join(self.prose),
                              reply=self.prose[-1] if self.prose else "")  # final_reply checks the last words
            scored = self.served.score(rollout)
            self.reward = scored.total
            fields.update(reward=scored.total, reward_best=scored.best,
                          reward_components={n: s.value for n, s in scored.scores.items() if s.applies},
                          reward_details={n: s.to_json() for n, s in scored.scores.items()})
            metadata.update(reward_components=fields["reward_components"], reward_best=scored.best)
            played = Played(rollout=rollout, messages=list(self.messages), session_id=sid, final_state_hash=self.final_hash)
        else:
            metadata["note"] = "free play has no task, so no reward"
        try:
            if played is not None:
                self.env.episode_end(sid, task, played)
        finally:
            self.env.close(sid)
            self.session_id = None
            self.done = True
            self.end_fields = {**fields, "metadata": metadata}

    # -- state and cleanup -------------------------------------------------------------------------------
    @property
    def state(self) -> ProveState:
        with self._lock:
            example = self.example
            state_hash = self.final_hash
            if self.env is not None and self.session_id is not None:
                state_hash = self.env.state_hash(self.session_id)
            return ProveState(
                episode_id=self.episode_id, step_count=self.steps, state_hash=state_hash,
                task_id=example.id if example is not None and self.scored else None,
                servers=list(example.task.servers) if example is not None else list(self.served.servers),
                seed=example.task.seed if example is not None else None, assistant_turns=self.assistant_turns,
                max_assistant_turns=self.served.limits.max_assistant_turns, user_turn=self.user_turn,
                user_turns=len(self.users), calls=len(self.attempts), done=self.done, reward=self.reward)

    def _release(self) -> None:
        if self.env is not None and self.session_id is not None:
            self.env.close(self.session_id)
        self._clear()

    def close(self) -> None:
        with self._lock:
            self._release()


__all__ = ["EpisodeError", "ProveAction", "ProveEnvironment", "ProveOpenEnv", "ProveResetObservation", "ProveState",
           "ProveToolObservation", "ProveTurnObservation", "build", "load_corpus", "serve"]
