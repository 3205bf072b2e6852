"""Reading the assistant's words without a judge model (docs/reward.md, "What the reply checks
can and cannot see"): which sentences claim that work was done, report a failure or say nothing
changed; whether a reply asks or declines, and whether it names what it asks for or what it cannot
do (the task's *subject*); which ids and numbers it states.

All of it is patterns over sentences and clauses, so it reads the common ways of saying these
things in English; the docs list what it cannot see.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import attrs

from prove_core.model import Task


def _phrases(*patterns: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(patterns) + r")\b", re.IGNORECASE)


# A clause that claims the work is done: a completion word, "has been <done to it>", "I've / I
# <past tense verb>", "here is your ...", stated as a fact: not negated ("nothing has been
# changed"), not conditional or future ("I'll let you know once it's done"), not a question, in a
# sentence that reports no refusal ("Unfortunately, it has been blocked."). Verbs that only
# acknowledge the request ("I've noted it", "I understood") claim nothing.
_ACKNOWLEDGE = r"(?!(?:not|receiv|gather|assum|ask|wonder|guess|want|need|request|proceed|exceed|listen|miss)ed\b)"
_CLAIM = _phrases(
    r"done", r"all set", r"taken care of", r"complete", r"completed", r"finished", r"succeeded", r"successfully",
    r"confirmed", r"processed", r"approved", r"booked", r"cancell?ed", r"scheduled", r"updated", r"changed",
    r"went through", r"gone through", r"(?:has|have|had|was|were) been \w+", r"(?:here|there) you go",
    r"(?:i|we)(?:'ve| have| had| just| already)* " + _ACKNOWLEDGE + r"\w+ed",
    r"(?:i|we)(?:'ve| have| had| just| already)* (?:sent|paid|made|put|set|froze|frozen|moved|got|gave|given|took|taken|"
    r"wrote|written|found|booked|bought|sold|left|kept|built|ran|run|did)",
    r"here(?:'s| is| are) (?:your|the)",
)
_NEGATED = _phrases(r"not", r"no", r"never", r"nothing", r"none", r"neither", r"nor", r"cannot", r"unable", r"without",
                    r"unfortunately", r"failed", r"refused", r"rejected", r"\w+n't")
_CONDITIONAL = _phrases(r"can", r"could", r"will", r"\w+'ll", r"would", r"should", r"shall", r"may", r"might",
                        r"going to", r"once", r"if", r"when", r"after", r"before", r"as soon as", r"need", r"needs",
                        r"want", r"wants", r"let me know")
_QUESTION = _phrases(r"let me know", r"tell me", r"need to know", r"want to know", r"confirm", r"specify", r"clarify",
                     r"i (?:just |still |first )?need (?:the|your|a|an|more|some|to know)",
                     r"(?:please|could you|can you|would you) (?:tell|give|share|provide|send|say|name)")
_DECLINE = _phrases(r"\w+n't", r"cannot", r"can not", r"unable", r"not able", r"no way", r"not possible", r"impossible",
                    r"not (?:something|supported|available)", r"outside (?:what|of|my)", r"beyond (?:what|my)",
                    r"none of (?:the|my) tools", r"only (?:work|cover|help|handle|do|support)", r"limited to",
                    r"sorry", r"afraid")
# Why it cannot be done, when the reason is that no tool covers the request.
_NO_TOOL = _phrases(r"none of (?:the|my) tools", r"no tools?", r"(?:don't|do not) have (?:a|any|the) (?:tool|way|function)",
                    r"(?:my|the|these|available) tools (?:only|don't|do not|can't|cannot)",
                    r"outside (?:what|of|my)", r"beyond (?:what|my)", r"only (?:work|cover|help|handle|support)",
                    r"limited to", r"not something (?:i|my tools)", r"isn't something", r"not (?:supported|available)")
_REFUSED = _phrases(r"unfortunately", r"cannot", r"can't", r"couldn't", r"unable", r"not able", r"wasn't able",
                    r"weren't able", r"failed", r"refused", r"rejected")
_FAILURE = _phrases(r"(?:didn't|did not|hasn't|has not|wasn't|was not) (?:go through|work|succeed|complete|possible)",
                    r"failed", r"was refused", r"were refused", r"was rejected", r"were rejected", r"couldn't",
                    r"could not", r"wasn't able", r"was not able", r"weren't able", r"unable to", r"went wrong",
                    r"hit a problem", r"an error")
_UNCHANGED = _phrases(r"nothing (?:has |was |got )?(?:been )?(?:changed|done|touched|modified)",
                      r"no changes? (?:was |were |has been |have been )?made", r"(?:left|kept) everything as it was",
                      r"(?:haven't|have not|didn't|did not) (?:done|changed|touched|made) anything",
                      r"everything is (?:as it was|unchanged)", r"nothing changed")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = re.compile(r"\s*[,;:\u2014\u2013]\s*|\s+-\s+|\s+(?:and|but|so|then)\s+", re.IGNORECASE)


def _normal(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(_normal(text)) if s.strip()]


def completion_claims(text: str) -> list[str]:
    """The sentences of ``text`` that state work was done (see ``_CLAIM``)."""
    claims = []
    for sentence in sentences(text):
        if _REFUSED.search(sentence):
            continue
        if any(_CLAIM.search(clause) and not clause.endswith("?") and not _NEGATED.search(clause)
               and not _CONDITIONAL.search(clause) for clause in _CLAUSE.split(sentence)):
            claims.append(sentence)
    return claims


def failure_claims(text: str) -> list[str]:
    """The sentences of ``text`` that report a failure ("it didn't go through", "I couldn't ...")."""
    return [s for s in sentences(text) if not s.endswith("?") and _FAILURE.search(s) and not _CONDITIONAL_FAILURE.search(s)]


_CONDITIONAL_FAILURE = _phrases(r"if (?:it|that|this) (?:fails|failed)", r"in case")


def unchanged_claims(text: str) -> list[str]:
    """The sentences of ``text`` that say nothing was changed ("Nothing has been changed.")."""
    return [s for s in sentences(text) if _UNCHANGED.search(s)]


def asks(text: str) -> bool:
    """Does ``text`` ask the user for something: a question mark, or "let me know / tell me / I
    need to know / could you give ..."?"""
    text = _normal(text)
    return "?" in text or bool(_QUESTION.search(text))


