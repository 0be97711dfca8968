"""An absent Ollama through the API: the first call finds it gone and opens the circuit
breaker; later requests degrade at once, without retries or warnings; /health shows it."""

from __future__ import annotations

import time

from structlog.testing import capture_logs

from app.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.fakes.ollama_server import FakeOllama


async def test_absent_ollama_opens_the_breaker_and_requests_degrade_at_once(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, ollama: FakeOllama
) -> None:
    async with make_client(
        settings, llm_breaker_failures=3, llm_breaker_reset_seconds=600
    ) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        ollama.fail("refuse")
        fact = {"category": "preferences", "key": "editor", "value": "neovim"}
        r = await client.post("/memory/facts", json=fact)
        assert r.status_code == 201 and r.json()["has_embedding"] is False
        health = (await client.get("/health")).json()
        assert health["llm_breakers"] == {"chat": "open", "embed": "open"}
        assert health["status"] == "degraded"

        with capture_logs() as logs:
            started = time.monotonic()
            r = await client.post("/memory/facts", json=fact | {"key": "shell", "value": "fish"})
            took = time.monotonic() - started
            hits = (await client.get("/memory/facts/search", params={"q": "shell"})).json()
        assert r.status_code == 201 and r.json()["has_embedding"] is False
        assert hits["mode"] == "text" and [h["key"] for h in hits["items"]] == ["shell"]
        assert took < 0.5  # no connection attempt, no retry backoff
        assert not [e for e in logs if e["event"].startswith("llm.")], logs
