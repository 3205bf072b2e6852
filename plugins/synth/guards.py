"""Guards on text an LLM teacher writes: what it may say, given the conversation it is written into.

A model asked to put a turn into words may invent facts ("approved by Maria Gonzalez"), turn a
request around ("please don't transfer"), switch language, claim success where the call failed,
or leave its reasoning in (``<think>``). The ``llm`` teacher (``plugins/synth/llm.py``) asks for a
rewrite of each template turn and keeps it only when ``check_turn`` finds nothing wrong:

- **facts** — ids, e-mail addresses, numbers and amounts, dates, times, quoted titles and names
  are read out of the text and compared *as values* with the conversation: ``$1,234.50`` matches
  a result's ``1234.5``, ``1409`` does not match ``40``, ``March 5, 2026`` matches ``2026-03-05``.
  Every fact of the template turn must still be there, and every fact of the rewrite must be
  supported by a tool result, a user turn, the system prompt or the template turn itself;
- **language** — the rewrite is in the conversation's language (stop-word profile and script);
- **meaning** — a user turn gains no negation its template lacks; a turn after a tool call says
  it failed when it failed, claims no success then, and no failure or "nothing changed" when
  the template does not;
- **form** — reasoning blocks are stripped first (``strip_reasoning``); empty text, a reply that
  talks about the rewriting, or one many times longer than the template is refused.

What is *not* checked: numbers written as words, facts a person could infer (sums, differences),
single names at the start of a sentence, and whether the wording is pleasant.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

import attrs

from prove_core.errors import ErrorCode
from prove_core.synth.validation import ID_PATTERN

# -- reasoning blocks --------------------------------------------------------------------------------

_BLOCK = re.compile(r"<(think|thinking|reasoning|reflection|scratchpad)\b[^>]*>.*?</\1\s*>", re.S | re.I)
_OPEN = re.compile(r"<(think|thinking|reasoning|reflection|scratchpad)\b[^>]*>", re.I)
_CLOSE = re.compile(r"</(think|thinking|reasoning|reflection|scratchpad)\s*>", re.I)
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:user|assistant|message|rewritten message|rewrite)(?:\*\*)?\s*:\s*", re.I)


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning: closed blocks removed, everything before a lone closing
    tag (the opening one was in the prompt) and after a lone opening tag (cut off) dropped; a
    leading role label and wrapping quotes go too."""
    text = _BLOCK.sub("", text)
    closings = list(_CLOSE.finditer(text))
    if closings:
        text = text[closings[-1].end():]
    opening = _OPEN.search(text)
    if opening is not None:
        text = text[:opening.start()]
    text = _LABEL.sub("", text.strip()).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" and text.count(text[0]) == 2:
        text = text[1:-1].strip()
    if len(text) >= 2 and text[0] == "“" and text[-1] == "”":
        text = text[1:-1].strip()
    return text


# -- facts ---------------------------------------------------------------------------------------------

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL = re.compile(r"\bhttps?://\S+", re.I)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b")
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?", re.I)
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+(\d{{4}}))?\b", re.I)
_SLASH_DATE = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})(?::\d{2})?\s*([ap]\.?m\.?)?(?![\w:])|\b(\d{1,2})\s*([ap]\.?m\.?)(?!\w)", re.I)
_NUMBER = re.compile(r"(?<![\w.,])([$€£¥]\s?)?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?!\.?\d)(\s?%)?")
_CODE = re.compile(r"(?<![\w-])(?=[\w-]*[^\W\d_])(?=[\w-]*\d)\w+(?:-\w+)*(?![\w-])")  # GRD-10216, PAY-2, 4F
_QUOTED = re.compile(r"\"([^\"\n]{2,80})\"|“([^”\n]{2,80})”|(?<!\w)'([^'\n]{2,80})'(?!\w)")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+|^\s*[-*•]\s+", re.M)

# Capitalised words that name nothing: sentence openers, pronouns, calendar words, titles.
COMMON = frozenset("""
a an the this that these those here there it its it's i i'm i've i'll i'd we we've we'll you you'll you've your yours
my mine our ours their they he she his her him them me us done all sure great good okay ok yes no hi hello hey dear
thanks thank please unfortunately also next then now so but and or if when once while before after just
sorry alright right perfect nice well oh hmm cool got noted understood certainly absolutely of course
today tomorrow yesterday monday tuesday wednesday thursday friday saturday sunday mr mrs ms dr
let let's would could should can will may might shall do does did is are was were be been have has had
what which who whom whose where why how id pin am pm utc gmt iso
""".split()) | frozenset(MONTHS) | frozenset(m[:3] for m in MONTHS)


