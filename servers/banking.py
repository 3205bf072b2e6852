"""Banking: a retail bank's customers, accounts, payees, transactions, cards and statements.

Reads are keyed by entity id. Every tool that moves money or changes a setting also names the
acting customer and checks that the account, payee or card belongs to them (PERMISSION_DENIED
otherwise), the way a bank's authorization layer scopes a signed-in customer.

Money model: an account's ``balance`` is its posted ledger balance. Card authorizations are
``pending`` transactions (holds): they lower the available balance but not the ledger, so
``available = balance + overdraft or credit limit - holds`` (nothing is available on a frozen or
closed account). Credit accounts carry a negative balance, the amount owed; they receive
payments but never send money. All accounts are in USD.
"""

import datetime as dt
import hashlib
import random
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    ISO_DATE,
    Conflict,
    InvalidArgument,
    PermissionDenied,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    money,
    paginate,
    parse_date,
    ref,
    require,
)

HISTORY_DAYS = 90  # how far back seeded activity (and so statements) go
DEBIT_CARD_MAX_DAILY_LIMIT = 5_000.0  # bank policy; a credit card is capped by its credit limit
CURRENCY = "USD"
BANK_NAME = "Harborline Bank"

AccountType = Literal["checking", "savings", "credit"]
AccountStatus = Literal["active", "frozen", "closed"]
TransactionType = Literal[
    "deposit", "card_purchase", "atm_withdrawal", "refund", "transfer_in", "transfer_out", "payment", "fee", "interest"
]
PayeeStatus = Literal["verified", "pending_verification"]
CardStatus = Literal["active", "frozen", "cancelled"]


def _with_check_digit(first8: str) -> str:
    """Completes an ABA routing number: its 3-7-1 weighted digit sum is divisible by 10."""
    d = [int(c) for c in first8]
    partial = 3 * (d[0] + d[3] + d[6]) + 7 * (d[1] + d[4] + d[7]) + d[2] + d[5]
    return first8 + str(-partial % 10)


# The receiving banks the verification network knows; a payee at any other bank cannot be verified.
BANK_DIRECTORY = {
    _with_check_digit(prefix): name
    for prefix, name in (
        ("02100013", "Hudson Federal Bank"),
        ("02601147", "Atlantic Trust"),
        ("12100035", "Pacific Crest Bank"),
        ("07100082", "Lakeshore Savings"),
        ("11100061", "Lone Star Credit Union"),
        ("06100010", "Peachtree National"),
    )
}
EMPLOYERS = ("Northwind Logistics", "Brightside Health", "Cobalt Software", "Riverbend Schools", "Atlas Manufacturing")
LANDLORDS = ("Greenfield Property Management", "Oakridge Apartments", "Harbor View Residences")
UTILITIES = ("City Power & Light", "Metro Water Utility", "Summit Wireless", "Fibernet Internet")
MERCHANTS = (  # name, typical smallest and largest ticket
    ("Green Basket Grocery", 18.0, 160.0),
    ("Corner Coffee", 3.5, 14.0),
    ("Metro Transit", 2.75, 40.0),
    ("QuickFuel", 25.0, 80.0),
    ("Bookshelf & Co", 9.0, 60.0),
    ("Streamly", 9.99, 15.99),
    ("Pharma Plus", 6.0, 55.0),
    ("Urban Outfitters Supply", 25.0, 190.0),
    ("Noodle House", 12.0, 48.0),
    ("HomeGoods Depot", 15.0, 240.0),
)
# What customers type when they move or send money (synthesis draws from these).
BILL_NICKNAMES = {"City Power & Light": "Power bill", "Metro Water Utility": "Water bill", "Summit Wireless": "Phone",
                  "Fibernet Internet": "Internet"}
PERSON_NICKNAMES = ("Mom", "Babysitter", "Roommate", "Cleaner", "Piano lessons", "Contractor", "Dog walker", "Tutor")
PAYMENT_MEMOS = ("March rent", "Invoice 1042", "Dinner split", "Thanks!", "Birthday gift", "Water bill",
                 "Babysitting", "Concert tickets", "Loan repayment", "Deposit", "Monthly dues", "Repairs")
TRANSFER_MEMOS = ("Monthly savings", "Vacation fund", "Card payment", "Emergency fund", "Rainy day", "Holiday gifts",
                  "Tax set-aside", "Topping up checking", "New car fund", "Wedding savings")
ROUND_AMOUNTS = (20.0, 25.0, 40.0, 50.0, 60.0, 75.0, 100.0, 120.0, 150.0, 200.0)
# Account layouts (type, shape) cycled over customers, so a seed of any size has a zero-balance
# account to close, a frozen account, a near-empty one and a closed one.
PROFILES = (
    (("checking", "active"), ("savings", "active")),
    (("checking", "active"), ("savings", "empty"), ("credit", "active")),
    (("checking", "active"), ("credit", "active")),
    (("checking", "active"), ("savings", "frozen")),
    (("checking", "lean"), ("savings", "dormant")),
    (("checking", "active"), ("savings", "active"), ("checking", "closed")),
    (("checking", "active"), ("credit", "active"), ("savings", "active")),
    (("checking", "active"), ("savings", "active")),
)


class BankState(State):
    customers = Table("customer", prefix="cus")
    accounts = Table("account", prefix="acc", index=("customer_id",))
    payees = Table("payee", prefix="pye", index=("customer_id",))
    transactions = Table("transaction", prefix="txn", index=("account_id", "status", "customer_id"))
    cards = Table("card", prefix="crd", index=("customer_id",))


@attrs.frozen(kw_only=True)
class BankOptions:
    """Seed size: each customer brings 2-3 accounts, 2-5 payees, cards and 90 days of activity."""

    customers: int = attrs.field(default=8, validator=attrs.validators.gt(0))


# -- shared rules ---------------------------------------------------------------------------------


def _months_later(day: dt.date, months: int) -> str:
    total = day.year * 12 + day.month - 1 + months
    return f"{total // 12:04d}-{total % 12 + 1:02d}"


def _label(account: Record) -> str:
    return f"{account['type'].title()} ••{account['account_number_last4']}"


def _owned(collection: Any, record_id: str, customer_id: str) -> Record:
    """The record, once it is known to exist (…_NOT_FOUND) and to be the customer's (…_NOT_OWNED)."""
    record = collection.get(record_id)
    require(
        record["customer_id"] == customer_id,
        f"{collection.entity} {record_id} does not belong to customer {customer_id}",
        reason=f"{collection.entity.upper()}_NOT_OWNED",
        error=PermissionDenied,
    )
    return record


def _require_open(account: Record) -> None:
    require(account["status"] != "closed", f"{_label(account)} is closed", reason="ACCOUNT_CLOSED")
    require(
        account["status"] != "frozen",
        f"{_label(account)} is frozen ({account['frozen_reason']}); the customer must call the bank",
        reason="ACCOUNT_FROZEN",
    )


