"""The bundled reward components (docs/reward.md), registered like any third-party component.

Validity, dependency-ordered coverage, adaptive efficiency, tool name and argument values score
tasks that expect calls; abstention scores tasks that expect none (clarify / abstain). The
final-state component (not in the paper) compares end states and is off by default: add it to
``[[reward.components]]`` to use it. Every formula, with a worked example: docs/reward.md.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import attrs

from prove_core import hookimpl
from prove_core.model import ToolCall
from prove_core.reward.core import RewardContext, Rollout, Score, json_equal
from prove_core.reward.parsing import ParseFailure

NOT_EXPECTED = "the task expects no call (clarify or abstain): abstention scores it"
SHOWN = 8  # items listed in an explanation; details hold all of them


def _expects_call(rollout: Rollout) -> bool:
    return rollout.task.expected == "call"


def _listing(items: list[str]) -> str:
    more = f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return "; ".join(items[:SHOWN]) + more


# -- validity ------------------------------------------------------------------------------------

_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and v.__class__ is not bool) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and v.__class__ is not bool,
    "boolean": lambda v: v.__class__ is bool,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def json_type(value: Any) -> str:
    for name in ("boolean", "integer", "number", "string", "array", "object", "null"):
        if _TYPES[name](value):
            return name
    return type(value).__name__


def type_compatible(value: Any, schema: Any) -> bool:
    """Does ``value`` have a JSON type the parameter schema allows (``type``, or ``anyOf``/``oneOf``
    of types)? Bounds, enums and formats are left to the live tier, which validates everything."""
    if not isinstance(schema, dict):
        return True
    declared = schema.get("type")
    if declared is None:
        options = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(options, list) and options:
            return any(type_compatible(value, option) for option in options)
        return True
    for name in declared if isinstance(declared, list) else (declared,):
        check = _TYPES.get(name)
        if check is None or check(value):
            return True
    return False


def argument_problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Tier 2: every required parameter present, every given one with a compatible JSON type."""
    missing = [name for name in schema.get("required", ()) if name not in arguments]
    if missing:
        return f"missing required {', '.join(missing)}"
    properties = schema.get("properties") or {}
    wrong = []
    for name, value in arguments.items():
        prop = properties.get(name)
        if prop is not None and not type_compatible(value, prop):
            wrong.append(f"{name} should be {prop.get('type', 'another type')}, got {json_type(value)}")
    return "; ".join(wrong) if wrong else None


@attrs.frozen(kw_only=True)
class ValidityConfig:
    live: bool = True  # tier 3: run the calls on a fork of the task's initial state


class Validity:
    """Three equal tiers per call, averaged: tool exists, arguments well-typed, live call succeeds."""

    name = "validity"
    Config = ValidityConfig
    default_weight = 0.5

    def __init__(self, config: ValidityConfig) -> None:
        self.config = config
        self.tiers = 3 if config.live else 2

    def range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        if not rollout.attempts:
            return Score(value=0.0, explanation="no call made; validity is 0 on a task that expects calls",
                         details={"calls": []})
        schemas = context.tool_schemas()
        results = context.execution.results if self.config.live else None
        rows, notes, total = [], [], 0.0
        for i, attempt in enumerate(rollout.attempts):
            passed, reason = self._tiers(i, attempt, schemas, results)
            total += passed / self.tiers
            label = attempt.name if isinstance(attempt, ToolCall) else "(unparsed)"
            failed = None if passed == self.tiers else passed + 1
            rows.append({"index": i, "tool": label, "tiers_passed": passed, "failed_tier": failed, "reason": reason})
            if failed is not None:
                notes.append(f"call {i + 1} {label}: failed tier {failed} ({reason})")
        value = total / len(rollout.attempts)
        ok = sum(1 for r in rows if r["failed_tier"] is None)
        text = f"{ok}/{len(rows)} calls pass all {self.tiers} tiers"
        return Score(value=value, explanation=text + (f"; {_listing(notes)}" if notes else ""), details={"calls": rows})

    def _tiers(self, i: int, attempt: Any, schemas: dict[str, Any], results: Any) -> tuple[int, str | None]:
        if isinstance(attempt, ParseFailure):
            return 0, f"parse failure, {attempt.kind}: {attempt.message}"
        schema = schemas.get(attempt.name)
        if schema is None:
            return 0, f"no tool named {attempt.name!r} was offered"
        problem = argument_problem(schema, attempt.arguments)
        if problem is not None:
            return 1, problem
        if results is None:
            return 2, None
        result = results[i]
        if result is None or result.is_error:
            error = result.error if result is not None else {"code": "NOT_RUN", "reason": "NOT_RUN", "message": ""}
            return 2, f"{error.get('reason') or error.get('code')}: {error.get('message', '')}"[:200]
        return 3, None


# -- coverage --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CoverageConfig:
    pass