def declines(text: str) -> bool:
    """Does ``text`` decline or state an inability ("I can't", "that's outside what I can do",
    "none of my tools", "sorry")?"""
    return bool(_DECLINE.search(_normal(text)))


def says_no_tool_covers_it(text: str) -> bool:
    """Does ``text`` give the reason a request is impossible here: no tool covers it?"""
    return bool(_NO_TOOL.search(_normal(text)))


# -- the task's subject ---------------------------------------------------------------------------

_STOP = frozenset("""a an and any are as at be by can each for from has have in is it its of on one only or part
that the their them these this those to when where which who whose will with id ids acting same given number
value values list lists find get set fails returns return name new this""".split())


def words(text: str) -> set[str]:
    """Content words of ``text`` (lower case, singular-ish, stop words and short words dropped)."""
    out = set()
    for word in re.findall(r"[a-z]+", text.replace("_", " ").lower()):
        if len(word) >= 3 and word not in _STOP:
            out.add(_stem(word))
    return out


def _stem(word: str) -> str:
    for suffix in ("ies", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


@attrs.frozen
class Subject:
    """What a clarify/abstain reply should name: ``what`` in words for the explanation, and the
    content ``words`` any of which counts (names, entity kinds, schema descriptions). ``reason``:
    an abstain task whose request no tool covers, where saying so is naming what cannot be done.
    ``known`` is false when the task records nothing to check against (imported tasks)."""

    what: str
    words: frozenset[str] = frozenset()
    reason: bool = False
    known: bool = True


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].split("\n")[0]


