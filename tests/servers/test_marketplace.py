"""The marketplace server: its tool surface, seed, deal flow, business rules and typed failures."""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import marketplace
from prove_servers.marketplace import MarketOptions, server

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
    """The call fails with ``reason`` and ``code``, the tool declares the reason, and the state is
    left as it was — by the tool itself (it checks before it writes), not only by the rollback."""
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


def offer_in(rt: ServerRuntime, sid: str, status: str) -> dict:
    state = rt.state(sid)
    return next(o for o in state.offers.all() if marketplace._offer_status(state, o) == status)


def someone_else(state, *user_ids: str, wallet: float = 0.0) -> dict:
    return state.users.first(lambda u: u["id"] not in user_ids and u["wallet_balance"] >= wallet)


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_13_tools_each_described_with_examples():
    assert set(TOOLS) == {
        "search_listings", "get_listing", "create_listing", "update_listing_price", "withdraw_listing", "make_offer",
        "list_offers", "counter_offer", "respond_to_offer", "buy_listing", "list_purchases", "rate_seller",
        "get_user_profile",
    }
    assert (server.name, server.domain) == ("marketplace", "commerce")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_and_entities_match_what_tools_do():
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


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(marketplace)
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
        rt.call(sid, name, args)  # may be refused (already sold, already rated, ...) but changes nothing
        assert rt.state_hash(sid) == once, name


def test_create_listing_is_not_idempotent(rt, sid):
    args = example_args(rt, sid, TOOLS["create_listing"].examples[0])
    first, second = ok(rt, sid, "create_listing", **args), ok(rt, sid, "create_listing", **args)
    assert first["id"] != second["id"]


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    a, b, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert a.state_hash(a.new_session()) == b.state_hash(b.new_session())
    assert other.state_hash(other.new_session()) != a.state_hash(a.new_session())


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_seed_has_every_scenario_the_tools_need(seed):
    state = server.build_state(seed)
    statuses = {marketplace._offer_status(state, o) for o in state.offers}
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


def test_a_ten_times_larger_seed_works():
    big = ServerRuntime(server, options=MarketOptions(users=120))
    state = big.state(big.new_session())
    assert len(state.users) == 120 and len(state.listings) > 10 * 20
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        MarketOptions(users=0)


# -- the deal flow, with ids passed from one call to the next ---------------------------------------


def test_offer_counter_accept_buy_rate_flow(rt, sid):
    state = rt.state(sid)
    target = state.listings.first(lambda li: li["price"] >= 50, accepts_offers=True, status="active")
    seller_id = target["seller_id"]
    buyer_id = someone_else(state, seller_id, wallet=target["price"])["id"]
    found = ok(rt, sid, "search_listings", query=target["title"].split()[-1], category=target["category"], limit=50)
    listing = next(li for li in found["listings"] if li["id"] == target["id"])
    assert "minimum_offer" not in listing and listing["seller"]["id"] == seller_id
    details = ok(rt, sid, "get_listing", listing_id=listing["id"])

    amount = round(max(target["minimum_offer"], target["price"] * 0.8), 2)
    offer = ok(rt, sid, "make_offer", user_id=buyer_id, listing_id=listing["id"], amount=amount)
    assert offer["status"] == "pending" and offer["expires_at"] > offer["created_at"]
    assert ok(rt, sid, "get_listing", listing_id=listing["id"])["open_offer_count"] == details["open_offer_count"] + 1
    received = ok(rt, sid, "list_offers", user_id=seller_id, status="pending", listing_id=listing["id"])["offers"]
    offer_id = next(o["id"] for o in received if o["buyer_id"] == buyer_id)
    counter = round((amount + target["price"]) / 2, 2)
    countered = ok(rt, sid, "counter_offer", user_id=seller_id, offer_id=offer_id, amount=counter)
    assert (countered["status"], countered["counter_amount"]) == ("countered", counter)
    sent = ok(rt, sid, "list_offers", user_id=buyer_id, role="sent", status="countered")["offers"]
    assert [o["id"] for o in sent] == [offer_id]

    accepted = ok(rt, sid, "respond_to_offer", user_id=buyer_id, offer_id=offer_id, decision="accept")
    assert (accepted["offer"]["agreed_amount"], accepted["listing"]["status"]) == (counter, "reserved")
    wallets = {u: rt.state(sid).users.get(u)["wallet_balance"] for u in (buyer_id, seller_id)}
    bought = ok(rt, sid, "buy_listing", user_id=buyer_id, listing_id=listing["id"], offer_id=offer_id)
    purchase = bought["purchase"]
    assert (purchase["price"], purchase["offer_id"], purchase["status"]) == (counter, offer_id, "completed")
    assert bought["wallet_balance"] == round(wallets[buyer_id] - counter, 2)
    assert purchase["seller_payout"] == round(counter - round(counter * 0.05, 2), 2)
    seller_wallet = rt.state(sid).users.get(seller_id)["wallet_balance"]
    assert seller_wallet == round(wallets[seller_id] + purchase["seller_payout"], 2)
    assert ok(rt, sid, "get_listing", listing_id=listing["id"])["status"] == "sold"

    mine = ok(rt, sid, "list_purchases", user_id=buyer_id)["purchases"]
    assert mine[0]["id"] == purchase["id"] and not mine[0]["rated"]
    sales = ok(rt, sid, "list_purchases", user_id=seller_id, role="seller")["purchases"]
    assert purchase["id"] in [p["id"] for p in sales]
    rating = ok(rt, sid, "rate_seller", user_id=buyer_id, purchase_id=purchase["id"], stars=1, comment="Meh")
    profile = ok(rt, sid, "get_user_profile", user_id=seller_id)
    assert profile["rating_count"] == rating["rating_count"] and profile["recent_ratings"][0]["stars"] == 1
    assert ok(rt, sid, "list_purchases", user_id=buyer_id)["purchases"][0]["rated"]
    fails(rt, sid, "rate_seller", "ALREADY_RATED", "CONFLICT", user_id=buyer_id, purchase_id=purchase["id"], stars=5)


