"""The payments server: its tool surface, seed, status machine, idempotency keys and typed failures.

Every failure test checks the reason, that the tool declares it, and that the session state is
unchanged afterwards — by the tool itself (it checks before it writes), not only by the
executor's rollback.
"""

from __future__ import annotations

import json
from typing import Any

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import payments
from prove_servers.payments import PaymentsOptions, server

TOOLS = server.tools
NAMES = {
    "list_payment_methods", "create_payment_intent", "confirm_payment_intent", "capture_payment_intent",
    "cancel_payment_intent", "get_payment_intent", "list_payment_intents", "create_refund", "get_balance",
    "create_payout",
}
ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


@pytest.fixture(scope="module")
def rt() -> ServerRuntime:
    return ServerRuntime(server)


@pytest.fixture
def sid(rt: ServerRuntime) -> str:
    return rt.new_session()


def ok(rt: ServerRuntime, sid: str, tool: str, **args: Any) -> dict:
    result = rt.call(sid, tool, args)
    assert not result.is_error, result.error
    return result.data


def fails(rt: ServerRuntime, sid: str, tool: str, reason: str, **args: Any) -> dict:
    before = rt.state_hash(sid)
    probe = State.from_snapshot(rt.state(sid).snapshot())
    with pytest.raises(ToolError):
        TOOLS[tool].fn(probe, **TOOLS[tool].validate(dict(args)))
    assert probe.state_hash() == before, f"{tool} wrote before failing with {reason}"
    result = rt.call(sid, tool, args)
    assert result.is_error, f"{tool} succeeded: {result.data}"
    assert result.error["reason"] == reason, result.error
    assert reason in TOOLS[tool].spec.errors, f"{tool} does not declare {reason}"
    assert rt.state_hash(sid) == before
    return result.error


def example_args(rt: ServerRuntime, sid: str, example: Any) -> dict:
    return dict(example(rt.state(sid)) if callable(example) else example)


def balance(rt: ServerRuntime, sid: str, currency: str) -> dict:
    return next(b for b in ok(rt, sid, "get_balance")["balances"] if b["currency"] == currency)


def good_card(state: payments.PaymentsState, **match: Any) -> dict:
    return payments._usable_card(state, **match)


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_10_tools_each_described_with_examples():
    assert set(TOOLS) == NAMES and len(TOOLS) == 10
    assert (server.name, server.domain) == ("payments", "finance")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_payment_methods", "get_payment_intent", "list_payment_intents", "get_balance"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"cancel_payment_intent"}
    creators = {n: t.spec for n, t in TOOLS.items() if t.spec.produces}
    assert {n: s.produces for n, s in creators.items()} == {
        "create_payment_intent": ("payment_intent",), "create_refund": ("refund",), "create_payout": ("payout",)}
    for name, spec in creators.items():  # every creating call is keyed, hence idempotent
        assert "idempotency_key" in spec.parameters["required"] and spec.annotations.idempotent, name
        assert "IDEMPOTENCY_KEY_REUSED" in spec.errors, name
    assert TOOLS["create_refund"].spec.entity_params() == {"payment_intent_id": "payment_intent"}


def test_money_is_in_minor_units_with_bounds_and_enums(rt, sid):
    card = good_card(rt.state(sid))["id"]
    base = {"currency": "usd", "payment_method_id": card, "idempotency_key": "k1"}
    for bad in ({**base, "amount": 49}, {**base, "amount": 19.99}, {**base, "amount": 500, "currency": "jpy"}):
        assert rt.call(sid, "create_payment_intent", bad).error["reason"] == "SCHEMA_VIOLATION"


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_on_a_fresh_session(rt, tool, index):
    sid = rt.new_session()
    data = ok(rt, sid, tool, **example_args(rt, sid, TOOLS[tool].examples[index]))
    assert json.loads(json.dumps(data)) == data  # JSON-native values only


def test_read_only_tools_never_change_state_and_writers_do(rt):
    for name, tool in TOOLS.items():
        for example in tool.examples:
            sid = rt.new_session()
            before = rt.state_hash(sid)
            ok(rt, sid, name, **example_args(rt, sid, example))
            assert (rt.state_hash(sid) != before) != tool.spec.annotations.read_only, name


