"""Builds the unified search with every store the service has."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.domain.error_memory.services import unified_error_search
from app.domain.search.services import FactSearch, UnifiedSearch
from app.llm.gateway import LLMGateway


def fact_search() -> FactSearch | None:
    """The facts store's search as unified search expects it."""
    from app.domain.facts.memory_hits import search_fact_hits  # facts imports memory

    return search_fact_hits


def unified_search(
    db: AsyncSession,
    llm: LLMGateway | None,
    settings: Settings,
    side_sessions: async_sessionmaker[AsyncSession] | None = None,
) -> UnifiedSearch:
    """`side_sessions`: the service's session factory, so the facts and sketches are
    read on a second connection while the raw index is searched (scope `all`)."""
    return UnifiedSearch(
        db,
        llm,
        settings,
        facts=fact_search(),
        errors=unified_error_search(settings),
        side_sessions=side_sessions,
    )
