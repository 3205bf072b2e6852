"""The corpus-quality figures (prove_core.synth.quality) catch what they claim to catch, and a
synthesized corpus meets them."""

import json

import attrs

from prove_core.model import Example, Message, Task, ToolCall, from_json, read_jsonl
from prove_core.synth.quality import (
    answered_reads,
    false_claims,
    figures,
    recovery_faults,
    skeleton,
    tool_finder,
    tool_words,
    unnamed_entity_calls,
    unneeded_clarification,
)


def chat(*messages):
    return Example(id="x", messages=[Message(role="system", content="s"), *messages], tools=[],
                   task=Task(servers=["vehicle"], expected="call"))


def call(name, **args):
    return Message(role="assistant", tool_calls=[ToolCall(id=f"c{len(args)}{name}", name=name, arguments=args)])


def result(call_id, data):
    return Message(role="tool", tool_call_id=call_id, content=json.dumps(data))


LISTING = {"vehicles": [{"id": "veh_aaaaaaaa", "name": "Blue Bolt"}, {"id": "veh_bbbbbbbb", "name": "The Tank"}]}


def test_a_switch_to_an_entity_the_user_did_not_name_is_a_guess():
    guess = chat(Message(role="user", content="Start charging veh_aaaaaaaa and list my cars."),
                 call("list_vehicles"), result("c0list_vehicles", LISTING),
                 call("start_charging", vehicle_id="veh_bbbbbbbb"))
    checked, guesses = unnamed_entity_calls(guess)
    assert checked == 1 and guesses and "veh_bbbbbbbb" in guesses[0]


def test_any_id_nobody_singled_out_is_a_guess_not_only_a_swap():
    one_of_several = chat(Message(role="user", content="List my cars and charge one of them."),
                          call("list_vehicles"), result("c0list_vehicles", LISTING),
                          call("start_charging", vehicle_id="veh_bbbbbbbb"))
    never_shown = chat(Message(role="user", content="File the taxi receipt."),
                       call("add_expense", category_id="cat_7kq2m9xd", amount=12))
    for example in (one_of_several, never_shown):
        checked, guesses = unnamed_entity_calls(example)
        assert checked == 1 and len(guesses) == 1, guesses


def test_the_named_entity_or_one_the_user_singles_out_is_not_a_guess():
    named = chat(Message(role="user", content="List my cars, then start charging veh_aaaaaaaa."),
                 call("list_vehicles"), result("c0list_vehicles", LISTING),
                 call("start_charging", vehicle_id="veh_aaaaaaaa"))
    singled_out = chat(Message(role="user", content="veh_aaaaaaaa is fine. List my cars and charge The Tank."),
                       call("list_vehicles"), result("c0list_vehicles", LISTING),
                       call("start_charging", vehicle_id="veh_bbbbbbbb"))
    only_one = chat(Message(role="user", content="Charge my car."),
                    call("list_vehicles"), result("c0list_vehicles", {"vehicles": LISTING["vehicles"][:1]}),
                    call("start_charging", vehicle_id="veh_aaaaaaaa"))
    created = chat(Message(role="user", content="Add a payee Ana Ruiz and pay her 40."),
                   call("add_payee", nickname="Ana Ruiz"), result("c1add_payee", {"id": "pye_4x8k2m7q", "name": "Ana Ruiz"}),
                   call("pay_payee", payee_id="pye_4x8k2m7q", amount=40))
    for example in (named, singled_out, only_one, created):
        assert unnamed_entity_calls(example)[1] == [], example.messages[1].content


def bank(*messages, expected="call", tools=(), meta=None):
    return Example(id="b", messages=[Message(role="system", content="s"), *messages], tools=list(tools),
                   task=Task(servers=["banking"], expected=expected, meta=meta or {}))


BALANCE = {"account_id": "acc_4x8k2m7q", "type": "checking", "status": "active", "currency": "USD",
           "current_balance": 1300.0, "available_balance": 1204.5, "pending_holds": 95.5}


def test_a_reply_that_lists_fields_instead_of_answering_is_caught(plugins):
    find = tool_finder(plugins.registry)
    asked = Message(role="user", content="please check the balance of account acc_4x8k2m7q")
    lists_fields = bank(asked, call("get_balance", account_id="acc_4x8k2m7q"), result("c1get_balance", BALANCE),
                        Message(role="assistant", content="Here you go. Type: checking, status: active, currency: USD."))
    answers = bank(asked, call("get_balance", account_id="acc_4x8k2m7q"), result("c1get_balance", BALANCE),
                   Message(role="assistant", content="The checking account has $1,204.50 available; its current "
                                                     "balance is $1,300.00."))
    assert answered_reads(lists_fields, find)[0] == 1 and len(answered_reads(lists_fields, find)[1]) == 1
    assert answered_reads(answers, find) == (1, [])
    assert figures([lists_fields], find)["answered_reads"] == 0.0 and figures([answers], find)["answered_reads"] == 1.0


