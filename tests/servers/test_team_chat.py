"""The team_chat server's own rules: workspaces and channels, membership and invitations, private
and archived channels, messages, threads, mentions and reactions, with typed failures. What every
server guarantees is the conformance kit's (tests/servers/test_conformance.py).
"""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import team_chat
from prove_servers.team_chat import ChatOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def me(h) -> str:
    return h.state.get_var("me")


def my_workspace(h, role: str = "member") -> dict:
    """Your first workspace where your seat has this role."""
    return h.state.workspaces.get(h.find("seats", user_id=me(h), role=role)["workspace_id"])


def is_member(h, channel_id: str, user_id: str) -> bool:
    return h.state.memberships.first(channel_id=channel_id, user_id=user_id) is not None


def channel(h, name: str, role: str = "member") -> str:
    """The id of a seeded channel, in the workspace where your role is ``role``."""
    return h.find("channels", workspace_id=my_workspace(h, role)["id"], name=name)["id"]


def channel_where(h, *, joined: bool, private: bool = False, archived: bool = False) -> dict | None:
    """A channel other than #general that you are in (or not), private or not, archived or not."""
    return next((c for c in h.where("channels", lambda c: not c["is_general"], is_private=private,
                                    is_archived=archived) if is_member(h, c["id"], me(h)) is joined), None)


def member_of(h, channel_id: str) -> str:
    return next(m["user_id"] for m in h.where("memberships", channel_id=channel_id) if m["user_id"] != me(h))


def outsider(h, channel_id: str) -> str:
    """A workspace member who is not in the channel yet."""
    seats = h.where("seats", workspace_id=h.state.channels.get(channel_id)["workspace_id"])
    return next(s["user_id"] for s in seats if not is_member(h, channel_id, s["user_id"]))


def top_message(h, channel_id: str) -> str:
    return h.ok("list_messages", channel_id=channel_id, limit=1)["messages"][0]["id"]


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "list_workspaces", "list_channels", "create_channel", "join_channel", "leave_channel", "archive_channel",
        "invite_to_channel", "post_message", "list_messages", "list_my_mentions", "react_to_message",
    }
    assert servers_registered_by(team_chat) == [server] and (server.name, server.domain) == ("team_chat", "social")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_workspaces", "list_channels", "list_messages", "list_my_mentions"}
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"leave_channel", "archive_channel", "react_to_message"}
    assert not TOOLS["post_message"].spec.annotations.idempotent
    assert TOOLS["post_message"].spec.produces == ("message", "mention")
    assert TOOLS["post_message"].spec.entity_params() == {"channel_id": "channel", "thread_id": "message"}
    assert TOOLS["invite_to_channel"].spec.entity_params() == {"channel_id": "channel", "user_ids": "user"}


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
        assert fresh.call(name, args).is_error, name  # refused: already a member, already reacted, ...
        assert fresh.state_hash() == once, name


@pytest.mark.parametrize("seed", [0, 1, 4, 8])
def test_seed_has_every_case_the_rules_need(seed):
    h = ServerHarness(server, seed=seed)
    state, you = h.state, me(h)
    roles = {seat["role"] for seat in state.seats.where(user_id=you)}
    assert roles == {"admin", "member"}
    for ws in state.workspaces:  # every colleague of the workspace is in #general; someone is in one only
        general = state.channels.first(workspace_id=ws["id"], is_general=True)
        assert len(state.memberships.where(channel_id=general["id"])) == len(state.seats.where(workspace_id=ws["id"]))
    assert state.users.first(lambda u: len(state.seats.where(user_id=u["id"])) == 1)
    for private, joined, archived in ((False, False, False), (True, False, False), (True, True, False),
                                      (False, True, True), (False, True, False)):
        assert channel_where(h, joined=joined, private=private, archived=archived)
    assert state.channels.first(created_by=you, is_archived=False)
    assert len(state.mentions.where(user_id=you)) >= 5
    assert state.messages.first(lambda m: m["reply_count"] > 0 and is_member(h, m["channel_id"], you))  # a thread
    for message in state.messages:  # reply counts agree with the replies stored
        if message["thread_id"] is None:
            assert message["reply_count"] == len(state.messages.where(thread_id=message["id"]))


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=ChatOptions(members=160))
    assert len(big.state.users) == 161
    assert len(big.state.messages) > 2 * len(h.state.messages)
    big.run_examples()
    with pytest.raises(ValueError):
        ChatOptions(members=0)


