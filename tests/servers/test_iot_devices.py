"""The iot_devices server's own rules: device states and capabilities, scenes, schedules,
automations, firmware and typed failures, each checked in the state that causes it. What every
server guarantees is the conformance kit's (tests/servers/test_conformance.py).
"""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import iot_devices
from prove_servers.iot_devices import IotOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def device(h, name: str, home: int = 0) -> dict:
    state = h.state
    home_id = state.homes.all()[home]["id"]
    return state.devices.first(lambda d: d["name"] == name, home_id=home_id)


def dev_id(h, name: str, home: int = 0) -> str:
    return device(h, name, home)["id"]


def home_id(h, home: int = 0) -> str:
    return h.state.homes.all()[home]["id"]


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert len(TOOLS) == 25 and servers_registered_by(iot_devices) == [server]
    assert (server.name, server.domain) == ("iot_devices", "IoT")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {
        "list_homes", "list_rooms", "list_devices", "get_device", "get_sensor_readings", "list_scenes",
        "list_schedules", "list_automations", "get_firmware_info",
    }
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"delete_scene", "update_firmware"}
    idempotent = {n for n, t in TOOLS.items() if t.spec.annotations.idempotent and not t.spec.annotations.read_only}
    assert idempotent == set(TOOLS) - read_only - {"activate_scene", "run_due_schedules"}
    # activate_scene stamps last_activated_at; what run_due_schedules runs depends on the clock
    assert TOOLS["create_scene"].spec.produces == ("scene",)
    assert TOOLS["create_scene"].spec.entity_params() == {"home_id": "home", "device_ids": "device"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_ids_are_seeded_too(h):
    other = ServerHarness(server, seed=1)
    assert {d["id"] for d in h.state.devices}.isdisjoint(d["id"] for d in other.state.devices)


def test_seed_has_the_scenarios_tasks_need(h):
    state = h.state
    assert len(state.homes) == 2 and len(state.rooms) == 10
    assert {d["type"] for d in state.devices} == set(iot_devices.MODELS[m]["type"] for m in iot_devices.MODELS)
    assert not device(h, "Garage Camera")["online"]
    assert device(h, "Garage Door Lock")["state"]["jammed"]
    assert device(h, "Front Door Lock")["battery"] < iot_devices.MIN_FIRMWARE_BATTERY
    assert state.scenes.where(home_id=home_id(h)) and state.automations.where(enabled=False)
    assert all(len(state.readings.where(device_id=d["id"])) == iot_devices.READING_HISTORY
               for d in state.devices if d["type"] in iot_devices.SENSOR_TYPES)
    due = h.ok("list_schedules", home_id=home_id(h))
    assert due["hub_time"] == "2026-03-02T09:00:00Z" and any(s["due"] for s in due["schedules"])


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=IotOptions(homes=20))
    assert len(big.state.devices) == 10 * len(h.state.devices)
    assert len({home["name"] for home in big.state.homes}) == 20
    big.run_examples()
    with pytest.raises(ValueError):
        IotOptions(homes=0)


# -- flows ----------------------------------------------------------------------------------------


def test_ids_flow_from_homes_to_devices_to_a_scene(h):
    home = h.ok("list_homes")["homes"][0]
    assert home["offline_device_count"] >= 1
    lights = h.ok("list_devices", home_id=home["id"], device_type="light", online=True)["devices"]
    lamp = next(d for d in lights if d["name"] == "Living Room Lamp")
    h.ok("set_light", device_id=lamp["id"], brightness=35, color_temperature=2700)
    lock = next(d for d in h.ok("list_devices", home_id=home["id"], device_type="lock")["devices"]
                if not d["state"]["jammed"])
    h.ok("set_lock", device_id=lock["id"], locked=True)
    scene = h.ok("create_scene", home_id=home["id"], name="Evening", device_ids=[lamp["id"], lock["id"]])
    assert {d["device_id"]: d["settings"] for d in scene["devices"]} == {
        lamp["id"]: {"on": True, "brightness": 35, "color_temperature": 2700}, lock["id"]: {"locked": True}}

    h.ok("set_device_power", device_id=lamp["id"], on=False)
    h.ok("set_lock", device_id=lock["id"], locked=False)
    listed = h.ok("list_scenes", home_id=home["id"])["scenes"]
    evening = next(s for s in listed if s["name"] == "Evening")
    applied = h.ok("activate_scene", scene_id=evening["id"])
    assert applied["skipped"] == [] and len(applied["applied"]) == 2
    assert h.ok("get_device", device_id=lamp["id"])["state"] == {
        "on": True, "brightness": 35, "color_temperature": 2700}
    assert h.ok("get_device", device_id=lock["id"])["state"]["locked"] is True
    h.ok("delete_scene", scene_id=evening["id"])
    h.fails("activate_scene", "SCENE_NOT_FOUND", "NOT_FOUND", scene_id=evening["id"])


