"""vehicle — connected-car control for a household's vehicles: gear and speed, doors, windows,
trunk, climate and seat heaters, charging (electric) or fuel (gasoline), navigation, lights and
horn, as an in-car assistant and companion app see them.

Commands are **mode-gated** the way a real car gates them, and every refusal is a typed error:

- A sleeping vehicle takes no command until woken (VEHICLE_ASLEEP); reads show its last state.
- While the vehicle moves (speed > 0): no unlocking or opening doors or the trunk, no remote
  horn and no headlights off (UNSAFE_WHILE_DRIVING). Charging only while parked in P.
- Gear: no P or R above 5 km/h (SPEED_TOO_HIGH); leaving P needs the doors and trunk shut
  and the charge cable out. Speed (the driver-assist target speed) needs gear D.
- Above 80 km/h a window opens at most half way (WINDOW_LIMITED_AT_SPEED).
- Navigation refuses a destination the remaining range cannot reach with a 5% reserve
  (BATTERY_TOO_LOW, FUEL_TOO_LOW). Charge limits run from 50 to 100%.

Energy and positions do not drift with time, except that a charging session adds the energy
its charger delivered over the session-clock time it ran.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    Conflict,
    InvalidArgument,
    NotFound,
    Record,
    Server,
    State,
    Table,
    iso_datetime,
    ref,
    require,
)
from prove_core.toolkit.helpers import haversine_km

# -- vocabulary -----------------------------------------------------------------------------------

Gear = Literal["P", "R", "N", "D"]
Door = Literal["driver_front", "passenger_front", "rear_left", "rear_right"]
DOORS: tuple[str, ...] = ("driver_front", "passenger_front", "rear_left", "rear_right")
Seat = Literal["driver", "passenger", "rear_left", "rear_right"]
Headlights = Literal["off", "auto", "on"]

PARK_MAX_SPEED_KMH = 5
WINDOW_SPEED_KMH = 80  # above this a window opens at most WINDOW_MAX_AT_SPEED percent
WINDOW_MAX_AT_SPEED = 50
CHARGE_LIMIT_RANGE = (50, 100)
CLIMATE_MIN_BATTERY_PCT = 10  # unplugged EVs keep this much for driving
RANGE_RESERVE_PCT = 5
ROAD_FACTOR = 1.25  # road distance per great-circle kilometre
MAX_FAN_SPEED = 7

# (make, model, body, full range km, battery kWh, rear seat heaters)
ELECTRIC_MODELS = (("Arden", "Ion S", "sedan", 480, 75.0, True), ("Volta", "Aurora", "SUV", 520, 82.0, True),
                   ("Kestrel", "EV5", "hatchback", 400, 60.0, False))
# (make, model, body, tank litres, litres per 100 km, rear seat heaters)
GASOLINE_MODELS = (("Solano", "Mesa GT", "sedan", 55.0, 7.2, False), ("Brixton", "Trailrunner", "SUV", 70.0, 9.8, True))
NICKNAMES = ("Blue Bolt", "The Tank", "Marigold", "Road Runner", "Pebble", "Comet", "Juniper", "Nimbus")
COLORS = ("Midnight Blue", "Pearl White", "Graphite", "Sunset Red", "Forest Green")
HOME = (37.7599, -122.4148)  # the household, in San Francisco's Mission district
# The address book navigation knows: (name, address, lat, lon).
DESTINATIONS = (
    ("Home", "2400 Harrison St, San Francisco, CA 94110", 37.7599, -122.4148),
    ("Office", "535 Mission St, San Francisco, CA 94105", 37.7887, -122.3978),
    ("Ferry Building", "1 Ferry Building, San Francisco, CA 94111", 37.7955, -122.3937),
    ("San Francisco International Airport", "780 S Airport Blvd, San Francisco, CA 94128", 37.6213, -122.3790),
    ("Stanford Shopping Center", "660 Stanford Shopping Center, Palo Alto, CA 94304", 37.4430, -122.1710),
    ("Santa Cruz Beach Boardwalk", "400 Beach St, Santa Cruz, CA 95060", 36.9643, -122.0177),
    ("Monterey Bay Aquarium", "886 Cannery Row, Monterey, CA 93940", 36.6182, -121.9019),
    ("Napa Valley Welcome Center", "600 Main St, Napa, CA 94559", 38.2995, -122.2855),
    ("California State Capitol", "1315 10th St, Sacramento, CA 95814", 38.5766, -121.4934),
    ("Yosemite Valley Visitor Center", "9035 Village Dr, Yosemite Valley, CA 95389", 37.7484, -119.5869),
    ("Lake Tahoe Visitor Center", "3111 Emerald Bay Rd, South Lake Tahoe, CA 96150", 38.9399, -119.9772),
    ("Los Angeles Union Station", "800 N Alameda St, Los Angeles, CA 90012", 34.0562, -118.2365),
    ("Supercharger Gilroy", "8300 Arroyo Cir, Gilroy, CA 95020", 37.0035, -121.5645),
)
# How each vehicle in turn starts, so every seed of any size has each situation: an EV parked on
# its home charger, one being driven on the freeway with a route set, a sleeping gasoline car,
# and an EV nearly out of charge with a door and the trunk open.
PROFILES = ("home_charger", "driving", "asleep", "low_battery")

VehicleId = Annotated[str, ref("vehicle", "Id of the vehicle (veh_...), from list_vehicles.")]
Latitude = Annotated[float | None, Field(ge=-90, le=90, description="Destination latitude (give longitude too).")]
Longitude = Annotated[float | None, Field(ge=-180, le=180, description="Destination longitude (give latitude too).")]


# -- state and seed ---------------------------------------------------------------------------------


class VehicleState(State):
    """The household's vehicles and their charging sessions, plus the navigation address book."""

    vehicles = Table("vehicle", prefix="veh")
    charging_sessions = Table("charging_session", prefix="chg", index=("vehicle_id", "status"))
    destinations = Table("destination", prefix="dst")


@attrs.frozen(kw_only=True)
class VehicleOptions:
    """Seed size: how many vehicles the household has (situations cycle as in PROFILES)."""

    vehicles: int = attrs.field(default=4, validator=attrs.validators.gt(0))


def build_vehicles(rng: random.Random, options: VehicleOptions) -> VehicleState:
    state = VehicleState(salt=str(rng.random()))
    for name, address, lat, lon in DESTINATIONS:
        state.destinations.insert({"name": name, "address": address, "lat": lat, "lon": lon})
    for index in range(options.vehicles):
        _seed_vehicle(state, rng, index)
    return state


