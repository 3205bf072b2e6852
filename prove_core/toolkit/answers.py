"""What a tool's result means to the person who asked: which fields answer the request, and
which must never be repeated back to them.

A server author declares both beside a tool's phrasings::

    @bank.tool(read_only=True, ..., answers=("available_balance", "current_balance"))
    def get_balance(...): ...

    travel = Server("travel_booking", ..., sensitive=("passport_number",))

``answers`` names fields of the result (at any depth: for a listing, fields of each listed
record) that a reply to the request must state; ``sensitive`` names fields a reply never repeats
(on a server: for all its tools; on a tool: for that tool). Some fields are sensitive whatever a
server says (``SENSITIVE_FIELDS``: dates of birth, passport and card numbers, secrets).

Synthesis writes every reply from these (``plugins/synth/teacher.py``), and the corpus figure
``answered_reads`` (``prove_core/synth/quality.py``) checks that the answering fields of every
read the user asked for appear in the reply that follows. A tool that declares no ``answers``
gets them inferred by ``answer_fields``: the fields the request or the tool's name mentions,
else the result's amounts, counts and states.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

SENSITIVE_FIELDS = frozenset({
    "date_of_birth", "birth_date", "birthdate", "dob", "ssn", "social_security_number", "national_id", "tax_id",
    "passport_number", "card_number", "cvv", "cvc", "pin", "password", "password_hash", "secret", "api_key",
    "access_token", "refresh_token", "security_answer", "iban", "routing_number", "account_number",
})
# Fields nobody asks about: bookkeeping a reply has no reason to state.
BOOKKEEPING = frozenset({"id", "as_of", "created_at", "updated_at", "modified_at", "etag", "version", "cursor",
                         "next_cursor", "page", "page_size", "offset", "has_more", "_seq"})
# Words that say what a field is about, never what the user asked for.
_FILLER = frozenset({"get", "list", "show", "find", "search", "check", "my", "the", "of", "a", "an", "for", "in", "on",
                     "all", "me", "id", "ids", "info", "details", "detail", "is", "to", "and", "with", "what", "how"})
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    """The lower-case words of a name or a sentence, with a plural ``s`` also given bare."""
    found = set(_WORD.findall(text.lower().replace("_", " ")))
    return found | {w[:-1] for w in found if len(w) > 3 and w.endswith("s")}


def sensitive_fields(tool: Any) -> frozenset[str]:
    """The fields a reply about ``tool``'s result never repeats (its own, its server's, and
    ``SENSITIVE_FIELDS``)."""
    return SENSITIVE_FIELDS | frozenset(getattr(tool, "sensitive", ()) or ())


def main_records(data: Any, given: Iterable[Any] = ()) -> tuple[str | None, list[dict[str, Any]]]:
    """The records a result is about: ``(key, items)`` for a listing (its longest list of
    records, ``key`` the list's field; the other fields only repeat the request's ``given``
    values or count), else ``(None, [data])``."""
    said = {str(v).lower() for v in given if isinstance(v, str | int | float) and not isinstance(v, bool)}
    if isinstance(data, dict):
        lists = [(k, v) for k, v in data.items() if isinstance(v, list) and all(isinstance(x, dict) for x in v)
                 and (v or not k.endswith("_ids"))]
        if lists:
            key, items = max(lists, key=lambda kv: len(kv[1]))
            # a record that carries a list (an event and its attendees) is a record, not a listing
            scalars = [k for k, v in data.items() if k not in BOOKKEEPING and not k.endswith("_id")
                       and not isinstance(v, list | dict) and not words(k) & {"count", "total", "offset", "next"}
                       and str(v).lower() not in said]
            if len(scalars) <= 2:
                return key, items
        return None, [data]
    if isinstance(data, list):
        return "items", [x for x in data if isinstance(x, dict)]
    return None, []


def flat(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record's scalar fields, with one level of nested mappings lifted up
    (``{"windows": {"rear_right": 50}}`` gives ``rear_right``)."""
    out: dict[str, Any] = {}
    for key, value in sorted(record.items()):  # the same fields whatever order the keys come in
        if isinstance(value, Mapping):
            for k, v in value.items():
                if not isinstance(v, Mapping | list):
                    out.setdefault(k, v)
        elif not isinstance(value, list):
            out[key] = value
    return out


