"""The forget domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.datastructures import State
from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.facts.deps import provide_fact_service
from app.domain.forget.services import ForgetService


def provide_forget_service(db: AsyncSession, state: State, settings: Settings) -> ForgetService:
    """Embeddings (of redacted error-memory entries) through the app's LLM gateway."""
    return ForgetService(db, state.llm, settings)


DEPENDENCIES = {
    "forget": Provide(provide_forget_service, sync_to_thread=False),
    "facts": Provide(provide_fact_service, sync_to_thread=False),
}
