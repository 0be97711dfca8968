"""`navi serve` runs the live index's embedding in an indexer process of its own (issue
41): started with the service at a lower priority, restarted when it dies, unharmed when
a web worker dies, ended when the service stops — or is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.browser import _free_port, app_env, child_pids, cmdline
from tests.conftest import ADMIN_TOKEN
from tests.fakes.ollama_server import FakeOllama

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _wait(what: str, check: Callable[[], Any], seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Service:
    def __init__(self, proc: subprocess.Popen[bytes], base: str, log: Path) -> None:
        self.proc, self.base, self.log = proc, base, log

    def indexers(self) -> list[int]:
        return [p for p in child_pids(self.proc.pid) if "app.cli indexer" in cmdline(p)]

    def workers(self) -> list[int]:
        return [p for p in child_pids(self.proc.pid) if "spawn_main" in cmdline(p)]

    def one_indexer(self) -> int:
        return int(_wait("one indexer", lambda: len(self.indexers()) == 1 and self.indexers()[0]))


@pytest.fixture
def service(db_url: str, ollama: FakeOllama, tmp_path: Path) -> Iterator[Service]:
    port = _free_port()
    env = app_env(
        db_url,
        ollama,
        tmp_path,
        DATABASE_REPLICA_URL="",  # the primary: the bound measured is the indexer's
        INDEX_QUIET_SECONDS="0.5",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("INDEX_EMBEDDING", None)  # the service decides who embeds
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--workers", "2", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    svc = Service(proc, f"http://127.0.0.1:{port}", log)

    def up() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            return httpx.get(svc.base + "/health", timeout=5).status_code in (200, 503)
        except httpx.HTTPError:
            return False

    try:
        _wait("the service", up, 90)
        yield svc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in svc.indexers():  # never leave one behind, whatever failed
            os.kill(pid, signal.SIGKILL)


def _said_and_embedded(svc: Service, db_url: str, text: str) -> None:
    """Append `text` to a new session; wait until its chunk has its vectors."""
    r = httpx.post(svc.base + "/sessions", json={}, headers=AUTH, timeout=10)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    body = {"messages": [{"role": "user", "content": text}]}
    r = httpx.post(f"{svc.base}/sessions/{sid}/messages", json=body, headers=AUTH, timeout=10)
    assert r.status_code == 201, r.text
    url = db_url.replace("postgresql+psycopg://", "postgresql://", 1)

    def embedded() -> bool:
        with psycopg.connect(url) as c:
            rows = c.execute(
                "SELECT vectors_stale FROM memory_chunks WHERE session_id = %s", (sid,)
            ).fetchall()
        return rows == [(False,)]

    _wait(f"the vectors of {text!r}", embedded, 30)


def test_the_indexer_runs_beside_the_service_and_outlives_crashes(
    service: Service, db_url: str
) -> None:
    indexer = service.one_indexer()
    nice = int(Path(f"/proc/{indexer}/stat").read_text().rsplit(")", 1)[1].split()[16])
    # INDEXER_NICE (10) above the service's own niceness (a `nice` test run's): the
    # requests come first
    assert nice == min(19, os.nice(0) + 10)
    health = httpx.get(service.base + "/health", timeout=10).json()
    assert health["index"]["embedding_by"].startswith("indexer processes")
    _said_and_embedded(service, db_url, "The kayak is stored in the blue shed.")
    # the indexer crashes: the service starts another, which takes the work on
    os.kill(indexer, signal.SIGKILL)
    again = _wait("a new indexer", lambda: [p for p in service.indexers() if p != indexer])
    _said_and_embedded(service, db_url, "The tent poles are in the attic.")
    # a web worker crashes: the indexer goes on unharmed
    worker = service.workers()[0]
    os.kill(worker, signal.SIGKILL)
    _said_and_embedded(service, db_url, "The stove needs a new gas canister.")
    assert service.indexers() == again
    # the service stops: its indexer with it
    service.proc.terminate()
    service.proc.wait(timeout=30)
    _wait("the indexer to stop", lambda: not _alive(again[0]), 15)
    assert b"indexer.stopped" in service.log.read_bytes()


def test_an_indexer_ends_when_the_service_is_killed_outright(service: Service) -> None:
    indexer = service.one_indexer()
    workers = service.workers()
    service.proc.kill()  # no chance to stop its children
    service.proc.wait(timeout=10)
    try:
        _wait("the orphaned indexer to end by itself", lambda: not _alive(indexer), 15)
    finally:
        for pid in workers:  # uvicorn's orphaned workers do not: this test's business
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
