"""The embedding queue: the live index's chunks get their vectors behind the requests.

The live pass (`live_index.py`) writes a session's new messages into its chunks without
vectors (`vectors_stale`, `stale_since`): they are found by their words at once. Their
meaning follows here, in rounds of `ROUND_CHUNKS` chunks:

1. **What is due** (`ChunkWriter.due_chunks`): stale chunks, newest first; a closed chunk
   at once, a session's open chunk (the one its appends still grow) only once the
   session has been quiet `INDEX_QUIET_SECONDS`. A conversation in full flow is not
   re-embedded after every append: each text is embedded once per quiet period, and a
   chunk that grew re-embeds only its changed segments (`changed` below).
2. **Claimed**, per user, with a lease (`claim_chunks`: `embed_lease_until`): several
   indexers (processes, machines) share one database and never embed a chunk twice; the
   lease of a crashed one runs out after `LEASE_SECONDS`.
3. **Embedded** outside any transaction, in the embedder's index lane (app/llm/lanes.py),
   then written if the chunk's text did not change meanwhile (else released, for the next
   round). An embedder failure releases the claims: the chunks stay stale and are found by
   their words.

Who runs the rounds: the indexer processes `navi serve` starts (`run_indexer`; also
`navi indexer` alone, on another machine), or, for an app started without them (one
uvicorn process, the tests), its own background job (`live_embed_job`).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import transaction
from app.domain.kernel.jobs import unless_running
from app.domain.kernel.runtime import Runtime
from app.domain.raw_history.chunk_writer_repository import ChunkWriter
from app.domain.raw_history.indexer import segment_texts
from app.domain.raw_history.state_repository import RawIndexRepository
from app.lib.metrics import INDEX_EMBED_ROUNDS, INDEX_EMBEDDED_CHARS, INDEX_EMBEDDED_SEGMENTS
from app.llm.errors import EmbeddingDisabledError, LLMError
from app.llm.gateway import LLMGateway
from app.llm.lanes import use_index_lane

log = structlog.get_logger()

# Chunks claimed and embedded per round (one embedder call): ~40 segments, a few seconds
# of one model thread, so a chunk that falls due is taken soon even behind a backlog.
ROUND_CHUNKS = 8
LEASE_SECONDS = 120.0  # an indexer's hold on the chunks of its round
IDLE_POLL_SECONDS = 0.5  # an indexer with nothing due looks again after this
RETRY_SECONDS = 30.0  # after the embedder failed: the words are found meanwhile
DB_RETRY_SECONDS = 5.0  # after the database failed


@dataclass(frozen=True)
class EmbedRound:
    listed: int = 0  # chunks found due
    claimed: int = 0  # of those, claimed by this round (another indexer holds the rest)
    embedded: int = 0  # chunks whose vectors caught up
    segments: int = 0  # segments embedded
    chars: int = 0  # characters embedded
    failed: bool = False  # the embedder failed: the claims were released


@dataclass(frozen=True)
class _Plan:
    chunk: Any  # the claimed row: user_id, id, session_id, content, content_hash
    spans: list[tuple[int, int]]  # the chunk's segments now
    changed: list[int]  # which of them have no vector of this text yet


def _by_user(rows: Sequence[Any]) -> dict[str, list[uuid.UUID]]:
    out: dict[str, list[uuid.UUID]] = {}
    for row in rows:
        out.setdefault(row.user_id, []).append(row.id)
    return out


async def _claim(
    factory: async_sessionmaker[AsyncSession], due: Sequence[Any], lease_seconds: float
) -> list[_Plan]:
    """Lease the due chunks nobody else holds (one short transaction: the leases are
    visible to the other indexers once it commits) and plan their changed segments."""
    async with transaction(factory) as db:
        writer = ChunkWriter(db)
        claimed: list[Any] = []
        for user_id, ids in _by_user(due).items():
            claimed += await writer.claim_chunks(user_id, ids, lease_seconds)
        have: dict[uuid.UUID, dict[int, tuple[int, int]]] = {}
        for user_id, ids in _by_user(claimed).items():
            have.update(await writer.segment_spans_of(user_id, ids))
    _, every = segment_texts([c.content for c in claimed])  # the indexers' segments
    plans = []
    for chunk, spans in zip(claimed, every, strict=True):
        stored = have.get(chunk.id, {})
        changed = [p for p, span in enumerate(spans) if stored.get(p) != span]
        plans.append(_Plan(chunk, spans, changed))
    return plans


async def _release(factory: async_sessionmaker[AsyncSession], chunks: Sequence[Any]) -> None:
    if not chunks:
        return
    async with transaction(factory) as db:
        writer = ChunkWriter(db)
        for user_id, ids in _by_user(chunks).items():
            await writer.release_chunks(user_id, ids)


async def _write(
    factory: async_sessionmaker[AsyncSession],
    plans: Sequence[_Plan],
    vectors: list[list[float]] | None,
) -> int:
    """Each chunk's new segment vectors (`vectors` None: embeddings are off, the chunk
    is done without any), unless its text changed since the claim; the chunks not
    written are released. Returns the chunks written."""
    rest = iter(vectors or [])
    embedded = 0
    missed: list[Any] = []
    async with transaction(factory) as db:
        await RawIndexRepository(db).commit_without_flush()
        writer = ChunkWriter(db)
        for plan in plans:
            chunk, spans = plan.chunk, plan.spans
            rows = (
                []
                if vectors is None
                else [(p, spans[p][0], spans[p][1], next(rest)) for p in plan.changed]
            )
            parts = len(spans) if vectors is not None else 1 << 30
            if await writer.replace_segments(
                chunk.user_id, chunk.session_id, chunk.id, chunk.content_hash, parts, rows
            ):
                embedded += 1
            else:
                missed.append(chunk)
        for user_id, ids in _by_user(missed).items():
            await writer.release_chunks(user_id, ids)
    return embedded


async def embed_due_chunks(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    *,
    quiet_seconds: float,
    limit: int = ROUND_CHUNKS,
    lease_seconds: float = LEASE_SECONDS,
) -> EmbedRound:
    """One round: up to `limit` due chunks claimed, their new or changed segments
    embedded in one call (outside any transaction) and written back."""
    async with transaction(factory) as db:
        due = await ChunkWriter(db).due_chunks(quiet_seconds, limit)
    if not due:
        return EmbedRound()
    plans = await _claim(factory, due, lease_seconds)
    if not plans:
        return EmbedRound(listed=len(due))
    texts = [p.chunk.content[a:b] for p in plans for a, b in (p.spans[part] for part in p.changed)]
    try:
        vectors: list[list[float]] | None = list(await llm.embed(texts)) if texts else []
    except EmbeddingDisabledError:
        vectors = None  # text search only: nothing to wait for
    except LLMError as exc:
        log.warning("memory.live_embed_failed", chunks=len(plans), error=str(exc)[:300])
        await _release(factory, [p.chunk for p in plans])
        return EmbedRound(listed=len(due), claimed=len(plans), failed=True)
    embedded = await _write(factory, plans, vectors)
    chars = sum(len(t) for t in texts) if vectors is not None else 0
    segments = len(texts) if vectors is not None else 0
    INDEX_EMBED_ROUNDS.inc()
    INDEX_EMBEDDED_SEGMENTS.inc(segments)
    INDEX_EMBEDDED_CHARS.inc(chars)
    return EmbedRound(
        listed=len(due),
        claimed=len(plans),
        embedded=embedded,
        segments=segments,
        chars=chars,
    )


async def embed_until_idle(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    *,
    quiet_seconds: float,
    max_rounds: int | None = None,
) -> EmbedRound:
    """Rounds until nothing is due (or the embedder fails, or `max_rounds`): the
    totals."""
    total = EmbedRound()
    rounds = 0
    while max_rounds is None or rounds < max_rounds:
        done = await embed_due_chunks(factory, llm, quiet_seconds=quiet_seconds)
        rounds += 1
        total = EmbedRound(
            listed=total.listed + done.listed,
            claimed=total.claimed + done.claimed,
            embedded=total.embedded + done.embedded,
            segments=total.segments + done.segments,
            chars=total.chars + done.chars,
            failed=done.failed,
        )
        if done.failed or done.claimed == 0:
            break
    return total


# ------------------------------------------------------------------ who runs the rounds
#: The background job of an app that embeds for itself (`INDEX_EMBEDDING=auto` without
#: `navi serve`'s indexers, or `inline`): in `Jobs.due`, when it may run after a failure.
EMBED_RETRY_KEY = "raw_index_embed_retry"


def embeds_in_process(settings: Settings) -> bool:
    """Whether this app's own job embeds the live index (no indexer process does)."""
    return settings.memory_search_enabled and settings.index_embedding in ("auto", "inline")