def _seed_vehicle(state: VehicleState, rng: random.Random, index: int) -> None:
    profile = PROFILES[index % len(PROFILES)]
    electric = profile != "asleep"
    if electric:
        make, model, body, full_range, capacity, rear_heat = rng.choice(ELECTRIC_MODELS)
    else:
        make, model, body, tank, per_100km, rear_heat = rng.choice(GASOLINE_MODELS)
    moving = profile == "driving"
    lat, lon = (37.6620 + rng.uniform(-0.01, 0.01), -122.4010) if moving else (
        HOME[0] + rng.uniform(-0.003, 0.003), HOME[1] + rng.uniform(-0.003, 0.003))
    open_door = profile == "low_battery"
    level = {"home_charger": rng.randint(45, 65), "driving": rng.randint(55, 80), "low_battery": rng.randint(6, 9)}
    vehicle = {
        "name": NICKNAMES[index % len(NICKNAMES)] + (f" {index // len(NICKNAMES) + 1}" if index >= len(NICKNAMES)
                                                     else ""),
        "make": make, "model": model, "body": body, "year": rng.randint(2019, 2025), "color": rng.choice(COLORS),
        "vin": "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ0123456789") for _ in range(17)),
        "powertrain": "electric" if electric else "gasoline",
        "power_state": "asleep" if profile == "asleep" else "awake",
        "gear": "D" if moving else "P",
        "speed_kmh": rng.choice((72, 88, 104)) if moving else 0,
        "odometer_km": rng.randint(4_000, 90_000),
        "location": {"lat": round(lat, 5), "lon": round(lon, 5), "heading_deg": rng.randint(0, 359)},
        "doors": {door: {"locked": moving or profile == "asleep", "open": open_door and door == "rear_left"}
                  for door in DOORS},
        "windows": dict.fromkeys(DOORS, 0),
        "trunk_open": open_door,
        "climate": {"on": moving, "target_temp_c": 21.0, "fan_speed": 3 if moving else 0, "front_defrost": False,
                    "rear_defrost": False},
        "seat_heaters": dict.fromkeys(("driver", "passenger", *(("rear_left", "rear_right") if rear_heat else ())), 0),
        "lights": {"headlights": "auto", "hazards": False},
        "outside_temp_c": round(rng.uniform(8.0, 14.0), 1),
        "battery": None,
        "fuel": None,
        "navigation": None,
        "last_horn_at": None,
    }
    if electric:
        vehicle["battery"] = {
            "level_pct": float(level[profile]), "charge_limit_pct": rng.choice((80, 90)),
            "full_range_km": full_range, "capacity_kwh": capacity,
            "plugged_in": profile == "home_charger", "charging": False,
            "charger_kw": 11.5 if profile == "home_charger" else None,
        }
    else:
        vehicle["fuel"] = {"level_pct": float(rng.randint(25, 45)), "tank_liters": tank, "liters_per_100km": per_100km}
    record = state.vehicles.insert(vehicle)
    if moving:  # on the way to the airport
        airport = state.destinations.first(name="San Francisco International Airport")
        state.vehicles.update(record["id"], navigation=_route(state, record, airport))


# -- shared rules -------------------------------------------------------------------------------------


def _moving(vehicle: Record) -> bool:
    return vehicle["speed_kmh"] > 0


def _range_km(vehicle: Record) -> float:
    if vehicle["battery"] is not None:
        battery = vehicle["battery"]
        return round(battery["level_pct"] / 100 * battery["full_range_km"], 1)
    fuel = vehicle["fuel"]
    return round(fuel["level_pct"] / 100 * fuel["tank_liters"] / fuel["liters_per_100km"] * 100, 1)


def _full_range_km(vehicle: Record) -> float:
    if vehicle["battery"] is not None:
        return vehicle["battery"]["full_range_km"]
    fuel = vehicle["fuel"]
    return fuel["tank_liters"] / fuel["liters_per_100km"] * 100


def _awake(vehicle: Record) -> None:
    require(vehicle["power_state"] == "awake", f"{vehicle['name']} is asleep; call wake_vehicle first",
            reason="VEHICLE_ASLEEP")


def _not_moving(vehicle: Record, action: str) -> None:
    require(not _moving(vehicle), f"cannot {action} while {vehicle['name']} is moving at {vehicle['speed_kmh']} km/h; "
            "stop the vehicle first", reason="UNSAFE_WHILE_DRIVING", speed_kmh=vehicle["speed_kmh"])


def _battery(vehicle: Record) -> Record:
    require(vehicle["battery"] is not None, f"{vehicle['name']} is a {vehicle['powertrain']} vehicle and cannot "
            "charge", reason="CHARGING_NOT_SUPPORTED")
    return vehicle["battery"]


def _route(state: VehicleState, vehicle: Record, destination: Record) -> Record:
    """A route from the vehicle to a destination: road distance, energy left on arrival."""
    here = vehicle["location"]
    km = round(haversine_km(here["lat"], here["lon"], destination["lat"], destination["lon"]) * ROAD_FACTOR, 1)
    arrival_pct = round((_range_km(vehicle) - km) / _full_range_km(vehicle) * 100, 1)
    return {"destination": {k: destination[k] for k in ("name", "address", "lat", "lon")},
            "distance_km": km, "arrival_energy_pct": arrival_pct, "set_at": iso_datetime(state.now())}


def _find_destination(state: VehicleState, address: str) -> Record:
    """The address-book entry an address or name means; ADDRESS_NOT_FOUND or AMBIGUOUS_ADDRESS."""
    needle = _normalize(address)
    exact = [d for d in state.destinations if needle in (_normalize(d["name"]), _normalize(d["address"]))]
    if exact:
        return exact[0]
    matches = [d for d in state.destinations if needle in _normalize(f"{d['name']} {d['address']}")]
    if not matches:
        raise NotFound(f"no known address matches {address!r}; give the full street address or coordinates",
                       reason="ADDRESS_NOT_FOUND", query=address)
    require(len(matches) == 1, f"{address!r} matches {len(matches)} places: "
            f"{'; '.join(d['name'] for d in matches[:5])}; be more specific", reason="AMBIGUOUS_ADDRESS",
            error=InvalidArgument, candidates=[d["name"] for d in matches[:5]])
    return matches[0]


