"""The rolling summary and the idle raw index find their work through indexes

Two markers on `sessions`, set by the append's own UPDATE of the session row
(`MessageRepository.reserve`), as `memory_pending` is for fact extraction:

* `rolling_pending`: true when the session's profile is in rolling mode (and neither it
  nor the session is `temp-…`) and the summary has not read its newest messages; the job
  reads its candidates from the partial index `ix_sessions_rolling_pending`
  (`last_active WHERE rolling_pending`) instead of joining every session with
  `rolling_summaries`, and clears the mark when a session is up to date (or parked after
  `ROLLING_SUMMARY_MAX_ATTEMPTS` failures, until its next append).
* `raw_index_pending`: true after any append; the idle raw-index pass reads the quiet
  ones from `ix_sessions_raw_index_pending` instead of joining every session with
  `raw_index_state`, and clears the mark once the session is covered.

`rolling_summaries.next_attempt_at`: a failed chunk's session is not retried before it
(exponential backoff, `ROLLING_SUMMARY_RETRY_MAX_SECONDS`).

New nullable columns: no table rewrite. The backfill marks what the old candidate
queries would have found: sessions the rolling job has a row for and had work in
(activity after its last look, a failure, a summary without a cursor) — a migration
does not know the profiles, and a session the job never looked at is marked by its next
append — and sessions with messages the raw index does not cover. The indexes are built
like the other indexes of the revisions (in the migration's transaction).

Revision ID: b1c2d3e4f5a6
Revises: e3f4a5b6c7d8
Create Date: 2026-12-05 06:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "b1c2d3e4f5a6"
down_revision: str | None = "e3f4a5b6c7d8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("rolling_pending", sa.Boolean()))
    op.add_column("sessions", sa.Column("raw_index_pending", sa.Boolean()))
    op.add_column("rolling_summaries", sa.Column("next_attempt_at", sa.DateTime(timezone=True)))
    op.execute(
        """
        UPDATE sessions s SET rolling_pending = true
        FROM rolling_summaries r
        WHERE r.session_id = s.id AND r.user_id = s.user_id AND s.next_seq > 0
          AND s.profile_id NOT LIKE 'temp-%' AND coalesce(s.name, '') NOT LIKE 'temp-%'
          AND (s.last_active > r.updated_at OR r.attempts > 0
               OR (r.cursor_seq IS NULL AND r.cursor_at IS NULL AND r.summary IS NOT NULL))
        """
    )
    op.execute(
        """
        UPDATE sessions s SET raw_index_pending = true
        WHERE s.next_seq > 0 AND NOT EXISTS (
            SELECT 1 FROM raw_index_state r
            WHERE r.session_id = s.id AND r.user_id = s.user_id
              AND r.covered @> int8range(0, s.next_seq))
        """
    )
    op.create_index(
        "ix_sessions_rolling_pending",
        "sessions",
        ["last_active"],
        postgresql_where=sa.text("rolling_pending"),
    )
    op.create_index(
        "ix_sessions_raw_index_pending",
        "sessions",
        ["last_active"],
        postgresql_where=sa.text("raw_index_pending"),
    )


def downgrade() -> None:
    op.drop_index("ix_sessions_raw_index_pending", table_name="sessions")
    op.drop_index("ix_sessions_rolling_pending", table_name="sessions")
    op.drop_column("rolling_summaries", "next_attempt_at")
    op.drop_column("sessions", "raw_index_pending")
    op.drop_column("sessions", "rolling_pending")
