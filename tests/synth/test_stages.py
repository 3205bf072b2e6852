"""Each synthesis stage on its own: graph, cache, chains, sampler, validation filters."""

import json

import attrs
import pytest

from prove_core.config import load_experiment
from prove_core.env.runtime import Environment, ServerRuntime
from prove_core.errors import ConfigError
from prove_core.model import Example, GroundTruthCall, Message, Task, ToolCall
from prove_core.synth.graph import Chain, Edge, GraphCache, ToolGraph, coverage_report, schema_hash
from prove_core.synth.sampling import SupportRule
from prove_core.synth.validation import Deduper, provenance, replay, ungrounded_mentions
from prove_plugins.synth.graph import ChainExtractor, SchemaLabeller
from prove_plugins.synth.sampler import LiveSampler
from prove_servers.banking import server as banking
from prove_servers.shopping import server as shopping


@pytest.fixture(scope="module")
def bank_env():
    return Environment([ServerRuntime(banking)])


@pytest.fixture(scope="module")
def bank_graph(bank_env):
    return SchemaLabeller().label(bank_env)


def test_explicit_edges_carry_entity_param_and_evidence(bank_graph):
    edge = bank_graph.edge("list_accounts", "get_balance")
    assert edge.label == "explicit" and edge.entity == "account" and edge.param == "account_id"
    assert edge.verified is True and "account_id" in edge.evidence
    assert bank_graph.label("get_balance", "find_customers") == "none"


def test_implicit_edges_come_from_state_set_up():
    graph = SchemaLabeller().label(Environment([ServerRuntime(shopping)]))
    edge = graph.edge("add_to_cart", "checkout")
    assert edge is not None and edge.label == "implicit" and edge.verified is True


def test_live_verification_drops_edges_whose_ids_do_not_flow(bank_graph):
    # transfer returns transaction and account ids, never customer ids: the metadata allows the
    # edge to list_accounts (customer_id), the live check removes it
    edge = bank_graph.edge("transfer_between_accounts", "list_accounts")
    assert edge is not None and edge.verified is False
    unverified = SchemaLabeller(SchemaLabeller.Config(verify=False)).label(Environment([ServerRuntime(banking)]))
    assert unverified.edge("transfer_between_accounts", "list_accounts").verified is None


def test_cache_is_keyed_by_schema_hash(tmp_path, bank_env, bank_graph):
    cache = GraphCache(tmp_path)
    cache.store(bank_graph)
    assert cache.load("schema", bank_graph.schema_hash) == bank_graph
    changed = [attrs.evolve(s, description=s.description + " (v2)") if s.name == "get_balance" else s
               for s in bank_env.specs()]
    assert schema_hash(changed) != bank_graph.schema_hash
    params = [attrs.evolve(s, parameters={**s.parameters, "required": []}) if s.name == "get_balance" else s
              for s in bank_env.specs()]
    assert schema_hash(params) != bank_graph.schema_hash
    assert cache.load("schema", schema_hash(changed)) is None
    cache.path("schema", "broken").write_text("{not json")
    assert cache.load("schema", "broken") is None


def test_synthesis_reuses_the_cached_graph(tmp_path, plugins, monkeypatch):
    from prove_core.synth import pipeline as synthesis
    from tests.synth.conftest import experiment

    exp = experiment(tmp_path, examples=3)
    synthesis.synthesize(exp, plugins, echo=lambda _: None, progress=False)
    calls = []
    monkeypatch.setattr(SchemaLabeller, "label", lambda self, env: calls.append(env))
    exp2 = attrs.evolve(exp, name="t2")
    synthesis.synthesize(exp2, plugins, echo=lambda _: None, progress=False)
    assert calls == []  # both servers' graphs came from the cache


def test_chains_follow_edges_within_length_bounds(bank_graph):
    chains = ChainExtractor().extract(bank_graph)
    assert chains and all(2 <= len(c.tools) <= 5 for c in chains)
    for chain in chains[:500]:
        assert len(set(chain.tools)) == len(chain.tools)
        for a, b, edge in zip(chain.tools, chain.tools[1:], chain.edges):
            assert (edge.source, edge.target) == (a, b) and edge.verified is not False
    sampled = ChainExtractor().extract(bank_graph, sample=40, seed=3)
    assert len(sampled) == 40 and sampled == ChainExtractor().extract(bank_graph, sample=40, seed=3)
    assert {t for c in sampled for t in c.tools} == set(bank_graph.tools)  # sampling keeps coverage


def test_coverage_report_explains_uncovered_tools():
    graph = ToolGraph(schema_hash="x", tools=["a", "b", "lonely"],
                      edges=[Edge(source="a", target="b", label="explicit", entity="e", param="e_id", verified=True)])
    report = coverage_report(graph.tools, [Chain(tools=["a", "b"], edges=graph.edges)], graph)
    assert report["covered"] == 2 and "no dependency edge" in report["uncovered"]["lonely"]


