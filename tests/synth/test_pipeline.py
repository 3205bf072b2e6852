"""`prove synth` end to end: the corpus, its guarantees, determinism and resume."""

import json
import os
import signal
import subprocess
import sys
import time

from prove_core.env.runtime import Environment, ServerRuntime
from prove_core.model import Example, from_json, read_jsonl
from prove_core.synth.validation import call_tokens, jaccard, replay, ungrounded_mentions
from tests.synth.conftest import experiment


def load(corpus_dir):
    return [from_json(r, Example) for r in read_jsonl(corpus_dir / "corpus.jsonl")]


def env_for(example, plugins):
    return Environment([ServerRuntime(plugins.registry.load("servers", s), seed=example.task.seed)
                        for s in example.task.servers])


def test_corpus_has_all_three_behaviours_and_hits_the_target(corpus):
    examples = load(corpus["dir"])
    behaviours = {e.task.expected for e in examples}
    assert behaviours == {"call", "clarify", "abstain"}
    assert sum(e.task.expected == "call" for e in examples) == 80
    assert corpus["report"]["reached_target"]
    assert {e.task.servers[0] for e in examples} == {"banking", "shopping"}


def test_every_example_replays_with_its_recorded_results(corpus, plugins):
    for example in load(corpus["dir"]):
        verdict = replay(example, env_for(example, plugins), max_error_rate=1.0)
        assert verdict.ok, (example.id, verdict)


def test_no_query_mentions_an_entity_that_does_not_exist(corpus, plugins):
    mentioned = 0
    for example in load(corpus["dir"]):
        env = env_for(example, plugins)
        assert ungrounded_mentions(example, env) == [], example.id
        mentioned += sum("_" in (m.content or "") for m in example.messages if m.role == "user")
    assert mentioned > 0  # the check had ids to look at


def test_ground_truth_calls_and_edges_match_the_conversation(corpus):
    for example in load(corpus["dir"]):
        made = [c for m in example.messages for c in m.tool_calls]
        if example.task.expected != "call":
            assert example.task.calls == [] and made == []
            continue
        names = {c.name for c in made}
        assert all(c.tool in names for c in example.task.calls)
        ids = [c.id for c in example.task.calls]
        for call in example.task.calls:
            assert all(ids.index(d) < ids.index(call.id) for d in call.depends_on)


def test_ids_flow_between_calls(corpus):
    flowing = 0
    for example in load(corpus["dir"]):
        outputs = ""
        for m in example.messages:
            if m.role == "tool":
                outputs += m.content
            for c in m.tool_calls:
                flowing += any(isinstance(v, str) and "_" in v and v in outputs for v in c.arguments.values())
    assert flowing >= 20


def test_no_two_call_examples_are_near_duplicates(corpus):
    sets = [call_tokens(e) for e in load(corpus["dir"]) if e.task.expected == "call"]
    for i, a in enumerate(sets):
        for b in sets[:i]:
            assert jaccard(a, b) < 0.7


def test_clarification_examples_withhold_a_value_and_ask(corpus):
    clarify = [e for e in load(corpus["dir"]) if e.task.expected == "clarify" and "withheld" in e.task.meta]
    assert clarify
    for e in clarify:
        assert e.messages[-1].role == "assistant" and not e.messages[-1].tool_calls


def test_perturbations_are_applied_and_recorded(corpus):
    examples = load(corpus["dir"])
    changes = [c for e in examples for c in e.task.meta.get("perturbations", [])]
    assert {c["name"] for c in changes} >= {"distractors", "enum_stripping"}
    for e in examples:
        for change in e.task.meta.get("perturbations", []):
            if change["name"] == "hidden_tool":  # the needed tool is gone and no call is expected
                assert change["tool"] not in {t["function"]["name"] for t in e.tools}
                assert e.task.expected in ("clarify", "abstain") and e.task.calls == []
    stats = corpus["report"]["perturbations"]
    assert sum(stats.values()) == len(changes)


def test_stats_report_and_plots(corpus):
    stats = json.loads((corpus["dir"] / "stats.json").read_text())
    assert stats["by_behaviour"]["call"] == 80
    assert set(stats["by_stratum"]) <= {"complete", "missing", "minimal"}
    assert stats["tool_coverage"]["banking"]["tools"] == 17
    assert 0 < stats["validation_share"] < 1
    for name in ("chain_length.png", "tool_coverage.png"):
        assert (corpus["dir"] / name).read_bytes()[:4] == b"\x89PNG"
    assert "Drop reasons" in (corpus["dir"] / "stats.md").read_text()


