"""Model clients: policies (``prove_core.reward.rollout.Policy``) that evaluators and rollouts play.

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

**Request settings.** A setting left out of a client's options (``temperature``, the length of a
reply) takes the client's default, unless the benchmark asks for its own: an evaluator that runs a
benchmark the way the benchmark's own harness does passes ``RequestDefaults`` to ``configured``
(BFCL: temperature 0.001, no ``max_tokens`` for an endpoint, what the context leaves up to 4,096
tokens for a local checkpoint, as BFCL's handlers do). A setting given in the options always wins.
``RequestDefaults.text_only`` is a prompting protocol: no tools are sent, and the reply's text is
returned unparsed for the benchmark to decode.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

import attrs
import structlog

from prove_core import hookimpl
from prove_core.errors import ProveError, RequestFailed
from prove_core.model import ToolCall
from prove_core.reward.parsing import Attempt, decode_openai_tool_call, load_parser, message_text, safe_parse
from prove_core.reward.rollout import PolicyTurn

log = structlog.get_logger()

PROSE_ONLY = "I'm sorry, I can't help with that."
DEFAULT_TEMPERATURE = 0.0  # when neither the options nor the benchmark set one
DEFAULT_MAX_TOKENS = 1024  # an endpoint's reply length when neither the options nor the benchmark set one
DEFAULT_MAX_NEW_TOKENS = 256  # the same for a local checkpoint


@attrs.frozen(kw_only=True)
class RequestDefaults:
    """What a benchmark asks of a client for the settings its options leave unset.

    ``temperature``: ``None`` keeps the client's default. ``max_tokens``: a fixed reply length, or
    ``None`` for none: an endpoint is sent no ``max_tokens`` (it applies its own), a local checkpoint
    generates what its context leaves after the prompt, less 2, at most ``cap`` tokens (BFCL's rule
    for local models, ``OSSHandler._query_prompting``). ``text_only``: a prompting protocol: no tools
    in the request, the reply's text returned as it is (``content`` and ``raw``), not parsed.
    ``seed``: a sampling seed (an endpoint is sent ``seed``; a local checkpoint seeds torch before
    each generation)."""

    temperature: float | None = None
    max_tokens: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    cap: int = attrs.field(default=4096, validator=attrs.validators.gt(0))
    text_only: bool = False
    seed: int | None = None


def configured(policy: Any, defaults: RequestDefaults) -> Any:
    """``policy`` with a benchmark's request defaults: a copy from its ``configured`` method when it
    has one (the bundled ``openai`` and ``hf`` clients), else the policy itself."""
    method = getattr(policy, "configured", None)
    return method(defaults) if callable(method) else policy


@attrs.frozen(kw_only=True)
class ChatTurn(PolicyTurn):
    """A turn read from a chat-completion ``message``, which it keeps as the endpoint sent it: an
    evaluator that follows a benchmark's own client (BFCL's) reads the reply as that client does."""

    message: dict[str, Any] = attrs.field(factory=dict)


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
    with this registered parser when the server returns no structured ``tool_calls``.
    ``temperature`` and ``max_tokens`` left unset (``None``) take the benchmark's request defaults
    where it has them (``RequestDefaults``), else 0.0 and 1024."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "default"
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key; local servers need none
    temperature: float | None = None
    max_tokens: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    timeout_s: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    retries: int = attrs.field(default=2, validator=attrs.validators.ge(0))
    parser: str | None = None
    extra_body: dict[str, Any] = attrs.field(factory=dict)  # e.g. {chat_template_kwargs = {enable_thinking = false}}


def post_json(url: str, body: dict[str, Any], *, api_key_env: str, timeout_s: float, retries: int,
              backoff_s: float = 1.0) -> dict[str, Any]:
    """POST JSON, return the decoded answer; retries timeouts, connection errors and 5xx/429
    answers, waiting ``backoff_s``, then twice as long each time (at most 10 s)."""
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
        except (urllib.error.URLError, TimeoutError, json.JSONDecodeError, ConnectionError, http.client.HTTPException) as exc:
            last, status = str(exc) or type(exc).__name__, None
        if attempt < retries:
            time.sleep(min(backoff_s * 2.0 ** attempt, 10.0))
    raise RequestFailed(f"endpoint {url} failed: {last}", status=status)


class OpenAIPolicy:
    """A model behind ``POST {base_url}/chat/completions`` with OpenAI tool calling."""

    name = "openai"
    description = "Any OpenAI-compatible /chat/completions endpoint (vLLM, SGLang, a hosted API)."
    Config = OpenAIConfig

    def __init__(self, config: OpenAIConfig = OpenAIConfig(), *, registry: Any = None) -> None:
        self.config = config
        self.parser = load_parser(_registry(registry), config.parser) if config.parser else None
        self.defaults: RequestDefaults | None = None

    def configured(self, defaults: RequestDefaults) -> OpenAIPolicy:
        clone = copy.copy(self)
        clone.defaults = defaults
        return clone

    def settings(self) -> dict[str, Any]:
        """The sampling settings a request carries: the options', else the benchmark's, else the defaults."""
        cfg, bench = self.config, self.defaults
        temperature = next((t for t in (cfg.temperature, bench.temperature if bench else None) if t is not None),
                           DEFAULT_TEMPERATURE)
        out: dict[str, Any] = {"temperature": temperature}
        if cfg.max_tokens is not None:
            out["max_tokens"] = cfg.max_tokens
        elif bench is None:
            out["max_tokens"] = DEFAULT_MAX_TOKENS
        elif bench.max_tokens is not None:
            out["max_tokens"] = bench.max_tokens
        if bench is not None and bench.seed is not None:
            out["seed"] = bench.seed
        return out  # a benchmark without a length of its own: the endpoint's default, as its harness leaves it

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        cfg = self.config
        text_only = self.defaults is not None and self.defaults.text_only
        body: dict[str, Any] = {"model": cfg.model, "messages": messages, **self.settings(), **cfg.extra_body}
        if tools and not text_only:
            body["tools"] = tools
        payload = post_json(cfg.base_url.rstrip("/") + "/chat/completions", body, api_key_env=cfg.api_key_env,
                            timeout_s=cfg.timeout_s, retries=cfg.retries)
        try:
            message = payload["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise RequestFailed(f"endpoint {cfg.base_url} returned no choices: {str(payload)[:200]}") from None
        if not isinstance(message, dict):
            raise RequestFailed(f"endpoint {cfg.base_url} returned a message that is not an object: {str(message)[:200]}")
        return turn_from_message(message, self.parser, text_only=text_only)


def turn_from_message(message: dict[str, Any], parser: Any = None, *, text_only: bool = False) -> ChatTurn:
    """A chat-completion ``message`` as a turn (a ``ChatTurn`` keeping the message): its
    ``tool_calls`` decoded (arguments that are not JSON become parse failures), or its text parsed
    with ``parser`` when it has none. The text is ``content`` as a string or as OpenAI content parts
    (their text joined), as the reward reads it. ``text_only``: the text as it is, nothing parsed."""
    content = message_text(message.get("content")) or ""
    if text_only:
        return ChatTurn(content=content.strip(), raw=content, message=message)
    calls = message.get("tool_calls") or []
    if calls:
        attempts: tuple[Attempt, ...] = tuple(decode_openai_tool_call(c, index=i) for i, c in enumerate(calls))
        return ChatTurn(content=content.strip(), attempts=attempts, raw=json.dumps(message, ensure_ascii=False),
                        message=message)
    if parser is not None and content:
        parsed = safe_parse(parser, content)
        return ChatTurn(content=parsed.content, attempts=parsed.attempts, raw=content, message=message)
    return ChatTurn(content=content.strip(), raw=content, message=message)


# -- a local Hugging Face model --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class HFConfig:
    """A checkpoint folder (``path``: ``save_pretrained`` output with its tokenizer and chat template)
    or a named pretrained ``source`` (``smollm2-135m-instruct``, converted once into the cache:
    ``prove_plugins.train.models.sources``). A chat template that cannot render tool use is
    replaced by PROVE's ChatML + Hermes template, with a warning. ``max_new_tokens`` and
    ``temperature`` left unset (``None``) take the benchmark's request
    defaults where it has them (``RequestDefaults``), else 256 and 0.0 (greedy). ``max_context``
    left unset is the model's own context length, read from its config (``max_position_embeddings``
    and its aliases, else the tokenizer's ``model_max_length``); a prompt that does not fit is refused
    with ``RequestFailed``."""

    path: str | None = None
    source: str | None = None
    parser: str = "hermes"
    max_new_tokens: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    temperature: float | None = None
    max_context: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    device: str = "cpu"

    def __attrs_post_init__(self) -> None:
        if (self.path is None) == (self.source is None):
            raise ValueError("give the model as path (a checkpoint folder) or source (a named model), one of them")

    @property
    def label(self) -> str:
        return self.path or f"source {self.source}"


_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx", "max_seq_len")


def context_length(model: Any, tokenizer: Any = None) -> int | None:
    """The number of positions ``model`` attends to: its config's ``max_position_embeddings`` (or
    an alias; a multimodal config's ``text_config``), else the tokenizer's ``model_max_length``
    when it is a real limit (transformers puts a huge placeholder there when it knows none), as
    BFCL reads it for local models; ``None`` when neither says."""
    config = getattr(model, "config", None)
    for cfg in (config, getattr(config, "text_config", None)):
        for key in _CONTEXT_KEYS:
            value = getattr(cfg, key, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 10**9:
        return limit
    return None


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
    """A local transformers model: ``prove_plugins.train.models.hf.HFPolicy`` (the one training samples with)
    loaded from a checkpoint folder; its chat template renders the turn and ``parser`` reads it."""

    name = "hf"
    description = "A local Hugging Face checkpoint (chat template, generate, a registered parser)."
    Config = HFConfig
    requires = ("torch", "transformers")  # checked before any stage runs
    install = "pip install torch==2.13.0 transformers"

    def __init__(self, config: HFConfig, *, registry: Any = None, model: Any = None, tokenizer: Any = None) -> None:
        try:
            from prove_plugins.train.models import hf  # noqa: F401 - torch and transformers
        except ImportError:
            raise ProveError("the hf client needs torch and transformers: pip install torch==2.13.0 transformers") from None
        self.config = config
        if model is None or tokenizer is None:
            path = config.path
            if config.source is not None:
                from prove_plugins.train.models.sources import materialize

                path = str(materialize(config.source, echo=lambda line: log.info(line)))
            model, tokenizer = load_checkpoint(path, device=config.device)
        own = context_length(model, tokenizer)
        if config.max_context is not None and own is not None and config.max_context > own:
            raise ProveError(f"hf model {config.label}: max_context {config.max_context} is more than the model's own "
                             f"context length ({own} positions)")
        context = config.max_context or own
        if context is None:
            raise ProveError(f"hf model {config.label}: its config states no context length (max_position_embeddings) "
                             "and its tokenizer no model_max_length: set the client's max_context option")
        self.context = context
        self.model, self.tokenizer = model, tokenizer
        self.parser = load_parser(_registry(registry), config.parser)
        self.defaults: RequestDefaults | None = None
        self.local = self._local()

    def _local(self) -> Any:
        from prove_plugins.train.models.hf import HFPolicy as Local
        from prove_plugins.train.models.hf import Sampling

        cfg, bench = self.config, self.defaults
        temperature = next((t for t in (cfg.temperature, bench.temperature if bench else None) if t is not None),
                           DEFAULT_TEMPERATURE)
        fit = cfg.max_new_tokens is None and bench is not None and bench.max_tokens is None
        length = cfg.max_new_tokens or (bench.max_tokens if bench else None) or DEFAULT_MAX_NEW_TOKENS
        sampling = Sampling(max_new_tokens=length, temperature=temperature, max_context=self.context,
                            fit_cap=bench.cap if fit and bench else None, seed=bench.seed if bench else None)
        return Local(self.model, self.tokenizer, parser=self.parser, sampling=sampling, name=self.name,
                     text_only=bool(bench and bench.text_only))

    def configured(self, defaults: RequestDefaults) -> HFPolicy:
        clone = copy.copy(self)
        clone.defaults = defaults
        clone.local = clone._local()
        return clone

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
    from prove_plugins.train.models.template import apply_tool_settings, stop_at_turn_end

    tokenizer = AutoTokenizer.from_pretrained(path)
    apply_tool_settings(tokenizer, None, None, echo=lambda line: log.warning(line), name=path)
    model = AutoModelForCausalLM.from_pretrained(path).to(device)
    stop_at_turn_end(model, tokenizer)
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
