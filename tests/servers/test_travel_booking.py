"""The travel_booking server's own rules: flights, fares and seats, hotels and rates, bookings,
changes and cancellations, travellers and loyalty points, with typed failures. What every server
guarantees is the conformance kit's (tests/servers/test_conformance.py)."""

import datetime as dt

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import travel_booking
from prove_servers.travel_booking import TravelOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def day(state, offset: int) -> str:
    return (state.today() + dt.timedelta(days=offset)).isoformat()


def seeded(h, **equals) -> dict:
    """A seeded booking: ``fare_family="standard", passengers=2`` is the upcoming changeable trip."""
    return h.state.bookings.first(**equals)


def travellers(h) -> tuple[dict, dict, dict]:
    holder, partner, child = h.state.travellers.all()
    return holder, partner, child


def flight_fare(h, predicate, **fare_equals) -> tuple[dict, dict]:
    """The first future flight matching ``predicate`` and its fare matching ``fare_equals``."""
    state = h.state
    for flight in state.flights.where(lambda f: f["date"] > state.today().isoformat() and predicate(f)):
        fare = state.fares.first(flight_id=flight["id"], **fare_equals)
        if fare is not None:
            return flight, fare
    raise LookupError(fare_equals)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "find_airports", "search_flights", "get_flight", "get_fare_rules", "get_seat_map", "select_seat",
        "search_hotels", "get_hotel", "get_room_rates", "book_flight", "book_hotel", "get_booking", "list_bookings",
        "change_flight", "cancel_booking", "add_traveller", "list_travellers", "get_loyalty_account",
        "redeem_points", "claim_missing_points",
    }
    assert servers_registered_by(travel_booking) == [server]
    assert (server.name, server.domain) == ("travel_booking", "travel")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"find_airports", "search_flights", "get_flight", "get_fare_rules", "get_seat_map",
                         "search_hotels", "get_hotel", "get_room_rates", "get_booking", "list_bookings",
                         "list_travellers", "get_loyalty_account"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"cancel_booking"}
    assert not TOOLS["book_flight"].spec.annotations.idempotent
    assert not TOOLS["redeem_points"].spec.annotations.idempotent
    assert "booking" in TOOLS["book_flight"].spec.produces and "booking" in TOOLS["book_hotel"].spec.produces
    assert TOOLS["book_flight"].spec.entity_params() == {"fare_id": "fare"}
    assert TOOLS["change_flight"].spec.entity_params() == {"booking_id": "booking", "new_flight_id": "flight"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_seed_has_the_variety_tasks_need(h):
    state = h.state
    assert {f["route"] for f in state.flights} >= {"JFK-LAX", "LAX-JFK", "JFK-LHR", "LHR-JFK"}
    assert len(state.flights.where(route="JFK-LAX", date=day(state, 3))) == 3
    assert state.fares.where(seats_left=0) and state.rooms.where(rooms_left=0)
    assert state.flights.where(lambda f: f["date"] < state.today().isoformat())  # flown already
    kinds = {(b["kind"], b["status"], b.get("fare_family") or b.get("rate_plan"), b["channel"]) for b in state.bookings}
    assert kinds == {("flight", "confirmed", "standard", "app"), ("flight", "confirmed", "basic", "app"),
                     ("hotel", "confirmed", "flexible", "app"), ("hotel", "confirmed", "non_refundable", "app"),
                     ("flight", "cancelled", "standard", "app"), ("flight", "confirmed", "standard", "partner")}
    holder, partner, child = travellers(h)
    assert holder["account_holder"] and child["passport_number"] is None
    assert state.loyalty_accounts.first()["points_balance"] > 0


def test_seeded_sales_are_consistent_with_inventory(h):
    state = h.state
    booking = seeded(h, fare_family="standard", passengers=2)
    flight = state.flights.get(booking["flight_id"])
    assert set(booking["seats"].values()) <= set(flight["occupied_seats"].split())
    activity = state.loyalty_activity.where(booking_id=booking["id"])
    assert [(a["kind"], a["points"]) for a in activity] == [("earn", booking["points_earned"])]
    balance = state.loyalty_accounts.first()["points_balance"]
    assert max(state.loyalty_activity.all(), key=lambda a: a["created_at"])["balance_after"] == balance




def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=TravelOptions(routes=60))
    assert len(big.state.flights) > 8 * len(h.state.flights)  # route 0 flies 3 a day
    assert len(big.state.hotels) > len(h.state.hotels)
    big.run_examples()
    with pytest.raises(ValueError):
        TravelOptions(routes=0)


