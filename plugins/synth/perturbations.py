"""The bundled perturbations (robustness knobs; docs/reward.md#perturbations), at the paper's rates.

- ``distractors`` (40%): 3–8 tools of other registered servers join the offered tools, at
  random places in the list;
- ``enum_stripping`` (30%): ``enum`` lists are removed from every offered tool's parameters;
- ``irrelevance`` (5%): the offered tools are replaced by tools of other servers, none of which
  can answer; the expected behaviour becomes ``abstain`` (no call) and the assistant declines;
- ``hidden_tool`` (5%; the paper gives no rate): the tool the *first request* starts with is
  removed from the offered tools, so that request cannot be done as asked. The expected behaviour
  is ``clarify`` when the hidden tool is a read-only lookup whose result a later call of the
  request needs (the assistant asks the user for what it would have found) and ``abstain``
  otherwise (the assistant declines, naming what it cannot do).

The last two keep the prompt (system and first user turn), drop the ground-truth calls and end
with the assistant's written reply. Each records what it changed in ``task.meta["perturbations"]``.
"""

from __future__ import annotations

import random
from typing import Any, Literal

import attrs

from prove_core import hookimpl
from prove_core.model import Example, Message
from prove_core.synth.perturbation import PerturbationContext, prompt_only, record, tool_name


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
        reply = Message(role="assistant", content=context.teacher.decline(sorted({s for s, _, _ in chosen}), rng))
        changed = attrs.evolve(example, tools=[_as_offered(spec, public) for _, spec, public in chosen],
                               messages=[*prompt_only(example), reply], task=task)
        return record(changed, {"name": self.name, "removed_tools": [tool_name(t) for t in example.tools],
                                "offered": [f"{s}.{spec.name}" for s, spec, _ in chosen],
                                "dropped_calls": [c.id for c in example.task.calls], "expected": "abstain"})


@attrs.frozen(kw_only=True)
class HiddenToolConfig:
    expect: Literal["auto", "clarify", "abstain"] = "auto"


class HiddenTool:
    """Removes the tool the first request starts with: the assistant asks for what that lookup
    would have found (clarify) or declines, naming what it cannot do (abstain)."""

    name = "hidden_tool"
    Config = HiddenToolConfig
    default_rate = 0.05

    def __init__(self, config: HiddenToolConfig) -> None:
        self.config = config

    def apply(self, example: Example, rng: random.Random, context: PerturbationContext) -> Example | None:
        task = example.task
        offered = {tool_name(t) for t in example.tools}
        first = first_request_calls(example)
        if task.expected != "call" or not first or first[0].tool not in offered:
            return None
        hidden = first[0]  # every other call of the request depends on what comes before it
        spec = context.spec(task.servers, hidden.tool)
        needs = _needed_entity(first, hidden, task.servers, context, example)
        expected = self.config.expect
        if expected == "auto":
            expected = "clarify" if spec is not None and spec.annotations.read_only and needs else "abstain"
        local = hidden.tool
        for server in task.servers:
            prefix = context.public_name(task.servers, server, "")  # "<server>_" when prefixed, else ""
            if prefix and local.startswith(prefix):
                local = local[len(prefix):]
        capability = local.replace("_", " ")
        teacher = context.teacher
        text = teacher.ask_instead(capability, needs or "item", rng) if expected == "clarify" else \
            teacher.unavailable(capability, rng)
        changed = attrs.evolve(
            example,
            tools=[t for t in example.tools if tool_name(t) != hidden.tool],
            messages=[*prompt_only(example), Message(role="assistant", content=text)],
            task=attrs.evolve(task, calls=[], expected=expected),
        )
        return record(changed, {"name": self.name, "tool": hidden.tool, "expected": expected, "needs": needs,
                                "request_calls": [c.id for c in first],
                                "dropped_calls": [c.id for c in task.calls]})


def first_request_calls(example: Example) -> list[Any]:
    """The ground-truth calls the first user request asks for (``meta["turns"][0]``; without
    it, the calls made before the second user turn)."""
    turns = example.task.meta.get("turns")
    by_id = {c.id: c for c in example.task.calls}
    if turns:
        return [by_id[i] for i in turns[0] if i in by_id]
    names: list[str] = []
    users = 0
    for message in example.messages:
        users += message.role == "user"
        if users > 1:
            break
        names += [c.name for c in message.tool_calls]
    return [c for c in example.task.calls if c.tool in names][: len(names)]


def _needed_entity(first: list[Any], hidden: Any, servers: list[str], context: PerturbationContext,
                   example: Example) -> str | None:
    """The entity a later call of the request takes from the hidden call's result (what the
    user would have to supply), or None when nothing depends on it."""
    said = " ".join(m.content or "" for m in example.messages if m.role == "user")
    for call in first[1:]:
        if hidden.id not in call.depends_on:
            continue
        spec = context.spec(servers, call.tool)
        for param, entity in (spec.entity_params().items() if spec is not None else ()):
            value = call.arguments.get(param)
            if isinstance(value, str) and value not in said:
                return entity
    return None


PERTURBATIONS = (Irrelevance, HiddenTool, Distractors, EnumStripping)


@hookimpl
def prove_register_perturbations(register: Any) -> None:
    for perturbation in PERTURBATIONS:
        register(perturbation)