def _require_source(account: Record) -> None:
    """Money leaves open checking and savings accounts only."""
    _require_open(account)
    require(
        account["type"] != "credit",
        f"{_label(account)} is a credit account: it can receive payments but cannot send money",
        reason="ACCOUNT_TYPE_NOT_SUPPORTED",
    )


def _holds(state: BankState, account_id: str) -> float:
    """Pending card holds on one account (an indexed lookup, not a scan of the ledger)."""
    pending = state.transactions.where(lambda t: t["amount"] < 0, account_id=account_id, status="pending")
    return money(-sum(t["amount"] for t in pending))


def _available(account: Record, holds: float) -> float:
    if account["status"] != "active":
        return 0.0
    return money(account["balance"] + account["overdraft_limit"] + account["credit_limit"] - holds)


def _available_now(state: BankState, account: Record) -> float:
    return _available(account, _holds(state, account["id"]))


def _require_funds(state: BankState, account: Record, amount: float) -> None:
    available = _available_now(state, account)
    require(
        amount <= available,
        f"{_label(account)} has {available:.2f} {CURRENCY} available (overdraft and pending holds counted); "
        f"{amount:.2f} requested",
        reason="INSUFFICIENT_FUNDS",
        available=available,
        requested=amount,
    )


def _record_transaction(
    state: BankState,
    account: Record,
    amount: float,
    kind: str,
    *,
    description: str,
    counterparty: str,
    when: dt.datetime,
    balance_after: float | None,
    status: str = "posted",
    tx_id: str | None = None,
    payee_id: str | None = None,
    counterpart_transaction_id: str | None = None,
    memo: str | None = None,
) -> Record:
    """The one shape of a transaction record, for seed data and tools alike."""
    record = {
        "account_id": account["id"],
        "customer_id": account["customer_id"],
        "type": kind,
        "amount": money(amount),
        "currency": CURRENCY,
        "status": status,
        "description": description,
        "counterparty": counterparty,
        "timestamp": iso_datetime(when),
        "balance_after": balance_after,
        "payee_id": payee_id,
        "counterpart_transaction_id": counterpart_transaction_id,
        "memo": memo,
    }
    if tx_id is not None:
        record["id"] = tx_id
    return state.transactions.insert(record)


def _post(
    state: BankState, account_id: str, amount: float, kind: str, when: dt.datetime | None = None, **fields: Any
) -> Record:
    """Books a posted transaction and moves the ledger balance with it."""
    account = state.accounts.get(account_id)
    balance = money(account["balance"] + amount)
    state.accounts.update(account_id, balance=balance)
    return _record_transaction(state, account, amount, kind, when=when or state.now(), balance_after=balance, **fields)


def _book_transfer(
    state: BankState, source: Record, target: Record, amount: float, memo: str | None, when: dt.datetime | None = None
) -> tuple[Record, Record]:
    """Both legs of an internal transfer, each naming the other."""
    out_id, in_id = state.transactions.new_id(), state.transactions.new_id()
    out = _post(
        state, source["id"], -amount, "transfer_out", when, tx_id=out_id, counterpart_transaction_id=in_id, memo=memo,
        description=f"Transfer to {_label(target)}", counterparty=_label(target),
    )
    inn = _post(
        state, target["id"], amount, "transfer_in", when, tx_id=in_id, counterpart_transaction_id=out_id, memo=memo,
        description=f"Transfer from {_label(source)}", counterparty=_label(source),
    )
    return out, inn


def _payments_today(state: BankState, customer_id: str) -> float:
    today = state.today().isoformat()
    sent = state.transactions.where(lambda t: t["timestamp"].startswith(today), customer_id=customer_id, type="payment")
    return money(-sum(t["amount"] for t in sent))


# -- seed -----------------------------------------------------------------------------------------


def build_bank(rng: random.Random, options: BankOptions) -> BankState:
    """Customers with 2-3 accounts each, payees, cards and 90 days of activity up to today."""
    state = BankState(salt=f"{rng.getrandbits(64):016x}")  # ids differ between seeds too
    history_start = state.today() - dt.timedelta(days=HISTORY_DAYS)
    state.set_var("history_start", history_start.isoformat())
    emails: set[str] = set()
    for index in range(options.customers):
        _seed_customer(state, rng, index, history_start, emails)
    return state


def _seed_customer(state: BankState, rng: random.Random, index: int, history_start: dt.date, emails: set[str]) -> None:
    name = fake.full_name(rng)
    customer = state.customers.insert({
        "name": name,
        "email": fake.email_for(name, rng, emails),
        "phone": fake.phone(rng),
        "address": fake.address(rng),
        "member_since": fake.date_between(rng, dt.date(2010, 1, 1), dt.date(2024, 6, 30)).isoformat(),
        "daily_payment_limit": rng.choice((2_500.0, 5_000.0, 10_000.0)),
    })
    layout = PROFILES[index % len(PROFILES)]
    shaped = [(_seed_account(state, rng, customer, kind, shape, history_start), shape) for kind, shape in layout]
    payees = _seed_payees(state, rng, customer, pending=index % 3 == 0)
    _seed_history(state, rng, shaped, payees, history_start)
    accounts = [state.accounts.get(account["id"]) for account, _ in shaped]
    _seed_cards(state, rng, customer, accounts, frozen=index % len(PROFILES) == 2)
    _seed_holds(state, rng, accounts)


def _seed_account(
    state: BankState, rng: random.Random, customer: Record, kind: str, shape: str, history_start: dt.date
) -> Record:
    credit_limit = float(rng.choice((2_000, 5_000, 8_000, 12_000))) if kind == "credit" else 0.0
    active = {"checking": (800, 6_000), "savings": (2_000, 40_000), "credit": (-0.3 * credit_limit, 0)}[kind]
    # Balance 90 days ago; an empty or closed account starts (and stays) at zero.
    opening = {"active": active, "lean": (20, 150), "frozen": (1_500, 20_000), "dormant": (0.5, 9.5)}.get(shape)
    member_since = dt.date.fromisoformat(customer["member_since"])
    return state.accounts.insert({
        "customer_id": customer["id"],
        "type": kind,
        "nickname": {"checking": "Everyday Checking", "savings": "High-Yield Savings", "credit": "Rewards Card"}[kind],
        "account_number_last4": fake.digits(rng, 4),
        "currency": CURRENCY,
        "status": {"frozen": "frozen", "closed": "closed"}.get(shape, "active"),
        "balance": money(fake.money(rng, *opening)) if opening else 0.0,
        "overdraft_limit": float(rng.choice((0, 250, 500))) if kind == "checking" and shape != "closed" else 0.0,
        "credit_limit": credit_limit,
        "interest_rate": {"checking": 0.01, "savings": rng.choice((3.75, 4.1)), "credit": 24.49}[kind],
        "opened_on": fake.date_between(rng, member_since, history_start - dt.timedelta(days=200)).isoformat(),
        "closed_on": (history_start - dt.timedelta(days=rng.randint(9, 99))).isoformat() if shape == "closed" else None,
        "frozen_reason": "suspicious activity under review" if shape == "frozen" else None,
    })


