"""Small shared shapes for tool bodies: paging, money, dates, guards with typed errors."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

from prove_core.errors import FailedPrecondition, InvalidArgument

MAX_PAGE_SIZE = 100


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
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{field} must be a date like 2026-03-01, got {value!r}", reason="BAD_DATE", field=field) from None


def require(condition: bool, message: str, *, reason: str, error: type = FailedPrecondition, **details: Any) -> None:
    """Raise a typed error (FAILED_PRECONDITION by default) unless ``condition`` holds."""
    if not condition:
        raise error(message, reason=reason, **details)


EARTH_RADIUS_KM = 6371.0088


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in kilometres between two points given in decimal degrees."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(min(1.0, a)))
