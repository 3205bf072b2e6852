"""Budget: one household's personal budget — spending categories, a budget per category per
month with a limit and an alert threshold, expenses, alerts and monthly summaries.

Months follow the session clock (``state.today()``): the current month and the previous one are
open; months before the previous one are closed (their books are final), so their expenses and
budgets can no longer change. Budgets may be planned up to 12 months ahead; months before the
household started tracking, or beyond that horizon, are INVALID_MONTH.

Alerts: each budget has an alert threshold, a percentage of its limit (80 by default). When the
month's spending in the category reaches the threshold, an alert record of kind ``threshold`` is
created; when it goes over the limit, one of kind ``over_budget``. Each level alerts once per
budget: spending that drops and rises again does not alert twice. All amounts are in USD.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    ISO_DATE,
    Conflict,
    InvalidArgument,
    Record,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    money,
    paginate,
    parse_date,
    part_of,
    ref,
    require,
)

Group = Literal["housing", "essentials", "lifestyle", "health", "other"]
PaymentMethod = Literal["card", "cash", "bank_transfer"]
MONTH_PATTERN = r"^\d{4}-\d{2}$"
TRACKED_MONTHS = 6  # the seed's history: this month and the five before it
PLANNING_HORIZON_MONTHS = 12
DEFAULT_THRESHOLD = 80

# name, group, monthly budget (None: not budgeted), share of the variable expenses, merchants, amount range
CATEGORIES = (
    ("Rent", "housing", None, 0, ("Oakridge Apartments",), (0, 0)),  # one fixed payment on the 1st
    ("Utilities", "housing", 260, 0, ("City Power & Light", "Metro Water Utility", "Fibernet Internet"), (38, 125)),
    ("Groceries", "essentials", 600, 24, ("Green Basket Grocery", "FreshCo Market", "Corner Deli"), (14, 140)),
    ("Dining Out", "lifestyle", 250, 20, ("Noodle House", "Corner Coffee", "Taco Loco", "Bistro 21"), (4, 68)),
    ("Transportation", "essentials", 180, 16, ("Metro Transit", "QuickFuel", "CityRide"), (3, 58)),
    ("Entertainment", "lifestyle", 200, 8, ("Streamly", "Cineplex Downtown", "Concert Hall", "Game Vault"), (9, 85)),
    ("Shopping", "lifestyle", 300, 10, ("Urban Outfitters Supply", "HomeGoods Depot", "Bookshelf & Co"), (12, 160)),
    ("Health & Fitness", "health", 120, 6, ("Pharma Plus", "City Gym", "Dental Arts"), (10, 95)),
    ("Subscriptions", "lifestyle", 60, 0, ("Streamly", "Cloudbox Storage", "Daily Herald"), (5, 18)),
    ("Travel", "other", None, 2, ("Skyway Airlines", "Harbor Hotel", "Amtrak"), (60, 420)),
)
CUSTOM_CATEGORY = ("Gifts", "other")  # made by the household: a category without a budget
# What a household types when it records and searches its spending (synthesis draws from these).
NEW_CATEGORIES = ("Pet Care", "Childcare", "Education", "Home Repairs", "Charity", "Hobbies", "Personal Care",
                  "Insurance", "Car Maintenance", "Books", "Kids Activities", "Garden", "Coffee")
GIFT_MERCHANTS = ("Paperlane Studio", "Bloom Florist")
# Where a household spends in a category: the seeded ones, the custom one and those it may create
# (merchants, smallest and largest ticket), so an expense's merchant and amount fit its category.
SPENDING = {name: (merchants, amounts) for name, _, _, _, merchants, amounts in CATEGORIES[1:]} | {
    CUSTOM_CATEGORY[0]: (GIFT_MERCHANTS, (15, 90)),
    "Pet Care": (("Paws & Claws", "City Vet Clinic"), (12, 140)),
    "Childcare": (("Little Sprouts Daycare", "Sitter Circle"), (25, 320)),
    "Education": (("Bright Minds Tutoring", "Community College"), (20, 400)),
    "Home Repairs": (("HomeGoods Depot", "Handy Helpers"), (15, 350)),
    "Charity": (("City Food Bank", "Red Cross"), (10, 100)),
    "Hobbies": (("Craft Corner", "Game Vault"), (8, 90)),
    "Personal Care": (("Style Studio Salon", "Pharma Plus"), (8, 75)),
    "Insurance": (("SafeHarbor Insurance",), (40, 180)),
    "Car Maintenance": (("QuickLube Garage", "Tire Town"), (30, 420)),
    "Books": (("Bookshelf & Co",), (8, 45)),
    "Kids Activities": (("Splash Swim School", "Little Kickers"), (15, 120)),
    "Garden": (("Green Thumb Nursery", "HomeGoods Depot"), (8, 90)),
    "Coffee": (("Corner Coffee",), (3, 9)),
}
# A category a household named itself, matched by group when its name is not above.
SPENDING_BY_GROUP = {"housing": "Home Repairs", "essentials": "Groceries", "lifestyle": "Shopping",
                     "health": "Health & Fitness", "other": CUSTOM_CATEGORY[0]}
EXPENSE_MERCHANTS = tuple(dict.fromkeys(m for merchants, _ in SPENDING.values() for m in merchants))
GENERAL_NOTES = ("Split with a friend", "Reimbursable", "Paid for the neighbours too")
CATEGORY_NOTES = {"Groceries": ("Weekly shop", "Party supplies"), "Dining Out": ("Birthday dinner", "Work lunch",
                  "Date night", "Team outing"), "Entertainment": ("Movie night", "Date night"),
                  "Transportation": ("Refill", "Commute"), "Health & Fitness": ("Refill", "Checkup"),
                  "Shopping": ("Gift for Mom", "New shoes"), CUSTOM_CATEGORY[0]: ("Gift for Mom", "Birthday present"),
                  "Travel": ("Weekend trip", "Conference")}
MERCHANT_SEARCHES = ("coffee", "grocery", "metro", "noodle", "fuel", "streamly", "gym", "pharma", "taco", "depot",
                     "market", "cineplex")
THRESHOLDS = (60, 70, 75, 80, 85, 90, 95)


class BudgetState(State):
    """One household's budget; the household's name and tracking start are vars."""

    categories = Table("category", prefix="cat", index=("group",))
    budgets = Table("budget", prefix="bud", index=("month", "category_id"))
    expenses = Table("expense", prefix="exp", index=("month", "category_id"))
    alerts = Table("alert", prefix="alr", index=("budget_id", "month", "acknowledged"))


@attrs.frozen(kw_only=True)
class BudgetOptions:
    """Seed size: variable expenses per month (groceries, dining, transport, ...), on top of rent,
    utilities and subscriptions."""

    expenses_per_month: int = attrs.field(default=30, validator=attrs.validators.gt(0))


# -- months ---------------------------------------------------------------------------------------


def _month_of(day: dt.date) -> str:
    return day.strftime("%Y-%m")


def _shift(month: str, months: int) -> str:
    total = int(month[:4]) * 12 + int(month[5:]) - 1 + months
    return f"{total // 12:04d}-{total % 12 + 1:02d}"


def _days_in(month: str) -> int:
    return ((dt.date.fromisoformat(_shift(month, 1) + "-01")) - dt.date.fromisoformat(month + "-01")).days


def _valid_month(state: BudgetState, month: str) -> str:
    """The month, once it is a real month between the start of tracking and the planning horizon."""
    require(1 <= int(month[5:]) <= 12, f"{month} is not a month; use YYYY-MM with MM from 01 to 12",
            reason="INVALID_MONTH", error=InvalidArgument)
    first, last = state.get_var("tracking_since"), _shift(_month_of(state.today()), PLANNING_HORIZON_MONTHS)
    require(first <= month <= last, f"{month} is outside the budget: tracking started {first} and budgets can be "
            f"planned up to {last}", reason="INVALID_MONTH", error=InvalidArgument, first_month=first, last_month=last)
    return month


def _closed(state: BudgetState, month: str) -> bool:
    return month < _shift(_month_of(state.today()), -1)


def _month_status(state: BudgetState, month: str) -> str:
    current = _month_of(state.today())
    if month == current:
        return "current"
    return "future" if month > current else "closed" if _closed(state, month) else "open"


def _require_open_month(state: BudgetState, month: str) -> None:
    require(not _closed(state, month), f"{month} is closed: only {_shift(_month_of(state.today()), -1)} and later "
            "can change", reason="MONTH_CLOSED", month=month)


def _require_open_expense_date(state: BudgetState, day: dt.date) -> None:
    month = _month_of(day)
    require(not _closed(state, month), f"{day.isoformat()} is in {month}, which is closed; expenses from "
            f"{_shift(_month_of(state.today()), -1)} on can change", reason="EXPENSE_IN_CLOSED_MONTH", month=month)
    require(day <= state.today(), f"{day.isoformat()} is in the future; record an expense once it happened",
            reason="EXPENSE_DATE_IN_FUTURE", error=InvalidArgument)


# -- spending, budgets and alerts -----------------------------------------------------------------


def _spent(state: BudgetState, category_id: str, month: str) -> float:
    return money(sum(e["amount"] for e in state.expenses.where(month=month, category_id=category_id)))


def _at_threshold(budget: Record, spent: float) -> bool:
    return spent * 100 >= budget["alert_threshold_pct"] * budget["limit"] - 1e-6  # exact, not the rounded percent


def _budget_view(state: BudgetState, budget: Record, spent: float | None = None) -> Record:
    spent = _spent(state, budget["category_id"], budget["month"]) if spent is None else spent
    used = round(100 * spent / budget["limit"], 1)
    status = "over" if spent > budget["limit"] else "near_limit" if _at_threshold(budget, spent) else "ok"
    return {**budget, "category_name": state.categories.get(budget["category_id"])["name"], "spent": spent,
            "remaining": money(budget["limit"] - spent), "percent_used": used, "status": status}


def _raise_alerts(state: BudgetState, budget: Record, spent: float, when: dt.datetime,
                  expense_id: str | None = None) -> list[Record]:
    """New alert records for the levels this budget's spending has reached and not alerted yet."""
    used = round(100 * spent / budget["limit"], 1)
    name = state.categories.get(budget["category_id"])["name"]
    raised = []
    for kind, reached in (("threshold", _at_threshold(budget, spent)), ("over_budget", spent > budget["limit"])):
        if not reached or state.alerts.first(budget_id=budget["id"], kind=kind):
            continue
        message = (f"{name} is {used}% of its {budget['limit']:.2f} budget for {budget['month']}" if kind == "threshold"
                   else f"{name} is over its {budget['limit']:.2f} budget for {budget['month']} by "
                   f"{spent - budget['limit']:.2f}")
        raised.append(state.alerts.insert({
            "budget_id": budget["id"], "category_id": budget["category_id"], "category_name": name,
            "month": budget["month"], "kind": kind, "threshold_pct": budget["alert_threshold_pct"], "spent": spent,
            "limit": budget["limit"], "percent_used": used, "message": message, "expense_id": expense_id,
            "created_at": iso_datetime(when), "acknowledged": False, "acknowledged_at": None,
        }))
    return raised


