"""Bundled tool-call parsers for the common chat formats. Each turns one assistant turn of raw
text into calls and typed parse failures (``prove_core.reward.parsing``) and never raises.

=========  ==============================================================================
hermes     Hermes / Qwen 2.5 / Qwen 3: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
           (one block per call; a final block missing its closing tag is accepted if it decodes)
llama3     Llama 3.1 JSON tool calling: ``{"name": ..., "parameters": {...}}``, optionally after
           ``<|python_tag|>``, several separated by ``;`` or new lines, or a JSON list of them
mistral    ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]`` and the v11 form
           ``[TOOL_CALLS]name[ARGS]{...}`` (``[CALL_ID]id`` optional)
granite    Granite 3: ``<|tool_call|>[{"name": ..., "arguments": {...}}]``
openai     JSON of OpenAI ``tool_calls``: a list of entries, one entry, or an assistant message
           ``{"content": ..., "tool_calls": [...]}``
=========  ==============================================================================
"""

from __future__ import annotations

import json
from typing import Any

from prove_core import hookimpl
from prove_core.reward.parsing import (
    Attempt,
    ParsedTurn,
    ParseFailure,
    call_from_object,
    decode_openai_tool_call,
    loads,
    message_text,
    snippet,
)

_DECODER = json.JSONDecoder()
_SEPARATORS = " \t\r\n;,"
_END_TOKENS = ("<|eom_id|>", "<|eot_id|>", "<|end_of_text|>", "</s>", "<|im_end|>", "<|end_of_role|>")


def _raw_decode(text: str, start: int) -> tuple[Any, int, str | None]:
    """Decode one JSON value at ``start``; returns (value, end, error)."""
    try:
        value, end = _DECODER.raw_decode(text, start)
        return value, end, None
    except (ValueError, RecursionError) as exc:
        return None, start, f"{type(exc).__name__}: {exc}"


def _strip_end_tokens(text: str) -> str:
    text = text.strip()
    changed = True
    while changed:
        changed = False
        for token in _END_TOKENS:
            if text.endswith(token):
                text, changed = text[: -len(token)].rstrip(), True
    return text


def _calls_from_value(value: Any, *, start: int, parser: str, raw: str) -> list[Attempt]:
    """A decoded value holding one call object or a list of them."""
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not value:
        return [ParseFailure(kind="not_a_call", message="an empty list of calls", text=snippet(raw), parser=parser)]
    return [call_from_object(item, index=start + i, parser=parser) for i, item in enumerate(items)]


def _json_calls(body: str, *, parser: str, start: int = 0) -> tuple[list[Attempt], str]:
    """Every JSON value in ``body`` (separated by spaces, ``;`` or ``,``) as calls. Text after
    the last value that is not JSON is returned as prose; text that starts like JSON and does
    not decode is a failure."""
    attempts: list[Attempt] = []
    pos, n = 0, len(body)
    while pos < n:
        while pos < n and body[pos] in _SEPARATORS:
            pos += 1
        if pos >= n:
            break
        if body[pos] not in "{[":
            return attempts, body[pos:].strip()
        value, end, error = _raw_decode(body, pos)
        if error is not None:
            attempts.append(ParseFailure(kind="invalid_json", message=error, text=snippet(body[pos:]), parser=parser))
            return attempts, ""
        attempts.extend(_calls_from_value(value, start=start + len(attempts), parser=parser, raw=body[pos:end]))
        pos = end
    return attempts, ""


class _Parser:
    """The construction every parser shares: parsers take no options (no ``Config``), and the
    registry's loader builds them as ``cls(NoConfig())``."""

    name: str

    def __init__(self, config: Any = None) -> None:
        self.config = config


class Hermes(_Parser):
    """Hermes / Qwen: ``<tool_call>{json}</tool_call>`` blocks."""

    name = "hermes"
    OPEN, CLOSE = "<tool_call>", "</tool_call>"

    def parse(self, text: str) -> ParsedTurn:
        attempts: list[Attempt] = []
        prose: list[str] = []
        pos = 0
        while True:
            start = text.find(self.OPEN, pos)
            if start < 0:
                prose.append(text[pos:])
                break
            prose.append(text[pos:start])
            body_start = start + len(self.OPEN)
            end = text.find(self.CLOSE, body_start)
            body = text[body_start:] if end < 0 else text[body_start:end]
            attempts.append(self._block(_strip_end_tokens(body), len(attempts), terminated=end >= 0))
            if end < 0:
                break
            pos = end + len(self.CLOSE)
        content = "".join(prose).replace(self.CLOSE, "")
        return ParsedTurn(attempts=tuple(attempts), content=_strip_end_tokens(content))

    def _block(self, body: str, index: int, *, terminated: bool) -> Attempt:
        value, error = loads(body)
        if error is not None:
            kind = "invalid_json" if terminated else "unterminated"
            why = error if terminated else f"<tool_call> without </tool_call>, and its text is not JSON ({error})"
            return ParseFailure(kind=kind, message=why, text=snippet(body), parser=self.name)
        return call_from_object(value, index=index, parser=self.name, raw=body)


