"""The email server: its tool surface, seed, business rules and typed failures."""

from __future__ import annotations

import json
from typing import Any

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import State, ToolError
from prove_servers import email
from prove_servers.email import EmailOptions, server

TOOLS = server.tools
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def rt() -> ServerRuntime:
    return ServerRuntime(server)


@pytest.fixture
def sid(rt: ServerRuntime) -> str:
    return rt.new_session()


def ok(rt: ServerRuntime, sid: str, tool: str, **args: Any) -> dict:
    result = rt.call(sid, tool, args)
    assert not result.is_error, result.error
    return result.data


def fails(rt: ServerRuntime, sid: str, tool: str, reason: str, **args: Any) -> dict:
    """The call fails with ``reason``, the tool declares it, and the state is left as it was —
    by the tool itself, which checks before it writes, not only by the executor's rollback."""
    before = rt.state_hash(sid)
    probe = State.from_snapshot(rt.state(sid).snapshot())
    with pytest.raises(ToolError):
        TOOLS[tool].fn(probe, **TOOLS[tool].validate(dict(args)))
    assert probe.state_hash() == before, f"{tool} wrote before failing with {reason}"
    result = rt.call(sid, tool, args)
    assert result.is_error, f"{tool} succeeded: {result.data}"
    assert result.error["reason"] == reason, result.error
    assert reason in TOOLS[tool].spec.errors, f"{tool} does not declare {reason}"
    assert rt.state_hash(sid) == before
    return result.error


def example_args(rt: ServerRuntime, sid: str, example: Any) -> dict:
    return dict(example(rt.state(sid)) if callable(example) else example)


ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


def me(rt: ServerRuntime, sid: str) -> str:
    return rt.state(sid).get_var("me")["email"]


def first(rt: ServerRuntime, sid: str, predicate=None, **match: Any) -> dict:
    found = rt.state(sid).messages.first(predicate, **match)
    assert found is not None, match
    return found


def subject_of(rt: ServerRuntime, sid: str, start: str) -> dict:
    return first(rt, sid, lambda m: m["subject"].startswith(start))


def storage(rt: ServerRuntime, sid: str) -> dict:
    return ok(rt, sid, "list_folders")["storage"]


def assert_storage_adds_up(state: State) -> None:
    """used_bytes is the sum of the stored messages; each is headers + body + its attachments."""
    for m in state.messages:
        files = state.attachments.where(message_id=m["id"])
        assert m["size_bytes"] == email.HEADER_BYTES + len(m["body"].encode()) + sum(f["size_bytes"] for f in files)
        assert m["attachment_count"] == len(files)
    assert state.get_var("used_bytes") == sum(m["size_bytes"] for m in state.messages)


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_17_tools_each_described_with_examples():
    assert len(TOOLS) == 17
    assert set(TOOLS) == {
        "list_folders", "search_messages", "get_thread", "get_message", "list_attachments", "create_draft",
        "update_draft", "send_draft", "send_message", "reply_to_message", "forward_message", "create_label",
        "apply_label", "remove_label", "move_messages", "mark_read", "delete_forever",
    }
    assert (server.name, server.domain) == ("email", "productivity")
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_match_what_tools_do():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {"list_folders", "search_messages", "get_thread", "get_message", "list_attachments"}
    assert {n for n, t in TOOLS.items() if t.spec.annotations.destructive} == {"delete_forever"}
    assert not TOOLS["send_message"].spec.annotations.idempotent
    assert not TOOLS["reply_to_message"].spec.annotations.idempotent
    assert TOOLS["forward_message"].spec.entity_params() == {"message_id": "message"}
    assert TOOLS["move_messages"].spec.entity_params() == {"message_ids": "message", "folder_id": "folder"}
    for name, tool in TOOLS.items():
        if not tool.spec.annotations.read_only:
            assert tool.spec.produces or tool.spec.mutates, f"{name} writes but declares no entity"


