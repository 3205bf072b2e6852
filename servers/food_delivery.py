"""food_delivery — a meal-delivery app for one signed-in customer in Portland: restaurants and their
opening hours, menus whose items come in sizes and with add-ons, a cart, promo codes, checkout to
a saved address with a tip, orders, live delivery tracking and ratings.

The city's restaurants and the customer share one time zone, and the session clock reads as local
time: "open now", the order timeline and tracking are judged against ``state.now()``. Times are
written ``YYYY-MM-DDTHH:MM``.

Rules a real app enforces, as typed failures: a cart holds items from one restaurant only
(CART_FROM_OTHER_RESTAURANT; pass start_new_cart to replace it), sizes and add-ons must be ones
the item offers (INVALID_OPTION), sold-out items cannot be ordered (ITEM_UNAVAILABLE), a closed
restaurant takes no orders (RESTAURANT_CLOSED), the subtotal must reach the restaurant's minimum
(BELOW_MINIMUM_ORDER), the address must lie within its delivery radius (OUTSIDE_DELIVERY_AREA).

Order timeline, fixed at checkout: the restaurant confirms 3 minutes after the order is placed and
starts cooking at 8 minutes; the courier leaves when the food is ready (the restaurant's prep
time) and arrives after the ride (4 minutes plus 3 per km). An order can be cancelled only
before cooking starts; it can be rated once, after delivery.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    MINUTE_FORMAT,
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    Record,
    Server,
    State,
    Table,
    fake,
    local_minute,
    lookup,
    minute_text,
    money,
    paginate,
    part_of,
    ref,
    require,
)

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
CONFIRM_AFTER_MIN = 3
COOKING_STARTS_MIN = 8  # no cancelling from here on
MAX_LINE_QUANTITY = 20
SERVICE_FEE_RATE, SERVICE_FEE_MIN, SERVICE_FEE_MAX = 0.10, 1.5, 6.0
TAX_RATE = 0.08
COURIERS = (("Marcus", "bike"), ("Priya", "scooter"), ("Tomasz", "car"), ("Keiko", "bike"), ("Andre", "car"))

Cuisine = Literal["pizza", "burgers", "sushi", "thai", "mexican", "indian", "mediterranean", "breakfast"]
Dietary = Literal["vegetarian", "vegan", "gluten_free", "halal"]
MenuCategory = Literal["mains", "sides", "desserts", "drinks"]
OrderStatus = Literal["placed", "confirmed", "preparing", "out_for_delivery", "delivered", "cancelled"]

# Neighbourhoods of the city: (name, postal code, x km east, y km north of the Pearl District).
NEIGHBORHOODS = (
    ("Pearl District", "97209", 0.0, 0.0), ("Downtown", "97204", 0.8, -1.2), ("Alberta Arts", "97211", 2.9, 4.8),
    ("Hawthorne", "97214", 3.4, -2.1), ("Sellwood", "97202", 2.2, -7.0), ("St. Johns", "97203", -4.5, 8.9),
    ("Hillsdale", "97239", -2.8, -4.4), ("Montavilla", "97215", 8.1, -1.0), ("Gresham", "97030", 20.5, -2.4),
)
SERVED = NEIGHBORHOODS[:8]  # restaurants sit here; Gresham is beyond every delivery radius

# Option groups. Sizes: one must be chosen when an item has them; add-ons: up to the group's max.
SIZES = {
    "pizza": (("small", 0.0), ("medium", 3.0), ("large", 6.0)),
    "drink": (("regular", 0.0), ("large", 1.0)),
    "bowl": (("regular", 0.0), ("large", 3.0)),
}
ADD_ONS = {  # group: (max chosen, ((id, price delta), ...))
    "pizza": (4, (("extra_cheese", 1.5), ("mushrooms", 1.25), ("pepperoni", 1.75), ("olives", 1.0),
                  ("jalapenos", 0.75), ("vegan_cheese", 2.0))),
    "burger": (3, (("bacon", 2.0), ("avocado", 1.75), ("extra_patty", 3.5), ("fried_egg", 1.5),
                   ("gluten_free_bun", 1.5))),
    "bowl": (3, (("add_tofu", 2.0), ("add_chicken", 3.0), ("add_shrimp", 4.0), ("extra_rice", 1.5),
                 ("extra_spicy", 0.0))),
    "sushi": (2, (("spicy_mayo", 0.75), ("brown_rice", 1.0), ("extra_ginger", 0.5))),
    "breakfast": (3, (("add_bacon", 2.5), ("add_avocado", 2.0), ("side_of_fruit", 3.0))),
    "coffee": (2, (("oat_milk", 0.75), ("extra_shot", 1.0), ("vanilla_syrup", 0.5))),
}
V, VG, GF, H = "vegetarian", "vegan", "gluten_free", "halal"
# Per cuisine: restaurant names and menu items (name, category, price, dietary tags, sizes, add-ons).
CUISINES: dict[str, dict[str, Any]] = {
    "pizza": {"names": ("Nonna's Pizzeria", "Brick Oven Co.", "Slice of Heaven"), "items": (
        ("Margherita Pizza", "mains", 13.0, (V,), "pizza", "pizza"),
        ("Pepperoni Pizza", "mains", 15.0, (), "pizza", "pizza"),
        ("Garden Veggie Pizza", "mains", 14.5, (V,), "pizza", "pizza"),
        ("Caesar Salad", "sides", 9.0, (V,), None, None),
        ("Garlic Knots", "sides", 6.0, (V, VG), None, None),
        ("Tiramisu", "desserts", 7.0, (V,), None, None),
        ("Sparkling Lemonade", "drinks", 3.5, (V, VG, GF), "drink", None))},
    "burgers": {"names": ("Griddle & Bun", "Patty Shack", "Smokehouse Burgers"), "items": (
        ("Classic Cheeseburger", "mains", 12.0, (), None, "burger"),
        ("Plant Patty Burger", "mains", 14.0, (V, VG), None, "burger"),
        ("Crispy Chicken Sandwich", "mains", 12.5, (), None, "burger"),
        ("Fries", "sides", 4.5, (V, VG, GF), "drink", None),
        ("Onion Rings", "sides", 5.5, (V,), None, None),
        ("Chocolate Shake", "drinks", 6.0, (V, GF), "drink", None))},
    "sushi": {"names": ("Sakura Sushi Bar", "Umi Roll House", "Koi Sushi"), "items": (
        ("California Roll", "mains", 8.0, (), None, "sushi"),
        ("Spicy Tuna Roll", "mains", 9.5, (), None, "sushi"),
        ("Avocado Roll", "mains", 7.0, (V, VG, GF), None, "sushi"),
        ("Salmon Nigiri (2 pc)", "mains", 6.5, (GF,), None, None),
        ("Miso Soup", "sides", 3.5, (V,), None, None),
        ("Edamame", "sides", 5.0, (V, VG, GF), None, None),
        ("Green Tea", "drinks", 2.5, (V, VG, GF), "drink", None))},
    "thai": {"names": ("Lemongrass Thai", "Bangkok Street Kitchen", "Siam Garden"), "items": (
        ("Pad Thai", "mains", 14.0, (), "bowl", "bowl"),
        ("Green Curry", "mains", 15.0, (GF,), "bowl", "bowl"),
        ("Tom Yum Soup", "mains", 12.0, (GF,), None, None),
        ("Fresh Spring Rolls", "sides", 7.0, (V, VG), None, None),
        ("Mango Sticky Rice", "desserts", 7.0, (V, VG, GF), None, None),
        ("Thai Iced Tea", "drinks", 4.5, (V,), "drink", None))},
    "mexican": {"names": ("Taqueria El Sol", "Casa Verde Cantina", "Burrito Barn"), "items": (
        ("Carnitas Burrito", "mains", 12.0, (), None, "bowl"),
        ("Veggie Burrito Bowl", "mains", 11.0, (V, VG, GF), "bowl", "bowl"),
        ("Chicken Tacos (3)", "mains", 11.0, (GF,), None, None),
        ("Chips & Guacamole", "sides", 6.0, (V, VG, GF), None, None),
        ("Churros", "desserts", 5.5, (V,), None, None),
        ("Horchata", "drinks", 4.0, (V, GF), "drink", None))},
    "indian": {"names": ("Saffron Spice", "Taj Tandoor", "Masala House"), "items": (
        ("Butter Chicken", "mains", 16.0, (GF, H), "bowl", "bowl"),
        ("Chana Masala", "mains", 13.0, (V, VG, GF, H), "bowl", "bowl"),
        ("Lamb Biryani", "mains", 18.0, (GF, H), None, None),
        ("Garlic Naan", "sides", 4.0, (V,), None, None),
        ("Vegetable Samosas (2)", "sides", 6.0, (V, VG, H), None, None),
        ("Mango Lassi", "drinks", 4.5, (V, GF), "drink", None))},
    "mediterranean": {"names": ("Olive & Fig", "Cedar Grill", "Aegean Kitchen"), "items": (
        ("Chicken Shawarma Plate", "mains", 15.0, (GF, H), None, "bowl"),
        ("Falafel Wrap", "mains", 11.0, (V, VG, H), None, None),
        ("Hummus & Pita", "sides", 7.0, (V, VG, H), None, None),
        ("Greek Salad", "sides", 10.0, (V, GF), None, None),
        ("Baklava", "desserts", 5.0, (V,), None, None),
        ("Mint Lemonade", "drinks", 4.0, (V, VG, GF), "drink", None))},
    "breakfast": {"names": ("Sunrise Café", "Morning Glory Diner", "The Daily Grind"), "items": (
        ("Avocado Toast", "mains", 11.0, (V, VG), None, "breakfast"),
        ("Buttermilk Pancakes", "mains", 12.0, (V,), None, "breakfast"),
        ("Breakfast Burrito", "mains", 12.0, (), None, "breakfast"),
        ("Granola Parfait", "sides", 8.0, (V, GF), None, None),
        ("Cappuccino", "drinks", 4.5, (V, GF), "drink", "coffee"),
        ("Fresh Orange Juice", "drinks", 5.0, (V, VG, GF), "drink", None))},
}
HOURS = {  # template: weekly intervals; monday listed separately because some places rest on Mondays
    "all_day": ((("08:00", "22:00"),), (("08:00", "22:00"),)),
    "breakfast": ((("07:00", "15:00"),), (("07:00", "15:00"),)),
    "lunch_dinner": ((("11:00", "22:00"),), (("11:00", "22:00"),)),
    "split": ((), (("11:30", "14:30"), ("17:00", "22:00"))),  # closed on Mondays
    "late": ((("12:00", "23:30"),), (("12:00", "23:30"),)),
}
PROMOS = (  # code, description, kind, value, minimum subtotal, expires in days (negative: expired)
    ("WELCOME5", "$5 off orders of $15 or more", "fixed", 5.0, 15.0, 60),
    ("FREEDEL", "Free delivery on orders of $20 or more", "free_delivery", 0.0, 20.0, 30),
    ("BIGORDER10", "10% off orders of $60 or more", "percent", 10.0, 60.0, 45),
    ("WINTER20", "20% off any order", "percent", 20.0, 0.0, -10),
)
HOUSE_PROMO = "HOUSE15"  # 15% off at restaurant #0 only

# What customers say when they ask for a tool (``asks``/``values``).
SEARCH_WORDS = ("sushi", "pizza", "thai", "burgers", "indian", "mexican", "kitchen", "grill", "diner", "taqueria",
                "masala", "breakfast")
KITCHEN_NOTES = ("No onions, please", "Extra crispy", "Sauce on the side", "Light on the salt", "No cilantro",
                 "Cut it into squares", "Extra napkins, please", "Make it extra spicy", "Dressing on the side",
                 "Well done, please")
DELIVERY_NOTES = ("Leave at the door", "Ring the bell when you arrive", "Call me when you're outside",
                  "Hand it to me, please", "Leave it with the front desk", "Knock quietly, the baby is asleep",
                  "Use the side entrance", "Meet me in the lobby", "Don't ring, just text me")
TIPS = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
REVIEWS = (  # (food stars, delivery stars, comment): value sources of one call share a seed, so they agree
    (5, 5, "Still hot and the courier was friendly."), (4, 2, "Great food, but it took a while."),
    (5, 4, "Generous portions, will order again."), (3, 2, "A bit cold on arrival."),
    (5, 5, "Exactly what I ordered, well packed."), (2, 4, "The fries were soggy."),
    (5, 4, "Best pizza in the neighborhood."), (3, 4, "Missing the extra sauce I asked for."),
    (4, 5, "Fast delivery and tasty food."),
)
CANCEL_REASONS = ("changed_mind", "ordered_by_mistake", "wrong_address", "too_slow", "other")


class DeliveryState(State):
    """The app as one signed-in customer sees it; the cart's promo code is the var ``promo_code``
    and the customer's profile the var ``customer``."""

    restaurants = Table("restaurant", prefix="rst", index=("cuisine",))
    menu_items = Table("menu_item", prefix="itm", index=("restaurant_id",))
    cart_items = Table("cart_item", prefix="crt", index=("menu_item_id",))
    addresses = Table("address", prefix="adr")
    promos = Table("promo", prefix="prm")  # keyed by the code itself (WELCOME5)
    orders = Table("order", prefix="ord", index=("restaurant_id",))
    ratings = Table("rating", prefix="rtg", index=("order_id",))


