"""social_media — a social network as one signed-in member sees it: profiles, posts with an
audience (public, followers, private), comments, likes, follows, a home feed, privacy settings
and blocking.

Members are keyed by their handle (``maria_silva``), the name people use for them, so a handle
is the user id every tool takes. The signed-in member is the var ``me``.

Who sees what: an author always sees their own posts. Otherwise a ``private`` post is hidden, a
``followers`` post needs an approved follow, and every post of a private account needs one too.
A block, in either direction, hides everything and stops comments, likes and follows. Following
a private account creates a pending request; switching your own account to public approves the
requests waiting on it.
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
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    paginate,
    ref,
    require,
)

Visibility = Literal["public", "followers", "private"]
CommentPolicy = Literal["everyone", "followers", "nobody"]

MAX_POST_CHARS = 500
DUPLICATE_WINDOW = dt.timedelta(hours=24)  # the same text twice within a day is refused, as on most networks
HISTORY_DAYS = 30  # how far back seeded posts go

BIOS = (
    "Coffee first. Questions later.", "Runner, reader, recovering perfectionist.", "Photographer chasing golden hour.",
    "Dog parent. Plant hoarder.", "Product designer by day, baker by night.", "Teacher. Learner. Hiker.",
    "Building things on the internet.", "Amateur astronomer, professional napper.",
    "Vinyl collector and weekend cyclist.", "Nurse, knitter, karaoke enthusiast.",
)
ACTIVITIES = (
    "a 10k trail run", "my first sourdough loaf", "the pottery class", "a three-day hike", "a 1,000-piece puzzle",
    "my first half marathon", "repainting the kitchen", "a week of journaling",
)
REACTIONS = ("Legs are jelly.", "Worth every minute.", "Never again (until next week).", "Proud of this one.")
PLACES = ("the harbor", "Lake Wren", "the old mill", "Juniper Ridge", "the botanical garden", "Pier 9")
BOOKS = ("The Overstory", "Project Hail Mary", "Piranesi", "Educated", "The Left Hand of Darkness")
OPINIONS = (
    "pineapple belongs on pizza", "meetings should be 25 minutes", "winter is the best running season",
    "audiobooks count as reading", "tabs beat spaces",
)
POST_TEMPLATES = (
    "Just finished {activity}. {reaction}",
    "Sunset over {place} tonight was unreal. #nofilter",
    "Reading {book} and I can't put it down.",
    "Hot take: {opinion}.",
    "Anyone else think {opinion}?",
    "Quiet morning at {place}. Needed this.",
    "Recommendations for what to read after {book}?",
    "Trying {activity} this weekend. Wish me luck!",
)
COMMENTS = (
    "Love this!", "So true.", "Congrats!!", "Where is this?", "Need to try this.", "Haha, same.",
    "This made my day.", "Wow, beautiful.", "Tell me more!", "Couldn't agree more.",
)

# The cast: members whose relationship to you gives every rule a case at any seed. The rest of the
# network is random. Each entry: (role, account is private, who may comment).
CAST = (
    ("friend", False, "everyone"),  # public, you follow them; posts of every audience
    ("close_friend", True, "everyone"),  # private, you follow them (approved)
    ("stranger_private", True, "everyone"),  # private, you do not follow them
    ("requested", True, "everyone"),  # private, your follow request is pending
    ("blocker", False, "everyone"),  # has blocked you
    ("blocked", False, "everyone"),  # you blocked them
    ("followers_only_comments", False, "followers"),  # public, you do not follow them
    ("no_comments", False, "nobody"),  # public, you follow them
    ("fan", False, "everyone"),  # asked to follow you (pending)
    ("admirer", False, "everyone"),  # asked to follow you (pending)
)
CAST_ROLES = tuple(role for role, _, _ in CAST)


class SocialState(State):
    """The network as the signed-in member (var ``me``, a handle) sees it."""

    users = Table("user", prefix="usr")  # keyed by handle
    posts = Table("post", prefix="pst", index=("author_id",))
    comments = Table("comment", prefix="cmt", index=("post_id",))
    likes = Table("like", prefix="lik", index=("post_id", "user_id"))
    follows = Table("follow", prefix="fol", index=("follower_id", "followee_id"))
    blocks = Table("block", prefix="blk", index=("blocker_id", "blocked_id"))


@attrs.frozen(kw_only=True)
class SocialOptions:
    """Seed size: how many other members the network has (the first ten play the cast roles)."""

    members: int = attrs.field(default=30, validator=attrs.validators.ge(len(CAST)))


# -- shared rules ---------------------------------------------------------------------------------


def _me(state: SocialState) -> str:
    return state.get_var("me")


def _member(state: SocialState, user_id: str) -> Record:
    """A member by handle; a leading @ and capitals are forgiven (USER_NOT_FOUND otherwise)."""
    return state.users.get(user_id.removeprefix("@").lower())


def _follow(state: SocialState, follower: str, followee: str) -> Record | None:
    return state.follows.first(follower_id=follower, followee_id=followee)


def _follows(state: SocialState, follower: str, followee: str) -> bool:
    found = _follow(state, follower, followee)
    return found is not None and found["status"] == "active"


def _has_blocked(state: SocialState, blocker: str, blocked: str) -> bool:
    return state.blocks.first(blocker_id=blocker, blocked_id=blocked) is not None


def _require_no_block(state: SocialState, other: str) -> None:
    """BLOCKED when either side blocked the other; the message says which side can undo it."""
    me = _me(state)
    require(not _has_blocked(state, me, other), f"you blocked @{other}; call unblock_user first", reason="BLOCKED",
            error=PermissionDenied, blocked_by=me)
    require(not _has_blocked(state, other, me), f"@{other} has blocked you", reason="BLOCKED",
            error=PermissionDenied, blocked_by=other)


def _can_see(state: SocialState, viewer: str, post: Record, author: Record) -> bool:
    if post["author_id"] == viewer:
        return True
    if post["visibility"] == "private" or _has_blocked(state, viewer, author["id"]):
        return False
    if _has_blocked(state, author["id"], viewer):
        return False
    return (post["visibility"] == "public" and not author["is_private"]) or _follows(state, viewer, author["id"])


def _visible_post(state: SocialState, post_id: str) -> tuple[Record, Record]:
    """The post and its author, once the signed-in member may see it (BLOCKED, POST_NOT_VISIBLE)."""
    post = state.posts.get(post_id)
    author = state.users.get(post["author_id"])
    me = _me(state)
    if post["author_id"] == me:
        return post, author
    _require_no_block(state, author["id"])
    if post["visibility"] == "private":
        hint = "only its author can see a private post"
    elif author["is_private"]:
        hint = f"@{author['id']} has a private account; follow_user sends a follow request"
    else:
        hint = f"it is for @{author['id']}'s followers; follow_user first"
    require(_can_see(state, me, post, author), f"post {post_id} is not visible to you: {hint}",
            reason="POST_NOT_VISIBLE", error=PermissionDenied, visibility=post["visibility"])
    return post, author


def _clean_text(text: str, what: str) -> str:
    text = text.strip()
    require(bool(text), f"the {what} is empty", reason="EMPTY_TEXT", error=InvalidArgument)
    return text


def _post_view(state: SocialState, post: Record, author: Record | None = None) -> Record:
    author = author or state.users.get(post["author_id"])
    me = _me(state)
    return {
        **post,
        "author_name": author["display_name"],
        "like_count": len(state.likes.where(post_id=post["id"])),
        "comment_count": len(state.comments.where(post_id=post["id"])),
        "liked_by_me": state.likes.first(post_id=post["id"], user_id=me) is not None,
    }


def _newest_first(posts: list[Record]) -> list[Record]:
    return sorted(posts, key=lambda p: (p["created_at"], p["id"]), reverse=True)


def _settings(user: Record) -> Record:
    return {k: user[k] for k in ("is_private", "who_can_comment", "default_post_visibility")}


def _remove_follows_between(state: SocialState, a: str, b: str) -> int:
    removed = 0
    for follower, followee in ((a, b), (b, a)):
        found = _follow(state, follower, followee)
        if found is not None:
            state.follows.delete(found["id"])
            removed += 1
    return removed


# -- seed -----------------------------------------------------------------------------------------


def build_social(rng: random.Random, options: SocialOptions) -> SocialState:
    """You, the cast, the rest of the network, a follow graph, a month of posts with comments and
    likes, two pending requests to follow you and a block in each direction."""
    state = SocialState(salt=f"{rng.getrandbits(64):016x}")
    taken: set[str] = set()
    me = _seed_member(state, rng, taken, is_private=True, who_can_comment="everyone")
    state.set_var("me", me)
    cast = {role: _seed_member(state, rng, taken, is_private=private, who_can_comment=policy)
            for role, private, policy in CAST}
    crowd = [_seed_member(state, rng, taken, is_private=rng.random() < 0.2, who_can_comment="everyone")
             for _ in range(options.members - len(CAST))]
    _seed_graph(state, rng, me, cast, crowd)
    everyone = [me, *cast.values(), *crowd]
    for handle in everyone:
        _seed_posts(state, rng, handle, everyone, every_audience=handle in (me, cast["friend"]))
    return state


def _seed_member(state: SocialState, rng: random.Random, taken: set[str], *, is_private: bool,
                 who_can_comment: str) -> str:
    first, last = fake.person(rng)
    base = f"{first}_{last}".lower()
    handle = next(h for h in (base if n == 0 else f"{base}{n + 1}" for n in range(len(taken) + 1)) if h not in taken)
    taken.add(handle)
    city, _, _ = rng.choice(fake.CITIES)
    joined = fake.date_between(rng, dt.date(2014, 1, 1), state.today() - dt.timedelta(days=HISTORY_DAYS + 30))
    state.users.insert({
        "id": handle,
        "display_name": f"{first} {last}",
        "bio": rng.choice(BIOS),
        "location": city,
        "joined_on": joined.isoformat(),
        "is_private": is_private,
        "who_can_comment": who_can_comment,
        "default_post_visibility": "public",
    })
    return handle


def _seed_graph(state: SocialState, rng: random.Random, me: str, cast: dict[str, str], crowd: list[str]) -> None:
    def follow(follower: str, followee: str, status: str = "active") -> None:
        when = state.now() - dt.timedelta(days=rng.randint(HISTORY_DAYS, 700))
        state.follows.insert({"follower_id": follower, "followee_id": followee, "status": status,
                              "created_at": iso_datetime(when)})

    state.blocks.insert({"blocker_id": cast["blocker"], "blocked_id": me, "created_at": iso_datetime(state.now())})
    state.blocks.insert({"blocker_id": me, "blocked_id": cast["blocked"], "created_at": iso_datetime(state.now())})
    for role in ("friend", "close_friend", "no_comments"):
        follow(me, cast[role])
        follow(cast[role], me)
    follow(me, cast["requested"], "pending")
    for role in ("fan", "admirer"):
        follow(cast[role], me, "pending")
    for handle in crowd:
        if rng.random() < 0.4:
            follow(me, handle, "pending" if state.users.get(handle)["is_private"] else "active")
        if rng.random() < 0.3:
            follow(handle, me)
    others = [*cast.values(), *crowd]  # the rest of the network follows each other at random
    for handle in others:
        for other in rng.sample(others, k=min(len(others), rng.randint(2, 6))):
            if other == handle or _follow(state, handle, other):
                continue
            pending = state.users.get(other)["is_private"] and rng.random() < 0.2
            follow(handle, other, "pending" if pending else "active")


def _post_text(rng: random.Random) -> str:
    return rng.choice(POST_TEMPLATES).format(activity=rng.choice(ACTIVITIES), reaction=rng.choice(REACTIONS),
                                             place=rng.choice(PLACES), book=rng.choice(BOOKS),
                                             opinion=rng.choice(OPINIONS))


def _seed_posts(state: SocialState, rng: random.Random, handle: str, everyone: list[str], *,
                every_audience: bool) -> None:
    """Posts with likes and comments from members who could see them and are allowed to comment."""
    author = state.users.get(handle)
    # Everyone has a public post, so every member's rules can be tried on one.
    audiences = ["public", "followers", "private"] if every_audience else ["public"]
    audiences += [rng.choice(("public", "public", "followers", "private")) for _ in range(rng.randint(0, 3))]
    followers = [f["follower_id"] for f in state.follows.where(followee_id=handle, status="active")]
    for visibility in audiences:
        created = state.now() - dt.timedelta(minutes=rng.randint(30, HISTORY_DAYS * 24 * 60))
        post = state.posts.insert({"author_id": handle, "text": _post_text(rng), "visibility": visibility,
                                   "created_at": iso_datetime(created)})
        if visibility == "private":
            continue
        readers = everyone if visibility == "public" and not author["is_private"] else followers
        # Sample first, then drop the author and anyone in a block with them: never a scan per post.
        for liker in rng.sample(readers, k=min(len(readers), rng.randint(0, 5))):
            if liker != handle and not _feud(state, liker, handle):
                state.likes.insert({"post_id": post["id"], "user_id": liker, "created_at": iso_datetime(created)})
        policy = author["who_can_comment"]
        commenters = [] if policy == "nobody" else readers if policy == "everyone" else followers
        for n, commenter in enumerate(rng.sample(commenters, k=min(len(commenters), rng.randint(0, 3)))):
            if commenter != handle and not _feud(state, commenter, handle):
                state.comments.insert({"post_id": post["id"], "author_id": commenter, "text": rng.choice(COMMENTS),
                                       "created_at": iso_datetime(created + dt.timedelta(minutes=5 + 7 * n))})


def _feud(state: SocialState, a: str, b: str) -> bool:
    return _has_blocked(state, a, b) or _has_blocked(state, b, a)


# -- examples: arguments valid on a fresh seed of any size ------------------------------------------


def _followed(s: SocialState, *, private: bool) -> str:
    me = _me(s)
    for follow in s.follows.where(follower_id=me, status="active"):
        if s.users.get(follow["followee_id"])["is_private"] is private:
            return follow["followee_id"]
    raise LookupError("you follow nobody of that kind")


def _unfollowed(s: SocialState, *, private: bool) -> str:
    """A member you neither follow nor asked to follow, with no block either way."""
    me = _me(s)
    for user in s.users.where(is_private=private):
        if user["id"] != me and _follow(s, me, user["id"]) is None and not _feud(s, me, user["id"]):
            return user["id"]
    raise LookupError("no such member")


def _commentable_post(s: SocialState) -> str:
    """A post by someone you follow that you can see and comment on, and have not liked."""
    me = _me(s)
    for follow in s.follows.where(follower_id=me, status="active"):
        author = s.users.get(follow["followee_id"])
        if author["who_can_comment"] == "nobody":
            continue
        for post in s.posts.where(lambda p: p["visibility"] != "private", author_id=author["id"]):
            if s.likes.first(post_id=post["id"], user_id=me) is None:
                return post["id"]
    raise LookupError("no post to comment on")


def _liked_post(s: SocialState) -> str:
    """A post you liked: likes you gave in the seed, or one given now."""
    found = s.likes.first(user_id=_me(s))
    if found is None:
        post_id = _commentable_post(s)
        like_post(s, post_id)
        return post_id
    return found["post_id"]


def _own_post(s: SocialState, visibility: str = "public") -> str:
    return s.posts.first(author_id=_me(s), visibility=visibility)["id"]


# -- how members ask, and what they write -----------------------------------------------------------

DISPLAY_NAMES = ("Sam R.", "Priya K.", "Coach Dan", "Lu Chen", "Tomasz the Baker", "Maya Writes", "J. Okafor",
                 "Ren at Sea", "Ana B.", "Kai on Trails")
LOCATIONS = ("Lisbon", "Brooklyn, NY", "Austin, TX", "Toronto", "Melbourne", "Portland, OR", "Berlin", "Mexico City",
             "Seattle", "Cape Town")
VISIBILITIES = ("public", "followers", "private")
COMMENT_POLICIES = ("everyone", "followers", "nobody")
POST_ASKS = {
    None: ('post "{text}"', 'share "{text}" on my profile', 'put up a new post saying "{text}"'),
    "public": ('post "{text}" publicly', 'share "{text}" with everyone', 'publish a public post: "{text}"'),
    "followers": ('post "{text}" for my followers only', 'share "{text}" with just my followers',
                  'publish "{text}" so only people who follow me see it'),
    "private": ('save "{text}" as a private post only I can see', 'post "{text}" privately, just for me',
                'write a private post that says "{text}"'),
}
PRIVACY_ASKS = {
    "is_private": {True: ("make my account private", "switch my account to private",
                          "lock my account so only approved followers see my posts"),
                   False: ("make my account public", "switch my account back to public",
                           "open my account up to everyone")},
    "who_can_comment": ("let {who_can_comment} comment on my posts", "change who can comment on my posts to "
                        "{who_can_comment}", "set my comment permissions to {who_can_comment}"),
    "default_post_visibility": {"public": ("make my new posts public by default", "have my posts default to public",
                                           "set my default audience to everyone"),
                                "followers": ("make my new posts followers-only by default",
                                              "have my posts default to followers only",
                                              "set my default audience to just my followers"),
                                "private": ("make my new posts private by default", "have my posts default to private",
                                            "set my default audience to only me")},
}


def _privacy_asks(a: Any) -> tuple[str, ...]:
    """One phrase per setting the call changes, joined: the wording says each new value."""
    parts = []
    for key, phrases in PRIVACY_ASKS.items():
        if a.get(key) is not None:
            parts.append(phrases[a[key]] if isinstance(phrases, dict) else phrases)
    if not parts:
        return PRIVACY_ASKS["who_can_comment"]
    return tuple(", ".join(p[i] for p in parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1][i]
                 for i in range(3))


# -- the server and its tools ----------------------------------------------------------------------

server = Server(
    "social_media",
    domain="social",
    description="A social network for one signed-in member: profiles, posts for the public, followers or "
    "yourself, comments, likes, follows and follow requests, a home feed, privacy settings and blocking.",
    state=SocialState,
    seed=build_social,
    options=SocialOptions,
)

UserId = Annotated[str, ref("user", "Handle of the member, which is their user id (e.g. maria_silva); from a "
                                    "post's author_id or the home feed.")]
PostId = Annotated[str, ref("post", "Id of the post (pst_...), from get_home_feed, list_user_posts or create_post.")]
Limit = Annotated[int, Field(ge=1, le=50, description="Page size: how many posts to return (1-50).")]
Offset = Annotated[int, Field(ge=0, description="How many posts to skip; pass next_offset from the previous page.")]


@server.tool(
    answers=("bio", "follower_count", "following_count", "post_count"),
    read_only=True,
    reads=["user", "follow", "block", "post"],
    errors=["USER_NOT_FOUND", "BLOCKED"],
    examples=[{}, lambda s: {"user_id": _followed(s, private=False)},
              lambda s: {"user_id": s.blocks.first(blocker_id=_me(s))["blocked_id"]}],
    asks=lambda a: (
        ("show me the profile of {user_id}", "look up {user_id}",
         "pull up {user_id} and tell me whether we follow each other", "check how many followers {user_id} has")
        if a.get("user_id")
        else ("show me my profile", "pull up my own profile and settings",
              "show me who is waiting for me to approve their follow request",
              "tell me how many followers I have right now")),
)
def get_profile(
    state: SocialState,
    user_id: Annotated[str | None, ref("user", "Handle of the member to look up; omit for your own profile.")] = None,
) -> dict:
    """A member's profile: handle, display name, bio, location, join date, whether the account is
    private, follower/following/post counts, and your relationship (you_follow: following,
    requested or null; follows_you; you_blocked). Your own profile also has your privacy settings
    and the handles waiting for you to approve their follow request. Fails with USER_NOT_FOUND or
    BLOCKED (the member has blocked you)."""
    me = _me(state)
    user = _member(state, user_id) if user_id else state.users.get(me)
    handle = user["id"]
    if handle != me:
        require(not _has_blocked(state, handle, me), f"@{handle} has blocked you", reason="BLOCKED",
                error=PermissionDenied, blocked_by=handle)
    profile = {
        **user,
        "follower_count": len(state.follows.where(followee_id=handle, status="active")),
        "following_count": len(state.follows.where(follower_id=handle, status="active")),
        "post_count": len(state.posts.where(author_id=handle)),
    }
    if handle == me:
        pending = state.follows.where(followee_id=me, status="pending")
        return {**profile, "is_you": True, "settings": _settings(user),
                "pending_follow_requests": [f["follower_id"] for f in pending]}
    mine = _follow(state, me, handle)
    for key in ("who_can_comment", "default_post_visibility"):  # someone else's settings are theirs
        profile.pop(key)
    return {**profile, "is_you": False, "relationship": {
        "you_follow": None if mine is None else {"active": "following", "pending": "requested"}[mine["status"]],
        "follows_you": _follows(state, handle, me),
        "you_blocked": _has_blocked(state, me, handle),
    }}


@server.tool(
    idempotent=True,
    reads=["user"],
    mutates=["user"],
    errors=["NOTHING_TO_UPDATE", "EMPTY_TEXT"],
    examples=[{"bio": "Trail runner, terrible cook, very good dog."},
              {"display_name": "Sam R.", "location": "Lisbon"}],
    asks=('change my bio to "{bio}"', "update my display name to {display_name} and my location to {location}",
          "set my location to {location}", "make my profile name {display_name}",
          'rewrite my bio as "{bio}" and show {location} as where I live'),
    values={"bio": lambda rng, s: rng.choice(BIOS), "display_name": lambda rng, s: rng.choice(DISPLAY_NAMES),
            "location": lambda rng, s: rng.choice(LOCATIONS)},
)
def update_profile(
    state: SocialState,
    bio: Annotated[str | None, Field(max_length=160, description="New bio, at most 160 characters; "
                                                                 "an empty string clears it.")] = None,
    display_name: Annotated[str | None, Field(min_length=1, max_length=50, description="New display name.")] = None,
    location: Annotated[str | None, Field(max_length=60, description="New location shown on the profile.")] = None,
) -> dict:
    """Update your own profile: bio, display name and/or location (only the fields given change).
    Returns your profile. Fails with NOTHING_TO_UPDATE when no field is given, EMPTY_TEXT for a
    blank display name."""
    changes = {k: v.strip() for k, v in (("bio", bio), ("display_name", display_name), ("location", location))
               if v is not None}
    require(bool(changes), "pass bio, display_name or location", reason="NOTHING_TO_UPDATE", error=InvalidArgument)
    if display_name is not None:
        _clean_text(display_name, "display name")
    return state.users.update(_me(state), **changes)


@server.tool(
    idempotent=True,
    reads=["user", "follow"],
    mutates=["user", "follow"],
    errors=["NOTHING_TO_UPDATE"],
    examples=[{"is_private": False}, {"who_can_comment": "followers", "default_post_visibility": "followers"}],
    asks=_privacy_asks,
    values={"who_can_comment": lambda rng, s: rng.choice(COMMENT_POLICIES),
            "default_post_visibility": lambda rng, s: rng.choice(VISIBILITIES)},
)
def update_privacy_settings(
    state: SocialState,
    is_private: Annotated[bool | None, Field(description="true: only approved followers see your posts and "
                                                         "following you needs your approval.")] = None,
    who_can_comment: Annotated[CommentPolicy | None, Field(description="Who may comment on your posts.")] = None,
    default_post_visibility: Annotated[Visibility | None, Field(description="Audience of a new post when "
                                                                          "create_post is not told one.")] = None,
) -> dict:
    """Change your privacy settings (only the ones given). Making a private account public approves
    every pending follow request at once. Returns the settings and the handles whose requests were
    approved. Fails with NOTHING_TO_UPDATE when no setting is given."""
    changes = {k: v for k, v in (("is_private", is_private), ("who_can_comment", who_can_comment),
                                 ("default_post_visibility", default_post_visibility)) if v is not None}
    require(bool(changes), "pass is_private, who_can_comment or default_post_visibility", reason="NOTHING_TO_UPDATE",
            error=InvalidArgument)
    me = _me(state)
    approved = []
    if changes.get("is_private") is False:
        for request in state.follows.where(followee_id=me, status="pending"):
            state.follows.update(request["id"], status="active")
            approved.append(request["follower_id"])
    user = state.users.update(me, **changes)
    return {"settings": _settings(user), "approved_follow_requests": approved}


@server.tool(
    idempotent=True,  # the same text again within 24 hours is refused with DUPLICATE_POST
    reads=["user", "post"],
    produces=["post"],
    errors=["EMPTY_TEXT", "POST_TOO_LONG", "DUPLICATE_POST"],
    examples=[{"text": "First swim of the year at Lake Wren. Cold but glorious!", "visibility": "public"},
              {"text": "Family dinner tonight, phones off."}],
    asks=lambda a: POST_ASKS[a.get("visibility")],
    values={"text": lambda rng, s: _post_text(rng), "visibility": lambda rng, s: rng.choice(VISIBILITIES)},
)
def create_post(
    state: SocialState,
    text: Annotated[str, Field(min_length=1, description=f"The post, at most {MAX_POST_CHARS} characters.")],
    visibility: Annotated[Visibility | None, Field(description="Who can see it: public, followers (approved followers "
                                                               "only) or private (only you). Omit to use your "
                                                               "default_post_visibility setting.")] = None,
) -> dict:
    """Publish a post. Returns it with its id. Fails with POST_TOO_LONG (over 500 characters),
    EMPTY_TEXT, or DUPLICATE_POST (you posted the same text in the last 24 hours)."""
    text = _clean_text(text, "post")
    require(len(text) <= MAX_POST_CHARS, f"the post has {len(text)} characters; the limit is {MAX_POST_CHARS}",
            reason="POST_TOO_LONG", error=InvalidArgument, length=len(text), limit=MAX_POST_CHARS)
    me = state.users.get(_me(state))
    since = iso_datetime(state.now() - DUPLICATE_WINDOW)
    twin = state.posts.first(lambda p: p["text"] == text and p["created_at"] >= since, author_id=me["id"])
    if twin is not None:
        raise Conflict(f"you already posted this text ({twin['id']})", reason="DUPLICATE_POST", post_id=twin["id"])
    post = state.posts.insert({"author_id": me["id"], "text": text,
                               "visibility": visibility or me["default_post_visibility"],
                               "created_at": iso_datetime(state.now())})
    return _post_view(state, post, me)


@server.tool(
    answers=("text", "like_count", "comment_count"),
    read_only=True,
    reads=["post", "user", "follow", "block", "comment", "like"],
    errors=["POST_NOT_FOUND", "BLOCKED", "POST_NOT_VISIBLE"],
    examples=[lambda s: {"post_id": _commentable_post(s)}, lambda s: {"post_id": _own_post(s, "private")}],
    asks=("show me {post_id}", "open {post_id} with its comments", "tell me how many likes {post_id} has",
          "let me read {post_id} and what people said under it"),
)
def get_post(state: SocialState, post_id: PostId) -> dict:
    """One post with its author, audience, like count, whether you liked it, and its comments
    (oldest first; comments by members blocked either way are left out). Fails with
    POST_NOT_FOUND, BLOCKED, or POST_NOT_VISIBLE (a private post, a followers-only post or a
    private account's post you may not see)."""
    post, author = _visible_post(state, post_id)
    me = _me(state)
    comments = [c for c in state.comments.where(post_id=post_id) if not _feud(state, me, c["author_id"])]
    return {**_post_view(state, post, author), "comments": sorted(comments, key=lambda c: (c["created_at"], c["id"]))}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing (POST_NOT_FOUND)
    reads=["post"],
    mutates=["post", "comment", "like"],
    errors=["POST_NOT_FOUND", "NOT_POST_AUTHOR"],
    examples=[lambda s: {"post_id": _own_post(s)}],
    asks=("delete {post_id}", "take down {post_id}", "remove {post_id} from my profile for good",
          "get rid of {post_id} and everything on it"),
)
def delete_post(state: SocialState, post_id: PostId) -> dict:
    """Delete one of your posts, with its comments and likes, for good. Returns the deleted post's
    id and how many comments and likes went with it. Fails with POST_NOT_FOUND or NOT_POST_AUTHOR
    (you can only delete your own posts)."""
    post = state.posts.get(post_id)
    require(post["author_id"] == _me(state), f"post {post_id} is by @{post['author_id']}; you can only delete yours",
            reason="NOT_POST_AUTHOR", error=PermissionDenied, author_id=post["author_id"])
    comments, likes = state.comments.where(post_id=post_id), state.likes.where(post_id=post_id)
    for comment in comments:
        state.comments.delete(comment["id"])
    for like in likes:
        state.likes.delete(like["id"])
    state.posts.delete(post_id)
    return {"deleted": True, "post_id": post_id, "comments_removed": len(comments), "likes_removed": len(likes)}


