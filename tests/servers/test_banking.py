"""The banking server's own rules: funds and holds, account and card states, payees, limits,
statements and history. What every server guarantees is the conformance kit's
(tests/servers/test_conformance.py)."""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import banking
from prove_servers.banking import BankOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def routing_number(first8: str) -> str:
    """A valid ABA routing number: the 3-7-1 weighted sum of its nine digits is divisible by 10."""
    d = [int(c) for c in first8]
    return first8 + str(-(3 * (d[0] + d[3] + d[6]) + 7 * (d[1] + d[4] + d[7]) + d[2] + d[5]) % 10)


def balance(h, account_id: str) -> dict:
    return h.ok("get_balance", account_id=account_id)


def customer_accounts(h, **match):
    """(customer id, {type: account}) of the first customer whose accounts match ``match``."""
    for customer in h.state.customers:
        accounts = h.where("accounts", customer_id=customer["id"])
        if all(any(a["type"] == t and a["status"] == s for a in accounts) for t, s in match.items()):
            return customer["id"], {a["type"]: a for a in accounts if a["status"] == match.get(a["type"], "active")}
    raise LookupError(match)


def held_account(h, **match) -> dict:
    """The first account with pending card holds, as get_balance reports them."""
    return next(a for a in h.where("accounts", **match) if balance(h, a["id"])["pending_holds"] > 0)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert len(TOOLS) == 17
    assert servers_registered_by(banking) == [server] and (server.name, server.domain) == ("banking", "finance")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {
        "find_customers", "list_accounts", "get_balance", "list_payees", "list_transactions",
        "get_transaction", "list_cards", "get_statement",
    }
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {
        "close_account", "remove_payee", "report_card_lost"}
    assert not TOOLS["transfer_between_accounts"].spec.annotations.idempotent
    assert TOOLS["transfer_between_accounts"].spec.produces == ("transaction",)
    assert TOOLS["get_balance"].spec.entity_params() == {"account_id": "account"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_ids_are_seeded_too(h):
    other = ServerHarness(server, seed=1)
    assert {c["id"] for c in h.state.customers}.isdisjoint(c["id"] for c in other.state.customers)


def test_seed_has_the_variety_tasks_need(h):
    state = h.state
    assert len(state.customers) == 8
    per_customer = [len(state.accounts.where(customer_id=c["id"])) for c in state.customers]
    assert min(per_customer) >= 2 and max(per_customer) == 3
    assert state.accounts.where(status="frozen") and state.accounts.where(status="closed")
    assert state.accounts.where(lambda a: 0 < a["balance"] < 10)  # nearly empty
    assert state.accounts.where(lambda a: a["balance"] == 0, status="active")  # closable
    assert state.cards.where(status="frozen") and state.payees.where(status="pending_verification")
    assert state.transactions.where(status="pending")
    stamps = [t["timestamp"] for t in state.transactions]
    assert len(stamps) > 100
    assert min(stamps) >= state.get_var("history_start") and max(stamps) <= "2026-03-02T09:00:00Z"


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=BankOptions(customers=80))
    assert len(big.state.accounts) > 9 * len(h.state.accounts)
    assert big.run_examples() == len(h.examples())
    with pytest.raises(ValueError):
        BankOptions(customers=0)


# -- business rules -------------------------------------------------------------------------------


def test_transfer_beyond_available_funds_is_refused(h):
    customer, accounts = customer_accounts(h, checking="active", savings="active")
    source = accounts["checking"]["id"]
    available = balance(h, source)["available_balance"]
    args = {"customer_id": customer, "from_account_id": source, "to_account_id": accounts["savings"]["id"]}
    error = h.fails("transfer_between_accounts", "INSUFFICIENT_FUNDS", "FAILED_PRECONDITION", **args,
                    amount=available + 0.01)
    assert error["details"]["available"] == available
    h.ok("transfer_between_accounts", **args, amount=available)  # the overdraft is usable to the cent
    assert balance(h, source)["available_balance"] == 0


def test_pending_holds_reduce_what_can_be_sent(h):
    held = held_account(h, type="checking")
    target = h.find("accounts", lambda a: a["id"] != held["id"], customer_id=held["customer_id"], status="active")
    got = balance(h, held["id"])
    assert got["available_balance"] == round(got["current_balance"] + got["overdraft_limit"] - got["pending_holds"], 2)
    ledger_room = got["current_balance"] + got["overdraft_limit"]  # enough if holds were ignored
    h.fails("transfer_between_accounts", "INSUFFICIENT_FUNDS", customer_id=held["customer_id"],
            from_account_id=held["id"], to_account_id=target["id"], amount=ledger_room)


