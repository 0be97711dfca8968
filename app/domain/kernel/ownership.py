"""A session resolved for a viewer, or the refusal: the check every domain shares."""

from __future__ import annotations

import uuid
from typing import NoReturn

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session
from app.domain.kernel.access import Viewer
from app.domain.kernel.repositories import SessionLookupRepository
from app.lib.errors import Forbidden, NotFound

log = structlog.get_logger()


class SessionAccess:
    """Resolves a session for a viewer — the one ownership check every domain that hangs
    off a session (files, scratchpad, search, history, context, shares) goes through.

    404 when the viewer may not see the session (its existence is never confirmed); 403
    for an editor who may read it but not change it."""

    def __init__(self, db: AsyncSession) -> None:
        self.repo = SessionLookupRepository(db)

    async def get(self, session_id: uuid.UUID, viewer: Viewer) -> Session:
        row = await self.repo.get(session_id, viewer)
        if row is None:
            await self.refuse(session_id, viewer)
        return row

    async def owner(self, session_id: uuid.UUID, viewer: Viewer) -> str:
        """`get`'s check for a caller that needs only the session's user (its tenant
        key): one column instead of the row with its JSON documents."""
        user_id = await self.repo.owner(session_id, viewer)
        if user_id is None:
            await self.refuse(session_id, viewer)
        return user_id

    async def refuse(self, session_id: uuid.UUID, viewer: Viewer) -> NoReturn:
        """The answer when a session query found nothing in the viewer's scope."""
        if viewer.modifies and await self.repo.get(session_id, viewer.reader()) is not None:
            log.info("session.write_refused", session_id=str(session_id), user_id=viewer.user_id)
            raise Forbidden(
                "session: navi.sessions.read_all permits reading it; "
                "only its owner or an admin may change it"
            )
        raise NotFound(f"no session {session_id}")
