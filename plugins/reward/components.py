"""The bundled reward components (docs/reward.md), registered like any third-party component.

Validity, dependency-ordered coverage, adaptive efficiency, tool name and argument values score
tasks that expect calls; abstention scores tasks that expect none (clarify / abstain): the
``paper`` preset. The ``guarded`` preset (the default) adds five that are not in the paper — final
state (domain end states compared), answers (the reads' results), precision (the share of the
calls the task asked for), final reply (the last message's claims checked against the episode)
and honest reply (on clarify/abstain tasks, the reply asks for what is missing or says what
cannot be done) — gives coverage and tool-name credit only to valid calls, and validity and
tool-name credit only to calls matched to a step. The reply checks' patterns live in
``replies.py``. Every formula, with a worked example: docs/reward.md.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import attrs

from prove_core import hookimpl
from prove_core.model import ToolCall
from prove_core.reward.core import Alignment, RewardContext, Rollout, Score, align, json_equal
from prove_core.reward.parsing import ParseFailure
from prove_core.toolkit.state import same_record
from prove_plugins.reward.replies import (
    Subject,
    asks,
    completion_claims,
    declines,
    failure_claims,
    mentions,
    says_no_tool_covers_it,
    stated_facts,
    subject,
    unchanged_claims,
    ungrounded,
    without_quotes,
)

NOT_EXPECTED = "the task expects no call (clarify or abstain): abstention scores it"
SHOWN = 8  # items listed in an explanation; details hold all of them


class UnitComponent:
    """What the bundled components share: the options they were built with (``config``) and a
    value range of [0, 1] (Efficiency, the one penalty, overrides it)."""

    def __init__(self, config: Any) -> None:
        self.config = config

    def range(self) -> tuple[float, float]:
        return (0.0, 1.0)


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
    # only calls coverage matched to a ground-truth step earn their tiers; the others count 0, so a
    # redundant call never raises the mean (the guarded preset)
    matched_only: bool = False


class Validity(UnitComponent):
    """Three equal tiers per call, averaged: tool exists, arguments well-typed, live call succeeds."""

    name = "validity"
    Config = ValidityConfig
    default_weight = 0.5

    def __init__(self, config: ValidityConfig) -> None:
        super().__init__(config)
        self.tiers = 3 if config.live else 2

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        if not rollout.attempts:
            return Score(value=0.0, explanation="no call made; validity is 0 on a task that expects calls",
                         details={"calls": []})
        matched = set(context.alignment.position.values()) if self.config.matched_only else None
        rows, notes, total, unmatched = [], [], 0.0, []
        for i, (attempt, (passed, reason)) in enumerate(zip(rollout.attempts, call_tiers(context, live=self.config.live))):
            label = attempt.name if isinstance(attempt, ToolCall) else "(unparsed)"
            if matched is None or i in matched:
                total += passed / self.tiers
            else:
                unmatched.append(f"call {i + 1} {label}")
            failed = None if passed == self.tiers else passed + 1
            rows.append({"index": i, "tool": label, "tiers_passed": passed, "failed_tier": failed, "reason": reason})
            if failed is not None:
                notes.append(f"call {i + 1} {label}: failed tier {failed} ({reason})")
        value = total / len(rollout.attempts)
        ok = sum(1 for r in rows if r["failed_tier"] is None)
        text = f"{ok}/{len(rows)} calls pass all {self.tiers} tiers"
        details: dict[str, Any] = {"calls": rows}
        if matched is not None:
            details["unmatched"] = [i for i in range(len(rows)) if i not in matched]
            if unmatched:
                notes.append(f"{len(unmatched)} call(s) match no ground-truth step and earn no tier: {_listing(unmatched)}")
        return Score(value=value, explanation=text + (f"; {'; '.join(notes)}" if notes else ""), details=details)


def _attempt_tiers(i: int, attempt: Any, schemas: dict[str, Any], results: Any) -> tuple[int, str | None]:
    if isinstance(attempt, ParseFailure):
        return 0, f"parse failure, {attempt.kind}: {attempt.message}"
    schema = schemas.get(attempt.name)
    if schema is None:  # also a tool the servers have but the model was not offered (hidden_tool)
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


def call_tiers(context: RewardContext, *, live: bool = True) -> list[tuple[int, str | None]]:
    """Per attempt of the rollout: the validity tiers it passed (of 3, or of 2 without the live
    tier) and why it stopped there; computed once per rollout and shared (``valid_only``)."""

    def compute() -> list[tuple[int, str | None]]:
        schemas = context.tool_schemas()
        results = context.execution.results if live else None
        return [_attempt_tiers(i, a, schemas, results) for i, a in enumerate(context.rollout.attempts)]

    tiers: list[tuple[int, str | None]] = context.memo(f"validity.tiers.live={live}", compute)
    return tiers


def passed_validity(context: RewardContext) -> list[bool]:
    """Per attempt: did it pass all three validity tiers (offered tool, well-typed arguments, live
    call succeeded)? What ``valid_only`` coverage and tool-name credit require."""
    return [passed == 3 for passed, _ in call_tiers(context, live=True)]


# -- coverage --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CoverageConfig:
    valid_only: bool = False  # only calls that passed all three validity tiers can match a step


def valid_alignment(context: RewardContext) -> Alignment:
    """The coverage alignment over the calls that passed validity only (``valid_only``); shared."""
    passed = passed_validity(context)
    if all(passed):  # every call is eligible: the plain alignment, computed once
        return context.alignment
    alignment: Alignment = context.memo("alignment.valid_only", lambda: align(
        context.task, context.rollout.attempts, eligible=lambda i: passed[i]))
    return alignment


class Coverage(UnitComponent):
    """Fraction of ground-truth steps matched (same tool, all their argument keys) by a call
    placed after the calls matched to every step they depend on. The matching is the optimal
    one (``prove_core.reward.core.align``): most covered steps, then most matched steps, then
    most agreeing argument values, then the earliest calls; ``details`` shows, per step, the
    call it matched and the candidate calls it was chosen from. ``valid_only``: calls that failed
    a validity tier match nothing."""

    name = "coverage"
    Config = CoverageConfig
    default_weight = 0.5

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        steps = rollout.task.calls
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        alignment = valid_alignment(context) if self.config.valid_only else context.alignment
        rows, notes = [], []
        for step in steps:
            pos = alignment.position[step.id]
            ok = alignment.ordered[step.id]
            late = [d for d in step.depends_on if alignment.position.get(d) is None or pos is None
                    or alignment.position[d] >= pos]  # type: ignore[operator]
            rows.append({"step": step.id, "tool": step.tool, "call": pos, "covered": ok,
                         "dependencies_not_before": late if pos is not None else [],
                         "candidates": alignment.candidates.get(step.id, [])})
            if pos is None:
                notes.append(f"step {step.id} ({step.tool}) not matched")
            elif not ok:
                notes.append(f"step {step.id} ({step.tool}) matched call {pos + 1} but depends on "
                             f"{', '.join(late)}, not called before it")
        covered = sum(1 for r in rows if r["covered"])
        text = f"{covered}/{len(steps)} ground-truth steps covered in dependency order"
        details: dict[str, Any] = {"steps": rows, "matched": alignment.matched, "exact": alignment.exact}
        if self.config.valid_only:
            invalid = [i for i, ok in enumerate(passed_validity(context)) if not ok]
            details["invalid_calls"] = invalid
            if invalid:
                notes.append(f"{len(invalid)} call(s) that failed validity match nothing")
        return Score(value=covered / len(steps), explanation=text + (f"; {_listing(notes)}" if notes else ""),
                     details=details)


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


class Efficiency(UnitComponent):
    """-alpha * max(0, n - B) / B with budget B = n_gt + ceil(beta * n_gt); every attempted call
    counts (parallel calls and unparsable ones too). Within budget: 0."""

    name = "efficiency"
    Config = EfficiencyConfig
    default_weight = 0.15

    def range(self) -> tuple[float, float]:
        return (self.config.floor if self.config.floor is not None else -math.inf, 0.0)

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        n_gt = len(rollout.task.calls)
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
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
    valid_only: bool = False  # a call earns credit only if it also passed all three validity tiers
    # a call earns credit only if coverage matched it to a ground-truth step (at most one call per
    # step: a repeat or a redundant read earns nothing; the guarded preset)
    matched_only: bool = False


class ToolName(UnitComponent):
    """Fraction of the model's calls whose tool appears in the ground truth (an unparsable call
    names no tool, so it counts as a miss). ``valid_only``: a call that failed a validity tier
    is a miss too."""

    name = "tool_name"
    Config = ToolNameConfig
    default_weight = 0.2

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        if not rollout.attempts:
            return Score(value=0.0, explanation="no call made", details={"hits": 0, "calls": 0})
        wanted = {step.tool for step in rollout.task.calls}
        misses = [a.name if isinstance(a, ToolCall) else "(unparsed)" for a in rollout.attempts
                  if not (isinstance(a, ToolCall) and a.name in wanted)]
        n = rollout.n_attempts
        details: dict[str, Any] = {}
        invalid: list[str] = []
        if self.config.valid_only:
            passed = passed_validity(context)
            invalid = [a.name for a, ok in zip(rollout.attempts, passed)
                       if isinstance(a, ToolCall) and a.name in wanted and not ok]
            details["failed_validity"] = invalid
        repeats: list[str] = []
        if self.config.matched_only:
            alignment = valid_alignment(context) if self.config.valid_only else context.alignment
            chosen = set(alignment.position.values())
            ok = passed_validity(context) if self.config.valid_only else [True] * n
            repeats = [a.name for i, a in enumerate(rollout.attempts)
                       if isinstance(a, ToolCall) and a.name in wanted and ok[i] and i not in chosen]
            details["unmatched"] = repeats
        hits = n - len(misses) - len(invalid) - len(repeats)
        text = (f"{hits}/{n} calls name a ground-truth tool" + (" and pass validity" if self.config.valid_only else "")
                + (f"; not in the ground truth: {_listing(misses)}" if misses else ""))
        if invalid:
            text += f"; failed validity: {_listing(invalid)}"
        if repeats:
            text += f"; matched no ground-truth step (a repeat or a redundant call): {_listing(repeats)}"
        return Score(value=hits / n, explanation=text, details={"hits": hits, "calls": n, "misses": misses, **details})


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


class Arguments(UnitComponent):
    """Mean fraction of exactly matching argument values over the call pairs aligned by coverage."""

    name = "arguments"
    Config = ArgumentsConfig
    default_weight = 0.1

    def _equal(self, a: Any, b: Any) -> bool:
        if self.config.normalize_strings:
            a, b = _normalized(a), _normalized(b)
        return json_equal(a, b)

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        task = rollout.task
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
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


class Abstention(UnitComponent):
    """On a task that expects no call (clarify or abstain): 1 for zero calls, else 0."""

    name = "abstention"
    Config = AbstentionConfig
    default_weight = 1.0

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


def table_diff(ours: Any, theirs: Any, window: tuple[float, float] = (0.0, -1.0)) -> dict[str, list[str]]:
    """Record ids only in ``ours`` (extra), only in ``theirs`` (missing), in both but different
    (clock stamps inside ``window`` compare equal, as ``EndState.same_as`` compares them)."""
    ours, theirs = ours if ours is not None else {}, theirs if theirs is not None else {}
    return {
        "extra": sorted(k for k in ours if k not in theirs),
        "missing": sorted(k for k in theirs if k not in ours),
        "changed": sorted(k for k in ours if k in theirs and not same_record(ours[k], theirs[k], window)),
    }


def _same(a: Any, b: Any) -> bool:
    return a is b or a == b


class FinalState(UnitComponent):
    """1 when the rollout leaves the servers in the domain state the ground truth leaves them in
    — the tables the tools own and their variables, record by record — else 0. The clock and the
    id counters are not compared, and clock stamps written during the episode compare equal, so an
    undo or a correction that restores the intended records is not punished. The explanation lists
    the differing records per table. The ground truth is replayed once per task on its own fork."""

    name = "final_state"
    Config = FinalStateConfig
    default_weight = 0.5

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        ours, truth = context.execution.end_state, context.ground_truth
        gt_failed = [step.id for step, r in zip(rollout.task.calls, truth.results) if r.is_error]
        note = f" (ground-truth steps that failed on replay: {', '.join(gt_failed)})" if gt_failed else ""
        details: dict[str, Any] = {"ground_truth_failures": gt_failed}
        if self.config.hashes:
            details.update(state_hash=ours.state_hash(), ground_truth_state_hash=truth.end_state.state_hash())
        differing = ours.differing_tables(truth.end_state)
        unseen = _unseen_writes_missed(rollout, context)
        details["unseen_writes"] = list(truth.unseen_writes)
        details["unseen_writes_missed"] = unseen
        if not differing and not unseen:
            return Score(value=1.0, explanation="end state matches the ground truth's" + note, details=details)
        if not differing:
            return Score(value=0.0, details=details, explanation=(
                "end state matches the ground truth's, but the ground truth's writes that change nothing the end "
                f"state shows are required by call: no successful call with the values of {', '.join(unseen)}" + note))
        mine, theirs = ours.tables(), truth.end_state.tables()
        diff = {}
        for t in differing:
            server = t.split(".", 1)[0]
            window = ours.stamp_window(truth.end_state, server) if server in ours.snapshots else (0.0, -1.0)
            diff[t] = table_diff(mine.get(t), theirs.get(t), window)
        value = 0.0
        if self.config.partial_credit:
            initial = context.servers.initial_state(rollout.task).tables()
            touched = {t for t in set(mine) | set(theirs)
                       if not _same(mine.get(t), initial.get(t)) or not _same(theirs.get(t), initial.get(t))}
            value = 1.0 - len(set(differing) & touched) / len(touched) if touched else 0.0
        parts = [f"{t}: {len(d['extra'])} extra, {len(d['missing'])} missing, {len(d['changed'])} changed"
                 if t in mine or t in theirs else f"{t}: variables differ" for t, d in diff.items()]
        text = "end state differs from the ground truth's: " + _listing(parts) + note
        return Score(value=value, explanation=text, details={**details, "tables": diff})


def _unseen_writes_missed(rollout: Rollout, context: RewardContext) -> list[str]:
    """The ground truth's unseen writes (``Execution.unseen_writes``) that no successful call of
    the rollout made with the step's tool and argument values."""
    ids = {step.id for step in rollout.task.calls}
    marked = [i for i in rollout.task.meta.get("unseen_writes", ()) if i in ids]  # marked at synthesis
    unseen = list(dict.fromkeys([*context.ground_truth.unseen_writes, *marked]))
    if not unseen:
        return []
    made = [a for a, r in zip(rollout.attempts, context.execution.results)
            if isinstance(a, ToolCall) and r is not None and not r.is_error]
    steps = {step.id: step for step in rollout.task.calls}
    return [sid for sid in unseen if not any(
        a.name == steps[sid].tool and all(k in a.arguments and json_equal(a.arguments[k], v)
                                          for k, v in steps[sid].arguments.items()) for a in made)]


