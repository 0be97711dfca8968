"""Embeddings backfill: give every live fact without a vector one.

Facts are stored even when the embedding backend is down (NULL vector); this fills them
in later. Each batch is one transaction: claim up to `batch_size` live facts with
`embedding IS NULL` (`FOR UPDATE SKIP LOCKED`: two concurrent runs take disjoint
batches), embed them in one request, write the vectors, commit. So the work is
resumable at any point — an interrupted run loses at most its current batch — and runs
never embed the same fact twice. Hidden (merged) and expired facts are skipped: no read
path can return them. An embedding failure stops the run; what is done stays done.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.engine import transaction
from app.domain.facts.repositories import FactRepository
from app.domain.facts.services import embedding_text
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()


@dataclass
class BackfillResult:
    embedded: int
    remaining: int
    seconds: float
    error: str | None = None

    @property
    def rate(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0


class ProgressBar:
    """A one-line progress bar on a terminal (a line per update elsewhere), stderr."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(total, 0)
        self.stream = stream or sys.stderr
        self.width = width
        self.started = time.perf_counter()
        self.tty = self.stream.isatty()

    def update(self, done: int) -> None:
        total = max(self.total, done, 1)
        filled = int(self.width * done / total)
        rate = done / max(time.perf_counter() - self.started, 1e-9)
        line = (
            f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{self.total} facts  {rate:.1f}/s"
        )
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


async def count_pending(factory: async_sessionmaker[AsyncSession]) -> int:
    async with transaction(factory) as db:
        return await FactRepository(db).count_unembedded()


async def backfill_embeddings(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    *,
    batch_size: int = 8,
    pause: float = 2.0,
    limit: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> BackfillResult:
    """Embed up to `limit` (all when None) pending facts, `batch_size` per request,
    sleeping `pause` seconds between requests (rate-limit safety)."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    started = time.perf_counter()
    done = 0
    error: str | None = None
    while limit is None or done < limit:
        want = batch_size if limit is None else min(batch_size, limit - done)
        try:
            async with transaction(factory) as db:
                repo = FactRepository(db)
                rows = await repo.claim_unembedded(want)
                if not rows:
                    break
                vectors = await llm.embed([embedding_text(c, k, v) for _, c, k, v in rows])
                await repo.set_embeddings(
                    [(row[0], vec) for row, vec in zip(rows, vectors, strict=True)]
                )
        except LLMError as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.error("facts.backfill_failed", embedded=done, error=str(exc)[:300])
            break
        done += len(rows)
        if on_progress is not None:
            on_progress(done)
        if pause > 0 and (limit is None or done < limit):
            await asyncio.sleep(pause)
    remaining = await count_pending(factory)
    result = BackfillResult(done, remaining, time.perf_counter() - started, error)
    log.info("facts.backfill_done", embedded=done, remaining=remaining, rate=round(result.rate, 1))
    return result
