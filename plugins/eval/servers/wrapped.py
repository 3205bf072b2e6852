"""PROVE servers around external stateful Python objects (BFCL backends, τ²-bench toolkits).

A benchmark ships its environments as mutable Python objects: a class instance whose methods are
the tools and whose attributes are the state. ``ObjectServer`` turns such an object into a
``Server`` with the same guarantees as ours — sessions, forks, atomic calls, a stable state hash,
typed errors, both call paths — without touching the external code:

- the object lives in the session's ``State`` as an ``Opaque`` value that is **never mutated
  once stored**: a call that may write runs on a deep copy, which replaces the stored one only
  if its fingerprint changed, so snapshots, forks and rollbacks stay O(1) and never see each
  other's writes;
- an ``Opaque`` compares and hashes by a **fingerprint** the wrapper supplies (a canonical dump
  of the object's attributes, or the benchmark's own database hash), so ``state_hash``,
  ``EndState.same_as`` and the ``final_state`` reward work unchanged;
- a tool is a ``ToolDef`` built from the benchmark's own schema, and its body calls the method;
  the benchmark's own failures become typed errors (``ToolError``) whose message is the
  benchmark's text, so an evaluator can show a model exactly what the benchmark would.

A result that is not a JSON object is returned as ``{"_value": value}`` (see ``render_value``).
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import fastjsonschema

from prove_core.toolkit import Server, State, ToolAnnotations
from prove_core.toolkit.server import ToolDef, ToolSpec

BACKEND = "backend"  # the state variable holding the wrapped object
VALUE_KEY = "_value"  # the key of a result that is not a JSON object


class Opaque:
    """An external object in a session's state, immutable by convention, equal by fingerprint."""

    __slots__ = ("_fingerprint", "_fingerprint_of", "obj")

    def __init__(self, obj: Any, fingerprint_of: Callable[[Any], str]) -> None:
        self.obj = obj
        self._fingerprint_of = fingerprint_of
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self._fingerprint_of(self.obj)
        return self._fingerprint

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and (self is other or self.fingerprint == other.fingerprint)

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __str__(self) -> str:  # what State.state_hash dumps (json default=str)
        return f"{type(self.obj).__name__}:{self.fingerprint}"

    __repr__ = __str__


class ObjectState(State):
    """The state of a wrapped server: no tables, one ``Opaque`` variable (the external object)."""

    def backend(self) -> Any:
        """The stored object. Read it, never change it: writes go through a tool call."""
        return self.get_var(BACKEND).obj


def canonical(value: Any, *, skip: frozenset[str] = frozenset(), _path: tuple[int, ...] = ()) -> Any:
    """A JSON-able, deterministic picture of a Python object graph: attributes (private ones
    included: a working directory is state), containers sorted where unordered, a back-reference
    for cycles (a directory's ``parent``), ``random.Random`` by its state, attribute names in
    ``skip`` left out (wall-clock timestamps)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [canonical(v, skip=skip, _path=_path) for v in value]
    if isinstance(value, dict):
        return {str(k): canonical(v, skip=skip, _path=_path) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, set | frozenset):
        items = [canonical(v, skip=skip, _path=_path) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    if isinstance(value, random.Random):
        return hashlib.sha256(repr(value.getstate()).encode()).hexdigest()[:16]
    if id(value) in _path:
        return {"__ref__": type(value).__name__}
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        inner = (*_path, id(value))
        return {"__class__": type(value).__name__,
                **{k: canonical(v, skip=skip, _path=inner) for k, v in sorted(attributes.items()) if k not in skip}}
    return repr(value)


def fingerprint_of_attributes(skip: Iterable[str] = ()) -> Callable[[Any], str]:
    """A fingerprint function: sha256 of ``canonical(obj)``."""
    skipped = frozenset(skip)

    def fingerprint(obj: Any) -> str:
        blob = json.dumps(canonical(obj, skip=skipped), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    return fingerprint


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON (what both call paths return); unknown types become strings."""
    return json.loads(json.dumps(value, default=str))


