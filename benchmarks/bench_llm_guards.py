"""The LLM teacher's guards on a real corpus: how often they refuse good text, and how often bad
text gets through.

Synthesizes a corpus with the programmatic teacher (banking and shopping; ``--all-servers``:
every server), then for every text turn of it asks the guards (``plugins/synth/guards.py``) about:

- the drafted turn itself, as its own rewrite, and written otherwise with the same facts (another
  opener, its sentences reordered, its dates in words, thousands separated) — a refusal here is a
  false alarm (goal 0);
- the drafted turn with one thing a careless model does to it — an invented name or amount, a
  number changed into one that contains it ("40" -> "1409"), an id or a date that is not in the
  conversation, a negated request, success claimed after a failed call, failure or "nothing was
  changed" claimed after a successful one — an acceptance here is a miss (goal 0).

    python benchmarks/bench_llm_guards.py                   # 300 call conversations
    python benchmarks/bench_llm_guards.py --all-servers --examples 2000
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prove_core.model import Example, from_json, read_jsonl  # noqa: E402
from prove_core.synth.validation import ID_PATTERN  # noqa: E402
from prove_plugins.synth.guards import UNCHANGED, check_turn, language, last_results, support_for  # noqa: E402

NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def corruptions(text: str, role: str, before: list[dict[str, Any]]) -> Iterable[tuple[str, str]]:
    """(kind, bad text) pairs for one drafted turn; a corruption the conversation happens to
    support (the id, name or number exists after all) is not offered."""
    support = support_for(before)
    support.add_text(text)
    if "maria gonzalez" not in support.joined:
        yield "invented name", text + " It was approved by Maria Gonzalez."
    yield "invented amount", text + " The new balance is $1,234,567.89."
    if not any(d[1:] == (7, 19) for d in support.dates):
        yield "invented date", text + " It is due on July 19, 2031."
    number = NUMBER.search(text)
    if number is not None:
        grown = f"1{number.group(0)}9"  # contains the true value: "40" -> "1409"
        if not any(n == int(grown) for n in support.numbers):
            yield "changed number", text[:number.start()] + grown + text[number.end():]
    ident = ID_PATTERN.search(text)
    if ident is not None:
        prefix, rest = ident.group(0).split("_", 1)
        other = f"{prefix}_{rest[::-1]}" if rest[::-1] != rest else f"{prefix}_zz{rest[2:]}"
        if other not in support.ids:
            yield "changed id", text[:ident.start()] + other + text[ident.end():]
    if role == "user":
        yield "negated request", "Actually, please don't do this: " + text[0].lower() + text[1:]
        return
    outcomes = last_results(before)
    if outcomes and all(outcomes):
        yield "success after a failure", "All set, that went through. " + text
    elif outcomes and not any(outcomes):
        yield "failure after a success", "Unfortunately that failed. " + text
        if not UNCHANGED.search(text):  # a draft that already says so ("it was already set; nothing changed")
            yield "nothing changed after a success", text + " Nothing was changed."


ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b(?!T)")
BIG = re.compile(r"(?<![\w.,-])(\d{4,})(?![\w.,-])")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def paraphrases(text: str) -> Iterable[tuple[str, str]]:
    """(kind, good text) pairs: the same facts written otherwise, which the guards must keep."""
    yield "another opener", "Sure — " + text[0].lower() + text[1:] if not text[:2].isupper() else "Sure — " + text
    sentences = re.split(r"(?<=[.!?])\s+", text.strip())
    if len(sentences) > 1 and '"' not in text:  # a quoted title may hold sentences of its own
        yield "sentences reordered", " ".join(reversed(sentences))
    if ISO_DATE.search(text):
        yield "dates in words", ISO_DATE.sub(lambda m: f"{MONTHS[int(m[2]) - 1]} {int(m[3])}, {m[1]}", text)
    if BIG.search(text) and '"' not in text:  # not inside a title, not a year, not a code
        yield "thousands separated", BIG.sub(lambda m: m[1] if m[1].startswith("0") or 1900 <= int(m[1]) <= 2100
                                             else f"{int(m[1]):,}", text)


def measure(examples: Iterable[Example]) -> dict[str, Any]:
    turns, false_alarms, tried, accepted = 0, Counter[str](), Counter[str](), Counter[str]()
    good_tried, good_refused = Counter[str](), Counter[str]()
    missed: dict[str, str] = {}
    alarms: dict[str, list[str]] = {}
    started = time.perf_counter()
    checks = 0
    for example in examples:
        messages = [m.to_openai() for m in example.messages]
        lang = language(" ".join(m.content for m in example.messages if m.role in ("user", "assistant") and m.content))
        for i, m in enumerate(example.messages):
            if m.role not in ("user", "assistant") or not m.content or m.tool_calls:
                continue
            turns += 1
            before: list[dict[str, Any]] = messages[:i]

            checks += 1
            for problem in check_turn(m.content, m.content, m.role, before, language_of_conversation=lang):
                false_alarms[problem.kind] += 1
                alarms.setdefault(problem.kind, []).append(f"{m.content[:300]} -- {problem}")
            for kind, good in paraphrases(m.content):
                checks += 1
                good_tried[kind] += 1
                problems = check_turn(good, m.content, m.role, before, language_of_conversation=lang)
                if problems:
                    good_refused[kind] += 1
                    alarms.setdefault(kind, []).append(f"{good[:300]} -- {problems[0]}")
            for kind, bad in corruptions(m.content, m.role, before):
                checks += 1
                tried[kind] += 1
                if not check_turn(bad, m.content, m.role, before, language_of_conversation=lang):
                    accepted[kind] += 1
                    missed.setdefault(kind, bad)
    seconds = time.perf_counter() - started
    return {"turns": turns, "drafts_refused": sum(false_alarms.values()), "refused_why": dict(false_alarms),
            "examples_of_false_alarms": {k: v[:5] for k, v in alarms.items()},
            "good_tried": dict(good_tried), "good_refused": dict(good_refused),
            "bad_tried": dict(tried), "bad_accepted": dict(accepted), "examples_of_misses": missed,
            "ms_per_check": round(1000 * seconds / max(1, checks), 3)}


def _synthesize(examples: int, servers: list[str], where: Path) -> Path:
    from prove_core.config import load_experiment
    from prove_core.plugin.manager import Plugins
    from prove_core.synth.pipeline import synthesize

    plugins = Plugins().load(autoload=False)
    exp = load_experiment({"name": "bench", "output_dir": str(where), "stages": ["synth"],
                           "servers": [{"name": s} for s in servers],
                           "synth": {"examples": examples, "plots": False, "exports": [], "workers": 0,
                                     "cache_dir": str(where / "cache")}})
    synthesize(exp, plugins, echo=lambda _: None, progress=False)
    return where / "bench" / "synth" / "corpus.jsonl"


def main(argv: list[str] | None = None, *, emit: Callable[[str], None] = print) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--all-servers", action="store_true")
    parser.add_argument("--corpus", type=Path, help="measure an existing corpus.jsonl instead")
    args = parser.parse_args(argv)
    corpus = args.corpus
    if corpus is None:
        from prove_core.logging import configure
        from prove_core.plugin.manager import Plugins

        configure(level="warning")
        servers = sorted(Plugins().load(autoload=False).registry.names("servers")) if args.all_servers \
            else ["banking", "shopping"]
        corpus = _synthesize(args.examples, servers, Path(tempfile.mkdtemp(prefix="bench-guards-")))
    report = measure(from_json(r, Example) for r in read_jsonl(corpus))
    emit(json.dumps(report, indent=2))
    tried, accepted = sum(report["bad_tried"].values()), sum(report["bad_accepted"].values())
    good, refused = sum(report["good_tried"].values()), sum(report["good_refused"].values())
    emit(f"drafted turns refused as their own rewrite: {report['drafts_refused']} of {report['turns']} (goal 0); "
         f"good rewrites refused: {refused} of {good} (goal 0); bad rewrites accepted: {accepted} of {tried} (goal 0)")
    return report


if __name__ == "__main__":
    main()
