"""Tool-call parsers: round-trips per chat format, typed failures on malformed text, fuzzing."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prove_core.model import ToolCall
from prove_core.reward.parsing import ParsedTurn, ParseFailure, safe_parse
from prove_plugins.reward.parsers import ALIASES, PARSERS, Granite, Hermes, Llama3, Mistral, OpenAI
from tests.support.reward_tasks import registry


def render_hermes(calls, prose=""):
    blocks = "".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>\n" for n, a in calls)
    return f"{prose}\n{blocks}" if prose else blocks


def render_llama3(calls, prose=""):
    body = "; ".join(json.dumps({"name": n, "parameters": a}) for n, a in calls)
    return f"{prose}<|python_tag|>{body}<|eom_id|>" if prose else body


def render_mistral(calls, prose=""):
    return f"{prose}[TOOL_CALLS]{json.dumps([{'name': n, 'arguments': a} for n, a in calls])}</s>"


def render_mistral_v11(calls, prose=""):
    return prose + "".join(f"[TOOL_CALLS]{n}[ARGS]{json.dumps(a)}" for n, a in calls)


def render_granite(calls, prose=""):
    return f"{prose}<|tool_call|>{json.dumps([{'name': n, 'arguments': a} for n, a in calls])}"


def render_openai(calls, prose=""):
    entries = [ToolCall(id=f"id{i}", name=n, arguments=a).to_openai() for i, (n, a) in enumerate(calls)]
    return json.dumps({"role": "assistant", "content": prose or None, "tool_calls": entries})


RENDERERS = {
    "hermes": (Hermes, render_hermes),
    "llama3": (Llama3, render_llama3),
    "mistral": (Mistral, render_mistral),
    "mistral_v11": (Mistral, render_mistral_v11),
    "granite": (Granite, render_granite),
    "openai": (OpenAI, render_openai),
}

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**9, 10**9) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
ARGS = st.dictionaries(st.text(min_size=1, max_size=10), JSON, max_size=4)
CALLS = st.lists(st.tuples(NAMES, ARGS), min_size=1, max_size=4)


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
@settings(max_examples=60, deadline=None)
@given(calls=CALLS)
def test_rendered_calls_parse_back_exactly(fmt, calls):
    parser_cls, render = RENDERERS[fmt]
    turn = parser_cls().parse(render(calls))
    assert not turn.failures, turn.failures
    assert [(c.name, c.arguments) for c in turn.calls] == [(n, a) for n, a in calls]


@pytest.mark.parametrize("fmt", ["hermes", "llama3", "mistral", "granite", "openai"])
def test_prose_is_kept_apart_from_calls(fmt):
    parser_cls, render = RENDERERS[fmt]
    turn = parser_cls().parse(render([("get_balance", {"account_id": "acc_1"})], prose="Let me check."))
    assert [c.name for c in turn.calls] == ["get_balance"]
    assert turn.content == "Let me check."


@pytest.mark.parametrize("parser_cls", PARSERS)
def test_plain_prose_has_no_calls(parser_cls):
    turn = parser_cls().parse("Your balance is $12.40. Anything else?")
    assert turn.attempts == () and "balance" in turn.content


MALFORMED = [
    (Hermes, "<tool_call>{not json}</tool_call>", "invalid_json"),
    (Hermes, "<tool_call>{\"name\": \"x\", \"arguments\": {", "unterminated"),
    (Hermes, "<tool_call>{\"arguments\": {}}</tool_call>", "missing_name"),
    (Hermes, "<tool_call>{\"name\": \"x\", \"arguments\": [1]}</tool_call>", "bad_arguments"),
    (Hermes, "<tool_call>{\"name\": \"x\", \"arguments\": \"{oops\"}</tool_call>", "bad_arguments"),
    (Hermes, "<tool_call>[1, 2]</tool_call>", "not_a_call"),
    (Hermes, "<tool_call>" + "[" * 100_000 + "</tool_call>", "invalid_json"),
    (Llama3, "<|python_tag|>{\"name\": \"x\", \"parameters\": ", "invalid_json"),
    (Llama3, "<|python_tag|>", "not_a_call"),
    (Llama3, "<|python_tag|>print('hello')", "not_a_call"),
    (Llama3, "{\"parameters\": {}}", "missing_name"),
    (Mistral, "[TOOL_CALLS]", "not_a_call"),
    (Mistral, "[TOOL_CALLS][{\"name\": \"x\", \"arguments\": {]", "invalid_json"),
    (Mistral, "[TOOL_CALLS]get_balance[ARGS]{broken", "bad_arguments"),
    (Mistral, "[TOOL_CALLS][ARGS]{}", "missing_name"),
    (Granite, "<|tool_call|>not json at all", "not_a_call"),
    (Granite, "<|tool_call|>[{\"name\": 3}]", "missing_name"),
    (OpenAI, "[{\"function\": {\"name\": \"x\", \"arguments\": \"{bad\"}}]", "bad_arguments"),
    (OpenAI, "{\"tool_calls\": [{\"function\": {\"arguments\": \"{}\"}}]}", "missing_name"),
    (OpenAI, "[{\"function\": ", "invalid_json"),
]


@pytest.mark.parametrize("parser_cls, text, kind", MALFORMED)
def test_malformed_text_is_a_typed_failure(parser_cls, text, kind):
    turn = parser_cls().parse(text)
    kinds = [f.kind for f in turn.failures]
    assert kind in kinds, (kinds, turn)
    assert all(isinstance(f, ParseFailure) and f.parser == parser_cls.name and f.message for f in turn.failures)


def test_a_good_call_next_to_a_bad_one_keeps_both_in_order():
    text = ('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{oops}</tool_call>'
            '<tool_call>{"name": "b", "arguments": {"k": 1}}</tool_call>')
    turn = Hermes().parse(text)
    assert [a.name if isinstance(a, ToolCall) else a.kind for a in turn.attempts] == ["a", "invalid_json", "b"]
    assert [c.id for c in turn.calls] == ["call_0", "call_2"]


def test_llama3_accepts_a_list_and_arguments_key():
    turn = Llama3().parse('[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "parameters": {}}]')
    assert [(c.name, c.arguments) for c in turn.calls] == [("a", {"x": 1}), ("b", {})]


def test_mistral_v11_call_ids():
    turn = Mistral().parse('[TOOL_CALLS]get_balance[CALL_ID]abc123def[ARGS]{"account_id": "acc_1"}')
    (call,) = turn.calls
    assert call.id == "abc123def" and call.arguments == {"account_id": "acc_1"}


def test_openai_accepts_a_chat_completion_choice():
    choice = {"message": {"role": "assistant", "content": "ok", "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "x", "arguments": "{\"a\": 1}"}}]}}
    turn = OpenAI().parse(json.dumps(choice))
    assert turn.calls == [ToolCall(id="call_9", name="x", arguments={"a": 1})] and turn.content == "ok"


def test_parsers_are_registered_with_aliases():
    names = registry().names("parsers")
    assert {"hermes", "qwen", "llama3", "mistral", "granite", "openai"} <= set(names)
    assert registry().load("parsers", "qwen") is ALIASES["qwen"]


def test_safe_parse_turns_a_crashing_parser_into_a_failure():
    class Crashes:
        name = "crashes"

        def parse(self, text):
            raise KeyError("boom")

    (failure,) = safe_parse(Crashes(), "x").attempts
    assert failure.kind == "parser_error" and "boom" in failure.message
    (failure,) = safe_parse(Hermes(), None).attempts
    assert failure.kind == "not_a_call"


TAGS = ["<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|tool_call|>",
        "{", "}", "[", "]", '"name"', '"arguments"', ":", ",", '"', "\\", "<|eom_id|>", "</s>", "\x00", "\ud800"]
FUZZ = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=8)), max_size=40).map("".join),
    st.builds(lambda tag, value, cut: tag + json.dumps(value)[:cut], st.sampled_from(TAGS[:8] + [""]),
              st.one_of(JSON, st.fixed_dictionaries({"name": JSON, "arguments": JSON}),
                        st.lists(st.fixed_dictionaries({"name": JSON, "parameters": JSON}), max_size=3)),
              st.integers(0, 200)),
)


@pytest.mark.parametrize("parser_cls", PARSERS)
@settings(max_examples=300, deadline=None)
@given(text=FUZZ)
def test_parsers_never_raise(parser_cls, text):
    turn = parser_cls().parse(text)
    assert isinstance(turn, ParsedTurn) and isinstance(turn.content, str)
    for attempt in turn.attempts:
        if isinstance(attempt, ToolCall):
            assert isinstance(attempt.name, str) and attempt.name and isinstance(attempt.arguments, dict)
        else:
            assert isinstance(attempt, ParseFailure) and attempt.kind and attempt.message


# -- issue 16: content parts, and the leniencies docs/reward.md documents ------------------------------


def test_message_text_reads_strings_and_openai_content_parts():
    from prove_core.reward.parsing import message_text

    parts = [{"type": "text", "text": "I can't move money"}, {"type": "image_url", "image_url": {"url": "x"}},
             {"type": "refusal", "refusal": "with these tools."}, "Sorry."]
    assert message_text(parts) == "I can't move money\nwith these tools.\nSorry."
    assert message_text("plain") == "plain" and message_text(None) == "" and message_text([]) == ""
    assert message_text(3) is None and message_text({"text": "x"}) is None


def test_openai_reads_content_parts_and_a_message_without_calls_as_prose():
    parts = [{"type": "text", "text": "I can't do that."}]
    talk = OpenAI().parse(json.dumps({"role": "assistant", "content": parts}))
    assert talk.attempts == () and talk.content == "I can't do that."
    both = OpenAI().parse(json.dumps({"role": "assistant", "content": parts, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "x", "arguments": "{}"}}]}))
    assert [c.name for c in both.calls] == ["x"] and both.content == "I can't do that."


def test_documented_leniencies():
    """docs/reward.md, "Choices the reward makes": each one is deliberate."""
    # whitespace around a tool name is dropped
    (call,) = Hermes().parse('<tool_call>{"name": " get_balance\\n", "arguments": {"account_id": "a"}}</tool_call>').calls
    assert call.name == "get_balance"
    # `parameters` is accepted for `arguments` by every JSON format, not only Llama 3's
    (call,) = Hermes().parse('<tool_call>{"name": "get_balance", "parameters": {"account_id": "a"}}</tool_call>').calls
    assert call.arguments == {"account_id": "a"}
    # a stray end-of-turn token inside or after the block is ignored
    turn = Hermes().parse('<tool_call>{"name": "get_balance", "arguments": {}}<|im_end|></tool_call><|im_end|>')
    assert [c.name for c in turn.calls] == ["get_balance"] and not turn.failures and turn.content == ""
    # the OpenAI tool_calls decoder reads `arguments` only (that format has no `parameters`); a
    # missing `arguments` is an empty object, not a failure
    (call,) = OpenAI().parse('[{"function": {"name": "x", "parameters": "{\\"a\\": 1}"}}]').attempts
    assert isinstance(call, ToolCall) and call.arguments == {}
