"""Every Python example of docs/plugins.md, docs/training.md and docs/reward.md runs against the code as it is.

Each fenced ``python`` block is executed on its own. A block that defines ``prove_register_*``
hooks is added as a plugin to a fresh plugin set (the bundled plugins, no entry points); every
component it registers is built through the registry's loader and then driven the way the core
drives its kind: samplers, extractors and teachers in a short ``prove synth``, rewards in the
combiner, perturbations in the perturber, parsers on raw text, trainers by ``prove train``,
evaluators by ``prove eval``, clients in a live rollout. A block preceded by the line
``<!-- docs-test: skip (why) -->`` is not run (it imports a hypothetical package).
"""

from __future__ import annotations

import random
import re
import shutil
import types
from pathlib import Path

import attrs
import pytest

from prove_core.config import ModelConfig, load_experiment, structure
from prove_core.plugin.manager import Plugins
from prove_core.plugin.registry import config_class

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
PAGES = (DOC, DOC.with_name("training.md"), DOC.with_name("reward.md"))
SKIP = re.compile(r"^<!-- docs-test: skip \((?P<why>[^)]+)\) -->$")
FENCE = re.compile(r"^```(?P<lang>\S*)\s*$")


@attrs.frozen
class Block:
    line: int  # of the opening fence, 1-based
    code: str
    skip: str | None  # why it is not run
    page: str = "plugins.md"


def python_blocks(text: str) -> list[Block]:
    """The fenced ``python`` blocks of a markdown text, with the skip marker before each."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if match.group("lang") == "python":
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            skip = SKIP.match(before.strip())
            blocks.append(Block(line=i + 1, code="\n".join(lines[i + 1:end]) + "\n",
                                skip=skip.group("why") if skip else None))
        i = end + 1
    return blocks


BLOCKS = [attrs.evolve(b, page=page.name) for page in PAGES for b in python_blocks(page.read_text())]
RUNNABLE = [b for b in BLOCKS if b.skip is None]


def test_the_page_has_examples_for_every_kind_and_few_skipped_blocks():
    assert len(RUNNABLE) >= 10
    for page in PAGES:  # a page may skip a block that needs the reader's own package or data, but few
        skipped = [b.line for b in BLOCKS if b.page == page.name and b.skip]
        assert len(skipped) <= 2, (page.name, skipped)
    hooks = {h for b in RUNNABLE for h in re.findall(r"^def (prove_register_\w+)\(", b.code, re.M)}
    assert hooks == {f"prove_register_{k}" for k in ("samplers", "extractors", "teachers", "rewards", "perturbations",
                                                     "parsers", "trainers", "evaluators", "clients")}


def test_the_block_reader_sees_fences_and_skip_markers():
    text = ("x\n<!-- docs-test: skip (needs my_pkg) -->\n```python\nimport my_pkg\n```\n"
            "```bash\nprove plugins\n```\n\n```python\nassert 1\n```\n")
    first, second = python_blocks(text)
    assert (first.line, first.skip, first.code) == (3, "needs my_pkg", "import my_pkg\n")
    assert (second.line, second.skip, second.code) == (10, None, "assert 1\n")


# -- fixtures the exercisers share ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small banking corpus (tasks, examples and a run folder for `prove eval`)."""
    from prove_core.synth.pipeline import synthesize

    tmp = tmp_path_factory.mktemp("docs_corpus")
    exp = load_experiment({"name": "c", "output_dir": str(tmp), "servers": [{"name": "banking"}],
                           "synth": {"examples": 8, "seeds": 2, "plots": False, "exports": [],
                                     "cache_dir": str(tmp / "cache")}})
    synthesize(exp, Plugins().load(autoload=False), echo=lambda _: None, progress=False)
    return tmp / "c" / "synth" / "corpus.jsonl"


def examples_of(corpus):
    from prove_core.model import Example, from_json, read_jsonl

    return [from_json(r, Example) for r in read_jsonl(corpus)]


