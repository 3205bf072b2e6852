"""shopping — an online store for one signed-in customer: catalog, cart, checkout, orders,
shipping, returns and refunds, reviews and a wishlist.

The state (``ShopState``), the seed (``build_shop``) and the 23 tools live here together. The
business rules a real store enforces are typed failures an agent can recover from: stock per
size, promo expiry and minimum spend, expired cards, cancelling only before shipment, returns
only for delivered, non-final-sale items within 30 days, reviews only for delivered purchases.

Everything the seed invents comes from the word lists below and the toolkit's ``fake`` module,
driven by the seeded ``rng``; dates are relative to the session clock (``state.today()``).
"""

from __future__ import annotations

import datetime as dt
import random
import typing
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    ToolError,
    fake,
    money,
    paginate,
    part_of,
    ref,
    require,
    require_found,
)

# -- vocabulary ---------------------------------------------------------------------------------

Category = Literal["electronics", "home", "apparel", "books", "sports", "beauty"]
Size = Literal["XS", "S", "M", "L", "XL"]
OrderStatus = Literal["pending", "processing", "shipped", "delivered", "cancelled"]
ShippingSpeed = Literal["standard", "express", "overnight"]
ReturnReason = Literal["damaged", "wrong_item", "does_not_fit", "not_as_described", "changed_mind"]
SIZES: tuple[str, ...] = typing.get_args(Size)

RETURN_WINDOW_DAYS = 30
RETURN_SHIP_BY_DAYS = 14  # the customer has two weeks to drop the parcel off
REFUND_PROCESSING_DAYS = 5  # after the warehouse receives the parcel
MAX_LINE_QUANTITY = 20
MAX_ADDRESSES = 10
FREE_STANDARD_SHIPPING_OVER = 50.0
TAX_RATE = 0.08
WAREHOUSE = "Columbus, OH"
# speed → (price, days in transit from the warehouse)
SHIPPING: dict[str, tuple[float, int]] = {"standard": (5.99, 5), "express": (14.99, 2), "overnight": (29.99, 1)}
# Regions far from the Ohio warehouse take a day longer by ground and two-day air.
FAR_REGIONS = frozenset({"WA", "OR", "CA", "AZ", "CO", "TX", "FL", "AK", "HI", "NV", "NM", "UT"})
CARRIERS = ("UPS", "FedEx", "USPS")

# Per category: brands, adjectives, kinds as (kind, sized, lowest price, highest price), and how
# a product name is put together. Small on purpose: names must stay stable across versions.
CATALOG: dict[str, dict[str, Any]] = {
    "electronics": {
        "brands": ("Voltaic", "Nordtone", "Pixelwave", "Arcline", "Lumen Labs"),
        "adjectives": ("Wireless", "Compact", "Pro", "Smart", "Portable", "Noise-Cancelling", "Ultra-Slim"),
        "kinds": (("Earbuds", False, 29, 199), ("Bluetooth Speaker", False, 25, 249), ("Headphones", False, 49, 349),
                  ("Power Bank", False, 19, 89), ("Smartwatch", False, 99, 399), ("Webcam", False, 39, 159),
                  ("Mechanical Keyboard", False, 59, 219), ("USB-C Hub", False, 19, 99)),
        "name": "{brand} {adjective} {kind}",
        "blurb": "Pairs in seconds and charges over USB-C.",
    },
    "home": {
        "brands": ("Hearthstone", "Oak & Ember", "Casa Verde", "Tidy Nest", "Linden Home"),
        "adjectives": ("Ceramic", "Stainless Steel", "Bamboo", "Nonstick", "Handwoven", "Minimalist"),
        "kinds": (("Dutch Oven", False, 49, 229), ("Throw Blanket", False, 29, 129), ("Table Lamp", False, 35, 179),
                  ("Knife Set", False, 39, 299), ("Storage Baskets", False, 19, 69), ("French Press", False, 19, 59),
                  ("Bath Towel Set", False, 25, 89), ("Cutting Board", False, 15, 79)),
        "name": "{brand} {adjective} {kind}",
        "blurb": "Built for everyday use and easy to clean.",
    },
    "apparel": {
        "brands": ("Northwind", "Copper & Thread", "Loomcraft", "Saltmarsh", "Urban Fable"),
        "adjectives": ("Organic Cotton", "Merino", "Relaxed-Fit", "Waterproof", "Linen", "Classic", "Quilted"),
        "kinds": (("T-Shirt", True, 15, 45), ("Hoodie", True, 39, 89), ("Rain Jacket", True, 69, 229),
                  ("Chinos", True, 39, 99), ("Crewneck Sweater", True, 49, 149), ("Flannel Shirt", True, 29, 79),
                  ("Puffer Vest", True, 59, 159)),
        "name": "{brand} {adjective} {kind}",
        "blurb": "True to size; machine wash cold.",
    },
    "books": {
        "brands": ("Harborlight Press", "Quill & Ink", "Meridian Books", "Foxglove Publishing"),
        "adjectives": ("Illustrated", "Complete", "Pocket", "Beginner's", "Essential", "Annotated"),
        "kinds": (("Cookbook", False, 14, 45), ("Field Guide to Birds", False, 12, 35), ("World Atlas", False, 20, 60),
                  ("Guide to Houseplants", False, 12, 30), ("History of Jazz", False, 15, 40),
                  ("Mystery Collection", False, 10, 28)),
        "name": "The {adjective} {kind}",
        "blurb": "Hardcover edition with a ribbon bookmark.",
    },
    "sports": {
        "brands": ("Summit Gear", "Stridewell", "Peakform", "Riverrun", "Ironleaf"),
        "adjectives": ("Lightweight", "Trail", "Insulated", "Cushioned", "Adjustable", "Pro"),
        "kinds": (("Yoga Mat", False, 19, 89), ("Running Shorts", True, 19, 59), ("Water Bottle", False, 12, 45),
                  ("Dumbbell Set", False, 39, 199), ("Training Tee", True, 15, 45), ("Hiking Daypack", False, 45, 159),
                  ("Cycling Jersey", True, 39, 119), ("Resistance Bands", False, 12, 39)),
        "name": "{brand} {adjective} {kind}",
        "blurb": "Tested outdoors through all four seasons.",
    },
    "beauty": {
        "brands": ("Lumiere", "Petal & Pine", "Dewdrop", "Verdant Skin", "Solstice"),
        "adjectives": ("Hydrating", "Vitamin C", "Fragrance-Free", "Overnight", "Mineral", "Soothing"),
        "kinds": (("Face Serum", False, 18, 79), ("Moisturizer", False, 15, 65), ("Sunscreen SPF 50", False, 12, 38),
                  ("Lip Balm Set", False, 8, 24), ("Hair Oil", False, 14, 48), ("Clay Mask", False, 12, 42),
                  ("Body Wash", False, 8, 26)),
        "name": "{brand} {adjective} {kind}",
        "blurb": "Dermatologist tested; cruelty free.",
    },
}
COLORS = ("black", "white", "navy", "olive", "gray", "red", "sand", "teal")
REVIEW_TEXT = {  # rating → (titles, bodies)
    5: (("Love it", "Exactly what I wanted", "Great value"), ("Works perfectly, arrived early.", "Would buy again.")),
    4: (("Very good", "Solid choice"), ("Does the job well; minor quibbles only.", "Good quality for the price.")),
    3: (("It's okay", "Mixed feelings"), ("Fine, but not as sturdy as I hoped.", "Average; the photos flatter it.")),
    2: (("Disappointed",), ("Stopped working properly after a few weeks.", "Runs small and feels cheap.")),
    1: (("Would not recommend",), ("Arrived damaged and support was slow.", "Nothing like the description.")),
}

# Free values a customer types in (for synthesis): second address lines and notes for the returns desk.
UNITS = ("Apt 4B", "Suite 210", "Unit 12", "Apt 1", "Floor 3", "Apt 707", "Suite 1400", "Unit C")
RETURN_NOTES = {  # reason → what the customer writes to the returns desk
    "changed_mind": ("Box is unopened.", "Please send a prepaid label."),
    "does_not_fit": ("Tried it on once, tags still attached.", "Runs a size small."),
    "damaged": ("Arrived with a cracked lid.", "The left earbud does not charge."),
    "wrong_item": ("Ordered the blue one, got the grey one.", "Ordered two by accident."),
    "not_as_described": ("Color is much darker than the photos.", "Smaller than the listing says."),
}
# Reusable parameter types, so every tool describes paging and ids the same way.
Limit = Annotated[int, Field(ge=1, le=50, description="Page size: how many results to return (1-50).")]
Offset = Annotated[int, Field(ge=0, description="How many results to skip; pass next_offset from the previous page.")]
ProductId = Annotated[str, ref("product", "Id of a product, as returned by search_products (e.g. prd_...).")]
OrderId = Annotated[str, ref("order", "Id of one of the customer's orders, from list_orders or checkout.")]


