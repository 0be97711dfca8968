"""SQL that writes raw chunks (`memory_chunks`) and their segment vectors
(`memory_chunk_vectors`): append-only, idempotent per (session, content) — a chunk whose
`(session_id, content_hash)` is already stored is skipped, and so are its segments. The
chunks written are counted in the user's `memory_chunk_counts` (`ChunkCountRepository`),
whose count and version the raw search reads first. The raw search's reads of the same
rows are `ChunkRepository`'s (repositories.py), which imports nothing from here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MemoryChunk, MemoryChunkVector
from app.domain.kernel.repositories import ChunkCountRepository
from app.domain.raw_history.chunks import RawChunk


class ChunkWriter:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add_chunks(
        self,
        user_id: str,
        session_id: uuid.UUID,
        chunks: Sequence[RawChunk],
        segments: Sequence[Sequence[tuple[int, int, list[float]]]],
    ) -> int:
        """Insert chunks; a (session_id, content_hash) already stored is skipped.
        `segments` (per chunk: (start, end, embedding) of its segments; none when the
        embedder failed) are stored with the chunks actually written. Returns the number
        actually written."""
        written = 0
        for chunk, segs in zip(chunks, segments, strict=True):
            result = await self.session.execute(
                insert(MemoryChunk)
                .values(
                    id=uuid.uuid4(),
                    user_id=user_id,
                    session_id=session_id,
                    content=chunk.content,
                    content_hash=chunk.content_hash,
                    start_seq=chunk.start_seq,
                    end_seq=chunk.end_seq,
                    started_at=chunk.started_at,
                    ended_at=chunk.ended_at,
                    breadcrumbs=list(chunk.breadcrumbs),
                )
                .on_conflict_do_nothing(index_elements=["session_id", "content_hash", "user_id"])
                .returning(MemoryChunk.id)
            )
            row = result.first()
            if row is None:
                continue
            written += 1
            await self.add_segments(
                user_id, session_id, [(row.id, n, a, b, e) for n, (a, b, e) in enumerate(segs)]
            )
        await ChunkCountRepository(self.session).change(user_id, written)
        return written

    async def existing_hashes(
        self, user_id: str, session_id: uuid.UUID, hashes: Sequence[str]
    ) -> set[str]:
        rows = await self.session.execute(
            select(MemoryChunk.content_hash).where(
                MemoryChunk.user_id == user_id,
                MemoryChunk.session_id == session_id,
                MemoryChunk.content_hash.in_(list(hashes)),
            )
        )
        return set(rows.scalars())

    async def add_segments(
        self,
        user_id: str,
        session_id: uuid.UUID,
        rows: Sequence[tuple[uuid.UUID, int, int, int, list[float]]],
    ) -> None:
        """Store segment vectors: (chunk id, part, start char, end char, embedding)."""
        if not rows:
            return
        await self.session.execute(
            insert(MemoryChunkVector).on_conflict_do_nothing(),
            [
                {
                    "chunk_id": chunk_id,
                    "part": part,
                    "user_id": user_id,
                    "session_id": session_id,
                    "start_char": start,
                    "end_char": end,
                    "embedding": emb,
                }
                for chunk_id, part, start, end, emb in rows
            ],
        )
