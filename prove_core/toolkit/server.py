"""Declaring a server: its state, its seed, and its tools as typed Python functions.

::

    bank = Server("banking", domain="finance", state=BankState, seed=build_bank,
                  description="Retail bank accounts, transfers and cards.")

    @bank.tool(read_only=True, reads=["account"], examples=[lambda s: {"account_id": ...}])
    def get_balance(state: BankState, account_id: Annotated[str, ref("account", "The account.")]) -> dict:
        '''Current and available balance of one account.'''
        ...

The function signature becomes the JSON Schema both call paths publish and validate against
(pydantic generates it; a compiled validator checks every call). The first parameter receives
the session's state. Entity metadata (``reads``/``produces``/``mutates`` and ``ref`` on
parameters) is what later stages use to build the dependency graph.
"""

from __future__ import annotations

import inspect
import random
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import fastjsonschema
import pydantic
from pydantic.fields import FieldInfo

from prove_core.toolkit.state import State

ENTITY_KEY = "x-prove-entity"

Example = Mapping[str, Any] | Callable[[State], Mapping[str, Any]]
# How users ask for a tool (``prove_core.toolkit.phrasing``): templates with ``{param}`` slots, or a
# callable that picks templates from the call's arguments (``lambda a: ... if a["frozen"] else ...``).
Asks = Sequence[str] | Callable[[Mapping[str, Any]], Sequence[str]]
# A realistic value for a parameter, drawn per call: ``(rng, state) -> value``, or
# ``(rng, state, args=None) -> value`` to be given the call's other arguments known so far and draw
# what belongs with them (a limit price near the chosen symbol's quote); see ``phrasing.draw_value``.
ValueSource = Callable[..., Any]


def ref(entity: str, description: str, **field_kwargs: Any) -> FieldInfo:
    """A parameter that holds the id of an existing ``entity`` (shown as ``x-prove-entity``)."""
    field: FieldInfo = pydantic.Field(description=description, json_schema_extra={ENTITY_KEY: entity}, **field_kwargs)
    return field


