"""The LLM teacher's guards, against a stand-in OpenAI-compatible endpoint that answers with
scripted good and bad text: invented facts, reasoning blocks, other languages, negated requests,
claims the episode contradicts, server errors and timeouts."""

import json
import time

import pytest

from benchmarks.bench_llm_guards import measure
from prove_core.model import Example, Message, Task, ToolCall, from_json, read_jsonl
from prove_plugins.synth.guards import check_turn, facts, strip_reasoning
from prove_plugins.synth.llm import ChatClient, EndpointUnavailable, LLMConfig, LLMTeacher
from tests.support.chat_endpoint import ChatEndpoint, draft_of

RESULT = {"id": "acc_7kq2m9xd", "type": "checking", "balance": 40, "currency": "USD", "owner": "Dana Whitfield",
          "opened": "2024-03-05", "last4": "4821"}
REFUSED = {"code": "FAILED_PRECONDITION", "reason": "INSUFFICIENT_FUNDS", "message": "Balance 40.00 is below 75.00.",
           "details": {}}
ASK = "Hi, what's the balance of my checking account ending 4821 (acc_7kq2m9xd)?"
REPORT = "Your checking account ending 4821 (acc_7kq2m9xd) has a balance of 40 USD."
TRANSFER = "Then move 75 from it to savings, please."
FAILURE = "I couldn't do that: Balance 40.00 is below 75.00. Nothing was changed."


def conversation() -> Example:
    """A user asks a balance (answered), then a transfer the state refuses (explained)."""
    def call(n, name, args, result):
        return [Message(role="assistant", tool_calls=[ToolCall(id=f"call_{n}", name=name, arguments=args)]),
                Message(role="tool", content=json.dumps(result, sort_keys=True), tool_call_id=f"call_{n}", name=name)]
    messages = [Message(role="system", content="You are an assistant for banking. Today is 2026-03-10."),
                Message(role="user", content=ASK), *call(1, "get_account", {"account_id": "acc_7kq2m9xd"}, RESULT),
                Message(role="assistant", content=REPORT),
                Message(role="user", content=TRANSFER),
                *call(2, "transfer", {"from_account_id": "acc_7kq2m9xd", "amount": 75}, REFUSED),
                Message(role="assistant", content=FAILURE)]
    return Example(id="hand-000001", messages=messages, tools=[],
                   task=Task(servers=["banking"], meta={"persona": "casual"}))


def before(turn: str) -> list[dict]:
    """The messages (OpenAI dicts) that come before the turn whose draft is ``turn``."""
    messages = conversation().messages
    at = next(i for i, m in enumerate(messages) if m.content == turn)
    return [m.to_openai() for m in messages[:at]]


# 30 reports that keep every fact of REPORT and add one the conversation does not hold
INVENTED = [
    REPORT + " Your balance is now $1,234,567.89, approved by Maria Gonzalez.",
    REPORT + " That is 1409 USD less than last month.",
    REPORT.replace("40 USD", "1409 USD") + " (40 before fees)",
    REPORT + " It was approved by Maria Gonzalez.",
    REPORT + " Your advisor Maria is happy to help.",
    REPORT + " The account was opened on 2023-11-02.",
    REPORT + " It was opened on March 6, 2024.",
    REPORT + " Interest of 2.5% is paid monthly.",
    REPORT + " The next statement arrives on 15 April.",
    REPORT + " A pending deposit of $250.00 will clear tomorrow.",
    REPORT + " Your savings account acc_9zz8yy7x holds 1,200 USD.",
    REPORT + " Contact dana.whitfield@examplebank.com with questions.",
    REPORT + " Your card ending 9911 is linked to it.",
    REPORT + " Branch: Springfield Main Street.",
    REPORT + " It is held at Chase.",
    REPORT + " The overdraft limit is 500 USD.",
    REPORT + " There are 3 pending transactions.",
    REPORT + " Dana Whitfield and Robert Whitfield are its owners.",
    REPORT + " It converts to 36.80 EUR.",
    REPORT + " The last transfer was at 14:30.",
    REPORT + " The account number is 4821-0000-1234.",
    REPORT + " Reference number: 77120.",
    REPORT + " Approved by the manager \"Olivia Stone\".",
    REPORT + " Your credit score is 742.",
    REPORT + " The monthly fee of $4.95 was waived.",
    REPORT + " It has earned 0.40 USD in interest.",
    REPORT + " It was last used on Feb 28.",
    REPORT + " The routing number is 021000021.",
    REPORT + " See https://examplebank.com/accounts for details.",
    REPORT + " Kind regards, James Miller.",
]
GOOD = [
    "The checking account ending 4821 (acc_7kq2m9xd) holds 40 USD right now.",
    "You have 40 USD in your checking account ending 4821, acc_7kq2m9xd.",
    "acc_7kq2m9xd — your checking account ending 4821 — has 40 USD available.",
    "Sure! The balance on your checking account ending 4821 (acc_7kq2m9xd) is 40 USD.",
    "Your checking account ending in 4821 (acc_7kq2m9xd) shows a balance of 40.00 USD.",
    "Right now your checking account ending 4821 (acc_7kq2m9xd) has 40 USD, Dana Whitfield's account opened 2024-03-05.",
    "Balance for the checking account ending 4821 (acc_7kq2m9xd): 40 USD. It was opened on March 5, 2024.",
    "The checking account ending 4821 (acc_7kq2m9xd) has a balance of $40.",
]


