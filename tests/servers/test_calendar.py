"""The calendar server's own rules: conflicts, time rules on the session clock, permissions,
recurrence, invitations, free/busy, sharing and reminders. What every server guarantees is the
conformance kit's (tests/servers/test_conformance.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import calendar
from prove_servers.calendar import CalendarOptions, server

TOOLS = server.tools
NOW = "2026-03-02T09:00:00Z"  # the session clock at the start of every session
h = ServerHarness.fixture(server)


def at(day: int, hour: int, minute: int = 0) -> str:
    """A time ``day`` days after the session's first day (2026-03-02, a Monday)."""
    return (dt.datetime(2026, 3, 2, hour, minute) + dt.timedelta(days=day)).strftime("%Y-%m-%dT%H:%M:%SZ")


def me(h) -> dict:
    state = h.state
    return state.people.get(state.get_var("me"))


def calendar_by(h, role: str) -> dict:
    return next(c for c in h.ok("list_calendars")["calendars"] if c["access_role"] == role)


def work(h) -> str:
    return next(c["id"] for c in h.ok("list_calendars", access_role="owner")["calendars"] if c["primary"])


def new_event(h, **args: Any) -> dict:
    base = {"calendar_id": work(h), "title": "Test block", "start": at(1, 6), "end": at(1, 6, 30)}
    return h.ok("create_event", **{**base, **args})


def my_row(h, event_id: str) -> dict | None:
    """My attendee row on an event (None when I am not invited)."""
    return h.state.attendees.first(event_id=event_id, email=me(h)["email"])


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "find_people", "list_calendars", "create_calendar", "share_calendar", "list_events", "search_events",
        "get_event", "create_event", "update_event", "delete_event", "set_recurrence", "invite_attendees",
        "respond_to_event", "list_invitations", "get_free_busy", "set_reminder", "list_reminders",
    }
    assert servers_registered_by(calendar) == [server]
    assert (server.name, server.domain) == ("calendar", "productivity")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"find_people", "list_calendars", "list_events", "search_events", "get_event",
                         "list_invitations", "get_free_busy", "list_reminders"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"delete_event"}
    assert not TOOLS["create_event"].spec.annotations.idempotent
    assert TOOLS["create_event"].spec.produces == ("event", "attendee")
    assert TOOLS["set_recurrence"].spec.entity_params() == {"event_id": "event"}
    assert TOOLS["list_events"].spec.entity_params() == {"calendar_id": "calendar"}
    for name, tool in TOOLS.items():
        if not tool.spec.annotations.read_only:
            assert tool.spec.produces or tool.spec.mutates, f"{name} writes but declares no entity"


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_times_in_schemas_are_iso_8601_with_a_timezone(h):
    start = TOOLS["create_event"].spec.parameters["properties"]["start"]
    assert start["pattern"] == calendar.ISO_DATETIME
    for bad in ("2026-03-04 10:00", "2026-03-04T10:00:00", "tomorrow at 10"):
        h.fails("create_event", "SCHEMA_VIOLATION", calendar_id="cal_x", title="x", start=bad, end=at(2, 11))


def test_ids_are_seeded_too(h):
    other = ServerHarness(server, seed=1)
    assert {p["id"] for p in h.state.people}.isdisjoint(p["id"] for p in other.state.people)


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_seed_has_every_scenario_the_tools_need(seed):
    h = ServerHarness(server, seed=seed)
    roles = {c["access_role"] for c in h.ok("list_calendars")["calendars"]}
    assert roles == {"owner", "writer", "reader", "free_busy"}
    state = h.state
    rules = [e["recurrence"] for e in state.events if e["recurrence"]]
    assert {r["frequency"] for r in rules} == {"weekly", "monthly"}
    assert any(r["count"] for r in rules) and any(r["until"] for r in rules) and any(r["weekdays"] for r in rules)
    pending = h.ok("list_invitations", response="needsAction")["invitations"]
    assert pending and all(i["next_occurrence"] for i in pending)
    answered = h.ok("list_invitations", include_past=True)["invitations"]
    assert {i["my_response"] for i in answered} >= {"accepted", "needsAction"}
    assert state.reminders.all() and len(state.people) == 13
    starts = sorted(e["start"] for e in state.events)
    assert starts[0] < NOW < starts[-1]  # a history and a future