def test_buy_now_closes_the_other_offers(rt, sid):
    state = rt.state(sid)
    offer = offer_in(rt, sid, "pending")
    listing = state.listings.get(offer["listing_id"])
    buyer = someone_else(state, listing["seller_id"], offer["buyer_id"], wallet=listing["price"])
    bought = ok(rt, sid, "buy_listing", user_id=buyer["id"], listing_id=listing["id"])
    assert bought["purchase"]["price"] == listing["price"] and bought["purchase"]["offer_id"] is None
    assert ok(rt, sid, "list_offers", user_id=offer["buyer_id"], role="sent",
              listing_id=listing["id"])["offers"][0]["status"] == "closed"
    fails(rt, sid, "buy_listing", "LISTING_NOT_ACTIVE", user_id=buyer["id"], listing_id=listing["id"])
    fails(rt, sid, "make_offer", "LISTING_NOT_ACTIVE", user_id=offer["buyer_id"], listing_id=listing["id"], amount=10.0)


def test_seller_lists_reprices_and_withdraws(rt, sid):
    seller = rt.state(sid).users.first()["id"]
    listing = ok(rt, sid, "create_listing", user_id=seller, title="Brass Desk Lamp", description="Works.",
                 category="home", condition="good", price=100.0)
    assert (listing["status"], listing["minimum_offer"]) == ("active", 60.0)
    repriced = ok(rt, sid, "update_listing_price", user_id=seller, listing_id=listing["id"], price=50.0)
    assert (repriced["previous_price"], repriced["listing"]["price"], repriced["listing"]["minimum_offer"]) == (
        100.0, 50.0, 50.0)
    found = ok(rt, sid, "search_listings", seller_id=seller, query="brass lamp")["listings"]
    assert [li["id"] for li in found] == [listing["id"]]
    ok(rt, sid, "withdraw_listing", user_id=seller, listing_id=listing["id"])
    assert not ok(rt, sid, "search_listings", seller_id=seller, query="brass lamp")["listings"]
    fails(rt, sid, "withdraw_listing", "LISTING_NOT_ACTIVE", user_id=seller, listing_id=listing["id"])
    fails(rt, sid, "update_listing_price", "LISTING_NOT_ACTIVE", user_id=seller, listing_id=listing["id"], price=40.0)