def test_idempotent_writers_have_no_further_effect_when_repeated(rt):
    for name, tool in TOOLS.items():
        if tool.spec.annotations.read_only or not tool.spec.annotations.idempotent:
            continue
        for example in tool.examples:
            sid = rt.new_session()
            args = example_args(rt, sid, example)
            ok(rt, sid, name, **args)
            once = rt.state_hash(sid)
            rt.call(sid, name, args)  # replayed, or refused (already confirmed, captured, canceled)
            assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash(first.new_session()) == again.state_hash(again.new_session())
    assert other.state_hash(other.new_session()) != first.state_hash(first.new_session())
    ids = {i["id"] for i in first.state(first.new_session()).payment_intents}
    assert ids.isdisjoint(i["id"] for i in other.state(other.new_session()).payment_intents)


@pytest.mark.parametrize(("seed", "customers"), [(0, 10), (1, 10), (5, 10), (0, 1), (3, 3)])
def test_seed_has_every_situation_the_tools_need(seed, customers):
    state = server.build_state(seed, PaymentsOptions(customers=customers))  # a small seed folds the profiles
    statuses = {i["status"] for i in state.payment_intents}
    assert statuses == {"requires_confirmation", "requires_capture", "succeeded", "canceled"}
    assert state.payment_intents.first(lambda i: i["dispute"] is not None)
    assert state.payment_intents.first(lambda i: 0 < i["amount_refunded"] < i["amount_received"])
    assert state.payment_intents.first(refunded=True)
    responses = {m["issuer_response"] for m in state.payment_methods}
    assert responses == {"approve", "generic_decline", "insufficient_funds"}
    assert state.payment_methods.first(lambda m: payments._card_expired(m, state.today()))
    balances = {b["id"]: b for b in state.balances}
    assert balances["usd"]["available"] > 100_000 and balances["gbp"] == {**balances["gbp"], "available": 0}
    assert balances["gbp"]["pending"] > 0 and balances["usd"]["pending"] > 0  # captured in the last two days
    assert state.payouts.first(status="paid") and state.bank_accounts.first(status="errored")
    for intent in state.payment_intents.where(status="succeeded"):  # fees and nets add up
        assert intent["net"] == intent["amount_received"] - intent["fee"] > 0
        refunds = state.refunds.where(payment_intent_id=intent["id"])
        assert sum(r["amount"] for r in refunds) == intent["amount_refunded"]


