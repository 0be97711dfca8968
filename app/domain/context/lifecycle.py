"""The session hooks of the running service: a new session starts fact extraction of
the sessions that went quiet (seed: facts); an append with a usage report runs the
post-turn context check (calibration, compression); a profile switch prices the context
against the new window at once."""

from __future__ import annotations

import uuid

from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.context.services import context_service
from app.domain.facts.extraction import extract_stale_sessions
from app.domain.kernel.access import Viewer
from app.domain.kernel.events import ContextEvent, UsageIn
from app.domain.kernel.jobs import spawn
from app.domain.sessions.hooks import SessionHooks


class ContextSessionHooks(SessionHooks):
    def created(self, state: State, settings: Settings) -> None:
        if settings.extraction_enabled:
            # A new session is when older ones went quiet: learn from them.
            spawn(state, extract_stale_sessions(state), "memory.extraction")

    async def appended(
        self,
        db: AsyncSession,
        settings: Settings,
        state: State,
        session_id: uuid.UUID,
        viewer: Viewer,
        usage: UsageIn,
    ) -> list[ContextEvent]:
        return await context_service(db, settings, state).after_append(session_id, viewer, usage)

    async def profile_changed(
        self,
        db: AsyncSession,
        settings: Settings,
        state: State,
        session_id: uuid.UUID,
        viewer: Viewer,
    ) -> list[ContextEvent]:
        return await context_service(db, settings, state).profile_changed(session_id, viewer)
