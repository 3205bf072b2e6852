"""The team_chat server: its tool surface, seed, channel and mention rules and typed failures.

Every failure test checks the reason and code, that the tool declares the reason, and that the
state is unchanged — by the tool itself (it checks before it writes), not only by the rollback.
"""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import team_chat
from prove_servers.team_chat import ChatOptions, server

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


def me(rt: ServerRuntime, sid: str) -> str:
    return rt.state(sid).get_var("me")


def channel(rt: ServerRuntime, sid: str, name: str, role: str = "member") -> str:
    """The id of a seeded channel, in the workspace where your role is ``role``."""
    state = rt.state(sid)
    return state.channels.first(workspace_id=team_chat._workspace(state, role)["id"], name=name)["id"]


def member_of(rt: ServerRuntime, sid: str, channel_id: str) -> str:
    return team_chat._colleague_in(rt.state(sid), rt.state(sid).channels.get(channel_id))


def outsider(rt: ServerRuntime, sid: str, channel_id: str) -> str:
    return team_chat._invitee(rt.state(sid), rt.state(sid).channels.get(channel_id))


def top_message(rt: ServerRuntime, sid: str, channel_id: str) -> str:
    return ok(rt, sid, "list_messages", channel_id=channel_id, limit=1)["messages"][0]["id"]


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_11_tools_each_described_with_examples():
    assert set(TOOLS) == {
        "list_workspaces", "list_channels", "create_channel", "join_channel", "leave_channel", "archive_channel",
        "invite_to_channel", "post_message", "list_messages", "list_my_mentions", "react_to_message",
    }
    assert (server.name, server.domain) == ("team_chat", "social")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_and_entities():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_workspaces", "list_channels", "list_messages", "list_my_mentions"}
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"leave_channel", "archive_channel", "react_to_message"}
    assert not TOOLS["post_message"].spec.annotations.idempotent
    assert TOOLS["post_message"].spec.produces == ("message", "mention")
    assert TOOLS["post_message"].spec.entity_params() == {"channel_id": "channel", "thread_id": "message"}
    assert TOOLS["invite_to_channel"].spec.entity_params() == {"channel_id": "channel", "user_ids": "user"}


def test_registered_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(team_chat)
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
            assert rt.call(sid, name, args).is_error, name  # refused: already a member, already reacted, ...
            assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash("a") == again.state_hash("b")
    assert first.state_hash("a") != other.state_hash("a")


@pytest.mark.parametrize("seed", [0, 1, 4, 8])
def test_seed_has_every_case_the_rules_need(seed):
    state = server.build_state(seed)
    you = state.get_var("me")
    roles = {seat["role"] for seat in state.seats.where(user_id=you)}
    assert roles == {"admin", "member"}
    for ws in state.workspaces:  # every colleague of the workspace is in #general; someone is in one only
        general = state.channels.first(workspace_id=ws["id"], is_general=True)
        assert len(state.memberships.where(channel_id=general["id"])) == len(state.seats.where(workspace_id=ws["id"]))
    assert state.users.first(lambda u: len(state.seats.where(user_id=u["id"])) == 1)
    for private, joined, archived in ((False, False, False), (True, False, False), (True, True, False),
                                      (False, True, True), (False, True, False)):
        assert team_chat._channel(state, joined=joined, private=private, archived=archived)
    assert state.channels.first(created_by=you, is_archived=False)
    assert len(state.mentions.where(user_id=you)) >= 5 and team_chat._thread(state)
    for message in state.messages:  # reply counts agree with the replies stored
        if message["thread_id"] is None:
            assert message["reply_count"] == len(state.messages.where(thread_id=message["id"]))


def test_a_ten_times_larger_seed_works_and_options_are_validated(rt):
    big = ServerRuntime(server, options=ChatOptions(members=160))
    assert len(big.state("x").users) == 161
    assert len(big.state("x").messages) > 2 * len(rt.state("y").messages)
    for tool, index in ALL_EXAMPLES:
        fresh = big.new_session()
        ok(big, fresh, tool, **example_args(big, fresh, TOOLS[tool].examples[index]))
    with pytest.raises(ValueError):
        ChatOptions(members=0)


