"""SQL of automatic extraction: which quiet sessions still need reading
(`session_memory_state`), claiming one, its transcript, and recording the outcome.

The facts it learns are written through `FactRepository` (`repositories.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncSession

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

    async def ensure_state_rows(self, stale_before: datetime, limit: int = 1000) -> int:
        """Give stale sessions that hold a user message a `session_memory_state` row, so
        that they can be claimed with a row lock. Idempotent and race-free."""
        result = await self.session.execute(
            text(
                """
                INSERT INTO session_memory_state (session_id, user_id)
                SELECT s.id, s.user_id FROM sessions s
                WHERE s.last_active < :stale_before
                  AND NOT EXISTS (SELECT 1 FROM session_memory_state m
                                  WHERE m.session_id = s.id AND m.user_id = s.user_id)
                  AND (EXISTS (SELECT 1 FROM session_messages x
                               WHERE x.session_id = s.id AND x.user_id = s.user_id
                                 AND x.role = 'user')
                       OR EXISTS (SELECT 1 FROM session_messages_archive x
                                  WHERE x.session_id = s.id AND x.user_id = s.user_id
                                    AND x.role = 'user'))
                ORDER BY s.last_active
                LIMIT :limit
                ON CONFLICT (session_id, user_id) DO NOTHING
                """
            ),
            {"stale_before": stale_before, "limit": limit},
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def claim_next(self, stale_before: datetime, skip: Sequence[Any]) -> Row[Any] | None:
        """The next stale, un-extracted session, its state row locked until commit.

        Two steps, so it works the same on one server and on Citus (where a locking
        read must stay on one shard): the candidates, fewest failed attempts first (so
        one session that keeps failing does not starve the others), read across every
        user without a lock; then each in turn claimed by its key with `FOR UPDATE SKIP
        LOCKED`, the conditions checked again on the locked row. A session another
        worker holds is passed over, never waited for; one another worker has just
        finished no longer matches (READ COMMITTED re-checks the WHERE clause on the row
        it locks).
        """
        candidates = await self.session.execute(
            text(
                """
                SELECT m.session_id, m.user_id
                FROM session_memory_state m
                JOIN sessions s ON s.id = m.session_id AND s.user_id = m.user_id
                WHERE s.last_active < :stale_before
                  AND (m.extracted_at IS NULL OR m.extracted_at < s.last_active)
                  AND NOT (m.session_id = ANY(CAST(:skip AS uuid[])))
                ORDER BY m.attempts, s.last_active
                LIMIT :n
                """
            ),
            {"stale_before": stale_before, "skip": [str(s) for s in skip], "n": CLAIM_CANDIDATES},
        )
        for candidate in candidates.all():
            row = (
                await self.session.execute(
                    text(
                        """
                        SELECT m.session_id, s.user_id, s.last_active, m.attempts
                        FROM session_memory_state m
                        JOIN sessions s ON s.id = m.session_id AND s.user_id = m.user_id
                        WHERE m.user_id = :uid AND m.session_id = :sid
                          AND s.last_active < :stale_before
                          AND (m.extracted_at IS NULL OR m.extracted_at < s.last_active)
                        FOR UPDATE OF m SKIP LOCKED
                        """
                    ),
                    {
                        "uid": candidate.user_id,
                        "sid": candidate.session_id,
                        "stale_before": stale_before,
                    },
                )
            ).first()
            if row is not None:
                return row
        return None

    async def transcript_messages(
        self, user_id: str, session_id: Any, head: int = 200, tail: int = 400
    ) -> list[Row[Any]]:
        """The first `head` and last `tail` conversation messages (hot + archive), in order."""
        both = f"""
            SELECT sequence_number, role, content, tool_calls, name FROM session_messages
            WHERE user_id = :uid AND session_id = :sid AND {self._CONVERSATION}
            UNION ALL
            SELECT sequence_number, role, content, tool_calls, name FROM session_messages_archive
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

    async def mark_extracted(self, user_id: str, session_id: Any) -> None:
        await self.session.execute(
            text(
                """
                INSERT INTO session_memory_state (session_id, user_id, extracted_at)
                VALUES (:sid, :uid, now())
                ON CONFLICT (session_id, user_id) DO UPDATE
                SET extracted_at = excluded.extracted_at, attempts = 0, last_error = NULL
                """
            ),
            {"sid": session_id, "uid": user_id},
        )

    async def record_failure(self, user_id: str, session_id: Any, error: str) -> None:
        await self.session.execute(
            text(
                """
                UPDATE session_memory_state
                SET attempts = attempts + 1, last_error = left(:error, 2000)
                WHERE user_id = :uid AND session_id = :sid
                """
            ),
            {"uid": user_id, "sid": session_id, "error": error},
        )

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
