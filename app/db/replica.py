"""The one place that decides "replica or primary" for a read-only request.

`ReplicaRouter` holds the replica's engine (DATABASE_REPLICA_URL) and, refreshed every
REPLICA_CHECK_SECONDS by `watch()`, its health: reachable, in recovery, and its replay
lag — measured against samples of the primary's WAL position (the replica has replayed
the primary's position of time t ⇒ it is at most now − t behind). Reads go to the
primary when the replica is unreachable, lagging past REPLICA_MAX_LAG_SECONDS, or has
not replayed the caller's last write (read-your-writes: `min_lsn`, docs/scaling.md; the
users' last write positions are shared by the worker processes of one host,
app/db/write_positions.py);
each such read is counted in `navi_replica_fallbacks_total{reason}`, and a change of the
replica's state is logged once.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass
from typing import ClassVar

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.db.write_positions import WritePositions
from app.lib.metrics import REPLICA_FALLBACKS, REPLICA_LAG_SECONDS, REPLICA_READS

log = structlog.get_logger()

#: The header a response to a write carries, and the one a client echoes on a read.
WRITE_LSN_HEADER = "Navi-Write-LSN"
MIN_LSN_HEADER = "navi-min-lsn"
_LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")


@dataclass(slots=True)
class WriteMark:
    """Whose request (or job started by it) this task serves, and the WAL position of its
    last committed write: the `Navi-Write-LSN` of the response."""

    user_id: str | None
    lsn: int | None = None


#: Set by the auth guard for each request; tasks spawned by the request inherit it.
CURRENT_WRITER: ContextVar[WriteMark | None] = ContextVar("navi_writer", default=None)


def writing_for(user_id: str | None) -> WriteMark:
    """Mark the current task as serving `user_id` (its commits are remembered for them)."""
    mark = WriteMark(user_id)
    CURRENT_WRITER.set(mark)
    return mark


class WriteTrackingSession(AsyncSession):
    """A primary session that, when its transaction wrote, notes the primary's WAL
    position after the commit for the task's writer (read-your-writes). Every commit on
    the primary goes through here — a request's, a turn step's, a job's — so no writer
    can be missed. Only used when a replica is configured."""

    router: ClassVar[ReplicaRouter]

    async def commit(self) -> None:
        if not self.in_transaction():
            return await super().commit()
        wrote = bool(await self.scalar(text("SELECT pg_current_xact_id_if_assigned() IS NOT NULL")))
        await super().commit()
        if wrote:
            mark = CURRENT_WRITER.get()
            lsn = await self.router.note_write(mark.user_id if mark else None)
            if mark is not None and lsn is not None:
                mark.lsn = max(lsn, mark.lsn or 0)


def parse_lsn(value: str | None) -> int | None:
    """PostgreSQL's `X/Y` text form of a WAL position (two hex numbers of at most 8
    digits) as an int; None when malformed."""
    if not value or not _LSN.fullmatch(value):
        return None
    high, _, low = value.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


@dataclass(frozen=True, slots=True)
class ReplicaHealth:
    usable: bool
    reason: str | None  # why not usable: not_ready | unreachable | lag
    replay_lsn: int
    lag_seconds: float | None


_NOT_MEASURED = ReplicaHealth(False, "not_ready", 0, None)


class ReplicaRouter:
    def __init__(
        self,
        primary: AsyncEngine,
        replica: AsyncEngine,
        max_lag_seconds: float,
        check_seconds: float,
        positions: WritePositions | None = None,
    ) -> None:
        self.primary = primary
        self.replica = replica
        tracking = type("PrimarySession", (WriteTrackingSession,), {"router": self})
        #: The service's session factory while a replica is configured (commits noted).
        self.primary_sessions: async_sessionmaker[AsyncSession] = async_sessionmaker(
            primary, expire_on_commit=False, class_=tracking
        )
        self.replica_sessions = async_sessionmaker(replica, expire_on_commit=False)
        self.max_lag = max_lag_seconds
        self.check_seconds = check_seconds
        self.health = _NOT_MEASURED
        keep = int(2 * max(max_lag_seconds, 1.0) / check_seconds) + 2
        self._samples: deque[tuple[float, int]] = deque(maxlen=min(keep, 10_000))
        #: every user's last write position, shared with this host's other workers
        self.positions = positions or WritePositions()
        self._logged_state: str | None = None

    # ------------------------------------------------------------------ health
    async def refresh(self) -> ReplicaHealth:
        """Measure once: the primary's WAL position, then the replica's replay position."""
        try:
            async with self.primary.connect() as conn:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                primary_lsn = parse_lsn(
                    await conn.scalar(text("SELECT pg_current_wal_lsn()::text"))
                )
        except Exception as exc:  # noqa: BLE001 - the primary's trouble is not ours to report
            log.debug("db.replica_check_primary_failed", error=type(exc).__name__)
            return self.health
        now = time.monotonic()
        if primary_lsn is not None:
            self._samples.append((now, primary_lsn))
        try:
            async with self.replica.connect() as conn:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                row = (
                    await conn.execute(
                        text("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text")
                    )
                ).one()
        except Exception as exc:  # noqa: BLE001 - any failure: unreachable
            self._set(ReplicaHealth(False, "unreachable", 0, None), error=type(exc).__name__)
            return self.health
        replay = parse_lsn(row[1]) or 0
        if not row[0]:
            self._set(ReplicaHealth(False, "not_ready", replay, None), error="not in recovery")
            return self.health
        lag = self._lag(replay, primary_lsn, now)
        REPLICA_LAG_SECONDS.set(lag)
        if lag > self.max_lag:
            self._set(ReplicaHealth(False, "lag", replay, lag))
        else:
            self._set(ReplicaHealth(True, None, replay, lag))
        return self.health

    def _lag(self, replay: int, primary_lsn: int | None, now: float) -> float:
        if primary_lsn is not None and replay >= primary_lsn:
            return 0.0
        caught_up_at = [t for t, lsn in self._samples if lsn <= replay]
        if caught_up_at:
            return now - max(caught_up_at)
        return now - self._samples[0][0] if self._samples else 0.0

    def _set(self, health: ReplicaHealth, error: str | None = None) -> None:
        self.health = health
        state = "ok" if health.usable else health.reason or "unusable"
        if state != self._logged_state:  # once per change, not per request
            self._logged_state = state
            if health.usable:
                log.info("db.replica_usable", lag_seconds=health.lag_seconds)
            else:
                log.warning(
                    "db.replica_unusable",
                    reason=health.reason,
                    lag_seconds=health.lag_seconds,
                    error=error,
                    hint="reads go to the primary",
                )

    async def watch(self) -> None:
        """The periodic check (spawned at start-up; cancelled at shutdown)."""
        while True:
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow the
                # shutdown's cancellation when the check ends at that moment, and the
                # loop then never stops (seen as a hung shutdown)
                async with asyncio.timeout(max(5.0, 4 * self.check_seconds)):
                    await self.refresh()
            except TimeoutError:
                self._set(ReplicaHealth(False, "unreachable", 0, None), error="check timed out")
            await asyncio.sleep(self.check_seconds)

    # ------------------------------------------------------- read-your-writes
    async def note_write(self, user_id: str | None) -> int | None:
        """After a request's write committed: the primary's WAL position now (at or past
        the commit record), noted for `user_id` in the host's table."""
        try:
            async with self.primary.connect() as conn:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                lsn = parse_lsn(await conn.scalar(text("SELECT pg_current_wal_insert_lsn()::text")))
        except Exception as exc:  # noqa: BLE001 - the write is committed; reads of the
            # user may then see the replica before it replays it (logged, not raised)
            log.warning("db.write_lsn_unknown", user_id=user_id, error=type(exc).__name__)
            return None
        if lsn is not None and user_id is not None:
            self.positions.note(user_id, lsn)
        return lsn

    def min_lsn(self, user_id: str | None, echoed: int | None) -> int:
        """What a read must see: the client's echoed `Navi-Min-LSN`, and the user's last
        write through any worker of this host (its slot of the shared table)."""
        remembered = self.positions.get(user_id) if user_id is not None else 0
        return max(remembered, echoed or 0)

    # ------------------------------------------------------------- the choice
    async def read_session(self, min_lsn: int) -> AsyncSession:
        """A session on the replica when it is usable and has replayed `min_lsn`, else on
        the primary. The replica session's first statement asks its replay position: one
        round trip that checks the connection and read-your-writes together."""
        health = self.health
        if not health.usable:
            return self._fallback(health.reason or "not_ready")
        session = self.replica_sessions()
        try:
            replay = parse_lsn(await session.scalar(text("SELECT pg_last_wal_replay_lsn()::text")))
        except Exception as exc:  # noqa: BLE001 - the replica went away since the last check
            await session.close()
            self._set(ReplicaHealth(False, "unreachable", 0, None), error=type(exc).__name__)
            return self._fallback("unreachable")
        if replay is None or replay < min_lsn:
            await session.close()
            return self._fallback("behind_write")
        REPLICA_READS.inc()
        session.info["navi.read_target"] = "replica"
        session.info["navi.side_sessions"] = self.replica_sessions
        return session

    def _fallback(self, reason: str) -> AsyncSession:
        REPLICA_FALLBACKS.labels(reason=reason).inc()
        session = self.primary_sessions()
        session.info["navi.read_target"] = "primary"
        return session
