"""`python -m app.cli index-sessions` (wired in app/cli.py): the idle index until done."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from app.config import Settings
from app.db.engine import create_engine, resolve_database_url, session_factory, transaction
from app.domain.raw_history.idle_index import (
    ROWS_PER_PASS,
    IndexPassResult,
    Progress,
    idle_before,
    index_idle_sessions,
)
from app.domain.raw_history.state_repository import RawIndexRepository
from app.llm.factory import build_gateway


def _bar(done: int, total: int, width: int = 30) -> str:
    filled = width if total <= 0 else min(width, width * done // total)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _progress_printer(tty: bool, sessions: int, messages: int) -> Progress:
    """Prints the bar to stderr: redrawn in place on a terminal, else a line every 20
    batches and at the end."""

    def show(r: IndexPassResult) -> None:
        if tty or r.batches % 20 == 0 or r.messages >= messages:
            line = (
                f"{_bar(r.messages, messages)} {r.messages}/{messages} messages,"
                f" {r.sessions}/{sessions} sessions, {r.chunks} chunks"
            )
            print(
                ("\r" + line) if tty else line,
                end="" if tty else "\n",
                file=sys.stderr,
                flush=True,
            )

    return show


async def _index_all(settings: Settings, url: str, args: argparse.Namespace) -> IndexPassResult:
    """Every idle session's pending messages, with the totals and a progress bar."""
    tty = sys.stderr.isatty()
    engine = create_engine(url, settings)
    llm = build_gateway(settings)
    factory = session_factory(engine)
    before = idle_before(settings, datetime.now(UTC), args.older_than)
    try:
        async with transaction(factory) as db:
            state = RawIndexRepository(db)
            await state.ensure_idle_rows(before, args.user, limit=ROWS_PER_PASS)
            sessions, messages = await state.pending_totals(before, args.user)
        print(
            f"index-sessions: {sessions} session(s), {messages} message(s) to index",
            file=sys.stderr,
            flush=True,
        )
        return await index_idle_sessions(
            factory,
            llm,
            settings,
            older_than_minutes=args.older_than,
            user_id=args.user,
            max_batches=None,
            progress=_progress_printer(tty, sessions, messages),
        )
    finally:
        if tty:
            print(file=sys.stderr)
        await llm.aclose()
        await engine.dispose()


def cmd_index_sessions(settings: Settings, args: argparse.Namespace) -> None:
    """`index-sessions`: index every idle session's unindexed messages, until none is
    left (resumable: each batch commits on its own)."""
    from app.db import migrate
    from app.lib.logging import configure_logging

    configure_logging(settings.log_level, settings.log_json)
    url = resolve_database_url(settings)
    migrate.upgrade(url)
    result = asyncio.run(_index_all(settings, url, args))
    print(f"index-sessions: {result.summary()}")
    if result.failed:
        print(
            f"index-sessions: {result.failed} batch(es) failed (embedder); run it again to "
            "retry them",
            file=sys.stderr,
        )
        raise SystemExit(1)


def add_command(sub: Any, settings_or_exit: Callable[[], Settings]) -> None:
    """Register `index-sessions` on the CLI's sub-parsers."""
    p = sub.add_parser(
        "index-sessions",
        help="index the messages of idle sessions that the raw index does not cover yet",
    )
    p.add_argument(
        "--older-than",
        type=float,
        default=None,
        metavar="MINUTES",
        help="sessions idle for at least this long (default RAW_INDEX_IDLE_MINUTES)",
    )
    p.add_argument("--user", default=None, metavar="ID", help="only this user's sessions")
    p.set_defaults(fn=lambda args: cmd_index_sessions(settings_or_exit(), args))
