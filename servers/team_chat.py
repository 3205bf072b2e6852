"""team_chat — a Slack-style team chat as one signed-in member sees it: workspaces and their
member directory, channels (public and private), membership, messages with threads, @mentions
and emoji reactions.

Members are keyed by their handle (``maria.silva``), the name written after ``@`` in a message,
so a handle is the user id every tool takes. The signed-in member is the var ``me``.

The rules a chat product enforces: you post, invite and react only in channels you have joined;
a private channel can only be joined by invitation; an archived channel is read-only; channel
names are unique in a workspace (archived ones included); #general can be neither left nor
archived; only its creator or a workspace admin may archive a channel. A message's ``@handle``
becomes a mention record for that member (``@channel`` and ``@here`` for every member), and
every handle must belong to the workspace.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from typing import Annotated, Any

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    Conflict,
    InvalidArgument,
    PermissionDenied,
    Record,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    paginate,
    ref,
    require,
)

GENERAL = "general"
BROADCASTS = frozenset({"channel", "here"})  # @channel and @here mention every member of the channel
MENTION = re.compile(r"(?<![\w.@])@([a-z0-9](?:[a-z0-9._-]*[a-z0-9])?)", re.IGNORECASE)
EMOJI = frozenset({
    "thumbsup", "thumbsdown", "heart", "joy", "tada", "eyes", "white_check_mark", "rocket", "fire", "pray",
    "raised_hands", "100", "thinking_face", "smile", "clap", "wave", "warning", "x", "coffee", "bug",
})
EMOJI_ALIASES = {"+1": "thumbsup", "-1": "thumbsdown", "like": "thumbsup", "check": "white_check_mark"}
HISTORY_DAYS = 5

TITLES = ("Software Engineer", "Product Manager", "Designer", "Data Analyst", "Engineering Manager",
          "QA Engineer", "Support Lead", "Marketing Lead", "DevOps Engineer", "Recruiter")
THINGS = ("onboarding flow", "billing page", "search service", "Q2 roadmap", "design tokens", "release notes",
          "status dashboard", "mobile build")
EVENTS = ("the all-hands", "sprint planning", "the design critique", "the retro", "demo day")
WHENS = ("tomorrow at 10", "Thursday afternoon", "after lunch", "next Monday", "at 3pm today")
LINES = (
    "Morning! Standup notes are in the doc.",
    "Has anyone looked at the {thing} yet?",
    "Reminder: {event} is {when}.",
    "Shipped the {thing} fix to staging.",
    "Can someone review my PR for the {thing}?",
    "Heads up: the {thing} will be down for maintenance {when}.",
    "Great work on the {thing}, everyone!",
    "Notes from {event} are pinned.",
)
ASKS = ("@{handle} could you take a look at the {thing}?", "Thanks @{handle} for sorting out the {thing}!",
        "@{handle} are you joining {event} {when}?")
REPLIES = ("On it.", "Looking now.", "Thanks!", "+1", "Done, take a look.", "Can we sync after lunch?", "Good catch.")

# Per workspace: your role, and channels as (name, private, archived, you are in it, created by
# you, topic). The layouts give every rule a case at any seed.
WORKSPACES = (
    ("Northwind Labs", "northwind-labs", "member", (
        (GENERAL, False, False, True, False, "Company-wide announcements and work-based matters"),
        ("random", False, False, True, False, "Non-work banter and water cooler conversation"),
        ("engineering", False, False, True, False, "Builds, deploys and code reviews"),
        ("design", False, False, False, False, "Design critiques and assets"),
        ("leadership", True, False, False, False, "Leadership team only"),
        ("launch-planning", True, False, True, False, "Spring launch: dates, owners, risks"),
        ("old-website", False, True, True, False, "The 2023 website rebuild (done)"),
        ("frontend-guild", False, False, True, True, "Frontend practices and show-and-tell"),
    )),
    ("Riverbend Makers", "riverbend-makers", "admin", (
        (GENERAL, False, False, True, False, "Everything makerspace"),
        ("announcements", False, False, True, False, "Opening hours, events and news"),
        ("woodshop", False, False, False, False, "Woodworking projects and tool bookings"),
        ("organizers", True, False, True, True, "Volunteer organizers"),
        ("workshop-2025", False, True, False, False, "Last year's workshop series"),
    )),
)


class ChatState(State):
    """The chat as the signed-in member (var ``me``, a handle) sees it."""

    users = Table("user", prefix="usr")  # keyed by handle
    workspaces = Table("workspace", prefix="ws")
    seats = Table("seat", prefix="seat", index=("workspace_id", "user_id"))  # who belongs to which workspace
    channels = Table("channel", prefix="ch", index=("workspace_id",))
    memberships = Table("membership", prefix="mem", index=("channel_id", "user_id"))
    messages = Table("message", prefix="msg", index=("channel_id", "thread_id"))
    mentions = Table("mention", prefix="mnt", index=("user_id",))


@attrs.frozen(kw_only=True)
class ChatOptions:
    """Seed size: how many colleagues share your workspaces (each workspace gets most of them)."""

    members: int = attrs.field(default=16, validator=attrs.validators.ge(8))


# -- shared rules ---------------------------------------------------------------------------------


def _me(state: ChatState) -> str:
    return state.get_var("me")


def _handle(user_id: str) -> str:
    return user_id.removeprefix("@").lower()


def _in_workspace(state: ChatState, workspace_id: str, handle: str) -> bool:
    return state.seats.first(workspace_id=workspace_id, user_id=handle) is not None


def _is_member(state: ChatState, channel_id: str, handle: str) -> bool:
    return state.memberships.first(channel_id=channel_id, user_id=handle) is not None


def _label(channel: Record) -> str:
    return f"#{channel['name']}"


def _require_not_archived(channel: Record) -> None:
    require(not channel["is_archived"], f"{_label(channel)} is archived and read-only", reason="CHANNEL_ARCHIVED")


def _require_member(state: ChatState, channel: Record) -> None:
    require(_is_member(state, channel["id"], _me(state)),
            f"you are not in {_label(channel)}; call join_channel first" if not channel["is_private"]
            else f"you are not in the private channel {_label(channel)}; a member must invite you",
            reason="NOT_A_MEMBER", channel_id=channel["id"])


def _require_workspace_members(state: ChatState, workspace_id: str, handles: list[str]) -> None:
    unknown = [h for h in handles if not _in_workspace(state, workspace_id, h)]
    require(not unknown, f"not members of this workspace: {', '.join('@' + h for h in unknown)}",
            reason="UNKNOWN_USER", error=InvalidArgument, unknown=unknown)


def _channel_view(state: ChatState, channel: Record) -> Record:
    member = _is_member(state, channel["id"], _me(state))
    count = len(state.memberships.where(channel_id=channel["id"]))
    if channel["is_private"] and not member:  # outsiders see that it exists, not what it is about
        keys = ("id", "workspace_id", "name", "is_private", "is_archived")
        return {**{k: channel[k] for k in keys}, "is_member": False, "member_count": count}
    return {**channel, "is_member": member, "member_count": count}


def _message_view(state: ChatState, message: Record) -> Record:
    author = state.users.get(message["author_id"])
    reactions = [{"emoji": r["emoji"], "count": len(r["users"]), "users": r["users"]} for r in message["reactions"]]
    return {**message, "author_name": author["name"], "reactions": reactions}


def _by_time(records: list[Record], newest_first: bool) -> list[Record]:
    return sorted(records, key=lambda r: (r["created_at"], r["id"]), reverse=newest_first)


def _parse_mentions(text: str) -> list[str]:
    """The handles written as @handle, in order, each once."""
    seen: list[str] = []
    for match in MENTION.finditer(text):
        handle = match.group(1).lower()
        if handle not in seen:
            seen.append(handle)
    return seen


def _emoji_name(emoji: str) -> str:
    name = emoji.strip(":").lower()
    name = EMOJI_ALIASES.get(name, name)
    require(name in EMOJI, f"unknown emoji :{name}:; use one of {', '.join(sorted(EMOJI))}", reason="UNKNOWN_EMOJI",
            error=InvalidArgument)
    return name


def _thread_root(state: ChatState, channel: Record, thread_id: str) -> Record:
    """The top-level message of a thread; a reply's id leads to its thread's root."""
    root = state.messages.get(thread_id)
    require(root["channel_id"] == channel["id"], f"message {thread_id} is not in {_label(channel)}",
            reason="THREAD_NOT_IN_CHANNEL", error=InvalidArgument, channel_id=root["channel_id"])
    return state.messages.get(root["thread_id"]) if root["thread_id"] else root


def _store_message(state: ChatState, channel: Record, author: str, text: str, when: dt.datetime,
                   root: Record | None = None, mentioned: list[str] = ()) -> Record:
    """One message, the reply count of its thread's root, and a mention record per mentioned member."""
    message = state.messages.insert({
        "channel_id": channel["id"], "workspace_id": channel["workspace_id"], "author_id": author, "text": text,
        "thread_id": None if root is None else root["id"], "reply_count": 0, "last_reply_at": None,
        "reactions": [], "created_at": iso_datetime(when),
    })
    if root is not None:
        state.messages.update(root["id"], reply_count=root["reply_count"] + 1, last_reply_at=iso_datetime(when))
    for handle in mentioned:
        state.mentions.insert({
            "user_id": handle, "message_id": message["id"], "channel_id": channel["id"],
            "workspace_id": channel["workspace_id"], "author_id": author, "created_at": iso_datetime(when),
        })
    return message