@server.tool(
    answers=("text", "like_count", "comment_count"),
    read_only=True,
    reads=["user", "post", "follow", "block", "comment", "like"],
    errors=["USER_NOT_FOUND", "BLOCKED", "ACCOUNT_PRIVATE"],
    examples=[lambda s: {"user_id": _followed(s, private=False)},
              lambda s: {"user_id": _me(s), "limit": 2}],
    asks=("show me the posts of {user_id}", "show me what {user_id} has been posting lately",
          "list the latest {limit} posts by {user_id}", "show {limit} more posts by {user_id}, skipping the first "
          "{offset}", "scroll through what {user_id} has shared"),
)
def list_user_posts(state: SocialState, user_id: UserId, limit: Limit = 20, offset: Offset = 0) -> dict:
    """One page of a member's posts that you may see, newest first (followers-only posts need you
    to follow them; private posts show only on your own page). Returns the posts, the total and
    next_offset. Fails with USER_NOT_FOUND, BLOCKED, or ACCOUNT_PRIVATE (a private account you do
    not follow: send a follow request with follow_user)."""
    me = _me(state)
    author = _member(state, user_id)
    handle = author["id"]
    if handle != me:
        _require_no_block(state, handle)
        require(not author["is_private"] or _follows(state, me, handle),
                f"@{handle} is a private account; only approved followers see their posts", reason="ACCOUNT_PRIVATE",
                error=PermissionDenied)
    visible = [p for p in state.posts.where(author_id=handle) if _can_see(state, me, p, author)]
    page = paginate(_newest_first(visible), limit=limit, offset=offset, key="posts")
    page["posts"] = [_post_view(state, p, author) for p in page["posts"]]
    return {"user_id": handle, **page}


