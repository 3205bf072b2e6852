"""issue_tracker — a team issue tracker: projects and their members, issues with a workflow,
assignees, labels, comments, watchers, links between issues and sprints.

The signed-in user (the var ``me``) is a member of every project; issues they create list them
as reporter and watcher, and comments they write carry their name. An issue's id is its key
(``WEB-12``). The workflow is open → in_progress → in_review → done, with the way back from
review to in_progress, from in_progress to open, and from done to open (reopen); anything else is
INVALID_TRANSITION. An issue that an unfinished issue blocks cannot be done. Only project members
can be assigned or watch an issue, labels come from the project's label set, each project runs at
most one sprint at a time, and an archived project is read-only.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    ISO_DATE,
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    Record,
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
)

# -- vocabulary -----------------------------------------------------------------------------------

Status = Literal["open", "in_progress", "in_review", "done"]
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "open": ("in_progress",),
    "in_progress": ("in_review", "open"),
    "in_review": ("done", "in_progress"),
    "done": ("open",),
}
IssueType = Literal["bug", "task", "story"]
Priority = Literal["low", "medium", "high", "critical"]
PRIORITY_RANK = {"critical": 0, "high": 1, "medium": 2, "low": 3}
Resolution = Literal["fixed", "wont_fix", "duplicate"]
LinkType = Literal["blocks", "relates_to", "duplicates"]
StoryPoints = Literal[0, 1, 2, 3, 5, 8, 13, 21]
SprintStatus = Literal["planned", "active", "completed"]
MAX_SPRINT_DAYS = 28

PROJECTS = (
    ("WEB", "Website Redesign", "The marketing site and customer portal rebuild."),
    ("MOB", "Mobile App", "iOS and Android apps for customers."),
    ("API", "Public API", "The REST API partners integrate with."),
    ("DATA", "Data Platform", "Pipelines, warehouse and reporting."),
    ("OPS", "Infrastructure", "Clusters, CI/CD and on-call tooling."),
    ("PAY", "Payments", "Checkout, invoicing and payouts."),
    ("SRCH", "Search", "Indexing and the search experience."),
    ("AUTH", "Identity", "Sign-in, SSO and permissions."),
)
LABELS = ("frontend", "backend", "ux", "performance", "security", "tech-debt", "customer-reported", "accessibility")
ROLES = ("engineer", "engineer", "engineer", "designer", "product_manager", "qa")
SUBJECTS = ("login page", "checkout flow", "search results", "settings screen", "export job", "notification service",
            "billing webhook", "profile editor", "dashboard charts", "password reset", "image uploads", "audit log",
            "rate limiter", "onboarding tour", "CSV import", "dark mode")
BUG_TEMPLATES = ("{s} crashes on empty input", "{s} is slow with large accounts", "{s} shows the wrong timezone",
                 "Typo and broken link on {s}", "{s} fails on Safari")
TASK_TEMPLATES = ("Add metrics to {s}", "Refactor {s}", "Upgrade dependencies of {s}", "Write tests for {s}")
STORY_TEMPLATES = ("As a user I can filter the {s}", "Redesign the {s}", "Support bulk actions in {s}",
                   "Add keyboard shortcuts to {s}")
COMMENTS = ("I can reproduce this on staging.", "Fixed in the latest build, please verify.",
            "Blocked until the API change ships.", "Design attached in Figma.", "Let's pair on this tomorrow.",
            "Moved to next sprint, it's bigger than expected.", "LGTM once the tests pass.")
# Free values users choose when they file, edit or plan work (for synthesis).
# New issues as a team files them: (title, type), and what they write, how urgent, how big.
NEW_ISSUES = (("Checkout button misaligned on mobile", "bug"), ("Add CSV export to reports", "story"),
              ("Password reset email never arrives", "bug"), ("Dashboard charts flicker on resize", "bug"),
              ("Support SSO login for enterprise accounts", "story"), ("Search ignores accented characters", "bug"),
              ("Rate limiter blocks internal health checks", "bug"), ("Add audit log entries for role changes", "story"),
              ("Dark mode contrast too low on buttons", "bug"), ("Image uploads over 10 MB time out", "bug"),
              ("Migrate the export job to the new queue", "task"), ("Profile editor loses unsaved changes", "bug"),
              ("Add keyboard shortcuts to the settings screen", "story"), ("Onboarding tour skips the last step", "bug"),
              ("Upgrade the database driver", "task"), ("Rotate the staging API keys", "task"))
ISSUE_WRITEUPS = {  # type: (descriptions, priorities, story points)
    "bug": (("Happens every time on staging; steps in the thread.", "Customers reported this twice this week.",
             "Repro: open the page on a slow connection.", "Started after the last release; probably a regression."),
            ("medium", "high", "high", "critical"), (1, 2, 3, 5)),
    "story": (("Needs a design review before we build it.", "Asked for by three enterprise customers.",
               "Blocked on the API change; see the linked issue."), ("low", "medium", "medium", "high"), (3, 5, 8, 13)),
    "task": (("Low effort, good first issue.", "Blocked on the API change; see the linked issue.",
              "Needed before the next release."), ("low", "medium", "high"), (1, 2, 3, 5)),
}
SPRINT_NAMES = ("Hardening week", "Launch prep", "Bug bash", "Spring polish", "Beta push", "Q2 kickoff",
                "Performance pass", "Cleanup sprint", "Release candidate", "Onboarding revamp")
SPRINT_GOALS = ("Burn down the top bugs", "Ship the beta to first customers", "Get p95 latency under 300 ms",
                "Close every customer-reported issue", "Finish the redesign of the settings screen",
                "Pay down tech debt in the export job", "Get the release candidate through QA")
NEW_COMMENTS = (*COMMENTS, "Reviewed: two small nits inline.", "Can we get a screenshot of the error?",
                "Still happening on the latest build.", "I'll take this one after standup.",
                "Bumping this, customers keep asking.")
# Seeded issues per project, in order: status, type. Every project gets every status.
ISSUE_PLAN = (
    ("open", "bug"), ("open", "task"), ("open", "story"), ("open", "bug"), ("open", "task"),
    ("in_progress", "story"), ("in_progress", "bug"), ("in_progress", "task"),
    ("in_review", "story"), ("in_review", "bug"),
    ("done", "task"), ("done", "bug"), ("done", "story"), ("done", "task"),
)

IssueId = Annotated[str, ref("issue", "Key of the issue, e.g. 'WEB-12', from search_issues or create_issue.")]
ProjectId = Annotated[str, ref("project", "Id of the project (prj_...), from list_projects.")]
SprintId = Annotated[str, ref("sprint", "Id of the sprint (spr_...), from list_sprints.")]
UserId = Annotated[str, ref("user", "Id of a user (usr_...), from get_project's members.")]
Limit = Annotated[int, Field(ge=1, le=50, description="Page size.")]
Offset = Annotated[int, Field(ge=0, description="Results to skip; pass the previous next_offset.")]


# -- state and seed -------------------------------------------------------------------------------


class TrackerState(State):
    users = Table("user", prefix="usr")
    projects = Table("project", prefix="prj")
    issues = Table("issue", prefix="iss", index=("project_id", "status", "assignee_id", "sprint_id"))
    comments = Table("comment", prefix="cmt", index=("issue_id",))
    links = Table("link", prefix="lnk", index=("source_id", "target_id"))
    sprints = Table("sprint", prefix="spr", index=("project_id", "status"))


@attrs.frozen(kw_only=True)
class TrackerOptions:
    """Seed size: how many projects (14 issues and 3 sprints each; every third one archived)."""

    projects: int = attrs.field(default=3, validator=attrs.validators.gt(0))


def build_tracker(rng: random.Random, options: TrackerOptions) -> TrackerState:
    """Users, projects with members and labels, issues in every status with comments and
    watchers, a completed, an active and a planned sprint per project, and issue links (one
    unfinished issue blocks one in review)."""
    state = TrackerState(salt=str(rng.random()))
    users = _seed_users(state, rng, 6 + 2 * options.projects)
    state.set_var("me", users[0]["id"])
    order = rng.sample(range(len(PROJECTS)), k=len(PROJECTS))
    for index in range(options.projects):
        key, name, about = PROJECTS[order[index % len(PROJECTS)]]
        if index >= len(PROJECTS):
            key, name = f"{key}{index // len(PROJECTS) + 1}", f"{name} {index // len(PROJECTS) + 1}"
        _seed_project(state, rng, users, key, name, about, archived=index % 3 == 2)
    return state


def _seed_users(state: TrackerState, rng: random.Random, count: int) -> list[Record]:
    users, emails = [], set()
    for n in range(count):
        name = fake.full_name(rng)
        users.append(state.users.insert({"name": name, "email": fake.email_for(name, rng, emails),
                                         "role": "engineer" if n == 0 else rng.choice(ROLES)}))
    return users


def _seed_project(state: TrackerState, rng: random.Random, users: list[Record], key: str, name: str, about: str,
                  *, archived: bool) -> None:
    me = users[0]
    others = rng.sample(users[1:], k=min(len(users) - 1, rng.randint(3, 5)))
    members = [me["id"], *[u["id"] for u in others]]
    created = state.now() - dt.timedelta(days=rng.randint(120, 500))
    project = state.projects.insert({
        "key": key, "name": name, "description": about, "lead_id": others[0]["id"], "member_ids": members,
        "labels": sorted(rng.sample(LABELS, k=5)), "archived": archived, "created_at": iso_datetime(created),
    })
    sprints = _seed_sprints(state, rng, project)
    issues = [_seed_issue(state, rng, project, status, kind, sprints, first=n == 0)
              for n, (status, kind) in enumerate(ISSUE_PLAN)]
    # The second open issue blocks the first one in review; related and duplicate links for variety.
    blocker, blocked = issues[1], issues[8]
    for source, target, kind in ((blocker, blocked, "blocks"), (issues[2], issues[5], "relates_to"),
                                 (issues[3], issues[11], "duplicates")):
        state.links.insert({"source_id": source["id"], "target_id": target["id"], "type": kind,
                            "created_by": me["id"], "created_at": iso_datetime(state.now() - dt.timedelta(days=3))})


def _seed_sprints(state: TrackerState, rng: random.Random, project: Record) -> dict[str, Record]:
    today = state.today()
    number = rng.randint(8, 30)
    start = today - dt.timedelta(days=rng.randint(2, 9))  # the active sprint began this many days ago
    plans = (("completed", number - 1, start - dt.timedelta(days=14)), ("active", number, start),
             ("planned", number + 1, start + dt.timedelta(days=14)))
    sprints = {}
    for status, n, begins in plans:
        sprints[status] = state.sprints.insert({
            "project_id": project["id"], "name": f"{project['key']} Sprint {n}",
            "goal": rng.choice(("Ship the beta", "Stabilize before launch", "Performance pass", "Close top bugs")),
            "start_date": begins.isoformat(), "end_date": (begins + dt.timedelta(days=13)).isoformat(),
            "status": status, "started_on": None if status == "planned" else begins.isoformat(),
            "completed_on": (begins + dt.timedelta(days=13)).isoformat() if status == "completed" else None,
            "completed_points": None, "carried_over_issue_ids": [],
        })
    return sprints


def _seed_issue(state: TrackerState, rng: random.Random, project: Record, status: str, kind: str,
                sprints: dict[str, Record], *, first: bool) -> Record:
    """One issue; the project's first (open) issue is always planned into the next sprint."""
    members = project["member_ids"]
    subject = rng.choice(SUBJECTS)
    template = rng.choice({"bug": BUG_TEMPLATES, "task": TASK_TEMPLATES, "story": STORY_TEMPLATES}[kind])
    title = template.format(s=subject)
    title = title[0].upper() + title[1:]
    created = state.now() - dt.timedelta(days=rng.randint(5, 90), hours=rng.randint(0, 23))
    updated = created + dt.timedelta(days=rng.randint(0, 4))
    sprint = None
    if status in ("in_progress", "in_review") or (status == "done" and rng.random() < 0.5):
        sprint = sprints["active"]["id"]
    elif status == "done":
        sprint = sprints["completed"]["id"]
    elif first or rng.random() < 0.4:
        sprint = sprints["planned"]["id"]
    reporter = rng.choice(members)
    assignee = None if status == "open" and rng.random() < 0.5 else rng.choice(members)
    issue = state.issues.insert({
        "id": _next_key(state, project), "project_id": project["id"], "title": title,
        "description": f"{title}. Steps and context are in the linked discussion.", "type": kind,
        "priority": rng.choice(("low", "medium", "medium", "high", "critical")), "status": status,
        "resolution": "fixed" if status == "done" else None, "assignee_id": assignee, "reporter_id": reporter,
        "labels": sorted(rng.sample(project["labels"], k=rng.randint(0, 2))),
        "story_points": rng.choice((1, 2, 3, 5, 8)) if kind != "bug" else None, "sprint_id": sprint,
        "watcher_ids": sorted({reporter, *([assignee] if assignee else [])}), "due_date": None,
        "created_at": iso_datetime(created), "updated_at": iso_datetime(updated),
        "resolved_at": iso_datetime(updated) if status == "done" else None,
    })
    for n in range(rng.randint(0, 3)):
        state.comments.insert({"issue_id": issue["id"], "author_id": rng.choice(members),
                               "body": rng.choice(COMMENTS),
                               "created_at": iso_datetime(updated + dt.timedelta(hours=n + 1))})
    return issue


