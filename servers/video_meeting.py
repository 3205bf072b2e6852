"""video_meeting — a video meeting service as one signed-in organizer sees it: virtual rooms
with a capacity, meetings booked in a room, invitations, the waiting room and participants of
a live meeting, and cloud recordings.

Time is the session clock: a meeting is ``upcoming`` before its start, ``live`` from its start
until its end, then ``ended`` (or ``cancelled``). Recording and admitting or removing people
happen only while it is live, and only the host may do them. A room holds one meeting at a time
(OVERLAPPING_BOOKING) and at most ``capacity`` people: the host plus every invitation not
declined when booking or inviting, the people inside when admitting from the waiting room. A
recording still running when its meeting ends stops with it.

The signed-in organizer is the var ``me`` (name and e-mail); people are known by e-mail.
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
    PermissionDenied,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    paginate,
    ref,
    require,
)

ORG_DOMAIN = "northwind.example.com"
RECORDING_MB_PER_MINUTE = 7.5
HISTORY_DAYS, HORIZON_DAYS = 7, 14  # seeded meetings run from a week ago to two weeks ahead
QUIET = (dt.timedelta(hours=-1), dt.timedelta(hours=3))  # around now, only the scripted meetings run

# name, capacity (people, host included), cloud recording
ROOMS = (
    ("Focus Booth", 4, False),
    ("Fjord", 6, False),
    ("Birch", 8, True),
    ("Cedar", 8, True),
    ("Aurora", 12, True),
    ("Delta", 25, True),
    ("Everest Hall", 100, True),
    ("Town Hall", 300, True),
)
TITLES = (
    "Roadmap review", "Hiring sync", "Budget check-in", "Customer onboarding call", "Architecture deep dive",
    "Marketing standup", "Partner check-in", "Interview: senior engineer", "Lunch & learn", "Security review",
    "Release go/no-go", "Pipeline review",
)
DURATIONS = (30, 45, 60, 90)
RESPONSES = ("accepted", "accepted", "accepted", "tentative", "pending", "declined")


class MeetingState(State):
    """Rooms and meetings as the signed-in organizer (var ``me``) sees them."""

    rooms = Table("room", prefix="rm")
    meetings = Table("meeting", prefix="mtg", index=("room_id", "host_email"))
    invitations = Table("invitation", prefix="inv", index=("meeting_id", "email"))
    participants = Table("participant", prefix="prt", index=("meeting_id",))
    recordings = Table("recording", prefix="rec", index=("meeting_id",))


@attrs.frozen(kw_only=True)
class MeetingOptions:
    """Seed size: how many meetings are booked besides the scripted ones (and ten colleagues more)."""

    meetings: int = attrs.field(default=12, validator=attrs.validators.gt(0))


# -- shared rules ---------------------------------------------------------------------------------


def _at(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


def _parse_when(value: str, field: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{field} must be a date and time like 2026-03-04T15:00:00Z, got {value!r}",
                              reason="BAD_DATETIME", field=field) from None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def _me(state: MeetingState) -> Record:
    return state.get_var("me")


def _status(state: MeetingState, meeting: Record) -> str:
    if meeting["status"] == "cancelled":
        return "cancelled"
    now = iso_datetime(state.now())
    return "upcoming" if now < meeting["start"] else "live" if now < meeting["end"] else "ended"


def _require_host(state: MeetingState, meeting: Record) -> None:
    require(meeting["host_email"] == _me(state)["email"],
            f"only the host ({meeting['host_name']}) can do this for {meeting['title']!r}", reason="NOT_HOST",
            error=PermissionDenied, host_email=meeting["host_email"])


def _require_live(state: MeetingState, meeting: Record) -> None:
    status = _status(state, meeting)
    require(status != "cancelled", f"{meeting['title']!r} was cancelled", reason="MEETING_CANCELLED")
    require(status == "live", f"{meeting['title']!r} is not live: it {'starts' if status == 'upcoming' else 'ended'} "
            f"at {meeting['start'] if status == 'upcoming' else meeting['end']} (now {iso_datetime(state.now())})",
            reason="MEETING_NOT_LIVE", status=status, start=meeting["start"], end=meeting["end"])


def _require_not_over(state: MeetingState, meeting: Record) -> None:
    status = _status(state, meeting)
    require(status != "cancelled", f"{meeting['title']!r} was cancelled", reason="MEETING_CANCELLED")
    require(status != "ended", f"{meeting['title']!r} ended at {meeting['end']}", reason="MEETING_ENDED")


def _seats_taken(state: MeetingState, meeting_id: str) -> int:
    """The host plus every invitation not declined."""
    return 1 + len(state.invitations.where(lambda i: i["status"] != "declined", meeting_id=meeting_id))


def _require_capacity(room: Record, needed: int) -> None:
    require(needed <= room["capacity"], f"{room['name']} holds {room['capacity']} people; this needs {needed}",
            reason="ROOM_CAPACITY_EXCEEDED", error=ResourceExhausted, capacity=room["capacity"], needed=needed)


def _clash(state: MeetingState, room_id: str, start: str, end: str) -> Record | None:
    """A booking of the room (not cancelled) that overlaps [start, end)."""
    return state.meetings.first(lambda m: m["start"] < end and start < m["end"], room_id=room_id, status="scheduled")


def _inside(state: MeetingState, meeting_id: str) -> list[Record]:
    return state.participants.where(meeting_id=meeting_id, state="in_meeting")


def _meeting_participant(state: MeetingState, meeting: Record, participant_id: str) -> Record:
    participant = state.participants.get(participant_id)
    require(participant["meeting_id"] == meeting["id"], f"participant {participant_id} is not in {meeting['title']!r}",
            reason="PARTICIPANT_NOT_IN_MEETING", error=InvalidArgument, meeting_id=participant["meeting_id"])
    return participant


def _active_recording(state: MeetingState, meeting: Record) -> Record | None:
    if _status(state, meeting) != "live":  # a recording stops when its meeting ends
        return None
    return state.recordings.first(meeting_id=meeting["id"], status="recording")


def _finish_recording(recording: Record, stopped: dt.datetime) -> Record:
    seconds = max(0, int((stopped - _at(recording["started_at"])).total_seconds()))
    return {"stopped_at": iso_datetime(stopped), "status": "available", "duration_seconds": seconds,
            "size_mb": round(seconds / 60 * RECORDING_MB_PER_MINUTE, 1),
            "download_url": f"https://meet.example.com/rec/{recording['id'].removeprefix('rec_')}.mp4"}


def _recording_view(state: MeetingState, recording: Record, meeting: Record) -> Record:
    if recording["status"] == "recording" and _status(state, meeting) != "live":
        recording = {**recording, **_finish_recording(recording, min(state.now(), _at(meeting["end"])))}
    return {**recording, "meeting_title": meeting["title"]}


def _summary(state: MeetingState, meeting: Record) -> Record:
    me = _me(state)["email"]
    mine = state.invitations.first(meeting_id=meeting["id"], email=me)
    return {
        "id": meeting["id"], "title": meeting["title"], "start": meeting["start"], "end": meeting["end"],
        "duration_minutes": meeting["duration_minutes"], "status": _status(state, meeting),
        "room": state.rooms.get(meeting["room_id"])["name"], "room_id": meeting["room_id"],
        "host_name": meeting["host_name"], "host_email": meeting["host_email"],
        "your_role": "host" if meeting["host_email"] == me else "invitee",
        "your_response": None if mine is None else mine["status"],
        "invitee_count": len(state.invitations.where(meeting_id=meeting["id"])), "join_url": meeting["join_url"],
    }


def _meeting_view(state: MeetingState, meeting: Record) -> Record:
    """Everything about one meeting; the waiting room and invitation answers are for the host."""
    people = state.participants.where(meeting_id=meeting["id"])
    view = {
        **_summary(state, meeting),
        "agenda": meeting["agenda"],
        "waiting_room_enabled": meeting["waiting_room"],
        "room": state.rooms.get(meeting["room_id"]),
        "cancel_reason": meeting["cancel_reason"],
        "participants": [p for p in people if p["state"] == "in_meeting"],
        "recording_active": _active_recording(state, meeting) is not None,
    }
    if view["your_role"] == "host":
        view["waiting_room"] = [p for p in people if p["state"] == "waiting"]
        view["invitations"] = state.invitations.where(meeting_id=meeting["id"])
    return view


def _book(state: MeetingState, *, title: str, host: Record, room: Record, start: dt.datetime, minutes: int,
          waiting_room: bool, agenda: str | None, status: str = "scheduled") -> Record:
    meeting_id = state.meetings.new_id()
    return state.meetings.insert({
        "id": meeting_id, "title": title, "host_name": host["name"], "host_email": host["email"],
        "room_id": room["id"], "start": iso_datetime(start), "end": iso_datetime(start + dt.timedelta(minutes=minutes)),
        "duration_minutes": minutes, "status": status, "waiting_room": waiting_room, "agenda": agenda,
        "join_url": f"https://meet.example.com/j/{meeting_id.removeprefix('mtg_')}", "cancel_reason": None,
    })


def _invite(state: MeetingState, meeting: Record, person: Record, status: str = "pending") -> Record:
    return state.invitations.insert({"meeting_id": meeting["id"], "email": person["email"],
                                     "name": person.get("name"), "status": status})


def _join(state: MeetingState, meeting: Record, person: Record, where: str, minutes_ago: int) -> Record:
    role = "host" if person["email"] == meeting["host_email"] else "attendee"
    return state.participants.insert({"meeting_id": meeting["id"], "email": person["email"], "name": person["name"],
                                      "role": role, "state": where,
                                      "joined_at": iso_datetime(state.now() - dt.timedelta(minutes=minutes_ago))})


# -- seed -----------------------------------------------------------------------------------------


def build_meetings(rng: random.Random, options: MeetingOptions) -> MeetingState:
    """The rooms, you and your colleagues, scripted meetings that give every rule a case (live
    ones right now, upcoming, cancelled and past ones with recordings), and random bookings."""
    state = MeetingState(salt=f"{rng.getrandbits(64):016x}")
    taken: set[str] = set()
    me = _person(rng, taken)
    state.set_var("me", me)
    colleagues = [_person(rng, taken) for _ in range(10 + options.meetings)]
    rooms = {name: state.rooms.insert({"name": name, "capacity": capacity, "cloud_recording": recording})
             for name, capacity, recording in ROOMS}
    _seed_scripted(state, rng, me, colleagues, rooms)
    _seed_random(state, rng, me, colleagues, list(rooms.values()), options.meetings)
    return state


def _person(rng: random.Random, taken: set[str]) -> Record:
    first, last = fake.person(rng)
    base = f"{first}.{last}".lower()
    local = next(h for h in (base if n == 0 else f"{base}{n + 1}" for n in range(len(taken) + 1)) if h not in taken)
    taken.add(local)
    return {"name": f"{first} {last}", "email": f"{local}@{ORG_DOMAIN}"}


def _seed_scripted(state: MeetingState, rng: random.Random, me: Record, colleagues: list[Record],
                   rooms: dict[str, Record]) -> None:
    now, today = state.now(), dt.datetime.combine(state.today(), dt.time(), tzinfo=dt.UTC)
    cast = rng.sample(colleagues, k=10)

    def meeting(title: str, host: Record, room: str, start: dt.datetime, minutes: int, invitees: list[Record], *,
                status: str = "scheduled", waiting_room: bool = True) -> Record:
        booked = _book(state, title=title, host=host, room=rooms[room], start=start, minutes=minutes,
                       waiting_room=waiting_room, agenda=None, status=status)
        for person in invitees:
            _invite(state, booked, person, "accepted" if start < now else rng.choice(RESPONSES[:-1]))
        return booked

    def live(booked: Record, host: Record, inside: list[Record], waiting: list[Record]) -> None:
        for n, person in enumerate([host, *inside]):
            _join(state, booked, person, "in_meeting", minutes_ago=12 - n)
        for n, person in enumerate(waiting):
            _join(state, booked, person, "waiting", minutes_ago=3 - n)

    sync = meeting("Weekly product sync", me, "Aurora", now - dt.timedelta(minutes=15), 60, cast[:7])
    live(sync, me, cast[:4], cast[4:6])
    huddle = meeting("Customer escalation huddle", me, "Focus Booth", now - dt.timedelta(minutes=10), 45, cast[6:9])
    live(huddle, me, cast[6:9], cast[9:])  # the booth is full: nobody more can be admitted
    review = meeting("Design review", cast[0], "Birch", now - dt.timedelta(minutes=20), 60, [me, *cast[1:4]])
    live(review, cast[0], [me, *cast[1:3]], cast[3:4])
    rehearsal = meeting("Webinar rehearsal", me, "Delta", now - dt.timedelta(minutes=30), 90, cast[2:5],
                        waiting_room=False)
    live(rehearsal, me, cast[2:5], [])
    state.recordings.insert({"meeting_id": rehearsal["id"], "started_at": iso_datetime(now - dt.timedelta(minutes=25)),
                             "status": "recording", "stopped_at": None, "duration_seconds": None, "size_mb": None,
                             "download_url": None})
    meeting(f"1:1 with {cast[5]['name'].split()[0]}", me, "Fjord", today + dt.timedelta(days=1, hours=10), 30,
            cast[5:6])
    meeting("Sprint planning", me, "Cedar", today + dt.timedelta(days=2, hours=14), 90, cast[:7])  # 8 of 8 seats
    meeting("Vendor demo", me, "Birch", today + dt.timedelta(days=1, hours=16), 60, cast[7:9], status="cancelled")
    meeting("Quarterly business review", cast[1], "Delta", today + dt.timedelta(days=3, hours=15), 60,
            [me, *cast[2:6]])
    meeting("Board prep", cast[2], "Everest Hall", today + dt.timedelta(days=1, hours=13), 60, cast[3:6])  # not yours
    retro = meeting("Sprint retro", me, "Aurora", today - dt.timedelta(days=1) + dt.timedelta(hours=15), 60, cast[:5])
    onboarding = meeting("New-hire onboarding", me, "Delta", today - dt.timedelta(days=3) + dt.timedelta(hours=11),
                         90, cast[3:9])
    for booked, parts in ((retro, ((2, 50),)), (onboarding, ((1, 40), (50, 35)))):
        for offset, minutes in parts:
            started = _at(booked["start"]) + dt.timedelta(minutes=offset)
            recording = state.recordings.insert({"meeting_id": booked["id"], "started_at": iso_datetime(started),
                                                 "status": "recording"})
            state.recordings.update(recording["id"], **_finish_recording(
                recording, started + dt.timedelta(minutes=minutes)))


def _seed_random(state: MeetingState, rng: random.Random, me: Record, colleagues: list[Record], rooms: list[Record],
                 count: int) -> None:
    """Bookings spread over three weeks in free room slots, hosted by you or a colleague."""
    now = state.now()
    quiet_from, quiet_to = now + QUIET[0], now + QUIET[1]
    booked = attempts = 0
    while booked < count and attempts < count * 20:
        attempts += 1
        day = dt.datetime.combine(state.today() + dt.timedelta(days=rng.randint(-HISTORY_DAYS, HORIZON_DAYS)),
                                  dt.time(rng.randint(8, 17), rng.choice((0, 30))), tzinfo=dt.UTC)
        minutes = rng.choice(DURATIONS)
        end = day + dt.timedelta(minutes=minutes)
        room = rng.choice(rooms)
        if day < quiet_to and quiet_from < end or _clash(state, room["id"], iso_datetime(day), iso_datetime(end)):
            continue
        host = me if rng.random() < 0.4 else rng.choice(colleagues)
        pool = [c for c in colleagues if c != host] + ([me] if host != me and rng.random() < 0.7 else [])
        invitees = rng.sample(pool, k=min(len(pool), rng.randint(1, room["capacity"] - 1), 12))
        cancelled = day > now and rng.random() < 0.1
        meeting = _book(state, title=rng.choice(TITLES), host=host, room=room, start=day, minutes=minutes,
                        waiting_room=rng.random() < 0.7, agenda=None, status="cancelled" if cancelled else "scheduled")
        for person in invitees:
            _invite(state, meeting, person, "accepted" if end < now else rng.choice(RESPONSES))
        if end < now and host == me and room["cloud_recording"] and rng.random() < 0.5:
            recording = state.recordings.insert({"meeting_id": meeting["id"], "started_at": iso_datetime(day),
                                                 "status": "recording"})
            state.recordings.update(recording["id"], **_finish_recording(recording, end))
        booked += 1


# -- examples: arguments valid on a fresh seed of any size ------------------------------------------


def _hosted(s: MeetingState, phase: str, **where: Any) -> Record:
    """Your first meeting in this phase (upcoming, live, ended, cancelled) matching ``where``."""
    me = _me(s)["email"]
    return next(m for m in s.meetings.where(host_email=me, **where) if _status(s, m) == phase)


def _live_recordable(s: MeetingState, *, recording: bool) -> Record:
    for meeting in s.meetings.where(host_email=_me(s)["email"], status="scheduled"):
        if _status(s, meeting) == "live" and s.rooms.get(meeting["room_id"])["cloud_recording"]:
            if (_active_recording(s, meeting) is not None) is recording:
                return meeting
    raise LookupError("no such live meeting")


def _with_waiting(s: MeetingState) -> tuple[Record, Record]:
    """A live meeting of yours with someone waiting and a free seat, and that person."""
    for meeting in s.meetings.where(host_email=_me(s)["email"]):
        waiting = s.participants.first(meeting_id=meeting["id"], state="waiting")
        room = s.rooms.get(meeting["room_id"])
        if waiting and _status(s, meeting) == "live" and len(_inside(s, meeting["id"])) < room["capacity"]:
            return meeting, waiting
    raise LookupError("nobody waiting")


def _attendee_inside(s: MeetingState) -> Record:
    """Someone other than you inside a live meeting you host."""
    for meeting in s.meetings.where(host_email=_me(s)["email"]):
        if _status(s, meeting) == "live":
            found = s.participants.first(meeting_id=meeting["id"], role="attendee", state="in_meeting")
            if found:
                return found
    raise LookupError("nobody inside a live meeting of yours")


def _spare_seat(s: MeetingState) -> Record:
    me = _me(s)["email"]
    return next(m for m in s.meetings.where(host_email=me, status="scheduled") if _status(s, m) == "upcoming"
                and _seats_taken(s, m["id"]) < s.rooms.get(m["room_id"])["capacity"])


def _later(s: MeetingState, days: int, hour: int) -> str:
    """A time after every seeded booking, so any room is free then."""
    day = s.today() + dt.timedelta(days=days)
    return iso_datetime(dt.datetime.combine(day, dt.time(hour), tzinfo=dt.UTC))


# -- how organizers ask, and what they choose ---------------------------------------------------------

GUEST_DOMAINS = (ORG_DOMAIN, ORG_DOMAIN, "partner.example.org", "client.example.net")
AGENDAS = ("Walk through the new onboarding screens.", "Review last quarter's numbers and agree on next steps.",
           "Go over open risks before the release.", "Intros, goals for the quarter, then Q&A.",
           "Demo of the prototype, then feedback.", "Decide on the vendor shortlist.",
           "Status per workstream, blockers, owners.", "Candidate debrief and hiring decision.")
CANCEL_REASONS = ("Moved to Slack", "Rescheduling to next week", "The host is out sick", "No longer needed",
                  "Merged into the weekly sync", "Waiting on the client's feedback first", "Clashes with the all-hands",
                  "Key people are out this week")
UPCOMING_ASKS = {
    "host": ("show the meetings I'm hosting in the next {days} days", "list the meetings I organize coming up",
             "show me what I'm hosting soon"),
    "invited": ("show the meetings I'm invited to in the next {days} days",
                "list upcoming meetings other people invited me to", "show me which invitations I have coming up"),
    "any": ("show my upcoming meetings", "list my meetings for the next {days} days",
            "show what's on my meeting schedule this week", "show my next {limit} meetings"),
}


def _upcoming_asks(a: Any) -> tuple[str, ...]:
    found = UPCOMING_ASKS[a.get("role", "any")]
    if a.get("include_cancelled"):
        found = tuple(t + tail for t, tail in zip(found, (", including cancelled ones", ", cancelled ones too",
                                                          " and include the cancelled ones"), strict=False))
    return found


def _guests(rng: random.Random, s: MeetingState, args: Record | None = None) -> list[str]:
    """One to three people to invite, colleagues or guests, by e-mail; no more than the call's
    room holds besides the host."""
    room = s.rooms.find((args or {}).get("room_id") or "")
    count = min(rng.randint(1, 3), max(room["capacity"] - 1, 1) if room else 3)
    return [f"{first.lower()}.{last.lower()}@{rng.choice(GUEST_DOMAINS)}"
            for first, last in (fake.person(rng) for _ in range(count))]


def _future_start(rng: random.Random, s: MeetingState) -> str:
    """A slot after every seeded booking (they run two weeks ahead), in working hours."""
    day = s.today() + dt.timedelta(days=rng.randint(HORIZON_DAYS + 1, HORIZON_DAYS + 14))
    return iso_datetime(dt.datetime.combine(day, dt.time(rng.choice((9, 10, 11, 13, 14, 15, 16)), rng.choice((0, 30))),
                                    tzinfo=dt.UTC))


# -- the server and its tools ----------------------------------------------------------------------

server = Server(
    "video_meeting",
    domain="lifestyle",
    description="A video meeting service for one organizer: virtual rooms with a capacity, scheduling, invitations, "
    "upcoming meetings and cancellation, the waiting room and participants of a live meeting, and cloud recordings.",
    state=MeetingState,
    seed=build_meetings,
    options=MeetingOptions,
)

MeetingId = Annotated[str, ref("meeting", "Id of the meeting (mtg_...), from list_upcoming_meetings or "
                                          "schedule_meeting.")]
RoomId = Annotated[str, ref("room", "Id of the room (rm_...), from list_rooms.")]
ParticipantId = Annotated[str, ref("participant", "Id of a participant (prt_...), from get_meeting's participants "
                                                  "or waiting_room.")]
Emails = Annotated[list[Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")]],
                   Field(min_length=1, max_length=50, description="E-mail addresses of the people to invite.")]
WHEN = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?(Z|[+-]\d{2}:\d{2})?$"
Minutes = Annotated[int, Field(ge=5, le=480, description="Length in minutes (5-480).")]


@server.tool(
    answers=("capacity", "available"),
    read_only=True,
    reads=["room", "meeting"],
    errors=["BAD_DATETIME"],
    examples=[{}, lambda s: {"min_capacity": 10, "start": _later(s, 1, 14), "duration_minutes": 60}],
    asks=("list the meeting rooms", "show rooms that fit at least {min_capacity} people",
          "find a room free at {start} for {duration_minutes} minutes",
          "show which rooms for {min_capacity} or more people are free at {start}",
          "show which rooms have cloud recording"),
    values={"start": _future_start, "duration_minutes": lambda rng, s: rng.choice(DURATIONS),
            "min_capacity": lambda rng, s: rng.choice((4, 6, 8, 10, 12))},
)
def list_rooms(
    state: MeetingState,
    min_capacity: Annotated[int | None, Field(ge=1, le=1000, description="Only rooms for at least this many "
                                                                         "people (host included).")] = None,
    start: Annotated[str | None, Field(pattern=WHEN, description="Check availability from this time "
                                                                 "(YYYY-MM-DDTHH:MM, UTC unless an offset is "
                                                                 "given).")] = None,
    duration_minutes: Annotated[int, Field(ge=5, le=480, description="Length of the slot to check, with start.")] = 60,
) -> dict:
    """The virtual rooms, smallest first: capacity (people, host included) and whether cloud
    recording is available there. With start, each room also says whether it is free for that
    slot and, if not, when the clashing booking runs. Fails with BAD_DATETIME."""
    rooms = [r for r in state.rooms.all() if min_capacity is None or r["capacity"] >= min_capacity]
    if start is not None:
        begin = _parse_when(start, "start")
        window = (iso_datetime(begin), iso_datetime(begin + dt.timedelta(minutes=duration_minutes)))
        for room in rooms:
            clash = _clash(state, room["id"], *window)
            room["available"] = clash is None
            room["booked"] = None if clash is None else {"start": clash["start"], "end": clash["end"]}
    return {"rooms": sorted(rooms, key=lambda r: (r["capacity"], r["name"]))}


@server.tool(
    idempotent=True,  # the same booking again is refused with OVERLAPPING_BOOKING
    reads=["room", "meeting", "invitation"],
    produces=["meeting", "invitation"],
    errors=["BAD_DATETIME", "START_IN_PAST", "ROOM_NOT_FOUND", "ROOM_CAPACITY_EXCEEDED", "OVERLAPPING_BOOKING"],
    examples=[
        lambda s: {"title": "Design sync", "start": _later(s, 21, 15), "duration_minutes": 45,
                   "room_id": s.rooms.first(lambda r: r["capacity"] >= 8)["id"],
                   "invitees": ["maria.silva@northwind.example.com", "guest@partner.example.org"],
                   "agenda": "Walk through the new onboarding screens."},
        lambda s: {"title": "Focus time", "start": _later(s, 22, 9), "duration_minutes": 120,
                   "room_id": s.rooms.first()["id"], "waiting_room": False},
    ],
    asks=lambda a: (
        ('book "{title}" at {start} for {duration_minutes} minutes without a waiting room',
         'schedule "{title}" at {start}, {duration_minutes} minutes, and let people join directly',
         'set up "{title}" on {start} for {duration_minutes} minutes in {room_id} with the waiting room off')
        if a.get("waiting_room") is False
        else ('schedule "{title}" at {start} for {duration_minutes} minutes',
              'book {room_id} for "{title}" on {start}, {duration_minutes} minutes, and invite {invitees}',
              'set up a {duration_minutes}-minute meeting called "{title}" at {start}',
              'schedule "{title}" for {start}, {duration_minutes} minutes, with the agenda "{agenda}"',
              'put "{title}" on the calendar at {start} for {duration_minutes} minutes and invite {invitees}')),
    values={"title": lambda rng, s: rng.choice(TITLES), "start": _future_start,
            "duration_minutes": lambda rng, s: rng.choice(DURATIONS), "invitees": _guests,
            "agenda": lambda rng, s: rng.choice(AGENDAS)},
)
def schedule_meeting(
    state: MeetingState,
    title: Annotated[str, Field(min_length=1, max_length=120, description="Meeting title.")],
    start: Annotated[str, Field(pattern=WHEN, description="Start, YYYY-MM-DDTHH:MM (UTC unless an offset such as "
                                                          "+02:00 is given); now or later.")],
    duration_minutes: Minutes,
    room_id: RoomId,
    invitees: Annotated[list[Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")]] | None,
                        Field(max_length=50, description="E-mail addresses to invite.")] = None,
    waiting_room: Annotated[bool, Field(description="true: people wait until you admit them.")] = True,
    agenda: Annotated[str | None, Field(max_length=1000, description="Agenda shown in the invitation.")] = None,
) -> dict:
    """Book a meeting in a room, hosted by you, and invite people by e-mail. Returns the meeting
    with its id and join link. Fails with BAD_DATETIME, START_IN_PAST, ROOM_CAPACITY_EXCEEDED
    (you plus the invitees do not fit: pick a bigger room from list_rooms) or OVERLAPPING_BOOKING
    (the room is booked then; details give the clashing slot)."""
    begin = _parse_when(start, "start")
    require(begin >= state.now(), f"start {iso_datetime(begin)} is before now ({iso_datetime(state.now())})",
            reason="START_IN_PAST", error=InvalidArgument)
    room = state.rooms.get(room_id)
    me = _me(state)
    people = [e for e in dict.fromkeys(e.lower() for e in invitees or []) if e != me["email"]]
    _require_capacity(room, 1 + len(people))
    end = begin + dt.timedelta(minutes=duration_minutes)
    clash = _clash(state, room_id, iso_datetime(begin), iso_datetime(end))
    if clash is not None:
        raise Conflict(f"{room['name']} is booked from {clash['start']} to {clash['end']}",
                       reason="OVERLAPPING_BOOKING", room_id=room_id, booked_start=clash["start"],
                       booked_end=clash["end"])
    meeting = _book(state, title=title, host=me, room=room, start=begin, minutes=duration_minutes,
                    waiting_room=waiting_room, agenda=agenda)
    for email in people:
        _invite(state, meeting, {"email": email})
    return _meeting_view(state, meeting)


@server.tool(
    answers=("start", "end", "status", "join_url"),
    read_only=True,
    reads=["meeting", "room", "invitation", "participant", "recording"],
    errors=["MEETING_NOT_FOUND", "NOT_INVITED"],
    examples=[lambda s: {"meeting_id": _with_waiting(s)[0]["id"]},
              lambda s: {"meeting_id": s.meetings.first(lambda m: m["host_email"] != _me(s)["email"] and s.invitations
                                                        .first(meeting_id=m["id"], email=_me(s)["email"]))["id"]}],
    asks=("show me {meeting_id}", "pull up the details of {meeting_id}",
          "check who's in {meeting_id} and who's waiting", "show the join link and agenda of {meeting_id}"),
)
def get_meeting(state: MeetingState, meeting_id: MeetingId) -> dict:
    """One meeting you host or are invited to: time, status (upcoming, live, ended, cancelled),
    room, host, join link, agenda, who is in it and whether it is being recorded; for the host
    also the waiting room and every invitation with its answer. Fails with MEETING_NOT_FOUND or
    NOT_INVITED."""
    meeting = state.meetings.get(meeting_id)
    me = _me(state)["email"]
    require(meeting["host_email"] == me or state.invitations.first(meeting_id=meeting_id, email=me) is not None,
            f"you are not invited to meeting {meeting_id}", reason="NOT_INVITED", error=PermissionDenied)
    return _meeting_view(state, meeting)


@server.tool(
    answers=("start", "end", "status"),
    read_only=True,
    reads=["meeting", "invitation", "room"],
    examples=[{}, {"role": "host", "days": 14, "include_cancelled": True}],
    asks=_upcoming_asks,
)
def list_upcoming_meetings(
    state: MeetingState,
    days: Annotated[int, Field(ge=1, le=60, description="How many days ahead to look.")] = 7,
    role: Annotated[Literal["any", "host", "invited"], Field(description="Meetings you host, are invited to, or "
                                                                         "both.")] = "any",
    include_cancelled: Annotated[bool, Field(description="Also list cancelled meetings.")] = False,
    limit: Annotated[int, Field(ge=1, le=50, description="Page size (1-50).")] = 20,
    offset: Annotated[int, Field(ge=0, description="How many to skip; pass next_offset from the previous page.")] = 0,
) -> dict:
    """Your meetings that are live now or start within the next days, soonest first: id, title,
    start and end, status, room, host, your role and your answer to the invitation. Returns a
    page, the total and next_offset."""
    me = _me(state)["email"]
    now, until = iso_datetime(state.now()), iso_datetime(state.now() + dt.timedelta(days=days))
    found = []
    if role in ("any", "host"):
        found += state.meetings.where(host_email=me)
    if role in ("any", "invited"):
        found += [state.meetings.get(i["meeting_id"]) for i in state.invitations.where(email=me)]
    wanted = [m for m in found if m["end"] > now and m["start"] < until
              and (include_cancelled or m["status"] != "cancelled")]
    wanted.sort(key=lambda m: (m["start"], m["id"]))
    page = paginate(wanted, limit=limit, offset=offset, key="meetings")
    return {**page, "meetings": [_summary(state, m) for m in page["meetings"]]}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with MEETING_CANCELLED
    reads=["meeting"],
    mutates=["meeting"],
    errors=["MEETING_NOT_FOUND", "NOT_HOST", "MEETING_CANCELLED", "MEETING_ENDED", "MEETING_ALREADY_STARTED"],
    examples=[lambda s: {"meeting_id": _hosted(s, "upcoming", status="scheduled")["id"], "reason": "Moved to Slack"}],
    asks=("cancel {meeting_id}", 'call off {meeting_id} and tell people "{reason}"',
          'cancel {meeting_id} with the note "{reason}"', "scrap {meeting_id} and free the room"),
    values={"reason": lambda rng, s: rng.choice(CANCEL_REASONS)},
)
def cancel_meeting(
    state: MeetingState,
    meeting_id: MeetingId,
    reason: Annotated[str | None, Field(max_length=200, description="Why, shown to the invitees.")] = None,
) -> dict:
    """Cancel a meeting you host before it starts; the room is freed and invitees are told.
    Returns the meeting and how many invitees were notified. Fails with NOT_HOST,
    MEETING_CANCELLED, MEETING_ALREADY_STARTED (it is live) or MEETING_ENDED."""
    meeting = state.meetings.get(meeting_id)
    _require_host(state, meeting)
    _require_not_over(state, meeting)
    require(_status(state, meeting) != "live", f"{meeting['title']!r} is already running",
            reason="MEETING_ALREADY_STARTED")
    meeting = state.meetings.update(meeting_id, status="cancelled", cancel_reason=reason)
    notified = len(state.invitations.where(lambda i: i["status"] != "declined", meeting_id=meeting_id))
    return {"meeting": _summary(state, meeting), "invitees_notified": notified}


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_INVITED
    reads=["meeting", "invitation", "room"],
    produces=["invitation"],
    errors=["MEETING_NOT_FOUND", "NOT_HOST", "MEETING_CANCELLED", "MEETING_ENDED", "ALREADY_INVITED",
            "ROOM_CAPACITY_EXCEEDED"],
    examples=[lambda s: {"meeting_id": _spare_seat(s)["id"], "emails": ["jonas.weber@partner.example.org"]}],
    asks=("invite {emails} to {meeting_id}", "add {emails} to the invite list of {meeting_id}",
          "send an invitation for {meeting_id} to {emails}", "get {emails} on {meeting_id}"),
    values={"emails": _guests},
)
def invite_participants(state: MeetingState, meeting_id: MeetingId, emails: Emails) -> dict:
    """Invite more people by e-mail to a meeting you host that has not ended. Returns the new
    invitations and the seats left. Fails with NOT_HOST, MEETING_CANCELLED, MEETING_ENDED,
    ALREADY_INVITED (names who already are, or the host) or ROOM_CAPACITY_EXCEEDED."""
    meeting = state.meetings.get(meeting_id)
    _require_host(state, meeting)
    _require_not_over(state, meeting)
    people = list(dict.fromkeys(e.lower() for e in emails))
    already = [e for e in people if e == meeting["host_email"] or state.invitations.first(meeting_id=meeting_id,
                                                                                         email=e) is not None]
    require(not already, f"already invited: {', '.join(already)}", reason="ALREADY_INVITED", error=Conflict,
            already=already)
    room = state.rooms.get(meeting["room_id"])
    _require_capacity(room, _seats_taken(state, meeting_id) + len(people))
    added = [_invite(state, meeting, {"email": email}) for email in people]
    return {"meeting_id": meeting_id, "invited": added,
            "seats_left": room["capacity"] - _seats_taken(state, meeting_id)}


@server.tool(
    idempotent=True,  # a repeat is refused with RECORDING_ALREADY_ACTIVE or NO_ACTIVE_RECORDING
    reads=["meeting", "room", "recording"],
    produces=["recording"],
    mutates=["recording"],
    errors=["MEETING_NOT_FOUND", "NOT_HOST", "MEETING_CANCELLED", "MEETING_NOT_LIVE", "RECORDING_NOT_ALLOWED",
            "RECORDING_ALREADY_ACTIVE", "NO_ACTIVE_RECORDING"],
    examples=[lambda s: {"meeting_id": _live_recordable(s, recording=False)["id"], "recording": True},
              lambda s: {"meeting_id": _live_recordable(s, recording=True)["id"], "recording": False}],
    asks=lambda a: (
        ("set recording to {recording} on {meeting_id} so it starts now",
         "start the cloud recording of {meeting_id} (recording: {recording})",
         "switch cloud recording for {meeting_id} to {recording} and hit record") if a.get("recording")
        else ("set recording to {recording} on {meeting_id} so it stops now",
              "stop the cloud recording of {meeting_id} (recording: {recording})",
              "switch cloud recording for {meeting_id} to {recording} and end the one running")),
)
def set_recording(
    state: MeetingState,
    meeting_id: MeetingId,
    recording: Annotated[bool, Field(description="true starts a cloud recording, false stops the running one.")],
) -> dict:
    """Start or stop the cloud recording of a live meeting you host. Returns the recording (a
    stopped one has its length, size and download link). Fails with NOT_HOST, MEETING_CANCELLED,
    MEETING_NOT_LIVE (before its start or after its end), RECORDING_NOT_ALLOWED (the room has no
    cloud recording), RECORDING_ALREADY_ACTIVE or NO_ACTIVE_RECORDING."""
    meeting = state.meetings.get(meeting_id)
    _require_host(state, meeting)
    _require_live(state, meeting)
    active = _active_recording(state, meeting)
    if recording:
        room = state.rooms.get(meeting["room_id"])
        require(room["cloud_recording"], f"{room['name']} has no cloud recording", reason="RECORDING_NOT_ALLOWED",
                room_id=room["id"])
        require(active is None, f"{meeting['title']!r} is already being recorded ({active and active['id']})",
                reason="RECORDING_ALREADY_ACTIVE", error=Conflict)
        started = state.recordings.insert({"meeting_id": meeting_id, "started_at": iso_datetime(state.now()),
                                           "status": "recording", "stopped_at": None, "duration_seconds": None,
                                           "size_mb": None, "download_url": None})
        return _recording_view(state, started, meeting)
    require(active is not None, f"{meeting['title']!r} is not being recorded", reason="NO_ACTIVE_RECORDING")
    stopped = state.recordings.update(active["id"], **_finish_recording(active, state.now()))
    return _recording_view(state, stopped, meeting)


@server.tool(
    answers=("duration_seconds", "size_mb", "download_url"),
    read_only=True,
    reads=["recording", "meeting"],
    errors=["MEETING_NOT_FOUND", "NOT_HOST"],
    examples=[{}, lambda s: {"meeting_id": s.recordings.first(status="available")["meeting_id"]}],
    asks=("show my recordings", "list the cloud recordings of my meetings", "show the recordings of {meeting_id}",
          "find the download link for the recording of {meeting_id}"),
)
def list_recordings(
    state: MeetingState,
    meeting_id: Annotated[str | None, ref("meeting", "Only this meeting's recordings; all of yours when "
                                                    "omitted.")] = None,
) -> dict:
    """Cloud recordings of the meetings you host, newest first: meeting, start and stop time,
    status (recording or available), length, size and download link. Fails with
    MEETING_NOT_FOUND or NOT_HOST (recordings belong to the host)."""
    if meeting_id is not None:
        meeting = state.meetings.get(meeting_id)
        _require_host(state, meeting)
        meetings = [meeting]
    else:
        meetings = state.meetings.where(host_email=_me(state)["email"])
    found = [_recording_view(state, r, m) for m in meetings for r in state.recordings.where(meeting_id=m["id"])]
    found.sort(key=lambda r: (r["started_at"], r["id"]), reverse=True)
    return {"recordings": found, "total": len(found)}


@server.tool(
    idempotent=True,  # a repeat is refused with NOT_IN_WAITING_ROOM or WAITING_ROOM_EMPTY
    reads=["meeting", "participant", "room"],
    mutates=["participant"],
    errors=["MEETING_NOT_FOUND", "NOT_HOST", "MEETING_CANCELLED", "MEETING_NOT_LIVE", "PARTICIPANT_NOT_FOUND",
            "PARTICIPANT_NOT_IN_MEETING", "NOT_IN_WAITING_ROOM", "WAITING_ROOM_EMPTY", "ROOM_CAPACITY_EXCEEDED"],
    examples=[lambda s: (lambda mw: {"meeting_id": mw[0]["id"], "participant_id": mw[1]["id"]})(_with_waiting(s)),
              lambda s: {"meeting_id": _with_waiting(s)[0]["id"]}],
    asks=lambda a: (
        ("admit {participant_id} into {meeting_id}", "let {participant_id} in from the waiting room",
         "bring {participant_id} into {meeting_id}") if a.get("participant_id")
        else ("let everyone in the waiting room into {meeting_id}", "admit all the people waiting for {meeting_id}",
              "open the waiting room of {meeting_id} and let them all in")),
)
def admit_participant(
    state: MeetingState,
    meeting_id: MeetingId,
    participant_id: Annotated[str | None, ref("participant", "Id of the person to let in, from get_meeting's "
                                                             "waiting_room; omit to admit everyone waiting.")] = None,
) -> dict:
    """Let someone (or everyone) in from the waiting room of a live meeting you host. Returns who
    was admitted and how many people are inside. Fails with NOT_HOST, MEETING_NOT_LIVE,
    MEETING_CANCELLED, NOT_IN_WAITING_ROOM, WAITING_ROOM_EMPTY, PARTICIPANT_NOT_IN_MEETING or
    ROOM_CAPACITY_EXCEEDED (the room is full: remove someone first)."""
    meeting = state.meetings.get(meeting_id)
    _require_host(state, meeting)
    _require_live(state, meeting)
    if participant_id is None:
        waiting = state.participants.where(meeting_id=meeting_id, state="waiting")
        require(bool(waiting), "nobody is in the waiting room", reason="WAITING_ROOM_EMPTY")
    else:
        person = _meeting_participant(state, meeting, participant_id)
        require(person["state"] == "waiting", f"{person['name']} is not in the waiting room ({person['state']})",
                reason="NOT_IN_WAITING_ROOM", state=person["state"])
        waiting = [person]
    room = state.rooms.get(meeting["room_id"])
    _require_capacity(room, len(_inside(state, meeting_id)) + len(waiting))
    admitted = [state.participants.update(p["id"], state="in_meeting", joined_at=iso_datetime(state.now()))
                for p in waiting]
    return {"meeting_id": meeting_id, "admitted": admitted, "participant_count": len(_inside(state, meeting_id))}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with PARTICIPANT_ALREADY_REMOVED
    reads=["meeting", "participant"],
    mutates=["participant"],
    errors=["MEETING_NOT_FOUND", "NOT_HOST", "MEETING_CANCELLED", "MEETING_NOT_LIVE", "PARTICIPANT_NOT_FOUND",
            "PARTICIPANT_NOT_IN_MEETING", "CANNOT_REMOVE_HOST", "PARTICIPANT_ALREADY_REMOVED"],
    examples=[lambda s: (lambda p: {"meeting_id": p["meeting_id"], "participant_id": p["id"]})(_attendee_inside(s))],
    asks=("remove {participant_id} from {meeting_id}", "kick {participant_id} out of {meeting_id}",
          "turn {participant_id} away from {meeting_id}", "take {participant_id} out of the call"),
)
def remove_participant(state: MeetingState, meeting_id: MeetingId, participant_id: ParticipantId) -> dict:
    """Remove someone from a live meeting you host, or turn them away from its waiting room; they
    cannot rejoin this meeting. Returns the participant and how many people are inside. Fails
    with NOT_HOST, MEETING_NOT_LIVE, MEETING_CANCELLED, PARTICIPANT_NOT_IN_MEETING,
    CANNOT_REMOVE_HOST or PARTICIPANT_ALREADY_REMOVED."""
    meeting = state.meetings.get(meeting_id)
    _require_host(state, meeting)
    _require_live(state, meeting)
    person = _meeting_participant(state, meeting, participant_id)
    require(person["role"] != "host", "you cannot remove yourself, the host", reason="CANNOT_REMOVE_HOST",
            error=InvalidArgument)
    require(person["state"] != "removed", f"{person['name']} was already removed", reason="PARTICIPANT_ALREADY_REMOVED")
    removed = state.participants.update(participant_id, state="removed")
    return {"meeting_id": meeting_id, "removed": removed, "participant_count": len(_inside(state, meeting_id))}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
