"""Bad input, fuzzed: every tool of every registered server through both call paths.

Arguments come from hypothesis strategies built from each tool's JSON Schema and examples:
mostly valid values (so calls get past validation into the tool bodies), mixed with wrong
types, missing and extra fields, huge and adversarial strings (long runs that make a careless
regex backtrack), unicode, negative, enormous and non-finite numbers, huge lists and nested
junk. Every case must give a success or a typed error — never INTERNAL — within a time limit;
a rejected call must change nothing (and a read-only tool nothing at all); over MCP (fastmcp's
in-memory client) the result, the error and the end state must equal the fast path's.

The tests (tests/reliability/test_fuzz.py) run a CI-sized number of cases; this runs more and
prints the case counts, cases/s on each path and their ratio.

    python benchmarks/bench_fuzz.py                    # 200 cases a tool on the fast path, 20 over MCP
    python benchmarks/bench_fuzz.py --fast 1000 --mcp 100 --seed 7
    python benchmarks/bench_fuzz.py --quick
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import math
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prove_core.env.runtime import (  # noqa: E402
    ServerRuntime,
    ToolResult,
    example_at,  # noqa: E402
)
from prove_core.errors import ErrorCode  # noqa: E402
from prove_core.toolkit.server import ENTITY_KEY, Server, ToolDef  # noqa: E402
from prove_core.toolkit.state import State  # noqa: E402

TYPED = {code.value for code in ErrorCode} - {"INTERNAL", "UNKNOWN_TOOL"}
TIME_LIMIT_S = 2.0  # one call, whatever its input (the largest inputs here are ~100 kB)

# -- values --------------------------------------------------------------------------------------

# Long runs of the characters the tools' patterns and parsers care about, ending in a character
# that makes the match fail late: what makes a backtracking regex or a quadratic loop show.
RUNS = ["a", ".", " ", "1", "a.", "a@", "@", "-", "/", "../", ":", "_", "T", "+", "%", "{", "é", "😀", "\\", "\t",
        "\u202e", "a b", "0:", "#", "*", "?", "[", "(", "~"]
HOSTILE_STRINGS = [start + run * (n // len(run)) + end for run in RUNS for start in ("", "a@") for n in (20_000, 100_000)
                   for end in ("!", " ", "\x00")]
HOSTILE_STRINGS += ["", " ", "\x00", "\n", "null", "None", "NaN", "-1", "0", "1e309", "true", "[]", "{}", "'", '"',
                    "{0.__class__}", "%s%s%n", "${7*7}", "{{7*7}}", "__import__('os')", "../../../../etc/passwd",
                    "a" * 5_000, "\U0010ffff", "🙂" * 3, "ｆｕｌｌ", "İ", "ß", "e\u0301", "\u200b", "\ufeff",
                    "Ω" * 300]
LONE_SURROGATES = ["\ud800", "a\udfffb"]  # valid Python strings, not valid UTF-8: the fast path only
BIG_INTS = [0, -1, 1, 2**31 - 1, 2**31, -2**31 - 1, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -2**64, 10**30, -10**30, 10**300]
ODD_FLOATS = [0.0, -0.0, 0.5, -0.5, 1e-300, -1e-300, 5e-324, 1e308, -1e308, 1.7976931348623157e308, 0.1 + 0.2, 1.0]
NON_FINITE = [math.nan, math.inf, -math.inf]


@functools.cache
def small_text() -> st.SearchStrategy[str]:
    return st.text(max_size=24)


@functools.cache
def scalars(json_only: bool) -> st.SearchStrategy[Any]:
    floats = st.floats(allow_nan=not json_only, allow_infinity=not json_only)
    return st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(BIG_INTS), floats,
                     st.sampled_from(ODD_FLOATS), small_text())


@functools.cache
def junk(json_only: bool) -> st.SearchStrategy[Any]:
    """Nested JSON of any shape, now and then very deep (not past what an MCP client will send:
    its serializer stops at a depth of about 50; tests/reliability/test_http.py sends deeper)."""
    nested = st.recursive(scalars(json_only), lambda inner: st.lists(inner, max_size=4) |
                          st.dictionaries(small_text(), inner, max_size=4), max_leaves=12)
    depths = st.integers(10, 40) if json_only else st.integers(50, 2_000)
    deep = depths.map(lambda depth: functools.reduce(lambda acc, _: [acc], range(depth), "bottom"))
    return st.one_of(nested, nested, deep)


@functools.cache
def hostile(json_only: bool) -> st.SearchStrategy[Any]:
    """A value of no use to any tool: junk, an adversarial string, a number at an extreme."""
    extreme = st.sampled_from(BIG_INTS + ODD_FLOATS + ([] if json_only else NON_FINITE))
    huge_list = st.integers(1_000, 20_000).map(lambda n: ["x"] * n)
    strings = HOSTILE_STRINGS + ([] if json_only else LONE_SURROGATES)
    return st.one_of(junk(json_only), st.sampled_from(strings), extreme, huge_list,
                     st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=200))


def valid_for(schema: dict[str, Any], ids: dict[str, list[str]], json_only: bool) -> st.SearchStrategy[Any]:
    """A value the schema accepts (roughly: patterns by regex, bounds by range)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    if "anyOf" in schema:
        return st.one_of(*(valid_for(s, ids, json_only) for s in schema["anyOf"]))
    kind = schema.get("type")
    if kind == "string":
        return _string_for(schema, ids)
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -(2**40)) + ("exclusiveMinimum" in schema))
        high = schema.get("maximum", schema.get("exclusiveMaximum", 2**40) - ("exclusiveMaximum" in schema))
        ints = st.integers(low, high)
        edges = st.sampled_from(sorted({low, high, max(low, min(high, 0))}))
        return st.one_of(ints, edges, ints.map(float))  # 1.0 is an integer to JSON Schema, not to a slice
    if kind == "number":
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        inner = st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False,
                          exclude_min="exclusiveMinimum" in schema, exclude_max="exclusiveMaximum" in schema)
        odd = [] if json_only else [st.sampled_from(NON_FINITE)]  # Python's JSON parsers make these
        return st.one_of(inner, inner.map(lambda x: round(x, 2)), *odd)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        items = valid_for(schema.get("items", {}), ids, json_only)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=min(schema.get("maxItems", 6), 6))
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        fields = {k: valid_for(v, ids, json_only) for k, v in props.items()}
        return st.fixed_dictionaries({k: s for k, s in fields.items() if k in required},
                                     optional={k: s for k, s in fields.items() if k not in required})
    return junk(json_only)


