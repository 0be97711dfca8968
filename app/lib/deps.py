"""Shared dependencies: the request's database session (one transaction per request)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings


async def provide_db(state: State) -> AsyncGenerator[AsyncSession, None]:
    """Committed after the handler returns; rolled back when it raises.

    Services and repositories only flush(); this is the one place a request commits.
    The cleanup runs before the response is sent, so a failed commit is a 500, never a
    2xx for data that was not stored.
    """
    async with state.session_factory() as session:
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        else:
            await session.commit()


def provide_settings(state: State) -> Settings:
    return state.settings
