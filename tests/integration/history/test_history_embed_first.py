"""`POST /tools/chat_history` in its semantic mode (the recent messages without a vector,
then the query) and `POST /tools/error_history` (the query) embed before their first
statement on the request's connection: no pooled connection is held while the embedder
runs (issue 42, review item 2's "chat_history semantic mode embeds up to 500 messages per
request on the primary", HTTP side; the turn loop's tool calls do the same through
`Toolbox.embed_ahead`).

Served by uvicorn (a real concurrent request), a real PostgreSQL, the fake Ollama in its
"slow" mode for the embedding call (tests/integration/embed_first.py)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from tests.fakes.ollama_server import FakeOllama
from tests.integration.embed_first import admin_client, held_while_embedding

TEXTS = ["the cat food is in the blue cupboard", "the backups run at night on tuesday"]


async def test_the_semantic_mode_embeds_with_no_connection_held(
    engine: AsyncEngine, settings: Settings, ollama: FakeOllama
) -> None:
    async with admin_client(engine, settings) as c:
        r = await c.post("/sessions", json={"profile_id": "default"})
        sid = r.json()["id"]
        msgs = [{"role": "user", "content": t} for t in TEXTS]
        r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
        assert r.status_code == 201, r.text
        body = {"query": "cat food", "match": "semantic", "limit": 1, "session_id": sid}
        embeds = ollama.count("/api/embed")
        r, in_use = await held_while_embedding(c, engine, ollama, "/tools/chat_history", body)
        # the vectors were stored: a second search embeds the query only
        again = await c.post("/tools/chat_history", json={**body, "query": "backups"})
    assert r.status_code == 200, r.text
    assert in_use == 0, f"{in_use} connection(s) held while the history was embedded"
    out = r.json()
    assert out["match"] == "semantic" and out["fallback"] is None, out
    assert out["hits"][0]["content"] == TEXTS[0]
    assert again.status_code == 200, again.text
    assert again.json()["hits"][0]["content"] == TEXTS[1]
    made = ollama.requests_for("/api/embed")[embeds:]
    inputs = [
        t
        for req in made
        for t in ([req["input"]] if isinstance(req["input"], str) else req["input"])
    ]
    assert sorted(inputs) == sorted([*TEXTS, "cat food", "backups"]), inputs  # each text once


async def test_error_history_embeds_its_query_with_no_connection_held(
    engine: AsyncEngine, settings: Settings, ollama: FakeOllama
) -> None:
    async with admin_client(engine, settings) as c:
        fix = {"tool": "bash", "error": "permission denied: /etc/hosts", "fix": "use sudo"}
        r = await c.post("/tools/write_error", json=fix)
        assert r.status_code == 200, r.text
        embeds = ollama.count("/api/embed")
        body = {"query": "permission denied writing /etc/hosts"}
        r, in_use = await held_while_embedding(c, engine, ollama, "/tools/error_history", body)
    assert r.status_code == 200, r.text
    assert in_use == 0, f"{in_use} connection(s) held while the query was embedded"
    assert [h["fix"] for h in r.json()["hits"]] == ["use sudo"], r.text
    assert ollama.count("/api/embed") == embeds + 1  # the search found the vector made
