"""Payments: a merchant's card-payments account, in the style of the payment-intent APIs card
processors offer. Customers' saved cards, payment intents through their status machine,
captures, refunds, the merchant balance and payouts to the merchant's bank accounts.

A payment intent moves through these statuses::

    requires_confirmation --confirm--> requires_capture --capture--> succeeded
            |           (capture_method "automatic": confirm goes straight to succeeded)
            +----cancel----> canceled <----cancel---- requires_capture

Money is counted in minor units (cents, pence) as integers, the way card APIs count it: 1999 is
19.99. A capture credits the amount less the processing fee (2.9% + 30) to the pending balance;
it becomes available for payouts two days after the capture. A refund is paid from the
available balance first, then from the pending one.

Creating calls (create_payment_intent, create_refund, create_payout) require an idempotency
key: repeating a call with the same key and the same parameters returns the object the first
call created and writes nothing, so a retry after a timeout can never charge, refund or pay out
twice; the same key with other parameters is refused (IDEMPOTENCY_KEY_REUSED). A call that
failed stored nothing, so retrying it with the same key runs it again.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    Conflict,
    InvalidArgument,
    PermissionDenied,
    Record,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    paginate,
    ref,
    require,
)

Currency = Literal["usd", "eur", "gbp"]
IntentStatus = Literal["requires_confirmation", "requires_capture", "succeeded", "canceled"]
CaptureMethod = Literal["automatic", "manual"]
CancellationReason = Literal["requested_by_customer", "duplicate", "fraudulent", "abandoned"]
RefundReason = Literal["requested_by_customer", "duplicate", "fraudulent"]

FEE_PERCENT = 2.9
FEE_FIXED = 30  # minor units, on every captured payment whatever its currency
FUNDS_AVAILABLE_AFTER_DAYS = 2
PAYOUT_BUSINESS_DAYS = 2
MINIMUM_CHARGE = 50

MERCHANTS = (  # name, statement descriptor, what it sells
    ("Bluebird Coffee Roasters", "BLUEBIRD COFFEE", ("Ethiopia Yirgacheffe 1 lb", "Espresso subscription",
                                                     "Burr grinder", "Pour-over kit", "Decaf Colombia 2 lb")),
    ("Fernhill Outdoor Co.", "FERNHILL OUTDOOR", ("2-person tent", "Down sleeping bag", "Trail runners",
                                                  "Rain shell", "Camp stove")),
    ("Paperlane Studio", "PAPERLANE", ("Linen notebook set", "Fountain pen", "Letterpress cards", "Desk planner 2026",
                                       "Watercolor kit")),
)
PAYOUT_NOTES = ("Weekly payout", "Supplier invoice", "Rent for the shop", "Payroll top-up", "Month-end sweep",
                "Tax reserve", "Equipment fund", "Owner draw")
CARD_BRANDS = ("visa", "mastercard", "amex")
# Issuer behaviour of the known test cards: they decline on confirmation, whoever tries them.
DECLINING_TEST_CARDS = {"0002": "generic_decline", "9995": "insufficient_funds"}
# Per customer, cycled: the saved cards and one situation its payments are in, so a seed of any
# size has an authorization to capture, a pending intent on a declining card, a disputed charge,
# an intent on an expired card, a partly refunded pound payment and a fully refunded one (with
# fewer customers than profiles, each customer takes several).
APPROVE, DECLINE, NO_FUNDS, EXPIRED = "approve", "decline", "no_funds", "expired"
PROFILES = (
    ((APPROVE,), "authorized"),
    ((DECLINE, APPROVE), "pending_on_declining_card"),
    ((APPROVE,), "disputed"),
    ((APPROVE, EXPIRED), "awaiting_confirmation"),
    ((NO_FUNDS,), "partly_refunded_gbp"),
    ((APPROVE, APPROVE), "authorized"),
    ((APPROVE,), "fully_refunded"),
    ((EXPIRED, APPROVE), "pending_on_expired_card"),
)
BANK_ACCOUNTS = (  # bank, currency, country, status, default for its currency
    ("Hudson Federal Bank", "usd", "US", "verified", True),
    ("Pacific Crest Bank", "usd", "US", "errored", False),  # a payout bounced: the account was closed
    ("Banque Lumière", "eur", "FR", "verified", True),
)


class PaymentsState(State):
    """One merchant's account; the merchant's name and descriptor are the var ``merchant``."""

    customers = Table("customer", prefix="cus")
    payment_methods = Table("payment_method", prefix="pm", index=("customer_id",))
    payment_intents = Table("payment_intent", prefix="pi", index=("customer_id", "status"))
    refunds = Table("refund", prefix="re", index=("payment_intent_id",))
    balances = Table("balance", prefix="bal")  # keyed by currency code
    bank_accounts = Table("bank_account", prefix="ba", index=("currency",))
    payouts = Table("payout", prefix="po")
    idempotency_keys = Table("idempotency_key", prefix="idk")  # keyed by the key itself


@attrs.frozen(kw_only=True)
class PaymentsOptions:
    """Seed size: each customer brings 1-2 saved cards and 2-5 payments."""

    customers: int = attrs.field(default=10, validator=attrs.validators.gt(0))


# -- shared rules ---------------------------------------------------------------------------------


def _fmt(amount: int, currency: str) -> str:
    return f"{amount / 100:,.2f} {currency.upper()}"


def _fee(amount: int) -> int:
    return int(amount * FEE_PERCENT / 100 + 0.5) + FEE_FIXED


def _add_business_days(day: dt.date, days: int) -> dt.date:
    while days:
        day += dt.timedelta(days=1)
        if day.weekday() < 5:
            days -= 1
    return day


def _card_expired(method: Record, today: dt.date) -> bool:
    card = method["card"]
    return (card["exp_year"], card["exp_month"]) < (today.year, today.month)


def _will_approve(state: PaymentsState, method: Record) -> bool:
    return method["issuer_response"] == "approve" and not _card_expired(method, state.today())


def _card_label(method: Record) -> str:
    return f"{method['card']['brand'].title()} ending {method['card']['last4']}"


def _replay(state: PaymentsState, key: str, operation: str, params: Record) -> Record | None:
    """The record of an earlier call with this idempotency key, or None for a new key; the same
    key sent with another operation or other parameters is a conflict."""
    earlier = state.idempotency_keys.find(key)
    if earlier is None:
        return None
    if earlier["operation"] != operation or earlier["params"] != params:
        raise Conflict(
            f"idempotency key {key!r} was already used for {earlier['operation']} with other parameters; "
            "use a new key for a new operation",
            reason="IDEMPOTENCY_KEY_REUSED",
            operation=earlier["operation"],
            object_id=earlier["object_id"],
        )
    return earlier


def _remember(state: PaymentsState, key: str, operation: str, params: Record, object_id: str) -> None:
    state.idempotency_keys.insert(
        {"id": key, "operation": operation, "params": params, "object_id": object_id,
         "created_at": iso_datetime(state.now())})


def _balance_delta(state: PaymentsState, currency: str, *, available: int = 0, pending: int = 0) -> None:
    balance = state.balances.get(currency)
    state.balances.update(currency, available=balance["available"] + available, pending=balance["pending"] + pending)


def _require_refund_funds(state: PaymentsState, currency: str, amount: int) -> None:
    balance = state.balances.get(currency)
    funds = balance["available"] + balance["pending"]
    require(amount <= funds, f"the {currency.upper()} balance ({_fmt(funds, currency)} available and pending) cannot "
            f"fund a refund of {_fmt(amount, currency)}", reason="INSUFFICIENT_BALANCE",
            available=balance["available"], pending=balance["pending"], requested=amount)


def _book_refund(state: PaymentsState, intent: Record, amount: int, reason: str, when: dt.datetime) -> Record:
    """Pay a refund out of the balance (available first, then pending) and record it."""
    currency = intent["currency"]
    from_available = max(0, min(amount, state.balances.get(currency)["available"]))
    _balance_delta(state, currency, available=-from_available, pending=-(amount - from_available))
    refunded = intent["amount_refunded"] + amount
    state.payment_intents.update(intent["id"], amount_refunded=refunded,
                                 refunded=refunded == intent["amount_received"])
    return state.refunds.insert({
        "payment_intent_id": intent["id"], "customer_id": intent["customer_id"], "amount": amount,
        "currency": currency, "reason": reason, "status": "succeeded", "created_at": iso_datetime(when),
    })


def _new_intent(state: PaymentsState, method: Record, amount: int, currency: str, capture_method: str,
                description: str | None, when: dt.datetime) -> Record:
    return state.payment_intents.insert({
        "customer_id": method["customer_id"],
        "payment_method_id": method["id"],
        "amount": amount,
        "currency": currency,
        "description": description,
        "statement_descriptor": state.get_var("merchant")["statement_descriptor"],
        "capture_method": capture_method,
        "status": "requires_confirmation",
        "amount_capturable": 0,
        "amount_received": 0,
        "amount_refunded": 0,
        "refunded": False,
        "fee": 0,
        "net": 0,
        "funds_available_on": None,
        "dispute": None,
        "created_at": iso_datetime(when),
        "authorized_at": None,
        "captured_at": None,
        "canceled_at": None,
        "cancellation_reason": None,
    })


def _capture(state: PaymentsState, intent: Record, amount: int, when: dt.datetime) -> Record:
    """Capture ``amount`` (the rest of the authorization is released) and credit the net to the
    balance: pending until two days after the capture, available after that."""
    fee = _fee(amount)
    available_on = when.date() + dt.timedelta(days=FUNDS_AVAILABLE_AFTER_DAYS)
    if available_on <= state.today():
        _balance_delta(state, intent["currency"], available=amount - fee)
    else:
        _balance_delta(state, intent["currency"], pending=amount - fee)
    return state.payment_intents.update(
        intent["id"], status="succeeded", amount_capturable=0, amount_received=amount, fee=fee, net=amount - fee,
        funds_available_on=available_on.isoformat(), captured_at=iso_datetime(when))


def _cancel(state: PaymentsState, intent: Record, reason: str, when: dt.datetime) -> Record:
    return state.payment_intents.update(intent["id"], status="canceled", amount_capturable=0,
                                        canceled_at=iso_datetime(when), cancellation_reason=reason)


def _authorize(state: PaymentsState, intent: Record, when: dt.datetime) -> Record:
    """A confirmed intent: authorized for its amount, captured at once when capture is automatic."""
    intent = state.payment_intents.update(intent["id"], status="requires_capture", amount_capturable=intent["amount"],
                                          authorized_at=iso_datetime(when))
    if intent["capture_method"] == "automatic":
        intent = _capture(state, intent, intent["amount"], when)
    return intent


# -- views ----------------------------------------------------------------------------------------


def _method_view(state: PaymentsState, method: Record) -> Record:
    customer = state.customers.get(method["customer_id"])
    view = {k: v for k, v in method.items() if k != "issuer_response"}  # the issuer's answer is not public
    return {**view, "customer_name": customer["name"], "customer_email": customer["email"],
            "expired": _card_expired(method, state.today())}


def _intent_view(state: PaymentsState, intent: Record) -> Record:
    return {**intent, "amount_refundable": intent["amount_received"] - intent["amount_refunded"],
            "refunds": state.refunds.where(payment_intent_id=intent["id"])}


# -- seed -----------------------------------------------------------------------------------------


def build_payments(rng: random.Random, options: PaymentsOptions) -> PaymentsState:
    """A merchant with customers, their saved cards, 60 days of payments, balances, bank accounts
    and past payouts."""
    state = PaymentsState(salt=f"{rng.getrandbits(64):016x}")
    name, descriptor, products = rng.choice(MERCHANTS)
    state.set_var("merchant", {"name": name, "statement_descriptor": descriptor, "country": "US"})
    opening = {"usd": rng.randint(6_000, 9_000) * 100, "eur": rng.randint(500, 1_500) * 100, "gbp": 0}
    for currency, available in opening.items():
        state.balances.insert({"id": currency, "currency": currency, "available": available, "pending": 0})
    for bank, currency, country, status, default in BANK_ACCOUNTS:
        state.bank_accounts.insert({"bank_name": bank, "last4": fake.digits(rng, 4), "currency": currency,
                                    "country": country, "status": status, "default_for_currency": default})
    emails: set[str] = set()
    for index in range(options.customers):
        profiles = PROFILES[index::options.customers] if options.customers < len(PROFILES) else [
            PROFILES[index % len(PROFILES)]]
        _seed_customer(state, rng, profiles, products, emails)
    _seed_payouts(state, rng)
    return state


def _seed_customer(state: PaymentsState, rng: random.Random, profiles: Sequence[tuple[tuple[str, ...], str]],
                   products: tuple[str, ...], emails: set[str]) -> None:
    now = state.now()
    name = fake.full_name(rng)
    customer = state.customers.insert({
        "name": name, "email": fake.email_for(name, rng, emails),
        "created_at": iso_datetime(now - dt.timedelta(days=rng.randint(90, 900))),
    })
    methods = [_seed_card(state, rng, customer, kind) for cards, _ in profiles for kind in cards]
    good = next((m for m in methods if _will_approve(state, m)), methods[0])

    def order(days_ago: float, method: Record = good, currency: str = "usd", capture: str = "automatic") -> Record:
        amount = rng.randint(12, 240) * 100 + rng.choice((0, 0, 50, 99))
        description = f"Order #{1000 + state.next_counter('order_number')}: {rng.choice(products)}"
        return _new_intent(state, method, amount, currency, capture, description, now - dt.timedelta(days=days_ago))

    for _ in range(rng.randint(1, 3)):  # history: mostly captured card payments, some abandoned checkouts
        days_ago = rng.uniform(3, 60)
        intent = order(days_ago, currency=rng.choice(("usd",) * 8 + ("eur", "eur")))
        when = now - dt.timedelta(days=days_ago)
        if rng.random() < 0.2:
            _cancel(state, intent, "abandoned", when + dt.timedelta(hours=1))
            continue
        intent = _authorize(state, intent, when)
        if rng.random() < 0.15:
            _book_refund(state, intent, intent["amount_received"] // 4, "requested_by_customer",
                         when + dt.timedelta(days=1))
    for _, situation in profiles:
        _seed_situation(state, rng, situation, methods, order)


def _seed_situation(state: PaymentsState, rng: random.Random, situation: str, methods: list[Record],
                    order: Callable[..., Record]) -> None:
    now = state.now()
    if situation == "authorized":  # a manual-capture order waiting to ship, and this morning's payment
        _authorize(state, order(1.2, capture="manual"), now - dt.timedelta(days=1.2))
        _authorize(state, order(0.1), now - dt.timedelta(days=0.1))
    elif situation == "pending_on_declining_card":
        order(0.05, method=next(m for m in methods if m["issuer_response"] == "generic_decline"))
    elif situation == "disputed":
        intent = _authorize(state, order(20), now - dt.timedelta(days=20))
        state.payment_intents.update(intent["id"], dispute={
            "status": "needs_response", "reason": rng.choice(("fraudulent", "product_not_received")),
            "amount": intent["amount"], "opened_at": iso_datetime(now - dt.timedelta(days=4))})
    elif situation == "awaiting_confirmation":  # back to finish a checkout abandoned last week
        _cancel(state, order(6, currency="eur"), "abandoned", now - dt.timedelta(days=5))
        order(0.02, currency="eur")
    elif situation == "partly_refunded_gbp":
        intent = _authorize(state, order(1, currency="gbp"), now - dt.timedelta(days=1))
        _book_refund(state, intent, intent["amount_received"] * 3 // 10, "requested_by_customer",
                     now - dt.timedelta(hours=5))
    elif situation == "fully_refunded":
        intent = _authorize(state, order(9), now - dt.timedelta(days=9))
        _book_refund(state, intent, intent["amount_received"], "duplicate", now - dt.timedelta(days=8))
    elif situation == "pending_on_expired_card":
        order(0.1, method=next(m for m in methods if _card_expired(m, state.today())))


def _seed_card(state: PaymentsState, rng: random.Random, customer: Record, kind: str) -> Record:
    today = state.today()
    last4 = {DECLINE: "0002", NO_FUNDS: "9995"}.get(kind) or fake.digits(rng, 4)
    while kind in (APPROVE, EXPIRED) and last4 in DECLINING_TEST_CARDS:
        last4 = fake.digits(rng, 4)
    exp_year = today.year - 1 if kind == EXPIRED else today.year + rng.randint(1, 4)
    brand = "visa" if kind in (DECLINE, NO_FUNDS) else rng.choice(CARD_BRANDS)
    return state.payment_methods.insert({
        "customer_id": customer["id"],
        "type": "card",
        "card": {"brand": brand, "last4": last4, "exp_month": rng.randint(1, 12), "exp_year": exp_year,
                 "funding": rng.choice(("credit", "credit", "debit")), "country": "US"},
        "billing_name": customer["name"],
        "created_at": customer["created_at"],
        "issuer_response": DECLINING_TEST_CARDS.get(last4, "approve"),
    })


def _seed_payouts(state: PaymentsState, rng: random.Random) -> None:
    """Weekly payouts of part of the available balance over the last weeks, all arrived."""
    for currency, weeks in (("usd", 4), ("eur", 1)):
        account = state.bank_accounts.first(currency=currency, default_for_currency=True)
        for week in range(weeks, 0, -1):
            amount = state.balances.get(currency)["available"] * rng.randint(10, 25) // 100
            if amount < 100:
                continue
            created = state.now() - dt.timedelta(days=7 * week + 3)
            _balance_delta(state, currency, available=-amount)
            state.payouts.insert({
                "amount": amount, "currency": currency, "bank_account_id": account["id"], "status": "paid",
                "method": "standard", "description": "Weekly payout", "created_at": iso_datetime(created),
                "arrival_date": _add_business_days(created.date(), PAYOUT_BUSINESS_DAYS).isoformat(),
            })


# -- examples: arguments valid on a fresh seed of any size ------------------------------------------


def _usable_card(s: PaymentsState, **match: Any) -> Record:
    return s.payment_methods.first(lambda m: _will_approve(s, m), **match)


def _confirmable(s: PaymentsState) -> Record:
    """A requires_confirmation intent whose card will be approved."""
    return s.payment_intents.first(lambda i: _will_approve(s, s.payment_methods.get(i["payment_method_id"])),
                                   status="requires_confirmation")


def _declined_intent_with_other_card(s: PaymentsState) -> Record:
    """A requires_confirmation intent on a declining card, confirmed with the customer's good card."""
    intent = s.payment_intents.first(
        lambda i: s.payment_methods.get(i["payment_method_id"])["issuer_response"] != "approve",
        status="requires_confirmation")
    return {"payment_intent_id": intent["id"],
            "payment_method_id": _usable_card(s, customer_id=intent["customer_id"])["id"]}