@attrs.frozen(kw_only=True)
class ToolAnnotations:
    """What a tool promises about its effect on the session state, published as the MCP hints
    ``readOnlyHint``, ``destructiveHint``, ``idempotentHint`` and ``openWorldHint``. Set them with
    ``Server.tool(read_only=..., destructive=..., idempotent=...)``; the conformance kit
    (``prove audit``, check ``annotations``) calls every example once and then again with the same
    arguments, each on a fresh session, and fails the server when a promise is broken.

    ``read_only`` (default False): the call changes nothing — no record, counter or variable, and
    so not the session clock, which ticks only on calls that change something. Checked: the state
    hash is the same after the call. A read-only tool declares no ``produces``/``mutates``.

    ``destructive`` (default False): True when the tool may delete records — remove a row, empty
    a cart, replace a set of attachments, consume a trash entry. False promises that the tool
    only adds records and updates fields of records that stay. Checked on False: no record present
    before the call (or before its repeat) is gone after it. Marking a tool that deletes nothing
    as destructive is allowed (the hint is "may"); by convention PROVE also marks irreversible
    updates (cancelling an order, overwriting a file's content) as destructive. Ordinary in-place
    updates (a balance, a status, a title) are not destructive here, although MCP's own wording of
    ``destructiveHint: false`` is stricter ("only additive updates").

    ``idempotent`` (default: the value of ``read_only``): a second call with the same arguments
    changes nothing more — the end state after two calls equals the end state after one (the
    repeat may fail, e.g. with a ``..._NOT_FOUND``, as long as it changes nothing). Checked: the
    state hash after the repeat equals the hash after the first call. Write only when a value
    really changes (``Collection.update`` does), or the clock ticks and breaks idempotency.

    ``open_world`` (always False): PROVE tools act only on their session's state, never on
    anything outside it; the field exists so the MCP hint is published explicitly.
    """

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False

    def to_mcp(self) -> dict[str, bool]:
        return {
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


@attrs.frozen(kw_only=True)
class ToolSpec:
    """What a client sees of a tool: name, description, parameter schema, annotations, and the
    entity metadata PROVE adds (which entity types it reads, produces and mutates)."""

    name: str
    description: str
    parameters: dict[str, Any]
    annotations: ToolAnnotations
    reads: tuple[str, ...] = ()
    produces: tuple[str, ...] = ()
    mutates: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def entity_params(self) -> dict[str, str]:
        """Parameter name → entity type, for parameters declared with ``ref``."""
        props = self.parameters.get("properties", {})
        return {name: p[ENTITY_KEY] for name, p in props.items() if ENTITY_KEY in p}


@attrs.define(kw_only=True)
class ToolDef:
    spec: ToolSpec
    fn: Callable[..., Any]
    validate: Callable[[dict[str, Any]], dict[str, Any]]
    examples: tuple[Example, ...] = ()
    asks: Asks = ()
    values: Mapping[str, ValueSource] = attrs.field(factory=dict)
    answers: tuple[str, ...] = ()  # result fields that answer a request (prove_core.toolkit.answers)
    sensitive: frozenset[str] = frozenset()  # result fields a reply never repeats
    # The tool's own code checks its arguments (a wrapped benchmark, whose messages are the
    # reference): the runtime hands them over as the caller sent them, neither validated against
    # the schema nor converted (a whole float stays a float, NaN and lone surrogates get through).
    raw_arguments: bool = False

    @property
    def name(self) -> str:
        return self.spec.name


@attrs.frozen(kw_only=True)
class NoOptions:
    """Servers without seed options use this empty options class."""


class Server:
    """A stateful tool server: a state type, a deterministic seed function and typed tools.

    ``seed(rng, options)`` builds the initial state; ``rng`` is a ``random.Random`` seeded from
    the session seed, ``options`` an instance of ``options`` (an attrs class, filled from the
    ``[servers.options]`` table of an experiment config).
    """

    def __init__(
        self,
        name: str,
        *,
        domain: str,
        description: str,
        state: type[State],
        seed: Callable[[random.Random, Any], State],
        options: type = NoOptions,
        version: str = "1",
        sensitive: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.domain = domain
        self.description = description
        self.state_type = state
        self.seed_fn = seed
        self.options_type = options
        self.version = version
        self.sensitive = frozenset(sensitive)  # fields no reply repeats, for every tool (toolkit.answers)
        self.tools: dict[str, ToolDef] = {}

    # A benchmark environment (BFCL's backends, τ²'s domains) is for held-out evaluation only:
    # training material never borrows its tools (no distractors from it), so a model is not shown
    # a benchmark's tool schemas before it is scored on them.
    benchmark: bool = False

    def __repr__(self) -> str:
        return f"<Server {self.name} ({len(self.tools)} tools)>"

    def build_state(self, seed: int, options: Any = None) -> State:
        rng = random.Random(f"{self.name}:{seed}")
        state = self.seed_fn(rng, options if options is not None else self.options_type())
        if not isinstance(state, self.state_type):
            raise TypeError(f"seed function of {self.name!r} must return {self.state_type.__name__}")
        return state

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self.tools.values()]

    def tool(
        self,
        *,
        read_only: bool = False,
        destructive: bool = False,
        idempotent: bool | None = None,
        reads: Sequence[str] = (),
        produces: Sequence[str] = (),
        mutates: Sequence[str] = (),
        errors: Sequence[str] = (),
        examples: Sequence[Example] = (),
        asks: Asks = (),
        values: Mapping[str, ValueSource] | None = None,
        answers: Sequence[str] = (),
        sensitive: Sequence[str] = (),
        name: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a function as a tool. ``read_only``, ``destructive`` and ``idempotent`` are the
        promises described on ``ToolAnnotations`` (the audit checks them). ``errors`` lists every
        reason it can fail with (the audit fails a reason it sees but that is not listed), each
        named in the docstring or a parameter's description (``<ENTITY>_NOT_FOUND`` of a ``ref``
        parameter goes without saying); ``examples`` are arguments valid on a fresh seed state
        (dicts, or callables that compute them from the state), used by the conformance kit to
        reach every tool.

        For synthesis: ``asks`` are the ways a user asks for this tool, in their own words, with
        ``{param}`` slots (see ``prove_core.toolkit.phrasing``); ``values`` draw realistic values
        for parameters a user chooses freely (a payee's name, an amount), per call; ``answers`` the
        result fields a reply must state and ``sensitive`` those it never repeats (see
        ``prove_core.toolkit.answers``)."""

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            tool_name = name or fn.__name__
            if tool_name in self.tools:
                raise ValueError(f"server {self.name!r} already has a tool named {tool_name!r}")
            description = inspect.cleandoc(fn.__doc__ or "").strip()
            if not description:
                raise ValueError(f"tool {self.name}.{tool_name} needs a docstring (its description)")
            parameters = schema_from_signature(fn)
            annotations = ToolAnnotations(
                read_only=read_only,
                destructive=destructive,
                idempotent=read_only if idempotent is None else idempotent,
            )
            spec = ToolSpec(
                name=tool_name,
                description=description,
                parameters=parameters,
                annotations=annotations,
                reads=tuple(reads),
                produces=tuple(produces),
                mutates=tuple(mutates),
                errors=tuple(errors),
            )
            self.tools[tool_name] = ToolDef(
                spec=spec, fn=fn, validate=fastjsonschema.compile(parameters), examples=tuple(examples),
                asks=asks if callable(asks) else tuple(asks), values=dict(values or {}),
                answers=tuple(answers), sensitive=self.sensitive | frozenset(sensitive),
            )
            return fn

        return decorate


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` labels from a schema, but never a property that
    happens to be called ``title``."""
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


def schema_from_signature(fn: Callable[..., Any]) -> dict[str, Any]:
    """JSON Schema of a tool's parameters (all but the first, which receives the state).

    Optional parameters keep their Python default out of the schema when it is ``None`` so the
    validator never injects nulls; ``additionalProperties`` is false, so unknown keys are errors.
    """
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())[1:]
    fields: dict[str, Any] = {}
    for p in params:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"tool {fn.__name__}: parameter {p.name} must be a plain named parameter")
        annotation = hints.get(p.name, Any)
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (annotation, default)
    model = pydantic.create_model(f"{fn.__name__}_args", **fields)
    schema: dict[str, Any] = _strip_titles(model.model_json_schema())  # a dict stays a dict
    if "$defs" in schema:
        raise TypeError(f"tool {fn.__name__}: use Literal[...] for enums, not Enum classes or models")
    for prop in schema.get("properties", {}).values():
        if prop.get("default", 0) is None:
            del prop["default"]
        # `X | None = None` becomes anyOf[X, null]; a tool argument is simply omitted instead.
        any_of = prop.get("anyOf")
        if any_of and {"type": "null"} in any_of and len(any_of) == 2:
            (other,) = [s for s in any_of if s != {"type": "null"}]
            del prop["anyOf"]
            prop.update(other)
    schema["additionalProperties"] = False
    schema.setdefault("required", [])
    schema.setdefault("properties", {})
    return schema
