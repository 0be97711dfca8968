"""The rolling summary's cursor is a sequence number

`rolling_summaries.cursor_seq`: the sequence number of the last summarised message. The
job reads the messages after it (`sequence_number > cursor_seq`), so a client's clock
(a `created_at` in the future, or in the past) no longer decides what is summarised.
`cursor_at` stays, as the time of that message (information only).

One new nullable column: no table rewrite. Existing rows keep `cursor_seq` NULL; the job
derives it from `cursor_at` the next time it looks at the session (the newest message
at or before that time).

Revision ID: b5d9e1f3a7c2
Revises: f1a2b3c4d5e6
Create Date: 2026-12-05 02:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "b5d9e1f3a7c2"
down_revision: str | None = "f1a2b3c4d5e6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("rolling_summaries", sa.Column("cursor_seq", sa.BigInteger()))


def downgrade() -> None:
    op.drop_column("rolling_summaries", "cursor_seq")
