"""The conformance kit on every bundled server (and proof that the kit can fail)."""

import importlib
import re

import pytest

from prove_core.plugin.manager import BUNDLED
from prove_core.testing import ServerConformance, audit
from prove_core.toolkit import Server
from prove_servers.banking import server as banking
from tests.support.toy import server as toy

SERVER_MODULES = [m for m in BUNDLED if m.startswith("prove_servers.")]


def server_of(module: str) -> Server:
    return next(v for v in vars(importlib.import_module(module)).values() if isinstance(v, Server))


@pytest.mark.parametrize("module", SERVER_MODULES)
def test_bundled_server_passes_the_whole_kit(module):
    report = audit(server_of(module))
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok]
    assert not failed, failed


class TestBankingConformanceOtherSeed(ServerConformance):
    """The pytest form of the kit, as a server author uses it (here on a second seed)."""

    server = banking
    seed = 11


def test_the_kit_catches_a_crashing_tool():
    report = audit(toy)
    assert not report.check("reachable").ok and "explode" in report.check("reachable").detail
    assert report.check("bad_input").ok and report.check("determinism").ok


def reference_hash(state):
    """The state hash as defined: sha256 of the whole state's canonical JSON, in one piece."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(state.to_json(), sort_keys=True, separators=(",", ":"), default=str)
                          .encode()).hexdigest()


@pytest.mark.parametrize("module", SERVER_MODULES)
def test_the_runtimes_table_by_table_state_hash_equals_the_whole_dump(module):
    """The runtime reuses the seed's serialized tables for tables a session has not written; after
    every write example of every tool the hash must still be the one-piece definition's."""
    from prove_core.env.runtime import ServerRuntime
    from prove_core.testing.conformance import example_args

    rt = ServerRuntime(server_of(module))
    sid, other = rt.new_session(), rt.new_session()
    assert rt.state_hash(sid) == reference_hash(rt.state(sid))
    changed = 0
    for tool in rt.server.tools.values():
        for args in example_args(tool, rt, sid):
            before = rt.state_hash(sid)
            rt.call(sid, tool.name, args)
            after = rt.state_hash(sid)
            assert after == reference_hash(rt.state(sid)), tool.name
            changed += after != before
    assert changed > 0
    assert rt.state_hash(other) == reference_hash(rt.state(other)) != rt.state_hash(sid)


# -- the audit's checks of truthful metadata, each shown failing on a server broken on purpose ------

from typing import Annotated  # noqa: E402

from pydantic import Field  # noqa: E402

from prove_core.testing import conformance  # noqa: E402
from prove_core.toolkit import FailedPrecondition, State, Table, ref, require  # noqa: E402


class NoteState(State):
    folders = Table("folder", prefix="fld")
    notes = Table("note", prefix="nte", index=("folder_id",))


def build_notes(rng, options) -> NoteState:
    state = NoteState(salt=str(rng.random()))
    for name in ("inbox", "archive"):
        folder = state.folders.insert({"name": name})
        for i in range(2):
            state.notes.insert({"folder_id": folder["id"], "text": f"{name} {i}", "pinned": False, "views": 0})
    return state


def _a_note(s):
    return {"note_id": s.notes.first()["id"]}


NoteId = Annotated[str, ref("note", "Id of the note (nte_...).")]
FolderId = Annotated[str, ref("folder", "Id of the folder (fld_...).")]


