"""marketplace — a peer-to-peer marketplace: people list second-hand items, make and counter
offers, buy from each other with a wallet, and rate the sellers they bought from.

Every tool that changes something names the acting user (``user_id``) and checks what that user
may do: only a listing's seller edits, withdraws, counters or accepts offers on it; only the
buyer of an offer answers a counter-offer or buys through it; nobody makes an offer on or buys
their own listing (OWN_LISTING).

Deal flow: ``make_offer`` (pending) → the seller ``counter_offer``s (countered) or answers with
``respond_to_offer``; the buyer answers a counter the same way. An accepted offer reserves the
listing for that buyer at the agreed price, and ``buy_listing`` with the offer id completes the
sale. Without an offer, ``buy_listing`` pays the list price of an active listing. An open
offer (pending or countered) expires 48 hours after it was made, by the session clock.

Money: every user has a wallet in USD. A purchase moves the price from the buyer's wallet to the
seller's, less the marketplace's 5% seller fee. A binding offer needs the money in the wallet too.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    money,
    paginate,
    part_of,
    ref,
    require,
)

OFFER_LIFETIME = dt.timedelta(hours=48)
SELLER_FEE_RATE = 0.05
MAX_ACTIVE_LISTINGS = 25  # per seller
DEFAULT_MINIMUM_OFFER_RATE = 0.6  # a seller who names no minimum declines offers below 60% of the price

Category = Literal["electronics", "furniture", "clothing", "books", "sports", "music", "home", "toys"]
Condition = Literal["new", "like_new", "good", "fair"]
ListingStatus = Literal["active", "reserved", "sold", "withdrawn"]
OfferStatus = Literal["pending", "countered", "accepted", "declined", "expired", "completed", "closed"]
OPEN_OFFER = ("pending", "countered")

# Per category: (item, lowest price, highest price) and words sellers put in titles.
ITEMS: dict[str, dict[str, Any]] = {
    "electronics": {"kinds": (("Film Camera", 60, 320), ("Bluetooth Speaker", 20, 140), ("Noise-Cancelling Headphones",
                              45, 220), ("E-Reader", 35, 110), ("Game Console", 120, 380), ("Drone with Camera", 90,
                              420)), "words": ("Vintage", "Barely Used", "Refurbished", "Boxed", "Compact")},
    "furniture": {"kinds": (("Armchair", 60, 420), ("Oak Dining Table", 150, 700), ("Bookshelf", 35, 180),
                            ("Standing Desk", 120, 450), ("Bar Stools (Pair)", 40, 160), ("Dresser", 80, 380)),
                  "words": ("Mid-Century", "Solid Wood", "Scandinavian", "Industrial", "Mint")},
    "clothing": {"kinds": (("Denim Jacket", 20, 90), ("Wool Coat", 45, 240), ("Leather Boots", 40, 180),
                           ("Rain Shell", 30, 150), ("Cashmere Sweater", 35, 160)),
                 "words": ("Vintage", "Size M", "Size L", "Designer", "Like New")},
    "books": {"kinds": (("Cookbook Collection", 15, 60), ("First Edition Novel", 40, 400), ("Textbook Bundle", 25, 140),
                        ("Comic Box Set", 30, 200)), "words": ("Signed", "Hardcover", "Complete", "Rare")},
    "sports": {"kinds": (("Road Bike", 220, 1200), ("Snowboard", 90, 380), ("Kayak Paddle", 30, 140),
                         ("Tennis Racket", 35, 160), ("Climbing Shoes", 30, 110), ("Adjustable Dumbbells", 80, 300)),
               "words": ("Carbon", "Lightweight", "Pro", "Youth", "Barely Used")},
    "music": {"kinds": (("Acoustic Guitar", 90, 650), ("Digital Piano", 180, 900), ("Vinyl Record Lot", 25, 180),
                        ("Effects Pedal", 40, 220), ("Turntable", 70, 350)),
              "words": ("Vintage", "Handmade", "Studio", "Restored", "Gig-Ready")},
    "home": {"kinds": (("Espresso Machine", 70, 480), ("Stand Mixer", 90, 320), ("Cast Iron Pan Set", 25, 120),
                       ("Floor Lamp", 25, 160), ("Area Rug 5x8", 45, 300)),
             "words": ("Retro", "Ceramic", "Handwoven", "Stainless", "Boxed")},
    "toys": {"kinds": (("Building Brick Set", 20, 180), ("Wooden Train Set", 25, 110), ("Board Game Bundle", 20, 90),
                       ("Dollhouse", 40, 200)), "words": ("Complete", "Sealed", "Collector's", "Classic")},
}
CONDITION_NOTES = {
    "new": "Never used, still in the original packaging.",
    "like_new": "Used a handful of times; no visible wear.",
    "good": "Normal signs of use, fully working.",
    "fair": "Visible wear and a few scuffs; priced to match.",
}
RATING_COMMENTS = {
    5: ("Smooth sale, item exactly as described.", "Fast to reply and easy pickup. Recommended!"),
    4: ("Good seller, item as pictured.", "All fine, slightly slow to answer."),
    3: ("Okay, a bit more wear than described.",),
    2: ("Item had issues that were not mentioned.",),
    1: ("Not as described and the seller stopped replying.",),
}
# What users type when they list, search, bid and rate (free values for synthesis).
LISTING_DESCRIPTIONS = ("Pickup only, downtown. Cash or wallet.", "Moving out, must go this week.",  # any item
                        "Smoke-free home. Can deliver nearby for a small fee.", "Pickup in the evenings or on weekends.",
                        "Happy to send more photos.", "Can ship at the buyer's cost.")
OFFER_MESSAGES = ("Could you do this price? I can pick it up this week.", "Cash ready, can collect tomorrow.",
                  "Would you take this? It's a bit over my budget.", "Happy to pick it up tonight.",
                  "Is this still available? This is my best offer.", "Can meet halfway across town.")
COUNTER_MESSAGES = ("Meet me halfway?", "That's the lowest I can go.", "Price includes the case.",
                    "Lots of interest, so this is firm.", "I can do this if you pick it up today.")
SELLER_COMMENTS = (*(c for comments in RATING_COMMENTS.values() for c in comments),
                   "Exactly as described, friendly handover.", "Great communication, would buy again.")
# Wallet balance per user, cycled: a few well-funded buyers and one who can afford almost nothing.
WALLETS = (1_250.0, 640.0, 2_400.0, 18.5, 320.0, 905.0)
SCENARIOS = 6  # listings #0-#5 carry the fixed deal scenarios (see _seed_deal_scenarios)


class MarketState(State):
    users = Table("user", prefix="usr")
    listings = Table("listing", prefix="lst", index=("seller_id", "status", "category"))
    offers = Table("offer", prefix="ofr", index=("listing_id", "buyer_id", "seller_id"))
    purchases = Table("purchase", prefix="pur", index=("buyer_id", "seller_id"))
    ratings = Table("rating", prefix="rtg", index=("seller_id", "purchase_id"))


@attrs.frozen(kw_only=True)
class MarketOptions:
    """Seed size: how many users; each lists 2-4 items, and offers and past sales follow.
    At least 4, so every deal scenario has a distinct seller and buyer."""

    users: int = attrs.field(default=12, validator=attrs.validators.ge(4))


# -- shared rules ---------------------------------------------------------------------------------


def _offer_status(state: MarketState, offer: Record) -> str:
    """The status a caller sees: an open offer past its expiry reads as expired (expiry is a
    matter of the clock, so reading it writes nothing)."""
    if offer["status"] in OPEN_OFFER and offer["expires_at"] <= iso_datetime(state.now()):
        return "expired"
    return offer["status"]


def _owned_listing(state: MarketState, listing_id: str, user_id: str) -> Record:
    listing = state.listings.get(listing_id)
    require(listing["seller_id"] == user_id, f"listing {listing_id} belongs to another seller; only its seller can "
            "change it or answer its offers", reason="NOT_LISTING_OWNER", error=PermissionDenied)
    return listing


def _require_active(listing: Record) -> None:
    require(listing["status"] == "active", f"listing {listing['id']} ({listing['title']}) is {listing['status']}",
            reason="LISTING_NOT_ACTIVE", status=listing["status"])


def _require_not_own(listing: Record, user_id: str) -> None:
    require(listing["seller_id"] != user_id, "this is your own listing; you cannot make an offer on it or buy it",
            reason="OWN_LISTING")


def _require_open(state: MarketState, offer: Record) -> None:
    status = _offer_status(state, offer)
    require(status != "expired", f"offer {offer['id']} expired at {offer['expires_at']} (48 h after it was made); "
            "the buyer can make a new offer", reason="OFFER_EXPIRED", expired_at=offer["expires_at"])
    require(status in OPEN_OFFER, f"offer {offer['id']} is {status} and can no longer be answered",
            reason="OFFER_NOT_PENDING", status=status)


def _require_wallet(user: Record, amount: float) -> None:
    require(user["wallet_balance"] >= amount, f"wallet holds {user['wallet_balance']:.2f} USD, {amount:.2f} needed",
            reason="INSUFFICIENT_WALLET_BALANCE", balance=user["wallet_balance"], needed=amount)


def _close_open_offers(state: MarketState, listing_id: str, when: dt.datetime, keep: str | None = None) -> list[str]:
    """Close the listing's other live offers (open or accepted) once it is sold or withdrawn."""
    closed = []
    for offer in state.offers.where(lambda o: o["status"] in (*OPEN_OFFER, "accepted"), listing_id=listing_id):
        if offer["id"] != keep:
            state.offers.update(offer["id"], status="closed", responded_at=iso_datetime(when))
            closed.append(offer["id"])
    return closed


