"""The SQL of an export: one user's rows, table by table, a page at a time.

Every statement says `user_id = :uid` (one shard on Citus). Pages are keyset ranges on
a stable key (never one that moves while the export reads: `last_active` does), so
each read is an index range and memory holds one page, whatever the account's size.
Each method reads one page: the caller runs it in a short transaction of its own
(`app.domain.transfer.exporter`), so no connection or snapshot outlives a page.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Select, Text, cast, func, select, tuple_
from sqlalchemy.dialects.postgresql import INT8MULTIRANGE
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session, User
from app.domain.transfer.records import KIND_BY_TYPE, Kind

#: Sessions per read (with their one-row-per-session kinds).
PAGE_ROWS = 500


class ExportRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def user_exists(self, user_id: str) -> bool:
        row = await self.session.execute(select(User.id).where(User.id == user_id))
        return row.first() is not None

    async def now(self) -> datetime:
        """The database's clock: the export's cut in time."""
        return (await self.session.execute(select(func.now()))).scalar_one()  # type: ignore[no-any-return]

    async def session_page(
        self, user_id: str, started: datetime, after: uuid.UUID | None, page_rows: int = PAGE_ROWS
    ) -> list[Any]:
        """The user's sessions made before the cut (`created_at <= started`), by id after
        `after`, as row mappings (`next_seq` among the columns)."""
        kind = KIND_BY_TYPE["session"]
        stmt = (
            _select(kind)
            .where(Session.user_id == user_id, Session.created_at <= started)
            .order_by(Session.id)
            .limit(page_rows)
        )
        if after is not None:
            stmt = stmt.where(Session.id > after)
        return list((await self.session.execute(stmt)).mappings())

    async def of_sessions(
        self, kind: Kind, user_id: str, session_ids: Collection[uuid.UUID]
    ) -> list[Any]:
        """The rows of a one-row-per-session kind for these sessions, by session id."""
        t = kind.table
        stmt = (
            _select(kind)
            .where(t.c.user_id == user_id, t.c.session_id.in_(list(session_ids)))
            .order_by(t.c.session_id)
        )
        return list((await self.session.execute(stmt)).mappings())

    async def keyset_page(
        self,
        kind: Kind,
        user_id: str,
        *,
        after: tuple[Any, ...] | None,
        page_rows: int,
        session_id: uuid.UUID | None = None,
        below_seq: int | None = None,
        chunk_ids: Collection[uuid.UUID] | None = None,
    ) -> list[Any]:
        """One page of `kind` after the key `after` (None: the first), by `kind.order`:
        of one session when `session_id` is given, below the sequence number `below_seq`
        (the export's cut of that session) when given, of these chunks when `chunk_ids`
        is given (a chunk's segment vectors)."""
        t = kind.table
        key = [t.c[name] for name in kind.order]
        stmt = _select(kind).where(t.c.user_id == user_id).order_by(*key).limit(page_rows)
        if session_id is not None:
            stmt = stmt.where(t.c.session_id == session_id)
        if below_seq is not None:
            stmt = stmt.where(t.c.sequence_number < below_seq)
        if chunk_ids is not None:
            stmt = stmt.where(t.c.chunk_id.in_(list(chunk_ids)))
        if after is not None:
            stmt = stmt.where(tuple_(*key) > tuple_(*after))
        return list((await self.session.execute(stmt)).mappings())

    async def message_page(
        self, user_id: str, session_id: uuid.UUID, after: int, below: int, page_rows: int
    ) -> list[tuple[Kind, Any]]:
        """The session's next `page_rows` messages with `after < sequence_number < below`,
        hot and archived together, by sequence number. Both tables are read in the
        caller's one snapshot: a message the archiving moves between them is seen once."""
        out: list[tuple[Kind, Any]] = []
        for name in ("message", "archived_message"):
            kind = KIND_BY_TYPE[name]
            t = kind.table
            stmt = (
                _select(kind)
                .where(
                    t.c.user_id == user_id,
                    t.c.session_id == session_id,
                    t.c.sequence_number > after,
                    t.c.sequence_number < below,
                )
                .order_by(t.c.sequence_number)
                .limit(page_rows)
            )
            out += [(kind, r) for r in (await self.session.execute(stmt)).mappings()]
        out.sort(key=lambda kr: kr[1]["sequence_number"])
        return out[:page_rows]


def _select(kind: Kind) -> Select[Any]:
    """The kind's columns (`covered` as its text), and the key columns it does not export."""
    cols: list[Any] = [
        cast(c, Text).label(c.name) if isinstance(c.type, INT8MULTIRANGE) else c
        for c in kind.columns
    ]
    names = {c.name for c in kind.columns}
    cols += [kind.table.c[name] for name in kind.order if name not in names]
    return select(*cols)
