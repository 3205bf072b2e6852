"""The maps server's own rules: geocoding, routes and travel modes, opening hours, nearby and
along-route search, reviews, neighborhoods and saved places, with typed failures. What every
server guarantees is the conformance kit's (tests/servers/test_conformance.py)."""

import datetime as dt

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_core.toolkit import haversine_km
from prove_servers import maps
from prove_servers.maps import MapOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def place(h, name: str) -> dict:
    return h.state.places.first(name=name)


def coords(p: dict) -> str:
    return f"{p['lat']},{p['lon']}"


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "search_places", "get_place", "geocode", "reverse_geocode", "get_route", "compare_travel_modes",
        "get_distance_matrix", "get_opening_hours", "is_open_now", "nearby_search", "search_along_route",
        "list_place_reviews", "list_neighborhoods", "save_place", "list_saved_places", "remove_saved_place",
    }
    assert servers_registered_by(maps) == [server] and (server.name, server.domain) == ("maps", "travel")
    writers = {n for n, t in TOOLS.items() if not t.spec.annotations.read_only}
    assert writers == {"save_place", "remove_saved_place"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"remove_saved_place"}
    assert TOOLS["save_place"].spec.produces == ("saved_place",)
    assert TOOLS["get_place"].spec.entity_params() == {"place_id": "place"}
    assert TOOLS["remove_saved_place"].spec.entity_params() == {"saved_place_id": "saved_place"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


@pytest.mark.parametrize("tool", ["save_place", "remove_saved_place"])
def test_repeating_a_write_is_refused(h, tool):
    args = h.example_args(tool)
    h.ok(tool, **args)
    once = h.state_hash()
    assert h.call(tool, args).is_error and h.state_hash() == once


def test_seed_has_the_geography_tasks_need(h):
    state = h.state
    assert len(state.places) == 120 + len(maps.LANDMARKS)
    assert {p["category"] for p in state.places} >= set(maps.PLACE_MIX)
    islands = {p["landmass"] for p in state.places} - {maps.MAINLAND}
    assert islands == {"Fjäderholmarna", "Sandön"}
    assert all(state.places.where(landmass=island, category="cafe") or state.places.where(landmass=island,
                                                                                          category="restaurant")
               for island in islands)
    addresses = [(p["address"]["street"], p["address"]["number"]) for p in state.places]
    assert len(addresses) == len(set(addresses))  # one place per street address
    assert len(state.reviews) > 100 and len(state.saved_places) == 3
    assert state.places.where(lambda p: p["hours"]["mon"] is None)  # something is closed on Mondays


def test_a_ten_times_larger_seed_works_and_options_are_validated():
    big = ServerHarness(server, options=MapOptions(places=1200))
    assert len(big.state.places) == 1200 + len(maps.LANDMARKS)
    big.run_examples()
    with pytest.raises(ValueError):
        MapOptions(places=0)


# -- geocoding ------------------------------------------------------------------------------------


def test_geocode_and_reverse_geocode_round_trip(h):
    museum = h.state.places.first(category="museum")
    found = h.ok("geocode", address=museum["formatted_address"].upper())["results"][0]
    assert (found["match"], found["place_id"]) == ("address", museum["id"])
    back = h.ok("reverse_geocode", coordinates=f"{found['lat']},{found['lon']}")
    assert back["place_id"] == museum["id"] and back["distance_m"] == 0
    street = f"{museum['address']['street']} {museum['address']['number']}"
    assert h.ok("geocode", address=street)["results"][0]["place_id"] == museum["id"]


def test_geocode_folds_accents_and_knows_neighborhoods_and_streets(h):
    hood = h.ok("geocode", address="sodermalm")["results"][0]
    assert (hood["match"], hood["name"]) == ("neighborhood", "Södermalm")
    street = h.ok("geocode", address="Gotgatan")["results"]
    assert street[0]["match"] == "street" and street[0]["neighborhood"] == "Södermalm"
    error = h.fails("geocode", "ADDRESS_NOT_FOUND", "NOT_FOUND", address="Baker Street 221b London")
    assert error["details"]["query"] == "Baker Street 221b London"


def test_reverse_geocode_failures(h):
    h.fails("reverse_geocode", "ADDRESS_NOT_FOUND", "NOT_FOUND", coordinates="59.30,18.55")  # open water
    h.fails("reverse_geocode", "INVALID_COORDINATES", "INVALID_ARGUMENT", coordinates="95.0,18.07")
    h.fails("reverse_geocode", "INVALID_COORDINATES", "INVALID_ARGUMENT", coordinates="59.3,218.07")
    error = h.fails("reverse_geocode", "OUTSIDE_SERVICE_AREA", "FAILED_PRECONDITION",
                    coordinates="48.8566,2.3522")  # Paris
    assert error["details"]["distance_km"] > 1000
    bad = h.call("reverse_geocode", {"coordinates": "Götgatan 12"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"


# -- routes ---------------------------------------------------------------------------------------


def test_route_distance_and_duration_follow_the_road_factor_and_mode_speeds(h):
    state = h.state
    a, b = place(h, "Stockholm Central Station"), place(h, "Vasa Museum")
    straight = haversine_km(a["lat"], a["lon"], b["lat"], b["lon"])
    factor = (state.neighborhoods.first(name="Norrmalm")["road_factor"]
              + state.neighborhoods.first(name="Djurgården")["road_factor"]) / 2
    cycle = h.ok("get_route", origin=a["id"], destination=b["id"], mode="cycling")
    assert cycle["distance_km"] == round(straight * factor, 2)
    assert cycle["duration_min"] == round(cycle["distance_km"] / maps.SPEED_KMH["cycling"] * 60)
    walk = h.ok("get_route", origin=a["id"], destination=b["id"], mode="walking")
    assert walk["duration_min"] > cycle["duration_min"] > 0
    assert walk["arrival_time"] > walk["departure_time"] == "2026-03-02T10:00+01:00"  # Stockholm local time


def test_islands_are_reached_only_by_ferry(h):
    palace, sandhamn = place(h, "Royal Palace"), place(h, "Sandhamn Harbour")
    for mode in ("walking", "cycling", "driving"):
        error = h.fails("get_route", "NO_ROUTE", "FAILED_PRECONDITION", origin=palace["id"],
                        destination=sandhamn["id"], mode=mode)
        assert error["details"]["cause"] == "water"
    trip = h.ok("get_route", origin=palace["id"], destination=sandhamn["id"], mode="transit")
    assert [leg["mode"] for leg in trip["legs"]].count("ferry") == 1
    back = h.ok("get_route", origin=sandhamn["id"], destination=palace["id"], mode="transit")
    assert back["legs"][0]["mode"] == "ferry"
    h.fails("get_route", "NO_ROUTE", origin=palace["id"], destination=sandhamn["id"], mode="transit",
            avoid=["ferries"])
    pier = place(h, "Fjäderholmarna Ferry Pier")  # a summer-only ferry, and it is March
    error = h.fails("get_route", "NO_ROUTE", origin=palace["id"], destination=pier["id"], mode="transit")
    assert error["details"]["cause"] == "ferry_season"


def test_walking_and_transit_have_limits(h):
    palace, airport = place(h, "Royal Palace"), place(h, "Stockholm Arlanda Airport")
    error = h.fails("get_route", "NO_ROUTE", origin=palace["id"], destination=airport["id"], mode="walking")
    assert error["details"]["cause"] == "too_far"
    assert h.ok("get_route", origin=palace["id"], destination=airport["id"], mode="cycling")["distance_km"] < 60
    error = h.fails("get_route", "NO_ROUTE", origin=palace["id"], destination=airport["id"], mode="transit",
                    departure_time="2026-03-03T02:30")
    assert error["details"]["cause"] == "no_service"
    h.fails("get_route", "DEPARTURE_TIME_IN_PAST", "INVALID_ARGUMENT", origin=palace["id"],
            destination=airport["id"], departure_time="2026-03-01T12:00")
    h.fails("get_route", "BAD_DATE", origin=palace["id"], destination=airport["id"],
            departure_time="2026-02-30T12:00")
    h.fails("get_route", "SAME_ORIGIN_DESTINATION", "INVALID_ARGUMENT", origin=palace["id"],
            destination=coords(palace))
    h.fails("get_route", "PLACE_NOT_FOUND", "NOT_FOUND", origin="plc_00000000", destination=palace["id"])


def test_driving_pays_congestion_tax_on_weekdays_and_is_slower_at_rush_hour(h):
    palace, airport = place(h, "Royal Palace"), place(h, "Stockholm Arlanda Airport")
    trip = {"origin": airport["id"], "destination": palace["id"], "mode": "driving"}
    rush = h.ok("get_route", **trip, departure_time="2026-03-03T08:00")  # Tuesday 08:00, peak
    midday = h.ok("get_route", **trip, departure_time="2026-03-03T12:00")
    sunday = h.ok("get_route", **trip, departure_time="2026-03-08T08:00")
    assert (rush["toll_sek"], midday["toll_sek"], sunday["toll_sek"]) == (45, 30, 0)
    assert rush["duration_min"] > midday["duration_min"] and rush["warnings"] == ["rush-hour traffic"]
    assert rush["distance_km"] == midday["distance_km"]
    h.fails("get_route", "NO_ROUTE", **trip, avoid=["tolls"], departure_time="2026-03-03T12:00")
    assert h.ok("get_route", **trip, avoid=["tolls"], departure_time="2026-03-08T12:00")["toll_sek"] == 0


def test_compare_modes_reports_per_mode_status(h):
    vasa, pier = place(h, "Vasa Museum"), place(h, "Sandhamn Harbour")
    result = h.ok("compare_travel_modes", origin=vasa["id"], destination=pier["id"])
    assert {m: o["status"] for m, o in result["modes"].items()} == {
        "driving": "NO_ROUTE", "walking": "NO_ROUTE", "cycling": "NO_ROUTE", "transit": "OK"}
    assert result["fastest"] == "transit"
    h.fails("compare_travel_modes", "OUTSIDE_SERVICE_AREA", origin=vasa["id"], destination="40.71,-74.0")


def test_distance_matrix_matches_single_routes_and_limits_its_size(h):
    state = h.state
    station, vasa, sandhamn = (place(h, n) for n in ("Stockholm Central Station", "Vasa Museum",
                                                           "Sandhamn Harbour"))
    matrix = h.ok("get_distance_matrix", origins=[station["id"], vasa["id"]],
                  destinations=[vasa["id"], sandhamn["id"]], mode="walking")
    first, second = matrix["rows"]
    single = h.ok("get_route", origin=station["id"], destination=vasa["id"], mode="walking")
    assert first["elements"][0] == {"status": "OK", "distance_km": single["distance_km"],
                                    "duration_min": single["duration_min"]}
    assert first["elements"][1]["status"] == "NO_ROUTE" and second["elements"][0]["status"] == "ZERO"
    six = [p["id"] for p in state.places.all()[:6]]
    error = h.fails("get_distance_matrix", "TOO_MANY_ELEMENTS", "RESOURCE_EXHAUSTED", origins=six,
                    destinations=six[:5])
    assert error["details"] == {"elements": 30, "limit": 25}
    h.ok("get_distance_matrix", origins=six[:5], destinations=six[:5])
    h.fails("get_distance_matrix", "INVALID_COORDINATES", origins=["91,18"], destinations=[vasa["id"]])


def test_search_along_route_orders_stops_by_progress(h):
    airport, palace = place(h, "Stockholm Arlanda Airport"), place(h, "Royal Palace")
    result = h.ok("search_along_route", origin=airport["id"], destination=palace["id"], category="cafe",
                  max_detour_m=2000)
    progress = [p["km_from_origin"] for p in result["places"]]
    assert progress == sorted(progress) and all(p["detour_m"] <= 2000 for p in result["places"])
    assert all(p["category"] == "cafe" for p in result["places"]) and result["places"]
    sandhamn = place(h, "Sandhamn Harbour")
    h.fails("search_along_route", "NO_ROUTE", origin=airport["id"], destination=sandhamn["id"], category="cafe")


# -- search, hours, reviews -------------------------------------------------------------------------


def test_nearby_search_uses_the_grid_index_and_matches_a_full_scan(h):
    state = h.state
    station = place(h, "Stockholm Central Station")
    result = h.ok("nearby_search", location=station["id"], radius_m=1500, limit=50)
    expected = sorted(
        (haversine_km(station["lat"], station["lon"], p["lat"], p["lon"]), p["name"]) for p in state.places
        if p["id"] != station["id"] and haversine_km(station["lat"], station["lon"], p["lat"], p["lon"]) <= 1.5)
    assert [p["name"] for p in result["places"]] == [name for _, name in expected]
    distances = [p["distance_m"] for p in result["places"]]
    assert distances == sorted(distances) and max(distances) <= 1500
    h.fails("nearby_search", "OUTSIDE_SERVICE_AREA", location="55.6761,12.5683")  # Copenhagen
    h.fails("nearby_search", "PLACE_NOT_FOUND", location="plc_zzzzzzzz")


def test_search_places_filters_and_ranks(h):
    found = h.ok("search_places", query="ostermalm", limit=50)["places"]
    assert found and all("Östermalm" in (p["district"] + p["name"]) for p in found)
    cafes = h.ok("search_places", query="cafe", category="cafe", open_now=True, limit=50)["places"]
    assert cafes and all(p["open_now"] and p["category"] == "cafe" for p in cafes)
    palace = place(h, "Royal Palace")
    near = h.ok("search_places", query="restaurant", near=palace["id"], radius_m=1000, limit=50)["places"]
    assert [p["distance_m"] for p in near] == sorted(p["distance_m"] for p in near) and near[-1]["distance_m"] <= 1000
    assert h.ok("search_places", query="zeppelin hangar")["places"] == []  # empty is not an error


def test_opening_hours_follow_the_session_clock(h):
    state = h.state
    palace = place(h, "Royal Palace")  # closed on Mondays; the session starts Monday 10:00 local
    closed = h.ok("is_open_now", place_id=palace["id"])
    assert (closed["open_now"], closed["next_open"]) == (False, "2026-03-03T10:00")
    bar = state.places.first(lambda p: p["hours"]["mon"] == "16:00-01:00", category="bar")
    assert h.ok("is_open_now", place_id=bar["id"])["next_open"] == "2026-03-02T16:00"
    state.advance_clock(int(dt.timedelta(hours=14, minutes=30).total_seconds()))  # arrange: 00:30 on Tuesday
    late = h.ok("is_open_now", place_id=bar["id"])
    assert (late["open_now"], late["closes_at"], late["local_time"]) == (True, "2026-03-03T01:00",
                                                                         "2026-03-03T00:30+01:00")
    hours = h.ok("get_opening_hours", place_id=palace["id"], date="2026-03-03")
    assert hours["hours_on_date"] == [{"open": "10:00", "close": "17:00"}] and hours["weekly"]["mon"] == []
    h.fails("get_opening_hours", "BAD_DATE", place_id=palace["id"], date="2026-02-30")


def test_reviews_sort_and_filter(h):
    state = h.state
    busy = state.places.first(lambda p: p["review_count"] >= 3)
    result = h.ok("list_place_reviews", place_id=busy["id"], sort="highest")
    stars = [r["rating"] for r in result["reviews"]]
    assert stars == sorted(stars, reverse=True) and sum(result["histogram"].values()) == busy["review_count"]
    assert round(sum(stars) / len(stars), 1) == result["rating"]
    h.fails("list_place_reviews", "PLACE_NOT_FOUND", place_id="plc_00000000")


# -- saved places: the only writes --------------------------------------------------------------------


def test_ids_flow_from_geocode_to_nearby_to_saved_places(h):
    hit = h.ok("geocode", address="Royal Palace")["results"][0]
    cafe = h.ok("nearby_search", location=hit["place_id"], category="cafe", radius_m=2000)["places"][0]
    route = h.ok("get_route", origin=hit["place_id"], destination=cafe["id"], mode="walking")
    assert route["destination"]["place_id"] == cafe["id"]
    saved = h.ok("save_place", place_id=cafe["id"], list_name="starred", note="after the palace")
    listed = h.ok("list_saved_places", list_name="starred")
    assert [e["saved_place_id"] for e in listed["saved_places"]] == [saved["saved_place_id"]]
    assert listed["counts"]["starred"] == 1
    assert h.ok("get_place", place_id=cafe["id"])["saved_in"] == ["starred"]
    error = h.fails("save_place", "PLACE_ALREADY_SAVED", "CONFLICT", place_id=cafe["id"], list_name="starred")
    assert error["details"]["saved_place_id"] == saved["saved_place_id"]
    h.ok("save_place", place_id=cafe["id"], list_name="favorites")  # another list is fine
    h.ok("remove_saved_place", saved_place_id=saved["saved_place_id"])
    h.fails("remove_saved_place", "SAVED_PLACE_NOT_FOUND", "NOT_FOUND", saved_place_id=saved["saved_place_id"])
    assert h.ok("list_saved_places", list_name="starred")["saved_places"] == []


def test_a_saved_list_holds_at_most_30_places(h):
    places = h.state.places.all()
    for p in places[:maps.MAX_SAVED_PER_LIST]:
        h.ok("save_place", place_id=p["id"], list_name="starred")
    error = h.fails("save_place", "SAVED_LIST_FULL", "RESOURCE_EXHAUSTED", place_id=places[-1]["id"],
                    list_name="starred")
    assert error["details"]["limit"] == 30
    h.fails("save_place", "PLACE_NOT_FOUND", place_id="plc_00000000")
