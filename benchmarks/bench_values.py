"""Values people use: do the bundled servers' ``values`` draw what a person would say, and values
that belong together (issue 26, item 5)?

Each tool call is drawn the way synthesis draws it: the entities it names are records of the seed
state, then every other parameter comes from the tool's ``values`` source (all sources of one call
given same-seeded generators), else — as synthesis does without a source — a value stored under a
field of the same name in the seed state, or one of the tool's examples. Two ways:

- ``with args``: each source is given the call's other arguments known so far (the entities, then
  the values drawn before it, in parameter order), as ``phrasing.draw_value`` does;
- ``without``: sources are called ``(rng, state)``, as a caller that passes no arguments does.

Figures (share of drawn calls):

- ``limit_in_0.5-1.5x`` / ``limit_in_0.9-1.1x``: trading limit prices within that factor of the
  symbol's quote (the ask for a buy, the bid for a sell);
- ``events_over_12h`` / ``events_15min-3h``: new and moved calendar events by length;
- ``ranges_reversed``: any call whose end (``end``, ``time_max``, ``end_date``, ``check_out``) is
  not after its start;
- ``merchant_mismatch``: budget expenses whose merchant is not one of the category's merchants;
- ``listing_mismatch``: new marketplace listings whose title is not of its category or whose
  price is outside the kind's range; ``offers_off``: offers and counters outside 50-100% of the
  list price;
- ``option_mismatch``: dishes and products added to a cart with a size or add-on they do not
  offer;
- ``party_mismatch``: flight bookings whose passenger count is not the number of travellers, or
  with a traveller whose passport is not valid for an international flight;
- ``odd_floats``: drawn numbers (of ``number`` parameters) with more than two decimals
  (coordinates excepted).

Run ``python benchmarks/bench_values.py`` (``--draws N``, ``--quick``, ``--servers-from DIR`` to load the
server modules from DIR, e.g. ``git archive`` of an older commit, to measure a before).
``tests/servers/test_values.py`` holds the bundled servers to these figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.util
import random
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from prove_core.env.runtime import ServerRuntime, example_at
from prove_core.toolkit.server import ENTITY_KEY, Server, ToolDef

try:
    from prove_core.toolkit.phrasing import draw_value
except ImportError:  # an older toolkit: sources take (rng, state) only

    def draw_value(source: Any, rng: random.Random, state: Any, args: Mapping[str, Any] | None = None) -> Any:
        return source(rng, state)


SERVERS = ("trading", "calendar", "budget", "marketplace", "banking", "payments", "email", "shopping",
           "retail_chain", "food_delivery", "filesystem", "travel_booking", "maps", "vehicle", "social_media",
           "iot_devices", "crm", "issue_tracker", "team_chat", "video_meeting")
RANGES = (("start", "end"), ("time_min", "time_max"), ("start_date", "end_date"), ("check_in", "check_out"))
COORDINATES = {"latitude", "longitude", "lat", "lon"}


def load_servers(directory: Path | None = None) -> dict[str, Server]:
    """The bundled servers, or the one-file server modules found in ``directory`` (an older
    checkout; a server that is a package, filesystem, is always the installed one)."""
    found = {}
    for name in SERVERS:
        path = directory / f"{name}.py" if directory is not None else None
        if path is None or not path.exists():
            module = importlib.import_module(f"prove_servers.{name}")
        else:
            spec = importlib.util.spec_from_file_location(f"_values_before_{name}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        found[name] = next(v for v in vars(module).values() if isinstance(v, Server))
    return found


class Drawer:
    """Draws calls of one server's tools on its seed state, as synthesis does."""

    def __init__(self, server: Server, seed: int = 0) -> None:
        self.server = server
        self.runtime = ServerRuntime(server, seed=seed)
        self.state = server.build_state(seed)
        self._examples: dict[str, list[dict[str, Any]]] = {}
        self._pools: dict[str, list[Any]] = {}
        self._tables = {t.entity: getattr(self.state, name) for name, t in server.state_type._table_specs.items()}

    def examples(self, tool: ToolDef) -> list[dict[str, Any]]:
        if tool.name not in self._examples:
            sid, found = self.runtime.new_session(), []
            for i in range(len(tool.examples)):
                try:
                    found.append(example_at(tool, self.runtime, sid, i))
                except Exception:  # noqa: BLE001 - an example that does not apply to this seed
                    continue
            self._examples[tool.name] = found
        return self._examples[tool.name]

    def pool(self, tool: ToolDef, param: str) -> list[Any]:
        """Values of the parameter's type stored under a field named ``param`` anywhere in the seed
        state, that the tool's schema accepts in its first example."""
        key = f"{tool.name}.{param}"
        if key not in self._pools:
            kind = {"string": str, "integer": int, "number": (int, float)}.get(
                tool.spec.parameters["properties"][param].get("type", ""))
            values = {record.get(param) for table in self.state._tables.values() for record in table.values()
                      if isinstance(record, dict)} if kind else set()
            base = (self.examples(tool) or [{}])[0]
            self._pools[key] = [v for v in sorted((v for v in values if isinstance(v, kind) and
                                                   not isinstance(v, bool)), key=repr) if _valid(tool, {**base, param: v})]
        return self._pools[key]

    def call(self, tool: ToolDef, rng: random.Random, *, with_args: bool) -> dict[str, Any]:
        """One call's arguments: its entities from the seed state, then its other values."""
        props = tool.spec.parameters.get("properties", {})
        args: dict[str, Any] = {}
        for param, prop in props.items():
            table = self._tables.get(prop.get(ENTITY_KEY, ""))
            if table is not None and len(table):
                record_id = rng.choice(sorted(r["id"] for r in table.all()))
                args[param] = [record_id] if prop.get("type") == "array" else record_id
        call_seed = rng.random()
        for param, prop in props.items():
            if param in args:
                continue
            source = tool.values.get(param)
            if source is not None:
                value = draw_value(source, random.Random(call_seed), self.state, dict(args) if with_args else None)
            elif "enum" in prop:
                value = rng.choice(prop["enum"])
            else:
                examples = [e[param] for e in self.examples(tool) if param in e]
                pool = self.pool(tool, param)
                value = rng.choice(pool) if pool and (rng.random() < 0.5 or not examples) else \
                    rng.choice(examples) if examples else None
            if value is not None:
                args[param] = value
        return args

    def calls(self, tool_name: str, draws: int, *, with_args: bool) -> Iterator[dict[str, Any]]:
        tool = self.server.tools[tool_name]
        rng = random.Random(f"{self.server.name}.{tool_name}")
        for _ in range(draws):
            yield self.call(tool, rng, with_args=with_args)


