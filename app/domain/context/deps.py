"""The context domain's services, provided to its handlers."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.context.services import ContextService
from app.domain.kernel.runtime import Runtime

__all__ = ["DEPENDENCIES", "provide_context_service"]


def provide_context_service(db: AsyncSession, runtime: Runtime) -> ContextService:
    return ContextService.of(db, runtime)


DEPENDENCIES = {"context": Provide(provide_context_service, sync_to_thread=False)}