def _seed_payees(state: BankState, rng: random.Random, customer: Record, *, pending: bool) -> list[Record]:
    """Rent and a utility first (the history pays them), then people; maybe one not yet verified."""
    people = [fake.full_name(rng) for _ in range(rng.randint(0, 2) + pending)]
    names = [rng.choice(LANDLORDS), rng.choice(UTILITIES), *people]
    payees = []
    for n, payee_name in enumerate(names):
        routing = rng.choice(sorted(BANK_DIRECTORY))
        unverified = pending and n == len(names) - 1
        added_days_ago = rng.randint(1, 5) if unverified else rng.randint(120, 900)
        payees.append(state.payees.insert({
            "customer_id": customer["id"],
            "name": payee_name,
            "nickname": ("Rent", "Utilities")[n] if n < 2 else None,
            "bank_name": BANK_DIRECTORY[routing],
            "routing_number": routing,
            "account_number": fake.digits(rng, 10),
            "status": "pending_verification" if unverified else "verified",
            "added_on": (state.today() - dt.timedelta(days=added_days_ago)).isoformat(),
        }))
    return payees


def _seed_history(
    state: BankState, rng: random.Random, shaped: list[tuple[Record, str]], payees: list[Record], start: dt.date
) -> None:
    """Simulates the activity day by day in clock order, through the booking code the tools use.
    A debit that would break an account's floor (zero, or minus its overdraft or credit limit) is
    not made, so the history never shows an impossible balance."""
    by_shape = {(account["type"], shape): account for account, shape in shaped}
    lean = ("checking", "lean") in by_shape
    checking = by_shape[("checking", "lean" if lean else "active")]
    savings, credit = by_shape.get(("savings", "active")), by_shape.get(("credit", "active"))
    earning = [account for account, shape in shaped if account["type"] == "savings" and shape in ("active", "frozen")]
    employer = rng.choice(EMPLOYERS)
    pay = fake.money(rng, 450, 700) if lean else fake.money(rng, 1_400, 3_600)
    rent = 0.0 if lean else money(pay * rng.uniform(0.7, 1.1))
    payday_offset = rng.randint(0, 13)

    def headroom(account: Record, *, overdraft: bool = True) -> float:
        current = state.accounts.get(account["id"])
        return current["balance"] + current["credit_limit"] + (current["overdraft_limit"] if overdraft else 0)

    def spend(account: Record, amount: float, kind: str, when: dt.datetime, counterparty: str, **fields: Any) -> None:
        if amount <= headroom(account):
            _post(state, account["id"], -amount, kind, when, counterparty=counterparty, **fields)

    for offset in range(HISTORY_DAYS):
        day = start + dt.timedelta(days=offset)

        def at(hour: int, day: dt.date = day) -> dt.datetime:
            return dt.datetime(day.year, day.month, day.day, hour, rng.randint(0, 59), tzinfo=dt.UTC)

        # Clock order within a day: interest 05h, payroll 06h, bills 08h, transfers 10h, cash 12h,
        # card purchases in the afternoon.
        for account in earning if day.day == 1 else ():
            interest = money(state.accounts.get(account["id"])["balance"] * account["interest_rate"] / 1200)
            if interest >= 0.01:
                _post(state, account["id"], interest, "interest", at(5), counterparty=BANK_NAME, description="Interest")
        if (offset + payday_offset) % 14 == 0:
            _post(state, checking["id"], pay, "deposit", at(6), counterparty=employer, description="Payroll")
        for payee, due_day, amount in ((payees[0], 1, rent), (payees[1], 10, fake.money(rng, 45, 180))):
            if day.day == due_day and amount:
                spend(checking, amount, "payment", at(8), payee["name"], payee_id=payee["id"],
                      description=f"Payment to {payee['name']}")
        if day.day == 15 and savings and not lean:
            amount = float(round(pay * rng.uniform(0.25, 0.5), -1))
            if amount <= headroom(checking, overdraft=False):
                _book_transfer(state, checking, savings, amount, "Monthly savings", at(10))
        if day.day == 20 and credit:
            amount = money(-state.accounts.get(credit["id"])["balance"] * rng.uniform(0.5, 1.0))
            if 1 <= amount <= headroom(checking, overdraft=False):
                _book_transfer(state, checking, credit, amount, "Card payment", at(10))
        if rng.random() < 0.04:
            when = at(12)
            spend(checking, float(20 * rng.randint(2, 10)), "atm_withdrawal", when, "ATM 24/7 Main St",
                  description="ATM withdrawal")
            if rng.random() < 0.5:
                spend(checking, 3.0, "fee", when, BANK_NAME, description="Out-of-network ATM fee")
        for account, chance in ((checking, 0.6), (credit, 0.35)):
            if account and rng.random() < chance:
                merchant, low, high = rng.choice(MERCHANTS)
                spend(account, fake.money(rng, low, high), "card_purchase", at(rng.randint(13, 21)), merchant,
                      description=f"Card purchase {merchant}")
                if rng.random() < 0.03:
                    _post(state, account["id"], fake.money(rng, 5, low + 5), "refund", at(22), counterparty=merchant,
                          description=f"Refund {merchant}")


def _seed_cards(state: BankState, rng: random.Random, customer: Record, accounts: list[Record], frozen: bool) -> None:
    for account in accounts:
        if account["type"] == "savings":
            continue
        debit = account["type"] == "checking"
        status = "cancelled" if account["status"] == "closed" else "frozen" if frozen and debit else "active"
        issued = fake.date_between(rng, state.today() - dt.timedelta(days=1_000), state.today() - dt.timedelta(days=60))
        state.cards.insert({
            "customer_id": customer["id"],
            "account_id": account["id"],
            "type": "debit" if debit else "credit",
            "network": "Visa" if debit else rng.choice(("Visa", "Mastercard")),
            "last4": fake.digits(rng, 4),
            "cardholder_name": customer["name"].upper(),
            "expires": _months_later(issued, 48),
            "status": status,
            "daily_spending_limit": float(rng.choice((1_000, 2_000, 3_000))),
            "issued_on": issued.isoformat(),
            "cancel_reason": "account_closed" if status == "cancelled" else None,
            "replaces_card_id": None,
        })


def _seed_holds(state: BankState, rng: random.Random, accounts: list[Record]) -> None:
    """Card authorizations from the last day that have not posted yet."""
    for account in accounts:
        if account["status"] != "active" or account["type"] == "savings":
            continue
        holds = 0.0  # counted here: scanning all transactions per account would make seeding quadratic
        for _ in range(rng.choice((0, 0, 1, 2))):
            merchant, low, high = rng.choice(MERCHANTS)
            amount = fake.money(rng, low, high)
            if amount > _available(account, holds):
                continue
            holds += amount
            when = state.now() - dt.timedelta(minutes=rng.randint(30, 20 * 60))
            _record_transaction(state, account, -amount, "card_purchase", when=when, balance_after=None,
                                status="pending", counterparty=merchant, description=f"Card purchase {merchant}")


