"""The service end to end with EMBEDDING_PROVIDER=local (no Ollama embeddings) and none."""

from __future__ import annotations

import dataclasses

from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import session_factory
from app.domain.reembed.services import reembed
from app.llm.factory import build_gateway
from app.llm.local_embedder import LocalEmbedder
from tests.fakes.ollama_server import FakeOllama

FACTS = [
    ("preferences", "editor_theme", "prefers a dark theme in the code editor"),
    ("health", "allergy", "is allergic to peanuts"),
    ("work", "employer", "works at a bakery in Lyon"),
]


async def test_local_provider_serves_semantic_search_without_ollama_embeddings(
    make_client, settings: Settings, engine: AsyncEngine, ollama: FakeOllama
) -> None:  # type: ignore[no-untyped-def]
    local = dataclasses.replace(settings, embedding_provider="local")
    LocalEmbedder().load()  # the first /health must not wait for the model to load
    llm = build_gateway(local)
    try:  # the test database was migrated with vector(768)
        await reembed(session_factory(engine), llm)
    finally:
        await llm.aclose()

    async with make_client(local) as client:
        client.headers["Authorization"] = f"Bearer {settings.admin_token}"
        health = (await client.get("/health")).json()
        assert health["embedding"] == "ok", health
        for category, key, value in FACTS:
            r = await client.post(
                "/memory/facts", json={"category": category, "key": key, "value": value}
            )
            assert r.status_code == 201, r.text
            assert r.json()["has_embedding"] is True
        r = await client.get("/memory/facts/search", params={"q": "allergic to nuts"})
        assert r.status_code == 200, r.text
        assert r.json()["mode"] == "vector"
        assert r.json()["items"][0]["key"] == "allergy"
    assert ollama.count("/api/embed") == 0


async def test_none_provider_degrades_to_text(
    make_client, settings: Settings, ollama: FakeOllama
) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, embedding_provider="none") as client:
        client.headers["Authorization"] = f"Bearer {settings.admin_token}"
        health = (await client.get("/health")).json()
        assert "disabled" in health["embedding"] and health["status"] == "degraded"
        r = await client.post(
            "/memory/facts", json={"category": "health", "key": "allergy", "value": "peanuts"}
        )
        assert r.status_code == 201, r.text
        assert r.json()["has_embedding"] is False
        r = await client.get("/memory/facts/search", params={"q": "peanuts"})
        assert r.status_code == 200, r.text
        assert r.json()["mode"] != "vector"
        assert [item["key"] for item in r.json()["items"]] == ["allergy"]
    assert ollama.count("/api/embed") == 0