def notes_server(*broken: str) -> Server:
    """A small correct server, plus one tool broken on purpose for each name in ``broken``."""
    srv = Server("notes", domain="test", description="Notes in folders, for audit tests.", state=NoteState,
                 seed=build_notes)

    @srv.tool(read_only=True, reads=["note"], errors=["NOTE_NOT_FOUND"], examples=[_a_note])
    def get_note(state: NoteState, note_id: NoteId) -> dict:
        """One note. Fails with NOTE_NOT_FOUND."""
        return state.notes.get(note_id)

    @srv.tool(idempotent=True, reads=["note"], mutates=["note"], errors=["NOTE_NOT_FOUND", "FOLDER_NOT_FOUND"],
              examples=[lambda s: {**_a_note(s), "folder_id": s.folders.all()[-1]["id"]}])
    def move_note(state: NoteState, note_id: NoteId, folder_id: FolderId) -> dict:
        """Move a note to another folder (an in-place update: not destructive)."""
        state.folders.get(folder_id)
        return state.notes.update(state.notes.get(note_id)["id"], folder_id=folder_id)

    @srv.tool(destructive=True, idempotent=True, mutates=["note"], errors=["NOTE_NOT_FOUND"], examples=[_a_note])
    def delete_note(state: NoteState, note_id: NoteId) -> dict:
        """Delete a note for good."""
        return {"deleted": state.notes.delete(note_id)["id"]}

    @srv.tool(produces=["note"], reads=["folder"], errors=["FOLDER_NOT_FOUND", "FOLDER_FULL"],
              examples=[lambda s: {"folder_id": s.folders.first()["id"], "text": "hello"}])
    def add_note(state: NoteState, folder_id: FolderId,
                 text: Annotated[str, Field(description="The text; a folder holds 10 notes at most (FOLDER_FULL).")]) -> dict:
        """Add a note to a folder."""
        require(len(state.notes.where(folder_id=state.folders.get(folder_id)["id"])) < 10, "full", reason="FOLDER_FULL")
        return state.notes.insert({"folder_id": folder_id, "text": text, "pinned": False, "views": 0})

    if "read_only_writes" in broken:
        @srv.tool(read_only=True, reads=["note"], errors=["NOTE_NOT_FOUND"], examples=[_a_note])
        def view_note(state: NoteState, note_id: NoteId) -> dict:
            """Show a note (and count the view)."""
            note = state.notes.get(note_id)
            return state.notes.update(note_id, views=note["views"] + 1)

    if "not_destructive_deletes" in broken:
        @srv.tool(idempotent=True, mutates=["note"], errors=["NOTE_NOT_FOUND"], examples=[_a_note])
        def archive_note(state: NoteState, note_id: NoteId) -> dict:
            """Archive a note (it is deleted, but the annotation says nothing)."""
            return {"archived": state.notes.delete(note_id)["id"]}

    if "idempotent_counts" in broken:
        @srv.tool(idempotent=True, mutates=["note"], errors=["NOTE_NOT_FOUND"], examples=[_a_note])
        def bump_note(state: NoteState, note_id: NoteId) -> dict:
            """Count one more view of a note."""
            return state.notes.update(note_id, views=state.notes.get(note_id)["views"] + 1)

    if "crash_on_unknown_id" in broken:
        @srv.tool(read_only=True, reads=["note"], examples=[_a_note])
        def note_text(state: NoteState, note_id: NoteId) -> dict:
            """The text of a note."""
            return {"text": state.notes.find(note_id)["text"]}  # None["text"] for an unknown id

    if "dangling_reference" in broken:
        @srv.tool(idempotent=True, mutates=["note"], errors=["NOTE_NOT_FOUND"],
                  examples=[lambda s: {**_a_note(s), "folder_id": s.folders.all()[-1]["id"]}])
        def file_note(state: NoteState, note_id: NoteId, folder_id: FolderId) -> dict:
            """File a note in a folder (which it never checks exists). Fails with NOTE_NOT_FOUND."""
            return state.notes.update(state.notes.get(note_id)["id"], folder_id=folder_id)

    if "success_on_unknown_id" in broken:
        @srv.tool(read_only=True, reads=["note"], examples=[_a_note])
        def is_pinned(state: NoteState, note_id: NoteId) -> dict:
            """Whether a note is pinned."""
            note = state.notes.find(note_id)
            return {"pinned": bool(note and note["pinned"])}

    if "undeclared_reason" in broken:
        @srv.tool(mutates=["note"], errors=["NOTE_NOT_FOUND"], examples=[_a_note])
        def pin_note(state: NoteState, note_id: NoteId) -> dict:
            """Pin a note. Fails with NOTE_NOT_FOUND."""
            note = state.notes.get(note_id)
            if note["pinned"]:  # the audit's repeat of the example gets here
                raise FailedPrecondition("already pinned", reason="ALREADY_PINNED")
            return state.notes.update(note_id, pinned=True)

    if "reason_not_in_docstring" in broken:
        @srv.tool(mutates=["note"], errors=["NOTE_NOT_FOUND", "NOTE_LOCKED"], examples=[_a_note])
        def edit_note(state: NoteState, note_id: NoteId,
                      text: Annotated[str, Field(description="The new text.")] = "edited") -> dict:
            """Replace a note's text."""
            require(not state.notes.get(note_id).get("locked"), "locked", reason="NOTE_LOCKED")
            return state.notes.update(note_id, text=text)

    if "misspelled_entity" in broken:
        @srv.tool(read_only=True, reads=["foldr"], errors=["NOTE_NOT_FOUND"],
                  examples=[lambda s: {"note_id": s.notes.first()["id"]}])
        def note_folder(state: NoteState, note_id: Annotated[str, ref("nots", "Id of the note.")]) -> dict:
            """The folder a note is in. Fails with NOTE_NOT_FOUND."""
            return state.folders.get(state.notes.get(note_id)["folder_id"])

    return srv


NEW_CHECKS = (conformance.check_annotations, conformance.check_unknown_ids, conformance.check_declared_failures,
              conformance.check_documented_failures, conformance.check_entity_names)


def test_a_correct_server_passes_every_new_check():
    srv = notes_server()
    assert conformance.check_reachable(srv, 0).ok
    for check in NEW_CHECKS:
        result = check(srv, 0)
        assert result.ok, f"{result.name}: {result.detail}"