def test_attachment_objects_have_a_closed_schema(rt, sid):
    items = TOOLS["send_message"].spec.parameters["properties"]["attachments"]["items"]
    assert items["required"] == ["filename", "size_bytes"] and items["additionalProperties"] is False
    base = {"to": ["a.b@example.com"], "subject": "x", "body": "y"}
    for bad in ([{"filename": "a.pdf"}], [{"filename": "a.pdf", "size_bytes": 10, "url": "x"}],
                [{"filename": "a.pdf", "size_bytes": 0}]):
        assert rt.call(sid, "send_message", {**base, "attachments": bad}).error["reason"] == "SCHEMA_VIOLATION"


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_on_a_fresh_session(rt, tool, index):
    sid = rt.new_session()
    data = ok(rt, sid, tool, **example_args(rt, sid, TOOLS[tool].examples[index]))
    assert json.loads(json.dumps(data)) == data  # JSON-native values only
    assert_storage_adds_up(rt.state(sid))


def test_read_only_tools_never_change_state_and_writers_do(rt):
    for name, tool in TOOLS.items():
        for example in tool.examples:
            sid = rt.new_session()
            args = example_args(rt, sid, example)
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
            rt.call(sid, name, args)  # may be refused (already sent, not applied), but must change nothing
            assert rt.state_hash(sid) == once, name


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    first_rt, again, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert first_rt.state_hash("a") == again.state_hash("b")
    assert other.state_hash("a") != first_rt.state_hash("a")
    assert {m["id"] for m in first_rt.state("a").messages}.isdisjoint(m["id"] for m in other.state("a").messages)


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_seed_has_every_scenario_the_tools_need(seed):
    rt = ServerRuntime(server, seed=seed)
    sid = rt.new_session()
    folders = ok(rt, sid, "list_folders")
    counts = {f["name"]: f["total"] for f in folders["folders"]}
    assert set(counts) == {"Inbox", "Sent", "Drafts", "Archive", "Trash", "Spam", "Receipts", "Projects"}
    assert all(counts.values())
    unread = {f["id"]: f["unread"] for f in folders["folders"]}
    assert unread["inbox"] > 0 and unread["archive"] == 0  # archived mail has been read
    assert {label["name"] for label in folders["labels"]} == {"Finance", "Travel", "Follow up", "Hiring"}
    state = rt.state(sid)
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


def test_a_ten_times_larger_seed_works():
    big = ServerRuntime(server, options=EmailOptions(threads=300))
    assert len(big.state("x").threads) == 300
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        EmailOptions(threads=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(email)
    registered: list[Any] = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- reading and searching ------------------------------------------------------------------------


def test_search_filters_and_pages(rt, sid):
    invoices = ok(rt, sid, "search_messages", query="invoice due", limit=100)["messages"]
    assert invoices and all("invoice" in m["subject"].lower() for m in invoices)
    finance = first(rt, sid, lambda m: m["label_ids"])["label_ids"][0]
    labelled = ok(rt, sid, "search_messages", label_id=finance, limit=100)
    assert labelled["total"] == len(rt.state(sid).messages.where(lambda m: finance in m["label_ids"]))
    with_files = ok(rt, sid, "search_messages", has_attachment=True, limit=100)["messages"]
    assert with_files and all(m["attachment_count"] for m in with_files)
    unread = ok(rt, sid, "search_messages", folder_id="inbox", unread_only=True, limit=100)["messages"]
    assert unread and all(not m["read"] and m["folder_id"] == "inbox" for m in unread)
    boss = first(rt, sid, lambda m: m["subject"].startswith("Candidate feedback"))
    sent_by = ok(rt, sid, "search_messages", sender=boss["from_name"].split()[1].lower(), limit=100)["messages"]
    assert boss["id"] in [m["id"] for m in sent_by]
    assert all(me(rt, sid) in m["to"] + m["cc"] for m in ok(rt, sid, "search_messages", recipient=me(rt, sid),
                                                             limit=100)["messages"])
    dated = ok(rt, sid, "search_messages", after="2026-02-25", before="2026-02-28", limit=100)["messages"]
    assert dated and all("2026-02-25" <= m["date"][:10] <= "2026-02-28" for m in dated)
    everything = ok(rt, sid, "search_messages", limit=100)
    assert not {m["folder_id"] for m in everything["messages"]} & {"trash", "spam"}
    dates = [m["date"] for m in everything["messages"]]
    assert dates == sorted(dates, reverse=True)
    assert ok(rt, sid, "search_messages", folder_id="trash")["total"] == 1
    seen, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "search_messages", limit=7, offset=offset)
        seen += [m["id"] for m in page["messages"]]
        offset = page["next_offset"]
    assert seen == [m["id"] for m in everything["messages"]]
    fails(rt, sid, "search_messages", "INVALID_DATE_RANGE", after="2026-03-01", before="2026-02-01")
    fails(rt, sid, "search_messages", "BAD_DATE", after="2026-02-30")
    fails(rt, sid, "search_messages", "FOLDER_NOT_FOUND", folder_id="fld_missing")
    fails(rt, sid, "search_messages", "LABEL_NOT_FOUND", label_id="lbl_missing")


