"""The banking server: its tool surface, seed, business rules and typed failures."""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import banking
from prove_servers.banking import BankOptions, server

TOOLS = server.tools


@pytest.fixture
def rt() -> ServerRuntime:
    return ServerRuntime(server)


@pytest.fixture
def sid(rt: ServerRuntime) -> str:
    return rt.new_session()


def ok(rt: ServerRuntime, sid: str, tool: str, **args) -> dict:
    result = rt.call(sid, tool, args)
    assert not result.is_error, result.error
    return result.data


def fails(rt: ServerRuntime, sid: str, tool: str, reason: str, **args) -> dict:
    """The call fails with ``reason``, the tool declares it, and the state is left as it was —
    by the tool itself, which checks before it writes, not only by the executor's rollback."""
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


def example_args(rt: ServerRuntime, sid: str, example) -> dict:
    return dict(example(rt.state(sid)) if callable(example) else example)


ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_17_tools_each_described_with_examples():
    assert len(TOOLS) == 17
    for name, tool in TOOLS.items():
        assert tool.spec.description, name
        assert tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {
        "find_customers", "list_accounts", "get_balance", "list_payees", "list_transactions",
        "get_transaction", "list_cards", "get_statement",
    }
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"close_account", "remove_payee", "report_card_lost"}
    assert not TOOLS["transfer_between_accounts"].spec.annotations.idempotent
    assert TOOLS["transfer_between_accounts"].spec.produces == ("transaction",)
    assert TOOLS["get_balance"].spec.entity_params() == {"account_id": "account"}


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_on_a_fresh_session(rt, sid, tool, index):
    data = ok(rt, sid, tool, **example_args(rt, sid, TOOLS[tool].examples[index]))
    assert json.loads(json.dumps(data)) == data  # JSON-native values only


def test_read_only_tools_never_change_state_and_writers_do(rt):
    for name, tool in TOOLS.items():
        for example in tool.examples:
            sid = rt.new_session()
            before = rt.state_hash(sid)
            ok(rt, sid, name, **example_args(rt, sid, example))
            changed = rt.state_hash(sid) != before
            assert changed != tool.spec.annotations.read_only, name


def test_idempotent_writers_have_no_further_effect_when_repeated(rt):
    for name, tool in TOOLS.items():
        if tool.spec.annotations.read_only or not tool.spec.annotations.idempotent:
            continue
        sid = rt.new_session()
        args = example_args(rt, sid, tool.examples[0])
        ok(rt, sid, name, **args)
        tables_once = rt.state(sid).to_json()["tables"]
        rt.call(sid, name, args)  # may be refused (already frozen, duplicate, ...) but must not change data
        assert rt.state(sid).to_json()["tables"] == tables_once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again = ServerRuntime(server), ServerRuntime(server)
    assert first.state_hash(first.new_session()) == again.state_hash(again.new_session())
    other = ServerRuntime(server, seed=1)
    assert other.state_hash(other.new_session()) != first.state_hash(first.new_session())
    first_ids = {c["id"] for c in first.state(first.new_session()).customers}
    assert first_ids.isdisjoint(c["id"] for c in other.state(other.new_session()).customers)  # ids are seeded too


def test_seed_has_the_variety_tasks_need(rt, sid):
    state = rt.state(sid)
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


def test_a_ten_times_larger_seed_works(rt):
    big = ServerRuntime(server, options=BankOptions(customers=80))
    sid = big.new_session()
    assert len(big.state(sid).accounts) > 9 * len(rt.state(rt.new_session()).accounts)
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        BankOptions(customers=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(banking)
    registered = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]
    assert (server.name, server.domain) == ("banking", "finance")


# -- business rules -------------------------------------------------------------------------------


def _customer_accounts(rt, sid, **match):
    """(customer id, {type: account}) of the first customer whose accounts match ``match``."""
    state = rt.state(sid)
    for customer in state.customers:
        accounts = state.accounts.where(customer_id=customer["id"])
        if all(any(a["type"] == t and a["status"] == s for a in accounts) for t, s in match.items()):
            return customer["id"], {a["type"]: a for a in accounts if a["status"] == match.get(a["type"], "active")}
    raise LookupError(match)


