"""The shopping server's own rules: catalog and stock, the cart and promos, checkout, orders,
shipments, returns and refunds, reviews, wishlist and addresses, each failure checked with its
reason and code. What every server guarantees is the conformance kit's
(tests/servers/test_conformance.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import shopping
from prove_servers.shopping import ShopOptions, server

h = ServerHarness.fixture(server)


def stock_of(product: dict[str, Any], size: str | None) -> int:
    """Units of one variant of a product record (0 for a size it does not come in)."""
    return next((v["stock"] for v in product["variants"] if v["size"] == size), 0)


def reviewable_product(h) -> str:
    """A product from a delivered order that you have not reviewed yet."""
    reviewed = {r["product_id"] for r in h.where("reviews", by_you=True)}
    return next(i["product_id"] for o in h.where("orders", status="delivered") for i in o["items"]
                if i["product_id"] not in reviewed)


# -- declared surface and seed ------------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(server.tools) == {
        "search_products", "get_product", "get_cart", "add_to_cart", "update_cart_item", "remove_from_cart",
        "apply_promo_code", "get_shipping_options", "checkout", "list_addresses", "add_address",
        "list_payment_methods", "list_orders", "get_order", "cancel_order", "track_shipment", "start_return",
        "get_refund", "list_reviews", "write_review", "get_wishlist", "add_to_wishlist", "remove_from_wishlist",
    }
    assert servers_registered_by(shopping) == [server] and (server.name, server.domain) == ("shopping", "commerce")
    for name, tool in server.tools.items():
        if not tool.spec.annotations.read_only:
            assert tool.spec.produces or tool.spec.mutates, f"{name} writes but declares no entity"
    destructive = {n for n, t in server.tools.items() if t.spec.annotations.destructive}
    assert destructive == {"remove_from_cart", "cancel_order", "remove_from_wishlist", "checkout"}
    assert server.tools["checkout"].spec.produces == ("order",)
    assert server.tools["start_return"].spec.produces == ("return",)
    assert server.tools["checkout"].spec.entity_params() == {
        "address_id": "address",
        "payment_method_id": "payment_method",
    }


def test_add_to_cart_is_not_idempotent(h):
    product = h.find("products", lambda p: not p["sized"] and p["stock"] >= 2)
    h.ok("add_to_cart", product_id=product["id"])
    cart = h.ok("add_to_cart", product_id=product["id"])
    assert cart["added"]["quantity"] == 2
    assert [i["quantity"] for i in cart["cart"]["items"] if i["product_id"] == product["id"]] == [2]


def test_options_scale_the_catalog_and_are_validated():
    big = ServerHarness(server, options=ShopOptions(products=600))
    assert len(big.state.products) == 600
    big.run_examples()  # the examples hold at the larger size too
    with pytest.raises(ValueError):
        ShopOptions(products=0)


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_seed_has_every_scenario_the_tools_need(seed: int):
    h = ServerHarness(server, seed=seed)
    state = h.state
    today = state.today().isoformat()
    assert {o["status"] for o in state.orders} == {"pending", "processing", "shipped", "delivered", "cancelled"}
    delivered = [h.ok("get_order", order_id=o["id"]) for o in state.orders.where(status="delivered")]
    assert sorted(o["returnable"] for o in delivered) == [False, True]
    assert any(i["final_sale"] for o in delivered if o["returnable"] for i in o["items"])
    assert state.products.first(lambda p: p["stock"] == 0) and state.products.first(final_sale=True)
    assert state.products.first(lambda p: any(v["stock"] == 0 for v in p["variants"]) and p["stock"] > 0)
    cards = h.ok("list_payment_methods")["payment_methods"]
    assert [(c["id"], c["expired"]) for c in cards] == [(c["id"], e) for c, e in zip(state.payment_methods,
                                                                                     [False, True], strict=True)]
    assert len(state.addresses) == 2 and len(state.cart_items) == 2 and len(state.returns) == 1
    assert any(p["expires_on"] < today for p in state.promos) and any(p["min_subtotal"] > 0 for p in state.promos)


# -- the main flow, with ids passed from one call to the next -------------------------------------------


def test_search_cart_checkout_track_return_refund_flow(h):
    target = h.state.products.first(lambda p: not p["sized"] and p["stock"] >= 2 and not p["final_sale"])
    found = h.ok("search_products", query=target["kind"], category=target["category"], in_stock_only=True)
    product_id = next(p["id"] for p in found["products"] if p["id"] == target["id"])
    product = h.ok("get_product", product_id=product_id)
    assert product["variants"][0]["in_stock"]

    added = h.ok("add_to_cart", product_id=product_id, quantity=2)
    assert added["added"]["quantity"] == 2
    address_id = h.ok("list_addresses")["addresses"][0]["id"]
    card_id = next(c["id"] for c in h.ok("list_payment_methods")["payment_methods"] if not c["expired"])
    options = h.ok("get_shipping_options", address_id=address_id)["options"]
    express = next(o for o in options if o["speed"] == "express")

    order = h.ok("checkout", address_id=address_id, payment_method_id=card_id, shipping_speed="express")
    assert order["status"] == "pending" and order["cancellable"]
    assert order["shipping_cost"] == express["cost"]
    assert order["shipment"]["estimated_delivery"] == express["estimated_delivery"]
    fetched = h.ok("get_order", order_id=order["id"])
    assert fetched["total"] == order["total"] and {i["product_id"] for i in fetched["items"]} >= {product_id}
    assert order["id"] in [o["id"] for o in h.ok("list_orders", status="pending")["orders"]]
    tracking = h.ok("track_shipment", order_id=order["id"])
    assert tracking["status"] == "preparing"

    new_item = fetched["items"][0]["id"]
    h.fails("start_return", "NOT_DELIVERED", "FAILED_PRECONDITION", order_id=order["id"], order_item_id=new_item,
            reason="changed_mind")

    delivered = h.ok("list_orders", status="delivered")["orders"]
    recent = next(o for o in (h.ok("get_order", order_id=d["id"]) for d in delivered) if o["returnable"])
    item = next(i for i in recent["items"] if not i["final_sale"])
    ret = h.ok("start_return", order_id=recent["id"], order_item_id=item["id"], reason="damaged")
    refund = h.ok("get_refund", return_id=ret["id"])
    assert (refund["status"], refund["order_id"]) == ("pending", recent["id"])
    assert 0 < refund["amount"] <= round(item["unit_price"] * (1 + shopping.TAX_RATE), 2)
    again = h.ok("get_order", order_id=recent["id"])
    assert next(i for i in again["items"] if i["id"] == item["id"])["returned_quantity"] == 1


def test_checkout_decrements_stock_empties_cart_and_uses_the_promo(h):
    state = h.state
    lines = state.cart_items.all()
    stock_before = {
        (li["product_id"], li["size"]): stock_of(state.products.get(li["product_id"]), li["size"])
        for li in lines
    }
    h.ok("apply_promo_code", code="welcome10")
    cart = h.ok("get_cart")
    assert cart["promo"] == {"code": "WELCOME10", "applied": True, "problem": None}
    assert cart["discount"] == round(cart["subtotal"] * 0.10, 2)

    order = h.ok("checkout", **h.example_args("checkout"))
    assert (order["subtotal"], order["discount"], order["total"]) == (cart["subtotal"], cart["discount"], cart["total"])
    assert order["promo_code"] == "WELCOME10"
    for li in lines:
        after = stock_of(h.state.products.get(li["product_id"]), li["size"])
        assert after == stock_before[(li["product_id"], li["size"])] - li["quantity"]
    emptied = h.ok("get_cart")
    assert (emptied["items"], emptied["promo"], emptied["total"]) == ([], None, 0.0)


def test_cancel_order_restocks_its_items(h):
    order = h.state.orders.first(status="pending")
    item = order["items"][0]
    before = stock_of(h.state.products.get(item["product_id"]), item["size"])
    cancelled = h.ok("cancel_order", order_id=order["id"], reason="found_cheaper")
    assert cancelled["status"] == "cancelled" and not cancelled["cancellable"]
    assert stock_of(h.state.products.get(item["product_id"]), item["size"]) == before + item["quantity"]
    h.fails("track_shipment", "ORDER_CANCELLED", "FAILED_PRECONDITION", order_id=order["id"])


def test_search_filters_sorts_and_pages(h):
    page = h.ok("search_products", category="books", max_price=30, sort="price_asc", limit=3)
    prices = [p["price"] for p in page["products"]]
    assert prices == sorted(prices) and all(p <= 30 for p in prices)
    assert {p["category"] for p in page["products"]} == {"books"} and page["facets"] == {"books": page["total"]}
    if page["total"] > 3:
        nxt = h.ok("search_products", category="books", max_price=30, sort="price_asc", limit=3, offset=3)
        assert nxt["products"][0]["price"] >= prices[-1]
    assert h.ok("search_products", query="zzzz-no-such-thing")["total"] == 0
    h.fails("search_products", "BAD_PRICE_RANGE", "INVALID_ARGUMENT", min_price=50, max_price=10)


def test_write_review_updates_the_product_rating(h):
    product_id = reviewable_product(h)
    before = h.state.products.get(product_id)
    h.ok("write_review", product_id=product_id, rating=1, headline="Broke", body="Snapped in a week.")
    listed = h.ok("list_reviews", product_id=product_id, sort="lowest_rated")
    assert listed["review_count"] == before["review_count"] + 1
    assert listed["reviews"][0]["by_you"] and listed["reviews"][0]["rating"] == 1


# -- typed failures: each in the state that causes it, leaving the state unchanged -------------------------


def _sized(state: Any, predicate: Any = lambda p: True) -> dict:
    return state.products.first(lambda p: p["sized"] and predicate(p))


def test_out_of_stock(h):
    product = h.state.products.first(lambda p: p["stock"] == 0)
    size = product["variants"][0]["size"]
    h.fails("add_to_cart", "OUT_OF_STOCK", "FAILED_PRECONDITION", product_id=product["id"],
            **({"size": size} if size else {}))


def test_insufficient_stock_counts_what_is_already_in_the_cart(h):
    state = h.state
    product = state.products.first(
        lambda p: not p["sized"] and 0 < p["stock"] < 20 and not state.cart_items.first(product_id=p["id"])
    )
    stock = product["stock"]
    error = h.fails("add_to_cart", "INSUFFICIENT_STOCK", "FAILED_PRECONDITION", product_id=product["id"],
                    quantity=stock + 1)
    assert error["details"]["available"] == stock
    line = h.ok("add_to_cart", product_id=product["id"], quantity=stock)["added"]
    h.fails("add_to_cart", "INSUFFICIENT_STOCK", "FAILED_PRECONDITION", product_id=product["id"])
    h.fails("update_cart_item", "INSUFFICIENT_STOCK", "FAILED_PRECONDITION", cart_item_id=line["cart_item_id"],
            quantity=stock + 1)


def test_at_most_20_of_one_item(h):
    line = h.state.cart_items.first()
    args = {"product_id": line["product_id"], "quantity": 20, **({"size": line["size"]} if line["size"] else {})}
    h.fails("add_to_cart", "MAX_QUANTITY_EXCEEDED", "FAILED_PRECONDITION", **args)


def test_size_rules(h):
    sized = _sized(h.state, lambda p: p["variants"][0]["size"] == "S")
    unsized = h.state.products.first(sized=False)
    h.fails("add_to_cart", "VARIANT_REQUIRED", "INVALID_ARGUMENT", product_id=sized["id"])
    h.fails("add_to_cart", "VARIANT_NOT_FOUND", "NOT_FOUND", product_id=sized["id"], size="XS")
    h.fails("add_to_cart", "VARIANT_NOT_APPLICABLE", "INVALID_ARGUMENT", product_id=unsized["id"], size="M")


def test_cart_empty(h):
    for line in h.state.cart_items.all():
        h.ok("remove_from_cart", cart_item_id=line["id"])
    h.fails("checkout", "CART_EMPTY", "FAILED_PRECONDITION", **h.example_args("checkout"))
    h.fails("apply_promo_code", "CART_EMPTY", "FAILED_PRECONDITION", code="WELCOME10")


def test_promo_expired_and_unknown(h):
    h.fails("apply_promo_code", "PROMO_EXPIRED", "FAILED_PRECONDITION", code="WINTER20")
    h.fails("apply_promo_code", "PROMO_NOT_FOUND", "NOT_FOUND", code="NOSUCHCODE")


def test_promo_minimum_checked_on_apply_and_again_at_checkout(h):
    state = h.state
    for line in state.cart_items.all():
        h.ok("remove_from_cart", cart_item_id=line["id"])
    cheap = min(state.products.where(lambda p: not p["sized"] and p["stock"] >= 10), key=lambda p: p["price"])
    line_id = h.ok("add_to_cart", product_id=cheap["id"])["added"]["cart_item_id"]
    error = h.fails("apply_promo_code", "PROMO_MINIMUM_NOT_MET", "FAILED_PRECONDITION", code="SAVE25")
    assert error["details"]["short_by"] == round(150 - cheap["price"], 2)

    big = max(state.products.where(lambda p: not p["sized"] and p["stock"] > 0), key=lambda p: p["price"])
    quantity = min(int(150 // big["price"]) + 1, big["stock"])
    big_line = h.ok("add_to_cart", product_id=big["id"], quantity=quantity)["added"]["cart_item_id"]
    assert h.ok("apply_promo_code", code="SAVE25")["discount"] == 25.0
    h.ok("remove_from_cart", cart_item_id=big_line)
    assert h.ok("get_cart")["promo"] == {"code": "SAVE25", "applied": False, "problem": "PROMO_MINIMUM_NOT_MET"}
    h.fails("checkout", "PROMO_MINIMUM_NOT_MET", "FAILED_PRECONDITION", **h.example_args("checkout"))
    assert h.state.cart_items.get(line_id)


def test_payment_method_expired(h):
    cards = h.ok("list_payment_methods")["payment_methods"]
    expired = next(c for c in cards if c["expired"])
    address_id = h.state.addresses.first()["id"]
    h.fails("checkout", "PAYMENT_METHOD_EXPIRED", "FAILED_PRECONDITION", address_id=address_id,
            payment_method_id=expired["id"])
    h.fails("checkout", "PAYMENT_METHOD_NOT_FOUND", "NOT_FOUND", address_id=address_id, payment_method_id="pay_nope")


def test_order_not_cancellable_once_shipped(h):
    for status in ("shipped", "delivered", "cancelled"):
        order = h.state.orders.first(status=status)
        error = h.fails("cancel_order", "ORDER_NOT_CANCELLABLE", "FAILED_PRECONDITION", order_id=order["id"])
        assert error["details"]["status"] == status


def _delivered(h, *, returnable: bool) -> dict:
    return next(
        o
        for o in (
            h.ok("get_order", order_id=d["id"]) for d in h.state.orders.where(status="delivered")
        )
        if o["returnable"] is returnable
    )


def test_return_window_closed(h):
    old = _delivered(h, returnable=False)
    item = next(i for i in old["items"] if i["returned_quantity"] < i["quantity"])
    h.fails("start_return", "RETURN_WINDOW_CLOSED", "FAILED_PRECONDITION", order_id=old["id"],
            order_item_id=item["id"], reason="damaged")


def test_final_sale_items_cannot_be_returned(h):
    recent = _delivered(h, returnable=True)
    item = next(i for i in recent["items"] if i["final_sale"])
    h.fails("start_return", "FINAL_SALE", "FAILED_PRECONDITION", order_id=recent["id"], order_item_id=item["id"],
            reason="changed_mind")


def test_return_quantity_and_item_checks(h):
    recent = _delivered(h, returnable=True)
    item = next(i for i in recent["items"] if not i["final_sale"])
    args = {
        "order_id": recent["id"],
        "order_item_id": item["id"],
        "reason": "damaged",
        "quantity": item["quantity"] + 1,
    }
    h.fails("start_return", "RETURN_QUANTITY_EXCEEDED", "FAILED_PRECONDITION", **args)
    h.fails("start_return", "ORDER_ITEM_NOT_FOUND", "NOT_FOUND", **{**args, "order_item_id": "oit_nope", "quantity": 1})


def test_review_requires_a_delivered_purchase(h):
    state = h.state
    delivered = {i["product_id"] for o in state.orders.where(status="delivered") for i in o["items"]}
    never = state.products.first(lambda p: p["id"] not in delivered)
    review = {"rating": 4, "headline": "Nice", "body": "Good."}
    h.fails("write_review", "NOT_PURCHASED", "FAILED_PRECONDITION", product_id=never["id"], **review)


def test_duplicate_review(h):
    mine = h.state.reviews.first(by_you=True)
    error = h.fails("write_review", "DUPLICATE_REVIEW", "CONFLICT", product_id=mine["product_id"], rating=2,
                    headline="Again", body="x")
    assert error["details"]["review_id"] == mine["id"]


def test_wishlist_conflicts(h):
    saved = h.ok("get_wishlist")["items"][0]["product"]["id"]
    h.fails("add_to_wishlist", "ALREADY_IN_WISHLIST", "CONFLICT", product_id=saved)
    h.ok("remove_from_wishlist", product_id=saved)
    h.fails("remove_from_wishlist", "NOT_IN_WISHLIST", "NOT_FOUND", product_id=saved)


def test_unknown_ids_are_typed_not_found(h):
    h.fails("get_product", "PRODUCT_NOT_FOUND", "NOT_FOUND", product_id="prd_nope")
    h.fails("get_order", "ORDER_NOT_FOUND", "NOT_FOUND", order_id="ord_nope")
    h.fails("get_refund", "RETURN_NOT_FOUND", "NOT_FOUND", return_id="ret_nope")
    h.fails("get_shipping_options", "ADDRESS_NOT_FOUND", "NOT_FOUND", address_id="adr_nope")


def test_address_rules(h):
    home = h.state.addresses.first(is_default=True)
    same = {k: home[k] for k in ("line1", "city", "region", "postal_code")}
    h.fails("add_address", "ADDRESS_ALREADY_EXISTS", "CONFLICT", **same)
    for n in range(shopping.MAX_ADDRESSES - 2):
        h.ok("add_address", line1=f"{n + 1} Test Rd", city="Austin", region="TX", postal_code="78701")
    h.fails("add_address", "ADDRESS_LIMIT_REACHED", "RESOURCE_EXHAUSTED", line1="99 Full St", city="Austin",
            region="TX", postal_code="78701")
    new_default = h.ok("list_addresses")["addresses"]
    assert [a["is_default"] for a in new_default].count(True) == 1


def test_schema_rejects_bad_arguments(h):
    product = h.state.products.first()
    result = h.call("add_to_cart", {"product_id": product["id"], "quantity": 0})
    assert result.error["reason"] == "SCHEMA_VIOLATION"
    result = h.call("search_products", {"category": "groceries"})
    assert result.error["reason"] == "SCHEMA_VIOLATION"