def what_answers(tool: Any, data: Any, request: str = "",
                 given: Iterable[Any] = ()) -> tuple[str | None, list[dict[str, Any]], list[str]]:
    """How a reply answers a read: ``(listing, records, fields)`` — the list field when the
    result is a listing, the records it is about (flattened), and the fields of each that answer
    the request. The reply writer and the corpus check both use it, so they agree."""
    given = list(given)
    listing, items = main_records(data, given)
    declared = tuple(getattr(tool, "answers", ()) or ())
    if listing is None and declared and isinstance(data, Mapping) and not set(declared) & set(flat(data)):
        lists = [(k, v) for k, v in data.items() if isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v)
                 and set(declared) & set(flat(v[0]))]
        if lists:  # the tool says its answer is in the records it lists (a search with many echo fields)
            listing, items = max(lists, key=lambda kv: len(kv[1]))
    records = [flat(item) for item in items]
    fields = answer_fields(tool, records[0], request, given=given) if records else []
    return listing, records, fields


def answer_fields(tool: Any, record: Mapping[str, Any], request: str = "", *, given: Iterable[Any] = ()) -> list[str]:
    """The fields of ``record`` (a result, or one listed record) that answer a request for
    ``tool``: its declared ``answers`` present in the record; else the fields the ``request``
    text or the tool's name mentions; else its amounts, counts and states. Sensitive and
    bookkeeping fields never answer, nor do values the user gave (``given``: echoing "type:
    checking" back is not an answer)."""
    fields = dict(sorted(flat(record).items()))  # the same answer whatever order the result's keys come in
    hidden = sensitive_fields(tool)
    said = {str(v).lower() for v in given if isinstance(v, str | int | float) and not isinstance(v, bool)}

    def usable(key: str) -> bool:
        value = fields[key]
        return (key not in hidden and key not in BOOKKEEPING and not key.endswith("_id") and value is not None
                and value != "" and not (isinstance(value, str) and value.lower() in said and key != "status"))

    declared = [k for k in (getattr(tool, "answers", ()) or ()) if k in fields and usable(k)]
    if declared:
        return declared
    asked = (words(request) | words(getattr(tool, "name", "") or "")) - _FILLER
    named = [k for k in fields if usable(k) and topic(k) and topic(k) <= asked]
    named += [k for k in fields if usable(k) and k not in named and topic(k) & asked]
    if named:
        return named[:3]
    measures = [k for k, v in fields.items() if usable(k) and isinstance(v, int | float) and not isinstance(v, bool)]
    states = [k for k, v in fields.items() if usable(k) and k in ("status", "state") and isinstance(v, str)]
    return (states + measures)[:3] or [k for k in fields if usable(k)][:3]


MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
MONEY = frozenset({"balance", "amount", "price", "total", "cost", "fee", "limit", "spent", "budget", "payment", "refund",
                   "subtotal", "tax", "tip", "fare", "salary", "owed", "due", "paid", "charge", "deposit", "overdraft",
                   "revenue", "value", "remaining", "available", "hold", "held"})
SIGNS = {"USD": "$", "EUR": "€", "GBP": "£"}
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$")


# A field's last word that is its unit: said after the value, left out of the field's name.
UNITS = {"pct": "%", "percent": "%", "km": " km", "kmh": " km/h", "kwh": " kWh", "kw": " kW", "kg": " kg",
         "minutes": " minutes", "min": " minutes", "mins": " minutes", "hours": " hours", "days": " days",
         "seconds": " seconds", "mb": " MB", "gb": " GB", "bytes": " bytes", "miles": " miles", "m": " m",
         "celsius": " °C", "c": " °C", "deg": "°", "mph": " mph", "kb": " KB", "cents": " cents"}