# -- flights ----------------------------------------------------------------------------------------


def test_ids_flow_from_airport_search_to_a_seated_booking(h):
    state = h.state
    jfk = h.ok("find_airports", query="new york")["airports"][0]
    assert jfk["code"] == "JFK" and "LAX" in jfk["nonstop_to"]
    found = h.ok("search_flights", origin=jfk["code"], destination="lax", date=day(state, 4), passengers=2)
    assert [f["departure"] for f in found["flights"]] == sorted(f["departure"] for f in found["flights"])
    flight = found["flights"][0]
    fare_id = next(f["fare_id"] for f in flight["fares"] if f["family"] == "standard")
    rules = h.ok("get_fare_rules", fare_id=fare_id, passengers=2)
    assert rules["changeable"] and not rules["refundable"] and rules["change_fee"] == 75.0
    holder, partner, _ = travellers(h)
    seats_before = state.fares.get(fare_id)["seats_left"]
    booking = h.ok("book_flight", fare_id=fare_id, passengers=2, traveller_ids=[holder["id"], partner["id"]])
    assert booking["price"]["total"] == rules["total"] == booking["amount_paid"]
    assert booking["points_earned"] == rules["points_earned"]
    assert h.state.fares.get(fare_id)["seats_left"] == seats_before - 2
    seat_map = h.ok("get_seat_map", flight_id=flight["id"])
    exit_seat = next(s["seat"] for row in seat_map["rows"] for s in row["seats"]
                     if s["available"] and s["extra_legroom"])
    seated = h.ok("select_seat", booking_id=booking["booking_id"], traveller_id=partner["id"], seat=exit_seat)
    assert seated["fee"] == 35.0 and seated["amount_paid"] == round(booking["amount_paid"] + 35, 2)
    after = h.ok("get_seat_map", flight_id=flight["id"])
    assert not next(s for row in after["rows"] for s in row["seats"] if s["seat"] == exit_seat)["available"]
    full = h.ok("get_booking", booking_id=booking["booking_id"])
    assert full["seats"] == {partner["id"]: exit_seat} and full["trip_status"] == "upcoming"
    assert [a["kind"] for a in full["loyalty_activity"]] == ["earn"]
    listed = h.ok("list_bookings", kind="flight", when="upcoming")["bookings"]
    assert booking["booking_id"] in {b["booking_id"] for b in listed}
    account = h.ok("get_loyalty_account")
    assert account["recent_activity"][0]["booking_id"] == booking["booking_id"]


def test_search_flights_validates_route_and_dates(h):
    state = h.state
    h.fails("search_flights", "DEPARTURE_IN_PAST", "FAILED_PRECONDITION", origin="JFK", destination="LAX",
            date=day(state, -1))
    error = h.fails("search_flights", "SCHEDULE_NOT_PUBLISHED", origin="JFK", destination="LAX",
                    date=day(state, 12))
    assert error["details"]["last_date"] == day(state, 11)
    h.fails("search_flights", "SAME_ORIGIN_DESTINATION", "INVALID_ARGUMENT", origin="JFK", destination="jfk",
            date=day(state, 2))
    h.fails("search_flights", "AIRPORT_NOT_FOUND", "NOT_FOUND", origin="XXX", destination="LAX",
            date=day(state, 2))
    h.fails("search_flights", "BAD_DATE", origin="JFK", destination="LAX", date="2026-02-30")
    today = h.ok("search_flights", origin="JFK", destination="LAX", date=day(state, 0))["flights"]
    assert all(f["departure"] > "2026-03-02T09:00:00Z" for f in today) and len(today) == 2  # 07:05 has left
    assert h.ok("search_flights", origin="DEN", destination="LHR", date=day(state, 2))["flights"] == []


