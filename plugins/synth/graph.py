"""Bundled extractors: the schema labeller (with live verification) and the chain extractor.

``schema`` labels tool pairs from metadata alone, then checks every candidate edge on a live
session: run A, take an id of the flowing entity from A's real output, call B with it, and keep
the edge only if B accepts the call (a business-rule refusal still proves the id was usable; a
schema error or NOT_FOUND does not). ``chains`` enumerates tool sequences of length 2–5 along
the kept edges.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import structlog

from prove_core import hookimpl
from prove_core.env.runtime import Environment, ServerRuntime, example_at
from prove_core.synth.graph import Chain, Edge, ToolGraph, as_argument, flow_of_param, flow_values, flowing_values, schema_hash
from prove_core.toolkit.server import ToolDef

log = structlog.get_logger()

# A call with one of these codes did not accept its inputs; anything else did.
REJECTED = {"INVALID_ARGUMENT", "UNKNOWN_TOOL", "NOT_FOUND"}


def entity_tables(runtime: ServerRuntime) -> dict[str, str]:
    """Entity type -> table name of a server's state."""
    return {table.entity: name for name, table in runtime.server.state_type._table_specs.items()}


def _outputs(tool: ToolDef) -> set[str]:
    spec = tool.spec
    return set(spec.reads) | set(spec.produces) | set(spec.mutates)


def _required_refs(tool: ToolDef) -> dict[str, str]:
    required = set(tool.spec.parameters.get("required", []))
    return {p: e for p, e in tool.spec.entity_params().items() if p in required}


@attrs.frozen(kw_only=True)
class SchemaLabellerConfig:
    """The labeller's options: ``verify`` (``[synth] verify_edges``) checks every candidate edge
    on a live session and drops those that fail."""

    verify: bool = True


class SchemaLabeller:
    """Labels pairs from entity metadata (``reads``/``produces``/``mutates`` and ``ref`` params)."""

    name = "schema"
    description = "Label tool pairs from entity metadata, then verify each edge on a live session."
    Config = SchemaLabellerConfig

    def __init__(self, config: SchemaLabellerConfig = SchemaLabellerConfig()) -> None:
        self.config = config

    def label(self, env: Environment) -> ToolGraph:
        edges: list[Edge] = []
        for rt in env.runtimes.values():
            for a_name, a in rt.server.tools.items():
                for b_name, b in rt.server.tools.items():
                    if a_name == b_name:
                        continue
                    edge = self._candidate(env, rt, a, b)
                    if edge is None:
                        continue
                    if self.config.verify:
                        edge = attrs.evolve(edge, verified=self._verify(rt, a, b, edge))
                    edges.append(attrs.evolve(edge, source=env.public_name(rt.name, a_name),
                                              target=env.public_name(rt.name, b_name)))
        if len(env.runtimes) > 1:
            edges += self._cross_server(env)
        kept = [e for e in edges if e.verified is not False]
        log.info("graph labelled", tools=len(env.specs()), candidates=len(edges), kept=len(kept))
        return ToolGraph(schema_hash=schema_hash(env.specs()), tools=[s.name for s in env.specs()],
                         edges=edges, labeller=self.name)

    def _cross_server(self, env: Environment) -> list[Edge]:
        """Value flows between mounted servers: A (one server) returns an e-mail address or a
        start time, B (another server) requires one. Only edges whose value B accepts on a live
        session are kept — across servers the metadata alone proves nothing."""
        outputs: dict[str, Any] = {}
        for rt in env.runtimes.values():
            for tool in rt.server.tools.values():
                if tool.spec.annotations.read_only and tool.examples:
                    sid = rt.new_session()
                    try:
                        result = rt.call(sid, tool.name, example_at(tool, rt, sid, 0))
                    except Exception:  # noqa: BLE001 - a broken example offers nothing
                        continue
                    finally:
                        rt.close(sid)
                    if not result.is_error:
                        outputs[env.public_name(rt.name, tool.name)] = (rt.name, result.data)
        edges = []
        for rt in env.runtimes.values():
            for b in rt.server.tools.values():
                if not b.examples:
                    continue
                props = b.spec.parameters.get("properties", {})
                for param in b.spec.parameters.get("required", []):
                    kind = flow_of_param(param, props[param])
                    if kind is None:
                        continue
                    for source, (server, data) in outputs.items():
                        if server == rt.name:
                            continue
                        values = flow_values(kind, data)
                        if values and self._accepts(rt, b, param, props[param], values[0]):
                            edges.append(Edge(source=source, target=env.public_name(rt.name, b.name), label="explicit",
                                              param=param, flow=kind, verified=True,
                                              evidence=f"{source} returns {kind} values; {b.name} takes one as {param!r}"))
        return edges

    @staticmethod
    def _accepts(rt: ServerRuntime, tool: ToolDef, param: str, prop: dict[str, Any], value: str) -> bool:
        sid = rt.new_session()
        try:
            try:
                args = {**example_at(tool, rt, sid, 0), param: as_argument(prop, value)}
            except Exception:  # noqa: BLE001
                return False
            result = rt.call(sid, tool.name, args)
            return not (result.is_error and result.code in REJECTED)
        finally:
            rt.close(sid)

    def _candidate(self, env: Environment, rt: ServerRuntime, a: ToolDef, b: ToolDef) -> Edge | None:
        flows = _outputs(a)
        for param, entity in _required_refs(b).items():
            if entity in flows:
                return Edge(source=a.name, target=b.name, label="explicit", entity=entity, param=param,
                            evidence=f"{a.name} returns {entity} ids; {b.name} requires one as {param!r}")
        if not a.spec.annotations.read_only:
            set_up = (set(a.spec.produces) | set(a.spec.mutates)) & (set(b.spec.reads) | set(b.spec.mutates))
            if set_up:
                entity = sorted(set_up)[0]
                return Edge(source=a.name, target=b.name, label="implicit", entity=entity,
                            evidence=f"{a.name} changes {entity} state that {b.name} reads")
        return None

    def _verify(self, rt: ServerRuntime, a: ToolDef, b: ToolDef, edge: Edge) -> bool | None:
        if not a.examples or not b.examples:
            return None  # nothing to run: keep the metadata's word, marked unverified
        sid = rt.new_session()
        try:
            try:  # B's example is computed on the fresh state, before A changes it
                args = example_at(b, rt, sid, 0)
                a_args = example_at(a, rt, sid, 0)
            except Exception:  # noqa: BLE001 - an example that cannot be built cannot verify
                return None
            out = rt.call(sid, a.name, a_args)
            if out.is_error:
                return False
            if edge.label == "explicit":
                ids = flowing_values(rt, sid, edge.entity, edge.param, out.data)
                if not ids:
                    return False
                prop = b.spec.parameters["properties"][edge.param]
                args = {**args, edge.param: as_argument(prop, ids[0])}
            result = rt.call(sid, b.name, args)
            return not (result.is_error and result.code in REJECTED)
        finally:
            rt.close(sid)


