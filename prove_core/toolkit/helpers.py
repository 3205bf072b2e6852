"""Small shared shapes for tool bodies: paging, money, dates, guards with typed errors."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from prove_core.errors import FailedPrecondition, InvalidArgument, NotFound
from prove_core.toolkit.state import Collection

T = TypeVar("T")

Record = dict[str, Any]
"""A record as tools see it: the plain JSON-like dict that ``Table`` reads and writes return
(``state.accounts.get(id)``) and that tools build their results from. Annotate with it."""

MAX_PAGE_SIZE = 100

ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"
"""Schema pattern of a calendar day, YYYY-MM-DD: ``Field(pattern=ISO_DATE, ...)``. The pattern
only checks the shape; ``parse_date`` rejects an impossible day (2026-02-30) with BAD_DATE."""

ISO_DATETIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def paginate(items: Sequence[dict[str, Any]], *, limit: int = 20, offset: int = 0, key: str = "items") -> dict[str, Any]:
    """One page of ``items``: ``{key: [...], "total": n, "next_offset": k | None}``."""
    if offset < 0:
        raise InvalidArgument("offset must be >= 0", reason="BAD_OFFSET")
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    page = list(items[offset : offset + limit])
    nxt = offset + limit if offset + limit < len(items) else None
    return {key: page, "total": len(items), "next_offset": nxt}


def money(value: float) -> float:
    """Round to cents the way a ledger would (half away from zero, not banker's rounding);
    ``+ 0.0`` turns the ``-0.0`` that rounding a tiny negative gives into ``0.0``."""
    return float(f"{value + (1e-9 if value >= 0 else -1e-9):.2f}") + 0.0


def parse_date(value: str, field: str) -> dt.date:
    """``value`` as a date, or INVALID_ARGUMENT / BAD_DATE naming ``field``."""
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{field} must be a date like 2026-03-01, got {value!r}", reason="BAD_DATE", field=field) from None


def iso_datetime(when: dt.datetime) -> str:
    """A moment as tools store and show it: UTC to the second with a ``Z``,
    ``2026-03-01T09:30:00Z``. An aware time is converted to UTC first; a naive one is taken to be
    UTC already (never the host's zone, so a seed means the same data everywhere). Strings in this
    one format compare in time order, so tools compare stamps as text."""
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC)
    return when.strftime(ISO_DATETIME_FORMAT)


#: Wall-clock times to the minute, as servers with opening hours and schedules show them.
MINUTE_FORMAT = "%Y-%m-%dT%H:%M"


def local_minute(state: Any) -> dt.datetime:
    """The session clock (``state.now()``) as a naive wall-clock time, to the minute: the time
    a server compares opening hours and schedules with."""
    now: dt.datetime = state.now()
    return now.replace(tzinfo=None, second=0, microsecond=0)


def minute_text(when: dt.datetime) -> str:
    """``when`` in ``MINUTE_FORMAT`` (``2026-03-01T09:30``)."""
    return when.strftime(MINUTE_FORMAT)


def require(condition: bool, message: str, *, reason: str, error: type = FailedPrecondition, **details: Any) -> None:
    """Raise a typed error (FAILED_PRECONDITION by default) unless ``condition`` holds."""
    if not condition:
        raise error(message, reason=reason, **details)


def lookup(table: Collection | Mapping[Any, Any], key: Any, /, *, what: str | None = None, message: str | None = None,
           reason: str | None = None, **details: Any) -> Any:
    """The record stored under ``key`` in ``table``, or a typed NOT_FOUND.

    ``table`` is a state table (``state.reps``: the record comes back as a copy, as from ``get``)
    or any mapping, such as a module-level catalogue of airport codes. Use it instead of
    ``if key not in table: raise NotFound(...)``; for a plain id lookup with the standard error,
    ``state.table.get(id)`` is enough. The error is built the same way everywhere:

    - ``message``: default ``"<what> <key!r> does not exist"`` (what ``Collection.get`` says);
    - ``reason``: default ``<WHAT>_NOT_FOUND`` (spaces become underscores);
    - details: the keyword arguments given, or ``id=key`` when there are none.

    ``what`` defaults to the table's entity name (required for a plain mapping unless both
    ``message`` and ``reason`` are given)::

        rep = lookup(state.reps, owner_id, message=f"no sales rep {owner_id!r}", reason="OWNER_NOT_FOUND")
        lookup(AIRPORTS, code, what="airport", code=code)   # AIRPORT_NOT_FOUND, details {"code": ...}
    """
    if isinstance(table, Collection):
        value = table.find(key)
        missing = value is None
        what = what or table.entity
    else:
        missing = key not in table
        value = None if missing else table[key]
    if missing:
        if what is None and (message is None or reason is None):
            raise TypeError("lookup() on a plain mapping needs what= (or both message= and reason=)")
        raise NotFound(
            message if message is not None else f"{what} {key!r} does not exist",
            reason=reason or f"{str(what).upper().replace(' ', '_')}_NOT_FOUND",
            **(details or {"id": key}),
        )
    return value


def require_found(value: T | None, message: str, *, reason: str, **details: Any) -> T:
    """``value`` unless it is None, else NOT_FOUND with this message, reason and details: the
    guard for a search that may come back empty (``state.people.first(email=...)``,
    ``next((i for i in items if ...), None)``), where ``lookup`` needs a key."""
    if value is None:
        raise NotFound(message, reason=reason, **details)
    return value


EARTH_RADIUS_KM = 6371.0088


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in kilometres between two points given in decimal degrees."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(min(1.0, a)))
