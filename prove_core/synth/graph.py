"""Tool dependency graphs and the chains extracted from them (steps 1–2 of docs/synthesis.md).

A ``ToolGraph`` labels every ordered pair of tools of an environment ``explicit`` (an output of
A is a required input of B), ``implicit`` (A sets up state B needs) or ``none``, with the
evidence for each label. Labellers and chain extractors are plugins (kind ``extractors``);
this module holds the shared value classes and the on-disk cache, keyed by a hash of the tool
schemas so a changed schema invalidates its entry.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import attrs

from prove_core.env.drift import schema_hash as schema_hash  # re-exported: the graph cache key
from prove_core.model import from_json, to_json, write_atomic

Label = Literal["explicit", "implicit", "none"]


@attrs.frozen(kw_only=True)
class Edge:
    source: str
    target: str
    label: Label
    entity: str | None = None  # the entity type that flows from source to target
    param: str | None = None  # for explicit edges: the target parameter that takes the id
    evidence: str = ""
    verified: bool | None = None  # None: not checked live; True/False: the live check's verdict
    flow: str | None = None  # a value flow across servers ("email", "datetime") instead of an entity id


@attrs.frozen(kw_only=True)
class ToolGraph:
    schema_hash: str
    tools: list[str]
    edges: list[Edge]  # only explicit and implicit pairs; every other ordered pair is "none"
    labeller: str = ""

    def label(self, source: str, target: str) -> Label:
        for edge in self.edges:
            if edge.source == source and edge.target == target:
                return edge.label
        return "none"

    def successors(self, source: str) -> list[Edge]:
        return [e for e in self.edges if e.source == source]

    def edge(self, source: str, target: str) -> Edge | None:
        return next((e for e in self.edges if e.source == source and e.target == target), None)


@attrs.frozen(kw_only=True)
class Chain:
    """An ordered tool sequence consistent with the graph; ``edges[i]`` links tools i and i+1."""

    tools: list[str]
    edges: list[Edge]

    @property
    def key(self) -> str:
        return ">".join(self.tools)


class GraphCache:
    """Graphs on disk, one JSON file per (labeller, schema hash)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def path(self, labeller: str, digest: str) -> Path:
        return self.directory / f"{labeller}-{digest}.json"

    def load(self, labeller: str, digest: str) -> ToolGraph | None:
        path = self.path(labeller, digest)
        if not path.is_file():
            return None
        try:
            return from_json(json.loads(path.read_text()), ToolGraph)
        except Exception:  # a corrupt or outdated entry is recomputed, not fatal
            return None

    def store(self, graph: ToolGraph) -> Path:
        path = self.path(graph.labeller, graph.schema_hash)
        return write_atomic(path, json.dumps(to_json(graph), indent=1))  # a reader never sees half a graph


def _collect_strings(value: Any, keep: Any, key: str | None, out: list[str]) -> list[str]:
    if isinstance(value, str):
        if keep(value, key) and value not in out:
            out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _collect_strings(v, keep, k, out)
    elif isinstance(value, list):
        for v in value:
            _collect_strings(v, keep, key, out)
    return out


def flowing_values(runtime: Any, session_id: str, entity: str, param: str, output: Any) -> list[str]:
    """Values in a tool's output that can fill an argument referring to ``entity``: ids of
    records of the entity's table; for an entity without a table (a path, a handle) the strings
    stored under the argument's own name, the entity's name, ``<entity>_id``, ``id`` or ``path``."""
    tables = {t.entity: name for name, t in runtime.server.state_type._table_specs.items()}
    if entity in tables:
        table = getattr(runtime.state(session_id), tables[entity])
        return _collect_strings(output, lambda v, _k: v in table, None, [])
    keys = {param, entity, f"{entity}_id", f"{entity}_path", "id", "path"}
    return _collect_strings(output, lambda _v, k: k in keys, None, [])


# Values that mean the same thing on every server, so they can flow from one server's output
# into another server's input: a contact's e-mail into an invitation, a meeting's start time
# into a room booking. Recognised by the value's shape and the parameter's name.
FLOW_SHAPES = {
    "email": re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", re.I),
    "datetime": re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?(Z|[+-]\d{2}:?\d{2})?$"),
}
RECIPIENT_PARAMS = {"to", "cc", "bcc", "emails", "invitees", "attendees", "participants", "recipients"}
START_PARAMS = {"start", "start_time", "starts_at", "when", "begin", "begins_at"}


def flow_of_param(name: str, prop: dict[str, Any]) -> str | None:
    """The kind of cross-server value a parameter takes, if any."""
    if prop.get("x-prove-entity") or "enum" in prop:
        return None
    items = prop.get("items", {}) if prop.get("type") == "array" else prop
    if "email" in name or name in RECIPIENT_PARAMS or items.get("format") == "email":
        return "email"
    if name in START_PARAMS or items.get("format") == "date-time":
        return "datetime"
    return None


def flow_values(kind: str, output: Any) -> list[str]:
    """Every string in a tool's output with the shape of ``kind``."""
    shape = FLOW_SHAPES[kind]
    return _collect_strings(output, lambda v, _k: bool(shape.match(v)), None, [])


def as_argument(prop: dict[str, Any], value: Any) -> Any:
    """An id as the argument a parameter takes: wrapped in a list for an array of ids."""
    return [value] if prop.get("type") == "array" and not isinstance(value, list) else value


def coverage_report(tools: list[str], chains: list[Chain], graph: ToolGraph) -> dict[str, Any]:
    """Which tools appear in chains, and for each that never does, why."""
    used = {t for c in chains for t in c.tools}
    missing = {}
    for tool in tools:
        if tool in used:
            continue
        outgoing = graph.successors(tool)
        incoming = [e for e in graph.edges if e.target == tool]
        if not outgoing and not incoming:
            missing[tool] = "no dependency edge to or from any other tool"
        elif all(e.verified is False for e in outgoing + incoming):
            missing[tool] = "every edge failed live verification"
        else:
            missing[tool] = "its edges lead to no chain of length >= 2 within the limits"
    return {
        "tools": len(tools),
        "covered": len(used & set(tools)),
        "coverage": round(len(used & set(tools)) / max(1, len(tools)), 4),
        "uncovered": missing,
    }
