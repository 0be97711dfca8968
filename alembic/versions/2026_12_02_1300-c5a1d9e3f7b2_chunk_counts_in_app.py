"""`memory_chunk_counts` kept by the app instead of statement-level triggers

Citus runs no statement-level trigger (with or without transition tables) on a
distributed table, and the counts must work the same on one server and on the
cluster. The repository that inserts chunks now adds what it wrote to the user's row
in the same transaction, and the one statement that deletes chunks (a session's
deletion) subtracts what it deleted; both bump `version` from the same sequence. A
user's deletion still takes the row with it (its foreign key to `navi_users`).

The counts are recomputed here, each with a new version, so nothing drifts across the
switch.

Revision ID: c5a1d9e3f7b2
Revises: f2b8c6d4a1e7
Create Date: 2026-12-02 13:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from app.db.migrate import pinned_search_path

revision: str = "c5a1d9e3f7b2"
down_revision: str | None = "f2b8c6d4a1e7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEQUENCE = "navi_chunk_count_versions"


def _recount() -> None:
    op.execute("DELETE FROM memory_chunk_counts")
    op.execute(
        "INSERT INTO memory_chunk_counts (user_id, chunks, version)"
        f" SELECT user_id, count(*), nextval('{SEQUENCE}') FROM memory_chunks GROUP BY user_id"
    )


def upgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS memory_chunks_count_removed ON memory_chunks")
    op.execute("DROP TRIGGER IF EXISTS memory_chunks_count_added ON memory_chunks")
    op.execute("DROP FUNCTION IF EXISTS navi_count_chunks_removed()")
    op.execute("DROP FUNCTION IF EXISTS navi_count_chunks_added()")
    _recount()


def downgrade() -> None:
    pinned = pinned_search_path(op.get_bind())
    op.execute(
        f"""
        CREATE FUNCTION navi_count_chunks_added() RETURNS trigger LANGUAGE plpgsql
        {pinned} AS $$
        BEGIN
            INSERT INTO memory_chunk_counts AS c (user_id, chunks, version)
            SELECT user_id, count(*), nextval('{SEQUENCE}') FROM navi_added GROUP BY user_id
            ON CONFLICT (user_id) DO UPDATE
            SET chunks = c.chunks + EXCLUDED.chunks, version = nextval('{SEQUENCE}');
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION navi_count_chunks_removed() RETURNS trigger LANGUAGE plpgsql
        {pinned} AS $$
        BEGIN
            UPDATE memory_chunk_counts AS c
            SET chunks = c.chunks - d.n, version = nextval('{SEQUENCE}')
            FROM (SELECT user_id, count(*) AS n FROM navi_removed GROUP BY user_id) AS d
            WHERE c.user_id = d.user_id;
            RETURN NULL;
        END $$
        """
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
    _recount()
