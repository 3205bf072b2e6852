"""PROVE servers as a TRL ``environment_factory``: GRPO on live, stateful sessions with TRL's own loop.

TRL's ``GRPOTrainer(environment_factory=...)`` (experimental in TRL 1.16) takes a zero-argument
callable that makes environment instances. It probes one instance for its public methods, which
become the model's tools (their schemas come from each method's signature and Google-style
docstring through ``transformers.utils.get_json_schema``), keeps a pool of instances that it reuses
across batches (one per rollout of a batch), calls ``reset(**row)`` with every column of the
dataset row before generating, dispatches each tool call the model makes to the method of that
rollout's instance, and scores the rollout with ``get_reward()`` when the class defines it.

``prove_environment_factory(servers)`` builds such a class for PROVE servers::

    from prove_plugins.integrations.trl_env import prove_environment_factory, rl_dataset
    from trl import GRPOConfig, GRPOTrainer

    Banking = prove_environment_factory(["banking"])          # the class is the factory
    tokenizer = tool_ready(tokenizer)                         # a template that renders tools (see below)
    trainer = GRPOTrainer(model, args=GRPOConfig(...), train_dataset=rl_dataset("out/exp/synth/corpus.jsonl"),
                          processing_class=tokenizer, environment_factory=Banking)

- **Chat template**: TRL refuses a tokenizer whose template cannot render a tool-calling
  conversation ("does not support tool calling"), as SmolLM2's plain ChatML cannot, and parses
  the model's tool calls only for templates it knows. ``tool_ready(tokenizer)`` keeps a template
  that renders tool use and otherwise installs TRL's copy of Qwen2.5's ChatML template (the same
  Hermes ``<tool_call>`` format as PROVE's own), saying so once.

- **Tools**: one method per tool of the servers (``Environment.specs()``), named as PROVE publishes
  it (``<server>_<tool>`` with several servers), with keyword-only parameters typed from the JSON
  Schema (string/integer/number/boolean/array/object to ``str``/``int``/``float``/``bool``/
  ``list``/``dict``, ``enum`` and ``const`` to ``Literal``, ``anyOf`` and type lists to unions;
  an optional parameter is ``Optional[...]`` with the schema's default, or ``None``) and a
  docstring holding the tool's description and every parameter's description. A method runs
  ``Environment.call`` on the instance's own session and returns the JSON text of the result or of
  the typed error, exactly the tool message PROVE's own rollout loop sends; errors are returned,
  never raised, so the model reads the code, reason and message (TRL would turn an exception
  into ``{"error": str(exc)}`` and count it in ``tools/failure_frequency``, losing the typed
  error). ``None`` for an optional parameter means "not given" (the signature says ``Optional``)
  and is left out of the call. Arguments the tool does not take are passed on, so PROVE answers
  them with its SCHEMA_VIOLATION error and the reward sees the call, instead of Python raising a
  ``TypeError`` that TRL would answer before the call reaches the environment.
- **reset(\\*\\*row)**: a row of PROVE's RL export (``{"id", "prompt", "tools", "task"}``; ``task`` a
  ``Task`` as a dict, JSON text or object). Ends the previous episode and closes its session,
  opens a fresh session on the task's servers at the task's seed with its recorded seed options
  (one cached ``Environment`` per servers and seed), runs the drift check
  (``prove_core.env.drift.check_task``: a row whose servers' tool schemas or seed state differ from
  its record raises ``TaskDrift`` and is never trained on), clears the call log and the score,
  and returns ``None`` (the row's prompt already holds the conversation; TRL appends a returned
  string to the last user message). A tool the row does not offer (a hidden-tool perturbation)
  still shows in TRL's prompt, which lists the class's tools for every row; its method answers
  UNKNOWN_TOOL without running it, as PROVE's rollout loop does, and the reward fails the call.
- **Reward**: the PROVE reward (``build_reward``; the default preset unless ``reward`` names
  another) of the rollout made of the calls this instance ran, in order, against the tools the row
  offered; ``env.reward_result`` and ``env.scores`` hold every component's score. Two ways to hand
  it to TRL (``reward_source``):

  - ``"get_reward"`` (default): the class defines ``get_reward()``, which TRL adds as one more
    reward function (weight 1, logged as ``rewards/<class name>/mean``); nothing else to pass. TRL
    calls it with no argument, so it cannot see the assistant's prose: components that read the
    reply (``honest_reply`` in the default ``guarded`` preset) score every rollout as "no reply".
    That is the same for all rollouts of a group, so GRPO's advantages do not move, but the
    wording of a reply gets no signal and the total is below what PROVE's evaluation gives.
  - ``"function"``: no ``get_reward``; pass ``reward_funcs=Env.reward_functions()``, one reward
    function named ``prove`` that reads the reply from TRL's ``completions``, returns the PROVE
    total (the components' weights are inside, so ``reward_weights`` stays default) and logs every
    component with TRL's ``log_metric`` (``prove/<component>``: the mean over the rollouts of the
    step it applies to) and ``log_extra`` (a column per component in the completions table).
    Forgetting ``reward_funcs`` fails loudly (TRL: no reward source).

Instances never share a session, and ``reset`` leaves nothing of the previous episode: TRL reuses
them across batches. What TRL answers itself never reaches the environment and is not in the
rollout: a call to a name that is no method (TRL: ``Tool X not found``) and text that does not
parse as a tool call.

Nothing here imports torch or TRL; ``rl_dataset`` imports ``datasets`` when called.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Union

from prove_core.env.drift import TaskDrift, check_task, schema_hash
from prove_core.errors import ProveError
from prove_core.model import Task, ToolCall, from_json

__all__ = ["ProveEnvironment", "ProveReward", "TaskDrift", "prove_environment_factory", "rl_dataset",
           "tool_annotation"]

_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None),
                               "array": list, "object": dict}
# What would end the description or an argument's text early in transformers' docstring parser.
_SECTION = re.compile(r"\b(Args|Returns|Raises):")


# -- JSON Schema -> Python signatures and docstrings -------------------------------------------------------------------


def tool_annotation(schema: Mapping[str, Any]) -> Any:
    """The Python type of a JSON Schema, as transformers' ``get_json_schema`` reads it back:
    ``enum``/``const`` become ``Literal``, ``anyOf``/``oneOf`` and type lists a ``Union``,
    arrays ``list[item]``, objects ``dict`` (``dict[str, T]`` with a schema for extra keys); a
    schema without a type is ``Any``."""
    if "const" in schema:
        return Literal[schema["const"]]  # a Literal built at runtime
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return Literal[tuple(schema["enum"])]
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        return _union([tool_annotation(o) for o in options if isinstance(o, Mapping)])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([tool_annotation({**schema, "type": k}) for k in kind])
    if kind == "array":
        items = schema.get("items")
        return list[tool_annotation(items)] if isinstance(items, Mapping) and items else list  # type: ignore[misc]
    if kind == "object":
        extra = schema.get("additionalProperties")
        return dict[str, tool_annotation(extra)] if isinstance(extra, Mapping) and extra else dict  # type: ignore[misc]
    return _JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any


def _union(types: list[Any]) -> Any:
    unique = list(dict.fromkeys(types))
    if not unique:
        return Any
    return unique[0] if len(unique) == 1 else Union[tuple(unique)]  # noqa: UP007  # built at runtime


def _admits_null(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind) or schema.get("const", 0) is None:
        return True
    if None in (schema.get("enum") or ()):
        return True
    return any(_admits_null(o) for o in (schema.get("anyOf") or schema.get("oneOf") or ()) if isinstance(o, Mapping))


def _doc_text(text: Any) -> str:
    """Text that transformers' docstring parser keeps whole (a section name followed by a colon
    would end it early)."""
    return _SECTION.sub(lambda m: f"{m.group(1)} -", str(text or ""))


def _docstring(description: str, properties: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [_doc_text(description).strip() or "(no description)"]
    if properties:
        lines += ["", "Args:"]
        for name, schema in properties.items():
            text = " ".join(_doc_text(schema.get("description")).split()) or f"The {name} argument."
            lines.append(f"    {name}: {text}")
    return "\n".join(lines)


class _Tool:
    """One tool as the class publishes it: the method's signature and what a call needs."""

    def __init__(self, spec: Any) -> None:
        self.name: str = spec.name
        self.spec = spec
        params = spec.parameters if isinstance(spec.parameters, Mapping) else {}
        properties = params.get("properties") or {}
        required = set(params.get("required") or ())
        parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        annotations: dict[str, Any] = {}
        droppable = set()
        for pname, pschema in properties.items():
            if not pname.isidentifier() or pname == "self":
                raise ProveError(f"tool {spec.name!r}: parameter {pname!r} cannot be a Python parameter name, so TRL "
                                 "cannot offer the tool")
            annotation = tool_annotation(pschema)
            if pname in required:
                default: Any = inspect.Parameter.empty
            else:
                annotation = annotation | None
                default = pschema.get("default")
                if not _admits_null(pschema):
                    droppable.add(pname)
            parameters.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default,
                                                annotation=annotation))
            annotations[pname] = annotation
        self.signature = inspect.Signature(parameters, return_annotation=str)
        self.annotations = annotations
        self.droppable = frozenset(droppable)  # optional parameters whose None means "not given"
        self.doc = _docstring(spec.description, properties)

    def method(self) -> Callable[..., str]:
        tool = self.name

        def method(self: ProveEnvironment, **arguments: Any) -> str:
            return self._call_tool(tool, arguments)

        method.__name__ = method.__qualname__ = tool
        method.__doc__ = self.doc
        method.__signature__ = self.signature  # type: ignore[attr-defined]  # what inspect.signature reports
        method.__annotations__ = dict(self.annotations)  # no "return": the schema TRL renders stays PROVE's
        method.__module__ = __name__
        return method


