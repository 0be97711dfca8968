"""Embeddings backfill: give every live fact without a vector one.

Facts are stored even when the embedding backend is down (NULL vector); this fills them
in later. Each batch is one transaction: claim up to `batch_size` live facts with
`embedding IS NULL` — candidates read across users without a lock, each then locked by
its key `(user_id, id)` with `FOR UPDATE SKIP LOCKED` (two concurrent runs take disjoint
batches; on Citus every lock stays on one shard) —, embed them in one request, write
the vectors by the same key, commit. So the work is
resumable at any point — an interrupted run loses at most its current batch (one per
worker: `concurrency` workers run such batches at once, disjoint by the same locks) — and
runs never embed the same fact twice. Hidden (merged) and expired facts are skipped: no read
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
from app.domain.facts.backfill_repository import BackfillRepository
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
        return await BackfillRepository(db).count_unembedded()


MAX_CONCURRENCY = 16


class _Pacer:
    """`pause` seconds between embedding requests, across every worker of a run: no batch
    starts sooner than `pause` after the previous one started or finished (one worker:
    a sleep of `pause` after each batch, as the loop always did)."""

    def __init__(self, pause: float) -> None:
        self.pause = pause
        self.ready_at = 0.0  # loop time the next batch may start at
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        if self.pause <= 0:
            return
        async with self.lock:  # queued in turn: each waits for its own slot
            loop = asyncio.get_running_loop()
            delay = self.ready_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.ready_at = loop.time() + self.pause

    def finished(self) -> None:
        if self.pause > 0:
            self.ready_at = max(self.ready_at, asyncio.get_running_loop().time() + self.pause)


async def backfill_embeddings(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    *,
    batch_size: int = 8,
    pause: float = 2.0,
    limit: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    concurrency: int = 1,
) -> BackfillResult:
    """Embed up to `limit` (all when None) pending facts, `batch_size` per request,
    `pause` seconds between requests (rate-limit safety), with `concurrency` workers each
    claiming, embedding and writing its own batches (its own transaction per batch;
    SKIP LOCKED keeps their batches disjoint). While one worker waits for its embedding,
    another writes: PostgreSQL's share (the HNSW insert of each vector) runs beside the
    Python side on a second core. An embedding failure (or any error) in a worker stops
    them all: the others finish the batch they hold, then stop."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be between 1 and {MAX_CONCURRENCY}")
    started = time.perf_counter()
    pacer = _Pacer(pause)
    done = 0
    reserved = 0  # facts the workers' current batches may still embed (the limit's share)
    error: str | None = None
    failure: BaseException | None = None

    async def worker() -> None:
        nonlocal done, reserved, error, failure
        while error is None and failure is None:
            want = batch_size if limit is None else min(batch_size, limit - done - reserved)
            if want <= 0:
                return
            reserved += want
            try:
                await pacer.wait()
                if error is not None or failure is not None:
                    return
                async with transaction(factory) as db:
                    repo = BackfillRepository(db)
                    rows = await repo.claim_unembedded(want)
                    if not rows:
                        return
                    vectors = await llm.embed(
                        [embedding_text(r.category, r.key, r.value) for r in rows]
                    )
                    await repo.set_embeddings(
                        [(row.user_id, row.id, vec) for row, vec in zip(rows, vectors, strict=True)]
                    )
                done += len(rows)
                if on_progress is not None:
                    on_progress(done)
            except LLMError as exc:
                if error is None:
                    error = f"{type(exc).__name__}: {exc}"
                    log.error("facts.backfill_failed", embedded=done, error=str(exc)[:300])
                return
            except Exception as exc:  # raised once every worker has stopped
                if failure is None:
                    failure = exc
                return
            finally:
                reserved -= want
                pacer.finished()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if failure is not None:
        raise failure
    remaining = await count_pending(factory)
    result = BackfillResult(done, remaining, time.perf_counter() - started, error)
    log.info("facts.backfill_done", embedded=done, remaining=remaining, rate=round(result.rate, 1))
    return result
