"""The email server's own rules: search, threads, drafts, recipients, attachment and storage
limits, replies and forwards, labels, folders and deletion. What every server guarantees is the
conformance kit's (tests/servers/test_conformance.py)."""

from __future__ import annotations

from typing import Any

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_core.toolkit import State
from prove_servers import email
from prove_servers.email import EmailOptions, server

TOOLS = server.tools
MIB = 1024 * 1024
h = ServerHarness.fixture(server)


def me(h) -> str:
    return h.state.get_var("me")["email"]


def first(h, predicate=None, **match: Any) -> dict:
    found = h.state.messages.first(predicate, **match)
    assert found is not None, match
    return found


def subject_of(h, start: str) -> dict:
    return first(h, lambda m: m["subject"].startswith(start))


def storage(h) -> dict:
    return h.ok("list_folders")["storage"]


def assert_storage_adds_up(state: State) -> None:
    """used_bytes is the sum of the stored messages; each is headers + body + its attachments."""
    for m in state.messages:
        files = state.attachments.where(message_id=m["id"])
        assert m["size_bytes"] == email.HEADER_BYTES + len(m["body"].encode()) + sum(f["size_bytes"] for f in files)
        assert m["attachment_count"] == len(files)
    assert state.get_var("used_bytes") == sum(m["size_bytes"] for m in state.messages)


# -- declared surface and seed --------------------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "list_folders", "search_messages", "get_thread", "get_message", "list_attachments", "create_draft",
        "update_draft", "send_draft", "send_message", "reply_to_message", "forward_message", "create_label",
        "apply_label", "remove_label", "move_messages", "mark_read", "delete_forever",
    }
    assert servers_registered_by(email) == [server] and (server.name, server.domain) == ("email", "productivity")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_folders", "search_messages", "get_thread", "get_message", "list_attachments"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"delete_forever", "update_draft"}
    assert not TOOLS["send_message"].spec.annotations.idempotent
    assert not TOOLS["reply_to_message"].spec.annotations.idempotent
    assert TOOLS["forward_message"].spec.entity_params() == {"message_id": "message"}
    assert TOOLS["move_messages"].spec.entity_params() == {"message_ids": "message", "folder_id": "folder"}
    for name, tool in TOOLS.items():
        if not tool.spec.annotations.read_only:
            assert tool.spec.produces or tool.spec.mutates, f"{name} writes but declares no entity"


def test_attachment_objects_have_a_closed_schema(h):
    items = TOOLS["send_message"].spec.parameters["properties"]["attachments"]["items"]
    assert items["required"] == ["filename", "size_bytes"] and items["additionalProperties"] is False
    base = {"to": ["a.b@example.com"], "subject": "x", "body": "y"}
    for bad in ([{"filename": "a.pdf"}], [{"filename": "a.pdf", "size_bytes": 10, "url": "x"}],
                [{"filename": "a.pdf", "size_bytes": 0}]):
        h.fails("send_message", "SCHEMA_VIOLATION", **base, attachments=bad)


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_storage_adds_up_after_every_example(h):
    for tool, index in h.examples():
        fresh = h.session()
        fresh.ok(tool, **fresh.example_args(tool, index))
        assert_storage_adds_up(fresh.state)


def test_ids_are_seeded_too(h):
    other = ServerHarness(server, seed=1)
    assert {m["id"] for m in h.state.messages}.isdisjoint(m["id"] for m in other.state.messages)


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_seed_has_every_scenario_the_tools_need(seed):
    h = ServerHarness(server, seed=seed)
    folders = h.ok("list_folders")
    counts = {f["name"]: f["total"] for f in folders["folders"]}
    assert set(counts) == {"Inbox", "Sent", "Drafts", "Archive", "Trash", "Spam", "Receipts", "Projects"}
    assert all(counts.values())
    unread = {f["id"]: f["unread"] for f in folders["folders"]}
    assert unread["inbox"] > 0 and unread["archive"] == 0  # archived mail has been read
    assert {label["name"] for label in folders["labels"]} == {"Finance", "Travel", "Follow up", "Hiring"}
    state = h.state
    assert len(state.threads) == 30
    threads = [state.messages.where(thread_id=t["id"]) for t in state.threads]
    assert max(len({m["from_email"] for m in ms} | {a for m in ms for a in m["to"] + m["cc"]}) for ms in threads) >= 4
    assert state.messages.where(lambda m: m["size_bytes"] > email.SEND_LIMIT_BYTES, folder_id="inbox")
    drafts = state.messages.where(kind="draft")
    assert any(d["to"] for d in drafts) and any(not d["to"] for d in drafts)
    assert len(state.attachments) > 10
    assert 0 < folders["storage"]["free_bytes"] <= email.STORAGE_HEADROOM_BYTES + MIB  # nearly full
    assert max(m["date"] for m in state.messages) < "2026-03-02T09:00:00Z"  # all before the session clock
    assert_storage_adds_up(state)