def test_seeded_calendars_are_free_of_conflicts(h):
    state, mine = h.state, h.state.get_var("me")
    for cal in state.calendars:  # arrange: read access to every calendar, to list its occurrences
        share = state.shares.first(calendar_id=cal["id"], person_id=mine)
        if share is not None:
            state.shares.update(share["id"], role="reader" if share["role"] == "free_busy" else share["role"])
        elif cal["owner_id"] != mine:
            state.shares.insert({"calendar_id": cal["id"], "person_id": mine, "email": me(h)["email"],
                                 "role": "reader", "shared_at": NOW})
    window = {"time_min": "2026-02-01T00:00:00Z", "time_max": "2026-05-01T00:00:00Z", "limit": 100}
    for cal in state.calendars:
        listed = h.ok("list_events", calendar_id=cal["id"], **window)
        assert listed["next_offset"] is None
        spans = sorted((o["start"], o["end"]) for o in listed["occurrences"] if o["show_as"] == "busy")
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), cal["name"]


def test_a_ten_times_larger_seed_works_and_options_are_validated():
    big = ServerHarness(server, options=CalendarOptions(colleagues=120))
    assert len(big.state.people) == 121 and len(big.state.events) > 500
    big.run_examples()
    with pytest.raises(ValueError):
        CalendarOptions(colleagues=0)
    assert len(server.build_state(0, CalendarOptions(colleagues=1)).people) == 2


# -- events and conflicts -------------------------------------------------------------------------


def test_overlapping_a_busy_event_conflicts_unless_allowed(h):
    cal = work(h)
    first = new_event(h)
    clash = {"calendar_id": cal, "title": "Overlap", "start": at(1, 6, 15), "end": at(1, 7)}
    error = h.fails("create_event", "EVENT_CONFLICT", "CONFLICT", **clash)
    assert error["details"]["conflicts"][0]["event_id"] == first["id"]
    h.ok("create_event", **clash, show_as="free")  # free time never conflicts
    h.ok("create_event", **{**clash, "start": at(1, 6, 30)})  # back to back is fine
    assert h.ok("create_event", **clash, allow_conflict=True)["title"] == "Overlap"
    other = calendar_by(h, "writer")["id"]  # another calendar is another schedule
    h.ok("create_event", **{**clash, "calendar_id": other})


def test_a_recurring_occurrence_is_a_busy_slot(h):
    personal = next(c["id"] for c in h.ok("list_calendars", access_role="owner")["calendars"]
                    if c["name"] == "Personal")
    gym = h.state.events.first(title="Gym")
    error = h.fails("create_event", "EVENT_CONFLICT", calendar_id=personal, title="Dinner",
                    start=at(17, 19), end=at(17, 20))  # a Thursday, gym 18:30-19:30
    assert error["details"]["conflicts"][0] == {"event_id": gym["id"], "title": "Gym", "start": at(17, 18, 30),
                                                "end": at(17, 19, 30)}


def test_event_time_rules_and_the_session_clock(h):
    cal = work(h)
    base = {"calendar_id": cal, "title": "x"}
    assert h.fails("create_event", "END_BEFORE_START", **base, start=at(2, 11), end=at(2, 11))["code"] == \
        "INVALID_ARGUMENT"
    h.fails("create_event", "EVENT_TOO_LONG", **base, start=at(2, 11), end=at(17, 11))
    h.fails("create_event", "EVENT_IN_PAST", **base, start=at(0, 8, 59), end=at(0, 9, 30))
    h.fails("create_event", "BAD_DATETIME", **base, start="2026-02-30T10:00:00Z", end=at(2, 11))
    offset = h.ok("create_event", **base, start="2026-03-05T07:00:00-05:00", end="2026-03-05T07:30:00-05:00")
    assert (offset["start"], offset["end"]) == ("2026-03-05T12:00:00Z", "2026-03-05T12:30:00Z")
    # Every write ticks the clock a minute: a start at the original "now" is in the past now.
    h.fails("create_event", "EVENT_IN_PAST", **base, start=NOW, end=at(0, 9, 30))


