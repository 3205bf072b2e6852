"""The trading server: tool surface, seed, exchange hours on the session clock, order rules and
typed failures.

Every failure test checks the reason, that the tool declares it, and that the session state is
unchanged afterwards — by the tool itself (it checks before it writes), not only by the
executor's rollback. Tests that need another time of day move the session clock forward.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import trading
from prove_servers.trading import EXCHANGES, TradingOptions, server

TOOLS = server.tools
NAMES = {
    "search_symbols", "get_quote", "list_watchlists", "create_watchlist", "add_to_watchlist", "remove_from_watchlist",
    "place_market_order", "place_limit_order", "cancel_order", "get_order", "list_orders", "list_positions",
    "get_cash_balance",
}
ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]
UTC = dt.UTC


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


def move_clock_to(rt: ServerRuntime, sid: str, when: dt.datetime) -> None:
    state = rt.state(sid)
    state.advance_clock(int((when - state.now()).total_seconds()))


def cash(rt: ServerRuntime, sid: str, currency: str) -> dict:
    return next(b for b in ok(rt, sid, "get_cash_balance")["balances"] if b["currency"] == currency)


def quote(rt: ServerRuntime, sid: str, symbol: str) -> dict:
    return ok(rt, sid, "get_quote", symbol=symbol)


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_13_tools_each_described_with_examples():
    assert set(TOOLS) == NAMES and len(TOOLS) == 13
    assert (server.name, server.domain) == ("trading", "finance")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"search_symbols", "get_quote", "list_watchlists", "get_order", "list_orders",
                         "list_positions", "get_cash_balance"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"remove_from_watchlist", "cancel_order"}
    for placing in ("place_market_order", "place_limit_order"):  # a repeat trades again
        assert not TOOLS[placing].spec.annotations.idempotent
        assert TOOLS[placing].spec.produces == ("order",)
    assert TOOLS["place_limit_order"].spec.entity_params() == {"symbol": "security"}


def test_quantity_and_symbol_bounds_are_in_the_schema(rt, sid):
    for args in ({"quantity": 0}, {"quantity": 10_001}, {"quantity": 1.5}, {"symbol": "TOO-LONG"}, {"side": "short"}):
        call = {"symbol": "VOD.L", "side": "buy", "quantity": 1, **args}
        assert rt.call(sid, "place_market_order", call).error["reason"] == "SCHEMA_VIOLATION", args


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
        sid = rt.new_session()
        args = example_args(rt, sid, tool.examples[0])
        ok(rt, sid, name, **args)
        once = rt.state_hash(sid)
        rt.call(sid, name, args)  # refused: already exists, already there, already gone, already canceled
        assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash(first.new_session()) == again.state_hash(again.new_session())
    assert other.state_hash(other.new_session()) != first.state_hash(first.new_session())


@pytest.mark.parametrize("seed", [0, 1, 4, 9])
def test_seed_is_consistent_and_has_what_tasks_need(seed):
    state = server.build_state(seed)
    assert {s["currency"] for s in state.securities} == {"USD", "GBP"} and len(state.securities) == 26
    for s in state.securities:
        assert 0 < s["bid"] < s["ask"] and s["day_low"] <= s["last"] <= s["day_high"]
    assert {p["currency"] for p in state.positions} == {"USD", "GBP"}
    assert {o["status"] for o in state.orders} >= {"filled", "open"}
    assert {(o["side"], o["currency"]) for o in state.orders.where(status="open")} == {("buy", "USD"), ("sell", "GBP")}
    for order in state.orders:  # every seeded order was placed while its exchange was open
        placed = dt.datetime.strptime(order["placed_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert EXCHANGES[order["exchange"]].is_open(placed), order
    for position in state.positions:  # positions are what the filled orders add up to
        fills = state.orders.where(status="filled", symbol=position["symbol"])
        assert position["quantity"] == sum(o["quantity"] * (1 if o["side"] == "buy" else -1) for o in fills) > 0
    assert all(c["cash"] > 0 for c in state.cash)


def test_a_ten_times_larger_seed_works(rt):
    big = ServerRuntime(server, options=TradingOptions(past_orders=300))
    assert len(big.state(big.new_session()).orders) > 9 * len(rt.state(rt.new_session()).orders)
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        TradingOptions(past_orders=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(trading)
    registered: list[Any] = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- exchange hours -------------------------------------------------------------------------------


def test_the_exchange_calendar_follows_local_time_and_daylight_saving():
    nyse, lse = EXCHANGES["NYSE"], EXCHANGES["LSE"]
    at = lambda text: dt.datetime.fromisoformat(text).replace(tzinfo=UTC)  # noqa: E731
    assert not nyse.is_open(at("2026-03-02T09:00")) and lse.is_open(at("2026-03-02T09:00"))  # the default clock
    assert nyse.is_open(at("2026-03-06T14:30")) and not nyse.is_open(at("2026-03-06T14:29"))  # 09:30 EST
    assert nyse.is_open(at("2026-03-09T13:30")) and not nyse.is_open(at("2026-03-09T20:00"))  # EDT from Mar 8
    assert lse.is_open(at("2026-03-27T16:29")) and not lse.is_open(at("2026-03-30T15:30"))  # BST from Mar 29
    assert not nyse.is_open(at("2026-04-03T15:00")) and not lse.is_open(at("2026-04-06T10:00"))  # Easter holidays
    assert not lse.is_open(at("2026-03-07T10:00"))  # Saturday
    assert nyse.next_session(at("2026-04-02T21:00")) == (at("2026-04-06T13:30"), at("2026-04-06T20:00"))
    assert lse.next_session(at("2026-03-06T17:00"))[0] == at("2026-03-09T08:00")


def test_at_the_default_clock_london_is_open_and_new_york_closed(rt, sid):
    us, uk = quote(rt, sid, "AAPL")["market"], quote(rt, sid, "vod.l")["market"]
    assert (us["is_open"], us["local_time"]) == (False, "2026-03-02T04:00")
    assert us["session_opens_at"] == "2026-03-02T14:30:00Z"
    assert (uk["is_open"], uk["local_time"]) == (True, "2026-03-02T09:00")
    error = fails(rt, sid, "place_market_order", "MARKET_CLOSED", symbol="AAPL", side="buy", quantity=1)
    assert error["details"] == {"exchange": "NASDAQ", "opens_at": "2026-03-02T14:30:00Z"}
    ok(rt, sid, "place_market_order", symbol="VOD.L", side="buy", quantity=100)


def test_a_limit_order_on_a_closed_market_is_queued_even_when_marketable(rt, sid):
    aapl = quote(rt, sid, "AAPL")
    before = cash(rt, sid, "USD")
    placed = ok(rt, sid, "place_limit_order", symbol="AAPL", side="buy", quantity=10, limit_price=aapl["ask"])
    order = placed["order"]
    assert (order["status"], order["filled_quantity"], order["expires_at"]) == ("queued", 0, "2026-03-02T21:00:00Z")
    reserved = round(10 * aapl["ask"], 2)
    after = cash(rt, sid, "USD")
    assert after["cash"] == before["cash"] and after["reserved_for_orders"] == round(before["reserved_for_orders"]
                                                                                     + reserved, 2)
    assert placed["buying_power"] == after["buying_power"] == round(before["buying_power"] - reserved, 2)
    canceled = ok(rt, sid, "cancel_order", order_id=order["id"])
    assert canceled["status"] == "canceled" and cash(rt, sid, "USD")["buying_power"] == before["buying_power"]


def test_market_orders_follow_the_clock(rt, sid):
    move_clock_to(rt, sid, dt.datetime(2026, 3, 2, 14, 30, tzinfo=UTC))  # 09:30 in New York
    aapl = quote(rt, sid, "AAPL")
    assert aapl["market"]["is_open"]
    filled = ok(rt, sid, "place_market_order", symbol="AAPL", side="buy", quantity=2)["order"]
    assert (filled["status"], filled["filled_price"]) == ("filled", aapl["ask"])
    move_clock_to(rt, sid, dt.datetime(2026, 3, 2, 16, 30, tzinfo=UTC))  # 16:30 in London: closed
    error = fails(rt, sid, "place_market_order", "MARKET_CLOSED", symbol="VOD.L", side="buy", quantity=1)
    assert error["details"]["opens_at"] == "2026-03-03T08:00:00Z"
    queued = ok(rt, sid, "place_limit_order", symbol="VOD.L", side="buy", quantity=1,
                limit_price=quote(rt, sid, "VOD.L")["ask"])["order"]
    assert queued["status"] == "queued" and queued["expires_at"] == "2026-03-03T16:30:00Z"  # the next session's day


# -- orders, cash and positions -------------------------------------------------------------------


def test_buy_and_sell_move_cash_and_positions(rt, sid):
    symbol = rt.state(sid).securities.first(lambda s: s["currency"] == "GBP"
                                            and rt.state(sid).positions.find(s["id"]) is None)["id"]
    q = quote(rt, sid, symbol)
    gbp = cash(rt, sid, "GBP")["cash"]
    buy = ok(rt, sid, "place_market_order", symbol=symbol, side="buy", quantity=300)
    assert buy["cash"] == round(gbp - 300 * q["ask"], 2) and buy["order"]["notional"] == round(300 * q["ask"], 2)
    position = next(p for p in ok(rt, sid, "list_positions", currency="GBP")["positions"] if p["symbol"] == symbol)
    assert (position["quantity"], position["average_cost"], position["available_to_sell"]) == (300, q["ask"], 300)
    assert position["unrealized_pnl"] == round(300 * q["last"] - position["cost_basis"], 2)
    sell = ok(rt, sid, "place_market_order", symbol=symbol, side="sell", quantity=100)["order"]
    assert (sell["filled_price"], sell["realized_pnl"]) == (q["bid"], round(100 * (q["bid"] - q["ask"]), 2))
    assert rt.state(sid).positions.get(symbol)["quantity"] == 200
    ok(rt, sid, "place_market_order", symbol=symbol, side="sell", quantity=200)
    assert symbol not in {p["symbol"] for p in ok(rt, sid, "list_positions")["positions"]}  # closed out
    assert cash(rt, sid, "GBP")["cash"] == round(gbp - 300 * q["ask"] + 300 * q["bid"], 2)


def test_a_marketable_limit_order_on_an_open_market_fills_at_the_quote(rt, sid):
    q = quote(rt, sid, "BARC.L")
    high = ok(rt, sid, "place_limit_order", symbol="BARC.L", side="buy", quantity=10, limit_price=round(q["ask"] + 0.05,
                                                                                                       2))
    assert (high["order"]["status"], high["order"]["filled_price"]) == ("filled", q["ask"])  # price improvement
    low = ok(rt, sid, "place_limit_order", symbol="BARC.L", side="buy", quantity=10, limit_price=round(q["bid"] - 0.05,
                                                                                                      2))
    assert (low["order"]["status"], low["order"]["filled_price"]) == ("open", None)


def test_buying_power_counts_open_buy_orders(rt, sid):
    usd = cash(rt, sid, "USD")
    spy = quote(rt, sid, "SPY")
    too_many = int(usd["buying_power"] // spy["ask"]) + 1
    error = fails(rt, sid, "place_limit_order", "INSUFFICIENT_BUYING_POWER", symbol="SPY", side="buy",
                  quantity=too_many, limit_price=spy["ask"])
    assert error["details"]["buying_power"] == usd["buying_power"] and usd["reserved_for_orders"] > 0
    ok(rt, sid, "place_limit_order", symbol="SPY", side="buy", quantity=too_many - 1, limit_price=spy["ask"])
    gbp_power = cash(rt, sid, "GBP")["buying_power"]
    azn = quote(rt, sid, "AZN.L")
    fails(rt, sid, "place_market_order", "INSUFFICIENT_BUYING_POWER", symbol="AZN.L", side="buy",
          quantity=int(gbp_power // azn["ask"]) + 1)  # pounds are not dollars: no currency conversion


def test_no_short_selling_and_offered_shares_are_not_free(rt, sid):
    state = rt.state(sid)
    offer = state.orders.first(status="open", side="sell")
    held = state.positions.get(offer["symbol"])["quantity"]
    free = held - offer["quantity"]
    error = fails(rt, sid, "place_market_order", "INSUFFICIENT_SHARES", symbol=offer["symbol"], side="sell",
                  quantity=free + 1)
    assert (error["details"]["held"], error["details"]["available"]) == (held, free)
    ok(rt, sid, "cancel_order", order_id=offer["id"])
    ok(rt, sid, "place_market_order", symbol=offer["symbol"], side="sell", quantity=free + 1)
    never_held = state.securities.first(lambda s: s["currency"] == "GBP" and state.positions.find(s["id"]) is None)
    fails(rt, sid, "place_market_order", "INSUFFICIENT_SHARES", symbol=never_held["id"], side="sell", quantity=1)
    fails(rt, sid, "place_limit_order", "INSUFFICIENT_SHARES", symbol=never_held["id"], side="sell", quantity=1,
          limit_price=never_held["ask"])


def test_limit_prices_need_the_tick_and_a_sane_band(rt, sid):
    aapl = quote(rt, sid, "AAPL")
    error = fails(rt, sid, "place_limit_order", "INVALID_TICK_SIZE", symbol="AAPL", side="buy", quantity=1,
                  limit_price=200.005)
    assert error["code"] == "INVALID_ARGUMENT" and error["details"]["tick_size"] == 0.01
    ok(rt, sid, "place_limit_order", symbol="VOD.L", side="buy", quantity=10, limit_price=0.6012)  # sub-pound tick
    fails(rt, sid, "place_limit_order", "INVALID_TICK_SIZE", symbol="VOD.L", side="buy", quantity=10,
          limit_price=0.60125)
    error = fails(rt, sid, "place_limit_order", "LIMIT_PRICE_OUT_OF_BAND", symbol="AAPL", side="buy", quantity=1,
                  limit_price=round(aapl["ask"] * 1.2, 2))
    assert error["details"]["max_limit"] == round(aapl["ask"] * 1.1, 2)
    held = rt.state(sid).positions.first(currency="USD")
    fails(rt, sid, "place_limit_order", "LIMIT_PRICE_OUT_OF_BAND", symbol=held["symbol"], side="sell", quantity=1,
          limit_price=round(quote(rt, sid, held["symbol"])["bid"] * 0.5, 2))


def test_only_working_orders_can_be_canceled(rt, sid):
    state = rt.state(sid)
    for status in ("filled", "canceled", "expired"):
        order = state.orders.first(status=status)
        if order is not None:
            error = fails(rt, sid, "cancel_order", "ORDER_NOT_CANCELLABLE", order_id=order["id"])
            assert error["details"]["status"] == status
    fails(rt, sid, "cancel_order", "ORDER_NOT_FOUND", order_id="ord_missing")
    fails(rt, sid, "get_order", "ORDER_NOT_FOUND", order_id="ord_missing")


def test_unknown_symbols_are_typed(rt, sid):
    for tool, args in (("get_quote", {}), ("place_market_order", {"side": "buy", "quantity": 1}),
                       ("place_limit_order", {"side": "buy", "quantity": 1, "limit_price": 10.0})):
        error = fails(rt, sid, tool, "UNKNOWN_SYMBOL", symbol="ZZZZ", **args)
        assert error["code"] == "NOT_FOUND"
    watchlist = rt.state(sid).watchlists.first()["id"]
    fails(rt, sid, "add_to_watchlist", "UNKNOWN_SYMBOL", watchlist_id=watchlist, symbol="ZZZZ.L")
    fails(rt, sid, "create_watchlist", "UNKNOWN_SYMBOL", name="Mixed", symbols=["AAPL", "ZZZZ"])
    assert ok(rt, sid, "list_orders", symbol="ZZZZ")["total"] == 0


# -- watchlists -----------------------------------------------------------------------------------


def test_watchlist_lifecycle_and_its_failures(rt, sid):
    made = ok(rt, sid, "create_watchlist", name="Chips", symbols=["nvda", "AAPL", "NVDA"])
    assert made["symbols"] == ["NVDA", "AAPL"] and [i["symbol"] for i in made["items"]] == ["NVDA", "AAPL"]
    error = fails(rt, sid, "create_watchlist", "WATCHLIST_EXISTS", name="  chips ")
    assert error["code"] == "CONFLICT" and error["details"]["watchlist_id"] == made["id"]
    added = ok(rt, sid, "add_to_watchlist", watchlist_id=made["id"], symbol="msft")
    assert added["symbols"] == ["NVDA", "AAPL", "MSFT"]
    fails(rt, sid, "add_to_watchlist", "ALREADY_IN_WATCHLIST", watchlist_id=made["id"], symbol="msft")
    assert ok(rt, sid, "remove_from_watchlist", watchlist_id=made["id"], symbol="aapl")["symbols"] == ["NVDA", "MSFT"]
    fails(rt, sid, "remove_from_watchlist", "NOT_IN_WATCHLIST", watchlist_id=made["id"], symbol="AAPL")
    fails(rt, sid, "add_to_watchlist", "WATCHLIST_NOT_FOUND", watchlist_id="wl_missing", symbol="AAPL")
    names = [w["name"] for w in ok(rt, sid, "list_watchlists")["watchlists"]]
    for n in range(trading.MAX_WATCHLISTS - len(names)):
        ok(rt, sid, "create_watchlist", name=f"List {n}")
    error = fails(rt, sid, "create_watchlist", "WATCHLIST_LIMIT_REACHED", name="One too many")
    assert error["code"] == "RESOURCE_EXHAUSTED"


# -- discovery and history ------------------------------------------------------------------------


def test_ids_flow_from_search_to_order_to_history(rt, sid):
    found = ok(rt, sid, "search_symbols", query="astrazeneca")["results"]
    assert [r["symbol"] for r in found] == ["AZN.L"]
    assert {r["symbol"] for r in ok(rt, sid, "search_symbols", query="energy", exchange="LSE")["results"]} == {
        "BP.L", "SHEL.L"}
    q = quote(rt, sid, found[0]["symbol"])
    placed = ok(rt, sid, "place_limit_order", symbol=q["symbol"], side="buy", quantity=3,
                limit_price=round(q["bid"] * 0.97, 2), time_in_force="gtc")["order"]
    assert placed["status"] == "open"
    newest = ok(rt, sid, "list_orders", limit=1)["orders"][0]
    assert newest["id"] == placed["id"]
    assert ok(rt, sid, "list_orders", symbol="azn.l", status="open")["orders"] == [placed]
    ok(rt, sid, "cancel_order", order_id=placed["id"])
    fails(rt, sid, "cancel_order", "ORDER_NOT_CANCELLABLE", order_id=placed["id"])
    assert ok(rt, sid, "get_order", order_id=placed["id"])["status"] == "canceled"


def test_order_history_pages_newest_first(rt, sid):
    everything = ok(rt, sid, "list_orders", limit=100)
    stamps = [o["placed_at"] for o in everything["orders"]]
    assert stamps == sorted(stamps, reverse=True) and everything["total"] == len(rt.state(sid).orders)
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "list_orders", limit=7, offset=offset)
        seen += [o["id"] for o in page["orders"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == everything["total"]
    sells = ok(rt, sid, "list_orders", status="filled", side="sell", limit=100)["orders"]
    assert all(o["side"] == "sell" and o["realized_pnl"] is not None for o in sells)


def test_cash_balance_adds_up(rt, sid):
    data = ok(rt, sid, "get_cash_balance")
    positions = ok(rt, sid, "list_positions")
    for row in data["balances"]:
        assert row["buying_power"] == round(row["cash"] - row["reserved_for_orders"], 2)
        assert row["positions_value"] == positions["market_value_by_currency"][row["currency"]]
        assert row["equity"] == round(row["cash"] + row["positions_value"], 2)
    assert data["account"]["account_number"].startswith("TR-")
