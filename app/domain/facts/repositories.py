"""SQL of facts (writes, reads, embeddings backfill) and summaries.

Every method that reads or writes a user's facts takes the user in its signature; the
cross-user reads take `all_users=True` explicitly (the permission is checked above).

"Live" = not hidden behind another row (`merged_into IS NULL`) and not expired. Every
read returns live rows only, except `list_facts`/`count_facts` with `include_merged`
(hidden rows, for the undo screen). Expired rows are never returned.

The search queries (vector, text, the benchmark's naive scan) are in
`search_repository.py`, on the column set and filters defined here (`FACT_COLUMNS`,
`live`, `user_scope`, `HAYSTACKS`); the extraction worker's own SQL is in
`extraction_repository.py`, the embeddings backfill's in `backfill_repository.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    Row,
    and_,
    case,
    delete,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from app.db.models import MemoryFact, MemorySummary
from app.domain.facts.version_close import close_versions_at

SORT_COLUMNS = {
    "category": MemoryFact.category,
    "key": MemoryFact.key,
    "updated_at": MemoryFact.updated_at,
    "confidence": MemoryFact.confidence,
    "created_at": MemoryFact.created_at,
}

# The columns a word search looks in.
HAYSTACKS = (MemoryFact.category, MemoryFact.key, MemoryFact.value)
# What reads return: every column but the vector (768 floats to parse per row, and no
# caller needs it), plus whether there is one.
FACT_COLUMNS = (
    *(c for c in MemoryFact.__table__.c if c.name != "embedding"),
    MemoryFact.__table__.c.embedding.is_not(None).label("has_embedding"),
)
FactRow = Row[*tuple[Any, ...]]  # a memory_facts row without the vector (see FACT_COLUMNS)


def like_pattern(term: str) -> str:
    """`%term%` with LIKE's own wildcards in the term taken literally."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _not_expired() -> ColumnElement[bool]:
    return or_(MemoryFact.expires_at.is_(None), MemoryFact.expires_at > func.now())


def live() -> ColumnElement[bool]:
    return and_(MemoryFact.merged_into.is_(None), _not_expired())


def require_scope(user_id: str | None, all_users: bool) -> None:
    """Refuse a search of every user that was not asked for (`all_users`)."""
    if user_id is None and not all_users:
        raise ValueError("user_id is required unless all_users=True")


def user_scope(user_id: str | None, all_users: bool) -> ColumnElement[bool]:
    require_scope(user_id, all_users)
    return MemoryFact.user_id == user_id if user_id is not None else literal(True)


@dataclass(frozen=True)
class FactKeyFilter:
    """Exact category and/or key (as stored: normalised) of a fact list."""

    category: str | None = None
    key: str | None = None


