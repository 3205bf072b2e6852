"""The video_meeting server's own rules: rooms and bookings, invitations and capacity, live
meetings, the waiting room, recordings and cancellation, with typed failures. What every server
guarantees is the conformance kit's (tests/servers/test_conformance.py).
"""

import datetime as dt

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import video_meeting
from prove_servers.video_meeting import MeetingOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def meeting(h, title: str) -> dict:
    """A scripted meeting of the seed, by title."""
    return h.state.meetings.first(title=title)


def room(h, name: str) -> str:
    return h.state.rooms.first(name=name)["id"]


def at(h, minutes: int) -> str:
    """The session clock plus ``minutes``, as tools show times (UTC, to the second, with a Z)."""
    return (h.state.now() + dt.timedelta(minutes=minutes)).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def phase(h, meeting: dict) -> str:
    """Where a meeting stands on the session clock: upcoming, live, ended or cancelled."""
    if meeting["status"] == "cancelled":
        return "cancelled"
    return "upcoming" if at(h, 0) < meeting["start"] else "live" if at(h, 0) < meeting["end"] else "ended"


def people(h, meeting_id: str, where: str) -> list[dict]:
    return h.state.participants.where(meeting_id=meeting_id, state=where)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "list_rooms", "schedule_meeting", "get_meeting", "list_upcoming_meetings", "cancel_meeting",
        "invite_participants", "set_recording", "list_recordings", "admit_participant", "remove_participant",
    }
    assert servers_registered_by(video_meeting) == [server]
    assert (server.name, server.domain) == ("video_meeting", "lifestyle")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_rooms", "get_meeting", "list_upcoming_meetings", "list_recordings"}
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"cancel_meeting", "remove_participant"}
    assert TOOLS["schedule_meeting"].spec.produces == ("meeting", "invitation")
    assert TOOLS["schedule_meeting"].spec.entity_params() == {"room_id": "room"}
    assert TOOLS["remove_participant"].spec.entity_params() == {"meeting_id": "meeting",
                                                                "participant_id": "participant"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_repeating_an_idempotent_write_is_refused(h):
    for name, index in h.examples():
        if TOOLS[name].spec.annotations.read_only or not TOOLS[name].spec.annotations.idempotent:
            continue
        fresh = h.session()
        args = fresh.example_args(name, index)
        fresh.ok(name, **args)
        once = fresh.state_hash()
        assert fresh.call(name, args).is_error, name  # refused: booked, already invited, already recording, ...
        assert fresh.state_hash() == once, name


@pytest.mark.parametrize("seed", [0, 1, 3, 6])
def test_seed_has_every_case_the_rules_need(seed):
    h = ServerHarness(server, seed=seed)
    state = h.state
    you = state.get_var("me")["email"]
    phases = [(m["host_email"] == you, phase(h, m)) for m in state.meetings]
    for case in ((True, "live"), (False, "live"), (True, "upcoming"), (False, "upcoming"), (True, "ended"),
                 (True, "cancelled")):
        assert case in phases, case
    live = [h.ok("get_meeting", meeting_id=m["id"]) for m in state.meetings.where(host_email=you, status="scheduled")
            if phase(h, m) == "live" and state.rooms.get(m["room_id"])["cloud_recording"]]
    assert {m["recording_active"] for m in live} == {True, False}  # one being recorded, one that can start
    assert any(state.participants.first(meeting_id=m["id"], state="waiting") and phase(h, m) == "live"
               and len(people(h, m["id"], "in_meeting")) < state.rooms.get(m["room_id"])["capacity"]
               for m in state.meetings.where(host_email=you))  # someone waits for a free seat
    assert state.recordings.first(status="available")
    for room_id in {m["room_id"] for m in state.meetings}:  # no room is double-booked
        booked = sorted((m["start"], m["end"]) for m in state.meetings.where(room_id=room_id, status="scheduled"))
        assert all(end <= nxt for (_, end), (nxt, _) in zip(booked, booked[1:], strict=False))
    for m in state.meetings.where(status="scheduled"):  # every booking fits its room: the host and who did not decline
        seats = 1 + len(state.invitations.where(lambda i: i["status"] != "declined", meeting_id=m["id"]))
        assert seats <= state.rooms.get(m["room_id"])["capacity"]


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=MeetingOptions(meetings=120))
    assert len(big.state.meetings) > 5 * len(h.state.meetings)
    big.run_examples()
    with pytest.raises(ValueError):
        MeetingOptions(meetings=0)


