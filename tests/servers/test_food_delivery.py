"""The food_delivery server: restaurants and hours, menus with options, the one-restaurant cart,
promos, checkout, the clock-driven order timeline, ratings and their typed failures.

The session starts on Monday 2026-03-02 at 09:00 local time: restaurant #0 is an all-day pizzeria
(open; the seeded cart is there), #1 a breakfast café (07:00-15:00), #2 a sushi bar closed on Mondays.
"""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import food_delivery
from prove_servers.food_delivery import DeliveryOptions, server

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


def restaurants(rt, sid) -> tuple[dict, dict, dict]:
    """(#0 all-day pizzeria, #1 breakfast café, #2 sushi bar closed on Mondays)."""
    first, second, third = rt.state(sid).restaurants.all()[:3]
    return first, second, third


def address(rt, sid, label: str) -> str:
    return next(a["id"] for a in ok(rt, sid, "list_addresses")["addresses"] if a["label"] == label)


def dish(rt, sid, restaurant_id: str, *, sizes: bool | None = None, add_ons: bool | None = None,
         available: bool = True) -> dict:
    for item in rt.state(sid).menu_items.where(restaurant_id=restaurant_id, available=available):
        if (sizes is None or bool(item["sizes"]) == sizes) and (add_ons is None or bool(item["add_ons"]) == add_ons):
            return item
    raise LookupError("no such dish")


def order_in(rt, sid, status: str) -> dict:
    state = rt.state(sid)
    return next(o for o in state.orders.all() if food_delivery._order_status(state, o) == status)


def empty_cart(rt, sid) -> None:
    for line in rt.state(sid).cart_items.all():
        ok(rt, sid, "remove_from_cart", cart_item_id=line["id"])


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_17_tools_each_described_with_examples():
    assert set(TOOLS) == {
        "search_restaurants", "get_restaurant", "get_opening_hours", "get_menu", "get_menu_item", "add_to_cart",
        "update_cart_item", "remove_from_cart", "view_cart", "apply_promo", "list_addresses", "checkout",
        "get_order", "list_orders", "cancel_order", "track_delivery", "rate_order",
    }
    assert (server.name, server.domain) == ("food_delivery", "lifestyle")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_and_entities_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"search_restaurants", "get_restaurant", "get_opening_hours", "get_menu", "get_menu_item",
                         "view_cart", "list_addresses", "get_order", "list_orders", "track_delivery"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"remove_from_cart", "cancel_order"}
    assert not TOOLS["add_to_cart"].spec.annotations.idempotent and not TOOLS["checkout"].spec.annotations.idempotent
    for name, tool in TOOLS.items():
        assert tool.spec.annotations.read_only or tool.spec.produces or tool.spec.mutates, name
    assert TOOLS["checkout"].spec.produces == ("order",)
    assert TOOLS["checkout"].spec.entity_params() == {"address_id": "address"}
    assert TOOLS["add_to_cart"].spec.entity_params() == {"menu_item_id": "menu_item"}


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(food_delivery)
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
        for example in tool.examples:
            sid = rt.new_session()
            args = example_args(rt, sid, example)
            ok(rt, sid, name, **args)
            once = rt.state_hash(sid)
            rt.call(sid, name, args)  # may be refused (already rated, cancelled, removed) but changes nothing
            assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    a, b, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert a.state_hash(a.new_session()) == b.state_hash(b.new_session())
    assert other.state_hash(other.new_session()) != a.state_hash(a.new_session())


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_seed_has_every_scenario_the_tools_need(seed):
    state = server.build_state(seed)
    now = food_delivery._local_now(state)
    first, second, third = state.restaurants.all()[:3]
    assert food_delivery._is_open(first, now) and food_delivery._is_open(second, now)
    assert not food_delivery._is_open(third, now) and third["hours"]["monday"] == []
    assert state.menu_items.first(restaurant_id=first["id"], available=False)
    assert state.menu_items.first(lambda i: bool(i["sizes"] and i["add_ons"]), restaurant_id=first["id"])
    assert {line["restaurant_id"] for line in state.cart_items} == {first["id"]}
    statuses = [food_delivery._order_status(state, o) for o in state.orders]
    assert set(statuses) == {"placed", "preparing", "out_for_delivery", "delivered", "cancelled"}
    views = [food_delivery._order_view(state, o) for o in state.orders]
    assert any(v["rated"] for v in views) and any(v["rateable"] for v in views)
    home, _work, parents = state.addresses.all()
    assert all(food_delivery._distance_km(r, parents) > r["delivery_radius_km"] for r in state.restaurants)
    assert food_delivery._distance_km(first, home) <= first["delivery_radius_km"]
    for order in state.orders:  # every order was placed while its restaurant was open
        placed = food_delivery.dt.datetime.strptime(order["timeline"]["placed"], food_delivery.TIME_FORMAT)
        assert food_delivery._is_open(state.restaurants.get(order["restaurant_id"]), placed)


