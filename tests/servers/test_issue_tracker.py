"""The issue_tracker server's own rules: the workflow, sprints, links and blockers, membership
and typed failures, each checked in the state that causes it. What every server guarantees is the
conformance kit's (tests/servers/test_conformance.py).
"""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import issue_tracker
from prove_servers.issue_tracker import TrackerOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def project(h, archived: bool = False) -> dict:
    return h.state.projects.first(archived=archived)


def issue(h, status: str, **where) -> dict:
    return h.state.issues.first(project_id=project(h)["id"], status=status, **where)


def sprint(h, status: str, project_id: str | None = None) -> dict:
    return h.state.sprints.first(project_id=project_id or project(h)["id"], status=status)


def non_member(h, proj: dict) -> str:
    return h.state.users.first(lambda u: u["id"] not in proj["member_ids"])["id"]


def walk_to_done(h, key: str) -> None:
    for status in ("in_progress", "in_review", "done"):
        h.ok("transition_issue", issue_id=key, to_status=status)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert len(TOOLS) == 20 and servers_registered_by(issue_tracker) == [server]
    assert (server.name, server.domain) == ("issue_tracker", "knowledge")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_projects", "get_project", "search_issues", "get_issue", "list_comments",
                         "list_sprints", "get_sprint"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"unlink_issues", "complete_sprint"}
    idempotent = {n for n, t in TOOLS.items() if t.spec.annotations.idempotent and not t.spec.annotations.read_only}
    assert idempotent == set(TOOLS) - read_only - {"create_issue", "add_comment"}  # these add a record each time
    assert TOOLS["link_issues"].spec.entity_params() == {"issue_id": "issue", "other_issue_id": "issue"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_ids_are_seeded_too(h):
    other = ServerHarness(server, seed=1)
    assert {p["id"] for p in h.state.projects}.isdisjoint(p["id"] for p in other.state.projects)


def test_seed_has_the_variety_tasks_need(h):
    state = h.state
    assert len(state.projects) == 3 and len(state.projects.where(archived=True)) == 1
    for proj in state.projects:
        issues = state.issues.where(project_id=proj["id"])
        assert len(issues) == len(issue_tracker.ISSUE_PLAN)
        assert [i["id"] for i in issues] == [f"{proj['key']}-{n}" for n in range(1, len(issues) + 1)]
        assert {i["status"] for i in issues} == set(issue_tracker.TRANSITIONS)
        assert all(i["assignee_id"] in (None, *proj["member_ids"]) for i in issues)
        assert {sp["status"] for sp in state.sprints.where(project_id=proj["id"])} == {"planned", "active", "completed"}
        assert state.get_var("me") in proj["member_ids"] and len(proj["member_ids"]) < len(state.users)
        blocked = [i for i in issues if h.ok("get_issue", issue_id=i["id"])["blocked_by_open"]]
        assert [i["status"] for i in blocked] == ["in_review"]


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=TrackerOptions(projects=30))
    assert len(big.state.issues) == 10 * len(h.state.issues)
    assert len({p["key"] for p in big.state.projects}) == 30
    big.run_examples()
    with pytest.raises(ValueError):
        TrackerOptions(projects=0)


# -- flows ----------------------------------------------------------------------------------------


