"""All SQL of the files domain (the files themselves live on disk)."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session


class FilesRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def existing_session_ids(self, ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
        """Which of `ids` are sessions (system-wide: the cleanup job's one query)."""
        if not ids:
            return set()
        rows = await self.session.execute(select(Session.id).where(Session.id.in_(list(ids))))
        return set(rows.scalars())

    async def user_session_ids(self, user_id: str) -> list[uuid.UUID]:
        """The ids of the user's sessions (their file directories make the user's usage)."""
        rows = await self.session.execute(select(Session.id).where(Session.user_id == user_id))
        return list(rows.scalars())