@server.tool(
    answers=("author_name", "text"),
    read_only=True,
    reads=["follow", "post", "user", "block", "comment", "like"],
    examples=[{}, {"limit": 5, "offset": 5}],
    asks=("show me my feed", "check what's new on my home feed", "load the latest {limit} posts in my feed",
          "show me {limit} more feed posts after the first {offset}", "catch me up on posts from people I follow"),
)
def get_home_feed(state: SocialState, limit: Limit = 20, offset: Offset = 0) -> dict:
    """Your home feed: posts by the members you follow (approved follows only) and your own, that
    you may see, newest first. Returns one page of posts (id, author, text, audience, like and
    comment counts, liked_by_me), the total and next_offset (null on the last page)."""
    me = _me(state)
    authors = [me, *(f["followee_id"] for f in state.follows.where(follower_id=me, status="active"))]
    posts = []
    for handle in authors:
        author = state.users.get(handle)
        posts += [(p, author) for p in state.posts.where(author_id=handle) if _can_see(state, me, p, author)]
    posts.sort(key=lambda pa: (pa[0]["created_at"], pa[0]["id"]), reverse=True)
    page = paginate(posts, limit=limit, offset=offset, key="posts")
    page["posts"] = [_post_view(state, p, a) for p, a in page["posts"]]
    return page