# -- examples: arguments valid on a fresh seed of any size ------------------------------------------


def _first_customer(s: BankState) -> Record:
    return {"customer_id": s.customers.first()["id"]}


def _as_owner(record: Record, key: str) -> Record:
    return {"customer_id": record["customer_id"], key: record["id"]}


def _checkings_with(s: BankState, amount: float) -> list[Record]:
    funded = s.accounts.where(lambda a: _available_now(s, a) >= amount)
    return [a for a in funded if a["type"] == "checking"]


def _transfer_example(s: BankState) -> Record:
    for source in _checkings_with(s, 25):
        others = s.accounts.where(customer_id=source["customer_id"], status="active")
        target = next((a for a in others if a["id"] != source["id"]), None)
        if target:
            return {**_as_owner(source, "from_account_id"), "to_account_id": target["id"], "amount": 25.0}
    raise LookupError("no customer with a funded checking account and a second open account")


def _payment_example(s: BankState) -> Record:
    source = _checkings_with(s, 50)[0]
    payee = s.payees.first(customer_id=source["customer_id"], status="verified")
    return {**_as_owner(source, "from_account_id"), "payee_id": payee["id"], "amount": 50.0, "memo": "March"}


def _new_payee(rng: random.Random) -> tuple[str, str]:
    """A payee's name and a nickname that fits it (synthesis values: each field draws the same
    payee, so with the same seed the name and nickname agree)."""
    if rng.random() < 0.4:
        business = rng.choice((*LANDLORDS, *UTILITIES))
        return business, BILL_NICKNAMES.get(business) or rng.choice(("Rent", "Landlord", "Apartment"))
    return fake.full_name(rng), rng.choice(PERSON_NICKNAMES)


def _closable_example(s: BankState) -> Record:
    account = s.accounts.first(lambda a: a["balance"] == 0 and not _holds(s, a["id"]), status="active")
    return _as_owner(account, "account_id")


def _checking_example(s: BankState, **extra: Any) -> Record:
    return {"account_id": s.accounts.first(type="checking", status="active")["id"], **extra}


# -- server and tools -----------------------------------------------------------------------------

server = Server(
    "banking",
    domain="finance",
    description="A retail bank: customers, checking/savings/credit accounts, balances and holds, transfers, "
    "payees, transaction history, cards and monthly statements.",
    state=BankState,
    seed=build_bank,
    options=BankOptions,
)

CustomerId = Annotated[str, ref("customer", "Id of the customer acting (cus_...), from find_customers.")]
AccountId = Annotated[str, ref("account", "Id of the account (acc_...), from list_accounts.")]
PayeeId = Annotated[str, ref("payee", "Id of the payee (pye_...), from list_payees or add_payee.")]
CardId = Annotated[str, ref("card", "Id of the card (crd_...), from list_cards.")]
Amount = Annotated[float, Field(ge=0.01, le=1_000_000, description="Amount in USD; rounded to cents.")]
Memo = Annotated[str | None, Field(max_length=140, description="Optional note shown on the transaction.")]


@server.tool(
    answers=("email", "phone"),
    read_only=True,
    reads=["customer"],
    examples=[lambda s: {"query": s.customers.first()["name"].split()[1]}],
    asks=("find customers matching {query}", "look up {query} among the customers",
          "search the customer list for {query}", "pull up the customer profile for {query}"),
)
def find_customers(
    state: BankState,
    query: Annotated[str, Field(min_length=2, max_length=80, description="Part of a name, e-mail or phone number.")],
) -> dict:
    """Find customers whose name, e-mail or phone contains the query (case-insensitive). Returns up
    to 20 customer profiles (id, name, contact details, daily payment limit) and the total number
    of matches; an empty list when nobody matches."""
    needle = query.lower()
    matches = state.customers.where(lambda c: any(needle in c[f].lower() for f in ("name", "email", "phone")))
    return paginate(matches, limit=20, key="customers")


@server.tool(
    answers=("type", "available_balance", "status"),
    read_only=True,
    reads=["customer", "account", "transaction"],
    errors=["CUSTOMER_NOT_FOUND"],
    examples=[_first_customer, lambda s: {**_first_customer(s), "status": "active", "account_type": "checking"}],
    asks=("list the accounts of {customer_id}", "show me all my accounts with their balances",
          "pull up every account {customer_id} holds",
          "show only the {status} {account_type} accounts of {customer_id}",
          "list my {account_type} accounts"),
)
def list_accounts(
    state: BankState,
    customer_id: CustomerId,
    status: Annotated[AccountStatus | None, Field(description="Only accounts in this status.")] = None,
    account_type: Annotated[AccountType | None, Field(description="Only accounts of this type.")] = None,
) -> dict:
    """List a customer's accounts with ledger balance, pending holds, available balance, overdraft
    or credit limit, interest rate and status. Fails with CUSTOMER_NOT_FOUND."""
    state.customers.get(customer_id)
    filters = {k: v for k, v in (("status", status), ("type", account_type)) if v}
    accounts = []
    for account in state.accounts.where(customer_id=customer_id, **filters):
        held = _holds(state, account["id"])
        accounts.append({**account, "pending_holds": held, "available_balance": _available(account, held)})
    return {"customer_id": customer_id, "accounts": accounts}