def test_a_ten_times_larger_seed_works():
    big = ServerRuntime(server, options=DeliveryOptions(restaurants=240))
    state = big.state(big.new_session())
    assert len(state.restaurants) == 240 and len({r["name"] for r in state.restaurants}) == 240
    assert len(state.menu_items) > 240 * 5 and len(state.orders) > 30
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        DeliveryOptions(restaurants=0)


# -- the ordering flow, with ids passed from one call to the next -------------------------------------


def test_search_menu_cart_checkout_track_rate_flow(rt, sid):
    home = address(rt, sid, "home")
    found = ok(rt, sid, "search_restaurants", cuisine="breakfast", open_now=True, address_id=home, limit=50)
    café = next(r for r in found["restaurants"] if r["id"] == restaurants(rt, sid)[1]["id"])
    assert café["delivers_to_address"] and café["open_now"] and café["closes_at"] == "2026-03-02T15:00"
    menu = ok(rt, sid, "get_menu", restaurant_id=café["id"], category="mains")["items"]
    dish_id = next(i["id"] for i in menu if i["has_add_ons"] and i["available"])
    item = ok(rt, sid, "get_menu_item", menu_item_id=dish_id)
    add_ons = [a["id"] for a in item["add_ons"][:2]]
    price = round(item["price"] + sum(a["price_delta"] for a in item["add_ons"][:2]), 2)
    added = ok(rt, sid, "add_to_cart", menu_item_id=dish_id, quantity=2, add_ons=add_ons, start_new_cart=True)
    assert (added["added"]["unit_price"], added["cart"]["restaurant"]["id"]) == (price, café["id"])
    assert [line["menu_item_id"] for line in added["cart"]["items"]] == [dish_id]  # the pizza cart was replaced
    cart = ok(rt, sid, "apply_promo", code="welcome5")
    assert (cart["promo"], cart["discount"]) == ({"code": "WELCOME5", "applied": True, "problem": None}, 5.0)

    order = ok(rt, sid, "checkout", address_id=home, tip=3.5)
    assert (order["status"], order["cancellable"], order["tip"]) == ("placed", True, 3.5)
    assert order["promo_code"] == "WELCOME5"
    assert order["total"] == round(cart["total"] + 3.5, 2)
    assert ok(rt, sid, "view_cart")["items"] == []
    assert ok(rt, sid, "list_orders", status="placed")["orders"][0]["id"] == order["id"]
    assert ok(rt, sid, "get_order", order_id=order["id"])["delivery_instructions"] == "Buzz 4B"

    seen = []
    for _ in range(90):  # the clock moves a minute per write; reads show the order moving along
        status = ok(rt, sid, "track_delivery", order_id=order["id"])["status"]
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == "delivered":
            break
        rt.state(sid).advance_clock(60)
    assert seen == ["placed", "confirmed", "preparing", "out_for_delivery", "delivered"]
    tracked = ok(rt, sid, "track_delivery", order_id=order["id"])
    assert tracked["minutes_remaining"] == 0 and tracked["courier"] == order["courier"]
    before = rt.state(sid).restaurants.get(café["id"])
    rated = ok(rt, sid, "rate_order", order_id=order["id"], food_stars=1, delivery_stars=5)
    assert rated["restaurant_rating_count"] == before["rating_count"] + 1
    assert rated["restaurant_rating"] == round((before["rating"] * before["rating_count"] + 1) / rated[
        "restaurant_rating_count"], 2)
    fails(rt, sid, "rate_order", "ALREADY_RATED", "CONFLICT", order_id=order["id"], food_stars=5)


