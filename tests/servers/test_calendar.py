"""The calendar server: its tool surface, seed, business rules and typed failures."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import calendar
from prove_servers.calendar import CalendarOptions, server

TOOLS = server.tools
NOW = "2026-03-02T09:00:00Z"  # the session clock at the start of every session


@pytest.fixture(scope="module")
def rt() -> ServerRuntime:
    return ServerRuntime(server)


@pytest.fixture
def sid(rt: ServerRuntime) -> str:
    return rt.new_session()


def ok(rt: ServerRuntime, sid: str, tool: str, **args: Any) -> dict:
    result = rt.call(sid, tool, args)
    assert not result.is_error, result.error
    return result.data


def fails(rt: ServerRuntime, sid: str, tool: str, reason: str, **args: Any) -> dict:
    """The call fails with ``reason``, the tool declares it, and the state is left as it was —
    by the tool itself, which checks before it writes, not only by the executor's rollback."""
    before = rt.state_hash(sid)
    probe = State.from_snapshot(rt.state(sid).snapshot())
    with pytest.raises(ToolError):
        TOOLS[tool].fn(probe, **TOOLS[tool].validate(dict(args)))
    assert probe.state_hash() == before, f"{tool} wrote before failing with {reason}"
    result = rt.call(sid, tool, args)
    assert result.is_error, f"{tool} succeeded: {result.data}"
    assert result.error["reason"] == reason, result.error
    assert reason in TOOLS[tool].spec.errors, f"{tool} does not declare {reason}"
    assert rt.state_hash(sid) == before
    return result.error


def example_args(rt: ServerRuntime, sid: str, example: Any) -> dict:
    return dict(example(rt.state(sid)) if callable(example) else example)


ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


def at(day: int, hour: int, minute: int = 0) -> str:
    """A time ``day`` days after the session's first day (2026-03-02, a Monday)."""
    return (dt.datetime(2026, 3, 2, hour, minute) + dt.timedelta(days=day)).strftime("%Y-%m-%dT%H:%M:%SZ")


def me(rt: ServerRuntime, sid: str) -> dict:
    state = rt.state(sid)
    return state.people.get(state.get_var("me"))


def calendar_by(rt: ServerRuntime, sid: str, role: str) -> dict:
    return next(c for c in ok(rt, sid, "list_calendars")["calendars"] if c["access_role"] == role)


def work(rt: ServerRuntime, sid: str) -> str:
    return next(c["id"] for c in ok(rt, sid, "list_calendars", access_role="owner")["calendars"] if c["primary"])


def new_event(rt: ServerRuntime, sid: str, **args: Any) -> dict:
    base = {"calendar_id": work(rt, sid), "title": "Test block", "start": at(1, 6), "end": at(1, 6, 30)}
    return ok(rt, sid, "create_event", **{**base, **args})


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_17_tools_each_described_with_examples():
    assert len(TOOLS) == 17
    assert set(TOOLS) == {
        "find_people", "list_calendars", "create_calendar", "share_calendar", "list_events", "search_events",
        "get_event", "create_event", "update_event", "delete_event", "set_recurrence", "invite_attendees",
        "respond_to_event", "list_invitations", "get_free_busy", "set_reminder", "list_reminders",
    }
    assert (server.name, server.domain) == ("calendar", "productivity")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_match_what_tools_do():
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


