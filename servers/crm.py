"""crm — a sales CRM: accounts (companies), their contacts, leads, deals in a pipeline,
activities (calls, meetings, tasks), notes and the sales reps who own it all.

The signed-in user is one of the sales reps (the var ``me``): records they create are theirs
unless another owner is named, and the notes they write carry their name. Leads are people not
yet tied to an account; a qualified lead converts once into an account, a contact and
(optionally) a deal. Deals move forward through the pipeline — prospecting, qualification,
proposal, negotiation, closed_won — or drop to closed_lost from any open stage; from proposal on
a deal needs an amount, and a closed deal is final. Contact e-mail addresses are unique.
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
    lookup,
    money,
    paginate,
    parse_date,
    ref,
    require,
)

# -- vocabulary -----------------------------------------------------------------------------------

Stage = Literal["prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost"]
STAGES: tuple[str, ...] = ("prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost")
OPEN_STAGES = STAGES[:4]
CLOSED_STAGES = frozenset({"closed_won", "closed_lost"})
AMOUNT_STAGES = frozenset({"proposal", "negotiation", "closed_won"})  # a deal there must have an amount
PROBABILITY = {"prospecting": 10, "qualification": 25, "proposal": 50, "negotiation": 75, "closed_won": 100,
               "closed_lost": 0}
LeadStatus = Literal["new", "working", "qualified", "disqualified", "converted"]
LeadSource = Literal["web", "referral", "event", "cold_call", "partner"]
ActivityKind = Literal["call", "meeting", "task"]
RecordType = Literal["account", "contact", "lead", "deal"]
CURRENCY = "USD"
DEFAULT_DEAL_DAYS = 60  # a converted lead's deal is expected to close this many days out

COMPANY_STEMS = ("Northwind", "Bluefin", "Cedar Ridge", "Summit", "Ironclad", "Brightpath", "Keystone", "Silverline",
                 "Redwood", "Lumen", "Harborview", "Atlas", "Pioneer", "Evergreen", "Quantum", "Granite", "Copperleaf",
                 "Tidewater", "Skyline", "Oakmont")
COMPANY_KINDS = (  # suffix → industry
    ("Logistics", "transportation"), ("Analytics", "software"), ("Health", "healthcare"), ("Foods", "food_beverage"),
    ("Robotics", "manufacturing"), ("Energy", "energy"), ("Capital", "financial_services"), ("Media", "media"),
    ("Labs", "biotech"), ("Systems", "software"), ("Retail", "retail"), ("Outfitters", "retail"),
)
Industry = Literal["transportation", "software", "healthcare", "food_beverage", "manufacturing", "energy",
                   "financial_services", "media", "biotech", "retail", "education", "other"]
JOB_TITLES = ("VP of Operations", "Head of IT", "Procurement Manager", "CFO", "Director of Engineering",
              "Operations Manager", "CTO", "Purchasing Lead", "COO", "Product Manager")
DEAL_KINDS = ("Platform License", "Annual Renewal", "Pilot Program", "Enterprise Expansion", "Support Upgrade",
              "Data Migration", "Team Seats")
LOST_REASONS = ("Chose a competitor", "No budget this year", "Project cancelled", "Went silent")
TASK_SUBJECTS = ("Send pricing proposal", "Follow up on demo", "Prepare contract draft", "Confirm budget owner",
                 "Share case study", "Schedule technical review")
CALL_SUBJECTS = ("Discovery call", "Check-in call", "Pricing discussion", "Renewal call")
MEETING_SUBJECTS = ("Product demo", "Quarterly business review", "Onsite workshop", "Executive briefing")
NOTE_BODIES = ("Budget approved for Q2; decision by end of month.", "Prefers e-mail over phone calls.",
               "Evaluating two competitors; price is the main concern.", "Champion is the VP of Operations.",
               "Needs SSO and audit logs before signing.", "Asked for a 3-year term discount.")
REP_TEAMS = ("Enterprise", "Mid-Market", "SMB")
# What reps type when they add records and log their work (synthesis draws from these). New company
# names stay clear of the seeded stem + kind names, so a new account never collides with one.
NEW_COMPANIES = ("Juniper Partners", "Maplewood Group", "Foxglove & Co", "Stonebridge Holdings", "Clearwater Ventures",
                 "Ridgeline Industries", "Hollow Oak Enterprises", "Blue Heron Group", "Kestrel Partners",
                 "Sunpeak Holdings", "Trailhead Co", "Westbrook Industries")
LEAD_COMPANIES = ("Willowbrook Dental", "Brightwater Brewing", "Foxglove Studios", "Clearwater Academy",
                  "Ridgeline Solar", "Blue Heron Hotels", "Kestrel Aerospace", "Sunpeak Organics", "Trailhead Outdoor",
                  "Maplewood Clinics", "Stonebridge Insurance", "Hollow Oak Furniture")
INDUSTRIES = ("transportation", "software", "healthcare", "food_beverage", "manufacturing", "energy",
              "financial_services", "media", "biotech", "retail", "education", "other")
LEAD_SOURCES = ("web", "referral", "event", "cold_call", "partner")
DEAL_NAMES = ("Expansion - 50 seats", "Renewal 2026", "Pilot - Q2", "Platform License", "Support Upgrade",
              "Data Migration", "Team Seats - 25", "Enterprise Expansion", "Analytics Add-on", "Multi-year Renewal")
DEAL_AMOUNTS = (6_000.0, 8_500.0, 12_000.0, 18_500.0, 24_000.0, 30_000.0, 42_000.0, 60_000.0, 95_000.0)
DISQUALIFY_REASONS = ("Too small for our product", "No budget this year", "Already signed with a competitor",
                      "Student project, not a buyer", "Outside our sales region", "No buying authority",
                      "Just researching, no timeline", "Duplicate of an existing customer")
OUTCOMES = ("Left voicemail", "Sent; they will review Friday.", "Connected; next steps agreed.",
            "They want a revised quote.", "No answer, will try again Monday.", "Demo went well; trial requested.",
            "Pushed to next quarter.", "Signed off on the proposal.")
NOTE_TEXTS = (*NOTE_BODIES, "Procurement wants net-60 terms.", "Met at the trade show.",
              "Wants a demo for the finance team.", "Renewal decision moves to the new CFO.")

# Per account, the deals it starts with (stage, whether an amount is set): cycled so every seed
# size has a deal at every stage, closed ones of both kinds and an open deal without an amount.
DEAL_PLANS: tuple[tuple[tuple[str, bool], ...], ...] = (
    (("prospecting", False), ("closed_won", True)),
    (("proposal", True),),
    (("negotiation", True), ("closed_lost", True)),
    (("qualification", False),),
    (("qualification", True), ("closed_won", True)),
    (),
)
# Lead statuses cycled over the seeded leads.
LEAD_PLAN = ("new", "qualified", "working", "disqualified", "qualified", "converted", "new", "qualified", "working")

OwnerId = Annotated[str, ref("sales_rep", "Id of an active sales rep (rep_...), from list_sales_reps.")]
AccountId = Annotated[str, ref("account", "Id of the account (acc_...), from search_crm or get_account.")]
DealId = Annotated[str, ref("deal", "Id of the deal (dea_...), from search_crm or get_account.")]
LeadId = Annotated[str, ref("lead", "Id of the lead (led_...), from search_crm.")]


# -- state and seed -------------------------------------------------------------------------------


class CrmState(State):
    reps = Table("sales_rep", prefix="rep")
    accounts = Table("account", prefix="acc", index=("owner_id",))
    contacts = Table("contact", prefix="con", index=("account_id", "email", "owner_id"))
    leads = Table("lead", prefix="led", index=("status", "owner_id", "email"))
    deals = Table("deal", prefix="dea", index=("account_id", "owner_id", "stage"))
    activities = Table("activity", prefix="act", index=("owner_id", "deal_id", "account_id", "lead_id", "status"))
    notes = Table("note", prefix="nte", index=("account_id", "deal_id", "lead_id", "contact_id"))


@attrs.frozen(kw_only=True)
class CrmOptions:
    """Seed size: how many accounts (each with 1-3 contacts, up to 2 deals, activities and notes;
    as many leads as accounts)."""

    accounts: int = attrs.field(default=12, validator=attrs.validators.gt(0))


def build_crm(rng: random.Random, options: CrmOptions) -> CrmState:
    """Six sales reps (one has left), accounts with contacts, deals at every stage, activities
    (some overdue), notes and leads in every status."""
    state = CrmState(salt=str(rng.random()))
    reps = _seed_reps(state, rng)
    active = [r for r in reps if r["active"]]
    state.set_var("me", active[0]["id"])
    taken_names: set[str] = set()
    emails: set[str] = set()
    for index in range(options.accounts):
        _seed_account(state, rng, index, active, taken_names, emails)
    _seed_leads(state, rng, options.accounts, reps, taken_names, emails)
    return state


def _seed_reps(state: CrmState, rng: random.Random) -> list[Record]:
    reps, emails = [], set()
    for n in range(6):
        name = fake.full_name(rng)
        reps.append(state.reps.insert({
            "name": name, "email": fake.email_for(name, rng, emails), "team": REP_TEAMS[n % len(REP_TEAMS)],
            "title": "Sales Manager" if n == 0 else "Account Executive", "active": n != 5,
            "quarterly_quota": float(rng.choice((150_000, 250_000, 400_000))),
        }))
    return reps


def _company_name(rng: random.Random, taken: set[str]) -> tuple[str, str]:
    for attempt in range(200):
        stem, (kind, industry) = rng.choice(COMPANY_STEMS), rng.choice(COMPANY_KINDS)
        name = f"{stem} {kind}" + ("" if attempt < 100 else f" {attempt}")
        if name not in taken:
            taken.add(name)
            return name, industry
    raise RuntimeError("ran out of company names")


def _slug(company: str) -> str:
    return "".join(c for c in company.lower() if c.isalnum())


def _work_email(first: str, last: str, company: str, emails: set[str]) -> str:
    base = f"{first}.{last}".lower()
    for n in range(100):
        email = f"{base}{n or ''}@{_slug(company)}.example.com"
        if email not in emails:
            emails.add(email)
            return email
    raise RuntimeError("could not make a unique e-mail address")


def _seed_account(state: CrmState, rng: random.Random, index: int, reps: list[Record], taken: set[str],
                  emails: set[str]) -> None:
    today = state.today()
    name, industry = _company_name(rng, taken)
    owner = reps[index % len(reps)]
    plan = DEAL_PLANS[index % len(DEAL_PLANS)]
    account = state.accounts.insert({
        "name": name, "industry": industry, "website": f"https://www.{_slug(name)}.example.com",
        "type": "customer" if any(stage == "closed_won" for stage, _ in plan) else "prospect",
        "employees": rng.choice((25, 80, 250, 1200, 5000)), "address": fake.address(rng), "owner_id": owner["id"],
        "created_on": (today - dt.timedelta(days=rng.randint(60, 700))).isoformat(),
    })
    contacts = []
    for _ in range(rng.randint(1, 3)):
        first, last = fake.person(rng)
        contacts.append(state.contacts.insert({
            "account_id": account["id"], "first_name": first, "last_name": last,
            "email": _work_email(first, last, name, emails), "phone": fake.phone(rng), "title": rng.choice(JOB_TITLES),
            "owner_id": owner["id"], "created_on": account["created_on"],
        }))
    for stage, with_amount in plan:
        deal = _seed_deal(state, rng, account, rng.choice(contacts), owner, stage, with_amount)
        _seed_deal_activity(state, rng, deal)
    state.notes.insert({"body": rng.choice(NOTE_BODIES), "author_id": owner["id"], "account_id": account["id"],
                        "contact_id": None, "deal_id": None, "lead_id": None,
                        "created_at": iso_datetime(state.now() - dt.timedelta(days=rng.randint(1, 40)))})


def _seed_deal(state: CrmState, rng: random.Random, account: Record, contact: Record, owner: Record, stage: str,
               with_amount: bool) -> Record:
    today = state.today()
    created = today - dt.timedelta(days=rng.randint(45, 200))
    path = [s for s in OPEN_STAGES if STAGES.index(s) <= STAGES.index(stage)] if stage in OPEN_STAGES else [
        *OPEN_STAGES[: rng.randint(1, 4)], stage]
    history, day = [], created
    for step in path:
        history.append({"stage": step, "changed_on": day.isoformat(), "by": owner["id"]})
        day = min(today - dt.timedelta(days=1), day + dt.timedelta(days=rng.randint(5, 20)))
    closed_on = history[-1]["changed_on"] if stage in CLOSED_STAGES else None
    close_date = closed_on or (today + dt.timedelta(days=rng.randint(10, 120))).isoformat()
    return state.deals.insert({
        "name": f"{account['name']} - {rng.choice(DEAL_KINDS)}", "account_id": account["id"],
        "contact_id": contact["id"], "owner_id": owner["id"], "stage": stage, "probability": PROBABILITY[stage],
        "amount": float(rng.randint(8, 240) * 500) if with_amount else None, "currency": CURRENCY,
        "close_date": close_date, "closed_on": closed_on,
        "lost_reason": rng.choice(LOST_REASONS) if stage == "closed_lost" else None,
        "stage_history": history, "created_on": created.isoformat(),
    })


def _seed_deal_activity(state: CrmState, rng: random.Random, deal: Record) -> None:
    """A completed call on every deal; an open task on open deals, due soon or already overdue."""
    today = state.today()
    base = {"account_id": deal["account_id"], "contact_id": deal["contact_id"], "deal_id": deal["id"],
            "lead_id": None, "owner_id": deal["owner_id"]}
    called = today - dt.timedelta(days=rng.randint(3, 30))
    state.activities.insert({**base, "kind": "call", "subject": rng.choice(CALL_SUBJECTS), "status": "completed",
                             "due_date": called.isoformat(), "completed_on": called.isoformat(),
                             "outcome": "Connected; next steps agreed.", "created_on": called.isoformat()})
    if deal["stage"] in CLOSED_STAGES:
        return
    kind = rng.choice(("task", "task", "meeting"))
    due = today + dt.timedelta(days=rng.randint(-6, 14))
    state.activities.insert({**base, "kind": kind, "status": "open", "due_date": due.isoformat(),
                             "subject": rng.choice(TASK_SUBJECTS if kind == "task" else MEETING_SUBJECTS),
                             "completed_on": None, "outcome": None,
                             "created_on": (called + dt.timedelta(days=1)).isoformat()})


def _seed_leads(state: CrmState, rng: random.Random, count: int, reps: list[Record], taken: set[str],
                emails: set[str]) -> None:
    """Leads in every status. Of the qualified ones, the second works at a company that already
    is an account, the third already has a contact with its e-mail address and the fourth is
    owned by the rep who left, so converting them needs care."""
    today = state.today()
    active = [r for r in reps if r["active"]]
    qualified = 0
    for index in range(count):
        status = LEAD_PLAN[index % len(LEAD_PLAN)]
        first, last = fake.person(rng)
        company, _ = _company_name(rng, taken)
        email = _work_email(first, last, company, emails)
        if status == "qualified":
            qualified += 1
            if qualified == 2:
                company = state.accounts.first()["name"]
            elif qualified == 3:
                contact = state.contacts.first()
                first, last, email, company = (contact["first_name"], contact["last_name"], contact["email"],
                                               state.accounts.get(contact["account_id"])["name"])
        owner = reps[-1] if status == "qualified" and qualified == 4 else active[(index + 1) % len(active)]
        lead = {
            "first_name": first, "last_name": last, "company": company, "email": email, "phone": fake.phone(rng),
            "title": rng.choice(JOB_TITLES), "source": rng.choice(("web", "referral", "event", "cold_call", "partner")),
            "status": status, "owner_id": owner["id"],
            "disqualify_reason": "No budget" if status == "disqualified" else None,
            "created_on": (today - dt.timedelta(days=rng.randint(1, 90))).isoformat(), "converted": None,
        }
        if status == "converted":  # it became one of the seeded accounts
            deal = state.deals.first(lambda d: d["stage"] not in CLOSED_STAGES)
            contact = state.contacts.get(deal["contact_id"])
            lead.update(first_name=contact["first_name"], last_name=contact["last_name"], email=contact["email"],
                        company=state.accounts.get(deal["account_id"])["name"],
                        converted={"account_id": deal["account_id"], "contact_id": contact["id"],
                                   "deal_id": deal["id"], "converted_on": deal["created_on"]})
        state.leads.insert(lead)


# -- shared rules ---------------------------------------------------------------------------------


def _owner(state: CrmState, owner_id: str | None) -> Record:
    """The sales rep to own a record: ``owner_id`` or, when omitted, the signed-in rep."""
    rep = lookup(state.reps, owner_id or state.get_var("me"),
                 message=f"no sales rep {owner_id!r}; list_sales_reps shows who can own records",
                 reason="OWNER_NOT_FOUND", id=owner_id)
    require(rep["active"], f"{rep['name']} no longer works here; pick an active rep", reason="OWNER_INACTIVE",
            owner_id=rep["id"])
    return rep


def _require_open_deal(deal: Record) -> None:
    require(deal["stage"] not in CLOSED_STAGES, f"deal {deal['name']!r} is {deal['stage']}; a closed deal cannot "
            "change (open a new deal instead)", reason="DEAL_CLOSED", stage=deal["stage"])


def _require_unconverted(lead: Record) -> None:
    if lead["status"] == "converted":
        raise FailedPrecondition(
            f"lead {lead['first_name']} {lead['last_name']} was already converted; work with its contact "
            f"{lead['converted']['contact_id']} and account {lead['converted']['account_id']}",
            reason="LEAD_ALREADY_CONVERTED", **lead["converted"])


def _require_new_email(state: CrmState, email: str) -> None:
    existing = state.contacts.first(email=email)
    if existing is not None:
        raise Conflict(f"{email} already belongs to contact {existing['first_name']} {existing['last_name']} "
                       f"({existing['id']})", reason="DUPLICATE_CONTACT_EMAIL", contact_id=existing["id"])


def _require_free_account_name(state: CrmState, name: str) -> None:
    key = name.strip().casefold()
    clash = state.accounts.first(lambda a: a["name"].casefold() == key)
    if clash is not None:
        raise Conflict(f"an account named {clash['name']!r} already exists ({clash['id']}); use it instead",
                       reason="ACCOUNT_NAME_TAKEN", account_id=clash["id"])


def _future_date(state: CrmState, value: str, field: str, reason: str) -> str:
    day = parse_date(value, field)
    require(day >= state.today(), f"{field} {value} is in the past (today is {state.today().isoformat()})",
            reason=reason, error=InvalidArgument, today=state.today().isoformat())
    return day.isoformat()


def _one_record(**ids: str | None) -> tuple[str, str]:
    """The single record a call names, as (record type, id)."""
    given = [(kind.removesuffix("_id"), value) for kind, value in ids.items() if value is not None]
    require(bool(given), f"name the record: one of {', '.join(ids)}", reason="RELATED_RECORD_REQUIRED",
            error=InvalidArgument)
    require(len(given) == 1, f"name exactly one of {', '.join(ids)}", reason="ONE_RECORD_ONLY",
            error=InvalidArgument)
    return given[0]


def _person(record: Record) -> str:
    return f"{record['first_name']} {record['last_name']}"


def _deal_view(state: CrmState, deal: Record) -> Record:
    order = STAGES.index(deal["stage"])
    allowed = [] if deal["stage"] in CLOSED_STAGES else list(STAGES[order + 1:])
    return {**deal, "account_name": state.accounts.get(deal["account_id"])["name"], "allowed_next_stages": allowed}


def _activity_view(state: CrmState, activity: Record) -> Record:
    overdue = activity["status"] == "open" and activity["due_date"] < state.today().isoformat()
    return {**activity, "overdue": overdue}


def _notes_for(state: CrmState, **where: str) -> list[Record]:
    notes = state.notes.where(**where)
    return sorted(notes, key=lambda n: n["created_at"], reverse=True)


# -- examples -------------------------------------------------------------------------------------


def _open_deal(s: CrmState, **where: Any) -> Record:
    return s.deals.first(lambda d: d["stage"] not in CLOSED_STAGES, **where)


def _convert_example(s: CrmState) -> Record:
    """The first qualified lead whose company is new and whose e-mail no contact has."""
    names = {a["name"].casefold() for a in s.accounts}
    lead = s.leads.first(lambda ld: ld["company"].casefold() not in names and s.contacts.first(
        email=ld["email"]) is None, status="qualified")
    return {"lead_id": lead["id"], "amount": 24000, "deal_name": f"{lead['company']} - First Order"}


def _second_rep(s: CrmState) -> str:
    return s.reps.first(lambda r: r["active"] and r["id"] != s.get_var("me"))["id"]


def _new_person(rng: random.Random, companies: tuple[str, ...]) -> Record:
    """A new contact or lead (synthesis values: each field draws the same person, so with the same
    seed the name, company and e-mail address agree)."""
    first, last = fake.person(rng)
    company = rng.choice(companies)
    return {"first_name": first, "last_name": last, "company": company,
            "email": _work_email(first, last, company, set())}


def _new_activity(rng: random.Random) -> tuple[str, str]:
    """A kind of activity and a subject that fits it (drawn alike for both fields)."""
    kind = rng.choice(("call", "meeting", "task"))
    return kind, rng.choice({"call": CALL_SUBJECTS, "meeting": MEETING_SUBJECTS, "task": TASK_SUBJECTS}[kind])


KIND_OUTCOMES = {"call": ("Left voicemail", "Connected; next steps agreed.", "No answer, will try again Monday."),
                 "meeting": ("Demo went well; trial requested.", "They want a revised quote.",
                             "Pushed to next quarter.", "Signed off on the proposal."),
                 "task": ("Sent; they will review Friday.", "Done; shared with the account team.")}


def _activity_outcome(rng: random.Random, s: CrmState, args: Record | None = None) -> str:
    """How an activity went, in words fit for its kind: the call's kind, the kind of the activity
    it completes, else the kind drawn with the call's subject."""
    activity = s.activities.find((args or {}).get("activity_id") or "")
    kind = (args or {}).get("kind") or (activity and activity["kind"]) or _new_activity(rng)[0]
    return rng.choice(KIND_OUTCOMES.get(kind, OUTCOMES))


