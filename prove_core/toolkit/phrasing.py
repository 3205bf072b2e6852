"""How users ask for a tool: phrasing templates and realistic values, declared on the tool.

A server author writes, beside a tool's examples, the ways a person would ask for it::

    @bank.tool(
        ...,
        asks=("move ${amount} from {from_account_id} to {to_account_id}",
              "transfer ${amount} out of {from_account_id} into {to_account_id}",
              "put ${amount} from {from_account_id} into {to_account_id}"),
        values={"amount": lambda rng, s: float(rng.choice((25, 40, 60, 120, 250)))},
    )

Templates are verb phrases in the user's words; synthesis wraps them in a persona's sentence
("Could you please {task}?"). The rules, checked by ``check_phrasings`` (which ``prove audit``
runs, check ``phrasings``; docs/servers.md has them as a table):

- a ``{slot}`` names a parameter of the tool;
- every required parameter that is not an entity reference (``ref(...)``) has a slot: the user
  states the values the call needs. Entity references may stay out of a template: the user
  names them in a context sentence, or they come from an earlier result ("then freeze it");
- optional parameters appear in some templates: synthesis includes an optional argument only
  when the chosen template mentions it, so the user has said every value the call carries;
- the text outside slots never spells out a tool or parameter name (no ``snake_case`` words);
- ``asks`` may be a callable of the call's arguments returning the templates, for wording that
  depends on a value (``"freeze {card_id}"`` vs ``"unfreeze {card_id}"``); a required yes/no or
  choice parameter it branches on needs no slot, and synthesis keeps every optional argument
  whose value changes the templates it returns.

All value sources of one call are given random generators with the same seed, so sources of
related fields can draw the same record (a new contact's name and e-mail address agree).

``values`` draw a realistic value per call for parameters the user chooses freely (a new
payee's name, an amount, a meeting title): ``(rng, state) -> value``, checked to pass the
tool's schema and to vary. A value that belongs with another one of the call takes a third
parameter named ``args`` (default None): the call's other arguments known so far (the entities the user named,
values drawn before it), given by ``draw_value`` — a limit price near the quote of the chosen
symbol, a merchant that fits the chosen category, an event's end an hour after its start. It must
still give a sensible value without them (``args`` None), and is checked both ways. A source
returns None when its parameter does not apply to the call (a size for a dish without sizes):
the call leaves it out. Numbers are
drawn as a person says them: money in whole units or cents, quantities and percentages round.

``answers`` (``prove_core.toolkit.answers``) name result fields; ``check_answers`` (run by
``check_phrasings``) requires each to appear in the result of at least one of the tool's
examples, at the depth ``answer_fields`` looks at (the result, or a listed record, with one
level of nesting lifted), and none to be a sensitive, id or bookkeeping field a reply never
states.
"""

from __future__ import annotations

import inspect
import random
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

from prove_core.toolkit.answers import BOOKKEEPING, flat, main_records, sensitive_fields
from prove_core.toolkit.server import ENTITY_KEY, ToolDef

MIN_TEMPLATES = 3
_IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def slots(template: str) -> list[str]:
    """The ``{param}`` slot names of a template, in order."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def templates(tool: ToolDef, args: Mapping[str, Any]) -> list[str]:
    """The templates of ``tool`` for a call with ``args`` (empty when it declares none)."""
    asks = tool.asks
    found = asks(args) if callable(asks) else asks
    return [t for t in found if isinstance(t, str)]


def fill(template: str, rendered: Mapping[str, str]) -> str:
    """The template with every slot replaced by its rendered value."""
    return template.format_map(dict(rendered))


def required_values(tool: ToolDef) -> set[str]:
    """Required parameters a template must mention: all but entity references."""
    params = tool.spec.parameters
    props = params.get("properties", {})
    return {p for p in params.get("required", []) if ENTITY_KEY not in props.get(p, {})}


def implied_by_wording(tool: ToolDef) -> set[str]:
    """Required yes/no and choice parameters a callable ``asks`` may leave out of its templates:
    the branch it takes says the value ("freeze" vs "unfreeze")."""
    if not callable(tool.asks):
        return set()
    props = tool.spec.parameters.get("properties", {})
    return {p for p in required_values(tool) if props.get(p, {}).get("type") == "boolean" or "enum" in props.get(p, {})}


def takes_args(source: Any) -> bool:
    """Whether a ``values`` source takes the call's other arguments (a parameter named ``args``)."""
    try:
        return "args" in inspect.signature(source).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def draw_value(source: Any, rng: random.Random, state: Any, args: Mapping[str, Any] | None = None) -> Any:
    """One value from a ``values`` source: given ``args`` (the call's other arguments known so far)
    when it takes them, so it draws what belongs with them."""
    if takes_args(source):
        return source(rng, state, dict(args) if args is not None else None)
    return source(rng, state)


def part_of(plan: Callable[..., Mapping[str, Any]], field: str) -> Callable[..., Any]:
    """A ``values`` source giving one ``field`` of ``plan(rng, state, args)``, a record drawn as a
    whole (a merchant with its amount, an event's title with its times). The sources of one call
    get same-seeded generators, so each draws the same record and the call's values agree."""

    def source(rng: random.Random, state: Any, args: Mapping[str, Any] | None = None) -> Any:
        return plan(rng, state, args)[field]

    return source


