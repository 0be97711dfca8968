"""The chunks' search lexemes stored (`memory_chunks.search_terms`), not recomputed

The term lookup of the raw search names its user inside its fenced subquery (the tenant
key, migration f2b8c6d4a1e7: on Citus the lookup then stays on the user's shard). For a
user with few chunks the planner then reads the user's btree range and filters each
row by `navi_chunk_user_tsv(...) @@ query`, recomputing the lexemes of every chunk it
reads — about 1 ms per 3,000-character chunk, per term of the query — where the GIN
index answered from its postings before. The planner charges that recomputation to the
GIN path too (as a recheck), so no COST on the function changes its choice. Stored,
the filter is a plain `tsvector @@ tsquery` (microseconds), whichever index the planner
picks; the GIN index is rebuilt on the column.

Adding the column rewrites `memory_chunks` and computes the lexemes of every chunk once
(~1 ms each: ~2 minutes per 100k chunks on 2 cores); the GIN build then reads the
column.

Revision ID: e4b7a2c9d1f3
Revises: d8f3b2a6c4e1
Create Date: 2026-12-02 15:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "e4b7a2c9d1f3"
down_revision: str | None = "d8f3b2a6c4e1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

USER_TSV = "navi_chunk_user_tsv(user_id, content, breadcrumbs)"


def upgrade() -> None:
    op.execute(
        "ALTER TABLE memory_chunks ADD COLUMN search_terms tsvector "
        f"GENERATED ALWAYS AS ({USER_TSV}) STORED"
    )
    op.execute("DROP INDEX ix_memory_chunks_user_terms")
    op.execute("CREATE INDEX ix_memory_chunks_user_terms ON memory_chunks USING gin (search_terms)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_memory_chunks_user_terms")
    op.execute("ALTER TABLE memory_chunks DROP COLUMN search_terms")
    op.execute(f"CREATE INDEX ix_memory_chunks_user_terms ON memory_chunks USING gin ({USER_TSV})")
