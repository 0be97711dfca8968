"""The per-user message-storage quota, USER_MESSAGE_STORAGE_MB (issue 42, below the cut:
"no per-user quotas"): appends, a turn's new message and an import past it answer 413
naming the setting and the user's usage; the check reads one counter sum, not the
messages."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.conftest import ADMIN_TOKEN, new_user, run_sql
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama

CHUNK = 400_000  # characters of one message (ASCII: as many bytes)


def _msg(content: str, role: str = "user") -> dict[str, Any]:
    return {"messages": [{"role": role, "content": content}]}


async def _session(c: AsyncTestClient, headers: dict[str, str]) -> str:
    r = await c.post("/sessions", json={"profile_id": "default"}, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


@contextmanager
def _statements() -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn, cursor, statement, params, context, executemany) -> None:  # type: ignore[no-untyped-def]
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


async def test_appends_past_the_quota_answer_413_naming_it(make_client, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, user_message_storage_mb=1) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        alice_id, alice = await new_user(c, "alice")
        _, bob = await new_user(c, "bob")
        sid = await _session(c, alice)
        for _ in range(2):  # 800 KB of 1 MiB
            r = await c.post(f"/sessions/{sid}/messages", json=_msg("a" * CHUNK), headers=alice)
            assert r.status_code == 201, r.text
        other = await _session(c, alice)  # the quota is the user's, over all their sessions
        r = await c.post(f"/sessions/{other}/messages", json=_msg("b" * CHUNK), headers=alice)
        assert r.status_code == 413, r.text
        detail = r.json()["detail"]
        assert "USER_MESSAGE_STORAGE_MB" in detail and "0.8 MiB are in use" in detail, detail
        # nothing of the refused append was stored, its bytes not counted
        page = (await c.get(f"/sessions/{other}/messages", headers=alice)).json()
        assert page["messages"] == []
        rows = run_sql(
            db_url, "SELECT sum(message_bytes) FROM sessions WHERE user_id = %s", alice_id
        )
        assert rows == [(2 * CHUNK,)]
        # another user is not affected
        bobs = await _session(c, bob)
        r = await c.post(f"/sessions/{bobs}/messages", json=_msg("b" * CHUNK), headers=bob)
        assert r.status_code == 201, r.text
        # deleting a session gives its room back
        assert (await c.delete(f"/sessions/{sid}", headers=alice)).status_code == 204
        r = await c.post(f"/sessions/{other}/messages", json=_msg("b" * CHUNK), headers=alice)
        assert r.status_code == 201, r.text


async def test_the_check_adds_one_statement_to_an_append(make_client, settings) -> None:  # type: ignore[no-untyped-def]
    """The count rides in the append's reserving UPDATE; the check is one SUM over the
    user's session rows, read once and then remembered by the process for a while, far
    from the quota (background jobs of the app may run statements meanwhile: only the
    statements naming the counter are counted)."""
    for mb in (0, 1024):
        async with make_client(settings, user_message_storage_mb=mb) as c:
            c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
            _, h = await new_user(c, f"counted{mb}")
            sid = await _session(c, h)
            kinds = []
            for text in ("first", "second", "third"):
                with _statements() as seen:
                    r = await c.post(f"/sessions/{sid}/messages", json=_msg(text), headers=h)
                    assert r.status_code == 201, r.text
                counted = [s for s in seen if "message_bytes" in s]
                assert not any("session_messages" in s for s in counted)  # no message read
                kinds.append([s.lstrip().split()[0] for s in counted])
            read = ["SELECT"] * (mb > 0)
            assert kinds == [["UPDATE", *read], ["UPDATE"], ["UPDATE"]], kinds


async def test_a_turns_new_message_past_the_quota_is_413(  # type: ignore[no-untyped-def]
    make_client, settings, ollama: FakeOllama
) -> None:
    async with make_client(settings, user_message_storage_mb=1) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        full = await _session(c, {})
        for size in (CHUNK, CHUNK, 248_000):  # 1,048,000 bytes of 1,048,576
            r = await c.post(f"/sessions/{full}/messages", json=_msg("a" * size))
            assert r.status_code == 201, r.text
        sid = await _session(c, {})
        chats = ollama.count("/api/chat")
        body = {"message": {"content": "c" * 1000}}
        r = await c.post(f"/sessions/{sid}/turns", json=body)
        assert r.status_code == 413, r.text
        assert "USER_MESSAGE_STORAGE_MB" in r.json()["detail"]
        assert ollama.count("/api/chat") == chats  # the model was never called
        # the lease was dropped: a small turn runs
        ollama.chat_replies[:] = [ScriptedReply("ok")]
        r = await c.post(f"/sessions/{sid}/turns", json={"message": {"content": "hi"}})
        assert r.status_code == 200, r.text


async def test_an_import_past_the_quota_is_413_naming_the_line(
    make_client, settings, db_url
) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, alice = await new_user(c, "alice")
        sid = await _session(c, alice)
        for _ in range(3):
            r = await c.post(f"/sessions/{sid}/messages", json=_msg("a" * CHUNK), headers=alice)
            assert r.status_code == 201, r.text
        body = (await c.get("/me/export", headers=alice)).content
        assert (await c.delete(f"/sessions/{sid}", headers=alice)).status_code == 204
        bob_id, bob = await new_user(c, "bob")
        r = await c.post("/me/import", content=body, headers=bob)  # no quota in the way
        assert r.status_code == 201, r.text
        # the import counted the messages it stored
        rows = run_sql(db_url, "SELECT sum(message_bytes) FROM sessions WHERE user_id = %s", bob_id)
        assert rows == [(3 * CHUNK,)]
    async with make_client(settings, user_message_storage_mb=1) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, carol = await new_user(c, "carol")
        assert (await c.delete(f"/sessions/{sid}", headers=bob)).status_code == 204
        r = await c.post("/me/import", content=body, headers=carol)
        assert r.status_code == 413, r.text
        detail = r.json()["detail"]
        assert detail.startswith("line ") and "USER_MESSAGE_STORAGE_MB" in detail, detail
        assert (await c.get("/sessions", headers=carol)).json()["total"] == 0
