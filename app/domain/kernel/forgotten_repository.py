"""The SQL of the forget records (`forgotten_texts`, one row per user): a forget adds
its record, every writer of derived text takes the user's row in share mode and reads
it in its commit transaction (app/domain/kernel/forgotten.py, docs/memory.md).

Why a row lock and not a plain read: a writer that read the records just before a
forget added one, then committed after the forget's batches had gone by, would store
the text again. The forget's `add` updates the row (an exclusive row lock) and commits
before its first batch; a writer's `guard` holds the row in share mode until its own
commit. So either the writer's lock came first — the forget waits for its commit, and
its batches then find and redact what it wrote — or the forget's came first, and the
writer's read, after the wait, sees the new record. A user with no row yet gets one
(empty) on first guard: a row that does not exist cannot be locked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.kernel.forgotten import Forgotten


class ForgottenRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _locked(self, user_id: str) -> Any:
        return (
            await self.session.execute(
                text("SELECT entries FROM forgotten_texts WHERE user_id = :uid FOR SHARE"),
                {"uid": user_id},
            )
        ).first()

    async def guard(self, user_id: str) -> Forgotten:
        """The user's records, their row held in share mode until this transaction ends
        (call it in the writer's commit transaction, before it writes)."""
        row = await self._locked(user_id)
        if row is None:
            await self.session.execute(
                text(
                    "INSERT INTO forgotten_texts (user_id) VALUES (:uid)"
                    " ON CONFLICT (user_id) DO NOTHING"
                ),
                {"uid": user_id},
            )
            row = await self._locked(user_id)
        return Forgotten.of(row.entries if row is not None else ())

    async def guard_many(self, user_ids: Sequence[str]) -> dict[str, Forgotten]:
        """`guard` for several users in two statements (a writer of many users' rows at
        once, the live index pass on one PostgreSQL); one user: `guard` itself (a
        statement Citus routes to its shard)."""
        ids = sorted(set(user_ids))
        if len(ids) <= 1:
            return {u: await self.guard(u) for u in ids}
        await self.session.execute(
            text(
                "INSERT INTO forgotten_texts (user_id) SELECT unnest(CAST(:uids AS text[]))"
                " ON CONFLICT (user_id) DO NOTHING"
            ),
            {"uids": ids},
        )
        rows = await self.session.execute(
            text(
                "SELECT user_id, entries FROM forgotten_texts"
                " WHERE user_id = ANY(CAST(:uids AS text[])) ORDER BY user_id FOR SHARE"
            ),
            {"uids": ids},
        )
        return {r.user_id: Forgotten.of(r.entries) for r in rows}

    async def add(self, user_id: str, entry: dict[str, Any]) -> None:
        """Append a forget's record (a record with the same digest is kept once)."""
        await self.session.execute(
            text(
                "INSERT INTO forgotten_texts AS f (user_id, entries)"
                " VALUES (:uid, CAST(:one AS jsonb))"
                " ON CONFLICT (user_id) DO UPDATE SET entries = CASE"
                " WHEN f.entries @> CAST(:probe AS jsonb) THEN f.entries"
                " ELSE f.entries || CAST(:one AS jsonb) END,"
                " updated_at = EXCLUDED.updated_at"
            ),
            {
                "uid": user_id,
                "one": json.dumps([entry]),
                "probe": json.dumps([{"digest": entry["digest"]}]),
            },
        )