# -- shared rules ---------------------------------------------------------------------------------


def _next_key(state: TrackerState, project: Record) -> str:
    return f"{project['key']}-{state.next_counter('issue_key:' + project['id'])}"


def _key_number(issue: Record) -> int:
    return int(issue["id"].rsplit("-", 1)[1])


def _writable_project(state: TrackerState, project_id: str) -> Record:
    project = state.projects.get(project_id)
    require(not project["archived"], f"project {project['key']} is archived and read-only",
            reason="PROJECT_ARCHIVED", project_id=project_id)
    return project


def _writable_issue(state: TrackerState, issue_id: str) -> tuple[Record, Record]:
    issue = state.issues.get(issue_id)
    return issue, _writable_project(state, issue["project_id"])


def _require_member(state: TrackerState, project: Record, user_id: str, role: str) -> Record:
    user = state.users.get(user_id)
    require(user_id in project["member_ids"], f"{user['name']} is not a member of {project['key']}, so cannot be "
            f"{role}; pick someone from get_project's members", reason="NOT_A_PROJECT_MEMBER", error=FailedPrecondition,
            user_id=user_id, project_id=project["id"])
    return user


def _require_labels(project: Record, labels: list[str]) -> None:
    unknown = [label for label in labels if label not in project["labels"]]
    require(not unknown, f"{', '.join(unknown)} not among {project['key']}'s labels ({', '.join(project['labels'])})",
            reason="UNKNOWN_LABEL", error=InvalidArgument, unknown=unknown, available=project["labels"])


