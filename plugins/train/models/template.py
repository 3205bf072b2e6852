"""PROVE's tool-calling chat template, and the check that puts it in place of a model's own
template when that one cannot render tools.

The template is ChatML with Hermes tool calls, so the bundled ``hermes`` parser reads what the
model writes::

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

``tool_detail`` says how much of each schema the model reads: ``signatures`` (name and parameter
names: what a model trained from scratch can afford), ``compact`` (typed parameters, enum values
and the first sentence of the description, one line a tool: a pretrained model's default) or
``full`` (each tool's whole JSON schema, as Qwen and Hermes templates do). Assistant turns are
wrapped in ``{% generation %}`` so an SFT trainer can train on them alone.

Many models' own templates (SmolLM2's among them: plain ChatML) read only ``content``: they drop
the offered tools, or fail on an assistant turn that only calls tools. ``template_problem`` renders
a probe conversation with the tokenizer's template and says what it cannot do;
``ensure_tool_template`` then installs this template (and says so once). Training, evaluation and
the launch kits all go through it, so no path silently drops the tools.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
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
# One line a tool: typed parameters (enum values spelled out) and the first sentence of its description.
_TOOLS_COMPACT = (
    "{% for tool in tools %}{% set fn = tool.function if tool.function is defined else tool %}"
    "{% set props = fn.parameters.properties if fn.parameters is defined and fn.parameters.properties is defined else {} %}"
    "{% set req = fn.parameters.required if fn.parameters is defined and fn.parameters.required is defined else [] %}"
    "{{ fn.name }}("
    "{% for key, spec in props.items() %}{{ key }}{% if key not in req %}?{% endif %}: "
    "{% if spec.enum is defined %}{{ spec.enum | map('tojson') | join('|') }}"
    "{% elif spec.type is defined and spec.type is string %}{{ spec.type }}"
    "{% elif spec.type is defined %}{{ spec.type | join('|') }}{% else %}any{% endif %}"
    "{% if not loop.last %}, {% endif %}{% endfor %})"
    "{% if fn.description is defined and fn.description %}"
    " - {{ (fn.description | replace('\\n', ' ')).split('. ')[0].rstrip('.') }}{% endif %}{{ '\\n' }}"
    "{% endfor %}"
)
_TOOLS_FULL = "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
TOOL_DETAILS = {"signatures": _TOOLS_SIGNATURES, "compact": _TOOLS_COMPACT, "full": _TOOLS_FULL}

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
    if tool_detail not in TOOL_DETAILS:
        raise ValueError(f"tool_detail must be one of {', '.join(TOOL_DETAILS)}, got {tool_detail!r}")
    tools = TOOL_DETAILS[tool_detail]
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




# A conversation that uses every part of a tool-calling template; each marker must come out.
_PROBE_TOOL = {"type": "function", "function": {
    "name": "probe_lookup_tool", "description": "Look a record up.",
    "parameters": {"type": "object", "properties": {"record_id": {"type": "string"}}, "required": ["record_id"]}}}
_PROBE = [
    {"role": "system", "content": "probe system prompt"},
    {"role": "user", "content": "probe user turn"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "probe_lookup_tool", "arguments": json.dumps({"record_id": "probe-arg-7"})}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "probe_lookup_tool", "content": "probe-result-9"},
    {"role": "assistant", "content": "probe final answer"},
]


def template_problem(tokenizer: Any) -> str | None:
    """What the tokenizer's chat template cannot do for tool-use training, or None when it renders
    the offered tools, an assistant turn's tool calls, a tool result and the assistant-only loss
    mask (``{% generation %}`` markers)."""
    if not getattr(tokenizer, "chat_template", None):
        return "it has no chat template"
    try:
        text = tokenizer.apply_chat_template(_PROBE, tools=[_PROBE_TOOL], tokenize=False)
    except Exception as exc:  # noqa: BLE001 - any template error means it cannot render tool use
        return f"it fails on a tool call ({type(exc).__name__}: {exc})"
    for marker, what in (("probe_lookup_tool", "the offered tools"), ("probe-arg-7", "tool calls"),
                         ("probe-result-9", "tool results"), ("probe final answer", "assistant replies")):
        if marker not in text:
            return f"it drops {what}"
    if "probe_lookup_tool" not in text.split("probe user turn", 1)[0]:
        return "it does not show the offered tools before the conversation"
    try:
        rendered = tokenizer.apply_chat_template(_PROBE, tools=[_PROBE_TOOL], return_dict=True,
                                                 return_assistant_tokens_mask=True)
    except Exception as exc:  # noqa: BLE001
        return f"it cannot mark assistant tokens ({type(exc).__name__}: {exc})"
    if not any(rendered.get("assistant_masks") or ()):
        return "it has no {% generation %} markers (the loss could not be kept to assistant turns)"
    return None


def ensure_tool_template(tokenizer: Any, *, tool_detail: str = "compact", max_tool_chars: int | None = None,
                         echo: Callable[[str], None] | None = None, name: str = "the model") -> bool:
    """Install PROVE's ChatML + Hermes template when the tokenizer's own cannot render tool use;
    returns whether it did. Refuses (``ConfigError``) a tokenizer without ``<|im_start|>`` and
    ``<|im_end|>`` as single tokens: the fallback would then have no end-of-turn token to stop on."""
    problem = template_problem(tokenizer)
    if problem is None:
        return False
    from prove_core.errors import ConfigError

    vocab = tokenizer.get_vocab()
    missing = [t for t in (IM_START, IM_END) if t not in vocab]
    if missing:
        raise ConfigError(f"the chat template of {name} cannot be used for tool calling ({problem}), and PROVE's "
                          f"ChatML fallback needs {' and '.join(missing)} as tokens, which it lacks: give the model "
                          "a tool-calling chat template (tokenizer_config.json or chat_template.jinja)")
    tokenizer.chat_template = chat_template(tool_detail, max_tool_chars)
    if tokenizer.eos_token != IM_END:
        tokenizer.eos_token = IM_END
    if echo is not None:
        echo(f"chat template: {name}'s own cannot be used for tool calling ({problem}); using PROVE's "
             f"ChatML + Hermes template (tools as {tool_detail})")
    return True


def is_prove_template(template: str | None) -> bool:
    return bool(template) and TOOL_INSTRUCTION in template


def apply_tool_settings(tokenizer: Any, tool_detail: str | None, max_tool_chars: int | None, *,
                        echo: Callable[[str], None] | None = None, name: str = "the model") -> None:
    """Make the tokenizer's template render tool use: PROVE's own template is re-rendered with the
    given settings when they are set; any other template is kept when it renders tool use, else
    replaced by PROVE's (``ensure_tool_template``)."""
    if is_prove_template(tokenizer.chat_template):
        if tool_detail is not None or max_tool_chars is not None:
            current = next((name for name, block in TOOL_DETAILS.items() if block in tokenizer.chat_template), "compact")
            tokenizer.chat_template = chat_template(tool_detail or current, max_tool_chars)
        return
    ensure_tool_template(tokenizer, tool_detail=tool_detail or "compact", max_tool_chars=max_tool_chars,
                         echo=echo, name=name)


def stop_at_turn_end(model: Any, tokenizer: Any) -> None:
    """Under PROVE's template a turn ends with ``<|im_end|>``: make generation stop there too
    (added to the model's own end-of-sequence ids, which are kept)."""
    if not is_prove_template(tokenizer.chat_template):
        return
    end = tokenizer.convert_tokens_to_ids(IM_END)
    eos = model.generation_config.eos_token_id
    ids = [] if eos is None else list(eos) if isinstance(eos, list) else [eos]
    if end not in ids:
        model.generation_config.eos_token_id = [*ids, end] if ids else end
