"""The travel_booking server: its tool surface, seed, fare and booking rules, and typed failures."""

import datetime as dt
import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import travel_booking
from prove_servers.travel_booking import TravelOptions, server

TOOLS = server.tools
NAMES = {
    "find_airports", "search_flights", "get_flight", "get_fare_rules", "get_seat_map", "select_seat", "search_hotels",
    "get_hotel", "get_room_rates", "book_flight", "book_hotel", "get_booking", "list_bookings", "change_flight",
    "cancel_booking", "add_traveller", "list_travellers", "get_loyalty_account", "redeem_points",
    "claim_missing_points",
}


@pytest.fixture(scope="module")
def rt() -> ServerRuntime:
    return ServerRuntime(server)


@pytest.fixture
def sid(rt: ServerRuntime) -> str:
    return rt.new_session()


def ok(rt: ServerRuntime, sid: str, tool: str, **args) -> dict:
    result = rt.call(sid, tool, args)
    assert not result.is_error, result.error
    return result.data


def fails(rt: ServerRuntime, sid: str, tool: str, reason: str, code: str | None = None, **args) -> dict:
    """The call fails with ``reason`` (and ``code``), the tool declares it, and the state is left as
    it was — by the tool itself, which checks before it writes, not only by the executor's rollback."""
    before = rt.state_hash(sid)
    probe = State.from_snapshot(rt.state(sid).snapshot())
    with pytest.raises(ToolError):
        TOOLS[tool].fn(probe, **TOOLS[tool].validate(dict(args)))
    assert probe.state_hash() == before, f"{tool} wrote before failing with {reason}"
    result = rt.call(sid, tool, args)
    assert result.is_error, f"{tool} succeeded: {result.data}"
    assert result.error["reason"] == reason, result.error
    if code is not None:
        assert result.code == code, result.error
    assert reason in TOOLS[tool].spec.errors, f"{tool} does not declare {reason}"
    assert rt.state_hash(sid) == before
    return result.error


def example_args(rt: ServerRuntime, sid: str, example) -> dict:
    return dict(example(rt.state(sid)) if callable(example) else example)


ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


def day(state, offset: int) -> str:
    return (state.today() + dt.timedelta(days=offset)).isoformat()


def seeded(rt, sid, **equals) -> dict:
    """A seeded booking: ``fare_family="standard", passengers=2`` is the upcoming changeable trip."""
    return rt.state(sid).bookings.first(**equals)


def travellers(rt, sid) -> tuple[dict, dict, dict]:
    holder, partner, child = rt.state(sid).travellers.all()
    return holder, partner, child


def flight_fare(rt, sid, predicate, **fare_equals) -> tuple[dict, dict]:
    """The first future flight matching ``predicate`` and its fare matching ``fare_equals``."""
    state = rt.state(sid)
    for flight in state.flights.where(lambda f: f["date"] > state.today().isoformat() and predicate(f)):
        fare = state.fares.first(flight_id=flight["id"], **fare_equals)
        if fare is not None:
            return flight, fare
    raise LookupError(fare_equals)


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_20_tools_with_the_planned_names():
    assert len(TOOLS) == 20
    assert set(TOOLS) == NAMES
    assert (server.name, server.domain) == ("travel_booking", "travel")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_match_what_tools_do():
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


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_on_a_fresh_session(rt, tool, index):
    sid = rt.new_session()
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
        rt.call(sid, name, args)  # refused or a no-op, never a second effect
        assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash(first.new_session()) == again.state_hash(again.new_session())
    assert other.state_hash(other.new_session()) != first.state_hash(first.new_session())


def test_seed_has_the_variety_tasks_need(rt, sid):
    state = rt.state(sid)
    assert {f["route"] for f in state.flights} >= {"JFK-LAX", "LAX-JFK", "JFK-LHR", "LHR-JFK"}
    assert len(state.flights.where(route="JFK-LAX", date=day(state, 3))) == 3
    assert state.fares.where(seats_left=0) and state.rooms.where(rooms_left=0)
    assert state.flights.where(lambda f: f["date"] < state.today().isoformat())  # flown already
    kinds = {(b["kind"], b["status"], b.get("fare_family") or b.get("rate_plan"), b["channel"]) for b in state.bookings}
    assert kinds == {("flight", "confirmed", "standard", "app"), ("flight", "confirmed", "basic", "app"),
                     ("hotel", "confirmed", "flexible", "app"), ("hotel", "confirmed", "non_refundable", "app"),
                     ("flight", "cancelled", "standard", "app"), ("flight", "confirmed", "standard", "partner")}
    holder, partner, child = travellers(rt, sid)
    assert holder["account_holder"] and child["passport_number"] is None
    assert state.loyalty_accounts.first()["points_balance"] > 0


