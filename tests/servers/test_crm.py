"""The crm server: its tool surface, seed, pipeline and lead rules, and typed failures.

Every failure is checked in the state that causes it: the reason and code, that the tool
declares the reason, and that the session is left exactly as it was.
"""

import json

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import crm
from prove_servers.crm import CrmOptions, server

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
    nothing was written — checked on a copy run without the executor's rollback too. (Not named
    ``reason``: qualify_lead has an argument of that name.)"""
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


def qualified_leads(rt: ServerRuntime, sid: str) -> list[dict]:
    """The seeded qualified leads: plain, company already an account, e-mail already a contact,
    owned by the rep who left."""
    return rt.state(sid).leads.where(status="qualified")


def open_deal(rt: ServerRuntime, sid: str, **where) -> dict:
    return rt.state(sid).deals.first(lambda d: d["stage"] not in crm.CLOSED_STAGES, **where)


def me(rt: ServerRuntime, sid: str) -> str:
    return rt.state(sid).get_var("me")


def inactive_rep(rt: ServerRuntime, sid: str) -> str:
    return rt.state(sid).reps.first(active=False)["id"]


ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_16_tools_each_described_with_examples():
    assert len(TOOLS) == 16
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"
    assert (server.name, server.domain) == ("crm", "knowledge")


def test_annotations_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_sales_reps", "search_crm", "get_account", "get_deal", "list_activities"}
    assert not any(t.spec.annotations.destructive for t in TOOLS.values())  # nothing deletes; closing is a stage
    idempotent = {n for n, t in TOOLS.items() if t.spec.annotations.idempotent and not t.spec.annotations.read_only}
    assert idempotent == set(TOOLS) - read_only - {"create_deal", "log_activity", "add_note"}  # these add a record
    assert TOOLS["convert_lead"].spec.produces == ("account", "contact", "deal")
    assert TOOLS["assign_owner"].spec.entity_params() == {
        "owner_id": "sales_rep", "account_id": "account", "lead_id": "lead", "deal_id": "deal"}


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_on_a_fresh_session(rt, tool, index):
    sid = rt.new_session()
    data = ok(rt, sid, tool, **example_args(rt, sid, TOOLS[tool].examples[index]))
    assert json.loads(json.dumps(data)) == data


def test_read_only_tools_never_change_state_and_writers_do(rt):
    for name, tool in TOOLS.items():
        for example in tool.examples:
            sid = rt.new_session()
            before = rt.state_hash(sid)
            ok(rt, sid, name, **example_args(rt, sid, example))
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
    ids = {a["id"] for a in first.state(first.new_session()).accounts}
    assert ids.isdisjoint(a["id"] for a in other.state(other.new_session()).accounts)


def test_seed_has_the_variety_tasks_need(rt, sid):
    state = rt.state(sid)
    assert len(state.accounts) == 12 and len(state.reps) == 6 and len(state.reps.where(active=False)) == 1
    assert {d["stage"] for d in state.deals} == set(crm.STAGES)
    assert state.deals.where(lambda d: d["amount"] is None and d["stage"] not in crm.CLOSED_STAGES)
    assert {ld["status"] for ld in state.leads} == {"new", "working", "qualified", "disqualified", "converted"}
    assert len(qualified_leads(rt, sid)) == 4
    emails = [c["email"] for c in state.contacts]
    assert len(emails) == len(set(emails)) and all(e == e.lower() for e in emails)
    assert ok(rt, sid, "list_activities", overdue_only=True)["total"] > 0
    account_names = {a["name"] for a in state.accounts}
    assert len(account_names) == len(state.accounts)
    assert all(a["type"] == "customer" for a in state.accounts
               if state.deals.first(account_id=a["id"], stage="closed_won"))


def test_a_ten_times_larger_seed_works(rt):
    big = ServerRuntime(server, options=CrmOptions(accounts=120))
    sid = big.new_session()
    assert len(big.state(sid).accounts) == 120 and len(big.state(sid).leads) == 120
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        CrmOptions(accounts=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(crm)
    registered = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- flows ----------------------------------------------------------------------------------------


def test_lead_to_won_deal_passing_ids(rt, sid):
    lead = ok(rt, sid, "create_lead", first_name="Ines", last_name="Okafor", company="Marlow Freight",
              email="Ines.Okafor@MarlowFreight.example.com", source="referral")
    assert (lead["status"], lead["owner_id"], lead["email"]) == ("new", me(rt, sid),
                                                                "ines.okafor@marlowfreight.example.com")
    found = ok(rt, sid, "search_crm", query="marlow", record_type="lead")["results"]
    assert [r["id"] for r in found] == [lead["id"]]
    fails(rt, sid, "convert_lead", "LEAD_NOT_QUALIFIED", lead_id=lead["id"])
    ok(rt, sid, "qualify_lead", lead_id=lead["id"], decision="qualified")
    converted = ok(rt, sid, "convert_lead", lead_id=lead["id"], close_date="2026-04-30")
    account = ok(rt, sid, "get_account", account_id=converted["account_id"])
    assert account["name"] == "Marlow Freight" and account["type"] == "prospect"
    assert [c["id"] for c in account["contacts"]] == [converted["contact_id"]]

    deal_id = converted["deal_id"]
    deal = ok(rt, sid, "get_deal", deal_id=deal_id)
    assert (deal["stage"], deal["amount"], deal["close_date"]) == ("qualification", None, "2026-04-30")
    assert deal["allowed_next_stages"] == ["proposal", "negotiation", "closed_won", "closed_lost"]
    fails(rt, sid, "update_deal", "AMOUNT_REQUIRED", "INVALID_ARGUMENT", deal_id=deal_id, stage="proposal")
    ok(rt, sid, "update_deal", deal_id=deal_id, stage="proposal", amount=30000.456)
    task = ok(rt, sid, "log_activity", kind="task", subject="Send contract", due_date="2026-03-05", deal_id=deal_id)
    assert task["account_id"] == converted["account_id"] and not task["overdue"]
    ok(rt, sid, "complete_activity", activity_id=task["id"], outcome="Signed copy received")
    ok(rt, sid, "add_note", body="Legal approved the MSA.", deal_id=deal_id)
    won = ok(rt, sid, "update_deal", deal_id=deal_id, stage="closed_won")
    assert (won["stage"], won["probability"], won["amount"], won["allowed_next_stages"]) == (
        "closed_won", 100, 30000.46, [])
    assert [h["stage"] for h in won["stage_history"]] == ["qualification", "proposal", "closed_won"]
    assert ok(rt, sid, "get_account", account_id=converted["account_id"])["type"] == "customer"
    final = ok(rt, sid, "get_deal", deal_id=deal_id)
    assert [a["status"] for a in final["activities"]] == ["completed"]
    assert final["notes"][0]["body"] == "Legal approved the MSA." and final["notes"][0]["author_id"] == me(rt, sid)
    fails(rt, sid, "update_deal", "DEAL_CLOSED", deal_id=deal_id, stage="closed_lost", lost_reason="x")
    fails(rt, sid, "convert_lead", "LEAD_ALREADY_CONVERTED", lead_id=lead["id"])


def test_converting_into_an_existing_account(rt, sid):
    lead = qualified_leads(rt, sid)[1]  # works at a company that already is an account
    account = rt.state(sid).accounts.first(name=lead["company"])
    error = fails(rt, sid, "convert_lead", "ACCOUNT_NAME_TAKEN", "CONFLICT", lead_id=lead["id"])
    assert error["details"]["account_id"] == account["id"]
    contacts_before = len(rt.state(sid).contacts.where(account_id=account["id"]))
    converted = ok(rt, sid, "convert_lead", lead_id=lead["id"], account_id=account["id"], create_deal=False)
    assert converted["account_id"] == account["id"] and converted["deal_id"] is None
    assert len(rt.state(sid).contacts.where(account_id=account["id"])) == contacts_before + 1


def test_reassigning_an_account_moves_its_contacts_and_optionally_its_deals(rt, sid):
    state = rt.state(sid)
    account = state.accounts.first(lambda a: bool(
        state.deals.first(lambda d: d["stage"] not in crm.CLOSED_STAGES, account_id=a["id"])
        and state.deals.first(lambda d: d["stage"] in crm.CLOSED_STAGES, account_id=a["id"])))
    new_owner = state.reps.first(lambda r: r["active"] and r["id"] != account["owner_id"])["id"]
    alone = ok(rt, sid, "assign_owner", owner_id=new_owner, account_id=account["id"])
    assert alone["contact_ids"] and alone["deal_ids"] == []  # deals stay unless asked
    assert {d["owner_id"] for d in rt.state(sid).deals.where(account_id=account["id"])} == {account["owner_id"]}
    result = ok(rt, sid, "assign_owner", owner_id=new_owner, account_id=account["id"], include_open_deals=True)
    assert result["previous_owner_id"] == new_owner and result["contact_ids"] == [] and result["deal_ids"]
    after = rt.state(sid)
    assert {c["owner_id"] for c in after.contacts.where(account_id=account["id"])} == {new_owner}
    deals = after.deals.where(account_id=account["id"])
    assert {d["owner_id"] for d in deals if d["stage"] not in crm.CLOSED_STAGES} == {new_owner}
    assert {d["owner_id"] for d in deals if d["stage"] in crm.CLOSED_STAGES} == {account["owner_id"]}  # history stays
    mine = ok(rt, sid, "search_crm", owner_id=new_owner, record_type="contact")["results"]
    assert {c["account_id"] for c in mine} >= {account["id"]}


def test_search_filters_and_pages(rt, sid):
    everything = ok(rt, sid, "search_crm", limit=50)
    state = rt.state(sid)
    assert everything["counts"] == {"account": len(state.accounts), "contact": len(state.contacts),
                                    "lead": len(state.leads), "deal": len(state.deals)}
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "search_crm", limit=7, offset=offset)
        seen += [r["id"] for r in page["results"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == everything["total"]
    negotiating = ok(rt, sid, "search_crm", stage="negotiation")["results"]
    assert negotiating and {r["stage"] for r in negotiating} == {"negotiation"}
    contact = state.contacts.first()
    hit = ok(rt, sid, "search_crm", query=f"{contact['last_name'].upper()} {contact['email'].split('@')[1]}")
    assert contact["id"] in [r["id"] for r in hit["results"]]
    assert ok(rt, sid, "search_crm", query="zzzz-nothing")["total"] == 0


def test_list_activities_orders_and_flags_overdue(rt, sid):
    listed = ok(rt, sid, "list_activities", status="open", limit=50)["activities"]
    dues = [a["due_date"] for a in listed]
    assert dues == sorted(dues)
    assert all(a["overdue"] == (a["due_date"] < "2026-03-02") for a in listed)
    overdue = ok(rt, sid, "list_activities", overdue_only=True, limit=50)["activities"]
    assert overdue == [a for a in listed if a["overdue"]]


def test_list_sales_reps(rt, sid):
    reps = ok(rt, sid, "list_sales_reps")["sales_reps"]
    assert len(reps) == 5 and [r["id"] for r in reps if r["is_you"]] == [me(rt, sid)]
    assert sum(r["open_deal_count"] for r in reps) == len(
        rt.state(sid).deals.where(lambda d: d["stage"] not in crm.CLOSED_STAGES))
    assert len(ok(rt, sid, "list_sales_reps", include_inactive=True)["sales_reps"]) == 6


# -- typed failures -------------------------------------------------------------------------------


def test_invalid_stage_transitions(rt, sid):
    deal = open_deal(rt, sid, stage="negotiation")
    error = fails(rt, sid, "update_deal", "INVALID_STAGE_TRANSITION", deal_id=deal["id"], stage="proposal")
    assert error["details"]["allowed"] == ["closed_won", "closed_lost"]
    fails(rt, sid, "update_deal", "LOST_REASON_REQUIRED", "INVALID_ARGUMENT", deal_id=deal["id"], stage="closed_lost")
    ok(rt, sid, "update_deal", deal_id=open_deal(rt, sid, stage="qualification")["id"], stage="closed_lost",
       lost_reason="No budget")  # any open stage may drop to lost
    ok(rt, sid, "update_deal", deal_id=deal["id"], stage="negotiation")  # staying put is no move at all
    fails(rt, sid, "update_deal", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT", deal_id=deal["id"])


def test_amount_required_from_proposal_on(rt, sid):
    deal = open_deal(rt, sid, stage="prospecting", amount=None)
    for stage in ("proposal", "negotiation", "closed_won"):
        fails(rt, sid, "update_deal", "AMOUNT_REQUIRED", "INVALID_ARGUMENT", deal_id=deal["id"], stage=stage)
    moved = ok(rt, sid, "update_deal", deal_id=deal["id"], stage="qualification")  # early stages need none
    assert moved["amount"] is None


def test_closed_deals_are_final(rt, sid):
    for stage in ("closed_won", "closed_lost"):
        deal = rt.state(sid).deals.first(stage=stage)
        fails(rt, sid, "update_deal", "DEAL_CLOSED", deal_id=deal["id"], amount=1000)
        fails(rt, sid, "assign_owner", "DEAL_CLOSED", owner_id=me(rt, sid), deal_id=deal["id"])


def test_lead_already_converted(rt, sid):
    lead = rt.state(sid).leads.first(status="converted")
    error = fails(rt, sid, "convert_lead", "LEAD_ALREADY_CONVERTED", lead_id=lead["id"])
    assert error["details"]["contact_id"] == lead["converted"]["contact_id"]
    fails(rt, sid, "qualify_lead", "LEAD_ALREADY_CONVERTED", lead_id=lead["id"], decision="disqualified",
          reason="dupe")
    fails(rt, sid, "log_activity", "LEAD_ALREADY_CONVERTED", kind="call", subject="Ping", completed=True,
          lead_id=lead["id"])
    fails(rt, sid, "assign_owner", "LEAD_ALREADY_CONVERTED", owner_id=me(rt, sid), lead_id=lead["id"])


def test_duplicate_contact_email(rt, sid):
    contact = rt.state(sid).contacts.first()
    error = fails(rt, sid, "create_contact", "DUPLICATE_CONTACT_EMAIL", "CONFLICT",
                  account_id=rt.state(sid).accounts.all()[-1]["id"], first_name="Dup", last_name="Licate",
                  email=contact["email"].upper())
    assert error["details"]["contact_id"] == contact["id"]
    lead = qualified_leads(rt, sid)[2]  # already a contact under this e-mail
    account = rt.state(sid).accounts.first(name=lead["company"])
    fails(rt, sid, "convert_lead", "DUPLICATE_CONTACT_EMAIL", "CONFLICT", lead_id=lead["id"],
          account_id=account["id"])


def test_owner_not_found_and_inactive(rt, sid):
    fails(rt, sid, "create_account", "OWNER_NOT_FOUND", "NOT_FOUND", name="Acme Widgets", industry="manufacturing",
          owner_id="rep_nobody")
    fails(rt, sid, "create_account", "OWNER_INACTIVE", name="Acme Widgets", industry="manufacturing",
          owner_id=inactive_rep(rt, sid))
    fails(rt, sid, "search_crm", "OWNER_NOT_FOUND", "NOT_FOUND", owner_id="rep_nobody")
    fails(rt, sid, "list_activities", "OWNER_NOT_FOUND", "NOT_FOUND", owner_id="rep_nobody")
    deal = open_deal(rt, sid)
    fails(rt, sid, "assign_owner", "OWNER_INACTIVE", owner_id=inactive_rep(rt, sid), deal_id=deal["id"])
    orphan = qualified_leads(rt, sid)[3]  # its owner left
    assert orphan["owner_id"] == inactive_rep(rt, sid)
    fails(rt, sid, "convert_lead", "OWNER_INACTIVE", lead_id=orphan["id"])
    ok(rt, sid, "assign_owner", owner_id=me(rt, sid), lead_id=orphan["id"])
    assert ok(rt, sid, "convert_lead", lead_id=orphan["id"])["deal_id"]


def test_account_and_lead_duplicates(rt, sid):
    existing = rt.state(sid).accounts.first()
    fails(rt, sid, "create_account", "ACCOUNT_NAME_TAKEN", "CONFLICT", name=f" {existing['name'].lower()} ",
          industry="other")
    lead = rt.state(sid).leads.first(status="new")
    error = fails(rt, sid, "create_lead", "LEAD_EXISTS", "CONFLICT", first_name="A", last_name="B", company="C Co",
                  email=lead["email"], source="web")
    assert error["details"]["lead_id"] == lead["id"]


def test_qualify_needs_a_reason_to_disqualify(rt, sid):
    lead = rt.state(sid).leads.first(status="working")
    fails(rt, sid, "qualify_lead", "REASON_REQUIRED", "INVALID_ARGUMENT", lead_id=lead["id"], decision="disqualified")
    ok(rt, sid, "qualify_lead", lead_id=lead["id"], decision="disqualified", reason="Too small")
    requalified = ok(rt, sid, "qualify_lead", lead_id=lead["id"], decision="qualified")
    assert (requalified["status"], requalified["disqualify_reason"]) == ("qualified", None)


def test_deal_creation_rules(rt, sid):
    state = rt.state(sid)
    account, other = state.accounts.all()[:2]
    stranger = state.contacts.first(account_id=other["id"])
    base = {"account_id": account["id"], "name": "New deal"}
    fails(rt, sid, "create_deal", "CONTACT_NOT_ON_ACCOUNT", "INVALID_ARGUMENT", **base, close_date="2026-06-01",
          contact_id=stranger["id"])
    fails(rt, sid, "create_deal", "CLOSE_DATE_IN_PAST", "INVALID_ARGUMENT", **base, close_date="2026-03-01")
    fails(rt, sid, "create_deal", "BAD_DATE", "INVALID_ARGUMENT", **base, close_date="2026-02-30")
    deal = ok(rt, sid, "create_deal", **base, close_date="2026-03-02")
    assert (deal["stage"], deal["owner_id"], deal["probability"]) == ("prospecting", account["owner_id"], 10)


def test_activity_rules(rt, sid):
    state = rt.state(sid)
    deal = open_deal(rt, sid)
    stranger = state.contacts.first(lambda c: c["account_id"] != deal["account_id"])
    other_account = state.accounts.first(lambda a: a["id"] != deal["account_id"])
    lead = state.leads.first(status="new")
    task = {"kind": "task", "subject": "Follow up"}
    fails(rt, sid, "log_activity", "RELATED_RECORD_REQUIRED", "INVALID_ARGUMENT", **task, due_date="2026-03-09")
    fails(rt, sid, "log_activity", "DUE_DATE_REQUIRED", "INVALID_ARGUMENT", **task, deal_id=deal["id"])
    fails(rt, sid, "log_activity", "DUE_DATE_IN_PAST", "INVALID_ARGUMENT", **task, deal_id=deal["id"],
          due_date="2026-02-27")
    fails(rt, sid, "log_activity", "CONTACT_NOT_ON_ACCOUNT", "INVALID_ARGUMENT", **task, deal_id=deal["id"],
          contact_id=stranger["id"], due_date="2026-03-09")
    fails(rt, sid, "log_activity", "DEAL_NOT_ON_ACCOUNT", "INVALID_ARGUMENT", **task, deal_id=deal["id"],
          account_id=other_account["id"], due_date="2026-03-09")
    fails(rt, sid, "log_activity", "ONE_RECORD_ONLY", "INVALID_ARGUMENT", **task, deal_id=deal["id"],
          lead_id=lead["id"], due_date="2026-03-09")
    fails(rt, sid, "log_activity", "OWNER_INACTIVE", **task, deal_id=deal["id"], due_date="2026-03-09",
          owner_id=inactive_rep(rt, sid))
    past_call = ok(rt, sid, "log_activity", kind="call", subject="Recap", completed=True, due_date="2026-02-27",
                   contact_id=stranger["id"], outcome="Good")
    assert (past_call["status"], past_call["account_id"], past_call["overdue"]) == (
        "completed", stranger["account_id"], False)


def test_activity_already_completed(rt, sid):
    done = rt.state(sid).activities.first(status="completed")
    error = fails(rt, sid, "complete_activity", "ACTIVITY_ALREADY_COMPLETED", "CONFLICT", activity_id=done["id"])
    assert error["details"]["completed_on"] == done["completed_on"]


def test_notes_and_assignments_name_exactly_one_record(rt, sid):
    state = rt.state(sid)
    account, lead = state.accounts.first(), state.leads.first()
    fails(rt, sid, "add_note", "RELATED_RECORD_REQUIRED", "INVALID_ARGUMENT", body="Hi")
    fails(rt, sid, "add_note", "ONE_RECORD_ONLY", "INVALID_ARGUMENT", body="Hi", account_id=account["id"],
          lead_id=lead["id"])
    fails(rt, sid, "assign_owner", "RELATED_RECORD_REQUIRED", "INVALID_ARGUMENT", owner_id=me(rt, sid))
    fails(rt, sid, "add_note", "CONTACT_NOT_FOUND", "NOT_FOUND", body="Hi", contact_id="con_missing")


def test_search_filter_combinations(rt, sid):
    fails(rt, sid, "search_crm", "FILTER_NOT_APPLICABLE", "INVALID_ARGUMENT", record_type="account",
          stage="proposal")
    fails(rt, sid, "search_crm", "FILTER_NOT_APPLICABLE", "INVALID_ARGUMENT", stage="proposal", lead_status="new")


def test_unknown_ids_are_typed_not_found(rt, sid):
    fails(rt, sid, "get_account", "ACCOUNT_NOT_FOUND", "NOT_FOUND", account_id="acc_missing")
    fails(rt, sid, "get_deal", "DEAL_NOT_FOUND", "NOT_FOUND", deal_id="dea_missing")
    fails(rt, sid, "qualify_lead", "LEAD_NOT_FOUND", "NOT_FOUND", lead_id="led_missing", decision="qualified")
    fails(rt, sid, "complete_activity", "ACTIVITY_NOT_FOUND", "NOT_FOUND", activity_id="act_missing")


def test_schema_rejects_bad_arguments(rt, sid):
    account = rt.state(sid).accounts.first()["id"]
    bad = rt.call(sid, "create_contact", {"account_id": account, "first_name": "A", "last_name": "B",
                                          "email": "not-an-email"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"
    assert rt.call(sid, "search_crm", {"stage": "won"}).error["reason"] == "SCHEMA_VIOLATION"
