"""All SQL of the planning logs (`session_planning_entries`): append, trim, page.

An entry is a row keyed by `(session_id, seq, user_id)`; `seq` comes from the session's
`next_planning_seq`, bumped on append (the session's row lock orders two appends). The
oldest entries go once the log passes its kept count or bytes. Every statement names
`user_id = :uid` (one shard on Citus).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import PlanningEntry, Session
from app.domain.kernel.access import Viewer
from app.domain.kernel.repositories import scope_owner

# The entries past the newest `keep`, or past `max_bytes` counted from the newest: the
# newest entry always stays (one entry is at most the per-entry limit, below the cap).
_TRIM_SQL = text(
    """
    DELETE FROM session_planning_entries
    WHERE session_id = :sid AND user_id = :uid AND seq IN (
        SELECT seq FROM (
            SELECT seq,
                   row_number() OVER w AS n,
                   sum(bytes) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS total
            FROM session_planning_entries
            WHERE session_id = :sid AND user_id = :uid
            WINDOW w AS (ORDER BY seq DESC)
        ) newest_first
        WHERE n > :keep OR total > :max_bytes
    )
    """
)


# The same, over every session of one user at once (an import's: its sessions only).
_TRIM_USER_SQL = text(
    """
    DELETE FROM session_planning_entries
    WHERE user_id = :uid AND (session_id, seq) IN (
        SELECT session_id, seq FROM (
            SELECT session_id, seq,
                   row_number() OVER w AS n,
                   sum(bytes) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS total
            FROM session_planning_entries
            WHERE user_id = :uid
            WINDOW w AS (PARTITION BY session_id ORDER BY seq DESC)
        ) newest_first
        WHERE n > :keep OR total > :max_bytes
    )
    """
)


class PlanningRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def append(
        self,
        session_id: uuid.UUID,
        viewer: Viewer,
        entry: dict[str, Any],
        *,
        keep: int,
        max_bytes: int,
    ) -> int | None:
        """Append `entry` and trim the oldest beyond `keep` entries or `max_bytes`; its
        `seq`, or None when the viewer may not write to such a session."""
        user_id = await scope_owner(self.session, session_id, viewer)
        if user_id is None:
            return None
        seq = (
            await self.session.execute(
                update(Session)
                .where(Session.id == session_id, Session.user_id == user_id)
                .values(next_planning_seq=Session.next_planning_seq + 1)
                .returning(Session.next_planning_seq - 1)
            )
        ).scalar_one_or_none()
        if seq is None:
            return None
        await self.session.execute(
            text(
                "INSERT INTO session_planning_entries (session_id, user_id, seq, entry)"
                " VALUES (:sid, :uid, :seq, CAST(:entry AS jsonb))"
            ),
            {"sid": session_id, "uid": user_id, "seq": seq, "entry": json.dumps(entry)},
        )
        await self.session.execute(
            _TRIM_SQL, {"sid": session_id, "uid": user_id, "keep": keep, "max_bytes": max_bytes}
        )
        return int(seq)

    async def trim_user(self, user_id: str, *, keep: int, max_bytes: int) -> int:
        """Trim every planning log of the user as `append` trims one (an import's);
        the entries removed."""
        result = await self.session.execute(
            _TRIM_USER_SQL, {"uid": user_id, "keep": keep, "max_bytes": max_bytes}
        )
        return int(getattr(result, "rowcount", 0) or 0)

    async def page(
        self, user_id: str, session_id: uuid.UUID, limit: int, offset: int, *, newest: bool = False
    ) -> tuple[list[Any], int]:
        """Entries `offset`..`offset + limit` of the log, oldest first (`newest`: newest
        first), and how many it has."""
        where = (PlanningEntry.session_id == session_id, PlanningEntry.user_id == user_id)
        order = PlanningEntry.seq.desc() if newest else PlanningEntry.seq
        rows = await self.session.execute(
            select(PlanningEntry.entry).where(*where).order_by(order).limit(limit).offset(offset)
        )
        entries = list(rows.scalars())
        if offset == 0 and len(entries) < limit:
            return entries, len(entries)
        total = (await self.session.execute(select(func.count()).where(*where))).scalar_one()
        return entries, int(total)