def test_threads_and_messages(rt, sid):
    kickoff = subject_of(rt, sid, "Re: ")
    thread = ok(rt, sid, "get_thread", thread_id=kickoff["thread_id"])
    dates = [m["date"] for m in thread["messages"]]
    assert thread["message_count"] == len(dates) > 1 and dates == sorted(dates)
    assert {p["email"] for p in thread["participants"]} >= {kickoff["from_email"], *kickoff["to"]}
    full = ok(rt, sid, "get_message", message_id=kickoff["id"])
    assert full["body"] and full["read"] == kickoff["read"]  # reading does not mark it read
    files = ok(rt, sid, "list_attachments", message_id=first(rt, sid, lambda m: m["attachment_count"] > 2)["id"])
    assert len(files["attachments"]) == 3 and files["total_bytes"] == sum(f["size_bytes"]
                                                                           for f in files["attachments"])
    assert files["forwardable"]
    big = first(rt, sid, lambda m: m["size_bytes"] > email.SEND_LIMIT_BYTES, folder_id="inbox")
    assert not ok(rt, sid, "list_attachments", message_id=big["id"])["forwardable"]
    fails(rt, sid, "get_thread", "THREAD_NOT_FOUND", thread_id="thr_missing")
    fails(rt, sid, "get_message", "MESSAGE_NOT_FOUND", message_id="msg_missing")


# -- drafts and sending ---------------------------------------------------------------------------


def test_draft_lifecycle(rt, sid):
    draft = first(rt, sid, lambda m: not m["to"], kind="draft")
    fails(rt, sid, "send_draft", "NO_RECIPIENTS", draft_id=draft["id"])
    fails(rt, sid, "update_draft", "NOTHING_TO_UPDATE", draft_id=draft["id"])
    error = fails(rt, sid, "update_draft", "INVALID_RECIPIENT", draft_id=draft["id"], to=["ok@example.com"],
                  cc=["nobody@"])
    assert error["code"] == "INVALID_ARGUMENT" and error["details"] == {"address": "nobody@", "field": "cc"}
    updated = ok(rt, sid, "update_draft", draft_id=draft["id"], to=[" Vendor.Rep@Example.com "], subject="Next steps",
                 attachments=[{"filename": "quote.pdf", "size_bytes": 50_000}])
    assert updated["to"] == ["vendor.rep@example.com"] and updated["attachments"][0]["mime_type"] == "application/pdf"
    assert ok(rt, sid, "get_thread", thread_id=draft["thread_id"])["subject"] == "Next steps"
    sent = ok(rt, sid, "send_draft", draft_id=draft["id"])
    assert (sent["id"], sent["folder_id"], sent["kind"]) == (draft["id"], "sent", "sent")
    error = fails(rt, sid, "send_draft", "DRAFT_ALREADY_SENT", draft_id=draft["id"])
    assert error["details"]["sent_at"] == sent["date"]
    fails(rt, sid, "update_draft", "DRAFT_ALREADY_SENT", draft_id=draft["id"], body="too late")
    received = first(rt, sid, kind="received")
    fails(rt, sid, "send_draft", "NOT_A_DRAFT", draft_id=received["id"])
    fails(rt, sid, "update_draft", "NOT_A_DRAFT", draft_id=received["id"], body="x")
    other = first(rt, sid, kind="draft")
    ok(rt, sid, "move_messages", message_ids=[other["id"]], folder_id="trash")  # discard it
    fails(rt, sid, "send_draft", "MESSAGE_IN_TRASH", draft_id=other["id"])
    assert_storage_adds_up(rt.state(sid))


