"""Trading: one investor's brokerage account with US and London listings — quotes, watchlists,
market and limit orders, positions, cash and order history.

Market hours follow the session clock (``state.now()``). US stocks trade on NASDAQ and NYSE,
09:30-16:00 New York time; London stocks (symbols ending ``.L``) on the LSE, 08:00-16:30 London
time; both Monday to Friday except exchange holidays. The default clock, Monday 09:00 UTC, is
04:00 in New York (closed) and 09:00 in London (open), so a fresh session can trade London
stocks at once while a market order for a US stock fails with MARKET_CLOSED; a limit order is
accepted at any hour and, while its exchange is closed, queued for the next open.

Quotes are seeded per symbol and stay put within a session, so fills are deterministic: a market
order fills at the ask (buy) or the bid (sell); a limit order fills on placement when its
exchange is open and the quote crosses its limit (buy limit >= ask, sell limit <= bid), at the
quote, else it rests as an open order until canceled. Cash is held per currency (USD, GBP) and
each listing trades in its own: buying power is the cash less what open buy orders reserve, and
shares can be sold only if held and not already offered by open sell orders (no short selling).
No commissions are charged.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    Conflict,
    InvalidArgument,
    NotFound,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    lookup,
    money,
    paginate,
    ref,
    require,
)

Side = Literal["buy", "sell"]
TimeInForce = Literal["day", "gtc"]
OrderStatus = Literal["open", "queued", "filled", "canceled", "expired"]
ExchangeCode = Literal["NASDAQ", "NYSE", "LSE"]
WORKING = ("open", "queued")  # statuses of orders that may still fill, and so reserve cash or shares

MAX_QUANTITY = 10_000
MAX_WATCHLISTS = 10
LIMIT_BAND = 0.10  # a buy limit may be at most 10% above the ask, a sell limit at most 10% below the bid
HISTORY_DAYS = 60
GTC_DAYS = 90


@attrs.frozen
class Exchange:
    """A venue's trading hours in local time and its clock rules. The daylight-saving rules are
    written out rather than read from the host's time-zone database, so the hours an old corpus
    was generated under cannot change with a tzdata update."""

    code: str
    timezone: str
    currency: str
    opens: dt.time
    closes: dt.time
    standard_offset: int  # hours from UTC outside daylight saving time
    holidays: frozenset[str]

    def summer_time(self, year: int) -> tuple[dt.datetime, dt.datetime]:
        """When daylight saving time starts and ends, in UTC."""
        if self.timezone == "America/New_York":  # second Sunday of March 2:00 to first Sunday of November 2:00
            start = _nth_sunday(year, 3, 2).replace(hour=2 - self.standard_offset)
            end = _nth_sunday(year, 11, 1).replace(hour=1 - self.standard_offset)
        else:  # Europe/London: last Sunday of March to last Sunday of October, 01:00 UTC
            start, end = _last_sunday(year, 3).replace(hour=1), _last_sunday(year, 10).replace(hour=1)
        return start, end

    def offset(self, when: dt.datetime) -> dt.timedelta:
        start, end = self.summer_time(when.year)
        return dt.timedelta(hours=self.standard_offset + (start <= when < end))

    def local(self, when: dt.datetime) -> dt.datetime:
        """Wall-clock time at the exchange (naive) for an aware UTC time."""
        return (when + self.offset(when)).replace(tzinfo=None)

    def to_utc(self, local: dt.datetime) -> dt.datetime:
        wall = local.replace(tzinfo=dt.UTC)
        return wall - self.offset(wall - dt.timedelta(hours=self.standard_offset))

    def trading_day(self, day: dt.date) -> bool:
        return day.weekday() < 5 and day.isoformat() not in self.holidays

    def is_open(self, when: dt.datetime) -> bool:
        local = self.local(when)
        return self.trading_day(local.date()) and self.opens <= local.time() < self.closes

    def session_bounds(self, day: dt.date) -> tuple[dt.datetime, dt.datetime]:
        """Open and close of a trading day, in UTC."""
        return self.to_utc(dt.datetime.combine(day, self.opens)), self.to_utc(dt.datetime.combine(day, self.closes))

    def next_session(self, when: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        """The session in progress at ``when``, or else the next one to open."""
        day = self.local(when).date()
        while True:
            if self.trading_day(day):
                opens, closes = self.session_bounds(day)
                if when < closes:
                    return opens, closes
            day += dt.timedelta(days=1)


def _nth_sunday(year: int, month: int, n: int) -> dt.datetime:
    first = dt.date(year, month, 1)
    day = first + dt.timedelta(days=(6 - first.weekday()) % 7 + 7 * (n - 1))
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _last_sunday(year: int, month: int) -> dt.datetime:
    last = (dt.date(year + month // 12, month % 12 + 1, 1)) - dt.timedelta(days=1)
    day = last - dt.timedelta(days=(last.weekday() + 1) % 7)
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


_US_HOLIDAYS = frozenset({"2025-12-25", "2026-01-01", "2026-01-19", "2026-02-16", "2026-04-03", "2026-05-25",
                          "2026-06-19", "2026-07-03", "2026-09-07", "2026-11-26", "2026-12-25"})
_US = dict(timezone="America/New_York", currency="USD", opens=dt.time(9, 30), closes=dt.time(16, 0),
           standard_offset=-5, holidays=_US_HOLIDAYS)
EXCHANGES = {
    "NASDAQ": Exchange("NASDAQ", **_US),
    "NYSE": Exchange("NYSE", **_US),
    "LSE": Exchange("LSE", timezone="Europe/London", currency="GBP", opens=dt.time(8, 0), closes=dt.time(16, 30),
                    standard_offset=0,
                    holidays=frozenset({"2025-12-25", "2025-12-26", "2026-01-01", "2026-04-03", "2026-04-06",
                                        "2026-05-04", "2026-05-25", "2026-08-31", "2026-12-25", "2026-12-28"})),
}

# symbol, company, exchange, sector, reference price in the listing's currency
SECURITIES = (
    ("AAPL", "Apple Inc.", "NASDAQ", "Technology", 232.0),
    ("MSFT", "Microsoft Corporation", "NASDAQ", "Technology", 412.0),
    ("NVDA", "NVIDIA Corporation", "NASDAQ", "Technology", 131.0),
    ("AMZN", "Amazon.com, Inc.", "NASDAQ", "Consumer Discretionary", 206.0),
    ("GOOGL", "Alphabet Inc. Class A", "NASDAQ", "Communication Services", 176.0),
    ("META", "Meta Platforms, Inc.", "NASDAQ", "Communication Services", 598.0),
    ("TSLA", "Tesla, Inc.", "NASDAQ", "Consumer Discretionary", 281.0),
    ("JPM", "JPMorgan Chase & Co.", "NYSE", "Financials", 246.0),
    ("V", "Visa Inc.", "NYSE", "Financials", 341.0),
    ("KO", "The Coca-Cola Company", "NYSE", "Consumer Staples", 70.5),
    ("PFE", "Pfizer Inc.", "NYSE", "Health Care", 26.1),
    ("F", "Ford Motor Company", "NYSE", "Consumer Discretionary", 9.8),
    ("DIS", "The Walt Disney Company", "NYSE", "Communication Services", 110.0),
    ("XOM", "Exxon Mobil Corporation", "NYSE", "Energy", 112.0),
    ("SPY", "SPDR S&P 500 ETF Trust", "NYSE", "ETF", 591.0),
    ("VOD.L", "Vodafone Group Plc", "LSE", "Communication Services", 0.70),
    ("LLOY.L", "Lloyds Banking Group plc", "LSE", "Financials", 0.55),
    ("BARC.L", "Barclays PLC", "LSE", "Financials", 2.90),
    ("HSBA.L", "HSBC Holdings plc", "LSE", "Financials", 9.10),
    ("BP.L", "BP p.l.c.", "LSE", "Energy", 4.30),
    ("SHEL.L", "Shell plc", "LSE", "Energy", 26.50),
    ("AZN.L", "AstraZeneca PLC", "LSE", "Health Care", 115.0),
    ("ULVR.L", "Unilever PLC", "LSE", "Consumer Staples", 46.0),
    ("GSK.L", "GSK plc", "LSE", "Health Care", 14.50),
    ("RR.L", "Rolls-Royce Holdings plc", "LSE", "Industrials", 7.80),
    ("TSCO.L", "Tesco PLC", "LSE", "Consumer Staples", 3.80),
)


class TradingState(State):
    """One investor's account; the account holder and number are the var ``account``."""

    securities = Table("security", prefix="sec")  # keyed by symbol, with the seeded quote
    cash = Table("cash_balance", prefix="csh")  # keyed by currency
    positions = Table("position", prefix="pos")  # keyed by symbol
    orders = Table("order", prefix="ord", index=("status", "symbol"))
    watchlists = Table("watchlist", prefix="wl")


