"""Fact versions: every value a fact held, and when it was true

* `fact_versions` (new): one row per value of a fact (`fact_id`, with its category and
  key: no foreign key to the fact, the versions outlive a delete), its source,
  confidence, session (and message, when known), `valid_from` / `valid_to` (NULL: the
  current value), the fact's `expires_at` while current, and `recorded_at`. Keyed by
  `(id, user_id)`, `user_id` → `navi_users.id` ON DELETE CASCADE; at most one current
  version per fact (the partial unique index `uq_fact_versions_current`). On Citus it is
  distributed by `user_id`, co-located with `sessions`, before it is filled.
* The backfill gives every existing fact one version: its value as it is now, valid
  from its `updated_at` (the last write: an older value is not known any more), closed
  at `expires_at` when that has passed, its source session kept.

Downgrade drops the table (the facts themselves are untouched by both directions).

Revision ID: d4e5f6a7b8c9
Revises: b1c2d3e4f5a6
Create Date: 2026-12-05 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.db.citus import has_citus

revision: str = "d4e5f6a7b8c9"
down_revision: str | None = "b1c2d3e4f5a6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fact_versions",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("fact_id", sa.BigInteger(), nullable=False),
        sa.Column("category", sa.String(100), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("confidence", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Uuid()),
        sa.Column("message_seq", sa.BigInteger()),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_to", sa.DateTime(timezone=True)),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
        sa.Column(
            "recorded_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_fact_versions_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", "user_id", name=op.f("pk_fact_versions")),
    )
    op.create_index("ix_fact_versions_user_fact", "fact_versions", ["user_id", "fact_id", "id"])
    op.create_index("ix_fact_versions_user_valid_from", "fact_versions", ["user_id", "valid_from"])
    op.create_index(
        "uq_fact_versions_current",
        "fact_versions",
        ["user_id", "fact_id"],
        unique=True,
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    if has_citus(op.get_bind()):
        op.execute("SET LOCAL lock_timeout = '10s'")
        op.execute(
            "SELECT create_distributed_table('fact_versions', 'user_id',"
            " colocate_with => 'sessions')"
        )
    op.execute(
        """
        INSERT INTO fact_versions (user_id, fact_id, category, key, value, source, confidence,
                                   session_id, valid_from, valid_to, expires_at)
        SELECT user_id, id, category, key, value, source, confidence, source_session_id,
               updated_at,
               CASE WHEN expires_at <= now() THEN expires_at END,
               expires_at
        FROM memory_facts
        """
    )


def downgrade() -> None:
    op.drop_table("fact_versions")