def _record_rating(state: MarketState, purchase: Record, stars: int, comment: str | None, when: dt.datetime) -> Record:
    seller = state.users.get(purchase["seller_id"])
    count, total = seller["rating_count"] + 1, seller["rating_total"] + stars
    state.users.update(seller["id"], rating_count=count, rating_total=total, seller_rating=round(total / count, 2))
    return state.ratings.insert({"purchase_id": purchase["id"], "seller_id": purchase["seller_id"],
                                 "buyer_id": purchase["buyer_id"], "listing_title": purchase["listing_title"],
                                 "stars": stars, "comment": comment, "created_at": iso_datetime(when)})


def _record_sale(state: MarketState, listing: Record, buyer_id: str, price: float, offer_id: str | None,
                 when: dt.datetime) -> Record:
    """Mark the listing sold, close its other offers and book the purchase (money moves elsewhere:
    seeded sales are already reflected in the wallets)."""
    fee = money(price * SELLER_FEE_RATE)
    seller = state.users.get(listing["seller_id"])
    state.users.update(seller["id"], sales_count=seller["sales_count"] + 1)
    state.listings.update(listing["id"], status="sold", buyer_id=buyer_id, sold_at=iso_datetime(when),
                          reserved_offer_id=None)
    if offer_id is not None:
        state.offers.update(offer_id, status="completed")
    _close_open_offers(state, listing["id"], when, keep=offer_id)
    return state.purchases.insert({
        "listing_id": listing["id"], "listing_title": listing["title"], "buyer_id": buyer_id,
        "seller_id": seller["id"], "price": price, "offer_id": offer_id, "seller_fee": fee,
        "seller_payout": money(price - fee), "status": "completed", "purchased_at": iso_datetime(when),
        "cancelled_reason": None,
    })


# -- views ----------------------------------------------------------------------------------------


def _listing_view(state: MarketState, listing: Record) -> Record:
    """A listing as buyers see it: the seller's minimum offer stays private."""
    seller = state.users.get(listing["seller_id"])
    view = {k: v for k, v in listing.items() if k != "minimum_offer"}
    view["seller"] = {"id": seller["id"], "username": seller["username"], "seller_rating": seller["seller_rating"],
                      "rating_count": seller["rating_count"], "city": seller["city"]}
    return view


def _offer_view(state: MarketState, offer: Record) -> Record:
    return {**offer, "status": _offer_status(state, offer)}


def _profile(user: Record) -> Record:
    return {k: v for k, v in user.items() if k != "rating_total"}


# -- seed -----------------------------------------------------------------------------------------


def build_market(rng: random.Random, options: MarketOptions) -> MarketState:
    """Users with wallets, their listings, past sales with ratings, and offers in every state."""
    state = MarketState(salt=str(rng.random()))
    users = _seed_users(state, rng, options.users)
    listings = _seed_listings(state, rng, users)
    _seed_deal_scenarios(state, rng, listings)
    _seed_sales(state, rng, listings[SCENARIOS:])
    _seed_random_offers(state, rng, listings[SCENARIOS:])
    return state


def _seed_users(state: MarketState, rng: random.Random, count: int) -> list[Record]:
    users, taken = [], set()
    for i in range(count):
        first, last = fake.person(rng)
        handle = f"{first.lower()}_{last.lower()[:4]}{rng.randint(1, 99)}"
        while handle in taken:
            handle += str(rng.randint(0, 9))
        taken.add(handle)
        city, region, _ = rng.choice(fake.CITIES)
        joined = fake.date_between(rng, state.today() - dt.timedelta(days=2_000), state.today() - dt.timedelta(days=30))
        users.append(state.users.insert({
            "username": handle, "name": f"{first} {last}", "city": f"{city}, {region}",
            "member_since": joined.isoformat(), "wallet_balance": WALLETS[i % len(WALLETS)],
            "seller_rating": None, "rating_count": 0, "rating_total": 0, "sales_count": 0,
        }))
    return users


