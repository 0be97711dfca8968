"""Child processes `navi serve` keeps running beside its web workers (the indexers).

Each child is started at a lower OS priority (`nice`, and Linux's `SCHED_IDLE` policy when
asked: it runs only on CPU time nothing else wants), restarted when it fails while the
service runs (after 1 s, doubling up to 30 s while it keeps failing at once; a child
that exits 0 was asked to stop, e.g. SIGTERM to the whole process group, and is not
restarted), and stopped
with the service: SIGTERM, then SIGKILL after `STOP_SECONDS`. A child also watches its
parent (`parent_alive`): if the service is killed outright, the child ends by itself.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence

import structlog

log = structlog.get_logger()

#: Set by `navi serve` for its web workers: how many indexer processes it started.
INDEXERS_ENV = "NAVI_INDEXERS_STARTED"
STOP_SECONDS = 10.0
MAX_BACKOFF_SECONDS = 30.0
#: A child that lived this long is healthy: its next failure restarts after 1 s again.
HEALTHY_SECONDS = 60.0


def parent_alive(parent_pid: int) -> bool:
    """Whether the process that started this one still runs (a child whose parent died
    is adopted: its parent pid changes)."""
    return os.getppid() == parent_pid


class ChildProcess:
    """One supervised child: `start()` runs a thread that (re)starts it, `stop()` ends it."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str],
        nice: int,
        *,
        idle: bool = False,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = env
        self.nice = nice
        self.idle = idle
        self.proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"supervise-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        nice, idle = self.nice, self.idle

        def lower_priority() -> None:  # in the child, before it runs anything
            if nice:
                os.nice(nice)
            if idle:
                try:  # the CPU only when nothing else wants it (Linux)
                    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
                except (AttributeError, OSError):
                    pass  # another OS: the nice value alone

        return subprocess.Popen(  # noqa: S603 - our own interpreter and module
            self.argv, env=self.env, preexec_fn=lower_priority
        )

    def _run(self) -> None:
        backoff = 1.0
        while not self._stopping.is_set():
            with self._lock:
                if self._stopping.is_set():
                    return
                self.proc = self._spawn()
            started = time.monotonic()
            log.info(
                "supervisor.started",
                child=self.name,
                pid=self.proc.pid,
                nice=self.nice,
                sched_idle=self.idle,
            )
            code = self.proc.wait()
            if self._stopping.is_set():
                return
            if code == 0:  # it was asked to stop (SIGTERM to the group): the service stops
                log.info("supervisor.child_stopped", child=self.name, pid=self.proc.pid)
                return
            if time.monotonic() - started > HEALTHY_SECONDS:
                backoff = 1.0
            log.warning(
                "supervisor.child_exited",
                child=self.name,
                pid=self.proc.pid,
                code=code,
                restart_in_seconds=backoff,
            )
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    def stop(self) -> None:
        with self._lock:
            self._stopping.set()
            proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("supervisor.killed", child=self.name, pid=proc.pid)
            proc.kill()
            proc.wait()
        log.info("supervisor.stopped", child=self.name, pid=proc.pid)
