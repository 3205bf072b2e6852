"""The vehicle server: its tool surface, seed, mode gating and typed failures."""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import vehicle
from prove_servers.vehicle import VehicleOptions, server

TOOLS = server.tools
NAMES = {
    "list_vehicles", "get_vehicle_status", "wake_vehicle", "shift_gear", "set_cruise_speed", "lock_doors",
    "unlock_doors", "operate_door", "set_window", "set_climate", "set_seat_heater", "start_charging", "stop_charging",
    "set_charge_limit", "set_destination", "get_route_eta", "cancel_navigation", "operate_trunk", "set_lights",
    "honk_horn",
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


def car(rt, sid, situation: str) -> str:
    """The id of the seeded vehicle in a situation: home_charger, driving, asleep or low_battery."""
    state = rt.state(sid)
    pick = {"home_charger": vehicle._on_home_charger, "driving": vehicle._driving, "asleep": vehicle._asleep,
            "low_battery": vehicle._low_battery}[situation]
    return pick(state)["id"]


def status(rt, sid, vehicle_id: str) -> dict:
    return ok(rt, sid, "get_vehicle_status", vehicle_id=vehicle_id)


ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_20_tools_with_the_planned_names():
    assert len(TOOLS) == 20
    assert set(TOOLS) == NAMES
    assert (server.name, server.domain) == ("vehicle", "IoT")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_vehicles", "get_vehicle_status", "get_route_eta"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"cancel_navigation"}
    assert {n for n, t in TOOLS.items() if not t.spec.annotations.idempotent} == {"honk_horn"}
    assert TOOLS["start_charging"].spec.produces == ("charging_session",)
    assert TOOLS["unlock_doors"].spec.entity_params() == {"vehicle_id": "vehicle"}


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_on_a_fresh_session(rt, tool, index):
    sid = rt.new_session()
    data = ok(rt, sid, tool, **example_args(rt, sid, TOOLS[tool].examples[index]))
    assert json.loads(json.dumps(data)) == data  # JSON-native values only


def test_read_only_tools_never_change_state_and_writers_do(rt):
    for name, tool in TOOLS.items():
        for example in tool.examples:
            sid = rt.new_session()
            args = example_args(rt, sid, example)  # may prepare the state (wake, start charging)
            before = rt.state_hash(sid)
            ok(rt, sid, name, **args)
            assert (rt.state_hash(sid) != before) != tool.spec.annotations.read_only, name


def test_idempotent_writers_have_no_further_effect_when_repeated(rt):
    for name, tool in TOOLS.items():
        if tool.spec.annotations.read_only or not tool.spec.annotations.idempotent:
            continue
        for example in tool.examples:
            sid = rt.new_session()
            args = example_args(rt, sid, example)
            ok(rt, sid, name, **args)
            once = rt.state_hash(sid)
            rt.call(sid, name, args)  # refused or a no-op, never a second effect
            assert rt.state_hash(sid) == once, name


def test_honking_twice_honks_twice(rt, sid):
    home = car(rt, sid, "home_charger")
    first = ok(rt, sid, "honk_horn", vehicle_id=home)["honked_at"]
    assert ok(rt, sid, "honk_horn", vehicle_id=home)["honked_at"] > first


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash(first.new_session()) == again.state_hash(again.new_session())
    assert other.state_hash(other.new_session()) != first.state_hash(first.new_session())


def test_seed_has_every_situation(rt, sid):
    fleet = {v["vehicle_id"]: v for v in ok(rt, sid, "list_vehicles")["vehicles"]}
    assert len(fleet) == 4
    home, driving, asleep, low = (fleet[car(rt, sid, s)] for s in vehicle.PROFILES)
    assert home["powertrain"] == "electric" and status(rt, sid, home["vehicle_id"])["battery"]["plugged_in"]
    assert driving["speed_kmh"] > vehicle.WINDOW_SPEED_KMH and driving["gear"] == "D"
    assert status(rt, sid, driving["vehicle_id"])["navigation"] is not None
    assert (asleep["power_state"], asleep["powertrain"]) == ("asleep", "gasoline")
    low_status = status(rt, sid, low["vehicle_id"])
    assert low["energy_level_pct"] < 10 and low_status["open_doors"] == ["rear_left"] and low_status["trunk_open"]


def test_a_ten_times_larger_seed_works():
    big = ServerRuntime(server, options=VehicleOptions(vehicles=40))
    assert len(big.state(big.new_session()).vehicles) == 40
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        VehicleOptions(vehicles=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(vehicle)
    registered = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- mode gating ----------------------------------------------------------------------------------------


def test_nothing_unsafe_while_the_vehicle_moves(rt, sid):
    moving = car(rt, sid, "driving")
    for tool, args in (("unlock_doors", {}), ("operate_door", {"door": "driver_front", "action": "open"}),
                       ("operate_trunk", {"action": "open"}), ("honk_horn", {}), ("set_lights", {"headlights": "off"}),
                       ("start_charging", {})):
        error = fails(rt, sid, tool, "UNSAFE_WHILE_DRIVING", "FAILED_PRECONDITION", vehicle_id=moving, **args)
        assert "moving" in error["message"] or "parked" in error["message"], tool
    for gear in ("P", "R"):
        error = fails(rt, sid, "shift_gear", "SPEED_TOO_HIGH", vehicle_id=moving, gear=gear)
        assert error["details"]["speed_kmh"] > 5
    ok(rt, sid, "set_lights", vehicle_id=moving, headlights="on", hazards=True)  # allowed while driving


def test_stopping_parking_and_driving_off_again(rt, sid):
    moving = car(rt, sid, "driving")
    ok(rt, sid, "set_cruise_speed", vehicle_id=moving, speed_kmh=4)  # walking pace
    assert ok(rt, sid, "shift_gear", vehicle_id=moving, gear="P") == {"vehicle_id": moving, "gear": "P", "speed_kmh": 0}
    fails(rt, sid, "set_cruise_speed", "NOT_IN_DRIVE", vehicle_id=moving, speed_kmh=30)
    ok(rt, sid, "unlock_doors", vehicle_id=moving, door="driver_front")
    ok(rt, sid, "operate_door", vehicle_id=moving, door="driver_front", action="open")
    ok(rt, sid, "operate_trunk", vehicle_id=moving, action="open")
    error = fails(rt, sid, "shift_gear", "DOOR_OPEN", vehicle_id=moving, gear="D")
    assert error["details"]["open_doors"] == ["driver_front"]
    ok(rt, sid, "operate_door", vehicle_id=moving, door="driver_front", action="close")
    fails(rt, sid, "shift_gear", "TRUNK_OPEN", vehicle_id=moving, gear="D")
    ok(rt, sid, "operate_trunk", vehicle_id=moving, action="close")
    ok(rt, sid, "shift_gear", vehicle_id=moving, gear="D")
    assert ok(rt, sid, "set_cruise_speed", vehicle_id=moving, speed_kmh=50)["moving"]
    assert status(rt, sid, moving)["speed_kmh"] == 50
    ok(rt, sid, "set_cruise_speed", vehicle_id=moving, speed_kmh=0)  # stopped in D: doors may open again
    ok(rt, sid, "operate_door", vehicle_id=moving, door="driver_front", action="open")
    fails(rt, sid, "set_cruise_speed", "DOOR_OPEN", vehicle_id=moving, speed_kmh=20)


def test_windows_are_limited_at_speed(rt, sid):
    moving = car(rt, sid, "driving")
    error = fails(rt, sid, "set_window", "WINDOW_LIMITED_AT_SPEED", vehicle_id=moving, window="driver_front",
                  position_pct=100)
    assert error["details"]["max_pct"] == 50
    ok(rt, sid, "set_window", vehicle_id=moving, window="driver_front", position_pct=50)
    ok(rt, sid, "set_cruise_speed", vehicle_id=moving, speed_kmh=60)
    ok(rt, sid, "set_window", vehicle_id=moving, window="rear_left", position_pct=100)
    error = fails(rt, sid, "set_cruise_speed", "WINDOW_LIMITED_AT_SPEED", vehicle_id=moving, speed_kmh=100)
    assert error["details"]["windows"] == ["rear_left"]
    ok(rt, sid, "set_window", vehicle_id=moving, window="all", position_pct=0)
    ok(rt, sid, "set_cruise_speed", vehicle_id=moving, speed_kmh=100)


def test_a_sleeping_vehicle_must_be_woken_first(rt, sid):
    asleep = car(rt, sid, "asleep")
    for tool, args in (("unlock_doors", {}), ("set_climate", {"on": True}), ("honk_horn", {}),
                       ("shift_gear", {"gear": "D"}), ("set_lights", {"hazards": True})):
        fails(rt, sid, tool, "VEHICLE_ASLEEP", "FAILED_PRECONDITION", vehicle_id=asleep, **args)
    assert status(rt, sid, asleep)["power_state"] == "asleep"  # reads still work
    assert ok(rt, sid, "wake_vehicle", vehicle_id=asleep)["power_state"] == "awake"
    ok(rt, sid, "unlock_doors", vehicle_id=asleep)
    fails(rt, sid, "get_vehicle_status", "VEHICLE_NOT_FOUND", "NOT_FOUND", vehicle_id="veh_missing")


def test_door_and_trunk_states(rt, sid):
    home, low = car(rt, sid, "home_charger"), car(rt, sid, "low_battery")
    fails(rt, sid, "unlock_doors", "ALREADY_UNLOCKED", "CONFLICT", vehicle_id=home)
    ok(rt, sid, "lock_doors", vehicle_id=home)
    fails(rt, sid, "lock_doors", "ALREADY_LOCKED", "CONFLICT", vehicle_id=home)
    fails(rt, sid, "operate_door", "DOOR_LOCKED", vehicle_id=home, door="driver_front", action="open")
    fails(rt, sid, "operate_door", "DOOR_ALREADY_CLOSED", vehicle_id=home, door="driver_front", action="close")
    error = fails(rt, sid, "lock_doors", "DOOR_OPEN", vehicle_id=low)
    assert error["details"]["open_doors"] == ["rear_left"]
    fails(rt, sid, "operate_door", "DOOR_ALREADY_OPEN", vehicle_id=low, door="rear_left", action="open")
    fails(rt, sid, "operate_trunk", "TRUNK_ALREADY_OPEN", vehicle_id=low, action="open")
    fails(rt, sid, "operate_trunk", "TRUNK_ALREADY_CLOSED", vehicle_id=home, action="close")
    ok(rt, sid, "operate_trunk", vehicle_id=home, action="open")  # opens even though the doors are locked
    ok(rt, sid, "operate_door", vehicle_id=low, door="rear_left", action="close")
    assert ok(rt, sid, "lock_doors", vehicle_id=low)["all_locked"]


# -- charging -------------------------------------------------------------------------------------------


def test_charging_session_adds_the_energy_delivered(rt, sid):
    home = car(rt, sid, "home_charger")
    battery = status(rt, sid, home)["battery"]
    session = ok(rt, sid, "start_charging", vehicle_id=home)
    assert session["start_level_pct"] == battery["level_pct"] and session["status"] == "charging"
    assert status(rt, sid, home)["charging_session_id"] == session["charging_session_id"]
    error = fails(rt, sid, "start_charging", "ALREADY_CHARGING", "CONFLICT", vehicle_id=home)
    assert error["details"]["charging_session_id"] == session["charging_session_id"]
    fails(rt, sid, "shift_gear", "CHARGE_CABLE_CONNECTED", vehicle_id=home, gear="D")
    rt.state(sid).advance_clock(30 * 60 - 60)  # arrange: half an hour passes (the next write adds a minute)
    done = ok(rt, sid, "stop_charging", vehicle_id=home)
    assert done["energy_added_kwh"] == round(11.5 * 0.5, 2)
    expected = round(battery["level_pct"] + 11.5 * 0.5 / battery["capacity_kwh"] * 100, 1)
    assert done["end_level_pct"] == expected == status(rt, sid, home)["battery"]["level_pct"]
    fails(rt, sid, "stop_charging", "NOT_CHARGING", vehicle_id=home)


def test_charging_needs_a_plugged_in_parked_ev(rt, sid):
    low, asleep, home = car(rt, sid, "low_battery"), car(rt, sid, "asleep"), car(rt, sid, "home_charger")
    fails(rt, sid, "start_charging", "NOT_PLUGGED_IN", "FAILED_PRECONDITION", vehicle_id=low)
    ok(rt, sid, "wake_vehicle", vehicle_id=asleep)
    fails(rt, sid, "start_charging", "CHARGING_NOT_SUPPORTED", vehicle_id=asleep)
    fails(rt, sid, "set_charge_limit", "CHARGING_NOT_SUPPORTED", vehicle_id=asleep, limit_pct=80)
    error = fails(rt, sid, "set_charge_limit", "CHARGE_LIMIT_OUT_OF_RANGE", "INVALID_ARGUMENT", vehicle_id=home,
                  limit_pct=40)
    assert (error["details"]["min_pct"], error["details"]["max_pct"]) == (50, 100)
    too_high = rt.call(sid, "set_charge_limit", {"vehicle_id": home, "limit_pct": 101})
    assert too_high.error["reason"] == "SCHEMA_VIOLATION"
    ok(rt, sid, "set_charge_limit", vehicle_id=home, limit_pct=50)  # below the current level
    fails(rt, sid, "start_charging", "CHARGE_LIMIT_REACHED", vehicle_id=home)


def test_lowering_the_limit_below_the_level_ends_the_session(rt, sid):
    home = car(rt, sid, "home_charger")
    session = ok(rt, sid, "start_charging", vehicle_id=home)["charging_session_id"]
    ok(rt, sid, "set_charge_limit", vehicle_id=home, limit_pct=95)
    assert rt.state(sid).charging_sessions.get(session)["target_level_pct"] == 95
    ok(rt, sid, "set_charge_limit", vehicle_id=home, limit_pct=50)
    finished = rt.state(sid).charging_sessions.get(session)
    assert (finished["status"], finished["stop_reason"]) == ("complete", "limit_reached")
    assert not status(rt, sid, home)["battery"]["charging"]


# -- climate ---------------------------------------------------------------------------------------------


def test_climate_rules(rt, sid):
    low, asleep, home = car(rt, sid, "low_battery"), car(rt, sid, "asleep"), car(rt, sid, "home_charger")
    error = fails(rt, sid, "set_climate", "BATTERY_TOO_LOW", "FAILED_PRECONDITION", vehicle_id=low, on=True)
    assert error["details"]["level_pct"] < 10
    ok(rt, sid, "set_climate", vehicle_id=low, target_temp_c=19.5)  # a setting without switching on is fine
    ok(rt, sid, "wake_vehicle", vehicle_id=asleep)
    ok(rt, sid, "unlock_doors", vehicle_id=asleep, door="passenger_front")
    fails(rt, sid, "set_climate", "DOORS_NOT_LOCKED", vehicle_id=asleep, on=True)
    ok(rt, sid, "lock_doors", vehicle_id=asleep)
    assert ok(rt, sid, "set_climate", vehicle_id=asleep, front_defrost=True)["climate"]["fan_speed"] == 7
    fails(rt, sid, "set_climate", "NOTHING_TO_CHANGE", "INVALID_ARGUMENT", vehicle_id=home)
    odd = rt.call(sid, "set_climate", {"vehicle_id": home, "target_temp_c": 21.3})
    assert odd.error["reason"] == "SCHEMA_VIOLATION"  # half degrees only
    fails(rt, sid, "set_seat_heater", "CLIMATE_OFF", vehicle_id=home, seat="driver", level=2)
    ok(rt, sid, "set_seat_heater", vehicle_id=home, seat="driver", level=0)  # off is always allowed
    ok(rt, sid, "set_climate", vehicle_id=home, on=True)
    ok(rt, sid, "set_seat_heater", vehicle_id=home, seat="passenger", level=3)
    off = ok(rt, sid, "set_climate", vehicle_id=home, on=False)
    assert set(off["seat_heaters"].values()) == {0} and off["climate"]["fan_speed"] == 0
    state = rt.state(sid)
    state.vehicles.update(home, seat_heaters={"driver": 0, "passenger": 0})  # arrange: no rear heaters fitted
    error = fails(rt, sid, "set_seat_heater", "SEAT_HEATER_NOT_AVAILABLE", vehicle_id=home, seat="rear_left", level=1)
    assert error["details"]["seats"] == ["driver", "passenger"]


# -- navigation ------------------------------------------------------------------------------------------


def test_ids_flow_from_the_fleet_to_navigation_and_eta(rt, sid):
    fleet = ok(rt, sid, "list_vehicles")["vehicles"]
    home = next(v for v in fleet if v["powertrain"] == "electric" and v["speed_kmh"] == 0
                and v["energy_level_pct"] > 20)["vehicle_id"]
    route = ok(rt, sid, "set_destination", vehicle_id=home, address="stanford shopping center")["navigation"]
    assert route["destination"]["name"] == "Stanford Shopping Center" and 40 < route["distance_km"] < 60
    eta = ok(rt, sid, "get_route_eta", vehicle_id=home)
    assert eta["distance_km"] == route["distance_km"] and eta["duration_min"] == round(route["distance_km"] / 70 * 60)
    assert eta["eta"] > "2026-03-02T09:00:00Z"
    assert status(rt, sid, home)["navigation"]["destination"] == route["destination"]
    cancelled = ok(rt, sid, "cancel_navigation", vehicle_id=home)["cancelled"]
    assert cancelled["destination"]["name"] == "Stanford Shopping Center"
    fails(rt, sid, "get_route_eta", "NO_ACTIVE_ROUTE", vehicle_id=home)
    fails(rt, sid, "cancel_navigation", "NO_ACTIVE_ROUTE", vehicle_id=home)


def test_navigation_refuses_destinations_beyond_range(rt, sid):
    low, asleep, home = car(rt, sid, "low_battery"), car(rt, sid, "asleep"), car(rt, sid, "home_charger")
    error = fails(rt, sid, "set_destination", "BATTERY_TOO_LOW", "FAILED_PRECONDITION", vehicle_id=low,
                  address="Santa Cruz Beach Boardwalk")
    assert error["details"]["distance_km"] > error["details"]["range_km"] - 0.05 * 400
    ok(rt, sid, "set_destination", vehicle_id=low, address="Office")  # close by is fine
    ok(rt, sid, "wake_vehicle", vehicle_id=asleep)
    fails(rt, sid, "set_destination", "FUEL_TOO_LOW", vehicle_id=asleep, address="Los Angeles Union Station")
    fails(rt, sid, "set_destination", "BATTERY_TOO_LOW", vehicle_id=home, latitude=34.0562, longitude=-118.2365)


def test_destination_lookup_errors(rt, sid):
    home = car(rt, sid, "home_charger")
    fails(rt, sid, "set_destination", "ADDRESS_NOT_FOUND", "NOT_FOUND", vehicle_id=home, address="221B Baker Street")
    error = fails(rt, sid, "set_destination", "AMBIGUOUS_ADDRESS", "INVALID_ARGUMENT", vehicle_id=home,
                  address="San Francisco")
    assert "Ferry Building" in error["details"]["candidates"]
    for args in ({}, {"latitude": 37.8}, {"address": "Office", "latitude": 37.8, "longitude": -122.4}):
        fails(rt, sid, "set_destination", "DESTINATION_REQUIRED", "INVALID_ARGUMENT", vehicle_id=home, **args)
