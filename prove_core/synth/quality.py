"""Figures that tell whether a corpus is one to train on (``stats.json`` → ``quality``).

Each figure is computed from the examples alone, the way an outside reader would check them:

- ``no_assistant_turn``: share of examples without any assistant message (goal 0);
- ``written_replies``: share of abstain / clarify examples that end with an assistant message in
  words (goal 1.0; a silent example teaches nothing);
- ``unnamed_entity_calls``: share of calls that use an id of an entity kind the user named, that
  is not one the user named, and that the user did not single out by its name or other details
  (a guess; goal ≤ 1%);
- ``slots``: argument slots (tool, non-id parameter) used at least 5 times, and how many of them
  take more than one value;
- ``skeletons``: distinct user turns once the values in them are masked, per user turn;
- ``first_turn_ids``: share of first user turns that carry a raw id;
- ``behaviour`` / ``strata`` / ``outcomes``: the mix, beside the paper's;
- ``tools``: calls per tool and the skew (most used tool over the median);
- ``mistakes``: calls the schema rejected, and how many are marked as mistakes (out of the loss).
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from prove_core.model import Example
from prove_core.synth.validation import ID_PATTERN

PAPER_BEHAVIOUR = {"call": 10_895 / 13_517, "clarify": 1_500 / 13_517, "abstain": 1_122 / 13_517}
PAPER_STRATA = {"complete": 0.6, "missing": 0.2, "minimal": 0.2}
_NUMBER = re.compile(r"(?<![\w.])[$€£]?\d[\d,]*(?:\.\d+)?%?")
_QUOTED = re.compile(r"\"[^\"]+\"|'[^']{2,}'")


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _records(value: Any, out: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What each result shows beside an id: the dict with that ``id``, or else a dict that refers
    to it by ``<entity>_id`` (``{"meeting_id": ..., "title": ...}``), by id."""
    if isinstance(value, dict):
        if isinstance(value.get("id"), str):
            out[value["id"]] = value
        for k, v in value.items():
            if k.endswith("_id") and isinstance(v, str) and ID_PATTERN.fullmatch(v):
                out.setdefault(v, value)
        for v in value.values():
            _records(v, out)
    elif isinstance(value, list):
        for v in value:
            _records(v, out)
    return out


def unnamed_entity_calls(example: Example) -> tuple[int, list[str]]:
    """(ids passed in calls, the ones that are guesses) for one example."""
    user_text = ""
    seen: dict[str, dict[str, Any]] = {}
    checked, guesses = 0, []
    for message in example.messages:
        if message.role == "user" and message.content:
            user_text += "\n" + message.content
        elif message.role == "tool" and message.content:
            try:
                _records(json.loads(message.content), seen)
            except ValueError:
                pass
        for call in message.tool_calls:
            for value in _strings(call.arguments):
                if not ID_PATTERN.fullmatch(value):
                    continue
                checked += 1
                kind = value.split("_", 1)[0] + "_"
                named = {t for t in ID_PATTERN.findall(user_text) if t.startswith(kind)}
                if not named or value in named:
                    continue
                record = seen.get(value, {})
                details = [v for v in record.values() if isinstance(v, str) and len(v) >= 4 and v != value]
                if any(d in user_text for d in details):
                    continue  # the user singled it out ("the savings account ending 1234")
                guesses.append(f"{call.name}: {value} (the user named {sorted(named)})")
    return checked, guesses


def skeleton(text: str, values: Iterable[str]) -> str:
    """A user turn with its values masked: ids, numbers, quoted text and the call's values."""
    text = ID_PATTERN.sub("<ID>", text)
    text = _QUOTED.sub("<V>", text)
    for value in sorted({v for v in values if len(v) >= 2 and not _NUMBER.fullmatch(v)}, key=len, reverse=True):
        text = text.replace(value, "<V>")
    text = _NUMBER.sub("<N>", text)
    return re.sub(r"\s+", " ", text).strip()