class Coverage:
    """Fraction of ground-truth steps matched (same tool, all their argument keys) by a call
    placed after the calls matched to every step they depend on."""

    name = "coverage"
    Config = CoverageConfig
    default_weight = 0.5

    def __init__(self, config: CoverageConfig) -> None:
        self.config = config

    def range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        steps = rollout.task.calls
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        if not steps:
            return Score.not_applicable("the task has no ground-truth calls")
        alignment = context.alignment
        rows, notes = [], []
        for step in steps:
            pos = alignment.position[step.id]
            ok = alignment.ordered[step.id]
            late = [d for d in step.depends_on if alignment.position.get(d) is None or pos is None
                    or alignment.position[d] >= pos]  # type: ignore[operator]
            rows.append({"step": step.id, "tool": step.tool, "call": pos, "covered": ok,
                         "dependencies_not_before": late if pos is not None else []})
            if pos is None:
                notes.append(f"step {step.id} ({step.tool}) not matched")
            elif not ok:
                notes.append(f"step {step.id} ({step.tool}) matched call {pos + 1} but depends on "
                             f"{', '.join(late)}, not called before it")
        covered = sum(1 for r in rows if r["covered"])
        text = f"{covered}/{len(steps)} ground-truth steps covered in dependency order"
        return Score(value=covered / len(steps), explanation=text + (f"; {_listing(notes)}" if notes else ""),
                     details={"steps": rows})


# -- efficiency ------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class EfficiencyConfig:
    alpha: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    beta: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    floor: float | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.le(0)))


@functools.lru_cache(maxsize=256)
def budget(n_ground_truth: int, beta: float) -> int:
    """B = n_gt + ceil(beta * n_gt), computed exactly (0.1 * 30 is 3, not 3.0000000000000004)."""
    return n_ground_truth + math.ceil(Fraction(repr(beta)) * n_ground_truth)


class Efficiency:
    """-alpha * max(0, n - B) / B with budget B = n_gt + ceil(beta * n_gt); every attempted call
    counts (parallel calls and unparsable ones too). Within budget: 0."""

    name = "efficiency"
    Config = EfficiencyConfig
    default_weight = 0.15

    def __init__(self, config: EfficiencyConfig) -> None:
        self.config = config

    def range(self) -> tuple[float, float]:
        return (self.config.floor if self.config.floor is not None else -math.inf, 0.0)

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        n_gt = len(rollout.task.calls)
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        if n_gt == 0:
            return Score.not_applicable("the task has no ground-truth calls, so no budget")
        b = budget(n_gt, self.config.beta)
        n = rollout.n_attempts
        excess = max(0, n - b)
        value = -self.config.alpha * excess / b if excess else 0.0
        if self.config.floor is not None:
            value = max(value, self.config.floor)
        text = (f"{n} calls, budget B = {n_gt} + ceil({self.config.beta} * {n_gt}) = {b}: "
                + (f"{excess} over budget, -{self.config.alpha} * {excess}/{b}" if excess else "within budget"))
        return Score(value=value, explanation=text, details={"calls": n, "ground_truth_calls": n_gt, "budget": b,
                                                             "excess": excess})


# -- tool name -------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ToolNameConfig:
    pass


class ToolName:
    """Fraction of the model's calls whose tool appears in the ground truth (an unparsable call
    names no tool, so it counts as a miss)."""

    name = "tool_name"
    Config = ToolNameConfig
    default_weight = 0.2

    def __init__(self, config: ToolNameConfig) -> None:
        self.config = config

    def range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        if not rollout.attempts:
            return Score(value=0.0, explanation="no call made", details={"hits": 0, "calls": 0})
        wanted = {step.tool for step in rollout.task.calls}
        misses = [a.name if isinstance(a, ToolCall) else "(unparsed)" for a in rollout.attempts
                  if not (isinstance(a, ToolCall) and a.name in wanted)]
        n = rollout.n_attempts
        hits = n - len(misses)
        text = f"{hits}/{n} calls name a ground-truth tool" + (f"; not in the ground truth: {_listing(misses)}" if misses else "")
        return Score(value=hits / n, explanation=text, details={"hits": hits, "calls": n, "misses": misses})


# -- argument values -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ArgumentsConfig:
    normalize_strings: bool = False  # compare strings stripped and case-folded


def _normalized(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip().casefold()
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items()}
    return value


