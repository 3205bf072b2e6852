"""The food_delivery server's own rules: restaurants and hours, menus with options, the
one-restaurant cart, promos, checkout, the clock-driven order timeline, ratings and their typed
failures. What every server guarantees is the conformance kit's (tests/servers/test_conformance.py).

The session starts on Monday 2026-03-02 at 09:00 local time: restaurant #0 is an all-day pizzeria
(open; the seeded cart is there), #1 a breakfast café (07:00-15:00), #2 a sushi bar closed on Mondays.
"""

import datetime as dt

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import food_delivery
from prove_servers.food_delivery import DeliveryOptions, server

TOOLS = server.tools
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
h = ServerHarness.fixture(server)


def restaurants(h) -> tuple[dict, dict, dict]:
    """(#0 all-day pizzeria, #1 breakfast café, #2 sushi bar closed on Mondays)."""
    first, second, third = h.state.restaurants.all()[:3]
    return first, second, third


def address(h, label: str) -> str:
    return next(a["id"] for a in h.ok("list_addresses")["addresses"] if a["label"] == label)


def dish(h, restaurant_id: str, *, sizes: bool | None = None, add_ons: bool | None = None,
         available: bool = True) -> dict:
    for item in h.state.menu_items.where(restaurant_id=restaurant_id, available=available):
        if (sizes is None or bool(item["sizes"]) == sizes) and (add_ons is None or bool(item["add_ons"]) == add_ons):
            return item
    raise LookupError("no such dish")


def order_in(h, status: str) -> dict:
    return next(o for o in h.state.orders.all() if h.ok("get_order", order_id=o["id"])["status"] == status)


def open_at(restaurant: dict, when: str) -> bool:
    """Whether the restaurant's weekly hours cover ``when`` (local "YYYY-MM-DDTHH:MM")."""
    weekday = WEEKDAYS[dt.datetime.strptime(when, "%Y-%m-%dT%H:%M").weekday()]
    return any(span["open"] <= when[11:] < span["close"] for span in restaurant["hours"][weekday])