def _seed_listings(state: MarketState, rng: random.Random, users: list[Record]) -> list[Record]:
    """Listings made in rounds over the users, so the first listings all have different sellers."""
    per_user = [rng.randint(2, 4) for _ in users]
    categories = list(ITEMS)
    listings = []
    for round_ in range(max(per_user)):
        for i, user in enumerate(users):
            if round_ >= per_user[i]:
                continue
            category = categories[len(listings) % len(categories)]
            kind, low, high = rng.choice(ITEMS[category]["kinds"])
            condition = rng.choice(("new", "like_new", "like_new", "good", "good", "fair"))
            price = float(rng.randint(low, high))
            listed = state.now() - dt.timedelta(hours=rng.randint(60, 24 * 40))
            listings.append(state.listings.insert({
                "seller_id": user["id"],
                "title": f"{rng.choice(ITEMS[category]['words'])} {kind}",
                "description": f"{kind} in {condition.replace('_', ' ')} condition. {CONDITION_NOTES[condition]} "
                               f"Pickup in {user['city']} or shipping at the buyer's cost.",
                "category": category,
                "condition": condition,
                "price": price,
                "minimum_offer": money(price * rng.choice((0.5, 0.6, 0.7, 0.8))),
                "accepts_offers": len(listings) != 5 and rng.random() < 0.85,  # #5 is always firm
                "status": "active",
                "listed_at": iso_datetime(listed),
                "reserved_offer_id": None,
                "buyer_id": None,
                "sold_at": None,
            }))
    return listings


def _buyer_for(state: MarketState, rng: random.Random, listing: Record) -> Record:
    """Another user who can afford a typical offer, as seeded buyers would."""
    others = state.users.where(lambda u: u["id"] != listing["seller_id"] and u["wallet_balance"] >= listing["price"])
    others = others or state.users.where(lambda u: u["id"] != listing["seller_id"])
    return rng.choice(others)


def _insert_offer(state: MarketState, listing: Record, buyer: Record, amount: float, hours_ago: float,
                  status: str = "pending", counter: float | None = None) -> Record:
    made = state.now() - dt.timedelta(hours=hours_ago)
    return state.offers.insert({
        "listing_id": listing["id"], "listing_title": listing["title"], "buyer_id": buyer["id"],
        "seller_id": listing["seller_id"], "amount": amount, "message": None, "status": status,
        "counter_amount": counter, "counter_message": None, "agreed_amount": amount if status == "accepted" else None,
        "created_at": iso_datetime(made), "expires_at": iso_datetime(made + OFFER_LIFETIME),
        "responded_at": None if status == "pending" else iso_datetime(made + dt.timedelta(hours=hours_ago / 2)),
    })


def _seed_deal_scenarios(state: MarketState, rng: random.Random, listings: list[Record]) -> None:
    """Fixed positions guarantee every offer state at any seed: #0 a fresh pending offer, #1 a
    countered one, #2 an expired one, #3 an accepted one (reserved listing), #4 a declined one;
    #5 has a firm price."""
    plans = (("pending", 5), ("countered", 20), ("pending", 60), ("accepted", 30), ("declined", 26))
    for listing, (status, hours_ago) in zip(listings, plans, strict=False):
        state.listings.update(listing["id"], accepts_offers=True)
        buyer = _buyer_for(state, rng, listing)
        amount = money(max(listing["minimum_offer"], listing["price"] * rng.uniform(0.65, 0.85)))
        counter = money((amount + listing["price"]) / 2) if status == "countered" else None
        offer = _insert_offer(state, listing, buyer, amount, hours_ago, status, counter)
        if status == "accepted":
            state.listings.update(listing["id"], status="reserved", reserved_offer_id=offer["id"])
    if len(listings) > len(plans):
        state.listings.update(listings[len(plans)]["id"], accepts_offers=False)


def _seed_sales(state: MarketState, rng: random.Random, listings: list[Record]) -> None:
    """Past sales: every third listing sold (most rated, one cancelled by the seller); a few withdrawn."""
    for n, listing in enumerate(listings[::3]):
        buyer = _buyer_for(state, rng, listing)
        when = state.now() - dt.timedelta(days=rng.randint(2, 30), hours=rng.randint(0, 12))
        purchase = _record_sale(state, listing, buyer["id"], listing["price"], None, when)
        if n == 1:  # the seller called the sale off and refunded: nothing to rate
            state.purchases.update(purchase["id"], status="cancelled", cancelled_reason="item damaged before handover")
            state.listings.update(listing["id"], status="withdrawn")
        elif n % 3 != 2:  # every third completed sale still waits for the buyer's rating
            stars = rng.choice((5, 5, 5, 4, 4, 3, 2, 1))
            _record_rating(state, purchase, stars, rng.choice(RATING_COMMENTS[stars]), when + dt.timedelta(days=2))
    for listing in listings[1::7]:
        state.listings.update(listing["id"], status="withdrawn")


def _seed_random_offers(state: MarketState, rng: random.Random, listings: list[Record]) -> None:
    """Open and declined offers from the last three days on the other active listings."""
    for listing in listings:
        listing = state.listings.get(listing["id"])
        if listing["status"] != "active" or not listing["accepts_offers"] or rng.random() < 0.5:
            continue
        amount = money(max(listing["minimum_offer"], listing["price"] * rng.uniform(0.6, 0.9)))
        _insert_offer(state, listing, _buyer_for(state, rng, listing), amount, rng.uniform(1, 70),
                      rng.choice(("pending", "pending", "declined")))


# -- examples: arguments valid on a fresh seed of any size -------------------------------------------


def _offer_in(s: MarketState, status: str) -> Record:
    """The first offer that a caller would see in ``status`` (falls back to any offer)."""
    return next((o for o in s.offers.all() if _offer_status(s, o) == status), None) or s.offers.all()[0]


def _offer_example(s: MarketState) -> Record:
    """A buyer who can afford the minimum offer on an active listing that takes offers and that they
    have no open offer on yet."""
    for listing in s.listings.where(accepts_offers=True, status="active"):
        amount = money(max(listing["minimum_offer"], listing["price"] * 0.8))
        if amount >= listing["price"]:
            continue
        for buyer in s.users.where(lambda u, a=amount: u["wallet_balance"] >= a):
            mine = s.offers.where(lambda o: o["status"] in OPEN_OFFER, listing_id=listing["id"], buyer_id=buyer["id"])
            if buyer["id"] != listing["seller_id"] and not mine:
                return {"user_id": buyer["id"], "listing_id": listing["id"], "amount": amount,
                        "message": "Could you do this price? I can pick it up this week."}
    raise LookupError("no listing open to offers")


def _buy_now_example(s: MarketState) -> Record:
    for listing in s.listings.where(status="active"):
        buyer = s.users.first(lambda u, p=listing["price"], sid=listing["seller_id"]:
                              u["wallet_balance"] >= p and u["id"] != sid)
        if buyer:
            return {"user_id": buyer["id"], "listing_id": listing["id"]}
    raise LookupError("nobody can afford an active listing")


