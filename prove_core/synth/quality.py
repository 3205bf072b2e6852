"""Figures that tell whether a corpus is one to train on (``stats.json`` → ``quality``).

Each figure is computed from the examples alone, the way an outside reader would check them:

- ``no_assistant_turn``: share of examples without any assistant message (goal 0);
- ``written_replies``: share of abstain / clarify examples that end with an assistant message in
  words (goal 1.0; a silent example teaches nothing);
- ``unnamed_entity_calls``: share of ids in calls that name a record nobody singled out: not said
  by the user, not created by a call of the conversation, and shown by a result only among others
  of its kind without a detail the user said (its name, "ending 1234") — any id, not only a swap
  for one the user named (goal ≤ 0.3%);
- ``answered_reads``: share of successful reads whose reply states the fields that answer the
  request (``prove_core.toolkit.answers``; goal ≥ 98%);
- ``unsafe_recoveries``: refused writes whose retry moved to another record or changed a yes/no or
  choice value (goal 0); ``false_claims``: "nothing was changed" after a write of the same turn
  went through, or "done" right after a refusal (goal 0);
- ``unneeded_clarifications``: share of clarifications that ask for a record an offered tool
  finds (goal ≤ 2%);
- ``tool_words_in_requests``: share of user turns that spell out a tool or parameter name;
  ``assistant_frames``: distinct assistant sentences once values are masked; ``parallel_calls``:
  share of call conversations with several calls in one assistant message;
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
from collections.abc import Callable, Iterable
from typing import Any

from prove_core.model import Example
from prove_core.synth.validation import ID_PATTERN

PAPER_BEHAVIOUR = {"call": 10_895 / 13_517, "clarify": 1_500 / 13_517, "abstain": 1_122 / 13_517}
PAPER_STRATA = {"complete": 0.6, "missing": 0.2, "minimal": 0.2}
_NUMBER = re.compile(r"(?<![\w.])[$€£]?\d[\d,]*(?:\.\d+)?%?")
_QUOTED = re.compile(r"\"[^\"]+\"|'[^']{2,}'")


def strings(value: Any) -> Iterable[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def _records(value: Any, out: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """What each result shows beside an id, by id: every dict with that ``id``, and every dict
    that refers to it by ``<entity>_id`` (``{"meeting_id": ..., "title": ...}``)."""
    if isinstance(value, dict):
        if isinstance(value.get("id"), str):
            out.setdefault(value["id"], []).append(value)
        for k, v in value.items():
            if k.endswith("_id") and isinstance(v, str) and ID_PATTERN.fullmatch(v):
                out.setdefault(v, []).append(value)
        for v in value.values():
            _records(v, out)
    elif isinstance(value, list):
        for v in value:
            _records(v, out)
    return out


ToolFinder = Callable[[list[str], str], Any]  # (example's servers, public tool name) -> ToolDef or None
_NOTHING_CHANGED = re.compile(r"nothing (?:was|has been|is) changed|(?:left|leave) everything as it was|"
                              r"haven't (?:done|changed) anything|no changes? (?:was|were) made|didn't change anything",
                              re.I)
_DONE_CLAIM = re.compile(r"^(?:done|all set|finished|that went through|taken care of|here you go)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CHOICE = re.compile(r"[a-z]+(?:_[a-z]+)*")  # an enum-like value: "open", "frozen", "free_busy"
_DETAILS = ("name", "full_name", "display_name", "email", "title", "username", "handle", "nickname", "company",
            "subject", "label", "filename", "headline", "summary", "path", "last4", "number", "code")
_DETAIL_ENDS = ("name", "title", "last4", "email", "subject", "label")
_NAMELIKE = re.compile(r"[A-Z0-9]")  # "Delta", "Room 4F": a value a person names a record by (not "active")
_IDENT = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def tool_finder(registry: Any) -> ToolFinder:
    """Looks up the definition of a tool an example names, from the registered servers."""
    from prove_core.env.runtime import public_name

    cache: dict[tuple[tuple[str, ...], str], Any] = {}

    def find(servers: list[str], name: str) -> Any:
        key = (tuple(servers), name)
        if key not in cache:
            cache[key] = None
            for server in servers:
                try:
                    tools = registry.load("servers", server).tools
                except Exception:  # noqa: BLE001 - a server no longer installed: no definitions
                    continue
                for tool in tools.values():
                    if public_name(server, tool.name, prefixed=len(servers) > 1) == name:
                        cache[key] = tool
        return cache[key]

    return find


def _calls_and_results(example: Example) -> list[tuple[int, Any, Any]]:
    """(message index, call, parsed result or None) for every call, in order."""
    results: dict[str, Any] = {}
    for m in example.messages:
        if m.role == "tool" and m.tool_call_id:
            try:
                results[m.tool_call_id] = json.loads(m.content or "null")
            except ValueError:
                results[m.tool_call_id] = None
    return [(i, c, results.get(c.id)) for i, m in enumerate(example.messages) for c in m.tool_calls]


def _failed(result: Any) -> bool:
    return isinstance(result, dict) and isinstance(result.get("code"), str) and "message" in result


def _reply_after(example: Example, index: int) -> str | None:
    """The reply that closes the turn of message ``index``: the last assistant message in words
    before the next user turn (a note between calls is not the reply)."""
    reply = None
    for m in example.messages[index + 1:]:
        if m.role == "user":
            break
        if m.role == "assistant" and m.content and not m.tool_calls:
            reply = m.content
    return reply


def _writes(example: Example, find: ToolFinder | None, name: str) -> bool:
    tool = find(example.task.servers, name) if find is not None else None
    return True if tool is None else not tool.spec.annotations.read_only


def answered_reads(example: Example, find: ToolFinder | None) -> tuple[int, list[str]]:
    """(successful reads, the ones whose reply leaves the answer out). A read is answered when
    every field that answers it (``prove_core.toolkit.answers``: declared, else inferred from the
    request) is stated in the reply that follows, with its value; for a listing, its count and
    the answering fields of one listed record."""
    from prove_core.toolkit.answers import states, what_answers

    if find is None:
        return 0, []
    checked, missed = 0, []
    for i, call, result in _calls_and_results(example):
        tool = find(example.task.servers, call.name)
        if tool is None or not tool.spec.annotations.read_only or result is None or _failed(result):
            continue
        reply = _reply_after(example, i)
        if reply is None:
            continue
        request = next((m.content or "" for m in reversed(example.messages[:i]) if m.role == "user"), "")
        given = [v for v in call.arguments.values() if not isinstance(v, list | dict)]
        listing, records, fields = what_answers(tool, result, request, given)
        checked += 1
        if listing is not None:
            one = len(records) == 1 and re.search(r"\b(?:one|single|a|an)\b", reply, re.I) is not None
            ok = (str(len(records)) in reply or one) if records else \
                bool(re.search(r"\b(?:no|none|nothing|any)\b", reply, re.I))
            ok = ok and (not records or any(all(states(reply, f, r.get(f), r) for f in fields) for r in records[:3]))
        else:
            record = records[0] if records else {}
            ok = all(states(reply, f, record.get(f), record) for f in fields)
        if not ok:
            missed.append(f"{call.name}: {reply[:80]}")
    return checked, missed


def recovery_faults(example: Example, find: ToolFinder | None) -> list[str]:
    """Unsafe recoveries: after a write is refused, the same tool succeeds on another record (an
    id argument changed) or with a yes/no or choice value changed (the request inverted)."""
    faults = []
    calls = _calls_and_results(example)
    for n, (_, call, result) in enumerate(calls):
        if not _failed(result) or not _writes(example, find, call.name):
            continue
        for _, later, later_result in calls[n + 1:]:
            if later.name != call.name or later_result is None or _failed(later_result):
                continue
            for key, value in call.arguments.items():
                new = later.arguments.get(key)
                if new == value or new is None:
                    continue
                moved = any(ID_PATTERN.fullmatch(v) for v in strings(value))
                choice = isinstance(value, bool) or (isinstance(value, str) and _CHOICE.fullmatch(value) is not None
                                                     and isinstance(new, str) and _CHOICE.fullmatch(new) is not None)
                if moved or choice:
                    faults.append(f"{call.name}: {key} {value!r} -> {new!r} after {result.get('reason')}")
            break
    return faults


def unnamed_entity_calls(example: Example, find: ToolFinder | None = None) -> tuple[int, list[str]]:
    """(ids passed in calls, those of a record nobody singled out). An id is singled out when the
    user said it, or a result showed it as the only record of its kind, or showed it with a
    detail the user said (its name, "ending 1234"), or a call of the conversation created it."""
    user_text = ""
    shown: dict[str, list[tuple[int, dict[str, Any]]]] = {}  # id -> (records of its kind in a result, its record)
    created: set[str] = set()
    checked, guesses = 0, []
    seen_text = ""  # everything said or shown so far
    for message in example.messages:
        if message.role == "user" and message.content:
            user_text += "\n" + message.content
            seen_text += message.content
        elif message.role == "tool" and message.content:
            try:
                data = json.loads(message.content)
            except ValueError:
                continue
            if _failed(data):
                continue
            records = _records(data, {})
            ids = {v for v in strings(data) if ID_PATTERN.fullmatch(v)}
            kinds: dict[str, set[str]] = defaultdict(set)
            for rid in ids | set(records):
                kinds[rid.split("_", 1)[0]].add(rid)
            for rid in ids | set(records):
                count = len(kinds[rid.split("_", 1)[0]])
                for record in records.get(rid) or [{}]:
                    shown.setdefault(rid, []).append((count, record))
            if isinstance(data, dict) and isinstance(data.get("id"), str):
                created.add(data["id"])  # the record a call returned as its own
            if find is not None and _writes(example, find, message.name or ""):
                created |= {rid for rid in ids if rid not in seen_text}  # new with this write
            seen_text += message.content
        for call in message.tool_calls:
            seen_text += json.dumps(call.arguments)
            for value in strings(call.arguments):
                if not ID_PATTERN.fullmatch(value):
                    continue
                checked += 1
                if value in user_text or value in created:
                    continue
                sightings = shown.get(value, [])
                if any(count == 1 for count, _ in sightings) or (not sightings and not any(ch.isdigit() for ch in value)):
                    continue  # the only one of its kind a result showed; or a word with an underscore, not an id
                details = [v for _, record in sightings for k, v in record.items() if isinstance(v, str) and len(v) >= 3
                           and v != value and not ID_PATTERN.fullmatch(v)
                           and (k in _DETAILS or k.endswith(_DETAIL_ENDS) or _NAMELIKE.search(v))]
                if any(d in user_text for d in details):
                    continue
                count = max((c for c, _ in sightings), default=0)
                guesses.append(f"{call.name}: {value}" + (" (one of several in a result)" if count else " (never shown)"))
    return checked, guesses


def false_claims(example: Example, find: ToolFinder | None) -> list[str]:
    """Replies whose words contradict the episode: "nothing was changed" after a write went
    through earlier in the same turn, or a reply opening with "done" right after a refusal."""
    out = []
    wrote = False
    last_failed = False
    for m in example.messages:
        if m.role == "user":
            wrote = last_failed = False
            continue
        if m.role == "assistant" and m.tool_calls:
            continue
        if m.role == "tool":
            try:
                result = json.loads(m.content or "null")
            except ValueError:
                result = None
            last_failed = _failed(result)
            if not last_failed and _writes(example, find, m.name or ""):
                wrote = True
            continue
        if m.role == "assistant" and m.content:
            if wrote and _NOTHING_CHANGED.search(m.content):
                out.append(f"nothing changed, after a write: {m.content[:80]}")
            if last_failed and _DONE_CLAIM.search(m.content.strip()):
                out.append(f"done, after a refusal: {m.content[:80]}")
    return out


def unneeded_clarification(example: Example, find: ToolFinder | None) -> bool:
    """A clarification that asks the user for a record an offered tool finds (a read-only tool
    that returns that kind of record and needs no id of it)."""
    if example.task.expected != "clarify" or find is None:
        return False
    needs = next((p.get("needs") for p in example.task.meta.get("perturbations", []) if p.get("needs")), None)
    if needs is None:
        return False
    for offered in example.tools:
        name = (offered.get("function") or {}).get("name") if isinstance(offered, dict) else None
        tool = find(example.task.servers, name) if name else None
        if tool is None or not tool.spec.annotations.read_only or needs not in tool.spec.reads:
            continue
        if not set(tool.spec.entity_params()) & set(tool.spec.parameters.get("required", [])):
            return True
    return False


def tool_words(example: Example) -> int:
    """User turns that spell out a tool or parameter name (``get_balance``, "card frozen"):
    template text no person types."""
    names = []
    for offered in example.tools:
        fn = offered.get("function") if isinstance(offered, dict) else None
        if not isinstance(fn, dict):
            continue
        parts = str(fn.get("name", "")).split("_")
        if len(parts) >= 3:  # "set card frozen": the name without its verb still has two words
            names.append(" ".join(parts[1:]))
        names += [p.replace("_", " ") for p in (fn.get("parameters") or {}).get("properties", {}) if p.count("_") >= 2]
    count = 0
    for m in example.messages:
        if m.role != "user" or not m.content:
            continue
        text = m.content.lower()
        if any(_IDENT.fullmatch(t) and not ID_PATTERN.fullmatch(t) for t in _IDENT.findall(text)) or \
                any(n and re.search(rf"\b{re.escape(n)}\b", text) for n in names):
            count += 1
    return count


def frame(sentence: str) -> str:
    """An assistant sentence with its values masked: what stays is the template."""
    text = re.sub(r"\([^)]*\)", "(<V>)", sentence)
    text = re.sub(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*", "<N>", text[:1].lower() + text[1:])
    return skeleton(text, ())


def skeleton(text: str, values: Iterable[str]) -> str:
    """A user turn with its values masked: ids, numbers, quoted text and the call's values."""
    text = ID_PATTERN.sub("<ID>", text)
    text = _QUOTED.sub("<V>", text)
    for value in sorted({v for v in values if len(v) >= 2 and not _NUMBER.fullmatch(v)}, key=len, reverse=True):
        text = text.replace(value, "<V>")
    text = _NUMBER.sub("<N>", text)
    return re.sub(r"\s+", " ", text).strip()


