"""The programmatic reward: rollouts, the component contract, live forks, and the combiner.

A **rollout** is what a model did for one task: its attempted tool calls in order (parallel
calls of one assistant turn count one by one; text that failed to parse is a ``ParseFailure``
in its place), the tools it was offered, and its prose. A **component** (kind ``rewards``)
scores a rollout against its task::

    @attrs.frozen
    class Config:                      # the component's options, with defaults
        bonus: float = 1.0

    class MyReward:
        name = "my_reward"
        Config = Config
        default_weight = 0.1
        def __init__(self, config): self.config = config
        def range(self): return (0.0, 1.0)      # the values score() can return
        def score(self, rollout, context) -> Score: ...

``context`` (a ``RewardContext``) executes the rollout's calls **live** on a session forked
from the task's initial state (same servers, same seed), replays the ground truth on another
fork when asked, and caches what several components share (the coverage alignment, the
execution). The ``Reward`` combiner sums ``weight * value`` over the components that apply to
the task (``Score.applies``): with the paper's defaults, validity, coverage, efficiency,
tool-name and argument components score tasks that expect calls, and abstention scores tasks
that expect none. Components are looked up by name in the registry, so one registered by a
third-party plugin takes part as soon as a config names it. Formulas: docs/reward.md.
"""

from __future__ import annotations

import json
import math
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import attrs
import structlog

from prove_core.env.drift import state_matches
from prove_core.env.runtime import Environment, ServerRuntime, ToolResult, build_runtime
from prove_core.errors import ConfigError, ProveError
from prove_core.model import GroundTruthCall, Task, ToolCall, from_json
from prove_core.plugin.registry import NoConfig  # noqa: F401 - the options of a component without any
from prove_core.reward.parsing import (
    Attempt,
    AttemptViews,
    ParsedTurn,
    ParseFailure,
    Parser,
    decode_openai_tool_call,
    message_text,
    safe_parse,
)
from prove_core.toolkit.state import Snapshot, State, domain_differences, unseen_writes

log = structlog.get_logger()

NO_CALL_EXPECTED = frozenset({"clarify", "abstain"})
# The paper's reward (docs/reward.md): R = 0.5 val + 0.5 cov + 0.15 eff + 0.2 name + 0.1 arg, with
# abstention scoring the tasks that expect no call. Weights live on the components.
DEFAULT_COMPONENTS = ("validity", "coverage", "efficiency", "tool_name", "arguments", "abstention")
GROUND_TRUTH_CACHE = 4096  # tasks whose ground-truth end state is kept


# -- rollouts ---------------------------------------------------------------------------------------


def _tuple(value: Iterable[Any] | None) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def _attempts(value: Iterable[Attempt]) -> tuple[Attempt, ...]:
    return tuple(value)


class DegenerateTaskError(ProveError):
    """A task the reward cannot score: it expects calls (``expected = "call"``) but has no
    ground-truth calls, so coverage, arguments and the budget have nothing to measure against."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"task {task_id!r} expects calls (expected = \"call\") but has no ground-truth calls, so "
                         "the reward has nothing to score it against; give it its calls, or expect \"clarify\" "
                         "or \"abstain\"")


def check_scorable(task: Task, *, task_id: str) -> None:
    """Raise ``DegenerateTaskError`` for a task that expects calls and has none (reading
    rollouts, building one, loading a training corpus)."""
    if task.expected == "call" and not task.calls:
        raise DegenerateTaskError(task_id)


@attrs.frozen(kw_only=True)
class Rollout(AttemptViews):
    """What a model did for one task. ``attempts`` are its calls in order, each a ``ToolCall`` or
    a ``ParseFailure``; ``turns[i]`` is the assistant turn of attempt ``i`` (parallel calls share
    one). ``tools`` are the tools it was offered (OpenAI function format); ``None`` means every
    tool of the task's servers. ``content`` is all its prose, ``reply`` that of its last message.
    A task that expects calls and has no ground-truth calls is refused (``DegenerateTaskError``)."""

    id: str
    task: Task
    attempts: tuple[Attempt, ...] = attrs.field(default=(), converter=_attempts)
    turns: tuple[int, ...] | None = attrs.field(default=None, converter=_tuple)
    tools: tuple[dict[str, Any], ...] | None = attrs.field(default=None, converter=_tuple)
    content: str = ""
    reply: str | None = None  # the prose of the last assistant message; None: all of ``content``

    @property
    def final_reply(self) -> str:
        """What the assistant said last (the ``final_reply`` component checks its claims)."""
        return self.content if self.reply is None else self.reply

    def __attrs_post_init__(self) -> None:
        check_scorable(self.task, task_id=self.id)
        if self.turns is None:
            object.__setattr__(self, "turns", tuple(range(len(self.attempts))))
        elif len(self.turns) != len(self.attempts):
            raise ValueError("a rollout needs one turn index per attempt")

    @property
    def n_attempts(self) -> int:
        return len(self.attempts)

    @classmethod
    def from_calls(cls, task: Task, calls: Sequence[Attempt | tuple[str, dict[str, Any]]], *, id: str = "rollout",
                   tools: Sequence[dict[str, Any]] | None = None) -> Rollout:
        """A rollout from calls written as ``ToolCall``s, ``ParseFailure``s or ``(name, args)`` pairs."""
        attempts = [c if isinstance(c, ToolCall | ParseFailure) else ToolCall(id=f"call_{i}", name=c[0], arguments=c[1])
                    for i, c in enumerate(calls)]
        return cls(id=id, task=task, attempts=attempts, tools=tools)

    @classmethod
    def ground_truth(cls, task: Task, *, id: str = "ground_truth", tools: Sequence[dict[str, Any]] | None = None) -> Rollout:
        """The task's reference solution as a rollout (it scores the maximum on every component)."""
        return cls.from_calls(task, [ToolCall(id=g.id, name=g.tool, arguments=dict(g.arguments)) for g in task.calls],
                              id=id, tools=tools)