def _buy_with_offer_example(s: MarketState) -> Record:
    offer = _offer_in(s, "accepted")
    return {"user_id": offer["buyer_id"], "listing_id": offer["listing_id"], "offer_id": offer["id"]}


def _own_active_listing(s: MarketState) -> Record:
    return s.listings.first(status="active") or s.listings.all()[0]


def _as_seller(listing: Record) -> Record:
    return {"user_id": listing["seller_id"], "listing_id": listing["id"]}


def _rate_example(s: MarketState) -> Record:
    rated = {r["purchase_id"] for r in s.ratings.all()}
    purchase = s.purchases.first(lambda p: p["id"] not in rated, status="completed") or s.purchases.all()[0]
    return {"user_id": purchase["buyer_id"], "purchase_id": purchase["id"], "stars": 5,
            "comment": "Exactly as described, friendly handover."}


def _round_price(value: float) -> float:
    """A price as a seller or buyer says it: whole fives under 100, tens above."""
    step = 5 if value < 100 else 10
    return float(max(step, round(value / step) * step))


def _new_listing(rng: random.Random, s: MarketState, args: Record | None = None) -> Record:
    """A listing a seller would post, drawn as a whole: a title of a kind in its category, a price
    in that kind's range, a condition and a description that says it, and a floor for offers."""
    category = rng.choice(list(ITEMS))
    kind, low, high = rng.choice(ITEMS[category]["kinds"])
    condition = rng.choice(list(CONDITION_NOTES))
    price = _round_price(rng.uniform(low, high) * (0.7 if condition == "fair" else 1.0))
    return {"title": f"{rng.choice(ITEMS[category]['words'])} {kind}", "category": category, "condition": condition,
            "description": f"{CONDITION_NOTES[condition]} {rng.choice(LISTING_DESCRIPTIONS)}", "price": price,
            "minimum_offer": _round_price(price * rng.choice((0.6, 0.7, 0.75, 0.8)))}


def _offer_amount(rng: random.Random, s: MarketState, args: Record | None = None) -> float:
    """What a buyer offers for the call's listing: 75-95% of its price, rounded as people say it;
    the seller's floor is private, so some offers are below it."""
    listing = s.listings.find((args or {}).get("listing_id") or "")
    price = listing["price"] if listing else float(rng.choice((120, 180, 240, 300, 450)))
    return min(_round_price(price * rng.choice((0.75, 0.8, 0.85, 0.9, 0.95))), money(price - 1))


def _counter_amount(rng: random.Random, s: MarketState, args: Record | None = None) -> float:
    """A seller's counter to the call's offer: between the offer and the list price."""
    offer = s.offers.find((args or {}).get("offer_id") or "")
    if offer is None:
        return float(rng.choice((150, 200, 250, 300, 400)))
    price = s.listings.get(offer["listing_id"])["price"]
    wanted = _round_price(offer["amount"] + (price - offer["amount"]) * rng.choice((0.4, 0.5, 0.6)))
    return wanted if offer["amount"] < wanted < price else money((offer["amount"] + price) / 2)


def _lower_price(rng: random.Random, s: MarketState, args: Record | None = None) -> float:
    """A new price for the call's listing: a cut of 5-25%, rounded as people say it."""
    listing = s.listings.find((args or {}).get("listing_id") or "")
    price = listing["price"] if listing else float(rng.choice((120, 180, 240, 300, 450)))
    return _round_price(price * rng.choice((0.75, 0.8, 0.85, 0.9, 0.95)))


# -- server and tools -----------------------------------------------------------------------------

server = Server(
    "marketplace",
    domain="commerce",
    description="A peer-to-peer marketplace for second-hand goods: listings, offers and counter-offers, "
    "wallet purchases between users and seller ratings.",
    state=MarketState,
    seed=build_market,
    options=MarketOptions,
)

UserId = Annotated[str, ref("user", "Id of the user acting (usr_...), e.g. a seller id from search_listings.")]
ListingId = Annotated[str, ref("listing", "Id of the listing (lst_...), from search_listings.")]
OfferId = Annotated[str, ref("offer", "Id of the offer (ofr_...), from list_offers or make_offer.")]
Price = Annotated[float, Field(ge=1, le=100_000, description="Price in USD; rounded to cents.")]
Message = Annotated[str | None, Field(max_length=500, description="Optional note to the other party.")]


@server.tool(
    answers=("price", "condition", "city"),
    read_only=True,
    reads=["listing", "user"],
    errors=["BAD_PRICE_RANGE"],
    examples=[
        {"query": "vintage"},
        {"category": "furniture", "max_price": 400, "sort": "price_asc", "limit": 5},
        lambda s: {"seller_id": s.listings.first()["seller_id"], "status": "sold"},
    ],
    asks=("search the marketplace for {query}", "find {category} listings under ${max_price}",
          "show me {condition} {category} items between ${min_price} and ${max_price}",
          "look for {query} listings, sorted by {sort}, {limit} at a time",
          "list the {status} listings from {seller_id}"),
    values={"query": lambda rng, s: rng.choice([w for li in s.listings.all() for w in li["title"].lower().split()
                                               if w.isalpha() and len(w) > 3])},
)
def search_listings(
    state: MarketState,
    query: Annotated[str | None, Field(max_length=80, description="Words to find in the title or description.")] = None,
    category: Annotated[Category | None, Field(description="Only listings in this category.")] = None,
    condition: Annotated[Condition | None, Field(description="Only items in this condition.")] = None,
    min_price: Annotated[float | None, Field(ge=0, description="Lowest list price in USD.")] = None,
    max_price: Annotated[float | None, Field(ge=0, description="Highest list price in USD.")] = None,
    seller_id: Annotated[str | None, ref("user", "Only listings by this seller (usr_...).")] = None,
    status: Annotated[ListingStatus, Field(description="Listing status; active ones can be bought.")] = "active",
    sort: Annotated[Literal["newest", "price_asc", "price_desc"], Field(description="Result order.")] = "newest",
    limit: Annotated[int, Field(ge=1, le=50, description="Page size (1-50).")] = 20,
    offset: Annotated[int, Field(ge=0, description="Results to skip; pass next_offset from the previous page.")] = 0,
) -> dict:
    """Search listings by words, category, condition, price range, seller and status (active by
    default). Returns one page of listings (title, price, condition, seller with rating, whether
    offers are accepted), the total and next_offset. Fails with BAD_PRICE_RANGE (min above max)."""
    require(min_price is None or max_price is None or min_price <= max_price, "min_price is above max_price",
            reason="BAD_PRICE_RANGE", error=InvalidArgument)
    words = (query or "").lower().split()
    filters = {k: v for k, v in (("category", category), ("condition", condition), ("seller_id", seller_id)) if v}

    def wanted(listing: Record) -> bool:
        text = f"{listing['title']} {listing['description']}".lower()
        return (all(w in text for w in words) and listing["price"] >= (min_price or 0)
                and (max_price is None or listing["price"] <= max_price))

    matches = state.listings.where(wanted, status=status, **filters)
    keys = {"newest": (lambda li: li["listed_at"], True), "price_asc": (lambda li: li["price"], False),
            "price_desc": (lambda li: li["price"], True)}
    key, descending = keys[sort]
    matches.sort(key=key, reverse=descending)
    page = paginate(matches, limit=limit, offset=offset, key="listings")
    page["listings"] = [_listing_view(state, li) for li in page["listings"]]
    return page


