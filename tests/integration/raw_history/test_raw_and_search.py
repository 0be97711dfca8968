import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.db.engine import session_factory, transaction
from app.domain.raw_history.indexer import embed_demoted, index_demoted
from app.domain.raw_history.repositories import ChunkRepository
from app.domain.raw_history.search import search_raw
from app.domain.raw_history.search_cache import Walkers
from app.llm.factory import build_gateway
from tests.conftest import new_user

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@dataclass
class Demoted:
    role: str
    content: str
    sequence_number: int
    created_at: datetime | None = T0
    name: str | None = None
    is_summary: bool = False
    is_compression: bool = False


DEMOTED = [
    Demoted("user", "Please move the nginx config to /etc/nginx/sites-enabled/navi.conf", 0),
    Demoted("assistant", "Done. The server now listens on port 8098 with `proxy_pass`.", 1),
    Demoted("tool", "ok: reloaded nginx in 12 ms", 2, name="shell"),
    Demoted("user", "old summary text", 3, is_summary=True),
    Demoted("system", "system prompt", 4),
]


async def _session(client: AsyncTestClient, headers=None) -> str:  # type: ignore[no-untyped-def]
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=headers)
    return r.json()["id"]


async def _index(engine, settings, user_id: str, sid: str, demoted=DEMOTED, keys=("server_port",)):  # type: ignore[no-untyped-def]
    llm = build_gateway(settings)
    try:
        where = {"user_id": user_id, "session_id": uuid.UUID(sid), "demoted": demoted, "keys": keys}
        factory = session_factory(engine)
        vectors = await embed_demoted(factory, llm, **where)
        async with transaction(factory) as db:
            return await index_demoted(db, **where, vectors=vectors)
    finally:
        await llm.aclose()


async def test_index_is_idempotent_and_skips_system_and_summaries(client, engine, settings) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    assert await _index(engine, settings, "admin", sid) == 1
    assert await _index(engine, settings, "admin", sid) == 0
    async with transaction(session_factory(engine)) as db:
        rows = await ChunkRepository(db).recent("admin", session_id=uuid.UUID(sid), limit=10)
    assert len(rows) == 1
    chunk = rows[0]
    assert chunk.content.startswith("User: Please move")
    assert "Tool result (shell): ok" in chunk.content
    assert "old summary" not in chunk.content and "system prompt" not in chunk.content
    assert (chunk.start_seq, chunk.end_seq) == (0, 2)
    assert chunk.breadcrumbs[0] == "server_port"
    assert "/etc/nginx/sites-enabled/navi.conf" in chunk.breadcrumbs


async def test_indexing_failure_never_raises(client, engine, settings, ollama) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    ollama.fail("refuse")
    # embeddings unavailable: chunks are still written, without vectors
    assert await _index(engine, settings, "admin", sid) == 1
    ollama.recover()
    # a broken row (user that does not exist violates the FK) is logged, not raised
    sid2 = await _session(client)
    assert await _index(engine, settings, "nobody-such-user", sid2) == 0


async def test_search_raw_vector_then_text(client, engine, settings, ollama) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _index(engine, settings, "admin", sid)
    llm = build_gateway(settings)
    try:
        async with transaction(session_factory(engine)) as db:
            hits = await search_raw(
                db, llm, "admin", "nginx config sites-enabled navi.conf server listens", 5
            )
            assert hits and hits[0].score is not None and hits[0].score > 0.55
            # an unrelated query passes no vector cutoff and matches no term
            assert await search_raw(db, llm, "admin", "quantum chromodynamics lattice", 5) == []
            # empty normalised query: most recent chunks
            assert len(await search_raw(db, llm, "admin", "the a of", 5)) == 1
        ollama.fail("refuse")
        async with transaction(session_factory(engine)) as db:
            hits = await search_raw(db, llm, "admin", "which port for proxy_pass", 5)
            assert hits and hits[0].score is None and hits[0].terms_hit >= 2
            # breadcrumbs are searched too
            hits = await search_raw(db, llm, "admin", "server_port", 5)
            assert hits
    finally:
        ollama.recover()
        await llm.aclose()


