"""The sessions domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.sessions.services import SessionService


def provide_session_service(db: AsyncSession, settings: Settings) -> SessionService:
    return SessionService(db, settings)


DEPENDENCIES = {"sessions": Provide(provide_session_service, sync_to_thread=False)}
