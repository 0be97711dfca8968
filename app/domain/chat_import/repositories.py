"""The SQL of a chat import: find the imported sessions, insert sessions and messages in
batches, top a session up. Every statement names the user (`user_id = :uid`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Boolean, Table, bindparam, false, func, insert, or_, select, text, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MemoryChunk, Message, Session
from app.domain.kernel.repositories import ChunkCountRepository

_SESSIONS = cast(Table, Session.__table__)
_MESSAGES = cast(Table, Message.__table__)
_CHUNKS = cast(Table, MemoryChunk.__table__)
#: The columns an import writes (COPY), with their types; the others take their defaults.
_MESSAGE_COPY = {
    "session_id": "uuid",
    "sequence_number": "int8",
    "display_index": "int8",
    "role": "text",
    "content": "text",
    "thinking": "text",
    "metadata": "jsonb",
    "created_at": "timestamptz",
}
_CHUNK_COPY = {
    "id": "uuid",
    "session_id": "uuid",
    "content": "text",
    "content_hash": "text",
    "start_seq": "int8",
    "end_seq": "int8",
    "started_at": "timestamptz",
    "ended_at": "timestamptz",
    "breadcrumbs": "text[]",
    "vectors_stale": "bool",
    "stale_since": "timestamptz",
}

_TOP_UP = (
    update(_SESSIONS)
    .where(_SESSIONS.c.user_id == bindparam("uid"), _SESSIONS.c.id == bindparam("sid"))
    .values(
        next_seq=_SESSIONS.c.next_seq + bindparam("n"),
        next_display_index=_SESSIONS.c.next_display_index + bindparam("n"),
        message_bytes=_SESSIONS.c.message_bytes + bindparam("bytes"),  # the storage quota's
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

    async def message_bytes(self, user_id: str) -> int:
        """The user's message-storage usage (the sum of their sessions' counters)."""
        total = await self.session.execute(
            select(func.coalesce(func.sum(_SESSIONS.c.message_bytes), 0)).where(
                _SESSIONS.c.user_id == user_id
            )
        )
        return int(total.scalar_one())

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
        n_bytes: int,
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
                "bytes": n_bytes,
            },
        )

    async def _copy(self, table: str, columns: dict[str, str], rows: list[tuple[Any, ...]]) -> None:
        """`COPY table (columns) FROM STDIN` on this transaction's connection: the bulk
        path of PostgreSQL (and of Citus), 1.5-2x a multi-row INSERT measured here; the
        columns not named take their defaults."""
        conn = await self.session.connection()
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None  # an open transaction's connection
        names = ", ".join(f'"{c}"' for c in columns)
        async with raw.cursor() as cur:
            async with cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                copy.set_types(list(columns.values()))
                for row in rows:
                    await copy.write_row(row)

    async def insert_messages(self, user_id: str, rows: list[dict[str, Any]]) -> None:
        """The messages (of `user_id`'s sessions), in one COPY."""
        if rows:
            values = [tuple(r[c] for c in _MESSAGE_COPY) for r in rows]
            await self._copy(
                "session_messages",
                {**_MESSAGE_COPY, "user_id": "text"},
                [(*v, user_id) for v in values],
            )

    async def durable_commit(self) -> None:
        """This transaction's commit waits for its WAL flush again (the raw index's claim
        turns that off for its derived writes; an import's messages are not derived)."""
        await self.session.execute(select(func.set_config("synchronous_commit", "on", True)))

    async def insert_chunks(self, user_id: str, rows: list[dict[str, Any]]) -> None:
        """New sessions' raw chunks (`vectors_stale`: the embed queue's) in one COPY; the
        caller drops a content a session would hold twice (its unique key)."""
        if rows:
            values = [(*(r[c] for c in _CHUNK_COPY), user_id) for r in rows]
            await self._copy("memory_chunks", {**_CHUNK_COPY, "user_id": "text"}, values)
        await ChunkCountRepository(self.session).change(user_id, len(rows))

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
