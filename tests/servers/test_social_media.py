"""The social_media server: its tool surface, seed, audience rules and typed failures.

Every failure test checks the reason and code, that the tool declares the reason, and that the
state is unchanged — by the tool itself (it checks before it writes), not only by the rollback.
"""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import social_media
from prove_servers.social_media import SocialOptions, server

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


def followed(rt: ServerRuntime, sid: str, *, private: bool) -> str:
    return social_media._followed(rt.state(sid), private=private)


def post_of(rt: ServerRuntime, sid: str, author: str, visibility: str) -> str:
    return rt.state(sid).posts.first(author_id=author, visibility=visibility)["id"]


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_15_tools_each_described_with_examples():
    assert set(TOOLS) == {
        "get_profile", "update_profile", "update_privacy_settings", "create_post", "get_post", "delete_post",
        "list_user_posts", "get_home_feed", "add_comment", "like_post", "unlike_post", "follow_user",
        "unfollow_user", "block_user", "unblock_user",
    }
    assert (server.name, server.domain) == ("social_media", "social")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_and_entities():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"get_profile", "get_post", "list_user_posts", "get_home_feed"}
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"delete_post", "unlike_post", "unfollow_user", "block_user", "unblock_user"}
    assert not TOOLS["add_comment"].spec.annotations.idempotent
    assert TOOLS["create_post"].spec.produces == ("post",)
    assert TOOLS["like_post"].spec.entity_params() == {"post_id": "post"}
    assert TOOLS["follow_user"].spec.entity_params() == {"user_id": "user"}


def test_registered_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(social_media)
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
        sid = rt.new_session()
        args = example_args(rt, sid, tool.examples[0])
        ok(rt, sid, name, **args)
        once = rt.state_hash(sid)
        rt.call(sid, name, args)  # refused (already liked, duplicate post, ...) or a no-op
        assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash("a") == again.state_hash("b")
    assert first.state_hash("a") != other.state_hash("a")


@pytest.mark.parametrize("seed", [0, 1, 5, 9])
def test_seed_has_every_case_the_rules_need(seed):
    state = server.build_state(seed)
    you = state.get_var("me")
    assert len(state.users) == 31 and state.users.get(you)["is_private"]
    assert len(state.follows.where(followee_id=you, status="pending")) == 2
    assert len(state.follows.where(follower_id=you, status="pending")) >= 1
    assert state.blocks.first(blocker_id=you) and state.blocks.first(blocked_id=you)
    assert state.users.first(who_can_comment="followers") and state.users.first(who_can_comment="nobody")
    assert all(state.posts.first(author_id=u["id"], visibility="public") for u in state.users)
    friend = social_media._followed(state, private=False)
    assert {p["visibility"] for p in state.posts.where(author_id=friend)} >= {"public", "followers", "private"}
    assert {p["visibility"] for p in state.posts.where(author_id=you)} >= {"public", "followers", "private"}
    assert state.likes.first(user_id=you) is not None or social_media._commentable_post(state)
    for like in state.likes:  # nobody liked what they could not see
        post = state.posts.get(like["post_id"])
        assert social_media._can_see(state, like["user_id"], post, state.users.get(post["author_id"]))


def test_a_ten_times_larger_seed_works_and_options_are_validated(rt):
    big = ServerRuntime(server, options=SocialOptions(members=300))
    assert len(big.state("x").users) == 301
    assert len(big.state("x").posts) > 8 * len(rt.state("y").posts)
    for tool, index in ALL_EXAMPLES:
        fresh = big.new_session()
        ok(big, fresh, tool, **example_args(big, fresh, TOOLS[tool].examples[index]))
    with pytest.raises(ValueError):
        SocialOptions(members=0)


# -- flows with ids passed from one call to the next -----------------------------------------------