def test_a_ten_times_larger_seed_works_and_options_are_validated():
    big = ServerHarness(server, options=EmailOptions(threads=300))
    assert len(big.state.threads) == 300
    big.run_examples()
    with pytest.raises(ValueError):
        EmailOptions(threads=0)


# -- reading and searching ------------------------------------------------------------------------


def test_search_filters_and_pages(h):
    invoices = h.ok("search_messages", query="invoice due", limit=100)["messages"]
    assert invoices and all("invoice" in m["subject"].lower() for m in invoices)
    finance = first(h, lambda m: m["label_ids"])["label_ids"][0]
    labelled = h.ok("search_messages", label_id=finance, limit=100)
    assert labelled["total"] == len(h.state.messages.where(lambda m: finance in m["label_ids"]))
    with_files = h.ok("search_messages", has_attachment=True, limit=100)["messages"]
    assert with_files and all(m["attachment_count"] for m in with_files)
    unread = h.ok("search_messages", folder_id="inbox", unread_only=True, limit=100)["messages"]
    assert unread and all(not m["read"] and m["folder_id"] == "inbox" for m in unread)
    boss = first(h, lambda m: m["subject"].startswith("Candidate feedback"))
    sent_by = h.ok("search_messages", sender=boss["from_name"].split()[1].lower(), limit=100)["messages"]
    assert boss["id"] in [m["id"] for m in sent_by]
    assert all(me(h) in m["to"] + m["cc"] for m in h.ok("search_messages", recipient=me(h),
                                                        limit=100)["messages"])
    dated = h.ok("search_messages", after="2026-02-25", before="2026-02-28", limit=100)["messages"]
    assert dated and all("2026-02-25" <= m["date"][:10] <= "2026-02-28" for m in dated)
    everything = h.ok("search_messages", limit=100)
    assert not {m["folder_id"] for m in everything["messages"]} & {"trash", "spam"}
    dates = [m["date"] for m in everything["messages"]]
    assert dates == sorted(dates, reverse=True)
    assert h.ok("search_messages", folder_id="trash")["total"] == 1
    seen, offset = [], 0
    while offset is not None:
        page = h.ok("search_messages", limit=7, offset=offset)
        seen += [m["id"] for m in page["messages"]]
        offset = page["next_offset"]
    assert seen == [m["id"] for m in everything["messages"]]
    h.fails("search_messages", "INVALID_DATE_RANGE", after="2026-03-01", before="2026-02-01")
    h.fails("search_messages", "BAD_DATE", after="2026-02-30")
    h.fails("search_messages", "FOLDER_NOT_FOUND", folder_id="fld_missing")
    h.fails("search_messages", "LABEL_NOT_FOUND", label_id="lbl_missing")


def test_threads_and_messages(h):
    kickoff = subject_of(h, "Re: ")
    thread = h.ok("get_thread", thread_id=kickoff["thread_id"])
    dates = [m["date"] for m in thread["messages"]]
    assert thread["message_count"] == len(dates) > 1 and dates == sorted(dates)
    assert {p["email"] for p in thread["participants"]} >= {kickoff["from_email"], *kickoff["to"]}
    full = h.ok("get_message", message_id=kickoff["id"])
    assert full["body"] and full["read"] == kickoff["read"]  # reading does not mark it read
    files = h.ok("list_attachments", message_id=first(h, lambda m: m["attachment_count"] > 2)["id"])
    assert len(files["attachments"]) == 3 and files["total_bytes"] == sum(f["size_bytes"]
                                                                           for f in files["attachments"])
    assert files["forwardable"]
    big = first(h, lambda m: m["size_bytes"] > email.SEND_LIMIT_BYTES, folder_id="inbox")
    assert not h.ok("list_attachments", message_id=big["id"])["forwardable"]
    h.fails("get_thread", "THREAD_NOT_FOUND", thread_id="thr_missing")
    h.fails("get_message", "MESSAGE_NOT_FOUND", message_id="msg_missing")


