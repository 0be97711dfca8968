"""`navi serve` as an operator starts it, in its own processes: two uvicorn workers on an
empty database. Every line it writes is one structlog JSON object (the embedded server,
Alembic's migration, uvicorn's start and stop, ours), the start says it migrated and
how long it took, and /metrics sums both workers (prometheus_client multiprocess mode)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from scripts.spec_check import free_port, wait_ready
from tests.fakes.ollama_server import FakeOllama

ROOT = Path(__file__).resolve().parents[3]
HEALTH = 'navi_http_requests_total{app_name="navi",method="GET",path="/health",status_code="200"}'


def health_count(text: str) -> float:
    for line in text.splitlines():
        if line.startswith(HEALTH + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_two_workers_one_log_format_and_summed_metrics(
    empty_db_url: str, ollama: FakeOllama, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": empty_db_url,
        "NAVI_AUTH_ENABLED": "false",
        "OLLAMA_HOST": ollama.url,
        "EMBEDDING_PROVIDER": "ollama",
        "NAVI_DATA_DIR": str(tmp_path / "data"),
        "LOG_LEVEL": "info",
        "LOG_JSON": "true",
        "MEMORY_EXTRACTION_INTERVAL_SECONDS": "0",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--workers", "2"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, proc)
        for _ in range(20):
            assert httpx.get(f"{base}/health", timeout=5).status_code == 200
        # each scrape reaches one worker or the other: every one sees all 20
        counts = {health_count(httpx.get(f"{base}/metrics", timeout=5).text) for _ in range(6)}
        assert counts == {20.0}
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    lines = err.splitlines()
    not_json = [line for line in lines if not line.startswith("{")]
    assert not_json == [], not_json
    records = [json.loads(line) for line in lines]  # every line: one JSON object
    events = [r["event"] for r in records]
    assert any(e.startswith("Running upgrade") for e in events)
    (migrated,) = [r for r in records if r["event"] == "db.migrated"]
    assert migrated["seconds"] > 0
    uvicorn = [r for r in records if r.get("logger", "").startswith("uvicorn")]
    assert any("Uvicorn running on" in r["event"] for r in uvicorn), events
    assert events.count("app.started") == 2  # both workers
    assert (tmp_path / "data" / "prometheus").is_dir()


def test_sigterm_stops_the_embedded_database(ollama: FakeOllama, tmp_path: Path) -> None:
    """`kill` (SIGTERM, as `docker stop` sends) ends `navi serve` through its exit hooks:
    the embedded PostgreSQL it started is stopped too, not left running."""
    port = free_port()
    data = tmp_path / "data"
    env = {
        **os.environ,
        "NAVI_AUTH_ENABLED": "false",
        "OLLAMA_HOST": ollama.url,
        "EMBEDDING_PROVIDER": "none",
        "NAVI_DATA_DIR": str(data),
        "LOG_JSON": "true",
        "MEMORY_EXTRACTION_INTERVAL_SECONDS": "0",
    }
    env.pop("DATABASE_URL", None)
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc)
        assert (data / "pg" / "postmaster.pid").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert not (data / "pg" / "postmaster.pid").exists(), err[-2000:]  # pg_ctl stop ran
    events = [json.loads(line)["event"] for line in err.splitlines()]
    assert "db.embedded_starting" in events and "db.embedded_started" in events
