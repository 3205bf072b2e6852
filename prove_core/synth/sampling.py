"""The sampler contract (step 3 of ``prove synth``, docs/synthesis.md).

A **sampler** (component kind ``samplers``) finds entities that exist, through read-only calls.
It is a class the registry builds from its options::

    class MySampler:
        name = "my_sampler"
        Config = MySamplerConfig          # optional attrs options class
        def __init__(self, config): ...
        def sample(self, env: Environment, rules: list[SupportRule]) -> Any: ...

``rules`` are the experiment's ``[[synth.rules]]`` as ``SupportRule``s: a sampler keeps an entity
only if every rule for its entity type holds. What ``sample`` returns is handed to the teacher and
the conversation machine as the sampling context (the bundled ``live`` sampler returns a
``prove_plugins.synth.sampler.SamplingContext``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import attrs

OPS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le,
    "in": lambda a, b: a in b, "nonempty": lambda a, _b: bool(a),
}


@attrs.frozen(kw_only=True)
class SupportRule:
    """Keep an entity only if ``record[field] <op> value`` holds (records lacking the field pass
    unless ``required``)."""

    entity: str
    field: str
    op: str = attrs.field(default="eq", validator=attrs.validators.in_(sorted(OPS)))
    value: Any = None
    required: bool = False

    @classmethod
    def from_config(cls, rule: Any) -> SupportRule:
        """The rule of one ``[[synth.rules]]`` entry (a ``prove_core.config.RuleConfig``)."""
        return cls(**attrs.asdict(rule))

    def holds(self, record: dict[str, Any]) -> bool:
        if self.field not in record:
            return not self.required
        try:
            return bool(OPS[self.op](record[self.field], self.value))
        except TypeError:
            return False


__all__ = ["OPS", "SupportRule"]
