"""The SQL of an export: one user's rows, table by table, a page at a time.

Every statement says `user_id = :uid` (one shard on Citus). Pages are keyset ranges on
the table's key after `user_id` (`Kind.order`), so each read is an index range scan and
memory holds one page, whatever the account's size.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Select, Text, cast, select, tuple_
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
        """The user's rows of `kind` as row mappings, in keyset pages of `page_rows`
        (default: the kind's; 500 rows of segment vectors are a few MB, messages are read
        100 at a time: one may hold MESSAGE_MAX_CHARS). A `by_session` kind is read a
        session at a time, by its key inside the session."""
        if not kind.by_session:
            async for rows in self._keyset(kind, user_id, None, page_rows or kind.page_rows):
                yield rows
            return
        async for ids in self.session_id_pages(user_id):
            if not kind.order:  # one row per session: the page's rows by key
                t = kind.table
                stmt = _select(kind).where(t.c.user_id == user_id, t.c.session_id.in_(ids))
                rows = list((await self.session.execute(stmt)).mappings())
                if rows:
                    yield rows
                continue
            for sid in ids:
                async for rows in self._keyset(kind, user_id, sid, page_rows or kind.page_rows):
                    yield rows

    async def _keyset(
        self, kind: Kind, user_id: str, session_id: uuid.UUID | None, page_rows: int
    ) -> AsyncIterator[list[Any]]:
        t = kind.table
        key = [t.c[name] for name in kind.order]
        where = [t.c.user_id == user_id]
        if session_id is not None:
            where.append(t.c.session_id == session_id)
        last: tuple[Any, ...] | None = None
        while True:
            stmt = _select(kind).where(*where)
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

    async def session_id_pages(
        self, user_id: str, page_rows: int = PAGE_ROWS
    ) -> AsyncIterator[list[uuid.UUID]]:
        """The user's session ids, a page at a time (by `ix_sessions_user_id_last_active`;
        the snapshot keeps `last_active` still while the export reads)."""
        key = (Session.last_active, Session.id)
        last: tuple[Any, ...] | None = None
        while True:
            stmt = select(*key).where(Session.user_id == user_id).order_by(*key).limit(page_rows)
            if last is not None:
                stmt = stmt.where(tuple_(*key) > tuple_(*last))
            rows = (await self.session.execute(stmt)).all()
            if rows:
                yield [r.id for r in rows]
            if len(rows) < page_rows:
                return
            last = tuple(rows[-1])


def _select(kind: Kind) -> Select[Any]:
    """The kind's columns (`covered` as its text), and the key columns it does not export."""
    cols: list[Any] = [
        cast(c, Text).label(c.name) if isinstance(c.type, INT8MULTIRANGE) else c
        for c in kind.columns
    ]
    names = {c.name for c in kind.columns}
    cols += [kind.table.c[name] for name in kind.order if name not in names]
    return select(*cols)
