"""Every bundled tool says how users ask for it (``asks``) and draws its free values (``values``)
the way ``prove_core.toolkit.phrasing`` requires; synthesis writes user turns from these."""

import pytest

from prove_core.testing.conformance import phrasing_problems
from prove_core.toolkit.phrasing import check_template
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