CURRENCY_SIGNS = {"usd": "$", "eur": "€", "gbp": "£", "jpy": "¥"}  # "40 USD" is kept by "$40"


@attrs.frozen
class Problem:
    """Why a text is refused: ``kind`` (counted in the synthesis stats) and a detail for the model."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return self.detail


@attrs.frozen
class Fact:
    """One checkable fact: ``kind`` (id — also an e-mail, a URL, a code such as GRD-10216 —, number,
    date, time, quote, name), the text as
    written, and its value (a lowercase string; for a number (Decimal, decimals written, is a
    percentage); a (y, m, d) with y None when not written; an (h, m))."""

    kind: str
    text: str
    value: Any


def _number(digits: str, percent: str | None) -> tuple[Decimal, int, bool] | None:
    """(value, decimals written, is a percentage); a sign is not read: "-$50" and "$50 debited"
    state the same amount."""
    try:
        value = Decimal(digits.replace(",", ""))
    except InvalidOperation:
        return None
    decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
    return value, decimals, bool(percent)


def _month(name: str) -> int:
    return next(i for i, m in enumerate(MONTHS, 1) if m.startswith(name.lower().rstrip(".")[:3]))


def _hour(hour: int, meridiem: str | None) -> int:
    if not meridiem:
        return hour
    pm = meridiem.lower().startswith("p")
    return (hour % 12) + (12 if pm else 0)


def facts(text: str) -> list[Fact]:
    """The facts ``text`` states."""
    return _read(text)[0]


def _read(text: str) -> tuple[list[Fact], str]:
    """The facts of ``text`` and what is left of it once they are cut out. Each kind is cut out
    before the next is read, so the digits of an id, a code or a date are not read again as
    numbers, nor a quoted title's words as names."""
    found: list[Fact] = []

    def cut(pattern: re.Pattern[str], make: Any) -> None:
        nonlocal text

        def one(match: re.Match[str]) -> str:
            for fact in make(match):
                if fact is not None:
                    found.append(fact)
            return " · "  # no word, no sentence end: the text around keeps its shape

        text = pattern.sub(one, text)

    cut(_QUOTED, lambda m: [Fact("quote", m.group(0), _norm(q)) for q in [next(g for g in m.groups() if g)]
                            if any(c.isalpha() for c in q)])
    cut(_URL, lambda m: [Fact("id", m.group(0), m.group(0).lower().rstrip(".,)"))])
    cut(_EMAIL, lambda m: [Fact("id", m.group(0), m.group(0).lower())])
    cut(ID_PATTERN, lambda m: [Fact("id", m.group(0), m.group(0))])
    cut(_ISO, lambda m: [Fact("date", m.group(0), (int(m[1]), int(m[2]), int(m[3]))),
                         Fact("time", m.group(0), (int(m[4]), int(m[5]))) if m[4] else None])
    cut(_MONTH_DAY, lambda m: [Fact("date", m.group(0), (int(m[3]) if m[3] else None, _month(m[1]), int(m[2])))])
    cut(_DAY_MONTH, lambda m: [Fact("date", m.group(0), (int(m[3]) if m[3] else None, _month(m[2]), int(m[1])))])
    cut(_SLASH_DATE, lambda m: [Fact("date", m.group(0), (int(m[3]), int(m[1]), int(m[2])))])  # month first
    cut(_TIME, lambda m: [Fact("time", m.group(0), (_hour(int(m[1]), m[3]), int(m[2])) if m[1] else
                               (_hour(int(m[4]), m[5]), 0))])
    cut(_CODE, lambda m: [Fact("id", m.group(0), m.group(0).lower())])
    cut(_NUMBER, lambda m: [Fact("number", m.group(0).strip(), parsed)
                            for parsed in [_number(m[2], m[3])] if parsed is not None])
    found += _names(text)
    return found, text