# -- state and seed -----------------------------------------------------------------------------


class ShopState(State):
    """The store as one signed-in customer sees it. The cart's promo code is the var ``promo_code``
    and the customer's name and e-mail the var ``customer``."""

    products = Table("product", prefix="prd")
    promos = Table("promo", prefix="prm")  # keyed by the code itself (WELCOME10)
    cart_items = Table("cart_item", prefix="cit")
    addresses = Table("address", prefix="adr")
    payment_methods = Table("payment_method", prefix="pay")
    orders = Table("order", prefix="ord")
    returns = Table("return", prefix="ret")
    reviews = Table("review", prefix="rev")
    wishlist = Table("wishlist_item", prefix="wsh")


@attrs.frozen(kw_only=True)
class ShopOptions:
    """Seed size: how many catalog products the store has."""

    products: int = attrs.field(default=60, validator=attrs.validators.gt(0))


def build_shop(rng: random.Random, options: ShopOptions) -> ShopState:
    """A store with a catalog, one customer's addresses, cards, order history, cart and wishlist."""
    state = ShopState(salt=f"{rng.getrandbits(64):016x}")
    name = fake.full_name(rng)
    state.set_var("customer", {"name": name, "email": fake.email_for(name, rng)})
    state.set_var("promo_code", None)
    _seed_catalog(state, rng, options.products)
    _seed_account(state, rng, name)
    _seed_orders(state, rng)
    _seed_cart_and_wishlist(state, rng)
    return state


def _seed_catalog(state: ShopState, rng: random.Random, count: int) -> None:
    today = state.today()
    categories = list(CATALOG)
    taken: dict[str, int] = {}
    for i in range(count):
        category = categories[i % len(categories)]  # an even spread keeps every category stocked at any size
        spec = CATALOG[category]
        kind, sized, low, high = rng.choice(spec["kinds"])
        brand, adjective = rng.choice(spec["brands"]), rng.choice(spec["adjectives"])
        base = spec["name"].format(brand=brand, adjective=adjective, kind=kind)
        taken[base] = taken.get(base, 0) + 1
        name = base if taken[base] == 1 else f"{base} (Series {taken[base]})"
        # Fixed positions guarantee the scenarios the tools need at every seed; the rest is random.
        sold_out = i == 2 or rng.random() < 0.08
        final_sale = i == 1 or rng.random() < 0.1
        if sized:
            sizes = SIZES[rng.randint(0, 1) :]  # some lines start at S
            variants = [{"size": s, "stock": 0 if sold_out else rng.choice((0, 1, 3, 6, 10, 15))} for s in sizes]
        else:
            variants = [{"size": None, "stock": 0 if sold_out else rng.randint(1, 40)}]
        product_id = state.products.new_id()
        ratings = [rng.choice((5, 5, 4, 4, 4, 3, 2, 1)) for _ in range(rng.randint(0, 4))]
        for rating in ratings:
            _insert_review(state, product_id, rating, author=fake.full_name(rng), by_you=False,
                           verified=rng.random() < 0.8, created_on=today - dt.timedelta(days=rng.randint(3, 300)),
                           **_review_text(rng, rating))
        counts = {str(star): ratings.count(star) for star in range(1, 6)}
        state.products.insert({
            "id": product_id,
            "name": name,
            "brand": brand,
            "category": category,
            "kind": kind,
            "color": rng.choice(COLORS),
            "description": f"{adjective} {kind.lower()} by {brand}. {spec['blurb']}",
            "price": float(rng.randint(low, high)) + 0.99,
            "sized": sized,
            "variants": variants,
            "stock": sum(v["stock"] for v in variants),
            "final_sale": final_sale,
            "added_on": (today - dt.timedelta(days=rng.randint(1, 720))).isoformat(),
            "rating_counts": counts,
            "review_count": len(ratings),
            "rating": _average(counts),
        })


def _seed_account(state: ShopState, rng: random.Random, name: str) -> None:
    today = state.today()
    home = state.addresses.insert(
        {"label": "home", "full_name": name, **fake.address(rng), "line2": None, "is_default": True})
    state.addresses.insert(
        {"label": "work", "full_name": name, **fake.address(rng), "line2": "Suite 200", "is_default": False})
    # A valid default card and an expired one, so checkout can fail with PAYMENT_METHOD_EXPIRED.
    for brand, exp_year, is_default in (("Visa", today.year + 3, True), ("Mastercard", today.year - 1, False)):
        state.payment_methods.insert({
            "kind": "card", "brand": brand, "last4": fake.digits(rng, 4), "exp_month": rng.randint(1, 12),
            "exp_year": exp_year, "cardholder": name, "billing_address_id": home["id"], "is_default": is_default,
        })
    promos = (
        ("WELCOME10", "10% off your order", "percent", 10.0, 0.0, 60),
        ("SAVE25", "$25 off orders of $150 or more", "fixed", 25.0, 150.0, 30),
        ("FREESHIP", "Free standard shipping on orders of $25 or more", "free_shipping", 0.0, 25.0, 90),
        ("WINTER20", "20% off winter styles", "percent", 20.0, 0.0, -20),  # already expired
    )
    for code, description, kind, value, minimum, expires_in in promos:
        state.promos.insert({
            "id": code, "code": code, "description": description, "kind": kind, "value": value,
            "min_subtotal": minimum, "expires_on": (today + dt.timedelta(days=expires_in)).isoformat(),
        })


def _seed_orders(state: ShopState, rng: random.Random) -> None:
    """Order history covering every status, a delivered order inside the return window (with a
    final-sale item) and one long outside it, already reviewed and partly refunded."""
    now = state.now()
    address = state.addresses.first(is_default=True)
    card = state.payment_methods.first(is_default=True)
    products = state.products.all()
    regular = [p for p in products if not p["final_sale"]] or products
    final_sale = [p for p in products if p["final_sale"]] or products
    picks = rng.sample(regular, k=min(len(regular), 6))

    def item(n: int, product: dict[str, Any] | None = None) -> dict[str, Any]:
        product = product or picks[n % len(picks)]
        return _order_item(state, product, rng.choice([v["size"] for v in product["variants"]]), rng.randint(1, 2))

    def days_ago(n: int) -> dt.datetime:
        return now - dt.timedelta(days=n, hours=rng.randint(0, 8))

    plans = (  # (status, placed days ago, delivered days ago, items)
        ("pending", 0, None, [item(0)]),
        ("processing", 1, None, [item(1)]),
        ("shipped", 3, None, [item(2)]),
        ("delivered", 15, 12, [item(3), item(0, rng.choice(final_sale))]),
        ("delivered", 80, 75, [item(4), item(5)]),
        ("cancelled", 40, None, [item(1)]),
    )
    for status, placed, delivered, items in plans:
        order = _insert_order(state, items, address=address, payment=card, speed="standard", promo=None,
                              placed_at=days_ago(placed), status=status, rng=rng,
                              delivered_on=None if delivered is None else (now - dt.timedelta(days=delivered)).date())
        if status == "delivered" and delivered > RETURN_WINDOW_DAYS:
            _seed_past_return_and_review(state, rng, order, returned_on=(now - dt.timedelta(days=delivered - 5)).date())


def _seed_past_return_and_review(
    state: ShopState, rng: random.Random, order: dict[str, Any], returned_on: dt.date
) -> None:
    first, second = order["items"][0], order["items"][-1]
    refund = _refund_amount(order, first, 1)
    state.returns.insert({
        "order_id": order["id"], "order_item_id": first["id"], "product_id": first["product_id"], "quantity": 1,
        "reason": "does_not_fit", "comment": None, "status": "refunded",
        "created_at": f"{returned_on.isoformat()}T10:00:00+00:00",
        "ship_by": (returned_on + dt.timedelta(days=RETURN_SHIP_BY_DAYS)).isoformat(),
        "return_label": {"carrier": "UPS", "tracking_number": f"1Z{fake.digits(rng, 16)}"},
        "refund": {"amount": refund, "status": "issued", "method": order["payment_summary"],
                   "issued_on": (returned_on + dt.timedelta(days=9)).isoformat(), "expected_by": None},
    })
    items = [{**i, "returned_quantity": 1} if i["id"] == first["id"] else i for i in order["items"]]
    state.orders.update(order["id"], items=items)
    customer = state.get_var("customer")["name"]
    _insert_review(state, second["product_id"], 4, author=customer, by_you=True, created_on=returned_on,
                   **_review_text(rng, 4))
    _count_rating(state, second["product_id"], 4)


