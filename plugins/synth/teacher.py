"""Bundled teacher ``programmatic``: writes user and assistant text offline, from templates.

Tool calls never come from here — they come from the chain and the live state (see
``prove_core.synth.pipeline``). This teacher only puts them into words, with several personas and
sentence shapes so the corpus is not one sentence pattern repeated. The LLM teacher
(``plugins/synth/llm.py``) implements the same methods by asking a model.
"""

from __future__ import annotations

import functools
import json
import random
import re
from typing import Any

from prove_core import hookimpl
from prove_core.synth.quality import strings
from prove_core.synth.validation import ID_PATTERN
from prove_core.toolkit.answers import field_phrase, flat, value_forms

VERBS = {
    "get": ("look up", "check", "pull up", "show me"),
    "list": ("list", "show me", "give me an overview of", "go through"),
    "find": ("find", "look for", "search for"),
    "search": ("search for", "find", "look for"),
    "create": ("create", "set up", "make"),
    "add": ("add", "put in", "register"),
    "update": ("update", "change", "edit"),
    "set": ("set", "change", "adjust"),
    "remove": ("remove", "take out", "delete"),
    "delete": ("delete", "remove", "get rid of"),
    "cancel": ("cancel", "call off", "stop"),
    "close": ("close", "shut down"),
    "apply": ("apply", "use"),
    "verify": ("verify", "confirm"),
    "pay": ("pay", "send a payment to"),
    "transfer": ("transfer", "move"),
    "track": ("track", "follow"),
    "start": ("start", "open", "begin"),
    "write": ("write", "post", "leave"),
    "report": ("report", "flag"),
}

PERSONAS = {
    "polite": ("Hello! Could you please {task}?", "Hi there, I'd like you to {task}, please.",
               "Good morning. Would you {task}?", "Hi! When you get a chance, please {task}.",
               "Could you help me out and {task}? Thank you!", "Hello, I need a hand: please {task}."),
    "casual": ("hey, can you {task}?", "can u {task} for me", "ok so I need you to {task}", "yo, {task}?",
               "hey — {task} pls", "so... could you {task}", "need you to {task}, thx"),
    "busy": ("Quick one: {task}.", "Need this now — {task}.", "{task}, thanks.", "{task}. ASAP please.",
             "Short on time: {task}.", "Please {task} — in a rush."),
    "detailed": ("I'm sorting out some things today. First, I need to {task}. Thanks in advance!",
                 "Here's what I need: {task}. Let me know once it's done.",
                 "I've been meaning to deal with this for a while: please {task}.",
                 "I'm going through my to-do list and the next item is this: {task}. Can you handle it?",
                 "So here's the situation — I'd like to {task}. Tell me how it goes."),
}
CONTEXT = ("This is about {what}.", "It's for {what}.", "For reference: {what}.", "(That's {what}.)",
           "This concerns {what}.", "Context: {what}.")
JOINERS = (", then ", " and then ", ", and after that ", "; then ", " and also ")
FOLLOW_UPS = ("Great. Now {task}.", "Thanks! Next, {task}.", "Perfect — could you also {task}?",
              "One more thing: {task}.", "Ok. Then {task}, please.", "Nice. Can you {task} too?",
              "Good, thanks. Also, {task}.", "Alright — next I'd like you to {task}.", "cool, now {task}")
CLARIFY = ("Sure — which {what} should I use?", "I can do that. Which {what} do you mean?",
           "Before I go ahead: which {what} is this about?", "Happy to help. I just need to know which {what}.",
           "Got it. Could you tell me which {what} you mean?", "Which {what}? I don't want to pick the wrong one.")
ANSWERS = ("It's {value}.", "{value}", "Use {value}.", "Oh right, {value}.", "Sorry — {value}.",
           "{value}, please.", "I meant {value}.")
DONE = ("Done. {summary}", "All set. {summary}", "Here you go. {summary}", "{summary}", "Finished. {summary}",
        "That's taken care of. {summary}")
FAILED = ("I couldn't do that: {message}", "That didn't go through — {message}",
          "I tried, but it was refused: {message}", "Unfortunately that failed: {message}",
          "I wasn't able to complete it: {message}", "It was refused: {message}", "No luck — {message}")
NOTHING_CHANGED = (" That request changed nothing.", " Nothing was changed.", " I've left everything as it was.", "")
ALREADY = ("{message} So it's already the way you want it — nothing needed changing.",
           "It's already done: {message} No change was needed.",
           "{message} There was nothing to change.",
           "No need — {message} I left it as it is.",
           "That's already the case. {message}")
OFFER_FIX = ("It was refused: {message} Do you want me to {fix} and then try again?",
             "I couldn't do it yet — {message} Should I {fix} and retry?",
             "{message} If you'd like, I can {fix} and then do it.",
             "That needs a step first: {message} Want me to {fix}?")
PREREQUISITE = ("{message} I'll {fix} and try again.", "That needs one step first — {message} Doing that now.",
                "{message} Let me take care of that first.", "It was refused because of a missing step: {message} "
                "Fixing that, then retrying.")
