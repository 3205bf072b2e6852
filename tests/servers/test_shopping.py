"""The shopping server: its catalog of tools, seed, business rules and typed failures.

Every failure test checks the reason, the code, that the tool declares the reason, and that the
session state is unchanged afterwards.
"""

from __future__ import annotations

import json
from typing import Any

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_servers import shopping
from prove_servers.shopping import ShopOptions, server

TOOLS = {
    "search_products",
    "get_product",
    "get_cart",
    "add_to_cart",
    "update_cart_item",
    "remove_from_cart",
    "apply_promo_code",
    "get_shipping_options",
    "checkout",
    "list_addresses",
    "add_address",
    "list_payment_methods",
    "list_orders",
    "get_order",
    "cancel_order",
    "track_shipment",
    "start_return",
    "get_refund",
    "list_reviews",
    "write_review",
    "get_wishlist",
    "add_to_wishlist",
    "remove_from_wishlist",
}


@pytest.fixture(scope="module")
def rt() -> ServerRuntime:
    return ServerRuntime(server)


@pytest.fixture
def sid(rt: ServerRuntime) -> str:
    return rt.new_session()


def ok(rt: ServerRuntime, sid: str, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    result = rt.call(sid, tool, args or {})
    assert not result.is_error, result.error
    return result.data


def fails(
    rt: ServerRuntime, sid: str, tool: str, args: dict[str, Any], reason: str, code: str = "FAILED_PRECONDITION"
) -> dict:
    before = rt.state_hash(sid)
    result = rt.call(sid, tool, args)
    assert result.is_error, f"{tool} should fail with {reason}, returned {result.data}"
    assert (result.error["reason"], result.code) == (reason, code), result.error
    assert reason in server.tools[tool].spec.errors, f"{tool} does not declare {reason}"
    assert rt.state_hash(sid) == before, f"{tool} changed state although it failed"
    return result.error


def example_args(rt: ServerRuntime, sid: str, example: Any) -> dict[str, Any]:
    return dict(example(rt.state(sid)) if callable(example) else example)


def all_examples() -> list[tuple[str, int]]:
    return [(name, i) for name, tool in server.tools.items() for i in range(len(tool.examples))]


# -- catalog of tools and metadata ------------------------------------------------------------------


def test_exactly_23_tools_with_the_planned_names():
    assert set(server.tools) == TOOLS
    assert len(server.tools) == 23
    assert (server.name, server.domain) == ("shopping", "commerce")


def test_every_parameter_is_described_and_every_tool_has_an_example():
    for name, tool in server.tools.items():
        assert tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_metadata_matches_behaviour_kinds():
    for name, tool in server.tools.items():
        spec = tool.spec
        if spec.annotations.read_only:
            assert not spec.produces and not spec.mutates and not spec.annotations.destructive, name
        else:
            assert spec.produces or spec.mutates, f"{name} writes but declares no entity"
    destructive = {n for n, t in server.tools.items() if t.spec.annotations.destructive}
    assert destructive == {"remove_from_cart", "cancel_order", "remove_from_wishlist"}
    assert server.tools["checkout"].spec.produces == ("order",)
    assert server.tools["start_return"].spec.produces == ("return",)
    assert server.tools["checkout"].spec.entity_params() == {
        "address_id": "address",
        "payment_method_id": "payment_method",
    }


def test_registered_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(shopping)
    registered: list[Any] = []
    pm.hook.prove_register_servers(register=lambda target, name=None, summary="": registered.append(target))
    assert registered == [server]


# -- examples, read-only and idempotent tools ---------------------------------------------------------


@pytest.mark.parametrize(("tool", "index"), all_examples())
def test_every_example_succeeds_on_a_fresh_session(rt: ServerRuntime, tool: str, index: int):
    sid = rt.new_session()
    data = ok(rt, sid, tool, example_args(rt, sid, server.tools[tool].examples[index]))
    assert json.loads(json.dumps(data)) == data  # JSON-native values only


@pytest.mark.parametrize("tool", sorted(n for n, t in server.tools.items() if t.spec.annotations.read_only))
def test_read_only_tools_never_change_state(rt: ServerRuntime, sid: str, tool: str):
    before = rt.state_hash(sid)
    for example in server.tools[tool].examples:
        ok(rt, sid, tool, example_args(rt, sid, example))
    assert rt.state_hash(sid) == before


@pytest.mark.parametrize(
    "tool",
    sorted(n for n, t in server.tools.items() if t.spec.annotations.idempotent and not t.spec.annotations.read_only),
)
def test_idempotent_tools_repeat_to_the_same_state(rt: ServerRuntime, sid: str, tool: str):
    args = example_args(rt, sid, server.tools[tool].examples[0])
    ok(rt, sid, tool, args)
    once = rt.state_hash(sid)
    rt.call(sid, tool, args)  # a repeat may be refused (already done), but must change nothing
    assert rt.state_hash(sid) == once


def test_add_to_cart_is_not_idempotent(rt: ServerRuntime, sid: str):
    product = rt.state(sid).products.first(lambda p: not p["sized"] and p["stock"] >= 2)
    ok(rt, sid, "add_to_cart", {"product_id": product["id"]})
    cart = ok(rt, sid, "add_to_cart", {"product_id": product["id"]})
    assert cart["added"]["quantity"] == 2
    assert [i["quantity"] for i in cart["cart"]["items"] if i["product_id"] == product["id"]] == [2]


# -- seed ---------------------------------------------------------------------------------------------


def test_same_seed_same_state_different_seed_differs():
    assert ServerRuntime(server, seed=3).state_hash("a") == ServerRuntime(server, seed=3).state_hash("b")
    assert ServerRuntime(server, seed=3).state_hash("a") != ServerRuntime(server, seed=4).state_hash("a")


def test_options_scale_the_catalog_and_are_validated():
    big = ServerRuntime(server, options=ShopOptions(products=600))
    sid = big.new_session()
    assert len(big.state(sid).products) == 600
    for tool, index in all_examples():  # the examples hold at the larger size too
        fresh = big.new_session()
        ok(big, fresh, tool, example_args(big, fresh, server.tools[tool].examples[index]))
    with pytest.raises(ValueError):
        ShopOptions(products=0)


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_seed_has_every_scenario_the_tools_need(seed: int):
    state = server.build_state(seed)
    today = state.today().isoformat()
    assert {o["status"] for o in state.orders} == {"pending", "processing", "shipped", "delivered", "cancelled"}
    delivered = [shopping._order_view(state, o) for o in state.orders.where(status="delivered")]
    assert sorted(o["returnable"] for o in delivered) == [False, True]
    assert any(i["final_sale"] for o in delivered if o["returnable"] for i in o["items"])
    assert state.products.first(lambda p: p["stock"] == 0) and state.products.first(final_sale=True)
    assert state.products.first(lambda p: any(v["stock"] == 0 for v in p["variants"]) and p["stock"] > 0)
    assert [shopping._card_expired(c, state.today()) for c in state.payment_methods] == [False, True]
    assert len(state.addresses) == 2 and len(state.cart_items) == 2 and len(state.returns) == 1
    assert any(p["expires_on"] < today for p in state.promos) and any(p["min_subtotal"] > 0 for p in state.promos)


# -- the main flow, with ids passed from one call to the next -------------------------------------------


def test_search_cart_checkout_track_return_refund_flow(rt: ServerRuntime, sid: str):
    target = rt.state(sid).products.first(lambda p: not p["sized"] and p["stock"] >= 2 and not p["final_sale"])
    found = ok(
        rt, sid, "search_products", {"query": target["kind"], "category": target["category"], "in_stock_only": True}
    )
    product_id = next(p["id"] for p in found["products"] if p["id"] == target["id"])
    product = ok(rt, sid, "get_product", {"product_id": product_id})
    assert product["variants"][0]["in_stock"]

    added = ok(rt, sid, "add_to_cart", {"product_id": product_id, "quantity": 2})
    assert added["added"]["quantity"] == 2
    address_id = ok(rt, sid, "list_addresses")["addresses"][0]["id"]
    card_id = next(c["id"] for c in ok(rt, sid, "list_payment_methods")["payment_methods"] if not c["expired"])
    options = ok(rt, sid, "get_shipping_options", {"address_id": address_id})["options"]
    express = next(o for o in options if o["speed"] == "express")

    order = ok(
        rt, sid, "checkout", {"address_id": address_id, "payment_method_id": card_id, "shipping_speed": "express"}
    )
    assert order["status"] == "pending" and order["cancellable"]
    assert order["shipping_cost"] == express["cost"]
    assert order["shipment"]["estimated_delivery"] == express["estimated_delivery"]
    fetched = ok(rt, sid, "get_order", {"order_id": order["id"]})
    assert fetched["total"] == order["total"] and {i["product_id"] for i in fetched["items"]} >= {product_id}
    assert order["id"] in [o["id"] for o in ok(rt, sid, "list_orders", {"status": "pending"})["orders"]]
    tracking = ok(rt, sid, "track_shipment", {"order_id": order["id"]})
    assert tracking["status"] == "preparing"

    new_item = fetched["items"][0]["id"]
    fails(
        rt,
        sid,
        "start_return",
        {"order_id": order["id"], "order_item_id": new_item, "reason": "changed_mind"},
        "NOT_DELIVERED",
    )

    delivered = ok(rt, sid, "list_orders", {"status": "delivered"})["orders"]
    recent = next(o for o in (ok(rt, sid, "get_order", {"order_id": d["id"]}) for d in delivered) if o["returnable"])
    item = next(i for i in recent["items"] if not i["final_sale"])
    ret = ok(rt, sid, "start_return", {"order_id": recent["id"], "order_item_id": item["id"], "reason": "damaged"})
    refund = ok(rt, sid, "get_refund", {"return_id": ret["id"]})
    assert (refund["status"], refund["order_id"]) == ("pending", recent["id"])
    assert 0 < refund["amount"] <= round(item["unit_price"] * (1 + shopping.TAX_RATE), 2)
    again = ok(rt, sid, "get_order", {"order_id": recent["id"]})
    assert next(i for i in again["items"] if i["id"] == item["id"])["returned_quantity"] == 1


def test_checkout_decrements_stock_empties_cart_and_uses_the_promo(rt: ServerRuntime, sid: str):
    state = rt.state(sid)
    lines = state.cart_items.all()
    stock_before = {
        (li["product_id"], li["size"]): shopping._stock_of(state.products.get(li["product_id"]), li["size"])
        for li in lines
    }
    ok(rt, sid, "apply_promo_code", {"code": "welcome10"})
    cart = ok(rt, sid, "get_cart")
    assert cart["promo"] == {"code": "WELCOME10", "applied": True, "problem": None}
    assert cart["discount"] == round(cart["subtotal"] * 0.10, 2)

    order = ok(rt, sid, "checkout", shopping.server.tools["checkout"].examples[0](state))
    assert (order["subtotal"], order["discount"], order["total"]) == (cart["subtotal"], cart["discount"], cart["total"])
    assert order["promo_code"] == "WELCOME10"
    for li in lines:
        after = shopping._stock_of(rt.state(sid).products.get(li["product_id"]), li["size"])
        assert after == stock_before[(li["product_id"], li["size"])] - li["quantity"]
    emptied = ok(rt, sid, "get_cart")
    assert (emptied["items"], emptied["promo"], emptied["total"]) == ([], None, 0.0)


def test_cancel_order_restocks_its_items(rt: ServerRuntime, sid: str):
    order = rt.state(sid).orders.first(status="pending")
    item = order["items"][0]
    before = shopping._stock_of(rt.state(sid).products.get(item["product_id"]), item["size"])
    cancelled = ok(rt, sid, "cancel_order", {"order_id": order["id"], "reason": "found_cheaper"})
    assert cancelled["status"] == "cancelled" and not cancelled["cancellable"]
    assert shopping._stock_of(rt.state(sid).products.get(item["product_id"]), item["size"]) == before + item["quantity"]
    fails(rt, sid, "track_shipment", {"order_id": order["id"]}, "ORDER_CANCELLED")


def test_search_filters_sorts_and_pages(rt: ServerRuntime, sid: str):
    page = ok(rt, sid, "search_products", {"category": "books", "max_price": 30, "sort": "price_asc", "limit": 3})
    prices = [p["price"] for p in page["products"]]
    assert prices == sorted(prices) and all(p <= 30 for p in prices)
    assert {p["category"] for p in page["products"]} == {"books"} and page["facets"] == {"books": page["total"]}
    if page["total"] > 3:
        nxt = ok(
            rt,
            sid,
            "search_products",
            {"category": "books", "max_price": 30, "sort": "price_asc", "limit": 3, "offset": 3},
        )
        assert nxt["products"][0]["price"] >= prices[-1]
    assert ok(rt, sid, "search_products", {"query": "zzzz-no-such-thing"})["total"] == 0
    fails(rt, sid, "search_products", {"min_price": 50, "max_price": 10}, "BAD_PRICE_RANGE", "INVALID_ARGUMENT")


def test_write_review_updates_the_product_rating(rt: ServerRuntime, sid: str):
    product_id = shopping._reviewable_product(rt.state(sid))
    before = rt.state(sid).products.get(product_id)
    ok(
        rt,
        sid,
        "write_review",
        {"product_id": product_id, "rating": 1, "headline": "Broke", "body": "Snapped in a week."},
    )
    listed = ok(rt, sid, "list_reviews", {"product_id": product_id, "sort": "lowest_rated"})
    assert listed["review_count"] == before["review_count"] + 1
    assert listed["reviews"][0]["by_you"] and listed["reviews"][0]["rating"] == 1


# -- typed failures: each in the state that causes it, leaving the state unchanged -------------------------


def _sized(state: Any, predicate: Any = lambda p: True) -> dict:
    return state.products.first(lambda p: p["sized"] and predicate(p))


def test_out_of_stock(rt: ServerRuntime, sid: str):
    product = rt.state(sid).products.first(lambda p: p["stock"] == 0)
    size = product["variants"][0]["size"]
    fails(rt, sid, "add_to_cart", {"product_id": product["id"], **({"size": size} if size else {})}, "OUT_OF_STOCK")


def test_insufficient_stock_counts_what_is_already_in_the_cart(rt: ServerRuntime, sid: str):
    state = rt.state(sid)
    product = state.products.first(
        lambda p: not p["sized"] and 0 < p["stock"] < 20 and not state.cart_items.first(product_id=p["id"])
    )
    stock = product["stock"]
    error = fails(rt, sid, "add_to_cart", {"product_id": product["id"], "quantity": stock + 1}, "INSUFFICIENT_STOCK")
    assert error["details"]["available"] == stock
    line = ok(rt, sid, "add_to_cart", {"product_id": product["id"], "quantity": stock})["added"]
    fails(rt, sid, "add_to_cart", {"product_id": product["id"]}, "INSUFFICIENT_STOCK")
    fails(
        rt, sid, "update_cart_item", {"cart_item_id": line["cart_item_id"], "quantity": stock + 1}, "INSUFFICIENT_STOCK"
    )


def test_at_most_20_of_one_item(rt: ServerRuntime, sid: str):
    line = rt.state(sid).cart_items.first()
    args = {"product_id": line["product_id"], "quantity": 20, **({"size": line["size"]} if line["size"] else {})}
    fails(rt, sid, "add_to_cart", args, "MAX_QUANTITY_EXCEEDED")


def test_size_rules(rt: ServerRuntime, sid: str):
    sized = _sized(rt.state(sid), lambda p: p["variants"][0]["size"] == "S")
    unsized = rt.state(sid).products.first(sized=False)
    fails(rt, sid, "add_to_cart", {"product_id": sized["id"]}, "VARIANT_REQUIRED", "INVALID_ARGUMENT")
    fails(rt, sid, "add_to_cart", {"product_id": sized["id"], "size": "XS"}, "VARIANT_NOT_FOUND", "NOT_FOUND")
    fails(
        rt, sid, "add_to_cart", {"product_id": unsized["id"], "size": "M"}, "VARIANT_NOT_APPLICABLE", "INVALID_ARGUMENT"
    )


def test_cart_empty(rt: ServerRuntime, sid: str):
    for line in rt.state(sid).cart_items.all():
        ok(rt, sid, "remove_from_cart", {"cart_item_id": line["id"]})
    fails(rt, sid, "checkout", shopping.server.tools["checkout"].examples[0](rt.state(sid)), "CART_EMPTY")
    fails(rt, sid, "apply_promo_code", {"code": "WELCOME10"}, "CART_EMPTY")


def test_promo_expired_and_unknown(rt: ServerRuntime, sid: str):
    fails(rt, sid, "apply_promo_code", {"code": "WINTER20"}, "PROMO_EXPIRED")
    fails(rt, sid, "apply_promo_code", {"code": "NOSUCHCODE"}, "PROMO_NOT_FOUND", "NOT_FOUND")


def test_promo_minimum_checked_on_apply_and_again_at_checkout(rt: ServerRuntime, sid: str):
    state = rt.state(sid)
    for line in state.cart_items.all():
        ok(rt, sid, "remove_from_cart", {"cart_item_id": line["id"]})
    cheap = min(state.products.where(lambda p: not p["sized"] and p["stock"] >= 10), key=lambda p: p["price"])
    line_id = ok(rt, sid, "add_to_cart", {"product_id": cheap["id"]})["added"]["cart_item_id"]
    error = fails(rt, sid, "apply_promo_code", {"code": "SAVE25"}, "PROMO_MINIMUM_NOT_MET")
    assert error["details"]["short_by"] == round(150 - cheap["price"], 2)

    big = max(state.products.where(lambda p: not p["sized"] and p["stock"] > 0), key=lambda p: p["price"])
    quantity = min(int(150 // big["price"]) + 1, big["stock"])
    big_line = ok(rt, sid, "add_to_cart", {"product_id": big["id"], "quantity": quantity})["added"]["cart_item_id"]
    assert ok(rt, sid, "apply_promo_code", {"code": "SAVE25"})["discount"] == 25.0
    ok(rt, sid, "remove_from_cart", {"cart_item_id": big_line})
    assert ok(rt, sid, "get_cart")["promo"] == {"code": "SAVE25", "applied": False, "problem": "PROMO_MINIMUM_NOT_MET"}
    fails(rt, sid, "checkout", shopping.server.tools["checkout"].examples[0](state), "PROMO_MINIMUM_NOT_MET")
    assert rt.state(sid).cart_items.get(line_id)


def test_payment_method_expired(rt: ServerRuntime, sid: str):
    cards = ok(rt, sid, "list_payment_methods")["payment_methods"]
    expired = next(c for c in cards if c["expired"])
    address_id = rt.state(sid).addresses.first()["id"]
    fails(rt, sid, "checkout", {"address_id": address_id, "payment_method_id": expired["id"]}, "PAYMENT_METHOD_EXPIRED")
    fails(
        rt,
        sid,
        "checkout",
        {"address_id": address_id, "payment_method_id": "pay_nope"},
        "PAYMENT_METHOD_NOT_FOUND",
        "NOT_FOUND",
    )


def test_order_not_cancellable_once_shipped(rt: ServerRuntime, sid: str):
    for status in ("shipped", "delivered", "cancelled"):
        order = rt.state(sid).orders.first(status=status)
        error = fails(rt, sid, "cancel_order", {"order_id": order["id"]}, "ORDER_NOT_CANCELLABLE")
        assert error["details"]["status"] == status


def _delivered(rt: ServerRuntime, sid: str, *, returnable: bool) -> dict:
    return next(
        o
        for o in (
            ok(rt, sid, "get_order", {"order_id": d["id"]}) for d in rt.state(sid).orders.where(status="delivered")
        )
        if o["returnable"] is returnable
    )


def test_return_window_closed(rt: ServerRuntime, sid: str):
    old = _delivered(rt, sid, returnable=False)
    item = next(i for i in old["items"] if i["returned_quantity"] < i["quantity"])
    fails(
        rt,
        sid,
        "start_return",
        {"order_id": old["id"], "order_item_id": item["id"], "reason": "damaged"},
        "RETURN_WINDOW_CLOSED",
    )


def test_final_sale_items_cannot_be_returned(rt: ServerRuntime, sid: str):
    recent = _delivered(rt, sid, returnable=True)
    item = next(i for i in recent["items"] if i["final_sale"])
    fails(
        rt,
        sid,
        "start_return",
        {"order_id": recent["id"], "order_item_id": item["id"], "reason": "changed_mind"},
        "FINAL_SALE",
    )


def test_return_quantity_and_item_checks(rt: ServerRuntime, sid: str):
    recent = _delivered(rt, sid, returnable=True)
    item = next(i for i in recent["items"] if not i["final_sale"])
    args = {
        "order_id": recent["id"],
        "order_item_id": item["id"],
        "reason": "damaged",
        "quantity": item["quantity"] + 1,
    }
    fails(rt, sid, "start_return", args, "RETURN_QUANTITY_EXCEEDED")
    fails(
        rt,
        sid,
        "start_return",
        {**args, "order_item_id": "oit_nope", "quantity": 1},
        "ORDER_ITEM_NOT_FOUND",
        "NOT_FOUND",
    )


def test_review_requires_a_delivered_purchase(rt: ServerRuntime, sid: str):
    state = rt.state(sid)
    delivered = {i["product_id"] for o in state.orders.where(status="delivered") for i in o["items"]}
    never = state.products.first(lambda p: p["id"] not in delivered)
    review = {"rating": 4, "headline": "Nice", "body": "Good."}
    fails(rt, sid, "write_review", {"product_id": never["id"], **review}, "NOT_PURCHASED")


def test_duplicate_review(rt: ServerRuntime, sid: str):
    mine = rt.state(sid).reviews.first(by_you=True)
    error = fails(
        rt,
        sid,
        "write_review",
        {"product_id": mine["product_id"], "rating": 2, "headline": "Again", "body": "x"},
        "DUPLICATE_REVIEW",
        "CONFLICT",
    )
    assert error["details"]["review_id"] == mine["id"]


def test_wishlist_conflicts(rt: ServerRuntime, sid: str):
    saved = ok(rt, sid, "get_wishlist")["items"][0]["product"]["id"]
    fails(rt, sid, "add_to_wishlist", {"product_id": saved}, "ALREADY_IN_WISHLIST", "CONFLICT")
    ok(rt, sid, "remove_from_wishlist", {"product_id": saved})
    fails(rt, sid, "remove_from_wishlist", {"product_id": saved}, "NOT_IN_WISHLIST", "NOT_FOUND")


def test_unknown_ids_are_typed_not_found(rt: ServerRuntime, sid: str):
    fails(rt, sid, "get_product", {"product_id": "prd_nope"}, "PRODUCT_NOT_FOUND", "NOT_FOUND")
    fails(rt, sid, "get_order", {"order_id": "ord_nope"}, "ORDER_NOT_FOUND", "NOT_FOUND")
    fails(rt, sid, "get_refund", {"return_id": "ret_nope"}, "RETURN_NOT_FOUND", "NOT_FOUND")
    fails(rt, sid, "get_shipping_options", {"address_id": "adr_nope"}, "ADDRESS_NOT_FOUND", "NOT_FOUND")


def test_address_rules(rt: ServerRuntime, sid: str):
    home = rt.state(sid).addresses.first(is_default=True)
    same = {k: home[k] for k in ("line1", "city", "region", "postal_code")}
    fails(rt, sid, "add_address", same, "ADDRESS_ALREADY_EXISTS", "CONFLICT")
    for n in range(shopping.MAX_ADDRESSES - 2):
        ok(
            rt,
            sid,
            "add_address",
            {"line1": f"{n + 1} Test Rd", "city": "Austin", "region": "TX", "postal_code": "78701"},
        )
    fails(
        rt,
        sid,
        "add_address",
        {"line1": "99 Full St", "city": "Austin", "region": "TX", "postal_code": "78701"},
        "ADDRESS_LIMIT_REACHED",
        "RESOURCE_EXHAUSTED",
    )
    new_default = ok(rt, sid, "list_addresses")["addresses"]
    assert [a["is_default"] for a in new_default].count(True) == 1


def test_schema_rejects_bad_arguments(rt: ServerRuntime, sid: str):
    product = rt.state(sid).products.first()
    result = rt.call(sid, "add_to_cart", {"product_id": product["id"], "quantity": 0})
    assert result.error["reason"] == "SCHEMA_VIOLATION"
    result = rt.call(sid, "search_products", {"category": "groceries"})
    assert result.error["reason"] == "SCHEMA_VIOLATION"