def _string_for(schema: dict[str, Any], ids: dict[str, list[str]]) -> st.SearchStrategy[str]:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    options = []
    entity = schema.get(ENTITY_KEY)
    if entity and ids.get(entity):
        options += [st.sampled_from(ids[entity])] * 3
    if ids.get("*"):
        options.append(st.sampled_from(ids["*"]))  # an id, of the wrong kind of record
    if "pattern" in schema:
        options.append(st.from_regex(schema["pattern"], fullmatch=True))
    options.append(st.text(min_size=low, max_size=high if high is not None else max(low, 40)))
    strategy = st.one_of(*options)
    return strategy.filter(lambda s: low <= len(s) <= (high if high is not None else len(s)))


def property_strategies(tool: ToolDef, ids: dict[str, list[str]], json_only: bool) -> dict[str, st.SearchStrategy[Any]]:
    """A valid-value strategy for each of the tool's parameters (built once: building is slow)."""
    return {name: valid_for(prop, ids, json_only) for name, prop in tool.spec.parameters.get("properties", {}).items()}


@st.composite
def arguments(draw: Any, base: dict[str, Any], valid: dict[str, st.SearchStrategy[Any]], json_only: bool) -> Any:
    """Arguments for a tool: each parameter kept from the example, drawn valid, hostile, or left
    out; sometimes extra keys; now and then not an object at all."""
    if draw(st.integers(0, 40)) == 0:
        return draw(st.one_of(st.lists(scalars(json_only), max_size=3), small_text(), st.integers(), st.none()))
    out: dict[str, Any] = {}
    for name, strategy in valid.items():
        how = draw(st.sampled_from(["example", "valid", "valid", "valid", "hostile", "leave out"]))
        if how == "example" and name in base:
            out[name] = base[name]
        elif how == "valid" or (how == "example" and name not in base):
            out[name] = draw(strategy)
        elif how == "hostile":
            out[name] = draw(hostile(json_only))
    if draw(st.integers(0, 8)) == 0:
        out.update(draw(st.dictionaries(extra_keys(), hostile(json_only), min_size=1, max_size=3)))
    return out


