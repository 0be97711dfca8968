"""The unified search with every store the service has, provided to the search handlers.

`unified_search` and `fact_search` are plain functions for the callers outside a request
(the pre-turn injection and recall, the benches).
"""

from __future__ import annotations

from litestar.datastructures import State
from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.domain.error_memory.services import unified_error_search
from app.domain.facts.memory_hits import search_fact_hits
from app.domain.kernel.deps import side_sessions_of
from app.domain.search.services import FactSearch, UnifiedSearch
from app.llm.gateway import LLMGateway

__all__ = ["DEPENDENCIES", "fact_search", "provide_unified_search", "unified_search"]


def fact_search() -> FactSearch | None:
    """The facts store's search as unified search expects it."""
    return search_fact_hits


def unified_search(
    db: AsyncSession,
    llm: LLMGateway | None,
    settings: Settings,
    side_sessions: async_sessionmaker[AsyncSession] | None = None,
    errors_db: AsyncSession | None = None,
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
        errors_db=errors_db,
    )


def provide_unified_search(
    db: AsyncSession, primary_db: AsyncSession, settings: Settings, state: State
) -> UnifiedSearch:
    """`db` may be the read replica's (the search routes are READ_ONLY); the errors scope,
    which renews what it finds, writes through `primary_db`."""
    return unified_search(db, state.llm, settings, side_sessions_of(db, state), primary_db)


DEPENDENCIES = {"search": Provide(provide_unified_search, sync_to_thread=False)}