def test_draft_attachments_are_replaced_and_counted(rt, sid):
    draft = ok(rt, sid, "create_draft", body="See attached.", attachments=[
        {"filename": "a.png", "size_bytes": 1_000_000}, {"filename": "b.xlsx", "size_bytes": 2_000_000}])
    assert draft["attachment_count"] == 2 and draft["to"] == [] and draft["subject"] == ""
    used = storage(rt, sid)["used_bytes"]
    smaller = ok(rt, sid, "update_draft", draft_id=draft["id"], attachments=[{"filename": "a.png",
                                                                              "size_bytes": 1_000_000}])
    assert smaller["attachment_count"] == 1 and storage(rt, sid)["used_bytes"] == used - 2_000_000
    bare = ok(rt, sid, "update_draft", draft_id=draft["id"], attachments=[])
    assert bare["attachments"] == [] and bare["size_bytes"] == email.HEADER_BYTES + len("See attached.")
    fails(rt, sid, "update_draft", "ATTACHMENT_TOO_LARGE", draft_id=draft["id"],
          attachments=[{"filename": "huge.zip", "size_bytes": 26 * MIB}])
    assert_storage_adds_up(rt.state(sid))


def test_recipients_are_validated(rt, sid):
    base = {"subject": "Hi", "body": "Hello"}
    error = fails(rt, sid, "send_message", "INVALID_RECIPIENT", to=["ana@example.com", "ana at example.com"], **base)
    assert error["details"]["address"] == "ana at example.com"
    fails(rt, sid, "create_draft", "INVALID_RECIPIENT", bcc=["@example.com"], body="x")
    fails(rt, sid, "forward_message", "INVALID_RECIPIENT", message_id=first(rt, sid, kind="received")["id"],
          to=["bob@localhost"])
    crowd = [f"p{n}@example.com" for n in range(60)]
    error = fails(rt, sid, "send_message", "TOO_MANY_RECIPIENTS", to=crowd, cc=[f"c{n}@example.com" for n in range(41)],
                  **base)
    assert error["code"] == "RESOURCE_EXHAUSTED"
    fails(rt, sid, "send_message", "INVALID_RECIPIENT", to=[" "], **base)  # blank is not an address
    sent = ok(rt, sid, "send_message", to=["Ana@Example.com", "ana@example.com"], **base)
    assert sent["to"] == ["ana@example.com"] and sent["folder_id"] == "sent"


def test_attachment_size_limit(rt, sid):
    files = [{"filename": "part1.zip", "size_bytes": 15 * MIB}, {"filename": "part2.zip", "size_bytes": 11 * MIB}]
    error = fails(rt, sid, "send_message", "ATTACHMENT_TOO_LARGE", to=["a.b@example.com"], subject="x", body="y",
                  attachments=files)
    assert error["details"] == {"total_bytes": 26 * MIB, "limit_bytes": 25 * MIB}
    ok(rt, sid, "send_message", to=["a.b@example.com"], subject="x", body="y", attachments=files[:1])
    raw = first(rt, sid, lambda m: m["size_bytes"] > email.SEND_LIMIT_BYTES, folder_id="inbox")
    fails(rt, sid, "forward_message", "ATTACHMENT_TOO_LARGE", message_id=raw["id"], to=["a.b@example.com"])
    bare = ok(rt, sid, "forward_message", message_id=raw["id"], to=["a.b@example.com"], include_attachments=False)
    assert bare["attachments"] == [] and bare["body"].endswith(raw["body"])