def _open_blockers(state: TrackerState, issue_id: str) -> list[str]:
    """Keys of unfinished issues linked as blocking this one."""
    blockers = state.links.where(target_id=issue_id, type="blocks")
    return [b["source_id"] for b in blockers if state.issues.get(b["source_id"])["status"] != "done"]


def _touch(state: TrackerState, issue_id: str, **changes: Any) -> Record:
    """Update an issue, stamping updated_at only when something really changed."""
    issue = state.issues.get(issue_id)
    if all(issue.get(k) == v for k, v in changes.items()):
        return issue
    return state.issues.update(issue_id, **changes, updated_at=iso_datetime(state.now()))


def _issue_card(issue: Record) -> Record:
    return {k: issue[k] for k in ("id", "title", "type", "priority", "status", "assignee_id", "labels",
                                  "story_points", "sprint_id")}


def _sprint_view(state: TrackerState, sprint: Record) -> Record:
    issues = state.issues.where(sprint_id=sprint["id"])
    points = sum(i["story_points"] or 0 for i in issues)
    done = sum(i["story_points"] or 0 for i in issues if i["status"] == "done")
    return {**sprint, "issue_count": len(issues), "committed_points": points, "done_points": done}


def _sprint_in_project(sprint: Record, project_id: str) -> None:
    require(sprint["project_id"] == project_id, f"sprint {sprint['name']!r} belongs to another project",
            reason="SPRINT_IN_OTHER_PROJECT", error=InvalidArgument, sprint_project_id=sprint["project_id"])


# -- examples -------------------------------------------------------------------------------------


def _project(s: TrackerState) -> Record:
    return s.projects.first(archived=False)


def _issue(s: TrackerState, status: str, **extra: Any) -> Record:
    return s.issues.first(project_id=_project(s)["id"], status=status, **extra)


def _assign_example(s: TrackerState) -> Record:
    project = _project(s)
    member = next(m for m in project["member_ids"] if m != s.get_var("me"))
    issue = s.issues.first(lambda i: i["assignee_id"] != member, project_id=project["id"], status="open")
    return {"issue_id": issue["id"], "assignee_id": member}


def _watch_example(s: TrackerState) -> Record:
    """A project member who does not yet watch an open issue of the first active project."""
    project = _project(s)
    for issue in s.issues.where(project_id=project["id"], status="open"):
        newcomer = next((m for m in project["member_ids"] if m not in issue["watcher_ids"]), None)
        if newcomer is not None:
            return {"issue_id": issue["id"], "user_id": newcomer, "watching": True}
    raise LookupError("every member already watches every open issue")


def _writable_sprint(s: TrackerState, status: str, project_id: str | None = None) -> Record | None:
    """The first sprint in ``status`` of a project that is not archived (of ``project_id`` if given)."""
    writable = {p["id"] for p in s.projects.where(archived=False)}
    return s.sprints.first(lambda sp: sp["project_id"] in writable and sp["project_id"] == (
        project_id or sp["project_id"]), status=status)


def _start_sprint_example(s: TrackerState) -> Record:
    """A planned sprint with issues; its project's active sprint is completed first, since only one
    sprint runs at a time."""
    planned = s.sprints.first(lambda sp: s.issues.first(sprint_id=sp["id"]) is not None
                              and not s.projects.get(sp["project_id"])["archived"], status="planned")
    active = _writable_sprint(s, "active", planned["project_id"])
    if active is not None:
        complete_sprint(s, active["id"])
    return {"sprint_id": planned["id"]}


def _carry_over_example(s: TrackerState) -> Record:
    """The active sprint of a project that also has a planned sprint to carry unfinished work into."""
    active = s.sprints.first(lambda sp: _writable_sprint(s, "planned", sp["project_id"]) is not None
                             and not s.projects.get(sp["project_id"])["archived"], status="active")
    planned = _writable_sprint(s, "planned", active["project_id"])
    return {"sprint_id": active["id"], "move_open_issues_to": planned["id"]}


def _sprint_add_example(s: TrackerState) -> Record:
    """An open backlog issue and a sprint (active, else planned) of the same project."""
    for status in ("active", "planned"):
        sprint = _writable_sprint(s, status)
        issue = sprint and s.issues.first(project_id=sprint["project_id"], status="open", sprint_id=None)
        if issue:
            return {"issue_id": issue["id"], "sprint_id": sprint["id"]}
    raise LookupError("no open backlog issue next to a running or planned sprint")


def _unblocked_review(s: TrackerState) -> Record:
    issue = s.issues.first(lambda i: not _open_blockers(s, i["id"]), project_id=_project(s)["id"],
                           status="in_review")
    return {"issue_id": issue["id"], "to_status": "done"}


def _new_issue(rng: random.Random, s: TrackerState, args: Record | None = None) -> Record:
    """An issue as a team files or corrects it, drawn as a whole: a title of its type, and a
    description, priority and size fit for that type (a bug is urgent and small, a story bigger);
    correcting an issue keeps its type. A due date in the next weeks."""
    issue = s.issues.find((args or {}).get("issue_id") or "")
    kind = (args or {}).get("issue_type") or (issue and issue["type"])
    title, kind = rng.choice([t for t in NEW_ISSUES if t[1] == kind] or NEW_ISSUES)
    descriptions, priorities, points = ISSUE_WRITEUPS[kind]
    return {"title": title, "issue_type": kind, "description": rng.choice(descriptions),
            "priority": rng.choice(priorities), "story_points": rng.choice(points),
            "due_date": (s.today() + dt.timedelta(days=rng.randint(3, 45))).isoformat()}


# -- the server and its tools ---------------------------------------------------------------------

server = Server(
    "issue_tracker",
    domain="knowledge",
    description="A team issue tracker: projects and members, issues with a workflow (open, in progress, in review, "
    "done), assignees, labels, comments, watchers, links between issues and sprints.",
    state=TrackerState,
    seed=build_tracker,
    options=TrackerOptions,
)


@server.tool(
    answers=("key", "open_issue_count"),
    read_only=True,
    reads=["project", "issue", "sprint"],
    examples=[{}, {"include_archived": True}],
    asks=lambda a: ("list all projects, archived ones included", "show me every project, even the archived ones",
                    "which projects exist, counting the archived ones too") if a.get("include_archived") else (
        "list my projects", "show me the projects I'm on", "what projects do we have going right now"),
)
def list_projects(
    state: TrackerState,
    include_archived: Annotated[bool, Field(description="Also list archived (read-only) projects.")] = False,
) -> dict:
    """The projects: id, key, name, description, lead, member count, number of unfinished issues,
    the active sprint (if any) and whether it is archived."""
    projects = []
    for project in state.projects.all():
        if project["archived"] and not include_archived:
            continue
        active = state.sprints.first(project_id=project["id"], status="active")
        unfinished = state.issues.where(lambda i: i["status"] != "done", project_id=project["id"])
        projects.append({**project, "member_count": len(project["member_ids"]), "open_issue_count": len(unfinished),
                         "active_sprint": None if active is None else {"id": active["id"], "name": active["name"]}})
    return {"projects": projects}


