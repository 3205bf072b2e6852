"""Properties of the ``guarded`` reward over the reward-hacking corpus (five servers), issue 27.

**Self-correction is not punished.** The end state compares the tables the tools own, not the
clock or the id counters, so a rollout that undoes an unrequested write, or re-sends the right
value after a wrong one, reaches the ground truth's end state and scores above leaving the mistake
in — and never above the ground truth. Which rollouts restore the intended state is decided here
by an oracle of the test's own (the tables as JSON with every date-time value dropped), not by
the reward's comparison under test.

**Padding never pays.** On every call task, random mixes of failed calls — a tool that does not
exist, a call missing a required argument, a call the server refuses — and redundant reads,
inserted one at a time at random places in the ground truth, lower the score at every step.
Under ``paper`` (and ``guarded`` before issue 27) validity and tool name are means over the
calls, so a successful redundant read raised them once a failed call was in the rollout.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from prove_core.model import Example
from prove_core.reward.core import Reward
from prove_core.toolkit.state import State
from tests.plugins.test_reward_hacking import (  # noqa: F401 - module fixtures
    Calls,
    World,
    as_rollout,
    corpus,
    gt_calls,
    properties,
    rewards,
    worlds,
)

# -- corrections --------------------------------------------------------------------------------

TOGGLES = (("freeze", "unfreeze"), ("lock", "unlock"), ("enable", "disable"), ("pause", "resume"),
           ("archive", "unarchive"), ("mute", "unmute"), ("pin", "unpin"), ("block", "unblock"), ("hide", "show"),
           ("activate", "deactivate"), ("star", "unstar"), ("follow", "unfollow"), ("close", "reopen"),
           ("add_to", "remove_from"), ("add", "remove"))


def _undated(value: Any) -> Any:
    """``value`` with every ISO date-time string dropped (the oracle ignores when things happened)."""
    if isinstance(value, dict):
        return {k: _undated(v) for k, v in value.items() if not (isinstance(v, str) and _is_stamp(v))}
    if isinstance(value, list):
        return [_undated(v) for v in value if not (isinstance(v, str) and _is_stamp(v))]
    return value


def _is_stamp(text: str) -> bool:
    return len(text) >= 16 and text[4] == "-" and text[7] == "-" and text[10] in "T "


def tables_after(reward: Reward, example: Example, calls: Calls) -> tuple[dict[str, Any], list[bool]]:
    """The tables (date-times dropped) after ``calls`` on a fork, and which calls succeeded."""
    fork = reward.servers.fork(example.task)
    try:
        ok = [not fork.call(tool, args).is_error for tool, args in calls]
        out = {}
        for name, runtime in fork.env.runtimes.items():
            data = State.from_snapshot(runtime.state(fork.session_id).snapshot()).to_json()
            out[name] = _undated({"tables": data["tables"],
                                  "vars": {k: v for k, v in data["vars"].items() if not k.startswith("__")}})
        return out, ok
    finally:
        fork.close()


def slips(example: Example, world: World) -> list[tuple[int, tuple[str, dict[str, Any]]]]:
    """Per idempotent ground-truth write: the same call with one value changed (a number doubled,
    another enum value, a string altered), the slip a model makes and can correct by re-sending."""
    out = []
    for i, (tool, args) in enumerate(gt_calls(example)):
        spec = world.specs[tool]
        if spec.annotations.read_only or not spec.annotations.idempotent:
            continue
        entities = spec.entity_params()
        props = properties(spec)
        for k, v in args.items():
            if k in entities:
                continue
            enum = props.get(k, {}).get("enum") or []
            if isinstance(v, bool):
                wrong: Any = not v
            elif isinstance(v, int | float):
                wrong = v * 2 if v else 1
            elif enum:
                wrong = next((e for e in enum if e != v), None)
            elif isinstance(v, str):
                wrong = f"{v} (draft)"
            else:
                continue
            if wrong is not None:
                out.append((i, (tool, {**args, k: wrong})))
                break
    return out


Call = tuple[str, dict[str, Any]]


def undo_calls(reward: Reward, example: Example, world: World, write: Call) -> list[Call]:
    """Calls that could take back ``write``: its counterpart tool (freeze / unfreeze, add_to /
    remove_from) with the same arguments, the same tool with its flags flipped, or with the target
    record's current values."""
    tool, args = write
    out = []
    flags = {k: not v for k, v in args.items() if isinstance(v, bool)}
    if flags:
        out.append((tool, {**args, **flags}))
    for a, b in TOGGLES:
        for this, that in ((a, b), (b, a)):
            if tool.startswith(this + "_") or f"_{this}_" in tool:
                other = tool.replace(this, that, 1)
                if other in world.specs and other != tool:
                    props = properties(world.specs[other])
                    out.append((other, {k: v for k, v in args.items() if k in props}))
    fork = reward.servers.fork(example.task)
    try:
        records = {}
        for runtime in fork.env.runtimes.values():
            for table in State.from_snapshot(runtime.state(fork.session_id).snapshot()).to_json()["tables"].values():
                records.update(table)
    finally:
        fork.close()
    for param, value in args.items():
        if param in world.specs[tool].entity_params() and isinstance(value, str) and value in records:
            record = records[value]
            restored = {k: record.get(k, v) for k, v in args.items()}
            if restored != args:
                out.append((tool, restored))
    return out


