"""iot_devices — a smart-home hub: homes, rooms, devices and their states, scenes, schedules,
automations and firmware.

One signed-in owner with one or more homes. Each home has rooms; every device sits in one room
and is one of nine types (lights, smart plugs, thermostats, locks, cameras and four kinds of
sensor). What a device can do is its model's ``capabilities``: asking a lock for a brightness is
UNSUPPORTED_CAPABILITY, a device that lost its connection is DEVICE_OFFLINE for every command,
a thermostat refuses setpoints outside its model's range (SETPOINT_OUT_OF_RANGE) and a jammed
lock refuses to turn (LOCK_JAMMED).

Actions — the one vocabulary schedules and automations share (``turn_on``, ``set_brightness``,
``lock`` ...) — go through the same checks as the direct commands. Schedules run on the hub's
clock, which is the session clock (UTC): ``run_due_schedules`` runs every schedule whose
``next_run_at`` has come. Automations are edge-triggered: ``evaluate_automations`` fires an
automation when its trigger condition holds on the current readings and did not hold (or was
not yet seen) at the previous evaluation; the evaluation repeats until nothing more fires, so a
second evaluation with no new readings changes nothing. An automation may never end up
triggering itself, directly or through other automations (AUTOMATION_LOOP).
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
    InvalidArgument,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    ToolError,
    fake,
    iso_datetime,
    ref,
    require,
)

# -- vocabulary -----------------------------------------------------------------------------------

DeviceType = Literal[
    "light", "plug", "thermostat", "lock", "camera",
    "temperature_sensor", "motion_sensor", "contact_sensor", "smoke_detector",
]
SENSOR_TYPES = frozenset({"temperature_sensor", "motion_sensor", "contact_sensor", "smoke_detector"})
ThermostatMode = Literal["heat", "cool", "auto", "off"]
RecordingMode = Literal["off", "motion_only", "continuous"]
Sensitivity = Literal["low", "medium", "high"]
Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
ActionName = Literal[
    "turn_on", "turn_off", "set_brightness", "set_color_temperature",
    "set_heat_setpoint", "set_cool_setpoint", "lock", "unlock",
]
TriggerName = Literal[
    "temperature_above", "temperature_below", "motion_detected", "motion_cleared", "opened", "closed",
    "smoke_detected", "turned_on", "turned_off", "locked", "unlocked",
]

MAX_ROOMS_PER_HOME = 20
MAX_SCENES_PER_HOME = 20
MAX_SCHEDULES_PER_DEVICE = 10
MAX_AUTOMATIONS_PER_HOME = 25
MIN_FIRMWARE_BATTERY = 25  # percent; a battery device below it could brick mid-update
AUTO_DEADBAND = 2.0  # °C between heat and cool setpoints in auto mode
COLOR_TEMPERATURE_RANGE = (2200, 6500)  # kelvin, every tunable-white model
READING_HISTORY = 6  # hourly readings kept per sensor in the seed

# The capability each action needs, and whether it takes a value (and its bounds).
ACTIONS: dict[str, tuple[str, tuple[float, float] | None]] = {
    "turn_on": ("power", None),
    "turn_off": ("power", None),
    "set_brightness": ("brightness", (1, 100)),
    "set_color_temperature": ("color_temperature", COLOR_TEMPERATURE_RANGE),
    "set_heat_setpoint": ("thermostat", None),  # bounded by the thermostat model's range
    "set_cool_setpoint": ("thermostat", None),
    "lock": ("lock", None),
    "unlock": ("lock", None),
}
VALUE_ACTIONS = frozenset({"set_brightness", "set_color_temperature", "set_heat_setpoint", "set_cool_setpoint"})


def _temperature(s: Record) -> float | None:
    return s.get("temperature", s.get("current_temperature"))


# Trigger → (device types it can watch, whether it needs a threshold, the condition on the state).
TRIGGERS: dict[str, tuple[frozenset[str], bool, Any]] = {
    "temperature_above": (frozenset({"temperature_sensor", "thermostat"}), True, lambda s, t: _temperature(s) > t),
    "temperature_below": (frozenset({"temperature_sensor", "thermostat"}), True, lambda s, t: _temperature(s) < t),
    "motion_detected": (frozenset({"motion_sensor"}), False, lambda s, t: s["motion"]),
    "motion_cleared": (frozenset({"motion_sensor"}), False, lambda s, t: not s["motion"]),
    "opened": (frozenset({"contact_sensor"}), False, lambda s, t: s["open"]),
    "closed": (frozenset({"contact_sensor"}), False, lambda s, t: not s["open"]),
    "smoke_detected": (frozenset({"smoke_detector"}), False, lambda s, t: s["smoke"]),
    "turned_on": (frozenset({"light", "plug", "camera"}), False, lambda s, t: s["on"]),
    "turned_off": (frozenset({"light", "plug", "camera"}), False, lambda s, t: not s["on"]),
    "locked": (frozenset({"lock"}), False, lambda s, t: s["locked"]),
    "unlocked": (frozenset({"lock"}), False, lambda s, t: not s["locked"]),
}

# Model catalog: type, maker, capabilities, battery powered, firmware versions (oldest → latest),
# what the latest release changed, and for thermostats the setpoint range in °C.
MODELS: dict[str, Record] = {
    "Lumina A19 Dimmable": {
        "type": "light", "manufacturer": "Lumina", "capabilities": ("power", "brightness"), "battery": False,
        "firmware": ("2.2.0", "2.3.4", "2.4.1"), "notes": "Smoother dimming below 10%.",
    },
    "Lumina A19 Tunable White": {
        "type": "light", "manufacturer": "Lumina", "capabilities": ("power", "brightness", "color_temperature"),
        "battery": False, "firmware": ("3.0.2", "3.1.0"), "notes": "Faster response to scene changes.",
    },
    "Lumina Light Strip": {
        "type": "light", "manufacturer": "Lumina", "capabilities": ("power", "brightness", "color_temperature"),
        "battery": False, "firmware": ("1.7.0", "1.8.2"), "notes": "Fixes flicker at low brightness.",
    },
    "Plugwise Mini": {
        "type": "plug", "manufacturer": "Plugwise", "capabilities": ("power", "energy_monitoring"), "battery": False,
        "firmware": ("1.1.3", "1.2.0"), "notes": "More accurate energy readings.",
    },
    "Thermia T5": {
        "type": "thermostat", "manufacturer": "Thermia", "capabilities": ("thermostat", "temperature", "humidity"),
        "battery": False, "firmware": ("4.9.1", "5.0.3"), "notes": "Adds an eco setback profile.",
        "setpoint_range": (10.0, 30.0),
    },
    "Thermia T9 Smart": {
        "type": "thermostat", "manufacturer": "Thermia", "capabilities": ("thermostat", "temperature", "humidity"),
        "battery": False, "firmware": ("6.1.0", "6.2.2"), "notes": "Learns your heating schedule faster.",
        "setpoint_range": (7.0, 32.0),
    },
    "Boltwise Deadbolt": {
        "type": "lock", "manufacturer": "Boltwise", "capabilities": ("lock", "battery"), "battery": True,
        "firmware": ("4.0.7", "4.1.1", "4.2.0"), "notes": "Better jam detection; lower battery drain.",
    },
    "Sentry Cam Indoor": {
        "type": "camera", "manufacturer": "Sentry",
        "capabilities": ("power", "camera", "motion_detection", "continuous_recording"), "battery": False,
        "firmware": ("8.3.0", "8.4.1"), "notes": "Fewer false motion alerts from pets.",
    },
    "Sentry Cam Outdoor Battery": {
        "type": "camera", "manufacturer": "Sentry", "capabilities": ("power", "camera", "motion_detection", "battery"),
        "battery": True, "firmware": ("2.0.5", "2.1.0"), "notes": "Longer battery life in cold weather.",
    },
    "Aware Temp & Humidity": {
        "type": "temperature_sensor", "manufacturer": "Aware", "capabilities": ("temperature", "humidity", "battery"),
        "battery": True, "firmware": ("1.0.9", "1.1.0"), "notes": "Reports every 5 minutes instead of 10.",
    },
    "Aware Motion": {
        "type": "motion_sensor", "manufacturer": "Aware", "capabilities": ("motion", "battery"), "battery": True,
        "firmware": ("1.3.0", "1.4.2"), "notes": "Shorter re-arm time after motion.",
    },
    "Aware Door & Window": {
        "type": "contact_sensor", "manufacturer": "Aware", "capabilities": ("contact", "battery"), "battery": True,
        "firmware": ("1.2.1",), "notes": "Initial release.",
    },
    "Guardian Smoke & CO": {
        "type": "smoke_detector", "manufacturer": "Guardian", "capabilities": ("smoke", "carbon_monoxide", "battery"),
        "battery": True, "firmware": ("3.3.0", "3.4.0"), "notes": "Self-test runs monthly.",
    },
}

# Every home is laid out from this template, so each home has every device type and the scenarios
# the tools need (a tunable and a dimmable-only light, a battery camera, two locks, all sensors).
LAYOUT: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Living Room", (("Living Room Lamp", "Lumina A19 Tunable White"), ("Ceiling Light", "Lumina A19 Dimmable"),
                     ("Thermostat", "Thermia T9 Smart"), ("Living Room Camera", "Sentry Cam Indoor"),
                     ("Living Room Sensor", "Aware Temp & Humidity"))),
    ("Kitchen", (("Kitchen Lights", "Lumina A19 Dimmable"), ("Coffee Maker Plug", "Plugwise Mini"),
                 ("Smoke Alarm", "Guardian Smoke & CO"))),
    ("Hallway", (("Hallway Light", "Lumina A19 Tunable White"), ("Hallway Motion", "Aware Motion"),
                 ("Front Door Lock", "Boltwise Deadbolt"), ("Front Door Sensor", "Aware Door & Window"))),
    ("Bedroom", (("Bedside Strip", "Lumina Light Strip"), ("Bedroom Thermostat", "Thermia T5"),
                 ("Bedroom Sensor", "Aware Temp & Humidity"))),
    ("Garage", (("Garage Camera", "Sentry Cam Outdoor Battery"), ("Garage Door Lock", "Boltwise Deadbolt"),
                ("Garage Light", "Lumina A19 Dimmable"), ("Garage Plug", "Plugwise Mini"))),
)
HOME_NAMES = ("Main House", "Lake Cabin", "City Apartment", "Beach House", "Mountain Lodge", "Farmhouse",
              "Studio Loft", "Guest Cottage")

# What owners name when they ask for a tool (``asks``/``values``); none clashes with a seeded name.
ROOM_NAMES = ("Home Office", "Nursery", "Guest Room", "Laundry Room", "Basement", "Attic", "Patio", "Dining Room",
              "Mudroom", "Home Gym", "Workshop", "Playroom")
SCENE_NAMES = ("Reading Nook", "Dinner Party", "Morning Routine", "Away Mode", "Relax", "Bedtime", "Wake Up",
               "Focus Time", "Game Night", "Date Night")
AUTOMATION_NAMES = ("Welcome home", "Comfort helper", "Evening helper", "Night watch", "Quick reaction",
                    "House rule 1", "Keep it cozy", "Arrival helper")
SCHEDULES = (  # (name, time, days, value): value sources of one call share a seed, so they agree
    ("Wind down", "21:30", WEEKDAYS[:5], 25), ("Morning wake-up", "06:30", WEEKDAYS[:5], 60),
    ("Weekend lie-in", "09:30", WEEKDAYS[5:], 40), ("Bedtime", "22:30", WEEKDAYS, 10),
    ("Evening routine", "18:00", WEEKDAYS, 70), ("Gym mornings", "06:00", ("mon", "wed", "fri"), 80),
    ("Late dinner", "20:00", ("fri", "sat"), 30), ("Sunday reading", "16:00", ("sun",), 50),
)
# What people set with each action that takes a value, and the thresholds they pick per trigger.
ACTION_VALUES = {"set_brightness": (10, 25, 30, 40, 50, 60, 70, 80, 100),
                 "set_color_temperature": (2200, 2700, 3000, 4000, 5000, 6500),
                 "set_heat_setpoint": (18.0, 19.0, 19.5, 20.0, 20.5, 21.0),
                 "set_cool_setpoint": (23.5, 24.0, 24.5, 25.0, 26.0)}
TRIGGER_THRESHOLDS = {"temperature_above": (25.0, 26.0, 27.0, 28.0), "temperature_below": (16.0, 17.5, 18.0, 18.5, 19.0)}


def _schedule_value(rng: random.Random, s: Any, args: dict[str, Any] | None = None) -> float:
    """The value of a schedule's action: one fit for the call's action (a brightness, a colour
    temperature, a setpoint), else the drawn schedule's brightness."""
    level = rng.choice(SCHEDULES)[3]
    fitting = ACTION_VALUES.get((args or {}).get("action", ""))
    return rng.choice(fitting) if fitting else level


