"""`POST /memory/search` and `POST /tools/memory_search` embed the query before their
first statement (the session checks): no pooled connection is held while the embedder
runs (issue 42, review item 2's "embeddings outside a held connection", HTTP side).

Served by uvicorn (a real concurrent request), a real PostgreSQL, the fake Ollama in its
"slow" mode for the query's embedding."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable

import httpx
import pytest
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


@pytest.mark.parametrize("path", ["/memory/search", "/tools/memory_search"])
async def test_the_query_is_embedded_with_no_connection_held(
    engine: AsyncEngine, settings: Settings, ollama: FakeOllama, path: str
) -> None:
    from app.asgi import create_app

    app = create_app(
        dataclasses.replace(settings, ollama_timeout=10.0), engine=engine, background_jobs=False
    )
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as c:
            r = await c.post("/sessions", json={"profile_id": "default"})
            sid = r.json()["id"]
            field = "current_session_id" if path == "/memory/search" else "session_id"
            body = {"query": "which port does nginx use", field: sid}
            embeds = ollama.count("/api/embed")
            ollama.slow_seconds = EMBED_SECONDS
            ollama.fail("slow", times=1, paths={"/api/embed"})
            searching = asyncio.ensure_future(c.post(path, json=body))
            await until(lambda: ollama.count("/api/embed") > embeds)
            await asyncio.sleep(EMBED_SECONDS / 3)
            stats = pool_stats(engine)
            assert stats is not None
            in_use = stats.in_use
            assert not searching.done()  # still waiting on the embedder
            r = await searching
    assert r.status_code == 200, r.text
    assert in_use == 0, f"{in_use} connection(s) held while the query was embedded"
    assert ollama.count("/api/embed") == embeds + 1  # the search found the vector made
    [embedded] = ollama.requests_for("/api/embed")[embeds:]
    assert embedded["input"] in (body["query"], [body["query"]]), embedded  # the query's