def test_a_scene_skips_devices_that_cannot_take_it(h):
    state = h.state
    scene = state.scenes.first(home_id=home_id(h), name="Good Night")
    lamp = dev_id(h, "Living Room Lamp")
    state.devices.update(lamp, online=False)  # arrange: the lamp dropped off the network
    result = h.ok("activate_scene", scene_id=scene["id"])
    assert result["skipped"] == [{"device_id": lamp, "device": "Living Room Lamp", "reason": "DEVICE_OFFLINE"}]
    assert {a["device"] for a in result["applied"]} == {"Ceiling Light", "Front Door Lock", "Thermostat"}
    assert device(h, "Front Door Lock")["state"]["locked"] is True
    assert h.state.scenes.get(scene["id"])["last_activated_at"] == "2026-03-02T09:00:00Z"


def test_devices_are_grouped_by_room_and_can_move(h):
    home = home_id(h)
    room = h.ok("create_room", home_id=home, name="Nursery")
    plug = dev_id(h, "Garage Plug")
    h.ok("move_device", device_id=plug, room_id=room["id"])
    rooms = {r["name"]: r for r in h.ok("list_rooms", home_id=home)["rooms"]}
    assert [d["id"] for d in rooms["Nursery"]["devices"]] == [plug]
    assert plug not in [d["id"] for d in rooms["Garage"]["devices"]]
    assert h.ok("list_devices", home_id=home, room_id=room["id"])["total"] == 1


def test_schedules_run_on_the_hub_clock(h):
    home = home_id(h)
    camera, plug = dev_id(h, "Garage Camera"), dev_id(h, "Coffee Maker Plug")
    made = h.ok("create_schedule", device_id=plug, action="turn_off", time="09:03")
    assert (made["next_run_at"], made["due"]) == ("2026-03-02T09:03:00Z", False)
    h.ok("create_schedule", device_id=camera, action="turn_off", time="09:02", days=["mon"])

    first = h.ok("run_due_schedules", home_id=home)  # hub time 09:02: the 09:00 and 09:02 ones
    assert first["hub_time"] == "2026-03-02T09:02:00Z"
    runs = {r["name"]: r for r in first["runs"]}
    assert set(runs) == {"Hallway light off after the morning rush", "Garage Camera: turn_off at 09:02"}
    assert runs["Garage Camera: turn_off at 09:02"]["reason"] == "DEVICE_OFFLINE"
    assert device(h, "Hallway Light")["state"]["on"] is False

    listed = h.ok("list_schedules", home_id=home, device_id=plug)  # that run ticked the clock to 09:03
    assert listed["hub_time"] == "2026-03-02T09:03:00Z" and listed["schedules"][0]["due"]
    second = h.ok("run_due_schedules", home_id=home)
    assert [r["schedule_id"] for r in second["runs"]] == [made["id"]]
    assert device(h, "Coffee Maker Plug")["state"] == {"on": False, "power_watts": 0.0}
    quiet = h.state_hash()
    assert h.ok("run_due_schedules", home_id=home)["runs"] == []  # nothing due at 09:04
    assert h.state_hash() == quiet
    after = {s["id"]: s for s in h.ok("list_schedules", home_id=home, device_id=plug)["schedules"]}
    assert after[made["id"]]["next_run_at"] == "2026-03-03T09:03:00Z"
    assert after[made["id"]]["last_result"] == "ok"
    weekly = h.ok("list_schedules", home_id=home, device_id=camera)["schedules"][0]
    assert (weekly["next_run_at"], weekly["last_result"]) == ("2026-03-09T09:02:00Z", "DEVICE_OFFLINE")


