"""Model clients: policies (``prove_core.env.rollout.Policy``) that evaluators and rollouts play.

=========  ====================================================================================
hf         a local Hugging Face model (a checkpoint folder): its chat template renders the
           conversation and the tools, ``generate`` writes the turn, a registered tool-call parser
           (``hermes`` for Qwen and the tiny models, ``llama3``, ``mistral``, ...) reads it
openai     any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, SGLang, llama.cpp server, a
           hosted API): the tools go in the request, structured ``tool_calls`` come back (or raw
           text is parsed with ``parser`` for a server started without a tool parser)
oracle     replays the task's reference solution (a sanity baseline: the upper bound)
no_call    never calls a tool, always answers in prose (the lower bound)
spammer    repeats one call several times per turn (what the efficiency term punishes)
=========  ====================================================================================

Each is a component of kind ``clients``, registered by this module's ``prove_register_clients``
hook like a third-party client would be. ``[[eval.models]]`` names one: ``client = "openai"``
with its ``options``; the registry's loader structures them with the client's ``Config`` and
builds it as ``cls(config, registry=registry)`` (``prove_core.eval.core.build_client``).
Reference-aware policies implement ``begin(reference)``; evaluators call it before each task
(``evaluation.begin_episode``).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

import attrs
import structlog

from prove_core import hookimpl
from prove_core.env.rollout import PolicyTurn
from prove_core.errors import ProveError, RequestFailed
from prove_core.model import ToolCall
from prove_core.reward.parsing import Attempt, decode_openai_tool_call, load_parser, message_text, safe_parse

log = structlog.get_logger()

PROSE_ONLY = "I'm sorry, I can't help with that."


# -- scripted baselines ----------------------------------------------------------------------------------


def _position(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(index of the current user turn, assistant turns since it) of a conversation so far."""
    user_turn, since = -1, 0
    for message in messages:
        if message.get("role") == "user":
            user_turn, since = user_turn + 1, 0
        elif message.get("role") == "assistant":
            since += 1
    return max(user_turn, 0), since


@attrs.frozen(kw_only=True)
class OracleConfig:
    closing: str = "Done."  # the prose answer once the reference has nothing left for this user turn


class OraclePolicy:
    """Plays the reference solution: for user turn ``k`` the reference's turns ``k``, in order."""

    name = "oracle"
    description = "Replays the task's reference solution (the upper bound)."
    Config = OracleConfig

    def __init__(self, config: OracleConfig = OracleConfig(), *, registry: Any = None) -> None:
        self.config = config
        self.reference: Any = None

    def begin(self, reference: Any) -> None:
        self.reference = reference

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        user_turn, step = _position(messages)
        turns = self.reference.turns if self.reference is not None else ()
        if user_turn < len(turns) and step < len(turns[user_turn]):
            return turns[user_turn][step]
        return PolicyTurn(content=self.config.closing)


@attrs.frozen(kw_only=True)
class NoCallConfig:
    reply: str = PROSE_ONLY


class NoCallPolicy:
    """Never calls a tool."""

    name = "no_call"
    description = "Never calls a tool, always answers in prose (the lower bound)."
    Config = NoCallConfig

    def __init__(self, config: NoCallConfig = NoCallConfig(), *, registry: Any = None) -> None:
        self.config = config

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        return PolicyTurn(content=self.config.reply)


@attrs.frozen(kw_only=True)
class SpammerConfig:
    calls_per_turn: int = attrs.field(default=3, validator=attrs.validators.gt(0))
    turns: int = attrs.field(default=3, validator=attrs.validators.gt(0))  # calling turns per user turn


