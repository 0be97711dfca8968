"""`POST /me/import/chats`: chat exports become sessions, findable, idempotent, never 5xx."""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from typing import Any

from litestar.testing import AsyncTestClient

from app.db.engine import session_factory
from app.domain.raw_history.live_index import index_live_sessions
from app.llm.factory import build_gateway
from tests.chat_exports import (
    T0,
    chatgpt_zip,
    claude_conversation,
    gpt_conversation,
    gpt_node,
    jsonl,
    tea,
)
from tests.conftest import new_user, run_sql


async def _import(
    client: AsyncTestClient, body: bytes, headers: dict[str, str], fmt: str | None = None
) -> dict[str, Any]:
    url = "/me/import/chats" + (f"?format={fmt}" if fmt else "")
    r = await client.post(url, content=body, headers=headers)
    assert r.status_code == 201, r.text
    return dict(r.json())


def _sessions(db_url: str, uid: str) -> list[tuple[Any, ...]]:
    rows = run_sql(
        db_url,
        "select id::text, name, import_source, import_source_id, next_seq, memory_pending,"
        " last_active from sessions where user_id = %s order by import_source_id",
        uid,
    )
    return rows or []


def _messages(db_url: str, uid: str, sid: str) -> list[tuple[Any, ...]]:
    rows = run_sql(
        db_url,
        "select sequence_number, role, content, extract(epoch from created_at)::float8"
        " from session_messages where user_id = %s and session_id = %s order by sequence_number",
        uid,
        sid,
    )
    return rows or []


async def test_chatgpt_export_becomes_sessions_along_the_kept_branch(client, db_url) -> None:  # type: ignore[no-untyped-def]
    uid, h = await new_user(client, "gpt")
    report = await _import(client, json.dumps([tea("c1")]).encode(), h)
    assert report["format"] == "chatgpt"
    assert report["conversations"] == {"imported": 1, "topped_up": 0, "unchanged": 0, "skipped": 0}
    assert report["messages"]["imported"] == 2
    assert report["messages"]["skipped_by_reason"] == {"system message": 1}
    # the image is not in a bare conversations.json: listed as missing
    assert report["missing_files"] == [
        {"conversation_id": "c1", "name": "pot.jpg", "reason": "not in the export"}
    ]
    [(sid, name, source, source_id, next_seq, pending, last_active)] = _sessions(db_url, uid)
    assert (name, source, source_id, next_seq, pending) == ("Tea", "chatgpt", "c1", 2, True)
    assert last_active.timestamp() == T0 + 50  # the last message's time, not the import's
    assert _messages(db_url, uid, sid) == [
        (0, "user", "How long to steep this sencha?", T0 + 1),
        (1, "assistant", "About 4 minutes at 80 C.", T0 + 50),
    ]
    meta = run_sql(
        db_url,
        "select metadata->>'source', metadata->'attachments' from session_messages"
        " where user_id = %s order by sequence_number",
        uid,
    )
    assert meta == [("import:chatgpt", ["pot.jpg"]), ("import:chatgpt", None)]
    # the words are in the raw index (covered, the open chunk named), not waiting for it
    state = run_sql(
        db_url,
        "select covered::text, open_chunk_id is not null from raw_index_state"
        " where user_id = %s and session_id = %s",
        uid,
        sid,
    )
    assert state == [("{(,2)}", True)]  # as the live indexer covers
    crumbs = run_sql(
        db_url, "select pg_typeof(breadcrumbs)::text from memory_chunks where user_id = %s", uid
    )
    assert crumbs == [("text[]",)]
    # the history API shows it like any session
    r = await client.get(f"/sessions/{sid}/messages", headers=h)
    assert r.status_code == 200 and len(r.json()["messages"]) == 2


