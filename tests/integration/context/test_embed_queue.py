"""The live index's embedding queue (issue 41): each text is embedded once per quiet
period, two indexers never embed a chunk twice, and a search answers by the words while
the vectors lag behind a slow embedder."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import psycopg
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.db.engine import create_engine, session_factory
from app.domain.raw_history.embed_queue import EmbedRound, embed_due_chunks
from app.domain.raw_history.live_index import index_live_sessions
from app.llm.factory import build_gateway
from tests.conftest import ADMIN_TOKEN, new_user
from tests.fakes.ollama_server import FakeOllama
from tests.integration.context.conftest import append, new_session, turn


def _sql(db_url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        return c.execute(query, args).fetchall()


def _embedded_texts(ollama: FakeOllama) -> list[str]:
    texts: list[str] = []
    for body in ollama.requests_for("/api/embed"):
        inp = body.get("input", [])
        texts += [inp] if isinstance(inp, str) else list(inp)
    return texts


async def _words(engine: Any, settings: Settings) -> None:
    """The live pass of words only, as the service's job runs it."""
    llm = build_gateway(settings)
    try:
        await index_live_sessions(session_factory(engine), llm, settings, embed=False)
    finally:
        await llm.aclose()


async def _round(engine: Any, settings: Settings, quiet: float, **kw: Any) -> EmbedRound:
    llm = build_gateway(settings)
    try:
        return await embed_due_chunks(session_factory(engine), llm, quiet_seconds=quiet, **kw)
    finally:
        await llm.aclose()


