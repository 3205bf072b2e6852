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
- ``annotations``: the hints hold on every example, called once and again with the same
  arguments: a read-only tool changes nothing, an idempotent one nothing more when repeated, and
  one not marked destructive removes no record (see ``ToolAnnotations``);
- ``unknown_ids``: a well-formed id that names no record (a fresh id from the state's generator,
  or an example's value with its letters and digits shifted) in any ``ref`` parameter gives a
  typed error: never INTERNAL, never a success that stores it, and for a required parameter never
  a success at all;
- ``declared_failures``: every failure reason a tool gives during the audit (examples on fresh
  and shared sessions, repeats, no arguments, unknown ids) is among its declared ``errors``
  (not on a ``benchmark`` server, whose wrapped tools fail with the wrapper's generic reasons);
- ``documented_failures``: every declared reason is named in the tool's description or in a
  parameter's description (``<ENTITY>_NOT_FOUND`` is implied by a ``ref(entity)`` parameter);
- ``entity_names``: every entity name in ``ref``/``reads``/``produces``/``mutates`` is held by a
  table or shared with another tool; one that links nothing is reported with a "did you mean";
- ``phrasings``: every tool that declares ``asks`` follows the phrasing rules of
  ``prove_core.toolkit.phrasing`` for its examples' arguments (slots name parameters, required
  values are said, at least three phrasings, no spelled-out identifiers), and every ``values``
  source gives schema-valid, varied values; tools without ``asks`` pass and are counted (synthesis
  words them generically); not checked on a ``benchmark`` server, which synthesis never uses;
- ``path_equivalence``: over MCP (fastmcp in-memory client) every example and a bad call give
  the same result, error and end state as the fast path; the published schemas and hints are the same.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import jsonschema

from prove_core.env.runtime import ServerRuntime, ToolResult, build_runtime, example_at
from prove_core.toolkit.phrasing import answer_problems
from prove_core.toolkit.server import Server, ToolDef
from prove_core.toolkit.state import Snapshot, State

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


class _Problems(list[str]):
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
    rt = build_runtime(server, seed=seed)
    for tool in server.tools.values():
        if not tool.examples:
            problems.append(f"{tool.name}: no example arguments")
            continue
        for i in range(len(tool.examples)):
            sid = rt.new_session()
            args = example_at(tool, rt, sid, i)
            result = rt.call(sid, tool.name, args)
            if result.error is not None:
                problems.append(f"{tool.name}({json.dumps(args)}) failed: {result.error['reason']}: {result.error['message']}")
    return problems.verdict("reachable", f"all {len(server.tools)} tools succeed on their examples")


EXTRA_KEYS = ("zeta_extra", "alpha_extra", "kappa_extra", "beta_extra", "omega_extra", "delta_extra")


def call_digests(server: Server, seed: int) -> dict[str, str]:
    """A digest per tool of what it returns on a fresh session: each example, the example with
    unknown keys added and the call with no arguments, then the session's end state. Two
    processes must agree on it whatever their string-hash seed (set order, ``hash()``)."""
    import hashlib

    rt = build_runtime(server)
    digests = {"(seed state)": rt.state_hash(rt.new_session(seed=seed))}
    for name in sorted(server.tools):
        tool = server.tools[name]
        sid = rt.new_session(seed=seed)
        outcomes: list[object] = []  # [is_error, content] per call, then the end state's hash
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
    digests: dict[str, str] = json.loads(out.stdout.strip().splitlines()[-1])  # call_digests' output
    return digests


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
    rt = build_runtime(server, seed=seed)
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
    rt = build_runtime(server, seed=seed)
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
    rt = build_runtime(server, seed=seed)
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


def removed_records(before: Snapshot, after: Snapshot) -> list[str]:
    """``table/id`` of every record in ``before`` that ``after`` no longer holds (tables that were
    not written are skipped by identity, so this costs nothing for a call that changed nothing)."""
    removed = []
    for name, table in before.tables.items():
        if "#" in name:  # an index kept beside a table, not records
            continue
        now = after.tables.get(name)
        if now is table:
            continue
        removed += [f"{name}/{rid}" for rid in table.keys() if now is None or rid not in now]
    return sorted(removed)


def check_annotations(server: Server, seed: int) -> Check:
    """Each tool's hints hold on each of its examples, called once and then again with the same
    arguments (see ``ToolAnnotations`` for what each hint promises)."""
    rt = build_runtime(server, seed=seed)
    problems = _Problems()
    for tool in server.tools.values():
        ann = tool.spec.annotations
        for i in range(len(tool.examples)):
            sid = rt.new_session()
            args = example_at(tool, rt, sid, i)
            snap, before = rt.state(sid).snapshot(), rt.state_hash(sid)
            rt.call(sid, tool.name, args)
            after_one, snap_one = rt.state_hash(sid), rt.state(sid).snapshot()
            found = []
            if ann.read_only and after_one != before:
                found.append(f"{tool.name} is marked read-only but changed the state")
            rt.call(sid, tool.name, args)
            if ann.idempotent and rt.state_hash(sid) != after_one:
                found.append(f"{tool.name} is marked idempotent but a repeat changed the state")
            if not ann.destructive:
                gone = removed_records(snap, snap_one) or removed_records(snap_one, rt.state(sid).snapshot())
                if gone:
                    found.append(f"{tool.name} is not marked destructive but removed {len(gone)} record(s) "
                                 f"({', '.join(gone[:3])}): set destructive=True")
            problems.extend(f for f in found if not any(p.split(" (")[0] == f.split(" (")[0] for p in problems))
            rt.close(sid)
    return problems.verdict("annotations", "read-only, idempotent and destructive hints hold on every example")


# -- unknown ids -------------------------------------------------------------------------------

_UNKNOWN_SALT = "prove-audit-unknown-id"
# Reasons the runtime gives before or instead of running a tool: no tool declares them.
RUNTIME_REASONS = frozenset({"SCHEMA_VIOLATION", "UNKNOWN_TOOL", "TOO_MANY_SESSIONS", "CALL_TIMEOUT",
                             "TOOL_CRASHED", "BAD_SESSION_ID", "SESSION_EXPIRED", "UNKNOWN_SESSION"})


def _shifted(value: str, k: int) -> str:
    """``value`` with every letter and digit moved ``k`` places in its class (``AAPL`` -> ``BBQM``,
    ``ABC-12345`` -> ``BCD-23456``): the same shape, so a pattern that accepts one accepts the other."""
    out = []
    for c in value:
        if "a" <= c <= "z":
            out.append(chr((ord(c) - 97 + k) % 26 + 97))
        elif "A" <= c <= "Z":
            out.append(chr((ord(c) - 65 + k) % 26 + 65))
        elif "0" <= c <= "9":
            out.append(chr((ord(c) - 48 + k) % 10 + 48))
        else:
            out.append(c)
    return "".join(out)


def unknown_value(tool: ToolDef, runtime: ServerRuntime, session_id: str, param: str, entity: str,
                  args: dict[str, Any]) -> Any:
    """A well-formed value for ``param`` (a ``ref(entity)``) that names nothing in the session.

    Where ``args`` hold an id of the entity's table, it is a fresh id from the state's own id
    generator (``acc_...``) under another salt; otherwise the value in ``args`` with its letters
    and digits shifted (a ticker, a SKU, a path). Only values that the tool's schema accepts and
    that occur nowhere in the session's state qualify; None if there is none."""
    prop = tool.spec.parameters["properties"][param]
    current = args.get(param)
    is_list = prop.get("type") == "array"
    sample = (current[0] if current else None) if is_list else current
    tables = {t.entity: t.prefix for t in runtime.server.state_type._table_specs.values()}
    prefix = tables.get(entity)
    candidates: list[str] = []
    probe = State(salt=_UNKNOWN_SALT)
    if prefix is not None and (sample is None or (isinstance(sample, str) and sample.startswith(prefix + "_"))):
        candidates += [probe.new_id(prefix) for _ in range(3)]
    if isinstance(sample, str):
        candidates += [_shifted(sample, k) for k in (1, 3, 7, 11)] + [sample + "_x9", sample.rstrip("/") + "/x9"]
    text = json.dumps(runtime.state(session_id).to_json(), default=str)
    for candidate in candidates:
        if candidate == sample or json.dumps(candidate) in text:
            continue
        value = [candidate] if is_list else candidate
        try:
            tool.validate({**args, param: value})
        except Exception:  # noqa: BLE001 - not well-formed for this parameter: try the next
            continue
        return value
    return None


@attrs.frozen
class UnknownIdCase:
    tool: ToolDef
    session_id: str
    param: str
    entity: str
    args: dict[str, Any]
    in_example: bool  # the example names this parameter (else it was added to it)


def unknown_id_cases(runtime: ServerRuntime) -> Iterator[UnknownIdCase]:
    """For every example of every tool and every ``ref`` parameter, the example with that
    parameter set to a well-formed unknown id, each on its own fresh session."""
    for tool in runtime.server.tools.values():
        refs = tool.spec.entity_params()
        for index in range(len(tool.examples) if refs else 0):
            for param, entity in refs.items():
                sid = runtime.new_session()
                args = example_at(tool, runtime, sid, index)
                value = unknown_value(tool, runtime, sid, param, entity, args)
                if value is None:
                    runtime.close(sid)
                    continue
                yield UnknownIdCase(tool, sid, param, entity, {**args, param: value}, param in args)


def check_unknown_ids(server: Server, seed: int) -> Check:
    """A well-formed id that names no record gives a typed error, never a crash or a silent
    success: each ``ref`` parameter of each example is given an unknown id in turn."""
    rt = build_runtime(server, seed=seed)
    problems = _Problems()
    cases = 0
    for case in unknown_id_cases(rt):
        cases += 1
        tool, value = case.tool, case.args[case.param]
        where = f"{tool.name}({case.param}={json.dumps(value)})"
        result = rt.call(case.session_id, tool.name, case.args)
        if result.code == "INTERNAL":
            problems.append(f"{where}: an unknown {case.entity} id crashed the tool: {(result.error or {})['message']}")
        elif not result.is_error:
            stored = json.dumps(value[0] if isinstance(value, list) else value) in json.dumps(
                rt.state(case.session_id).to_json(), default=str)
            if stored:
                problems.append(f"{where}: accepted an unknown {case.entity} id and stored it (a dangling reference)")
            elif case.in_example and case.param in tool.spec.parameters.get("required", []):
                problems.append(f"{where}: succeeded with an unknown {case.entity} id; expected a typed "
                                f"NOT_FOUND ({case.entity.upper()}_NOT_FOUND)")
        rt.close(case.session_id)
    return problems.verdict("unknown_ids", f"{cases} calls with well-formed unknown ids gave typed errors")


# -- failure reasons ---------------------------------------------------------------------------

def observed_failures(server: Server, seed: int) -> dict[str, dict[str, str]]:
    """Tool -> reason -> one call that failed with it, over the audit's own calls: every example
    on a fresh session and repeated, every example in turn on one shared session, every tool with
    no arguments, and the unknown-id calls. Reasons of the runtime (``RUNTIME_REASONS``) and
    crashes (INTERNAL, reported by other checks) are left out."""
    rt = build_runtime(server, seed=seed)
    seen: dict[str, dict[str, str]] = {}

    def note(tool: str, args: Any, result: ToolResult) -> None:
        reason = str((result.error or {}).get("reason"))
        if result.is_error and result.code != "INTERNAL" and reason not in RUNTIME_REASONS:
            seen.setdefault(tool, {}).setdefault(reason, f"{tool}({json.dumps(args, default=str)[:80]})")

    shared = rt.new_session()
    for tool in server.tools.values():
        for index in range(len(tool.examples)):
            sid = rt.new_session()
            args = example_at(tool, rt, sid, index)
            for _ in range(2):
                note(tool.name, args, rt.call(sid, tool.name, args))
            rt.close(sid)
            try:  # on a session earlier examples wrote to (as in reset and isolation)
                args = example_at(tool, rt, shared, index)
            except Exception:  # noqa: BLE001 - an example that needs a fresh state: checked above
                continue
            note(tool.name, args, rt.call(shared, tool.name, args))
        note(tool.name, {}, rt.call(shared, tool.name, {}))
    for case in unknown_id_cases(rt):
        note(case.tool.name, case.args, rt.call(case.session_id, case.tool.name, case.args))
        rt.close(case.session_id)
    return seen


def check_declared_failures(server: Server, seed: int) -> Check:
    """Every failure reason a tool gave during the audit is among the reasons it declares."""
    if server.benchmark:  # wrapped benchmark code: its failures are the wrapper's generic reasons
        return Check("declared_failures", True, "not checked on a benchmark server: its tools are the benchmark's "
                                                "own, failing with the wrapper's generic reasons (BFCL_ERROR, ...)")
    problems = _Problems()
    observed = observed_failures(server, seed)
    for name, reasons in observed.items():
        declared = set(server.tools[name].spec.errors)
        for reason, call in sorted(reasons.items()):
            if reason not in declared:
                problems.append(f"{name} fails with {reason} (e.g. {call}) but does not declare it in errors=[...]")
    total = sum(len(r) for r in observed.values())
    return problems.verdict("declared_failures", f"all {total} failure reasons seen in the audit are declared")


def _descriptions(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        if isinstance(schema.get("description"), str):
            yield schema["description"]
        for value in schema.values():
            yield from _descriptions(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _descriptions(value)


def undocumented_failures(spec: Any) -> list[str]:
    """Declared reasons a model cannot read anywhere in the tool's description or its parameters'
    descriptions. ``<ENTITY>_NOT_FOUND`` of an entity the tool takes with ``ref`` is implied."""
    text = "\n".join([spec.description, *_descriptions(spec.parameters)])
    implied = {f"{entity.upper()}_NOT_FOUND" for entity in spec.entity_params().values()}
    return [r for r in spec.errors
            if r not in implied and not re.search(rf"(?<![A-Za-z0-9_]){re.escape(r)}(?![A-Za-z0-9_])", text)]


def check_documented_failures(server: Server, seed: int) -> Check:
    """Every declared failure reason is named in the description a model reads."""
    problems = _Problems()
    for spec in server.specs():
        missing = undocumented_failures(spec)
        if missing:
            problems.append(f"{spec.name} declares {', '.join(missing)} but its docstring (or a parameter's "
                            f"description) never names it")
    total = sum(len(s.errors) for s in server.specs())
    return problems.verdict("documented_failures", f"all {total} declared failure reasons are named in descriptions")


# -- entity names ------------------------------------------------------------------------------

def check_entity_names(server: Server, seed: int) -> Check:
    """Every entity name links tools: a ``ref(entity)`` parameter needs a table of that entity or
    another tool that reads, produces or mutates it; a ``reads``/``produces``/``mutates`` name needs
    a table or another tool that names it. A name that links nothing is usually a typo, which
    silently drops the dependency-graph edges it was meant to make."""
    import difflib

    tables = {t.entity for t in server.state_type._table_specs.values()}
    users: dict[str, set[str]] = {}  # entity -> tools that name it anywhere
    flows: dict[str, set[str]] = {}  # entity -> tools that read, produce or mutate it
    for spec in server.specs():
        for entity in (*spec.reads, *spec.produces, *spec.mutates):
            flows.setdefault(entity, set()).add(spec.name)
        for entity in (*spec.reads, *spec.produces, *spec.mutates, *spec.entity_params().values()):
            users.setdefault(entity, set()).add(spec.name)
    known = sorted(tables | set(users))
    problems = _Problems()

    def report(spec: Any, where: str, entity: str) -> None:
        close = difflib.get_close_matches(entity, [k for k in known if k != entity], n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(k for k in known if k != entity)})"
        problems.append(f"{spec.name}: {where} names entity {entity!r}, which no table holds and no other tool "
                        f"{'reads, produces or mutates' if where.startswith('ref') else 'names'}{hint}")

    for spec in server.specs():
        for param, entity in spec.entity_params().items():
            if entity not in tables and not (flows.get(entity, set()) - {spec.name}):
                report(spec, f"ref parameter {param!r}", entity)
        for role in ("reads", "produces", "mutates"):
            for entity in getattr(spec, role):
                if entity not in tables and not (users.get(entity, set()) - {spec.name}):
                    report(spec, role, entity)
    return problems.verdict("entity_names", f"{len(known)} entity names each link a table or another tool")


def check_answers(server: Server, seed: int) -> Check:
    """Every field a tool declares in ``answers`` is in the result of one of its examples (each on
    a fresh session), and none is a sensitive, id or bookkeeping field (``toolkit.phrasing``)."""
    rt = build_runtime(server, seed=seed)
    problems = _Problems()
    declared = [tool for tool in server.tools.values() if tool.answers]
    for tool in declared:
        results = []
        for i in range(len(tool.examples)):
            sid = rt.new_session()
            try:
                result = rt.call(sid, tool.name, example_at(tool, rt, sid, i))
            except Exception:  # noqa: BLE001 - an example that cannot be built is `reachable`'s finding
                continue
            if not result.is_error:
                results.append(result.data)
        problems.extend(answer_problems(tool, results))
    return problems.verdict("answers", f"{len(declared)} tools' answering fields appear in their examples' results")


# -- phrasings ------------------------------------------------------------------------------------

def phrasing_problems(server: Server, seed: int = 0) -> tuple[list[str], list[str]]:
    """The phrasing-rule problems of ``server``'s tools (``asks`` checked on each example's
    arguments, ``values`` drawn on the seed state), and the tools that declare no ``asks``."""
    from prove_core.toolkit.phrasing import check_phrasings as rules
    from prove_core.toolkit.phrasing import check_values

    runtime = build_runtime(server, seed=seed)
    sid = runtime.new_session()
    problems: list[str] = []
    bare: list[str] = []
    for tool in server.tools.values():
        examples: list[Mapping[str, Any]] = []
        for index in range(len(tool.examples)):
            try:
                examples.append(example_at(tool, runtime, sid, index))
            except Exception:  # noqa: BLE001 - reachability is its own check
                continue
        if tool.asks:
            problems += rules(tool, examples, runtime.state(sid))
        else:
            bare.append(tool.name)
            problems += check_values(tool, examples, runtime.state(sid))
    return problems, bare


def check_phrasings(server: Server, seed: int) -> Check:
    """The phrasing rules synthesis relies on (``prove_core.toolkit.phrasing``), for every tool
    that declares ``asks``; a tool without them is not a failure (its user turns get generic
    wording), but the detail counts them."""
    if server.benchmark:
        return Check("phrasings", True, "a benchmark server: synthesis never words requests for it")
    problems, bare = phrasing_problems(server, seed)
    worded = len(server.tools) - len(bare)
    note = (f"; {len(bare)} tools declare no asks, so synthesis words them generically ({', '.join(bare[:3])}"
            f"{', ...' if len(bare) > 3 else ''}; docs/servers.md)" if bare else "")
    return _Problems(problems).verdict("phrasings", f"{worded} tools' asks and values follow the phrasing rules{note}")


async def _mcp_calls(runtime: ServerRuntime, calls: list[tuple[str, str, Any]]) -> tuple[list[Any], list[Any]]:
    from fastmcp import Client

    from prove_core.serve.app import build_app

    results = []
    async with Client(build_app([runtime])) as client:
        tools = await client.list_tools()
        for sid, name, args in calls:
            results.append(await client.call_tool_mcp(name, args, meta={"session_id": sid}))
    return tools, results


def check_path_equivalence(server: Server, seed: int) -> Check:
    fast, served = build_runtime(server, seed=seed), build_runtime(server, seed=seed)
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
        hints, ann = mcp_tool.annotations, tool.spec.annotations
        hinted = None if hints is None else (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint)
        if hinted != (ann.read_only, ann.destructive, ann.idempotent):
            problems.append(f"{name}: MCP hints {hinted} differ from the tool's annotations "
                            f"{(ann.read_only, ann.destructive, ann.idempotent)}")
    for (_sid, name, args), want, got in zip(calls, expected, results):
        got_structured = got.structured_content
        if bool(got.is_error) != want.is_error or got_structured != want.structured:
            problems.append(f"{name}({json.dumps(args)[:60]}): MCP gave {json.dumps(got_structured)[:80]}, "
                            f"fast path {json.dumps(want.structured)[:80]}")
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
    check_unknown_ids,
    check_declared_failures,
    check_documented_failures,
    check_entity_names,
    check_answers,
    check_phrasings,
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
