"""The retail_chain server: stores and hours, stock, transfers, pickups and their typed failures.

The session starts on Monday 2026-03-02 at 09:00 local time: store #0 keeps standard hours (open),
store #1 compact ones (opens at 10:00, closed on Sundays).
"""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import retail_chain
from prove_servers.retail_chain import ChainOptions, server

TOOLS = server.tools
ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


@pytest.fixture
def rt() -> ServerRuntime:
    return ServerRuntime(server)


@pytest.fixture
def sid(rt: ServerRuntime) -> str:
    return rt.new_session()


def ok(rt: ServerRuntime, sid: str, tool: str, **args) -> dict:
    result = rt.call(sid, tool, args)
    assert not result.is_error, result.error
    return result.data


def fails(rt: ServerRuntime, sid: str, tool: str, reason: str, expect_code: str = "FAILED_PRECONDITION",
          **args) -> dict:
    """The call fails with ``reason`` and ``code``, the tool declares the reason, and the tool
    itself wrote nothing before failing (not only the executor's rollback)."""
    before = rt.state_hash(sid)
    probe = State.from_snapshot(rt.state(sid).snapshot())
    with pytest.raises(ToolError):
        TOOLS[tool].fn(probe, **TOOLS[tool].validate(dict(args)))
    assert probe.state_hash() == before, f"{tool} wrote before failing with {reason}"
    result = rt.call(sid, tool, args)
    assert result.is_error, f"{tool} succeeded: {result.data}"
    assert (result.error["reason"], result.code) == (reason, expect_code), result.error
    assert reason in TOOLS[tool].spec.errors, f"{tool} does not declare {reason}"
    assert rt.state_hash(sid) == before
    return result.error


def example_args(rt: ServerRuntime, sid: str, example) -> dict:
    return dict(example(rt.state(sid)) if callable(example) else example)


def stores(rt, sid) -> tuple[dict, dict]:
    """(store #0, open now; store #1, closed now)."""
    all_stores = rt.state(sid).stores.all()
    return all_stores[0], all_stores[1]


def pickup_in(rt, sid, status: str, store_id: str, when: str = "any") -> dict:
    state = rt.state(sid)
    now = retail_chain._fmt(retail_chain._local_now(state))
    for p in state.pickups.where(store_id=store_id):
        slot_ok = when == "any" or (p["pickup_at"] <= now if when == "past" else p["pickup_at"] > now)
        if retail_chain._pickup_status(state, p) == status and slot_ok:
            return p
    raise LookupError(status)


def stock_at(rt, sid, store_id: str, sku: str) -> dict:
    rows = ok(rt, sid, "check_stock", sku=sku)["stores"]
    return next(r for r in rows if r["store_id"] == store_id)


def shared_sku(rt, sid, source: dict, target: dict, minimum: int = 5) -> str:
    state = rt.state(sid)
    for record in state.stock.where(store_id=source["id"]):
        if state.stock.first(store_id=target["id"], sku=record["sku"]) and stock_at(
                rt, sid, source["id"], record["sku"])["available"] >= minimum:
            return record["sku"]
    raise LookupError("no shared SKU")


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_11_tools_each_described_with_examples():
    assert set(TOOLS) == {
        "list_stores", "get_store", "check_store_open", "search_catalog", "check_stock", "request_transfer",
        "ship_transfer", "receive_transfer", "reserve_pickup", "cancel_pickup", "mark_picked_up",
    }
    assert (server.name, server.domain) == ("retail_chain", "commerce")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_and_entities_match_what_tools_do():
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


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(retail_chain)
    registered = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- examples, read-only and idempotent tools -------------------------------------------------------


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_on_a_fresh_session(rt, sid, tool, index):
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
        assert rt.call(sid, name, args).is_error, name  # refused: already shipped, received, cancelled...
        assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    a, b, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert a.state_hash(a.new_session()) == b.state_hash(b.new_session())
    assert other.state_hash(other.new_session()) != a.state_hash(a.new_session())


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_seed_has_every_scenario_the_tools_need(seed):
    state = server.build_state(seed)
    now = retail_chain._local_now(state)
    first, second = state.stores.all()[:2]
    assert retail_chain._is_open(first, now) and not retail_chain._is_open(second, now)
    assert len(state.products) == retail_chain.CATALOG_SIZE
    assert state.products.first(discontinued=True) and not state.stock.where(
        sku=state.products.first(discontinued=True)["id"])
    assert state.stock.where(lambda r: r["on_hand"] == 0)
    assert any(state.stock.first(store_id=s["id"], sku=p["id"]) is None for s in state.stores for p in state.products
               if not p["discontinued"])
    assert {t["status"] for t in state.transfers} == {"requested", "in_transit", "received"}
    statuses = {retail_chain._pickup_status(state, p) for p in state.pickups}
    assert statuses == {"reserved", "expired", "collected", "cancelled"}
    for store in (first, second):  # a pickup ready at an open store and one at a closed store
        assert state.pickups.first(lambda p: p["pickup_at"] <= retail_chain._fmt(now)
                                   and retail_chain._pickup_status(state, p) == "reserved", store_id=store["id"])
    for record in state.stock:  # pickups never hold more than is on the shelf
        assert retail_chain._reserved(state, record["store_id"], record["sku"]) <= record["on_hand"]


