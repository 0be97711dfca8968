"""Builds the unified search with every store the service has."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.memory.search_service import UnifiedSearch
from app.llm.gateway import LLMGateway


def unified_search(db: AsyncSession, llm: LLMGateway | None, settings: Settings) -> UnifiedSearch:
    # The facts store plugs in here once its search is available (see app/domain/facts).
    return UnifiedSearch(db, llm, settings)
