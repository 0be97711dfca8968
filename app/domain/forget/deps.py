"""The forget domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.facts.deps import provide_fact_service
from app.domain.forget.services import ForgetService
from app.domain.kernel.runtime import Runtime


def provide_forget_service(db: AsyncSession, runtime: Runtime) -> ForgetService:
    """Embeddings (of redacted error-memory entries) through the runtime's LLM gateway."""
    return ForgetService.of(db, runtime)


DEPENDENCIES = {
    "forget": Provide(provide_forget_service, sync_to_thread=False),
    "facts": Provide(provide_fact_service, sync_to_thread=False),
}