def _normalize(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _require_reachable(vehicle: Record, route: Record) -> None:
    need = route["distance_km"]
    usable = round(_range_km(vehicle) - RANGE_RESERVE_PCT / 100 * _full_range_km(vehicle), 1)
    electric = vehicle["battery"] is not None
    require(need <= usable, f"{route['destination']['name']} is {need} km away but {vehicle['name']} has "
            f"{_range_km(vehicle)} km of range ({RANGE_RESERVE_PCT}% kept in reserve); "
            + ("charge first" if electric else "refuel first"),
            reason="BATTERY_TOO_LOW" if electric else "FUEL_TOO_LOW", distance_km=need, range_km=_range_km(vehicle))


def _open_session(state: VehicleState, vehicle_id: str) -> Record | None:
    return state.charging_sessions.first(vehicle_id=vehicle_id, status="charging")


def _finish_session(state: VehicleState, vehicle: Record, session: Record, reason: str) -> tuple[Record, Record]:
    """Close a charging session: add the energy delivered since it started (up to the limit)."""
    battery = vehicle["battery"]
    started = dt.datetime.fromisoformat(session["started_at"].replace("Z", "+00:00"))
    hours = (state.now() - started).total_seconds() / 3600
    room_kwh = max(0.0, (battery["charge_limit_pct"] - battery["level_pct"]) / 100 * battery["capacity_kwh"])
    added = round(min(session["charger_kw"] * hours, room_kwh), 2)
    level = round(battery["level_pct"] + added / battery["capacity_kwh"] * 100, 1)
    session = state.charging_sessions.update(session["id"], status="complete", ended_at=iso_datetime(state.now()),
                                             energy_added_kwh=added, end_level_pct=level, stop_reason=reason)
    vehicle = state.vehicles.update(vehicle["id"], battery={**battery, "level_pct": level, "charging": False})
    return vehicle, session


def _status(state: VehicleState, vehicle: Record) -> Record:
    """A vehicle as tools show it: its record plus derived facts (range, locks, motion)."""
    doors = vehicle["doors"]
    session = _open_session(state, vehicle["id"]) if vehicle["battery"] else None
    return {**vehicle, "vehicle_id": vehicle["id"], "moving": _moving(vehicle), "range_km": _range_km(vehicle),
            "all_locked": all(d["locked"] for d in doors.values()),
            "open_doors": [name for name, d in doors.items() if d["open"]],
            "charging_session_id": None if session is None else session["id"]}


def _summary(vehicle: Record) -> Record:
    energy = vehicle["battery"] or vehicle["fuel"]
    return {"vehicle_id": vehicle["id"], "name": vehicle["name"], "make": vehicle["make"], "model": vehicle["model"],
            "year": vehicle["year"], "powertrain": vehicle["powertrain"], "power_state": vehicle["power_state"],
            "gear": vehicle["gear"], "speed_kmh": vehicle["speed_kmh"], "energy_level_pct": energy["level_pct"],
            "range_km": _range_km(vehicle), "location": vehicle["location"]}


# -- examples: arguments valid on a fresh seed of any size -------------------------------------------


def _on_home_charger(s: VehicleState) -> Record:
    return s.vehicles.first(lambda v: v["battery"] is not None and v["battery"]["plugged_in"], power_state="awake")


def _driving(s: VehicleState) -> Record:
    return s.vehicles.first(lambda v: v["speed_kmh"] > 0)


def _asleep(s: VehicleState) -> Record:
    return s.vehicles.first(power_state="asleep") or s.vehicles.first(powertrain="gasoline")


def _low_battery(s: VehicleState) -> Record:
    return s.vehicles.first(lambda v: v["battery"] is not None and not v["battery"]["plugged_in"]
                            and v["speed_kmh"] == 0)


def _woken(s: VehicleState) -> Record:
    """The sleeping gasoline car, woken first (an example may prepare its state)."""
    vehicle = _asleep(s)
    wake_vehicle(s, vehicle["id"])
    return vehicle


def _ready_to_drive(s: VehicleState) -> Record:
    """The low-battery EV with its open door and trunk shut, so it can leave P."""
    vehicle = _low_battery(s)
    for door, state in s.vehicles.get(vehicle["id"])["doors"].items():
        if state["open"]:
            operate_door(s, vehicle["id"], door, "close")
    if s.vehicles.get(vehicle["id"])["trunk_open"]:
        operate_trunk(s, vehicle["id"], "close")
    return vehicle


def _with_climate_on(s: VehicleState) -> Record:
    vehicle = _on_home_charger(s)
    if not vehicle["climate"]["on"]:
        set_climate(s, vehicle["id"], on=True)
    return vehicle


def _charging(s: VehicleState) -> Record:
    vehicle = _on_home_charger(s)
    if not s.vehicles.get(vehicle["id"])["battery"]["charging"]:
        start_charging(s, vehicle["id"])
    return vehicle


def _id(vehicle: Record, **extra: Any) -> Record:
    return {"vehicle_id": vehicle["id"], **extra}


# -- how drivers ask, and what they choose -----------------------------------------------------------

NEARBY_DESTINATIONS = ("Office", "Ferry Building", "San Francisco International Airport", "Stanford Shopping Center",
                       "Santa Cruz Beach Boardwalk", "Napa Valley Welcome Center", "Supercharger Gilroy",
                       "535 Mission St, San Francisco, CA 94105", "1 Ferry Building, San Francisco, CA 94111",
                       "660 Stanford Shopping Center, Palo Alto, CA 94304", "Home")
CLIMATE_ASKS = {
    "on": {True: ("turn the climate on", "start the climate control", "switch the A/C on"),
           False: ("turn the climate off", "shut off the climate control", "switch the A/C off")},
    "target_temp_c": ("set it to {target_temp_c}°C", "make it {target_temp_c} degrees inside",
                      "set the cabin to {target_temp_c} degrees"),
    "fan_speed": ("set the fan to {fan_speed}", "put the fan on speed {fan_speed}",
                  "turn the fan to level {fan_speed}"),
    "front_defrost": {True: ("turn on the windshield defrost", "defrost the windshield", "clear the fogged windshield"),
                      False: ("turn off the windshield defrost", "stop defrosting the windshield",
                              "switch the front defrost off")},
    "rear_defrost": {True: ("turn on the rear defrost", "heat the rear window", "switch the rear window heater on"),
                     False: ("turn off the rear defrost", "stop heating the rear window",
                             "switch the rear window heater off")},
}
LIGHTS_ASKS = {
    "headlights": {"on": ("turn the headlights on", "switch on the headlights", "put the lights on"),
                   "off": ("turn the headlights off", "switch off the headlights", "kill the headlights"),
                   "auto": ("set the headlights to auto", "put the headlights on automatic",
                            "let the headlights switch on and off by themselves")},
    "hazards": {True: ("turn on the hazards", "switch the hazard lights on", "put the flashers on"),
                False: ("turn off the hazards", "switch the hazard lights off", "stop the flashers")},
}


def _phrased(asks: dict[str, Any], a: Any, fallback: tuple[str, ...]) -> tuple[str, ...]:
    """One phrase per setting the call gives (worded by its value where the wording depends on it),
    joined into three requests; ``fallback`` when none is given."""
    parts = [p[a[key]] if isinstance(p, dict) else p for key, p in asks.items() if a.get(key) is not None]
    if not parts:
        return fallback
    joined = [", ".join(p[i] for p in parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1][i]
              for i in range(3)]
    return (f"{joined[0]} in {{vehicle_id}}", f"in {{vehicle_id}}, {joined[1]}", joined[2])


# -- the server and its tools --------------------------------------------------------------------------

server = Server(
    "vehicle",
    sensitive=("vin",),  # identifies the car and its owner; nobody asks for it read back
    domain="IoT",
    description="Connected-car control for a household's vehicles, gated by driving mode: status, wake, gear "
    "and speed, doors, windows, trunk, climate and seat heaters, charging or fuel, navigation, lights and horn.",
    state=VehicleState,
    seed=build_vehicles,
    options=VehicleOptions,
)


@server.tool(
    answers=("power_state", "energy_level_pct", "range_km"),
    read_only=True,
    reads=["vehicle"],
    examples=[{}],
    asks=("list our cars", "show all the vehicles in the household",
          "show me where each of our cars is and how much charge or fuel it has",
          "give me an overview of our vehicles"),
)
def list_vehicles(state: VehicleState) -> dict:
    """The household's vehicles: vehicle_id, nickname, make, model, year, powertrain (electric or
    gasoline), power state (awake or asleep), gear, speed, battery or fuel level, range and
    location."""
    return {"vehicles": [_summary(v) for v in state.vehicles]}


@server.tool(
    answers=("power_state", "gear", "level_pct", "range_km", "all_locked"),
    read_only=True,
    reads=["vehicle", "charging_session"],
    errors=["VEHICLE_NOT_FOUND"],
    examples=[lambda s: _id(s.vehicles.first()), lambda s: _id(_driving(s))],
    asks=("show the status of {vehicle_id}", "check on {vehicle_id}", "tell me everything about {vehicle_id} right now",
          "check whether {vehicle_id} is locked and how much range it has"),
)
def get_vehicle_status(state: VehicleState, vehicle_id: VehicleId) -> dict:
    """Everything about one vehicle (a sleeping one reports its last known state): gear, speed,
    location, each door's lock and open state, window positions (0 closed - 100 open), trunk,
    climate and seat heaters, lights, battery (level, charge limit, plugged in, charging,
    charging_session_id) or fuel, range_km, the active navigation route and odometer. Fails
    with VEHICLE_NOT_FOUND."""
    return _status(state, state.vehicles.get(vehicle_id))


@server.tool(
    idempotent=True,  # waking an awake vehicle changes nothing
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND"],
    examples=[lambda s: _id(_asleep(s))],
    asks=("wake up {vehicle_id}", "wake {vehicle_id} so it takes commands", "get {vehicle_id} out of sleep mode"),
)
def wake_vehicle(state: VehicleState, vehicle_id: VehicleId) -> dict:
    """Wake a sleeping vehicle so it accepts commands (an awake one is returned unchanged).
    Returns its power state and status. Fails with VEHICLE_NOT_FOUND."""
    vehicle = state.vehicles.update(vehicle_id, power_state="awake")
    return _status(state, vehicle)


@server.tool(
    idempotent=True,  # shifting into the current gear changes nothing
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "SPEED_TOO_HIGH", "CHARGE_CABLE_CONNECTED", "DOOR_OPEN",
            "TRUNK_OPEN"],
    examples=[lambda s: _id(_driving(s), gear="N"), lambda s: _id(_ready_to_drive(s), gear="D")],
    asks=("shift {vehicle_id} into {gear}", "put {vehicle_id} in {gear}", "change gear to {gear}",
          "move the gear selector of {vehicle_id} to {gear}"),
)
def shift_gear(
    state: VehicleState,
    vehicle_id: VehicleId,
    gear: Annotated[Gear, Field(description="P (park), R (reverse), N (neutral) or D (drive).")],
) -> dict:
    """Shift gear. Returns the gear and speed. Fails with SPEED_TOO_HIGH (P or R above 5 km/h:
    slow down with set_cruise_speed 0 first), CHARGE_CABLE_CONNECTED (leaving P while plugged
    in), DOOR_OPEN or TRUNK_OPEN (leaving P with a door or the trunk open) or VEHICLE_ASLEEP.
    Shifting to P brings a vehicle at walking pace to a stop."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    if gear == vehicle["gear"]:
        return {"vehicle_id": vehicle_id, "gear": gear, "speed_kmh": vehicle["speed_kmh"]}
    if gear in ("P", "R"):
        require(vehicle["speed_kmh"] <= PARK_MAX_SPEED_KMH, f"cannot shift to {gear} at {vehicle['speed_kmh']} km/h; "
                f"slow to {PARK_MAX_SPEED_KMH} km/h or less first", reason="SPEED_TOO_HIGH",
                speed_kmh=vehicle["speed_kmh"])
    if vehicle["gear"] == "P":
        require(not (vehicle["battery"] and vehicle["battery"]["plugged_in"]), f"{vehicle['name']} is plugged in; "
                "unplug the charge cable before driving", reason="CHARGE_CABLE_CONNECTED")
        open_doors = [name for name, d in vehicle["doors"].items() if d["open"]]
        require(not open_doors, f"close the {', '.join(open_doors)} door(s) before leaving park", reason="DOOR_OPEN",
                open_doors=open_doors)
        require(not vehicle["trunk_open"], "close the trunk before leaving park", reason="TRUNK_OPEN")
    speed = 0 if gear in ("P", "R") else vehicle["speed_kmh"]
    state.vehicles.update(vehicle_id, gear=gear, speed_kmh=speed)
    return {"vehicle_id": vehicle_id, "gear": gear, "speed_kmh": speed}


@server.tool(
    idempotent=True,
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "NOT_IN_DRIVE", "DOOR_OPEN", "TRUNK_OPEN",
            "WINDOW_LIMITED_AT_SPEED"],
    examples=[lambda s: _id(_driving(s), speed_kmh=70), lambda s: _id(_driving(s), speed_kmh=0)],
    asks=lambda a: (
        ("bring {vehicle_id} down to {speed_kmh} km/h and stop", "slow {vehicle_id} to {speed_kmh} km/h, a full stop",
         "set the target speed of {vehicle_id} to {speed_kmh} so it stops") if a.get("speed_kmh") == 0
        else ("set the cruise speed of {vehicle_id} to {speed_kmh} km/h", "cruise at {speed_kmh} km/h",
              "change the target speed to {speed_kmh} km/h", "hold {vehicle_id} at {speed_kmh} km/h")),
    values={"speed_kmh": lambda rng, s: rng.choice((40, 50, 60, 70, 80, 90, 100, 110))},
)
def set_cruise_speed(
    state: VehicleState,
    vehicle_id: VehicleId,
    speed_kmh: Annotated[int, Field(ge=0, le=130, description="Target speed in km/h; 0 brings the vehicle to a stop.")],
) -> dict:
    """Set the driver-assist target speed; the vehicle accelerates or brakes to it (0 stops it).
    Returns the new speed. Fails with NOT_IN_DRIVE (shift to D first), DOOR_OPEN or TRUNK_OPEN
    (to move at all), WINDOW_LIMITED_AT_SPEED (above 80 km/h with a window more than half open)
    or VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    require(vehicle["gear"] == "D", f"{vehicle['name']} is in {vehicle['gear']}; shift to D first",
            reason="NOT_IN_DRIVE", gear=vehicle["gear"])
    if speed_kmh > 0:
        open_doors = [name for name, d in vehicle["doors"].items() if d["open"]]
        require(not open_doors, f"close the {', '.join(open_doors)} door(s) first", reason="DOOR_OPEN",
                open_doors=open_doors)
        require(not vehicle["trunk_open"], "close the trunk first", reason="TRUNK_OPEN")
    if speed_kmh > WINDOW_SPEED_KMH:
        wide = [w for w, pct in vehicle["windows"].items() if pct > WINDOW_MAX_AT_SPEED]
        require(not wide, f"above {WINDOW_SPEED_KMH} km/h windows open at most {WINDOW_MAX_AT_SPEED}%; close "
                f"{', '.join(wide)} first", reason="WINDOW_LIMITED_AT_SPEED", windows=wide)
    state.vehicles.update(vehicle_id, speed_kmh=speed_kmh)
    return {"vehicle_id": vehicle_id, "gear": "D", "speed_kmh": speed_kmh, "moving": speed_kmh > 0}


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_LOCKED
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "DOOR_OPEN", "ALREADY_LOCKED"],
    examples=[lambda s: _id(_on_home_charger(s))],
    asks=("lock {vehicle_id}", "lock all the doors of {vehicle_id}", "lock up {vehicle_id}",
          "make sure {vehicle_id} is locked"),
)
def lock_doors(state: VehicleState, vehicle_id: VehicleId) -> dict:
    """Lock all doors (central locking). Returns each door's state. Fails with DOOR_OPEN (close it
    with operate_door first), ALREADY_LOCKED or VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    open_doors = [name for name, d in vehicle["doors"].items() if d["open"]]
    require(not open_doors, f"the {', '.join(open_doors)} door(s) are open; close them first", reason="DOOR_OPEN",
            open_doors=open_doors)
    if all(d["locked"] for d in vehicle["doors"].values()):
        raise Conflict(f"{vehicle['name']} is already locked", reason="ALREADY_LOCKED")
    doors = {name: {**d, "locked": True} for name, d in vehicle["doors"].items()}
    state.vehicles.update(vehicle_id, doors=doors)
    return {"vehicle_id": vehicle_id, "doors": doors, "all_locked": True}


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_UNLOCKED
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "UNSAFE_WHILE_DRIVING", "ALREADY_UNLOCKED"],
    examples=[lambda s: _id(_woken(s)), lambda s: _id(_woken(s), door="driver_front")],
    asks=lambda a: (
        ("unlock {vehicle_id}", "unlock all the doors of {vehicle_id}", "open up the locks on {vehicle_id}")
        if a.get("door", "all") == "all"
        else ("unlock the {door} door of {vehicle_id}", "unlock just the {door} door",
              "release the lock on the {door} door of {vehicle_id}")),
    values={"door": lambda rng, s: rng.choice(DOORS)},
)
def unlock_doors(
    state: VehicleState,
    vehicle_id: VehicleId,
    door: Annotated[Door | Literal["all"], Field(description="One door, or all of them.")] = "all",
) -> dict:
    """Unlock all doors or one. Returns each door's state. Fails with UNSAFE_WHILE_DRIVING (never
    while the vehicle moves), ALREADY_UNLOCKED or VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    _not_moving(vehicle, "unlock doors")
    targets = DOORS if door == "all" else (door,)
    if not any(vehicle["doors"][name]["locked"] for name in targets):
        raise Conflict(f"{'all doors are' if door == 'all' else f'the {door} door is'} already unlocked",
                       reason="ALREADY_UNLOCKED")
    doors = {name: {**d, "locked": False} if name in targets else d for name, d in vehicle["doors"].items()}
    state.vehicles.update(vehicle_id, doors=doors)
    return {"vehicle_id": vehicle_id, "doors": doors, "all_locked": all(d["locked"] for d in doors.values())}


