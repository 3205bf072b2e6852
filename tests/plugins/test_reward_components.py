"""The bundled reward components against live banking and shopping tasks (DESIGN §1.3)."""

import math

import attrs
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from prove_core.config import RewardComponentConfig, RewardConfig
from prove_core.model import ToolCall
from prove_core.reward.core import DEFAULT_COMPONENTS, Rollout, build_reward
from prove_core.reward.parsing import ParseFailure
from prove_plugins.reward.components import budget
from tests.support.reward_tasks import banking_transfer_task, registry, shopping_checkout_task

ALL = (*DEFAULT_COMPONENTS, "final_state")


def reward_with(*names, **options):
    components = [RewardComponentConfig(name=n, options=options.get(n, {})) for n in names]
    return build_reward(RewardConfig(components=components), registry())


@pytest.fixture(scope="module")
def full():
    return reward_with(*ALL)


def gt_calls(task):
    return [(c.tool, dict(c.arguments)) for c in task.calls]


# -- the ground truth is the maximum ---------------------------------------------------------------


@pytest.mark.parametrize("make_task", [banking_transfer_task, shopping_checkout_task])
def test_ground_truth_scores_the_maximum_on_every_component(full, make_task):
    task = make_task()
    result = full.score(Rollout.ground_truth(task))
    for entry in full.components:
        score = result.scores[entry.name]
        if entry.name == "abstention":
            assert not score.applies  # the task expects calls
            continue
        assert score.applies and score.error is None, (entry.name, score)
        assert score.value == entry.component.range()[1], (entry.name, score.explanation)
    assert result.total == pytest.approx(0.5 + 0.5 + 0.0 + 0.2 + 0.1 + 0.5)


def test_paper_weights_are_the_paper_presets():
    reward = build_reward(RewardConfig(preset="paper"), registry())
    assert reward.weights == {"validity": 0.5, "coverage": 0.5, "efficiency": 0.15, "tool_name": 0.2,
                              "arguments": 0.1, "abstention": 1.0}
    efficiency = next(c.component for c in reward.components if c.name == "efficiency")
    assert (efficiency.config.alpha, efficiency.config.beta) == (0.5, 0.5)


# -- coverage --------------------------------------------------------------------------------------


def test_breaking_a_dependency_loses_coverage(full):
    task = banking_transfer_task()
    find, accounts, transfer, receipt = gt_calls(task)
    in_order = full.score(Rollout.from_calls(task, [find, accounts, transfer, receipt]))
    swapped = full.score(Rollout.from_calls(task, [find, transfer, accounts, receipt]))  # transfer before its lookup
    assert in_order.value("coverage") == 1.0
    assert swapped.value("coverage") == pytest.approx(3 / 4)
    assert "transfer" in swapped.scores["coverage"].explanation and "accounts" in swapped.scores["coverage"].explanation
    # the same calls, so the other components do not see the order
    assert swapped.value("tool_name") == in_order.value("tool_name") == 1.0


def test_an_unmatched_dependency_breaks_its_dependents(full):
    task = banking_transfer_task()
    _find, accounts, transfer, receipt = gt_calls(task)
    result = full.score(Rollout.from_calls(task, [accounts, transfer, receipt]))  # no find_customers
    # find unmatched; accounts and transfer depend on it; receipt depends on transfer, which came before it
    assert result.value("coverage") == pytest.approx(1 / 4)
    rows = {r["step"]: r for r in result.scores["coverage"].details["steps"]}
    assert rows["find"]["call"] is None and rows["receipt"]["covered"]


def test_a_call_missing_a_ground_truth_argument_key_does_not_match(full):
    task = shopping_checkout_task()
    calls = gt_calls(task)
    name, args = calls[2]  # add_to_cart(product_id, quantity)
    calls[2] = (name, {"product_id": args["product_id"]})
    result = full.score(Rollout.from_calls(task, calls))
    # cart unmatched, so order (which depends on cart) is not covered either
    assert result.value("coverage") == pytest.approx(4 / 6)


def test_alignment_prefers_a_call_placed_after_its_dependencies(full):
    task = banking_transfer_task()
    find, accounts, transfer, receipt = gt_calls(task)
    # an early premature list_accounts, then the right order
    result = full.score(Rollout.from_calls(task, [accounts, find, accounts, transfer, receipt]))
    assert result.value("coverage") == 1.0


