"""The budget server's own rules: months on the session clock, budgets, expenses, alerts and
summaries, and their typed failures. What every server guarantees is the conformance kit's
(tests/servers/test_conformance.py).

The session clock starts on 2026-03-02: March is current, February still open, January and
before closed.
"""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import budget
from prove_servers.budget import BudgetOptions, server

TOOLS = server.tools
CURRENT, PREVIOUS, CLOSED = "2026-03", "2026-02", "2026-01"
h = ServerHarness.fixture(server)


def category(h, name: str) -> str:
    return h.state.categories.first(name=name)["id"]


def budget_of(h, name: str, month: str) -> dict:
    return next(b for b in h.ok("list_budgets", month=month)["budgets"] if b["category_name"] == name)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "list_categories", "create_category", "list_budgets", "create_budget", "set_budget_limit", "add_expense",
        "list_expenses", "update_expense", "delete_expense", "list_alerts", "acknowledge_alert", "get_monthly_summary",
    }
    assert servers_registered_by(budget) == [server] and (server.name, server.domain) == ("budget", "lifestyle")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_categories", "list_budgets", "list_expenses", "list_alerts", "get_monthly_summary"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"delete_expense"}
    assert not TOOLS["add_expense"].spec.annotations.idempotent  # a repeat records a second expense
    assert TOOLS["add_expense"].spec.produces == ("expense", "alert")
    assert TOOLS["create_budget"].spec.entity_params() == {"category_id": "category"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


@pytest.mark.parametrize("seed", [0, 1, 3, 8])
def test_seed_has_the_months_budgets_and_alerts_tasks_need(seed):
    h = ServerHarness(server, seed=seed)
    state = h.state
    assert state.get_var("tracking_since") == "2025-10"
    assert sorted({e["month"] for e in state.expenses}) == ["2025-10", "2025-11", "2025-12", CLOSED, PREVIOUS, CURRENT]
    assert max(e["date"] for e in state.expenses) <= "2026-03-02"
    budgeted = {state.categories.get(b["category_id"])["name"] for b in state.budgets.where(month=CURRENT)}
    assert {"Travel", "Gifts"}.isdisjoint(budgeted) and {"Rent", "Groceries", "Entertainment"} <= budgeted
    assert any(v["status"] == "over" for v in h.ok("list_budgets", month=PREVIOUS)["budgets"])
    assert 70 <= budget_of(h, "Entertainment", CURRENT)["percent_used"] < 80  # the next night out alerts
    for alert in state.alerts:  # alerts of closed months were seen; open months' may not be
        assert alert["acknowledged"] == (alert["month"] < PREVIOUS)
        assert alert["expense_id"] in {e["id"] for e in state.expenses.where(month=alert["month"])}
    assert state.alerts.where(acknowledged=False)


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=BudgetOptions(expenses_per_month=300))
    assert len(big.state.expenses) > 8 * len(h.state.expenses)
    big.run_examples()
    with pytest.raises(ValueError):
        BudgetOptions(expenses_per_month=0)


# -- months ---------------------------------------------------------------------------------------


def test_months_are_validated_against_tracking_and_the_planning_horizon(h):
    for month in ("2026-13", "2026-00", "2025-09", "2027-04"):
        h.fails("list_budgets", "INVALID_MONTH", "INVALID_ARGUMENT", month=month)
    error = h.fails("get_monthly_summary", "INVALID_MONTH", month="2025-09")
    assert (error["details"]["first_month"], error["details"]["last_month"]) == ("2025-10", "2027-03")
    h.fails("list_expenses", "INVALID_MONTH", month="2030-01")
    h.fails("list_alerts", "INVALID_MONTH", month="1999-12")
    h.fails("create_budget", "INVALID_MONTH", category_id=category(h, "Travel"), month="2027-04",
            limit=100.0)
    assert h.call("list_budgets", {"month": "March"}).error["reason"] == "SCHEMA_VIOLATION"
    statuses = {m: h.ok("list_budgets", month=m)["month_status"] for m in (CLOSED, PREVIOUS, CURRENT, "2027-03")}
    assert statuses == {CLOSED: "closed", PREVIOUS: "open", CURRENT: "current", "2027-03": "future"}


