"""memory_chunk_counts.version: bumped by every statement that adds or removes a user's chunks

The raw search remembers, per process, the chunks holding each of a user's most common
terms (those found in `TERM_CAP` chunks or more: their GIN bitmap is the costly part of
a lookup, ~1.5 ms for a prefix with 10k postings). `version` tells it whether the user's
chunks changed since: the same triggers that keep `chunks` set it from a sequence on
every statement, so it never repeats — not even for a user deleted and created again.

Revision ID: 8c4e2a7d5b19
Revises: 5f1d7c3a9e42
Create Date: 2026-12-01 16:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.db.migrate import pinned_search_path

revision: str = "8c4e2a7d5b19"
down_revision: str | None = "5f1d7c3a9e42"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEQUENCE = "navi_chunk_count_versions"


def _functions(versioned: bool) -> None:
    cols, vals, bump = "", "", ""
    pinned = pinned_search_path(op.get_bind())
    if versioned:
        cols, vals = ", version", f", nextval('{SEQUENCE}')"
        bump = f", version = nextval('{SEQUENCE}')"
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION navi_count_chunks_added() RETURNS trigger LANGUAGE plpgsql
        {pinned} AS $$
        BEGIN
            INSERT INTO memory_chunk_counts AS c (user_id, chunks{cols})
            SELECT user_id, count(*){vals} FROM navi_added WHERE user_id IS NOT NULL
            GROUP BY user_id
            ON CONFLICT (user_id) DO UPDATE SET chunks = c.chunks + EXCLUDED.chunks{bump};
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION navi_count_chunks_removed() RETURNS trigger LANGUAGE plpgsql
        {pinned} AS $$
        BEGIN
            UPDATE memory_chunk_counts AS c SET chunks = c.chunks - d.n{bump}
            FROM (SELECT user_id, count(*) AS n FROM navi_removed
                  WHERE user_id IS NOT NULL GROUP BY user_id) AS d
            WHERE c.user_id = d.user_id;
            RETURN NULL;
        END $$
        """
    )


def upgrade() -> None:
    op.execute(f"CREATE SEQUENCE {SEQUENCE}")
    op.add_column(
        "memory_chunk_counts",
        sa.Column("version", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.execute(f"UPDATE memory_chunk_counts SET version = nextval('{SEQUENCE}')")
    _functions(versioned=True)


def downgrade() -> None:
    _functions(versioned=False)
    op.drop_column("memory_chunk_counts", "version")
    op.execute(f"DROP SEQUENCE {SEQUENCE}")