def _mention_targets(state: ChatState, channel: Record, author: str, handles: list[str]) -> list[str]:
    """Who gets a mention record: named members and, for @channel/@here, every member but the author."""
    targets: list[str] = []
    for handle in handles:
        if handle in BROADCASTS:
            targets += [m["user_id"] for m in state.memberships.where(channel_id=channel["id"])]
        else:
            targets.append(handle)
    return [h for h in dict.fromkeys(targets) if h != author]


# -- seed -----------------------------------------------------------------------------------------


def build_chat(rng: random.Random, options: ChatOptions) -> ChatState:
    """You and your colleagues in two workspaces (a member in one, an admin in the other), their
    channels and memberships, and five days of messages with threads, mentions and reactions."""
    state = ChatState(salt=f"{rng.getrandbits(64):016x}")
    taken: set[str] = set()
    me = _seed_user(state, rng, taken)
    state.set_var("me", me)
    colleagues = [_seed_user(state, rng, taken) for _ in range(options.members)]
    # Overlapping rosters: some colleagues are in one workspace only, so a handle can be unknown.
    cut = len(colleagues) // 3
    rosters = (colleagues[: len(colleagues) - cut], colleagues[cut:])
    for (name, domain, role, layout), roster in zip(WORKSPACES, rosters, strict=True):
        _seed_workspace(state, rng, me, name, domain, role, layout, roster)
    return state


