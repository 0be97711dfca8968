"""The rolling-summary job: cursor rules, chunking, failures, replicas, format."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from app.config import Settings
from app.db.engine import create_engine, session_factory
from app.domain.kernel.runtime import Runtime
from app.domain.rolling.services import run_rolling_summaries
from app.llm.factory import build_gateway
from tests.conftest import ADMIN_TOKEN

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
PAD = " lorem" * 50  # ~300 chars: two exchanges per 1400-char chunk


@asynccontextmanager
async def replica(db_url: str, settings: Settings) -> AsyncIterator[Runtime]:
    """One app replica's runtime: its own engine and LLM gateway."""
    engine = create_engine(db_url)
    llm = build_gateway(settings)
    try:
        yield Runtime.of(settings, session_factory(engine), llm)
    finally:
        await llm.aclose()
        await engine.dispose()


def _sql(db_url: str, stmt: str, *args: object) -> list[tuple]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        cur = c.execute(stmt, args)  # type: ignore[arg-type]
        rows = cur.fetchall() if cur.description else []
        c.commit()
        return rows


async def _session(make_client, settings: Settings, profile: str, exchanges: int, name=None) -> str:  # type: ignore[no-untyped-def]
    async with make_client(settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        r = await c.post("/sessions", json={"profile_id": profile, "name": name})
        sid = r.json()["id"]
        msgs = []
        for i in range(exchanges):
            for j, (role, text) in enumerate((("user", "question"), ("assistant", "answer"))):
                msgs.append(
                    {
                        "role": role,
                        "content": f"{text} {i}{PAD}",
                        "created_at": (T0 + timedelta(minutes=2 * i + j)).isoformat(),
                    }
                )
        r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
        assert r.status_code == 201, r.text
        return sid


def _later(minutes: float) -> datetime:
    """A tick's time `minutes` from now (past a failed session's backoff)."""
    return datetime.now(UTC) + timedelta(minutes=minutes)


def _previous(body: dict[str, Any]) -> dict[str, Any]:
    system = body["messages"][0]["content"]
    return json.loads(system.split("Previous summary:\n", 1)[1].split("\n\nAnswer with", 1)[0])


def summariser(delay: float = 0.0):  # type: ignore[no-untyped-def]
    """A fake summary model: appends the chunk's exchanges to the previous summary."""

    def reply(body: dict[str, Any]) -> str:
        if delay:
            time.sleep(delay)
        prev = _previous(body)
        seen = re.findall(r"Assistant: answer (\d+)", body["messages"][1]["content"])
        return json.dumps(
            {
                "key_decisions": prev["key_decisions"] + [f"keep answer {seen[-1]}"],
                "past_discussions": prev["past_discussions"] + [f"answers {','.join(seen)}"],
                "current_discussion": f"answer {seen[-1]}",
            }
        )

    return reply


def _state(db_url: str, sid: str) -> tuple:
    rows = _sql(
        db_url,
        "select summary, cursor_at, attempts, last_error from rolling_summaries "
        "where session_id = %s",
        sid,
    )
    return rows[0] if rows else (None, None, None, None)


async def test_chunks_cursor_failure_and_resume(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(make_client, rolling_settings, "chat", exchanges=6)
    ok = summariser()
    ollama.chat_replies = [ok, lambda body: "Sorry, I cannot do that.", ok, ok]
    async with replica(db_url, rolling_settings) as state:
        report = await run_rolling_summaries(state)
        # chunk 1 saved, chunk 2 unparseable: the run stops, chunk 3 is not sent
        assert ollama.count("/api/chat") == 2
        assert report.chunks == 1 and report.failed == 1
        summary, cursor, attempts, error = _state(db_url, sid)
        assert summary["past_discussions"] == ["answers 0,1"]
        assert cursor == T0 + timedelta(minutes=3)  # the last message of chunk 1
        assert attempts == 1 and "SummaryParseError" in error
        # backing off: not retried at once …
        assert (await run_rolling_summaries(state)).sessions == 0
        # … the next tick (one interval later) resumes at chunk 2 with the saved summary
        report = await run_rolling_summaries(state, now=_later(16))
        assert report.chunks == 2 and ollama.count("/api/chat") == 4
        bodies = ollama.requests_for("/api/chat")
        assert _previous(bodies[2])["past_discussions"] == ["answers 0,1"]
        assert "answer 2" in bodies[2]["messages"][1]["content"]
        assert "answer 1 " not in bodies[2]["messages"][1]["content"]
        summary, cursor, attempts, error = _state(db_url, sid)
        assert summary["past_discussions"] == ["answers 0,1", "answers 2,3", "answers 4,5"]
        assert cursor == T0 + timedelta(minutes=11) and attempts == 0 and error is None
        # English markers whatever the language; the reply language is in the prompt
        assert all(d.startswith("Do: ") for d in summary["key_decisions"])
        assert "in zh-TW" in bodies[0]["messages"][0]["content"]
        # nothing new: no call
        await run_rolling_summaries(state, now=_later(60))
        assert ollama.count("/api/chat") == 4


async def test_llm_down_stops_and_next_tick_retries(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(make_client, rolling_settings, "chat", exchanges=2)
    ollama.fail("http400", paths={"/api/chat"})
    async with replica(db_url, rolling_settings) as state:
        report = await run_rolling_summaries(state)
        assert report.failed == 1 and _state(db_url, sid)[1] is None
        ollama.recover()
        ollama.chat_replies = [summariser()]
        report = await run_rolling_summaries(state, now=_later(16))
        assert report.chunks == 1 and _state(db_url, sid)[1] == T0 + timedelta(minutes=3)


async def test_trailing_user_message_waits_for_its_answer(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(make_client, rolling_settings, "chat", exchanges=1)
    async with make_client(rolling_settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        later = (T0 + timedelta(minutes=30)).isoformat()
        await c.post(
            f"/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "and one more?", "created_at": later}]},
        )
    ollama.chat_replies = [summariser(), summariser()]
    async with replica(db_url, rolling_settings) as state:
        await run_rolling_summaries(state)
        body = ollama.requests_for("/api/chat")[0]
        assert "one more" not in body["messages"][1]["content"]
        assert _state(db_url, sid)[1] == T0 + timedelta(minutes=1)
        # looked at, nothing new since: not picked again (the seed's mtime gate)
        assert (await run_rolling_summaries(state)).sessions == 0
        async with make_client(rolling_settings) as c:
            c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
            answer = {
                "role": "assistant",
                "content": "answer 9",
                "created_at": (T0 + timedelta(minutes=31)).isoformat(),
            }
            await c.post(f"/sessions/{sid}/messages", json={"messages": [answer]})
        report = await run_rolling_summaries(state)
        assert report.sessions == 1 and report.chunks == 1
        assert _state(db_url, sid)[1] == T0 + timedelta(minutes=31)


async def test_summary_without_cursor_only_sets_the_cursor(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(make_client, rolling_settings, "chat", exchanges=3)
    _sql(
        db_url,
        "insert into rolling_summaries (session_id, user_id, summary)"
        " select id, user_id, %s from sessions where id = %s",
        json.dumps({"key_decisions": ["Do: x"], "past_discussions": [], "current_discussion": ""}),
        sid,
    )
    async with replica(db_url, rolling_settings) as state:
        report = await run_rolling_summaries(state)
    assert ollama.count("/api/chat") == 0
    assert report.runs[0].cursor_only
    summary, cursor, _, _ = _state(db_url, sid)
    assert cursor == T0 + timedelta(minutes=5) and summary["key_decisions"] == ["Do: x"]


async def test_temp_and_compress_sessions_are_skipped(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    await _session(make_client, rolling_settings, "default", exchanges=2)
    await _session(make_client, rolling_settings, "temp-scratch", exchanges=2)
    await _session(make_client, rolling_settings, "chat", exchanges=2, name="temp-try")
    async with replica(db_url, rolling_settings) as state:
        report = await run_rolling_summaries(state)
    assert report.sessions == 0 and ollama.count("/api/chat") == 0


async def test_two_replicas_never_double_summarise(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    sids = [await _session(make_client, rolling_settings, "chat", exchanges=6) for _ in range(2)]
    ollama.chat_replies = [summariser(delay=0.15) for _ in range(20)]
    async with replica(db_url, rolling_settings) as a, replica(db_url, rolling_settings) as b:
        ra, rb = await asyncio.gather(run_rolling_summaries(a), run_rolling_summaries(b))
    # 2 sessions × 3 chunks: each chunk summarised exactly once across both replicas
    assert ollama.count("/api/chat") == 6
    assert ra.chunks + rb.chunks == 6
    for sid in sids:
        summary, cursor, _, _ = _state(db_url, sid)
        assert summary["past_discussions"] == ["answers 0,1", "answers 2,3", "answers 4,5"]
        assert cursor == T0 + timedelta(minutes=11)


async def test_decisions_are_normalised_and_capped(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(make_client, rolling_settings, "chat", exchanges=1)
    decisions = ["Never push to main", "要：使用繁體中文", "Do not: add emoji"]
    decisions += [f"rule {i}" for i in range(10)]
    ollama.chat_replies = [
        "```json\n"
        + json.dumps(
            {"key_decisions": decisions, "past_discussions": [], "current_discussion": "x"},
            ensure_ascii=False,
        )
        + "\n```"
    ]
    async with replica(db_url, rolling_settings) as state:
        await run_rolling_summaries(state)
    stored = _state(db_url, sid)[0]["key_decisions"]
    assert len(stored) == 8
    assert stored[:3] == ["Don't: push to main", "Do: 使用繁體中文", "Don't: add emoji"]
    assert all(d.startswith(("Do: ", "Don't: ")) for d in stored)


async def test_noise_filter(make_client, rolling_settings, db_url, ollama) -> None:  # type: ignore[no-untyped-def]
    settings = replace(rolling_settings, rolling_summary_noise_filter=True)
    sid = await _session(make_client, settings, "chat", exchanges=2)
    noise = json.dumps({"noise": [{"exchange": 1, "confidence": 0.9}]})
    ollama.chat_replies = [noise, summariser()]
    async with replica(db_url, settings) as state:
        await run_rolling_summaries(state)
    bodies = ollama.requests_for("/api/chat")
    assert len(bodies) == 2 and "clean up a conversation" in bodies[0]["messages"][0]["content"]
    transcript = bodies[1]["messages"][1]["content"]
    assert "answer 0" not in transcript and "answer 1" in transcript
    assert _state(db_url, sid)[1] == T0 + timedelta(minutes=3)
    # a failing filter keeps everything; all-noise chunks move the cursor without a summary
    sid2 = await _session(make_client, settings, "chat", exchanges=2)
    ollama.reset()
    ollama.chat_replies = ["not json", summariser()]
    async with replica(db_url, settings) as state:
        await run_rolling_summaries(state)
    assert "answer 0" in ollama.requests_for("/api/chat")[1]["messages"][1]["content"]
    sid3 = await _session(make_client, settings, "chat", exchanges=1)
    ollama.reset()
    ollama.chat_replies = [json.dumps({"noise": [{"exchange": 1, "confidence": 1.0}]})]
    async with replica(db_url, settings) as state:
        await run_rolling_summaries(state)
    assert ollama.count("/api/chat") == 1
    assert _state(db_url, sid3)[1] == T0 + timedelta(minutes=1)
    assert sid2


async def test_summarised_chunks_go_to_the_raw_history_index(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    """What rolling mode summarises is searchable verbatim, as compression's demotions are."""
    from app.domain.kernel.hooks import DemotionHooks
    from app.domain.raw_history.hooks import raw_history_hook

    sid = await _session(make_client, rolling_settings, "chat", exchanges=4)
    ollama.chat_replies = [summariser(), summariser()]
    async with replica(db_url, rolling_settings) as state:
        state.demotion_hooks = DemotionHooks()
        state.demotion_hooks.register(raw_history_hook(state.llm))
        report = await run_rolling_summaries(state)
        assert report.chunks == 2
        rows = _sql(
            db_url,
            "select user_id, start_seq, end_seq, content from memory_chunks "
            "where session_id = %s order by start_seq",
            sid,
        )
        assert [r[0] for r in rows] == ["admin"] * len(rows) and len(rows) == 2
        assert rows[0][3].startswith("User: question 0") and "Assistant: answer 3" in rows[1][3]
        assert (rows[0][1], rows[-1][2]) == (0, 7)
        # a second tick has nothing new: nothing indexed twice
        await run_rolling_summaries(state)
        again = _sql(db_url, "select count(*) from memory_chunks where session_id = %s", sid)
        assert again[0][0] == 2


async def _append(make_client, settings: Settings, sid: str, n: int, at: datetime | None) -> None:  # type: ignore[no-untyped-def]
    """Exchange `n` (question, answer), dated `at` by the client (None: the server's time)."""
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": f"question {n}{PAD}"},
        {"role": "assistant", "content": f"answer {n}{PAD}"},
    ]
    if at is not None:
        for m in msgs:
            m["created_at"] = at.isoformat()
    async with make_client(settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
        assert r.status_code == 201, r.text


async def test_client_times_cannot_freeze_or_skip_the_summary(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    """The cursor is the last summarised message's sequence number, not its client-set time:
    a future-dated exchange does not freeze the summary, a backdated one is not skipped."""
    sid = await _session(make_client, rolling_settings, "chat", exchanges=1)
    await _append(make_client, rolling_settings, sid, 1, datetime(2099, 1, 1, tzinfo=UTC))
    ollama.chat_replies = [summariser() for _ in range(4)]
    async with replica(db_url, rolling_settings) as state:
        assert (await run_rolling_summaries(state)).chunks == 1
        assert _state(db_url, sid)[0]["past_discussions"] == ["answers 0,1"]
        await _append(make_client, rolling_settings, sid, 2, None)  # now
        await _append(make_client, rolling_settings, sid, 3, T0 - timedelta(days=365))
        report = await run_rolling_summaries(state)
    summary, cursor, attempts, _ = _state(db_url, sid)
    assert report.chunks == 1 and attempts == 0
    assert summary["past_discussions"] == ["answers 0,1", "answers 2,3"]
    assert cursor == T0 - timedelta(days=365)  # the time of the last summarised message
    seq = _sql(db_url, "select cursor_seq from rolling_summaries where session_id = %s", sid)
    assert seq[0][0] == 7


async def test_a_time_cursor_from_before_becomes_a_sequence_cursor(
    make_client, rolling_settings, db_url, ollama
) -> None:  # type: ignore[no-untyped-def]
    """A row with only `cursor_at` (an older release's, an older export's) continues after
    the newest message at or before that time."""
    sid = await _session(make_client, rolling_settings, "chat", exchanges=3)
    _sql(
        db_url,
        "insert into rolling_summaries (session_id, user_id, summary, cursor_at, updated_at)"
        " select id, user_id, %s, %s, last_active - interval '1 second' from sessions"
        " where id = %s",
        json.dumps({"key_decisions": [], "past_discussions": ["old"], "current_discussion": ""}),
        T0 + timedelta(minutes=1),
        sid,
    )
    ollama.chat_replies = [summariser()]
    async with replica(db_url, rolling_settings) as state:
        assert (await run_rolling_summaries(state)).chunks == 1
    summary, cursor, _, _ = _state(db_url, sid)
    assert summary["past_discussions"] == ["old", "answers 1,2"]
    assert cursor == T0 + timedelta(minutes=5)