@server.tool(
    answers=("price", "condition", "status"),
    read_only=True,
    reads=["listing", "user", "offer"],
    errors=["LISTING_NOT_FOUND"],
    examples=[lambda s: {"listing_id": s.listings.first()["id"]}],
    asks=("show me {listing_id}", "tell me more about {listing_id}",
          "what condition is {listing_id} in and who's selling it", "pull up the details of {listing_id}"),
)
def get_listing(state: MarketState, listing_id: ListingId) -> dict:
    """One listing in full: title, description, category, condition, price, whether the seller takes
    offers, status (active, reserved for an accepted offer, sold, withdrawn), the seller's profile
    and rating, and how many offers are open on it. Fails with LISTING_NOT_FOUND."""
    listing = state.listings.get(listing_id)
    open_offers = [o for o in state.offers.where(listing_id=listing_id) if _offer_status(state, o) in OPEN_OFFER]
    return {**_listing_view(state, listing), "open_offer_count": len(open_offers)}


@server.tool(
    reads=["user", "listing"],
    produces=["listing"],
    errors=["USER_NOT_FOUND", "MINIMUM_OFFER_ABOVE_PRICE", "ACTIVE_LISTING_LIMIT"],
    examples=[lambda s: {"user_id": s.users.first()["id"], "title": "Walnut Record Cabinet", "category": "furniture",
                         "condition": "good", "price": 240.0, "minimum_offer": 180.0,
                         "description": "Holds about 300 LPs. Small scratch on the left side."}],
    asks=lambda a: (
        "list \"{title}\" at a firm ${price}, no offers, under {category}, {condition}: \"{description}\"",
        "sell my {condition} \"{title}\" in {category} for ${price} flat, buy now only, with \"{description}\"",
        "post \"{title}\" ({category}, {condition}) for exactly ${price} without taking offers; "
        "description \"{description}\"") if a.get("accepts_offers") is False else (
        "list my \"{title}\" for ${price} under {category}, condition {condition}, described as \"{description}\"",
        "put up a {condition} {category} item called \"{title}\" at ${price} with the description \"{description}\"",
        "sell \"{title}\" ({category}, {condition}) for ${price}; description: \"{description}\"",
        "create a listing \"{title}\" in {category}, {condition} condition, ${price}, declining offers under "
        "${minimum_offer}, saying \"{description}\""),
    values={field: part_of(_new_listing, field)
            for field in ("title", "description", "category", "condition", "price", "minimum_offer")},
)
def create_listing(
    state: MarketState,
    user_id: UserId,
    title: Annotated[str, Field(min_length=3, max_length=80, description="Listing title buyers see.")],
    description: Annotated[str, Field(min_length=1, max_length=2000, description="Details, flaws, pickup terms.")],
    category: Annotated[Category, Field(description="Category the listing is filed under.")],
    condition: Annotated[Condition, Field(description="Condition of the item.")],
    price: Price,
    minimum_offer: Annotated[float | None, Field(ge=1, le=100_000, description="Offers below this amount (USD) are "
                             "declined automatically; private to the seller. Default 60% of the price.")] = None,
    accepts_offers: Annotated[bool, Field(description="false for a firm price: buy now only.")] = True,
) -> dict:
    """List an item for sale as the acting user; it is active at once. Returns the new listing,
    including the private minimum offer. Fails with MINIMUM_OFFER_ABOVE_PRICE or
    ACTIVE_LISTING_LIMIT (25 active listings per seller)."""
    state.users.get(user_id)
    price = money(price)
    floor = money(price * DEFAULT_MINIMUM_OFFER_RATE) if minimum_offer is None else money(minimum_offer)
    require(floor <= price, f"minimum_offer {floor:.2f} is above the price {price:.2f}",
            reason="MINIMUM_OFFER_ABOVE_PRICE", error=InvalidArgument)
    active = len(state.listings.where(seller_id=user_id, status="active"))
    require(active < MAX_ACTIVE_LISTINGS, f"sellers may have {MAX_ACTIVE_LISTINGS} active listings; withdraw one first",
            reason="ACTIVE_LISTING_LIMIT", error=ResourceExhausted)
    return state.listings.insert({
        "seller_id": user_id, "title": title, "description": description, "category": category,
        "condition": condition, "price": price, "minimum_offer": floor, "accepts_offers": accepts_offers,
        "status": "active", "listed_at": iso_datetime(state.now()), "reserved_offer_id": None, "buyer_id": None,
        "sold_at": None,
    })


@server.tool(
    idempotent=True,
    reads=["user", "listing"],
    mutates=["listing"],
    errors=["USER_NOT_FOUND", "LISTING_NOT_FOUND", "NOT_LISTING_OWNER", "LISTING_NOT_ACTIVE"],
    examples=[lambda s: {**_as_seller(_own_active_listing(s)), "price": money(_own_active_listing(s)["price"] * 0.9)}],
    asks=("drop the price of {listing_id} to ${price}", "change the price of {listing_id} to ${price}",
          "reprice {listing_id} at ${price}", "make {listing_id} cost ${price} now"),
    values={"price": _lower_price},
)
def update_listing_price(state: MarketState, user_id: UserId, listing_id: ListingId, price: Price) -> dict:
    """Change the price of one of the acting user's active listings (open offers stay as they are;
    the private minimum offer is lowered to the new price if it was above it). Returns the listing
    and its previous price. Fails with NOT_LISTING_OWNER or LISTING_NOT_ACTIVE (reserved, sold or
    withdrawn listings keep their price)."""
    state.users.get(user_id)
    listing = _owned_listing(state, listing_id, user_id)
    _require_active(listing)
    price = money(price)
    updated = state.listings.update(listing_id, price=price, minimum_offer=min(listing["minimum_offer"], price))
    return {"listing": updated, "previous_price": listing["price"]}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with LISTING_NOT_ACTIVE
    reads=["user", "listing", "offer"],
    mutates=["listing", "offer"],
    errors=["USER_NOT_FOUND", "LISTING_NOT_FOUND", "NOT_LISTING_OWNER", "LISTING_NOT_ACTIVE"],
    examples=[lambda s: _as_seller(_own_active_listing(s)),
              lambda s: _as_seller(s.listings.get(_offer_in(s, "accepted")["listing_id"]))],
    asks=("take down {listing_id}", "withdraw {listing_id} from the marketplace",
          "remove {listing_id}, it's no longer for sale", "pull {listing_id} off the market"),
)
def withdraw_listing(state: MarketState, user_id: UserId, listing_id: ListingId) -> dict:
    """Take one of the acting user's listings off the market for good. Its open offers, and an
    accepted offer that reserved it, are closed. Returns the listing and the ids of the closed
    offers. Fails with NOT_LISTING_OWNER or LISTING_NOT_ACTIVE (already sold or withdrawn)."""
    state.users.get(user_id)
    listing = _owned_listing(state, listing_id, user_id)
    require(listing["status"] in ("active", "reserved"), f"listing {listing_id} is already {listing['status']}",
            reason="LISTING_NOT_ACTIVE", status=listing["status"])
    closed = _close_open_offers(state, listing_id, state.now())
    updated = state.listings.update(listing_id, status="withdrawn", reserved_offer_id=None)
    return {"listing": updated, "closed_offer_ids": closed}


