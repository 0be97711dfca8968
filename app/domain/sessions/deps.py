"""The sessions domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.kernel.runtime import Runtime
from app.domain.sessions.services import SessionService


def provide_session_service(db: AsyncSession, runtime: Runtime) -> SessionService:
    return SessionService.of(db, runtime)


DEPENDENCIES = {"sessions": Provide(provide_session_service, sync_to_thread=False)}