@functools.cache
def extra_keys() -> st.SearchStrategy[str]:
    return st.one_of(small_text(), st.sampled_from(["", "__proto__", "__class__", "constructor", "x" * 10_000]))


# -- the subjects --------------------------------------------------------------------------------


@attrs.frozen
class Subject:
    """One tool ready to fuzz: the state its example prepared, the example, and its argument
    strategies (``fast`` with any Python value, ``mcp`` with JSON values only)."""

    server: Server = attrs.field(repr=lambda s: s.name)
    tool: ToolDef = attrs.field(repr=lambda t: t.name)
    snapshot: Any = attrs.field(repr=False)
    base: dict[str, Any]
    fast: st.SearchStrategy[Any] = attrs.field(repr=False)
    mcp: st.SearchStrategy[Any] = attrs.field(repr=False)


def record_ids(state: State) -> dict[str, list[str]]:
    """Up to 30 ids of each entity in ``state`` (under its entity name), and all of them under '*'."""
    out: dict[str, list[str]] = collections.defaultdict(list)
    for attr, table in type(state)._table_specs.items():
        found = [r["id"] for r in getattr(state, attr).all()[:30]]
        out[table.entity] += found
        out["*"] += found[:3]
    return dict(out)


def subjects(server: Server, seed: int = 0) -> list[Subject]:
    rt = ServerRuntime(server, seed=seed)
    out = []
    for tool in server.tools.values():
        sid = rt.new_session()
        base = example_at(tool, rt, sid, 0) if tool.examples else {}
        state = rt.state(sid)
        ids, base = record_ids(state), json.loads(json.dumps(base))
        fast = arguments(base, property_strategies(tool, ids, False), False)
        mcp = arguments(base, property_strategies(tool, ids, True), True).filter(lambda a: isinstance(a, dict))
        out.append(Subject(server, tool, state.snapshot(), base, fast, mcp))
    return out


# -- the checks ----------------------------------------------------------------------------------


@attrs.define
class Tally:
    """Case counts by outcome, and every problem found."""

    cases: collections.Counter = attrs.field(factory=collections.Counter)
    problems: list[str] = attrs.field(factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.cases.values())

    def count(self, result: ToolResult) -> None:
        self.cases["success" if not result.is_error else result.code] += 1


def problems_of(result: ToolResult, changed: bool, read_only: bool, elapsed: float) -> list[str]:
    """What is wrong with one call's outcome (nothing, for a success or a typed error)."""
    found = []
    if result.is_error:
        error = result.error
        if error.get("code") not in TYPED:
            found.append(f"{error.get('code')} {error.get('reason')}: {str(error.get('message'))[:200]}")
        if not isinstance(error.get("message"), str) or not isinstance(error.get("reason"), str):
            found.append(f"malformed error {str(error)[:200]}")
        if changed:
            found.append(f"rejected with {error.get('reason')} but changed the state")
    else:
        if not isinstance(result.data, dict):
            found.append(f"success without a JSON object: {str(result.data)[:100]}")
        else:
            try:
                json.dumps(result.data, allow_nan=False)
            except (TypeError, ValueError) as exc:
                found.append(f"success that is not strict JSON: {exc}")
        if changed and read_only:
            found.append("a read-only tool changed the state")
    if elapsed > TIME_LIMIT_S:
        found.append(f"took {elapsed:.1f} s")
    return found


def shown(args: Any) -> str:
    text = json.dumps(args, default=str, ensure_ascii=True)
    return text if len(text) < 200 else text[:120] + f"... ({len(text)} chars)"


