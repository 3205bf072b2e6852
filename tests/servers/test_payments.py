"""The payments server's own rules: the payment intent status machine, card declines, captures,
refunds, disputes, payouts, balances and idempotency keys, with typed failures. What every server
guarantees is the conformance kit's (tests/servers/test_conformance.py)."""

from __future__ import annotations

from typing import Any

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import payments
from prove_servers.payments import PaymentsOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def balance(h, currency: str) -> dict:
    return next(b for b in h.ok("get_balance")["balances"] if b["currency"] == currency)


def card_expired(state: Any, method: dict) -> bool:
    card, today = method["card"], state.today()
    return (card["exp_year"], card["exp_month"]) < (today.year, today.month)


def good_card(state: Any, **match: Any) -> dict:
    """A card its issuer approves: not expired, issuer response "approve"."""
    return state.payment_methods.first(lambda m: m["issuer_response"] == "approve" and not card_expired(state, m),
                                       **match)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "list_payment_methods", "create_payment_intent", "confirm_payment_intent", "capture_payment_intent",
        "cancel_payment_intent", "get_payment_intent", "list_payment_intents", "create_refund", "get_balance",
        "create_payout",
    }
    assert servers_registered_by(payments) == [server]
    assert (server.name, server.domain) == ("payments", "finance")
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


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_ids_are_seeded_too(h):
    other = ServerHarness(server, seed=1)
    assert {i["id"] for i in h.state.payment_intents}.isdisjoint(i["id"] for i in other.state.payment_intents)


def test_money_is_in_minor_units_with_bounds_and_enums(h):
    card = good_card(h.state)["id"]
    base = {"currency": "usd", "payment_method_id": card, "idempotency_key": "k1"}
    for bad in ({**base, "amount": 49}, {**base, "amount": 19.99}, {**base, "amount": 500, "currency": "jpy"}):
        assert h.call("create_payment_intent", bad).error["reason"] == "SCHEMA_VIOLATION"


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
    assert state.payment_methods.first(lambda m: card_expired(state, m))
    balances = {b["id"]: b for b in state.balances}
    assert balances["usd"]["available"] > 100_000 and balances["gbp"] == {**balances["gbp"], "available": 0}
    assert balances["gbp"]["pending"] > 0 and balances["usd"]["pending"] > 0  # captured in the last two days
    assert state.payouts.first(status="paid") and state.bank_accounts.first(status="errored")
    for intent in state.payment_intents.where(status="succeeded"):  # fees and nets add up
        assert intent["net"] == intent["amount_received"] - intent["fee"] > 0
        refunds = state.refunds.where(payment_intent_id=intent["id"])
        assert sum(r["amount"] for r in refunds) == intent["amount_refunded"]


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=PaymentsOptions(customers=100))
    assert len(big.state.payment_intents) > 9 * len(h.state.payment_intents)
    big.run_examples()
    with pytest.raises(ValueError):
        PaymentsOptions(customers=0)


# -- the status machine ---------------------------------------------------------------------------


