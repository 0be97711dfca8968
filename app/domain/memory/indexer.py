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
        embeddings = await embed_or_none(llm, [c.content for c in fresh])
        async with db.begin_nested():
            written = await repo.add_chunks(user_id, session_id, fresh, embeddings)
        log.info("memory.chunks_indexed", session_id=str(session_id), chunks=written)
        return written
    except Exception as exc:  # never fails a compression
        log.warning("compressor.chunk_index_failed", session_id=str(session_id), error=str(exc))
        return 0
