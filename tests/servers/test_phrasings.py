"""Every bundled tool says how users ask for it (``asks``) and draws its free values (``values``)
the way ``prove_core.toolkit.phrasing`` requires; synthesis writes user turns from these."""

import pytest

from prove_core.env.runtime import ServerRuntime, example_at
from prove_core.toolkit.phrasing import check_phrasings, check_template
from tests.servers.test_conformance import SERVER_MODULES, server_of


def phrasing_problems(server) -> list[str]:
    rt = ServerRuntime(server, seed=0)
    sid = rt.new_session()
    problems = []
    for tool in server.tools.values():
        examples = []
        for i in range(len(tool.examples)):
            try:
                examples.append(example_at(tool, rt, sid, i))
            except Exception:  # noqa: BLE001 - reachability is the conformance kit's check
                continue
        problems += check_phrasings(tool, examples, rt.state(sid))
    return problems


@pytest.mark.parametrize("module", SERVER_MODULES)
def test_every_tool_has_valid_phrasings_and_value_sources(module):
    problems = phrasing_problems(server_of(module))
    assert not problems, "\n".join(problems)


def test_the_phrasing_check_catches_bad_templates():
    from prove_servers.banking import server

    tool = server.tools["transfer_between_accounts"]
    assert any("does not mention required ['amount']" in p for p in check_template(tool, "move money from {from_account_id}"))
    assert any("not a parameter" in p for p in check_template(tool, "move {amount} to {iban}"))
    assert any("spells out" in p for p in check_template(tool, "call transfer_between_accounts for {amount}"))
    assert check_template(tool, "move ${amount} from {from_account_id} to {to_account_id}") == []