def test_seeded_sales_are_consistent_with_inventory(rt, sid):
    state = rt.state(sid)
    booking = seeded(rt, sid, fare_family="standard", passengers=2)
    flight = state.flights.get(booking["flight_id"])
    assert set(booking["seats"].values()) <= set(flight["occupied_seats"].split())
    activity = state.loyalty_activity.where(booking_id=booking["id"])
    assert [(a["kind"], a["points"]) for a in activity] == [("earn", booking["points_earned"])]
    balance = state.loyalty_accounts.first()["points_balance"]
    assert max(state.loyalty_activity.all(), key=lambda a: a["created_at"])["balance_after"] == balance


def test_a_ten_times_larger_seed_works(rt):
    big = ServerRuntime(server, options=TravelOptions(routes=60))
    sid = big.new_session()
    assert len(big.state(sid).flights) > 8 * len(rt.state(rt.new_session()).flights)  # route 0 flies 3 a day
    assert len(big.state(sid).hotels) > len(rt.state(rt.new_session()).hotels)
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        TravelOptions(routes=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(travel_booking)
    registered = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- flights ----------------------------------------------------------------------------------------


def test_ids_flow_from_airport_search_to_a_seated_booking(rt, sid):
    state = rt.state(sid)
    jfk = ok(rt, sid, "find_airports", query="new york")["airports"][0]
    assert jfk["code"] == "JFK" and "LAX" in jfk["nonstop_to"]
    found = ok(rt, sid, "search_flights", origin=jfk["code"], destination="lax", date=day(state, 4), passengers=2)
    assert [f["departure"] for f in found["flights"]] == sorted(f["departure"] for f in found["flights"])
    flight = found["flights"][0]
    fare_id = next(f["fare_id"] for f in flight["fares"] if f["family"] == "standard")
    rules = ok(rt, sid, "get_fare_rules", fare_id=fare_id, passengers=2)
    assert rules["changeable"] and not rules["refundable"] and rules["change_fee"] == 75.0
    holder, partner, _ = travellers(rt, sid)
    seats_before = state.fares.get(fare_id)["seats_left"]
    booking = ok(rt, sid, "book_flight", fare_id=fare_id, passengers=2, traveller_ids=[holder["id"], partner["id"]])
    assert booking["price"]["total"] == rules["total"] == booking["amount_paid"]
    assert booking["points_earned"] == rules["points_earned"]
    assert rt.state(sid).fares.get(fare_id)["seats_left"] == seats_before - 2
    seat_map = ok(rt, sid, "get_seat_map", flight_id=flight["id"])
    exit_seat = next(s["seat"] for row in seat_map["rows"] for s in row["seats"]
                     if s["available"] and s["extra_legroom"])
    seated = ok(rt, sid, "select_seat", booking_id=booking["booking_id"], traveller_id=partner["id"], seat=exit_seat)
    assert seated["fee"] == 35.0 and seated["amount_paid"] == round(booking["amount_paid"] + 35, 2)
    after = ok(rt, sid, "get_seat_map", flight_id=flight["id"])
    assert not next(s for row in after["rows"] for s in row["seats"] if s["seat"] == exit_seat)["available"]
    full = ok(rt, sid, "get_booking", booking_id=booking["booking_id"])
    assert full["seats"] == {partner["id"]: exit_seat} and full["trip_status"] == "upcoming"
    assert [a["kind"] for a in full["loyalty_activity"]] == ["earn"]
    listed = ok(rt, sid, "list_bookings", kind="flight", when="upcoming")["bookings"]
    assert booking["booking_id"] in {b["booking_id"] for b in listed}
    account = ok(rt, sid, "get_loyalty_account")
    assert account["recent_activity"][0]["booking_id"] == booking["booking_id"]


def test_search_flights_validates_route_and_dates(rt, sid):
    state = rt.state(sid)
    fails(rt, sid, "search_flights", "DEPARTURE_IN_PAST", "FAILED_PRECONDITION", origin="JFK", destination="LAX",
          date=day(state, -1))
    error = fails(rt, sid, "search_flights", "SCHEDULE_NOT_PUBLISHED", origin="JFK", destination="LAX",
                  date=day(state, 12))
    assert error["details"]["last_date"] == day(state, 11)
    fails(rt, sid, "search_flights", "SAME_ORIGIN_DESTINATION", "INVALID_ARGUMENT", origin="JFK", destination="jfk",
          date=day(state, 2))
    fails(rt, sid, "search_flights", "AIRPORT_NOT_FOUND", "NOT_FOUND", origin="XXX", destination="LAX",
          date=day(state, 2))
    fails(rt, sid, "search_flights", "BAD_DATE", origin="JFK", destination="LAX", date="2026-02-30")
    today = ok(rt, sid, "search_flights", origin="JFK", destination="LAX", date=day(state, 0))["flights"]
    assert all(f["departure"] > "2026-03-02T09:00:00Z" for f in today) and len(today) == 2  # 07:05 has left
    assert ok(rt, sid, "search_flights", origin="DEN", destination="LHR", date=day(state, 2))["flights"] == []


def test_booking_checks_passengers_departure_seats_and_passports(rt, sid):
    state = rt.state(sid)
    holder, partner, child = travellers(rt, sid)
    flight, fare = flight_fare(rt, sid, lambda f: not f["international"], family="standard")
    pair = [holder["id"], partner["id"]]
    error = fails(rt, sid, "book_flight", "PASSENGER_COUNT_MISMATCH", "INVALID_ARGUMENT", fare_id=fare["id"],
                  passengers=3, traveller_ids=pair)
    assert error["details"] == {"passengers": 3, "travellers": 2}
    fails(rt, sid, "book_flight", "DUPLICATE_TRAVELLER", fare_id=fare["id"], passengers=2,
          traveller_ids=[holder["id"], holder["id"]])
    fails(rt, sid, "book_flight", "TRAVELLER_NOT_FOUND", fare_id=fare["id"], passengers=1, traveller_ids=["trv_none"])
    departed = state.flights.first(lambda f: f["departure"] < "2026-03-02T09:00:00Z", date=day(state, 0))
    stale = state.fares.first(lambda f: f["seats_left"] > 0, flight_id=departed["id"])
    fails(rt, sid, "book_flight", "DEPARTURE_IN_PAST", "FAILED_PRECONDITION", fare_id=stale["id"], passengers=1,
          traveller_ids=[holder["id"]])
    _, sold_out = flight_fare(rt, sid, lambda f: True, seats_left=0)
    error = fails(rt, sid, "book_flight", "FARE_SOLD_OUT", fare_id=sold_out["id"], passengers=1,
                  traveller_ids=[holder["id"]])
    assert error["details"]["seats_left"] == 0
    _, scarce = flight_fare(rt, sid, lambda f: True, seats_left=2)
    fails(rt, sid, "book_flight", "FARE_SOLD_OUT", fare_id=scarce["id"], passengers=3,
          traveller_ids=[holder["id"], partner["id"], child["id"]])
    _, london = flight_fare(rt, sid, lambda f: f["route"] == "JFK-LHR", family="standard")
    error = fails(rt, sid, "book_flight", "PASSPORT_REQUIRED", fare_id=london["id"], passengers=3,
                  traveller_ids=[holder["id"], partner["id"], child["id"]])
    assert error["details"]["traveller_id"] == child["id"]
    ok(rt, sid, "book_flight", fare_id=london["id"], passengers=2, traveller_ids=pair)


def test_seat_rules(rt, sid):
    state = rt.state(sid)
    booking = seeded(rt, sid, fare_family="standard", passengers=2)
    holder, partner, child = travellers(rt, sid)
    flight = state.flights.get(booking["flight_id"])
    base = {"booking_id": booking["id"], "traveller_id": partner["id"]}
    taken = next(s for s in flight["occupied_seats"].split() if s[:-1].isdigit() and int(s[:-1]) >= 10)
    error = fails(rt, sid, "select_seat", "SEAT_TAKEN", "CONFLICT", **base, seat=taken)
    assert error["details"]["seat"] == taken
    fails(rt, sid, "select_seat", "SEAT_NOT_IN_CABIN", "INVALID_ARGUMENT", **base, seat="2A")
    fails(rt, sid, "select_seat", "SEAT_NOT_FOUND", "NOT_FOUND", **base, seat="2B")
    fails(rt, sid, "select_seat", "SEAT_NOT_FOUND", **base, seat="40A")
    fails(rt, sid, "select_seat", "TRAVELLER_NOT_ON_BOOKING", **{**base, "traveller_id": child["id"]}, seat="20A")
    basic = seeded(rt, sid, fare_family="basic")
    fails(rt, sid, "select_seat", "SEAT_SELECTION_NOT_ALLOWED", booking_id=basic["id"], traveller_id=holder["id"],
          seat="20A")
    hotel = seeded(rt, sid, kind="hotel")
    fails(rt, sid, "select_seat", "NOT_A_FLIGHT_BOOKING", booking_id=hotel["id"], traveller_id=holder["id"], seat="20A")
    old = booking["seats"][holder["id"]]
    free = travel_booking._free_seats(flight, "economy")[0]
    ok(rt, sid, "select_seat", booking_id=booking["id"], traveller_id=holder["id"], seat=free.lower())
    occupied = rt.state(sid).flights.get(flight["id"])["occupied_seats"].split()
    assert free in occupied and old not in occupied  # the old seat is released


def test_changing_a_flight_charges_fee_and_fare_difference(rt, sid):
    state = rt.state(sid)
    booking = seeded(rt, sid, fare_family="standard", passengers=2)
    old_fare = state.fares.get(booking["fare_id"])
    target = next(f for f in state.flights.where(route="JFK-LAX") if f["date"] > booking["trip_start"][:10]
                  and state.fares.first(flight_id=f["id"], family="standard")["price"] > old_fare["price"])
    new_fare = state.fares.first(flight_id=target["id"], family="standard")
    seats_before = new_fare["seats_left"]
    result = ok(rt, sid, "change_flight", booking_id=booking["id"], new_flight_id=target["id"])
    difference = round((new_fare["price"] - old_fare["price"]) * 2, 2)
    assert (result["change_fee"], result["fare_difference"]) == (150.0, difference)
    assert result["booking"]["amount_paid"] == round(booking["amount_paid"] + 150 + difference, 2)
    assert result["booking"]["seats"] == {} and result["booking"]["trip_start"] == target["departure"]
    after = rt.state(sid)
    assert after.fares.get(new_fare["id"])["seats_left"] == seats_before - 2
    assert after.fares.get(old_fare["id"])["seats_left"] == old_fare["seats_left"] + 2
    released = booking["seats"][booking["traveller_ids"][0]]
    assert released not in after.flights.get(booking["flight_id"])["occupied_seats"].split()
    fails(rt, sid, "change_flight", "ALREADY_ON_FLIGHT", booking_id=booking["id"], new_flight_id=target["id"])
    cheaper = next(f for f in state.flights.where(route="JFK-LAX") if f["date"] > day(state, 0)
                   and state.fares.first(flight_id=f["id"], family="standard")["price"] < new_fare["price"]
                   and state.fares.first(flight_id=f["id"], family="standard")["seats_left"] >= 2)
    assert ok(rt, sid, "change_flight", booking_id=booking["id"], new_flight_id=cheaper["id"])["charged"] == 150.0


def test_change_rules(rt, sid):
    state = rt.state(sid)
    booking = seeded(rt, sid, fare_family="standard", passengers=2)
    basic = seeded(rt, sid, fare_family="basic")
    later = next(f for f in state.flights.where(route=f"{basic['origin']}-{basic['destination']}")
                 if f["id"] != basic["flight_id"] and f["date"] > day(state, 1))
    fails(rt, sid, "change_flight", "NON_CHANGEABLE_FARE", "FAILED_PRECONDITION", booking_id=basic["id"],
          new_flight_id=later["id"])
    elsewhere = state.flights.first(lambda f: f["date"] > day(state, 1), route="SFO-SEA")
    fails(rt, sid, "change_flight", "DIFFERENT_ROUTE", "INVALID_ARGUMENT", booking_id=booking["id"],
          new_flight_id=elsewhere["id"])
    gone = state.flights.first(lambda f: f["departure"] < "2026-03-02T09:00:00Z", route="JFK-LAX")
    fails(rt, sid, "change_flight", "DEPARTURE_IN_PAST", booking_id=booking["id"], new_flight_id=gone["id"])
    full = next(f for f in state.flights.where(route="JFK-LAX") if f["date"] > day(state, 0))
    fare = state.fares.first(flight_id=full["id"], family="standard")
    state.fares.update(fare["id"], seats_left=1)  # arrange: one standard seat left, two travellers
    fails(rt, sid, "change_flight", "FARE_SOLD_OUT", booking_id=booking["id"], new_flight_id=full["id"])
    hotel = seeded(rt, sid, kind="hotel")
    fails(rt, sid, "change_flight", "NOT_A_FLIGHT_BOOKING", booking_id=hotel["id"], new_flight_id=full["id"])
    cancelled = seeded(rt, sid, status="cancelled")
    fails(rt, sid, "change_flight", "BOOKING_ALREADY_CANCELLED", booking_id=cancelled["id"], new_flight_id=full["id"])
    fails(rt, sid, "change_flight", "FLIGHT_NOT_FOUND", booking_id=booking["id"], new_flight_id="flt_missing")


# -- cancellations and refunds -------------------------------------------------------------------------


def test_non_refundable_fare_refunds_only_taxes_and_returns_inventory(rt, sid):
    state = rt.state(sid)
    booking = seeded(rt, sid, fare_family="standard", passengers=2)
    fare = state.fares.get(booking["fare_id"])
    balance = state.loyalty_accounts.first()["points_balance"]
    quote = ok(rt, sid, "get_booking", booking_id=booking["id"])["cancellation_quote"]
    result = ok(rt, sid, "cancel_booking", booking_id=booking["id"])
    assert result["refund"]["refund"] == quote["refund"] == booking["price"]["taxes"]
    assert result["refund"]["points_reversed"] == booking["points_earned"]
    after = rt.state(sid)
    assert after.loyalty_accounts.first()["points_balance"] == balance - booking["points_earned"]
    assert after.fares.get(fare["id"])["seats_left"] == fare["seats_left"] + 2
    assert set(booking["seats"].values()).isdisjoint(after.flights.get(booking["flight_id"])["occupied_seats"].split())
    error = fails(rt, sid, "cancel_booking", "BOOKING_ALREADY_CANCELLED", "FAILED_PRECONDITION",
                  booking_id=booking["id"])
    assert "was cancelled" in error["message"]


def test_refundable_fare_refunds_all_but_the_fee_and_returns_redeemed_points(rt, sid):
    holder, partner, _ = travellers(rt, sid)
    _, flex = flight_fare(rt, sid, lambda f: not f["international"], cabin="economy", family="flex",
                          seats_left=travel_booking.MAX_PASSENGERS)
    booking = ok(rt, sid, "book_flight", fare_id=flex["id"], passengers=2, traveller_ids=[holder["id"], partner["id"]])
    redeemed = ok(rt, sid, "redeem_points", booking_id=booking["booking_id"], points=1000)
    assert redeemed["amount_paid"] == round(booking["amount_paid"] - 10, 2)
    balance = redeemed["points_balance"]
    result = ok(rt, sid, "cancel_booking", booking_id=booking["booking_id"])["refund"]
    assert result["refund"] == round(redeemed["amount_paid"] - 2 * 50, 2) and result["cancellation_fee"] == 100.0
    assert result["points_returned"] == 1000
    assert rt.state(sid).loyalty_accounts.first()["points_balance"] == balance + 1000 - booking["points_earned"]


def test_hotel_cancellation_depends_on_rate_plan_and_deadline(rt, sid):
    state = rt.state(sid)
    flexible = seeded(rt, sid, kind="hotel", rate_plan="flexible")
    strict = seeded(rt, sid, kind="hotel", rate_plan="non_refundable")
    room = state.rooms.get(strict["room_id"])
    assert ok(rt, sid, "cancel_booking", booking_id=strict["id"])["refund"]["refund"] == 0.0
    assert rt.state(sid).rooms.get(room["id"])["rooms_left"] == room["rooms_left"] + 1
    late = rt.fork(sid)
    early = ok(rt, sid, "cancel_booking", booking_id=flexible["id"])["refund"]
    assert early["refund"] == flexible["amount_paid"] and early["cancellation_fee"] == 0
    deadline = dt.datetime.fromisoformat(flexible["free_cancellation_until"].replace("Z", "+00:00"))
    rt.state(late).advance_clock(int((deadline - rt.state(late).now()).total_seconds()) + 60)  # arrange: too late
    charged = ok(rt, late, "cancel_booking", booking_id=flexible["id"])["refund"]
    first_night = round(flexible["price"]["nightly"][0]["rate"] * 1.14, 2)
    assert charged["cancellation_fee"] == first_night
    assert charged["refund"] == round(flexible["amount_paid"] - first_night, 2)


def test_a_started_trip_cannot_be_cancelled_or_redeemed_on(rt, sid):
    past = seeded(rt, sid, channel="partner")
    fails(rt, sid, "cancel_booking", "TRIP_ALREADY_STARTED", "FAILED_PRECONDITION", booking_id=past["id"])
    fails(rt, sid, "redeem_points", "TRIP_ALREADY_STARTED", booking_id=past["id"], points=1000)
    fails(rt, sid, "cancel_booking", "BOOKING_NOT_FOUND", "NOT_FOUND", booking_id="bkg_missing")


# -- hotels -------------------------------------------------------------------------------------------


def test_hotel_search_rates_and_booking(rt, sid):
    state = rt.state(sid)
    stay = {"check_in": day(state, 4), "check_out": day(state, 7)}  # Friday, Saturday and Sunday nights
    found = ok(rt, sid, "search_hotels", city="seattle", guests=2, sort="price", **stay)
    totals = [h["cheapest_room"]["total"] for h in found["hotels"]]
    assert totals == sorted(totals) and found["nights"] == 3
    hotel = found["hotels"][0]
    rates = ok(rt, sid, "get_room_rates", hotel_id=hotel["hotel_id"], guests=2, **stay)
    room = next(r for r in rates["rooms"] if r["room_id"] == hotel["cheapest_room"]["room_id"])
    flexible, strict = room["rates"]
    base = state.rooms.get(room["room_id"])["nightly_rate"]
    assert [n["rate"] for n in flexible["nightly"]] == [round(base * 1.15, 2), round(base * 1.15, 2), base]
    assert flexible["total"] == hotel["cheapest_room"]["total"] and strict["total"] < flexible["total"]
    holder = travellers(rt, sid)[0]
    booking = ok(rt, sid, "book_hotel", room_id=room["room_id"], guests=2, traveller_id=holder["id"],
                 rate_plan="non_refundable", **stay)
    assert booking["amount_paid"] == strict["total"] and booking["free_cancellation_until"] is None
    assert booking["points_earned"] == int(strict["room_total"] * 5)


def test_hotel_date_and_capacity_rules(rt, sid):
    state = rt.state(sid)
    holder = travellers(rt, sid)[0]
    room = state.rooms.first(lambda r: r["rooms_left"] > 0, max_guests=2)
    book = {"room_id": room["id"], "guests": 2, "traveller_id": holder["id"]}
    fails(rt, sid, "book_hotel", "INVALID_DATE_RANGE", "INVALID_ARGUMENT", **book, check_in=day(state, 5),
          check_out=day(state, 3))
    fails(rt, sid, "book_hotel", "INVALID_DATE_RANGE", **book, check_in=day(state, 5), check_out=day(state, 5))
    fails(rt, sid, "book_hotel", "CHECK_IN_IN_PAST", "FAILED_PRECONDITION", **book, check_in=day(state, -1),
          check_out=day(state, 2))
    fails(rt, sid, "book_hotel", "STAY_TOO_LONG", **book, check_in=day(state, 1), check_out=day(state, 32))
    fails(rt, sid, "book_hotel", "TOO_MANY_GUESTS", **{**book, "guests": 3}, check_in=day(state, 1),
          check_out=day(state, 2))
    sold_out = state.rooms.first(rooms_left=0)
    fails(rt, sid, "book_hotel", "ROOM_SOLD_OUT", **{**book, "room_id": sold_out["id"], "guests": 1},
          check_in=day(state, 1), check_out=day(state, 2))
    fails(rt, sid, "search_hotels", "INVALID_DATE_RANGE", city="Boston", check_in=day(state, 3),
          check_out=day(state, 1))
    error = fails(rt, sid, "search_hotels", "CITY_NOT_FOUND", "NOT_FOUND", city="Atlantis", check_in=day(state, 1),
                  check_out=day(state, 2))
    assert "Seattle" in error["message"]
    fails(rt, sid, "get_room_rates", "CHECK_IN_IN_PAST", hotel_id=room["hotel_id"], check_in=day(state, -2),
          check_out=day(state, 1))


# -- travellers and loyalty -----------------------------------------------------------------------------


def test_traveller_rules(rt, sid):
    holder = travellers(rt, sid)[0]
    same = {"first_name": holder["first_name"].upper(), "last_name": holder["last_name"],
            "date_of_birth": holder["date_of_birth"]}
    error = fails(rt, sid, "add_traveller", "TRAVELLER_ALREADY_EXISTS", "CONFLICT", **same)
    assert error["details"]["traveller_id"] == holder["id"]
    new = {"first_name": "Noah", "last_name": "Quinn", "date_of_birth": "2001-05-05"}
    fails(rt, sid, "add_traveller", "DATE_OF_BIRTH_IN_FUTURE", **{**new, "date_of_birth": "2030-01-01"})
    fails(rt, sid, "add_traveller", "PASSPORT_DETAILS_INCOMPLETE", **new, passport_number="X1234567")
    fails(rt, sid, "add_traveller", "PASSPORT_EXPIRED", **new, passport_number="X1234567", passport_country="IE",
          passport_expiry="2025-12-31")
    fails(rt, sid, "add_traveller", "BAD_DATE", **{**new, "date_of_birth": "2001-02-29"})
    added = ok(rt, sid, "add_traveller", **new)
    listed = {t["id"]: t for t in ok(rt, sid, "list_travellers")["travellers"]}
    assert listed[added["traveller_id"]]["passport_status"] == "missing" and listed[added["traveller_id"]]["age"] == 24
    for n in range(len(listed), travel_booking.MAX_TRAVELLERS):
        ok(rt, sid, "add_traveller", first_name=f"Guest{n}", last_name="Quinn", date_of_birth="1990-01-01")
    error = fails(rt, sid, "add_traveller", "TRAVELLER_LIMIT_REACHED", "RESOURCE_EXHAUSTED", first_name="One",
                  last_name="Toomany", date_of_birth="1990-01-01")
    assert error["details"]["limit"] == 9


def test_points_redemption_rules(rt, sid):
    state = rt.state(sid)
    booking = seeded(rt, sid, fare_family="standard", passengers=2)
    account = state.loyalty_accounts.first()
    state.loyalty_accounts.update(account["id"], points_balance=150_000)  # arrange: enough to cover the fare
    balance = 150_000
    error = fails(rt, sid, "redeem_points", "INSUFFICIENT_POINTS", "FAILED_PRECONDITION", booking_id=booking["id"],
                  points=balance + 100)
    assert error["details"]["balance"] == balance
    max_points = int((booking["amount_paid"] - booking["price"]["taxes"]) * 100) // 100 * 100
    error = fails(rt, sid, "redeem_points", "REDEMPTION_EXCEEDS_FARE", "INVALID_ARGUMENT", booking_id=booking["id"],
                  points=max_points + 100)
    assert error["details"]["max_points"] == max_points
    cancelled = seeded(rt, sid, status="cancelled")
    fails(rt, sid, "redeem_points", "BOOKING_ALREADY_CANCELLED", booking_id=cancelled["id"], points=1000)
    assert rt.call(sid, "redeem_points", {"booking_id": booking["id"], "points": 1050}).error["reason"] == \
        "SCHEMA_VIOLATION"  # hundreds only
    result = ok(rt, sid, "redeem_points", booking_id=booking["id"], points=max_points)
    assert result["amount_paid"] == round(booking["amount_paid"] - max_points / 100, 2)
    assert result["points_balance"] == balance - max_points


def test_missing_points_are_claimed_once_after_the_trip(rt, sid):
    state = rt.state(sid)
    partner_booking = seeded(rt, sid, channel="partner")
    balance = state.loyalty_accounts.first()["points_balance"]
    claimed = ok(rt, sid, "claim_missing_points", booking_id=partner_booking["id"])
    assert claimed["points_balance"] == balance + partner_booking["points_earned"] > balance
    fails(rt, sid, "claim_missing_points", "POINTS_ALREADY_CREDITED", "CONFLICT", booking_id=partner_booking["id"])
    upcoming = seeded(rt, sid, fare_family="standard", passengers=2)
    state.bookings.update(upcoming["id"], points_credited=False)  # arrange: an uncredited trip still ahead
    fails(rt, sid, "claim_missing_points", "TRIP_NOT_COMPLETED", booking_id=upcoming["id"])
    cancelled = seeded(rt, sid, status="cancelled")
    fails(rt, sid, "claim_missing_points", "BOOKING_ALREADY_CANCELLED", booking_id=cancelled["id"])
