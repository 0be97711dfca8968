"""One leader per periodic job: a PostgreSQL advisory lock keyed by the job's name.

Every worker process of every replica starts the same periodic jobs (`app/asgi/lifespan.py`);
without a leader each of them would scan for the same work at every tick. A tick first
takes `pg_try_advisory_xact_lock(hash('navi.job:' || key))` in a transaction of its own
and holds it — that transaction's one statement — until the tick ends: the first
process to reach the tick runs it, the others skip theirs at once (no wait, no queue).
A process that dies mid-tick loses its connection, and the lock with it. The app takes
the lock on a connection opened for the tick (`Runtime.leader_sessions`, no pool): a
tick's work uses the request pool like any job, the lock itself never holds one of its
connections (with a pool of one, the work would otherwise wait on the lock's).

The lock is a transaction's, not a session's: a transaction keeps its server connection
under PgBouncer's transaction pooling, a session-level lock would not (and could be
left behind on a pooled connection). On Citus the lock lives on the coordinator, which
every application connection reaches. The open transaction holds no snapshot between
its statements (READ COMMITTED), so it holds back no vacuum.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

log = structlog.get_logger()

T = TypeVar("T")


class LeaderLockRepository:
    """The advisory lock of a job's leader (no table: a lock on a key)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def try_lead(self, key: str) -> bool:
        """Whether this transaction now leads `key` (until it ends); never waits."""
        row = await self.session.execute(
            text("SELECT pg_try_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": f"navi.job:{key}"},
        )
        return bool(row.scalar_one())


async def run_as_leader(
    factory: async_sessionmaker[AsyncSession], key: str, fn: Callable[[], Awaitable[T]]
) -> tuple[bool, T | None]:
    """`(True, await fn())` when this process takes the lead of `key` (held while `fn`
    runs, released after, even when it raises); `(False, None)` at once when another
    process holds it."""
    async with factory() as lock_db:
        try:
            if not await LeaderLockRepository(lock_db).try_lead(key):
                log.debug("job.led_elsewhere", job=key)
                return False, None
            return True, await fn()
        finally:
            await lock_db.rollback()  # ends the transaction: the lock goes with it
