"""The trading server's own rules: exchange hours on the session clock, quotes, watchlists, market
and limit orders, positions and cash, with typed failures. What every server guarantees is the
conformance kit's (tests/servers/test_conformance.py). Tests that need another time of day move
the session clock forward.
"""

from __future__ import annotations

import datetime as dt

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import trading
from prove_servers.trading import EXCHANGES, TradingOptions, server

TOOLS = server.tools
UTC = dt.UTC
h = ServerHarness.fixture(server)


def move_clock_to(h, when: dt.datetime) -> None:
    state = h.state
    state.advance_clock(int((when - state.now()).total_seconds()))


def cash(h, currency: str) -> dict:
    return next(b for b in h.ok("get_cash_balance")["balances"] if b["currency"] == currency)


def quote(h, symbol: str) -> dict:
    return h.ok("get_quote", symbol=symbol)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "search_symbols", "get_quote", "list_watchlists", "create_watchlist", "add_to_watchlist",
        "remove_from_watchlist", "place_market_order", "place_limit_order", "cancel_order", "get_order",
        "list_orders", "list_positions", "get_cash_balance",
    }
    assert servers_registered_by(trading) == [server] and (server.name, server.domain) == ("trading", "finance")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"search_symbols", "get_quote", "list_watchlists", "get_order", "list_orders",
                         "list_positions", "get_cash_balance"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"remove_from_watchlist", "cancel_order"}
    for placing in ("place_market_order", "place_limit_order"):  # a repeat trades again
        assert not TOOLS[placing].spec.annotations.idempotent
        assert TOOLS[placing].spec.produces == ("order",)
    assert TOOLS["place_limit_order"].spec.entity_params() == {"symbol": "security"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_quantity_and_symbol_bounds_are_in_the_schema(h):
    for args in ({"quantity": 0}, {"quantity": 10_001}, {"quantity": 1.5}, {"symbol": "TOO-LONG"}, {"side": "short"}):
        call = {"symbol": "VOD.L", "side": "buy", "quantity": 1, **args}
        h.fails("place_market_order", "SCHEMA_VIOLATION", "INVALID_ARGUMENT", **call)


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


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=TradingOptions(past_orders=300))
    assert len(big.state.orders) > 9 * len(h.state.orders)
    big.run_examples()
    with pytest.raises(ValueError):
        TradingOptions(past_orders=0)


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


def test_at_the_default_clock_london_is_open_and_new_york_closed(h):
    us, uk = quote(h, "AAPL")["market"], quote(h, "vod.l")["market"]
    assert (us["is_open"], us["local_time"]) == (False, "2026-03-02T04:00")
    assert us["session_opens_at"] == "2026-03-02T14:30:00Z"
    assert (uk["is_open"], uk["local_time"]) == (True, "2026-03-02T09:00")
    error = h.fails("place_market_order", "MARKET_CLOSED", symbol="AAPL", side="buy", quantity=1)
    assert error["details"] == {"exchange": "NASDAQ", "opens_at": "2026-03-02T14:30:00Z"}
    h.ok("place_market_order", symbol="VOD.L", side="buy", quantity=100)


def test_a_limit_order_on_a_closed_market_is_queued_even_when_marketable(h):
    aapl = quote(h, "AAPL")
    before = cash(h, "USD")
    placed = h.ok("place_limit_order", symbol="AAPL", side="buy", quantity=10, limit_price=aapl["ask"])
    order = placed["order"]
    assert (order["status"], order["filled_quantity"], order["expires_at"]) == ("queued", 0, "2026-03-02T21:00:00Z")
    reserved = round(10 * aapl["ask"], 2)
    after = cash(h, "USD")
    assert after["cash"] == before["cash"] and after["reserved_for_orders"] == round(before["reserved_for_orders"]
                                                                                     + reserved, 2)
    assert placed["buying_power"] == after["buying_power"] == round(before["buying_power"] - reserved, 2)
    canceled = h.ok("cancel_order", order_id=order["id"])
    assert canceled["status"] == "canceled" and cash(h, "USD")["buying_power"] == before["buying_power"]


