"""The records forgets leave: `forgotten_texts`

* `forgotten_texts` (new): one row per user, `entries` the hashes of the texts they
  forgot (never the text: app/domain/kernel/forgotten.py), checked by every writer of
  derived text in its commit transaction. `user_id` → `navi_users.id` ON DELETE CASCADE.
  On Citus it is distributed by `user_id`, co-located with `sessions`.

Revision ID: c5d6e7f8a9b0
Revises: a1b2c3d4e5f7
Create Date: 2026-12-05 07:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op
from app.db.citus import has_citus

revision: str = "c5d6e7f8a9b0"
down_revision: str | None = "a1b2c3d4e5f7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "forgotten_texts",
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column(
            "entries",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'"),
            nullable=False,
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_forgotten_texts_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_forgotten_texts")),
    )
    if has_citus(op.get_bind()):
        op.execute("SET LOCAL lock_timeout = '10s'")
        op.execute(
            "SELECT create_distributed_table('forgotten_texts', 'user_id',"
            " colocate_with => 'sessions')"
        )


def downgrade() -> None:
    op.drop_table("forgotten_texts")
