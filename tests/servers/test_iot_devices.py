"""The iot_devices server: its tool surface, seed, device rules, scenes, schedules, automations
and typed failures.

Every failure is checked in the state that causes it: the reason, that the tool declares it, and
that the session is left exactly as it was.
"""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import iot_devices
from prove_servers.iot_devices import IotOptions, server

TOOLS = server.tools


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


def fails(rt: ServerRuntime, sid: str, tool: str, reason: str, code: str = "FAILED_PRECONDITION", **args) -> dict:
    """The call fails with ``reason`` and ``code``, the tool declares the reason, and nothing was
    written — checked on a copy run without the executor's rollback too."""
    before = rt.state_hash(sid)
    probe = State.from_snapshot(rt.state(sid).snapshot())
    with pytest.raises(ToolError):
        TOOLS[tool].fn(probe, **TOOLS[tool].validate(dict(args)))
    assert probe.state_hash() == before, f"{tool} wrote before failing with {reason}"
    result = rt.call(sid, tool, args)
    assert result.is_error, f"{tool} succeeded: {result.data}"
    assert (result.error["reason"], result.code) == (reason, code), result.error
    assert reason in TOOLS[tool].spec.errors, f"{tool} does not declare {reason}"
    assert rt.state_hash(sid) == before
    return result.error


def example_args(rt: ServerRuntime, sid: str, example) -> dict:
    return dict(example(rt.state(sid)) if callable(example) else example)


def device(rt: ServerRuntime, sid: str, name: str, home: int = 0) -> dict:
    state = rt.state(sid)
    home_id = state.homes.all()[home]["id"]
    return state.devices.first(lambda d: d["name"] == name, home_id=home_id)


def dev_id(rt: ServerRuntime, sid: str, name: str, home: int = 0) -> str:
    return device(rt, sid, name, home)["id"]


def home_id(rt: ServerRuntime, sid: str, home: int = 0) -> str:
    return rt.state(sid).homes.all()[home]["id"]


ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_25_tools_each_described_with_examples():
    assert len(TOOLS) == 25
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"
    assert (server.name, server.domain) == ("iot_devices", "IoT")


def test_annotations_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {
        "list_homes", "list_rooms", "list_devices", "get_device", "get_sensor_readings", "list_scenes",
        "list_schedules", "list_automations", "get_firmware_info",
    }
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"delete_scene", "update_firmware"}
    idempotent = {n for n, t in TOOLS.items() if t.spec.annotations.idempotent and not t.spec.annotations.read_only}
    assert idempotent == set(TOOLS) - read_only - {"activate_scene", "run_due_schedules"}
    # activate_scene stamps last_activated_at; what run_due_schedules runs depends on the clock
    assert TOOLS["create_scene"].spec.produces == ("scene",)
    assert TOOLS["create_scene"].spec.entity_params() == {"home_id": "home", "device_ids": "device"}


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
        for example in tool.examples:
            sid = rt.new_session()
            args = example_args(rt, sid, example)
            ok(rt, sid, name, **args)
            once = rt.state_hash(sid)
            rt.call(sid, name, args)  # may be refused (name taken, up to date, ...) but changes nothing
            assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash(first.new_session()) == again.state_hash(again.new_session())
    assert other.state_hash(other.new_session()) != first.state_hash(first.new_session())
    ids = {d["id"] for d in first.state(first.new_session()).devices}
    assert ids.isdisjoint(d["id"] for d in other.state(other.new_session()).devices)


def test_seed_has_the_scenarios_tasks_need(rt, sid):
    state = rt.state(sid)
    assert len(state.homes) == 2 and len(state.rooms) == 10
    assert {d["type"] for d in state.devices} == set(iot_devices.MODELS[m]["type"] for m in iot_devices.MODELS)
    assert not device(rt, sid, "Garage Camera")["online"]
    assert device(rt, sid, "Garage Door Lock")["state"]["jammed"]
    assert device(rt, sid, "Front Door Lock")["battery"] < iot_devices.MIN_FIRMWARE_BATTERY
    assert state.scenes.where(home_id=home_id(rt, sid)) and state.automations.where(enabled=False)
    assert all(len(state.readings.where(device_id=d["id"])) == iot_devices.READING_HISTORY
               for d in state.devices if d["type"] in iot_devices.SENSOR_TYPES)
    due = ok(rt, sid, "list_schedules", home_id=home_id(rt, sid))
    assert due["hub_time"] == "2026-03-02T09:00:00Z" and any(s["due"] for s in due["schedules"])


