"""The session hooks of the running service: a new session starts fact extraction of
the sessions that went quiet (seed: facts; debounced, and only where no other process
runs it); an append with a usage report runs the
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
from app.domain.kernel.jobs import debounce, spawn
from app.domain.kernel.leader import run_as_leader
from app.domain.kernel.runtime import AfterCommit, Runtime, SessionHooks

#: The extraction job's name (its leader lock's key, `app/routes.py`) and the key of the
#: per-create trigger's debounce.
EXTRACTION_JOB = "memory.extraction"
EXTRACTION_TRIGGER = "memory.extraction.trigger"


class ContextSessionHooks(SessionHooks):
    def created(self, runtime: Runtime) -> None:
        settings = runtime.settings
        # A new session is when older ones went quiet: learn from them — at most one
        # pass per MEMORY_EXTRACTION_TRIGGER_GAP_SECONDS in this process, and only where
        # no other process runs one (the periodic job's leader lock).
        gap = settings.extraction_trigger_gap_seconds
        if settings.extraction_enabled and debounce(runtime.jobs, EXTRACTION_TRIGGER, gap):
            run = run_as_leader(
                runtime.leader_sessions or runtime.session_factory,
                EXTRACTION_JOB,
                lambda: extract_stale_sessions(runtime),
            )
            spawn(runtime.jobs, run, EXTRACTION_JOB)

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