def check_template(tool: ToolDef, template: str) -> list[str]:
    """What is wrong with one template of ``tool`` (empty when nothing is)."""
    where = f"{tool.name}: {template!r}"
    try:
        named = slots(template)
    except ValueError as exc:
        return [f"{where}: {exc}"]
    props = tool.spec.parameters.get("properties", {})
    problems = [f"{where}: slot {{{name}}} is not a parameter" for name in named if name not in props]
    missing = sorted(required_values(tool) - set(named) - implied_by_wording(tool))
    if missing:
        problems.append(f"{where}: does not mention required {missing}")
    prose = re.sub(r"\{[^}]*\}", " ", template)
    spelled = [w for w in _IDENTIFIER.findall(prose)]
    if spelled:
        problems.append(f"{where}: spells out identifiers {spelled} (write what a user would say)")
    if not prose.strip():
        problems.append(f"{where}: has no words around its slots")
    return problems


def check_phrasings(tool: ToolDef, example_args: list[Mapping[str, Any]], state: Any) -> list[str]:
    """Problems with a tool's ``asks``, ``values`` and ``answers``: templates for each example's
    arguments (at least ``MIN_TEMPLATES`` over all of them), values that pass the schema and
    vary, and declared answers its examples' results carry (``check_answers``)."""
    problems: list[str] = check_answers(tool, example_args, state)
    seen: set[str] = set()
    for args in example_args or [{}]:
        try:
            found = templates(tool, args)
        except Exception as exc:  # noqa: BLE001 - a broken callable is reported, not raised
            problems.append(f"{tool.name}: asks({dict(args)}) raised {exc!r}")
            continue
        for template in found:
            if template not in seen:
                seen.add(template)
                problems += check_template(tool, template)
    if len(seen) < MIN_TEMPLATES:
        problems.append(f"{tool.name}: {len(seen)} phrasings; write at least {MIN_TEMPLATES}")
    return problems + check_values(tool, example_args, state)


def check_values(tool: ToolDef, example_args: list[Mapping[str, Any]], state: Any) -> list[str]:
    """Problems with a tool's ``values``: each names a parameter, and its draws (20, from seeds
    0..19, put into the first example's arguments) pass the schema and take at least 3 values."""
    problems: list[str] = []
    props = tool.spec.parameters.get("properties", {})
    base = dict(example_args[0]) if example_args else {}
    for param, source in tool.values.items():
        if param not in props:
            problems.append(f"{tool.name}: values names {param!r}, which is not a parameter")
            continue
        contexts = [None, *({k: v for k, v in a.items() if k != param} for a in example_args)] \
            if takes_args(source) else [None]
        for context in contexts:
            drawn = []
            for i in range(20):
                try:
                    value = draw_value(source, random.Random(i), state, context)
                    if value is not None:  # None: the parameter does not apply to this call
                        tool.validate({**base, **(context or {}), param: value})
                except Exception as exc:  # noqa: BLE001
                    problems.append(f"{tool.name}: values[{param!r}] gave an invalid value"
                                    f"{'' if context is None else f' for {context}'}: {exc}")
                    break
                drawn.append(repr(value))
            if context is None and len(drawn) == 20 and len(set(drawn)) < 3:  # one record may allow one value
                problems.append(f"{tool.name}: values[{param!r}] gave {len(set(drawn))} distinct values in 20 draws")
    return problems


def result_fields(data: Any) -> set[str]:
    """The field names a reply can state from one result: those of the result itself and of each
    record it lists, one level of nesting lifted (as ``answer_fields`` sees them)."""
    _, listed = main_records(data)
    records: list[Any] = list(listed)
    if isinstance(data, Mapping):  # and the records of every list it carries (a summary's categories)
        records += [x for v in data.values() if isinstance(v, list) for x in v if isinstance(x, Mapping)]
    found: set[str] = set()
    for record in [data, *records]:
        if isinstance(record, Mapping):
            found |= flat(record).keys()
    return found


def check_answers(tool: ToolDef, example_args: list[Mapping[str, Any]], state: Any) -> list[str]:
    """Problems with a tool's declared ``answers`` (``answer_problems``), its examples run on
    copies of ``state``, which stays unchanged."""
    if not tool.answers:
        return []
    results = []
    for args in example_args:
        work = type(state).from_snapshot(state.snapshot())
        try:
            results.append(tool.fn(work, **tool.validate(dict(args))))
        except Exception:  # noqa: BLE001 - a failing example shows no fields; reachability is checked elsewhere
            continue
    return answer_problems(tool, results)


def answer_problems(tool: ToolDef, results: list[Any]) -> list[str]:
    """Problems with a tool's declared ``answers`` given its examples' ``results``: a field none of
    them carries, a sensitive field a reply never repeats, or one ``answer_fields`` always skips
    (bookkeeping, ``..._id``)."""
    if not tool.answers:
        return []
    problems: list[str] = []
    hidden = sorted(set(tool.answers) & sensitive_fields(tool))
    if hidden:
        problems.append(f"{tool.name}: answers {hidden} are sensitive fields no reply repeats")
    skipped = sorted(f for f in tool.answers if f in BOOKKEEPING or f.endswith("_id"))
    if skipped:
        problems.append(f"{tool.name}: answers {skipped} are ids or bookkeeping, which never answer a request")
    seen: set[str] = set()
    for data in results:
        seen |= result_fields(data)
    missing = [f for f in tool.answers if f not in seen]
    if missing:
        problems.append(f"{tool.name}: answers {missing} appear in no example's result "
                        f"(fields seen: {sorted(seen) or 'none: every example failed'})")
    return problems
