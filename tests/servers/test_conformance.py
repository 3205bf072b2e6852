"""The conformance kit on every bundled server (and proof that the kit can fail)."""

import importlib

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
