"""The budget server: tool surface, seed, month rules on the session clock, budgets, expenses,
alerts and summaries, and typed failures.

Every failure test checks the reason, that the tool declares it, and that the session state is
unchanged afterwards — by the tool itself (it checks before it writes), not only by the
executor's rollback. The session clock starts on 2026-03-02: March is current, February still
open, January and before closed.
"""

from __future__ import annotations

import json
from typing import Any

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import budget
from prove_servers.budget import BudgetOptions, server

TOOLS = server.tools
NAMES = {
    "list_categories", "create_category", "list_budgets", "create_budget", "set_budget_limit", "add_expense",
    "list_expenses", "update_expense", "delete_expense", "list_alerts", "acknowledge_alert", "get_monthly_summary",
}
ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]
CURRENT, PREVIOUS, CLOSED = "2026-03", "2026-02", "2026-01"


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


def category(rt: ServerRuntime, sid: str, name: str) -> str:
    return rt.state(sid).categories.first(name=name)["id"]


def budget_of(rt: ServerRuntime, sid: str, name: str, month: str) -> dict:
    return next(b for b in ok(rt, sid, "list_budgets", month=month)["budgets"] if b["category_name"] == name)


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_12_tools_each_described_with_examples():
    assert set(TOOLS) == NAMES and len(TOOLS) == 12
    assert (server.name, server.domain) == ("budget", "lifestyle")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_categories", "list_budgets", "list_expenses", "list_alerts", "get_monthly_summary"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"delete_expense"}
    assert not TOOLS["add_expense"].spec.annotations.idempotent  # a repeat records a second expense
    assert TOOLS["add_expense"].spec.produces == ("expense", "alert")
    assert TOOLS["create_budget"].spec.entity_params() == {"category_id": "category"}


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
            rt.call(sid, name, args)  # refused (exists, acknowledged, gone) or a no-op
            assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash(first.new_session()) == again.state_hash(again.new_session())
    assert other.state_hash(other.new_session()) != first.state_hash(first.new_session())


@pytest.mark.parametrize("seed", [0, 1, 3, 8])
def test_seed_has_the_months_budgets_and_alerts_tasks_need(seed):
    state = server.build_state(seed)
    assert state.get_var("tracking_since") == "2025-10"
    assert sorted({e["month"] for e in state.expenses}) == ["2025-10", "2025-11", "2025-12", CLOSED, PREVIOUS, CURRENT]
    assert max(e["date"] for e in state.expenses) <= "2026-03-02"
    budgeted = {state.categories.get(b["category_id"])["name"] for b in state.budgets.where(month=CURRENT)}
    assert {"Travel", "Gifts"}.isdisjoint(budgeted) and {"Rent", "Groceries", "Entertainment"} <= budgeted
    views = [budget._budget_view(state, b) for b in state.budgets.where(month=PREVIOUS)]
    assert any(v["status"] == "over" for v in views)
    fun = budget._budget_view(state, state.budgets.first(month=CURRENT, category_id=state.categories.first(
        name="Entertainment")["id"]))
    assert 70 <= fun["percent_used"] < 80  # just under its threshold: the next night out alerts
    for alert in state.alerts:  # alerts of closed months were seen; open months' may not be
        assert alert["acknowledged"] == (alert["month"] < PREVIOUS)
        assert alert["expense_id"] in {e["id"] for e in state.expenses.where(month=alert["month"])}
    assert state.alerts.where(acknowledged=False)