@server.tool(
    reads=["post", "user", "follow", "block"],
    produces=["comment"],
    errors=["POST_NOT_FOUND", "BLOCKED", "POST_NOT_VISIBLE", "COMMENTS_RESTRICTED", "EMPTY_TEXT"],
    examples=[lambda s: {"post_id": _commentable_post(s), "text": "This looks amazing, where was it?"}],
    asks=('comment "{text}" on {post_id}', 'reply to {post_id} with "{text}"',
          'leave a comment on {post_id} saying "{text}"', 'write "{text}" under {post_id}'),
    values={"text": lambda rng, s: rng.choice(COMMENTS)},
)
def add_comment(
    state: SocialState,
    post_id: PostId,
    text: Annotated[str, Field(min_length=1, max_length=300, description="The comment, at most 300 characters.")],
) -> dict:
    """Comment on a post you can see. Returns the comment and the post's new comment count. Fails
    with POST_NOT_FOUND, BLOCKED, POST_NOT_VISIBLE, EMPTY_TEXT, or COMMENTS_RESTRICTED (the author
    allows comments only from followers, or from nobody)."""
    post, author = _visible_post(state, post_id)
    text = _clean_text(text, "comment")
    me = _me(state)
    policy = author["who_can_comment"]
    follower = _follows(state, me, author["id"])
    allowed = author["id"] == me or policy == "everyone" or (policy == "followers" and follower)
    require(allowed, f"@{author['id']} allows comments from {'nobody' if policy == 'nobody' else 'followers only'}",
            reason="COMMENTS_RESTRICTED", error=PermissionDenied, who_can_comment=policy)
    comment = state.comments.insert({"post_id": post_id, "author_id": me, "text": text,
                                     "created_at": iso_datetime(state.now())})
    return {"comment": comment, "comment_count": len(state.comments.where(post_id=post_id))}


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_LIKED
    reads=["post", "user", "follow", "block"],
    produces=["like"],
    errors=["POST_NOT_FOUND", "BLOCKED", "POST_NOT_VISIBLE", "ALREADY_LIKED"],
    examples=[lambda s: {"post_id": _commentable_post(s)}],
    asks=("like {post_id}", "give {post_id} a like", "hit like on {post_id}", "heart {post_id} for me"),
)
def like_post(state: SocialState, post_id: PostId) -> dict:
    """Like a post you can see. Returns the post id, liked: true and the new like count. Fails with
    POST_NOT_FOUND, BLOCKED, POST_NOT_VISIBLE or ALREADY_LIKED."""
    _visible_post(state, post_id)
    me = _me(state)
    require(state.likes.first(post_id=post_id, user_id=me) is None, f"you already like post {post_id}",
            reason="ALREADY_LIKED", error=Conflict)
    state.likes.insert({"post_id": post_id, "user_id": me, "created_at": iso_datetime(state.now())})
    return {"post_id": post_id, "liked": True, "like_count": len(state.likes.where(post_id=post_id))}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with NOT_LIKED
    reads=["post"],
    mutates=["like"],
    errors=["POST_NOT_FOUND", "NOT_LIKED"],
    examples=[lambda s: {"post_id": _liked_post(s)}],
    asks=("unlike {post_id}", "take my like off {post_id}", "remove my like from {post_id}",
          "undo the like I gave {post_id}"),
)
def unlike_post(state: SocialState, post_id: PostId) -> dict:
    """Take back your like of a post. Returns the post id, liked: false and the new like count.
    Fails with POST_NOT_FOUND or NOT_LIKED."""
    state.posts.get(post_id)
    like = state.likes.first(post_id=post_id, user_id=_me(state))
    require(like is not None, f"you do not like post {post_id}", reason="NOT_LIKED")
    state.likes.delete(like["id"])
    return {"post_id": post_id, "liked": False, "like_count": len(state.likes.where(post_id=post_id))}


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_FOLLOWING or FOLLOW_REQUEST_PENDING
    reads=["user", "follow", "block"],
    produces=["follow"],
    errors=["USER_NOT_FOUND", "CANNOT_FOLLOW_SELF", "BLOCKED", "ALREADY_FOLLOWING", "FOLLOW_REQUEST_PENDING"],
    examples=[lambda s: {"user_id": _unfollowed(s, private=False)},
              lambda s: {"user_id": _unfollowed(s, private=True)}],
    asks=("follow {user_id}", "start following {user_id}", "send a follow request to {user_id}",
          "add {user_id} to the people I follow"),
)
def follow_user(state: SocialState, user_id: UserId) -> dict:
    """Follow a member. A public account is followed at once (status following); a private account
    gets a follow request it must approve (status requested). Fails with CANNOT_FOLLOW_SELF,
    BLOCKED, ALREADY_FOLLOWING or FOLLOW_REQUEST_PENDING."""
    me = _me(state)
    target = _member(state, user_id)
    handle = target["id"]
    require(handle != me, "you cannot follow yourself", reason="CANNOT_FOLLOW_SELF", error=InvalidArgument)
    _require_no_block(state, handle)
    existing = _follow(state, me, handle)
    if existing is not None and existing["status"] == "active":
        raise Conflict(f"you already follow @{handle}", reason="ALREADY_FOLLOWING")
    if existing is not None:
        raise Conflict(f"your request to follow @{handle} is waiting for their approval",
                       reason="FOLLOW_REQUEST_PENDING")
    status = "pending" if target["is_private"] else "active"
    state.follows.insert({"follower_id": me, "followee_id": handle, "status": status,
                          "created_at": iso_datetime(state.now())})
    return {"user_id": handle, "status": {"active": "following", "pending": "requested"}[status]}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with NOT_FOLLOWING
    reads=["user", "follow"],
    mutates=["follow"],
    errors=["USER_NOT_FOUND", "NOT_FOLLOWING"],
    examples=[lambda s: {"user_id": _followed(s, private=True)},
              lambda s: {"user_id": s.follows.first(follower_id=_me(s), status="pending")["followee_id"]}],
    asks=("unfollow {user_id}", "stop following {user_id}", "drop {user_id} from the people I follow",
          "cancel my follow or follow request for {user_id}"),
)
def unfollow_user(state: SocialState, user_id: UserId) -> dict:
    """Stop following a member, or withdraw a pending follow request. Returns what was undone
    (unfollowed or request_withdrawn). Fails with NOT_FOLLOWING when you neither follow them nor
    asked to."""
    handle = _member(state, user_id)["id"]
    existing = _follow(state, _me(state), handle)
    require(existing is not None, f"you do not follow @{handle}", reason="NOT_FOLLOWING")
    state.follows.delete(existing["id"])
    return {"user_id": handle, "result": "unfollowed" if existing["status"] == "active" else "request_withdrawn"}