def test_an_issue_from_creation_to_done_passing_ids(h):
    proj = h.ok("list_projects")["projects"][0]
    details = h.ok("get_project", project_id=proj["id"])
    teammate = next(m for m in details["members"] if not m["is_you"])
    created = h.ok("create_issue", project_id=proj["id"], title="Search ignores accents", issue_type="bug",
                   labels=details["labels"][:2], priority="high")
    key = created["id"]
    assert key == f"{proj['key']}-{len(issue_tracker.ISSUE_PLAN) + 1}" and created["status"] == "open"
    assert created["reporter_id"] == next(m["id"] for m in details["members"] if m["is_you"])
    assigned = h.ok("assign_issue", issue_id=key, assignee_id=teammate["id"])
    assert assigned["assignee_id"] == teammate["id"] and teammate["id"] in assigned["watcher_ids"]
    h.ok("add_issue_to_sprint", issue_id=key, sprint_id=proj["active_sprint"]["id"])
    h.ok("transition_issue", issue_id=key, to_status="in_progress")
    h.ok("add_comment", issue_id=key, body="Root cause: missing unicode folding.")
    h.ok("transition_issue", issue_id=key, to_status="in_review")
    assert h.ok("get_issue", issue_id=key)["allowed_transitions"] == ["done", "in_progress"]
    done = h.ok("transition_issue", issue_id=key, to_status="done", resolution="fixed")
    assert (done["status"], done["resolution"]) == ("done", "fixed") and done["resolved_at"]
    found = h.ok("search_issues", project_id=proj["id"], query="accents", status="done")["issues"]
    assert [i["id"] for i in found] == [key]
    board = h.ok("get_sprint", sprint_id=proj["active_sprint"]["id"])["board"]
    assert key in [i["id"] for i in board["done"]]
    reopened = h.ok("transition_issue", issue_id=key, to_status="open")
    assert (reopened["resolution"], reopened["resolved_at"]) == (None, None)
    comments = h.ok("list_comments", issue_id=key)
    assert comments["total"] == 1 and comments["comments"][0]["author"] == next(
        m["name"] for m in details["members"] if m["is_you"])


def test_a_blocked_issue_waits_for_its_blocker(h):
    link = h.state.links.first(type="blocks")
    blocker, blocked = link["source_id"], link["target_id"]
    seen = h.ok("get_issue", issue_id=blocked)
    assert seen["blocked_by_open"] == [blocker]
    assert {"link_id": link["id"], "type": "is_blocked_by", "direction": "inward", "issue_id": blocker} .items() <= (
        next(li for li in seen["links"] if li["link_id"] == link["id"]).items())
    error = h.fails("transition_issue", "BLOCKED_BY_OPEN_ISSUE", "FAILED_PRECONDITION", issue_id=blocked,
                    to_status="done")
    assert error["details"]["blocked_by"] == [blocker]
    walk_to_done(h, blocker)
    assert h.ok("transition_issue", issue_id=blocked, to_status="done")["status"] == "done"


def test_unlinking_unblocks(h):
    link = h.state.links.first(type="blocks")
    h.ok("unlink_issues", link_id=link["id"])
    h.ok("transition_issue", issue_id=link["target_id"], to_status="done")
    h.fails("unlink_issues", "LINK_NOT_FOUND", "NOT_FOUND", link_id=link["id"])