def _alerts_after_spending(state: BudgetState, category_id: str, month: str, expense_id: str) -> list[Record]:
    budget = state.budgets.first(month=month, category_id=category_id)
    if budget is None:
        return []
    return _raise_alerts(state, budget, _spent(state, category_id, month), state.now(), expense_id)


def _require_limit_covers(budget_month: str, name: str, limit: float, spent: float) -> None:
    require(limit >= spent, f"{name} already has {spent:.2f} spent in {budget_month}; the limit cannot be lower",
            reason="LIMIT_BELOW_SPENT", spent=spent)


# -- seed -----------------------------------------------------------------------------------------


def build_budget(rng: random.Random, options: BudgetOptions) -> BudgetState:
    """Default categories and a custom one, six months of budgets and expenses up to today, and
    the alerts that spending raised."""
    state = BudgetState(salt=f"{rng.getrandbits(64):016x}")
    today = state.today()
    state.set_var("household", {"name": f"The {fake.person(rng)[1]} household", "currency": "USD"})
    first_month = _shift(_month_of(today), 1 - TRACKED_MONTHS)
    state.set_var("tracking_since", first_month)
    started = dt.date.fromisoformat(first_month + "-01") - dt.timedelta(days=rng.randint(1, 20))
    specs = {}
    for name, group, limit, weight, merchants, amounts in CATEGORIES:
        category = state.categories.insert({"name": name, "group": group, "is_custom": False,
                                            "created_on": started.isoformat()})
        specs[category["id"]] = (limit, weight, merchants, amounts)
    gifts = state.categories.insert({"name": CUSTOM_CATEGORY[0], "group": CUSTOM_CATEGORY[1], "is_custom": True,
                                     "created_on": (started + dt.timedelta(days=40)).isoformat()})
    specs[gifts["id"]] = (None, 2, GIFT_MERCHANTS, SPENDING[CUSTOM_CATEGORY[0]][1])
    rent = float(rng.randint(15, 26) * 100)
    for n in range(TRACKED_MONTHS):
        _seed_month(state, rng, _shift(first_month, n), specs, rent, options.expenses_per_month)
    return state