# -- drafts and sending ---------------------------------------------------------------------------


def test_draft_lifecycle(h):
    draft = first(h, lambda m: not m["to"], kind="draft")
    h.fails("send_draft", "NO_RECIPIENTS", draft_id=draft["id"])
    h.fails("update_draft", "NOTHING_TO_UPDATE", draft_id=draft["id"])
    error = h.fails("update_draft", "INVALID_RECIPIENT", "INVALID_ARGUMENT", draft_id=draft["id"],
                    to=["ok@example.com"], cc=["nobody@"])
    assert error["details"] == {"address": "nobody@", "field": "cc"}
    updated = h.ok("update_draft", draft_id=draft["id"], to=[" Vendor.Rep@Example.com "], subject="Next steps",
                   attachments=[{"filename": "quote.pdf", "size_bytes": 50_000}])
    assert updated["to"] == ["vendor.rep@example.com"] and updated["attachments"][0]["mime_type"] == "application/pdf"
    assert h.ok("get_thread", thread_id=draft["thread_id"])["subject"] == "Next steps"
    sent = h.ok("send_draft", draft_id=draft["id"])
    assert (sent["id"], sent["folder_id"], sent["kind"]) == (draft["id"], "sent", "sent")
    error = h.fails("send_draft", "DRAFT_ALREADY_SENT", draft_id=draft["id"])
    assert error["details"]["sent_at"] == sent["date"]
    h.fails("update_draft", "DRAFT_ALREADY_SENT", draft_id=draft["id"], body="too late")
    received = first(h, kind="received")
    h.fails("send_draft", "NOT_A_DRAFT", draft_id=received["id"])
    h.fails("update_draft", "NOT_A_DRAFT", draft_id=received["id"], body="x")
    other = first(h, kind="draft")
    h.ok("move_messages", message_ids=[other["id"]], folder_id="trash")  # discard it
    h.fails("send_draft", "MESSAGE_IN_TRASH", draft_id=other["id"])
    assert_storage_adds_up(h.state)


def test_draft_attachments_are_replaced_and_counted(h):
    draft = h.ok("create_draft", body="See attached.", attachments=[
        {"filename": "a.png", "size_bytes": 1_000_000}, {"filename": "b.xlsx", "size_bytes": 2_000_000}])
    assert draft["attachment_count"] == 2 and draft["to"] == [] and draft["subject"] == ""
    used = storage(h)["used_bytes"]
    smaller = h.ok("update_draft", draft_id=draft["id"], attachments=[{"filename": "a.png",
                                                                              "size_bytes": 1_000_000}])
    assert smaller["attachment_count"] == 1 and storage(h)["used_bytes"] == used - 2_000_000
    bare = h.ok("update_draft", draft_id=draft["id"], attachments=[])
    assert bare["attachments"] == [] and bare["size_bytes"] == email.HEADER_BYTES + len("See attached.")
    h.fails("update_draft", "ATTACHMENT_TOO_LARGE", draft_id=draft["id"],
            attachments=[{"filename": "huge.zip", "size_bytes": 26 * MIB}])
    assert_storage_adds_up(h.state)


