"""SQL of fact versions (`fact_versions`): every value a fact held, and when it was true.

Written by the fact writes (`FactService.upsert_fact`, deletes, the expiry purge) under
the fact row's lock (the upsert's, or the delete's), so two saves of one fact add their
versions one after the other. Every statement names the user (one shard on Citus); the
times written are bound parameters (the fact row's own `now()`), never a function in
the UPDATE.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, case, exists, func, insert, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from app.db.models import FactVersion, MemoryFact
from app.domain.facts.repositories import FactKeyFilter, like_pattern
from app.domain.facts.version_close import close_current_versions

V = FactVersion
VERSION_COLUMNS = tuple(V.__table__.c)
VersionRow = Row[*tuple[Any, ...]]  # a fact_versions row


@dataclass(frozen=True)
class NewVersion:
    """What a version records of a fact's write."""

    fact_id: int
    category: str
    key: str
    value: str
    source: str
    confidence: int
    session_id: uuid.UUID | None
    message_seq: int | None
    valid_from: datetime
    expires_at: datetime | None


def valid_at(at: datetime) -> ColumnElement[bool]:
    """The versions true at `at`: begun, not yet replaced, not yet expired."""
    return and_(
        V.valid_from <= at,
        or_(V.valid_to.is_(None), V.valid_to > at),
        or_(V.expires_at.is_(None), V.expires_at > at),
    )


def _not_hidden() -> ColumnElement[bool]:
    """Not a fact hidden behind another now (a merged re-spelling: the survivor answers)."""
    return ~exists().where(
        MemoryFact.user_id == V.user_id,
        MemoryFact.id == V.fact_id,
        MemoryFact.merged_into.is_not(None),
    )


class FactVersionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # ------------------------------------------------------------------ writes
    async def now(self) -> datetime:
        """The transaction's time: what the fact row's `now()` wrote."""
        return (await self.session.execute(select(func.now()))).scalar_one()  # type: ignore[no-any-return]

    async def current(self, user_id: str, fact_id: int) -> VersionRow | None:
        stmt = select(*VERSION_COLUMNS).where(
            V.user_id == user_id, V.fact_id == fact_id, V.valid_to.is_(None)
        )
        return (await self.session.execute(stmt)).one_or_none()

    async def add(self, user_id: str, new: NewVersion) -> int:
        stmt = (
            insert(V)
            .values(
                user_id=user_id,
                fact_id=new.fact_id,
                category=new.category,
                key=new.key,
                value=new.value,
                source=new.source,
                confidence=new.confidence,
                session_id=new.session_id,
                message_seq=new.message_seq,
                valid_from=new.valid_from,
                expires_at=new.expires_at,
            )
            .returning(V.id)
        )
        return int((await self.session.execute(stmt)).scalar_one())

    async def close(self, user_id: str, version_id: int, at: datetime) -> None:
        await self.session.execute(
            update(V).where(V.user_id == user_id, V.id == version_id).values(valid_to=at)
        )

    async def set_expiry(self, user_id: str, version_id: int, expires_at: datetime | None) -> None:
        """A confirmation of the current value carries the fact's new expiry."""
        await self.session.execute(
            update(V).where(V.user_id == user_id, V.id == version_id).values(expires_at=expires_at)
        )

    async def close_current(self, user_id: str, fact_ids: Sequence[int], at: datetime) -> None:
        await close_current_versions(self.session, user_id, fact_ids, at)

    # ------------------------------------------------------------------ reads
    async def history(
        self, user_id: str, fact_id: int, *, limit: int, before_id: int | None = None
    ) -> list[VersionRow]:
        """The fact's versions, newest first; `before_id`: the page after that version."""
        stmt = select(*VERSION_COLUMNS).where(V.user_id == user_id, V.fact_id == fact_id)
        if before_id is not None:
            stmt = stmt.where(V.id < before_id)
        stmt = stmt.order_by(V.id.desc()).limit(limit)
        return list((await self.session.execute(stmt)).all())

    async def recent_of_facts(
        self, user_id: str, fact_ids: Sequence[int], per_fact: int
    ) -> list[VersionRow]:
        """The `per_fact` newest versions of each of these facts, newest first (a page of
        facts, with their histories, in one read)."""
        if not fact_ids:
            return []
        n = func.row_number().over(partition_by=V.fact_id, order_by=V.id.desc()).label("n")
        ranked = (
            select(*VERSION_COLUMNS, n)
            .where(V.user_id == user_id, V.fact_id.in_(list(fact_ids)))
            .subquery()
        )
        stmt = (
            select(*(ranked.c[c.name] for c in VERSION_COLUMNS))
            .where(ranked.c.n <= per_fact)
            .order_by(ranked.c.fact_id, ranked.c.id.desc())
        )
        return list((await self.session.execute(stmt)).all())

    async def history_by_key(
        self, user_id: str, key: str, category: str | None, limit: int
    ) -> list[VersionRow]:
        """The versions of the facts under `key` (in `category`, or in any), deleted ones
        too, newest first."""
        stmt = select(*VERSION_COLUMNS).where(V.user_id == user_id, V.key == key)
        if category is not None:
            stmt = stmt.where(V.category == category)
        stmt = stmt.order_by(V.valid_from.desc(), V.id.desc()).limit(limit)
        return list((await self.session.execute(stmt)).all())

    async def count(self, user_id: str, fact_id: int) -> int:
        stmt = select(func.count()).where(V.user_id == user_id, V.fact_id == fact_id)
        return int((await self.session.execute(stmt)).scalar_one())

    async def get(self, user_id: str, version_id: int) -> VersionRow | None:
        stmt = select(*VERSION_COLUMNS).where(V.user_id == user_id, V.id == version_id)
        return (await self.session.execute(stmt)).one_or_none()

    def _as_of_filter(
        self, stmt: Any, at: datetime, search: str | None, exact: FactKeyFilter
    ) -> Any:
        stmt = stmt.where(valid_at(at), _not_hidden())
        if exact.category is not None:
            stmt = stmt.where(V.category == exact.category)
        if exact.key is not None:
            stmt = stmt.where(V.key == exact.key)
        if search:
            pattern = like_pattern(search)
            stmt = stmt.where(
                or_(*(c.ilike(pattern, escape="\\") for c in (V.category, V.key, V.value)))
            )
        return stmt

    async def as_of(
        self,
        user_id: str,
        at: datetime,
        *,
        limit: int | None,
        offset: int = 0,
        search: str | None = None,
        exact: FactKeyFilter = FactKeyFilter(),
    ) -> list[VersionRow]:
        """The versions true at `at` (one per fact), newest value first."""
        stmt = self._as_of_filter(
            select(*VERSION_COLUMNS).where(V.user_id == user_id), at, search, exact
        )
        stmt = stmt.order_by(V.valid_from.desc(), V.id.desc()).offset(offset)
        if limit is not None:
            stmt = stmt.limit(limit)
        return list((await self.session.execute(stmt)).all())

    async def count_as_of(
        self,
        user_id: str,
        at: datetime,
        *,
        search: str | None = None,
        exact: FactKeyFilter = FactKeyFilter(),
    ) -> int:
        stmt = select(func.count()).select_from(V).where(V.user_id == user_id)
        stmt = self._as_of_filter(stmt, at, search, exact)
        return int((await self.session.execute(stmt)).scalar_one())

    async def search_as_of(
        self, user_id: str, at: datetime, words: Sequence[str], limit: int
    ) -> list[VersionRow]:
        """The versions true at `at` holding any of `words` (in category, key or value),
        with `terms_hit` (how many words), most first."""
        hits = [
            or_(*(c.ilike(like_pattern(w), escape="\\") for c in (V.category, V.key, V.value)))
            for w in words
        ]
        terms_hit = sum((case((h, 1), else_=0) for h in hits), literal(0)).label("terms_hit")
        stmt = (
            select(*VERSION_COLUMNS, terms_hit)
            .where(V.user_id == user_id, valid_at(at), _not_hidden(), or_(*hits))
            .order_by(terms_hit.desc(), V.valid_from.desc(), V.id.desc())
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).all())

    async def previous_values(
        self, user_id: str, fact_ids: Sequence[int], since: datetime
    ) -> dict[int, tuple[str, datetime]]:
        """For each of these facts whose current version began after `since`: the value
        it replaced and when (the prompt's "changed recently" mark)."""
        if not fact_ids:
            return {}
        cur = V.__table__.alias("cur")
        stmt = (
            select(V.fact_id, V.value, cur.c.valid_from)
            .join(
                cur,
                and_(
                    cur.c.user_id == V.user_id,
                    cur.c.fact_id == V.fact_id,
                    cur.c.valid_to.is_(None),
                    cur.c.valid_from > since,
                ),
            )
            .where(
                V.user_id == user_id,
                V.fact_id.in_(list(fact_ids)),
                V.valid_to.is_not(None),
                V.value != cur.c.value,
            )
            .order_by(V.fact_id, V.id.desc())
        )
        out: dict[int, tuple[str, datetime]] = {}
        for r in await self.session.execute(stmt):
            out.setdefault(r.fact_id, (r.value, r.valid_from))
        return out