@server.tool(
    destructive=True,  # removes the follows between you, both ways
    idempotent=True,  # a repeat is refused with ALREADY_BLOCKED
    reads=["user", "block", "follow"],
    produces=["block"],
    mutates=["follow"],
    errors=["USER_NOT_FOUND", "CANNOT_BLOCK_SELF", "ALREADY_BLOCKED"],
    examples=[lambda s: {"user_id": _followed(s, private=False)}],
    asks=("block {user_id}", "block {user_id} so they can't see my posts any more", "cut {user_id} off completely",
          "put a block on {user_id}"),
)
def block_user(state: SocialState, user_id: UserId) -> dict:
    """Block a member: they can no longer see your posts or profile, comment, like or follow you,
    and you stop seeing theirs. Follows and follow requests between you are removed both ways (an
    unblock does not restore them). Fails with CANNOT_BLOCK_SELF or ALREADY_BLOCKED."""
    me = _me(state)
    handle = _member(state, user_id)["id"]
    require(handle != me, "you cannot block yourself", reason="CANNOT_BLOCK_SELF", error=InvalidArgument)
    require(not _has_blocked(state, me, handle), f"you already blocked @{handle}", reason="ALREADY_BLOCKED",
            error=Conflict)
    removed = _remove_follows_between(state, me, handle)
    state.blocks.insert({"blocker_id": me, "blocked_id": handle, "created_at": iso_datetime(state.now())})
    return {"user_id": handle, "blocked": True, "follows_removed": removed}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with NOT_BLOCKED
    reads=["user", "block"],
    mutates=["block"],
    errors=["USER_NOT_FOUND", "NOT_BLOCKED"],
    examples=[lambda s: {"user_id": s.blocks.first(blocker_id=_me(s))["blocked_id"]}],
    asks=("unblock {user_id}", "lift my block on {user_id}", "remove the block I put on {user_id}"),
)
def unblock_user(state: SocialState, user_id: UserId) -> dict:
    """Unblock a member you blocked. Follows removed by the block stay removed. Fails with
    NOT_BLOCKED when you have not blocked them."""
    handle = _member(state, user_id)["id"]
    block = state.blocks.first(blocker_id=_me(state), blocked_id=handle)
    require(block is not None, f"you have not blocked @{handle}", reason="NOT_BLOCKED")
    state.blocks.delete(block["id"])
    return {"user_id": handle, "blocked": False}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