@server.tool(
    answers=("open", "in_progress", "done"),
    read_only=True,
    reads=["project", "user", "issue", "sprint"],
    errors=["PROJECT_NOT_FOUND"],
    examples=[lambda s: {"project_id": _project(s)["id"]}],
    asks=("show me {project_id}", "who is on {project_id} and which labels can we use there",
          "give me an overview of {project_id}", "pull up the details of {project_id}"),
)
def get_project(state: TrackerState, project_id: ProjectId) -> dict:
    """One project: its members (id, name, role; who is lead and who is you), the labels issues can
    use, issue counts per status and its sprints. Fails with PROJECT_NOT_FOUND."""
    project = state.projects.get(project_id)
    me = state.get_var("me")
    members = [{**state.users.get(uid), "is_lead": uid == project["lead_id"], "is_you": uid == me}
               for uid in project["member_ids"]]
    counts = {s: len(state.issues.where(project_id=project_id, status=s)) for s in TRANSITIONS}
    sprints = [{k: sp[k] for k in ("id", "name", "status", "start_date", "end_date")}
               for sp in state.sprints.where(project_id=project_id)]
    return {**project, "members": members, "issue_counts": counts, "sprints": sprints}


@server.tool(
    answers=("status", "priority", "type"),
    read_only=True,
    reads=["issue", "project", "user", "sprint"],
    errors=["PROJECT_NOT_FOUND", "USER_NOT_FOUND", "SPRINT_NOT_FOUND"],
    examples=[lambda s: {"project_id": _project(s)["id"], "status": "open"},
              lambda s: {"query": _issue(s, "open")["title"].split()[-1], "sort": "newest", "limit": 5},
              lambda s: {"project_id": _project(s)["id"], "in_backlog": True, "issue_type": "bug"}],
    asks=lambda a: (
        ("show me what's sitting in the backlog of {project_id}",
         "list the {issue_type} tickets in the backlog of {project_id}",
         "which issues in {project_id} aren't planned into any sprint yet") if a.get("in_backlog") else
        ("list the unassigned issues in {project_id}", "which {status} issues have nobody on them",
         "find issues in {project_id} that no one has picked up") if a.get("unassigned") else
        ("find issues matching {query}", "show me the {status} issues in {project_id}",
         "search the tracker for {query}, sorted by {sort}, {limit} at a time",
         "list the {priority} priority issues in {project_id}", "what's assigned to {assignee_id} right now",
         "which issues are tagged {label} in {project_id}")),
    values={"query": lambda rng, s: rng.choice(SUBJECTS)},
)
def search_issues(
    state: TrackerState,
    project_id: Annotated[str | None, ref("project", "Only issues of this project (prj_...).")] = None,
    query: Annotated[str | None, Field(max_length=100, description="Words to find in the title or description "
                                                                   "(all must match).")] = None,
    status: Annotated[Status | None, Field(description="Only issues in this status.")] = None,
    assignee_id: Annotated[str | None, ref("user", "Only issues assigned to this user (usr_...).")] = None,
    unassigned: Annotated[bool, Field(description="Only issues with nobody assigned.")] = False,
    label: Annotated[str | None, Field(max_length=40, description="Only issues with this label.")] = None,
    priority: Annotated[Priority | None, Field(description="Only issues of this priority.")] = None,
    issue_type: Annotated[IssueType | None, Field(description="Only bugs, tasks or stories.")] = None,
    sprint_id: Annotated[str | None, ref("sprint", "Only issues in this sprint (spr_...).")] = None,
    in_backlog: Annotated[bool, Field(description="Only issues in no sprint (the backlog).")] = False,
    sort: Annotated[Literal["priority", "newest", "oldest", "recently_updated"], Field(
        description="Result order; priority puts critical first, then by key.")] = "priority",
    limit: Limit = 20,
    offset: Offset = 0,
) -> dict:
    """Search issues across projects with filters. Returns a page of issue cards (key, title,
    type, priority, status, assignee, labels, points, sprint), the total and next_offset. Fails
    with PROJECT_NOT_FOUND, USER_NOT_FOUND or SPRINT_NOT_FOUND for unknown filter ids."""
    filters: Record = {}
    if project_id is not None:
        filters["project_id"] = state.projects.get(project_id)["id"]
    if assignee_id is not None:
        filters["assignee_id"] = state.users.get(assignee_id)["id"]
    elif unassigned:
        filters["assignee_id"] = None
    if sprint_id is not None:
        filters["sprint_id"] = state.sprints.get(sprint_id)["id"]
    elif in_backlog:
        filters["sprint_id"] = None
    filters.update({k: v for k, v in (("status", status), ("priority", priority), ("type", issue_type)) if v})
    terms = (query or "").casefold().split()

    def wanted(issue: Record) -> bool:
        text = f"{issue['title']} {issue['description']}".casefold()
        return (label is None or label in issue["labels"]) and all(t in text for t in terms)

    found = state.issues.where(wanted, **filters)
    orders = {
        "priority": lambda i: (PRIORITY_RANK[i["priority"]], i["project_id"], _key_number(i)),
        "newest": lambda i: (i["created_at"], i["id"]),
        "oldest": lambda i: (i["created_at"], i["id"]),
        "recently_updated": lambda i: (i["updated_at"], i["id"]),
    }
    found.sort(key=orders[sort], reverse=sort in ("newest", "recently_updated"))
    return paginate([_issue_card(i) for i in found], limit=limit, offset=offset, key="issues")


@server.tool(
    answers=("status", "priority", "type", "due_date"),
    read_only=True,
    reads=["issue", "comment", "link", "user"],
    errors=["ISSUE_NOT_FOUND"],
    examples=[lambda s: {"issue_id": _issue(s, "in_review")["id"]}],
    asks=("show me {issue_id}", "what's the status of {issue_id}", "pull up everything on {issue_id}",
          "tell me who's working on {issue_id} and what's blocking it"),
)
def get_issue(state: TrackerState, issue_id: IssueId) -> dict:
    """One issue in full: fields, assignee and reporter, watchers, the statuses it can move to next,
    its links in both directions (with the other issue's status), the unfinished issues blocking
    it, and its latest 5 comments with the total count (list_comments pages them all). Fails with
    ISSUE_NOT_FOUND."""
    issue = state.issues.get(issue_id)
    links = []
    for link in state.links.where(source_id=issue_id):
        other = state.issues.get(link["target_id"])
        links.append({"link_id": link["id"], "type": link["type"], "direction": "outward",
                      "issue_id": other["id"], "title": other["title"], "status": other["status"]})
    for link in state.links.where(target_id=issue_id):
        other = state.issues.get(link["source_id"])
        inward = {"blocks": "is_blocked_by", "duplicates": "is_duplicated_by"}.get(link["type"], link["type"])
        links.append({"link_id": link["id"], "type": inward, "direction": "inward",
                      "issue_id": other["id"], "title": other["title"], "status": other["status"]})
    comments = state.comments.where(issue_id=issue_id)
    return {**issue, "allowed_transitions": list(TRANSITIONS[issue["status"]]), "links": links,
            "blocked_by_open": _open_blockers(state, issue_id), "comment_count": len(comments),
            "latest_comments": comments[-5:]}


