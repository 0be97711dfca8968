"""Idle sessions into the raw index: everything said becomes findable, compressed or not.

Compression indexes the messages it demotes; a conversation that never filled its
window was never indexed. This job indexes, once a session has been idle for
`RAW_INDEX_IDLE_MINUTES` (default: the extraction's stale threshold), every conversation
message the index does not cover yet (`raw_index_state.covered`) — same chunker,
breadcrumbs from the text, content-hash idempotence, segment vectors — one bounded batch
per transaction:

1. idle sessions the append marked (`sessions.raw_index_pending`, read through its
   partial index: the sessions that went quiet, not every session) get a
   `raw_index_state` row; the pending ones (an uncovered sequence number below
   `next_seq`) are listed fewest failures first, and the mark of those the index
   already covers (the live index did the work) is cleared;
2. each is claimed with `FOR UPDATE SKIP LOCKED` on that row, the conditions checked
   again on the locked row (another worker, or a compression, holding it → passed over);
3. at most `BATCH_MESSAGES` / `BATCH_CHARS` of its uncovered messages are chunked and
   embedded, the chunks written and `covered` extended through the last one read, then
   the transaction commits (a crash loses at most that batch's work, never its record);
   the batch that completes a session clears its mark (unless an append came since);
4. an embedder failure rolls the batch back and counts it (`attempts`, `last_error`):
   the next pass retries; after `EMBED_ATTEMPTS` failures (or with
   `EMBEDDING_PROVIDER=none`) the chunks are written without vectors — the text search
   finds them, `make reembed` fills the vectors later. An unreachable embedder ends the
   pass.

A session that resumes and later compresses: the demoted messages already covered are
not chunked again (`indexer.index_demoted`), so no message is ever in two chunks.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import transaction
from app.domain.kernel.jobs import unless_running
from app.domain.kernel.runtime import Runtime
from app.domain.raw_history.chunk_writer_repository import ChunkWriter
from app.domain.raw_history.indexer import (
    Segments,
    chunks_of,
    embed_chunks,
    fresh_chunks,
    segment_texts,
    segment_vectors,
)
from app.domain.raw_history.state_repository import RawIndexRepository
from app.lib.metrics import RAW_CHUNKS_INDEXED
from app.llm.errors import EmbeddingDisabledError, LLMError, LLMUnavailableError
from app.llm.gateway import LLMGateway

log = structlog.get_logger()

BATCH_MESSAGES = 400  # messages read per transaction …
BATCH_CHARS = 120_000  # … and at most this much of their text (one message at least)
EMBED_ATTEMPTS = 3  # failed batches before a session's chunks are written without vectors
MAX_BATCHES_PER_PASS = 200  # the periodic job's bound; the CLI runs until done
_LISTED = 50  # pending sessions listed at a time
ROWS_PER_PASS = 100_000  # idle sessions given a state row per pass


@dataclass
class IndexPassResult:
    sessions: int = 0  # sessions whose pending messages were all indexed
    batches: int = 0
    messages: int = 0
    chunks: int = 0
    failed: int = 0
    without_vectors: int = 0  # chunks written without vectors (embedder off or failing)
    stopped_early: bool = False
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"{self.sessions} session(s), {self.messages} message(s) → {self.chunks} chunk(s)"
            f" in {self.batches} batch(es), {self.failed} failed,"
            f" {self.without_vectors} chunk(s) without vectors, {self.seconds:.1f} s"
        )


@dataclass(frozen=True)
class BatchOutcome:
    messages: int = 0
    chunks: int = 0
    without_vectors: int = 0
    done: bool = False  # nothing left to index in the session
    failed: bool = False
    unavailable: bool = False


Progress = Callable[[IndexPassResult], None]


def idle_before(settings: Settings, now: datetime, older_than: float | None = None) -> datetime:
    minutes = settings.raw_index_idle_after_minutes if older_than is None else older_than
    return now - timedelta(minutes=minutes)


async def _embed(
    llm: LLMGateway, contents: list[str], *, required: bool
) -> list[Segments] | LLMError:
    """Each chunk's segment vectors; the error when the embedder fails and vectors are
    `required` (else no segments, as compression writes them: `embed_chunks`)."""
    if not required:
        return await embed_chunks(llm, contents)
    texts, spans = segment_texts(contents)
    try:
        vectors: list[Any] = list(await llm.embed(texts)) if texts else []
    except EmbeddingDisabledError:
        vectors = [None] * len(texts)
    except LLMError as exc:
        return exc
    return segment_vectors(spans, vectors)


def take_batch(
    rows: list[Any], next_seq: int, limit: int = BATCH_MESSAGES
) -> tuple[list[Any], bool, int]:
    """The messages of one batch out of `rows` (the first `limit` uncovered ones, read
    below `next_seq`): at most `BATCH_CHARS` of text, one message at least. Returns
    them, whether nothing is left after them, and the last sequence number the batch
    covers (through `next_seq - 1` when it is the last)."""
    taken: list[Any] = []
    chars = 0
    for row in rows:
        if taken and chars + len(row.content or "") > BATCH_CHARS:
            break
        taken.append(row)
        chars += len(row.content or "")
    complete = len(taken) == len(rows) < limit
    return taken, complete, next_seq - 1 if complete else taken[-1].sequence_number


async def index_batch(
    db: AsyncSession, llm: LLMGateway, user_id: str, session_id: uuid.UUID, before: datetime
) -> BatchOutcome | None:
    """One batch of one session inside the caller's transaction; None when the session
    is not (or no longer) pending, or another worker holds it."""
    state = RawIndexRepository(db)
    claim = await state.claim(user_id, session_id, before)
    if claim is None:
        return None
    rows = await state.unindexed_messages(user_id, session_id, claim.next_seq, BATCH_MESSAGES)
    taken, complete, last = take_batch(rows, claim.next_seq)
    chunks = await fresh_chunks(db, user_id, session_id, chunks_of(taken))
    required = claim.attempts + 1 < EMBED_ATTEMPTS
    segments = await _embed(llm, [c.content for c in chunks], required=required)
    if isinstance(segments, LLMError):
        await state.record_failure(user_id, session_id, f"{type(segments).__name__}: {segments}")
        log.warning(
            "memory.idle_index_failed",
            session_id=str(session_id),
            attempts=claim.attempts + 1,
            error=str(segments)[:300],
        )
        return BatchOutcome(failed=True, unavailable=isinstance(segments, LLMUnavailableError))
    written = await ChunkWriter(db).add_chunks(user_id, session_id, chunks, segments)
    await state.cover_through(user_id, session_id, last)
    if complete:
        await state.unmark(user_id, session_id, claim.next_seq)
    RAW_CHUNKS_INDEXED.labels("idle").inc(written)
    bare = sum(not segs for segs in segments)
    log.info(
        "memory.idle_indexed",
        session_id=str(session_id),
        messages=len(taken),
        chunks=written,
        through_seq=last,
        without_vectors=bare,
    )
    return BatchOutcome(messages=len(taken), chunks=written, without_vectors=bare, done=complete)


async def _run_batch(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    user_id: str,
    session_id: uuid.UUID,
    before: datetime,
) -> BatchOutcome | None:
    """`index_batch` in a transaction of its own. A database error (a deadlock with a
    compression, a lost connection) rolls the batch back and is counted like an
    embedder failure, so one session cannot stop the pass."""
    try:
        async with transaction(factory) as db:
            return await index_batch(db, llm, user_id, session_id, before)
    except SQLAlchemyError as exc:
        await record_db_failure(factory, user_id, session_id, exc, "memory.idle_index_failed")
        return BatchOutcome(failed=True)


async def record_db_failure(
    factory: async_sessionmaker[AsyncSession],
    user_id: str,
    session_id: uuid.UUID,
    exc: SQLAlchemyError,
    event: str,
) -> None:
    """A session's batch rolled back on a database error: logged as `event` and counted
    on its state row (`attempts`, `last_error`) in a transaction of its own."""
    error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    log.warning(event, session_id=str(session_id), error=error[:300])
    try:
        async with transaction(factory) as db:
            await RawIndexRepository(db).record_failure(user_id, session_id, error)
    except SQLAlchemyError:
        pass  # the database is gone: the next statement of the pass finds out again


async def index_idle_sessions(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
    *,
    older_than_minutes: float | None = None,
    user_id: str | None = None,
    max_batches: int | None = MAX_BATCHES_PER_PASS,
    now: datetime | None = None,
    progress: Progress | None = None,
) -> IndexPassResult:
    """One pass: index the pending messages of sessions idle since `older_than_minutes`
    (default `RAW_INDEX_IDLE_MINUTES`), of one user or all, at most `max_batches`
    batches (None: until nothing is pending)."""
    started = asyncio.get_running_loop().time()
    before = idle_before(settings, now or datetime.now(UTC), older_than_minutes)
    result = IndexPassResult()
    async with transaction(factory) as db:
        await RawIndexRepository(db).ensure_idle_rows(before, user_id, limit=ROWS_PER_PASS)
    failed: list[uuid.UUID] = []
    while max_batches is None or result.batches < max_batches:
        async with transaction(factory) as db:
            listed = await RawIndexRepository(db).pending(before, user_id, failed, _LISTED)
        if not listed:
            break
        covered = [r for r in listed if r.covered]
        if covered:  # quiet and covered already: off the idle pass's list
            async with transaction(factory) as db:
                for r in covered:
                    await RawIndexRepository(db).unmark(r.user_id, r.session_id, r.next_seq)
            failed.extend(r.session_id for r in covered)  # listed once a pass, whatever
        progressed = bool(covered)
        for owner, session_id in [(r.user_id, r.session_id) for r in listed if not r.covered]:
            while max_batches is None or result.batches < max_batches:
                outcome = await _run_batch(factory, llm, owner, session_id, before)
                if outcome is None:
                    break
                result.batches += 1
                if outcome.failed:
                    result.failed += 1
                    failed.append(session_id)
                    result.stopped_early = outcome.unavailable
                    break
                progressed = True
                result.messages += outcome.messages
                result.chunks += outcome.chunks
                result.without_vectors += outcome.without_vectors
                if outcome.done:
                    result.sessions += 1
                if progress is not None:
                    progress(result)
                if outcome.done:
                    break
            if result.stopped_early:
                break
        if result.stopped_early or not progressed:
            break
    result.seconds = asyncio.get_running_loop().time() - started
    if result.batches:
        log.info("memory.idle_index_pass", **vars(result))
    return result


async def index_idle_job(runtime: Runtime) -> IndexPassResult | None:
    """The periodic job: one pass, unless this process is already running one (None)."""
    settings = runtime.settings
    if not (settings.memory_search_enabled and settings.raw_index_idle_enabled):
        return None
    return await unless_running(
        runtime.jobs,
        "raw_index_idle_lock",
        lambda: index_idle_sessions(runtime.session_factory, runtime.llm, settings),
    )