@attrs.frozen(kw_only=True)
class TradingOptions:
    """Seed size: how many orders the account placed over the last 60 days (they make the positions)."""

    past_orders: int = attrs.field(default=30, validator=attrs.validators.gt(0))


# -- shared rules ---------------------------------------------------------------------------------


def _tick(price: float) -> float:
    return 0.01 if price >= 1 else 0.0001


def _to_tick(price: float) -> float:
    tick = _tick(price)
    return round(round(price / tick) * tick, 4)


def _security(state: TradingState, symbol: str) -> Record:
    return lookup(state.securities, symbol.upper(),
                  message=f"no listing {symbol!r}; find symbols with search_symbols (London listings end in .L)",
                  reason="UNKNOWN_SYMBOL", symbol=symbol)


def _exchange(security: Record) -> Exchange:
    return EXCHANGES[security["exchange"]]


def _market(state: TradingState, security: Record) -> Record:
    exchange, now = _exchange(security), state.now()
    opens, closes = exchange.next_session(now)
    return {"exchange": exchange.code, "timezone": exchange.timezone, "is_open": exchange.is_open(now),
            "local_time": exchange.local(now).strftime("%Y-%m-%dT%H:%M"), "session_opens_at": iso_datetime(opens),
            "session_closes_at": iso_datetime(closes)}


def _reserved_cash(state: TradingState, currency: str) -> float:
    working = [o for status in WORKING for o in state.orders.where(status=status, side="buy", currency=currency)]
    return money(sum(o["quantity"] * o["limit_price"] for o in working))


def _offered_shares(state: TradingState, symbol: str) -> int:
    return sum(o["quantity"] for status in WORKING for o in state.orders.where(status=status, symbol=symbol,
                                                                                side="sell"))


def _buying_power(state: TradingState, currency: str) -> float:
    return money(state.cash.get(currency)["cash"] - _reserved_cash(state, currency))


def _require_can_trade(state: TradingState, security: Record, side: str, quantity: int, price: float) -> None:
    """Enough buying power for a buy at ``price``, or enough free shares for a sell."""
    symbol, currency = security["id"], security["currency"]
    if side == "buy":
        power, cost = _buying_power(state, currency), money(quantity * price)
        require(cost <= power, f"buying {quantity} {symbol} at {price} {currency} needs {cost:,.2f} {currency}; "
                f"buying power is {power:,.2f} {currency} (cash less open buy orders)",
                reason="INSUFFICIENT_BUYING_POWER", buying_power=power, required=cost, currency=currency)
        return
    position = state.positions.find(symbol)
    held = position["quantity"] if position else 0
    free = held - _offered_shares(state, symbol)
    require(quantity <= free, f"you hold {held} {symbol}" + (f", {held - free} already offered by open sell orders"
            if free < held else "") + f"; cannot sell {quantity} (no short selling)",
            reason="INSUFFICIENT_SHARES", held=held, available=free)