def _names(text: str) -> list[Fact]:
    """Capitalised words, and runs of them with only spaces between, that are not common words
    or a single word opening a sentence: the names a text mentions ("Maria Gonzalez", "Chase",
    "EUR")."""
    out: list[Fact] = []
    for sentence in _SENTENCE.split(text):
        words = list(_WORD.finditer(sentence))
        runs: list[list[str]] = []
        previous: re.Match[str] | None = None
        for match in words:
            word = match.group(0)
            if not (word[0].isupper() and re.sub(r"['’]s$", "", word).lower() not in COMMON):
                previous = None
                continue
            if previous is not None and sentence[previous.end():match.start()].isspace():
                runs[-1].append(word)
            else:
                runs.append([word])
                if match.start() == words[0].start():
                    runs[-1].insert(0, "")  # marks a run that opens the sentence
            previous = match
        for run in runs:
            opens = run[0] == ""
            run = [w for w in run if w]
            if len(run) > 1 or not opens:
                out.append(Fact("name", " ".join(run), _norm(" ".join(run))))
    return out


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[_’]", lambda m: " " if m.group(0) == "_" else "'", text).lower().split())


# -- what a conversation supports ------------------------------------------------------------------


class Support:
    """The values a conversation holds (tool results, user turns, the system prompt, the template
    turn), against which a text's facts are checked."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.numbers: set[Decimal] = set()
        self.dates: set[tuple[int | None, int, int]] = set()  # the year None where the text gave none
        self.times: set[tuple[int, int]] = set()
        self.text: list[str] = []
        self._joined: str | None = None

    def add_text(self, text: str) -> None:
        self._joined = None
        self.text.append(" " + _norm(text) + " ")
        for fact in facts(text):
            self._add_fact(fact)

    def add_value(self, value: Any) -> None:
        """A tool result (parsed JSON): every scalar, every list's length."""
        if isinstance(value, dict):
            for v in value.values():
                self.add_value(v)
        elif isinstance(value, list):
            self.numbers.add(Decimal(len(value)))
            for v in value:
                self.add_value(v)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, int | float):
            self.numbers.add(abs(Decimal(str(value))))
        elif isinstance(value, str):
            self.add_text(value)

    def _add_fact(self, fact: Fact) -> None:
        if fact.kind == "id":
            self.ids.add(fact.value)
        elif fact.kind == "number":
            self.numbers.add(fact.value[0])
        elif fact.kind == "date":
            self.dates.add(fact.value)
        elif fact.kind == "time":
            self.times.add(fact.value)

    @property
    def joined(self) -> str:
        if self._joined is None:
            self._joined = " ".join(self.text)
        return self._joined

    def supports(self, fact: Fact) -> bool:
        if fact.kind == "id":
            return fact.value in self.ids
        if fact.kind == "number":
            value, decimals, percent = fact.value
            wanted = {value, value / 100} if percent else {value}
            return any(_same_number(w, n, decimals) for w in wanted for n in self.numbers)
        if fact.kind == "date":
            year, month, day = fact.value
            return any(d[1:] == (month, day) and (year is None or d[0] == year) for d in self.dates)
        if fact.kind == "time":
            return fact.value in self.times
        return any(re.search(rf"(?<!\w){re.escape(value)}(?!\w)", self.joined) for value in _phrases(fact.value))


def _phrases(name: str) -> tuple[str, ...]:
    """A name as it may stand in the conversation: "dana whitfield's" also as "dana whitfield"."""
    bare = re.sub(r"'s$", "", name)
    return (name, bare) if bare != name else (name,)


def _same_number(written: Decimal, known: Decimal, decimals: int) -> bool:
    """Equal as values; a value written with fewer decimals than the known one may be its
    rounding (0.65 for 0.6523), never a different number (1409 for 40)."""
    if written == known:
        return True
    exponent = known.as_tuple().exponent
    known_decimals = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return decimals < known_decimals and known.quantize(Decimal(1).scaleb(-decimals)) == written


def _kept(fact: Fact, text_facts: list[Fact], text: str) -> bool:
    """Whether a template fact is still in the rewrite (as a value; a date may drop its year)."""
    if fact.kind in ("name", "quote"):
        return any(p in _norm(text) for p in _phrases(fact.value)) or CURRENCY_SIGNS.get(fact.value, "\0") in text
    for other in text_facts:
        if other.kind != fact.kind:
            continue
        if fact.kind == "number" and (other.value[0] == fact.value[0] or
                                      _same_number(other.value[0], fact.value[0], other.value[1])):
            return True
        if fact.kind == "date" and other.value[1:] == fact.value[1:] and other.value[0] in (None, fact.value[0]):
            return True
        if other.value == fact.value:
            return True
    return False


