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
from typing import Any, cast

from sqlalchemy import Row, Table, func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MemoryChunk, MemoryChunkVector
from app.domain.kernel.forgotten import MARKER, NOTHING
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.kernel.repositories import ChunkCountRepository
from app.domain.raw_history.breadcrumbs import merge_breadcrumbs
from app.domain.raw_history.chunks import RawChunk, redact_chunk

_VECTORS = cast(Table, MemoryChunkVector.__table__)  # Core: not the ORM's bulk insert path


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
        ids = await self.insert_chunks(user_id, session_id, chunks, segments)
        return sum(i is not None for i in ids)

    async def insert_chunks(
        self,
        user_id: str,
        session_id: uuid.UUID,
        chunks: Sequence[RawChunk],
        segments: Sequence[Sequence[tuple[int, int, list[float]]]],
        *,
        vectors_stale: bool = False,
    ) -> list[uuid.UUID | None]:
        """`add_chunks`, returning each chunk's new id (None: skipped). `vectors_stale`
        marks them for the background embedder (the live indexer writes no vectors).
        A chunk holding a forgotten text (content or breadcrumbs: `redact_chunk`) is
        written redacted, without the vectors embedded from its old text (stale)."""
        ids: list[uuid.UUID | None] = []
        forgotten = await ForgottenRepository(self.session).guard(user_id) if chunks else NOTHING
        for original, original_segs in zip(chunks, segments, strict=True):
            chunk = redact_chunk(original, forgotten)
            segs = original_segs if chunk is original else []
            stale = vectors_stale or chunk is not original
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
                    vectors_stale=stale,
                    stale_since=func.now() if stale else None,
                )
                .on_conflict_do_nothing(index_elements=["session_id", "content_hash", "user_id"])
                .returning(MemoryChunk.id)
            )
            row = result.first()
            ids.append(None if row is None else row.id)
            if row is None:
                continue
            await self.add_segments(
                user_id, session_id, [(row.id, n, a, b, e) for n, (a, b, e) in enumerate(segs)]
            )
        await ChunkCountRepository(self.session).change(user_id, sum(i is not None for i in ids))
        return ids

    # ------------------------------------------------------------ the live indexer
    async def add_keys(
        self,
        user_id: str,
        session_id: uuid.UUID,
        start_seq: int,
        end_seq: int,
        keys: Sequence[str],
    ) -> int:
        """A compression's `KEYS:` on the session's chunks of turns `start_seq`–`end_seq`
        that were indexed before it (first, as on the chunks it writes; at most
        `MAX_BREADCRUMBS`); returns the chunks changed."""
        rows = await self.session.execute(
            text(
                "SELECT id, breadcrumbs FROM memory_chunks WHERE user_id = :uid"
                " AND session_id = :sid AND start_seq <= :end AND end_seq >= :start"
            ),
            {"uid": user_id, "sid": session_id, "start": start_seq, "end": end_seq},
        )
        changed = 0
        forgotten = await ForgottenRepository(self.session).guard(user_id)
        keys = [k for k in (forgotten.redact(k) for k in keys) if k and k != MARKER]
        for row in rows.all():
            crumbs = merge_breadcrumbs(keys, row.breadcrumbs)
            if crumbs == list(row.breadcrumbs):
                continue
            await self.session.execute(
                text("UPDATE memory_chunks SET breadcrumbs = :c WHERE user_id = :uid AND id = :id"),
                {"c": crumbs, "uid": user_id, "id": row.id},
            )
            changed += 1
        if changed:
            await ChunkCountRepository(self.session).touch(user_id)
        return changed

    # ------------------------------------------------------- the background embedder
    async def due_chunks(self, quiet_seconds: float, limit: int) -> list[Row[Any]]:
        """(user_id, id) of up to `limit` chunks whose vectors lag their text, any user's,
        newest first (the partial index `ix_memory_chunks_vectors_stale` holds only
        those): a closed chunk at once, a session's open chunk (the one its appends still
        grow) once the session has been quiet `quiet_seconds`; chunks another indexer
        holds are passed over. Newest first: under a load the embedder cannot follow, what
        was just said gets its meaning soon and the old backlog (found by its words)
        waits for the load to pass; without one, the order makes no difference."""
        rows = await self.session.execute(
            text(
                "SELECT c.user_id, c.id FROM memory_chunks c"
                " LEFT JOIN raw_index_state s ON s.user_id = c.user_id"
                " AND s.session_id = c.session_id AND s.open_chunk_id = c.id"
                " LEFT JOIN sessions ss ON ss.user_id = c.user_id AND ss.id = c.session_id"
                " WHERE c.vectors_stale"
                " AND (c.embed_lease_until IS NULL OR c.embed_lease_until < now())"
                " AND (s.open_chunk_id IS NULL OR ss.last_active IS NULL"
                " OR ss.last_active <= now() - make_interval(secs => :quiet))"
                " ORDER BY c.stale_since DESC NULLS LAST, c.id LIMIT :limit"
            ),
            {"quiet": quiet_seconds, "limit": limit},
        )
        return list(rows.all())

    async def claim_chunks(
        self, user_id: str, chunk_ids: Sequence[uuid.UUID], lease_seconds: float
    ) -> list[Row[Any]]:
        """Lease the user's `chunk_ids` that are still stale and nobody else holds, until
        `lease_seconds` from now; their text to embed. Two indexers claiming one chunk:
        the second waits for the first's row lock, then finds it held and skips it."""
        rows = await self.session.execute(
            text(
                "UPDATE memory_chunks"
                " SET embed_lease_until = now() + make_interval(secs => :lease)"
                " WHERE user_id = :uid AND id = ANY(CAST(:ids AS uuid[])) AND vectors_stale"
                " AND (embed_lease_until IS NULL OR embed_lease_until < now())"
                " RETURNING user_id, id, session_id, content, content_hash"
            ),
            {"uid": user_id, "ids": [str(i) for i in chunk_ids], "lease": lease_seconds},
        )
        return list(rows.all())

    async def release_chunks(self, user_id: str, chunk_ids: Sequence[uuid.UUID]) -> None:
        """Give up the lease on chunks this indexer could not write (they changed, or the
        embedder failed): the next round may take them."""
        await self.session.execute(
            text(
                "UPDATE memory_chunks SET embed_lease_until = NULL"
                " WHERE user_id = :uid AND id = ANY(CAST(:ids AS uuid[]))"
            ),
            {"uid": user_id, "ids": [str(i) for i in chunk_ids]},
        )

    async def segment_spans_of(
        self, user_id: str, chunk_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, dict[int, tuple[int, int]]]:
        """chunk → part → (start, end) of the stored segment vectors of the user's
        `chunk_ids`."""
        rows = await self.session.execute(
            text(
                "SELECT chunk_id, part, start_char, end_char FROM memory_chunk_vectors"
                " WHERE user_id = :uid AND chunk_id = ANY(CAST(:ids AS uuid[]))"
            ),
            {"uid": user_id, "ids": [str(i) for i in chunk_ids]},
        )
        spans: dict[uuid.UUID, dict[int, tuple[int, int]]] = {}
        for r in rows:
            spans.setdefault(r.chunk_id, {})[r.part] = (r.start_char, r.end_char)
        return spans

    async def replace_segments(
        self,
        user_id: str,
        session_id: uuid.UUID,
        chunk_id: uuid.UUID,
        content_hash: str,
        parts: int,
        rows: Sequence[tuple[int, int, int, list[float]]],
    ) -> bool:
        """The chunk's vectors are its `parts` segments: `rows` ((part, start, end,
        embedding)) replace those that changed, parts past the last are dropped. False,
        writing nothing, when the chunk's content is no longer `content_hash` (it grew or
        was redacted meanwhile: it stays stale for the next round)."""
        done = (
            await self.session.execute(
                text(
                    "UPDATE memory_chunks SET vectors_stale = false, stale_since = NULL,"
                    " embed_lease_until = NULL"
                    " WHERE user_id = :uid AND id = :id AND content_hash = :hash RETURNING id"
                ),
                {"uid": user_id, "id": chunk_id, "hash": content_hash},
            )
        ).first()
        if done is None:
            return False
        await self.session.execute(
            text(
                "DELETE FROM memory_chunk_vectors WHERE user_id = :uid AND chunk_id = :id"
                " AND (part >= :parts OR part = ANY(CAST(:changed AS int[])))"
            ),
            {"uid": user_id, "id": chunk_id, "parts": parts, "changed": [r[0] for r in rows]},
        )
        await self.add_segments(
            user_id, session_id, [(chunk_id, part, a, b, e) for part, a, b, e in rows]
        )
        return True

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
            insert(_VECTORS).on_conflict_do_nothing(),
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
