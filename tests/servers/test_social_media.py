"""The social_media server's own rules: privacy and follow requests, visibility, blocks, posts,
likes, comments and the feed, with typed failures. What every server guarantees is the
conformance kit's (tests/servers/test_conformance.py).
"""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import social_media
from prove_servers.social_media import SocialOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def me(h) -> str:
    return h.state.get_var("me")


def followed(h, *, private: bool) -> str:
    """A member you follow, with a private or a public account."""
    state = h.state
    return next(f["followee_id"] for f in state.follows.where(follower_id=me(h), status="active")
                if state.users.get(f["followee_id"])["is_private"] is private)


def unfollowed(h, *, private: bool) -> str:
    """A member you neither follow nor asked to follow, with no block either way."""
    state, you = h.state, me(h)
    return next(u["id"] for u in state.users.where(is_private=private) if u["id"] != you
                and not state.follows.first(follower_id=you, followee_id=u["id"])
                and not state.blocks.first(blocker_id=you, blocked_id=u["id"])
                and not state.blocks.first(blocker_id=u["id"], blocked_id=you))


def commentable_post(h) -> str:
    """A post by someone you follow that you can see and comment on, and have not liked."""
    state, you = h.state, me(h)
    for follow in state.follows.where(follower_id=you, status="active"):
        author = state.users.get(follow["followee_id"])
        if author["who_can_comment"] != "nobody":
            for post in state.posts.where(lambda p: p["visibility"] != "private", author_id=author["id"]):
                if state.likes.first(post_id=post["id"], user_id=you) is None:
                    return post["id"]
    raise LookupError("no post to comment on")


def could_see(state, viewer: str, post: dict) -> bool:
    """The visibility rule: your own posts; else not private, no block either way, and public on a
    public account or you follow the author."""
    author = state.users.get(post["author_id"])
    if post["author_id"] == viewer:
        return True
    if post["visibility"] == "private" or state.blocks.first(blocker_id=viewer, blocked_id=author["id"]) \
            or state.blocks.first(blocker_id=author["id"], blocked_id=viewer):
        return False
    return (post["visibility"] == "public" and not author["is_private"]) or state.follows.first(
        follower_id=viewer, followee_id=author["id"], status="active") is not None


def post_of(h, author: str, visibility: str) -> str:
    return h.state.posts.first(author_id=author, visibility=visibility)["id"]


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "get_profile", "update_profile", "update_privacy_settings", "create_post", "get_post", "delete_post",
        "list_user_posts", "get_home_feed", "add_comment", "like_post", "unlike_post", "follow_user",
        "unfollow_user", "block_user", "unblock_user",
    }
    assert servers_registered_by(social_media) == [server]
    assert (server.name, server.domain) == ("social_media", "social")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"get_profile", "get_post", "list_user_posts", "get_home_feed"}
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"delete_post", "unlike_post", "unfollow_user", "block_user", "unblock_user"}
    assert not TOOLS["add_comment"].spec.annotations.idempotent
    assert TOOLS["create_post"].spec.produces == ("post",)
    assert TOOLS["like_post"].spec.entity_params() == {"post_id": "post"}
    assert TOOLS["follow_user"].spec.entity_params() == {"user_id": "user"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


@pytest.mark.parametrize("seed", [0, 1, 5, 9])
def test_seed_has_every_case_the_rules_need(seed):
    h = ServerHarness(server, seed=seed)
    state, you = h.state, me(h)
    assert len(state.users) == 31 and state.users.get(you)["is_private"]
    assert len(state.follows.where(followee_id=you, status="pending")) == 2
    assert len(state.follows.where(follower_id=you, status="pending")) >= 1
    assert state.blocks.first(blocker_id=you) and state.blocks.first(blocked_id=you)
    assert state.users.first(who_can_comment="followers") and state.users.first(who_can_comment="nobody")
    assert all(state.posts.first(author_id=u["id"], visibility="public") for u in state.users)
    friend = followed(h, private=False)
    assert {p["visibility"] for p in state.posts.where(author_id=friend)} >= {"public", "followers", "private"}
    assert {p["visibility"] for p in state.posts.where(author_id=you)} >= {"public", "followers", "private"}
    assert state.likes.first(user_id=you) is not None or commentable_post(h)
    for like in state.likes:  # nobody liked what they could not see
        assert could_see(state, like["user_id"], state.posts.get(like["post_id"]))


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=SocialOptions(members=300))
    assert len(big.state.users) == 301
    assert len(big.state.posts) > 8 * len(h.state.posts)
    big.run_examples()
    with pytest.raises(ValueError):
        SocialOptions(members=0)


