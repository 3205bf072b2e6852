"""The video_meeting server: its tool surface, seed, the session clock rules and typed failures.

Every failure test checks the reason and code, that the tool declares the reason, and that the
state is unchanged — by the tool itself (it checks before it writes), not only by the rollback.
"""

import datetime as dt
import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import video_meeting
from prove_servers.video_meeting import MeetingOptions, server

TOOLS = server.tools
ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


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


def meeting(rt: ServerRuntime, sid: str, title: str) -> dict:
    """A scripted meeting of the seed, by title."""
    return rt.state(sid).meetings.first(title=title)


def room(rt: ServerRuntime, sid: str, name: str) -> str:
    return rt.state(sid).rooms.first(name=name)["id"]


def at(rt: ServerRuntime, sid: str, minutes: int) -> str:
    return video_meeting._iso(rt.state(sid).now() + dt.timedelta(minutes=minutes))


def people(rt: ServerRuntime, sid: str, meeting_id: str, where: str) -> list[dict]:
    return rt.state(sid).participants.where(meeting_id=meeting_id, state=where)


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_10_tools_each_described_with_examples():
    assert set(TOOLS) == {
        "list_rooms", "schedule_meeting", "get_meeting", "list_upcoming_meetings", "cancel_meeting",
        "invite_participants", "set_recording", "list_recordings", "admit_participant", "remove_participant",
    }
    assert (server.name, server.domain) == ("video_meeting", "lifestyle")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_and_entities():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_rooms", "get_meeting", "list_upcoming_meetings", "list_recordings"}
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"cancel_meeting", "remove_participant"}
    assert TOOLS["schedule_meeting"].spec.produces == ("meeting", "invitation")
    assert TOOLS["schedule_meeting"].spec.entity_params() == {"room_id": "room"}
    assert TOOLS["remove_participant"].spec.entity_params() == {"meeting_id": "meeting",
                                                                "participant_id": "participant"}


def test_registered_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(video_meeting)
    registered = []
    pm.hook.prove_register_servers(register=lambda target, name=None, summary="": registered.append(target))
    assert registered == [server]


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_on_a_fresh_session(rt, tool, index):
    sid = rt.new_session()
    data = ok(rt, sid, tool, **example_args(rt, sid, TOOLS[tool].examples[index]))
    assert json.loads(json.dumps(data)) == data  # JSON-native values only


def test_read_only_tools_never_change_state_and_writers_do(rt):
    for name, tool in TOOLS.items():
        for example in tool.examples:
            sid = rt.new_session()
            args = example_args(rt, sid, example)
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
            assert rt.call(sid, name, args).is_error, name  # refused: booked, already invited, already recording, ...
            assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash("a") == again.state_hash("b")
    assert first.state_hash("a") != other.state_hash("a")


@pytest.mark.parametrize("seed", [0, 1, 3, 6])
def test_seed_has_every_case_the_rules_need(seed):
    state = server.build_state(seed)
    you = state.get_var("me")["email"]
    phases = [(m["host_email"] == you, video_meeting._status(state, m)) for m in state.meetings]
    for case in ((True, "live"), (False, "live"), (True, "upcoming"), (False, "upcoming"), (True, "ended"),
                 (True, "cancelled")):
        assert case in phases, case
    assert video_meeting._live_recordable(state, recording=True) and video_meeting._live_recordable(state,
                                                                                                    recording=False)
    assert video_meeting._with_waiting(state) and state.recordings.first(status="available")
    for room_id in {m["room_id"] for m in state.meetings}:  # no room is double-booked
        booked = sorted((m["start"], m["end"]) for m in state.meetings.where(room_id=room_id, status="scheduled"))
        assert all(end <= nxt for (_, end), (nxt, _) in zip(booked, booked[1:], strict=False))
    for m in state.meetings.where(status="scheduled"):  # every booking fits its room
        assert video_meeting._seats_taken(state, m["id"]) <= state.rooms.get(m["room_id"])["capacity"]


def test_a_ten_times_larger_seed_works_and_options_are_validated(rt):
    big = ServerRuntime(server, options=MeetingOptions(meetings=120))
    assert len(big.state("x").meetings) > 5 * len(rt.state("y").meetings)
    for tool, index in ALL_EXAMPLES:
        fresh = big.new_session()
        ok(big, fresh, tool, **example_args(big, fresh, TOOLS[tool].examples[index]))
    with pytest.raises(ValueError):
        MeetingOptions(meetings=0)


# -- flows with ids passed from one call to the next -----------------------------------------------


