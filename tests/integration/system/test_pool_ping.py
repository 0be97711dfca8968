"""The pool's liveness check (`DB_PING_IDLE_SECONDS`): a pooled connection the server
dropped while it sat idle is replaced before use; a recently used one is not pinged."""

import asyncio
from dataclasses import replace

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.config import Settings
from app.db.engine import create_engine


async def _backend_pid(engine) -> int:  # type: ignore[no-untyped-def]
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _kill(engine, pid: int) -> None:  # type: ignore[no-untyped-def]
    async with engine.connect() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})


async def test_an_idle_connection_dropped_by_the_server_is_replaced(db_url: str) -> None:
    settings = replace(Settings(), db_pool_size=1, db_max_overflow=1, db_ping_idle_seconds=0.05)
    engine = create_engine(db_url, settings)
    other = create_engine(db_url)
    try:
        first = await _backend_pid(engine)
        await _kill(other, first)
        await asyncio.sleep(0.2)  # idle past the threshold: pinged, found dead, replaced
        second = await _backend_pid(engine)
        assert second != first
        assert await _backend_pid(engine) == second  # the new one is kept
    finally:
        await engine.dispose()
        await other.dispose()


async def test_a_recently_used_connection_is_not_pinged(db_url: str) -> None:
    """Within the threshold no round trip checks it: a connection dropped in that window
    fails the statement that uses it (a disconnect), and the next checkout gets a new one."""
    settings = replace(Settings(), db_pool_size=1, db_max_overflow=1, db_ping_idle_seconds=60)
    engine = create_engine(db_url, settings)
    other = create_engine(db_url)
    try:
        first = await _backend_pid(engine)
        await _kill(other, first)
        await asyncio.sleep(0.2)
        with pytest.raises(DBAPIError) as failed:
            await _backend_pid(engine)
        assert failed.value.connection_invalidated
        assert await _backend_pid(engine) != first
    finally:
        await engine.dispose()
        await other.dispose()