def test_authorize_capture_partly_refund_flow_passes_ids_along(h):
    state = h.state
    customer = state.customers.get(good_card(state)["customer_id"])
    cards = h.ok("list_payment_methods", customer_query=customer["email"], include_expired=False)
    card = next(c for c in cards["payment_methods"] if c["customer_id"] == customer["id"])
    assert "issuer_response" not in card and card["customer_name"] == customer["name"]
    usd_before = balance(h, "usd")
    intent = h.ok("create_payment_intent", amount=10_000, currency="usd", payment_method_id=card["id"],
                  capture_method="manual", idempotency_key="order-7", description="Order #7")
    assert (intent["status"], intent["idempotent_replayed"]) == ("requires_confirmation", False)
    authorized = h.ok("confirm_payment_intent", payment_intent_id=intent["id"])
    assert (authorized["status"], authorized["amount_capturable"]) == ("requires_capture", 10_000)
    captured = h.ok("capture_payment_intent", payment_intent_id=intent["id"], amount_to_capture=8_000)
    fee = round(8_000 * 0.029) + 30
    assert (captured["status"], captured["amount_received"], captured["amount_released"]) == ("succeeded", 8_000, 2_000)
    assert (captured["fee"], captured["net"], captured["amount_capturable"]) == (fee, 8_000 - fee, 0)
    assert balance(h, "usd")["pending"] == usd_before["pending"] + 8_000 - fee  # not available yet
    refund = h.ok("create_refund", payment_intent_id=intent["id"], amount=3_000, idempotency_key="r-7a")
    assert refund["payment_intent"]["amount_refundable"] == 5_000
    error = h.fails("create_refund", "REFUND_EXCEEDS_CAPTURED", payment_intent_id=intent["id"], amount=5_001,
                    idempotency_key="r-7b")
    assert (error["code"], error["details"]["amount_refundable"]) == ("INVALID_ARGUMENT", 5_000)
    rest = h.ok("create_refund", payment_intent_id=intent["id"], idempotency_key="r-7c")
    assert rest["refund"]["amount"] == 5_000 and rest["payment_intent"]["refunded"]
    assert balance(h, "usd")["available"] == usd_before["available"] - 8_000  # refunds come out of available
    h.fails("create_refund", "CHARGE_ALREADY_REFUNDED", payment_intent_id=intent["id"], idempotency_key="r-7d")
    listed = h.ok("get_payment_intent", payment_intent_id=intent["id"])
    assert [r["id"] for r in listed["refunds"]] == [refund["refund"]["id"], rest["refund"]["id"]]
    mine = h.ok("list_payment_intents", customer_id=customer["id"], status="succeeded")["payment_intents"]
    assert mine[0]["id"] == intent["id"]  # newest first


def test_automatic_capture_succeeds_on_confirmation(h):
    card = good_card(h.state)["id"]
    intent = h.ok("create_payment_intent", amount=2_000, currency="eur", payment_method_id=card,
                  idempotency_key="auto-1")
    eur = balance(h, "eur")
    done = h.ok("confirm_payment_intent", payment_intent_id=intent["id"])
    assert (done["status"], done["amount_received"], done["captured_at"] is not None) == ("succeeded", 2_000, True)
    assert balance(h, "eur")["pending"] == eur["pending"] + done["net"]
    h.fails("confirm_payment_intent", "INTENT_NOT_CONFIRMABLE", payment_intent_id=intent["id"])
    h.fails("capture_payment_intent", "INTENT_NOT_CAPTURABLE", payment_intent_id=intent["id"])
    error = h.fails("cancel_payment_intent", "INTENT_NOT_CANCELABLE", payment_intent_id=intent["id"])
    assert "refund it instead" in error["message"]


def test_declined_card_then_recovery_with_another_card(h):
    state = h.state
    declining = state.payment_intents.first(
        lambda i: state.payment_methods.get(i["payment_method_id"])["issuer_response"] == "generic_decline",
        status="requires_confirmation")
    error = h.fails("confirm_payment_intent", "CARD_DECLINED", payment_intent_id=declining["id"])
    assert error["details"]["decline_code"] == "generic_decline"
    assert h.ok("get_payment_intent", payment_intent_id=declining["id"])["status"] == "requires_confirmation"
    stranger = good_card(state, customer_id=state.customers.first(lambda c: c["id"] != declining["customer_id"])["id"])
    h.fails("confirm_payment_intent", "PAYMENT_METHOD_NOT_OWNED", "PERMISSION_DENIED",
            payment_intent_id=declining["id"], payment_method_id=stranger["id"])
    own = good_card(state, customer_id=declining["customer_id"])
    paid = h.ok("confirm_payment_intent", payment_intent_id=declining["id"], payment_method_id=own["id"])
    assert (paid["status"], paid["payment_method_id"]) == ("succeeded", own["id"])


def test_insufficient_funds_card_and_expired_card(h):
    state = h.state
    broke = state.payment_methods.first(issuer_response="insufficient_funds")
    intent = h.ok("create_payment_intent", amount=900, currency="usd", payment_method_id=broke["id"],
                  idempotency_key="nf-1")
    error = h.fails("confirm_payment_intent", "CARD_DECLINED", payment_intent_id=intent["id"])
    assert error["details"]["decline_code"] == "insufficient_funds"
    expired = state.payment_intents.first(
        lambda i: card_expired(state, state.payment_methods.get(i["payment_method_id"])),
        status="requires_confirmation")
    h.fails("confirm_payment_intent", "CARD_EXPIRED", payment_intent_id=expired["id"])


