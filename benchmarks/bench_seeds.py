"""Seeding and forking every registered server: seed time at the default size and at 10x, and
the cost of forking a session from each seed snapshot (goal: independent of size).

Printed per server: records, seed ms (default / 10x), their ratio (about 10 means seeding scales
linearly), and fork us (default / 10x) with their ratio (about 1 means forks are size-free).
These were timed assertions in the server tests once; a loaded machine made them flaky, so they
live here, as ratios measured in one run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prove_core.env.runtime import ServerRuntime  # noqa: E402
from prove_core.logging import configure  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def scaled(options_type: type) -> object:
    """The options with every positive integer knob multiplied by 10."""
    default = options_type()
    if not attrs.has(options_type):
        return default
    changes = {f.name: getattr(default, f.name) * 10 for f in attrs.fields(options_type)
               if isinstance(getattr(default, f.name), int) and not isinstance(getattr(default, f.name), bool)
               and getattr(default, f.name) > 0}
    return attrs.evolve(default, **changes)


def main() -> None:
    configure(level="warning")
    quick = "--quick" in sys.argv
    registry = Plugins().load(autoload=False).registry
    print(f"{'server':<16}{'records':>9}{'seed ms':>10}{'10x ms':>9}{'ratio':>7}{'fork us':>10}{'10x us':>9}{'ratio':>7}")
    for name in registry.names("servers"):
        server = registry.load("servers", name)
        big = scaled(server.options_type)
        seed_ms = best(lambda server=server: server.build_state(0), 2 if quick else 5) * 1e3
        big_ms = best(lambda server=server, big=big: server.build_state(0, big), 1 if quick else 3) * 1e3
        forks = []
        for options in (None, big):
            rt = ServerRuntime(server, options=options, max_sessions=10**6)
            snap = rt.seed_snapshot()
            n = 200 if quick else 2000
            forks.append(best(lambda rt=rt, snap=snap, n=n: [rt.close(rt.new_session(snapshot=snap)) for _ in range(n)], 3)
                         / n * 1e6)
        records = sum(server.build_state(0).table_sizes().values())
        print(f"{name:<16}{records:>9}{seed_ms:>10.1f}{big_ms:>9.1f}{big_ms / seed_ms:>7.1f}"
              f"{forks[0]:>10.2f}{forks[1]:>9.2f}{forks[1] / forks[0]:>7.2f}")


if __name__ == "__main__":
    main()
