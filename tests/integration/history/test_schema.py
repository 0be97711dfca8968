"""The indexes of issue 8 exist and the history queries use them."""

import psycopg


def _conn(url: str) -> psycopg.Connection:
    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1))


def test_indexes_and_tables(db_url: str) -> None:
    with _conn(db_url) as c:
        idx = {
            r[0]: r[1]
            for r in c.execute(
                "select indexname, indexdef from pg_indexes where schemaname='public'"
            )
        }
    assert "to_tsvector" in idx["ix_session_messages_content_fts"]
    assert "to_tsvector" in idx["ix_session_messages_archive_content_fts"]
    assert "error_text" in idx["ix_error_memory_text_fts"]
    assert "hnsw" in idx["ix_error_memory_embedding_hnsw"]
    assert "ix_error_memory_user_id_expires_at" in idx
    assert "pk_message_embeddings" in idx and "pk_rolling_summaries" in idx


def test_fulltext_uses_the_gin_index(db_url: str) -> None:
    with _conn(db_url) as c:
        c.execute("insert into navi_users (id, name) values ('u', 'u') on conflict do nothing")
        c.execute(
            "insert into sessions (id, profile_id, user_id) values (gen_random_uuid(), 'x', 'u')"
        )
        c.execute("set enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in c.execute(
                "explain select 1 from session_messages_archive "
                "where to_tsvector('simple', content) @@ websearch_to_tsquery('simple', 'port')"
            )
        )
        assert "ix_session_messages_archive_content_fts" in plan
        plan = "\n".join(
            r[0]
            for r in c.execute(
                "explain select 1 from error_memory where "
                "to_tsvector('simple', (error_text || ' ') || fix) @@ to_tsquery('simple', 'a')"
            )
        )
        assert "ix_error_memory_text_fts" in plan