# -- flows with ids passed from one call to the next -----------------------------------------------


def test_create_invite_post_reply_react_flow(h):
    workspace = h.ok("list_workspaces")["workspaces"][0]
    teammates = [m["user_id"] for m in workspace["members"] if m["user_id"] != me(h)]
    created = h.ok("create_channel", workspace_id=workspace["id"], name="#incident-42", is_private=True,
                   user_ids=[teammates[0]])
    assert (created["name"], created["member_count"], created["is_member"]) == ("incident-42", 2, True)
    h.fails("post_message", "USER_NOT_IN_CHANNEL", "FAILED_PRECONDITION", channel_id=created["id"],
            text=f"@{teammates[1]} please join")
    added = h.ok("invite_to_channel", channel_id=created["id"], user_ids=["@" + teammates[1]])
    assert added["added"] == [teammates[1]] and added["channel"]["member_count"] == 3
    posted = h.ok("post_message", channel_id=created["id"],
                  text=f"@{teammates[1]} and @{teammates[0]}: the API is down. Email ops@example.com.")
    assert posted["mentioned"] == [teammates[1], teammates[0]]
    assert h.state.mentions.first(user_id=teammates[1], message_id=posted["message"]["id"])
    root = posted["message"]["id"]
    reply = h.ok("post_message", channel_id=created["id"], thread_id=root, text="Rolling back now.")
    deeper = h.ok("post_message", channel_id=created["id"], thread_id=reply["message"]["id"], text="Done.")
    assert deeper["message"]["thread_id"] == root  # a reply to a reply lands in the same thread
    thread = h.ok("list_messages", channel_id=created["id"], thread_id=root)
    assert thread["thread"]["reply_count"] == 2
    assert [m["text"] for m in thread["replies"]] == ["Rolling back now.", "Done."]
    reactions = h.ok("react_to_message", message_id=root, emoji=":+1:")["reactions"]
    assert reactions == [{"emoji": "thumbsup", "count": 1, "users": [me(h)]}]
    history = h.ok("list_messages", channel_id=created["id"])
    assert [m["id"] for m in history["messages"]] == [root] and history["messages"][0]["reactions"] == reactions
    assert h.ok("react_to_message", message_id=root, emoji="thumbsup", remove=True)["reactions"] == []


def test_join_post_leave(h):
    design = channel(h, "design")
    h.fails("post_message", "NOT_A_MEMBER", "FAILED_PRECONDITION", channel_id=design, text="hello")
    assert h.ok("list_messages", channel_id=design)["total"] > 0  # public: readable without joining
    assert h.ok("join_channel", channel_id=design)["is_member"]
    h.ok("post_message", channel_id=design, text="Hi all, glad to be here")
    h.ok("leave_channel", channel_id=design)
    h.fails("leave_channel", "NOT_A_MEMBER", "FAILED_PRECONDITION", channel_id=design)
    h.fails("react_to_message", "NOT_A_MEMBER", "FAILED_PRECONDITION", message_id=top_message(h, design), emoji="eyes")


def test_channel_and_here_mention_everyone_in_the_channel(h):
    random_id = channel(h, "random")
    members = {m["user_id"] for m in h.state.memberships.where(channel_id=random_id)} - {me(h)}
    posted = h.ok("post_message", channel_id=random_id, text="@here cake in the kitchen! @channel")
    assert set(posted["mentioned"]) == members