def _automation_value(rng: random.Random, s: Any, args: dict[str, Any] | None = None) -> float:
    """The value of an automation's action: one fit for the call's action, else a heat setpoint."""
    return rng.choice(ACTION_VALUES.get((args or {}).get("action", ""), ACTION_VALUES["set_heat_setpoint"]))


def _threshold(rng: random.Random, s: Any, args: dict[str, Any] | None = None) -> float:
    """A temperature threshold on the side of comfort the call's trigger watches."""
    trigger = (args or {}).get("trigger", "")
    return rng.choice(TRIGGER_THRESHOLDS.get(trigger, sum(TRIGGER_THRESHOLDS.values(), ())))


DeviceId = Annotated[str, ref("device", "Id of the device (dev_...), from list_devices or list_rooms.")]
HomeId = Annotated[str, ref("home", "Id of the home (hom_...), from list_homes.")]
Value = Annotated[float | None, Field(
    ge=0, le=6500,
    description="The action's value: brightness 1-100 (set_brightness), kelvin 2200-6500 "
    "(set_color_temperature) or °C (set_heat_setpoint, set_cool_setpoint). Omit for other actions.")]


# -- state and seed -------------------------------------------------------------------------------


class IotState(State):
    homes = Table("home", prefix="hom")
    rooms = Table("room", prefix="rom", index=("home_id",))
    devices = Table("device", prefix="dev", index=("home_id", "room_id", "type"))
    readings = Table("reading", prefix="rdg", index=("device_id",))
    scenes = Table("scene", prefix="scn", index=("home_id",))
    schedules = Table("schedule", prefix="sch", index=("home_id", "device_id"))
    automations = Table("automation", prefix="aut", index=("home_id", "trigger_device_id"))


@attrs.frozen(kw_only=True)
class IotOptions:
    """Seed size: how many homes the owner has (each with 5 rooms and 19 devices)."""

    homes: int = attrs.field(default=2, validator=attrs.validators.gt(0))


def build_iot(rng: random.Random, options: IotOptions) -> IotState:
    """Homes laid out from the template, device states, sensor history, scenes, schedules and
    automations. The first home always has an offline camera, a jammed lock and a lock whose
    battery is too low for a firmware update; later homes get those by chance."""
    state = IotState(salt=str(rng.random()))
    for index in range(options.homes):
        _seed_home(state, rng, index)
    return state


def _seed_home(state: IotState, rng: random.Random, index: int) -> None:
    name = HOME_NAMES[index % len(HOME_NAMES)] + ("" if index < len(HOME_NAMES) else f" {index // len(HOME_NAMES) + 1}")
    home = state.homes.insert({"name": name, "address": fake.address(rng), "owner": fake.full_name(rng),
                               "timezone": "UTC", "created_on": fake.date_between(
                                   rng, dt.date(2021, 1, 1), dt.date(2025, 6, 30)).isoformat()})
    devices: dict[str, Record] = {}
    for room_name, members in LAYOUT:
        room = state.rooms.insert({"home_id": home["id"], "name": room_name})
        for device_name, model in members:
            devices[device_name] = _seed_device(state, rng, home, room, device_name, model, first_home=index == 0)
    for device in devices.values():
        if device["type"] in SENSOR_TYPES:
            _seed_readings(state, rng, device)
    _seed_scenes(state, home, devices)
    _seed_schedules(state, home, devices)
    _seed_automations(state, home, devices)


def _seed_device(state: IotState, rng: random.Random, home: Record, room: Record, name: str, model: str, *,
                 first_home: bool) -> Record:
    spec = MODELS[model]
    kind = spec["type"]
    # The first home pins the failure scenarios; other homes get them by chance.
    offline = (name == "Garage Camera") if first_home else rng.random() < 0.06
    jammed = kind == "lock" and ((name == "Garage Door Lock") if first_home else rng.random() < 0.15)
    battery = None
    if spec["battery"]:
        battery = 18 if first_home and name == "Front Door Lock" else rng.randint(30, 100)
    # Some devices run an older firmware; in the first home an online lamp, the low-battery lock and
    # the offline camera always do, so each reason an update can be refused has a device.
    versions = spec["firmware"]
    outdated = (first_home and name in ("Living Room Lamp", "Front Door Lock", "Garage Camera")) or rng.random() < 0.4
    firmware = versions[rng.randrange(len(versions) - 1)] if outdated and len(versions) > 1 else versions[-1]
    record = {
        "home_id": home["id"], "room_id": room["id"], "name": name, "type": kind, "model": model,
        "manufacturer": spec["manufacturer"], "capabilities": list(spec["capabilities"]), "online": not offline,
        "battery": battery, "firmware_version": firmware,
        "last_seen_at": iso_datetime(state.now() - dt.timedelta(hours=rng.randint(20, 70) if offline else 0,
                                                        minutes=rng.randint(0, 9))),
        "state": _initial_state(state, rng, kind, model, jammed=jammed),
        "updated_at": iso_datetime(state.now() - dt.timedelta(hours=rng.randint(1, 48))),
    }
    if kind == "thermostat":
        record["setpoint_range"] = list(spec["setpoint_range"])
    return state.devices.insert(record)


def _initial_state(state: IotState, rng: random.Random, kind: str, model: str, *, jammed: bool) -> Record:
    now = state.now()
    if kind == "light":
        tunable = "color_temperature" in MODELS[model]["capabilities"]
        return {"on": rng.random() < 0.4, "brightness": rng.choice((20, 40, 60, 80, 100)),
                "color_temperature": rng.choice((2700, 3000, 4000)) if tunable else None}
    if kind == "plug":
        on = rng.random() < 0.5
        return {"on": on, "power_watts": round(rng.uniform(2, 900), 1) if on else 0.0}
    if kind == "thermostat":
        mode = rng.choice(("heat", "heat", "auto"))
        heat = rng.choice((19.0, 20.0, 20.5, 21.0))
        return {"mode": mode, "heat_setpoint": heat, "cool_setpoint": heat + rng.choice((3.0, 4.0, 5.0)),
                "current_temperature": round(rng.uniform(18.0, 22.5), 1), "humidity": rng.randint(30, 55)}
    if kind == "lock":
        return {"locked": True if jammed else rng.random() < 0.7, "jammed": jammed}
    if kind == "camera":
        detection = rng.random() < 0.8
        return {"on": True, "recording_mode": "motion_only" if detection else "off", "motion_detection": detection,
                "motion_sensitivity": rng.choice(("low", "medium", "high")),
                "last_motion_at": iso_datetime(now - dt.timedelta(minutes=rng.randint(5, 600)))}
    if kind == "temperature_sensor":
        return {"temperature": round(rng.uniform(17.5, 24.0), 1), "humidity": rng.randint(30, 60)}
    if kind == "motion_sensor":
        return {"motion": True, "last_motion_at": iso_datetime(now - dt.timedelta(minutes=rng.randint(0, 2)))}
    if kind == "contact_sensor":
        return {"open": False, "last_changed_at": iso_datetime(now - dt.timedelta(minutes=rng.randint(10, 300)))}
    return {"smoke": False, "co_ppm": rng.randint(0, 4), "last_self_test_on": (now.date() - dt.timedelta(
        days=rng.randint(3, 28))).isoformat()}


def _seed_readings(state: IotState, rng: random.Random, device: Record) -> None:
    """Hourly readings up to the current one, oldest first."""
    current = device["state"]
    for hours_ago in range(READING_HISTORY - 1, -1, -1):
        values = dict(current)
        if hours_ago and device["type"] == "temperature_sensor":
            values["temperature"] = round(current["temperature"] + rng.uniform(-1.5, 1.5), 1)
            values["humidity"] = max(20, min(80, current["humidity"] + rng.randint(-4, 4)))
        elif hours_ago and device["type"] == "motion_sensor":
            values["motion"] = rng.random() < 0.3
        elif hours_ago and device["type"] == "contact_sensor":
            values["open"] = rng.random() < 0.2
        state.readings.insert({"device_id": device["id"], "home_id": device["home_id"],
                               "at": iso_datetime(state.now() - dt.timedelta(hours=hours_ago)), "values": values})