def _seed_month(state: BudgetState, rng: random.Random, month: str, specs: dict[str, tuple[Any, ...]], rent: float,
                per_month: int) -> None:
    """One month: budgets on the 1st, then its expenses in date order, each checked for alerts the
    way add_expense checks them. Alerts of closed months have been acknowledged."""
    today = state.today()
    last_day = min(_days_in(month), today.day if month == _month_of(today) else 31)
    rent_id = state.categories.first(name="Rent")["id"]
    budgets = {}
    for category_id, (typical, *_) in specs.items():  # this month's budgets: the rent exactly, others near typical
        limit = rent if category_id == rent_id else typical and float(round(typical * rng.uniform(0.9, 1.1), -1))
        if limit:
            budgets[category_id] = state.budgets.insert({
                "category_id": category_id, "month": month, "limit": limit, "alert_threshold_pct": DEFAULT_THRESHOLD,
                "created_at": f"{month}-01T07:00:00Z"})
    planned: list[tuple[int, str, float, str]] = [(1, rent_id, rent, "Oakridge Apartments")]
    weights = {cid: spec[1] for cid, spec in specs.items() if spec[1]}
    for category_id, (_, _, merchants, (low, high)) in specs.items():
        if state.categories.get(category_id)["name"] in ("Utilities", "Subscriptions"):  # one bill per merchant
            planned += [(rng.randint(3, 25), category_id, fake.money(rng, low, high), m) for m in merchants]
    for category_id in rng.choices(list(weights), weights=list(weights.values()), k=per_month):
        _, _, merchants, (low, high) = specs[category_id]
        planned.append((rng.randint(1, 28), category_id, fake.money(rng, low, high), rng.choice(merchants)))
    if month == _month_of(today):  # a big night out early this month: the category sits just under its threshold
        fun = state.categories.first(name="Entertainment")["id"]
        so_far = sum(p[2] for p in planned if p[1] == fun and p[0] <= last_day)
        planned.append((1, fun, money(max(budgets[fun]["limit"] * 0.75 - so_far, 1.0)), "Concert Hall"))
    billed = {rent_id, state.categories.first(name="Utilities")["id"]}
    spent: dict[str, float] = {}
    for day, category_id, amount, merchant in sorted(planned, key=lambda p: p[0]):
        if day > last_day:
            continue
        date = dt.date.fromisoformat(f"{month}-{day:02d}")
        when = dt.datetime(date.year, date.month, date.day, rng.randint(8, 20), rng.randint(0, 59), tzinfo=dt.UTC)
        when = min(when, state.now())
        expense = state.expenses.insert({
            "date": date.isoformat(), "month": month, "amount": amount, "category_id": category_id,
            "merchant": merchant, "note": None, "payment_method": "bank_transfer" if category_id in billed
            else rng.choice(("card", "card", "card", "cash")), "created_at": iso_datetime(when)})
        spent[category_id] = money(spent.get(category_id, 0.0) + amount)
        if category_id in budgets:
            for alert in _raise_alerts(state, budgets[category_id], spent[category_id], when, expense["id"]):
                if _closed(state, month):
                    seen = _shift(month, 1) + "-02T10:00:00Z"
                    state.alerts.update(alert["id"], acknowledged=True, acknowledged_at=seen)


# -- examples: arguments valid on a fresh seed of any size ------------------------------------------


def _category(s: BudgetState, name: str) -> str:
    return s.categories.first(name=name)["id"]


def _this_month(s: BudgetState) -> str:
    return _month_of(s.today())


