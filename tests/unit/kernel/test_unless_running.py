"""`unless_running`: one pass at a time per process, and a call that arrives during a
pass is not lost — the running pass goes round once more (calls coalesce)."""

from __future__ import annotations

import asyncio

from app.domain.kernel.jobs import Jobs, unless_running


async def test_a_call_during_a_pass_makes_it_run_once_more() -> None:
    jobs = Jobs()
    started: list[int] = []
    release = asyncio.Event()

    async def pass_() -> int:
        started.append(len(started))
        if len(started) == 1:
            await release.wait()
        return len(started)

    first = asyncio.create_task(unless_running(jobs, "k", pass_))
    await asyncio.sleep(0)
    assert started == [0]
    # three calls while the first pass runs: each returns at once, together one more pass
    assert [await unless_running(jobs, "k", pass_) for _ in range(3)] == [None] * 3
    release.set()
    assert await first == 2
    assert started == [0, 1]
    # idle again: a call runs exactly one pass
    assert await unless_running(jobs, "k", pass_) == 3
    assert started == [0, 1, 2]


async def test_no_rerun_without_a_call_during_the_pass() -> None:
    jobs = Jobs()
    runs = 0

    async def pass_() -> None:
        nonlocal runs
        runs += 1

    await unless_running(jobs, "k", pass_)
    await unless_running(jobs, "k", pass_)
    assert runs == 2
