"""Tiny models for machines without a model hub: a tokenizer trained on the corpus, a tool-calling
chat template, and a small causal LM with random weights built from a config.

The chat template is ChatML with Hermes tool calls, so the bundled ``hermes`` parser reads what
the model writes::

    <|im_start|>system
    ...system prompt...

    # Tools
    <tools>
    get_balance(account_id)            (tool_detail="signatures": name and parameters, ? = optional)
    </tools>
    Call a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call>.<|im_end|>
    <|im_start|>user
    ...<|im_end|>
    <|im_start|>assistant
    <tool_call>{"name": "get_balance", "arguments": {"account_id": "acc_..."}}</tool_call><|im_end|>
    <|im_start|>tool
    <tool_response>{...result...}</tool_response><|im_end|>

``tool_detail="full"`` renders each tool's whole JSON schema (as Qwen and Hermes templates do);
the default ``signatures`` keeps prompts short enough for a model trained from scratch on a CPU.
Assistant turns are wrapped in ``{% generation %}`` so an SFT trainer can train on them alone.
Everything here imports torch, transformers and tokenizers: only the training and evaluation
stages import this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

IM_START, IM_END, PAD, EOT = "<|im_start|>", "<|im_end|>", "<|pad|>", "<|endoftext|>"
# Single tokens, but plain text when decoded, so the parser sees them.
MARKUP = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>")
TOOL_INSTRUCTION = 'Call a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call>.'

_TOOLS_SIGNATURES = (
    "{% for tool in tools %}{% set fn = tool.function if tool.function is defined else tool %}"
    "{{ fn.name }}("
    "{% set req = fn.parameters.required if fn.parameters is defined and fn.parameters.required is defined else [] %}"
    "{% if fn.parameters is defined and fn.parameters.properties is defined %}"
    "{% for key in fn.parameters.properties %}{{ key }}{% if key not in req %}?{% endif %}"
    "{% if not loop.last %}, {% endif %}{% endfor %}{% endif %})\n"
    "{% endfor %}"
)
_TOOLS_FULL = "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"

_TEMPLATE = (
    "{% set offset = 0 %}"
    "{% if messages and messages[0].role == 'system' %}{% set system = messages[0].content %}{% set offset = 1 %}"
    "{% else %}{% set system = 'You are a helpful assistant.' %}{% endif %}"
    "<|im_start|>system\n{{ system }}"
    "{% if tools %}{{ '\\n\\n# Tools\\n<tools>\\n' }}__TOOLS__{{ '</tools>\\n' }}__INSTRUCTION__{% endif %}<|im_end|>\n"
    "{% for message in messages[offset:] %}"
    "{% if message.role == 'assistant' %}<|im_start|>assistant\n{% generation %}"
    "{% if message.content %}{{ message.content }}{% endif %}"
    "{% if message.tool_calls %}{% for call in message.tool_calls %}"
    "{% set fn = call.function if call.function is defined else call %}"
    "<tool_call>{\"name\": \"{{ fn.name }}\", \"arguments\": "
    "{% if fn.arguments is string %}{{ fn.arguments }}{% else %}{{ fn.arguments | tojson }}{% endif %}}</tool_call>"
    "{% endfor %}{% endif %}<|im_end|>{% endgeneration %}{{ '\\n' }}"
    "{% elif message.role == 'tool' %}<|im_start|>tool\n<tool_response>__TOOL_CONTENT__</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def chat_template(tool_detail: str = "signatures", max_tool_chars: int | None = None) -> str:
    """The ChatML + Hermes tool-calling template (see the module docstring). ``max_tool_chars``
    cuts each tool result to that many characters (what a small model's context can afford)."""
    if tool_detail not in ("signatures", "full"):
        raise ValueError(f"tool_detail must be 'signatures' or 'full', got {tool_detail!r}")
    tools = _TOOLS_SIGNATURES if tool_detail == "signatures" else _TOOLS_FULL
    content = "{{ message.content }}" if not max_tool_chars else f"{{{{ message.content[:{int(max_tool_chars)}] }}}}"
    return (_TEMPLATE.replace("__TOOLS__", tools).replace("__INSTRUCTION__", TOOL_INSTRUCTION)
            .replace("__TOOL_CONTENT__", content))


def openai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Chat messages in OpenAI form (``Message`` objects, corpus dicts with decoded arguments, or
    OpenAI dicts)."""
    from prove_core.model import Message

    out = []
    for m in messages:
        if isinstance(m, Message):
            out.append(m.to_openai())
            continue
        m = dict(m)
        calls = m.get("tool_calls") or []
        if calls and "function" not in calls[0]:
            m["tool_calls"] = [{"id": c.get("id"), "type": "function",
                                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}), sort_keys=True)}}
                               for c in calls]
        if not calls:
            m.pop("tool_calls", None)
        out.append({k: v for k, v in m.items() if v is not None or k == "content"})
    return out


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = 2048, template: str | None = None,
                    model_max_length: int = 8192) -> Any:
    """A byte-level BPE tokenizer trained on ``texts``, wrapped as a ``PreTrainedTokenizerFast``
    with the tool-calling chat template, ``<|im_end|>`` as end of turn and a pad token."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = [PAD, EOT, IM_START, IM_END]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP])
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token=IM_END, pad_token=PAD,
                                      unk_token=None, model_max_length=model_max_length,
                                      additional_special_tokens=[IM_START, EOT])
    wrapped.chat_template = template or chat_template()
    wrapped.padding_side = "left"
    return wrapped


def corpus_texts(examples: Iterable[Any], template: str | None = None) -> Iterator[str]:
    """Each example rendered with the chat template: what the tokenizer is trained on."""
    from jinja2 import Environment as Jinja

    from prove_core.model import to_json

    # Plain Jinja (no tokenizer yet): the generation tags are transformers' extension, so drop them.
    source = (template or chat_template()).replace("{% generation %}", "").replace("{% endgeneration %}", "")
    env = Jinja(trim_blocks=True, lstrip_blocks=True)  # as transformers renders chat templates
    env.filters["tojson"] = lambda v: json.dumps(v, ensure_ascii=False)
    compiled = env.from_string(source)
    for example in examples:
        record = example if isinstance(example, dict) else to_json(example)
        yield compiled.render(messages=openai_messages(record["messages"]), tools=record["tools"],
                              add_generation_prompt=False)


def build_tiny_model(tokenizer: Any, *, hidden_size: int = 128, layers: int = 2, heads: int = 4,
                     intermediate_size: int | None = None, max_positions: int = 8192, seed: int = 0,
                     architecture: str = "qwen2") -> Any:
    """A small causal LM with random weights, sized for ``tokenizer`` (no download)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        architecture, vocab_size=len(tokenizer), hidden_size=hidden_size, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, intermediate_size=intermediate_size or 4 * hidden_size,
        max_position_embeddings=max_positions, tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def count_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())