def test_transfer_beyond_available_funds_is_refused(rt, sid):
    customer, accounts = _customer_accounts(rt, sid, checking="active", savings="active")
    source = accounts["checking"]["id"]
    available = ok(rt, sid, "get_balance", account_id=source)["available_balance"]
    args = {"customer_id": customer, "from_account_id": source, "to_account_id": accounts["savings"]["id"]}
    error = fails(rt, sid, "transfer_between_accounts", "INSUFFICIENT_FUNDS", **args, amount=available + 0.01)
    assert error["code"] == "FAILED_PRECONDITION" and error["details"]["available"] == available
    ok(rt, sid, "transfer_between_accounts", **args, amount=available)  # the overdraft is usable to the cent
    assert ok(rt, sid, "get_balance", account_id=source)["available_balance"] == 0


def test_pending_holds_reduce_what_can_be_sent(rt, sid):
    state = rt.state(sid)
    held = state.accounts.first(lambda a: banking._holds(state, a["id"]) > 0, type="checking")
    target = state.accounts.first(lambda a: a["id"] != held["id"], customer_id=held["customer_id"], status="active")
    balance = ok(rt, sid, "get_balance", account_id=held["id"])
    assert balance["available_balance"] == round(
        balance["current_balance"] + balance["overdraft_limit"] - balance["pending_holds"], 2
    )
    ledger_room = balance["current_balance"] + balance["overdraft_limit"]  # enough if holds were ignored
    fails(rt, sid, "transfer_between_accounts", "INSUFFICIENT_FUNDS", customer_id=held["customer_id"],
          from_account_id=held["id"], to_account_id=target["id"], amount=ledger_room)


def test_transfer_guards(rt, sid):
    customer, accounts = _customer_accounts(rt, sid, checking="active", credit="active")
    checking, credit = accounts["checking"]["id"], accounts["credit"]["id"]
    base = {"customer_id": customer, "amount": 10.0}
    error = fails(rt, sid, "transfer_between_accounts", "SAME_ACCOUNT", **base, from_account_id=checking,
                  to_account_id=checking)
    assert error["code"] == "INVALID_ARGUMENT"
    fails(rt, sid, "transfer_between_accounts", "ACCOUNT_TYPE_NOT_SUPPORTED", **base, from_account_id=credit,
          to_account_id=checking)
    other = rt.state(sid).accounts.first(lambda a: a["customer_id"] != customer, status="active")
    error = fails(rt, sid, "transfer_between_accounts", "ACCOUNT_NOT_OWNED", **base, from_account_id=checking,
                  to_account_id=other["id"])
    assert error["code"] == "PERMISSION_DENIED"
    error = fails(rt, sid, "transfer_between_accounts", "ACCOUNT_NOT_FOUND", **base, from_account_id=checking,
                  to_account_id="acc_missing")
    assert error["code"] == "NOT_FOUND"
    fails(rt, sid, "transfer_between_accounts", "CUSTOMER_NOT_FOUND", **{**base, "customer_id": "cus_missing"},
          from_account_id=checking, to_account_id=credit)


def test_frozen_and_closed_accounts_move_no_money(rt, sid):
    customer, accounts = _customer_accounts(rt, sid, checking="active", savings="frozen")
    frozen, checking = accounts["savings"]["id"], accounts["checking"]["id"]
    for source, target in ((frozen, checking), (checking, frozen)):
        fails(rt, sid, "transfer_between_accounts", "ACCOUNT_FROZEN", customer_id=customer, from_account_id=source,
              to_account_id=target, amount=1.0)
    assert ok(rt, sid, "get_balance", account_id=frozen)["available_balance"] == 0
    state = rt.state(sid)
    closed = state.accounts.first(status="closed")
    savings = state.accounts.first(customer_id=closed["customer_id"], type="savings", status="active")
    fails(rt, sid, "transfer_between_accounts", "ACCOUNT_CLOSED", customer_id=closed["customer_id"],
          from_account_id=savings["id"], to_account_id=closed["id"], amount=1.0)