def test_times_in_schemas_are_iso_8601_with_a_timezone():
    start = TOOLS["create_event"].spec.parameters["properties"]["start"]
    assert start["pattern"] == calendar.ISO_DATETIME
    for bad in ("2026-03-04 10:00", "2026-03-04T10:00:00", "tomorrow at 10"):
        result = ServerRuntime(server).call("s", "create_event", {"calendar_id": "cal_x", "title": "x",
                                                                  "start": bad, "end": at(2, 11)})
        assert result.error["reason"] == "SCHEMA_VIOLATION", bad


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
        sid = rt.new_session()
        args = example_args(rt, sid, tool.examples[0])
        ok(rt, sid, name, **args)
        once = rt.state_hash(sid)
        rt.call(sid, name, args)  # may be refused (already set, not found), but must change nothing
        assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash("a") == again.state_hash("b")
    assert other.state_hash("a") != first.state_hash("a")
    assert {p["id"] for p in first.state("a").people}.isdisjoint(p["id"] for p in other.state("a").people)


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_seed_has_every_scenario_the_tools_need(seed):
    rt = ServerRuntime(server, seed=seed)
    sid = rt.new_session()
    roles = {c["access_role"] for c in ok(rt, sid, "list_calendars")["calendars"]}
    assert roles == {"owner", "writer", "reader", "free_busy"}
    state = rt.state(sid)
    rules = [e["recurrence"] for e in state.events if e["recurrence"]]
    assert {r["frequency"] for r in rules} == {"weekly", "monthly"}
    assert any(r["count"] for r in rules) and any(r["until"] for r in rules) and any(r["weekdays"] for r in rules)
    pending = ok(rt, sid, "list_invitations", response="needsAction")["invitations"]
    assert pending and all(i["next_occurrence"] for i in pending)
    answered = ok(rt, sid, "list_invitations", include_past=True)["invitations"]
    assert {i["my_response"] for i in answered} >= {"accepted", "needsAction"}
    assert state.reminders.all() and len(state.people) == 13
    starts = sorted(e["start"] for e in state.events)
    assert starts[0] < NOW < starts[-1]  # a history and a future


def test_seeded_calendars_are_free_of_conflicts(rt, sid):
    state = rt.state(sid)
    lo, hi = dt.datetime(2026, 2, 1, tzinfo=dt.UTC), dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
    for cal in state.calendars:
        spans = sorted(s for e in state.events.where(calendar_id=cal["id"]) if e["show_as"] == "busy"
                       for s in calendar._occurrences(e, lo, hi))
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), cal["name"]


def test_a_ten_times_larger_seed_works():
    big = ServerRuntime(server, options=CalendarOptions(colleagues=120))
    assert len(big.state("x").people) == 121 and len(big.state("x").events) > 500
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated_and_a_tiny_directory_still_seeds():
    with pytest.raises(ValueError):
        CalendarOptions(colleagues=0)
    assert len(server.build_state(0, CalendarOptions(colleagues=1)).people) == 2


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(calendar)
    registered: list[Any] = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- events and conflicts -------------------------------------------------------------------------


def test_overlapping_a_busy_event_conflicts_unless_allowed(rt, sid):
    cal = work(rt, sid)
    first = new_event(rt, sid)
    clash = {"calendar_id": cal, "title": "Overlap", "start": at(1, 6, 15), "end": at(1, 7)}
    error = fails(rt, sid, "create_event", "EVENT_CONFLICT", **clash)
    assert error["code"] == "CONFLICT" and error["details"]["conflicts"][0]["event_id"] == first["id"]
    ok(rt, sid, "create_event", **clash, show_as="free")  # free time never conflicts
    ok(rt, sid, "create_event", **{**clash, "start": at(1, 6, 30)})  # back to back is fine
    assert ok(rt, sid, "create_event", **clash, allow_conflict=True)["title"] == "Overlap"
    other = calendar_by(rt, sid, "writer")["id"]  # another calendar is another schedule
    ok(rt, sid, "create_event", **{**clash, "calendar_id": other})


def test_a_recurring_occurrence_is_a_busy_slot(rt, sid):
    personal = next(c["id"] for c in ok(rt, sid, "list_calendars", access_role="owner")["calendars"]
                    if c["name"] == "Personal")
    gym = rt.state(sid).events.first(title="Gym")
    error = fails(rt, sid, "create_event", "EVENT_CONFLICT", calendar_id=personal, title="Dinner",
                  start=at(17, 19), end=at(17, 20))  # a Thursday, gym 18:30-19:30
    assert error["details"]["conflicts"][0] == {"event_id": gym["id"], "title": "Gym", "start": at(17, 18, 30),
                                                "end": at(17, 19, 30)}