def test_my_mentions_are_newest_first_and_filter_by_workspace(h):
    everything = h.ok("list_my_mentions", limit=100)
    stamps = [m["created_at"] for m in everything["mentions"]]
    assert stamps == sorted(stamps, reverse=True) and everything["total"] >= 5
    assert all("@" + me(h) in m["text"] for m in everything["mentions"])
    workspace = my_workspace(h)["id"]
    one = h.ok("list_my_mentions", workspace_id=workspace, limit=100)["mentions"]
    assert one and {m["workspace_id"] for m in one} == {workspace} and len(one) < everything["total"]
    h.fails("list_my_mentions", "WORKSPACE_NOT_FOUND", "NOT_FOUND", workspace_id="ws_missing")


def test_history_pages_newest_first(h):
    general = channel(h, "general")
    whole = h.ok("list_messages", channel_id=general, limit=100)
    stamps = [m["created_at"] for m in whole["messages"]]
    assert stamps == sorted(stamps, reverse=True) and all(m["thread_id"] is None for m in whole["messages"])
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("list_messages", channel_id=general, limit=3, offset=offset)
        seen += [m["id"] for m in page["messages"]]
        offset = page["next_offset"]
    assert seen == [m["id"] for m in whole["messages"]]


def test_list_channels_hides_private_details_and_archived_by_default(h):
    workspace = my_workspace(h)["id"]
    listed = {c["name"]: c for c in h.ok("list_channels", workspace_id=workspace)["channels"]}
    assert "old-website" not in listed and "topic" not in listed["leadership"]
    assert listed["launch-planning"]["topic"] and listed["launch-planning"]["is_member"]
    mine = h.ok("list_channels", workspace_id=workspace, joined_only=True, include_archived=True)["channels"]
    assert "old-website" in {c["name"] for c in mine} and all(c["is_member"] for c in mine)


# -- typed failures ---------------------------------------------------------------------------------


def test_archived_channels_are_read_only(h):
    old = channel(h, "old-website")
    h.fails("post_message", "CHANNEL_ARCHIVED", "FAILED_PRECONDITION", channel_id=old, text="anyone here?")
    h.fails("react_to_message", "CHANNEL_ARCHIVED", "FAILED_PRECONDITION", message_id=top_message(h, old), emoji="eyes")
    h.fails("archive_channel", "CHANNEL_ARCHIVED", "FAILED_PRECONDITION", channel_id=old)
    h.fails("invite_to_channel", "CHANNEL_ARCHIVED", "FAILED_PRECONDITION", channel_id=old, user_ids=[outsider(h, old)])
    h.fails("join_channel", "CHANNEL_ARCHIVED", "FAILED_PRECONDITION", channel_id=channel(h, "workshop-2025", "admin"))