def environment(registry, example):
    from prove_core.env.runtime import Environment, ServerRuntime

    return Environment([ServerRuntime(registry.load("servers", s), seed=example.task.seed) for s in example.task.servers])


# -- how the core drives each kind -----------------------------------------------------------------------


def drive_synthesis(plugins, tmp_path, roles):
    """A short `prove synth` with the example components in their roles."""
    from prove_core.synth.pipeline import synthesize
    from prove_core.synth.validation import replay

    exp = load_experiment({"name": "s", "output_dir": str(tmp_path), "servers": [{"name": "banking"}],
                           "synth": {"examples": 3, "seeds": 1, "plots": False, "exports": [],
                                     "cache_dir": str(tmp_path / "cache"), **roles}})
    report = synthesize(exp, plugins, echo=lambda _: None, progress=False)
    examples = examples_of(tmp_path / "s" / "synth" / "corpus.jsonl")
    assert report["examples"] == len(examples) > 0, report["drops"]
    for example in examples:
        assert replay(example, environment(plugins.registry, example), max_error_rate=1.0).ok, example.id
    return examples


def drive_samplers(plugins, name, tmp_path, corpus):
    from prove_core.synth.sampling import SupportRule

    sampler = plugins.registry.build("samplers", name)
    context = sampler.sample(environment(plugins.registry, examples_of(corpus)[0]),
                             [SupportRule(entity="account", field="status", op="eq", value="open")])
    assert isinstance(context.candidates("banking", "account"), list)
    context.subset(random.Random(0), 2)
    drive_synthesis(plugins, tmp_path, {"sampler": name})


def drive_extractors(plugins, name, tmp_path, corpus):
    cls = plugins.registry.load("extractors", name)
    role = "labeller" if hasattr(cls, "label") else "extractor"
    assert hasattr(cls, "label") or hasattr(cls, "extract"), name
    drive_synthesis(plugins, tmp_path, {role: name})


def drive_teachers(plugins, name, tmp_path, corpus):
    examples = drive_synthesis(plugins, tmp_path, {"teacher": name})
    assert any(m.role == "user" for e in examples for m in e.messages)


def drive_rewards(plugins, name, tmp_path, corpus):
    from prove_core.config import RewardConfig
    from prove_core.reward.core import Rollout, build_reward

    reward = build_reward(structure({"components": [{"name": name}]}, RewardConfig), plugins.registry)
    scored = 0
    for example in examples_of(corpus):
        for rollout in (Rollout.ground_truth(example.task),
                        Rollout.from_calls(example.task, [(c.tool, c.arguments) for c in example.task.calls] * 2)):
            score = reward.score(rollout).scores[name]
            assert score.error is None, score.error
            low, high = reward.components[0].worst, reward.components[0].best
            assert not score.applies or low <= score.value <= high
            scored += score.applies
    assert scored


def drive_perturbations(plugins, name, tmp_path, corpus):
    from prove_core.model import Example
    from prove_core.synth.perturbation import build_perturber

    perturber = build_perturber({"perturbations": [{"name": name, "rate": 1.0}]}, plugins.registry, path="$.p")
    changed = 0
    for example in examples_of(corpus):
        out = perturber(example)
        assert isinstance(out, Example)
        changed += any(c.get("name") == name for c in out.task.meta.get("perturbations", []))
    assert changed


TEXTS = ["", "Just prose.", 'Action: get_balance {"account_id": "acc_1"}', "Action: broken {not json",
         '<tool_call>{"name": "ls", "arguments": {}}</tool_call>', "[TOOL_CALLS][{]", "\x00" * 3]


def drive_parsers(plugins, name, tmp_path, corpus):
    from prove_core.reward.parsing import ParsedTurn, load_parser, safe_parse

    parser = load_parser(plugins.registry, name)
    for text in TEXTS:
        turn = safe_parse(parser, text)
        assert isinstance(turn, ParsedTurn) and not [f for f in turn.failures if f.kind == "parser_error"], (text, turn)