async def test_reimport_adds_nothing_and_a_grown_conversation_is_topped_up(client, db_url) -> None:  # type: ignore[no-untyped-def]
    uid, h = await new_user(client, "again")
    body = json.dumps([tea("c1"), tea("c2")]).encode()
    await _import(client, body, h)
    count = run_sql(db_url, "select count(*) from session_messages where user_id = %s", uid)
    again = await _import(client, body, h)
    assert again["conversations"] == {"imported": 0, "topped_up": 0, "unchanged": 2, "skipped": 0}
    assert again["messages"]["imported"] == 0
    assert run_sql(db_url, "select count(*) from session_messages where user_id = %s", uid) == count

    grown = tea("c2")
    grown["mapping"]["u2"] = gpt_node("u2", "a2", "user", "And for oolong?", T0 + 100)
    grown["mapping"]["a3"] = gpt_node("a3", "u2", "assistant", "Longer: 5 minutes.", T0 + 101)
    grown["current_node"] = "a3"
    topped = await _import(client, json.dumps([tea("c1"), grown]).encode(), h)
    assert topped["conversations"] == {"imported": 0, "topped_up": 1, "unchanged": 1, "skipped": 0}
    assert topped["messages"]["imported"] == 2
    sid = next(s[0] for s in _sessions(db_url, uid) if s[3] == "c2")
    assert [m[1:] for m in _messages(db_url, uid, sid)] == [
        ("user", "How long to steep this sencha?", T0 + 1),
        ("assistant", "About 4 minutes at 80 C.", T0 + 50),
        ("user", "And for oolong?", T0 + 100),
        ("assistant", "Longer: 5 minutes.", T0 + 101),
    ]


async def test_zip_attachments_become_session_files(client, db_url) -> None:  # type: ignore[no-untyped-def]
    uid, h = await new_user(client, "zip")
    body = chatgpt_zip([tea("c1")], {"file_00aa-pot.jpg": b"\xff\xd8\xff\xe0 a jpeg"})
    report = await _import(client, body, h)
    assert report["files"] == {"stored": 1, "missing": 0}
    [row] = _sessions(db_url, uid)
    r = await client.get(f"/sessions/{row[0]}/files", headers=h)
    assert r.status_code == 200, r.text
    assert [f["name"] for f in r.json()["items"]] == ["pot.jpg"]
    # a file missing from the first import is not stored by a re-import of the zip: the
    # conversation is unchanged (docs/api.md: upload it to the session)
    _, h2 = await new_user(client, "zip-later")
    assert (await _import(client, json.dumps([tea("c1")]).encode(), h2))["files"]["missing"] == 1
    again = await _import(client, body, h2)
    assert again["conversations"]["unchanged"] == 1 and again["files"] == {
        "stored": 0,
        "missing": 0,
    }


async def test_claude_export_and_its_inline_attachment(client, db_url) -> None:  # type: ignore[no-untyped-def]
    uid, h = await new_user(client, "claude")
    report = await _import(client, json.dumps([claude_conversation()]).encode(), h)
    assert report["format"] == "claude"
    assert report["conversations"]["imported"] == 1 and report["messages"]["imported"] == 2
    assert report["files"] == {"stored": 1, "missing": 1}  # notes.txt's text; pot.png absent
    [(sid, name, source, *_)] = _sessions(db_url, uid)
    assert (name, source) == ("Green tea", "claude")
    msgs = _messages(db_url, uid, sid)
    assert [(m[1], m[2]) for m in msgs] == [
        ("user", "How long should green tea steep?"),
        ("assistant", "2-3 minutes at about 80 C."),
    ]
    assert msgs[1][3] == 1767261602.0  # 2026-01-01T10:00:02Z


async def test_jsonl_messages_grouped_by_conversation(client, db_url) -> None:  # type: ignore[no-untyped-def]
    uid, h = await new_user(client, "jsonl")
    body = jsonl(
        [
            {"conversation_id": "j1", "role": "user", "content": "hi", "time": T0, "title": "Hi"},
            {"conversation_id": "j1", "role": "assistant", "content": "hello", "time": T0 + 1},
            {"conversation_id": "j1", "role": "tool", "content": "x", "time": T0 + 2},
            {
                "conversation_id": "j2",
                "role": "user",
                "content": "bye",
                "created_at": "2026-01-02T00:00:00Z",
            },
        ]
    )
    report = await _import(client, body, h)
    assert report["format"] == "jsonl"
    assert report["conversations"]["imported"] == 2 and report["messages"]["imported"] == 3
    assert report["messages"]["skipped_by_reason"] == {"role 'tool'": 1}
    rows = _sessions(db_url, uid)
    assert [(r[1], r[3], r[4]) for r in rows] == [("Hi", "j1", 2), ("bye", "j2", 1)]


