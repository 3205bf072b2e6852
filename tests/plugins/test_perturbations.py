"""Perturbations: each one's effect and record, determinism per example seed, rates, config."""

import random

import attrs
import pytest

from prove_core.errors import ConfigError
from prove_core.reward.core import Rollout, build_reward
from prove_core.synth.perturbation import (
    PerturbationContext,
    PerturbationEntry,
    PerturbationsConfig,
    build_perturber,
    tool_name,
)
from prove_plugins.synth.perturbations import Distractors, EnumStripping, HiddenTool, Irrelevance
from tests.support.reward_tasks import banking_transfer_task, example_for, registry, shopping_checkout_task


def ctx():
    return PerturbationContext(registry())


def only(name, rate=1.0, seed=0, **options):
    return build_perturber(PerturbationsConfig(seed=seed, perturbations=[PerturbationEntry(name=name, rate=rate,
                                                                                           options=options)]), registry())


def records(example):
    return example.task.meta.get("perturbations", [])


def test_paper_rates_are_the_defaults():
    perturber = build_perturber(None, registry())
    assert {name: rate for name, rate, _ in perturber.entries} == {
        "irrelevance": 0.05, "hidden_tool": 0.05, "distractors": 0.4, "enum_stripping": 0.3}


def test_distractors_add_3_to_8_tools_of_other_servers():
    example = example_for(banking_transfer_task())
    others = {s for s in registry().names("servers") if s != "banking"}
    for i in range(20):
        out = only("distractors")(attrs.evolve(example, id=f"ex-{i}"))
        (rec,) = records(out)
        added = rec["tools"]
        assert 3 <= len(added) <= 8
        for qualified, public in zip(rec["added"], added):
            server, _, tool = qualified.partition(".")
            assert server in others and tool == public and tool in registry().load("servers", server).tools
        assert not set(added) & set(registry().load("servers", "banking").tools)
        names = [tool_name(t) for t in out.tools]
        assert len(names) == len(set(names))  # never two tools of one name
        assert len(out.tools) == len(example.tools) + len(added)
        assert {tool_name(t) for t in example.tools} <= {tool_name(t) for t in out.tools}
    assert records(example) == []  # the input is never mutated


def test_enum_stripping_removes_every_enum_and_records_the_fields():
    example = example_for(banking_transfer_task())
    out = only("enum_stripping")(example)
    (rec,) = records(out)
    assert "list_accounts.status" in rec["fields"] and "list_accounts.account_type" in rec["fields"]
    assert "enum" not in str(out.tools)
    assert "enum" in str(example.tools)


def test_irrelevance_offers_only_unrelated_tools_and_expects_abstention():
    example = example_for(banking_transfer_task())
    out = only("irrelevance")(example)
    (rec,) = records(out)
    assert out.task.expected == "abstain" and out.task.calls == []
    assert not {tool_name(t) for t in out.tools} & set(registry().load("servers", "banking").tools)
    assert [m.role for m in out.messages] == ["system", "user", "assistant"]
    assert out.messages[-1].content and not out.messages[-1].tool_calls  # a written decline
    assert rec["dropped_calls"] == ["find", "accounts", "transfer", "receipt"]


@pytest.mark.parametrize("seed", range(3))
def test_hidden_tool_removes_the_tool_the_first_request_starts_with_and_replies(seed):
    task = banking_transfer_task()
    out = only("hidden_tool", seed=seed)(example_for(task))
    (rec,) = records(out)
    assert rec["tool"] == "find_customers"  # the request cannot start without it
    assert rec["tool"] not in {tool_name(t) for t in out.tools}
    # a read-only lookup whose result (the customer id) the rest of the request needs: ask for it
    assert out.task.expected == "clarify" == rec["expected"]
    assert out.task.calls == [] and out.messages[-1].role == "assistant" and "customer" in out.messages[-1].content


def test_hidden_tool_only_hides_a_tool_of_the_first_request():
    """The second request's tool is never the hidden one: the first request must really need it."""
    task = banking_transfer_task()
    example = example_for(task)
    meta = {**task.meta, "turns": [["transfer", "receipt"], ["find", "accounts"]]}  # a made-up split
    example = attrs.evolve(example, task=attrs.evolve(task, meta=meta))
    out = only("hidden_tool")(example)
    (rec,) = records(out)
    assert rec["tool"] == "transfer_between_accounts" and rec["request_calls"] == ["transfer", "receipt"]
    assert out.task.expected == "abstain"  # a write: nothing the user can supply instead
    assert out.messages[-1].role == "assistant" and "transfer" in out.messages[-1].content


def test_hidden_tool_expectation_can_be_forced():
    out = only("hidden_tool", expect="clarify")(example_for(banking_transfer_task()))
    assert out.task.expected == "clarify"