@attrs.frozen(kw_only=True)
class DeliveryOptions:
    """Seed size: how many restaurants (each with its cuisine's menu). At least 3, so an open,
    a breakfast-only and a Monday-closed restaurant always exist."""

    restaurants: int = attrs.field(default=24, validator=attrs.validators.ge(3))


# -- clock, hours and geography ---------------------------------------------------------------------



def _intervals(restaurant: Record, day: dt.date) -> list[tuple[dt.datetime, dt.datetime]]:
    return [(dt.datetime.combine(day, dt.time.fromisoformat(i["open"])),
             dt.datetime.combine(day, dt.time.fromisoformat(i["close"])))
            for i in restaurant["hours"][WEEKDAYS[day.weekday()]]]


def _is_open(restaurant: Record, when: dt.datetime) -> bool:
    return any(start <= when < end for start, end in _intervals(restaurant, when.date()))


def _next_change(restaurant: Record, when: dt.datetime) -> tuple[str, str | None]:
    """("closes_at", time) while open, else ("opens_at", the next opening within a week)."""
    for start, end in _intervals(restaurant, when.date()):
        if start <= when < end:
            return "closes_at", minute_text(end)
    for ahead in range(8):
        for start, _ in _intervals(restaurant, when.date() + dt.timedelta(days=ahead)):
            if start > when:
                return "opens_at", minute_text(start)
    return "opens_at", None


def _hours_label(restaurant: Record, day: dt.date) -> str:
    spans = restaurant["hours"][WEEKDAYS[day.weekday()]]
    return ", ".join(f"{i['open']}-{i['close']}" for i in spans) or "closed"


def _distance_km(restaurant: Record, address: Record) -> float:
    return round(math.dist((restaurant["x_km"], restaurant["y_km"]), (address["x_km"], address["y_km"])), 1)


def _ride_minutes(distance_km: float) -> int:
    return round(4 + 3 * distance_km)


def _require_open(state: DeliveryState, restaurant: Record) -> None:
    now = local_minute(state)
    if not _is_open(restaurant, now):
        _, opens = _next_change(restaurant, now)
        raise FailedPrecondition(f"{restaurant['name']} is closed now; it opens at {opens}",
                                 reason="RESTAURANT_CLOSED", opens_at=opens)


def _require_delivers_to(restaurant: Record, address: Record) -> float:
    distance = _distance_km(restaurant, address)
    require(distance <= restaurant["delivery_radius_km"], f"{address['label']} ({address['neighborhood']}) is "
            f"{distance} km from {restaurant['name']}, which delivers within {restaurant['delivery_radius_km']} km",
            reason="OUTSIDE_DELIVERY_AREA", distance_km=distance, radius_km=restaurant["delivery_radius_km"])
    return distance


# -- menu options and the cart ----------------------------------------------------------------------


def _unit_price(item: Record, size: str | None, add_ons: list[str]) -> float:
    """The price of one unit with these options; INVALID_OPTION (with the valid choices) otherwise."""
    sizes = {s["id"]: s["price_delta"] for s in item["sizes"]}
    extras = {a["id"]: a["price_delta"] for a in item["add_ons"]}

    def invalid(message: str) -> InvalidArgument:
        return InvalidArgument(f"{item['name']}: {message}", reason="INVALID_OPTION", sizes=sorted(sizes),
                               add_ons=sorted(extras), max_add_ons=item["max_add_ons"])

    if sizes and size is None:
        raise invalid(f"choose a size: {', '.join(sizes)}")
    if size is not None and size not in sizes:
        raise invalid(f"no size {size!r}" + (f"; sizes: {', '.join(sizes)}" if sizes else "; it comes in one size"))
    unknown = [a for a in add_ons if a not in extras]
    if unknown:
        raise invalid(f"no add-on {', '.join(unknown)}" + (f"; add-ons: {', '.join(extras)}" if extras else ""))
    if len(set(add_ons)) != len(add_ons):
        raise invalid("each add-on can be chosen once")
    if len(add_ons) > item["max_add_ons"]:
        raise invalid(f"at most {item['max_add_ons']} add-ons")
    return money(item["price"] + (sizes[size] if size else 0.0) + sum(extras[a] for a in add_ons))


def _cart_restaurant(state: DeliveryState) -> Record | None:
    line = state.cart_items.first()
    return None if line is None else state.restaurants.get(line["restaurant_id"])