@server.tool(
    answers=("available_balance", "current_balance"),
    read_only=True,
    reads=["account", "transaction"],
    errors=["ACCOUNT_NOT_FOUND"],
    examples=[lambda s: {"account_id": s.accounts.first(status="active")["id"]}],
    asks=("check the balance of {account_id}", "tell me how much money is in {account_id}",
          "show the available balance on {account_id}", "look up what's left in {account_id} after pending holds"),
)
def get_balance(state: BankState, account_id: AccountId) -> dict:
    """Current (posted) balance, pending card holds and available balance of one account, with its
    overdraft or credit limit. Available is 0 on a frozen or closed account. Fails with
    ACCOUNT_NOT_FOUND."""
    account = state.accounts.get(account_id)
    holds = _holds(state, account_id)
    return {
        "account_id": account_id,
        "type": account["type"],
        "status": account["status"],
        "currency": account["currency"],
        "current_balance": account["balance"],
        "pending_holds": holds,
        "available_balance": _available(account, holds),
        "overdraft_limit": account["overdraft_limit"],
        "credit_limit": account["credit_limit"],
        "as_of": iso_datetime(state.now()),
    }


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with ACCOUNT_CLOSED and changes nothing
    reads=["customer", "account", "transaction"],
    mutates=["account", "card"],
    errors=["CUSTOMER_NOT_FOUND", "ACCOUNT_NOT_FOUND", "ACCOUNT_NOT_OWNED", "ACCOUNT_CLOSED", "ACCOUNT_FROZEN",
            "PENDING_TRANSACTIONS", "BALANCE_NOT_ZERO"],
    examples=[_closable_example],
    asks=("close {account_id}", "shut down {account_id} for good",
          "permanently close {account_id} and cancel its cards",
          "get rid of {account_id}, I don't use it anymore"),
)
def close_account(state: BankState, customer_id: CustomerId, account_id: AccountId) -> dict:
    """Close one of the customer's accounts for good and cancel the cards linked to it. Returns the
    closed account and the ids of the cancelled cards. The balance must be exactly 0.00 (move the
    money out or pay the card off first, else BALANCE_NOT_ZERO) and no card hold may be pending
    (PENDING_TRANSACTIONS). Fails with ACCOUNT_CLOSED, ACCOUNT_FROZEN or ACCOUNT_NOT_OWNED."""
    state.customers.get(customer_id)
    account = _owned(state.accounts, account_id, customer_id)
    _require_open(account)
    holds = _holds(state, account_id)
    require(not holds, f"{_label(account)} has {holds:.2f} in pending card holds", reason="PENDING_TRANSACTIONS")
    require(
        account["balance"] == 0,
        f"{_label(account)} has a balance of {account['balance']:.2f}; bring it to 0.00 first",
        reason="BALANCE_NOT_ZERO",
        balance=account["balance"],
    )
    closed = state.accounts.update(account_id, status="closed", closed_on=state.today().isoformat())
    cancelled = []
    for card in state.cards.where(lambda c: c["status"] != "cancelled", account_id=account_id):
        state.cards.update(card["id"], status="cancelled", cancel_reason="account_closed")
        cancelled.append(card["id"])
    return {"account": closed, "cancelled_card_ids": cancelled}


@server.tool(
    reads=["customer", "account", "transaction"],
    produces=["transaction"],
    mutates=["account"],
    errors=["CUSTOMER_NOT_FOUND", "ACCOUNT_NOT_FOUND", "ACCOUNT_NOT_OWNED", "SAME_ACCOUNT", "ACCOUNT_CLOSED",
            "ACCOUNT_FROZEN", "ACCOUNT_TYPE_NOT_SUPPORTED", "INSUFFICIENT_FUNDS"],
    examples=[_transfer_example],
    asks=("move ${amount} from {from_account_id} to {to_account_id}",
          "transfer ${amount} out of {from_account_id} into {to_account_id}",
          "put ${amount} into {to_account_id} from {from_account_id}",
          "send ${amount} from {from_account_id} over to {to_account_id} with the note \"{memo}\"",
          "shift ${amount} to {to_account_id}, memo \"{memo}\""),
    values={"amount": lambda rng, s: rng.choice(ROUND_AMOUNTS), "memo": lambda rng, s: rng.choice(TRANSFER_MEMOS)},
)
def transfer_between_accounts(
    state: BankState,
    customer_id: CustomerId,
    from_account_id: Annotated[str, ref("account", "Id of the customer's checking or savings account to send from.")],
    to_account_id: Annotated[str, ref("account", "Id of the customer's account to receive it (credit: a payment).")],
    amount: Amount,
    memo: Memo = None,
) -> dict:
    """Move money between two accounts of the same customer, immediately. Returns the outgoing and
    incoming transaction ids and both new balances. Fails with SAME_ACCOUNT, ACCOUNT_NOT_OWNED,
    ACCOUNT_FROZEN, ACCOUNT_CLOSED, ACCOUNT_TYPE_NOT_SUPPORTED (a credit account cannot send
    money) or INSUFFICIENT_FUNDS (more than the available balance)."""
    require(from_account_id != to_account_id, "cannot transfer to the same account", reason="SAME_ACCOUNT",
            error=InvalidArgument)
    state.customers.get(customer_id)
    source = _owned(state.accounts, from_account_id, customer_id)
    target = _owned(state.accounts, to_account_id, customer_id)
    _require_source(source)
    _require_open(target)
    amount = money(amount)
    _require_funds(state, source, amount)
    out, inn = _book_transfer(state, source, target, amount, memo)
    return {
        "transaction_id": out["id"],
        "incoming_transaction_id": inn["id"],
        "amount": amount,
        "from_account": {"id": from_account_id, "balance": out["balance_after"]},
        "to_account": {"id": to_account_id, "balance": inn["balance_after"]},
    }


@server.tool(
    answers=("bank_name", "status"),
    read_only=True,
    reads=["customer", "payee"],
    errors=["CUSTOMER_NOT_FOUND"],
    examples=[_first_customer, lambda s: {**_first_customer(s), "status": "verified"}],
    asks=("list my saved payees", "show everyone {customer_id} has set up as a payee",
          "pull up the payee list for {customer_id}", "show only the {status} payees of {customer_id}"),
)
def list_payees(
    state: BankState,
    customer_id: CustomerId,
    status: Annotated[PayeeStatus | None, Field(description="Only payees in this verification status.")] = None,
) -> dict:
    """List the external payees a customer saved: name, bank, routing and account number, and
    verification status (only verified payees can be paid). Fails with CUSTOMER_NOT_FOUND."""
    state.customers.get(customer_id)
    filters = {"status": status} if status else {}
    return {"customer_id": customer_id, "payees": state.payees.where(customer_id=customer_id, **filters)}


@server.tool(
    idempotent=True,  # the same payee twice is refused with PAYEE_ALREADY_EXISTS
    reads=["customer", "payee"],
    produces=["payee"],
    errors=["CUSTOMER_NOT_FOUND", "INVALID_ROUTING_NUMBER", "PAYEE_ALREADY_EXISTS"],
    examples=[lambda s: {**_first_customer(s), "name": "Harbor View Residences", "nickname": "New apartment",
                         "routing_number": sorted(BANK_DIRECTORY)[0], "account_number": "4829105736"}],
    asks=("add {name} as a payee, routing number {routing_number}, account {account_number}",
          "save {name} to my payees: routing {routing_number}, account number {account_number}",
          "set up a new payee, {name}, with account {account_number} at routing number {routing_number}",
          "add {name} (routing {routing_number}, account {account_number}) to the people I pay and call it "
          "\"{nickname}\""),
    values={
        "name": lambda rng, s: _new_payee(rng)[0],
        "routing_number": lambda rng, s: rng.choice(sorted(BANK_DIRECTORY)),
        "account_number": lambda rng, s: fake.digits(rng, rng.choice((8, 10, 12))),
        "nickname": lambda rng, s: _new_payee(rng)[1],
    },
)
def add_payee(
    state: BankState,
    customer_id: CustomerId,
    name: Annotated[str, Field(min_length=2, max_length=80, description="Name of the person or business to pay.")],
    routing_number: Annotated[str, Field(pattern=r"^\d{9}$", description="9-digit ABA routing number of their bank.")],
    account_number: Annotated[str, Field(pattern=r"^\d{4,17}$", description="Their account number (4-17 digits).")],
    nickname: Annotated[str | None, Field(max_length=40, description="Optional short label, e.g. 'Rent'.")] = None,
) -> dict:
    """Save an external payee for a customer. It starts as pending_verification: call verify_payee
    before paying it. Returns the new payee. Fails with INVALID_ROUTING_NUMBER (wrong check digit)
    or PAYEE_ALREADY_EXISTS (the same routing and account number is already saved)."""
    state.customers.get(customer_id)
    require(_with_check_digit(routing_number[:8]) == routing_number, f"{routing_number} is not a valid routing number",
            reason="INVALID_ROUTING_NUMBER", error=InvalidArgument)
    existing = state.payees.first(customer_id=customer_id, routing_number=routing_number, account_number=account_number)
    if existing:
        raise Conflict(f"already saved as payee {existing['id']} ({existing['name']})", reason="PAYEE_ALREADY_EXISTS",
                       payee_id=existing["id"])
    return state.payees.insert({
        "customer_id": customer_id,
        "name": name,
        "nickname": nickname,
        "bank_name": BANK_DIRECTORY.get(routing_number),
        "routing_number": routing_number,
        "account_number": account_number,
        "status": "pending_verification",
        "added_on": state.today().isoformat(),
    })