def _seed_cart_and_wishlist(state: ShopState, rng: random.Random) -> None:
    in_stock = [p for p in state.products.all() if p["stock"] > 0 and not p["final_sale"]]
    for product in rng.sample(in_stock, k=min(2, len(in_stock))):
        size = rng.choice([v["size"] for v in product["variants"] if v["stock"] > 0])
        state.cart_items.insert(
            {"product_id": product["id"], "size": size, "quantity": 1, "added_at": state.now().isoformat()})
    sold_out = state.products.first(lambda p: p["stock"] == 0)
    wished = [p for p in rng.sample(state.products.all(), k=min(2, len(state.products))) if p != sold_out]
    for product in ([sold_out] if sold_out else []) + wished[:1]:  # a sold-out favourite, as real wishlists have
        if state.wishlist.first(product_id=product["id"]) is None:
            state.wishlist.insert({"product_id": product["id"], "added_at": state.now().isoformat()})


# -- shared rules -------------------------------------------------------------------------------


def _average(counts: dict[str, int]) -> float | None:
    total = sum(counts.values())
    return None if total == 0 else round(sum(int(star) * n for star, n in counts.items()) / total, 1)


def _review_text(rng: random.Random, rating: int) -> dict[str, str]:
    titles, bodies = REVIEW_TEXT[rating]
    return {"title": rng.choice(titles), "body": rng.choice(bodies)}


def _insert_review(state: ShopState, product_id: str, rating: int, *, author: str, title: str, body: str,
                   created_on: dt.date, by_you: bool, verified: bool = True) -> dict[str, Any]:
    return state.reviews.insert({
        "product_id": product_id, "author": author, "rating": rating, "title": title, "body": body,
        "created_on": created_on.isoformat(), "verified_purchase": verified, "by_you": by_you,
    })


def _count_rating(state: ShopState, product_id: str, rating: int) -> None:
    product = state.products.get(product_id)
    counts = {**product["rating_counts"], str(rating): product["rating_counts"][str(rating)] + 1}
    state.products.update(
        product_id, rating_counts=counts, review_count=product["review_count"] + 1, rating=_average(counts))


def _stock_of(product: dict[str, Any], size: str | None) -> int:
    return next((v["stock"] for v in product["variants"] if v["size"] == size), 0)


def _resolve_size(product: dict[str, Any], size: str | None) -> str | None:
    """The variant a request means; typed errors when a size is missing, needless or not offered."""
    offered = [v["size"] for v in product["variants"]]
    if not product["sized"]:
        require(size is None, f"{product['name']} comes in one size; omit size", reason="VARIANT_NOT_APPLICABLE",
                error=InvalidArgument, product_id=product["id"])
        return None
    require(size is not None, f"{product['name']} comes in sizes {', '.join(offered)}; pass size",
            reason="VARIANT_REQUIRED", error=InvalidArgument, product_id=product["id"], sizes=offered)
    require(size in offered, f"{product['name']} is not made in size {size}; sizes: {', '.join(offered)}",
            reason="VARIANT_NOT_FOUND", error=NotFound, product_id=product["id"], sizes=offered)
    return size


def _require_stock(product: dict[str, Any], size: str | None, wanted: int) -> None:
    available = _stock_of(product, size)
    label = product["name"] + (f" (size {size})" if size else "")
    require(available > 0, f"{label} is out of stock; try another size or add it to the wishlist",
            reason="OUT_OF_STOCK", product_id=product["id"], size=size)
    require(wanted <= available, f"only {available} of {label} in stock, {wanted} wanted; lower the quantity",
            reason="INSUFFICIENT_STOCK", product_id=product["id"], size=size, available=available)


def _adjust_stock(state: ShopState, product_id: str, size: str | None, delta: int) -> None:
    product = state.products.get(product_id)
    variants = [{**v, "stock": v["stock"] + delta} if v["size"] == size else v for v in product["variants"]]
    state.products.update(product_id, variants=variants, stock=sum(v["stock"] for v in variants))


def _promo_problem(state: ShopState, promo: dict[str, Any], subtotal: float) -> ToolError | None:
    """Why a promo cannot apply to a cart of this subtotal (checked on apply and again at checkout)."""
    if dt.date.fromisoformat(promo["expires_on"]) < state.today():
        return FailedPrecondition(f"promo code {promo['code']} expired on {promo['expires_on']}",
                                  reason="PROMO_EXPIRED", code=promo["code"], expired_on=promo["expires_on"])
    if subtotal < promo["min_subtotal"]:
        short = money(promo["min_subtotal"] - subtotal)
        return FailedPrecondition(f"{promo['code']} needs a subtotal of {promo['min_subtotal']:.2f}; "
                                  f"add {short:.2f} more",
                                  reason="PROMO_MINIMUM_NOT_MET", code=promo["code"], minimum=promo["min_subtotal"],
                                  subtotal=subtotal, short_by=short)
    return None


def _totals(subtotal: float, promo: dict[str, Any] | None, speed: str) -> dict[str, Any]:
    """Discount, shipping, tax and total for a subtotal; ``promo`` is one that applies, or None."""
    discount = 0.0
    if promo is not None and promo["kind"] == "percent":
        discount = money(subtotal * promo["value"] / 100)
    elif promo is not None and promo["kind"] == "fixed":
        discount = min(promo["value"], subtotal)
    after = money(subtotal - discount)
    free_standard = after >= FREE_STANDARD_SHIPPING_OVER or (promo is not None and promo["kind"] == "free_shipping")
    shipping = 0.0 if subtotal == 0 or (speed == "standard" and free_standard) else SHIPPING[speed][0]
    tax = money(after * TAX_RATE)
    return {"subtotal": subtotal, "discount": discount, "shipping_cost": shipping, "tax": tax,
            "total": money(after + shipping + tax)}


def _delivery_date(start: dt.date, speed: str, region: str) -> dt.date:
    _, days = SHIPPING[speed]
    return start + dt.timedelta(days=days + (1 if region in FAR_REGIONS and speed != "overnight" else 0))


def _card_expired(card: dict[str, Any], today: dt.date) -> bool:
    return (card["exp_year"], card["exp_month"]) < (today.year, today.month)


def _card_label(card: dict[str, Any]) -> str:
    return f"{card['brand']} ending {card['last4']}"


def _order_item(state: ShopState, product: dict[str, Any], size: str | None, quantity: int) -> dict[str, Any]:
    return {"id": state.new_id("oit"), "product_id": product["id"], "name": product["name"], "size": size,
            "quantity": quantity, "unit_price": product["price"], "final_sale": product["final_sale"],
            "returned_quantity": 0}


def _insert_order(state: ShopState, items: list[dict[str, Any]], *, address: dict[str, Any], payment: dict[str, Any],
                  speed: str, promo: dict[str, Any] | None, placed_at: dt.datetime, status: str,
                  rng: random.Random | None = None, delivered_on: dt.date | None = None) -> dict[str, Any]:
    """Store an order with its totals and shipment. Only seeded history is already shipped; its
    carrier and tracking number come from ``rng``."""
    subtotal = money(sum(i["unit_price"] * i["quantity"] for i in items))
    eta = _delivery_date(placed_at.date(), speed, address["region"])
    events = [{"date": placed_at.isoformat(), "status": "order_placed", "location": None}]
    carrier = tracking = None
    if status in ("shipped", "delivered") and rng is not None:
        carrier, tracking = rng.choice(CARRIERS), f"1Z{fake.digits(rng, 16)}"
        shipped = placed_at + dt.timedelta(days=1)
        events.append({"date": shipped.isoformat(), "status": "shipped", "location": WAREHOUSE})
        events.append(
            {"date": (shipped + dt.timedelta(days=1)).isoformat(), "status": "in_transit", "location": "regional hub"})
    if delivered_on is not None:
        eta = delivered_on
        events.append(
            {"date": f"{delivered_on.isoformat()}T15:30:00+00:00", "status": "delivered", "location": address["city"]})
    shipment_status = {"pending": "preparing", "processing": "preparing", "shipped": "in_transit"}.get(status, status)
    return state.orders.insert({
        "status": status,
        "placed_at": placed_at.isoformat(),
        "items": items,
        "promo_code": None if promo is None else promo["code"],
        **_totals(subtotal, promo, speed),
        "shipping_speed": speed,
        "address_id": address["id"],
        "ship_to": {k: address[k] for k in ("full_name", "line1", "line2", "city", "region", "postal_code", "country")},
        "payment_method_id": payment["id"],
        "payment_summary": _card_label(payment),
        "delivered_on": None if delivered_on is None else delivered_on.isoformat(),
        "cancelled_at": placed_at.isoformat() if status == "cancelled" else None,
        "cancel_reason": "changed_mind" if status == "cancelled" else None,
        "shipment": {"carrier": carrier, "tracking_number": tracking, "status": shipment_status,
                     "estimated_delivery": eta.isoformat(), "events": events},
    })


