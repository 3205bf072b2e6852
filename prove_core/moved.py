"""Old module paths, kept importable after the core was split into packages.

``import prove_core.runtime`` (or ``from prove_core.runtime import ServerRuntime``) still works:
a finder on ``sys.meta_path`` answers each old path with the module at its new path, so both
names are the same module object, and warns once with the new path. New code imports the new
paths; this table is the whole compatibility layer and goes away in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence

MOVED = {
    "prove_core.hookspecs": "prove_core.plugin.hookspecs",
    "prove_core.plugins": "prove_core.plugin.manager",
    "prove_core.registry": "prove_core.plugin.registry",
    "prove_core.runtime": "prove_core.env.runtime",
    "prove_core.serving": "prove_core.env.serving",
    "prove_core.episode": "prove_core.env.episode",
    "prove_core.rollout": "prove_core.env.rollout",
    "prove_core.catalog": "prove_core.env.catalog",
    "prove_core.graph": "prove_core.synth.graph",
    "prove_core.conversation": "prove_core.synth.conversation",
    "prove_core.validation": "prove_core.synth.validation",
    "prove_core.corpus_quality": "prove_core.synth.quality",
    "prove_core.synthesis": "prove_core.synth.pipeline",
    "prove_core.importers": "prove_core.synth.importers",
    "prove_core.exporters": "prove_core.synth.exporters",
    "prove_core.perturbation": "prove_core.synth.perturbation",
    "prove_core.parsing": "prove_core.reward.parsing",
    "prove_core.reward_report": "prove_core.reward.report",
    "prove_core.training": "prove_core.train.core",
    "prove_core.training_report": "prove_core.train.report",
    "prove_core.evaluation": "prove_core.eval.core",
    "prove_core.policies": "prove_plugins.models.clients",
    "prove_core.hf": "prove_plugins.models.hf",
    "prove_core.tiny": "prove_plugins.models.tiny",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=3)
        return importlib.import_module(new)

    def exec_module(self, module: types.ModuleType) -> None:
        pass  # already executed under its new name


def install() -> None:
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
