"""The error memory's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.datastructures import State
from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.error_memory.services import ErrorMemoryService


def provide_error_memory_service(
    db: AsyncSession, state: State, settings: Settings
) -> ErrorMemoryService:
    return ErrorMemoryService(db, state.llm, settings)


DEPENDENCIES = {"errors": Provide(provide_error_memory_service, sync_to_thread=False)}
