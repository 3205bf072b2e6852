"""Rollout benchmark: the environment's share of rollout wall time against generation.

A training rollout is generation (the model writing its turns) plus the environment: every tool
call executed on the rollout's own live session (fork, calls, state hash, close) and the PROVE
reward of the finished rollout (which replays the calls on another fork for the live validity
tier). This plays held-out-style episodes of a synthesized `banking` corpus with
``prove_plugins.train.models.hf.play_batch`` (generation batched across episodes, as the ``trl`` backend does),
times the three parts in the same run and prints:

- generation: seconds, generated tokens/s;
- environment: tool-execution seconds and reward seconds;
- the environment's share of rollout wall time (goal on a GPU with a real-size model: < 2%).

``--model`` plays a trained model folder — by default the quickstart's
(``runs/quickstart/train/final``: SmolLM2-135M-Instruct after the warm-up and GRPO, written by
``prove run``) when it exists. Otherwise ``--arch smollm2`` is the pretrained SmolLM2-135M-Instruct
itself (the ``smollm2-135m-instruct`` model source), ``--arch tiny`` the tests' shape with random
weights, and ``--arch qwen3-0.6b`` a Qwen3-0.6B-shaped model with random weights (28 layers,
hidden 1024; use it on a GPU).

The baseline, measured in the same run on the same episodes: the same model generating one episode
at a time (``--batch 1``). The ratio is what batching the episodes of a step buys.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prove_core.config import load_experiment  # noqa: E402
from prove_core.env.runtime import Environments  # noqa: E402
from prove_core.logging import configure  # noqa: E402
from prove_core.model import Example, from_json, read_jsonl  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402
from prove_core.reward.core import build_reward  # noqa: E402
from prove_core.synth.pipeline import synthesize  # noqa: E402
from prove_core.train.core import task_tools  # noqa: E402

SHAPES = {
    "smollm2": {},  # the pretrained model source, not a shape
    "tiny": {"hidden_size": 128, "layers": 2, "heads": 4},
    "qwen3-0.6b": {"hidden_size": 1024, "layers": 28, "heads": 16, "intermediate_size": 3072},
}


class TimedEnvironment:
    """An ``Environment`` whose session work (open, calls, state hash, close) is timed. Episodes run
    in threads; the work is serialized by a lock (it holds the GIL anyway), so the summed times are
    wall time, not threads waiting for each other."""

    lock = threading.Lock()

    def __init__(self, env, clock: dict) -> None:
        self.env, self.clock = env, clock

    def _timed(self, name):
        fn = getattr(self.env, name)

        def run(*args, **kwargs):
            with self.lock:
                started = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    spent = time.perf_counter() - started
                    self.clock["env"] += spent
                    self.clock["call_s" if name == "call" else "session_s"] += spent
                    self.clock["calls"] += name == "call"

        return run

    def __getattr__(self, name):
        return self._timed(name) if name in ("call", "new_session", "state_hash", "close") else getattr(self.env, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=48)
    parser.add_argument("--batch", type=int, default=16, help="episodes generated together")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--arch", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--model", default="runs/quickstart/train/final",
                        help="a trained model folder (used when it exists; else --arch with random weights)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 8 episodes")
    args = parser.parse_args()
    configure(level="warning")
    import torch

    from prove_plugins.train.models.hf import HFPolicy, Sampling, play_batch
    from prove_plugins.train.models.template import chat_template
    from prove_plugins.train.models.tiny import build_tiny_model, corpus_texts, count_parameters, train_tokenizer

    episodes = 8 if args.quick else args.episodes
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    plugins = Plugins().load(autoload=False)
    with tempfile.TemporaryDirectory() as tmp:
        exp = load_experiment({"name": "b", "output_dir": tmp, "servers": [{"name": "banking"}],
                               "synth": {"examples": max(16, episodes), "plots": False, "exports": [],
                                         "cache_dir": str(Path(tmp) / "cache")}})
        synthesize(exp, plugins, echo=lambda _: None, progress=False)
        examples = [from_json(r, Example) for r in read_jsonl(Path(tmp) / "b" / "synth" / "corpus.jsonl")]
    # the prompts the quickstart trains on: the task's tools and distractors, up to 4 ([train] tools = "task")
    examples = [task_tools(e, 4) for e in examples if e.task.expected == "call"][:episodes]
    torch.manual_seed(0)
    if Path(args.model).is_dir() or args.arch == "smollm2":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from prove_plugins.train.models.sources import materialize
        from prove_plugins.train.models.template import apply_tool_settings, stop_at_turn_end

        folder = args.model if Path(args.model).is_dir() else str(materialize("smollm2-135m-instruct"))
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.padding_side = "left"
        apply_tool_settings(tokenizer, None, 300, name=folder)
        model = AutoModelForCausalLM.from_pretrained(folder).to(device)
        stop_at_turn_end(model, tokenizer)
        label = f"{folder} ({'trained' if Path(args.model).is_dir() else 'pretrained'})"
    else:
        template = chat_template(max_tool_chars=300)
        tokenizer = train_tokenizer(corpus_texts(examples, template), vocab_size=2048, template=template)
        shape = dict(SHAPES[args.arch])
        intermediate = shape.pop("intermediate_size", None)
        model = build_tiny_model(tokenizer, intermediate_size=intermediate, max_positions=8192, **shape).to(device)
        label = f"{args.arch} (random weights)"
    if device == "cuda":
        model = model.to(torch.bfloat16)
    policy = HFPolicy(model, tokenizer, registry=plugins.registry,
                      sampling=Sampling(max_new_tokens=args.max_new_tokens, temperature=1.0, max_context=8000))
    clock = {"env": 0.0, "calls": 0, "call_s": 0.0, "session_s": 0.0}
    environments = Environments(plugins.registry)
    reward = build_reward(None, plugins.registry)
    play_batch(policy, examples[:2], environments, max_batch=2)  # warm-up: kernels, seed snapshots
    # the baseline: the same model, one episode at a time, on the first episodes
    solo = examples[: max(2, min(8, len(examples) // 2))]
    policy.generate.seconds = policy.generate.tokens = 0
    play_batch(policy, solo, environments, max_batch=1)
    solo_rate = policy.generate.tokens / max(policy.generate.seconds, 1e-9)
    policy.generate.seconds = policy.generate.tokens = 0
    clock.update(env=0.0, calls=0, call_s=0.0, session_s=0.0)
    started = time.perf_counter()
    played = play_batch(policy, examples, lambda task: TimedEnvironment(environments(task), clock),
                        max_batch=args.batch)
    play_s = time.perf_counter() - started
    started = time.perf_counter()
    for episode in played:
        reward.score(episode.played.rollout)
    reward_s = time.perf_counter() - started
    gen_s, tokens = policy.generate.seconds, policy.generate.tokens
    total = play_s + reward_s
    env_s = clock["env"]
    print(f"model: {label}, {count_parameters(model) / 1e6:.1f}M parameters, on {device}; "
          f"{len(played)} episodes, {clock['calls']} tool calls, batches of {args.batch}")
    rate = tokens / max(gen_s, 1e-9)
    print(f"generation     {gen_s:8.2f} s   {rate:10.0f} generated tokens/s "
          f"(one episode at a time: {solo_rate:.0f} tokens/s on {len(solo)} episodes; batched {rate / solo_rate:.2f}x)")
    print(f"tool execution {env_s:8.3f} s   {clock['calls'] / max(clock['call_s'], 1e-9):10.0f} calls/s "
          f"(calls {clock['call_s']:.3f} s; sessions: open, final state hash, close {clock['session_s']:.3f} s)")
    print(f"reward         {reward_s:8.3f} s   {len(played) / max(reward_s, 1e-9):10.0f} rollouts/s")
    other = max(0.0, play_s - gen_s - env_s)
    print(f"other          {other:8.3f} s   (parsing, chat-template rendering, tokenization, threads)")
    print(f"environment share of rollout wall time: {(env_s + reward_s) / total:.2%} "
          f"(tool execution {env_s / total:.2%}, reward {reward_s / total:.2%}); generation {gen_s / total:.1%}")


if __name__ == "__main__":
    main()