def rewritten(endpoint: ChatEndpoint, example: Example, **options) -> Example:
    teacher = LLMTeacher(LLMTeacher.Config(llm=LLMConfig(base_url=endpoint.url, model="tiny", backoff_s=0.01, **options)))
    return teacher.rewrite(example)


def scripted(replies: dict[str, list[str]]):
    """Answers a rewrite request for a draft with the next scripted reply for it, else the draft."""
    def reply(prompt: str) -> str:
        queue = replies.get(draft_of(prompt))
        return queue.pop(0) if queue else draft_of(prompt)
    return reply


def test_no_reply_with_an_invented_fact_is_accepted_and_good_replies_are():
    replies = {REPORT: list(INVENTED)}
    with ChatEndpoint(scripted(replies)) as endpoint:
        reports = [rewritten(endpoint, conversation(), max_retries=0).messages[4].content for _ in INVENTED]
        accepted = [r for r in reports if r != REPORT]
        assert len(INVENTED) >= 25 and accepted == [], accepted  # acceptance rate of invented facts: 0 of 30
        replies[REPORT] = list(GOOD)
        examples = [rewritten(endpoint, conversation(), max_retries=0) for _ in GOOD]
    assert [e.messages[4].content for e in examples] == GOOD  # every good reply is kept
    assert all(e.task.meta["teacher"]["rewritten"] == 4 and e.task.meta["teacher"]["kept_draft"] == 0 for e in examples)


def test_a_refused_reply_is_asked_for_again_with_the_reason_then_the_draft_is_kept():
    replies = {REPORT: [INVENTED[0], GOOD[0]], TRANSFER: [TRANSFER + " Actually it's for Maria Gonzalez."] * 3}
    with ChatEndpoint(scripted(replies)) as endpoint:
        example = rewritten(endpoint, conversation(), max_retries=2)
        again = [p for p in endpoint.requests if "Your last version was refused" in p]
    assert example.messages[4].content == GOOD[0]
    assert example.messages[5].content == TRANSFER  # three refusals: the draft stays
    assert any("Maria Gonzalez" in p and "$1,234,567.89" in p for p in again)
    note = example.task.meta["teacher"]
    assert note["rejected"] == {"invented": 4} and note["kept_draft"] == 1 and note["rewritten"] == 3


@pytest.mark.parametrize("draft, text, kind", [
    # user turns: another language, a negated request, a changed or dropped value, talk about the task
    (TRANSFER, "Por favor, transfiere 75 dólares de mi cuenta a la de ahorros, gracias.", "language"),
    (TRANSFER, "Dann überweise bitte 75 auf das Sparkonto, danke.", "language"),
    (TRANSFER, "Ensuite, transférez 75 vers l'épargne, s'il vous plaît, merci.", "language"),
    (TRANSFER, "Then please don't move 75 from it to savings.", "negated"),
    (TRANSFER, "Never mind, do not move 75 to savings.", "negated"),
    (TRANSFER, "Then move 750 from it to savings, please.", "invented"),
    (TRANSFER, "Then move some money to savings, please.", "dropped"),
    (TRANSFER, "Here is the rewritten message: then move 75 to savings.", "meta"),
    # after the refused transfer: success claimed, or the failure not said
    (FAILURE, "Done! I moved 75 to savings; your balance is now 40.", "false_success"),
    (FAILURE, "The transfer of 75 went through successfully. Balance 40.00 is below 75.00.", "false_success"),
    (FAILURE, "Balance 40.00 is below 75.00; your savings will get the 75 shortly.", "unreported_failure"),
    # after the successful read: failure or "nothing changed" claimed
    (REPORT, "Unfortunately I couldn't read your checking account ending 4821 (acc_7kq2m9xd): 40 USD.", "false_failure"),
    (REPORT, "Your checking account ending 4821 (acc_7kq2m9xd) has 40 USD. Nothing was changed.", "false_unchanged"),
])
def test_a_turn_in_another_language_negated_or_contradicting_the_episode_is_refused(draft, text, kind):
    role = "user" if draft == TRANSFER else "assistant"
    problems = check_turn(text, draft, role, before(draft), language_of_conversation="en")
    assert kind in {p.kind for p in problems}, problems


def test_a_good_failure_report_and_a_good_request_pass():
    assert check_turn("That transfer was refused: the balance of 40.00 is below 75.00, so nothing was changed.",
                      FAILURE, "assistant", before(FAILURE), language_of_conversation="en") == []
    assert check_turn("ok, now move 75 from that account to my savings", TRANSFER, "user", before(TRANSFER),
                      language_of_conversation="en") == []