def _future_day(rng: random.Random, s: CrmState) -> str:
    """A close date a few weeks to four months out (synthesis values)."""
    return (s.today() + dt.timedelta(days=rng.choice((14, 21, 30, 45, 60, 90, 120)))).isoformat()


# -- how users ask: wording that depends on a call's values -----------------------------------------


def _record_slot(a: Record, *keys: str) -> str:
    """The slot of the record a call names (the first of ``keys`` it gives), or plain words."""
    return next((f"{{{k}}}" for k in keys if a.get(k)), "the record")


def _search_asks(a: Record) -> tuple[str, ...]:
    if a.get("stage"):
        return ("list the deals in {stage}", "show every deal at the {stage} stage",
                "find the {record_type}s sitting in {stage}")
    if a.get("lead_status"):
        return ("show the {lead_status} leads of {owner_id}",
                "find the leads owned by {owner_id} that are {lead_status}",
                "list all {lead_status} {record_type}s owned by {owner_id}")
    return ("search the CRM for {query}", "find anything matching {query}", "look up {query} in the CRM",
            "find {record_type}s matching {query}")


def _deal_update_asks(a: Record) -> tuple[str, ...]:
    stage = a.get("stage")
    if stage == "closed_lost":
        return ("mark {deal_id} as {stage}: {lost_reason}", "close {deal_id} as lost because {lost_reason}",
                "move {deal_id} to {stage}, reason \"{lost_reason}\"")
    if stage and a.get("amount"):
        return ("move {deal_id} to {stage} at ${amount}",
                "advance {deal_id} to the {stage} stage and set it to ${amount}",
                "push {deal_id} forward to {stage}, value ${amount}")
    if stage:
        return ("move {deal_id} to {stage}", "advance {deal_id} to the {stage} stage",
                "push {deal_id} forward to {stage}",
                "move {deal_id} to {stage} and expect it to close {close_date}")
    return ("change the amount of {deal_id} to ${amount}", "push the close date of {deal_id} to {close_date}",
            "update {deal_id}: ${amount}, closing {close_date}")


