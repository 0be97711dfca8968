"""The live raw index: what one session is told, another session of its user finds by
`memory_search` moments later — by its words once the live pass commits, by meaning once
the background embedder caught up — and never twice, whichever writer comes after."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import psycopg
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.db.engine import session_factory
from app.domain.raw_history.chunks import ChunkMessage, build_chunks
from app.domain.raw_history.idle_index import index_idle_sessions
from app.domain.raw_history.live_index import LivePassResult, index_live_sessions
from app.llm.factory import build_gateway
from tests.conftest import ADMIN_TOKEN, new_user, wait_for_replica
from tests.fakes.ollama_server import FakeOllama
from tests.integration.context.conftest import append, new_session, turn

SECRET = "The combination for my gym locker is 4471-9902, don't tell anyone."


def _sql(db_url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        return c.execute(query, args).fetchall()


async def _live(engine: Any, settings: Settings, **kw: Any) -> LivePassResult:
    llm = build_gateway(settings)
    try:
        # a whole pass, the vectors too: the open chunk at once (no quiet period here)
        kw.setdefault("quiet_seconds", 0)
        result = await index_live_sessions(session_factory(engine), llm, settings, **kw)
    finally:
        await llm.aclose()
    # searches read the replica when one is configured; the pass's commits (without a
    # WAL flush of their own) reach it a moment later
    wait_for_replica(engine.url.render_as_string(hide_password=False))
    return result


async def _search(
    client: AsyncTestClient, query: str, scope: str = "raw", headers: Any = None
) -> dict[str, Any]:
    r = await client.post("/memory/search", json={"query": query, "scope": scope}, headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_said_in_one_session_found_from_another_after_a_live_pass(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    uid, h = await new_user(cclient, "lockers")
    a = await new_session(cclient, headers=h)
    b = await new_session(cclient, headers=h)
    await append(cclient, a, [{"role": "user", "content": SECRET}], headers=h)
    assert (await _search(cclient, "gym locker combination", headers=h))["hits"] == []
    done = await _live(engine, settings, embed=False)
    assert (done.sessions, done.messages, done.chunks, done.failed) == (1, 1, 1, 0)
    for scope in ("all", "raw"):
        body = await _search(cclient, "combination for my gym locker", scope, headers=h)
        raw = [x for x in body["hits"] if x["source_type"] == "raw"]
        assert [x["session_id"] for x in raw] == [a], body
        assert "4471-9902" in body["text"]
    # the tool path, from session B, as an agent calls it
    r = await cclient.post(
        "/tools/memory_search",
        json={"query": "gym locker"},
        headers={**h, "X-Navi-Session-Id": b},
    )
    assert r.status_code == 200, r.text
    assert "4471-9902" in r.json()["text"]
    # words first: no vector yet; the embedder then catches up, and a search by meaning
    # alone (no shared word) finds it
    assert _sql(db_url, "SELECT vectors_stale FROM memory_chunks WHERE session_id = %s", a) == [
        (True,)
    ]
    embedded = await _live(engine, settings)
    assert embedded.embedded == 1 and embedded.messages == 0
    assert _sql(db_url, "SELECT vectors_stale FROM memory_chunks WHERE session_id = %s", a) == [
        (False,)
    ]
    vectors = _sql(db_url, "SELECT count(*) FROM memory_chunk_vectors WHERE session_id = %s", a)
    assert vectors[0][0] >= 1
    # another user never sees it
    _, other = await new_user(cclient, "other")
    assert (await _search(cclient, "gym locker combination", headers=other))["hits"] == []
    assert uid


async def test_appends_grow_one_open_chunk_as_the_chunker_packs_them(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    sid = await new_session(cclient)
    sent: list[dict[str, Any]] = []
    for i in range(12):
        msgs = turn(i, size=420)
        sent += msgs
        await append(cclient, sid, msgs)
        await _live(engine, settings, embed=i % 3 == 0)  # vectors lag some appends
    rows = _sql(
        db_url,
        "SELECT start_seq, end_seq, content_hash FROM memory_chunks WHERE session_id = %s"
        " ORDER BY start_seq",
        sid,
    )
    expected = build_chunks(
        ChunkMessage(role=m["role"], content=m["content"], sequence_number=n)
        for n, m in enumerate(sent)
    )
    assert [(c.start_seq, c.end_seq, c.content_hash) for c in expected] == rows
    assert len(rows) > 1  # the open chunk closed at the size limit and a new one began
    # every chunk's vectors catch up and match its final text
    await _live(engine, settings)
    stale = _sql(db_url, "SELECT count(*) FROM memory_chunks WHERE vectors_stale")
    assert stale == [(0,)]
    spans = _sql(
        db_url,
        "SELECT c.id, max(v.end_char), length(c.content) FROM memory_chunks c"
        " JOIN memory_chunk_vectors v ON v.chunk_id = c.id AND v.user_id = c.user_id"
        " WHERE c.session_id = %s"
        " GROUP BY c.id, c.content",
        sid,
    )
    assert len(spans) == len(rows)
    assert all(end == length for _, end, length in spans)


async def test_no_duplicates_after_the_idle_job_and_a_compression(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str, ollama: FakeOllama
) -> None:
    sid = await new_session(cclient)
    for i in range(3):
        await append(cclient, sid, turn(i))
    await _live(engine, settings)
    before = _sql(db_url, "SELECT id, content_hash FROM memory_chunks WHERE session_id = %s", sid)
    llm = build_gateway(settings)
    try:
        idle = await index_idle_sessions(
            session_factory(engine), llm, settings, older_than_minutes=0
        )
    finally:
        await llm.aclose()
    assert idle.chunks == 0
    ollama.chat_replies = ["- the user asked three questions\nKEYS: Ticket_771Q"]
    r = await cclient.post(f"/sessions/{sid}/compact", json={})
    assert r.status_code in (200, 201), r.text
    after = _sql(db_url, "SELECT id, content_hash FROM memory_chunks WHERE session_id = %s", sid)
    assert sorted(after) == sorted(before)
    # the chunks indexed before the compression carry its KEYS, found by them
    crumbs = _sql(db_url, "SELECT breadcrumbs FROM memory_chunks WHERE session_id = %s", sid)
    assert any("Ticket_771Q" in c for (c,) in crumbs)
    assert (await _search(cclient, "Ticket_771Q"))["hits"]
    # messages after the compression go on into the live index, once each
    await append(cclient, sid, [{"role": "user", "content": "Ingrid visits in May."}])
    await _live(engine, settings)
    hits = (await _search(cclient, "Ingrid"))["hits"]
    assert len(hits) == 1
    ranges = _sql(
        db_url,
        "SELECT start_seq, end_seq FROM memory_chunks WHERE session_id = %s ORDER BY start_seq",
        sid,
    )
    for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False):
        assert start > end, ranges


async def test_a_failing_embedder_delays_only_the_vectors(
    cclient: AsyncTestClient, engine: Any, settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    sid = await new_session(cclient)
    ollama.fail("http500")
    try:
        await append(cclient, sid, [{"role": "user", "content": SECRET}])
        failed = await _live(engine, settings)
        assert failed.messages == 1 and failed.embed_failed
        assert (await _search(cclient, "gym locker"))["hits"]
    finally:
        ollama.recover()
    caught_up = await _live(engine, settings)
    assert caught_up.embedded == 1
    assert _sql(db_url, "SELECT count(*) FROM memory_chunks WHERE vectors_stale") == [(0,)]


async def test_the_running_service_indexes_an_append_within_two_seconds(
    engine: Any, settings: Settings, ctx_settings: dict[str, Any]
) -> None:
    """The background job of a running app, woken by the append: no pass called here."""
    from app.asgi import create_app

    # reads on the primary: the bound is the indexer's; a replica adds its own lag
    # (docs/scaling.md), which CI's replica run would add to this measurement
    live = dataclasses.replace(settings, database_replica_url="", **ctx_settings)
    app = create_app(live, engine=engine, background_jobs=True)
    async with AsyncTestClient(app, raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        a = await new_session(c)
        b = await new_session(c)
        await append(c, a, [{"role": "user", "content": SECRET}])
        started = time.monotonic()
        while time.monotonic() - started < 10:
            r = await c.post(
                "/tools/memory_search",
                json={"query": "gym locker combination"},
                headers={"X-Navi-Session-Id": b},
            )
            if "4471-9902" in r.json()["text"]:
                break
            await asyncio.sleep(0.05)
        assert "4471-9902" in r.json()["text"]
        assert time.monotonic() - started < 2.0


async def test_recall_never_returns_what_the_live_context_holds(
    cclient: AsyncTestClient, engine: Any, settings: Settings
) -> None:
    from tests.integration.context.test_raw_index_and_recall import fill

    sid = await new_session(cclient)
    await fill(cclient, sid)
    await _live(engine, settings)  # every turn is indexed before any compression
    assert (await cclient.post(f"/sessions/{sid}/compact", json={})).status_code == 200
    for i in range(3):
        await append(
            cclient,
            sid,
            [
                {"role": "user", "content": f"how is the weather on the glacier {i}?"},
                {"role": "assistant", "content": "Sunny and mild on the glacier."},
            ],
        )
    await _live(engine, settings)
    # the live turns are findable by memory_search …
    assert "glacier" in (await _search(cclient, "weather glacier"))["text"]

    async def recalled(question: str) -> list[str]:
        ask = {"message": {"role": "user", "content": question}}
        ctx = (await cclient.post(f"/sessions/{sid}/prepare", json=ask)).json()["context"]
        return [m["content"] for m in ctx if m["metadata"].get("source") == "memory_recall"]

    # … and what compression replaced is recalled, but the live turns are never recalled
    # beside themselves
    nginx = await recalled("which port does the nginx reverse proxy use?")
    assert any("port 8098" in r for r in nginx), nginx
    assert not any("glacier" in r for r in await recalled("how is the weather on the glacier?"))


async def test_a_reset_seals_the_open_chunk(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    sid = await new_session(cclient)
    await append(cclient, sid, turn(0, size=120) + turn(1, size=120))  # sequence 0..3
    await _live(engine, settings, embed=False)
    assert _sql(db_url, "SELECT open_chunk_id IS NOT NULL FROM raw_index_state") == [(True,)]
    r = await cclient.post(f"/sessions/{sid}/reset")
    assert r.status_code == 200, r.text
    await append(cclient, sid, turn(2, size=120))  # sequence 4..5, small: room in the chunk
    await _live(engine, settings)
    rows = _sql(
        db_url,
        "SELECT start_seq, end_seq FROM memory_chunks WHERE session_id = %s ORDER BY start_seq",
        sid,
    )
    assert rows == [(0, 3), (4, 5)]  # no chunk spans the reset
    r = await cclient.post("/memory/search", json={"query": "w2x3", "scope": "raw"})
    assert r.status_code == 200, r.text
    assert "question 1" not in r.json()["text"]  # the post-reset hit brings no old turn