def test_calendar_permissions(h):
    reader, free_busy = calendar_by(h, "reader"), calendar_by(h, "free_busy")
    slot = {"title": "x", "start": at(2, 6), "end": at(2, 7)}
    h.fails("create_event", "CALENDAR_READ_ONLY", "PERMISSION_DENIED", calendar_id=reader["id"], **slot)
    h.fails("create_event", "CALENDAR_NOT_SHARED", calendar_id=free_busy["id"], **slot)
    window = {"time_min": at(0, 0), "time_max": at(7, 0)}
    assert h.ok("list_events", calendar_id=reader["id"], **window)["total"] > 0
    error = h.fails("list_events", "CALENDAR_NOT_SHARED", calendar_id=free_busy["id"], **window)
    assert error["details"]["access"] == "free_busy" and "get_free_busy" in error["message"]
    state = h.state
    mine = {s["calendar_id"] for s in state.shares.where(person_id=state.get_var("me"))}
    hidden = state.calendars.first(lambda c: c["owner_id"] != state.get_var("me") and c["id"] not in mine)
    h.fails("list_events", "CALENDAR_NOT_SHARED", calendar_id=hidden["id"], **window)
    secret = state.events.first(lambda e: my_row(h, e["id"]) is None, calendar_id=hidden["id"])
    h.fails("get_event", "CALENDAR_NOT_SHARED", event_id=secret["id"])
    h.fails("list_events", "CALENDAR_NOT_FOUND", calendar_id="cal_missing", **window)


def test_only_the_organizer_edits_and_deletes(h):
    standup = h.state.events.first(title="Daily standup")  # on the team calendar you may write to
    error = h.fails("update_event", "NOT_ORGANIZER", event_id=standup["id"], title="Standdown")
    assert error["details"]["organizer"] == standup["organizer_email"]
    h.fails("delete_event", "NOT_ORGANIZER", event_id=standup["id"])
    h.fails("set_recurrence", "NOT_ORGANIZER", event_id=standup["id"], frequency="none")
    h.fails("invite_attendees", "NOT_ORGANIZER", event_id=standup["id"], emails=["a.b@example.com"])
    # Your own event on the team calendar stays yours, but not once the calendar turns read-only.
    team = calendar_by(h, "writer")["id"]
    party = new_event(h, calendar_id=team)
    h.ok("update_event", event_id=party["id"], location="Roof")
    state = h.state
    share = state.shares.first(calendar_id=team, person_id=state.get_var("me"))
    state.shares.update(share["id"], role="reader")  # arrange: the owner downgrades you
    h.fails("update_event", "CALENDAR_READ_ONLY", event_id=party["id"], location="Basement")


def test_update_event_moves_the_event_and_resets_answers(h):
    guest = h.state.people.all()[1]["email"]
    event = new_event(h, attendees=[guest])
    h.fails("update_event", "NOTHING_TO_UPDATE", event_id=event["id"])
    h.fails("update_event", "END_BEFORE_START", event_id=event["id"], end=at(1, 5))
    h.fails("update_event", "EVENT_IN_PAST", event_id=event["id"], start=at(0, 8), end=at(0, 8, 30))
    state = h.state
    row = state.attendees.first(event_id=event["id"], email=guest)
    state.attendees.update(row["id"], response="accepted")  # arrange: the guest said yes
    renamed = h.ok("update_event", event_id=event["id"], title="Renamed")
    assert [a["response"] for a in renamed["attendees"] if a["email"] == guest] == ["accepted"]
    moved = h.ok("update_event", event_id=event["id"], start=at(2, 6), end=at(2, 7))
    assert (moved["start"], moved["end"], moved["title"]) == (at(2, 6), at(2, 7), "Renamed")
    assert [a["response"] for a in moved["attendees"] if a["email"] == guest] == ["needsAction"]
    blocker = new_event(h, start=at(3, 6), end=at(3, 7))
    error = h.fails("update_event", "EVENT_CONFLICT", event_id=event["id"], start=at(3, 6, 30),
                    end=at(3, 7, 30))
    assert error["details"]["conflicts"][0]["event_id"] == blocker["id"]