def fast_case(rt: ServerRuntime, subject: Subject, args: Any, tally: Tally) -> list[str]:
    """One call on the fast path, on a fresh session holding the example's prepared state."""
    sid = rt.new_session(snapshot=subject.snapshot)
    state = rt.state(sid)
    before = state.snapshot()
    started = time.perf_counter()
    try:
        result = rt.call(sid, subject.tool.name, args)
    except BaseException as exc:  # noqa: BLE001 - the fast path must never raise
        return [f"{subject.server.name}.{subject.tool.name} raised {type(exc).__name__}: {exc} on {shown(args)}"]
    finally:
        elapsed = time.perf_counter() - started
    tally.count(result)
    found = problems_of(result, state.changed_since(before), subject.tool.spec.annotations.read_only, elapsed)
    rt.close(sid)
    return [f"{subject.server.name}.{subject.tool.name}({shown(args)}): {p}" for p in found]


def same_state(a: State, b: State) -> bool:
    return a._tables == b._tables and a._counters == b._counters and a._vars == b._vars


def mcp_case(call: Any, served: ServerRuntime, fast: ServerRuntime, subject: Subject, args: dict[str, Any],
             tally: Tally) -> list[str]:
    """One call over MCP (``call(name, args, session_id)`` returns the CallToolResult) next to the
    same call on the fast path, both on fresh sessions holding the example's prepared state."""
    sid = f"fuzz-{uuid.uuid4().hex}"
    served.new_session(snapshot=subject.snapshot, session_id=sid)
    fast.new_session(snapshot=subject.snapshot, session_id=sid)
    state = served.state(sid)
    before = state.snapshot()
    started = time.perf_counter()
    try:
        got = call(subject.tool.name, args, sid)
    except Exception as exc:  # noqa: BLE001
        return [f"{subject.server.name}.{subject.tool.name} over MCP raised {type(exc).__name__}: {exc} on {shown(args)}"]
    elapsed = time.perf_counter() - started
    result = ToolResult(error=got.structured_content) if got.is_error else ToolResult(data=got.structured_content)
    tally.count(result)
    found = problems_of(result, state.changed_since(before), subject.tool.spec.annotations.read_only, elapsed)
    want = fast.call(sid, subject.tool.name, args)
    if bool(got.is_error) != want.is_error or got.structured_content != want.structured:
        found.append(f"MCP gave {shown(got.structured_content)}, the fast path {shown(want.structured)}")
    if not same_state(state, fast.state(sid)):
        found.append("end states differ between the paths")
    served.close(sid)
    fast.close(sid)
    return [f"{subject.server.name}.{subject.tool.name}({shown(args)}) over MCP: {p}" for p in found]


# -- runs ----------------------------------------------------------------------------------------

FUZZ_SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck), print_blob=True)


def fuzz_fast(server: Server, *, cases_per_tool: int, seed: int | None = None, raise_on_problem: bool = True,
              tally: Tally | None = None, call_timeout_s: float | None = None) -> Tally:
    """Fuzz every tool of ``server`` on the fast path. With ``raise_on_problem`` the first problem
    fails (and hypothesis shrinks it); otherwise problems are collected in the tally."""
    tally = tally or Tally()
    rt = ServerRuntime(server, max_sessions=10**6, call_timeout_s=call_timeout_s)
    subs = subjects(server)
    started = time.perf_counter()

    @settings(max_examples=cases_per_tool * len(subs), derandomize=seed is None, **FUZZ_SETTINGS)
    @given(st.data())
    def run(data: Any) -> None:
        subject = data.draw(st.sampled_from(subs), label="tool")
        args = data.draw(subject.fast, label="arguments")
        found = fast_case(rt, subject, args, tally)
        if found and raise_on_problem:
            raise AssertionError("\n".join(found))
        tally.problems += found

    _seeded(run, seed)()
    for subject in subs:  # still serving: every example works afterwards
        result = rt.call(rt.new_session(snapshot=subject.snapshot), subject.tool.name, subject.base)
        if result.is_error and subject.tool.examples:
            tally.problems.append(f"{server.name}.{subject.tool.name}: its example fails after fuzzing: {result.error}")
    tally.seconds += time.perf_counter() - started
    return tally