# Replies that answer: an opener, then what the user asked for, in sentences.
OPEN_READ = ("", "", "", "Sure. ", "Here's what I found. ", "I checked. ", "Okay — ", "Got it. ", "I looked it up. ",
             "Let me see. ", "Here it is. ")
OPEN_WRITE = ("", "", "Done — ", "All set. ", "That went through. ", "Okay, ", "Finished. ", "Taken care of. ",
              "Sure thing. ", "Great, ")
CLOSERS = ("", "", "", "", " Anything else?", " Let me know if you need more.", " Want me to do anything else with it?")
FIRST_FIELD = ("The {field} of {subject} is {value}.", "{Subject} has a {field} of {value}.",
               "For {subject}, the {field} is {value}.", "{Subject} shows {value} as the {field}.",
               "On {subject}, the {field} is {value}.", "I see a {field} of {value} on {subject}.",
               "{Subject}: the {field} is {value}.")
BARE_FIELD = ("The {field} is {value}.", "It shows a {field} of {value}.", "Right now the {field} is {value}.",
              "{Field}: {value}.", "I see {value} as the {field}.", "The {field} comes to {value}.")
MORE_FIELD = ("Its {field} is {value}.", "The {field} is {value}.", "{Field}: {value}.",
              "It also shows a {field} of {value}.", "And the {field} is {value}.")
STATUS = ("{Subject} is {value}.", "{Subject} is currently {value}.", "The status of {subject} is {value}.",
          "{Subject} shows as {value}.")
LIST_HEAD = ("I found {n} {what}", "There are {n} {what}", "{N} {what} came up", "That gives {n} {what}",
             "I see {n} {what}", "Here are the {n} {what}")
LIST_ONE = ("I found one {one}", "There is one {one}", "Just one {one} came up", "I see a single {one}")
LIST_EMPTY = ("I found no {what}.", "There are no {what}.", "Nothing came up — no {what}.", "I don't see any {what}.",
              "No {what} at the moment.")
FOUND = ("I found {desc}.", "That's {desc}.", "I looked up {desc}.", "")
CREATED = ("I've {verbed} {desc}.", "{Desc} is {verbed}.", "{Desc} has been {verbed}.", "I {verbed} {desc}.",
           "{Desc} is {verbed} now.")
CREATED_SAME = ("Created {desc}.", "There is now {desc}.", "{Desc} is in place.", "You now have {desc}.")
ALONG = ("Along with it, {what} {was} {done}.", "That also {done} {what}.", "{What} {was} {done} with it.")
MADE_TOO = ("It went through as {desc}.", "That created {desc}.", "It is recorded as {desc}.")
CREATING = frozenset({"create", "add", "book", "schedule", "send", "make", "open", "invite", "post", "write", "log",
                      "upload", "place", "start", "request", "submit", "save", "register", "order", "issue", "apply",
                      "share", "reply", "forward", "copy", "duplicate", "plan", "draft", "compose", "new", "set", "leave",
                      "reserve", "rate", "review", "comment", "import", "follow", "subscribe", "join"})
UPDATED = ("The {field} of {desc} is now {new} (it was {old}).", "{Desc}: {field} changed from {old} to {new}.",
           "{Desc} now has {field} {new} instead of {old}.", "I changed the {field} of {desc} from {old} to {new}.",
           "{Field} on {desc} went from {old} to {new}.")
UPDATED_STATUS = ("{Desc} is now {new}.", "{Desc} is {new} now (it was {old}).", "I've marked {desc} as {new}.",
                  "{Desc} went from {old} to {new}.")
DELETED = ("{Desc} is {verbed}.", "I've {verbed} {desc}.", "{Desc} has been {verbed}.", "{Desc} is gone now.")
UNCHANGED = ("That was already the case, so I left it as it is.", "It was already set that way.",
             "That's how it already was.")
UPDATED_BARE = ("I've updated the {field} of {desc}.", "{Desc} has its {field} updated.", "The {field} of {desc} is changed.")
UPDATED_NEW = ("The {field} of {desc} is now {new}.", "{Desc} now has {field} {new}.", "{Field} on {desc}: now {new}.")
PAST = {"send": "sent", "pay": "paid", "make": "made", "set": "set", "put": "put", "write": "written", "freeze": "frozen",
        "leave": "left", "buy": "bought", "get": "got", "run": "run", "begin": "begun", "take": "taken", "give": "given",
        "cancel": "cancelled", "stop": "stopped", "ship": "shipped", "submit": "submitted", "pin": "pinned",
        "plan": "planned", "unpin": "unpinned", "shut": "shut", "forward": "forwarded", "rsvp": "answered",
        "mute": "muted", "log": "logged", "tag": "tagged", "flag": "flagged", "star": "starred", "unstar": "unstarred",
        "top": "topped", "drop": "dropped", "checkout": "checked out", "login": "logged in", "setup": "set up",
        "split": "split", "upload": "uploaded", "refund": "refunded"}
RECOVER = ("That didn't work: {message} Do you want me to try a different {what}?",
           "It was refused — {message} Should I use another {what} instead?",
           "I hit a problem: {message} Which {what} would you like me to use instead?",
           "That failed: {message} Let me know if I should go with a different {what}.")
