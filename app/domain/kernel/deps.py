"""Shared dependencies: the request's database session (one transaction per request)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.kernel.ownership import SessionAccess


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
            for callback in session.info.pop(_AFTER_COMMIT, ()):
                callback()


_AFTER_COMMIT = "navi.after_commit"


def after_commit(session: AsyncSession, callback: Callable[[], None]) -> None:
    """Run `callback` once the request's transaction has committed (e.g. dropping cached
    state the transaction made stale); never when it rolls back."""
    session.info.setdefault(_AFTER_COMMIT, []).append(callback)


def provide_settings(state: State) -> Settings:
    return state.settings


def provide_session_access(db: AsyncSession) -> SessionAccess:
    """The ownership check of every route under /sessions/{id} (kernel/ownership.py)."""
    return SessionAccess(db)
