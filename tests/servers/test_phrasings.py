"""Every bundled tool says how users ask for it (``asks``) and draws its free values (``values``)
the way ``prove_core.toolkit.phrasing`` requires; synthesis writes user turns from these."""

import pytest

from prove_core.env.runtime import ServerRuntime, example_at
from prove_core.testing.conformance import phrasing_problems
from prove_core.toolkit.phrasing import check_phrasings, check_template
from tests.servers.test_conformance import SERVER_MODULES, server_of


@pytest.mark.parametrize("module", SERVER_MODULES)
def test_every_tool_has_valid_phrasings_and_value_sources(module):
    problems, bare = phrasing_problems(server_of(module))
    assert not problems, "\n".join(problems)
    assert not bare, f"bundled tools without asks: {bare}"


def test_the_phrasing_check_catches_bad_templates():
    from prove_servers.banking import server

    tool = server.tools["transfer_between_accounts"]
    assert any("does not mention required ['amount']" in p for p in check_template(tool, "move money from {from_account_id}"))
    assert any("not a parameter" in p for p in check_template(tool, "move {amount} to {iban}"))
    assert any("spells out" in p for p in check_template(tool, "call transfer_between_accounts for {amount}"))
    assert check_template(tool, "move ${amount} from {from_account_id} to {to_account_id}") == []


# Read-only tools whose answering fields lie deeper than ``answers.main_records``/``flat`` reach
# (a list inside a listed record, or a list of records shorter than a side list).
UNREACHABLE_ANSWERS = {("trading", "list_watchlists"), ("payments", "get_balance"), ("filesystem", "list_users"),
                       ("maps", "compare_travel_modes"), ("maps", "get_distance_matrix")}


@pytest.mark.parametrize("module", SERVER_MODULES)
def test_every_read_only_tool_declares_the_fields_that_answer_it(module):
    server = server_of(module)
    silent = [t.name for t in server.tools.values() if t.spec.annotations.read_only and not t.answers
              and (server.name, t.name) not in UNREACHABLE_ANSWERS]
    assert not silent, f"{server.name}: read-only tools without answers: {silent}"


def test_the_answers_check_catches_fields_no_example_returns():
    import attrs

    from prove_core.toolkit.phrasing import check_answers
    from prove_servers.banking import server

    rt = ServerRuntime(server, seed=0)
    sid = rt.new_session()
    tool = server.tools["get_balance"]
    examples = [example_at(tool, rt, sid, i) for i in range(len(tool.examples))]
    state = rt.state(sid)
    assert check_answers(tool, examples, state) == []
    wrong = attrs.evolve(tool, answers=("available_balance", "balance_usd"))
    assert any("['balance_usd'] appear in no example's result" in p for p in check_answers(wrong, examples, state))
    assert any("balance_usd" in p for p in check_phrasings(wrong, examples, state))  # the audit's check runs it
    private = attrs.evolve(tool, answers=("available_balance",), sensitive=frozenset({"available_balance"}))
    assert any("sensitive" in p for p in check_answers(private, examples, state))
    assert any("ids or bookkeeping" in p for p in check_answers(attrs.evolve(tool, answers=("account_id",)), examples, state))
    # a listing's answers are fields of its listed records
    listing = server.tools["list_transactions"]
    listed = [example_at(listing, rt, sid, 0)]
    assert check_answers(attrs.evolve(listing, answers=("amount", "counterparty")), listed, state) == []
    assert check_answers(attrs.evolve(listing, answers=("routing",)), listed, state)
    # writes run on copies: the session's state is untouched
    pay = server.tools["transfer_between_accounts"]
    pay_args = [example_at(pay, rt, sid, 0)]
    before = rt.state(sid).state_hash()
    assert check_answers(attrs.evolve(pay, answers=("amount",)), pay_args, rt.state(sid)) == []
    assert rt.state(sid).state_hash() == before


def test_prove_audit_fails_a_declared_answer_no_example_returns(monkeypatch):
    from prove_core.testing.conformance import check_answers as audit_answers
    from prove_servers.banking import server

    assert audit_answers(server, 0).ok
    monkeypatch.setattr(server.tools["get_balance"], "answers", ("available_balance", "balance_usd"))
    check = audit_answers(server, 0)
    assert not check.ok and "get_balance: answers ['balance_usd']" in check.detail
