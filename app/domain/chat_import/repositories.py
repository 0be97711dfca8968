"""The SQL of a chat import: find the imported sessions, insert sessions and messages in
batches, top a session up. Every statement names the user (`user_id = :uid`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Boolean, Table, bindparam, false, func, insert, or_, select, text, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MemoryChunk, Message, Session
from app.domain.kernel.repositories import ChunkCountRepository
from app.domain.sessions.message_repository import MessageRepository

_SESSIONS = cast(Table, Session.__table__)
_MESSAGES = cast(Table, Message.__table__)
_CHUNKS = cast(Table, MemoryChunk.__table__)
#: Message rows per INSERT statement (insertmanyvalues splits further by parameters).
MESSAGE_ROWS_PER_STATEMENT = 1000

_TOP_UP = (
    update(_SESSIONS)
    .where(_SESSIONS.c.user_id == bindparam("uid"), _SESSIONS.c.id == bindparam("sid"))
    .values(
        next_seq=_SESSIONS.c.next_seq + bindparam("n"),
        next_display_index=_SESSIONS.c.next_display_index + bindparam("n"),
        last_active=func.greatest(_SESSIONS.c.last_active, bindparam("last")),
        # as an append marks it (`MessageRepository.reserve`)
        memory_pending=func.nullif(
            or_(bindparam("has_user", type_=Boolean), _SESSIONS.c.memory_pending.is_not(None)),
            false(),
        ),
        raw_index_pending=True,
        session_metadata=_SESSIONS.c.session_metadata.op("||")(bindparam("meta", type_=JSONB)),
    )
)


class ChatImportRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def lock_user(self, user_id: str) -> None:
        """Two imports of one user queue here (a batch at a time), so both never create
        the same conversation's session."""
        await self.session.execute(
            select(func.pg_advisory_xact_lock(func.hashtextextended("navi.chats:" + user_id, 0)))
        )

    async def imported(
        self, user_id: str, source: str, source_ids: Sequence[str]
    ) -> dict[str, tuple[uuid.UUID, int, dict[str, Any]]]:
        """source id → (session id, next_seq, the import's metadata) of the conversations
        already imported, their rows locked."""
        if not source_ids:
            return {}
        rows = await self.session.execute(
            select(
                _SESSIONS.c.import_source_id,
                _SESSIONS.c.id,
                _SESSIONS.c.next_seq,
                _SESSIONS.c.session_metadata["import"],
            )
            .where(
                _SESSIONS.c.user_id == user_id,
                _SESSIONS.c.import_source == source,
                _SESSIONS.c.import_source_id.in_(list(source_ids)),
            )
            .with_for_update()
        )
        return {r[0]: (r[1], int(r[2]), r[3] if isinstance(r[3], dict) else {}) for r in rows}

    async def imported_ids(self, user_id: str) -> set[tuple[str, str]]:
        """(source, source id) of every conversation the user imported (a set of
        strings: an account holds thousands of sessions, not millions)."""
        rows = await self.session.execute(
            select(_SESSIONS.c.import_source, _SESSIONS.c.import_source_id).where(
                _SESSIONS.c.user_id == user_id, _SESSIONS.c.import_source_id.is_not(None)
            )
        )
        return {(r[0], r[1]) for r in rows}

    async def insert_sessions(self, user_id: str, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            await self.session.execute(insert(_SESSIONS), [{**r, "user_id": user_id} for r in rows])

    async def top_up(
        self,
        user_id: str,
        session_id: uuid.UUID,
        n: int,
        last: datetime,
        has_user: bool,
        meta: dict[str, Any],
    ) -> None:
        await self.session.execute(
            _TOP_UP,
            {
                "uid": user_id,
                "sid": session_id,
                "n": n,
                "last": last,
                "has_user": has_user,
                "meta": {"import": meta},
            },
        )

    async def insert_messages(self, rows: list[dict[str, Any]]) -> None:
        """Multi-row INSERTs (rows carry their `user_id`)."""
        for i in range(0, len(rows), MESSAGE_ROWS_PER_STATEMENT):
            await MessageRepository(self.session).insert_messages(
                rows[i : i + MESSAGE_ROWS_PER_STATEMENT]
            )

    async def durable_commit(self) -> None:
        """This transaction's commit waits for its WAL flush again (the raw index's claim
        turns that off for its derived writes; an import's messages are not derived)."""
        await self.session.execute(select(func.set_config("synchronous_commit", "on", True)))

    async def insert_chunks(self, user_id: str, rows: list[dict[str, Any]]) -> None:
        """New sessions' raw chunks (`vectors_stale`: the embed queue's), multi-row; a
        content a session holds twice is written once (as the live indexer does)."""
        written = 0
        for i in range(0, len(rows), MESSAGE_ROWS_PER_STATEMENT):
            stmt = (
                pg_insert(_CHUNKS)
                .on_conflict_do_nothing(index_elements=["session_id", "content_hash", "user_id"])
                .returning(_CHUNKS.c.id)
            )
            part = [{**r, "user_id": user_id} for r in rows[i : i + MESSAGE_ROWS_PER_STATEMENT]]
            written += len((await self.session.execute(stmt, part)).all())
        await ChunkCountRepository(self.session).change(user_id, written)

    async def cover_new_sessions(self, user_id: str, rows: list[dict[str, Any]]) -> None:
        """The raw index's state of new sessions whose messages are all chunked: covered
        through `last`, the open chunk named (as `live_index` leaves a session)."""
        if not rows:
            return
        await self.session.execute(
            text(
                "INSERT INTO raw_index_state (session_id, user_id, covered, indexed_at, open_chunk_id)"
                " VALUES (:sid, :uid, int8multirange(int8range(NULL, :last, '(]')), now(), :open)"
            ),
            [{**r, "uid": user_id} for r in rows],
        )