class Arguments:
    """Mean fraction of exactly matching argument values over the call pairs aligned by coverage."""

    name = "arguments"
    Config = ArgumentsConfig
    default_weight = 0.1

    def __init__(self, config: ArgumentsConfig) -> None:
        self.config = config

    def range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def _equal(self, a: Any, b: Any) -> bool:
        if self.config.normalize_strings:
            a, b = _normalized(a), _normalized(b)
        return json_equal(a, b)

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        task = rollout.task
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        if not task.calls:
            return Score.not_applicable("the task has no ground-truth calls")
        pairs = context.alignment.pairs(task, rollout)
        if not pairs:
            return Score(value=0.0, explanation="no call aligned with a ground-truth step", details={"pairs": []})
        rows, notes, total = [], [], 0.0
        for step, call, pos in pairs:
            wrong = [k for k, v in step.arguments.items() if not self._equal(call.arguments.get(k), v)]
            n = len(step.arguments)
            fraction = 1.0 if n == 0 else (n - len(wrong)) / n
            total += fraction
            rows.append({"step": step.id, "call": pos, "fraction": fraction, "mismatched": wrong})
            if wrong:
                notes.append(f"step {step.id} vs call {pos + 1}: {', '.join(wrong)} differ")
        text = f"{len(pairs)} aligned pairs, mean exact-value fraction {total / len(pairs):.3f}"
        return Score(value=total / len(pairs), explanation=text + (f"; {_listing(notes)}" if notes else ""),
                     details={"pairs": rows})


# -- abstention ------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class AbstentionConfig:
    pass


class Abstention:
    """On a task that expects no call (clarify or abstain): 1 for zero calls, else 0."""

    name = "abstention"
    Config = AbstentionConfig
    default_weight = 1.0

    def __init__(self, config: AbstentionConfig) -> None:
        self.config = config

    def range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        if _expects_call(rollout):
            return Score.not_applicable("the task expects calls")
        n = rollout.n_attempts
        if n == 0:
            return Score(value=1.0, explanation=f"no call made, as expected ({rollout.task.expected})")
        return Score(value=0.0, explanation=f"{n} call(s) made where the task expects none ({rollout.task.expected})",
                     details={"calls": n})


# -- final state (not in the paper; off by default) -----------------------------------------------


@attrs.frozen(kw_only=True)
class FinalStateConfig:
    partial_credit: bool = False  # value = share of the tables either side wrote that match, not 0/1
    hashes: bool = False  # put both full state hashes in the details (a full dump of each state)


def table_diff(ours: Any, theirs: Any) -> dict[str, list[str]]:
    """Record ids only in ``ours`` (extra), only in ``theirs`` (missing), in both but different."""
    ours, theirs = ours if ours is not None else {}, theirs if theirs is not None else {}
    return {
        "extra": sorted(k for k in ours if k not in theirs),
        "missing": sorted(k for k in theirs if k not in ours),
        "changed": sorted(k for k in ours if k in theirs and ours[k] is not theirs[k] and ours[k] != theirs[k]),
    }


def _same(a: Any, b: Any) -> bool:
    return a is b or a == b


class FinalState:
    """1 when the rollout leaves the servers in the state the ground truth leaves them in (equal
    state hashes: same tables, counters and clock), else 0; the explanation lists the differing
    records per table. The ground truth is replayed once per task on its own fork."""

    name = "final_state"
    Config = FinalStateConfig
    default_weight = 0.5

    def __init__(self, config: FinalStateConfig) -> None:
        self.config = config

    def range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        ours, truth = context.execution.end_state, context.ground_truth
        gt_failed = [step.id for step, r in zip(rollout.task.calls, truth.results) if r.is_error]
        note = f" (ground-truth steps that failed on replay: {', '.join(gt_failed)})" if gt_failed else ""
        details: dict[str, Any] = {"ground_truth_failures": gt_failed}
        if self.config.hashes:
            details.update(state_hash=ours.state_hash(), ground_truth_state_hash=truth.end_state.state_hash())
        if ours.same_as(truth.end_state):
            return Score(value=1.0, explanation="end state matches the ground truth's" + note, details=details)
        differing = ours.differing_tables(truth.end_state)
        mine, theirs = ours.tables(), truth.end_state.tables()
        diff = {t: table_diff(mine.get(t), theirs.get(t)) for t in differing}
        value = 0.0
        if self.config.partial_credit:
            initial = context.servers.initial_state(rollout.task).tables()
            touched = {t for t in set(mine) | set(theirs)
                       if not _same(mine.get(t), initial.get(t)) or not _same(theirs.get(t), initial.get(t))}
            value = 1.0 - len(set(differing) & touched) / len(touched) if touched else 0.0
        parts = [f"{t}: {len(d['extra'])} extra, {len(d['missing'])} missing, {len(d['changed'])} changed"
                 for t, d in diff.items()]
        text = ("end state differs from the ground truth's: "
                + (_listing(parts) if parts else "tables equal, counters or clock differ") + note)
        return Score(value=value, explanation=text, details={**details, "tables": diff})


COMPONENTS = (Validity, Coverage, Efficiency, ToolName, Arguments, Abstention, FinalState)


@hookimpl
def prove_register_rewards(register: Any) -> None:
    for component in COMPONENTS:
        register(component)
