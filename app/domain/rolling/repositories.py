"""All SQL of the rolling summary: candidate sessions (the append's mark), the locked state row, the
messages after the cursor (hot and archived), saving summary and cursor.

The cursor is the sequence number of the last summarised message (`cursor_seq`), not its
time: clients set `created_at`, so a future-dated message would otherwise freeze the
summary and a backdated one would never be summarised. `cursor_at` is kept as that
message's time, for information."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.kernel.repositories import clear_pending_mark
from app.domain.rolling.summary import TranscriptMessage

# What the summary reads: the conversation, not system prompts, summaries or markers.
_SUMMARISABLE = (
    "role IN ('user', 'assistant', 'tool') AND NOT is_summary AND NOT is_compression "
    "AND content <> ''"
)
TEMP_PREFIX = "temp-"
LOCK_NOT_AVAILABLE = "55P03"


class RowBusy(Exception):
    """Another transaction holds the row (`lock_for_edit`)."""


@dataclass(frozen=True)
class RollingState:
    session_id: uuid.UUID
    summary: dict[str, Any] | None
    cursor_seq: int | None
    cursor_at: datetime | None
    attempts: int


@dataclass(frozen=True)
class Candidate:
    """A session marked for the rolling summary, as listed (without a lock)."""

    session_id: uuid.UUID
    user_id: str
    profile_id: str
    name: str | None
    last_active: datetime


@dataclass(frozen=True)
class Cursor:
    """Where the summary stands: the last summarised message's number and time."""

    seq: int
    at: datetime | None


class RollingRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def candidates(self, now: datetime, limit: int) -> list[Candidate]:
        """Sessions marked for the rolling summary (`sessions.rolling_pending`, set by
        the append when the session's profile is in rolling mode), read through the
        partial index `ix_sessions_rolling_pending` — a range scan of the marked
        sessions, not a join of every session — except those backing off after a
        failure (`next_attempt_at` after `now`). Quietest first. Deliberately across
        every user (the job's candidates, read without a lock; each is then locked by
        its key, `lock`). The caller skips (and `unmark`s) those whose profile is no
        longer rolling or that are `temp-…`."""
        rows = await self.session.execute(
            text(
                """
                SELECT s.id, s.user_id, s.profile_id, s.name, s.last_active FROM sessions s
                LEFT JOIN rolling_summaries r ON r.session_id = s.id AND r.user_id = s.user_id
                WHERE s.rolling_pending
                  AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= :now)
                ORDER BY s.last_active
                LIMIT :limit
                """
            ),
            {"now": now, "limit": limit},
        )
        return [Candidate(r.id, r.user_id, r.profile_id, r.name, r.last_active) for r in rows]

    async def unmark(self, user_id: str, session_id: uuid.UUID, seen: datetime) -> bool:
        """Clear the session's mark (up to date, parked, or not in rolling mode) unless
        an append came after `seen` (its `last_active` when listed): that one keeps it."""
        return await clear_pending_mark(self.session, "rolling_pending", user_id, session_id, seen)

    async def ensure_row(self, user_id: str, session_id: uuid.UUID) -> None:
        await self.session.execute(
            text(
                "INSERT INTO rolling_summaries (session_id, user_id) VALUES (:sid, :uid) "
                "ON CONFLICT (session_id, user_id) DO NOTHING"
            ),
            {"sid": session_id, "uid": user_id},
        )

    async def lock(self, user_id: str, session_id: uuid.UUID) -> RollingState | None:
        """The state row, locked until the transaction ends; None when another worker
        holds it (SKIP LOCKED) or it does not exist."""
        row = (
            await self.session.execute(
                text(
                    "SELECT session_id, summary, cursor_seq, cursor_at, attempts "
                    "FROM rolling_summaries "
                    "WHERE user_id = :uid AND session_id = :sid FOR UPDATE SKIP LOCKED"
                ),
                {"uid": user_id, "sid": session_id},
            )
        ).first()
        if row is None:
            return None
        return _state(row)

    async def get(self, user_id: str, session_id: uuid.UUID) -> RollingState | None:
        row = (
            await self.session.execute(
                text(
                    "SELECT session_id, summary, cursor_seq, cursor_at, attempts "
                    "FROM rolling_summaries "
                    "WHERE user_id = :uid AND session_id = :sid"
                ),
                {"uid": user_id, "sid": session_id},
            )
        ).first()
        if row is None:
            return None
        return _state(row)

    async def lock_for_edit(self, user_id: str, session_id: uuid.UUID) -> RollingState | None:
        """The state row for a user's edit, locked without waiting (`NOWAIT`): None when
        the job holds it (summarising a chunk, a model call) or it does not exist."""
        try:
            async with self.session.begin_nested():
                row = (
                    await self.session.execute(
                        text(
                            "SELECT session_id, summary, cursor_seq, cursor_at, attempts "
                            "FROM rolling_summaries "
                            "WHERE user_id = :uid AND session_id = :sid FOR UPDATE NOWAIT"
                        ),
                        {"uid": user_id, "sid": session_id},
                    )
                ).first()
        except OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE:
                raise RowBusy from None
            raise
        return None if row is None else _state(row)

    async def save_edit(
        self, user_id: str, session_id: uuid.UUID, summary: dict[str, Any], cursor: Cursor | None
    ) -> None:
        """A user's summary (with `cursor`: the first one, which stands for the history up
        to it). `updated_at` (when the job last looked) and the session's mark for the
        job (`sessions.rolling_pending`) are left alone: an edit is not the job looking."""
        await self.session.execute(
            text(
                "UPDATE rolling_summaries SET summary = CAST(:summary AS jsonb)"
                + (", cursor_seq = :seq, cursor_at = :at" if cursor is not None else "")
                + " WHERE user_id = :uid AND session_id = :sid"
            ),
            {
                "uid": user_id,
                "sid": session_id,
                "summary": json.dumps(summary, ensure_ascii=False),
                **({"seq": cursor.seq, "at": cursor.at} if cursor is not None else {}),
            },
        )

    async def messages_after(
        self, user_id: str, session_id: uuid.UUID, cursor_seq: int | None, limit: int
    ) -> list[TranscriptMessage]:
        """Summarisable messages after the cursor (all when None), in sequence order,
        from the hot table and the archive."""
        after = "AND sequence_number > :cursor" if cursor_seq is not None else ""
        cols = "sequence_number, role, content, created_at, name"
        stmt = text(
            f"""
            SELECT * FROM (
                SELECT {cols} FROM session_messages
                WHERE user_id = :uid AND session_id = :sid AND {_SUMMARISABLE} {after}
                UNION ALL
                SELECT {cols} FROM session_messages_archive
                WHERE user_id = :uid AND session_id = :sid AND {_SUMMARISABLE} {after}
            ) m ORDER BY sequence_number LIMIT :limit
            """
        )
        params: dict[str, Any] = {"uid": user_id, "sid": session_id, "limit": limit}
        if cursor_seq is not None:
            params["cursor"] = cursor_seq
        rows = await self.session.execute(stmt, params)
        return [
            TranscriptMessage(
                sequence_number=int(r.sequence_number),
                role=r.role,
                content=r.content,
                created_at=r.created_at,
                name=r.name,
            )
            for r in rows
        ]

    async def latest_message(self, user_id: str, session_id: uuid.UUID) -> Cursor | None:
        """The session's newest message by sequence number (hot or archived)."""
        return await self._last(user_id, session_id, "")

    async def cursor_at_time(
        self, user_id: str, session_id: uuid.UUID, at: datetime
    ) -> Cursor | None:
        """A time cursor (an older release's, or an older export's) as a sequence cursor:
        the newest message at or before `at`; None when there is none."""
        return await self._last(user_id, session_id, "AND created_at <= :at", {"at": at})

    async def _last(
        self, user_id: str, session_id: uuid.UUID, where: str, extra: dict[str, Any] | None = None
    ) -> Cursor | None:
        row = (
            await self.session.execute(
                text(
                    f"""
                    SELECT sequence_number, created_at FROM (
                        SELECT sequence_number, created_at FROM session_messages
                        WHERE user_id = :uid AND session_id = :sid {where}
                        UNION ALL
                        SELECT sequence_number, created_at FROM session_messages_archive
                        WHERE user_id = :uid AND session_id = :sid {where}
                    ) m ORDER BY sequence_number DESC LIMIT 1
                    """
                ),
                {"uid": user_id, "sid": session_id, **(extra or {})},
            )
        ).first()
        return None if row is None else Cursor(int(row.sequence_number), row.created_at)

    async def save(
        self,
        user_id: str,
        session_id: uuid.UUID,
        summary: dict[str, Any] | None,
        cursor: Cursor,
    ) -> None:
        """Summary and cursor after a chunk (the attempt counter starts over)."""
        await self.session.execute(
            text(
                "UPDATE rolling_summaries SET summary = CAST(:summary AS jsonb), "
                "cursor_seq = :seq, cursor_at = :at, updated_at = now(), attempts = 0, "
                "last_error = NULL, next_attempt_at = NULL "
                "WHERE user_id = :uid AND session_id = :sid"
            ),
            {
                "uid": user_id,
                "sid": session_id,
                "summary": json.dumps(summary, ensure_ascii=False) if summary is not None else None,
                "seq": cursor.seq,
                "at": cursor.at,
            },
        )

    async def set_cursor(self, user_id: str, session_id: uuid.UUID, cursor: Cursor) -> None:
        await self.session.execute(
            text(
                "UPDATE rolling_summaries SET cursor_seq = :seq, cursor_at = :at, "
                "updated_at = now() WHERE user_id = :uid AND session_id = :sid"
            ),
            {"uid": user_id, "sid": session_id, "seq": cursor.seq, "at": cursor.at},
        )

    async def touch(self, user_id: str, session_id: uuid.UUID) -> None:
        """Looked at, nothing to summarise yet (e.g. a question still unanswered)."""
        await self.session.execute(
            text(
                "UPDATE rolling_summaries SET updated_at = now() WHERE user_id = :uid AND session_id = :sid"
            ),
            {"uid": user_id, "sid": session_id},
        )

    async def fail(
        self,
        user_id: str,
        session_id: uuid.UUID,
        error: str,
        *,
        attempts: int,
        next_attempt_at: datetime | None,
    ) -> None:
        """A failed chunk: the session's failure count becomes `attempts` and it is not
        retried before `next_attempt_at` (None: at the next tick — an unreachable
        model, which is not counted, or a parked session, which waits for an append)."""
        await self.session.execute(
            text(
                "UPDATE rolling_summaries SET attempts = :attempts, last_error = :err,"
                " next_attempt_at = :next, updated_at = now()"
                " WHERE user_id = :uid AND session_id = :sid"
            ),
            {
                "uid": user_id,
                "sid": session_id,
                "err": error[:1000],
                "attempts": attempts,
                "next": next_attempt_at,
            },
        )


def _state(row: Any) -> RollingState:
    return RollingState(
        row.session_id,
        row.summary,
        None if row.cursor_seq is None else int(row.cursor_seq),
        row.cursor_at,
        int(row.attempts),
    )