# -- language ----------------------------------------------------------------------------------------

STOPWORDS = {
    "en": "the and you your is are to of for it that this with have has was be on in my me i please can could "
          "would will not what which there here done thanks just been as at by from an all now then up out new get "
          "show also about one more next some any our we they their them its if or so",
    "es": "el la los las que de y en por para con una un es su mi favor puedes gracias está están fue se "
          "del al lo le como pero más cuenta hola quiero necesito",
    "fr": "le la les des et est une un pour que qui dans avec vous votre mon ma mes je ne pas sur au aux "
          "merci été ce cette bonjour",
    "de": "der die das und ist ein eine nicht ich sie ihr mein meine mit für auf bitte danke wurde zu den dem "
          "des auch hallo",
    "it": "il lo gli della di che è una un per con non mi sono ho hai grazie tuo tua questo questa nel ciao",
    "pt": "o os as da do de que é um uma para com não meu minha por favor obrigado foi está seu sua olá",
    "nl": "de het een en is van ik je jij u niet met voor op dat die mijn bedankt alstublieft graag",
}
# Only the words one language has count: "de", "la", "por" say little on their own.
_STOP = {lang: frozenset(words.split()) - frozenset(w for other, ws in STOPWORDS.items() if other != lang
                                                    for w in ws.split())
         for lang, words in STOPWORDS.items()}


def language_scores(text: str) -> dict[str, int]:
    """How many of each language's own stop words the text's own words use: the words left once
    its facts are cut out, written in lowercase (a name, a city or a code copied from the data
    says nothing about the language the text is written in: "Chicago, IL", "Los Angeles")."""
    words = [w for w in _WORD.findall(_read(text)[1]) if w[0].islower()]
    return {lang: sum(w in stop for w in words) for lang, stop in _STOP.items()}


def language(text: str) -> str | None:
    """A text's language: the script when most letters are not Latin, else the stop-word
    profile that wins clearly; None when too little text to tell."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    foreign = [unicodedata.name(c, "?").split(" ")[0] for c in letters if not unicodedata.name(c, "").startswith("LATIN")]
    if len(foreign) > 0.3 * len(letters):
        return max(set(foreign), key=foreign.count).lower()
    scores = sorted(((n, lang) for lang, n in language_scores(text).items()), reverse=True)
    (best, lang), (second, _) = scores[0], scores[1]
    return lang if best >= 2 and best >= 2 * second else None


def off_language(text: str, expected: str) -> str | None:
    """The language ``text`` is written in when it is not ``expected``; a text too short to tell
    passes, one of five words or more with none of the expected language's words and some of
    another's does not."""
    lang = language(text)
    if lang is not None:
        return lang if lang != expected else None
    scores = language_scores(text)
    if expected in scores and len(_WORD.findall(text)) >= 5 and scores[expected] == 0:
        other = max(scores, key=lambda k: scores[k])
        return other if scores[other] > 0 else None
    return None


# -- meaning -----------------------------------------------------------------------------------------

NEGATION = re.compile(r"\b(?:don'?t|do not|does not|doesn'?t|never|not|no longer|no need|won'?t|shouldn'?t|"
                      r"mustn'?t|can'?t|cannot|avoid|refrain|instead of|rather than|hold off|skip)\b", re.I)
FAILED = re.compile(r"\b(?:couldn'?t|could not|unable|fail(?:ed|s|ure)?|wasn'?t able|was not able|refused|"
                    r"rejected|declined|didn'?t (?:go through|work)|did not (?:go through|work)|error|"
                    r"unfortunately|not possible|can'?t|cannot|denied|blocked|invalid|incorrect(?:ly)?|wrong|mistake|oops|"
                    r"hit a problem|ran into|retry(?:ing)?|try(?:ing)? again|already)\b", re.I)  # "already": the goal held
SUCCEEDED = re.compile(r"\b(?:successfully|succeeded|all set|went through|taken care of|done|completed|finished|"
                       r"has been (?!refused|rejected|declined|denied|blocked)\w+ed)\b", re.I)