def test_a_ten_times_larger_seed_works(rt):
    big = ServerRuntime(server, options=BudgetOptions(expenses_per_month=300))
    assert len(big.state(big.new_session()).expenses) > 8 * len(rt.state(rt.new_session()).expenses)
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        BudgetOptions(expenses_per_month=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(budget)
    registered: list[Any] = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- months ---------------------------------------------------------------------------------------


def test_months_are_validated_against_tracking_and_the_planning_horizon(rt, sid):
    for month in ("2026-13", "2026-00", "2025-09", "2027-04"):
        error = fails(rt, sid, "list_budgets", "INVALID_MONTH", month=month)
        assert error["code"] == "INVALID_ARGUMENT"
    error = fails(rt, sid, "get_monthly_summary", "INVALID_MONTH", month="2025-09")
    assert (error["details"]["first_month"], error["details"]["last_month"]) == ("2025-10", "2027-03")
    fails(rt, sid, "list_expenses", "INVALID_MONTH", month="2030-01")
    fails(rt, sid, "list_alerts", "INVALID_MONTH", month="1999-12")
    fails(rt, sid, "create_budget", "INVALID_MONTH", category_id=category(rt, sid, "Travel"), month="2027-04",
          limit=100.0)
    assert rt.call(sid, "list_budgets", {"month": "March"}).error["reason"] == "SCHEMA_VIOLATION"
    statuses = {m: ok(rt, sid, "list_budgets", month=m)["month_status"] for m in (CLOSED, PREVIOUS, CURRENT, "2027-03")}
    assert statuses == {CLOSED: "closed", PREVIOUS: "open", CURRENT: "current", "2027-03": "future"}


def test_closed_months_are_final(rt, sid):
    state = rt.state(sid)
    groceries = category(rt, sid, "Groceries")
    old = state.expenses.first(month=CLOSED)
    error = fails(rt, sid, "add_expense", "EXPENSE_IN_CLOSED_MONTH", amount=10.0, category_id=groceries,
                  date="2026-01-31", merchant="FreshCo Market")
    assert error["details"]["month"] == CLOSED
    fails(rt, sid, "update_expense", "EXPENSE_IN_CLOSED_MONTH", expense_id=old["id"], amount=1.0)
    fails(rt, sid, "delete_expense", "EXPENSE_IN_CLOSED_MONTH", expense_id=old["id"])
    recent = state.expenses.first(month=PREVIOUS)
    fails(rt, sid, "update_expense", "EXPENSE_IN_CLOSED_MONTH", expense_id=recent["id"], date="2026-01-15")
    fails(rt, sid, "create_budget", "MONTH_CLOSED", category_id=category(rt, sid, "Travel"), month=CLOSED, limit=50.0)
    fails(rt, sid, "set_budget_limit", "MONTH_CLOSED", budget_id=state.budgets.first(month=CLOSED)["id"], limit=9e3)
    late = ok(rt, sid, "add_expense", amount=10.0, category_id=groceries, date="2026-02-01", merchant="FreshCo Market")
    assert late["expense"]["month"] == PREVIOUS  # the previous month still takes late entries


def test_expense_dates_must_be_real_and_not_in_the_future(rt, sid):
    groceries = category(rt, sid, "Groceries")
    base = {"amount": 9.99, "category_id": groceries, "merchant": "Corner Deli"}
    error = fails(rt, sid, "add_expense", "EXPENSE_DATE_IN_FUTURE", **base, date="2026-03-03")
    assert error["code"] == "INVALID_ARGUMENT"
    fails(rt, sid, "add_expense", "BAD_DATE", **base, date="2026-02-30")
    expense = ok(rt, sid, "add_expense", **base, date="2026-03-02")["expense"]
    fails(rt, sid, "update_expense", "EXPENSE_DATE_IN_FUTURE", expense_id=expense["id"], date="2026-04-01")


# -- alerts ---------------------------------------------------------------------------------------


def test_spending_past_the_threshold_and_the_limit_raises_each_alert_once(rt, sid):
    fun = budget_of(rt, sid, "Entertainment", CURRENT)
    room = fun["limit"] * fun["alert_threshold_pct"] / 100 - fun["spent"]
    args = {"category_id": fun["category_id"], "date": "2026-03-02", "merchant": "Cineplex Downtown"}
    below = ok(rt, sid, "add_expense", **args, amount=round(room - 0.01, 2))
    assert below["alerts_raised"] == [] and below["budget"]["status"] == "ok"
    crossing = ok(rt, sid, "add_expense", **args, amount=0.01)
    [alert] = crossing["alerts_raised"]
    assert (alert["kind"], alert["budget_id"]) == ("threshold", fun["id"])
    assert alert["expense_id"] == crossing["expense"]["id"]
    assert crossing["budget"]["status"] == "near_limit" and alert["percent_used"] == 80.0
    assert ok(rt, sid, "add_expense", **args, amount=1.0)["alerts_raised"] == []  # already alerted
    over = ok(rt, sid, "add_expense", **args, amount=fun["limit"])
    assert [a["kind"] for a in over["alerts_raised"]] == ["over_budget"] and over["budget"]["status"] == "over"
    unseen = ok(rt, sid, "list_alerts", month=CURRENT, unacknowledged_only=True)["alerts"]
    assert [a["id"] for a in unseen][:2] == [over["alerts_raised"][0]["id"], alert["id"]]  # newest first
    seen = ok(rt, sid, "acknowledge_alert", alert_id=alert["id"])
    assert seen["acknowledged"] and seen["acknowledged_at"]
    error = fails(rt, sid, "acknowledge_alert", "ALERT_ALREADY_ACKNOWLEDGED", alert_id=alert["id"])
    assert error["code"] == "CONFLICT"
    fails(rt, sid, "acknowledge_alert", "ALERT_NOT_FOUND", alert_id="alr_missing")


def test_spending_without_a_budget_raises_no_alert(rt, sid):
    travel = category(rt, sid, "Travel")
    added = ok(rt, sid, "add_expense", amount=900.0, category_id=travel, date="2026-03-01", merchant="Skyway Airlines")
    assert added["budget"] is None and added["alerts_raised"] == []


# -- budgets --------------------------------------------------------------------------------------


def test_budgets_are_one_per_category_and_month_and_cover_what_is_spent(rt, sid):
    travel = category(rt, sid, "Travel")
    ok(rt, sid, "add_expense", amount=300.0, category_id=travel, date="2026-03-01", merchant="Harbor Hotel")
    error = fails(rt, sid, "create_budget", "LIMIT_BELOW_SPENT", category_id=travel, month=CURRENT, limit=299.99)
    assert error["details"]["spent"] >= 300.0
    made = ok(rt, sid, "create_budget", category_id=travel, month=CURRENT, limit=error["details"]["spent"] + 20)
    assert [a["kind"] for a in made["alerts_raised"]] == ["threshold"]  # already past 80% when set
    error = fails(rt, sid, "create_budget", "BUDGET_EXISTS", category_id=travel, month=CURRENT, limit=1_000.0)
    assert error["code"] == "CONFLICT" and error["details"]["budget_id"] == made["budget"]["id"]
    fails(rt, sid, "create_budget", "CATEGORY_NOT_FOUND", category_id="cat_missing", month=CURRENT, limit=10.0)
    planned = ok(rt, sid, "create_budget", category_id=travel, month="2026-07", limit=1_500.0)["budget"]
    assert (planned["spent"], planned["remaining"], planned["status"]) == (0.0, 1_500.0, "ok")


def test_a_limit_cannot_go_below_what_was_spent(rt, sid):
    over = next(b for b in ok(rt, sid, "list_budgets", month=PREVIOUS)["budgets"] if b["status"] == "over")
    error = fails(rt, sid, "set_budget_limit", "LIMIT_BELOW_SPENT", budget_id=over["id"], limit=over["spent"] - 0.01)
    assert error["details"]["spent"] == over["spent"]
    raised = ok(rt, sid, "set_budget_limit", budget_id=over["id"], limit=over["spent"] + 100, alert_threshold_pct=95)
    assert raised["previous_limit"] == over["limit"] and raised["budget"]["status"] == "ok"
    assert raised["alerts_raised"] == []  # the over-budget alert from before stays, none is added
    groceries = budget_of(rt, sid, "Groceries", CURRENT)
    ok(rt, sid, "add_expense", amount=50.0, category_id=groceries["category_id"], date="2026-03-02", merchant="FreshCo")
    lowered = ok(rt, sid, "set_budget_limit", budget_id=groceries["id"], limit=groceries["spent"] + 55)
    assert [a["kind"] for a in lowered["alerts_raised"]] == ["threshold"]
    fails(rt, sid, "set_budget_limit", "BUDGET_NOT_FOUND", budget_id="bud_missing", limit=10.0)


# -- categories and expenses ----------------------------------------------------------------------


def test_custom_categories_and_an_id_flow_through_budget_expense_and_summary(rt, sid):
    names = [c["name"] for c in ok(rt, sid, "list_categories")["categories"]]
    assert "Gifts" in names and len(names) == 11
    pets = ok(rt, sid, "create_category", name="Pet Care", group="essentials")
    error = fails(rt, sid, "create_category", "CATEGORY_EXISTS", name="pet care")
    assert error["details"]["category_id"] == pets["id"]
    assert [c["id"] for c in ok(rt, sid, "list_categories", group="essentials")["categories"]][-1] == pets["id"]
    plan = ok(rt, sid, "create_budget", category_id=pets["id"], month=CURRENT, limit=100.0)["budget"]
    vet = ok(rt, sid, "add_expense", amount=85.0, category_id=pets["id"], date="2026-03-02", merchant="Happy Paws Vet",
             note="vaccines")
    assert vet["budget"]["id"] == plan["id"] and vet["alerts_raised"][0]["category_name"] == "Pet Care"
    listed = ok(rt, sid, "list_expenses", category_id=pets["id"])
    assert [e["id"] for e in listed["expenses"]] == [vet["expense"]["id"]] and listed["total_amount"] == 85.0
    row = next(r for r in ok(rt, sid, "get_monthly_summary")["categories"] if r["category_id"] == pets["id"])
    assert (row["spent"], row["limit"], row["percent_used"], row["status"]) == (85.0, 100.0, 85.0, "near_limit")


def test_update_and_delete_move_spending_between_budgets(rt, sid):
    expense = ok(rt, sid, "add_expense", amount=40.0, category_id=category(rt, sid, "Groceries"), date="2026-03-02",
                 merchant="Green Basket Grocery")["expense"]
    groceries, dining = budget_of(rt, sid, "Groceries", CURRENT), budget_of(rt, sid, "Dining Out", CURRENT)
    fails(rt, sid, "update_expense", "NOTHING_TO_UPDATE", expense_id=expense["id"])
    fails(rt, sid, "update_expense", "CATEGORY_NOT_FOUND", expense_id=expense["id"], category_id="cat_missing")
    moved = ok(rt, sid, "update_expense", expense_id=expense["id"], category_id=dining["category_id"], amount=45.5,
               merchant="Bistro 21")["expense"]
    assert (moved["amount"], moved["merchant"], moved["date"]) == (45.5, "Bistro 21", "2026-03-02")
    assert budget_of(rt, sid, "Groceries", CURRENT)["spent"] == round(groceries["spent"] - 40.0, 2)
    assert budget_of(rt, sid, "Dining Out", CURRENT)["spent"] == round(dining["spent"] + 45.5, 2)
    ok(rt, sid, "delete_expense", expense_id=expense["id"])
    assert budget_of(rt, sid, "Dining Out", CURRENT)["spent"] == dining["spent"]
    fails(rt, sid, "delete_expense", "EXPENSE_NOT_FOUND", expense_id=expense["id"])
    fails(rt, sid, "update_expense", "EXPENSE_NOT_FOUND", expense_id=expense["id"], amount=1.0)


def test_list_expenses_filters_and_pages(rt, sid):
    everything = ok(rt, sid, "list_expenses", limit=100)
    dates = [e["date"] for e in everything["expenses"]]
    assert dates == sorted(dates, reverse=True) and everything["total"] == len(rt.state(sid).expenses)
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "list_expenses", month=PREVIOUS, limit=9, offset=offset)
        seen += [e["id"] for e in page["expenses"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == ok(rt, sid, "list_expenses", month=PREVIOUS)["total"]
    coffee = ok(rt, sid, "list_expenses", merchant="COFFEE", min_amount=5, limit=100)["expenses"]
    assert all("coffee" in e["merchant"].lower() and e["amount"] >= 5 for e in coffee)
    fails(rt, sid, "list_expenses", "CATEGORY_NOT_FOUND", category_id="cat_missing")


def test_monthly_summary_adds_up(rt, sid):
    summary = ok(rt, sid, "get_monthly_summary", month=PREVIOUS)
    listed = ok(rt, sid, "list_expenses", month=PREVIOUS, limit=100)
    assert summary["total_spent"] == listed["total_amount"] and summary["expense_count"] == listed["total"]
    assert summary["total_spent"] == round(summary["budgeted_spent"] + summary["unbudgeted_spent"], 2)
    assert summary["total_spent"] == round(sum(r["spent"] for r in summary["categories"]), 2)
    assert summary["total_budgeted"] == ok(rt, sid, "list_budgets", month=PREVIOUS)["total_limit"]
    spent = [r["spent"] for r in summary["categories"]]
    assert spent == sorted(spent, reverse=True)
    assert any(r["status"] == "over" for r in summary["categories"])
    before = ok(rt, sid, "get_monthly_summary", month="2026-01")["total_spent"]
    assert summary["previous_month"] == {"month": "2026-01", "total_spent": before,
                                         "change": round(summary["total_spent"] - before, 2)}
    merchants = [m["spent"] for m in summary["top_merchants"]]
    assert len(merchants) == 5 and merchants == sorted(merchants, reverse=True)
    future = ok(rt, sid, "get_monthly_summary", month="2026-05")
    assert (future["month_status"], future["total_spent"], future["categories"]) == ("future", 0.0, [])