# -- flows with ids passed from one call to the next -----------------------------------------------


def test_find_room_schedule_invite_cancel_flow(h):
    start = at(h, 24 * 60 * 30)
    rooms = h.ok("list_rooms", min_capacity=6, start=start, duration_minutes=60)["rooms"]
    assert rooms and all(r["capacity"] >= 6 and r["available"] for r in rooms)
    smallest = rooms[0]
    booked = h.ok("schedule_meeting", title="Offsite planning", start=start, duration_minutes=60,
                  room_id=smallest["id"], invitees=["Ana@Example.com", "ana@example.com", "bo@example.com"])
    assert booked["status"] == "upcoming" and [i["email"] for i in booked["invitations"]] == ["ana@example.com",
                                                                                               "bo@example.com"]
    error = h.fails("schedule_meeting", "OVERLAPPING_BOOKING", "CONFLICT", title="Clash",
                    start=at(h, 24 * 60 * 30 + 30), duration_minutes=15, room_id=smallest["id"])
    assert (error["details"]["booked_start"], error["details"]["booked_end"]) == (booked["start"], booked["end"])
    busy = h.ok("list_rooms", start=start)["rooms"]
    assert next(r for r in busy if r["id"] == smallest["id"])["available"] is False
    added = h.ok("invite_participants", meeting_id=booked["id"], emails=["cy@example.com"])
    assert added["seats_left"] == smallest["capacity"] - 4
    upcoming = h.ok("list_upcoming_meetings", days=31, role="host", limit=50)["meetings"]
    assert booked["id"] in [m["id"] for m in upcoming]
    cancelled = h.ok("cancel_meeting", meeting_id=booked["id"], reason="Budget")
    assert (cancelled["meeting"]["status"], cancelled["invitees_notified"]) == ("cancelled", 3)
    h.ok("schedule_meeting", title="Clash", start=start, duration_minutes=15, room_id=smallest["id"])


def test_waiting_room_recording_and_removal_in_a_live_meeting(h):
    sync = meeting(h, "Weekly product sync")["id"]
    view = h.ok("get_meeting", meeting_id=sync)
    assert view["status"] == "live" and len(view["waiting_room"]) == 2 and not view["recording_active"]
    first = view["waiting_room"][0]
    admitted = h.ok("admit_participant", meeting_id=sync, participant_id=first["id"])
    assert admitted["admitted"][0]["state"] == "in_meeting" and admitted["participant_count"] == len(
        view["participants"]) + 1
    h.fails("admit_participant", "NOT_IN_WAITING_ROOM", "FAILED_PRECONDITION", meeting_id=sync,
            participant_id=first["id"])
    everyone = h.ok("admit_participant", meeting_id=sync)
    assert len(everyone["admitted"]) == 1
    h.fails("admit_participant", "WAITING_ROOM_EMPTY", "FAILED_PRECONDITION", meeting_id=sync)

    started = h.ok("set_recording", meeting_id=sync, recording=True)
    assert h.ok("get_meeting", meeting_id=sync)["recording_active"]
    removed = h.ok("remove_participant", meeting_id=sync, participant_id=first["id"])
    assert removed["removed"]["state"] == "removed"
    h.fails("remove_participant", "PARTICIPANT_ALREADY_REMOVED", "FAILED_PRECONDITION", meeting_id=sync,
            participant_id=first["id"])
    stopped = h.ok("set_recording", meeting_id=sync, recording=False)
    assert stopped["id"] == started["id"] and stopped["status"] == "available"
    assert stopped["duration_seconds"] == 120  # two state-changing calls, one clock minute each
    listed = h.ok("list_recordings", meeting_id=sync)["recordings"]
    assert [r["id"] for r in listed] == [started["id"]]


