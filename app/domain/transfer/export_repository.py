"""The SQL of an export: one user's rows, table by table, a page at a time.

Every statement says `user_id = :uid` (one shard on Citus). Pages are keyset ranges on
the table's key after `user_id` (`Kind.order`), so each read is an index range scan and
memory holds one page, whatever the account's size.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Text, cast, select, tuple_
from sqlalchemy.dialects.postgresql import INT8MULTIRANGE
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session, User
from app.domain.transfer.records import Kind

#: Session ids per read (the export's walk over the session directories).
PAGE_ROWS = 500


class ExportRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def user_exists(self, user_id: str) -> bool:
        row = await self.session.execute(select(User.id).where(User.id == user_id))
        return row.first() is not None

    async def pages(
        self, kind: Kind, user_id: str, page_rows: int | None = None
    ) -> AsyncIterator[list[Any]]:
        """The user's rows of `kind`, in key order, `page_rows` (default: the kind's) at
        a time, as row mappings. 500 rows of segment vectors (768 floats) are a few MB;
        messages are read 100 at a time (one may hold MESSAGE_MAX_CHARS)."""
        page_rows = page_rows or kind.page_rows
        t = kind.table
        cols = [
            cast(c, Text).label(c.name) if isinstance(c.type, INT8MULTIRANGE) else c
            for c in kind.columns
        ]
        key = [t.c[name] for name in kind.order]
        last: tuple[Any, ...] | None = None
        while True:
            stmt = select(*cols).where(t.c.user_id == user_id)
            if key:
                stmt = stmt.order_by(*key).limit(page_rows)
                if last is not None:
                    stmt = stmt.where(tuple_(*key) > tuple_(*last))
            rows = list((await self.session.execute(stmt)).mappings())
            if rows:
                yield rows
            if not key or len(rows) < page_rows:
                return
            last = tuple(rows[-1][name] for name in kind.order)

    async def session_ids(
        self, user_id: str, after: uuid.UUID | None, limit: int = PAGE_ROWS
    ) -> list[uuid.UUID]:
        stmt = select(Session.id).where(Session.user_id == user_id).order_by(Session.id)
        if after is not None:
            stmt = stmt.where(Session.id > after)
        return list((await self.session.execute(stmt.limit(limit))).scalars())
