"""Periodic background jobs and fire-and-forget tasks, tied to the app's lifespan: this
process's tasks, wake-up events and run locks live in one `Jobs` (the runtime's)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog

from app.db.faults import job_budget, unavailable_reason
from app.lib.metrics import JOB_FAILURES, JOB_LAG_SECONDS, JOB_RUNS, JOB_SECONDS
from app.llm.deadline import no_deadline
from app.llm.lanes import use_index_lane

log = structlog.get_logger()

#: How much of a failed run's exception text a `JobStatus` keeps.
MAX_ERROR_CHARS = 500


@dataclass
class JobStatus:
    """What this process has seen of one periodic job since it started (`periodic` keeps
    it; the console's admin page shows it). Each worker process has its own."""

    interval: float
    runs: int = 0
    failures: int = 0
    running: bool = False
    last_started: datetime | None = None
    last_finished: datetime | None = None
    last_seconds: float | None = None
    #: whether the last finished run raised
    last_failed: bool = False
    #: the last failed run's exception (type and message, cut at MAX_ERROR_CHARS) and when
    last_error: str | None = None
    last_error_at: datetime | None = None


def error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:MAX_ERROR_CHARS]


class Jobs:
    """This process's background tasks (cancelled at shutdown), the events that wake a
    periodic job early, and the locks that keep one pass of a job at a time."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self.wake_events: dict[str, asyncio.Event] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        self.again: set[str] = set()
        #: when a job's optional step is next due (`time.monotonic()`), by key
        self.due: dict[str, float] = {}
        #: the periodic jobs this process runs, by name: runs, last run, last error
        self.status: dict[str, JobStatus] = {}


def spawn(jobs: Jobs, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
    """Run `coro` in the background; it is cancelled at shutdown and its errors logged.
    It runs with the job limits, not those of a request that started it (the task
    copies the request's context)."""

    async def guarded() -> None:
        job_budget()
        no_deadline()
        use_index_lane()  # its embeddings never hold up a request's query (llm/lanes.py)
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = unavailable_reason(exc)
            if reason is None:
                log.exception("job.failed", job=name)
            else:  # the database is away (restarting, frozen): not a bug, no traceback
                log.warning("job.db_unavailable", job=name, reason=reason)

    task = asyncio.create_task(guarded(), name=name)
    jobs.tasks.add(task)
    task.add_done_callback(jobs.tasks.discard)
    return task


#: The live raw indexer's job name: an append wakes it (`wake`) once committed.
LIVE_INDEX_JOB = "memory.live_index"
#: The shortest gap between two runs of a job that is woken: appends arriving together
#: are taken by one run.
WAKE_MIN_GAP_SECONDS = 0.5


def wake(jobs: Jobs, name: str) -> None:
    """Have the periodic job `name` run now instead of at its next tick (no-op when it
    does not run in this process)."""
    event = jobs.wake_events.get(name)
    if event is not None:
        event.set()


async def periodic(
    jobs: Jobs, name: str, interval: float, fn: Callable[[], Awaitable[Any]]
) -> None:
    """Call `fn()` every `interval` seconds until cancelled, or sooner when `wake`d
    (at most every `WAKE_MIN_GAP_SECONDS`); a failure is logged and the loop goes on.
    Each run is counted and timed, with its lag: how late it started against the
    previous start plus `interval` (app/lib/metrics.py) — and noted in `jobs.status[name]`
    (this process's runs, last start and end, last error)."""
    use_index_lane()  # background work: its embeddings never hold up a request's query
    due = time.monotonic() + interval
    woken = jobs.wake_events.setdefault(name, asyncio.Event())
    status = jobs.status.setdefault(name, JobStatus(interval))
    status.interval = interval
    while True:
        try:
            async with asyncio.timeout(interval):
                await woken.wait()
            await asyncio.sleep(WAKE_MIN_GAP_SECONDS)
        except TimeoutError:
            pass
        woken.clear()
        started = time.monotonic()
        JOB_LAG_SECONDS.labels(name).set(max(0.0, started - due))
        JOB_RUNS.labels(name).inc()
        status.runs += 1
        status.running = True
        status.last_started = datetime.now(UTC)
        due = started + interval
        try:
            await fn()
            status.last_failed = False
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            JOB_FAILURES.labels(name).inc()
            status.failures += 1
            status.last_failed = True
            status.last_error = error_text(exc)
            status.last_error_at = datetime.now(UTC)
            reason = unavailable_reason(exc)
            if reason is None:
                log.exception("job.failed", job=name)
            else:  # the database is away (restarting, frozen): not a bug, no traceback
                log.warning("job.db_unavailable", job=name, reason=reason)
        finally:
            elapsed = time.monotonic() - started
            JOB_SECONDS.labels(name).observe(elapsed)
            status.running = False
            status.last_finished = datetime.now(UTC)
            status.last_seconds = elapsed


T = TypeVar("T")


def debounce(jobs: Jobs, key: str, gap: float) -> bool:
    """True at most once every `gap` seconds per `key` in this process (the caller
    then acts), False in between: a trigger that fires on every request starts at most
    one run per gap."""
    now = time.monotonic()
    if now < jobs.due.get(key, 0.0):
        return False
    jobs.due[key] = now + gap
    return True


async def unless_running(jobs: Jobs, key: str, fn: Callable[[], Awaitable[T]]) -> T | None:
    """`await fn()`, unless this process is already running it under `key`: a periodic
    pass and one a request spawned never overlap in one process. A call that finds the
    pass running returns None at once and has the running one go round once more when it
    ends, so work that arrived during a pass (a session that just went stale) is not left
    to the next periodic tick."""
    lock = jobs.locks.setdefault(key, asyncio.Lock())
    if lock.locked():
        jobs.again.add(key)
        return None
    async with lock:
        while True:
            jobs.again.discard(key)
            result = await fn()
            if key not in jobs.again:
                return result
