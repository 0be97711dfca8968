"""`POST /tools/chat_history`: keyword over hot + archive, semantic with neighbours."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from litestar.testing import AsyncTestClient
from sqlalchemy import text as sql_text

from app.db.engine import session_factory, transaction
from app.domain.sessions.message_repository import MessageRepository
from tests.conftest import new_user

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)

CONVERSATION = [
    ("user", "Which port should nginx listen on for the navi service?"),
    ("assistant", "Use port 8098; the proxy_pass goes to localhost:8098."),
    ("user", "Thanks. Now let's talk about the database backups."),
    ("assistant", "Nightly pg_dump to the backup bucket, kept for thirty days."),
    ("user", "What about the garden? The tomatoes need watering."),
    ("assistant", "Water the tomatoes every morning before the sun is high."),
    ("user", "And the cat food order?"),
    ("assistant", "The cat food arrives on Friday."),
    ("user", "Remind me of the release checklist."),
    ("assistant", "Tag the release, build the images, run the smoke tests."),
]


async def _session(client: AsyncTestClient, headers=None) -> str:  # type: ignore[no-untyped-def]
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _fill(client: AsyncTestClient, sid: str, archive_before: int | None = None, engine=None):  # type: ignore[no-untyped-def]
    msgs = [
        {
            "role": role,
            "content": text,
            "created_at": (T0 + timedelta(minutes=i)).isoformat(),
            "is_context": archive_before is None or i >= archive_before,
        }
        for i, (role, text) in enumerate(CONVERSATION)
    ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    if archive_before is not None:
        async with transaction(session_factory(engine)) as db:
            owner = (
                await db.execute(
                    sql_text("SELECT user_id FROM sessions WHERE id = :id"), {"id": sid}
                )
            ).scalar_one()
            repo = MessageRepository(db)
            moved = await repo.archive_old_messages(owner, uuid.UUID(sid), archive_before)
            assert moved == archive_before


async def test_keyword_finds_archived_and_hot_messages(client, engine) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _fill(client, sid, archive_before=6, engine=engine)
    r = await client.post(
        "/tools/chat_history",
        json={"mode": "search", "query": "tomatoes", "match": "keyword", "limit": 5},
        headers={"X-Navi-Session-Id": sid},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [h["sequence_number"] for h in body["hits"]] == [5, 4] or [
        h["sequence_number"] for h in body["hits"]
    ] == [4, 5]
    assert all(h["archived"] for h in body["hits"])
    assert all(h["kind"] == "fulltext" for h in body["hits"])
    assert body["hits"][0]["created_at"].endswith("Z") or body["hits"][0]["created_at"].endswith(
        "+00:00"
    )
    assert body["text"].startswith('chat_history search "tomatoes" (match=keyword): 2 hit(s)')
    assert "archived" in body["text"] and "2026-11-01T12:0" in body["text"]
    # hot rows are searched too; websearch syntax works
    r = await client.post(
        "/tools/chat_history",
        json={"query": '"smoke tests" -garden', "session_id": sid},
    )
    hits = r.json()["hits"]
    assert [h["sequence_number"] for h in hits] == [9] and hits[0]["archived"] is False
    # no message has every word: messages with any of them, best covered first
    r = await client.post(
        "/tools/chat_history", json={"query": "tomatoes release checklist", "session_id": sid}
    )
    hits = r.json()["hits"]
    assert hits[0]["sequence_number"] == 8  # "release checklist": two of the words
    assert {h["sequence_number"] for h in hits} == {4, 5, 8, 9}


async def test_keyword_substring_fallback(client, engine) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _fill(client, sid, archive_before=4, engine=engine)
    # "host:809" is no full-text token; the ILIKE fallback finds it (in the archive)
    r = await client.post(
        "/tools/chat_history", json={"query": "host:809", "session_id": sid, "limit": 3}
    )
    hits = r.json()["hits"]
    assert [(h["sequence_number"], h["kind"], h["archived"]) for h in hits] == [
        (1, "substring", True)
    ]
    # full-text hits come first, substring hits fill up to the limit, no duplicates
    r = await client.post("/tools/chat_history", json={"query": "port", "session_id": sid})
    hits = r.json()["hits"]
    seqs = [h["sequence_number"] for h in hits]
    assert len(seqs) == len(set(seqs))
    assert {0, 1} <= set(seqs)


async def test_semantic_hits_come_with_neighbours(client, engine, ollama) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _fill(client, sid, archive_before=6, engine=engine)
    r = await client.post(
        "/tools/chat_history",
        json={"query": "cat food", "match": "semantic", "limit": 1, "session_id": sid},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["match"] == "semantic" and body["fallback"] is None
    (hit,) = body["hits"]
    assert hit["kind"] == "semantic" and hit["score"] > 0.4
    seq = hit["sequence_number"]
    assert seq in (6, 7)
    assert [m["sequence_number"] for m in hit["before"]] == [seq - 2, seq - 1]
    assert [m["sequence_number"] for m in hit["after"]] == [seq + 1]
    # neighbours are read across the hot/archive boundary
    assert hit["before"][0]["archived"] is True
    assert f" → #{seq}" in body["text"]
    # all 10 messages were embedded once; the next search embeds only the query
    embeds = ollama.count("/api/embed")
    r = await client.post(
        "/tools/chat_history",
        json={"query": "database backups", "match": "semantic", "session_id": sid},
    )
    assert r.json()["hits"][0]["sequence_number"] in (2, 3)
    assert ollama.count("/api/embed") == embeds + 1
    texts = [t for body in ollama.requests_for("/api/embed") for t in body["input"]]
    assert len(texts) == len(CONVERSATION) + 2


async def test_semantic_embeds_only_the_recent_window(
    client, engine, ollama, make_client, settings
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _fill(client, sid)
    async with make_client(settings, history_embed_recent=4) as c:
        c.headers["Authorization"] = client.headers["Authorization"]
        r = await c.post(
            "/tools/chat_history",
            json={"query": "tomatoes watering", "match": "semantic", "session_id": sid},
        )
        body = r.json()
        # seq 4/5 are outside the newest 4 messages: only keyword could find them
        assert all(h["sequence_number"] >= 6 for h in body["hits"]) or body["fallback"]
    texts = [t for b in ollama.requests_for("/api/embed") for t in b["input"]]
    assert len(texts) == 4 + 1


async def test_semantic_falls_back_to_keyword_when_embeddings_fail(client, engine, ollama) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _fill(client, sid)
    ollama.fail("http500")
    r = await client.post(
        "/tools/chat_history",
        json={"query": "tomatoes", "match": "semantic", "session_id": sid},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["match"] == "keyword"
    assert "embeddings unavailable" in body["fallback"]
    assert {h["sequence_number"] for h in body["hits"]} == {4, 5}
    assert "note: semantic search unavailable" in body["text"]


async def test_recent_mode_and_validation(client) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _fill(client, sid)
    r = await client.post("/tools/chat_history", json={"limit": 3, "session_id": sid})
    body = r.json()
    assert body["mode"] == "recent"
    assert [h["sequence_number"] for h in body["hits"]] == [9, 8, 7]
    assert body["text"].startswith("chat_history recent: 3 message(s)")
    # garbage limits clamp, unknown match is keyword
    r = await client.post(
        "/tools/chat_history",
        json={"query": "port", "match": "fuzzy", "limit": "lots", "session_id": sid},
    )
    assert r.status_code == 200 and r.json()["match"] == "keyword" and r.json()["limit"] == 5
    # a query that is no string is no query (the call lists), in either match: never a
    # 500 (schemathesis found one: the semantic mode's embed-ahead step took its length)
    for match in ("keyword", "semantic"):
        r = await client.post(
            "/tools/chat_history",
            json={"mode": None, "query": True, "match": match, "limit": 5, "session_id": sid},
        )
        assert r.status_code == 200, r.text
        assert r.json()["mode"] == "recent"
    r = await client.post("/tools/chat_history", json={"query": "port"})
    assert r.status_code == 422 and "session_id" in r.json()["detail"]
    r = await client.post("/tools/chat_history", json={"query": "port", "session_id": "nope"})
    assert r.status_code == 422
    r = await client.post(
        "/tools/chat_history", json={"query": "port", "session_id": str(uuid.uuid4())}
    )
    assert r.status_code == 404


async def test_other_users_session_is_404(client) -> None:  # type: ignore[no-untyped-def]
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    sid = await _session(client, headers=alice)
    r = await client.post(
        "/tools/chat_history", json={"query": "x"}, headers={**bob, "X-Navi-Session-Id": sid}
    )
    assert r.status_code == 404
    r = await client.post(
        "/tools/chat_history", json={"query": "x"}, headers={**alice, "X-Navi-Session-Id": sid}
    )
    assert r.status_code == 200
