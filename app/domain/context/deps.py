"""The context domain's services, provided to its handlers."""

from __future__ import annotations

from litestar.datastructures import State
from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.context.services import ContextService, context_service

__all__ = ["DEPENDENCIES", "provide_context_service"]


def provide_context_service(db: AsyncSession, settings: Settings, state: State) -> ContextService:
    return context_service(db, settings, state)


DEPENDENCIES = {"context": Provide(provide_context_service, sync_to_thread=False)}