def test_cart_lines_merge_and_update(rt, sid):
    pizzeria = restaurants(rt, sid)[0]
    pizza = dish(rt, sid, pizzeria["id"], sizes=True, add_ons=True)
    args = {"menu_item_id": pizza["id"], "size": "medium", "add_ons": ["mushrooms"]}
    first = ok(rt, sid, "add_to_cart", **args)["added"]
    again = ok(rt, sid, "add_to_cart", **args, quantity=2)["added"]
    assert (again["id"], again["quantity"]) == (first["id"], 3)
    other = ok(rt, sid, "add_to_cart", **{**args, "size": "small"})["added"]
    assert other["id"] != first["id"] and other["unit_price"] == round(first["unit_price"] - 3.0, 2)
    cart = ok(rt, sid, "update_cart_item", cart_item_id=first["id"], quantity=1)
    assert next(line for line in cart["items"] if line["id"] == first["id"])["quantity"] == 1
    error = fails(rt, sid, "add_to_cart", "MAX_QUANTITY_EXCEEDED", "INVALID_ARGUMENT", **args, quantity=20)
    assert "20" in error["message"]


def test_removing_the_last_line_drops_the_promo(rt, sid):
    ok(rt, sid, "apply_promo", code="WELCOME5")
    empty_cart(rt, sid)
    cart = ok(rt, sid, "view_cart")
    assert (cart["restaurant"], cart["promo"], cart["total"]) == (None, None, 0.0)
    fails(rt, sid, "apply_promo", "CART_EMPTY", code="WELCOME5")
    fails(rt, sid, "checkout", "CART_EMPTY", address_id=address(rt, sid, "home"))
    fails(rt, sid, "remove_from_cart", "CART_ITEM_NOT_FOUND", "NOT_FOUND", cart_item_id="crt_missing")


def test_search_filters_and_opening_hours(rt, sid):
    vegan = ok(rt, sid, "search_restaurants", dietary="vegan", limit=50)["restaurants"]
    assert vegan and all("vegan" in r["dietary"] for r in vegan)
    ratings = [r["rating"] for r in vegan]
    assert ratings == sorted(ratings, reverse=True)
    open_now = ok(rt, sid, "search_restaurants", open_now=True, limit=50)["restaurants"]
    assert open_now and all(r["open_now"] for r in open_now)
    closed = ok(rt, sid, "search_restaurants", open_now=False, limit=50)["restaurants"]
    assert {r["id"] for r in closed}.isdisjoint(r["id"] for r in open_now)
    assert ok(rt, sid, "search_restaurants", address_id=address(rt, sid, "parents"))["total"] == 0
    near = ok(rt, sid, "search_restaurants", address_id=address(rt, sid, "home"), sort="delivery_time",
              limit=50)["restaurants"]
    minutes = [r["estimated_minutes"] for r in near]
    assert minutes == sorted(minutes) and all(r["delivers_to_address"] for r in near)
    sushi = restaurants(rt, sid)[2]
    hours = ok(rt, sid, "get_opening_hours", restaurant_id=sushi["id"])
    assert (hours["open_now"], hours["today"], hours["opens_at"]) == (False, "closed", "2026-03-03T11:30")
    assert hours["hours"]["tuesday"] == [{"open": "11:30", "close": "14:30"}, {"open": "17:00", "close": "22:00"}]
    far = ok(rt, sid, "get_restaurant", restaurant_id=sushi["id"], address_id=address(rt, sid, "parents"))
    assert not far["delivers_to_address"] and far["distance_km"] > far["delivery_radius_km"]


# -- typed failures, each in the state that causes it ------------------------------------------------


def test_cart_from_other_restaurant(rt, sid):
    café = restaurants(rt, sid)[1]
    toast = dish(rt, sid, café["id"], sizes=False)
    error = fails(rt, sid, "add_to_cart", "CART_FROM_OTHER_RESTAURANT", "CONFLICT", menu_item_id=toast["id"])
    assert error["details"]["cart_restaurant_id"] == restaurants(rt, sid)[0]["id"]
    ok(rt, sid, "apply_promo", code="WELCOME5")
    cart = ok(rt, sid, "add_to_cart", menu_item_id=toast["id"], start_new_cart=True)["cart"]
    assert [line["menu_item_id"] for line in cart["items"]] == [toast["id"]] and cart["promo"] is None


