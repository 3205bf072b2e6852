"""retail_chain — the store-operations side of a home and hardware chain: its stores and their
opening hours, the product catalog, stock per store, stock transfers between stores, and
reserve-online-pick-up-in-store orders.

All stores sit in one time zone, and the session clock reads as their local time: "open now" and
pickup slots are judged against ``state.now()``. Times are written ``YYYY-MM-DDTHH:MM``.

Stock model: a store either carries a SKU (it has a stock record, possibly at 0 on hand) or does
not (SKU_NOT_CARRIED). Of the units on hand, those held for pickups that are reserved and not yet
expired are spoken for: ``available = on_hand - reserved``. A transfer moves stock in three
steps — requested (nothing moves), shipped (leaves the source), received (arrives at the
destination, possibly short). A pickup holds its units from the reservation until 48 hours after
its slot; after that it has expired and the units are free again.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    MINUTE_FORMAT,
    Conflict,
    InvalidArgument,
    Record,
    Server,
    State,
    Table,
    fake,
    local_minute,
    minute_text,
    paginate,
    ref,
    require,
)

CHAIN = "Ridgeline Home & Hardware"
PICKUP_HOLD = dt.timedelta(hours=48)  # after the slot
PICKUP_BOOKING_WINDOW = dt.timedelta(days=7)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

Category = Literal["tools", "paint", "garden", "kitchen", "lighting", "plumbing", "electrical", "storage"]
TransferStatus = Literal["requested", "in_transit", "received"]

CITIES = (  # (city, postal code, area names for its stores)
    ("Seattle", "98101", ("Ballard", "Capitol Hill", "Northgate", "West Seattle")),
    ("Tacoma", "98402", ("Downtown", "Proctor")),
    ("Bellevue", "98004", ("Crossroads", "Factoria")),
    ("Everett", "98201", ("Marina", "Silver Lake")),
    ("Olympia", "98501", ("Westside", "Lacey Road")),
)
# Weekly hours templates: (weekday hours, saturday hours, sunday hours); None = closed that day.
HOURS = {
    "standard": (("07:00", "21:00"), ("07:00", "21:00"), ("09:00", "18:00")),
    "late": (("08:00", "22:00"), ("08:00", "22:00"), ("10:00", "19:00")),
    "compact": (("10:00", "19:00"), ("10:00", "17:00"), None),
    "early": (("06:00", "20:00"), ("07:00", "19:00"), ("07:00", "19:00")),
}
CATALOG: dict[str, tuple[str, tuple[tuple[str, int, int], ...]]] = {  # category: (SKU code, kinds)
    "tools": ("TLS", (("Cordless Drill 20V", 79, 189), ("Claw Hammer 16oz", 12, 29), ("Socket Set 40pc", 35, 89),
                      ("Laser Level", 39, 129), ("Circular Saw 7-1/4in", 89, 199), ("Utility Knife", 6, 19))),
    "paint": ("PNT", (("Interior Paint 1gal Eggshell", 29, 59), ("Exterior Stain 1gal", 34, 64),
                      ("Roller Kit 9in", 12, 29), ("Painter's Tape 3-Pack", 9, 19), ("Primer 1gal", 19, 39))),
    "garden": ("GRD", (("Garden Hose 50ft", 25, 69), ("Potting Mix 40qt", 9, 19), ("Pruning Shears", 14, 45),
                       ("Raised Bed Kit", 59, 149), ("Leaf Rake", 14, 34))),
    "kitchen": ("KIT", (("Pull-Down Faucet", 89, 249), ("Cabinet Pulls 10-Pack", 19, 49), ("Garbage Disposal 1/2HP",
                        99, 189), ("Under-Sink Organizer", 19, 39))),
    "lighting": ("LGT", (("LED Bulbs A19 4-Pack", 8, 19), ("Motion Sensor Flood Light", 29, 79),
                         ("Pendant Light", 49, 159), ("Under-Cabinet LED Strip", 19, 49))),
    "plumbing": ("PLB", (("Wax Toilet Ring", 4, 9), ("PEX Pipe 1/2in 100ft", 39, 69), ("Shower Head", 19, 79),
                         ("Plunger Heavy Duty", 9, 24), ("Water Heater Flex Line", 12, 24))),
    "electrical": ("ELC", (("Smart Outlet 2-Pack", 19, 39), ("GFCI Outlet", 14, 24), ("Extension Cord 25ft", 12, 29),
                           ("Dimmer Switch", 14, 39), ("Wire Nuts 100ct", 6, 12))),
    "storage": ("STG", (("Steel Shelving 5-Tier", 69, 159), ("Tote 27gal", 9, 19), ("Pegboard Kit", 24, 59),
                        ("Tool Chest 26in", 149, 399))),
}
BRANDS = ("Ridgeline", "Ironpeak", "Cascade Pro", "Hearthline", "Voltline", "Evergreen")
TRANSFER_NOTES = ("Restock for the weekend sale", "Customer waiting on this at our counter", "Spring garden promo",
                  "Covering a stockout", "Contractor order next week", "Balancing overstock", "Display refresh",
                  "Holiday rush prep")
CATALOG_SIZE = 40


class ChainState(State):
    stores = Table("store", prefix="sto", index=("city",))
    products = Table("product", prefix="sku", index=("category",))  # keyed by the SKU itself (TLS-10457)
    stock = Table("stock", prefix="stk", index=("store_id", "sku"))
    transfers = Table("transfer", prefix="trf", index=("from_store_id", "to_store_id"))
    pickups = Table("pickup", prefix="pku", index=("store_id", "sku"))


@attrs.frozen(kw_only=True)
class ChainOptions:
    """Seed size: how many stores (each carrying most of the 40-SKU catalog). At least 3, so
    every transfer and pickup scenario has stores to play out in."""

    stores: int = attrs.field(default=8, validator=attrs.validators.ge(3))


# -- clock and hours ------------------------------------------------------------------------------



def _parse_time(value: str, field: str) -> dt.datetime:
    try:
        return dt.datetime.strptime(value, MINUTE_FORMAT)
    except ValueError:
        raise InvalidArgument(f"{field} must be a local time like 2026-03-02T15:30, got {value!r}",
                              reason="BAD_DATETIME", field=field) from None


def _hours_on(store: Record, day: dt.date) -> tuple[dt.datetime, dt.datetime] | None:
    hours = store["hours"][WEEKDAYS[day.weekday()]]
    if hours is None:
        return None
    start, end = (dt.datetime.combine(day, dt.time.fromisoformat(hours[k])) for k in ("open", "close"))
    return start, end


def _is_open(store: Record, when: dt.datetime) -> bool:
    hours = _hours_on(store, when.date())
    return hours is not None and hours[0] <= when < hours[1]


def _next_change(store: Record, when: dt.datetime) -> tuple[str, str | None]:
    """("closes_at", time) while open, else ("opens_at", next opening within a week)."""
    if _is_open(store, when):
        return "closes_at", minute_text(_hours_on(store, when.date())[1])
    for ahead in range(8):
        hours = _hours_on(store, when.date() + dt.timedelta(days=ahead))
        if hours is not None and hours[0] > when:
            return "opens_at", minute_text(hours[0])
    return "opens_at", None


def _day_hours_label(store: Record, day: dt.date) -> str:
    hours = store["hours"][WEEKDAYS[day.weekday()]]
    return "closed" if hours is None else f"{hours['open']}-{hours['close']}"


# -- stock rules ----------------------------------------------------------------------------------


def _pickup_status(state: ChainState, pickup: Record) -> str:
    """What a caller sees: a reserved pickup past its hold reads as expired (a matter of the clock)."""
    if pickup["status"] == "reserved" and pickup["hold_until"] < minute_text(local_minute(state)):
        return "expired"
    return pickup["status"]


def _stock_record(state: ChainState, store: Record, sku: str) -> Record:
    """The store's stock record for a SKU; SKU_NOT_CARRIED when the store does not stock it."""
    record = state.stock.first(store_id=store["id"], sku=sku)
    require(record is not None, f"{store['name']} does not carry {sku}; check_stock lists the stores that do",
            reason="SKU_NOT_CARRIED", store_id=store["id"], sku=sku)
    return record


