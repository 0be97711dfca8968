"""Imported conversations keep their origin: `sessions.import_source` / `import_source_id`

A chat export's conversation (ChatGPT, Claude, JSON Lines: app/domain/chat_import)
becomes a session; its source and its id there are kept so that importing the same
export again finds the session (and tops it up) instead of adding a copy. The unique
index leads with `user_id` (the tenant key: Citus requires it in a unique index) and is
partial: the sessions created by the API have no source and cost it nothing. New
nullable columns: no table rewrite.

Revision ID: f7e6d5c4b3a2
Revises: c5d6e7f8a9b0
Create Date: 2026-12-05 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "f7e6d5c4b3a2"
down_revision: str | None = "c5d6e7f8a9b0"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("import_source", sa.Text()))
    op.add_column("sessions", sa.Column("import_source_id", sa.Text()))
    op.create_index(
        "ux_sessions_import_source",
        "sessions",
        ["user_id", "import_source", "import_source_id"],
        unique=True,
        postgresql_where=sa.text("import_source_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ux_sessions_import_source", table_name="sessions")
    op.drop_column("sessions", "import_source_id")
    op.drop_column("sessions", "import_source")
