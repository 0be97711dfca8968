"""`python -m app.cli reembed` (wired in app/cli.py) and `serve`'s check of the vector
columns' dimension."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import Any

from app.config import Settings
from app.domain.reembed.services import ReembedError, ReembedResult, dimension_mismatch, reembed
from app.llm.factory import build_gateway


def check_database_dimension(settings: Settings, url: str) -> str | None:
    """`serve`'s start-up check (see dimension_mismatch); None with EMBEDDING_PROVIDER=none,
    which writes no vectors."""
    if settings.embedding_provider == "none":
        return None
    from app.db.engine import create_engine, session_factory

    async def go() -> str | None:
        engine = create_engine(url)
        try:
            return await dimension_mismatch(session_factory(engine), settings.vector_dim)
        finally:
            await engine.dispose()

    return asyncio.run(go())


def _positive(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def cmd_reembed(settings: Settings, args: argparse.Namespace) -> None:
    from app.db import migrate
    from app.db.engine import create_engine, resolve_database_url, session_factory
    from app.lib.logging import configure_logging

    if settings.embedding_provider == "none":
        print("reembed: EMBEDDING_PROVIDER=none: there is no embedder to use", file=sys.stderr)
        raise SystemExit(2)
    configure_logging(settings.log_level, settings.log_json)
    url = resolve_database_url(settings)
    migrate.upgrade(url)

    def to_stderr(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    async def go() -> ReembedResult:
        engine = create_engine(url, settings)
        llm = build_gateway(settings)
        try:
            return await reembed(
                session_factory(engine),
                llm,
                batch_size=args.batch_size or settings.embedding_batch_size,
                limit=args.limit,
                progress=to_stderr,
            )
        finally:
            await llm.aclose()
            await engine.dispose()

    try:
        result = asyncio.run(go())
    except ReembedError as exc:
        print(f"reembed: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print(result.summary())
    if result.error:
        print(f"reembed: stopped: {result.error}; run it again to resume", file=sys.stderr)
        raise SystemExit(1)


def add_command(sub: Any, settings_or_exit: Callable[[], Settings]) -> None:
    """Register `reembed` on the CLI's sub-parsers."""
    p = sub.add_parser(
        "reembed",
        help="align the vector columns to the embedder's dimension and embed rows without one",
    )
    p.add_argument(
        "--batch-size",
        type=_positive,
        default=None,
        help="rows per transaction (EMBEDDING_BATCH_SIZE)",
    )
    p.add_argument("--limit", type=_positive, default=None, help="stop after this many rows")
    p.set_defaults(fn=lambda args: cmd_reembed(settings_or_exit(), args))
