"""The TRL backend end to end on a tiny model (CPU): SFT warm-up, GRPO through TRL's GRPOTrainer with
multi-turn rollouts on live sessions, per-component metrics every step, the report, checkpoints,
and resume after an interruption."""

import json

import pytest

pytest.importorskip("trl", reason="needs the train extra: pip install torch==2.13.0 && pip install -e '.[train]'")

from prove_core.config import load_experiment  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402
from prove_core.train.core import run_training  # noqa: E402

TINY = {"hidden_size": 32, "layers": 1, "heads": 2, "vocab_size": 600, "max_tool_chars": 120}


def experiment(tmp, steps, **train):
    return load_experiment({
        "name": "t", "output_dir": str(tmp), "servers": [{"name": "banking"}],
        "synth": {"examples": 10, "plots": False, "exports": [], "cache_dir": str(tmp / "cache")},
        "train": {"steps": steps, "group_size": 2, "batch_size": 2, "lr": 1e-3, "max_new_tokens": 16,
                  "checkpoint_every": 1, "model": TINY, "sft": {"steps": 4, "batch_size": 4, "max_length": 4096},
                  "eval": {"held_out": 2}, "options": {"tensorboard": False}, **train}})


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    from prove_core.synth.pipeline import synthesize

    tmp = tmp_path_factory.mktemp("trl")
    plugins = Plugins().load(autoload=False)
    exp = experiment(tmp, steps=2)
    synthesize(exp, plugins, echo=lambda _: None, progress=False)
    lines = []
    summary = run_training(exp, plugins, echo=lines.append)
    return tmp, plugins, summary, lines


def test_grpo_runs_with_live_rollouts_and_logs_every_component_every_step(first_run):
    tmp, _, summary, lines = first_run
    out = tmp / "t" / "train"
    assert summary["ok"] and summary["steps"] == 2
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert {"reward/total", "reward/validity", "reward/coverage", "reward/efficiency", "kl", "loss"} <= set(record)
        assert record["rollouts"] == 4  # batch 2 prompts x group 2
    assert any(line.startswith("sft: step 4/4") for line in lines)
    assert any(line.startswith("grpo: step 2/2") for line in lines)
    # the evaluation played held-out tasks on live sessions, before and after
    assert summary["before"]["rollouts"] == 2 and summary["after"]["rollouts"] == 2
    transcript = json.loads((out / "eval_after.jsonl").read_text().splitlines()[0])
    assert transcript["messages"][0]["role"] == "system" and "components" in transcript["reward"]
    for name in ("report.md", "reward_components.png", "before_after.png"):
        assert (out / name).is_file()
    report = (out / "report.md").read_text()
    assert "| **total** |" in report and "95% interval |" in report
    assert set(summary["before"]["tasks"]) == set(summary["after"]["tasks"]) and len(summary["after"]["tasks"]) == 2
    assert (out / "final" / "config.json").is_file() and (out / "grpo" / "checkpoint-2").is_dir()


def test_an_interrupted_run_resumes_from_its_last_checkpoint(first_run):
    tmp, plugins, _, _ = first_run
    lines = []
    summary = run_training(experiment(tmp, steps=3), plugins, echo=lines.append)
    assert summary["steps"] == 3
    assert any("resuming from" in line and "checkpoint-2" in line for line in lines)
    assert any(line.startswith("sft: already done") for line in lines)
    assert not any(line.startswith("grpo: step 1/") for line in lines)  # steps 1-2 were not redone
    records = [json.loads(line) for line in (tmp / "t" / "train" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]


def test_the_policy_trained_is_the_one_evaluated(first_run):
    """The final model on disk generates what the after-evaluation recorded (same greedy turns)."""
    tmp, plugins, _, _ = first_run
    from prove_core.model import Example, from_json, read_jsonl
    from prove_plugins.train.local import load
    from prove_plugins.train.models.hf import HFPolicy, Sampling

    out = tmp / "t" / "train"
    model, tokenizer = load(out / "final")
    policy = HFPolicy(model, tokenizer, registry=plugins.registry, sampling=Sampling(max_new_tokens=16, temperature=0))
    record = json.loads((out / "eval_after.jsonl").read_text().splitlines()[0])
    corpus = {r["id"]: from_json(r, Example) for r in read_jsonl(tmp / "t" / "synth" / "corpus.jsonl")}
    example = corpus[record["id"].split("#")[0]]
    first_user = next(i for i, m in enumerate(record["messages"]) if m["role"] == "user")
    turn = policy.respond(record["messages"][: first_user + 1], example.tools)
    recorded = record["messages"][first_user + 1]
    assert recorded["role"] == "assistant"
    assert (turn.content or None) == recorded["content"] or [c.name for c in turn.attempts if hasattr(c, "name")] == \
        [c["function"]["name"] for c in recorded.get("tool_calls", [])]


def test_an_interrupted_warm_up_resumes_to_the_weights_of_an_uninterrupted_one(first_run, tmp_path):
    import attrs
    import torch

    from prove_core.model import Example, from_json, read_jsonl
    from prove_core.train.core import TrainJob
    from prove_plugins.train.local import load, sft_warmup

    tmp, _, _, _ = first_run
    exp = experiment(tmp_path, steps=1, sft={"steps": 12, "batch_size": 4, "checkpoint_every": 4, "max_length": 4096})
    train = [from_json(r, Example) for r in read_jsonl(tmp / "t" / "synth" / "corpus.jsonl")]
    start = tmp / "t" / "train" / "base"

    def job(name, echo):
        return TrainJob(experiment=exp, settings=exp.train, train=train, held_out=[], reward=None, registry=None,
                        environment=None, perturber=None, out_dir=tmp_path / name, metrics=None, echo=echo)

    whole = sft_warmup(job("whole", lambda _: None), start)

    class Killed(Exception):
        pass

    def kill_at_step_7(line):
        if line.startswith("sft: step 7/12"):
            raise Killed

    with pytest.raises(Killed):
        sft_warmup(job("cut", kill_at_step_7), start)
    assert (tmp_path / "cut" / "sft_resume.pt").is_file() and not (tmp_path / "cut" / "sft").exists()
    lines = []
    resumed = sft_warmup(job("cut", lines.append), start)
    assert "sft: resuming at step 4/12" in lines[0]
    assert not any(line.startswith("sft: step 4/12") for line in lines)  # steps 1-4 were not redone
    assert not (tmp_path / "cut" / "sft_resume.pt").exists()
    want, got = load(whole)[0].state_dict(), load(resumed)[0].state_dict()
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
    losses = [json.loads((tmp_path / d / "sft_loss.json").read_text()) for d in ("whole", "cut")]
    assert losses[0] == losses[1] and len(losses[0]) == 12

    # a resume point written under other settings is not continued
    with pytest.raises(Killed):
        sft_warmup(job("other", kill_at_step_7), start)
    other = attrs.evolve(exp.train, sft=attrs.evolve(exp.train.sft, lr=1e-3))
    lines = []
    sft_warmup(attrs.evolve(job("other", lines.append), settings=other), start)
    assert "different warm-up settings; starting over" in lines[0]
    assert any(line.startswith("sft: step 1/12") for line in lines)
