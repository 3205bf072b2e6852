"""Interrupted work: `prove synth` SIGKILLed at random points — before it writes anything, at
random progress points of the corpus, the whole process group or the parent alone — and then run
to completion loses and duplicates nothing: the corpus and the drop log equal an uninterrupted
run's, record for record. (tests/synth/test_pipeline.py kills once, at a fixed point.)

`prove train` SIGKILLed during the SFT warm-up, between GRPO steps and at random moments while
it saves checkpoints, then run to completion: every GRPO step is in the metrics exactly once, the
run resumed from a complete checkpoint and finished with the configured number of steps.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prove_core.model import read_jsonl

pytestmark = pytest.mark.slow

EXAMPLES = 120
ENV = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}


def config(where: Path, name: str, cache: Path) -> Path:
    path = where / f"{name}.toml"
    path.write_text(f'name = "{name}"\noutput_dir = "{where}"\n[[servers]]\nname = "banking"\n[[servers]]\n'
                    f'name = "shopping"\n[synth]\nexamples = {EXAMPLES}\nworkers = 2\nplots = false\n'
                    f'cache_dir = "{cache}"\n')
    return path


def synth(path: Path) -> subprocess.Popen:
    # Its own process group, so a kill can take the fork pool's workers with it.
    return subprocess.Popen([sys.executable, "-m", "prove_core.cli", "synth", str(path), "--no-progress"], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def gone(pgid: int, timeout: float = 10.0) -> bool:
    """True once no process of the group is left (orphaned pool workers exit on their own)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_synth_killed_at_random_points_loses_and_duplicates_nothing(tmp_path):
    rng = random.Random(20261122)  # fixed, so a failure reproduces; the points are spread, not hand-picked
    cache = tmp_path / "cache"
    fresh = config(tmp_path, "fresh", cache)
    subprocess.run([sys.executable, "-m", "prove_core.cli", "synth", str(fresh), "--no-progress"], env=ENV,
                   check=True, capture_output=True)
    want_corpus = list(read_jsonl(tmp_path / "fresh" / "synth" / "corpus.jsonl"))
    want_drops = list(read_jsonl(tmp_path / "fresh" / "synth" / "drops.jsonl"))
    total = len(want_corpus)

    killed = config(tmp_path, "killed", cache)
    corpus, drops = tmp_path / "killed" / "synth" / "corpus.jsonl", tmp_path / "killed" / "synth" / "drops.jsonl"
    # Line points come from the first three quarters: the corpus is written in bursts, so a point near
    # the end can be passed by a run that finishes between two polls.
    marks = sorted(rng.sample(range(1, total * 3 // 4), 3))
    points = [("seconds", rng.uniform(0.05, 0.4))] + [("lines", n) for n in marks]
    progress = []
    for kind, at in points:
        proc = synth(killed)
        started = time.time()
        while proc.poll() is None and time.time() - started < 60:
            if (kind == "seconds" and time.time() - started >= at) or (kind == "lines" and lines(corpus) >= at):
                break
            time.sleep(0.005)
        whole_group = rng.random() < 0.5
        if proc.poll() is None:
            if whole_group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not gone(proc.pid):  # a leftover worker would keep writing into the next run's files
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("a killed run left pool workers behind")
        kept = [r["id"] for r in read_jsonl(corpus)]
        assert len(kept) == len(set(kept))
        progress.append(len(kept))
    print("corpus records after each kill:", progress, "of", total)
    assert progress == sorted(progress)  # never lost what was written
    assert any(0 < n < total for n in progress)  # at least one kill landed mid-corpus, so the resume is tested

    subprocess.run([sys.executable, "-m", "prove_core.cli", "synth", str(killed), "--no-progress"], env=ENV,
                   check=True, capture_output=True)
    got_corpus, got_drops = list(read_jsonl(corpus)), list(read_jsonl(drops))
    assert len({r["id"] for r in got_corpus}) == len(got_corpus)
    assert len({r["id"] for r in got_drops}) == len(got_drops)
    assert got_corpus == want_corpus
    assert got_drops == want_drops
    for export in ("rl.jsonl", "openrlhf.jsonl"):
        assert lines(corpus.parent / export) == total


TRAIN_STEPS = 6


def train_config(where: Path, cache: Path) -> Path:
    path = where / "train.toml"
    path.write_text(f'''name = "train"
output_dir = "{where}"
stages = ["synth", "train"]
[[servers]]
name = "banking"
[synth]
examples = 10
plots = false
exports = []
cache_dir = "{cache}"
[train]
steps = {TRAIN_STEPS}
group_size = 2
batch_size = 2
lr = 1e-3
max_new_tokens = 16
checkpoint_every = 1
[train.model]
hidden_size = 32
layers = 1
heads = 2
vocab_size = 600
max_tool_chars = 120
[train.sft]
steps = 200
batch_size = 4
max_length = 4096
[train.eval]
held_out = 2
[train.options]
tensorboard = false
''')
    return path


def test_training_killed_at_random_points_resumes_without_losing_or_repeating_a_step(tmp_path):
    pytest.importorskip("trl", reason="needs the train extra: pip install torch==2.13.0 && pip install -e '.[train]'")
    import json

    rng = random.Random(20261123)
    path = train_config(tmp_path, tmp_path / "cache")
    subprocess.run([sys.executable, "-m", "prove_core.cli", "synth", str(path), "--no-progress"], env=ENV,
                   check=True, capture_output=True)
    out = tmp_path / "train" / "train"
    metrics = out / "metrics.jsonl"

    def steps_logged() -> list[int]:
        return [r["step"] for r in read_jsonl(metrics)]

    # kill points: mid-warm-up, after k logged GRPO steps, and k steps plus a random delay (often mid-save)
    points = [("sft", 0.0), ("steps", rng.randint(1, 2), 0.0), ("steps", rng.randint(3, 4), rng.uniform(0.0, 0.4))]
    for point in points:
        log = tmp_path / "train.log"
        with log.open("w") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "prove_core.cli", "train", str(path)], env=ENV,
                                    stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        started = time.time()
        while proc.poll() is None and time.time() - started < 300:
            if point[0] == "sft" and "sft: step 20/200" in log.read_text():
                break
            if point[0] == "steps" and len(steps_logged()) >= point[1]:
                time.sleep(point[2])
                break
            time.sleep(0.01)
        assert proc.poll() is None, f"finished before the kill point {point}:\n{log.read_text()[-2000:]}"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert gone(proc.pid)
        if point[0] == "sft":
            assert not (out / "sft" / "prove_done.json").exists() and not metrics.exists()
        else:
            logged = steps_logged()
            assert logged == sorted(set(logged)), logged  # no step twice, even before the resume

    done = subprocess.run([sys.executable, "-m", "prove_core.cli", "train", str(path)], check=False, env=ENV,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "resuming from" in done.stdout and "sft: already done" in done.stdout
    assert steps_logged() == list(range(1, TRAIN_STEPS + 1))
    result = json.loads((out / "result.json").read_text())
    assert result["ok"] and result["steps"] == TRAIN_STEPS
    state = json.loads((out / "grpo" / f"checkpoint-{TRAIN_STEPS}" / "trainer_state.json").read_text())
    assert state["global_step"] == TRAIN_STEPS
    assert (out / "final" / "prove_done.json").is_file()