def test_event_time_rules_and_the_session_clock(rt, sid):
    cal = work(rt, sid)
    base = {"calendar_id": cal, "title": "x"}
    assert fails(rt, sid, "create_event", "END_BEFORE_START", **base, start=at(2, 11), end=at(2, 11))["code"] == \
        "INVALID_ARGUMENT"
    fails(rt, sid, "create_event", "EVENT_TOO_LONG", **base, start=at(2, 11), end=at(17, 11))
    fails(rt, sid, "create_event", "EVENT_IN_PAST", **base, start=at(0, 8, 59), end=at(0, 9, 30))
    fails(rt, sid, "create_event", "BAD_DATETIME", **base, start="2026-02-30T10:00:00Z", end=at(2, 11))
    offset = ok(rt, sid, "create_event", **base, start="2026-03-05T07:00:00-05:00", end="2026-03-05T07:30:00-05:00")
    assert (offset["start"], offset["end"]) == ("2026-03-05T12:00:00Z", "2026-03-05T12:30:00Z")
    # Every write ticks the clock a minute: a start at the original "now" is in the past now.
    fails(rt, sid, "create_event", "EVENT_IN_PAST", **base, start=NOW, end=at(0, 9, 30))


def test_calendar_permissions(rt, sid):
    reader, free_busy = calendar_by(rt, sid, "reader"), calendar_by(rt, sid, "free_busy")
    slot = {"title": "x", "start": at(2, 6), "end": at(2, 7)}
    error = fails(rt, sid, "create_event", "CALENDAR_READ_ONLY", calendar_id=reader["id"], **slot)
    assert error["code"] == "PERMISSION_DENIED"
    fails(rt, sid, "create_event", "CALENDAR_NOT_SHARED", calendar_id=free_busy["id"], **slot)
    window = {"time_min": at(0, 0), "time_max": at(7, 0)}
    assert ok(rt, sid, "list_events", calendar_id=reader["id"], **window)["total"] > 0
    error = fails(rt, sid, "list_events", "CALENDAR_NOT_SHARED", calendar_id=free_busy["id"], **window)
    assert error["details"]["access"] == "free_busy" and "get_free_busy" in error["message"]
    state = rt.state(sid)
    mine = {s["calendar_id"] for s in state.shares.where(person_id=state.get_var("me"))}
    hidden = state.calendars.first(lambda c: c["owner_id"] != state.get_var("me") and c["id"] not in mine)
    fails(rt, sid, "list_events", "CALENDAR_NOT_SHARED", calendar_id=hidden["id"], **window)
    secret = state.events.first(lambda e: calendar._my_row(state, e["id"]) is None, calendar_id=hidden["id"])
    fails(rt, sid, "get_event", "CALENDAR_NOT_SHARED", event_id=secret["id"])
    fails(rt, sid, "list_events", "CALENDAR_NOT_FOUND", calendar_id="cal_missing", **window)


def test_only_the_organizer_edits_and_deletes(rt, sid):
    standup = rt.state(sid).events.first(title="Daily standup")  # on the team calendar you may write to
    error = fails(rt, sid, "update_event", "NOT_ORGANIZER", event_id=standup["id"], title="Standdown")
    assert error["details"]["organizer"] == standup["organizer_email"]
    fails(rt, sid, "delete_event", "NOT_ORGANIZER", event_id=standup["id"])
    fails(rt, sid, "set_recurrence", "NOT_ORGANIZER", event_id=standup["id"], frequency="none")
    fails(rt, sid, "invite_attendees", "NOT_ORGANIZER", event_id=standup["id"], emails=["a.b@example.com"])
    # Your own event on the team calendar stays yours, but not once the calendar turns read-only.
    team = calendar_by(rt, sid, "writer")["id"]
    party = new_event(rt, sid, calendar_id=team)
    ok(rt, sid, "update_event", event_id=party["id"], location="Roof")
    state = rt.state(sid)
    share = state.shares.first(calendar_id=team, person_id=state.get_var("me"))
    state.shares.update(share["id"], role="reader")  # arrange: the owner downgrades you
    fails(rt, sid, "update_event", "CALENDAR_READ_ONLY", event_id=party["id"], location="Basement")


