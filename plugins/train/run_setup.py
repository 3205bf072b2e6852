"""A run directory's ``prove_setup.json``, loaded where the trainer's workers play episodes.

The ``openrlhf`` and ``verl`` backends write the same setup file (parser, reward, server options,
sessions, limits); their agents load it here, once per process, into the objects every episode
of that process shares (each episode still opens its own session).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from prove_core.reward.rollout import RolloutLimits


@functools.lru_cache(maxsize=4)
def load_run_setup(path: str) -> dict[str, Any]:
    """The setup's data, plus ``parser_object``, ``reward_object``, ``environments`` (built by the
    runtime factory with the run's ``[sessions]``) and ``limits_object``."""
    from prove_core.config import RewardConfig, SessionsConfig, structure
    from prove_core.env.runtime import Environments
    from prove_core.plugin.manager import get_plugins
    from prove_core.reward.core import build_reward
    from prove_core.reward.parsing import load_parser

    data = json.loads(Path(path).read_text())
    plugins = get_plugins()
    registry = plugins.registry
    options = {name: structure(opts, registry.load("servers", name).options_type, path=f"$.servers.{name}.options")
               for name, opts in data["server_options"].items()}
    reward_cfg = structure(data["reward"], RewardConfig, path="$.reward") if data.get("reward") else None
    sessions = structure(data.get("sessions") or {}, SessionsConfig, path="$.sessions")  # the experiment's [sessions]
    return {
        **data,
        "parser_object": load_parser(registry, data["parser"]),
        "reward_object": build_reward(reward_cfg, registry, server_options=options, sessions=sessions),
        "environments": Environments(registry, options, sessions=sessions, hooks=plugins.hook),
        "limits_object": RolloutLimits(**data["limits"]),
    }
