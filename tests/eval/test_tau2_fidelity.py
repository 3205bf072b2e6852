"""τ² fidelity: deterministic, imperfect agents played through ``prove eval``'s τ² evaluator and
through τ²'s own run path (``tau2.run.run_tasks`` with τ²'s agent, user simulator, orchestrator
and evaluator; only the models are scripted stand-ins, the same on both sides) must get the same
reward and termination on every task, and their models must be sent the same prompts.

The harness is ``benchmarks/bench_tau2_fidelity.py`` (which runs every task of a domain); here a
few tasks of τ²'s mock domain (a plain one, one starting from a message history, one from
initialization actions, one whose correct behaviour is to refuse), one retail task, and for the
calls models write oddly (whole floats, ``""`` arguments, NaN, Infinity, lone surrogates, text with
whitespace around it) one airline task whose certificate amount is an integer parameter.
"""

import pytest

MOCK = ["create_task_1", "update_task_with_message_history", "update_task_with_initialization_actions",
        "impossible_task_1"]
RETAIL = ["38"]  # a lookup, τ²'s calculate (a tool returning text), a cancellation; communicates amounts
RETAIL_SCENARIOS = {"golden", "golden_then_30_reads", "unknown_tool", "wrong_values", "golden_parallel",
                    "stop_at_max_steps"}
AIRLINE = ["2"]  # send_certificate(user_id, amount: int): a whole float shows in the tool message
AIRLINE_SCENARIOS = {"whole_floats", "empty_arguments", "non_finite", "infinity", "lone_surrogate", "padded_text"}
# what τ² itself does with each scripted agent on the mock tasks (reward per task, termination)
EXPECTED = {
    "golden": ([1.0, 1.0, 1.0, 1.0], "user_stop"),
    "golden_then_30_reads": ([0.0] * 4, "max_steps"),  # passes if steps were agent turns
    "unknown_tool": ([1.0, 1.0, 1.0, 1.0], "user_stop"),  # PROVE's own error text failed τ²'s replay
    "agent_says_stop": ([0.0] * 4, "user_stop"),  # τ²'s LLMAgent does not stop on ###STOP###: the user does
    "stop_at_max_steps": ([0.0] * 4, "max_steps"),
    "unknown_tool_max_errors_1": ([0.0] * 4, "too_many_errors"),
    "error_loop": ([0.0] * 4, "too_many_errors"),
    "empty_message": ([0.0] * 4, "agent_error"),
    "broken_json": ([0.0] * 4, "agent_error"),
    "empty_arguments": ([0.0] * 4, "agent_error"),  # τ²'s json.loads("") fails the run
}


@pytest.fixture(scope="module")
def harness(tau2):
    from benchmarks.bench_tau2_fidelity import Harness

    with Harness() as h:
        yield h


def _scenarios():
    from benchmarks.bench_tau2_fidelity import SCENARIOS

    return SCENARIOS


@pytest.mark.parametrize("scenario", _scenarios(), ids=lambda s: s.name)
def test_prove_scores_every_scripted_agent_as_tau2_does(harness, tau2, scenario):
    rows = [harness.compare(scenario, "mock", task) for task in tau2.tasks("mock") if task.id in MOCK]
    if scenario.name in RETAIL_SCENARIOS:
        rows += [harness.compare(scenario, "retail", task) for task in tau2.tasks("retail") if task.id in RETAIL]
    if scenario.name in AIRLINE_SCENARIOS:
        rows += [harness.compare(scenario, "airline", task) for task in tau2.tasks("airline") if task.id in AIRLINE]
    assert len(rows) == len(MOCK) + (len(RETAIL) if scenario.name in RETAIL_SCENARIOS else 0) \
        + (len(AIRLINE) if scenario.name in AIRLINE_SCENARIOS else 0)
    assert all(r.agree for r in rows), {f"{r.domain}/{r.task}": r.problems for r in rows if not r.agree}
    if scenario.name in EXPECTED:
        rewards, termination = EXPECTED[scenario.name]
        mock = [r for r in rows if r.domain == "mock"]
        assert [r.tau2.reward for r in mock] == rewards
        assert {r.tau2.termination for r in mock} == {termination}


def test_the_harness_sees_a_difference(harness, tau2):
    """The comparison can fail: PROVE's evaluator with agent turns for steps (its old counting)
    passes the golden run followed by 30 reads, which τ² stops at max_steps."""
    from benchmarks.bench_tau2_fidelity import SCENARIOS, Scenario

    scenario = next(s for s in SCENARIOS if s.name == "golden_then_30_reads")
    task = next(t for t in tau2.tasks("mock") if t.id == "create_task_1")
    lenient = Scenario(name=scenario.name, moves=scenario.moves, max_steps=lambda t: 40)
    real = harness.prove
    harness.prove = lambda s, d, t: real(Scenario(name=s.name, moves=s.moves, max_steps=lambda _t: 200), d, t)
    try:
        row = harness.compare(lenient, "mock", task)
    finally:
        harness.prove = real
    assert row.prove.reward == 1.0 and row.tau2.reward == 0.0 and not row.agree
    assert any("termination" in p for p in row.problems)