# -- flows with ids passed from one call to the next -----------------------------------------------


def test_post_then_like_comment_and_see_it_in_the_feed(h):
    post = h.ok("create_post", text="Finally fixed the bike. #proud", visibility="public")
    feed = h.ok("get_home_feed", limit=5)
    assert feed["posts"][0]["id"] == post["id"]
    h.ok("like_post", post_id=post["id"])
    comment = h.ok("add_comment", post_id=post["id"], text="  Thanks all!  ")
    assert comment["comment"]["text"] == "Thanks all!" and comment["comment_count"] == 1
    full = h.ok("get_post", post_id=post["id"])
    assert (full["like_count"], full["liked_by_me"], [c["id"] for c in full["comments"]]) == (
        1, True, [comment["comment"]["id"]])
    deleted = h.ok("delete_post", post_id=post["id"])
    assert (deleted["comments_removed"], deleted["likes_removed"]) == (1, 1)
    assert not h.state.comments.where(post_id=post["id"])
    h.fails("get_post", "POST_NOT_FOUND", "NOT_FOUND", post_id=post["id"])


def test_default_audience_comes_from_the_privacy_settings(h):
    h.ok("update_privacy_settings", default_post_visibility="followers")
    assert h.ok("create_post", text="Who is around this weekend?")["visibility"] == "followers"


def test_feed_is_newest_first_pages_cleanly_and_only_has_followed_authors(h):
    you = me(h)
    whole = h.ok("get_home_feed", limit=50)
    stamps = [p["created_at"] for p in whole["posts"]]
    assert stamps == sorted(stamps, reverse=True)
    state = h.state
    allowed = {you} | {f["followee_id"] for f in state.follows.where(follower_id=you, status="active")}
    assert {p["author_id"] for p in whole["posts"]} <= allowed
    assert all(p["visibility"] != "private" or p["author_id"] == you for p in whole["posts"])
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("get_home_feed", limit=7, offset=offset)
        seen += [p["id"] for p in page["posts"]]
        offset = page["next_offset"]
    assert seen == [p["id"] for p in whole["posts"]] and len(seen) == whole["total"]


def test_list_user_posts_shows_each_audience_to_the_right_people(h):
    friend = followed(h, private=False)
    theirs = {p["visibility"] for p in h.ok("list_user_posts", user_id=friend, limit=50)["posts"]}
    assert theirs == {"public", "followers"}
    mine = {p["visibility"] for p in h.ok("list_user_posts", user_id=me(h), limit=50)["posts"]}
    assert mine == {"public", "followers", "private"}
    h.ok("unfollow_user", user_id=friend)
    after = {p["visibility"] for p in h.ok("list_user_posts", user_id="@" + friend.upper())["posts"]}
    assert after == {"public"}
    h.fails("get_post", "POST_NOT_VISIBLE", "PERMISSION_DENIED", post_id=post_of(h, friend, "followers"))