@pytest.fixture(scope="module")
def cases(corpus, rewards) -> dict[str, list[tuple[str, Calls, Calls, Calls]]]:  # noqa: F811
    """(task, ground truth, mistake corrected, mistake left) per kind, checked by the oracle: the
    correction restores the ground truth's tables, leaving the mistake does not."""
    paper = rewards["paper"]
    known = worlds(corpus, paper)
    out: dict[str, list[tuple[str, Calls, Calls, Calls]]] = {"slip": [], "undo": []}
    for example in corpus:
        if example.task.expected != "call" or not example.task.calls:
            continue
        world = known[(tuple(example.task.servers), example.task.seed)]
        calls = gt_calls(example)
        truth, _ = tables_after(paper, example, calls)
        for i, wrong in slips(example, world):
            left = calls[:i] + [wrong] + calls[i + 1:]
            fixed = calls[:i] + [wrong] + calls[i:]
            after_left, ok_left = tables_after(paper, example, left)
            after_fixed, ok_fixed = tables_after(paper, example, fixed)
            if ok_left[i] and all(ok_fixed) and after_fixed == truth and after_left != truth:
                out["slip"].append((example.id, calls, fixed, left))
                break
        for write in world.writes:
            if write in calls or world.specs[write[0]].annotations.destructive:
                continue
            left = calls + [write]
            after_left, ok_left = tables_after(paper, example, left)
            if not ok_left[-1] or after_left == truth:
                continue
            for undo in undo_calls(paper, example, world, write):
                after_fixed, ok_fixed = tables_after(paper, example, left + [undo])
                if ok_fixed[-1] and after_fixed == truth:
                    out["undo"].append((example.id, calls, left + [undo], left))
                    break
            else:
                continue
            break
    return out


@pytest.mark.parametrize("kind, at_least", [("slip", 10), ("undo", 5)])
def test_a_correction_scores_between_the_ground_truth_and_the_mistake_left_in(corpus, rewards, cases, kind, at_least):  # noqa: F811
    """ground truth >= ground truth with the mistake corrected > ground truth with it left in."""
    by_id = {e.id: e for e in corpus}
    mine = cases[kind]
    assert len(mine) >= at_least, f"only {len(mine)} {kind} cases"
    assert len({by_id[t].task.servers[0] for t, *_ in mine}) >= 2
    reward = rewards["guarded"]
    wrong = []
    for task, calls, fixed, left in mine:
        example = by_id[task]
        truth, corrected, uncorrected = (reward.score(as_rollout(example, c, name))
                                         for c, name in ((calls, "gt"), (fixed, "fixed"), (left, "left")))
        if corrected.scores["final_state"].value != 1.0 or not (
                truth.total >= corrected.total > uncorrected.total):
            wrong.append((task, round(truth.total, 3), round(corrected.total, 3), round(uncorrected.total, 3),
                          corrected.scores["final_state"].explanation[:160]))
    assert not wrong, wrong[:5]


# -- padding ------------------------------------------------------------------------------------

PADDINGS = 3  # random paddings per task
LONGEST = 4  # padding calls per padding, added one at a time


def unknown_tool(rng: random.Random, example: Example, world: World) -> tuple[str, dict[str, Any]]:
    tool, args = rng.choice(gt_calls(example))
    return (f"{tool}_{rng.choice(('now', 'v2', 'fast'))}", dict(args))


def missing_argument(rng: random.Random, example: Example, world: World) -> tuple[str, dict[str, Any]] | None:
    options = [(t, a) for t, a in gt_calls(example) if world.specs[t].parameters.get("required")]
    if not options:
        return None
    tool, args = rng.choice(options)
    dropped = rng.choice(world.specs[tool].parameters["required"])
    return (tool, {k: v for k, v in args.items() if k != dropped})


def refused(rng: random.Random, example: Example, world: World) -> tuple[str, dict[str, Any]] | None:
    """A ground-truth call with one of its entity ids replaced by one that does not exist."""
    options = [(t, a, p) for t, a in gt_calls(example) for p in world.specs[t].entity_params() if isinstance(a.get(p), str)]
    if not options:
        return None
    tool, args, param = rng.choice(options)
    prefix = args[param].split("_", 1)[0]
    return (tool, {**args, param: f"{prefix}_zzzz{rng.randrange(10_000):04d}"})


def redundant_read(rng: random.Random, example: Example, world: World) -> tuple[str, dict[str, Any]] | None:
    """A ground-truth read repeated, else another task's read of the same servers."""
    own = [(t, a) for t, a in gt_calls(example) if world.specs[t].annotations.read_only]
    pool = own if own and rng.random() < 0.6 else world.reads or own
    return rng.choice(pool) if pool else None


KINDS = (unknown_tool, missing_argument, refused, redundant_read)