def test_post_then_like_comment_and_see_it_in_the_feed(rt, sid):
    post = ok(rt, sid, "create_post", text="Finally fixed the bike. #proud", visibility="public")
    feed = ok(rt, sid, "get_home_feed", limit=5)
    assert feed["posts"][0]["id"] == post["id"]
    ok(rt, sid, "like_post", post_id=post["id"])
    comment = ok(rt, sid, "add_comment", post_id=post["id"], text="  Thanks all!  ")
    assert comment["comment"]["text"] == "Thanks all!" and comment["comment_count"] == 1
    full = ok(rt, sid, "get_post", post_id=post["id"])
    assert (full["like_count"], full["liked_by_me"], [c["id"] for c in full["comments"]]) == (
        1, True, [comment["comment"]["id"]])
    deleted = ok(rt, sid, "delete_post", post_id=post["id"])
    assert (deleted["comments_removed"], deleted["likes_removed"]) == (1, 1)
    assert not rt.state(sid).comments.where(post_id=post["id"])
    fails(rt, sid, "get_post", "POST_NOT_FOUND", "NOT_FOUND", post_id=post["id"])


def test_default_audience_comes_from_the_privacy_settings(rt, sid):
    ok(rt, sid, "update_privacy_settings", default_post_visibility="followers")
    assert ok(rt, sid, "create_post", text="Who is around this weekend?")["visibility"] == "followers"


def test_feed_is_newest_first_pages_cleanly_and_only_has_followed_authors(rt, sid):
    you = me(rt, sid)
    whole = ok(rt, sid, "get_home_feed", limit=50)
    stamps = [p["created_at"] for p in whole["posts"]]
    assert stamps == sorted(stamps, reverse=True)
    state = rt.state(sid)
    allowed = {you} | {f["followee_id"] for f in state.follows.where(follower_id=you, status="active")}
    assert {p["author_id"] for p in whole["posts"]} <= allowed
    assert all(p["visibility"] != "private" or p["author_id"] == you for p in whole["posts"])
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "get_home_feed", limit=7, offset=offset)
        seen += [p["id"] for p in page["posts"]]
        offset = page["next_offset"]
    assert seen == [p["id"] for p in whole["posts"]] and len(seen) == whole["total"]


def test_list_user_posts_shows_each_audience_to_the_right_people(rt, sid):
    friend = followed(rt, sid, private=False)
    theirs = {p["visibility"] for p in ok(rt, sid, "list_user_posts", user_id=friend, limit=50)["posts"]}
    assert theirs == {"public", "followers"}
    mine = {p["visibility"] for p in ok(rt, sid, "list_user_posts", user_id=me(rt, sid), limit=50)["posts"]}
    assert mine == {"public", "followers", "private"}
    ok(rt, sid, "unfollow_user", user_id=friend)
    after = {p["visibility"] for p in ok(rt, sid, "list_user_posts", user_id="@" + friend.upper())["posts"]}
    assert after == {"public"}
    fails(rt, sid, "get_post", "POST_NOT_VISIBLE", "PERMISSION_DENIED", post_id=post_of(rt, sid, friend, "followers"))


def test_following_a_private_account_is_a_request_until_withdrawn(rt, sid):
    stranger = social_media._unfollowed(rt.state(sid), private=True)
    fails(rt, sid, "list_user_posts", "ACCOUNT_PRIVATE", "PERMISSION_DENIED", user_id=stranger)
    post = rt.state(sid).posts.first(author_id=stranger, visibility="public")
    if post:  # even a public post of a private account is for followers
        fails(rt, sid, "like_post", "POST_NOT_VISIBLE", "PERMISSION_DENIED", post_id=post["id"])
    assert ok(rt, sid, "follow_user", user_id=stranger)["status"] == "requested"
    assert ok(rt, sid, "get_profile", user_id=stranger)["relationship"]["you_follow"] == "requested"
    fails(rt, sid, "follow_user", "FOLLOW_REQUEST_PENDING", "CONFLICT", user_id=stranger)
    fails(rt, sid, "list_user_posts", "ACCOUNT_PRIVATE", "PERMISSION_DENIED", user_id=stranger)
    assert ok(rt, sid, "unfollow_user", user_id=stranger)["result"] == "request_withdrawn"
    fails(rt, sid, "unfollow_user", "NOT_FOLLOWING", user_id=stranger)


