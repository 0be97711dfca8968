"""All SQL of facts and summaries.

Every method that reads or writes a user's facts takes the user in its signature; the
cross-user reads take `all_users=True` explicitly (the permission is checked above).

"Live" = not hidden behind another row (`merged_into IS NULL`) and not expired. Every
read returns live rows only, except `list_facts`/`count_facts` with `include_merged`
(hidden rows, for the undo screen). Expired rows are never returned.

Vector search has two shapes. For one user it is an *exact* scan of that user's rows
(the `(user_id, category, key)` btree finds them, the ordering expression is kept off the
HNSW index on purpose): an approximate index walk over every user's vectors followed by
a user filter would miss the user's rows. For all users it is an HNSW walk, with
pgvector's iterative scan (≥ 0.8) so the live-row filter does not starve it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Row,
    String,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from app.db.models import MemoryFact, MemorySummary

SORT_COLUMNS = {
    "category": MemoryFact.category,
    "key": MemoryFact.key,
    "updated_at": MemoryFact.updated_at,
    "confidence": MemoryFact.confidence,
    "created_at": MemoryFact.created_at,
}

_HAYSTACKS = (MemoryFact.category, MemoryFact.key, MemoryFact.value)
# What reads return: every column but the vector (768 floats to parse per row, and no
# caller needs it), plus whether there is one.
_OUT = (
    *(c for c in MemoryFact.__table__.c if c.name != "embedding"),
    MemoryFact.__table__.c.embedding.is_not(None).label("has_embedding"),
)
FactRow = Row[*tuple[Any, ...]]  # a memory_facts row without the vector (see _OUT)
_TRGM_CACHE: dict[str, tuple[float, bool]] = {}
_TRGM_CACHE_SECONDS = 60.0
HNSW_EF_SEARCH = 100


def like_pattern(term: str) -> str:
    """`%term%` with LIKE's own wildcards in the term taken literally."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _not_expired() -> ColumnElement[bool]:
    return or_(MemoryFact.expires_at.is_(None), MemoryFact.expires_at > func.now())


def live() -> ColumnElement[bool]:
    return and_(MemoryFact.merged_into.is_(None), _not_expired())


def _scope(user_id: str | None, all_users: bool) -> ColumnElement[bool]:
    if all_users:
        return MemoryFact.user_id == user_id if user_id is not None else literal(True)
    if user_id is None:
        raise ValueError("user_id is required unless all_users=True")
    return MemoryFact.user_id == user_id


def _version_at_least(version: str | None, wanted: tuple[int, ...]) -> bool:
    if not version:
        return False
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[: len(wanted)])
    return parts >= wanted


class FactRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # ------------------------------------------------------------------ writes
    async def upsert(
        self,
        user_id: str,
        *,
        category: str,
        key: str,
        value: str,
        source: str,
        confidence: int,
        expires_at: datetime | None,
        source_context: str | None,
        source_session_id: Any,
        embedding: Sequence[float] | None,
    ) -> FactRow:
        """Insert, or rewrite the row of (user, category, key). A rewrite un-hides the row;
        a failed embedding (NULL) keeps the old vector when the value did not change."""
        stmt = pg_insert(MemoryFact).values(
            user_id=user_id,
            category=category,
            key=key,
            value=value,
            source=source,
            confidence=confidence,
            expires_at=expires_at,
            source_context=source_context,
            source_session_id=source_session_id,
            embedding=list(embedding) if embedding is not None else None,
            last_verified_at=func.now(),
        )
        ex = stmt.excluded
        upsert = stmt.on_conflict_do_update(
            index_elements=[MemoryFact.user_id, MemoryFact.category, MemoryFact.key],
            set_={
                "value": ex.value,
                "source": ex.source,
                "confidence": ex.confidence,
                "expires_at": ex.expires_at,
                "source_context": func.coalesce(ex.source_context, MemoryFact.source_context),
                "source_session_id": func.coalesce(
                    ex.source_session_id, MemoryFact.source_session_id
                ),
                "embedding": func.coalesce(
                    ex.embedding,
                    case((MemoryFact.value == ex.value, MemoryFact.embedding)),
                ),
                "merged_into": None,
                "updated_at": func.now(),
                "last_verified_at": func.now(),
            },
        ).returning(*_OUT)
        return (await self.session.execute(upsert)).one()

    async def live_in_category(
        self, user_id: str, category: str, exclude_id: int
    ) -> list[tuple[int, str, str]]:
        rows = await self.session.execute(
            select(MemoryFact.id, MemoryFact.key, MemoryFact.value).where(
                MemoryFact.user_id == user_id,
                MemoryFact.category == category,
                MemoryFact.id != exclude_id,
                live(),
            )
        )
        return [(r.id, r.key, r.value) for r in rows]

    async def hide(self, user_id: str, ids: Sequence[int], into_id: int) -> int:
        """Hide `ids` behind `into_id`. Rows already hidden behind them follow, so every
        hidden row points at a live one (one level, never a chain)."""
        if not ids:
            return 0
        await self.session.execute(
            update(MemoryFact)
            .where(MemoryFact.user_id == user_id, MemoryFact.merged_into.in_(ids))
            .values(merged_into=into_id)
        )
        result = await self.session.execute(
            update(MemoryFact)
            .where(MemoryFact.user_id == user_id, MemoryFact.id.in_(ids))
            .values(merged_into=into_id)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def set_merged_into(self, fact_id: int, user_id: str, into_id: int | None) -> None:
        if into_id is not None:
            await self.hide(user_id, [fact_id], into_id)
            return
        await self.session.execute(
            update(MemoryFact)
            .where(MemoryFact.id == fact_id, MemoryFact.user_id == user_id)
            .values(merged_into=None)
        )

    async def delete_by_key(self, user_id: str, key: str, category: str | None) -> int:
        """Delete the fact(s) under `key` (in `category`, or in any), hidden rows pointing
        at them first so none is left orphaned (the FK would un-hide them)."""
        target = select(MemoryFact.id).where(MemoryFact.user_id == user_id, MemoryFact.key == key)
        if category is not None:
            target = target.where(MemoryFact.category == category)
        ids = list((await self.session.execute(target)).scalars())
        if not ids:
            return 0
        await self.session.execute(
            delete(MemoryFact).where(MemoryFact.user_id == user_id, MemoryFact.merged_into.in_(ids))
        )
        await self.session.execute(delete(MemoryFact).where(MemoryFact.id.in_(ids)))
        return len(ids)

    async def purge_expired(self, expired_before: datetime) -> int:
        """System-wide housekeeping: delete facts expired before `expired_before`, with
        the rows hidden behind them."""
        ids = select(MemoryFact.id).where(MemoryFact.expires_at < expired_before)
        await self.session.execute(delete(MemoryFact).where(MemoryFact.merged_into.in_(ids)))
        result = await self.session.execute(
            delete(MemoryFact).where(MemoryFact.expires_at < expired_before)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ reads
    async def get(self, fact_id: int, user_id: str | None, *, all_users: bool) -> FactRow | None:
        """One fact by id, hidden or not (never an expired one)."""
        return (
            await self.session.execute(
                select(*_OUT).where(
                    MemoryFact.id == fact_id, _scope(user_id, all_users), _not_expired()
                )
            )
        ).one_or_none()

    def _list_filter(self, stmt: Any, search: str | None, include_merged: bool) -> Any:
        stmt = stmt.where(_not_expired())
        if not include_merged:
            stmt = stmt.where(MemoryFact.merged_into.is_(None))
        if search:
            pattern = like_pattern(search)
            stmt = stmt.where(or_(*(h.ilike(pattern, escape="\\") for h in _HAYSTACKS)))
        return stmt

    async def list_facts(
        self,
        user_id: str | None,
        *,
        all_users: bool = False,
        limit: int | None = None,
        offset: int = 0,
        search: str | None = None,
        sort_by: str = "category",
        sort_order: str = "asc",
        include_merged: bool = False,
    ) -> list[FactRow]:
        col = SORT_COLUMNS[sort_by]
        order = col.asc() if sort_order == "asc" else col.desc()
        stmt = select(*_OUT).where(_scope(user_id, all_users))
        stmt = self._list_filter(stmt, search, include_merged)
        stmt = stmt.order_by(order, MemoryFact.category, MemoryFact.key, MemoryFact.id)
        stmt = stmt.offset(offset)
        if limit is not None:
            stmt = stmt.limit(limit)
        return list((await self.session.execute(stmt)).all())

    async def count_facts(
        self,
        user_id: str | None,
        *,
        all_users: bool = False,
        search: str | None = None,
        include_merged: bool = False,
    ) -> int:
        stmt = select(func.count()).select_from(MemoryFact).where(_scope(user_id, all_users))
        stmt = self._list_filter(stmt, search, include_merged)
        return int((await self.session.execute(stmt)).scalar_one())

    async def categories(self, user_id: str) -> list[tuple[str, int]]:
        rows = await self.session.execute(
            select(MemoryFact.category, func.count())
            .where(MemoryFact.user_id == user_id, live())
            .group_by(MemoryFact.category)
            .order_by(func.count().desc(), MemoryFact.category)
        )
        return [(r[0], int(r[1])) for r in rows]

    async def vector_search(
        self,
        user_id: str | None,
        vector: Sequence[float],
        *,
        limit: int,
        max_distance: float,
        all_users: bool = False,
    ) -> list[FactRow]:
        """Live facts closer than `max_distance` (cosine) to `vector`, nearest first;
        each row carries its `distance`."""
        vec = list(vector)
        dist = MemoryFact.embedding.cosine_distance(vec)
        if all_users and user_id is None:
            # Every user: the HNSW walk (ORDER BY distance LIMIT k), the cutoff after it.
            await self._tune_hnsw_scan()
            stmt = (
                select(*_OUT, dist.label("distance"))
                .where(live(), MemoryFact.embedding.is_not(None))
                .order_by(dist)
                .limit(limit)
            )
            rows = [
                r for r in (await self.session.execute(stmt)).all() if r.distance < max_distance
            ]
            rows.sort(key=lambda r: (r.distance, r.id))  # relaxed_order may be slightly off
            return rows
        # One user: exact. The MATERIALIZED CTE is an optimisation fence, so the ordering
        # is never planned as a walk of the all-users HNSW index (which the user filter
        # would then starve); the distance is computed once per row of the user.
        scored = (
            select(*_OUT, dist.label("distance"))
            .where(_scope(user_id, all_users), live(), MemoryFact.embedding.is_not(None))
            .cte("scored")
            .prefix_with("MATERIALIZED")
        )
        stmt = (
            select(scored)
            .where(scored.c.distance < max_distance)
            .order_by(scored.c.distance, scored.c.id)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).all())

    async def _tune_hnsw_scan(self) -> None:
        """For this transaction: a wider HNSW search (ef_search 100, not 40: ~90 % instead
        of ~70 % recall on the benchmark's random vectors, real embeddings do better),
        and pgvector's iterative scan (≥ 0.8) so filtered-out rows do not starve it."""
        version = (
            await self.session.execute(
                text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            )
        ).scalar_one_or_none()
        await self.session.execute(text(f"SET LOCAL hnsw.ef_search = {HNSW_EF_SEARCH}"))
        if _version_at_least(version, (0, 8)):
            await self.session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))

    async def has_pg_trgm(self) -> bool:
        """Is pg_trgm installed? Cached per database for a minute: it changes only when a
        DBA installs it (and its indexes appear at the next start-up anyway)."""
        url = str(getattr(self.session.bind, "url", ""))
        cached = _TRGM_CACHE.get(url)
        if url and cached and time.monotonic() - cached[0] < _TRGM_CACHE_SECONDS:
            return cached[1]
        found = await self.session.execute(
            text("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        )
        present = found.scalar_one_or_none() is not None
        if url:
            _TRGM_CACHE[url] = (time.monotonic(), present)
        return present

    async def text_search(
        self,
        user_id: str | None,
        words: Sequence[str],
        *,
        limit: int,
        all_users: bool = False,
        trigram: bool = False,
    ) -> list[FactRow]:
        """Facts matching any of `words` in category, key or value, best first; each row
        carries its `score`.

        Score = number of words matched (ILIKE substring; with pg_trgm also a similar
        word, `%>`, so a typo still matches), plus the best trigram word similarity as a
        tie-breaker. Both conditions are served by the trigram GIN indexes when present.
        """
        if not words:
            return []
        matched: list[ColumnElement[bool]] = []
        for word in words:
            pattern = like_pattern(word)
            conds = [h.ilike(pattern, escape="\\") for h in _HAYSTACKS]
            if trigram:
                w = bindparam(None, word, type_=String)
                conds += [MemoryFact.key.op("%>")(w), MemoryFact.value.op("%>")(w)]
            matched.append(or_(*conds))
        score: ColumnElement[Any] = case((matched[0], 1.0), else_=0.0)
        for m in matched[1:]:
            score = score + case((m, 1.0), else_=0.0)
        if trigram:
            query = bindparam(None, " ".join(words), type_=String)
            score = score + func.greatest(
                func.word_similarity(query, MemoryFact.key),
                func.word_similarity(query, MemoryFact.value),
            ) * literal(0.5)
        stmt = (
            select(*_OUT, score.label("score"))
            .where(_scope(user_id, all_users), live(), or_(*matched))
            .order_by(
                score.desc(),
                MemoryFact.confidence.desc(),
                MemoryFact.updated_at.desc(),
                MemoryFact.id,
            )
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).all())

    async def naive_scan(
        self, words: Sequence[str], limit: int, *, indexes: bool = False
    ) -> list[tuple[int, str]]:
        """The baseline the benchmark compares against: ILIKE over every fact of every
        user, newest matches first. `indexes=False` is the naive way (a full scan, the
        planner kept off the trigram indexes); `indexes=True` lets it use them."""
        if not indexes:
            await self.session.execute(text("SET LOCAL enable_bitmapscan = off"))
            await self.session.execute(text("SET LOCAL enable_indexscan = off"))
        conds = [h.ilike(like_pattern(w), escape="\\") for w in words for h in _HAYSTACKS]
        stmt = (
            select(MemoryFact.id, MemoryFact.value)
            .where(or_(*conds))
            .order_by(MemoryFact.updated_at.desc())
            .limit(limit)
        )
        return [(r[0], r[1]) for r in await self.session.execute(stmt)]

    async def live_facts(self, user_id: str, limit: int) -> list[FactRow]:
        """The user's live facts for the summary: most confident, most recent first."""
        stmt = (
            select(*_OUT)
            .where(MemoryFact.user_id == user_id, live())
            .order_by(MemoryFact.confidence.desc(), MemoryFact.updated_at.desc(), MemoryFact.id)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).all())

    # ------------------------------------------------------------------ embeddings backfill
    async def count_unembedded(self) -> int:
        stmt = (
            select(func.count())
            .select_from(MemoryFact)
            .where(MemoryFact.embedding.is_(None), live())
        )
        return int((await self.session.execute(stmt)).scalar_one())

    async def claim_unembedded(self, limit: int) -> list[tuple[int, str, str, str]]:
        """Up to `limit` live facts without a vector, locked for this transaction; rows
        another backfill holds are skipped, not waited for."""
        stmt = (
            select(MemoryFact.id, MemoryFact.category, MemoryFact.key, MemoryFact.value)
            .where(MemoryFact.embedding.is_(None), live())
            .order_by(MemoryFact.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        rows = await self.session.execute(stmt)
        return [(r.id, r.category, r.key, r.value) for r in rows]

    async def set_embeddings(self, vectors: Sequence[tuple[int, Sequence[float]]]) -> None:
        if not vectors:
            return
        table = MemoryFact.__table__
        await self.session.execute(
            update(table)  # type: ignore[arg-type]
            .where(table.c.id == bindparam("fact_id"))
            .values(embedding=bindparam("vec")),
            [{"fact_id": fid, "vec": list(vec)} for fid, vec in vectors],
        )


class SummaryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, user_id: str) -> MemorySummary | None:
        return await self.session.get(MemorySummary, user_id, populate_existing=True)

    async def put(self, user_id: str, content: str) -> MemorySummary:
        stmt = (
            pg_insert(MemorySummary)
            .values(user_id=user_id, content=content)
            .on_conflict_do_update(
                index_elements=[MemorySummary.user_id],
                set_={"content": content, "updated_at": func.now()},
            )
            .returning(MemorySummary)
        )
        result = await self.session.execute(stmt, execution_options={"populate_existing": True})
        return result.scalars().one()


class ExtractionRepository:
    """Worker-side SQL of automatic extraction. The worker acts for every user: a claim
    carries the session's user, and facts are then written through `FactRepository`
    under that user."""

    # Roles and flags of the messages that are the conversation itself (not summaries,
    # compression markers, plans or recalled excerpts).
    _CONVERSATION = """
        role IN ('user', 'assistant', 'tool') AND NOT is_summary AND NOT is_compression
        AND NOT is_plan AND NOT is_recall
    """

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def ensure_state_rows(self, stale_before: datetime, limit: int = 1000) -> int:
        """Give stale sessions that hold a user message a `session_memory_state` row, so
        that they can be claimed with a row lock. Idempotent and race-free."""
        result = await self.session.execute(
            text(
                """
                INSERT INTO session_memory_state (session_id)
                SELECT s.id FROM sessions s
                WHERE s.last_active < :stale_before AND s.user_id IS NOT NULL
                  AND NOT EXISTS (SELECT 1 FROM session_memory_state m WHERE m.session_id = s.id)
                  AND (EXISTS (SELECT 1 FROM session_messages x
                               WHERE x.session_id = s.id AND x.role = 'user')
                       OR EXISTS (SELECT 1 FROM session_messages_archive x
                                  WHERE x.session_id = s.id AND x.role = 'user'))
                ORDER BY s.last_active
                LIMIT :limit
                ON CONFLICT (session_id) DO NOTHING
                """
            ),
            {"stale_before": stale_before, "limit": limit},
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def claim_next(self, stale_before: datetime, skip: Sequence[Any]) -> Row[Any] | None:
        """The next stale, un-extracted session, its state row locked until commit.

        `SKIP LOCKED`: a session another worker holds is passed over, never waited for;
        a session another worker has just finished no longer matches (READ COMMITTED
        re-checks the WHERE clause on the row it locks). Fewest failed attempts first,
        so one session that keeps failing does not starve the others.
        """
        row = await self.session.execute(
            text(
                """
                SELECT m.session_id, s.user_id, s.last_active, m.attempts
                FROM session_memory_state m JOIN sessions s ON s.id = m.session_id
                WHERE s.last_active < :stale_before AND s.user_id IS NOT NULL
                  AND (m.extracted_at IS NULL OR m.extracted_at < s.last_active)
                  AND NOT (m.session_id = ANY(CAST(:skip AS uuid[])))
                ORDER BY m.attempts, s.last_active
                LIMIT 1
                FOR UPDATE OF m SKIP LOCKED
                """
            ),
            {"stale_before": stale_before, "skip": [str(s) for s in skip]},
        )
        return row.first()

    async def transcript_messages(
        self, session_id: Any, head: int = 200, tail: int = 400
    ) -> list[Row[Any]]:
        """The first `head` and last `tail` conversation messages (hot + archive), in order."""
        both = f"""
            SELECT sequence_number, role, content, tool_calls, name FROM session_messages
            WHERE session_id = :sid AND {self._CONVERSATION}
            UNION ALL
            SELECT sequence_number, role, content, tool_calls, name FROM session_messages_archive
            WHERE session_id = :sid AND {self._CONVERSATION}
        """
        rows = await self.session.execute(
            text(
                f"""
                (SELECT * FROM ({both}) a ORDER BY sequence_number LIMIT :head)
                UNION
                (SELECT * FROM ({both}) b ORDER BY sequence_number DESC LIMIT :tail)
                ORDER BY sequence_number
                """
            ),
            {"sid": session_id, "head": head, "tail": tail},
        )
        return list(rows.all())

    async def mark_extracted(self, session_id: Any) -> None:
        await self.session.execute(
            text(
                """
                INSERT INTO session_memory_state (session_id, extracted_at) VALUES (:sid, now())
                ON CONFLICT (session_id) DO UPDATE
                SET extracted_at = now(), attempts = 0, last_error = NULL
                """
            ),
            {"sid": session_id},
        )

    async def record_failure(self, session_id: Any, error: str) -> None:
        await self.session.execute(
            text(
                """
                UPDATE session_memory_state
                SET attempts = attempts + 1, last_error = left(:error, 2000)
                WHERE session_id = :sid
                """
            ),
            {"sid": session_id, "error": error},
        )

    async def state(
        self, session_id: Any, user_id: str | None, *, all_users: bool
    ) -> Row[Any] | None:
        """`(extracted_at, attempts, last_error)` of a session the caller may see."""
        row = await self.session.execute(
            text(
                """
                SELECT m.extracted_at, m.attempts, m.last_error
                FROM session_memory_state m JOIN sessions s ON s.id = m.session_id
                WHERE m.session_id = :sid AND (:all_users OR s.user_id = :uid)
                """
            ),
            {"sid": session_id, "uid": user_id, "all_users": all_users},
        )
        return row.first()