def test_a_ten_times_larger_seed_works():
    big = ServerRuntime(server, options=ChainOptions(stores=80))
    state = big.state(big.new_session())
    assert len(state.stores) == 80 and len(state.stock) > 80 * 25
    assert len({s["name"] for s in state.stores}) == 80
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        ChainOptions(stores=0)


# -- stores and hours -------------------------------------------------------------------------------


def test_list_stores_by_city_and_open_now(rt, sid):
    everything = ok(rt, sid, "list_stores")
    assert everything["total"] == 8 and everything["local_time"] == "2026-03-02T09:00"
    seattle = ok(rt, sid, "list_stores", city="seattle")["stores"]
    assert seattle and {s["city"] for s in seattle} == {"Seattle"}
    open_now = {s["id"] for s in ok(rt, sid, "list_stores", open_now=True)["stores"]}
    closed = {s["id"] for s in ok(rt, sid, "list_stores", open_now=False)["stores"]}
    assert open_now and closed and open_now | closed == {s["id"] for s in everything["stores"]}
    assert not open_now & closed
    assert ok(rt, sid, "list_stores", city="Atlantis")["stores"] == []


def test_open_now_follows_the_session_clock_and_the_weekly_hours(rt, sid):
    open_store, compact = stores(rt, sid)
    now = ok(rt, sid, "check_store_open", store_id=compact["id"])
    assert (now["open"], now["hours_that_day"], now["opens_at"]) == (False, "10:00-19:00", "2026-03-02T10:00")
    assert ok(rt, sid, "check_store_open", store_id=open_store["id"])["closes_at"] == "2026-03-02T21:00"
    cases = {"2026-03-02T10:00": True, "2026-03-02T18:59": True, "2026-03-02T19:00": False,
             "2026-03-08T12:00": False}  # closing time is closed; compact stores close on Sundays
    for at, is_open in cases.items():
        assert ok(rt, sid, "check_store_open", store_id=compact["id"], at=at)["open"] is is_open, at
    sunday = ok(rt, sid, "check_store_open", store_id=compact["id"], at="2026-03-08T12:00")
    assert (sunday["hours_that_day"], sunday["opens_at"]) == ("closed", "2026-03-09T10:00")
    rt.state(sid).advance_clock(3600)  # arrange: an hour passes
    assert ok(rt, sid, "check_store_open", store_id=compact["id"])["open"]
    fails(rt, sid, "check_store_open", "BAD_DATETIME", "INVALID_ARGUMENT", store_id=compact["id"],
          at="2026-02-30T10:00")


def test_get_store_shows_hours_waiting_pickups_and_open_transfers(rt, sid):
    state = rt.state(sid)
    transfer = state.transfers.first(status="requested")
    store = ok(rt, sid, "get_store", store_id=transfer["from_store_id"])
    assert set(store["hours"]) == set(retail_chain.WEEKDAYS)
    assert transfer["id"] in [t["id"] for t in store["open_transfers"]]
    assert {p["status"] for p in store["pickups_waiting"]} <= {"reserved", "expired"}
    assert store["pickups_waiting"]