@server.tool(
    idempotent=True,
    reads=["customer", "payee"],
    mutates=["payee"],
    errors=["CUSTOMER_NOT_FOUND", "PAYEE_NOT_FOUND", "PAYEE_NOT_OWNED", "PAYEE_VERIFICATION_FAILED"],
    examples=[lambda s: _as_owner(s.payees.first(status="pending_verification"), "payee_id")],
    asks=("verify {payee_id}", "get {payee_id} verified so I can pay them", "run the bank verification on {payee_id}",
          "confirm the account details of {payee_id} with their bank"),
)
def verify_payee(state: BankState, customer_id: CustomerId, payee_id: PayeeId) -> dict:
    """Verify a payee's account with its bank so it can be paid. Returns the payee, now verified (a
    verified payee is returned unchanged). Fails with PAYEE_VERIFICATION_FAILED when no known bank
    has the routing number (the payee's bank_name is null): remove it and add the right details;
    PAYEE_NOT_OWNED for another customer's payee."""
    state.customers.get(customer_id)
    payee = _owned(state.payees, payee_id, customer_id)
    if payee["status"] == "verified":
        return payee
    require(payee["bank_name"] is not None, f"no bank answers for routing number {payee['routing_number']}",
            reason="PAYEE_VERIFICATION_FAILED")
    return state.payees.update(payee_id, status="verified")


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing to remove (PAYEE_NOT_FOUND) and changes nothing
    reads=["customer", "payee"],
    mutates=["payee"],
    errors=["CUSTOMER_NOT_FOUND", "PAYEE_NOT_FOUND", "PAYEE_NOT_OWNED"],
    examples=[lambda s: _as_owner(s.payees.first(), "payee_id")],
    asks=("remove {payee_id} from my payees", "delete {payee_id}", "take {payee_id} off the payee list",
          "drop {payee_id} from the saved payees, I don't pay them anymore"),
)
def remove_payee(state: BankState, customer_id: CustomerId, payee_id: PayeeId) -> dict:
    """Delete a saved payee; past payments to it stay in the history. Returns the removed payee.
    Fails with PAYEE_NOT_FOUND or PAYEE_NOT_OWNED."""
    state.customers.get(customer_id)
    _owned(state.payees, payee_id, customer_id)
    return {"removed": True, "payee": state.payees.delete(payee_id)}


@server.tool(
    reads=["customer", "account", "payee", "transaction"],
    produces=["transaction"],
    mutates=["account"],
    errors=["CUSTOMER_NOT_FOUND", "ACCOUNT_NOT_FOUND", "ACCOUNT_NOT_OWNED", "PAYEE_NOT_FOUND", "PAYEE_NOT_OWNED",
            "ACCOUNT_CLOSED", "ACCOUNT_FROZEN", "ACCOUNT_TYPE_NOT_SUPPORTED", "PAYEE_NOT_VERIFIED",
            "DAILY_LIMIT_EXCEEDED", "INSUFFICIENT_FUNDS"],
    examples=[_payment_example],
    asks=("pay {payee_id} ${amount} from {from_account_id}", "send ${amount} to {payee_id}",
          "make a ${amount} payment to {payee_id} out of {from_account_id}",
          "pay ${amount} to {payee_id} with the memo \"{memo}\"",
          "transfer ${amount} to {payee_id} from {from_account_id}, note: {memo}"),
    values={"amount": lambda rng, s: rng.choice(ROUND_AMOUNTS), "memo": lambda rng, s: rng.choice(PAYMENT_MEMOS)},
)
def pay_payee(
    state: BankState,
    customer_id: CustomerId,
    from_account_id: Annotated[str, ref("account", "Id of the customer's checking or savings account to pay from.")],
    payee_id: PayeeId,
    amount: Amount,
    memo: Memo = None,
) -> dict:
    """Send money to a verified payee; it posts immediately. Returns the transaction id, the new
    account balance and what is left of the customer's daily payment limit. Fails with
    PAYEE_NOT_VERIFIED (call verify_payee first), DAILY_LIMIT_EXCEEDED (today's payments would pass
    the customer's daily_payment_limit), INSUFFICIENT_FUNDS, ACCOUNT_FROZEN, ACCOUNT_CLOSED,
    ACCOUNT_TYPE_NOT_SUPPORTED (credit accounts cannot send money), ACCOUNT_NOT_OWNED or
    PAYEE_NOT_OWNED (not this customer's)."""
    customer = state.customers.get(customer_id)
    account = _owned(state.accounts, from_account_id, customer_id)
    payee = _owned(state.payees, payee_id, customer_id)
    _require_source(account)
    require(payee["status"] == "verified", f"payee {payee['name']} is not verified; call verify_payee first",
            reason="PAYEE_NOT_VERIFIED")
    amount = money(amount)
    remaining = money(customer["daily_payment_limit"] - _payments_today(state, customer_id))
    require(amount <= remaining, f"daily payment limit {customer['daily_payment_limit']:.2f}: {remaining:.2f} left",
            reason="DAILY_LIMIT_EXCEEDED", error=ResourceExhausted, remaining_today=remaining)
    _require_funds(state, account, amount)
    tx = _post(state, from_account_id, -amount, "payment", payee_id=payee_id, memo=memo, counterparty=payee["name"],
               description=f"Payment to {payee['name']}")
    return {
        "transaction_id": tx["id"],
        "amount": amount,
        "payee": {"id": payee_id, "name": payee["name"]},
        "account_balance": tx["balance_after"],
        "daily_limit_remaining": money(remaining - amount),
    }


