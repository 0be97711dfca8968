"""SQL of automatic extraction: which quiet sessions still need reading (the append's
mark, `sessions.memory_pending`, read through its partial index), claiming one (its
`session_memory_state` row), its transcript, and recording the outcome.

The facts it learns are written through `FactRepository` (`repositories.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.kernel.repositories import clear_pending_mark

# How many candidates one claim reads before locking them one by one.
CLAIM_CANDIDATES = 20


class ExtractionRepository:
    """Worker-side SQL of automatic extraction. The worker acts for every user: a claim
    carries the session's user, and facts are then written through `FactRepository`
    under that user."""

    # Roles and flags of the messages that are the conversation itself (not summaries,
    # compression markers, plans or recalled excerpts).
    _CONVERSATION = """
        role IN ('user', 'assistant', 'tool') AND NOT is_summary AND NOT is_compression
        AND NOT is_plan AND NOT is_recall
    """

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def candidates(
        self, stale_before: datetime, skip: Sequence[Any], n: int = CLAIM_CANDIDATES
    ) -> list[Row[Any]]:
        """(session_id, user_id) of up to `n` sessions pending extraction and quiet since
        `stale_before`, quietest first: a range scan of the partial index
        `ix_sessions_memory_pending` (the append marks a session, `MessageRepository.
        reserve`; a mark or a park clears it), never a scan of every session. Across
        every user, read without a lock: each is then `claim`ed by its key."""
        rows = await self.session.execute(
            text(
                """
                SELECT s.id AS session_id, s.user_id FROM sessions s
                WHERE s.memory_pending AND s.last_active < :stale_before
                  AND NOT (s.id = ANY(CAST(:skip AS uuid[])))
                ORDER BY s.last_active
                LIMIT :n
                """
            ),
            {"stale_before": stale_before, "skip": [str(s) for s in skip], "n": n},
        )
        return list(rows.all())

    async def claim(self, user_id: str, session_id: Any, stale_before: datetime) -> Row[Any] | None:
        """Lock a candidate's state row (created if missing) until commit: `(session_id,
        user_id, last_active, attempts)`, or None when another worker holds it (`SKIP
        LOCKED`: passed over, never waited for) or the session no longer qualifies (the
        conditions are checked again on the locked row: one another worker has just
        finished is no longer pending). An append never waits for this lock: it writes
        the session's row, not this one."""
        params = {"uid": user_id, "sid": session_id, "stale_before": stale_before}
        await self.session.execute(
            text(
                "INSERT INTO session_memory_state (session_id, user_id) VALUES (:sid, :uid)"
                " ON CONFLICT (session_id, user_id) DO NOTHING"
            ),
            params,
        )
        return (
            await self.session.execute(
                text(
                    """
                    SELECT m.session_id, s.user_id, s.last_active, m.attempts
                    FROM session_memory_state m
                    JOIN sessions s ON s.id = m.session_id AND s.user_id = m.user_id
                    WHERE m.user_id = :uid AND m.session_id = :sid
                      AND s.memory_pending AND s.last_active < :stale_before
                    FOR UPDATE OF m SKIP LOCKED
                    """
                ),
                params,
            )
        ).first()

    async def settle(self, user_id: str, session_id: Any, seen: datetime) -> None:
        """Clear the session's pending mark (extracted, or parked), unless it was active
        after `seen` (the `last_active` the claim read): an append during the extraction
        keeps it pending, so what it said is read by a later pass."""
        await clear_pending_mark(self.session, "memory_pending", user_id, session_id, seen)

    async def transcript_messages(
        self, user_id: str, session_id: Any, head: int = 200, tail: int = 400
    ) -> list[Row[Any]]:
        """The first `head` and last `tail` conversation messages (hot + archive), in order."""
        both = f"""
            SELECT sequence_number, role, content, tool_calls, name, created_at
            FROM session_messages
            WHERE user_id = :uid AND session_id = :sid AND {self._CONVERSATION}
            UNION ALL
            SELECT sequence_number, role, content, tool_calls, name, created_at
            FROM session_messages_archive
            WHERE user_id = :uid AND session_id = :sid AND {self._CONVERSATION}
        """
        rows = await self.session.execute(
            text(
                f"""
                (SELECT * FROM ({both}) a ORDER BY sequence_number LIMIT :head)
                UNION
                (SELECT * FROM ({both}) b ORDER BY sequence_number DESC LIMIT :tail)
                ORDER BY sequence_number
                """
            ),
            {"uid": user_id, "sid": session_id, "head": head, "tail": tail},
        )
        return list(rows.all())

    async def mark_extracted(
        self, user_id: str, session_id: Any, seen: datetime, *, note: str | None = None
    ) -> None:
        """Extracted as of `seen` (the claim's `last_active`): failures reset, the
        pending mark cleared (`settle`); `note` (an empty answer accepted although the
        user stated a fact) kept in `last_error`, else that cleared."""
        await self.settle(user_id, session_id, seen)
        await self.session.execute(
            text(
                """
                INSERT INTO session_memory_state (session_id, user_id, extracted_at, last_error)
                VALUES (:sid, :uid, now(), left(:note, 2000))
                ON CONFLICT (session_id, user_id) DO UPDATE
                SET extracted_at = excluded.extracted_at, attempts = 0,
                    last_error = excluded.last_error
                """
            ),
            {"sid": session_id, "uid": user_id, "note": note},
        )

    async def record_failure(
        self, user_id: str, session_id: Any, error: str, max_attempts: int, *, counts: bool
    ) -> int:
        """Keep a failed attempt's error and, when it `counts` (not an unreachable
        model), count it; returns the failures in a row. A session that had been parked
        (`max_attempts` reached) and was claimed again was unparked by an append: its
        count starts over."""
        row = await self.session.execute(
            text(
                """
                UPDATE session_memory_state
                SET attempts = CASE WHEN attempts >= :max THEN 0 ELSE attempts END
                               + CAST(:counts AS integer),
                    last_error = left(:error, 2000)
                WHERE user_id = :uid AND session_id = :sid
                RETURNING attempts
                """
            ),
            {
                "uid": user_id,
                "sid": session_id,
                "error": error,
                "max": max_attempts,
                "counts": counts,
            },
        )
        return int(row.scalar_one())

    async def state(
        self, session_id: Any, user_id: str | None, *, all_users: bool
    ) -> Row[Any] | None:
        """`(extracted_at, attempts, last_error)` of a session the caller may see (the
        user filter only when there is one: an all-users caller reads by session id)."""
        scope = "" if all_users else " AND m.user_id = :uid"
        row = await self.session.execute(
            text(
                f"""
                SELECT m.extracted_at, m.attempts, m.last_error
                FROM session_memory_state m
                JOIN sessions s ON s.id = m.session_id AND s.user_id = m.user_id
                WHERE m.session_id = :sid{scope}
                """
            ),
            {"sid": session_id, "uid": user_id},
        )
        return row.first()

    async def troubled(self, limit: int) -> tuple[list[Row[Any]], int]:
        """The sessions whose extraction has a note (`last_error`: failing, parked, or an
        empty answer accepted), the most recently active first, at most `limit`, and
        how many there are: `(session_id, user_id, attempts, last_error, extracted_at,
        pending, last_active)`. Across every user (the console's system page, an
        admin's): a scan of the state rows, one per session ever claimed."""
        troubled = """
            FROM session_memory_state m
            JOIN sessions s ON s.id = m.session_id AND s.user_id = m.user_id
            WHERE m.last_error IS NOT NULL
        """
        rows = await self.session.execute(
            text(
                f"""
                SELECT m.session_id, m.user_id, m.attempts, m.last_error, m.extracted_at,
                       coalesce(s.memory_pending, false) AS pending, s.last_active
                {troubled}
                ORDER BY s.last_active DESC, m.session_id
                LIMIT :n
                """
            ),
            {"n": limit},
        )
        total = await self.session.execute(text(f"SELECT count(*) {troubled}"))
        return list(rows.all()), int(total.scalar_one())