def test_invalid_options(rt, sid):
    pizzeria = restaurants(rt, sid)[0]
    pizza = dish(rt, sid, pizzeria["id"], sizes=True, add_ons=True)
    plain = dish(rt, sid, pizzeria["id"], sizes=False, add_ons=False)
    cases = [
        {"menu_item_id": pizza["id"]},  # a size is required
        {"menu_item_id": pizza["id"], "size": "huge"},
        {"menu_item_id": plain["id"], "size": "large"},
        {"menu_item_id": pizza["id"], "size": "small", "add_ons": ["pineapple"]},
        {"menu_item_id": pizza["id"], "size": "small", "add_ons": ["olives", "olives"]},
        {"menu_item_id": pizza["id"], "size": "small", "add_ons": [a["id"] for a in pizza["add_ons"][:5]]},
        {"menu_item_id": plain["id"], "add_ons": ["extra_cheese"]},
    ]
    for args in cases:
        error = fails(rt, sid, "add_to_cart", "INVALID_OPTION", "INVALID_ARGUMENT", **args)
        assert set(error["details"]) == {"sizes", "add_ons", "max_add_ons"}
    assert fails(rt, sid, "add_to_cart", "INVALID_OPTION", "INVALID_ARGUMENT", **cases[0])["details"]["sizes"] == [
        "large", "medium", "small"]


def test_item_unavailable(rt, sid):
    pizzeria = restaurants(rt, sid)[0]
    sold_out = dish(rt, sid, pizzeria["id"], available=False)
    fails(rt, sid, "add_to_cart", "ITEM_UNAVAILABLE", menu_item_id=sold_out["id"])
    line = rt.state(sid).cart_items.first()
    rt.state(sid).menu_items.update(line["menu_item_id"], available=False)  # arrange: it sold out meanwhile
    error = fails(rt, sid, "checkout", "ITEM_UNAVAILABLE", address_id=address(rt, sid, "home"))
    assert error["details"]["cart_item_id"] == line["id"]


def test_restaurant_closed(rt, sid):
    _, café, sushi = restaurants(rt, sid)
    roll = dish(rt, sid, sushi["id"], sizes=False)
    error = fails(rt, sid, "add_to_cart", "RESTAURANT_CLOSED", menu_item_id=roll["id"], start_new_cart=True)
    assert error["details"]["opens_at"] == "2026-03-03T11:30"
    home = address(rt, sid, "home")
    ok(rt, sid, "add_to_cart", menu_item_id=dish(rt, sid, café["id"], sizes=False)["id"], quantity=3,
       start_new_cart=True)
    rt.state(sid).advance_clock(359 * 60)  # arrange: 15:00 sharp (09:01 after the write), closing time
    error = fails(rt, sid, "checkout", "RESTAURANT_CLOSED", address_id=home)
    assert error["details"]["opens_at"] == "2026-03-03T07:00"


def test_below_minimum_order(rt, sid):
    pizzeria = restaurants(rt, sid)[0]
    drink = next(line for line in rt.state(sid).cart_items.all() if line["size"] == "regular")
    for line in rt.state(sid).cart_items.all():
        if line["id"] != drink["id"]:
            ok(rt, sid, "remove_from_cart", cart_item_id=line["id"])
    cart = ok(rt, sid, "update_cart_item", cart_item_id=drink["id"], quantity=1)
    assert cart["below_minimum_by"] == round(pizzeria["minimum_order"] - drink["unit_price"], 2)
    error = fails(rt, sid, "checkout", "BELOW_MINIMUM_ORDER", address_id=address(rt, sid, "home"))
    assert error["details"] == {"minimum": pizzeria["minimum_order"], "short_by": cart["below_minimum_by"]}


def test_outside_delivery_area(rt, sid):
    error = fails(rt, sid, "checkout", "OUTSIDE_DELIVERY_AREA", address_id=address(rt, sid, "parents"))
    assert error["details"]["distance_km"] > error["details"]["radius_km"]
    fails(rt, sid, "checkout", "ADDRESS_NOT_FOUND", "NOT_FOUND", address_id="adr_missing")
    assert ok(rt, sid, "checkout", address_id=address(rt, sid, "work"))["deliver_to"]["label"] == "work"


def test_promo_rules(rt, sid):
    fails(rt, sid, "apply_promo", "PROMO_EXPIRED", code="WINTER20")
    fails(rt, sid, "apply_promo", "PROMO_NOT_FOUND", "NOT_FOUND", code="FREEFOOD")
    error = fails(rt, sid, "apply_promo", "PROMO_MINIMUM_NOT_MET", code="BIGORDER10")
    assert error["details"]["short_by"] == round(60 - ok(rt, sid, "view_cart")["subtotal"], 2)
    cart = ok(rt, sid, "apply_promo", code="FREEDEL")
    assert (cart["delivery_fee"], cart["discount"]) == (0.0, 0.0)
    house = ok(rt, sid, "apply_promo", code=food_delivery.HOUSE_PROMO)
    assert house["discount"] == round(house["subtotal"] * 0.15, 2)
    café = restaurants(rt, sid)[1]
    ok(rt, sid, "add_to_cart", menu_item_id=dish(rt, sid, café["id"], sizes=False)["id"], quantity=2,
       start_new_cart=True)
    error = fails(rt, sid, "apply_promo", "PROMO_NOT_VALID_HERE", code=food_delivery.HOUSE_PROMO)
    assert error["details"]["restaurant_id"] == restaurants(rt, sid)[0]["id"]


