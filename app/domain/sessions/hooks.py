"""What happens elsewhere when a session is created or appended to — declared here,
implemented above (`app/domain/context/lifecycle.py`), wired by the app root as the
`session_hooks` dependency. Sessions never import the domains that react to them."""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod

from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.kernel.access import Viewer
from app.domain.kernel.events import ContextEvent, UsageIn


class SessionHooks(ABC):
    @abstractmethod
    def created(self, state: State, settings: Settings) -> None:
        """A session was created (the request has not committed yet)."""

    @abstractmethod
    async def appended(
        self,
        db: AsyncSession,
        settings: Settings,
        state: State,
        session_id: uuid.UUID,
        viewer: Viewer,
        usage: UsageIn,
    ) -> list[ContextEvent]:
        """Messages were appended with the turn's usage report: the post-turn check."""

    @abstractmethod
    async def profile_changed(
        self,
        db: AsyncSession,
        settings: Settings,
        state: State,
        session_id: uuid.UUID,
        viewer: Viewer,
    ) -> list[ContextEvent]:
        """The session's profile was switched: its window applies now (compress when the
        context no longer fits)."""
