"""Bundled teacher ``programmatic``: writes user and assistant text offline, from templates.

Tool calls never come from here — they come from the chain and the live state (see
``prove_core.synth.pipeline``). This teacher only puts them into words, with several personas and
sentence shapes so the corpus is not one sentence pattern repeated. The LLM teacher
(``plugins/synth/llm.py``) implements the same methods by asking a model.
"""

from __future__ import annotations

import json
import random
from typing import Any

from prove_core import hookimpl
from prove_core.synth.validation import ID_PATTERN

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
          "I tried, but it was refused: {message}", "Unfortunately that failed: {message} I've left everything as it was.",
          "I wasn't able to complete it: {message} Nothing was changed.")
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
    def report(self, results: list[tuple[str, dict[str, Any]]], rng: random.Random) -> str:
        pieces = []
        for _tool, data in results:
            pieces.append(_summary(data))
        return rng.choice(DONE).format(summary=" ".join(pieces))

    def failure(self, tool: str, error: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(FAILED).format(message=_sentence(error))

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

    def unavailable(self, capability: str, rng: random.Random) -> str:
        """The decline when the tool a request needs is not offered."""
        return rng.choice(UNAVAILABLE).format(capability=capability)

    def ask_instead(self, capability: str, entity: str, rng: random.Random) -> str:
        """The clarification when a lookup the request needs is not offered: ask for its result."""
        return rng.choice(ASK_INSTEAD).format(capability=capability, noun=noun(entity))


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