def _activity_asks(a: Record) -> tuple[str, ...]:
    on = _record_slot(a, "lead_id", "deal_id", "contact_id", "account_id")
    if a.get("completed"):
        return (f"log a completed {{kind}} on {on}: \"{{subject}}\", outcome: {{outcome}}",
                f"record a {{kind}} I just had with {on}, \"{{subject}}\": {{outcome}}",
                f"note that the {{kind}} \"{{subject}}\" with {on} is done; {{outcome}}",
                f"log a {{kind}} \"{{subject}}\" on {on} as already done")
    return (f"create a {{kind}} \"{{subject}}\" on {on} due {{due_date}}",
            f"add a {{kind}} to {on}: {{subject}}, by {{due_date}}",
            f"schedule a {{kind}} for {{due_date}} on {on} about \"{{subject}}\"",
            f"put a {{kind}} \"{{subject}}\" on my list for {on}, due {{due_date}}")


def _note_asks(a: Record) -> tuple[str, ...]:
    on = _record_slot(a, "deal_id", "lead_id", "contact_id", "account_id")
    return (f"add a note to {on}: \"{{body}}\"", f"note on {on}: {{body}}", f"jot this down on {on}: \"{{body}}\"",
            f"save the note \"{{body}}\" on {on}")


def _assign_asks(a: Record) -> tuple[str, ...]:
    record = _record_slot(a, "account_id", "lead_id", "deal_id")
    deals = " along with its open deals" if a.get("include_open_deals") else ""
    return (f"reassign {record} to {{owner_id}}{deals}", f"give {record} to {{owner_id}}{deals}",
            f"make {{owner_id}} the owner of {record}{deals}", f"hand {record} over to {{owner_id}}{deals}")


# -- the server and its tools ---------------------------------------------------------------------