def subject(task: Task, specs: dict[str, Any]) -> Subject:
    """What a reply to this clarify/abstain task should be about, from its record:
    ``meta.withheld`` (the parameter the user left out), a ``hidden_tool`` perturbation (the tool
    that was removed; on a clarify task, the entities its request needed), an ``irrelevance``
    one or ``meta.source = "irrelevance"`` (no tool covers the request). ``specs`` maps tool names
    to ``ToolSpec`` for the task's servers."""
    meta = task.meta or {}
    changes = {c.get("name"): c for c in meta.get("perturbations", []) if isinstance(c, dict)}
    if task.expected == "clarify" and isinstance(meta.get("withheld"), str):
        param = meta["withheld"]
        found = words(param)
        for spec in specs.values():
            prop = (spec.parameters.get("properties") or {}).get(param)
            if isinstance(prop, dict):
                found |= words(str(spec.entity_params().get(param, "")))
                found |= words(_first_sentence(str(prop.get("description", ""))))
        return Subject(what=f"the missing {param.removesuffix('_id').replace('_', ' ')}", words=frozenset(found))
    hidden = changes.get("hidden_tool")
    if hidden is not None and isinstance(hidden.get("tool"), str):
        tool = hidden["tool"]
        spec = specs.get(tool)
        if task.expected == "clarify":  # ask for what the lookup would have found (the record says which entity)
            needs = hidden.get("needs")
            found = words(needs) if isinstance(needs, str) else words(tool) | words(spec.description if spec else "")
            return Subject(what=f"the {needs.replace('_', ' ')}" if isinstance(needs, str) else
                           f"what {tool} would have found", words=frozenset(found))
        found = words(tool) | (words(_first_sentence(spec.description)) if spec is not None else set())
        return Subject(what=f"that it cannot {tool.replace('_', ' ')}", words=frozenset(found), reason=True)
    if "irrelevance" in changes or meta.get("source") == "irrelevance":
        return Subject(what="that no tool covers the request", reason=True)
    return Subject(what="what the task needs", known=False)


def mentions(text: str, wanted: Iterable[str]) -> list[str]:
    """The subject words ``text`` uses."""
    said = words(text)
    return sorted(w for w in wanted if w in said)


# -- facts: ids and numbers ------------------------------------------------------------------------

_ID = re.compile(r"\b[a-z]{2,6}_[0-9a-z]{6,}\b")
_NUMBER = re.compile(r"(?<![\w.])[$€£]?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w])")


def stated_facts(text: str) -> list[str]:
    """The ids (``acc_8vnsdca3``) and numbers of ``text`` worth checking: ids always; numbers with
    a decimal part, a currency sign or three or more digits (small counts and list positions are
    left out)."""
    text = _normal(text)
    found = [m.group(0) for m in _ID.finditer(text)]
    masked = _ID.sub(" ", text)
    for m in _NUMBER.finditer(masked):
        whole, decimals = m.group(1), m.group(2)
        if decimals or m.group(0)[0] in "$€£" or len(whole.replace(",", "")) >= 3:
            found.append(m.group(0))
    return found


def _numbers_in(value: Any, out: set[float], strings: set[str]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        out.add(round(abs(float(value)), 6))  # a reply says "-12.50" or "12.50" for a debit
        out.add(round(abs(float(value)) / 100, 6))  # amounts kept in cents are said in units
    elif isinstance(value, str):
        strings.add(value.lower())
        for m in re.finditer(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?", value):
            out.add(round(float(m.group(0).replace(",", "")), 6))
    elif isinstance(value, dict):
        for k, v in value.items():
            strings.add(str(k).lower())
            _numbers_in(v, out, strings)
    elif isinstance(value, list | tuple):
        out.add(float(len(value)))
        for v in value:
            _numbers_in(v, out, strings)


def without_quotes(text: str, sources: Iterable[Any], *, shortest: int = 8) -> str:
    """``text`` with every string of ``sources`` (tool results) it repeats verbatim blanked out:
    a comment that reads "Couldn't agree more." is data the reply quotes, not its own claim."""
    found: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, str):
            if len(value) >= shortest and value in text:
                found.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
        elif isinstance(value, list | tuple):
            for v in value:
                collect(v)

    for source in sources:
        collect(source)
    for quoted in sorted(set(found), key=len, reverse=True):
        text = text.replace(quoted, " ")
    return text


def ungrounded(facts: list[str], sources: Iterable[Any]) -> list[str]:
    """The ``facts`` (from ``stated_facts``) found nowhere in ``sources`` (tool results, call
    arguments): an id no source contains, a number no source holds (as a value, inside a
    string, a list's length, or an amount in cents said in units)."""
    numbers: set[float] = set()
    strings: set[str] = set()
    for source in sources:
        _numbers_in(source, numbers, strings)
    blob = "\n".join(strings)
    missing = []
    for fact in facts:
        if _ID.fullmatch(fact):
            if fact.lower() not in blob:
                missing.append(fact)
            continue
        value = round(float(fact.lstrip("$€£").replace(",", "")), 6)
        if value not in numbers:
            missing.append(fact)
    return missing
