"""Finding and loading plugins.

Bundled plugins (our servers and glue) come from the explicit ``BUNDLED`` tuple, so they load
even with autoload disabled. Third-party plugins are modules advertised in the entry-point
namespace ``prove.plugins``; stevedore finds and imports them. A plugin that fails to import,
or cannot be added (a misspelled hook, a registration hook that raises, a component that breaks
its contract or reuses a name), is left out and recorded in ``failures`` by name with the reason,
without breaking the other plugins. pluggy then calls each plugin's
``prove_register_*`` hooks with a ``register`` callable into the ``Registry``.

Environment switches:

- ``PROVE_DISABLE_PLUGIN_AUTOLOAD=1`` — load only the bundled plugins;
- ``PROVE_BLOCK_PLUGINS=name1,name2`` — skip these plugins (entry-point names or module names).
"""

from __future__ import annotations

import difflib
import importlib
import os
import types
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any

import attrs
import pluggy
import structlog
from stevedore import NamedExtensionManager

from prove_core.errors import HookNameError, PluginError, PluginHookFailed
from prove_core.plugin import hookspecs
from prove_core.plugin.registry import KINDS, Registry

NAMESPACE = "prove.plugins"
BUNDLED = (
    "prove_servers.banking",
    "prove_servers.trading",
    "prove_servers.payments",
    "prove_servers.budget",
    "prove_servers.calendar",
    "prove_servers.email",
    "prove_servers.shopping",
    "prove_servers.marketplace",
    "prove_servers.retail_chain",
    "prove_servers.food_delivery",
    "prove_servers.filesystem",
    "prove_servers.travel_booking",
    "prove_servers.maps",
    "prove_servers.vehicle",
    "prove_servers.social_media",
    "prove_servers.iot_devices",
    "prove_servers.crm",
    "prove_servers.issue_tracker",
    "prove_servers.team_chat",
    "prove_servers.video_meeting",
    "prove_plugins.synth.graph",
    "prove_plugins.synth.sampler",
    "prove_plugins.synth.teacher",
    "prove_plugins.synth.llm",
    "prove_plugins.synth.perturbations",
    "prove_plugins.reward.components",
    "prove_plugins.reward.parsers",
    "prove_plugins.eval.suites",
    "prove_plugins.eval.bfcl",
    "prove_plugins.eval.tau2",
    "prove_plugins.eval.nestful",
    "prove_plugins.eval.teval",
    "prove_plugins.train",
    "prove_plugins.train.models.clients",
)
AUTOLOAD_ENV = "PROVE_DISABLE_PLUGIN_AUTOLOAD"
BLOCK_ENV = "PROVE_BLOCK_PLUGINS"

log = structlog.get_logger()


@attrs.frozen
class LoadFailure:
    plugin: str
    distribution: str
    error: str