def test_sampler_finds_only_existing_entities_and_applies_rules(bank_env):
    rules = [SupportRule(entity="account", field="status", op="eq", value="active"),
             SupportRule(entity="account", field="available_balance", op="gt", value=0)]
    ctx = LiveSampler().sample(bank_env, rules)
    state = bank_env.runtimes["banking"].state(bank_env.new_session())
    accounts = ctx.candidates("banking", "account")
    assert len(accounts) >= 5
    assert all(a["id"] in state.accounts and a["status"] == "active" and a["available_balance"] > 0 for a in accounts)
    assert all(c["id"] in state.customers for c in ctx.candidates("banking", "customer"))


def _conversation(calls, tamper=None):
    """A hand-written banking example from real calls on a scratch session."""
    rt = ServerRuntime(banking)
    env = Environment([rt])
    sid = env.new_session()
    messages = [Message(role="user", content="please check " + " ".join(str(a) for _, a in calls))]
    for n, (tool, args) in enumerate(calls):
        result = env.call(sid, tool, args)
        content = json.dumps(result.structured, sort_keys=True)
        if tamper == n:
            content = json.dumps({"tampered": True})
        messages += [Message(role="assistant", tool_calls=[ToolCall(id=f"c{n}", name=tool, arguments=args)]),
                     Message(role="tool", content=content, tool_call_id=f"c{n}", name=tool)]
    task = Task(servers=["banking"], calls=[GroundTruthCall(id=f"g{i}", tool=t, arguments=a) for i, (t, a) in enumerate(calls)])
    return Example(id="x", messages=messages, tools=[], task=task), env


def _account(status="active"):
    return banking.build_state(0).accounts.first(status=status)["id"]


def test_replay_accepts_recorded_results_and_flags_tampering():
    calls = [("get_balance", {"account_id": _account()}), ("list_transactions", {"account_id": _account(), "limit": 2})]
    example, env = _conversation(calls)
    assert replay(example, env).ok
    tampered, env = _conversation(calls, tamper=1)
    assert replay(tampered, env).reason == "replay_mismatch"


def test_error_filter_threshold_and_empty_results():
    acc = _account()
    good = [("get_balance", {"account_id": acc})] * 3
    bad_schema = ("get_balance", {"account_id": 5})
    bad_exec = ("get_balance", {"account_id": "acc_missing0"})
    ok_example, env = _conversation([*good, bad_schema])  # 1 of 4 = 25%
    assert replay(ok_example, env).ok
    too_many, env = _conversation([*good[:2], bad_schema, bad_exec])  # 2 of 4 = 50%
    verdict = replay(too_many, env)
    assert verdict.reason == "too_many_errors" and verdict.schema_errors == 1 and verdict.execution_errors == 1
    # an empty result is not an error
    empty, env = _conversation([("find_customers", {"query": "zzzz-nobody"})] * 2)
    assert replay(empty, env).ok


def test_provenance_requires_ids_to_come_from_earlier_turns():
    acc = _account()
    example, env = _conversation([("get_balance", {"account_id": acc})])
    assert provenance(example, env) == []  # the user mentioned it
    hidden = attrs.evolve(example, messages=[Message(role="user", content="my balance please"), *example.messages[1:]])
    assert provenance(hidden, env) and acc in provenance(hidden, env)[0]


def test_grounding_check_catches_invented_ids():
    example, env = _conversation([("get_balance", {"account_id": _account()})])
    assert ungrounded_mentions(example, env) == []
    invented = attrs.evolve(example, messages=[Message(role="user", content="move money to acc_zzzzzzzz"), *example.messages[1:]])
    assert ungrounded_mentions(invented, env) == ["acc_zzzzzzzz"]


def test_dedup_threshold():
    d = Deduper(0.7)
    assert d.offer(frozenset({"a", "b", "c", "d"}))
    assert d.offer(frozenset({"a", "b", "c", "e"}))  # 3 shared of 5 = 0.6 < 0.7: kept
    assert not d.offer(frozenset({"a", "b", "c", "d", "e"}))  # 4 of 5 with the first = 0.8: duplicate
    assert not d.offer(frozenset({"a", "b", "c", "d"}))  # identical
    assert d.offer(frozenset({"x"}))


def test_synth_config_errors_name_their_path():
    with pytest.raises(ConfigError, match=r"\$\.synth\.conversation.*strata"):
        load_experiment({"servers": [{"name": "banking"}], "synth": {"conversation": {"strata": {"complete": 0.5}}}})
    with pytest.raises(ConfigError, match=r"\$\.synth: extra fields found \(exampels\)"):
        load_experiment({"servers": [{"name": "banking"}], "synth": {"exampels": 3}})
    with pytest.raises(ConfigError, match=r"\$\.synth\.examples: expected int"):
        load_experiment({"servers": [{"name": "banking"}], "synth": {"examples": "many"}})
