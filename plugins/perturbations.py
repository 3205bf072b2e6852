"""The bundled perturbations (DESIGN §1.2 robustness knobs), at the paper's rates.

- ``distractors`` (40%): 3–8 tools of other registered servers join the offered tools, at
  random places in the list;
- ``enum_stripping`` (30%): ``enum`` lists are removed from every offered tool's parameters;
- ``irrelevance`` (5%): the offered tools are replaced by tools of other servers, none of which
  can answer; the expected behaviour becomes ``abstain`` (no call);
- ``hidden_tool`` (10%; the paper gives no rate): a tool the ground truth needs is removed from
  the offered tools; the expected behaviour becomes ``clarify`` when the hidden tool is a
  read-only lookup (the user can supply what it would have found) and ``abstain`` otherwise.

The last two drop the example's assistant turns (what is left is the prompt) and its
ground-truth calls. Each records what it changed in ``task.meta["perturbations"]``.
"""

from __future__ import annotations

import random
from typing import Any, Literal

import attrs

from prove_core import hookimpl
from prove_core.model import Example
from prove_core.perturbation import PerturbationContext, prompt_only, record, tool_name


def _between(low: str, high: str) -> Any:
    def check(instance: Any, _attribute: Any, _value: Any) -> None:
        if getattr(instance, low) > getattr(instance, high):
            raise ValueError(f"{low} must not be above {high}")

    return check


def _foreign(example: Example, context: PerturbationContext, *, keep_offered: bool = True) -> list[tuple[str, Any, str]]:
    """(server, spec, public name) of other servers' tools, one per name; a name that clashes with
    a tool staying on offer is left out (two tools may not share a name)."""
    taken = {tool_name(t) for t in example.tools} if keep_offered else set()
    servers = example.task.servers
    out = []
    for server, spec in context.foreign_tools(servers):
        public = context.public_name(servers, server, spec.name)
        if public not in taken:
            taken.add(public)
            out.append((server, spec, public))
    return out


def _as_offered(spec: Any, public: str) -> dict[str, Any]:
    tool = spec.to_openai()
    tool["function"] = {**tool["function"], "name": public}
    return tool


@attrs.frozen(kw_only=True)
class DistractorsConfig:
    min_tools: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    max_tools: int = attrs.field(default=8, validator=[attrs.validators.ge(1), _between("min_tools", "max_tools")])


class Distractors:
    """Adds 3–8 tools of other registered servers to the offered tools."""

    name = "distractors"
    Config = DistractorsConfig
    default_rate = 0.4

    def __init__(self, config: DistractorsConfig) -> None:
        self.config = config

    def apply(self, example: Example, rng: random.Random, context: PerturbationContext) -> Example | None:
        pool = _foreign(example, context)
        if not pool:
            return None
        count = min(rng.randint(self.config.min_tools, self.config.max_tools), len(pool))
        chosen = rng.sample(pool, count)
        tools = list(example.tools)
        for _server, spec, public in chosen:
            tools.insert(rng.randint(0, len(tools)), _as_offered(spec, public))
        changed = attrs.evolve(example, tools=tools)
        return record(changed, {"name": self.name, "added": [f"{server}.{spec.name}" for server, spec, _ in chosen],
                                "tools": [public for _, _, public in chosen]})


@attrs.frozen(kw_only=True)
class EnumStrippingConfig:
    pass


def _strip_enums(schema: Any, path: str, stripped: list[str]) -> Any:
    if isinstance(schema, list):
        return [_strip_enums(item, path, stripped) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "enum":
            stripped.append(path)
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _strip_enums(sub, f"{path}.{name}", stripped) for name, sub in value.items()}
        else:
            out[key] = _strip_enums(value, path, stripped)
    return out


class EnumStripping:
    """Removes the ``enum`` lists from every offered tool's parameter schema."""

    name = "enum_stripping"
    Config = EnumStrippingConfig
    default_rate = 0.3

    def __init__(self, config: EnumStrippingConfig) -> None:
        self.config = config

    def apply(self, example: Example, rng: random.Random, context: PerturbationContext) -> Example | None:
        stripped: list[str] = []
        tools = []
        for tool in example.tools:
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("parameters"), dict):
                params = _strip_enums(fn["parameters"], fn.get("name", "?"), stripped)
                tool = {**tool, "function": {**fn, "parameters": params}}
            tools.append(tool)
        if not stripped:
            return None
        return record(attrs.evolve(example, tools=tools), {"name": self.name, "fields": sorted(set(stripped))})


@attrs.frozen(kw_only=True)
class IrrelevanceConfig:
    min_tools: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    max_tools: int = attrs.field(default=8, validator=[attrs.validators.ge(0), _between("min_tools", "max_tools")])


class Irrelevance:
    """Offers only tools of other servers, none of which can answer: expected behaviour abstain."""

    name = "irrelevance"
    Config = IrrelevanceConfig
    default_rate = 0.05

    def __init__(self, config: IrrelevanceConfig) -> None:
        self.config = config

    def apply(self, example: Example, rng: random.Random, context: PerturbationContext) -> Example | None:
        if example.task.expected != "call":
            return None
        pool = _foreign(example, context, keep_offered=False)  # the offered tools all go
        count = min(rng.randint(self.config.min_tools, self.config.max_tools), len(pool))
        chosen = rng.sample(pool, count)
        task = attrs.evolve(example.task, calls=[], expected="abstain")
        changed = attrs.evolve(example, tools=[_as_offered(spec, public) for _, spec, public in chosen],
                               messages=prompt_only(example), task=task)
        return record(changed, {"name": self.name, "removed_tools": [tool_name(t) for t in example.tools],
                                "offered": [f"{s}.{spec.name}" for s, spec, _ in chosen],
                                "dropped_calls": [c.id for c in example.task.calls], "expected": "abstain"})


@attrs.frozen(kw_only=True)
class HiddenToolConfig:
    expect: Literal["auto", "clarify", "abstain"] = "auto"


class HiddenTool:
    """Removes a tool the ground truth needs: expected behaviour clarify (a lookup) or abstain."""

    name = "hidden_tool"
    Config = HiddenToolConfig
    default_rate = 0.1

    def __init__(self, config: HiddenToolConfig) -> None:
        self.config = config

    def apply(self, example: Example, rng: random.Random, context: PerturbationContext) -> Example | None:
        task = example.task
        offered = {tool_name(t) for t in example.tools}
        needed = sorted({c.tool for c in task.calls} & offered)
        if task.expected != "call" or not needed:
            return None
        hidden = rng.choice(needed)
        expected = self.config.expect
        if expected == "auto":
            spec = context.spec(task.servers, hidden)
            expected = "clarify" if spec is not None and spec.annotations.read_only else "abstain"
        changed = attrs.evolve(
            example,
            tools=[t for t in example.tools if tool_name(t) != hidden],
            messages=prompt_only(example),
            task=attrs.evolve(task, calls=[], expected=expected),
        )
        return record(changed, {"name": self.name, "tool": hidden, "expected": expected,
                                "dropped_calls": [c.id for c in task.calls]})


PERTURBATIONS = (Irrelevance, HiddenTool, Distractors, EnumStripping)


@hookimpl
def prove_register_perturbations(register: Any) -> None:
    for perturbation in PERTURBATIONS:
        register(perturbation)