async def test_unified_search_api_and_isolation(client, engine, settings, ollama) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    sid = await _session(client, headers=alice)
    await _index(engine, settings, alice_id, sid)
    r = await client.put(
        f"/sessions/{sid}/scratchpad/plan",
        json={"value": "next: rotate nginx logs weekly"},
        headers=alice,
    )
    assert r.status_code == 200
    r = await client.post(
        "/memory/search", json={"query": "nginx port", "scope": "all"}, headers=alice
    )
    assert r.status_code == 200, r.text
    body = r.json()
    kinds = [h["source_type"] for h in body["hits"]]
    assert kinds == ["raw", "sketch"]  # tiered: raw before sketches
    assert body["text"].startswith('memory_search "nginx port" (scope=all): 2 hit(s)')
    assert "raw · session" in body["text"] and "turns 0–2" in body["text"]
    # scope narrows, unknown scope falls back to all, k clamps
    only = (
        await client.post(
            "/memory/search", json={"query": "nginx", "scope": "sketches"}, headers=alice
        )
    ).json()
    assert [h["source_type"] for h in only["hits"]] == ["sketch"]
    odd = (
        await client.post(
            "/memory/search", json={"query": "nginx", "scope": "bogus", "k": 99}, headers=alice
        )
    ).json()
    assert odd["scope"] == "all" and odd["k"] == 20
    # bob sees nothing of alice's
    other = (await client.post("/memory/search", json={"query": "nginx port"}, headers=bob)).json()
    assert other["hits"] == []
    assert (await client.get(f"/sessions/{sid}/scratchpad/plan", headers=bob)).status_code == 404
    r = await client.post(
        "/memory/search", json={"query": "x", "current_session_id": sid}, headers=bob
    )
    assert r.status_code == 404


async def test_memory_search_tool_call_verbatim(client, engine, settings) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _index(engine, settings, "admin", sid)
    r = await client.post(
        "/tools/memory_search",
        json={"query": "nginx", "scope": "raw", "k": "3", "extra": "ignored"},
        headers={"X-Navi-Session-Id": sid},
    )
    assert r.status_code == 200, r.text
    assert r.json()["k"] == 3 and r.json()["hits"][0]["source_type"] == "raw"
    r = await client.post("/tools/memory_search", json={"scope": "raw"})
    assert r.status_code == 422 and "query" in r.json()["detail"]


