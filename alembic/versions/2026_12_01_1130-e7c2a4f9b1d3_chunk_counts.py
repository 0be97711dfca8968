"""Each user's raw chunk count, kept by triggers (`memory_chunk_counts`).

A raw search needs the number of the user's chunks (the N of its IDF, and whether the
segments are compared exactly or through the HNSW graph) before its lookups start:
counted, that is an index-only scan of the user's entries — 1.4 ms at the benchmark's
heaviest user (10k chunks), on every search's critical path. Read by key it is ~0.

Statement-level triggers with transition tables keep the counts: one upsert per insert
statement (COPY included) and one update per delete statement (a session or user
deleted cascades here too), grouped by user. Chunks without a user are not counted.
Two transactions adding chunks for the same user queue on that user's row until the
first commits (chunks are written at the end of a compression). TRUNCATE does not fire
them: `memory_chunk_counts` would then need the same TRUNCATE. The functions resolve the
table with the migration's `search_path`, whatever the caller's.

Revision ID: e7c2a4f9b1d3
Revises: b6e2d8f41c57
Create Date: 2026-12-01 11:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.db.migrate import pinned_search_path

revision: str = "e7c2a4f9b1d3"
down_revision: str | None = "b6e2d8f41c57"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "memory_chunk_counts",
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("chunks", sa.BigInteger(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["navi_users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id"),
    )
    op.execute(
        "INSERT INTO memory_chunk_counts (user_id, chunks) SELECT user_id, count(*)"
        " FROM memory_chunks WHERE user_id IS NOT NULL GROUP BY user_id"
    )
    op.execute(
        """
        CREATE FUNCTION navi_count_chunks_added() RETURNS trigger LANGUAGE plpgsql
        {pinned} AS $$
        BEGIN
            INSERT INTO memory_chunk_counts AS c (user_id, chunks)
            SELECT user_id, count(*) FROM navi_added WHERE user_id IS NOT NULL GROUP BY user_id
            ON CONFLICT (user_id) DO UPDATE SET chunks = c.chunks + EXCLUDED.chunks;
            RETURN NULL;
        END $$
        """.replace("{pinned}", pinned_search_path(op.get_bind()))
    )
    op.execute(
        """
        CREATE FUNCTION navi_count_chunks_removed() RETURNS trigger LANGUAGE plpgsql
        {pinned} AS $$
        BEGIN
            UPDATE memory_chunk_counts AS c SET chunks = c.chunks - d.n
            FROM (SELECT user_id, count(*) AS n FROM navi_removed
                  WHERE user_id IS NOT NULL GROUP BY user_id) AS d
            WHERE c.user_id = d.user_id;
            RETURN NULL;
        END $$
        """.replace("{pinned}", pinned_search_path(op.get_bind()))
    )
    op.execute(
        "CREATE TRIGGER memory_chunks_count_added AFTER INSERT ON memory_chunks"
        " REFERENCING NEW TABLE AS navi_added FOR EACH STATEMENT"
        " EXECUTE FUNCTION navi_count_chunks_added()"
    )
    op.execute(
        "CREATE TRIGGER memory_chunks_count_removed AFTER DELETE ON memory_chunks"
        " REFERENCING OLD TABLE AS navi_removed FOR EACH STATEMENT"
        " EXECUTE FUNCTION navi_count_chunks_removed()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS memory_chunks_count_removed ON memory_chunks")
    op.execute("DROP TRIGGER IF EXISTS memory_chunks_count_added ON memory_chunks")
    op.execute("DROP FUNCTION IF EXISTS navi_count_chunks_removed()")
    op.execute("DROP FUNCTION IF EXISTS navi_count_chunks_added()")
    op.drop_table("memory_chunk_counts")
