"""The SQL of an import: is the account empty, are the session ids free, insert a batch.

Every statement on user data says `user_id = :uid`, but one: whether a session id is
already some other user's (`taken_session_ids`) is system-wide by nature, like the
files cleanup's one query (app/domain/files/repositories.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from typing import Any, cast

from sqlalchemy import Table, bindparam, exists, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import RawIndexState, Session
from app.domain.kernel.repositories import ChunkCountRepository
from app.domain.transfer.records import FORGOTTEN, KIND_BY_TYPE, KINDS, Kind


class ImportRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def lock_account(self, user_id: str) -> None:
        """Two imports into one account queue here until the first commits (the second
        then finds the account not empty)."""
        await self.session.execute(
            select(func.pg_advisory_xact_lock(func.hashtextextended("navi.import:" + user_id, 0)))
        )

    async def first_nonempty(self, user_id: str) -> str | None:
        """The first table holding a row of the user, or None when the account is empty."""
        for kind in KINDS:
            if kind.type == FORGOTTEN:  # records of forgets (or an empty row) hold no memory
                continue
            t = kind.table
            found = await self.session.execute(select(exists().where(t.c.user_id == user_id)))
            if found.scalar():
                return t.name
        return None

    async def taken_session_ids(self, ids: Collection[uuid.UUID]) -> list[uuid.UUID]:
        """Which of `ids` are sessions already (of any user: a session id is global)."""
        if not ids:
            return []
        rows = await self.session.execute(select(Session.id).where(Session.id.in_(list(ids))))
        return sorted(rows.scalars())

    async def insert(self, kind: Kind, user_id: str, rows: Sequence[dict[str, Any]]) -> None:
        if kind.table is RawIndexState.__table__:
            await self._insert_raw_index_state(user_id, rows)
            return
        await self.session.execute(insert(kind.table), [{**r, "user_id": user_id} for r in rows])

    async def _insert_raw_index_state(self, user_id: str, rows: Sequence[dict[str, Any]]) -> None:
        # `covered` travels as its text form; PostgreSQL parses it.
        await self.session.execute(
            text(
                "INSERT INTO raw_index_state"
                " (session_id, user_id, covered, indexed_at, attempts, last_error)"
                " VALUES (:session_id, :user_id, CAST(:covered AS int8multirange),"
                " :indexed_at, :attempts, :last_error)"
            ),
            [
                {
                    "session_id": r["session_id"],
                    "user_id": user_id,
                    "covered": r.get("covered", "{}"),
                    "indexed_at": r.get("indexed_at"),
                    "attempts": r.get("attempts", 0),
                    "last_error": r.get("last_error"),
                }
                for r in rows
            ],
        )

    async def insert_facts(self, user_id: str, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert facts without their ids and `merged_into`; the new ids, in order."""
        t = KIND_BY_TYPE["fact"].table
        stmt = insert(t).returning(t.c.id, sort_by_parameter_order=True)
        values = [
            {**{k: v for k, v in r.items() if k not in ("id", "merged_into")}, "user_id": user_id}
            for r in rows
        ]
        return list((await self.session.execute(stmt, values)).scalars())

    async def new_fact_ids(self, n: int) -> list[int]:
        """`n` fresh fact ids (for the versions of facts a file holds no more: deleted)."""
        rows = await self.session.execute(
            text(
                "SELECT nextval(pg_get_serial_sequence('memory_facts', 'id'))"
                " FROM generate_series(1, :n)"
            ),
            {"n": n},
        )
        return list(rows.scalars())

    async def add_missing_versions(self, user_id: str) -> None:
        """A current version for each imported fact without one (a file written before
        fact versions): its value as it is, valid from its `updated_at`."""
        await self.session.execute(
            text(
                "INSERT INTO fact_versions (user_id, fact_id, category, key, value, source,"
                " confidence, session_id, valid_from, expires_at)"
                " SELECT f.user_id, f.id, f.category, f.key, f.value, f.source, f.confidence,"
                " f.source_session_id, f.updated_at, f.expires_at FROM memory_facts f"
                " WHERE f.user_id = :uid AND NOT EXISTS (SELECT 1 FROM fact_versions v"
                " WHERE v.user_id = f.user_id AND v.fact_id = f.id)"
            ),
            {"uid": user_id},
        )

    async def merge_facts(self, user_id: str, merges: Sequence[tuple[int, int]]) -> None:
        """Hide each fact `(id, into)` behind `into` (both the new ids)."""
        if not merges:
            return
        t = KIND_BY_TYPE["fact"].table
        await self.session.execute(
            update(t)
            .where(t.c.user_id == user_id, t.c.id == bindparam("fact_id"))
            .values(merged_into=bindparam("into")),
            [{"fact_id": fact_id, "into": into} for fact_id, into in merges],
        )

    async def mark_extraction_pending(self, user_id: str) -> None:
        """The imported sessions a file did not mark (an older export, before
        `memory_pending`): pending for fact extraction when they hold a user message and
        their extraction state (if the file had one) is older than their last activity."""
        await self.session.execute(
            text(
                """
                UPDATE sessions s SET memory_pending = NOT EXISTS (
                    SELECT 1 FROM session_memory_state m
                    WHERE m.user_id = :uid AND m.session_id = s.id
                      AND m.extracted_at >= s.last_active)
                WHERE s.user_id = :uid AND s.memory_pending IS NULL
                  AND (EXISTS (SELECT 1 FROM session_messages x
                               WHERE x.user_id = :uid AND x.session_id = s.id
                                 AND x.role = 'user')
                       OR EXISTS (SELECT 1 FROM session_messages_archive x
                                  WHERE x.user_id = :uid AND x.session_id = s.id
                                    AND x.role = 'user'))
                """
            ),
            {"uid": user_id},
        )

    async def mark_background_work(self, user_id: str) -> None:
        """The imported sessions with messages a file did not mark (an older export,
        before `rolling_pending` / `raw_index_pending`): pending for the idle raw index
        and for the rolling summary (whose job clears the mark of a session whose
        profile is not in rolling mode)."""
        await self.session.execute(
            text(
                """
                UPDATE sessions SET
                    raw_index_pending = coalesce(raw_index_pending, true),
                    rolling_pending = coalesce(rolling_pending, true)
                WHERE user_id = :uid AND next_seq > 0
                  AND (raw_index_pending IS NULL OR rolling_pending IS NULL)
                """
            ),
            {"uid": user_id},
        )

    async def set_message_bytes(self, user_id: str, counts: dict[uuid.UUID, int]) -> None:
        """The imported sessions' `message_bytes` (the storage quota's count)."""
        if counts:
            t = cast(Table, Session.__table__)
            await self.session.execute(
                update(t)
                .where(t.c.user_id == bindparam("uid"), t.c.id == bindparam("sid"))
                .values(message_bytes=bindparam("bytes")),
                [{"uid": user_id, "sid": sid, "bytes": n} for sid, n in counts.items()],
            )

    async def count_chunks(self, user_id: str, chunks: int) -> None:
        await ChunkCountRepository(self.session).change(user_id, chunks)