@server.tool(
    reads=["project", "user"],
    produces=["issue"],
    errors=["PROJECT_NOT_FOUND", "PROJECT_ARCHIVED", "USER_NOT_FOUND", "NOT_A_PROJECT_MEMBER", "UNKNOWN_LABEL",
            "BAD_DATE"],
    examples=[lambda s: {"project_id": _project(s)["id"], "title": "Checkout button misaligned on mobile",
                         "issue_type": "bug", "priority": "high", "labels": _project(s)["labels"][:1]},
              lambda s: {"project_id": _project(s)["id"], "title": "Add CSV export to reports", "issue_type": "story",
                         "assignee_id": s.get_var("me"), "story_points": 5, "due_date": "2026-03-20"}],
    asks=("file a {issue_type} in {project_id} called \"{title}\"",
          "create a {priority} priority {issue_type} titled \"{title}\" in {project_id}",
          "log a new {issue_type}: \"{title}\", tagged {labels}",
          "open a {issue_type} \"{title}\" worth {story_points} points and due {due_date}",
          "add a {issue_type} named \"{title}\" to {project_id} and give it to {assignee_id}",
          "write up a {issue_type} \"{title}\" with the description \"{description}\""),
    values={field: part_of(_new_issue, field)
            for field in ("title", "issue_type", "priority", "description", "story_points", "due_date")},
)
def create_issue(
    state: TrackerState,
    project_id: ProjectId,
    title: Annotated[str, Field(min_length=3, max_length=200, description="One-line summary.")],
    issue_type: Annotated[IssueType, Field(description="bug, task or story.")],
    priority: Annotated[Priority, Field(description="How urgent it is.")] = "medium",
    description: Annotated[str | None, Field(max_length=5000, description="Details, steps to reproduce.")] = None,
    assignee_id: Annotated[str | None, ref("user", "Project member to assign (usr_...); unassigned if omitted.")
                           ] = None,
    labels: Annotated[list[str] | None, Field(max_length=10, description="Labels from the project's label set.")
                      ] = None,
    story_points: Annotated[StoryPoints | None, Field(description="Estimate in story points.")] = None,
    due_date: Annotated[str | None, Field(pattern=ISO_DATE, description="Due date, YYYY-MM-DD.")] = None,
) -> dict:
    """Create an issue (status open, in the backlog) in a project; you are its reporter and a
    watcher. Returns the issue with its key. Fails with PROJECT_ARCHIVED, NOT_A_PROJECT_MEMBER (the
    assignee), UNKNOWN_LABEL (see get_project for the labels) or BAD_DATE."""
    project = _writable_project(state, project_id)
    if assignee_id is not None:
        _require_member(state, project, assignee_id, "assigned")
    labels = sorted(set(labels or []))
    _require_labels(project, labels)
    due = parse_date(due_date, "due_date").isoformat() if due_date else None
    me, now = state.get_var("me"), iso_datetime(state.now())
    watchers = sorted({me, assignee_id} - {None})
    return state.issues.insert({
        "id": _next_key(state, project), "project_id": project_id, "title": title.strip(),
        "description": description or "", "type": issue_type, "priority": priority, "status": "open",
        "resolution": None, "assignee_id": assignee_id, "reporter_id": me, "labels": labels,
        "story_points": story_points, "sprint_id": None, "watcher_ids": watchers, "due_date": due,
        "created_at": now, "updated_at": now, "resolved_at": None,
    })


@server.tool(
    idempotent=True,
    reads=["issue", "project"],
    mutates=["issue"],
    errors=["ISSUE_NOT_FOUND", "PROJECT_ARCHIVED", "NOTHING_TO_UPDATE", "BAD_DATE"],
    examples=[lambda s: {"issue_id": _issue(s, "open")["id"], "priority": "critical", "story_points": 8},
              lambda s: {"issue_id": _issue(s, "in_progress")["id"], "title": "Rework the export job",
                         "due_date": "2026-03-13"}],
    asks=("bump {issue_id} to {priority} priority and {story_points} points", "rename {issue_id} to \"{title}\"",
          "push the due date of {issue_id} to {due_date}", "make {issue_id} a {issue_type} instead",
          "set {issue_id} to {priority} priority",
          "replace the description of {issue_id} with \"{description}\""),
    values={field: part_of(_new_issue, field)
            for field in ("title", "issue_type", "priority", "description", "story_points", "due_date")},
)
def update_issue(
    state: TrackerState,
    issue_id: IssueId,
    title: Annotated[str | None, Field(min_length=3, max_length=200, description="New summary.")] = None,
    description: Annotated[str | None, Field(max_length=5000, description="New description.")] = None,
    priority: Annotated[Priority | None, Field(description="New priority.")] = None,
    issue_type: Annotated[IssueType | None, Field(description="New type.")] = None,
    story_points: Annotated[StoryPoints | None, Field(description="New estimate in story points.")] = None,
    due_date: Annotated[str | None, Field(pattern=ISO_DATE, description="New due date, YYYY-MM-DD.")] = None,
) -> dict:
    """Change an issue's fields (status, assignee, labels and sprint have their own tools). Returns
    the issue. Fails with NOTHING_TO_UPDATE, PROJECT_ARCHIVED or BAD_DATE."""
    _writable_issue(state, issue_id)
    changes = {k: v for k, v in (("title", title), ("description", description), ("priority", priority),
                                 ("type", issue_type), ("story_points", story_points)) if v is not None}
    if due_date is not None:
        changes["due_date"] = parse_date(due_date, "due_date").isoformat()
    require(bool(changes), "give at least one field to change", reason="NOTHING_TO_UPDATE", error=InvalidArgument)
    return _touch(state, issue_id, **changes)


@server.tool(
    idempotent=True,  # moving to the status it already has is refused with INVALID_TRANSITION
    reads=["issue", "link", "project"],
    mutates=["issue"],
    errors=["ISSUE_NOT_FOUND", "PROJECT_ARCHIVED", "INVALID_TRANSITION", "BLOCKED_BY_OPEN_ISSUE"],
    examples=[lambda s: {"issue_id": _issue(s, "open")["id"], "to_status": "in_progress"}, _unblocked_review,
              lambda s: {"issue_id": _issue(s, "done")["id"], "to_status": "open"}],
    asks=lambda a: {
        "done": ("mark {issue_id} as {to_status}", "close out {issue_id} by moving it to {to_status}",
                 "move {issue_id} to {to_status} with the resolution {resolution}",
                 "set {issue_id} to {to_status}, resolved as {resolution}"),
        "open": ("move {issue_id} back to {to_status}", "send {issue_id} back to {to_status}",
                 "set {issue_id} to {to_status} again"),
    }.get(a.get("to_status"), ("move {issue_id} to {to_status}", "set the status of {issue_id} to {to_status}",
                               "put {issue_id} in {to_status}", "switch {issue_id} over to {to_status}")),
    values={"resolution": lambda rng, s: rng.choice(("fixed", "fixed", "wont_fix", "duplicate"))},
)
def transition_issue(
    state: TrackerState,
    issue_id: IssueId,
    to_status: Annotated[Status, Field(description="The status to move to; see get_issue's allowed_transitions.")],
    resolution: Annotated[Resolution, Field(description="How it was resolved, when moving to done.")] = "fixed",
) -> dict:
    """Move an issue through the workflow: open → in_progress → in_review → done; in_review can go
    back to in_progress, in_progress to open, and done reopens to open. Returns the issue. Fails
    with INVALID_TRANSITION (lists the allowed ones), BLOCKED_BY_OPEN_ISSUE (an unfinished issue
    blocks it: finish or unlink that one first) or PROJECT_ARCHIVED."""
    issue, _ = _writable_issue(state, issue_id)
    allowed = TRANSITIONS[issue["status"]]
    require(to_status in allowed, f"{issue_id} is {issue['status']}; it can move to {', '.join(allowed)}",
            reason="INVALID_TRANSITION", current=issue["status"], allowed=list(allowed))
    if to_status == "done":
        blockers = _open_blockers(state, issue_id)
        require(not blockers, f"{issue_id} is blocked by unfinished {', '.join(blockers)}",
                reason="BLOCKED_BY_OPEN_ISSUE", blocked_by=blockers)
        return _touch(state, issue_id, status="done", resolution=resolution, resolved_at=iso_datetime(state.now()))
    return _touch(state, issue_id, status=to_status, resolution=None, resolved_at=None)


