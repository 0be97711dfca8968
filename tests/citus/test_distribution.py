"""The migrated cluster database's shape (migration d8f3b2a6c4e1): every table of user
data distributed by `user_id` and co-located with `sessions`, the shared tables
reference tables, one HNSW graph per shard for the segment vectors, the search functions
on every node."""

from __future__ import annotations

import psycopg
import pytest

from app.db.citus import BUCKET_HNSW_PREFIX, SHARD_HNSW_INDEX
from tests.citus import cluster

pytestmark = [
    pytest.mark.citus,
    pytest.mark.skipif(
        cluster.citus_url() is None, reason="needs TEST_CITUS_URL (a Citus coordinator)"
    ),
]

REFERENCE = {"navi_users", "navi_api_tokens"}
LOCAL = {"alembic_version"}  # the coordinator's own


def _rows(db_url: str, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    with psycopg.connect(cluster.libpq(db_url), autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def test_every_table_of_user_data_is_distributed_by_user_and_colocated(db_url: str) -> None:
    tables = {
        r[0] for r in _rows(db_url, "select tablename from pg_tables where schemaname = 'public'")
    }
    kinds = {
        str(t): (str(kind), str(column), int(colocation))
        for t, kind, column, colocation in _rows(
            db_url,
            "select table_name::text, citus_table_type, distribution_column, colocation_id"
            " from citus_tables",
        )
    }
    assert set(kinds) == tables - LOCAL
    assert {t for t, (kind, _, _) in kinds.items() if kind == "reference"} == REFERENCE
    sessions = kinds["sessions"]
    assert sessions[:2] == ("distributed", "user_id")
    for table in tables - LOCAL - REFERENCE:
        assert kinds[table] == sessions, table  # same column, same co-location group


def test_no_trigger_is_left(db_url: str) -> None:
    triggers = _rows(
        db_url,
        "select tgrelid::regclass::text, tgname from pg_trigger t join pg_class c"
        " on c.oid = t.tgrelid where c.relnamespace = 'public'::regnamespace"
        " and not t.tgisinternal",
    )
    assert triggers == []


def test_segment_vectors_have_one_graph_per_shard(db_url: str) -> None:
    names = {
        r[0]
        for r in _rows(
            db_url,
            "select indexname from pg_indexes where tablename = 'memory_chunk_vectors'",
        )
    }
    assert SHARD_HNSW_INDEX in names
    assert not [n for n in names if n.startswith(BUCKET_HNSW_PREFIX)]
    # built on every shard, on the workers
    shards, indexed = _rows(
        db_url,
        "select count(*), count(*) filter (where success and result = 't')"
        " from run_command_on_placements('memory_chunk_vectors', $$"
        " select exists (select 1 from pg_indexes where tablename = '%s'"
        " and position('USING hnsw' in indexdef) > 0) $$)",
    )[0]
    assert shards >= 2 and indexed == shards


def test_search_functions_exist_on_every_node(db_url: str) -> None:
    rows = _rows(
        db_url,
        "select result from run_command_on_all_nodes($$ select string_agg(proname, ','"
        " order by proname) from pg_proc where proname like 'navi%' $$)",
    )
    expected = (
        "navi_chunk_search_text,navi_chunk_user_tsv,navi_user_bucket,"
        "navi_user_lexeme_key,navi_user_tsquery"
    )
    assert rows and all(r[0] == expected for r in rows)