@server.tool(
    idempotent=True,  # a repeat is refused with DOOR_ALREADY_OPEN / DOOR_ALREADY_CLOSED
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "UNSAFE_WHILE_DRIVING", "DOOR_LOCKED", "DOOR_ALREADY_OPEN",
            "DOOR_ALREADY_CLOSED"],
    examples=[lambda s: _id(_low_battery(s), door="rear_left", action="close"),
              lambda s: _id(_on_home_charger(s), door="passenger_front", action="open")],
    asks=("{action} the {door} door of {vehicle_id}", "{action} the {door} door",
          "remotely {action} the {door} door on {vehicle_id}", "{action} the {door} door for me"),
)
def operate_door(
    state: VehicleState,
    vehicle_id: VehicleId,
    door: Annotated[Door, Field(description="Which door.")],
    action: Annotated[Literal["open", "close"], Field(description="Open or close the power door.")],
) -> dict:
    """Open or close one power door. Returns the door's state. Opening fails with
    UNSAFE_WHILE_DRIVING (while moving), DOOR_LOCKED (unlock_doors first) or DOOR_ALREADY_OPEN;
    closing an already closed door fails with DOOR_ALREADY_CLOSED. Fails with VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    current = vehicle["doors"][door]
    if action == "open":
        _not_moving(vehicle, "open a door")
        require(not current["locked"], f"the {door} door is locked; unlock it first", reason="DOOR_LOCKED")
        if current["open"]:
            raise Conflict(f"the {door} door is already open", reason="DOOR_ALREADY_OPEN")
    elif not current["open"]:
        raise Conflict(f"the {door} door is already closed", reason="DOOR_ALREADY_CLOSED")
    updated = {**current, "open": action == "open"}
    state.vehicles.update(vehicle_id, doors={**vehicle["doors"], door: updated})
    return {"vehicle_id": vehicle_id, "door": door, **updated}


@server.tool(
    idempotent=True,  # the same position again changes nothing
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "WINDOW_LIMITED_AT_SPEED"],
    examples=[lambda s: _id(_on_home_charger(s), window="driver_front", position_pct=40),
              lambda s: _id(_driving(s), window="all", position_pct=20)],
    asks=lambda a: (
        ("set {window} the windows of {vehicle_id} to {position_pct}% open", "put {window} windows at {position_pct}%",
         "move {window} the windows to {position_pct} percent open") if a.get("window") == "all"
        else ("set the {window} window of {vehicle_id} to {position_pct}% open",
              "put the {window} window at {position_pct}%", "move the {window} window to {position_pct} percent open")),
    values={"window": lambda rng, s: rng.choice(("all", *DOORS)),
            "position_pct": lambda rng, s: rng.choice((10, 20, 25, 30, 40, 50))},
)
def set_window(
    state: VehicleState,
    vehicle_id: VehicleId,
    window: Annotated[Door | Literal["all"], Field(description="Which window (named after its door), or all.")],
    position_pct: Annotated[int, Field(ge=0, le=100, description="0 = closed, 100 = fully open.")],
) -> dict:
    """Move one window or all to a position. Returns every window's position. Fails with
    WINDOW_LIMITED_AT_SPEED (above 80 km/h a window opens at most 50%) or VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    if vehicle["speed_kmh"] > WINDOW_SPEED_KMH:
        require(position_pct <= WINDOW_MAX_AT_SPEED, f"at {vehicle['speed_kmh']} km/h windows open at most "
                f"{WINDOW_MAX_AT_SPEED}%", reason="WINDOW_LIMITED_AT_SPEED", max_pct=WINDOW_MAX_AT_SPEED)
    targets = DOORS if window == "all" else (window,)
    windows = {name: position_pct if name in targets else pct for name, pct in vehicle["windows"].items()}
    state.vehicles.update(vehicle_id, windows=windows)
    return {"vehicle_id": vehicle_id, "windows": windows}