def test_recipients_are_validated(h):
    base = {"subject": "Hi", "body": "Hello"}
    error = h.fails("send_message", "INVALID_RECIPIENT", to=["ana@example.com", "ana at example.com"], **base)
    assert error["details"]["address"] == "ana at example.com"
    h.fails("create_draft", "INVALID_RECIPIENT", bcc=["@example.com"], body="x")
    h.fails("forward_message", "INVALID_RECIPIENT", message_id=first(h, kind="received")["id"],
            to=["bob@localhost"])
    crowd = [f"p{n}@example.com" for n in range(60)]
    h.fails("send_message", "TOO_MANY_RECIPIENTS", "RESOURCE_EXHAUSTED", to=crowd,
            cc=[f"c{n}@example.com" for n in range(41)], **base)
    h.fails("send_message", "INVALID_RECIPIENT", to=[" "], **base)  # blank is not an address
    sent = h.ok("send_message", to=["Ana@Example.com", "ana@example.com"], **base)
    assert sent["to"] == ["ana@example.com"] and sent["folder_id"] == "sent"


def test_attachment_size_limit(h):
    files = [{"filename": "part1.zip", "size_bytes": 15 * MIB}, {"filename": "part2.zip", "size_bytes": 11 * MIB}]
    error = h.fails("send_message", "ATTACHMENT_TOO_LARGE", to=["a.b@example.com"], subject="x", body="y",
                    attachments=files)
    assert error["details"] == {"total_bytes": 26 * MIB, "limit_bytes": 25 * MIB}
    h.ok("send_message", to=["a.b@example.com"], subject="x", body="y", attachments=files[:1])
    raw = first(h, lambda m: m["size_bytes"] > email.SEND_LIMIT_BYTES, folder_id="inbox")
    h.fails("forward_message", "ATTACHMENT_TOO_LARGE", message_id=raw["id"], to=["a.b@example.com"])
    bare = h.ok("forward_message", message_id=raw["id"], to=["a.b@example.com"], include_attachments=False)
    assert bare["attachments"] == [] and bare["body"].endswith(raw["body"])


def test_quota_fills_up_and_deleting_from_trash_frees_it(h):
    photos = subject_of(h, "Site survey photos")  # about 16 MiB of attachments
    sends = 0
    for _ in range(5):  # bounded: a broken quota must fail the test, not hang it
        result = h.call("forward_message", {"message_id": photos["id"], "to": ["team@example.com"]})
        if result.is_error:
            break
        sends += 1
    assert sends == 2 and result.error["reason"] == "QUOTA_EXCEEDED" and result.code == "RESOURCE_EXHAUSTED"
    assert result.error["details"]["needed_bytes"] > result.error["details"]["free_bytes"]
    h.fails("send_message", "QUOTA_EXCEEDED", to=["a@example.com"], subject="x", body="y",
            attachments=[{"filename": "x.zip", "size_bytes": 20 * MIB}])
    h.fails("create_draft", "QUOTA_EXCEEDED", body="y", attachments=[{"filename": "x.zip",
                                                                             "size_bytes": 20 * MIB}])
    h.ok("send_message", to=["a@example.com"], subject="small", body="still fits")
    trash = [m["id"] for m in h.state.messages.where(folder_id="trash")]
    before = storage(h)
    freed = h.ok("delete_forever", message_ids=trash)
    assert freed["freed_bytes"] > 25 * MIB
    assert freed["storage"]["used_bytes"] == before["used_bytes"] - freed["freed_bytes"]
    h.ok("forward_message", message_id=photos["id"], to=["team@example.com"])
    assert_storage_adds_up(h.state)


# -- replies and forwards -------------------------------------------------------------------------


def test_reply_and_reply_all_address_the_right_people(h):
    you = me(h)
    original = first(h, lambda m: len(set(m["to"] + m["cc"]) - {you}) >= 2, kind="received")
    reply = h.ok("reply_to_message", message_id=original["id"], body="Thanks!")
    assert (reply["to"], reply["cc"]) == ([original["from_email"]], [])
    assert reply["thread_id"] == original["thread_id"] and reply["in_reply_to"] == original["id"]
    subject = original["subject"]
    assert reply["subject"] == (subject if subject.lower().startswith("re:") else f"Re: {subject}")
    assert "Re: Re:" not in reply["subject"]
    assert "wrote:\n> " in reply["body"]
    everyone = h.ok("reply_to_message", message_id=original["id"], body="Thanks all!", reply_all=True)
    assert everyone["to"] == [original["from_email"]]
    assert set(everyone["cc"]) == set(original["to"] + original["cc"]) - {you, original["from_email"]}
    mine = first(h, kind="sent")
    back = h.ok("reply_to_message", message_id=mine["id"], body="One more thing", reply_all=True)
    assert (back["to"], back["cc"]) == (mine["to"], mine["cc"])
    in_thread = [m["id"] for m in h.ok("get_thread", thread_id=original["thread_id"])["messages"]]
    assert in_thread.index(reply["id"]) + 1 == in_thread.index(everyone["id"])