@attrs.frozen(kw_only=True)
class ChainExtractorConfig:
    """The extractor's options: chain lengths (``[synth] min_chain_length``/``max_chain_length``)
    and the enumeration budget."""

    min_length: int = attrs.field(default=2, validator=attrs.validators.ge(1))
    max_length: int = attrs.field(default=5, validator=attrs.validators.ge(1))
    limit: int = attrs.field(default=50_000, validator=attrs.validators.gt(0))  # then ``sample`` picks deterministically


class ChainExtractor:
    """Simple paths of length ``min_length``..``max_length`` along kept edges."""

    name = "chains"
    description = "Enumerate tool chains of length 2-5 along the dependency graph."
    Config = ChainExtractorConfig

    def __init__(self, config: ChainExtractorConfig = ChainExtractorConfig()) -> None:
        self.config = config

    def extract(self, graph: ToolGraph, *, sample: int | None = None, seed: int = 0) -> list[Chain]:
        succ: dict[str, list[Edge]] = {}
        for edge in graph.edges:
            if edge.verified is not False and edge.label != "none":
                succ.setdefault(edge.source, []).append(edge)
        chains: list[Chain] = []
        # the enumeration budget is shared fairly by start tools, so none is starved
        min_length, max_length = self.config.min_length, self.config.max_length
        per_start = max(1, self.config.limit // max(1, len(graph.tools)))
        budget = [0]

        def walk(path: list[str], used: list[Edge]) -> None:
            if budget[0] >= per_start:
                return
            if len(path) >= min_length:
                chains.append(Chain(tools=list(path), edges=list(used)))
                budget[0] += 1
            if len(path) == max_length:
                return
            for edge in succ.get(path[-1], []):
                if edge.target not in path:
                    walk([*path, edge.target], [*used, edge])

        for tool in graph.tools:
            budget[0] = 0
            walk([tool], [])
        if sample is not None and sample < len(chains):
            chains = stratified_sample(chains, sample, seed)
        return chains


def stratified_sample(chains: list[Chain], n: int, seed: int) -> list[Chain]:
    """``n`` chains with every tool represented, then an equal share of each length."""
    rng = random.Random(seed)
    pool = list(chains)
    rng.shuffle(pool)
    picked: dict[str, Chain] = {}
    for tool in sorted({t for c in pool for t in c.tools}):  # coverage first
        chain = next((c for c in pool if tool in c.tools and c.key not in picked), None)
        if chain is not None and len(picked) < n:
            picked[chain.key] = chain
    by_length: dict[int, list[Chain]] = {}
    for chain in pool:
        by_length.setdefault(len(chain.tools), []).append(chain)
    while len(picked) < n and any(by_length.values()):
        for length in sorted(by_length):
            bucket = by_length[length]
            while bucket and bucket[-1].key in picked:
                bucket.pop()
            if bucket and len(picked) < n:
                chain = bucket.pop()
                picked[chain.key] = chain
    return sorted(picked.values(), key=lambda c: c.key)


@hookimpl
def prove_register_extractors(register):
    register(SchemaLabeller)
    register(ChainExtractor)
