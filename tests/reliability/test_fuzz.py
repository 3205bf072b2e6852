"""Bad input, CI-sized: hypothesis fuzzing of every tool of every registered server on the fast
path and over MCP (benchmarks/bench_fuzz.py runs the long version), plus the number cases that
found bugs, pinned. Every case gives a success or a typed error (never INTERNAL), a rejected
call changes nothing, and the server keeps serving."""

from __future__ import annotations

import json
import math
import time

import pytest

from benchmarks import bench_fuzz
from prove_core.env.runtime import ServerRuntime, example_at
from prove_core.plugin.manager import Plugins

SERVERS = Plugins().load(autoload=False).registry.names("servers")
FAST_CASES_PER_TOOL = 16
MCP_CASES_PER_TOOL = 3


@pytest.mark.parametrize("name", SERVERS)
def test_fuzzed_arguments_on_the_fast_path_give_a_result_or_a_typed_error(registry, name):
    server = registry.load("servers", name)
    tally = bench_fuzz.fuzz_fast(server, cases_per_tool=FAST_CASES_PER_TOOL)
    assert not tally.problems
    assert tally.total >= FAST_CASES_PER_TOOL * len(server.tools) * 0.9
    assert tally.cases["success"] and tally.cases["INVALID_ARGUMENT"]  # both sides of validation reached


@pytest.mark.parametrize("name", SERVERS)
def test_fuzzed_arguments_over_mcp_give_what_the_fast_path_gives(registry, name):
    server = registry.load("servers", name)
    tally = bench_fuzz.fuzz_mcp(server, cases_per_tool=MCP_CASES_PER_TOOL)
    assert not tally.problems
    assert tally.total >= MCP_CASES_PER_TOOL * len(server.tools) * 0.9


def number_cases(server):
    """(tool, arguments) with each number parameter of each example set to a value JSON cannot
    carry, and each integer parameter sent the way JSON may send it (1.0)."""
    rt = ServerRuntime(server)
    for tool in server.tools.values():
        for name, prop in tool.spec.parameters["properties"].items():
            kinds = [prop.get("type")] + [prop.get("items", {}).get("type")] * (prop.get("type") == "array")
            values = [math.nan, math.inf, -math.inf] if {"number", "integer"} & set(kinds) else []
            values += [1.0, 2.0] if "integer" in kinds else []
            for value in values:
                sid = rt.new_session()
                base = example_at(tool, rt, sid, 0) if tool.examples else {}
                yield rt, sid, tool, {**base, name: [value] if prop.get("type") == "array" else value}, value


def test_non_finite_numbers_are_refused_and_whole_floats_work_as_integers(all_servers):
    cases = 0
    for server in all_servers:
        for rt, sid, tool, args, value in number_cases(server):
            cases += 1
            where = f"{server.name}.{tool.name}({args})"
            before = rt.state(sid).snapshot()
            result = rt.call(sid, tool.name, args)  # must not raise
            if not math.isfinite(value):
                assert result.code == "INVALID_ARGUMENT", where
                assert not rt.state(sid).changed_since(before), where
            else:
                assert result.code != "INTERNAL", (where, result.error)
                if not result.is_error:
                    json.dumps(result.data, allow_nan=False)
    assert cases > 300


PREFIXES = ["", "a@", "1"]
RUNS = ["a", ".", " ", "1", "a.", "-", ":", "_", "@", "a1", "+"]
ENDS = ["!", " ", "@"]


def timed(rt, tool, args) -> float:
    started = time.perf_counter()
    rt.call("s", tool, args)
    return time.perf_counter() - started


def test_no_parameter_pattern_backtracks_on_long_input(all_servers):
    """Each string parameter with a `pattern` (and each array of them), given 20,000-character
    near-misses: a regex that backtracks turns one call into minutes of CPU (found: an email
    pattern without a length bound took 0.3 s at 8,000 characters and grew with the square)."""
    slow = []
    fields = 0
    for server in all_servers:
        rt = ServerRuntime(server)
        for tool in server.tools.values():
            base = example_at(tool, rt, rt.new_session(), 0) if tool.examples else {}
            for name, prop in tool.spec.parameters["properties"].items():
                pattern = prop.get("pattern") or prop.get("items", {}).get("pattern")
                if not pattern:
                    continue
                fields += 1
                for evil in (p + r * (20_000 // len(r)) + e for p in PREFIXES for r in RUNS for e in ENDS):
                    value = [evil] if prop.get("type") == "array" else evil
                    # Slow twice in a row, so a busy machine's pause is not mistaken for backtracking.
                    args = {**base, name: value}
                    if timed(rt, tool.name, args) > 0.5 and timed(rt, tool.name, args) > 0.5:
                        slow.append(f"{server.name}.{tool.name}.{name} on {evil[:12]!r}...{evil[-3:]!r}")
                        break
    assert fields > 90
    assert not slow, slow


def test_every_bundled_server_loads_so_every_tool_is_fuzzed():
    plugins = Plugins().load(autoload=False)
    assert not plugins.failures, plugins.failures  # a server that fails to import would go unfuzzed
    names = plugins.registry.names("servers")
    assert len(names) == 20 and sum(len(plugins.registry.load("servers", n).tools) for n in names) == 343


# -- what the fuzzer found, pinned ---------------------------------------------------------------


def test_truncating_to_a_huge_size_is_refused_before_anything_is_allocated(registry):
    rt = ServerRuntime(registry.load("servers", "filesystem"))
    sid = rt.new_session()
    for size in (2**40, 10**400):  # 1 TiB of padding used to be built in memory first
        result = rt.call(sid, "truncate_file", {"path": "/tmp/scratch.txt", "size": size})
        assert result.error["reason"] == "FILE_TOO_LARGE" and result.code == "RESOURCE_EXHAUSTED"


def test_a_budget_limit_below_a_cent_never_becomes_a_zero_limit(registry):
    server = registry.load("servers", "budget")
    rt = ServerRuntime(server)
    sid = rt.new_session()
    args = server.tools["create_budget"].examples[1](rt.state(sid))
    created = rt.call(sid, "create_budget", {**args, "limit": 5e-324})  # > 0, yet 0.00 once rounded
    assert not created.is_error and created.data["budget"]["limit"] == 0.01
    changed = rt.call(sid, "set_budget_limit", {"budget_id": created.data["budget"]["id"], "limit": 0.001})
    assert not changed.is_error and changed.data["budget"]["limit"] == 0.01
    assert not rt.call(sid, "list_budgets", {"month": args["month"]}).is_error


def test_integer_parameters_sent_as_whole_floats_work(registry):
    rt = ServerRuntime(registry.load("servers", "filesystem"))
    sid = rt.new_session()
    as_ints = rt.call(sid, "list_trash", {"limit": 1, "offset": 0})
    assert rt.call(sid, "list_trash", {"limit": 1.0, "offset": 0.0}).data == as_ints.data  # TOOL_CRASHED before
    assert rt.call(sid, "list_trash", {"limit": 1.5}).code == "INVALID_ARGUMENT"
