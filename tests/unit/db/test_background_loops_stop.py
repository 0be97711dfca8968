"""The service's background loops stop when cancelled at shutdown, even when the
cancellation lands as one of their waits ends (Python 3.11's `asyncio.wait_for`
swallows it then, and a loop around it never stops: a hung shutdown), and a task that
still ignores it holds the shutdown for a bounded time only."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

import app.asgi.lifespan as lifespan
from app.db.embedded import EmbeddedWatchdog
from app.db.replica import ReplicaRouter


async def test_replica_watch_stops_when_cancelled_as_a_check_ends() -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none"  # never connected to
    router = ReplicaRouter(create_async_engine(url), create_async_engine(url), 5.0, 0.01)
    watch: asyncio.Task[Any] | None = None
    checks = 0

    async def refresh() -> Any:
        nonlocal checks
        checks += 1
        assert watch is not None
        watch.cancel()  # the shutdown, in the same step as the check's end
        return router.health

    router.refresh = refresh  # type: ignore[method-assign]
    watch = asyncio.create_task(router.watch())
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(watch), timeout=2.0)
    assert watch.cancelled() and checks == 1


async def test_embedded_watchdog_stops_when_cancelled_as_it_is_woken(tmp_path: Any) -> None:
    dog = EmbeddedWatchdog(tmp_path, 30.0)
    task = asyncio.create_task(dog.run())
    await asyncio.sleep(0)  # waiting for a poke
    dog.poke()
    task.cancel()  # lands as the wait ends
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(task), timeout=2.0)
    assert task.cancelled()


async def test_a_task_that_ignores_cancellation_holds_the_shutdown_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lifespan, "SHUTDOWN_TASKS_SECONDS", 0.2)
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue  # ignores it

    async def polite() -> None:
        await asyncio.sleep(10)

    tasks = {asyncio.create_task(stubborn(), name="stubborn"), asyncio.create_task(polite())}
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await lifespan._cancel_tasks(tasks)
    assert loop.time() - started < 1.0
    assert [t.get_name() for t in tasks if not t.done()] == ["stubborn"]
    release.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