def test_transfer_guards(h):
    customer, accounts = customer_accounts(h, checking="active", credit="active")
    checking, credit = accounts["checking"]["id"], accounts["credit"]["id"]
    base = {"customer_id": customer, "amount": 10.0}
    transfer = "transfer_between_accounts"
    h.fails(transfer, "SAME_ACCOUNT", "INVALID_ARGUMENT", **base, from_account_id=checking, to_account_id=checking)
    h.fails(transfer, "ACCOUNT_TYPE_NOT_SUPPORTED", **base, from_account_id=credit, to_account_id=checking)
    other = h.find("accounts", lambda a: a["customer_id"] != customer, status="active")
    h.fails(transfer, "ACCOUNT_NOT_OWNED", "PERMISSION_DENIED", **base, from_account_id=checking,
            to_account_id=other["id"])
    h.fails(transfer, "ACCOUNT_NOT_FOUND", "NOT_FOUND", **base, from_account_id=checking, to_account_id="acc_missing")
    h.fails(transfer, "CUSTOMER_NOT_FOUND", **{**base, "customer_id": "cus_missing"}, from_account_id=checking,
            to_account_id=credit)


def test_frozen_and_closed_accounts_move_no_money(h):
    customer, accounts = customer_accounts(h, checking="active", savings="frozen")
    frozen, checking = accounts["savings"]["id"], accounts["checking"]["id"]
    for source, target in ((frozen, checking), (checking, frozen)):
        h.fails("transfer_between_accounts", "ACCOUNT_FROZEN", customer_id=customer, from_account_id=source,
                to_account_id=target, amount=1.0)
    assert balance(h, frozen)["available_balance"] == 0
    closed = h.find("accounts", status="closed")
    savings = h.find("accounts", customer_id=closed["customer_id"], type="savings", status="active")
    h.fails("transfer_between_accounts", "ACCOUNT_CLOSED", customer_id=closed["customer_id"],
            from_account_id=savings["id"], to_account_id=closed["id"], amount=1.0)


def test_close_account_needs_a_zero_balance_and_no_holds(h):
    customer, accounts = customer_accounts(h, checking="active", savings="active")
    savings, checking = accounts["savings"], accounts["checking"]
    h.fails("close_account", "BALANCE_NOT_ZERO", customer_id=customer, account_id=savings["id"])
    h.ok("transfer_between_accounts", customer_id=customer, from_account_id=savings["id"],
         to_account_id=checking["id"], amount=savings["balance"])
    assert h.ok("close_account", customer_id=customer, account_id=savings["id"])["account"]["status"] == "closed"
    h.fails("close_account", "ACCOUNT_CLOSED", customer_id=customer, account_id=savings["id"])
    held = held_account(h)
    h.fails("close_account", "PENDING_TRANSACTIONS", customer_id=held["customer_id"], account_id=held["id"])


def test_closing_an_account_cancels_its_cards(h):
    credit = h.find("accounts", type="credit", status="active")
    card = h.find("cards", account_id=credit["id"])
    h.state.accounts.update(credit["id"], balance=0.0)  # arrange: a paid-off card with no holds
    for hold in h.where("transactions", account_id=credit["id"], status="pending"):
        h.state.transactions.delete(hold["id"])
    result = h.ok("close_account", customer_id=credit["customer_id"], account_id=credit["id"])
    assert result["cancelled_card_ids"] == [card["id"]]
    assert h.state.cards.get(card["id"])["status"] == "cancelled"


def test_payee_must_be_verified_then_can_be_paid(h):
    payee = h.find("payees", status="pending_verification")
    customer = payee["customer_id"]
    account = h.find("accounts", customer_id=customer, type="checking", status="active")
    pay = {"customer_id": customer, "from_account_id": account["id"], "payee_id": payee["id"], "amount": 20.0}
    h.fails("pay_payee", "PAYEE_NOT_VERIFIED", **pay)
    assert h.ok("verify_payee", customer_id=customer, payee_id=payee["id"])["status"] == "verified"
    paid = h.ok("pay_payee", **pay)
    tx = h.ok("get_transaction", transaction_id=paid["transaction_id"])
    assert (tx["type"], tx["amount"], tx["payee_id"]) == ("payment", -20.0, payee["id"])
    assert balance(h, account["id"])["current_balance"] == paid["account_balance"]