def _new_order(state: TradingState, security: Record, side: str, order_type: str, quantity: int,
               limit_price: float | None, time_in_force: str, status: str, when: dt.datetime) -> Record:
    expires_at = None
    if status in WORKING:
        _, closes = _exchange(security).next_session(when)
        expires_at = iso_datetime(closes if time_in_force == "day" else when + dt.timedelta(days=GTC_DAYS))
    return state.orders.insert({
        "symbol": security["id"], "exchange": security["exchange"], "currency": security["currency"], "side": side,
        "type": order_type, "quantity": quantity, "limit_price": limit_price, "time_in_force": time_in_force,
        "status": status, "filled_quantity": 0, "filled_price": None, "notional": None, "realized_pnl": None,
        "placed_at": iso_datetime(when), "filled_at": None, "canceled_at": None, "expires_at": expires_at,
    })


def _fill(state: TradingState, order: Record, price: float, when: dt.datetime) -> Record:
    """Execute the whole order at ``price``: move cash, update the position, record the fill."""
    symbol, quantity, currency = order["symbol"], order["quantity"], order["currency"]
    notional = money(quantity * price)
    position = state.positions.find(symbol)
    realized = None
    if order["side"] == "buy":
        held, cost = (position["quantity"], position["cost_basis"]) if position else (0, 0.0)
        fields = {"quantity": held + quantity, "cost_basis": money(cost + notional),
                  "average_cost": round((cost + notional) / (held + quantity), 4)}
        if position:
            state.positions.update(symbol, **fields)
        else:
            state.positions.insert({"id": symbol, "symbol": symbol, "currency": currency, **fields,
                                    "opened_at": iso_datetime(when)})
        state.cash.update(currency, cash=money(state.cash.get(currency)["cash"] - notional))
    else:
        assert position is not None  # checked by _require_can_trade
        realized = money((price - position["average_cost"]) * quantity)
        left = position["quantity"] - quantity
        if left:
            state.positions.update(symbol, quantity=left, cost_basis=money(position["average_cost"] * left))
        else:
            state.positions.delete(symbol)
        state.cash.update(currency, cash=money(state.cash.get(currency)["cash"] + notional))
    return state.orders.update(order["id"], status="filled", filled_quantity=quantity, filled_price=price,
                               notional=notional, realized_pnl=realized, filled_at=iso_datetime(when), expires_at=None)


# -- views ----------------------------------------------------------------------------------------


def _quote(state: TradingState, security: Record) -> Record:
    change = round(security["last"] - security["prev_close"], 4)
    return {
        "symbol": security["id"], "name": security["name"], "currency": security["currency"],
        "last": security["last"], "bid": security["bid"], "ask": security["ask"], "prev_close": security["prev_close"],
        "change": change, "change_pct": round(100 * change / security["prev_close"], 2),
        "day_open": security["day_open"], "day_high": security["day_high"], "day_low": security["day_low"],
        "volume": security["volume"], "as_of": security["as_of"], "tick_size": _tick(security["last"]),
        "market": _market(state, security),
    }


def _position_view(state: TradingState, position: Record) -> Record:
    security = state.securities.get(position["symbol"])
    value = money(position["quantity"] * security["last"])
    pnl = money(value - position["cost_basis"])
    offered = _offered_shares(state, position["symbol"])
    return {**position, "name": security["name"], "exchange": security["exchange"], "last": security["last"],
            "market_value": value, "unrealized_pnl": pnl,
            "unrealized_pnl_pct": round(100 * pnl / position["cost_basis"], 2) if position["cost_basis"] else 0.0,
            "available_to_sell": position["quantity"] - offered}


def _watchlist_view(state: TradingState, watchlist: Record) -> Record:
    items = []
    for symbol in watchlist["symbols"]:
        quote = _quote(state, state.securities.get(symbol))
        items.append({k: quote[k] for k in ("symbol", "name", "currency", "last", "change_pct")}
                     | {"market_open": quote["market"]["is_open"]})
    return {**watchlist, "items": items}


# -- seed -----------------------------------------------------------------------------------------


def build_trading(rng: random.Random, options: TradingOptions) -> TradingState:
    """Listings with seeded quotes, an account funded in USD and GBP, 60 days of orders that built
    its positions, two resting limit orders and two watchlists."""
    state = TradingState(salt=f"{rng.getrandbits(64):016x}")
    holder = fake.full_name(rng)
    state.set_var("account", {"holder": holder, "account_number": f"TR-{fake.digits(rng, 8)}", "type": "individual",
                              "opened_on": (state.today() - dt.timedelta(days=rng.randint(200, 1500))).isoformat()})
    for symbol, name, exchange, sector, reference in SECURITIES:
        _seed_security(state, rng, symbol, name, exchange, sector, reference)
    state.cash.insert({"id": "USD", "currency": "USD", "cash": float(rng.randint(40, 80) * 1_000)})
    state.cash.insert({"id": "GBP", "currency": "GBP", "cash": float(rng.randint(8, 16) * 1_000)})
    _seed_history(state, rng, options.past_orders)
    _seed_resting_orders(state, rng)
    state.watchlists.insert({"name": "My Watchlist", "symbols": rng.sample([s[0] for s in SECURITIES[:15]], 5),
                             "created_at": iso_datetime(state.now() - dt.timedelta(days=rng.randint(30, 300)))})
    state.watchlists.insert({"name": "UK Dividends", "symbols": ["SHEL.L", "HSBA.L", "ULVR.L"],
                             "created_at": iso_datetime(state.now() - dt.timedelta(days=rng.randint(5, 30)))})
    return state