def _seed_scenes(state: IotState, home: Record, devices: dict[str, Record]) -> None:
    thermostat = devices["Thermostat"]
    low, _ = thermostat["setpoint_range"]
    scenes = (
        ("Good Night", {"Living Room Lamp": {"on": False}, "Ceiling Light": {"on": False},
                        "Front Door Lock": {"locked": True},
                        "Thermostat": {"heat_setpoint": max(low, 18.0)}}),
        ("Movie Time", {"Living Room Lamp": {"on": True, "brightness": 30, "color_temperature": 2700},
                        "Ceiling Light": {"on": False}}),
    )
    for name, settings in scenes:
        state.scenes.insert({
            "home_id": home["id"], "name": name,
            "devices": [{"device_id": devices[d]["id"], "settings": s} for d, s in settings.items()],
            "created_at": iso_datetime(state.now() - dt.timedelta(days=30)), "last_activated_at": None,
        })


def _seed_schedules(state: IotState, home: Record, devices: dict[str, Record]) -> None:
    """A weekday 09:00 schedule is due the moment a session starts (Monday 09:00 on the hub clock)."""
    plans = (
        ("Hallway light off after the morning rush", "Hallway Light", "turn_off", None, "09:00", WEEKDAYS[:5]),
        ("Evening lamp", "Living Room Lamp", "turn_on", None, "18:30", WEEKDAYS),
        ("Night setback", "Thermostat", "set_heat_setpoint", 18.0, "22:00", WEEKDAYS),
        ("Coffee on", "Coffee Maker Plug", "turn_on", None, "06:45", WEEKDAYS[:5]),
    )
    created = state.now() - dt.timedelta(days=10)
    for name, device_name, action, value, at, days in plans:
        device = devices[device_name]
        next_run = _next_run(at, list(days), after=created)
        while next_run < state.now() - dt.timedelta(minutes=1):  # runs before the session began are done
            next_run = _next_run(at, list(days), after=next_run)
        state.schedules.insert({
            "home_id": home["id"], "device_id": device["id"], "name": name, "action": action, "value": value,
            "time": at, "days": list(days), "enabled": True, "next_run_at": iso_datetime(next_run),
            "last_run_at": None, "last_result": None, "created_at": iso_datetime(created),
        })


def _seed_automations(state: IotState, home: Record, devices: dict[str, Record]) -> None:
    """The hallway motion automation is armed and its sensor sees motion: the first evaluation fires it."""
    plans = (
        ("Hallway motion lights", "Hallway Motion", "motion_detected", None, "Hallway Light", "turn_on", None, True),
        ("Smoke: unlock the front door", "Smoke Alarm", "smoke_detected", None, "Front Door Lock", "unlock", None,
         True),
        ("Too warm in the living room", "Living Room Sensor", "temperature_above", 26.0, "Thermostat",
         "set_cool_setpoint", 23.0, True),
        ("Door opened: lights on", "Front Door Sensor", "opened", None, "Ceiling Light", "turn_on", None, False),
    )
    for name, trigger_device, trigger, threshold, action_device, action, value, enabled in plans:
        state.automations.insert(_automation_record(
            state, home["id"], name, devices[trigger_device], trigger, threshold, devices[action_device], action,
            value, enabled, created=state.now() - dt.timedelta(days=20)))


# -- shared rules ---------------------------------------------------------------------------------


def _next_run(at: str, days: list[str], *, after: dt.datetime) -> dt.datetime:
    """The first moment strictly after ``after`` at time ``at`` (HH:MM, hub clock) on one of ``days``."""
    hour, minute = (int(part) for part in at.split(":"))
    for offset in range(8):
        day = after.date() + dt.timedelta(days=offset)
        candidate = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)
        if candidate > after and WEEKDAYS[day.weekday()] in days:
            return candidate
    raise AssertionError("a schedule runs on at least one weekday")


def _require_capability(device: Record, capability: str, doing: str) -> None:
    require(capability in device["capabilities"],
            f"{device['name']} ({device['model']}) cannot {doing}; it supports {', '.join(device['capabilities'])}",
            reason="UNSUPPORTED_CAPABILITY", error=InvalidArgument, device_id=device["id"],
            capabilities=device["capabilities"])


def _require_online(device: Record) -> None:
    require(device["online"], f"{device['name']} is offline (last seen {device['last_seen_at']}); check its power "
            "and Wi-Fi, then retry", reason="DEVICE_OFFLINE", device_id=device["id"],
            last_seen_at=device["last_seen_at"])


def _require_in_home(device: Record, home_id: str) -> None:
    require(device["home_id"] == home_id, f"{device['name']} ({device['id']}) belongs to another home",
            reason="DEVICE_NOT_IN_HOME", error=InvalidArgument, device_id=device["id"], home_id=device["home_id"])


def _check_setpoint(device: Record, value: float, which: str) -> None:
    low, high = device["setpoint_range"]
    require(low <= value <= high, f"{device['name']} ({device['model']}) accepts {which} setpoints from {low:g} "
            f"to {high:g} °C, not {value:g}", reason="SETPOINT_OUT_OF_RANGE", error=InvalidArgument,
            minimum=low, maximum=high)


def _check_thermostat(device: Record, changes: Record) -> None:
    """Setpoints within the model's range; in auto mode, cool at least AUTO_DEADBAND above heat."""
    for which in ("heat", "cool"):
        if changes.get(f"{which}_setpoint") is not None:
            _check_setpoint(device, changes[f"{which}_setpoint"], which)
    after = {**device["state"], **changes}
    if after["mode"] == "auto":
        require(after["cool_setpoint"] - after["heat_setpoint"] >= AUTO_DEADBAND,
                f"in auto mode the cool setpoint must be at least {AUTO_DEADBAND:g} °C above the heat setpoint "
                f"(heat {after['heat_setpoint']:g}, cool {after['cool_setpoint']:g})", reason="SETPOINT_DEADBAND",
                error=InvalidArgument, heat_setpoint=after["heat_setpoint"], cool_setpoint=after["cool_setpoint"])


def _check_action_definition(device: Record, action: str, value: float | None) -> None:
    """What can be checked when a schedule or automation is saved: capability and value."""
    capability, bounds = ACTIONS[action]
    _require_capability(device, capability, action.replace("_", " "))
    if action not in VALUE_ACTIONS:
        require(value is None, f"{action} takes no value", reason="UNEXPECTED_VALUE", error=InvalidArgument)
        return
    require(value is not None, f"{action} needs a value", reason="ACTION_VALUE_REQUIRED", error=InvalidArgument)
    if bounds is not None:
        require(bounds[0] <= value <= bounds[1], f"{action} takes a value from {bounds[0]:g} to {bounds[1]:g}",
                reason="VALUE_OUT_OF_RANGE", error=InvalidArgument, minimum=bounds[0], maximum=bounds[1])
    else:
        _check_setpoint(device, value, action.split("_")[1])


def _action_changes(device: Record, action: str, value: float | None) -> Record:
    """The state changes an action makes, after checking the device can make them now."""
    _check_action_definition(device, action, value)
    _require_online(device)
    changes: Record = {
        "turn_on": {"on": True},
        "turn_off": {"on": False},
        "lock": {"locked": True},
        "unlock": {"locked": False},
        "set_brightness": {"on": True, "brightness": int(value or 0)},
        "set_color_temperature": {"color_temperature": int(value or 0)},
        "set_heat_setpoint": {"heat_setpoint": value},
        "set_cool_setpoint": {"cool_setpoint": value},
    }[action]
    if device["type"] == "lock":
        _require_unjammed(device)
    if device["type"] == "thermostat":
        _check_thermostat(device, changes)
    return changes


def _require_unjammed(device: Record) -> None:
    require(not device["state"]["jammed"], f"{device['name']} is jammed: the bolt cannot move; clear the door frame "
            "and turn the lock by hand once", reason="LOCK_JAMMED", device_id=device["id"])


def _write_state(state: IotState, device: Record, changes: Record) -> Record:
    """Apply state changes; a change to nothing new writes nothing (so repeats leave no trace)."""
    new = {**device["state"], **changes}
    if device["type"] == "plug" and not new["on"]:
        new["power_watts"] = 0.0
    if new == device["state"]:
        return device
    return state.devices.update(device["id"], state=new, updated_at=iso_datetime(state.now()))


def _try_action(state: IotState, device_id: str, action: str, value: float | None) -> Record:
    """Run an action for a scene, schedule or automation: a typed failure is reported, not raised."""
    device = state.devices.find(device_id)
    if device is None:
        return {"device_id": device_id, "ok": False, "reason": "DEVICE_NOT_FOUND"}
    try:
        changes = _action_changes(device, action, value)
    except ToolError as exc:
        return {"device_id": device_id, "device": device["name"], "ok": False, "reason": exc.reason,
                "message": exc.message}
    _write_state(state, device, changes)
    return {"device_id": device_id, "device": device["name"], "ok": True, "reason": None}


def _trigger_holds(device: Record, trigger: str, threshold: float | None) -> bool | None:
    """Whether the trigger condition holds on the device's current state (None: device offline)."""
    if not device["online"]:
        return None
    return bool(TRIGGERS[trigger][2](device["state"], threshold))


def _automation_record(state: IotState, home_id: str, name: str, trigger_device: Record, trigger: str,
                       threshold: float | None, action_device: Record, action: str, value: float | None,
                       enabled: bool, created: dt.datetime) -> Record:
    return {
        "home_id": home_id, "name": name, "enabled": enabled,
        "trigger_device_id": trigger_device["id"], "trigger": trigger, "threshold": threshold,
        "action_device_id": action_device["id"], "action": action, "value": value,
        "condition_met": False,  # armed: fires at the first evaluation that finds the condition true
        "last_fired_at": None, "fire_count": 0, "last_result": None, "created_at": iso_datetime(created),
    }


def _loop_path(state: IotState, trigger_device_id: str, action_device_id: str, skip: str | None = None) -> list[str]:
    """Device ids along a chain of enabled automations from the action device back to the trigger
    device; empty when adding trigger → action keeps the home's automation graph free of loops."""
    stack = [(action_device_id, [action_device_id])]
    seen = set()
    while stack:
        device_id, path = stack.pop()
        if device_id == trigger_device_id:
            return path
        if device_id in seen:
            continue
        seen.add(device_id)
        for auto in state.automations.where(lambda a: a["enabled"] and a["id"] != skip, trigger_device_id=device_id):
            stack.append((auto["action_device_id"], [*path, auto["action_device_id"]]))
    return []


def _require_no_loop(state: IotState, trigger_device: Record, action_device: Record, skip: str | None = None) -> None:
    path = _loop_path(state, trigger_device["id"], action_device["id"], skip)
    if len(path) == 1:
        why = f"it would act on {action_device['name']}, the device it watches"
    else:
        why = "its action would reach its own trigger through other automations (devices " + " -> ".join(path) + ")"
    require(not path, f"this automation would trigger itself: {why}", reason="AUTOMATION_LOOP", device_path=path)