@server.tool(
    answers=("amount", "timestamp", "status"),
    read_only=True,
    reads=["account", "transaction"],
    errors=["ACCOUNT_NOT_FOUND", "BAD_DATE", "INVALID_DATE_RANGE"],
    examples=[
        lambda s: _checking_example(s, limit=5),
        lambda s: _checking_example(s, transaction_type="card_purchase", min_amount=20, status="posted",
                                    start_date=_months_later(s.today(), -1) + "-01", end_date=s.today().isoformat()),
    ],
    asks=("show the recent transactions on {account_id}", "list the last {limit} transactions of {account_id}",
          "pull up the activity on {account_id} between {start_date} and {end_date}",
          "find {status} {transaction_type} transactions of at least ${min_amount} on {account_id} from {start_date} "
          "to {end_date}",
          "show the {status} {transaction_type} transactions on {account_id} since {start_date}"),
)
def list_transactions(
    state: BankState,
    account_id: AccountId,
    start_date: Annotated[str | None, Field(pattern=ISO_DATE, description="First day to include, YYYY-MM-DD.")] = None,
    end_date: Annotated[str | None, Field(pattern=ISO_DATE, description="Last day to include, YYYY-MM-DD.")] = None,
    transaction_type: Annotated[TransactionType | None, Field(description="Only transactions of this type.")] = None,
    min_amount: Annotated[float | None, Field(ge=0, description="Only amounts of at least this size.")] = None,
    status: Annotated[Literal["posted", "pending"] | None, Field(description="Only posted or pending ones.")] = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Page size.")] = 20,
    offset: Annotated[int, Field(ge=0, description="Matches to skip; pass the previous next_offset.")] = 0,
) -> dict:
    """One page of an account's transactions, newest first, filtered by date range, type, minimum
    amount and status. Amounts are signed (negative = money out). Returns the page, the total
    number of matches and next_offset (null on the last page). Fails with ACCOUNT_NOT_FOUND,
    BAD_DATE (no such calendar day) or INVALID_DATE_RANGE (start after end)."""
    state.accounts.get(account_id)
    start = parse_date(start_date, "start_date").isoformat() if start_date else "0000-00-00"
    end = parse_date(end_date, "end_date").isoformat() if end_date else "9999-99-99"
    require(start <= end, "start_date is after end_date", reason="INVALID_DATE_RANGE", error=InvalidArgument)
    filters = {k: v for k, v in (("type", transaction_type), ("status", status)) if v}

    def wanted(t: Record) -> bool:
        return start <= t["timestamp"][:10] <= end and abs(t["amount"]) >= (min_amount or 0)

    matches = state.transactions.where(wanted, account_id=account_id, **filters)
    matches.sort(key=lambda t: t["timestamp"], reverse=True)
    return {"account_id": account_id, **paginate(matches, limit=limit, offset=offset, key="transactions")}


@server.tool(
    answers=("amount", "timestamp", "status", "counterparty"),
    read_only=True,
    reads=["transaction"],
    errors=["TRANSACTION_NOT_FOUND"],
    examples=[lambda s: {"transaction_id": s.transactions.first(type="transfer_out")["id"]}],
    asks=("show me the details of {transaction_id}", "look up {transaction_id}",
          "pull up everything about {transaction_id}", "explain {transaction_id} to me"),
)
def get_transaction(
    state: BankState,
    transaction_id: Annotated[str, ref("transaction", "Id of the transaction (txn_...), from list_transactions.")],
) -> dict:
    """One transaction in full: account, type, signed amount, status, counterparty, timestamp,
    balance after it posted, the payee it paid and, for a transfer, the other leg's transaction
    id. Fails with TRANSACTION_NOT_FOUND."""
    return state.transactions.get(transaction_id)


@server.tool(
    answers=("last4", "status", "daily_spending_limit"),
    read_only=True,
    reads=["customer", "card"],
    errors=["CUSTOMER_NOT_FOUND"],
    examples=[_first_customer, lambda s: {**_first_customer(s), "status": "active"}],
    asks=("list my cards", "show all the cards of {customer_id}",
          "pull up the debit and credit cards {customer_id} has",
          "list only the {status} cards of {customer_id}"),
)
def list_cards(
    state: BankState,
    customer_id: CustomerId,
    status: Annotated[CardStatus | None, Field(description="Only cards in this status; all when omitted.")] = None,
) -> dict:
    """List a customer's debit and credit cards: linked account, last 4 digits, expiry, status
    (active, frozen, cancelled) and daily spending limit. Fails with CUSTOMER_NOT_FOUND."""
    state.customers.get(customer_id)
    filters = {"status": status} if status else {}
    return {"customer_id": customer_id, "cards": state.cards.where(customer_id=customer_id, **filters)}


@server.tool(
    idempotent=True,  # a repeat is refused (CARD_ALREADY_FROZEN / CARD_NOT_FROZEN) and changes nothing
    reads=["customer", "card", "account"],
    mutates=["card"],
    errors=["CUSTOMER_NOT_FOUND", "CARD_NOT_FOUND", "CARD_NOT_OWNED", "CARD_CANCELLED", "CARD_ALREADY_FROZEN",
            "CARD_NOT_FROZEN", "ACCOUNT_FROZEN", "ACCOUNT_CLOSED"],
    examples=[
        lambda s: {**_as_owner(s.cards.first(status="active"), "card_id"), "frozen": True},
        lambda s: {**_as_owner(s.cards.first(status="frozen"), "card_id"), "frozen": False},
    ],
    asks=lambda a: ("freeze {card_id}", "put a temporary block on {card_id}", "lock {card_id} for now",
                    "pause all new purchases on {card_id}") if a.get("frozen") else (
                    "unfreeze {card_id}", "lift the block on {card_id}", "unlock {card_id} so I can use it again",
                    "turn {card_id} back on"),
)
def set_card_frozen(
    state: BankState,
    customer_id: CustomerId,
    card_id: CardId,
    frozen: Annotated[bool, Field(description="true freezes the card (blocks new purchases), false unfreezes it.")],
) -> dict:
    """Freeze or unfreeze a card; freezing is temporary, unlike report_card_lost. Returns the card.
    Fails with CARD_ALREADY_FROZEN or CARD_NOT_FROZEN when it already is in that state,
    CARD_CANCELLED for a cancelled card, CARD_NOT_OWNED for another customer's, and ACCOUNT_FROZEN
    or ACCOUNT_CLOSED when unfreezing a card whose account is not open."""
    state.customers.get(customer_id)
    card = _owned(state.cards, card_id, customer_id)
    require(card["status"] != "cancelled", f"card ••{card['last4']} is cancelled", reason="CARD_CANCELLED")
    if frozen:
        require(card["status"] != "frozen", f"card ••{card['last4']} is already frozen", reason="CARD_ALREADY_FROZEN",
                error=Conflict)
    else:
        require(card["status"] == "frozen", f"card ••{card['last4']} is not frozen", reason="CARD_NOT_FROZEN",
                error=Conflict)
        _require_open(state.accounts.get(card["account_id"]))
    return state.cards.update(card_id, status="frozen" if frozen else "active")


