"""Forget means gone: `POST /memory/forget` redacts a text from every store the caller
owns, in one transaction, and no read path returns it afterwards."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.db.engine import session_factory
from app.domain.forget.redact import MARKER
from app.domain.raw_history.idle_index import index_idle_sessions
from app.llm.factory import build_gateway
from tests.conftest import ADMIN_TOKEN, new_user, run_sql
from tests.fakes.ollama_server import FakeOllama
from tests.integration.forget.conftest import ok, session_with

PASSPORT = "X9-PASS-77a"
# what the searches below ask: the number's words, so that an answer echoing its query
# never holds the number itself
WORDS = "X9 PASS 77a"
SPELLINGS = ("X9-PASS-77a", "x9-pass-77A")  # case-insensitive: both are forgotten
# every table holding user data, and what of it to search (the row's text)
TABLES = (
    "session_messages",
    "session_messages_archive",
    "memory_chunks",
    "memory_facts",
    "memory_summary",
    "rolling_summaries",
    "kv_store",
    "error_memory",
    "sessions",
    "raw_index_state",
)


def holding(db_url: str, user_id: str, needle: str) -> dict[str, int]:
    """Per table: the user's rows whose whole text (every column) holds `needle`."""
    out = {}
    for table in TABLES:
        rows = run_sql(
            db_url,
            f"SELECT count(*) FROM {table} t WHERE user_id = %s AND CAST(t.* AS text) ILIKE %s",
            user_id,
            f"%{needle}%",
        )
        assert rows is not None
        out[table] = int(rows[0][0])
    return out