server = Server(
    "crm",
    domain="knowledge",
    description="A sales CRM: accounts and contacts, leads and their conversion, a deal pipeline with stages, "
    "calls, meetings and tasks, notes, and record ownership among the sales reps.",
    state=CrmState,
    seed=build_crm,
    options=CrmOptions,
)


@server.tool(
    answers=("team", "open_deal_count", "open_pipeline"),
    read_only=True,
    reads=["sales_rep", "deal"],
    examples=[{}, {"include_inactive": True}],
    asks=lambda a: ("list all sales reps, including the ones who left", "show every rep, former ones too",
                    "show the whole sales team including people who have left") if a.get("include_inactive") else (
                    "list the sales reps", "show me the sales team and their pipelines",
                    "show which reps can own records"),
)
def list_sales_reps(
    state: CrmState,
    include_inactive: Annotated[bool, Field(description="Also list reps who have left (they own old records "
                                                        "but cannot be assigned new ones).")] = False,
) -> dict:
    """The sales reps: id, name, e-mail, team, title, quarterly quota, whether still active, whether
    it is you (the signed-in rep), and their open pipeline (number and total amount of open deals)."""
    reps = []
    for rep in state.reps.all():
        if not rep["active"] and not include_inactive:
            continue
        open_deals = state.deals.where(lambda d: d["stage"] not in CLOSED_STAGES, owner_id=rep["id"])
        reps.append({**rep, "is_you": rep["id"] == state.get_var("me"), "open_deal_count": len(open_deals),
                     "open_pipeline": money(sum(d["amount"] or 0 for d in open_deals))})
    return {"sales_reps": reps}


@server.tool(
    answers=("record_type", "company", "stage"),
    read_only=True,
    reads=["account", "contact", "lead", "deal", "sales_rep"],
    errors=["OWNER_NOT_FOUND", "FILTER_NOT_APPLICABLE"],
    examples=[lambda s: {"query": s.accounts.first()["name"].split()[0]},
              {"record_type": "deal", "stage": "negotiation"},
              lambda s: {"record_type": "lead", "lead_status": "qualified", "owner_id": s.leads.first(
                  status="qualified")["owner_id"]}],
    asks=_search_asks,
)
def search_crm(
    state: CrmState,
    query: Annotated[str | None, Field(max_length=100, description="Words to find in names, companies, e-mail "
                                                                   "addresses, titles and deal names.")] = None,
    record_type: Annotated[RecordType | None, Field(description="Only this kind of record.")] = None,
    owner_id: Annotated[str | None, ref("sales_rep", "Only records owned by this rep (rep_...).")] = None,
    stage: Annotated[Stage | None, Field(description="Only deals in this stage (implies deals).")] = None,
    lead_status: Annotated[LeadStatus | None, Field(description="Only leads in this status (implies leads).")] = None,
    limit: Annotated[int, Field(ge=1, le=50, description="Page size.")] = 20,
    offset: Annotated[int, Field(ge=0, description="Results to skip; pass the previous next_offset.")] = 0,
) -> dict:
    """Search accounts, contacts, leads and deals; every query word must match (case-insensitive).
    Filters narrow by record type, owner, deal stage or lead status. Returns a page of results
    (record_type, id, name and a few key fields), counts per record type, the total and
    next_offset. Fails with OWNER_NOT_FOUND or FILTER_NOT_APPLICABLE (a stage filter with a
    record type other than deal, or a lead status with one other than lead)."""
    if owner_id is not None:
        lookup(state.reps, owner_id, message=f"no sales rep {owner_id!r}", reason="OWNER_NOT_FOUND")
    require(not (stage and lead_status), "stage applies to deals and lead_status to leads; use one",
            reason="FILTER_NOT_APPLICABLE", error=InvalidArgument)
    implied = "deal" if stage else "lead" if lead_status else None
    require(implied is None or record_type in (None, implied), f"that filter only applies to {implied}s",
            reason="FILTER_NOT_APPLICABLE", error=InvalidArgument)
    kinds = [record_type or implied] if (record_type or implied) else ["account", "contact", "lead", "deal"]
    terms = (query or "").casefold().split()
    owner = {"owner_id": owner_id} if owner_id else {}
    results: list[Record] = []
    for kind in kinds:
        for item in _search_kind(state, kind, owner, stage, lead_status):
            text = item.pop("_text")
            if all(t in text for t in terms):
                results.append(item)
    counts = {kind: sum(r["record_type"] == kind for r in results) for kind in kinds}
    return {**paginate(results, limit=limit, offset=offset, key="results"), "counts": counts}


def _search_kind(state: CrmState, kind: str, owner: Record, stage: str | None, lead_status: str | None) -> list[Record]:
    if kind == "account":
        return [{"record_type": "account", "id": a["id"], "name": a["name"], "industry": a["industry"],
                 "type": a["type"], "owner_id": a["owner_id"],
                 "_text": f"{a['name']} {a['industry']} {a['website']}".casefold()}
                for a in state.accounts.where(**owner)]
    if kind == "contact":
        out = []
        for c in state.contacts.where(**owner):
            account = state.accounts.get(c["account_id"])["name"]
            out.append({"record_type": "contact", "id": c["id"], "name": _person(c), "email": c["email"],
                        "title": c["title"], "account_id": c["account_id"], "account_name": account,
                        "owner_id": c["owner_id"],
                        "_text": f"{_person(c)} {c['email']} {c['title']} {account}".casefold()})
        return out
    if kind == "lead":
        filters = {**owner, **({"status": lead_status} if lead_status else {})}
        return [{"record_type": "lead", "id": ld["id"], "name": _person(ld), "company": ld["company"],
                 "email": ld["email"], "status": ld["status"], "owner_id": ld["owner_id"],
                 "_text": f"{_person(ld)} {ld['company']} {ld['email']} {ld['title']}".casefold()}
                for ld in state.leads.where(**filters)]
    filters = {**owner, **({"stage": stage} if stage else {})}
    return [{"record_type": "deal", "id": d["id"], "name": d["name"], "stage": d["stage"], "amount": d["amount"],
             "close_date": d["close_date"], "account_id": d["account_id"], "owner_id": d["owner_id"],
             "_text": d["name"].casefold()}
            for d in state.deals.where(**filters)]


@server.tool(
    answers=("industry", "owner_name", "open_pipeline"),
    read_only=True,
    reads=["account", "contact", "deal", "activity", "note", "sales_rep"],
    errors=["ACCOUNT_NOT_FOUND"],
    examples=[lambda s: {"account_id": s.accounts.first()["id"]}],
    asks=("show me {account_id}", "pull up the full record of {account_id}",
          "give me an overview of {account_id}: contacts, deals and notes", "open {account_id}"),
)
def get_account(state: CrmState, account_id: AccountId) -> dict:
    """One account in full: company details, owner, its contacts, its deals (with stage, amount and
    close date) and open pipeline total, its open activities (soonest first, overdue flagged) and
    its notes, newest first. Fails with ACCOUNT_NOT_FOUND."""
    account = state.accounts.get(account_id)
    deals = state.deals.where(account_id=account_id)
    open_activities = sorted(state.activities.where(account_id=account_id, status="open"),
                             key=lambda a: a["due_date"])
    return {
        **account,
        "owner_name": state.reps.get(account["owner_id"])["name"],
        "contacts": state.contacts.where(account_id=account_id),
        "deals": deals,
        "open_pipeline": money(sum(d["amount"] or 0 for d in deals if d["stage"] not in CLOSED_STAGES)),
        "open_activities": [_activity_view(state, a) for a in open_activities],
        "notes": _notes_for(state, account_id=account_id),
    }


@server.tool(
    idempotent=True,  # the same name again is refused with ACCOUNT_NAME_TAKEN
    reads=["account", "sales_rep"],
    produces=["account"],
    errors=["ACCOUNT_NAME_TAKEN", "OWNER_NOT_FOUND", "OWNER_INACTIVE"],
    examples=[{"name": "Juniper Biosciences", "industry": "biotech", "website": "https://juniperbio.example.com",
               "employees": 140}],
    asks=("create an account for {name} in {industry}", "add {name} as a new {industry} account",
          "set up a company record for {name}, industry {industry}",
          "add {name} ({industry}, about {employees} employees, {website}) to the CRM",
          "create a {industry} account called {name} with website {website}"),
    values={"name": lambda rng, s: rng.choice(NEW_COMPANIES), "industry": lambda rng, s: rng.choice(INDUSTRIES),
            "website": lambda rng, s: f"https://www.{_slug(rng.choice(NEW_COMPANIES))}.example.com",
            "employees": lambda rng, s: rng.choice((15, 40, 85, 140, 300, 750, 2_000, 5_000))},
)
def create_account(
    state: CrmState,
    name: Annotated[str, Field(min_length=2, max_length=80, description="Company name, unique in the CRM.")],
    industry: Annotated[Industry, Field(description="The company's industry.")],
    website: Annotated[str | None, Field(max_length=120, pattern=r"^https?://\S+$",
                                         description="Company website, https://...")] = None,
    employees: Annotated[int | None, Field(ge=1, le=1_000_000, description="Approximate head count.")] = None,
    owner_id: Annotated[str | None, ref("sales_rep", "Rep who owns the account; you when omitted.")] = None,
) -> dict:
    """Create an account (a company, starting as a prospect). Returns the account. Fails with
    ACCOUNT_NAME_TAKEN (an account of that name exists, ignoring case: use it), OWNER_NOT_FOUND or
    OWNER_INACTIVE."""
    _require_free_account_name(state, name)
    owner = _owner(state, owner_id)
    return state.accounts.insert({
        "name": name.strip(), "industry": industry, "website": website, "type": "prospect", "employees": employees,
        "address": None, "owner_id": owner["id"], "created_on": state.today().isoformat(),
    })