@server.tool(
    idempotent=True,
    reads=["issue", "project", "user"],
    mutates=["issue"],
    errors=["ISSUE_NOT_FOUND", "USER_NOT_FOUND", "PROJECT_ARCHIVED", "NOT_A_PROJECT_MEMBER"],
    examples=[_assign_example, lambda s: {"issue_id": _issue(s, "in_progress")["id"]}],
    asks=lambda a: ("assign {issue_id} to {assignee_id}", "give {issue_id} to {assignee_id}",
                    "hand {issue_id} over to {assignee_id}", "put {assignee_id} on {issue_id}") if a.get(
        "assignee_id") else ("unassign {issue_id}", "take everyone off {issue_id}", "clear the assignee of {issue_id}"),
)
def assign_issue(
    state: TrackerState,
    issue_id: IssueId,
    assignee_id: Annotated[str | None, ref("user", "Project member to assign (usr_...); omit to unassign.")] = None,
) -> dict:
    """Assign an issue to a project member (who also starts watching it), or unassign it when
    assignee_id is omitted. Returns the issue. Fails with NOT_A_PROJECT_MEMBER or
    PROJECT_ARCHIVED."""
    issue, project = _writable_issue(state, issue_id)
    if assignee_id is None:
        return _touch(state, issue_id, assignee_id=None)
    _require_member(state, project, assignee_id, "assigned")
    watchers = sorted({*issue["watcher_ids"], assignee_id})
    return _touch(state, issue_id, assignee_id=assignee_id, watcher_ids=watchers)


@server.tool(
    idempotent=True,
    reads=["issue", "project"],
    mutates=["issue"],
    errors=["ISSUE_NOT_FOUND", "PROJECT_ARCHIVED", "UNKNOWN_LABEL", "NOTHING_TO_UPDATE"],
    examples=[lambda s: (lambda i: {"issue_id": i["id"], "add": [next(
        lb for lb in s.projects.get(i["project_id"])["labels"] if lb not in i["labels"])]})(_issue(s, "open"))],
    asks=("add the {add} label to {issue_id}", "tag {issue_id} with {add}", "take the {remove} label off {issue_id}",
          "label {issue_id} {add} and drop {remove}"),
    values={"remove": lambda rng, s: [rng.choice(LABELS)]},
)
def update_labels(
    state: TrackerState,
    issue_id: IssueId,
    add: Annotated[list[str] | None, Field(max_length=10, description="Labels to add (from the project's set).")
                   ] = None,
    remove: Annotated[list[str] | None, Field(max_length=10, description="Labels to take off.")] = None,
) -> dict:
    """Add and/or remove labels on an issue; adding one it has or removing one it lacks is fine.
    Returns the issue. Fails with UNKNOWN_LABEL (not in the project's label set, see get_project),
    NOTHING_TO_UPDATE or PROJECT_ARCHIVED."""
    issue, project = _writable_issue(state, issue_id)
    require(bool(add or remove), "give labels to add or remove", reason="NOTHING_TO_UPDATE", error=InvalidArgument)
    _require_labels(project, add or [])
    labels = sorted((set(issue["labels"]) | set(add or [])) - set(remove or []))
    return _touch(state, issue_id, labels=labels)


@server.tool(
    reads=["issue", "project"],
    produces=["comment"],
    errors=["ISSUE_NOT_FOUND", "PROJECT_ARCHIVED"],
    examples=[lambda s: {"issue_id": _issue(s, "in_review")["id"], "body": "Reviewed: two small nits inline."}],
    asks=("comment on {issue_id}: \"{body}\"", "leave a note on {issue_id} saying \"{body}\"",
          "add a comment to {issue_id} that says \"{body}\"", "reply on {issue_id} with \"{body}\""),
    values={"body": lambda rng, s: rng.choice(NEW_COMMENTS)},
)
def add_comment(
    state: TrackerState,
    issue_id: IssueId,
    body: Annotated[str, Field(min_length=1, max_length=5000, description="The comment text (Markdown).")],
) -> dict:
    """Comment on an issue as you. Returns the comment. Fails with PROJECT_ARCHIVED."""
    _writable_issue(state, issue_id)
    comment = state.comments.insert({"issue_id": issue_id, "author_id": state.get_var("me"), "body": body,
                                     "created_at": iso_datetime(state.now())})
    state.issues.update(issue_id, updated_at=comment["created_at"])
    return comment


@server.tool(
    answers=("author", "body"),
    read_only=True,
    reads=["issue", "comment", "user"],
    errors=["ISSUE_NOT_FOUND"],
    examples=[lambda s: {"issue_id": s.comments.first()["issue_id"]}],
    asks=("show the comments on {issue_id}", "what have people said on {issue_id}",
          "read me the discussion on {issue_id}", "list the first {limit} comments on {issue_id}"),
)
def list_comments(state: TrackerState, issue_id: IssueId, limit: Limit = 20, offset: Offset = 0) -> dict:
    """An issue's comments, oldest first, with author names. Returns a page, the total and
    next_offset. Fails with ISSUE_NOT_FOUND."""
    state.issues.get(issue_id)
    comments = [{**c, "author": state.users.get(c["author_id"])["name"]} for c in state.comments.where(
        issue_id=issue_id)]
    return {"issue_id": issue_id, **paginate(comments, limit=limit, offset=offset, key="comments")}


@server.tool(
    idempotent=True,  # the same link again is refused with LINK_EXISTS
    reads=["issue", "link", "project"],
    produces=["link"],
    errors=["ISSUE_NOT_FOUND", "CANNOT_LINK_TO_SELF", "LINK_EXISTS", "BLOCKING_CYCLE", "PROJECT_ARCHIVED"],
    examples=[lambda s: {"issue_id": _issue(s, "open")["id"], "link_type": "relates_to",
                         "other_issue_id": _issue(s, "done")["id"]},
              lambda s: {"issue_id": _issue(s, "in_progress")["id"], "link_type": "blocks",
                         "other_issue_id": _issue(s, "open")["id"]}],
    asks=("record that {issue_id} {link_type} {other_issue_id}",
          "link {issue_id} with {other_issue_id}: the first {link_type} the second",
          "note in the tracker that {issue_id} {link_type} {other_issue_id}",
          "add a \"{link_type}\" link from {issue_id} to {other_issue_id}"),
)
def link_issues(
    state: TrackerState,
    issue_id: IssueId,
    link_type: Annotated[LinkType, Field(description="How issue_id relates to other_issue_id: it blocks it, "
                                                     "relates to it, or duplicates it.")],
    other_issue_id: Annotated[str, ref("issue", "Key of the other issue, e.g. 'API-3'; may be in another project.")],
) -> dict:
    """Link two issues: 'A blocks B' (B cannot be done while A is unfinished), 'A relates_to B' or
    'A duplicates B'. Returns the link. Fails with CANNOT_LINK_TO_SELF, LINK_EXISTS (also for
    relates_to the other way round), BLOCKING_CYCLE (B already blocks A, directly or through other
    issues) or PROJECT_ARCHIVED."""
    require(issue_id != other_issue_id, "an issue cannot be linked to itself", reason="CANNOT_LINK_TO_SELF",
            error=InvalidArgument)
    _writable_issue(state, issue_id)
    _writable_issue(state, other_issue_id)
    same = state.links.first(source_id=issue_id, target_id=other_issue_id, type=link_type)
    if same is None and link_type == "relates_to":
        same = state.links.first(source_id=other_issue_id, target_id=issue_id, type=link_type)
    if same is not None:
        raise Conflict(f"{issue_id} already {link_type.replace('_', ' ')} {other_issue_id}", reason="LINK_EXISTS",
                       link_id=same["id"])
    if link_type == "blocks":
        path = _blocking_path(state, other_issue_id, issue_id)
        require(not path, f"{' blocks '.join(path)}: letting {issue_id} block {other_issue_id} would make a cycle",
                reason="BLOCKING_CYCLE", path=path)
    return state.links.insert({"source_id": issue_id, "target_id": other_issue_id, "type": link_type,
                               "created_by": state.get_var("me"), "created_at": iso_datetime(state.now())})


