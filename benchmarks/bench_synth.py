"""Synthesis throughput: validated conversations per second, one process vs all cores.

Runs the programmatic teacher on banking and shopping (``--all-servers``: every server) twice — ``workers=1``
and ``workers=<cores>`` — into temporary folders, checks both corpora are byte-identical, and
prints examples/s, the speed-up ratio, the replay-validation share of the time, and the
projected time for a paper-scale corpus (13,500 examples; goal: under 3 minutes).

    python benchmarks/bench_synth.py              # 2,000 call conversations per run
    python benchmarks/bench_synth.py --quick      # 200 (a smoke run)
    python benchmarks/bench_synth.py --examples 13500 --only-parallel --all-servers   # paper scale
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prove_core.config import load_experiment  # noqa: E402
from prove_core.logging import configure  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402
from prove_core.synth.pipeline import synthesize  # noqa: E402

PAPER_SCALE = 13_500


def run(examples: int, workers: int, where: Path, cache: Path, servers: list[str]) -> dict:
    exp = load_experiment({
        "name": "bench", "output_dir": str(where), "stages": ["synth"],
        "servers": [{"name": s} for s in servers],
        "synth": {"examples": examples, "workers": workers, "plots": False, "exports": [],
                  "cache_dir": str(cache)},
    })
    plugins = Plugins().load(autoload=False)
    started = time.perf_counter()
    report = synthesize(exp, plugins, echo=lambda _: None, progress=False)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "examples": report["examples"],
            "calls": report["by_behaviour"].get("call", 0), "reached_target": report["reached_target"],
            "per_s": round(report["examples"] / seconds, 1), "validation_share": report["validation_share"],
            "corpus": (where / "bench" / "synth" / "corpus.jsonl").read_bytes()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=2000, help="call conversations per run")
    parser.add_argument("--quick", action="store_true", help="200 conversations (smoke run)")
    parser.add_argument("--only-parallel", action="store_true", help="skip the single-process run")
    parser.add_argument("--all-servers", action="store_true", help="every registered server, not just the two bundled first")
    parser.add_argument("--json", type=Path, help="also write the results here")
    ns = parser.parse_args()
    configure(level="warning")
    examples = 200 if ns.quick else ns.examples
    cores = os.cpu_count() or 1
    servers = Plugins().load(autoload=False).registry.names("servers") if ns.all_servers else ["banking", "shopping"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        cache = tmp_path / "cache"
        run(10, 1, tmp_path / "warm", cache, servers)  # graphs labelled and cached once, outside the timing
        parallel = run(examples, cores, tmp_path / "parallel", cache, servers)
        results = {"examples_target": examples, "cores": cores, "servers": servers, "parallel": parallel}
        if not ns.only_parallel:
            single = run(examples, 1, tmp_path / "single", cache, servers)
            results["single"] = single
            results["identical"] = single["corpus"] == parallel["corpus"]
            results["speedup"] = round(single["seconds"] / parallel["seconds"], 2)
    for key in ("single", "parallel"):
        if key in results:
            r = results[key]
            label = "1 process" if key == "single" else f"{cores} processes"
            print(f"{label:<12} {r['examples']:>6} examples ({r['calls']} call conversations"
                  f"{'' if r['reached_target'] else ', target not reached'}) in {r['seconds']:>7} s = "
                  f"{r['per_s']:>7} examples/s (replay validation {r['validation_share']:.0%} of the time)")
    if "speedup" in results:
        print(f"speed-up     {results['speedup']}x with {cores} processes; corpora identical: {results['identical']}")
    best = results["parallel"]["per_s"]
    projected = PAPER_SCALE / best
    print(f"paper scale  {PAPER_SCALE:,} examples projected at {projected:.0f} s ({projected / 60:.1f} min; goal < 3 min)")
    if ns.json:
        for key in ("single", "parallel"):
            results.get(key, {}).pop("corpus", None)
        ns.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
