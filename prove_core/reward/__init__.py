"""``prove reward``: the reward contract — rollouts, components, live forks, the combiner
(``core``) — the tool-call parsing contract (``parsing``) and reports (``report``).

``from prove_core.reward import Rollout`` (the path before the reward became a package) keeps
working: names not found here are looked up in ``core``, which is imported only then.
"""


import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    core = importlib.import_module("prove_core.reward.core")
    try:
        return getattr(core, name)
    except AttributeError:
        raise AttributeError(f"module 'prove_core.reward' has no attribute {name!r}") from None
