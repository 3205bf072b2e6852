"""The conformance kit: what every PROVE server must guarantee, checked against any server.

``audit(server)`` runs every check and returns a report (``prove audit NAME`` prints it);
``ServerConformance`` runs the same checks as pytest tests. The checks:

- ``schemas``: every tool's parameters are valid JSON Schema (draft 2020-12) of type object,
  closed to unknown keys, with a description on the tool and on every parameter;
- ``reachable``: every tool has an example that succeeds on a fresh session;
- ``determinism``: the same seed gives the same ``state_hash`` (also in a fresh process); another
  seed gives another state; two fresh processes with different string-hash seeds get the same
  results from every tool (examples, unknown keys, no arguments) and end in the same state;
- ``reset``: after writes, ``reset`` restores the seed state;
- ``isolation``: writes in one session are invisible to another;
- ``bad_input``: missing, extra and wrong-typed arguments and an unknown tool give typed errors
  and change nothing;
- ``annotations``: read-only tools change nothing; idempotent tools change nothing when repeated;
- ``path_equivalence``: over MCP (fastmcp in-memory client) every example and a bad call give
  the same result, error and end state as the fast path; the published schemas are the same.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import jsonschema

from prove_core.env.runtime import ServerRuntime, ToolResult
from prove_core.toolkit.server import Server, ToolDef

NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"


@attrs.frozen
class Check:
    name: str
    ok: bool
    detail: str


@attrs.define
class AuditReport:
    server: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def passed(self) -> int:
        return sum(c.ok for c in self.checks)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "ok": self.ok, "checks": [attrs.asdict(c) for c in self.checks]}


class _Problems(list):
    def verdict(self, name: str, ok_detail: str) -> Check:
        if self:
            shown = "; ".join(self[:5]) + (f" (+{len(self) - 5} more)" if len(self) > 5 else "")
            return Check(name, False, shown)
        return Check(name, True, ok_detail)


def example_args(tool: ToolDef, runtime: ServerRuntime, session_id: str) -> Iterator[dict[str, Any]]:
    """The tool's example arguments for this session. A callable example computes them from the
    session's state and may prepare that state (e.g. create the loan a renewal needs), so the
    arguments are only valid on the session they were computed on."""
    for index in range(len(tool.examples)):
        yield example_at(tool, runtime, session_id, index)


def example_at(tool: ToolDef, runtime: ServerRuntime, session_id: str, index: int) -> dict[str, Any]:
    example = tool.examples[index]
    return dict(example(runtime.state(session_id)) if callable(example) else example)


def check_schemas(server: Server, seed: int) -> Check:
    problems = _Problems()

    for spec in server.specs():
        where = f"{server.name}.{spec.name}"
        if not re.match(NAME_PATTERN, spec.name):
            problems.append(f"{where}: name must match {NAME_PATTERN}")
        if not spec.description.strip():
            problems.append(f"{where}: no description")
        try:
            jsonschema.Draft202012Validator.check_schema(spec.parameters)
        except jsonschema.SchemaError as exc:
            problems.append(f"{where}: invalid JSON Schema: {exc.message}")
            continue
        if spec.parameters.get("type") != "object":
            problems.append(f"{where}: parameters must be an object schema")
        if spec.parameters.get("additionalProperties") is not False:
            problems.append(f"{where}: parameters must set additionalProperties: false")
        for pname, prop in spec.parameters.get("properties", {}).items():
            if not str(prop.get("description", "")).strip():
                problems.append(f"{where}: parameter {pname!r} has no description")
        if spec.annotations.read_only and (spec.mutates or spec.produces):
            problems.append(f"{where}: read-only but declares mutates/produces")
    return problems.verdict("schemas", f"{len(server.tools)} tool schemas valid and described")


def check_reachable(server: Server, seed: int) -> Check:
    problems = _Problems()
    rt = ServerRuntime(server, seed=seed)
    for tool in server.tools.values():
        if not tool.examples:
            problems.append(f"{tool.name}: no example arguments")
            continue
        for i in range(len(tool.examples)):
            sid = rt.new_session()
            args = example_at(tool, rt, sid, i)
            result = rt.call(sid, tool.name, args)
            if result.is_error:
                problems.append(f"{tool.name}({json.dumps(args)}) failed: {result.error['reason']}: {result.error['message']}")
    return problems.verdict("reachable", f"all {len(server.tools)} tools succeed on their examples")


EXTRA_KEYS = ("zeta_extra", "alpha_extra", "kappa_extra", "beta_extra", "omega_extra", "delta_extra")


def call_digests(server: Server, seed: int) -> dict[str, str]:
    """A digest per tool of what it returns on a fresh session: each example, the example with
    unknown keys added and the call with no arguments, then the session's end state. Two
    processes must agree on it whatever their string-hash seed (set order, ``hash()``)."""
    import hashlib

    rt = ServerRuntime(server)
    digests = {"(seed state)": rt.state_hash(rt.new_session(seed=seed))}
    for name in sorted(server.tools):
        tool = server.tools[name]
        sid = rt.new_session(seed=seed)
        outcomes = []
        for index in range(len(tool.examples)):
            args = example_at(tool, rt, sid, index)
            for call in (args, {**args, **dict.fromkeys(EXTRA_KEYS, 1)}, {}):
                result = rt.call(sid, name, call)
                outcomes.append([result.is_error, result.structured])
        outcomes.append(rt.state_hash(sid))
        rt.close(sid)
        digests[name] = hashlib.sha256(json.dumps(outcomes, sort_keys=True, default=str).encode()).hexdigest()
    return digests


def _in_fresh_process(server: Server, seed: int, hash_seed: int) -> dict[str, str]:
    module = server.seed_fn.__module__
    code = (
        "import importlib, json\n"
        "from prove_core.testing.conformance import call_digests\n"
        "from prove_core.toolkit.server import Server\n"
        f"mod = importlib.import_module({module!r})\n"
        f"srv = next(v for v in vars(mod).values() if isinstance(v, Server) and v.name == {server.name!r})\n"
        f"print(json.dumps(call_digests(srv, {seed})))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"fresh process failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_determinism(server: Server, seed: int) -> Check:
    first = server.build_state(seed).state_hash()
    problems = _Problems()
    if server.build_state(seed).state_hash() != first:
        problems.append("two builds with the same seed differ")
    if server.build_state(seed + 1).state_hash() == first:
        problems.append(f"seeds {seed} and {seed + 1} give the same state")
    try:
        # Two fresh processes with different string-hash seeds play the same calls.
        one, two = (_in_fresh_process(server, seed, hash_seed) for hash_seed in (12345, 54321))
        if one["(seed state)"] != first:
            problems.append(f"another process computes {one['(seed state)'][:12]} instead of {first[:12]}")
        differ = [key for key in one if one[key] != two.get(key)]
        if differ:
            problems.append(f"results differ between processes with other hash seeds: {', '.join(differ[:8])}")
    except Exception as exc:  # noqa: BLE001 - reported as a failed check
        problems.append(str(exc))
    return problems.verdict("determinism", f"seed {seed} -> {first[:12]} in this and two fresh processes, "
                                           f"and every tool's results the same in both")


def _run_all_examples(rt: ServerRuntime, sid: str) -> int:
    changed = 0
    for tool in rt.server.tools.values():
        if tool.spec.annotations.read_only:
            continue
        for args in example_args(tool, rt, sid):
            before = rt.state_hash(sid)
            rt.call(sid, tool.name, args)
            changed += rt.state_hash(sid) != before
    return changed


def check_reset(server: Server, seed: int) -> Check:
    rt = ServerRuntime(server, seed=seed)
    sid = rt.new_session()
    seed_hash = rt.state_hash(sid)
    changed = _run_all_examples(rt, sid)
    problems = _Problems()
    if changed == 0 and any(not t.spec.annotations.read_only for t in server.tools.values()):
        problems.append("no write example changed the state")
    rt.reset(sid)
    if rt.state_hash(sid) != seed_hash:
        problems.append("reset did not restore the seed state")
    return problems.verdict("reset", f"reset restores the seed state after {changed} writes")


def check_isolation(server: Server, seed: int) -> Check:
    rt = ServerRuntime(server, seed=seed)
    a, b = rt.new_session(), rt.new_session()
    b_hash = rt.state_hash(b)
    changed = _run_all_examples(rt, a)
    problems = _Problems()
    if rt.state_hash(b) != b_hash:
        problems.append("writes in one session changed another session")
    if changed and rt.state_hash(a) == b_hash:
        problems.append("writes were not kept in their own session")
    forked = rt.fork(a)
    if rt.state_hash(forked) != rt.state_hash(a):
        problems.append("a fork differs from its source")
    return problems.verdict("isolation", f"{changed} writes stayed in their session; forks copy state")


_WRONG_VALUE = {"string": 12345, "integer": "not-a-number", "number": "not-a-number", "boolean": "yes",
                "array": "not-a-list", "object": "not-an-object"}


def bad_calls(tool: ToolDef, base: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(label, arguments) pairs that a correct server must reject with INVALID_ARGUMENT."""
    params = tool.spec.parameters
    for required in params.get("required", []):
        yield f"missing {required}", {k: v for k, v in base.items() if k != required}
    yield "extra key", {**base, "__unexpected__": 1}
    yield "arguments not an object", ["not", "an", "object"]
    for pname, prop in params.get("properties", {}).items():
        wrong = _WRONG_VALUE.get(prop.get("type", ""))
        if wrong is not None:
            yield f"{pname} wrong type", {**base, pname: wrong}


