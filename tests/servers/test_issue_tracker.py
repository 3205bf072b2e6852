"""The issue_tracker server: its tool surface, seed, workflow, sprint and link rules, and typed
failures.

Every failure is checked in the state that causes it: the reason and code, that the tool
declares the reason, and that the session is left exactly as it was.
"""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import issue_tracker
from prove_servers.issue_tracker import TrackerOptions, server

TOOLS = server.tools


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


def fails(rt: ServerRuntime, sid: str, tool: str, expected: str, code: str = "FAILED_PRECONDITION", **args) -> dict:
    """The call fails with reason ``expected`` and ``code``, the tool declares the reason, and
    nothing was written — checked on a copy run without the executor's rollback too."""
    before = rt.state_hash(sid)
    probe = State.from_snapshot(rt.state(sid).snapshot())
    with pytest.raises(ToolError):
        TOOLS[tool].fn(probe, **TOOLS[tool].validate(dict(args)))
    assert probe.state_hash() == before, f"{tool} wrote before failing with {expected}"
    result = rt.call(sid, tool, args)
    assert result.is_error, f"{tool} succeeded: {result.data}"
    assert (result.error["reason"], result.code) == (expected, code), result.error
    assert expected in TOOLS[tool].spec.errors, f"{tool} does not declare {expected}"
    assert rt.state_hash(sid) == before
    return result.error


def example_args(rt: ServerRuntime, sid: str, example) -> dict:
    return dict(example(rt.state(sid)) if callable(example) else example)


def project(rt: ServerRuntime, sid: str, archived: bool = False) -> dict:
    return rt.state(sid).projects.first(archived=archived)


def issue(rt: ServerRuntime, sid: str, status: str, **where) -> dict:
    return rt.state(sid).issues.first(project_id=project(rt, sid)["id"], status=status, **where)


def sprint(rt: ServerRuntime, sid: str, status: str, project_id: str | None = None) -> dict:
    return rt.state(sid).sprints.first(project_id=project_id or project(rt, sid)["id"], status=status)


def non_member(rt: ServerRuntime, sid: str, proj: dict) -> str:
    return rt.state(sid).users.first(lambda u: u["id"] not in proj["member_ids"])["id"]


def walk_to_done(rt: ServerRuntime, sid: str, key: str) -> None:
    for status in ("in_progress", "in_review", "done"):
        ok(rt, sid, "transition_issue", issue_id=key, to_status=status)


ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_20_tools_each_described_with_examples():
    assert len(TOOLS) == 20
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"
    assert (server.name, server.domain) == ("issue_tracker", "knowledge")


def test_annotations_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_projects", "get_project", "search_issues", "get_issue", "list_comments",
                         "list_sprints", "get_sprint"}
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"unlink_issues", "complete_sprint"}
    idempotent = {n for n, t in TOOLS.items() if t.spec.annotations.idempotent and not t.spec.annotations.read_only}
    assert idempotent == set(TOOLS) - read_only - {"create_issue", "add_comment"}  # these add a record each time
    assert TOOLS["link_issues"].spec.entity_params() == {"issue_id": "issue", "other_issue_id": "issue"}


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_on_a_fresh_session(rt, tool, index):
    sid = rt.new_session()
    data = ok(rt, sid, tool, **example_args(rt, sid, TOOLS[tool].examples[index]))
    assert json.loads(json.dumps(data)) == data


def test_read_only_tools_never_change_state_and_writers_do(rt):
    for name, tool in TOOLS.items():
        for example in tool.examples:
            sid = rt.new_session()
            args = example_args(rt, sid, example)  # may prepare the state first
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
            rt.call(sid, name, args)
            assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first.state_hash(first.new_session()) == again.state_hash(again.new_session())
    assert other.state_hash(other.new_session()) != first.state_hash(first.new_session())
    ids = {p["id"] for p in first.state(first.new_session()).projects}
    assert ids.isdisjoint(p["id"] for p in other.state(other.new_session()).projects)


def test_seed_has_the_variety_tasks_need(rt, sid):
    state = rt.state(sid)
    assert len(state.projects) == 3 and len(state.projects.where(archived=True)) == 1
    for proj in state.projects:
        issues = state.issues.where(project_id=proj["id"])
        assert len(issues) == len(issue_tracker.ISSUE_PLAN)
        assert [i["id"] for i in issues] == [f"{proj['key']}-{n}" for n in range(1, len(issues) + 1)]
        assert {i["status"] for i in issues} == set(issue_tracker.TRANSITIONS)
        assert all(i["assignee_id"] in (None, *proj["member_ids"]) for i in issues)
        assert {sp["status"] for sp in state.sprints.where(project_id=proj["id"])} == {"planned", "active", "completed"}
        assert state.get_var("me") in proj["member_ids"] and len(proj["member_ids"]) < len(state.users)
        blocked = [i for i in issues if issue_tracker._open_blockers(state, i["id"])]
        assert [i["status"] for i in blocked] == ["in_review"]


