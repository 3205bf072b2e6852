"""Perturbations of training examples (robustness knobs; docs/reward.md#perturbations): the contract and the driver.

A perturbation (component kind ``perturbations``) rewrites an ``Example`` — its offered tools,
its messages, its task — and records what it changed in ``task.meta["perturbations"]``::

    class MyPerturbation:
        name = "my_perturbation"
        Config = MyConfig                 # its options (attrs), with defaults
        default_rate = 0.1                # share of examples it is applied to
        def __init__(self, config): ...
        def apply(self, example, rng, context) -> Example | None: ...   # None: not applicable

``Perturber`` applies the configured perturbations in order, each to a share ``rate`` of the
examples. The draw and everything a perturbation picks come from a ``random.Random`` seeded
with ``(seed, example id, perturbation name)``, so the same example always gets the same
perturbations whatever else is in the corpus and in whichever order it is processed.

Synthesis takes a ``PerturbationsConfig`` (for example under its own config section) and calls
``build_perturber(config, registry, path=...)`` once, then ``perturber(example)`` per example.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from prove_core.env.runtime import public_name
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


class Perturber:
    """Applies perturbations to examples, each to a share ``rate`` of them, deterministically."""

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
                example = changed
        return example


def build_perturber(config: PerturbationsConfig | Mapping[str, Any] | None, registry: Registry, *,
                    path: str = "$.perturbations", teacher: Any = None) -> Perturber:
    """Phase 2: build each perturbation through the registry's loader, its options structured
    with its ``Config`` (errors name ``path``, e.g. ``$.synth.perturbations.perturbations[1].options``)."""
    from prove_core.config import raise_problems, structure

    settings: PerturbationsConfig
    if config is None:
        settings = PerturbationsConfig()
    elif isinstance(config, Mapping):
        settings = structure(dict(config), PerturbationsConfig, path=path)
    else:
        settings = config
    entries = settings.perturbations
    if entries is None:
        entries = [PerturbationEntry(name=n) for n in DEFAULT_PERTURBATIONS]
    built: list[tuple[str, float, Any]] = []
    problems: list[str] = []
    for i, entry in enumerate(entries):
        perturbation = registry.build_entry("perturbations", entry.name, entry.options,
                                            where=f"{path}.perturbations[{i}]", problems=problems)
        if perturbation is None:
            continue
        rate = entry.rate if entry.rate is not None else float(getattr(perturbation, "default_rate", 0.0))
        built.append((entry.name, rate, perturbation))
    raise_problems(problems)
    return Perturber(built, PerturbationContext(registry, teacher), seed=settings.seed)