@pytest.mark.parametrize(("broken", "check", "expected"), [
    ("read_only_writes", "annotations", "view_note is marked read-only but changed the state"),
    ("not_destructive_deletes", "annotations", "archive_note is not marked destructive but removed 1 record(s) (notes/nte_"),
    ("idempotent_counts", "annotations", "bump_note is marked idempotent but a repeat changed the state"),
    ("crash_on_unknown_id", "unknown_ids", "note_text(note_id=\"nte_"),
    ("dangling_reference", "unknown_ids", "accepted an unknown folder id and stored it (a dangling reference)"),
    ("success_on_unknown_id", "unknown_ids", "succeeded with an unknown note id; expected a typed NOT_FOUND (NOTE_NOT_FOUND)"),
    ("undeclared_reason", "declared_failures", "pin_note fails with ALREADY_PINNED"),
    ("reason_not_in_docstring", "documented_failures", "edit_note declares NOTE_LOCKED but its docstring"),
    ("misspelled_entity", "entity_names", "note_folder: ref parameter 'note_id' names entity 'nots', which no table "
                                          "holds and no other tool reads, produces or mutates; did you mean 'note'?"),
    ("misspelled_entity", "entity_names", "note_folder: reads names entity 'foldr', which no table holds and no other "
                                          "tool names; did you mean 'folder'?"),
])
def test_each_new_check_fails_on_a_server_broken_on_purpose(broken, check, expected):
    srv = notes_server(broken)
    results = {c.name: c for c in (fn(srv, 0) for fn in NEW_CHECKS)}
    assert not results[check].ok and expected in results[check].detail, results[check].detail
    others = [f"{c.name}: {c.detail}" for name, c in results.items() if name != check and not c.ok]
    assert not others, others  # the break is reported by its own check only


def test_a_crash_on_an_unknown_id_is_reported_with_the_error_not_as_an_undeclared_reason():
    srv = notes_server("crash_on_unknown_id")
    detail = conformance.check_unknown_ids(srv, 0).detail
    assert "an unknown note id crashed the tool" in detail and "TypeError" in detail
    assert conformance.check_declared_failures(srv, 0).ok  # INTERNAL is the unknown-id check's to report


def test_unknown_ids_are_well_formed_and_name_no_record():
    from prove_core.env.runtime import ServerRuntime

    rt = ServerRuntime(notes_server())
    cases = list(conformance.unknown_id_cases(rt))
    # every ref parameter of every example: get_note, move_note (2), delete_note, add_note
    assert sorted((c.tool.name, c.param) for c in cases) == [
        ("add_note", "folder_id"), ("delete_note", "note_id"), ("get_note", "note_id"), ("move_note", "folder_id"),
        ("move_note", "note_id")]
    for case in cases:
        value, prefix = case.args[case.param], {"note": "nte", "folder": "fld"}[case.entity]
        assert re.fullmatch(rf"{prefix}_[0-9a-z]{{8}}", value), value  # the id generator's own format
        table = rt.state(case.session_id).notes if case.entity == "note" else rt.state(case.session_id).folders
        assert value not in table


def test_an_unknown_key_that_is_not_a_generated_id_keeps_the_examples_shape():
    """A ticker or a SKU is shifted letter by letter and digit by digit, so its pattern still holds."""
    assert conformance._shifted("AAPL", 1) == "BBQM"
    assert conformance._shifted("ABC-12345", 1) == "BCD-23456"
    assert conformance._shifted("/home/ana/notes.txt", 1) == "/ipnf/bob/opuft.uyu"


def test_a_ref_parameter_in_another_tools_reads_links_without_a_table():
    """``order_item`` (items inside an order) has no table: a tool that reads it is its source."""
    srv = notes_server()

    @srv.tool(read_only=True, reads=["note", "note_line"], errors=["NOTE_NOT_FOUND"], examples=[_a_note])
    def note_lines(state: NoteState, note_id: NoteId) -> dict:
        """A note's lines, each with its id. Fails with NOTE_NOT_FOUND."""
        return {"lines": [{"id": f"{note_id}:1", "text": state.notes.get(note_id)["text"]}]}

    @srv.tool(read_only=True, reads=["note"], errors=["NOTE_NOT_FOUND"],
              examples=[lambda s: {"line_id": s.notes.first()["id"] + ":1"}])
    def get_line(state: NoteState, line_id: Annotated[str, ref("note_line", "Id of a line, from note_lines.")]) -> dict:
        """One line of a note. Fails with NOTE_NOT_FOUND."""
        return {"text": state.notes.get(line_id.split(":")[0], reason="NOTE_NOT_FOUND")["text"]}

    assert conformance.check_entity_names(srv, 0).ok


def test_the_audit_report_lists_the_new_checks():
    names = {fn.__name__.removeprefix("check_") for fn in conformance.CHECKS}
    assert {"annotations", "unknown_ids", "declared_failures", "documented_failures", "entity_names"} <= names
    assert hasattr(ServerConformance, "test_unknown_ids") and hasattr(ServerConformance, "test_entity_names")
