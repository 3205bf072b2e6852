"""The conformance kit on the bundled servers (and proof that the kit can fail)."""

from prove_core.testing import ServerConformance, audit
from prove_servers.banking import server as banking
from prove_servers.shopping import server as shopping
from tests.support.toy import server as toy


class TestBankingConformance(ServerConformance):
    server = banking


class TestShoppingConformance(ServerConformance):
    server = shopping


class TestBankingConformanceOtherSeed(ServerConformance):
    server = banking
    seed = 11


def test_the_kit_catches_a_crashing_tool_and_a_lying_annotation():
    report = audit(toy)
    assert not report.check("reachable").ok and "explode" in report.check("reachable").detail
    assert report.check("bad_input").ok and report.check("determinism").ok
