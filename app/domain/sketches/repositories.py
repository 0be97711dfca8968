"""SQL of sketches: the scratchpad's sections in `kv_store` (scope `scratchpad`)."""

from __future__ import annotations

import operator
import uuid
from collections.abc import Sequence
from functools import lru_cache, reduce
from typing import Any

from sqlalchemy import Integer, String, bindparam, case, func, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Sketch
from app.lib.sql import Compiled, DriverRows, compile_for_driver, contains_pattern

SCRATCHPAD = "scratchpad"


@lru_cache(maxsize=64)
def _search_statement(n_terms: int, *, in_session: bool, prefer: bool) -> Compiled:
    """`search_values` for `n_terms` terms, built once per shape (parameters `user_id`,
    `scope`, `p0…`, `limit`, and `session_id` / `prefer` when asked for): building the
    expression cost more Python than the query."""
    hits = [
        or_(
            Sketch.key.ilike(bindparam(f"p{i}", type_=String), escape="\\"),
            Sketch.value.ilike(bindparam(f"p{i}", type_=String), escape="\\"),
        )
        for i in range(n_terms)
    ]
    matched = reduce(operator.add, [case((h, 1), else_=0) for h in hits]).label("terms_hit")
    stmt = select(
        Sketch.id, Sketch.session_id, Sketch.key, Sketch.value, Sketch.updated_at, matched
    ).where(
        Sketch.user_id == bindparam("user_id", type_=String),
        Sketch.scope == bindparam("scope", type_=String),
        or_(*hits),
    )
    if in_session:
        stmt = stmt.where(Sketch.session_id == bindparam("session_id"))
    order: list[Any] = [matched.desc(), Sketch.updated_at.desc()]
    if prefer:
        order.insert(0, case((Sketch.session_id == bindparam("prefer"), 0), else_=1))
    return compile_for_driver(stmt.order_by(*order).limit(bindparam("limit", type_=Integer)))


class SketchRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def put(
        self, user_id: str, scope: str, session_id: uuid.UUID | None, key: str, value: str
    ) -> None:
        stmt = insert(Sketch).values(
            id=uuid.uuid4(),
            user_id=user_id,
            scope=scope,
            session_id=session_id,
            key=key,
            value=value,
            updated_at=func.now(),
        )
        await self.session.execute(
            stmt.on_conflict_do_update(
                constraint="uq_kv_store_user_id_scope_session_id_key",
                # the inserted row's `now()`: Citus allows no volatile function here
                set_={"value": stmt.excluded.value, "updated_at": stmt.excluded.updated_at},
            )
        )

    async def get(
        self, user_id: str, scope: str, session_id: uuid.UUID | None, key: str
    ) -> Sketch | None:
        stmt = select(Sketch).where(
            Sketch.user_id == user_id,
            Sketch.scope == scope,
            Sketch.key == key,
            Sketch.session_id.is_(None) if session_id is None else Sketch.session_id == session_id,
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def list_page(
        self, user_id: str, scope: str, session_id: uuid.UUID | None, limit: int, offset: int
    ) -> tuple[list[Sketch], int]:
        where = [Sketch.user_id == user_id, Sketch.scope == scope]
        where.append(
            Sketch.session_id.is_(None) if session_id is None else Sketch.session_id == session_id
        )
        total = (await self.session.execute(select(func.count()).where(*where))).scalar_one()
        rows = await self.session.execute(
            select(Sketch).where(*where).order_by(Sketch.key).limit(limit).offset(offset)
        )
        return list(rows.scalars()), total

    async def list_for_user(
        self, user_id: str, scope: str, limit: int, offset: int
    ) -> tuple[list[Sketch], int]:
        """A page of the user's sections in `scope` across all their sessions, most
        recently updated first, and how many there are."""
        where = [Sketch.user_id == user_id, Sketch.scope == scope]
        total = (await self.session.execute(select(func.count()).where(*where))).scalar_one()
        rows = await self.session.execute(
            select(Sketch)
            .where(*where)
            .order_by(Sketch.updated_at.desc(), Sketch.key, Sketch.id)
            .limit(limit)
            .offset(offset)
        )
        return list(rows.scalars()), total

    async def delete(
        self, user_id: str, scope: str, session_id: uuid.UUID | None, key: str
    ) -> bool:
        row = await self.get(user_id, scope, session_id, key)
        if row is None:
            return False
        await self.session.delete(row)
        return True

    async def search_values(
        self,
        user_id: str,
        scope: str,
        terms: Sequence[str],
        *,
        limit: int = 10,
        session_id: uuid.UUID | None = None,
        prefer_session_id: uuid.UUID | None = None,
    ) -> list[Any]:
        """ILIKE over key and value within a scope; the preferred session ranks first.
        Rows (named tuples) with id, session_id, key, value, updated_at, terms_hit."""
        if not terms:
            return []
        stmt = _search_statement(
            len(terms), in_session=session_id is not None, prefer=prefer_session_id is not None
        )
        params: dict[str, Any] = {"user_id": user_id, "scope": scope, "limit": limit}
        params.update({f"p{i}": contains_pattern(t) for i, t in enumerate(terms)})
        if session_id is not None:
            params["session_id"] = session_id
        if prefer_session_id is not None:
            params["prefer"] = prefer_session_id
        return await DriverRows(self.session)(stmt.sql, stmt.params(params))