# -- the environment ---------------------------------------------------------------------------------------------------


class _Setup:
    """What every instance of one generated class shares: the environments cache, the reward and
    the published tools."""

    def __init__(self, servers: tuple[str, ...], environments: Any, reward: Any, tools: dict[str, _Tool],
                 tools_hash: str) -> None:
        self.servers = servers
        self.environments = environments
        self.reward = reward
        self.tools = tools
        self.tools_hash = tools_hash
        self.checked: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()  # Environment -> schema hash


class ProveEnvironment:
    """Base of the classes ``prove_environment_factory`` makes (see the module docstring). Its only
    public methods are ``reset`` and the tools (and ``get_reward`` by default): TRL offers every
    other public method as a tool, so helpers are private."""

    _prove: ClassVar[_Setup]
    _reward_source: ClassVar[str] = "get_reward"

    def __init__(self) -> None:
        # Cheap: TRL makes one at init to read the tools, and more as batches need them.
        self._env: Any = None
        self._session_id: str | None = None
        self._task: Task | None = None
        self._row_id = ""
        self._offered: frozenset[str] = frozenset()
        self._offered_tools: tuple[dict[str, Any], ...] = ()
        self._calls: list[ToolCall] = []
        self._results: list[Any] = []
        self._reply = ""
        self._result: Any = None
        self._ended = False
        self._episodes = 0

    # -- TRL's interface --------------------------------------------------------------------------------------------
    def reset(self, **row: Any) -> str | None:
        """Start the episode of one RL-export row on a fresh session (see the module docstring)."""
        from prove_core.reward.core import check_scorable

        setup = type(self)._prove
        self._close()
        if "task" not in row:
            raise ProveError("reset() needs a row of PROVE's RL export ({'id', 'prompt', 'tools', 'task'}); this row "
                             f"has {sorted(row)}")
        task = _task(row["task"])
        row_id = str(row.get("id") or f"episode-{self._episodes}")
        check_scorable(task, task_id=row_id)  # DegenerateTaskError now, not at scoring time
        if set(task.servers) != set(setup.servers):
            raise ProveError(f"row {row_id!r} is a task on {', '.join(task.servers)} but this environment class serves "
                             f"{', '.join(setup.servers)}: build one class per set of servers (a dict "
                             "environment_factory keyed by an 'environment' column mixes them)")
        env = setup.environments(task)
        live = setup.checked.get(env)
        if live is None:
            live = setup.checked[env] = schema_hash(env.specs())
        if live != setup.tools_hash:
            raise TaskDrift(f"the tools of {', '.join(task.servers)} at seed {task.seed} differ from the ones this "
                            f"environment class offers (schema hash {live}, the class's {setup.tools_hash})",
                            what="schema", expected=setup.tools_hash, actual=live)
        session_id = env.new_session()
        try:
            check_task(env, task, session_id)
        except BaseException:
            env.close(session_id)
            raise
        offered = _offered(row.get("tools"), setup.tools)
        self._env, self._session_id, self._task, self._row_id = env, session_id, task, row_id
        self._offered = frozenset(offered)
        self._offered_tools = tuple(setup.tools[name].spec.to_openai() for name in offered)
        self._episodes += 1
        env.episode_start(session_id, task)
        return None

    # -- what an episode did ----------------------------------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        """The live session of the current episode (``None`` before the first ``reset``)."""
        return self._session_id

    @property
    def task(self) -> Task | None:
        return self._task

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The calls the model made this episode, in order, with the arguments that ran."""
        return tuple(self._calls)

    @property
    def results(self) -> tuple[Any, ...]:
        """Their ``ToolResult``s."""
        return tuple(self._results)

    @property
    def state_hash(self) -> str:
        """The state hash of the episode's session (``Environment.state_hash``)."""
        self._require_session()
        return str(self._env.state_hash(self._session_id))

    @property
    def reward_result(self) -> Any:
        """The episode's ``RewardResult`` (total and every component), scored on first use and
        kept until the next call or ``reset``."""
        return self._score()

    @property
    def scores(self) -> dict[str, float | None]:
        """Component name -> value (``None`` where the component does not apply to the task)."""
        result = self._score()
        return {name: (s.value if s.applies else None) for name, s in result.scores.items()}

    @property
    def rollout(self) -> Any:
        """The episode so far as a PROVE ``Rollout`` (a property: TRL offers every public function)."""
        return self._rollout()

    @classmethod
    def reward_functions(cls) -> list[ProveReward]:
        """With ``reward_source="function"``: the reward functions to pass to ``GRPOTrainer`` as
        ``reward_funcs`` (one, ``prove``); otherwise ``[]`` (``get_reward`` is the reward)."""
        return [ProveReward()] if cls._reward_source == "function" else []

    @classmethod
    def tool_names(cls) -> list[str]:
        return list(cls._prove.tools)

    # -- internals --------------------------------------------------------------------------------------------------
    def _require_session(self) -> None:
        if self._session_id is None:
            raise ProveError("no episode: call reset(**row) with a row of PROVE's RL export first")

    def _call_tool(self, tool: str, arguments: dict[str, Any]) -> str:
        from prove_core.env.runtime import unknown_tool

        self._require_session()
        spec = type(self)._prove.tools[tool]
        args = {k: copy.deepcopy(v) for k, v in arguments.items() if not (v is None and k in spec.droppable)}
        # A tool the row does not offer is not run, as in PROVE's rollout loop (the reward fails it on tier 1).
        result = self._env.call(self._session_id, tool, args) if tool in self._offered else unknown_tool(tool)
        self._calls.append(ToolCall(id=f"call_{len(self._calls)}", name=tool, arguments=args))
        self._results.append(result)
        self._result = None
        return json.dumps(result.structured, sort_keys=True, ensure_ascii=False)

    def _rollout(self) -> Any:
        """The episode as a PROVE ``Rollout``: every call in order (one per turn: TRL does not
        tell the environment where turns end), the tools the row offered, the reply's prose."""
        from prove_core.reward.core import Rollout

        self._require_session()
        assert self._task is not None  # set with the session
        return Rollout(id=self._row_id, task=self._task, attempts=list(self._calls), tools=self._offered_tools,
                       content=self._reply)

    def _set_reply(self, text: str) -> None:
        if text != self._reply:
            self._reply = text
            self._result = None

    def _score(self) -> Any:
        if self._result is None:
            self._result = type(self)._prove.reward.score(self._rollout())
            self._end_episode()
        return self._result

    def _end_episode(self) -> None:
        """Report the episode to the lifecycle hooks once (when scored, or when closed unscored)."""
        if self._ended or self._session_id is None:
            return
        self._ended = True
        hooks = self._env.hooks
        caller = getattr(hooks, "prove_episode_end", None) if hooks is not None else None
        if caller is None or not caller.get_hookimpls():
            return  # nobody listens: skip the transcript and the state hash
        from prove_core.reward.rollout import Played

        messages: list[dict[str, Any]] = []
        for call, result in zip(self._calls, self._results, strict=True):
            messages.append({"role": "assistant", "content": None, "tool_calls": [call.to_openai()]})
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                             "content": json.dumps(result.structured, sort_keys=True, ensure_ascii=False)})
        played = Played(rollout=self._rollout(), messages=messages, session_id=self._session_id,
                        final_state_hash=self._env.state_hash(self._session_id))
        self._env.episode_end(self._session_id, self._task, played)

    def _close(self) -> None:
        """End the current episode and close its session (``reset`` does this first). Private so
        TRL does not offer it as a tool."""
        if self._session_id is not None:
            try:
                self._end_episode()
            finally:
                self._env.close(self._session_id)
        self._env = self._session_id = self._task = self._result = None
        self._row_id, self._reply, self._ended = "", "", False
        self._offered, self._offered_tools = frozenset(), ()
        self._calls, self._results = [], []