def _refundable(s: PaymentsState) -> Record:
    return s.payment_intents.first(lambda i: i["dispute"] is None and i["amount_received"] - i["amount_refunded"] >= 500
                                   and i["currency"] == "usd", status="succeeded")


def _capturable(s: PaymentsState) -> Record:
    return s.payment_intents.first(status="requires_capture")


def _said_part(rng: random.Random, whole: int, fallback: tuple[int, ...]) -> int:
    """Part of ``whole`` minor units as a merchant says it: about a half or a quarter in round
    units, or a round amount under it; one of ``fallback`` when there is nothing to part."""
    if whole < 400:
        return rng.choice(fallback)
    rounds = [a for a in (500, 1000, 1500, 2000, 2500, 5000) if a < whole]
    return rng.choice([whole // 200 * 100, whole // 400 * 100, *rounds[-2:]])


def _capture_amount(rng: random.Random, s: PaymentsState, args: Record | None = None) -> int:
    """A partial capture of the call's authorization."""
    intent = s.payment_intents.find((args or {}).get("payment_intent_id") or "")
    return _said_part(rng, intent["amount_capturable"] if intent else 0, (1000, 2500, 5000))


def _refund_amount(rng: random.Random, s: PaymentsState, args: Record | None = None) -> int:
    """A partial refund of what the call's payment received and has not refunded yet."""
    intent = s.payment_intents.find((args or {}).get("payment_intent_id") or "")
    left = intent["amount_received"] - intent["amount_refunded"] if intent else 0
    return _said_part(rng, left, (250, 300, 500, 750, 1000, 1500))


server = Server(
    "payments",
    sensitive=("customer_email",),  # the merchant's customers' addresses; a reply names the card, not them
    domain="finance",
    description="A merchant's card-payments account: customers' saved cards, payment intents (confirm, capture, "
    "cancel), refunds, the balance and payouts to bank accounts, with idempotency keys on every creating call.",
    state=PaymentsState,
    seed=build_payments,
    options=PaymentsOptions,
)

PaymentIntentId = Annotated[
    str, ref("payment_intent", "Id of the payment intent (pi_...), from create_payment_intent or list_payment_intents.")
]
PaymentMethodId = Annotated[str, ref("payment_method", "Id of a customer's saved card (pm_...), from "
                                                       "list_payment_methods.")]
IdempotencyKey = Annotated[str, Field(
    min_length=1, max_length=255,
    description="A unique key you choose for this operation, e.g. 'order-1042-charge'. Retrying with the same key "
    "and the same parameters returns the first result instead of acting twice.")]
Limit = Annotated[int, Field(ge=1, le=100, description="Page size.")]
Offset = Annotated[int, Field(ge=0, description="How many results to skip; pass next_offset from the previous page.")]


@server.tool(
    answers=("brand", "last4", "exp_month", "exp_year"),
    read_only=True,
    reads=["customer", "payment_method"],
    examples=[{}, lambda s: {"customer_query": s.customers.first()["name"].split()[-1]}],
    asks=lambda a: ("list the saved cards that haven't expired",
                    "show only the valid cards on file for {customer_query}",
                    "which unexpired cards do we have for {customer_query}") if a.get("include_expired") is False else (
        "list the saved cards", "show the cards on file for {customer_query}",
        "find the payment methods of customers matching {customer_query}",
        "look up {customer_query} among the customers' cards"),
)
def list_payment_methods(
    state: PaymentsState,
    customer_query: Annotated[str | None, Field(min_length=2, max_length=80, description=(
        "Part of the customer's name or e-mail (case-insensitive); all customers when omitted."))] = None,
    include_expired: Annotated[bool, Field(description="Also list cards past their expiry date.")] = True,
    limit: Limit = 20,
    offset: Offset = 0,
) -> dict:
    """Customers' saved cards: id, customer id, name and e-mail, brand, last 4 digits, expiry,
    funding (credit or debit) and whether the card has expired. An expired card cannot be
    confirmed. Returns a page of cards, the total and next_offset."""
    needle = (customer_query or "").lower()
    customers = [c["id"] for c in state.customers.where(lambda c: needle in c["name"].lower()
                                                        or needle in c["email"].lower())]
    methods = [_method_view(state, m) for cid in customers for m in state.payment_methods.where(customer_id=cid)]
    if not include_expired:
        methods = [m for m in methods if not m["expired"]]
    return paginate(methods, limit=limit, offset=offset, key="payment_methods")


@server.tool(
    answers=("amount", "status"),
    idempotent=True,  # the idempotency key makes a repeat return the first intent
    reads=["payment_method", "idempotency_key"],
    produces=["payment_intent"],
    errors=["PAYMENT_METHOD_NOT_FOUND", "IDEMPOTENCY_KEY_REUSED"],
    examples=[
        lambda s: {"amount": 2599, "currency": "usd", "payment_method_id": _usable_card(s)["id"],
                   "idempotency_key": "order-20260302-0001", "description": "Order #2001: gift card"},
        lambda s: {"amount": 12000, "currency": "eur", "payment_method_id": _usable_card(s)["id"],
                   "idempotency_key": "order-20260302-0002", "capture_method": "manual"},
    ],
    asks=lambda a: (
        "charge {payment_method_id} {amount} pence in {currency}, idempotency key {idempotency_key}",
        "create a payment of {amount} {currency} pence on {payment_method_id} with the key {idempotency_key}",
        "set up a {amount}-pence {currency} payment for \"{description}\" with key {idempotency_key}",
        "start a {currency} payment of {amount} pence with {capture_method} capture, key {idempotency_key}",
    ) if a.get("currency") == "gbp" else (
        "charge {payment_method_id} {amount} cents in {currency}, idempotency key {idempotency_key}",
        "create a payment of {amount} {currency} cents on {payment_method_id} with the key {idempotency_key}",
        "set up a {amount}-cent {currency} payment for \"{description}\" with key {idempotency_key}",
        "start a {currency} payment of {amount} cents with {capture_method} capture, key {idempotency_key}"),
    values={"amount": lambda rng, s: rng.choice((1999, 2599, 3250, 4500, 8900, 12000, 15999, 24900)),
            "idempotency_key": lambda rng, s: f"order-{s.today():%Y%m%d}-{rng.randint(1, 9999):04d}",
            "description": lambda rng, s: f"Order #{rng.randint(2002, 2999)}: "
                                          + rng.choice([item for _, _, items in MERCHANTS for item in items])},
)
def create_payment_intent(
    state: PaymentsState,
    amount: Annotated[int, Field(ge=MINIMUM_CHARGE, le=99_999_999, description=(
        "Amount to charge in the currency's minor unit (cents or pence), e.g. 1999 for 19.99; at least 50."))],
    currency: Annotated[Currency, Field(description="Three-letter currency code, lower case.")],
    payment_method_id: PaymentMethodId,
    idempotency_key: IdempotencyKey,
    capture_method: Annotated[CaptureMethod, Field(description=(
        "'automatic' captures the money on confirmation; 'manual' only authorizes it, for "
        "capture_payment_intent later (e.g. when the order ships)."))] = "automatic",
    description: Annotated[str | None, Field(max_length=200, description="What the payment is for.")] = None,
) -> dict:
    """Start a payment of a customer's saved card. The intent starts in requires_confirmation:
    call confirm_payment_intent to charge (or authorize) the card. Returns the intent and
    idempotent_replayed (true when the key was used before with the same parameters, in which
    case the first intent is returned and nothing new is created). Fails with
    PAYMENT_METHOD_NOT_FOUND or IDEMPOTENCY_KEY_REUSED (same key, other parameters)."""
    params = {"amount": amount, "currency": currency, "payment_method_id": payment_method_id,
              "capture_method": capture_method, "description": description}
    earlier = _replay(state, idempotency_key, "create_payment_intent", params)
    if earlier is not None:
        return {**_intent_view(state, state.payment_intents.get(earlier["object_id"])), "idempotent_replayed": True}
    method = state.payment_methods.get(payment_method_id)
    intent = _new_intent(state, method, amount, currency, capture_method, description, state.now())
    _remember(state, idempotency_key, "create_payment_intent", params, intent["id"])
    return {**_intent_view(state, intent), "idempotent_replayed": False}


@server.tool(
    idempotent=True,  # a repeat is refused with INTENT_NOT_CONFIRMABLE
    reads=["payment_intent", "payment_method"],
    mutates=["payment_intent", "balance"],
    errors=["PAYMENT_INTENT_NOT_FOUND", "PAYMENT_METHOD_NOT_FOUND", "PAYMENT_METHOD_NOT_OWNED",
            "INTENT_NOT_CONFIRMABLE", "CARD_EXPIRED", "CARD_DECLINED"],
    examples=[lambda s: {"payment_intent_id": _confirmable(s)["id"]}, _declined_intent_with_other_card],
    asks=("confirm {payment_intent_id}", "go ahead and charge {payment_intent_id}",
          "confirm {payment_intent_id} using {payment_method_id} instead",
          "retry {payment_intent_id} with {payment_method_id}"),
)
def confirm_payment_intent(
    state: PaymentsState,
    payment_intent_id: PaymentIntentId,
    payment_method_id: Annotated[str | None, ref("payment_method", (
        "Optional: another saved card of the same customer to use instead, e.g. after a decline."))] = None,
) -> dict:
    """Charge the card of a requires_confirmation intent. With capture_method automatic the money
    is captured and the intent is succeeded; with manual it is authorized and the intent is
    requires_capture. Returns the intent. Fails with CARD_DECLINED (the issuer refused; details
    carry the decline_code: try another card), CARD_EXPIRED, INTENT_NOT_CONFIRMABLE (not in
    requires_confirmation), or PAYMENT_METHOD_NOT_OWNED (the card belongs to another customer);
    a failed confirmation leaves the intent in requires_confirmation."""
    intent = state.payment_intents.get(payment_intent_id)
    method = state.payment_methods.get(payment_method_id or intent["payment_method_id"])
    require(method["customer_id"] == intent["customer_id"], f"{_card_label(method)} belongs to another customer",
            reason="PAYMENT_METHOD_NOT_OWNED", error=PermissionDenied)
    require(intent["status"] == "requires_confirmation",
            f"payment intent {payment_intent_id} is {intent['status']}; only requires_confirmation can be confirmed",
            reason="INTENT_NOT_CONFIRMABLE", status=intent["status"])
    card = method["card"]
    require(not _card_expired(method, state.today()),
            f"{_card_label(method)} expired {card['exp_month']:02d}/{card['exp_year']}; use another card",
            reason="CARD_EXPIRED", payment_method_id=method["id"])
    require(method["issuer_response"] == "approve", f"{_card_label(method)} was declined by the issuer; ask the "
            "customer for another card", reason="CARD_DECLINED", decline_code=method["issuer_response"],
            payment_method_id=method["id"])
    if method["id"] != intent["payment_method_id"]:
        intent = state.payment_intents.update(payment_intent_id, payment_method_id=method["id"])
    return _intent_view(state, _authorize(state, intent, state.now()))


@server.tool(
    idempotent=True,  # a repeat is refused with INTENT_NOT_CAPTURABLE
    reads=["payment_intent"],
    mutates=["payment_intent", "balance"],
    errors=["PAYMENT_INTENT_NOT_FOUND", "INTENT_NOT_CAPTURABLE", "AMOUNT_EXCEEDS_CAPTURABLE"],
    examples=[lambda s: {"payment_intent_id": _capturable(s)["id"]},
              lambda s: {"payment_intent_id": _capturable(s)["id"],
                         "amount_to_capture": _capturable(s)["amount_capturable"] // 2}],
    asks=("capture {payment_intent_id}", "collect the authorized money on {payment_intent_id}",
          "capture only {amount_to_capture} cents of {payment_intent_id}",
          "take {amount_to_capture} of the authorized amount on {payment_intent_id} and release the rest"),
    values={"amount_to_capture": _capture_amount},
)
def capture_payment_intent(
    state: PaymentsState,
    payment_intent_id: PaymentIntentId,
    amount_to_capture: Annotated[int | None, Field(ge=1, le=99_999_999, description=(
        "Minor units to capture; at most the authorized amount. Omit to capture all of it. A partial "
        "capture releases the rest of the authorization."))] = None,
) -> dict:
    """Capture an authorized (requires_capture) payment, fully or partly; the intent becomes
    succeeded and the net amount (after the 2.9% + 30 fee) is credited to the pending balance.
    Returns the intent and the amount released. Fails with INTENT_NOT_CAPTURABLE (not
    requires_capture: confirm it first, or it was already captured or canceled) or
    AMOUNT_EXCEEDS_CAPTURABLE."""
    intent = state.payment_intents.get(payment_intent_id)
    require(intent["status"] == "requires_capture",
            f"payment intent {payment_intent_id} is {intent['status']}; only requires_capture can be captured",
            reason="INTENT_NOT_CAPTURABLE", status=intent["status"])
    capturable = intent["amount_capturable"]
    amount = capturable if amount_to_capture is None else amount_to_capture
    require(amount <= capturable, f"only {_fmt(capturable, intent['currency'])} is authorized; "
            f"{_fmt(amount, intent['currency'])} requested", reason="AMOUNT_EXCEEDS_CAPTURABLE",
            error=InvalidArgument, amount_capturable=capturable)
    captured = _capture(state, intent, amount, state.now())
    return {**_intent_view(state, captured), "amount_released": capturable - amount}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with INTENT_NOT_CANCELABLE
    reads=["payment_intent"],
    mutates=["payment_intent"],
    errors=["PAYMENT_INTENT_NOT_FOUND", "INTENT_NOT_CANCELABLE"],
    examples=[lambda s: {"payment_intent_id": s.payment_intents.first(status="requires_confirmation")["id"]},
              lambda s: {"payment_intent_id": _capturable(s)["id"], "cancellation_reason": "fraudulent"}],
    asks=("cancel {payment_intent_id}", "void {payment_intent_id} as {cancellation_reason}",
          "call off {payment_intent_id}, reason: {cancellation_reason}", "release the hold on {payment_intent_id}"),
    values={"cancellation_reason": lambda rng, s: rng.choice(("requested_by_customer", "duplicate", "fraudulent",
                                                              "abandoned"))},
)
def cancel_payment_intent(
    state: PaymentsState,
    payment_intent_id: PaymentIntentId,
    cancellation_reason: Annotated[CancellationReason, Field(description="Why the payment is canceled.")] = (
        "requested_by_customer"),
) -> dict:
    """Cancel a payment that has not been captured (requires_confirmation or requires_capture);
    an authorization is released to the customer. Returns the canceled intent. Fails with
    INTENT_NOT_CANCELABLE once it is succeeded (refund it instead) or already canceled."""
    intent = state.payment_intents.get(payment_intent_id)
    require(intent["status"] in ("requires_confirmation", "requires_capture"),
            f"payment intent {payment_intent_id} is {intent['status']}; "
            + ("refund it instead" if intent["status"] == "succeeded" else "it is already canceled"),
            reason="INTENT_NOT_CANCELABLE", status=intent["status"])
    return _intent_view(state, _cancel(state, intent, cancellation_reason, state.now()))


@server.tool(
    answers=("amount", "status", "amount_refunded"),
    read_only=True,
    reads=["payment_intent", "refund"],
    errors=["PAYMENT_INTENT_NOT_FOUND"],
    examples=[lambda s: {"payment_intent_id": s.payment_intents.first()["id"]}],
    asks=("show me {payment_intent_id}", "what's the status of {payment_intent_id}",
          "how much of {payment_intent_id} has been refunded", "pull up the details of {payment_intent_id}"),
)
def get_payment_intent(state: PaymentsState, payment_intent_id: PaymentIntentId) -> dict:
    """One payment intent in full: status, amount, currency, card, capture method, amounts
    capturable, received, refunded and still refundable, fee and net, any dispute, timestamps and
    its refunds. Fails with PAYMENT_INTENT_NOT_FOUND."""
    return _intent_view(state, state.payment_intents.get(payment_intent_id))


@server.tool(
    answers=("amount", "status"),
    read_only=True,
    reads=["payment_intent", "customer"],
    errors=["CUSTOMER_NOT_FOUND"],
    examples=[{}, {"status": "succeeded", "limit": 5},
              lambda s: {"customer_id": s.customers.first()["id"], "status": "requires_capture"}],
    asks=("list the payment intents", "show the payments with status {status}", "list the payments of {customer_id}",
          "show me {limit} payments in status {status}", "which payments of {customer_id} are in {status}"),
)
def list_payment_intents(
    state: PaymentsState,
    status: Annotated[IntentStatus | None, Field(description="Only intents in this status.")] = None,
    customer_id: Annotated[str | None, ref("customer", (
        "Only this customer's intents (cus_...); customer ids come with list_payment_methods."))] = None,
    limit: Limit = 20,
    offset: Offset = 0,
) -> dict:
    """Payment intents, newest first: id, customer, amount, currency, status, description,
    amounts received and refunded, dispute and creation time. Returns a page, the total and
    next_offset. Fails with CUSTOMER_NOT_FOUND."""
    filters = {k: v for k, v in (("status", status), ("customer_id", customer_id)) if v}
    if customer_id is not None:
        state.customers.get(customer_id)
    intents = state.payment_intents.where(**filters)
    intents.sort(key=lambda i: i["created_at"], reverse=True)
    return paginate(intents, limit=limit, offset=offset, key="payment_intents")


@server.tool(
    answers=("amount", "status"),
    idempotent=True,  # the idempotency key makes a repeat return the first refund
    reads=["payment_intent", "balance", "idempotency_key"],
    produces=["refund"],
    mutates=["payment_intent", "balance"],
    errors=["PAYMENT_INTENT_NOT_FOUND", "IDEMPOTENCY_KEY_REUSED", "PAYMENT_NOT_CAPTURED", "CHARGE_DISPUTED",
            "CHARGE_ALREADY_REFUNDED", "REFUND_EXCEEDS_CAPTURED", "INSUFFICIENT_BALANCE"],
    examples=[lambda s: {"payment_intent_id": _refundable(s)["id"], "amount": 500,
                         "idempotency_key": "refund-20260302-0001"},
              lambda s: {"payment_intent_id": _refundable(s)["id"], "idempotency_key": "refund-20260302-0002",
                         "reason": "duplicate"}],
    asks=("refund {payment_intent_id} in full with the key {idempotency_key}",
          "refund {amount} cents of {payment_intent_id}, idempotency key {idempotency_key}",
          "give back {amount} cents on {payment_intent_id} (key {idempotency_key})",
          "issue a refund on {payment_intent_id} with reason {reason}, key {idempotency_key}"),
    values={"amount": _refund_amount,
            "idempotency_key": lambda rng, s: f"refund-{s.today():%Y%m%d}-{rng.randint(1, 9999):04d}",
            "reason": lambda rng, s: rng.choice(("requested_by_customer", "duplicate", "fraudulent"))},
)
def create_refund(
    state: PaymentsState,
    payment_intent_id: PaymentIntentId,
    idempotency_key: IdempotencyKey,
    amount: Annotated[int | None, Field(ge=1, le=99_999_999, description=(
        "Minor units to refund; at most what was captured and not yet refunded. Omit to refund all of it."))] = None,
    reason: Annotated[RefundReason, Field(description="Why the money goes back.")] = "requested_by_customer",
) -> dict:
    """Refund a captured (succeeded) payment, fully or partly; several partial refunds may add up
    to the captured amount. The refund is paid from the balance of the payment's currency
    (available first, then pending). Returns the refund, the intent's new refunded totals and
    idempotent_replayed. Fails with PAYMENT_NOT_CAPTURED (nothing captured: cancel an
    authorization instead), CHARGE_DISPUTED (the customer disputed it with their bank),
    CHARGE_ALREADY_REFUNDED, REFUND_EXCEEDS_CAPTURED, INSUFFICIENT_BALANCE or
    IDEMPOTENCY_KEY_REUSED."""
    params = {"payment_intent_id": payment_intent_id, "amount": amount, "reason": reason}
    earlier = _replay(state, idempotency_key, "create_refund", params)
    if earlier is not None:
        refund = state.refunds.get(earlier["object_id"])
        return {"refund": refund, "payment_intent": _intent_view(state, state.payment_intents.get(payment_intent_id)),
                "idempotent_replayed": True}
    intent = state.payment_intents.get(payment_intent_id)
    require(intent["status"] == "succeeded", f"payment intent {payment_intent_id} is {intent['status']}: nothing was "
            "captured" + ("; cancel it to release the authorization" if intent["status"] == "requires_capture" else ""),
            reason="PAYMENT_NOT_CAPTURED", status=intent["status"])
    require(intent["dispute"] is None, f"payment intent {payment_intent_id} is disputed; answer the dispute instead "
            "of refunding", reason="CHARGE_DISPUTED", dispute=intent["dispute"])
    remaining = intent["amount_received"] - intent["amount_refunded"]
    currency = intent["currency"]
    require(remaining > 0, f"payment intent {payment_intent_id} is already fully refunded",
            reason="CHARGE_ALREADY_REFUNDED", error=Conflict)
    amount = remaining if amount is None else amount
    require(amount <= remaining, f"only {_fmt(remaining, currency)} of the captured "
            f"{_fmt(intent['amount_received'], currency)} can still be refunded", reason="REFUND_EXCEEDS_CAPTURED",
            error=InvalidArgument, amount_refundable=remaining)
    _require_refund_funds(state, currency, amount)
    refund = _book_refund(state, intent, amount, reason, state.now())
    _remember(state, idempotency_key, "create_refund", params, refund["id"])
    return {"refund": refund, "payment_intent": _intent_view(state, state.payment_intents.get(payment_intent_id)),
            "idempotent_replayed": False}


@server.tool(
    read_only=True,
    reads=["balance", "bank_account", "payout"],
    examples=[{}],
    asks=("what's our balance", "how much money is available for payouts", "show the balance and our bank accounts",
          "check the account balance and the recent payouts"),
)
def get_balance(state: PaymentsState) -> dict:
    """The merchant's balance per currency (available for payouts now, and pending: captured in
    the last two days), the bank accounts payouts can go to (id, bank, last 4 digits, currency,
    status, default for its currency) and the five latest payouts."""
    payouts = sorted(state.payouts.all(), key=lambda p: p["created_at"], reverse=True)
    return {"merchant": state.get_var("merchant"), "balances": state.balances.all(),
            "bank_accounts": state.bank_accounts.all(), "recent_payouts": payouts[:5]}


@server.tool(
    answers=("amount", "status", "arrival_date"),
    idempotent=True,  # the idempotency key makes a repeat return the first payout
    reads=["balance", "bank_account", "idempotency_key"],
    produces=["payout"],
    mutates=["balance"],
    errors=["BANK_ACCOUNT_NOT_FOUND", "NO_BANK_ACCOUNT_FOR_CURRENCY", "BANK_ACCOUNT_CURRENCY_MISMATCH",
            "BANK_ACCOUNT_NOT_USABLE", "INSUFFICIENT_BALANCE", "IDEMPOTENCY_KEY_REUSED"],
    examples=[{"amount": 10000, "currency": "usd", "idempotency_key": "payout-20260302-0001"},
              lambda s: {"amount": 2500, "currency": "eur", "idempotency_key": "payout-20260302-0002",
                         "bank_account_id": s.bank_accounts.first(currency="eur", status="verified")["id"],
                         "description": "Supplier invoice"}],
    asks=lambda a: (
        "pay out {amount} pence in {currency} with key {idempotency_key}",
        "send {amount} {currency} pence to the bank, idempotency key {idempotency_key}",
        "transfer {amount} pence of our {currency} balance to {bank_account_id}, key {idempotency_key}, "
        "note \"{description}\"",
    ) if a.get("currency") == "gbp" else (
        "pay out {amount} cents in {currency} with key {idempotency_key}",
        "send {amount} {currency} cents to the bank, idempotency key {idempotency_key}",
        "transfer {amount} cents of our {currency} balance to {bank_account_id}, key {idempotency_key}, "
        "note \"{description}\"",
        "withdraw {amount} {currency} cents to the default account using key {idempotency_key}"),
    values={"amount": lambda rng, s: rng.choice((2500, 5000, 10000, 15000, 25000, 50000)),
            "idempotency_key": lambda rng, s: f"payout-{s.today():%Y%m%d}-{rng.randint(1, 9999):04d}",
            "description": lambda rng, s: rng.choice(PAYOUT_NOTES)},
)
def create_payout(
    state: PaymentsState,
    amount: Annotated[int, Field(ge=100, le=99_999_999, description=(
        "Minor units to send, e.g. 50000 for 500.00; at least 100 and at most the available balance."))],
    currency: Annotated[Currency, Field(description="Currency of the balance to pay out.")],
    idempotency_key: IdempotencyKey,
    bank_account_id: Annotated[str | None, ref("bank_account", (
        "Bank account to pay into (ba_...), from get_balance; the default account for the currency when "
        "omitted."))] = None,
    description: Annotated[str | None, Field(max_length=100, description="Note shown on the bank statement.")] = None,
) -> dict:
    """Send money from the available balance to one of the merchant's bank accounts; it arrives
    in two business days. Pending funds cannot be paid out yet. Returns the payout, the new
    balance of that currency and idempotent_replayed. Fails with INSUFFICIENT_BALANCE,
    NO_BANK_ACCOUNT_FOR_CURRENCY, BANK_ACCOUNT_CURRENCY_MISMATCH, BANK_ACCOUNT_NOT_USABLE (the
    bank rejected earlier payouts) or IDEMPOTENCY_KEY_REUSED."""
    params = {"amount": amount, "currency": currency, "bank_account_id": bank_account_id, "description": description}
    earlier = _replay(state, idempotency_key, "create_payout", params)
    if earlier is not None:
        return {"payout": state.payouts.get(earlier["object_id"]), "balance": state.balances.get(currency),
                "idempotent_replayed": True}
    if bank_account_id is None:
        account = state.bank_accounts.first(currency=currency, default_for_currency=True)
        require(account is not None, f"no bank account receives {currency.upper()} payouts; pay out another "
                "currency", reason="NO_BANK_ACCOUNT_FOR_CURRENCY", currency=currency)
    else:
        account = state.bank_accounts.get(bank_account_id)
        require(account["currency"] == currency, f"bank account ••{account['last4']} receives "
                f"{account['currency'].upper()}, not {currency.upper()}", reason="BANK_ACCOUNT_CURRENCY_MISMATCH",
                error=InvalidArgument, account_currency=account["currency"])
    require(account["status"] == "verified", f"bank account ••{account['last4']} at {account['bank_name']} is "
            f"{account['status']}; pay out to another account", reason="BANK_ACCOUNT_NOT_USABLE",
            status=account["status"])
    available = state.balances.get(currency)["available"]
    require(amount <= available, f"only {_fmt(available, currency)} is available for payouts; "
            f"{_fmt(amount, currency)} requested", reason="INSUFFICIENT_BALANCE", available=available, requested=amount)
    _balance_delta(state, currency, available=-amount)
    payout = state.payouts.insert({
        "amount": amount, "currency": currency, "bank_account_id": account["id"], "status": "pending",
        "method": "standard", "description": description, "created_at": iso_datetime(state.now()),
        "arrival_date": _add_business_days(state.today(), PAYOUT_BUSINESS_DAYS).isoformat(),
    })
    _remember(state, idempotency_key, "create_payout", params, payout["id"])
    return {"payout": payout, "balance": state.balances.get(currency), "idempotent_replayed": False}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