def check_bad_input(server: Server, seed: int) -> Check:
    rt = ServerRuntime(server, seed=seed)
    sid = rt.new_session()
    problems = _Problems()
    cases = 0
    for tool in server.tools.values():
        base = next(example_args(tool, rt, sid), {})
        for label, args in bad_calls(tool, base):
            before = rt.state_hash(sid)
            result = rt.call(sid, tool.name, args)
            cases += 1
            if result.code != "INVALID_ARGUMENT":
                problems.append(f"{tool.name} {label}: expected INVALID_ARGUMENT, got {result.code or 'success'}")
            if rt.state_hash(sid) != before:
                problems.append(f"{tool.name} {label}: rejected call changed the state")
    before = rt.state_hash(sid)
    if rt.call(sid, "__no_such_tool__", {}).code != "UNKNOWN_TOOL":
        problems.append("an unknown tool did not give UNKNOWN_TOOL")
    if rt.state_hash(sid) != before:
        problems.append("an unknown tool changed the state")
    return problems.verdict("bad_input", f"{cases + 1} bad calls rejected with typed errors, state unchanged")


def check_annotations(server: Server, seed: int) -> Check:
    rt = ServerRuntime(server, seed=seed)
    problems = _Problems()
    for tool in server.tools.values():
        ann = tool.spec.annotations
        for i in range(len(tool.examples)):
            sid = rt.new_session()
            args = example_at(tool, rt, sid, i)
            before = rt.state_hash(sid)
            rt.call(sid, tool.name, args)
            after_one = rt.state_hash(sid)
            if ann.read_only and after_one != before:
                problems.append(f"{tool.name} is marked read-only but changed the state")
            if ann.idempotent and not ann.read_only:
                rt.call(sid, tool.name, args)
                if rt.state_hash(sid) != after_one:
                    problems.append(f"{tool.name} is marked idempotent but a repeat changed the state")
    return problems.verdict("annotations", "read-only and idempotent hints hold on every example")