@server.tool(
    idempotent=True,
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "NOTHING_TO_CHANGE", "BATTERY_TOO_LOW", "DOORS_NOT_LOCKED"],
    examples=[lambda s: _id(_on_home_charger(s), on=True, target_temp_c=21.5),
              lambda s: _id(_woken(s), on=True, front_defrost=True)],
    asks=lambda a: _phrased(CLIMATE_ASKS, a, ("set the cabin of {vehicle_id} to {target_temp_c} degrees",
                                              "make it {target_temp_c}°C in {vehicle_id}",
                                              "warm or cool the car to {target_temp_c} degrees")),
    values={"target_temp_c": lambda rng, s: rng.choice((18.0, 19.0, 20.0, 20.5, 21.0, 21.5, 22.0, 23.0, 24.0)),
            "fan_speed": lambda rng, s: rng.choice((1, 2, 3, 4, 5))},
)
def set_climate(
    state: VehicleState,
    vehicle_id: VehicleId,
    on: Annotated[bool | None, Field(description="Turn the climate system on or off.")] = None,
    target_temp_c: Annotated[float | None, Field(ge=15, le=28, multiple_of=0.5,
                                                 description="Cabin temperature in °C (15-28, half degrees).")] = None,
    fan_speed: Annotated[int | None, Field(ge=1, le=MAX_FAN_SPEED, description="Fan speed 1-7.")] = None,
    front_defrost: Annotated[bool | None, Field(description="Windshield defrost (climate on at full fan).")] = None,
    rear_defrost: Annotated[bool | None, Field(description="Rear window heater.")] = None,
) -> dict:
    """Change climate settings; only the given ones change. Front defrost turns the climate on at
    full fan; turning the climate off also turns off defrost and seat heaters. Returns the
    climate state. Fails with NOTHING_TO_CHANGE (no setting given), BATTERY_TOO_LOW (an unplugged
    EV below 10% keeps its charge for driving), DOORS_NOT_LOCKED (a parked gasoline car runs its
    engine for climate only when locked and closed) or VEHICLE_ASLEEP."""
    require(any(v is not None for v in (on, target_temp_c, fan_speed, front_defrost, rear_defrost)),
            "give at least one climate setting", reason="NOTHING_TO_CHANGE", error=InvalidArgument)
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    climate = dict(vehicle["climate"])
    updates = {k: v for k, v in (("on", on), ("target_temp_c", target_temp_c), ("fan_speed", fan_speed),
                                 ("front_defrost", front_defrost), ("rear_defrost", rear_defrost)) if v is not None}
    climate.update(updates)
    if front_defrost:
        climate.update(on=True, fan_speed=MAX_FAN_SPEED)
    if climate["on"] and climate["fan_speed"] == 0:
        climate["fan_speed"] = 3
    heaters = vehicle["seat_heaters"]
    if not climate["on"]:
        climate.update(front_defrost=False, rear_defrost=False, fan_speed=0)
        heaters = dict.fromkeys(heaters, 0)
    elif not vehicle["climate"]["on"]:  # switching on: check what it costs
        battery = vehicle["battery"]
        if battery is not None:
            require(battery["plugged_in"] or battery["level_pct"] >= CLIMATE_MIN_BATTERY_PCT,
                    f"battery at {battery['level_pct']}%: climate needs {CLIMATE_MIN_BATTERY_PCT}% unless plugged in",
                    reason="BATTERY_TOO_LOW", level_pct=battery["level_pct"])
        elif vehicle["gear"] == "P":
            secured = all(d["locked"] and not d["open"] for d in vehicle["doors"].values())
            require(secured, "remote climate runs the engine: lock and close all doors first",
                    reason="DOORS_NOT_LOCKED")
    state.vehicles.update(vehicle_id, climate=climate, seat_heaters=heaters)
    return {"vehicle_id": vehicle_id, "climate": climate, "seat_heaters": heaters}


