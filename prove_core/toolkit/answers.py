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
                         "next_cursor", "page", "page_size", "offset", "limit", "has_more", "_seq"})
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


def main_records(data: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """The records a result is about: ``(key, items)`` for a listing (its longest list of
    records, ``key`` the list's field), else ``(None, [data])``."""
    if isinstance(data, dict):
        lists = [(k, v) for k, v in data.items() if isinstance(v, list) and all(isinstance(x, dict) for x in v)
                 and (v or not k.endswith("_ids"))]
        if lists:
            key, items = max(lists, key=lambda kv: len(kv[1]))
            scalars = [k for k, v in data.items() if k not in BOOKKEEPING and not k.endswith("_id")
                       and not isinstance(v, list | dict)]
            if items or len(scalars) <= 1:
                return key, items
        return None, [data]
    if isinstance(data, list):
        return "items", [x for x in data if isinstance(x, dict)]
    return None, []


def flat(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record's scalar fields, with one level of nested mappings lifted up
    (``{"windows": {"rear_right": 50}}`` gives ``rear_right``)."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            for k, v in value.items():
                if not isinstance(v, Mapping | list):
                    out.setdefault(k, v)
        elif not isinstance(value, list):
            out[key] = value
    return out


def answer_fields(tool: Any, record: Mapping[str, Any], request: str = "", *, given: Iterable[Any] = ()) -> list[str]:
    """The fields of ``record`` (a result, or one listed record) that answer a request for
    ``tool``: its declared ``answers`` present in the record; else the fields the ``request``
    text or the tool's name mentions; else its amounts, counts and states. Sensitive and
    bookkeeping fields never answer, nor do values the user gave (``given``: echoing "type:
    checking" back is not an answer)."""
    fields = flat(record)
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
    named = [k for k in fields if usable(k) and words(k) - _FILLER and (words(k) - _FILLER) <= asked]
    if not named:
        named = [k for k in fields if usable(k) and words(k) & asked]
    if named:
        return named[:4]
    measures = [k for k, v in fields.items() if usable(k) and isinstance(v, int | float) and not isinstance(v, bool)]
    states = [k for k, v in fields.items() if usable(k) and k in ("status", "state") and isinstance(v, str)]
    return (states + measures)[:3] or [k for k in fields if usable(k)][:3]