def test_booking_checks_passengers_departure_seats_and_passports(h):
    state = h.state
    holder, partner, child = travellers(h)
    flight, fare = flight_fare(h, lambda f: not f["international"], family="standard")
    pair = [holder["id"], partner["id"]]
    error = h.fails("book_flight", "PASSENGER_COUNT_MISMATCH", "INVALID_ARGUMENT", fare_id=fare["id"],
                    passengers=3, traveller_ids=pair)
    assert error["details"] == {"passengers": 3, "travellers": 2}
    h.fails("book_flight", "DUPLICATE_TRAVELLER", fare_id=fare["id"], passengers=2,
            traveller_ids=[holder["id"], holder["id"]])
    h.fails("book_flight", "TRAVELLER_NOT_FOUND", fare_id=fare["id"], passengers=1, traveller_ids=["trv_none"])
    departed = state.flights.first(lambda f: f["departure"] < "2026-03-02T09:00:00Z", date=day(state, 0))
    stale = state.fares.first(lambda f: f["seats_left"] > 0, flight_id=departed["id"])
    h.fails("book_flight", "DEPARTURE_IN_PAST", "FAILED_PRECONDITION", fare_id=stale["id"], passengers=1,
            traveller_ids=[holder["id"]])
    _, sold_out = flight_fare(h, lambda f: True, seats_left=0)
    error = h.fails("book_flight", "FARE_SOLD_OUT", fare_id=sold_out["id"], passengers=1,
                    traveller_ids=[holder["id"]])
    assert error["details"]["seats_left"] == 0
    _, scarce = flight_fare(h, lambda f: True, seats_left=2)
    h.fails("book_flight", "FARE_SOLD_OUT", fare_id=scarce["id"], passengers=3,
            traveller_ids=[holder["id"], partner["id"], child["id"]])
    _, london = flight_fare(h, lambda f: f["route"] == "JFK-LHR", family="standard")
    error = h.fails("book_flight", "PASSPORT_REQUIRED", fare_id=london["id"], passengers=3,
                    traveller_ids=[holder["id"], partner["id"], child["id"]])
    assert error["details"]["traveller_id"] == child["id"]
    h.ok("book_flight", fare_id=london["id"], passengers=2, traveller_ids=pair)


def test_seat_rules(h):
    state = h.state
    booking = seeded(h, fare_family="standard", passengers=2)
    holder, partner, child = travellers(h)
    flight = state.flights.get(booking["flight_id"])
    base = {"booking_id": booking["id"], "traveller_id": partner["id"]}
    taken = next(s for s in flight["occupied_seats"].split() if s[:-1].isdigit() and int(s[:-1]) >= 10)
    error = h.fails("select_seat", "SEAT_TAKEN", "CONFLICT", **base, seat=taken)
    assert error["details"]["seat"] == taken
    h.fails("select_seat", "SEAT_NOT_IN_CABIN", "INVALID_ARGUMENT", **base, seat="2A")
    h.fails("select_seat", "SEAT_NOT_FOUND", "NOT_FOUND", **base, seat="2B")
    h.fails("select_seat", "SEAT_NOT_FOUND", **base, seat="40A")
    h.fails("select_seat", "TRAVELLER_NOT_ON_BOOKING", **{**base, "traveller_id": child["id"]}, seat="20A")
    basic = seeded(h, fare_family="basic")
    h.fails("select_seat", "SEAT_SELECTION_NOT_ALLOWED", booking_id=basic["id"], traveller_id=holder["id"],
            seat="20A")
    hotel = seeded(h, kind="hotel")
    h.fails("select_seat", "NOT_A_FLIGHT_BOOKING", booking_id=hotel["id"], traveller_id=holder["id"], seat="20A")
    old = booking["seats"][holder["id"]]
    seat_map = h.ok("get_seat_map", flight_id=flight["id"], cabin="economy")["rows"]
    free = next(s["seat"] for row in seat_map for s in row["seats"] if s["available"] and not s["extra_legroom"])
    h.ok("select_seat", booking_id=booking["id"], traveller_id=holder["id"], seat=free.lower())
    occupied = h.state.flights.get(flight["id"])["occupied_seats"].split()
    assert free in occupied and old not in occupied  # the old seat is released