def _subtotal(lines: list[Record]) -> float:
    return money(sum(line["unit_price"] * line["quantity"] for line in lines))


def _promo_problem(
    state: DeliveryState, promo: Record, restaurant: Record, subtotal: float
) -> FailedPrecondition | None:
    """Why a promo cannot apply to this cart (checked on apply and again at checkout)."""
    if promo["expires_on"] < state.today().isoformat():
        return FailedPrecondition(f"promo {promo['code']} expired on {promo['expires_on']}", reason="PROMO_EXPIRED",
                                  code=promo["code"])
    if promo["restaurant_id"] not in (None, restaurant["id"]):
        return FailedPrecondition(f"promo {promo['code']} is only valid at {promo['restaurant_name']}",
                                  reason="PROMO_NOT_VALID_HERE", code=promo["code"],
                                  restaurant_id=promo["restaurant_id"])
    if subtotal < promo["min_subtotal"]:
        short = money(promo["min_subtotal"] - subtotal)
        return FailedPrecondition(f"{promo['code']} needs a subtotal of {promo['min_subtotal']:.2f}; add "
                                  f"{short:.2f} more", reason="PROMO_MINIMUM_NOT_MET", code=promo["code"],
                                  short_by=short)
    return None


def _totals(restaurant: Record, subtotal: float, promo: Record | None, tip: float = 0.0) -> Record:
    """Discount, fees, tax and total; ``promo`` is one that applies, or None."""
    discount, delivery_fee = 0.0, restaurant["delivery_fee"]
    if promo is not None and promo["kind"] == "percent":
        discount = money(subtotal * promo["value"] / 100)
    elif promo is not None and promo["kind"] == "fixed":
        discount = min(promo["value"], subtotal)
    elif promo is not None and promo["kind"] == "free_delivery":
        delivery_fee = 0.0
    service_fee = money(min(max(subtotal * SERVICE_FEE_RATE, SERVICE_FEE_MIN), SERVICE_FEE_MAX))
    tax = money((subtotal - discount) * TAX_RATE)
    return {"subtotal": subtotal, "discount": discount, "delivery_fee": delivery_fee, "service_fee": service_fee,
            "tax": tax, "tip": money(tip), "total": money(subtotal - discount + delivery_fee + service_fee + tax + tip)}


def _clear_cart(state: DeliveryState) -> None:
    for line in state.cart_items.all():
        state.cart_items.delete(line["id"])
    if state.get_var("promo_code") is not None:
        state.set_var("promo_code", None)


# -- orders -----------------------------------------------------------------------------------------


def _timeline(placed: dt.datetime, prep_minutes: int, ride_minutes: int) -> Record:
    ready = placed + dt.timedelta(minutes=COOKING_STARTS_MIN + prep_minutes)
    return {"placed": minute_text(placed), "confirmed": minute_text(placed + dt.timedelta(minutes=CONFIRM_AFTER_MIN)),
            "preparing": minute_text(placed + dt.timedelta(minutes=COOKING_STARTS_MIN)),
            "out_for_delivery": minute_text(ready), "delivered": minute_text(ready + dt.timedelta(minutes=ride_minutes))}


def _order_status(state: DeliveryState, order: Record) -> str:
    """Where an order stands: cancelled, or the last timeline step the session clock has reached."""
    if order["cancelled_at"] is not None:
        return "cancelled"
    now = minute_text(local_minute(state))
    reached = [step for step, when in order["timeline"].items() if when <= now]
    return reached[-1] if reached else "placed"


def _order_view(state: DeliveryState, order: Record) -> Record:
    status = _order_status(state, order)
    rated = state.ratings.first(order_id=order["id"]) is not None
    return {**order, "status": status, "cancellable": status in ("placed", "confirmed"),
            "rateable": status == "delivered" and not rated, "rated": rated}


def _insert_order(state: DeliveryState, restaurant: Record, address: Record, lines: list[Record], *,
                  placed: dt.datetime, promo: Record | None, tip: float, instructions: str | None,
                  courier: tuple[str, str]) -> Record:
    distance = _distance_km(restaurant, address)
    items = [{k: line[k] for k in ("menu_item_id", "name", "size", "add_ons", "quantity", "unit_price", "notes")}
             for line in lines]
    return state.orders.insert({
        "restaurant_id": restaurant["id"], "restaurant_name": restaurant["name"], "items": items,
        "promo_code": None if promo is None else promo["code"],
        **_totals(restaurant, _subtotal(lines), promo, tip),
        "address_id": address["id"],
        "deliver_to": {k: address[k] for k in ("label", "line1", "neighborhood", "postal_code")},
        "delivery_instructions": instructions, "distance_km": distance,
        "courier": {"name": courier[0], "vehicle": courier[1]},
        "timeline": _timeline(placed, restaurant["prep_minutes"], _ride_minutes(distance)),
        "cancelled_at": None, "cancel_reason": None, "refund": None,
    })


# -- views ------------------------------------------------------------------------------------------


def _restaurant_card(state: DeliveryState, restaurant: Record, address: Record | None = None) -> Record:
    now = local_minute(state)
    change, when = _next_change(restaurant, now)
    card = {k: restaurant[k] for k in ("id", "name", "cuisine", "dietary", "price_level", "rating", "rating_count",
                                       "neighborhood", "delivery_fee", "minimum_order", "delivery_radius_km",
                                       "prep_minutes")}
    card.update({"open_now": _is_open(restaurant, now), change: when})
    if address is not None:
        distance = _distance_km(restaurant, address)
        card.update({"distance_km": distance, "delivers_to_address": distance <= restaurant["delivery_radius_km"],
                     "estimated_minutes": COOKING_STARTS_MIN + restaurant["prep_minutes"] + _ride_minutes(distance)})
    return card


def _item_card(item: Record) -> Record:
    return {"id": item["id"], "name": item["name"], "category": item["category"], "price": item["price"],
            "dietary": item["dietary"], "available": item["available"], "popular": item["popular"],
            "has_sizes": bool(item["sizes"]), "has_add_ons": bool(item["add_ons"])}


def _cart_view(state: DeliveryState) -> Record:
    restaurant = _cart_restaurant(state)
    lines = state.cart_items.all()
    code = state.get_var("promo_code")
    if restaurant is None:
        return {"restaurant": None, "items": [], "item_count": 0, "promo": None, "subtotal": 0.0, "total": 0.0}
    subtotal = _subtotal(lines)
    promo = state.promos.get(code) if code else None
    problem = None if promo is None else _promo_problem(state, promo, restaurant, subtotal)
    totals = _totals(restaurant, subtotal, promo if problem is None else None)
    return {
        "restaurant": {"id": restaurant["id"], "name": restaurant["name"], "open_now": _is_open(restaurant,
                                                                                               local_minute(state))},
        "items": [{**line, "line_total": money(line["unit_price"] * line["quantity"])} for line in lines],
        "item_count": sum(line["quantity"] for line in lines),
        "promo": None if promo is None else {"code": code, "applied": problem is None,
                                             "problem": None if problem is None else problem.reason},
        "minimum_order": restaurant["minimum_order"],
        "below_minimum_by": money(max(0.0, restaurant["minimum_order"] - subtotal)),
        **totals,
    }


# -- seed -------------------------------------------------------------------------------------------


def build_delivery(rng: random.Random, options: DeliveryOptions) -> DeliveryState:
    """Restaurants with menus and hours, the customer's addresses, promos, a cart and order history."""
    state = DeliveryState(salt=str(rng.random()))
    name = fake.full_name(rng)
    state.set_var("customer", {"name": name, "email": fake.email_for(name, rng), "phone": fake.phone(rng)})
    state.set_var("promo_code", None)
    restaurants = _seed_restaurants(state, rng, options.restaurants)
    _seed_addresses(state, rng)
    for code, description, kind, value, minimum, days in PROMOS:
        _insert_promo(state, code, description, kind, value, minimum, days, None)
    first = restaurants[0]
    _insert_promo(state, HOUSE_PROMO, f"15% off at {first['name']}", "percent", 15.0, 0.0, 20, first)
    _seed_orders(state, rng, restaurants)
    _seed_cart(state, first)
    return state