def test_forward_keeps_the_attachments(h):
    original = first(h, lambda m: m["attachment_count"] > 1, kind="received")
    forward = h.ok("forward_message", message_id=original["id"], to=["ana@partner.example"], note="FYI")
    originals = h.ok("list_attachments", message_id=original["id"])["attachments"]
    copies = h.ok("list_attachments", message_id=forward["id"])["attachments"]
    assert [(c["filename"], c["size_bytes"], c["forwarded_from"]) for c in copies] == [
        (o["filename"], o["size_bytes"], o["id"]) for o in originals]
    assert {c["id"] for c in copies}.isdisjoint(o["id"] for o in originals)
    assert forward["subject"].startswith("Fwd: ") and forward["thread_id"] == original["thread_id"]
    assert forward["body"].startswith("FYI\n\n---------- Forwarded message") and forward["forwarded_from"] == \
        original["id"]


def test_trash_and_drafts_cannot_be_answered(h):
    message = first(h, kind="received", folder_id="inbox")
    h.ok("move_messages", message_ids=[message["id"]], folder_id="trash")
    h.fails("reply_to_message", "MESSAGE_IN_TRASH", message_id=message["id"], body="x")
    h.fails("forward_message", "MESSAGE_IN_TRASH", message_id=message["id"], to=["a@example.com"])
    restored = h.ok("move_messages", message_ids=[message["id"]], folder_id="inbox")
    assert restored["moved"] == [message["id"]] and h.state.messages.get(message["id"])["trashed_from"] is None
    h.ok("reply_to_message", message_id=message["id"], body="x")
    draft = first(h, kind="draft")
    h.fails("reply_to_message", "MESSAGE_IS_DRAFT", message_id=draft["id"], body="x")
    h.fails("forward_message", "MESSAGE_IS_DRAFT", message_id=draft["id"], to=["a@example.com"])


# -- organizing: labels, folders, read state, deletion --------------------------------------------


def test_labels(h):
    h.fails("create_label", "LABEL_EXISTS", name=" FINANCE ")
    error = h.fails("create_label", "LABEL_EXISTS", "CONFLICT", name="inbox")
    assert "folder" in error["message"]
    label = h.ok("create_label", name="Clients", color="teal")
    ids = [m["id"] for m in h.state.messages.where(folder_id="inbox")[:3]]
    h.fails("remove_label", "LABEL_NOT_APPLIED", label_id=label["id"], message_ids=ids)
    assert h.ok("apply_label", label_id=label["id"], message_ids=ids[:2])["applied"] == ids[:2]
    again = h.ok("apply_label", label_id=label["id"], message_ids=ids)
    assert (again["applied"], again["already_labelled"]) == (ids[2:], ids[:2])
    found = h.ok("search_messages", label_id=label["id"])["messages"]
    assert {m["id"] for m in found} == set(ids) and all("Clients" in m["labels"] for m in found)
    removed = h.ok("remove_label", label_id=label["id"], message_ids=[ids[0], first(h, kind="sent")["id"]])
    assert len(removed["removed"]) == 1 and len(removed["not_labelled"]) == 1
    h.fails("apply_label", "MESSAGE_NOT_FOUND", label_id=label["id"], message_ids=[ids[0], "msg_missing"])
    h.fails("apply_label", "LABEL_NOT_FOUND", label_id="lbl_missing", message_ids=ids)
    for n in range(email.MAX_LABELS - 5):
        h.ok("create_label", name=f"Tag {n}")
    assert h.fails("create_label", "LABEL_LIMIT_REACHED", name="One more")["code"] == "RESOURCE_EXHAUSTED"