def test_adding_payees_checks_routing_number_duplicates_and_the_bank(h):
    existing = h.find("payees")
    customer = existing["customer_id"]
    new = {"customer_id": customer, "name": "Jonas Weber", "account_number": "1234567890"}
    h.fails("add_payee", "INVALID_ROUTING_NUMBER", "INVALID_ARGUMENT", **new, routing_number="021000132")
    duplicate = {**new, "routing_number": existing["routing_number"], "account_number": existing["account_number"]}
    error = h.fails("add_payee", "PAYEE_ALREADY_EXISTS", "CONFLICT", **duplicate)
    assert error["details"]["payee_id"] == existing["id"]
    payee = h.ok("add_payee", **new, routing_number=routing_number("99900000"))  # valid, at an unknown bank
    assert (payee["status"], payee["bank_name"]) == ("pending_verification", None)
    h.fails("verify_payee", "PAYEE_VERIFICATION_FAILED", customer_id=customer, payee_id=payee["id"])
    other = h.find("customers", lambda c: c["id"] != customer)["id"]
    h.fails("remove_payee", "PAYEE_NOT_OWNED", customer_id=other, payee_id=payee["id"])
    h.ok("remove_payee", customer_id=customer, payee_id=payee["id"])
    h.fails("remove_payee", "PAYEE_NOT_FOUND", customer_id=customer, payee_id=payee["id"])


def test_daily_payment_limit(h):
    account = next(a for a in h.where("accounts", type="checking")
                   if balance(h, a["id"])["available_balance"] >= 100)
    customer = h.state.customers.get(account["customer_id"])
    payee = h.find("payees", customer_id=customer["id"], status="verified")
    pay = {"customer_id": customer["id"], "from_account_id": account["id"], "payee_id": payee["id"]}
    first = h.ok("pay_payee", **pay, amount=100.0)
    assert first["daily_limit_remaining"] == customer["daily_payment_limit"] - 100
    error = h.fails("pay_payee", "DAILY_LIMIT_EXCEEDED", "RESOURCE_EXHAUSTED", **pay,
                    amount=customer["daily_payment_limit"] - 99)
    assert error["details"]["remaining_today"] == first["daily_limit_remaining"]


def test_card_freeze_lost_and_limits(h):
    card = h.find("cards", status="active", type="debit")
    owner = {"customer_id": card["customer_id"], "card_id": card["id"]}
    h.fails("set_card_frozen", "CARD_NOT_FROZEN", **owner, frozen=False)
    h.ok("set_card_frozen", **owner, frozen=True)
    h.fails("set_card_frozen", "CARD_ALREADY_FROZEN", "CONFLICT", **owner, frozen=True)
    h.fails("set_card_spending_limit", "SPENDING_LIMIT_TOO_HIGH", **owner, daily_limit=5_000.01)
    assert h.ok("set_card_spending_limit", **owner, daily_limit=5_000)["card"]["daily_spending_limit"] == 5_000
    lost = h.ok("report_card_lost", **owner)
    replacement = lost["replacement_card"]
    assert lost["cancelled_card"]["status"] == "cancelled" and replacement["status"] == "active"
    assert replacement["replaces_card_id"] == card["id"] and replacement["daily_spending_limit"] == 5_000
    assert replacement["account_id"] == card["account_id"] and replacement["id"] != card["id"]
    h.fails("report_card_lost", "CARD_CANCELLED", **owner)
    h.fails("set_card_frozen", "CARD_CANCELLED", **owner, frozen=True)
    h.fails("set_card_spending_limit", "CARD_CANCELLED", **owner, daily_limit=100)
    other = h.find("customers", lambda c: c["id"] != card["customer_id"])["id"]
    h.fails("set_card_frozen", "CARD_NOT_OWNED", customer_id=other, card_id=replacement["id"], frozen=True)


def test_credit_card_limit_is_capped_by_the_credit_limit(h):
    accounts = h.state.accounts
    card = h.find("cards", lambda c: accounts.get(c["account_id"])["credit_limit"] < 10_000, type="credit")
    credit_limit = accounts.get(card["account_id"])["credit_limit"]
    error = h.fails("set_card_spending_limit", "SPENDING_LIMIT_TOO_HIGH", customer_id=card["customer_id"],
                    card_id=card["id"], daily_limit=credit_limit + 1)
    assert error["details"]["max_limit"] == credit_limit