# -- efficiency ------------------------------------------------------------------------------------


def test_budget_formula():
    assert budget(4, 0.5) == 6  # the paper's example
    assert budget(3, 0.5) == 5
    assert budget(1, 0.5) == 2
    assert budget(4, 0.0) == 4
    assert budget(30, 0.1) == 33  # exact: not ceil(3.0000000000000004) = 4


@pytest.mark.parametrize("n_calls, expected", [(4, 0.0), (5, 0.0), (6, 0.0), (7, -0.5 * 1 / 6), (9, -0.5 * 3 / 6),
                                               (18, -0.5 * 12 / 6)])
def test_spam_beyond_the_budget_is_penalised_exactly(full, n_calls, expected):
    task = banking_transfer_task()  # 4 ground-truth calls: B = 6
    calls = gt_calls(task)
    calls += [calls[0]] * (n_calls - len(calls))  # repeat a harmless lookup
    score = full.score(Rollout.from_calls(task, calls)).scores["efficiency"]
    assert score.value == pytest.approx(expected, abs=1e-12)
    assert score.details["budget"] == 6
    assert ("within budget" in score.explanation) == (n_calls <= 6)


def test_parallel_and_unparsable_calls_count_toward_the_budget(full):
    task = banking_transfer_task()
    calls = gt_calls(task) + [gt_calls(task)[0]] * 2
    attempts = [ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)]
    attempts.append(ParseFailure(kind="invalid_json", message="bad"))
    # the six parsed calls arrive as two parallel turns of three
    rollout = Rollout(id="p", task=task, attempts=attempts, turns=[0, 0, 0, 1, 1, 1, 2])
    assert full.score(rollout).value("efficiency") == pytest.approx(-0.5 * 1 / 6)


def test_alpha_and_beta_come_from_config():
    task = banking_transfer_task()
    calls = gt_calls(task) + [gt_calls(task)[0]] * 2  # 6 calls
    flat = reward_with("efficiency", efficiency={"alpha": 1.0, "beta": 0.0})  # B = 4
    assert flat.score(Rollout.from_calls(task, calls)).value("efficiency") == pytest.approx(-1.0 * 2 / 4)
    floored = reward_with("efficiency", efficiency={"floor": -0.1})
    many = gt_calls(task) + [gt_calls(task)[0]] * 40
    assert floored.score(Rollout.from_calls(task, many)).value("efficiency") == -0.1


# -- validity tiers ---------------------------------------------------------------------------------


def validity_row(reward, task, call):
    score = reward.score(Rollout.from_calls(task, [call])).scores["validity"]
    (row,) = score.details["calls"]
    return score.value, row


def test_each_failure_lands_on_its_validity_tier(full):
    task = banking_transfer_task()
    transfer = dict(task.calls[2].arguments)
    cases = {
        "ok": (("transfer_between_accounts", transfer), 1.0, None),
        "nonexistent tool": (("transfer_money", transfer), 0.0, 1),
        "missing required": (("transfer_between_accounts", {k: v for k, v in transfer.items() if k != "customer_id"}),
                             1 / 3, 2),
        "wrong JSON type": (("transfer_between_accounts", {**transfer, "amount": "25.00"}), 1 / 3, 2),
        "live failure": (("transfer_between_accounts", {**transfer, "amount": 900_000.0}), 2 / 3, 3),
    }
    for label, (call, value, tier) in cases.items():
        got, row = validity_row(full, task, call)
        assert got == pytest.approx(value), label
        assert row["failed_tier"] == tier, (label, row)
    _, row = validity_row(full, task, ("transfer_between_accounts", {**transfer, "amount": 900_000.0}))
    assert "INSUFFICIENT_FUNDS" in row["reason"]
    _, row = validity_row(full, task, ("transfer_between_accounts", {**transfer, "amount": "25.00"}))
    assert "amount" in row["reason"] and "string" in row["reason"]


def test_a_parse_failure_fails_the_first_tier(full):
    task = banking_transfer_task()
    failure = ParseFailure(kind="invalid_json", message="Expecting value", text="{oops", parser="hermes")
    rollout = Rollout.from_calls(task, [*gt_calls(task), failure])
    score = full.score(rollout).scores["validity"]
    assert score.value == pytest.approx(4 / 5)
    assert score.details["calls"][-1]["failed_tier"] == 1 and "invalid_json" in score.explanation