@server.tool(
    idempotent=True,  # the same e-mail again is refused with DUPLICATE_CONTACT_EMAIL
    reads=["account", "contact"],
    produces=["contact"],
    errors=["ACCOUNT_NOT_FOUND", "DUPLICATE_CONTACT_EMAIL"],
    examples=[lambda s: {"account_id": s.accounts.first()["id"], "first_name": "Rosa", "last_name": "Lindqvist",
                         "email": "rosa.lindqvist@newhire.example.com", "title": "Head of IT"}],
    asks=("add {first_name} {last_name} ({email}) as a contact at {account_id}",
          "create a contact {first_name} {last_name}, e-mail {email}, on {account_id}",
          "save {first_name} {last_name} <{email}> to {account_id}",
          "create a contact on {account_id} for {first_name} {last_name}, {title}, at {email}",
          "add {first_name} {last_name}, their {title}, as a contact: {email}, phone {phone}"),
    values={**{field: lambda rng, s, field=field: _new_person(rng, NEW_COMPANIES)[field]
               for field in ("first_name", "last_name", "email")},
            "title": lambda rng, s: rng.choice(JOB_TITLES), "phone": lambda rng, s: fake.phone(rng)},
)
def create_contact(
    state: CrmState,
    account_id: AccountId,
    first_name: Annotated[str, Field(min_length=1, max_length=40, description="Given name.")],
    last_name: Annotated[str, Field(min_length=1, max_length=40, description="Family name.")],
    email: Annotated[str, Field(max_length=120, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
                                description="Work e-mail address; unique across contacts.")],
    title: Annotated[str | None, Field(max_length=80, description="Job title.")] = None,
    phone: Annotated[str | None, Field(max_length=30, description="Phone number.")] = None,
) -> dict:
    """Add a person to an account; the contact is owned by the account's owner. Returns the contact.
    Fails with DUPLICATE_CONTACT_EMAIL (another contact has this e-mail, ignoring case; its id is in
    the error) or ACCOUNT_NOT_FOUND."""
    account = state.accounts.get(account_id)
    email = email.strip().lower()
    _require_new_email(state, email)
    return state.contacts.insert({
        "account_id": account_id, "first_name": first_name, "last_name": last_name, "email": email, "phone": phone,
        "title": title, "owner_id": account["owner_id"], "created_on": state.today().isoformat(),
    })