def _reserved(state: ChainState, store_id: str, sku: str) -> int:
    held = state.pickups.where(lambda p: _pickup_status(state, p) == "reserved", store_id=store_id, sku=sku)
    return sum(p["quantity"] for p in held)


def _availability(state: ChainState, record: Record) -> Record:
    reserved = _reserved(state, record["store_id"], record["sku"])
    return {"on_hand": record["on_hand"], "reserved_for_pickup": reserved,
            "available": max(0, record["on_hand"] - reserved)}


def _require_available(state: ChainState, store: Record, record: Record, quantity: int) -> None:
    available = _availability(state, record)["available"]
    require(quantity <= available, f"{store['name']} has {available} of {record['sku']} available "
            f"({record['on_hand']} on hand, the rest held for pickups); {quantity} requested",
            reason="INSUFFICIENT_STOCK", available=available, requested=quantity)


def _move_stock(state: ChainState, record: Record, delta: int) -> None:
    state.stock.update(record["id"], on_hand=record["on_hand"] + delta)


# -- views ----------------------------------------------------------------------------------------


def _store_card(state: ChainState, store: Record) -> Record:
    now = local_minute(state)
    change, when = _next_change(store, now)
    return {"id": store["id"], "name": store["name"], "city": store["city"], "address": store["address"],
            "phone": store["phone"], "open_now": _is_open(store, now),
            "today_hours": _day_hours_label(store, now.date()), change: when}


def _pickup_view(state: ChainState, pickup: Record) -> Record:
    return {**pickup, "status": _pickup_status(state, pickup)}


# -- seed -----------------------------------------------------------------------------------------


def build_chain(rng: random.Random, options: ChainOptions) -> ChainState:
    """Stores with hours, a 40-SKU catalog, stock per store, transfers and pickups in every state."""
    state = ChainState(salt=str(rng.random()))
    stores = _seed_stores(state, rng, options.stores)
    products = _seed_catalog(state, rng)
    _seed_stock(state, rng, stores, products)
    _seed_transfers(state, rng, stores)
    _seed_pickups(state, rng, stores)
    return state


