"""All SQL of history search: full text, substring, recent, neighbours, message vectors.

Every query reads the hot table and the archive together (`UNION ALL`): a session's
history is both, and sequence numbers are unique across the two. Callers check that the
session is visible to the caller first (`SessionAccess.get(session_id, viewer)`), as
for `MessageRepository.history_page`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MessageEmbedding
from app.domain.history.search import HistoryRow
from app.lib.sql import contains_pattern

# Messages a search may return: the conversation itself, not system prompts, summaries
# or compression markers.
SEARCHABLE = (
    "role IN ('user', 'assistant', 'tool') AND NOT is_summary AND NOT is_compression "
    "AND content <> ''"
)
_COLS = "sequence_number, role, content, created_at, name"


def _both(where: str, extra_cols: str = "") -> str:
    """`SELECT … FROM hot UNION ALL SELECT … FROM archive` with the same WHERE."""
    cols = f"{_COLS}, ({SEARCHABLE}) AS searchable{extra_cols}"
    return (
        f"SELECT {cols}, false AS archived FROM session_messages WHERE user_id = :uid AND session_id = :sid "
        f"AND {where} UNION ALL "
        f"SELECT {cols}, true AS archived FROM session_messages_archive WHERE user_id = :uid AND session_id = :sid "
        f"AND {where}"
    )


def _row(r: Any) -> HistoryRow:
    return HistoryRow(
        sequence_number=int(r.sequence_number),
        role=r.role,
        content=r.content,
        created_at=r.created_at,
        archived=bool(r.archived),
        name=r.name,
        searchable=bool(r.searchable),
    )


class HistoryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def fulltext(
        self,
        user_id: str,
        session_id: uuid.UUID,
        query: str,
        limit: int,
        *,
        any_of: Sequence[str] | None = None,
        exclude: Sequence[int] = (),
    ) -> list[HistoryRow]:
        """Full text over the content (GIN indexes on both tables), best rank first,
        then newest: `websearch_to_tsquery('simple', query)` (every word, "phrases",
        -excluded), or with `any_of` any of those words (`to_tsquery('simple', 'a | b')`;
        they must be plain words, as `query_terms` yields)."""
        # The tsquery is computed once; the predicate repeats the indexed expression.
        where = (
            f"to_tsvector('simple', content) @@ (SELECT tsq FROM q) AND {SEARCHABLE} "
            "AND NOT (sequence_number = ANY(:exclude))"
        )
        rank = ", ts_rank_cd(to_tsvector('simple', content), (SELECT tsq FROM q)) AS rank"
        tsq = (
            "to_tsquery('simple', :q)"
            if any_of is not None
            else "websearch_to_tsquery('simple', :q)"
        )
        stmt = text(
            f"""
            WITH q AS (SELECT {tsq} AS tsq)
            SELECT * FROM ({_both(where, rank)}) hits
            ORDER BY rank DESC, sequence_number DESC
            LIMIT :limit
            """
        ).bindparams(bindparam("exclude", type_=None))
        q = " | ".join(any_of) if any_of is not None else query
        rows = await self.session.execute(
            stmt,
            {
                "uid": user_id,
                "sid": session_id,
                "q": q,
                "limit": limit,
                "exclude": [int(x) for x in exclude],
            },
        )
        return [_row(r) for r in rows]

    async def substring(
        self,
        user_id: str,
        session_id: uuid.UUID,
        term: str,
        limit: int,
        exclude: Sequence[int] = (),
    ) -> list[HistoryRow]:
        """Case-insensitive literal substring (trigram indexes when pg_trgm is installed),
        newest first: the fallback for tokens full text does not split the same way
        (`localhost:8098`, `v1.2`, parts of words)."""
        where = (
            f"content ILIKE :pattern ESCAPE '\\' AND {SEARCHABLE} "
            "AND NOT (sequence_number = ANY(:exclude))"
        )
        stmt = text(
            f"SELECT * FROM ({_both(where)}) hits ORDER BY sequence_number DESC LIMIT :limit"
        ).bindparams(bindparam("exclude", type_=None))
        rows = await self.session.execute(
            stmt,
            {
                "uid": user_id,
                "sid": session_id,
                "pattern": contains_pattern(term),
                "exclude": [int(s) for s in exclude],
                "limit": limit,
            },
        )
        return [_row(r) for r in rows]

    async def recent(self, user_id: str, session_id: uuid.UUID, limit: int) -> list[HistoryRow]:
        """The newest searchable messages, newest first."""
        stmt = text(
            f"SELECT * FROM ({_both(SEARCHABLE)}) m ORDER BY sequence_number DESC LIMIT :limit"
        )
        rows = await self.session.execute(stmt, {"uid": user_id, "sid": session_id, "limit": limit})
        return [_row(r) for r in rows]

    async def by_sequence(
        self, user_id: str, session_id: uuid.UUID, sequence_numbers: Sequence[int]
    ) -> list[HistoryRow]:
        stmt = text(
            f"SELECT * FROM ({_both('sequence_number = ANY(:seqs)')}) m ORDER BY sequence_number"
        ).bindparams(bindparam("seqs", type_=None))
        rows = await self.session.execute(
            stmt, {"uid": user_id, "sid": session_id, "seqs": [int(s) for s in sequence_numbers]}
        )
        return [_row(r) for r in rows]

    async def around(
        self, user_id: str, session_id: uuid.UUID, centres: Sequence[int], before: int, after: int
    ) -> list[HistoryRow]:
        """Every row within [centre - before, centre + after] of any centre, in order."""
        seqs = sorted({s + d for s in centres for d in range(-before, after + 1) if s + d >= 0})
        return await self.by_sequence(user_id, session_id, seqs)

    # ---------------------------------------------------------------- vectors
    async def next_seq(self, user_id: str, session_id: uuid.UUID) -> int:
        return int(
            (
                await self.session.execute(
                    text("SELECT next_seq FROM sessions WHERE user_id = :uid AND id = :sid"),
                    {"uid": user_id, "sid": session_id},
                )
            ).scalar_one()
        )

    async def unembedded(
        self, user_id: str, session_id: uuid.UUID, floor: int, limit: int
    ) -> list[tuple[int, str]]:
        """Searchable messages with sequence_number ≥ floor and no vector yet, newest first."""
        where = (
            f"sequence_number >= :floor AND {SEARCHABLE} AND NOT EXISTS ("
            "SELECT 1 FROM message_embeddings e WHERE e.user_id = :uid AND e.session_id = :sid "
            "AND e.sequence_number = {t}.sequence_number)"
        )
        stmt = text(
            f"""
            SELECT sequence_number, content FROM (
                SELECT sequence_number, content FROM session_messages
                WHERE user_id = :uid AND session_id = :sid AND {where.format(t="session_messages")}
                UNION ALL
                SELECT sequence_number, content FROM session_messages_archive
                WHERE user_id = :uid AND session_id = :sid AND {where.format(t="session_messages_archive")}
            ) m ORDER BY sequence_number DESC LIMIT :limit
            """
        )
        rows = await self.session.execute(
            stmt, {"uid": user_id, "sid": session_id, "floor": floor, "limit": limit}
        )
        return [(int(r.sequence_number), r.content) for r in rows]

    async def add_embeddings(
        self, user_id: str, session_id: uuid.UUID, items: Sequence[tuple[int, list[float]]]
    ) -> None:
        if not items:
            return
        await self.session.execute(
            insert(MessageEmbedding)
            .values(
                [
                    {
                        "session_id": session_id,
                        "user_id": user_id,
                        "sequence_number": s,
                        "embedding": v,
                    }
                    for s, v in items
                ]
            )
            .on_conflict_do_nothing(index_elements=["session_id", "sequence_number", "user_id"])
        )

    async def drop_embeddings_before(self, user_id: str, session_id: uuid.UUID, floor: int) -> int:
        """Vectors that fell out of the recent window (the seed drops them at compaction)."""
        result = await self.session.execute(
            text(
                "DELETE FROM message_embeddings WHERE user_id = :uid AND session_id = :sid AND sequence_number < :floor"
            ),
            {"uid": user_id, "sid": session_id, "floor": floor},
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def nearest(
        self,
        user_id: str,
        session_id: uuid.UUID,
        floor: int,
        vector: list[float],
        limit: int,
        max_distance: float,
    ) -> list[tuple[int, float]]:
        """Nearest recent messages by cosine distance. The session's window (≤ a few
        hundred rows, by primary key) is ranked exactly: the MATERIALIZED CTE keeps the
        planner from a global ANN scan filtered down to one session."""
        stmt = text(
            """
            WITH recent AS MATERIALIZED (
                SELECT sequence_number, embedding FROM message_embeddings
                WHERE user_id = :uid AND session_id = :sid AND sequence_number >= :floor
            )
            SELECT sequence_number, embedding <=> :vec AS distance FROM recent
            ORDER BY distance, sequence_number DESC
            LIMIT :limit
            """
        ).bindparams(bindparam("vec", type_=Vector()))
        rows = await self.session.execute(
            stmt, {"uid": user_id, "sid": session_id, "floor": floor, "vec": vector, "limit": limit}
        )
        return [
            (int(r.sequence_number), float(r.distance))
            for r in rows
            if float(r.distance) < max_distance
        ]