def _get_reward(self: ProveEnvironment) -> float:
    """The PROVE reward of the episode (TRL calls it once per finished rollout)."""
    return float(self._score().total)


_get_reward.__name__ = _get_reward.__qualname__ = "get_reward"


class ProveReward:
    """The TRL reward function of ``reward_source="function"``: for each rollout's environment,
    the PROVE total of its episode, after handing it the assistant's prose from ``completions``.
    Every component is logged through TRL's ``log_metric`` (``prove/<component>``, the mean over
    the rollouts it applies to; a failed component counts 0, as in the total) and ``log_extra``
    (one value per rollout, ``None`` where it does not apply)."""

    __name__ = "prove"  # TRL's column: rewards/prove/mean

    def __repr__(self) -> str:
        return "ProveReward()"

    def __call__(self, completions: Sequence[Any] | None = None, environments: Sequence[Any] | None = None, *,
                 log_metric: Callable[[str, float], None] | None = None,
                 log_extra: Callable[[str, list[Any]], None] | None = None, **kwargs: Any) -> list[float | None]:
        if environments is None:
            raise ProveError("the PROVE reward reads TRL's environments: pass environment_factory= as well")
        totals: list[float | None] = []
        columns: dict[str, list[float | None]] = {}
        for i, env in enumerate(environments):
            if not isinstance(env, ProveEnvironment):  # another environment of a dict factory
                totals.append(None)
                continue
            if completions is not None:
                env._set_reply(_reply_text(completions[i]))
            result = env._score()
            totals.append(float(result.total))
            for name, score in result.scores.items():
                value = None if not score.applies else (0.0 if score.error else float(score.value))
                columns.setdefault(name, [None] * len(environments))[i] = value
        for name, values in columns.items():
            applied = [v for v in values if v is not None]
            if log_metric is not None and applied:
                log_metric(f"prove/{name}", sum(applied) / len(applied))
            if log_extra is not None:
                log_extra(f"prove/{name}", values)
        return totals