def test_closed_months_are_final(h):
    state = h.state
    groceries = category(h, "Groceries")
    old = state.expenses.first(month=CLOSED)
    error = h.fails("add_expense", "EXPENSE_IN_CLOSED_MONTH", amount=10.0, category_id=groceries,
                    date="2026-01-31", merchant="FreshCo Market")
    assert error["details"]["month"] == CLOSED
    h.fails("update_expense", "EXPENSE_IN_CLOSED_MONTH", expense_id=old["id"], amount=1.0)
    h.fails("delete_expense", "EXPENSE_IN_CLOSED_MONTH", expense_id=old["id"])
    recent = state.expenses.first(month=PREVIOUS)
    h.fails("update_expense", "EXPENSE_IN_CLOSED_MONTH", expense_id=recent["id"], date="2026-01-15")
    h.fails("create_budget", "MONTH_CLOSED", category_id=category(h, "Travel"), month=CLOSED, limit=50.0)
    h.fails("set_budget_limit", "MONTH_CLOSED", budget_id=state.budgets.first(month=CLOSED)["id"], limit=9e3)
    late = h.ok("add_expense", amount=10.0, category_id=groceries, date="2026-02-01", merchant="FreshCo Market")
    assert late["expense"]["month"] == PREVIOUS  # the previous month still takes late entries


def test_expense_dates_must_be_real_and_not_in_the_future(h):
    groceries = category(h, "Groceries")
    base = {"amount": 9.99, "category_id": groceries, "merchant": "Corner Deli"}
    h.fails("add_expense", "EXPENSE_DATE_IN_FUTURE", "INVALID_ARGUMENT", **base, date="2026-03-03")
    h.fails("add_expense", "BAD_DATE", **base, date="2026-02-30")
    expense = h.ok("add_expense", **base, date="2026-03-02")["expense"]
    h.fails("update_expense", "EXPENSE_DATE_IN_FUTURE", expense_id=expense["id"], date="2026-04-01")


# -- alerts ---------------------------------------------------------------------------------------


def test_spending_past_the_threshold_and_the_limit_raises_each_alert_once(h):
    fun = budget_of(h, "Entertainment", CURRENT)
    room = fun["limit"] * fun["alert_threshold_pct"] / 100 - fun["spent"]
    args = {"category_id": fun["category_id"], "date": "2026-03-02", "merchant": "Cineplex Downtown"}
    below = h.ok("add_expense", **args, amount=round(room - 0.01, 2))
    assert below["alerts_raised"] == [] and below["budget"]["status"] == "ok"
    crossing = h.ok("add_expense", **args, amount=0.01)
    [alert] = crossing["alerts_raised"]
    assert (alert["kind"], alert["budget_id"]) == ("threshold", fun["id"])
    assert alert["expense_id"] == crossing["expense"]["id"]
    assert crossing["budget"]["status"] == "near_limit" and alert["percent_used"] == 80.0
    assert h.ok("add_expense", **args, amount=1.0)["alerts_raised"] == []  # already alerted
    over = h.ok("add_expense", **args, amount=fun["limit"])
    assert [a["kind"] for a in over["alerts_raised"]] == ["over_budget"] and over["budget"]["status"] == "over"
    unseen = h.ok("list_alerts", month=CURRENT, unacknowledged_only=True)["alerts"]
    assert [a["id"] for a in unseen][:2] == [over["alerts_raised"][0]["id"], alert["id"]]  # newest first
    seen = h.ok("acknowledge_alert", alert_id=alert["id"])
    assert seen["acknowledged"] and seen["acknowledged_at"]
    h.fails("acknowledge_alert", "ALERT_ALREADY_ACKNOWLEDGED", "CONFLICT", alert_id=alert["id"])
    h.fails("acknowledge_alert", "ALERT_NOT_FOUND", alert_id="alr_missing")