def _editable_expense(s: BudgetState) -> Record:
    return s.expenses.first(lambda e: not _closed(s, e["month"]))


def _spending_of(s: BudgetState, category_id: Any) -> tuple[str, tuple[str, ...], tuple[float, float]]:
    """A category's name, merchants and ticket range (the rent: the landlord and the rent)."""
    category = s.categories.find(category_id) if isinstance(category_id, str) else None
    if category is None:
        return "", EXPENSE_MERCHANTS, (5, 120)
    name = category["name"]
    if name == "Rent":
        paid = [e["amount"] for e in s.expenses.where(category_id=category_id)] or [1800.0]
        return name, ("Oakridge Apartments",), (paid[-1], paid[-1])
    return name, *SPENDING.get(name, SPENDING[SPENDING_BY_GROUP.get(category["group"], "Shopping")])


def _said_amount(rng: random.Random, low: float, high: float) -> float:
    """An amount as it shows on a receipt: whole dollars, a half, or cents ending in 9 or 5."""
    value = rng.uniform(low, high)
    shape = rng.choice(("whole", "half", "nine", "five"))
    if low == high:
        return money(low)
    if shape == "whole":
        return float(max(round(value), 1))
    if shape == "half":
        return money(int(value) + 0.5)
    return money(int(value) + (0.99 if shape == "nine" else rng.choice((0.25, 0.45, 0.75, 0.85))))


def _purchase(rng: random.Random, s: BudgetState, args: Record | None) -> Record:
    """One expense a household would log, drawn as a whole: a merchant and an amount that fit the
    call's category (or, correcting an expense, that expense's category), a note that fits, and
    how it was paid. Every value source of a call draws the same purchase (same-seeded rngs)."""
    args = args or {}
    category_id = args.get("category_id")
    if category_id is None and isinstance(args.get("expense_id"), str):
        expense = s.expenses.find(args["expense_id"])
        category_id = expense and expense["category_id"]
    if category_id is None:
        category_id = rng.choice([c["id"] for c in s.categories.all() if c["name"] != "Rent"])
    name, merchants, (low, high) = _spending_of(s, category_id)
    merchant = rng.choice(merchants)
    amount = _said_amount(rng, low, high)
    note = rng.choice(CATEGORY_NOTES.get(name, ()) + GENERAL_NOTES)
    billed = name in ("Rent", "Utilities", "Insurance", "Childcare")
    paid = "bank_transfer" if billed else "cash" if amount < 15 and rng.random() < 0.4 else "card"
    return {"merchant": merchant, "amount": amount, "note": note, "payment_method": paid}


def _planned_limit(rng: random.Random, s: BudgetState, args: Record | None = None) -> float:
    """A monthly budget a household would set for the call's category: near its usual budget (or,
    for one without, its usual spending), in round tens."""
    category = s.categories.find((args or {}).get("category_id") or "")
    typical = next((limit for name, _, limit, *_ in CATEGORIES if category and name == category["name"]), None)
    if typical is None:
        _, _, (low, high) = _spending_of(s, category and category["id"])
        typical = max(100, min(high * 3, 800))
    return float(round(typical * rng.choice((0.8, 0.9, 1.0, 1.1, 1.2, 1.5)), -1))


