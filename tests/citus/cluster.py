"""The test suite on a Citus cluster (TEST_CITUS_URL: the coordinator, scripts/provision-citus.sh).

A database per test (`CREATE DATABASE … TEMPLATE`) cannot work with distributed tables:
their shards live in the workers' databases, which a template copy on the coordinator
knows nothing of. So on the cluster:

* a run creates one cluster database (`CREATE DATABASE` on the coordinator propagated to
  the workers, `citus` created in it on every node, the coordinator and the workers
  registered in its metadata) and migrates it once;
* after every test all its tables are emptied by one `TRUNCATE … RESTART IDENTITY
  CASCADE` (sessions still connected to it are ended first, as `DROP DATABASE … WITH
  (FORCE)` does on the plain server);
* a test that changed the schema (dropped an index, an extension) is caught by a
  fingerprint of the catalog, and the database is rebuilt before the next test;
* a test that needs an empty database gets a fresh cluster database of its own.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from sqlalchemy.engine import make_url

CITUS_ENV = "TEST_CITUS_URL"
SUMMARY: list[str] = []  # printed at the end of the run (tests/conftest.py)
_names = itertools.count()

# What the app's schema consists of (relations, columns and their types, extensions,
# triggers, functions); a test that changes any of it (drops an index, re-types a vector
# column) leaves the database unlike the migrated one.
_FINGERPRINT = """
select md5(coalesce((
    select string_agg(c.relkind::text || ':' || c.relname, ',' order by c.relname, c.relkind)
    from pg_class c where c.relnamespace = 'public'::regnamespace), '')
  || '|' || coalesce((
    select string_agg(c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                      || case when a.attnotnull then ' not null' else '' end,
                      ',' order by c.relname, a.attnum)
    from pg_attribute a join pg_class c on c.oid = a.attrelid
    where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p')
      and a.attnum > 0 and not a.attisdropped), '')
  || '|' || coalesce((
    select string_agg(extname, ',' order by extname) from pg_extension), '')
  || '|' || coalesce((
    select string_agg(t.tgname, ',' order by t.tgname) from pg_trigger t
    join pg_class c on c.oid = t.tgrelid
    where c.relnamespace = 'public'::regnamespace and not t.tgisinternal), '')
  || '|' || coalesce((
    select string_agg(p.proname, ',' order by p.proname) from pg_proc p
    where p.pronamespace = 'public'::regnamespace), ''))
"""

_TABLES = """
select format('%I', c.relname) from pg_class c
where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p')
  and c.relname <> 'alembic_version' and not c.relispartition
order by c.relname
"""

# The tables (on a worker: the shards) any row was written to since their last
# truncation: a TRUNCATE gives a table a new, empty file, the first row makes it 8 kB.
# Asked of every node at once; the coordinator answers for its local tables.
_WRITTEN = """
select result from run_command_on_all_nodes($cmd$
    select coalesce(string_agg(c.relname, ','), '') from pg_class c
    where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'
      and pg_relation_size(c.oid) > 0
$cmd$) where success
"""

# Sequences a statement drew from (a failed INSERT draws without writing a row).
_DRAWN = """
select distinct d.refobjid::regclass::text from pg_sequence s
join pg_class c on c.oid = s.seqrelid
join pg_depend d on d.classid = 'pg_class'::regclass and d.objid = s.seqrelid
  and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i')
where c.relnamespace = 'public'::regnamespace and pg_sequence_last_value(s.seqrelid) is not null
"""

# shard name -> the table it is a shard of
_SHARDS = """
select shard_name(logicalrelid, shardid), logicalrelid::regclass::text from pg_dist_shard
"""

_END_OTHER_SESSIONS = """
select count(pg_terminate_backend(pid)) from pg_stat_activity
where datname = current_database() and pid <> pg_backend_pid()
  and backend_type = 'client backend'
