"""Forget means gone: `POST /memory/forget` redacts a text from every store the caller
owns, in one transaction, and no read path returns it afterwards."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from prometheus_client import REGISTRY

from app.asgi import build_gateway
from app.config import Settings
from app.db.engine import session_factory
from app.domain.forget.redact import MARKER, text_hash
from app.domain.raw_history.idle_index import index_idle_sessions
from tests.conftest import ADMIN_TOKEN, new_user, run_sql
from tests.fakes.ollama_server import FakeOllama

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


async def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json() if r.content else None


async def _session(c: AsyncTestClient, h: dict[str, str], messages: list[dict[str, Any]]) -> str:
    sid = (await _ok(await c.post("/sessions", json={"profile_id": "code"}, headers=h), 201))["id"]
    await _ok(
        await c.post(f"/sessions/{sid}/messages", json={"messages": messages}, headers=h), 201
    )
    return str(sid)


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
    s1 = await _session(c, h, _said(SPELLINGS[0]) + _turns(8))
    # compressed: the summary (and its KEYS) say it; the demoted turns become raw chunks
    ollama.chat_replies = [f"- The user's passport number is {PASSPORT}.\nKEYS: {PASSPORT}"]
    await _ok(await c.post(f"/sessions/{s1}/compact", headers=h))
    # a second session, never compressed, indexed as idle
    s2 = await _session(c, h, _said(SPELLINGS[1]))
    await _ok(await c.patch(f"/sessions/{s2}", json={"name": f"trip {PASSPORT}"}, headers=h))
    await _ok(
        await c.post(f"/sessions/{s1}/planning", json={"entry": {"todo": PASSPORT}}, headers=h),
        204,
    )
    fact = await _ok(
        await c.post(
            "/memory/facts",
            json={"category": "documents", "key": "passport", "value": PASSPORT},
            headers=h,
        ),
        201,
    )
    other = await _ok(
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
    await _ok(
        await c.post(
            "/memory/facts",
            json={"category": "travel", "key": "city", "value": "Lisbon"},
            headers=h,
        ),
        201,
    )
    await _ok(await c.put("/memory/summary", json={"content": f"Passport {PASSPORT}."}, headers=h))
    await _ok(
        await c.put(
            f"/sessions/{s1}/scratchpad/notes", json={"value": f"passport {PASSPORT}"}, headers=h
        )
    )
    await _ok(
        await c.post(
            "/tools/write_error",
            json={"tool": "visa", "error": f"passport {PASSPORT} rejected", "fix": "renew it"},
            headers=h,
        )
    )
    files = {"files": ("scan.txt", f"Passport: {PASSPORT}\n".encode(), "text/plain")}
    await _ok(await c.post(f"/sessions/{s1}/files", files=files, headers=h), 201)
    # chat_history's semantic search embeds the session's messages (message_embeddings)
    await _ok(
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
        token = (await _ok(await c.post(f"/sessions/{sid}/share", headers=h)))["token"]
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
    bob_sid = await _session(c, bob, _said(PASSPORT))
    await _ok(
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
    dry = await _ok(
        await c.post("/memory/forget", json={"text": PASSPORT, "dry_run": True}, headers=alice)
    )
    assert dry["dry_run"] is True
    assert holding(db_url, alice_id, PASSPORT) == before

    embeds = len(ollama.requests_for("/api/embed"))
    out = await _ok(await c.post("/memory/forget", json={"text": f"  {PASSPORT} "}, headers=alice))
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
    page = await _ok(await c.get(f"/sessions/{s2}/messages", headers=alice))
    assert [m["content"] for m in page["messages"]][:2] == [
        "My passport number is [forgotten], remember it.",
        "Noted: [forgotten].",
    ]
    assert page["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"n": "[forgotten]"}
    facts = await _ok(await c.get("/memory/facts", headers=alice))
    assert [f["key"] for f in facts["items"]] == ["city"]
    # bob's identical text is his, untouched
    assert holding(db_url, bob_id, PASSPORT)["session_messages"] == 3
    assert holding(db_url, bob_id, PASSPORT)["memory_facts"] == 1
    page = await _ok(await c.get(f"/sessions/{bob_sid}/messages", headers=bob))
    assert PASSPORT in page["messages"][0]["content"]

    # forgetting again finds nothing
    again = await _ok(await c.post("/memory/forget", json={"text": PASSPORT}, headers=alice))
    assert again["total"] == 0


@pytest.mark.parametrize(
    ("text", "detail"),
    [("ab", "at least 3"), ("  ab \n ", "at least 3"), ("x" * 1001, "text"), ("rgot", "marker")],
)
async def test_bad_text_is_422(client: AsyncTestClient, text: str, detail: str) -> None:
    r = await client.post("/memory/forget", json={"text": text})
    assert r.status_code == 422, r.text
    assert detail in r.json()["detail"]
    r = await client.post("/tools/memory", json={"action": "forget", "text": text})
    assert r.status_code == 422, r.text


async def test_literal_text_with_like_and_regex_metacharacters(
    client: AsyncTestClient, db_url: str
) -> None:
    weird = "a.b*c%_\\"
    uid, h = await new_user(client, "carol")
    decoys = ["aXbbbc%_\\", "a.b*cZZ\\", "a.b*c%_/"]  # a regex, a LIKE, a near miss
    messages = [{"role": "user", "content": f"key {weird} end"}]
    messages += [{"role": "user", "content": d} for d in decoys]
    call = {"function": {"name": "t", "arguments": {"k": f'quote "{weird.upper()}"'}}}
    messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    sid = await _session(client, h, messages)
    await _ok(
        await client.post(
            "/memory/facts", json={"category": "c", "key": "k", "value": weird}, headers=h
        ),
        201,
    )
    for i, d in enumerate(decoys):
        body = {"category": "c", "key": f"decoy{i}", "value": d}
        await _ok(await client.post("/memory/facts", json=body, headers=h), 201)

    out = await _ok(await client.post("/memory/forget", json={"text": weird}, headers=h))
    assert out["changed"]["messages"] == 2 and out["changed"]["facts"] == 1, out
    page = await _ok(await client.get(f"/sessions/{sid}/messages", headers=h))
    contents = [m["content"] for m in page["messages"]]
    assert "key [forgotten] end" in contents and all(d in contents for d in decoys)
    args = [m["tool_calls"] for m in page["messages"] if m["tool_calls"]][0][0]["function"]
    assert args["arguments"] == {"k": 'quote "[forgotten]"'}
    facts = await _ok(await client.get("/memory/facts", headers=h))
    assert sorted(f["value"] for f in facts["items"]) == sorted(decoys)
    # the tool-call JSON is still valid JSON in the table
    rows = run_sql(
        db_url,
        "SELECT CAST(tool_calls AS text) FROM session_messages WHERE user_id = %s"
        " AND jsonb_typeof(tool_calls) = 'array'",
        uid,
    )
    assert rows and json.loads(rows[0][0])


async def test_memory_tool_forgets_a_text(client: AsyncTestClient) -> None:
    _, h = await new_user(client, "dave")
    sid = await _session(client, h, [{"role": "user", "content": "my PIN is 4711-2"}])
    await _ok(
        await client.post(
            "/memory/facts", json={"category": "c", "key": "pin", "value": "4711-2"}, headers=h
        ),
        201,
    )
    r = await _ok(
        await client.post("/tools/memory", json={"action": "forget", "text": "4711-2"}, headers=h)
    )
    assert r["ok"] is True and r["deleted"] == 1
    assert r["forgotten"]["changed"]["messages"] == 1
    assert "4711" not in r["text"]
    page = await _ok(await client.get(f"/sessions/{sid}/messages", headers=h))
    assert page["messages"][0]["content"] == "my PIN is [forgotten]"
    # by key, as before
    await _ok(
        await client.post(
            "/memory/facts", json={"category": "c", "key": "shell", "value": "zsh"}, headers=h
        ),
        201,
    )
    r = await _ok(
        await client.post("/tools/memory", json={"action": "forget", "key": "shell"}, headers=h)
    )
    assert r["ok"] is True and r["deleted"] == 1
    r = await client.post("/tools/memory", json={"action": "forget"}, headers=h)
    assert r.status_code == 422 and "text" in r.json()["detail"]


async def test_admin_forgets_for_a_user(make_client, settings: Settings, capsys) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, log_level="info") as client:  # after capsys: logs captured
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        uid, h = await new_user(client, "erin")
        _, other = await new_user(client, "frank", ["navi.memory.read_all"])
        await _session(client, h, [{"role": "user", "content": "secret word zebra42"}])
        path = f"/admin/users/{uid}/forget"
        for headers in (other, h):
            r = await client.post(path, json={"text": "zebra42"}, headers=headers)
            assert r.status_code == 403, r.text
        r = await client.post("/admin/users/nobody-here/forget", json={"text": "zebra42"})
        assert r.status_code == 404, r.text
        capsys.readouterr()
        rows = {"store": "messages"}
        before = REGISTRY.get_sample_value("navi_forgotten_rows_total", rows) or 0
        out = await _ok(await client.post(path, json={"text": "zebra42"}))
        assert out["changed"]["messages"] == 1
        assert REGISTRY.get_sample_value("navi_forgotten_rows_total", rows) == before + 1
        # the log names a hash of the text, never the text
        logged = "".join(capsys.readouterr())
        assert "memory.forgotten" in logged and text_hash("zebra42") in logged
        assert "zebra42" not in logged


async def test_without_the_embedder_changed_rows_are_left_unembedded(
    client: AsyncTestClient, ollama: FakeOllama, engine: Any, settings: Settings, db_url: str
) -> None:
    uid, h = await new_user(client, "gina")
    await _session(client, h, [{"role": "user", "content": "door code 8086-X, remember"}])
    body = {"tool": "door", "error": "code 8086-X refused", "fix": "call the janitor"}
    await _ok(await client.post("/tools/write_error", json=body, headers=h))
    llm = build_gateway(settings)
    try:
        await index_idle_sessions(session_factory(engine), llm, settings, older_than_minutes=0)
    finally:
        await llm.aclose()
    ollama.fail("http500", paths={"/api/embed"})
    out = await _ok(await client.post("/memory/forget", json={"text": "8086-x"}, headers=h))
    ollama.recover()
    assert out["changed"]["chunks"] == 1 and out["changed"]["errors"] == 1
    assert run_sql(db_url, "SELECT count(*) FROM memory_chunk_vectors WHERE user_id = %s", uid) == [
        (0,)
    ]  # what `make reembed` embeds
    assert run_sql(
        db_url, "SELECT embedding IS NULL, error_text FROM error_memory WHERE user_id = %s", uid
    ) == [(True, "code [forgotten] refused")]


async def test_chunks_that_become_identical_keep_distinct_hashes(
    client: AsyncTestClient, db_url: str
) -> None:
    """(session, content_hash) is unique: two chunks that differ only in the text's
    letter case are both redacted (the second's hash salted with its id)."""
    uid, h = await new_user(client, "hank")
    sid = await _session(client, h, [{"role": "user", "content": "hello"}])
    for n, content in enumerate(["note Q-42 done", "note q-42 done", "note [forgotten] done"]):
        run_sql(
            db_url,
            "INSERT INTO memory_chunks (id, user_id, session_id, content, content_hash,"
            " start_seq, end_seq) VALUES (gen_random_uuid(), %s, %s, %s,"
            " encode(sha256(convert_to(%s, 'UTF8')), 'hex'), %s, %s)",
            uid,
            sid,
            content,
            content,
            n,
            n,
        )
    out = await _ok(await client.post("/memory/forget", json={"text": "q-42"}, headers=h))
    assert out["changed"]["chunks"] == 2
    rows = run_sql(
        db_url, "SELECT content, content_hash FROM memory_chunks WHERE user_id = %s", uid
    )
    assert rows is not None and {r[0] for r in rows} == {"note [forgotten] done"}
    assert len({r[1] for r in rows}) == 3
