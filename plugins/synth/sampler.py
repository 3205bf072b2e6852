"""Bundled sampler ``live``: find entities that exist, through read-only calls on a fresh session.

Every read-only tool with example arguments is called; every record in its output whose id is
a key of one of the server's tables becomes a candidate entity. Support rules then keep only
entities with enough data behind them (``available_balance > 0``, ``status == "active"``).
Generated queries may mention only entities found this way.
"""

from __future__ import annotations

from typing import Any

import attrs

from prove_core import hookimpl
from prove_core.env.runtime import Environment, example_at
from prove_core.synth.sampling import SupportRule
from prove_plugins.synth.graph import entity_tables


@attrs.frozen(kw_only=True)
class SamplingContext:
    """Entities that exist, per ``server:entity``, with the record a read-only call returned."""

    entities: dict[str, list[dict[str, Any]]]

    def candidates(self, server: str, entity: str) -> list[dict[str, Any]]:
        return self.entities.get(f"{server}:{entity}", [])

    def subset(self, rng: Any, size: int) -> SamplingContext:
        """A seeded subset of at most ``size`` records per entity (varies entities across a corpus)."""
        out = {}
        for key, records in self.entities.items():
            out[key] = rng.sample(records, size) if len(records) > size else list(records)
        return SamplingContext(entities=out)


@attrs.frozen(kw_only=True)
class LiveSamplerConfig:
    """How hard the sampler looks."""

    # id expansion rounds: ids found in round k feed the get/list calls of round k+1
    rounds: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    per_tool: int = attrs.field(default=12, validator=attrs.validators.ge(1))  # calls per tool and round at most
    probes: tuple[str, ...] = ("an", "er", "ar", "on", "el", "ma", "a", "e")  # tried in free-text parameters


class LiveSampler:
    """Discovers existing entities with read-only calls on a fresh session."""

    name = "live"
    description = "Discover existing entities with read-only calls on a fresh session."
    Config = LiveSamplerConfig

    def __init__(self, config: LiveSamplerConfig = LiveSamplerConfig()) -> None:
        self.config = config

    def sample(self, env: Environment, rules: list[SupportRule] = ()) -> SamplingContext:
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for rt in env.runtimes.values():
            sid = rt.new_session()
            tables = {name: getattr(rt.state(sid), name) for name in rt.server.state_type._table_specs}
            entity_of_table = {name: entity for entity, name in entity_tables(rt).items()}
            readers = [t for t in rt.server.tools.values() if t.spec.annotations.read_only]
            seen_calls: set[str] = set()
            for _ in range(self.config.rounds):
                for tool in readers:
                    for args in self._arguments(tool, rt, sid, found)[: self.config.per_tool]:
                        key = f"{tool.name}:{sorted(args.items())}"
                        if key in seen_calls:
                            continue
                        seen_calls.add(key)
                        result = rt.call(sid, tool.name, args)
                        if not result.is_error:
                            _collect(result.data, tables, entity_of_table, rt.name, found)
            rt.close(sid)
        entities = {}
        for key, by_id in sorted(found.items()):
            entity = key.split(":", 1)[1]
            kept = [r for r in by_id.values() if all(rule.holds(r) for rule in rules if rule.entity == entity)]
            entities[key] = sorted(kept, key=lambda r: r["id"])
        return SamplingContext(entities=entities)

    def _arguments(self, tool: Any, rt: Any, sid: str, found: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Argument sets to try: the examples, then the first example with each known id of the
        entity a required parameter refers to, and probe strings for free-text parameters."""
        base: list[dict[str, Any]] = []
        for i in range(len(tool.examples)):
            try:
                base.append(example_at(tool, rt, sid, i))
            except Exception:  # noqa: BLE001 - a broken example just finds nothing
                continue
        params = tool.spec.parameters
        if not params.get("required"):
            base.append({})
        out = list(base)
        template = base[0] if base else {}
        for name, entity in tool.spec.entity_params().items():
            for rid in found.get(f"{rt.name}:{entity}", {}):
                out.append({**template, name: rid})
        for name in params.get("required", []):
            prop = params["properties"].get(name, {})
            if prop.get("type") == "string" and "enum" not in prop and "x-prove-entity" not in prop and "pattern" not in prop:
                out.extend({**template, name: probe} for probe in self.config.probes)
        return out


def _collect(value: Any, tables: dict[str, Any], entity_of_table: dict[str, str], server: str,
             found: dict[str, dict[str, dict[str, Any]]]) -> None:
    if isinstance(value, list):
        for item in value:
            _collect(item, tables, entity_of_table, server, found)
        return
    if not isinstance(value, dict):
        return
    rid = value.get("id")
    if isinstance(rid, str):
        for name, table in tables.items():
            if rid in table:
                key = f"{server}:{entity_of_table[name]}"
                found.setdefault(key, {})[rid] = {**found.get(key, {}).get(rid, {}), **value}
                break
    for item in value.values():
        if isinstance(item, dict | list):
            _collect(item, tables, entity_of_table, server, found)


@hookimpl
def prove_register_samplers(register):
    register(LiveSampler)