def test_changing_a_flight_charges_fee_and_fare_difference(h):
    state = h.state
    booking = seeded(h, fare_family="standard", passengers=2)
    old_fare = state.fares.get(booking["fare_id"])
    target = next(f for f in state.flights.where(route="JFK-LAX") if f["date"] > booking["trip_start"][:10]
                  and state.fares.first(flight_id=f["id"], family="standard")["price"] > old_fare["price"])
    new_fare = state.fares.first(flight_id=target["id"], family="standard")
    seats_before = new_fare["seats_left"]
    result = h.ok("change_flight", booking_id=booking["id"], new_flight_id=target["id"])
    difference = round((new_fare["price"] - old_fare["price"]) * 2, 2)
    assert (result["change_fee"], result["fare_difference"]) == (150.0, difference)
    assert result["booking"]["amount_paid"] == round(booking["amount_paid"] + 150 + difference, 2)
    assert result["booking"]["seats"] == {} and result["booking"]["trip_start"] == target["departure"]
    after = h.state
    assert after.fares.get(new_fare["id"])["seats_left"] == seats_before - 2
    assert after.fares.get(old_fare["id"])["seats_left"] == old_fare["seats_left"] + 2
    released = booking["seats"][booking["traveller_ids"][0]]
    assert released not in after.flights.get(booking["flight_id"])["occupied_seats"].split()
    h.fails("change_flight", "ALREADY_ON_FLIGHT", booking_id=booking["id"], new_flight_id=target["id"])
    cheaper = next(f for f in state.flights.where(route="JFK-LAX") if f["date"] > day(state, 0)
                   and state.fares.first(flight_id=f["id"], family="standard")["price"] < new_fare["price"]
                   and state.fares.first(flight_id=f["id"], family="standard")["seats_left"] >= 2)
    assert h.ok("change_flight", booking_id=booking["id"], new_flight_id=cheaper["id"])["charged"] == 150.0


def test_change_rules(h):
    state = h.state
    booking = seeded(h, fare_family="standard", passengers=2)
    basic = seeded(h, fare_family="basic")
    later = next(f for f in state.flights.where(route=f"{basic['origin']}-{basic['destination']}")
                 if f["id"] != basic["flight_id"] and f["date"] > day(state, 1))
    h.fails("change_flight", "NON_CHANGEABLE_FARE", "FAILED_PRECONDITION", booking_id=basic["id"],
            new_flight_id=later["id"])
    elsewhere = state.flights.first(lambda f: f["date"] > day(state, 1), route="SFO-SEA")
    h.fails("change_flight", "DIFFERENT_ROUTE", "INVALID_ARGUMENT", booking_id=booking["id"],
            new_flight_id=elsewhere["id"])
    gone = state.flights.first(lambda f: f["departure"] < "2026-03-02T09:00:00Z", route="JFK-LAX")
    h.fails("change_flight", "DEPARTURE_IN_PAST", booking_id=booking["id"], new_flight_id=gone["id"])
    full = next(f for f in state.flights.where(route="JFK-LAX") if f["date"] > day(state, 0))
    fare = state.fares.first(flight_id=full["id"], family="standard")
    state.fares.update(fare["id"], seats_left=1)  # arrange: one standard seat left, two travellers
    h.fails("change_flight", "FARE_SOLD_OUT", booking_id=booking["id"], new_flight_id=full["id"])
    hotel = seeded(h, kind="hotel")
    h.fails("change_flight", "NOT_A_FLIGHT_BOOKING", booking_id=hotel["id"], new_flight_id=full["id"])
    cancelled = seeded(h, status="cancelled")
    h.fails("change_flight", "BOOKING_ALREADY_CANCELLED", booking_id=cancelled["id"], new_flight_id=full["id"])
    h.fails("change_flight", "FLIGHT_NOT_FOUND", booking_id=booking["id"], new_flight_id="flt_missing")