def test_automations_fire_once_per_edge_and_chains_settle(h):
    home = home_id(h)
    light, lock = dev_id(h, "Hallway Light"), dev_id(h, "Front Door Lock")
    h.state.devices.update(light, state={**device(h, "Hallway Light")["state"], "on": False})
    chained = h.ok("create_automation", name="Hallway lit: lock up", trigger_device_id=light,
                   trigger="turned_on", action_device_id=lock, action="lock")
    assert chained["condition_met"] is False
    h.ok("set_lock", device_id=lock, locked=False)

    fired = h.ok("evaluate_automations", home_id=home)["fired"]
    assert [f["name"] for f in fired] == ["Hallway motion lights", "Hallway lit: lock up"]
    assert device(h, "Hallway Light")["state"]["on"] and device(h, "Front Door Lock")["state"]["locked"]
    settled = h.state_hash()
    assert h.ok("evaluate_automations", home_id=home)["fired"] == []
    assert h.state_hash() == settled

    h.ok("set_device_power", device_id=light, on=False)  # the chained trigger clears ...
    h.ok("set_lock", device_id=lock, locked=False)
    assert h.ok("evaluate_automations", home_id=home)["fired"] == []  # ... and re-arms; motion never cleared
    h.ok("set_device_power", device_id=light, on=True)
    assert [f["name"] for f in h.ok("evaluate_automations", home_id=home)["fired"]] == ["Hallway lit: lock up"]
    assert device(h, "Front Door Lock")["state"]["locked"]
    listed = {a["name"]: a for a in h.ok("list_automations", home_id=home)["automations"]}
    assert listed["Hallway motion lights"]["fire_count"] == 1 and listed["Hallway lit: lock up"]["fire_count"] == 2


def test_chains_settle_whatever_order_the_automations_were_made_in(h):
    lamp, lock = device(h, "Living Room Lamp"), dev_id(h, "Front Door Lock")
    h.state.devices.update(lamp["id"], state={**lamp["state"], "on": False})  # arrange
    h.ok("set_lock", device_id=lock, locked=False)
    h.ok("create_automation", name="Lamp on: lock up", trigger_device_id=lamp["id"], trigger="turned_on",
         action_device_id=lock, action="lock")  # made first, but fires second
    h.ok("create_automation", name="Motion: lamp on", trigger_device_id=dev_id(h, "Hallway Motion"),
         trigger="motion_detected", action_device_id=lamp["id"], action="turn_on")
    fired = [f["name"] for f in h.ok("evaluate_automations", home_id=home_id(h))["fired"]]
    assert fired == ["Hallway motion lights", "Motion: lamp on", "Lamp on: lock up"]
    assert device(h, "Front Door Lock")["state"]["locked"]


def test_an_automation_acting_on_an_offline_device_reports_it(h):
    home = home_id(h)
    h.ok("create_automation", name="Motion: camera on", trigger_device_id=dev_id(h, "Hallway Motion"),
         trigger="motion_detected", action_device_id=dev_id(h, "Garage Camera"), action="turn_on")
    fired = {f["name"]: f for f in h.ok("evaluate_automations", home_id=home)["fired"]}
    assert fired["Motion: camera on"]["reason"] == "DEVICE_OFFLINE"
    disabled = h.ok("list_automations", home_id=home, enabled=False)["automations"]
    assert [a["name"] for a in disabled] == ["Door opened: lights on"]


def test_firmware_update_flow(h):
    lamp = dev_id(h, "Living Room Lamp")
    info = h.ok("get_firmware_info", device_id=lamp)
    assert info["update_available"] and info["can_update_now"] and info["blocked_by"] is None
    updated = h.ok("update_firmware", device_id=lamp)
    assert (updated["previous_version"], updated["installed_version"]) == (info["installed_version"],
                                                                           info["latest_version"])
    assert not h.ok("get_firmware_info", device_id=lamp)["update_available"]
    h.fails("update_firmware", "FIRMWARE_UP_TO_DATE", "CONFLICT", device_id=lamp)
    blocked = h.ok("get_firmware_info", device_id=dev_id(h, "Front Door Lock"))
    assert (blocked["update_available"], blocked["can_update_now"], blocked["blocked_by"]) == (
        True, False, "BATTERY_TOO_LOW")


def test_thermostat_reports_what_it_is_doing(h):
    thermostat = device(h, "Thermostat")
    warm = h.ok("set_thermostat", device_id=thermostat["id"], mode="heat", heat_setpoint=30)
    assert warm["hvac_action"] == "heating" and warm["state"]["heat_setpoint"] == 30
    cold = h.ok("set_thermostat", device_id=thermostat["id"], mode="cool", cool_setpoint=16)
    assert cold["hvac_action"] == "cooling"
    assert h.ok("set_thermostat", device_id=thermostat["id"], mode="off")["hvac_action"] == "idle"


