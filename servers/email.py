"""Email: one signed-in user's mailbox: folders, threads, messages, drafts, labels, attachments
and the storage quota.

Every message lives in exactly one folder: the system folders ``inbox``, ``sent``, ``drafts``,
``archive``, ``trash`` and ``spam`` (their ids are their names) or a custom one (``fld_...``).
Labels are tags on top of folders; a message can carry several. Drafts are messages of kind
``draft`` until they are sent; sending keeps the id. Replies and forwards join the original's
thread; a forward carries the original's attachments along.

Limits a real provider enforces are typed failures: 25 MiB of attachments per outgoing message
(ATTACHMENT_TOO_LARGE, received mail may be larger), and the mailbox storage quota
(QUOTA_EXCEEDED) — every stored message counts, trash included, until it is deleted forever.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    ISO_DATE,
    Conflict,
    InvalidArgument,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    paginate,
    parse_date,
    ref,
    require,
)

# -- vocabulary -----------------------------------------------------------------------------------

SYSTEM_FOLDERS = ("inbox", "sent", "drafts", "archive", "trash", "spam")
LabelColor = Literal["gray", "red", "orange", "yellow", "green", "teal", "blue", "purple"]
MIB = 1024 * 1024
SEND_LIMIT_BYTES = 25 * MIB  # attachments per outgoing message
STORAGE_HEADROOM_BYTES = 40 * MIB  # free space the seeded mailbox has left: it is nearly full
HEADER_BYTES = 1_200  # what headers add to a message's stored size
MAX_RECIPIENTS = 100
MAX_LABELS = 25
COMPANY_DOMAIN = "northwind.example"
EMAIL_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")

PROJECTS = ("Atlas", "Beacon", "Cobalt", "Nimbus", "Orion", "Quartz", "Juniper")
VENDORS = ("Acme Print Co", "Brightline Consulting", "Summit Logistics", "Pixel Foundry", "Greenleaf Catering")
CITIES = ("Denver", "Austin", "Lisbon", "Toronto", "Chicago", "Seattle")
ROLES = ("Senior Engineer", "Product Designer", "Data Analyst", "Engineering Manager")
# What users type when they search, write and file mail (synthesis draws from these). Bodies read
# well under any of the subjects; label names clash with no seeded label or folder.
MAIL_SEARCHES = ("invoice", "kickoff", "contract", "flight", "budget", "offsite", "interview", "password", "metrics",
                 "venue", "lunch", "redlines")
SUBJECT_SEARCHES = ("Invoice", "kickoff", "Contract draft", "Weekly metrics", "Candidate feedback", "Budget approval",
                    "Offsite", "Site survey")
NEW_SUBJECTS = ("Offsite agenda", "Q2 planning", "Notes from today", "Timeline update", "Quick question",
                "Draft proposal", "Hiring plan", "Vendor shortlist", "Slides for Thursday", "Launch checklist")
NEW_BODIES = ("First pass, comments welcome.", "Quick update: the timeline moved by a week.",
              "Can we sync on this tomorrow?", "Sharing my notes from today.", "Please review before Friday.",
              "Let me know what you think.", "Here is the latest version.", "Half-baked thoughts for later.",
              "Adding the open questions at the end.")
REPLY_BODIES = ("Thanks, I'll take a look today.", "Sounds good to me.", "Works for me, see you then.",
                "Can we push this to next week?", "Got it, thanks!", "I'll get back to you by Friday.",
                "Looping in finance on this.", "Approved from my side.")
FORWARD_NOTES = ("FYI, see the attachments.", "Can you take this one?", "Forwarding for your records.",
                 "See below, thoughts?", "Please handle by Friday.", "Sharing in case it's useful.")
LABEL_NAMES = ("Clients", "Urgent", "Waiting on reply", "Read later", "Contracts", "Team", "Personal", "Newsletters",
               "Expenses", "Recruiting", "Vendors", "Board")
LABEL_COLORS = ("gray", "red", "orange", "yellow", "green", "teal", "blue", "purple")
OUTSIDE_DOMAINS = ("partner.example", "clientco.example", "agency.example", "vendor.example")
NEW_FILES = (("agenda.pdf", 120_000), ("slides.pdf", 2_400_000), ("budget.xlsx", 64_000), ("notes.docx", 45_000),
             ("site-photo.jpg", 1_800_000), ("timeline.png", 350_000), ("proposal.pdf", 900_000),
             ("report.xlsx", 210_000))
SERVICES = {  # automated senders: (display name, address)
    "airline": ("SkyBridge Airlines", "no-reply@skybridge-air.example"),
    "newsletter": ("{vendor_company} News", "news@updates.example.com"),
    "it": ("Northwind IT", f"it-helpdesk@{COMPANY_DOMAIN}"),
    "spam": ("Prize Center", "winner@prizes-now.example"),
}
MIME = {"pdf": "application/pdf", "jpg": "image/jpeg", "png": "image/png", "mov": "video/quicktime",
        "mp4": "video/mp4", "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}

# Conversation templates: subject, the folder received mail is filed in, labels, and messages as
# (sender role, to roles, cc roles, body, attachments as (file name, size in bytes)). Roles: me,
# boss, peer, peer2, vendor, or a service. The first 17 are always seeded, so every scenario the
# tools need exists at the default size; more threads cycle through them with new details.
THREADS: tuple[tuple[str, str, tuple[str, ...], tuple[tuple[str, tuple[str, ...], tuple[str, ...], str,
                                                           tuple[tuple[str, int], ...]], ...]], ...] = (
    ("{project} kickoff: agenda and owners", "inbox", (), (
        ("boss", ("me", "peer", "peer2"), (), "Hi all,\n\nAttached is the agenda for the {project} kickoff on {day}. "
         "Please review the owners list and flag anything missing before Friday.\n\nThanks,\n{boss_first}",
         (("{project_slug}-kickoff-agenda.pdf", 1_240_000),)),
        ("peer", ("boss",), ("me", "peer2"), "Looks good. I can own the data migration workstream.\n\n"
         "{peer_first}", ()),
        ("me", ("boss", "peer"), ("peer2",), "Thanks {boss_first}, I'll take the rollout plan and send a first draft "
         "next week.\n\n{me_first}", ()),
    )),
    ("Invoice {invoice} from {vendor_company}", "Receipts", ("Finance",), (
        ("vendor", ("me",), (), "Hello {me_first},\n\nPlease find attached invoice {invoice} for {amount} USD, due "
         "in 30 days.\n\nBest regards,\n{vendor_first}\n{vendor_company} Accounts",
         (("invoice-{invoice}.pdf", 182_000),)),
    )),
    ("Site survey photos: {city}", "inbox", ("Follow up",), (
        ("peer", ("me",), (), "Here are the photos from the {city} site survey. The loading dock needs a closer look "
         "before we sign.\n\n{peer_first}",
         (("dock-north.jpg", 6_400_000), ("dock-south.jpg", 5_900_000), ("floorplan-notes.png", 4_800_000))),
    )),
    ("Interview recordings for the {project} case study", "inbox", (), (
        ("vendor", ("me",), ("peer",), "Hi {me_first},\n\nThe raw interview footage is attached, uncut. Let me know "
         "which segments to transcribe.\n\n{vendor_first}", (("interview-raw.mov", 31_500_000),)),
    )),
    ("Offsite venue options in {city}", "Projects", (), (
        ("peer2", ("me", "boss"), (), "I shortlisted three venues for the offsite in {city}; the comparison sheet is "
         "attached.\n\n{peer2_first}", (("venue-comparison.xlsx", 86_000),)),
        ("boss", ("peer2",), ("me",), "Option two looks best. {me_first}, can you check the dates against the "
         "{project} launch?", ()),
    )),
    ("Weekly metrics: week {week}", "archive", (), (
        ("peer", ("me", "peer2"), ("boss",), "Dashboard export attached. Activation is up {pct}% week over week.",
         (("metrics-week-{week}.xlsx", 240_000),)),
    )),
    ("Your flight to {city} is confirmed ({flight})", "archive", ("Travel",), (
        ("airline", ("me",), (), "Booking reference {flight}. Departure on {day} at 08:15. Your e-ticket is "
         "attached; check in opens 24 hours before departure.", (("eticket-{flight}.pdf", 96_000),)),
    )),
    ("Can you review my PR for {project}?", "inbox", (), (
        ("peer2", ("me",), (), "Hey {me_first}, when you have 20 minutes, could you review the PR for the {project} "
         "importer? No rush before {day}.\n\n{peer2_first}", ()),
    )),
    ("Lunch on Thursday?", "inbox", (), (
        ("peer", ("me",), (), "Want to grab lunch on Thursday? The new noodle place opened.", ()),
        ("me", ("peer",), (), "Sure! 12:30 works for me.", ()),
        ("peer", ("me",), (), "Great, see you there.", ()),
    )),
    ("{vendor_company} product updates: March", "trash", (), (
        ("newsletter", ("me",), (), "Missed our live session? The full webinar recording is attached.",
         (("webinar-recording.mp4", 28_000_000),)),
    )),
    ("Contract draft for {vendor_company}", "inbox", ("Finance",), (
        ("me", ("vendor",), ("boss",), "Hi {vendor_first},\n\nAttached is our draft services agreement. Please send "
         "redlines by {day}.\n\n{me_first}", (("services-agreement-draft.docx", 310_000),)),
        ("vendor", ("me",), ("boss",), "Thanks, redlines attached; mostly the payment terms in section 4.\n\n"
         "{vendor_first}", (("services-agreement-redlines.docx", 335_000),)),
    )),
    ("Candidate feedback: {role}", "inbox", ("Hiring",), (
        ("boss", ("me", "peer"), (), "Please add your feedback for today's {role} candidate by end of day.", ()),
        ("peer", ("boss",), ("me",), "Strong hire from me: great answers on system design.", ()),
    )),
    ("Your password expires in 5 days", "archive", (), (
        ("it", ("me",), (), "Your Northwind password expires in 5 days. Change it on the IT portal to keep access.",
         ()),
    )),
    ("Budget approval for {project}", "inbox", ("Finance",), (
        ("me", ("boss",), (), "Hi {boss_first}, requesting approval for {amount} USD for {project} contractors this "
         "quarter. Breakdown attached.", (("{project_slug}-budget.xlsx", 64_000),)),
        ("boss", ("me",), (), "Approved. Please loop in finance.", ()),
    )),
    ("Notes for the {project} retro", "drafts", (), (
        ("me", ("peer", "peer2"), (), "Draft notes. What went well: the importer shipped on time. What didn't: "
         "flaky staging.", (("retro-notes.docx", 45_000),)),
    )),
    ("Follow-up with {vendor_company}", "drafts", (), (
        ("me", (), (), "Hi, following up on our call about the {project} rollout.", ()),
    )),
    ("Congratulations! You have won a $500 gift card", "spam", (), (
        ("spam", ("me",), (), "Click here within 24 hours to claim your prize.", ()),
    )),
)

# Reusable parameter types, so every tool describes ids, addresses and paging the same way.
MessageId = Annotated[str, ref("message", "Id of the message (msg_...), from search_messages or get_thread.")]
MessageIds = Annotated[list[str], ref("message", "Ids of the messages (msg_...), from search_messages or get_thread.",
                                      min_length=1, max_length=50)]
DraftId = Annotated[str, ref("message", "Id of the draft (msg_...), from create_draft or search_messages with "
                                        "folder_id drafts.")]
LabelId = Annotated[str, ref("label", "Id of the label (lbl_...), from list_folders or create_label.")]
Recipients = Annotated[list[str] | None, Field(max_length=MAX_RECIPIENTS, description="E-mail addresses, e.g. "
                                                                                      "ana.silva@example.com.")]
Body = Annotated[str, Field(max_length=20_000, description="Plain-text message body.")]
Attachment = Annotated[dict[str, Any], Field(json_schema_extra={
    "properties": {
        "filename": {"type": "string", "minLength": 1, "maxLength": 255, "description": "File name, e.g. plan.pdf."},
        "mime_type": {"type": "string", "pattern": r"^[a-z]+/[A-Za-z0-9.+-]+$", "description": "MIME type."},
        "size_bytes": {"type": "integer", "minimum": 1, "maximum": 50 * MIB, "description": "File size in bytes."},
    },
    "required": ["filename", "size_bytes"],
    "additionalProperties": False,
})]
Attachments = Annotated[list[Attachment] | None, Field(max_length=10, description="Files to attach (at most 25 MiB "
                                                                                   "in total): filename, size_bytes "
                                                                                   "and optional mime_type.")]
Limit = Annotated[int, Field(ge=1, le=100, description="Page size: how many results to return (1-100).")]
Offset = Annotated[int, Field(ge=0, description="How many results to skip; pass next_offset from the previous page.")]


# -- state and seed -------------------------------------------------------------------------------


class EmailState(State):
    """The mailbox of the signed-in user (var ``me``: name and address). The var ``quota_bytes`` is
    the storage plan and ``used_bytes`` the sum of every stored message's size."""

    folders = Table("folder", prefix="fld")
    threads = Table("thread", prefix="thr")
    messages = Table("message", prefix="msg", index=("thread_id", "folder_id", "kind"))
    attachments = Table("attachment", prefix="att", index=("message_id",))
    labels = Table("label", prefix="lbl")