def _seed_user(state: ChatState, rng: random.Random, taken: set[str]) -> str:
    first, last = fake.person(rng)
    base = f"{first}.{last}".lower()
    handle = next(h for h in (base if n == 0 else f"{base}{n + 1}" for n in range(len(taken) + 1)) if h not in taken)
    taken.add(handle)
    state.users.insert({"id": handle, "name": f"{first} {last}", "title": rng.choice(TITLES),
                        "timezone": rng.choice(("America/New_York", "America/Chicago", "America/Los_Angeles",
                                                "Europe/London"))})
    return handle


def _seed_workspace(state: ChatState, rng: random.Random, me: str, name: str, domain: str, role: str,
                    layout: tuple, roster: list[str]) -> None:
    workspace = state.workspaces.insert({"name": name, "domain": f"{domain}.chat.example.com",
                                         "created_on": "2021-04-12"})
    admin = roster[0] if role == "member" else me
    for handle in [me, *roster]:
        seat_role = "admin" if handle == admin else "member"
        state.seats.insert({"workspace_id": workspace["id"], "user_id": handle, "role": seat_role,
                            "title": state.users.get(handle)["title"]})
    start = state.now() - dt.timedelta(days=HISTORY_DAYS)
    for channel_name, private, archived, joined, mine, topic in layout:
        creator = me if mine else admin if channel_name == GENERAL else rng.choice(roster)
        everyone = channel_name == GENERAL
        others = roster if everyone else rng.sample(roster, k=max(3, len(roster) // 2))
        members = [m for m in dict.fromkeys([creator, *others]) if m != me] + ([me] if joined else [])
        channel = state.channels.insert({
            "workspace_id": workspace["id"], "name": channel_name, "topic": topic, "is_private": private,
            "is_archived": archived, "is_general": everyone, "created_by": creator,
            "created_at": iso_datetime(start - dt.timedelta(days=rng.randint(30, 600))),
            "archived_at": iso_datetime(start - dt.timedelta(days=rng.randint(1, 20))) if archived else None,
        })
        for handle in members:
            state.memberships.insert({"channel_id": channel["id"], "user_id": handle,
                                      "joined_at": channel["created_at"]})
        _seed_messages(state, rng, channel, members, me, start)


def _seed_messages(state: ChatState, rng: random.Random, channel: Record, members: list[str], me: str,
                   start: dt.datetime) -> None:
    """A few days of chatter in clock order: top-level messages, some asking a member by @handle
    (you, in the channels you are in), replies in threads and reactions."""
    speakers = [m for m in members if m != me] or members
    count = rng.randint(5, 8) + len(members) // 4  # busier channels talk more
    step = (state.now() - dt.timedelta(hours=2) - start) / count
    asked_me = False
    for n in range(count):
        when = (start + step * n + dt.timedelta(minutes=rng.randint(0, 30))).replace(second=0, microsecond=0)
        author = rng.choice(speakers)
        fill = {"thing": rng.choice(THINGS), "event": rng.choice(EVENTS), "when": rng.choice(WHENS)}
        mentioned: list[str] = []
        if me in members and not asked_me and n >= 2:
            asked_me, target = True, me
        else:
            target = rng.choice(members) if rng.random() < 0.3 else None
        if target is not None and target != author:
            mentioned = [target]
            text = rng.choice(ASKS).format(handle=target, **fill)
        else:
            text = rng.choice(LINES).format(**fill)
        root = _store_message(state, channel, author, text, when, mentioned=mentioned)
        for k in range(rng.choice((0, 0, 1, 2, 3))):
            reply_author = me if k == 0 and target == me else rng.choice(members)
            _store_message(state, channel, reply_author, rng.choice(REPLIES),
                           when + dt.timedelta(minutes=3 + 4 * k), root=state.messages.get(root["id"]))
        reactors = rng.sample(members, k=min(len(members), rng.randint(0, 3)))
        if reactors:
            emoji = rng.sample(sorted(EMOJI), k=rng.randint(1, 2))
            state.messages.update(root["id"], reactions=[{"emoji": e, "users": reactors} for e in emoji])


# -- examples: arguments valid on a fresh seed of any size ------------------------------------------


def _workspace(s: ChatState, role: str = "member") -> Record:
    """Your first workspace where your seat has this role."""
    return s.workspaces.get(s.seats.first(user_id=_me(s), role=role)["workspace_id"])


def _channel(s: ChatState, *, joined: bool, private: bool = False, archived: bool = False) -> Record:
    me = _me(s)
    for channel in s.channels.where(lambda c: not c["is_general"], is_private=private, is_archived=archived):
        if _is_member(s, channel["id"], me) is joined:
            return channel
    raise LookupError("no such channel")


def _invitee(s: ChatState, channel: Record) -> str:
    """A workspace member who is not in the channel yet."""
    for seat in s.seats.where(workspace_id=channel["workspace_id"]):
        if not _is_member(s, channel["id"], seat["user_id"]):
            return seat["user_id"]
    raise LookupError("everyone is in the channel")


def _colleague_in(s: ChatState, channel: Record) -> str:
    return next(m["user_id"] for m in s.memberships.where(channel_id=channel["id"]) if m["user_id"] != _me(s))


def _top_message(s: ChatState, channel: Record) -> Record:
    return s.messages.first(channel_id=channel["id"], thread_id=None)


def _thread(s: ChatState) -> Record:
    """The first message with replies in a channel you are in."""
    me = _me(s)
    return s.messages.first(lambda m: m["reply_count"] > 0 and _is_member(s, m["channel_id"], me))


def _reacted_message(s: ChatState) -> tuple[Record, str]:
    """A message you reacted to (seeded), or one you react to now."""
    me = _me(s)
    for channel in s.channels.where(is_archived=False):
        if not _is_member(s, channel["id"], me):
            continue
        for message in s.messages.where(channel_id=channel["id"]):
            for reaction in message["reactions"]:
                if me in reaction["users"]:
                    return message, reaction["emoji"]
    message = _top_message(s, _channel(s, joined=True))
    emoji = next(e for e in sorted(EMOJI) if all(r["emoji"] != e for r in message["reactions"]))
    react_to_message(s, message["id"], emoji)
    return message, emoji


def _unreacted_emoji(s: ChatState, message: Record) -> str:
    me = _me(s)
    return next(e for e in sorted(EMOJI) if not any(r["emoji"] == e and me in r["users"] for r in message["reactions"]))


# -- how members ask, and what they choose ----------------------------------------------------------

NEW_CHANNELS = (  # (name, topic): a new channel's topic says what its name does
    ("q3-roadmap", "Planning for the next quarter"), ("offsite-2026", "Offsite logistics"),
    ("customer-feedback", "Feedback from customer calls"), ("incident-review", "Postmortems and follow-ups"),
    ("hiring-2026", "Interview loops and scorecards"), ("mobile-app", "Bugs and releases of the mobile app"),
    ("data-platform", "Pipelines, warehouse and dashboards"), ("support-escalations", "Tickets that need an engineer"),
    ("book-club", "What we're reading this month"), ("team-lunch", "Weekly lunch plans"),
    ("release-train", "Release dates, owners and risks"), ("security-alerts", "Alerts from the security scanners"),
)


def _channel_asks(a: Any) -> tuple[str, ...]:
    if a.get("joined_only"):
        found = ("list the channels I'm in on {workspace_id}", "show me which channels of {workspace_id} I've joined",
                 "browse my channels in {workspace_id}")
    else:
        found = ("list the channels in {workspace_id}", "show me what channels {workspace_id} has",
                 "browse the channels of {workspace_id}")
    if a.get("include_archived"):
        found = tuple(f"{t}{tail}" for t, tail in zip(found, (", archived ones included",
                                                               ", including the archived ones",
                                                               " and include archived channels"), strict=True))
    return found


def _chat_line(rng: random.Random, s: Any) -> str:
    return rng.choice(LINES).format(thing=rng.choice(THINGS), event=rng.choice(EVENTS), when=rng.choice(WHENS))


# -- the server and its tools ----------------------------------------------------------------------

server = Server(
    "team_chat",
    domain="social",
    description="A team chat for one signed-in member: workspaces and their people, public and private channels, "
    "joining, leaving, inviting and archiving, messages and threads, @mentions and emoji reactions.",
    state=ChatState,
    seed=build_chat,
    options=ChatOptions,
)

WorkspaceId = Annotated[str, ref("workspace", "Id of the workspace (ws_...), from list_workspaces.")]
ChannelId = Annotated[str, ref("channel", "Id of the channel (ch_...), from list_channels or create_channel.")]
MessageId = Annotated[str, ref("message", "Id of a message (msg_...), from list_messages or post_message.")]
UserIds = Annotated[list[str], ref("user", "Handles of workspace members (e.g. maria.silva), from list_workspaces.",
                                   min_length=1, max_length=20)]
Limit = Annotated[int, Field(ge=1, le=100, description="Page size: how many results to return (1-100).")]
Offset = Annotated[int, Field(ge=0, description="How many results to skip; pass next_offset from the previous page.")]
CHANNEL_NAME = r"^#?[a-z0-9][a-z0-9_-]{0,79}$"


@server.tool(
    answers=("your_role", "member_count"),
    read_only=True,
    reads=["workspace", "seat", "user", "channel"],
    examples=[{}],
    asks=("list my workspaces", "show me the workspaces I'm in and who's in them",
          "show me who's in each of my workspaces", "give me the member directory of my workspaces"),
)
def list_workspaces(state: ChatState) -> dict:
    """The workspaces you belong to: id, name, domain, your role (admin or member), channel count
    and the member directory (handle, name, title, role). Handles are the user ids other tools
    take and what you write after @ to mention someone."""
    me = _me(state)
    out = []
    for seat in state.seats.where(user_id=me):
        workspace = state.workspaces.get(seat["workspace_id"])
        people = [{"user_id": s["user_id"], "name": state.users.get(s["user_id"])["name"], "title": s["title"],
                   "role": s["role"]} for s in state.seats.where(workspace_id=workspace["id"])]
        out.append({**workspace, "your_role": seat["role"], "channel_count": len(
            state.channels.where(workspace_id=workspace["id"])), "member_count": len(people), "members": people})
    return {"you": me, "workspaces": out}


@server.tool(
    answers=("topic", "member_count", "is_member"),
    read_only=True,
    reads=["workspace", "channel", "membership"],
    errors=["WORKSPACE_NOT_FOUND"],
    examples=[lambda s: {"workspace_id": _workspace(s)["id"]},
              lambda s: {"workspace_id": _workspace(s, "admin")["id"], "include_archived": True, "joined_only": True}],
    asks=_channel_asks,
)
def list_channels(
    state: ChatState,
    workspace_id: WorkspaceId,
    include_archived: Annotated[bool, Field(description="Also list archived (read-only) channels.")] = False,
    joined_only: Annotated[bool, Field(description="Only channels you are a member of.")] = False,
) -> dict:
    """The channels of a workspace, by name: id, topic, private or public, archived, member count
    and whether you are in it. Private channels you are not in show only their name. Fails with
    WORKSPACE_NOT_FOUND."""
    state.workspaces.get(workspace_id)
    channels = [_channel_view(state, c) for c in state.channels.where(workspace_id=workspace_id)
                if include_archived or not c["is_archived"]]
    channels = [c for c in channels if c["is_member"] or not joined_only]
    return {"workspace_id": workspace_id, "channels": sorted(channels, key=lambda c: c["name"])}


@server.tool(
    idempotent=True,  # the same name again is refused with CHANNEL_NAME_TAKEN
    reads=["workspace", "seat", "channel"],
    produces=["channel", "membership"],
    errors=["WORKSPACE_NOT_FOUND", "CHANNEL_NAME_TAKEN", "UNKNOWN_USER"],
    examples=[lambda s: {"workspace_id": _workspace(s)["id"], "name": "q3-roadmap"},
              lambda s: (lambda ws: {"workspace_id": ws["id"], "name": "#offsite-2026", "is_private": True,
                                     "topic": "Offsite logistics",
                                     "user_ids": [s.seats.first(lambda x: x["user_id"] != _me(s),
                                                                workspace_id=ws["id"])["user_id"]]})(_workspace(s))],
    asks=lambda a: (
        ("create a private channel called {name} in {workspace_id}", "set up an invite-only channel {name} with "
         "{user_ids}", 'make a private channel {name} about "{topic}" and add {user_ids}') if a.get("is_private")
        else ("create a channel called {name} in {workspace_id}",
              'set up a new public channel {name} with the topic "{topic}"',
              "make a channel named {name} and add {user_ids}",
              'open a channel {name} in {workspace_id} for "{topic}"')),
    values={"name": lambda rng, s: rng.choice(NEW_CHANNELS)[0], "topic": lambda rng, s: rng.choice(NEW_CHANNELS)[1]},
)
def create_channel(
    state: ChatState,
    workspace_id: WorkspaceId,
    name: Annotated[str, Field(pattern=CHANNEL_NAME, description="Channel name: lowercase letters, digits, - and _, "
                                                                 "no spaces, up to 80 characters (a leading # is "
                                                                 "ignored).")],
    is_private: Annotated[bool, Field(description="true: only invited members can see and join it.")] = False,
    topic: Annotated[str | None, Field(max_length=250, description="What the channel is for.")] = None,
    user_ids: Annotated[list[str] | None, ref("user", "Handles of workspace members to add right away.",
                                              max_length=20)] = None,
) -> dict:
    """Create a public or private channel; you join it, with the members you list. Returns the
    channel. Fails with CHANNEL_NAME_TAKEN (names are unique in a workspace, archived channels
    included) or UNKNOWN_USER (a handle that is not in the workspace)."""
    state.workspaces.get(workspace_id)
    name = name.removeprefix("#")
    existing = state.channels.first(workspace_id=workspace_id, name=name)
    if existing is not None:
        raise Conflict(f"#{name} already exists in this workspace" + (" (archived)" if existing["is_archived"] else ""),
                       reason="CHANNEL_NAME_TAKEN", channel_id=existing["id"], is_archived=existing["is_archived"])
    me = _me(state)
    invited = [h for h in dict.fromkeys(_handle(u) for u in user_ids or []) if h != me]
    _require_workspace_members(state, workspace_id, invited)
    channel = state.channels.insert({
        "workspace_id": workspace_id, "name": name, "topic": topic or "", "is_private": is_private,
        "is_archived": False, "is_general": False, "created_by": me, "created_at": iso_datetime(state.now()),
        "archived_at": None,
    })
    for handle in [me, *invited]:
        state.memberships.insert({"channel_id": channel["id"], "user_id": handle,
                                  "joined_at": iso_datetime(state.now())})
    return _channel_view(state, channel)


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_MEMBER
    reads=["channel", "membership"],
    produces=["membership"],
    errors=["CHANNEL_NOT_FOUND", "CHANNEL_ARCHIVED", "ALREADY_MEMBER", "PRIVATE_CHANNEL"],
    examples=[lambda s: {"channel_id": _channel(s, joined=False)["id"]}],
    asks=("join {channel_id}", "add me to {channel_id}", "hop into {channel_id}", "sign me up for {channel_id}"),
)
def join_channel(state: ChatState, channel_id: ChannelId) -> dict:
    """Join a public channel. Returns the channel. Fails with PRIVATE_CHANNEL (a private channel
    needs an invitation from one of its members), CHANNEL_ARCHIVED or ALREADY_MEMBER."""
    channel = state.channels.get(channel_id)
    _require_not_archived(channel)
    me = _me(state)
    require(not _is_member(state, channel_id, me), f"you are already in {_label(channel)}", reason="ALREADY_MEMBER",
            error=Conflict)
    require(not channel["is_private"], f"{_label(channel)} is private; ask a member to invite you",
            reason="PRIVATE_CHANNEL", error=PermissionDenied)
    state.memberships.insert({"channel_id": channel_id, "user_id": me, "joined_at": iso_datetime(state.now())})
    return _channel_view(state, channel)


@server.tool(
    destructive=True,  # leaving a private channel needs a new invitation to come back
    idempotent=True,  # a repeat is refused with NOT_A_MEMBER
    reads=["channel", "membership"],
    mutates=["membership"],
    errors=["CHANNEL_NOT_FOUND", "NOT_A_MEMBER", "CANNOT_LEAVE_GENERAL"],
    examples=[lambda s: {"channel_id": _channel(s, joined=True)["id"]}],
    asks=("leave {channel_id}", "take me out of {channel_id}", "get me out of {channel_id}",
          "remove myself from {channel_id}"),
)
def leave_channel(state: ChatState, channel_id: ChannelId) -> dict:
    """Leave a channel. Returns the channel id and left: true. Fails with NOT_A_MEMBER or
    CANNOT_LEAVE_GENERAL (everyone stays in #general)."""
    channel = state.channels.get(channel_id)
    require(not channel["is_general"], "nobody can leave #general", reason="CANNOT_LEAVE_GENERAL")
    membership = state.memberships.first(channel_id=channel_id, user_id=_me(state))
    require(membership is not None, f"you are not in {_label(channel)}", reason="NOT_A_MEMBER")
    state.memberships.delete(membership["id"])
    return {"channel_id": channel_id, "name": channel["name"], "left": True}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with CHANNEL_ARCHIVED
    reads=["channel", "membership", "seat"],
    mutates=["channel"],
    errors=["CHANNEL_NOT_FOUND", "CHANNEL_ARCHIVED", "CANNOT_ARCHIVE_GENERAL", "NOT_A_MEMBER", "ARCHIVE_NOT_ALLOWED"],
    examples=[lambda s: {"channel_id": s.channels.first(created_by=_me(s), is_archived=False)["id"]}],
    asks=("archive {channel_id}", "make {channel_id} read-only by archiving it",
          "close down {channel_id} but keep its history", "shut {channel_id} down"),
)
def archive_channel(state: ChatState, channel_id: ChannelId) -> dict:
    """Archive a channel: it becomes read-only (history stays searchable, nobody can post, join
    or react) and its name stays taken. Returns the channel. Only the channel's creator or a
    workspace admin may archive it. Fails with CHANNEL_ARCHIVED, CANNOT_ARCHIVE_GENERAL,
    NOT_A_MEMBER or ARCHIVE_NOT_ALLOWED."""
    channel = state.channels.get(channel_id)
    _require_not_archived(channel)
    require(not channel["is_general"], "#general cannot be archived", reason="CANNOT_ARCHIVE_GENERAL")
    _require_member(state, channel)
    me = _me(state)
    seat = state.seats.first(workspace_id=channel["workspace_id"], user_id=me)
    require(channel["created_by"] == me or seat["role"] == "admin",
            f"only @{channel['created_by']} (who created {_label(channel)}) or a workspace admin can archive it",
            reason="ARCHIVE_NOT_ALLOWED", error=PermissionDenied, created_by=channel["created_by"])
    channel = state.channels.update(channel_id, is_archived=True, archived_at=iso_datetime(state.now()))
    return _channel_view(state, channel)


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_MEMBER
    reads=["channel", "membership", "seat"],
    produces=["membership"],
    errors=["CHANNEL_NOT_FOUND", "CHANNEL_ARCHIVED", "NOT_A_MEMBER", "UNKNOWN_USER", "ALREADY_MEMBER"],
    examples=[lambda s: (lambda c: {"channel_id": c["id"], "user_ids": [_invitee(s, c)]})(
        _channel(s, joined=True, private=True))],
    asks=("invite {user_ids} to {channel_id}", "add {user_ids} to {channel_id}", "bring {user_ids} into {channel_id}",
          "get {user_ids} into {channel_id}"),
)
def invite_to_channel(state: ChatState, channel_id: ChannelId, user_ids: UserIds) -> dict:
    """Add workspace members to a channel you are in (the only way into a private channel).
    Returns the channel and the handles added. Fails with NOT_A_MEMBER, CHANNEL_ARCHIVED,
    UNKNOWN_USER (not in this workspace) or ALREADY_MEMBER (names who already are)."""
    channel = state.channels.get(channel_id)
    _require_not_archived(channel)
    _require_member(state, channel)
    handles = list(dict.fromkeys(_handle(u) for u in user_ids))
    _require_workspace_members(state, channel["workspace_id"], handles)
    already = [h for h in handles if _is_member(state, channel_id, h)]
    require(not already, f"already in {_label(channel)}: {', '.join('@' + h for h in already)}",
            reason="ALREADY_MEMBER", error=Conflict, already=already)
    for handle in handles:
        state.memberships.insert({"channel_id": channel_id, "user_id": handle, "joined_at": iso_datetime(state.now())})
    return {"channel": _channel_view(state, channel), "added": handles}