def test_sensor_readings_newest_first(h):
    sensor = device(h, "Living Room Sensor")
    readings = h.ok("get_sensor_readings", device_id=sensor["id"], limit=4)
    assert readings["current"] == sensor["state"] and not readings["stale"]
    stamps = [r["at"] for r in readings["readings"]]
    assert len(stamps) == 4 and stamps == sorted(stamps, reverse=True)
    assert readings["readings"][0]["values"] == sensor["state"]


# -- typed failures -------------------------------------------------------------------------------


def test_device_offline(h):
    camera = dev_id(h, "Garage Camera")
    h.fails("set_device_power", "DEVICE_OFFLINE", "FAILED_PRECONDITION", device_id=camera, on=False)
    h.fails("update_camera_settings", "DEVICE_OFFLINE", "FAILED_PRECONDITION", device_id=camera,
            motion_sensitivity="low")
    h.fails("update_firmware", "DEVICE_OFFLINE", "FAILED_PRECONDITION", device_id=camera)
    error = h.fails("create_scene", "DEVICE_OFFLINE", "FAILED_PRECONDITION", home_id=home_id(h), name="Garage",
                    device_ids=[camera])
    assert error["details"]["last_seen_at"] < "2026-03-02T09:00:00Z"


def test_unsupported_capability(h):
    lock, ceiling = dev_id(h, "Front Door Lock"), dev_id(h, "Ceiling Light")
    error = h.fails("set_light", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=lock, brightness=50)
    assert error["details"]["capabilities"] == ["lock", "battery"]
    h.fails("set_light", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=ceiling,
            color_temperature=3000)  # dimmable only
    h.fails("set_device_power", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT",
            device_id=dev_id(h, "Thermostat"), on=False)
    h.fails("set_lock", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=ceiling, locked=True)
    h.fails("set_thermostat", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=ceiling, mode="heat")
    h.fails("update_camera_settings", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT",
            device_id=dev_id(h, "Garage Camera"), recording_mode="continuous")  # battery camera
    h.fails("get_sensor_readings", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=ceiling)
    h.fails("create_scene", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", home_id=home_id(h),
            name="Sensors", device_ids=[dev_id(h, "Hallway Motion")])
    h.fails("create_schedule", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT",
            device_id=dev_id(h, "Coffee Maker Plug"), action="set_brightness", value=50, time="07:00")


def test_setpoints_are_bounded_by_the_model(h):
    t9, t5 = dev_id(h, "Thermostat"), dev_id(h, "Bedroom Thermostat")
    error = h.fails("set_thermostat", "SETPOINT_OUT_OF_RANGE", "INVALID_ARGUMENT", device_id=t9,
                    heat_setpoint=33)
    assert (error["details"]["minimum"], error["details"]["maximum"]) == (7.0, 32.0)
    h.fails("set_thermostat", "SETPOINT_OUT_OF_RANGE", "INVALID_ARGUMENT", device_id=t5, heat_setpoint=8)
    h.ok("set_thermostat", device_id=t9, heat_setpoint=8)  # the T9 goes lower than the T5
    h.fails("create_schedule", "SETPOINT_OUT_OF_RANGE", "INVALID_ARGUMENT", device_id=t5,
            action="set_heat_setpoint", value=31, time="06:00")
    h.fails("set_thermostat", "SETPOINT_DEADBAND", "INVALID_ARGUMENT", device_id=t5, mode="auto",
            heat_setpoint=22, cool_setpoint=23)
    h.fails("set_thermostat", "NOTHING_TO_CHANGE", "INVALID_ARGUMENT", device_id=t5)
    assert h.call("set_thermostat", {"device_id": t5, "heat_setpoint": 20.3}).error["reason"] == (
        "SCHEMA_VIOLATION")  # half-degree steps only


def test_lock_jammed(h):
    jammed = dev_id(h, "Garage Door Lock")
    h.fails("set_lock", "LOCK_JAMMED", "FAILED_PRECONDITION", device_id=jammed, locked=False)
    h.fails("set_lock", "LOCK_JAMMED", "FAILED_PRECONDITION", device_id=jammed, locked=True)