# -- cancellations and refunds -------------------------------------------------------------------------


def test_non_refundable_fare_refunds_only_taxes_and_returns_inventory(h):
    state = h.state
    booking = seeded(h, fare_family="standard", passengers=2)
    fare = state.fares.get(booking["fare_id"])
    balance = state.loyalty_accounts.first()["points_balance"]
    quote = h.ok("get_booking", booking_id=booking["id"])["cancellation_quote"]
    result = h.ok("cancel_booking", booking_id=booking["id"])
    assert result["refund"]["refund"] == quote["refund"] == booking["price"]["taxes"]
    assert result["refund"]["points_reversed"] == booking["points_earned"]
    after = h.state
    assert after.loyalty_accounts.first()["points_balance"] == balance - booking["points_earned"]
    assert after.fares.get(fare["id"])["seats_left"] == fare["seats_left"] + 2
    assert set(booking["seats"].values()).isdisjoint(after.flights.get(booking["flight_id"])["occupied_seats"].split())
    error = h.fails("cancel_booking", "BOOKING_ALREADY_CANCELLED", "FAILED_PRECONDITION",
                    booking_id=booking["id"])
    assert "was cancelled" in error["message"]


def test_refundable_fare_refunds_all_but_the_fee_and_returns_redeemed_points(h):
    holder, partner, _ = travellers(h)
    _, flex = flight_fare(h, lambda f: not f["international"], cabin="economy", family="flex",
                          seats_left=travel_booking.MAX_PASSENGERS)
    booking = h.ok("book_flight", fare_id=flex["id"], passengers=2, traveller_ids=[holder["id"], partner["id"]])
    redeemed = h.ok("redeem_points", booking_id=booking["booking_id"], points=1000)
    assert redeemed["amount_paid"] == round(booking["amount_paid"] - 10, 2)
    balance = redeemed["points_balance"]
    result = h.ok("cancel_booking", booking_id=booking["booking_id"])["refund"]
    assert result["refund"] == round(redeemed["amount_paid"] - 2 * 50, 2) and result["cancellation_fee"] == 100.0
    assert result["points_returned"] == 1000
    assert h.state.loyalty_accounts.first()["points_balance"] == balance + 1000 - booking["points_earned"]


def test_hotel_cancellation_depends_on_rate_plan_and_deadline(h):
    state = h.state
    flexible = seeded(h, kind="hotel", rate_plan="flexible")
    strict = seeded(h, kind="hotel", rate_plan="non_refundable")
    room = state.rooms.get(strict["room_id"])
    assert h.ok("cancel_booking", booking_id=strict["id"])["refund"]["refund"] == 0.0
    assert h.state.rooms.get(room["id"])["rooms_left"] == room["rooms_left"] + 1
    late = h.fork()
    early = h.ok("cancel_booking", booking_id=flexible["id"])["refund"]
    assert early["refund"] == flexible["amount_paid"] and early["cancellation_fee"] == 0
    deadline = dt.datetime.fromisoformat(flexible["free_cancellation_until"].replace("Z", "+00:00"))
    late.state.advance_clock(int((deadline - late.state.now()).total_seconds()) + 60)  # arrange: too late
    charged = late.ok("cancel_booking", booking_id=flexible["id"])["refund"]
    first_night = round(flexible["price"]["nightly"][0]["rate"] * 1.14, 2)
    assert charged["cancellation_fee"] == first_night
    assert charged["refund"] == round(flexible["amount_paid"] - first_night, 2)


