"""The periodic jobs' metrics (app/domain/kernel/jobs.py → app/lib/metrics.py): runs,
failures, durations and the lag of a run behind its schedule."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY

from app.domain.kernel.jobs import Jobs, periodic

JOB = "test.metrics_job"


def value(name: str) -> float:
    return REGISTRY.get_sample_value(name, {"job": JOB}) or 0.0


async def test_periodic_counts_runs_failures_and_lag() -> None:
    runs, failures, timed = (
        value("navi_job_runs_total"),
        value("navi_job_failures_total"),
        value("navi_job_seconds_count"),
    )
    seen: list[float] = []
    third = asyncio.Event()

    async def job() -> None:
        seen.append(value("navi_job_lag_seconds"))  # set before the run starts
        if len(seen) == 1:
            raise RuntimeError("boom")  # logged, counted, the loop goes on
        if len(seen) == 2:
            await asyncio.sleep(0.2)  # the next run starts that much behind
        if len(seen) == 3:
            third.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(periodic(Jobs(), JOB, 0.01, job))
    await asyncio.wait_for(third.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert value("navi_job_runs_total") - runs == 3
    assert value("navi_job_failures_total") - failures == 1
    assert value("navi_job_seconds_count") - timed == 3  # the cancelled run too
    assert seen[2] >= 0.2  # the second run's 0.2 s, on top of the interval
