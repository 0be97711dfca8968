"""One deadline per request for all model calls (LLM_REQUEST_DEADLINE_SECONDS): with an
Ollama that answers only after 4 s, every request that calls it answers within the
deadline plus a small margin, degraded as when Ollama is down — a fact stored without a
vector (left for backfill), a text search, keyword history search, hard truncation."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.fakes.ollama_server import FakeOllama

from .conftest import fill, new_session

DEADLINE = 1.0
MARGIN = 1.0  # the request's own work (database, rendering) on a loaded 2-core machine
SLOW = 4.0


@pytest.fixture
async def slow_client(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, ctx_settings, ollama: FakeOllama, monkeypatch
) -> AsyncIterator[AsyncTestClient]:
    overrides = ctx_settings | {"llm_request_deadline_seconds": DEADLINE, "llm_max_attempts": 3}
    async with make_client(settings, **overrides) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        monkeypatch.setattr(ollama, "slow_seconds", SLOW)
        yield c


async def _timed(call) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    r = await call
    took = time.monotonic() - started
    assert took < DEADLINE + MARGIN, f"answered after {took:.2f}s"
    return took, r


async def test_fact_save_and_search_degrade_at_the_deadline(
    slow_client: AsyncTestClient, ollama: FakeOllama
) -> None:
    ollama.fail("slow")
    _, r = await _timed(
        slow_client.post(
            "/memory/facts", json={"category": "preferences", "key": "editor", "value": "neovim"}
        )
    )
    assert r.status_code == 201, r.text  # type: ignore[attr-defined]
    assert r.json()["has_embedding"] is False  # type: ignore[attr-defined]  # backfill embeds it later
    _, r = await _timed(slow_client.get("/memory/facts/search", params={"q": "editor neovim"}))
    body = r.json()  # type: ignore[attr-defined]
    assert body["mode"] == "text" and [h["key"] for h in body["items"]] == ["editor"]


async def test_chat_history_semantic_falls_back_to_keyword_at_the_deadline(
    slow_client: AsyncTestClient, ollama: FakeOllama
) -> None:
    sid = await new_session(slow_client)
    await fill(slow_client, sid, 60, size=60)  # 120 messages: several embedding batches
    ollama.fail("slow")
    _, r = await _timed(
        slow_client.post(
            "/tools/chat_history",
            json={"query": "question 7", "match": "semantic", "session_id": sid},
        )
    )
    assert r.status_code == 200, r.text  # type: ignore[attr-defined]
    body = r.json()  # type: ignore[attr-defined]
    assert body["match"] == "keyword" and body["fallback"], body
    assert body["hits"]
    assert ollama.count("/api/embed") == 1  # the first batch hit the deadline; no more sent


async def test_compact_hard_truncates_at_the_deadline(
    slow_client: AsyncTestClient, ollama: FakeOllama
) -> None:
    sid = await new_session(slow_client)
    await fill(slow_client, sid, 10, size=60)
    ollama.fail("slow")
    _, r = await _timed(slow_client.post(f"/sessions/{sid}/compact"))
    assert r.status_code == 200, r.text  # type: ignore[attr-defined]
    done = r.json()["events"][-1]  # type: ignore[attr-defined]
    assert done["type"] == "ContextCompressed" and done["method"] == "truncate", done
