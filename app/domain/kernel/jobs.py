"""Periodic background jobs and fire-and-forget tasks, tied to the app's lifespan."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog
from litestar.datastructures import State

from app.db.faults import job_budget
from app.lib.metrics import JOB_FAILURES, JOB_LAG_SECONDS, JOB_RUNS, JOB_SECONDS
from app.llm.deadline import no_deadline

log = structlog.get_logger()


def spawn(state: State, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
    """Run `coro` in the background; it is cancelled at shutdown and its errors logged.
    It runs with the job limits, not those of a request that started it (the task
    copies the request's context)."""

    async def guarded() -> None:
        job_budget()
        no_deadline()
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("job.failed", job=name)

    task = asyncio.create_task(guarded(), name=name)
    state.tasks.add(task)
    task.add_done_callback(state.tasks.discard)
    return task


#: The live raw indexer's job name: an append wakes it (`wake`) once committed.
LIVE_INDEX_JOB = "memory.live_index"
#: The shortest gap between two runs of a job that is woken: appends arriving together
#: are taken by one run.
WAKE_MIN_GAP_SECONDS = 0.2


def _wake_event(state: State, name: str) -> asyncio.Event:
    key = f"wake:{name}"
    event = state.get(key)
    if event is None:
        event = state[key] = asyncio.Event()
    return event


def wake(state: State, name: str) -> None:
    """Have the periodic job `name` run now instead of at its next tick (no-op when it
    does not run in this process)."""
    event = state.get(f"wake:{name}")
    if event is not None:
        event.set()


async def periodic(
    state: State, name: str, interval: float, fn: Callable[[State], Awaitable[Any]]
) -> None:
    """Call `fn(state)` every `interval` seconds until cancelled, or sooner when `wake`d
    (at most every `WAKE_MIN_GAP_SECONDS`); a failure is logged and the loop goes on.
    Each run is counted and timed, with its lag: how late it started against the
    previous start plus `interval` (app/lib/metrics.py)."""
    due = time.monotonic() + interval
    woken = _wake_event(state, name)
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
        due = started + interval
        try:
            await fn(state)
        except asyncio.CancelledError:
            raise
        except Exception:
            JOB_FAILURES.labels(name).inc()
            log.exception("job.failed", job=name)
        finally:
            JOB_SECONDS.labels(name).observe(time.monotonic() - started)


T = TypeVar("T")


async def unless_running(state: State, key: str, fn: Callable[[], Awaitable[T]]) -> T | None:
    """`await fn()`, unless this process is already running it under `key`: a periodic
    pass and one a request spawned never overlap in one process. A call that finds the
    pass running returns None at once and has the running one go round once more when it
    ends, so work that arrived during a pass (a session that just went stale) is not left
    to the next periodic tick."""
    lock = state.get(key)
    if lock is None:
        lock = state[key] = asyncio.Lock()
    again = f"{key}:again"
    if lock.locked():
        state[again] = True
        return None
    async with lock:
        while True:
            state[again] = False
            result = await fn()
            if not state.get(again):
                return result
