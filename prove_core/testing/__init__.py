"""Testing kit for server authors.

Subclass ``ServerConformance`` in a test module to run the whole conformance kit under pytest::

    from prove_core.testing import ServerConformance
    from my_pkg.server import server

    class TestMyServer(ServerConformance):
        server = server

``ServerHarness`` (see ``prove_core.testing.harness``) is for testing a server's own rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from prove_core.testing import conformance
from prove_core.testing.conformance import AuditReport, Check, audit
from prove_core.testing.harness import ServerHarness, make_runtime, servers_registered_by
from prove_core.toolkit.server import Server


def _case(check_fn: Callable[[Server, int], Check]) -> Callable[[ServerConformance], None]:
    def test(self: ServerConformance) -> None:
        result = check_fn(self.server, self.seed)
        assert result.ok, f"{result.name}: {result.detail}"

    test.__name__ = "test_" + check_fn.__name__.removeprefix("check_")
    test.__doc__ = check_fn.__doc__
    return test


class ServerConformance:
    """Base class: set ``server`` (and optionally ``seed``); pytest runs one test per check."""

    server: ClassVar[Server]
    seed: ClassVar[int] = 0


for _fn in conformance.CHECKS:
    setattr(ServerConformance, "test_" + _fn.__name__.removeprefix("check_"), _case(_fn))

__all__ = ["AuditReport", "Check", "ServerConformance", "ServerHarness", "audit", "make_runtime",
           "servers_registered_by"]
