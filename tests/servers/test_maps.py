"""The maps server: its tool surface, seed, geography rules and typed failures."""

import datetime as dt
import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import maps
from prove_servers.maps import MapOptions, haversine_km, server

TOOLS = server.tools
NAMES = {
    "search_places", "get_place", "geocode", "reverse_geocode", "get_route", "compare_travel_modes",
    "get_distance_matrix", "get_opening_hours", "is_open_now", "nearby_search", "search_along_route",
    "list_place_reviews", "list_neighborhoods", "save_place", "list_saved_places", "remove_saved_place",
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


def place(rt: ServerRuntime, sid: str, name: str) -> dict:
    return rt.state(sid).places.first(name=name)


def coords(p: dict) -> str:
    return f"{p['lat']},{p['lon']}"


ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_16_tools_with_the_planned_names():
    assert len(TOOLS) == 16
    assert set(TOOLS) == NAMES
    assert (server.name, server.domain) == ("maps", "travel")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_mostly_read_only_and_annotations_are_truthful():
    writers = {n for n, t in TOOLS.items() if not t.spec.annotations.read_only}
    assert writers == {"save_place", "remove_saved_place"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"remove_saved_place"}
    assert TOOLS["save_place"].spec.produces == ("saved_place",)
    assert TOOLS["get_place"].spec.entity_params() == {"place_id": "place"}
    assert TOOLS["remove_saved_place"].spec.entity_params() == {"saved_place_id": "saved_place"}


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


def test_idempotent_writers_are_refused_on_repeat_and_change_nothing(rt):
    for name in ("save_place", "remove_saved_place"):
        sid = rt.new_session()
        args = example_args(rt, sid, TOOLS[name].examples[0])
        ok(rt, sid, name, **args)
        once = rt.state_hash(sid)
        assert rt.call(sid, name, args).is_error
        assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash(first.new_session()) == again.state_hash(again.new_session())
    assert other.state_hash(other.new_session()) != first.state_hash(first.new_session())


def test_seed_has_the_geography_tasks_need(rt, sid):
    state = rt.state(sid)
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


def test_a_ten_times_larger_seed_works():
    big = ServerRuntime(server, options=MapOptions(places=1200))
    assert len(big.state(big.new_session()).places) == 1200 + len(maps.LANDMARKS)
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        MapOptions(places=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(maps)
    registered = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- geocoding ------------------------------------------------------------------------------------


def test_geocode_and_reverse_geocode_round_trip(rt, sid):
    museum = rt.state(sid).places.first(category="museum")
    found = ok(rt, sid, "geocode", address=museum["formatted_address"].upper())["results"][0]
    assert (found["match"], found["place_id"]) == ("address", museum["id"])
    back = ok(rt, sid, "reverse_geocode", coordinates=f"{found['lat']},{found['lon']}")
    assert back["place_id"] == museum["id"] and back["distance_m"] == 0
    street = f"{museum['address']['street']} {museum['address']['number']}"
    assert ok(rt, sid, "geocode", address=street)["results"][0]["place_id"] == museum["id"]


def test_geocode_folds_accents_and_knows_neighborhoods_and_streets(rt, sid):
    hood = ok(rt, sid, "geocode", address="sodermalm")["results"][0]
    assert (hood["match"], hood["name"]) == ("neighborhood", "Södermalm")
    street = ok(rt, sid, "geocode", address="Gotgatan")["results"]
    assert street[0]["match"] == "street" and street[0]["neighborhood"] == "Södermalm"
    error = fails(rt, sid, "geocode", "ADDRESS_NOT_FOUND", "NOT_FOUND", address="Baker Street 221b London")
    assert error["details"]["query"] == "Baker Street 221b London"


def test_reverse_geocode_failures(rt, sid):
    fails(rt, sid, "reverse_geocode", "ADDRESS_NOT_FOUND", "NOT_FOUND", coordinates="59.30,18.55")  # open water
    fails(rt, sid, "reverse_geocode", "INVALID_COORDINATES", "INVALID_ARGUMENT", coordinates="95.0,18.07")
    fails(rt, sid, "reverse_geocode", "INVALID_COORDINATES", "INVALID_ARGUMENT", coordinates="59.3,218.07")
    error = fails(rt, sid, "reverse_geocode", "OUTSIDE_SERVICE_AREA", "FAILED_PRECONDITION",
                  coordinates="48.8566,2.3522")  # Paris
    assert error["details"]["distance_km"] > 1000
    bad = rt.call(sid, "reverse_geocode", {"coordinates": "Götgatan 12"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"


# -- routes ---------------------------------------------------------------------------------------


def test_route_distance_and_duration_follow_the_road_factor_and_mode_speeds(rt, sid):
    state = rt.state(sid)
    a, b = place(rt, sid, "Stockholm Central Station"), place(rt, sid, "Vasa Museum")
    straight = haversine_km(a["lat"], a["lon"], b["lat"], b["lon"])
    factor = (state.neighborhoods.first(name="Norrmalm")["road_factor"]
              + state.neighborhoods.first(name="Djurgården")["road_factor"]) / 2
    cycle = ok(rt, sid, "get_route", origin=a["id"], destination=b["id"], mode="cycling")
    assert cycle["distance_km"] == round(straight * factor, 2)
    assert cycle["duration_min"] == round(cycle["distance_km"] / maps.SPEED_KMH["cycling"] * 60)
    walk = ok(rt, sid, "get_route", origin=a["id"], destination=b["id"], mode="walking")
    assert walk["duration_min"] > cycle["duration_min"] > 0
    assert walk["arrival_time"] > walk["departure_time"] == "2026-03-02T10:00+01:00"  # Stockholm local time


def test_islands_are_reached_only_by_ferry(rt, sid):
    palace, sandhamn = place(rt, sid, "Royal Palace"), place(rt, sid, "Sandhamn Harbour")
    for mode in ("walking", "cycling", "driving"):
        error = fails(rt, sid, "get_route", "NO_ROUTE", "FAILED_PRECONDITION", origin=palace["id"],
                      destination=sandhamn["id"], mode=mode)
        assert error["details"]["cause"] == "water"
    trip = ok(rt, sid, "get_route", origin=palace["id"], destination=sandhamn["id"], mode="transit")
    assert [leg["mode"] for leg in trip["legs"]].count("ferry") == 1
    back = ok(rt, sid, "get_route", origin=sandhamn["id"], destination=palace["id"], mode="transit")
    assert back["legs"][0]["mode"] == "ferry"
    fails(rt, sid, "get_route", "NO_ROUTE", origin=palace["id"], destination=sandhamn["id"], mode="transit",
          avoid=["ferries"])
    pier = place(rt, sid, "Fjäderholmarna Ferry Pier")  # a summer-only ferry, and it is March
    error = fails(rt, sid, "get_route", "NO_ROUTE", origin=palace["id"], destination=pier["id"], mode="transit")
    assert error["details"]["cause"] == "ferry_season"


def test_walking_and_transit_have_limits(rt, sid):
    palace, airport = place(rt, sid, "Royal Palace"), place(rt, sid, "Stockholm Arlanda Airport")
    error = fails(rt, sid, "get_route", "NO_ROUTE", origin=palace["id"], destination=airport["id"], mode="walking")
    assert error["details"]["cause"] == "too_far"
    assert ok(rt, sid, "get_route", origin=palace["id"], destination=airport["id"], mode="cycling")["distance_km"] < 60
    error = fails(rt, sid, "get_route", "NO_ROUTE", origin=palace["id"], destination=airport["id"], mode="transit",
                  departure_time="2026-03-03T02:30")
    assert error["details"]["cause"] == "no_service"
    fails(rt, sid, "get_route", "DEPARTURE_TIME_IN_PAST", "INVALID_ARGUMENT", origin=palace["id"],
          destination=airport["id"], departure_time="2026-03-01T12:00")
    fails(rt, sid, "get_route", "BAD_DATE", origin=palace["id"], destination=airport["id"],
          departure_time="2026-02-30T12:00")
    fails(rt, sid, "get_route", "SAME_ORIGIN_DESTINATION", "INVALID_ARGUMENT", origin=palace["id"],
          destination=coords(palace))
    fails(rt, sid, "get_route", "PLACE_NOT_FOUND", "NOT_FOUND", origin="plc_00000000", destination=palace["id"])


def test_driving_pays_congestion_tax_on_weekdays_and_is_slower_at_rush_hour(rt, sid):
    palace, airport = place(rt, sid, "Royal Palace"), place(rt, sid, "Stockholm Arlanda Airport")
    trip = {"origin": airport["id"], "destination": palace["id"], "mode": "driving"}
    rush = ok(rt, sid, "get_route", **trip, departure_time="2026-03-03T08:00")  # Tuesday 08:00, peak
    midday = ok(rt, sid, "get_route", **trip, departure_time="2026-03-03T12:00")
    sunday = ok(rt, sid, "get_route", **trip, departure_time="2026-03-08T08:00")
    assert (rush["toll_sek"], midday["toll_sek"], sunday["toll_sek"]) == (45, 30, 0)
    assert rush["duration_min"] > midday["duration_min"] and rush["warnings"] == ["rush-hour traffic"]
    assert rush["distance_km"] == midday["distance_km"]
    fails(rt, sid, "get_route", "NO_ROUTE", **trip, avoid=["tolls"], departure_time="2026-03-03T12:00")
    assert ok(rt, sid, "get_route", **trip, avoid=["tolls"], departure_time="2026-03-08T12:00")["toll_sek"] == 0


def test_compare_modes_reports_per_mode_status(rt, sid):
    vasa, pier = place(rt, sid, "Vasa Museum"), place(rt, sid, "Sandhamn Harbour")
    result = ok(rt, sid, "compare_travel_modes", origin=vasa["id"], destination=pier["id"])
    assert {m: o["status"] for m, o in result["modes"].items()} == {
        "driving": "NO_ROUTE", "walking": "NO_ROUTE", "cycling": "NO_ROUTE", "transit": "OK"}
    assert result["fastest"] == "transit"
    fails(rt, sid, "compare_travel_modes", "OUTSIDE_SERVICE_AREA", origin=vasa["id"], destination="40.71,-74.0")


def test_distance_matrix_matches_single_routes_and_limits_its_size(rt, sid):
    state = rt.state(sid)
    station, vasa, sandhamn = (place(rt, sid, n) for n in ("Stockholm Central Station", "Vasa Museum",
                                                           "Sandhamn Harbour"))
    matrix = ok(rt, sid, "get_distance_matrix", origins=[station["id"], vasa["id"]],
                destinations=[vasa["id"], sandhamn["id"]], mode="walking")
    first, second = matrix["rows"]
    single = ok(rt, sid, "get_route", origin=station["id"], destination=vasa["id"], mode="walking")
    assert first["elements"][0] == {"status": "OK", "distance_km": single["distance_km"],
                                    "duration_min": single["duration_min"]}
    assert first["elements"][1]["status"] == "NO_ROUTE" and second["elements"][0]["status"] == "ZERO"
    six = [p["id"] for p in state.places.all()[:6]]
    error = fails(rt, sid, "get_distance_matrix", "TOO_MANY_ELEMENTS", "RESOURCE_EXHAUSTED", origins=six,
                  destinations=six[:5])
    assert error["details"] == {"elements": 30, "limit": 25}
    ok(rt, sid, "get_distance_matrix", origins=six[:5], destinations=six[:5])
    fails(rt, sid, "get_distance_matrix", "INVALID_COORDINATES", origins=["91,18"], destinations=[vasa["id"]])


def test_search_along_route_orders_stops_by_progress(rt, sid):
    airport, palace = place(rt, sid, "Stockholm Arlanda Airport"), place(rt, sid, "Royal Palace")
    result = ok(rt, sid, "search_along_route", origin=airport["id"], destination=palace["id"], category="cafe",
                max_detour_m=2000)
    progress = [p["km_from_origin"] for p in result["places"]]
    assert progress == sorted(progress) and all(p["detour_m"] <= 2000 for p in result["places"])
    assert all(p["category"] == "cafe" for p in result["places"]) and result["places"]
    sandhamn = place(rt, sid, "Sandhamn Harbour")
    fails(rt, sid, "search_along_route", "NO_ROUTE", origin=airport["id"], destination=sandhamn["id"], category="cafe")


# -- search, hours, reviews -------------------------------------------------------------------------


def test_nearby_search_uses_the_grid_index_and_matches_a_full_scan(rt, sid):
    state = rt.state(sid)
    station = place(rt, sid, "Stockholm Central Station")
    result = ok(rt, sid, "nearby_search", location=station["id"], radius_m=1500, limit=50)
    expected = sorted(
        (haversine_km(station["lat"], station["lon"], p["lat"], p["lon"]), p["name"]) for p in state.places
        if p["id"] != station["id"] and haversine_km(station["lat"], station["lon"], p["lat"], p["lon"]) <= 1.5)
    assert [p["name"] for p in result["places"]] == [name for _, name in expected]
    distances = [p["distance_m"] for p in result["places"]]
    assert distances == sorted(distances) and max(distances) <= 1500
    fails(rt, sid, "nearby_search", "OUTSIDE_SERVICE_AREA", location="55.6761,12.5683")  # Copenhagen
    fails(rt, sid, "nearby_search", "PLACE_NOT_FOUND", location="plc_zzzzzzzz")


def test_search_places_filters_and_ranks(rt, sid):
    found = ok(rt, sid, "search_places", query="ostermalm", limit=50)["places"]
    assert found and all("Östermalm" in (p["district"] + p["name"]) for p in found)
    cafes = ok(rt, sid, "search_places", query="cafe", category="cafe", open_now=True, limit=50)["places"]
    assert cafes and all(p["open_now"] and p["category"] == "cafe" for p in cafes)
    palace = place(rt, sid, "Royal Palace")
    near = ok(rt, sid, "search_places", query="restaurant", near=palace["id"], radius_m=1000, limit=50)["places"]
    assert [p["distance_m"] for p in near] == sorted(p["distance_m"] for p in near) and near[-1]["distance_m"] <= 1000
    assert ok(rt, sid, "search_places", query="zeppelin hangar")["places"] == []  # empty is not an error


def test_opening_hours_follow_the_session_clock(rt, sid):
    state = rt.state(sid)
    palace = place(rt, sid, "Royal Palace")  # closed on Mondays; the session starts Monday 10:00 local
    closed = ok(rt, sid, "is_open_now", place_id=palace["id"])
    assert (closed["open_now"], closed["next_open"]) == (False, "2026-03-03T10:00")
    bar = state.places.first(lambda p: p["hours"]["mon"] == "16:00-01:00", category="bar")
    assert ok(rt, sid, "is_open_now", place_id=bar["id"])["next_open"] == "2026-03-02T16:00"
    state.advance_clock(int(dt.timedelta(hours=14, minutes=30).total_seconds()))  # arrange: 00:30 on Tuesday
    late = ok(rt, sid, "is_open_now", place_id=bar["id"])
    assert (late["open_now"], late["closes_at"], late["local_time"]) == (True, "2026-03-03T01:00",
                                                                         "2026-03-03T00:30+01:00")
    hours = ok(rt, sid, "get_opening_hours", place_id=palace["id"], date="2026-03-03")
    assert hours["hours_on_date"] == [{"open": "10:00", "close": "17:00"}] and hours["weekly"]["mon"] == []
    fails(rt, sid, "get_opening_hours", "BAD_DATE", place_id=palace["id"], date="2026-02-30")


def test_reviews_sort_and_filter(rt, sid):
    state = rt.state(sid)
    busy = state.places.first(lambda p: p["review_count"] >= 3)
    result = ok(rt, sid, "list_place_reviews", place_id=busy["id"], sort="highest")
    stars = [r["rating"] for r in result["reviews"]]
    assert stars == sorted(stars, reverse=True) and sum(result["histogram"].values()) == busy["review_count"]
    assert round(sum(stars) / len(stars), 1) == result["rating"]
    fails(rt, sid, "list_place_reviews", "PLACE_NOT_FOUND", place_id="plc_00000000")


# -- saved places: the only writes --------------------------------------------------------------------


def test_ids_flow_from_geocode_to_nearby_to_saved_places(rt, sid):
    hit = ok(rt, sid, "geocode", address="Royal Palace")["results"][0]
    cafe = ok(rt, sid, "nearby_search", location=hit["place_id"], category="cafe", radius_m=2000)["places"][0]
    route = ok(rt, sid, "get_route", origin=hit["place_id"], destination=cafe["id"], mode="walking")
    assert route["destination"]["place_id"] == cafe["id"]
    saved = ok(rt, sid, "save_place", place_id=cafe["id"], list_name="starred", note="after the palace")
    listed = ok(rt, sid, "list_saved_places", list_name="starred")
    assert [e["saved_place_id"] for e in listed["saved_places"]] == [saved["saved_place_id"]]
    assert listed["counts"]["starred"] == 1
    assert ok(rt, sid, "get_place", place_id=cafe["id"])["saved_in"] == ["starred"]
    error = fails(rt, sid, "save_place", "PLACE_ALREADY_SAVED", "CONFLICT", place_id=cafe["id"], list_name="starred")
    assert error["details"]["saved_place_id"] == saved["saved_place_id"]
    ok(rt, sid, "save_place", place_id=cafe["id"], list_name="favorites")  # another list is fine
    ok(rt, sid, "remove_saved_place", saved_place_id=saved["saved_place_id"])
    fails(rt, sid, "remove_saved_place", "SAVED_PLACE_NOT_FOUND", "NOT_FOUND", saved_place_id=saved["saved_place_id"])
    assert ok(rt, sid, "list_saved_places", list_name="starred")["saved_places"] == []


def test_a_saved_list_holds_at_most_30_places(rt, sid):
    places = rt.state(sid).places.all()
    for p in places[:maps.MAX_SAVED_PER_LIST]:
        ok(rt, sid, "save_place", place_id=p["id"], list_name="starred")
    error = fails(rt, sid, "save_place", "SAVED_LIST_FULL", "RESOURCE_EXHAUSTED", place_id=places[-1]["id"],
                  list_name="starred")
    assert error["details"]["limit"] == 30
    fails(rt, sid, "save_place", "PLACE_NOT_FOUND", place_id="plc_00000000")