def test_market_orders_follow_the_clock(h):
    move_clock_to(h, dt.datetime(2026, 3, 2, 14, 30, tzinfo=UTC))  # 09:30 in New York
    aapl = quote(h, "AAPL")
    assert aapl["market"]["is_open"]
    filled = h.ok("place_market_order", symbol="AAPL", side="buy", quantity=2)["order"]
    assert (filled["status"], filled["filled_price"]) == ("filled", aapl["ask"])
    move_clock_to(h, dt.datetime(2026, 3, 2, 16, 30, tzinfo=UTC))  # 16:30 in London: closed
    error = h.fails("place_market_order", "MARKET_CLOSED", symbol="VOD.L", side="buy", quantity=1)
    assert error["details"]["opens_at"] == "2026-03-03T08:00:00Z"
    queued = h.ok("place_limit_order", symbol="VOD.L", side="buy", quantity=1,
                  limit_price=quote(h, "VOD.L")["ask"])["order"]
    assert queued["status"] == "queued" and queued["expires_at"] == "2026-03-03T16:30:00Z"  # the next session's day


# -- orders, cash and positions -------------------------------------------------------------------


def test_buy_and_sell_move_cash_and_positions(h):
    symbol = h.state.securities.first(lambda s: s["currency"] == "GBP"
                                            and h.state.positions.find(s["id"]) is None)["id"]
    q = quote(h, symbol)
    gbp = cash(h, "GBP")["cash"]
    buy = h.ok("place_market_order", symbol=symbol, side="buy", quantity=300)
    assert buy["cash"] == round(gbp - 300 * q["ask"], 2) and buy["order"]["notional"] == round(300 * q["ask"], 2)
    position = next(p for p in h.ok("list_positions", currency="GBP")["positions"] if p["symbol"] == symbol)
    assert (position["quantity"], position["average_cost"], position["available_to_sell"]) == (300, q["ask"], 300)
    assert position["unrealized_pnl"] == round(300 * q["last"] - position["cost_basis"], 2)
    sell = h.ok("place_market_order", symbol=symbol, side="sell", quantity=100)["order"]
    assert (sell["filled_price"], sell["realized_pnl"]) == (q["bid"], round(100 * (q["bid"] - q["ask"]), 2))
    assert h.state.positions.get(symbol)["quantity"] == 200
    h.ok("place_market_order", symbol=symbol, side="sell", quantity=200)
    assert symbol not in {p["symbol"] for p in h.ok("list_positions")["positions"]}  # closed out
    assert cash(h, "GBP")["cash"] == round(gbp - 300 * q["ask"] + 300 * q["bid"], 2)


def test_a_marketable_limit_order_on_an_open_market_fills_at_the_quote(h):
    q = quote(h, "BARC.L")
    high = h.ok("place_limit_order", symbol="BARC.L", side="buy", quantity=10, limit_price=round(q["ask"] + 0.05,
                                                                                                 2))
    assert (high["order"]["status"], high["order"]["filled_price"]) == ("filled", q["ask"])  # price improvement
    low = h.ok("place_limit_order", symbol="BARC.L", side="buy", quantity=10, limit_price=round(q["bid"] - 0.05,
                                                                                                2))
    assert (low["order"]["status"], low["order"]["filled_price"]) == ("open", None)