def empty_cart(h) -> None:
    for line in h.state.cart_items.all():
        h.ok("remove_from_cart", cart_item_id=line["id"])


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "search_restaurants", "get_restaurant", "get_opening_hours", "get_menu", "get_menu_item", "add_to_cart",
        "update_cart_item", "remove_from_cart", "view_cart", "apply_promo", "list_addresses", "checkout",
        "get_order", "list_orders", "cancel_order", "track_delivery", "rate_order",
    }
    assert servers_registered_by(food_delivery) == [server]
    assert (server.name, server.domain) == ("food_delivery", "lifestyle")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"search_restaurants", "get_restaurant", "get_opening_hours", "get_menu", "get_menu_item",
                         "view_cart", "list_addresses", "get_order", "list_orders", "track_delivery"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"remove_from_cart", "cancel_order",
                                                                               "add_to_cart", "checkout"}
    assert not TOOLS["add_to_cart"].spec.annotations.idempotent and not TOOLS["checkout"].spec.annotations.idempotent
    for name, tool in TOOLS.items():
        assert tool.spec.annotations.read_only or tool.spec.produces or tool.spec.mutates, name
    assert TOOLS["checkout"].spec.produces == ("order",)
    assert TOOLS["checkout"].spec.entity_params() == {"address_id": "address"}
    assert TOOLS["add_to_cart"].spec.entity_params() == {"menu_item_id": "menu_item"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_seed_has_every_scenario_the_tools_need(seed):
    h = ServerHarness(server, seed=seed)
    state = h.state
    first, second, third = state.restaurants.all()[:3]
    is_open = {r["id"]: h.ok("get_opening_hours", restaurant_id=r["id"])["open_now"] for r in (first, second, third)}
    assert is_open == {first["id"]: True, second["id"]: True, third["id"]: False} and third["hours"]["monday"] == []
    assert state.menu_items.first(restaurant_id=first["id"], available=False)
    assert state.menu_items.first(lambda i: bool(i["sizes"] and i["add_ons"]), restaurant_id=first["id"])
    assert {line["restaurant_id"] for line in state.cart_items} == {first["id"]}
    views = [h.ok("get_order", order_id=o["id"]) for o in state.orders]
    assert {v["status"] for v in views} == {"placed", "preparing", "out_for_delivery", "delivered", "cancelled"}
    assert any(v["rated"] for v in views) and any(v["rateable"] for v in views)
    home, _work, parents = state.addresses.all()
    assert h.ok("search_restaurants", address_id=parents["id"])["total"] == 0  # nobody delivers that far
    assert h.ok("get_restaurant", restaurant_id=first["id"], address_id=home["id"])["delivers_to_address"]
    for order in state.orders:  # every order was placed while its restaurant was open
        assert open_at(state.restaurants.get(order["restaurant_id"]), order["timeline"]["placed"])


def test_a_ten_times_larger_seed_works_and_options_are_validated():
    big = ServerHarness(server, options=DeliveryOptions(restaurants=240))
    state = big.state
    assert len(state.restaurants) == 240 and len({r["name"] for r in state.restaurants}) == 240
    assert len(state.menu_items) > 240 * 5 and len(state.orders) > 30
    big.run_examples()
    with pytest.raises(ValueError):
        DeliveryOptions(restaurants=0)


# -- the ordering flow, with ids passed from one call to the next -------------------------------------


def test_search_menu_cart_checkout_track_rate_flow(h):
    home = address(h, "home")
    found = h.ok("search_restaurants", cuisine="breakfast", open_now=True, address_id=home, limit=50)
    café = next(r for r in found["restaurants"] if r["id"] == restaurants(h)[1]["id"])
    assert café["delivers_to_address"] and café["open_now"] and café["closes_at"] == "2026-03-02T15:00"
    menu = h.ok("get_menu", restaurant_id=café["id"], category="mains")["items"]
    dish_id = next(i["id"] for i in menu if i["has_add_ons"] and i["available"])
    item = h.ok("get_menu_item", menu_item_id=dish_id)
    add_ons = [a["id"] for a in item["add_ons"][:2]]
    price = round(item["price"] + sum(a["price_delta"] for a in item["add_ons"][:2]), 2)
    added = h.ok("add_to_cart", menu_item_id=dish_id, quantity=2, add_ons=add_ons, start_new_cart=True)
    assert (added["added"]["unit_price"], added["cart"]["restaurant"]["id"]) == (price, café["id"])
    assert [line["menu_item_id"] for line in added["cart"]["items"]] == [dish_id]  # the pizza cart was replaced
    cart = h.ok("apply_promo", code="welcome5")
    assert (cart["promo"], cart["discount"]) == ({"code": "WELCOME5", "applied": True, "problem": None}, 5.0)

    order = h.ok("checkout", address_id=home, tip=3.5)
    assert (order["status"], order["cancellable"], order["tip"]) == ("placed", True, 3.5)
    assert order["promo_code"] == "WELCOME5"
    assert order["total"] == round(cart["total"] + 3.5, 2)
    assert h.ok("view_cart")["items"] == []
    assert h.ok("list_orders", status="placed")["orders"][0]["id"] == order["id"]
    assert h.ok("get_order", order_id=order["id"])["delivery_instructions"] == "Buzz 4B"

    seen = []
    for _ in range(90):  # the clock moves a minute per write; reads show the order moving along
        status = h.ok("track_delivery", order_id=order["id"])["status"]
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == "delivered":
            break
        h.state.advance_clock(60)
    assert seen == ["placed", "confirmed", "preparing", "out_for_delivery", "delivered"]
    tracked = h.ok("track_delivery", order_id=order["id"])
    assert tracked["minutes_remaining"] == 0 and tracked["courier"] == order["courier"]
    before = h.state.restaurants.get(café["id"])
    rated = h.ok("rate_order", order_id=order["id"], food_stars=1, delivery_stars=5)
    assert rated["restaurant_rating_count"] == before["rating_count"] + 1
    assert rated["restaurant_rating"] == round((before["rating"] * before["rating_count"] + 1) / rated[
        "restaurant_rating_count"], 2)
    h.fails("rate_order", "ALREADY_RATED", "CONFLICT", order_id=order["id"], food_stars=5)


def test_cart_lines_merge_and_update(h):
    pizzeria = restaurants(h)[0]
    pizza = dish(h, pizzeria["id"], sizes=True, add_ons=True)
    args = {"menu_item_id": pizza["id"], "size": "medium", "add_ons": ["mushrooms"]}
    first = h.ok("add_to_cart", **args)["added"]
    again = h.ok("add_to_cart", **args, quantity=2)["added"]
    assert (again["id"], again["quantity"]) == (first["id"], 3)
    other = h.ok("add_to_cart", **{**args, "size": "small"})["added"]
    assert other["id"] != first["id"] and other["unit_price"] == round(first["unit_price"] - 3.0, 2)
    cart = h.ok("update_cart_item", cart_item_id=first["id"], quantity=1)
    assert next(line for line in cart["items"] if line["id"] == first["id"])["quantity"] == 1
    error = h.fails("add_to_cart", "MAX_QUANTITY_EXCEEDED", "INVALID_ARGUMENT", **args, quantity=20)
    assert "20" in error["message"]


def test_removing_the_last_line_drops_the_promo(h):
    h.ok("apply_promo", code="WELCOME5")
    empty_cart(h)
    cart = h.ok("view_cart")
    assert (cart["restaurant"], cart["promo"], cart["total"]) == (None, None, 0.0)
    h.fails("apply_promo", "CART_EMPTY", "FAILED_PRECONDITION", code="WELCOME5")
    h.fails("checkout", "CART_EMPTY", "FAILED_PRECONDITION", address_id=address(h, "home"))
    h.fails("remove_from_cart", "CART_ITEM_NOT_FOUND", "NOT_FOUND", cart_item_id="crt_missing")


def test_search_filters_and_opening_hours(h):
    vegan = h.ok("search_restaurants", dietary="vegan", limit=50)["restaurants"]
    assert vegan and all("vegan" in r["dietary"] for r in vegan)
    ratings = [r["rating"] for r in vegan]
    assert ratings == sorted(ratings, reverse=True)
    open_now = h.ok("search_restaurants", open_now=True, limit=50)["restaurants"]
    assert open_now and all(r["open_now"] for r in open_now)
    closed = h.ok("search_restaurants", open_now=False, limit=50)["restaurants"]
    assert {r["id"] for r in closed}.isdisjoint(r["id"] for r in open_now)
    assert h.ok("search_restaurants", address_id=address(h, "parents"))["total"] == 0
    near = h.ok("search_restaurants", address_id=address(h, "home"), sort="delivery_time",
                limit=50)["restaurants"]
    minutes = [r["estimated_minutes"] for r in near]
    assert minutes == sorted(minutes) and all(r["delivers_to_address"] for r in near)
    sushi = restaurants(h)[2]
    hours = h.ok("get_opening_hours", restaurant_id=sushi["id"])
    assert (hours["open_now"], hours["today"], hours["opens_at"]) == (False, "closed", "2026-03-03T11:30")
    assert hours["hours"]["tuesday"] == [{"open": "11:30", "close": "14:30"}, {"open": "17:00", "close": "22:00"}]
    far = h.ok("get_restaurant", restaurant_id=sushi["id"], address_id=address(h, "parents"))
    assert not far["delivers_to_address"] and far["distance_km"] > far["delivery_radius_km"]


# -- typed failures, each in the state that causes it ------------------------------------------------


def test_cart_from_other_restaurant(h):
    café = restaurants(h)[1]
    toast = dish(h, café["id"], sizes=False)
    error = h.fails("add_to_cart", "CART_FROM_OTHER_RESTAURANT", "CONFLICT", menu_item_id=toast["id"])
    assert error["details"]["cart_restaurant_id"] == restaurants(h)[0]["id"]
    h.ok("apply_promo", code="WELCOME5")
    cart = h.ok("add_to_cart", menu_item_id=toast["id"], start_new_cart=True)["cart"]
    assert [line["menu_item_id"] for line in cart["items"]] == [toast["id"]] and cart["promo"] is None


def test_invalid_options(h):
    pizzeria = restaurants(h)[0]
    pizza = dish(h, pizzeria["id"], sizes=True, add_ons=True)
    plain = dish(h, pizzeria["id"], sizes=False, add_ons=False)
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
        error = h.fails("add_to_cart", "INVALID_OPTION", "INVALID_ARGUMENT", **args)
        assert set(error["details"]) == {"sizes", "add_ons", "max_add_ons"}
    assert h.fails("add_to_cart", "INVALID_OPTION", "INVALID_ARGUMENT", **cases[0])["details"]["sizes"] == [
        "large", "medium", "small"]


def test_item_unavailable(h):
    pizzeria = restaurants(h)[0]
    sold_out = dish(h, pizzeria["id"], available=False)
    h.fails("add_to_cart", "ITEM_UNAVAILABLE", "FAILED_PRECONDITION", menu_item_id=sold_out["id"])
    line = h.state.cart_items.first()
    h.state.menu_items.update(line["menu_item_id"], available=False)  # arrange: it sold out meanwhile
    error = h.fails("checkout", "ITEM_UNAVAILABLE", "FAILED_PRECONDITION", address_id=address(h, "home"))
    assert error["details"]["cart_item_id"] == line["id"]


def test_restaurant_closed(h):
    _, café, sushi = restaurants(h)
    roll = dish(h, sushi["id"], sizes=False)
    error = h.fails("add_to_cart", "RESTAURANT_CLOSED", "FAILED_PRECONDITION", menu_item_id=roll["id"],
                    start_new_cart=True)
    assert error["details"]["opens_at"] == "2026-03-03T11:30"
    home = address(h, "home")
    h.ok("add_to_cart", menu_item_id=dish(h, café["id"], sizes=False)["id"], quantity=3,
         start_new_cart=True)
    h.state.advance_clock(359 * 60)  # arrange: 15:00 sharp (09:01 after the write), closing time
    error = h.fails("checkout", "RESTAURANT_CLOSED", "FAILED_PRECONDITION", address_id=home)
    assert error["details"]["opens_at"] == "2026-03-03T07:00"


def test_below_minimum_order(h):
    pizzeria = restaurants(h)[0]
    drink = next(line for line in h.state.cart_items.all() if line["size"] == "regular")
    for line in h.state.cart_items.all():
        if line["id"] != drink["id"]:
            h.ok("remove_from_cart", cart_item_id=line["id"])
    cart = h.ok("update_cart_item", cart_item_id=drink["id"], quantity=1)
    assert cart["below_minimum_by"] == round(pizzeria["minimum_order"] - drink["unit_price"], 2)
    error = h.fails("checkout", "BELOW_MINIMUM_ORDER", "FAILED_PRECONDITION", address_id=address(h, "home"))
    assert error["details"] == {"minimum": pizzeria["minimum_order"], "short_by": cart["below_minimum_by"]}


def test_outside_delivery_area(h):
    error = h.fails("checkout", "OUTSIDE_DELIVERY_AREA", "FAILED_PRECONDITION", address_id=address(h, "parents"))
    assert error["details"]["distance_km"] > error["details"]["radius_km"]
    h.fails("checkout", "ADDRESS_NOT_FOUND", "NOT_FOUND", address_id="adr_missing")
    assert h.ok("checkout", address_id=address(h, "work"))["deliver_to"]["label"] == "work"


def test_promo_rules(h):
    h.fails("apply_promo", "PROMO_EXPIRED", "FAILED_PRECONDITION", code="WINTER20")
    h.fails("apply_promo", "PROMO_NOT_FOUND", "NOT_FOUND", code="FREEFOOD")
    error = h.fails("apply_promo", "PROMO_MINIMUM_NOT_MET", "FAILED_PRECONDITION", code="BIGORDER10")
    assert error["details"]["short_by"] == round(60 - h.ok("view_cart")["subtotal"], 2)
    cart = h.ok("apply_promo", code="FREEDEL")
    assert (cart["delivery_fee"], cart["discount"]) == (0.0, 0.0)
    house = h.ok("apply_promo", code=food_delivery.HOUSE_PROMO)
    assert house["discount"] == round(house["subtotal"] * 0.15, 2)
    café = restaurants(h)[1]
    h.ok("add_to_cart", menu_item_id=dish(h, café["id"], sizes=False)["id"], quantity=2,
         start_new_cart=True)
    error = h.fails("apply_promo", "PROMO_NOT_VALID_HERE", "FAILED_PRECONDITION", code=food_delivery.HOUSE_PROMO)
    assert error["details"]["restaurant_id"] == restaurants(h)[0]["id"]


def test_promo_is_checked_again_at_checkout(h):
    h.ok("apply_promo", code="FREEDEL")
    big = max(h.state.cart_items.all(), key=lambda line: line["unit_price"])
    h.ok("remove_from_cart", cart_item_id=big["id"])
    small = h.state.cart_items.first()
    h.ok("update_cart_item", cart_item_id=small["id"], quantity=4)  # above the minimum, below $20
    assert h.ok("view_cart")["promo"] == {"code": "FREEDEL", "applied": False,
                                                 "problem": "PROMO_MINIMUM_NOT_MET"}
    h.fails("checkout", "PROMO_MINIMUM_NOT_MET", "FAILED_PRECONDITION", address_id=address(h, "home"))


def test_orders_can_be_cancelled_only_before_cooking_starts(h):
    for status in ("preparing", "out_for_delivery", "delivered", "cancelled"):
        order = order_in(h, status)
        error = h.fails("cancel_order", "ORDER_NOT_CANCELLABLE", "FAILED_PRECONDITION", order_id=order["id"])
        assert error["details"]["status"] == status
    home = address(h, "home")
    first = h.ok("checkout", address_id=home)
    cancelled = h.ok("cancel_order", order_id=first["id"], reason="wrong_address")
    assert (cancelled["status"], cancelled["refund"]["amount"]) == ("cancelled", first["total"])
    h.fails("track_delivery", "ORDER_CANCELLED", "FAILED_PRECONDITION", order_id=first["id"])
    h.fails("rate_order", "ORDER_NOT_DELIVERED", "FAILED_PRECONDITION", order_id=first["id"], food_stars=3)

    pizzeria = restaurants(h)[0]
    h.ok("add_to_cart", menu_item_id=dish(h, pizzeria["id"], sizes=False)["id"], quantity=4)
    second = h.ok("checkout", address_id=home)
    h.state.advance_clock(food_delivery.COOKING_STARTS_MIN * 60)  # arrange: the kitchen starts
    error = h.fails("cancel_order", "ORDER_NOT_CANCELLABLE", "FAILED_PRECONDITION", order_id=second["id"])
    assert error["details"]["status"] == "preparing"


def test_only_delivered_orders_are_rated_once(h):
    on_the_way = order_in(h, "out_for_delivery")
    error = h.fails("rate_order", "ORDER_NOT_DELIVERED", "FAILED_PRECONDITION", order_id=on_the_way["id"], food_stars=4)
    assert error["details"]["status"] == "out_for_delivery"
    state = h.state
    rated = state.ratings.first()
    error = h.fails("rate_order", "ALREADY_RATED", "CONFLICT", order_id=rated["order_id"], food_stars=4)
    assert error["details"]["rating_id"] == rated["id"]


def test_unknown_ids_fail_with_entity_specific_not_found(h):
    h.fails("get_restaurant", "RESTAURANT_NOT_FOUND", "NOT_FOUND", restaurant_id="rst_missing")
    h.fails("get_menu_item", "MENU_ITEM_NOT_FOUND", "NOT_FOUND", menu_item_id="itm_missing")
    h.fails("update_cart_item", "CART_ITEM_NOT_FOUND", "NOT_FOUND", cart_item_id="crt_missing", quantity=2)
    h.fails("get_order", "ORDER_NOT_FOUND", "NOT_FOUND", order_id="ord_missing")
    h.fails("search_restaurants", "ADDRESS_NOT_FOUND", "NOT_FOUND", address_id="adr_missing")
    bad = h.call("add_to_cart", {"menu_item_id": "itm_x", "size": "Large!"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"