def test_exports_for_trainers(corpus):
    """The default exports are written (tests/synth/test_exports.py runs them in the trainers)."""
    def rows(name):
        return [json.loads(line) for line in (corpus["dir"] / name).read_text().splitlines()]

    assert sorted(corpus["report"]["exports"]) == ["openrlhf", "rl", "sft"]
    ids = [r["id"] for r in read_jsonl(corpus["dir"] / "corpus.jsonl")]
    sft = rows("sft.jsonl")
    assert sft and all(r["prompt"][0]["role"] == "system" and r["completion"][0]["role"] == "assistant" for r in sft)
    rl = rows("rl.jsonl")
    assert [r["id"] for r in rl] == ids and all(r["prompt"][-1]["role"] == "user" and r["tools"] for r in rl)
    assert {r["task"]["expected"] for r in rl} == {"call", "clarify", "abstain"}
    rlhf = rows("openrlhf.jsonl")
    assert [r["id"] for r in rlhf] == ids and all("<tools>" in r["input"][0]["content"] for r in rlhf)
    assert {json.loads(r["label"])["example"]["task"]["expected"] for r in rlhf} == {"call", "clarify", "abstain"}


def test_same_seed_same_corpus_other_seed_other_corpus(tmp_path, plugins):
    from prove_core.synth.pipeline import synthesize

    def run(where, seed):
        exp = experiment(where, examples=25, seed=seed)
        synthesize(exp, plugins, echo=lambda _: None, progress=False)
        return (where / "t" / "synth" / "corpus.jsonl").read_bytes()

    assert run(tmp_path / "a", 1) == run(tmp_path / "b", 1)
    assert run(tmp_path / "c", 2) != run(tmp_path / "a", 1)


def test_killed_run_resumes_without_loss_or_duplicates(tmp_path):
    """SIGKILL `prove synth` mid-run, run it again: the corpus equals an uninterrupted run's."""
    config = tmp_path / "exp.toml"
    config.write_text(f'name = "k"\noutput_dir = "{tmp_path}"\n[[servers]]\nname = "banking"\n[[servers]]\nname = "shopping"\n'
                      f'[synth]\nexamples = 150\nplots = false\ncache_dir = "{tmp_path / "cache"}"\n')
    env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    cmd = [sys.executable, "-m", "prove_core.cli", "synth", str(config), "--no-progress"]
    corpus = tmp_path / "k" / "synth" / "corpus.jsonl"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and (not corpus.exists() or len(corpus.read_bytes().splitlines()) < 30):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(list(read_jsonl(corpus)))
    assert 0 < partial
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    resumed = [r["id"] for r in read_jsonl(corpus)]
    assert len(resumed) == len(set(resumed))

    fresh_config = tmp_path / "fresh.toml"
    fresh_config.write_text(config.read_text().replace('name = "k"', 'name = "f"'))
    subprocess.run([*cmd[:4], str(fresh_config), "--no-progress"], env=env, check=True, capture_output=True)
    fresh = list(read_jsonl(tmp_path / "f" / "synth" / "corpus.jsonl"))
    assert list(read_jsonl(corpus)) == fresh


def test_a_resume_with_other_code_seeds_or_options_stops_and_fresh_starts_over(tmp_path, plugins):
    import attrs
    import pytest

    from prove_core.errors import ConfigError
    from prove_core.synth.pipeline import synthesize

    exp = experiment(tmp_path, examples=10)
    synthesize(exp, plugins, echo=lambda _: None, progress=False)
    corpus = tmp_path / "t" / "synth" / "corpus.jsonl"
    before = corpus.read_bytes()
    more = attrs.evolve(exp, synth=attrs.evolve(exp.synth, examples=14, workers=2))
    synthesize(more, plugins, echo=lambda _: None, progress=False)  # a bigger target resumes
    assert corpus.read_bytes().startswith(before) and len(corpus.read_bytes()) > len(before)

    other_seed = attrs.evolve(exp, servers=[attrs.evolve(exp.servers[0], seed=5), *exp.servers[1:]])
    other_options = attrs.evolve(exp, servers=[attrs.evolve(exp.servers[0], options={"customers": 12}),
                                               *exp.servers[1:]])
    other_settings = attrs.evolve(exp, synth=attrs.evolve(exp.synth, seeds=2))
    for changed, named in ((other_seed, "servers.banking.seed"), (other_options, "servers.banking.options"),
                           (other_settings, "synth.seeds")):
        kept = corpus.read_bytes()
        with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
            synthesize(changed, plugins, echo=lambda _: None, progress=False)
        assert corpus.read_bytes() == kept  # nothing changed

    synthesize(other_settings, plugins, echo=lambda _: None, progress=False, fresh=True)
    fresh = [r["task"]["seed"] for r in read_jsonl(corpus)]
    assert fresh and set(fresh) <= {0, 1}  # two worlds: seeds 0 and 1


def test_a_resume_after_a_server_code_change_stops(tmp_path, plugins, monkeypatch):
    import pytest

    from prove_core.errors import ConfigError
    from prove_core.synth import pipeline as synthesis

    exp = experiment(tmp_path, examples=5)
    synthesis.synthesize(exp, plugins, echo=lambda _: None, progress=False)
    real = synthesis.fingerprint

    def edited(*args, **kwargs):
        fp = real(*args, **kwargs)
        fp["servers"]["banking"]["code"] = "edited"
        return fp

    monkeypatch.setattr(synthesis, "fingerprint", edited)
    with pytest.raises(ConfigError, match=r"servers\.banking\.code.*--fresh"):
        synthesis.synthesize(exp, plugins, echo=lambda _: None, progress=False)


