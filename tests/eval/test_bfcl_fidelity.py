"""`prove eval`'s BFCL evaluator against BFCL's own pipeline, entry by entry.

Every scripted imperfect policy of ``benchmarks/bench_bfcl_fidelity.py`` plays 10 entries of each
category (spread over it, one of them using BFCL's MathAPI) through PROVE's evaluator and through
BFCL's own handler loop (a subclass of BFCL's handler whose model query returns the policy's reply)
and BFCL's runner: the verdicts and error types must be identical, and so must every message the
model is shown, tool results included. The full 800-entry comparison is the benchmark script.
"""

import pytest

from benchmarks import bench_bfcl_fidelity as fidelity

PER_CATEGORY = 10
MATH = "multi_turn_{}_32"  # calls MathAPI.logarithm, whose result BFCL renders with mpmath's repr


@pytest.fixture(scope="module")
def pipeline(bfcl):
    return fidelity.bfcl_pipeline()


def ids(category):
    chosen = fidelity.spread(category, PER_CATEGORY)
    return chosen if MATH.format(category) in chosen else [*chosen[:-1], MATH.format(category)]


@pytest.mark.parametrize("protocol", ["fc", "prompting"])
def test_verdicts_and_shown_messages_equal_bfcls_own_pipeline(pipeline, protocol):
    cells = {}
    for policy in fidelity.POLICIES[protocol]:
        for category in fidelity.CATEGORIES:
            chosen = ids(category)
            ours = fidelity.run_prove(policy, protocol, category, chosen)
            theirs = fidelity.run_bfcl(policy, protocol, category, chosen, pipeline)
            assert [v.id for v in ours] == [v.id for v in theirs] == chosen
            for a, b in zip(ours, theirs):
                assert (a.valid, a.error_type) == (b.valid, b.error_type), (policy, category, a.id)
                assert len(a.seen) == len(b.seen), (policy, category, a.id)
                for step, (shown, expected) in enumerate(zip(a.seen, b.seen)):
                    assert shown == expected, (policy, category, a.id, step)
            cells[policy, category] = (ours, theirs)
    passes = {policy: sum(v.valid for (p, _), (ours, _) in cells.items() if p == policy for v in ours)
              for policy in fidelity.POLICIES[protocol]}
    n = PER_CATEGORY * len(fidelity.CATEGORIES)
    assert passes["oracle"] == passes["sequential"] == n
    if protocol == "prompting":  # BFCL's decoder joins 'doc' + 'ument': the oracle's calls, written so
        assert passes["concatenated_strings"] == n
    # force-quit in the last turn is scored by BFCL's checker, not failed (BFCL's runner only fails
    # an entry whose turns were cut short): the oracle that then loops on a harmless call passes
    assert passes["oracle_then_loop_in_last_turn"] == n
    assert passes["loop_first_turn"] == 0 and passes["prose_only" if protocol == "prompting" else "malformed_json"] == 0
    if protocol == "fc":  # BFCL cannot decode "" / "null" arguments: the step ends the turn, nothing runs
        assert passes["empty_arguments"] == passes["null_arguments"] == 0
    assert 0 < passes["wrong_types"] < n and 0 < passes["ground_truth_strings" if protocol == "prompting" else "reversed"] < n
    errors = {v.error_type for ours, _ in cells.values() for v in ours if not v.valid}
    assert {"multi_turn:force_terminated", "multi_turn:empty_turn_model_response",
            "multi_turn:instance_state_mismatch", "multi_turn:execution_response_mismatch"} <= errors
    # the tool results are BFCL's own text: the backend's values, mpmath's repr included
    math = cells["oracle", "base"][0][ids("base").index(MATH.format("base"))]
    results = [m["content"] for m in math.seen[-1] if m["role"] == "tool"]
    assert results and any("mpf('" in r for r in results), results


def test_the_comparison_catches_a_departure(pipeline, monkeypatch):
    """The check can fail: PROVE's former reading of a reply (its parsed calls, where empty
    arguments become {} and run) and former scoring (force-quit fails the entry, whatever the
    turn) both disagree with BFCL."""
    from prove_plugins.eval import bfcl as eval_bfcl

    chosen = ids("base")[:3]
    original_step, original_check = eval_bfcl._fc_step, eval_bfcl.Bfcl.check

    def parsed_calls(turn):
        class Parsed:
            message = None
            calls, attempts, failures, content = turn.calls, turn.attempts, turn.failures, turn.content
        return original_step(Parsed())

    monkeypatch.setattr(eval_bfcl, "_fc_step", parsed_calls)
    ours = fidelity.run_prove("empty_arguments", "fc", "base", chosen)
    theirs = fidelity.run_bfcl("empty_arguments", "fc", "base", chosen, pipeline)
    assert [a.seen for a in ours] != [b.seen for b in theirs]
    monkeypatch.setattr(eval_bfcl, "_fc_step", original_step)

    def force_quit_fails(self, episode, *args):
        if episode.force_quit:
            return {"valid": False, "error_type": "multi_turn:force_terminated"}
        return original_check(self, episode, *args)

    monkeypatch.setattr(eval_bfcl.Bfcl, "check", force_quit_fails)
    ours = fidelity.run_prove("oracle_then_loop_in_last_turn", "fc", "base", chosen)
    theirs = fidelity.run_bfcl("oracle_then_loop_in_last_turn", "fc", "base", chosen, pipeline)
    assert [a.valid for a in ours] == [False] * 3 and [b.valid for b in theirs] == [True] * 3