def test_a_ten_times_larger_seed_works(rt):
    big = ServerRuntime(server, options=TrackerOptions(projects=30))
    sid = big.new_session()
    assert len(big.state(sid).issues) == 10 * len(rt.state(rt.new_session()).issues)
    assert len({p["key"] for p in big.state(sid).projects}) == 30
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        TrackerOptions(projects=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(issue_tracker)
    registered = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- flows ----------------------------------------------------------------------------------------


def test_an_issue_from_creation_to_done_passing_ids(rt, sid):
    proj = ok(rt, sid, "list_projects")["projects"][0]
    details = ok(rt, sid, "get_project", project_id=proj["id"])
    teammate = next(m for m in details["members"] if not m["is_you"])
    created = ok(rt, sid, "create_issue", project_id=proj["id"], title="Search ignores accents", issue_type="bug",
                 labels=details["labels"][:2], priority="high")
    key = created["id"]
    assert key == f"{proj['key']}-{len(issue_tracker.ISSUE_PLAN) + 1}" and created["status"] == "open"
    assert created["reporter_id"] == next(m["id"] for m in details["members"] if m["is_you"])
    assigned = ok(rt, sid, "assign_issue", issue_id=key, assignee_id=teammate["id"])
    assert assigned["assignee_id"] == teammate["id"] and teammate["id"] in assigned["watcher_ids"]
    ok(rt, sid, "add_issue_to_sprint", issue_id=key, sprint_id=proj["active_sprint"]["id"])
    ok(rt, sid, "transition_issue", issue_id=key, to_status="in_progress")
    ok(rt, sid, "add_comment", issue_id=key, body="Root cause: missing unicode folding.")
    ok(rt, sid, "transition_issue", issue_id=key, to_status="in_review")
    assert ok(rt, sid, "get_issue", issue_id=key)["allowed_transitions"] == ["done", "in_progress"]
    done = ok(rt, sid, "transition_issue", issue_id=key, to_status="done", resolution="fixed")
    assert (done["status"], done["resolution"]) == ("done", "fixed") and done["resolved_at"]
    found = ok(rt, sid, "search_issues", project_id=proj["id"], query="accents", status="done")["issues"]
    assert [i["id"] for i in found] == [key]
    board = ok(rt, sid, "get_sprint", sprint_id=proj["active_sprint"]["id"])["board"]
    assert key in [i["id"] for i in board["done"]]
    reopened = ok(rt, sid, "transition_issue", issue_id=key, to_status="open")
    assert (reopened["resolution"], reopened["resolved_at"]) == (None, None)
    comments = ok(rt, sid, "list_comments", issue_id=key)
    assert comments["total"] == 1 and comments["comments"][0]["author"] == next(
        m["name"] for m in details["members"] if m["is_you"])


def test_a_blocked_issue_waits_for_its_blocker(rt, sid):
    link = rt.state(sid).links.first(type="blocks")
    blocker, blocked = link["source_id"], link["target_id"]
    seen = ok(rt, sid, "get_issue", issue_id=blocked)
    assert seen["blocked_by_open"] == [blocker]
    assert {"link_id": link["id"], "type": "is_blocked_by", "direction": "inward", "issue_id": blocker} .items() <= (
        next(li for li in seen["links"] if li["link_id"] == link["id"]).items())
    error = fails(rt, sid, "transition_issue", "BLOCKED_BY_OPEN_ISSUE", issue_id=blocked, to_status="done")
    assert error["details"]["blocked_by"] == [blocker]
    walk_to_done(rt, sid, blocker)
    assert ok(rt, sid, "transition_issue", issue_id=blocked, to_status="done")["status"] == "done"


def test_unlinking_unblocks(rt, sid):
    link = rt.state(sid).links.first(type="blocks")
    ok(rt, sid, "unlink_issues", link_id=link["id"])
    ok(rt, sid, "transition_issue", issue_id=link["target_id"], to_status="done")
    fails(rt, sid, "unlink_issues", "LINK_NOT_FOUND", "NOT_FOUND", link_id=link["id"])


def test_sprint_lifecycle(rt, sid):
    proj = project(rt, sid)
    active, planned = sprint(rt, sid, "active"), sprint(rt, sid, "planned")
    error = fails(rt, sid, "start_sprint", "SPRINT_ALREADY_ACTIVE", "CONFLICT", sprint_id=planned["id"])
    assert error["details"]["active_sprint_id"] == active["id"]
    fails(rt, sid, "complete_sprint", "SPRINT_NOT_ACTIVE", sprint_id=planned["id"])
    in_sprint = rt.state(sid).issues.where(sprint_id=active["id"])
    unfinished = [i["id"] for i in in_sprint if i["status"] != "done"]
    done_points = sum(i["story_points"] or 0 for i in in_sprint if i["status"] == "done")
    result = ok(rt, sid, "complete_sprint", sprint_id=active["id"], move_open_issues_to=planned["id"])
    assert result["carried_over_issue_ids"] == unfinished and result["sprint"]["completed_points"] == done_points
    assert {i["id"] for i in rt.state(sid).issues.where(sprint_id=planned["id"])} >= set(unfinished)
    started = ok(rt, sid, "start_sprint", sprint_id=planned["id"])
    assert (started["status"], started["started_on"]) == ("active", "2026-03-02")
    assert ok(rt, sid, "list_projects")["projects"][0]["active_sprint"]["id"] == planned["id"]

    backlog = issue(rt, sid, "open", sprint_id=None)
    fails(rt, sid, "add_issue_to_sprint", "SPRINT_COMPLETED", issue_id=backlog["id"], sprint_id=active["id"])
    fails(rt, sid, "start_sprint", "SPRINT_COMPLETED", sprint_id=active["id"])
    fails(rt, sid, "complete_sprint", "SPRINT_COMPLETED", sprint_id=active["id"])
    fails(rt, sid, "complete_sprint", "INVALID_TARGET_SPRINT", "INVALID_ARGUMENT", sprint_id=planned["id"],
          move_open_issues_to=active["id"])
    fresh = ok(rt, sid, "create_sprint", project_id=proj["id"], name="Polish", start_date="2026-03-16",
               end_date="2026-03-27")
    ok(rt, sid, "complete_sprint", sprint_id=planned["id"])  # to the backlog
    assert rt.state(sid).issues.where(sprint_id=planned["id"], status="open") == []
    fails(rt, sid, "start_sprint", "SPRINT_EMPTY", sprint_id=fresh["id"])
    ok(rt, sid, "add_issue_to_sprint", issue_id=backlog["id"], sprint_id=fresh["id"])
    assert ok(rt, sid, "start_sprint", sprint_id=fresh["id"])["issue_count"] == 1
    listed = ok(rt, sid, "list_sprints", project_id=proj["id"], status="completed")["sprints"]
    assert {s["id"] for s in listed} >= {active["id"], planned["id"]}


def test_search_filters_sorts_and_pages(rt, sid):
    proj = project(rt, sid)
    everything = ok(rt, sid, "search_issues", project_id=proj["id"], limit=50)
    ranks = [issue_tracker.PRIORITY_RANK[i["priority"]] for i in everything["issues"]]
    assert everything["total"] == len(issue_tracker.ISSUE_PLAN) and ranks == sorted(ranks)
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "search_issues", project_id=proj["id"], limit=4, offset=offset)
        seen += [i["id"] for i in page["issues"]]
        offset = page["next_offset"]
    assert seen == [i["id"] for i in everything["issues"]]
    backlog = ok(rt, sid, "search_issues", project_id=proj["id"], in_backlog=True, limit=50)["issues"]
    assert backlog and all(i["sprint_id"] is None for i in backlog)
    unassigned = ok(rt, sid, "search_issues", unassigned=True, status="open", limit=50)["issues"]
    assert all(i["assignee_id"] is None and i["status"] == "open" for i in unassigned)
    label = proj["labels"][0]
    labelled = ok(rt, sid, "search_issues", label=label, limit=50)["issues"]
    assert all(label in i["labels"] for i in labelled)
    newest = ok(rt, sid, "search_issues", project_id=proj["id"], sort="newest", limit=50)["issues"]
    created = {i["id"]: i["created_at"] for i in rt.state(sid).issues}
    assert [created[i["id"]] for i in newest] == sorted(created[i["id"]] for i in newest)[::-1]