def test_values_are_matched_as_values_not_substrings():
    support = before(REPORT)
    ok = "Your checking account ending 4821 (acc_7kq2m9xd) has a balance of {} USD."
    assert check_turn(ok.format("40.00"), REPORT, "assistant", support, language_of_conversation="en") == []
    assert check_turn(ok.format("$40"), REPORT, "assistant", support, language_of_conversation="en") == []
    for wrong in ("1409", "140", "4", "40.5", "1,234,567.89", "0.40"):  # each contains "40" or is inside "1409"
        kinds = {p.kind for p in check_turn(ok.format(wrong), REPORT, "assistant", support, language_of_conversation="en")}
        assert "invented" in kinds, wrong
    named = [*support, {"role": "user", "content": "Note it's for Maria Gonzalez, she asked on 2026-03-09."}]
    approved = REPORT + " Maria Gonzalez asked for it on March 9."
    assert check_turn(approved, REPORT, "assistant", support, language_of_conversation="en") != []
    assert check_turn(approved, REPORT, "assistant", named, language_of_conversation="en") == []  # a user turn names her
    assert [f.value for f in facts("on March 5, 2024 and 2024-03-05T09:30:00Z")] == [(2024, 3, 5), (9, 30), (2024, 3, 5)]


def test_reasoning_blocks_are_stripped_before_the_checks():
    assert strip_reasoning("<think>Maria Gonzalez approved\n$99</think>\n\nHello") == "Hello"
    assert strip_reasoning("the user wants 99</think>Hello") == "Hello"  # the opening tag was in the prompt
    assert strip_reasoning("Hello <thinking>cut off mid-thought") == "Hello"
    replies = {REPORT: [f"<think>Should I mention Maria Gonzalez and $1,234,567.89? No.</think>{GOOD[1]}"]}
    with ChatEndpoint(scripted(replies)) as endpoint:
        example = rewritten(endpoint, conversation(), max_retries=0)
    assert example.messages[4].content == GOOD[1]


def test_server_errors_timeouts_and_dropped_connections_are_retried_with_backoff():
    with ChatEndpoint(lambda prompt: "fine", stall_s=1.0) as endpoint:
        endpoint.faults = [500, 502, "timeout", "drop"]
        client = ChatClient(LLMConfig(base_url=endpoint.url, model="tiny", timeout_s=0.3, request_retries=4, backoff_s=0.05))
        started = time.monotonic()
        assert client.complete([{"role": "user", "content": "hi"}]) == "fine"
        assert len(endpoint.requests) == 5 and endpoint.answered == 1
        assert time.monotonic() - started >= 0.05 + 0.1 + 0.2 + 0.4 + 0.3  # the waits doubled, plus the timeout
        endpoint.faults = [400]  # a bad request is not retried: the answer would not change
        with pytest.raises(EndpointUnavailable, match="failed after 1 attempt") as error:
            client.complete([{"role": "user", "content": "hi"}])
        assert error.value.status == 400 and len(endpoint.requests) == 6
        endpoint.down = True
        with pytest.raises(EndpointUnavailable, match=r"failed after 5 attempt\(s\): HTTP 503.*run `prove synth` again"):
            client.complete([{"role": "user", "content": "hi"}])
        assert len(endpoint.requests) == 11


def test_on_a_corpus_no_draft_is_refused_and_no_careless_rewrite_gets_through(corpus):
    """Every text turn of a real corpus, as its own rewrite and written otherwise with the same facts
    (a false alarm if refused), and with one thing a careless model does to it (a miss if
    accepted): invented names, amounts and dates, "40" grown into "1409", another id, a negated
    request, the episode's outcome turned around."""
    report = measure(from_json(r, Example) for r in read_jsonl(corpus["dir"] / "corpus.jsonl"))
    assert report["drafts_refused"] == 0 and report["good_refused"] == {}, report["examples_of_false_alarms"]
    assert sum(report["good_tried"].values()) > report["turns"]
    assert report["bad_accepted"] == {}, report["examples_of_misses"]
    assert sum(report["bad_tried"].values()) > 1000 and len(report["bad_tried"]) == 9


def test_after_parallel_calls_a_failure_among_them_must_be_said_and_a_success_may_be():
    context = before(FAILURE)
    parallel = [*context[:-2], {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_2", "type": "function", "function": {"name": "transfer", "arguments": "{}"}},
        {"id": "call_3", "type": "function", "function": {"name": "get_account", "arguments": "{}"}}]},
        context[-1], {"role": "tool", "tool_call_id": "call_3", "name": "get_account", "content": json.dumps(RESULT)}]
    draft = FAILURE + " Your checking account has 40 USD."
    mixed = "The transfer was refused: Balance 40.00 is below 75.00. The account check went through: 40 USD."
    assert check_turn(mixed, draft, "assistant", parallel, language_of_conversation="en") == []
    hidden = "All done: your checking account has 40 USD, and 75.00 is noted. Balance 40.00."
    assert "unreported_failure" in {p.kind for p in check_turn(hidden, draft, "assistant", parallel,
                                                                 language_of_conversation="en")}
