"""Raw history index: the messages a compression demoted, kept verbatim as chunks.

`index_demoted` is the hook compression calls on every path (pre, mid, post, forced,
hard-truncate). It runs inside a SAVEPOINT: an indexing failure is logged
(`compressor.chunk_index_failed`) and never fails — or poisons — the compression's
transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.memory.breadcrumbs import extract_breadcrumbs, merge_breadcrumbs
from app.domain.memory.chunk_repository import ChunkRepository
from app.domain.memory.chunks import ChunkMessage, build_chunks
from app.domain.memory.ranking import segment_spans
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


async def embed_chunks(
    llm: LLMGateway, contents: list[str]
) -> tuple[list[list[float] | None], list[list[tuple[int, int, list[float]]]]]:
    """Each chunk's own vector (its content, as the model reads it) and its segments'
    vectors (`ranking.segment_spans`), in one batched call; Nones and no segments when
    the embedding backend fails."""
    texts, spans = chunk_embedding_texts(contents)
    return split_chunk_vectors(contents, spans, await embed_or_none(llm, texts))


def chunk_embedding_texts(contents: list[str]) -> tuple[list[str], list[list[tuple[int, int]]]]:
    """What embedding `contents` takes: every content, then every segment of each."""
    spans = [segment_spans(c) for c in contents]
    texts = [*contents, *(c[a:b] for c, sp in zip(contents, spans, strict=True) for a, b in sp)]
    return texts, spans


def split_chunk_vectors(
    contents: list[str],
    spans: list[list[tuple[int, int]]],
    vectors: list[list[float] | None] | list[list[float]],
) -> tuple[list[list[float] | None], list[list[tuple[int, int, list[float]]]]]:
    """The vectors of `chunk_embedding_texts(contents)` back per chunk: its own vector and
    its segments (none when any of them is missing)."""
    own: list[list[float] | None] = list(vectors[: len(contents)])
    rest = iter(vectors[len(contents) :])
    segments: list[list[tuple[int, int, list[float]]]] = []
    for sp in spans:
        segs = [(a, b, v) for (a, b), v in zip(sp, rest, strict=False) if v is not None]
        segments.append(segs if len(segs) == len(sp) else [])
    return own, segments


async def index_demoted(
    db: AsyncSession,
    llm: LLMGateway,
    *,
    user_id: str | None,
    session_id: uuid.UUID,
    demoted: Sequence[DemotedMessage],
    keys: Sequence[str] = (),
) -> int:
    """Write the demoted messages as raw chunks; returns the number of new chunks."""
    try:
        messages = [
            ChunkMessage(
                role=m.role,
                content=m.content or "",
                sequence_number=m.sequence_number,
                created_at=m.created_at,
                name=m.name,
                is_summary=m.is_summary,
                is_compression=m.is_compression,
            )
            for m in demoted
        ]
        skipped = {"system"}
        texts = [m.content for m in messages if m.role not in skipped and not m.is_summary]
        crumbs = merge_breadcrumbs(keys, extract_breadcrumbs(texts))
        chunks = build_chunks(messages, crumbs)
        if not chunks:
            return 0
        repo = ChunkRepository(db)
        async with db.begin_nested():
            known = await repo.existing_hashes(session_id, [c.content_hash for c in chunks])
        fresh = [c for c in chunks if c.content_hash not in known]
        embeddings, segments = await embed_chunks(llm, [c.content for c in fresh])
        async with db.begin_nested():
            written = await repo.add_chunks(user_id, session_id, fresh, embeddings, segments)
        log.info("memory.chunks_indexed", session_id=str(session_id), chunks=written)
        return written
    except Exception as exc:  # never fails a compression
        log.warning("compressor.chunk_index_failed", session_id=str(session_id), error=str(exc))
        return 0
