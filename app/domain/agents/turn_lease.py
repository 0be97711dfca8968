"""A turn's lease on its session: one turn at a time per session.

:meth:`TurnLease.claim` (from ``TurnLoop.begin``) takes the lease — a conditional UPDATE
of ``session_metadata``, so it holds across worker processes, with no connection or row
lock held during the turn — or answers 409 Conflict; the run drops it when it ends,
however it ends (:meth:`TurnLease.release`).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import structlog

from app.db.engine import transaction
from app.domain.kernel.access import Viewer
from app.domain.kernel.jobs import spawn
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.repositories import TURN_LEASE_KEY, SessionRepository
from app.lib.errors import Conflict

#: Seconds between the retries of a lease release that failed (about a minute in all).
LEASE_RELEASE_RETRIES = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
#: A turn's lease on its session lasts this long and the running turn renews it every
#: TURN_LEASE_RENEW_SECONDS: a process that dies mid-turn (kill -9) leaves a lease that
#: expires within a minute, not at the turn's deadline (`make soak` found sessions
#: refusing turns for TURN_DEADLINE_SECONDS + 60 s, 6 minutes by default).
TURN_LEASE_SECONDS = 60.0
TURN_LEASE_RENEW_SECONDS = 15.0

log = structlog.get_logger("app.agents.turns")


class TurnLease:
    def __init__(self, runtime: Runtime, session_id: uuid.UUID, viewer: Viewer) -> None:
        self.runtime, self.session_id, self.viewer = runtime, session_id, viewer
        #: the lease's token and the session's owner (`claim`)
        self.token = uuid.uuid4().hex
        self.owner = ""
        self._renewal: asyncio.Task[Any] | None = None  # keeps the lease while the turn runs

    async def claim(self) -> None:
        """Take the session's turn lease (``session_metadata["running_turn"]``) in a
        transaction of its own: one conditional UPDATE, so one turn at a time per session
        across processes, and no connection or row lock held while the turn runs. The
        lease lasts ``TURN_LEASE_SECONDS``, renewed while the turn runs (`_renew`): a
        process that dies mid-turn leaves a lease that soon expires."""
        seconds = TURN_LEASE_SECONDS
        async with transaction(self.runtime.session_factory) as db:
            session = await SessionAccess(db).get(self.session_id, self.viewer)
            self.owner = session.user_id
            taken = await SessionRepository(db).take_lease(
                self.owner, self.session_id, TURN_LEASE_KEY, self.token, seconds
            )
        if not taken:
            raise Conflict("a turn is already running on this session")
        self._renewal = spawn(self.runtime.jobs, self._renew(), "agents.turn_lease_renew")

    async def _renew(self) -> None:
        """Keep this turn's lease until `release` cancels this; a renewal the database
        misses is tried again at the next tick."""
        owner = self.owner
        while True:
            await asyncio.sleep(TURN_LEASE_RENEW_SECONDS)
            try:
                async with transaction(self.runtime.session_factory) as db:
                    held = await SessionRepository(db).renew_lease(
                        owner, self.session_id, TURN_LEASE_KEY, self.token, TURN_LEASE_SECONDS
                    )
            except Exception:
                log.warning("turn.lease_renew_failed", session_id=str(self.session_id))
                continue
            if not held:
                log.warning("turn.lease_lost", session_id=str(self.session_id))
                return

    async def release(self) -> None:
        """Drop this turn's lease (another turn's, taken after ours expired, is kept)."""
        if not self.owner:
            return
        owner, self.owner = self.owner, ""
        if self._renewal is not None:
            self._renewal.cancel()
        try:
            await self._drop_lease(owner)
        except Exception:  # the database is away: try again in the background
            log.warning("turn.lease_release_failed", session_id=str(self.session_id))
            spawn(self.runtime.jobs, self._release_later(owner), "agents.turn_lease_release")

    async def _drop_lease(self, owner: str) -> None:
        async with transaction(self.runtime.session_factory) as db:
            await SessionRepository(db).drop_lease(
                owner, self.session_id, TURN_LEASE_KEY, self.token
            )

    async def _release_later(self, owner: str) -> None:
        """A release that failed (the database restarting), retried for about a minute:
        left alone, the lease would refuse the session's next turns (409) until it
        expires (`make soak`)."""
        for delay in LEASE_RELEASE_RETRIES:
            await asyncio.sleep(delay)
            try:
                await self._drop_lease(owner)
            except Exception:
                continue
            log.info("turn.lease_released_late", session_id=str(self.session_id))
            return