def test_following_a_private_account_is_a_request_until_withdrawn(h):
    stranger = unfollowed(h, private=True)
    h.fails("list_user_posts", "ACCOUNT_PRIVATE", "PERMISSION_DENIED", user_id=stranger)
    post = h.state.posts.first(author_id=stranger, visibility="public")
    if post:  # even a public post of a private account is for followers
        h.fails("like_post", "POST_NOT_VISIBLE", "PERMISSION_DENIED", post_id=post["id"])
    assert h.ok("follow_user", user_id=stranger)["status"] == "requested"
    assert h.ok("get_profile", user_id=stranger)["relationship"]["you_follow"] == "requested"
    h.fails("follow_user", "FOLLOW_REQUEST_PENDING", "CONFLICT", user_id=stranger)
    h.fails("list_user_posts", "ACCOUNT_PRIVATE", "PERMISSION_DENIED", user_id=stranger)
    assert h.ok("unfollow_user", user_id=stranger)["result"] == "request_withdrawn"
    h.fails("unfollow_user", "NOT_FOLLOWING", "FAILED_PRECONDITION", user_id=stranger)


def test_going_public_approves_waiting_follow_requests(h):
    you = me(h)
    waiting = h.ok("get_profile")["pending_follow_requests"]
    assert len(waiting) == 2
    followers = h.ok("get_profile")["follower_count"]
    result = h.ok("update_privacy_settings", is_private=False)
    assert sorted(result["approved_follow_requests"]) == sorted(waiting)
    profile = h.ok("get_profile")
    assert profile["follower_count"] == followers + 2 and profile["pending_follow_requests"] == []
    assert h.ok("get_profile", user_id=waiting[0])["relationship"]["follows_you"]
    assert not profile["settings"]["is_private"] and h.state.users.get(you)["is_private"] is False


def test_blocking_removes_follows_and_hides_posts_both_ways(h):
    friend = followed(h, private=False)
    assert h.ok("get_profile", user_id=friend)["relationship"]["follows_you"]
    post = post_of(h, friend, "public")
    result = h.ok("block_user", user_id=friend)
    assert result["follows_removed"] == 2
    assert all(p["author_id"] != friend for p in h.ok("get_home_feed", limit=50)["posts"])
    for tool in ("get_post", "like_post"):
        error = h.fails(tool, "BLOCKED", "PERMISSION_DENIED", post_id=post)
        assert error["details"]["blocked_by"] == me(h)
    h.fails("add_comment", "BLOCKED", "PERMISSION_DENIED", post_id=post, text="hi")
    h.fails("follow_user", "BLOCKED", "PERMISSION_DENIED", user_id=friend)
    h.fails("block_user", "ALREADY_BLOCKED", "CONFLICT", user_id=friend)
    assert h.ok("get_profile", user_id=friend)["relationship"]["you_blocked"]
    h.ok("unblock_user", user_id=friend)
    assert h.ok("get_profile", user_id=friend)["relationship"]["you_follow"] is None  # not restored
    h.fails("unblock_user", "NOT_BLOCKED", "FAILED_PRECONDITION", user_id=friend)


# -- typed failures ---------------------------------------------------------------------------------


def test_post_length_limit(h):
    error = h.fails("create_post", "POST_TOO_LONG", "INVALID_ARGUMENT", text="x" * 501)
    assert error["details"] == {"length": 501, "limit": 500}
    assert len(h.ok("create_post", text="y" * 500)["text"]) == 500
    h.fails("create_post", "EMPTY_TEXT", "INVALID_ARGUMENT", text="   ")


def test_duplicate_post_within_a_day(h):
    first = h.ok("create_post", text="Same words twice")
    error = h.fails("create_post", "DUPLICATE_POST", "CONFLICT", text="Same words twice", visibility="private")
    assert error["details"]["post_id"] == first["id"]


def test_blocked_by_someone(h):
    blocker = h.state.blocks.first(blocked_id=me(h))["blocker_id"]
    error = h.fails("get_profile", "BLOCKED", "PERMISSION_DENIED", user_id=blocker)
    assert error["details"]["blocked_by"] == blocker
    h.fails("list_user_posts", "BLOCKED", "PERMISSION_DENIED", user_id=blocker)
    h.fails("follow_user", "BLOCKED", "PERMISSION_DENIED", user_id=blocker)
    h.fails("like_post", "BLOCKED", "PERMISSION_DENIED", post_id=post_of(h, blocker, "public"))


