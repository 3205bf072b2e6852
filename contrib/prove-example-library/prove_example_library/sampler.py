"""A live-state sampler: which books can be borrowed now, found through read-only tool calls.

A sampler is a class (the registry builds it): a ``name``, an optional attrs ``Config`` with its
options, ``__init__(self, config)``, and ``sample(env, rules)``. ``env`` is the synthesis
environment (``prove_core.env.runtime.Environment``) of one world; ``rules`` are the experiment's
``[[synth.rules]]`` (``prove_core.synth.sampling.SupportRule``). ``sample`` returns a
``SamplingContext``: for each ``"server:entity"``, records that exist (each a dict with its
``id``), which the conversation machine draws the entities of its queries from.
"""

from __future__ import annotations

from typing import Any

import attrs

from prove_plugins.synth.sampler import SamplingContext


@attrs.frozen(kw_only=True)
class AvailableBooksConfig:
    limit: int = attrs.field(default=20, validator=attrs.validators.ge(1))  # books to look at per world


class AvailableBooks:
    """Books with a copy on the shelf, sampled from the live session (never invented)."""

    name = "library_available_books"
    description = "Books that a member can borrow right now, found with read-only calls."
    Config = AvailableBooksConfig

    def __init__(self, config: AvailableBooksConfig = AvailableBooksConfig()) -> None:
        self.config = config

    def sample(self, env: Any, rules: list[Any] = ()) -> SamplingContext:
        entities: dict[str, list[dict[str, Any]]] = {}
        for runtime in env.runtimes.values():
            if "search_books" not in runtime.server.tools:
                continue  # another server mounted beside the library: nothing to find here
            sid = runtime.new_session()
            try:
                result = runtime.call(sid, "search_books", {"available_only": True, "limit": self.config.limit})
            finally:
                runtime.close(sid)
            books = [] if result.is_error else result.data["books"]
            kept = [b for b in books if all(rule.holds(b) for rule in rules if rule.entity == "book")]
            entities[f"{runtime.name}:book"] = sorted(kept, key=lambda b: b["id"])
        return SamplingContext(entities=entities)