def test_a_ten_times_larger_seed_works(rt):
    big = ServerRuntime(server, options=IotOptions(homes=20))
    sid = big.new_session()
    assert len(big.state(sid).devices) == 10 * len(rt.state(rt.new_session()).devices)
    assert len({h["name"] for h in big.state(sid).homes}) == 20
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        IotOptions(homes=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(iot_devices)
    registered = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- flows ----------------------------------------------------------------------------------------


def test_ids_flow_from_homes_to_devices_to_a_scene(rt, sid):
    home = ok(rt, sid, "list_homes")["homes"][0]
    assert home["offline_device_count"] >= 1
    lights = ok(rt, sid, "list_devices", home_id=home["id"], device_type="light", online=True)["devices"]
    lamp = next(d for d in lights if d["name"] == "Living Room Lamp")
    ok(rt, sid, "set_light", device_id=lamp["id"], brightness=35, color_temperature=2700)
    lock = next(d for d in ok(rt, sid, "list_devices", home_id=home["id"], device_type="lock")["devices"]
                if not d["state"]["jammed"])
    ok(rt, sid, "set_lock", device_id=lock["id"], locked=True)
    scene = ok(rt, sid, "create_scene", home_id=home["id"], name="Evening", device_ids=[lamp["id"], lock["id"]])
    assert {d["device_id"]: d["settings"] for d in scene["devices"]} == {
        lamp["id"]: {"on": True, "brightness": 35, "color_temperature": 2700}, lock["id"]: {"locked": True}}

    ok(rt, sid, "set_device_power", device_id=lamp["id"], on=False)
    ok(rt, sid, "set_lock", device_id=lock["id"], locked=False)
    listed = ok(rt, sid, "list_scenes", home_id=home["id"])["scenes"]
    evening = next(s for s in listed if s["name"] == "Evening")
    applied = ok(rt, sid, "activate_scene", scene_id=evening["id"])
    assert applied["skipped"] == [] and len(applied["applied"]) == 2
    assert ok(rt, sid, "get_device", device_id=lamp["id"])["state"] == {
        "on": True, "brightness": 35, "color_temperature": 2700}
    assert ok(rt, sid, "get_device", device_id=lock["id"])["state"]["locked"] is True
    ok(rt, sid, "delete_scene", scene_id=evening["id"])
    fails(rt, sid, "activate_scene", "SCENE_NOT_FOUND", "NOT_FOUND", scene_id=evening["id"])


def test_a_scene_skips_devices_that_cannot_take_it(rt, sid):
    state = rt.state(sid)
    scene = state.scenes.first(home_id=home_id(rt, sid), name="Good Night")
    lamp = dev_id(rt, sid, "Living Room Lamp")
    state.devices.update(lamp, online=False)  # arrange: the lamp dropped off the network
    result = ok(rt, sid, "activate_scene", scene_id=scene["id"])
    assert result["skipped"] == [{"device_id": lamp, "device": "Living Room Lamp", "reason": "DEVICE_OFFLINE"}]
    assert {a["device"] for a in result["applied"]} == {"Ceiling Light", "Front Door Lock", "Thermostat"}
    assert device(rt, sid, "Front Door Lock")["state"]["locked"] is True
    assert rt.state(sid).scenes.get(scene["id"])["last_activated_at"] == "2026-03-02T09:00:00Z"


def test_devices_are_grouped_by_room_and_can_move(rt, sid):
    home = home_id(rt, sid)
    room = ok(rt, sid, "create_room", home_id=home, name="Nursery")
    plug = dev_id(rt, sid, "Garage Plug")
    ok(rt, sid, "move_device", device_id=plug, room_id=room["id"])
    rooms = {r["name"]: r for r in ok(rt, sid, "list_rooms", home_id=home)["rooms"]}
    assert [d["id"] for d in rooms["Nursery"]["devices"]] == [plug]
    assert plug not in [d["id"] for d in rooms["Garage"]["devices"]]
    assert ok(rt, sid, "list_devices", home_id=home, room_id=room["id"])["total"] == 1


def test_schedules_run_on_the_hub_clock(rt, sid):
    home = home_id(rt, sid)
    camera, plug = dev_id(rt, sid, "Garage Camera"), dev_id(rt, sid, "Coffee Maker Plug")
    made = ok(rt, sid, "create_schedule", device_id=plug, action="turn_off", time="09:03")
    assert (made["next_run_at"], made["due"]) == ("2026-03-02T09:03:00Z", False)
    ok(rt, sid, "create_schedule", device_id=camera, action="turn_off", time="09:02", days=["mon"])

    first = ok(rt, sid, "run_due_schedules", home_id=home)  # hub time 09:02: the 09:00 and 09:02 ones
    assert first["hub_time"] == "2026-03-02T09:02:00Z"
    runs = {r["name"]: r for r in first["runs"]}
    assert set(runs) == {"Hallway light off after the morning rush", "Garage Camera: turn_off at 09:02"}
    assert runs["Garage Camera: turn_off at 09:02"]["reason"] == "DEVICE_OFFLINE"
    assert device(rt, sid, "Hallway Light")["state"]["on"] is False

    listed = ok(rt, sid, "list_schedules", home_id=home, device_id=plug)  # that run ticked the clock to 09:03
    assert listed["hub_time"] == "2026-03-02T09:03:00Z" and listed["schedules"][0]["due"]
    second = ok(rt, sid, "run_due_schedules", home_id=home)
    assert [r["schedule_id"] for r in second["runs"]] == [made["id"]]
    assert device(rt, sid, "Coffee Maker Plug")["state"] == {"on": False, "power_watts": 0.0}
    quiet = rt.state_hash(sid)
    assert ok(rt, sid, "run_due_schedules", home_id=home)["runs"] == []  # nothing due at 09:04
    assert rt.state_hash(sid) == quiet
    after = {s["id"]: s for s in ok(rt, sid, "list_schedules", home_id=home, device_id=plug)["schedules"]}
    assert after[made["id"]]["next_run_at"] == "2026-03-03T09:03:00Z"
    assert after[made["id"]]["last_result"] == "ok"
    weekly = ok(rt, sid, "list_schedules", home_id=home, device_id=camera)["schedules"][0]
    assert (weekly["next_run_at"], weekly["last_result"]) == ("2026-03-09T09:02:00Z", "DEVICE_OFFLINE")


def test_automations_fire_once_per_edge_and_chains_settle(rt, sid):
    home = home_id(rt, sid)
    light, lock = dev_id(rt, sid, "Hallway Light"), dev_id(rt, sid, "Front Door Lock")
    rt.state(sid).devices.update(light, state={**device(rt, sid, "Hallway Light")["state"], "on": False})
    chained = ok(rt, sid, "create_automation", name="Hallway lit: lock up", trigger_device_id=light,
                 trigger="turned_on", action_device_id=lock, action="lock")
    assert chained["condition_met"] is False
    ok(rt, sid, "set_lock", device_id=lock, locked=False)

    fired = ok(rt, sid, "evaluate_automations", home_id=home)["fired"]
    assert [f["name"] for f in fired] == ["Hallway motion lights", "Hallway lit: lock up"]
    assert device(rt, sid, "Hallway Light")["state"]["on"] and device(rt, sid, "Front Door Lock")["state"]["locked"]
    settled = rt.state_hash(sid)
    assert ok(rt, sid, "evaluate_automations", home_id=home)["fired"] == []
    assert rt.state_hash(sid) == settled

    ok(rt, sid, "set_device_power", device_id=light, on=False)  # the chained trigger clears ...
    ok(rt, sid, "set_lock", device_id=lock, locked=False)
    assert ok(rt, sid, "evaluate_automations", home_id=home)["fired"] == []  # ... and re-arms; motion never cleared
    ok(rt, sid, "set_device_power", device_id=light, on=True)
    assert [f["name"] for f in ok(rt, sid, "evaluate_automations", home_id=home)["fired"]] == ["Hallway lit: lock up"]
    assert device(rt, sid, "Front Door Lock")["state"]["locked"]
    listed = {a["name"]: a for a in ok(rt, sid, "list_automations", home_id=home)["automations"]}
    assert listed["Hallway motion lights"]["fire_count"] == 1 and listed["Hallway lit: lock up"]["fire_count"] == 2


def test_chains_settle_whatever_order_the_automations_were_made_in(rt, sid):
    lamp, lock = device(rt, sid, "Living Room Lamp"), dev_id(rt, sid, "Front Door Lock")
    rt.state(sid).devices.update(lamp["id"], state={**lamp["state"], "on": False})  # arrange
    ok(rt, sid, "set_lock", device_id=lock, locked=False)
    ok(rt, sid, "create_automation", name="Lamp on: lock up", trigger_device_id=lamp["id"], trigger="turned_on",
       action_device_id=lock, action="lock")  # made first, but fires second
    ok(rt, sid, "create_automation", name="Motion: lamp on", trigger_device_id=dev_id(rt, sid, "Hallway Motion"),
       trigger="motion_detected", action_device_id=lamp["id"], action="turn_on")
    fired = [f["name"] for f in ok(rt, sid, "evaluate_automations", home_id=home_id(rt, sid))["fired"]]
    assert fired == ["Hallway motion lights", "Motion: lamp on", "Lamp on: lock up"]
    assert device(rt, sid, "Front Door Lock")["state"]["locked"]


def test_an_automation_acting_on_an_offline_device_reports_it(rt, sid):
    home = home_id(rt, sid)
    ok(rt, sid, "create_automation", name="Motion: camera on", trigger_device_id=dev_id(rt, sid, "Hallway Motion"),
       trigger="motion_detected", action_device_id=dev_id(rt, sid, "Garage Camera"), action="turn_on")
    fired = {f["name"]: f for f in ok(rt, sid, "evaluate_automations", home_id=home)["fired"]}
    assert fired["Motion: camera on"]["reason"] == "DEVICE_OFFLINE"
    disabled = ok(rt, sid, "list_automations", home_id=home, enabled=False)["automations"]
    assert [a["name"] for a in disabled] == ["Door opened: lights on"]


def test_firmware_update_flow(rt, sid):
    lamp = dev_id(rt, sid, "Living Room Lamp")
    info = ok(rt, sid, "get_firmware_info", device_id=lamp)
    assert info["update_available"] and info["can_update_now"] and info["blocked_by"] is None
    updated = ok(rt, sid, "update_firmware", device_id=lamp)
    assert (updated["previous_version"], updated["installed_version"]) == (info["installed_version"],
                                                                           info["latest_version"])
    assert not ok(rt, sid, "get_firmware_info", device_id=lamp)["update_available"]
    fails(rt, sid, "update_firmware", "FIRMWARE_UP_TO_DATE", "CONFLICT", device_id=lamp)
    blocked = ok(rt, sid, "get_firmware_info", device_id=dev_id(rt, sid, "Front Door Lock"))
    assert (blocked["update_available"], blocked["can_update_now"], blocked["blocked_by"]) == (
        True, False, "BATTERY_TOO_LOW")


def test_thermostat_reports_what_it_is_doing(rt, sid):
    thermostat = device(rt, sid, "Thermostat")
    warm = ok(rt, sid, "set_thermostat", device_id=thermostat["id"], mode="heat", heat_setpoint=30)
    assert warm["hvac_action"] == "heating" and warm["state"]["heat_setpoint"] == 30
    cold = ok(rt, sid, "set_thermostat", device_id=thermostat["id"], mode="cool", cool_setpoint=16)
    assert cold["hvac_action"] == "cooling"
    assert ok(rt, sid, "set_thermostat", device_id=thermostat["id"], mode="off")["hvac_action"] == "idle"


def test_sensor_readings_newest_first(rt, sid):
    sensor = device(rt, sid, "Living Room Sensor")
    readings = ok(rt, sid, "get_sensor_readings", device_id=sensor["id"], limit=4)
    assert readings["current"] == sensor["state"] and not readings["stale"]
    stamps = [r["at"] for r in readings["readings"]]
    assert len(stamps) == 4 and stamps == sorted(stamps, reverse=True)
    assert readings["readings"][0]["values"] == sensor["state"]


# -- typed failures -------------------------------------------------------------------------------


def test_device_offline(rt, sid):
    camera = dev_id(rt, sid, "Garage Camera")
    fails(rt, sid, "set_device_power", "DEVICE_OFFLINE", device_id=camera, on=False)
    fails(rt, sid, "update_camera_settings", "DEVICE_OFFLINE", device_id=camera, motion_sensitivity="low")
    fails(rt, sid, "update_firmware", "DEVICE_OFFLINE", device_id=camera)
    error = fails(rt, sid, "create_scene", "DEVICE_OFFLINE", home_id=home_id(rt, sid), name="Garage",
                  device_ids=[camera])
    assert error["details"]["last_seen_at"] < "2026-03-02T09:00:00Z"


def test_unsupported_capability(rt, sid):
    lock, ceiling = dev_id(rt, sid, "Front Door Lock"), dev_id(rt, sid, "Ceiling Light")
    error = fails(rt, sid, "set_light", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=lock, brightness=50)
    assert error["details"]["capabilities"] == ["lock", "battery"]
    fails(rt, sid, "set_light", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=ceiling,
          color_temperature=3000)  # dimmable only
    fails(rt, sid, "set_device_power", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT",
          device_id=dev_id(rt, sid, "Thermostat"), on=False)
    fails(rt, sid, "set_lock", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=ceiling, locked=True)
    fails(rt, sid, "set_thermostat", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=ceiling, mode="heat")
    fails(rt, sid, "update_camera_settings", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT",
          device_id=dev_id(rt, sid, "Garage Camera"), recording_mode="continuous")  # battery camera
    fails(rt, sid, "get_sensor_readings", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", device_id=ceiling)
    fails(rt, sid, "create_scene", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", home_id=home_id(rt, sid),
          name="Sensors", device_ids=[dev_id(rt, sid, "Hallway Motion")])
    fails(rt, sid, "create_schedule", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT",
          device_id=dev_id(rt, sid, "Coffee Maker Plug"), action="set_brightness", value=50, time="07:00")


def test_setpoints_are_bounded_by_the_model(rt, sid):
    t9, t5 = dev_id(rt, sid, "Thermostat"), dev_id(rt, sid, "Bedroom Thermostat")
    error = fails(rt, sid, "set_thermostat", "SETPOINT_OUT_OF_RANGE", "INVALID_ARGUMENT", device_id=t9,
                  heat_setpoint=33)
    assert (error["details"]["minimum"], error["details"]["maximum"]) == (7.0, 32.0)
    fails(rt, sid, "set_thermostat", "SETPOINT_OUT_OF_RANGE", "INVALID_ARGUMENT", device_id=t5, heat_setpoint=8)
    ok(rt, sid, "set_thermostat", device_id=t9, heat_setpoint=8)  # the T9 goes lower than the T5
    fails(rt, sid, "create_schedule", "SETPOINT_OUT_OF_RANGE", "INVALID_ARGUMENT", device_id=t5,
          action="set_heat_setpoint", value=31, time="06:00")
    fails(rt, sid, "set_thermostat", "SETPOINT_DEADBAND", "INVALID_ARGUMENT", device_id=t5, mode="auto",
          heat_setpoint=22, cool_setpoint=23)
    fails(rt, sid, "set_thermostat", "NOTHING_TO_CHANGE", "INVALID_ARGUMENT", device_id=t5)
    assert rt.call(sid, "set_thermostat", {"device_id": t5, "heat_setpoint": 20.3}).error["reason"] == (
        "SCHEMA_VIOLATION")  # half-degree steps only


def test_lock_jammed(rt, sid):
    jammed = dev_id(rt, sid, "Garage Door Lock")
    fails(rt, sid, "set_lock", "LOCK_JAMMED", device_id=jammed, locked=False)
    fails(rt, sid, "set_lock", "LOCK_JAMMED", device_id=jammed, locked=True)


def test_scene_names_and_limits(rt, sid):
    home, lamp = home_id(rt, sid), dev_id(rt, sid, "Living Room Lamp")
    error = fails(rt, sid, "create_scene", "SCENE_NAME_TAKEN", "CONFLICT", home_id=home, name="good night",
                  device_ids=[lamp])
    assert error["details"]["scene_id"] == rt.state(sid).scenes.first(home_id=home, name="Good Night")["id"]
    for home_index in (1, 0):  # names are unique per home, not across homes
        ok(rt, sid, "create_scene", home_id=home_id(rt, sid, home_index), name="Reading",
           device_ids=[dev_id(rt, sid, "Living Room Lamp", home=home_index)])
    other_home_lamp = dev_id(rt, sid, "Ceiling Light", home=1)
    fails(rt, sid, "create_scene", "DEVICE_NOT_IN_HOME", "INVALID_ARGUMENT", home_id=home, name="Mixed",
          device_ids=[lamp, other_home_lamp])
    for n in range(iot_devices.MAX_SCENES_PER_HOME - 3):
        ok(rt, sid, "create_scene", home_id=home, name=f"Scene {n}", device_ids=[lamp])
    fails(rt, sid, "create_scene", "SCENE_LIMIT_REACHED", "RESOURCE_EXHAUSTED", home_id=home, name="One more",
          device_ids=[lamp])


def test_automation_loops_are_refused(rt, sid):
    lamp, lock, light = (dev_id(rt, sid, n) for n in ("Living Room Lamp", "Front Door Lock", "Hallway Light"))
    error = fails(rt, sid, "create_automation", "AUTOMATION_LOOP", name="Flicker", trigger_device_id=light,
                  trigger="turned_on", action_device_id=light, action="turn_off")
    assert error["details"]["device_path"] == [light]
    ok(rt, sid, "create_automation", name="Lamp on: lock", trigger_device_id=lamp, trigger="turned_on",
       action_device_id=lock, action="lock")
    error = fails(rt, sid, "create_automation", "AUTOMATION_LOOP", name="Locked: lamp on", trigger_device_id=lock,
                  trigger="locked", action_device_id=lamp, action="turn_on")
    assert error["details"]["device_path"] == [lamp, lock]
    saved = ok(rt, sid, "create_automation", name="Locked: lamp on", trigger_device_id=lock, trigger="locked",
               action_device_id=lamp, action="turn_on", enabled=False)  # saving it disabled is allowed
    fails(rt, sid, "set_automation_enabled", "AUTOMATION_LOOP", automation_id=saved["id"], enabled=True)


def test_automation_definitions_are_checked(rt, sid):
    sensor, thermostat = dev_id(rt, sid, "Living Room Sensor"), dev_id(rt, sid, "Thermostat")
    base = {"name": "New", "trigger_device_id": sensor, "action_device_id": thermostat}
    fails(rt, sid, "create_automation", "INVALID_TRIGGER", "INVALID_ARGUMENT", **base, trigger="motion_detected",
          action="set_heat_setpoint", value=20)
    fails(rt, sid, "create_automation", "THRESHOLD_REQUIRED", "INVALID_ARGUMENT", **base, trigger="temperature_below",
          action="set_heat_setpoint", value=20)
    fails(rt, sid, "create_automation", "ACTION_VALUE_REQUIRED", "INVALID_ARGUMENT", **base,
          trigger="temperature_below", threshold=18, action="set_heat_setpoint")
    fails(rt, sid, "create_automation", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT", **base,
          trigger="temperature_below", threshold=18, action="turn_on")
    fails(rt, sid, "create_automation", "AUTOMATION_NAME_TAKEN", "CONFLICT",
          **{**base, "name": "hallway MOTION lights"}, trigger="temperature_below", threshold=18,
          action="set_heat_setpoint", value=20)
    fails(rt, sid, "create_automation", "DEVICE_NOT_IN_HOME", "INVALID_ARGUMENT",
          **{**base, "action_device_id": dev_id(rt, sid, "Thermostat", home=1)}, trigger="temperature_below",
          threshold=18, action="set_heat_setpoint", value=20)
    lamp = dev_id(rt, sid, "Living Room Lamp")
    fails(rt, sid, "create_automation", "VALUE_OUT_OF_RANGE", "INVALID_ARGUMENT", **{**base, "action_device_id": lamp},
          trigger="temperature_above", threshold=25, action="set_brightness", value=150)
    fails(rt, sid, "create_automation", "UNEXPECTED_VALUE", "INVALID_ARGUMENT", **{**base, "action_device_id": lamp},
          trigger="temperature_above", threshold=25, action="turn_on", value=1)


def test_automation_limit(rt, sid):
    sensor, lamp = dev_id(rt, sid, "Living Room Sensor"), dev_id(rt, sid, "Living Room Lamp")
    existing = len(rt.state(sid).automations.where(home_id=home_id(rt, sid)))
    args = {"trigger_device_id": sensor, "trigger": "temperature_above", "action_device_id": lamp, "action": "turn_on"}
    for n in range(iot_devices.MAX_AUTOMATIONS_PER_HOME - existing):
        ok(rt, sid, "create_automation", name=f"Warm {n}", threshold=20 + n, **args)
    fails(rt, sid, "create_automation", "AUTOMATION_LIMIT_REACHED", "RESOURCE_EXHAUSTED", name="Warm x", threshold=30,
          **args)


def test_schedule_rules(rt, sid):
    strip = dev_id(rt, sid, "Bedside Strip")
    args = {"device_id": strip, "action": "set_color_temperature", "time": "20:00"}
    fails(rt, sid, "create_schedule", "ACTION_VALUE_REQUIRED", "INVALID_ARGUMENT", **args)
    fails(rt, sid, "create_schedule", "VALUE_OUT_OF_RANGE", "INVALID_ARGUMENT", **args, value=1800)
    made = ok(rt, sid, "create_schedule", **args, value=2700, days=["sun", "sat"])
    assert made["days"] == ["sat", "sun"] and made["next_run_at"] == "2026-03-07T20:00:00Z"
    error = fails(rt, sid, "create_schedule", "SCHEDULE_EXISTS", "CONFLICT", **args, value=2700, days=["sat", "sun"])
    assert error["details"]["schedule_id"] == made["id"]
    for n in range(iot_devices.MAX_SCHEDULES_PER_DEVICE - 1):
        ok(rt, sid, "create_schedule", device_id=strip, action="turn_on", time=f"0{n}:15")
    fails(rt, sid, "create_schedule", "SCHEDULE_LIMIT_REACHED", "RESOURCE_EXHAUSTED", device_id=strip,
          action="turn_off", time="23:59")
    bad = rt.call(sid, "create_schedule", {"device_id": strip, "action": "turn_on", "time": "24:00"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"


def test_camera_rules(rt, sid):
    camera = dev_id(rt, sid, "Living Room Camera")
    ok(rt, sid, "update_camera_settings", device_id=camera, recording_mode="motion_only", motion_detection=True)
    fails(rt, sid, "update_camera_settings", "MOTION_DETECTION_REQUIRED", device_id=camera, motion_detection=False)
    ok(rt, sid, "update_camera_settings", device_id=camera, recording_mode="off", motion_detection=False)
    fails(rt, sid, "update_camera_settings", "MOTION_DETECTION_REQUIRED", device_id=camera,
          recording_mode="motion_only")
    fails(rt, sid, "update_camera_settings", "NOTHING_TO_CHANGE", "INVALID_ARGUMENT", device_id=camera)


def test_room_rules(rt, sid):
    home = home_id(rt, sid)
    fails(rt, sid, "create_room", "ROOM_NAME_TAKEN", "CONFLICT", home_id=home, name="  kitchen ")
    other_room = rt.state(sid).rooms.first(home_id=home_id(rt, sid, 1))
    fails(rt, sid, "move_device", "ROOM_IN_OTHER_HOME", "INVALID_ARGUMENT", device_id=dev_id(rt, sid, "Garage Plug"),
          room_id=other_room["id"])
    for n in range(iot_devices.MAX_ROOMS_PER_HOME - len(iot_devices.LAYOUT)):
        ok(rt, sid, "create_room", home_id=home, name=f"Room {n}")
    fails(rt, sid, "create_room", "ROOM_LIMIT_REACHED", "RESOURCE_EXHAUSTED", home_id=home, name="Attic")


def test_firmware_battery_too_low(rt, sid):
    fails(rt, sid, "update_firmware", "BATTERY_TOO_LOW", device_id=dev_id(rt, sid, "Front Door Lock"))


def test_set_light_needs_a_value(rt, sid):
    fails(rt, sid, "set_light", "NOTHING_TO_CHANGE", "INVALID_ARGUMENT", device_id=dev_id(rt, sid, "Kitchen Lights"))


def test_unknown_ids_are_typed_not_found(rt, sid):
    fails(rt, sid, "get_device", "DEVICE_NOT_FOUND", "NOT_FOUND", device_id="dev_missing")
    fails(rt, sid, "list_rooms", "HOME_NOT_FOUND", "NOT_FOUND", home_id="hom_missing")
    fails(rt, sid, "move_device", "ROOM_NOT_FOUND", "NOT_FOUND", device_id=dev_id(rt, sid, "Garage Plug"),
          room_id="rom_missing")
    fails(rt, sid, "delete_scene", "SCENE_NOT_FOUND", "NOT_FOUND", scene_id="scn_missing")
    fails(rt, sid, "set_automation_enabled", "AUTOMATION_NOT_FOUND", "NOT_FOUND", automation_id="aut_missing",
          enabled=True)