def _seed_stores(state: ChainState, rng: random.Random, count: int) -> list[Record]:
    """Store #0 keeps standard hours (open at the session start), #1 compact ones (opens later,
    closed on Sundays); the rest draw a template."""
    stores = []
    for i in range(count):
        city, postal, areas = CITIES[i % len(CITIES)]
        area = areas[(i // len(CITIES)) % len(areas)]
        round_ = i // (len(CITIES) * len(areas))
        template = "standard" if i == 0 else "compact" if i == 1 else rng.choice(tuple(HOURS))
        weekday, saturday, sunday = HOURS[template]
        hours = {day: weekday for day in WEEKDAYS[:5]} | {"saturday": saturday, "sunday": sunday}
        stores.append(state.stores.insert({
            "name": f"{CHAIN} {city} {area}" + (f" {round_ + 1}" if round_ else ""),
            "city": city,
            "address": {"line1": f"{rng.randint(100, 9899)} {rng.choice(fake.STREETS)}", "city": city, "region": "WA",
                        "postal_code": postal},
            "phone": fake.phone(rng),
            "manager": fake.full_name(rng),
            "hours": {day: None if h is None else {"open": h[0], "close": h[1]} for day, h in hours.items()},
        }))
    return stores


def _seed_catalog(state: ChainState, rng: random.Random) -> list[Record]:
    categories = list(CATALOG)
    products = []
    for i in range(CATALOG_SIZE):
        category = categories[i % len(categories)]
        code, kinds = CATALOG[category]
        name, low, high = kinds[(i // len(categories)) % len(kinds)]
        brand = rng.choice(BRANDS)
        products.append(state.products.insert({
            "id": f"{code}-{10_000 + 97 * i + rng.randint(0, 96)}",
            "name": f"{brand} {name}", "brand": brand, "category": category,
            "price": float(rng.randint(low, high)) + 0.98,
            "discontinued": i == CATALOG_SIZE - 1,  # still in the catalog, stocked nowhere
        }))
    return products


def _seed_stock(state: ChainState, rng: random.Random, stores: list[Record], products: list[Record]) -> None:
    """Most stores carry most SKUs. Fixed cases: SKU #0 is carried everywhere with stock, #1 is not
    carried by store #1, and store #0 has #2 on its shelf list with none on hand."""
    for store in stores:
        for n, product in enumerate(products):
            if product["discontinued"] or (n == 1 and store is stores[1]):
                continue
            if n > 2 and rng.random() < 0.2:
                continue
            on_hand = 0 if (n == 2 and store is stores[0]) else rng.choice((0, 3, 6, 9, 14, 24, 40))
            if n == 0:
                on_hand = max(on_hand, 12)
            state.stock.insert({"store_id": store["id"], "sku": product["id"], "on_hand": on_hand,
                                "aisle": f"{product['category'][0].upper()}{rng.randint(1, 24)}"})


def _seed_transfers(state: ChainState, rng: random.Random, stores: list[Record]) -> None:
    """One transfer in each state, between stores that both carry the SKU."""
    now = local_minute(state)
    for step, (status, days_ago) in enumerate((("requested", 0), ("in_transit", 1), ("received", 4))):
        source, target = stores[step % len(stores)], stores[(step + 2) % len(stores)]
        shared = [r for r in state.stock.where(lambda r: r["on_hand"] >= 6, store_id=source["id"])
                  if state.stock.first(store_id=target["id"], sku=r["sku"])]
        record = rng.choice(shared)
        quantity = rng.randint(2, min(6, record["on_hand"]))
        requested = now - dt.timedelta(days=days_ago, hours=rng.randint(1, 5))
        shipped = requested + dt.timedelta(hours=3) if status != "requested" else None
        received = shipped + dt.timedelta(days=1) if status == "received" else None
        state.transfers.insert({
            "from_store_id": source["id"], "to_store_id": target["id"], "sku": record["sku"], "quantity": quantity,
            "status": status, "note": "Rebalancing weekend demand", "requested_at": minute_text(requested),
            "shipped_at": shipped and minute_text(shipped), "received_at": received and minute_text(received),
            "received_quantity": quantity if received else None, "short_quantity": 0 if received else None,
        })


def _seed_pickups(state: ChainState, rng: random.Random, stores: list[Record]) -> None:
    """Per store: a pickup ready for collection (slot yesterday), one booked for tomorrow, an
    expired one never collected, and older collected and cancelled ones."""
    now = local_minute(state)
    # (status, first day to try relative to today, direction to look for a day the store is open)
    plans = (("reserved", -1, -1), ("reserved", 1, 1), ("reserved", -4, -1), ("collected", -6, -1),
             ("cancelled", -3, -1))
    for store in stores:
        stocked = state.stock.where(lambda r: r["on_hand"] >= 4, store_id=store["id"])
        for status, days, step in plans:
            record = rng.choice(stocked)
            day = now.date() + dt.timedelta(days=days)
            while _hours_on(store, day) is None:
                day += dt.timedelta(days=step)
            slot = _hours_on(store, day)[0] + dt.timedelta(hours=rng.randint(1, 6))
            state.pickups.insert({
                "store_id": store["id"], "sku": record["sku"],
                "product_name": state.products.get(record["sku"])["name"], "quantity": rng.randint(1, 2),
                "customer_name": fake.full_name(rng), "customer_phone": fake.phone(rng), "pickup_at": minute_text(slot),
                "hold_until": minute_text(slot + PICKUP_HOLD), "status": status,
                "confirmation_code": f"RL-{rng.randint(100_000, 999_999)}",
                "created_at": minute_text(min(slot, now) - dt.timedelta(hours=rng.randint(3, 30))),
                "collected_at": minute_text(slot) if status == "collected" else None,
                "cancelled_at": minute_text(slot - dt.timedelta(hours=1)) if status == "cancelled" else None,
            })


# -- examples: arguments valid on a fresh seed of any size -------------------------------------------


def _open_store(s: ChainState) -> Record:
    return s.stores.first(lambda st: _is_open(st, local_minute(s))) or s.stores.all()[0]


def _transfer_example(s: ChainState) -> Record:
    for record in s.stock.where(lambda r: r["on_hand"] >= 8):
        if _availability(s, record)["available"] < 3:
            continue
        store = s.stores.get(record["store_id"])
        carriers = [r["store_id"] for r in s.stock.where(sku=record["sku"]) if r["store_id"] != store["id"]]
        target = s.stores.find(carriers[0]) if carriers else None
        if target:
            return {"from_store_id": store["id"], "to_store_id": target["id"], "sku": record["sku"], "quantity": 3,
                    "note": "Restock for the weekend sale"}
    raise LookupError("no SKU with stock at one store that another store carries")


def _transfer_in(s: ChainState, status: str) -> Record:
    transfer = s.transfers.first(status=status) or s.transfers.all()[0]
    return {"transfer_id": transfer["id"]}


def _pickup_example(s: ChainState) -> Record:
    store = _open_store(s)
    record = max(s.stock.where(store_id=store["id"]), key=lambda r: _availability(s, r)["available"])
    today = local_minute(s).date()
    day = next(d for d in (today + dt.timedelta(days=n) for n in range(1, 8)) if _hours_on(store, d))
    slot = _hours_on(store, day)[0] + dt.timedelta(hours=2)
    return {"store_id": store["id"], "sku": record["sku"], "quantity": 1, "pickup_at": minute_text(slot),
            "customer_name": "Dana Whitfield", "customer_phone": "+1-206-555-0142"}


def _pickup_slot(rng: random.Random, s: ChainState, args: Record | None = None) -> str:
    """A pickup slot a customer would pick: on one of the next days the call's store (else any
    store) opens, on the hour or half hour, at least an hour after opening and before closing."""
    store = s.stores.find((args or {}).get("store_id") or "") or rng.choice(s.stores.all())
    today = local_minute(s).date()
    days = [d for d in (today + dt.timedelta(days=n) for n in range(1, 7)) if _hours_on(store, d)]
    opens, closes = _hours_on(store, rng.choice(days))
    slots = int((closes - opens).total_seconds() // 1800) - 2
    return minute_text(opens + dt.timedelta(minutes=60 + 30 * rng.randint(0, max(slots - 1, 0))))


def _ready_pickup(s: ChainState) -> Record:
    """A reserved pickup whose slot has passed, at a store that is open now."""
    now = local_minute(s)
    pickup = s.pickups.first(lambda p: _pickup_status(s, p) == "reserved" and p["pickup_at"] <= minute_text(now)
                             and _is_open(s.stores.get(p["store_id"]), now)) or s.pickups.all()[0]
    return {"pickup_id": pickup["id"]}


def _cancellable_pickup(s: ChainState) -> Record:
    pickup = s.pickups.first(lambda p: p["status"] == "reserved" and p["pickup_at"] > minute_text(local_minute(s)))
    return {"pickup_id": (pickup or s.pickups.all()[0])["id"]}


# -- server and tools -----------------------------------------------------------------------------

server = Server(
    "retail_chain",
    sensitive=("customer_phone",),  # pickup customers' phone numbers stay between them and the store
    domain="commerce",
    description=f"Store operations of {CHAIN}: stores and opening hours, catalog, stock per store, "
    "stock transfers between stores, and in-store pickup reservations.",
    state=ChainState,
    seed=build_chain,
    options=ChainOptions,
)

StoreId = Annotated[str, ref("store", "Id of the store (sto_...), from list_stores.")]
Sku = Annotated[str, ref("product", "The product's SKU, e.g. TLS-10457, from search_catalog.",
                         pattern=r"^[A-Z]{3}-\d{5}$")]
TransferId = Annotated[str, ref("transfer", "Id of the transfer (trf_...), from request_transfer or get_store.")]
PickupId = Annotated[str, ref("pickup", "Id of the pickup reservation (pku_...), from reserve_pickup or get_store.")]
Quantity = Annotated[int, Field(ge=1, le=100, description="Number of units.")]


@server.tool(
    answers=("city", "open_now", "today_hours"),
    read_only=True,
    reads=["store"],
    examples=[{}, {"city": "Seattle"}, {"open_now": True}],
    asks=lambda a: {
        True: ("which stores are open right now", "list the stores open at the moment in {city}",
               "show me the stores I could still walk into now"),
        False: ("which stores are closed right now", "list the stores in {city} that are closed at the moment",
                "show me which stores have shut for now"),
    }.get(a.get("open_now"), ("list all the stores", "show me the stores in {city}",
                              "what stores do you have in {city}", "where are all your locations")),
    values={"city": lambda rng, s: rng.choice([city for city, _, _ in CITIES])},
)
def list_stores(
    state: ChainState,
    city: Annotated[str | None, Field(min_length=2, max_length=40, description="Only stores in this city, e.g. "
                                      "Seattle (case-insensitive).")] = None,
    open_now: Annotated[bool | None, Field(description="true: only stores open right now; false: only closed "
                                           "ones.")] = None,
) -> dict:
    """The chain's stores, optionally in one city: name, address, phone, whether each is open now,
    today's hours and when it next opens or closes. An unknown city gives an empty list."""
    stores = state.stores.where(city=city.strip().title()) if city else state.stores.all()
    cards = [_store_card(state, st) for st in stores]
    cards = [c for c in cards if open_now is None or c["open_now"] == open_now]
    return {"stores": cards, "total": len(cards), "local_time": minute_text(local_minute(state))}


@server.tool(
    answers=("line1", "phone", "open_now", "today_hours"),
    read_only=True,
    reads=["store", "pickup", "transfer"],
    errors=["STORE_NOT_FOUND"],
    examples=[lambda s: {"store_id": s.stores.first()["id"]}],
    asks=("show me {store_id}", "what pickups are waiting at {store_id}", "give me the details and hours of {store_id}",
          "pull up {store_id} with its open transfers"),
)
def get_store(state: ChainState, store_id: StoreId) -> dict:
    """One store in full: address, phone, manager, weekly opening hours, whether it is open now,
    the pickups waiting at its counter (reserved or expired, not yet collected or cancelled) and
    the transfers coming in or going out that are not yet received. Fails with STORE_NOT_FOUND."""
    store = state.stores.get(store_id)
    waiting = [_pickup_view(state, p) for p in state.pickups.where(store_id=store_id, status="reserved")]
    open_transfers = (state.transfers.where(lambda t: t["status"] != "received", from_store_id=store_id)
                      + state.transfers.where(lambda t: t["status"] != "received", to_store_id=store_id))
    return {**store, **_store_card(state, store), "pickups_waiting": waiting, "open_transfers": open_transfers}


@server.tool(
    answers=("open", "hours_that_day"),
    read_only=True,
    reads=["store"],
    errors=["STORE_NOT_FOUND", "BAD_DATETIME"],
    examples=[lambda s: {"store_id": s.stores.all()[1]["id"]},
              lambda s: {"store_id": s.stores.first()["id"], "at": minute_text(local_minute(s) + dt.timedelta(days=6))}],
    asks=("is {store_id} open right now", "will {store_id} be open at {at}", "check whether {store_id} is open on {at}",
          "when does {store_id} close today"),
)
def check_store_open(
    state: ChainState,
    store_id: StoreId,
    at: Annotated[str | None, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$", description="Local time to check, "
                                    "YYYY-MM-DDTHH:MM; now (the session clock) when omitted.")] = None,
) -> dict:
    """Whether a store is open now, or at a given local time: that day's hours and when it next
    closes (if open) or opens (if closed). Fails with STORE_NOT_FOUND or BAD_DATETIME."""
    store = state.stores.get(store_id)
    when = local_minute(state) if at is None else _parse_time(at, "at")
    change, next_time = _next_change(store, when)
    return {"store_id": store_id, "name": store["name"], "at": minute_text(when), "open": _is_open(store, when),
            "hours_that_day": _day_hours_label(store, when.date()), change: next_time}


@server.tool(
    answers=("price", "category"),
    read_only=True,
    reads=["product"],
    examples=[{"query": "drill"}, {"category": "paint", "limit": 5}, lambda s: {"query": s.products.first()["id"]}],
    asks=("search the catalog for {query}", "look up {query} in the catalog", "show me the {category} products",
          "list the first {limit} items in {category}", "find products matching {query} in {category}"),
    values={"query": lambda rng, s: rng.choice([w for p in s.products.all() for w in p["name"].lower().split()
                                               if w.isalpha() and len(w) > 3])},
)
def search_catalog(
    state: ChainState,
    query: Annotated[str | None, Field(max_length=80, description="Words of the product name or brand, or a "
                                       "SKU.")] = None,
    category: Annotated[Category | None, Field(description="Only products in this category.")] = None,
    limit: Annotated[int, Field(ge=1, le=50, description="Page size (1-50).")] = 20,
    offset: Annotated[int, Field(ge=0, description="Results to skip; pass next_offset from the previous page.")] = 0,
) -> dict:
    """Look products up in the chain's catalog by words, SKU or category: SKU, name, brand, category,
    price and whether the product is discontinued (no store stocks it any more). Returns one page,
    the total and next_offset; an empty list when nothing matches."""
    words = (query or "").lower().split()

    def wanted(product: Record) -> bool:
        return all(w in f"{product['id']} {product['name']}".lower() for w in words)

    matches = state.products.where(wanted, **({"category": category} if category else {}))
    return paginate(matches, limit=limit, offset=offset, key="products")


@server.tool(
    answers=("available", "total_available"),
    read_only=True,
    reads=["product", "stock", "store", "pickup"],
    errors=["PRODUCT_NOT_FOUND"],
    examples=[lambda s: {"sku": s.products.first()["id"]},
              lambda s: {"sku": s.products.first()["id"], "city": "Seattle", "in_stock_only": True}],
    asks=lambda a: ("which stores in {city} have {sku} available right now",
                    "show only the stores that actually have {sku} in stock",
                    "where is {sku} in stock in {city}") if a.get("in_stock_only") else (
        "check stock of {sku} across the stores", "how many of {sku} does each store have",
        "check the stock of {sku} in {city}", "look up the inventory of {sku}"),
    values={"city": lambda rng, s: rng.choice([city for city, _, _ in CITIES])},
)
def check_stock(
    state: ChainState,
    sku: Sku,
    city: Annotated[str | None, Field(min_length=2, max_length=40, description="Only stores in this city.")] = None,
    in_stock_only: Annotated[bool, Field(description="Leave out stores with nothing available.")] = False,
) -> dict:
    """Stock of one SKU across the stores that carry it: per store the units on hand, held for
    pickups and available, the aisle, and whether the store is open now; plus the total available.
    Stores that do not carry the SKU are not listed. Fails with PRODUCT_NOT_FOUND."""
    product = state.products.get(sku)
    rows = []
    for record in state.stock.where(sku=sku):
        store = state.stores.get(record["store_id"])
        if city and store["city"].lower() != city.strip().lower():
            continue
        row = {"store_id": store["id"], "store_name": store["name"], "city": store["city"], "aisle": record["aisle"],
               **_availability(state, record), "open_now": _is_open(store, local_minute(state))}
        if row["available"] > 0 or not in_stock_only:
            rows.append(row)
    return {"sku": sku, "name": product["name"], "price": product["price"], "stores": rows,
            "total_available": sum(r["available"] for r in rows)}


@server.tool(
    reads=["store", "product", "stock", "pickup"],
    produces=["transfer"],
    errors=["STORE_NOT_FOUND", "PRODUCT_NOT_FOUND", "SAME_STORE_TRANSFER", "SKU_NOT_CARRIED", "INSUFFICIENT_STOCK"],
    examples=[_transfer_example],
    asks=("send {quantity} units of {sku} from {from_store_id} to {to_store_id}",
          "transfer {quantity} of {sku} from {from_store_id} over to {to_store_id}",
          "request {quantity} units of {sku} be moved from {from_store_id} to {to_store_id} with the note \"{note}\"",
          "have {from_store_id} ship {quantity} units of {sku} to {to_store_id}"),
    values={"quantity": lambda rng, s: rng.choice((1, 2, 2, 3)), "note": lambda rng, s: rng.choice(TRANSFER_NOTES)},
)
def request_transfer(
    state: ChainState,
    from_store_id: Annotated[str, ref("store", "Id of the store sending the stock (sto_...).")],
    to_store_id: Annotated[str, ref("store", "Id of the store receiving it (sto_...).")],
    sku: Sku,
    quantity: Quantity,
    note: Annotated[str | None, Field(max_length=200, description="Optional reason, shown to both stores.")] = None,
) -> dict:
    """Ask one store to send units of a SKU to another. Nothing moves yet: the sending store ships it
    with ship_transfer and the receiving store books it in with receive_transfer. Returns the
    transfer (status requested). Fails with SAME_STORE_TRANSFER, SKU_NOT_CARRIED (either store does
    not stock the SKU) or INSUFFICIENT_STOCK (more than the sending store has available)."""
    require(from_store_id != to_store_id, "a transfer needs two different stores", reason="SAME_STORE_TRANSFER",
            error=InvalidArgument)
    source, target = state.stores.get(from_store_id), state.stores.get(to_store_id)
    state.products.get(sku)
    record = _stock_record(state, source, sku)
    _stock_record(state, target, sku)
    _require_available(state, source, record, quantity)
    return state.transfers.insert({
        "from_store_id": from_store_id, "to_store_id": to_store_id, "sku": sku, "quantity": quantity,
        "status": "requested", "note": note, "requested_at": minute_text(local_minute(state)), "shipped_at": None,
        "received_at": None, "received_quantity": None, "short_quantity": None,
    })


@server.tool(
    idempotent=True,  # a repeat is refused with TRANSFER_ALREADY_SHIPPED
    reads=["transfer", "stock", "pickup"],
    mutates=["transfer", "stock"],
    errors=["TRANSFER_NOT_FOUND", "TRANSFER_ALREADY_SHIPPED", "TRANSFER_ALREADY_RECEIVED", "INSUFFICIENT_STOCK"],
    examples=[lambda s: _transfer_in(s, "requested")],
    asks=("ship {transfer_id}", "mark {transfer_id} as shipped", "send out {transfer_id} from the stockroom"),
)
def ship_transfer(state: ChainState, transfer_id: TransferId) -> dict:
    """Ship a requested transfer: its units leave the sending store's stock and it goes in transit.
    Returns the transfer and the sending store's stock of the SKU. Fails with
    TRANSFER_ALREADY_SHIPPED, TRANSFER_ALREADY_RECEIVED or INSUFFICIENT_STOCK (the stock was sold or
    reserved since the request)."""
    transfer = state.transfers.get(transfer_id)
    require(transfer["status"] != "received", f"transfer {transfer_id} was received on {transfer['received_at']}",
            reason="TRANSFER_ALREADY_RECEIVED", error=Conflict)
    require(transfer["status"] == "requested", f"transfer {transfer_id} shipped at {transfer['shipped_at']}",
            reason="TRANSFER_ALREADY_SHIPPED", error=Conflict)
    source = state.stores.get(transfer["from_store_id"])
    record = state.stock.first(store_id=source["id"], sku=transfer["sku"])  # checked on request
    _require_available(state, source, record, transfer["quantity"])
    _move_stock(state, record, -transfer["quantity"])
    shipped = state.transfers.update(transfer_id, status="in_transit", shipped_at=minute_text(local_minute(state)))
    return {"transfer": shipped, "source_stock": _availability(state, state.stock.get(record["id"]))}


@server.tool(
    idempotent=True,  # a repeat is refused with TRANSFER_ALREADY_RECEIVED
    reads=["transfer", "stock", "pickup"],
    mutates=["transfer", "stock"],
    errors=["TRANSFER_NOT_FOUND", "TRANSFER_NOT_SHIPPED", "TRANSFER_ALREADY_RECEIVED", "RECEIVED_QUANTITY_TOO_HIGH"],
    examples=[lambda s: _transfer_in(s, "in_transit")],
    asks=("receive {transfer_id}", "book in {transfer_id} at the receiving store",
          "log {transfer_id} as received, but only {received_quantity} units arrived",
          "check in {transfer_id} with {received_quantity} units received"),
    values={"received_quantity": lambda rng, s: rng.choice((0, 1, 1, 2))},
)
def receive_transfer(
    state: ChainState,
    transfer_id: TransferId,
    received_quantity: Annotated[int | None, Field(ge=0, le=100, description="Units that actually arrived, if "
                                                   "fewer than were shipped; all of them when omitted.")] = None,
) -> dict:
    """Book a shipped transfer in at the receiving store: the units that arrived are added to its
    stock and any shortfall is recorded. Returns the transfer and the receiving store's stock of the
    SKU. Fails with TRANSFER_NOT_SHIPPED (ship it first), TRANSFER_ALREADY_RECEIVED or
    RECEIVED_QUANTITY_TOO_HIGH (more than were shipped)."""
    transfer = state.transfers.get(transfer_id)
    require(transfer["status"] != "received", f"transfer {transfer_id} was already received on "
            f"{transfer['received_at']}", reason="TRANSFER_ALREADY_RECEIVED", error=Conflict)
    require(transfer["status"] == "in_transit", f"transfer {transfer_id} has not shipped yet; ship_transfer first",
            reason="TRANSFER_NOT_SHIPPED")
    arrived = transfer["quantity"] if received_quantity is None else received_quantity
    require(arrived <= transfer["quantity"], f"only {transfer['quantity']} units were shipped",
            reason="RECEIVED_QUANTITY_TOO_HIGH", error=InvalidArgument, shipped=transfer["quantity"])
    record = state.stock.first(store_id=transfer["to_store_id"], sku=transfer["sku"])  # checked on request
    _move_stock(state, record, arrived)
    received = state.transfers.update(transfer_id, status="received", received_at=minute_text(local_minute(state)),
                                      received_quantity=arrived, short_quantity=transfer["quantity"] - arrived)
    return {"transfer": received, "destination_stock": _availability(state, state.stock.get(record["id"]))}


@server.tool(
    reads=["store", "product", "stock", "pickup"],
    produces=["pickup"],
    errors=["STORE_NOT_FOUND", "PRODUCT_NOT_FOUND", "BAD_DATETIME", "PICKUP_SLOT_IN_PAST", "PICKUP_TOO_FAR_AHEAD",
            "STORE_CLOSED", "SKU_NOT_CARRIED", "INSUFFICIENT_STOCK"],
    examples=[_pickup_example],
    asks=("reserve {quantity} of {sku} at {store_id} for pickup at {pickup_at} under {customer_name}, "
          "phone {customer_phone}",
          "set aside {quantity} units of {sku} for {customer_name} ({customer_phone}) to collect at {store_id} "
          "on {pickup_at}",
          "book a pickup for {customer_name}, {customer_phone}: {quantity} units of {sku} at {store_id}, {pickup_at}",
          "hold {quantity} of {sku} at {store_id} for {customer_name} to pick up at {pickup_at}; text {customer_phone} "
          "when it's ready"),
    values={"quantity": lambda rng, s: rng.choice((1, 1, 2, 3)), "customer_name": lambda rng, s: fake.full_name(rng),
            "customer_phone": lambda rng, s: fake.phone(rng), "pickup_at": _pickup_slot},
)
def reserve_pickup(
    state: ChainState,
    store_id: StoreId,
    sku: Sku,
    quantity: Quantity,
    pickup_at: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$", description="Pickup slot, local "
                                    "time YYYY-MM-DDTHH:MM, within the store's opening hours and the next 7 days.")],
    customer_name: Annotated[str, Field(min_length=2, max_length=80, description="Name the order is under.")],
    customer_phone: Annotated[str, Field(pattern=r"^\+?[0-9 ()-]{7,20}$", description="Phone for the ready "
                                         "text.")],
) -> dict:
    """Reserve units of a SKU for in-store pickup. The units are held from now until 48 hours after
    the slot (hold_until); uncollected, the pickup then expires. Returns the pickup with its
    confirmation code. Fails with PICKUP_SLOT_IN_PAST, PICKUP_TOO_FAR_AHEAD (more than 7 days out),
    STORE_CLOSED (the slot is outside that day's opening hours; the details give them),
    SKU_NOT_CARRIED, INSUFFICIENT_STOCK or BAD_DATETIME (not a real date-time)."""
    store = state.stores.get(store_id)
    product = state.products.get(sku)
    slot, now = _parse_time(pickup_at, "pickup_at"), local_minute(state)
    require(slot >= now, f"the slot {pickup_at} has passed; it is {minute_text(now)}", reason="PICKUP_SLOT_IN_PAST",
            error=InvalidArgument)
    require(slot <= now + PICKUP_BOOKING_WINDOW, "pickups can be booked up to 7 days ahead",
            reason="PICKUP_TOO_FAR_AHEAD", error=InvalidArgument)
    require(_is_open(store, slot), f"{store['name']} is closed at {pickup_at} (hours that day: "
            f"{_day_hours_label(store, slot.date())})", reason="STORE_CLOSED",
            hours=_day_hours_label(store, slot.date()))
    record = _stock_record(state, store, sku)
    _require_available(state, store, record, quantity)
    return _pickup_view(state, state.pickups.insert({
        "store_id": store_id, "sku": sku, "product_name": product["name"], "quantity": quantity,
        "customer_name": customer_name, "customer_phone": customer_phone, "pickup_at": pickup_at,
        "hold_until": minute_text(slot + PICKUP_HOLD), "status": "reserved",
        "confirmation_code": f"RL-{state.next_counter('pickup_code') + 500_000}",
        "created_at": minute_text(now), "collected_at": None, "cancelled_at": None,
    }))


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with PICKUP_ALREADY_CANCELLED
    reads=["pickup"],
    mutates=["pickup"],
    errors=["PICKUP_NOT_FOUND", "PICKUP_ALREADY_CANCELLED", "PICKUP_ALREADY_COLLECTED"],
    examples=[_cancellable_pickup],
    asks=("cancel {pickup_id}", "call off {pickup_id} and release the units",
          "the customer isn't coming, cancel {pickup_id}"),
)
def cancel_pickup(state: ChainState, pickup_id: PickupId) -> dict:
    """Cancel a pickup reservation (also an expired one) and release its units. Returns the pickup.
    Fails with PICKUP_ALREADY_CANCELLED or PICKUP_ALREADY_COLLECTED."""
    pickup = state.pickups.get(pickup_id)
    require(pickup["status"] != "cancelled", f"pickup {pickup_id} was already cancelled",
            reason="PICKUP_ALREADY_CANCELLED", error=Conflict)
    require(pickup["status"] != "collected", f"pickup {pickup_id} was collected at {pickup['collected_at']}",
            reason="PICKUP_ALREADY_COLLECTED")
    cancelled = state.pickups.update(pickup_id, status="cancelled", cancelled_at=minute_text(local_minute(state)))
    return {"pickup": cancelled, "released_quantity": pickup["quantity"]}


@server.tool(
    idempotent=True,  # a repeat is refused with PICKUP_ALREADY_COLLECTED
    reads=["pickup", "store", "stock"],
    mutates=["pickup", "stock"],
    errors=["PICKUP_NOT_FOUND", "PICKUP_CANCELLED", "PICKUP_ALREADY_COLLECTED", "PICKUP_EXPIRED", "STORE_CLOSED"],
    examples=[_ready_pickup],
    asks=("mark {pickup_id} as picked up", "hand over {pickup_id} at the counter",
          "record that {pickup_id} was collected"),
)
def mark_picked_up(state: ChainState, pickup_id: PickupId) -> dict:
    """Hand a reserved pickup over at the counter: the units leave the store's stock. The store must
    be open now. Returns the pickup (status collected). Fails with PICKUP_EXPIRED (more than 48 hours
    after its slot: reserve again), PICKUP_CANCELLED, PICKUP_ALREADY_COLLECTED or STORE_CLOSED."""
    pickup = state.pickups.get(pickup_id)
    status = _pickup_status(state, pickup)
    require(status != "cancelled", f"pickup {pickup_id} was cancelled", reason="PICKUP_CANCELLED")
    require(status != "collected", f"pickup {pickup_id} was collected at {pickup['collected_at']}",
            reason="PICKUP_ALREADY_COLLECTED", error=Conflict)
    require(status != "expired", f"pickup {pickup_id} expired at {pickup['hold_until']}; its units were released",
            reason="PICKUP_EXPIRED", hold_until=pickup["hold_until"])
    store, now = state.stores.get(pickup["store_id"]), local_minute(state)
    _, opens_at = _next_change(store, now)
    require(_is_open(store, now), f"{store['name']} is closed now; it opens at {opens_at}", reason="STORE_CLOSED",
            opens_at=opens_at)
    record = state.stock.first(store_id=pickup["store_id"], sku=pickup["sku"])
    _move_stock(state, record, -pickup["quantity"])
    return _pickup_view(state, state.pickups.update(pickup_id, status="collected", collected_at=minute_text(now)))


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
