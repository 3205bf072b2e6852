"""Bundled teacher ``programmatic``: writes user and assistant text offline, from templates.

Tool calls never come from here — they come from the chain and the live state (see
``prove_core.synthesis``). This teacher only puts them into words, with several personas and
sentence shapes so the corpus is not one sentence pattern repeated. The LLM teacher
(``plugins/llm.py``) implements the same methods by asking a model.
"""

from __future__ import annotations

import json
import random
from typing import Any

import attrs

from prove_core import hookimpl

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
               "Good morning. Would you {task}?"),
    "casual": ("hey, can you {task}?", "can u {task} for me", "ok so I need you to {task}"),
    "busy": ("Quick one: {task}.", "Need this now — {task}.", "{task}, thanks."),
    "detailed": ("I'm sorting out some things today. First, I need to {task}. Thanks in advance!",
                 "Here's what I need: {task}. Let me know once it's done.",
                 "I've been meaning to deal with this for a while: please {task}."),
}
FOLLOW_UPS = ("Great. Now {task}.", "Thanks! Next, {task}.", "Perfect — could you also {task}?",
              "One more thing: {task}.", "Ok. Then {task}, please.")
CLARIFY = ("Sure — what {what} should I use?", "I can do that. Which {what} do you mean?",
           "Before I go ahead: could you tell me the {what}?", "Happy to help. I just need the {what}.")
ANSWERS = ("It's {value}.", "{value}", "Use {value}.", "Oh right, {value}.", "The {what} is {value}.")
DONE = ("Done. {summary}", "All set. {summary}", "Here you go: {summary}", "{summary}")
FAILED = ("I couldn't {task}: {message}", "That didn't go through — {message}",
          "I tried to {task}, but it failed: {message}")
RETRY = ("That call was rejected ({message}); let me fix the arguments and try again.",
         "Oops, wrong arguments ({message}). Retrying with corrected values.")
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
           "I can't help with that request; I can only work with {what_i_can}.")
TERSE = ("{task}", "{task} pls", "{task}.")


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


@attrs.frozen(kw_only=True)
class ProgrammaticTeacher:
    name: str = "programmatic"
    description: str = "Offline teacher: varied templates and personas around calls from live state."

    def persona(self, rng: random.Random) -> str:
        return rng.choice(sorted(PERSONAS))

    def system_prompt(self, servers: list[str], today: str) -> str:
        return (f"You are an assistant that acts through the tools of these services: {', '.join(servers)}. "
                f"Today is {today}. Call tools to do what the user asks, use ids from earlier results, "
                "ask for missing information instead of guessing, and say so when no tool can help.")

    def intent(self, tool: str, values: dict[str, Any], rng: random.Random) -> str:
        parts = words(tool)
        verb = parts[0]
        phrase = rng.choice(VERBS.get(verb, (verb,)))
        obj = " ".join(parts[1:]) if len(parts) > 1 else ""
        details = ", ".join(f"{param_phrase(k)} {render_value(v)}" for k, v in values.items())
        text = f"{phrase} {obj}".strip()
        return f"{text} ({details})" if details and rng.random() < 0.5 else (f"{text} with {details}" if details else text)

    def user_request(self, intents: list[str], persona: str, minimal: bool, follow_up: bool, rng: random.Random,
                     values: tuple[Any, ...] = ()) -> str:
        """The user's message for one turn; ``intents`` already name the ``values`` the user gives."""
        task = " and then ".join(intents)
        if minimal:
            return rng.choice(TERSE).format(task=task)
        if follow_up:
            return rng.choice(FOLLOW_UPS).format(task=task)
        return rng.choice(PERSONAS[persona]).format(task=task)

    def clarify_question(self, param: str, rng: random.Random) -> str:
        return rng.choice(CLARIFY).format(what=param_phrase(param))

    def clarify_answer(self, param: str, value: Any, rng: random.Random) -> str:
        return rng.choice(ANSWERS).format(value=render_value(value), what=param_phrase(param))

    def report(self, results: list[tuple[str, dict[str, Any]]], rng: random.Random) -> str:
        pieces = []
        for tool, data in results:
            scalars = [(k, v) for k, v in data.items() if isinstance(v, str | int | float | bool) and v is not None]
            shown = ", ".join(f"{param_phrase(k)}: {render_value(v)}" for k, v in scalars[:3])
            lists = [(k, len(v)) for k, v in data.items() if isinstance(v, list)]
            if lists and not shown:
                shown = ", ".join(f"{n} {param_phrase(k)}" for k, n in lists[:2])
            pieces.append(f"{' '.join(words(tool))} — {shown}" if shown else f"{' '.join(words(tool))} done")
        return rng.choice(DONE).format(summary="; ".join(pieces) + ".")

    def failure(self, tool: str, error: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(FAILED).format(task=" ".join(words(tool)), message=error.get("message", error.get("code")))

    def retry_note(self, error: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(RETRY).format(message=error.get("reason", error.get("code")))

    def irrelevant_request(self, rng: random.Random) -> str:
        form = rng.choice(IRRELEVANT_FORMS)
        return form.format(**{k: rng.choice(v) for k, v in IRRELEVANT_FILL.items()})

    def decline(self, servers: list[str], rng: random.Random) -> str:
        return rng.choice(DECLINE).format(what_i_can=" and ".join(servers))


@hookimpl
def prove_register_teachers(register):
    register(ProgrammaticTeacher())