# -- flows with ids passed from one call to the next -----------------------------------------------


def test_create_invite_post_reply_react_flow(rt, sid):
    workspace = ok(rt, sid, "list_workspaces")["workspaces"][0]
    teammates = [m["user_id"] for m in workspace["members"] if m["user_id"] != me(rt, sid)]
    created = ok(rt, sid, "create_channel", workspace_id=workspace["id"], name="#incident-42", is_private=True,
                 user_ids=[teammates[0]])
    assert (created["name"], created["member_count"], created["is_member"]) == ("incident-42", 2, True)
    fails(rt, sid, "post_message", "USER_NOT_IN_CHANNEL", channel_id=created["id"],
          text=f"@{teammates[1]} please join")
    added = ok(rt, sid, "invite_to_channel", channel_id=created["id"], user_ids=["@" + teammates[1]])
    assert added["added"] == [teammates[1]] and added["channel"]["member_count"] == 3
    posted = ok(rt, sid, "post_message", channel_id=created["id"],
                text=f"@{teammates[1]} and @{teammates[0]}: the API is down. Email ops@example.com.")
    assert posted["mentioned"] == [teammates[1], teammates[0]]
    assert rt.state(sid).mentions.first(user_id=teammates[1], message_id=posted["message"]["id"])
    root = posted["message"]["id"]
    reply = ok(rt, sid, "post_message", channel_id=created["id"], thread_id=root, text="Rolling back now.")
    deeper = ok(rt, sid, "post_message", channel_id=created["id"], thread_id=reply["message"]["id"], text="Done.")
    assert deeper["message"]["thread_id"] == root  # a reply to a reply lands in the same thread
    thread = ok(rt, sid, "list_messages", channel_id=created["id"], thread_id=root)
    assert thread["thread"]["reply_count"] == 2
    assert [m["text"] for m in thread["replies"]] == ["Rolling back now.", "Done."]
    reactions = ok(rt, sid, "react_to_message", message_id=root, emoji=":+1:")["reactions"]
    assert reactions == [{"emoji": "thumbsup", "count": 1, "users": [me(rt, sid)]}]
    history = ok(rt, sid, "list_messages", channel_id=created["id"])
    assert [m["id"] for m in history["messages"]] == [root] and history["messages"][0]["reactions"] == reactions
    assert ok(rt, sid, "react_to_message", message_id=root, emoji="thumbsup", remove=True)["reactions"] == []


def test_join_post_leave(rt, sid):
    design = channel(rt, sid, "design")
    fails(rt, sid, "post_message", "NOT_A_MEMBER", channel_id=design, text="hello")
    assert ok(rt, sid, "list_messages", channel_id=design)["total"] > 0  # public: readable without joining
    assert ok(rt, sid, "join_channel", channel_id=design)["is_member"]
    ok(rt, sid, "post_message", channel_id=design, text="Hi all, glad to be here")
    ok(rt, sid, "leave_channel", channel_id=design)
    fails(rt, sid, "leave_channel", "NOT_A_MEMBER", channel_id=design)
    fails(rt, sid, "react_to_message", "NOT_A_MEMBER", message_id=top_message(rt, sid, design), emoji="eyes")


def test_channel_and_here_mention_everyone_in_the_channel(rt, sid):
    random_id = channel(rt, sid, "random")
    members = {m["user_id"] for m in rt.state(sid).memberships.where(channel_id=random_id)} - {me(rt, sid)}
    posted = ok(rt, sid, "post_message", channel_id=random_id, text="@here cake in the kitchen! @channel")
    assert set(posted["mentioned"]) == members


def test_my_mentions_are_newest_first_and_filter_by_workspace(rt, sid):
    everything = ok(rt, sid, "list_my_mentions", limit=100)
    stamps = [m["created_at"] for m in everything["mentions"]]
    assert stamps == sorted(stamps, reverse=True) and everything["total"] >= 5
    assert all("@" + me(rt, sid) in m["text"] for m in everything["mentions"])
    workspace = team_chat._workspace(rt.state(sid))["id"]
    one = ok(rt, sid, "list_my_mentions", workspace_id=workspace, limit=100)["mentions"]
    assert one and {m["workspace_id"] for m in one} == {workspace} and len(one) < everything["total"]
    fails(rt, sid, "list_my_mentions", "WORKSPACE_NOT_FOUND", "NOT_FOUND", workspace_id="ws_missing")