def _valid(tool: ToolDef, args: dict[str, Any]) -> bool:
    try:
        tool.validate(args)
    except Exception:  # noqa: BLE001 - the schema rejects it
        return False
    return True


def _share(hits: int, total: int) -> float:
    return round(hits / total, 3) if total else float("nan")


def _time(value: Any) -> dt.datetime | None:
    try:
        moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def limit_prices(servers: Mapping[str, Server], draws: int, with_args: bool) -> dict[str, float]:
    drawer = Drawer(servers["trading"])
    ratios = []
    for args in drawer.calls("place_limit_order", draws, with_args=with_args):
        security = drawer.state.securities.find(str(args.get("symbol", "")).upper())
        if security is not None and isinstance(args.get("limit_price"), int | float):
            quote = security["bid"] if args.get("side") == "sell" else security["ask"]
            ratios.append(args["limit_price"] / quote)
    return {"limit_in_0.5-1.5x": _share(sum(0.5 <= r <= 1.5 for r in ratios), len(ratios)),
            "limit_in_0.9-1.1x": _share(sum(0.9 <= r <= 1.1 for r in ratios), len(ratios))}


def event_lengths(servers: Mapping[str, Server], draws: int, with_args: bool) -> dict[str, float]:
    drawer = Drawer(servers["calendar"])
    lengths = []
    for tool in ("create_event", "update_event"):
        for args in drawer.calls(tool, draws, with_args=with_args):
            start, end = _time(args.get("start")), _time(args.get("end"))
            if start and end:
                lengths.append((end - start).total_seconds() / 3600)
    return {"events_over_12h": _share(sum(h > 12 for h in lengths), len(lengths)),
            "events_15min-3h": _share(sum(0.25 <= h <= 3 for h in lengths), len(lengths))}