@server.tool(
    idempotent=True,  # the same e-mail again is refused with LEAD_EXISTS
    reads=["lead", "sales_rep"],
    produces=["lead"],
    errors=["LEAD_EXISTS", "OWNER_NOT_FOUND", "OWNER_INACTIVE"],
    examples=[{"first_name": "Tomasz", "last_name": "Varga", "company": "Willowbrook Dental",
               "email": "tomasz@willowbrookdental.example.com", "source": "event", "title": "Practice Manager"}],
    asks=("add a lead: {first_name} {last_name} from {company}, {email}, came in via {source}",
          "create a lead for {first_name} {last_name} at {company} ({email}), source {source}",
          "log {first_name} {last_name} of {company} as a new {source} lead, e-mail {email}",
          "record a new {source} lead, {first_name} {last_name}, {title} at {company}, {email}, phone {phone}"),
    values={**{field: lambda rng, s, field=field: _new_person(rng, LEAD_COMPANIES)[field]
               for field in ("first_name", "last_name", "company", "email")},
            "source": lambda rng, s: rng.choice(LEAD_SOURCES), "title": lambda rng, s: rng.choice(JOB_TITLES),
            "phone": lambda rng, s: fake.phone(rng)},
)
def create_lead(
    state: CrmState,
    first_name: Annotated[str, Field(min_length=1, max_length=40, description="Given name.")],
    last_name: Annotated[str, Field(min_length=1, max_length=40, description="Family name.")],
    company: Annotated[str, Field(min_length=2, max_length=80, description="The company they work for.")],
    email: Annotated[str, Field(max_length=120, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", description="E-mail.")],
    source: Annotated[LeadSource, Field(description="Where the lead came from.")],
    title: Annotated[str | None, Field(max_length=80, description="Job title.")] = None,
    phone: Annotated[str | None, Field(max_length=30, description="Phone number.")] = None,
    owner_id: Annotated[str | None, ref("sales_rep", "Rep who works the lead; you when omitted.")] = None,
) -> dict:
    """Record a new lead (status new). Returns the lead. Fails with LEAD_EXISTS (an unconverted lead
    with this e-mail exists; its id is in the error), OWNER_NOT_FOUND or OWNER_INACTIVE."""
    email = email.strip().lower()
    existing = state.leads.first(lambda ld: ld["status"] != "converted", email=email)
    if existing is not None:
        raise Conflict(f"lead {existing['id']} ({_person(existing)}, {existing['status']}) already has {email}",
                       reason="LEAD_EXISTS", lead_id=existing["id"])
    owner = _owner(state, owner_id)
    return state.leads.insert({
        "first_name": first_name, "last_name": last_name, "company": company.strip(), "email": email, "phone": phone,
        "title": title, "source": source, "status": "new", "owner_id": owner["id"], "disqualify_reason": None,
        "created_on": state.today().isoformat(), "converted": None,
    })


@server.tool(
    idempotent=True,
    reads=["lead"],
    mutates=["lead"],
    errors=["LEAD_NOT_FOUND", "LEAD_ALREADY_CONVERTED", "REASON_REQUIRED"],
    examples=[lambda s: {"lead_id": s.leads.first(status="new")["id"], "decision": "qualified"},
              lambda s: {"lead_id": s.leads.first(status="working")["id"], "decision": "disqualified",
                         "reason": "Too small for our product"}],
    asks=lambda a: ("mark {lead_id} as {decision} because {reason}", "set {lead_id} to {decision}: {reason}",
                    "flag {lead_id} as {decision}, reason: {reason}") if a.get("decision") == "disqualified" else (
                    "mark {lead_id} as {decision}", "set {lead_id} to {decision}, it's worth pursuing",
                    "move {lead_id} to {decision}"),
    values={"reason": lambda rng, s: rng.choice(DISQUALIFY_REASONS)},
)
def qualify_lead(
    state: CrmState,
    lead_id: LeadId,
    decision: Annotated[Literal["qualified", "disqualified"], Field(
        description="qualified: worth pursuing (it can then be converted); disqualified: not a fit.")],
    reason: Annotated[str | None, Field(max_length=200, description="Why; required to disqualify.")] = None,
) -> dict:
    """Qualify or disqualify a lead (a disqualified lead can be qualified again later). Returns the
    lead. Fails with LEAD_ALREADY_CONVERTED or REASON_REQUIRED (disqualifying needs a reason)."""
    lead = state.leads.get(lead_id)
    _require_unconverted(lead)
    require(decision == "qualified" or bool(reason and reason.strip()), "say why the lead is disqualified",
            reason="REASON_REQUIRED", error=InvalidArgument)
    return state.leads.update(lead_id, status=decision,
                              disqualify_reason=reason.strip() if decision == "disqualified" and reason else None)


@server.tool(
    idempotent=True,  # a repeat is refused with LEAD_ALREADY_CONVERTED
    reads=["lead", "account", "contact"],
    produces=["account", "contact", "deal"],
    mutates=["lead"],
    errors=["LEAD_NOT_FOUND", "LEAD_ALREADY_CONVERTED", "LEAD_NOT_QUALIFIED", "ACCOUNT_NOT_FOUND",
            "ACCOUNT_NAME_TAKEN", "DUPLICATE_CONTACT_EMAIL", "OWNER_INACTIVE", "BAD_DATE", "CLOSE_DATE_IN_PAST"],
    examples=[_convert_example],
    asks=("convert {lead_id}", "turn {lead_id} into an account and a contact",
          "convert {lead_id} with a deal called \"{deal_name}\" worth ${amount}",
          "convert {lead_id} and open a ${amount} deal closing {close_date}",
          "convert {lead_id} and attach the contact to {account_id}"),
    values={"amount": lambda rng, s: rng.choice(DEAL_AMOUNTS), "deal_name": lambda rng, s: rng.choice(DEAL_NAMES),
            "close_date": _future_day},
)
def convert_lead(
    state: CrmState,
    lead_id: LeadId,
    account_id: Annotated[str | None, ref("account", "Attach the contact to this existing account instead of "
                                                     "creating one named after the lead's company.")] = None,
    create_deal: Annotated[bool, Field(description="Also open a deal (stage qualification).")] = True,
    deal_name: Annotated[str | None, Field(
        max_length=100, description="Name of the new deal; '<company> - New Business' when omitted.")] = None,
    amount: Annotated[float | None, Field(gt=0, le=100_000_000, description="Expected deal value in USD.")] = None,
    close_date: Annotated[str | None, Field(pattern=ISO_DATE, description="Expected close date, YYYY-MM-DD; "
                                                                          "60 days out when omitted.")] = None,
) -> dict:
    """Convert a qualified lead: create an account for its company (or use account_id), a contact
    from the lead's details and, unless create_deal is false, a deal in stage qualification, all
    owned by the lead's owner. Returns the ids of all three and the converted lead. Fails with
    LEAD_NOT_QUALIFIED (qualify it first), LEAD_ALREADY_CONVERTED, ACCOUNT_NAME_TAKEN (an account of
    that company exists: pass its id as account_id), DUPLICATE_CONTACT_EMAIL (someone is already a
    contact with the lead's e-mail), OWNER_INACTIVE (reassign the lead first), CLOSE_DATE_IN_PAST
    or BAD_DATE (not a real date)."""
    lead = state.leads.get(lead_id)
    _require_unconverted(lead)
    require(lead["status"] == "qualified", f"lead {_person(lead)} is {lead['status']}; qualify it before converting",
            reason="LEAD_NOT_QUALIFIED", status=lead["status"])
    if account_id is not None:
        state.accounts.get(account_id)
    else:
        _require_free_account_name(state, lead["company"])
    _require_new_email(state, lead["email"])
    owner = _owner(state, lead["owner_id"])
    today = state.today()
    close = (_future_date(state, close_date, "close_date", "CLOSE_DATE_IN_PAST") if close_date
             else (today + dt.timedelta(days=DEFAULT_DEAL_DAYS)).isoformat())
    if account_id is None:
        account_id = state.accounts.insert({
            "name": lead["company"], "industry": "other", "website": None, "type": "prospect", "employees": None,
            "address": None, "owner_id": owner["id"], "created_on": today.isoformat(),
        })["id"]
    contact = state.contacts.insert({
        "account_id": account_id, "first_name": lead["first_name"], "last_name": lead["last_name"],
        "email": lead["email"], "phone": lead["phone"], "title": lead["title"], "owner_id": owner["id"],
        "created_on": today.isoformat(),
    })
    deal_id = None
    if create_deal:
        history = [{"stage": "qualification", "changed_on": today.isoformat(), "by": state.get_var("me")}]
        deal_id = state.deals.insert({
            "name": deal_name or f"{lead['company']} - New Business", "account_id": account_id,
            "contact_id": contact["id"], "owner_id": owner["id"], "stage": "qualification",
            "probability": PROBABILITY["qualification"], "amount": None if amount is None else money(amount),
            "currency": CURRENCY, "close_date": close, "closed_on": None, "lost_reason": None,
            "stage_history": history, "created_on": today.isoformat(),
        })["id"]
    converted = {"account_id": account_id, "contact_id": contact["id"], "deal_id": deal_id,
                 "converted_on": today.isoformat()}
    lead = state.leads.update(lead_id, status="converted", converted=converted)
    return {**converted, "lead": lead}


@server.tool(
    reads=["account", "contact", "sales_rep"],
    produces=["deal"],
    errors=["ACCOUNT_NOT_FOUND", "CONTACT_NOT_FOUND", "CONTACT_NOT_ON_ACCOUNT", "OWNER_NOT_FOUND", "OWNER_INACTIVE",
            "BAD_DATE", "CLOSE_DATE_IN_PAST"],
    examples=[lambda s: {"account_id": s.accounts.first()["id"], "name": "Expansion - 50 seats",
                         "close_date": "2026-05-29", "amount": 18500,
                         "contact_id": s.contacts.first(account_id=s.accounts.first()["id"])["id"]}],
    asks=("open a deal \"{name}\" on {account_id} closing {close_date}",
          "create a deal called {name} for {account_id}, expected to close {close_date}",
          "start a new opportunity {name} on {account_id}, worth ${amount}, closing by {close_date}",
          "add a ${amount} deal named \"{name}\" to {account_id} with {contact_id} as the main contact, close date "
          "{close_date}"),
    values={"name": lambda rng, s: rng.choice(DEAL_NAMES), "close_date": _future_day,
            "amount": lambda rng, s: rng.choice(DEAL_AMOUNTS)},
)
def create_deal(
    state: CrmState,
    account_id: AccountId,
    name: Annotated[str, Field(min_length=2, max_length=100, description="Deal name, e.g. 'Acme - Renewal 2026'.")],
    close_date: Annotated[str, Field(pattern=ISO_DATE, description="Expected close date, YYYY-MM-DD (not past).")],
    amount: Annotated[float | None, Field(gt=0, le=100_000_000, description="Expected value in USD; needed "
                                                                            "before the proposal stage.")] = None,
    contact_id: Annotated[str | None, ref("contact", "Main contact on the deal; must work at the account.")] = None,
    owner_id: Annotated[str | None, ref("sales_rep", "Rep who owns the deal; the account owner when omitted.")] = None,
) -> dict:
    """Open a deal on an account in stage prospecting. Returns the deal. Fails with
    CONTACT_NOT_ON_ACCOUNT, CLOSE_DATE_IN_PAST, BAD_DATE, OWNER_NOT_FOUND or OWNER_INACTIVE."""
    account = state.accounts.get(account_id)
    if contact_id is not None:
        contact = state.contacts.get(contact_id)
        require(contact["account_id"] == account_id, f"{_person(contact)} works at another account",
                reason="CONTACT_NOT_ON_ACCOUNT", error=InvalidArgument, contact_account_id=contact["account_id"])
    close = _future_date(state, close_date, "close_date", "CLOSE_DATE_IN_PAST")
    owner = _owner(state, owner_id or account["owner_id"])
    today = state.today().isoformat()
    deal = state.deals.insert({
        "name": name.strip(), "account_id": account_id, "contact_id": contact_id, "owner_id": owner["id"],
        "stage": "prospecting", "probability": PROBABILITY["prospecting"],
        "amount": None if amount is None else money(amount), "currency": CURRENCY, "close_date": close,
        "closed_on": None, "lost_reason": None,
        "stage_history": [{"stage": "prospecting", "changed_on": today, "by": state.get_var("me")}],
        "created_on": today,
    })
    return _deal_view(state, deal)


@server.tool(
    answers=("stage", "amount", "close_date", "probability"),
    read_only=True,
    reads=["deal", "account", "contact", "activity", "note"],
    errors=["DEAL_NOT_FOUND"],
    examples=[lambda s: {"deal_id": _open_deal(s)["id"]}],
    asks=("show me {deal_id}", "pull up {deal_id} with its activities and notes", "check where {deal_id} stands",
          "give me the details of {deal_id}"),
)
def get_deal(state: CrmState, deal_id: DealId) -> dict:
    """One deal in full: account, main contact, owner, stage with its probability and history,
    the stages it may move to next, amount, close date, its activities (overdue flagged) and
    notes. Fails with DEAL_NOT_FOUND."""
    deal = state.deals.get(deal_id)
    contact = state.contacts.find(deal["contact_id"]) if deal["contact_id"] else None
    activities = sorted(state.activities.where(deal_id=deal_id), key=lambda a: a["due_date"])
    return {**_deal_view(state, deal), "contact": contact, "owner_name": state.reps.get(deal["owner_id"])["name"],
            "activities": [_activity_view(state, a) for a in activities], "notes": _notes_for(state, deal_id=deal_id)}


@server.tool(
    idempotent=True,  # the same values again change nothing
    reads=["deal", "account"],
    mutates=["deal", "account"],
    errors=["DEAL_NOT_FOUND", "DEAL_CLOSED", "INVALID_STAGE_TRANSITION", "AMOUNT_REQUIRED", "LOST_REASON_REQUIRED",
            "NOTHING_TO_UPDATE", "BAD_DATE", "CLOSE_DATE_IN_PAST"],
    examples=[lambda s: {"deal_id": _open_deal(s, stage="proposal")["id"], "stage": "negotiation"},
              lambda s: {"deal_id": _open_deal(s, stage="prospecting")["id"], "stage": "proposal", "amount": 42000},
              lambda s: {"deal_id": _open_deal(s, stage="negotiation")["id"], "stage": "closed_lost",
                         "lost_reason": "Chose a competitor"}],
    asks=_deal_update_asks,
    values={"amount": lambda rng, s: rng.choice(DEAL_AMOUNTS), "close_date": _future_day,
            "lost_reason": lambda rng, s: rng.choice(LOST_REASONS)},
)
def update_deal(
    state: CrmState,
    deal_id: DealId,
    stage: Annotated[Stage | None, Field(
        description="Move to this stage: only forward (prospecting → qualification → proposal → negotiation → "
        "closed_won) or to closed_lost.")] = None,
    amount: Annotated[float | None, Field(gt=0, le=100_000_000, description="Deal value in USD.")] = None,
    close_date: Annotated[str | None, Field(pattern=ISO_DATE, description="Expected close date, YYYY-MM-DD.")] = None,
    lost_reason: Annotated[str | None, Field(max_length=200, description="Why it was lost; required with "
                                                                         "closed_lost, ignored otherwise.")] = None,
) -> dict:
    """Move an open deal along the pipeline and/or change its amount or expected close date.
    Winning a deal makes its account a customer. Returns the deal with its allowed next stages.
    Fails with INVALID_STAGE_TRANSITION (a backward move), AMOUNT_REQUIRED (proposal, negotiation
    and closed_won need an amount: pass one), LOST_REASON_REQUIRED, DEAL_CLOSED (closed deals are
    final), CLOSE_DATE_IN_PAST, BAD_DATE (not a real date) or NOTHING_TO_UPDATE."""
    deal = state.deals.get(deal_id)
    _require_open_deal(deal)
    require(any(v is not None for v in (stage, amount, close_date)), "give a stage, amount or close_date",
            reason="NOTHING_TO_UPDATE", error=InvalidArgument)
    changes: Record = {}
    if amount is not None:
        changes["amount"] = money(amount)
    if close_date is not None:
        changes["close_date"] = _future_date(state, close_date, "close_date", "CLOSE_DATE_IN_PAST")
    if stage is not None and stage != deal["stage"]:
        if stage == "closed_lost":
            require(bool(lost_reason and lost_reason.strip()), "say why the deal was lost (lost_reason)",
                    reason="LOST_REASON_REQUIRED", error=InvalidArgument)
            changes["lost_reason"] = lost_reason.strip() if lost_reason else None
        else:
            allowed = [s for s in STAGES if STAGES.index(s) > STAGES.index(deal["stage"])]
            require(stage in allowed, f"a deal in {deal['stage']} cannot move back to {stage}; allowed: "
                    f"{', '.join(allowed)}", reason="INVALID_STAGE_TRANSITION", current=deal["stage"],
                    allowed=allowed)
            require(stage not in AMOUNT_STAGES or changes.get("amount", deal["amount"]) is not None,
                    f"a deal needs an amount from the proposal stage on; pass amount with the move to {stage}",
                    reason="AMOUNT_REQUIRED", error=InvalidArgument, stage=stage)
        today = state.today().isoformat()
        changes.update(stage=stage, probability=PROBABILITY[stage],
                       stage_history=[*deal["stage_history"], {"stage": stage, "changed_on": today,
                                                               "by": state.get_var("me")}])
        if stage in CLOSED_STAGES:
            changes.update(closed_on=today, close_date=today)
        if stage == "closed_won":
            state.accounts.update(deal["account_id"], type="customer")
    return _deal_view(state, state.deals.update(deal_id, **changes))


@server.tool(
    reads=["deal", "contact", "account", "lead", "sales_rep"],
    produces=["activity"],
    errors=["DEAL_NOT_FOUND", "CONTACT_NOT_FOUND", "ACCOUNT_NOT_FOUND", "LEAD_NOT_FOUND", "RELATED_RECORD_REQUIRED",
            "ONE_RECORD_ONLY", "CONTACT_NOT_ON_ACCOUNT", "DEAL_NOT_ON_ACCOUNT", "LEAD_ALREADY_CONVERTED",
            "DUE_DATE_REQUIRED",
            "DUE_DATE_IN_PAST", "BAD_DATE", "OWNER_NOT_FOUND", "OWNER_INACTIVE"],
    examples=[lambda s: {"kind": "task", "subject": "Send revised quote", "due_date": "2026-03-06",
                         "deal_id": _open_deal(s)["id"]},
              lambda s: {"kind": "call", "subject": "Intro call", "completed": True, "outcome": "Left voicemail",
                         "lead_id": s.leads.first(status="new")["id"]}],
    asks=_activity_asks,
    values={"kind": lambda rng, s: _new_activity(rng)[0], "subject": lambda rng, s: _new_activity(rng)[1],
            "due_date": lambda rng, s: (s.today() + dt.timedelta(days=rng.randint(1, 14))).isoformat(),
            "outcome": _activity_outcome},
)
def log_activity(
    state: CrmState,
    kind: Annotated[ActivityKind, Field(description="call, meeting or task.")],
    subject: Annotated[str, Field(min_length=2, max_length=120, description="What it is about.")],
    due_date: Annotated[str | None, Field(pattern=ISO_DATE, description="When it is due or scheduled, YYYY-MM-DD; "
                                                                        "required unless completed.")] = None,
    deal_id: Annotated[str | None, ref("deal", "The deal it is about (dea_...).")] = None,
    contact_id: Annotated[str | None, ref("contact", "The contact it is with (con_...).")] = None,
    account_id: Annotated[str | None, ref("account", "The account it is about, when no deal or contact.")] = None,
    lead_id: Annotated[str | None, ref("lead", "The lead it is with (only with no other record).")] = None,
    completed: Annotated[bool, Field(description="true to log something already done, e.g. a call just made.")] = False,
    outcome: Annotated[str | None, Field(max_length=300, description="How it went, for a completed one.")] = None,
    owner_id: Annotated[str | None, ref("sales_rep", "Rep responsible; you when omitted.")] = None,
) -> dict:
    """Log a call, meeting or task against a deal, contact, account or lead. Open ones need a due
    date today or later; completed ones are logged as done today. Returns the activity. Fails with
    RELATED_RECORD_REQUIRED (name at least one record), ONE_RECORD_ONLY (a lead goes alone),
    CONTACT_NOT_ON_ACCOUNT (the contact works at another account than the deal or account),
    DEAL_NOT_ON_ACCOUNT (the deal belongs to another account than account_id),
    LEAD_ALREADY_CONVERTED (log it on the contact instead), DUE_DATE_REQUIRED, DUE_DATE_IN_PAST,
    BAD_DATE (not a real date), OWNER_NOT_FOUND or OWNER_INACTIVE."""
    require(any(v is not None for v in (deal_id, contact_id, account_id, lead_id)),
            "name the deal, contact, account or lead this is about", reason="RELATED_RECORD_REQUIRED",
            error=InvalidArgument)
    if lead_id is not None:
        require(deal_id is None and contact_id is None and account_id is None,
                "a lead is not linked to accounts yet: log it on the lead alone", reason="ONE_RECORD_ONLY",
                error=InvalidArgument)
        _require_unconverted(state.leads.get(lead_id))
    accounts = set()
    if deal_id is not None:
        accounts.add(state.deals.get(deal_id)["account_id"])
    if account_id is not None:
        accounts.add(state.accounts.get(account_id)["id"])
    if contact_id is not None:
        contact = state.contacts.get(contact_id)
        require(not accounts or accounts == {contact["account_id"]}, f"{_person(contact)} works at another account",
                reason="CONTACT_NOT_ON_ACCOUNT", error=InvalidArgument, contact_account_id=contact["account_id"])
        accounts.add(contact["account_id"])
    require(len(accounts) <= 1, "the deal belongs to another account than account_id", reason="DEAL_NOT_ON_ACCOUNT",
            error=InvalidArgument)
    today = state.today().isoformat()
    if completed:
        due = parse_date(due_date, "due_date").isoformat() if due_date else today
    else:
        require(due_date is not None, "an open activity needs a due_date", reason="DUE_DATE_REQUIRED",
                error=InvalidArgument)
        due = _future_date(state, due_date or "", "due_date", "DUE_DATE_IN_PAST")
    owner = _owner(state, owner_id)
    activity = state.activities.insert({
        "kind": kind, "subject": subject.strip(), "status": "completed" if completed else "open", "due_date": due,
        "account_id": next(iter(accounts), None), "contact_id": contact_id, "deal_id": deal_id, "lead_id": lead_id,
        "owner_id": owner["id"], "completed_on": today if completed else None,
        "outcome": outcome if completed else None, "created_on": today,
    })
    return _activity_view(state, activity)


@server.tool(
    idempotent=True,  # a repeat is refused with ACTIVITY_ALREADY_COMPLETED
    reads=["activity"],
    mutates=["activity"],
    errors=["ACTIVITY_NOT_FOUND", "ACTIVITY_ALREADY_COMPLETED"],
    examples=[lambda s: {"activity_id": s.activities.first(status="open")["id"], "outcome": "Sent; they will "
                                                                                          "review Friday."}],
    asks=("mark {activity_id} as done", "complete {activity_id}",
          "close out {activity_id} with the outcome \"{outcome}\"", "tick off {activity_id}: {outcome}"),
    values={"outcome": _activity_outcome},
)
def complete_activity(
    state: CrmState,
    activity_id: Annotated[str, ref("activity", "Id of the open activity (act_...), from list_activities.")],
    outcome: Annotated[str | None, Field(max_length=300, description="How it went.")] = None,
) -> dict:
    """Mark a call, meeting or task as done today, with an optional outcome. Returns the activity.
    Fails with ACTIVITY_ALREADY_COMPLETED."""
    activity = state.activities.get(activity_id)
    if activity["status"] == "completed":
        raise Conflict(f"{activity['kind']} {activity['subject']!r} was completed on {activity['completed_on']}",
                       reason="ACTIVITY_ALREADY_COMPLETED", completed_on=activity["completed_on"])
    done = state.activities.update(activity_id, status="completed", completed_on=state.today().isoformat(),
                                   outcome=outcome)
    return _activity_view(state, done)


@server.tool(
    answers=("kind", "status", "due_date"),
    read_only=True,
    reads=["activity", "sales_rep", "deal", "account"],
    errors=["OWNER_NOT_FOUND", "DEAL_NOT_FOUND", "ACCOUNT_NOT_FOUND"],
    examples=[lambda s: {"owner_id": s.get_var("me"), "status": "open"}, {"overdue_only": True},
              lambda s: {"deal_id": _open_deal(s)["id"], "kind": "task"}],
    asks=lambda a: ("show my overdue activities", "list everything that's past due",
                    "show the calls, meetings and tasks that are overdue") if a.get("overdue_only") else (
                    "list the {status} activities of {owner_id}", "show my {status} calls, meetings and tasks",
                    "list the {kind}s on {deal_id}", "show every {kind} for {deal_id}",
                    "show the activities on {account_id}"),
)
def list_activities(
    state: CrmState,
    owner_id: Annotated[str | None, ref("sales_rep", "Only this rep's activities (rep_...).")] = None,
    status: Annotated[Literal["open", "completed"] | None, Field(description="Only open or completed ones.")] = None,
    kind: Annotated[ActivityKind | None, Field(description="Only calls, meetings or tasks.")] = None,
    deal_id: Annotated[str | None, ref("deal", "Only activities on this deal.")] = None,
    account_id: Annotated[str | None, ref("account", "Only activities on this account.")] = None,
    overdue_only: Annotated[bool, Field(description="Only open activities whose due date has passed.")] = False,
    limit: Annotated[int, Field(ge=1, le=50, description="Page size.")] = 20,
    offset: Annotated[int, Field(ge=0, description="Results to skip; pass the previous next_offset.")] = 0,
) -> dict:
    """Calls, meetings and tasks, soonest due first, filtered by owner, status, kind, deal, account
    or overdue; each flags whether it is overdue. Returns a page, the total and next_offset. Fails
    with OWNER_NOT_FOUND, DEAL_NOT_FOUND or ACCOUNT_NOT_FOUND."""
    filters: Record = {}
    if owner_id is not None:
        lookup(state.reps, owner_id, message=f"no sales rep {owner_id!r}", reason="OWNER_NOT_FOUND")
        filters["owner_id"] = owner_id
    if deal_id is not None:
        filters["deal_id"] = state.deals.get(deal_id)["id"]
    if account_id is not None:
        filters["account_id"] = state.accounts.get(account_id)["id"]
    if status is not None:
        filters["status"] = status
    if kind is not None:
        filters["kind"] = kind
    views = [_activity_view(state, a) for a in state.activities.where(**filters)]
    if overdue_only:
        views = [a for a in views if a["overdue"]]
    views.sort(key=lambda a: a["due_date"])
    return paginate(views, limit=limit, offset=offset, key="activities")


@server.tool(
    reads=["account", "contact", "deal", "lead"],
    produces=["note"],
    errors=["ACCOUNT_NOT_FOUND", "CONTACT_NOT_FOUND", "DEAL_NOT_FOUND", "LEAD_NOT_FOUND", "RELATED_RECORD_REQUIRED",
            "ONE_RECORD_ONLY"],
    examples=[lambda s: {"body": "Procurement wants net-60 terms.", "deal_id": _open_deal(s)["id"]},
              lambda s: {"body": "Met at the trade show.", "lead_id": s.leads.first()["id"]}],
    asks=_note_asks,
    values={"body": lambda rng, s: rng.choice(NOTE_TEXTS)},
)
def add_note(
    state: CrmState,
    body: Annotated[str, Field(min_length=1, max_length=2000, description="The note text.")],
    account_id: Annotated[str | None, ref("account", "Attach to this account.")] = None,
    contact_id: Annotated[str | None, ref("contact", "Attach to this contact.")] = None,
    deal_id: Annotated[str | None, ref("deal", "Attach to this deal.")] = None,
    lead_id: Annotated[str | None, ref("lead", "Attach to this lead.")] = None,
) -> dict:
    """Write a note, signed by you, on exactly one account, contact, deal or lead. Returns the note.
    Fails with RELATED_RECORD_REQUIRED or ONE_RECORD_ONLY."""
    kind, record_id = _one_record(account_id=account_id, contact_id=contact_id, deal_id=deal_id, lead_id=lead_id)
    tables = {"account": state.accounts, "contact": state.contacts, "deal": state.deals, "lead": state.leads}
    tables[kind].get(record_id)  # the typed …_NOT_FOUND
    return state.notes.insert({"body": body, "author_id": state.get_var("me"), "account_id": account_id,
                               "contact_id": contact_id, "deal_id": deal_id, "lead_id": lead_id,
                               "created_at": iso_datetime(state.now())})


@server.tool(
    idempotent=True,
    reads=["sales_rep", "account", "lead", "deal", "contact"],
    mutates=["account", "contact", "lead", "deal"],
    errors=["OWNER_NOT_FOUND", "OWNER_INACTIVE", "ACCOUNT_NOT_FOUND", "LEAD_NOT_FOUND", "DEAL_NOT_FOUND",
            "RELATED_RECORD_REQUIRED", "ONE_RECORD_ONLY", "DEAL_CLOSED", "LEAD_ALREADY_CONVERTED"],
    examples=[lambda s: {"owner_id": _second_rep(s), "deal_id": _open_deal(s, owner_id=s.get_var("me"))["id"]},
              lambda s: {"owner_id": _second_rep(s), "account_id": s.accounts.first(owner_id=s.get_var("me"))["id"],
                         "include_open_deals": True}],
    asks=_assign_asks,
)
def assign_owner(
    state: CrmState,
    owner_id: OwnerId,
    account_id: Annotated[str | None, ref("account", "Reassign this account (its contacts follow).")] = None,
    lead_id: Annotated[str | None, ref("lead", "Reassign this lead.")] = None,
    deal_id: Annotated[str | None, ref("deal", "Reassign this open deal.")] = None,
    include_open_deals: Annotated[bool, Field(description="With account_id: move its open deals too.")] = False,
) -> dict:
    """Give one account, lead or deal to another sales rep. An account's contacts always move with
    it and its open deals too when include_open_deals is true. Returns the record and the ids of
    everything reassigned. Fails with OWNER_NOT_FOUND, OWNER_INACTIVE, DEAL_CLOSED,
    LEAD_ALREADY_CONVERTED, RELATED_RECORD_REQUIRED or ONE_RECORD_ONLY."""
    kind, record_id = _one_record(account_id=account_id, lead_id=lead_id, deal_id=deal_id)
    table = {"account": state.accounts, "lead": state.leads, "deal": state.deals}[kind]
    record = table.get(record_id)
    if kind == "deal":
        _require_open_deal(record)
    if kind == "lead":
        _require_unconverted(record)
    owner = _owner(state, owner_id)
    moved = {"contact_ids": [], "deal_ids": []}
    if kind == "account":
        for contact in state.contacts.where(lambda c: c["owner_id"] != owner["id"], account_id=record_id):
            state.contacts.update(contact["id"], owner_id=owner["id"])
            moved["contact_ids"].append(contact["id"])
        if include_open_deals:
            for deal in state.deals.where(lambda d: d["stage"] not in CLOSED_STAGES and d["owner_id"] != owner["id"],
                                          account_id=record_id):
                state.deals.update(deal["id"], owner_id=owner["id"])
                moved["deal_ids"].append(deal["id"])
    updated = table.update(record_id, owner_id=owner["id"])
    return {"record_type": kind, "record": updated, "owner": {"id": owner["id"], "name": owner["name"]},
            "previous_owner_id": record["owner_id"], **moved}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