def _refund_amount(order: dict[str, Any], item: dict[str, Any], quantity: int) -> float:
    """What the customer paid for these units: list price less their share of the order discount, plus tax."""
    share = 0.0 if order["subtotal"] == 0 else order["discount"] / order["subtotal"]
    return money(item["unit_price"] * quantity * (1 - share) * (1 + TAX_RATE))


# -- views (what tools return) --------------------------------------------------------------------


def _product_card(p: dict[str, Any]) -> dict[str, Any]:
    return {"id": p["id"], "name": p["name"], "brand": p["brand"], "category": p["category"], "price": p["price"],
            "rating": p["rating"], "review_count": p["review_count"], "in_stock": p["stock"] > 0,
            "sizes": [v["size"] for v in p["variants"] if v["size"]], "final_sale": p["final_sale"]}


def _cart_view(state: ShopState) -> dict[str, Any]:
    lines = []
    for item in state.cart_items.all():
        product = state.products.get(item["product_id"])
        lines.append({"cart_item_id": item["id"], "product_id": product["id"], "name": product["name"],
                      "size": item["size"], "quantity": item["quantity"], "unit_price": product["price"],
                      "line_total": money(product["price"] * item["quantity"]), "final_sale": product["final_sale"],
                      "in_stock": _stock_of(product, item["size"]) >= item["quantity"]})
    subtotal = money(sum(line["line_total"] for line in lines))
    promo, problem = _current_promo(state, subtotal)
    totals = _totals(subtotal, promo if problem is None else None, "standard")
    code = state.get_var("promo_code")
    return {
        "items": lines,
        "item_count": sum(line["quantity"] for line in lines),
        "promo": None if code is None else {"code": code, "applied": problem is None,
                                            "problem": None if problem is None else problem.reason},
        **totals,
        "shipping_speed": "standard",
        "coupons": [{"code": p["code"], "description": p["description"], "min_subtotal": p["min_subtotal"],
                     "expires_on": p["expires_on"], "expired": dt.date.fromisoformat(p["expires_on"]) < state.today()}
                    for p in state.promos.all()],
    }


def _current_promo(state: ShopState, subtotal: float) -> tuple[dict[str, Any] | None, ToolError | None]:
    code = state.get_var("promo_code")
    if code is None:
        return None, None
    promo = state.promos.get(code)
    return promo, _promo_problem(state, promo, subtotal)


def _return_window_end(order: dict[str, Any]) -> dt.date | None:
    delivered = order["delivered_on"]
    return None if delivered is None else dt.date.fromisoformat(delivered) + dt.timedelta(days=RETURN_WINDOW_DAYS)


def _order_view(state: ShopState, order: dict[str, Any]) -> dict[str, Any]:
    window_ends = _return_window_end(order)
    return {**order, "cancellable": order["status"] in ("pending", "processing"),
            "return_window_ends": None if window_ends is None else window_ends.isoformat(),
            "returnable": window_ends is not None and state.today() <= window_ends}


def _payment_view(state: ShopState, card: dict[str, Any]) -> dict[str, Any]:
    return {**card, "label": _card_label(card), "expired": _card_expired(card, state.today())}


# -- examples (computed from the live state, so they hold for any seed) -----------------------------


def _returnable_item(s: ShopState) -> dict[str, Any]:
    """An order item a fresh session can return: delivered in the window, not final sale."""
    for order in s.orders.where(lambda o: _order_view(s, o)["returnable"]):
        for item in order["items"]:
            if not item["final_sale"] and item["returned_quantity"] < item["quantity"]:
                return {"order_id": order["id"], "order_item_id": item["id"], "quantity": 1, "reason": "does_not_fit"}
    raise LookupError("seed has no returnable order item")


def _reviewable_product(s: ShopState) -> str:
    reviewed = {r["product_id"] for r in s.reviews.where(by_you=True)}
    for order in s.orders.where(status="delivered"):
        for item in order["items"]:
            if item["product_id"] not in reviewed:
                return item["product_id"]
    raise LookupError("seed has no delivered product left to review")


def _usable_card(s: ShopState) -> str:
    return s.payment_methods.first(lambda c: not _card_expired(c, s.today()))["id"]


def _review(rng: random.Random, s: ShopState, args: Record | None = None) -> Record:
    """A review as a customer writes it: a rating, and a headline and text that say that rating."""
    rating = rng.choice((5, 5, 4, 4, 3, 2, 1))
    titles, bodies = REVIEW_TEXT[rating]
    return {"rating": rating, "headline": rng.choice(titles), "body": rng.choice(bodies)}


def _size_for(rng: random.Random, s: ShopState, args: Record | None = None) -> str | None:
    """A size of the call's product, one in stock when any is; None for a product without sizes
    (the call leaves it out). Without a product, any size."""
    product = s.products.find((args or {}).get("product_id") or "")
    if product is None:
        return rng.choice(SIZES)
    sizes = [v["size"] for v in product["variants"] if v["size"]]
    stocked = [v["size"] for v in product["variants"] if v["size"] and v["stock"] > 0]
    return rng.choice(stocked or sizes) if sizes else None


def _return_request(rng: random.Random, s: ShopState, args: Record | None = None) -> Record:
    """Why a customer returns the call's item, and the note that says so (it does not fit only
    when it comes in sizes)."""
    order = s.orders.find((args or {}).get("order_id") or "")
    item = next((i for i in (order or {}).get("items", ()) if i["id"] == (args or {}).get("order_item_id")), None)
    reasons = [r for r in typing.get_args(ReturnReason) if r != "does_not_fit" or item is None or item["size"]]
    reason = rng.choice(reasons)
    return {"reason": reason, "comment": rng.choice(RETURN_NOTES.get(reason, ("Please send a prepaid label.",)))}


# -- the server and its tools -------------------------------------------------------------------

server = Server(
    "shopping",
    domain="commerce",
    description="An online store for one signed-in customer: catalog search, cart and promo codes, "
    "checkout, orders and shipment tracking, returns and refunds, reviews and a wishlist.",
    state=ShopState,
    seed=build_shop,
    options=ShopOptions,
)