async def _mcp_calls(runtime: ServerRuntime, calls: list[tuple[str, str, Any]]) -> tuple[list[Any], list[Any]]:
    from fastmcp import Client

    from prove_core.env.serving import build_app

    results = []
    async with Client(build_app([runtime])) as client:
        tools = await client.list_tools()
        for sid, name, args in calls:
            results.append(await client.call_tool_mcp(name, args, meta={"session_id": sid}))
    return tools, results


def check_path_equivalence(server: Server, seed: int) -> Check:
    fast, served = ServerRuntime(server, seed=seed), ServerRuntime(server, seed=seed)
    problems = _Problems()
    calls: list[tuple[str, str, Any]] = []
    expected: list[ToolResult] = []
    for i, tool in enumerate(server.tools.values()):
        sid = f"equivalence-{i}"
        args_list = list(example_args(tool, fast, sid))
        if list(example_args(tool, served, sid)) != args_list:  # same preparation on both sides
            problems.append(f"{tool.name}: examples are not deterministic")
        bad = next((a for label, a in bad_calls(tool, args_list[0] if args_list else {}) if label.endswith("wrong type")), None)
        for args in [*args_list, *([bad] if bad is not None else [])]:
            calls.append((sid, tool.name, args))
            expected.append(fast.call(sid, tool.name, args))
    calls.append(("equivalence-unknown", "__no_such_tool__", {}))
    expected.append(fast.call("equivalence-unknown", "__no_such_tool__", {}))
    try:
        tools, results = asyncio.run(_mcp_calls(served, calls))
    except Exception as exc:  # noqa: BLE001
        return Check("path_equivalence", False, f"MCP path failed: {type(exc).__name__}: {exc}")
    published = {t.name: t for t in tools}
    if set(published) != set(server.tools):
        problems.append(f"MCP lists {sorted(set(published) ^ set(server.tools))} differently")
    for name, tool in server.tools.items():
        mcp_tool = published.get(name)
        if mcp_tool is None:
            continue
        if mcp_tool.input_schema != tool.spec.parameters:
            problems.append(f"{name}: MCP input schema differs from the fast path's")
        hints = mcp_tool.annotations
        if hints is None or bool(hints.read_only_hint) != tool.spec.annotations.read_only:
            problems.append(f"{name}: readOnlyHint not published truthfully")
    for (sid, name, args), want, got in zip(calls, expected, results):
        got_structured = got.structured_content
        if bool(got.is_error) != want.is_error or got_structured != want.structured:
            problems.append(f"{name}({json.dumps(args)[:60]}): MCP gave {json.dumps(got_structured)[:80]}, fast path {json.dumps(want.structured)[:80]}")
    for sid in {c[0] for c in calls}:
        if served.state_hash(sid) != fast.state_hash(sid):
            problems.append(f"session {sid}: end states differ between paths")
    return problems.verdict("path_equivalence", f"{len(calls)} calls agree over MCP and the fast path")


CHECKS: tuple[Callable[[Server, int], Check], ...] = (
    check_schemas,
    check_reachable,
    check_determinism,
    check_reset,
    check_isolation,
    check_bad_input,
    check_annotations,
    check_path_equivalence,
)


def audit(server: Server, *, seed: int = 0) -> AuditReport:
    checks = []
    for fn in CHECKS:
        name = fn.__name__.removeprefix("check_")
        try:
            checks.append(fn(server, seed))
        except Exception as exc:  # noqa: BLE001 - a crashing check is a failed check
            checks.append(Check(name, False, f"check crashed: {type(exc).__name__}: {exc}"))
    return AuditReport(server.name, checks)


def load_server(module: str, name: str) -> Server:
    mod = importlib.import_module(module)
    return next(v for v in vars(mod).values() if isinstance(v, Server) and v.name == name)
