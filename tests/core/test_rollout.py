"""The shared multi-turn rollout loop: live calls, tool messages, limits, reward-ready output."""

import json

from prove_core.env.runtime import Environment, ServerRuntime
from prove_core.model import ToolCall
from prove_core.plugin.manager import Plugins
from prove_core.reward.core import build_reward
from prove_core.reward.parsing import ParseFailure
from prove_core.reward.rollout import PolicyTurn, RolloutLimits, ScriptedPolicy, rollout


def _example():
    import tempfile
    from pathlib import Path

    from prove_core.config import load_experiment
    from prove_core.model import Example, from_json, read_jsonl
    from prove_core.synth.pipeline import synthesize

    tmp = Path(tempfile.mkdtemp())
    exp = load_experiment({"name": "r", "output_dir": str(tmp), "servers": [{"name": "banking"}],
                           "synth": {"examples": 5, "plots": False, "exports": [], "perturb": False,
                                     "cache_dir": str(tmp / "c")}})
    synthesize(exp, Plugins().load(autoload=False), echo=lambda _: None, progress=False)
    examples = [from_json(r, Example) for r in read_jsonl(tmp / "r" / "synth" / "corpus.jsonl")]
    return next(e for e in examples if e.task.expected == "call" and len(e.task.calls) >= 2)


EXAMPLE = None


def example():
    global EXAMPLE
    if EXAMPLE is None:
        EXAMPLE = _example()
    return EXAMPLE


def env():
    """The example's world: its server at the seed it was synthesized on."""
    return Environment([ServerRuntime(Plugins().load(autoload=False).registry.load("servers", "banking"),
                                      seed=example().task.seed)])


def oracle_turns(ex):
    """The ground truth, one call per turn, then prose after each user turn."""
    turns = [PolicyTurn(attempts=[ToolCall(id=c.id, name=c.tool, arguments=c.arguments)]) for c in ex.task.calls]
    return [*turns, *[PolicyTurn(content="done")] * 5]


def test_the_ground_truth_played_as_a_policy_scores_the_maximum():
    ex = example()
    played = rollout(ScriptedPolicy(oracle_turns(ex)), ex, env())
    assert [c.name for c in played.rollout.calls] == [c.tool for c in ex.task.calls]
    tool_messages = [m for m in played.messages if m["role"] == "tool"]
    assert len(tool_messages) == len(ex.task.calls) and all('"code"' not in m["content"] for m in tool_messages)
    result = build_reward(None, Plugins().load(autoload=False).registry).score(played.rollout)
    assert abs(result.total - result.best) < 1e-9


def test_parse_failures_are_kept_in_place_and_reported_back():
    ex = example()
    failure = ParseFailure(parser="hermes", kind="invalid_json", message="bad JSON", text="<tool_call>{oops")
    played = rollout(ScriptedPolicy([PolicyTurn(attempts=[failure]), PolicyTurn(content="sorry")]), ex, env())
    assert played.rollout.attempts[0] == failure
    assert any("could not be parsed" in (m.get("content") or "") for m in played.messages)


def test_assistant_turn_limit_stops_a_spamming_policy():
    ex = example()
    spam = PolicyTurn(attempts=[ToolCall(id="x", name="find_customers", arguments={"query": "example"})])
    played = rollout(ScriptedPolicy([spam] * 100), ex, env(), limits=RolloutLimits(max_assistant_turns=4))
    assert len(played.rollout.calls) == 4


def test_evaluation_batches_through_the_policys_own_capability_and_plays_the_rest_one_by_one():
    """``evaluate`` finds batching as a capability of the policy (``play_batch``), not by looking
    for a plugin module; a policy without it plays every example through ``rollout``."""
    from prove_core.env.runtime import Environments
    from prove_core.train.core import evaluate

    ex = example()
    registry = Plugins().load(autoload=False).registry
    reward = build_reward(None, registry)

    class Batching(ScriptedPolicy):
        batches = []

        def play_batch(self, examples, env_for, *, limits, max_batch, rollout_ids):
            self.batches.append(list(rollout_ids))
            return [rollout(ScriptedPolicy(oracle_turns(e)), e, env_for(e.task), limits=limits, rollout_id=i)
                    for e, i in zip(examples, rollout_ids)]

    batching = Batching([])
    summary = evaluate(batching, [ex], reward=reward, environment=Environments(registry), samples=2)
    assert batching.batches == [[f"{ex.id}#0", f"{ex.id}#1"]]  # one batch of every rollout
    assert summary["rollouts"] == 2 and abs(summary["total"] - summary["best"]) < 1e-9
    plain = evaluate(ScriptedPolicy(oracle_turns(ex)), [ex], reward=reward, environment=Environments(registry))
    assert plain["rollouts"] == 1 and abs(plain["total"] - plain["best"]) < 1e-9


def test_a_tool_that_was_not_offered_is_not_run_and_gets_unknown_tool():
    """A hidden tool (the servers have it, the example does not offer it) is answered with the
    typed UNKNOWN_TOOL error a nonexistent tool gets, without running, so the model never sees
    its real result and the session is untouched; the reward fails the same call on tier 1."""
    import attrs

    ex = example()
    world = env()

    def writes(step):
        sid = world.new_session()
        before = world.state_hash(sid)
        world.call(sid, step.tool, step.arguments)
        return world.state_hash(sid) != before

    first = next(step for step in ex.task.calls if writes(step))  # a write: running it would show
    hidden = attrs.evolve(ex, tools=[t for t in ex.tools if t["function"]["name"] != first.tool])
    call = ToolCall(id="h", name=first.tool, arguments=first.arguments)
    played = rollout(ScriptedPolicy([PolicyTurn(attempts=[call]), PolicyTurn(content="sorry")]), hidden, world)
    (reply,) = [m for m in played.messages if m["role"] == "tool"]
    assert json.loads(reply["content"]) == {"code": "UNKNOWN_TOOL", "reason": "UNKNOWN_TOOL",
                                            "message": f"no tool named {first.tool!r}",
                                            "details": {"tool": first.tool}}
    initial = world.state_hash(world.new_session())
    assert played.final_state_hash == initial  # nothing ran
    offered = {t["function"]["name"] for t in played.rollout.tools}
    assert first.tool not in offered
    result = build_reward(None, Plugins().load(autoload=False).registry).score(played.rollout)
    assert result.scores["validity"].details["calls"][0]["failed_tier"] == 1
    # the same call, offered, runs
    ok = rollout(ScriptedPolicy([PolicyTurn(attempts=[call]), PolicyTurn(content="done")]), ex, world)
    (reply,) = [m for m in ok.messages if m["role"] == "tool"]
    assert '"code"' not in reply["content"] and ok.final_state_hash != initial


def test_a_policy_that_raises_leaves_no_session_open():
    """The rollout's session is closed however the episode ends (a model request that fails)."""
    from prove_core.errors import RequestFailed

    class Failing:
        name = "failing"

        def __init__(self):
            self.turns = 0

        def respond(self, messages, tools):
            self.turns += 1
            if self.turns == 2:
                raise RequestFailed("endpoint failed: HTTP 400", status=400)
            call = example().task.calls[0]
            return PolicyTurn(attempts=[ToolCall(id="c1", name=call.tool, arguments=call.arguments)])

    world = env()
    try:
        rollout(Failing(), example(), world)
    except RequestFailed:
        pass
    else:
        raise AssertionError("the failure must reach the caller")
    assert len(world.runtimes["banking"]) == 0
