"""raw chunk search: user-scoped lexemes in the text index; drop the unread chunk HNSW

* `ix_memory_chunks_content_fts` (`to_tsvector('simple', navi_chunk_search_text(...))`)
  is replaced by `ix_memory_chunks_user_terms` on
  `navi_chunk_user_tsv(user_id, content, breadcrumbs)`: the same lexemes, each prefixed
  with an 8-hex-digit key of the chunk's user (`navi_user_lexeme_key`, the head of
  md5(user_id)). A query term is looked up through `navi_user_tsquery(user_id, query)`,
  which puts the same key in front of every lexeme of the query: a prefix term
  (`kato:*`) then expands over that user's lexemes only, and every posting the GIN scan
  reads is one of the user's chunks (the old index read every user's: `kato:*` was
  36k postings at the benchmark's 100k chunks for a user with 846 matches). The
  `user_id = …` condition stays in the queries (a key can collide).
* `ix_memory_chunks_embedding_hnsw` is dropped: no search reads the chunk-level vector
  since the segment vectors (`memory_chunk_vectors`) replaced it. The column stays
  (written by the indexer and `make reembed`; the benchmark's naive baseline reads it).

Building the new GIN index re-parses every chunk (about 1 ms per 4,000-char chunk):
~4 minutes per 100k chunks on 2 cores with a large `maintenance_work_mem`.

Revision ID: 3e8a1f5c2b90
Revises: 7b3f9c2d4e61
Create Date: 2026-12-01 07:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "3e8a1f5c2b90"
down_revision: str | None = "7b3f9c2d4e61"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_TSV = "to_tsvector('simple'::regconfig, navi_chunk_search_text(content, breadcrumbs))"
USER_TSV = "navi_chunk_user_tsv(user_id, content, breadcrumbs)"

FUNCTIONS = (
    # The user's key: 8 hex digits (32 bits) of md5(user_id). A collision only makes
    # the index scan read the other user's postings too; the queries filter by user_id.
    "CREATE OR REPLACE FUNCTION navi_user_lexeme_key(user_id text) RETURNS text "
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT left(md5(coalesce(user_id, '')), 8) $$",
    # The chunk's search lexemes, each behind its user's key. plpgsql with a high COST,
    # as navi_chunk_search_text: the planner answers `… @@ query` from the index instead
    # of re-parsing candidate rows. Lexemes over 2,000 bytes (the limit is 2,047) are
    # left out rather than failing the insert.
    "CREATE OR REPLACE FUNCTION navi_chunk_user_tsv(user_id text, content text, "
    "breadcrumbs text[]) RETURNS tsvector LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE "
    "COST 10000 AS $$ DECLARE k text := navi_user_lexeme_key(user_id); BEGIN "
    "RETURN array_to_tsvector(ARRAY(SELECT k || t.lexeme FROM unnest(to_tsvector("
    "'simple'::regconfig, navi_chunk_search_text(content, breadcrumbs))) AS t "
    "WHERE octet_length(t.lexeme) <= 2000)); END $$",
    # A query in the index's terms: the user's key in front of every lexeme of `query`
    # (a `to_tsquery('simple', …)`; its text form quotes each lexeme, quotes doubled).
    "CREATE OR REPLACE FUNCTION navi_user_tsquery(user_id text, query tsquery) "
    "RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT regexp_replace("
    "query::text, '''((?:[^'']|'''')*)''', '''' || navi_user_lexeme_key(user_id) || '\\1''',"
    " 'g')::tsquery $$",
)


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    for sql in FUNCTIONS:
        op.execute(sql)
    op.drop_index(
        "ix_memory_chunks_content_fts", table_name="memory_chunks", postgresql_using="gin"
    )
    op.create_index(
        "ix_memory_chunks_user_terms",
        "memory_chunks",
        [sa.literal_column(USER_TSV)],
        unique=False,
        postgresql_using="gin",
    )
    op.drop_index(
        "ix_memory_chunks_embedding_hnsw", table_name="memory_chunks", postgresql_using="hnsw"
    )


def downgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.create_index(
        "ix_memory_chunks_embedding_hnsw",
        "memory_chunks",
        ["embedding"],
        unique=False,
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.drop_index("ix_memory_chunks_user_terms", table_name="memory_chunks", postgresql_using="gin")
    op.create_index(
        "ix_memory_chunks_content_fts",
        "memory_chunks",
        [sa.literal_column(OLD_TSV)],
        unique=False,
        postgresql_using="gin",
    )
    op.execute("DROP FUNCTION IF EXISTS navi_user_tsquery(text, tsquery)")
    op.execute("DROP FUNCTION IF EXISTS navi_chunk_user_tsv(text, text, text[])")
    op.execute("DROP FUNCTION IF EXISTS navi_user_lexeme_key(text)")