class _PluginManager(pluggy.PluginManager):
    """Treats every ``prove_*`` function of a plugin as a hook implementation, decorated or
    not, so a misspelled hook name fails ``check_pending`` instead of being ignored."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> pluggy.HookimplOpts | None:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith("prove_") and isinstance(getattr(plugin, name, None), types.FunctionType):
            # pluggy's defaults for an undecorated implementation (what it fills into ``{}``)
            opts = pluggy.HookimplOpts(wrapper=False, hookwrapper=False, optionalhook=False, tryfirst=False,
                                       trylast=False, specname=None)
        return opts


def _blocked() -> set[str]:
    return {p.strip() for p in os.environ.get(BLOCK_ENV, "").split(",") if p.strip()}


def _autoload_disabled() -> bool:
    return os.environ.get(AUTOLOAD_ENV, "").strip().lower() not in ("", "0", "false", "no")


class Plugins:
    """The loaded plugins and the registry their hooks filled."""

    def __init__(self) -> None:
        self.pm = _PluginManager("prove")
        self.pm.add_hookspecs(hookspecs)
        self.registry = Registry()
        self.failures: list[LoadFailure] = []
        self.distributions: dict[str, str] = {}

    # -- loading ---------------------------------------------------------------------------
    def load(self, *, bundled: Iterable[str] = BUNDLED, autoload: bool | None = None) -> Plugins:
        blocked = _blocked()
        for module_name in bundled:
            if module_name in blocked:
                continue
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:  # reported by name; the other plugins still load
                self._failed(module_name, "prove", exc)
                continue
            self._add_isolated(module, module_name, "prove")
        if autoload is None:
            autoload = not _autoload_disabled()
        if autoload:
            self._load_entry_points(blocked)
        return self

    def _load_entry_points(self, blocked: set[str]) -> None:
        # Blocked entry points are never imported (a broken plugin is often why one blocks it).
        dists = {
            ep.name: (ep.dist.name if ep.dist is not None else "?")
            for ep in entry_points(group=NAMESPACE)
            if ep.name not in blocked and ep.value.split(":")[0] not in blocked
        }

        def on_failure(_manager: Any, entrypoint: Any, exc: BaseException) -> None:
            self._failed(entrypoint.name, dists.get(entrypoint.name, "?"), exc)

        # stevedore keeps a per-process cache of entry points; a reload must see new installs.
        NamedExtensionManager.ENTRY_POINT_CACHE.pop(NAMESPACE, None)
        manager = NamedExtensionManager(
            namespace=NAMESPACE,
            names=list(dists),
            invoke_on_load=False,
            on_load_failure_callback=on_failure,
            name_order=True,
        )
        for ext in manager:
            self._add_isolated(ext.plugin, ext.name, dists.get(ext.name, "?"))

    def _add_isolated(self, plugin: Any, name: str, distribution: str) -> None:
        """``add``, with a plugin that cannot be added (a misspelled hook, a hook that raises, a
        component that breaks the contract or clashes with another's name) left out and recorded
        in ``failures``: one broken plugin never stops the others, or any ``prove`` command."""
        try:
            self.add(plugin, name=name, distribution=distribution)
        except PluginError as exc:
            self._failed(name, distribution, exc)

    def _failed(self, plugin: str, distribution: str, exc: BaseException) -> None:
        error = str(exc) if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
        self.failures.append(LoadFailure(plugin, distribution, error))
        log.warning("plugin failed to load", plugin=plugin, distribution=distribution, error=error)

    def add(self, plugin: Any, *, name: str, distribution: str = "?") -> None:
        """Register one plugin object (usually a module) and run its registration hooks."""
        if self.pm.has_plugin(name) or self.pm.is_registered(plugin):
            return
        unknown = self._unknown_hooks(plugin)
        if unknown:
            raise HookNameError(f"plugin {name!r} was not loaded: " + "; ".join(unknown))
        try:
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            if self.pm.has_plugin(name):
                self.pm.unregister(name=name)
            raise HookNameError(f"plugin {name!r} was not loaded: {exc}") from exc
        self.distributions[name] = distribution
        # Call each registration hook of this plugin alone, so a failure names the plugin.
        for kind in KINDS:
            hook_name = f"prove_register_{kind}"
            impl = getattr(plugin, hook_name, None)
            if impl is None:
                continue
            register = self.registry.register_callable(kind, plugin=name, distribution=distribution)
            try:
                impl(register=register)
            except PluginError:
                self.remove(name)
                raise
            except Exception as exc:
                self.remove(name)
                raise PluginHookFailed(f"plugin {name!r} failed in {hook_name}: {type(exc).__name__}: {exc}") from exc

    def _unknown_hooks(self, plugin: Any) -> list[str]:
        """A line for every ``prove_*`` function of ``plugin`` that is not a hook (a typo)."""
        hooks = sorted(n for n in dir(hookspecs) if n.startswith("prove_"))
        out = []
        for attr in sorted(dir(plugin)):
            if attr in hooks or self.pm.parse_hookimpl_opts(plugin, attr) is None:
                continue
            close = difflib.get_close_matches(attr, hooks, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            out.append(f"{attr} is not a PROVE hook{hint}")
        return out

    def remove(self, name: str) -> None:
        self.registry.unregister_plugin(name)
        if self.pm.has_plugin(name):
            self.pm.unregister(name=name)
        self.distributions.pop(name, None)

    @property
    def hook(self) -> Any:
        return self.pm.hook


_DEFAULT: Plugins | None = None


def get_plugins(*, reload: bool = False) -> Plugins:
    """The process-wide plugin set, loaded on first use."""
    global _DEFAULT
    if _DEFAULT is None or reload:
        _DEFAULT = Plugins().load()
    return _DEFAULT
