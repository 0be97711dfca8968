"""segment vectors: 64 user buckets (HNSW graphs) instead of 16

`navi_user_bucket` keeps 6 bits of md5(user_id) instead of 4, and the 16 partial HNSW
indexes `ix_memory_chunk_vectors_hnsw_b00` … `_b15` become 64 (`_b00` … `_b63`), each
`WHERE navi_user_bucket(user_id) = n`. A filtered walk's cost grows with the share of
*other* users' vectors in the graph it walks: at bench-search's 100k chunks a user with
1,285 chunks held 10 % of its 16-bucket graph and its walk took ~15 ms (an exact scan of
its 8k segments ~9 ms); in its 64-bucket graph it holds 82 % and the walk takes ~3 ms.

The old indexes are dropped before the function changes (an index whose predicate
function changes its results would hold the wrong rows), then the new ones are built:
each build reads the table once, the graphs together about as long as the 16 did. Until
the migration commits, searches keep the old graphs; it holds an exclusive lock on
`memory_chunk_vectors` while it runs (writes of new chunks wait).

Revision ID: 5f1d7c3a9e42
Revises: e7c2a4f9b1d3
Create Date: 2026-12-01 15:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "5f1d7c3a9e42"
down_revision: str | None = "e7c2a4f9b1d3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_BUCKETS = 16
NEW_BUCKETS = 64  # app.db.models.memory.SEGMENT_BUCKETS at this revision
HNSW = {
    "postgresql_using": "hnsw",
    "postgresql_with": {"m": 16, "ef_construction": 64},
    "postgresql_ops": {"embedding": "vector_cosine_ops"},
}


def _rebucket(old: int, new: int) -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    for n in range(old):
        op.drop_index(
            f"ix_memory_chunk_vectors_hnsw_b{n:02d}",
            table_name="memory_chunk_vectors",
            postgresql_using="hnsw",
        )
    op.execute(
        "CREATE OR REPLACE FUNCTION navi_user_bucket(user_id text) RETURNS integer "
        "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS "
        f"$$ SELECT ('x' || left(md5(coalesce(user_id, '')), 8))::bit(32)::integer "
        f"& {new - 1} $$"
    )
    for n in range(new):
        op.create_index(
            f"ix_memory_chunk_vectors_hnsw_b{n:02d}",
            "memory_chunk_vectors",
            ["embedding"],
            unique=False,
            postgresql_where=sa.text(f"navi_user_bucket(user_id) = {n}"),
            **HNSW,
        )


def upgrade() -> None:
    _rebucket(OLD_BUCKETS, NEW_BUCKETS)


def downgrade() -> None:
    _rebucket(NEW_BUCKETS, OLD_BUCKETS)
