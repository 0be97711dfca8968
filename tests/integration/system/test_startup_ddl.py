"""Issue 42, item 8: start-up runs DDL only when it changes something, and then
concurrently; migrations run once however many processes start together; `navi serve`
can leave migrating to the deploy's `navi migrate`.

On be065d7 every process start ran five `CREATE INDEX IF NOT EXISTS … USING gin` in its
bootstrap transaction (where pg_trgm is installed): each takes the table's SHARE lock
before it finds the index there, so a start-up queued behind any open write on
`session_messages`, and every later write queued behind it. Two `migrate.upgrade` at once
on a fresh database both ran the first revision; `NAVI_MIGRATE_ON_START` did not exist."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from app import cli
from app.config import Settings, get_settings
from app.db import migrate
from app.db.extensions import TRIGRAM_INDEXES
from tests.citus import cluster as citus
from tests.conftest import _libpq, run_sql
from tests.fakes.ollama_server import FakeOllama

ROOT = Path(__file__).resolve().parents[3]
DDL = re.compile(r"^\s*(CREATE|DROP|ALTER|REINDEX)\b", re.IGNORECASE)
#: app.db.migrate.MIGRATION_LOCK, written out (a test of a code without it must fail on
#: the wait, not on the name)
MIGRATION_LOCK = 0x6E617669_0001
WRITER_SECONDS = 10.0
MESSAGES_INDEX = next(name for name, table, _ in TRIGRAM_INDEXES if table == "session_messages")


class Statements:
    """Every statement the engine runs (the app's, at start-up here)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.seen: list[str] = []
        self._engine = engine.sync_engine
        event.listen(self._engine, "before_cursor_execute", self._record)

    def _record(self, conn, cursor, statement, params, context, executemany) -> None:  # type: ignore[no-untyped-def]
        self.seen.append(statement)

    def ddl(self) -> list[str]:
        return [s for s in self.seen if DDL.match(s)]

    def close(self) -> None:
        event.remove(self._engine, "before_cursor_execute", self._record)


@pytest.fixture
def statements(engine: AsyncEngine) -> Iterator[Statements]:
    recorded = Statements(engine)
    yield recorded
    recorded.close()


def _has_trgm(db_url: str) -> bool:
    return bool(run_sql(db_url, "SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'"))


def _index_valid(db_url: str, name: str) -> bool | None:
    rows = run_sql(
        db_url,
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname = %s",
        name,
    )
    return rows[0][0] if rows else None


async def _wait_valid(db_url: str, name: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while _index_valid(db_url, name) is not True:
        assert time.monotonic() < deadline, f"{name} was not built within {seconds}s"
        await asyncio.sleep(0.1)


async def test_start_up_on_an_up_to_date_database_runs_no_ddl(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, statements: Statements, db_url: str
) -> None:
    async with make_client(settings) as client:
        assert (await client.get("/health")).status_code == 200
    assert statements.seen, "the start-up ran no statement at all?"
    assert statements.ddl() == []
    if _has_trgm(db_url):  # they are there (the migration built them)
        assert all(_index_valid(db_url, name) for name, _, _ in TRIGRAM_INDEXES)


async def test_a_missing_trigram_index_is_built_concurrently_without_blocking_writes(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, statements: Statements, db_url: str
) -> None:
    if not _has_trgm(db_url):
        pytest.skip("no pg_trgm on this server (embedded PostgreSQL): no trigram index")
    run_sql(db_url, f"DROP INDEX {MESSAGES_INDEX}")
    if citus.citus_url():  # the build only: a table lock on the coordinator is not
        async with make_client(settings):  # what a worker's writes take there
            await _wait_valid(db_url, MESSAGES_INDEX)
        built = [s for s in statements.ddl() if MESSAGES_INDEX in s]
        assert built and all("CONCURRENTLY" in s for s in built), built
        return
    # A writer's open transaction on the table (a long append, an import): the lock an
    # append holds while it runs. Released after WRITER_SECONDS at the latest, so that a
    # start-up that waits for it (be065d7) ends, and fails the test, rather than hangs.
    writer = psycopg.connect(_libpq(db_url))
    writer.execute("LOCK TABLE session_messages IN ROW EXCLUSIVE MODE")
    waited = threading.Event()

    def give_up() -> None:
        waited.set()
        writer.rollback()

    timer = threading.Timer(WRITER_SECONDS, give_up)
    timer.start()
    try:
        async with make_client(settings) as client:
            assert not waited.is_set(), "the start-up waited for the writer's transaction"
            assert (await client.get("/health")).status_code == 200
            # another writer is not queued behind the build waiting for the first
            with psycopg.connect(_libpq(db_url)) as other:
                other.execute("SET lock_timeout = '2s'")
                other.execute("LOCK TABLE session_messages IN ROW EXCLUSIVE MODE")
                other.rollback()
            assert _index_valid(db_url, MESSAGES_INDEX) is not True  # waits for `writer`
            timer.cancel()
            writer.commit()
            await _wait_valid(db_url, MESSAGES_INDEX)
    finally:
        timer.cancel()
        writer.close()
    built = [s for s in statements.ddl() if MESSAGES_INDEX in s]
    assert built and all("CONCURRENTLY" in s for s in built), built
    assert [s for s in statements.ddl() if MESSAGES_INDEX not in s] == []  # only the missing


async def test_an_interrupted_build_is_dropped_and_built_again(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, statements: Statements, db_url: str
) -> None:
    if not _has_trgm(db_url):
        pytest.skip("no pg_trgm on this server (embedded PostgreSQL): no trigram index")
    if citus.citus_url():
        pytest.skip("marks an index invalid in the coordinator's catalog only")
    name = TRIGRAM_INDEXES[0][0]
    # what an interrupted CREATE INDEX CONCURRENTLY leaves: an invalid index of the name
    run_sql(
        db_url,
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
        name,
    )
    async with make_client(settings):
        await _wait_valid(db_url, name)  # be065d7: IF NOT EXISTS kept the invalid one
    assert any("DROP INDEX CONCURRENTLY" in s and name in s for s in statements.ddl())


def _upgrade_in_thread(url: str, errors: list[BaseException], start: threading.Barrier) -> None:
    try:
        start.wait()
        migrate.upgrade(url)
    except BaseException as exc:
        errors.append(exc)


def _blocked(db_url: str) -> int:
    rows = run_sql(
        db_url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'",
    )
    return int(rows[0][0]) if rows else 0


def test_two_migrations_at_once_migrate_once(empty_db_url: str) -> None:
    """Two `navi migrate` (or `navi serve`) processes started together on a fresh
    database: one migrates, the other waits for it and finds the schema at head.
    (Processes: Alembic's `context` is one per process.) To start them truly together,
    the test holds `pg_extension` (the first catalog a migration reads, to know whether
    it runs on Citus) until both wait, then lets them go at once."""
    env = {**os.environ, "DATABASE_URL": empty_db_url, "EMBEDDING_PROVIDER": "ollama"}
    argv = [sys.executable, "-m", "app.cli", "migrate"]
    gate = None
    if not citus.citus_url():
        gate = psycopg.connect(_libpq(empty_db_url))
        gate.execute("LOCK TABLE pg_catalog.pg_extension IN ACCESS EXCLUSIVE MODE")
    try:
        runs = [
            subprocess.Popen(
                argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            for _ in range(2)
        ]
        if gate is not None:
            deadline = time.monotonic() + 60
            while _blocked(empty_db_url) < 2:  # both wait: at the gate, or for the other
                assert time.monotonic() < deadline, "the two migrations never both waited"
                assert all(run.poll() is None for run in runs), "a migration ended early"
                time.sleep(0.05)
            gate.rollback()
        outputs = [run.communicate(timeout=300)[0].decode() for run in runs]
    finally:
        if gate is not None:
            gate.close()
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert run_sql(empty_db_url, "SELECT version_num FROM alembic_version") == [
        (migrate.head_revision(),)
    ]
    migrate.check(empty_db_url)


def test_a_migration_waits_for_the_one_running(db_url: str) -> None:
    """The lock is the deployment's: a `migrate` started while another holds it waits."""
    with psycopg.connect(_libpq(db_url), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        errors: list[BaseException] = []
        thread = threading.Thread(
            target=_upgrade_in_thread, args=(db_url, errors, threading.Barrier(1))
        )
        thread.start()
        thread.join(timeout=1.5)
        assert thread.is_alive(), "the migration did not wait for the lock"
        other.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
        thread.join(timeout=60)
    assert not thread.is_alive() and not errors, errors


@pytest.fixture
def serve_env(
    monkeypatch: pytest.MonkeyPatch, ollama: FakeOllama, tmp_path: Path
) -> Iterator[list[Any]]:
    """`navi serve` up to uvicorn, which is not started: the calls it would have got."""
    served: list[Any] = []
    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.setenv("OLLAMA_HOST", ollama.url)
    monkeypatch.setenv("EMBEDDING_PROVIDER", "ollama")
    monkeypatch.setenv("NAVI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LOG_LEVEL", "warning")
    monkeypatch.setattr(cli, "_exit_on_sigterm", lambda: None)
    monkeypatch.setattr(cli, "_start_indexers", lambda settings, url: [])
    monkeypatch.setattr(cli, "_run_uvicorn", lambda *args: served.append(args))
    get_settings.cache_clear()
    yield served
    get_settings.cache_clear()


def test_serve_with_migrate_on_start_false_does_not_migrate(  # type: ignore[no-untyped-def]
    serve_env: list[Any], monkeypatch: pytest.MonkeyPatch, empty_db_url: str, db_url: str
) -> None:
    monkeypatch.setenv("NAVI_MIGRATE_ON_START", "false")
    # a database never migrated: serve stops and says to run `navi migrate`
    monkeypatch.setenv("DATABASE_URL", empty_db_url)
    get_settings.cache_clear()
    with pytest.raises(SystemExit) as stopped:
        cli.main(["serve"])
    assert stopped.value.code == 2 and serve_env == []
    assert run_sql(empty_db_url, "SELECT to_regclass('alembic_version')::text") == [(None,)]

    # a database behind head (the deploy's `navi migrate` has not run yet): served, as it is
    head = migrate.head_revision()
    previous = ScriptDirectory.from_config(migrate.alembic_config()).get_revision(head)
    assert previous is not None and isinstance(previous.down_revision, str)
    run_sql(db_url, "UPDATE alembic_version SET version_num = %s", previous.down_revision)
    monkeypatch.setenv("DATABASE_URL", db_url)
    get_settings.cache_clear()
    try:
        cli.main(["serve"])
        assert len(serve_env) == 1
        assert run_sql(db_url, "SELECT version_num FROM alembic_version") == [
            (previous.down_revision,)
        ]
    finally:
        run_sql(db_url, "UPDATE alembic_version SET version_num = %s", head)


def test_serve_migrates_by_default(  # type: ignore[no-untyped-def]
    serve_env: list[Any], monkeypatch: pytest.MonkeyPatch, empty_db_url: str
) -> None:
    monkeypatch.delenv("NAVI_MIGRATE_ON_START", raising=False)
    monkeypatch.setenv("DATABASE_URL", empty_db_url)
    get_settings.cache_clear()
    cli.main(["serve"])
    assert len(serve_env) == 1
    assert run_sql(empty_db_url, "SELECT version_num FROM alembic_version") == [
        (migrate.head_revision(),)
    ]
