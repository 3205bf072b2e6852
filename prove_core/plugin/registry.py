"""The component registry: every server, reward, trainer, ... that plugins registered.

Components are keyed by ``(kind, name)``; a second registration of the same name is an error
that names both plugins. A component may be registered as a lazy ``"module:attr"`` string;
``Registry.load`` imports it on first use.

Every kind but ``servers`` follows one contract (docs/plugins.md, "Component contracts"): the
registered target is a **class** with a class attribute ``name``, an optional attrs ``Config``
class (its options, every field defaulted; absent: the component takes no options) and
``__init__(self, config)``. ``Registry.build(kind, name, options, path=...)`` is the one loader:
it structures ``options`` with ``Config`` (errors name ``path``) and returns the instance.
Servers stay ``prove_core.toolkit.Server`` objects, read with ``Registry.load``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from prove_core.errors import DuplicateComponent, PluginError, UnknownComponent, did_you_mean

# kind -> the singular noun messages use ("no sampler named 'x'")
NOUNS: dict[str, str] = {
    "servers": "server",
    "samplers": "sampler",
    "extractors": "extractor",
    "teachers": "teacher",
    "rewards": "reward",
    "perturbations": "perturbation",
    "trainers": "trainer",
    "evaluators": "evaluator",
    "parsers": "parser",
    "clients": "client",
}
KINDS = tuple(NOUNS)
# kinds whose components are Server objects, not classes built from a Config
OBJECT_KINDS = frozenset({"servers"})


def noun(kind: str) -> str:
    """The singular noun of a component kind (``"servers"`` -> ``"server"``)."""
    try:
        return NOUNS[kind]
    except KeyError:
        raise PluginError(f"unknown component kind {kind!r}; expected one of {', '.join(KINDS)}") from None


class Register(Protocol):
    """The callable a ``prove_register_*`` hook receives."""

    def __call__(self, target: Any, name: str | None = None, summary: str = "") -> None: ...


@attrs.frozen(kw_only=True)
class NoConfig:
    """The options of a component that declares no ``Config``: none."""


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


def config_class(target: Any) -> type[Any]:
    """The options class of a component class: its ``Config``, or ``NoConfig`` without one."""
    return getattr(target, "Config", None) or NoConfig


def contract_problem(kind: str, target: Any) -> str | None:
    """Why ``target`` is not a valid component of ``kind`` (``None`` when it is)."""
    if kind in OBJECT_KINDS:
        return None
    if not isinstance(target, type):
        return (f"is a {type(target).__name__}, not a class: register the class (with a `name`, an optional attrs "
                "`Config` and `__init__(self, config)`); the registry builds instances from the options")
    config = config_class(target)
    if not (isinstance(config, type) and attrs.has(config)):
        return f"has a `Config` that is not an attrs class ({config!r})"
    return None


class Registry:
    def __init__(self) -> None:
        self._components: dict[tuple[str, str], Component] = {}

    def register_callable(self, kind: str, plugin: str, distribution: str) -> Register:
        what = noun(kind)

        def register(target: Any, name: str | None = None, summary: str = "") -> None:
            if name is None:
                name = getattr(target, "name", None)
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin {plugin!r} registered a {what} without a name")
            if not isinstance(target, str):
                problem = contract_problem(kind, target)
                if problem is not None:
                    raise PluginError(f"plugin {plugin!r} registered {what} {name!r}, which {problem}")
                if not summary:
                    summary = (getattr(target, "description", "") or (target.__doc__ or "")).strip().split("\n")[0]
            key = (kind, name)
            if key in self._components:
                other = self._components[key]
                raise DuplicateComponent(
                    f"duplicate {what} name {name!r}: registered by {other.plugin!r} "
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
        what = noun(kind)
        try:
            return self._components[(kind, name)]
        except KeyError:
            known = ", ".join(self.names(kind)) or "none"
            raise UnknownComponent(f"no {what} named {name!r} (registered: {known})"
                                   f"{did_you_mean(name, self.names(kind))}") from None

    def load(self, kind: str, name: str) -> Any:
        """The registered object: a ``Server`` for ``servers``, the component's class otherwise
        (a lazy ``"module:attr"`` is imported now). ``build`` makes an instance."""
        comp = self.component(kind, name)
        if comp.lazy:
            try:
                comp.target = import_ref(comp.target)
            except (ImportError, AttributeError) as exc:
                raise PluginError(f"{noun(kind)} {name!r} from plugin {comp.plugin!r} failed to load: {exc}") from exc
        return comp.target

    def config_class(self, kind: str, name: str) -> type[Any]:
        """The options class of a registered component (``NoConfig`` when it declares none)."""
        return config_class(self._component_class(kind, name))

    def build(self, kind: str, name: str, options: Mapping[str, Any] | None = None, *, path: str = "$",
              **context: Any) -> Any:
        """The one loader: an instance of component ``(kind, name)``.

        ``options`` (a mapping, usually a config table) are structured with the class's
        ``Config`` — unknown keys and wrong types raise ``ConfigError`` naming ``path`` — and the
        instance is ``cls(config, **context)``. ``context`` is the keyword arguments a kind's
        contract adds (clients get ``registry``). Unknown names raise ``UnknownComponent``, which
        lists the registered ones."""
        from prove_core.config import structure

        cls = self._component_class(kind, name)
        config = structure(dict(options or {}), config_class(cls), path=path)
        return cls(config, **context)

    def check_entry(self, kind: str, name: str, options: Mapping[str, Any] | None, *, where: str,
                    problems: list[str], name_key: str = "name") -> Any | None:
        """The checking half of ``build_entry``: the entry's options structured with the
        component's ``Config``, nothing built (a model client would load its weights). A failure
        goes to ``problems`` — an unknown name as ``{where}.{name_key}: no reward named ...``
        with a did-you-mean, a component that cannot be imported likewise, bad options with
        their paths under ``{where}.options`` — and the result is ``None``."""
        from prove_core.config import config_problems, structure
        from prove_core.errors import ConfigError

        try:
            config_type = self.config_class(kind, name)
        except (UnknownComponent, PluginError) as exc:
            problems.append(f"{where}.{name_key}: {exc}")
            return None
        try:
            return structure(dict(options or {}), config_type, path=f"{where}.options")
        except ConfigError as exc:
            problems.extend(config_problems(exc))
            return None

    def build_entry(self, kind: str, name: str, options: Mapping[str, Any] | None, *, where: str,
                    problems: list[str], name_key: str = "name", **context: Any) -> Any | None:
        """Phase 2 for one configured entry (``[[reward.components]]``, ``[[eval.models]]``, ...):
        ``build``, but a failure goes to ``problems`` instead of being raised (see
        ``check_entry``; a ``ConfigError`` the component's constructor raises goes there too) and
        the result is ``None``, so a config's every problem is reported at once."""
        from prove_core.config import config_problems
        from prove_core.errors import ConfigError

        config = self.check_entry(kind, name, options, where=where, problems=problems, name_key=name_key)
        if config is None:
            return None
        try:
            return self._component_class(kind, name)(config, **context)
        except ConfigError as exc:
            problems.extend(config_problems(exc))
            return None

    def missing_requirements(self, kind: str, name: str) -> str | None:
        """What a component needs installed and is not, as one sentence with the line that installs
        it; ``None`` when nothing is missing. A component class declares its optional packages
        with ``requires`` (module names, e.g. ``("torch", "trl")``) and ``install`` (the install
        line); the validation pass checks them for the stages that run, before any work."""
        import importlib.util

        target = self.load(kind, name)
        missing = [m for m in getattr(target, "requires", ()) if importlib.util.find_spec(m) is None]
        if not missing:
            return None
        install = getattr(target, "install", "") or f"pip install {' '.join(missing)}"
        return f"{noun(kind)} {name!r} needs {', '.join(missing)}: {install}"

    def _component_class(self, kind: str, name: str) -> Any:
        if kind in OBJECT_KINDS:
            raise PluginError(f"{kind} are registered as objects, not built from options: use Registry.load")
        target = self.load(kind, name)
        problem = contract_problem(kind, target)
        if problem is not None:
            comp = self.component(kind, name)
            raise PluginError(f"{noun(kind)} {name!r} from plugin {comp.plugin!r} {problem}")
        return target

    def unregister_plugin(self, plugin: str) -> None:
        for key in [k for k, c in self._components.items() if c.plugin == plugin]:
            del self._components[key]

    def each(self, kind: str) -> list[tuple[str, Callable[..., Any] | Any]]:
        return [(c.name, self.load(kind, c.name)) for c in self.components(kind)]
