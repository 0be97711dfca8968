"""The chat_history tool's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.history.services import HistorySearch
from app.domain.kernel.runtime import Runtime


def provide_history_search(
    db: AsyncSession, read_db: AsyncSession, runtime: Runtime
) -> HistorySearch:
    """Keyword and recent modes read `read_db` (the replica when usable); the semantic
    mode embeds messages lazily, a write: it runs on the primary (`db`)."""
    return HistorySearch.of(read_db, runtime, primary=db)


DEPENDENCIES = {"history": Provide(provide_history_search, sync_to_thread=False)}