async def test_malformed_inputs_answer_without_5xx(client, db_url) -> None:  # type: ignore[no-untyped-def]
    uid, h = await new_user(client, "bad")
    whole = json.dumps([tea("a"), tea("b")]).encode()
    # truncated: the first conversation imported, the cut reported
    report = await _import(client, whole[:-40], h)
    assert report["conversations"]["imported"] == 1 and report["truncated"]
    # cut before anything could be read: 422
    r = await client.post("/me/import/chats", content=whole[:30], headers=h)
    assert r.status_code == 422 and "nothing could be imported" in r.text, r.text
    # a malformed record named, the others imported; a message without content counted
    bad_tree = gpt_conversation(
        "cyc",
        "Loop",
        [
            gpt_node("u1", "a1", "user", "loop question", T0 + 1),
            gpt_node("a1", "u1", "assistant", "loop answer", T0 + 2),
            gpt_node("e", "a1", "assistant", "", T0 + 3),
        ],
        "e",
    )
    body = json.dumps([{"id": "m", "mapping": "nope"}, bad_tree, 42]).encode()
    report = await _import(client, body, h)
    assert report["conversations"]["imported"] == 1 and report["conversations"]["skipped"] == 2
    assert {s["where"] for s in report["skipped"]} == {"conversation 1 (m)", "conversation 3"}
    assert report["messages"]["skipped_by_reason"] == {"no text content": 1}
    assert any("cycle" in n for n in report["notes"])
    for junk, ctype in [
        (b"", "application/json"),
        (b"not json at all", "application/json"),
        (b"[1, 2", "application/json"),
        (b"PK\x03\x04broken", "application/zip"),
        (b'{"conversation_id": 1', "application/x-ndjson"),
        (b'[{"x": 1}]', "application/json"),
    ]:
        r = await client.post(
            "/me/import/chats", content=junk, headers={**h, "content-type": ctype}
        )
        assert 400 <= r.status_code < 500 or r.status_code == 201, (junk, r.status_code, r.text)
    r = await client.post("/me/import/chats?format=nope", content=b"[]", headers=h)
    assert r.status_code in (400, 422), r.text


async def test_isolation_and_the_admin_route(client, db_url) -> None:  # type: ignore[no-untyped-def]
    a_id, a = await new_user(client, "a")
    b_id, b = await new_user(client, "b")
    body = json.dumps([tea("same")]).encode()
    await _import(client, body, a)
    # the same conversation id is another user's own session
    assert (await _import(client, body, b))["conversations"]["imported"] == 1
    [sa] = _sessions(db_url, a_id)
    r = await client.get(f"/sessions/{sa[0]}/messages", headers=b)
    assert r.status_code == 404
    # an admin imports into a user's account; a user may not use the admin route
    r = await client.post(f"/admin/users/{a_id}/import/chats", content=json.dumps([tea("adm")]))
    assert r.status_code == 201 and r.json()["user_id"] == a_id, r.text
    r = await client.post(f"/admin/users/{a_id}/import/chats", content=body, headers=b)
    assert r.status_code in (403, 404)
    r = await client.post("/admin/users/nobody/import/chats", content=body)
    assert r.status_code == 404
    assert len(_sessions(db_url, a_id)) == 2 and len(_sessions(db_url, b_id)) == 1


