"""The pool's liveness check (`DB_PING_IDLE_SECONDS`): a pooled connection the server
dropped while it sat idle is replaced before use; a recently used one is not pinged."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import create_engine


async def _backend_pid(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


@asynccontextmanager
async def _dropped_while_pooled(
    db_url: str, ping_idle: float
) -> AsyncIterator[tuple[AsyncEngine, int]]:
    """An engine (one pooled connection, `DB_PING_IDLE_SECONDS=ping_idle`) whose pooled
    connection the server has just terminated, 0.2 s after its last use; and its pid."""
    settings = replace(
        Settings(), db_pool_size=1, db_max_overflow=1, db_ping_idle_seconds=ping_idle
    )
    engine = create_engine(db_url, settings)
    other = create_engine(db_url)
    try:
        pid = await _backend_pid(engine)
        async with other.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(CAST(:p AS integer))"), {"p": pid})
        await asyncio.sleep(0.2)
        yield engine, pid
    finally:
        await engine.dispose()
        await other.dispose()


async def test_an_idle_connection_dropped_by_the_server_is_replaced(db_url: str) -> None:
    async with _dropped_while_pooled(db_url, 0.05) as (engine, first):
        second = await _backend_pid(engine)  # idle past the threshold: pinged, replaced
        assert second != first
        assert await _backend_pid(engine) == second  # the new one is kept


async def test_a_recently_used_connection_is_not_pinged(db_url: str) -> None:
    """Within the threshold no round trip checks it: a connection dropped in that window
    fails the statement that uses it (a disconnect), and the next checkout gets a new one."""
    async with _dropped_while_pooled(db_url, 60) as (engine, first):
        with pytest.raises(DBAPIError) as failed:
            await _backend_pid(engine)
        assert failed.value.connection_invalidated
        assert await _backend_pid(engine) != first