def test_withdrawing_a_reserved_listing_closes_the_accepted_offer(rt, sid):
    accepted = offer_in(rt, sid, "accepted")
    result = ok(rt, sid, "withdraw_listing", user_id=accepted["seller_id"], listing_id=accepted["listing_id"])
    assert accepted["id"] in result["closed_offer_ids"]
    fails(rt, sid, "buy_listing", "LISTING_NOT_ACTIVE", user_id=accepted["buyer_id"],
          listing_id=accepted["listing_id"], offer_id=accepted["id"])


def test_search_filters_sorts_and_pages(rt, sid):
    page = ok(rt, sid, "search_listings", max_price=300, sort="price_asc", limit=4)
    prices = [li["price"] for li in page["listings"]]
    assert prices == sorted(prices) and all(p <= 300 for p in prices) and page["total"] > 4
    after = ok(rt, sid, "search_listings", max_price=300, sort="price_asc", limit=4, offset=4)["listings"]
    assert after[0]["price"] >= prices[-1]
    assert all(li["status"] == "active" for li in page["listings"])
    sold = ok(rt, sid, "search_listings", status="sold")["listings"]
    assert sold and all(li["status"] == "sold" for li in sold)
    assert ok(rt, sid, "search_listings", query="zzzz-nothing")["total"] == 0
    fails(rt, sid, "search_listings", "BAD_PRICE_RANGE", "INVALID_ARGUMENT", min_price=50, max_price=10)


# -- typed failures, each in the state that causes it ------------------------------------------------


def test_own_listing(rt, sid):
    listing = rt.state(sid).listings.first(accepts_offers=True, status="active")
    own = {"user_id": listing["seller_id"], "listing_id": listing["id"]}
    fails(rt, sid, "make_offer", "OWN_LISTING", **own, amount=listing["price"] - 1)
    fails(rt, sid, "buy_listing", "OWN_LISTING", **own)


def test_offer_expires_48_hours_after_it_was_made(rt, sid):
    expired = offer_in(rt, sid, "expired")
    assert expired["status"] == "pending"  # stored as made: expiry is read off the clock
    fails(rt, sid, "respond_to_offer", "OFFER_EXPIRED", user_id=expired["seller_id"], offer_id=expired["id"],
          decision="accept")
    error = fails(rt, sid, "counter_offer", "OFFER_EXPIRED", user_id=expired["seller_id"], offer_id=expired["id"],
                  amount=expired["amount"] + 1)
    assert error["details"]["expired_at"] == expired["expires_at"]
    listed = ok(rt, sid, "list_offers", user_id=expired["seller_id"], status="expired")["offers"]
    assert expired["id"] in [o["id"] for o in listed]

    fresh = offer_in(rt, sid, "pending")
    rt.state(sid).advance_clock(48 * 3600)  # arrange: two days pass
    fails(rt, sid, "respond_to_offer", "OFFER_EXPIRED", user_id=fresh["seller_id"], offer_id=fresh["id"],
          decision="decline")
    # An expired offer no longer blocks a new one from the same buyer.
    listing = rt.state(sid).listings.get(fresh["listing_id"])
    ok(rt, sid, "make_offer", user_id=fresh["buyer_id"], listing_id=listing["id"], amount=fresh["amount"])


def test_offer_amount_rules(rt, sid):
    state = rt.state(sid)
    listing = state.listings.first(lambda li: li["minimum_offer"] > 5, accepts_offers=True, status="active")
    buyer = someone_else(state, listing["seller_id"], wallet=listing["price"])["id"]
    args = {"user_id": buyer, "listing_id": listing["id"]}
    error = fails(rt, sid, "make_offer", "OFFER_BELOW_MINIMUM", **args, amount=listing["minimum_offer"] - 1)
    assert error["details"]["minimum"] == listing["minimum_offer"]
    fails(rt, sid, "make_offer", "OFFER_NOT_BELOW_PRICE", "INVALID_ARGUMENT", **args, amount=listing["price"])
    firm = state.listings.first(accepts_offers=False, status="active")
    fails(rt, sid, "make_offer", "OFFERS_NOT_ACCEPTED", user_id=someone_else(state, firm["seller_id"])["id"],
          listing_id=firm["id"], amount=firm["price"] - 1)