def test_live_tier_runs_calls_in_order_on_a_fork(full):
    task = banking_transfer_task()
    find, accounts, transfer, receipt = gt_calls(task)
    # the receipt before the transfer: the transaction does not exist yet on the fork
    result = full.score(Rollout.from_calls(task, [find, accounts, receipt, transfer]))
    rows = result.scores["validity"].details["calls"]
    assert rows[2]["failed_tier"] == 3 and "NOT_FOUND" in rows[2]["reason"]
    assert rows[3]["failed_tier"] is None
    # and every rollout starts from the initial state: scoring twice gives the same verdict
    again = full.score(Rollout.from_calls(task, [find, accounts, transfer, receipt]))
    assert again.value("validity") == 1.0


def test_integer_valued_floats_and_ints_are_compatible(full):
    task = banking_transfer_task()
    transfer = {**task.calls[2].arguments, "amount": 25}  # an int where the schema says number
    value, row = validity_row(full, task, ("transfer_between_accounts", transfer))
    assert value == 1.0, row


def test_offered_tools_decide_whether_a_name_exists(full):
    task = banking_transfer_task()
    rt_tools = [{"type": "function", "function": {"name": c.tool, "parameters": {"type": "object"}}}
                for c in task.calls if c.tool != "get_transaction"]  # get_transaction hidden
    rollout = Rollout.from_calls(task, gt_calls(task), tools=rt_tools)
    rows = full.score(rollout).scores["validity"].details["calls"]
    assert rows[3]["failed_tier"] == 1 and "offered" in rows[3]["reason"]


def test_no_call_on_a_call_task_scores_nothing(full):
    task = banking_transfer_task()
    result = full.score(Rollout.from_calls(task, []))
    assert result.value("validity") == result.value("coverage") == result.value("tool_name") == 0.0
    assert result.value("efficiency") == 0.0 and result.total == 0.0


# -- tool name, arguments ---------------------------------------------------------------------------


def test_tool_name_is_the_fraction_of_calls_in_the_ground_truth(full):
    task = banking_transfer_task()
    calls = gt_calls(task) + [("list_cards", {"customer_id": "cus_x"}), ("nope", {})]
    result = full.score(Rollout.from_calls(task, calls))
    assert result.value("tool_name") == pytest.approx(4 / 6)


def test_argument_values_over_aligned_pairs(full):
    task = banking_transfer_task()
    find, accounts, transfer, receipt = gt_calls(task)
    wrong = (transfer[0], {**transfer[1], "amount": 30.0})  # 3 of 4 values right
    result = full.score(Rollout.from_calls(task, [find, accounts, wrong, receipt]))
    assert result.value("arguments") == pytest.approx((1 + 1 + 3 / 4 + 1) / 4)
    assert "amount" in result.scores["arguments"].explanation
    # true is not 1, and "25" is not 25
    odd = (transfer[0], {**transfer[1], "amount": "25.0"})
    assert full.score(Rollout.from_calls(task, [odd])).value("arguments") == pytest.approx(3 / 4)


def test_argument_string_normalisation_is_an_option():
    task = banking_transfer_task()
    find = task.calls[0]
    shouting = ("find_customers", {"query": "  " + find.arguments["query"].upper()})
    strict = reward_with("arguments")
    loose = reward_with("arguments", arguments={"normalize_strings": True})
    assert strict.score(Rollout.from_calls(task, [shouting])).value("arguments") == 0.0
    assert loose.score(Rollout.from_calls(task, [shouting])).value("arguments") == 1.0


# -- abstention -------------------------------------------------------------------------------------