@server.tool(
    idempotent=True,
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "SEAT_HEATER_NOT_AVAILABLE", "CLIMATE_OFF"],
    examples=[lambda s: _id(_with_climate_on(s), seat="driver", level=2)],
    asks=("set the {seat} seat heater to level {level}", "warm the {seat} seat in {vehicle_id} to level {level}",
          "put the {seat} seat heat at {level} in {vehicle_id}", "turn the {seat} seat heater to {level} out of 3"),
    values={"level": lambda rng, s: rng.choice((1, 2, 3))},
)
def set_seat_heater(
    state: VehicleState,
    vehicle_id: VehicleId,
    seat: Annotated[Seat, Field(description="Which seat.")],
    level: Annotated[int, Field(ge=0, le=3, description="Heat level: 0 off, 1 low, 2 medium, 3 high.")],
) -> dict:
    """Set one seat heater's level. Returns all seat heater levels. Fails with CLIMATE_OFF (turn the
    climate on first to heat a seat), SEAT_HEATER_NOT_AVAILABLE (this model has no heater in that
    seat) or VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    require(seat in vehicle["seat_heaters"], f"the {vehicle['make']} {vehicle['model']} has no {seat} seat heater",
            reason="SEAT_HEATER_NOT_AVAILABLE", seats=sorted(vehicle["seat_heaters"]))
    require(level == 0 or vehicle["climate"]["on"], "seat heaters run with the climate system: turn it on with "
            "set_climate first", reason="CLIMATE_OFF")
    heaters = {**vehicle["seat_heaters"], seat: level}
    state.vehicles.update(vehicle_id, seat_heaters=heaters)
    return {"vehicle_id": vehicle_id, "seat_heaters": heaters}


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_CHARGING
    reads=["vehicle", "charging_session"],
    produces=["charging_session"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "CHARGING_NOT_SUPPORTED", "UNSAFE_WHILE_DRIVING", "NOT_PLUGGED_IN",
            "ALREADY_CHARGING", "CHARGE_LIMIT_REACHED"],
    examples=[lambda s: _id(_on_home_charger(s))],
    asks=("start charging {vehicle_id}", "begin a charging session on {vehicle_id}", "charge {vehicle_id} now",
          "get {vehicle_id} charging"),
)
def start_charging(state: VehicleState, vehicle_id: VehicleId) -> dict:
    """Start charging an electric vehicle that is parked (P) and plugged in; it charges up to its
    charge limit. Returns the charging session (charging_session_id, charger power, start level)
    and the minutes to reach the limit. Fails with NOT_PLUGGED_IN, UNSAFE_WHILE_DRIVING (only in
    P), ALREADY_CHARGING, CHARGE_LIMIT_REACHED (raise the limit first), CHARGING_NOT_SUPPORTED
    (gasoline) or VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    battery = _battery(vehicle)
    require(vehicle["gear"] == "P" and not _moving(vehicle), f"{vehicle['name']} is in {vehicle['gear']}: charge only "
            "while parked in P", reason="UNSAFE_WHILE_DRIVING", gear=vehicle["gear"])
    require(battery["plugged_in"], f"{vehicle['name']} is not plugged in; connect the charge cable first",
            reason="NOT_PLUGGED_IN")
    if battery["charging"]:
        raise Conflict(f"{vehicle['name']} is already charging", reason="ALREADY_CHARGING",
                       charging_session_id=_open_session(state, vehicle_id)["id"])
    require(battery["level_pct"] < battery["charge_limit_pct"], f"battery at {battery['level_pct']}% already reached "
            f"its {battery['charge_limit_pct']}% limit; raise it with set_charge_limit", reason="CHARGE_LIMIT_REACHED")
    state.vehicles.update(vehicle_id, battery={**battery, "charging": True})
    session = state.charging_sessions.insert({
        "vehicle_id": vehicle_id, "status": "charging", "charger_kw": battery["charger_kw"],
        "started_at": iso_datetime(state.now()), "start_level_pct": battery["level_pct"],
        "target_level_pct": battery["charge_limit_pct"], "ended_at": None, "energy_added_kwh": None,
        "end_level_pct": None, "stop_reason": None,
    })
    kwh = (battery["charge_limit_pct"] - battery["level_pct"]) / 100 * battery["capacity_kwh"]
    return {"charging_session_id": session["id"], **session,
            "minutes_to_limit": round(kwh / battery["charger_kw"] * 60)}