@server.tool(
    reads=["channel", "membership", "seat", "message"],
    produces=["message", "mention"],
    mutates=["message"],
    errors=["CHANNEL_NOT_FOUND", "CHANNEL_ARCHIVED", "NOT_A_MEMBER", "MESSAGE_NOT_FOUND", "THREAD_NOT_IN_CHANNEL",
            "EMPTY_MESSAGE", "UNKNOWN_USER", "USER_NOT_IN_CHANNEL"],
    examples=[
        lambda s: (lambda c: {"channel_id": c["id"], "text": f"@{_colleague_in(s, c)} the release notes are ready "
                                                             "for review."})(_channel(s, joined=True, private=True)),
        lambda s: (lambda c: {"channel_id": c["id"], "thread_id": _top_message(s, c)["id"], "text": "On it!"})(
            _channel(s, joined=True)),
    ],
    asks=lambda a: (
        ('reply "{text}" in the thread of {thread_id}', 'answer {thread_id} in its thread with "{text}"',
         'post "{text}" as a thread reply to {thread_id} in {channel_id}') if a.get("thread_id")
        else ('post "{text}" in {channel_id}', 'send "{text}" to {channel_id}', 'write "{text}" in {channel_id}',
              'drop a message in {channel_id} saying "{text}"')),
    values={"text": _chat_line},
)
def post_message(
    state: ChatState,
    channel_id: ChannelId,
    text: Annotated[str, Field(min_length=1, max_length=4000, description="The message. Write @handle to mention a "
                                                                          "member, @channel or @here for everyone "
                                                                          "in the channel.")],
    thread_id: Annotated[str | None, ref("message", "To reply in a thread: the id of the thread's first message "
                                                    "(a reply's id works too). Omit to post in the channel.")] = None,
) -> dict:
    """Post a message in a channel you are in, or reply in a thread with thread_id. Each @handle
    becomes a mention for that member. Returns the message and the handles mentioned. Fails with
    NOT_A_MEMBER (join_channel first), CHANNEL_ARCHIVED, EMPTY_MESSAGE, UNKNOWN_USER (an @handle
    not in the workspace), USER_NOT_IN_CHANNEL (an @handle outside this private channel: invite
    them first), MESSAGE_NOT_FOUND or THREAD_NOT_IN_CHANNEL."""
    channel = state.channels.get(channel_id)
    _require_not_archived(channel)
    _require_member(state, channel)
    root = None if thread_id is None else _thread_root(state, channel, thread_id)
    text = text.strip()
    require(bool(text), "the message is empty", reason="EMPTY_MESSAGE", error=InvalidArgument)
    named = [h for h in _parse_mentions(text) if h not in BROADCASTS]
    _require_workspace_members(state, channel["workspace_id"], named)
    if channel["is_private"]:
        outside = [h for h in named if not _is_member(state, channel_id, h)]
        require(not outside, f"not in {_label(channel)}: {', '.join('@' + h for h in outside)}; invite_to_channel "
                f"first", reason="USER_NOT_IN_CHANNEL", outside=outside)
    me = _me(state)
    mentioned = _mention_targets(state, channel, me, _parse_mentions(text))
    message = _store_message(state, channel, me, text, state.now(), root=root, mentioned=mentioned)
    return {"message": _message_view(state, message), "mentioned": mentioned}