def test_moving_messages_between_folders(h):
    message = first(h, kind="received", folder_id="inbox")
    draft = first(h, kind="draft")
    ids = [message["id"]]
    h.fails("move_messages", "CANNOT_MOVE_TO_DRAFTS", message_ids=ids, folder_id="drafts")
    h.fails("move_messages", "CANNOT_MOVE_TO_SENT", message_ids=ids, folder_id="sent")
    error = h.fails("move_messages", "CANNOT_MOVE_DRAFT", message_ids=[message["id"], draft["id"]],
                    folder_id="archive")
    assert error["details"]["message_id"] == draft["id"]
    h.fails("move_messages", "FOLDER_NOT_FOUND", message_ids=ids, folder_id="fld_missing")
    projects = next(f for f in h.ok("list_folders")["folders"] if f["name"] == "Projects")
    moved = h.ok("move_messages", message_ids=ids, folder_id=projects["id"])
    assert moved["moved"] == ids
    assert h.ok("move_messages", message_ids=ids, folder_id=projects["id"])["already_there"] == ids
    assert ids[0] in [m["id"] for m in h.ok("search_messages", folder_id=projects["id"])["messages"]]
    h.ok("move_messages", message_ids=ids, folder_id="trash")
    assert h.state.messages.get(ids[0])["trashed_from"] == projects["id"]
    assert ids[0] not in [m["id"] for m in h.ok("search_messages", limit=100)["messages"]]


def test_read_state(h):
    unread = [m["id"] for m in h.state.messages.where(lambda m: not m["read"], folder_id="inbox")]
    result = h.ok("mark_read", message_ids=unread)
    assert result["changed"] == unread and result["inbox_unread"] == 0
    assert h.ok("mark_read", message_ids=unread)["changed"] == []
    assert h.ok("mark_read", message_ids=unread[:1], read=False)["inbox_unread"] == 1
    h.fails("mark_read", "MESSAGE_NOT_FOUND", message_ids=["msg_missing"])


def test_delete_forever_only_from_trash(h):
    message = first(h, kind="received", folder_id="inbox")
    error = h.fails("delete_forever", "MESSAGE_NOT_IN_TRASH", message_ids=[message["id"]])
    assert error["details"]["message_ids"] == [message["id"]]
    alone = subject_of(h, "Your password expires")  # a thread of one message
    h.ok("move_messages", message_ids=[alone["id"]], folder_id="trash")
    result = h.ok("delete_forever", message_ids=[alone["id"]])
    assert result["freed_bytes"] == alone["size_bytes"]
    h.fails("get_thread", "THREAD_NOT_FOUND", thread_id=alone["thread_id"])
    h.fails("delete_forever", "MESSAGE_NOT_FOUND", message_ids=[alone["id"]])
    assert_storage_adds_up(h.state)


# -- a whole flow ---------------------------------------------------------------------------------


def test_ids_flow_from_search_to_reply_forward_and_filing(h):
    hit = h.ok("search_messages", query="site survey", has_attachment=True, limit=1)["messages"][0]
    thread = h.ok("get_thread", thread_id=hit["thread_id"])
    latest = thread["messages"][-1]
    files = h.ok("list_attachments", message_id=latest["id"])
    assert files["forwardable"]
    reply = h.ok("reply_to_message", message_id=latest["id"], body="Got them, thanks!")
    forward = h.ok("forward_message", message_id=latest["id"], to=["facilities@partner.example"],
                   note="Photos of the dock, as discussed.")
    label = h.ok("create_label", name="Site visits")
    h.ok("apply_label", label_id=label["id"], message_ids=[latest["id"], reply["id"], forward["id"]])
    h.ok("mark_read", message_ids=[latest["id"]])
    h.ok("move_messages", message_ids=[latest["id"]], folder_id="archive")
    after = h.ok("get_thread", thread_id=hit["thread_id"])
    assert [m["id"] for m in after["messages"]][-2:] == [reply["id"], forward["id"]] and after["unread"] == 0
    assert {m["folder_id"] for m in after["messages"]} == {"archive", "sent"}
    labelled = h.ok("search_messages", label_id=label["id"])
    assert {m["id"] for m in labelled["messages"]} == {reply["id"], forward["id"], latest["id"]}
    assert_storage_adds_up(h.state)