def as_data(result: Any) -> dict[str, Any]:
    """A tool result as a JSON object: a dict as is, anything else under ``_value``."""
    result = jsonable(result)
    return result if isinstance(result, dict) else {VALUE_KEY: result}


def render_value(data: Mapping[str, Any]) -> Any:
    """The value a wrapped method returned, from its ``as_data`` form."""
    return data[VALUE_KEY] if set(data) == {VALUE_KEY} else dict(data)


@attrs.frozen(kw_only=True)
class WrappedTool:
    """One method of the external object exposed as a tool."""

    name: str
    description: str
    parameters: dict[str, Any]
    call: Callable[..., Any]  # call(obj, **arguments) -> result; raises ToolError on failure
    read_only: bool = False  # only then may the call run on the stored object without a copy
    examples: tuple[Any, ...] = ()  # example arguments for the conformance kit (see ``ToolDef``)


class ObjectServer(Server):
    """A ``Server`` whose session state is the object ``build(seed, options)`` returns, wrapped
    in an ``ObjectState``; its tools are ``WrappedTool``s. ``module`` is the module that holds the
    server as an attribute (the conformance kit rebuilds it there in a fresh process).
    ``validate=False`` leaves argument checking to the external code, so a model sees the
    benchmark's own messages (τ²'s evaluator replays a transcript and compares every result):
    the runtime then hands the arguments over as sent (``ToolDef.raw_arguments``: a whole float
    stays a float, a NaN or a lone surrogate reaches the benchmark's code, as in the benchmark)."""

    def __init__(self, *, name: str, domain: str, description: str, build: Callable[[int, Any], Any],
                 tools: Iterable[WrappedTool], fingerprint: Callable[[Any], str], module: str,
                 copy_object: Callable[[Any], Any] = copy.deepcopy, options: type | None = None,
                 validate: bool = True, benchmark: bool = False) -> None:
        state_type = type(f"{name.title().replace('_', '')}State", (ObjectState,), {"__module__": module})

        def seed(rng: random.Random, opts: Any) -> State:  # build_state is overridden: never called
            raise NotImplementedError

        seed.__module__ = module  # the conformance kit finds the server through its seed's module
        super().__init__(name, domain=domain, description=description, state=state_type, seed=seed,
                         **({"options": options} if options is not None else {}))
        self.build = build
        self.fingerprint = fingerprint
        self.benchmark = benchmark
        for tool in tools:
            self.tools[tool.name] = ToolDef(
                spec=ToolSpec(name=tool.name, description=tool.description, parameters=tool.parameters,
                              annotations=ToolAnnotations(read_only=tool.read_only, idempotent=tool.read_only)),
                fn=_body(tool, fingerprint, copy_object),
                validate=fastjsonschema.compile(tool.parameters) if validate else _any_object,
                raw_arguments=not validate,
                examples=tuple(tool.examples),
            )

    def build_state(self, seed: int, options: Any = None) -> State:
        state = self.state_type(salt=self.name)
        obj = self.build(seed, options if options is not None else self.options_type())
        state.set_var(BACKEND, Opaque(obj, self.fingerprint))
        return state


def _any_object(arguments: dict[str, Any]) -> dict[str, Any]:
    return arguments


def _body(tool: WrappedTool, fingerprint: Callable[[Any], str], copy_object: Callable[[Any], Any]) -> Callable[..., Any]:
    def run(state: ObjectState, /, **arguments: Any) -> dict[str, Any]:  # a tool may take a `state` argument
        stored: Opaque = state.get_var(BACKEND)
        if tool.read_only:
            return as_data(tool.call(stored.obj, **arguments))
        working = copy_object(stored.obj)
        result = tool.call(working, **arguments)
        state.set_var(BACKEND, Opaque(working, fingerprint))  # unchanged when the fingerprint is equal
        return as_data(result)

    run.__name__ = tool.name
    return run
