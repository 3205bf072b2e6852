"""The hooks a PROVE plugin can implement.

Bundled servers and plugins use exactly these hooks, the same way a third-party package does.
A plugin is a module; it implements a hook by defining a function with the hook's name,
decorated with ``prove_core.hookimpl``. Each ``prove_register_*`` hook receives a ``register``
callable for one kind of component::

    @hookimpl
    def prove_register_rewards(register):
        register("my_reward", "my_pkg.rewards:MyReward", summary="...")

``register(target, name=None, summary="")`` takes either the object itself or a lazy
``"module:attr"`` string (imported only when the component is used, so listing plugins never
imports heavy dependencies such as torch). Servers are registered as ``Server`` objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from prove_core.plugin.registry import Register

hookspec = pluggy.HookspecMarker("prove")
hookimpl = pluggy.HookimplMarker("prove")


@hookspec
def prove_register_servers(register: Register) -> None:
    """Register stateful tool servers (``prove_core.toolkit.Server`` objects)."""


@hookspec
def prove_register_samplers(register: Register) -> None:
    """Register live-state samplers: read-only probes that find entities a query may mention."""


@hookspec
def prove_register_extractors(register: Register) -> None:
    """Register dependency-graph labellers and chain extractors used by synthesis."""


@hookspec
def prove_register_teachers(register: Register) -> None:
    """Register teachers that write the user and assistant turns of synthetic conversations."""


@hookspec
def prove_register_rewards(register: Register) -> None:
    """Register reward components that score a rollout against its task."""


@hookspec
def prove_register_perturbations(register: Register) -> None:
    """Register perturbations applied to training examples (distractors, enum stripping, ...)."""


@hookspec
def prove_register_parsers(register: Register) -> None:
    """Register tool-call parsers: each turns one assistant turn of raw model text (Hermes,
    Llama 3, Mistral, ... formats) into calls and typed parse failures, and never raises."""


@hookspec
def prove_register_trainers(register: Register) -> None:
    """Register RL training backends (``prove train``)."""


@hookspec
def prove_register_evaluators(register: Register) -> None:
    """Register evaluators (``prove eval``): benchmarks and held-out suites."""


@hookspec
def prove_episode_start(server: str, session_id: str, task: Any) -> None:
    """Called when an episode (a rollout or a scripted run) starts on a fresh session."""


@hookspec
def prove_episode_end(server: str, session_id: str, task: Any, result: Any) -> None:
    """Called when an episode ends, with its result (the calls made and their outcomes)."""