def test_delete_event_removes_invitations_and_reminders(h):
    guest = h.state.people.all()[2]["email"]
    event = new_event(h, attendees=[guest])
    h.ok("set_reminder", event_id=event["id"], minutes_before=10)
    deleted = h.ok("delete_event", event_id=event["id"])
    assert deleted["notified"] == [guest]
    state = h.state
    assert not state.attendees.where(event_id=event["id"]) and not state.reminders.where(event_id=event["id"])
    h.fails("delete_event", "EVENT_NOT_FOUND", event_id=event["id"])
    h.fails("get_event", "EVENT_NOT_FOUND", event_id=event["id"])


def test_list_and_search_ranges(h):
    cal = work(h)
    h.fails("list_events", "INVALID_TIME_RANGE", calendar_id=cal, time_min=at(3, 0), time_max=at(2, 0))
    h.fails("list_events", "RANGE_TOO_LARGE", calendar_id=cal, time_min=at(0, 0), time_max=at(93, 0))
    everything = h.ok("list_events", calendar_id=cal, time_min=at(-30, 0), time_max=at(60, 0), limit=100)
    starts = [o["start"] for o in everything["occurrences"]]
    assert starts == sorted(starts) and everything["total"] == len(starts) > 10
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("list_events", calendar_id=cal, time_min=at(-30, 0), time_max=at(60, 0), limit=4,
                    offset=offset)
        seen += [o["event_id"] for o in page["occurrences"]]
        offset = page["next_offset"]
    assert seen == [o["event_id"] for o in everything["occurrences"]]
    guest = h.state.people.all()[3]["email"]
    event = new_event(h, title="Quarterly Atlas kickoff", location="Room Aurora (4F)", attendees=[guest])
    found = h.ok("search_events", query="atlas kickoff")["events"]
    assert [e["id"] for e in found] == [event["id"]]
    assert event["id"] in [e["id"] for e in h.ok("search_events", attendee_email=guest, limit=100)["events"]]
    assert not h.ok("search_events", query="atlas kickoff", time_min=at(2, 0))["events"]
    h.fails("search_events", "INVALID_TIME_RANGE", time_min=at(2, 0), time_max=at(1, 0))


# -- recurrence -----------------------------------------------------------------------------------


def test_weekly_series_expand_in_a_range(h):
    event = new_event(h, start=at(1, 6), end=at(1, 6, 30))  # a Tuesday
    result = h.ok("set_recurrence", event_id=event["id"], frequency="weekly", weekdays=["TU", "TH"], count=5)
    assert result["recurrence"]["summary"] == "every week on TU, TH, 5 times"
    assert [o["start"] for o in result["upcoming"]] == [at(1, 6), at(3, 6), at(8, 6), at(10, 6), at(15, 6)]
    listed = h.ok("list_events", calendar_id=event["calendar_id"], time_min=at(7, 0), time_max=at(30, 0),
                  limit=100)["occurrences"]
    assert [o["start"] for o in listed if o["event_id"] == event["id"]] == [at(8, 6), at(10, 6), at(15, 6)]
    assert h.ok("get_event", event_id=event["id"])["next_occurrence"]["start"] == at(1, 6)


def test_daily_until_is_inclusive_and_monthly_skips_short_months(h):
    daily = new_event(h)
    until = h.ok("set_recurrence", event_id=daily["id"], frequency="daily", interval=3,
                 until=at(7, 0)[:10])
    assert [o["start"] for o in until["upcoming"]] == [at(1, 6), at(4, 6), at(7, 6)]
    monthly = new_event(h, start="2026-03-31T06:00:00Z", end="2026-03-31T07:00:00Z")
    h.ok("set_recurrence", event_id=monthly["id"], frequency="monthly", count=3)
    window = {"calendar_id": monthly["calendar_id"], "time_min": "2026-03-30T00:00:00Z",
              "time_max": "2026-06-29T00:00:00Z", "limit": 100}
    listed = [o["start"] for o in h.ok("list_events", **window)["occurrences"] if o["event_id"] ==
              monthly["id"]]
    assert listed == ["2026-03-31T06:00:00Z", "2026-05-31T06:00:00Z"]  # no April 31st
    later = {**window, "time_min": "2026-06-29T00:00:00Z", "time_max": "2026-09-01T00:00:00Z"}
    last = [(o["start"], o["end"]) for o in h.ok("list_events", **later)["occurrences"] if o["event_id"] ==
            monthly["id"]]
    assert last == [("2026-07-31T06:00:00Z", "2026-07-31T07:00:00Z")]  # the third and last: the series ends then
    single = h.ok("set_recurrence", event_id=monthly["id"], frequency="none")
    assert single["recurrence"] is None and single["upcoming"] == []


