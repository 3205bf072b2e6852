"""Perturbations of training examples (robustness knobs; docs/synthesis.md#perturbations): the contract and the driver.

A perturbation (component kind ``perturbations``) rewrites an ``Example`` — its offered tools,
its messages, its task — and records what it changed in ``task.meta["perturbations"]``::

    class MyPerturbation:
        name = "my_perturbation"
        Config = MyConfig                 # its options (attrs), with defaults
        default_rate = 0.1                # share of examples it is applied to
        def __init__(self, config): ...
        def apply(self, example, rng, context) -> Example | None: ...   # None: not applicable

What a perturbation may change, and what it must keep (``Perturber`` checks every change and
refuses one that breaks these with ``PerturbationError``, naming the perturbation and the example):

- it may change how the offered tools read (add tools, remove a tool, reorder them, strip or
  reword schema details), the messages, and the expected behaviour with its ground truth;
- it must keep the example's ``id`` and its world: ``task.servers``, ``task.seed`` and
  ``task.initial_state_hash`` (a reward replays the task on that world);
- calls may be removed, never added or changed: every call of the changed example — the
  assistant's calls in ``messages`` (not the ones marked ``mistake``) and the ground truth's
  ``task.calls`` — is one the example made before (same tool, same arguments), since the live
  servers replay them;
- every such call that the tools offered before accepted still names an offered tool whose
  parameters accept its arguments (renaming a parameter in the offered schema breaks this: the
  corpus would teach calls its own tools reject);
- a behaviour other than ``call`` keeps no ground-truth calls.

``Perturber`` applies the configured perturbations in order, each to a share ``rate`` of the
examples. The draw and everything a perturbation picks come from a ``random.Random`` seeded
with ``(seed, example id, perturbation name)``, so the same example always gets the same
perturbations whatever else is in the corpus and in whichever order it is processed.

The configuration lives in one place, ``[synth]``'s ``perturbations``: a list of entries
(``[[synth.perturbations]]``: ``name``, ``rate``, ``options``) that replaces the default four, or
the table form ``{ seed = ..., perturbations = [...] }`` (a ``PerturbationsConfig``). Synthesis
calls ``build_perturber(config, registry, path=...)`` once, then ``perturber(example)`` per example.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from prove_core.env.runtime import public_name
from prove_core.errors import ProveError
from prove_core.model import Example
from prove_core.toolkit.server import ToolSpec

if TYPE_CHECKING:
    from prove_core.plugin.registry import Registry

# Applied in this order: the two that change the expected behaviour first (an example gets at
# most one of them: each applies only to examples that still expect calls), then the two that
# change how the tools read.
DEFAULT_PERTURBATIONS = ("irrelevance", "hidden_tool", "distractors", "enum_stripping")


@attrs.frozen(kw_only=True)
class PerturbationEntry:
    """One perturbation to apply: its registered name, its rate (``None``: its default rate) and
    its own options (structured with its ``Config`` class)."""

    name: str
    rate: float | None = attrs.field(default=None, validator=attrs.validators.optional(
        [attrs.validators.ge(0.0), attrs.validators.le(1.0)]))
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class PerturbationsConfig:
    """Which perturbations run (``None``: the paper's four at their paper rates) and the seed."""

    seed: int = 0
    perturbations: list[PerturbationEntry] | None = None


class Perturbation(Protocol):
    name: str
    default_rate: float

    def apply(self, example: Example, rng: random.Random, context: PerturbationContext) -> Example | None: ...


class PerturbationContext:
    """What a perturbation may ask: the registered servers and their tools, and the teacher that
    writes the assistant's reply when a perturbation changes what the assistant should say."""

    def __init__(self, registry: Registry, teacher: Any = None) -> None:
        self.registry = registry
        self._teacher = teacher

    @property
    def teacher(self) -> Any:
        if self._teacher is None:  # the bundled default writer
            self._teacher = self.registry.build("teachers", "programmatic")
        return self._teacher

    def server_names(self) -> list[str]:
        return self.registry.names("servers")

    def tools(self, server: str) -> list[ToolSpec]:
        specs: list[ToolSpec] = self.registry.load("servers", server).specs()  # a Server's specs()
        return specs

    @staticmethod
    def public_name(servers: list[str], server: str, tool: str) -> str:
        """The name a tool has in an environment of ``servers`` (prefixed when several)."""
        return public_name(server, tool, prefixed=len(servers) > 1)

    def spec(self, servers: list[str], public_name: str) -> ToolSpec | None:
        """The spec of a tool of ``servers`` by the name the task uses."""
        for server in servers:
            for spec in self.tools(server):
                if self.public_name(servers, server, spec.name) == public_name:
                    return spec
        return None

    def foreign_tools(self, servers: list[str]) -> list[tuple[str, ToolSpec]]:
        """(server, spec) of every tool of the registered servers outside ``servers``, sorted;
        benchmark environments (``Server.benchmark``) are left out, so installing an evaluation
        package neither changes a corpus nor shows a model a benchmark's tools in training."""
        return [(name, spec) for name in sorted(self.server_names()) if name not in servers
                and not getattr(self.registry.load("servers", name), "benchmark", False)
                for spec in sorted(self.tools(name), key=lambda s: s.name)]


def record(example: Example, change: dict[str, Any]) -> Example:
    """``example`` with ``change`` appended to ``task.meta["perturbations"]`` (nothing mutated)."""
    meta = dict(example.task.meta)
    meta["perturbations"] = [*meta.get("perturbations", []), change]
    return attrs.evolve(example, task=attrs.evolve(example.task, meta=meta))


def tool_name(tool: dict[str, Any]) -> str:
    fn = tool.get("function", tool)
    return fn.get("name", "") if isinstance(fn, dict) else ""


def prompt_only(example: Example) -> list[Any]:
    """The messages before the first assistant turn: what is left when no call is expected."""
    for i, message in enumerate(example.messages):
        if message.role == "assistant":
            return list(example.messages[:i])
    return list(example.messages)


class PerturbationError(ProveError):
    """A perturbation changed an example in a way it must not (see the module docstring)."""


def _offered(example: Example) -> dict[str, dict[str, Any]]:
    """The offered tools' parameter schemas by name."""
    out = {}
    for tool in example.tools:
        fn = tool.get("function", tool)
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out[fn["name"]] = fn.get("parameters") or {"type": "object"}
    return out


def _accepted(name: str, arguments: Any, offered: dict[str, dict[str, Any]]) -> bool:
    import jsonschema

    schema = offered.get(name)
    if schema is None:
        return False
    try:
        return not any(True for _ in jsonschema.Draft202012Validator(schema).iter_errors(arguments))
    except jsonschema.SchemaError:
        return False


def _calls(example: Example) -> list[tuple[str, str, Any]]:
    """(where, tool, arguments) of the example's calls: the assistant's (not marked mistakes)
    and the ground truth's."""
    found = [(f"messages[{i}].tool_calls[{j}] ({call.name})", call.name, call.arguments)
             for i, m in enumerate(example.messages) if m.role == "assistant" and not m.mistake
             for j, call in enumerate(m.tool_calls)]
    return found + [(f"task.calls[{i}] ({call.tool})", call.tool, call.arguments) for i, call in enumerate(example.task.calls)]


def _key(tool: str, arguments: Any) -> str:
    import json

    return f"{tool}:{json.dumps(arguments, sort_keys=True, default=str)}"


def broken_invariants(before: Example, after: Example) -> list[str]:
    """What ``after`` (a perturbed ``before``) breaks of the invariants every perturbation keeps."""
    problems = [f"changed {field}" for field, a, b in (
        ("id", before.id, after.id), ("task.servers", before.task.servers, after.task.servers),
        ("task.seed", before.task.seed, after.task.seed),
        ("task.initial_state_hash", before.task.initial_state_hash, after.task.initial_state_hash)) if a != b]
    was, now = _offered(before), _offered(after)
    made = {_key(tool, args) for _, tool, args in _calls(before)}
    rejected_before = {_key(tool, args) for _, tool, args in _calls(before) if not _accepted(tool, args, was)}
    for where, tool, args in _calls(after):
        key = _key(tool, args)
        if key not in made:
            problems.append(f"{where}: a call the example did not make (a perturbation may remove calls, "
                            "not add or change them; the live servers replay them)")
        elif key not in rejected_before and not _accepted(tool, args, now):
            problems.append(f"{where}: the offered tools no longer accept this call" if tool in now
                            else f"{where}: calls a tool that is no longer offered")
    if after.task.expected != "call" and after.task.calls:
        problems.append(f"expects {after.task.expected!r} but keeps {len(after.task.calls)} ground-truth calls")
    return problems


class Perturber:
    """Applies perturbations to examples, each to a share ``rate`` of them, deterministically;
    refuses (``PerturbationError``) a change that breaks the invariants every perturbation keeps."""

    def __init__(self, entries: list[tuple[str, float, Any]], context: PerturbationContext, *, seed: int = 0) -> None:
        self.entries = entries
        self.context = context
        self.seed = seed

    def rng(self, example: Example, name: str) -> random.Random:
        return random.Random(f"{self.seed}:{example.id}:{name}")

    def __call__(self, example: Example) -> Example:
        for name, rate, perturbation in self.entries:
            rng = self.rng(example, name)
            if rng.random() >= rate:
                continue
            changed = perturbation.apply(example, rng, self.context)
            if changed is not None:
                broken = broken_invariants(example, changed)
                if broken:
                    raise PerturbationError(f"perturbation {name!r} broke example {example.id!r}: {'; '.join(broken[:3])} "
                                            "(what a perturbation must keep: docs/synthesis.md#perturbations)")
                example = changed
        return example


def build_perturber(config: PerturbationsConfig | Mapping[str, Any] | list[Any] | None, registry: Registry, *,
                    path: str = "$.perturbations", teacher: Any = None) -> Perturber:
    """Phase 2: build each perturbation through the registry's loader, its options structured
    with its ``Config``. ``config`` is a list of entries (``[[synth.perturbations]]``; errors name
    ``$.synth.perturbations[1].options``), a ``{seed, perturbations}`` table (errors name
    ``$.synth.perturbations.perturbations[1].options``) or a ``PerturbationsConfig``; ``None`` or
    ``{}``: the paper's four at their default rates."""
    from prove_core.config import config_problems, raise_problems, structure
    from prove_core.errors import ConfigError

    settings: PerturbationsConfig
    where = f"{path}.perturbations"
    problems_first: list[str] = []
    if config is None:
        settings = PerturbationsConfig()
    elif isinstance(config, list):
        if not config:
            raise_problems([f"{path}: an empty list runs no perturbation; set [synth] perturb = false for that, "
                            "or leave perturbations out for the default four"])
        shaped: list[PerturbationEntry] = []
        malformed: list[str] = []
        for i, item in enumerate(config):
            try:
                shaped.append(structure(item, PerturbationEntry, path=f"{path}[{i}]"))
            except ConfigError as exc:
                malformed += config_problems(exc)
                shaped.append(PerturbationEntry(name=str(item.get("name", "")) if isinstance(item, Mapping) else ""))
        settings, where = PerturbationsConfig(perturbations=shaped), path
        if malformed:  # names are still checked below, so every problem is listed at once
            problems_first = malformed
    elif isinstance(config, Mapping):
        settings = structure(dict(config), PerturbationsConfig, path=path)
    else:
        settings = config
    entries = settings.perturbations
    if entries is None:
        entries = [PerturbationEntry(name=n) for n in DEFAULT_PERTURBATIONS]
    built: list[tuple[str, float, Any]] = []
    problems: list[str] = list(problems_first)
    for i, entry in enumerate(entries):
        perturbation = registry.build_entry("perturbations", entry.name, entry.options,
                                            where=f"{where}[{i}]", problems=problems)
        if perturbation is None:
            continue
        rate = entry.rate if entry.rate is not None else float(getattr(perturbation, "default_rate", 0.0))
        built.append((entry.name, rate, perturbation))
    raise_problems(problems)
    return Perturber(built, PerturbationContext(registry, teacher), seed=settings.seed)
