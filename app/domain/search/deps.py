"""The unified search with every store the service has, provided to the search handlers."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.kernel.runtime import Runtime
from app.domain.search.services import UnifiedSearch

__all__ = ["DEPENDENCIES", "provide_unified_search"]


def provide_unified_search(
    db: AsyncSession, primary_db: AsyncSession, runtime: Runtime
) -> UnifiedSearch:
    """`db` may be the read replica's (the search routes are READ_ONLY); the errors scope,
    which renews what it finds, writes through `primary_db`."""
    return UnifiedSearch.of(db, runtime, primary=primary_db)


DEPENDENCIES = {"search": Provide(provide_unified_search, sync_to_thread=False)}