def test_quota_fills_up_and_deleting_from_trash_frees_it(rt, sid):
    photos = subject_of(rt, sid, "Site survey photos")  # about 16 MiB of attachments
    sends = 0
    for _ in range(5):  # bounded: a broken quota must fail the test, not hang it
        result = rt.call(sid, "forward_message", {"message_id": photos["id"], "to": ["team@example.com"]})
        if result.is_error:
            break
        sends += 1
    assert sends == 2 and result.error["reason"] == "QUOTA_EXCEEDED" and result.code == "RESOURCE_EXHAUSTED"
    assert result.error["details"]["needed_bytes"] > result.error["details"]["free_bytes"]
    fails(rt, sid, "send_message", "QUOTA_EXCEEDED", to=["a@example.com"], subject="x", body="y",
          attachments=[{"filename": "x.zip", "size_bytes": 20 * MIB}])
    fails(rt, sid, "create_draft", "QUOTA_EXCEEDED", body="y", attachments=[{"filename": "x.zip",
                                                                             "size_bytes": 20 * MIB}])
    ok(rt, sid, "send_message", to=["a@example.com"], subject="small", body="still fits")
    trash = [m["id"] for m in rt.state(sid).messages.where(folder_id="trash")]
    before = storage(rt, sid)
    freed = ok(rt, sid, "delete_forever", message_ids=trash)
    assert freed["freed_bytes"] > 25 * MIB
    assert freed["storage"]["used_bytes"] == before["used_bytes"] - freed["freed_bytes"]
    ok(rt, sid, "forward_message", message_id=photos["id"], to=["team@example.com"])
    assert_storage_adds_up(rt.state(sid))


# -- replies and forwards -------------------------------------------------------------------------


def test_reply_and_reply_all_address_the_right_people(rt, sid):
    you = me(rt, sid)
    original = first(rt, sid, lambda m: len(set(m["to"] + m["cc"]) - {you}) >= 2, kind="received")
    reply = ok(rt, sid, "reply_to_message", message_id=original["id"], body="Thanks!")
    assert (reply["to"], reply["cc"]) == ([original["from_email"]], [])
    assert reply["thread_id"] == original["thread_id"] and reply["in_reply_to"] == original["id"]
    assert reply["subject"] == email._prefixed("Re:", original["subject"]) and "Re: Re:" not in reply["subject"]
    assert "wrote:\n> " in reply["body"]
    everyone = ok(rt, sid, "reply_to_message", message_id=original["id"], body="Thanks all!", reply_all=True)
    assert everyone["to"] == [original["from_email"]]
    assert set(everyone["cc"]) == set(original["to"] + original["cc"]) - {you, original["from_email"]}
    mine = first(rt, sid, kind="sent")
    back = ok(rt, sid, "reply_to_message", message_id=mine["id"], body="One more thing", reply_all=True)
    assert (back["to"], back["cc"]) == (mine["to"], mine["cc"])
    in_thread = [m["id"] for m in ok(rt, sid, "get_thread", thread_id=original["thread_id"])["messages"]]
    assert in_thread.index(reply["id"]) + 1 == in_thread.index(everyone["id"])


def test_forward_keeps_the_attachments(rt, sid):
    original = first(rt, sid, lambda m: m["attachment_count"] > 1, kind="received")
    forward = ok(rt, sid, "forward_message", message_id=original["id"], to=["ana@partner.example"], note="FYI")
    originals = ok(rt, sid, "list_attachments", message_id=original["id"])["attachments"]
    copies = ok(rt, sid, "list_attachments", message_id=forward["id"])["attachments"]
    assert [(c["filename"], c["size_bytes"], c["forwarded_from"]) for c in copies] == [
        (o["filename"], o["size_bytes"], o["id"]) for o in originals]
    assert {c["id"] for c in copies}.isdisjoint(o["id"] for o in originals)
    assert forward["subject"].startswith("Fwd: ") and forward["thread_id"] == original["thread_id"]
    assert forward["body"].startswith("FYI\n\n---------- Forwarded message") and forward["forwarded_from"] == \
        original["id"]