async def test_multipart_upload_and_the_size_limit(make_client, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    small = dataclasses.replace(settings, chat_import_max_mb=1)
    async with make_client(small) as c:
        from tests.conftest import ADMIN_TOKEN

        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        uid, h = await new_user(c, "form")
        files = {
            "file": ("conversations.json", json.dumps([tea("f")]).encode(), "application/json")
        }
        r = await c.post("/me/import/chats", files=files, headers=h)
        assert r.status_code == 201 and r.json()["conversations"]["imported"] == 1, r.text
        r = await c.post(
            "/me/import/chats", content=b"[" + b" " * (1024 * 1024 + 10) + b"]", headers=h
        )
        assert r.status_code == 413 and "CHAT_IMPORT_MAX_MB" in r.text, r.text


async def test_imported_words_found_by_memory_search_after_the_live_job(
    client, engine, settings, db_url
) -> None:  # type: ignore[no-untyped-def]
    uid, h = await new_user(client, "find")
    conv = copy.deepcopy(tea("w"))
    conv["mapping"]["a2"]["message"]["content"]["parts"] = ["Use the zorblatt kettle setting."]
    started = time.monotonic()
    await _import(client, json.dumps([conv]).encode(), h)
    # at once: the words were written to the raw index in the import's own transaction
    r = await client.post("/memory/search", json={"query": "zorblatt"}, headers=h)
    assert r.status_code == 200, r.text
    assert [hit["source_type"] for hit in r.json()["hits"]] == ["raw"], r.json()
    assert "zorblatt" in r.json()["hits"][0]["text"]
    llm = build_gateway(settings)
    try:  # the live job's pass, as the background job runs it (words only)
        await index_live_sessions(session_factory(engine), llm, settings, embed=False)
    finally:
        await llm.aclose()
    r = await client.post("/memory/search", json={"query": "zorblatt", "scope": "raw"}, headers=h)
    assert r.status_code == 200, r.text
    assert any("zorblatt" in hit["text"] for hit in r.json()["hits"]), r.json()
    assert time.monotonic() - started < 10
    # imported sessions are named by their title and pending for extraction, oldest first
    rows = run_sql(db_url, "select name, memory_pending from sessions where user_id = %s", uid)
    assert rows == [("Tea", True)]


async def test_console_upload_form(make_client, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import ADMIN_TOKEN
    from tests.integration.console.support import csrf_of, sign_in

    async with make_client(settings) as admin:
        admin.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        uid, h = await new_user(admin, "consoler")
    async with make_client(settings) as c:
        csrf = await sign_in(c, h["Authorization"].removeprefix("Bearer "))
        page = await c.get("/console")
        assert 'action="/console/import/chats"' in page.text and csrf_of(page.text) == csrf
        body = chatgpt_zip([tea("z")], {"file_00aa.dat": b"\xff\xd8\xff\xe0 a jpeg"})
        files = {"file": ("export.zip", body, "application/zip")}
        r = await c.post("/console/import/chats", data={"csrf": csrf}, files=files)
        assert r.status_code == 200, r.text
        assert "1 conversation imported" in r.text and "1 file stored" in r.text, r.text
        r = await c.post("/console/import/chats", data={"csrf": "wrong"}, files=files)
        assert r.status_code == 403
    assert [s[1] for s in _sessions(db_url, uid)] == ["Tea"]


async def test_cli_import_chats(client, settings, db_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.integration.transfer.test_transfer import _cli

    uid, _ = await new_user(client, "cli")
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([tea("cli1"), claude_conversation()]))
    # the first element decides: a Claude conversation in a ChatGPT file is skipped, named
    done = _cli(db_url, settings, "import-chats", str(path), "--user", uid)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["conversations"]["imported"] == 1 and report["conversations"]["skipped"] == 1
    again = _cli(db_url, settings, "import-chats", str(path), "--user", uid)
    assert json.loads(again.stdout)["conversations"]["unchanged"] == 1
    missing = _cli(db_url, settings, "import-chats", str(path), "--user", "nobody")
    assert missing.returncode == 1 and "nobody" in missing.stderr


async def test_nul_bytes_and_odd_values_are_stored_not_5xx(client, db_url) -> None:  # type: ignore[no-untyped-def]
    uid, h = await new_user(client, "nul")
    conv = claude_conversation("nul\u0000id")
    bad = claude_conversation("k2")
    msg = bad["chat_messages"][0]
    msg["content"] = [{"type": "text", "text": "a\u0000b"}]
    msg["files"] = [{"file_name": "x\u0000.png"}]
    msg["attachments"][0]["file_name"] = "n\u0000.txt"
    bad["name"] = "t\u0000"
    bad["chat_messages"][1]["created_at"] = 12
    report = await _import(client, json.dumps([conv, bad]).encode(), h)
    assert report["conversations"]["imported"] == 1 and report["conversations"]["skipped"] == 1
    [(sid, name, *_)] = _sessions(db_url, uid)
    assert name == "t\ufffd"
    assert _messages(db_url, uid, sid)[0][2] == "a\ufffdb"


async def test_extraction_takes_imported_sessions_oldest_first(client, engine, db_url) -> None:  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from app.db.engine import transaction
    from app.domain.facts.extraction_repository import ExtractionRepository

    uid, h = await new_user(client, "oldest")
    newer, older = tea("newer"), tea("older")
    for node in older["mapping"].values():
        if node["message"] and node["message"]["create_time"]:
            node["message"]["create_time"] -= 86400 * 365  # a year before
    await _import(client, json.dumps([newer, older]).encode(), h)
    by_id = {r[3]: r[0] for r in _sessions(db_url, uid)}
    async with transaction(session_factory(engine)) as db:
        rows = await ExtractionRepository(db).candidates(datetime.now(UTC), [])
    mine = [str(r.session_id) for r in rows if r.user_id == uid]
    assert mine == [by_id["older"], by_id["newer"]]


async def test_a_forgotten_text_comes_back_redacted_from_an_export(client, db_url) -> None:  # type: ignore[no-untyped-def]
    """An export made before a forget does not bring the text back (issue 45): the
    messages, their words in the raw index and the session's name are redacted."""
    uid, h = await new_user(client, "forgot")
    r = await client.post("/memory/forget", json={"text": "sencha"}, headers=h)
    assert r.status_code in (200, 202), r.text
    await _import(client, json.dumps([tea("c1")]).encode(), h)
    [(sid, *_)] = _sessions(db_url, uid)
    contents = [row[2] for row in _messages(db_url, uid, sid)]
    assert contents[0] == "How long to steep this [forgotten]?", contents
    found = run_sql(
        db_url,
        "select count(*) from memory_chunks where user_id = %s and content ilike '%%sencha%%'",
        uid,
    )
    assert found == [(0,)]


async def test_chats_count_in_the_message_quota(make_client, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    """Imported messages count in USER_MESSAGE_STORAGE_MB and an import past it is 413,
    the conversations before it kept."""
    tiny = dataclasses.replace(settings, user_message_storage_mb=1, message_max_chars=2_000_000)
    async with make_client(tiny) as c:
        from tests.conftest import ADMIN_TOKEN

        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        uid, h = await new_user(c, "quota")
        await _import(c, json.dumps([tea("c1")]).encode(), h)
        counted = run_sql(db_url, "select sum(message_bytes) from sessions where user_id = %s", uid)
        expected = len(b"How long to steep this sencha?") + len(b"About 4 minutes at 80 C.")
        assert counted == [(expected,)]
        big = copy.deepcopy(tea("c2"))
        for node in big["mapping"].values():
            message = node.get("message")
            if message and message["author"]["role"] == "user":
                message["content"]["parts"] = ["x" * 1_100_000]
        r = await c.post("/me/import/chats", content=json.dumps([big]).encode(), headers=h)
        assert r.status_code == 413, r.text
        assert "USER_MESSAGE_STORAGE_MB" in r.json()["detail"]
        assert [row[3] for row in _sessions(db_url, uid)] == ["c1"]


async def test_metrics_count_an_imports_progress(client) -> None:  # type: ignore[no-untyped-def]
    """`/metrics`: navi_chat_import_total grows a committed batch at a time, by what."""
    from tests.integration.system.test_metrics import sample

    _, h = await new_user(client, "metered")
    name = "navi_chat_import_total"
    before = (await client.get("/metrics")).text
    body = chatgpt_zip([tea("m1"), tea("m2")], {"file_00aa-pot.jpg": b"\xff\xd8\xff\xe0 a jpeg"})
    await _import(client, body, h)
    grown = tea("m2")
    grown["mapping"]["u2"] = gpt_node("u2", "a2", "user", "And for oolong?", T0 + 100)
    grown["current_node"] = "u2"
    await _import(client, json.dumps([tea("m1"), grown]).encode(), h)
    after = (await client.get("/metrics")).text
    added = {
        what: sample(after, name, what=what) - sample(before, name, what=what)
        for what in ("conversations", "topped_up", "messages", "files")
    }
    assert added == {"conversations": 2, "topped_up": 1, "messages": 5, "files": 2}