def test_close_account_needs_a_zero_balance_and_no_holds(rt, sid):
    customer, accounts = _customer_accounts(rt, sid, checking="active", savings="active")
    savings, checking = accounts["savings"], accounts["checking"]
    fails(rt, sid, "close_account", "BALANCE_NOT_ZERO", customer_id=customer, account_id=savings["id"])
    ok(rt, sid, "transfer_between_accounts", customer_id=customer, from_account_id=savings["id"],
       to_account_id=checking["id"], amount=savings["balance"])
    closed = ok(rt, sid, "close_account", customer_id=customer, account_id=savings["id"])
    assert closed["account"]["status"] == "closed"
    fails(rt, sid, "close_account", "ACCOUNT_CLOSED", customer_id=customer, account_id=savings["id"])
    state = rt.state(sid)
    held = state.accounts.first(lambda a: banking._holds(state, a["id"]) > 0)
    fails(rt, sid, "close_account", "PENDING_TRANSACTIONS", customer_id=held["customer_id"], account_id=held["id"])


def test_closing_an_account_cancels_its_cards(rt, sid):
    state = rt.state(sid)
    credit = state.accounts.first(type="credit", status="active")
    card = state.cards.first(account_id=credit["id"])
    state.accounts.update(credit["id"], balance=0.0)  # arrange: a paid-off card with no holds
    for hold in state.transactions.where(account_id=credit["id"], status="pending"):
        state.transactions.delete(hold["id"])
    result = ok(rt, sid, "close_account", customer_id=credit["customer_id"], account_id=credit["id"])
    assert result["cancelled_card_ids"] == [card["id"]]
    assert rt.state(sid).cards.get(card["id"])["status"] == "cancelled"


def test_payee_must_be_verified_then_can_be_paid(rt, sid):
    state = rt.state(sid)
    payee = state.payees.first(status="pending_verification")
    customer = payee["customer_id"]
    account = state.accounts.first(customer_id=customer, type="checking", status="active")
    pay = {"customer_id": customer, "from_account_id": account["id"], "payee_id": payee["id"], "amount": 20.0}
    fails(rt, sid, "pay_payee", "PAYEE_NOT_VERIFIED", **pay)
    assert ok(rt, sid, "verify_payee", customer_id=customer, payee_id=payee["id"])["status"] == "verified"
    paid = ok(rt, sid, "pay_payee", **pay)
    tx = ok(rt, sid, "get_transaction", transaction_id=paid["transaction_id"])
    assert (tx["type"], tx["amount"], tx["payee_id"]) == ("payment", -20.0, payee["id"])
    assert ok(rt, sid, "get_balance", account_id=account["id"])["current_balance"] == paid["account_balance"]


def test_adding_payees_checks_routing_number_duplicates_and_the_bank(rt, sid):
    state = rt.state(sid)
    existing = state.payees.first()
    customer = existing["customer_id"]
    new = {"customer_id": customer, "name": "Jonas Weber", "account_number": "1234567890"}
    error = fails(rt, sid, "add_payee", "INVALID_ROUTING_NUMBER", **new, routing_number="021000132")
    assert error["code"] == "INVALID_ARGUMENT"
    duplicate = {**new, "routing_number": existing["routing_number"], "account_number": existing["account_number"]}
    error = fails(rt, sid, "add_payee", "PAYEE_ALREADY_EXISTS", **duplicate)
    assert error["code"] == "CONFLICT" and error["details"]["payee_id"] == existing["id"]
    unknown_bank = banking._with_check_digit("99900000")
    payee = ok(rt, sid, "add_payee", **new, routing_number=unknown_bank)
    assert (payee["status"], payee["bank_name"]) == ("pending_verification", None)
    fails(rt, sid, "verify_payee", "PAYEE_VERIFICATION_FAILED", customer_id=customer, payee_id=payee["id"])
    other = state.customers.first(lambda c: c["id"] != customer)["id"]
    fails(rt, sid, "remove_payee", "PAYEE_NOT_OWNED", customer_id=other, payee_id=payee["id"])
    ok(rt, sid, "remove_payee", customer_id=customer, payee_id=payee["id"])
    fails(rt, sid, "remove_payee", "PAYEE_NOT_FOUND", customer_id=customer, payee_id=payee["id"])