@server.tool(
    idempotent=True,  # a repeat is refused with OFFER_ALREADY_OPEN
    reads=["user", "listing", "offer"],
    produces=["offer"],
    errors=["USER_NOT_FOUND", "LISTING_NOT_FOUND", "OWN_LISTING", "LISTING_NOT_ACTIVE", "OFFERS_NOT_ACCEPTED",
            "OFFER_NOT_BELOW_PRICE", "OFFER_BELOW_MINIMUM", "OFFER_ALREADY_OPEN", "INSUFFICIENT_WALLET_BALANCE"],
    examples=[_offer_example],
    asks=("offer ${amount} for {listing_id}", "make an offer of ${amount} on {listing_id}",
          "bid ${amount} on {listing_id} with the message \"{message}\"",
          "send the seller of {listing_id} an offer of ${amount} saying \"{message}\""),
    values={"amount": _offer_amount, "message": lambda rng, s: rng.choice(OFFER_MESSAGES)},
)
def make_offer(
    state: MarketState,
    user_id: UserId,
    listing_id: ListingId,
    amount: Annotated[float, Field(ge=1, le=100_000, description="Offered price in USD, below the list price.")],
    message: Message = None,
) -> dict:
    """Make a binding offer, as the acting user, on someone else's active listing. It stays open for
    48 hours for the seller to accept, decline or counter. Returns the offer. Fails with OWN_LISTING,
    LISTING_NOT_ACTIVE, OFFERS_NOT_ACCEPTED (firm price: use buy_listing), OFFER_NOT_BELOW_PRICE
    (buy at list price instead), OFFER_BELOW_MINIMUM (the details give the seller's minimum),
    OFFER_ALREADY_OPEN (one open offer per buyer and listing) or INSUFFICIENT_WALLET_BALANCE."""
    buyer = state.users.get(user_id)
    listing = state.listings.get(listing_id)
    _require_not_own(listing, user_id)
    _require_active(listing)
    require(listing["accepts_offers"], f"{listing['title']} has a firm price of {listing['price']:.2f}; buy it with "
            "buy_listing", reason="OFFERS_NOT_ACCEPTED")
    amount = money(amount)
    require(amount < listing["price"], f"{amount:.2f} is not below the list price {listing['price']:.2f}; "
            "buy it now with buy_listing", reason="OFFER_NOT_BELOW_PRICE", error=InvalidArgument)
    require(amount >= listing["minimum_offer"], f"the seller declines offers below {listing['minimum_offer']:.2f}",
            reason="OFFER_BELOW_MINIMUM", minimum=listing["minimum_offer"])
    mine = [o for o in state.offers.where(listing_id=listing_id, buyer_id=user_id)
            if _offer_status(state, o) in OPEN_OFFER]
    if mine:
        raise Conflict(f"you already have open offer {mine[0]['id']} on this listing", reason="OFFER_ALREADY_OPEN",
                       offer_id=mine[0]["id"])
    _require_wallet(buyer, amount)
    now = state.now()
    return _offer_view(state, state.offers.insert({
        "listing_id": listing_id, "listing_title": listing["title"], "buyer_id": user_id,
        "seller_id": listing["seller_id"], "amount": amount, "message": message, "status": "pending",
        "counter_amount": None, "counter_message": None, "agreed_amount": None, "created_at": iso_datetime(now),
        "expires_at": iso_datetime(now + OFFER_LIFETIME), "responded_at": None,
    }))


@server.tool(
    answers=("amount", "status", "counter_amount"),
    read_only=True,
    reads=["user", "offer"],
    errors=["USER_NOT_FOUND"],
    examples=[lambda s: {"user_id": s.offers.first()["seller_id"]},
              lambda s: {"user_id": s.offers.first()["buyer_id"], "role": "sent", "status": "pending"}],
    asks=lambda a: ("show the offers I've sent", "list my {status} offers to sellers",
                    "which offers have I made on {listing_id}") if a.get("role") == "sent" else (
        "show the offers I've received", "list the {status} offers on my listings",
        "what offers came in on {listing_id}", "who has made offers on my stuff"),
)
def list_offers(
    state: MarketState,
    user_id: UserId,
    role: Annotated[Literal["received", "sent"], Field(description="Offers received on the user's listings, or "
                                                       "offers the user sent.")] = "received",
    status: Annotated[OfferStatus | None, Field(description="Only offers in this status.")] = None,
    listing_id: Annotated[str | None, ref("listing", "Only offers on this listing (lst_...).")] = None,
) -> dict:
    """The acting user's offers, newest first: listing, buyer, seller, amount, counter amount,
    agreed amount, status (pending, countered, accepted, declined, expired, completed, closed) and
    when an open offer expires. Fails with USER_NOT_FOUND."""
    state.users.get(user_id)
    filters = {"seller_id" if role == "received" else "buyer_id": user_id}
    if listing_id:
        filters["listing_id"] = listing_id
    offers = [_offer_view(state, o) for o in state.offers.where(**filters)]
    offers = [o for o in offers if status is None or o["status"] == status]
    offers.sort(key=lambda o: o["created_at"], reverse=True)
    return {"user_id": user_id, "role": role, "offers": offers, "total": len(offers)}