def test_watchers(rt, sid):
    open_issue = issue(rt, sid, "open")
    proj = project(rt, sid)
    newcomer = next(m for m in proj["member_ids"] if m not in open_issue["watcher_ids"])
    assert newcomer in ok(rt, sid, "set_watcher", issue_id=open_issue["id"], user_id=newcomer)["watcher_ids"]
    gone = ok(rt, sid, "set_watcher", issue_id=open_issue["id"], user_id=newcomer, watching=False)
    assert newcomer not in gone["watcher_ids"]
    fails(rt, sid, "set_watcher", "NOT_A_PROJECT_MEMBER", issue_id=open_issue["id"],
          user_id=non_member(rt, sid, proj))


def test_labels_come_from_the_project(rt, sid):
    open_issue, proj = issue(rt, sid, "open"), project(rt, sid)
    spare = next(lb for lb in proj["labels"] if lb not in open_issue["labels"])
    updated = ok(rt, sid, "update_labels", issue_id=open_issue["id"], add=[spare], remove=open_issue["labels"])
    assert updated["labels"] == [spare]
    missing = next(lb for lb in issue_tracker.LABELS if lb not in proj["labels"])
    error = fails(rt, sid, "update_labels", "UNKNOWN_LABEL", "INVALID_ARGUMENT", issue_id=open_issue["id"],
                  add=[missing])
    assert error["details"]["available"] == proj["labels"]
    fails(rt, sid, "create_issue", "UNKNOWN_LABEL", "INVALID_ARGUMENT", project_id=proj["id"], title="New thing",
          issue_type="task", labels=[missing])
    fails(rt, sid, "update_labels", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT", issue_id=open_issue["id"])


# -- typed failures -------------------------------------------------------------------------------


def test_invalid_transitions(rt, sid):
    for status, target in (("open", "done"), ("open", "in_review"), ("in_progress", "done"), ("done", "in_review"),
                           ("open", "open")):
        found = issue(rt, sid, status)
        error = fails(rt, sid, "transition_issue", "INVALID_TRANSITION", issue_id=found["id"], to_status=target)
        assert error["details"]["allowed"] == list(issue_tracker.TRANSITIONS[status])


def test_not_a_project_member(rt, sid):
    proj = project(rt, sid)
    outsider = non_member(rt, sid, proj)
    fails(rt, sid, "assign_issue", "NOT_A_PROJECT_MEMBER", issue_id=issue(rt, sid, "open")["id"], assignee_id=outsider)
    fails(rt, sid, "create_issue", "NOT_A_PROJECT_MEMBER", project_id=proj["id"], title="Something", issue_type="task",
          assignee_id=outsider)
    fails(rt, sid, "assign_issue", "USER_NOT_FOUND", "NOT_FOUND", issue_id=issue(rt, sid, "open")["id"],
          assignee_id="usr_missing")


def test_link_rules(rt, sid):
    a, b = issue(rt, sid, "open"), issue(rt, sid, "in_progress")
    fails(rt, sid, "link_issues", "CANNOT_LINK_TO_SELF", "INVALID_ARGUMENT", issue_id=a["id"], link_type="blocks",
          other_issue_id=a["id"])
    made = ok(rt, sid, "link_issues", issue_id=a["id"], link_type="relates_to", other_issue_id=b["id"])
    error = fails(rt, sid, "link_issues", "LINK_EXISTS", "CONFLICT", issue_id=b["id"], link_type="relates_to",
                  other_issue_id=a["id"])  # relates_to goes both ways
    assert error["details"]["link_id"] == made["id"]
    ok(rt, sid, "link_issues", issue_id=a["id"], link_type="blocks", other_issue_id=b["id"])
    fails(rt, sid, "link_issues", "LINK_EXISTS", "CONFLICT", issue_id=a["id"], link_type="blocks",
          other_issue_id=b["id"])
    fails(rt, sid, "link_issues", "BLOCKING_CYCLE", issue_id=b["id"], link_type="blocks", other_issue_id=a["id"])
    c = issue(rt, sid, "in_review")
    ok(rt, sid, "link_issues", issue_id=b["id"], link_type="blocks", other_issue_id=c["id"])
    error = fails(rt, sid, "link_issues", "BLOCKING_CYCLE", issue_id=c["id"], link_type="blocks",
                  other_issue_id=a["id"])
    assert error["details"]["path"] == [a["id"], b["id"], c["id"]]
    other_project = rt.state(sid).issues.first(lambda i: i["project_id"] != a["project_id"] and not rt.state(
        sid).projects.get(i["project_id"])["archived"])
    ok(rt, sid, "link_issues", issue_id=a["id"], link_type="duplicates", other_issue_id=other_project["id"])


def test_archived_projects_are_read_only(rt, sid):
    archived = project(rt, sid, archived=True)
    old = rt.state(sid).issues.first(project_id=archived["id"], status="open")
    link = rt.state(sid).links.first(source_id=rt.state(sid).issues.first(project_id=archived["id"])["id"]) or \
        rt.state(sid).links.first(lambda li: li["source_id"].startswith(archived["key"] + "-"))
    fails(rt, sid, "add_comment", "PROJECT_ARCHIVED", issue_id=old["id"], body="Still an issue?")
    fails(rt, sid, "transition_issue", "PROJECT_ARCHIVED", issue_id=old["id"], to_status="in_progress")
    fails(rt, sid, "update_issue", "PROJECT_ARCHIVED", issue_id=old["id"], priority="low")
    fails(rt, sid, "create_issue", "PROJECT_ARCHIVED", project_id=archived["id"], title="Revive", issue_type="task")
    fails(rt, sid, "create_sprint", "PROJECT_ARCHIVED", project_id=archived["id"], name="Zombie",
          start_date="2026-03-02", end_date="2026-03-10")
    fails(rt, sid, "unlink_issues", "PROJECT_ARCHIVED", link_id=link["id"])
    fails(rt, sid, "link_issues", "PROJECT_ARCHIVED", issue_id=issue(rt, sid, "open")["id"], link_type="relates_to",
          other_issue_id=old["id"])
    assert archived["id"] not in [p["id"] for p in ok(rt, sid, "list_projects")["projects"]]
    assert ok(rt, sid, "get_issue", issue_id=old["id"])["id"] == old["id"]  # reading still works


def test_sprint_creation_rules(rt, sid):
    proj = project(rt, sid)
    base = {"project_id": proj["id"], "name": "Next"}
    for start, end in (("2026-03-20", "2026-03-10"), ("2026-03-02", "2026-04-15"), ("2026-02-01", "2026-02-14")):
        fails(rt, sid, "create_sprint", "INVALID_SPRINT_DATES", "INVALID_ARGUMENT", **base, start_date=start,
              end_date=end)
    fails(rt, sid, "create_sprint", "BAD_DATE", "INVALID_ARGUMENT", **base, start_date="2026-02-30",
          end_date="2026-03-10")
    taken = sprint(rt, sid, "planned")["name"]
    fails(rt, sid, "create_sprint", "SPRINT_NAME_TAKEN", "CONFLICT", **{**base, "name": taken.upper()},
          start_date="2026-03-09", end_date="2026-03-20")


def test_sprints_stay_in_their_project(rt, sid):
    other = rt.state(sid).projects.first(lambda p: not p["archived"] and p["id"] != project(rt, sid)["id"])
    foreign = sprint(rt, sid, "planned", other["id"])
    fails(rt, sid, "add_issue_to_sprint", "SPRINT_IN_OTHER_PROJECT", "INVALID_ARGUMENT",
          issue_id=issue(rt, sid, "open")["id"], sprint_id=foreign["id"])
    fails(rt, sid, "complete_sprint", "SPRINT_IN_OTHER_PROJECT", "INVALID_ARGUMENT",
          sprint_id=sprint(rt, sid, "active")["id"], move_open_issues_to=foreign["id"])


def test_update_issue_rules(rt, sid):
    key = issue(rt, sid, "open")["id"]
    fails(rt, sid, "update_issue", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT", issue_id=key)
    fails(rt, sid, "update_issue", "BAD_DATE", "INVALID_ARGUMENT", issue_id=key, due_date="2026-13-01")
    assert rt.call(sid, "update_issue", {"issue_id": key, "story_points": 4}).error["reason"] == "SCHEMA_VIOLATION"
    updated = ok(rt, sid, "update_issue", issue_id=key, story_points=13, issue_type="story")
    assert (updated["story_points"], updated["type"], updated["updated_at"]) == (13, "story", "2026-03-02T09:00:00Z")


def test_unknown_ids_are_typed_not_found(rt, sid):
    fails(rt, sid, "get_issue", "ISSUE_NOT_FOUND", "NOT_FOUND", issue_id="WEB-999")
    fails(rt, sid, "get_project", "PROJECT_NOT_FOUND", "NOT_FOUND", project_id="prj_missing")
    fails(rt, sid, "get_sprint", "SPRINT_NOT_FOUND", "NOT_FOUND", sprint_id="spr_missing")
    fails(rt, sid, "search_issues", "SPRINT_NOT_FOUND", "NOT_FOUND", sprint_id="spr_missing")