async def live_embed_job(runtime: Runtime) -> EmbedRound | None:
    """The periodic embedding job of an app without indexer processes: apart from the
    live pass (its own lock), so new words never wait behind the vectors."""
    settings, due = runtime.settings, runtime.jobs.due
    if not embeds_in_process(settings) or time.monotonic() < due.get(EMBED_RETRY_KEY, 0.0):
        return None

    async def run() -> EmbedRound:
        result = await embed_until_idle(
            runtime.session_factory,
            runtime.llm,
            quiet_seconds=settings.index_quiet_seconds,
            max_rounds=8,
        )
        if result.failed:
            due[EMBED_RETRY_KEY] = time.monotonic() + RETRY_SECONDS
        return result

    return await unless_running(runtime.jobs, "raw_index_embed_lock", run)


async def run_indexer(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
    *,
    stop: asyncio.Event,
    alive: Callable[[], bool] = lambda: True,
) -> None:
    """An indexer process's loop: rounds while chunks are due, a short sleep when none
    are, a longer one after a failure; until `stop` is set or `alive()` says the process
    that started it is gone. Logs the rate it embeds at (segments per second)."""
    use_index_lane()
    log.info(
        "indexer.started",
        pid=os.getpid(),
        threads=settings.indexer_threads,
        quiet_seconds=settings.index_quiet_seconds,
    )
    while not stop.is_set() and alive():
        started = time.monotonic()
        try:
            done = await embed_due_chunks(factory, llm, quiet_seconds=settings.index_quiet_seconds)
            pause = RETRY_SECONDS if done.failed else 0.0 if done.claimed else IDLE_POLL_SECONDS
        except Exception:  # the database went away: try again shortly, never exit
            log.exception("indexer.round_failed")
            done, pause = EmbedRound(), DB_RETRY_SECONDS
        if done.segments:
            seconds = time.monotonic() - started
            log.debug(
                "indexer.round",
                chunks=done.embedded,
                segments=done.segments,
                chars=done.chars,
                seconds=round(seconds, 3),
                segments_per_second=round(done.segments / max(seconds, 1e-6), 1),
            )
        if pause:
            try:
                async with asyncio.timeout(pause):
                    await stop.wait()
            except TimeoutError:
                pass
    log.info("indexer.stopped", pid=os.getpid())