async def test_an_open_chunk_is_embedded_once_per_quiet_period(
    cclient: AsyncTestClient, engine: Any, settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    sid = await new_session(cclient)
    ollama.reset()
    for i in range(5):  # a conversation in full flow: a pass after every append
        await append(cclient, sid, [{"role": "user", "content": f"note {i} about the canoe"}])
        await _words(engine, settings)
        assert (await _round(engine, settings, quiet=2.0)).claimed == 0
    assert _embedded_texts(ollama) == []  # the words are found meanwhile, by the pass
    await asyncio.sleep(2.1)  # the session goes quiet: its open chunk is embedded, once
    done = await _round(engine, settings, quiet=2.0)
    assert (done.embedded, done.segments) == (1, 1)
    assert (await _round(engine, settings, quiet=2.0)).claimed == 0
    first = _embedded_texts(ollama)
    assert len(first) == 1 and "note 4 about the canoe" in first[0]
    # the conversation goes on: the grown chunk waits for the next pause, then only its
    # changed segment is embedded again
    await append(cclient, sid, [{"role": "user", "content": "and the paddles are red"}])
    await _words(engine, settings)
    assert (await _round(engine, settings, quiet=2.0)).claimed == 0
    await asyncio.sleep(2.1)
    assert (await _round(engine, settings, quiet=2.0)).embedded == 1
    assert len(_embedded_texts(ollama)) == 2
    assert _sql(db_url, "SELECT vectors_stale, stale_since FROM memory_chunks") == [(False, None)]


async def test_a_closed_chunk_is_embedded_while_the_session_talks_on(
    cclient: AsyncTestClient, engine: Any, settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    sid = await new_session(cclient)
    for i in range(12):  # past the chunk size: the first chunks close
        await append(cclient, sid, turn(i, size=420))
    await _words(engine, settings)
    chunks = _sql(db_url, "SELECT count(*) FROM memory_chunks WHERE session_id = %s", sid)[0][0]
    assert chunks > 1
    done = await _round(engine, settings, quiet=3600)  # the session is anything but quiet
    assert done.embedded == chunks - 1  # every chunk but the open one
    open_chunk = _sql(
        db_url,
        "SELECT c.vectors_stale FROM memory_chunks c JOIN raw_index_state s"
        " ON s.open_chunk_id = c.id AND s.user_id = c.user_id",
    )
    assert open_chunk == [(True,)]


async def test_two_indexers_never_embed_a_chunk_twice(
    cclient: AsyncTestClient, engine: Any, settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    for s in range(3):
        sid = await new_session(cclient)
        for i in range(10):
            await append(cclient, sid, turn(i + 10 * s, size=420))
    await _words(engine, settings)
    chunks = _sql(db_url, "SELECT count(*) FROM memory_chunks")[0][0]
    assert chunks >= 6
    ollama.reset()
    ollama.embed_batch_seconds = 0.3  # both indexers have rounds in flight at once
    second = create_engine(db_url)  # another process's pool

    async def indexer(eng: Any) -> EmbedRound:
        llm = build_gateway(settings)
        try:
            total = EmbedRound()
            while True:  # small rounds, so the two take turns at the queue
                done = await embed_due_chunks(session_factory(eng), llm, quiet_seconds=0, limit=2)
                if not done.listed:
                    return total
                total = dataclasses.replace(
                    total,
                    claimed=total.claimed + done.claimed,
                    embedded=total.embedded + done.embedded,
                    segments=total.segments + done.segments,
                )
        finally:
            await llm.aclose()

    try:
        a, b = await asyncio.gather(indexer(engine), indexer(second))
    finally:
        await second.dispose()
    assert a.embedded > 0 and b.embedded > 0  # both did a share
    assert a.embedded + b.embedded == chunks  # and no chunk twice
    vectors = _sql(db_url, "SELECT count(*) FROM memory_chunk_vectors")[0][0]
    texts = _embedded_texts(ollama)
    assert len(texts) == vectors == a.segments + b.segments  # no segment twice either
    assert _sql(db_url, "SELECT count(*) FROM memory_chunks WHERE vectors_stale") == [(0,)]


async def test_a_failing_embedder_releases_its_claims(
    cclient: AsyncTestClient, engine: Any, settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    sid = await new_session(cclient)
    await append(cclient, sid, [{"role": "user", "content": "the spare key is under the pot"}])
    await _words(engine, settings)
    ollama.fail("http500", paths=["/api/embed"])
    try:
        assert (await _round(engine, settings, quiet=0)).failed
    finally:
        ollama.recover()
    lease = _sql(db_url, "SELECT embed_lease_until, stale_since FROM memory_chunks")
    assert lease[0][0] is None and lease[0][1] is not None  # free for the next round
    assert (await _round(engine, settings, quiet=0)).embedded == 1


async def test_search_answers_by_the_words_while_a_slow_embedder_has_a_backlog(
    engine: Any, settings: Settings, ctx_settings: dict[str, Any], ollama: FakeOllama
) -> None:
    """The running app (its own embedding job: no indexer process here) behind an
    embedder that takes 3 s a batch: searches answer within a second all the while."""
    from app.asgi import create_app

    live = dataclasses.replace(
        settings, database_replica_url="", index_quiet_seconds=0, **ctx_settings
    )
    ollama.embed_batch_seconds = 3.0
    app = create_app(live, engine=engine, background_jobs=True)
    async with AsyncTestClient(app, raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, h = await new_user(c, "backlog")
        for s in range(6):
            sid = await new_session(c, headers=h)
            for i in range(4):
                await append(c, sid, turn(i + 4 * s, size=420), headers=h)
        await append(
            c, sid, [{"role": "user", "content": "Marguerite bakes on Sundays."}], headers=h
        )
        waits: list[float] = []
        backlog_seen = False
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(waits) < 20:
            started = time.monotonic()
            r = await c.post("/memory/search", json={"query": "Marguerite"}, headers=h)
            waits.append(time.monotonic() - started)
            assert r.status_code == 200, r.text
            if "Marguerite" not in r.json()["text"]:
                await asyncio.sleep(0.2)  # the words pass has not reached it yet
                waits.pop()
                continue
            health = (await c.get("/health")).json()
            backlog_seen |= health["index"]["backlog_chunks"] > 0
            await asyncio.sleep(0.1)
        assert backlog_seen, "the slow embedder never had a backlog"
        assert len(waits) >= 10
        assert max(waits) < 1.0, waits