UNCHANGED = re.compile(r"\b(?:nothing (?:was|has been|got) (?:changed|touched|done)|nothing changed|no changes?\b|"
                       r"left everything|everything (?:is|was) (?:left )?(?:as it was|unchanged)|unchanged)", re.I)
META = re.compile(r"\b(?:rewrit\w*|rephras\w*|paraphras\w*|original message|template|as an ai|language model|"
                  r"here(?:'s| is) (?:the|my|a) (?:message|reply|version|response))\b|</?\w*think", re.I)


def _cues(pattern: re.Pattern[str], text: str) -> Counter[str]:
    """The cues a text holds, with how often (a second "don't" is a new negation)."""
    return Counter(m.group(0).lower().replace("’", "'") for m in pattern.finditer(text))


def _claims_success(text: str) -> Counter[str]:
    """The success cues of sentences that say nothing failed and negate nothing ("I couldn't get
    it done" claims nothing)."""
    return sum((_cues(SUCCEEDED, sentence) for sentence in _SENTENCE.split(text)
                if not FAILED.search(sentence) and not NEGATION.search(sentence)), Counter())


def is_error_result(content: str | None) -> bool:
    """Whether a tool message holds a typed error (``{code, reason, message, ...}``)."""
    try:
        data = json.loads(content or "")
    except ValueError:
        return False
    codes = {c.value for c in ErrorCode}
    return isinstance(data, dict) and data.get("code") in codes and "message" in data


# -- the check ---------------------------------------------------------------------------------------


def last_results(messages: list[dict[str, Any]]) -> list[bool]:
    """Whether each result of the calls just made (the tool messages ending ``messages``, several
    after parallel calls) is an error; empty when the last message is not a tool result."""
    out = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        out.append(is_error_result(message.get("content")))
    return out[::-1]


def support_for(messages: Iterable[dict[str, Any]]) -> Support:
    """What the conversation so far supports: the system prompt, user turns, tool results (the
    arguments the assistant called with came from these)."""
    support = Support()
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role in ("system", "user") and content:
            support.add_text(content)
        elif role == "tool" and content:
            try:
                support.add_value(json.loads(content))
            except ValueError:
                support.add_text(content)
    return support


def check_turn(text: str, template: str, role: str, before: list[dict[str, Any]], *,
               language_of_conversation: str | None) -> list[Problem]:
    """What is wrong with ``text`` as the ``role`` turn that replaces ``template`` after the
    messages ``before`` (OpenAI-style dicts); empty when it can be kept."""
    problems: list[Problem] = []
    if not text.strip():
        return [Problem("empty", "empty")]
    if META.search(text):
        problems.append(Problem("meta", "talks about the rewriting, not to the reader"))
    if len(text) > 4 * len(template) + 200:
        problems.append(Problem("length", "far longer than the turn it replaces"))
    lang = off_language(text, language_of_conversation) if language_of_conversation else None
    if lang:
        problems.append(Problem("language", f"written in another language ({lang}, the conversation is "
                                                f"{language_of_conversation})"))
    written = facts(text)
    support = support_for(before)
    support.add_text(template)
    unsupported = [f.text for f in written if not support.supports(f)]
    if unsupported:
        problems.append(Problem("invented", "states what the conversation does not: " + ", ".join(dict.fromkeys(unsupported))))
    missing = [f.text for f in facts(template) if not _kept(f, written, text)]
    if missing:
        problems.append(Problem("dropped", "drops what the turn must say: " + ", ".join(dict.fromkeys(missing))))
    if role == "user":
        if _cues(NEGATION, text) - _cues(NEGATION, template):
            problems.append(Problem("negated", "negates the request"))
        return problems
    outcomes = last_results(before)
    if outcomes:
        if any(outcomes) and not _cues(FAILED, text):
            problems.append(Problem("unreported_failure", "does not say that the call failed"))
        if all(outcomes) and _claims_success(text) - _claims_success(template):
            problems.append(Problem("false_success", "claims success where the call failed"))
        if not any(outcomes) and _cues(FAILED, text) - _cues(FAILED, template):
            problems.append(Problem("false_failure", "claims failure where the call succeeded"))
    if _cues(UNCHANGED, text) and not _cues(UNCHANGED, template):
        problems.append(Problem("false_unchanged", "claims nothing was changed"))
    return problems
