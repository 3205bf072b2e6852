"""Tiny models for machines without a model hub: a tokenizer trained on the corpus (with PROVE's
ChatML + Hermes tool-calling template, ``prove_plugins.train.models.template``) and a small causal
LM with random weights built from a config. They serve fast tests; the main job trains a real
pretrained model (``prove_plugins.train.models.sources``).

Everything here imports torch, transformers and tokenizers: only the training and evaluation
stages import this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from prove_plugins.train.models.template import EOT, IM_END, IM_START, MARKUP, PAD, chat_template, openai_messages


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