def test_search_catalog(rt, sid):
    drills = ok(rt, sid, "search_catalog", query="cordless drill")["products"]
    assert drills and all("Cordless Drill" in p["name"] for p in drills)
    paint = ok(rt, sid, "search_catalog", category="paint", limit=2)
    assert len(paint["products"]) == 2 and paint["next_offset"] == 2
    assert {p["category"] for p in paint["products"]} == {"paint"}
    sku = rt.state(sid).products.first()["id"]
    assert [p["id"] for p in ok(rt, sid, "search_catalog", query=sku.lower())["products"]] == [sku]
    assert ok(rt, sid, "search_catalog", query="flux capacitor")["total"] == 0


# -- transfers --------------------------------------------------------------------------------------


def test_transfer_request_ship_receive_moves_the_stock(rt, sid):
    source, target = stores(rt, sid)
    sku = shared_sku(rt, sid, source, target)
    before_source, before_target = stock_at(rt, sid, source["id"], sku), stock_at(rt, sid, target["id"], sku)
    transfer = ok(rt, sid, "request_transfer", from_store_id=source["id"], to_store_id=target["id"], sku=sku,
                  quantity=4)
    assert transfer["status"] == "requested"
    assert stock_at(rt, sid, source["id"], sku) == before_source  # nothing moves on request
    listed = ok(rt, sid, "get_store", store_id=target["id"])["open_transfers"]
    transfer_id = next(t["id"] for t in listed if t["id"] == transfer["id"])
    shipped = ok(rt, sid, "ship_transfer", transfer_id=transfer_id)
    assert shipped["transfer"]["status"] == "in_transit"
    assert shipped["source_stock"]["on_hand"] == before_source["on_hand"] - 4
    fails(rt, sid, "ship_transfer", "TRANSFER_ALREADY_SHIPPED", "CONFLICT", transfer_id=transfer_id)
    received = ok(rt, sid, "receive_transfer", transfer_id=transfer_id, received_quantity=3)
    assert (received["transfer"]["received_quantity"], received["transfer"]["short_quantity"]) == (3, 1)
    assert received["destination_stock"]["on_hand"] == before_target["on_hand"] + 3
    fails(rt, sid, "receive_transfer", "TRANSFER_ALREADY_RECEIVED", "CONFLICT", transfer_id=transfer_id)
    fails(rt, sid, "ship_transfer", "TRANSFER_ALREADY_RECEIVED", "CONFLICT", transfer_id=transfer_id)
    assert transfer_id not in [t["id"] for t in ok(rt, sid, "get_store", store_id=target["id"])["open_transfers"]]


def test_transfer_rules(rt, sid):
    source, target = stores(rt, sid)
    sku = shared_sku(rt, sid, source, target)
    args = {"from_store_id": source["id"], "to_store_id": target["id"], "sku": sku}
    fails(rt, sid, "request_transfer", "SAME_STORE_TRANSFER", "INVALID_ARGUMENT",
          **{**args, "to_store_id": source["id"]}, quantity=1)
    available = stock_at(rt, sid, source["id"], sku)["available"]
    error = fails(rt, sid, "request_transfer", "INSUFFICIENT_STOCK", **args, quantity=available + 1)
    assert error["details"]["available"] == available
    state = rt.state(sid)
    not_carried = next(p["id"] for p in state.products if not p["discontinued"]
                       and state.stock.first(store_id=target["id"], sku=p["id"]) is None)
    error = fails(rt, sid, "request_transfer", "SKU_NOT_CARRIED", **{**args, "sku": not_carried}, quantity=1)
    assert error["details"]["store_id"] == target["id"]
    fails(rt, sid, "request_transfer", "STORE_NOT_FOUND", "NOT_FOUND", **{**args, "to_store_id": "sto_missing"},
          quantity=1)
    fails(rt, sid, "request_transfer", "PRODUCT_NOT_FOUND", "NOT_FOUND", **{**args, "sku": "XYZ-99999"}, quantity=1)


def test_receiving_needs_a_shipment_and_at_most_what_shipped(rt, sid):
    state = rt.state(sid)
    requested, in_transit = state.transfers.first(status="requested"), state.transfers.first(status="in_transit")
    fails(rt, sid, "receive_transfer", "TRANSFER_NOT_SHIPPED", transfer_id=requested["id"])
    error = fails(rt, sid, "receive_transfer", "RECEIVED_QUANTITY_TOO_HIGH", "INVALID_ARGUMENT",
                  transfer_id=in_transit["id"], received_quantity=in_transit["quantity"] + 1)
    assert error["details"]["shipped"] == in_transit["quantity"]
    fails(rt, sid, "ship_transfer", "TRANSFER_NOT_FOUND", "NOT_FOUND", transfer_id="trf_missing")


