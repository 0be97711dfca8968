"""`python -m app.cli extract` and `python -m app.cli backfill` (wired in app/cli.py)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # the CLI parses its arguments before importing the heavy modules
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

    from app.config import Settings
    from app.llm.gateway import LLMGateway

T = TypeVar("T")


async def _run(
    settings: Settings,
    fn: Callable[[async_sessionmaker[AsyncSession], LLMGateway], Awaitable[T]],
) -> T:
    from app.db.engine import create_engine, resolve_database_url, session_factory
    from app.lib.logging import configure_logging
    from app.llm.factory import build_gateway

    configure_logging(settings.log_level, settings.log_json)
    engine = create_engine(resolve_database_url(settings), settings)
    llm = build_gateway(settings)
    try:
        return await fn(session_factory(engine), llm)
    finally:
        await llm.aclose()
        await engine.dispose()


def cmd_extract(settings: Settings, args: argparse.Namespace) -> None:
    from app.domain.facts.extraction import run_extraction_pass
    from app.domain.kernel.runtime import Runtime

    result = asyncio.run(
        _run(
            settings,
            lambda factory, llm: run_extraction_pass(
                Runtime.of(settings, factory, llm), max_sessions=args.max_sessions
            ),
        )
    )
    print(
        f"extracted {result.extracted} session(s), {result.failed} failed, "
        f"{result.facts_saved} fact(s) saved, {result.purged} expired fact(s) purged"
    )
    if result.stopped_early:
        print("stopped early: the LLM server is unreachable", file=sys.stderr)
        raise SystemExit(1)


def cmd_backfill(settings: Settings, args: argparse.Namespace) -> None:
    from app.domain.facts.backfill import ProgressBar, backfill_embeddings, count_pending

    async def go(factory: async_sessionmaker[AsyncSession], llm: LLMGateway) -> Any:
        pending = await count_pending(factory)
        total = pending if args.limit is None else min(pending, args.limit)
        bar = ProgressBar(total)
        try:
            return await backfill_embeddings(
                factory,
                llm,
                batch_size=args.batch_size,
                pause=args.pause,
                limit=args.limit,
                on_progress=bar.update,
                concurrency=args.concurrency,
            )
        finally:
            bar.close()

    result = asyncio.run(_run(settings, go))
    print(
        f"embedded {result.embedded} fact(s) in {result.seconds:.1f}s "
        f"({result.rate:.1f} facts/s); {result.remaining} still without an embedding"
    )
    if result.error:
        print(f"stopped: {result.error}", file=sys.stderr)
        raise SystemExit(1)


def add_commands(sub: Any, settings_or_exit: Callable[[], Settings]) -> None:
    """Register `extract` and `backfill` on the CLI's sub-parsers."""
    ext = sub.add_parser("extract", help="one pass of fact extraction over stale sessions")
    ext.add_argument("--max-sessions", type=int, default=50, help="sessions per pass (50)")
    ext.set_defaults(fn=lambda a: cmd_extract(settings_or_exit(), a))
    bf = sub.add_parser("backfill", help="embed the facts that have no embedding yet")
    bf.add_argument("--batch-size", type=_positive, default=8, help="facts per request (8)")
    bf.add_argument("--pause", type=float, default=2.0, help="seconds between requests (2.0)")
    bf.add_argument("--limit", type=_positive, default=None, help="stop after N facts")
    bf.add_argument(
        "--concurrency",
        type=_concurrency,
        default=1,
        help="workers embedding batches at once, 1..16 (1); --pause spaces all their requests",
    )
    bf.set_defaults(fn=lambda a: cmd_backfill(settings_or_exit(), a))


def _positive(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


# app.domain.facts.backfill.MAX_CONCURRENCY, not imported: parsing stays light
MAX_CONCURRENCY = 16


def _concurrency(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {raw!r}") from None
    if not 1 <= value <= MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_CONCURRENCY}")
    return value
