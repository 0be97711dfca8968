"""The cluster harness itself, on a throwaway distributed schema (needs TEST_CITUS_URL).

A database of its own per test (`empty_db_url` on the cluster): a reference table of
users and a table distributed by `user_id` beside it, like the app's schema will be.
Checks what the suite relies on: the per-test reset empties distributed tables and
restarts their sequences, a schema change is noticed, the statement log attributes a
statement to the code that ran it through SQLAlchemy's async engine, and the plan check
passes a router query, refuses a multi-shard one and lets an allow-listed one through.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.engine import create_engine
from tests.citus import cluster
from tests.citus.plans import check
from tests.citus.statement_log import ROOT, StatementLog, load

pytestmark = [
    pytest.mark.citus,
    pytest.mark.skipif(
        cluster.citus_url() is None, reason="needs TEST_CITUS_URL (a Citus coordinator)"
    ),
]

HERE = str(Path(__file__).resolve())

SCHEMA = [
    "create table users (id text primary key)",
    "select create_reference_table('users')",
    "create table items (user_id text not null references users (id), id bigserial,"
    " body text, primary key (user_id, id))",
    "select create_distributed_table('items', 'user_id')",
]


def _distributed(url: str) -> None:
    with psycopg.connect(cluster.libpq(url), autocommit=True) as conn:
        for sql in SCHEMA:
            conn.execute(sql)
        conn.execute("insert into users values ('alice'), ('bob')")
        conn.execute("insert into items (user_id, body) values ('alice', 'a'), ('bob', 'b')")


def test_the_cluster_has_two_workers_and_four_shards_a_table(empty_db_url: str) -> None:
    _distributed(empty_db_url)
    with psycopg.connect(cluster.libpq(empty_db_url), autocommit=True) as conn:
        workers = conn.execute("select count(*) from pg_dist_node where groupid <> 0").fetchone()
        shards = conn.execute(
            "select count(*) from pg_dist_shard where logicalrelid = 'items'::regclass"
        ).fetchone()
        nodes = conn.execute(
            "select count(distinct nodeport) from citus_shards where table_name = 'items'::regclass"
        ).fetchone()
    assert workers == (2,) and shards == (4,) and nodes == (2,)


def test_reset_empties_distributed_tables_and_notices_a_schema_change(empty_db_url: str) -> None:
    _distributed(empty_db_url)
    shared = cluster.SharedDatabase(cluster.citus_url() or "", name="unused")
    shared.adopt(empty_db_url)
    assert shared.tables == ["items", "users"]
    assert shared.written_tables() == ["items", "users"]  # found in the workers' shards
    shared.reset()
    assert shared.truncated == 2 and shared.written_tables() == []
    shared.reset()  # nothing written since: nothing to truncate
    assert shared.truncated == 2
    with psycopg.connect(cluster.libpq(empty_db_url), autocommit=True) as conn:
        assert conn.execute("select count(*) from items").fetchone() == (0,)
        conn.execute("insert into users values ('alice')")
        row = conn.execute("insert into items (user_id, body) values ('alice', 'c') returning id")
        assert row.fetchone() == (1,)  # RESTART IDENTITY on a distributed table
        assert not shared.schema_changed()
        conn.execute("create index ix_items_body on items (body)")
        assert shared.schema_changed()
    shared.close()


async def router_query(conn: AsyncConnection, user: str) -> None:
    await conn.execute(text("select body from items where user_id = :u"), {"u": user})


async def every_user_query(conn: AsyncConnection) -> None:
    await conn.execute(text("select count(*) from items"))


async def listing_query(conn: AsyncConnection) -> None:
    await conn.execute(text("select user_id, count(*) from items group by user_id"))


async def _run(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        await router_query(conn, "alice")
        await every_user_query(conn)
        await listing_query(conn)
        await conn.execute(text("select 1 from users where id = :u"), {"u": "bob"})


async def test_plan_check_passes_routed_refuses_fanned_out_statements(
    empty_db_url: str, tmp_path: Path
) -> None:
    _distributed(empty_db_url)
    log = StatementLog(tmp_path / "statements.pickle", roots=(HERE,), skip=())
    log.install()
    engine = create_engine(empty_db_url)
    try:
        await _run(engine)
    finally:
        log.uninstall()
        await engine.dispose()
    log.write()
    entries = load(tmp_path / "statements.pickle")
    callers = {c.split(":")[-1] for e in entries.values() for c in e.callers}
    # attributed through the async engine's greenlet to the coroutine that awaited it
    assert {"router_query", "every_user_query", "listing_query", "_run"} <= callers

    allowed = {f"{HERE[len(str(ROOT)) + 1 :]}:listing_query": "an admin listing"}
    with psycopg.connect(cluster.libpq(empty_db_url), autocommit=True) as conn:
        verdicts = {v.callers[0].split(":")[-1]: v for v in check(conn, entries.values(), allowed)}
    assert verdicts["router_query"].task_counts == [1] and verdicts["router_query"].ok
    assert verdicts["_run"].task_counts == [1] and verdicts["_run"].ok  # a reference table
    assert verdicts["every_user_query"].task_counts == [4]
    assert not verdicts["every_user_query"].ok
    assert verdicts["listing_query"].multi_shard and verdicts["listing_query"].ok
    assert verdicts["listing_query"].allowed_by == "an admin listing"


def test_a_database_gone_from_one_worker_is_still_dropped_everywhere(pg_server: str) -> None:
    """A refused drop can leave the database on one worker and not on the other; the
    next drop (a teardown's) must still remove it from every node, not fail."""
    name = cluster.fresh_name("navi_half")
    cluster.create_cluster_database(pg_server, name)
    coordinator = make_url(pg_server)
    with psycopg.connect(cluster.libpq(pg_server), autocommit=True) as c:
        workers = c.execute(
            "select nodename, nodeport from pg_dist_node where groupid <> 0 order by nodeport"
        ).fetchall()
    with cluster.connect_node(pg_server, *workers[0]) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')

    cluster.drop_cluster_database(pg_server, name)

    nodes = [(coordinator.host or "127.0.0.1", coordinator.port or 5432), *workers]
    for host, port in nodes:
        with cluster.connect_node(pg_server, host, port) as conn:
            left = conn.execute("select count(*) from pg_database where datname = %s", (name,))
            assert left.fetchone() == (0,), f"{name} is still on {host}:{port}"
