"""Embedded mode: when the embedded PostgreSQL the service started dies (its postmaster
killed), the service notices and starts it again, logged; requests in between answer
503 `unavailable`, never 500, and then succeed without restarting the service."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from litestar.testing import AsyncTestClient
from structlog.testing import capture_logs

from app.asgi import create_app
from app.config import Settings
from app.db import engine as db_engine
from app.db import migrate
from tests.conftest import ADMIN_TOKEN


@pytest.fixture
def embedded_dir() -> Iterator[tuple[Path, str]]:
    """An embedded server of its own (a data directory outside pytest's private tmp,
    which the `pgserver` system user could not enter), migrated; stopped afterwards."""
    data_dir = Path(tempfile.mkdtemp(prefix="navi-embedded-"))
    url = db_engine.start_embedded(data_dir)
    try:
        migrate.upgrade(url)
        yield data_dir, url
    finally:
        server = db_engine.embedded_server(data_dir)
        if server is not None:
            server.stop()
        db_engine._embedded.pop(str(data_dir.resolve()), None)
        shutil.rmtree(data_dir, ignore_errors=True)


async def test_a_killed_embedded_server_is_started_again(
    embedded_dir: tuple[Path, str], settings: Settings
) -> None:
    data_dir, url = embedded_dir
    s = dataclasses.replace(
        settings,
        data_dir=str(data_dir),
        database_url="",
        db_embedded_check_seconds=30,  # the 503 handler's poke must do it, not the timer
        db_connect_timeout_seconds=2,
        log_level="info",  # db.embedded_restarted is an info line
    )
    app = create_app(s, database_url=url, background_jobs=False)
    with capture_logs() as logs:
        async with AsyncTestClient(app, raise_server_exceptions=False) as client:
            client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
            assert (await client.get("/sessions")).status_code == 200
            server = db_engine.embedded_server(data_dir)
            assert server is not None
            pid = int((server.pgdata / "postmaster.pid").read_text().split()[0])
            backends = psutil.Process(pid).children()
            os.kill(pid, signal.SIGKILL)
            # the backends outlive their postmaster for a moment (one may still answer
            # the pooled connection's next query): the death is what the app must see
            _, alive = psutil.wait_procs(backends, timeout=10)
            assert not alive, alive

            statuses: list[int] = []
            started = time.monotonic()
            while True:
                r = await client.get("/sessions")
                statuses.append(r.status_code)
                if r.status_code == 200:
                    break
                assert r.status_code == 503 and r.json()["error"] == "unavailable", r.text
                assert time.monotonic() - started < 30, statuses
                await asyncio.sleep(0.2)
            assert 503 in statuses  # the death was seen, then repaired
            new_pid = int((server.pgdata / "postmaster.pid").read_text().split()[0])
            assert new_pid != pid
            # (pgserver may still be polling the new server's readiness in its thread)
            while not any(e["event"] == "db.embedded_restarted" for e in logs):
                assert time.monotonic() - started < 30
                await asyncio.sleep(0.1)
    events = [e["event"] for e in logs]
    assert events.count("db.embedded_died") == 1 and events.count("db.embedded_restarted") == 1