@pytest.fixture
async def fclient(make_client, settings: Settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[no-untyped-def]
    # a 10-message hot window: the compression below archives the first messages
    async with make_client(settings, session_messages_window=10, llm_max_attempts=1) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


def _said(p: str) -> list[dict[str, Any]]:
    """The user says the number, the assistant echoes it and passes it to a tool."""
    call = {"id": "c1", "type": "function", "function": {"name": "check", "arguments": {"n": p}}}
    return [
        {"role": "user", "content": f"My passport number is {p}, remember it."},
        {"role": "assistant", "content": f"Noted: {p.lower()}.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": "check", "content": f"valid: {p}"},
    ]


def _turns(n: int) -> list[dict[str, Any]]:
    return [
        {"role": role, "content": f"{role} turn {i} about the trip to Lisbon in spring"}
        for i in range(n)
        for role in ("user", "assistant")
    ]


async def _fill_alice(
    c: AsyncTestClient,
    user_id: str,
    h: dict[str, str],
    ollama: FakeOllama,
    engine: Any,
    settings: Settings,
    db_url: str,
) -> tuple[str, str]:
    s1 = await session_with(c, h, _said(SPELLINGS[0]) + _turns(8))
    # compressed: the summary (and its KEYS) say it; the demoted turns become raw chunks
    ollama.chat_replies = [f"- The user's passport number is {PASSPORT}.\nKEYS: {PASSPORT}"]
    await ok(await c.post(f"/sessions/{s1}/compact", headers=h))
    # a second session, never compressed, indexed as idle
    s2 = await session_with(c, h, _said(SPELLINGS[1]))
    await ok(await c.patch(f"/sessions/{s2}", json={"name": f"trip {PASSPORT}"}, headers=h))
    await ok(
        await c.post(f"/sessions/{s1}/planning", json={"entry": {"todo": PASSPORT}}, headers=h),
        204,
    )
    fact = await ok(
        await c.post(
            "/memory/facts",
            json={"category": "documents", "key": "passport", "value": PASSPORT},
            headers=h,
        ),
        201,
    )
    other = await ok(
        await c.post(
            "/memory/facts",
            json={"category": "documents", "key": "passport_no", "value": "the same"},
            headers=h,
        ),
        201,
    )
    run_sql(  # hidden behind the passport fact: it goes with it
        db_url,
        "UPDATE memory_facts SET merged_into = %s WHERE id = %s",
        fact["id"],
        other["id"],
    )
    await ok(
        await c.post(
            "/memory/facts",
            json={"category": "travel", "key": "city", "value": "Lisbon"},
            headers=h,
        ),
        201,
    )
    await ok(await c.put("/memory/summary", json={"content": f"Passport {PASSPORT}."}, headers=h))
    await ok(
        await c.put(
            f"/sessions/{s1}/scratchpad/notes", json={"value": f"passport {PASSPORT}"}, headers=h
        )
    )
    await ok(
        await c.post(
            "/tools/write_error",
            json={"tool": "visa", "error": f"passport {PASSPORT} rejected", "fix": "renew it"},
            headers=h,
        )
    )
    files = {"files": ("scan.txt", f"Passport: {PASSPORT}\n".encode(), "text/plain")}
    await ok(await c.post(f"/sessions/{s1}/files", files=files, headers=h), 201)
    # chat_history's semantic search embeds the session's messages (message_embeddings)
    await ok(
        await c.post(
            "/tools/chat_history",
            json={"session_id": s1, "query": "passport number", "match": "semantic"},
            headers=h,
        )
    )
    run_sql(  # as the rolling mode's job writes it (this profile does not roll)
        db_url,
        "INSERT INTO rolling_summaries (session_id, user_id, summary) VALUES (%s, %s, %s)",
        s2,
        user_id,
        json.dumps({"text": f"- passport {PASSPORT}", "keys": [PASSPORT, "Lisbon"]}),
    )
    llm = build_gateway(settings)
    try:
        await index_idle_sessions(
            session_factory(engine), llm, settings, older_than_minutes=0, max_batches=None
        )
    finally:
        await llm.aclose()
    run_sql(  # a job's failure note may quote the model
        db_url,
        "UPDATE raw_index_state SET last_error = %s WHERE session_id = %s",
        f"embed failed: {PASSPORT}",
        s1,
    )
    return s1, s2


async def _read_paths(c: AsyncTestClient, h: dict[str, str], s1: str, s2: str) -> dict[str, str]:
    """Every read path's answer, as text, by a name of the path."""
    bodies = {}
    for n, sid in (("s1", s1), ("s2", s2)):
        for path in ("messages?limit=200", "context", "planning", "", "scratchpad"):
            bodies[f"{n} {path}"] = (await c.get(f"/sessions/{sid}/{path}", headers=h)).text
        r = await c.post(
            f"/sessions/{sid}/prepare", json={"message": {"content": "passport?"}}, headers=h
        )
        bodies[f"{n} prepare"] = r.text
        for match in ("keyword", "semantic"):
            r = await c.post(
                "/tools/chat_history",
                json={"session_id": sid, "query": WORDS, "match": match},
                headers=h,
            )
            bodies[f"{n} chat_history {match}"] = r.text
        r = await c.post(
            "/tools/chat_history",
            json={"session_id": sid, "mode": "recent", "limit": 20},
            headers=h,
        )
        bodies[f"{n} chat_history recent"] = r.text
        token = (await ok(await c.post(f"/sessions/{sid}/share", headers=h)))["token"]
        bodies[f"{n} shared"] = (
            await c.get(f"/shared/{token}", headers={"Authorization": ""})
        ).text
    for scope in ("all", "facts", "raw", "sketches", "errors"):
        for query in (WORDS, "passport number"):
            r = await c.post(
                "/memory/search",
                json={"query": query, "scope": scope, "current_session_id": s1},
                headers=h,
            )
            bodies[f"search {scope} {query}"] = r.text
    r = await c.post("/tools/error_history", json={"query": "passport"}, headers=h)
    bodies["error_history"] = r.text
    bodies["facts"] = (await c.get("/memory/facts", headers=h)).text
    bodies["facts search"] = (await c.get(f"/memory/facts/search?q={WORDS}", headers=h)).text
    bodies["summary"] = (await c.get("/memory/summary", headers=h)).text
    bodies["sessions"] = (await c.get("/sessions", headers=h)).text
    r = await c.post("/tools/memory", json={"action": "search", "query": "passport"}, headers=h)
    bodies["memory tool search"] = r.text
    return bodies


# the paths that return the number before it is forgotten (the others may not find it)
FINDS_IT = (
    "s1 messages?limit=200",
    "s1 context",
    "s1 planning",
    "s1 scratchpad",
    "s1 chat_history keyword",
    "s1 shared",
    "s2 ",
    "s2 shared",
    "search all X9 PASS 77a",
    "search facts X9 PASS 77a",
    "search raw X9 PASS 77a",
    "search sketches X9 PASS 77a",
    "search errors X9 PASS 77a",
    "error_history",
    "facts",
    "summary",
    "sessions",
)


async def test_forget_redacts_every_store_and_every_read_path(
    fclient: AsyncTestClient, ollama: FakeOllama, engine: Any, settings: Settings, db_url: str
) -> None:
    c = fclient
    alice_id, alice = await new_user(c, "alice")
    bob_id, bob = await new_user(c, "bob")
    bob_sid = await session_with(c, bob, _said(PASSPORT))
    await ok(
        await c.post(
            "/memory/facts",
            json={"category": "documents", "key": "passport", "value": PASSPORT},
            headers=bob,
        ),
        201,
    )
    s1, s2 = await _fill_alice(c, alice_id, alice, ollama, engine, settings, db_url)
    before = holding(db_url, alice_id, PASSPORT)
    # every store holds it before (the setup did what it says)
    assert all(before[t] for t in TABLES), before
    assert before["session_messages_archive"] and before["memory_chunks"] >= 2
    bodies = await _read_paths(c, alice, s1, s2)
    assert [p for p in FINDS_IT if PASSPORT.lower() not in bodies[p].lower()] == []

    # a dry run counts, and changes nothing
    dry = await ok(
        await c.post("/memory/forget", json={"text": PASSPORT, "dry_run": True}, headers=alice)
    )
    assert dry["dry_run"] is True
    assert holding(db_url, alice_id, PASSPORT) == before

    embeds = len(ollama.requests_for("/api/embed"))
    out = await ok(await c.post("/memory/forget", json={"text": f"  {PASSPORT} "}, headers=alice))
    assert out["dry_run"] is False
    assert out["changed"] == dry["changed"]
    changed = out["changed"]
    assert changed["messages"] == before["session_messages"]
    assert changed["archived_messages"] == before["session_messages_archive"]
    assert changed["chunks"] == before["memory_chunks"]
    assert changed["facts"] == 2  # the fact and the row hidden behind it
    assert changed["memory_summary"] == 1 and changed["sketches"] == 1 and changed["errors"] == 1
    assert changed["rolling_summaries"] == 1
    assert changed["sessions"] == 2  # s2's name, s1's planning log
    assert changed["job_errors"] == 1
    assert out["total"] == sum(changed.values())
    assert out["files"] == [{"session_id": s1, "path": f"session_files/{s1}/scan.txt"}]

    # vectors (before a read re-embeds anything): no segment of a changed chunk, no message vector of a changed message;
    # the error entry has a new vector
    # the changed chunks were embedded anew, from their redacted text
    sent = [t for body in ollama.requests_for("/api/embed")[embeds:] for t in body["input"]]
    assert any(MARKER in t for t in sent) and not any(PASSPORT.lower() in t.lower() for t in sent)
    unembedded = run_sql(
        db_url,
        "SELECT count(*) FROM memory_chunks c WHERE c.user_id = %s AND NOT EXISTS"
        " (SELECT 1 FROM memory_chunk_vectors v WHERE v.chunk_id = c.id AND v.user_id = c.user_id)",
        alice_id,
    )
    assert unembedded == [(0,)]
    stale = run_sql(
        db_url,
        "SELECT count(*) FROM message_embeddings e JOIN session_messages m"
        " ON m.session_id = e.session_id AND m.sequence_number = e.sequence_number"
        " AND m.user_id = e.user_id WHERE e.user_id = %s AND m.content LIKE '%%[forgotten]%%'",
        alice_id,
    )
    assert stale == [(0,)]
    assert run_sql(
        db_url, "SELECT embedding IS NOT NULL FROM error_memory WHERE user_id = %s", alice_id
    ) == [(True,)]

    # gone from every table, and from every read path
    assert holding(db_url, alice_id, PASSPORT) == dict.fromkeys(TABLES, 0)
    for path, body in (await _read_paths(c, alice, s1, s2)).items():
        assert PASSPORT.lower() not in body.lower(), f"{path}: {body[:500]}"
    # ... the rest stays: order, sequence numbers, other facts, the marker in place
    page = await ok(await c.get(f"/sessions/{s2}/messages", headers=alice))
    assert [m["content"] for m in page["messages"]][:2] == [
        "My passport number is [forgotten], remember it.",
        "Noted: [forgotten].",
    ]
    assert page["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"n": "[forgotten]"}
    facts = await ok(await c.get("/memory/facts", headers=alice))
    assert [f["key"] for f in facts["items"]] == ["city"]
    # bob's identical text is his, untouched
    assert holding(db_url, bob_id, PASSPORT)["session_messages"] == 3
    assert holding(db_url, bob_id, PASSPORT)["memory_facts"] == 1
    page = await ok(await c.get(f"/sessions/{bob_sid}/messages", headers=bob))
    assert PASSPORT in page["messages"][0]["content"]

    # forgetting again finds nothing
    again = await ok(await c.post("/memory/forget", json={"text": PASSPORT}, headers=alice))
    assert again["total"] == 0