def test_trash_and_drafts_cannot_be_answered(rt, sid):
    message = first(rt, sid, kind="received", folder_id="inbox")
    ok(rt, sid, "move_messages", message_ids=[message["id"]], folder_id="trash")
    fails(rt, sid, "reply_to_message", "MESSAGE_IN_TRASH", message_id=message["id"], body="x")
    fails(rt, sid, "forward_message", "MESSAGE_IN_TRASH", message_id=message["id"], to=["a@example.com"])
    restored = ok(rt, sid, "move_messages", message_ids=[message["id"]], folder_id="inbox")
    assert restored["moved"] == [message["id"]] and rt.state(sid).messages.get(message["id"])["trashed_from"] is None
    ok(rt, sid, "reply_to_message", message_id=message["id"], body="x")
    draft = first(rt, sid, kind="draft")
    fails(rt, sid, "reply_to_message", "MESSAGE_IS_DRAFT", message_id=draft["id"], body="x")
    fails(rt, sid, "forward_message", "MESSAGE_IS_DRAFT", message_id=draft["id"], to=["a@example.com"])


# -- organizing: labels, folders, read state, deletion --------------------------------------------


def test_labels(rt, sid):
    fails(rt, sid, "create_label", "LABEL_EXISTS", name=" FINANCE ")
    error = fails(rt, sid, "create_label", "LABEL_EXISTS", name="inbox")
    assert error["code"] == "CONFLICT" and "folder" in error["message"]
    label = ok(rt, sid, "create_label", name="Clients", color="teal")
    ids = [m["id"] for m in rt.state(sid).messages.where(folder_id="inbox")[:3]]
    fails(rt, sid, "remove_label", "LABEL_NOT_APPLIED", label_id=label["id"], message_ids=ids)
    assert ok(rt, sid, "apply_label", label_id=label["id"], message_ids=ids[:2])["applied"] == ids[:2]
    again = ok(rt, sid, "apply_label", label_id=label["id"], message_ids=ids)
    assert (again["applied"], again["already_labelled"]) == (ids[2:], ids[:2])
    found = ok(rt, sid, "search_messages", label_id=label["id"])["messages"]
    assert {m["id"] for m in found} == set(ids) and all("Clients" in m["labels"] for m in found)
    removed = ok(rt, sid, "remove_label", label_id=label["id"], message_ids=[ids[0], first(rt, sid, kind="sent")["id"]])
    assert len(removed["removed"]) == 1 and len(removed["not_labelled"]) == 1
    fails(rt, sid, "apply_label", "MESSAGE_NOT_FOUND", label_id=label["id"], message_ids=[ids[0], "msg_missing"])
    fails(rt, sid, "apply_label", "LABEL_NOT_FOUND", label_id="lbl_missing", message_ids=ids)
    for n in range(email.MAX_LABELS - 5):
        ok(rt, sid, "create_label", name=f"Tag {n}")
    assert fails(rt, sid, "create_label", "LABEL_LIMIT_REACHED", name="One more")["code"] == "RESOURCE_EXHAUSTED"


