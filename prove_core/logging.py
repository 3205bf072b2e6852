"""Logging, configured in one place. Plugins only call ``structlog.get_logger()``.

Humans get a console renderer on stderr; ``--log-json`` gives one JSON object per line. Bind
run/session/server context with ``structlog.contextvars.bind_contextvars(run=..., server=...)``.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure(*, json: bool = False, level: str = "info") -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # sys.stderr is looked up when a line is logged, not bound now: a caller that swaps it
        # (click's test runner, pytest's capture) and closes it later must not break later logging
        logger_factory=lambda *args: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )
    # Quiet the libraries we serve through; their INFO lines drown ours.
    for noisy in ("mcp", "fastmcp", "uvicorn", "httpx", "stevedore"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