def test_a_started_trip_cannot_be_cancelled_or_redeemed_on(h):
    past = seeded(h, channel="partner")
    h.fails("cancel_booking", "TRIP_ALREADY_STARTED", "FAILED_PRECONDITION", booking_id=past["id"])
    h.fails("redeem_points", "TRIP_ALREADY_STARTED", booking_id=past["id"], points=1000)
    h.fails("cancel_booking", "BOOKING_NOT_FOUND", "NOT_FOUND", booking_id="bkg_missing")


# -- hotels -------------------------------------------------------------------------------------------


def test_hotel_search_rates_and_booking(h):
    state = h.state
    stay = {"check_in": day(state, 4), "check_out": day(state, 7)}  # Friday, Saturday and Sunday nights
    found = h.ok("search_hotels", city="seattle", guests=2, sort="price", **stay)
    totals = [hotel["cheapest_room"]["total"] for hotel in found["hotels"]]
    assert totals == sorted(totals) and found["nights"] == 3
    hotel = found["hotels"][0]
    rates = h.ok("get_room_rates", hotel_id=hotel["hotel_id"], guests=2, **stay)
    room = next(r for r in rates["rooms"] if r["room_id"] == hotel["cheapest_room"]["room_id"])
    flexible, strict = room["rates"]
    base = state.rooms.get(room["room_id"])["nightly_rate"]
    assert [n["rate"] for n in flexible["nightly"]] == [round(base * 1.15, 2), round(base * 1.15, 2), base]
    assert flexible["total"] == hotel["cheapest_room"]["total"] and strict["total"] < flexible["total"]
    holder = travellers(h)[0]
    booking = h.ok("book_hotel", room_id=room["room_id"], guests=2, traveller_id=holder["id"],
                   rate_plan="non_refundable", **stay)
    assert booking["amount_paid"] == strict["total"] and booking["free_cancellation_until"] is None
    assert booking["points_earned"] == int(strict["room_total"] * 5)


def test_hotel_date_and_capacity_rules(h):
    state = h.state
    holder = travellers(h)[0]
    room = state.rooms.first(lambda r: r["rooms_left"] > 0, max_guests=2)
    book = {"room_id": room["id"], "guests": 2, "traveller_id": holder["id"]}
    h.fails("book_hotel", "INVALID_DATE_RANGE", "INVALID_ARGUMENT", **book, check_in=day(state, 5),
            check_out=day(state, 3))
    h.fails("book_hotel", "INVALID_DATE_RANGE", **book, check_in=day(state, 5), check_out=day(state, 5))
    h.fails("book_hotel", "CHECK_IN_IN_PAST", "FAILED_PRECONDITION", **book, check_in=day(state, -1),
            check_out=day(state, 2))
    h.fails("book_hotel", "STAY_TOO_LONG", **book, check_in=day(state, 1), check_out=day(state, 32))
    h.fails("book_hotel", "TOO_MANY_GUESTS", **{**book, "guests": 3}, check_in=day(state, 1),
            check_out=day(state, 2))
    sold_out = state.rooms.first(rooms_left=0)
    h.fails("book_hotel", "ROOM_SOLD_OUT", **{**book, "room_id": sold_out["id"], "guests": 1},
            check_in=day(state, 1), check_out=day(state, 2))
    h.fails("search_hotels", "INVALID_DATE_RANGE", city="Boston", check_in=day(state, 3),
            check_out=day(state, 1))
    error = h.fails("search_hotels", "CITY_NOT_FOUND", "NOT_FOUND", city="Atlantis", check_in=day(state, 1),
                    check_out=day(state, 2))
    assert "Seattle" in error["message"]
    h.fails("get_room_rates", "CHECK_IN_IN_PAST", hotel_id=room["hotel_id"], check_in=day(state, -2),
            check_out=day(state, 1))


# -- travellers and loyalty -----------------------------------------------------------------------------


