"""`/sessions/{id}/rolling-summary`: the user reads and corrects the rolling summary; the
job builds the next chunk on the edit, and an edit never overwrites what the job wrote
since it was read."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from app.config import Settings
from app.domain.rolling.services import run_rolling_summaries
from tests.conftest import ADMIN_TOKEN, new_user
from tests.integration.rolling.test_rolling_summary import (
    _append,
    _later,
    _previous,
    _session,
    replica,
    summariser,
)


@pytest.fixture
def rolling_settings(settings: Settings, tmp_path: Path) -> Settings:
    """Profile `chat` in rolling mode; two exchanges per chunk (as test_rolling_summary)."""
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps({"chat": {"context_mode": "rolling"}}))
    return replace(settings, profiles_file=str(profiles), rolling_summary_chunk_chars=1400)


EDIT = {
    "key_decisions": ["never use tabs", "Do: indent with 4 spaces"],
    "past_discussions": ["the user moved the shed"],
    "current_discussion": "roof tiles",
}


async def test_an_edit_is_what_the_next_chunk_builds_on(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(make_client, rolling_settings, "chat", exchanges=4)
    ok = summariser()
    ollama.chat_replies = [ok, lambda body: "not a summary"]  # chunk 2 fails: cursor mid-way
    async with replica(db_url, rolling_settings) as state:
        await run_rolling_summaries(state)
    async with make_client(rolling_settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        r = await c.get(f"/sessions/{sid}/rolling-summary")
        assert r.status_code == 200, r.text
        read = r.json()
        assert read["context_mode"] == "rolling" and read["cursor_seq"] == 3
        assert read["summary"]["past_discussions"] == ["answers 0,1"]
        r = await c.put(f"/sessions/{sid}/rolling-summary", json={"summary": EDIT, "cursor_seq": 3})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["cursor_seq"] == 3  # an edit keeps the cursor
        assert out["summary"]["key_decisions"] == ["Don't: use tabs", "Do: indent with 4 spaces"]
        assert (await c.get(f"/sessions/{sid}/rolling-summary")).json() == out
    ollama.chat_replies = [ok]
    async with replica(db_url, rolling_settings) as state:
        # the next tick past the failed chunk's backoff: the edit did not hide the session
        report = await run_rolling_summaries(state, now=_later(16))
    assert report.chunks == 1
    body = ollama.requests_for("/api/chat")[-1]
    assert _previous(body)["past_discussions"] == ["the user moved the shed"]
    assert "answer 2" in body["messages"][1]["content"]
    async with make_client(rolling_settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        now = (await c.get(f"/sessions/{sid}/rolling-summary")).json()
        assert now["cursor_seq"] == 7
        assert now["summary"]["past_discussions"] == ["the user moved the shed", "answers 2,3"]
        # an edit based on the summary before the job moved on is refused, not applied
        r = await c.put(f"/sessions/{sid}/rolling-summary", json={"summary": EDIT, "cursor_seq": 3})
        assert r.status_code == 409, r.text
        assert "moved on" in r.json()["detail"]
        assert (await c.get(f"/sessions/{sid}/rolling-summary")).json() == now


async def test_a_first_summary_stands_for_the_history_so_far(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(make_client, rolling_settings, "chat", exchanges=2)
    async with make_client(rolling_settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        read = (await c.get(f"/sessions/{sid}/rolling-summary")).json()
        assert (read["summary"], read["cursor_seq"]) == (None, None)
        r = await c.put(
            f"/sessions/{sid}/rolling-summary", json={"summary": EDIT, "cursor_seq": None}
        )
        assert r.status_code == 200, r.text
        assert r.json()["cursor_seq"] == 3  # the newest message
    await _append(make_client, rolling_settings, sid, 5, None)
    ollama.chat_replies = [summariser()]
    async with replica(db_url, rolling_settings) as state:
        await run_rolling_summaries(state)
    body = ollama.requests_for("/api/chat")[-1]
    assert _previous(body)["current_discussion"] == "roof tiles"
    assert "answer 0" not in body["messages"][1]["content"]


async def test_who_may_read_and_edit_and_what_is_refused(
    make_client, rolling_settings, db_url
) -> None:  # type: ignore[no-untyped-def]
    async with make_client(rolling_settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        alice_id, alice = await new_user(c, "alice")
        _, bob = await new_user(c, "bob")
        _, reader = await new_user(c, "reader", ["navi.sessions.read_all"])
        sid = (await c.post("/sessions", json={"profile_id": "chat"}, headers=alice)).json()["id"]
        url = f"/sessions/{sid}/rolling-summary"
        body = {"summary": EDIT, "cursor_seq": None}
        assert (await c.get(url, headers=bob)).status_code == 404
        assert (await c.put(url, json=body, headers=bob)).status_code == 404
        assert (await c.get(url, headers=reader)).status_code == 200
        assert (await c.put(url, json=body, headers=reader)).status_code == 403
        bad = [
            {"summary": {**EDIT, "key_decisions": ["Do: x"] * 9}, "cursor_seq": None},
            {"summary": {**EDIT, "past_discussions": ["y" * 601]}, "cursor_seq": None},
            {"summary": {**EDIT, "current_discussion": "z" * 2001}, "cursor_seq": None},
            {"summary": {**EDIT, "mood": "fine"}, "cursor_seq": None},
            {"summary": EDIT},  # the cursor the edit is based on is required
        ]
        for b in bad:
            r = await c.put(url, json=b, headers=alice)
            assert r.status_code == 422, (b, r.text)
        assert (await c.get(url, headers=alice)).json()["summary"] is None
        # the job holds the row (a chunk's model call): the edit does not wait for it
        dsn = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(dsn) as held:
            held.execute(
                "INSERT INTO rolling_summaries (session_id, user_id)"
                " SELECT id, user_id FROM sessions WHERE id = %s",
                (sid,),
            )
            held.commit()
            held.execute(  # naming the user: on Citus a lock routes to one shard
                "SELECT 1 FROM rolling_summaries WHERE session_id = %s AND user_id = %s FOR UPDATE",
                (sid, alice_id),
            )
            r = await c.put(url, json=body, headers=alice)
            assert r.status_code == 409, r.text
            assert "being updated" in r.json()["detail"]
        r = await c.put(url, json=body, headers=alice)
        assert r.status_code == 200, r.text
        assert r.json()["cursor_seq"] == -1  # no message yet: every one is still to come