def test_find_room_schedule_invite_cancel_flow(rt, sid):
    start = at(rt, sid, 24 * 60 * 30)
    rooms = ok(rt, sid, "list_rooms", min_capacity=6, start=start, duration_minutes=60)["rooms"]
    assert rooms and all(r["capacity"] >= 6 and r["available"] for r in rooms)
    smallest = rooms[0]
    booked = ok(rt, sid, "schedule_meeting", title="Offsite planning", start=start, duration_minutes=60,
                room_id=smallest["id"], invitees=["Ana@Example.com", "ana@example.com", "bo@example.com"])
    assert booked["status"] == "upcoming" and [i["email"] for i in booked["invitations"]] == ["ana@example.com",
                                                                                               "bo@example.com"]
    error = fails(rt, sid, "schedule_meeting", "OVERLAPPING_BOOKING", "CONFLICT", title="Clash",
                  start=at(rt, sid, 24 * 60 * 30 + 30), duration_minutes=15, room_id=smallest["id"])
    assert (error["details"]["booked_start"], error["details"]["booked_end"]) == (booked["start"], booked["end"])
    busy = ok(rt, sid, "list_rooms", start=start)["rooms"]
    assert next(r for r in busy if r["id"] == smallest["id"])["available"] is False
    added = ok(rt, sid, "invite_participants", meeting_id=booked["id"], emails=["cy@example.com"])
    assert added["seats_left"] == smallest["capacity"] - 4
    upcoming = ok(rt, sid, "list_upcoming_meetings", days=31, role="host", limit=50)["meetings"]
    assert booked["id"] in [m["id"] for m in upcoming]
    cancelled = ok(rt, sid, "cancel_meeting", meeting_id=booked["id"], reason="Budget")
    assert (cancelled["meeting"]["status"], cancelled["invitees_notified"]) == ("cancelled", 3)
    ok(rt, sid, "schedule_meeting", title="Clash", start=start, duration_minutes=15, room_id=smallest["id"])


def test_waiting_room_recording_and_removal_in_a_live_meeting(rt, sid):
    sync = meeting(rt, sid, "Weekly product sync")["id"]
    view = ok(rt, sid, "get_meeting", meeting_id=sync)
    assert view["status"] == "live" and len(view["waiting_room"]) == 2 and not view["recording_active"]
    first = view["waiting_room"][0]
    admitted = ok(rt, sid, "admit_participant", meeting_id=sync, participant_id=first["id"])
    assert admitted["admitted"][0]["state"] == "in_meeting" and admitted["participant_count"] == len(
        view["participants"]) + 1
    fails(rt, sid, "admit_participant", "NOT_IN_WAITING_ROOM", meeting_id=sync, participant_id=first["id"])
    everyone = ok(rt, sid, "admit_participant", meeting_id=sync)
    assert len(everyone["admitted"]) == 1
    fails(rt, sid, "admit_participant", "WAITING_ROOM_EMPTY", meeting_id=sync)

    started = ok(rt, sid, "set_recording", meeting_id=sync, recording=True)
    assert ok(rt, sid, "get_meeting", meeting_id=sync)["recording_active"]
    removed = ok(rt, sid, "remove_participant", meeting_id=sync, participant_id=first["id"])
    assert removed["removed"]["state"] == "removed"
    fails(rt, sid, "remove_participant", "PARTICIPANT_ALREADY_REMOVED", meeting_id=sync, participant_id=first["id"])
    stopped = ok(rt, sid, "set_recording", meeting_id=sync, recording=False)
    assert stopped["id"] == started["id"] and stopped["status"] == "available"
    assert stopped["duration_seconds"] == 120  # two state-changing calls, one clock minute each
    listed = ok(rt, sid, "list_recordings", meeting_id=sync)["recordings"]
    assert [r["id"] for r in listed] == [started["id"]]


def test_a_meeting_goes_live_on_the_session_clock(rt, sid):
    soon = ok(rt, sid, "schedule_meeting", title="Quick sync", start=at(rt, sid, 2), duration_minutes=5,
              room_id=room(rt, sid, "Cedar"))
    fails(rt, sid, "set_recording", "MEETING_NOT_LIVE", meeting_id=soon["id"], recording=True)
    ok(rt, sid, "invite_participants", meeting_id=soon["id"], emails=["a@example.com"])  # the clock ticks
    ok(rt, sid, "set_recording", meeting_id=soon["id"], recording=True)
    fails(rt, sid, "cancel_meeting", "MEETING_ALREADY_STARTED", meeting_id=soon["id"])
    rt.state(sid).advance_clock(10 * 60)  # arrange: the meeting is over
    assert ok(rt, sid, "get_meeting", meeting_id=soon["id"])["status"] == "ended"
    error = fails(rt, sid, "set_recording", "MEETING_NOT_LIVE", meeting_id=soon["id"], recording=False)
    assert error["details"]["status"] == "ended"
    stopped_with_meeting = ok(rt, sid, "list_recordings", meeting_id=soon["id"])["recordings"][0]
    assert (stopped_with_meeting["status"], stopped_with_meeting["stopped_at"]) == ("available", soon["end"])
    fails(rt, sid, "cancel_meeting", "MEETING_ENDED", meeting_id=soon["id"])
    fails(rt, sid, "invite_participants", "MEETING_ENDED", meeting_id=soon["id"], emails=["b@example.com"])