def test_spending_without_a_budget_raises_no_alert(h):
    travel = category(h, "Travel")
    added = h.ok("add_expense", amount=900.0, category_id=travel, date="2026-03-01", merchant="Skyway Airlines")
    assert added["budget"] is None and added["alerts_raised"] == []


# -- budgets --------------------------------------------------------------------------------------


def test_budgets_are_one_per_category_and_month_and_cover_what_is_spent(h):
    travel = category(h, "Travel")
    h.ok("add_expense", amount=300.0, category_id=travel, date="2026-03-01", merchant="Harbor Hotel")
    error = h.fails("create_budget", "LIMIT_BELOW_SPENT", category_id=travel, month=CURRENT, limit=299.99)
    assert error["details"]["spent"] >= 300.0
    made = h.ok("create_budget", category_id=travel, month=CURRENT, limit=error["details"]["spent"] + 20)
    assert [a["kind"] for a in made["alerts_raised"]] == ["threshold"]  # already past 80% when set
    error = h.fails("create_budget", "BUDGET_EXISTS", "CONFLICT", category_id=travel, month=CURRENT, limit=1_000.0)
    assert error["details"]["budget_id"] == made["budget"]["id"]
    h.fails("create_budget", "CATEGORY_NOT_FOUND", category_id="cat_missing", month=CURRENT, limit=10.0)
    planned = h.ok("create_budget", category_id=travel, month="2026-07", limit=1_500.0)["budget"]
    assert (planned["spent"], planned["remaining"], planned["status"]) == (0.0, 1_500.0, "ok")


def test_a_limit_cannot_go_below_what_was_spent(h):
    over = next(b for b in h.ok("list_budgets", month=PREVIOUS)["budgets"] if b["status"] == "over")
    error = h.fails("set_budget_limit", "LIMIT_BELOW_SPENT", budget_id=over["id"], limit=over["spent"] - 0.01)
    assert error["details"]["spent"] == over["spent"]
    raised = h.ok("set_budget_limit", budget_id=over["id"], limit=over["spent"] + 100, alert_threshold_pct=95)
    assert raised["previous_limit"] == over["limit"] and raised["budget"]["status"] == "ok"
    assert raised["alerts_raised"] == []  # the over-budget alert from before stays, none is added
    groceries = budget_of(h, "Groceries", CURRENT)
    h.ok("add_expense", amount=50.0, category_id=groceries["category_id"], date="2026-03-02", merchant="FreshCo")
    lowered = h.ok("set_budget_limit", budget_id=groceries["id"], limit=groceries["spent"] + 55)
    assert [a["kind"] for a in lowered["alerts_raised"]] == ["threshold"]
    h.fails("set_budget_limit", "BUDGET_NOT_FOUND", budget_id="bud_missing", limit=10.0)


# -- categories and expenses ----------------------------------------------------------------------


def test_custom_categories_and_an_id_flow_through_budget_expense_and_summary(h):
    names = [c["name"] for c in h.ok("list_categories")["categories"]]
    assert "Gifts" in names and len(names) == 11
    pets = h.ok("create_category", name="Pet Care", group="essentials")
    error = h.fails("create_category", "CATEGORY_EXISTS", name="pet care")
    assert error["details"]["category_id"] == pets["id"]
    assert [c["id"] for c in h.ok("list_categories", group="essentials")["categories"]][-1] == pets["id"]
    plan = h.ok("create_budget", category_id=pets["id"], month=CURRENT, limit=100.0)["budget"]
    vet = h.ok("add_expense", amount=85.0, category_id=pets["id"], date="2026-03-02", merchant="Happy Paws Vet",
               note="vaccines")
    assert vet["budget"]["id"] == plan["id"] and vet["alerts_raised"][0]["category_name"] == "Pet Care"
    listed = h.ok("list_expenses", category_id=pets["id"])
    assert [e["id"] for e in listed["expenses"]] == [vet["expense"]["id"]] and listed["total_amount"] == 85.0
    row = next(r for r in h.ok("get_monthly_summary")["categories"] if r["category_id"] == pets["id"])
    assert (row["spent"], row["limit"], row["percent_used"], row["status"]) == (85.0, 100.0, 85.0, "near_limit")