def test_perturbations_are_deterministic_per_example_seed():
    perturber = build_perturber(PerturbationsConfig(seed=7), registry())
    examples = [example_for(banking_transfer_task(), f"ex-{i}") for i in range(40)]
    first = [perturber(e) for e in examples]
    again = [perturber(e) for e in reversed(examples)][::-1]  # another order, same results
    assert first == again
    other_seed = build_perturber(PerturbationsConfig(seed=8), registry())
    assert [records(other_seed(e)) for e in examples] != [records(e) for e in first]


def test_rates_are_respected_over_many_examples():
    perturber = build_perturber(PerturbationsConfig(perturbations=[PerturbationEntry(name="distractors")]), registry())
    example = example_for(shopping_checkout_task())
    hits = sum(bool(records(perturber(attrs.evolve(example, id=f"e{i}")))) for i in range(1000))
    assert 340 <= hits <= 460  # 40%, with room for chance


def test_perturbations_compose_and_record_in_order():
    perturber = build_perturber(PerturbationsConfig(perturbations=[
        PerturbationEntry(name="distractors", rate=1.0), PerturbationEntry(name="enum_stripping", rate=1.0)]), registry())
    out = perturber(example_for(banking_transfer_task()))
    assert [r["name"] for r in records(out)] == ["distractors", "enum_stripping"]


def test_a_perturbed_example_is_scored_by_the_reward():
    """Hidden tool → no call expected → abstention scores it; distractors are not executable."""
    hidden = only("hidden_tool")(example_for(banking_transfer_task()))
    reward = build_reward(None, registry())
    assert reward.score(Rollout.from_calls(hidden.task, [], tools=hidden.tools)).total == 1.0
    distracted = only("distractors")(example_for(banking_transfer_task()))
    fake = records(distracted)[0]["tools"][0]
    rollout = Rollout.from_calls(distracted.task, [(fake, {})], tools=distracted.tools)
    (row,) = reward.score(rollout).scores["validity"].details["calls"]
    assert row["failed_tier"] in (2, 3)  # the name was offered, so tier 1 passes


def test_not_applicable_perturbations_change_nothing():
    example = example_for(banking_transfer_task())
    no_call = attrs.evolve(example, task=attrs.evolve(example.task, calls=[], expected="abstain"))
    rng = random.Random(0)
    assert HiddenTool(HiddenTool.Config()).apply(no_call, rng, ctx()) is None
    assert Irrelevance(Irrelevance.Config()).apply(no_call, rng, ctx()) is None
    plain = attrs.evolve(example, tools=[{"type": "function", "function": {"name": "x", "parameters": {}}}])
    assert EnumStripping(EnumStripping.Config()).apply(plain, rng, ctx()) is None
    lonely = PerturbationContext(type("R", (), {"names": lambda self, kind: ["banking"],
                                                "load": lambda self, kind, name: registry().load(kind, name)})())
    assert Distractors(Distractors.Config()).apply(example, rng, lonely) is None


def test_config_errors_name_their_paths():
    with pytest.raises(ConfigError) as err:
        build_perturber({"perturbations": [{"name": "distractor"}, {"name": "distractors", "options": {"min_tools": 9}}]},
                        registry(), path="$.synth.perturbations")
    message = str(err.value)
    assert "$.synth.perturbations.perturbations[0].name: no perturbation named 'distractor'" in message
    assert "$.synth.perturbations.perturbations[1].options" in message and "min_tools" in message
    with pytest.raises(ConfigError, match=r"\$\.synth\.perturbations\.perturbations\[0\].*'rate' must be <= 1.0"):
        build_perturber({"perturbations": [{"name": "enum_stripping", "rate": 2.0}]}, registry(),
                        path="$.synth.perturbations")


# -- the invariants every perturbation keeps, and the one place its config lives -------------------


class _Registered:
    """A plugin perturbation registered for one test (``with`` unregisters it)."""

    def __init__(self, cls):
        self.cls, self.registry = cls, registry()

    def __enter__(self):
        self.registry.register_callable("perturbations", "test_plugin", "tests")(self.cls)
        return build_perturber([{"name": self.cls.name, "rate": 1.0}], self.registry)

    def __exit__(self, *exc):
        self.registry.unregister_plugin("test_plugin")


def _renamed_parameter(example):
    """The offered schema of the first called tool with its first parameter renamed (calls untouched)."""
    called = example.task.calls[0].tool
    tools = []
    for tool in example.tools:
        fn = dict(tool["function"])
        if fn["name"] == called:
            params = dict(fn["parameters"])
            props = dict(params["properties"])
            old = sorted(example.task.calls[0].arguments)[0]
            props["renamed_" + old] = props.pop(old)
            params["properties"] = props
            params["required"] = [("renamed_" + p if p == old else p) for p in params.get("required", [])]
            fn["parameters"] = params
        tools.append({**tool, "function": fn})
    return attrs.evolve(example, tools=tools)