def _seed_security(state: TradingState, rng: random.Random, symbol: str, name: str, exchange: str, sector: str,
                   reference: float) -> None:
    """Its quote: while the exchange is closed the last trade is the last close and the day range
    that session's; the spread is a few ticks."""
    venue = EXCHANGES[exchange]
    prev_close = _to_tick(reference * rng.uniform(0.92, 1.08))
    last = _to_tick(prev_close * (1 + rng.gauss(0, 0.012)))
    tick = _tick(last)
    spread_ticks = max(1, round(last * rng.uniform(0.0002, 0.0008) / tick))
    bid = _to_tick(last - tick * (spread_ticks // 2))
    day_open = _to_tick(prev_close * (1 + rng.gauss(0, 0.004)))
    now = state.now()
    if venue.is_open(now):
        as_of = now
    else:
        day = venue.local(now).date() - dt.timedelta(days=1)
        while not venue.trading_day(day):
            day -= dt.timedelta(days=1)
        as_of = venue.session_bounds(day)[1] - dt.timedelta(seconds=1)
    state.securities.insert({
        "id": symbol, "name": name, "exchange": exchange, "currency": venue.currency, "sector": sector,
        "last": last, "bid": bid, "ask": _to_tick(bid + tick * spread_ticks),
        "prev_close": prev_close, "day_open": day_open,
        "day_high": _to_tick(max(last, day_open) * (1 + abs(rng.gauss(0, 0.005)))),
        "day_low": _to_tick(min(last, day_open) * (1 - abs(rng.gauss(0, 0.005)))),
        "volume": rng.randint(200, 9_000) * 1_000, "as_of": iso_datetime(as_of),
    })


def _trading_moment(rng: random.Random, exchange: Exchange, today: dt.date) -> dt.datetime:
    while True:
        day = today - dt.timedelta(days=rng.randint(1, HISTORY_DAYS))
        if exchange.trading_day(day):
            opens, closes = exchange.session_bounds(day)
            return opens + dt.timedelta(seconds=rng.randint(300, int((closes - opens).total_seconds()) - 300))


def _seed_history(state: TradingState, rng: random.Random, count: int) -> None:
    """Orders in time order, booked through the fill code the tools use: the first ones open two
    US and two London positions, later ones buy more or sell part of what is held."""
    listings = state.securities.all()
    us = [s for s in listings if s["currency"] == "USD"]
    uk = [s for s in listings if s["currency"] == "GBP"]
    plan = [rng.choice(us), rng.choice(uk), rng.choice(us), rng.choice(uk)]
    plan += [rng.choice(listings) for _ in range(max(0, count - len(plan)))]
    timeline = sorted((_trading_moment(rng, _exchange(s), state.today()), n, s) for n, s in enumerate(plan))
    for when, n, security in timeline:
        price = _to_tick(security["prev_close"] * (1 + rng.gauss(-0.01, 0.05)))
        position = state.positions.find(security["id"])
        side = "sell" if n >= 4 and position and position["quantity"] >= 2 and rng.random() < 0.35 else "buy"
        if side == "sell":  # part of the holding: a position, once opened, stays
            quantity = rng.randint(1, position["quantity"] - 1)
        else:
            budget = state.cash.get(security["currency"])["cash"] * rng.uniform(0.04, 0.12)
            quantity = min(MAX_QUANTITY, int(budget / price))
            if quantity < 1:
                continue
        limit = _to_tick(price * (1.01 if side == "buy" else 0.99)) if rng.random() < 0.3 else None
        if limit is not None and n >= 4 and rng.random() < 0.3:  # a limit that never filled
            status = rng.choice(("canceled", "expired"))
            limit = _to_tick(price * (0.95 if side == "buy" else 1.05))
            order = _new_order(state, security, side, "limit", quantity, limit, "day", status, when)
            closes = _exchange(security).next_session(when)[1]
            state.orders.update(order["id"], canceled_at=iso_datetime(when + dt.timedelta(minutes=rng.randint(5, 90)))
                                if status == "canceled" else None, expires_at=iso_datetime(closes))
            continue
        order = _new_order(state, security, side, "market" if limit is None else "limit", quantity, limit, "day",
                           "filled", when)
        _fill(state, order, price, when)


def _seed_resting_orders(state: TradingState, rng: random.Random) -> None:
    """A good-till-canceled buy limit under a US stock's price and a sell limit over a London
    holding's, both placed in the last days and still working."""
    us = rng.choice([s for s in state.securities.all() if s["currency"] == "USD" and s["last"] > 20])
    held_uk = [state.securities.get(p["symbol"]) for p in state.positions.all() if p["currency"] == "GBP"]
    for security, side, factor in ((us, "buy", 0.9), (rng.choice(held_uk), "sell", 1.1)):
        when = _trading_moment(rng, _exchange(security), state.today())
        quantity = 5 if side == "buy" else max(1, state.positions.get(security["id"])["quantity"] // 3)
        _new_order(state, security, side, "limit", quantity, _to_tick(security["last"] * factor), "gtc", "open", when)


# -- examples: arguments valid on a fresh seed of any size ------------------------------------------


def _listing(s: TradingState, open_market: bool, **match: Any) -> Record:
    return s.securities.first(lambda sec: _exchange(sec).is_open(s.now()) == open_market, **match)


def _sellable(s: TradingState) -> Record:
    """A position on an open exchange with shares not offered by open sell orders."""
    return next(p for p in s.positions.all()
                if _exchange(s.securities.get(p["symbol"])).is_open(s.now())
                and p["quantity"] > _offered_shares(s, p["symbol"]))


def _below_market_buy(s: TradingState) -> Record:
    security = _listing(s, False)
    return {"symbol": security["id"], "side": "buy", "quantity": 2, "limit_price": _said_price(security["bid"] * 0.95)}


# -- how investors ask, and what they choose --------------------------------------------------------

SEARCHES = ("bank", "energy", "technology", "health care", "consumer", "financials", "apple", "shell", "tesco",
            "motor", "disney", "pharma", "oil", "holdings")
WATCHLIST_NAMES = ("Chips", "Energy", "Dividend payers", "Big Tech", "UK Banks", "Long term", "Speculative",
                   "Healthcare", "Retail", "To research", "FTSE favourites", "Earnings this week")
QUANTITIES = (1, 2, 3, 5, 10, 15, 20, 25)
# How far from the quote an investor sets a limit, in percent: a buy at or a little under the ask,
# a sell at or a little over the bid (the server refuses more than 10% on the wrong side).
BUY_LIMIT_OFFSETS = (-8, -5, -4, -3, -2, -1, 0, 1)
TIME_IN_FORCE_ASKS = {
    "gtc": ("put in a good-till-canceled limit order to {side} {quantity} shares of {symbol} at {limit_price}",
            "{side} {quantity} {symbol} with a limit of {limit_price}, good till canceled",
            "place a GTC limit to {side} {quantity} shares of {symbol} at {limit_price}"),
    "day": ("place a day limit order to {side} {quantity} shares of {symbol} at {limit_price}",
            "{side} {quantity} {symbol} at {limit_price} or better, just for today",
            "put in a limit order for today: {side} {quantity} shares of {symbol}, limit {limit_price}"),
    None: ("place a limit order to {side} {quantity} shares of {symbol} at {limit_price}",
           "{side} {quantity} {symbol} at {limit_price} or better",
           "put in a limit to {side} {quantity} shares of {symbol}, limit price {limit_price}",
           "set a limit order: {side} {quantity} of {symbol} at no worse than {limit_price}"),
}


def _said_price(price: float) -> float:
    """A price as an investor types it: whole units from 100 up, halves from 20, nickels from 1,
    cents below (always a multiple of the tick)."""
    step = 1.0 if price >= 100 else 0.5 if price >= 20 else 0.05 if price >= 1 else 0.01
    return _to_tick(round(price / step) * step)


def _chosen_security(rng: random.Random, s: TradingState, args: Record | None) -> Record:
    """The security the call names, else one the investor could name."""
    symbol = (args or {}).get("symbol")
    found = s.securities.find(symbol.upper()) if isinstance(symbol, str) else None
    return found or rng.choice(s.securities.all())


def _limit_price(rng: random.Random, s: TradingState, args: Record | None = None) -> float:
    """A limit near the live quote of the chosen symbol: a buy up to 8% under the ask (or 1% over,
    to fill now), a sell mirrored around the bid."""
    security = _chosen_security(rng, s, args)
    offset = rng.choice(BUY_LIMIT_OFFSETS)
    if (args or {}).get("side") == "sell":
        return _said_price(security["bid"] * (1 - offset / 100))
    return _said_price(security["ask"] * (1 + offset / 100))


def _quantity(rng: random.Random, s: TradingState, args: Record | None = None) -> int:
    """A round number of shares: for a sell, no more than the position holds; for a buy of a
    pricey share, a few."""
    args = args or {}
    symbol = args.get("symbol")
    held = s.positions.find(symbol.upper()) if isinstance(symbol, str) else None
    if args.get("side") == "sell" and held:
        return rng.choice([q for q in QUANTITIES if q <= held["quantity"]] or [held["quantity"]])
    security = s.securities.find(symbol.upper()) if isinstance(symbol, str) else None
    if security is not None and security["ask"] >= 300:
        return rng.choice((1, 2, 3, 5))
    return rng.choice(QUANTITIES)


# -- server and tools -----------------------------------------------------------------------------

server = Server(
    "trading",
    domain="finance",
    description="A brokerage account trading US (NASDAQ, NYSE) and London (LSE) stocks: quotes, watchlists, market "
    "and limit orders under exchange hours, positions, cash and buying power per currency, order history.",
    state=TradingState,
    seed=build_trading,
    options=TradingOptions,
)

Symbol = Annotated[str, ref("security", "Ticker symbol, e.g. 'AAPL' or 'VOD.L' (London listings end in .L).",
                            pattern=r"^[A-Za-z]{1,5}(\.[A-Za-z])?$")]
Quantity = Annotated[int, Field(ge=1, le=MAX_QUANTITY, description=f"Number of shares, 1 to {MAX_QUANTITY:,}.")]
SideParam = Annotated[Side, Field(description="'buy' or 'sell' (only shares you hold can be sold).")]
WatchlistId = Annotated[str, ref("watchlist", "Id of the watchlist (wl_...), from list_watchlists.")]
OrderId = Annotated[str, ref("order", "Id of the order (ord_...), from a place_* tool or list_orders.")]


@server.tool(
    answers=("symbol", "last"),
    read_only=True,
    reads=["security"],
    examples=[{"query": "bank"}, {"query": "a", "exchange": "LSE"}],
    asks=("look up the ticker for {query}", "search for stocks matching {query}",
          "find listings on {exchange} that match {query}", "show me what symbols come up for {query}"),
    values={"query": lambda rng, s: rng.choice(SEARCHES)},
)
def search_symbols(
    state: TradingState,
    query: Annotated[str, Field(min_length=1, max_length=60, description=(
        "Part of a ticker symbol, company name or sector (case-insensitive)."))],
    exchange: Annotated[ExchangeCode | None, Field(description="Only listings on this exchange.")] = None,
) -> dict:
    """Find listings by ticker, company name or sector. Returns up to 20 matches (symbol, name,
    exchange, currency, sector, last price) and the total; an empty list when nothing matches."""
    needle = query.lower()

    def matches(s: Record) -> bool:
        words = f"{s['id']} {s['name']} {s['sector']}".lower()
        return (exchange is None or s["exchange"] == exchange) and needle in words

    found = [{k: s[k] for k in ("name", "exchange", "currency", "sector", "last")} | {"symbol": s["id"]}
             for s in state.securities.where(matches)]
    return paginate(found, limit=20, key="results")


@server.tool(
    answers=("last", "change", "change_pct"),
    read_only=True,
    reads=["security"],
    errors=["UNKNOWN_SYMBOL"],
    examples=[{"symbol": "AAPL"}, {"symbol": "vod.l"}],
    asks=("get me a quote on {symbol}", "tell me what {symbol} is trading at", "check the bid and ask for {symbol}",
          "show me today's price and range for {symbol}"),
)
def get_quote(state: TradingState, symbol: Symbol) -> dict:
    """The latest quote of a listing: last price, bid, ask, previous close, change, day range,
    volume, tick size, currency, and its exchange's status (is_open, local time, when the
    current or next session opens and closes, in UTC). Fails with UNKNOWN_SYMBOL."""
    return _quote(state, _security(state, symbol))


@server.tool(
    read_only=True,
    reads=["watchlist", "security"],
    examples=[{}],
    asks=("show my watchlists", "list the watchlists I've set up", "check how the stocks on my watchlists are doing",
          "pull up my watchlists with the latest prices"),
)
def list_watchlists(state: TradingState) -> dict:
    """The investor's watchlists (id, name, symbols), each symbol with its last price, change in
    percent and whether its market is open."""
    return {"watchlists": [_watchlist_view(state, w) for w in state.watchlists.all()]}


@server.tool(
    idempotent=True,  # the same name twice is refused with WATCHLIST_EXISTS
    reads=["security", "watchlist"],
    produces=["watchlist"],
    errors=["WATCHLIST_EXISTS", "WATCHLIST_LIMIT_REACHED", "UNKNOWN_SYMBOL"],
    examples=[{"name": "Chips", "symbols": ["NVDA", "AAPL"]}, {"name": "Energy"}],
    asks=("create a watchlist called {name}", "start a new watchlist named {name} with {symbols}",
          "make a {name} watchlist", "set up a watchlist {name} and put {symbols} on it"),
    values={"name": lambda rng, s: rng.choice(WATCHLIST_NAMES),
            "symbols": lambda rng, s: rng.sample([listing[0] for listing in SECURITIES], rng.randint(2, 4))},
)
def create_watchlist(
    state: TradingState,
    name: Annotated[str, Field(min_length=1, max_length=40, description="Name of the new watchlist.")],
    symbols: Annotated[list[Annotated[str, Field(pattern=r"^[A-Za-z]{1,5}(\.[A-Za-z])?$")]], Field(
        max_length=50, description="Ticker symbols to start it with; may be empty.")] = [],  # noqa: B006 - never mutated
) -> dict:
    """Create a watchlist, optionally with symbols (duplicates are dropped). Returns it with
    quotes. Fails with WATCHLIST_EXISTS (a watchlist of that name, ignoring case, exists; its
    id is in the details), WATCHLIST_LIMIT_REACHED (10 watchlists) or UNKNOWN_SYMBOL."""
    existing = state.watchlists.first(lambda w: w["name"].lower() == name.strip().lower())
    require(existing is None, f"a watchlist named {name!r} already exists", reason="WATCHLIST_EXISTS", error=Conflict,
            watchlist_id=existing and existing["id"])
    require(len(state.watchlists) < MAX_WATCHLISTS, f"at most {MAX_WATCHLISTS} watchlists; add to an existing one",
            reason="WATCHLIST_LIMIT_REACHED", error=ResourceExhausted)
    listed = list(dict.fromkeys(_security(state, s)["id"] for s in symbols))
    watchlist = state.watchlists.insert({"name": name.strip(), "symbols": listed,
                                         "created_at": iso_datetime(state.now())})
    return _watchlist_view(state, watchlist)


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_IN_WATCHLIST
    reads=["security"],
    mutates=["watchlist"],
    errors=["WATCHLIST_NOT_FOUND", "UNKNOWN_SYMBOL", "ALREADY_IN_WATCHLIST"],
    examples=[lambda s: {"watchlist_id": s.watchlists.first()["id"],
                         "symbol": s.securities.first(lambda x: x["id"] not in s.watchlists.first()["symbols"])["id"]}],
    asks=("add {symbol} to {watchlist_id}", "put {symbol} on {watchlist_id}", "start watching {symbol} in "
          "{watchlist_id}", "track {symbol} on {watchlist_id}"),
)
def add_to_watchlist(state: TradingState, watchlist_id: WatchlistId, symbol: Symbol) -> dict:
    """Add a symbol to the end of a watchlist. Returns the watchlist with quotes. Fails with
    ALREADY_IN_WATCHLIST, UNKNOWN_SYMBOL or WATCHLIST_NOT_FOUND."""
    watchlist = state.watchlists.get(watchlist_id)
    security = _security(state, symbol)
    require(security["id"] not in watchlist["symbols"], f"{security['id']} is already on {watchlist['name']}",
            reason="ALREADY_IN_WATCHLIST", error=Conflict)
    symbols = [*watchlist["symbols"], security["id"]]
    return _watchlist_view(state, state.watchlists.update(watchlist_id, symbols=symbols))


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with NOT_IN_WATCHLIST
    mutates=["watchlist"],
    errors=["WATCHLIST_NOT_FOUND", "NOT_IN_WATCHLIST"],
    examples=[lambda s: {"watchlist_id": s.watchlists.first()["id"], "symbol": s.watchlists.first()["symbols"][0]}],
    asks=("remove {symbol} from {watchlist_id}", "take {symbol} off {watchlist_id}",
          "stop watching {symbol} on {watchlist_id}", "drop {symbol} from {watchlist_id}"),
)
def remove_from_watchlist(state: TradingState, watchlist_id: WatchlistId, symbol: Symbol) -> dict:
    """Take a symbol off a watchlist. Returns the watchlist with quotes. Fails with
    NOT_IN_WATCHLIST or WATCHLIST_NOT_FOUND."""
    watchlist = state.watchlists.get(watchlist_id)
    symbol = symbol.upper()
    require(symbol in watchlist["symbols"],
            f"{symbol} is not on {watchlist['name']}; it has {', '.join(watchlist['symbols']) or 'nothing'}",
            reason="NOT_IN_WATCHLIST", error=NotFound, symbols=watchlist["symbols"])
    remaining = [s for s in watchlist["symbols"] if s != symbol]
    return _watchlist_view(state, state.watchlists.update(watchlist_id, symbols=remaining))


@server.tool(
    answers=("status", "filled_quantity", "filled_price"),
    reads=["security", "cash_balance", "position", "order"],
    produces=["order"],
    mutates=["cash_balance", "position"],
    errors=["UNKNOWN_SYMBOL", "MARKET_CLOSED", "INSUFFICIENT_BUYING_POWER", "INSUFFICIENT_SHARES"],
    examples=[lambda s: {"symbol": _listing(s, True)["id"], "side": "buy", "quantity": 3},
              lambda s: {"symbol": _sellable(s)["symbol"], "side": "sell", "quantity": 1}],
    asks=("{side} {quantity} shares of {symbol} at market", "place a market order to {side} {quantity} {symbol}",
          "{side} {quantity} {symbol} right now at the market price", "put in a market {side} for {quantity} shares "
          "of {symbol}"),
    values={"quantity": _quantity},
)
def place_market_order(state: TradingState, symbol: Symbol, side: SideParam, quantity: Quantity) -> dict:
    """Buy or sell at the market now: fills in full at the ask (buy) or bid (sell). Only while the
    symbol's exchange is open (NASDAQ/NYSE 09:30-16:00 New York time, LSE 08:00-16:30 London
    time, weekdays). Returns the filled order and the new cash of that currency. Fails with
    MARKET_CLOSED (details say when it opens; place a limit order to queue for the open),
    INSUFFICIENT_BUYING_POWER, INSUFFICIENT_SHARES (no short selling) or UNKNOWN_SYMBOL."""
    security = _security(state, symbol)
    market = _market(state, security)
    require(market["is_open"], f"{security['exchange']} is closed (local time {market['local_time']}); it opens "
            f"{market['session_opens_at']}. Use a limit order to queue for the open",
            reason="MARKET_CLOSED", exchange=security["exchange"], opens_at=market["session_opens_at"])
    price = security["ask"] if side == "buy" else security["bid"]
    _require_can_trade(state, security, side, quantity, price)
    order = _new_order(state, security, side, "market", quantity, None, "day", "open", state.now())
    filled = _fill(state, order, price, state.now())
    return {"order": filled, "cash": state.cash.get(security["currency"])["cash"]}


@server.tool(
    answers=("status", "limit_price"),
    reads=["security", "cash_balance", "position", "order"],
    produces=["order"],
    mutates=["cash_balance", "position"],
    errors=["UNKNOWN_SYMBOL", "INVALID_TICK_SIZE", "LIMIT_PRICE_OUT_OF_BAND", "INSUFFICIENT_BUYING_POWER",
            "INSUFFICIENT_SHARES"],
    examples=[_below_market_buy,
              lambda s: {"symbol": _listing(s, True)["id"], "side": "buy", "quantity": 10,
                         "limit_price": _listing(s, True)["ask"], "time_in_force": "gtc"}],
    asks=lambda a: TIME_IN_FORCE_ASKS[a.get("time_in_force")],
    values={"quantity": _quantity, "limit_price": _limit_price},
)
def place_limit_order(
    state: TradingState,
    symbol: Symbol,
    side: SideParam,
    quantity: Quantity,
    limit_price: Annotated[float, Field(gt=0, le=1_000_000, description=(
        "Highest price to pay (buy) or lowest to accept (sell), in the listing's currency; a multiple of the "
        "tick size (0.01, or 0.0001 under 1.00)."))],
    time_in_force: Annotated[TimeInForce, Field(description=(
        "'day': expires at the close of the current (or, while closed, the next) session; 'gtc': good till "
        "canceled, up to 90 days."))] = "day",
) -> dict:
    """Place a limit order. While the exchange is open and the quote crosses the limit (buy limit
    at or above the ask, sell limit at or below the bid) it fills at once at the quote;
    otherwise it stays working — status 'open', or 'queued' while the exchange is closed — and
    a buy reserves limit x quantity of buying power, a sell reserves the shares. Returns the
    order and the buying power left. Fails with INVALID_TICK_SIZE, LIMIT_PRICE_OUT_OF_BAND
    (a buy more than 10% above the ask or a sell more than 10% below the bid),
    INSUFFICIENT_BUYING_POWER, INSUFFICIENT_SHARES or UNKNOWN_SYMBOL."""
    security = _security(state, symbol)
    tick = _tick(limit_price)
    require(abs(limit_price / tick - round(limit_price / tick)) < 1e-6,
            f"{limit_price} is not a multiple of the tick size {tick}; try {_to_tick(limit_price)}",
            reason="INVALID_TICK_SIZE", error=InvalidArgument, tick_size=tick)
    limit_price = _to_tick(limit_price)
    if side == "buy":
        cap = _to_tick(security["ask"] * (1 + LIMIT_BAND))
        require(limit_price <= cap, f"a buy limit of {limit_price} is more than 10% above the ask "
                f"{security['ask']}; the highest accepted is {cap}", reason="LIMIT_PRICE_OUT_OF_BAND",
                error=InvalidArgument, ask=security["ask"], max_limit=cap)
    else:
        floor = _to_tick(security["bid"] * (1 - LIMIT_BAND))
        require(limit_price >= floor, f"a sell limit of {limit_price} is more than 10% below the bid "
                f"{security['bid']}; the lowest accepted is {floor}", reason="LIMIT_PRICE_OUT_OF_BAND",
                error=InvalidArgument, bid=security["bid"], min_limit=floor)
    _require_can_trade(state, security, side, quantity, limit_price)
    is_open = _exchange(security).is_open(state.now())
    order = _new_order(state, security, side, "limit", quantity, limit_price, time_in_force,
                       "open" if is_open else "queued", state.now())
    crosses = limit_price >= security["ask"] if side == "buy" else limit_price <= security["bid"]
    if is_open and crosses:
        order = _fill(state, order, security["ask"] if side == "buy" else security["bid"], state.now())
    return {"order": order, "buying_power": _buying_power(state, security["currency"])}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with ORDER_NOT_CANCELLABLE
    reads=["order"],
    mutates=["order"],
    errors=["ORDER_NOT_FOUND", "ORDER_NOT_CANCELLABLE"],
    examples=[lambda s: {"order_id": s.orders.first(status="open")["id"]}],
    asks=("cancel {order_id}", "pull {order_id}", "kill {order_id} before it fills", "withdraw {order_id}"),
)
def cancel_order(state: TradingState, order_id: OrderId) -> dict:
    """Cancel a working (open or queued) order; the cash or shares it reserved are freed. Returns
    the canceled order. Fails with ORDER_NOT_CANCELLABLE when it already filled, was canceled or
    expired, or ORDER_NOT_FOUND."""
    order = state.orders.get(order_id)
    require(order["status"] in WORKING, f"order {order_id} is {order['status']} and cannot be canceled",
            reason="ORDER_NOT_CANCELLABLE", status=order["status"])
    return state.orders.update(order_id, status="canceled", canceled_at=iso_datetime(state.now()), expires_at=None)