def _blocking_path(state: TrackerState, start: str, goal: str) -> list[str]:
    """Issue keys along 'blocks' links from start to goal, or [] when there is no such chain."""
    stack, seen = [[start]], set()
    while stack:
        path = stack.pop()
        if path[-1] == goal:
            return path
        if path[-1] in seen:
            continue
        seen.add(path[-1])
        stack.extend([*path, link["target_id"]] for link in state.links.where(source_id=path[-1], type="blocks"))
    return []


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing (LINK_NOT_FOUND) and changes nothing
    reads=["link", "issue", "project"],
    mutates=["link"],
    errors=["LINK_NOT_FOUND", "PROJECT_ARCHIVED"],
    examples=[lambda s: {"link_id": s.links.first(type="blocks")["id"]}],
    asks=("remove {link_id}", "delete {link_id} between those two issues", "unlink the issues joined by {link_id}"),
)
def unlink_issues(
    state: TrackerState,
    link_id: Annotated[str, ref("link", "Id of the link (lnk_...), from get_issue's links.")],
) -> dict:
    """Remove a link between two issues (removing a 'blocks' link unblocks the other issue).
    Returns the removed link. Fails with LINK_NOT_FOUND or PROJECT_ARCHIVED."""
    link = state.links.get(link_id)
    _writable_issue(state, link["source_id"])
    return {"removed": True, "link": state.links.delete(link_id)}


@server.tool(
    idempotent=True,
    reads=["issue", "project", "user"],
    mutates=["issue"],
    errors=["ISSUE_NOT_FOUND", "USER_NOT_FOUND", "NOT_A_PROJECT_MEMBER", "PROJECT_ARCHIVED"],
    examples=[_watch_example],
    asks=lambda a: ("add {user_id} as a watcher on {issue_id}", "have {user_id} watch {issue_id}",
                    "subscribe {user_id} to updates on {issue_id}") if a.get("watching", True) else (
        "stop {user_id} from watching {issue_id}", "remove {user_id} from the watchers of {issue_id}",
        "unsubscribe {user_id} from {issue_id}"),
)
def set_watcher(
    state: TrackerState,
    issue_id: IssueId,
    user_id: Annotated[str, ref("user", "The user (usr_...) to add or remove as a watcher; yourself included.")],
    watching: Annotated[bool, Field(description="true adds the watcher, false removes them.")] = True,
) -> dict:
    """Add or remove a watcher of an issue (watchers are notified of changes). Returns the issue's
    watchers. Only project members can watch: NOT_A_PROJECT_MEMBER otherwise. Fails with
    PROJECT_ARCHIVED too."""
    issue, project = _writable_issue(state, issue_id)
    if watching:
        _require_member(state, project, user_id, "a watcher")
        watchers = sorted({*issue["watcher_ids"], user_id})
    else:
        state.users.get(user_id)
        watchers = [w for w in issue["watcher_ids"] if w != user_id]
    if watchers != issue["watcher_ids"]:
        state.issues.update(issue_id, watcher_ids=watchers)  # watching is not an edit: updated_at stays
    return {"issue_id": issue_id, "watcher_ids": watchers}


@server.tool(
    answers=("status", "start_date", "end_date"),
    read_only=True,
    reads=["sprint", "project", "issue"],
    errors=["PROJECT_NOT_FOUND"],
    examples=[lambda s: {"project_id": _project(s)["id"]}, lambda s: {"project_id": _project(s)["id"],
                                                                      "status": "planned"}],
    asks=("list the sprints of {project_id}", "what sprints does {project_id} have",
          "show the {status} sprints in {project_id}", "which sprints are {status} for {project_id}"),
)
def list_sprints(
    state: TrackerState,
    project_id: ProjectId,
    status: Annotated[SprintStatus | None, Field(description="Only planned, active or completed sprints.")] = None,
) -> dict:
    """A project's sprints with dates, goal, status, issue count and committed and done story
    points. Fails with PROJECT_NOT_FOUND."""
    state.projects.get(project_id)
    filters = {"status": status} if status else {}
    return {"project_id": project_id,
            "sprints": [_sprint_view(state, sp) for sp in state.sprints.where(project_id=project_id, **filters)]}


@server.tool(
    idempotent=True,  # the same name again is refused with SPRINT_NAME_TAKEN
    reads=["project", "sprint"],
    produces=["sprint"],
    errors=["PROJECT_NOT_FOUND", "PROJECT_ARCHIVED", "INVALID_SPRINT_DATES", "SPRINT_NAME_TAKEN", "BAD_DATE"],
    examples=[lambda s: {"project_id": _project(s)["id"], "name": "Hardening week", "start_date": "2026-03-30",
                         "end_date": "2026-04-10", "goal": "Burn down the top bugs"}],
    asks=("plan a sprint called \"{name}\" in {project_id} from {start_date} to {end_date}",
          "set up a new sprint \"{name}\" running {start_date} through {end_date}",
          "create the sprint \"{name}\" for {project_id}, {start_date} to {end_date}, with the goal \"{goal}\"",
          "schedule \"{name}\" as a sprint starting {start_date} and ending {end_date}"),
    values={"name": lambda rng, s: rng.choice(SPRINT_NAMES), "goal": lambda rng, s: rng.choice(SPRINT_GOALS),
            "start_date": lambda rng, s: (s.today() + dt.timedelta(days=rng.randint(1, 10))).isoformat(),
            "end_date": lambda rng, s: (s.today() + dt.timedelta(days=rng.randint(12, 25))).isoformat()},
)
def create_sprint(
    state: TrackerState,
    project_id: ProjectId,
    name: Annotated[str, Field(min_length=1, max_length=60, description="Sprint name, unique in the project.")],
    start_date: Annotated[str, Field(pattern=ISO_DATE, description="First day, YYYY-MM-DD.")],
    end_date: Annotated[str, Field(pattern=ISO_DATE, description="Last day, YYYY-MM-DD; at most 4 weeks later.")],
    goal: Annotated[str | None, Field(max_length=200, description="What the sprint should achieve.")] = None,
) -> dict:
    """Plan a sprint for a project (status planned; start it with start_sprint). Returns the sprint.
    Fails with INVALID_SPRINT_DATES (end before start, longer than 28 days, or ending in the
    past), SPRINT_NAME_TAKEN, BAD_DATE or PROJECT_ARCHIVED."""
    _writable_project(state, project_id)
    start, end = parse_date(start_date, "start_date"), parse_date(end_date, "end_date")
    require(start <= end and (end - start).days < MAX_SPRINT_DAYS and end >= state.today(),
            f"a sprint runs forward from its start, at most {MAX_SPRINT_DAYS} days, and ends today or later",
            reason="INVALID_SPRINT_DATES", error=InvalidArgument)
    clash = state.sprints.first(lambda sp: sp["name"].casefold() == name.strip().casefold(), project_id=project_id)
    if clash is not None:
        raise Conflict(f"sprint {clash['name']!r} already exists ({clash['id']})", reason="SPRINT_NAME_TAKEN",
                       sprint_id=clash["id"])
    return state.sprints.insert({
        "project_id": project_id, "name": name.strip(), "goal": goal, "start_date": start.isoformat(),
        "end_date": end.isoformat(), "status": "planned", "started_on": None, "completed_on": None,
        "completed_points": None, "carried_over_issue_ids": [],
    })