def test_private_posts_are_for_their_author_only(h):
    friend = followed(h, private=False)
    secret = post_of(h, friend, "private")
    for tool in ("get_post", "like_post"):
        h.fails(tool, "POST_NOT_VISIBLE", "PERMISSION_DENIED", post_id=secret)
    h.fails("add_comment", "POST_NOT_VISIBLE", "PERMISSION_DENIED", post_id=secret, text="?")
    assert h.ok("get_post", post_id=post_of(h, me(h), "private"))["visibility"] == "private"


def test_only_the_author_deletes(h):
    friend = followed(h, private=False)
    error = h.fails("delete_post", "NOT_POST_AUTHOR", "PERMISSION_DENIED",
                    post_id=post_of(h, friend, "public"))
    assert error["details"]["author_id"] == friend
    h.fails("delete_post", "POST_NOT_FOUND", "NOT_FOUND", post_id="pst_missing")


def test_likes_once_and_unlikes_once(h):
    post = commentable_post(h)
    count = h.ok("like_post", post_id=post)["like_count"]
    h.fails("like_post", "ALREADY_LIKED", "CONFLICT", post_id=post)
    assert h.ok("unlike_post", post_id=post)["like_count"] == count - 1
    h.fails("unlike_post", "NOT_LIKED", "FAILED_PRECONDITION", post_id=post)


def test_follow_rules(h):
    h.fails("follow_user", "CANNOT_FOLLOW_SELF", "INVALID_ARGUMENT", user_id=me(h))
    h.fails("block_user", "CANNOT_BLOCK_SELF", "INVALID_ARGUMENT", user_id=me(h))
    h.fails("follow_user", "ALREADY_FOLLOWING", "CONFLICT", user_id=followed(h, private=True))
    stranger = unfollowed(h, private=False)
    h.fails("unfollow_user", "NOT_FOLLOWING", "FAILED_PRECONDITION", user_id=stranger)
    assert h.ok("follow_user", user_id=stranger)["status"] == "following"
    h.fails("follow_user", "USER_NOT_FOUND", "NOT_FOUND", user_id="no_such_person")


def test_comment_policies(h):
    state = h.state
    picky = state.users.first(who_can_comment="followers")["id"]
    post = post_of(h, picky, "public")
    error = h.fails("add_comment", "COMMENTS_RESTRICTED", "PERMISSION_DENIED", post_id=post, text="Nice")
    assert error["details"]["who_can_comment"] == "followers"
    h.ok("like_post", post_id=post)  # a like is still fine
    h.ok("follow_user", user_id=picky)
    h.ok("add_comment", post_id=post, text="Nice")
    silent = state.users.first(who_can_comment="nobody")["id"]
    assert h.ok("get_profile", user_id=silent)["relationship"]["you_follow"] == "following"
    h.fails("add_comment", "COMMENTS_RESTRICTED", "PERMISSION_DENIED",
            post_id=post_of(h, silent, "public"), text="hm")
    h.fails("add_comment", "EMPTY_TEXT", "INVALID_ARGUMENT", post_id=post, text="   ")


def test_nothing_to_update(h):
    h.fails("update_profile", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT")
    h.fails("update_privacy_settings", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT")
    h.fails("update_profile", "EMPTY_TEXT", "INVALID_ARGUMENT", display_name="  ")
    assert h.ok("update_profile", bio="")["bio"] == ""


def test_schema_rejects_bad_enums_and_lengths(h):
    assert h.call("create_post", {"text": "hi", "visibility": "friends"}).error["reason"] == "SCHEMA_VIOLATION"
    assert h.call("update_profile", {"bio": "b" * 161}).error["reason"] == "SCHEMA_VIOLATION"
