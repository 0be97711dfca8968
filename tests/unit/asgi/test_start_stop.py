"""A worker whose start-up waits for an unreachable database stops waiting when the
service is stopped (SIGTERM): uvicorn's handler still runs, and the start-up fails at
once instead of holding the stop for STARTUP_DB_WAIT_SECONDS."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from types import SimpleNamespace
from typing import Any

import pytest

from app.asgi import lifespan
from app.config import Settings
from app.db.engine import create_engine, session_factory


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_sigterm_ends_a_start_up_waiting_for_the_database() -> None:
    settings = Settings(database_url=f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/x")
    engine = create_engine(settings.database_url, settings)
    runtime: Any = SimpleNamespace(session_factory=session_factory(engine), settings=settings)
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda sig, frame: seen.append(sig))
    try:
        task = asyncio.create_task(lifespan._bootstrap(runtime))
        await asyncio.sleep(1.0)  # refused, and waiting to try again
        assert not task.done()
        started = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(Exception) as raised:
            await asyncio.wait_for(task, 5)
        assert time.monotonic() - started < 2.0
        assert lifespan.unavailable_reason(raised.value) is not None
        assert seen == [signal.SIGTERM]  # the handler set before (uvicorn's) still ran
        # the handlers are as they were once the start-up is over
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.05)
        assert seen == [signal.SIGTERM, signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
        await engine.dispose()