@server.tool(
    idempotent=True,  # a repeat is refused with NOT_CHARGING
    reads=["vehicle", "charging_session"],
    mutates=["vehicle", "charging_session"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "CHARGING_NOT_SUPPORTED", "NOT_CHARGING"],
    examples=[lambda s: _id(_charging(s))],
    asks=("stop charging {vehicle_id}", "end the charging session of {vehicle_id}", "cut the charge on {vehicle_id}"),
)
def stop_charging(state: VehicleState, vehicle_id: VehicleId) -> dict:
    """Stop charging. Returns the finished session (energy added in kWh, end level) and the new
    battery level. Fails with NOT_CHARGING, CHARGING_NOT_SUPPORTED or VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    battery = _battery(vehicle)
    session = _open_session(state, vehicle_id)
    require(battery["charging"] and session is not None, f"{vehicle['name']} is not charging", reason="NOT_CHARGING")
    vehicle, session = _finish_session(state, vehicle, session, "stopped")
    return {"charging_session_id": session["id"], **session, "battery": vehicle["battery"]}


@server.tool(
    idempotent=True,
    reads=["vehicle", "charging_session"],
    mutates=["vehicle", "charging_session"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "CHARGING_NOT_SUPPORTED", "CHARGE_LIMIT_OUT_OF_RANGE"],
    examples=[lambda s: _id(_on_home_charger(s), limit_pct=90)],
    asks=("set the charge limit of {vehicle_id} to {limit_pct}%", "charge {vehicle_id} up to {limit_pct}% from now on",
          "cap charging at {limit_pct}%", "change the max charge of {vehicle_id} to {limit_pct} percent"),
    values={"limit_pct": lambda rng, s: rng.choice((60, 70, 80, 85, 90, 95, 100))},
)
def set_charge_limit(
    state: VehicleState,
    vehicle_id: VehicleId,
    limit_pct: Annotated[int, Field(ge=0, le=100, description="Charge limit as a percentage (allowed: 50-100).")],
) -> dict:
    """Set the level charging stops at. A limit at or below the current level ends a running
    charging session. Returns the battery. Fails with CHARGE_LIMIT_OUT_OF_RANGE (outside 50-100%),
    CHARGING_NOT_SUPPORTED or VEHICLE_ASLEEP."""
    low, high = CHARGE_LIMIT_RANGE
    require(low <= limit_pct <= high, f"a charge limit must be between {low}% and {high}%, got {limit_pct}%",
            reason="CHARGE_LIMIT_OUT_OF_RANGE", error=InvalidArgument, min_pct=low, max_pct=high)
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    battery = _battery(vehicle)
    vehicle = state.vehicles.update(vehicle_id, battery={**battery, "charge_limit_pct": limit_pct})
    session = _open_session(state, vehicle_id)
    if session is not None:
        if limit_pct <= battery["level_pct"]:
            vehicle, _ = _finish_session(state, vehicle, session, "limit_reached")
        else:
            state.charging_sessions.update(session["id"], target_level_pct=limit_pct)
    return {"vehicle_id": vehicle_id, "battery": vehicle["battery"]}


@server.tool(
    idempotent=True,  # the same destination again changes nothing
    reads=["vehicle", "destination"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "DESTINATION_REQUIRED", "ADDRESS_NOT_FOUND", "AMBIGUOUS_ADDRESS",
            "BATTERY_TOO_LOW", "FUEL_TOO_LOW"],
    examples=[lambda s: _id(_on_home_charger(s), address="Ferry Building"),
              lambda s: _id(_on_home_charger(s), latitude=37.8199, longitude=-122.4783)],
    asks=lambda a: (
        ("navigate {vehicle_id} to {latitude}, {longitude}", "set the destination to the coordinates {latitude}, "
         "{longitude}", "route me to latitude {latitude}, longitude {longitude}") if a.get("latitude") is not None
        else ("navigate {vehicle_id} to {address}", "set the destination to {address}", "take me to {address}",
              "start directions to {address} in {vehicle_id}")),
    values={"address": lambda rng, s: rng.choice(NEARBY_DESTINATIONS),
            "latitude": lambda rng, s: round(rng.uniform(37.72, 37.81), 4),
            "longitude": lambda rng, s: round(rng.uniform(-122.50, -122.39), 4)},
)
def set_destination(
    state: VehicleState,
    vehicle_id: VehicleId,
    address: Annotated[str | None, Field(min_length=2, max_length=200, description="A street address or a known "
                                                                                   "place name.")] = None,
    latitude: Latitude = None,
    longitude: Longitude = None,
) -> dict:
    """Start navigation to an address or to coordinates (give one or the other). Returns the route:
    destination, road distance and the battery or fuel left on arrival. Fails with
    DESTINATION_REQUIRED (neither or both, or half a coordinate pair), ADDRESS_NOT_FOUND,
    AMBIGUOUS_ADDRESS (several matches: be more specific), BATTERY_TOO_LOW or FUEL_TOO_LOW (the
    range, keeping a 5% reserve, cannot reach it: charge or refuel first) or VEHICLE_ASLEEP."""
    by_address = address is not None and latitude is None and longitude is None
    by_coordinates = address is None and latitude is not None and longitude is not None
    require(by_address or by_coordinates, "give either an address or both latitude and longitude",
            reason="DESTINATION_REQUIRED", error=InvalidArgument)
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    if address is not None:
        target = _find_destination(state, address)
    else:
        target = {"name": f"{latitude:.5f},{longitude:.5f}", "address": None, "lat": latitude, "lon": longitude}
    route = _route(state, vehicle, target)
    current = vehicle["navigation"]
    if current is not None and current["destination"] == route["destination"]:
        return {"vehicle_id": vehicle_id, "navigation": current}
    _require_reachable(vehicle, route)
    state.vehicles.update(vehicle_id, navigation=route)
    return {"vehicle_id": vehicle_id, "navigation": route}


@server.tool(
    answers=("eta", "distance_km", "duration_min", "arrival_energy_pct"),
    read_only=True,
    reads=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "NO_ACTIVE_ROUTE"],
    examples=[lambda s: _id(_driving(s))],
    asks=("tell me when {vehicle_id} will arrive", "show the ETA of {vehicle_id}",
          "check how far {vehicle_id} still has to go",
          "tell me how much energy {vehicle_id} will have when it gets there"),
)
def get_route_eta(state: VehicleState, vehicle_id: VehicleId) -> dict:
    """The active route's remaining distance, duration, estimated arrival time (UTC) and the
    battery or fuel level on arrival. Fails with NO_ACTIVE_ROUTE (set_destination first)."""
    vehicle = state.vehicles.get(vehicle_id)
    route = vehicle["navigation"]
    require(route is not None, f"{vehicle['name']} has no active route", reason="NO_ACTIVE_ROUTE")
    average = 70.0 if route["distance_km"] > 30 else 35.0  # freeway or city
    minutes = round(route["distance_km"] / average * 60)
    return {"vehicle_id": vehicle_id, "destination": route["destination"], "distance_km": route["distance_km"],
            "duration_min": minutes, "eta": iso_datetime(state.now() + dt.timedelta(minutes=minutes)),
            "arrival_energy_pct": route["arrival_energy_pct"]}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with NO_ACTIVE_ROUTE
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "NO_ACTIVE_ROUTE"],
    examples=[lambda s: _id(_driving(s))],
    asks=("cancel the navigation in {vehicle_id}", "stop the route on {vehicle_id}", "end navigation",
          "clear the destination in {vehicle_id}"),
)
def cancel_navigation(state: VehicleState, vehicle_id: VehicleId) -> dict:
    """End the active navigation route. Returns the cancelled route. Fails with NO_ACTIVE_ROUTE or
    VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    require(vehicle["navigation"] is not None, f"{vehicle['name']} has no active route", reason="NO_ACTIVE_ROUTE")
    state.vehicles.update(vehicle_id, navigation=None)
    return {"vehicle_id": vehicle_id, "cancelled": vehicle["navigation"]}