@pytest.mark.parametrize("expected", ["clarify", "abstain"])
def test_abstention_is_rewarded_only_when_no_call_is_expected(full, expected):
    call_task = banking_transfer_task()
    no_call = attrs.evolve(call_task, calls=[], expected=expected)
    silent = full.score(Rollout.from_calls(no_call, []))
    chatty = full.score(Rollout.from_calls(no_call, gt_calls(call_task)[:1]))
    assert silent.value("abstention") == 1.0 and silent.total == 1.0
    assert chatty.value("abstention") == 0.0 and chatty.total == 0.0
    # on a no-call task nothing else applies: calling valid tools earns nothing
    assert not any(s.applies for n, s in chatty.scores.items() if n != "abstention")
    # and on a call task, silence is not rewarded by abstention
    quiet = full.score(Rollout.from_calls(call_task, []))
    assert not quiet.scores["abstention"].applies and quiet.total == 0.0


# -- final state -------------------------------------------------------------------------------------


def test_final_state_is_not_in_the_paper_preset_and_explains_differences(full):
    assert "final_state" not in build_reward(RewardConfig(preset="paper"), registry()).weights
    task = banking_transfer_task()
    find, accounts, transfer, receipt = gt_calls(task)
    double = full.score(Rollout.from_calls(task, [find, accounts, transfer, transfer, receipt]))
    score = double.scores["final_state"]
    assert score.value == 0.0
    assert "banking.transactions" in score.details["tables"] and "banking.accounts" in score.details["tables"]
    assert "banking.transactions: 2 extra" in score.explanation
    # extra reads change nothing: still the ground truth's end state
    reads = full.score(Rollout.from_calls(task, [find, find, accounts, transfer, receipt]))
    assert reads.value("final_state") == 1.0


def test_final_state_partial_credit():
    task = shopping_checkout_task()
    calls = gt_calls(task)[:3]  # item in the cart, never ordered
    strict = reward_with("final_state")
    partial = reward_with("final_state", final_state={"partial_credit": True})
    assert strict.score(Rollout.from_calls(task, calls)).value("final_state") == 0.0
    value = partial.score(Rollout.from_calls(task, calls)).value("final_state")
    assert 0.0 <= value < 1.0


# -- properties over random trajectories -------------------------------------------------------------

TASK = banking_transfer_task()
TOOLS = sorted(registry().load("servers", "banking").tools) + ["no_such_tool"]
REAL_IDS = sorted({v for c in TASK.calls for v in c.arguments.values() if isinstance(v, str)})
KEYS = sorted({k for c in TASK.calls for k in c.arguments} | {"status", "limit", "x"})
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                   st.text(max_size=6), st.sampled_from(REAL_IDS), st.lists(st.integers(), max_size=2))
CALL = st.one_of(
    st.tuples(st.sampled_from(TOOLS), st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4)),
    st.sampled_from(gt_calls(TASK)),
    st.builds(lambda k: ParseFailure(kind=k, message="fuzz"), st.sampled_from(["invalid_json", "missing_name"])),
)


@st.composite
def trajectories(draw):
    expected = draw(st.sampled_from(["call", "call", "clarify", "abstain"]))
    keep = draw(st.integers(1, len(TASK.calls)))
    task = attrs.evolve(TASK, calls=TASK.calls[:keep] if expected == "call" else [], expected=expected)
    calls = draw(st.lists(CALL, max_size=12))
    return Rollout.from_calls(task, calls)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollout=trajectories())
def test_every_component_stays_in_its_range_and_the_combiner_never_raises(full, rollout):
    result = full.score(rollout)
    total = 0.0
    for entry in full.components:
        score = result.scores[entry.name]
        assert score.error is None, (entry.name, score.error)
        low, high = entry.component.range()
        assert low <= score.value <= high, (entry.name, score.value, score.explanation)
        assert isinstance(score.explanation, str) and score.explanation
        if score.applies:
            total += entry.weight * score.value
    assert math.isfinite(result.total) and result.total == pytest.approx(total)
    assert result.total <= result.best + 1e-12  # never above what the task allows
    # exactly one regime applies: abstention, or the call components
    assert result.scores["abstention"].applies == (rollout.task.expected != "call")


# -- issue 16: optimal alignment, valid_only, tools not offered ---------------------------------------

PAPER = build_reward(RewardConfig(preset="paper"), registry())


def transfer_then_receipt():
    """Two steps: the transfer, then its receipt (which depends on it)."""
    task = banking_transfer_task()
    transfer, receipt = task.calls[2], task.calls[3]
    return attrs.evolve(task, calls=[attrs.evolve(transfer, depends_on=[]), receipt])