def test_moving_messages_between_folders(rt, sid):
    message = first(rt, sid, kind="received", folder_id="inbox")
    draft = first(rt, sid, kind="draft")
    ids = [message["id"]]
    fails(rt, sid, "move_messages", "CANNOT_MOVE_TO_DRAFTS", message_ids=ids, folder_id="drafts")
    fails(rt, sid, "move_messages", "CANNOT_MOVE_TO_SENT", message_ids=ids, folder_id="sent")
    error = fails(rt, sid, "move_messages", "CANNOT_MOVE_DRAFT", message_ids=[message["id"], draft["id"]],
                  folder_id="archive")
    assert error["details"]["message_id"] == draft["id"]
    fails(rt, sid, "move_messages", "FOLDER_NOT_FOUND", message_ids=ids, folder_id="fld_missing")
    projects = next(f for f in ok(rt, sid, "list_folders")["folders"] if f["name"] == "Projects")
    moved = ok(rt, sid, "move_messages", message_ids=ids, folder_id=projects["id"])
    assert moved["moved"] == ids
    assert ok(rt, sid, "move_messages", message_ids=ids, folder_id=projects["id"])["already_there"] == ids
    assert ids[0] in [m["id"] for m in ok(rt, sid, "search_messages", folder_id=projects["id"])["messages"]]
    ok(rt, sid, "move_messages", message_ids=ids, folder_id="trash")
    assert rt.state(sid).messages.get(ids[0])["trashed_from"] == projects["id"]
    assert ids[0] not in [m["id"] for m in ok(rt, sid, "search_messages", limit=100)["messages"]]


def test_read_state(rt, sid):
    unread = [m["id"] for m in rt.state(sid).messages.where(lambda m: not m["read"], folder_id="inbox")]
    result = ok(rt, sid, "mark_read", message_ids=unread)
    assert result["changed"] == unread and result["inbox_unread"] == 0
    assert ok(rt, sid, "mark_read", message_ids=unread)["changed"] == []
    assert ok(rt, sid, "mark_read", message_ids=unread[:1], read=False)["inbox_unread"] == 1
    fails(rt, sid, "mark_read", "MESSAGE_NOT_FOUND", message_ids=["msg_missing"])


def test_delete_forever_only_from_trash(rt, sid):
    message = first(rt, sid, kind="received", folder_id="inbox")
    error = fails(rt, sid, "delete_forever", "MESSAGE_NOT_IN_TRASH", message_ids=[message["id"]])
    assert error["details"]["message_ids"] == [message["id"]]
    alone = subject_of(rt, sid, "Your password expires")  # a thread of one message
    ok(rt, sid, "move_messages", message_ids=[alone["id"]], folder_id="trash")
    result = ok(rt, sid, "delete_forever", message_ids=[alone["id"]])
    assert result["freed_bytes"] == alone["size_bytes"]
    fails(rt, sid, "get_thread", "THREAD_NOT_FOUND", thread_id=alone["thread_id"])
    fails(rt, sid, "delete_forever", "MESSAGE_NOT_FOUND", message_ids=[alone["id"]])
    assert_storage_adds_up(rt.state(sid))


# -- a whole flow ---------------------------------------------------------------------------------


def test_ids_flow_from_search_to_reply_forward_and_filing(rt, sid):
    hit = ok(rt, sid, "search_messages", query="site survey", has_attachment=True, limit=1)["messages"][0]
    thread = ok(rt, sid, "get_thread", thread_id=hit["thread_id"])
    latest = thread["messages"][-1]
    files = ok(rt, sid, "list_attachments", message_id=latest["id"])
    assert files["forwardable"]
    reply = ok(rt, sid, "reply_to_message", message_id=latest["id"], body="Got them, thanks!")
    forward = ok(rt, sid, "forward_message", message_id=latest["id"], to=["facilities@partner.example"],
                 note="Photos of the dock, as discussed.")
    label = ok(rt, sid, "create_label", name="Site visits")
    ok(rt, sid, "apply_label", label_id=label["id"], message_ids=[latest["id"], reply["id"], forward["id"]])
    ok(rt, sid, "mark_read", message_ids=[latest["id"]])
    ok(rt, sid, "move_messages", message_ids=[latest["id"]], folder_id="archive")
    after = ok(rt, sid, "get_thread", thread_id=hit["thread_id"])
    assert [m["id"] for m in after["messages"]][-2:] == [reply["id"], forward["id"]] and after["unread"] == 0
    assert {m["folder_id"] for m in after["messages"]} == {"archive", "sent"}
    labelled = ok(rt, sid, "search_messages", label_id=label["id"])
    assert {m["id"] for m in labelled["messages"]} == {reply["id"], forward["id"], latest["id"]}
    assert_storage_adds_up(rt.state(sid))