def _device_summary(device: Record) -> Record:
    return {k: device[k] for k in ("id", "name", "type", "room_id", "online", "battery", "state")}


def _schedule_view(state: IotState, schedule: Record) -> Record:
    device = state.devices.find(schedule["device_id"])
    return {**schedule, "device": None if device is None else device["name"],
            "due": schedule["enabled"] and schedule["next_run_at"] <= iso_datetime(state.now())}


# -- examples: arguments computed from the state, valid on a fresh seed of any size -----------------


def _home(s: IotState) -> Record:
    return s.homes.first()


def _device(s: IotState, name: str, **extra: Any) -> Record:
    return s.devices.first(lambda d: d["name"] == name, home_id=_home(s)["id"], **extra)


def _flip(s: IotState, name: str, field: str) -> Record:
    """Arguments that switch a first-home device to the opposite of its current on/locked state."""
    device = _device(s, name)
    return {"device_id": device["id"], field: not device["state"][field]}


def _scene_example(s: IotState) -> Record:
    home = _home(s)["id"]
    lamp, lock = _device(s, "Living Room Lamp"), _device(s, "Front Door Lock")
    return {"home_id": home, "name": "Reading Nook", "device_ids": [lamp["id"], lock["id"]]}


def _firmware_example(s: IotState) -> Record:
    device = s.devices.first(lambda d: d["online"] and (d["battery"] is None or d["battery"] >= MIN_FIRMWARE_BATTERY)
                             and d["firmware_version"] != MODELS[d["model"]]["firmware"][-1])
    return {"device_id": device["id"]}


# -- the server and its tools ---------------------------------------------------------------------

server = Server(
    "iot_devices",
    domain="IoT",
    description="A smart-home hub: homes and rooms, lights, plugs, thermostats, locks, cameras and sensors, "
    "scenes, schedules on the hub clock, sensor-driven automations and device firmware.",
    state=IotState,
    seed=build_iot,
    options=IotOptions,
)


@server.tool(
    answers=("city", "device_count", "offline_device_count"),
    read_only=True,
    reads=["home", "room", "device"],
    examples=[{}],
    asks=("list my homes", "show all the homes on my account", "tell me which homes I have set up",
          "show my homes and how many devices are offline in each"),
)
def list_homes(state: IotState) -> dict:
    """List the owner's homes: id, name, address and time zone, with how many rooms and devices each
    has and how many devices are offline right now."""
    homes = []
    for home in state.homes.all():
        devices = state.devices.where(home_id=home["id"])
        homes.append({**home, "room_count": len(state.rooms.where(home_id=home["id"])),
                      "device_count": len(devices), "offline_device_count": sum(not d["online"] for d in devices)})
    return {"homes": homes}


@server.tool(
    answers=("device_count",),
    read_only=True,
    reads=["home", "room", "device"],
    errors=["HOME_NOT_FOUND"],
    examples=[lambda s: {"home_id": _home(s)["id"]}],
    asks=("list the rooms in {home_id}", "show me the rooms and devices at {home_id}",
          "give me a room-by-room rundown of {home_id}", "show how {home_id} is laid out, room by room"),
)
def list_rooms(state: IotState, home_id: HomeId) -> dict:
    """The rooms of a home, each with its devices grouped under it (id, name, type, online, battery
    and current state). Fails with HOME_NOT_FOUND."""
    state.homes.get(home_id)
    rooms = []
    for room in state.rooms.where(home_id=home_id):
        devices = [_device_summary(d) for d in state.devices.where(room_id=room["id"])]
        rooms.append({**room, "device_count": len(devices), "devices": devices})
    return {"home_id": home_id, "rooms": rooms}


@server.tool(
    idempotent=True,  # the same name again is refused with ROOM_NAME_TAKEN
    reads=["home", "room"],
    produces=["room"],
    errors=["HOME_NOT_FOUND", "ROOM_NAME_TAKEN", "ROOM_LIMIT_REACHED"],
    examples=[lambda s: {"home_id": _home(s)["id"], "name": "Home Office"}],
    asks=("add a room called {name} to {home_id}", "create a new room named {name} in {home_id}",
          "set up a {name} room at {home_id}", "make a room {name} so I can group devices there"),
    values={"name": lambda rng, s: rng.choice(ROOM_NAMES)},
)
def create_room(
    state: IotState,
    home_id: HomeId,
    name: Annotated[str, Field(min_length=1, max_length=40, description="Name of the new room, e.g. 'Nursery'.")],
) -> dict:
    """Add an empty room to a home; move devices into it with move_device. Returns the room. Fails
    with ROOM_NAME_TAKEN (a room of that name, ignoring case, exists in the home) or
    ROOM_LIMIT_REACHED (20 rooms per home)."""
    state.homes.get(home_id)
    rooms = state.rooms.where(home_id=home_id)
    clash = next((r for r in rooms if r["name"].casefold() == name.strip().casefold()), None)
    if clash is not None:
        raise Conflict(f"{_home_name(state, home_id)} already has a room named {clash['name']!r}",
                       reason="ROOM_NAME_TAKEN", room_id=clash["id"])
    require(len(rooms) < MAX_ROOMS_PER_HOME, f"a home holds at most {MAX_ROOMS_PER_HOME} rooms",
            reason="ROOM_LIMIT_REACHED", error=ResourceExhausted, limit=MAX_ROOMS_PER_HOME)
    return state.rooms.insert({"home_id": home_id, "name": name.strip()})


def _home_name(state: IotState, home_id: str) -> str:
    return state.homes.get(home_id)["name"]


@server.tool(
    idempotent=True,
    reads=["device", "room"],
    mutates=["device"],
    errors=["DEVICE_NOT_FOUND", "ROOM_NOT_FOUND", "ROOM_IN_OTHER_HOME"],
    examples=[lambda s: {"device_id": _device(s, "Garage Plug")["id"],
                         "room_id": s.rooms.first(name="Kitchen", home_id=_home(s)["id"])["id"]}],
    asks=("move {device_id} to {room_id}", "put {device_id} in {room_id}", "reassign {device_id} to {room_id}",
          "group {device_id} under {room_id}"),
)
def move_device(
    state: IotState,
    device_id: DeviceId,
    room_id: Annotated[str, ref("room", "Id of the room to put the device in (rom_...), from list_rooms.")],
) -> dict:
    """Move a device into another room of the same home (this is how devices are grouped). Returns
    the device with its new room. Fails with ROOM_IN_OTHER_HOME: a device cannot move between
    homes."""
    device = state.devices.get(device_id)
    room = state.rooms.get(room_id)
    require(room["home_id"] == device["home_id"], f"room {room['name']!r} is in another home than {device['name']}",
            reason="ROOM_IN_OTHER_HOME", error=InvalidArgument, room_home_id=room["home_id"],
            device_home_id=device["home_id"])
    moved = state.devices.update(device_id, room_id=room_id)
    return {"device": moved, "room": room}


def _list_devices_asks(a: dict) -> list[str]:
    """The type and room are slots, online or offline is said in words; each in some templates."""
    found = ["list the devices in {home_id}", "show me all the devices at {home_id}",
             "give me a rundown of the devices in {home_id}"]
    if "device_type" in a:
        found += ["list the {device_type}s in {home_id}", "show me every {device_type} at {home_id}"]
    if "room_id" in a:
        found += ["list the devices in {room_id}", "show me what's in {room_id}"]
    if a.get("online") is not None:
        status = "online" if a["online"] else "offline"
        found += [f"show me which devices at {{home_id}} are {status}", f"list the {status} devices in {{home_id}}"]
        if "device_type" in a:
            found.append(f"check which {{device_type}}s in {{home_id}} are {status}")
    return found


@server.tool(
    answers=("type", "online"),
    read_only=True,
    reads=["home", "room", "device"],
    errors=["HOME_NOT_FOUND", "ROOM_NOT_FOUND"],
    examples=[lambda s: {"home_id": _home(s)["id"]},
              lambda s: {"home_id": _home(s)["id"], "device_type": "light", "online": True}],
    asks=_list_devices_asks,
)
def list_devices(
    state: IotState,
    home_id: HomeId,
    room_id: Annotated[str | None, ref("room", "Only devices in this room (rom_...).")] = None,
    device_type: Annotated[DeviceType | None, Field(description="Only devices of this type.")] = None,
    online: Annotated[bool | None, Field(description="true: only online devices; false: only offline ones.")] = None,
) -> dict:
    """List a home's devices with type, room, online status, battery and current state, filtered by
    room, type and online status. Fails with HOME_NOT_FOUND or ROOM_NOT_FOUND."""
    state.homes.get(home_id)
    filters: Record = {"home_id": home_id}
    if room_id is not None:
        state.rooms.get(room_id)
        filters["room_id"] = room_id
    if device_type is not None:
        filters["type"] = device_type
    if online is not None:
        filters["online"] = online
    devices = [_device_summary(d) for d in state.devices.where(**filters)]
    return {"home_id": home_id, "devices": devices, "total": len(devices)}


@server.tool(
    answers=("type", "online", "battery", "room"),
    read_only=True,
    reads=["device", "room"],
    errors=["DEVICE_NOT_FOUND"],
    examples=[lambda s: {"device_id": _device(s, "Thermostat")["id"]}],
    asks=("show me the details of {device_id}", "check the status of {device_id}",
          "tell me everything about {device_id}", "find out what model {device_id} is and whether it's online"),
)
def get_device(state: IotState, device_id: DeviceId) -> dict:
    """One device in full: model, maker, room, capabilities, online status and when it was last
    seen, battery, firmware version and its current state (for a thermostat also the setpoint
    range it accepts). Fails with DEVICE_NOT_FOUND."""
    device = state.devices.get(device_id)
    return {**device, "room": state.rooms.get(device["room_id"])["name"]}


@server.tool(
    idempotent=True,
    reads=["device"],
    mutates=["device"],
    errors=["DEVICE_NOT_FOUND", "UNSUPPORTED_CAPABILITY", "DEVICE_OFFLINE"],
    examples=[lambda s: _flip(s, "Coffee Maker Plug", "on"), lambda s: _flip(s, "Ceiling Light", "on")],
    asks=lambda a: (("turn on {device_id}", "switch {device_id} on", "power up {device_id}") if a.get("on") else
                    ("turn off {device_id}", "switch {device_id} off", "shut {device_id} off")),
)
def set_device_power(
    state: IotState,
    device_id: DeviceId,
    on: Annotated[bool, Field(description="true switches the device on, false switches it off.")],
) -> dict:
    """Switch a light, plug or camera on or off (a camera that is off records nothing). Returns the
    device. Fails with UNSUPPORTED_CAPABILITY for devices without a power switch (locks,
    thermostats — use set_thermostat mode 'off' — and sensors) or DEVICE_OFFLINE."""
    device = state.devices.get(device_id)
    return _write_state(state, device, _action_changes(device, "turn_on" if on else "turn_off", None))