def test_update_event_moves_the_event_and_resets_answers(rt, sid):
    guest = rt.state(sid).people.all()[1]["email"]
    event = new_event(rt, sid, attendees=[guest])
    fails(rt, sid, "update_event", "NOTHING_TO_UPDATE", event_id=event["id"])
    fails(rt, sid, "update_event", "END_BEFORE_START", event_id=event["id"], end=at(1, 5))
    fails(rt, sid, "update_event", "EVENT_IN_PAST", event_id=event["id"], start=at(0, 8), end=at(0, 8, 30))
    state = rt.state(sid)
    row = state.attendees.first(event_id=event["id"], email=guest)
    state.attendees.update(row["id"], response="accepted")  # arrange: the guest said yes
    renamed = ok(rt, sid, "update_event", event_id=event["id"], title="Renamed")
    assert [a["response"] for a in renamed["attendees"] if a["email"] == guest] == ["accepted"]
    moved = ok(rt, sid, "update_event", event_id=event["id"], start=at(2, 6), end=at(2, 7))
    assert (moved["start"], moved["end"], moved["title"]) == (at(2, 6), at(2, 7), "Renamed")
    assert [a["response"] for a in moved["attendees"] if a["email"] == guest] == ["needsAction"]
    blocker = new_event(rt, sid, start=at(3, 6), end=at(3, 7))
    error = fails(rt, sid, "update_event", "EVENT_CONFLICT", event_id=event["id"], start=at(3, 6, 30),
                  end=at(3, 7, 30))
    assert error["details"]["conflicts"][0]["event_id"] == blocker["id"]


def test_delete_event_removes_invitations_and_reminders(rt, sid):
    guest = rt.state(sid).people.all()[2]["email"]
    event = new_event(rt, sid, attendees=[guest])
    ok(rt, sid, "set_reminder", event_id=event["id"], minutes_before=10)
    deleted = ok(rt, sid, "delete_event", event_id=event["id"])
    assert deleted["notified"] == [guest]
    state = rt.state(sid)
    assert not state.attendees.where(event_id=event["id"]) and not state.reminders.where(event_id=event["id"])
    fails(rt, sid, "delete_event", "EVENT_NOT_FOUND", event_id=event["id"])
    fails(rt, sid, "get_event", "EVENT_NOT_FOUND", event_id=event["id"])


def test_list_and_search_ranges(rt, sid):
    cal = work(rt, sid)
    fails(rt, sid, "list_events", "INVALID_TIME_RANGE", calendar_id=cal, time_min=at(3, 0), time_max=at(2, 0))
    fails(rt, sid, "list_events", "RANGE_TOO_LARGE", calendar_id=cal, time_min=at(0, 0), time_max=at(93, 0))
    everything = ok(rt, sid, "list_events", calendar_id=cal, time_min=at(-30, 0), time_max=at(60, 0), limit=100)
    starts = [o["start"] for o in everything["occurrences"]]
    assert starts == sorted(starts) and everything["total"] == len(starts) > 10
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "list_events", calendar_id=cal, time_min=at(-30, 0), time_max=at(60, 0), limit=4,
                  offset=offset)
        seen += [o["event_id"] for o in page["occurrences"]]
        offset = page["next_offset"]
    assert seen == [o["event_id"] for o in everything["occurrences"]]
    guest = rt.state(sid).people.all()[3]["email"]
    event = new_event(rt, sid, title="Quarterly Atlas kickoff", location="Room Aurora (4F)", attendees=[guest])
    found = ok(rt, sid, "search_events", query="atlas kickoff")["events"]
    assert [e["id"] for e in found] == [event["id"]]
    assert event["id"] in [e["id"] for e in ok(rt, sid, "search_events", attendee_email=guest, limit=100)["events"]]
    assert not ok(rt, sid, "search_events", query="atlas kickoff", time_min=at(2, 0))["events"]
    fails(rt, sid, "search_events", "INVALID_TIME_RANGE", time_min=at(2, 0), time_max=at(1, 0))


