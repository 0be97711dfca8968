"""SESSION_MAX_HISTORY_BYTES: the hot history is cut back to 80 % on a user boundary."""

from __future__ import annotations

import psycopg

from tests.conftest import ADMIN_TOKEN

LIMIT = 8000


def _rows(db_url: str, table: str, sid: str) -> list[tuple]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        return c.execute(
            f"select sequence_number, role, octet_length(content), is_context from {table} "
            "where session_id = %s order by sequence_number",
            (sid,),
        ).fetchall()


async def test_hot_history_is_cut_on_a_user_boundary(make_client, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, session_max_history_bytes=LIMIT) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = (await c.post("/sessions", json={"profile_id": "default"})).json()["id"]
        # exchanges of user (100 B) + assistant (500 B) + tool (300 B) + assistant (200 B),
        # all out of the LLM context except the newest two exchanges
        for turn in range(12):
            msgs = [
                {"role": "user", "content": "u" * 100, "is_context": turn >= 10},
                {"role": "assistant", "content": "a" * 500, "is_context": turn >= 10},
                {"role": "tool", "content": "t" * 300, "is_context": turn >= 10},
                {"role": "assistant", "content": "b" * 200, "is_context": turn >= 10},
            ]
            r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
            assert r.status_code == 201, r.text
        hot = _rows(db_url, "session_messages", sid)
        cold = _rows(db_url, "session_messages_archive", sid)
        assert cold, "nothing was archived"
        assert len(hot) + len(cold) == 48
        assert sum(r[2] for r in hot) <= LIMIT
        # the first hot message is a user message; every archived row precedes it
        assert hot[0][1] == "user"
        assert max(r[0] for r in cold) < hot[0][0]
        # an assistant message is never separated from the user message before it:
        # the archive ends with a complete exchange
        assert cold[-1][1] == "assistant" and cold[-4][1] == "user"
        # history reads straight through hot + archive
        page = (await c.get(f"/sessions/{sid}/messages?limit=200")).json()["messages"]
        assert [m["sequence_number"] for m in page] == list(range(48))


async def test_context_rows_stay_hot_and_large_append_checks_at_once(
    make_client, settings, db_url
) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, session_max_history_bytes=LIMIT) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = (await c.post("/sessions", json={"profile_id": "default"})).json()["id"]
        old = [
            {"role": "user", "content": "q" * 1000, "is_context": True},
            {"role": "assistant", "content": "r" * 2000, "is_context": False},
            {"role": "user", "content": "q" * 1000, "is_context": False},
            {"role": "assistant", "content": "r" * 2000, "is_context": False},
        ]
        await c.post(f"/sessions/{sid}/messages", json={"messages": old})
        assert _rows(db_url, "session_messages_archive", sid) == []
        # 3 messages (no multiple of 16 crossed) but one of 6 KB: measured at once
        big = [
            {"role": "user", "content": "x" * 10, "is_context": False},
            {"role": "assistant", "content": "y" * 6000, "is_context": False},
            {"role": "user", "content": "z" * 10},
        ]
        await c.post(f"/sessions/{sid}/messages", json={"messages": big})
        hot = _rows(db_url, "session_messages", sid)
        cold = _rows(db_url, "session_messages_archive", sid)
        # 12 020 B > 8000: cut down to ≤ 6400 B, before the user message #6 (the 6 KB
        # answer must go with its question); seq 0 is still in the LLM context and stays
        assert [r[0] for r in cold] == [1, 2, 3, 4, 5]
        assert [(r[0], r[1]) for r in hot] == [(0, "user"), (6, "user")]


async def test_zero_disables(make_client, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, session_max_history_bytes=0) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = (await c.post("/sessions", json={"profile_id": "default"})).json()["id"]
        msgs = [{"role": "user", "content": "x" * 5000, "is_context": False}] * 20
        await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
        assert _rows(db_url, "session_messages_archive", sid) == []