def test_a_sampler_that_returns_no_sampling_context_is_named(tmp_path):
    """A third-party sampler whose `sample` returns something without `subset` and `candidates`
    fails with a PluginError naming it, not with a traceback deep inside the pipeline."""
    import types

    import pytest

    from prove_core import hookimpl
    from prove_core.errors import PluginError
    from prove_core.plugin.manager import Plugins
    from prove_core.synth.pipeline import synthesize

    class ListSampler:
        name = "list_sampler"

        def __init__(self, config):
            self.config = config

        def sample(self, env, rules):
            return [{"id": "acc_1"}]

    @hookimpl
    def prove_register_samplers(register):
        register(ListSampler)

    plugins = Plugins().load(autoload=False)
    module = types.ModuleType("bad_sampler_plugin")
    module.prove_register_samplers = prove_register_samplers
    plugins.add(module, name="bad_sampler_plugin")
    exp = experiment(tmp_path, examples=5, sampler="list_sampler")
    with pytest.raises(PluginError, match=r"sampler 'list_sampler' from plugin 'bad_sampler_plugin' returned a list "
                                          r"from sample\(env, rules\), not a sampling context \(it has no subset\(\) "
                                          r"or candidates\(\)\)"):
        synthesize(exp, plugins, echo=lambda _: None, progress=False)


def test_the_fingerprint_covers_every_module_of_a_server_package(tmp_path, plugins, monkeypatch, request):
    """A server split into a package (servers/filesystem/) is fingerprinted by all its modules: a
    change in a sibling of the module defining the seed function stops a resume. A module that
    is not in a sub-package (prove_servers.banking) is fingerprinted by its own file only."""
    import importlib
    import types

    from prove_core.config import ResolvedServer
    from prove_core.synth.pipeline import fingerprint

    root = tmp_path / "code" / "fp_probe_pkg"
    (root / "srv").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "srv" / "__init__.py").write_text("")
    (root / "srv" / "app.py").write_text("def seed(rng, options):\n    return None\n")
    (root / "srv" / "helpers.py").write_text("LIMIT = 1\n")
    (root / "single.py").write_text("def seed(rng, options):\n    return None\n")
    (root / "other.py").write_text("LIMIT = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    probe = ("fp_probe_pkg", "fp_probe_pkg.srv", "fp_probe_pkg.srv.app", "fp_probe_pkg.single")
    request.addfinalizer(lambda: [sys.modules.pop(name, None) for name in probe])
    seeds = {"nested": importlib.import_module("fp_probe_pkg.srv.app").seed,
             "flat": importlib.import_module("fp_probe_pkg.single").seed}

    class Registry:
        def load(self, kind, name):
            if kind == "servers":
                return types.SimpleNamespace(seed_fn=seeds[name], specs=lambda: [])
            return plugins.registry.load(kind, name)

    exp = experiment(tmp_path)
    resolved = [ResolvedServer(name=n, seed=0, options={}) for n in seeds]

    def codes():
        fp = fingerprint(exp, resolved, types.SimpleNamespace(registry=Registry()))
        return {name: entry["code"] for name, entry in fp["servers"].items()}

    before = codes()
    assert "?" not in before.values()
    assert codes() == before  # deterministic
    (root / "srv" / "helpers.py").write_text("LIMIT = 2\n")  # a sibling of the seed function's module
    (root / "other.py").write_text("LIMIT = 2\n")  # a sibling of a top-level module: not its code
    after = codes()
    assert after["nested"] != before["nested"] and after["flat"] == before["flat"]
    (root / "single.py").write_text("def seed(rng, options):\n    return 1\n")
    assert codes()["flat"] != after["flat"]


def test_a_conversation_and_its_companions_stay_on_one_side_of_every_split(corpus):
    """A clarification is a prefix of its conversation: the held-out split and the exports'
    ``group`` keep them together, so no held-out task is a prefix of a trained one."""
    from prove_core.model import Example, from_json
    from prove_core.synth.exporters import rl_rows, sft_rows
    from prove_core.train.core import split

    examples = [from_json(r, Example) for r in read_jsonl(corpus["dir"] / "corpus.jsonl")]
    companions = [e for e in examples if e.id.endswith("-clarify")]
    assert companions and all(e.conversation == e.id.removesuffix("-clarify") for e in companions)
    by_id = {e.id: e for e in examples}
    assert all(by_id[e.conversation].conversation == e.conversation for e in companions if e.conversation in by_id)
    for seed in range(5):
        train, held = split(examples, 12, seed)
        assert not {e.conversation for e in train} & {e.conversation for e in held}
        assert len(train) + len(held) == len(examples)
    groups = {r["id"]: r["group"] for r in rl_rows(corpus["dir"] / "corpus.jsonl")}
    assert all(groups[e.id] == e.conversation for e in examples if e.id in groups)
    assert {r["group"] for r in sft_rows(corpus["dir"] / "corpus.jsonl")} <= {e.conversation for e in examples}
