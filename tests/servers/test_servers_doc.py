"""docs/servers.md is true: its server example runs, passes every audit check (phrasings included),
and the field names it says synthesis uses to name records are the ones the code uses."""

import importlib
import re
import sys
from pathlib import Path

import attrs
import pytest

from prove_core.testing.conformance import audit, check_phrasings
from tests.core.test_docs_examples import python_blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "servers.md"
TEXT = DOC.read_text()


@pytest.fixture()
def doc_server(tmp_path, monkeypatch):
    """The server block of servers.md as an importable module (the audit's determinism check
    imports it again in fresh processes)."""
    block = next(b for b in python_blocks(TEXT) if "Server(" in b.code)
    (tmp_path / "docs_library.py").write_text(block.code)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "docs_library", raising=False)
    module = importlib.import_module("docs_library")
    yield module.server, module
    sys.modules.pop("docs_library", None)


def test_the_documented_server_passes_every_audit_check_including_phrasings(doc_server):
    server, module = doc_server
    report = audit(server)
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]
    assert "phrasings" in {c.name for c in report.checks}
    assert "2 tools' asks and values follow the phrasing rules" in report.check("phrasings").detail
    assert callable(module.prove_register_servers)


def test_the_phrasings_check_fails_a_broken_template_and_counts_tools_without_asks(doc_server):
    server, _ = doc_server
    borrow, find = server.tools["borrow_book"], server.tools["find_books"]
    server.tools["borrow_book"] = attrs.evolve(borrow, asks=("borrow {isbn}", "get {book_id}", "call borrow_book on {book_id}"))
    check = check_phrasings(server, 0)
    assert not check.ok
    assert "slot {isbn} is not a parameter" in check.detail and "spells out identifiers ['borrow_book']" in check.detail
    server.tools["borrow_book"] = attrs.evolve(borrow, values={"days": lambda rng, state: 99})
    check = check_phrasings(server, 0)
    assert not check.ok and "values['days'] gave an invalid value" in check.detail
    server.tools["borrow_book"] = borrow
    server.tools["find_books"] = attrs.evolve(find, asks=())
    check = check_phrasings(server, 0)
    assert check.ok and "1 tools declare no asks" in check.detail and "find_books" in check.detail


def test_the_documented_naming_fields_are_the_ones_synthesis_uses():
    from prove_core.synth.conversation import LOOKUP_FIELDS
    from prove_core.synth.validation import SECRET_WORDS
    from prove_plugins.synth.teacher import KIND_FIELDS, NAME_FIELDS

    section = TEXT[TEXT.index("### How synthesis names entities"):TEXT.index("## Annotations and the audit")]

    def names(between: str, until: str) -> list[str]:
        part = section[section.index(between):]
        return re.findall(r"`([a-z0-9_]+)`", part[:part.index(until)])

    assert names("else the first short text field among", "('the book") == list(NAME_FIELDS)
    assert names("with a kind from", '("the savings') == list(KIND_FIELDS)
    assert names("The words tried are the record's", "fields (and") == list(LOOKUP_FIELDS)
    assert names("(a key containing", "must trace") == list(SECRET_WORDS)