@server.tool(
    answers=("price", "rating", "in_stock"),
    read_only=True,
    reads=["product"],
    errors=["BAD_PRICE_RANGE"],
    examples=[lambda s: {"query": s.products.first()["kind"].split()[0].lower()},
              {"category": "apparel", "max_price": 80, "in_stock_only": True, "sort": "price_asc"}],
    asks=lambda a: ("find in-stock {category} items under ${max_price}, sorted by {sort}",
                    "show me {query} that's actually in stock", "search for {query} I can buy right now") if a.get(
        "in_stock_only") else ("search for {query}", "find {query} in the store",
                               "show me {category} products between ${min_price} and ${max_price}",
                               "look for {query} sorted by {sort}", "list {limit} {category} products"),
)
def search_products(
    state: ShopState,
    query: Annotated[
        str | None, Field(max_length=100, description="Words to find in name, brand and description; all must match.")
    ] = None,
    category: Annotated[Category | None, Field(description="Only products in this category.")] = None,
    min_price: Annotated[float | None, Field(ge=0, description="Lowest unit price in USD.")] = None,
    max_price: Annotated[float | None, Field(ge=0, description="Highest unit price in USD.")] = None,
    in_stock_only: Annotated[bool, Field(description="Leave out products with no stock in any size.")] = False,
    sort: Annotated[
        Literal["relevance", "price_asc", "price_desc", "rating", "newest"], Field(description="Result order.")
    ] = "relevance",
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict:
    """Search the catalog. Returns a page of product cards (id, name, brand, category, price, rating,
    in_stock, sizes, final_sale), the total match count, next_offset, and match counts per category
    (facets). Fails with BAD_PRICE_RANGE when min_price is above max_price."""
    require(min_price is None or max_price is None or min_price <= max_price,
            f"min_price {min_price} is above max_price {max_price}", reason="BAD_PRICE_RANGE", error=InvalidArgument)
    terms = [t.rstrip("s") for t in (query or "").lower().split()]  # crude plural folding: "earbuds" finds "earbud"

    def matches(p: dict[str, Any]) -> bool:
        return ((category is None or p["category"] == category) and (min_price is None or p["price"] >= min_price)
                and (max_price is None or p["price"] <= max_price) and (not in_stock_only or p["stock"] > 0))

    scored = []
    for p in state.products.where(matches):
        name = p["name"].lower()
        text = f"{name} {p['brand'].lower()} {p['category']} {p['color']} {p['description'].lower()}"
        if all(t in text for t in terms):
            scored.append((sum(2 if t in name else 1 for t in terms), p))
    orders = {
        "relevance": lambda sp: (-sp[0], -(sp[1]["rating"] or 0)),
        "price_asc": lambda sp: sp[1]["price"],
        "price_desc": lambda sp: -sp[1]["price"],
        "rating": lambda sp: (-(sp[1]["rating"] or 0), -sp[1]["review_count"]),
        "newest": lambda sp: -dt.date.fromisoformat(sp[1]["added_on"]).toordinal(),
    }
    scored.sort(key=orders[sort])  # stable: ties keep catalog order
    facets: dict[str, int] = {}
    for _, p in scored:
        facets[p["category"]] = facets.get(p["category"], 0) + 1
    page = paginate([_product_card(p) for _, p in scored], limit=limit, offset=offset, key="products")
    return {**page, "facets": facets}


@server.tool(
    answers=("price", "rating", "in_stock"),
    read_only=True,
    reads=["product", "wishlist_item"],
    errors=["PRODUCT_NOT_FOUND"],
    examples=[lambda s: {"product_id": s.products.first(lambda p: p["stock"] > 0)["id"]},
              lambda s: {"product_id": s.products.first(sized=True)["id"]}],
    asks=("show me {product_id}", "tell me more about {product_id}", "what sizes of {product_id} are in stock",
          "can I return {product_id} if it doesn't work out"),
)
def get_product(state: ShopState, product_id: ProductId) -> dict:
    """Full details of one product: description, price, color, rating with its star histogram,
    every variant (size) with its stock, whether it is final sale (not returnable), its return
    policy and whether it is on the wishlist. Fails with PRODUCT_NOT_FOUND for an unknown id."""
    product = state.products.get(product_id)
    policy = (
        "Final sale: cannot be returned." if product["final_sale"]
        else f"Returnable within {RETURN_WINDOW_DAYS} days of delivery."
    )
    return {**product, "variants": [{**v, "in_stock": v["stock"] > 0} for v in product["variants"]],
            "return_policy": policy, "in_wishlist": state.wishlist.first(product_id=product_id) is not None}


@server.tool(
    answers=("item_count", "subtotal", "total"),
    read_only=True,
    reads=["cart", "cart_item", "product", "promo"],
    examples=[{}],
    asks=("what's in my cart", "show me my cart and the total", "how much is my cart right now"),
)
def get_cart(state: ShopState) -> dict:
    """The shopping cart: its lines (cart_item_id, product, size, quantity, unit price, whether
    still in stock), the promo code on it and whether it applies, subtotal, discount, standard
    shipping, tax and total, plus the customer's coupons (codes, terms, expiry)."""
    return _cart_view(state)


@server.tool(
    reads=["product"],
    produces=["cart_item"],
    mutates=["cart"],
    errors=["PRODUCT_NOT_FOUND", "VARIANT_REQUIRED", "VARIANT_NOT_APPLICABLE", "VARIANT_NOT_FOUND", "OUT_OF_STOCK",
            "INSUFFICIENT_STOCK", "MAX_QUANTITY_EXCEEDED"],
    examples=[
        lambda s: {"product_id": s.products.first(lambda p: p["stock"] > 0 and not p["sized"])["id"], "quantity": 1},
        lambda s: (lambda p: {"product_id": p["id"], "size": next(v["size"] for v in p["variants"] if v["stock"] > 0)})(
            s.products.first(lambda p: p["sized"] and p["stock"] > 0)),
    ],
    asks=lambda a: ("add {product_id} in size {size} to my cart",
                    "put {quantity} of {product_id} in size {size} in my cart",
                    "grab {product_id} for me in a size {size}") if a.get("size") else (
        "add {product_id} to my cart", "put {quantity} of {product_id} in my cart", "toss {product_id} into the cart",
        "get me {quantity} of {product_id} in my cart"),
    values={"quantity": lambda rng, s: rng.choice((1, 1, 1, 2, 2, 3)), "size": _size_for},
)
def add_to_cart(
    state: ShopState,
    product_id: ProductId,
    quantity: Annotated[int, Field(ge=1, le=MAX_LINE_QUANTITY, description="How many units to add.")] = 1,
    size: Annotated[
        Size | None, Field(description="Size variant; required for sized products (apparel, some sportswear).")
    ] = None,
) -> dict:
    """Add units of a product (in one size) to the cart; a product already in the cart in that size
    gets its quantity raised. Returns the added line and the whole cart. Fails with VARIANT_REQUIRED
    (sized product, no size), VARIANT_NOT_APPLICABLE, VARIANT_NOT_FOUND (size not made),
    OUT_OF_STOCK, INSUFFICIENT_STOCK (counting units already in the cart) or MAX_QUANTITY_EXCEEDED
    (more than 20 of one item)."""
    product = state.products.get(product_id)
    size = _resolve_size(product, size)
    line = state.cart_items.first(product_id=product_id, size=size)
    total = quantity + (line["quantity"] if line else 0)
    require(total <= MAX_LINE_QUANTITY, f"at most {MAX_LINE_QUANTITY} of one item per order; the cart would hold "
            f"{total}", reason="MAX_QUANTITY_EXCEEDED", limit=MAX_LINE_QUANTITY)
    _require_stock(product, size, total)
    if line is None:
        line = state.cart_items.insert(
            {"product_id": product_id, "size": size, "quantity": total, "added_at": state.now().isoformat()})
    else:
        line = state.cart_items.update(line["id"], quantity=total)
    return {"added": {"cart_item_id": line["id"], "product_id": product_id, "size": size, "quantity": total},
            "cart": _cart_view(state)}


@server.tool(
    idempotent=True,
    reads=["product"],
    mutates=["cart", "cart_item"],
    errors=["CART_ITEM_NOT_FOUND", "OUT_OF_STOCK", "INSUFFICIENT_STOCK"],
    examples=[lambda s: {"cart_item_id": s.cart_items.first()["id"], "quantity": 1}],
    asks=("change {cart_item_id} to {quantity}", "set the quantity of {cart_item_id} to {quantity}",
          "make it {quantity} of {cart_item_id} in my cart", "update {cart_item_id} in my cart to {quantity} units"),
    values={"quantity": lambda rng, s: rng.choice((1, 2, 3))},
)
def update_cart_item(
    state: ShopState,
    cart_item_id: Annotated[str, ref("cart_item", "Id of a cart line, from get_cart (cit_...).")],
    quantity: Annotated[int, Field(ge=1, le=MAX_LINE_QUANTITY, description="The new quantity for this line.")],
) -> dict:
    """Set the quantity of one cart line (use remove_from_cart to drop it). Returns the whole cart.
    Fails with CART_ITEM_NOT_FOUND, OUT_OF_STOCK or INSUFFICIENT_STOCK."""
    line = state.cart_items.get(cart_item_id)
    _require_stock(state.products.get(line["product_id"]), line["size"], quantity)
    state.cart_items.update(cart_item_id, quantity=quantity)
    return _cart_view(state)


@server.tool(
    destructive=True,
    idempotent=True,
    mutates=["cart", "cart_item"],
    errors=["CART_ITEM_NOT_FOUND"],
    examples=[lambda s: {"cart_item_id": s.cart_items.first()["id"]}],
    asks=("remove {cart_item_id} from my cart", "take {cart_item_id} out of the cart",
          "delete {cart_item_id} from my cart"),
)
def remove_from_cart(
    state: ShopState,
    cart_item_id: Annotated[str, ref("cart_item", "Id of the cart line to remove, from get_cart (cit_...).")],
) -> dict:
    """Remove one line from the cart. Returns the whole cart (a promo code stays on it even when
    the cart no longer meets its minimum). Fails with CART_ITEM_NOT_FOUND."""
    state.cart_items.delete(cart_item_id)
    return _cart_view(state)


@server.tool(
    idempotent=True,
    reads=["promo", "cart_item", "product"],
    mutates=["cart"],
    errors=["CART_EMPTY", "PROMO_NOT_FOUND", "PROMO_EXPIRED", "PROMO_MINIMUM_NOT_MET"],
    examples=[{"code": "WELCOME10"}],
    asks=("apply the code {code}", "use promo code {code} on my cart", "redeem {code} on my order",
          "add the discount code {code}"),
    values={"code": lambda rng, s: (lambda code: rng.choice((code, code.lower())))(
        rng.choice([p["code"] for p in s.promos.all() if p["expires_on"] >= s.today().isoformat()]))},
)
def apply_promo_code(
    state: ShopState,
    code: Annotated[str, Field(min_length=3, max_length=20, pattern=r"^[A-Za-z0-9]+$",
                               description="The promo code, e.g. WELCOME10 (case does not matter).")],
) -> dict:
    """Put a promo code on the cart, replacing any code already there (one code per order). Returns
    the cart with the discount. Fails with CART_EMPTY, PROMO_NOT_FOUND, PROMO_EXPIRED, or
    PROMO_MINIMUM_NOT_MET (details say how much more to add)."""
    require(len(state.cart_items) > 0, "the cart is empty; add items before applying a promo code", reason="CART_EMPTY")
    promo = state.promos.get(code.upper())
    subtotal = _cart_view(state)["subtotal"]
    problem = _promo_problem(state, promo, subtotal)
    if problem is not None:
        raise problem
    state.set_var("promo_code", promo["code"])
    return _cart_view(state)


@server.tool(
    answers=("cost", "estimated_delivery"),
    read_only=True,
    reads=["address", "cart_item", "product", "promo"],
    errors=["ADDRESS_NOT_FOUND"],
    examples=[lambda s: {"address_id": s.addresses.first(is_default=True)["id"]}, {}],
    asks=("what are my shipping options", "how much is shipping to {address_id}",
          "when would it arrive if I ship to {address_id}", "compare the shipping speeds and costs"),
)
def get_shipping_options(
    state: ShopState,
    address_id: Annotated[str | None, ref("address", "Where to ship; the default address when omitted.")] = None,
) -> dict:
    """Shipping speeds (standard, express, overnight) for the current cart to an address, each with
    its cost and estimated delivery date. Standard is free over $50 after discounts or with a
    free-shipping code. Fails with ADDRESS_NOT_FOUND."""
    address = state.addresses.get(address_id) if address_id else state.addresses.first(is_default=True)
    cart = _cart_view(state)
    promo, problem = _current_promo(state, cart["subtotal"])
    applicable = promo if problem is None else None
    options = [{"speed": speed, "cost": _totals(cart["subtotal"], applicable, speed)["shipping_cost"],
                "estimated_delivery": _delivery_date(state.today(), speed, address["region"]).isoformat()}
               for speed in SHIPPING]
    return {"address_id": address["id"], "region": address["region"], "cart_subtotal": cart["subtotal"],
            "free_standard_shipping_over": FREE_STANDARD_SHIPPING_OVER, "options": options}


@server.tool(
    destructive=True,  # the cart's lines are deleted once they are ordered
    reads=["cart_item", "address", "payment_method", "promo"],
    produces=["order"],
    mutates=["cart", "product"],
    errors=["CART_EMPTY", "ADDRESS_NOT_FOUND", "PAYMENT_METHOD_NOT_FOUND", "PAYMENT_METHOD_EXPIRED", "OUT_OF_STOCK",
            "INSUFFICIENT_STOCK", "PROMO_EXPIRED", "PROMO_MINIMUM_NOT_MET"],
    examples=[lambda s: {"address_id": s.addresses.first(is_default=True)["id"], "payment_method_id": _usable_card(s)}],
    asks=("check out with {payment_method_id} and ship to {address_id}",
          "place my order using {shipping_speed} shipping", "buy what's in my cart, paying with {payment_method_id}",
          "complete checkout with {shipping_speed} delivery to {address_id}"),
    values={"shipping_speed": lambda rng, s: rng.choice(tuple(SHIPPING))},
)
def checkout(
    state: ShopState,
    address_id: Annotated[str, ref("address", "Shipping address id, from list_addresses or add_address.")],
    payment_method_id: Annotated[str, ref("payment_method", "Card to charge, from list_payment_methods.")],
    shipping_speed: Annotated[
        ShippingSpeed, Field(description="How fast to ship; see get_shipping_options for prices.")
    ] = "standard",
) -> dict:
    """Place an order for everything in the cart: stock is reserved, the card charged, the cart
    emptied and its promo code used. Returns the new order (id, items, totals, estimated delivery).
    Fails with CART_EMPTY, PAYMENT_METHOD_EXPIRED, OUT_OF_STOCK / INSUFFICIENT_STOCK (some line
    can no longer be filled), PROMO_EXPIRED or PROMO_MINIMUM_NOT_MET (the cart's code no longer
    applies: add items or apply another code), or NOT_FOUND for the address or payment method."""
    require(len(state.cart_items) > 0, "the cart is empty; add items with add_to_cart first", reason="CART_EMPTY")
    address = state.addresses.get(address_id)
    card = state.payment_methods.get(payment_method_id)
    require(not _card_expired(card, state.today()),
            f"{_card_label(card)} expired {card['exp_month']:02d}/{card['exp_year']}; choose another payment method",
            reason="PAYMENT_METHOD_EXPIRED", payment_method_id=payment_method_id)
    lines = state.cart_items.all()
    products = {line["id"]: state.products.get(line["product_id"]) for line in lines}
    for line in lines:  # one line per product and size, so each line checks its own stock
        _require_stock(products[line["id"]], line["size"], line["quantity"])
    promo, problem = _current_promo(state, money(sum(products[li["id"]]["price"] * li["quantity"] for li in lines)))
    if problem is not None:
        raise problem
    # Every check passed: from here on nothing fails.
    items = [_order_item(state, products[line["id"]], line["size"], line["quantity"]) for line in lines]
    for line in lines:
        _adjust_stock(state, line["product_id"], line["size"], -line["quantity"])
        state.cart_items.delete(line["id"])
    state.set_var("promo_code", None)
    order = _insert_order(state, items, address=address, payment=card, speed=shipping_speed, promo=promo,
                          placed_at=state.now(), status="pending")
    return _order_view(state, order)


@server.tool(
    answers=("line1", "city", "is_default"),
    read_only=True,
    reads=["address"],
    examples=[{}],
    asks=("show my saved addresses", "list my addresses", "which addresses do I have on file"),
)
def list_addresses(state: ShopState) -> dict:
    """The customer's saved shipping addresses (id, label, name, street, city, region, postal code),
    the default one first."""
    addresses = sorted(state.addresses.all(), key=lambda a: not a["is_default"])
    return {"addresses": addresses, "total": len(addresses)}


@server.tool(
    idempotent=True,
    produces=["address"],
    mutates=["address"],
    errors=["ADDRESS_ALREADY_EXISTS", "ADDRESS_LIMIT_REACHED"],
    examples=[{"line1": "500 Harbor Blvd", "city": "Seattle", "region": "WA", "postal_code": "98101",
               "label": "other"}],
    asks=lambda a: (
        "add {line1}, {city}, {region} {postal_code} and make it my default address",
        "save {line1} in {city}, {region} {postal_code} as my new default shipping address",
        "set {line1}, {city}, {region} {postal_code} as my default, it's my {label} address") if a.get(
        "make_default") else (
        "add the address {line1}, {city}, {region} {postal_code}",
        "save a new address: {line1}, {line2}, {city}, {region} {postal_code}",
        "add {line1} in {city}, {region} {postal_code} as my {label} address",
        "save {line1}, {city} {region} {postal_code} for {full_name}"),
    values={"line1": lambda rng, s: fake.address(rng)["line1"], "city": lambda rng, s: rng.choice(fake.CITIES)[0],
            "region": lambda rng, s: rng.choice(fake.CITIES)[1],
            "postal_code": lambda rng, s: rng.choice(fake.CITIES)[2],
            "line2": lambda rng, s: rng.choice(UNITS), "full_name": lambda rng, s: fake.full_name(rng),
            "label": lambda rng, s: rng.choice(("home", "work", "other"))},
)
def add_address(
    state: ShopState,
    line1: Annotated[str, Field(min_length=3, max_length=100, description="Street address, e.g. '12 Oak St'.")],
    city: Annotated[str, Field(min_length=2, max_length=60, description="City.")],
    region: Annotated[str, Field(pattern=r"^[A-Z]{2}$", description="Two-letter US state code, e.g. 'WA'.")],
    postal_code: Annotated[str, Field(pattern=r"^[0-9]{5}$", description="Five-digit ZIP code.")],
    line2: Annotated[str | None, Field(max_length=100, description="Apartment, suite or unit.")] = None,
    full_name: Annotated[
        str | None, Field(max_length=80, description="Recipient; the customer's own name when omitted.")
    ] = None,
    label: Annotated[Literal["home", "work", "other"], Field(description="What this address is.")] = "other",
    make_default: Annotated[bool, Field(description="Make this the default shipping address.")] = False,
) -> dict:
    """Save a new US shipping address and return it with its id (usable in checkout). Fails with
    ADDRESS_ALREADY_EXISTS (same street and ZIP already saved; its id is in the details) or
    ADDRESS_LIMIT_REACHED (10 saved addresses)."""
    existing = state.addresses.first(lambda a: a["line1"].lower() == line1.lower() and a["postal_code"] == postal_code
                                     and (a["line2"] or "").lower() == (line2 or "").lower())
    require(existing is None, f"{line1}, {postal_code} is already saved", reason="ADDRESS_ALREADY_EXISTS",
            error=Conflict, address_id=existing and existing["id"])
    require(len(state.addresses) < MAX_ADDRESSES, f"at most {MAX_ADDRESSES} saved addresses; saved ones cannot be "
            "deleted here, so reuse one", reason="ADDRESS_LIMIT_REACHED", error=ResourceExhausted)
    if make_default:
        for other in state.addresses.where(is_default=True):
            state.addresses.update(other["id"], is_default=False)
    return state.addresses.insert({
        "label": label, "full_name": full_name or state.get_var("customer")["name"], "line1": line1, "line2": line2,
        "city": city, "region": region, "postal_code": postal_code, "country": "US",
        "is_default": make_default or len(state.addresses) == 0,
    })


@server.tool(
    answers=("brand", "last4", "is_default"),
    read_only=True,
    reads=["payment_method"],
    examples=[{}],
    asks=("show my saved cards", "which payment methods do I have", "list my cards and when they expire"),
)
def list_payment_methods(state: ShopState) -> dict:
    """The customer's saved cards (id, brand, last 4 digits, expiry, whether expired, default).
    An expired card cannot be used at checkout."""
    return {"payment_methods": [_payment_view(state, c) for c in state.payment_methods.all()]}


@server.tool(
    answers=("status", "total", "placed_at"),
    read_only=True,
    reads=["order"],
    examples=[{}, {"status": "delivered"}],
    asks=("show my orders", "list my {status} orders", "what have I ordered recently", "show my last {limit} orders"),
)
def list_orders(
    state: ShopState,
    status: Annotated[OrderStatus | None, Field(description="Only orders in this status.")] = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict:
    """The customer's orders, newest first: id, status, date placed, total, item count and item names.
    Use get_order for the full order."""
    orders = state.orders.where() if status is None else state.orders.where(status=status)
    orders.sort(key=lambda o: o["placed_at"], reverse=True)
    summaries = [{"id": o["id"], "status": o["status"], "placed_at": o["placed_at"], "total": o["total"],
                  "item_count": sum(i["quantity"] for i in o["items"]), "items": [i["name"] for i in o["items"]]}
                 for o in orders]
    return paginate(summaries, limit=limit, offset=offset, key="orders")


@server.tool(
    answers=("status", "total", "estimated_delivery"),
    read_only=True, reads=["order", "order_item"], errors=["ORDER_NOT_FOUND"],
    examples=[lambda s: {"order_id": s.orders.first()["id"]}],
    asks=("show me {order_id}", "what's in {order_id}", "give me the details of {order_id}",
          "can I still cancel or return {order_id}"),
)
def get_order(state: ShopState, order_id: OrderId) -> dict:
    """One order in full: items (each with its id, the order_item_id start_return takes, size, price,
    final_sale and units already returned), totals, promo code, shipping address, payment, shipment,
    whether it can still be cancelled and the last day of its return window. Fails with ORDER_NOT_FOUND."""
    return _order_view(state, state.orders.get(order_id))


@server.tool(
    destructive=True,
    idempotent=True,
    mutates=["order", "product"],
    errors=["ORDER_NOT_FOUND", "ORDER_NOT_CANCELLABLE"],
    examples=[lambda s: {"order_id": s.orders.first(status="pending")["id"]}],
    asks=("cancel {order_id}", "cancel {order_id}, reason: {reason}", "call off {order_id}",
          "stop {order_id} before it ships"),
    values={"reason": lambda rng, s: rng.choice(("changed_mind", "found_cheaper", "ordered_by_mistake", "too_slow",
                                                 "other"))},
)
def cancel_order(
    state: ShopState,
    order_id: OrderId,
    reason: Annotated[
        Literal["changed_mind", "found_cheaper", "ordered_by_mistake", "too_slow", "other"],
        Field(description="Why the customer cancels."),
    ] = "changed_mind",
) -> dict:
    """Cancel an order that has not shipped yet (pending or processing): its items go back in stock
    and the charge is voided. Returns the cancelled order. Fails with ORDER_NOT_CANCELLABLE once
    the order has shipped, been delivered or been cancelled (start a return for delivered items)."""
    order = state.orders.get(order_id)
    require(order["status"] in ("pending", "processing"),
            f"order {order_id} is {order['status']} and can no longer be cancelled",
            reason="ORDER_NOT_CANCELLABLE", status=order["status"])
    for item in order["items"]:
        _adjust_stock(state, item["product_id"], item["size"], item["quantity"])
    cancelled = {"date": state.now().isoformat(), "status": "cancelled", "location": None}
    shipment = {**order["shipment"], "status": "cancelled", "events": [*order["shipment"]["events"], cancelled]}
    order = state.orders.update(order_id, status="cancelled", cancelled_at=state.now().isoformat(),
                                cancel_reason=reason, shipment=shipment)
    return {**_order_view(state, order), "refund": {"amount": order["total"], "status": "voided"}}


@server.tool(
    answers=("status", "estimated_delivery", "location"),
    read_only=True,
    reads=["order"],
    errors=["ORDER_NOT_FOUND", "ORDER_CANCELLED"],
    examples=[lambda s: {"order_id": s.orders.first(status="shipped")["id"]},
              lambda s: {"order_id": s.orders.first(status="pending")["id"]}],
    asks=("where is {order_id}", "track {order_id}", "when will {order_id} arrive", "show the tracking for {order_id}"),
)
def track_shipment(state: ShopState, order_id: OrderId) -> dict:
    """Where an order's parcel is: carrier, tracking number (once shipped), status (preparing,
    in_transit, delivered), estimated or actual delivery date and the tracking events. Fails with
    ORDER_CANCELLED for a cancelled order (nothing ships) or ORDER_NOT_FOUND."""
    order = state.orders.get(order_id)
    require(order["status"] != "cancelled", f"order {order_id} was cancelled; nothing ships", reason="ORDER_CANCELLED")
    return {"order_id": order_id, "order_status": order["status"], "delivered_on": order["delivered_on"],
            **order["shipment"]}


@server.tool(
    reads=["order"],
    produces=["return"],
    mutates=["order"],
    errors=["ORDER_NOT_FOUND", "ORDER_ITEM_NOT_FOUND", "NOT_DELIVERED", "RETURN_WINDOW_CLOSED", "FINAL_SALE",
            "RETURN_QUANTITY_EXCEEDED"],
    examples=[_returnable_item],
    asks=("return {order_item_id} from {order_id}, reason: {reason}",
          "send back {quantity} of {order_item_id} from {order_id}, the reason being {reason}",
          "return {order_item_id} ({reason}) with the note \"{comment}\"",
          "open a return on {order_id} for {order_item_id}, reason {reason}"),
    values={field: part_of(_return_request, field) for field in ("reason", "comment")},
)
def start_return(
    state: ShopState,
    order_id: OrderId,
    order_item_id: Annotated[str, ref("order_item", "Id of the item within the order (oit_...), from get_order.")],
    reason: Annotated[ReturnReason, Field(description="Why the item goes back.")],
    quantity: Annotated[
        int, Field(ge=1, le=MAX_LINE_QUANTITY, description="How many units of the item to return.")
    ] = 1,
    comment: Annotated[str | None, Field(max_length=500, description="Optional note for the returns desk.")] = None,
) -> dict:
    """Start a return for units of one delivered item. Returns the return (id, prepaid label, date to
    ship by) and its pending refund (amount paid for those units, to the original card). Fails with
    NOT_DELIVERED (order not delivered yet; cancel instead if it has not shipped),
    RETURN_WINDOW_CLOSED (more than 30 days after delivery), FINAL_SALE, RETURN_QUANTITY_EXCEEDED
    (more units than bought and not yet returned) or ORDER_ITEM_NOT_FOUND."""
    order = state.orders.get(order_id)
    item = require_found(next((i for i in order["items"] if i["id"] == order_item_id), None),
                         f"order {order_id} has no item {order_item_id!r}; see get_order",
                         reason="ORDER_ITEM_NOT_FOUND", id=order_item_id)
    require(order["status"] == "delivered",
            f"order {order_id} is {order['status']}; only delivered items can be returned",
            reason="NOT_DELIVERED", status=order["status"])
    window_ends = _return_window_end(order)  # set for every delivered order
    require(window_ends is not None and state.today() <= window_ends, f"the return window closed on {window_ends}",
            reason="RETURN_WINDOW_CLOSED", window_ended=str(window_ends))
    require(not item["final_sale"], f"{item['name']} was a final-sale item and cannot be returned", reason="FINAL_SALE")
    returnable = item["quantity"] - item["returned_quantity"]
    require(quantity <= returnable, f"only {returnable} unit(s) of {item['name']} can still be returned",
            reason="RETURN_QUANTITY_EXCEEDED", returnable=returnable)
    items = [{**i, "returned_quantity": i["returned_quantity"] + quantity} if i["id"] == order_item_id else i
             for i in order["items"]]
    state.orders.update(order_id, items=items)
    today = state.today()
    return state.returns.insert({
        "order_id": order_id, "order_item_id": order_item_id, "product_id": item["product_id"], "quantity": quantity,
        "reason": reason, "comment": comment, "status": "requested", "created_at": state.now().isoformat(),
        "ship_by": (today + dt.timedelta(days=RETURN_SHIP_BY_DAYS)).isoformat(),
        "return_label": {"carrier": "UPS", "tracking_number": f"1ZRET{state.next_counter('return_label'):011d}"},
        "refund": {
            "amount": _refund_amount(order, item, quantity), "status": "pending", "method": order["payment_summary"],
            "issued_on": None,
            "expected_by": (today + dt.timedelta(days=RETURN_SHIP_BY_DAYS + REFUND_PROCESSING_DAYS)).isoformat(),
        },
    })


@server.tool(
    answers=("amount", "status", "expected_by"),
    read_only=True, reads=["return"], errors=["RETURN_NOT_FOUND"],
    examples=[lambda s: {"return_id": s.returns.first()["id"]}],
    asks=("where is the refund for {return_id}", "has {return_id} been refunded yet",
          "check the refund status of {return_id}"),
)
def get_refund(
    state: ShopState,
    return_id: Annotated[str, ref("return", "Id of a return, from start_return (ret_...).")],
) -> dict:
    """The refund for a return: amount, status (pending until the parcel is received, then issued),
    where it goes, and when it was issued or is expected. Fails with RETURN_NOT_FOUND."""
    ret = state.returns.get(return_id)
    return {"return_id": return_id, "order_id": ret["order_id"], "return_status": ret["status"], **ret["refund"]}


@server.tool(
    answers=("rating", "body"),
    read_only=True,
    reads=["review", "product"],
    errors=["PRODUCT_NOT_FOUND"],
    examples=[
        lambda s: {"product_id": s.products.first(lambda p: p["review_count"] > 0)["id"], "sort": "highest_rated"}
    ],
    asks=("show the reviews of {product_id}", "what do people say about {product_id}",
          "show the {sort} reviews of {product_id}", "show reviews of {product_id} with at least {min_rating} stars"),
)
def list_reviews(
    state: ShopState,
    product_id: ProductId,
    sort: Annotated[Literal["newest", "highest_rated", "lowest_rated"], Field(description="Review order.")] = "newest",
    min_rating: Annotated[
        int | None, Field(ge=1, le=5, description="Only reviews with at least this many stars.")
    ] = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict:
    """Customer reviews of a product (author, stars, title, text, date, verified purchase, whether
    it is the signed-in customer's), with the product's average rating. Fails with PRODUCT_NOT_FOUND."""
    product = state.products.get(product_id)
    reviews = state.reviews.where(lambda r: r["product_id"] == product_id and r["rating"] >= (min_rating or 1))
    keys = {"newest": lambda r: r["created_on"], "highest_rated": lambda r: (r["rating"], r["created_on"]),
            "lowest_rated": lambda r: (-r["rating"], r["created_on"])}
    reviews.sort(key=keys[sort], reverse=True)
    page = paginate(reviews, limit=limit, offset=offset, key="reviews")
    return {**page, "product_id": product_id, "rating": product["rating"], "review_count": product["review_count"]}


@server.tool(
    idempotent=True,
    reads=["order"],
    produces=["review"],
    mutates=["product"],
    errors=["PRODUCT_NOT_FOUND", "NOT_PURCHASED", "DUPLICATE_REVIEW"],
    examples=[
        lambda s: {"product_id": _reviewable_product(s), "rating": 5, "headline": "Great", "body": "Does what it says."}
    ],
    asks=("review {product_id}: {rating} stars, \"{headline}\", \"{body}\"",
          "leave a {rating}-star review on {product_id} titled \"{headline}\" saying \"{body}\"",
          "write a review for {product_id}, {rating} out of 5, headline \"{headline}\", text \"{body}\"",
          "rate {product_id} {rating} stars with the title \"{headline}\" and the text \"{body}\""),
    values={field: part_of(_review, field) for field in ("rating", "headline", "body")},
)
def write_review(
    state: ShopState,
    product_id: ProductId,
    rating: Annotated[int, Field(ge=1, le=5, description="Stars, 1 (worst) to 5 (best).")],
    # Named `headline`, not `title`: the toolkit's schema cleanup drops any key called "title".
    headline: Annotated[str, Field(min_length=1, max_length=80, description="One-line summary of the review.")],
    body: Annotated[str, Field(min_length=1, max_length=2000, description="The review text.")],
) -> dict:
    """Publish the customer's review of a product they bought and received; one review per product.
    Returns the review and the product's new average rating. Fails with NOT_PURCHASED (no delivered
    order contains it), DUPLICATE_REVIEW (already reviewed) or PRODUCT_NOT_FOUND."""
    state.products.get(product_id)
    bought = state.orders.first(
        lambda o: o["status"] == "delivered" and any(i["product_id"] == product_id for i in o["items"]))
    require(bought is not None, "only products from a delivered order can be reviewed; see list_orders",
            reason="NOT_PURCHASED", product_id=product_id)
    mine = state.reviews.first(product_id=product_id, by_you=True)
    require(mine is None, "you have already reviewed this product", reason="DUPLICATE_REVIEW", error=Conflict,
            review_id=mine and mine["id"])
    review = _insert_review(state, product_id, rating, author=state.get_var("customer")["name"], by_you=True,
                            created_on=state.today(), title=headline, body=body)
    _count_rating(state, product_id, rating)
    return {"review": review, "product_rating": state.products.get(product_id)["rating"]}


@server.tool(
    answers=("price", "in_stock"),
    read_only=True,
    reads=["wishlist_item", "product"],
    examples=[{}],
    asks=("show my wishlist", "what's on my wishlist", "list the things I've saved for later"),
)
def get_wishlist(state: ShopState) -> dict:
    """Products the customer saved for later, each with its current price and stock status, oldest first."""
    items = [{"product": _product_card(state.products.get(w["product_id"])), "added_at": w["added_at"]}
             for w in state.wishlist.all()]
    return {"items": items, "total": len(items)}


@server.tool(
    idempotent=True,
    reads=["product"],
    produces=["wishlist_item"],
    errors=["PRODUCT_NOT_FOUND", "ALREADY_IN_WISHLIST"],
    examples=[lambda s: {"product_id": s.products.first(lambda p: s.wishlist.first(product_id=p["id"]) is None)["id"]}],
    asks=("add {product_id} to my wishlist", "save {product_id} for later", "put {product_id} on my wishlist"),
)
def add_to_wishlist(state: ShopState, product_id: ProductId) -> dict:
    """Save a product (in stock or not) to the wishlist. Returns the wishlist. Fails with
    ALREADY_IN_WISHLIST or PRODUCT_NOT_FOUND."""
    state.products.get(product_id)
    require(state.wishlist.first(product_id=product_id) is None, "that product is already on the wishlist",
            reason="ALREADY_IN_WISHLIST", error=Conflict, product_id=product_id)
    state.wishlist.insert({"product_id": product_id, "added_at": state.now().isoformat()})
    return get_wishlist(state)


@server.tool(
    destructive=True,
    idempotent=True,
    mutates=["wishlist_item"],
    errors=["NOT_IN_WISHLIST"],
    examples=[lambda s: {"product_id": s.wishlist.first()["product_id"]}],
    asks=("remove {product_id} from my wishlist", "take {product_id} off my wishlist",
          "drop {product_id} from my wishlist"),
)
def remove_from_wishlist(state: ShopState, product_id: ProductId) -> dict:
    """Take a product off the wishlist. Returns the wishlist. Fails with NOT_IN_WISHLIST."""
    saved = require_found(state.wishlist.first(product_id=product_id),
                          "that product is not on the wishlist; see get_wishlist", reason="NOT_IN_WISHLIST",
                          product_id=product_id)
    state.wishlist.delete(saved["id"])
    return get_wishlist(state)


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