def test_a_correct_retry_after_a_wrong_call_no_longer_lowers_the_total():
    """The issue's 0.24: transfer 30 instead of 25, fetch the receipt, then retry the transfer
    with 25. The greedy matching gave the transfer step the retry (all values right), after the
    receipt, so the receipt lost its order: coverage 1/2, total 1.05 against 1.2875 without the
    retry (-0.2375). The optimal matching keeps the first transfer: the retry costs nothing."""
    task = transfer_then_receipt()
    transfer, receipt = gt_calls(task)
    wrong = (transfer[0], {**transfer[1], "amount": 30.0})
    before = PAPER.score(Rollout.from_calls(task, [wrong, receipt]))
    after = PAPER.score(Rollout.from_calls(task, [wrong, receipt, transfer]))
    assert before.total == pytest.approx(0.5 + 0.5 + 0.2 + 0.1 * 0.875)
    assert after.total == pytest.approx(before.total)
    assert after.value("coverage") == 1.0 and after.value("validity") == 1.0
    rows = {r["step"]: r for r in after.scores["coverage"].details["steps"]}
    assert rows["transfer"]["call"] == 0 and rows["transfer"]["candidates"] == [0, 2]
    assert rows["receipt"]["call"] == 1 and rows["receipt"]["covered"]


def _task_calls(task):
    """Calls for random rollouts on ``task``'s server: its ground truth, bent copies, other tools."""
    tools = sorted(registry().load("servers", task.servers[0]).tools)
    ids = sorted({v for c in task.calls for v in c.arguments.values() if isinstance(v, str)})
    keys = sorted({k for c in task.calls for k in c.arguments})
    values = st.one_of(st.sampled_from(ids), st.integers(0, 50), st.floats(1, 100).map(round), st.booleans())
    bent = st.sampled_from(gt_calls(task)).flatmap(lambda c: st.dictionaries(st.sampled_from(keys), values, max_size=2)
                                                   .map(lambda extra: (c[0], {**c[1], **extra})))
    return st.one_of(st.sampled_from(gt_calls(task)), bent,
                     st.tuples(st.sampled_from(tools), st.dictionaries(st.sampled_from(keys), values, max_size=3)))


LIVE_TASKS = [banking_transfer_task(), shopping_checkout_task()]


@st.composite
def live_cases(draw):
    full_task = draw(st.sampled_from(LIVE_TASKS))
    keep = draw(st.integers(1, len(full_task.calls)))
    task = attrs.evolve(full_task, calls=full_task.calls[:keep])  # a prefix keeps the dependencies valid
    calls = draw(st.lists(_task_calls(full_task), max_size=budget(keep, 0.5) - 1))
    return task, calls


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=live_cases(), data=st.data())
def test_appending_a_ground_truth_step_never_lowers_coverage_or_the_paper_total(case, data):
    """Append a call equal to a ground-truth step the rollout left unmatched: coverage never
    falls; nor does the paper's total when the appended call passes validity and the rollout
    stays within its budget (validity and efficiency judge the call itself). The tasks use one
    tool per step; docs/reward.md gives the known limit with a tool repeated across steps."""
    task, calls = case
    before = PAPER.score(Rollout.from_calls(task, calls))
    rows = before.scores["coverage"].details["steps"]
    unmatched = [step for step, row in zip(task.calls, rows) if row["call"] is None]
    assume(unmatched)
    step = data.draw(st.sampled_from(unmatched))
    after = PAPER.score(Rollout.from_calls(task, [*calls, (step.tool, dict(step.arguments))]))
    assert after.value("coverage") >= before.value("coverage")
    valid = after.scores["validity"].details["calls"][-1]["failed_tier"] is None
    event(f"appended call valid: {valid}")
    if valid:
        assert after.total >= before.total - 1e-12, (before.to_json(), after.to_json())