# -- recurrence -----------------------------------------------------------------------------------


def test_weekly_series_expand_in_a_range(rt, sid):
    event = new_event(rt, sid, start=at(1, 6), end=at(1, 6, 30))  # a Tuesday
    result = ok(rt, sid, "set_recurrence", event_id=event["id"], frequency="weekly", weekdays=["TU", "TH"], count=5)
    assert result["recurrence"]["summary"] == "every week on TU, TH, 5 times"
    assert [o["start"] for o in result["upcoming"]] == [at(1, 6), at(3, 6), at(8, 6), at(10, 6), at(15, 6)]
    listed = ok(rt, sid, "list_events", calendar_id=event["calendar_id"], time_min=at(7, 0), time_max=at(30, 0),
                limit=100)["occurrences"]
    assert [o["start"] for o in listed if o["event_id"] == event["id"]] == [at(8, 6), at(10, 6), at(15, 6)]
    assert ok(rt, sid, "get_event", event_id=event["id"])["next_occurrence"]["start"] == at(1, 6)


def test_daily_until_is_inclusive_and_monthly_skips_short_months(rt, sid):
    daily = new_event(rt, sid)
    until = ok(rt, sid, "set_recurrence", event_id=daily["id"], frequency="daily", interval=3,
               until=at(7, 0)[:10])
    assert [o["start"] for o in until["upcoming"]] == [at(1, 6), at(4, 6), at(7, 6)]
    monthly = new_event(rt, sid, start="2026-03-31T06:00:00Z", end="2026-03-31T07:00:00Z")
    ok(rt, sid, "set_recurrence", event_id=monthly["id"], frequency="monthly", count=3)
    window = {"calendar_id": monthly["calendar_id"], "time_min": "2026-03-30T00:00:00Z",
              "time_max": "2026-06-29T00:00:00Z", "limit": 100}
    listed = [o["start"] for o in ok(rt, sid, "list_events", **window)["occurrences"] if o["event_id"] ==
              monthly["id"]]
    assert listed == ["2026-03-31T06:00:00Z", "2026-05-31T06:00:00Z"]  # no April 31st
    assert calendar._series_end(rt.state(sid).events.get(monthly["id"])).isoformat() == "2026-07-31T07:00:00+00:00"
    single = ok(rt, sid, "set_recurrence", event_id=monthly["id"], frequency="none")
    assert single["recurrence"] is None and single["upcoming"] == []


def test_recurrence_rules_are_validated(rt, sid):
    event = new_event(rt, sid)  # a Tuesday
    base = {"event_id": event["id"]}
    fails(rt, sid, "set_recurrence", "RECURRENCE_END_REQUIRED", **base, frequency="daily")
    fails(rt, sid, "set_recurrence", "RECURRENCE_END_REQUIRED", **base, frequency="daily", count=3,
          until="2026-04-01")
    fails(rt, sid, "set_recurrence", "WEEKDAYS_REQUIRE_WEEKLY", **base, frequency="daily", weekdays=["TU"], count=3)
    error = fails(rt, sid, "set_recurrence", "WEEKDAYS_EXCLUDE_START", **base, frequency="weekly",
                  weekdays=["MO", "WE"], count=3)
    assert error["details"]["start_weekday"] == "TU"
    fails(rt, sid, "set_recurrence", "UNTIL_BEFORE_START", **base, frequency="daily", until="2026-03-02")
    fails(rt, sid, "set_recurrence", "RECURRENCE_TOO_LONG", **base, frequency="daily", until="2028-06-01")
    fails(rt, sid, "set_recurrence", "BAD_DATE", **base, frequency="daily", until="2026-02-30")
    ok(rt, sid, "set_recurrence", **base, frequency="weekly", weekdays=["TU"], until="2026-04-30")
    # Moving a series off its weekdays or past its until date is refused too.
    fails(rt, sid, "update_event", "WEEKDAYS_EXCLUDE_START", **base, start=at(2, 6), end=at(2, 6, 30))
    fails(rt, sid, "update_event", "UNTIL_BEFORE_START", **base, start=at(64, 6), end=at(64, 6, 30))


