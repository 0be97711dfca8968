"""Raw history index: the messages a compression demoted, kept verbatim as chunks.

`index_demoted` is the hook compression calls on every path (pre, mid, post, forced,
hard-truncate). It runs inside a SAVEPOINT: an indexing failure is logged
(`compressor.chunk_index_failed`) and never fails — or poisons — the compression's
transaction; the messages it could not index stay uncovered in `raw_index_state`, and
the idle-session job (`idle_index.py`) indexes them once the session is idle.

It runs under the session's row lock, so it embeds nothing: `embed_demoted`, the hook's
step before the lock (no transaction open), embeds the chunks it will probably write, by
content hash, when this process embeds (not with `INDEX_EMBEDDING=external`: the indexer
processes do). A chunk written without its vectors (none prepared, the embedder failed)
is marked `vectors_stale`, for the embedding queue (`embed_queue.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import structlog
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.engine import in_own_session
from app.domain.raw_history.breadcrumbs import extract_breadcrumbs, merge_breadcrumbs
from app.domain.raw_history.chunk_writer_repository import ChunkWriter
from app.domain.raw_history.chunks import ChunkMessage, RawChunk, build_chunks
from app.domain.raw_history.ranking import segment_spans
from app.domain.raw_history.state_repository import RawIndexRepository
from app.lib.metrics import RAW_CHUNKS_INDEXED
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()


class DemotedMessage(Protocol):
    role: str
    content: str
    sequence_number: int
    created_at: datetime | None
    name: str | None
    is_summary: bool
    is_compression: bool


async def embed_or_none(llm: LLMGateway, texts: list[str]) -> list[list[float] | None]:
    """Embeddings for `texts`, or Nones when the embedding backend fails (text search
    still finds the rows; `make reembed` fills them later)."""
    if not texts:
        return []
    try:
        return list(await llm.embed(texts))
    except LLMError as exc:
        log.warning("memory.embed_failed", error=str(exc), count=len(texts))
        return [None] * len(texts)


Segments = list[tuple[int, int, list[float]]]  # (start char, end char, vector) per segment


async def embed_chunks(llm: LLMGateway, contents: list[str]) -> list[Segments]:
    """Each chunk's segment vectors (`segment_texts`), in one batched call; no segments
    when the embedding backend fails."""
    texts, spans = segment_texts(contents)
    return segment_vectors(spans, await embed_or_none(llm, texts))


def segment_texts(contents: list[str]) -> tuple[list[str], list[list[tuple[int, int]]]]:
    """What embedding `contents` takes: the text of every segment of each
    (`ranking.segment_spans`; a blank chunk is one segment, so every chunk embedded has
    at least one row in `memory_chunk_vectors` — what `reembed` looks for)."""
    spans = [segment_spans(c) or [(0, len(c))] for c in contents]
    texts = [c[a:b] for c, sp in zip(contents, spans, strict=True) for a, b in sp]
    return texts, spans


def segment_vectors(
    spans: list[list[tuple[int, int]]],
    vectors: list[list[float] | None] | list[list[float]],
) -> list[Segments]:
    """The vectors of `segment_texts` back per chunk: its segments (none when any of them
    is missing)."""
    rest = iter(vectors)
    segments: list[Segments] = []
    for sp in spans:
        segs = [(a, b, v) for (a, b), v in zip(sp, rest, strict=False) if v is not None]
        segments.append(segs if len(segs) == len(sp) else [])
    return segments


def chunks_of(messages: Sequence[DemotedMessage], keys: Sequence[str] = ()) -> list[RawChunk]:
    """The chunks of `messages` (the chunker's rules), each carrying `keys` merged with the
    breadcrumbs extracted from the messages' text."""
    kept = chunk_messages(messages)
    texts = [m.content for m in kept if m.role != "system" and not m.is_summary]
    return build_chunks(kept, merge_breadcrumbs(keys, extract_breadcrumbs(texts)))


def chunk_messages(messages: Sequence[DemotedMessage]) -> list[ChunkMessage]:
    """`messages` as the chunker takes them."""
    return [
        ChunkMessage(
            role=m.role,
            content=m.content or "",
            sequence_number=m.sequence_number,
            created_at=m.created_at,
            name=m.name,
            is_summary=m.is_summary,
            is_compression=m.is_compression,
        )
        for m in messages
    ]


async def fresh_chunks(
    db: AsyncSession, user_id: str, session_id: uuid.UUID, chunks: Sequence[RawChunk]
) -> list[RawChunk]:
    """`chunks` whose content hash the session does not hold yet."""
    if not chunks:
        return []
    known = await ChunkWriter(db).existing_hashes(
        user_id, session_id, [c.content_hash for c in chunks]
    )
    return [c for c in chunks if c.content_hash not in known]


async def _fresh_of(
    db: AsyncSession,
    user_id: str,
    session_id: uuid.UUID,
    demoted: Sequence[DemotedMessage],
    keys: Sequence[str],
) -> tuple[set[int], list[RawChunk]]:
    """The demoted sequence numbers the index does not cover yet, and the chunks of
    those messages the session does not hold yet."""
    new = await RawIndexRepository(db).uncovered(
        user_id, session_id, [m.sequence_number for m in demoted]
    )
    chunks = chunks_of([m for m in demoted if m.sequence_number in new], keys)
    return new, await fresh_chunks(db, user_id, session_id, chunks)


async def embed_demoted(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    *,
    user_id: str,
    session_id: uuid.UUID,
    demoted: Sequence[DemotedMessage],
    keys: Sequence[str] = (),
) -> dict[str, Segments]:
    """Before the compression's lock: the segment vectors of the chunks `index_demoted`
    will likely write, by content hash. The read is on a short session of its own, closed
    before the embedding: no connection is held across the model call."""
    _, fresh = await in_own_session(
        factory, lambda db: _fresh_of(db, user_id, session_id, demoted, keys)
    )
    segments = await embed_chunks(llm, [c.content for c in fresh])
    return {c.content_hash: s for c, s in zip(fresh, segments, strict=True) if s}


async def index_demoted(
    db: AsyncSession,
    *,
    user_id: str,
    session_id: uuid.UUID,
    demoted: Sequence[DemotedMessage],
    keys: Sequence[str] = (),
    vectors: dict[str, Segments] | None = None,
) -> int:
    """Write the demoted messages the index does not cover yet as raw chunks (the idle
    job may have indexed some already: `raw_index_state`), with the `vectors` prepared
    for them (`embed_demoted`) — a chunk without is marked `vectors_stale` for the
    embedding queue; returns the number of new chunks. No model call: this runs under
    the session's lock. The session's index row stays locked until the compression
    commits."""
    try:
        state = RawIndexRepository(db)
        seqs = [m.sequence_number for m in demoted]
        try:
            async with db.begin_nested():
                await state.lock_for_compression(user_id, session_id)
        except DBAPIError as exc:  # the idle job is indexing this session right now
            log.info("memory.chunk_index_deferred", session_id=str(session_id), error=str(exc))
            return 0
        async with db.begin_nested():
            new, fresh = await _fresh_of(db, user_id, session_id, demoted, keys)
            ready = vectors or {}
            embedded = [c for c in fresh if c.content_hash in ready]
            stale = [c for c in fresh if c.content_hash not in ready]
            writer = ChunkWriter(db)
            written = await writer.add_chunks(
                user_id, session_id, embedded, [ready[c.content_hash] for c in embedded]
            )
            if stale:  # the embedding queue gives them their vectors
                ids = await writer.insert_chunks(
                    user_id, session_id, stale, [[] for _ in stale], vectors_stale=True
                )
                written += sum(i is not None for i in ids)
            await state.cover(user_id, session_id, seqs)
            earlier = [s for s in seqs if s not in new]
            if keys and earlier:  # indexed before (live or idle): they get the KEYS too
                await writer.add_keys(user_id, session_id, min(earlier), max(earlier), keys)
        RAW_CHUNKS_INDEXED.labels("demotion").inc(written)
        log.info(
            "memory.chunks_indexed",
            session_id=str(session_id),
            chunks=written,
            stale=len(stale),
            already_indexed=len(seqs) - len(new),
        )
        return written
    except Exception as exc:  # never fails a compression
        log.warning("compressor.chunk_index_failed", session_id=str(session_id), error=str(exc))
        return 0