@server.tool(
    answers=("side", "quantity", "status", "filled_price"),
    read_only=True,
    reads=["order"],
    errors=["ORDER_NOT_FOUND"],
    examples=[lambda s: {"order_id": s.orders.first()["id"]}],
    asks=("show me {order_id}", "check the status of {order_id}", "check whether {order_id} filled",
          "find out what happened to {order_id}"),
)
def get_order(state: TradingState, order_id: OrderId) -> dict:
    """One order: symbol, side, type, quantity, limit price, time in force, status (open, queued,
    filled, canceled, expired), fill price and value, realized profit or loss of a sell, and
    when it was placed, filled, canceled or expires. Fails with ORDER_NOT_FOUND."""
    return state.orders.get(order_id)


@server.tool(
    answers=("side", "quantity", "status"),
    read_only=True,
    reads=["order"],
    examples=[{}, {"status": "filled", "side": "sell"}, {"symbol": "AAPL", "limit": 5}],
    asks=("show my order history", "list my {status} orders", "show my recent {side} orders",
          "list my orders for {symbol}", "show the last {limit} orders I placed", "list my {status} {side} orders"),
)
def list_orders(
    state: TradingState,
    status: Annotated[OrderStatus | None, Field(description="Only orders in this status.")] = None,
    symbol: Annotated[str | None, ref("security", "Only orders for this ticker symbol.",
                                      pattern=r"^[A-Za-z]{1,5}(\.[A-Za-z])?$")] = None,
    side: Annotated[Side | None, Field(description="Only buys or only sells.")] = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Page size.")] = 20,
    offset: Annotated[int, Field(ge=0, description="Orders to skip; pass next_offset from the previous page.")] = 0,
) -> dict:
    """Order history, newest first, filtered by status, symbol and side. Returns a page of
    orders, the total and next_offset. An unknown symbol simply matches nothing."""
    filters = {k: v for k, v in (("status", status), ("symbol", symbol and symbol.upper()), ("side", side)) if v}
    orders = state.orders.where(**filters)
    orders.sort(key=lambda o: o["placed_at"], reverse=True)
    return paginate(orders, limit=limit, offset=offset, key="orders")