def test_sprint_lifecycle(h):
    proj = project(h)
    active, planned = sprint(h, "active"), sprint(h, "planned")
    error = h.fails("start_sprint", "SPRINT_ALREADY_ACTIVE", "CONFLICT", sprint_id=planned["id"])
    assert error["details"]["active_sprint_id"] == active["id"]
    h.fails("complete_sprint", "SPRINT_NOT_ACTIVE", "FAILED_PRECONDITION", sprint_id=planned["id"])
    in_sprint = h.state.issues.where(sprint_id=active["id"])
    unfinished = [i["id"] for i in in_sprint if i["status"] != "done"]
    done_points = sum(i["story_points"] or 0 for i in in_sprint if i["status"] == "done")
    result = h.ok("complete_sprint", sprint_id=active["id"], move_open_issues_to=planned["id"])
    assert result["carried_over_issue_ids"] == unfinished and result["sprint"]["completed_points"] == done_points
    assert {i["id"] for i in h.state.issues.where(sprint_id=planned["id"])} >= set(unfinished)
    started = h.ok("start_sprint", sprint_id=planned["id"])
    assert (started["status"], started["started_on"]) == ("active", "2026-03-02")
    assert h.ok("list_projects")["projects"][0]["active_sprint"]["id"] == planned["id"]

    backlog = issue(h, "open", sprint_id=None)
    h.fails("add_issue_to_sprint", "SPRINT_COMPLETED", "FAILED_PRECONDITION", issue_id=backlog["id"],
            sprint_id=active["id"])
    h.fails("start_sprint", "SPRINT_COMPLETED", "FAILED_PRECONDITION", sprint_id=active["id"])
    h.fails("complete_sprint", "SPRINT_COMPLETED", "FAILED_PRECONDITION", sprint_id=active["id"])
    h.fails("complete_sprint", "INVALID_TARGET_SPRINT", "INVALID_ARGUMENT", sprint_id=planned["id"],
            move_open_issues_to=active["id"])
    fresh = h.ok("create_sprint", project_id=proj["id"], name="Polish", start_date="2026-03-16",
                 end_date="2026-03-27")
    h.ok("complete_sprint", sprint_id=planned["id"])  # to the backlog
    assert h.state.issues.where(sprint_id=planned["id"], status="open") == []
    h.fails("start_sprint", "SPRINT_EMPTY", "FAILED_PRECONDITION", sprint_id=fresh["id"])
    h.ok("add_issue_to_sprint", issue_id=backlog["id"], sprint_id=fresh["id"])
    assert h.ok("start_sprint", sprint_id=fresh["id"])["issue_count"] == 1
    listed = h.ok("list_sprints", project_id=proj["id"], status="completed")["sprints"]
    assert {s["id"] for s in listed} >= {active["id"], planned["id"]}


def test_search_filters_sorts_and_pages(h):
    proj = project(h)
    everything = h.ok("search_issues", project_id=proj["id"], limit=50)
    ranks = [issue_tracker.PRIORITY_RANK[i["priority"]] for i in everything["issues"]]
    assert everything["total"] == len(issue_tracker.ISSUE_PLAN) and ranks == sorted(ranks)
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("search_issues", project_id=proj["id"], limit=4, offset=offset)
        seen += [i["id"] for i in page["issues"]]
        offset = page["next_offset"]
    assert seen == [i["id"] for i in everything["issues"]]
    backlog = h.ok("search_issues", project_id=proj["id"], in_backlog=True, limit=50)["issues"]
    assert backlog and all(i["sprint_id"] is None for i in backlog)
    unassigned = h.ok("search_issues", unassigned=True, status="open", limit=50)["issues"]
    assert all(i["assignee_id"] is None and i["status"] == "open" for i in unassigned)
    label = proj["labels"][0]
    labelled = h.ok("search_issues", label=label, limit=50)["issues"]
    assert all(label in i["labels"] for i in labelled)
    newest = h.ok("search_issues", project_id=proj["id"], sort="newest", limit=50)["issues"]
    created = {i["id"]: i["created_at"] for i in h.state.issues}
    assert [created[i["id"]] for i in newest] == sorted(created[i["id"]] for i in newest)[::-1]


def test_watchers(h):
    open_issue = issue(h, "open")
    proj = project(h)
    newcomer = next(m for m in proj["member_ids"] if m not in open_issue["watcher_ids"])
    assert newcomer in h.ok("set_watcher", issue_id=open_issue["id"], user_id=newcomer)["watcher_ids"]
    gone = h.ok("set_watcher", issue_id=open_issue["id"], user_id=newcomer, watching=False)
    assert newcomer not in gone["watcher_ids"]
    h.fails("set_watcher", "NOT_A_PROJECT_MEMBER", "FAILED_PRECONDITION", issue_id=open_issue["id"],
            user_id=non_member(h, proj))


