"""The facts domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.datastructures import State
from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.facts.services import FactService


def provide_fact_service(db: AsyncSession, state: State) -> FactService:
    """Embeddings through the app's LLM gateway (only saving and searching use it)."""
    return FactService(db, state.llm)


DEPENDENCIES = {"facts": Provide(provide_fact_service, sync_to_thread=False)}