def test_update_and_delete_move_spending_between_budgets(h):
    expense = h.ok("add_expense", amount=40.0, category_id=category(h, "Groceries"), date="2026-03-02",
                   merchant="Green Basket Grocery")["expense"]
    groceries, dining = budget_of(h, "Groceries", CURRENT), budget_of(h, "Dining Out", CURRENT)
    h.fails("update_expense", "NOTHING_TO_UPDATE", expense_id=expense["id"])
    h.fails("update_expense", "CATEGORY_NOT_FOUND", expense_id=expense["id"], category_id="cat_missing")
    moved = h.ok("update_expense", expense_id=expense["id"], category_id=dining["category_id"], amount=45.5,
                 merchant="Bistro 21")["expense"]
    assert (moved["amount"], moved["merchant"], moved["date"]) == (45.5, "Bistro 21", "2026-03-02")
    assert budget_of(h, "Groceries", CURRENT)["spent"] == round(groceries["spent"] - 40.0, 2)
    assert budget_of(h, "Dining Out", CURRENT)["spent"] == round(dining["spent"] + 45.5, 2)
    h.ok("delete_expense", expense_id=expense["id"])
    assert budget_of(h, "Dining Out", CURRENT)["spent"] == dining["spent"]
    h.fails("delete_expense", "EXPENSE_NOT_FOUND", expense_id=expense["id"])
    h.fails("update_expense", "EXPENSE_NOT_FOUND", expense_id=expense["id"], amount=1.0)


def test_list_expenses_filters_and_pages(h):
    everything = h.ok("list_expenses", limit=100)
    dates = [e["date"] for e in everything["expenses"]]
    assert dates == sorted(dates, reverse=True) and everything["total"] == len(h.state.expenses)
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("list_expenses", month=PREVIOUS, limit=9, offset=offset)
        seen += [e["id"] for e in page["expenses"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == h.ok("list_expenses", month=PREVIOUS)["total"]
    coffee = h.ok("list_expenses", merchant="COFFEE", min_amount=5, limit=100)["expenses"]
    assert all("coffee" in e["merchant"].lower() and e["amount"] >= 5 for e in coffee)
    h.fails("list_expenses", "CATEGORY_NOT_FOUND", category_id="cat_missing")


def test_monthly_summary_adds_up(h):
    summary = h.ok("get_monthly_summary", month=PREVIOUS)
    listed = h.ok("list_expenses", month=PREVIOUS, limit=100)
    assert summary["total_spent"] == listed["total_amount"] and summary["expense_count"] == listed["total"]
    assert summary["total_spent"] == round(summary["budgeted_spent"] + summary["unbudgeted_spent"], 2)
    assert summary["total_spent"] == round(sum(r["spent"] for r in summary["categories"]), 2)
    assert summary["total_budgeted"] == h.ok("list_budgets", month=PREVIOUS)["total_limit"]
    spent = [r["spent"] for r in summary["categories"]]
    assert spent == sorted(spent, reverse=True)
    assert any(r["status"] == "over" for r in summary["categories"])
    before = h.ok("get_monthly_summary", month="2026-01")["total_spent"]
    assert summary["previous_month"] == {"month": "2026-01", "total_spent": before,
                                         "change": round(summary["total_spent"] - before, 2)}
    merchants = [m["spent"] for m in summary["top_merchants"]]
    assert len(merchants) == 5 and merchants == sorted(merchants, reverse=True)
    future = h.ok("get_monthly_summary", month="2026-05")
    assert (future["month_status"], future["total_spent"], future["categories"]) == ("future", 0.0, [])