def test_going_public_approves_waiting_follow_requests(rt, sid):
    you = me(rt, sid)
    waiting = ok(rt, sid, "get_profile")["pending_follow_requests"]
    assert len(waiting) == 2
    followers = ok(rt, sid, "get_profile")["follower_count"]
    result = ok(rt, sid, "update_privacy_settings", is_private=False)
    assert sorted(result["approved_follow_requests"]) == sorted(waiting)
    profile = ok(rt, sid, "get_profile")
    assert profile["follower_count"] == followers + 2 and profile["pending_follow_requests"] == []
    assert ok(rt, sid, "get_profile", user_id=waiting[0])["relationship"]["follows_you"]
    assert not profile["settings"]["is_private"] and rt.state(sid).users.get(you)["is_private"] is False


def test_blocking_removes_follows_and_hides_posts_both_ways(rt, sid):
    friend = followed(rt, sid, private=False)
    assert ok(rt, sid, "get_profile", user_id=friend)["relationship"]["follows_you"]
    post = post_of(rt, sid, friend, "public")
    result = ok(rt, sid, "block_user", user_id=friend)
    assert result["follows_removed"] == 2
    assert all(p["author_id"] != friend for p in ok(rt, sid, "get_home_feed", limit=50)["posts"])
    for tool in ("get_post", "like_post"):
        error = fails(rt, sid, tool, "BLOCKED", "PERMISSION_DENIED", post_id=post)
        assert error["details"]["blocked_by"] == me(rt, sid)
    fails(rt, sid, "add_comment", "BLOCKED", "PERMISSION_DENIED", post_id=post, text="hi")
    fails(rt, sid, "follow_user", "BLOCKED", "PERMISSION_DENIED", user_id=friend)
    fails(rt, sid, "block_user", "ALREADY_BLOCKED", "CONFLICT", user_id=friend)
    assert ok(rt, sid, "get_profile", user_id=friend)["relationship"]["you_blocked"]
    ok(rt, sid, "unblock_user", user_id=friend)
    assert ok(rt, sid, "get_profile", user_id=friend)["relationship"]["you_follow"] is None  # not restored
    fails(rt, sid, "unblock_user", "NOT_BLOCKED", user_id=friend)


# -- typed failures ---------------------------------------------------------------------------------


def test_post_length_limit(rt, sid):
    error = fails(rt, sid, "create_post", "POST_TOO_LONG", "INVALID_ARGUMENT", text="x" * 501)
    assert error["details"] == {"length": 501, "limit": 500}
    assert len(ok(rt, sid, "create_post", text="y" * 500)["text"]) == 500
    fails(rt, sid, "create_post", "EMPTY_TEXT", "INVALID_ARGUMENT", text="   ")


def test_duplicate_post_within_a_day(rt, sid):
    first = ok(rt, sid, "create_post", text="Same words twice")
    error = fails(rt, sid, "create_post", "DUPLICATE_POST", "CONFLICT", text="Same words twice", visibility="private")
    assert error["details"]["post_id"] == first["id"]


def test_blocked_by_someone(rt, sid):
    blocker = rt.state(sid).blocks.first(blocked_id=me(rt, sid))["blocker_id"]
    error = fails(rt, sid, "get_profile", "BLOCKED", "PERMISSION_DENIED", user_id=blocker)
    assert error["details"]["blocked_by"] == blocker
    fails(rt, sid, "list_user_posts", "BLOCKED", "PERMISSION_DENIED", user_id=blocker)
    fails(rt, sid, "follow_user", "BLOCKED", "PERMISSION_DENIED", user_id=blocker)
    fails(rt, sid, "like_post", "BLOCKED", "PERMISSION_DENIED", post_id=post_of(rt, sid, blocker, "public"))


