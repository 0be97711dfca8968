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
   idle job would have written), starting new chunks past 4,000 chars. Sessions are
   taken `GROUP_SESSIONS` per transaction, one statement per step for the whole group
   (`live_repository.py`; on Citus a group is one user's). Nothing is embedded in that transaction: the chunks are written `vectors_stale` and found by their
   words once it commits. `covered` is extended through the last message read, so a
   message is in one chunk only, whichever writer came first; compression and the idle
   job close the open chunk when they write (the next message starts a new one).
2. **Meaning, when the conversation pauses.** The vectors are another worker's:
   `embed_queue.py` embeds the stale chunks, a closed one at once and a session's open
   chunk once the session has been quiet, in indexer processes of their own (`navi
   serve` starts them) so that the request workers keep their CPU. The words never wait
   for the meaning: this pass embeds nothing.

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
from app.db.citus import segment_buckets
from app.db.engine import transaction
from app.domain.kernel.forgotten import NOTHING
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.kernel.jobs import unless_running
from app.domain.kernel.repositories import ChunkCountRepository
from app.domain.kernel.runtime import Runtime
from app.domain.raw_history.breadcrumbs import extract_breadcrumbs, merge_breadcrumbs
from app.domain.raw_history.chunks import RawChunk, append_chunks, redact_chunk
from app.domain.raw_history.embed_queue import embed_until_idle
from app.domain.raw_history.idle_index import record_db_failure, take_batch
from app.domain.raw_history.indexer import chunk_messages
from app.domain.raw_history.live_repository import Cover, Extension, Key, LiveIndexRepository
from app.domain.raw_history.state_repository import RawIndexRepository
from app.lib.metrics import RAW_CHUNKS_INDEXED
from app.llm.gateway import LLMGateway

log = structlog.get_logger()

SESSIONS_PER_PASS = 200  # sessions listed per pass (the rest: next pass)
MAX_ATTEMPTS = 3  # failed passes in a row before a session is left to the idle job
WINDOW_MARGIN_MINUTES = 5  # the live window overlaps the idle job's by this much
GROUP_SESSIONS = 32  # sessions indexed in one transaction, a statement per step for all
GROUP_MESSAGES = 50  # messages per session and group round (a longer backlog: more rounds)


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


def _open_chunk(claim: Any) -> RawChunk | None:
    """The session's open chunk as its claim read it (None: none, or gone)."""
    if claim.open_chunk_id is None or claim.content is None:
        return None
    return RawChunk(
        content=claim.content,
        start_seq=claim.start_seq,
        end_seq=claim.end_seq,
        started_at=claim.started_at,
        ended_at=claim.ended_at,
        content_hash=claim.content_hash,
        breadcrumbs=tuple(claim.breadcrumbs),
    )


@dataclass
class _Batch:
    """One session's batch in a group: its messages packed onto its open chunk."""

    claim: Any
    messages: list[Any]
    complete: bool
    last: int
    tail: RawChunk | None
    updated: RawChunk | None
    new: list[RawChunk]
    still_open: bool


def _plan(claim: Any, rows: list[Any]) -> _Batch:
    taken, complete, last = take_batch(rows, claim.next_seq, GROUP_MESSAGES)
    tail = _open_chunk(claim)
    messages = chunk_messages(taken)
    updated, new, still_open = append_chunks(tail, messages, _crumbs)
    return _Batch(claim, messages, complete, last, tail, updated, new, still_open)


async def index_live_group(
    db: AsyncSession, keys: dict[Key, bool], one_user: str | None
) -> dict[Key, _Indexed]:
    """One batch of each session of a group (`keys`: whether each has a state row)
    packed onto its open chunk and new chunks, in the caller's transaction, one
    statement per step for all of them
    (`LiveIndexRepository`); `one_user` on Citus, where a group is one user's. The
    sessions another writer holds, or with nothing left, are not in the answer."""
    live = LiveIndexRepository(db, one_user)
    await live.ensure_rows([k for k, has_row in keys.items() if not has_row])
    claims = await live.claim(list(keys))
    rows: dict[Key, list[Any]] = {}
    for row in await live.unindexed(claims, GROUP_MESSAGES):
        rows.setdefault((row.user_id, row.session_id), []).append(row)
    batches = [_plan(c, rows.get((c.user_id, c.session_id), [])) for c in claims]
    # the forget records, read (and held) before anything is written: a forget that
    # landed after the messages were read is redacted here, one still to come waits
    forgotten = await ForgottenRepository(db).guard_many([c.user_id for c in claims])
    grown = await live.extend(
        [
            Extension(b.claim.user_id, b.claim.session_id, b.claim.open_chunk_id, b.tail, b.updated)
            for b in batches
            if b.updated is not None
            and b.tail is not None
            and redact_chunk(b.updated, forgotten.get(b.claim.user_id, NOTHING)) is b.updated
        ]
    )
    for b in batches:
        if b.updated is not None and b.claim.open_chunk_id not in grown:
            # the grown text is another chunk's already, or holds a forgotten text:
            # these messages start anew (redacted below)
            b.tail, b.updated = None, None
            _, b.new, b.still_open = append_chunks(None, b.messages, _crumbs)
        user_forgot = forgotten.get(b.claim.user_id, NOTHING)
        b.new = [redact_chunk(c, user_forgot) for c in b.new]
    ids = await live.insert(
        [(b.claim.user_id, b.claim.session_id, c) for b in batches for c in b.new]
    )
    covers: list[Cover] = []
    added: dict[str, int] = {}
    done: dict[Key, _Indexed] = {}
    seen: set[tuple[uuid.UUID, str]] = set()
    for b in batches:
        user_id, session_id = b.claim.user_id, b.claim.session_id
        written: list[uuid.UUID | None] = []
        for chunk in b.new:  # a content twice in one batch is written once
            key = (session_id, chunk.content_hash)
            written.append(None if key in seen else ids.get(key))
            seen.add(key)
        open_id = b.claim.open_chunk_id if b.tail is not None else None
        if b.new:
            open_id = written[-1] if b.still_open else None
        covers.append(Cover(user_id, session_id, b.last, open_id))
        chunks = sum(i is not None for i in written)
        if chunks or b.updated is not None:
            added[user_id] = added.get(user_id, 0) + chunks
        done[(user_id, session_id)] = _Indexed(
            messages=len(b.messages),
            chunks=chunks,
            extended=int(b.updated is not None),
            done=b.complete,
        )
    await ChunkCountRepository(db).change_many(added)
    await live.cover(covers)
    RAW_CHUNKS_INDEXED.labels("live").inc(sum(i.chunks for i in done.values()))
    return done


async def _index_one(
    factory: async_sessionmaker[AsyncSession],
    user_id: str,
    session_id: uuid.UUID,
    has_row: bool,
) -> _Indexed | None | SQLAlchemyError:
    try:
        async with transaction(factory) as db:
            done = await index_live_group(db, {(user_id, session_id): has_row}, user_id)
        return done.get((user_id, session_id))
    except SQLAlchemyError as exc:
        await record_db_failure(factory, user_id, session_id, exc, "memory.live_index_failed")
        return exc


def _groups(listed: Sequence[Any], per_user: bool) -> list[list[Any]]:
    """The listed sessions in groups of `GROUP_SESSIONS`, each one user's when `per_user`."""
    runs: list[list[Any]] = [list(listed)]
    if per_user:
        by_user: dict[str, list[Any]] = {}
        for row in listed:
            by_user.setdefault(row.user_id, []).append(row)
        runs = list(by_user.values())
    return [run[i : i + GROUP_SESSIONS] for run in runs for i in range(0, len(run), GROUP_SESSIONS)]


async def _index_alone(
    factory: async_sessionmaker[AsyncSession],
    user_id: str,
    session_id: uuid.UUID,
    has_row: bool,
    result: LivePassResult,
) -> None:
    """One session's whole backlog, one batch per transaction (after a group failed)."""
    while True:
        outcome = await _index_one(factory, user_id, session_id, has_row)
        if isinstance(outcome, SQLAlchemyError):
            result.failed += 1
            return
        if outcome is None:
            return
        has_row = True
        result.messages += outcome.messages
        result.chunks += outcome.chunks
        result.extended += outcome.extended
        if outcome.done:
            return


async def index_live_sessions(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
    *,
    now: datetime | None = None,
    embed: bool = True,
    quiet_seconds: float | None = None,
) -> LivePassResult:
    """One pass: every recently active session's new messages into the raw index (their
    words findable when this returns); with `embed`, then the vectors of the chunks due
    (`embed_queue.embed_until_idle`, quiet after `quiet_seconds`, default the setting's):
    the background job leaves that to the indexers."""
    started = time.monotonic()
    result = LivePassResult()
    minutes = settings.raw_index_idle_after_minutes + WINDOW_MARGIN_MINUTES
    since = (now or datetime.now(UTC)) - timedelta(minutes=minutes)
    async with transaction(factory) as db:
        listed = await RawIndexRepository(db).live_pending(since, MAX_ATTEMPTS, SESSIONS_PER_PASS)
        per_user = bool(listed) and not await segment_buckets(db)  # a Citus cluster
    for group in _groups(listed, per_user):
        one_user = group[0].user_id if per_user else None
        pending: dict[Key, bool] = {(r.user_id, r.session_id): bool(r.has_row) for r in group}
        while pending:  # sessions with a long backlog: another round
            try:
                async with transaction(factory) as db:
                    outcome = await index_live_group(db, pending, one_user)
            except SQLAlchemyError as exc:  # one session at a time: the failing one is named
                log.info("memory.live_index_group_failed", sessions=len(pending), error=str(exc))
                for (user_id, session_id), has_row in pending.items():
                    await _index_alone(factory, user_id, session_id, has_row, result)
                break
            for indexed in outcome.values():
                result.messages += indexed.messages
                result.chunks += indexed.chunks
                result.extended += indexed.extended
            pending = {key: True for key, indexed in outcome.items() if not indexed.done}
        result.sessions += len(group)
    if embed:  # a whole pass at once (the tests, the CLI): the vectors too
        quiet = settings.index_quiet_seconds if quiet_seconds is None else quiet_seconds
        done = await embed_until_idle(factory, llm, quiet_seconds=quiet)
        result.embedded, result.segments, result.embed_failed = (
            done.embedded,
            done.segments,
            done.failed,
        )
    result.seconds = time.monotonic() - started
    if result.messages or result.embedded or result.failed:
        log.debug("memory.live_index_pass", **vars(result))
    return result


async def live_index_job(runtime: Runtime) -> LivePassResult | None:
    """The periodic (and woken) job: one pass of words, unless this process is running
    one. The vectors are `embed_queue`'s, never this job's: new words are not queued
    behind them."""
    settings = runtime.settings
    if not settings.memory_search_enabled:
        return None

    async def run() -> LivePassResult:
        return await index_live_sessions(
            runtime.session_factory, runtime.llm, settings, embed=False
        )

    return await unless_running(runtime.jobs, "raw_index_live_lock", run)