def test_labels_come_from_the_project(h):
    open_issue, proj = issue(h, "open"), project(h)
    spare = next(lb for lb in proj["labels"] if lb not in open_issue["labels"])
    updated = h.ok("update_labels", issue_id=open_issue["id"], add=[spare], remove=open_issue["labels"])
    assert updated["labels"] == [spare]
    missing = next(lb for lb in issue_tracker.LABELS if lb not in proj["labels"])
    error = h.fails("update_labels", "UNKNOWN_LABEL", "INVALID_ARGUMENT", issue_id=open_issue["id"],
                    add=[missing])
    assert error["details"]["available"] == proj["labels"]
    h.fails("create_issue", "UNKNOWN_LABEL", "INVALID_ARGUMENT", project_id=proj["id"], title="New thing",
            issue_type="task", labels=[missing])
    h.fails("update_labels", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT", issue_id=open_issue["id"])


# -- typed failures -------------------------------------------------------------------------------


def test_invalid_transitions(h):
    for status, target in (("open", "done"), ("open", "in_review"), ("in_progress", "done"), ("done", "in_review"),
                           ("open", "open")):
        found = issue(h, status)
        error = h.fails("transition_issue", "INVALID_TRANSITION", "FAILED_PRECONDITION", issue_id=found["id"],
                        to_status=target)
        assert error["details"]["allowed"] == list(issue_tracker.TRANSITIONS[status])


def test_not_a_project_member(h):
    proj = project(h)
    outsider = non_member(h, proj)
    h.fails("assign_issue", "NOT_A_PROJECT_MEMBER", "FAILED_PRECONDITION", issue_id=issue(h, "open")["id"],
            assignee_id=outsider)
    h.fails("create_issue", "NOT_A_PROJECT_MEMBER", "FAILED_PRECONDITION", project_id=proj["id"], title="Something",
            issue_type="task", assignee_id=outsider)
    h.fails("assign_issue", "USER_NOT_FOUND", "NOT_FOUND", issue_id=issue(h, "open")["id"],
            assignee_id="usr_missing")


def test_link_rules(h):
    a, b = issue(h, "open"), issue(h, "in_progress")
    h.fails("link_issues", "CANNOT_LINK_TO_SELF", "INVALID_ARGUMENT", issue_id=a["id"], link_type="blocks",
            other_issue_id=a["id"])
    made = h.ok("link_issues", issue_id=a["id"], link_type="relates_to", other_issue_id=b["id"])
    error = h.fails("link_issues", "LINK_EXISTS", "CONFLICT", issue_id=b["id"], link_type="relates_to",
                    other_issue_id=a["id"])  # relates_to goes both ways
    assert error["details"]["link_id"] == made["id"]
    h.ok("link_issues", issue_id=a["id"], link_type="blocks", other_issue_id=b["id"])
    h.fails("link_issues", "LINK_EXISTS", "CONFLICT", issue_id=a["id"], link_type="blocks",
            other_issue_id=b["id"])
    h.fails("link_issues", "BLOCKING_CYCLE", "FAILED_PRECONDITION", issue_id=b["id"], link_type="blocks",
            other_issue_id=a["id"])
    c = issue(h, "in_review")
    h.ok("link_issues", issue_id=b["id"], link_type="blocks", other_issue_id=c["id"])
    error = h.fails("link_issues", "BLOCKING_CYCLE", "FAILED_PRECONDITION", issue_id=c["id"], link_type="blocks",
                    other_issue_id=a["id"])
    assert error["details"]["path"] == [a["id"], b["id"], c["id"]]
    other_project = h.find("issues", lambda i: i["project_id"] != a["project_id"]
                           and not h.state.projects.get(i["project_id"])["archived"])
    h.ok("link_issues", issue_id=a["id"], link_type="duplicates", other_issue_id=other_project["id"])


def test_archived_projects_are_read_only(h):
    archived = project(h, archived=True)
    old = h.state.issues.first(project_id=archived["id"], status="open")
    link = h.state.links.first(source_id=h.state.issues.first(project_id=archived["id"])["id"]) or \
        h.state.links.first(lambda li: li["source_id"].startswith(archived["key"] + "-"))
    h.fails("add_comment", "PROJECT_ARCHIVED", "FAILED_PRECONDITION", issue_id=old["id"], body="Still an issue?")
    h.fails("transition_issue", "PROJECT_ARCHIVED", "FAILED_PRECONDITION", issue_id=old["id"], to_status="in_progress")
    h.fails("update_issue", "PROJECT_ARCHIVED", "FAILED_PRECONDITION", issue_id=old["id"], priority="low")
    h.fails("create_issue", "PROJECT_ARCHIVED", "FAILED_PRECONDITION", project_id=archived["id"], title="Revive",
            issue_type="task")
    h.fails("create_sprint", "PROJECT_ARCHIVED", "FAILED_PRECONDITION", project_id=archived["id"], name="Zombie",
            start_date="2026-03-02", end_date="2026-03-10")
    h.fails("unlink_issues", "PROJECT_ARCHIVED", "FAILED_PRECONDITION", link_id=link["id"])
    h.fails("link_issues", "PROJECT_ARCHIVED", "FAILED_PRECONDITION", issue_id=issue(h, "open")["id"],
            link_type="relates_to", other_issue_id=old["id"])
    assert archived["id"] not in [p["id"] for p in h.ok("list_projects")["projects"]]
    assert h.ok("get_issue", issue_id=old["id"])["id"] == old["id"]  # reading still works


def test_sprint_creation_rules(h):
    proj = project(h)
    base = {"project_id": proj["id"], "name": "Next"}
    for start, end in (("2026-03-20", "2026-03-10"), ("2026-03-02", "2026-04-15"), ("2026-02-01", "2026-02-14")):
        h.fails("create_sprint", "INVALID_SPRINT_DATES", "INVALID_ARGUMENT", **base, start_date=start,
                end_date=end)
    h.fails("create_sprint", "BAD_DATE", "INVALID_ARGUMENT", **base, start_date="2026-02-30",
            end_date="2026-03-10")
    taken = sprint(h, "planned")["name"]
    h.fails("create_sprint", "SPRINT_NAME_TAKEN", "CONFLICT", **{**base, "name": taken.upper()},
            start_date="2026-03-09", end_date="2026-03-20")


def test_sprints_stay_in_their_project(h):
    other = h.state.projects.first(lambda p: not p["archived"] and p["id"] != project(h)["id"])
    foreign = sprint(h, "planned", other["id"])
    h.fails("add_issue_to_sprint", "SPRINT_IN_OTHER_PROJECT", "INVALID_ARGUMENT",
            issue_id=issue(h, "open")["id"], sprint_id=foreign["id"])
    h.fails("complete_sprint", "SPRINT_IN_OTHER_PROJECT", "INVALID_ARGUMENT",
            sprint_id=sprint(h, "active")["id"], move_open_issues_to=foreign["id"])


def test_update_issue_rules(h):
    key = issue(h, "open")["id"]
    h.fails("update_issue", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT", issue_id=key)
    h.fails("update_issue", "BAD_DATE", "INVALID_ARGUMENT", issue_id=key, due_date="2026-13-01")
    assert h.call("update_issue", {"issue_id": key, "story_points": 4}).error["reason"] == "SCHEMA_VIOLATION"
    updated = h.ok("update_issue", issue_id=key, story_points=13, issue_type="story")
    assert (updated["story_points"], updated["type"], updated["updated_at"]) == (13, "story", "2026-03-02T09:00:00Z")


def test_unknown_ids_are_typed_not_found(h):
    h.fails("get_issue", "ISSUE_NOT_FOUND", "NOT_FOUND", issue_id="WEB-999")
    h.fails("get_project", "PROJECT_NOT_FOUND", "NOT_FOUND", project_id="prj_missing")
    h.fails("get_sprint", "SPRINT_NOT_FOUND", "NOT_FOUND", sprint_id="spr_missing")
    h.fails("search_issues", "SPRINT_NOT_FOUND", "NOT_FOUND", sprint_id="spr_missing")