"""


def citus_url() -> str | None:
    """The coordinator's URL when the suite runs on the cluster, else None."""
    url = os.environ.get(CITUS_ENV)
    if not url:
        return None
    from app.db.engine import normalize_url

    return normalize_url(url)


def with_db(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def libpq(url: str) -> str:
    return with_db(url, make_url(url).database or "postgres").replace(
        "postgresql+psycopg://", "postgresql://", 1
    )


def _connect(url: str, database: str | None = None) -> psycopg.Connection:
    target = with_db(url, database) if database else url
    return psycopg.connect(libpq(target), autocommit=True)


def connect_node(url: str, host: str, port: int, database: str = "postgres") -> psycopg.Connection:
    """An autocommit connection to `database` on another node of `url`'s cluster."""
    node = make_url(url).set(host=host, port=port, database=database)
    return _connect(node.render_as_string(hide_password=False))


def _workers(conn: psycopg.Connection) -> list[tuple[str, int]]:
    rows = conn.execute(
        "select nodename, nodeport from pg_dist_node where groupid <> 0 and isactive"
        " order by nodeport"
    ).fetchall()
    return [(str(h), int(p)) for h, p in rows]


def create_cluster_database(coordinator_url: str, name: str) -> str:
    """A new, empty database on every node of the coordinator's cluster; returns its URL.

    `citus` exists in it on every node and its metadata knows the coordinator and the
    workers (node metadata is per database), so a migration run into it can distribute
    its tables. `vector` and `pg_trgm` are left to the migrations, like on a plain server.
    """
    coordinator = make_url(coordinator_url)
    with _connect(coordinator_url) as conn:
        workers = _workers(conn)
        conn.execute("set citus.enable_create_database_propagation = on")
        conn.execute(f'CREATE DATABASE "{name}"')
    for host, port in workers:
        with connect_node(coordinator_url, host, port, name) as conn:
            conn.execute("set client_min_messages = warning")
            conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
    with _connect(coordinator_url, name) as conn:
        conn.execute("set client_min_messages = warning")
        conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
        conn.execute(
            "select citus_set_coordinator_host(%s, %s)",
            (coordinator.host or "127.0.0.1", coordinator.port or 5432),
        )
        for host, port in workers:
            conn.execute("select citus_add_node(%s, %s)", (host, port))
    return with_db(coordinator_url, name)


def drop_cluster_database(coordinator_url: str, name: str, attempts: int = 10) -> None:
    """Drop `name` on every node.

    `WITH (FORCE)` ends the coordinator's sessions only; a worker still holds the
    connections Citus opened to it (a reset's, the maintenance daemon's), and refuses
    the propagated drop while they are open (leaving the coordinator's copy invalid, which
    the next `DROP DATABASE` removes). So the workers' sessions are ended first, and the
    drop is retried while a session reappears.

    A refused attempt can also leave the database dropped on one worker and not on
    another; Citus then sends the next attempt to every worker without `IF EXISTS`, and
    the worker that lacks it answers "does not exist". The drop is then finished node by
    node: each worker's copy, then the coordinator's, without propagation.
    """
    with _connect(coordinator_url) as conn:
        workers = _workers(conn)
    for attempt in range(attempts):
        for host, port in workers:
            with connect_node(coordinator_url, host, port) as conn:
                conn.execute(
                    "select count(pg_terminate_backend(pid)) from pg_stat_activity"
                    " where datname = %s and backend_type = 'client backend'",
                    (name,),
                )
        try:
            with _connect(coordinator_url) as conn:
                conn.execute("set citus.enable_create_database_propagation = on")
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except psycopg.errors.InvalidCatalogName:
            _drop_node_by_node(coordinator_url, workers, name)
            return
        except psycopg.errors.ObjectInUse:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))


def _drop_node_by_node(coordinator_url: str, workers: list[tuple[str, int]], name: str) -> None:
    for host, port in workers:
        with connect_node(coordinator_url, host, port) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    with _connect(coordinator_url) as conn:
        conn.execute("set citus.enable_create_database_propagation = off")
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{next(_names)}"


