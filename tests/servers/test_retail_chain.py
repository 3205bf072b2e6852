"""The retail_chain server's own rules: stores and opening hours, stock held for pickups,
transfers between stores and pickup reservations, with typed failures. What every server
guarantees is the conformance kit's (tests/servers/test_conformance.py).

The session clock starts on Monday 2026-03-02 at 09:00 local time: store #0 is open, store #1
closed.
"""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import retail_chain
from prove_servers.retail_chain import ChainOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def stores(h) -> tuple[dict, dict]:
    """(store #0, open now; store #1, closed now)."""
    all_stores = h.state.stores.all()
    return all_stores[0], all_stores[1]


def local_now(h) -> str:
    """The session clock as the chain's local time, "YYYY-MM-DDTHH:MM"."""
    return h.state.now().strftime("%Y-%m-%dT%H:%M")


def pickup_status(h, pickup: dict) -> str:
    """What a caller sees: a reserved pickup past its hold reads as expired."""
    return "expired" if pickup["status"] == "reserved" and pickup["hold_until"] < local_now(h) else pickup["status"]


def pickup_in(h, status: str, store_id: str, when: str = "any") -> dict:
    now = local_now(h)
    for p in h.state.pickups.where(store_id=store_id):
        slot_ok = when == "any" or (p["pickup_at"] <= now if when == "past" else p["pickup_at"] > now)
        if pickup_status(h, p) == status and slot_ok:
            return p
    raise LookupError(status)


def stock_at(h, store_id: str, sku: str) -> dict:
    rows = h.ok("check_stock", sku=sku)["stores"]
    return next(r for r in rows if r["store_id"] == store_id)


