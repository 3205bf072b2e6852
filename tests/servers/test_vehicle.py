"""The vehicle server's own rules: mode gating (nothing unsafe while moving), wake and sleep,
doors, windows and trunk, climate, charging, navigation and lights, with typed failures. What
every server guarantees is the conformance kit's (tests/servers/test_conformance.py)."""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import vehicle
from prove_servers.vehicle import VehicleOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)
SITUATIONS = {  # the seeded vehicle in each situation
    "home_charger": lambda v: v["battery"] is not None and v["battery"]["plugged_in"] and v["power_state"] == "awake",
    "driving": lambda v: v["speed_kmh"] > 0,
    "asleep": lambda v: v["power_state"] == "asleep",
    "low_battery": lambda v: v["battery"] is not None and not v["battery"]["plugged_in"] and v["speed_kmh"] == 0,
}


def car(h, situation: str) -> str:
    """The id of the seeded vehicle in a situation: home_charger, driving, asleep or low_battery."""
    return h.find("vehicles", SITUATIONS[situation])["id"]


def status(h, vehicle_id: str) -> dict:
    return h.ok("get_vehicle_status", vehicle_id=vehicle_id)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "list_vehicles", "get_vehicle_status", "wake_vehicle", "shift_gear", "set_cruise_speed", "lock_doors",
        "unlock_doors", "operate_door", "set_window", "set_climate", "set_seat_heater", "start_charging",
        "stop_charging", "set_charge_limit", "set_destination", "get_route_eta", "cancel_navigation", "operate_trunk",
        "set_lights", "honk_horn",
    }
    assert servers_registered_by(vehicle) == [server] and (server.name, server.domain) == ("vehicle", "IoT")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_vehicles", "get_vehicle_status", "get_route_eta"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"cancel_navigation"}
    assert {n for n, t in TOOLS.items() if not t.spec.annotations.idempotent} == {"honk_horn"}
    assert TOOLS["start_charging"].spec.produces == ("charging_session",)
    assert TOOLS["unlock_doors"].spec.entity_params() == {"vehicle_id": "vehicle"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_honking_twice_honks_twice(h):
    home = car(h, "home_charger")
    first = h.ok("honk_horn", vehicle_id=home)["honked_at"]
    assert h.ok("honk_horn", vehicle_id=home)["honked_at"] > first


def test_seed_has_every_situation(h):
    fleet = {v["vehicle_id"]: v for v in h.ok("list_vehicles")["vehicles"]}
    assert len(fleet) == 4
    home, driving, asleep, low = (fleet[car(h, s)] for s in vehicle.PROFILES)
    assert home["powertrain"] == "electric" and status(h, home["vehicle_id"])["battery"]["plugged_in"]
    assert driving["speed_kmh"] > vehicle.WINDOW_SPEED_KMH and driving["gear"] == "D"
    assert status(h, driving["vehicle_id"])["navigation"] is not None
    assert (asleep["power_state"], asleep["powertrain"]) == ("asleep", "gasoline")
    low_status = status(h, low["vehicle_id"])
    assert low["energy_level_pct"] < 10 and low_status["open_doors"] == ["rear_left"] and low_status["trunk_open"]


def test_a_ten_times_larger_seed_works_and_options_are_validated():
    big = ServerHarness(server, options=VehicleOptions(vehicles=40))
    assert len(big.state.vehicles) == 40
    big.run_examples()
    with pytest.raises(ValueError):
        VehicleOptions(vehicles=0)


# -- mode gating ----------------------------------------------------------------------------------------


def test_nothing_unsafe_while_the_vehicle_moves(h):
    moving = car(h, "driving")
    for tool, args in (("unlock_doors", {}), ("operate_door", {"door": "driver_front", "action": "open"}),
                       ("operate_trunk", {"action": "open"}), ("honk_horn", {}), ("set_lights", {"headlights": "off"}),
                       ("start_charging", {})):
        error = h.fails(tool, "UNSAFE_WHILE_DRIVING", "FAILED_PRECONDITION", vehicle_id=moving, **args)
        assert "moving" in error["message"] or "parked" in error["message"], tool
    for gear in ("P", "R"):
        error = h.fails("shift_gear", "SPEED_TOO_HIGH", vehicle_id=moving, gear=gear)
        assert error["details"]["speed_kmh"] > 5
    h.ok("set_lights", vehicle_id=moving, headlights="on", hazards=True)  # allowed while driving


def test_stopping_parking_and_driving_off_again(h):
    moving = car(h, "driving")
    h.ok("set_cruise_speed", vehicle_id=moving, speed_kmh=4)  # walking pace
    assert h.ok("shift_gear", vehicle_id=moving, gear="P") == {"vehicle_id": moving, "gear": "P", "speed_kmh": 0}
    h.fails("set_cruise_speed", "NOT_IN_DRIVE", vehicle_id=moving, speed_kmh=30)
    h.ok("unlock_doors", vehicle_id=moving, door="driver_front")
    h.ok("operate_door", vehicle_id=moving, door="driver_front", action="open")
    h.ok("operate_trunk", vehicle_id=moving, action="open")
    error = h.fails("shift_gear", "DOOR_OPEN", vehicle_id=moving, gear="D")
    assert error["details"]["open_doors"] == ["driver_front"]
    h.ok("operate_door", vehicle_id=moving, door="driver_front", action="close")
    h.fails("shift_gear", "TRUNK_OPEN", vehicle_id=moving, gear="D")
    h.ok("operate_trunk", vehicle_id=moving, action="close")
    h.ok("shift_gear", vehicle_id=moving, gear="D")
    assert h.ok("set_cruise_speed", vehicle_id=moving, speed_kmh=50)["moving"]
    assert status(h, moving)["speed_kmh"] == 50
    h.ok("set_cruise_speed", vehicle_id=moving, speed_kmh=0)  # stopped in D: doors may open again
    h.ok("operate_door", vehicle_id=moving, door="driver_front", action="open")
    h.fails("set_cruise_speed", "DOOR_OPEN", vehicle_id=moving, speed_kmh=20)


def test_windows_are_limited_at_speed(h):
    moving = car(h, "driving")
    error = h.fails("set_window", "WINDOW_LIMITED_AT_SPEED", vehicle_id=moving, window="driver_front",
                    position_pct=100)
    assert error["details"]["max_pct"] == 50
    h.ok("set_window", vehicle_id=moving, window="driver_front", position_pct=50)
    h.ok("set_cruise_speed", vehicle_id=moving, speed_kmh=60)
    h.ok("set_window", vehicle_id=moving, window="rear_left", position_pct=100)
    error = h.fails("set_cruise_speed", "WINDOW_LIMITED_AT_SPEED", vehicle_id=moving, speed_kmh=100)
    assert error["details"]["windows"] == ["rear_left"]
    h.ok("set_window", vehicle_id=moving, window="all", position_pct=0)
    h.ok("set_cruise_speed", vehicle_id=moving, speed_kmh=100)


def test_a_sleeping_vehicle_must_be_woken_first(h):
    asleep = car(h, "asleep")
    for tool, args in (("unlock_doors", {}), ("set_climate", {"on": True}), ("honk_horn", {}),
                       ("shift_gear", {"gear": "D"}), ("set_lights", {"hazards": True})):
        h.fails(tool, "VEHICLE_ASLEEP", "FAILED_PRECONDITION", vehicle_id=asleep, **args)
    assert status(h, asleep)["power_state"] == "asleep"  # reads still work
    assert h.ok("wake_vehicle", vehicle_id=asleep)["power_state"] == "awake"
    h.ok("unlock_doors", vehicle_id=asleep)
    h.fails("get_vehicle_status", "VEHICLE_NOT_FOUND", "NOT_FOUND", vehicle_id="veh_missing")


def test_door_and_trunk_states(h):
    home, low = car(h, "home_charger"), car(h, "low_battery")
    h.fails("unlock_doors", "ALREADY_UNLOCKED", "CONFLICT", vehicle_id=home)
    h.ok("lock_doors", vehicle_id=home)
    h.fails("lock_doors", "ALREADY_LOCKED", "CONFLICT", vehicle_id=home)
    h.fails("operate_door", "DOOR_LOCKED", vehicle_id=home, door="driver_front", action="open")
    h.fails("operate_door", "DOOR_ALREADY_CLOSED", vehicle_id=home, door="driver_front", action="close")
    error = h.fails("lock_doors", "DOOR_OPEN", vehicle_id=low)
    assert error["details"]["open_doors"] == ["rear_left"]
    h.fails("operate_door", "DOOR_ALREADY_OPEN", vehicle_id=low, door="rear_left", action="open")
    h.fails("operate_trunk", "TRUNK_ALREADY_OPEN", vehicle_id=low, action="open")
    h.fails("operate_trunk", "TRUNK_ALREADY_CLOSED", vehicle_id=home, action="close")
    h.ok("operate_trunk", vehicle_id=home, action="open")  # opens even though the doors are locked
    h.ok("operate_door", vehicle_id=low, door="rear_left", action="close")
    assert h.ok("lock_doors", vehicle_id=low)["all_locked"]


# -- charging -------------------------------------------------------------------------------------------


def test_charging_session_adds_the_energy_delivered(h):
    home = car(h, "home_charger")
    battery = status(h, home)["battery"]
    session = h.ok("start_charging", vehicle_id=home)
    assert session["start_level_pct"] == battery["level_pct"] and session["status"] == "charging"
    assert status(h, home)["charging_session_id"] == session["charging_session_id"]
    error = h.fails("start_charging", "ALREADY_CHARGING", "CONFLICT", vehicle_id=home)
    assert error["details"]["charging_session_id"] == session["charging_session_id"]
    h.fails("shift_gear", "CHARGE_CABLE_CONNECTED", vehicle_id=home, gear="D")
    h.state.advance_clock(30 * 60 - 60)  # arrange: half an hour passes (the next write adds a minute)
    done = h.ok("stop_charging", vehicle_id=home)
    assert done["energy_added_kwh"] == round(11.5 * 0.5, 2)
    expected = round(battery["level_pct"] + 11.5 * 0.5 / battery["capacity_kwh"] * 100, 1)
    assert done["end_level_pct"] == expected == status(h, home)["battery"]["level_pct"]
    h.fails("stop_charging", "NOT_CHARGING", vehicle_id=home)


def test_charging_needs_a_plugged_in_parked_ev(h):
    low, asleep, home = car(h, "low_battery"), car(h, "asleep"), car(h, "home_charger")
    h.fails("start_charging", "NOT_PLUGGED_IN", "FAILED_PRECONDITION", vehicle_id=low)
    h.ok("wake_vehicle", vehicle_id=asleep)
    h.fails("start_charging", "CHARGING_NOT_SUPPORTED", vehicle_id=asleep)
    h.fails("set_charge_limit", "CHARGING_NOT_SUPPORTED", vehicle_id=asleep, limit_pct=80)
    error = h.fails("set_charge_limit", "CHARGE_LIMIT_OUT_OF_RANGE", "INVALID_ARGUMENT", vehicle_id=home,
                    limit_pct=40)
    assert (error["details"]["min_pct"], error["details"]["max_pct"]) == (50, 100)
    too_high = h.call("set_charge_limit", {"vehicle_id": home, "limit_pct": 101})
    assert too_high.error["reason"] == "SCHEMA_VIOLATION"
    h.ok("set_charge_limit", vehicle_id=home, limit_pct=50)  # below the current level
    h.fails("start_charging", "CHARGE_LIMIT_REACHED", vehicle_id=home)


def test_lowering_the_limit_below_the_level_ends_the_session(h):
    home = car(h, "home_charger")
    session = h.ok("start_charging", vehicle_id=home)["charging_session_id"]
    h.ok("set_charge_limit", vehicle_id=home, limit_pct=95)
    assert h.state.charging_sessions.get(session)["target_level_pct"] == 95
    h.ok("set_charge_limit", vehicle_id=home, limit_pct=50)
    finished = h.state.charging_sessions.get(session)
    assert (finished["status"], finished["stop_reason"]) == ("complete", "limit_reached")
    assert not status(h, home)["battery"]["charging"]


# -- climate ---------------------------------------------------------------------------------------------


def test_climate_rules(h):
    low, asleep, home = car(h, "low_battery"), car(h, "asleep"), car(h, "home_charger")
    error = h.fails("set_climate", "BATTERY_TOO_LOW", "FAILED_PRECONDITION", vehicle_id=low, on=True)
    assert error["details"]["level_pct"] < 10
    h.ok("set_climate", vehicle_id=low, target_temp_c=19.5)  # a setting without switching on is fine
    h.ok("wake_vehicle", vehicle_id=asleep)
    h.ok("unlock_doors", vehicle_id=asleep, door="passenger_front")
    h.fails("set_climate", "DOORS_NOT_LOCKED", vehicle_id=asleep, on=True)
    h.ok("lock_doors", vehicle_id=asleep)
    assert h.ok("set_climate", vehicle_id=asleep, front_defrost=True)["climate"]["fan_speed"] == 7
    h.fails("set_climate", "NOTHING_TO_CHANGE", "INVALID_ARGUMENT", vehicle_id=home)
    odd = h.call("set_climate", {"vehicle_id": home, "target_temp_c": 21.3})
    assert odd.error["reason"] == "SCHEMA_VIOLATION"  # half degrees only
    h.fails("set_seat_heater", "CLIMATE_OFF", vehicle_id=home, seat="driver", level=2)
    h.ok("set_seat_heater", vehicle_id=home, seat="driver", level=0)  # off is always allowed
    h.ok("set_climate", vehicle_id=home, on=True)
    h.ok("set_seat_heater", vehicle_id=home, seat="passenger", level=3)
    off = h.ok("set_climate", vehicle_id=home, on=False)
    assert set(off["seat_heaters"].values()) == {0} and off["climate"]["fan_speed"] == 0
    state = h.state
    state.vehicles.update(home, seat_heaters={"driver": 0, "passenger": 0})  # arrange: no rear heaters fitted
    error = h.fails("set_seat_heater", "SEAT_HEATER_NOT_AVAILABLE", vehicle_id=home, seat="rear_left", level=1)
    assert error["details"]["seats"] == ["driver", "passenger"]


# -- navigation ------------------------------------------------------------------------------------------


def test_ids_flow_from_the_fleet_to_navigation_and_eta(h):
    fleet = h.ok("list_vehicles")["vehicles"]
    home = next(v for v in fleet if v["powertrain"] == "electric" and v["speed_kmh"] == 0
                and v["energy_level_pct"] > 20)["vehicle_id"]
    route = h.ok("set_destination", vehicle_id=home, address="stanford shopping center")["navigation"]
    assert route["destination"]["name"] == "Stanford Shopping Center" and 40 < route["distance_km"] < 60
    eta = h.ok("get_route_eta", vehicle_id=home)
    assert eta["distance_km"] == route["distance_km"] and eta["duration_min"] == round(route["distance_km"] / 70 * 60)
    assert eta["eta"] > "2026-03-02T09:00:00Z"
    assert status(h, home)["navigation"]["destination"] == route["destination"]
    cancelled = h.ok("cancel_navigation", vehicle_id=home)["cancelled"]
    assert cancelled["destination"]["name"] == "Stanford Shopping Center"
    h.fails("get_route_eta", "NO_ACTIVE_ROUTE", vehicle_id=home)
    h.fails("cancel_navigation", "NO_ACTIVE_ROUTE", vehicle_id=home)


def test_navigation_refuses_destinations_beyond_range(h):
    low, asleep, home = car(h, "low_battery"), car(h, "asleep"), car(h, "home_charger")
    error = h.fails("set_destination", "BATTERY_TOO_LOW", "FAILED_PRECONDITION", vehicle_id=low,
                    address="Santa Cruz Beach Boardwalk")
    assert error["details"]["distance_km"] > error["details"]["range_km"] - 0.05 * 400
    h.ok("set_destination", vehicle_id=low, address="Office")  # close by is fine
    h.ok("wake_vehicle", vehicle_id=asleep)
    h.fails("set_destination", "FUEL_TOO_LOW", vehicle_id=asleep, address="Los Angeles Union Station")
    h.fails("set_destination", "BATTERY_TOO_LOW", vehicle_id=home, latitude=34.0562, longitude=-118.2365)


def test_destination_lookup_errors(h):
    home = car(h, "home_charger")
    h.fails("set_destination", "ADDRESS_NOT_FOUND", "NOT_FOUND", vehicle_id=home, address="221B Baker Street")
    error = h.fails("set_destination", "AMBIGUOUS_ADDRESS", "INVALID_ARGUMENT", vehicle_id=home,
                    address="San Francisco")
    assert "Ferry Building" in error["details"]["candidates"]
    for args in ({}, {"latitude": 37.8}, {"address": "Office", "latitude": 37.8, "longitude": -122.4}):
        h.fails("set_destination", "DESTINATION_REQUIRED", "INVALID_ARGUMENT", vehicle_id=home, **args)
