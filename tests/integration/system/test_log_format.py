"""One log format: Alembic's lines (standard library logging) come out as structlog's,
JSON or key=value like the rest; /health logs its access line and nothing of Alembic."""

from __future__ import annotations

import json

import pytest
from litestar.testing import AsyncTestClient

from app.db import migrate
from app.lib.logging import configure_logging


def test_migration_lines_are_structlog_json(
    empty_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info", json=True)
    migrate.upgrade(empty_db_url)
    lines = capsys.readouterr().err.splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    alembic = [r for r in records if r.get("logger", "").startswith("alembic")]
    assert any(r["event"].startswith("Running upgrade") for r in alembic), lines[:5]
    assert all({"timestamp", "level", "event"} <= set(r) for r in records)
    (migrated,) = [r for r in records if r["event"] == "db.migrated"]
    assert migrated["target"] == "head" and migrated["seconds"] > 0
    assert records[0]["event"] == "db.migrating"


def test_migration_lines_are_structlog_key_value(
    empty_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info", json=False)
    migrate.upgrade(empty_db_url)
    lines = capsys.readouterr().err.splitlines()
    running = [line for line in lines if "Running upgrade" in line]
    assert running and all("[info     ] Running upgrade" in line for line in running)
    assert all(line.endswith("[alembic.runtime.migration]") for line in running)
    other = [line for line in lines if not line[:4].isdigit()]
    assert other == []  # every line starts with its timestamp


async def test_health_logs_no_alembic_lines(
    client: AsyncTestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info", json=True)
    capsys.readouterr()
    assert (await client.get("/health")).status_code in (200, 503)
    lines = capsys.readouterr().err.splitlines()
    events = [json.loads(line)["event"] for line in lines]
    assert "http.request" in events  # the capture sees the request's lines
    assert not [line for line in lines if "alembic" in line or "Context impl" in line], lines