@server.tool(
    idempotent=True,  # a repeat is refused with TRUNK_ALREADY_OPEN / TRUNK_ALREADY_CLOSED
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "UNSAFE_WHILE_DRIVING", "TRUNK_ALREADY_OPEN",
            "TRUNK_ALREADY_CLOSED"],
    examples=[lambda s: _id(_low_battery(s), action="close"), lambda s: _id(_on_home_charger(s), action="open")],
    asks=("{action} the trunk of {vehicle_id}", "{action} the trunk", "remotely {action} the trunk on {vehicle_id}",
          "{action} the rear hatch of {vehicle_id}"),
)
def operate_trunk(
    state: VehicleState,
    vehicle_id: VehicleId,
    action: Annotated[Literal["open", "close"], Field(description="Open or close the power trunk.")],
) -> dict:
    """Open or close the power trunk (it opens even when the doors are locked). Returns the trunk
    state. Fails with UNSAFE_WHILE_DRIVING (no opening while moving), TRUNK_ALREADY_OPEN,
    TRUNK_ALREADY_CLOSED or VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    if action == "open":
        _not_moving(vehicle, "open the trunk")
        if vehicle["trunk_open"]:
            raise Conflict("the trunk is already open", reason="TRUNK_ALREADY_OPEN")
    elif not vehicle["trunk_open"]:
        raise Conflict("the trunk is already closed", reason="TRUNK_ALREADY_CLOSED")
    state.vehicles.update(vehicle_id, trunk_open=action == "open")
    return {"vehicle_id": vehicle_id, "trunk_open": action == "open"}


@server.tool(
    idempotent=True,
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "NOTHING_TO_CHANGE", "UNSAFE_WHILE_DRIVING"],
    examples=[lambda s: _id(_driving(s), headlights="on"), lambda s: _id(_on_home_charger(s), hazards=True)],
    asks=lambda a: _phrased(LIGHTS_ASKS, a, ("set the headlights of {vehicle_id} to {headlights}",
                                             "switch the headlights of {vehicle_id} to {headlights}",
                                             "change the headlight mode to {headlights}")),
)
def set_lights(
    state: VehicleState,
    vehicle_id: VehicleId,
    headlights: Annotated[Headlights | None, Field(description="Headlight mode: off, auto or on.")] = None,
    hazards: Annotated[bool | None, Field(description="Hazard warning lights on or off.")] = None,
) -> dict:
    """Set the headlight mode and/or the hazard lights. Returns the lights. Fails with
    UNSAFE_WHILE_DRIVING (headlights cannot be switched off while moving: use auto),
    NOTHING_TO_CHANGE or VEHICLE_ASLEEP."""
    require(headlights is not None or hazards is not None, "give headlights and/or hazards",
            reason="NOTHING_TO_CHANGE", error=InvalidArgument)
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    if headlights == "off":
        _not_moving(vehicle, "switch the headlights off")
    lights = {**vehicle["lights"], **{k: v for k, v in (("headlights", headlights), ("hazards", hazards))
                                      if v is not None}}
    state.vehicles.update(vehicle_id, lights=lights)
    return {"vehicle_id": vehicle_id, "lights": lights}


@server.tool(
    reads=["vehicle"],
    mutates=["vehicle"],
    errors=["VEHICLE_NOT_FOUND", "VEHICLE_ASLEEP", "UNSAFE_WHILE_DRIVING"],
    examples=[lambda s: _id(_on_home_charger(s)), lambda s: _id(_on_home_charger(s), flash_lights=False)],
    asks=lambda a: (
        ("honk the horn of {vehicle_id} without flashing the lights", "just sound the horn on {vehicle_id}, no lights",
         "beep {vehicle_id} but keep the lights off") if a.get("flash_lights") is False
        else ("honk the horn of {vehicle_id}", "beep and flash {vehicle_id} so I can find it",
              "help me find {vehicle_id} in the car park by honking", "sound the horn on {vehicle_id}")),
)
def honk_horn(
    state: VehicleState,
    vehicle_id: VehicleId,
    flash_lights: Annotated[bool, Field(description="Also flash the lights, to find the car in a car park.")] = True,
) -> dict:
    """Honk the horn (and flash the lights) to find a parked vehicle. Returns when it honked.
    Fails with UNSAFE_WHILE_DRIVING (the remote horn is off while the vehicle moves) or
    VEHICLE_ASLEEP."""
    vehicle = state.vehicles.get(vehicle_id)
    _awake(vehicle)
    _not_moving(vehicle, "sound the remote horn")
    honked = iso_datetime(state.now())
    state.vehicles.update(vehicle_id, last_horn_at=honked)
    return {"vehicle_id": vehicle_id, "honked_at": honked, "flashed_lights": flash_lights,
            "location": vehicle["location"]}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