def _set_light_asks(a: dict) -> list[str]:
    found = []
    if "brightness" in a:
        found += ["set {device_id} to {brightness}% brightness", "dim {device_id} to {brightness} percent",
                  "change the brightness of {device_id} to {brightness}%"]
    if "color_temperature" in a:
        found += ["set {device_id} to {color_temperature}K", "make {device_id} {color_temperature}K white",
                  "change the color temperature of {device_id} to {color_temperature} kelvin"]
        if "brightness" in a:
            found += ["set {device_id} to {brightness}% brightness at {color_temperature}K",
                      "put {device_id} at {brightness} percent with a color temperature of {color_temperature} kelvin"]
    return found or ["adjust {device_id}", "change the light settings on {device_id}", "tweak {device_id}"]


@server.tool(
    idempotent=True,
    reads=["device"],
    mutates=["device"],
    errors=["DEVICE_NOT_FOUND", "UNSUPPORTED_CAPABILITY", "DEVICE_OFFLINE", "NOTHING_TO_CHANGE"],
    examples=[lambda s: {"device_id": _device(s, "Living Room Lamp")["id"], "brightness": 45,
                         "color_temperature": 3000},
              lambda s: {"device_id": _device(s, "Kitchen Lights")["id"], "brightness": 85}],
    asks=_set_light_asks,
    values={"brightness": lambda rng, s: rng.choice((10, 20, 25, 30, 40, 50, 60, 75, 80, 100)),
            "color_temperature": lambda rng, s: rng.choice((2200, 2700, 3000, 3500, 4000, 5000, 6500))},
)
def set_light(
    state: IotState,
    device_id: DeviceId,
    brightness: Annotated[int | None, Field(ge=1, le=100, description="Brightness in percent (1-100).")] = None,
    color_temperature: Annotated[int | None, Field(
        ge=COLOR_TEMPERATURE_RANGE[0], le=COLOR_TEMPERATURE_RANGE[1],
        description="White color temperature in kelvin: 2200 (warm) to 6500 (daylight); tunable lights only.")] = None,
) -> dict:
    """Set a light's brightness and/or color temperature; a light that is off turns on. Returns the
    device. Fails with UNSUPPORTED_CAPABILITY (not a dimmable light, e.g. a lock or plug, or a
    color temperature for a dimmable-only bulb), DEVICE_OFFLINE or NOTHING_TO_CHANGE (neither value
    given)."""
    device = state.devices.get(device_id)
    _require_capability(device, "brightness", "set a brightness")
    require(brightness is not None or color_temperature is not None, "give brightness, color_temperature or both",
            reason="NOTHING_TO_CHANGE", error=InvalidArgument)
    changes: Record = {}
    if brightness is not None:
        changes.update(_action_changes(device, "set_brightness", brightness))
    if color_temperature is not None:
        changes.update(_action_changes(device, "set_color_temperature", color_temperature))
        changes["on"] = True
    return _write_state(state, device, changes)


_THERMOSTAT_MODE_ASKS = {
    "heat": ["switch {device_id} to heating", "put {device_id} in heat mode", "set {device_id} to heat"],
    "cool": ["switch {device_id} to cooling", "put {device_id} in cool mode", "set {device_id} to cool"],
    "auto": ["switch {device_id} to auto", "put {device_id} in auto mode",
             "let {device_id} heat and cool automatically"],
    "off": ["turn {device_id} off", "switch off the heating and cooling on {device_id}", "shut {device_id} down"],
}


def _set_thermostat_asks(a: dict) -> list[str]:
    """Setpoints are slots, the mode is said in words; each in some templates."""
    mode = a.get("mode")
    found = list(_THERMOSTAT_MODE_ASKS.get(mode, []))
    if "heat_setpoint" in a:
        found += ["set the heating on {device_id} to {heat_setpoint}°C",
                  "have {device_id} heat to {heat_setpoint} degrees",
                  "change the heat setpoint of {device_id} to {heat_setpoint}°C"]
        if mode in ("heat", "auto"):
            found.append(f"put {{device_id}} in {mode} mode and heat to {{heat_setpoint}}°C")
    if "cool_setpoint" in a:
        found += ["set the cooling on {device_id} to {cool_setpoint}°C",
                  "have {device_id} cool to {cool_setpoint} degrees",
                  "change the cool setpoint of {device_id} to {cool_setpoint}°C"]
        if mode in ("cool", "auto"):
            found.append(f"put {{device_id}} in {mode} mode and cool to {{cool_setpoint}}°C")
    if "heat_setpoint" in a and "cool_setpoint" in a:
        found += ["keep {device_id} between {heat_setpoint} and {cool_setpoint}°C",
                  "make {device_id} heat to {heat_setpoint}°C and cool to {cool_setpoint}°C"]
        if mode == "auto":
            found.append("set {device_id} to auto, heating below {heat_setpoint} and cooling above {cool_setpoint}°C")
    return found or ["adjust {device_id}", "change the settings on {device_id}", "tweak {device_id}"]


@server.tool(
    idempotent=True,
    reads=["device"],
    mutates=["device"],
    errors=["DEVICE_NOT_FOUND", "UNSUPPORTED_CAPABILITY", "DEVICE_OFFLINE", "SETPOINT_OUT_OF_RANGE",
            "SETPOINT_DEADBAND", "NOTHING_TO_CHANGE"],
    examples=[lambda s: {"device_id": _device(s, "Thermostat")["id"], "mode": "heat", "heat_setpoint": 21.5},
              lambda s: {"device_id": _device(s, "Bedroom Thermostat")["id"], "mode": "auto",
                         "heat_setpoint": 19.5, "cool_setpoint": 24.5}],
    asks=_set_thermostat_asks,
    values={"heat_setpoint": lambda rng, s: rng.choice((18.0, 18.5, 19.0, 19.5, 20.0, 20.5, 21.0)),
            "cool_setpoint": lambda rng, s: rng.choice((23.5, 24.0, 24.5, 25.0, 26.0))},
)
def set_thermostat(
    state: IotState,
    device_id: DeviceId,
    mode: Annotated[ThermostatMode | None, Field(
        description="heat, cool, auto (heats below heat_setpoint, cools above cool_setpoint) or off.")] = None,
    heat_setpoint: Annotated[float | None, Field(ge=0, le=40, multiple_of=0.5,
                                                 description="Heat to this temperature, °C, in 0.5 steps.")] = None,
    cool_setpoint: Annotated[float | None, Field(ge=0, le=40, multiple_of=0.5,
                                                 description="Cool to this temperature, °C, in 0.5 steps.")] = None,
) -> dict:
    """Change a thermostat's mode and/or setpoints. Returns the device with what the system is doing
    now (heating, cooling or idle). Fails with SETPOINT_OUT_OF_RANGE (outside the model's
    setpoint_range, see get_device), SETPOINT_DEADBAND (in auto mode cool must be at least 2 °C
    above heat), UNSUPPORTED_CAPABILITY (not a thermostat), DEVICE_OFFLINE or NOTHING_TO_CHANGE."""
    device = state.devices.get(device_id)
    _require_capability(device, "thermostat", "act as a thermostat")
    changes = {k: v for k, v in (("mode", mode), ("heat_setpoint", heat_setpoint), ("cool_setpoint", cool_setpoint))
               if v is not None}
    require(bool(changes), "give a mode or a setpoint", reason="NOTHING_TO_CHANGE", error=InvalidArgument)
    _require_online(device)
    _check_thermostat(device, changes)
    device = _write_state(state, device, changes)
    s = device["state"]
    running = "idle"
    if s["mode"] in ("heat", "auto") and s["current_temperature"] < s["heat_setpoint"]:
        running = "heating"
    elif s["mode"] in ("cool", "auto") and s["current_temperature"] > s["cool_setpoint"]:
        running = "cooling"
    return {**device, "hvac_action": running}


@server.tool(
    idempotent=True,
    reads=["device"],
    mutates=["device"],
    errors=["DEVICE_NOT_FOUND", "UNSUPPORTED_CAPABILITY", "DEVICE_OFFLINE", "LOCK_JAMMED"],
    examples=[lambda s: _flip(s, "Front Door Lock", "locked")],
    asks=lambda a: (("lock {device_id}", "make sure {device_id} is locked", "bolt {device_id}") if a.get("locked") else
                    ("unlock {device_id}", "unbolt {device_id}", "let someone in by unlocking {device_id}")),
)
def set_lock(
    state: IotState,
    device_id: DeviceId,
    locked: Annotated[bool, Field(description="true locks, false unlocks.")],
) -> dict:
    """Lock or unlock a smart lock. Returns the device. Fails with LOCK_JAMMED (the bolt is stuck;
    someone must free it by hand), DEVICE_OFFLINE or UNSUPPORTED_CAPABILITY (not a lock)."""
    device = state.devices.get(device_id)
    return _write_state(state, device, _action_changes(device, "lock" if locked else "unlock", None))


def _camera_settings_asks(a: dict) -> list[str]:
    """The sensitivity is a slot; recording and motion detection are said in words; each in some templates."""
    recording = {"continuous": "record continuously", "motion_only": "record only when it detects motion",
                 "off": "stop recording"}.get(a.get("recording_mode"))
    detection = {True: "turn motion detection on", False: "turn motion detection off"}.get(a.get("motion_detection"))
    sensitivity = "set the motion sensitivity to {motion_sensitivity}" if "motion_sensitivity" in a else None
    found = []
    for clause in (recording, detection, sensitivity):
        if clause:
            found += [f"on {{device_id}}, {clause}", f"update {{device_id}}: {clause}",
                      f"tell {{device_id}} to {clause}"]
    if recording and sensitivity:
        found.append(f"set up {{device_id}} to {recording} and {sensitivity}")
    if recording and detection:
        found.append(f"on {{device_id}}, {detection} and {recording}")
    return found or ["change the settings on {device_id}", "adjust {device_id}",
                     "update the camera settings of {device_id}"]