def figures(examples: Iterable[Example]) -> dict[str, Any]:
    examples = list(examples)
    total = len(examples)
    behaviour: Counter[str] = Counter(e.task.expected for e in examples)
    calls_examples = [e for e in examples if e.task.expected == "call"]
    replies = [e for e in examples if e.task.expected in ("abstain", "clarify")]
    written = [e for e in replies if e.messages and e.messages[-1].role == "assistant"
               and (e.messages[-1].content or "").strip() and not e.messages[-1].tool_calls]
    checked = guessed = 0
    guess_examples: list[str] = []
    slot_values: dict[tuple[str, str], list[str]] = defaultdict(list)
    tools: Counter[str] = Counter()
    skeletons, first_turns, first_with_ids, user_turns = set(), 0, 0, 0
    rejected = marked = 0
    for e in examples:
        n, guesses = unnamed_entity_calls(e)
        checked += n
        guessed += len(guesses)
        if guesses and len(guess_examples) < 10:
            guess_examples.append(f"{e.id}: {guesses[0]}")
        values = []
        results = {m.tool_call_id: m.content or "" for m in e.messages if m.role == "tool"}
        for m in e.messages:
            for c in m.tool_calls:
                marked += m.mistake
                rejected += '"SCHEMA_VIOLATION"' in results.get(c.id, "")
                for v in c.arguments.values():
                    values += list(_strings(v)) + ([str(v)] if isinstance(v, int | float) else [])
        for gt in e.task.calls:
            tools[f"{'+'.join(e.task.servers)}:{gt.tool}"] += 1
            for k, v in gt.arguments.items():
                if not any(ID_PATTERN.fullmatch(s) for s in _strings(v)):
                    slot_values[(gt.tool, k)].append(json.dumps(v, sort_keys=True))
        users = [m.content or "" for m in e.messages if m.role == "user"]
        if users:
            first_turns += 1
            first_with_ids += bool(ID_PATTERN.search(users[0]))
        for text in users:
            user_turns += 1
            skeletons.add(skeleton(text, values))
    used_slots = {k: v for k, v in slot_values.items() if len(v) >= 5}
    varied = {k: len(set(v)) for k, v in used_slots.items() if len(set(v)) > 1}
    counts = sorted(tools.values())
    strata = Counter(e.task.meta.get("stratum", "?") for e in calls_examples if not e.id.endswith("-clarify"))
    outcomes = Counter(e.task.meta.get("outcome", "?") for e in calls_examples)

    def share(n: float, d: float) -> float:
        return round(n / d, 4) if d else 0.0

    return {
        "examples": total,
        "no_assistant_turn": share(sum(not any(m.role == "assistant" for m in e.messages) for e in examples), total),
        "written_replies": share(len(written), len(replies)),
        "unnamed_entity_calls": share(guessed, checked),
        "unnamed_entity_examples": guess_examples,
        "slots": {"used_5_times": len(used_slots), "with_several_values": len(varied),
                  "share_varied": share(len(varied), len(used_slots)),
                  "median_distinct": statistics.median([len(set(v)) for v in used_slots.values()]) if used_slots else 0},
        "skeletons": {"distinct": len(skeletons), "user_turns": user_turns, "share": share(len(skeletons), user_turns)},
        "first_turn_ids": share(first_with_ids, first_turns),
        "behaviour": {k: share(behaviour.get(k, 0), total) for k in PAPER_BEHAVIOUR},
        "paper_behaviour": {k: round(v, 4) for k, v in PAPER_BEHAVIOUR.items()},
        "strata": {k: share(strata.get(k, 0), sum(strata.values())) for k in PAPER_STRATA},
        "paper_strata": PAPER_STRATA,
        "outcomes": dict(outcomes),
        "mistakes": {"schema_rejected_calls": rejected, "marked": marked},
        "tools": {"calls": dict(tools.most_common()), "distinct": len(tools),
                  "skew": round(counts[-1] / statistics.median(counts), 2) if counts else 0.0},
    }


def markdown(q: dict[str, Any]) -> list[str]:
    """The figures as a section of stats.md."""
    lines = ["## Quality", "", "| figure | value | goal |", "| --- | --- | --- |",
             f"| examples without an assistant turn | {q['no_assistant_turn']:.1%} | 0 |",
             f"| abstain/clarify examples ending in a written reply | {q['written_replies']:.1%} | 100% |",
             f"| calls on an entity the user did not name | {q['unnamed_entity_calls']:.2%} | ≤ 1% |",
             f"| non-id slots used ≥ 5 times with several values | {q['slots']['with_several_values']}/"
             f"{q['slots']['used_5_times']} (median {q['slots']['median_distinct']} values) | all |",
             f"| distinct user-turn skeletons (values masked) | {q['skeletons']['distinct']} of "
             f"{q['skeletons']['user_turns']} turns | many |",
             f"| first user turns with a raw id | {q['first_turn_ids']:.1%} | people also use names |",
             f"| schema-rejected calls marked as mistakes (out of the loss) | {q['mistakes']['marked']}/"
             f"{q['mistakes']['schema_rejected_calls']} | all |",
             f"| tool skew (most used / median calls) | {q['tools']['skew']} over {q['tools']['distinct']} tools | low |",
             "", "| behaviour | corpus | paper |", "| --- | --- | --- |"]
    lines += [f"| {k} | {q['behaviour'][k]:.1%} | {q['paper_behaviour'][k]:.1%} |" for k in q["behaviour"]]
    lines += ["", "| stratum | corpus | paper |", "| --- | --- | --- |"]
    lines += [f"| {k} | {q['strata'][k]:.1%} | {q['paper_strata'][k]:.0%} |" for k in q["strata"]]
    lines += ["", "Outcomes of call conversations: " + ", ".join(f"{k} {v}" for k, v in sorted(q["outcomes"].items())), ""]
    return lines