def padding_steps(reward: Reward, example: Example, world: World, rng: random.Random) -> list[Calls]:
    """The ground truth, then one padding call more at each step, at a random place; every padding
    call checked to have failed or to be a read when the rollout runs."""
    calls: list[tuple[tuple[str, dict[str, Any]], bool]] = [(c, False) for c in gt_calls(example)]
    steps = [[c for c, _ in calls]]
    for _ in range(LONGEST):
        made = rng.choice(KINDS)(rng, example, world)
        if made is None:
            continue
        trial = list(calls)
        trial.insert(rng.randrange(len(trial) + 1), (made, True))
        if not padding_only(reward, example, world, trial):
            continue
        calls = trial
        steps.append([c for c, _ in calls])
    return steps


def padding_only(reward: Reward, example: Example, world: World, calls: list[tuple[tuple[str, dict[str, Any]], bool]]) -> bool:
    """Does every padding call fail, or only read, and every ground-truth call still succeed?"""
    fork = reward.servers.fork(example.task)
    try:
        for (tool, args), padding in calls:
            spec = world.specs.get(tool)
            if spec is None:
                continue  # a tool that does not exist is never run
            failed = fork.call(tool, args).is_error
            if padding and not (failed or spec.annotations.read_only) or not padding and failed:
                return False
        return True
    finally:
        fork.close()


@pytest.fixture(scope="module")
def padded(corpus, rewards) -> list[tuple[str, list[Calls]]]:  # noqa: F811
    known = worlds(corpus, rewards["paper"])
    out = []
    for example in corpus:
        if example.task.expected != "call" or not example.task.calls:
            continue
        world = known[(tuple(example.task.servers), example.task.seed)]
        rng = random.Random(f"padding:{example.id}")
        for _ in range(PADDINGS):
            steps = padding_steps(rewards["paper"], example, world, rng)
            if len(steps) > 1:
                out.append((example.id, steps))
    return out


def test_every_padding_call_lowers_the_guarded_score(corpus, rewards, padded):  # noqa: F811
    by_id = {e.id: e for e in corpus}
    assert len({task for task, _ in padded}) >= 100
    assert len({by_id[task].task.servers[0] for task, _ in padded}) == 5
    reward = rewards["guarded"]
    paid = []
    for task, steps in padded:
        example = by_id[task]
        totals = [reward.score(as_rollout(example, calls, f"pad{k}")).total for k, calls in enumerate(steps)]
        for k in range(1, len(totals)):
            if totals[k] >= totals[k - 1]:
                paid.append((task, k, [round(t, 4) for t in totals], steps[k]))
                break
    assert not paid, paid[:3]


def test_failed_calls_then_redundant_reads_do_not_pay(corpus, rewards):  # noqa: F811
    """The shape the issue found: the ground truth, two calls to a tool that does not exist, then
    one or two redundant reads (ground-truth reads repeated) score below the same without the reads."""
    known = worlds(corpus, rewards["paper"])
    rows = {"paper": [], "guarded": []}
    for example in corpus:
        if example.task.expected != "call" or not example.task.calls:
            continue
        world = known[(tuple(example.task.servers), example.task.seed)]
        calls = gt_calls(example)
        reads = [c for c in calls if world.specs[c[0]].annotations.read_only]
        if not reads:
            continue
        base = calls + [("no_such_tool", {}), ("no_such_tool", {})]
        for preset, reward in rewards.items():
            before = reward.score(as_rollout(example, base, "base")).total
            for extra in (reads[-1:], (reads * 2)[:2]):
                rows[preset].append(reward.score(as_rollout(example, base + list(extra), "reads")).total - before)
    assert len(rows["guarded"]) >= 100
    assert max(rows["guarded"]) < 0
    assert sum(1 for d in rows["paper"] if d > 0) > len(rows["paper"]) / 2  # the formula's known limit


# -- writes the end state cannot show ---------------------------------------------------------------


def test_writes_the_end_state_cannot_show_are_marked_at_synthesis_and_required_by_call(corpus, rewards):  # noqa: F811
    """A ground-truth write whose replay changes no domain state, or writes that cancel out (add to
    the cart, then remove), are marked in ``task.meta["unseen_writes"]``; a rollout that skips them
    reaches the same end state but not the full final_state."""
    reward = rewards["guarded"]
    marked = [e for e in corpus if e.task.meta.get("unseen_writes")]
    assert marked, "the corpus has tasks whose writes the end state cannot show"
    for example in marked:
        unseen = set(example.task.meta["unseen_writes"])
        truth = reward.score(as_rollout(example, gt_calls(example), "gt"))
        assert truth.scores["final_state"].value == 1.0 and truth.total == pytest.approx(truth.best)
        skipped = [(c.tool, dict(c.arguments)) for c in example.task.calls if c.id not in unseen]
        result = reward.score(as_rollout(example, skipped, "skipped"))
        assert result.scores["final_state"].value == 0.0, (example.id, result.scores["final_state"].explanation)
        assert "required by call" in result.scores["final_state"].explanation
    unmarked = [e for e in corpus if e.task.expected == "call" and e.task.calls and not e.task.meta.get("unseen_writes")]
    assert all(not reward.servers.ground_truth(e.task).unseen_writes for e in unmarked[:60])
