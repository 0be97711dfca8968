"""Planning logs move out of the `sessions` row into `session_planning_entries`

`sessions.planning_logs` held the whole log (up to 200 entries of 256 KB) in the row:
every read of a session (share links included) detoasted it, and every new entry
rewrote it. Now each entry is a row of `session_planning_entries`, keyed by
`(session_id, seq, user_id)`, with its size as JSON text in the generated column
`bytes` (the per-session byte cap counts it). `sessions.next_planning_seq` is the next
entry's `seq`.

The upgrade copies every array, an element per row in its order (`seq` 0, 1, …;
`created_at` is the session's `last_active`: the entries carried no time), sets
`next_planning_seq`, then drops the column. With `citus` the new table is distributed by
`user_id`, co-located with `sessions` (its foreign key added once both are distributed),
before the rows are copied. The downgrade rebuilds the arrays, in `seq` order.

The copy reads every session's log once: on a large database run it in a maintenance
window.

Revision ID: c7d8e9f0a1b2
Revises: b5d9e1f3a7c2
Create Date: 2026-12-05 05:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from alembic import op
from app.db.citus import has_citus

revision: str = "c7d8e9f0a1b2"
down_revision: str | None = "b5d9e1f3a7c2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "session_planning_entries"
FK = "fk_session_planning_entries_session_id_sessions"


def upgrade() -> None:
    conn = op.get_bind()
    citus = has_citus(conn)
    if citus:
        # one connection per worker: the table is created, distributed and filled in
        # this transaction
        op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.add_column(
        "sessions",
        sa.Column("next_planning_seq", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.create_table(
        TABLE,
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("entry", JSONB(), nullable=False),
        sa.Column(
            "bytes",
            sa.Integer(),
            sa.Computed("octet_length(CAST(entry AS text))", persisted=True),
            nullable=False,
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("session_id", "seq", "user_id", name="pk_session_planning_entries"),
    )
    if citus:  # Citus distributes no local table that references a distributed one
        op.execute(
            f"SELECT create_distributed_table('{TABLE}', 'user_id', colocate_with => 'sessions')"
        )
    op.create_foreign_key(
        FK, TABLE, "sessions", ["session_id", "user_id"], ["id", "user_id"], ondelete="CASCADE"
    )
    op.execute(
        f"""
        INSERT INTO {TABLE} (session_id, user_id, seq, entry, created_at)
        SELECT s.id, s.user_id, t.i - 1, t.e, s.last_active
        FROM sessions s, jsonb_array_elements(s.planning_logs) WITH ORDINALITY AS t(e, i)
        WHERE jsonb_typeof(s.planning_logs) = 'array'
        """
    )
    op.execute(
        "UPDATE sessions SET next_planning_seq = jsonb_array_length(planning_logs)"
        " WHERE jsonb_typeof(planning_logs) = 'array' AND planning_logs <> '[]'::jsonb"
    )
    op.drop_column("sessions", "planning_logs")


def downgrade() -> None:
    if has_citus(op.get_bind()):
        op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.add_column(
        "sessions",
        sa.Column("planning_logs", JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
    )
    op.execute(
        f"""
        UPDATE sessions s SET planning_logs = a.logs
        FROM (
            SELECT session_id, user_id, jsonb_agg(entry ORDER BY seq) AS logs
            FROM {TABLE} GROUP BY session_id, user_id
        ) a
        WHERE a.session_id = s.id AND a.user_id = s.user_id
        """
    )
    op.drop_table(TABLE)
    op.drop_column("sessions", "next_planning_seq")
