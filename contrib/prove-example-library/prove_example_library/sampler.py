"""A live-state sampler: which books can be borrowed now, found through read-only tool calls."""

from typing import Any


def available_books(runtime: Any, session_id: str, *, limit: int = 5) -> dict[str, list[str]]:
    """Ids of books with a free copy, sampled from the live session (never invented)."""
    result = runtime.call(session_id, "search_books", {"available_only": True, "limit": limit})
    if result.is_error:
        return {"book": []}
    return {"book": [book["id"] for book in result.data["books"]]}