@dataclass
class SharedDatabase:
    """The run's migrated cluster database, emptied after every test."""

    coordinator_url: str
    name: str = field(default_factory=lambda: fresh_name("navi_c"))
    url: str = ""
    fingerprint: str = ""
    tables: list[str] = field(default_factory=list)
    rebuilds: int = 0
    reset_seconds: float = 0.0
    resets: int = 0
    build_seconds: float = 0.0
    shards: dict[str, str] = field(default_factory=dict)
    truncated: int = 0
    _conn: psycopg.Connection | None = None

    def build(self) -> None:
        from app.db import migrate

        started = time.perf_counter()
        url = create_cluster_database(self.coordinator_url, self.name)
        try:
            migrate.upgrade(url)
        except BaseException:
            drop_cluster_database(self.coordinator_url, self.name)
            raise
        self.adopt(url)
        self.build_seconds = time.perf_counter() - started

    def adopt(self, url: str) -> None:
        """Take `url`'s schema as it is now as the one every reset returns to."""
        self.close()
        self.url = url
        with _connect(url) as conn:
            self.fingerprint = _fingerprint(conn)
            self.tables = [r[0] for r in conn.execute(_TABLES).fetchall()]
            self.shards = {str(a): str(b) for a, b in conn.execute(_SHARDS).fetchall()}

    def connection(self) -> psycopg.Connection:
        """One connection for the resets (and Citus' connections to the workers behind it)."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = _connect(self.url)
            self._conn.execute("set lock_timeout = '20s'")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def written_tables(self) -> list[str]:
        """The app tables that may hold a row or have drawn from their sequence."""
        conn = self.connection()
        names: set[str] = set()
        for (result,) in conn.execute(_WRITTEN).fetchall():
            names.update(n for n in str(result).split(",") if n)
        logical = {self.shards.get(n, n) for n in names}
        logical.update(str(r[0]) for r in conn.execute(_DRAWN).fetchall())
        return [t for t in self.tables if t.strip('"') in logical]

    def schema_changed(self) -> bool:
        return _fingerprint(self.connection()) != self.fingerprint

    def rebuild(self) -> None:
        self.close()
        old = self.name
        try:
            drop_cluster_database(self.coordinator_url, old)
        except psycopg.Error as exc:  # the next database does not depend on it
            SUMMARY.append(f"citus: could not drop {old}: {exc}")
        self.name = fresh_name("navi_c")
        self.rebuilds += 1
        self.build()

    def reset(self) -> None:
        """Every table emptied (sequences restarted); rebuilt when the schema changed."""
        started = time.perf_counter()
        conn = self.connection()
        conn.execute(_END_OTHER_SESSIONS)
        if _fingerprint(conn) != self.fingerprint:
            self.rebuild()
        else:
            written = self.written_tables()
            if written:
                conn.execute(f"TRUNCATE {', '.join(written)} RESTART IDENTITY CASCADE")
                self.truncated += len(written)
        self.resets += 1
        self.reset_seconds += time.perf_counter() - started

    def summary(self) -> str:
        each = self.reset_seconds / self.resets * 1000 if self.resets else 0.0
        return (
            f"citus: migrated in {self.build_seconds:.1f} s; {self.resets} resets after a test,"
            f" {each:.0f} ms each on average, {self.truncated} tables truncated;"
            f" {self.rebuilds} rebuilds after a schema change"
        )

    def drop(self) -> None:
        self.close()
        drop_cluster_database(self.coordinator_url, self.name)


def _fingerprint(conn: psycopg.Connection) -> str:
    row = conn.execute(_FINGERPRINT).fetchone()
    return str(row[0]) if row else ""


@contextmanager
def empty_cluster_database(coordinator_url: str) -> Iterator[str]:
    name = fresh_name("navi_ce")
    url = create_cluster_database(coordinator_url, name)
    try:
        yield url
    finally:
        drop_cluster_database(coordinator_url, name)
