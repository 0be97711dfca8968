"""The one session query every domain needs: a session row in a viewer's scope."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session
from app.domain.kernel.access import Viewer


def visible(viewer: Viewer) -> Any:
    """The `sessions` filter of a viewer's scope (every session for an all-users viewer)."""
    return True if viewer.all_users else Session.user_id == viewer.user_id


class SessionLookupRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, session_id: uuid.UUID, viewer: Viewer) -> Session | None:
        return (
            await self.session.execute(
                select(Session).where(Session.id == session_id, visible(viewer))
            )
        ).scalar_one_or_none()