def test_upcoming_lists_live_and_future_meetings_soonest_first(rt, sid):
    listed = ok(rt, sid, "list_upcoming_meetings", days=14, limit=50)["meetings"]
    starts = [m["start"] for m in listed]
    assert starts == sorted(starts) and listed[0]["status"] == "live"
    assert {m["status"] for m in listed} <= {"live", "upcoming"}
    assert {m["your_role"] for m in listed} == {"host", "invitee"}
    invited = ok(rt, sid, "list_upcoming_meetings", role="invited", days=14, limit=50)["meetings"]
    assert invited and all(m["your_role"] == "invitee" and m["your_response"] for m in invited)
    with_cancelled = ok(rt, sid, "list_upcoming_meetings", days=14, include_cancelled=True, limit=50)["meetings"]
    assert "cancelled" in {m["status"] for m in with_cancelled}


# -- typed failures ---------------------------------------------------------------------------------


def test_schedule_checks_time_room_capacity_and_overlap(rt, sid):
    cedar = room(rt, sid, "Cedar")
    base = {"title": "x", "duration_minutes": 30, "room_id": cedar}
    fails(rt, sid, "schedule_meeting", "BAD_DATETIME", "INVALID_ARGUMENT", **base, start="2026-02-30T10:00")
    fails(rt, sid, "schedule_meeting", "START_IN_PAST", "INVALID_ARGUMENT", **base, start=at(rt, sid, -1))
    error = fails(rt, sid, "schedule_meeting", "ROOM_CAPACITY_EXCEEDED", "RESOURCE_EXHAUSTED", **base,
                  start=at(rt, sid, 60 * 24 * 30), invitees=[f"p{n}@example.com" for n in range(8)])
    assert error["details"] == {"capacity": 8, "needed": 9}
    board = meeting(rt, sid, "Board prep")
    fails(rt, sid, "schedule_meeting", "OVERLAPPING_BOOKING", "CONFLICT", **{**base, "room_id": board["room_id"]},
          start=board["start"].replace("T", " ").removesuffix("Z") + "+00:00")
    fails(rt, sid, "schedule_meeting", "ROOM_NOT_FOUND", "NOT_FOUND", **{**base, "room_id": "rm_nope"},
          start=at(rt, sid, 60))
    fails(rt, sid, "list_rooms", "BAD_DATETIME", "INVALID_ARGUMENT", start="2026-13-01T10:00")
    assert rt.call(sid, "schedule_meeting", {**base, "start": "tomorrow"}).error["reason"] == "SCHEMA_VIOLATION"


def test_only_the_host_manages_a_meeting(rt, sid):
    review = meeting(rt, sid, "Design review")  # live, hosted by a colleague, you are inside
    someone = people(rt, sid, review["id"], "waiting")[0]["id"]
    for tool, extra in (("set_recording", {"recording": True}), ("admit_participant", {"participant_id": someone}),
                        ("remove_participant", {"participant_id": someone}), ("cancel_meeting", {}),
                        ("invite_participants", {"emails": ["z@example.com"]}), ("list_recordings", {})):
        error = fails(rt, sid, tool, "NOT_HOST", "PERMISSION_DENIED", meeting_id=review["id"], **extra)
        assert error["details"]["host_email"] == review["host_email"]
    assert "waiting_room" not in ok(rt, sid, "get_meeting", meeting_id=review["id"])  # a guest's view


def test_meetings_you_are_not_part_of_are_private(rt, sid):
    fails(rt, sid, "get_meeting", "NOT_INVITED", "PERMISSION_DENIED", meeting_id=meeting(rt, sid, "Board prep")["id"])
    fails(rt, sid, "get_meeting", "MEETING_NOT_FOUND", "NOT_FOUND", meeting_id="mtg_nope")