def test_a_card_on_a_frozen_account_stays_frozen(h):
    card = h.find("cards", status="frozen")
    h.state.accounts.update(card["account_id"], status="frozen", frozen_reason="test")  # arrange
    h.fails("set_card_frozen", "ACCOUNT_FROZEN", customer_id=card["customer_id"], card_id=card["id"], frozen=False)


def test_statements_chain_month_to_month(h):
    account = h.find("accounts", type="checking", status="active")
    statements = [h.ok("get_statement", account_id=account["id"], month=m) for m in ("2025-12", "2026-01", "2026-02")]
    for earlier, later in zip(statements, statements[1:], strict=False):
        assert earlier["closing_balance"] == later["opening_balance"]
    for st in statements:
        assert round(st["opening_balance"] + st["total_credits"] - st["total_debits"], 2) == st["closing_balance"]
        assert st["transaction_count"] == len(st["transactions"]) > 0
        if st["transactions"]:
            assert st["transactions"][-1]["balance_after"] == st["closing_balance"]
    h.fails("get_statement", "STATEMENT_NOT_AVAILABLE", account_id=account["id"], month="2026-03")
    h.fails("get_statement", "STATEMENT_NOT_AVAILABLE", account_id=account["id"], month="2025-11")
    h.fails("get_statement", "STATEMENT_NOT_AVAILABLE", account_id=h.find("accounts", status="closed")["id"],
            month="2026-01")


def test_list_transactions_filters_and_pages(h):
    account = h.find("accounts", type="checking", status="active")["id"]
    everything = h.ok("list_transactions", account_id=account, limit=100)
    assert everything["total"] > 20
    stamps = [t["timestamp"] for t in everything["transactions"]]
    assert stamps == sorted(stamps, reverse=True)
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("list_transactions", account_id=account, limit=7, offset=offset)
        seen += [t["id"] for t in page["transactions"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == everything["total"]
    filtered = h.ok("list_transactions", account_id=account, transaction_type="card_purchase", min_amount=50,
                    start_date="2026-01-01", end_date="2026-01-31", limit=100)["transactions"]
    assert filtered
    assert all(t["type"] == "card_purchase" and abs(t["amount"]) >= 50 for t in filtered)
    assert all(t["timestamp"].startswith("2026-01") for t in filtered)
    h.fails("list_transactions", "INVALID_DATE_RANGE", account_id=account, start_date="2026-02-01",
            end_date="2026-01-01")
    h.fails("list_transactions", "BAD_DATE", account_id=account, start_date="2026-02-30")
    h.fails("list_transactions", "SCHEMA_VIOLATION", account_id=account, transaction_type="bribe")


def test_ids_flow_from_lookup_to_transfer_to_history(h):
    name = h.find("customers")["name"]
    customer = h.ok("find_customers", query=name.lower())["customers"][0]
    accounts = h.ok("list_accounts", customer_id=customer["id"], status="active")["accounts"]
    source = next(a for a in accounts if a["type"] == "checking")
    target = next(a for a in accounts if a["id"] != source["id"])
    before = balance(h, source["id"])
    moved = h.ok("transfer_between_accounts", customer_id=customer["id"], from_account_id=source["id"],
                 to_account_id=target["id"], amount=123.456, memo="rent share")
    assert moved["amount"] == 123.46
    out = h.ok("get_transaction", transaction_id=moved["transaction_id"])
    incoming = h.ok("get_transaction", transaction_id=out["counterpart_transaction_id"])
    assert (out["amount"], incoming["amount"]) == (-123.46, 123.46)
    assert incoming["id"] == moved["incoming_transaction_id"] and incoming["account_id"] == target["id"]
    assert balance(h, source["id"])["current_balance"] == round(before["current_balance"] - 123.46, 2)
    latest = h.ok("list_transactions", account_id=source["id"], limit=1)["transactions"][0]
    assert latest["id"] == moved["transaction_id"] and latest["memo"] == "rent share"


def test_unknown_ids_fail_with_entity_specific_not_found(h):
    customer = h.find("customers")["id"]
    h.fails("get_transaction", "TRANSACTION_NOT_FOUND", "NOT_FOUND", transaction_id="txn_missing")
    h.fails("list_accounts", "CUSTOMER_NOT_FOUND", customer_id="cus_missing")
    h.fails("get_statement", "ACCOUNT_NOT_FOUND", account_id="acc_missing", month="2026-01")
    h.fails("report_card_lost", "CARD_NOT_FOUND", customer_id=customer, card_id="crd_missing")
    h.fails("verify_payee", "PAYEE_NOT_FOUND", customer_id=customer, payee_id="pye_missing")
