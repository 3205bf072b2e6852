"""The trainer contract: backends are plugins, one config key swaps them, and `prove train` runs a
third-party trainer by name with a job that has everything (corpus split, reward, live sessions)."""

import json
import types

import pytest

from prove_core.config import load_experiment
from prove_core.errors import ConfigError
from prove_core.model import ToolCall
from prove_core.plugin.manager import Plugins
from prove_core.reward.rollout import PolicyTurn, ScriptedPolicy
from prove_core.train.core import TrainResult, evaluate, run_training, split


class OracleTrainer:
    """A third-party backend: 'trains' by playing the ground truth on live sessions."""

    name = "oracle_trainer"
    seen = {}

    def __init__(self, config=None):
        self.config = config

    def train(self, job):
        OracleTrainer.seen["job"] = job
        example = next(e for e in job.train if e.task.expected == "call")
        turns = [PolicyTurn(attempts=[ToolCall(id=c.id, name=c.tool, arguments=c.arguments)]) for c in example.task.calls]
        summary = evaluate(ScriptedPolicy([*turns, *[PolicyTurn(content="done")] * 5]), [example],
                           reward=job.reward, environment=job.environment, limits=job.limits)
        job.metrics.write({"step": 1, "reward/total": summary["total"]})
        return TrainResult(ok=True, steps=1, before={**summary, "total": 0.0}, after=summary)


def plugins_with_trainer():
    plugins = Plugins().load(autoload=False)
    module = types.ModuleType("third_party_trainer")
    module.prove_register_trainers = lambda register: register(OracleTrainer)
    plugins.add(module, name="third_party_trainer", distribution="third-party")
    return plugins


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from prove_core.synth.pipeline import synthesize

    tmp = tmp_path_factory.mktemp("corpus")
    exp = load_experiment({"name": "c", "output_dir": str(tmp), "servers": [{"name": "banking"}],
                           "synth": {"examples": 8, "plots": False, "exports": [], "cache_dir": str(tmp / "cache")}})
    synthesize(exp, Plugins().load(autoload=False), echo=lambda _: None, progress=False)
    return tmp / "c" / "synth" / "corpus.jsonl"


def config(tmp_path, corpus, backend="oracle_trainer", **train):
    return {"name": "t", "output_dir": str(tmp_path), "stages": ["train"], "servers": [{"name": "banking"}],
            "train": {"backend": backend, "corpus": str(corpus), "eval": {"held_out": 3}, **train}}