def test_shipping_rechecks_stock_held_for_pickups_since_the_request(rt, sid):
    source, target = stores(rt, sid)
    sku = shared_sku(rt, sid, source, target, minimum=2)
    available = stock_at(rt, sid, source["id"], sku)["available"]
    transfer = ok(rt, sid, "request_transfer", from_store_id=source["id"], to_store_id=target["id"], sku=sku,
                  quantity=available)
    ok(rt, sid, "reserve_pickup", store_id=source["id"], sku=sku, quantity=1, pickup_at="2026-03-02T17:00",
       customer_name="Lee Park", customer_phone="+1-206-555-0100")
    fails(rt, sid, "ship_transfer", "INSUFFICIENT_STOCK", transfer_id=transfer["id"])


# -- pickups ----------------------------------------------------------------------------------------


def test_reserve_collect_flow_holds_then_takes_the_stock(rt, sid):
    open_store, _ = stores(rt, sid)
    sku = ok(rt, sid, "search_catalog", query=rt.state(sid).products.first()["name"])["products"][0]["id"]
    row = next(r for r in ok(rt, sid, "check_stock", sku=sku, in_stock_only=True)["stores"]
               if r["store_id"] == open_store["id"])
    pickup = ok(rt, sid, "reserve_pickup", store_id=row["store_id"], sku=sku, quantity=2,
                pickup_at="2026-03-02T09:30", customer_name="Ana Ruiz", customer_phone="+1-206-555-0188")
    assert (pickup["status"], pickup["hold_until"]) == ("reserved", "2026-03-04T09:30")
    held = stock_at(rt, sid, open_store["id"], sku)
    assert (held["on_hand"], held["reserved_for_pickup"], held["available"]) == (
        row["on_hand"], row["reserved_for_pickup"] + 2, row["available"] - 2)
    assert pickup["id"] in [p["id"] for p in ok(rt, sid, "get_store", store_id=open_store["id"])["pickups_waiting"]]
    collected = ok(rt, sid, "mark_picked_up", pickup_id=pickup["id"])
    assert collected["status"] == "collected"
    after = stock_at(rt, sid, open_store["id"], sku)
    assert (after["on_hand"], after["available"]) == (row["on_hand"] - 2, row["available"] - 2)
    fails(rt, sid, "mark_picked_up", "PICKUP_ALREADY_COLLECTED", "CONFLICT", pickup_id=pickup["id"])
    fails(rt, sid, "cancel_pickup", "PICKUP_ALREADY_COLLECTED", pickup_id=pickup["id"])


def test_cancelling_releases_the_stock(rt, sid):
    open_store, _ = stores(rt, sid)
    pickup = pickup_in(rt, sid, "reserved", open_store["id"], when="future")
    before = stock_at(rt, sid, open_store["id"], pickup["sku"])
    result = ok(rt, sid, "cancel_pickup", pickup_id=pickup["id"])
    assert (result["pickup"]["status"], result["released_quantity"]) == ("cancelled", pickup["quantity"])
    assert stock_at(rt, sid, open_store["id"], pickup["sku"])["available"] == before["available"] + pickup["quantity"]
    fails(rt, sid, "cancel_pickup", "PICKUP_ALREADY_CANCELLED", "CONFLICT", pickup_id=pickup["id"])
    fails(rt, sid, "mark_picked_up", "PICKUP_CANCELLED", pickup_id=pickup["id"])


