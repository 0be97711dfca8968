"""The live raw index: a message is findable by `memory_search` a moment after its append.

Compression indexes what it demotes and the idle job what a session said once it has
been idle for 30 minutes; between the two, what was said in one session was invisible to
every other for half an hour. The live indexer closes that gap, in two halves:

1. **Words, at once.** A pass (`index_live_sessions`) lists the sessions active in the
   last `RAW_INDEX_IDLE_MINUTES` (+5) that have messages the index does not cover
   (`raw_index_state.covered`), claims each one's state row with `SKIP LOCKED` (a
   compression or the idle job holding it: passed over) and appends its new messages to
   the session's **open chunk** (`raw_index_state.open_chunk_id`) as the chunker packs
   them (`chunks.append_chunks`: a message never moves, and the chunks are the ones the
   idle job would have written), starting new chunks past 4,000 chars. Nothing is
   embedded in that transaction: the chunks are written `vectors_stale` and found by their
   words once it commits. `covered` is extended through the last message read, so a
   message is in one chunk only, whichever writer came first; compression and the idle
   job close the open chunk when they write (the next message starts a new one).
2. **Meaning, a moment later.** `embed_stale_chunks` embeds the segments of stale chunks
   that are new or changed (an open chunk that grew re-embeds its last segment only) and
   clears the flag, if the chunk did not change meanwhile. A failing embedder delays only
   this half; the chunks stay stale and are retried on the next pass.

An append in this process wakes the job once it commits (`kernel.jobs.wake`); otherwise
it runs every `RAW_INDEX_LIVE_INTERVAL_SECONDS` (1), so the appends of another worker
are taken within a second too. Automatic recall never returns an open chunk of turns the
live context holds: it searches chunks that end before the context's first turn.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
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
from app.domain.raw_history.breadcrumbs import extract_breadcrumbs, merge_breadcrumbs
from app.domain.raw_history.chunk_writer_repository import ChunkWriter
from app.domain.raw_history.chunks import RawChunk, append_chunks
from app.domain.raw_history.idle_index import BATCH_MESSAGES, record_db_failure, take_batch
from app.domain.raw_history.indexer import chunk_messages, fresh_chunks, segment_texts
from app.domain.raw_history.state_repository import RawIndexRepository
from app.lib.metrics import RAW_CHUNKS_INDEXED
from app.llm.errors import EmbeddingDisabledError, LLMError
from app.llm.gateway import LLMGateway

log = structlog.get_logger()

SESSIONS_PER_PASS = 200  # sessions listed per pass (the rest: next pass)
MAX_ATTEMPTS = 3  # failed passes in a row before a session is left to the idle job
EMBED_CHUNKS = 32  # stale chunks embedded per round …
EMBED_ROUNDS = 8  # … and rounds per pass
WINDOW_MARGIN_MINUTES = 5  # the live window overlaps the idle job's by this much
# The job embeds at most this often in one process: an open chunk that grows with every
# append has its last segment embedded once per period, not once per append.
EMBED_PERIOD_SECONDS = 1.0
EMBED_RETRY_SECONDS = 30.0  # after the embedder failed: the words are found meanwhile
EMBED_DUE_KEY = "raw_index_live_embed"  # in `Jobs.due`: when the next embedding round is


@dataclass
class LivePassResult:
    sessions: int = 0
    messages: int = 0
    chunks: int = 0  # chunks started
    extended: int = 0  # open chunks that took messages
    failed: int = 0
    embedded: int = 0  # chunks whose vectors caught up
    segments: int = 0  # segments embedded
    embed_failed: bool = False
    seconds: float = 0.0


@dataclass(frozen=True)
class _Indexed:
    messages: int
    chunks: int
    extended: int
    done: bool  # nothing left below the session's next_seq


def _crumbs(kept: Sequence[str], texts: list[str]) -> list[str]:
    return merge_breadcrumbs(kept, extract_breadcrumbs(texts))


async def index_live_session(
    db: AsyncSession, user_id: str, session_id: uuid.UUID, *, has_row: bool = True
) -> _Indexed | None:
    """One batch of a session's uncovered messages into its open chunk and new chunks,
    inside the caller's transaction; None when another writer holds the session or
    nothing is left."""
    state = RawIndexRepository(db)
    await state.commit_without_flush()
    claim = await state.claim_live(user_id, session_id, has_row=has_row)
    if claim is None:
        return None
    rows = await state.unindexed_messages(
        user_id, session_id, claim.next_seq, BATCH_MESSAGES, claim.from_seq
    )
    taken, complete, last = take_batch(rows, claim.next_seq)
    writer = ChunkWriter(db)
    open_id: uuid.UUID | None = claim.open_chunk_id
    tail = None
    if open_id is not None and claim.content is not None:
        tail = RawChunk(
            content=claim.content,
            start_seq=claim.start_seq,
            end_seq=claim.end_seq,
            started_at=claim.started_at,
            ended_at=claim.ended_at,
            content_hash=claim.content_hash,
            breadcrumbs=tuple(claim.breadcrumbs),
        )
    messages = chunk_messages(taken)
    updated, new, still_open = append_chunks(tail, messages, _crumbs)
    extended = 0
    if updated is not None and open_id is not None:
        if await writer.extend_chunk(user_id, session_id, open_id, updated):
            extended = 1
        else:  # the grown text is another chunk's already: these messages start anew
            tail = None
            _, new, still_open = append_chunks(None, messages, _crumbs)
    new = await fresh_chunks(db, user_id, session_id, new)
    ids = await writer.insert_chunks(user_id, session_id, new, [[]] * len(new), vectors_stale=True)
    if new:
        open_id = ids[-1] if still_open else None
    elif tail is None:
        open_id = None
    await state.cover_through(user_id, session_id, last, live=True, open_chunk=open_id)
    written = sum(i is not None for i in ids)
    RAW_CHUNKS_INDEXED.labels("live").inc(written)
    return _Indexed(messages=len(taken), chunks=written, extended=extended, done=complete)


async def _index_one(
    factory: async_sessionmaker[AsyncSession],
    user_id: str,
    session_id: uuid.UUID,
    has_row: bool,
) -> _Indexed | None | SQLAlchemyError:
    try:
        async with transaction(factory) as db:
            return await index_live_session(db, user_id, session_id, has_row=has_row)
    except SQLAlchemyError as exc:
        await record_db_failure(factory, user_id, session_id, exc, "memory.live_index_failed")
        return exc


async def index_live_sessions(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
    *,
    now: datetime | None = None,
    embed: bool = True,
) -> LivePassResult:
    """One pass: every recently active session's new messages into the raw index (their
    words findable when this returns), then the vectors of stale chunks (`embed`)."""
    started = time.monotonic()
    result = LivePassResult()
    minutes = settings.raw_index_idle_after_minutes + WINDOW_MARGIN_MINUTES
    since = (now or datetime.now(UTC)) - timedelta(minutes=minutes)
    async with transaction(factory) as db:
        listed = await RawIndexRepository(db).live_pending(since, MAX_ATTEMPTS, SESSIONS_PER_PASS)
    for row in listed:
        has_row = bool(row.has_row)
        while True:  # a session with a long backlog: one batch per transaction
            outcome = await _index_one(factory, row.user_id, row.session_id, has_row)
            if isinstance(outcome, SQLAlchemyError):
                result.failed += 1
                break
            if outcome is None:
                break
            has_row = True
            result.messages += outcome.messages
            result.chunks += outcome.chunks
            result.extended += outcome.extended
            if outcome.done:
                break
        result.sessions += 1
    if embed:
        for _ in range(EMBED_ROUNDS):
            done = await embed_stale_chunks(factory, llm)
            result.embedded += done.embedded
            result.segments += done.segments
            result.embed_failed = done.failed
            if done.failed or done.listed < EMBED_CHUNKS:
                break
    result.seconds = time.monotonic() - started
    if result.messages or result.embedded or result.failed:
        log.debug("memory.live_index_pass", **vars(result))
    return result


@dataclass(frozen=True)
class EmbedRound:
    listed: int = 0
    embedded: int = 0
    segments: int = 0
    failed: bool = False


async def embed_stale_chunks(
    factory: async_sessionmaker[AsyncSession], llm: LLMGateway, limit: int = EMBED_CHUNKS
) -> EmbedRound:
    """One round of the background embedder: up to `limit` stale chunks get vectors for
    their new or changed segments (one batched call, outside any transaction), written
    unless the chunk changed meanwhile. An embedder failure leaves them stale."""
    async with transaction(factory) as db:
        writer = ChunkWriter(db)
        stale = await writer.stale_chunks(limit)
        have: dict[uuid.UUID, dict[int, tuple[int, int]]] = {}
        for user_id in {c.user_id for c in stale}:
            ids = [c.id for c in stale if c.user_id == user_id]
            have.update(await writer.segment_spans_of(user_id, ids))
        plans: list[tuple[Any, list[tuple[int, int]], list[int]]] = []
        _, every = segment_texts([c.content for c in stale])  # the indexers' segments
        for chunk, spans in zip(stale, every, strict=True):
            stored = have.get(chunk.id, {})
            changed = [p for p, span in enumerate(spans) if stored.get(p) != span]
            plans.append((chunk, spans, changed))
    if not stale:
        return EmbedRound()
    texts = [c.content[a:b] for c, spans, changed in plans for a, b in (spans[p] for p in changed)]
    try:
        vectors: list[list[float]] | None = list(await llm.embed(texts)) if texts else []
    except EmbeddingDisabledError:
        vectors = None  # text search only: nothing to wait for
    except LLMError as exc:
        log.warning("memory.live_embed_failed", chunks=len(stale), error=str(exc)[:300])
        return EmbedRound(listed=len(stale), failed=True)
    rest = iter(vectors or [])
    embedded = 0
    async with transaction(factory) as db:
        await RawIndexRepository(db).commit_without_flush()
        writer = ChunkWriter(db)
        for chunk, spans, changed in plans:
            rows = (
                []
                if vectors is None
                else [(p, spans[p][0], spans[p][1], next(rest)) for p in changed]
            )
            parts = len(spans) if vectors is not None else 1 << 30
            if await writer.replace_segments(
                chunk.user_id, chunk.session_id, chunk.id, chunk.content_hash, parts, rows
            ):
                embedded += 1
    return EmbedRound(listed=len(stale), embedded=embedded, segments=len(texts))


async def live_index_job(runtime: Runtime) -> LivePassResult | None:
    """The periodic (and woken) job: one pass, unless this process is running one."""
    settings, due = runtime.settings, runtime.jobs.due
    if not settings.memory_search_enabled:
        return None

    async def run() -> LivePassResult:
        now = time.monotonic()
        embed = now >= due.get(EMBED_DUE_KEY, 0.0)
        if embed:
            due[EMBED_DUE_KEY] = now + EMBED_PERIOD_SECONDS
        result = await index_live_sessions(
            runtime.session_factory, runtime.llm, settings, embed=embed
        )
        if result.embed_failed:
            due[EMBED_DUE_KEY] = now + EMBED_RETRY_SECONDS
        return result

    return await unless_running(runtime.jobs, "raw_index_live_lock", run)