def test_recurrence_rules_are_validated(h):
    event = new_event(h)  # a Tuesday
    base = {"event_id": event["id"]}
    h.fails("set_recurrence", "RECURRENCE_END_REQUIRED", **base, frequency="daily")
    h.fails("set_recurrence", "RECURRENCE_END_REQUIRED", **base, frequency="daily", count=3,
            until="2026-04-01")
    h.fails("set_recurrence", "WEEKDAYS_REQUIRE_WEEKLY", **base, frequency="daily", weekdays=["TU"], count=3)
    error = h.fails("set_recurrence", "WEEKDAYS_EXCLUDE_START", **base, frequency="weekly",
                    weekdays=["MO", "WE"], count=3)
    assert error["details"]["start_weekday"] == "TU"
    h.fails("set_recurrence", "UNTIL_BEFORE_START", **base, frequency="daily", until="2026-03-02")
    h.fails("set_recurrence", "RECURRENCE_TOO_LONG", **base, frequency="daily", until="2028-06-01")
    h.fails("set_recurrence", "BAD_DATE", **base, frequency="daily", until="2026-02-30")
    h.ok("set_recurrence", **base, frequency="weekly", weekdays=["TU"], until="2026-04-30")
    # Moving a series off its weekdays or past its until date is refused too.
    h.fails("update_event", "WEEKDAYS_EXCLUDE_START", **base, start=at(2, 6), end=at(2, 6, 30))
    h.fails("update_event", "UNTIL_BEFORE_START", **base, start=at(64, 6), end=at(64, 6, 30))


def test_a_series_that_would_overlap_conflicts(h):
    event = new_event(h)
    later = new_event(h, title="Next week", start=at(8, 6, 15), end=at(8, 6, 45))
    error = h.fails("set_recurrence", "EVENT_CONFLICT", event_id=event["id"], frequency="weekly", count=4)
    assert [c["event_id"] for c in error["details"]["conflicts"]] == [later["id"]]
    h.ok("set_recurrence", event_id=event["id"], frequency="weekly", count=4, allow_conflict=True)
    h.fails("create_event", "EVENT_CONFLICT", calendar_id=event["calendar_id"], title="x",
            start=at(22, 6), end=at(22, 6, 10))  # the fourth occurrence


# -- attendees, invitations and free/busy ---------------------------------------------------------


def test_invitations_and_responses(h):
    invitation = h.ok("list_invitations", response="needsAction")["invitations"][0]
    answered = h.ok("respond_to_event", event_id=invitation["id"], response="declined", comment="Out sick")
    assert answered["my_response"] == "declined"
    assert invitation["id"] not in [i["id"] for i in h.ok("list_invitations",
                                                          response="needsAction")["invitations"]]
    state = h.state
    mine = state.events.first(calendar_id=work(h))
    h.fails("respond_to_event", "ORGANIZER_CANNOT_RESPOND", event_id=mine["id"], response="accepted")
    reader = calendar_by(h, "reader")["id"]
    stranger = state.events.first(lambda e: my_row(h, e["id"]) is None, calendar_id=reader)
    h.fails("respond_to_event", "NOT_INVITED", "PERMISSION_DENIED", event_id=stranger["id"], response="accepted")
    over = h.ok("list_invitations", include_past=True)["invitations"]
    past = next(i for i in over if i["next_occurrence"] is None)
    h.fails("respond_to_event", "EVENT_ENDED", event_id=past["id"], response="accepted")