CORRECTIONS = ("Oh, ok — use {value} instead.", "Then try {value}.", "Hmm. Let's go with {value} then.",
               "Fine, make it {value}.", "In that case, {value}.", "Ok, switch to {value}.")
RETRY = ("That call was rejected ({message}); let me fix the arguments and try again.",
         "I sent that incorrectly ({message}). Retrying with the right values.",
         "Oops — {message}. Correcting and trying again.")
# Off-topic requests: a question form x a subject, so abstention data is not eight sentences.
IRRELEVANT_FORMS = ("What's the weather going to be like in {place} tomorrow?", "Can you write me a short poem about {thing}?",
                    "Translate '{phrase}' into {language}.", "What's a good recipe for {dish}?",
                    "How tall is {landmark}?", "Recommend me a novel about {thing}.", "What time zone is {place} in?",
                    "Who invented {invention}?", "Tell me a joke about {thing}.", "How do I say '{phrase}' in {language}?",
                    "What's the population of {place}?", "Explain how {invention} works.")
IRRELEVANT_FILL = {
    "place": ("Lisbon", "Auckland", "Nairobi", "Montreal", "Hanoi", "Bergen", "Cusco", "Osaka"),
    "thing": ("autumn", "the ocean", "friendship", "old trains", "coffee", "mountains", "cats", "the moon"),
    "phrase": ("good night", "thank you very much", "where is the station", "happy birthday"),
    "language": ("Japanese", "Portuguese", "Swahili", "Finnish", "Korean"),
    "dish": ("banana bread", "pad thai", "shakshuka", "lentil soup", "risotto"),
    "landmark": ("Mount Kilimanjaro", "the Eiffel Tower", "Angel Falls", "the Burj Khalifa"),
    "invention": ("the telescope", "the printing press", "the bicycle", "radar", "the zipper"),
}
DECLINE = ("I'm sorry, but none of the tools I have can help with that: {what_i_can}.",
           "That's outside what I can do here — my tools only cover {what_i_can}.",
           "I can't help with that request; I can only work with {what_i_can}.",
           "Sorry, I don't have a way to do that. What I can do is limited to {what_i_can}.")
UNAVAILABLE = ("I'm sorry — I can't {capability} here: none of the tools I have can do that, so I haven't done anything.",
               "I don't have a tool to {capability}, so I can't take care of this request. Nothing has been changed.",
               "Unfortunately, {capability} isn't something my tools support, so I can't do this for you.")
OFFER_REST = (" I can still {parts} for you, though — should I go ahead with that part?",
              " The rest I can do: {parts}. Want me to?", " What I can do is {parts}; shall I?")
ASK_INSTEAD = ("I can't {capability} with the tools I have. "
               "If you tell me which {noun} you mean (its id), I can go on from there.",
               "I don't have a way to {capability} here. Could you give me the {noun} id directly?",
               "Looking that up isn't possible with my tools ({capability}). Which {noun} is it — do you have its id?")
TERSE = ("{task}", "{task} pls", "{task}.", "{task} thx")
NAME_FIELDS = ("name", "title", "subject", "display_name", "full_name", "nickname", "label", "filename", "username",
               "handle", "headline", "summary", "email")
KIND_FIELDS = ("type", "kind", "category", "account_type")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
def words(name: str) -> list[str]:
    return name.replace("-", "_").split("_")


def param_phrase(name: str) -> str:
    parts = [w for w in words(name) if w not in ("id",)]
    return " ".join(parts) or name


def render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    return json.dumps(value)


def humanize(value: str) -> str:
    return value.replace("_", " ")


def noun(entity: str) -> str:
    return humanize(entity)


def describe(entity: str, record: dict[str, Any]) -> str | None:
    """How a person names a record: "the checking account ending 4821", "customer Maria Lopez",
    'the event "Team sync"'; None when it has nothing a person would use."""
    kind = next((record[k] for k in KIND_FIELDS if isinstance(record.get(k), str) and record[k]), None)
    last4 = next((v for k, v in record.items() if k.endswith("last4") and isinstance(v, str)), None)
    label = next((record[k] for k in NAME_FIELDS if isinstance(record.get(k), str) and 1 < len(record[k]) <= 60), None)
    what = f"{humanize(kind)} {noun(entity)}" if kind and humanize(kind) not in noun(entity) else noun(entity)
    if last4:
        return f"the {what} ending {last4}"
    if label:
        return f"{noun(entity)} {label}" if entity in ("customer", "contact", "user", "member", "person", "employee") \
            else f'the {what} "{label}"'
    return None