NO_KEY_FILTER = FactKeyFilter()


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
            updated_at=func.now(),
        )
        # The rewrite takes the inserted row's timestamps (the same `now()`): Citus allows
        # no volatile function in DO UPDATE SET.
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
                "updated_at": ex.updated_at,
                "last_verified_at": ex.last_verified_at,
            },
        ).returning(*FACT_COLUMNS)
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

    async def delete_by_key(
        self, user_id: str, key: str, category: str | None
    ) -> tuple[list[int], list[int]]:
        """Delete the fact(s) under `key` (in `category`, or in any), hidden rows pointing
        at them first so none is left orphaned (the FK would un-hide them). The ids of
        the facts under the key, and of the hidden rows deleted with them."""
        target = select(MemoryFact.id).where(MemoryFact.user_id == user_id, MemoryFact.key == key)
        if category is not None:
            target = target.where(MemoryFact.category == category)
        ids = list((await self.session.execute(target)).scalars())
        if not ids:
            return [], []
        hidden = await self.session.execute(
            delete(MemoryFact)
            .where(MemoryFact.user_id == user_id, MemoryFact.merged_into.in_(ids))
            .returning(MemoryFact.id)
        )
        hidden_ids = list(hidden.scalars())
        await self.session.execute(
            delete(MemoryFact).where(MemoryFact.user_id == user_id, MemoryFact.id.in_(ids))
        )
        return ids, hidden_ids

    async def purge_expired(self, expired_before: datetime) -> int:
        """System-wide housekeeping: delete facts expired before `expired_before`, with
        the rows hidden behind them. The users that have such facts are found across
        every user (the job's scan, no lock); the deletes are then one user's each."""
        expired = MemoryFact.expires_at < expired_before
        users = await self.session.execute(select(MemoryFact.user_id).where(expired).distinct())
        purged = 0
        for user_id in users.scalars().all():
            mine = MemoryFact.user_id == user_id
            ids = select(MemoryFact.id).where(mine, expired)
            hidden = await self.session.execute(
                delete(MemoryFact)
                .where(mine, MemoryFact.merged_into.in_(ids))
                .returning(MemoryFact.id, MemoryFact.merged_into)
            )
            behind = list(hidden.all())
            result = await self.session.execute(
                delete(MemoryFact)
                .where(mine, expired)
                .returning(MemoryFact.id, MemoryFact.expires_at)
            )
            ends = {r.id: r.expires_at for r in result}
            expired_ids = list(ends)
            # their versions end at their expiry; a row hidden behind one, at that one's
            ends.update({r.id: ends[r.merged_into] for r in behind})
            await close_versions_at(self.session, user_id, ends)
            purged += len(expired_ids)
        return purged

    # ------------------------------------------------------------------ reads
    async def get(self, fact_id: int, user_id: str | None, *, all_users: bool) -> FactRow | None:
        """One fact by id, hidden or not (never an expired one)."""
        return (
            await self.session.execute(
                select(*FACT_COLUMNS).where(
                    MemoryFact.id == fact_id, user_scope(user_id, all_users), _not_expired()
                )
            )
        ).one_or_none()

    def _list_filter(
        self, stmt: Any, search: str | None, include_merged: bool, exact: FactKeyFilter
    ) -> Any:
        stmt = stmt.where(_not_expired())
        if not include_merged:
            stmt = stmt.where(MemoryFact.merged_into.is_(None))
        if exact.category is not None:
            stmt = stmt.where(MemoryFact.category == exact.category)
        if exact.key is not None:
            stmt = stmt.where(MemoryFact.key == exact.key)
        if search:
            pattern = like_pattern(search)
            stmt = stmt.where(or_(*(h.ilike(pattern, escape="\\") for h in HAYSTACKS)))
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
        exact: FactKeyFilter = NO_KEY_FILTER,
    ) -> list[FactRow]:
        col = SORT_COLUMNS[sort_by]
        order = col.asc() if sort_order == "asc" else col.desc()
        stmt = select(*FACT_COLUMNS).where(user_scope(user_id, all_users))
        stmt = self._list_filter(stmt, search, include_merged, exact)
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
        exact: FactKeyFilter = NO_KEY_FILTER,
    ) -> int:
        stmt = select(func.count()).select_from(MemoryFact).where(user_scope(user_id, all_users))
        stmt = self._list_filter(stmt, search, include_merged, exact)
        return int((await self.session.execute(stmt)).scalar_one())

    async def categories(self, user_id: str) -> list[tuple[str, int]]:
        rows = await self.session.execute(
            select(MemoryFact.category, func.count())
            .where(MemoryFact.user_id == user_id, live())
            .group_by(MemoryFact.category)
            .order_by(func.count().desc(), MemoryFact.category)
        )
        return [(r[0], int(r[1])) for r in rows]

    async def hidden_behind(self, user_id: str, ids: Sequence[int]) -> list[FactRow]:
        """The user's hidden rows whose `merged_into` is one of `ids` (never expired ones),
        by survivor and key: what a merge put behind those facts."""
        if not ids:
            return []
        stmt = (
            select(*FACT_COLUMNS)
            .where(
                MemoryFact.user_id == user_id,
                MemoryFact.merged_into.in_(list(ids)),
                _not_expired(),
            )
            .order_by(MemoryFact.merged_into, MemoryFact.key, MemoryFact.id)
        )
        return list((await self.session.execute(stmt)).all())

    async def created_per_day(self, user_id: str, since: datetime) -> list[tuple[date, int]]:
        """How many of the user's facts (hidden ones too, never expired ones) were created
        on each day (UTC) from `since` on; days without any are absent."""
        day = func.date(func.timezone("UTC", MemoryFact.created_at)).label("day")
        rows = await self.session.execute(
            select(day, func.count())
            .where(MemoryFact.user_id == user_id, MemoryFact.created_at >= since, _not_expired())
            .group_by(day)
            .order_by(day)
        )
        return [(r[0], int(r[1])) for r in rows]

    async def live_facts(self, user_id: str, limit: int) -> list[FactRow]:
        """The user's live facts for the summary: most confident, most recent first."""
        stmt = (
            select(*FACT_COLUMNS)
            .where(MemoryFact.user_id == user_id, live())
            .order_by(MemoryFact.confidence.desc(), MemoryFact.updated_at.desc(), MemoryFact.id)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).all())


class SummaryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, user_id: str) -> MemorySummary | None:
        return await self.session.get(MemorySummary, user_id, populate_existing=True)

    async def put(self, user_id: str, content: str) -> MemorySummary:
        insert = pg_insert(MemorySummary).values(
            user_id=user_id, content=content, updated_at=func.now()
        )
        stmt = insert.on_conflict_do_update(
            index_elements=[MemorySummary.user_id],
            # the inserted row's `now()`: Citus allows no volatile function here
            set_={"content": content, "updated_at": insert.excluded.updated_at},
        ).returning(MemorySummary)
        result = await self.session.execute(stmt, execution_options={"populate_existing": True})
        return result.scalars().one()