def test_a_meeting_goes_live_on_the_session_clock(h):
    soon = h.ok("schedule_meeting", title="Quick sync", start=at(h, 2), duration_minutes=5,
                room_id=room(h, "Cedar"))
    h.fails("set_recording", "MEETING_NOT_LIVE", "FAILED_PRECONDITION", meeting_id=soon["id"], recording=True)
    h.ok("invite_participants", meeting_id=soon["id"], emails=["a@example.com"])  # the clock ticks
    h.ok("set_recording", meeting_id=soon["id"], recording=True)
    h.fails("cancel_meeting", "MEETING_ALREADY_STARTED", "FAILED_PRECONDITION", meeting_id=soon["id"])
    h.state.advance_clock(10 * 60)  # arrange: the meeting is over
    assert h.ok("get_meeting", meeting_id=soon["id"])["status"] == "ended"
    error = h.fails("set_recording", "MEETING_NOT_LIVE", "FAILED_PRECONDITION", meeting_id=soon["id"], recording=False)
    assert error["details"]["status"] == "ended"
    stopped_with_meeting = h.ok("list_recordings", meeting_id=soon["id"])["recordings"][0]
    assert (stopped_with_meeting["status"], stopped_with_meeting["stopped_at"]) == ("available", soon["end"])
    h.fails("cancel_meeting", "MEETING_ENDED", "FAILED_PRECONDITION", meeting_id=soon["id"])
    h.fails("invite_participants", "MEETING_ENDED", "FAILED_PRECONDITION", meeting_id=soon["id"],
            emails=["b@example.com"])


def test_upcoming_lists_live_and_future_meetings_soonest_first(h):
    listed = h.ok("list_upcoming_meetings", days=14, limit=50)["meetings"]
    starts = [m["start"] for m in listed]
    assert starts == sorted(starts) and listed[0]["status"] == "live"
    assert {m["status"] for m in listed} <= {"live", "upcoming"}
    assert {m["your_role"] for m in listed} == {"host", "invitee"}
    invited = h.ok("list_upcoming_meetings", role="invited", days=14, limit=50)["meetings"]
    assert invited and all(m["your_role"] == "invitee" and m["your_response"] for m in invited)
    with_cancelled = h.ok("list_upcoming_meetings", days=14, include_cancelled=True, limit=50)["meetings"]
    assert "cancelled" in {m["status"] for m in with_cancelled}


# -- typed failures ---------------------------------------------------------------------------------


def test_schedule_checks_time_room_capacity_and_overlap(h):
    cedar = room(h, "Cedar")
    base = {"title": "x", "duration_minutes": 30, "room_id": cedar}
    h.fails("schedule_meeting", "BAD_DATETIME", "INVALID_ARGUMENT", **base, start="2026-02-30T10:00")
    h.fails("schedule_meeting", "START_IN_PAST", "INVALID_ARGUMENT", **base, start=at(h, -1))
    error = h.fails("schedule_meeting", "ROOM_CAPACITY_EXCEEDED", "RESOURCE_EXHAUSTED", **base,
                    start=at(h, 60 * 24 * 30), invitees=[f"p{n}@example.com" for n in range(8)])
    assert error["details"] == {"capacity": 8, "needed": 9}
    board = meeting(h, "Board prep")
    h.fails("schedule_meeting", "OVERLAPPING_BOOKING", "CONFLICT", **{**base, "room_id": board["room_id"]},
            start=board["start"].replace("T", " ").removesuffix("Z") + "+00:00")
    h.fails("schedule_meeting", "ROOM_NOT_FOUND", "NOT_FOUND", **{**base, "room_id": "rm_nope"},
            start=at(h, 60))
    h.fails("list_rooms", "BAD_DATETIME", "INVALID_ARGUMENT", start="2026-13-01T10:00")
    assert h.call("schedule_meeting", {**base, "start": "tomorrow"}).error["reason"] == "SCHEMA_VIOLATION"


def test_only_the_host_manages_a_meeting(h):
    review = meeting(h, "Design review")  # live, hosted by a colleague, you are inside
    someone = people(h, review["id"], "waiting")[0]["id"]
    for tool, extra in (("set_recording", {"recording": True}), ("admit_participant", {"participant_id": someone}),
                        ("remove_participant", {"participant_id": someone}), ("cancel_meeting", {}),
                        ("invite_participants", {"emails": ["z@example.com"]}), ("list_recordings", {})):
        error = h.fails(tool, "NOT_HOST", "PERMISSION_DENIED", meeting_id=review["id"], **extra)
        assert error["details"]["host_email"] == review["host_email"]
    assert "waiting_room" not in h.ok("get_meeting", meeting_id=review["id"])  # a guest's view


def test_meetings_you_are_not_part_of_are_private(h):
    h.fails("get_meeting", "NOT_INVITED", "PERMISSION_DENIED", meeting_id=meeting(h, "Board prep")["id"])
    h.fails("get_meeting", "MEETING_NOT_FOUND", "NOT_FOUND", meeting_id="mtg_nope")