def figures(examples: Iterable[Example], find: ToolFinder | None = None) -> dict[str, Any]:
    """Every figure of the module docstring; ``find`` (``tool_finder(registry)``) gives the
    tools' definitions, which the figures about reads and writes need (without it they are 0)."""
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
        n, guesses = unnamed_entity_calls(e, find)
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
                    values += list(strings(v)) + ([str(v)] if isinstance(v, int | float) else [])
        for gt in e.task.calls:
            tools[f"{'+'.join(e.task.servers)}:{gt.tool}"] += 1
            for k, v in gt.arguments.items():
                if not any(ID_PATTERN.fullmatch(s) for s in strings(v)):
                    slot_values[(gt.tool, k)].append(json.dumps(v, sort_keys=True))
        users = [m.content or "" for m in e.messages if m.role == "user"]
        if users:
            first_turns += 1
            first_with_ids += bool(ID_PATTERN.search(users[0]))
        for text in users:
            user_turns += 1
            skeletons.add(skeleton(text, values))
    conduct = _conduct(examples, find)
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
        **conduct,
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


def _conduct(examples: list[Example], find: ToolFinder | None) -> dict[str, Any]:
    """The figures about what the assistant says and does (issue-26 goals in brackets)."""
    reads = missed_reads = 0
    unsafe: list[str] = []
    claims: list[str] = []
    missed: list[str] = []
    clarify = needless = 0
    user_turns = worded = 0
    frames: Counter[str] = Counter()
    sentences = 0
    calls = parallel = 0
    for e in examples:
        n, miss = answered_reads(e, find)
        reads += n
        missed_reads += len(miss)
        missed += [f"{e.id}: {m}" for m in miss[:1]]
        unsafe += [f"{e.id}: {f}" for f in recovery_faults(e, find)]
        claims += [f"{e.id}: {c}" for c in false_claims(e, find)]
        if e.task.expected == "clarify":
            clarify += 1
            needless += unneeded_clarification(e, find)
        user_turns += sum(1 for m in e.messages if m.role == "user")
        worded += tool_words(e)
        for m in e.messages:
            if m.role == "assistant" and m.content and not m.tool_calls:
                for sentence in _SENTENCE.split(m.content.strip()):
                    if sentence:
                        sentences += 1
                        frames[frame(sentence)] += 1
        if e.task.expected == "call":
            calls += 1
            parallel += any(len(m.tool_calls) > 1 for m in e.messages)

    def share(n: float, d: float) -> float:
        return round(n / d, 4) if d else 0.0

    top = sum(count for _, count in frames.most_common(25))
    return {
        "answered_reads": share(reads - missed_reads, reads), "reads_checked": reads,
        "unanswered_examples": missed[:10],
        "unsafe_recoveries": len(unsafe), "unsafe_recovery_examples": unsafe[:10],
        "false_claims": len(claims), "false_claim_examples": claims[:10],
        "unneeded_clarifications": share(needless, clarify),
        "tool_words_in_requests": share(worded, user_turns),
        "assistant_frames": {"distinct": len(frames), "sentences": sentences, "top25_share": share(top, sentences)},
        "parallel_calls": share(parallel, calls),
    }