def test_one_open_offer_per_buyer_and_listing(rt, sid):
    pending = offer_in(rt, sid, "pending")
    error = fails(rt, sid, "make_offer", "OFFER_ALREADY_OPEN", "CONFLICT", user_id=pending["buyer_id"],
                  listing_id=pending["listing_id"], amount=pending["amount"] + 1)
    assert error["details"]["offer_id"] == pending["id"]


def test_insufficient_wallet_balance(rt, sid):
    state = rt.state(sid)
    poor = min(state.users, key=lambda u: u["wallet_balance"])
    listing = state.listings.first(lambda li: li["seller_id"] != poor["id"] and li["minimum_offer"] > 20,
                                   accepts_offers=True, status="active")
    error = fails(rt, sid, "buy_listing", "INSUFFICIENT_WALLET_BALANCE", user_id=poor["id"], listing_id=listing["id"])
    assert error["details"] == {"balance": poor["wallet_balance"], "needed": listing["price"]}
    fails(rt, sid, "make_offer", "INSUFFICIENT_WALLET_BALANCE", user_id=poor["id"], listing_id=listing["id"],
          amount=listing["minimum_offer"])
    countered = offer_in(rt, sid, "countered")
    state.users.update(countered["buyer_id"], wallet_balance=1.0)  # arrange: the buyer spent the money elsewhere
    fails(rt, sid, "respond_to_offer", "INSUFFICIENT_WALLET_BALANCE", user_id=countered["buyer_id"],
          offer_id=countered["id"], decision="accept")


def test_only_the_right_party_answers_an_offer(rt, sid):
    state = rt.state(sid)
    pending, countered = offer_in(rt, sid, "pending"), offer_in(rt, sid, "countered")
    listing = state.listings.get(pending["listing_id"])
    outsider = someone_else(state, pending["seller_id"], pending["buyer_id"])["id"]
    for code_args in ({"user_id": pending["buyer_id"]}, {"user_id": outsider}):
        fails(rt, sid, "respond_to_offer", "NOT_LISTING_OWNER", "PERMISSION_DENIED", **code_args,
              offer_id=pending["id"], decision="accept")
    fails(rt, sid, "counter_offer", "NOT_LISTING_OWNER", "PERMISSION_DENIED", user_id=pending["buyer_id"],
          offer_id=pending["id"], amount=pending["amount"] + 1)
    fails(rt, sid, "update_listing_price", "NOT_LISTING_OWNER", "PERMISSION_DENIED", user_id=outsider,
          listing_id=listing["id"], price=10.0)
    fails(rt, sid, "withdraw_listing", "NOT_LISTING_OWNER", "PERMISSION_DENIED", user_id=outsider,
          listing_id=listing["id"])
    fails(rt, sid, "respond_to_offer", "NOT_OFFER_BUYER", "PERMISSION_DENIED", user_id=countered["seller_id"],
          offer_id=countered["id"], decision="accept")


def test_counter_offer_rules(rt, sid):
    pending, countered = offer_in(rt, sid, "pending"), offer_in(rt, sid, "countered")
    price = rt.state(sid).listings.get(pending["listing_id"])["price"]
    args = {"user_id": pending["seller_id"], "offer_id": pending["id"]}
    for amount in (pending["amount"], price):
        fails(rt, sid, "counter_offer", "INVALID_COUNTER_AMOUNT", "INVALID_ARGUMENT", **args, amount=amount)
    fails(rt, sid, "counter_offer", "OFFER_NOT_PENDING", user_id=countered["seller_id"], offer_id=countered["id"],
          amount=countered["counter_amount"] + 1)
    declined = offer_in(rt, sid, "declined")
    fails(rt, sid, "respond_to_offer", "OFFER_NOT_PENDING", user_id=declined["seller_id"], offer_id=declined["id"],
          decision="accept")