@server.tool(
    answers=("author_name", "text"),
    read_only=True,
    reads=["channel", "membership", "message", "user"],
    errors=["CHANNEL_NOT_FOUND", "PRIVATE_CHANNEL", "MESSAGE_NOT_FOUND", "THREAD_NOT_IN_CHANNEL"],
    examples=[
        lambda s: {"channel_id": _channel(s, joined=True)["id"], "limit": 5},
        lambda s: (lambda m: {"channel_id": m["channel_id"], "thread_id": m["id"]})(_thread(s)),
    ],
    asks=lambda a: (
        ("show the replies in the thread of {thread_id}", "open the thread of {thread_id}",
         "read me the replies to {thread_id} in {channel_id}") if a.get("thread_id")
        else ("show the latest messages in {channel_id}", "catch me up on {channel_id}",
              "read me the last {limit} messages in {channel_id}", "show me what's been said in {channel_id}",
              "show {limit} older messages in {channel_id}, skipping the first {offset}")),
)
def list_messages(
    state: ChatState,
    channel_id: ChannelId,
    thread_id: Annotated[str | None, ref("message", "Id of a thread's first message: list that thread's replies "
                                                    "instead of the channel.")] = None,
    limit: Limit = 20,
    offset: Offset = 0,
) -> dict:
    """A channel's history, newest first (top-level messages with their reply counts and
    reactions), or with thread_id one thread: its first message and the replies, oldest first.
    Returns a page, the total and next_offset. Public channels can be read without joining.
    Fails with PRIVATE_CHANNEL (you are not in it), MESSAGE_NOT_FOUND or THREAD_NOT_IN_CHANNEL."""
    channel = state.channels.get(channel_id)
    require(not channel["is_private"] or _is_member(state, channel_id, _me(state)),
            f"{_label(channel)} is private and you are not in it", reason="PRIVATE_CHANNEL", error=PermissionDenied)
    if thread_id is None:
        top = _by_time(state.messages.where(channel_id=channel_id, thread_id=None), newest_first=True)
        page = paginate(top, limit=limit, offset=offset, key="messages")
        return {"channel_id": channel_id, "name": channel["name"], **page,
                "messages": [_message_view(state, m) for m in page["messages"]]}
    root = _thread_root(state, channel, thread_id)
    page = paginate(_by_time(state.messages.where(thread_id=root["id"]), newest_first=False), limit=limit,
                    offset=offset, key="replies")
    return {"channel_id": channel_id, "thread": _message_view(state, root), **page,
            "replies": [_message_view(state, m) for m in page["replies"]]}


