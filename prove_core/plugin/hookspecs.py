"""The hooks a PROVE plugin can implement.

Bundled servers and plugins use exactly these hooks, the same way a third-party package does.
A plugin is a module; it implements a hook by defining a function with the hook's name,
decorated with ``prove_core.hookimpl``. Each ``prove_register_*`` hook receives a ``register``
callable for one kind of component::

    @hookimpl
    def prove_register_rewards(register):
        register("my_pkg.rewards:MyReward", name="my_reward", summary="...")

``register(target, name=None, summary="")`` takes either the object itself or a lazy
``"module:attr"`` string (imported only when the component is used, so listing plugins never
imports heavy dependencies such as torch). Servers are registered as ``Server`` objects; every
other kind as a component class (a ``name``, an optional attrs ``Config``,
``__init__(self, config)``) that the registry builds with ``Registry.build`` — the contracts
of each kind are in docs/plugins.md.
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
def prove_register_clients(register: Register) -> None:
    """Register model clients: policies an evaluator plays (``[[eval.models]]`` ``client = ...``:
    local checkpoints, OpenAI-compatible endpoints, scripted baselines)."""


@hookspec
def prove_episode_start(server: str, session_id: str, task: Any) -> None:
    """Called when an episode starts on a fresh session: every rollout (training, evaluation,
    ``prove_core.reward.rollout.rollout``), every synthesis replay and every scripted episode played
    on an environment built with the plugins' hooks. ``server`` is the server's name (several
    mounted servers: their names, sorted, joined with commas); ``session_id`` the episode's live
    session; ``task`` the ``prove_core.model.Task`` being played (for a scripted episode, whose
    ground truth is recorded as it runs: its servers, seed and initial state, no calls yet)."""


@hookspec
def prove_episode_end(server: str, session_id: str, task: Any, result: Any) -> None:
    """Called when an episode ends, before its session is closed, with the same ``server`` and
    ``session_id`` and its result: a ``prove_core.reward.rollout.Played`` for a rollout (transcript,
    parsed calls, final state hash), a ``prove_core.synth.validation.Verdict`` for a replay, a
    ``prove_core.env.episode.EpisodeResult`` (steps and outcomes) for a scripted episode, whose
    ``task`` is then the finished one with its ground-truth calls."""