def test_inviting_attendees(h):
    people = h.state.people.all()
    event = new_event(h, attendees=[people[1]["email"]])
    error = h.fails("invite_attendees", "ATTENDEE_ALREADY_INVITED", "CONFLICT", event_id=event["id"],
                    emails=[people[2]["email"], people[1]["email"].upper()])
    assert error["details"]["emails"] == [people[1]["email"]]
    h.fails("invite_attendees", "ATTENDEE_ALREADY_INVITED", event_id=event["id"],
            emails=[me(h)["email"]])  # the organizer attends already
    invited = h.ok("invite_attendees", event_id=event["id"], emails=[people[2]["email"], "guest@partner.org"])
    assert [(a["email"], a["response"]) for a in invited["attendees"][-2:]] == [
        (people[2]["email"], "needsAction"), ("guest@partner.org", "needsAction")]
    crowd = new_event(h, start=at(4, 6), end=at(4, 7), attendees=[f"guest{n}@partner.org" for n in range(49)])
    assert len(crowd["attendees"]) == 50
    h.fails("invite_attendees", "TOO_MANY_ATTENDEES", "RESOURCE_EXHAUSTED", event_id=crowd["id"],
            emails=["one@more.org"])
    past = h.state.events.first(lambda e: e["end"] < NOW, calendar_id=work(h))
    h.fails("invite_attendees", "EVENT_ENDED", event_id=past["id"], emails=["late@partner.org"])


def test_free_busy_counts_what_blocks_time(h):
    you = me(h)["email"]
    window = {"time_min": at(5, 0), "time_max": at(6, 0)}  # a Saturday: nothing seeded at work
    assert h.ok("get_free_busy", emails=[you], **window)["people"][0]["busy"] == []
    colleague = h.state.people.all()[1]["email"]
    h.ok("create_event", calendar_id=work(h), title="Sat", start=at(5, 10), end=at(5, 11),
         attendees=[colleague])
    h.ok("create_event", calendar_id=work(h), title="Maybe", start=at(5, 12), end=at(5, 13),
         show_as="free")
    result = h.ok("get_free_busy", emails=[you, colleague], **window)
    assert [p["busy"] for p in result["people"]] == [[{"start": at(5, 10), "end": at(5, 11)}]] * 2
    assert result["free_for_all"] == [{"start": at(5, 0), "end": at(5, 10)}, {"start": at(5, 11), "end": at(6, 0)}]
    state = h.state
    event = state.events.first(title="Sat")
    row = state.attendees.first(event_id=event["id"], email=colleague)
    state.attendees.update(row["id"], response="declined")  # arrange: the colleague declines
    assert h.ok("get_free_busy", emails=[colleague], **window)["people"][0]["busy"] == []
    h.fails("get_free_busy", "PERSON_NOT_FOUND", "NOT_FOUND", emails=["nobody@nowhere.org"], **window)
    h.fails("get_free_busy", "RANGE_TOO_LARGE", emails=[you], time_min=at(0, 0), time_max=at(100, 0))


def test_free_busy_sees_series_across_calendars(h):
    result = h.ok("get_free_busy", emails=[me(h)["email"]], time_min=at(3, 18), time_max=at(3, 20))
    assert result["people"][0]["busy"] == [{"start": at(3, 18, 30), "end": at(3, 19, 30)}]  # Thursday gym


# -- calendars, sharing and reminders -------------------------------------------------------------