def _reply_text(completion: Any) -> str:
    """The assistant's prose in a TRL completion (its messages, or the raw text)."""
    if isinstance(completion, str):
        return completion.strip()
    parts = []
    for message in completion or ():
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
            if isinstance(content, str) and content.strip():
                parts.append(content.strip())
    return "\n".join(parts)


def _task(value: Any) -> Task:
    if isinstance(value, Task):
        return value
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, Mapping):
        raise ProveError(f"a row's task must be a Task, a dict or JSON text, got {type(value).__name__}")
    return from_json(dict(value), Task)


def _offered(tools: Any, published: Mapping[str, _Tool]) -> list[str]:
    """The published tools a row offers (all of them when the row lists none), in the class's order."""
    if tools is None:
        return list(published)
    if isinstance(tools, str):
        tools = json.loads(tools)
    names = set()
    for tool in tools:
        tool = json.loads(tool) if isinstance(tool, str) else tool
        fn = tool.get("function", tool) if isinstance(tool, Mapping) else None
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return [name for name in published if name in names]


# -- the factory -------------------------------------------------------------------------------------------------------


def prove_environment_factory(
    servers: str | Sequence[str],
    *,
    reward: Any = None,
    server_options: Mapping[str, Any] | None = None,
    sessions: Any = None,
    plugins: Any = None,
    reward_source: Literal["get_reward", "function"] = "get_reward",
    seed: int = 0,
    name: str = "ProveEnvironment",
) -> type[ProveEnvironment]:
    """A ``ProveEnvironment`` subclass for ``servers``: pass the class itself as TRL's
    ``environment_factory`` (see the module docstring).

    ``reward``: ``None`` (the default preset), a ``RewardConfig`` or its dict (the ``[reward]``
    table), or a built ``Reward``. ``server_options``: server name -> seed options (the
    ``[[servers]].options`` tables, or options objects); a task's recorded seed options win.
    ``sessions``: the ``[sessions]`` settings (``SessionsConfig`` or dict). ``plugins``: a loaded
    ``Plugins`` (default: the process's, with entry-point plugins). ``reward_source``:
    ``"get_reward"`` (the environment's ``get_reward``) or ``"function"`` (``Env.reward_functions()``,
    which also reads the reply). ``seed``: the seed whose servers publish the tools (the schemas do
    not depend on it unless a server says so; each row plays at its own task's seed). ``name``: the
    class name (TRL logs ``get_reward`` under it).
    """
    from prove_core.config import RewardConfig, SessionsConfig, structure
    from prove_core.env.runtime import Environments
    from prove_core.plugin.manager import get_plugins
    from prove_core.reward.core import build_reward

    if reward_source not in ("get_reward", "function"):
        raise ProveError(f"reward_source must be 'get_reward' or 'function', got {reward_source!r}")
    names = (servers,) if isinstance(servers, str) else tuple(servers)
    if not names or len(set(names)) != len(names):
        raise ProveError(f"servers must name one or more distinct servers, got {list(names)}")
    plugins = plugins if plugins is not None else get_plugins()
    registry = plugins.registry
    options = {n: (structure(o, registry.load("servers", n).options_type, path=f"$.servers.{n}.options")
                   if isinstance(o, Mapping) else o)
               for n, o in (server_options or {}).items()}
    if isinstance(sessions, Mapping):
        sessions = structure(dict(sessions), SessionsConfig, path="$.sessions")
    if reward is None or isinstance(reward, RewardConfig | Mapping):
        config = structure(dict(reward), RewardConfig, path="$.reward") if isinstance(reward, Mapping) else reward
        reward = build_reward(config, registry, server_options=options, sessions=sessions)
    elif not callable(getattr(reward, "score", None)):
        raise ProveError(f"reward must be None, a RewardConfig, its dict or a Reward, got {type(reward).__name__}")
    environments = Environments(registry, options, sessions=sessions, hooks=getattr(plugins, "hook", None))
    specs = environments(Task(servers=list(names), seed=seed)).specs()

    reserved = {n for n in dir(ProveEnvironment)} | {"get_reward"}
    tools: dict[str, _Tool] = {}
    for spec in specs:
        if spec.name.startswith("_") or spec.name in reserved or not spec.name.isidentifier():
            raise ProveError(f"tool {spec.name!r} of {', '.join(names)} cannot be an environment method (TRL skips "
                             f"names starting with '_', and {sorted(reserved - set(dir(object)))} are taken)")
        tools[spec.name] = _Tool(spec)

    namespace: dict[str, Any] = {t.name: t.method() for t in tools.values()}
    namespace["__module__"] = __name__
    namespace["__doc__"] = (f"PROVE servers {', '.join(names)} as a TRL environment: reset(**row) opens a fresh session "
                            f"for an RL-export row; {len(tools)} tool methods run on it"
                            f"{'; get_reward() is the PROVE reward' if reward_source == 'get_reward' else ''}.")
    namespace["_prove"] = _Setup(names, environments, reward, tools, schema_hash(specs))
    namespace["_reward_source"] = reward_source
    if reward_source == "get_reward":
        namespace["get_reward"] = _get_reward
    return type(name, (ProveEnvironment,), namespace)