def test_scene_names_and_limits(h):
    home, lamp = home_id(h), dev_id(h, "Living Room Lamp")
    error = h.fails("create_scene", "SCENE_NAME_TAKEN", "CONFLICT", home_id=home, name="good night",
                    device_ids=[lamp])
    assert error["details"]["scene_id"] == h.state.scenes.first(home_id=home, name="Good Night")["id"]
    for home_index in (1, 0):  # names are unique per home, not across homes
        h.ok("create_scene", home_id=home_id(h, home_index), name="Reading",
             device_ids=[dev_id(h, "Living Room Lamp", home=home_index)])
    other_home_lamp = dev_id(h, "Ceiling Light", home=1)
    h.fails("create_scene", "DEVICE_NOT_IN_HOME", "INVALID_ARGUMENT", home_id=home, name="Mixed",
            device_ids=[lamp, other_home_lamp])
    for n in range(iot_devices.MAX_SCENES_PER_HOME - 3):
        h.ok("create_scene", home_id=home, name=f"Scene {n}", device_ids=[lamp])
    h.fails("create_scene", "SCENE_LIMIT_REACHED", "RESOURCE_EXHAUSTED", home_id=home, name="One more",
            device_ids=[lamp])


def test_automation_loops_are_refused(h):
    lamp, lock, light = (dev_id(h, n) for n in ("Living Room Lamp", "Front Door Lock", "Hallway Light"))
    error = h.fails("create_automation", "AUTOMATION_LOOP", "FAILED_PRECONDITION", name="Flicker",
                    trigger_device_id=light, trigger="turned_on", action_device_id=light, action="turn_off")
    assert error["details"]["device_path"] == [light]
    h.ok("create_automation", name="Lamp on: lock", trigger_device_id=lamp, trigger="turned_on",
         action_device_id=lock, action="lock")
    error = h.fails("create_automation", "AUTOMATION_LOOP", "FAILED_PRECONDITION", name="Locked: lamp on",
                    trigger_device_id=lock, trigger="locked", action_device_id=lamp, action="turn_on")
    assert error["details"]["device_path"] == [lamp, lock]
    saved = h.ok("create_automation", name="Locked: lamp on", trigger_device_id=lock, trigger="locked",
                 action_device_id=lamp, action="turn_on", enabled=False)  # saving it disabled is allowed
    h.fails("set_automation_enabled", "AUTOMATION_LOOP", "FAILED_PRECONDITION", automation_id=saved["id"], enabled=True)


def test_automation_definitions_are_checked(h):
    sensor, thermostat = dev_id(h, "Living Room Sensor"), dev_id(h, "Thermostat")
    base = {"name": "New", "trigger_device_id": sensor, "action_device_id": thermostat}
    h.fails("create_automation", "INVALID_TRIGGER", "INVALID_ARGUMENT", **base, trigger="motion_detected",
            action="set_heat_setpoint", value=20)
    h.fails("create_automation", "THRESHOLD_REQUIRED", "INVALID_ARGUMENT", **base, trigger="temperature_below",
            action="set_heat_setpoint", value=20)
    h.fails("create_automation", "ACTION_VALUE_REQUIRED", "INVALID_ARGUMENT", **base,
            trigger="temperature_below", threshold=18, action="set_heat_setpoint")
    h.fails("create_automation", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", **base,
            trigger="temperature_below", threshold=18, action="turn_on")
    h.fails("create_automation", "AUTOMATION_NAME_TAKEN", "CONFLICT",
            **{**base, "name": "hallway MOTION lights"}, trigger="temperature_below", threshold=18,
            action="set_heat_setpoint", value=20)
    h.fails("create_automation", "DEVICE_NOT_IN_HOME", "INVALID_ARGUMENT",
            **{**base, "action_device_id": dev_id(h, "Thermostat", home=1)}, trigger="temperature_below",
            threshold=18, action="set_heat_setpoint", value=20)
    lamp = dev_id(h, "Living Room Lamp")
    h.fails("create_automation", "VALUE_OUT_OF_RANGE", "INVALID_ARGUMENT", **{**base, "action_device_id": lamp},
            trigger="temperature_above", threshold=25, action="set_brightness", value=150)
    h.fails("create_automation", "UNEXPECTED_VALUE", "INVALID_ARGUMENT", **{**base, "action_device_id": lamp},
            trigger="temperature_above", threshold=25, action="turn_on", value=1)