def test_traveller_rules(h):
    holder = travellers(h)[0]
    same = {"first_name": holder["first_name"].upper(), "last_name": holder["last_name"],
            "date_of_birth": holder["date_of_birth"]}
    error = h.fails("add_traveller", "TRAVELLER_ALREADY_EXISTS", "CONFLICT", **same)
    assert error["details"]["traveller_id"] == holder["id"]
    new = {"first_name": "Noah", "last_name": "Quinn", "date_of_birth": "2001-05-05"}
    h.fails("add_traveller", "DATE_OF_BIRTH_IN_FUTURE", **{**new, "date_of_birth": "2030-01-01"})
    h.fails("add_traveller", "PASSPORT_DETAILS_INCOMPLETE", **new, passport_number="X1234567")
    h.fails("add_traveller", "PASSPORT_EXPIRED", **new, passport_number="X1234567", passport_country="IE",
            passport_expiry="2025-12-31")
    h.fails("add_traveller", "BAD_DATE", **{**new, "date_of_birth": "2001-02-29"})
    added = h.ok("add_traveller", **new)
    listed = {t["id"]: t for t in h.ok("list_travellers")["travellers"]}
    assert listed[added["traveller_id"]]["passport_status"] == "missing" and listed[added["traveller_id"]]["age"] == 24
    for n in range(len(listed), travel_booking.MAX_TRAVELLERS):
        h.ok("add_traveller", first_name=f"Guest{n}", last_name="Quinn", date_of_birth="1990-01-01")
    error = h.fails("add_traveller", "TRAVELLER_LIMIT_REACHED", "RESOURCE_EXHAUSTED", first_name="One",
                    last_name="Toomany", date_of_birth="1990-01-01")
    assert error["details"]["limit"] == 9


def test_points_redemption_rules(h):
    state = h.state
    booking = seeded(h, fare_family="standard", passengers=2)
    account = state.loyalty_accounts.first()
    state.loyalty_accounts.update(account["id"], points_balance=150_000)  # arrange: enough to cover the fare
    balance = 150_000
    error = h.fails("redeem_points", "INSUFFICIENT_POINTS", "FAILED_PRECONDITION", booking_id=booking["id"],
                    points=balance + 100)
    assert error["details"]["balance"] == balance
    max_points = int((booking["amount_paid"] - booking["price"]["taxes"]) * 100) // 100 * 100
    error = h.fails("redeem_points", "REDEMPTION_EXCEEDS_FARE", "INVALID_ARGUMENT", booking_id=booking["id"],
                    points=max_points + 100)
    assert error["details"]["max_points"] == max_points
    cancelled = seeded(h, status="cancelled")
    h.fails("redeem_points", "BOOKING_ALREADY_CANCELLED", booking_id=cancelled["id"], points=1000)
    assert h.call("redeem_points", {"booking_id": booking["id"], "points": 1050}).error["reason"] == \
        "SCHEMA_VIOLATION"  # hundreds only
    result = h.ok("redeem_points", booking_id=booking["id"], points=max_points)
    assert result["amount_paid"] == round(booking["amount_paid"] - max_points / 100, 2)
    assert result["points_balance"] == balance - max_points


def test_missing_points_are_claimed_once_after_the_trip(h):
    state = h.state
    partner_booking = seeded(h, channel="partner")
    balance = state.loyalty_accounts.first()["points_balance"]
    claimed = h.ok("claim_missing_points", booking_id=partner_booking["id"])
    assert claimed["points_balance"] == balance + partner_booking["points_earned"] > balance
    h.fails("claim_missing_points", "POINTS_ALREADY_CREDITED", "CONFLICT", booking_id=partner_booking["id"])
    upcoming = seeded(h, fare_family="standard", passengers=2)
    state.bookings.update(upcoming["id"], points_credited=False)  # arrange: an uncredited trip still ahead
    h.fails("claim_missing_points", "TRIP_NOT_COMPLETED", booking_id=upcoming["id"])
    cancelled = seeded(h, status="cancelled")
    h.fails("claim_missing_points", "BOOKING_ALREADY_CANCELLED", booking_id=cancelled["id"])