@server.tool(
    idempotent=True,
    reads=["device"],
    mutates=["device"],
    errors=["DEVICE_NOT_FOUND", "UNSUPPORTED_CAPABILITY", "DEVICE_OFFLINE", "MOTION_DETECTION_REQUIRED",
            "NOTHING_TO_CHANGE"],
    examples=[lambda s: {"device_id": _device(s, "Living Room Camera")["id"], "recording_mode": "continuous",
                         "motion_sensitivity": "high"}],
    asks=_camera_settings_asks,
    values={"recording_mode": lambda rng, s: rng.choice(("off", "motion_only", "continuous")),
            "motion_sensitivity": lambda rng, s: rng.choice(("low", "medium", "high"))},
)
def update_camera_settings(
    state: IotState,
    device_id: DeviceId,
    recording_mode: Annotated[RecordingMode | None, Field(
        description="off, motion_only (record clips when motion is detected) or continuous (wired cameras only).")
    ] = None,
    motion_detection: Annotated[bool | None, Field(description="Turn motion detection on or off.")] = None,
    motion_sensitivity: Annotated[Sensitivity | None, Field(description="How little motion triggers it.")] = None,
) -> dict:
    """Change a camera's recording mode and motion detection settings. Returns the device. Fails with
    UNSUPPORTED_CAPABILITY (not a camera, or continuous recording on a battery camera),
    MOTION_DETECTION_REQUIRED (motion_only recording needs motion detection on), DEVICE_OFFLINE or
    NOTHING_TO_CHANGE."""
    device = state.devices.get(device_id)
    _require_capability(device, "camera", "change camera settings")
    changes = {k: v for k, v in (("recording_mode", recording_mode), ("motion_detection", motion_detection),
                                 ("motion_sensitivity", motion_sensitivity)) if v is not None}
    require(bool(changes), "give at least one setting", reason="NOTHING_TO_CHANGE", error=InvalidArgument)
    if recording_mode == "continuous":
        _require_capability(device, "continuous_recording", "record continuously (battery cameras record on motion)")
    _require_online(device)
    after = {**device["state"], **changes}
    require(after["recording_mode"] != "motion_only" or after["motion_detection"],
            "motion_only recording needs motion detection on; turn it on or choose another recording mode",
            reason="MOTION_DETECTION_REQUIRED")
    return _write_state(state, device, changes)


@server.tool(
    answers=("temperature", "humidity", "motion"),
    read_only=True,
    reads=["device", "reading"],
    errors=["DEVICE_NOT_FOUND", "UNSUPPORTED_CAPABILITY"],
    examples=[lambda s: {"device_id": _device(s, "Living Room Sensor")["id"], "limit": 3},
              lambda s: {"device_id": _device(s, "Hallway Motion")["id"]}],
    asks=("show the readings from {device_id}", "check what {device_id} is reading right now",
          "show me the last {limit} readings of {device_id}", "get the recent history from {device_id}"),
)
def get_sensor_readings(
    state: IotState,
    device_id: DeviceId,
    limit: Annotated[int, Field(ge=1, le=50, description="How many past readings to return, newest first.")] = 10,
) -> dict:
    """A sensor's current reading (temperature and humidity, motion, door open/closed, or smoke and
    CO) and its recent reading history, newest first. An offline sensor's reading is its last
    known one (stale: true). Fails with UNSUPPORTED_CAPABILITY for a device that is not a sensor."""
    device = state.devices.get(device_id)
    require(device["type"] in SENSOR_TYPES, f"{device['name']} is a {device['type']}, not a sensor",
            reason="UNSUPPORTED_CAPABILITY", error=InvalidArgument, device_id=device_id,
            capabilities=device["capabilities"])
    history = state.readings.where(device_id=device_id)
    history.sort(key=lambda r: r["at"], reverse=True)
    return {"device_id": device_id, "name": device["name"], "type": device["type"], "current": device["state"],
            "stale": not device["online"], "last_seen_at": device["last_seen_at"],
            "readings": [{"at": r["at"], "values": r["values"]} for r in history[:limit]]}


@server.tool(
    idempotent=True,  # the same name again is refused with SCENE_NAME_TAKEN
    reads=["home", "device", "scene"],
    produces=["scene"],
    errors=["HOME_NOT_FOUND", "DEVICE_NOT_FOUND", "DEVICE_NOT_IN_HOME", "UNSUPPORTED_CAPABILITY", "DEVICE_OFFLINE",
            "SCENE_NAME_TAKEN", "SCENE_LIMIT_REACHED"],
    examples=[_scene_example],
    asks=("save a scene called {name} with {device_ids}",
          "create a {name} scene from the current state of {device_ids}",
          "capture {device_ids} as they are now in a scene named {name}",
          "make a new scene {name} in {home_id} using {device_ids}"),
    values={"name": lambda rng, s: rng.choice(SCENE_NAMES)},
)
def create_scene(
    state: IotState,
    home_id: HomeId,
    name: Annotated[str, Field(min_length=1, max_length=40, description="Scene name, unique in the home.")],
    device_ids: Annotated[list[str], ref(
        "device", "Ids of the devices whose current state the scene captures (lights, plugs, thermostats, locks, "
        "cameras).", min_length=1, max_length=30)],
) -> dict:
    """Save a scene from the current state of some devices of one home (on/off, brightness, color
    temperature, thermostat mode and setpoints, locked, camera recording), to replay later with
    activate_scene. Returns the scene. Fails with SCENE_NAME_TAKEN, DEVICE_NOT_IN_HOME,
    UNSUPPORTED_CAPABILITY (sensors have no state to set), DEVICE_OFFLINE (its current state is
    unknown) or SCENE_LIMIT_REACHED (20 per home)."""
    state.homes.get(home_id)
    captured = []
    for device_id in dict.fromkeys(device_ids):  # a repeated id is captured once
        device = state.devices.get(device_id)
        _require_in_home(device, home_id)
        require(device["type"] not in SENSOR_TYPES, f"{device['name']} is a sensor: it has no state a scene can set",
                reason="UNSUPPORTED_CAPABILITY", error=InvalidArgument, device_id=device_id,
                capabilities=device["capabilities"])
        _require_online(device)
        captured.append({"device_id": device_id, "settings": _scene_settings(device)})
    scenes = state.scenes.where(home_id=home_id)
    clash = next((sc for sc in scenes if sc["name"].casefold() == name.strip().casefold()), None)
    if clash is not None:
        raise Conflict(f"a scene named {clash['name']!r} already exists in this home", reason="SCENE_NAME_TAKEN",
                       scene_id=clash["id"])
    require(len(scenes) < MAX_SCENES_PER_HOME, f"a home holds at most {MAX_SCENES_PER_HOME} scenes",
            reason="SCENE_LIMIT_REACHED", error=ResourceExhausted, limit=MAX_SCENES_PER_HOME)
    return state.scenes.insert({"home_id": home_id, "name": name.strip(), "devices": captured,
                                "created_at": iso_datetime(state.now()), "last_activated_at": None})


def _scene_settings(device: Record) -> Record:
    keys = {"light": ("on", "brightness", "color_temperature"), "plug": ("on",),
            "thermostat": ("mode", "heat_setpoint", "cool_setpoint"), "lock": ("locked",),
            "camera": ("on", "recording_mode", "motion_detection")}[device["type"]]
    return {k: device["state"][k] for k in keys if device["state"][k] is not None}


@server.tool(
    answers=("last_activated_at",),
    read_only=True,
    reads=["home", "scene", "device"],
    errors=["HOME_NOT_FOUND"],
    examples=[lambda s: {"home_id": _home(s)["id"]}],
    asks=("list the scenes in {home_id}", "show me the scenes set up at {home_id}",
          "show which scenes I have at {home_id}"),
)
def list_scenes(state: IotState, home_id: HomeId) -> dict:
    """A home's scenes, each with the devices it sets (by id and name) and the settings it applies.
    Fails with HOME_NOT_FOUND."""
    state.homes.get(home_id)
    scenes = []
    for scene in state.scenes.where(home_id=home_id):
        devices = [{**d, "name": (state.devices.find(d["device_id"]) or {}).get("name")} for d in scene["devices"]]
        scenes.append({**scene, "devices": devices})
    return {"home_id": home_id, "scenes": scenes}


@server.tool(
    reads=["scene", "device"],
    mutates=["device", "scene"],
    errors=["SCENE_NOT_FOUND"],
    examples=[lambda s: {"scene_id": s.scenes.first(home_id=_home(s)["id"], name="Movie Time")["id"]}],
    asks=("activate {scene_id}", "turn on {scene_id}", "run {scene_id}", "switch the house to {scene_id}"),
)
def activate_scene(
    state: IotState,
    scene_id: Annotated[str, ref("scene", "Id of the scene (scn_...), from list_scenes or create_scene.")],
) -> dict:
    """Apply a scene: set every device in it to the saved settings. Devices that cannot take them
    right now (offline, jammed lock, deleted) are skipped and listed with the reason, the others
    are still set. Returns applied and skipped devices. Fails with SCENE_NOT_FOUND."""
    scene = state.scenes.get(scene_id)
    applied, skipped = [], []
    for entry in scene["devices"]:
        device = state.devices.find(entry["device_id"])
        if device is None:
            skipped.append({"device_id": entry["device_id"], "reason": "DEVICE_NOT_FOUND"})
            continue
        try:
            _require_online(device)
            if device["type"] == "lock":
                _require_unjammed(device)
            if device["type"] == "thermostat":
                _check_thermostat(device, entry["settings"])
        except ToolError as exc:
            skipped.append({"device_id": device["id"], "device": device["name"], "reason": exc.reason})
            continue
        _write_state(state, device, entry["settings"])
        applied.append({"device_id": device["id"], "device": device["name"], "settings": entry["settings"]})
    state.scenes.update(scene_id, last_activated_at=iso_datetime(state.now()))
    return {"scene_id": scene_id, "name": scene["name"], "applied": applied, "skipped": skipped}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing (SCENE_NOT_FOUND) and changes nothing
    reads=["scene"],
    mutates=["scene"],
    errors=["SCENE_NOT_FOUND"],
    examples=[lambda s: {"scene_id": s.scenes.first(home_id=_home(s)["id"])["id"]}],
    asks=("delete {scene_id}", "remove {scene_id}", "get rid of {scene_id}",
          "clear out {scene_id}, I don't use it anymore"),
)
def delete_scene(
    state: IotState,
    scene_id: Annotated[str, ref("scene", "Id of the scene to delete (scn_...).")],
) -> dict:
    """Delete a scene; the devices keep their current state. Returns the deleted scene. Fails with
    SCENE_NOT_FOUND."""
    return {"deleted": True, "scene": state.scenes.delete(scene_id)}


def _create_schedule_asks(a: dict) -> list[str]:
    """A value in every template when the action takes one; the days and a name in some."""
    to = " to {value}" if "value" in a and a.get("action") in VALUE_ACTIONS else ""
    found = [f"schedule {{device_id}} to {{action}}{to} at {{time}} every day",
             f"every day at {{time}}, have {{device_id}} {{action}}{to}",
             f"set up a daily schedule so {{device_id}} will {{action}}{to} at {{time}}"]
    if "days" in a:
        found += [f"schedule {{device_id}} to {{action}}{to} at {{time}} on {{days}}",
                  f"at {{time}} on {{days}}, have {{device_id}} {{action}}{to}"]
    if "name" in a:
        found.append(f'add a schedule named "{{name}}": {{device_id}} should {{action}}{to} at {{time}}' +
                     (" on {days}" if "days" in a else " every day"))
    return found


