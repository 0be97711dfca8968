"""The session hooks of the running service: a new session starts fact extraction of
the sessions that went quiet (seed: facts); an append with a usage report runs the
post-turn context check (calibration, compression); a profile switch prices the context
against the new window at once."""

from __future__ import annotations

import uuid
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.context.services import ContextService
from app.domain.facts.extraction import extract_stale_sessions
from app.domain.kernel.access import Viewer
from app.domain.kernel.events import ContextEvent, UsageIn
from app.domain.kernel.jobs import spawn
from app.domain.kernel.runtime import AfterCommit, Runtime, SessionHooks


class ContextSessionHooks(SessionHooks):
    def created(self, runtime: Runtime) -> None:
        if runtime.settings.extraction_enabled:
            # A new session is when older ones went quiet: learn from them.
            spawn(runtime.jobs, extract_stale_sessions(runtime), "memory.extraction")

    async def appended(
        self,
        db: AsyncSession,
        runtime: Runtime,
        session_id: uuid.UUID,
        viewer: Viewer,
        usage: UsageIn,
    ) -> AfterCommit | None:
        service = ContextService.of(db, runtime)
        due = await service.after_append(session_id, viewer, usage)
        return None if due is None else partial(service.compress_post_turn, due)

    async def profile_changed(
        self, db: AsyncSession, runtime: Runtime, session_id: uuid.UUID, viewer: Viewer
    ) -> list[ContextEvent]:
        return await ContextService.of(db, runtime).profile_changed(session_id, viewer)