def _changed_limit(rng: random.Random, s: BudgetState, args: Record | None = None) -> float:
    """A new limit for the call's budget: its limit raised or trimmed a little, in round tens, and
    never below what is already spent; without a budget, one above any of this month's."""
    budget = s.budgets.find((args or {}).get("budget_id") or "")
    if budget is None:
        return float(round(max(b["limit"] for b in s.budgets.where(month=_this_month(s))), -2)
                     + rng.choice((100, 200, 300, 400, 500, 750, 1000)))
    floor = _spent(s, budget["category_id"], budget["month"])
    wanted = budget["limit"] * rng.choice((0.8, 0.9, 1.1, 1.2, 1.25, 1.5))
    return float(max(round(wanted, -1), -(-floor // 10) * 10))


def _recent_day(rng: random.Random, s: BudgetState) -> str:
    """A day of the last two weeks: never in the future, never in a closed month (synthesis values)."""
    return (s.today() - dt.timedelta(days=rng.randint(0, 12))).isoformat()


# -- server and tools -----------------------------------------------------------------------------

server = Server(
    "budget",
    domain="lifestyle",
    description="A household budget: spending categories, monthly budgets per category with limits and alert "
    "thresholds, expenses, alerts when spending crosses a threshold, and monthly summaries against the budget.",
    state=BudgetState,
    seed=build_budget,
    options=BudgetOptions,
)

CategoryId = Annotated[str, ref("category", "Id of the category (cat_...), from list_categories.")]
ExpenseId = Annotated[str, ref("expense", "Id of the expense (exp_...), from list_expenses or add_expense.")]
Month = Annotated[str, Field(pattern=MONTH_PATTERN, description="Month as YYYY-MM, e.g. 2026-03.")]
Amount = Annotated[float, Field(gt=0, le=100_000, description="Amount in USD; rounded to cents.")]
Limit = Annotated[float, Field(gt=0, le=1_000_000, description="Spending limit for the month in USD.")]
Threshold = Annotated[int, Field(ge=1, le=100, description=(
    "Alert when spending reaches this percent of the limit (an over-budget alert follows above 100%)."))]


@server.tool(
    answers=("group",),
    read_only=True,
    reads=["category"],
    examples=[{}, {"group": "lifestyle"}],
    asks=("list my spending categories", "show all the budget categories", "show the categories in the {group} group",
          "list the {group} categories"),
)
def list_categories(
    state: BudgetState,
    group: Annotated[Group | None, Field(description="Only categories in this group.")] = None,
) -> dict:
    """The spending categories (id, name, group, whether the household made it), in the order
    they were created."""
    categories = state.categories.where(**({"group": group} if group else {}))
    return {"categories": categories, "total": len(categories)}


@server.tool(
    idempotent=True,  # the same name twice is refused with CATEGORY_EXISTS
    reads=["category"],
    produces=["category"],
    errors=["CATEGORY_EXISTS"],
    examples=[{"name": "Pet Care", "group": "essentials"}],
    asks=("create a spending category called {name}", "add a new category named {name}",
          "set up a {name} category under {group}", "make a category {name} in the {group} group"),
    values={"name": lambda rng, s: rng.choice(NEW_CATEGORIES),
            "group": lambda rng, s: rng.choice(("housing", "essentials", "lifestyle", "health", "other"))},
)
def create_category(
    state: BudgetState,
    name: Annotated[str, Field(min_length=2, max_length=40, description="Name of the new category, e.g. 'Pet Care'.")],
    group: Annotated[Group, Field(description="Which group of the budget it belongs to.")] = "other",
) -> dict:
    """Add a custom spending category. Returns it. Fails with CATEGORY_EXISTS when a category of
    that name exists (ignoring case); its id is in the details."""
    existing = state.categories.first(lambda c: c["name"].lower() == name.strip().lower())
    require(existing is None, f"category {existing and existing['name']!r} already exists", reason="CATEGORY_EXISTS",
            error=Conflict, category_id=existing and existing["id"])
    return state.categories.insert({"name": name.strip(), "group": group, "is_custom": True,
                                    "created_on": state.today().isoformat()})


@server.tool(
    answers=("spent", "remaining", "percent_used"),
    read_only=True,
    reads=["budget", "category", "expense"],
    errors=["INVALID_MONTH"],
    examples=[{}, lambda s: {"month": _shift(_this_month(s), -1)}],
    asks=("show this month's budgets", "list my budgets and how much is left in each", "show the budgets for {month}",
          "check where I stand against each budget in {month}"),
)
def list_budgets(
    state: BudgetState,
    month: Annotated[str | None, Field(pattern=MONTH_PATTERN, description=(
        "Month as YYYY-MM; the current month when omitted."))] = None,
) -> dict:
    """The month's budgets: category, limit, alert threshold, spent so far, remaining, percent
    used and status (ok, near_limit at the threshold, over), with the month's status (closed,
    open, current, future). Fails with INVALID_MONTH."""
    month = _valid_month(state, month or _month_of(state.today()))
    budgets = [_budget_view(state, b) for b in state.budgets.where(month=month)]
    return {"month": month, "month_status": _month_status(state, month), "budgets": budgets,
            "total_limit": money(sum(b["limit"] for b in budgets))}


@server.tool(
    idempotent=True,  # a repeat is refused with BUDGET_EXISTS
    reads=["category", "budget", "expense"],
    produces=["budget", "alert"],
    errors=["CATEGORY_NOT_FOUND", "INVALID_MONTH", "MONTH_CLOSED", "BUDGET_EXISTS", "LIMIT_BELOW_SPENT"],
    examples=[lambda s: {"category_id": _category(s, "Travel"), "month": _this_month(s),
                         "limit": money(_spent(s, _category(s, "Travel"), _this_month(s)) + 400)},
              lambda s: {"category_id": _category(s, "Groceries"), "month": _shift(_this_month(s), 1), "limit": 650.0,
                         "alert_threshold_pct": 90}],
    asks=("set a ${limit} budget for {category_id} in {month}", "budget ${limit} for {category_id} for {month}",
          "create a {month} budget of ${limit} for {category_id}",
          "cap {category_id} at ${limit} in {month} and alert me at {alert_threshold_pct}%"),
    values={"limit": _planned_limit,
            "month": lambda rng, s: _shift(_this_month(s), rng.randint(1, 6)),
            "alert_threshold_pct": lambda rng, s: rng.choice(THRESHOLDS)},
)
def create_budget(
    state: BudgetState,
    category_id: CategoryId,
    month: Month,
    limit: Limit,
    alert_threshold_pct: Threshold = DEFAULT_THRESHOLD,
) -> dict:
    """Set a budget for one category in one month (the current, previous or a future month up to
    12 ahead). Returns the budget with its spending so far and any alerts it raises at once.
    Fails with BUDGET_EXISTS (that category already has a budget that month: change it with
    set_budget_limit; its id is in the details), LIMIT_BELOW_SPENT (more is already spent),
    MONTH_CLOSED, INVALID_MONTH or CATEGORY_NOT_FOUND."""
    category = state.categories.get(category_id)
    month = _valid_month(state, month)
    _require_open_month(state, month)
    existing = state.budgets.first(month=month, category_id=category_id)
    require(existing is None, f"{category['name']} already has a budget for {month}; use set_budget_limit",
            reason="BUDGET_EXISTS", error=Conflict, budget_id=existing and existing["id"])
    spent = _spent(state, category_id, month)
    limit = max(money(limit), 0.01)  # > 0 in the schema: never round down to a zero limit (divided by)
    _require_limit_covers(month, category["name"], limit, spent)
    budget = state.budgets.insert({"category_id": category_id, "month": month, "limit": limit,
                                   "alert_threshold_pct": alert_threshold_pct,
                                   "created_at": iso_datetime(state.now())})
    alerts = _raise_alerts(state, budget, spent, state.now())
    return {"budget": _budget_view(state, budget, spent), "alerts_raised": alerts}


@server.tool(
    idempotent=True,
    reads=["budget", "expense"],
    mutates=["budget"],
    produces=["alert"],
    errors=["BUDGET_NOT_FOUND", "MONTH_CLOSED", "LIMIT_BELOW_SPENT"],
    examples=[lambda s: {"budget_id": s.budgets.first(month=_this_month(s))["id"], "limit": 5_000.0},
              lambda s: (lambda b: {"budget_id": b["id"], "limit": money(_spent(s, b["category_id"], b["month"]) + 5),
                                    "alert_threshold_pct": 75})(s.budgets.first(month=_shift(_this_month(s), -1)))],
    asks=("change the limit of {budget_id} to ${limit}", "set {budget_id} to ${limit}",
          "make {budget_id} ${limit} instead", "update {budget_id}: limit ${limit}, alert at {alert_threshold_pct}%",
          "set the cap on {budget_id} to ${limit} and warn me at {alert_threshold_pct} percent"),
    values={"limit": _changed_limit, "alert_threshold_pct": lambda rng, s: rng.choice(THRESHOLDS)},
)
def set_budget_limit(
    state: BudgetState,
    budget_id: Annotated[str, ref("budget", "Id of the budget (bud_...), from list_budgets or create_budget.")],
    limit: Limit,
    alert_threshold_pct: Annotated[int | None, Field(ge=1, le=100, description=(
        "New alert threshold in percent of the limit; unchanged when omitted."))] = None,
) -> dict:
    """Change a budget's limit and, optionally, its alert threshold. A lower limit may raise
    alerts at once; alerts already raised stay. Returns the budget, its previous limit and any
    alerts raised. Fails with LIMIT_BELOW_SPENT (the month already spent more; details carry the
    amount), MONTH_CLOSED or BUDGET_NOT_FOUND."""
    budget = state.budgets.get(budget_id)
    _require_open_month(state, budget["month"])
    spent = _spent(state, budget["category_id"], budget["month"])
    limit = max(money(limit), 0.01)  # as in create_budget
    _require_limit_covers(budget["month"], state.categories.get(budget["category_id"])["name"], limit, spent)
    previous = budget["limit"]
    budget = state.budgets.update(budget_id, limit=limit,
                                  alert_threshold_pct=alert_threshold_pct or budget["alert_threshold_pct"])
    alerts = _raise_alerts(state, budget, spent, state.now())
    return {"budget": _budget_view(state, budget, spent), "previous_limit": previous, "alerts_raised": alerts}


@server.tool(
    reads=["category", "budget", "expense"],
    produces=["expense", "alert"],
    errors=["CATEGORY_NOT_FOUND", "BAD_DATE", "EXPENSE_IN_CLOSED_MONTH", "EXPENSE_DATE_IN_FUTURE"],
    examples=[lambda s: {"amount": 42.5, "category_id": _category(s, "Groceries"), "date": s.today().isoformat(),
                         "merchant": "Green Basket Grocery"},
              lambda s: {"amount": 30.0, "category_id": _category(s, "Entertainment"), "date": s.today().isoformat(),
                         "merchant": "Cineplex Downtown", "note": "Movie night", "payment_method": "cash"}],
    asks=("log ${amount} at {merchant} on {date}", "add an expense: ${amount} spent at {merchant} on {date}",
          "record that I paid {merchant} ${amount} on {date}",
          "put down ${amount} at {merchant} on {date} under {category_id}",
          "add ${amount} from {merchant} on {date} to {category_id}, paid by {payment_method}, note \"{note}\""),
    values={"date": _recent_day, **{field: part_of(_purchase, field)
                                    for field in ("amount", "merchant", "note", "payment_method")}},
)
def add_expense(
    state: BudgetState,
    amount: Amount,
    category_id: CategoryId,
    date: Annotated[str, Field(pattern=ISO_DATE, description="Day of the expense, YYYY-MM-DD; not in the future.")],
    merchant: Annotated[str, Field(min_length=1, max_length=80, description="Where the money was spent.")],
    note: Annotated[str | None, Field(max_length=200, description="Optional note.")] = None,
    payment_method: Annotated[PaymentMethod, Field(description="How it was paid.")] = "card",
) -> dict:
    """Record an expense. Returns it, the category's budget for that month after it (null when
    the category has no budget) and the alerts it raised (threshold reached, over budget).
    Fails with EXPENSE_IN_CLOSED_MONTH (dated before the previous month), EXPENSE_DATE_IN_FUTURE,
    BAD_DATE or CATEGORY_NOT_FOUND."""
    state.categories.get(category_id)
    day = parse_date(date, "date")
    _require_open_expense_date(state, day)
    month = _month_of(day)
    expense = state.expenses.insert({
        "date": day.isoformat(), "month": month, "amount": money(amount), "category_id": category_id,
        "merchant": merchant, "note": note, "payment_method": payment_method,
        "created_at": iso_datetime(state.now())})
    alerts = _alerts_after_spending(state, category_id, month, expense["id"])
    budget = state.budgets.first(month=month, category_id=category_id)
    return {"expense": expense, "budget": budget and _budget_view(state, budget), "alerts_raised": alerts}


@server.tool(
    answers=("amount", "date", "merchant"),
    read_only=True,
    reads=["expense", "category"],
    errors=["INVALID_MONTH", "CATEGORY_NOT_FOUND"],
    examples=[{}, lambda s: {"month": _shift(_this_month(s), -1), "category_id": _category(s, "Dining Out")},
              {"merchant": "coffee", "min_amount": 5}],
    asks=("show my recent expenses", "list what I spent in {month} on {category_id}",
          "find {merchant} expenses of at least ${min_amount}", "show what I've spent on {merchant} lately",
          "list my {merchant} purchases",
          "list the expenses from {month}"),
    values={"merchant": lambda rng, s: rng.choice(MERCHANT_SEARCHES)},
)
def list_expenses(
    state: BudgetState,
    month: Annotated[str | None, Field(pattern=MONTH_PATTERN, description="Only this month, YYYY-MM.")] = None,
    category_id: Annotated[str | None, ref("category", "Only this category (cat_...).")] = None,
    merchant: Annotated[str | None, Field(min_length=1, max_length=80, description=(
        "Only merchants whose name contains this (case-insensitive)."))] = None,
    min_amount: Annotated[float | None, Field(ge=0, description="Only expenses of at least this amount.")] = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Page size.")] = 20,
    offset: Annotated[int, Field(ge=0, description="Matches to skip; pass next_offset from the previous page.")] = 0,
) -> dict:
    """Expenses, newest first, filtered by month, category, merchant and minimum amount. Returns a
    page, the number and total amount of all matches, and next_offset. Fails with INVALID_MONTH
    or CATEGORY_NOT_FOUND."""
    filters: Record = {}
    if month is not None:
        filters["month"] = _valid_month(state, month)
    if category_id is not None:
        state.categories.get(category_id)
        filters["category_id"] = category_id
    needle = (merchant or "").lower()
    matches = state.expenses.where(lambda e: needle in e["merchant"].lower() and e["amount"] >= (min_amount or 0),
                                   **filters)
    matches.sort(key=lambda e: (e["date"], e["created_at"]), reverse=True)
    return {**paginate(matches, limit=limit, offset=offset, key="expenses"),
            "total_amount": money(sum(e["amount"] for e in matches))}


@server.tool(
    idempotent=True,  # repeating the same change finds nothing left to change
    reads=["expense", "category", "budget"],
    mutates=["expense"],
    produces=["alert"],
    errors=["EXPENSE_NOT_FOUND", "CATEGORY_NOT_FOUND", "NOTHING_TO_UPDATE", "BAD_DATE", "EXPENSE_IN_CLOSED_MONTH",
            "EXPENSE_DATE_IN_FUTURE"],
    examples=[lambda s: {"expense_id": _editable_expense(s)["id"], "amount": 12.34, "note": "split with a friend"},
              lambda s: {"expense_id": _editable_expense(s)["id"], "category_id": _category(s, "Shopping")}],
    asks=("change {expense_id} to ${amount}", "fix the amount on {expense_id}: it was ${amount}",
          "move {expense_id} to {category_id}", "recategorize {expense_id} as {category_id}",
          "update {expense_id} to ${amount} with the note \"{note}\"",
          "correct {expense_id}: it was at {merchant} on {date}"),
    values={"date": _recent_day, **{field: part_of(_purchase, field) for field in ("amount", "merchant", "note")}},
)
def update_expense(
    state: BudgetState,
    expense_id: ExpenseId,
    amount: Annotated[float | None, Field(gt=0, le=100_000, description="New amount in USD.")] = None,
    category_id: Annotated[str | None, ref("category", "Move it to this category (cat_...).")] = None,
    date: Annotated[str | None, Field(pattern=ISO_DATE, description="New day, YYYY-MM-DD.")] = None,
    merchant: Annotated[str | None, Field(min_length=1, max_length=80, description="New merchant name.")] = None,
    note: Annotated[str | None, Field(max_length=200, description="New note.")] = None,
) -> dict:
    """Correct an expense: amount, category, date, merchant or note (pass only what changes).
    Returns the expense and any alerts the new spending raised. Fails with
    EXPENSE_IN_CLOSED_MONTH (the expense, or its new date, is in a closed month),
    EXPENSE_DATE_IN_FUTURE, NOTHING_TO_UPDATE (no field given), BAD_DATE (not a real date),
    EXPENSE_NOT_FOUND or CATEGORY_NOT_FOUND."""
    expense = state.expenses.get(expense_id)
    changes = {k: v for k, v in (("amount", amount and money(amount)), ("category_id", category_id),
                                 ("merchant", merchant), ("note", note)) if v is not None}
    require(bool(changes) or date is not None, "pass at least one field to change", reason="NOTHING_TO_UPDATE",
            error=InvalidArgument)
    _require_open_expense_date(state, dt.date.fromisoformat(expense["date"]))
    if category_id is not None:
        state.categories.get(category_id)
    if date is not None:
        day = parse_date(date, "date")
        _require_open_expense_date(state, day)
        changes |= {"date": day.isoformat(), "month": _month_of(day)}
    updated = state.expenses.update(expense_id, **changes)
    alerts = _alerts_after_spending(state, updated["category_id"], updated["month"], expense_id)
    return {"expense": updated, "alerts_raised": alerts}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing to delete (EXPENSE_NOT_FOUND)
    mutates=["expense"],
    errors=["EXPENSE_NOT_FOUND", "EXPENSE_IN_CLOSED_MONTH"],
    examples=[lambda s: {"expense_id": _editable_expense(s)["id"]}],
    asks=("delete {expense_id}", "remove {expense_id}, I logged it by mistake", "take {expense_id} off my expenses",
          "get rid of {expense_id}, it's a duplicate"),
)
def delete_expense(state: BudgetState, expense_id: ExpenseId) -> dict:
    """Delete an expense recorded by mistake; alerts it raised stay. Returns the deleted expense.
    Fails with EXPENSE_IN_CLOSED_MONTH or EXPENSE_NOT_FOUND."""
    expense = state.expenses.get(expense_id)
    _require_open_expense_date(state, dt.date.fromisoformat(expense["date"]))
    return {"deleted": True, "expense": state.expenses.delete(expense_id)}


@server.tool(
    answers=("percent_used", "spent"),
    read_only=True,
    reads=["alert"],
    errors=["INVALID_MONTH"],
    examples=[{}, {"unacknowledged_only": True}, lambda s: {"month": _shift(_this_month(s), -1)}],
    asks=lambda a: ("show my unread budget alerts", "list the alerts I haven't acknowledged yet",
                    "show only the budget warnings I haven't seen") if a.get("unacknowledged_only") else (
                    "show my budget alerts", "list every budget alert", "show the budget alerts from {month}",
                    "list the overspending alerts for {month}"),
)
def list_alerts(
    state: BudgetState,
    month: Annotated[str | None, Field(pattern=MONTH_PATTERN, description="Only this month's alerts, YYYY-MM.")] = None,
    unacknowledged_only: Annotated[bool, Field(description="Only alerts not acknowledged yet.")] = False,
) -> dict:
    """Budget alerts, newest first: category, month, kind (threshold or over_budget), spending
    and limit when raised, message, and whether acknowledged. Fails with INVALID_MONTH."""
    filters: Record = {"month": _valid_month(state, month)} if month else {}
    if unacknowledged_only:
        filters["acknowledged"] = False
    alerts = state.alerts.where(**filters)
    alerts.sort(key=lambda a: a["created_at"], reverse=True)
    return {"alerts": alerts, "total": len(alerts)}


@server.tool(
    idempotent=True,  # a repeat is refused with ALERT_ALREADY_ACKNOWLEDGED
    mutates=["alert"],
    errors=["ALERT_NOT_FOUND", "ALERT_ALREADY_ACKNOWLEDGED"],
    examples=[lambda s: {"alert_id": s.alerts.first(acknowledged=False)["id"]}],
    asks=("acknowledge {alert_id}", "mark {alert_id} as seen", "dismiss {alert_id}", "clear {alert_id}, I've read it"),
)
def acknowledge_alert(
    state: BudgetState,
    alert_id: Annotated[str, ref("alert", "Id of the alert (alr_...), from list_alerts.")],
) -> dict:
    """Mark an alert as seen. Returns the alert. Fails with ALERT_ALREADY_ACKNOWLEDGED or
    ALERT_NOT_FOUND."""
    alert = state.alerts.get(alert_id)
    require(not alert["acknowledged"], f"alert {alert_id} was acknowledged at {alert['acknowledged_at']}",
            reason="ALERT_ALREADY_ACKNOWLEDGED", error=Conflict)
    return state.alerts.update(alert_id, acknowledged=True,
                               acknowledged_at=iso_datetime(state.now()))


@server.tool(
    answers=("total_spent", "total_budgeted", "spent", "remaining"),
    read_only=True,
    reads=["expense", "budget", "category"],
    errors=["INVALID_MONTH"],
    examples=[lambda s: {"month": _shift(_this_month(s), -1)}, {}],
    asks=("give me a summary of this month's spending", "show how this month is going against the budget",
          "summarize where my money went this month", "summarize my spending for {month}",
          "show how {month} went against the budget", "break down what I spent in {month} by category"),
)
def get_monthly_summary(
    state: BudgetState,
    month: Annotated[str | None, Field(pattern=MONTH_PATTERN, description=(
        "Month as YYYY-MM; the current month when omitted."))] = None,
) -> dict:
    """A month at a glance: total spent, total budgeted, spending per category against its
    budget (limit, remaining, percent used, status), spending in categories without a budget, the
    top five merchants, and the change from the previous month. Fails with INVALID_MONTH."""
    month = _valid_month(state, month or _month_of(state.today()))
    expenses = state.expenses.where(month=month)
    per_category: dict[str, float] = {}
    merchants: dict[str, list[float]] = {}
    for e in expenses:
        per_category[e["category_id"]] = per_category.get(e["category_id"], 0.0) + e["amount"]
        merchants.setdefault(e["merchant"], []).append(e["amount"])
    budgets = {b["category_id"]: b for b in state.budgets.where(month=month)}
    rows = []
    for category_id in dict.fromkeys([*budgets, *per_category]):
        spent = money(per_category.get(category_id, 0.0))
        row = {"category_id": category_id, "category_name": state.categories.get(category_id)["name"], "spent": spent}
        if category_id in budgets:
            view = _budget_view(state, budgets[category_id], spent)
            row |= {k: view[k] for k in ("limit", "remaining", "percent_used", "status")} | {"budget_id": view["id"]}
        else:
            row |= {"limit": None, "remaining": None, "percent_used": None, "status": "unbudgeted"}
        rows.append(row)
    rows.sort(key=lambda r: -r["spent"])
    total = money(sum(per_category.values()))
    previous_month = _shift(month, -1)
    previous = money(sum(e["amount"] for e in state.expenses.where(month=previous_month)))
    top = sorted(merchants.items(), key=lambda m: -sum(m[1]))[:5]
    return {
        "month": month,
        "month_status": _month_status(state, month),
        "total_spent": total,
        "total_budgeted": money(sum(b["limit"] for b in budgets.values())),
        "budgeted_spent": money(sum(r["spent"] for r in rows if r["limit"] is not None)),
        "unbudgeted_spent": money(sum(r["spent"] for r in rows if r["limit"] is None)),
        "expense_count": len(expenses),
        "categories": rows,
        "top_merchants": [{"merchant": m, "spent": money(sum(a)), "count": len(a)} for m, a in top],
        "previous_month": {"month": previous_month, "total_spent": previous, "change": money(total - previous)},
    }


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
