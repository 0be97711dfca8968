"""Per-user message-storage quota: `sessions.message_bytes`

Each append adds the bytes of its messages (text, thinking, tool calls, pasted images:
`app/domain/sessions/quota.py`) to its session's row in the UPDATE it already makes
(`MessageRepository.reserve`); a user's usage is the sum over their sessions' rows (the
`sessions (user_id, …)` index), checked against USER_MESSAGE_STORAGE_MB.

A NOT NULL column with a constant default: no table rewrite. The backfill counts the
stored messages (hot and archived) of every session once, in the same measure as closely
as SQL gives it (the JSON columns as their text); on a large database it reads every
message once — run it at a quiet time (docs/operations.md).

Revision ID: a1b2c3d4e5f7
Revises: d4e5f6a7b8c9
Create Date: 2026-12-05 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "a1b2c3d4e5f7"
down_revision: str | None = "d4e5f6a7b8c9"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BYTES = (
    "octet_length(content) + coalesce(octet_length(thinking), 0)"
    " + coalesce(octet_length(tool_calls::text), 0) + coalesce(octet_length(images::text), 0)"
)


def upgrade() -> None:
    op.add_column(
        "sessions",
        sa.Column("message_bytes", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.execute(
        f"""
        UPDATE sessions s SET message_bytes = m.bytes
        FROM (
            SELECT user_id, session_id, sum(bytes) AS bytes FROM (
                SELECT user_id, session_id, {_BYTES} AS bytes FROM session_messages
                UNION ALL
                SELECT user_id, session_id, {_BYTES} AS bytes FROM session_messages_archive
            ) x GROUP BY user_id, session_id
        ) m
        WHERE s.user_id = m.user_id AND s.id = m.session_id
        """
    )


def downgrade() -> None:
    op.drop_column("sessions", "message_bytes")