def test_buying_power_counts_open_buy_orders(h):
    usd = cash(h, "USD")
    spy = quote(h, "SPY")
    too_many = int(usd["buying_power"] // spy["ask"]) + 1
    error = h.fails("place_limit_order", "INSUFFICIENT_BUYING_POWER", symbol="SPY", side="buy",
                    quantity=too_many, limit_price=spy["ask"])
    assert error["details"]["buying_power"] == usd["buying_power"] and usd["reserved_for_orders"] > 0
    h.ok("place_limit_order", symbol="SPY", side="buy", quantity=too_many - 1, limit_price=spy["ask"])
    gbp_power = cash(h, "GBP")["buying_power"]
    azn = quote(h, "AZN.L")
    h.fails("place_market_order", "INSUFFICIENT_BUYING_POWER", symbol="AZN.L", side="buy",
            quantity=int(gbp_power // azn["ask"]) + 1)  # pounds are not dollars: no currency conversion


def test_no_short_selling_and_offered_shares_are_not_free(h):
    state = h.state
    offer = state.orders.first(status="open", side="sell")
    held = state.positions.get(offer["symbol"])["quantity"]
    free = held - offer["quantity"]
    error = h.fails("place_market_order", "INSUFFICIENT_SHARES", symbol=offer["symbol"], side="sell",
                    quantity=free + 1)
    assert (error["details"]["held"], error["details"]["available"]) == (held, free)
    h.ok("cancel_order", order_id=offer["id"])
    h.ok("place_market_order", symbol=offer["symbol"], side="sell", quantity=free + 1)
    never_held = state.securities.first(lambda s: s["currency"] == "GBP" and state.positions.find(s["id"]) is None)
    h.fails("place_market_order", "INSUFFICIENT_SHARES", symbol=never_held["id"], side="sell", quantity=1)
    h.fails("place_limit_order", "INSUFFICIENT_SHARES", symbol=never_held["id"], side="sell", quantity=1,
            limit_price=never_held["ask"])


def test_limit_prices_need_the_tick_and_a_sane_band(h):
    aapl = quote(h, "AAPL")
    error = h.fails("place_limit_order", "INVALID_TICK_SIZE", "INVALID_ARGUMENT", symbol="AAPL", side="buy", quantity=1,
                    limit_price=200.005)
    assert error["details"]["tick_size"] == 0.01
    h.ok("place_limit_order", symbol="VOD.L", side="buy", quantity=10, limit_price=0.6012)  # sub-pound tick
    h.fails("place_limit_order", "INVALID_TICK_SIZE", symbol="VOD.L", side="buy", quantity=10,
            limit_price=0.60125)
    error = h.fails("place_limit_order", "LIMIT_PRICE_OUT_OF_BAND", symbol="AAPL", side="buy", quantity=1,
                    limit_price=round(aapl["ask"] * 1.2, 2))
    assert error["details"]["max_limit"] == round(aapl["ask"] * 1.1, 2)
    held = h.state.positions.first(currency="USD")
    h.fails("place_limit_order", "LIMIT_PRICE_OUT_OF_BAND", symbol=held["symbol"], side="sell", quantity=1,
            limit_price=round(quote(h, held["symbol"])["bid"] * 0.5, 2))


def test_only_working_orders_can_be_canceled(h):
    state = h.state
    for status in ("filled", "canceled", "expired"):
        order = state.orders.first(status=status)
        if order is not None:
            error = h.fails("cancel_order", "ORDER_NOT_CANCELLABLE", order_id=order["id"])
            assert error["details"]["status"] == status
    h.fails("cancel_order", "ORDER_NOT_FOUND", order_id="ord_missing")
    h.fails("get_order", "ORDER_NOT_FOUND", order_id="ord_missing")


def test_unknown_symbols_are_typed(h):
    for tool, args in (("get_quote", {}), ("place_market_order", {"side": "buy", "quantity": 1}),
                       ("place_limit_order", {"side": "buy", "quantity": 1, "limit_price": 10.0})):
        h.fails(tool, "UNKNOWN_SYMBOL", "NOT_FOUND", symbol="ZZZZ", **args)
    watchlist = h.state.watchlists.first()["id"]
    h.fails("add_to_watchlist", "UNKNOWN_SYMBOL", watchlist_id=watchlist, symbol="ZZZZ.L")
    h.fails("create_watchlist", "UNKNOWN_SYMBOL", name="Mixed", symbols=["AAPL", "ZZZZ"])
    assert h.ok("list_orders", symbol="ZZZZ")["total"] == 0


# -- watchlists -----------------------------------------------------------------------------------


def test_watchlist_lifecycle_and_its_failures(h):
    made = h.ok("create_watchlist", name="Chips", symbols=["nvda", "AAPL", "NVDA"])
    assert made["symbols"] == ["NVDA", "AAPL"] and [i["symbol"] for i in made["items"]] == ["NVDA", "AAPL"]
    error = h.fails("create_watchlist", "WATCHLIST_EXISTS", "CONFLICT", name="  chips ")
    assert error["details"]["watchlist_id"] == made["id"]
    added = h.ok("add_to_watchlist", watchlist_id=made["id"], symbol="msft")
    assert added["symbols"] == ["NVDA", "AAPL", "MSFT"]
    h.fails("add_to_watchlist", "ALREADY_IN_WATCHLIST", watchlist_id=made["id"], symbol="msft")
    assert h.ok("remove_from_watchlist", watchlist_id=made["id"], symbol="aapl")["symbols"] == ["NVDA", "MSFT"]
    h.fails("remove_from_watchlist", "NOT_IN_WATCHLIST", watchlist_id=made["id"], symbol="AAPL")
    h.fails("add_to_watchlist", "WATCHLIST_NOT_FOUND", watchlist_id="wl_missing", symbol="AAPL")
    names = [w["name"] for w in h.ok("list_watchlists")["watchlists"]]
    for n in range(trading.MAX_WATCHLISTS - len(names)):
        h.ok("create_watchlist", name=f"List {n}")
    h.fails("create_watchlist", "WATCHLIST_LIMIT_REACHED", "RESOURCE_EXHAUSTED", name="One too many")


# -- discovery and history ------------------------------------------------------------------------


def test_ids_flow_from_search_to_order_to_history(h):
    found = h.ok("search_symbols", query="astrazeneca")["results"]
    assert [r["symbol"] for r in found] == ["AZN.L"]
    assert {r["symbol"] for r in h.ok("search_symbols", query="energy", exchange="LSE")["results"]} == {
        "BP.L", "SHEL.L"}
    q = quote(h, found[0]["symbol"])
    placed = h.ok("place_limit_order", symbol=q["symbol"], side="buy", quantity=3,
                  limit_price=round(q["bid"] * 0.97, 2), time_in_force="gtc")["order"]
    assert placed["status"] == "open"
    newest = h.ok("list_orders", limit=1)["orders"][0]
    assert newest["id"] == placed["id"]
    assert h.ok("list_orders", symbol="azn.l", status="open")["orders"] == [placed]
    h.ok("cancel_order", order_id=placed["id"])
    h.fails("cancel_order", "ORDER_NOT_CANCELLABLE", order_id=placed["id"])
    assert h.ok("get_order", order_id=placed["id"])["status"] == "canceled"


def test_order_history_pages_newest_first(h):
    everything = h.ok("list_orders", limit=100)
    stamps = [o["placed_at"] for o in everything["orders"]]
    assert stamps == sorted(stamps, reverse=True) and everything["total"] == len(h.state.orders)
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("list_orders", limit=7, offset=offset)
        seen += [o["id"] for o in page["orders"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == everything["total"]
    sells = h.ok("list_orders", status="filled", side="sell", limit=100)["orders"]
    assert all(o["side"] == "sell" and o["realized_pnl"] is not None for o in sells)


def test_cash_balance_adds_up(h):
    data = h.ok("get_cash_balance")
    positions = h.ok("list_positions")
    for row in data["balances"]:
        assert row["buying_power"] == round(row["cash"] - row["reserved_for_orders"], 2)
        assert row["positions_value"] == positions["market_value_by_currency"][row["currency"]]
        assert row["equity"] == round(row["cash"] + row["positions_value"], 2)
    assert data["account"]["account_number"].startswith("TR-")