def test_valid_only_is_off_by_default_and_bit_for_bit_the_paper():
    task = banking_transfer_task()
    find, accounts, transfer, receipt = gt_calls(task)
    failing = (transfer[0], {**transfer[1], "amount": 900_000.0})  # INSUFFICIENT_FUNDS: fails tier 3
    rollout = Rollout.from_calls(task, [find, accounts, failing, receipt, ("get_balance", {})])
    plain = reward_with("validity", "coverage", "tool_name", "arguments")
    explicit = reward_with("validity", "coverage", "tool_name", "arguments",
                           coverage={"valid_only": False}, tool_name={"valid_only": False})
    a, b = plain.score(rollout), explicit.score(rollout)
    assert a.total == b.total and {k: v.value for k, v in a.scores.items()} == {k: v.value for k, v in b.scores.items()}
    # the paper credits the failed transfer: it matches the step, and names a ground-truth tool
    assert a.value("coverage") == 1.0 and a.value("tool_name") == pytest.approx(4 / 5)


def test_valid_only_gives_coverage_and_tool_name_credit_to_valid_calls_only():
    task = banking_transfer_task()
    find, accounts, transfer, receipt = gt_calls(task)
    failing = (transfer[0], {**transfer[1], "amount": 900_000.0})
    guarded = reward_with("validity", "coverage", "tool_name", coverage={"valid_only": True},
                          tool_name={"valid_only": True})
    result = guarded.score(Rollout.from_calls(task, [find, accounts, failing, receipt]))
    # the transfer failed live, so its receipt failed too (NOT_FOUND): neither matches a step
    assert result.value("coverage") == pytest.approx(2 / 4)
    assert result.scores["coverage"].details["invalid_calls"] == [2, 3]
    assert "failed validity" in result.scores["coverage"].explanation
    assert result.value("tool_name") == pytest.approx(2 / 4)
    assert result.scores["tool_name"].details["failed_validity"] == ["transfer_between_accounts", "get_transaction"]
    # a valid retry takes the step: full coverage again, the failed attempt still earns no name credit
    retried = guarded.score(Rollout.from_calls(task, [find, accounts, failing, transfer, receipt]))
    assert retried.value("coverage") == 1.0 and retried.value("tool_name") == pytest.approx(4 / 5)
    rows = {r["step"]: r for r in retried.scores["coverage"].details["steps"]}
    assert rows["transfer"]["call"] == 3 and rows["transfer"]["candidates"] == [3]


def test_a_tool_that_was_not_offered_fails_tier_one_and_is_not_run(full):
    """Hidden tools: the servers have transfer_between_accounts, the model was not offered it.
    The reward fails the call on tier 1 and never executes it (the end state is untouched), as
    the rollout loop answers it with UNKNOWN_TOOL (tests/core/test_rollout.py)."""
    task = banking_transfer_task()
    find, accounts, transfer, receipt = gt_calls(task)
    offered = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
               for name in ("find_customers", "list_accounts", "get_transaction")]
    rollout = Rollout.from_calls(task, [find, accounts, transfer], tools=offered)
    result = full.score(rollout)
    row = result.scores["validity"].details["calls"][2]
    assert row["failed_tier"] == 1 and row["reason"] == "no tool named 'transfer_between_accounts' was offered"
    assert "banking.transactions" in result.scores["final_state"].details["tables"]  # the transfer never ran
    assert result.scores["final_state"].details["tables"]["banking.transactions"]["missing"]


def test_a_40_call_rollout_of_one_tool_scores_in_under_100_ms_under_guarded():
    """Issue 27: 19 steps of one tool, each called twice and two repeats (it took seconds when the
    alignment searched every assignment of 40 candidate calls to 19 steps)."""
    import time

    from prove_core.model import GroundTruthCall, Task
    from tests.support.reward_tasks import runtime

    rt, sid = runtime("banking")
    accounts = [a["id"] for a in rt.state(sid).accounts.all()][:19]
    task = Task(servers=["banking"], seed=0, expected="call", calls=[
        GroundTruthCall(id=f"s{i}", tool="get_balance", arguments={"account_id": a}) for i, a in enumerate(accounts)])
    calls = [("get_balance", {"account_id": a}) for a in accounts] * 2 + [("get_balance", {"account_id": accounts[0]})] * 2
    rollout = Rollout.from_calls(task, calls)
    reward = build_reward(RewardConfig(preset="guarded"), registry())
    times = []
    for _ in range(3):
        started = time.perf_counter()
        result = reward.score(rollout)
        times.append(time.perf_counter() - started)
    assert len(calls) == 40 and result.scores["coverage"].value == 1.0
    assert result.scores["coverage"].details["exact"] and min(times) < 0.1, times