def test_cancelled_and_running_meetings(rt, sid):
    demo = meeting(rt, sid, "Vendor demo")["id"]
    fails(rt, sid, "cancel_meeting", "MEETING_CANCELLED", meeting_id=demo)
    fails(rt, sid, "invite_participants", "MEETING_CANCELLED", meeting_id=demo, emails=["q@example.com"])
    fails(rt, sid, "set_recording", "MEETING_CANCELLED", meeting_id=demo, recording=True)
    sync = meeting(rt, sid, "Weekly product sync")["id"]
    fails(rt, sid, "cancel_meeting", "MEETING_ALREADY_STARTED", meeting_id=sync)
    retro = meeting(rt, sid, "Sprint retro")["id"]
    fails(rt, sid, "cancel_meeting", "MEETING_ENDED", meeting_id=retro)
    fails(rt, sid, "admit_participant", "MEETING_NOT_LIVE", meeting_id=retro)
    one_on_one = rt.state(sid).meetings.first(lambda m: m["title"].startswith("1:1 with"))["id"]
    error = fails(rt, sid, "set_recording", "MEETING_NOT_LIVE", meeting_id=one_on_one, recording=True)
    assert error["details"]["status"] == "upcoming"


def test_recording_rules(rt, sid):
    fails(rt, sid, "set_recording", "RECORDING_NOT_ALLOWED", meeting_id=meeting(rt, sid, "Customer escalation huddle")[
        "id"], recording=True)
    fails(rt, sid, "set_recording", "RECORDING_ALREADY_ACTIVE", "CONFLICT",
          meeting_id=meeting(rt, sid, "Webinar rehearsal")["id"], recording=True)
    fails(rt, sid, "set_recording", "NO_ACTIVE_RECORDING", meeting_id=meeting(rt, sid, "Weekly product sync")["id"],
          recording=False)
    mine = ok(rt, sid, "list_recordings")["recordings"]
    stamps = [r["started_at"] for r in mine]
    assert stamps == sorted(stamps, reverse=True) and {r["status"] for r in mine} == {"recording", "available"}


def test_invitation_rules(rt, sid):
    planning = meeting(rt, sid, "Sprint planning")  # eight of eight seats taken
    error = fails(rt, sid, "invite_participants", "ROOM_CAPACITY_EXCEEDED", "RESOURCE_EXHAUSTED",
                  meeting_id=planning["id"], emails=["new@example.com"])
    assert error["details"] == {"capacity": 8, "needed": 9}
    invited = rt.state(sid).invitations.first(meeting_id=planning["id"])["email"]
    error = fails(rt, sid, "invite_participants", "ALREADY_INVITED", "CONFLICT", meeting_id=planning["id"],
                  emails=[invited.upper(), planning["host_email"]])
    assert error["details"]["already"] == [invited, planning["host_email"]]


def test_admitting_into_a_full_room(rt, sid):
    huddle = meeting(rt, sid, "Customer escalation huddle")["id"]  # the four-seat booth is full
    waiting = people(rt, sid, huddle, "waiting")[0]["id"]
    error = fails(rt, sid, "admit_participant", "ROOM_CAPACITY_EXCEEDED", "RESOURCE_EXHAUSTED", meeting_id=huddle,
                  participant_id=waiting)
    assert error["details"] == {"capacity": 4, "needed": 5}
    inside = next(p for p in people(rt, sid, huddle, "in_meeting") if p["role"] == "attendee")
    ok(rt, sid, "remove_participant", meeting_id=huddle, participant_id=inside["id"])
    ok(rt, sid, "admit_participant", meeting_id=huddle, participant_id=waiting)


def test_participant_checks(rt, sid):
    sync = meeting(rt, sid, "Weekly product sync")["id"]
    host = next(p for p in people(rt, sid, sync, "in_meeting") if p["role"] == "host")["id"]
    fails(rt, sid, "remove_participant", "CANNOT_REMOVE_HOST", "INVALID_ARGUMENT", meeting_id=sync, participant_id=host)
    elsewhere = people(rt, sid, meeting(rt, sid, "Webinar rehearsal")["id"], "in_meeting")[-1]["id"]
    error = fails(rt, sid, "admit_participant", "PARTICIPANT_NOT_IN_MEETING", "INVALID_ARGUMENT", meeting_id=sync,
                  participant_id=elsewhere)
    assert error["details"]["meeting_id"] != sync
    fails(rt, sid, "remove_participant", "PARTICIPANT_NOT_FOUND", "NOT_FOUND", meeting_id=sync, participant_id="prt_x")
    rehearsal = meeting(rt, sid, "Webinar rehearsal")["id"]  # no waiting room
    fails(rt, sid, "admit_participant", "WAITING_ROOM_EMPTY", meeting_id=rehearsal)
