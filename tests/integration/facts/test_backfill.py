"""Embeddings backfill: resumable, safe to run twice at once, and the CLI around it."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import time

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.engine import create_engine, session_factory
from app.domain.facts import commands
from app.domain.facts.backfill import (
    MAX_CONCURRENCY,
    ProgressBar,
    backfill_embeddings,
    count_pending,
)
from app.llm.gateway import LLMGateway
from tests.conftest import ROOT
from tests.fakes.ollama_server import FakeOllama, cosine, fake_embedding
from tests.integration.facts.conftest import sql


async def _facts_without_vectors(client: AsyncTestClient, db_url: str, n: int) -> None:
    for i in range(n):
        r = await client.post(
            "/memory/facts", json={"category": "notes", "key": f"note_{i}", "value": f"value {i}"}
        )
        assert r.status_code == 201
    sql(db_url, "UPDATE memory_facts SET embedding = NULL")


async def test_backfill_resumes_after_an_interruption(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
) -> None:
    await _facts_without_vectors(client, db_url, 7)
    # a hidden and an expired fact are never embedded: no read path returns them
    sql(
        db_url,
        "UPDATE memory_facts SET merged_into = (SELECT min(id) FROM memory_facts) WHERE key = 'note_5'",
    )
    sql(
        db_url, "UPDATE memory_facts SET expires_at = now() - interval '1 day' WHERE key = 'note_6'"
    )
    assert await count_pending(factory) == 5
    ollama.reset()

    seen: list[int] = []
    first = await backfill_embeddings(
        factory, llm, batch_size=2, pause=0, limit=3, on_progress=seen.append
    )
    assert (first.embedded, first.remaining, first.error) == (3, 2, None)
    assert seen == [2, 3] and ollama.count("/api/embed") == 2  # batches of 2, then 1

    # the second run picks up where the first stopped
    second = await backfill_embeddings(factory, llm, batch_size=2, pause=0)
    assert (second.embedded, second.remaining) == (2, 0)
    rows = sql(db_url, "SELECT key, embedding::text FROM memory_facts WHERE embedding IS NOT NULL")
    assert len(rows) == 5
    key, vec = next(r for r in rows if r[0] == "note_0")
    stored = [float(x) for x in vec.strip("[]").split(",")]
    assert cosine(stored, fake_embedding("notes note_0: value 0")) > 0.999
    assert (await backfill_embeddings(factory, llm, pause=0)).embedded == 0


async def test_backfill_stops_cleanly_when_ollama_fails(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
) -> None:
    await _facts_without_vectors(client, db_url, 4)
    ollama.fail("http500")
    result = await backfill_embeddings(factory, llm, batch_size=2, pause=0)
    assert result.embedded == 0 and result.remaining == 4 and "LLMUnavailableError" in result.error
    ollama.recover()
    assert (await backfill_embeddings(factory, llm, batch_size=3, pause=0)).embedded == 4


async def test_two_backfills_at_once_embed_each_fact_once(
    client: AsyncTestClient, db_url: str, ollama: FakeOllama, llm: LLMGateway
) -> None:
    await _facts_without_vectors(client, db_url, 12)
    ollama.reset()
    engines = [create_engine(db_url), create_engine(db_url)]
    try:
        results = await asyncio.gather(
            *(
                backfill_embeddings(session_factory(e), llm, batch_size=2, pause=0.02)
                for e in engines
            )
        )
    finally:
        for e in engines:
            await e.dispose()
    assert sum(r.embedded for r in results) == 12
    embedded_texts = [t for body in ollama.requests_for("/api/embed") for t in body["input"]]
    assert len(embedded_texts) == len(set(embedded_texts)) == 12


def _embedded_texts(ollama: FakeOllama) -> list[str]:
    return [t for body in ollama.requests_for("/api/embed") for t in body["input"]]


async def test_concurrent_workers_embed_each_fact_once(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
) -> None:
    await _facts_without_vectors(client, db_url, 13)
    ollama.reset()
    seen: list[int] = []
    result = await backfill_embeddings(
        factory, llm, batch_size=2, pause=0, concurrency=4, on_progress=seen.append
    )
    assert (result.embedded, result.remaining, result.error) == (13, 0, None)
    assert len(_embedded_texts(ollama)) == len(set(_embedded_texts(ollama))) == 13
    assert seen == sorted(seen) and seen[-1] == 13 and len(seen) == ollama.count("/api/embed")
    rows = sql(db_url, "SELECT key, embedding::text FROM memory_facts")
    assert all(vec is not None for _, vec in rows)
    key, vec = next(r for r in rows if r[0] == "note_7")
    stored = [float(x) for x in vec.strip("[]").split(",")]
    assert cosine(stored, fake_embedding("notes note_7: value 7")) > 0.999


async def test_limit_is_exact_with_concurrent_workers(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
) -> None:
    await _facts_without_vectors(client, db_url, 12)
    ollama.reset()
    first = await backfill_embeddings(factory, llm, batch_size=3, pause=0, limit=7, concurrency=3)
    assert (first.embedded, first.remaining, first.error) == (7, 5, None)
    assert len(_embedded_texts(ollama)) == 7
    second = await backfill_embeddings(factory, llm, batch_size=4, pause=0, concurrency=16)
    assert (second.embedded, second.remaining) == (5, 0)
    assert len(_embedded_texts(ollama)) == len(set(_embedded_texts(ollama))) == 12


async def test_a_failure_stops_every_worker_and_keeps_finished_batches(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
) -> None:
    await _facts_without_vectors(client, db_url, 20)
    ollama.reset()

    def fail_after_two_batches(done: int) -> None:
        if done >= 4:
            ollama.fail("http500")

    result = await backfill_embeddings(
        factory, llm, batch_size=2, pause=0, concurrency=3, on_progress=fail_after_two_batches
    )
    assert result.error is not None and "LLMUnavailableError" in result.error
    stored = sql(db_url, "SELECT count(*) FROM memory_facts WHERE embedding IS NOT NULL")[0][0]
    assert 4 <= result.embedded == stored < 20 and result.remaining == 20 - stored
    # the workers stopped: none started a batch after the failing one (2 attempts each)
    assert ollama.count("/api/embed") <= result.embedded // 2 + 3 * 2
    ollama.recover()
    rest = await backfill_embeddings(factory, llm, batch_size=5, pause=0, concurrency=2)
    assert (rest.embedded, rest.remaining, rest.error) == (20 - stored, 0, None)


async def test_pause_spaces_the_requests_of_all_workers(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
) -> None:
    await _facts_without_vectors(client, db_url, 4)
    ollama.reset()
    t0 = time.perf_counter()
    result = await backfill_embeddings(factory, llm, batch_size=1, pause=0.2, concurrency=4)
    assert result.embedded == 4
    # 4 requests at least 0.2 s apart, though 4 workers could have sent them at once
    assert time.perf_counter() - t0 >= 0.6


@pytest.mark.parametrize("concurrency", [0, MAX_CONCURRENCY + 1])
async def test_concurrency_out_of_range_is_refused(
    factory: async_sessionmaker[AsyncSession], llm: LLMGateway, concurrency: int
) -> None:
    with pytest.raises(ValueError, match="concurrency must be between 1 and 16"):
        await backfill_embeddings(factory, llm, pause=0, concurrency=concurrency)
    assert commands.MAX_CONCURRENCY == MAX_CONCURRENCY  # the CLI's bound (kept light)


def test_progress_bar() -> None:
    out = io.StringIO()
    bar = ProgressBar(10, stream=out, width=10)
    bar.update(5)
    bar.close()
    assert out.getvalue().startswith("[#####.....] 5/10 facts")


async def test_cli_backfill_and_extract(
    client: AsyncTestClient, db_url: str, ollama: FakeOllama
) -> None:
    await _facts_without_vectors(client, db_url, 3)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "OLLAMA_HOST": ollama.url,
        "NAVI_ADMIN_TOKEN": "",
        "LOG_LEVEL": "warning",
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app.cli", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = cli("backfill", "--batch-size", "2", "--pause", "0", "--limit", "2")
    assert done.returncode == 0, done.stderr
    assert "embedded 2 fact(s)" in done.stdout and "1 still without an embedding" in done.stdout
    assert "2/2 facts" in done.stderr  # the progress bar
    assert cli("backfill", "--batch-size", "0").returncode == 2
    for bad in ("0", "17", "two"):
        refused = cli("backfill", "--concurrency", bad)
        assert refused.returncode == 2 and "--concurrency" in refused.stderr
    assert "between 1 and 16" in cli("backfill", "--concurrency", "17").stderr
    done = cli("backfill", "--batch-size", "1", "--pause", "0", "--concurrency", "2")
    assert done.returncode == 0, done.stderr
    assert "embedded 1 fact(s)" in done.stdout and "0 still without an embedding" in done.stdout

    done = cli("extract")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("extracted 0 session(s), 0 failed")