def test_channel_names_are_unique_per_workspace_archived_included(h):
    workspace = my_workspace(h)["id"]
    error = h.fails("create_channel", "CHANNEL_NAME_TAKEN", "CONFLICT", workspace_id=workspace,
                    name="old-website")
    assert error["details"]["is_archived"] is True
    h.fails("create_channel", "CHANNEL_NAME_TAKEN", "CONFLICT", workspace_id=workspace, name="#random")
    other = my_workspace(h, "admin")["id"]
    assert h.ok("create_channel", workspace_id=other, name="old-website")["workspace_id"] == other
    h.fails("create_channel", "WORKSPACE_NOT_FOUND", "NOT_FOUND", workspace_id="ws_missing", name="x")
    bad = h.call("create_channel", {"workspace_id": workspace, "name": "Team Chat"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"


def test_private_channels_need_an_invitation(h):
    leadership = channel(h, "leadership")
    h.fails("join_channel", "PRIVATE_CHANNEL", "PERMISSION_DENIED", channel_id=leadership)
    h.fails("list_messages", "PRIVATE_CHANNEL", "PERMISSION_DENIED", channel_id=leadership)
    h.fails("post_message", "NOT_A_MEMBER", "FAILED_PRECONDITION", channel_id=leadership, text="hi")
    h.fails("invite_to_channel", "NOT_A_MEMBER", "FAILED_PRECONDITION", channel_id=leadership, user_ids=[me(h)])


def test_already_member(h):
    random_id = channel(h, "random")
    h.fails("join_channel", "ALREADY_MEMBER", "CONFLICT", channel_id=random_id)
    present = member_of(h, random_id)
    error = h.fails("invite_to_channel", "ALREADY_MEMBER", "CONFLICT", channel_id=random_id,
                    user_ids=[outsider(h, random_id), present])
    assert error["details"]["already"] == [present]


def test_unknown_users(h):
    state = h.state
    workspace = my_workspace(h)["id"]
    elsewhere = state.users.first(lambda u: not state.seats.first(workspace_id=workspace, user_id=u["id"]))["id"]
    engineering = channel(h, "engineering")
    error = h.fails("post_message", "UNKNOWN_USER", "INVALID_ARGUMENT", channel_id=engineering,
                    text=f"@{elsewhere} and @nobody.here, see this")
    assert error["details"]["unknown"] == [elsewhere, "nobody.here"]
    h.fails("invite_to_channel", "UNKNOWN_USER", "INVALID_ARGUMENT", channel_id=engineering,
            user_ids=[elsewhere])
    h.fails("create_channel", "UNKNOWN_USER", "INVALID_ARGUMENT", workspace_id=workspace, name="side-project",
            user_ids=[elsewhere])


def test_general_cannot_be_left_or_archived(h):
    general = channel(h, "general", "admin")
    h.fails("leave_channel", "CANNOT_LEAVE_GENERAL", "FAILED_PRECONDITION", channel_id=general)
    h.fails("archive_channel", "CANNOT_ARCHIVE_GENERAL", "FAILED_PRECONDITION", channel_id=general)


def test_only_creators_and_admins_archive(h):
    launch = channel(h, "launch-planning")  # created by a colleague; you are a plain member here
    error = h.fails("archive_channel", "ARCHIVE_NOT_ALLOWED", "PERMISSION_DENIED", channel_id=launch)
    assert error["details"]["created_by"] != me(h)
    h.fails("archive_channel", "NOT_A_MEMBER", "FAILED_PRECONDITION", channel_id=channel(h, "design"))
    announcements = channel(h, "announcements", "admin")  # someone else's, but you are an admin here
    assert h.state.channels.get(announcements)["created_by"] != me(h)
    assert h.ok("archive_channel", channel_id=announcements)["is_archived"]
    h.fails("post_message", "CHANNEL_ARCHIVED", "FAILED_PRECONDITION", channel_id=announcements, text="still open?")
    h.fails("archive_channel", "CHANNEL_NOT_FOUND", "NOT_FOUND", channel_id="ch_missing")


def test_reaction_rules(h):
    message = top_message(h, channel(h, "engineering"))
    h.fails("react_to_message", "UNKNOWN_EMOJI", "INVALID_ARGUMENT", message_id=message, emoji="unicorn")
    h.fails("react_to_message", "REACTION_NOT_FOUND", "FAILED_PRECONDITION", message_id=message, emoji="coffee",
            remove=True)
    h.ok("react_to_message", message_id=message, emoji="coffee")
    h.fails("react_to_message", "ALREADY_REACTED", "CONFLICT", message_id=message, emoji=":coffee:")
    h.fails("react_to_message", "MESSAGE_NOT_FOUND", "NOT_FOUND", message_id="msg_missing", emoji="eyes")


def test_message_and_thread_checks(h):
    engineering, random_id = channel(h, "engineering"), channel(h, "random")
    h.fails("post_message", "EMPTY_MESSAGE", "INVALID_ARGUMENT", channel_id=engineering, text="   ")
    elsewhere = top_message(h, random_id)
    error = h.fails("post_message", "THREAD_NOT_IN_CHANNEL", "INVALID_ARGUMENT", channel_id=engineering,
                    thread_id=elsewhere, text="wrong place")
    assert error["details"]["channel_id"] == random_id
    h.fails("list_messages", "THREAD_NOT_IN_CHANNEL", "INVALID_ARGUMENT", channel_id=engineering,
            thread_id=elsewhere)
    h.fails("post_message", "MESSAGE_NOT_FOUND", "NOT_FOUND", channel_id=engineering, thread_id="msg_nope",
            text="hi")