def _seed_restaurants(state: DeliveryState, rng: random.Random, count: int) -> list[Record]:
    """#0 an all-day pizzeria (open at the session start, with sizes, add-ons and a sold-out item),
    #1 a breakfast café, #2 a sushi bar closed on Mondays; the rest draw cuisine and hours."""
    restaurants, used = [], set()
    cuisines = list(CUISINES)
    for i in range(count):
        cuisine = ("pizza", "breakfast", "sushi")[i] if i < 3 else rng.choice(cuisines)
        hours = ("all_day", "breakfast", "split")[i] if i < 3 else (
            "breakfast" if cuisine == "breakfast" else rng.choice(("all_day", "lunch_dinner", "split", "late")))
        where, postal, x, y = SERVED[i % len(SERVED)]
        name = rng.choice(CUISINES[cuisine]["names"])
        name = name if name not in used else f"{name} {where}"
        while name in used:
            name += " II"
        used.add(name)
        monday, other_days = HOURS[hours]
        weekly = {day: [{"open": a, "close": b} for a, b in (monday if day == "monday" else other_days)]
                  for day in WEEKDAYS}
        restaurant = state.restaurants.insert({
            "name": name, "cuisine": cuisine, "neighborhood": where, "postal_code": postal,
            "address": f"{rng.randint(100, 4999)} {rng.choice(fake.STREETS)}",
            "x_km": round(x + rng.uniform(-0.4, 0.4), 2), "y_km": round(y + rng.uniform(-0.4, 0.4), 2),
            "delivery_radius_km": 6.0 if i == 0 else rng.choice((3.0, 4.0, 5.0, 6.0, 8.0)),
            "delivery_fee": 2.49 if i == 0 else rng.choice((0.99, 1.99, 2.49, 3.99, 4.99)),
            "minimum_order": 15.0 if i == 0 else rng.choice((10.0, 12.0, 15.0, 20.0, 25.0)),
            "prep_minutes": rng.choice((12, 15, 18, 20, 25)),
            "price_level": rng.choice(("$", "$$", "$$", "$$$")),
            "rating": round(rng.uniform(3.6, 4.9), 1), "rating_count": rng.randint(20, 900),
            "hours": weekly, "dietary": [],
        })
        tags = _seed_menu(state, rng, restaurant, sold_out_first=i == 0)
        restaurants.append(state.restaurants.update(restaurant["id"], dietary=tags))
    return restaurants


def _seed_menu(state: DeliveryState, rng: random.Random, restaurant: Record, sold_out_first: bool) -> list[str]:
    """The cuisine's dishes at this restaurant's prices; returns the dietary tags it can serve."""
    tags: set[str] = set()
    markup = rng.choice((0.0, 0.5, 1.0, 1.5))
    for n, (name, category, price, dietary, sizes, add_ons) in enumerate(CUISINES[restaurant["cuisine"]]["items"]):
        limit, extras = ADD_ONS[add_ons] if add_ons else (0, ())
        sold_out = n == len(CUISINES[restaurant["cuisine"]]["items"]) - 2 if sold_out_first else rng.random() < 0.08
        state.menu_items.insert({
            "restaurant_id": restaurant["id"], "name": name, "category": category, "price": price + markup,
            "description": f"{name}, made to order at {restaurant['name']}.", "dietary": list(dietary),
            "available": not sold_out, "popular": n < 2,
            "sizes": [{"id": s, "price_delta": d} for s, d in SIZES[sizes]] if sizes else [],
            "add_ons": [{"id": a, "price_delta": d} for a, d in extras], "max_add_ons": limit,
        })
        tags.update(dietary)
    return sorted(tags)


def _seed_addresses(state: DeliveryState, rng: random.Random) -> None:
    """Home next to restaurant #0, work downtown, and the parents' place in Gresham, which no
    restaurant reaches."""
    for label, (where, postal, x, y), note in (("home", NEIGHBORHOODS[0], "Buzz 4B"), ("work", NEIGHBORHOODS[1], None),
                                               ("parents", NEIGHBORHOODS[8], "Blue house, side door")):
        state.addresses.insert({"label": label, "line1": f"{rng.randint(100, 4999)} {rng.choice(fake.STREETS)}",
                                "neighborhood": where, "postal_code": postal, "city": "Portland",
                                "x_km": x, "y_km": y, "default_instructions": note})


def _insert_promo(state: DeliveryState, code: str, description: str, kind: str, value: float, minimum: float,
                  days: int, restaurant: Record | None) -> None:
    state.promos.insert({"id": code, "code": code, "description": description, "kind": kind, "value": value,
                         "min_subtotal": minimum, "expires_on": (state.today() + dt.timedelta(days=days)).isoformat(),
                         "restaurant_id": restaurant and restaurant["id"],
                         "restaurant_name": restaurant and restaurant["name"]})


def _seed_lines(state: DeliveryState, rng: random.Random, restaurant: Record, minimum: float) -> list[Record]:
    """Order lines worth at least ``minimum``, with the first size and add-on where items have them."""
    menu = state.menu_items.where(restaurant_id=restaurant["id"], available=True)
    lines: list[Record] = []
    while _subtotal(lines) < minimum:
        item = menu[len(lines) % len(menu)]
        size = item["sizes"][-1]["id"] if item["sizes"] else None
        add_ons = [item["add_ons"][0]["id"]] if item["add_ons"] else []
        lines.append({"restaurant_id": restaurant["id"], "menu_item_id": item["id"], "name": item["name"],
                      "size": size, "add_ons": add_ons, "quantity": rng.randint(1, 2), "notes": None,
                      "unit_price": _unit_price(item, size, add_ons)})
    return lines