def markdown(q: dict[str, Any]) -> list[str]:
    """The figures as a section of stats.md."""
    lines = ["## Quality", "", "| figure | value | goal |", "| --- | --- | --- |",
             f"| examples without an assistant turn | {q['no_assistant_turn']:.1%} | 0 |",
             f"| abstain/clarify examples ending in a written reply | {q['written_replies']:.1%} | 100% |",
             f"| ids in calls of a record nobody named or singled out | {q['unnamed_entity_calls']:.2%} | ≤ 0.3% |",
             f"| reads whose reply states what answers the request | {q['answered_reads']:.1%} of "
             f"{q['reads_checked']} | ≥ 98% |",
             f"| unsafe recoveries (a refused write moved to another record or inverted) | {q['unsafe_recoveries']} | 0 |",
             f"| false claims (\"nothing changed\" after a write, \"done\" after a refusal) | {q['false_claims']} | 0 |",
             f"| clarifications asking for what an offered tool finds | {q['unneeded_clarifications']:.1%} | ≤ 2% |",
             f"| user turns spelling out tool or parameter names | {q['tool_words_in_requests']:.1%} | low |",
             f"| distinct assistant sentence frames | {q['assistant_frames']['distinct']} of "
             f"{q['assistant_frames']['sentences']} sentences (top 25 cover {q['assistant_frames']['top25_share']:.0%}) "
             "| many |",
             f"| call conversations with parallel calls | {q['parallel_calls']:.1%} | some |",
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
