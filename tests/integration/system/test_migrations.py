import psycopg
import pytest

from app.db import migrate
from app.db.extensions import TRIGRAM_INDEXES


def _conn(url: str) -> psycopg.Connection:
    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1))


def _tables(url: str) -> set[str]:
    with _conn(url) as c:
        return {
            r[0] for r in c.execute("select tablename from pg_tables where schemaname='public'")
        }


def test_round_trip_and_check(empty_db_url: str) -> None:
    migrate.upgrade(empty_db_url)
    migrate.check(empty_db_url)  # models and migrations agree
    tables = _tables(empty_db_url)
    assert {"sessions", "session_messages", "memory_facts", "memory_chunks", "navi_users"} <= tables
    migrate.downgrade(empty_db_url, "base")
    assert _tables(empty_db_url) == {"alembic_version"}
    migrate.upgrade(empty_db_url)
    migrate.check(empty_db_url)
    with _conn(empty_db_url) as c:
        rev = c.execute("select version_num from alembic_version").fetchone()[0]
    assert rev == migrate.head_revision()


def test_named_indexes_exist(db_url: str) -> None:
    with _conn(db_url) as c:
        idx = {
            r[0]: r[1]
            for r in c.execute(
                "select indexname, indexdef from pg_indexes where schemaname='public'"
            )
        }
        trgm = c.execute("select 1 from pg_extension where extname='pg_trgm'").fetchone()
    assert "hnsw" in idx["ix_memory_facts_embedding_hnsw"]
    assert "ix_memory_chunks_embedding_hnsw" not in idx  # unread: dropped (2026_12_01_0730)
    assert "gin (search_terms)" in idx["ix_memory_chunks_user_terms"]
    assert "gin" in idx["ix_memory_chunks_breadcrumbs"].lower()
    assert "ix_session_messages_counts" in idx
    assert "ix_memory_facts_expires_at" in idx
    # Trigram indexes exist exactly when pg_trgm does.
    for name, _, _ in TRIGRAM_INDEXES:
        assert (name in idx) == bool(trgm), name


def test_trigram_indexes_follow_extension(db_url: str) -> None:
    """Installing pg_trgm later gets the indexes on the next start-up (ensure step)."""
    from sqlalchemy import create_engine

    from app.db.extensions import ensure_trigram_indexes, extension_state

    eng = create_engine(db_url)
    with eng.begin() as conn:
        available = conn.exec_driver_sql(
            "select 1 from pg_available_extensions where name='pg_trgm'"
        ).scalar()
        if not available:
            assert ensure_trigram_indexes(conn) == 0
            assert extension_state(conn).pg_trgm is None
            eng.dispose()
            pytest.skip("pg_trgm not available on this server (embedded PostgreSQL)")
        conn.exec_driver_sql("DROP EXTENSION IF EXISTS pg_trgm CASCADE")
        assert ensure_trigram_indexes(conn) == 0
        conn.exec_driver_sql("CREATE EXTENSION pg_trgm")
        assert ensure_trigram_indexes(conn) == len(TRIGRAM_INDEXES)
    eng.dispose()
