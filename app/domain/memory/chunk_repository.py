"""SQL of raw chunks (`memory_chunks`): append-only, idempotent per (session, content)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MemoryChunk, Message
from app.domain.memory.chunks import RawChunk
from app.lib.sql import contains_pattern

_CHUNK_COLUMNS = (
    MemoryChunk.id,
    MemoryChunk.session_id,
    MemoryChunk.content,
    MemoryChunk.start_seq,
    MemoryChunk.end_seq,
    MemoryChunk.started_at,
    MemoryChunk.ended_at,
    MemoryChunk.breadcrumbs,
)


class ChunkRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add_chunks(
        self,
        user_id: str | None,
        session_id: uuid.UUID,
        chunks: Sequence[RawChunk],
        embeddings: Sequence[list[float] | None],
    ) -> int:
        """Insert chunks; a (session_id, content_hash) already stored is skipped.
        Returns the number actually written."""
        written = 0
        for chunk, emb in zip(chunks, embeddings, strict=True):
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
                    embedding=emb,
                )
                .on_conflict_do_nothing(index_elements=["session_id", "content_hash"])
                .returning(MemoryChunk.id)
            )
            written += result.first() is not None
        return written

    async def existing_hashes(self, session_id: uuid.UUID, hashes: Sequence[str]) -> set[str]:
        rows = await self.session.execute(
            select(MemoryChunk.content_hash).where(
                MemoryChunk.session_id == session_id, MemoryChunk.content_hash.in_(list(hashes))
            )
        )
        return set(rows.scalars())

    async def search_vector(
        self,
        user_id: str,
        query_embedding: list[float],
        *,
        session_id: uuid.UUID | None,
        limit: int,
        max_distance: float,
    ) -> list[tuple[Row[Any], float]]:
        """Nearest chunks of one user by cosine distance, under `max_distance`."""
        # Filtered HNSW scans keep looking until `limit` rows pass the filter (pgvector 0.8).
        await self.session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
        distance = MemoryChunk.embedding.cosine_distance(query_embedding).label("distance")
        stmt = select(*_CHUNK_COLUMNS, distance).where(
            MemoryChunk.user_id == user_id, MemoryChunk.embedding.is_not(None)
        )
        if session_id is not None:
            stmt = stmt.where(MemoryChunk.session_id == session_id)
        rows = (await self.session.execute(stmt.order_by(distance).limit(limit))).all()
        return [(r, float(r.distance)) for r in rows if r.distance < max_distance]

    async def search_text(
        self,
        user_id: str,
        query: str,
        terms: Sequence[str],
        *,
        session_id: uuid.UUID | None,
        limit: int,
    ) -> list[tuple[Row[Any], int]]:
        """Full text (`plainto_tsquery` on content) or any term in content or breadcrumbs;
        scored by how many distinct terms matched, then by recency."""
        patterns = [contains_pattern(t) for t in terms]
        session_filter = "AND session_id = :sid" if session_id is not None else ""
        stmt = text(
            f"""
            SELECT id, session_id, content, start_seq, end_seq, started_at, ended_at,
                   breadcrumbs, terms_hit
            FROM (
                SELECT c.*, (
                    SELECT count(*) FROM unnest(CAST(:patterns AS text[])) AS p
                    WHERE c.content ILIKE p
                       OR array_to_string(c.breadcrumbs, ' ') ILIKE p
                ) AS terms_hit
                FROM memory_chunks c
                WHERE user_id = :uid {session_filter}
                  AND (
                    to_tsvector('simple', content) @@ plainto_tsquery('simple', :q)
                    OR content ILIKE ANY(CAST(:patterns AS text[]))
                    OR array_to_string(breadcrumbs, ' ') ILIKE ANY(CAST(:patterns AS text[]))
                  )
            ) scored
            ORDER BY terms_hit DESC, ended_at DESC NULLS LAST
            LIMIT :limit
            """
        )
        params: dict[str, Any] = {"uid": user_id, "q": query, "patterns": patterns, "limit": limit}
        if session_id is not None:
            params["sid"] = session_id
        rows = (await self.session.execute(stmt, params)).all()
        return [(r, int(r.terms_hit)) for r in rows]

    async def recent(
        self, user_id: str, *, session_id: uuid.UUID | None, limit: int
    ) -> list[Row[Any]]:
        stmt = select(*_CHUNK_COLUMNS).where(MemoryChunk.user_id == user_id)
        if session_id is not None:
            stmt = stmt.where(MemoryChunk.session_id == session_id)
        stmt = stmt.order_by(MemoryChunk.ended_at.desc().nulls_last()).limit(limit)
        rows: list[Row[Any]] = list((await self.session.execute(stmt)).all())  # type: ignore[arg-type]
        return rows

    async def latest_summary_at(self, session_id: uuid.UUID) -> datetime | None:
        """When the session was last compressed: the freshness boundary of raw excerpts."""
        return (
            await self.session.execute(
                select(func.max(Message.created_at)).where(
                    Message.session_id == session_id, Message.is_summary.is_(True)
                )
            )
        ).scalar_one_or_none()

    async def count_for_session(self, session_id: uuid.UUID) -> int:
        return (
            await self.session.execute(
                select(func.count()).where(MemoryChunk.session_id == session_id)
            )
        ).scalar_one()