def test_calendars_and_sharing(h):
    h.fails("create_calendar", "CALENDAR_NAME_TAKEN", name=" work ")
    created = h.ok("create_calendar", name="Garden", color="green")
    colleague = h.state.people.all()[4]
    shared = h.ok("share_calendar", calendar_id=created["id"], email=colleague["email"], role="reader")
    assert shared["previous_role"] is None
    upgraded = h.ok("share_calendar", calendar_id=created["id"], email=colleague["email"], role="writer")
    assert (upgraded["previous_role"], upgraded["share"]["role"]) == ("reader", "writer")
    listed = next(c for c in h.ok("list_calendars")["calendars"] if c["id"] == created["id"])
    assert listed["shared_with"] == [{"email": colleague["email"], "role": "writer"}]
    h.fails("share_calendar", "CANNOT_SHARE_WITH_SELF", calendar_id=created["id"],
            email=me(h)["email"], role="reader")
    h.fails("share_calendar", "PERSON_NOT_FOUND", calendar_id=created["id"], email="x@nowhere.org",
            role="reader")
    team = calendar_by(h, "writer")["id"]
    h.fails("share_calendar", "NOT_CALENDAR_OWNER", calendar_id=team, email=colleague["email"], role="reader")
    for n in range(17):
        h.ok("create_calendar", name=f"Project {n}")
    h.fails("create_calendar", "CALENDAR_LIMIT_REACHED", "RESOURCE_EXHAUSTED", name="One too many")


def test_reminders(h):
    event = new_event(h)
    reminder = h.ok("set_reminder", event_id=event["id"], minutes_before=15)
    assert reminder["next_fire_at"] == at(1, 5, 45)
    error = h.fails("set_reminder", "REMINDER_ALREADY_SET", event_id=event["id"], minutes_before=15)
    assert error["details"]["reminder_id"] == reminder["id"]
    for minutes in (30, 60, 120, 1440):
        h.ok("set_reminder", event_id=event["id"], minutes_before=minutes, method="email")
    h.fails("set_reminder", "REMINDER_LIMIT_REACHED", event_id=event["id"], minutes_before=5)
    listed = h.ok("list_reminders", event_id=event["id"])["reminders"]
    # Soonest to fire first; a day ahead of tomorrow 06:00 has passed already: it will not fire.
    assert [(r["minutes_before"], r["next_fire_at"]) for r in listed] == [
        (120, at(1, 4)), (60, at(1, 5)), (30, at(1, 5, 30)), (15, at(1, 5, 45)), (1440, None)]
    past = h.state.events.first(lambda e: e["end"] < NOW, calendar_id=work(h))
    h.fails("set_reminder", "EVENT_ENDED", event_id=past["id"], minutes_before=5)
    standup = h.state.events.first(title="Daily standup")  # a series: fires before the next occurrence
    assert h.ok("set_reminder", event_id=standup["id"], minutes_before=10)["next_fire_at"] == at(0, 9, 20)


# -- a whole flow ---------------------------------------------------------------------------------


def test_ids_flow_from_directory_to_free_slot_to_series(h):
    colleague = h.state.people.all()[1]
    person = h.ok("find_people", query=colleague["name"].lower())["people"][0]
    you = next(p for p in h.ok("find_people", query=me(h)["email"])["people"] if p["is_me"])
    busy = h.ok("get_free_busy", emails=[you["email"], person["email"]], time_min=at(1, 10),
                time_max=at(1, 17))
    slot = next(f for f in busy["free_for_all"] if f["end"] >= f["start"][:11] + "11:00:00Z")
    start = dt.datetime.fromisoformat(slot["start"])
    end = (start + dt.timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    cal = next(c for c in h.ok("list_calendars", access_role="owner")["calendars"] if c["primary"])
    event = h.ok("create_event", calendar_id=cal["id"], title="Sync", start=slot["start"], end=end,
                 attendees=[person["email"]], allow_conflict=True)
    h.ok("set_recurrence", event_id=event["id"], frequency="weekly", count=3, allow_conflict=True)
    h.ok("set_reminder", event_id=event["id"], minutes_before=5)
    after = h.ok("get_free_busy", emails=[person["email"]], time_min=at(1, 10), time_max=at(1, 17))
    assert {"start": slot["start"], "end": end} in [
        {"start": b["start"], "end": min(b["end"], end)} for b in after["people"][0]["busy"]]
    detail = h.ok("get_event", event_id=event["id"])
    assert detail["recurrence"]["count"] == 3 and detail["reminders"][0]["minutes_before"] == 5
    assert [a["email"] for a in detail["attendees"]] == [you["email"], person["email"]]
    found = h.ok("search_events", attendee_email=person["email"], query="sync", limit=100)["events"]
    assert event["id"] in [e["id"] for e in found]
