"""The marketplace server's own rules: listings, offers and counter-offers with expiry, buying,
wallets, ratings and their typed failures. What every server guarantees is the conformance kit's
(tests/servers/test_conformance.py)."""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import marketplace
from prove_servers.marketplace import MarketOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def offer_status(h, offer: dict) -> str:
    """The offer's status as its seller sees it (an open offer past its expiry reads as expired)."""
    received = h.ok("list_offers", user_id=offer["seller_id"], role="received")["offers"]
    return next(o["status"] for o in received if o["id"] == offer["id"])


def offer_in(h, status: str) -> dict:
    return next(o for o in h.state.offers.all() if offer_status(h, o) == status)


def someone_else(state, *user_ids: str, wallet: float = 0.0) -> dict:
    return state.users.first(lambda u: u["id"] not in user_ids and u["wallet_balance"] >= wallet)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "search_listings", "get_listing", "create_listing", "update_listing_price", "withdraw_listing", "make_offer",
        "list_offers", "counter_offer", "respond_to_offer", "buy_listing", "list_purchases", "rate_seller",
        "get_user_profile",
    }
    assert servers_registered_by(marketplace) == [server]
    assert (server.name, server.domain) == ("marketplace", "commerce")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"search_listings", "get_listing", "list_offers", "list_purchases", "get_user_profile"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"withdraw_listing"}
    assert not TOOLS["create_listing"].spec.annotations.idempotent
    for name, tool in TOOLS.items():
        assert tool.spec.annotations.read_only or tool.spec.produces or tool.spec.mutates, name
    assert TOOLS["buy_listing"].spec.produces == ("purchase",)
    assert TOOLS["buy_listing"].spec.entity_params() == {
        "user_id": "user", "listing_id": "listing", "offer_id": "offer"}
    assert TOOLS["rate_seller"].spec.entity_params() == {"user_id": "user", "purchase_id": "purchase"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_create_listing_is_not_idempotent(h):
    args = h.example_args("create_listing")
    first, second = h.ok("create_listing", **args), h.ok("create_listing", **args)
    assert first["id"] != second["id"]


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_seed_has_every_scenario_the_tools_need(seed):
    h = ServerHarness(server, seed=seed)
    state = h.state
    statuses = {offer_status(h, o) for o in state.offers}
    assert statuses >= {"pending", "countered", "accepted", "declined", "expired"}
    assert {li["status"] for li in state.listings} == {"active", "reserved", "sold", "withdrawn"}
    assert state.listings.where(accepts_offers=False, status="active")
    assert {p["status"] for p in state.purchases} == {"completed", "cancelled"}
    rated = {r["purchase_id"] for r in state.ratings}
    assert state.purchases.where(lambda p: p["id"] in rated) and state.purchases.where(
        lambda p: p["id"] not in rated, status="completed")
    assert min(u["wallet_balance"] for u in state.users) < 20 < max(u["wallet_balance"] for u in state.users)
    reserved = state.listings.first(status="reserved")
    assert state.offers.get(reserved["reserved_offer_id"])["status"] == "accepted"


def test_a_ten_times_larger_seed_works_and_options_are_validated():
    big = ServerHarness(server, options=MarketOptions(users=120))
    assert len(big.state.users) == 120 and len(big.state.listings) > 10 * 20
    big.run_examples()
    with pytest.raises(ValueError):
        MarketOptions(users=0)


# -- the deal flow, with ids passed from one call to the next ---------------------------------------


def test_offer_counter_accept_buy_rate_flow(h):
    state = h.state
    target = state.listings.first(lambda li: li["price"] >= 50, accepts_offers=True, status="active")
    seller_id = target["seller_id"]
    buyer_id = someone_else(state, seller_id, wallet=target["price"])["id"]
    found = h.ok("search_listings", query=target["title"].split()[-1], category=target["category"], limit=50)
    listing = next(li for li in found["listings"] if li["id"] == target["id"])
    assert "minimum_offer" not in listing and listing["seller"]["id"] == seller_id
    details = h.ok("get_listing", listing_id=listing["id"])

    amount = round(max(target["minimum_offer"], target["price"] * 0.8), 2)
    offer = h.ok("make_offer", user_id=buyer_id, listing_id=listing["id"], amount=amount)
    assert offer["status"] == "pending" and offer["expires_at"] > offer["created_at"]
    assert h.ok("get_listing", listing_id=listing["id"])["open_offer_count"] == details["open_offer_count"] + 1
    received = h.ok("list_offers", user_id=seller_id, status="pending", listing_id=listing["id"])["offers"]
    offer_id = next(o["id"] for o in received if o["buyer_id"] == buyer_id)
    counter = round((amount + target["price"]) / 2, 2)
    countered = h.ok("counter_offer", user_id=seller_id, offer_id=offer_id, amount=counter)
    assert (countered["status"], countered["counter_amount"]) == ("countered", counter)
    sent = h.ok("list_offers", user_id=buyer_id, role="sent", status="countered")["offers"]
    assert [o["id"] for o in sent] == [offer_id]

    accepted = h.ok("respond_to_offer", user_id=buyer_id, offer_id=offer_id, decision="accept")
    assert (accepted["offer"]["agreed_amount"], accepted["listing"]["status"]) == (counter, "reserved")
    wallets = {u: h.state.users.get(u)["wallet_balance"] for u in (buyer_id, seller_id)}
    bought = h.ok("buy_listing", user_id=buyer_id, listing_id=listing["id"], offer_id=offer_id)
    purchase = bought["purchase"]
    assert (purchase["price"], purchase["offer_id"], purchase["status"]) == (counter, offer_id, "completed")
    assert bought["wallet_balance"] == round(wallets[buyer_id] - counter, 2)
    assert purchase["seller_payout"] == round(counter - round(counter * 0.05, 2), 2)
    seller_wallet = h.state.users.get(seller_id)["wallet_balance"]
    assert seller_wallet == round(wallets[seller_id] + purchase["seller_payout"], 2)
    assert h.ok("get_listing", listing_id=listing["id"])["status"] == "sold"

    mine = h.ok("list_purchases", user_id=buyer_id)["purchases"]
    assert mine[0]["id"] == purchase["id"] and not mine[0]["rated"]
    sales = h.ok("list_purchases", user_id=seller_id, role="seller")["purchases"]
    assert purchase["id"] in [p["id"] for p in sales]
    rating = h.ok("rate_seller", user_id=buyer_id, purchase_id=purchase["id"], stars=1, comment="Meh")
    profile = h.ok("get_user_profile", user_id=seller_id)
    assert profile["rating_count"] == rating["rating_count"] and profile["recent_ratings"][0]["stars"] == 1
    assert h.ok("list_purchases", user_id=buyer_id)["purchases"][0]["rated"]
    h.fails("rate_seller", "ALREADY_RATED", "CONFLICT", user_id=buyer_id, purchase_id=purchase["id"], stars=5)


def test_buy_now_closes_the_other_offers(h):
    state = h.state
    offer = offer_in(h, "pending")
    listing = state.listings.get(offer["listing_id"])
    buyer = someone_else(state, listing["seller_id"], offer["buyer_id"], wallet=listing["price"])
    bought = h.ok("buy_listing", user_id=buyer["id"], listing_id=listing["id"])
    assert bought["purchase"]["price"] == listing["price"] and bought["purchase"]["offer_id"] is None
    assert h.ok("list_offers", user_id=offer["buyer_id"], role="sent",
                listing_id=listing["id"])["offers"][0]["status"] == "closed"
    h.fails("buy_listing", "LISTING_NOT_ACTIVE", "FAILED_PRECONDITION", user_id=buyer["id"], listing_id=listing["id"])
    h.fails("make_offer", "LISTING_NOT_ACTIVE", "FAILED_PRECONDITION", user_id=offer["buyer_id"],
            listing_id=listing["id"], amount=10.0)


def test_seller_lists_reprices_and_withdraws(h):
    seller = h.state.users.first()["id"]
    listing = h.ok("create_listing", user_id=seller, title="Brass Desk Lamp", description="Works.",
                   category="home", condition="good", price=100.0)
    assert (listing["status"], listing["minimum_offer"]) == ("active", 60.0)
    repriced = h.ok("update_listing_price", user_id=seller, listing_id=listing["id"], price=50.0)
    assert (repriced["previous_price"], repriced["listing"]["price"], repriced["listing"]["minimum_offer"]) == (
        100.0, 50.0, 50.0)
    found = h.ok("search_listings", seller_id=seller, query="brass lamp")["listings"]
    assert [li["id"] for li in found] == [listing["id"]]
    h.ok("withdraw_listing", user_id=seller, listing_id=listing["id"])
    assert not h.ok("search_listings", seller_id=seller, query="brass lamp")["listings"]
    h.fails("withdraw_listing", "LISTING_NOT_ACTIVE", "FAILED_PRECONDITION", user_id=seller, listing_id=listing["id"])
    h.fails("update_listing_price", "LISTING_NOT_ACTIVE", "FAILED_PRECONDITION", user_id=seller,
            listing_id=listing["id"], price=40.0)


def test_withdrawing_a_reserved_listing_closes_the_accepted_offer(h):
    accepted = offer_in(h, "accepted")
    result = h.ok("withdraw_listing", user_id=accepted["seller_id"], listing_id=accepted["listing_id"])
    assert accepted["id"] in result["closed_offer_ids"]
    h.fails("buy_listing", "LISTING_NOT_ACTIVE", "FAILED_PRECONDITION", user_id=accepted["buyer_id"],
            listing_id=accepted["listing_id"], offer_id=accepted["id"])


def test_search_filters_sorts_and_pages(h):
    page = h.ok("search_listings", max_price=300, sort="price_asc", limit=4)
    prices = [li["price"] for li in page["listings"]]
    assert prices == sorted(prices) and all(p <= 300 for p in prices) and page["total"] > 4
    after = h.ok("search_listings", max_price=300, sort="price_asc", limit=4, offset=4)["listings"]
    assert after[0]["price"] >= prices[-1]
    assert all(li["status"] == "active" for li in page["listings"])
    sold = h.ok("search_listings", status="sold")["listings"]
    assert sold and all(li["status"] == "sold" for li in sold)
    assert h.ok("search_listings", query="zzzz-nothing")["total"] == 0
    h.fails("search_listings", "BAD_PRICE_RANGE", "INVALID_ARGUMENT", min_price=50, max_price=10)


# -- typed failures, each in the state that causes it ------------------------------------------------


def test_own_listing(h):
    listing = h.state.listings.first(accepts_offers=True, status="active")
    own = {"user_id": listing["seller_id"], "listing_id": listing["id"]}
    h.fails("make_offer", "OWN_LISTING", "FAILED_PRECONDITION", **own, amount=listing["price"] - 1)
    h.fails("buy_listing", "OWN_LISTING", "FAILED_PRECONDITION", **own)


def test_offer_expires_48_hours_after_it_was_made(h):
    expired = offer_in(h, "expired")
    assert expired["status"] == "pending"  # stored as made: expiry is read off the clock
    h.fails("respond_to_offer", "OFFER_EXPIRED", "FAILED_PRECONDITION", user_id=expired["seller_id"],
            offer_id=expired["id"], decision="accept")
    error = h.fails("counter_offer", "OFFER_EXPIRED", "FAILED_PRECONDITION", user_id=expired["seller_id"],
                    offer_id=expired["id"], amount=expired["amount"] + 1)
    assert error["details"]["expired_at"] == expired["expires_at"]
    listed = h.ok("list_offers", user_id=expired["seller_id"], status="expired")["offers"]
    assert expired["id"] in [o["id"] for o in listed]

    fresh = offer_in(h, "pending")
    h.state.advance_clock(48 * 3600)  # arrange: two days pass
    h.fails("respond_to_offer", "OFFER_EXPIRED", "FAILED_PRECONDITION", user_id=fresh["seller_id"],
            offer_id=fresh["id"], decision="decline")
    # An expired offer no longer blocks a new one from the same buyer.
    listing = h.state.listings.get(fresh["listing_id"])
    h.ok("make_offer", user_id=fresh["buyer_id"], listing_id=listing["id"], amount=fresh["amount"])


def test_offer_amount_rules(h):
    state = h.state
    listing = state.listings.first(lambda li: li["minimum_offer"] > 5, accepts_offers=True, status="active")
    buyer = someone_else(state, listing["seller_id"], wallet=listing["price"])["id"]
    args = {"user_id": buyer, "listing_id": listing["id"]}
    error = h.fails("make_offer", "OFFER_BELOW_MINIMUM", "FAILED_PRECONDITION", **args,
                    amount=listing["minimum_offer"] - 1)
    assert error["details"]["minimum"] == listing["minimum_offer"]
    h.fails("make_offer", "OFFER_NOT_BELOW_PRICE", "INVALID_ARGUMENT", **args, amount=listing["price"])
    firm = state.listings.first(accepts_offers=False, status="active")
    h.fails("make_offer", "OFFERS_NOT_ACCEPTED", "FAILED_PRECONDITION",
            user_id=someone_else(state, firm["seller_id"])["id"], listing_id=firm["id"], amount=firm["price"] - 1)


def test_one_open_offer_per_buyer_and_listing(h):
    pending = offer_in(h, "pending")
    error = h.fails("make_offer", "OFFER_ALREADY_OPEN", "CONFLICT", user_id=pending["buyer_id"],
                    listing_id=pending["listing_id"], amount=pending["amount"] + 1)
    assert error["details"]["offer_id"] == pending["id"]


def test_insufficient_wallet_balance(h):
    state = h.state
    poor = min(state.users, key=lambda u: u["wallet_balance"])
    listing = state.listings.first(lambda li: li["seller_id"] != poor["id"] and li["minimum_offer"] > 20,
                                   accepts_offers=True, status="active")
    error = h.fails("buy_listing", "INSUFFICIENT_WALLET_BALANCE", "FAILED_PRECONDITION", user_id=poor["id"],
                    listing_id=listing["id"])
    assert error["details"] == {"balance": poor["wallet_balance"], "needed": listing["price"]}
    h.fails("make_offer", "INSUFFICIENT_WALLET_BALANCE", "FAILED_PRECONDITION", user_id=poor["id"],
            listing_id=listing["id"], amount=listing["minimum_offer"])
    countered = offer_in(h, "countered")
    state.users.update(countered["buyer_id"], wallet_balance=1.0)  # arrange: the buyer spent the money elsewhere
    h.fails("respond_to_offer", "INSUFFICIENT_WALLET_BALANCE", "FAILED_PRECONDITION", user_id=countered["buyer_id"],
            offer_id=countered["id"], decision="accept")


def test_only_the_right_party_answers_an_offer(h):
    state = h.state
    pending, countered = offer_in(h, "pending"), offer_in(h, "countered")
    listing = state.listings.get(pending["listing_id"])
    outsider = someone_else(state, pending["seller_id"], pending["buyer_id"])["id"]
    for code_args in ({"user_id": pending["buyer_id"]}, {"user_id": outsider}):
        h.fails("respond_to_offer", "NOT_LISTING_OWNER", "PERMISSION_DENIED", **code_args,
                offer_id=pending["id"], decision="accept")
    h.fails("counter_offer", "NOT_LISTING_OWNER", "PERMISSION_DENIED", user_id=pending["buyer_id"],
            offer_id=pending["id"], amount=pending["amount"] + 1)
    h.fails("update_listing_price", "NOT_LISTING_OWNER", "PERMISSION_DENIED", user_id=outsider,
            listing_id=listing["id"], price=10.0)
    h.fails("withdraw_listing", "NOT_LISTING_OWNER", "PERMISSION_DENIED", user_id=outsider,
            listing_id=listing["id"])
    h.fails("respond_to_offer", "NOT_OFFER_BUYER", "PERMISSION_DENIED", user_id=countered["seller_id"],
            offer_id=countered["id"], decision="accept")


def test_counter_offer_rules(h):
    pending, countered = offer_in(h, "pending"), offer_in(h, "countered")
    price = h.state.listings.get(pending["listing_id"])["price"]
    args = {"user_id": pending["seller_id"], "offer_id": pending["id"]}
    for amount in (pending["amount"], price):
        h.fails("counter_offer", "INVALID_COUNTER_AMOUNT", "INVALID_ARGUMENT", **args, amount=amount)
    h.fails("counter_offer", "OFFER_NOT_PENDING", "FAILED_PRECONDITION", user_id=countered["seller_id"],
            offer_id=countered["id"], amount=countered["counter_amount"] + 1)
    declined = offer_in(h, "declined")
    h.fails("respond_to_offer", "OFFER_NOT_PENDING", "FAILED_PRECONDITION", user_id=declined["seller_id"],
            offer_id=declined["id"], decision="accept")


def test_a_reserved_listing_is_bought_through_its_accepted_offer(h):
    state = h.state
    accepted = offer_in(h, "accepted")
    listing = state.listings.get(accepted["listing_id"])
    assert listing["status"] == "reserved"
    outsider = someone_else(state, listing["seller_id"], accepted["buyer_id"], wallet=listing["price"])["id"]
    error = h.fails("buy_listing", "LISTING_RESERVED", "FAILED_PRECONDITION", user_id=outsider,
                    listing_id=listing["id"])
    assert error["details"]["offer_id"] is None
    error = h.fails("buy_listing", "LISTING_RESERVED", "FAILED_PRECONDITION", user_id=accepted["buyer_id"],
                    listing_id=listing["id"])
    assert error["details"]["offer_id"] == accepted["id"]
    h.fails("buy_listing", "NOT_OFFER_BUYER", "PERMISSION_DENIED", user_id=outsider, listing_id=listing["id"],
            offer_id=accepted["id"])
    other = state.listings.first(lambda li: li["seller_id"] != accepted["buyer_id"], status="active")
    h.fails("buy_listing", "OFFER_LISTING_MISMATCH", "INVALID_ARGUMENT", user_id=accepted["buyer_id"],
            listing_id=other["id"], offer_id=accepted["id"])
    pending = offer_in(h, "pending")
    h.fails("buy_listing", "OFFER_NOT_ACCEPTED", "FAILED_PRECONDITION", user_id=pending["buyer_id"],
            listing_id=pending["listing_id"], offer_id=pending["id"])
    h.fails("respond_to_offer", "LISTING_NOT_ACTIVE", "FAILED_PRECONDITION", user_id=listing["seller_id"],
            offer_id=state.offers.insert({**pending, "id": "ofr_second", "listing_id": listing["id"],
                                          "seller_id": listing["seller_id"]})["id"], decision="accept")
    bought = h.ok("buy_listing", user_id=accepted["buyer_id"], listing_id=listing["id"], offer_id=accepted["id"])
    assert bought["purchase"]["price"] == accepted["agreed_amount"]


def test_rating_needs_the_buyer_of_a_completed_purchase(h):
    state = h.state
    cancelled = state.purchases.first(status="cancelled")
    h.fails("rate_seller", "PURCHASE_NOT_COMPLETED", "FAILED_PRECONDITION", user_id=cancelled["buyer_id"],
            purchase_id=cancelled["id"], stars=3)
    rated = state.ratings.first()
    purchase = state.purchases.get(rated["purchase_id"])
    error = h.fails("rate_seller", "ALREADY_RATED", "CONFLICT", user_id=purchase["buyer_id"],
                    purchase_id=purchase["id"], stars=5)
    assert error["details"]["rating_id"] == rated["id"]
    h.fails("rate_seller", "NOT_PURCHASE_BUYER", "PERMISSION_DENIED", user_id=purchase["seller_id"],
            purchase_id=purchase["id"], stars=5)


def test_listing_rules(h):
    seller = h.state.users.first()["id"]
    base = {"user_id": seller, "title": "Old Radio", "description": "Crackles.", "category": "electronics",
            "condition": "fair"}
    h.fails("create_listing", "MINIMUM_OFFER_ABOVE_PRICE", "INVALID_ARGUMENT", **base, price=20.0,
            minimum_offer=25.0)
    active = len(h.state.listings.where(seller_id=seller, status="active"))
    for _ in range(marketplace.MAX_ACTIVE_LISTINGS - active):
        h.ok("create_listing", **base, price=20.0)
    h.fails("create_listing", "ACTIVE_LISTING_LIMIT", "RESOURCE_EXHAUSTED", **base, price=20.0)


def test_unknown_ids_fail_with_entity_specific_not_found(h):
    user = h.state.users.first()["id"]
    h.fails("get_listing", "LISTING_NOT_FOUND", "NOT_FOUND", listing_id="lst_missing")
    h.fails("get_user_profile", "USER_NOT_FOUND", "NOT_FOUND", user_id="usr_missing")
    h.fails("respond_to_offer", "OFFER_NOT_FOUND", "NOT_FOUND", user_id=user, offer_id="ofr_missing",
            decision="decline")
    h.fails("rate_seller", "PURCHASE_NOT_FOUND", "NOT_FOUND", user_id=user, purchase_id="pur_missing", stars=4)


def test_schema_rejects_bad_arguments(h):
    user = h.state.users.first()["id"]
    assert h.call("rate_seller", {"user_id": user, "purchase_id": "pur_x", "stars": 6}).error["reason"] == (
        "SCHEMA_VIOLATION")
    assert h.call("search_listings", {"category": "cars"}).error["reason"] == "SCHEMA_VIOLATION"
