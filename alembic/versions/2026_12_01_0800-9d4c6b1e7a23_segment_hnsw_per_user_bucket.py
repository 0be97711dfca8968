"""segment vectors: one HNSW graph per user bucket instead of one for every user

`ix_memory_chunk_vectors_embedding_hnsw` (one graph over every user's segments) is
replaced by 16 partial HNSW indexes `ix_memory_chunk_vectors_hnsw_b00` … `_b15`, each
`WHERE navi_user_bucket(user_id) = n`, where `navi_user_bucket` is 4 bits of
md5(user_id) (`chunk_repository.user_bucket` computes the same in Python). A search
names its user's bucket as a literal, so the planner walks the one graph holding that
user: a graph 1/16 the size, in which the user's share of the vectors is ~16× larger —
a filtered walk visits far fewer other users' vectors before it finds enough of the
user's. Each write updates the one index whose predicate holds.

The build reads the table once per bucket; the graphs together take about as long as
the single one did.

Revision ID: 9d4c6b1e7a23
Revises: 3e8a1f5c2b90
Create Date: 2026-12-01 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "9d4c6b1e7a23"
down_revision: str | None = "3e8a1f5c2b90"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BUCKETS = 16  # app.db.models.memory.SEGMENT_BUCKETS at this revision
HNSW = {
    "postgresql_using": "hnsw",
    "postgresql_with": {"m": 16, "ef_construction": 64},
    "postgresql_ops": {"embedding": "vector_cosine_ops"},
}


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute(
        "CREATE OR REPLACE FUNCTION navi_user_bucket(user_id text) RETURNS integer "
        "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS "
        f"$$ SELECT ('x' || left(md5(coalesce(user_id, '')), 8))::bit(32)::integer "
        f"& {BUCKETS - 1} $$"
    )
    op.drop_index(
        "ix_memory_chunk_vectors_embedding_hnsw",
        table_name="memory_chunk_vectors",
        postgresql_using="hnsw",
    )
    for n in range(BUCKETS):
        op.create_index(
            f"ix_memory_chunk_vectors_hnsw_b{n:02d}",
            "memory_chunk_vectors",
            ["embedding"],
            unique=False,
            postgresql_where=sa.text(f"navi_user_bucket(user_id) = {n}"),
            **HNSW,
        )


def downgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    for n in range(BUCKETS):
        op.drop_index(
            f"ix_memory_chunk_vectors_hnsw_b{n:02d}",
            table_name="memory_chunk_vectors",
            postgresql_using="hnsw",
        )
    op.create_index(
        "ix_memory_chunk_vectors_embedding_hnsw",
        "memory_chunk_vectors",
        ["embedding"],
        unique=False,
        **HNSW,
    )
    op.execute("DROP FUNCTION IF EXISTS navi_user_bucket(text)")