def reversed_ranges(servers: Mapping[str, Server], draws: int, with_args: bool) -> dict[str, float]:
    bad = total = 0
    for server in servers.values():
        drawer = Drawer(server)
        for tool in server.tools.values():
            props = tool.spec.parameters.get("properties", {})
            pairs = [(a, b) for a, b in RANGES if a in props and b in props]
            if not pairs:
                continue
            for args in drawer.calls(tool.name, draws // 4, with_args=with_args):
                for a, b in pairs:
                    if a in args and b in args:
                        total += 1
                        bad += str(args[b]) <= str(args[a])
    return {"ranges_reversed": _share(bad, total)}


def merchant_mismatches(servers: Mapping[str, Server], draws: int, with_args: bool) -> dict[str, float]:
    budget = servers["budget"]
    module = sys.modules[budget.seed_fn.__module__]
    merchants = {name: set(m) for name, _, _, _, m, _ in module.CATEGORIES}
    merchants[module.CUSTOM_CATEGORY[0]] = {"Paperlane Studio", "Bloom Florist"}
    drawer = Drawer(budget)
    bad = total = 0
    for tool in ("add_expense", "update_expense"):
        for args in drawer.calls(tool, draws, with_args=with_args):
            category = drawer.state.categories.find(args.get("category_id") or "")
            if category is None and tool == "update_expense":
                expense = drawer.state.expenses.find(args.get("expense_id") or "")
                category = expense and drawer.state.categories.find(expense["category_id"])
            if category is not None and "merchant" in args:
                total += 1
                bad += args["merchant"] not in merchants.get(category["name"], ())
    return {"merchant_mismatch": _share(bad, total)}


def listing_mismatches(servers: Mapping[str, Server], draws: int, with_args: bool) -> dict[str, float]:
    market = servers["marketplace"]
    items = sys.modules[market.seed_fn.__module__].ITEMS
    drawer = Drawer(market)
    bad = total = 0
    for args in drawer.calls("create_listing", draws, with_args=with_args):
        kinds = items.get(args.get("category"), {}).get("kinds", ())
        kind = next((k for k in kinds if str(args.get("title", "")).endswith(k[0])), None)
        total += 1
        bad += kind is None or not (kind[1] * 0.5 <= args.get("price", 0) <= kind[2])
    off = offers = 0
    for tool, key in (("make_offer", "listing_id"), ("counter_offer", "offer_id")):
        for args in drawer.calls(tool, draws, with_args=with_args):
            record = drawer.state.listings.find(args.get(key) or "") if key == "listing_id" else \
                drawer.state.offers.find(args.get(key) or "")
            listing = record if key == "listing_id" else record and drawer.state.listings.find(record["listing_id"])
            if listing and isinstance(args.get("amount"), int | float):
                offers += 1
                off += not 0.5 <= args["amount"] / listing["price"] <= 1.0
    return {"listing_mismatch": _share(bad, total), "offers_off": _share(off, offers)}


def party_mismatches(servers: Mapping[str, Server], draws: int, with_args: bool) -> dict[str, float]:
    drawer = Drawer(servers["travel_booking"])
    bad = total = 0
    for args in drawer.calls("book_flight", draws, with_args=with_args):
        fare = drawer.state.fares.find(args.get("fare_id") or "")
        flight = fare and drawer.state.flights.find(fare["flight_id"])
        travellers = [drawer.state.travellers.find(t) for t in args.get("traveller_ids", [])]
        if not flight or not travellers:
            continue
        total += 1
        unfit = flight["international"] and any(t is None or (t["passport_expiry"] or "") < flight["date"]
                                                for t in travellers)
        bad += args.get("passengers") != len(travellers) or unfit
    return {"party_mismatch": _share(bad, total)}


def option_mismatches(servers: Mapping[str, Server], draws: int, with_args: bool) -> dict[str, float]:
    drawer = Drawer(servers["food_delivery"])
    bad = total = 0
    for args in drawer.calls("add_to_cart", draws, with_args=with_args):
        item = drawer.state.menu_items.find(args.get("menu_item_id") or "")
        if item is None:
            continue
        total += 1
        sizes = {size["id"] for size in item.get("sizes") or ()}
        add_ons = {add_on["id"] for add_on in item.get("add_ons") or ()}
        bad += ("size" in args and args["size"] not in sizes) or not set(args.get("add_ons") or ()) <= add_ons
    shop = Drawer(servers["shopping"])
    for args in shop.calls("add_to_cart", draws, with_args=with_args):
        product = shop.state.products.find(args.get("product_id") or "")
        if product is not None and "size" in args:
            total += 1
            bad += args["size"] not in {v["size"] for v in product["variants"] if v["size"]}
    return {"option_mismatch": _share(bad, total)}


def odd_floats(servers: Mapping[str, Server], draws: int, with_args: bool) -> dict[str, float]:
    odd = total = 0
    for server in servers.values():
        drawer = Drawer(server)
        for tool in server.tools.values():
            numbers = [p for p, prop in tool.spec.parameters.get("properties", {}).items()
                       if prop.get("type") == "number" and p not in COORDINATES]
            if not numbers:
                continue
            for args in drawer.calls(tool.name, draws // 4, with_args=with_args):
                for param in numbers:
                    value = args.get(param)
                    if isinstance(value, float):
                        total += 1
                        odd += round(value, 2) != value
    return {"odd_floats": _share(odd, total)}


FIGURES: tuple[Callable[[Mapping[str, Server], int, bool], dict[str, float]], ...] = (
    limit_prices, event_lengths, reversed_ranges, merchant_mismatches, listing_mismatches, party_mismatches,
    option_mismatches, odd_floats)


def figures(servers: Mapping[str, Server], draws: int, *, with_args: bool) -> dict[str, float]:
    out: dict[str, float] = {}
    for figure in FIGURES:
        out.update(figure(servers, draws, with_args))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=400, help="calls drawn per tool (default 400)")
    parser.add_argument("--servers-from", type=Path, default=None, help="load the server modules from this folder")
    parser.add_argument("--quick", action="store_true", help="40 draws per tool (a smoke run)")
    opts = parser.parse_args()
    draws = 40 if opts.quick else opts.draws
    servers = load_servers(opts.servers_from)
    with_args = figures(servers, draws, with_args=True)
    without = figures(servers, draws, with_args=False)
    print(f"{'figure':<22} {'with args':>10} {'without':>10}")
    for key in with_args:
        print(f"{key:<22} {with_args[key]:>10} {without[key]:>10}")


if __name__ == "__main__":
    main()