# -- data ----------------------------------------------------------------------------------------------------------------


def tool_ready(tokenizer: Any, *, echo: Any = print) -> Any:
    """``tokenizer`` with a chat template TRL can train tools with (see the module docstring);
    returned for chaining, changed in place. A template that renders tool use is kept; otherwise
    TRL's own copy of Qwen2.5's ChatML template goes in — the Hermes ``<tool_call>`` JSON that
    PROVE's template writes too, and one TRL knows how to parse back — when the vocabulary has the
    ChatML tokens; without them, ``ConfigError``."""
    from trl.chat_template_utils import qwen2_5_chat_template

    from prove_core.errors import ConfigError
    from prove_plugins.train.models.template import IM_END, IM_START, template_problem

    problem = template_problem(tokenizer)
    if problem is None or (problem.startswith("it has no {% generation %}") and tokenizer.chat_template):
        return tokenizer  # TRL's GRPO needs no loss markers: it masks by the tokens it generated itself
    name = getattr(tokenizer, "name_or_path", "") or "the model"
    missing = [t for t in (IM_START, IM_END) if t not in tokenizer.get_vocab()]
    if missing:
        raise ConfigError(f"the chat template of {name} cannot render tool use ({problem}), and the ChatML "
                          f"fallback needs {' and '.join(missing)}: give the tokenizer a tool-calling template")
    tokenizer.chat_template = qwen2_5_chat_template
    echo(f"chat template: {name}'s own cannot render tool use ({problem}); using Qwen2.5's ChatML tool-calling "
         "template, which TRL parses")
    return tokenizer


