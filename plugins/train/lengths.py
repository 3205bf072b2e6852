"""How long the real data is under the model's tokenizer, and the checks that refuse a trainer
configuration that would cut it.

A trainer that truncates a tool-use prompt loses what matters most: left-truncation cuts the
system prompt and the first tool schemas, right-truncation the user's request. ``measure`` renders
every example with the model's chat template — the prompt a rollout starts from (system prompt,
offered tools, first user turn, the assistant header), the tokens the tool schemas take in it, and
the whole conversation — and ``require`` turns a limit that does not fit into a ``ConfigError``
that names the setting, the numbers and the longest example. Every backend measures before it
trains or writes a launch kit, and reports the figures.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import attrs

from prove_core.errors import ConfigError


@attrs.frozen(kw_only=True)
class Lengths:
    examples: int
    prompt_median: int
    prompt_max: int
    longest_prompt: str  # the example id
    schema_median: int  # tokens the offered tools take in a prompt
    tools_median: float  # tools offered per prompt
    conversation_median: int
    conversation_max: int  # a whole example, every turn
    longest_conversation: str
    after_prompt_max: int  # a whole example minus its prompt: what a multi-turn trainer calls the response

    def describe(self) -> str:
        share = self.schema_median / self.prompt_median if self.prompt_median else 0.0
        return (f"{self.examples} examples: prompts median {self.prompt_median} tokens (tool schemas "
                f"{self.schema_median}, {share:.0%}, {self.tools_median:g} tools), longest {self.prompt_max}; "
                f"whole conversations median {self.conversation_median}, longest {self.conversation_max}")

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _count(tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None, *,
           generation_prompt: bool) -> int:
    ids = tokenizer.apply_chat_template(list(messages), tools=list(tools) if tools else None, tokenize=True,
                                        add_generation_prompt=generation_prompt, return_dict=True)["input_ids"]
    return len(ids)


def measure(tokenizer: Any, examples: Sequence[Any]) -> Lengths:
    """Token counts of ``examples`` (``prove_core.model.Example``) under ``tokenizer``'s chat template."""
    from prove_core.reward.rollout import opening, user_turns
    from prove_plugins.train.models.template import openai_messages

    if not examples:
        raise ValueError("no examples to measure")
    prompts, schemas, whole, after, tools = [], [], [], [], []
    for example in examples:
        turns = user_turns(example)
        prompt = [*opening(example), {"role": "user", "content": turns[0] if turns else ""}]
        offered = list(example.tools or [])
        with_tools = _count(tokenizer, prompt, offered, generation_prompt=True)
        prompts.append(with_tools)
        schemas.append(with_tools - _count(tokenizer, prompt, None, generation_prompt=True) if offered else 0)
        full = _count(tokenizer, openai_messages(example.messages), offered, generation_prompt=False)
        whole.append(full)
        after.append(max(0, full - with_tools))
        tools.append(len(offered))
    longest = max(range(len(prompts)), key=prompts.__getitem__)
    longest_whole = max(range(len(whole)), key=whole.__getitem__)
    return Lengths(examples=len(examples), prompt_median=int(statistics.median(prompts)), prompt_max=max(prompts),
                   longest_prompt=examples[longest].id, schema_median=int(statistics.median(schemas)),
                   tools_median=float(statistics.median(tools)), conversation_median=int(statistics.median(whole)),
                   conversation_max=max(whole), longest_conversation=examples[longest_whole].id,
                   after_prompt_max=max(after))


def require(need: int, limit: int, setting: str, what: str, example: str, hint: str = "") -> None:
    """Refuse a limit below what the data needs (``ConfigError`` naming the setting and the numbers)."""
    if need > limit:
        raise ConfigError(f"{setting}: {what} takes {need} tokens, more than the {limit} there are room for "
                          f"(example {example}); nothing was trained" + (f". Fix: {hint}" if hint else ""))
