"""What the embed-first tests share: an app served by uvicorn on a real PostgreSQL, and a
request whose embedding the fake Ollama holds (`slow`) while the pool is looked at."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import pool_stats
from tests.conftest import ADMIN_TOKEN
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.served import serve

EMBED_SECONDS = 1.0


async def until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def admin_client(engine: AsyncEngine, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An admin's client of the app served for real (no background jobs)."""
    from app.asgi import create_app

    app = create_app(
        dataclasses.replace(settings, ollama_timeout=10.0), engine=engine, background_jobs=False
    )
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as c:
            yield c


async def held_while_embedding(
    c: httpx.AsyncClient,
    engine: AsyncEngine,
    ollama: FakeOllama,
    path: str,
    body: dict[str, Any],
) -> tuple[httpx.Response, int]:
    """POST `body` to `path` while its first embedding call is held by the fake Ollama:
    the answer and the pooled connections checked out in the middle of that call."""
    embeds = ollama.count("/api/embed")
    ollama.slow_seconds = EMBED_SECONDS
    ollama.fail("slow", times=1, paths={"/api/embed"})
    posting = asyncio.ensure_future(c.post(path, json=body))
    await until(lambda: ollama.count("/api/embed") > embeds)
    await asyncio.sleep(EMBED_SECONDS / 3)
    stats = pool_stats(engine)
    assert stats is not None
    in_use = stats.in_use
    assert not posting.done()  # still waiting on the embedder
    return await posting, in_use