def shared_sku(h, source: dict, target: dict, minimum: int = 5) -> str:
    state = h.state
    for record in state.stock.where(store_id=source["id"]):
        if state.stock.first(store_id=target["id"], sku=record["sku"]) and stock_at(
                h, source["id"], record["sku"])["available"] >= minimum:
            return record["sku"]
    raise LookupError("no shared SKU")


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "list_stores", "get_store", "check_store_open", "search_catalog", "check_stock", "request_transfer",
        "ship_transfer", "receive_transfer", "reserve_pickup", "cancel_pickup", "mark_picked_up",
    }
    assert servers_registered_by(retail_chain) == [server]
    assert (server.name, server.domain) == ("retail_chain", "commerce")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_stores", "get_store", "check_store_open", "search_catalog", "check_stock"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"cancel_pickup"}
    assert not TOOLS["request_transfer"].spec.annotations.idempotent
    assert not TOOLS["reserve_pickup"].spec.annotations.idempotent
    for name, tool in TOOLS.items():
        assert tool.spec.annotations.read_only or tool.spec.produces or tool.spec.mutates, name
    assert TOOLS["request_transfer"].spec.produces == ("transfer",)
    assert TOOLS["reserve_pickup"].spec.entity_params() == {"store_id": "store", "sku": "product"}
    assert TOOLS["ship_transfer"].spec.entity_params() == {"transfer_id": "transfer"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_repeating_an_idempotent_write_is_refused(h):
    writers = [n for n, t in TOOLS.items() if t.spec.annotations.idempotent and not t.spec.annotations.read_only]
    for name in writers:
        fresh = h.session()
        args = fresh.example_args(name)
        fresh.ok(name, **args)
        once = fresh.state_hash()
        assert fresh.call(name, args).is_error, name  # refused: already shipped, received, cancelled...
        assert fresh.state_hash() == once, name


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_seed_has_every_scenario_the_tools_need(seed):
    h = ServerHarness(server, seed=seed)
    state = h.state
    first, second = state.stores.all()[:2]
    assert h.ok("check_store_open", store_id=first["id"])["open"]
    assert not h.ok("check_store_open", store_id=second["id"])["open"]
    assert len(state.products) == retail_chain.CATALOG_SIZE
    assert state.products.first(discontinued=True) and not state.stock.where(
        sku=state.products.first(discontinued=True)["id"])
    assert state.stock.where(lambda r: r["on_hand"] == 0)
    assert any(state.stock.first(store_id=s["id"], sku=p["id"]) is None for s in state.stores for p in state.products
               if not p["discontinued"])
    assert {t["status"] for t in state.transfers} == {"requested", "in_transit", "received"}
    assert {pickup_status(h, p) for p in state.pickups} == {"reserved", "expired", "collected", "cancelled"}
    for store in (first, second):  # a pickup ready at an open store and one at a closed store
        assert state.pickups.first(lambda p: p["pickup_at"] <= local_now(h) and pickup_status(h, p) == "reserved",
                                   store_id=store["id"])
    for sku in sorted({r["sku"] for r in state.stock}):  # pickups never hold more than is on the shelf
        assert all(row["reserved_for_pickup"] <= row["on_hand"] for row in h.ok("check_stock", sku=sku)["stores"])


def test_a_ten_times_larger_seed_works_and_options_are_validated():
    big = ServerHarness(server, options=ChainOptions(stores=80))
    state = big.state
    assert len(state.stores) == 80 and len(state.stock) > 80 * 25
    assert len({s["name"] for s in state.stores}) == 80
    big.run_examples()
    with pytest.raises(ValueError):
        ChainOptions(stores=0)


# -- stores and hours -------------------------------------------------------------------------------


def test_list_stores_by_city_and_open_now(h):
    everything = h.ok("list_stores")
    assert everything["total"] == 8 and everything["local_time"] == "2026-03-02T09:00"
    seattle = h.ok("list_stores", city="seattle")["stores"]
    assert seattle and {s["city"] for s in seattle} == {"Seattle"}
    open_now = {s["id"] for s in h.ok("list_stores", open_now=True)["stores"]}
    closed = {s["id"] for s in h.ok("list_stores", open_now=False)["stores"]}
    assert open_now and closed and open_now | closed == {s["id"] for s in everything["stores"]}
    assert not open_now & closed
    assert h.ok("list_stores", city="Atlantis")["stores"] == []


def test_open_now_follows_the_session_clock_and_the_weekly_hours(h):
    open_store, compact = stores(h)
    now = h.ok("check_store_open", store_id=compact["id"])
    assert (now["open"], now["hours_that_day"], now["opens_at"]) == (False, "10:00-19:00", "2026-03-02T10:00")
    assert h.ok("check_store_open", store_id=open_store["id"])["closes_at"] == "2026-03-02T21:00"
    cases = {"2026-03-02T10:00": True, "2026-03-02T18:59": True, "2026-03-02T19:00": False,
             "2026-03-08T12:00": False}  # closing time is closed; compact stores close on Sundays
    for at, is_open in cases.items():
        assert h.ok("check_store_open", store_id=compact["id"], at=at)["open"] is is_open, at
    sunday = h.ok("check_store_open", store_id=compact["id"], at="2026-03-08T12:00")
    assert (sunday["hours_that_day"], sunday["opens_at"]) == ("closed", "2026-03-09T10:00")
    h.state.advance_clock(3600)  # arrange: an hour passes
    assert h.ok("check_store_open", store_id=compact["id"])["open"]
    h.fails("check_store_open", "BAD_DATETIME", "INVALID_ARGUMENT", store_id=compact["id"],
            at="2026-02-30T10:00")


def test_get_store_shows_hours_waiting_pickups_and_open_transfers(h):
    state = h.state
    transfer = state.transfers.first(status="requested")
    store = h.ok("get_store", store_id=transfer["from_store_id"])
    assert set(store["hours"]) == set(retail_chain.WEEKDAYS)
    assert transfer["id"] in [t["id"] for t in store["open_transfers"]]
    assert {p["status"] for p in store["pickups_waiting"]} <= {"reserved", "expired"}
    assert store["pickups_waiting"]


def test_search_catalog(h):
    drills = h.ok("search_catalog", query="cordless drill")["products"]
    assert drills and all("Cordless Drill" in p["name"] for p in drills)
    paint = h.ok("search_catalog", category="paint", limit=2)
    assert len(paint["products"]) == 2 and paint["next_offset"] == 2
    assert {p["category"] for p in paint["products"]} == {"paint"}
    sku = h.state.products.first()["id"]
    assert [p["id"] for p in h.ok("search_catalog", query=sku.lower())["products"]] == [sku]
    assert h.ok("search_catalog", query="flux capacitor")["total"] == 0


# -- transfers --------------------------------------------------------------------------------------


def test_transfer_request_ship_receive_moves_the_stock(h):
    source, target = stores(h)
    sku = shared_sku(h, source, target)
    before_source, before_target = stock_at(h, source["id"], sku), stock_at(h, target["id"], sku)
    transfer = h.ok("request_transfer", from_store_id=source["id"], to_store_id=target["id"], sku=sku,
                    quantity=4)
    assert transfer["status"] == "requested"
    assert stock_at(h, source["id"], sku) == before_source  # nothing moves on request
    listed = h.ok("get_store", store_id=target["id"])["open_transfers"]
    transfer_id = next(t["id"] for t in listed if t["id"] == transfer["id"])
    shipped = h.ok("ship_transfer", transfer_id=transfer_id)
    assert shipped["transfer"]["status"] == "in_transit"
    assert shipped["source_stock"]["on_hand"] == before_source["on_hand"] - 4
    h.fails("ship_transfer", "TRANSFER_ALREADY_SHIPPED", "CONFLICT", transfer_id=transfer_id)
    received = h.ok("receive_transfer", transfer_id=transfer_id, received_quantity=3)
    assert (received["transfer"]["received_quantity"], received["transfer"]["short_quantity"]) == (3, 1)
    assert received["destination_stock"]["on_hand"] == before_target["on_hand"] + 3
    h.fails("receive_transfer", "TRANSFER_ALREADY_RECEIVED", "CONFLICT", transfer_id=transfer_id)
    h.fails("ship_transfer", "TRANSFER_ALREADY_RECEIVED", "CONFLICT", transfer_id=transfer_id)
    assert transfer_id not in [t["id"] for t in h.ok("get_store", store_id=target["id"])["open_transfers"]]


def test_transfer_rules(h):
    source, target = stores(h)
    sku = shared_sku(h, source, target)
    args = {"from_store_id": source["id"], "to_store_id": target["id"], "sku": sku}
    h.fails("request_transfer", "SAME_STORE_TRANSFER", "INVALID_ARGUMENT",
            **{**args, "to_store_id": source["id"]}, quantity=1)
    available = stock_at(h, source["id"], sku)["available"]
    error = h.fails("request_transfer", "INSUFFICIENT_STOCK", "FAILED_PRECONDITION", **args, quantity=available + 1)
    assert error["details"]["available"] == available
    state = h.state
    not_carried = next(p["id"] for p in state.products if not p["discontinued"]
                       and state.stock.first(store_id=target["id"], sku=p["id"]) is None)
    error = h.fails("request_transfer", "SKU_NOT_CARRIED", "FAILED_PRECONDITION", **{**args, "sku": not_carried},
                    quantity=1)
    assert error["details"]["store_id"] == target["id"]
    h.fails("request_transfer", "STORE_NOT_FOUND", "NOT_FOUND", **{**args, "to_store_id": "sto_missing"},
            quantity=1)
    h.fails("request_transfer", "PRODUCT_NOT_FOUND", "NOT_FOUND", **{**args, "sku": "XYZ-99999"}, quantity=1)


def test_receiving_needs_a_shipment_and_at_most_what_shipped(h):
    state = h.state
    requested, in_transit = state.transfers.first(status="requested"), state.transfers.first(status="in_transit")
    h.fails("receive_transfer", "TRANSFER_NOT_SHIPPED", "FAILED_PRECONDITION", transfer_id=requested["id"])
    error = h.fails("receive_transfer", "RECEIVED_QUANTITY_TOO_HIGH", "INVALID_ARGUMENT",
                    transfer_id=in_transit["id"], received_quantity=in_transit["quantity"] + 1)
    assert error["details"]["shipped"] == in_transit["quantity"]
    h.fails("ship_transfer", "TRANSFER_NOT_FOUND", "NOT_FOUND", transfer_id="trf_missing")


def test_shipping_rechecks_stock_held_for_pickups_since_the_request(h):
    source, target = stores(h)
    sku = shared_sku(h, source, target, minimum=2)
    available = stock_at(h, source["id"], sku)["available"]
    transfer = h.ok("request_transfer", from_store_id=source["id"], to_store_id=target["id"], sku=sku,
                    quantity=available)
    h.ok("reserve_pickup", store_id=source["id"], sku=sku, quantity=1, pickup_at="2026-03-02T17:00",
         customer_name="Lee Park", customer_phone="+1-206-555-0100")
    h.fails("ship_transfer", "INSUFFICIENT_STOCK", "FAILED_PRECONDITION", transfer_id=transfer["id"])


# -- pickups ----------------------------------------------------------------------------------------


def test_reserve_collect_flow_holds_then_takes_the_stock(h):
    open_store, _ = stores(h)
    sku = h.ok("search_catalog", query=h.state.products.first()["name"])["products"][0]["id"]
    row = next(r for r in h.ok("check_stock", sku=sku, in_stock_only=True)["stores"]
               if r["store_id"] == open_store["id"])
    pickup = h.ok("reserve_pickup", store_id=row["store_id"], sku=sku, quantity=2,
                  pickup_at="2026-03-02T09:30", customer_name="Ana Ruiz", customer_phone="+1-206-555-0188")
    assert (pickup["status"], pickup["hold_until"]) == ("reserved", "2026-03-04T09:30")
    held = stock_at(h, open_store["id"], sku)
    assert (held["on_hand"], held["reserved_for_pickup"], held["available"]) == (
        row["on_hand"], row["reserved_for_pickup"] + 2, row["available"] - 2)
    assert pickup["id"] in [p["id"] for p in h.ok("get_store", store_id=open_store["id"])["pickups_waiting"]]
    collected = h.ok("mark_picked_up", pickup_id=pickup["id"])
    assert collected["status"] == "collected"
    after = stock_at(h, open_store["id"], sku)
    assert (after["on_hand"], after["available"]) == (row["on_hand"] - 2, row["available"] - 2)
    h.fails("mark_picked_up", "PICKUP_ALREADY_COLLECTED", "CONFLICT", pickup_id=pickup["id"])
    h.fails("cancel_pickup", "PICKUP_ALREADY_COLLECTED", "FAILED_PRECONDITION", pickup_id=pickup["id"])


def test_cancelling_releases_the_stock(h):
    open_store, _ = stores(h)
    pickup = pickup_in(h, "reserved", open_store["id"], when="future")
    before = stock_at(h, open_store["id"], pickup["sku"])
    result = h.ok("cancel_pickup", pickup_id=pickup["id"])
    assert (result["pickup"]["status"], result["released_quantity"]) == ("cancelled", pickup["quantity"])
    assert stock_at(h, open_store["id"], pickup["sku"])["available"] == before["available"] + pickup["quantity"]
    h.fails("cancel_pickup", "PICKUP_ALREADY_CANCELLED", "CONFLICT", pickup_id=pickup["id"])
    h.fails("mark_picked_up", "PICKUP_CANCELLED", "FAILED_PRECONDITION", pickup_id=pickup["id"])


def test_pickup_expires_48_hours_after_its_slot(h):
    open_store, _ = stores(h)
    expired = pickup_in(h, "expired", open_store["id"])
    error = h.fails("mark_picked_up", "PICKUP_EXPIRED", "FAILED_PRECONDITION", pickup_id=expired["id"])
    assert error["details"]["hold_until"] == expired["hold_until"]
    h.ok("cancel_pickup", pickup_id=expired["id"])  # an expired pickup can still be cleared away

    sku = shared_sku(h, open_store, open_store, minimum=1)
    pickup = h.ok("reserve_pickup", store_id=open_store["id"], sku=sku, quantity=1,
                  pickup_at="2026-03-02T12:00", customer_name="Sam Ode", customer_phone="+1-206-555-0123")
    held = stock_at(h, open_store["id"], sku)["available"]
    h.state.advance_clock(51 * 3600)  # arrange: Wednesday 12:01, past the hold
    assert stock_at(h, open_store["id"], sku)["available"] == held + 1  # its unit is free again
    h.fails("mark_picked_up", "PICKUP_EXPIRED", "FAILED_PRECONDITION", pickup_id=pickup["id"])


def test_pickup_slot_rules(h):
    _, compact = stores(h)
    sku = shared_sku(h, compact, compact, minimum=1)
    base = {"store_id": compact["id"], "sku": sku, "quantity": 1, "customer_name": "Jo Lee",
            "customer_phone": "+1-206-555-0199"}
    for slot, hours in (("2026-03-02T09:30", "10:00-19:00"), ("2026-03-07T17:30", "10:00-17:00"),
                        ("2026-03-08T12:00", "closed")):
        error = h.fails("reserve_pickup", "STORE_CLOSED", "FAILED_PRECONDITION", **base, pickup_at=slot)
        assert error["details"]["hours"] == hours
    h.fails("reserve_pickup", "PICKUP_SLOT_IN_PAST", "INVALID_ARGUMENT", **base, pickup_at="2026-03-01T12:00")
    h.fails("reserve_pickup", "PICKUP_TOO_FAR_AHEAD", "INVALID_ARGUMENT", **base, pickup_at="2026-03-10T12:00")
    h.fails("reserve_pickup", "BAD_DATETIME", "INVALID_ARGUMENT", **base, pickup_at="2026-03-02T24:30")
    h.ok("reserve_pickup", **base, pickup_at="2026-03-07T16:30")


def test_pickup_stock_rules(h):
    open_store, compact = stores(h)
    state = h.state
    not_carried = next(p["id"] for p in state.products if not p["discontinued"]
                       and state.stock.first(store_id=compact["id"], sku=p["id"]) is None)
    base = {"store_id": compact["id"], "pickup_at": "2026-03-03T12:00", "customer_name": "Jo Lee",
            "customer_phone": "+1-206-555-0199"}
    h.fails("reserve_pickup", "SKU_NOT_CARRIED", "FAILED_PRECONDITION", **base, sku=not_carried, quantity=1)
    empty = state.stock.first(store_id=open_store["id"], on_hand=0)
    h.fails("reserve_pickup", "INSUFFICIENT_STOCK", "FAILED_PRECONDITION", **{**base, "store_id": open_store["id"]},
            sku=empty["sku"], quantity=1)
    h.fails("reserve_pickup", "PRODUCT_NOT_FOUND", "NOT_FOUND", **base, sku="ABC-00000", quantity=1)


def test_collection_needs_the_store_open(h):
    _, compact = stores(h)
    ready = pickup_in(h, "reserved", compact["id"], when="past")
    error = h.fails("mark_picked_up", "STORE_CLOSED", "FAILED_PRECONDITION", pickup_id=ready["id"])
    assert error["details"]["opens_at"] == "2026-03-02T10:00"
    h.state.advance_clock(3600)  # arrange: the store opens
    assert h.ok("mark_picked_up", pickup_id=ready["id"])["status"] == "collected"


def test_unknown_ids_fail_with_entity_specific_not_found(h):
    h.fails("get_store", "STORE_NOT_FOUND", "NOT_FOUND", store_id="sto_missing")
    h.fails("check_stock", "PRODUCT_NOT_FOUND", "NOT_FOUND", sku="TLS-00000")
    h.fails("cancel_pickup", "PICKUP_NOT_FOUND", "NOT_FOUND", pickup_id="pku_missing")
    h.fails("receive_transfer", "TRANSFER_NOT_FOUND", "NOT_FOUND", transfer_id="trf_missing")
    assert h.call("check_stock", {"sku": "drill"}).error["reason"] == "SCHEMA_VIOLATION"