def test_private_posts_are_for_their_author_only(rt, sid):
    friend = followed(rt, sid, private=False)
    secret = post_of(rt, sid, friend, "private")
    for tool in ("get_post", "like_post"):
        fails(rt, sid, tool, "POST_NOT_VISIBLE", "PERMISSION_DENIED", post_id=secret)
    fails(rt, sid, "add_comment", "POST_NOT_VISIBLE", "PERMISSION_DENIED", post_id=secret, text="?")
    assert ok(rt, sid, "get_post", post_id=post_of(rt, sid, me(rt, sid), "private"))["visibility"] == "private"


def test_only_the_author_deletes(rt, sid):
    friend = followed(rt, sid, private=False)
    error = fails(rt, sid, "delete_post", "NOT_POST_AUTHOR", "PERMISSION_DENIED",
                  post_id=post_of(rt, sid, friend, "public"))
    assert error["details"]["author_id"] == friend
    fails(rt, sid, "delete_post", "POST_NOT_FOUND", "NOT_FOUND", post_id="pst_missing")


def test_likes_once_and_unlikes_once(rt, sid):
    post = social_media._commentable_post(rt.state(sid))
    count = ok(rt, sid, "like_post", post_id=post)["like_count"]
    fails(rt, sid, "like_post", "ALREADY_LIKED", "CONFLICT", post_id=post)
    assert ok(rt, sid, "unlike_post", post_id=post)["like_count"] == count - 1
    fails(rt, sid, "unlike_post", "NOT_LIKED", post_id=post)


def test_follow_rules(rt, sid):
    fails(rt, sid, "follow_user", "CANNOT_FOLLOW_SELF", "INVALID_ARGUMENT", user_id=me(rt, sid))
    fails(rt, sid, "block_user", "CANNOT_BLOCK_SELF", "INVALID_ARGUMENT", user_id=me(rt, sid))
    fails(rt, sid, "follow_user", "ALREADY_FOLLOWING", "CONFLICT", user_id=followed(rt, sid, private=True))
    stranger = social_media._unfollowed(rt.state(sid), private=False)
    fails(rt, sid, "unfollow_user", "NOT_FOLLOWING", user_id=stranger)
    assert ok(rt, sid, "follow_user", user_id=stranger)["status"] == "following"
    fails(rt, sid, "follow_user", "USER_NOT_FOUND", "NOT_FOUND", user_id="no_such_person")


def test_comment_policies(rt, sid):
    state = rt.state(sid)
    picky = state.users.first(who_can_comment="followers")["id"]
    post = post_of(rt, sid, picky, "public")
    error = fails(rt, sid, "add_comment", "COMMENTS_RESTRICTED", "PERMISSION_DENIED", post_id=post, text="Nice")
    assert error["details"]["who_can_comment"] == "followers"
    ok(rt, sid, "like_post", post_id=post)  # a like is still fine
    ok(rt, sid, "follow_user", user_id=picky)
    ok(rt, sid, "add_comment", post_id=post, text="Nice")
    silent = state.users.first(who_can_comment="nobody")["id"]
    assert ok(rt, sid, "get_profile", user_id=silent)["relationship"]["you_follow"] == "following"
    fails(rt, sid, "add_comment", "COMMENTS_RESTRICTED", "PERMISSION_DENIED",
          post_id=post_of(rt, sid, silent, "public"), text="hm")
    fails(rt, sid, "add_comment", "EMPTY_TEXT", "INVALID_ARGUMENT", post_id=post, text="   ")


def test_nothing_to_update(rt, sid):
    fails(rt, sid, "update_profile", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT")
    fails(rt, sid, "update_privacy_settings", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT")
    fails(rt, sid, "update_profile", "EMPTY_TEXT", "INVALID_ARGUMENT", display_name="  ")
    assert ok(rt, sid, "update_profile", bio="")["bio"] == ""


def test_schema_rejects_bad_enums_and_lengths(rt, sid):
    assert rt.call(sid, "create_post", {"text": "hi", "visibility": "friends"}).error["reason"] == "SCHEMA_VIOLATION"
    assert rt.call(sid, "update_profile", {"bio": "b" * 161}).error["reason"] == "SCHEMA_VIOLATION"