class ProgrammaticTeacher:
    """Writes user and assistant turns from templates and personas; takes no options."""

    name = "programmatic"
    description = "Offline teacher: varied templates and personas around calls from live state."

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def persona(self, rng: random.Random) -> str:
        return rng.choice(sorted(PERSONAS))

    def system_prompt(self, servers: list[str], today: str) -> str:
        return (f"You are an assistant that acts through the tools of these services: {', '.join(servers)}. "
                f"Today is {today}. Call tools to do what the user asks, use ids from earlier results, "
                "ask for missing information instead of guessing, and say so when no tool can help.")

    def intent(self, tool: str, values: dict[str, Any], rng: random.Random) -> str:
        """Generic wording for a tool that declares no ``asks`` phrasings."""
        parts = words(tool)
        verb = parts[0]
        phrase = rng.choice(VERBS.get(verb, (verb,)))
        obj = " ".join(parts[1:]) if len(parts) > 1 else ""
        details = ", ".join(f"{param_phrase(k)} {render_value(v)}" for k, v in values.items())
        text = f"{phrase} {obj}".strip()
        return f"{text} ({details})" if details and rng.random() < 0.5 else (f"{text} with {details}" if details else text)

    # -- how the user names things -----------------------------------------------------------
    def render_value(self, value: Any, prop: dict[str, Any], rng: random.Random) -> str:
        """A value as a user types it; dates sometimes as words ("March 15, 2026")."""
        if isinstance(value, list):
            items = [self.render_value(v, prop.get("items", {}), rng) for v in value]
            return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, dict):  # an attachment, an address: what a person would call it
            label = next((value[k] for k in ("filename", "name", "title", "label", "line1")
                          if isinstance(value.get(k), str)), None)
            return label if label is not None else ", ".join(f"{humanize(k)} {render_value(v)}" for k, v in value.items())
        if isinstance(value, float):
            return str(int(value)) if value.is_integer() else f"{value:.2f}"
        if isinstance(value, str):
            if "enum" in prop or "enum" in prop.get("items", {}):
                return humanize(value)
            if len(value) == 10 and value[4:5] == "-" and value[7:8] == "-" and value[:4].isdigit() and rng.random() < 0.5:
                try:
                    return f"{MONTHS[int(value[5:7]) - 1]} {int(value[8:10])}, {value[:4]}"
                except (ValueError, IndexError):
                    return value
            return value
        return render_value(value)

    def refer(self, entity: str, record: dict[str, Any], *, with_id: bool, rng: random.Random) -> str:
        """A record as the user names it: by description, with the id they copied when the
        assistant could not otherwise know it."""
        rid = record.get("id", "")
        described = describe(entity, record)
        if described is None:  # nothing to describe it by: name the value itself (a path, a group)
            internal = bool(ID_PATTERN.fullmatch(rid))  # an internal id the user cannot know unless given
            return f"{noun(entity)} {rid}" if rid and (with_id or not internal) else f"that {noun(entity)}"
        if not with_id:
            return described
        return rng.choice((f"{described} ({rid})", f"{described}, id {rid}", f"{noun(entity)} {rid}",
                           f"{described} — {rid}"))

    def that(self, entity: str, rng: random.Random) -> str:
        return rng.choice((f"that {noun(entity)}", f"the same {noun(entity)}", f"that {noun(entity)}"))

    def vague(self, entity: str, rng: random.Random) -> str:
        return rng.choice((f"my {noun(entity)}", f"one of my {noun(entity)}s", f"the {noun(entity)}"))

    def user_request(self, intents: list[str], persona: str, minimal: bool, follow_up: bool, rng: random.Random,
                     values: tuple[Any, ...] = (), context: tuple[str, ...] = ()) -> str:
        """The user's message for one turn; ``intents`` already name the ``values`` the user
        gives, ``context`` the entities the request is about that no intent names."""
        task = intents[0]
        for intent in intents[1:]:
            task += rng.choice(JOINERS) + intent
        if minimal:
            text = rng.choice(TERSE).format(task=task)
        elif follow_up:
            text = rng.choice(FOLLOW_UPS).format(task=task)
        else:
            text = rng.choice(PERSONAS[persona]).format(task=task)
        if context:
            what = " and ".join(context)
            note = what if minimal else rng.choice(CONTEXT).format(what=what)
            text = f"{note} {text}" if rng.random() < 0.5 else f"{text} {note}"
        return text[0].upper() + text[1:] if persona != "casual" or minimal else text

    def clarify_question(self, what: str, rng: random.Random) -> str:
        return rng.choice(CLARIFY).format(what=noun(what))

    def clarify_answer(self, param: str, value: str, rng: random.Random) -> str:
        text = rng.choice(ANSWERS).format(value=value)
        return text[0].upper() + text[1:]

    # -- what the assistant says -------------------------------------------------------------
    def report(self, results: list[tuple[str, dict[str, Any]]], rng: random.Random, facts: Any = (),
               closing: bool = True) -> str:
        """The reply after a turn's calls: for each read the user asked for, what answers the
        request; for each write, what it changed (from the session's state, never a template);
        sensitive fields never. Without ``facts``, a summary of each result. ``closing=False``:
        the reply goes on (a refusal follows), so no opener like "Done" and no closing question."""
        if not facts:
            return rng.choice(DONE).format(summary=" ".join(_summary(data) for _tool, data in results))
        sentences: list[str] = []
        for fact in facts:
            if fact.read_only or not fact.changes and not _writes(fact):
                sentences += _answer(fact, rng)
            else:
                sentences += _changed(fact, rng)
        sentences = [x for x in sentences if x]
        writes = any(not f.read_only and f.changes for f in facts)  # a no-op write is no "Done"
        opener = rng.choice(OPEN_WRITE if writes else OPEN_READ) if closing else ""  # a part says no "done"
        body = " ".join(sentences)
        if opener.endswith(("— ", ", ")) and not body.startswith(("I ", "I'")):
            body = body[:1].lower() + body[1:]  # "Done — the card ..."
        closer = rng.choice(CLOSERS) if closing else ""
        return _cap(re.sub(r"\b([Aa]) (?=[aeio])", r"\1n ", (opener + body + closer).strip()))

    def failure(self, tool: str, error: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(FAILED).format(message=_sentence(error)) + rng.choice(NOTHING_CHANGED)

    def already(self, error: dict[str, Any], rng: random.Random) -> str:
        """A refusal that says what the user wants is already so."""
        return _cap(rng.choice(ALREADY).format(message=_sentence(error)))

    def offer_fix(self, error: dict[str, Any], fix: str, rng: random.Random) -> str:
        """A refusal that names a step the assistant may not take unasked: it offers it."""
        return _cap(rng.choice(OFFER_FIX).format(message=_sentence(error), fix=_fix(fix)))

    def prerequisite_note(self, error: dict[str, Any], fix: str, rng: random.Random) -> str:
        """Said before taking the step a refusal named, then retrying."""
        return _cap(rng.choice(PREREQUISITE).format(message=_sentence(error), fix=_fix(fix)))

    def still_done(self, text: str) -> str:
        """A refusal's reply once a write of the conversation went through: without any claim
        that nothing changed (what did change is reported from the state beside it)."""
        for claim in NOTHING_CHANGED:
            if claim and text.endswith(claim):
                return text[: -len(claim)]
        return text

    def recovery_question(self, error: dict[str, Any], what: str, rng: random.Random) -> str:
        return rng.choice(RECOVER).format(message=_sentence(error), what=noun(what))

    def correction(self, value: str, rng: random.Random) -> str:
        return rng.choice(CORRECTIONS).format(value=value)

    def retry_note(self, error: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(RETRY).format(message=str(error.get("message", error.get("code"))).rstrip("."))

    def irrelevant_request(self, rng: random.Random) -> str:
        form = rng.choice(IRRELEVANT_FORMS)
        return form.format(**{k: rng.choice(v) for k, v in IRRELEVANT_FILL.items()})

    def decline(self, servers: list[str], rng: random.Random) -> str:
        names = [humanize(s) for s in servers]
        what = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        return rng.choice(DECLINE).format(what_i_can=what)

    def unavailable(self, capability: str, rng: random.Random, doable: list[str] | tuple[str, ...] = ()) -> str:
        """The decline when the tool a request needs is not offered; it offers the parts of the
        request the offered tools can do (``doable``) instead of declining them too."""
        text = rng.choice(UNAVAILABLE).format(capability=capability)
        if doable:
            parts = doable[0] if len(doable) == 1 else ", ".join(doable[:-1]) + " and " + doable[-1]
            text += rng.choice(OFFER_REST).format(parts=parts)
        return text

    def ask_instead(self, capability: str, entity: str, rng: random.Random) -> str:
        """The clarification when a lookup the request needs is not offered: ask for its result."""
        return rng.choice(ASK_INSTEAD).format(capability=capability, noun=noun(entity))


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _fix(clause: str) -> str:
    """"call verify_payee first" as something to offer, in words: "verify the payee"."""
    clause = clause.strip().rstrip(".")
    clause = clause[:-len(" first")] if clause.lower().endswith(" first") else clause
    clause = re.sub(r"^(?:call|use|run) ", "", clause)
    return re.sub(r"\b([a-z]+)_([a-z_]+)\b", lambda m: f"{m[1]} the {m[2].replace('_', ' ')}", clause)


def singular(noun_phrase: str) -> str:
    """"replies" → "reply", "addresses" → "address", "cards" → "card"."""
    if noun_phrase.endswith("ies") and len(noun_phrase) > 4:
        return noun_phrase[:-3] + "y"
    if noun_phrase.endswith(("sses", "xes", "ches", "shes")):
        return noun_phrase[:-2]
    return noun_phrase[:-1] if noun_phrase.endswith("s") and not noun_phrase.endswith("ss") else noun_phrase


def past(verb: str) -> str:
    if verb in PAST:
        return PAST[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def _writes(fact: Any) -> bool:
    return not fact.read_only


def _say(field: str, value: Any, record: dict[str, Any], rng: random.Random) -> str:
    forms = value_forms(field, value, record)
    text = forms[0] if rng.random() < 0.8 else rng.choice(forms[:2])
    return text.rstrip(".") if isinstance(value, str) else text


def _field(field: str) -> str:
    return field_phrase(field)


def _subject(fact: Any, record: dict[str, Any]) -> str | None:
    entity = fact.entity or "record"
    return describe(entity, record)


def _usable(fact: Any, key: str, value: Any) -> bool:
    return key not in fact.hidden and value is not None and value != "" and not isinstance(value, list | dict)


def _answer(fact: Any, rng: random.Random) -> list[str]:
    """What a read found, stated as an answer to the request."""
    data = fact.data if isinstance(fact.data, dict) else {"items": fact.data}
    if fact.listing is not None:
        items = [x for x in (data.get(fact.listing) or []) if isinstance(x, dict)]
        what = humanize(fact.listing)
        one = singular(what)
        if not items:
            return [rng.choice(LIST_EMPTY).format(what=what)]
        head = rng.choice(LIST_ONE).format(one=one) if len(items) == 1 else \
            rng.choice(LIST_HEAD).format(n=len(items), N=len(items), what=what)
        shown = [_listed(fact, one, item, rng) for item in items[:3]]
        more = f", and {len(items) - 3} more" if len(items) > 3 else ""
        return [f"{head}: " + "; ".join(shown) + more + "."]
    record = flat(data)
    subject = _subject(fact, data)
    said: list[str] = []
    fields = [f for f in fact.answers if f in record and _usable(fact, f, record[f])]
    for i, key in enumerate(fields):
        value = _say(key, record[key], record, rng)
        if isinstance(record[key], bool):
            said.append(_yes_no(key, record[key], subject if i == 0 else None))
        elif key.endswith("_at") or key.endswith("_on"):
            said.append(f"{_cap(_field(key))}: {value}." if i else
                        f"For {subject or 'it'}, {_field(key)}: {value}.")
        elif key in ("status", "state") and isinstance(record[key], str):
            said.append(rng.choice(STATUS).format(Subject=_cap(subject or "it"), subject=subject or "it", value=value))
        elif i == 0:
            frame = rng.choice(FIRST_FIELD if subject else BARE_FIELD)
            said.append(frame.format(field=_field(key), Field=_cap(_field(key)), value=value,
                                     subject=subject, Subject=_cap(subject or "")))
        else:
            said.append(rng.choice(MORE_FIELD).format(field=_field(key), Field=_cap(_field(key)), value=value))
    return said or ([rng.choice(FOUND).format(desc=subject)] if subject else [_summary(data)])


ADJECTIVES = frozenset({"open", "active", "online", "available", "enabled", "visible", "public", "private", "locked",
                        "verified", "archived", "muted", "pinned", "starred", "read", "paid", "default", "primary"})


def _yes_no(key: str, value: bool, subject: str | None) -> str:
    """A yes/no field as a sentence: "The card is locked", "It has no unread messages" only where the
    field's name is a state; else "Update available: yes"."""
    words_ = key.split("_")
    who = _cap(subject or "it")
    if words_[0] == "is" and len(words_) > 1:
        return f"{who} is {'' if value else 'not '}{' '.join(words_[1:])}."
    if words_[0] == "has" and len(words_) > 1:
        return f"{who} {'has' if value else 'does not have'} {' '.join(words_[1:])}."
    if len(words_) == 1 and (key in ADJECTIVES or key.endswith("ed")) or (words_[-1] in ADJECTIVES and len(words_) <= 2):
        return f"{who} is {'' if value else 'not '}{' '.join(words_)}."
    return f"{_cap(_field(key))}: {'yes' if value else 'no'}."


def _listed(fact: Any, one: str, item: dict[str, Any], rng: random.Random) -> str:
    """One listed record: how a person names it, and the fields that answer the request."""
    described = describe(one.replace(" ", "_"), item) or _item(one, item) or one
    record = flat(item)
    facts = [f"{_field(k)} {_say(k, record[k], record, rng)}" for k in fact.answers
             if k in record and _usable(fact, k, record[k])
             and not (isinstance(record[k], str) and len(record[k]) > 2 and record[k] in described)]
    return f"{described} ({', '.join(facts)})" if facts else described


def shown(value: Any, seen: str) -> bool:
    """Whether ``value`` appears in the conversation so far (``seen``: its user turns and tool
    results): a reply only states what the assistant could know."""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int | float):
        return abs(float(value)) in _numbers(seen)
    return str(value) in seen


@functools.lru_cache(maxsize=64)
def _numbers(seen: str) -> frozenset[float]:
    """The numbers the results and arguments hold as values (not digits inside a date or a name)."""
    return frozenset(abs(float(t)) for t in re.findall(r"(?:: |\[|, )(-?\d+(?:\.\d+)?)(?=,|\]|\})", seen))


def _desc(change: Any, record: dict[str, Any] | None, seen: str, *, default: str | None = None) -> str:
    """How the reply names a changed record: as a person would, by details the conversation
    showed; else by its id when that was shown; else by its kind."""
    record = record or {}
    described = describe(change.entity, record)
    details = [v for k, v in record.items() if isinstance(v, str) and len(v) >= 3 and v != change.id
               and k not in KIND_FIELDS]  # what singles it out ("ending 4821", its name), not its kind
    if described and any(v in described and json.dumps(v, ensure_ascii=False) in seen for v in details):
        return described
    if change.id in seen:
        return f"{noun(change.entity)} {change.id}"
    return default or f"the {noun(change.entity)}"


def _changed(fact: Any, rng: random.Random) -> list[str]:
    """What a write changed, from the session's state: the records it acted on one by one
    (those it names first), the records that changed along with them in a sentence."""
    if not fact.changes:
        return [rng.choice(UNCHANGED)]
    asked = set(strings(fact.args))  # the records the request named: each said in full
    shown = set(strings(fact.data))
    groups: dict[tuple[str, str], list[Any]] = {}
    for change in fact.changes:
        groups.setdefault((change.kind, change.entity), []).append(change)
    order = sorted(groups.items(), key=lambda kv: (not any(c.id in asked | shown for c in kv[1]),
                                                   {"created": 0, "deleted": 1, "updated": 2}[kv[0][0]]))
    said: list[str] = []
    detailed = [kv for n, kv in enumerate(order) if n == 0 or any(c.id in asked for c in kv[1])]
    for (_, entity), changes in detailed:
        for change in changes[:3]:
            said += _one_change(fact, change, rng)
        if len(changes) > 3:
            said.append(f"Other {noun(entity)}s changed the same way.")
    for (kind, entity), changes in [kv for kv in order if kv not in detailed]:
        changes = [c for c in changes if c.id in fact.seen]  # records the conversation never showed go unsaid
        if not changes:
            continue
        n = len(changes)
        count = {1: "one", 2: "two", 3: "three"}.get(n, "several")  # a count no result states, said in words
        what = f"{count} {noun(entity)}{'s' if n > 1 else ''}" if n > 1 or kind != "created" else \
            (describe(entity, changes[0].after or {}) or f"a {noun(entity)}")
        said.append(rng.choice(ALONG).format(what=what, What=_cap(what), was="were" if n > 1 else "was",
                                             done={"created": "created", "deleted": "removed", "updated": "updated"}[kind]))
    record = flat(fact.data) if isinstance(fact.data, dict) else {}
    for key in fact.answers:  # what the write's result tells beside the changes (a new total)
        if key in record and _usable(fact, key, record[key]) and not any(key in c.fields for c in fact.changes) \
                and not (key == "status" and any(c.kind == "created" for c in fact.changes)):
            said.append(rng.choice(MORE_FIELD).format(field=_field(key), Field=_cap(_field(key)),
                                                      value=_say(key, record[key], record, rng)))
    return said


def _one_change(fact: Any, change: Any, rng: random.Random) -> list[str]:
    if change.kind == "created":
        record = change.after or {}
        desc = _desc(change, record, fact.seen, default=f"a new {noun(change.entity)}")
        if change.id in fact.seen and change.id not in desc:
            desc = rng.choice((f"{desc} ({change.id})", f"{desc}, id {change.id},", desc))
        frames = CREATED if fact.verb in CREATING else MADE_TOO  # else a record made along the way
        if frames is CREATED and noun(change.entity)[:4] == fact.verb[:4]:
            frames = CREATED_SAME  # no "I've invited the invitation", "I shared the share"
        text = rng.choice(frames).format(verbed=past(fact.verb), desc=desc, Desc=_cap(desc), noun=noun(change.entity))
        status = record.get("status")
        if isinstance(status, str) and "status" not in fact.hidden and shown(status, fact.seen) and rng.random() < 0.7:
            text = text.rstrip(".,") + f" — its status is {humanize(status)}."
        return [text.replace(",.", ".")]
    if change.kind == "deleted":
        desc = _desc(change, change.before, fact.seen)
        word = past(fact.verb) if fact.verb in ("delete", "remove", "cancel", "archive", "clear", "discard", "leave",
                                                 "withdraw", "unsubscribe", "unfollow", "revoke") else "removed"
        return [rng.choice(DELETED).format(verbed=word, desc=desc, Desc=_cap(desc))]
    return _updated(fact, change, rng)


def _leaves(key: str, old: Any, new: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str, str, Any, Any]]:
    """The scalar fields that differ between two versions of a field: (the nested part they sit
    in, the field, how to say it, old, new). ``windows.rear_left`` is "rear left window",
    ``battery.charge_limit_pct`` "battery charge limit", ``doors.rear_right.open`` "open" of the
    "rear right door"."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [((*path,), key, field_phrase(key), old, new)]
    plural = key.endswith("s") and len(key) > 3
    part = humanize(key)[:-1] if plural else humanize(key)
    out = []
    for sub in sorted(set(old) | set(new)):
        a, b = old.get(sub), new.get(sub)
        if a == b:
            continue
        named = f"{part} for {sub}" if ID_PATTERN.fullmatch(str(sub)) else f"{field_phrase(sub)} {part}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += [(p, f, ph, x, y) for p, f, ph, x, y in _leaves(sub, a, b, (*path, named))]
        elif not isinstance(a, list | dict) and not isinstance(b, list | dict):
            if path:
                out.append(((*path,), sub, field_phrase(sub), a, b))
            else:
                out.append(((), sub, named if plural else f"{part} {field_phrase(sub)}", a, b))
    return out


def _updated(fact: Any, change: Any, rng: random.Random) -> list[str]:
    before, after = change.before or {}, change.after or {}
    desc = _desc(change, after, fact.seen)
    said: list[str] = []
    pairs: list[tuple[str, str, Any, Any]] = []  # (what it is part of, field, old, new)
    for key in change.fields:
        if key in fact.hidden or key.endswith("_at") or key in ("updated", "modified", "version"):
            continue
        old, new = before.get(key), after.get(key)
        if isinstance(new, dict) and old is None:
            parts = [f"{_field(k)} {value_forms(k, v, new)[0]}" for k, v in new.items()
                     if not isinstance(v, list | dict) and v is not None and not k.endswith("_id") and k not in fact.hidden
                     and shown(v, fact.seen)][:3]
            said.append(f"{_cap(desc)} now has a {_field(key)}" + (f": {', '.join(parts)}." if parts else "."))
        elif isinstance(old, dict) and new is None:
            said.append(f"{_cap(desc)} no longer has a {_field(key)}.")
        elif isinstance(old, list) or isinstance(new, list):
            continue
        else:
            for path, leaf, phrase, a, b in _leaves(key, old, new):
                thing = f"the {path[-1]} of {desc}" if path else desc
                pairs.append((thing, leaf, phrase, a, b))
    for thing, key, phrase, old, new in pairs[:3]:
        if isinstance(new, bool):
            phrase = phrase.removeprefix("is ")
            said.append(_cap(f"{thing} is now {phrase}." if new else f"{thing} is no longer {phrase}."))
            continue
        if not shown(new, fact.seen):  # a value the conversation never showed is not stated
            said.append(rng.choice(UPDATED_BARE).format(field=phrase, desc=thing, Desc=_cap(thing)))
            continue
        if old is not None and not shown(old, fact.seen):
            said.append(rng.choice(UPDATED_NEW).format(field=phrase, Field=_cap(phrase), desc=thing, Desc=_cap(thing),
                                                       new=_say(key, new, after, rng)))
            continue
        old_text = "nothing" if old is None else _say(key, old, before, rng)
        new_text = "nothing" if new is None else _say(key, new, after, rng)
        frames = UPDATED_STATUS if key in ("status", "state") else UPDATED
        said.append(rng.choice(frames).format(field=phrase, Field=_cap(phrase), desc=thing,
                                              Desc=_cap(thing), old=old_text, new=new_text))
    return said or [rng.choice(("I've updated {desc}.", "{Desc} is updated.")).format(desc=desc, Desc=_cap(desc))]


def _sentence(error: dict[str, Any]) -> str:
    message = str(error.get("message") or humanize(str(error.get("reason") or error.get("code") or "it failed")))
    message = message.strip()
    return message[0].upper() + message[1:] + ("" if message.endswith((".", "!", "?")) else ".")


def _item(what: str, item: Any) -> str | None:
    """One listed record as the user would read it in a reply: its description and id."""
    if not isinstance(item, dict):
        return render_value(item) if isinstance(item, str | int | float) else None
    described = describe(what.replace(" ", "_"), item)
    rid = item.get("id") if isinstance(item.get("id"), str) else None
    if described is None:
        label = next((item[k] for k in ("path", "name", "email") if isinstance(item.get(k), str)), None)
        described = label
    if described is None:
        return rid
    return f"{described} ({rid})" if rid else described


def _summary(data: dict[str, Any]) -> str:
    """A sentence about one tool result: how many records a listing holds, or the main
    record's key facts."""
    # an empty list of ids ("contact_ids": []) says nothing a person would report
    lists = [(k, v) for k, v in data.items() if isinstance(v, list) and (v or not k.endswith("_ids"))]
    facts = []
    flat = dict(data)
    for key, value in data.items():  # one level of nesting: {"windows": {"driver_front": 20, ...}}
        if isinstance(value, dict) and len(data) <= 3:
            flat.pop(key)
            flat.update({k: v for k, v in value.items() if k not in flat})
    for key, value in flat.items():
        if key == "id" or key.endswith("_id") or value is None or isinstance(value, list | dict):
            continue
        if isinstance(value, bool):
            facts.append(f"{humanize(key)}: {'yes' if value else 'no'}")
            continue
        if isinstance(value, str | int | float) and len(str(value)) <= 60:
            facts.append(f"{humanize(key)}: {render_value(value)}")
        if len(facts) == 3:
            break
    if lists and (len(lists) >= len(facts) or not facts):
        key, items = lists[0]
        what = humanize(key)
        if not items:
            return f"There are no {what}."
        one = what[:-1] if what.endswith("s") else what
        head = f"There {'is' if len(items) == 1 else 'are'} {len(items)} {one if len(items) == 1 else what}"
        shown = [_item(one, item) for item in items[:3]]
        shown = [x for x in shown if x]
        if not shown:
            return head + "."
        more = f", and {len(items) - len(shown)} more" if len(items) > len(shown) else ""
        return f"{head}: " + "; ".join(shown) + more + "."
    if facts:
        text = ", ".join(facts)
        return text[0].upper() + text[1:] + "."
    return "It went through."


@hookimpl
def prove_register_teachers(register):
    register(ProgrammaticTeacher)