def test_cancelled_and_running_meetings(h):
    demo = meeting(h, "Vendor demo")["id"]
    h.fails("cancel_meeting", "MEETING_CANCELLED", "FAILED_PRECONDITION", meeting_id=demo)
    h.fails("invite_participants", "MEETING_CANCELLED", "FAILED_PRECONDITION", meeting_id=demo,
            emails=["q@example.com"])
    h.fails("set_recording", "MEETING_CANCELLED", "FAILED_PRECONDITION", meeting_id=demo, recording=True)
    sync = meeting(h, "Weekly product sync")["id"]
    h.fails("cancel_meeting", "MEETING_ALREADY_STARTED", "FAILED_PRECONDITION", meeting_id=sync)
    retro = meeting(h, "Sprint retro")["id"]
    h.fails("cancel_meeting", "MEETING_ENDED", "FAILED_PRECONDITION", meeting_id=retro)
    h.fails("admit_participant", "MEETING_NOT_LIVE", "FAILED_PRECONDITION", meeting_id=retro)
    one_on_one = h.state.meetings.first(lambda m: m["title"].startswith("1:1 with"))["id"]
    error = h.fails("set_recording", "MEETING_NOT_LIVE", "FAILED_PRECONDITION", meeting_id=one_on_one, recording=True)
    assert error["details"]["status"] == "upcoming"


def test_recording_rules(h):
    h.fails("set_recording", "RECORDING_NOT_ALLOWED", "FAILED_PRECONDITION",
            meeting_id=meeting(h, "Customer escalation huddle")[
        "id"], recording=True)
    h.fails("set_recording", "RECORDING_ALREADY_ACTIVE", "CONFLICT",
            meeting_id=meeting(h, "Webinar rehearsal")["id"], recording=True)
    h.fails("set_recording", "NO_ACTIVE_RECORDING", "FAILED_PRECONDITION",
            meeting_id=meeting(h, "Weekly product sync")["id"], recording=False)
    mine = h.ok("list_recordings")["recordings"]
    stamps = [r["started_at"] for r in mine]
    assert stamps == sorted(stamps, reverse=True) and {r["status"] for r in mine} == {"recording", "available"}


def test_invitation_rules(h):
    planning = meeting(h, "Sprint planning")  # eight of eight seats taken
    error = h.fails("invite_participants", "ROOM_CAPACITY_EXCEEDED", "RESOURCE_EXHAUSTED",
                    meeting_id=planning["id"], emails=["new@example.com"])
    assert error["details"] == {"capacity": 8, "needed": 9}
    invited = h.state.invitations.first(meeting_id=planning["id"])["email"]
    error = h.fails("invite_participants", "ALREADY_INVITED", "CONFLICT", meeting_id=planning["id"],
                    emails=[invited.upper(), planning["host_email"]])
    assert error["details"]["already"] == [invited, planning["host_email"]]


def test_admitting_into_a_full_room(h):
    huddle = meeting(h, "Customer escalation huddle")["id"]  # the four-seat booth is full
    waiting = people(h, huddle, "waiting")[0]["id"]
    error = h.fails("admit_participant", "ROOM_CAPACITY_EXCEEDED", "RESOURCE_EXHAUSTED", meeting_id=huddle,
                    participant_id=waiting)
    assert error["details"] == {"capacity": 4, "needed": 5}
    inside = next(p for p in people(h, huddle, "in_meeting") if p["role"] == "attendee")
    h.ok("remove_participant", meeting_id=huddle, participant_id=inside["id"])
    h.ok("admit_participant", meeting_id=huddle, participant_id=waiting)


def test_participant_checks(h):
    sync = meeting(h, "Weekly product sync")["id"]
    host = next(p for p in people(h, sync, "in_meeting") if p["role"] == "host")["id"]
    h.fails("remove_participant", "CANNOT_REMOVE_HOST", "INVALID_ARGUMENT", meeting_id=sync, participant_id=host)
    elsewhere = people(h, meeting(h, "Webinar rehearsal")["id"], "in_meeting")[-1]["id"]
    error = h.fails("admit_participant", "PARTICIPANT_NOT_IN_MEETING", "INVALID_ARGUMENT", meeting_id=sync,
                    participant_id=elsewhere)
    assert error["details"]["meeting_id"] != sync
    h.fails("remove_participant", "PARTICIPANT_NOT_FOUND", "NOT_FOUND", meeting_id=sync, participant_id="prt_x")
    rehearsal = meeting(h, "Webinar rehearsal")["id"]  # no waiting room
    h.fails("admit_participant", "WAITING_ROOM_EMPTY", "FAILED_PRECONDITION", meeting_id=rehearsal)
