"""raw_index_state: which sequence numbers of each session the raw index covers

Until now only compression wrote raw chunks, so a session that never filled its window
was never findable by `memory_search`. The idle-session job indexes the rest; this table
is the one record of what is indexed, shared by both writers. Existing sessions start
with the turn ranges of the chunks they already have.

Revision ID: a3f9d2c7e815
Revises: 8c4e2a7d5b19
Create Date: 2026-12-01 22:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import INT8MULTIRANGE

from alembic import op

revision: str = "a3f9d2c7e815"
down_revision: str | None = "8c4e2a7d5b19"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "raw_index_state",
        sa.Column(
            "session_id",
            sa.Uuid(),
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "covered",
            INT8MULTIRANGE(),
            nullable=False,
            server_default=sa.text("'{}'::int8multirange"),
        ),
        sa.Column("indexed_at", sa.DateTime(timezone=True)),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text()),
    )
    op.execute(
        """
        INSERT INTO raw_index_state (session_id, covered, indexed_at)
        SELECT c.session_id, range_agg(int8range(c.start_seq, c.end_seq, '[]')), max(c.created_at)
        FROM memory_chunks c JOIN sessions s ON s.id = c.session_id
        GROUP BY c.session_id
        """
    )


def downgrade() -> None:
    op.drop_table("raw_index_state")