def test_history_pages_newest_first(rt, sid):
    general = channel(rt, sid, "general")
    whole = ok(rt, sid, "list_messages", channel_id=general, limit=100)
    stamps = [m["created_at"] for m in whole["messages"]]
    assert stamps == sorted(stamps, reverse=True) and all(m["thread_id"] is None for m in whole["messages"])
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "list_messages", channel_id=general, limit=3, offset=offset)
        seen += [m["id"] for m in page["messages"]]
        offset = page["next_offset"]
    assert seen == [m["id"] for m in whole["messages"]]


def test_list_channels_hides_private_details_and_archived_by_default(rt, sid):
    workspace = team_chat._workspace(rt.state(sid))["id"]
    listed = {c["name"]: c for c in ok(rt, sid, "list_channels", workspace_id=workspace)["channels"]}
    assert "old-website" not in listed and "topic" not in listed["leadership"]
    assert listed["launch-planning"]["topic"] and listed["launch-planning"]["is_member"]
    mine = ok(rt, sid, "list_channels", workspace_id=workspace, joined_only=True, include_archived=True)["channels"]
    assert "old-website" in {c["name"] for c in mine} and all(c["is_member"] for c in mine)


# -- typed failures ---------------------------------------------------------------------------------


def test_archived_channels_are_read_only(rt, sid):
    old = channel(rt, sid, "old-website")
    fails(rt, sid, "post_message", "CHANNEL_ARCHIVED", channel_id=old, text="anyone here?")
    fails(rt, sid, "react_to_message", "CHANNEL_ARCHIVED", message_id=top_message(rt, sid, old), emoji="eyes")
    fails(rt, sid, "archive_channel", "CHANNEL_ARCHIVED", channel_id=old)
    fails(rt, sid, "invite_to_channel", "CHANNEL_ARCHIVED", channel_id=old, user_ids=[outsider(rt, sid, old)])
    fails(rt, sid, "join_channel", "CHANNEL_ARCHIVED", channel_id=channel(rt, sid, "workshop-2025", "admin"))