# -- scores and components --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Score:
    """A component's verdict: ``value``, a one-paragraph ``explanation`` for people, structured
    ``details`` for reports. ``applies=False`` means the component has nothing to say about this
    task (for example coverage on a task that expects no call); the combiner skips it."""

    value: float
    explanation: str
    details: dict[str, Any] = attrs.field(factory=dict)
    applies: bool = True
    error: str | None = None  # set when the component crashed (value is then 0)

    @classmethod
    def not_applicable(cls, why: str) -> Score:
        return cls(value=0.0, explanation=why, applies=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "applies": self.applies, "explanation": self.explanation}
        if self.details:
            out["details"] = self.details
        if self.error:
            out["error"] = self.error
        return out


class RewardComponent(Protocol):
    """What a registered reward component provides (a class: ``Registry.build`` makes the
    instance from its structured ``Config``)."""

    name: ClassVar[str]
    Config: ClassVar[type]
    default_weight: ClassVar[float]

    def range(self) -> tuple[float, float]: ...

    def score(self, rollout: Rollout, context: RewardContext) -> Score: ...


# -- matching helpers shared by components -----------------------------------------------------------


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``1 == 1.0``, but ``true != 1`` and ``"1" != 1``."""
    if a.__class__ is bool or b.__class__ is bool:
        return a.__class__ is b.__class__ and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return a.__class__ is b.__class__ and a == b


def matching_values(step: GroundTruthCall, call: ToolCall) -> int:
    """How many of the step's argument values the call reproduces exactly."""
    args = call.arguments
    return sum(1 for k, v in step.arguments.items() if k in args and json_equal(args[k], v))


@attrs.frozen(kw_only=True)
class Alignment:
    """Ground-truth steps matched to the model's calls (docs/reward.md, coverage).

    ``position[g]`` is the index in ``rollout.attempts`` of the call matched to step ``g`` (same
    tool, every argument key of ``g`` present), or ``None``; ``ordered[g]`` is true when ``g`` is
    matched and every step it depends on is matched at an earlier position (a *covered* step).
    ``candidates[g]`` lists every call that could match ``g`` (the ones the alignment chose
    among); ``exact`` is false only when the search was cut short (see ``align``).
    """

    position: dict[str, int | None]
    ordered: dict[str, bool]
    candidates: dict[str, list[int]] = attrs.field(factory=dict)
    exact: bool = True

    def pairs(self, task: Task, rollout: Rollout) -> list[tuple[GroundTruthCall, ToolCall, int]]:
        out = []
        for step in task.calls:
            pos = self.position.get(step.id)
            if pos is not None:
                call = rollout.attempts[pos]
                assert isinstance(call, ToolCall)  # align() matches steps to tool calls only
                out.append((step, call, pos))
        return out

    @property
    def covered(self) -> int:
        return sum(1 for ok in self.ordered.values() if ok)

    @property
    def matched(self) -> int:
        return sum(1 for pos in self.position.values() if pos is not None)


_Value = tuple[int, int, int, int]  # (covered, matched, agreement units, tie-break)
_Chain = tuple[int, int, Any] | None  # (step, call, the rest): an assignment as a linked list
ALIGN_STATES = 1024  # partial assignments kept per call; more only in pathological rollouts (see align)
ALIGN_WORK = 40_000  # fewer kept when the calls have many options each, so one alignment stays within tens of ms
PRUNE_FROM = 32  # bound and prune the partial assignments once there are more than this many