def unit(field: str) -> str:
    last = field.lower().rsplit("_", 1)[-1]
    return UNITS.get(last, "") if "_" in field else ""


def field_phrase(field: str) -> str:
    """A field's name as a person says it: words, without its unit (``range_km`` → "range")."""
    parts = field.lower().split("_")
    if len(parts) > 1 and parts[-1] in UNITS:
        parts = parts[:-1]
    return " ".join(p for p in parts if p)


def topic(field: str) -> set[str]:
    """The words of a field's name that say what it is about (no units, no filler)."""
    return words(field_phrase(field)) - _FILLER


def is_money(field: str, value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and bool(words(field) & MONEY) \
        and not words(field) & {"count", "number", "days", "percent", "pct", "rate", "minutes", "hours"}


def value_forms(field: str, value: Any, record: Mapping[str, Any] | None = None) -> list[str]:
    """The ways a reply may state ``value`` (of ``field`` in ``record``), the first the
    plainest: money with its currency, dates in words or ISO, enum words without underscores.
    The reply writer picks one; the corpus check accepts any (and numbers by value)."""
    record = record or {}
    if isinstance(value, bool):
        return ["yes", "on", "enabled", "true"] if value else ["no", "off", "disabled", "false", "not"]
    if isinstance(value, int | float):
        if is_money(field, value):
            currency = record.get("currency") if isinstance(record.get("currency"), str) else None
            if currency is not None and currency.islower() and isinstance(value, int):
                value, currency = value / 100, currency.upper()  # minor units ("eur", 15999): 159.99 EUR
            sign = "-" if value < 0 else ""
            text = f"{abs(value):,.2f}" if round(value, 2) == value else f"{abs(value):,.6f}".rstrip("0")  # 0.5725 stays
            if currency in SIGNS:
                return [f"{sign}{SIGNS[currency]}{text}", f"{sign}{text} {currency}"]
            return [f"{sign}{text} {currency}" if currency else f"{sign}{text}"]
        text = f"{value:.6f}".rstrip("0").rstrip(".") if isinstance(value, float) and not value.is_integer() \
            else str(int(value))  # as the result gives it: 37.6213 stays 37.6213
        if words(field) & {"percent", "pct", "percentage"}:
            return [f"{text}%", f"{text} percent"]
        suffix = unit(field)
        return [f"{text}{suffix}", text] if suffix else [text]
    text = str(value)
    match = _DATE.match(text)
    if match:
        year, month, day, hour, minute = match.groups()
        when = f"{MONTHS[int(month) - 1]} {int(day)}, {year}" if 1 <= int(month) <= 12 else text
        if hour is not None:
            return [f"{when} at {hour}:{minute}", f"{year}-{month}-{day} {hour}:{minute}", text]
        return [when, text]
    plain = text.replace("_", " ")
    return [plain, text] if plain != text else [text]


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def states(reply: str, field: str, value: Any, record: Mapping[str, Any] | None = None) -> bool:
    """Whether ``reply`` states ``value``: a number by its value (``$1,204.50`` states 1204.5,
    ``1409`` does not state 40), anything else by one of its ``value_forms``; a yes/no field by
    its name."""
    if value is None or value == "":
        return True
    low = reply.lower()
    if isinstance(value, bool):
        return bool(words(field) - _FILLER & words(reply))
    if isinstance(value, int | float):
        currency = (record or {}).get("currency")
        if is_money(field, value) and isinstance(currency, str) and currency.islower() and isinstance(value, int):
            value = value / 100  # minor units, said as major ones (value_forms)
        for token in _NUMBER.findall(reply):
            try:
                if abs(abs(float(token.replace(",", ""))) - abs(float(value))) < 0.006:
                    return True
            except ValueError:
                continue
        return False
    return any(form.lower().rstrip(".") in low for form in value_forms(field, value, record))