def test_a_series_that_would_overlap_conflicts(rt, sid):
    event = new_event(rt, sid)
    later = new_event(rt, sid, title="Next week", start=at(8, 6, 15), end=at(8, 6, 45))
    error = fails(rt, sid, "set_recurrence", "EVENT_CONFLICT", event_id=event["id"], frequency="weekly", count=4)
    assert [c["event_id"] for c in error["details"]["conflicts"]] == [later["id"]]
    ok(rt, sid, "set_recurrence", event_id=event["id"], frequency="weekly", count=4, allow_conflict=True)
    fails(rt, sid, "create_event", "EVENT_CONFLICT", calendar_id=event["calendar_id"], title="x",
          start=at(22, 6), end=at(22, 6, 10))  # the fourth occurrence


# -- attendees, invitations and free/busy ---------------------------------------------------------


def test_invitations_and_responses(rt, sid):
    invitation = ok(rt, sid, "list_invitations", response="needsAction")["invitations"][0]
    answered = ok(rt, sid, "respond_to_event", event_id=invitation["id"], response="declined", comment="Out sick")
    assert answered["my_response"] == "declined"
    assert invitation["id"] not in [i["id"] for i in ok(rt, sid, "list_invitations",
                                                        response="needsAction")["invitations"]]
    state = rt.state(sid)
    mine = state.events.first(calendar_id=work(rt, sid))
    fails(rt, sid, "respond_to_event", "ORGANIZER_CANNOT_RESPOND", event_id=mine["id"], response="accepted")
    reader = calendar_by(rt, sid, "reader")["id"]
    stranger = state.events.first(lambda e: calendar._my_row(state, e["id"]) is None, calendar_id=reader)
    error = fails(rt, sid, "respond_to_event", "NOT_INVITED", event_id=stranger["id"], response="accepted")
    assert error["code"] == "PERMISSION_DENIED"
    over = ok(rt, sid, "list_invitations", include_past=True)["invitations"]
    past = next(i for i in over if i["next_occurrence"] is None)
    fails(rt, sid, "respond_to_event", "EVENT_ENDED", event_id=past["id"], response="accepted")


def test_inviting_attendees(rt, sid):
    people = rt.state(sid).people.all()
    event = new_event(rt, sid, attendees=[people[1]["email"]])
    error = fails(rt, sid, "invite_attendees", "ATTENDEE_ALREADY_INVITED", event_id=event["id"],
                  emails=[people[2]["email"], people[1]["email"].upper()])
    assert error["code"] == "CONFLICT" and error["details"]["emails"] == [people[1]["email"]]
    fails(rt, sid, "invite_attendees", "ATTENDEE_ALREADY_INVITED", event_id=event["id"],
          emails=[me(rt, sid)["email"]])  # the organizer attends already
    invited = ok(rt, sid, "invite_attendees", event_id=event["id"], emails=[people[2]["email"], "guest@partner.org"])
    assert [(a["email"], a["response"]) for a in invited["attendees"][-2:]] == [
        (people[2]["email"], "needsAction"), ("guest@partner.org", "needsAction")]
    crowd = new_event(rt, sid, start=at(4, 6), end=at(4, 7), attendees=[f"guest{n}@partner.org" for n in range(49)])
    assert len(crowd["attendees"]) == 50
    error = fails(rt, sid, "invite_attendees", "TOO_MANY_ATTENDEES", event_id=crowd["id"], emails=["one@more.org"])
    assert error["code"] == "RESOURCE_EXHAUSTED"
    past = rt.state(sid).events.first(lambda e: e["end"] < NOW, calendar_id=work(rt, sid))
    fails(rt, sid, "invite_attendees", "EVENT_ENDED", event_id=past["id"], emails=["late@partner.org"])


