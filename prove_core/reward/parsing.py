"""Tool-call parsing: the contract between raw model text and the calls a reward scores.

A parser (component kind ``parsers``) turns one assistant turn of raw text into a
``ParsedTurn``: the calls it found, in order, each a ``ToolCall`` or a typed ``ParseFailure``,
and the text left over. Parsers never raise on any input: malformed text becomes a
``ParseFailure`` that the validity reward scores as a call failing its first tier. The bundled
parsers (Hermes/Qwen, Llama 3, Mistral, Granite, OpenAI) live in ``prove_plugins.reward.parsers``::

    @hookimpl
    def prove_register_parsers(register):
        register(MyFormatParser)   # a class: ``name``, ``__init__(self, config)``, ``parse(text)``

This module also decodes OpenAI ``tool_calls`` entries, the structured form every chat API and
our JSONL files use, so the rollout reader and the ``openai`` parser share one decoder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import attrs

from prove_core.model import ToolCall

FailureKind = Literal["invalid_json", "not_a_call", "missing_name", "bad_arguments", "unterminated", "parser_error"]
SNIPPET_CHARS = 200


@attrs.frozen(kw_only=True)
class ParseFailure:
    """Text that tried to be a tool call and is not one. ``kind`` says why:

    - ``invalid_json``: the call's JSON does not decode;
    - ``not_a_call``: it decodes, but is not an object with a name and arguments;
    - ``missing_name``: no (non-empty string) tool name;
    - ``bad_arguments``: arguments are not a JSON object (or a string holding one);
    - ``unterminated``: an opening tag without its closing tag;
    - ``parser_error``: the parser itself crashed (a bug, reported instead of raised).
    """

    kind: FailureKind
    message: str
    text: str = ""  # the offending text, cut to SNIPPET_CHARS
    parser: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "text": self.text, "parser": self.parser}


Attempt = ToolCall | ParseFailure


class HasAttempts(Protocol):
    """Anything with an ``attempts`` sequence (what ``AttemptViews`` reads)."""

    @property
    def attempts(self) -> Sequence[Attempt]: ...


class AttemptViews:
    """``calls`` and ``failures`` of a class with an ``attempts`` sequence (a turn, a rollout)."""

    @property
    def calls(self: HasAttempts) -> list[ToolCall]:
        return [a for a in self.attempts if isinstance(a, ToolCall)]

    @property
    def failures(self: HasAttempts) -> list[ParseFailure]:
        return [a for a in self.attempts if isinstance(a, ParseFailure)]


@attrs.frozen(kw_only=True)
class ParsedTurn(AttemptViews):
    """What a parser found in one assistant turn: attempted calls in order, and the prose."""

    attempts: tuple[Attempt, ...] = ()
    content: str = ""


class Parser(Protocol):
    """A registered parser: ``name`` and ``parse(text) -> ParsedTurn``; must never raise."""

    name: str

    def parse(self, text: str) -> ParsedTurn: ...


def snippet(text: Any) -> str:
    shown = text if isinstance(text, str) else repr(text)
    return shown if len(shown) <= SNIPPET_CHARS else shown[: SNIPPET_CHARS - 3] + "..."


def loads(text: str) -> tuple[Any, str | None]:
    """``json.loads`` that reports instead of raising (deeply nested input raises RecursionError)."""
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def call_from_object(
    obj: Any, *, index: int, parser: str, raw: str = "", args_keys: tuple[str, ...] = ("arguments", "parameters")
) -> Attempt:
    """A ``ToolCall`` from a decoded ``{"name": ..., "arguments": {...}}`` object (the shape every
    JSON tool-call format shares); ``arguments`` may also be a string holding a JSON object."""
    raw = raw or _dump(obj)
    if not isinstance(obj, dict):
        return ParseFailure(kind="not_a_call", message=f"expected a JSON object, got {type(obj).__name__}",
                            text=snippet(raw), parser=parser)
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ParseFailure(kind="missing_name", message="the call has no tool name", text=snippet(raw), parser=parser)
    key = next((k for k in args_keys if k in obj), None)
    arguments = obj.get(key) if key else {}
    arguments = {} if arguments is None else arguments
    if isinstance(arguments, str):
        decoded, error = loads(arguments) if arguments.strip() else ({}, None)
        if error is not None:
            return ParseFailure(kind="bad_arguments", message=f"arguments string is not JSON ({error})",
                                text=snippet(raw), parser=parser)
        arguments = decoded
    if not isinstance(arguments, dict):
        return ParseFailure(kind="bad_arguments", message=f"arguments must be a JSON object, got {type(arguments).__name__}",
                            text=snippet(raw), parser=parser)
    call_id = obj.get("id")
    return ToolCall(id=call_id if isinstance(call_id, str) and call_id else f"call_{index}", name=name.strip(),
                    arguments=arguments)


def decode_openai_tool_call(entry: Any, *, index: int, parser: str = "openai") -> Attempt:
    """One OpenAI ``tool_calls`` entry (``{"id", "type": "function", "function": {"name",
    "arguments": "<json string>"}}``); a bare ``{"name", "arguments"}`` object is accepted too."""
    if isinstance(entry, dict) and isinstance(entry.get("function"), dict):
        fn = entry["function"]
        merged = {"name": fn.get("name"), "arguments": fn.get("arguments")}
        if isinstance(entry.get("id"), str):
            merged["id"] = entry["id"]
        return call_from_object(merged, index=index, parser=parser, raw=_dump(entry), args_keys=("arguments",))
    return call_from_object(entry, index=index, parser=parser)


def message_text(content: Any) -> str | None:
    """The text of an OpenAI message ``content``: a string as is, or a list of content parts
    (``{"type": "text", "text": ...}``, ``{"type": "refusal", "refusal": ...}``, or bare strings)
    joined with new lines, other parts (images, audio) left out; ``""`` for ``None``. ``None``
    for anything else (a number, an object), which a caller reports as not text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            kind = part.get("type", "text")
            value = part.get("refusal") if kind == "refusal" else part.get("text") if kind == "text" else None
            if isinstance(value, str):
                texts.append(value)
    return "\n".join(texts)


def _dump(obj: Any) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        return repr(obj)[:SNIPPET_CHARS]


def safe_parse(parser: Parser, text: Any) -> ParsedTurn:
    """Run a parser on one turn; a crash (a parser bug) becomes a ``parser_error`` failure, so
    scoring a batch never dies on one bad completion."""
    if not isinstance(text, str):
        return ParsedTurn(attempts=(ParseFailure(kind="not_a_call", message=f"completion must be text, got "
                                                 f"{type(text).__name__}", text=snippet(text),
                                                 parser=getattr(parser, "name", "?")),))
    try:
        turn = parser.parse(text)
    except Exception as exc:  # a third-party parser bug must not take a training run down
        return ParsedTurn(attempts=(ParseFailure(kind="parser_error", message=f"{type(exc).__name__}: {exc}",
                                                 text=snippet(text), parser=getattr(parser, "name", "?")),))
    if not isinstance(turn, ParsedTurn):
        return ParsedTurn(attempts=(ParseFailure(kind="parser_error", message=f"parser returned {type(turn).__name__}, "
                                                 "not ParsedTurn", text=snippet(text),
                                                 parser=getattr(parser, "name", "?")),))
    return turn


def load_parser(registry: Any, name: str) -> Parser:
    """An instance of the parser registered as ``name`` (an alias works too), built by the
    registry's loader; parsers take no options."""
    parser: Parser = registry.build("parsers", name)
    return parser