@server.tool(
    answers=("status", "estimated_delivery"),
    destructive=True,
    idempotent=True,  # a repeat is refused with CARD_CANCELLED: one replacement only
    reads=["customer", "card", "account"],
    produces=["card"],
    mutates=["card"],
    errors=["CUSTOMER_NOT_FOUND", "CARD_NOT_FOUND", "CARD_NOT_OWNED", "CARD_CANCELLED", "ACCOUNT_CLOSED"],
    examples=[lambda s: {**_as_owner(s.cards.first(status="active"), "card_id"), "reason": "stolen"}],
    asks=("report {card_id} as {reason}", "cancel {card_id}, it was {reason}, and send me a replacement",
          "block {card_id} for good and order a new one", "report {card_id} lost and get a new card sent out"),
)
def report_card_lost(
    state: BankState,
    customer_id: CustomerId,
    card_id: CardId,
    reason: Annotated[Literal["lost", "stolen"], Field(description="Whether the card was lost or stolen.")] = "lost",
) -> dict:
    """Report a card lost or stolen: it is cancelled for good and a replacement with a new number,
    the same account and the same spending limit is issued. Returns the cancelled card, the
    replacement and its delivery date. Fails with CARD_CANCELLED (already cancelled),
    CARD_NOT_OWNED (another customer's) or ACCOUNT_CLOSED (no replacement on a closed account)."""
    state.customers.get(customer_id)
    card = _owned(state.cards, card_id, customer_id)
    require(card["status"] != "cancelled", f"card ••{card['last4']} is already cancelled", reason="CARD_CANCELLED")
    account = state.accounts.get(card["account_id"])
    require(account["status"] != "closed", f"{_label(account)} is closed: no new card", reason="ACCOUNT_CLOSED")
    cancelled = state.cards.update(card_id, status="cancelled", cancel_reason=reason)
    new_id = state.cards.new_id()
    digest = hashlib.blake2b(new_id.encode(), digest_size=4).digest()  # a new number without an rng
    replacement = state.cards.insert({
        **card,
        "id": new_id,
        "last4": f"{int.from_bytes(digest, 'big') % 10_000:04d}",
        "expires": _months_later(state.today(), 48),
        "status": "active",
        "issued_on": state.today().isoformat(),
        "cancel_reason": None,
        "replaces_card_id": card_id,
    })
    delivery = (state.today() + dt.timedelta(days=5)).isoformat()
    return {"cancelled_card": cancelled, "replacement_card": replacement, "estimated_delivery": delivery}


@server.tool(
    idempotent=True,
    reads=["customer", "card", "account"],
    mutates=["card"],
    errors=["CUSTOMER_NOT_FOUND", "CARD_NOT_FOUND", "CARD_NOT_OWNED", "CARD_CANCELLED", "SPENDING_LIMIT_TOO_HIGH"],
    examples=[lambda s: {**_as_owner(s.cards.first(status="active", type="debit"), "card_id"), "daily_limit": 1500.0}],
    asks=("set the daily limit on {card_id} to ${daily_limit}", "change the daily spending cap of {card_id} to "
          "${daily_limit}", "let me spend up to ${daily_limit} a day with {card_id}",
          "make ${daily_limit} the daily spending limit for {card_id}"),
    values={"daily_limit": lambda rng, s: rng.choice((300.0, 500.0, 750.0, 1000.0, 1500.0, 2000.0, 2500.0, 3000.0))},
)
def set_card_spending_limit(
    state: BankState,
    customer_id: CustomerId,
    card_id: CardId,
    daily_limit: Annotated[float, Field(ge=50, le=10_000, description="New daily spending limit in USD.")],
) -> dict:
    """Set a card's daily spending limit. Returns the card and its previous limit. Fails with
    SPENDING_LIMIT_TOO_HIGH above 5,000 for a debit card or above the credit limit for a credit
    card, CARD_CANCELLED for a cancelled card and CARD_NOT_OWNED for another customer's."""
    state.customers.get(customer_id)
    card = _owned(state.cards, card_id, customer_id)
    require(card["status"] != "cancelled", f"card ••{card['last4']} is cancelled", reason="CARD_CANCELLED")
    account = state.accounts.get(card["account_id"])
    cap = DEBIT_CARD_MAX_DAILY_LIMIT if card["type"] == "debit" else account["credit_limit"]
    daily_limit = money(daily_limit)
    require(daily_limit <= cap, f"the highest daily limit for this card is {cap:.2f}", reason="SPENDING_LIMIT_TOO_HIGH",
            error=InvalidArgument, max_limit=cap)
    previous = card["daily_spending_limit"]
    if daily_limit != previous:  # an unchanged limit writes nothing
        card = state.cards.update(card_id, daily_spending_limit=daily_limit)
    return {"card": card, "previous_limit": previous}


@server.tool(
    answers=("opening_balance", "closing_balance", "total_credits", "total_debits"),
    read_only=True,
    reads=["account", "transaction"],
    errors=["ACCOUNT_NOT_FOUND", "STATEMENT_NOT_AVAILABLE"],
    examples=[lambda s: _checking_example(s, month=_months_later(s.today(), -1))],
    asks=("get the {month} statement for {account_id}", "pull up the monthly statement of {account_id} for {month}",
          "show me the statement for {month} on {account_id}", "send me the statement of {account_id} for {month}"),
)
def get_statement(
    state: BankState,
    account_id: AccountId,
    month: Annotated[str, Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="Statement month, YYYY-MM.")],
) -> dict:
    """The monthly statement of an account: opening and closing balance, total credits and debits,
    and the month's posted transactions in date order. Statements exist for completed months
    from the start of the online history (90 days) or the account's opening until it closed;
    any other month fails with STATEMENT_NOT_AVAILABLE, which names the first and last one."""
    account = state.accounts.get(account_id)
    first = max(state.get_var("history_start")[:7], account["opened_on"][:7])
    last = min(_months_later(state.today(), -1), (account["closed_on"] or "9999-12")[:7])
    span = f"statements run from {first} to {last}" if first <= last else "this account has no statements"
    require(first <= month <= last, f"no statement for {month}: {span}", reason="STATEMENT_NOT_AVAILABLE",
            first=first, last=last)
    posted = state.transactions.where(lambda t: t["timestamp"][:7] >= month, account_id=account_id, status="posted")
    lines = sorted((t for t in posted if t["timestamp"][:7] == month), key=lambda t: t["timestamp"])
    # Walk back from the ledger balance: undo everything posted after the month to get its close.
    closing = money(account["balance"] - sum(t["amount"] for t in posted if t["timestamp"][:7] > month))
    credits = money(sum(t["amount"] for t in lines if t["amount"] > 0))
    debits = money(-sum(t["amount"] for t in lines if t["amount"] < 0))
    return {
        "account_id": account_id,
        "month": month,
        "currency": account["currency"],
        "opening_balance": money(closing - credits + debits),
        "closing_balance": closing,
        "total_credits": credits,
        "total_debits": debits,
        "transaction_count": len(lines),
        "transactions": lines,
    }


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
