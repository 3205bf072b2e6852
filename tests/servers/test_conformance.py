"""The conformance kit on every bundled server (and proof that the kit can fail)."""

import importlib

import pytest

from prove_core.plugins import BUNDLED
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