def test_automation_limit(h):
    sensor, lamp = dev_id(h, "Living Room Sensor"), dev_id(h, "Living Room Lamp")
    existing = len(h.state.automations.where(home_id=home_id(h)))
    args = {"trigger_device_id": sensor, "trigger": "temperature_above", "action_device_id": lamp, "action": "turn_on"}
    for n in range(iot_devices.MAX_AUTOMATIONS_PER_HOME - existing):
        h.ok("create_automation", name=f"Warm {n}", threshold=20 + n, **args)
    h.fails("create_automation", "AUTOMATION_LIMIT_REACHED", "RESOURCE_EXHAUSTED", name="Warm x", threshold=30,
            **args)


def test_schedule_rules(h):
    strip = dev_id(h, "Bedside Strip")
    args = {"device_id": strip, "action": "set_color_temperature", "time": "20:00"}
    h.fails("create_schedule", "ACTION_VALUE_REQUIRED", "INVALID_ARGUMENT", **args)
    h.fails("create_schedule", "VALUE_OUT_OF_RANGE", "INVALID_ARGUMENT", **args, value=1800)
    made = h.ok("create_schedule", **args, value=2700, days=["sun", "sat"])
    assert made["days"] == ["sat", "sun"] and made["next_run_at"] == "2026-03-07T20:00:00Z"
    error = h.fails("create_schedule", "SCHEDULE_EXISTS", "CONFLICT", **args, value=2700, days=["sat", "sun"])
    assert error["details"]["schedule_id"] == made["id"]
    for n in range(iot_devices.MAX_SCHEDULES_PER_DEVICE - 1):
        h.ok("create_schedule", device_id=strip, action="turn_on", time=f"0{n}:15")
    h.fails("create_schedule", "SCHEDULE_LIMIT_REACHED", "RESOURCE_EXHAUSTED", device_id=strip,
            action="turn_off", time="23:59")
    bad = h.call("create_schedule", {"device_id": strip, "action": "turn_on", "time": "24:00"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"


def test_camera_rules(h):
    camera = dev_id(h, "Living Room Camera")
    h.ok("update_camera_settings", device_id=camera, recording_mode="motion_only", motion_detection=True)
    h.fails("update_camera_settings", "MOTION_DETECTION_REQUIRED", "FAILED_PRECONDITION", device_id=camera,
            motion_detection=False)
    h.ok("update_camera_settings", device_id=camera, recording_mode="off", motion_detection=False)
    h.fails("update_camera_settings", "MOTION_DETECTION_REQUIRED", "FAILED_PRECONDITION", device_id=camera,
            recording_mode="motion_only")
    h.fails("update_camera_settings", "NOTHING_TO_CHANGE", "INVALID_ARGUMENT", device_id=camera)


def test_room_rules(h):
    home = home_id(h)
    h.fails("create_room", "ROOM_NAME_TAKEN", "CONFLICT", home_id=home, name="  kitchen ")
    other_room = h.state.rooms.first(home_id=home_id(h, 1))
    h.fails("move_device", "ROOM_IN_OTHER_HOME", "INVALID_ARGUMENT", device_id=dev_id(h, "Garage Plug"),
            room_id=other_room["id"])
    for n in range(iot_devices.MAX_ROOMS_PER_HOME - len(iot_devices.LAYOUT)):
        h.ok("create_room", home_id=home, name=f"Room {n}")
    h.fails("create_room", "ROOM_LIMIT_REACHED", "RESOURCE_EXHAUSTED", home_id=home, name="Attic")


def test_firmware_battery_too_low(h):
    h.fails("update_firmware", "BATTERY_TOO_LOW", "FAILED_PRECONDITION", device_id=dev_id(h, "Front Door Lock"))


def test_set_light_needs_a_value(h):
    h.fails("set_light", "NOTHING_TO_CHANGE", "INVALID_ARGUMENT", device_id=dev_id(h, "Kitchen Lights"))


def test_unknown_ids_are_typed_not_found(h):
    h.fails("get_device", "DEVICE_NOT_FOUND", "NOT_FOUND", device_id="dev_missing")
    h.fails("list_rooms", "HOME_NOT_FOUND", "NOT_FOUND", home_id="hom_missing")
    h.fails("move_device", "ROOM_NOT_FOUND", "NOT_FOUND", device_id=dev_id(h, "Garage Plug"),
            room_id="rom_missing")
    h.fails("delete_scene", "SCENE_NOT_FOUND", "NOT_FOUND", scene_id="scn_missing")
    h.fails("set_automation_enabled", "AUTOMATION_NOT_FOUND", "NOT_FOUND", automation_id="aut_missing",
            enabled=True)
