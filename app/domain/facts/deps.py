"""The facts domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.facts.services import FactService
from app.domain.kernel.runtime import Runtime


def provide_fact_service(db: AsyncSession, runtime: Runtime) -> FactService:
    """Embeddings through the runtime's LLM gateway (only saving and searching use it)."""
    return FactService.of(db, runtime)


DEPENDENCIES = {"facts": Provide(provide_fact_service, sync_to_thread=False)}