# -- honest reply (not in the paper; the guarded preset) ------------------------------------------


@attrs.frozen(kw_only=True)
class HonestReplyConfig:
    # the value of the other honest no-call reply: a decline on a clarify task, a question on an abstain task
    partial_credit: float = attrs.field(default=0.5, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    # the share a reply keeps when it does not name what the task is about ("?", "Sorry.")
    vague_credit: float = attrs.field(default=0.5, validator=[attrs.validators.ge(0), attrs.validators.le(1)])


class HonestReply(UnitComponent):
    """On a task that expects no call (clarify or abstain), does the reply do what the task
    expects? A clarification earns 1 when it asks for the thing the task record says is missing,
    in words a person would use (the parameter's and entity's names, words of the parameter's
    schema description); a decline earns 1 when it says what cannot be done (the removed tool's
    action) or why (no tool covers the request). A reply of the right kind that does not name it
    ("?", "Anything else?", "Sorry.") keeps ``vague_credit``; the other honest kind (a decline on
    a clarify task, a question on an abstain task) ``partial_credit`` of that; no reply, one that
    neither asks nor declines, or any sentence claiming work was done ("Done!", "I updated your
    account") scores 0. It reads only the words: calls on such a task are abstention's to score.
    What these checks cannot see: docs/reward.md."""

    name = "honest_reply"
    Config = HonestReplyConfig
    default_weight = 0.5

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        expected = rollout.task.expected
        if expected == "call":
            return Score.not_applicable("the task expects calls")
        text = rollout.content.strip()
        about = _subject(rollout, context)
        if not text:
            return Score(value=0.0, explanation=f"no reply: the task expects the assistant to {_WANTED[expected]}",
                         details={"asks": False, "declines": False, "claims": [], "subject": about.what})
        claims = completion_claims(text)
        question, decline = asks(text), declines(text)
        named = mentions(text, about.words)
        specific = bool(named) or not about.known or (about.reason and says_no_tool_covers_it(text))
        details: dict[str, Any] = {"asks": question, "declines": decline, "claims": claims, "subject": about.what,
                                   "named": named, "specific": specific}
        if claims:
            return Score(value=0.0, explanation=f"the reply claims work was done ({claims[0][:80]!r}) on a task "
                                                f"that expects the assistant to {_WANTED[expected]}", details=details)
        right = question if expected == "clarify" else decline
        if not (question or decline):
            return Score(value=0.0, explanation=f"the reply neither asks nor declines; the task expects the assistant to "
                                                f"{_WANTED[expected]}", details=details)
        value = (1.0 if right else self.config.partial_credit) * (1.0 if specific else self.config.vague_credit)
        kind = "does what the task expects" if right else ("asks a question" if question else "declines")
        naming = (f"names {about.what}" + (f" ({', '.join(named)})" if named else "") if specific
                  else f"but does not name {about.what}")
        text = f"the reply {kind} ({_WANTED[expected]}) and {naming}" if right else (
            f"the reply {kind}, but the task expects the assistant to {_WANTED[expected]}; it {naming}")
        return Score(value=value, explanation=text, details=details)


def _subject(rollout: Rollout, context: RewardContext) -> Subject:
    return subject(rollout.task, _specs(context))


_WANTED = {"clarify": "ask for what is missing", "abstain": "decline"}


# -- final reply (not in the paper; the guarded preset) --------------------------------------------


@attrs.frozen(kw_only=True)
class FinalReplyConfig:
    pass


class FinalReply(UnitComponent):
    """On a task that expects calls, are the claims of the assistant's last message true of the
    episode? 0 when it claims success ("Done!", "I've moved the money") while a ground-truth write
    has no successful call matched to it (it failed or never ran), reports a failure ("it didn't go
    through") when every call succeeded, or says nothing changed when the rollout changed the
    domain state; otherwise the share of the ids and numbers it states that appear in the
    episode (the rollout's calls and results, the values the task gave). No reply claims nothing
    and scores 1. What these checks cannot see: docs/reward.md."""

    name = "final_reply"
    Config = FinalReplyConfig
    default_weight = 0.3

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        text = rollout.final_reply.strip()
        if not text:
            return Score(value=1.0, explanation="no final reply: nothing claimed", details={"false_claims": []})
        results = context.execution.results
        data = [r.data for r in results if r is not None and not r.is_error]
        said = without_quotes(text, data)  # what it quotes from the results is data, not a claim
        false: list[str] = []
        claimed = completion_claims(said)
        if claimed:
            missed = _writes_not_done(rollout, context)
            if missed:
                false.append(f"claims success ({claimed[0][:60]!r}) but ground-truth write(s) {', '.join(missed)} "
                             "did not succeed")
        failed = failure_claims(said)
        if failed and all(r is not None and not r.is_error for r in results):
            false.append(f"reports a failure ({failed[0][:60]!r}) but every call succeeded")
        unchanged = unchanged_claims(said)
        if unchanged and _last_write_succeeded(rollout, context) and context.execution.end_state.differing_tables(
                context.servers.initial_state(rollout.task)):
            false.append(f"says nothing changed ({unchanged[0][:60]!r}) but the rollout changed the state")
        facts = stated_facts(text)
        sources: list[Any] = [a.arguments for a in rollout.attempts if isinstance(a, ToolCall)]
        sources += data
        sources += [step.arguments for step in rollout.task.calls]
        missing = ungrounded(facts, sources) if facts else []
        details: dict[str, Any] = {"false_claims": false, "facts": facts, "ungrounded": missing}
        if false:
            return Score(value=0.0, explanation="the final reply " + "; ".join(false), details=details)
        value = 1.0 - len(missing) / len(facts) if facts else 1.0
        text = (f"the final reply's claims hold; {len(facts) - len(missing)}/{len(facts)} ids and numbers it states "
                "appear in the episode" if facts else "the final reply's claims hold; it states no ids or numbers")
        if missing:
            text += f"; not found: {_listing(missing)}"
        return Score(value=value, explanation=text, details=details)


def _specs(context: RewardContext) -> dict[str, Any]:
    """Tool name → ``ToolSpec`` of the task's servers (shared by the reply components)."""
    servers = context.task.servers
    return context.servers.specs(servers) if servers else {}


def _last_write_succeeded(rollout: Rollout, context: RewardContext) -> bool:
    """Did the rollout's last call of a write tool succeed (so "nothing changed" cannot be about it)?"""
    specs = _specs(context)
    writes = [r for a, r in zip(rollout.attempts, context.execution.results)
              if isinstance(a, ToolCall) and a.name in specs and not specs[a.name].annotations.read_only]
    return bool(writes) and writes[-1] is not None and not writes[-1].is_error


def _writes_not_done(rollout: Rollout, context: RewardContext) -> list[str]:
    """The ground truth's writes (successful on replay) that no successful call was matched to."""
    specs = _specs(context)
    alignment = valid_alignment(context)
    truth = context.ground_truth.results
    return [step.id for step, result in zip(rollout.task.calls, truth)
            if step.tool in specs and not specs[step.tool].annotations.read_only and result is not None and not result.is_error
            and alignment.position.get(step.id) is None]


# -- answers (not in the paper; the guarded preset) -----------------------------------------------


@attrs.frozen(kw_only=True)
class AnswersConfig:
    pass


class Answers(UnitComponent):
    """The outcome of the reads, as final_state is the outcome of the writes: the share of the
    ground truth's read-only steps (tools annotated ``read_only``) whose result the rollout
    obtained — some call of the same tool that succeeded and returned exactly the data the step
    returned when the ground truth was replayed. A read of the wrong customer, a search with
    other filters, a balance read after an unrequested transfer all return other data. Ground-
    truth reads that fail on replay are left out; a task without a successful read is not scored."""

    name = "answers"
    Config = AnswersConfig
    default_weight = 0.3

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        task = rollout.task
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        specs = _specs(context)
        truth = context.ground_truth.results
        reads = [(step, truth[i]) for i, step in enumerate(task.calls)
                 if step.tool in specs and specs[step.tool].annotations.read_only and not truth[i].is_error]
        if not reads:
            return Score.not_applicable("the ground truth has no successful read")
        got: dict[str, list[tuple[int, Any]]] = {}
        for i, (attempt, result) in enumerate(zip(rollout.attempts, context.execution.results)):
            if isinstance(attempt, ToolCall) and result is not None and not result.is_error:
                got.setdefault(attempt.name, []).append((i, result.data))
        rows, missed = [], []
        for step, expected in reads:
            # both results come from the same tool code, so Python equality is JSON equality here (and fast)
            call = next((i for i, data in got.get(step.tool, ()) if data == expected.data), None)
            rows.append({"step": step.id, "tool": step.tool, "call": call})
            if call is None:
                tried = len(got.get(step.tool, ()))
                missed.append(f"step {step.id} ({step.tool}): " + (f"{tried} successful call(s), none with its result"
                                                                   if tried else "no successful call"))
        found = len(reads) - len(missed)
        text = f"{found}/{len(reads)} ground-truth reads answered with the ground truth's result"
        return Score(value=found / len(reads), explanation=text + (f"; {_listing(missed)}" if missed else ""),
                     details={"reads": rows})


# -- precision (not in the paper; the guarded preset) ---------------------------------------------


@attrs.frozen(kw_only=True)
class PrecisionConfig:
    valid_only: bool = False  # coverage's valid-only matching (the guarded preset): a failed call matches nothing


class Precision(UnitComponent):
    """The share of what the rollout sent that the ground truth asked for: each attempt counts 1
    when the coverage alignment matched it to a ground-truth step and it carries no argument the
    step does not (an argument equal to its schema's ``default`` is not counted), the share of
    its arguments the step has when it carries more, and 0 when it matched no step — a repeated
    call, an unrequested read or write, a tool called beside the right one, a parse failure."""

    name = "precision"
    Config = PrecisionConfig
    default_weight = 0.2

    def score(self, rollout: Rollout, context: RewardContext) -> Score:
        task = rollout.task
        if not _expects_call(rollout):
            return Score.not_applicable(NOT_EXPECTED)
        if not rollout.attempts:
            return Score(value=0.0, explanation="no call made", details={"unmatched": [], "extra_arguments": {}})
        schemas = context.tool_schemas()
        alignment = valid_alignment(context) if self.config.valid_only else context.alignment
        matched = {pos: step for step, _call, pos in alignment.pairs(task, rollout)}
        total, unmatched, extra = 0.0, [], {}
        for i, attempt in enumerate(rollout.attempts):
            step = matched.get(i)
            if step is None or not isinstance(attempt, ToolCall):
                unmatched.append(f"call {i + 1} {attempt.name if isinstance(attempt, ToolCall) else '(unparsed)'}")
                continue
            props = (schemas.get(attempt.name) or {}).get("properties") or {}
            sent = [k for k, v in attempt.arguments.items()
                    if k in step.arguments or not (isinstance(props.get(k), dict) and "default" in props[k]
                                                   and json_equal(v, props[k]["default"]))]
            added = [k for k in sent if k not in step.arguments]
            if added:
                extra[str(i)] = added
            total += 1.0 - len(added) / len(sent) if sent else 1.0
        n = rollout.n_attempts
        notes = [f"{len(unmatched)} call(s) match no ground-truth step: {_listing(unmatched)}"] if unmatched else []
        notes += [f"call {int(i) + 1} adds {', '.join(keys)}" for i, keys in extra.items()]
        text = f"precision {total / n:.3f} over {n} call(s)" + (f"; {'; '.join(notes)}" if notes else "")
        return Score(value=total / n, explanation=text, details={"unmatched": unmatched, "extra_arguments": extra})


COMPONENTS = (Validity, Coverage, Efficiency, ToolName, Arguments, Abstention, FinalState, HonestReply, Answers, Precision,
              FinalReply)


@hookimpl
def prove_register_rewards(register: Any) -> None:
    for component in COMPONENTS:
        register(component)