def test_free_busy_counts_what_blocks_time(rt, sid):
    you = me(rt, sid)["email"]
    window = {"time_min": at(5, 0), "time_max": at(6, 0)}  # a Saturday: nothing seeded at work
    assert ok(rt, sid, "get_free_busy", emails=[you], **window)["people"][0]["busy"] == []
    colleague = rt.state(sid).people.all()[1]["email"]
    ok(rt, sid, "create_event", calendar_id=work(rt, sid), title="Sat", start=at(5, 10), end=at(5, 11),
       attendees=[colleague])
    ok(rt, sid, "create_event", calendar_id=work(rt, sid), title="Maybe", start=at(5, 12), end=at(5, 13),
       show_as="free")
    result = ok(rt, sid, "get_free_busy", emails=[you, colleague], **window)
    assert [p["busy"] for p in result["people"]] == [[{"start": at(5, 10), "end": at(5, 11)}]] * 2
    assert result["free_for_all"] == [{"start": at(5, 0), "end": at(5, 10)}, {"start": at(5, 11), "end": at(6, 0)}]
    state = rt.state(sid)
    event = state.events.first(title="Sat")
    row = state.attendees.first(event_id=event["id"], email=colleague)
    state.attendees.update(row["id"], response="declined")  # arrange: the colleague declines
    assert ok(rt, sid, "get_free_busy", emails=[colleague], **window)["people"][0]["busy"] == []
    error = fails(rt, sid, "get_free_busy", "PERSON_NOT_FOUND", emails=["nobody@nowhere.org"], **window)
    assert error["code"] == "NOT_FOUND"
    fails(rt, sid, "get_free_busy", "RANGE_TOO_LARGE", emails=[you], time_min=at(0, 0), time_max=at(100, 0))


def test_free_busy_sees_series_across_calendars(rt, sid):
    result = ok(rt, sid, "get_free_busy", emails=[me(rt, sid)["email"]], time_min=at(3, 18), time_max=at(3, 20))
    assert result["people"][0]["busy"] == [{"start": at(3, 18, 30), "end": at(3, 19, 30)}]  # Thursday gym


# -- calendars, sharing and reminders -------------------------------------------------------------


def test_calendars_and_sharing(rt, sid):
    fails(rt, sid, "create_calendar", "CALENDAR_NAME_TAKEN", name=" work ")
    created = ok(rt, sid, "create_calendar", name="Garden", color="green")
    colleague = rt.state(sid).people.all()[4]
    shared = ok(rt, sid, "share_calendar", calendar_id=created["id"], email=colleague["email"], role="reader")
    assert shared["previous_role"] is None
    upgraded = ok(rt, sid, "share_calendar", calendar_id=created["id"], email=colleague["email"], role="writer")
    assert (upgraded["previous_role"], upgraded["share"]["role"]) == ("reader", "writer")
    listed = next(c for c in ok(rt, sid, "list_calendars")["calendars"] if c["id"] == created["id"])
    assert listed["shared_with"] == [{"email": colleague["email"], "role": "writer"}]
    fails(rt, sid, "share_calendar", "CANNOT_SHARE_WITH_SELF", calendar_id=created["id"],
          email=me(rt, sid)["email"], role="reader")
    fails(rt, sid, "share_calendar", "PERSON_NOT_FOUND", calendar_id=created["id"], email="x@nowhere.org",
          role="reader")
    team = calendar_by(rt, sid, "writer")["id"]
    fails(rt, sid, "share_calendar", "NOT_CALENDAR_OWNER", calendar_id=team, email=colleague["email"], role="reader")
    for n in range(17):
        ok(rt, sid, "create_calendar", name=f"Project {n}")
    error = fails(rt, sid, "create_calendar", "CALENDAR_LIMIT_REACHED", name="One too many")
    assert error["code"] == "RESOURCE_EXHAUSTED"