def test_capture_bounds_and_cancel_releases_an_authorization(h):
    state = h.state
    authorized = state.payment_intents.first(status="requires_capture")
    error = h.fails("capture_payment_intent", "AMOUNT_EXCEEDS_CAPTURABLE", payment_intent_id=authorized["id"],
                    amount_to_capture=authorized["amount_capturable"] + 1)
    assert error["details"]["amount_capturable"] == authorized["amount_capturable"]
    h.fails("create_refund", "PAYMENT_NOT_CAPTURED", payment_intent_id=authorized["id"], idempotency_key="x")
    canceled = h.ok("cancel_payment_intent", payment_intent_id=authorized["id"], cancellation_reason="abandoned")
    assert (canceled["status"], canceled["amount_capturable"]) == ("canceled", 0)
    h.fails("capture_payment_intent", "INTENT_NOT_CAPTURABLE", payment_intent_id=authorized["id"])
    h.fails("cancel_payment_intent", "INTENT_NOT_CANCELABLE", payment_intent_id=authorized["id"])
    pending = state.payment_intents.first(status="requires_confirmation")
    h.fails("capture_payment_intent", "INTENT_NOT_CAPTURABLE", payment_intent_id=pending["id"])


def test_disputed_charges_cannot_be_refunded(h):
    disputed = h.state.payment_intents.first(lambda i: i["dispute"] is not None)
    h.fails("create_refund", "CHARGE_DISPUTED", payment_intent_id=disputed["id"], idempotency_key="d-1")


def test_refund_needs_balance_in_its_currency(h):
    """The pound payment was captured yesterday: its refund can only come out of pending funds,
    which are short of the refundable amount by the processing fee."""
    gbp = h.state.payment_intents.first(currency="gbp", status="succeeded")
    refundable = gbp["amount_received"] - gbp["amount_refunded"]
    funds = balance(h, "gbp")
    assert funds["available"] == 0 and funds["pending"] < refundable
    error = h.fails("create_refund", "INSUFFICIENT_BALANCE", payment_intent_id=gbp["id"], idempotency_key="g-1")
    assert error["details"]["pending"] == funds["pending"]
    h.ok("create_refund", payment_intent_id=gbp["id"], amount=funds["pending"], idempotency_key="g-2")
    assert balance(h, "gbp")["pending"] == 0


# -- idempotency keys -----------------------------------------------------------------------------


def test_same_key_same_parameters_returns_the_first_object_and_writes_nothing(h):
    args = {"amount": 4_200, "currency": "usd", "payment_method_id": good_card(h.state)["id"],
            "idempotency_key": "checkout-42"}
    first = h.ok("create_payment_intent", **args)
    after_first = h.state_hash()
    again = h.ok("create_payment_intent", **args, capture_method="automatic")  # the default, spelled out
    assert again["id"] == first["id"] and again["idempotent_replayed"]
    assert h.state_hash() == after_first
    h.ok("confirm_payment_intent", payment_intent_id=first["id"])
    replay = h.ok("create_payment_intent", **args)
    assert replay["id"] == first["id"] and replay["status"] == "succeeded"  # the object as it is now
    error = h.fails("create_payment_intent", "IDEMPOTENCY_KEY_REUSED", "CONFLICT", **{**args, "amount": 4_300})
    assert error["details"]["object_id"] == first["id"]
    h.fails("create_payout", "IDEMPOTENCY_KEY_REUSED", amount=1_000, currency="usd",
            idempotency_key="checkout-42")  # keys are shared by all operations


def test_refund_and_payout_keys_prevent_double_money_movement(h):
    intent = h.find("payment_intents", lambda i: i["dispute"] is None and i["currency"] == "usd"
                    and i["amount_received"] - i["amount_refunded"] >= 500, status="succeeded")
    refund = {"payment_intent_id": intent["id"], "amount": 700, "idempotency_key": "rf-1"}
    first = h.ok("create_refund", **refund)
    second = h.ok("create_refund", **refund)
    assert second["refund"]["id"] == first["refund"]["id"] and second["idempotent_replayed"]
    assert second["payment_intent"]["amount_refunded"] == intent["amount_refunded"] + 700
    h.fails("create_refund", "IDEMPOTENCY_KEY_REUSED", **{**refund, "amount": 701})
    available = balance(h, "usd")["available"]
    payout = {"amount": 25_000, "currency": "usd", "idempotency_key": "po-1"}
    sent = h.ok("create_payout", **payout)
    assert h.ok("create_payout", **payout)["payout"]["id"] == sent["payout"]["id"]
    assert balance(h, "usd")["available"] == available - 25_000
    assert len(h.state.payouts.where(status="pending")) == 1