def test_a_ten_times_larger_seed_works(rt):
    big = ServerRuntime(server, options=PaymentsOptions(customers=100))
    assert len(big.state(big.new_session()).payment_intents) > 9 * len(rt.state(rt.new_session()).payment_intents)
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        PaymentsOptions(customers=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(payments)
    registered: list[Any] = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- the status machine ---------------------------------------------------------------------------


def test_authorize_capture_partly_refund_flow_passes_ids_along(rt, sid):
    state = rt.state(sid)
    customer = state.customers.get(good_card(state)["customer_id"])
    cards = ok(rt, sid, "list_payment_methods", customer_query=customer["email"], include_expired=False)
    card = next(c for c in cards["payment_methods"] if c["customer_id"] == customer["id"])
    assert "issuer_response" not in card and card["customer_name"] == customer["name"]
    usd_before = balance(rt, sid, "usd")
    intent = ok(rt, sid, "create_payment_intent", amount=10_000, currency="usd", payment_method_id=card["id"],
                capture_method="manual", idempotency_key="order-7", description="Order #7")
    assert (intent["status"], intent["idempotent_replayed"]) == ("requires_confirmation", False)
    authorized = ok(rt, sid, "confirm_payment_intent", payment_intent_id=intent["id"])
    assert (authorized["status"], authorized["amount_capturable"]) == ("requires_capture", 10_000)
    captured = ok(rt, sid, "capture_payment_intent", payment_intent_id=intent["id"], amount_to_capture=8_000)
    fee = round(8_000 * 0.029) + 30
    assert (captured["status"], captured["amount_received"], captured["amount_released"]) == ("succeeded", 8_000, 2_000)
    assert (captured["fee"], captured["net"], captured["amount_capturable"]) == (fee, 8_000 - fee, 0)
    assert balance(rt, sid, "usd")["pending"] == usd_before["pending"] + 8_000 - fee  # not available yet
    refund = ok(rt, sid, "create_refund", payment_intent_id=intent["id"], amount=3_000, idempotency_key="r-7a")
    assert refund["payment_intent"]["amount_refundable"] == 5_000
    error = fails(rt, sid, "create_refund", "REFUND_EXCEEDS_CAPTURED", payment_intent_id=intent["id"], amount=5_001,
                  idempotency_key="r-7b")
    assert (error["code"], error["details"]["amount_refundable"]) == ("INVALID_ARGUMENT", 5_000)
    rest = ok(rt, sid, "create_refund", payment_intent_id=intent["id"], idempotency_key="r-7c")
    assert rest["refund"]["amount"] == 5_000 and rest["payment_intent"]["refunded"]
    assert balance(rt, sid, "usd")["available"] == usd_before["available"] - 8_000  # refunds come out of available
    fails(rt, sid, "create_refund", "CHARGE_ALREADY_REFUNDED", payment_intent_id=intent["id"], idempotency_key="r-7d")
    listed = ok(rt, sid, "get_payment_intent", payment_intent_id=intent["id"])
    assert [r["id"] for r in listed["refunds"]] == [refund["refund"]["id"], rest["refund"]["id"]]
    mine = ok(rt, sid, "list_payment_intents", customer_id=customer["id"], status="succeeded")["payment_intents"]
    assert mine[0]["id"] == intent["id"]  # newest first


def test_automatic_capture_succeeds_on_confirmation(rt, sid):
    card = good_card(rt.state(sid))["id"]
    intent = ok(rt, sid, "create_payment_intent", amount=2_000, currency="eur", payment_method_id=card,
                idempotency_key="auto-1")
    eur = balance(rt, sid, "eur")
    done = ok(rt, sid, "confirm_payment_intent", payment_intent_id=intent["id"])
    assert (done["status"], done["amount_received"], done["captured_at"] is not None) == ("succeeded", 2_000, True)
    assert balance(rt, sid, "eur")["pending"] == eur["pending"] + done["net"]
    fails(rt, sid, "confirm_payment_intent", "INTENT_NOT_CONFIRMABLE", payment_intent_id=intent["id"])
    fails(rt, sid, "capture_payment_intent", "INTENT_NOT_CAPTURABLE", payment_intent_id=intent["id"])
    error = fails(rt, sid, "cancel_payment_intent", "INTENT_NOT_CANCELABLE", payment_intent_id=intent["id"])
    assert "refund it instead" in error["message"]


def test_declined_card_then_recovery_with_another_card(rt, sid):
    state = rt.state(sid)
    declining = state.payment_intents.first(
        lambda i: state.payment_methods.get(i["payment_method_id"])["issuer_response"] == "generic_decline",
        status="requires_confirmation")
    error = fails(rt, sid, "confirm_payment_intent", "CARD_DECLINED", payment_intent_id=declining["id"])
    assert error["details"]["decline_code"] == "generic_decline"
    assert ok(rt, sid, "get_payment_intent", payment_intent_id=declining["id"])["status"] == "requires_confirmation"
    stranger = good_card(state, customer_id=state.customers.first(lambda c: c["id"] != declining["customer_id"])["id"])
    error = fails(rt, sid, "confirm_payment_intent", "PAYMENT_METHOD_NOT_OWNED", payment_intent_id=declining["id"],
                  payment_method_id=stranger["id"])
    assert error["code"] == "PERMISSION_DENIED"
    own = good_card(state, customer_id=declining["customer_id"])
    paid = ok(rt, sid, "confirm_payment_intent", payment_intent_id=declining["id"], payment_method_id=own["id"])
    assert (paid["status"], paid["payment_method_id"]) == ("succeeded", own["id"])


def test_insufficient_funds_card_and_expired_card(rt, sid):
    state = rt.state(sid)
    broke = state.payment_methods.first(issuer_response="insufficient_funds")
    intent = ok(rt, sid, "create_payment_intent", amount=900, currency="usd", payment_method_id=broke["id"],
                idempotency_key="nf-1")
    error = fails(rt, sid, "confirm_payment_intent", "CARD_DECLINED", payment_intent_id=intent["id"])
    assert error["details"]["decline_code"] == "insufficient_funds"
    expired = state.payment_intents.first(
        lambda i: payments._card_expired(state.payment_methods.get(i["payment_method_id"]), state.today()),
        status="requires_confirmation")
    fails(rt, sid, "confirm_payment_intent", "CARD_EXPIRED", payment_intent_id=expired["id"])


def test_capture_bounds_and_cancel_releases_an_authorization(rt, sid):
    state = rt.state(sid)
    authorized = state.payment_intents.first(status="requires_capture")
    error = fails(rt, sid, "capture_payment_intent", "AMOUNT_EXCEEDS_CAPTURABLE", payment_intent_id=authorized["id"],
                  amount_to_capture=authorized["amount_capturable"] + 1)
    assert error["details"]["amount_capturable"] == authorized["amount_capturable"]
    fails(rt, sid, "create_refund", "PAYMENT_NOT_CAPTURED", payment_intent_id=authorized["id"], idempotency_key="x")
    canceled = ok(rt, sid, "cancel_payment_intent", payment_intent_id=authorized["id"], cancellation_reason="abandoned")
    assert (canceled["status"], canceled["amount_capturable"]) == ("canceled", 0)
    fails(rt, sid, "capture_payment_intent", "INTENT_NOT_CAPTURABLE", payment_intent_id=authorized["id"])
    fails(rt, sid, "cancel_payment_intent", "INTENT_NOT_CANCELABLE", payment_intent_id=authorized["id"])
    pending = state.payment_intents.first(status="requires_confirmation")
    fails(rt, sid, "capture_payment_intent", "INTENT_NOT_CAPTURABLE", payment_intent_id=pending["id"])


def test_disputed_charges_cannot_be_refunded(rt, sid):
    disputed = rt.state(sid).payment_intents.first(lambda i: i["dispute"] is not None)
    fails(rt, sid, "create_refund", "CHARGE_DISPUTED", payment_intent_id=disputed["id"], idempotency_key="d-1")


def test_refund_needs_balance_in_its_currency(rt, sid):
    """The pound payment was captured yesterday: its refund can only come out of pending funds,
    which are short of the refundable amount by the processing fee."""
    gbp = rt.state(sid).payment_intents.first(currency="gbp", status="succeeded")
    refundable = gbp["amount_received"] - gbp["amount_refunded"]
    funds = balance(rt, sid, "gbp")
    assert funds["available"] == 0 and funds["pending"] < refundable
    error = fails(rt, sid, "create_refund", "INSUFFICIENT_BALANCE", payment_intent_id=gbp["id"], idempotency_key="g-1")
    assert error["details"]["pending"] == funds["pending"]
    ok(rt, sid, "create_refund", payment_intent_id=gbp["id"], amount=funds["pending"], idempotency_key="g-2")
    assert balance(rt, sid, "gbp")["pending"] == 0


# -- idempotency keys -----------------------------------------------------------------------------


def test_same_key_same_parameters_returns_the_first_object_and_writes_nothing(rt, sid):
    args = {"amount": 4_200, "currency": "usd", "payment_method_id": good_card(rt.state(sid))["id"],
            "idempotency_key": "checkout-42"}
    first = ok(rt, sid, "create_payment_intent", **args)
    after_first = rt.state_hash(sid)
    again = ok(rt, sid, "create_payment_intent", **args, capture_method="automatic")  # the default, spelled out
    assert again["id"] == first["id"] and again["idempotent_replayed"]
    assert rt.state_hash(sid) == after_first
    ok(rt, sid, "confirm_payment_intent", payment_intent_id=first["id"])
    replay = ok(rt, sid, "create_payment_intent", **args)
    assert replay["id"] == first["id"] and replay["status"] == "succeeded"  # the object as it is now
    error = fails(rt, sid, "create_payment_intent", "IDEMPOTENCY_KEY_REUSED", **{**args, "amount": 4_300})
    assert error["code"] == "CONFLICT" and error["details"]["object_id"] == first["id"]
    fails(rt, sid, "create_payout", "IDEMPOTENCY_KEY_REUSED", amount=1_000, currency="usd",
          idempotency_key="checkout-42")  # keys are shared by all operations


def test_refund_and_payout_keys_prevent_double_money_movement(rt, sid):
    intent = payments._refundable(rt.state(sid))
    refund = {"payment_intent_id": intent["id"], "amount": 700, "idempotency_key": "rf-1"}
    first = ok(rt, sid, "create_refund", **refund)
    second = ok(rt, sid, "create_refund", **refund)
    assert second["refund"]["id"] == first["refund"]["id"] and second["idempotent_replayed"]
    assert second["payment_intent"]["amount_refunded"] == intent["amount_refunded"] + 700
    fails(rt, sid, "create_refund", "IDEMPOTENCY_KEY_REUSED", **{**refund, "amount": 701})
    available = balance(rt, sid, "usd")["available"]
    payout = {"amount": 25_000, "currency": "usd", "idempotency_key": "po-1"}
    sent = ok(rt, sid, "create_payout", **payout)
    assert ok(rt, sid, "create_payout", **payout)["payout"]["id"] == sent["payout"]["id"]
    assert balance(rt, sid, "usd")["available"] == available - 25_000
    assert len(rt.state(sid).payouts.where(status="pending")) == 1


def test_a_failed_call_stores_no_key(rt, sid):
    available = balance(rt, sid, "usd")["available"]
    fails(rt, sid, "create_payout", "INSUFFICIENT_BALANCE", amount=available + 1, currency="usd",
          idempotency_key="po-retry")
    paid = ok(rt, sid, "create_payout", amount=available, currency="usd", idempotency_key="po-retry")
    assert paid["balance"]["available"] == 0 and not paid["idempotent_replayed"]


# -- payouts --------------------------------------------------------------------------------------


def test_payouts_check_balance_account_and_currency(rt, sid):
    state = rt.state(sid)
    usd = balance(rt, sid, "usd")
    error = fails(rt, sid, "create_payout", "INSUFFICIENT_BALANCE", amount=usd["available"] + usd["pending"],
                  currency="usd", idempotency_key="p1")  # pending funds do not count
    assert error["details"]["available"] == usd["available"]
    fails(rt, sid, "create_payout", "NO_BANK_ACCOUNT_FOR_CURRENCY", amount=100, currency="gbp", idempotency_key="p2")
    eur_account = state.bank_accounts.first(currency="eur")["id"]
    error = fails(rt, sid, "create_payout", "BANK_ACCOUNT_CURRENCY_MISMATCH", amount=100, currency="usd",
                  bank_account_id=eur_account, idempotency_key="p3")
    assert error["details"]["account_currency"] == "eur"
    errored = state.bank_accounts.first(status="errored")["id"]
    fails(rt, sid, "create_payout", "BANK_ACCOUNT_NOT_USABLE", amount=100, currency="usd", bank_account_id=errored,
          idempotency_key="p4")
    fails(rt, sid, "create_payout", "BANK_ACCOUNT_NOT_FOUND", amount=100, currency="usd", bank_account_id="ba_missing",
          idempotency_key="p5")
    payout = ok(rt, sid, "create_payout", amount=usd["available"], currency="usd", idempotency_key="p6")["payout"]
    assert payout["status"] == "pending" and payout["arrival_date"] == "2026-03-04"  # two business days
    assert ok(rt, sid, "get_balance")["recent_payouts"][0]["id"] == payout["id"]


# -- lookups --------------------------------------------------------------------------------------


def test_unknown_ids_fail_with_entity_specific_not_found(rt, sid):
    card = good_card(rt.state(sid))["id"]
    error = fails(rt, sid, "get_payment_intent", "PAYMENT_INTENT_NOT_FOUND", payment_intent_id="pi_missing")
    assert error["code"] == "NOT_FOUND"
    fails(rt, sid, "create_payment_intent", "PAYMENT_METHOD_NOT_FOUND", amount=500, currency="usd",
          payment_method_id="pm_missing", idempotency_key="nf")
    fails(rt, sid, "list_payment_intents", "CUSTOMER_NOT_FOUND", customer_id="cus_missing")
    intent = ok(rt, sid, "create_payment_intent", amount=500, currency="usd", payment_method_id=card,
                idempotency_key="nf2")
    fails(rt, sid, "confirm_payment_intent", "PAYMENT_METHOD_NOT_FOUND", payment_intent_id=intent["id"],
          payment_method_id="pm_missing")


def test_lists_filter_and_page(rt, sid):
    everything = ok(rt, sid, "list_payment_intents", limit=100)
    stamps = [i["created_at"] for i in everything["payment_intents"]]
    assert stamps == sorted(stamps, reverse=True) and everything["total"] == len(rt.state(sid).payment_intents)
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "list_payment_intents", limit=7, offset=offset)
        seen += [i["id"] for i in page["payment_intents"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == everything["total"]
    captured = ok(rt, sid, "list_payment_intents", status="requires_capture")["payment_intents"]
    assert captured and all(i["status"] == "requires_capture" for i in captured)
    all_cards = ok(rt, sid, "list_payment_methods", limit=100)
    valid = ok(rt, sid, "list_payment_methods", include_expired=False, limit=100)
    assert 0 < valid["total"] < all_cards["total"] and not any(c["expired"] for c in valid["payment_methods"])
    assert ok(rt, sid, "list_payment_methods", customer_query="nobody-like-this")["total"] == 0
