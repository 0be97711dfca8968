"""A session's scratchpad: its working notes (sketches), one value per section.

The caller resolves the session first (`SessionAccess`); the sections belong to the
session's owner (`owner`), whoever reads or writes them."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session, Sketch
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.sketches.repositories import SCRATCHPAD, SketchRepository
from app.lib.errors import NotFound
from app.lib.inputs import scrub_text


def owner(session: Session, principal: Principal) -> str:
    """Whose scratchpad a session's is: its user's (the caller's for a session without one)."""
    return session.user_id or principal.id


class SketchService:
    def __init__(self, db: AsyncSession) -> None:
        self.repo = SketchRepository(db)

    @classmethod
    def of(cls, db: AsyncSession, runtime: Runtime) -> SketchService:
        """The service on `db` (it needs nothing else of the runtime)."""
        return cls(db)

    async def list_page(
        self, user_id: str, session_id: uuid.UUID, limit: int, offset: int
    ) -> tuple[list[Sketch], int]:
        return await self.repo.list_page(user_id, SCRATCHPAD, session_id, limit, offset)

    async def list_for_user(
        self, user_id: str, limit: int, offset: int
    ) -> tuple[list[Sketch], int]:
        """The user's scratchpad sections of every session, most recently updated first."""
        return await self.repo.list_for_user(user_id, SCRATCHPAD, limit, offset)

    async def put(self, user_id: str, session_id: uuid.UUID, section: str, value: str) -> Sketch:
        """Set a section (created or replaced) and return it as stored."""
        # The value is kept whatever a tool printed: a NUL becomes U+FFFD.
        await self.repo.put(user_id, SCRATCHPAD, session_id, section, scrub_text(value))
        row = await self.repo.get(user_id, SCRATCHPAD, session_id, section)
        assert row is not None
        return row

    async def get(self, user_id: str, session_id: uuid.UUID, section: str) -> Sketch:
        """The section, or 404."""
        row = await self.repo.get(user_id, SCRATCHPAD, session_id, section)
        if row is None:
            raise NotFound(f"no scratchpad section {section!r}")
        return row

    async def delete(self, user_id: str, session_id: uuid.UUID, section: str) -> None:
        """Delete the section, or 404."""
        if not await self.repo.delete(user_id, SCRATCHPAD, session_id, section):
            raise NotFound(f"no scratchpad section {section!r}")