async def test_before_summary_label(client, engine, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    sid = await _session(client)
    await _index(engine, settings, "admin", sid)
    later = T0 + timedelta(days=1)
    with psycopg.connect(
        db_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True
    ) as c:
        c.execute(
            "insert into session_messages (session_id, user_id, sequence_number, role, content,"
            " is_summary, is_display, created_at)"
            " select id, user_id, 10, 'user', 'summary', true, false, %s from sessions where id = %s",
            (later, sid),
        )
    r = await client.post(
        "/memory/search", json={"query": "nginx config", "scope": "raw", "current_session_id": sid}
    )
    hit = r.json()["hits"][0]
    assert hit["before_summary"] is True
    assert "verbatim record from before the current summary" in r.json()["text"]


async def test_scratchpad_sections(client) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    assert (
        await client.put(f"/sessions/{sid}/scratchpad/todo", json={"value": "a"})
    ).status_code == 200
    assert (await client.put(f"/sessions/{sid}/scratchpad/todo", json={"value": "b"})).json()[
        "value"
    ] == "b"
    page = (await client.get(f"/sessions/{sid}/scratchpad")).json()
    assert page["total"] == 1 and page["items"][0]["value"] == "b"
    assert (await client.delete(f"/sessions/{sid}/scratchpad/todo")).status_code == 204
    assert (await client.get(f"/sessions/{sid}/scratchpad/todo")).status_code == 404


FILLER = [
    Demoted("user" if n % 2 == 0 else "assistant", f"Filler turn {n} about the weather {n} " * 8, n)
    for n in range(12)
]
EVIDENCE = Demoted(
    "user", "Remember: the backup bucket is s3://navi-archive/nightly and rotates at 03:15.", 12
)


async def test_segments_find_evidence_late_in_a_chunk(client, engine, settings, ollama) -> None:  # type: ignore[no-untyped-def]
    """A chunk is embedded per segment: a line far past the model's first ~1,000 chars is
    found by meaning, the excerpt centres on it, and the segments go with the session."""
    sid = await _session(client)
    assert await _index(engine, settings, "admin", sid, demoted=[*FILLER, EVIDENCE], keys=()) == 1
    async with transaction(session_factory(engine)) as db:
        (chunk,) = await ChunkRepository(db).recent("admin", session_id=uuid.UUID(sid), limit=5)
        assert chunk.content.index("backup bucket") > 2000
        parts = (
            await db.execute(
                text("SELECT start_char, end_char FROM memory_chunk_vectors WHERE chunk_id = :c"),
                {"c": chunk.id},
            )
        ).all()
    assert len(parts) >= 3
    assert all(0 <= a < b <= len(chunk.content) and b - a <= 800 for a, b in parts)
    r = await client.post(
        "/memory/search", json={"query": "where does the nightly backup bucket live", "k": 3}
    )
    body = r.json()
    assert body["hits"] and body["hits"][0]["source_type"] == "raw"
    assert "s3://navi-archive/nightly" in body["text"]
    assert "Filler turn 0 " not in body["text"]  # the head of the chunk is not what is shown
    # with the embedder down, the punctuation-split text index still finds path parts
    ollama.fail("refuse")
    try:
        r = await client.post("/memory/search", json={"query": "navi-archive", "scope": "raw"})
        assert "s3://navi-archive/nightly" in r.json()["text"]
    finally:
        ollama.recover()
    assert (await client.delete(f"/sessions/{sid}")).status_code == 204
    async with transaction(session_factory(engine)) as db:
        left = await db.execute(text("SELECT count(*) FROM memory_chunk_vectors"))
        assert left.scalar_one() == 0


async def test_unified_search_reads_facts_on_a_side_connection(client, engine, settings) -> None:  # type: ignore[no-untyped-def]
    """With the service's session factory, facts and sketches are read on a second
    connection while the raw index is searched (scope `raw` too: the facts label the
    excerpts); a failure there empties that tier once the raw search is done, and the
    request's session is left usable."""
    from app.domain.kernel.hits import MemoryHit
    from app.domain.search.services import UnifiedSearch

    sid = await _session(client)
    await _index(engine, settings, "admin", sid)
    factory = session_factory(engine)
    seen: list[object] = []

    async def facts(db, llm, user_id, query, limit):  # type: ignore[no-untyped-def]
        seen.append(db)
        pid = (await db.execute(text("select pg_backend_pid()"))).scalar()
        return [MemoryHit(source_type="fact", text=f"backend: {pid}", key="backend")]

    async def broken(db, llm, user_id, query, limit):  # type: ignore[no-untyped-def]
        raise RuntimeError("facts store down")

    async with transaction(factory) as db:
        own_pid = (await db.execute(text("select pg_backend_pid()"))).scalar()
        search = UnifiedSearch(db, None, settings, facts=facts, side_sessions=factory)
        res = await search.search("nginx sites-enabled", user_id="admin")
        assert seen and seen[0] is not db
        kinds = [h.source_type for h in res.hits]
        assert kinds[0] == "fact" and "raw" in kinds
        assert res.hits[0].text != f"backend: {own_pid}"
        # scope raw: the facts are read on the side connection, for the labels only
        seen.clear()
        res = await search.search("nginx sites-enabled", user_id="admin", scope="raw")
        assert seen and seen[0] is not db and {h.source_type for h in res.hits} == {"raw"}
        failing = UnifiedSearch(db, None, settings, facts=broken, side_sessions=factory)
        res = await failing.search("nginx sites-enabled", user_id="admin")
        assert [h.source_type for h in res.hits] == ["raw"]
        assert (await db.execute(text("select 1"))).scalar() == 1


async def test_search_raw_segment_lookup_on_a_side_connection(
    client, engine, settings, ollama, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Past `EXACT_SCAN_CHUNKS` (here 0), the segment lookup runs on a second connection
    while the term lookups run on the first: same hits as one connection gives. A user
    seen past it has the walk started at once, beside the count; once seen below it, no
    longer."""
    import app.domain.raw_history.search as search_service

    sid = await _session(client)
    await _index(engine, settings, "admin", sid)
    monkeypatch.setattr(search_service, "EXACT_SCAN_CHUNKS", 0)
    monkeypatch.setattr(search_service, "_WALKERS", Walkers(10))
    factory = session_factory(engine)
    taken: list[object] = []

    def counting_factory():  # type: ignore[no-untyped-def]
        taken.append(factory())
        return taken[-1]

    llm = build_gateway(settings)
    try:
        query = "nginx config sites-enabled navi.conf server listens"
        async with transaction(factory) as db:
            alone = await search_raw(db, llm, "admin", query, 5)
            assert search_service._WALKERS.walks("admin")  # seen past the line
            side = await search_raw(db, llm, "admin", query, 5, side_sessions=counting_factory)  # type: ignore[arg-type]
        assert len(taken) == 1
        assert alone and [(h.chunk_id, h.focus) for h in side] == [
            (h.chunk_id, h.focus) for h in alone
        ]
        monkeypatch.setattr(search_service, "EXACT_SCAN_CHUNKS", 10_000)
        async with transaction(factory) as db:
            for _ in range(2):  # walked once more on what was known, then compared exactly
                again = await search_raw(db, llm, "admin", query, 5, side_sessions=counting_factory)  # type: ignore[arg-type]
                assert [h.chunk_id for h in again] == [h.chunk_id for h in alone]
        assert len(taken) == 2 and not search_service._WALKERS.walks("admin")
    finally:
        await llm.aclose()