def test_pickup_expires_48_hours_after_its_slot(rt, sid):
    open_store, _ = stores(rt, sid)
    expired = pickup_in(rt, sid, "expired", open_store["id"])
    error = fails(rt, sid, "mark_picked_up", "PICKUP_EXPIRED", pickup_id=expired["id"])
    assert error["details"]["hold_until"] == expired["hold_until"]
    ok(rt, sid, "cancel_pickup", pickup_id=expired["id"])  # an expired pickup can still be cleared away

    sku = shared_sku(rt, sid, open_store, open_store, minimum=1)
    pickup = ok(rt, sid, "reserve_pickup", store_id=open_store["id"], sku=sku, quantity=1,
                pickup_at="2026-03-02T12:00", customer_name="Sam Ode", customer_phone="+1-206-555-0123")
    held = stock_at(rt, sid, open_store["id"], sku)["available"]
    rt.state(sid).advance_clock(51 * 3600)  # arrange: Wednesday 12:01, past the hold
    assert stock_at(rt, sid, open_store["id"], sku)["available"] == held + 1  # its unit is free again
    fails(rt, sid, "mark_picked_up", "PICKUP_EXPIRED", pickup_id=pickup["id"])


def test_pickup_slot_rules(rt, sid):
    _, compact = stores(rt, sid)
    sku = shared_sku(rt, sid, compact, compact, minimum=1)
    base = {"store_id": compact["id"], "sku": sku, "quantity": 1, "customer_name": "Jo Lee",
            "customer_phone": "+1-206-555-0199"}
    for slot, hours in (("2026-03-02T09:30", "10:00-19:00"), ("2026-03-07T17:30", "10:00-17:00"),
                        ("2026-03-08T12:00", "closed")):
        error = fails(rt, sid, "reserve_pickup", "STORE_CLOSED", **base, pickup_at=slot)
        assert error["details"]["hours"] == hours
    fails(rt, sid, "reserve_pickup", "PICKUP_SLOT_IN_PAST", "INVALID_ARGUMENT", **base, pickup_at="2026-03-01T12:00")
    fails(rt, sid, "reserve_pickup", "PICKUP_TOO_FAR_AHEAD", "INVALID_ARGUMENT", **base, pickup_at="2026-03-10T12:00")
    fails(rt, sid, "reserve_pickup", "BAD_DATETIME", "INVALID_ARGUMENT", **base, pickup_at="2026-03-02T24:30")
    ok(rt, sid, "reserve_pickup", **base, pickup_at="2026-03-07T16:30")


def test_pickup_stock_rules(rt, sid):
    open_store, compact = stores(rt, sid)
    state = rt.state(sid)
    not_carried = next(p["id"] for p in state.products if not p["discontinued"]
                       and state.stock.first(store_id=compact["id"], sku=p["id"]) is None)
    base = {"store_id": compact["id"], "pickup_at": "2026-03-03T12:00", "customer_name": "Jo Lee",
            "customer_phone": "+1-206-555-0199"}
    fails(rt, sid, "reserve_pickup", "SKU_NOT_CARRIED", **base, sku=not_carried, quantity=1)
    empty = state.stock.first(store_id=open_store["id"], on_hand=0)
    fails(rt, sid, "reserve_pickup", "INSUFFICIENT_STOCK", **{**base, "store_id": open_store["id"]}, sku=empty["sku"],
          quantity=1)
    fails(rt, sid, "reserve_pickup", "PRODUCT_NOT_FOUND", "NOT_FOUND", **base, sku="ABC-00000", quantity=1)


def test_collection_needs_the_store_open(rt, sid):
    _, compact = stores(rt, sid)
    ready = pickup_in(rt, sid, "reserved", compact["id"], when="past")
    error = fails(rt, sid, "mark_picked_up", "STORE_CLOSED", pickup_id=ready["id"])
    assert error["details"]["opens_at"] == "2026-03-02T10:00"
    rt.state(sid).advance_clock(3600)  # arrange: the store opens
    assert ok(rt, sid, "mark_picked_up", pickup_id=ready["id"])["status"] == "collected"


def test_unknown_ids_fail_with_entity_specific_not_found(rt, sid):
    fails(rt, sid, "get_store", "STORE_NOT_FOUND", "NOT_FOUND", store_id="sto_missing")
    fails(rt, sid, "check_stock", "PRODUCT_NOT_FOUND", "NOT_FOUND", sku="TLS-00000")
    fails(rt, sid, "cancel_pickup", "PICKUP_NOT_FOUND", "NOT_FOUND", pickup_id="pku_missing")
    fails(rt, sid, "receive_transfer", "TRANSFER_NOT_FOUND", "NOT_FOUND", transfer_id="trf_missing")
    assert rt.call(sid, "check_stock", {"sku": "drill"}).error["reason"] == "SCHEMA_VIOLATION"