def test_daily_payment_limit(rt, sid):
    state = rt.state(sid)
    account = banking._checkings_with(state, 100)[0]
    customer = state.customers.get(account["customer_id"])
    payee = state.payees.first(customer_id=customer["id"], status="verified")
    pay = {"customer_id": customer["id"], "from_account_id": account["id"], "payee_id": payee["id"]}
    first = ok(rt, sid, "pay_payee", **pay, amount=100.0)
    assert first["daily_limit_remaining"] == customer["daily_payment_limit"] - 100
    error = fails(rt, sid, "pay_payee", "DAILY_LIMIT_EXCEEDED", **pay, amount=customer["daily_payment_limit"] - 99)
    assert error["code"] == "RESOURCE_EXHAUSTED"
    assert error["details"]["remaining_today"] == first["daily_limit_remaining"]


def test_card_freeze_lost_and_limits(rt, sid):
    state = rt.state(sid)
    card = state.cards.first(status="active", type="debit")
    owner = {"customer_id": card["customer_id"], "card_id": card["id"]}
    fails(rt, sid, "set_card_frozen", "CARD_NOT_FROZEN", **owner, frozen=False)
    ok(rt, sid, "set_card_frozen", **owner, frozen=True)
    error = fails(rt, sid, "set_card_frozen", "CARD_ALREADY_FROZEN", **owner, frozen=True)
    assert error["code"] == "CONFLICT"
    fails(rt, sid, "set_card_spending_limit", "SPENDING_LIMIT_TOO_HIGH", **owner, daily_limit=5_000.01)
    assert ok(rt, sid, "set_card_spending_limit", **owner, daily_limit=5_000)["card"]["daily_spending_limit"] == 5_000
    lost = ok(rt, sid, "report_card_lost", **owner)
    replacement = lost["replacement_card"]
    assert lost["cancelled_card"]["status"] == "cancelled" and replacement["status"] == "active"
    assert replacement["replaces_card_id"] == card["id"] and replacement["daily_spending_limit"] == 5_000
    assert replacement["account_id"] == card["account_id"] and replacement["id"] != card["id"]
    fails(rt, sid, "report_card_lost", "CARD_CANCELLED", **owner)
    fails(rt, sid, "set_card_frozen", "CARD_CANCELLED", **owner, frozen=True)
    fails(rt, sid, "set_card_spending_limit", "CARD_CANCELLED", **owner, daily_limit=100)
    other = state.customers.first(lambda c: c["id"] != card["customer_id"])["id"]
    fails(rt, sid, "set_card_frozen", "CARD_NOT_OWNED", customer_id=other, card_id=replacement["id"], frozen=True)


def test_credit_card_limit_is_capped_by_the_credit_limit(rt, sid):
    state = rt.state(sid)
    card = state.cards.first(lambda c: state.accounts.get(c["account_id"])["credit_limit"] < 10_000, type="credit")
    credit_limit = state.accounts.get(card["account_id"])["credit_limit"]
    error = fails(rt, sid, "set_card_spending_limit", "SPENDING_LIMIT_TOO_HIGH", customer_id=card["customer_id"],
                  card_id=card["id"], daily_limit=credit_limit + 1)
    assert error["details"]["max_limit"] == credit_limit


def test_a_card_on_a_frozen_account_stays_frozen(rt, sid):
    state = rt.state(sid)
    card = state.cards.first(status="frozen")
    state.accounts.update(card["account_id"], status="frozen", frozen_reason="test")  # arrange
    fails(rt, sid, "set_card_frozen", "ACCOUNT_FROZEN", customer_id=card["customer_id"], card_id=card["id"],
          frozen=False)


def test_statements_chain_month_to_month(rt, sid):
    state = rt.state(sid)
    account = state.accounts.first(type="checking", status="active")
    months = ["2025-12", "2026-01", "2026-02"]
    statements = [ok(rt, sid, "get_statement", account_id=account["id"], month=m) for m in months]
    for earlier, later in zip(statements, statements[1:], strict=False):
        assert earlier["closing_balance"] == later["opening_balance"]
    for st in statements:
        assert round(st["opening_balance"] + st["total_credits"] - st["total_debits"], 2) == st["closing_balance"]
        assert st["transaction_count"] == len(st["transactions"]) > 0
        if st["transactions"]:
            assert st["transactions"][-1]["balance_after"] == st["closing_balance"]
    fails(rt, sid, "get_statement", "STATEMENT_NOT_AVAILABLE", account_id=account["id"], month="2026-03")
    fails(rt, sid, "get_statement", "STATEMENT_NOT_AVAILABLE", account_id=account["id"], month="2025-11")
    closed = state.accounts.first(status="closed")
    fails(rt, sid, "get_statement", "STATEMENT_NOT_AVAILABLE", account_id=closed["id"], month="2026-01")


