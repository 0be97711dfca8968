"""raw chunk search: punctuation-split text index, one vector per segment

* `navi_chunk_search_text(content, breadcrumbs)`: an IMMUTABLE function — the chunk's
  content and breadcrumbs with ASCII punctuation turned into spaces — and the chunks'
  text index rebuilt on `to_tsvector('simple', navi_chunk_search_text(...))`: paths, file
  names, tickets and snake_case identifiers are then indexed as the words the search's
  query terms are split into (the plain `to_tsvector('simple', content)` kept
  `/etc/nginx/navi.conf` as one lexeme no query term ever equals).
* `memory_chunk_vectors`: one embedding per segment of a chunk (whole lines up to about
  800 chars, which a small embedding model reads completely). Chunks that already have a
  vector get one segment covering their whole content with that vector, so they are
  searched as before; `make reembed` segments chunks it embeds.

Revision ID: 7b3f9c2d4e61
Revises: 5c1e7d2b9a40
Create Date: 2026-11-29 21:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector

from alembic import op
from app.config import get_settings

revision: str = "7b3f9c2d4e61"
down_revision: str | None = "5c1e7d2b9a40"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EMBEDDING_DIM = get_settings().vector_dim
PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
SEARCH_TSV = "to_tsvector('simple'::regconfig, navi_chunk_search_text(content, breadcrumbs))"
OLD_TSV = "to_tsvector('simple', content)"


def _function_sql() -> str:
    # plpgsql, not an inlinable SQL function, with a high COST: the planner then answers
    # `… @@ query` from the GIN index instead of re-parsing every candidate row's text
    # (about 1 ms per 4,000-char chunk), even for a user with a handful of chunks.
    punct = PUNCTUATION.replace("'", "''")
    spaces = " " * len(PUNCTUATION)
    return (
        "CREATE OR REPLACE FUNCTION navi_chunk_search_text(content text, breadcrumbs text[]) "
        "RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE COST 10000 AS $$ BEGIN "
        f"RETURN translate(content || ' ' || array_to_string(breadcrumbs, ' '), '{punct}', "
        f"'{spaces}'); END $$"
    )


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute(_function_sql())
    op.drop_index(
        "ix_memory_chunks_content_fts", table_name="memory_chunks", postgresql_using="gin"
    )
    op.create_index(
        "ix_memory_chunks_content_fts",
        "memory_chunks",
        [sa.literal_column(SEARCH_TSV)],
        unique=False,
        postgresql_using="gin",
    )
    op.create_table(
        "memory_chunk_vectors",
        sa.Column("chunk_id", sa.Uuid(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("start_char", sa.Integer(), nullable=False),
        sa.Column("end_char", sa.Integer(), nullable=False),
        sa.Column("embedding", Vector(EMBEDDING_DIM), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["memory_chunks.id"],
            name=op.f("fk_memory_chunk_vectors_chunk_id_memory_chunks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("chunk_id", "part", name=op.f("pk_memory_chunk_vectors")),
    )
    op.execute(
        "INSERT INTO memory_chunk_vectors "
        "(chunk_id, part, user_id, session_id, start_char, end_char, embedding) "
        "SELECT id, 0, user_id, session_id, 0, length(content), embedding "
        "FROM memory_chunks WHERE embedding IS NOT NULL"
    )
    op.create_index(
        "ix_memory_chunk_vectors_user_session",
        "memory_chunk_vectors",
        ["user_id", "session_id"],
        unique=False,
    )
    op.create_index(
        "ix_memory_chunk_vectors_embedding_hnsw",
        "memory_chunk_vectors",
        ["embedding"],
        unique=False,
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )


def downgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.drop_index(
        "ix_memory_chunk_vectors_embedding_hnsw",
        table_name="memory_chunk_vectors",
        postgresql_using="hnsw",
    )
    op.drop_index("ix_memory_chunk_vectors_user_session", table_name="memory_chunk_vectors")
    op.drop_table("memory_chunk_vectors")
    op.drop_index(
        "ix_memory_chunks_content_fts", table_name="memory_chunks", postgresql_using="gin"
    )
    op.create_index(
        "ix_memory_chunks_content_fts",
        "memory_chunks",
        [sa.literal_column(OLD_TSV)],
        unique=False,
        postgresql_using="gin",
    )
    op.execute("DROP FUNCTION IF EXISTS navi_chunk_search_text(text, text[])")
