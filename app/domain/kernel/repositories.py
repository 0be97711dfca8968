"""Queries every domain needs: a session row in a viewer's scope, a user's sessions, the
sessions' work markers, and each user's chunk count (written by whoever adds or deletes
raw chunks)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Message, Session
from app.domain.kernel.access import Viewer


def visible(viewer: Viewer) -> Any:
    """The `sessions` filter of a viewer's scope (every session for an all-users viewer)."""
    return True if viewer.all_users else Session.user_id == viewer.user_id


async def scope_owner(db: AsyncSession, session_id: uuid.UUID, viewer: Viewer) -> str | None:
    """The user a statement on the session names (its tenant key): the viewer's own id
    for one user's scope — no statement; whether the session exists is the caller's
    statement's business, as with `visible` —, else the session's owner, looked up by id
    (None: no such session). That lookup is an all-users viewer's only read that cannot
    name its tenant (on Citus, one on every shard); what follows names the owner."""
    if not viewer.all_users:
        return viewer.user_id
    return (
        await db.execute(select(Session.user_id).where(Session.id == session_id))
    ).scalar_one_or_none()


class SessionLookupRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def owner(self, session_id: uuid.UUID, viewer: Viewer) -> str | None:
        """The session's user when the viewer may see it (one column, not the row)."""
        return (
            await self.session.execute(
                select(Session.user_id).where(Session.id == session_id, visible(viewer))
            )
        ).scalar_one_or_none()

    async def get(self, session_id: uuid.UUID, viewer: Viewer) -> Session | None:
        return (
            await self.session.execute(
                select(Session).where(Session.id == session_id, visible(viewer))
            )
        ).scalar_one_or_none()

    async def last_user_seq(self, user_id: str, session_id: uuid.UUID) -> int | None:
        """The sequence number of the session's newest user message (what a `memory`
        save in that session came from), None when it has none in the live history."""
        return (
            await self.session.execute(
                select(Message.sequence_number)
                .where(
                    Message.user_id == user_id,
                    Message.session_id == session_id,
                    Message.role == "user",
                )
                .order_by(Message.sequence_number.desc())
                .limit(1)
            )
        ).scalar_one_or_none()


class UserSessionsRepository:
    """A user's sessions by id, what the jobs that walk them in batches (forget, user
    deletion) and the upload quota read. Every statement names the user."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def ids(
        self, user_id: str, *, after: uuid.UUID | None = None, limit: int | None = None
    ) -> list[uuid.UUID]:
        """The user's session ids in id order: after `after` (None: from the first), at
        most `limit` (None: all)."""
        stmt = select(Session.id).where(Session.user_id == user_id).order_by(Session.id)
        if after is not None:
            stmt = stmt.where(Session.id > after)
        if limit is not None:
            stmt = stmt.limit(limit)
        return list((await self.session.execute(stmt)).scalars())

    async def count(self, user_id: str) -> int:
        return int(
            await self.session.scalar(select(func.count()).where(Session.user_id == user_id)) or 0
        )


#: The work markers on `sessions` an append sets (`MessageRepository.reserve`) and a
#: job clears once it has read the session: fact extraction's, the rolling summary's.
PENDING_MARKS = ("memory_pending", "rolling_pending")


async def clear_pending_mark(
    db: AsyncSession, mark: str, user_id: str, session_id: uuid.UUID, seen: datetime
) -> bool:
    """Clear the session's work marker `mark` (read, or parked) unless an append came
    after `seen` (the `last_active` the job read when it took the session): that append
    keeps it, so a later pass reads what it said. Whether it was cleared."""
    if mark not in PENDING_MARKS:
        raise ValueError(f"not a work marker of sessions: {mark!r}")
    result = await db.execute(
        text(
            f"UPDATE sessions SET {mark} = false"
            f" WHERE user_id = :uid AND id = :sid AND {mark} AND last_active <= :seen"
        ),
        {"uid": user_id, "sid": session_id, "seen": seen},
    )
    return bool(getattr(result, "rowcount", 0))


class ChunkCountRepository:
    """`memory_chunk_counts`: changed in the transaction that adds or deletes a user's
    chunks, with a new `version` (what the raw search's term cache is checked against).
    Two writers of one user's chunks queue on the row until the first commits. The new
    version is the one drawn for the row proposed (`EXCLUDED.version`): Citus takes no
    volatile function in `DO UPDATE SET` (it evaluates those of `VALUES` before routing)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def change(self, user_id: str, delta: int) -> None:
        if delta == 0:
            return
        await self._write(user_id, delta)

    async def change_many(self, deltas: dict[str, int]) -> None:
        """`change` for several users in one statement (chunks added: deltas of 0 or
        more, 0 being a `touch`), the users' rows taken in one order (two writers never
        wait on each other in a cycle). One user: `_write`'s own statement (on Citus it
        routes to one shard)."""
        if len(deltas) == 1:
            ((user_id, delta),) = deltas.items()
            await self._write(user_id, delta)
            return
        if not deltas:
            return
        users = sorted(deltas)
        await self.session.execute(
            text(
                "INSERT INTO memory_chunk_counts AS c (user_id, chunks, version)"
                " SELECT v.uid, v.n, nextval('navi_chunk_count_versions')"
                " FROM unnest(CAST(:uids AS text[]), CAST(:ns AS bigint[])) AS v(uid, n)"
                " ORDER BY v.uid"
                " ON CONFLICT (user_id) DO UPDATE SET chunks = greatest(c.chunks + EXCLUDED.chunks, 0),"
                " version = EXCLUDED.version"
            ),
            {"uids": users, "ns": [max(deltas[u], 0) for u in users]},
        )

    async def touch(self, user_id: str) -> None:
        """A new version without a change of count: chunks rewritten in place (forget,
        the live indexer's open chunk, a compression's KEYS)."""
        await self._write(user_id, 0)

    async def _write(self, user_id: str, delta: int) -> None:
        await self.session.execute(
            text(
                "INSERT INTO memory_chunk_counts AS c (user_id, chunks, version)"
                " VALUES (:uid, greatest(:n, 0), nextval('navi_chunk_count_versions'))"
                " ON CONFLICT (user_id) DO UPDATE SET chunks = greatest(c.chunks + :n, 0),"
                " version = EXCLUDED.version"
            ),
            {"uid": user_id, "n": delta},
        )


class EmbedBacklogRepository:
    """The live index's embedding queue as an operator sees it (`/metrics`, `/health`,
    the console's system page): read across users, on the partial index of stale chunks."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def backlog(self) -> Any:
        """Chunks waiting for vectors, their text's size in bytes (`octet_length` reads
        the TOAST header: no detoast) and the age in seconds of the oldest wait (0: none)."""
        row = await self.session.execute(
            text(
                "SELECT count(*) AS chunks, coalesce(sum(octet_length(content)), 0) AS bytes,"
                " coalesce(extract(epoch FROM now() - min(coalesce(stale_since, created_at))),"
                " 0)::float8 AS oldest_seconds FROM memory_chunks WHERE vectors_stale"
            )
        )
        return row.one()
