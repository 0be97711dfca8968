"""The error memory's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.error_memory.services import ErrorMemoryService
from app.domain.kernel.runtime import Runtime


def provide_error_memory_service(db: AsyncSession, runtime: Runtime) -> ErrorMemoryService:
    return ErrorMemoryService.of(db, runtime)


DEPENDENCIES = {"errors": Provide(provide_error_memory_service, sync_to_thread=False)}