@server.tool(
    idempotent=True,  # the identical schedule again is refused with SCHEDULE_EXISTS
    reads=["device", "schedule"],
    produces=["schedule"],
    errors=["DEVICE_NOT_FOUND", "UNSUPPORTED_CAPABILITY", "ACTION_VALUE_REQUIRED", "UNEXPECTED_VALUE",
            "VALUE_OUT_OF_RANGE", "SETPOINT_OUT_OF_RANGE", "SCHEDULE_EXISTS", "SCHEDULE_LIMIT_REACHED"],
    examples=[lambda s: {"device_id": _device(s, "Bedside Strip")["id"], "action": "set_brightness", "value": 25,
                         "time": "21:30", "days": ["mon", "tue", "wed", "thu", "fri"], "name": "Wind down"},
              lambda s: {"device_id": _device(s, "Front Door Lock")["id"], "action": "lock", "time": "23:00"}],
    asks=_create_schedule_asks,
    values={"time": lambda rng, s: rng.choice(SCHEDULES)[1], "days": lambda rng, s: list(rng.choice(SCHEDULES)[2]),
            "value": _schedule_value, "name": lambda rng, s: rng.choice(SCHEDULES)[0]},
)
def create_schedule(
    state: IotState,
    device_id: DeviceId,
    action: Annotated[ActionName, Field(description="What to do to the device at that time.")],
    time: Annotated[str, Field(pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description="Time of day on the hub clock "
                                                                                   "(UTC), HH:MM, e.g. '07:30'.")],
    value: Value = None,
    days: Annotated[list[Weekday] | None, Field(min_length=1, max_length=7,
                                                description="Weekdays it runs on; every day when omitted.")] = None,
    name: Annotated[str | None, Field(max_length=60, description="A label, e.g. 'Porch light at dusk'.")] = None,
) -> dict:
    """Schedule an action on a device at a time of day on some weekdays. Returns the schedule with
    its next_run_at. Fails with UNSUPPORTED_CAPABILITY (the device cannot do that action),
    ACTION_VALUE_REQUIRED or UNEXPECTED_VALUE, VALUE_OUT_OF_RANGE, SETPOINT_OUT_OF_RANGE,
    SCHEDULE_EXISTS (the same action at the same time is already scheduled) or
    SCHEDULE_LIMIT_REACHED (10 per device). An offline device is allowed: the run will report it."""
    device = state.devices.get(device_id)
    _check_action_definition(device, action, value)
    run_days = [d for d in WEEKDAYS if d in (days or WEEKDAYS)]
    existing = state.schedules.where(device_id=device_id)
    twin = next((sc for sc in existing if (sc["action"], sc["value"], sc["time"], sc["days"])
                 == (action, value, time, run_days)), None)
    if twin is not None:
        raise Conflict(f"schedule {twin['id']} already does {action} at {time} on these days",
                       reason="SCHEDULE_EXISTS", schedule_id=twin["id"])
    require(len(existing) < MAX_SCHEDULES_PER_DEVICE, f"a device holds at most {MAX_SCHEDULES_PER_DEVICE} schedules",
            reason="SCHEDULE_LIMIT_REACHED", error=ResourceExhausted, limit=MAX_SCHEDULES_PER_DEVICE)
    schedule = state.schedules.insert({
        "home_id": device["home_id"], "device_id": device_id, "name": name or f"{device['name']}: {action} at {time}",
        "action": action, "value": value, "time": time, "days": run_days, "enabled": True,
        "next_run_at": iso_datetime(_next_run(time, run_days, after=state.now())), "last_run_at": None,
        "last_result": None, "created_at": iso_datetime(state.now()),
    })
    return _schedule_view(state, schedule)


@server.tool(
    answers=("action", "time", "enabled", "next_run_at"),
    read_only=True,
    reads=["home", "schedule", "device"],
    errors=["HOME_NOT_FOUND", "DEVICE_NOT_FOUND"],
    examples=[lambda s: {"home_id": _home(s)["id"]},
              lambda s: {"home_id": _home(s)["id"], "device_id": _device(s, "Thermostat")["id"]}],
    asks=("list the schedules at {home_id}", "show me what's scheduled in {home_id}",
          "show the schedules for {device_id}", "show what runs next on the schedule at {home_id}"),
)
def list_schedules(
    state: IotState,
    home_id: HomeId,
    device_id: Annotated[str | None, ref("device", "Only schedules of this device (dev_...).")] = None,
) -> dict:
    """A home's schedules soonest first: device, action and value, time and weekdays, next_run_at,
    whether it is due now, and the result of its last run. Also the hub's current time. Fails with
    HOME_NOT_FOUND or DEVICE_NOT_FOUND."""
    state.homes.get(home_id)
    filters: Record = {"home_id": home_id}
    if device_id is not None:
        state.devices.get(device_id)
        filters["device_id"] = device_id
    schedules = sorted(state.schedules.where(**filters), key=lambda sc: sc["next_run_at"])
    return {"home_id": home_id, "hub_time": iso_datetime(state.now()),
            "schedules": [_schedule_view(state, sc) for sc in schedules]}


@server.tool(
    reads=["home", "schedule", "device"],
    mutates=["schedule", "device"],
    errors=["HOME_NOT_FOUND"],
    examples=[lambda s: {"home_id": _home(s)["id"]}],
    asks=("run the schedules that are due at {home_id}", "fire off any due schedules in {home_id}",
          "process whatever is scheduled to run now at {home_id}", "catch up on due schedules for {home_id}"),
)
def run_due_schedules(state: IotState, home_id: HomeId) -> dict:
    """Run every enabled schedule of the home whose next_run_at is at or before the hub's current
    time, as the hub does each minute. Each run applies its action (a device that is offline, a
    jammed lock or an out-of-range value is reported as the run's failure, not raised) and moves
    next_run_at to the next occurrence. Returns the runs and the hub time; an empty list when
    nothing is due. Fails with HOME_NOT_FOUND."""
    state.homes.get(home_id)
    now = iso_datetime(state.now())
    runs = []
    for schedule in state.schedules.where(lambda sc: sc["enabled"] and sc["next_run_at"] <= now, home_id=home_id):
        result = _try_action(state, schedule["device_id"], schedule["action"], schedule["value"])
        state.schedules.update(schedule["id"], last_run_at=now, last_result=result["reason"] or "ok",
                               next_run_at=iso_datetime(_next_run(schedule["time"], schedule["days"],
                                                                  after=state.now())))
        runs.append({"schedule_id": schedule["id"], "name": schedule["name"], "action": schedule["action"], **result})
    return {"home_id": home_id, "hub_time": now, "runs": runs}


def _create_automation_asks(a: dict) -> list[str]:
    """Trigger and action are slots, worded by the kind of trigger; a disabled start is said in words."""
    trigger = a.get("trigger", "")
    if trigger.startswith("temperature"):
        cond = "{trigger_device_id} reads {trigger}" + (" {threshold}°C" if "threshold" in a else "")
    elif trigger.startswith(("motion", "smoke")):
        cond = "{trigger_device_id} reports {trigger}"
    else:
        cond = "{trigger_device_id} is {trigger}"
    then = "{action}" + (" to {value}" if "value" in a and a.get("action") in VALUE_ACTIONS else "")
    found = [f'create an automation called "{{name}}": when {cond}, have {{action_device_id}} {then}',
             f'set up a rule named "{{name}}" so that if {cond}, {{action_device_id}} will {then}',
             f'automate this as "{{name}}": whenever {cond}, make {{action_device_id}} {then}']
    return [t + ", but leave it disabled for now" for t in found] if a.get("enabled") is False else found


@server.tool(
    idempotent=True,  # the same name again is refused with AUTOMATION_NAME_TAKEN
    reads=["device", "automation"],
    produces=["automation"],
    errors=["DEVICE_NOT_FOUND", "DEVICE_NOT_IN_HOME", "INVALID_TRIGGER", "THRESHOLD_REQUIRED",
            "UNSUPPORTED_CAPABILITY", "ACTION_VALUE_REQUIRED", "UNEXPECTED_VALUE", "VALUE_OUT_OF_RANGE",
            "SETPOINT_OUT_OF_RANGE", "AUTOMATION_NAME_TAKEN", "AUTOMATION_LOOP", "AUTOMATION_LIMIT_REACHED"],
    examples=[lambda s: {"name": "Front door unlocked: hallway light", "trigger_device_id":
                         _device(s, "Front Door Lock")["id"], "trigger": "unlocked",
                         "action_device_id": _device(s, "Hallway Light")["id"], "action": "turn_on"},
              lambda s: {"name": "Bedroom too cold", "trigger_device_id": _device(s, "Bedroom Sensor")["id"],
                         "trigger": "temperature_below", "threshold": 18.5,
                         "action_device_id": _device(s, "Bedroom Thermostat")["id"], "action": "set_heat_setpoint",
                         "value": 20}],
    asks=_create_automation_asks,
    values={"name": lambda rng, s: rng.choice(AUTOMATION_NAMES),
            "threshold": _threshold, "value": _automation_value},
)
def create_automation(
    state: IotState,
    name: Annotated[str, Field(min_length=1, max_length=60, description="Automation name, unique in the home.")],
    trigger_device_id: Annotated[str, ref("device", "Id of the sensor or device whose state triggers it.")],
    trigger: Annotated[TriggerName, Field(
        description="The condition: temperature_above/below (temperature sensors, thermostats), motion_detected/"
        "cleared (motion sensors), opened/closed (door sensors), smoke_detected, turned_on/off (lights, plugs, "
        "cameras), locked/unlocked (locks).")],
    action_device_id: Annotated[str, ref("device", "Id of the device to act on, in the same home.")],
    action: Annotated[ActionName, Field(description="What to do to the action device when the trigger fires.")],
    threshold: Annotated[float | None, Field(ge=-40, le=80, description="°C; required for temperature_above and "
                                                                        "temperature_below.")] = None,
    value: Value = None,
    enabled: Annotated[bool, Field(description="Start enabled (true) or save it disabled.")] = True,
) -> dict:
    """Create an automation: when the trigger device meets the condition, do the action on the
    action device. It fires at evaluate_automations. Returns the automation. Fails with
    INVALID_TRIGGER (the device cannot report that condition), THRESHOLD_REQUIRED,
    UNSUPPORTED_CAPABILITY, ACTION_VALUE_REQUIRED, UNEXPECTED_VALUE, VALUE_OUT_OF_RANGE, SETPOINT_OUT_OF_RANGE,
    DEVICE_NOT_IN_HOME, AUTOMATION_NAME_TAKEN, AUTOMATION_LIMIT_REACHED (25 per home) or
    AUTOMATION_LOOP (its action would re-trigger it, directly or through enabled automations)."""
    trigger_device = state.devices.get(trigger_device_id)
    action_device = state.devices.get(action_device_id)
    home_id = trigger_device["home_id"]
    _require_in_home(action_device, home_id)
    watches, needs_threshold, _ = TRIGGERS[trigger]
    require(trigger_device["type"] in watches, f"{trigger_device['name']} is a {trigger_device['type']}; {trigger} "
            f"needs a {' or '.join(sorted(watches))}", reason="INVALID_TRIGGER", error=InvalidArgument)
    if needs_threshold:
        require(threshold is not None, f"{trigger} needs a threshold in °C", reason="THRESHOLD_REQUIRED",
                error=InvalidArgument)
    else:
        threshold = None
    _check_action_definition(action_device, action, value)
    automations = state.automations.where(home_id=home_id)
    clash = next((a for a in automations if a["name"].casefold() == name.strip().casefold()), None)
    if clash is not None:
        raise Conflict(f"an automation named {clash['name']!r} already exists in this home",
                       reason="AUTOMATION_NAME_TAKEN", automation_id=clash["id"])
    require(len(automations) < MAX_AUTOMATIONS_PER_HOME, f"a home holds at most {MAX_AUTOMATIONS_PER_HOME} "
            "automations", reason="AUTOMATION_LIMIT_REACHED", error=ResourceExhausted, limit=MAX_AUTOMATIONS_PER_HOME)
    if enabled:
        _require_no_loop(state, trigger_device, action_device)
    return state.automations.insert(_automation_record(state, home_id, name.strip(), trigger_device, trigger,
                                                       threshold, action_device, action, value, enabled,
                                                       created=state.now()))