def test_promo_is_checked_again_at_checkout(rt, sid):
    ok(rt, sid, "apply_promo", code="FREEDEL")
    big = max(rt.state(sid).cart_items.all(), key=lambda line: line["unit_price"])
    ok(rt, sid, "remove_from_cart", cart_item_id=big["id"])
    small = rt.state(sid).cart_items.first()
    ok(rt, sid, "update_cart_item", cart_item_id=small["id"], quantity=4)  # above the minimum, below $20
    assert ok(rt, sid, "view_cart")["promo"] == {"code": "FREEDEL", "applied": False,
                                                 "problem": "PROMO_MINIMUM_NOT_MET"}
    fails(rt, sid, "checkout", "PROMO_MINIMUM_NOT_MET", address_id=address(rt, sid, "home"))


def test_orders_can_be_cancelled_only_before_cooking_starts(rt, sid):
    for status in ("preparing", "out_for_delivery", "delivered", "cancelled"):
        order = order_in(rt, sid, status)
        error = fails(rt, sid, "cancel_order", "ORDER_NOT_CANCELLABLE", order_id=order["id"])
        assert error["details"]["status"] == status
    home = address(rt, sid, "home")
    first = ok(rt, sid, "checkout", address_id=home)
    cancelled = ok(rt, sid, "cancel_order", order_id=first["id"], reason="wrong_address")
    assert (cancelled["status"], cancelled["refund"]["amount"]) == ("cancelled", first["total"])
    fails(rt, sid, "track_delivery", "ORDER_CANCELLED", order_id=first["id"])
    fails(rt, sid, "rate_order", "ORDER_NOT_DELIVERED", order_id=first["id"], food_stars=3)

    pizzeria = restaurants(rt, sid)[0]
    ok(rt, sid, "add_to_cart", menu_item_id=dish(rt, sid, pizzeria["id"], sizes=False)["id"], quantity=4)
    second = ok(rt, sid, "checkout", address_id=home)
    rt.state(sid).advance_clock(food_delivery.COOKING_STARTS_MIN * 60)  # arrange: the kitchen starts
    error = fails(rt, sid, "cancel_order", "ORDER_NOT_CANCELLABLE", order_id=second["id"])
    assert error["details"]["status"] == "preparing"


def test_only_delivered_orders_are_rated_once(rt, sid):
    on_the_way = order_in(rt, sid, "out_for_delivery")
    error = fails(rt, sid, "rate_order", "ORDER_NOT_DELIVERED", order_id=on_the_way["id"], food_stars=4)
    assert error["details"]["status"] == "out_for_delivery"
    state = rt.state(sid)
    rated = state.ratings.first()
    error = fails(rt, sid, "rate_order", "ALREADY_RATED", "CONFLICT", order_id=rated["order_id"], food_stars=4)
    assert error["details"]["rating_id"] == rated["id"]


def test_unknown_ids_fail_with_entity_specific_not_found(rt, sid):
    fails(rt, sid, "get_restaurant", "RESTAURANT_NOT_FOUND", "NOT_FOUND", restaurant_id="rst_missing")
    fails(rt, sid, "get_menu_item", "MENU_ITEM_NOT_FOUND", "NOT_FOUND", menu_item_id="itm_missing")
    fails(rt, sid, "update_cart_item", "CART_ITEM_NOT_FOUND", "NOT_FOUND", cart_item_id="crt_missing", quantity=2)
    fails(rt, sid, "get_order", "ORDER_NOT_FOUND", "NOT_FOUND", order_id="ord_missing")
    fails(rt, sid, "search_restaurants", "ADDRESS_NOT_FOUND", "NOT_FOUND", address_id="adr_missing")
    bad = rt.call(sid, "add_to_cart", {"menu_item_id": "itm_x", "size": "Large!"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"
