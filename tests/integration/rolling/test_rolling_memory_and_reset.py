"""Rolling mode, issue 30: only the relevant summary entries ride (none → no block), the
user's memory is injected as in compress mode, and `POST /sessions/{id}/reset` clears
the conversation but keeps the rolling summary."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from litestar.testing import AsyncTestClient

from tests.conftest import ADMIN_TOKEN, new_user

SUMMARY = {
    "key_decisions": ["Do: answer in English", "Don't: restart the nginx proxy on fridays"],
    "past_discussions": [
        "set the nginx reverse proxy to listen on port 8098",
        "paid invoice INV-2291 for storage",
        "chose sourdough bread recipes for the weekend",
    ],
    "current_discussion": "tuning the nginx proxy timeouts",
}


def _sql(db_url: str, stmt: str, *args: object) -> list[tuple]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        cur = c.execute(stmt, args)  # type: ignore[arg-type]
        rows = cur.fetchall() if cur.description else []
        c.commit()
        return rows


@pytest.fixture
async def rclient(make_client, settings, tmp_path: Path) -> AsyncIterator[AsyncTestClient]:  # type: ignore[no-untyped-def]
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps({"chat": {"context_mode": "rolling"}}))
    async with make_client(replace(settings, profiles_file=str(profiles))) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


async def _session(c: AsyncTestClient, db_url: str, summary: dict | None = SUMMARY) -> str:
    sid = (await c.post("/sessions", json={"profile_id": "chat"})).json()["id"]
    msgs = [
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "hi, what can I do?"},
    ]
    assert (await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})).status_code == 201
    if summary is not None:
        _sql(
            db_url,
            "insert into rolling_summaries (session_id, user_id, summary, cursor_at)"
            " select id, user_id, %s, now() from sessions where id = %s",
            json.dumps(summary),
            sid,
        )
    return sid


def _block(ctx: list[dict]) -> dict | None:
    blocks = [m for m in ctx if m["metadata"].get("source") == "rolling_summary"]
    if not blocks:
        return None
    text = blocks[0]["content"]
    return json.loads(text[text.index("{") : text.rindex("}") + 1])["prior_summary"]


async def test_only_relevant_summary_entries_ride(rclient, db_url) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(rclient, db_url)
    r = await rclient.post(
        f"/sessions/{sid}/prepare",
        json={"message": {"content": "which port does the nginx proxy use?"}},
    )
    assert r.status_code == 200, r.text
    doc = _block(r.json()["context"])
    assert doc == {
        "key_decisions": SUMMARY["key_decisions"],  # a general rule + an nginx rule
        "past_discussions": ["set the nginx reverse proxy to listen on port 8098"],
        "current_discussion": "tuning the nginx proxy timeouts",
    }


async def test_no_relevant_entry_means_no_summary_block(rclient, db_url) -> None:  # type: ignore[no-untyped-def]
    summary = {**SUMMARY, "key_decisions": ["Don't: restart the nginx proxy on fridays"]}
    sid = await _session(rclient, db_url, summary)
    r = await rclient.post(
        f"/sessions/{sid}/prepare", json={"message": {"content": "recommend a hiking trail"}}
    )
    assert r.status_code == 200, r.text
    assert _block(r.json()["context"]) is None
    assert [m["content"] for m in r.json()["context"]] == ["hello there", "hi, what can I do?"]


async def test_rolling_prepare_carries_memory_summary_facts_and_recall(rclient, db_url) -> None:  # type: ignore[no-untyped-def]
    r = await rclient.post(
        "/memory/facts",
        json={
            "category": "preferences",
            "key": "editor",
            "value": "neovim",
            "source": "user_explicit",
        },
    )
    assert r.status_code in (200, 201), r.text
    r = await rclient.put("/memory/summary", json={"content": "Likes terse answers."})
    assert r.status_code in (200, 201), r.text
    sid = await _session(rclient, db_url, summary=None)
    r = await rclient.post(
        f"/sessions/{sid}/prepare", json={"message": {"content": "which editor do I use?"}}
    )
    assert r.status_code == 200, r.text
    ctx = r.json()["context"]
    sources = [m["metadata"].get("source") for m in ctx]
    assert sources[:2] == ["memory_summary", "memory_facts"]
    assert "editor → neovim" in ctx[1]["content"]
    assert [m["content"] for m in ctx[2:]] == ["hello there", "hi, what can I do?"]
    # counted in the estimate: larger than the same prepare mid-turn (no notes)
    mid = await rclient.post(
        f"/sessions/{sid}/prepare",
        json={"message": {"content": "which editor do I use?"}, "mid_turn": True},
    )
    assert [m["metadata"].get("source") for m in mid.json()["context"]][:1] != ["memory_summary"]
    assert r.json()["tokens"] > mid.json()["tokens"]


async def test_reset_clears_the_conversation_and_keeps_the_rolling_summary(rclient, db_url) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(rclient, db_url)
    _sql(
        db_url,
        "insert into session_messages_archive (session_id, user_id, sequence_number, role, content)"
        " select id, user_id, 100, 'user', 'archived words' from sessions where id = %s",
        sid,
    )
    _sql(
        db_url,
        'update sessions set session_metadata = \'{"baseline": {"tokens": 9}, "keep": 1}\''
        " where id = %s",
        sid,
    )
    r = await rclient.post(f"/sessions/{sid}/reset")
    assert r.status_code == 200, r.text
    assert r.json() == {
        "session_id": sid,
        "messages_cleared": 2,
        "archived_cleared": 1,
        "embeddings_cleared": 0,
        "compression_state_cleared": ["baseline"],
        "rolling_summary_kept": True,
    }
    assert (await rclient.get(f"/sessions/{sid}/messages")).json()["messages"] == []
    assert (await rclient.get(f"/sessions/{sid}/context")).json()["messages"] == []
    row = _sql(
        db_url, "select session_metadata, context_token_count from sessions where id = %s", sid
    )
    assert row == [({"keep": 1}, 0)]
    kept = _sql(db_url, "select summary from rolling_summaries where session_id = %s", sid)
    assert kept == [(SUMMARY,)]
    # the next turn still gets the (relevant) summary, and new messages number on
    r = await rclient.post(
        f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "back"}]}
    )
    assert r.json()["messages"][0]["sequence_number"] == 2
    r = await rclient.post(
        f"/sessions/{sid}/prepare", json={"message": {"content": "the nginx port again?"}}
    )
    assert "8098" in json.dumps(_block(r.json()["context"]))


async def test_reset_of_a_session_you_may_not_see_is_404(rclient, db_url) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(rclient, db_url)
    _, other = await new_user(rclient, "mallory-reset")
    r = await rclient.post(f"/sessions/{sid}/reset", headers=other)
    assert r.status_code == 404
    assert len((await rclient.get(f"/sessions/{sid}/messages")).json()["messages"]) == 2


async def _recalled_context(  # type: ignore[no-untyped-def]
    make_client, settings, tmp_path: Path, db_url, ollama, *, with_block: bool = False
) -> list[dict]:
    """A rolling session of 20 exchanges (the first about the nginx port) summarised and
    indexed by the job; the context prepared for a question about that port."""
    from datetime import UTC, datetime, timedelta

    from app.domain.kernel.hooks import DemotionHooks
    from app.domain.raw_history.hooks import raw_history_hook
    from app.domain.rolling.services import run_rolling_summaries
    from tests.integration.rolling.test_rolling_summary import replica, summariser

    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps({"chat": {"context_mode": "rolling"}}))
    s = replace(settings, profiles_file=str(profiles), rolling_summary_chunk_chars=1400)
    t0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    pad = " lorem" * 50
    async with make_client(s) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = (await c.post("/sessions", json={"profile_id": "chat"})).json()["id"]
        msgs = []
        for i in range(20):
            topic = "the nginx reverse proxy listens on port 8098" if i == 0 else f"topic {i}"
            for j, (role, text) in enumerate((("user", "question"), ("assistant", "answer"))):
                at = (t0 + timedelta(minutes=2 * i + j)).isoformat()
                msgs.append(
                    {"role": role, "content": f"{text} {i}: {topic}{pad}", "created_at": at}
                )
        assert (
            await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
        ).status_code == 201
        ollama.chat_replies = [summariser() for _ in range(20)]
        async with replica(db_url, s) as state:
            state.demotion_hooks = DemotionHooks()
            state.demotion_hooks.register(raw_history_hook(state.llm))
            assert (await run_rolling_summaries(state)).chunks >= 8
        ollama.fail("http400", paths={"/api/embed"})  # the words decide, not the fake vectors
        if with_block:  # a summary entry relevant to the question: the block rides too
            _sql(
                db_url,
                "update rolling_summaries set summary = %s where session_id = %s",
                json.dumps(SUMMARY),
                sid,
            )
        r = await c.post(
            f"/sessions/{sid}/prepare",
            json={"message": {"content": "which port does the nginx reverse proxy listen on?"}},
        )
        assert r.status_code == 200, r.text
        return list(r.json()["context"])


async def test_rolling_prepare_recalls_what_left_the_window(
    make_client, settings, tmp_path: Path, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    """The job indexes what it summarises; prepare recalls it once it left the window."""
    ctx = await _recalled_context(make_client, settings, tmp_path, db_url, ollama)
    recalled = [m for m in ctx if m["metadata"].get("source") == "memory_recall"]
    assert recalled and "8098" in recalled[0]["content"]


async def test_the_summary_block_comes_after_the_recalled_excerpts(
    make_client, settings, tmp_path: Path, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    """Seed 001: the `Prior summary` block is the last message, right before the user's
    input — the recalled excerpts come ahead of it, not between it and the input."""
    ctx = await _recalled_context(make_client, settings, tmp_path, db_url, ollama, with_block=True)
    sources = [m["metadata"].get("source") for m in ctx]
    assert "memory_recall" in sources and "rolling_summary" in sources
    assert sources[-1] == "rolling_summary"
    assert sources.index("memory_recall") < sources.index("rolling_summary")
    assert (_block(ctx) or {}).get("current_discussion") == SUMMARY["current_discussion"]
