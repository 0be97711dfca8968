"""Forget jobs, and users marked for deletion

* `forget_jobs` (new): one forget of a text, done batch by batch over the user's
  sessions, resumable from its row (app/domain/forget/runner.py). Keyed by
  `(user_id, id)`, `user_id` → `navi_users.id` ON DELETE CASCADE. On Citus it is
  distributed by `user_id`, co-located with `sessions` (a reference table, `navi_users`,
  may be referenced by a distributed one).
* `navi_users.deleting_since` (new, nullable: no rewrite): set when an admin deletes the
  user; their tokens stop authenticating and the deletion goes on batch by batch
  (app/domain/auth/deletion.py). On Citus the column is added on the reference table's
  every copy by the DDL propagation.

Revision ID: e3f4a5b6c7d8
Revises: a9b8c7d6e5f4
Create Date: 2026-12-05 05:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op
from app.db.citus import has_citus

revision: str = "e3f4a5b6c7d8"
down_revision: str | None = "a9b8c7d6e5f4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("navi_users", sa.Column("deleting_since", sa.DateTime(timezone=True)))
    op.create_table(
        "forget_jobs",
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("state", sa.String(16), server_default="running", nullable=False),
        sa.Column("dry_run", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("text", sa.Text()),
        sa.Column("text_sha256", sa.String(16), nullable=False),
        sa.Column("via", sa.String(16), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("after_session", sa.Uuid()),
        sa.Column("sessions_done", sa.Integer(), server_default="0", nullable=False),
        sa.Column("sessions_total", sa.Integer(), server_default="0", nullable=False),
        sa.Column("stores_done", sa.Boolean(), server_default="false", nullable=False),
        sa.Column(
            "changed",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column(
            "files",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'"),
            nullable=False,
        ),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("heartbeat", sa.Double(), server_default="0", nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_forget_jobs_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", "id", name=op.f("pk_forget_jobs")),
    )
    if has_citus(op.get_bind()):
        op.execute("SET LOCAL lock_timeout = '10s'")
        op.execute(
            "SELECT create_distributed_table('forget_jobs', 'user_id', colocate_with => 'sessions')"
        )


def downgrade() -> None:
    op.drop_table("forget_jobs")
    op.drop_column("navi_users", "deleting_since")