class Llama3(_Parser):
    """Llama 3.1 JSON tool calls, bare or after ``<|python_tag|>``."""

    name = "llama3"
    TAG = "<|python_tag|>"

    def parse(self, text: str) -> ParsedTurn:
        text = _strip_end_tokens(text)
        tag = text.find(self.TAG)
        if tag >= 0:
            content, body = text[:tag].strip(), text[tag + len(self.TAG):].strip()
            if not body:
                return ParsedTurn(attempts=(ParseFailure(kind="not_a_call", message="<|python_tag|> with nothing after it",
                                                         parser=self.name),), content=content)
            if body[0] not in "{[":
                # A python_tag call that is not JSON (built-in tools' Python code): not a JSON call.
                return ParsedTurn(attempts=(ParseFailure(kind="not_a_call", message="<|python_tag|> is not followed by "
                                                         "a JSON call", text=snippet(body), parser=self.name),),
                                  content=content)
            attempts, rest = _json_calls(body, parser=self.name)
            return ParsedTurn(attempts=tuple(attempts), content="\n".join(p for p in (content, rest) if p))
        body = text.strip()
        if not body or body[0] not in "{[":
            return ParsedTurn(content=body)
        attempts, rest = _json_calls(body, parser=self.name)
        return ParsedTurn(attempts=tuple(attempts), content=rest)


class Mistral(_Parser):
    """Mistral ``[TOOL_CALLS]``: a JSON list of calls, or ``name[ARGS]{json}`` (v11 tokenizers)."""

    name = "mistral"
    TAG = "[TOOL_CALLS]"

    def parse(self, text: str) -> ParsedTurn:
        text = _strip_end_tokens(text)
        first = text.find(self.TAG)
        if first < 0:
            return ParsedTurn(content=text.strip())
        attempts: list[Attempt] = []
        prose = [text[:first].strip()]
        for segment in text[first + len(self.TAG):].split(self.TAG):
            segment = segment.strip()
            if not segment:
                attempts.append(ParseFailure(kind="not_a_call", message="[TOOL_CALLS] with nothing after it",
                                             parser=self.name))
            elif "[ARGS]" in segment:
                attempts.append(self._v11(segment, len(attempts)))
            else:
                found, rest = _json_calls(segment, parser=self.name, start=len(attempts))
                if not found:
                    found = [ParseFailure(kind="not_a_call", message="[TOOL_CALLS] is not followed by calls",
                                          text=snippet(segment), parser=self.name)]
                    rest = ""
                attempts.extend(found)
                prose.append(rest)
        return ParsedTurn(attempts=tuple(attempts), content="\n".join(p for p in prose if p))

    def _v11(self, segment: str, index: int) -> Attempt:
        head, _, args_text = segment.partition("[ARGS]")
        name, _, call_id = head.partition("[CALL_ID]")
        args_text = args_text.strip()
        value, _end, error = _raw_decode(args_text, 0)
        if error is not None:
            return ParseFailure(kind="bad_arguments", message=f"[ARGS] is not JSON ({error})", text=snippet(segment),
                                parser=self.name)
        obj: dict[str, Any] = {"name": name.strip(), "arguments": value}
        if call_id.strip():
            obj["id"] = call_id.strip()
        return call_from_object(obj, index=index, parser=self.name, raw=segment)


class Granite(_Parser):
    """Granite 3: ``<|tool_call|>`` followed by a JSON list of calls (or one call)."""

    name = "granite"
    TAG = "<|tool_call|>"

    def parse(self, text: str) -> ParsedTurn:
        text = _strip_end_tokens(text)
        first = text.find(self.TAG)
        if first < 0:
            return ParsedTurn(content=text.strip())
        attempts: list[Attempt] = []
        prose = [text[:first].strip()]
        for segment in text[first + len(self.TAG):].split(self.TAG):
            segment = segment.strip()
            found, rest = _json_calls(segment, parser=self.name, start=len(attempts)) if segment else ([], "")
            if not found:
                found = [ParseFailure(kind="not_a_call", message="<|tool_call|> is not followed by JSON calls",
                                      text=snippet(segment), parser=self.name)]
                rest = ""
            attempts.extend(found)
            prose.append(rest)
        return ParsedTurn(attempts=tuple(attempts), content="\n".join(p for p in prose if p))


class OpenAI(_Parser):
    """JSON of OpenAI ``tool_calls``: a list of entries, one entry, or an assistant message (its
    ``content`` a string or a list of content parts; without ``tool_calls`` it is prose)."""

    name = "openai"

    def parse(self, text: str) -> ParsedTurn:
        body = text.strip()
        if not body or body[0] not in "{[":
            return ParsedTurn(content=body)
        value, error = loads(body)
        if error is not None:
            return ParsedTurn(attempts=(ParseFailure(kind="invalid_json", message=error, text=snippet(body),
                                                     parser=self.name),))
        content = ""
        if isinstance(value, dict) and isinstance(value.get("message"), dict):
            value = value["message"]  # a chat-completion choice
        if isinstance(value, dict) and value.get("role") == "assistant" and "tool_calls" not in value:
            value = {**value, "tool_calls": []}  # an assistant message that only talks
        if isinstance(value, dict) and "tool_calls" in value:
            content = message_text(value.get("content")) or ""  # a string or OpenAI content parts
            value = value["tool_calls"] or []
            if not isinstance(value, list):
                value = [value]
        entries = value if isinstance(value, list) else [value]
        attempts = tuple(decode_openai_tool_call(entry, index=i, parser=self.name) for i, entry in enumerate(entries))
        return ParsedTurn(attempts=attempts, content=content)


PARSERS = (Hermes, Llama3, Mistral, Granite, OpenAI)
ALIASES = {"qwen": Hermes}


@hookimpl
def prove_register_parsers(register: Any) -> None:
    for parser in PARSERS:
        register(parser)
    for alias, parser in ALIASES.items():
        register(parser, name=alias, summary=f"alias of {parser.name}: {parser.__doc__.strip().splitlines()[0]}")
