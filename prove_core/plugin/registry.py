"""The component registry: every server, reward, trainer, ... that plugins registered.

Components are keyed by ``(kind, name)``; a second registration of the same name is an error
that names both plugins. A component may be registered as a lazy ``"module:attr"`` string;
``Registry.load`` imports it on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from prove_core.errors import DuplicateComponent, PluginError, UnknownComponent

KINDS = ("servers", "samplers", "extractors", "teachers", "rewards", "perturbations", "trainers", "evaluators",
         "parsers")


class Register(Protocol):
    """The callable a ``prove_register_*`` hook receives."""

    def __call__(self, target: Any, name: str | None = None, summary: str = "") -> None: ...


@attrs.define(kw_only=True)
class Component:
    kind: str
    name: str
    target: Any  # the object, or a "module:attr" string until loaded
    plugin: str  # the plugin (module or entry point) that registered it
    distribution: str  # the installed distribution that provides the plugin
    summary: str = ""

    @property
    def lazy(self) -> bool:
        return isinstance(self.target, str)


def import_ref(ref: str) -> Any:
    module_name, _, attr = ref.partition(":")
    if not attr:
        raise PluginError(f"lazy reference {ref!r} must look like 'package.module:attribute'")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class Registry:
    def __init__(self) -> None:
        self._components: dict[tuple[str, str], Component] = {}

    def register_callable(self, kind: str, plugin: str, distribution: str) -> Register:
        if kind not in KINDS:
            raise PluginError(f"unknown component kind {kind!r}; expected one of {', '.join(KINDS)}")

        def register(target: Any, name: str | None = None, summary: str = "") -> None:
            if name is None:
                name = getattr(target, "name", None)
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin {plugin!r} registered a {kind[:-1]} without a name")
            if not summary and not isinstance(target, str):
                summary = (getattr(target, "description", "") or (target.__doc__ or "")).strip().split("\n")[0]
            key = (kind, name)
            if key in self._components:
                other = self._components[key]
                raise DuplicateComponent(
                    f"duplicate {kind[:-1]} name {name!r}: registered by {other.plugin!r} "
                    f"({other.distribution}) and by {plugin!r} ({distribution})"
                )
            self._components[key] = Component(
                kind=kind, name=name, target=target, plugin=plugin, distribution=distribution, summary=summary
            )

        return register

    def components(self, kind: str | None = None) -> list[Component]:
        return [c for (k, _), c in sorted(self._components.items()) if kind is None or k == kind]

    def names(self, kind: str) -> list[str]:
        return [c.name for c in self.components(kind)]

    def component(self, kind: str, name: str) -> Component:
        try:
            return self._components[(kind, name)]
        except KeyError:
            known = ", ".join(self.names(kind)) or "none"
            raise UnknownComponent(f"no {kind[:-1]} named {name!r} (registered: {known})") from None

    def load(self, kind: str, name: str) -> Any:
        comp = self.component(kind, name)
        if comp.lazy:
            try:
                comp.target = import_ref(comp.target)
            except (ImportError, AttributeError) as exc:
                raise PluginError(f"{kind[:-1]} {name!r} from plugin {comp.plugin!r} failed to load: {exc}") from exc
        return comp.target

    def unregister_plugin(self, plugin: str) -> None:
        for key in [k for k, c in self._components.items() if c.plugin == plugin]:
            del self._components[key]

    def each(self, kind: str) -> list[tuple[str, Callable[..., Any] | Any]]:
        return [(c.name, self.load(kind, c.name)) for c in self.components(kind)]