def test_channel_names_are_unique_per_workspace_archived_included(rt, sid):
    workspace = team_chat._workspace(rt.state(sid))["id"]
    error = fails(rt, sid, "create_channel", "CHANNEL_NAME_TAKEN", "CONFLICT", workspace_id=workspace,
                  name="old-website")
    assert error["details"]["is_archived"] is True
    fails(rt, sid, "create_channel", "CHANNEL_NAME_TAKEN", "CONFLICT", workspace_id=workspace, name="#random")
    other = team_chat._workspace(rt.state(sid), "admin")["id"]
    assert ok(rt, sid, "create_channel", workspace_id=other, name="old-website")["workspace_id"] == other
    fails(rt, sid, "create_channel", "WORKSPACE_NOT_FOUND", "NOT_FOUND", workspace_id="ws_missing", name="x")
    bad = rt.call(sid, "create_channel", {"workspace_id": workspace, "name": "Team Chat"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"


def test_private_channels_need_an_invitation(rt, sid):
    leadership = channel(rt, sid, "leadership")
    fails(rt, sid, "join_channel", "PRIVATE_CHANNEL", "PERMISSION_DENIED", channel_id=leadership)
    fails(rt, sid, "list_messages", "PRIVATE_CHANNEL", "PERMISSION_DENIED", channel_id=leadership)
    fails(rt, sid, "post_message", "NOT_A_MEMBER", channel_id=leadership, text="hi")
    fails(rt, sid, "invite_to_channel", "NOT_A_MEMBER", channel_id=leadership, user_ids=[me(rt, sid)])


def test_already_member(rt, sid):
    random_id = channel(rt, sid, "random")
    fails(rt, sid, "join_channel", "ALREADY_MEMBER", "CONFLICT", channel_id=random_id)
    present = member_of(rt, sid, random_id)
    error = fails(rt, sid, "invite_to_channel", "ALREADY_MEMBER", "CONFLICT", channel_id=random_id,
                  user_ids=[outsider(rt, sid, random_id), present])
    assert error["details"]["already"] == [present]


def test_unknown_users(rt, sid):
    state = rt.state(sid)
    workspace = team_chat._workspace(state)["id"]
    elsewhere = state.users.first(lambda u: not team_chat._in_workspace(state, workspace, u["id"]))["id"]
    engineering = channel(rt, sid, "engineering")
    error = fails(rt, sid, "post_message", "UNKNOWN_USER", "INVALID_ARGUMENT", channel_id=engineering,
                  text=f"@{elsewhere} and @nobody.here, see this")
    assert error["details"]["unknown"] == [elsewhere, "nobody.here"]
    fails(rt, sid, "invite_to_channel", "UNKNOWN_USER", "INVALID_ARGUMENT", channel_id=engineering,
          user_ids=[elsewhere])
    fails(rt, sid, "create_channel", "UNKNOWN_USER", "INVALID_ARGUMENT", workspace_id=workspace, name="side-project",
          user_ids=[elsewhere])


def test_general_cannot_be_left_or_archived(rt, sid):
    general = channel(rt, sid, "general", "admin")
    fails(rt, sid, "leave_channel", "CANNOT_LEAVE_GENERAL", channel_id=general)
    fails(rt, sid, "archive_channel", "CANNOT_ARCHIVE_GENERAL", channel_id=general)


def test_only_creators_and_admins_archive(rt, sid):
    launch = channel(rt, sid, "launch-planning")  # created by a colleague; you are a plain member here
    error = fails(rt, sid, "archive_channel", "ARCHIVE_NOT_ALLOWED", "PERMISSION_DENIED", channel_id=launch)
    assert error["details"]["created_by"] != me(rt, sid)
    fails(rt, sid, "archive_channel", "NOT_A_MEMBER", channel_id=channel(rt, sid, "design"))
    announcements = channel(rt, sid, "announcements", "admin")  # someone else's, but you are an admin here
    assert rt.state(sid).channels.get(announcements)["created_by"] != me(rt, sid)
    assert ok(rt, sid, "archive_channel", channel_id=announcements)["is_archived"]
    fails(rt, sid, "post_message", "CHANNEL_ARCHIVED", channel_id=announcements, text="still open?")
    fails(rt, sid, "archive_channel", "CHANNEL_NOT_FOUND", "NOT_FOUND", channel_id="ch_missing")


def test_reaction_rules(rt, sid):
    message = top_message(rt, sid, channel(rt, sid, "engineering"))
    fails(rt, sid, "react_to_message", "UNKNOWN_EMOJI", "INVALID_ARGUMENT", message_id=message, emoji="unicorn")
    fails(rt, sid, "react_to_message", "REACTION_NOT_FOUND", message_id=message, emoji="coffee", remove=True)
    ok(rt, sid, "react_to_message", message_id=message, emoji="coffee")
    fails(rt, sid, "react_to_message", "ALREADY_REACTED", "CONFLICT", message_id=message, emoji=":coffee:")
    fails(rt, sid, "react_to_message", "MESSAGE_NOT_FOUND", "NOT_FOUND", message_id="msg_missing", emoji="eyes")


def test_message_and_thread_checks(rt, sid):
    engineering, random_id = channel(rt, sid, "engineering"), channel(rt, sid, "random")
    fails(rt, sid, "post_message", "EMPTY_MESSAGE", "INVALID_ARGUMENT", channel_id=engineering, text="   ")
    elsewhere = top_message(rt, sid, random_id)
    error = fails(rt, sid, "post_message", "THREAD_NOT_IN_CHANNEL", "INVALID_ARGUMENT", channel_id=engineering,
                  thread_id=elsewhere, text="wrong place")
    assert error["details"]["channel_id"] == random_id
    fails(rt, sid, "list_messages", "THREAD_NOT_IN_CHANNEL", "INVALID_ARGUMENT", channel_id=engineering,
          thread_id=elsewhere)
    fails(rt, sid, "post_message", "MESSAGE_NOT_FOUND", "NOT_FOUND", channel_id=engineering, thread_id="msg_nope",
          text="hi")