class _Broken:
    """A plugin perturbation that breaks one invariant (its ``apply``)."""

    default_rate = 1.0

    def __init__(self, config):
        self.config = config


class RenamesAParameter(_Broken):
    name = "renames_a_parameter"

    def apply(self, example, rng, context):
        return _renamed_parameter(example)


class InventsACall(_Broken):
    name = "invents_a_call"

    def apply(self, example, rng, context):
        first = example.task.calls[0]
        extra = attrs.evolve(first, id="invented", arguments={**first.arguments, "note": "x"}, depends_on=[])
        return attrs.evolve(example, task=attrs.evolve(example.task, calls=[*example.task.calls, extra]))


class MovesTheWorld(_Broken):
    name = "moves_the_world"

    def apply(self, example, rng, context):
        return attrs.evolve(example, task=attrs.evolve(example.task, seed=example.task.seed + 1))


@pytest.mark.parametrize(("cls", "fragment"), [
    (RenamesAParameter, "the offered tools no longer accept this call"),
    (InventsACall, "a call the example did not make"),
    (MovesTheWorld, "changed task.seed"),
])
def test_a_perturbation_that_breaks_an_invariant_is_refused_with_its_name(cls, fragment):
    from prove_core.synth.perturbation import PerturbationError

    example = example_for(banking_transfer_task())
    with _Registered(cls) as perturber, pytest.raises(PerturbationError) as err:
        perturber(example)
    assert f"perturbation {cls.name!r} broke example {example.id!r}" in str(err.value) and fragment in str(err.value)


def test_the_bundled_perturbations_keep_every_invariant_on_many_examples():
    from prove_core.synth.perturbation import broken_invariants

    perturber = build_perturber([{"name": n, "rate": 1.0} for n in ("irrelevance", "hidden_tool", "distractors",
                                                                     "enum_stripping")], registry())
    for task in (banking_transfer_task(), shopping_checkout_task()):
        for i in range(25):
            example = attrs.evolve(example_for(task), id=f"inv-{i}")
            out = perturber(example)  # raises on a broken invariant
            assert broken_invariants(example, out) == []
    renamed = _renamed_parameter(example_for(banking_transfer_task()))
    assert broken_invariants(example_for(banking_transfer_task()), renamed)  # the check itself can fail


def test_a_list_of_synth_perturbations_replaces_the_defaults_and_errors_name_each_entry():
    perturber = build_perturber([{"name": "distractors", "rate": 0.2}], registry(), path="$.synth.perturbations")
    assert [(n, r) for n, r, _ in perturber.entries] == [("distractors", 0.2)]
    with pytest.raises(ConfigError) as err:
        build_perturber([{"name": "distractor"}, {"name": "enum_stripping", "rate": 2},
                         {"name": "distractors", "optons": {}}], registry(), path="$.synth.perturbations")
    text = str(err.value)
    assert "$.synth.perturbations[0].name: no perturbation named 'distractor'" in text and "did you mean 'distractors'?" in text
    assert "$.synth.perturbations[1]: 'rate' must be <= 1.0" in text
    assert "$.synth.perturbations[2]: extra fields found (optons); did you mean 'options'?" in text
    with pytest.raises(ConfigError, match="an empty list runs no perturbation"):
        build_perturber([], registry(), path="$.synth.perturbations")


def test_the_documented_toml_form_loads_and_keeps_the_paper_order():
    """docs/synthesis.md's Perturbations example is the form the config takes."""
    import re
    from pathlib import Path

    from prove_core.config import load_experiment, parse_toml

    doc = (Path(__file__).resolve().parents[2] / "docs" / "synthesis.md").read_text()
    section = doc[doc.index("## Perturbations"):]
    block = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    experiment = load_experiment(parse_toml('[[servers]]\nname = "banking"\n' + block))
    perturber = build_perturber(experiment.synth.perturbations, registry(), path="$.synth.perturbations")
    assert [n for n, _, _ in perturber.entries] == ["irrelevance", "hidden_tool", "distractors", "enum_stripping"]
    assert dict((n, r) for n, r, _ in perturber.entries)["hidden_tool"] == 0.1
    with pytest.raises(ConfigError, match=r"'perturbations' must be a list of \[\[synth.perturbations\]\] tables"):
        load_experiment({"servers": [{"name": "banking"}], "synth": {"perturbations": "distractors"}})