def drive_trainers(plugins, name, tmp_path, corpus):
    from prove_core.train.core import run_training

    exp = load_experiment({"name": "t", "output_dir": str(tmp_path), "servers": [{"name": "banking"}],
                           "train": {"backend": name, "corpus": str(corpus), "eval": {"held_out": 2}}})
    lines = []
    summary = run_training(exp, plugins, echo=lines.append)
    report = (tmp_path / "t" / "train" / "report.md").read_text()
    assert summary["ok"] and "## Held-out evaluation" in report
    if summary["method"] is None:  # a backend that trains nothing is not reported as GRPO
        assert "GRPO" not in report + "\n".join(lines) and "trains nothing" in report


def drive_evaluators(plugins, name, tmp_path, corpus):
    from prove_core.eval.core import run_evaluation

    exp = load_experiment({"name": "e", "output_dir": str(tmp_path), "servers": [{"name": "banking"}],
                           "eval": {"models": [{"name": "oracle", "client": "oracle"},
                                               {"name": "silent", "client": "no_call"}],
                                    "benchmarks": [{"name": name}], "plots": False}})
    (tmp_path / "e" / "synth").mkdir(parents=True)
    shutil.copy(corpus, tmp_path / "e" / "synth" / "corpus.jsonl")
    report = run_evaluation(exp, plugins, echo=lambda _: None)
    results = report["benchmarks"][name]["results"]["all"]
    assert results["oracle"]["n"] == results["silent"]["n"] > 0
    assert results["oracle"]["rate"] > results["silent"]["rate"]


def drive_clients(plugins, name, tmp_path, corpus):
    from prove_core.eval.core import begin_episode, build_client
    from prove_core.reward.rollout import PolicyTurn, rollout

    policy = build_client(ModelConfig(name="m", client=name), plugins.registry)
    turn = policy.respond([{"role": "user", "content": "hi"}], [])
    assert isinstance(turn, PolicyTurn)
    for example in examples_of(corpus)[:3]:
        begin_episode(policy, None)
        played = rollout(policy, example, environment(plugins.registry, example))
        assert played.rollout.task == example.task and played.messages


DRIVERS = {"samplers": drive_samplers, "extractors": drive_extractors, "teachers": drive_teachers,
           "rewards": drive_rewards, "perturbations": drive_perturbations, "parsers": drive_parsers,
           "trainers": drive_trainers, "evaluators": drive_evaluators, "clients": drive_clients}


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"{b.page}:{b.line}" for b in RUNNABLE])
def test_docs_example_runs(block, tmp_path, corpus, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = f"docs_{block.page.replace('.', '_')}_{block.line}"
    namespace = {"__name__": name}
    exec(compile(block.code, f"{DOC.with_name(block.page)}:{block.line}", "exec"), namespace)  # noqa: S102 - our own docs
    hooks = {k: v for k, v in namespace.items() if k.startswith("prove_") and callable(v)}
    if not hooks:
        return  # a script: its asserts checked what it shows
    plugins = Plugins().load(autoload=False)
    module = types.ModuleType(name)
    for key, value in hooks.items():
        setattr(module, key, value)
    plugins.add(module, name=name, distribution="docs")
    assert not plugins.failures
    components = [c for c in plugins.registry.components() if c.plugin == name]
    assert components, f"the block at line {block.line} registers nothing"
    for comp in components:
        cls = plugins.registry.load(comp.kind, comp.name)
        context = {"registry": plugins.registry} if comp.kind == "clients" else {}
        instance = plugins.registry.build(comp.kind, comp.name, path=f"$.{comp.name}", **context)
        assert isinstance(instance, cls) and comp.summary
        assert instance.config == config_class(cls)()
        DRIVERS[comp.kind](plugins, comp.name, tmp_path / comp.name, corpus)