def rl_dataset(source: str | Path | Iterable[Mapping[str, Any]]) -> Any:
    """A ``datasets.Dataset`` of RL rows for ``GRPOTrainer``: from PROVE's ``rl.jsonl`` export, a
    corpus (``corpus.jsonl``, turned into rows as the export does) or rows. The messages, tools and
    task are ``datasets.Json`` values (the ``hf`` export's ``rl`` split's features), so they reach ``reset``
    exactly as written, whatever ``datasets`` would infer (plain Arrow structs give every object
    of a column the union of all their keys, the missing ones ``None``). Needs ``datasets>=4.7``."""
    import datasets

    from prove_core.model import read_jsonl
    from prove_core.synth.exporters import hf_features, rl_rows

    if isinstance(source, str | Path):
        path = Path(source)
        rows = list(read_jsonl(path))
        if rows and "prompt" not in rows[0]:  # a corpus: its examples become rows as the RL export makes them
            rows = list(rl_rows(path))
    else:
        rows = [dict(r) for r in source]
    from prove_core.model import conversation_of

    keys = ("id", "prompt", "tools", "task")
    return datasets.Dataset.from_list([{**{k: r[k] for k in keys}, "group": r.get("group") or conversation_of(r)}
                                       for r in rows], features=hf_features()["rl"])