def align(task: Task, attempts: Sequence[Attempt], *, eligible: Callable[[int], bool] | None = None) -> Alignment:
    """The optimal assignment of calls to ground-truth steps (docs/reward.md, coverage).

    A step may take a call of its tool that carries all its argument keys, each call at most
    once; ``eligible(i)`` false keeps call ``i`` out (``valid_only``). Among all such partial
    assignments it maximises, in order: (1) the covered steps — matched, with every dependency
    matched at an earlier position; (2) the matched steps; (3) the exactly matching argument
    values, as the sum over matched steps of their fraction (what ``arguments`` averages). Among
    equally good assignments it keeps the one the greedy rule coverage used before picks (steps
    in ground-truth order, each taking an unused candidate placed after its dependencies' calls,
    then with more agreeing values, then the earliest) when that one is optimal, so rollouts it
    already scored right are matched call for call as before; otherwise the one with the
    earliest calls, comparing the steps' positions in ground-truth order. A call appended to a
    rollout never lowers coverage.

    Exact, by dynamic programming over the calls in order: the state is the set of steps matched
    so far (whether a later step is covered depends only on that set), reduced to the steps that
    still matter (ones a later call can match, and their dependencies); a partial assignment
    that cannot catch up with the best one known is dropped. A few hundred operations on a
    typical task, tens of milliseconds for twenty steps. If a layer ever holds more than
    ``ALIGN_STATES`` sets (a dozen or more steps of one tool, each with dozens of candidate
    calls) the most promising ones are kept, the result is never worse than the greedy
    assignment coverage used before, and ``exact`` is false.
    """
    steps = list(task.calls)
    n_steps, n = len(steps), len(attempts)
    index = {s.id: i for i, s in enumerate(steps)}
    deps = [sum(1 << index[d] for d in s.depends_on if d in index) for s in steps]
    sizes = [len(s.arguments) for s in steps]
    unit = math.lcm(*(max(1, k) for k in sizes)) if steps else 1  # agreement in exact integer units
    by_tool: dict[str, list[int]] = {}
    for i, s in enumerate(steps):
        by_tool.setdefault(s.tool, []).append(i)
    # options[p]: the (step, agreement units) pairs call p can take
    options: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    candidates: dict[str, list[int]] = {s.id: [] for s in steps}
    for p, attempt in enumerate(attempts):
        if not isinstance(attempt, ToolCall) or (eligible is not None and not eligible(p)):
            continue
        keys = attempt.arguments.keys()
        for i in by_tool.get(attempt.name, ()):
            step = steps[i]
            if step.arguments.keys() <= keys:
                units = unit if not sizes[i] else matching_values(step, attempt) * (unit // sizes[i])
                options[p].append((i, units))
                candidates[step.id].append(p)
    weight = [(n + 1) ** (n_steps - 1 - i) for i in range(n_steps)]  # tie-break: earliest positions, step by step
    greedy = _greedy(steps, options, n)
    greedy_value = _value(greedy, options, deps, weight, n)
    best_known = greedy_value[:3]  # a lower bound: the greedy assignment is feasible
    if greedy_value[:3] == (n_steps, n_steps, n_steps * unit):  # every step covered with every value: optimal
        return _alignment(steps, greedy, candidates, exact=True)
    future = _Future(steps, options, deps)
    if greedy_value[:3] >= future.bound(0, 0, (0, 0, 0, 0)):  # the greedy assignment reaches the bound: optimal
        return _alignment(steps, greedy, candidates, exact=True)

    states: dict[int, tuple[_Value, _Chain]] = {0: ((0, 0, 0, 0), None)}
    exact = True
    keep_at_most = min(ALIGN_STATES, max(PRUNE_FROM, ALIGN_WORK // max(1, sum(len(o) for o in options))))
    for p in range(n):
        if not options[p]:
            continue
        layer = dict(states)  # every state may leave call p unused
        for mask, (value, chain) in states.items():
            for i, units in options[p]:
                if mask >> i & 1:
                    continue
                new = (value[0] + int(deps[i] & ~mask == 0), value[1] + 1, value[2] + units,
                       value[3] + (n - p) * weight[i])
                nmask = mask | 1 << i
                old = layer.get(nmask)
                if old is None or new > old[0]:
                    layer[nmask] = (new, (i, p, chain))
        # Every partial assignment is a complete one (the remaining steps unmatched): the best so far
        # is a lower bound. Then forget steps that no longer matter, and drop what cannot catch up.
        best_known = max(best_known, max(value[:3] for value, _ in layer.values()))
        keep = future.relevant[p + 1]
        merged: dict[int, tuple[_Value, _Chain]] = {}
        for mask, item in layer.items():
            key = mask & keep
            old = merged.get(key)
            if old is None or item[0] > old[0]:
                merged[key] = item
        if len(merged) <= PRUNE_FROM:  # a handful of states: bounding them costs more than it saves
            states = merged
            continue
        bounds = {mask: future.bound(p + 1, mask, item[0]) for mask, item in merged.items()}
        kept = [mask for mask, ub in bounds.items() if ub >= best_known]
        if len(kept) > keep_at_most:
            exact = False
            kept.sort(key=lambda mask: (bounds[mask], merged[mask][0]), reverse=True)
            kept = kept[:keep_at_most]
        states = {mask: merged[mask] for mask in kept}
    chosen = greedy  # when it is optimal: the matching coverage made before, call for call
    if states:
        value, chain = max(states.values(), key=lambda item: item[0])
        if value[:3] > greedy_value[:3]:
            chosen = {}
            while chain is not None:
                i, p, chain = chain
                chosen[i] = p
    return _alignment(steps, chosen, candidates, exact=exact)


def _alignment(steps: Sequence[GroundTruthCall], chosen: Mapping[int, int], candidates: dict[str, list[int]], *,
               exact: bool) -> Alignment:
    position: dict[str, int | None] = {s.id: chosen.get(i) for i, s in enumerate(steps)}
    ordered = {}
    for s in steps:
        pos = position[s.id]
        ordered[s.id] = pos is not None and all(
            (dep := position.get(d)) is not None and dep < pos for d in s.depends_on)
    return Alignment(position=position, ordered=ordered, candidates=candidates, exact=exact)


class _Future:
    """What the calls from position ``p`` on can still do, for ``align``'s search."""

    def __init__(self, steps: Sequence[GroundTruthCall], options: Sequence[Sequence[tuple[int, int]]],
                 deps: Sequence[int]) -> None:
        n = len(options)
        self.deps = deps
        self.tool = [s.tool for s in steps]
        # best[p][i]: the most agreement units step i can get from a call at p or later (absent: none)
        # calls[p][tool]: how many calls at p or later can match some step of that tool
        # ahead[p]: the steps a call at p or later can match; relevant[p]: those and their dependencies
        self.best: list[dict[int, int]] = [{} for _ in range(n + 1)]
        self.calls: list[dict[str, int]] = [{} for _ in range(n + 1)]
        self.ahead = [0] * (n + 1)
        self.relevant = [0] * (n + 1)
        for p in range(n - 1, -1, -1):
            best, calls = dict(self.best[p + 1]), dict(self.calls[p + 1])
            ahead, relevant = self.ahead[p + 1], self.relevant[p + 1]
            for i, units in options[p]:
                if units > best.get(i, -1):
                    best[i] = units
                ahead |= 1 << i
                relevant |= 1 << i | deps[i]
            if options[p]:
                tool = self.tool[options[p][0][0]]
                calls[tool] = calls.get(tool, 0) + 1
            self.best[p], self.calls[p], self.ahead[p], self.relevant[p] = best, calls, ahead, relevant
        # per_tool[p]: per tool, its steps a call at p or later can match (as a mask), how many calls
        # at p or later can match one of them, and those steps as (bit, dependencies, best units),
        # highest units first: what ``bound`` needs, computed once
        self.per_tool: list[list[tuple[int, int, list[tuple[int, int, int]]]]] = []
        for p in range(n + 1):
            grouped: dict[str, list[int]] = {}
            for i in self.best[p]:
                grouped.setdefault(self.tool[i], []).append(i)
            self.per_tool.append([
                (sum(1 << i for i in members), self.calls[p][tool],
                 sorted(((1 << i, deps[i], self.best[p][i]) for i in members), key=lambda row: -row[2]))
                for tool, members in grouped.items()])

    def bound(self, p: int, mask: int, value: _Value) -> tuple[int, int, int]:
        """What a partial assignment can still reach with the calls from ``p`` on: per tool, as
        many open steps as there are calls left, each covered if its dependencies can still be
        matched, each at its best agreement."""
        covered, matched, agreement = value[0], value[1], value[2]
        reachable = mask | self.ahead[p]
        for steps, calls, rows in self.per_tool[p]:
            k = min((steps & ~mask).bit_count(), calls)
            if not k:
                continue
            coverable = taken = 0
            for bit, needs, units in rows:
                if mask & bit:
                    continue
                if not needs & ~reachable:
                    coverable += 1
                if taken < k:
                    agreement += units
                    taken += 1
            covered += min(k, coverable)
            matched += k
        return (covered, matched, agreement)


def _greedy(steps: Sequence[GroundTruthCall], options: Sequence[Sequence[tuple[int, int]]], n: int) -> dict[int, int]:
    """The assignment coverage used before the optimal one: steps in ground-truth order, each
    taking an unused candidate call, preferring one after its dependencies' calls, then more
    agreeing values, then the earliest (a lower bound for ``align``)."""
    index = {s.id: i for i, s in enumerate(steps)}
    units_of: dict[tuple[int, int], int] = {(i, p): u for p in range(n) for i, u in options[p]}
    chosen: dict[int, int] = {}
    used: set[int] = set()
    for i, step in enumerate(steps):
        cands = [p for p in range(n) if (i, p) in units_of and p not in used]
        if not cands:
            continue
        found = [chosen.get(index[d]) for d in step.depends_on if d in index]
        matched = all(f is not None for f in found)
        last = max((f for f in found if f is not None), default=-1) if matched else -1
        best = max(cands, key=lambda p: (matched and p > last, units_of[(i, p)], -p))
        chosen[i] = best
        used.add(best)
    return chosen


def _value(chosen: Mapping[int, int], options: Sequence[Sequence[tuple[int, int]]], deps: Sequence[int],
           weight: Sequence[int], n: int) -> _Value:
    """(covered, matched, agreement units, tie-break) of an assignment step -> position."""
    units_of = {(i, p): u for p in range(n) for i, u in options[p]}
    covered = agreement = tie = 0
    for i, p in chosen.items():
        before = sum(1 << j for j, q in chosen.items() if q < p)
        covered += int(deps[i] & ~before == 0)
        agreement += units_of[(i, p)]
        tie += (n - p) * weight[i]
    return (covered, len(chosen), agreement, tie)


# -- live forks -------------------------------------------------------------------------------------


@attrs.frozen(eq=False)
class EndState:
    """The state a fork was left in: one immutable ``Snapshot`` per server, and the clock each
    server started from (``starts``). Keeping one costs nothing (snapshots share every record
    with the live state), and comparing two is cheap: tables are persistent maps, and records
    nobody wrote are the same objects in both."""

    snapshots: dict[str, Snapshot]
    starts: dict[str, int] = attrs.field(factory=dict)

    def tables(self) -> dict[str, Any]:
        """``"<server>.<table>"`` → the table's persistent map (record id → record)."""
        out = {}
        for server, snap in sorted(self.snapshots.items()):
            for table in snap.table_names():
                out[f"{server}.{table}"] = snap.tables[table]
        return out

    def stamp_window(self, other: EndState, server: str) -> tuple[float, float]:
        """The span in which ``server``'s clock stamped records in either state: from the clock the
        fork started at to the later of the two end clocks."""
        mine, theirs = self.snapshots[server], other.snapshots[server]
        start = self.starts.get(server, other.starts.get(server, min(mine.clock, theirs.clock)))
        return (float(start), float(max(mine.clock, theirs.clock)))

    def differing_tables(self, other: EndState) -> list[str]:
        """The tables whose records differ (``"<server>.<table>"``), in domain terms: clock stamps
        written during the episode compare equal (``toolkit.state.same_record``); a variable the
        tools own that differs is listed as ``"<server>.vars"``."""
        out = []
        for server in sorted(set(self.snapshots) | set(other.snapshots)):
            mine, theirs = self.snapshots.get(server), other.snapshots.get(server)
            if mine is None or theirs is None:
                out.append(f"{server}.*")
                continue
            out += [f"{server}.{name}" for name in domain_differences(mine, theirs, self.stamp_window(other, server))]
        return out

    def same_as(self, other: EndState) -> bool:
        """The same domain state: the tables the tools own and their variables, record by record,
        with clock stamps written during the episode equal. The clock itself and the id counters
        are bookkeeping and not compared, so an undo or a correction that restores the intended
        records counts (``identical_to`` is the strict test: equal state hashes)."""
        return self.snapshots.keys() == other.snapshots.keys() and not self.differing_tables(other)

    def identical_to(self, other: EndState) -> bool:
        """Equal tables, counters and variables (the clock included): exactly when the two state
        hashes are equal."""
        if self.snapshots.keys() != other.snapshots.keys():
            return False
        for server, snap in self.snapshots.items():
            theirs = other.snapshots[server]
            if snap.counters != theirs.counters or snap.vars != theirs.vars:
                return False
            for table in snap.table_names():
                if not (snap.tables[table] is theirs.tables.get(table) or snap.tables[table] == theirs.tables.get(table)):
                    return False
        return True

    def state_hash(self) -> str:
        """The same string ``Environment.state_hash`` gives for this state (costs a full dump)."""
        return "|".join(f"{n}:{State.from_snapshot(s).state_hash()}" for n, s in sorted(self.snapshots.items()))


class Fork:
    """A session on every server of a task, started from the task's seed (its initial state)."""

    __slots__ = ("closed", "env", "session_id", "starts")

    def __init__(self, env: Environment, seed: int) -> None:
        self.env = env
        self.session_id = secrets.token_urlsafe(12)
        for runtime in env.runtimes.values():
            runtime.new_session(seed=seed, session_id=self.session_id)
        self.starts = {name: rt.state(self.session_id).snapshot().clock for name, rt in env.runtimes.items()}
        self.closed = False

    def call(self, tool: str, arguments: Any) -> ToolResult:
        return self.env.call(self.session_id, tool, arguments)

    def state_hash(self) -> str:
        return self.env.state_hash(self.session_id)

    def end_state(self) -> EndState:
        return EndState({name: rt.state(self.session_id).snapshot() for name, rt in self.env.runtimes.items()},
                        starts=dict(self.starts))

    def close(self) -> None:
        if not self.closed:
            self.env.close(self.session_id)
            self.closed = True


class LiveServers:
    """Server runtimes for scoring, built from the registry on first use and kept for reuse.

    ``options`` maps a server name to its seed-options object (default: the server's defaults);
    ``sessions`` is the experiment's ``[sessions]`` (``None``: its defaults). Sessions are forked
    from the cached seed snapshot, so a fork costs microseconds.
    """

    def __init__(self, registry: Any, *, options: Mapping[str, Any] | None = None, sessions: Any = None) -> None:
        self.registry = registry
        self.options = dict(options or {})
        self.sessions = sessions
        self._runtimes: dict[str, ServerRuntime] = {}
        self._envs: dict[tuple[str, ...], Environment] = {}
        self._schemas: dict[tuple[str, ...], dict[str, dict[str, Any]]] = {}
        self._specs: dict[tuple[str, ...], dict[str, Any]] = {}
        self._initial: dict[tuple[tuple[str, ...], int], str] = {}
        self._initial_states: dict[tuple[tuple[str, ...], int], EndState] = {}
        self._ground_truths: OrderedDict[tuple[Any, ...], Execution] = OrderedDict()
        self._task_keys: dict[int, tuple[Task, tuple[Any, ...]]] = {}  # id(task) -> (task, its cache key)

    def runtime(self, name: str) -> ServerRuntime:
        runtime = self._runtimes.get(name)
        if runtime is None:
            server = self.registry.load("servers", name)
            runtime = build_runtime(server, options=self.options.get(name), sessions=self.sessions)
            self._runtimes[name] = runtime
        return runtime

    def environment(self, servers: Sequence[str]) -> Environment:
        key = tuple(servers)
        env = self._envs.get(key)
        if env is None:
            env = Environment(self.runtime(name) for name in key)
            self._envs[key] = env
            self._specs[key] = {spec.name: spec for spec in env.specs()}
            self._schemas[key] = {name: spec.parameters for name, spec in self._specs[key].items()}
        return env

    def specs(self, servers: Sequence[str]) -> dict[str, Any]:
        """Public tool name → ``ToolSpec`` (annotations included), for the environment of ``servers``."""
        self.environment(servers)
        return self._specs[tuple(servers)]

    def schemas(self, servers: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Public tool name → JSON Schema of its parameters, for the environment of ``servers``."""
        self.environment(servers)
        return self._schemas[tuple(servers)]

    def fork(self, task: Task) -> Fork:
        return Fork(self.environment(task.servers), task.seed)

    def initial_state(self, task: Task) -> EndState:
        """The state every fork of ``task`` starts from."""
        key = (tuple(task.servers), task.seed)
        state = self._initial_states.get(key)
        if state is None:
            fork = self.fork(task)
            state = self._initial_states[key] = fork.end_state()
            fork.close()
        return state

    def ground_truth(self, task: Task) -> Execution:
        """``task``'s ground truth replayed on a fork, cached per task (bounded, least recently used out)."""
        known = self._task_keys.get(id(task))
        if known is not None and known[0] is task:  # a GRPO group shares one task object: key it once
            key = known[1]
        else:
            key = (tuple(task.servers), task.seed,
                   json.dumps([[c.tool, c.arguments] for c in task.calls], sort_keys=True, default=str))
            if len(self._task_keys) >= GROUND_TRUTH_CACHE:
                self._task_keys.clear()
            self._task_keys[id(task)] = (task, key)
        cached = self._ground_truths.get(key)
        if cached is not None:
            self._ground_truths.move_to_end(key)
            return cached
        fork = self.fork(task)
        try:
            read_only = {name for name, spec in self.specs(task.servers).items() if spec.annotations.read_only}
            results, states = [], [fork.end_state().snapshots]
            for step in task.calls:
                results.append(fork.call(step.tool, step.arguments))
                states.append(fork.end_state().snapshots)
            writes = [step.tool not in read_only and not r.is_error for step, r in zip(task.calls, results)]
            unseen = unseen_writes([s.id for s in task.calls], writes, states, fork.starts)
            cached = Execution(tuple(results), fork.end_state(), unseen_writes=tuple(unseen))
        finally:
            fork.close()
        self._ground_truths[key] = cached
        if len(self._ground_truths) > GROUND_TRUTH_CACHE:
            self._ground_truths.popitem(last=False)
        return cached

    def initial_state_hash(self, task: Task) -> str:
        key = (tuple(task.servers), task.seed)
        value = self._initial.get(key)
        if value is None:
            value = self._initial[key] = self.initial_state(task).state_hash()
        return value

    def check_initial_state(self, task: Task) -> str | None:
        """A message when the task records an initial state hash the servers no longer produce
        (a changed server, seed options that differ from the corpus's)."""
        if not task.initial_state_hash:
            return None
        actual = self.initial_state_hash(task)
        if state_matches(task.initial_state_hash, actual):
            return None
        return (f"servers {', '.join(task.servers)} at seed {task.seed} start from state {actual[:40]}..., "
                f"not the task's {task.initial_state_hash[:40]}...; check the server versions and seed options")


@attrs.frozen
class Execution:
    """Calls run in order on one fork: ``results[i]`` for attempt ``i`` (``None``: not run, because
    it failed to parse or names no offered tool), and the state they left. For a ground-truth
    replay, ``unseen_writes`` are the ids of the successful writes whose effect the end state
    cannot show: a write that changes nothing in domain terms (``EndState.same_as``), or every
    write when together they leave the domain state as it started (add, then remove). The
    ``final_state`` component requires those by call."""

    results: tuple[ToolResult | None, ...]
    end_state: EndState
    unseen_writes: tuple[str, ...] = ()


class RewardContext:
    """What a component may ask about one rollout; shared work is computed once and cached."""

    def __init__(self, servers: LiveServers, rollout: Rollout) -> None:
        self.servers = servers
        self.rollout = rollout
        self._offered: dict[str, dict[str, Any]] | None = None
        self._execution: Execution | None = None
        self._ground_truth: Execution | None = None
        self._alignment: Alignment | None = None
        self._memo: dict[str, Any] = {}
        self._forks: list[Fork] = []

    @property
    def task(self) -> Task:
        return self.rollout.task

    def tool_schemas(self) -> dict[str, dict[str, Any]]:
        """Name → parameter schema of the tools the model could call: the offered tools when the
        rollout lists them (perturbations add distractors or hide tools), else the servers' tools."""
        if self._offered is None:
            if self.rollout.tools is None:
                self._offered = self.servers.schemas(self.task.servers)
            else:
                offered = {}
                for tool in self.rollout.tools:
                    fn = tool.get("function", tool) if isinstance(tool, dict) else None
                    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                        params = fn.get("parameters")
                        offered[fn["name"]] = params if isinstance(params, dict) else {}
                self._offered = offered
        return self._offered

    def tool_exists(self, name: str) -> bool:
        return name in self.tool_schemas()

    @property
    def execution(self) -> Execution:
        """The rollout's calls run live, in order, on a fork of the task's initial state. Calls
        naming a tool the model was not offered are not run."""
        if self._execution is None:
            fork = self.servers.fork(self.task)
            self._forks.append(fork)
            schemas = self.tool_schemas()
            results: list[ToolResult | None] = []
            for attempt in self.rollout.attempts:
                if isinstance(attempt, ToolCall) and attempt.name in schemas:
                    results.append(fork.call(attempt.name, attempt.arguments))
                else:
                    results.append(None)
            self._execution = Execution(tuple(results), fork.end_state())
        return self._execution

    @property
    def ground_truth(self) -> Execution:
        """The task's ground-truth calls replayed on another fork of the initial state (once per
        task: the rollouts of a GRPO group share it)."""
        if self._ground_truth is None:
            self._ground_truth = self.servers.ground_truth(self.task)
        return self._ground_truth

    @property
    def alignment(self) -> Alignment:
        if self._alignment is None:
            self._alignment = align(self.task, self.rollout.attempts)
        return self._alignment

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """Cache any value several components need (third-party components share work this way)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def close(self) -> None:
        for fork in self._forks:
            fork.close()
        self._forks.clear()


# -- the combiner -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class WeightedComponent:
    name: str
    weight: float
    component: Any

    @property
    def best(self) -> float:
        return float(self.component.range()[1])

    @property
    def worst(self) -> float:
        return float(self.component.range()[0])


@attrs.frozen(kw_only=True)
class RewardResult:
    rollout_id: str
    total: float
    scores: dict[str, Score]
    weights: dict[str, float]
    best: float = 0.0  # the highest total this rollout's task allows (Σ weight · best value, applicable components)

    @property
    def shortfall(self) -> float:
        """How far below the best attainable total: comparable across call and no-call tasks."""
        return self.best - self.total

    def value(self, name: str) -> float:
        return self.scores[name].value

    def to_json(self) -> dict[str, Any]:
        return {"id": self.rollout_id, "total": self.total, "best": self.best, "weights": self.weights,
                "components": {name: score.to_json() for name, score in self.scores.items()}}


class Reward:
    """The weighted combiner: ``R = Σ weight · value`` over the components that apply."""

    def __init__(self, components: Sequence[WeightedComponent], servers: LiveServers) -> None:
        names = [c.name for c in components]
        if len(set(names)) != len(names):
            raise ConfigError(f"reward components must be unique, got {names}")
        self.components = list(components)
        self.servers = servers
        # each component's share of the best total (ranges are fixed, so computed once)
        self._best = [c.weight * (c.best if c.weight >= 0 else c.worst) for c in self.components]

    @property
    def weights(self) -> dict[str, float]:
        return {c.name: c.weight for c in self.components}

    def score(self, rollout: Rollout) -> RewardResult:
        """Score one rollout. Never raises for anything a rollout contains; a component that
        crashes (a bug) scores 0 with its error recorded, and is logged."""
        context = RewardContext(self.servers, rollout)
        scores: dict[str, Score] = {}
        total = best = 0.0
        try:
            for entry, entry_best in zip(self.components, self._best):
                try:
                    score = entry.component.score(rollout, context)
                    if not isinstance(score, Score) or not math.isfinite(score.value):
                        raise TypeError(f"score() must return a Score with a finite value, got {score!r}")
                except Exception as exc:
                    log.warning("reward component failed", component=entry.name, rollout=rollout.id, error=repr(exc))
                    score = Score(value=0.0, explanation=f"component failed: {type(exc).__name__}: {exc}",
                                  error=f"{type(exc).__name__}: {exc}")
                scores[entry.name] = score
                if score.applies:
                    best += entry_best
                    if score.error is None:
                        total += entry.weight * score.value
        finally:
            context.close()
        return RewardResult(rollout_id=rollout.id, total=total, scores=scores, weights=self.weights, best=best)

    def __call__(self, rollouts: Iterable[Rollout]) -> list[float]:
        """A batch of rollouts → their rewards (the shape TRL-style trainers call)."""
        return [self.score(r).total for r in rollouts]


# ``[reward] preset`` (docs/reward.md, "Presets"): name -> (component, weight, options), a weight of
# None being the component's default. ``paper`` is the paper's formula, bit for bit; ``guarded`` adds
# the outcome (end state, read results), the reply on clarify/abstain tasks, and gives coverage and
# tool-name credit only to calls that passed validity, so that no known way of gaming the paper's
# formula scores as much as the ground truth (tests/plugins/test_reward_hacking.py).
PRESETS: dict[str, tuple[tuple[str, float | None, dict[str, Any]], ...]] = {
    "paper": tuple((name, None, {}) for name in DEFAULT_COMPONENTS),
    "guarded": (
        ("validity", None, {"matched_only": True}),
        ("coverage", None, {"valid_only": True}),
        ("efficiency", None, {}),
        ("tool_name", None, {"valid_only": True, "matched_only": True}),
        ("arguments", None, {}),
        ("abstention", None, {}),
        ("final_state", 1.0, {}),
        ("answers", 0.3, {}),
        ("precision", 0.2, {"valid_only": True}),
        ("honest_reply", 0.5, {}),
        ("final_reply", 0.3, {}),
    ),
}
DEFAULT_PRESET = "guarded"


def preset_components(name: str) -> list[Any]:
    """The ``RewardComponentConfig`` entries of a preset (what ``components`` would list)."""
    from prove_core.config import RewardComponentConfig

    if name not in PRESETS:
        raise ConfigError(f"invalid config:\n  $.reward.preset: no preset named {name!r} (presets: {', '.join(PRESETS)})")
    return [RewardComponentConfig(name=n, weight=w, options=dict(o)) for n, w, o in PRESETS[name]]


def reward_entries(config: Any, problems: list[str]) -> list[tuple[str, Any]]:
    """The components ``config`` (a ``RewardConfig``) stands for, each with the config path its
    problems are reported under: its ``components`` list, or its preset (``None``: the default)
    less ``remove``, with ``weights`` applied and ``add`` appended. A name in ``remove`` or
    ``weights`` that the preset lacks goes to ``problems``, with a did-you-mean."""
    from prove_core.errors import did_you_mean

    if config.components is not None:
        return [(f"$.reward.components[{i}]", entry) for i, entry in enumerate(config.components)]
    preset = config.preset or DEFAULT_PRESET
    base = preset_components(preset)
    names = [entry.name for entry in base]
    for where, name in [*((f"$.reward.remove[{i}]", n) for i, n in enumerate(config.remove)),
                        *((f"$.reward.weights.{n}", n) for n in config.weights)]:
        if name not in names:
            problems.append(f"{where}: the {preset!r} preset has no component {name!r}{did_you_mean(name, names)} "
                            f"(it has: {', '.join(names)})")
    kept = [(f"$.reward.preset ({preset}: {entry.name})",
             attrs.evolve(entry, weight=config.weights.get(entry.name, entry.weight)))
            for entry in base if entry.name not in config.remove]
    placed = kept + [(f"$.reward.add[{i}]", entry) for i, entry in enumerate(config.add)]
    if not placed:
        problems.append(f"$.reward.remove: removes every component of the {preset!r} preset and adds none")
    return placed


def build_reward(config: Any | None, registry: Any, *, server_options: Mapping[str, Any] | None = None,
                 sessions: Any = None) -> Reward:
    """Phase 2 of the ``[reward]`` config: build each component through the registry's loader,
    its options structured with its ``Config``. ``config`` is a ``RewardConfig`` (``None``: the
    default preset); its ``components`` list, when given, is the whole reward, else its ``preset``
    (``None``: ``DEFAULT_PRESET``) names one of ``PRESETS``. ``sessions`` is the experiment's
    ``[sessions]`` its live forks run under (``None``: defaults)."""
    from prove_core.config import RewardConfig, listed_more_than_once, raise_problems

    config = config if config is not None else RewardConfig()
    problems: list[str] = []
    placed = reward_entries(config, problems)
    entries = [entry for _, entry in placed]
    built: list[WeightedComponent] = []
    for where, entry in placed:
        component = registry.build_entry("rewards", entry.name, entry.options, where=where, problems=problems)
        if component is None:
            continue
        weight = entry.weight if entry.weight is not None else float(getattr(component, "default_weight", 1.0))
        if not math.isfinite(weight):
            problems.append(f"{where}.weight: must be a finite number, got {weight}")
            continue
        built.append(WeightedComponent(name=entry.name, weight=weight, component=component))
    problems += listed_more_than_once([e.name for e in entries], where="$.reward.components" if config.components
                                      is not None else "$.reward.add", what="component",
                                      hint="" if config.components is not None else
                                      " (it is in the preset already: change its weight with [reward.weights])")
    raise_problems(problems)
    return Reward(built, LiveServers(registry, options=server_options, sessions=sessions))


# -- the rollout JSONL format -------------------------------------------------------------------------


def rollout_from_record(record: Mapping[str, Any], *, parser: Callable[[str], Parser], default_parser: str | None = "hermes",
                        line: int | None = None) -> Rollout:
    """One line of a rollouts JSONL file (docs/reward.md) as a ``Rollout``.

    ``{"id", "task", "messages": [...OpenAI chat...]}`` — every assistant message is one turn;
    its ``tool_calls`` are decoded (arguments strings that are not JSON become parse failures),
    and an assistant message without ``tool_calls`` has its ``content`` (a string, or a list of
    OpenAI content parts, whose text parts are joined) run through the parser.
    ``{"id", "task", "completion": "raw text" | ["turn 1", "turn 2"], "parser": "hermes"}`` —
    raw model text. Optional: ``tools`` (offered tools), ``prompt_messages`` (that many leading
    messages are the prompt, not the model's), ``parser``. A training example (``id``,
    ``messages``, ``tools``, ``task``) is a valid record: its assistant turns are the reference.
    ``parser(name)`` returns the registered parser of that name.
    """
    where = f"line {line}" if line is not None else "record"
    if not isinstance(record, Mapping):
        raise ProveError(f"{where}: a rollout must be a JSON object")
    if "task" not in record:
        raise ProveError(f"{where}: a rollout needs a 'task'")
    task = from_json(record["task"], Task)
    rollout_id = str(record.get("id", f"line-{line}" if line is not None else "rollout"))
    parser_name = record.get("parser", default_parser)
    tools = record.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise ProveError(f"{where}: 'tools' must be a list of OpenAI function schemas")
    attempts: list[Attempt] = []
    turns: list[int] = []
    content: list[str] = []

    last: list[str] = [""]  # the prose of the last assistant turn

    def add(turn: ParsedTurn, index: int) -> None:
        attempts.extend(turn.attempts)
        turns.extend([index] * len(turn.attempts))
        last[0] = turn.content or ""
        if turn.content:
            content.append(turn.content)

    def parsed(text: Any) -> ParsedTurn:
        if not parser_name:
            raise ProveError(f"{where}: raw text needs a 'parser' (or a default parser)")
        return safe_parse(parser(parser_name), text)

    if "messages" in record:
        messages = record["messages"]
        skip = record.get("prompt_messages", 0)
        if not isinstance(messages, list) or not isinstance(skip, int):
            raise ProveError(f"{where}: 'messages' must be a list and 'prompt_messages' an integer")
        turn_index = 0
        for message in messages[skip:]:
            if not isinstance(message, dict) or message.get("role") != "assistant":
                continue
            tool_calls = message.get("tool_calls")
            text = message_text(message.get("content"))  # a string, or OpenAI content parts
            if tool_calls:
                entries = tool_calls if isinstance(tool_calls, list) else [tool_calls]
                start = len(attempts)
                found = tuple(decode_openai_tool_call(e, index=start + i) for i, e in enumerate(entries))
                add(ParsedTurn(attempts=found, content=text or ""), turn_index)
            elif text:
                add(parsed(text), turn_index)
            elif text is None and message.get("content"):
                add(parsed(message["content"]), turn_index)  # neither text nor parts: a parse failure
            turn_index += 1
    elif "completion" in record:
        completion = record["completion"]
        for turn_index, text in enumerate(completion if isinstance(completion, list) else [completion]):
            add(parsed(text), turn_index)
    else:
        raise ProveError(f"{where}: a rollout needs 'messages' or 'completion'")
    # Parsers number calls per turn; make ids unique across the rollout.
    seen: set[str] = set()
    for i, attempt in enumerate(attempts):
        if isinstance(attempt, ToolCall):
            call = attrs.evolve(attempt, id=f"{attempt.id}_{i}") if attempt.id in seen else attempt
            attempts[i] = call
            seen.add(call.id)
    return Rollout(id=rollout_id, task=task, attempts=attempts, turns=turns, tools=tools, content="\n".join(content),
                   reply=last[0])