def test_reminders(rt, sid):
    event = new_event(rt, sid)
    reminder = ok(rt, sid, "set_reminder", event_id=event["id"], minutes_before=15)
    assert reminder["next_fire_at"] == at(1, 5, 45)
    error = fails(rt, sid, "set_reminder", "REMINDER_ALREADY_SET", event_id=event["id"], minutes_before=15)
    assert error["details"]["reminder_id"] == reminder["id"]
    for minutes in (30, 60, 120, 1440):
        ok(rt, sid, "set_reminder", event_id=event["id"], minutes_before=minutes, method="email")
    fails(rt, sid, "set_reminder", "REMINDER_LIMIT_REACHED", event_id=event["id"], minutes_before=5)
    listed = ok(rt, sid, "list_reminders", event_id=event["id"])["reminders"]
    # Soonest to fire first; a day ahead of tomorrow 06:00 has passed already: it will not fire.
    assert [(r["minutes_before"], r["next_fire_at"]) for r in listed] == [
        (120, at(1, 4)), (60, at(1, 5)), (30, at(1, 5, 30)), (15, at(1, 5, 45)), (1440, None)]
    past = rt.state(sid).events.first(lambda e: e["end"] < NOW, calendar_id=work(rt, sid))
    fails(rt, sid, "set_reminder", "EVENT_ENDED", event_id=past["id"], minutes_before=5)
    standup = rt.state(sid).events.first(title="Daily standup")  # a series: fires before the next occurrence
    assert ok(rt, sid, "set_reminder", event_id=standup["id"], minutes_before=10)["next_fire_at"] == at(0, 9, 20)


# -- a whole flow ---------------------------------------------------------------------------------


def test_ids_flow_from_directory_to_free_slot_to_series(rt, sid):
    colleague = rt.state(sid).people.all()[1]
    person = ok(rt, sid, "find_people", query=colleague["name"].lower())["people"][0]
    you = next(p for p in ok(rt, sid, "find_people", query=me(rt, sid)["email"])["people"] if p["is_me"])
    busy = ok(rt, sid, "get_free_busy", emails=[you["email"], person["email"]], time_min=at(1, 10),
              time_max=at(1, 17))
    slot = next(f for f in busy["free_for_all"] if f["end"] >= f["start"][:11] + "11:00:00Z")
    start = dt.datetime.fromisoformat(slot["start"])
    end = (start + dt.timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    cal = next(c for c in ok(rt, sid, "list_calendars", access_role="owner")["calendars"] if c["primary"])
    event = ok(rt, sid, "create_event", calendar_id=cal["id"], title="Sync", start=slot["start"], end=end,
               attendees=[person["email"]], allow_conflict=True)
    ok(rt, sid, "set_recurrence", event_id=event["id"], frequency="weekly", count=3, allow_conflict=True)
    ok(rt, sid, "set_reminder", event_id=event["id"], minutes_before=5)
    after = ok(rt, sid, "get_free_busy", emails=[person["email"]], time_min=at(1, 10), time_max=at(1, 17))
    assert {"start": slot["start"], "end": end} in [
        {"start": b["start"], "end": min(b["end"], end)} for b in after["people"][0]["busy"]]
    detail = ok(rt, sid, "get_event", event_id=event["id"])
    assert detail["recurrence"]["count"] == 3 and detail["reminders"][0]["minutes_before"] == 5
    assert [a["email"] for a in detail["attendees"]] == [you["email"], person["email"]]
    found = ok(rt, sid, "search_events", attendee_email=person["email"], query="sync", limit=100)["events"]
    assert event["id"] in [e["id"] for e in found]