@server.tool(
    idempotent=True,  # a repeat is refused with SPRINT_ALREADY_ACTIVE
    reads=["sprint", "project", "issue"],
    mutates=["sprint"],
    errors=["SPRINT_NOT_FOUND", "PROJECT_ARCHIVED", "SPRINT_ALREADY_ACTIVE", "SPRINT_COMPLETED", "SPRINT_EMPTY"],
    examples=[_start_sprint_example],
    asks=("start {sprint_id}", "kick off {sprint_id}", "get {sprint_id} going", "begin {sprint_id} now"),
)
def start_sprint(state: TrackerState, sprint_id: SprintId) -> dict:
    """Start a planned sprint. A project runs one sprint at a time: complete the active one first.
    Returns the sprint. Fails with SPRINT_ALREADY_ACTIVE (this or another sprint of the project is
    active; its id is in the error), SPRINT_COMPLETED, SPRINT_EMPTY (add issues first) or
    PROJECT_ARCHIVED."""
    sprint = state.sprints.get(sprint_id)
    _writable_project(state, sprint["project_id"])
    require(sprint["status"] != "completed", f"{sprint['name']} is completed", reason="SPRINT_COMPLETED")
    active = state.sprints.first(project_id=sprint["project_id"], status="active")
    if active is not None:
        raise Conflict(f"{active['name']} is already active in this project; complete it first",
                       reason="SPRINT_ALREADY_ACTIVE", active_sprint_id=active["id"])
    require(bool(state.issues.first(sprint_id=sprint_id)), f"{sprint['name']} has no issues; add some first",
            reason="SPRINT_EMPTY")
    return _sprint_view(state, state.sprints.update(sprint_id, status="active",
                                                    started_on=state.today().isoformat()))


@server.tool(
    destructive=True,  # a completed sprint cannot be reopened
    idempotent=True,  # a repeat is refused with SPRINT_COMPLETED
    reads=["sprint", "project", "issue"],
    mutates=["sprint", "issue"],
    errors=["SPRINT_NOT_FOUND", "PROJECT_ARCHIVED", "SPRINT_NOT_ACTIVE", "SPRINT_COMPLETED",
            "SPRINT_IN_OTHER_PROJECT", "INVALID_TARGET_SPRINT"],
    examples=[lambda s: {"sprint_id": _writable_sprint(s, "active")["id"]}, _carry_over_example],
    asks=("complete {sprint_id}", "close out {sprint_id} and send anything unfinished to the backlog",
          "wrap up {sprint_id}, moving whatever isn't done into {move_open_issues_to}",
          "end {sprint_id} and carry the leftovers over to {move_open_issues_to}"),
)
def complete_sprint(
    state: TrackerState,
    sprint_id: SprintId,
    move_open_issues_to: Annotated[str | None, ref(
        "sprint", "A planned sprint of the same project to carry unfinished issues into; the backlog when "
        "omitted.")] = None,
) -> dict:
    """Complete the active sprint: record its done story points and move every unfinished issue to
    the backlog or to a planned sprint. Returns the sprint and the carried-over issue keys. Fails
    with SPRINT_NOT_ACTIVE (it was never started), SPRINT_COMPLETED, SPRINT_IN_OTHER_PROJECT or
    INVALID_TARGET_SPRINT (the target must be planned) or PROJECT_ARCHIVED."""
    sprint = state.sprints.get(sprint_id)
    _writable_project(state, sprint["project_id"])
    require(sprint["status"] != "completed", f"{sprint['name']} is already completed", reason="SPRINT_COMPLETED")
    require(sprint["status"] == "active", f"{sprint['name']} has not started", reason="SPRINT_NOT_ACTIVE")
    if move_open_issues_to is not None:
        target = state.sprints.get(move_open_issues_to)
        _sprint_in_project(target, sprint["project_id"])
        require(target["status"] == "planned", f"unfinished issues can only move to a planned sprint; "
                f"{target['name']} is {target['status']}", reason="INVALID_TARGET_SPRINT", error=InvalidArgument)
    issues = state.issues.where(sprint_id=sprint_id)
    carried = [i["id"] for i in issues if i["status"] != "done"]
    for key in carried:
        state.issues.update(key, sprint_id=move_open_issues_to)
    points = sum(i["story_points"] or 0 for i in issues if i["status"] == "done")
    done = state.sprints.update(sprint_id, status="completed", completed_on=state.today().isoformat(),
                                completed_points=points, carried_over_issue_ids=carried)
    return {"sprint": _sprint_view(state, done), "carried_over_issue_ids": carried,
            "moved_to": move_open_issues_to or "backlog"}


@server.tool(
    idempotent=True,
    reads=["issue", "sprint", "project"],
    mutates=["issue"],
    errors=["ISSUE_NOT_FOUND", "SPRINT_NOT_FOUND", "PROJECT_ARCHIVED", "SPRINT_COMPLETED", "SPRINT_IN_OTHER_PROJECT"],
    examples=[_sprint_add_example],
    asks=("add {issue_id} to {sprint_id}", "pull {issue_id} into {sprint_id}", "schedule {issue_id} for {sprint_id}",
          "move {issue_id} into {sprint_id}"),
)
def add_issue_to_sprint(state: TrackerState, issue_id: IssueId, sprint_id: SprintId) -> dict:
    """Put an issue into a planned or the active sprint of its project (moving it out of the
    backlog or another sprint). Returns the issue. Fails with SPRINT_COMPLETED,
    SPRINT_IN_OTHER_PROJECT or PROJECT_ARCHIVED."""
    issue, _ = _writable_issue(state, issue_id)
    sprint = state.sprints.get(sprint_id)
    _sprint_in_project(sprint, issue["project_id"])
    require(sprint["status"] != "completed", f"{sprint['name']} is completed; pick a planned or the active sprint",
            reason="SPRINT_COMPLETED")
    return _touch(state, issue_id, sprint_id=sprint_id)


@server.tool(
    answers=("status", "days_left", "done_points", "committed_points"),
    read_only=True,
    reads=["sprint", "issue"],
    errors=["SPRINT_NOT_FOUND"],
    examples=[lambda s: {"sprint_id": s.sprints.first(project_id=_project(s)["id"])["id"]}],
    asks=("show me the board for {sprint_id}", "how is {sprint_id} going", "how many days are left in {sprint_id}",
          "pull up {sprint_id} and what's done so far"),
)
def get_sprint(state: TrackerState, sprint_id: SprintId) -> dict:
    """A sprint's board: its dates, goal and status, its issues grouped by status, committed and done
    story points and the days left until its end date. Fails with SPRINT_NOT_FOUND."""
    sprint = state.sprints.get(sprint_id)
    board: dict[str, list[Record]] = {status: [] for status in TRANSITIONS}
    for issue in state.issues.where(sprint_id=sprint_id):
        board[issue["status"]].append(_issue_card(issue))
    days_left = None
    if sprint["status"] == "active":
        days_left = max(0, (dt.date.fromisoformat(sprint["end_date"]) - state.today()).days)
    return {**_sprint_view(state, sprint), "board": board, "days_left": days_left}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
