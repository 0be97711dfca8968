"""The embedded PostgreSQL's watchdog: when the server this process started dies, start
it again (logged), so the service recovers without a restart of its own.

It checks every `DB_EMBEDDED_CHECK_SECONDS` (reading `postmaster.pid` and asking the OS
whether that process lives: no database round trip), and at once when a request found
the database unreachable (`poke()`, from the 503 handler in app/asgi/http.py). Requests in
between answer 503 `unavailable`; the pool replaces its dead connections by itself.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psutil
import structlog

from app.db.engine import embedded_server

log = structlog.get_logger()

#: How long a restart keeps trying: backends of the dead postmaster still attached to
#: its shared memory block a new one until they notice and exit (usually < 1 s).
RESTART_SECONDS = 20.0


def restart_if_dead(data_dir: Path) -> bool:
    """Start the embedded server under `data_dir` again if this process started it and
    it is no longer running; True when it was restarted. Blocking (pg_ctl)."""
    server = embedded_server(data_dir)
    if server is None:
        return False
    if _postmaster_alive(server.pgdata):
        return False
    log.warning("db.embedded_died", data_dir=str(server.pgdata), hint="starting it again")
    old_uri = server.get_uri(driver="psycopg")
    started = time.monotonic()
    while True:
        try:
            if _postmaster_pid_exists(server.pgdata):  # a zombie not reaped yet: pgserver
                raise RuntimeError("the dead postmaster is not reaped yet")  # would reuse it
            # pgserver's inter-process lock serialises this with other processes of the
            # same data directory (worker processes) and with its own start/stop.
            with server._lock:
                server.ensure_postgres_running()
            break
        except Exception as exc:  # noqa: BLE001 - retried, then logged and given up
            if time.monotonic() - started > RESTART_SECONDS:
                log.error("db.embedded_restart_failed", error=f"{type(exc).__name__}: {exc}")
                return False
            time.sleep(0.2)
    uri = server.get_uri(driver="psycopg")
    log.info(
        "db.embedded_restarted",
        data_dir=str(server.pgdata),
        seconds=round(time.monotonic() - started, 2),
    )
    if uri != old_uri:  # the pool keeps the old URL: only a restart of the service helps
        log.error("db.embedded_url_changed", hint="restart the service")
    return True


def _postmaster_alive(pgdata: Path) -> bool:
    """The process of `pgdata/postmaster.pid` exists and is not a zombie (a killed
    postmaster whose parent has not reaped it yet still has a pid)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (OSError, ValueError, IndexError, psutil.Error):
        return False


def _postmaster_pid_exists(pgdata: Path) -> bool:
    try:
        return psutil.pid_exists(int((pgdata / "postmaster.pid").read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        return False


class EmbeddedWatchdog:
    def __init__(self, data_dir: Path, interval: float) -> None:
        self.data_dir = data_dir
        self.interval = interval
        self._wake = asyncio.Event()

    def poke(self) -> None:
        """Check now (a request found the database unreachable)."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            try:  # asyncio.timeout: wait_for may swallow a cancellation (db/replica.py)
                async with asyncio.timeout(self.interval):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            await asyncio.to_thread(restart_if_dead, self.data_dir)