def fuzz_mcp(server: Server, *, cases_per_tool: int, seed: int | None = None, raise_on_problem: bool = True,
             tally: Tally | None = None) -> Tally:
    """Fuzz every tool of ``server`` over MCP (fastmcp's in-memory client), checked against the
    fast path."""
    from anyio.from_thread import start_blocking_portal
    from fastmcp import Client

    from prove_core.serve.app import build_app

    tally = tally or Tally()
    served, fast = ServerRuntime(server, max_sessions=10**6), ServerRuntime(server, max_sessions=10**6)
    subs = subjects(server)
    started = time.perf_counter()
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(build_app([served]))) as client:
        def call(name: str, args: dict[str, Any], sid: str) -> Any:
            return portal.call(functools.partial(client.call_tool_mcp, name, args, meta={"session_id": sid}))

        @settings(max_examples=cases_per_tool * len(subs), derandomize=seed is None, **FUZZ_SETTINGS)
        @given(st.data())
        def run(data: Any) -> None:
            subject = data.draw(st.sampled_from(subs), label="tool")
            args = data.draw(subject.mcp, label="arguments")
            found = mcp_case(call, served, fast, subject, args, tally)
            if found and raise_on_problem:
                raise AssertionError("\n".join(found))
            tally.problems += found

        _seeded(run, seed)()
        if call("__no_such_tool__", {}, "fuzz-unknown").structured_content.get("code") != "UNKNOWN_TOOL":
            tally.problems.append(f"{server.name}: an unknown tool is not UNKNOWN_TOOL over MCP")
    tally.seconds += time.perf_counter() - started
    return tally


def _seeded(test: Any, seed: int | None) -> Any:
    from hypothesis import seed as hypothesis_seed

    return test if seed is None else hypothesis_seed(seed)(test)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", nargs="+", default=None, help="servers to fuzz (default: every registered one)")
    parser.add_argument("--fast", type=int, default=200, help="cases per tool on the fast path")
    parser.add_argument("--mcp", type=int, default=20, help="cases per tool over MCP")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: a random one, printed)")
    parser.add_argument("--quick", action="store_true", help="20 and 3 cases per tool (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    ns = parser.parse_args()
    from prove_core.logging import configure
    from prove_core.plugin.manager import Plugins

    configure(level="warning")
    if ns.quick:
        ns.fast, ns.mcp = 20, 3
    seed = ns.seed if ns.seed is not None else random.randrange(2**32)
    registry = Plugins().load(autoload=False).registry
    names = ns.servers or registry.names("servers")
    fast, mcp = Tally(), Tally()
    for name in names:
        server = registry.load("servers", name)
        fuzz_fast(server, cases_per_tool=ns.fast, seed=seed, raise_on_problem=False, tally=fast)
        fuzz_mcp(server, cases_per_tool=ns.mcp, seed=seed, raise_on_problem=False, tally=mcp)
        problems = len(fast.problems) + len(mcp.problems)
        print(f"{name:<16} fast path {fast.total:>8,} cases so far, MCP {mcp.total:>7,}; problems {problems}", flush=True)
    tools = sum(len(registry.load("servers", n).tools) for n in names)
    fast_rate, mcp_rate = fast.total / max(fast.seconds, 1e-9), mcp.total / max(mcp.seconds, 1e-9)
    print(f"\nseed {seed}: {len(names)} servers, {tools} tools")
    for label, tally, rate in (("fast path", fast, fast_rate), ("MCP", mcp, mcp_rate)):
        outcomes = ", ".join(f"{k} {v:,}" for k, v in tally.cases.most_common())
        print(f"{label:<10} {tally.total:>8,} cases in {tally.seconds:.1f} s ({rate:,.0f} cases/s): {outcomes}")
    print(f"ratio      fast path / MCP cases per second: {fast_rate / max(mcp_rate, 1e-9):.1f}x")
    problems = fast.problems + mcp.problems
    print(f"problems   {len(problems)}")
    for problem in problems[:30]:
        print("  " + problem)
    if ns.json:
        paths = {label: {"cases": t.total, "outcomes": dict(t.cases), "seconds": round(t.seconds, 1)}
                 for label, t in (("fast", fast), ("mcp", mcp))}
        ns.json.write_text(json.dumps({"seed": seed, "servers": len(names), "tools": tools, **paths,
                                       "problems": problems}, indent=2))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