def _seed_orders(state: DeliveryState, rng: random.Random, restaurants: list[Record]) -> None:
    """History in every status. Today's orders come from restaurants open now and are placed so the
    clock finds them placed (1 min ago), preparing, out for delivery and just delivered."""
    now = local_minute(state)
    home = state.addresses.first(label="home")
    open_now = [r for r in restaurants if _is_open(r, now) and _distance_km(r, home) <= r["delivery_radius_km"]]
    past = [r for r in restaurants if _distance_km(r, home) <= r["delivery_radius_km"]]

    def minutes_before(restaurant: Record, step: str, into: float) -> float:
        """How long ago to place an order so the clock is ``into`` (0-1) of the way through ``step``."""
        ride = _ride_minutes(_distance_km(restaurant, home))
        spans = {"preparing": (COOKING_STARTS_MIN, restaurant["prep_minutes"]),
                 "out_for_delivery": (COOKING_STARTS_MIN + restaurant["prep_minutes"], ride),
                 "delivered": (COOKING_STARTS_MIN + restaurant["prep_minutes"] + ride, 30)}
        start, length = spans[step]
        return start + length * into

    def open_since(step: str) -> tuple[Record, dt.datetime]:
        """A restaurant open already when an order that is now half-way through ``step`` was placed."""
        placed = {r["id"]: now - dt.timedelta(minutes=minutes_before(r, step, 0.5)) for r in open_now}
        fits = [r for r in open_now if _is_open(r, placed[r["id"]])] or open_now
        restaurant = rng.choice(fits)
        return restaurant, placed[restaurant["id"]]

    def days_ago(days: int) -> tuple[Record, dt.datetime]:
        """A past order from a restaurant in reach, placed during its opening hours that day."""
        restaurant, day = rng.choice(past), now.date() - dt.timedelta(days=days)
        while not _intervals(restaurant, day):
            day -= dt.timedelta(days=1)
        start, end = rng.choice(_intervals(restaurant, day))
        return restaurant, start + dt.timedelta(minutes=rng.randint(0, int((end - start).total_seconds() // 60) - 45))

    plans = [  # ((restaurant, placed at), cancelled, rated)
        ((open_now[0], now - dt.timedelta(minutes=1)), False, False),
        (open_since("preparing"), False, False),
        (open_since("out_for_delivery"), False, False),
        (open_since("delivered"), False, False),
        (days_ago(3), False, False),
        (days_ago(9), False, True),
        (days_ago(2), True, False),
    ]
    plans += [(days_ago(rng.randint(4, 40)), False, rng.random() < 0.6) for _ in range(len(restaurants) // 8)]
    for n, ((restaurant, placed), cancelled, rated) in enumerate(plans):
        order = _insert_order(state, restaurant, home, _seed_lines(state, rng, restaurant, restaurant["minimum_order"]),
                              placed=placed, promo=None, tip=rng.choice((2.0, 3.0, 4.0, 5.0)), instructions=None,
                              courier=COURIERS[n % len(COURIERS)])
        if cancelled:
            state.orders.update(order["id"], cancelled_at=minute_text(placed + dt.timedelta(minutes=2)),
                                cancel_reason="changed_mind", refund={"amount": order["total"], "status": "issued"})
        if rated:
            state.ratings.insert({"order_id": order["id"], "restaurant_id": restaurant["id"],
                                  "food_stars": rng.choice((4, 5, 5)), "delivery_stars": rng.choice((3, 4, 5)),
                                  "comment": "Arrived hot, would order again.",
                                  "created_at": order["timeline"]["delivered"]})


def _seed_cart(state: DeliveryState, restaurant: Record) -> None:
    """A cart at restaurant #0 worth more than its minimum: a large pizza with a topping, and a drink."""
    menu = state.menu_items.where(restaurant_id=restaurant["id"], available=True)
    pizza = next(i for i in menu if i["sizes"] and i["add_ons"])
    drink = next(i for i in menu if i["category"] == "drinks")
    for item, size, add_ons, quantity in ((pizza, "large", [pizza["add_ons"][0]["id"]], 1), (drink, "regular", [], 2)):
        state.cart_items.insert({"restaurant_id": restaurant["id"], "menu_item_id": item["id"], "name": item["name"],
                                 "size": size, "add_ons": add_ons, "quantity": quantity, "notes": None,
                                 "unit_price": _unit_price(item, size, add_ons)})


# -- examples: arguments valid on a fresh seed of any size -------------------------------------------


def _first_open(s: DeliveryState) -> Record:
    return s.restaurants.first(lambda r: _is_open(r, local_minute(s))) or s.restaurants.all()[0]


def _add_example(s: DeliveryState) -> Record:
    """An item with sizes and add-ons from the restaurant the cart is already at (or one open now)."""
    restaurant = _cart_restaurant(s) or _first_open(s)
    menu = s.menu_items.where(restaurant_id=restaurant["id"], available=True)
    item = next((i for i in menu if i["sizes"] and i["add_ons"]), menu[0])
    size = {"size": item["sizes"][0]["id"]} if item["sizes"] else {}
    return {"menu_item_id": item["id"], "quantity": 1, **size, "add_ons": [a["id"] for a in item["add_ons"][:2]],
            "notes": "Well done, please"}


def _switch_restaurant_example(s: DeliveryState) -> Record:
    """A plain dish from another open restaurant than the cart's, replacing the cart."""
    now, current = local_minute(s), _cart_restaurant(s)
    other = s.restaurants.first(lambda r: _is_open(r, now) and (current is None or r["id"] != current["id"]))
    dishes = s.menu_items.where(lambda i: not i["sizes"], restaurant_id=(other or _first_open(s))["id"],
                                available=True)
    return {"menu_item_id": dishes[0]["id"], "quantity": 2, "start_new_cart": True}


def _order_in(s: DeliveryState, status: str) -> Record:
    order = next((o for o in s.orders.all() if _order_view(s, o)["status"] == status
                  and (status != "delivered" or _order_view(s, o)["rateable"])), None)
    return {"order_id": (order or s.orders.all()[0])["id"]}


def _line(s: DeliveryState) -> Record:
    return s.cart_items.first() or {"id": "crt_none"}


def _home(s: DeliveryState) -> str:
    return s.addresses.first(label="home")["id"]


# -- server and tools -------------------------------------------------------------------------------

server = Server(
    "food_delivery",
    domain="lifestyle",
    description="A meal-delivery app for one customer: restaurant search, opening hours, menus with sizes and "
    "add-ons, a one-restaurant cart, promo codes, checkout with tip, orders, delivery tracking and ratings.",
    state=DeliveryState,
    seed=build_delivery,
    options=DeliveryOptions,
)

RestaurantId = Annotated[str, ref("restaurant", "Id of the restaurant (rst_...), from search_restaurants.")]
CartItemId = Annotated[str, ref("cart_item", "Id of a cart line (crt_...), from view_cart.")]
OrderId = Annotated[str, ref("order", "Id of one of the customer's orders (ord_...), from list_orders or checkout.")]
AddressId = Annotated[str, ref("address", "Id of a saved delivery address (adr_...), from list_addresses.")]


def _search_restaurants_asks(a: dict) -> list[str]:
    """Each template names a few of the filters (slots, or words for open now and the order)."""
    found = ["show me some restaurants", "list places I can order from", "browse the restaurants on the app"]
    if "query" in a:
        found += ["search restaurants for {query}", "look up {query} on the app", "find places matching {query}"]
    if "cuisine" in a:
        found += ["find {cuisine} restaurants", "show me {cuisine} places", "list the {cuisine} spots around"]
    if "dietary" in a:
        found += ["find restaurants with {dietary} dishes", "show me places that do {dietary} food"]
        if "cuisine" in a:
            found.append("find {cuisine} restaurants with {dietary} options")
    if a.get("open_now") is not None:
        now = " that are open right now" if a["open_now"] else " that are closed right now"
        found += ["show me restaurants" + now, "list places to eat" + now]
        if "cuisine" in a:
            found.append("find {cuisine} places" + now)
        if "dietary" in a:
            found.append("find restaurants with {dietary} dishes" + now)
    if "address_id" in a:
        found += ["find restaurants that deliver to {address_id}", "show me places that can bring food to {address_id}"]
        if "query" in a:
            found.append("search for {query} places that deliver to {address_id}")
    order = {"rating": "best-rated", "delivery_fee": "cheapest-delivery", "delivery_time": "fastest-delivering"}
    if a.get("sort") in order:
        best = order[a["sort"]]
        found += [f"show me the {best} restaurants", f"list restaurants, {best} first"]
        if "cuisine" in a:
            found.append(f"find the {best} {{cuisine}} places")
        if "address_id" in a and a["sort"] == "delivery_time":
            found.append("find the restaurants that can deliver fastest to {address_id}")
    return found


@server.tool(
    answers=("cuisine", "rating", "estimated_minutes", "delivery_fee"),
    read_only=True,
    reads=["restaurant", "address"],
    errors=["ADDRESS_NOT_FOUND"],
    examples=[{"cuisine": "pizza"}, {"open_now": True, "dietary": "vegan", "sort": "rating"},
              lambda s: {"address_id": _home(s), "query": "sushi", "sort": "delivery_time"}],
    asks=_search_restaurants_asks,
    values={"query": lambda rng, s: rng.choice(SEARCH_WORDS)},
)
def search_restaurants(
    state: DeliveryState,
    query: Annotated[str | None, Field(max_length=80, description="Words of the restaurant's name or cuisine.")] = None,
    cuisine: Annotated[Cuisine | None, Field(description="Only restaurants of this cuisine.")] = None,
    dietary: Annotated[Dietary | None, Field(description="Only restaurants with dishes for this diet.")] = None,
    open_now: Annotated[bool | None, Field(description="true: only restaurants open now.")] = None,
    address_id: Annotated[str | None, ref("address", "Only restaurants delivering to this saved address; adds "
                                          "distance and delivery time (adr_...).")] = None,
    sort: Annotated[Literal["rating", "delivery_fee", "delivery_time"], Field(
        description="Result order; delivery_time counts the ride when address_id is given.")] = "rating",
    limit: Annotated[int, Field(ge=1, le=50, description="Page size (1-50).")] = 10,
    offset: Annotated[int, Field(ge=0, description="Results to skip; pass next_offset from the previous page.")] = 0,
) -> dict:
    """Find restaurants by name or cuisine words, cuisine, diet, open now and delivery to an address.
    Returns one page of restaurant cards (rating, fee, minimum order, open now and when it next
    opens or closes; distance and estimated minutes with an address), the total and next_offset.
    Fails with ADDRESS_NOT_FOUND."""
    address = state.addresses.get(address_id) if address_id else None
    words = (query or "").lower().split()
    now = local_minute(state)

    def wanted(r: Record) -> bool:
        return (all(w in f"{r['name']} {r['cuisine']}".lower() for w in words)
                and (dietary is None or dietary in r["dietary"])
                and (open_now is None or _is_open(r, now) == open_now))

    found = state.restaurants.where(wanted, **({"cuisine": cuisine} if cuisine else {}))
    cards = [_restaurant_card(state, r, address) for r in found]
    if address is not None:
        cards = [c for c in cards if c["delivers_to_address"]]
    keys = {"rating": lambda c: -c["rating"], "delivery_fee": lambda c: c["delivery_fee"],
            "delivery_time": lambda c: c.get("estimated_minutes", c["prep_minutes"])}
    cards.sort(key=keys[sort])
    return paginate(cards, limit=limit, offset=offset, key="restaurants")


@server.tool(
    answers=("cuisine", "rating", "open_now", "delivery_fee"),
    read_only=True,
    reads=["restaurant", "address"],
    errors=["RESTAURANT_NOT_FOUND", "ADDRESS_NOT_FOUND"],
    examples=[lambda s: {"restaurant_id": s.restaurants.first()["id"]},
              lambda s: {"restaurant_id": s.restaurants.all()[-1]["id"], "address_id": _home(s)}],
    asks=("show me the details for {restaurant_id}", "tell me about {restaurant_id}",
          "pull up the info on {restaurant_id}", "check whether {restaurant_id} delivers to {address_id}",
          "find out how far {restaurant_id} is from {address_id} and how long delivery takes"),
)
def get_restaurant(
    state: DeliveryState,
    restaurant_id: RestaurantId,
    address_id: Annotated[str | None, ref("address", "A saved address to check delivery to (adr_...).")] = None,
) -> dict:
    """One restaurant: cuisine, diets served, rating, address, delivery radius, fee, minimum order,
    prep time, whether it is open now and when it next opens or closes; with address_id also the
    distance, whether it delivers there and the estimated minutes. Fails with RESTAURANT_NOT_FOUND
    or ADDRESS_NOT_FOUND."""
    restaurant = state.restaurants.get(restaurant_id)
    address = state.addresses.get(address_id) if address_id else None
    return {**_restaurant_card(state, restaurant, address), "address": restaurant["address"],
            "postal_code": restaurant["postal_code"]}


@server.tool(
    answers=("open_now", "opens_at"),
    read_only=True,
    reads=["restaurant"],
    errors=["RESTAURANT_NOT_FOUND"],
    examples=[lambda s: {"restaurant_id": s.restaurants.all()[2]["id"]}],
    asks=("check the opening hours of {restaurant_id}", "find out when {restaurant_id} is open",
          "see if {restaurant_id} is open right now", "tell me what time {restaurant_id} opens and closes"),
)
def get_opening_hours(state: DeliveryState, restaurant_id: RestaurantId) -> dict:
    """A restaurant's weekly opening hours (one or more spans per day, none when closed that day),
    today's hours, whether it is open now and when it next opens or closes. Fails with
    RESTAURANT_NOT_FOUND."""
    restaurant = state.restaurants.get(restaurant_id)
    now = local_minute(state)
    change, when = _next_change(restaurant, now)
    return {"restaurant_id": restaurant_id, "name": restaurant["name"], "hours": restaurant["hours"],
            "local_time": minute_text(now), "today": _hours_label(restaurant, now.date()),
            "open_now": _is_open(restaurant, now), change: when}


@server.tool(
    answers=("price", "available"),
    read_only=True,
    reads=["restaurant", "menu_item"],
    errors=["RESTAURANT_NOT_FOUND"],
    examples=[lambda s: {"restaurant_id": s.restaurants.first()["id"]},
              lambda s: {"restaurant_id": s.restaurants.first()["id"], "category": "mains", "dietary": "vegetarian"}],
    asks=("show me the menu at {restaurant_id}", "see what {restaurant_id} serves",
          "pull up the menu for {restaurant_id}", "list the {category} at {restaurant_id}",
          "show the {dietary} {category} from {restaurant_id}",
          "find {dietary} options on the menu of {restaurant_id}"),
)
def get_menu(
    state: DeliveryState,
    restaurant_id: RestaurantId,
    category: Annotated[MenuCategory | None, Field(description="Only this part of the menu.")] = None,
    dietary: Annotated[Dietary | None, Field(description="Only dishes suitable for this diet.")] = None,
) -> dict:
    """A restaurant's menu: each item's id, name, category, base price, diets, whether it is
    available today and whether it has sizes or add-ons (get_menu_item lists them). Fails with
    RESTAURANT_NOT_FOUND."""
    restaurant = state.restaurants.get(restaurant_id)
    items = state.menu_items.where(lambda i: dietary is None or dietary in i["dietary"], restaurant_id=restaurant_id,
                                   **({"category": category} if category else {}))
    return {"restaurant_id": restaurant_id, "name": restaurant["name"], "items": [_item_card(i) for i in items]}


@server.tool(
    answers=("price", "price_delta"),
    read_only=True,
    reads=["menu_item"],
    errors=["MENU_ITEM_NOT_FOUND"],
    examples=[lambda s: {"menu_item_id": s.menu_items.first(lambda i: bool(i["sizes"] and i["add_ons"]))["id"]}],
    asks=("show me the options for {menu_item_id}", "check what sizes and add-ons {menu_item_id} comes with",
          "get the details of {menu_item_id}", "tell me how much {menu_item_id} costs and what extras it has"),
)
def get_menu_item(
    state: DeliveryState,
    menu_item_id: Annotated[str, ref("menu_item", "Id of the dish (itm_...), from get_menu.")],
) -> dict:
    """One dish with its options: base price, sizes (choose exactly one when listed) and add-ons
    (up to max_add_ons), each with its price delta, diets and availability. Fails with
    MENU_ITEM_NOT_FOUND."""
    return state.menu_items.get(menu_item_id)


def _dish_options(rng: random.Random, s: DeliveryState, args: Record | None = None) -> Record:
    """Options a customer picks for the call's dish (else any dish), drawn as a whole: one of its
    sizes and up to two of its add-ons; None for what the dish does not offer, so the call leaves
    it out."""
    item = s.menu_items.find((args or {}).get("menu_item_id") or "") or rng.choice(s.menu_items.all())
    sizes = [size["id"] for size in item.get("sizes") or ()]
    add_ons = [add_on["id"] for add_on in item.get("add_ons") or ()]
    size = rng.choice(sizes) if sizes else None
    picked = sorted(rng.sample(add_ons, min(len(add_ons), rng.choice((1, 1, 2))))) if add_ons else None
    return {"size": size, "add_ons": picked}


def _add_to_cart_asks(a: dict) -> list[str]:
    """Quantity, size, add-ons and a note each in some templates; a fresh cart in words."""
    found = ["add {menu_item_id} to my cart", "put {menu_item_id} in the cart", "throw {menu_item_id} into my cart"]
    if "quantity" in a:
        found += ["add {quantity} of {menu_item_id} to my cart", "put {quantity} of {menu_item_id} in the cart"]
    if "size" in a:
        found += ["add {menu_item_id} in size {size} to my cart", "get me {menu_item_id}, size {size}"]
        if "quantity" in a:
            found.append("put {quantity} of {menu_item_id} in size {size} in my cart")
    if "add_ons" in a:
        found.append("add {menu_item_id} with {add_ons} to my order" if "size" not in a else
                     "add {menu_item_id} in size {size} with {add_ons} to my order")
    if "notes" in a:
        found.append('add {menu_item_id} to my cart with a note for the kitchen: "{notes}"')
    if a.get("start_new_cart"):
        found += ["empty my cart and add {menu_item_id} instead", "start a fresh cart with {menu_item_id}"]
        if "quantity" in a:
            found.append("drop what's in my cart and put {quantity} of {menu_item_id} in it")
    return found


@server.tool(
    destructive=True,  # start_new_cart=true deletes a cart from another restaurant
    reads=["menu_item", "restaurant", "cart_item"],
    produces=["cart_item"],
    mutates=["cart_item"],
    errors=["MENU_ITEM_NOT_FOUND", "ITEM_UNAVAILABLE", "INVALID_OPTION", "RESTAURANT_CLOSED",
            "CART_FROM_OTHER_RESTAURANT", "MAX_QUANTITY_EXCEEDED"],
    examples=[_add_example, _switch_restaurant_example],
    asks=_add_to_cart_asks,
    values={"quantity": lambda rng, s: rng.choice((1, 1, 2, 2, 3, 4)),
            "notes": lambda rng, s: rng.choice(KITCHEN_NOTES),
            "size": part_of(_dish_options, "size"), "add_ons": part_of(_dish_options, "add_ons")},
)
def add_to_cart(
    state: DeliveryState,
    menu_item_id: Annotated[str, ref("menu_item", "Id of the dish to add (itm_...), from get_menu.")],
    quantity: Annotated[int, Field(ge=1, le=MAX_LINE_QUANTITY, description="How many.")] = 1,
    size: Annotated[str | None, Field(pattern=r"^[a-z_]{2,20}$", description="Size id from get_menu_item "
                                      "(e.g. large); required when the dish has sizes.")] = None,
    add_ons: Annotated[list[str] | None, Field(max_length=6, description="Add-on ids from get_menu_item, e.g. "
                                               "[\"extra_cheese\"].")] = None,
    notes: Annotated[str | None, Field(max_length=200, description="Special instructions for the kitchen.")] = None,
    start_new_cart: Annotated[bool, Field(description="true empties a cart from another restaurant first.")] = False,
) -> dict:
    """Add a dish with its options to the cart; the same dish with the same options and notes adds
    to its line. A cart holds one restaurant's dishes. Returns the line and the cart. Fails with
    ITEM_UNAVAILABLE (sold out today), INVALID_OPTION (size missing or not offered, unknown or
    repeated add-on, too many add-ons; the details list the valid ones), RESTAURANT_CLOSED,
    CART_FROM_OTHER_RESTAURANT (pass start_new_cart=true to replace that cart) or
    MAX_QUANTITY_EXCEEDED (20 of one line)."""
    item = state.menu_items.get(menu_item_id)
    restaurant = state.restaurants.get(item["restaurant_id"])
    require(item["available"], f"{item['name']} is sold out at {restaurant['name']} today", reason="ITEM_UNAVAILABLE")
    add_ons = list(add_ons or [])
    unit_price = _unit_price(item, size, add_ons)
    _require_open(state, restaurant)
    current = _cart_restaurant(state)
    if current is not None and current["id"] != restaurant["id"] and not start_new_cart:
        raise Conflict(f"your cart holds dishes from {current['name']}; a cart takes one restaurant. Pass "
                       "start_new_cart=true to empty it, or check that order out first",
                       reason="CART_FROM_OTHER_RESTAURANT", cart_restaurant_id=current["id"])
    same = None
    if current is not None and current["id"] == restaurant["id"]:
        same = state.cart_items.first(lambda c: (c["size"], sorted(c["add_ons"]), c["notes"])
                                      == (size, sorted(add_ons), notes), menu_item_id=menu_item_id)
    total = quantity + (same["quantity"] if same else 0)
    require(total <= MAX_LINE_QUANTITY, f"at most {MAX_LINE_QUANTITY} of one line; the cart already has "
            f"{total - quantity}", reason="MAX_QUANTITY_EXCEEDED", error=InvalidArgument)
    if current is not None and current["id"] != restaurant["id"]:
        _clear_cart(state)
    if same:
        line = state.cart_items.update(same["id"], quantity=total)
    else:
        line = state.cart_items.insert({"restaurant_id": restaurant["id"], "menu_item_id": menu_item_id,
                                        "name": item["name"], "size": size, "add_ons": add_ons, "quantity": quantity,
                                        "notes": notes, "unit_price": unit_price})
    return {"added": line, "cart": _cart_view(state)}


@server.tool(
    idempotent=True,
    reads=["cart_item"],
    mutates=["cart_item"],
    errors=["CART_ITEM_NOT_FOUND"],
    examples=[lambda s: {"cart_item_id": _line(s)["id"], "quantity": _line(s).get("quantity", 1) + 1}],
    asks=("change the quantity of {cart_item_id} to {quantity}", "set {cart_item_id} to {quantity} in my cart",
          "make that {quantity} of {cart_item_id} instead", "update my cart so there are {quantity} of {cart_item_id}"),
    values={"quantity": lambda rng, s: rng.choice((1, 2, 3, 4, 5))},
)
def update_cart_item(
    state: DeliveryState,
    cart_item_id: CartItemId,
    quantity: Annotated[int, Field(ge=1, le=MAX_LINE_QUANTITY, description="The line's new quantity.")],
) -> dict:
    """Set how many of a cart line to order (remove_from_cart takes it out). Returns the cart.
    Fails with CART_ITEM_NOT_FOUND."""
    state.cart_items.get(cart_item_id)
    state.cart_items.update(cart_item_id, quantity=quantity)
    return _cart_view(state)


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing to remove (CART_ITEM_NOT_FOUND)
    reads=["cart_item"],
    mutates=["cart_item"],
    errors=["CART_ITEM_NOT_FOUND"],
    examples=[lambda s: {"cart_item_id": _line(s)["id"]}],
    asks=("remove {cart_item_id} from my cart", "take {cart_item_id} out of the cart",
          "drop {cart_item_id} from my order", "delete {cart_item_id} from the cart"),
)
def remove_from_cart(state: DeliveryState, cart_item_id: CartItemId) -> dict:
    """Take a line out of the cart; removing the last line also drops the promo code. Returns the
    cart. Fails with CART_ITEM_NOT_FOUND."""
    state.cart_items.delete(cart_item_id)
    if not len(state.cart_items) and state.get_var("promo_code") is not None:
        state.set_var("promo_code", None)
    return _cart_view(state)


@server.tool(
    answers=("quantity", "line_total", "total"),
    read_only=True,
    reads=["cart_item", "restaurant", "promo"],
    examples=[{}],
    asks=("show me what's in my cart", "tell me my cart total before tip", "review my cart",
          "check whether my cart meets the minimum order"),
)
def view_cart(state: DeliveryState) -> dict:
    """The cart: its restaurant (and whether it is open now), lines with options and prices, the
    promo code and whether it applies, subtotal, how far below the restaurant's minimum order it
    is, discount, delivery and service fees, tax and total (before tip)."""
    return _cart_view(state)


@server.tool(
    idempotent=True,
    reads=["cart_item", "restaurant", "promo"],
    mutates=["cart_item"],
    errors=["CART_EMPTY", "PROMO_NOT_FOUND", "PROMO_EXPIRED", "PROMO_NOT_VALID_HERE", "PROMO_MINIMUM_NOT_MET"],
    examples=[{"code": "WELCOME5"}, {"code": HOUSE_PROMO}],
    asks=("apply the promo code {code}", "use code {code} on my cart", "add the discount code {code}",
          "try the coupon {code} on this order"),
    values={"code": lambda rng, s: rng.choice([p[0] for p in PROMOS if p[5] > 0] + [HOUSE_PROMO])},
)
def apply_promo(
    state: DeliveryState,
    code: Annotated[str, Field(min_length=3, max_length=20, description="Promo code, e.g. WELCOME5 "
                               "(case-insensitive).")],
) -> dict:
    """Apply a promo code to the cart, replacing any other. Returns the cart with the discount.
    Fails with CART_EMPTY, PROMO_NOT_FOUND, PROMO_EXPIRED, PROMO_NOT_VALID_HERE (a code for another
    restaurant) or PROMO_MINIMUM_NOT_MET (the details say how much to add)."""
    restaurant = _cart_restaurant(state)
    require(restaurant is not None, "the cart is empty; add dishes first", reason="CART_EMPTY")
    code = code.strip().upper()
    promo = lookup(state.promos, code, message=f"no promo code {code}", reason="PROMO_NOT_FOUND", code=code)
    problem = _promo_problem(state, promo, restaurant, _subtotal(state.cart_items.all()))
    if problem is not None:
        raise problem
    if state.get_var("promo_code") != code:  # re-applying the same code writes nothing
        state.set_var("promo_code", code)
    return _cart_view(state)


@server.tool(
    answers=("line1", "city"),
    read_only=True,
    reads=["address"],
    examples=[{}],
    asks=("list my saved addresses", "show the delivery addresses on my account",
          "show me which addresses I have saved"),
)
def list_addresses(state: DeliveryState) -> dict:
    """The customer's saved delivery addresses: id, label (home, work, ...), street, neighborhood,
    postal code and default instructions for the courier."""
    return {"addresses": [{k: v for k, v in a.items() if k not in ("x_km", "y_km")} for a in state.addresses]}


@server.tool(
    destructive=True,  # the cart's lines are deleted once they are ordered
    reads=["cart_item", "restaurant", "menu_item", "promo", "address"],
    produces=["order"],
    mutates=["cart_item"],
    errors=["ADDRESS_NOT_FOUND", "CART_EMPTY", "RESTAURANT_CLOSED", "ITEM_UNAVAILABLE", "BELOW_MINIMUM_ORDER",
            "OUTSIDE_DELIVERY_AREA", "PROMO_EXPIRED", "PROMO_NOT_VALID_HERE", "PROMO_MINIMUM_NOT_MET"],
    examples=[lambda s: {"address_id": _home(s), "tip": 4.0, "delivery_instructions": "Leave at the door"}],
    asks=("check out and deliver to {address_id}", "place the order for delivery to {address_id}",
          "send my order to {address_id} with a ${tip} tip",
          'check out to {address_id}, tip ${tip}, and tell the courier "{delivery_instructions}"',
          'order it to {address_id} with a note for the driver: "{delivery_instructions}"'),
    values={"tip": lambda rng, s: rng.choice(TIPS), "delivery_instructions": lambda rng, s: rng.choice(DELIVERY_NOTES)},
)
def checkout(
    state: DeliveryState,
    address_id: AddressId,
    tip: Annotated[float, Field(ge=0, le=100, description="Tip for the courier in USD.")] = 0.0,
    delivery_instructions: Annotated[str | None, Field(max_length=200, description="Note for the courier; the "
                                                       "address's default instructions when omitted.")] = None,
) -> dict:
    """Place the cart as an order for delivery to a saved address, with a tip. The cart is emptied.
    Returns the order: items, totals, courier and timeline (confirmed, preparing, out for delivery,
    delivered) with the estimated delivery time. Fails with CART_EMPTY, RESTAURANT_CLOSED,
    ITEM_UNAVAILABLE, BELOW_MINIMUM_ORDER (the details say how much to add), OUTSIDE_DELIVERY_AREA
    (pick another address or restaurant) or a promo that no longer applies (PROMO_EXPIRED,
    PROMO_NOT_VALID_HERE, PROMO_MINIMUM_NOT_MET)."""
    address = state.addresses.get(address_id)
    restaurant = _cart_restaurant(state)
    require(restaurant is not None, "the cart is empty; add dishes first", reason="CART_EMPTY")
    _require_open(state, restaurant)
    lines = state.cart_items.all()
    for line in lines:
        require(state.menu_items.get(line["menu_item_id"])["available"], f"{line['name']} sold out; remove it",
                reason="ITEM_UNAVAILABLE", cart_item_id=line["id"])
    subtotal = _subtotal(lines)
    short = money(restaurant["minimum_order"] - subtotal)
    require(short <= 0, f"{restaurant['name']} delivers orders of {restaurant['minimum_order']:.2f} or more; add "
            f"{short:.2f}", reason="BELOW_MINIMUM_ORDER", minimum=restaurant["minimum_order"], short_by=short)
    _require_delivers_to(restaurant, address)
    code = state.get_var("promo_code")
    promo = state.promos.get(code) if code else None
    problem = None if promo is None else _promo_problem(state, promo, restaurant, subtotal)
    if problem is not None:
        raise problem
    order = _insert_order(state, restaurant, address, lines, placed=local_minute(state), promo=promo, tip=tip,
                          instructions=delivery_instructions or address["default_instructions"],
                          courier=COURIERS[state.next_counter("courier") % len(COURIERS)])
    _clear_cart(state)
    return _order_view(state, order)


@server.tool(
    answers=("status", "total"),
    read_only=True,
    reads=["order", "rating"],
    errors=["ORDER_NOT_FOUND"],
    examples=[lambda s: {"order_id": s.orders.first()["id"]}],
    asks=("show me the details of {order_id}", "pull up {order_id}", "tell me what was in {order_id} and what it cost",
          "look up {order_id}"),
)
def get_order(state: DeliveryState, order_id: OrderId) -> dict:
    """One order in full: restaurant, items with options, totals with tip, address, courier, the
    timeline, its status now, and whether it can still be cancelled or rated. Fails with
    ORDER_NOT_FOUND."""
    return _order_view(state, state.orders.get(order_id))


@server.tool(
    answers=("status", "total", "placed_at"),
    read_only=True,
    reads=["order", "rating"],
    examples=[{}, {"status": "delivered", "limit": 5}],
    asks=("show my past orders", "list my recent orders", "list the orders that are {status}",
          "show my last {limit} orders", "show me my {limit} most recent {status} orders"),
)
def list_orders(
    state: DeliveryState,
    status: Annotated[OrderStatus | None, Field(description="Only orders in this status now.")] = None,
    limit: Annotated[int, Field(ge=1, le=50, description="Page size (1-50).")] = 10,
    offset: Annotated[int, Field(ge=0, description="Results to skip; pass next_offset from the previous page.")] = 0,
) -> dict:
    """The customer's orders, newest first: id, restaurant, placed time, status now, total, item
    names and whether each can be cancelled or rated. Use get_order for one in full."""
    views = [_order_view(state, o) for o in state.orders.all()]
    views = [v for v in views if status is None or v["status"] == status]
    views.sort(key=lambda v: v["timeline"]["placed"], reverse=True)
    rows = [{"id": v["id"], "restaurant_id": v["restaurant_id"], "restaurant_name": v["restaurant_name"],
             "placed_at": v["timeline"]["placed"], "status": v["status"], "total": v["total"],
             "items": [i["name"] for i in v["items"]], "cancellable": v["cancellable"], "rateable": v["rateable"]}
            for v in views]
    return paginate(rows, limit=limit, offset=offset, key="orders")


def _cancel_order_asks(a: dict) -> list[str]:
    found = ["cancel {order_id}", "call off {order_id}", "stop {order_id} before they start cooking it"]
    why = {"changed_mind": "I changed my mind", "ordered_by_mistake": "I ordered it by mistake",
           "wrong_address": "it's going to the wrong address", "too_slow": "it's taking too long",
           "other": "something came up"}.get(a.get("reason"))
    if why:
        found += [f"cancel {{order_id}}, {why}", f"call off {{order_id}} because {why}"]
    return found


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with ORDER_NOT_CANCELLABLE
    reads=["order"],
    mutates=["order"],
    errors=["ORDER_NOT_FOUND", "ORDER_NOT_CANCELLABLE"],
    examples=[lambda s: {**_order_in(s, "placed"), "reason": "ordered_by_mistake"}],
    asks=_cancel_order_asks,
    values={"reason": lambda rng, s: rng.choice(CANCEL_REASONS)},
)
def cancel_order(
    state: DeliveryState,
    order_id: OrderId,
    reason: Annotated[Literal["changed_mind", "ordered_by_mistake", "wrong_address", "too_slow", "other"],
                      Field(description="Why the customer cancels.")] = "changed_mind",
) -> dict:
    """Cancel an order before the kitchen starts on it (placed or confirmed; cooking starts 8 minutes
    after ordering) for a full refund. Returns the cancelled order with its refund. Fails with
    ORDER_NOT_CANCELLABLE once it is being prepared, on its way, delivered or already cancelled."""
    order = state.orders.get(order_id)
    status = _order_status(state, order)
    require(status in ("placed", "confirmed"), f"order {order_id} is {status} and can no longer be cancelled",
            reason="ORDER_NOT_CANCELLABLE", status=status)
    order = state.orders.update(order_id, cancelled_at=minute_text(local_minute(state)), cancel_reason=reason,
                                refund={"amount": order["total"], "status": "issued"})
    return _order_view(state, order)


@server.tool(
    answers=("status", "estimated_delivery", "minutes_remaining"),
    read_only=True,
    reads=["order"],
    errors=["ORDER_NOT_FOUND", "ORDER_CANCELLED"],
    examples=[lambda s: _order_in(s, "out_for_delivery"), lambda s: _order_in(s, "placed")],
    asks=("track {order_id}", "check where {order_id} is", "tell me when {order_id} will arrive",
          "find out how long until {order_id} gets here"),
)
def track_delivery(state: DeliveryState, order_id: OrderId) -> dict:
    """Live status of an order, by the session clock: placed, confirmed, preparing, out_for_delivery
    or delivered; the steps reached with their times, the estimated (or actual) delivery time,
    minutes to go, and the courier once on the way. Fails with ORDER_CANCELLED or ORDER_NOT_FOUND."""
    order = state.orders.get(order_id)
    status = _order_status(state, order)
    require(status != "cancelled", f"order {order_id} was cancelled at {order['cancelled_at']}",
            reason="ORDER_CANCELLED")
    now = local_minute(state)
    eta = dt.datetime.strptime(order["timeline"]["delivered"], MINUTE_FORMAT)
    reached = {step: when for step, when in order["timeline"].items() if when <= minute_text(now)}
    return {"order_id": order_id, "status": status, "steps": reached, "estimated_delivery": minute_text(eta),
            "minutes_remaining": max(0, int((eta - now).total_seconds() // 60)),
            "courier": order["courier"] if status in ("out_for_delivery", "delivered") else None,
            "distance_km": order["distance_km"]}


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_RATED
    reads=["order", "rating"],
    produces=["rating"],
    mutates=["restaurant"],
    errors=["ORDER_NOT_FOUND", "ORDER_NOT_DELIVERED", "ALREADY_RATED"],
    examples=[lambda s: {**_order_in(s, "delivered"), "food_stars": 5, "delivery_stars": 4,
                         "comment": "Still hot and the courier was friendly."}],
    asks=("rate {order_id} {food_stars} stars for the food", "give the food from {order_id} {food_stars} out of 5",
          "rate {order_id}: food {food_stars} stars, delivery {delivery_stars}",
          'leave a review on {order_id}: {food_stars} stars for the food, "{comment}"',
          'score {order_id} {food_stars}/5 for food and {delivery_stars}/5 for delivery, saying "{comment}"'),
    values={"food_stars": lambda rng, s: rng.choice(REVIEWS)[0],
            "delivery_stars": lambda rng, s: rng.choice(REVIEWS)[1], "comment": lambda rng, s: rng.choice(REVIEWS)[2]},
)
def rate_order(
    state: DeliveryState,
    order_id: OrderId,
    food_stars: Annotated[int, Field(ge=1, le=5, description="The food, 1 (worst) to 5 (best).")],
    delivery_stars: Annotated[int | None, Field(ge=1, le=5, description="The delivery, 1 to 5.")] = None,
    comment: Annotated[str | None, Field(max_length=500, description="Optional review text.")] = None,
) -> dict:
    """Rate a delivered order once; the food rating counts toward the restaurant's average. Returns
    the rating and the restaurant's new rating. Fails with ORDER_NOT_DELIVERED (not delivered yet, or
    cancelled) or ALREADY_RATED."""
    order = state.orders.get(order_id)
    status = _order_status(state, order)
    require(status == "delivered", f"order {order_id} is {status}; only delivered orders can be rated",
            reason="ORDER_NOT_DELIVERED", status=status)
    existing = state.ratings.first(order_id=order_id)
    if existing:
        raise Conflict(f"order {order_id} was rated at {existing['created_at']}", reason="ALREADY_RATED",
                       rating_id=existing["id"])
    restaurant = state.restaurants.get(order["restaurant_id"])
    count = restaurant["rating_count"] + 1
    average = round((restaurant["rating"] * restaurant["rating_count"] + food_stars) / count, 2)
    state.restaurants.update(restaurant["id"], rating=average, rating_count=count)
    rating = state.ratings.insert({"order_id": order_id, "restaurant_id": restaurant["id"], "food_stars": food_stars,
                                   "delivery_stars": delivery_stars, "comment": comment,
                                   "created_at": minute_text(local_minute(state))})
    return {"rating": rating, "restaurant_rating": average, "restaurant_rating_count": count}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