_PLACEHOLDER = {"string": "x", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


def placeholder_call(tools: list[dict[str, Any]]) -> ToolCall | None:
    """A call of the first offered tool, its required parameters filled with placeholders."""
    for tool in tools:
        fn = tool.get("function", tool)
        if not isinstance(fn, dict) or not fn.get("name"):
            continue
        params = fn.get("parameters") or {}
        props = params.get("properties") or {}
        args = {k: _PLACEHOLDER.get(str((props.get(k) or {}).get("type")), "x") for k in params.get("required", [])}
        return ToolCall(id="spam", name=fn["name"], arguments=args)
    return None


class SpammerPolicy:
    """Repeats one call ``calls_per_turn`` times in each of ``turns`` assistant turns per user turn:
    the reference's first call when it has one (valid, but far over budget), else a placeholder."""

    name = "spammer"
    description = "Repeats one call several times per turn (what efficiency punishes)."
    Config = SpammerConfig

    def __init__(self, config: SpammerConfig = SpammerConfig(), *, registry: Any = None) -> None:
        self.config = config
        self.reference: Any = None

    def begin(self, reference: Any) -> None:
        self.reference = reference

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        _, step = _position(messages)
        calls = [a for a in (self.reference.calls if self.reference is not None else []) if isinstance(a, ToolCall)]
        call = calls[0] if calls else placeholder_call(tools)
        if call is None or step >= self.config.turns:
            return PolicyTurn(content="Done.")
        return PolicyTurn(attempts=[attrs.evolve(call, id=f"spam_{step}_{i}") for i in range(self.config.calls_per_turn)])


# -- an OpenAI-compatible endpoint ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OpenAIConfig:
    """Where the endpoint is and how to sample. ``parser``: read tool calls from the reply's text
    with this registered parser when the server returns no structured ``tool_calls``."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "default"
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key; local servers need none
    temperature: float = 0.0
    max_tokens: int = attrs.field(default=1024, validator=attrs.validators.gt(0))
    timeout_s: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    retries: int = attrs.field(default=2, validator=attrs.validators.ge(0))
    parser: str | None = None
    extra_body: dict[str, Any] = attrs.field(factory=dict)  # e.g. {chat_template_kwargs = {enable_thinking = false}}


def post_json(url: str, body: dict[str, Any], *, api_key_env: str, timeout_s: float, retries: int) -> dict[str, Any]:
    """POST JSON, return the decoded answer; retries connection errors and 5xx/429 answers."""
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(api_key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode()
    last, status = "", None
    for attempt in range(retries + 1):
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            last, status = f"HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}", exc.code
            if exc.code < 500 and exc.code != 429:
                break
        except (urllib.error.URLError, TimeoutError, json.JSONDecodeError, ConnectionError) as exc:
            last, status = str(exc), None
        if attempt < retries:
            time.sleep(min(2.0 ** attempt, 10.0))
    raise RequestFailed(f"endpoint {url} failed: {last}", status=status)


class OpenAIPolicy:
    """A model behind ``POST {base_url}/chat/completions`` with OpenAI tool calling."""

    name = "openai"
    description = "Any OpenAI-compatible /chat/completions endpoint (vLLM, SGLang, a hosted API)."
    Config = OpenAIConfig

    def __init__(self, config: OpenAIConfig = OpenAIConfig(), *, registry: Any = None) -> None:
        self.config = config
        self.parser = load_parser(_registry(registry), config.parser) if config.parser else None

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature,
                                "max_tokens": cfg.max_tokens, **cfg.extra_body}
        if tools:
            body["tools"] = tools
        payload = post_json(cfg.base_url.rstrip("/") + "/chat/completions", body, api_key_env=cfg.api_key_env,
                            timeout_s=cfg.timeout_s, retries=cfg.retries)
        try:
            message = payload["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise RequestFailed(f"endpoint {cfg.base_url} returned no choices: {str(payload)[:200]}") from None
        return turn_from_message(message, self.parser)


def turn_from_message(message: dict[str, Any], parser: Any = None) -> PolicyTurn:
    """A chat-completion ``message`` as a turn: its ``tool_calls`` decoded (arguments that are
    not JSON become parse failures), or its text parsed with ``parser`` when it has none. The
    text is ``content`` as a string or as OpenAI content parts (their text joined), as the
    reward reads it."""
    content = message_text(message.get("content")) or ""
    calls = message.get("tool_calls") or []
    if calls:
        attempts: tuple[Attempt, ...] = tuple(decode_openai_tool_call(c, index=i) for i, c in enumerate(calls))
        return PolicyTurn(content=content.strip(), attempts=attempts, raw=json.dumps(message, ensure_ascii=False))
    if parser is not None and content:
        parsed = safe_parse(parser, content)
        return PolicyTurn(content=parsed.content, attempts=parsed.attempts, raw=content)
    return PolicyTurn(content=content.strip(), raw=content)


# -- a local Hugging Face model --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class HFConfig:
    """A checkpoint folder (``save_pretrained`` output with its tokenizer and chat template)."""

    path: str
    parser: str = "hermes"
    max_new_tokens: int = attrs.field(default=256, validator=attrs.validators.gt(0))
    temperature: float = 0.0  # 0: greedy
    max_context: int = attrs.field(default=4096, validator=attrs.validators.gt(0))
    device: str = "cpu"


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI messages as chat templates expect them: tool-call arguments as objects, not JSON text
    (Qwen 2.5's template would quote a string a second time)."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            message = dict(message)
            fixed = []
            for call in calls:
                fn = dict(call.get("function", {}))
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except ValueError:
                        pass
                fixed.append({**call, "function": fn})
            message["tool_calls"] = fixed
        out.append(message)
    return out


class HFPolicy:
    """A local transformers model: ``prove_plugins.models.hf.HFPolicy`` (the one training samples with)
    loaded from a checkpoint folder; its chat template renders the turn and ``parser`` reads it."""

    name = "hf"
    description = "A local Hugging Face checkpoint (chat template, generate, a registered parser)."
    Config = HFConfig

    def __init__(self, config: HFConfig, *, registry: Any = None, model: Any = None, tokenizer: Any = None) -> None:
        try:
            from prove_plugins.models.hf import HFPolicy as Local
            from prove_plugins.models.hf import Sampling
        except ImportError:
            raise ProveError("the hf client needs torch and transformers: pip install torch==2.13.0 transformers") from None
        self.config = config
        if model is None or tokenizer is None:
            model, tokenizer = load_checkpoint(config.path, device=config.device)
        sampling = Sampling(max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                            max_context=config.max_context)
        self.local = Local(model, tokenizer, parser=load_parser(_registry(registry), config.parser), sampling=sampling,
                           name=self.name)

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        return self.local.respond(template_messages(messages), tools)


def load_checkpoint(path: str, *, device: str = "cpu") -> tuple[Any, Any]:
    """Model and tokenizer of a ``save_pretrained`` folder (no hub: a local path only)."""
    if not os.path.isdir(path):
        raise ProveError(f"hf model path {path!r} is not a folder (a save_pretrained checkpoint)")
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise ProveError("the hf client needs torch and transformers: pip install torch==2.13.0 transformers") from None
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).to(device)
    model.eval()
    return model, tokenizer


def _registry(registry: Any) -> Any:
    """The registry to look parsers up in: the one the loader passed, else the process-wide one."""
    if registry is None:
        from prove_core.plugin.manager import get_plugins

        registry = get_plugins().registry
    return registry


CLIENTS = (HFPolicy, OpenAIPolicy, OraclePolicy, NoCallPolicy, SpammerPolicy)


@hookimpl
def prove_register_clients(register: Any) -> None:
    for client in CLIENTS:
        register(client)