@server.tool(
    idempotent=True,  # a repeat is refused with OFFER_NOT_PENDING
    reads=["user", "offer", "listing"],
    mutates=["offer"],
    errors=["USER_NOT_FOUND", "OFFER_NOT_FOUND", "NOT_LISTING_OWNER", "OFFER_EXPIRED", "OFFER_NOT_PENDING",
            "LISTING_NOT_ACTIVE", "INVALID_COUNTER_AMOUNT"],
    examples=[lambda s: {"user_id": _offer_in(s, "pending")["seller_id"], "offer_id": _offer_in(s, "pending")["id"],
                         "amount": money((_offer_in(s, "pending")["amount"]
                                          + s.listings.get(_offer_in(s, "pending")["listing_id"])["price"]) / 2),
                         "message": "Meet me halfway?"}],
    asks=("counter {offer_id} at ${amount}", "come back on {offer_id} with ${amount}",
          "reply to {offer_id} with a counter of ${amount} and say \"{message}\"",
          "make a counter-offer of ${amount} on {offer_id}"),
    values={"amount": _counter_amount, "message": lambda rng, s: rng.choice(COUNTER_MESSAGES)},
)
def counter_offer(
    state: MarketState,
    user_id: UserId,
    offer_id: OfferId,
    amount: Annotated[float, Field(ge=1, le=100_000, description="Counter price in USD: above the offer, below "
                                   "the list price.")],
    message: Message = None,
) -> dict:
    """As the seller, answer a pending offer with a counter price; the buyer then accepts or declines
    it with respond_to_offer before the original 48-hour expiry. Returns the offer. Fails with
    NOT_LISTING_OWNER, OFFER_EXPIRED, OFFER_NOT_PENDING (already countered or answered),
    LISTING_NOT_ACTIVE or INVALID_COUNTER_AMOUNT."""
    state.users.get(user_id)
    offer = state.offers.get(offer_id)
    listing = _owned_listing(state, offer["listing_id"], user_id)
    _require_open(state, offer)
    require(offer["status"] == "pending", f"offer {offer_id} was already countered at {offer['counter_amount']}",
            reason="OFFER_NOT_PENDING", status=offer["status"])
    _require_active(listing)
    amount = money(amount)
    require(offer["amount"] < amount < listing["price"], f"a counter must lie between the offer {offer['amount']:.2f} "
            f"and the list price {listing['price']:.2f}", reason="INVALID_COUNTER_AMOUNT", error=InvalidArgument)
    return _offer_view(state, state.offers.update(offer_id, status="countered", counter_amount=amount,
                                                  counter_message=message, responded_at=iso_datetime(state.now())))


@server.tool(
    idempotent=True,  # a repeat is refused with OFFER_NOT_PENDING
    reads=["user", "offer", "listing"],
    mutates=["offer", "listing"],
    errors=["USER_NOT_FOUND", "OFFER_NOT_FOUND", "NOT_LISTING_OWNER", "NOT_OFFER_BUYER", "OFFER_EXPIRED",
            "OFFER_NOT_PENDING", "LISTING_NOT_ACTIVE", "INSUFFICIENT_WALLET_BALANCE"],
    examples=[
        lambda s: {"user_id": _offer_in(s, "pending")["seller_id"], "offer_id": _offer_in(s, "pending")["id"],
                   "decision": "accept"},
        lambda s: {"user_id": _offer_in(s, "countered")["buyer_id"], "offer_id": _offer_in(s, "countered")["id"],
                   "decision": "decline"},
    ],
    asks=lambda a: ("reply to {offer_id} with {decision}", "go ahead and {decision} {offer_id}, we have a deal",
                    "let's {decision} {offer_id}") if a.get("decision") == "accept" else (
        "reply to {offer_id} with {decision}", "politely {decision} {offer_id}",
        "just {decision} {offer_id}, it doesn't work for me"),
)
def respond_to_offer(
    state: MarketState,
    user_id: UserId,
    offer_id: OfferId,
    decision: Annotated[Literal["accept", "decline"], Field(description="Accept or decline the open offer.")],
) -> dict:
    """Accept or decline an open offer. A pending offer is answered by the seller; a countered one
    by the buyer, at the counter price. Accepting reserves the listing for the buyer at the agreed
    amount; the buyer then pays with buy_listing and the offer id. Returns the offer and listing.
    Fails with NOT_LISTING_OWNER / NOT_OFFER_BUYER (not this party's turn), OFFER_EXPIRED,
    OFFER_NOT_PENDING, LISTING_NOT_ACTIVE (accepting when the listing is no longer active) or
    INSUFFICIENT_WALLET_BALANCE (a buyer accepting a counter they cannot pay)."""
    user = state.users.get(user_id)
    offer = state.offers.get(offer_id)
    if offer["status"] == "countered":
        require(offer["buyer_id"] == user_id, "the seller countered; only the buyer can answer a counter-offer",
                reason="NOT_OFFER_BUYER", error=PermissionDenied)
    else:
        _owned_listing(state, offer["listing_id"], user_id)
    _require_open(state, offer)
    listing = state.listings.get(offer["listing_id"])
    now = iso_datetime(state.now())
    if decision == "decline":
        offer = state.offers.update(offer_id, status="declined", responded_at=now)
        return {"offer": _offer_view(state, offer), "listing": _listing_view(state, listing)}
    _require_active(listing)
    agreed = offer["counter_amount"] if offer["status"] == "countered" else offer["amount"]
    if offer["status"] == "countered":
        _require_wallet(user, agreed)
    offer = state.offers.update(offer_id, status="accepted", agreed_amount=agreed, responded_at=now)
    listing = state.listings.update(listing["id"], status="reserved", reserved_offer_id=offer_id)
    return {"offer": _offer_view(state, offer), "listing": _listing_view(state, listing)}


