"""`POST /memory/search` and `POST /tools/memory_search` embed the query before their
first statement (the session checks): no pooled connection is held while the embedder
runs (issue 42, review item 2's "embeddings outside a held connection", HTTP side).

Served by uvicorn (a real concurrent request), a real PostgreSQL, the fake Ollama in its
"slow" mode for the query's embedding (tests/integration/embed_first.py)."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from tests.fakes.ollama_server import FakeOllama
from tests.integration.embed_first import admin_client, held_while_embedding


@pytest.mark.parametrize("path", ["/memory/search", "/tools/memory_search"])
async def test_the_query_is_embedded_with_no_connection_held(
    engine: AsyncEngine, settings: Settings, ollama: FakeOllama, path: str
) -> None:
    async with admin_client(engine, settings) as c:
        r = await c.post("/sessions", json={"profile_id": "default"})
        sid = r.json()["id"]
        field = "current_session_id" if path == "/memory/search" else "session_id"
        body = {"query": "which port does nginx use", field: sid}
        embeds = ollama.count("/api/embed")
        r, in_use = await held_while_embedding(c, engine, ollama, path, body)
    assert r.status_code == 200, r.text
    assert in_use == 0, f"{in_use} connection(s) held while the query was embedded"
    assert ollama.count("/api/embed") == embeds + 1  # the search found the vector made
    [embedded] = ollama.requests_for("/api/embed")[embeds:]
    assert embedded["input"] in (body["query"], [body["query"]]), embedded  # the query's