def test_a_failed_call_stores_no_key(h):
    available = balance(h, "usd")["available"]
    h.fails("create_payout", "INSUFFICIENT_BALANCE", amount=available + 1, currency="usd",
            idempotency_key="po-retry")
    paid = h.ok("create_payout", amount=available, currency="usd", idempotency_key="po-retry")
    assert paid["balance"]["available"] == 0 and not paid["idempotent_replayed"]


# -- payouts --------------------------------------------------------------------------------------


def test_payouts_check_balance_account_and_currency(h):
    state = h.state
    usd = balance(h, "usd")
    error = h.fails("create_payout", "INSUFFICIENT_BALANCE", amount=usd["available"] + usd["pending"],
                    currency="usd", idempotency_key="p1")  # pending funds do not count
    assert error["details"]["available"] == usd["available"]
    h.fails("create_payout", "NO_BANK_ACCOUNT_FOR_CURRENCY", amount=100, currency="gbp", idempotency_key="p2")
    eur_account = state.bank_accounts.first(currency="eur")["id"]
    error = h.fails("create_payout", "BANK_ACCOUNT_CURRENCY_MISMATCH", amount=100, currency="usd",
                    bank_account_id=eur_account, idempotency_key="p3")
    assert error["details"]["account_currency"] == "eur"
    errored = state.bank_accounts.first(status="errored")["id"]
    h.fails("create_payout", "BANK_ACCOUNT_NOT_USABLE", amount=100, currency="usd", bank_account_id=errored,
            idempotency_key="p4")
    h.fails("create_payout", "BANK_ACCOUNT_NOT_FOUND", amount=100, currency="usd", bank_account_id="ba_missing",
            idempotency_key="p5")
    payout = h.ok("create_payout", amount=usd["available"], currency="usd", idempotency_key="p6")["payout"]
    assert payout["status"] == "pending" and payout["arrival_date"] == "2026-03-04"  # two business days
    assert h.ok("get_balance")["recent_payouts"][0]["id"] == payout["id"]


# -- lookups --------------------------------------------------------------------------------------


def test_unknown_ids_fail_with_entity_specific_not_found(h):
    card = good_card(h.state)["id"]
    h.fails("get_payment_intent", "PAYMENT_INTENT_NOT_FOUND", "NOT_FOUND", payment_intent_id="pi_missing")
    h.fails("create_payment_intent", "PAYMENT_METHOD_NOT_FOUND", amount=500, currency="usd",
            payment_method_id="pm_missing", idempotency_key="nf")
    h.fails("list_payment_intents", "CUSTOMER_NOT_FOUND", customer_id="cus_missing")
    intent = h.ok("create_payment_intent", amount=500, currency="usd", payment_method_id=card,
                  idempotency_key="nf2")
    h.fails("confirm_payment_intent", "PAYMENT_METHOD_NOT_FOUND", payment_intent_id=intent["id"],
            payment_method_id="pm_missing")


def test_lists_filter_and_page(h):
    everything = h.ok("list_payment_intents", limit=100)
    stamps = [i["created_at"] for i in everything["payment_intents"]]
    assert stamps == sorted(stamps, reverse=True) and everything["total"] == len(h.state.payment_intents)
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("list_payment_intents", limit=7, offset=offset)
        seen += [i["id"] for i in page["payment_intents"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == everything["total"]
    captured = h.ok("list_payment_intents", status="requires_capture")["payment_intents"]
    assert captured and all(i["status"] == "requires_capture" for i in captured)
    all_cards = h.ok("list_payment_methods", limit=100)
    valid = h.ok("list_payment_methods", include_expired=False, limit=100)
    assert 0 < valid["total"] < all_cards["total"] and not any(c["expired"] for c in valid["payment_methods"])
    assert h.ok("list_payment_methods", customer_query="nobody-like-this")["total"] == 0
