"""Calendar: one signed-in user's calendars, events, recurrence, invitations, free/busy and
reminders, inside a company directory of colleagues.

The user (the var ``me``) owns a primary "Work" calendar and a "Personal" one; colleagues own
their own primary calendars, and some are shared with the user at a permission level:
``free_busy`` (only busy times), ``reader`` (event details) or ``writer`` (may add events).
The organizer of an event is the only one who may change it; everyone invited answers with
accepted, declined or tentative. All times are UTC on the wire (``2026-03-02T09:00:00Z``); any
ISO-8601 offset is accepted on input. Times are checked against the session clock.

Recurrence rules (daily, weekly on chosen weekdays, monthly on the same day of the month) end
after a count or on an until date, so a series is always finite; listing a time range expands
the occurrences that fall in it. Edits apply to the whole series.
"""

from __future__ import annotations

import bisect
import datetime as dt
import random
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    ISO_DATE,
    Conflict,
    InvalidArgument,
    PermissionDenied,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    paginate,
    parse_date,
    part_of,
    ref,
    require,
    require_found,
)

# -- vocabulary -----------------------------------------------------------------------------------

Role = Literal["free_busy", "reader", "writer"]
AccessRole = Literal["owner", "writer", "reader", "free_busy"]
Response = Literal["accepted", "declined", "tentative"]
ResponseStatus = Literal["needsAction", "accepted", "declined", "tentative"]
ShowAs = Literal["busy", "free"]
Frequency = Literal["daily", "weekly", "monthly", "none"]
Weekday = Literal["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
Color = Literal["blue", "green", "red", "purple", "orange", "teal", "gray"]
ReminderMethod = Literal["popup", "email"]
WEEKDAYS: tuple[str, ...] = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")

MAX_OWNED_CALENDARS = 20
MAX_ATTENDEES = 50
MAX_REMINDERS_PER_EVENT = 5
MAX_EVENT_DAYS = 14  # longer blocks are not meetings; book them as a recurring series
MAX_RANGE_DAYS = 92  # the widest window list_events and get_free_busy expand at once
MAX_SERIES_DAYS = 730  # an until date at most two years after the first occurrence
SEED_WINDOW_DAYS = (-21, 35)  # seeded activity: three weeks back, five weeks ahead

ISO_DATETIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$"
EMAIL = r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$"

JOB_TITLES = (
    ("Product Manager", "Product"), ("Software Engineer", "Engineering"), ("Engineering Manager", "Engineering"),
    ("Product Designer", "Design"), ("Data Analyst", "Analytics"), ("Recruiter", "People"),
    ("Marketing Lead", "Marketing"), ("Account Executive", "Sales"), ("QA Engineer", "Engineering"),
)
TIMEZONES = ("America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles", "Europe/London")
PROJECTS = ("Atlas", "Beacon", "Cobalt", "Nimbus", "Orion", "Quartz", "Juniper")
MEETINGS = (
    "Design review", "Sprint planning", "Roadmap sync", "Budget check-in", "Customer call", "Hiring debrief",
    "Architecture deep dive", "Vendor demo", "Retro", "Launch readiness", "Analytics office hours",
    "Interview: Senior Engineer", "Interview: Product Designer", "Coffee chat", "Quarterly business review",
)
PERSONAL = ("Dentist appointment", "Car service", "Call with landlord", "Parent-teacher conference", "Haircut",
            "Pick up dry cleaning")
ROOMS = ("Room Aurora (4F)", "Room Borealis (2F)", "Room Cascade (3F)", "Video call", "Video call", "Client office")
COLORS: tuple[str, ...] = ("blue", "green", "red", "purple", "orange", "teal", "gray")
# What users type when they search, book and rename (synthesis draws from these).
PEOPLE_SEARCHES = ("engineer", "design", "product", "marketing", "sales", "analyst", "recruiter", "manager",
                   "people", "analytics")
EVENT_SEARCHES = ("review", "planning", "sync", "standup", "interview", "demo", "retro", "budget", "launch",
                  "customer", "coffee", "1:1")
CALENDAR_NAMES = ("Side Project", "Kids", "Fitness", "Travel", "Book Club", "Volunteering", "Garden Club",
                  "Home Renovation", "Study Group", "Band Practice", "Running Club", "Family")
CALENDAR_DESCRIPTIONS = ("Evenings on the garden app.", "School pickups, games and activities.",
                         "Runs, gym sessions and classes.", "Trips and bookings.", "Weekend volunteering shifts.",
                         "Contractor visits and deliveries.", "Exam prep sessions.", "Rehearsals and gigs.")
EVENT_TITLES = ("Planning prep", "1:1 prep", "Focus time", "Candidate sync", "Budget review", "Lunch and learn",
                "Design critique", "Release go/no-go", "Partner intro call", "Onboarding walkthrough",
                "Offsite planning", "Team lunch", "Demo dry run")
# How long each kind of new event runs (minutes), when in the day it starts, and where it is held.
EVENT_PLANS = {
    "Planning prep": ((30, 45, 60), "work", "room"), "1:1 prep": ((15, 30), "work", "desk"),
    "Focus time": ((60, 90, 120, 180), "work", "desk"), "Candidate sync": ((30, 45), "work", "call"),
    "Budget review": ((60, 90), "work", "room"), "Lunch and learn": ((60,), "lunch", "room"),
    "Design critique": ((45, 60, 90), "work", "room"), "Release go/no-go": ((30,), "work", "call"),
    "Partner intro call": ((30, 45), "work", "call"), "Onboarding walkthrough": ((60, 90), "work", "room"),
    "Offsite planning": ((60, 120), "work", "room"), "Team lunch": ((60, 90), "lunch", "lunch"),
    "Demo dry run": ((30, 60), "work", "room"),
}
START_HOURS = {"work": (9, 10, 11, 13, 14, 15, 16), "lunch": (12,)}
PLACES = {"room": ROOMS[:3] + ("Client office",), "call": ("Video call",), "desk": ("My desk", "Video call"),
          "lunch": ("Noodle House", "Cafeteria", "Taco Loco")}
AGENDAS = ("Walk through the open questions and agree on owners.", "Review the draft and collect feedback.",
           "Quick status round, then blockers.", "Decide on the launch date.", "Prep the slides for Thursday.",
           "Intro, goals for the quarter, next steps.", "Bring your laptop; we'll pair on the fix.")
RSVP_COMMENTS = ("See you there.", "Running 5 minutes late.", "Can we move it by 30 minutes?",
                 "I'll join from my phone.", "I'll send notes beforehand.", "Might have to drop off early.",
                 "Sorry, I'm out that day.", "Happy to present the update.")
GUEST_DOMAINS = ("partner.example", "clientco.example", "agency.example", "vendor.example")

# Reusable parameter types, so every tool describes ids, times and paging the same way.
CalendarId = Annotated[str, ref("calendar", "Id of the calendar (cal_...), from list_calendars.")]
EventId = Annotated[str, ref("event", "Id of the event (evt_...), from list_events, search_events or create_event.")]
Start = Annotated[str, Field(pattern=ISO_DATETIME, description="When it starts: ISO-8601 date-time with a "
                                                                 "timezone, e.g. 2026-03-04T15:00:00Z or "
                                                                 "2026-03-04T10:00:00-05:00.")]
End = Annotated[str, Field(pattern=ISO_DATETIME, description="When it ends: ISO-8601 date-time with a timezone, "
                                                               "after the start.")]
RangeStart = Annotated[str, Field(pattern=ISO_DATETIME, description="Start of the time range (inclusive), ISO-8601 "
                                                                      "date-time with a timezone.")]
RangeEnd = Annotated[str, Field(pattern=ISO_DATETIME, description="End of the time range (exclusive), ISO-8601 "
                                                                    "date-time with a timezone; at most 92 days after "
                                                                    "the start.")]
Email = Annotated[str, Field(pattern=EMAIL, max_length=120, description="An e-mail address.")]
AllowConflict = Annotated[bool, Field(description="Book even if it overlaps a busy event in the same calendar.")]
Limit = Annotated[int, Field(ge=1, le=100, description="Page size: how many results to return (1-100).")]
Offset = Annotated[int, Field(ge=0, description="How many results to skip; pass next_offset from the previous page.")]


# -- state and seed -------------------------------------------------------------------------------


class CalendarState(State):
    """The directory, calendars and events as the signed-in user (var ``me``, a person id) sees them.
    Reminders are the user's own; attendees are one row per invited address of an event."""

    people = Table("person", prefix="per", index=("email",))
    calendars = Table("calendar", prefix="cal", index=("owner_id",))
    shares = Table("share", prefix="shr", index=("calendar_id", "person_id"))
    events = Table("event", prefix="evt", index=("calendar_id",))
    attendees = Table("attendee", prefix="att", index=("event_id", "email"))
    reminders = Table("reminder", prefix="rem", index=("event_id",))


@attrs.frozen(kw_only=True)
class CalendarOptions:
    """Seed size: how many colleagues the directory has; each brings a primary calendar of meetings."""

    colleagues: int = attrs.field(default=12, validator=attrs.validators.gt(0))


def build_calendar(rng: random.Random, options: CalendarOptions) -> CalendarState:
    """The user's Work and Personal calendars, colleagues' calendars (some shared with the user), a
    team calendar, recurring series, invitations awaiting an answer and a few reminders."""
    state = CalendarState(salt=f"{rng.getrandbits(64):016x}")
    emails: set[str] = set()
    me, *colleagues = [_seed_person(state, rng, emails) for _ in range(options.colleagues + 1)]
    state.set_var("me", me["id"])
    manager, lead, peer = colleagues[0], colleagues[1 % len(colleagues)], colleagues[2 % len(colleagues)]
    busy: dict[str, list[tuple[dt.datetime, dt.datetime]]] = {}  # calendar id -> seeded intervals

    work = _insert_calendar(state, me, "Work", "blue", primary=True, description="Meetings and focus time.")
    personal = _insert_calendar(state, me, "Personal", "green", primary=False, description="Appointments and family.")
    primaries = {p["id"]: _insert_calendar(state, p, p["name"], rng.choice(COLORS), primary=True, description=None)
                 for p in colleagues}
    team = _insert_calendar(state, lead, "Product Team", "purple", primary=False,
                            description="Team rituals, launches and out-of-office days.")
    _seed_share(state, team, me, "writer")
    _seed_share(state, primaries[manager["id"]], me, "reader")
    if peer["id"] != manager["id"]:
        _seed_share(state, primaries[peer["id"]], me, "free_busy")
    _seed_share(state, personal, colleagues[-1], "reader")

    team_members = [me, *colleagues[:5]]
    _seed_series(state, rng, busy, team, lead, team_members)
    _seed_series(state, rng, busy, primaries[manager["id"]], manager, [me, manager], one_on_one=True)
    _seed_personal(state, rng, busy, personal, me)
    for k in range(16):  # the user's own meetings: half behind, half ahead
        day = rng.randint(-14, -1) if k % 2 == 0 else rng.randint(1, 21)
        invited = rng.sample(colleagues, k=min(len(colleagues), rng.randint(1, 3))) if k % 3 != 2 else []
        _seed_meeting(state, rng, busy, work, me, day, [(p, None) for p in invited])
    for j, person in enumerate(colleagues):
        for k in range(5):
            ahead = k == 0 or rng.random() < 0.5
            day = rng.randint(1, 14) if ahead else rng.randint(-14, -1)
            others = rng.sample(colleagues, k=min(len(colleagues), rng.randint(0, 3)))
            guests = [(p, None) for p in others if p["id"] != person["id"]]
            if (k == 0 and j < 3) or rng.random() < 0.2:  # invitations for the user, some still unanswered
                guests.append((me, "needsAction" if k == 0 else None))
            _seed_meeting(state, rng, busy, primaries[person["id"]], person, day, guests)
    for _ in range(4):
        guests = [(p, None) for p in team_members if p["id"] != lead["id"]]
        _seed_meeting(state, rng, busy, team, lead, rng.randint(1, 21), guests)
    for event in state.events.where(lambda e: e["start"] > iso_datetime(state.now()), calendar_id=work["id"])[:3]:
        state.reminders.insert({"event_id": event["id"], "minutes_before": 10, "method": "popup",
                                "created_at": event["created_at"]})
    return state


def _seed_person(state: CalendarState, rng: random.Random, emails: set[str]) -> Record:
    name = fake.full_name(rng)
    title, department = rng.choice(JOB_TITLES)
    return state.people.insert({
        "name": name,
        "email": fake.email_for(name, rng, emails),
        "job_title": title,
        "department": department,
        "timezone": rng.choice(TIMEZONES),
        "phone": fake.phone(rng),
    })


def _seed_share(state: CalendarState, calendar: Record, person: Record, role: str) -> None:
    state.shares.insert({"calendar_id": calendar["id"], "person_id": person["id"], "email": person["email"],
                         "role": role, "shared_at": iso_datetime(state.now() - dt.timedelta(days=60))})


def _at(state: CalendarState, day: int, hour: int, minute: int = 0) -> dt.datetime:
    date = state.today() + dt.timedelta(days=day)
    return dt.datetime(date.year, date.month, date.day, hour, minute, tzinfo=dt.UTC)


def _book_seed(state: CalendarState, busy: dict[str, list[tuple[dt.datetime, dt.datetime]]], calendar: Record,
               organizer: Record, title: str, start: dt.datetime, end: dt.datetime,
               guests: list[tuple[Record, str | None]], rng: random.Random, **fields: Any) -> Record | None:
    """Books a seeded event unless it overlaps one already in the calendar (seeded calendars are
    conflict-free); answers past invitations, leaves some future ones open."""
    lo, hi = _at(state, SEED_WINDOW_DAYS[0], 0), _at(state, SEED_WINDOW_DAYS[1], 0)
    taken = busy.setdefault(calendar["id"], [])
    draft = {"start": iso_datetime(start), "end": iso_datetime(end), "recurrence": fields.get("recurrence")}
    slots = _occurrences(draft, lo, hi) if fields.get("show_as", "busy") == "busy" else []
    if any(s < te and ts < e for s, e in slots for ts, te in taken):
        return None
    taken.extend(slots)
    created = min(start, state.now()) - dt.timedelta(days=rng.randint(1, 20))
    answered = []
    for person, response in guests:
        if response is None:
            past = end < state.now()
            response = rng.choice(("accepted", "accepted", "accepted", "declined", "tentative",
                                   *(() if past else ("needsAction", "needsAction"))))
        answered.append((person, response))
    return _insert_event(state, calendar, organizer, title, start, end, answered, when=created,
                         description=fields.get("description"), location=fields.get("location"),
                         show_as=fields.get("show_as", "busy"), recurrence=fields.get("recurrence"))


def _seed_meeting(state: CalendarState, rng: random.Random, busy: dict, calendar: Record, organizer: Record,
                  day: int, guests: list[tuple[Record, str | None]]) -> None:
    date = state.today() + dt.timedelta(days=day)
    if date.weekday() >= 5:
        date -= dt.timedelta(days=date.weekday() - 4)  # meetings happen on weekdays
        day = (date - state.today()).days
    for _ in range(6):  # a few tries for a free slot between 10:00 and 17:30
        half_hours = rng.choice((1, 2, 2, 3))
        slot = rng.randint(20, 35 - half_hours)
        start = _at(state, day, slot // 2, 30 * (slot % 2))
        title = rng.choice(MEETINGS)
        if rng.random() < 0.4:
            title = f"{title}: {rng.choice(PROJECTS)}"
        end = start + dt.timedelta(minutes=30 * half_hours)
        agenda = f"Agenda to follow. Organized by {organizer['name']}."
        booked = _book_seed(state, busy, calendar, organizer, title, start, end, guests, rng,
                            location=rng.choice(ROOMS), description=agenda)
        if booked:
            return


def _seed_series(state: CalendarState, rng: random.Random, busy: dict, calendar: Record, organizer: Record,
                 members: list[Record], one_on_one: bool = False) -> None:
    monday = state.today() - dt.timedelta(days=state.today().weekday() + 14)
    guests = [(p, "accepted") for p in members if p["id"] != organizer["id"]]
    if one_on_one:
        weekday = (state.today() + dt.timedelta(days=1)).weekday() % 5
        start = _at(state, (monday - state.today()).days + weekday, 14)
        until = (state.today() + dt.timedelta(weeks=12)).isoformat()
        rule = _rule("weekly", 1, [WEEKDAYS[weekday]], None, until)
        title = f"1:1 {organizer['name'].split()[0]} / {members[0]['name'].split()[0]}"
        _book_seed(state, busy, calendar, organizer, title, start, start + dt.timedelta(minutes=30), guests, rng,
                   recurrence=rule, location="Video call", description="Weekly check-in: priorities, blockers, growth.")
        return
    start = _at(state, (monday - state.today()).days, 9, 30)
    rule = _rule("weekly", 1, list(WEEKDAYS[:5]), 60, None)
    _book_seed(state, busy, calendar, organizer, "Daily standup", start, start + dt.timedelta(minutes=15), guests, rng,
               recurrence=rule, location="Video call", description="Yesterday, today, blockers. 15 minutes sharp.")
    review = _at(state, (monday - state.today()).days + 3, 16)
    _book_seed(state, busy, calendar, organizer, "Sprint review", review, review + dt.timedelta(hours=1), guests, rng,
               recurrence=_rule("weekly", 2, None, 8, None), location="Room Aurora (4F)",
               description="Demo what shipped this sprint.")


def _seed_personal(state: CalendarState, rng: random.Random, busy: dict, calendar: Record, me: Record) -> None:
    monday = (state.today() - dt.timedelta(days=state.today().weekday() + 14) - state.today()).days
    gym = _at(state, monday, 18, 30)
    _book_seed(state, busy, calendar, me, "Gym", gym, gym + dt.timedelta(hours=1), [], rng,
               recurrence=_rule("weekly", 1, ["MO", "TH"], None, (state.today() + dt.timedelta(weeks=10)).isoformat()),
               location="Riverside Fitness")
    club = _at(state, -(state.today().day - 1) + 4, 20)  # the 5th of this month
    _book_seed(state, busy, calendar, me, "Book club", club, club + dt.timedelta(hours=2), [], rng,
               recurrence=_rule("monthly", 1, None, 6, None), location="Corner Library", show_as="free")
    for day in (rng.randint(-10, -1), rng.randint(2, 20), rng.randint(2, 20)):
        start = _at(state, day, rng.choice((7, 12, 17)), rng.choice((0, 30)))
        _book_seed(state, busy, calendar, me, rng.choice(PERSONAL), start, start + dt.timedelta(minutes=45), [], rng)


# -- time, recurrence and access rules ------------------------------------------------------------


def _parse(value: str, field: str) -> dt.datetime:
    """An ISO-8601 date-time with an offset, as UTC to the second (BAD_DATETIME if not a real time)."""
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{field} must be a date-time like 2026-03-04T15:00:00Z, got {value!r}",
                              reason="BAD_DATETIME", field=field) from None
    return parsed.astimezone(dt.UTC).replace(microsecond=0)


def _range(state: CalendarState, time_min: str, time_max: str) -> tuple[dt.datetime, dt.datetime]:
    lo, hi = _parse(time_min, "time_min"), _parse(time_max, "time_max")
    require(lo < hi, "time_max must be after time_min", reason="INVALID_TIME_RANGE", error=InvalidArgument)
    require(hi - lo <= dt.timedelta(days=MAX_RANGE_DAYS), f"a range spans at most {MAX_RANGE_DAYS} days",
            reason="RANGE_TOO_LARGE", error=InvalidArgument, max_days=MAX_RANGE_DAYS)
    return lo, hi


def _rule(frequency: str, interval: int, weekdays: list[str] | None, count: int | None, until: str | None) -> Record:
    return {"frequency": frequency, "interval": interval,
            "weekdays": sorted(weekdays, key=WEEKDAYS.index) if weekdays else None, "count": count, "until": until}


def _describe(rule: Record) -> str:
    unit = {"daily": "day", "weekly": "week", "monthly": "month"}[rule["frequency"]]
    text = f"every {unit}" if rule["interval"] == 1 else f"every {rule['interval']} {unit}s"
    if rule["weekdays"]:
        text += " on " + ", ".join(rule["weekdays"])
    return text + (f", {rule['count']} times" if rule["count"] else f", until {rule['until']}")


def _check_rule(rule: Record, start: dt.datetime) -> None:
    """The typed reasons a recurrence rule cannot anchor on this first occurrence."""
    require((rule["count"] is None) != (rule["until"] is None), "give exactly one of count or until",
            reason="RECURRENCE_END_REQUIRED", error=InvalidArgument)
    if rule["weekdays"]:
        require(rule["frequency"] == "weekly", "weekdays only apply to a weekly rule",
                reason="WEEKDAYS_REQUIRE_WEEKLY", error=InvalidArgument)
        day = WEEKDAYS[start.weekday()]
        require(day in rule["weekdays"], f"the event starts on a {day}; include {day} in weekdays or move the event",
                reason="WEEKDAYS_EXCLUDE_START", error=InvalidArgument, start_weekday=day)
    if rule["until"]:
        until = parse_date(rule["until"], "until")
        require(until >= start.date(), f"until {until} is before the first occurrence on {start.date()}",
                reason="UNTIL_BEFORE_START", error=InvalidArgument)
        require(until <= start.date() + dt.timedelta(days=MAX_SERIES_DAYS),
                f"a series may run at most {MAX_SERIES_DAYS} days; use an earlier until",
                reason="RECURRENCE_TOO_LONG", error=InvalidArgument)


def _starts(start: dt.datetime, rule: Record) -> Iterator[dt.datetime]:
    """Every occurrence start of a (finite) series, in order."""
    stop = None
    if rule["until"]:
        until = dt.date.fromisoformat(rule["until"]) + dt.timedelta(days=1)
        stop = dt.datetime(until.year, until.month, until.day, tzinfo=dt.UTC)  # the whole until day counts
    emitted = 0
    for when in _candidates(start, rule):
        if stop is not None and when >= stop:
            return
        yield when
        emitted += 1
        if rule["count"] is not None and emitted >= rule["count"]:
            return


def _candidates(start: dt.datetime, rule: Record) -> Iterator[dt.datetime]:
    interval, frequency = rule["interval"], rule["frequency"]
    if frequency == "daily" or (frequency == "weekly" and not rule["weekdays"]):
        step = dt.timedelta(days=interval * (7 if frequency == "weekly" else 1))
        for k in range(100_000):
            yield start + k * step
    elif frequency == "weekly":
        offsets = [WEEKDAYS.index(d) - start.weekday() for d in rule["weekdays"]]
        for week in range(100_000):
            for offset in offsets:
                when = start + dt.timedelta(days=7 * interval * week + offset)
                if when >= start:
                    yield when
    else:  # monthly on the start's day of the month; months without that day are skipped
        for k in range(100_000):
            total = start.year * 12 + start.month - 1 + k * interval
            try:
                yield start.replace(year=total // 12, month=total % 12 + 1)
            except ValueError:
                continue


def _occurrences(event: Record, lo: dt.datetime, hi: dt.datetime) -> list[tuple[dt.datetime, dt.datetime]]:
    """(start, end) of the event's occurrences that overlap [lo, hi)."""
    start, end = dt.datetime.fromisoformat(event["start"]), dt.datetime.fromisoformat(event["end"])
    if event["recurrence"] is None:
        return [(start, end)] if start < hi and end > lo else []
    length = end - start
    found = []
    for when in _starts(start, event["recurrence"]):
        if when >= hi:
            break
        if when + length > lo:
            found.append((when, when + length))
    return found


def _series_end(event: Record) -> dt.datetime:
    end = dt.datetime.fromisoformat(event["end"])
    if event["recurrence"] is None:
        return end
    start = dt.datetime.fromisoformat(event["start"])
    last = start
    for last in _starts(start, event["recurrence"]):  # noqa: B007 - the loop runs to the series' last start
        pass
    return last + (end - start)


def _next_occurrence(event: Record, after: dt.datetime) -> Record | None:
    """The first occurrence that has not ended yet."""
    start, end = dt.datetime.fromisoformat(event["start"]), dt.datetime.fromisoformat(event["end"])
    starts = _starts(start, event["recurrence"]) if event["recurrence"] else iter((start,))
    for when in starts:
        if when + (end - start) > after:
            return {"start": iso_datetime(when), "end": iso_datetime(when + (end - start))}
    return None


def _me(state: CalendarState) -> Record:
    return state.people.get(state.get_var("me"))


def _access(state: CalendarState, calendar: Record) -> str:
    """The user's role on a calendar: owner, writer, reader, free_busy or none."""
    me = state.get_var("me")
    if calendar["owner_id"] == me:
        return "owner"
    share = state.shares.first(calendar_id=calendar["id"], person_id=me)
    return share["role"] if share else "none"


def _readable(state: CalendarState, calendar_id: str) -> Record:
    calendar = state.calendars.get(calendar_id)
    role = _access(state, calendar)
    require(role in ("owner", "writer", "reader"),
            f"calendar {calendar['name']!r} is not shared with you" + (" beyond free/busy; use get_free_busy"
                                                                        if role == "free_busy" else ""),
            reason="CALENDAR_NOT_SHARED", error=PermissionDenied, access=role)
    return calendar


def _writable(state: CalendarState, calendar_id: str) -> Record:
    calendar = _readable(state, calendar_id)
    require(_access(state, calendar) != "reader", f"calendar {calendar['name']!r} is shared with you read-only",
            reason="CALENDAR_READ_ONLY", error=PermissionDenied)
    return calendar


def _my_row(state: CalendarState, event_id: str) -> Record | None:
    return state.attendees.first(event_id=event_id, email=_me(state)["email"])


def _visible(state: CalendarState, event_id: str) -> Record:
    """An event the user may see: on a calendar they can read, or one they are invited to."""
    event = state.events.get(event_id)
    if _my_row(state, event_id) is None:
        _readable(state, event["calendar_id"])
    return event


def _organized(state: CalendarState, event_id: str) -> Record:
    """An event the user may change: they organized it and can still write to its calendar."""
    event = _visible(state, event_id)
    require(event["organizer_id"] == state.get_var("me"),
            f"only the organizer ({event['organizer_email']}) can change this event",
            reason="NOT_ORGANIZER", error=PermissionDenied, organizer=event["organizer_email"])
    _writable(state, event["calendar_id"])
    return event


def _check_times(state: CalendarState, start: dt.datetime, end: dt.datetime, *, new_start: bool) -> None:
    require(end > start, "end must be after start", reason="END_BEFORE_START", error=InvalidArgument)
    require(end - start <= dt.timedelta(days=MAX_EVENT_DAYS), f"an event lasts at most {MAX_EVENT_DAYS} days",
            reason="EVENT_TOO_LONG", error=InvalidArgument)
    if new_start:
        require(start >= state.now(), f"{iso_datetime(start)} is before the current time {iso_datetime(state.now())}",
                reason="EVENT_IN_PAST", error=InvalidArgument, now=iso_datetime(state.now()))


def _check_conflicts(state: CalendarState, event: Record, calendar_id: str, allow: bool) -> None:
    """EVENT_CONFLICT when any occurrence of a busy ``event`` overlaps a busy event of the calendar."""
    if allow or event["show_as"] != "busy":
        return
    start = dt.datetime.fromisoformat(event["start"])
    slots = sorted(_occurrences(event, start, _series_end(event) + dt.timedelta(seconds=1)))
    if not slots:
        return
    starts = [s for s, _ in slots]
    reach, latest = [], slots[0][1]  # the latest end among slots[:i+1], for a bisect overlap test
    for _, end in slots:
        latest = max(latest, end)
        reach.append(latest)
    lo, hi = slots[0][0], max(e for _, e in slots)
    clashes = []
    others = state.events.where(lambda e: e["id"] != event.get("id") and e["show_as"] == "busy",
                                calendar_id=calendar_id)
    for other in others:
        for os, oe in _occurrences(other, lo, hi):
            i = bisect.bisect_left(starts, oe)
            if i and reach[i - 1] > os:
                clashes.append({"event_id": other["id"], "title": other["title"], "start": iso_datetime(os),
                                "end": iso_datetime(oe)})
                break
    if clashes:
        raise Conflict(f"overlaps {len(clashes)} busy event(s), first {clashes[0]['title']!r} at "
                       f"{clashes[0]['start']}; pick another time or pass allow_conflict=true",
                       reason="EVENT_CONFLICT", conflicts=clashes[:5])


def _check_room(existing: int, adding: int) -> None:
    require(existing + adding <= MAX_ATTENDEES, f"an event has at most {MAX_ATTENDEES} attendees ({existing} now)",
            reason="TOO_MANY_ATTENDEES", error=ResourceExhausted, limit=MAX_ATTENDEES)


def _add_attendee(state: CalendarState, event_id: str, email: str, response: str, *, organizer: bool,
                  when: dt.datetime) -> None:
    person = state.people.first(email=email)
    state.attendees.insert({
        "event_id": event_id, "email": email, "person_id": person["id"] if person else None,
        "name": person["name"] if person else None, "response": response, "organizer": organizer,
        "comment": None, "responded_at": iso_datetime(when) if response != "needsAction" else None,
    })


def _insert_event(state: CalendarState, calendar: Record, organizer: Record, title: str, start: dt.datetime,
                  end: dt.datetime, guests: list[tuple[Record | str, str]], *, when: dt.datetime,
                  description: str | None, location: str | None, show_as: str, recurrence: Record | None) -> Record:
    """The one shape of an event, for seed data and tools alike: the organizer attends (accepted)."""
    event = state.events.insert({
        "calendar_id": calendar["id"], "organizer_id": organizer["id"], "organizer_email": organizer["email"],
        "title": title, "description": description, "location": location, "start": iso_datetime(start),
        "end": iso_datetime(end), "show_as": show_as, "recurrence": recurrence, "created_at": iso_datetime(when),
        "updated_at": iso_datetime(when),
    })
    _add_attendee(state, event["id"], organizer["email"], "accepted", organizer=True, when=when)
    for guest, response in guests:
        email = guest if isinstance(guest, str) else guest["email"]
        _add_attendee(state, event["id"], email, response, organizer=False, when=when)
    return event


def _view(state: CalendarState, event: Record) -> Record:
    """An event as tools return it: attendees, the user's answer and reminders, next occurrence."""
    rows = state.attendees.where(event_id=event["id"])
    me = _me(state)["email"]
    mine = next((a for a in rows if a["email"] == me), None)
    rule = event["recurrence"]
    return {
        **event,
        "recurrence": None if rule is None else {**rule, "summary": _describe(rule)},
        "attendees": [{k: a[k] for k in ("email", "name", "response", "organizer", "comment")} for a in rows],
        "my_response": None if mine is None else mine["response"],
        "reminders": [{k: r[k] for k in ("id", "minutes_before", "method")}
                      for r in state.reminders.where(event_id=event["id"])],
        "next_occurrence": _next_occurrence(event, state.now()),
    }


def _summary(state: CalendarState, event: Record) -> Record:
    keep = ("id", "calendar_id", "title", "start", "end", "location", "organizer_email", "show_as")
    return {**{k: event[k] for k in keep}, "recurring": event["recurrence"] is not None,
            "next_occurrence": _next_occurrence(event, state.now())}


# -- examples: arguments valid on a fresh seed of any size ------------------------------------------


def _primary(s: CalendarState) -> Record:
    return s.calendars.first(owner_id=s.get_var("me"), primary=True)


def _mine_ahead(s: CalendarState, **match: Any) -> Record:
    """A future single event the user organized on their Work calendar."""
    now = iso_datetime(s.now())
    return s.events.first(lambda e: e["start"] > now and e["recurrence"] is None, calendar_id=_primary(s)["id"],
                          **match)


def _event_plan(rng: random.Random, s: CalendarState, args: Record | None = None) -> Record:
    """A new event as a person books it, drawn as a whole: a title, a weekday slot in working hours
    of a length fit for it (15 min to 3 h), and a place that suits it. Moving an existing event
    keeps its length. Every value source of a call draws the same plan (same-seeded rngs)."""
    args = args or {}
    title = args.get("title") if args.get("title") in EVENT_PLANS else rng.choice(EVENT_TITLES)
    minutes, hours, place = EVENT_PLANS[title]
    length = dt.timedelta(minutes=rng.choice(minutes))
    event = s.events.find(args["event_id"]) if isinstance(args.get("event_id"), str) else None
    if event is not None:  # a move keeps the event's length
        length = min(_parse(event["end"], "end") - _parse(event["start"], "start"), dt.timedelta(hours=12))
    day = s.today() + dt.timedelta(days=rng.randint(1, 10))
    while day.weekday() >= 5:
        day += dt.timedelta(days=1)
    start = dt.datetime.combine(day, dt.time(rng.choice(START_HOURS[hours]), rng.choice((0, 0, 30))), tzinfo=dt.UTC)
    return {"title": title, "start": iso_datetime(start), "end": iso_datetime(start + length),
            "location": rng.choice(PLACES[place]), "description": rng.choice(AGENDAS)}


def _tomorrow(s: CalendarState, hour: int, minute: int = 0) -> str:
    return iso_datetime(_at(s, 1, hour, minute))


def _invitation(s: CalendarState) -> Record:
    me, now = _me(s)["email"], iso_datetime(s.now())
    row = s.attendees.first(lambda a: s.events.get(a["event_id"])["start"] > now, email=me, response="needsAction")
    return {"event_id": row["event_id"], "response": "accepted", "comment": "See you there."}


def _invite_example(s: CalendarState) -> Record:
    event = _mine_ahead(s)
    invited = {a["email"] for a in s.attendees.where(event_id=event["id"])}
    guest = s.people.first(lambda p: p["email"] not in invited)
    return {"event_id": event["id"], "emails": [guest["email"] if guest else "guest@partner.example"]}


def _early_event(s: CalendarState, title: str, hour: int) -> str:
    """Prepares an early event on the Work calendar (nothing is seeded there before 10:00; each
    example books its own hour so that all examples can run on one session)."""
    event = create_event(s, calendar_id=_primary(s)["id"], title=title, start=_tomorrow(s, hour),
                         end=_tomorrow(s, hour, 45))
    return event["id"]


def _free_busy_example(s: CalendarState) -> Record:
    emails = [p["email"] for p in s.people.all()[:3]]
    return {"emails": emails, "time_min": iso_datetime(s.now()),
            "time_max": iso_datetime(s.now() + dt.timedelta(days=3))}


def _reminder_example(s: CalendarState) -> Record:
    return {"event_id": _mine_ahead(s)["id"], "minutes_before": 30, "method": "email"}


# -- how users ask: wording that depends on a call's values -----------------------------------------


def _recurrence_asks(a: Record) -> tuple[str, ...]:
    """A repeat ending after a count, one ending on a day, or no repeat at all."""
    if a.get("frequency") == "none":
        return ("stop {event_id} from repeating", "make {event_id} a one-off event again",
                "turn off the repeat on {event_id}")
    if a.get("until"):
        unit = {"daily": "days", "weekly": "weeks", "monthly": "months"}.get(a.get("frequency"), "times")
        return ("set {event_id} to recur {frequency} until {until}",
                f"turn {{event_id}} into a {{frequency}} series, every {{interval}} {unit}, ending {{until}}",
                "schedule {event_id} {frequency} on {weekdays} until {until}",
                "make {event_id} repeat {frequency} through {until}")
    return ("make {event_id} repeat {frequency}, {count} times",
            "repeat {event_id} {frequency} for {count} occurrences",
            "set {event_id} to happen {frequency} on {weekdays}, {count} times in total",
            "turn {event_id} into a {frequency} series that ends after {count} meetings")


def _invitation_asks(a: Record) -> tuple[str, ...]:
    """Unanswered invitations, those answered one way, or all; past ones included or not."""
    past = ", past ones included" if a.get("include_past") else ""
    if a.get("response") == "needsAction":
        found = ("show the invitations I haven't answered yet", "list the invites still waiting on my reply",
                 "show which meeting invitations I still need to respond to")
    elif a.get("response"):
        found = ("list the invitations I've marked as {response}", "show the invites where my answer is {response}",
                 "show the invitations I answered with {response}")
    else:
        found = ("show my meeting invitations", "list the events other people invited me to",
                 "show the invites in my calendar")
    return tuple(t + past for t in found)


# -- server and tools -----------------------------------------------------------------------------

server = Server(
    "calendar",
    domain="productivity",
    description="A work calendar: calendars and sharing, events, recurring series, invitations and responses, "
    "free/busy across colleagues, conflict checks and reminders.",
    state=CalendarState,
    seed=build_calendar,
    options=CalendarOptions,
)


@server.tool(
    answers=("email", "job_title"),
    read_only=True,
    reads=["person"],
    examples=[lambda s: {"query": s.people.all()[1]["name"].split()[1]}, {"query": "engineer"}],
    asks=("find people matching {query}", "look up {query} in the company directory",
          "search the directory for {query}", "show me up to {limit} colleagues matching {query}"),
    values={"query": lambda rng, s: rng.choice(PEOPLE_SEARCHES)},
)
def find_people(
    state: CalendarState,
    query: Annotated[str, Field(min_length=2, max_length=80,
                                description="Part of a name, e-mail address, job title or department.")],
    limit: Limit = 20,
) -> dict:
    """Search the company directory (case-insensitive). Returns matching people with their id,
    name, e-mail, job title, department and timezone, the total and next_offset; the signed-in
    user is marked is_me. An empty list when nobody matches."""
    needle = query.lower()
    me = state.get_var("me")
    fields = ("name", "email", "job_title", "department")
    matches = [{**p, "is_me": p["id"] == me}
               for p in state.people.where(lambda p: any(needle in p[f].lower() for f in fields))]
    return paginate(matches, limit=limit, key="people")


@server.tool(
    answers=("access_role",),
    read_only=True,
    reads=["calendar", "share", "person"],
    examples=[{}, {"access_role": "reader"}],
    asks=("list my calendars", "show every calendar I own or can see", "show which calendars are shared with me",
          "show the calendars I have {access_role} access to"),
)
def list_calendars(
    state: CalendarState,
    access_role: Annotated[AccessRole | None, Field(description="Only calendars where you have this role.")] = None,
) -> dict:
    """The calendars you own and those shared with you, each with your access_role: owner,
    writer (may add events), reader (sees details, read-only) or free_busy (sees only busy times).
    Calendars you own list whom they are shared with."""
    me = state.get_var("me")
    out = []
    for calendar in state.calendars.where(owner_id=me):
        shared = [{"email": s["email"], "role": s["role"]} for s in state.shares.where(calendar_id=calendar["id"])]
        out.append({**calendar, "access_role": "owner", "shared_with": shared})
    for share in state.shares.where(person_id=me):
        calendar = state.calendars.get(share["calendar_id"])
        owner = state.people.get(calendar["owner_id"])
        out.append({**calendar, "access_role": share["role"], "owner_email": owner["email"]})
    if access_role:
        out = [c for c in out if c["access_role"] == access_role]
    return {"calendars": out, "total": len(out)}


@server.tool(
    produces=["calendar"],
    errors=["CALENDAR_NAME_TAKEN", "CALENDAR_LIMIT_REACHED"],
    examples=[{"name": "Side Project", "color": "orange", "description": "Evenings on the garden app."}],
    asks=("create a calendar called {name}", "make a new calendar named {name}",
          "set up a {color} calendar called {name}",
          "add a {name} calendar in {color}, described as \"{description}\""),
    values={"name": lambda rng, s: rng.choice(CALENDAR_NAMES), "color": lambda rng, s: rng.choice(COLORS),
            "description": lambda rng, s: rng.choice(CALENDAR_DESCRIPTIONS)},
)
def create_calendar(
    state: CalendarState,
    name: Annotated[str, Field(min_length=1, max_length=60, description="Name of the new calendar.")],
    color: Annotated[Color, Field(description="Display color.")] = "blue",
    description: Annotated[str | None, Field(max_length=300, description="What the calendar is for.")] = None,
) -> dict:
    """Create a secondary calendar owned by you. Returns it. Fails with CALENDAR_NAME_TAKEN when you
    already own a calendar of that name (case-insensitive) or CALENDAR_LIMIT_REACHED at 20 calendars."""
    me = _me(state)
    owned = state.calendars.where(owner_id=me["id"])
    require(all(c["name"].lower() != name.strip().lower() for c in owned), f"you already have a calendar {name!r}",
            reason="CALENDAR_NAME_TAKEN", error=Conflict)
    require(len(owned) < MAX_OWNED_CALENDARS, f"you own {len(owned)} calendars, the most allowed",
            reason="CALENDAR_LIMIT_REACHED", error=ResourceExhausted, limit=MAX_OWNED_CALENDARS)
    calendar = _insert_calendar(state, me, name.strip(), color, primary=False, description=description)
    return {**calendar, "access_role": "owner", "shared_with": []}


def _insert_calendar(state: CalendarState, owner: Record, name: str, color: str, *, primary: bool,
                     description: str | None) -> Record:
    return state.calendars.insert({"owner_id": owner["id"], "name": name, "color": color, "primary": primary,
                                   "description": description, "timezone": owner["timezone"]})


@server.tool(
    idempotent=True,  # sharing again at the same role changes nothing
    reads=["calendar", "person", "share"],
    produces=["share"],
    mutates=["share"],
    errors=["CALENDAR_NOT_FOUND", "NOT_CALENDAR_OWNER", "PERSON_NOT_FOUND", "CANNOT_SHARE_WITH_SELF"],
    examples=[lambda s: {"calendar_id": s.calendars.first(owner_id=s.get_var("me"), primary=False)["id"],
                         "email": s.people.all()[1]["email"], "role": "reader"}],
    asks=("give {email} {role} access to {calendar_id}", "share {calendar_id} with {email} at the {role} level",
          "let {email} see {calendar_id} with {role} permission",
          "set the access of {email} on {calendar_id} to {role}"),
    values={"role": lambda rng, s: rng.choice(("free_busy", "reader", "writer"))},
)
def share_calendar(
    state: CalendarState,
    calendar_id: CalendarId,
    email: Annotated[str, Field(pattern=EMAIL, max_length=120,
                                description="E-mail of the colleague to share with (see find_people).")],
    role: Annotated[Role, Field(description="free_busy: only busy times; reader: event details, read-only; "
                                            "writer: may also add events.")],
) -> dict:
    """Share a calendar you own with a colleague, or change their permission level. Returns the
    share and the previous role (null if new). Fails with NOT_CALENDAR_OWNER, PERSON_NOT_FOUND (not
    in the directory) or CANNOT_SHARE_WITH_SELF."""
    calendar = state.calendars.get(calendar_id)
    require(calendar["owner_id"] == state.get_var("me"), f"only the owner can share {calendar['name']!r}",
            reason="NOT_CALENDAR_OWNER", error=PermissionDenied)
    person = _person(state, email)
    require(person["id"] != state.get_var("me"), "you own this calendar already", reason="CANNOT_SHARE_WITH_SELF",
            error=InvalidArgument)
    existing = state.shares.first(calendar_id=calendar_id, person_id=person["id"])
    if existing is None:
        share = state.shares.insert({"calendar_id": calendar_id, "person_id": person["id"], "email": person["email"],
                                     "role": role, "shared_at": iso_datetime(state.now())})
        return {"share": share, "previous_role": None}
    share = state.shares.update(existing["id"], role=role)  # an unchanged role writes nothing
    return {"share": share, "previous_role": existing["role"]}


def _person(state: CalendarState, email: str) -> Record:
    return require_found(state.people.first(email=email.lower()),
                         f"nobody with e-mail {email} in the directory; look them up with find_people",
                         reason="PERSON_NOT_FOUND", email=email)


@server.tool(
    answers=("start", "end", "location"),
    read_only=True,
    reads=["calendar", "event", "attendee"],
    errors=["CALENDAR_NOT_FOUND", "CALENDAR_NOT_SHARED", "INVALID_TIME_RANGE", "RANGE_TOO_LARGE", "BAD_DATETIME"],
    examples=[
        lambda s: {"calendar_id": _primary(s)["id"], "time_min": iso_datetime(_at(s, 0, 0)),
                   "time_max": iso_datetime(_at(s, 7, 0))},
        lambda s: {"calendar_id": s.calendars.first(name="Product Team")["id"], "time_min": iso_datetime(_at(s, 0, 0)),
                   "time_max": iso_datetime(_at(s, 14, 0)), "limit": 10},
    ],
    asks=("show what's on {calendar_id} between {time_min} and {time_max}",
          "list the events on {calendar_id} from {time_min} to {time_max}",
          "pull up {calendar_id} from {time_min} until {time_max}",
          "show the first {limit} events on {calendar_id} between {time_min} and {time_max}"),
)
def list_events(
    state: CalendarState,
    calendar_id: CalendarId,
    time_min: RangeStart,
    time_max: RangeEnd,
    limit: Limit = 50,
    offset: Offset = 0,
) -> dict:
    """The occurrences on a calendar that overlap a time range, in start order: recurring series
    are expanded (each occurrence carries its series' event_id). Returns one page, the total and
    next_offset. Fails with CALENDAR_NOT_SHARED (no read access: use get_free_busy for busy times),
    INVALID_TIME_RANGE, RANGE_TOO_LARGE (over 92 days) or BAD_DATETIME (not a real date-time)."""
    _readable(state, calendar_id)
    lo, hi = _range(state, time_min, time_max)
    occurrences = []
    for event in state.events.where(calendar_id=calendar_id):
        for start, end in _occurrences(event, lo, hi):
            occurrences.append({
                "event_id": event["id"], "title": event["title"], "start": iso_datetime(start),
                "end": iso_datetime(end),
                "location": event["location"], "organizer_email": event["organizer_email"],
                "show_as": event["show_as"], "recurring": event["recurrence"] is not None,
            })
    occurrences.sort(key=lambda o: (o["start"], o["event_id"]))
    return {"calendar_id": calendar_id, **paginate(occurrences, limit=limit, offset=offset, key="occurrences")}


@server.tool(
    answers=("start", "end", "location"),
    read_only=True,
    reads=["calendar", "event", "attendee"],
    errors=["CALENDAR_NOT_FOUND", "CALENDAR_NOT_SHARED", "INVALID_TIME_RANGE", "BAD_DATETIME"],
    examples=[{"query": "review"},
              lambda s: {"attendee_email": s.people.all()[1]["email"], "time_min": iso_datetime(s.now()), "limit": 5}],
    asks=("find events about {query}", "search my calendar for {query}",
          "look for meetings matching {query} on {calendar_id}",
          "find the meetings with {attendee_email} after {time_min}",
          "show the next {limit} events {attendee_email} is invited to from {time_min}"),
    values={"query": lambda rng, s: rng.choice(EVENT_SEARCHES)},
)
def search_events(
    state: CalendarState,
    query: Annotated[str | None, Field(min_length=2, max_length=80,
                                       description="Text in the title, description or location.")] = None,
    calendar_id: Annotated[str | None, ref("calendar", "Only this calendar (cal_...); all readable ones "
                                                       "and your invitations when omitted.")] = None,
    attendee_email: Annotated[str | None, Field(pattern=EMAIL, max_length=120,
                                                description="Only events this address is invited to.")] = None,
    time_min: Annotated[str | None, Field(pattern=ISO_DATETIME, description="Only events with an occurrence "
                                                                              "ending after this date-time.")] = None,
    time_max: Annotated[str | None, Field(pattern=ISO_DATETIME,
                                          description="Only events with an occurrence starting before this "
                                                      "date-time.")] = None,
    limit: Limit = 20,
    offset: Offset = 0,
) -> dict:
    """Find events (whole series, not occurrences) on calendars you can read and events you are
    invited to, by text, attendee and time range, ordered by start. Returns one page of summaries
    with each event's next occurrence, the total and next_offset. Fails with CALENDAR_NOT_SHARED,
    INVALID_TIME_RANGE or BAD_DATETIME (not a real date-time)."""
    lo = _parse(time_min, "time_min") if time_min else dt.datetime.min.replace(tzinfo=dt.UTC)
    hi = _parse(time_max, "time_max") if time_max else dt.datetime.max.replace(tzinfo=dt.UTC)
    require(lo < hi, "time_max must be after time_min", reason="INVALID_TIME_RANGE", error=InvalidArgument)
    if calendar_id:
        candidates = state.events.where(calendar_id=_readable(state, calendar_id)["id"])
    else:
        me = state.get_var("me")
        readable = [c["id"] for c in state.calendars.where(owner_id=me)]
        readable += [s["calendar_id"] for s in state.shares.where(lambda s: s["role"] != "free_busy", person_id=me)]
        seen = {e["id"]: e for cid in readable for e in state.events.where(calendar_id=cid)}
        for row in state.attendees.where(email=_me(state)["email"]):
            seen.setdefault(row["event_id"], state.events.get(row["event_id"]))
        candidates = list(seen.values())
    if attendee_email:
        invited = {a["event_id"] for a in state.attendees.where(email=attendee_email.lower())}
        candidates = [e for e in candidates if e["id"] in invited]
    needle = (query or "").lower()
    matches = [e for e in candidates
               if any(needle in (e[f] or "").lower() for f in ("title", "description", "location"))
               and (time_min is None and time_max is None or _occurrences(e, lo, hi))]
    matches.sort(key=lambda e: (e["start"], e["id"]))
    page = paginate(matches, limit=limit, offset=offset, key="events")
    return {**page, "events": [_summary(state, e) for e in page["events"]]}


@server.tool(
    answers=("start", "end", "location"),
    read_only=True,
    reads=["event", "attendee", "reminder", "calendar"],
    errors=["EVENT_NOT_FOUND", "CALENDAR_NOT_SHARED"],
    examples=[lambda s: {"event_id": s.events.first(calendar_id=_primary(s)["id"])["id"]},
              lambda s: {"event_id": s.events.first(title="Daily standup")["id"]}],
    asks=("show me the details of {event_id}", "open {event_id}", "tell me who's attending {event_id}",
          "pull up everything about {event_id}"),
)
def get_event(state: CalendarState, event_id: EventId) -> dict:
    """One event in full: times, location, description, organizer, recurrence rule, attendees and
    their responses, your own response and reminders, and the next occurrence. Fails with
    EVENT_NOT_FOUND or CALENDAR_NOT_SHARED (you neither read its calendar nor are invited)."""
    return _view(state, _visible(state, event_id))


@server.tool(
    reads=["calendar", "event", "person"],
    produces=["event", "attendee"],
    errors=["CALENDAR_NOT_FOUND", "CALENDAR_NOT_SHARED", "CALENDAR_READ_ONLY", "END_BEFORE_START", "EVENT_TOO_LONG",
            "EVENT_IN_PAST", "EVENT_CONFLICT", "BAD_DATETIME"],
    examples=[
        lambda s: {"calendar_id": _primary(s)["id"], "title": "Planning prep", "start": _tomorrow(s, 7),
                   "end": _tomorrow(s, 7, 30)},
        lambda s: {"calendar_id": s.calendars.first(name="Product Team")["id"], "title": "Launch party",
                   "start": iso_datetime(_at(s, 3, 20)), "end": iso_datetime(_at(s, 3, 22)), "location": "Rooftop",
                   "attendees": [p["email"] for p in s.people.all()[1:3]], "show_as": "free"},
    ],
    asks=("schedule \"{title}\" on {calendar_id} from {start} to {end}", "book {title} from {start} until {end}",
          "put {title} on {calendar_id}, {start} to {end}",
          "create an event \"{title}\" from {start} to {end} at {location}",
          "set up {title} on {calendar_id} from {start} to {end} at {location}, invite {attendees} and show me as "
          "{show_as}",
          "add {title} from {start} to {end} at {location}, shown as {show_as}"),
    values={field: part_of(_event_plan, field) for field in ("title", "start", "end", "location", "description")},
)
def create_event(
    state: CalendarState,
    calendar_id: CalendarId,
    title: Annotated[str, Field(min_length=1, max_length=120, description="Title of the event.")],
    start: Start,
    end: End,
    description: Annotated[str | None, Field(max_length=2000, description="Agenda or notes.")] = None,
    location: Annotated[str | None, Field(max_length=120, description="Room, address or 'Video call'.")] = None,
    attendees: Annotated[list[Email] | None, Field(max_length=MAX_ATTENDEES - 1,
                                                   description="E-mail addresses to invite (up to 49): "
                                                               "colleagues or external guests.")] = None,
    show_as: Annotated[ShowAs, Field(description="busy blocks the time (and is checked for conflicts); free "
                                                 "does not.")] = "busy",
    allow_conflict: AllowConflict = False,
) -> dict:
    """Create an event on a calendar you own or may write to; you are its organizer and every
    attendee is invited (needsAction). Returns the event with its attendees. Fails with
    EVENT_IN_PAST (starts before now), END_BEFORE_START, EVENT_TOO_LONG (over 14 days),
    EVENT_CONFLICT (overlaps a busy event on the same calendar; the details list them: pick another
    time or pass allow_conflict=true), CALENDAR_READ_ONLY, CALENDAR_NOT_SHARED or BAD_DATETIME (not
    a real date-time)."""
    calendar = _writable(state, calendar_id)
    begin, finish = _parse(start, "start"), _parse(end, "end")
    _check_times(state, begin, finish, new_start=True)
    me = _me(state)
    guests = list(dict.fromkeys(e.lower() for e in attendees or () if e.lower() != me["email"]))
    draft = {"start": iso_datetime(begin), "end": iso_datetime(finish), "recurrence": None, "show_as": show_as}
    _check_conflicts(state, draft, calendar_id, allow_conflict)
    event = _insert_event(state, calendar, me, title, begin, finish, [(g, "needsAction") for g in guests],
                          when=state.now(), description=description, location=location, show_as=show_as,
                          recurrence=None)
    return _view(state, event)


@server.tool(
    idempotent=True,  # the same change again finds nothing to change
    reads=["event", "calendar"],
    mutates=["event", "attendee"],
    errors=["EVENT_NOT_FOUND", "CALENDAR_NOT_SHARED", "NOT_ORGANIZER", "CALENDAR_READ_ONLY", "NOTHING_TO_UPDATE",
            "END_BEFORE_START", "EVENT_TOO_LONG", "EVENT_IN_PAST", "EVENT_CONFLICT", "WEEKDAYS_EXCLUDE_START",
            "UNTIL_BEFORE_START", "RECURRENCE_TOO_LONG", "BAD_DATETIME"],
    examples=[
        lambda s: {"event_id": _mine_ahead(s)["id"], "location": "Room Cascade (3F)", "title": "Moved: design sync"},
        lambda s: {"event_id": _mine_ahead(s)["id"], "start": _tomorrow(s, 6), "end": _tomorrow(s, 6, 30)},
    ],
    asks=("rename {event_id} to \"{title}\"", "move {event_id} to {location}",
          "change {event_id}: call it \"{title}\" and hold it in {location}",
          "reschedule {event_id} to {start} until {end}", "move {event_id} to start at {start} and end at {end}",
          "update the agenda of {event_id} to \"{description}\""),
    values={field: part_of(_event_plan, field) for field in ("title", "start", "end", "location", "description")},
)
def update_event(
    state: CalendarState,
    event_id: EventId,
    title: Annotated[str | None, Field(min_length=1, max_length=120, description="New title.")] = None,
    start: Annotated[str | None, Field(pattern=ISO_DATETIME, description="New start, ISO-8601 date-time with a "
                                                                          "timezone; moves the whole series.")] = None,
    end: Annotated[str | None, Field(pattern=ISO_DATETIME, description="New end, ISO-8601 date-time with a "
                                                                        "timezone.")] = None,
    description: Annotated[str | None, Field(max_length=2000, description="New agenda or notes.")] = None,
    location: Annotated[str | None, Field(max_length=120, description="New location.")] = None,
    show_as: Annotated[ShowAs | None, Field(description="busy or free.")] = None,
    allow_conflict: AllowConflict = False,
) -> dict:
    """Change an event you organized; only the fields given change, and a new time moves the whole
    series. Moving it resets the other attendees' responses to needsAction. Returns the event.
    Fails with NOT_ORGANIZER (only the organizer edits), CALENDAR_READ_ONLY, CALENDAR_NOT_SHARED,
    NOTHING_TO_UPDATE, END_BEFORE_START, EVENT_TOO_LONG, EVENT_IN_PAST (a new start before now),
    EVENT_CONFLICT (pass allow_conflict=true to keep the overlap), BAD_DATETIME, or
    WEEKDAYS_EXCLUDE_START, UNTIL_BEFORE_START or RECURRENCE_TOO_LONG when the new start no longer
    fits the series' rule."""
    event = _organized(state, event_id)
    changes = {k: v for k, v in (("title", title), ("description", description), ("location", location),
                                 ("show_as", show_as)) if v is not None}
    require(bool(changes) or start is not None or end is not None, "give at least one field to change",
            reason="NOTHING_TO_UPDATE", error=InvalidArgument)
    begin = _parse(start, "start") if start else dt.datetime.fromisoformat(event["start"])
    finish = _parse(end, "end") if end else dt.datetime.fromisoformat(event["end"])
    moved = iso_datetime(begin) != event["start"] or iso_datetime(finish) != event["end"]
    _check_times(state, begin, finish, new_start=iso_datetime(begin) != event["start"])
    if moved and event["recurrence"]:
        _check_rule(event["recurrence"], begin)
    updated = {**event, **changes, "start": iso_datetime(begin), "end": iso_datetime(finish)}
    if moved or updated["show_as"] != event["show_as"]:
        _check_conflicts(state, updated, event["calendar_id"], allow_conflict)
    if updated == event:
        return _view(state, event)
    if moved:
        for row in state.attendees.where(lambda a: not a["organizer"], event_id=event_id):
            state.attendees.update(row["id"], response="needsAction", responded_at=None)
    updated["updated_at"] = iso_datetime(state.now())
    return _view(state, state.events.update(event_id, **updated))


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing to delete (EVENT_NOT_FOUND) and changes nothing
    reads=["event", "calendar"],
    mutates=["event", "attendee", "reminder"],
    errors=["EVENT_NOT_FOUND", "CALENDAR_NOT_SHARED", "NOT_ORGANIZER", "CALENDAR_READ_ONLY"],
    examples=[lambda s: {"event_id": _mine_ahead(s)["id"]}],
    asks=("delete {event_id}", "cancel {event_id} and let everyone know", "remove {event_id} from my calendar",
          "call off {event_id}"),
)
def delete_event(state: CalendarState, event_id: EventId) -> dict:
    """Delete an event you organized, with every occurrence of its series, its invitations and
    reminders; the other attendees are notified. Returns what was deleted and who was notified.
    Fails with NOT_ORGANIZER (decline it with respond_to_event instead), CALENDAR_READ_ONLY or
    CALENDAR_NOT_SHARED."""
    event = _organized(state, event_id)
    notified = []
    for row in state.attendees.where(event_id=event_id):
        if not row["organizer"]:
            notified.append(row["email"])
        state.attendees.delete(row["id"])
    for reminder in state.reminders.where(event_id=event_id):
        state.reminders.delete(reminder["id"])
    state.events.delete(event_id)
    return {"deleted": True, "event_id": event_id, "title": event["title"], "notified": notified}


@server.tool(
    idempotent=True,  # the same rule again changes nothing
    reads=["event", "calendar"],
    mutates=["event"],
    errors=["EVENT_NOT_FOUND", "CALENDAR_NOT_SHARED", "NOT_ORGANIZER", "CALENDAR_READ_ONLY",
            "RECURRENCE_END_REQUIRED", "WEEKDAYS_REQUIRE_WEEKLY", "WEEKDAYS_EXCLUDE_START", "UNTIL_BEFORE_START",
            "RECURRENCE_TOO_LONG", "BAD_DATE", "EVENT_CONFLICT"],
    examples=[
        lambda s: {"event_id": _early_event(s, "Focus block", 5), "frequency": "weekly",
                   "weekdays": ["MO", "TU", "WE", "TH", "FR"], "count": 10},
        lambda s: {"event_id": _early_event(s, "Plan the day", 4), "frequency": "daily", "interval": 2,
                   "until": (s.today() + dt.timedelta(days=14)).isoformat()},
    ],
    asks=_recurrence_asks,
    values={"count": lambda rng, s: rng.choice((4, 5, 6, 8, 10, 12, 20)),
            "interval": lambda rng, s: rng.choice((2, 3, 4)),
            "until": lambda rng, s: (s.today() + dt.timedelta(days=rng.choice((14, 21, 30, 45, 60, 90)))).isoformat()},
)
def set_recurrence(
    state: CalendarState,
    event_id: EventId,
    frequency: Annotated[Frequency, Field(description="daily, weekly, monthly (same day of the month; months "
                                                      "without it are skipped) or none to make it a single event.")],
    interval: Annotated[int, Field(ge=1, le=30, description="Repeat every N days, weeks or months.")] = 1,
    weekdays: Annotated[list[Weekday] | None, Field(min_length=1, max_length=7,
                                                    description="Weekly only: the days it falls on; must include "
                                                                "the event's own weekday.")] = None,
    count: Annotated[int | None, Field(ge=1, le=366, description="End after this many occurrences (give count "
                                                                 "or until).")] = None,
    until: Annotated[str | None, Field(pattern=ISO_DATE, description="Last day an occurrence may start, YYYY-MM-DD "
                                                                     "(give count or until).")] = None,
    allow_conflict: AllowConflict = False,
) -> dict:
    """Make an event you organized repeat (or stop repeating with frequency none), anchored on its
    start. Returns the event with the rule and its next 5 occurrences. Fails with
    RECURRENCE_END_REQUIRED (give exactly one of count or until), UNTIL_BEFORE_START,
    RECURRENCE_TOO_LONG (over two years), WEEKDAYS_REQUIRE_WEEKLY, WEEKDAYS_EXCLUDE_START,
    EVENT_CONFLICT (an occurrence overlaps a busy event on the same calendar; pass
    allow_conflict=true to book anyway), NOT_ORGANIZER, CALENDAR_READ_ONLY, CALENDAR_NOT_SHARED or
    BAD_DATE (until is not a real date)."""
    event = _organized(state, event_id)
    rule = None
    if frequency != "none":
        rule = _rule(frequency, interval, weekdays, count, until)
        _check_rule(rule, dt.datetime.fromisoformat(event["start"]))
        _check_conflicts(state, {**event, "recurrence": rule}, event["calendar_id"], allow_conflict)
    if rule != event["recurrence"]:
        event = state.events.update(event_id, recurrence=rule, updated_at=iso_datetime(state.now()))
    upcoming = []
    if rule is not None:
        start, end = dt.datetime.fromisoformat(event["start"]), dt.datetime.fromisoformat(event["end"])
        for when in _starts(start, rule):
            if when + (end - start) > state.now():
                upcoming.append({"start": iso_datetime(when), "end": iso_datetime(when + (end - start))})
            if len(upcoming) == 5:
                break
    return {**_view(state, event), "upcoming": upcoming}


@server.tool(
    reads=["event", "calendar", "person"],
    produces=["attendee"],
    errors=["EVENT_NOT_FOUND", "CALENDAR_NOT_SHARED", "NOT_ORGANIZER", "CALENDAR_READ_ONLY", "EVENT_ENDED",
            "ATTENDEE_ALREADY_INVITED", "TOO_MANY_ATTENDEES"],
    examples=[_invite_example,
              lambda s: {"event_id": _mine_ahead(s)["id"], "emails": ["dana.reyes@partner.example"]}],
    asks=("invite {emails} to {event_id}", "add {emails} to the guest list of {event_id}",
          "send an invite for {event_id} to {emails}", "loop {emails} into {event_id}"),
    values={"emails": lambda rng, s: [f"{first}.{last}@{rng.choice(GUEST_DOMAINS)}".lower()
                                      for first, last in (fake.person(rng) for _ in range(rng.randint(1, 2)))]},
)
def invite_attendees(
    state: CalendarState,
    event_id: EventId,
    emails: Annotated[list[Email], Field(min_length=1, max_length=20, description="E-mail addresses to invite.")],
) -> dict:
    """Invite more people to an event you organized; each starts as needsAction. Returns the event
    with its attendees. Fails with ATTENDEE_ALREADY_INVITED (naming who), TOO_MANY_ATTENDEES (50 at
    most), EVENT_ENDED (its last occurrence is over), NOT_ORGANIZER, CALENDAR_READ_ONLY or
    CALENDAR_NOT_SHARED."""
    event = _organized(state, event_id)
    require(_series_end(event) > state.now(), "the event is over; nobody can be invited",
            reason="EVENT_ENDED")
    rows = state.attendees.where(event_id=event_id)
    invited = {a["email"] for a in rows}
    wanted = list(dict.fromkeys(e.lower() for e in emails))
    already = [e for e in wanted if e in invited]
    require(not already, f"already invited: {', '.join(already)}", reason="ATTENDEE_ALREADY_INVITED",
            error=Conflict, emails=already)
    _check_room(len(rows), len(wanted))
    for email in wanted:
        _add_attendee(state, event_id, email, "needsAction", organizer=False, when=state.now())
    return _view(state, state.events.get(event_id))


@server.tool(
    idempotent=True,  # the same answer again changes nothing
    reads=["event", "attendee"],
    mutates=["attendee"],
    errors=["EVENT_NOT_FOUND", "NOT_INVITED", "ORGANIZER_CANNOT_RESPOND", "EVENT_ENDED"],
    examples=[_invitation, lambda s: {"event_id": _invitation(s)["event_id"], "response": "tentative"}],
    asks=("mark {event_id} as {response}", "set my response to {event_id} to {response}",
          "change my RSVP for {event_id} to {response}",
          "mark {event_id} as {response} with the note \"{comment}\""),
    values={"response": lambda rng, s: rng.choice(("accepted", "declined", "tentative")),
            "comment": lambda rng, s: rng.choice(RSVP_COMMENTS)},
)
def respond_to_event(
    state: CalendarState,
    event_id: EventId,
    response: Annotated[Response, Field(description="accepted, declined or tentative.")],
    comment: Annotated[str | None, Field(max_length=300, description="Optional note to the organizer.")] = None,
) -> dict:
    """Answer an invitation for yourself (for a series, for every occurrence). Returns the event
    with your response. Fails with NOT_INVITED (you are not on the guest list), ORGANIZER_CANNOT_RESPOND
    (the organizer attends their own event) or EVENT_ENDED."""
    event = state.events.get(event_id)
    row = _my_row(state, event_id)
    require(row is not None, "you are not invited to this event", reason="NOT_INVITED", error=PermissionDenied)
    require(not row["organizer"], "you organize this event; edit or delete it instead",
            reason="ORGANIZER_CANNOT_RESPOND")
    require(_series_end(event) > state.now(), "the event is over", reason="EVENT_ENDED")
    if (row["response"], row["comment"]) != (response, comment):
        state.attendees.update(row["id"], response=response, comment=comment, responded_at=iso_datetime(state.now()))
    return _view(state, event)


@server.tool(
    answers=("start", "my_response"),
    read_only=True,
    reads=["event", "attendee"],
    examples=[{}, {"response": "accepted", "include_past": True}],
    asks=_invitation_asks,
)
def list_invitations(
    state: CalendarState,
    response: Annotated[ResponseStatus | None, Field(description="Only invitations you answered this way; "
                                                                 "needsAction for unanswered ones.")] = None,
    include_past: Annotated[bool, Field(description="Also list events that are over.")] = False,
) -> dict:
    """Events organized by others that you are invited to, soonest first, with your response and
    the organizer. By default only those not over yet."""
    now = state.now()
    out = []
    for row in state.attendees.where(lambda a: not a["organizer"], email=_me(state)["email"]):
        if response and row["response"] != response:
            continue
        event = state.events.get(row["event_id"])
        if not include_past and _series_end(event) <= now:
            continue
        out.append({**_summary(state, event), "my_response": row["response"], "my_comment": row["comment"]})
    out.sort(key=lambda e: ((e["next_occurrence"] or {"start": e["start"]})["start"], e["id"]))
    return {"invitations": out, "total": len(out)}


@server.tool(
    answers=("start", "end"),
    read_only=True,
    reads=["person", "event", "attendee"],
    errors=["PERSON_NOT_FOUND", "INVALID_TIME_RANGE", "RANGE_TOO_LARGE", "BAD_DATETIME"],
    examples=[_free_busy_example],
    asks=("check when {emails} are free between {time_min} and {time_max}",
          "find a time between {time_min} and {time_max} when {emails} are all free",
          "show the busy times of {emails} from {time_min} to {time_max}",
          "look up free/busy for {emails} between {time_min} and {time_max}"),
)
def get_free_busy(
    state: CalendarState,
    emails: Annotated[list[Email], Field(min_length=1, max_length=20,
                                         description="E-mail addresses of colleagues (and yourself) to check.")],
    time_min: RangeStart,
    time_max: RangeEnd,
) -> dict:
    """Busy intervals of each person over a range (events they organize or have not declined,
    shown as busy, on any calendar; details are never revealed), and the gaps when all of them are
    free. Fails with PERSON_NOT_FOUND (not in the directory), INVALID_TIME_RANGE, RANGE_TOO_LARGE or
    BAD_DATETIME (not a real date-time)."""
    lo, hi = _range(state, time_min, time_max)
    people = [_person(state, e) for e in dict.fromkeys(e.lower() for e in emails)]
    calendars, everyone = [], []
    for person in people:
        spans = []
        for row in state.attendees.where(lambda a: a["response"] != "declined", email=person["email"]):
            event = state.events.get(row["event_id"])
            if event["show_as"] == "busy":
                spans += [(max(s, lo), min(e, hi)) for s, e in _occurrences(event, lo, hi)]
        merged = _merge(spans)
        everyone += merged
        calendars.append({"email": person["email"], "name": person["name"],
                          "busy": [{"start": iso_datetime(s), "end": iso_datetime(e)} for s, e in merged]})
    free, cursor = [], lo
    for start, end in _merge(everyone):
        if start > cursor:
            free.append({"start": iso_datetime(cursor), "end": iso_datetime(start)})
        cursor = max(cursor, end)
    if cursor < hi:
        free.append({"start": iso_datetime(cursor), "end": iso_datetime(hi)})
    return {"time_min": iso_datetime(lo), "time_max": iso_datetime(hi), "people": calendars, "free_for_all": free}


def _merge(spans: list[tuple[dt.datetime, dt.datetime]]) -> list[tuple[dt.datetime, dt.datetime]]:
    merged: list[tuple[dt.datetime, dt.datetime]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


@server.tool(
    idempotent=True,  # a repeat is refused with REMINDER_ALREADY_SET
    reads=["event", "reminder"],
    produces=["reminder"],
    errors=["EVENT_NOT_FOUND", "CALENDAR_NOT_SHARED", "EVENT_ENDED", "REMINDER_ALREADY_SET", "REMINDER_LIMIT_REACHED"],
    examples=[_reminder_example, lambda s: {"event_id": s.events.first(title="Daily standup")["id"],
                                            "minutes_before": 5}],
    asks=("remind me {minutes_before} minutes before {event_id}",
          "set a reminder {minutes_before} minutes ahead of {event_id}",
          "add a reminder by {method}, {minutes_before} minutes before {event_id}",
          "ping me by {method} {minutes_before} minutes before {event_id} starts"),
    values={"minutes_before": lambda rng, s: rng.choice((5, 10, 15, 20, 30, 45, 60, 90, 120))},
)
def set_reminder(
    state: CalendarState,
    event_id: EventId,
    minutes_before: Annotated[int, Field(ge=0, le=40320, description="How long before each occurrence to remind "
                                                                     "you, in minutes (up to 4 weeks).")],
    method: Annotated[ReminderMethod, Field(description="popup notification or e-mail.")] = "popup",
) -> dict:
    """Add a personal reminder to an event you can see (it fires before every occurrence). Returns
    the reminder and when it next fires. Fails with REMINDER_ALREADY_SET (same time and method),
    REMINDER_LIMIT_REACHED (5 per event), EVENT_ENDED or CALENDAR_NOT_SHARED."""
    event = _visible(state, event_id)
    require(_series_end(event) > state.now(), "the event is over", reason="EVENT_ENDED")
    existing = state.reminders.where(event_id=event_id)
    same = next((r for r in existing if (r["minutes_before"], r["method"]) == (minutes_before, method)), None)
    if same is not None:
        raise Conflict(f"a {method} reminder {minutes_before} minutes before is already set",
                       reason="REMINDER_ALREADY_SET", reminder_id=same["id"])
    require(len(existing) < MAX_REMINDERS_PER_EVENT, f"an event has at most {MAX_REMINDERS_PER_EVENT} reminders",
            reason="REMINDER_LIMIT_REACHED", error=ResourceExhausted, limit=MAX_REMINDERS_PER_EVENT)
    reminder = state.reminders.insert({"event_id": event_id, "minutes_before": minutes_before, "method": method,
                                       "created_at": iso_datetime(state.now())})
    return _reminder_view(state, reminder, event)


def _reminder_view(state: CalendarState, reminder: Record, event: Record) -> Record:
    """A reminder with its event and the next time it fires (before the next occurrence not yet
    started; null when none is left)."""
    start = dt.datetime.fromisoformat(event["start"])
    lead = dt.timedelta(minutes=reminder["minutes_before"])
    starts = _starts(start, event["recurrence"]) if event["recurrence"] else iter((start,))
    fires = next((iso_datetime(w - lead) for w in starts if w - lead >= state.now()), None)
    return {**reminder, "event_title": event["title"], "event_start": event["start"], "next_fire_at": fires}


@server.tool(
    answers=("minutes_before", "event_start"),
    read_only=True,
    reads=["reminder", "event"],
    errors=["EVENT_NOT_FOUND", "CALENDAR_NOT_SHARED"],
    examples=[{}, lambda s: {"event_id": s.reminders.first()["event_id"]}],
    asks=("list my reminders", "show all the reminders I've set", "show the reminders on {event_id}",
          "list the reminders set for {event_id}"),
)
def list_reminders(
    state: CalendarState,
    event_id: Annotated[str | None, ref("event", "Only reminders of this event (evt_...).")] = None,
) -> dict:
    """Your reminders, each with its event and the next time it fires, soonest first. Fails with
    EVENT_NOT_FOUND or CALENDAR_NOT_SHARED when event_id is given."""
    if event_id:
        _visible(state, event_id)
        reminders = state.reminders.where(event_id=event_id)
    else:
        reminders = state.reminders.all()
    out = [_reminder_view(state, r, state.events.get(r["event_id"])) for r in reminders]
    out.sort(key=lambda r: (r["next_fire_at"] is None, r["next_fire_at"] or "", r["id"]))
    return {"reminders": out, "total": len(out)}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