@server.tool(
    answers=("quantity", "market_value", "unrealized_pnl"),
    read_only=True,
    reads=["position", "security", "order"],
    examples=[{}, {"currency": "GBP"}],
    asks=("show my positions", "show me which stocks I hold", "list my {currency} holdings",
          "check how my holdings are doing", "show my portfolio with profit and loss"),
)
def list_positions(
    state: TradingState,
    currency: Annotated[Literal["USD", "GBP"] | None, Field(description="Only positions in this currency.")] = None,
) -> dict:
    """The investor's holdings: symbol, quantity, average cost, cost basis, last price, market
    value, unrealized profit or loss, and shares available to sell (not offered by open sell
    orders), with the total market value per currency."""
    positions = [_position_view(state, p) for p in state.positions.all() if currency in (None, p["currency"])]
    totals: dict[str, float] = {}
    for p in positions:
        totals[p["currency"]] = money(totals.get(p["currency"], 0.0) + p["market_value"])
    return {"positions": positions, "market_value_by_currency": totals}


@server.tool(
    answers=("cash", "buying_power"),
    read_only=True,
    reads=["cash_balance", "order", "position", "security"],
    examples=[{}],
    asks=("tell me my cash balance", "tell me how much buying power I have", "show my cash and equity per currency",
          "check how much cash I have to invest"),
)
def get_cash_balance(state: TradingState) -> dict:
    """Cash per currency: cash, what open buy orders reserve, buying power (cash less reserved),
    the market value of the positions in that currency and the total equity; plus the account
    holder and number."""
    balances = []
    for cash in state.cash.all():
        currency = cash["currency"]
        value = money(sum(_position_view(state, p)["market_value"] for p in state.positions.all()
                          if p["currency"] == currency))
        reserved = _reserved_cash(state, currency)
        balances.append({"currency": currency, "cash": cash["cash"], "reserved_for_orders": reserved,
                         "buying_power": money(cash["cash"] - reserved), "positions_value": value,
                         "equity": money(cash["cash"] + value)})
    return {"account": state.get_var("account"), "balances": balances, "as_of": iso_datetime(state.now())}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