def test_an_unsafe_recovery_moves_a_refused_write_to_another_record_or_inverts_it(plugins):
    find = tool_finder(plugins.registry)
    refused = {"code": "FAILED_PRECONDITION", "message": "payee is not verified", "reason": "PAYEE_NOT_VERIFIED"}
    ok = {"id": "pye_bbbbbbbb", "removed": True}
    other_record = bank(Message(role="user", content="remove payee pye_aaaaaaaa"),
                        call("remove_payee", payee_id="pye_aaaaaaaa"), result("c1remove_payee", refused),
                        Message(role="assistant", content="Should I use another payee instead?"),
                        Message(role="user", content="ok, pye_bbbbbbbb"),
                        call("remove_payee", payee_id="pye_bbbbbbbb", customer_id="cus_a"), result("c2remove_payee", ok))
    inverted = bank(Message(role="user", content="unfreeze card crd_aaaaaaaa"),
                    call("set_card_frozen", card_id="crd_aaaaaaaa", frozen=False), result("c2set_card_frozen", refused),
                    call("set_card_frozen", card_id="crd_aaaaaaaa", frozen=True, customer_id="cus_a"),
                    result("c3set_card_frozen", {"id": "x"}))
    corrected = bank(Message(role="user", content="move 500 from acc_aaaaaaaa to acc_bbbbbbbb"),
                     call("transfer_between_accounts", from_account_id="acc_aaaaaaaa", amount=500),
                     result("c2transfer_between_accounts", refused),
                     call("transfer_between_accounts", from_account_id="acc_aaaaaaaa", amount=200, memo="rent"),
                     result("c3transfer_between_accounts", {"id": "txn_x"}))
    assert len(recovery_faults(other_record, find)) == 1 and len(recovery_faults(inverted, find)) == 1
    assert recovery_faults(corrected, find) == []


def test_nothing_changed_after_a_write_and_done_after_a_refusal_are_false_claims(plugins):
    find = tool_finder(plugins.registry)
    refused = {"code": "CONFLICT", "message": "no", "reason": "X"}
    after_write = bank(Message(role="user", content="add a payee and pay them"),
                       call("add_payee", nickname="Ana"), result("c1add_payee", {"id": "pye_4x8k2m7q"}),
                       call("pay_payee", payee_id="pye_4x8k2m7q"), result("c1pay_payee", refused),
                       Message(role="assistant", content="That failed: no. Nothing was changed."))
    done_after_refusal = bank(Message(role="user", content="pay them"),
                              call("pay_payee", payee_id="pye_4x8k2m7q"), result("c1pay_payee", refused),
                              Message(role="assistant", content="Done! The payment is on its way."))
    honest = bank(Message(role="user", content="pay them"),
                  call("pay_payee", payee_id="pye_4x8k2m7q"), result("c1pay_payee", refused),
                  Message(role="assistant", content="That failed: no. Nothing was changed."))
    assert len(false_claims(after_write, find)) == 1 and len(false_claims(done_after_refusal, find)) == 1
    assert false_claims(honest, find) == []


def test_a_clarification_asking_for_what_an_offered_tool_finds_is_needless(plugins):
    find = tool_finder(plugins.registry)
    offered = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("find_customers", "get_balance")]
    meta = {"perturbations": [{"name": "hidden_tool", "needs": "customer"}]}
    asks = bank(Message(role="user", content="pay my rent"), Message(role="assistant", content="Which customer id?"),
                expected="clarify", tools=offered, meta=meta)
    assert unneeded_clarification(asks, find)
    assert not unneeded_clarification(attrs.evolve(asks, tools=offered[1:]), find)


def test_tool_words_in_a_user_turn_are_counted():
    tools = [{"type": "function", "function": {"name": "set_card_frozen", "parameters": {"properties": {}}}}]
    worded = Example(id="w", messages=[Message(role="user", content="please set card frozen on my card")], tools=tools,
                     task=Task(servers=["banking"], expected="call"))
    snake = attrs.evolve(worded, messages=[Message(role="user", content="run set_card_frozen")])
    plain = attrs.evolve(worded, messages=[Message(role="user", content="please freeze my card")])
    assert tool_words(worded) == 1 and tool_words(snake) == 1 and tool_words(plain) == 0


def test_skeletons_mask_values_so_templates_show():
    a = skeleton('Move $25.00 from acc_aaaaaaaa to "Rent"', ["25.0"])
    b = skeleton('Move $310 from acc_bbbbbbbb to "Car loan"', ["310"])
    c = skeleton("Send Chen Lopez 40 dollars", ["Chen Lopez", "40"])
    assert a == b == "Move <N> from <ID> to <V>" and c == "Send <V> <N> dollars"


def test_figures_flag_silent_examples_and_unwritten_replies():
    silent = Example(id="s", messages=[Message(role="system", content="s"), Message(role="user", content="hi")],
                     tools=[], task=Task(servers=["banking"], expected="abstain"))
    q = figures([silent])
    assert q["no_assistant_turn"] == 1.0 and q["written_replies"] == 0.0


def test_a_synthesized_corpus_meets_the_figures(corpus):
    q = corpus["report"]["quality"]
    assert q["no_assistant_turn"] == 0.0
    assert q["written_replies"] == 1.0
    assert q["unnamed_entity_calls"] <= 0.003, q["unnamed_entity_examples"]
    assert q["answered_reads"] >= 0.98, q["unanswered_examples"]
    assert q["unsafe_recoveries"] == 0, q["unsafe_recovery_examples"]
    assert q["false_claims"] == 0, q["false_claim_examples"]
    assert q["unneeded_clarifications"] <= 0.02
    assert q["mistakes"]["marked"] == q["mistakes"]["schema_rejected_calls"]
    assert q["slots"]["share_varied"] >= 0.6, q["slots"]
    assert q["skeletons"]["share"] >= 0.5  # most user turns read differently once values are masked
    examples = [from_json(r, Example) for r in read_jsonl(corpus["dir"] / "corpus.jsonl")]
    for e in examples:  # no user turn spells out a tool or parameter name
        names = {t["function"]["name"] for t in e.tools if "_" in t["function"]["name"]}
        for m in e.messages:
            if m.role == "user":
                assert not [n for n in names if n in (m.content or "")], (e.id, m.content)
