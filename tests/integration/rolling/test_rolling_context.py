"""`POST /sessions/{id}/prepare` in rolling mode: the last 16 messages + the summary."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import psycopg

from tests.conftest import ADMIN_TOKEN


def _sql(db_url: str, stmt: str, *args: object) -> list[tuple]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        cur = c.execute(stmt, args)  # type: ignore[arg-type]
        rows = cur.fetchall() if cur.description else []
        c.commit()
        return rows


async def test_rolling_prepare_keeps_16_messages_and_the_summary(
    make_client, settings, tmp_path: Path, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps({"chat": {"context_mode": "rolling"}}))
    s = replace(settings, profiles_file=str(profiles))
    async with make_client(s) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = (await c.post("/sessions", json={"profile_id": "chat"})).json()["id"]
        msgs = []
        for i in range(20):
            msgs += [
                {"role": "user", "content": f"question {i}"},
                {"role": "assistant", "content": f"answer {i}"},
            ]
        await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
        # no summary yet: just the window
        r = await c.post(f"/sessions/{sid}/prepare", json={"message": {"content": "next?"}})
        assert r.status_code == 200, r.text
        ctx = r.json()["context"]
        assert [m["content"] for m in ctx] == [
            f"{kind} {i}" for i in range(12, 20) for kind in ("question", "answer")
        ]
        _sql(
            db_url,
            "insert into rolling_summaries (session_id, user_id, summary, cursor_at)"
            " select id, user_id, %s, now() from sessions where id = %s",
            json.dumps(
                {
                    "key_decisions": ["Do: answer in English", "never use tabs"],
                    "past_discussions": ["questions 0-11"],
                    "current_discussion": "the questions",
                }
            ),
            sid,
        )
        r = await c.post(f"/sessions/{sid}/prepare", json={"message": {"content": "next?"}})
        body = r.json()
        ctx = body["context"]
        assert len(ctx) == 17
        assert ctx[0]["content"] == "question 12" and ctx[15]["content"] == "answer 19"
        turn = ctx[-1]
        assert turn["role"] == "user" and turn["sequence_number"] == -1
        assert turn["content"].startswith("Prior summary (JSON)")
        assert "Don't: use tabs" in turn["content"] and "questions 0-11" in turn["content"]
        assert body["events"] == [] and body["tokens"] > 0
        assert ollama.count("/api/chat") == 0  # a rolling turn makes no LLM call
        # rows before the window left the LLM context (the history keeps them)
        flags = _sql(
            db_url,
            "select sequence_number, is_context from session_messages where session_id = %s "
            "order by sequence_number",
            sid,
        )
        assert [f for _, f in flags] == [False] * 24 + [True] * 16
        hist = (await c.get(f"/sessions/{sid}/messages?limit=200")).json()["messages"]
        assert len(hist) == 40
        # the stored context follows
        stored = (await c.get(f"/sessions/{sid}/context")).json()["messages"]
        assert len(stored) == 16


async def test_compress_mode_is_unchanged(make_client, settings) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = (await c.post("/sessions", json={"profile_id": "default"})).json()["id"]
        msgs = [{"role": "user", "content": f"m{i}"} for i in range(30)]
        await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
        r = await c.post(f"/sessions/{sid}/prepare", json={})
        assert len(r.json()["context"]) == 30