@server.tool(
    idempotent=True,  # a repeat is refused with LISTING_NOT_ACTIVE: the listing is sold
    reads=["user", "listing", "offer"],
    produces=["purchase"],
    mutates=["listing", "offer", "user"],
    errors=["USER_NOT_FOUND", "LISTING_NOT_FOUND", "OFFER_NOT_FOUND", "OWN_LISTING", "LISTING_NOT_ACTIVE",
            "LISTING_RESERVED", "OFFER_LISTING_MISMATCH", "NOT_OFFER_BUYER", "OFFER_NOT_ACCEPTED",
            "INSUFFICIENT_WALLET_BALANCE"],
    examples=[_buy_now_example, _buy_with_offer_example],
    asks=lambda a: ("buy {listing_id} using {offer_id}", "complete the purchase of {listing_id} with {offer_id}",
                    "pay for {listing_id} at the price agreed in {offer_id}") if a.get("offer_id") else (
        "buy {listing_id}", "purchase {listing_id} at the asking price", "grab {listing_id} with my wallet balance"),
)
def buy_listing(
    state: MarketState,
    user_id: UserId,
    listing_id: ListingId,
    offer_id: Annotated[str | None, ref("offer", "The buyer's accepted offer (ofr_...), to pay the agreed amount "
                                        "instead of the list price.")] = None,
) -> dict:
    """Buy a listing as the acting user, paying from the wallet: the list price of an active
    listing, or with offer_id the agreed amount of the user's accepted offer on it. The listing
    becomes sold, other offers on it close, and the seller is paid less a 5% fee. Returns the
    purchase (its id is what rate_seller takes) and the buyer's new wallet balance. Fails with
    OWN_LISTING, LISTING_NOT_ACTIVE, LISTING_RESERVED (reserved for an accepted offer: its buyer
    must pass offer_id), OFFER_LISTING_MISMATCH, NOT_OFFER_BUYER, OFFER_NOT_ACCEPTED or
    INSUFFICIENT_WALLET_BALANCE."""
    buyer = state.users.get(user_id)
    listing = state.listings.get(listing_id)
    _require_not_own(listing, user_id)
    require(listing["status"] in ("active", "reserved"), f"{listing['title']} is {listing['status']}",
            reason="LISTING_NOT_ACTIVE", status=listing["status"])
    if offer_id is None:
        if listing["status"] == "reserved":
            deal = state.offers.get(listing["reserved_offer_id"])
            mine = deal["buyer_id"] == user_id
            raise FailedPrecondition(
                f"{listing['title']} is reserved for an accepted offer"
                + (f": yours, {deal['id']}; pass it as offer_id" if mine else "; it cannot be bought now"),
                reason="LISTING_RESERVED", offer_id=deal["id"] if mine else None)
        price = listing["price"]
    else:
        offer = state.offers.get(offer_id)
        require(offer["listing_id"] == listing_id, f"offer {offer_id} is for listing {offer['listing_id']}",
                reason="OFFER_LISTING_MISMATCH", error=InvalidArgument)
        require(offer["buyer_id"] == user_id, f"offer {offer_id} was made by another user", reason="NOT_OFFER_BUYER",
                error=PermissionDenied)
        require(offer["status"] == "accepted", f"offer {offer_id} is {_offer_status(state, offer)}, not accepted",
                reason="OFFER_NOT_ACCEPTED", status=_offer_status(state, offer))
        price = offer["agreed_amount"]
    _require_wallet(buyer, price)
    seller = state.users.get(listing["seller_id"])
    purchase = _record_sale(state, listing, user_id, price, offer_id, state.now())
    state.users.update(user_id, wallet_balance=money(buyer["wallet_balance"] - price))
    state.users.update(seller["id"], wallet_balance=money(seller["wallet_balance"] + purchase["seller_payout"]))
    return {"purchase": purchase, "wallet_balance": state.users.get(user_id)["wallet_balance"]}


@server.tool(
    answers=("price", "status", "purchased_at"),
    read_only=True,
    reads=["user", "purchase", "rating"],
    errors=["USER_NOT_FOUND"],
    examples=[lambda s: {"user_id": s.purchases.first()["buyer_id"]},
              lambda s: {"user_id": s.purchases.first()["seller_id"], "role": "seller"}],
    asks=lambda a: ("show what I've sold", "list my sales", "which of my items have been bought") if a.get(
        "role") == "seller" else ("show my purchases", "list what I've bought", "which items have I bought so far"),
)
def list_purchases(
    state: MarketState,
    user_id: UserId,
    role: Annotated[Literal["buyer", "seller"], Field(description="Things the user bought, or sold.")] = "buyer",
) -> dict:
    """The acting user's purchases (or sales), newest first: listing, price paid, fee and payout,
    status (completed or cancelled) and whether the buyer has rated the seller. Fails with
    USER_NOT_FOUND."""
    state.users.get(user_id)
    rows = state.purchases.where(**({"buyer_id": user_id} if role == "buyer" else {"seller_id": user_id}))
    rows.sort(key=lambda p: p["purchased_at"], reverse=True)
    rows = [{**p, "rated": state.ratings.first(purchase_id=p["id"]) is not None} for p in rows]
    return {"user_id": user_id, "role": role, "purchases": rows, "total": len(rows)}


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_RATED
    reads=["user", "purchase", "rating"],
    produces=["rating"],
    mutates=["user"],
    errors=["USER_NOT_FOUND", "PURCHASE_NOT_FOUND", "NOT_PURCHASE_BUYER", "PURCHASE_NOT_COMPLETED", "ALREADY_RATED"],
    examples=[_rate_example],
    asks=("rate the seller of {purchase_id} {stars} stars", "give {stars} stars to the seller for {purchase_id}",
          "leave a {stars}-star rating for {purchase_id} saying \"{comment}\"",
          "review the seller of {purchase_id}: {stars} out of 5, \"{comment}\""),
    values={"stars": lambda rng, s: rng.choice((5, 5, 5, 4, 4, 3, 2, 1)),
            "comment": lambda rng, s: rng.choice(SELLER_COMMENTS)},
)
def rate_seller(
    state: MarketState,
    user_id: UserId,
    purchase_id: Annotated[str, ref("purchase", "Id of the user's purchase (pur_...), from buy_listing or "
                                    "list_purchases.")],
    stars: Annotated[int, Field(ge=1, le=5, description="Rating of the seller, 1 (worst) to 5 (best).")],
    comment: Annotated[str | None, Field(max_length=500, description="Optional public comment.")] = None,
) -> dict:
    """As the buyer of a completed purchase, rate its seller once. Returns the rating and the
    seller's new average. Fails with NOT_PURCHASE_BUYER, PURCHASE_NOT_COMPLETED (the sale was
    cancelled) or ALREADY_RATED."""
    state.users.get(user_id)
    purchase = state.purchases.get(purchase_id)
    require(purchase["buyer_id"] == user_id, f"purchase {purchase_id} was made by another user; only its buyer rates",
            reason="NOT_PURCHASE_BUYER", error=PermissionDenied)
    require(purchase["status"] == "completed", f"purchase {purchase_id} was {purchase['status']}; nothing to rate",
            reason="PURCHASE_NOT_COMPLETED", status=purchase["status"])
    existing = state.ratings.first(purchase_id=purchase_id)
    if existing:
        raise Conflict(f"you rated this purchase on {existing['created_at'][:10]}", reason="ALREADY_RATED",
                       rating_id=existing["id"])
    rating = _record_rating(state, purchase, stars, comment, state.now())
    seller = state.users.get(purchase["seller_id"])
    return {"rating": rating, "seller_rating": seller["seller_rating"], "rating_count": seller["rating_count"]}


@server.tool(
    answers=("seller_rating", "rating_count", "city"),
    read_only=True,
    reads=["user", "listing", "rating"],
    errors=["USER_NOT_FOUND"],
    examples=[lambda s: {"user_id": s.users.first()["id"]}],
    asks=("show me the profile of {user_id}", "how well rated is {user_id} as a seller", "tell me about {user_id}",
          "check the wallet balance and ratings of {user_id}"),
)
def get_user_profile(state: MarketState, user_id: UserId) -> dict:
    """A user's profile: username, name, city, member since, wallet balance, seller rating with its
    count and the five latest ratings, completed sales and active listings. Fails with
    USER_NOT_FOUND."""
    user = state.users.get(user_id)
    ratings = state.ratings.where(seller_id=user_id)
    ratings.sort(key=lambda r: r["created_at"], reverse=True)
    return {**_profile(user), "active_listings": len(state.listings.where(seller_id=user_id, status="active")),
            "recent_ratings": ratings[:5]}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