def test_a_reserved_listing_is_bought_through_its_accepted_offer(rt, sid):
    state = rt.state(sid)
    accepted = offer_in(rt, sid, "accepted")
    listing = state.listings.get(accepted["listing_id"])
    assert listing["status"] == "reserved"
    outsider = someone_else(state, listing["seller_id"], accepted["buyer_id"], wallet=listing["price"])["id"]
    error = fails(rt, sid, "buy_listing", "LISTING_RESERVED", user_id=outsider, listing_id=listing["id"])
    assert error["details"]["offer_id"] is None
    error = fails(rt, sid, "buy_listing", "LISTING_RESERVED", user_id=accepted["buyer_id"], listing_id=listing["id"])
    assert error["details"]["offer_id"] == accepted["id"]
    fails(rt, sid, "buy_listing", "NOT_OFFER_BUYER", "PERMISSION_DENIED", user_id=outsider, listing_id=listing["id"],
          offer_id=accepted["id"])
    other = state.listings.first(lambda li: li["seller_id"] != accepted["buyer_id"], status="active")
    fails(rt, sid, "buy_listing", "OFFER_LISTING_MISMATCH", "INVALID_ARGUMENT", user_id=accepted["buyer_id"],
          listing_id=other["id"], offer_id=accepted["id"])
    pending = offer_in(rt, sid, "pending")
    fails(rt, sid, "buy_listing", "OFFER_NOT_ACCEPTED", user_id=pending["buyer_id"], listing_id=pending["listing_id"],
          offer_id=pending["id"])
    fails(rt, sid, "respond_to_offer", "LISTING_NOT_ACTIVE", user_id=listing["seller_id"],
          offer_id=state.offers.insert({**pending, "id": "ofr_second", "listing_id": listing["id"],
                                        "seller_id": listing["seller_id"]})["id"], decision="accept")
    bought = ok(rt, sid, "buy_listing", user_id=accepted["buyer_id"], listing_id=listing["id"], offer_id=accepted["id"])
    assert bought["purchase"]["price"] == accepted["agreed_amount"]


def test_rating_needs_the_buyer_of_a_completed_purchase(rt, sid):
    state = rt.state(sid)
    cancelled = state.purchases.first(status="cancelled")
    fails(rt, sid, "rate_seller", "PURCHASE_NOT_COMPLETED", user_id=cancelled["buyer_id"],
          purchase_id=cancelled["id"], stars=3)
    rated = state.ratings.first()
    purchase = state.purchases.get(rated["purchase_id"])
    error = fails(rt, sid, "rate_seller", "ALREADY_RATED", "CONFLICT", user_id=purchase["buyer_id"],
                  purchase_id=purchase["id"], stars=5)
    assert error["details"]["rating_id"] == rated["id"]
    fails(rt, sid, "rate_seller", "NOT_PURCHASE_BUYER", "PERMISSION_DENIED", user_id=purchase["seller_id"],
          purchase_id=purchase["id"], stars=5)


def test_listing_rules(rt, sid):
    seller = rt.state(sid).users.first()["id"]
    base = {"user_id": seller, "title": "Old Radio", "description": "Crackles.", "category": "electronics",
            "condition": "fair"}
    fails(rt, sid, "create_listing", "MINIMUM_OFFER_ABOVE_PRICE", "INVALID_ARGUMENT", **base, price=20.0,
          minimum_offer=25.0)
    active = len(rt.state(sid).listings.where(seller_id=seller, status="active"))
    for _ in range(marketplace.MAX_ACTIVE_LISTINGS - active):
        ok(rt, sid, "create_listing", **base, price=20.0)
    fails(rt, sid, "create_listing", "ACTIVE_LISTING_LIMIT", "RESOURCE_EXHAUSTED", **base, price=20.0)


def test_unknown_ids_fail_with_entity_specific_not_found(rt, sid):
    user = rt.state(sid).users.first()["id"]
    fails(rt, sid, "get_listing", "LISTING_NOT_FOUND", "NOT_FOUND", listing_id="lst_missing")
    fails(rt, sid, "get_user_profile", "USER_NOT_FOUND", "NOT_FOUND", user_id="usr_missing")
    fails(rt, sid, "respond_to_offer", "OFFER_NOT_FOUND", "NOT_FOUND", user_id=user, offer_id="ofr_missing",
          decision="decline")
    fails(rt, sid, "rate_seller", "PURCHASE_NOT_FOUND", "NOT_FOUND", user_id=user, purchase_id="pur_missing", stars=4)


def test_schema_rejects_bad_arguments(rt, sid):
    user = rt.state(sid).users.first()["id"]
    assert rt.call(sid, "rate_seller", {"user_id": user, "purchase_id": "pur_x", "stars": 6}).error["reason"] == (
        "SCHEMA_VIOLATION")
    assert rt.call(sid, "search_listings", {"category": "cars"}).error["reason"] == "SCHEMA_VIOLATION"
