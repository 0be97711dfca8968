"""What compression writes: demotion, summary placement, marker, archive, hooks."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import psycopg
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compression import Msg
from tests.conftest import _libpq
from tests.fakes.ollama_server import FakeOllama

from .conftest import append, context, fill, history, new_session


def _db_rows(db_url: str, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(_libpq(db_url)) as conn:
        return conn.execute(sql, params).fetchall()


async def test_compact_writes_summary_first_then_kept_turns(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    ollama.chat_replies = ["- the user asked ten questions\nKEYS: question 0, nginx.conf, TICKET-9"]
    sid = await new_session(cclient)
    await fill(cclient, sid, 10, size=60)
    r = await cclient.post(f"/sessions/{sid}/compact")
    assert r.status_code == 200, r.text
    started, done = r.json()["events"]
    assert started["type"] == "CompressionStarted" and started["max_context_tokens"] == 4096
    assert done["type"] == "ContextCompressed" and done["method"] == "summary"
    assert done["reason"] == "forced" and done["summary"] == "- the user asked ten questions"
    assert done["messages_before"] == 20 and done["messages_after"] == 9  # summary + 4 turns
    ctx = await context(cclient, sid)
    assert ctx[0]["is_summary"] and ctx[0]["role"] == "user" and not ctx[0]["is_display"]
    assert ctx[0]["metadata"]["breadcrumbs"] == ["question 0", "nginx.conf", "TICKET-9"]
    assert [m["content"].split(":")[0] for m in ctx[1:]] == [
        f"{kind} {i}" for i in range(6, 10) for kind in ("question", "answer")
    ]
    s = (await cclient.get(f"/sessions/{sid}")).json()
    assert s["context_token_count"] == r.json()["context_token_count"] > 0
    assert s["session_metadata"]["last_compression"]["reason"] == "forced"
    # the summarizer saw the demoted turns, not the kept ones
    body = [b for p, b in ollama.requests if p == "/api/chat"][-1]["messages"][1]["content"]
    assert "question 0:" in body and "question 5:" in body and "question 6:" not in body


async def test_demotion_survives_reload_no_resurrected_summaries(
    cclient: AsyncTestClient, db_url: str
) -> None:
    sid = await new_session(cclient)
    for round_ in range(4):
        await fill(cclient, sid, 6, size=60, start=round_ * 6)
        r = await cclient.post(f"/sessions/{sid}/compact")
        assert r.status_code == 200, r.text
        ctx = await context(cclient, sid)  # rebuilt from the database on every call
        assert sum(m["is_summary"] for m in ctx) == 1
        assert ctx[0]["is_summary"]
    live = _db_rows(
        db_url,
        "SELECT count(*) FROM session_messages WHERE session_id = %s AND is_summary AND is_context",
        uuid.UUID(sid),
    )
    assert live == [(1,)]
    total = _db_rows(
        db_url,
        "SELECT count(*) FROM session_messages WHERE session_id = %s AND is_summary",
        uuid.UUID(sid),
    )
    assert total == [(4,)]  # older summaries are kept, demoted, never deleted


async def test_display_history_is_never_altered(cclient: AsyncTestClient) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, 12, size=60)
    await append(
        cclient, sid, [{"role": "system", "content": "note", "metadata": {"source": "task_note"}}]
    )
    before = await history(cclient, sid)
    assert (await cclient.post(f"/sessions/{sid}/compact")).status_code == 200
    after = await history(cclient, sid)
    markers = [m for m in after if m["is_compression"]]
    assert len(markers) == 1
    assert markers[0]["content"].startswith("Context compressed: 25 → 10 messages")
    assert markers[0]["is_context"] is False and markers[0]["role"] == "system"
    assert markers[0]["metadata"]["reason"] == "forced"
    assert {"messages_before", "messages_after", "tokens_before", "tokens_after"} <= set(
        markers[0]["metadata"]
    )
    keep = ("sequence_number", "display_index", "role", "content", "metadata")
    assert [{k: m[k] for k in keep} for m in after if not m["is_compression"]] == [
        {k: m[k] for k in keep} for m in before
    ]
    # the allowlisted system record stays in the context, ahead of the summary
    ctx = await context(cclient, sid)
    assert ctx[0]["content"] == "note" and ctx[1]["is_summary"]


async def test_archive_beyond_the_hot_window(
    make_client, settings, ctx_settings, db_url: str
) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import ADMIN_TOKEN

    async with make_client(settings, **ctx_settings, session_messages_window=10) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await new_session(c)
        await fill(c, sid, 15, size=60)  # seq 0..29
        assert (await c.post(f"/sessions/{sid}/compact")).status_code == 200
        # next_seq = 32 (summary 30, marker 31) → threshold 22; demoted rows below it move
        archived = _db_rows(
            db_url,
            "SELECT min(sequence_number), max(sequence_number), count(*) "
            "FROM session_messages_archive WHERE session_id = %s",
            uuid.UUID(sid),
        )
        assert archived == [(0, 21, 22)]
        hist = await history(c, sid)
        assert len(hist) == 31 and sum(m["archived"] for m in hist) == 22
        ctx = await context(c, sid)
        assert ctx[0]["is_summary"] and len(ctx) == 9


async def test_hooks_get_the_demoted_messages_and_keys(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    ollama.chat_replies = ["- s\nKEYS: alpha, beta"]
    seen: list[tuple] = []

    async def record(
        db: AsyncSession,
        user_id: str | None,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
    ) -> None:
        seen.append((user_id, session_id, [m.sequence_number for m in demoted], list(keys)))
        assert all(m.created_at is not None for m in demoted)

    async def broken(db: AsyncSession, *args: object) -> None:
        await db.execute(text("SELECT * FROM no_such_table"))

    hooks = cclient.app.state.runtime.demotion_hooks  # the app's registry
    hooks.register(broken)  # type: ignore[arg-type]
    hooks.register(record)
    try:
        sid = await new_session(cclient)
        await fill(cclient, sid, 6, size=60)
        r = await cclient.post(f"/sessions/{sid}/compact")
        assert r.status_code == 200, r.text
    finally:
        hooks.unregister(broken)  # type: ignore[arg-type]
        hooks.unregister(record)
    me = (await cclient.get("/me")).json()["id"]
    assert seen == [(me, uuid.UUID(sid), [0, 1, 2, 3], ["alpha", "beta"])]
    # the broken hook was rolled back to its savepoint; the compression committed
    ctx = await context(cclient, sid)
    assert ctx[0]["is_summary"] and len(ctx) == 9
