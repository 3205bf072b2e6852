"""The crm server's own rules: the lead pipeline, deal stages, ownership, activities and typed
failures, each checked in the state that causes it. What every server guarantees is the
conformance kit's (tests/servers/test_conformance.py).
"""

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_servers import crm
from prove_servers.crm import CrmOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def qualified_leads(h) -> list[dict]:
    """The seeded qualified leads: plain, company already an account, e-mail already a contact,
    owned by the rep who left."""
    return h.state.leads.where(status="qualified")


def open_deal(h, **where) -> dict:
    return h.state.deals.first(lambda d: d["stage"] not in crm.CLOSED_STAGES, **where)


def me(h) -> str:
    return h.state.get_var("me")


def inactive_rep(h) -> str:
    return h.state.reps.first(active=False)["id"]


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert len(TOOLS) == 16 and servers_registered_by(crm) == [server]
    assert (server.name, server.domain) == ("crm", "knowledge")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_sales_reps", "search_crm", "get_account", "get_deal", "list_activities"}
    assert not any(t.spec.annotations.destructive for t in TOOLS.values())  # nothing deletes; closing is a stage
    idempotent = {n for n, t in TOOLS.items() if t.spec.annotations.idempotent and not t.spec.annotations.read_only}
    assert idempotent == set(TOOLS) - read_only - {"create_deal", "log_activity", "add_note"}  # these add a record
    assert TOOLS["convert_lead"].spec.produces == ("account", "contact", "deal")
    assert TOOLS["assign_owner"].spec.entity_params() == {
        "owner_id": "sales_rep", "account_id": "account", "lead_id": "lead", "deal_id": "deal"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_ids_are_seeded_too(h):
    other = ServerHarness(server, seed=1)
    assert {a["id"] for a in h.state.accounts}.isdisjoint(a["id"] for a in other.state.accounts)


def test_a_ten_times_larger_seed_works_and_options_are_validated():
    big = ServerHarness(server, options=CrmOptions(accounts=120))
    assert len(big.state.accounts) == 120 and len(big.state.leads) == 120
    big.run_examples()
    with pytest.raises(ValueError):
        CrmOptions(accounts=0)



def test_seed_has_the_variety_tasks_need(h):
    state = h.state
    assert len(state.accounts) == 12 and len(state.reps) == 6 and len(state.reps.where(active=False)) == 1
    assert {d["stage"] for d in state.deals} == set(crm.STAGES)
    assert state.deals.where(lambda d: d["amount"] is None and d["stage"] not in crm.CLOSED_STAGES)
    assert {ld["status"] for ld in state.leads} == {"new", "working", "qualified", "disqualified", "converted"}
    assert len(qualified_leads(h)) == 4
    emails = [c["email"] for c in state.contacts]
    assert len(emails) == len(set(emails)) and all(e == e.lower() for e in emails)
    assert h.ok("list_activities", overdue_only=True)["total"] > 0
    account_names = {a["name"] for a in state.accounts}
    assert len(account_names) == len(state.accounts)
    assert all(a["type"] == "customer" for a in state.accounts
               if state.deals.first(account_id=a["id"], stage="closed_won"))


# -- flows ----------------------------------------------------------------------------------------


def test_lead_to_won_deal_passing_ids(h):
    lead = h.ok("create_lead", first_name="Ines", last_name="Okafor", company="Marlow Freight",
                email="Ines.Okafor@MarlowFreight.example.com", source="referral")
    assert (lead["status"], lead["owner_id"], lead["email"]) == ("new", me(h),
                                                                "ines.okafor@marlowfreight.example.com")
    found = h.ok("search_crm", query="marlow", record_type="lead")["results"]
    assert [r["id"] for r in found] == [lead["id"]]
    h.fails("convert_lead", "LEAD_NOT_QUALIFIED", "FAILED_PRECONDITION", lead_id=lead["id"])
    h.ok("qualify_lead", lead_id=lead["id"], decision="qualified")
    converted = h.ok("convert_lead", lead_id=lead["id"], close_date="2026-04-30")
    account = h.ok("get_account", account_id=converted["account_id"])
    assert account["name"] == "Marlow Freight" and account["type"] == "prospect"
    assert [c["id"] for c in account["contacts"]] == [converted["contact_id"]]

    deal_id = converted["deal_id"]
    deal = h.ok("get_deal", deal_id=deal_id)
    assert (deal["stage"], deal["amount"], deal["close_date"]) == ("qualification", None, "2026-04-30")
    assert deal["allowed_next_stages"] == ["proposal", "negotiation", "closed_won", "closed_lost"]
    h.fails("update_deal", "AMOUNT_REQUIRED", "INVALID_ARGUMENT", deal_id=deal_id, stage="proposal")
    h.ok("update_deal", deal_id=deal_id, stage="proposal", amount=30000.456)
    task = h.ok("log_activity", kind="task", subject="Send contract", due_date="2026-03-05", deal_id=deal_id)
    assert task["account_id"] == converted["account_id"] and not task["overdue"]
    h.ok("complete_activity", activity_id=task["id"], outcome="Signed copy received")
    h.ok("add_note", body="Legal approved the MSA.", deal_id=deal_id)
    won = h.ok("update_deal", deal_id=deal_id, stage="closed_won")
    assert (won["stage"], won["probability"], won["amount"], won["allowed_next_stages"]) == (
        "closed_won", 100, 30000.46, [])
    assert [step["stage"] for step in won["stage_history"]] == ["qualification", "proposal", "closed_won"]
    assert h.ok("get_account", account_id=converted["account_id"])["type"] == "customer"
    final = h.ok("get_deal", deal_id=deal_id)
    assert [a["status"] for a in final["activities"]] == ["completed"]
    assert final["notes"][0]["body"] == "Legal approved the MSA." and final["notes"][0]["author_id"] == me(h)
    h.fails("update_deal", "DEAL_CLOSED", "FAILED_PRECONDITION", deal_id=deal_id, stage="closed_lost", lost_reason="x")
    h.fails("convert_lead", "LEAD_ALREADY_CONVERTED", "FAILED_PRECONDITION", lead_id=lead["id"])


def test_converting_into_an_existing_account(h):
    lead = qualified_leads(h)[1]  # works at a company that already is an account
    account = h.state.accounts.first(name=lead["company"])
    error = h.fails("convert_lead", "ACCOUNT_NAME_TAKEN", "CONFLICT", lead_id=lead["id"])
    assert error["details"]["account_id"] == account["id"]
    contacts_before = len(h.state.contacts.where(account_id=account["id"]))
    converted = h.ok("convert_lead", lead_id=lead["id"], account_id=account["id"], create_deal=False)
    assert converted["account_id"] == account["id"] and converted["deal_id"] is None
    assert len(h.state.contacts.where(account_id=account["id"])) == contacts_before + 1


def test_reassigning_an_account_moves_its_contacts_and_optionally_its_deals(h):
    state = h.state
    account = state.accounts.first(lambda a: bool(
        state.deals.first(lambda d: d["stage"] not in crm.CLOSED_STAGES, account_id=a["id"])
        and state.deals.first(lambda d: d["stage"] in crm.CLOSED_STAGES, account_id=a["id"])))
    new_owner = state.reps.first(lambda r: r["active"] and r["id"] != account["owner_id"])["id"]
    alone = h.ok("assign_owner", owner_id=new_owner, account_id=account["id"])
    assert alone["contact_ids"] and alone["deal_ids"] == []  # deals stay unless asked
    assert {d["owner_id"] for d in h.state.deals.where(account_id=account["id"])} == {account["owner_id"]}
    result = h.ok("assign_owner", owner_id=new_owner, account_id=account["id"], include_open_deals=True)
    assert result["previous_owner_id"] == new_owner and result["contact_ids"] == [] and result["deal_ids"]
    after = h.state
    assert {c["owner_id"] for c in after.contacts.where(account_id=account["id"])} == {new_owner}
    deals = after.deals.where(account_id=account["id"])
    assert {d["owner_id"] for d in deals if d["stage"] not in crm.CLOSED_STAGES} == {new_owner}
    assert {d["owner_id"] for d in deals if d["stage"] in crm.CLOSED_STAGES} == {account["owner_id"]}  # history stays
    mine = h.ok("search_crm", owner_id=new_owner, record_type="contact")["results"]
    assert {c["account_id"] for c in mine} >= {account["id"]}


def test_search_filters_and_pages(h):
    everything = h.ok("search_crm", limit=50)
    state = h.state
    assert everything["counts"] == {"account": len(state.accounts), "contact": len(state.contacts),
                                    "lead": len(state.leads), "deal": len(state.deals)}
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("search_crm", limit=7, offset=offset)
        seen += [r["id"] for r in page["results"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == everything["total"]
    negotiating = h.ok("search_crm", stage="negotiation")["results"]
    assert negotiating and {r["stage"] for r in negotiating} == {"negotiation"}
    contact = state.contacts.first()
    hit = h.ok("search_crm", query=f"{contact['last_name'].upper()} {contact['email'].split('@')[1]}")
    assert contact["id"] in [r["id"] for r in hit["results"]]
    assert h.ok("search_crm", query="zzzz-nothing")["total"] == 0


def test_list_activities_orders_and_flags_overdue(h):
    listed = h.ok("list_activities", status="open", limit=50)["activities"]
    dues = [a["due_date"] for a in listed]
    assert dues == sorted(dues)
    assert all(a["overdue"] == (a["due_date"] < "2026-03-02") for a in listed)
    overdue = h.ok("list_activities", overdue_only=True, limit=50)["activities"]
    assert overdue == [a for a in listed if a["overdue"]]


def test_list_sales_reps(h):
    reps = h.ok("list_sales_reps")["sales_reps"]
    assert len(reps) == 5 and [r["id"] for r in reps if r["is_you"]] == [me(h)]
    assert sum(r["open_deal_count"] for r in reps) == len(
        h.state.deals.where(lambda d: d["stage"] not in crm.CLOSED_STAGES))
    assert len(h.ok("list_sales_reps", include_inactive=True)["sales_reps"]) == 6


# -- typed failures -------------------------------------------------------------------------------


def test_invalid_stage_transitions(h):
    deal = open_deal(h, stage="negotiation")
    error = h.fails("update_deal", "INVALID_STAGE_TRANSITION", "FAILED_PRECONDITION", deal_id=deal["id"],
                    stage="proposal")
    assert error["details"]["allowed"] == ["closed_won", "closed_lost"]
    h.fails("update_deal", "LOST_REASON_REQUIRED", "INVALID_ARGUMENT", deal_id=deal["id"], stage="closed_lost")
    h.ok("update_deal", deal_id=open_deal(h, stage="qualification")["id"], stage="closed_lost",
         lost_reason="No budget")  # any open stage may drop to lost
    h.ok("update_deal", deal_id=deal["id"], stage="negotiation")  # staying put is no move at all
    h.fails("update_deal", "NOTHING_TO_UPDATE", "INVALID_ARGUMENT", deal_id=deal["id"])


def test_amount_required_from_proposal_on(h):
    deal = open_deal(h, stage="prospecting", amount=None)
    for stage in ("proposal", "negotiation", "closed_won"):
        h.fails("update_deal", "AMOUNT_REQUIRED", "INVALID_ARGUMENT", deal_id=deal["id"], stage=stage)
    moved = h.ok("update_deal", deal_id=deal["id"], stage="qualification")  # early stages need none
    assert moved["amount"] is None


def test_closed_deals_are_final(h):
    for stage in ("closed_won", "closed_lost"):
        deal = h.state.deals.first(stage=stage)
        h.fails("update_deal", "DEAL_CLOSED", "FAILED_PRECONDITION", deal_id=deal["id"], amount=1000)
        h.fails("assign_owner", "DEAL_CLOSED", "FAILED_PRECONDITION", owner_id=me(h), deal_id=deal["id"])


def test_lead_already_converted(h):
    lead = h.state.leads.first(status="converted")
    error = h.fails("convert_lead", "LEAD_ALREADY_CONVERTED", "FAILED_PRECONDITION", lead_id=lead["id"])
    assert error["details"]["contact_id"] == lead["converted"]["contact_id"]
    h.fails("qualify_lead", "LEAD_ALREADY_CONVERTED", "FAILED_PRECONDITION", lead_id=lead["id"],
            decision="disqualified", reason="dupe")
    h.fails("log_activity", "LEAD_ALREADY_CONVERTED", "FAILED_PRECONDITION", kind="call", subject="Ping",
            completed=True, lead_id=lead["id"])
    h.fails("assign_owner", "LEAD_ALREADY_CONVERTED", "FAILED_PRECONDITION", owner_id=me(h), lead_id=lead["id"])


def test_duplicate_contact_email(h):
    contact = h.state.contacts.first()
    error = h.fails("create_contact", "DUPLICATE_CONTACT_EMAIL", "CONFLICT",
                    account_id=h.state.accounts.all()[-1]["id"], first_name="Dup", last_name="Licate",
                    email=contact["email"].upper())
    assert error["details"]["contact_id"] == contact["id"]
    lead = qualified_leads(h)[2]  # already a contact under this e-mail
    account = h.state.accounts.first(name=lead["company"])
    h.fails("convert_lead", "DUPLICATE_CONTACT_EMAIL", "CONFLICT", lead_id=lead["id"],
            account_id=account["id"])


def test_owner_not_found_and_inactive(h):
    h.fails("create_account", "OWNER_NOT_FOUND", "NOT_FOUND", name="Acme Widgets", industry="manufacturing",
            owner_id="rep_nobody")
    h.fails("create_account", "OWNER_INACTIVE", "FAILED_PRECONDITION", name="Acme Widgets", industry="manufacturing",
            owner_id=inactive_rep(h))
    h.fails("search_crm", "OWNER_NOT_FOUND", "NOT_FOUND", owner_id="rep_nobody")
    h.fails("list_activities", "OWNER_NOT_FOUND", "NOT_FOUND", owner_id="rep_nobody")
    deal = open_deal(h)
    h.fails("assign_owner", "OWNER_INACTIVE", "FAILED_PRECONDITION", owner_id=inactive_rep(h), deal_id=deal["id"])
    orphan = qualified_leads(h)[3]  # its owner left
    assert orphan["owner_id"] == inactive_rep(h)
    h.fails("convert_lead", "OWNER_INACTIVE", "FAILED_PRECONDITION", lead_id=orphan["id"])
    h.ok("assign_owner", owner_id=me(h), lead_id=orphan["id"])
    assert h.ok("convert_lead", lead_id=orphan["id"])["deal_id"]


def test_account_and_lead_duplicates(h):
    existing = h.state.accounts.first()
    h.fails("create_account", "ACCOUNT_NAME_TAKEN", "CONFLICT", name=f" {existing['name'].lower()} ",
            industry="other")
    lead = h.state.leads.first(status="new")
    error = h.fails("create_lead", "LEAD_EXISTS", "CONFLICT", first_name="A", last_name="B", company="C Co",
                    email=lead["email"], source="web")
    assert error["details"]["lead_id"] == lead["id"]


def test_qualify_needs_a_reason_to_disqualify(h):
    lead = h.state.leads.first(status="working")
    h.fails("qualify_lead", "REASON_REQUIRED", "INVALID_ARGUMENT", lead_id=lead["id"], decision="disqualified")
    h.ok("qualify_lead", lead_id=lead["id"], decision="disqualified", reason="Too small")
    requalified = h.ok("qualify_lead", lead_id=lead["id"], decision="qualified")
    assert (requalified["status"], requalified["disqualify_reason"]) == ("qualified", None)


def test_deal_creation_rules(h):
    state = h.state
    account, other = state.accounts.all()[:2]
    stranger = state.contacts.first(account_id=other["id"])
    base = {"account_id": account["id"], "name": "New deal"}
    h.fails("create_deal", "CONTACT_NOT_ON_ACCOUNT", "INVALID_ARGUMENT", **base, close_date="2026-06-01",
            contact_id=stranger["id"])
    h.fails("create_deal", "CLOSE_DATE_IN_PAST", "INVALID_ARGUMENT", **base, close_date="2026-03-01")
    h.fails("create_deal", "BAD_DATE", "INVALID_ARGUMENT", **base, close_date="2026-02-30")
    deal = h.ok("create_deal", **base, close_date="2026-03-02")
    assert (deal["stage"], deal["owner_id"], deal["probability"]) == ("prospecting", account["owner_id"], 10)


def test_activity_rules(h):
    state = h.state
    deal = open_deal(h)
    stranger = state.contacts.first(lambda c: c["account_id"] != deal["account_id"])
    other_account = state.accounts.first(lambda a: a["id"] != deal["account_id"])
    lead = state.leads.first(status="new")
    task = {"kind": "task", "subject": "Follow up"}
    h.fails("log_activity", "RELATED_RECORD_REQUIRED", "INVALID_ARGUMENT", **task, due_date="2026-03-09")
    h.fails("log_activity", "DUE_DATE_REQUIRED", "INVALID_ARGUMENT", **task, deal_id=deal["id"])
    h.fails("log_activity", "DUE_DATE_IN_PAST", "INVALID_ARGUMENT", **task, deal_id=deal["id"],
            due_date="2026-02-27")
    h.fails("log_activity", "CONTACT_NOT_ON_ACCOUNT", "INVALID_ARGUMENT", **task, deal_id=deal["id"],
            contact_id=stranger["id"], due_date="2026-03-09")
    h.fails("log_activity", "DEAL_NOT_ON_ACCOUNT", "INVALID_ARGUMENT", **task, deal_id=deal["id"],
            account_id=other_account["id"], due_date="2026-03-09")
    h.fails("log_activity", "ONE_RECORD_ONLY", "INVALID_ARGUMENT", **task, deal_id=deal["id"],
            lead_id=lead["id"], due_date="2026-03-09")
    h.fails("log_activity", "OWNER_INACTIVE", "FAILED_PRECONDITION", **task, deal_id=deal["id"], due_date="2026-03-09",
            owner_id=inactive_rep(h))
    past_call = h.ok("log_activity", kind="call", subject="Recap", completed=True, due_date="2026-02-27",
                     contact_id=stranger["id"], outcome="Good")
    assert (past_call["status"], past_call["account_id"], past_call["overdue"]) == (
        "completed", stranger["account_id"], False)


def test_activity_already_completed(h):
    done = h.state.activities.first(status="completed")
    error = h.fails("complete_activity", "ACTIVITY_ALREADY_COMPLETED", "CONFLICT", activity_id=done["id"])
    assert error["details"]["completed_on"] == done["completed_on"]


def test_notes_and_assignments_name_exactly_one_record(h):
    state = h.state
    account, lead = state.accounts.first(), state.leads.first()
    h.fails("add_note", "RELATED_RECORD_REQUIRED", "INVALID_ARGUMENT", body="Hi")
    h.fails("add_note", "ONE_RECORD_ONLY", "INVALID_ARGUMENT", body="Hi", account_id=account["id"],
            lead_id=lead["id"])
    h.fails("assign_owner", "RELATED_RECORD_REQUIRED", "INVALID_ARGUMENT", owner_id=me(h))
    h.fails("add_note", "CONTACT_NOT_FOUND", "NOT_FOUND", body="Hi", contact_id="con_missing")


def test_search_filter_combinations(h):
    h.fails("search_crm", "FILTER_NOT_APPLICABLE", "INVALID_ARGUMENT", record_type="account",
            stage="proposal")
    h.fails("search_crm", "FILTER_NOT_APPLICABLE", "INVALID_ARGUMENT", stage="proposal", lead_status="new")


def test_unknown_ids_are_typed_not_found(h):
    h.fails("get_account", "ACCOUNT_NOT_FOUND", "NOT_FOUND", account_id="acc_missing")
    h.fails("get_deal", "DEAL_NOT_FOUND", "NOT_FOUND", deal_id="dea_missing")
    h.fails("qualify_lead", "LEAD_NOT_FOUND", "NOT_FOUND", lead_id="led_missing", decision="qualified")
    h.fails("complete_activity", "ACTIVITY_NOT_FOUND", "NOT_FOUND", activity_id="act_missing")


def test_schema_rejects_bad_arguments(h):
    account = h.state.accounts.first()["id"]
    bad = h.call("create_contact", {"account_id": account, "first_name": "A", "last_name": "B",
                                          "email": "not-an-email"})
    assert bad.error["reason"] == "SCHEMA_VIOLATION"
    assert h.call("search_crm", {"stage": "won"}).error["reason"] == "SCHEMA_VIOLATION"
