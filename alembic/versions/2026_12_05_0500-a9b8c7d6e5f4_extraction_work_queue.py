"""Fact extraction finds its work through an index: the append marks the session

`sessions.memory_pending` (NULL: no user message yet; true: activity the extraction has
not read; false: read, or parked after `MEMORY_EXTRACTION_MAX_ATTEMPTS` failures) is set
by the append's own UPDATE of the session row (`MessageRepository.reserve`). The
extraction reads its candidates from the partial index `ix_sessions_memory_pending`
(`last_active WHERE memory_pending`): a range scan of the pending sessions, no longer a
join of every session with `session_memory_state`.

A new nullable column: no table rewrite. The backfill marks the existing sessions with a
user message, pending unless their extraction state is as new as their last activity
(what the old candidate query compared): one UPDATE of those sessions. The index is
built like the other indexes of the revisions (in the migration's transaction).

Revision ID: a9b8c7d6e5f4
Revises: c7d8e9f0a1b2
Create Date: 2026-12-05 05:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "a9b8c7d6e5f4"
down_revision: str | None = "c7d8e9f0a1b2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("memory_pending", sa.Boolean()))
    op.execute(
        """
        UPDATE sessions s SET memory_pending = NOT EXISTS (
            SELECT 1 FROM session_memory_state m
            WHERE m.session_id = s.id AND m.user_id = s.user_id
              AND m.extracted_at >= s.last_active)
        WHERE EXISTS (SELECT 1 FROM session_messages x
                      WHERE x.session_id = s.id AND x.user_id = s.user_id AND x.role = 'user')
           OR EXISTS (SELECT 1 FROM session_messages_archive x
                      WHERE x.session_id = s.id AND x.user_id = s.user_id AND x.role = 'user')
        """
    )
    op.create_index(
        "ix_sessions_memory_pending",
        "sessions",
        ["last_active"],
        postgresql_where=sa.text("memory_pending"),
    )


def downgrade() -> None:
    op.drop_index("ix_sessions_memory_pending", table_name="sessions")
    op.drop_column("sessions", "memory_pending")