@attrs.frozen(kw_only=True)
class EmailOptions:
    """Seed size: how many conversation threads the mailbox holds. The first 17 are the scenarios
    the tools' examples rely on (drafts, trash, spam, oversized attachments), so keep it >= 17."""

    threads: int = attrs.field(default=30, validator=attrs.validators.gt(0))


def build_mailbox(rng: random.Random, options: EmailOptions) -> EmailState:
    """A nearly full mailbox: threads with colleagues and vendors, attachments, drafts, a newsletter
    in the trash, spam, labels and two custom folders."""
    state = EmailState(salt=f"{rng.getrandbits(64):016x}")
    taken: set[str] = set()
    me = _work_contact(fake.full_name(rng), taken)
    state.set_var("me", me)
    state.set_var("used_bytes", 0)
    coworkers = [_work_contact(fake.full_name(rng), taken) for _ in range(8)]
    vendors = []
    for company in VENDORS:
        name = fake.full_name(rng)
        vendors.append({"name": name, "email": fake.email_for(name, rng, taken), "company": company})
    for name in SYSTEM_FOLDERS:
        state.folders.insert({"id": name, "name": name.title(), "system": True})
    for name in ("Receipts", "Projects"):
        state.folders.insert({"name": name, "system": False})
    for name, color in (("Finance", "green"), ("Travel", "blue"), ("Follow up", "orange"), ("Hiring", "purple")):
        state.labels.insert({"name": name, "color": color})
    # Past the scenario threads, older conversations repeat the templates that vary with details.
    repeatable = [t for t in THREADS if "{" in t[0] and t[1] not in ("drafts", "trash", "spam")]
    for n in range(options.threads):
        fresh = n < len(THREADS)
        template = THREADS[n] if fresh else repeatable[(n - len(THREADS)) % len(repeatable)]
        # Minutes since the thread's newest message: the first few scenarios arrived since yesterday
        # (so there is unread mail), the rest within the week; repeats reach two months back.
        if n < 4:
            age = rng.randint(20, 36 * 60)
        elif fresh:
            age = rng.randint(20, 7 * 24 * 60)
        else:
            age = rng.randint(7 * 24 * 60, 60 * 24 * 60)
        _seed_thread(state, rng, template, me, coworkers, vendors, age_minutes=age)
    state.set_var("quota_bytes", -(-(state.get_var("used_bytes") + STORAGE_HEADROOM_BYTES) // MIB) * MIB)
    return state


def _work_contact(name: str, taken: set[str]) -> Record:
    base, n = name.lower().replace(" ", "."), 0
    while f"{base}{n or ''}@{COMPANY_DOMAIN}" in taken:  # a namesake gets a number, as at real companies
        n += 1
    email = f"{base}{n or ''}@{COMPANY_DOMAIN}"
    taken.add(email)
    return {"name": name, "email": email}


def _seed_thread(state: EmailState, rng: random.Random, template: tuple, me: Record, coworkers: list[Record],
                 vendors: list[Record], age_minutes: int) -> None:
    subject, home, label_names, script = template
    boss, peer, peer2 = coworkers[0], *rng.sample(coworkers[1:], 2)
    vendor = rng.choice(vendors)
    day = state.today() + dt.timedelta(days=rng.randint(3, 20))
    context = {
        "project": rng.choice(PROJECTS), "vendor_company": vendor["company"], "invoice": f"INV-{fake.digits(rng, 5)}",
        "amount": f"{rng.randint(8, 240) * 50:,}", "city": rng.choice(CITIES), "week": rng.randint(1, 9),
        "pct": rng.randint(2, 14), "flight": f"SB{fake.digits(rng, 4)}", "role": rng.choice(ROLES),
        "day": day.strftime("%A %B %d").replace(" 0", " "), "me_first": me["name"].split()[0],
        "boss_first": boss["name"].split()[0], "peer_first": peer["name"].split()[0],
        "peer2_first": peer2["name"].split()[0], "vendor_first": vendor["name"].split()[0],
    }
    context["project_slug"] = context["project"].lower()
    people = {"me": me, "boss": boss, "peer": peer, "peer2": peer2, "vendor": vendor}
    for role, (display, address) in SERVICES.items():
        people[role] = {"name": display.format(**context), "email": address}
    gaps = [rng.randint(20, 26 * 60) for _ in script[1:]]  # minutes between replies
    last = state.now() - dt.timedelta(minutes=age_minutes)
    when = last - dt.timedelta(minutes=sum(gaps))
    thread = state.threads.insert({"subject": subject.format(**context), "created_at": iso_datetime(when)})
    folder = home if home in SYSTEM_FOLDERS else state.folders.first(name=home)["id"]
    labels = [state.labels.first(name=name)["id"] for name in label_names]
    for k, (sender, to, cc, body, files) in enumerate(script):
        mine = sender == "me"
        kind = "draft" if home == "drafts" else "sent" if mine else "received"
        place = {"draft": "drafts", "sent": "sent"}.get(kind, folder) if home != "trash" else "trash"
        recent = last > state.now() - dt.timedelta(days=2)
        unread = kind == "received" and k == len(script) - 1 and place != "archive" and (recent or rng.random() < 0.2)
        _store_message(state, thread["id"], place, kind, people[sender],
                       to=[people[r]["email"] for r in to], cc=[people[r]["email"] for r in cc], bcc=[],
                       subject=("Re: " if k else "") + subject.format(**context), body=body.format(**context),
                       files=[{"filename": f.format(**context), "size_bytes": size} for f, size in files],
                       when=when, read=not unread, label_ids=labels, trashed_from="inbox" if place == "trash" else None)
        when += dt.timedelta(minutes=gaps[k]) if k < len(gaps) else dt.timedelta(0)


# -- shared rules ---------------------------------------------------------------------------------


def _me(state: EmailState) -> Record:
    return state.get_var("me")


def _storage(state: EmailState) -> Record:
    used, quota = state.get_var("used_bytes"), state.get_var("quota_bytes")
    return {"used_bytes": used, "quota_bytes": quota, "free_bytes": quota - used,
            "percent_used": round(100 * used / quota, 1)}


def _require_storage(state: EmailState, adding: int) -> None:
    storage = _storage(state)
    require(adding <= storage["free_bytes"],
            f"the mailbox has {storage['free_bytes']:,} bytes free and this needs {adding:,}; delete messages "
            "from the trash for good (delete_forever) or send without attachments",
            reason="QUOTA_EXCEEDED", error=ResourceExhausted, **storage, needed_bytes=adding)


def _resize(state: EmailState, delta: int) -> None:
    state.set_var("used_bytes", state.get_var("used_bytes") + delta)


def _addresses(to: list[str] | None, cc: list[str] | None, bcc: list[str] | None) -> dict[str, list[str]]:
    """Recipients per field, trimmed, lower-cased and de-duplicated; INVALID_RECIPIENT names the bad one."""
    out: dict[str, list[str]] = {}
    for field, values in (("to", to), ("cc", cc), ("bcc", bcc)):
        clean = []
        for value in values or ():
            address = value.strip().lower()
            require(bool(EMAIL_RE.match(address)), f"{value!r} in {field} is not a valid e-mail address",
                    reason="INVALID_RECIPIENT", error=InvalidArgument, address=value, field=field)
            if address not in clean:
                clean.append(address)
        out[field] = clean
    count = sum(len(v) for v in out.values())
    require(count <= MAX_RECIPIENTS, f"{count} recipients; at most {MAX_RECIPIENTS} per message",
            reason="TOO_MANY_RECIPIENTS", error=ResourceExhausted, limit=MAX_RECIPIENTS)
    return out


def _files(attachments: list[Record] | None) -> list[Record]:
    files = [{"filename": a["filename"], "mime_type": a.get("mime_type") or _mime(a["filename"]),
              "size_bytes": a["size_bytes"]} for a in attachments or ()]
    _require_sendable(files)
    return files


def _mime(filename: str) -> str:
    return MIME.get(filename.rsplit(".", 1)[-1].lower(), "application/octet-stream")


def _require_sendable(files: list[Record]) -> None:
    total = sum(f["size_bytes"] for f in files)
    require(total <= SEND_LIMIT_BYTES, f"attachments total {total:,} bytes; the limit per message is "
            f"{SEND_LIMIT_BYTES:,} (25 MiB). Leave some out or share a link instead",
            reason="ATTACHMENT_TOO_LARGE", error=InvalidArgument, total_bytes=total, limit_bytes=SEND_LIMIT_BYTES)


def _size(body: str, files: list[Record]) -> int:
    return HEADER_BYTES + len(body.encode()) + sum(f["size_bytes"] for f in files)


def _store_message(state: EmailState, thread_id: str, folder_id: str, kind: str, sender: Record, *, to: list[str],
                   cc: list[str], bcc: list[str], subject: str, body: str, files: list[Record], when: dt.datetime,
                   read: bool, label_ids: list[str], trashed_from: str | None = None, in_reply_to: str | None = None,
                   forwarded_from: str | None = None) -> Record:
    """The one shape of a message, for seed data and tools alike; its size counts against the quota."""
    files = [{"mime_type": _mime(f["filename"]), **f} for f in files]
    message = state.messages.insert({
        "thread_id": thread_id, "folder_id": folder_id, "kind": kind, "from_name": sender["name"],
        "from_email": sender["email"], "to": to, "cc": cc, "bcc": bcc, "subject": subject, "body": body,
        "date": iso_datetime(when), "read": read, "label_ids": label_ids, "attachment_count": len(files),
        "size_bytes": _size(body, files), "in_reply_to": in_reply_to, "forwarded_from": forwarded_from,
        "trashed_from": trashed_from, "sent_from_draft": False,
    })
    for f in files:
        state.attachments.insert({"message_id": message["id"], "filename": f["filename"], "mime_type": f["mime_type"],
                                  "size_bytes": f["size_bytes"], "forwarded_from": f.get("forwarded_from")})
    _resize(state, message["size_bytes"])
    return message


def _summary(state: EmailState, message: Record) -> Record:
    keep = ("id", "thread_id", "folder_id", "kind", "from_name", "from_email", "to", "cc", "subject", "date", "read",
            "attachment_count")
    return {**{k: message[k] for k in keep}, "snippet": message["body"][:120],
            "labels": [state.labels.get(i)["name"] for i in message["label_ids"]]}


def _full(state: EmailState, message: Record) -> Record:
    return {**message, "labels": [{"id": i, "name": state.labels.get(i)["name"]} for i in message["label_ids"]],
            "attachments": state.attachments.where(message_id=message["id"])}


def _draft(state: EmailState, draft_id: str) -> Record:
    """A draft that can still be edited or sent."""
    message = state.messages.get(draft_id)
    require(not message["sent_from_draft"], f"draft {draft_id} was already sent on {message['date']}",
            reason="DRAFT_ALREADY_SENT", sent_at=message["date"])
    require(message["kind"] == "draft", f"message {draft_id} is not a draft; reply to or forward it instead",
            reason="NOT_A_DRAFT")
    require(message["folder_id"] != "trash", "this draft was discarded to the trash", reason="MESSAGE_IN_TRASH")
    return message


def _original(state: EmailState, message_id: str) -> Record:
    """A message that can be replied to or forwarded."""
    message = state.messages.get(message_id)
    require(message["folder_id"] != "trash", "the message is in the trash; move it back to a folder first",
            reason="MESSAGE_IN_TRASH")
    require(message["kind"] != "draft", "a draft cannot be replied to or forwarded; send it first",
            reason="MESSAGE_IS_DRAFT")
    return message


def _prefixed(prefix: str, subject: str) -> str:
    return subject if subject.lower().startswith(prefix.lower()) else f"{prefix} {subject}"


def _messages(state: EmailState, message_ids: list[str]) -> list[Record]:
    return [state.messages.get(i) for i in dict.fromkeys(message_ids)]


# -- examples: arguments valid on a fresh seed of any size ------------------------------------------


def _coworker(s: EmailState, n: int = 0) -> str:
    me = _me(s)["email"]
    senders = [m["from_email"] for m in s.messages.where(kind="received")
               if m["from_email"].endswith(COMPANY_DOMAIN) and m["from_email"] != me]
    return list(dict.fromkeys(senders))[n]


def _forwardable(s: EmailState) -> Record:
    return s.messages.first(lambda m: m["attachment_count"] and m["size_bytes"] < SEND_LIMIT_BYTES,
                            kind="received", folder_id="inbox")


def _too_big(s: EmailState) -> Record:
    return s.messages.first(lambda m: m["size_bytes"] > SEND_LIMIT_BYTES, folder_id="inbox")


def _label(s: EmailState, name: str) -> str:
    return s.labels.first(name=name)["id"]


def _new_files(rng: random.Random, s: EmailState) -> list[Record]:
    """One or two small files to attach (synthesis values)."""
    return [{"filename": name, "size_bytes": size} for name, size in rng.sample(NEW_FILES, rng.randint(1, 2))]


def _outside_addresses(rng: random.Random, s: EmailState) -> list[str]:
    """One or two addresses outside the company (synthesis values)."""
    return [f"{first}.{last}@{rng.choice(OUTSIDE_DOMAINS)}".lower()
            for first, last in (fake.person(rng) for _ in range(rng.randint(1, 2)))]


# -- how users ask: wording that depends on a call's values -----------------------------------------


def _search_asks(a: Record) -> tuple[str, ...]:
    if a.get("unread_only"):
        return ("show the unread messages in {folder_id}", "list the latest {limit} unread emails in {folder_id}",
                "check {folder_id} for unread mail")
    if a.get("has_attachment") is not None:
        files, some = ("with", "") if a["has_attachment"] else ("without", "no ")
        return (f"find the messages {files} attachments that carry {{label_id}}",
                f"show the emails filed under {{label_id}} {files} attachments",
                f"list everything tagged with {{label_id}} that has {some}files attached")
    if a.get("sender"):
        return ("find emails from {sender} between {after} and {before}",
                "show what {sender} sent me from {after} to {before}",
                "search for messages from {sender} since {after}")
    return ("search my mail for {query}", "find emails about {query}", "look for messages mentioning {query}",
            "find messages with \"{subject}\" in the subject")


def _move_asks(a: Record) -> tuple[str, ...]:
    """Filing away, discarding, reporting spam and restoring read differently from a plain move."""
    folder = a.get("folder_id")
    if folder == "archive":
        return ("archive {message_ids}", "get {message_ids} out of my inbox and into the archive",
                "move {message_ids} to {folder_id}")
    if folder == "trash":
        return ("trash {message_ids}", "delete {message_ids}", "throw {message_ids} in the trash")
    if folder == "spam":
        return ("mark {message_ids} as spam", "report {message_ids} as junk", "send {message_ids} to spam")
    if folder == "inbox":
        return ("restore {message_ids} to the inbox", "move {message_ids} back to my inbox",
                "bring {message_ids} back to {folder_id}")
    return ("move {message_ids} to {folder_id}", "put {message_ids} in {folder_id}",
            "file {message_ids} into {folder_id}",
            "shift {message_ids} over to {folder_id}")


# -- server and tools -----------------------------------------------------------------------------

server = Server(
    "email",
    domain="productivity",
    description="An e-mail mailbox: folders, threads, search, drafts, sending, replies and forwards, labels, "
    "attachments, read state and a storage quota.",
    state=EmailState,
    seed=build_mailbox,
    options=EmailOptions,
)


@server.tool(
    answers=("unread", "total"),
    read_only=True,
    reads=["folder", "message", "label"],
    examples=[{}],
    asks=("list my folders", "show my folders and labels with their unread counts",
          "check how much mailbox storage I'm using", "give me an overview of my mailbox"),
)
def list_folders(state: EmailState) -> dict:
    """The mailbox's folders (system: inbox, sent, drafts, archive, trash, spam; then custom ones)
    with their message and unread counts, the labels, and storage used against the quota."""
    folders = []
    for folder in state.folders.all():
        inside = state.messages.where(folder_id=folder["id"])
        folders.append({**folder, "total": len(inside), "unread": sum(not m["read"] for m in inside)})
    return {"account": _me(state), "folders": folders, "labels": state.labels.all(), "storage": _storage(state)}


@server.tool(
    answers=("from_name", "date"),
    read_only=True,
    reads=["message", "folder", "label"],
    errors=["FOLDER_NOT_FOUND", "LABEL_NOT_FOUND", "INVALID_DATE_RANGE", "BAD_DATE"],
    examples=[
        {"query": "invoice"},
        {"folder_id": "inbox", "unread_only": True, "limit": 5},
        lambda s: {"label_id": _label(s, "Finance"), "has_attachment": True},
        lambda s: {"sender": _coworker(s).split("@")[0], "after": (s.today() - dt.timedelta(days=7)).isoformat(),
                   "before": s.today().isoformat()},
    ],
    asks=_search_asks,
    values={"query": lambda rng, s: rng.choice(MAIL_SEARCHES), "subject": lambda rng, s: rng.choice(SUBJECT_SEARCHES)},
)
def search_messages(
    state: EmailState,
    query: Annotated[str | None, Field(min_length=2, max_length=100, description="Words in the subject, body or "
                                                                                 "sender (case-insensitive).")] = None,
    sender: Annotated[str | None, Field(min_length=2, max_length=120, description="Part of the sender's name or "
                                                                                  "address.")] = None,
    recipient: Annotated[str | None, Field(min_length=2, max_length=120, description="Part of a to or cc "
                                                                                     "address.")] = None,
    subject: Annotated[str | None, Field(min_length=2, max_length=200, description="Part of the subject.")] = None,
    label_id: Annotated[str | None, ref("label", "Only messages with this label (lbl_...).")] = None,
    folder_id: Annotated[str | None, ref("folder", "Only this folder: inbox, sent, drafts, archive, trash, spam "
                                                   "or a custom folder id. Trash and spam are left out otherwise.")]
    = None,
    has_attachment: Annotated[bool | None, Field(description="true: only messages with attachments; false: only "
                                                             "those without.")] = None,
    unread_only: Annotated[bool, Field(description="Only unread messages.")] = False,
    after: Annotated[str | None, Field(pattern=ISO_DATE, description="Sent on or after this day, "
                                                                                   "YYYY-MM-DD.")] = None,
    before: Annotated[str | None, Field(pattern=ISO_DATE, description="Sent on or before this day, "
                                                                                    "YYYY-MM-DD.")] = None,
    limit: Limit = 20,
    offset: Offset = 0,
) -> dict:
    """Search messages, newest first, by any mix of filters. Returns one page of message summaries
    (id, thread_id, folder, sender, recipients, subject, snippet, date, read, labels, attachment
    count), the total and next_offset. Fails with FOLDER_NOT_FOUND, LABEL_NOT_FOUND, BAD_DATE or
    INVALID_DATE_RANGE (after is later than before)."""
    if label_id:
        state.labels.get(label_id)
    first = parse_date(after, "after").isoformat() if after else "0000-00-00"
    last = parse_date(before, "before").isoformat() if before else "9999-99-99"
    require(first <= last, "after is later than before", reason="INVALID_DATE_RANGE", error=InvalidArgument)
    if folder_id:
        candidates = state.messages.where(folder_id=state.folders.get(folder_id)["id"])
    else:
        candidates = state.messages.where(lambda m: m["folder_id"] not in ("trash", "spam"))
    words = (query or "").lower().split()

    def wanted(m: Record) -> bool:
        text = f"{m['subject']} {m['body']} {m['from_name']} {m['from_email']}".lower()
        return (all(w in text for w in words)
                and (not sender or sender.lower() in f"{m['from_name']} {m['from_email']}".lower())
                and (not recipient or any(recipient.lower() in a for a in m["to"] + m["cc"]))
                and (not subject or subject.lower() in m["subject"].lower())
                and (not label_id or label_id in m["label_ids"])
                and (has_attachment is None or bool(m["attachment_count"]) == has_attachment)
                and (not unread_only or not m["read"])
                and first <= m["date"][:10] <= last)

    matches = sorted((m for m in candidates if wanted(m)), key=lambda m: (m["date"], m["id"]), reverse=True)
    page = paginate(matches, limit=limit, offset=offset, key="messages")
    return {**page, "messages": [_summary(state, m) for m in page["messages"]]}


@server.tool(
    answers=("message_count", "unread"),
    read_only=True,
    reads=["thread", "message", "label"],
    errors=["THREAD_NOT_FOUND"],
    examples=[lambda s: {"thread_id": s.threads.first()["id"]}],
    asks=("show me {thread_id}", "open {thread_id} with every message in it", "read through {thread_id}",
          "pull up all the messages in {thread_id}"),
)
def get_thread(
    state: EmailState,
    thread_id: Annotated[str, ref("thread", "Id of the thread (thr_...), from a message's thread_id.")],
) -> dict:
    """A conversation: its subject, participants, unread count and every message (oldest first,
    with body and folder; messages in the trash included). Fails with THREAD_NOT_FOUND."""
    thread = state.threads.get(thread_id)
    messages = sorted(state.messages.where(thread_id=thread_id), key=lambda m: (m["date"], m["id"]))
    names = {_me(state)["email"]: _me(state)["name"], **{m["from_email"]: m["from_name"] for m in messages}}
    people: dict[str, str | None] = {}
    for m in messages:
        for address in [m["from_email"], *m["to"], *m["cc"]]:
            people.setdefault(address, names.get(address))
    return {
        **thread,
        "participants": [{"email": e, "name": n} for e, n in people.items()],
        "message_count": len(messages),
        "unread": sum(not m["read"] for m in messages),
        "messages": [{**_summary(state, m), "body": m["body"]} for m in messages],
    }


@server.tool(
    answers=("from_name", "date", "body"),
    read_only=True,
    reads=["message", "attachment", "label"],
    errors=["MESSAGE_NOT_FOUND"],
    examples=[lambda s: {"message_id": s.messages.first(kind="received")["id"]}],
    asks=("open {message_id}", "show me {message_id} in full", "read {message_id} to me", "pull up {message_id}"),
)
def get_message(state: EmailState, message_id: MessageId) -> dict:
    """One message in full: sender, to, cc, bcc, subject, body, date, folder, read state, labels,
    attachment metadata and size. Reading does not mark it read (use mark_read). Fails with
    MESSAGE_NOT_FOUND."""
    return _full(state, state.messages.get(message_id))


@server.tool(
    answers=("mime_type", "size_bytes"),
    read_only=True,
    reads=["message", "attachment"],
    errors=["MESSAGE_NOT_FOUND"],
    examples=[lambda s: {"message_id": s.messages.first(lambda m: m["attachment_count"] > 0)["id"]}],
    asks=("list the attachments of {message_id}", "show what files are attached to {message_id}",
          "check whether the attachments on {message_id} are small enough to forward",
          "show me the attachments in {message_id} and their sizes"),
)
def list_attachments(state: EmailState, message_id: MessageId) -> dict:
    """The attachments of a message: id, file name, MIME type and size, their total, and whether
    they fit the 25 MiB limit for forwarding (forwardable). Fails with MESSAGE_NOT_FOUND."""
    state.messages.get(message_id)
    files = state.attachments.where(message_id=message_id)
    total = sum(f["size_bytes"] for f in files)
    return {"message_id": message_id, "attachments": files, "total_bytes": total,
            "send_limit_bytes": SEND_LIMIT_BYTES, "forwardable": total <= SEND_LIMIT_BYTES}


@server.tool(
    produces=["message", "thread", "attachment"],
    errors=["INVALID_RECIPIENT", "TOO_MANY_RECIPIENTS", "ATTACHMENT_TOO_LARGE", "QUOTA_EXCEEDED"],
    examples=[
        lambda s: {"to": [_coworker(s)], "subject": "Offsite agenda", "body": "First pass at the agenda, comments "
                   "welcome.", "attachments": [{"filename": "agenda.pdf", "size_bytes": 120_000}]},
        {"subject": "Ideas", "body": "Half-baked thoughts for later."},
    ],
    asks=("draft a message saying \"{body}\"", "start a draft to {to} with the subject \"{subject}\": {body}",
          "save a draft \"{subject}\" that says \"{body}\"",
          "write a draft to {to}, subject \"{subject}\", body \"{body}\", and attach {attachments}",
          "put together a draft for later, \"{subject}\": {body}"),
    values={"subject": lambda rng, s: rng.choice(NEW_SUBJECTS), "body": lambda rng, s: rng.choice(NEW_BODIES),
            "attachments": _new_files},
)
def create_draft(
    state: EmailState,
    body: Body,
    to: Recipients = None,
    cc: Recipients = None,
    bcc: Recipients = None,
    subject: Annotated[str, Field(max_length=200, description="Subject line.")] = "",
    attachments: Attachments = None,
) -> dict:
    """Save a new draft in the drafts folder (recipients may come later). Returns the draft; send
    it with send_draft. Fails with INVALID_RECIPIENT (naming the address), TOO_MANY_RECIPIENTS,
    ATTACHMENT_TOO_LARGE (over 25 MiB in total) or QUOTA_EXCEEDED (the mailbox is full)."""
    rcpt = _addresses(to, cc, bcc)
    files = _files(attachments)
    _require_storage(state, _size(body, files))
    thread = state.threads.insert({"subject": subject or "(no subject)", "created_at": iso_datetime(state.now())})
    draft = _store_message(state, thread["id"], "drafts", "draft", _me(state), **rcpt, subject=subject, body=body,
                           files=files, when=state.now(), read=True, label_ids=[])
    return _full(state, draft)


@server.tool(
    idempotent=True,  # the same edit again changes nothing
    destructive=True,  # new attachments replace (delete) the old ones
    reads=["message", "attachment"],
    mutates=["message", "attachment"],
    errors=["MESSAGE_NOT_FOUND", "NOT_A_DRAFT", "DRAFT_ALREADY_SENT", "MESSAGE_IN_TRASH", "NOTHING_TO_UPDATE",
            "INVALID_RECIPIENT", "TOO_MANY_RECIPIENTS", "ATTACHMENT_TOO_LARGE", "QUOTA_EXCEEDED"],
    examples=[
        lambda s: {"draft_id": s.messages.first(kind="draft")["id"], "body": "Updated notes: staging is fixed.",
                   "cc": [_coworker(s, 1)]},
        lambda s: {"draft_id": s.messages.first(kind="draft")["id"], "attachments": []},
    ],
    asks=lambda a: ("remove the attachments from {draft_id}", "strip the files off {draft_id}",
                    "take the attachments out of {draft_id}") if a.get("attachments") == [] else (
                    "change the text of {draft_id} to \"{body}\"", "rewrite {draft_id} to say \"{body}\" and cc {cc}",
                    "add {cc} in cc on {draft_id}", "update {draft_id}: subject \"{subject}\", text \"{body}\"",
                    "address {draft_id} to {to}"),
    values={"subject": lambda rng, s: rng.choice(NEW_SUBJECTS), "body": lambda rng, s: rng.choice(NEW_BODIES)},
)
def update_draft(
    state: EmailState,
    draft_id: DraftId,
    to: Recipients = None,
    cc: Recipients = None,
    bcc: Recipients = None,
    subject: Annotated[str | None, Field(max_length=200, description="New subject line.")] = None,
    body: Annotated[str | None, Field(max_length=20_000, description="New plain-text body.")] = None,
    attachments: Attachments = None,
) -> dict:
    """Change a draft: each field given replaces the old one (attachments replace the whole list;
    [] removes them). Returns the draft. Fails with DRAFT_ALREADY_SENT, NOT_A_DRAFT (a received or
    sent message), MESSAGE_IN_TRASH (a discarded draft), NOTHING_TO_UPDATE, INVALID_RECIPIENT,
    TOO_MANY_RECIPIENTS, ATTACHMENT_TOO_LARGE or QUOTA_EXCEEDED."""
    draft = _draft(state, draft_id)
    given = {k: v for k, v in (("to", to), ("cc", cc), ("bcc", bcc), ("subject", subject), ("body", body))
             if v is not None}
    require(bool(given) or attachments is not None, "give at least one field to change", reason="NOTHING_TO_UPDATE",
            error=InvalidArgument)
    rcpt = _addresses(to, cc, bcc)
    changes = {**{k: v for k, v in given.items() if k in ("subject", "body")},
               **{k: rcpt[k] for k in ("to", "cc", "bcc") if k in given}}
    current = state.attachments.where(message_id=draft_id)
    old_files = [{k: f[k] for k in ("filename", "mime_type", "size_bytes")} for f in current]
    files = _files(attachments) if attachments is not None else old_files
    size = _size(changes.get("body", draft["body"]), files)
    if size > draft["size_bytes"]:
        _require_storage(state, size - draft["size_bytes"])
    if files != old_files:
        for f in current:
            state.attachments.delete(f["id"])
        for f in files:
            state.attachments.insert({"message_id": draft_id, **f, "forwarded_from": None})
    if "subject" in changes:
        state.threads.update(draft["thread_id"], subject=changes["subject"] or "(no subject)")
    updated = {**draft, **changes, "attachment_count": len(files), "size_bytes": size}
    if updated != draft:
        _resize(state, size - draft["size_bytes"])
        updated = state.messages.update(draft_id, **{**updated, "date": iso_datetime(state.now())})
    return _full(state, updated)


@server.tool(
    idempotent=True,  # a repeat is refused with DRAFT_ALREADY_SENT
    reads=["message"],
    mutates=["message"],
    errors=["MESSAGE_NOT_FOUND", "NOT_A_DRAFT", "DRAFT_ALREADY_SENT", "MESSAGE_IN_TRASH", "NO_RECIPIENTS"],
    examples=[lambda s: {"draft_id": s.messages.first(lambda m: bool(m["to"]), kind="draft")["id"]}],
    asks=("send {draft_id}", "send off {draft_id} as it is", "go ahead and send {draft_id}", "ship {draft_id} now"),
)
def send_draft(state: EmailState, draft_id: DraftId) -> dict:
    """Send a draft as it is; it moves to the sent folder and keeps its id. Returns the sent
    message. Fails with NO_RECIPIENTS (add some with update_draft), DRAFT_ALREADY_SENT, NOT_A_DRAFT
    or MESSAGE_IN_TRASH."""
    draft = _draft(state, draft_id)
    require(bool(draft["to"] or draft["cc"] or draft["bcc"]), "the draft has no recipients; add them with "
            "update_draft", reason="NO_RECIPIENTS")
    sent = state.messages.update(draft_id, kind="sent", folder_id="sent", sent_from_draft=True,
                                 date=iso_datetime(state.now()))
    return _full(state, sent)


@server.tool(
    produces=["message", "thread", "attachment"],
    errors=["INVALID_RECIPIENT", "TOO_MANY_RECIPIENTS", "ATTACHMENT_TOO_LARGE", "QUOTA_EXCEEDED"],
    examples=[lambda s: {"to": [_coworker(s)], "cc": [_coworker(s, 1)], "subject": "Slides for Thursday",
                         "body": "Here are the slides.", "attachments": [{"filename": "slides.pdf",
                                                                           "mime_type": "application/pdf",
                                                                           "size_bytes": 2_400_000}]}],
    asks=("email {to} with the subject \"{subject}\": {body}",
          "send {to} a message titled \"{subject}\" saying \"{body}\"",
          "write to {to}, subject \"{subject}\", and say \"{body}\"",
          "send \"{subject}\" to {to} with {cc} in cc: {body}",
          "send \"{subject}\" to {to}, cc {cc}, with {attachments} attached: {body}",
          "mail {to} \"{subject}\" with {attachments} attached, saying \"{body}\""),
    values={"subject": lambda rng, s: rng.choice(NEW_SUBJECTS), "body": lambda rng, s: rng.choice(NEW_BODIES),
            "attachments": _new_files},
)
def send_message(
    state: EmailState,
    to: Annotated[list[str], Field(min_length=1, max_length=MAX_RECIPIENTS, description="E-mail addresses of the "
                                                                                        "main recipients.")],
    subject: Annotated[str, Field(max_length=200, description="Subject line.")],
    body: Body,
    cc: Recipients = None,
    bcc: Recipients = None,
    attachments: Attachments = None,
) -> dict:
    """Compose and send a new message in a new thread; a copy is kept in sent. Returns it. Fails
    with INVALID_RECIPIENT (naming the address), TOO_MANY_RECIPIENTS, ATTACHMENT_TOO_LARGE (over
    25 MiB) or QUOTA_EXCEEDED (the mailbox is full: delete_forever from the trash frees space)."""
    rcpt = _addresses(to, cc, bcc)
    files = _files(attachments)
    _require_storage(state, _size(body, files))
    thread = state.threads.insert({"subject": subject or "(no subject)", "created_at": iso_datetime(state.now())})
    sent = _store_message(state, thread["id"], "sent", "sent", _me(state), **rcpt, subject=subject, body=body,
                          files=files, when=state.now(), read=True, label_ids=[])
    return _full(state, sent)


@server.tool(
    reads=["message"],
    produces=["message"],
    errors=["MESSAGE_NOT_FOUND", "MESSAGE_IN_TRASH", "MESSAGE_IS_DRAFT", "NO_RECIPIENTS", "QUOTA_EXCEEDED"],
    examples=[
        lambda s: {"message_id": s.messages.first(kind="received", folder_id="inbox")["id"],
                   "body": "Thanks, I'll take a look today."},
        lambda s: {"message_id": s.messages.first(lambda m: len(m["to"]) + len(m["cc"]) > 1, kind="received")["id"],
                   "body": "Sounds good to me.", "reply_all": True},
    ],
    asks=lambda a: ("reply all to {message_id}: \"{body}\"", "answer everyone on {message_id} with \"{body}\"",
                    "send a reply-all to {message_id} saying \"{body}\"") if a.get("reply_all") else (
                    "reply to {message_id} with \"{body}\"", "answer {message_id}: {body}",
                    "write back to the sender of {message_id} saying \"{body}\"",
                    "respond to {message_id}, \"{body}\""),
    values={"body": lambda rng, s: rng.choice(REPLY_BODIES)},
)
def reply_to_message(
    state: EmailState,
    message_id: MessageId,
    body: Body,
    reply_all: Annotated[bool, Field(description="Also reply to everyone else on to and cc.")] = False,
) -> dict:
    """Reply in the same thread, quoting the original: to its sender (to your original recipients
    when you sent it); reply_all adds everyone else on it except you. Returns the sent reply.
    Fails with MESSAGE_IN_TRASH (restore it with move_messages first), MESSAGE_IS_DRAFT,
    NO_RECIPIENTS (nobody but you to reply to) or QUOTA_EXCEEDED."""
    original = _original(state, message_id)
    me = _me(state)["email"]
    if original["from_email"] == me:
        to, cc = list(original["to"]), list(original["cc"]) if reply_all else []
    else:
        to = [original["from_email"]]
        others = [a for a in original["to"] + original["cc"] if a not in (me, original["from_email"])]
        cc = list(dict.fromkeys(others)) if reply_all else []
    require(bool(to), "the original has nobody to reply to", reason="NO_RECIPIENTS")
    quoted = "\n".join("> " + line for line in original["body"].splitlines())
    text = f"{body}\n\nOn {original['date']}, {original['from_name']} <{original['from_email']}> wrote:\n{quoted}"
    _require_storage(state, _size(text, []))
    reply = _store_message(state, original["thread_id"], "sent", "sent", _me(state), to=to, cc=cc, bcc=[],
                           subject=_prefixed("Re:", original["subject"]), body=text, files=[], when=state.now(),
                           read=True, label_ids=[], in_reply_to=message_id)
    return _full(state, reply)


@server.tool(
    reads=["message", "attachment"],
    produces=["message", "attachment"],
    errors=["MESSAGE_NOT_FOUND", "MESSAGE_IN_TRASH", "MESSAGE_IS_DRAFT", "INVALID_RECIPIENT", "TOO_MANY_RECIPIENTS",
            "ATTACHMENT_TOO_LARGE", "QUOTA_EXCEEDED"],
    examples=[
        lambda s: {"message_id": _forwardable(s)["id"], "to": ["ana.silva@partner.example"],
                   "note": "FYI, see the attachments."},
        lambda s: {"message_id": _too_big(s)["id"], "to": [_coworker(s)], "include_attachments": False},
    ],
    asks=lambda a: ("forward {message_id} to {to} without the attachments",
                    "send {message_id} on to {to}, leave the files out",
                    "forward just the text of {message_id} to {to}") if a.get("include_attachments") is False else (
                    "forward {message_id} to {to}", "send {message_id} on to {to} with the note \"{note}\"",
                    "forward {message_id} to {to} and cc {cc}", "pass {message_id} along to {to}: {note}"),
    values={"to": _outside_addresses, "note": lambda rng, s: rng.choice(FORWARD_NOTES)},
)
def forward_message(
    state: EmailState,
    message_id: MessageId,
    to: Annotated[list[str], Field(min_length=1, max_length=MAX_RECIPIENTS, description="E-mail addresses to "
                                                                                        "forward to.")],
    note: Annotated[str, Field(max_length=20_000, description="Your note above the forwarded message.")] = "",
    cc: Recipients = None,
    include_attachments: Annotated[bool, Field(description="Carry the original's attachments along (they must fit "
                                                           "the 25 MiB limit).")] = True,
) -> dict:
    """Forward a message, with its attachments unless include_attachments is false, in the same
    thread. Returns the sent forward. Fails with ATTACHMENT_TOO_LARGE (the attachments pass 25 MiB:
    forward without them), MESSAGE_IN_TRASH, MESSAGE_IS_DRAFT, INVALID_RECIPIENT, TOO_MANY_RECIPIENTS
    or QUOTA_EXCEEDED."""
    original = _original(state, message_id)
    rcpt = _addresses(to, cc, None)
    files = []
    if include_attachments:
        files = [{"filename": f["filename"], "mime_type": f["mime_type"], "size_bytes": f["size_bytes"],
                  "forwarded_from": f["id"]} for f in state.attachments.where(message_id=message_id)]
        _require_sendable(files)
    header = (f"---------- Forwarded message ----------\nFrom: {original['from_name']} <{original['from_email']}>\n"
              f"Date: {original['date']}\nSubject: {original['subject']}\nTo: {', '.join(original['to'])}\n\n")
    text = f"{note}\n\n{header}{original['body']}" if note else header + original["body"]
    _require_storage(state, _size(text, files))
    forward = _store_message(state, original["thread_id"], "sent", "sent", _me(state), **rcpt,
                             subject=_prefixed("Fwd:", original["subject"]), body=text, files=files,
                             when=state.now(), read=True, label_ids=[], forwarded_from=message_id)
    return _full(state, forward)


@server.tool(
    produces=["label"],
    errors=["LABEL_EXISTS", "LABEL_LIMIT_REACHED"],
    examples=[{"name": "Clients", "color": "teal"}],
    asks=("create a label called {name}", "make a new {color} label named {name}", "add a label {name}",
          "set up a {name} label in {color}"),
    values={"name": lambda rng, s: rng.choice(LABEL_NAMES), "color": lambda rng, s: rng.choice(LABEL_COLORS)},
)
def create_label(
    state: EmailState,
    name: Annotated[str, Field(min_length=1, max_length=40, description="Name of the new label.")],
    color: Annotated[LabelColor, Field(description="Display color.")] = "gray",
) -> dict:
    """Create a label to tag messages with (apply_label). Returns it. Fails with LABEL_EXISTS (a
    label or folder of that name exists, case-insensitive) or LABEL_LIMIT_REACHED (25 labels)."""
    wanted = name.strip().lower()
    clash = state.labels.first(lambda lbl: lbl["name"].lower() == wanted)
    folder = state.folders.first(lambda f: f["name"].lower() == wanted)
    if clash or folder:
        raise Conflict(f"{name!r} is taken by a {'label' if clash else 'folder'}", reason="LABEL_EXISTS",
                       label_id=clash["id"] if clash else None)
    require(len(state.labels) < MAX_LABELS, f"a mailbox has at most {MAX_LABELS} labels",
            reason="LABEL_LIMIT_REACHED", error=ResourceExhausted, limit=MAX_LABELS)
    return state.labels.insert({"name": name.strip(), "color": color})


@server.tool(
    idempotent=True,  # messages that carry the label already are left alone
    reads=["label", "message"],
    mutates=["message"],
    errors=["LABEL_NOT_FOUND", "MESSAGE_NOT_FOUND"],
    examples=[lambda s: {"label_id": _label(s, "Follow up"),
                         "message_ids": [m["id"] for m in s.messages.where(folder_id="inbox")[:2]]}],
    asks=("label {message_ids} with {label_id}", "put {label_id} on {message_ids}", "add {label_id} to {message_ids}",
          "file {message_ids} under {label_id}"),
)
def apply_label(state: EmailState, label_id: LabelId, message_ids: MessageIds) -> dict:
    """Tag messages with a label. Returns the ids newly labelled and those that had it already.
    Fails with LABEL_NOT_FOUND or MESSAGE_NOT_FOUND (nothing is labelled then)."""
    label = state.labels.get(label_id)
    messages = _messages(state, message_ids)
    applied = [m["id"] for m in messages if label_id not in m["label_ids"]]
    for m in messages:
        if m["id"] in applied:
            state.messages.update(m["id"], label_ids=[*m["label_ids"], label_id])
    return {"label": label, "applied": applied, "already_labelled": [m["id"] for m in messages if m["id"] not in
                                                                     applied]}


@server.tool(
    idempotent=True,  # a repeat is refused with LABEL_NOT_APPLIED
    reads=["label", "message"],
    mutates=["message"],
    errors=["LABEL_NOT_FOUND", "MESSAGE_NOT_FOUND", "LABEL_NOT_APPLIED"],
    examples=[lambda s: {"label_id": _label(s, "Finance"),
                         "message_ids": [s.messages.first(lambda m: _label(s, "Finance") in m["label_ids"])["id"]]}],
    asks=("take {label_id} off {message_ids}", "remove {label_id} from {message_ids}", "unlabel {message_ids}",
          "strip {label_id} from {message_ids}"),
)
def remove_label(state: EmailState, label_id: LabelId, message_ids: MessageIds) -> dict:
    """Take a label off messages. Returns the ids it was removed from and those that did not carry
    it. Fails with LABEL_NOT_APPLIED when none of them carries it, LABEL_NOT_FOUND or
    MESSAGE_NOT_FOUND."""
    label = state.labels.get(label_id)
    messages = _messages(state, message_ids)
    removed = [m["id"] for m in messages if label_id in m["label_ids"]]
    require(bool(removed), f"none of the messages is labelled {label['name']!r}", reason="LABEL_NOT_APPLIED")
    for m in messages:
        if m["id"] in removed:
            state.messages.update(m["id"], label_ids=[i for i in m["label_ids"] if i != label_id])
    return {"label": label, "removed": removed, "not_labelled": [m["id"] for m in messages if m["id"] not in removed]}


@server.tool(
    idempotent=True,  # messages already in the folder stay where they are
    reads=["message", "folder"],
    mutates=["message"],
    errors=["FOLDER_NOT_FOUND", "MESSAGE_NOT_FOUND", "CANNOT_MOVE_TO_DRAFTS", "CANNOT_MOVE_TO_SENT",
            "CANNOT_MOVE_DRAFT"],
    examples=[
        lambda s: {"message_ids": [s.messages.first(kind="received", folder_id="inbox")["id"]], "folder_id": "archive"},
        lambda s: {"message_ids": [m["id"] for m in s.messages.where(folder_id="inbox")[-2:]],
                   "folder_id": s.folders.first(name="Projects")["id"]},
        lambda s: {"message_ids": [s.messages.first(folder_id="trash")["id"]], "folder_id": "inbox"},
    ],
    asks=_move_asks,
)
def move_messages(
    state: EmailState,
    message_ids: MessageIds,
    folder_id: Annotated[str, ref("folder", "Where to: inbox, archive, trash, spam or a custom folder id (fld_...), "
                                            "from list_folders.")],
) -> dict:
    """Move messages to a folder: trash discards them (restore by moving them back; only
    delete_forever frees their storage), archive files them away. Returns the ids moved and those
    already there. Fails with CANNOT_MOVE_TO_DRAFTS, CANNOT_MOVE_TO_SENT (both are filled only by
    composing and sending), CANNOT_MOVE_DRAFT (a draft can only go to the trash) or
    FOLDER_NOT_FOUND."""
    folder = state.folders.get(folder_id)
    require(folder_id != "drafts", "messages cannot be moved into drafts; use create_draft",
            reason="CANNOT_MOVE_TO_DRAFTS", error=InvalidArgument)
    require(folder_id != "sent", "only sending puts messages in sent", reason="CANNOT_MOVE_TO_SENT",
            error=InvalidArgument)
    messages = _messages(state, message_ids)
    for m in messages:
        require(m["kind"] != "draft" or folder_id == "trash" or m["folder_id"] == folder_id,
                f"draft {m['id']} can only be discarded to the trash", reason="CANNOT_MOVE_DRAFT", message_id=m["id"])
    moved = [m["id"] for m in messages if m["folder_id"] != folder_id]
    for m in messages:
        if m["id"] in moved:
            came_from = m["folder_id"] if folder_id == "trash" else None
            state.messages.update(m["id"], folder_id=folder_id, trashed_from=came_from)
    return {"folder": {"id": folder["id"], "name": folder["name"]}, "moved": moved,
            "already_there": [m["id"] for m in messages if m["id"] not in moved]}


@server.tool(
    idempotent=True,
    reads=["message"],
    mutates=["message"],
    errors=["MESSAGE_NOT_FOUND"],
    examples=[
        lambda s: {"message_ids": [m["id"] for m in s.messages.where(lambda m: not m["read"])[:3]]},
        lambda s: {"message_ids": [s.messages.first(read=True, kind="received")["id"]], "read": False},
    ],
    asks=lambda a: ("mark {message_ids} as unread", "flag {message_ids} unread again",
                    "set {message_ids} back to unread") if a.get("read") is False else (
                    "mark {message_ids} as read", "mark {message_ids} read", "clear the unread flag on {message_ids}"),
)
def mark_read(
    state: EmailState,
    message_ids: MessageIds,
    read: Annotated[bool, Field(description="true marks them read, false unread.")] = True,
) -> dict:
    """Mark messages read or unread. Returns the ids that changed and the inbox's unread count.
    Fails with MESSAGE_NOT_FOUND (nothing changes then)."""
    messages = _messages(state, message_ids)
    changed = [m["id"] for m in messages if m["read"] != read]
    for message_id in changed:
        state.messages.update(message_id, read=read)
    unread = len(state.messages.where(lambda m: not m["read"], folder_id="inbox"))
    return {"changed": changed, "read": read, "inbox_unread": unread}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing (MESSAGE_NOT_FOUND) and changes nothing
    reads=["message", "attachment"],
    mutates=["message", "attachment", "thread"],
    errors=["MESSAGE_NOT_FOUND", "MESSAGE_NOT_IN_TRASH"],
    examples=[lambda s: {"message_ids": [m["id"] for m in s.messages.where(folder_id="trash")]}],
    asks=("permanently delete {message_ids}", "empty {message_ids} out of the trash for good",
          "delete {message_ids} forever to free up space", "purge {message_ids} from the trash"),
)
def delete_forever(state: EmailState, message_ids: MessageIds) -> dict:
    """Permanently delete messages that are in the trash, with their attachments, freeing their
    storage (a thread left empty disappears). Returns the bytes freed and the storage now. Fails
    with MESSAGE_NOT_IN_TRASH (move them to the trash first) or MESSAGE_NOT_FOUND."""
    messages = _messages(state, message_ids)
    outside = [m["id"] for m in messages if m["folder_id"] != "trash"]
    require(not outside, f"only messages in the trash can be deleted for good: {', '.join(outside)}",
            reason="MESSAGE_NOT_IN_TRASH", message_ids=outside)
    freed = 0
    for m in messages:
        for f in state.attachments.where(message_id=m["id"]):
            state.attachments.delete(f["id"])
        state.messages.delete(m["id"])
        freed += m["size_bytes"]
        if not state.messages.where(thread_id=m["thread_id"]):
            state.threads.delete(m["thread_id"])
    _resize(state, -freed)
    return {"deleted": [m["id"] for m in messages], "freed_bytes": freed, "storage": _storage(state)}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