def test_list_transactions_filters_and_pages(rt, sid):
    account = rt.state(sid).accounts.first(type="checking", status="active")["id"]
    everything = ok(rt, sid, "list_transactions", account_id=account, limit=100)
    assert everything["total"] > 20
    stamps = [t["timestamp"] for t in everything["transactions"]]
    assert stamps == sorted(stamps, reverse=True)
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "list_transactions", account_id=account, limit=7, offset=offset)
        seen += [t["id"] for t in page["transactions"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == everything["total"]
    filtered = ok(rt, sid, "list_transactions", account_id=account, transaction_type="card_purchase", min_amount=50,
                  start_date="2026-01-01", end_date="2026-01-31", limit=100)["transactions"]
    assert filtered
    assert all(t["type"] == "card_purchase" and abs(t["amount"]) >= 50 for t in filtered)
    assert all(t["timestamp"].startswith("2026-01") for t in filtered)
    fails(rt, sid, "list_transactions", "INVALID_DATE_RANGE", account_id=account, start_date="2026-02-01",
          end_date="2026-01-01")
    fails(rt, sid, "list_transactions", "BAD_DATE", account_id=account, start_date="2026-02-30")
    bad = rt.call(sid, "list_transactions", {"account_id": account, "transaction_type": "bribe"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"


def test_ids_flow_from_lookup_to_transfer_to_history(rt, sid):
    state = rt.state(sid)
    name = state.customers.first()["name"]
    customer = ok(rt, sid, "find_customers", query=name.lower())["customers"][0]
    accounts = ok(rt, sid, "list_accounts", customer_id=customer["id"], status="active")["accounts"]
    source = next(a for a in accounts if a["type"] == "checking")
    target = next(a for a in accounts if a["id"] != source["id"])
    before = ok(rt, sid, "get_balance", account_id=source["id"])
    moved = ok(rt, sid, "transfer_between_accounts", customer_id=customer["id"], from_account_id=source["id"],
               to_account_id=target["id"], amount=123.456, memo="rent share")
    assert moved["amount"] == 123.46
    out = ok(rt, sid, "get_transaction", transaction_id=moved["transaction_id"])
    incoming = ok(rt, sid, "get_transaction", transaction_id=out["counterpart_transaction_id"])
    assert (out["amount"], incoming["amount"]) == (-123.46, 123.46)
    assert incoming["id"] == moved["incoming_transaction_id"] and incoming["account_id"] == target["id"]
    after = ok(rt, sid, "get_balance", account_id=source["id"])
    assert after["current_balance"] == round(before["current_balance"] - 123.46, 2)
    latest = ok(rt, sid, "list_transactions", account_id=source["id"], limit=1)["transactions"][0]
    assert latest["id"] == moved["transaction_id"] and latest["memo"] == "rent share"


def test_unknown_ids_fail_with_entity_specific_not_found(rt, sid):
    customer = rt.state(sid).customers.first()["id"]
    error = fails(rt, sid, "get_transaction", "TRANSACTION_NOT_FOUND", transaction_id="txn_missing")
    assert error["code"] == "NOT_FOUND"
    fails(rt, sid, "list_accounts", "CUSTOMER_NOT_FOUND", customer_id="cus_missing")
    fails(rt, sid, "get_statement", "ACCOUNT_NOT_FOUND", account_id="acc_missing", month="2026-01")
    fails(rt, sid, "report_card_lost", "CARD_NOT_FOUND", customer_id=customer, card_id="crd_missing")
    fails(rt, sid, "verify_payee", "PAYEE_NOT_FOUND", customer_id=customer, payee_id="pye_missing")
