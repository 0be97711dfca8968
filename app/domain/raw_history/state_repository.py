"""SQL of `raw_index_state`: which of a session's sequence numbers the raw index covers.

Both writers of raw chunks — compression's demotion hook (`indexer.index_demoted`) and
the idle-session job (`idle_index.py`) — lock the session's row, ask which of their
messages are not covered yet, write chunks for those only and add them to `covered`, in
one transaction. A message is therefore chunked once, whichever path comes first; the
idle job claims with `SKIP LOCKED`, compression waits (`COMPRESSION_LOCK_TIMEOUT_MS`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncSession

# How long compression waits for a session's row while the idle job holds it (embedding
# that session's messages). Past it the demoted messages are left to the idle job.
COMPRESSION_LOCK_TIMEOUT_MS = 5000

# The messages that are the conversation: what the idle job reads (the chunker skips
# system messages, summaries and compression markers on its own; plans and recalled
# excerpts are not stored turns of the conversation — a recalled excerpt is a copy).
CONVERSATION = (
    "role IN ('user', 'assistant', 'tool') AND NOT is_summary AND NOT is_compression"
    " AND NOT is_plan AND NOT is_recall"
)


class RawIndexRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # ---------------------------------------------------------------- both writers
    async def lock_for_compression(self, user_id: str, session_id: uuid.UUID) -> None:
        """Create the session's row if needed and lock it, waiting at most
        `COMPRESSION_LOCK_TIMEOUT_MS` (then the database raises: the caller's savepoint
        is rolled back, which restores the transaction's own `lock_timeout` too)."""
        await self.session.execute(
            text(
                "INSERT INTO raw_index_state (session_id, user_id) VALUES (:sid, :uid)"
                " ON CONFLICT DO NOTHING"
            ),
            {"sid": session_id, "uid": user_id},
        )
        old = (
            await self.session.execute(
                text(
                    "SELECT current_setting('lock_timeout') AS old,"
                    " set_config('lock_timeout', :ms, true) AS new"
                ),
                {"ms": f"{COMPRESSION_LOCK_TIMEOUT_MS}ms"},
            )
        ).scalar_one()
        await self.session.execute(
            text(
                "SELECT 1 FROM raw_index_state WHERE user_id = :uid AND session_id = :sid FOR UPDATE"
            ),
            {"sid": session_id, "uid": user_id},
        )
        await self.session.execute(
            text("SELECT set_config('lock_timeout', :old, true)"), {"old": old}
        )

    async def uncovered(self, user_id: str, session_id: uuid.UUID, seqs: Sequence[int]) -> set[int]:
        """The sequence numbers of `seqs` the session's index does not cover yet."""
        if not seqs:
            return set()
        rows = await self.session.execute(
            text(
                "SELECT s FROM unnest(CAST(:seqs AS bigint[])) AS s"
                " WHERE NOT coalesce((SELECT covered FROM raw_index_state"
                " WHERE user_id = :uid AND session_id = :sid) @> s, false)"
            ),
            {"sid": session_id, "uid": user_id, "seqs": list(seqs)},
        )
        return {int(r.s) for r in rows}

    async def cover(self, user_id: str, session_id: uuid.UUID, seqs: Sequence[int]) -> None:
        """Add `seqs` to what the session's index covers."""
        if not seqs:
            return
        await self.session.execute(
            text(
                "UPDATE raw_index_state SET indexed_at = now(), open_chunk_id = NULL,"
                " covered = covered +"
                " (SELECT range_agg(int8range(s, s, '[]')) FROM unnest(CAST(:seqs AS bigint[])) s)"
                " WHERE user_id = :uid AND session_id = :sid"
            ),
            {"sid": session_id, "uid": user_id, "seqs": list(seqs)},
        )

    async def close_open_chunk(self, user_id: str, session_id: uuid.UUID) -> None:
        """Seal the session's open chunk: the live indexer starts the next message in a
        new chunk (a reset: what follows it never joins a chunk of the turns before).
        Waits for a live pass holding the row, then seals what it wrote."""
        await self.session.execute(
            text(
                "UPDATE raw_index_state SET open_chunk_id = NULL"
                " WHERE user_id = :uid AND session_id = :sid AND open_chunk_id IS NOT NULL"
            ),
            {"sid": session_id, "uid": user_id},
        )

    # ---------------------------------------------------------------- the idle job
    async def ensure_idle_rows(
        self, idle_before: datetime, user_id: str | None, limit: int = 1000
    ) -> int:
        """Give idle marked sessions (`sessions.raw_index_pending`, through its partial
        index) a row, so they can be claimed with a lock. Across every user unless
        `user_id` is given (the job's deliberate scan)."""
        result = await self.session.execute(
            text("""
            INSERT INTO raw_index_state (session_id, user_id)
            SELECT s.id, s.user_id FROM sessions s
            WHERE s.raw_index_pending AND s.last_active < :before AND s.next_seq > 0
              AND (CAST(:uid AS text) IS NULL OR s.user_id = :uid)
              AND NOT EXISTS (SELECT 1 FROM raw_index_state r
                              WHERE r.session_id = s.id AND r.user_id = s.user_id)
            ORDER BY s.last_active
            LIMIT :limit
            ON CONFLICT (session_id, user_id) DO NOTHING
            """),
            {"before": idle_before, "uid": user_id, "limit": limit},
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    # the idle sessions the append marked (`raw_index_pending`: a range scan of its
    # partial index) whose messages the index does not cover
    _MARKED = """
        FROM sessions s JOIN raw_index_state r ON r.session_id = s.id AND r.user_id = s.user_id
        WHERE s.raw_index_pending AND s.last_active < :before
          AND (CAST(:uid AS text) IS NULL OR s.user_id = :uid)
    """
    _PENDING = _MARKED + " AND NOT r.covered @> int8range(0, s.next_seq)"

    async def pending(
        self, idle_before: datetime, user_id: str | None, skip: Sequence[uuid.UUID], limit: int
    ) -> list[Row[Any]]:
        """(user_id, session_id, next_seq, covered) of idle marked sessions, fewest
        failures first: `covered` ones (the live index or a compression did the work)
        are only to be `unmark`ed, the others to be indexed (read without a lock: each
        is then `claim`ed by its key)."""
        rows = await self.session.execute(
            text(
                "SELECT s.user_id, s.id AS session_id, s.next_seq,"
                f" r.covered @> int8range(0, s.next_seq) AS covered {self._MARKED}"
                " AND NOT (s.id = ANY(CAST(:skip AS uuid[])))"
                " ORDER BY r.attempts, s.last_active LIMIT :limit"
            ),
            {"before": idle_before, "uid": user_id, "skip": [str(s) for s in skip], "limit": limit},
        )
        return list(rows.all())

    async def unmark(self, user_id: str, session_id: uuid.UUID, next_seq: int) -> None:
        """Clear the session's idle mark: the index covers everything below `next_seq`,
        and no append came since (`next_seq` unchanged; one that did keeps the mark)."""
        await self.session.execute(
            text(
                "UPDATE sessions SET raw_index_pending = false"
                " WHERE user_id = :uid AND id = :sid AND raw_index_pending AND next_seq = :seq"
                " AND EXISTS (SELECT 1 FROM raw_index_state r WHERE r.user_id = :uid"
                " AND r.session_id = :sid AND r.covered @> int8range(0, CAST(:seq AS bigint)))"
            ),
            {"uid": user_id, "sid": session_id, "seq": next_seq},
        )

    async def pending_totals(self, idle_before: datetime, user_id: str | None) -> tuple[int, int]:
        """(sessions, messages) the idle job has left to index — for a progress bar."""
        row = (
            await self.session.execute(
                text(f"""
                SELECT count(*) AS sessions, coalesce(sum(
                    (SELECT count(*) FROM session_messages m
                     WHERE m.user_id = r.user_id AND m.session_id = r.session_id
                       AND NOT r.covered @> m.sequence_number AND {CONVERSATION})
                  + (SELECT count(*) FROM session_messages_archive m
                     WHERE m.user_id = r.user_id AND m.session_id = r.session_id
                       AND NOT r.covered @> m.sequence_number AND {CONVERSATION})), 0) AS messages
                {self._PENDING}
                """),
                {"before": idle_before, "uid": user_id},
            )
        ).one()
        return int(row.sessions), int(row.messages)

    async def claim(
        self, user_id: str, session_id: uuid.UUID, idle_before: datetime
    ) -> Row[Any] | None:
        """Lock a pending session's row (`SKIP LOCKED`: held by another worker or by a
        compression → None). The conditions are checked again on the locked row: a
        session another worker has just indexed, or that became active, is not taken."""
        return (
            await self.session.execute(
                text(
                    f"SELECT r.session_id, s.user_id, s.next_seq, r.attempts {self._PENDING}"
                    " AND r.user_id = :uid AND r.session_id = :sid FOR UPDATE OF r SKIP LOCKED"
                ),
                {"before": idle_before, "uid": user_id, "sid": session_id},
            )
        ).first()

    async def unindexed_messages(
        self, user_id: str, session_id: uuid.UUID, below_seq: int, limit: int, from_seq: int = 0
    ) -> list[Row[Any]]:
        """The session's first `limit` conversation messages (hot and archive) from
        `from_seq` and below `below_seq` that the index does not cover, in order."""
        one = f"""
            SELECT sequence_number, role, content, name, created_at,
                   is_summary, is_compression FROM {{table}} m
            WHERE m.user_id = :uid AND m.session_id = :sid AND m.sequence_number < :below
              AND m.sequence_number >= :from
              AND {CONVERSATION}
              AND NOT (SELECT covered FROM raw_index_state
                       WHERE user_id = :uid AND session_id = :sid) @> m.sequence_number
        """
        rows = await self.session.execute(
            text(
                f"SELECT * FROM ({one.format(table='session_messages')} UNION ALL"
                f" {one.format(table='session_messages_archive')}) AS u"
                " ORDER BY sequence_number LIMIT :limit"
            ),
            {
                "uid": user_id,
                "sid": session_id,
                "below": below_seq,
                "limit": limit,
                "from": from_seq,
            },
        )
        return list(rows.all())

    async def cover_through(
        self,
        user_id: str,
        session_id: uuid.UUID,
        last_seq: int,
        *,
        live: bool = False,
        open_chunk: uuid.UUID | None = None,
    ) -> None:
        """Every sequence number up to `last_seq` is covered (the messages below it that
        were not are now chunked, or were of roles the index skips); failures reset. The
        live indexer names the session's open chunk; the idle job closes it."""
        await self.session.execute(
            text(
                "UPDATE raw_index_state SET covered = covered"
                " + int8multirange(int8range(NULL, :last, '(]')),"
                " indexed_at = now(), attempts = 0, last_error = NULL,"
                " open_chunk_id = CASE WHEN :live THEN CAST(:open AS uuid) END"
                " WHERE user_id = :uid AND session_id = :sid"
            ),
            {"uid": user_id, "sid": session_id, "last": last_seq, "live": live, "open": open_chunk},
        )

    # ---------------------------------------------------------------- the live indexer
    async def commit_without_flush(self) -> None:
        """This transaction's commit does not wait for its WAL flush. For derived writes
        only (the live index): a crash can lose the last of them — whole transactions,
        chunks and `covered` together — and the messages are then indexed again."""
        await self.session.execute(text("SELECT set_config('synchronous_commit', 'off', true)"))

    async def live_pending(
        self, active_since: datetime, max_attempts: int, limit: int
    ) -> list[Row[Any]]:
        """(user_id, session_id, has_row) of sessions active since `active_since` with
        messages the index does not cover (the live indexer's work), oldest first;
        sessions that failed `max_attempts` times in a row are left to the idle job."""
        rows = await self.session.execute(
            text(
                "SELECT s.user_id, s.id AS session_id, r.session_id IS NOT NULL AS has_row"
                " FROM sessions s LEFT JOIN raw_index_state r"
                " ON r.session_id = s.id AND r.user_id = s.user_id"
                " WHERE s.last_active >= :since AND s.next_seq > 0"
                " AND (r.session_id IS NULL OR (NOT r.covered @> int8range(0, s.next_seq)"
                " AND r.attempts < :attempts))"
                " ORDER BY s.last_active LIMIT :limit"
            ),
            {"since": active_since, "attempts": max_attempts, "limit": limit},
        )
        return list(rows.all())

    async def record_failure(self, user_id: str, session_id: uuid.UUID, error: str) -> None:
        """Count a failed batch on the session's row, creating it when the failed
        transaction was the one that would have (a first pass's failure counts too)."""
        await self.session.execute(
            text(
                "INSERT INTO raw_index_state AS r (session_id, user_id, attempts, last_error)"
                " VALUES (:sid, :uid, 1, left(:error, 2000))"
                " ON CONFLICT (session_id, user_id) DO UPDATE"
                " SET attempts = r.attempts + 1, last_error = EXCLUDED.last_error"
            ),
            {"uid": user_id, "sid": session_id, "error": error},
        )