def _list_automations_asks(a: dict) -> list[str]:
    found = ["list the automations at {home_id}", "show me the automations set up in {home_id}",
             "show what automations I have at {home_id}"]
    if a.get("enabled") is True:
        found += ["list the enabled automations at {home_id}", "show me which automations are active in {home_id}"]
    if a.get("enabled") is False:
        found += ["list the disabled automations at {home_id}", "find the automations I've paused at {home_id}"]
    return found


@server.tool(
    answers=("trigger", "action", "enabled"),
    read_only=True,
    reads=["home", "automation", "device"],
    errors=["HOME_NOT_FOUND"],
    examples=[lambda s: {"home_id": _home(s)["id"]}, lambda s: {"home_id": _home(s)["id"], "enabled": False}],
    asks=_list_automations_asks,
)
def list_automations(
    state: IotState,
    home_id: HomeId,
    enabled: Annotated[bool | None, Field(description="Only enabled (true) or disabled (false) ones.")] = None,
) -> dict:
    """A home's automations: trigger device and condition, action device and action, enabled,
    whether the condition held at the last evaluation, when it last fired and with what result.
    Fails with HOME_NOT_FOUND."""
    state.homes.get(home_id)
    filters = {} if enabled is None else {"enabled": enabled}
    autos = []
    for auto in state.automations.where(home_id=home_id, **filters):
        trigger_device, action_device = state.devices.find(auto["trigger_device_id"]), state.devices.find(
            auto["action_device_id"])
        autos.append({**auto, "trigger_device": trigger_device and trigger_device["name"],
                      "action_device": action_device and action_device["name"]})
    return {"home_id": home_id, "automations": autos}


@server.tool(
    idempotent=True,
    reads=["automation", "device"],
    mutates=["automation"],
    errors=["AUTOMATION_NOT_FOUND", "AUTOMATION_LOOP"],
    examples=[lambda s: {"automation_id": s.automations.first(home_id=_home(s)["id"], enabled=False)["id"],
                         "enabled": True},
              lambda s: {"automation_id": s.automations.first(home_id=_home(s)["id"], enabled=True)["id"],
                         "enabled": False}],
    asks=lambda a: (("enable {automation_id}", "turn {automation_id} back on", "switch on {automation_id}")
                    if a.get("enabled") else
                    ("disable {automation_id}", "pause {automation_id}", "turn off {automation_id}")),
)
def set_automation_enabled(
    state: IotState,
    automation_id: Annotated[str, ref("automation", "Id of the automation (aut_...), from list_automations.")],
    enabled: Annotated[bool, Field(description="true enables it, false disables it.")],
) -> dict:
    """Enable or disable an automation; an enabled one is re-armed (it fires at the next evaluation
    that finds its condition true). Returns the automation. Fails with AUTOMATION_LOOP when
    enabling it would close a loop with other enabled automations."""
    auto = state.automations.get(automation_id)
    if auto["enabled"] == enabled:
        return auto
    if enabled:
        _require_no_loop(state, state.devices.get(auto["trigger_device_id"]),
                         state.devices.get(auto["action_device_id"]), skip=automation_id)
    return state.automations.update(automation_id, enabled=enabled, condition_met=False)


@server.tool(
    idempotent=True,  # edge-triggered: with no new readings a repeat fires nothing
    reads=["home", "automation", "device"],
    mutates=["automation", "device"],
    errors=["HOME_NOT_FOUND"],
    examples=[lambda s: {"home_id": _home(s)["id"]}],
    asks=("check the automations at {home_id} against the current readings", "run the automations for {home_id} now",
          "evaluate the automations in {home_id}", "see if any automations at {home_id} should fire"),
)
def evaluate_automations(state: IotState, home_id: HomeId) -> dict:
    """Check the home's enabled automations against the current readings and device states. One
    whose condition holds now and did not at the previous evaluation fires its action (a failure
    such as DEVICE_OFFLINE is reported in the result, not raised); a condition that no longer
    holds re-arms it. Passes repeat until nothing more fires, so chained automations settle.
    Automations watching an offline device are skipped. Returns the automations fired. Fails with
    HOME_NOT_FOUND."""
    state.homes.get(home_id)
    fired, skipped = [], set()
    for _ in range(MAX_AUTOMATIONS_PER_HOME + 1):  # loops are refused, so chains settle within this
        changed = False
        for auto in state.automations.where(home_id=home_id, enabled=True):
            device = state.devices.find(auto["trigger_device_id"])
            holds = None if device is None else _trigger_holds(device, auto["trigger"], auto["threshold"])
            if holds is None:
                skipped.add(auto["id"])
                continue
            if holds and not auto["condition_met"]:
                result = _try_action(state, auto["action_device_id"], auto["action"], auto["value"])
                state.automations.update(auto["id"], condition_met=True, last_fired_at=iso_datetime(state.now()),
                                         fire_count=auto["fire_count"] + 1, last_result=result["reason"] or "ok")
                fired.append({"automation_id": auto["id"], "name": auto["name"], "action": auto["action"], **result})
                changed = True
            elif not holds and auto["condition_met"]:
                state.automations.update(auto["id"], condition_met=False)
                changed = True
        if not changed:
            break
    return {"home_id": home_id, "fired": fired, "skipped_offline_trigger": sorted(skipped)}


@server.tool(
    answers=("installed_version", "latest_version", "update_available"),
    read_only=True,
    reads=["device"],
    errors=["DEVICE_NOT_FOUND"],
    examples=[lambda s: {"device_id": _device(s, "Living Room Lamp")["id"]}],
    asks=("check the firmware on {device_id}", "see if there's a firmware update for {device_id}",
          "find out which firmware version {device_id} is running",
          "show me the release notes for the latest firmware of {device_id}"),
)
def get_firmware_info(state: IotState, device_id: DeviceId) -> dict:
    """A device's firmware: installed and latest version, whether an update is available, the latest
    release notes, and whether it can be installed now (and if not, why: DEVICE_OFFLINE,
    BATTERY_TOO_LOW). Fails with DEVICE_NOT_FOUND."""
    device = state.devices.get(device_id)
    latest = MODELS[device["model"]]["firmware"][-1]
    available = device["firmware_version"] != latest
    blocker = _firmware_blocker(device)
    return {"device_id": device_id, "name": device["name"], "model": device["model"],
            "installed_version": device["firmware_version"], "latest_version": latest, "update_available": available,
            "release_notes": MODELS[device["model"]]["notes"], "battery": device["battery"],
            "can_update_now": available and blocker is None, "blocked_by": blocker}


def _firmware_blocker(device: Record) -> str | None:
    if not device["online"]:
        return "DEVICE_OFFLINE"
    if device["battery"] is not None and device["battery"] < MIN_FIRMWARE_BATTERY:
        return "BATTERY_TOO_LOW"
    return None


@server.tool(
    destructive=True,  # there is no downgrade
    idempotent=True,  # a repeat is refused with FIRMWARE_UP_TO_DATE
    reads=["device"],
    mutates=["device"],
    errors=["DEVICE_NOT_FOUND", "DEVICE_OFFLINE", "BATTERY_TOO_LOW", "FIRMWARE_UP_TO_DATE"],
    examples=[_firmware_example],
    asks=("update the firmware on {device_id}", "install the latest firmware on {device_id}",
          "upgrade {device_id} to the newest firmware", "apply the pending firmware update to {device_id}"),
)
def update_firmware(state: IotState, device_id: DeviceId) -> dict:
    """Install the latest firmware on a device (it restarts and keeps its settings; no downgrade).
    Returns the previous and new version. Fails with FIRMWARE_UP_TO_DATE, DEVICE_OFFLINE or
    BATTERY_TOO_LOW (battery devices need 25% or more: charge or replace the batteries first)."""
    device = state.devices.get(device_id)
    latest = MODELS[device["model"]]["firmware"][-1]
    require(device["firmware_version"] != latest, f"{device['name']} already runs {latest}, the latest version",
            reason="FIRMWARE_UP_TO_DATE", error=Conflict, version=latest)
    _require_online(device)
    require(device["battery"] is None or device["battery"] >= MIN_FIRMWARE_BATTERY,
            f"{device['name']} has {device['battery']}% battery; updates need {MIN_FIRMWARE_BATTERY}% or more",
            reason="BATTERY_TOO_LOW", battery=device["battery"], minimum=MIN_FIRMWARE_BATTERY)
    state.devices.update(device_id, firmware_version=latest, firmware_updated_at=iso_datetime(state.now()))
    return {"device_id": device_id, "name": device["name"], "previous_version": device["firmware_version"],
            "installed_version": latest, "release_notes": MODELS[device["model"]]["notes"]}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