def test_a_third_party_trainer_runs_by_name_with_live_sessions_and_the_reward(tmp_path, corpus):
    from prove_core.stages import run_experiment

    path = tmp_path / "exp.toml"
    path.write_text(f'name = "t"\noutput_dir = "{tmp_path}"\nstages = ["train"]\n[[servers]]\nname = "banking"\n'
                    f'[train]\nbackend = "oracle_trainer"\ncorpus = "{corpus}"\n[train.eval]\nheld_out = 3\n')
    summary = run_experiment(str(path), plugins=plugins_with_trainer(), echo=lambda _: None)
    assert summary["ok"] and summary["stages"]["train"]["backend"] == "oracle_trainer"
    job = OracleTrainer.seen["job"]
    assert len(job.held_out) == 3 and not {e.id for e in job.held_out} & {e.id for e in job.train}
    assert job.limits.max_user_turns == 5 and job.limits.max_assistant_turns == 10  # the paper's limits
    after = summary["stages"]["train"]["after"]
    assert after["total"] == pytest.approx(after["best"]) and after["best"] > 1.0  # the ground truth scores the max
    report = (tmp_path / "t" / "train" / "report.md").read_text()
    assert "| **total** | 0.000 |" in report
    assert json.loads((tmp_path / "t" / "train" / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1


def test_prove_train_picks_the_backend_from_the_command_line(tmp_path, corpus):
    plugins = plugins_with_trainer()
    experiment = load_experiment(config(tmp_path, corpus, backend="trl"))
    summary = run_training(experiment, plugins, echo=lambda _: None, backend="oracle_trainer")
    assert summary["backend"] == "oracle_trainer" and summary["ok"]


def test_unknown_backend_is_a_config_error_naming_the_registered_ones(tmp_path, corpus):
    experiment = load_experiment(config(tmp_path, corpus, backend="nope"))
    with pytest.raises(ConfigError) as err:
        run_training(experiment, plugins_with_trainer(), echo=lambda _: None)
    assert "$.train.backend" in str(err.value) and "trl" in str(err.value) and "openrlhf" in str(err.value)


def test_backend_options_are_checked_with_the_backends_own_config(tmp_path, corpus):
    experiment = load_experiment(config(tmp_path, corpus, backend="trl", options={"micro_batchh": 2}))
    with pytest.raises(ConfigError) as err:
        run_training(experiment, Plugins().load(autoload=False), echo=lambda _: None)
    assert "$.train.options" in str(err.value)


def test_missing_corpus_says_to_run_synth_first(tmp_path):
    experiment = load_experiment(config(tmp_path, tmp_path / "none.jsonl"))
    with pytest.raises(ConfigError, match="run the 'synth' stage first"):
        run_training(experiment, plugins_with_trainer(), echo=lambda _: None)


def test_unknown_train_keys_are_rejected_with_their_path():
    with pytest.raises(ConfigError, match=r"\$\.train\.sft: extra fields found \(stepz\)"):
        load_experiment({"servers": [{"name": "banking"}], "train": {"sft": {"stepz": 3}}})


def test_held_out_split_is_seeded_and_disjoint(corpus):
    from prove_core.train.core import load_corpus

    examples = load_corpus(corpus)
    a_train, a_held = split(examples, 3, seed=1)
    b_train, b_held = split(examples, 3, seed=1)
    assert [e.id for e in a_held] == [e.id for e in b_held] and len(a_train) + 3 == len(examples)
    assert [e.id for e in split(examples, 3, seed=2)[1]] != [e.id for e in a_held]


def test_the_held_out_split_keeps_each_behaviour_in_proportion_and_every_one_represented(corpus):
    import attrs

    from prove_core.train.core import load_corpus

    base = load_corpus(corpus)[0]
    kinds = ["call"] * 80 + ["clarify"] * 12 + ["abstain"] * 8
    examples = [attrs.evolve(base, id=f"e{i}", task=attrs.evolve(base.task, expected=k, calls=[] if k != "call"
                                                                   else base.task.calls,
                                                                   meta={**base.task.meta, "conversation": f"e{i}"}))
                for i, k in enumerate(kinds)]
    for n, expected in ((10, {"call": 8, "clarify": 1, "abstain": 1}), (20, {"call": 16, "clarify": 2, "abstain": 2}),
                        (5, {"call": 3, "clarify": 1, "abstain": 1})):
        train, held = split(examples, n, seed=3)
        counts = {k: sum(e.task.expected == k for e in held) for k in ("call", "clarify", "abstain")}
        assert counts == expected and len(train) + n == len(examples)
        assert not {e.id for e in train} & {e.id for e in held}


def test_trainers_are_registered_lazily():
    registry = Plugins().load(autoload=False).registry
    assert {"trl", "openrlhf"} <= set(registry.names("trainers"))
    assert all(c.lazy for c in registry.components("trainers"))


def test_perturbations_reach_the_backend_when_asked(tmp_path, corpus):
    experiment = load_experiment(config(tmp_path, corpus, perturb=True))
    run_training(experiment, plugins_with_trainer(), echo=lambda _: None)
    job = OracleTrainer.seen["job"]
    assert job.perturber is not None
    prompts = job.prompts(job.train, epoch=1)
    assert len(prompts) == len(job.train) and all(p.id.endswith("~1") for p in prompts)
    assert any(p.tools != e.tools or p.task.meta != e.task.meta for p, e in zip(prompts, job.train))
    plain = load_experiment(config(tmp_path, corpus))
    run_training(plain, plugins_with_trainer(), echo=lambda _: None)
    assert OracleTrainer.seen["job"].perturber is None


def test_the_prove_train_command_runs_a_plugin_trainer_by_name(tmp_path, corpus, monkeypatch, capsys):
    import prove_core.plugin.manager as plugin_module
    from prove_core.cli import main

    monkeypatch.setattr(plugin_module, "_DEFAULT", plugins_with_trainer())
    path = tmp_path / "exp.toml"
    path.write_text(f'name = "cli"\noutput_dir = "{tmp_path}"\n[[servers]]\nname = "banking"\n'
                    f'[train]\ncorpus = "{corpus}"\n[train.eval]\nheld_out = 2\n')
    main(["train", str(path), "--backend", "oracle_trainer", "--steps", "3"])
    out = capsys.readouterr().out
    assert "train: backend oracle_trainer" in out and "3 steps" in out
    assert (tmp_path / "cli" / "train" / "report.md").is_file()
    with pytest.raises(SystemExit):
        main(["train", str(path), "--backend", "no_such_trainer"])
    assert "no trainer named 'no_such_trainer'" in capsys.readouterr().err


def test_the_trl_backend_without_the_train_extra_says_what_to_install(tmp_path, corpus, monkeypatch):
    import importlib.util

    from prove_core.errors import ProveError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "trl" else real(name, *a))
    exp = load_experiment(config(tmp_path, corpus, backend="trl"))
    with pytest.raises(ProveError, match=r"needs trl .*pip install torch==2.13.0 && pip install -e '.\[train\]'"):
        run_training(exp, Plugins().load(autoload=False), echo=lambda _: None)
    assert not (tmp_path / "t" / "train" / "base").exists()  # nothing was built


def test_the_report_names_what_the_backend_ran(tmp_path):
    """A backend's `method` words the report and the console: GRPO, another method, or nothing."""
    from prove_core.config import TrainConfig
    from prove_core.train.core import TrainResult
    from prove_core.train.report import held_out_phases, write_report

    def summary(total):
        return {"rollouts": 2, "total": total, "best": 1.3, "components": {"validity": total}}

    for method, before, after, wanted, unwanted in (
            ("GRPO", summary(0.2), summary(0.4), ["3 GRPO steps of 16 prompts", "| before GRPO | after GRPO |"], []),
            ("DPO", summary(0.2), summary(0.4), ["3 DPO steps;", "| before DPO | after DPO |"], ["GRPO"]),
            (None, summary(0.3), summary(0.3), ["trains nothing", "| | held out |"], ["GRPO", "| before", "after |"])):
        out = tmp_path / str(method)
        out.mkdir()
        result = TrainResult(ok=True, steps=3, method=method, before=before, after=after)
        report = write_report(out, [], result, settings=TrainConfig(), seconds=1.0).read_text()
        for text in wanted:
            assert text in report, (method, text, report)
        for text in unwanted:
            assert text not in report, (method, text, report)
    assert [label for label, _ in held_out_phases(TrainResult(ok=True, method=None, before=summary(0.1),
                                                              after=summary(0.2)))] == ["first evaluation",
                                                                                        "second evaluation"]


def test_the_trl_backend_leaves_trls_progress_bar_to_the_terminal(monkeypatch):
    """TRL's own tqdm bar shows on a terminal and stays out of logs and pipes."""
    import sys

    from prove_plugins.train.trl_backend import trainer_progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert trainer_progress() == {"disable_tqdm": False}
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert trainer_progress() == {"disable_tqdm": True}
