"""GET /metrics: scraped after real requests, the families are there and the values move;
who may read it (METRICS_TOKEN or an admin; 401 without a token, 403 with another).

The registry is the process's (every test of the run adds to it): the tests compare a
scrape before with one after, never absolute values."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from app.config import Settings
from app.db.engine import create_engine, pool_stats
from app.lib.metrics import PoolStats
from tests.conftest import ADMIN_TOKEN, new_user
from tests.fakes.ollama_server import FakeOllama

METRICS_TOKEN = "m" * 40
PROFILES = {"small": {"context_window": 4096, "compression_keep_recent": 2}}


def sample(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels` (0 when none)."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


@pytest.fixture
async def mclient(
    make_client, settings: Settings, tmp_path: Path
) -> AsyncIterator[AsyncTestClient]:  # type: ignore[no-untyped-def]
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps(PROFILES))
    async with make_client(
        settings,
        metrics_token=METRICS_TOKEN,
        profiles_file=str(profiles),
        llm_max_attempts=1,
        llm_backoff_initial=0.0,
    ) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


async def scrape(client: AsyncTestClient) -> str:
    r = await client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return r.text


async def session_with_turns(client: AsyncTestClient, turns: int) -> str:
    r = await client.post("/sessions", json={"profile_id": "small"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    msgs = [
        {"role": role, "content": f"{role} {i}: " + "word " * 40}
        for i in range(turns)
        for role in ("user", "assistant")
    ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    return sid


async def test_request_latency_per_route_template_and_pool_gauges(
    mclient: AsyncTestClient,
) -> None:
    sid = await session_with_turns(mclient, 1)
    route = {"method": "GET", "path": "/sessions/{session_id}", "status_code": "200"}
    before = await scrape(mclient)
    for _ in range(3):
        assert (await mclient.get(f"/sessions/{sid}")).status_code == 200
    after = await scrape(mclient)
    count = "navi_http_request_duration_seconds_count"
    assert sample(after, count, **route) - sample(before, count, **route) == 3
    assert (
        sample(after, "navi_http_requests_total", **route)
        - sample(before, "navi_http_requests_total", **route)
        == 3
    )
    assert sid not in after  # the template, never the raw path
    assert sample(after, "navi_db_pool_size") >= 1
    for gauge in ("navi_db_pool_in_use", "navi_db_pool_waiting", "navi_db_pool_overflow"):
        assert f"# TYPE {gauge} gauge" in after


async def test_forced_compact_counts_a_compression_and_its_chunks(
    mclient: AsyncTestClient,
) -> None:
    sid = await session_with_turns(mclient, 8)
    before = await scrape(mclient)
    r = await mclient.post(f"/sessions/{sid}/compact")
    assert r.status_code == 200, r.text
    method = r.json()["events"][-1]["method"]
    after = await scrape(mclient)
    name = "navi_compressions_total"
    labels = {"trigger": "forced", "method": method}
    assert sample(after, name, **labels) - sample(before, name, **labels) == 1
    chunks = "navi_raw_chunks_indexed_total"
    assert sample(after, chunks, path="demotion") > sample(before, chunks, path="demotion")
    ok = {"operation": "chat", "outcome": "ok"}
    assert sample(after, "navi_llm_call_seconds_count", **ok) > sample(
        before, "navi_llm_call_seconds_count", **ok
    )


async def test_model_failure_is_counted_by_kind(
    mclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    sid = await session_with_turns(mclient, 8)
    before = await scrape(mclient)
    ollama.fail("http500", paths={"/api/chat"})
    r = await mclient.post(f"/sessions/{sid}/compact")
    ollama.recover()
    assert r.status_code == 200, r.text  # no summarizer: a hard truncate
    assert r.json()["events"][-1]["method"] == "truncate"
    after = await scrape(mclient)
    name = "navi_llm_call_failures_total"
    labels = {"operation": "chat", "kind": "http500"}
    assert sample(after, name, **labels) - sample(before, name, **labels) >= 1
    failed = {"operation": "chat", "outcome": "error"}
    assert sample(after, "navi_llm_call_seconds_count", **failed) > sample(
        before, "navi_llm_call_seconds_count", **failed
    )
    truncate = {"trigger": "forced", "method": "truncate"}
    assert (
        sample(after, "navi_compressions_total", **truncate)
        - sample(before, "navi_compressions_total", **truncate)
        == 1
    )


async def test_metrics_needs_the_metrics_token_or_an_admin(mclient: AsyncTestClient) -> None:
    _, user = await new_user(mclient, "scrape-user")
    no_token = {"Authorization": ""}
    assert (await mclient.get("/metrics", headers=no_token)).status_code == 401
    wrong = {"Authorization": "Bearer " + "x" * 40}
    assert (await mclient.get("/metrics", headers=wrong)).status_code == 401
    r = await mclient.get("/metrics", headers=user)
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert (await mclient.get("/metrics")).status_code == 200  # the admin's token
    assert (
        await mclient.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    ).status_code == 200


async def test_without_metrics_token_only_admins(
    make_client,  # type: ignore[no-untyped-def]
    settings: Settings,
) -> None:
    async with make_client(settings) as c:
        r = await c.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert r.status_code == 401
        r = await c.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert r.status_code == 200 and "navi_http_requests_total" in r.text


async def test_pool_stats_count_connections_in_use_and_callers_waiting(db_url: str) -> None:
    engine = create_engine(db_url, Settings(db_pool_size=1, db_max_overflow=0))
    try:
        async with engine.connect() as held:
            await held.execute(text("SELECT 1"))
            waiter = asyncio.create_task(engine.connect().__aenter__())
            for _ in range(100):
                await asyncio.sleep(0.01)
                stats = pool_stats(engine)
                if stats is not None and stats.waiting:
                    break
            assert stats == PoolStats(size=1, in_use=1, overflow=0, waiting=1)
        conn = await asyncio.wait_for(waiter, 5)  # released: the waiter gets it
        assert pool_stats(engine) == PoolStats(size=1, in_use=1, overflow=0, waiting=0)
        await conn.close()
    finally:
        await engine.dispose()