@server.tool(
    answers=("author_name", "channel_name", "text"),
    read_only=True,
    reads=["mention", "message", "channel", "user"],
    errors=["WORKSPACE_NOT_FOUND"],
    examples=[{}, lambda s: {"workspace_id": _workspace(s)["id"], "limit": 3}],
    asks=("show my mentions", "find the messages where someone mentioned me", "list the mentions of me in "
          "{workspace_id}", "show my last {limit} mentions", "check if anyone tagged me in {workspace_id}"),
)
def list_my_mentions(
    state: ChatState,
    workspace_id: Annotated[str | None, ref("workspace", "Only mentions in this workspace; all when omitted.")] = None,
    limit: Limit = 20,
    offset: Offset = 0,
) -> dict:
    """Messages that mention you (by @handle, @channel or @here), newest first: the message id
    and text, its channel, thread and author. Returns a page, the total and next_offset. Fails
    with WORKSPACE_NOT_FOUND."""
    filters = {}
    if workspace_id is not None:
        state.workspaces.get(workspace_id)
        filters["workspace_id"] = workspace_id
    found = _by_time(state.mentions.where(user_id=_me(state), **filters), newest_first=True)
    page = paginate(found, limit=limit, offset=offset, key="mentions")
    out = []
    for mention in page["mentions"]:
        message = state.messages.get(mention["message_id"])
        out.append({"mention_id": mention["id"], "message_id": message["id"], "text": message["text"],
                    "channel_id": mention["channel_id"], "channel_name": state.channels.get(mention["channel_id"])[
                        "name"], "workspace_id": mention["workspace_id"], "thread_id": message["thread_id"],
                    "author_id": mention["author_id"], "author_name": state.users.get(mention["author_id"])["name"],
                    "created_at": mention["created_at"]})
    return {**page, "mentions": out}


@server.tool(
    destructive=True,  # remove=true takes a reaction away
    idempotent=True,  # a repeat is refused with ALREADY_REACTED or REACTION_NOT_FOUND
    reads=["message", "channel", "membership"],
    mutates=["message"],
    errors=["MESSAGE_NOT_FOUND", "UNKNOWN_EMOJI", "CHANNEL_ARCHIVED", "NOT_A_MEMBER", "ALREADY_REACTED",
            "REACTION_NOT_FOUND"],
    examples=[
        lambda s: (lambda m: {"message_id": m["id"], "emoji": _unreacted_emoji(s, m)})(
            _top_message(s, _channel(s, joined=True))),
        lambda s: (lambda me: {"message_id": me[0]["id"], "emoji": me[1], "remove": True})(_reacted_message(s)),
    ],
    asks=lambda a: (
        ("remove my {emoji} reaction from {message_id}", "take my {emoji} reaction off {message_id}",
         "undo the {emoji} I put on {message_id}") if a.get("remove")
        else ("react to {message_id} with {emoji}", "add a {emoji} reaction to {message_id}",
              "put a {emoji} on {message_id}", "drop a {emoji} emoji on {message_id}")),
)
def react_to_message(
    state: ChatState,
    message_id: MessageId,
    emoji: Annotated[str, Field(pattern=r"^:?[a-z0-9_+-]{1,40}:?$", description="Emoji name such as thumbsup, "
                                                                               "eyes or tada (colons optional).")],
    remove: Annotated[bool, Field(description="true takes your reaction away instead of adding it.")] = False,
) -> dict:
    """Add your emoji reaction to a message in a channel you are in, or take it away with
    remove=true. Returns the message's reactions. Fails with UNKNOWN_EMOJI, NOT_A_MEMBER,
    CHANNEL_ARCHIVED, ALREADY_REACTED (you already reacted with that emoji) or REACTION_NOT_FOUND
    (nothing of yours to remove)."""
    message = state.messages.get(message_id)
    name = _emoji_name(emoji)
    channel = state.channels.get(message["channel_id"])
    _require_not_archived(channel)
    _require_member(state, channel)
    me = _me(state)
    reactions = [dict(r) for r in message["reactions"]]
    current = next((r for r in reactions if r["emoji"] == name), None)
    mine = current is not None and me in current["users"]
    if remove:
        require(mine, f"you have not reacted with :{name}:", reason="REACTION_NOT_FOUND")
        current["users"] = [u for u in current["users"] if u != me]
        reactions = [r for r in reactions if r["users"]]
    else:
        require(not mine, f"you already reacted with :{name}:", reason="ALREADY_REACTED", error=Conflict)
        if current is None:
            reactions.append({"emoji": name, "users": [me]})
        else:
            current["users"] = [*current["users"], me]
    message = state.messages.update(message_id, reactions=reactions)
    return {"message_id": message_id, "reactions": _message_view(state, message)["reactions"]}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
