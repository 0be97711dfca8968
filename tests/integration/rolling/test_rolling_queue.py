"""The rolling summary's work queue: the append's mark read through a partial index, the
backoff of a failing session, parked after the cap and unparked by an append."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from app.config import Settings
from app.db.engine import session_factory, transaction
from app.domain.rolling.repositories import RollingRepository
from app.domain.rolling.services import retry_delay, run_rolling_summaries
from tests.citus import cluster as citus
from tests.conftest import ADMIN_TOKEN
from tests.integration.rolling.test_rolling_summary import (
    _session,
    _sql,
    _state,
    replica,
    summariser,
)


async def plan_of(engine: AsyncEngine, marker: str, call: Callable[[], Awaitable[Any]]) -> str:
    """The JSON plan of the last statement naming `marker` that `call` ran, planned with
    sequential scans off (as on a big table: the seeded one is small)."""
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if marker in statement:
            seen.append((statement, params))

    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    try:
        await call()
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", capture)
    statement, params = seen[-1]
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        cursor = raw.driver_connection.cursor()  # type: ignore[union-attr]
        await cursor.execute("SET enable_seqscan = off")
        await cursor.execute("EXPLAIN (FORMAT JSON) " + statement, params)
        plan = json.dumps((await cursor.fetchone())[0])
        await conn.rollback()
    return plan


@pytest.mark.skipif(
    citus.citus_url() is not None,
    reason="the plan of a single server; on Citus each shard plans its part, and the statement"
    " plan check (tests/citus/test_statement_plans.py) covers the cluster",
)
async def test_candidates_are_read_through_the_pending_index(
    make_client, rolling_settings: Settings, db_url: str, engine: AsyncEngine
) -> None:  # type: ignore[no-untyped-def]
    """EXPLAIN of the repository's own statement on 5,000 sessions, 50 of them marked:
    a range scan of `ix_sessions_rolling_pending`, not a join of every session."""
    await _session(make_client, rolling_settings, "chat", exchanges=1)
    _sql(
        db_url,
        "INSERT INTO sessions (id, user_id, profile_id, last_active, next_seq, rolling_pending)"
        " SELECT gen_random_uuid(), 'admin', 'chat', now() - make_interval(mins => i), 4,"
        " CASE WHEN i %% 100 = 0 THEN true WHEN i %% 2 = 0 THEN false END"
        " FROM generate_series(1, 5000) AS i",
    )
    _sql(db_url, "ANALYZE sessions")
    _sql(db_url, "ANALYZE rolling_summaries")
    factory = session_factory(engine)
    rows: list[Any] = []

    async def candidates() -> None:
        async with transaction(factory) as db:
            rows.extend(await RollingRepository(db).candidates(datetime.now(UTC), limit=20))

    plan = await plan_of(engine, "rolling_pending", candidates)
    assert len(rows) == 20
    assert "ix_sessions_rolling_pending" in plan, plan


async def test_only_sessions_of_rolling_profiles_are_marked(
    make_client, rolling_settings: Settings, db_url: str, ollama
) -> None:  # type: ignore[no-untyped-def]
    rolling = await _session(make_client, rolling_settings, "chat", exchanges=1)
    compress = await _session(make_client, rolling_settings, "default", exchanges=1)
    temp = await _session(make_client, rolling_settings, "temp-scratch", exchanges=1)
    named = await _session(make_client, rolling_settings, "chat", exchanges=1, name="temp-x")
    marks = dict(_sql(db_url, "SELECT id::text, rolling_pending FROM sessions"))
    assert (marks[rolling], marks[compress], marks[temp], marks[named]) == (
        True,
        False,
        False,
        False,
    )
    # summarised: the mark is cleared; nothing is listed again
    ollama.chat_replies = [summariser()]
    async with replica(db_url, rolling_settings) as state:
        assert (await run_rolling_summaries(state)).chunks == 1
        assert _sql(db_url, "SELECT rolling_pending FROM sessions WHERE id = %s", rolling) == [
            (False,)
        ]
        async with state.session_factory() as db:
            assert await RollingRepository(db).candidates(datetime.now(UTC), 100) == []


async def test_a_marked_session_no_longer_rolling_is_unmarked_without_a_call(
    make_client, rolling_settings: Settings, db_url: str, ollama
) -> None:  # type: ignore[no-untyped-def]
    """A mark the job cannot use (the profile changed mode, an import's mark) is cleared."""
    sid = await _session(make_client, rolling_settings, "default", exchanges=1)
    _sql(db_url, "UPDATE sessions SET rolling_pending = true WHERE id = %s", sid)
    async with replica(db_url, rolling_settings) as state:
        assert (await run_rolling_summaries(state)).sessions == 0
    assert ollama.count("/api/chat") == 0
    assert _sql(db_url, "SELECT rolling_pending FROM sessions WHERE id = %s", sid) == [(False,)]


def test_retry_delay_doubles_up_to_the_cap(settings: Settings) -> None:
    s = replace(
        settings, rolling_summary_interval_seconds=900, rolling_summary_retry_max_seconds=7200
    )
    assert [retry_delay(n, s).total_seconds() for n in (1, 2, 3, 4, 5, 60)] == [
        900,
        1800,
        3600,
        7200,
        7200,
        7200,
    ]


async def test_a_failing_session_backs_off_is_parked_then_unparked_by_an_append(
    make_client, rolling_settings: Settings, db_url: str, ollama
) -> None:  # type: ignore[no-untyped-def]
    capped = replace(
        rolling_settings,
        rolling_summary_max_attempts=3,
        rolling_summary_interval_seconds=900,
        rolling_summary_retry_max_seconds=86400,
    )
    sid = await _session(make_client, capped, "chat", exchanges=1)
    ollama.chat_replies = [lambda _: "Sorry, I cannot do that."] * 10
    t = datetime.now(UTC)
    async with replica(db_url, capped) as state:
        # attempts grow; each failure pushes the next attempt later (15, 30 minutes)
        for attempts, wait in ((1, 15), (2, 30)):
            report = await run_rolling_summaries(state, now=t)
            assert report.failed == 1
            assert _state(db_url, sid)[2] == attempts
            due = _sql(db_url, "SELECT next_attempt_at FROM rolling_summaries")[0][0]
            assert due == t + timedelta(minutes=wait)
            # not due yet: not tried, not called
            calls = ollama.count("/api/chat")
            before_due = t + timedelta(minutes=wait - 1)
            assert (await run_rolling_summaries(state, now=before_due)).sessions == 0
            assert ollama.count("/api/chat") == calls
            t += timedelta(minutes=wait)
        # the third failure parks it: unmarked, and never listed again however late
        with capture_logs() as logs:
            assert (await run_rolling_summaries(state, now=t)).failed == 1
        parked = [e for e in logs if e["event"] == "rolling.parked"]
        assert len(parked) == 1 and parked[0]["attempts"] == 3
        assert _sql(db_url, "SELECT rolling_pending FROM sessions WHERE id = %s", sid) == [(False,)]
        calls = ollama.count("/api/chat")
        far = t + timedelta(days=30)
        assert (await run_rolling_summaries(state, now=far)).sessions == 0
        assert ollama.count("/api/chat") == calls

        # a new message unparks it: tried at the next tick, and a success starts over
        async with make_client(capped) as c:
            c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
            more = [
                {"role": "user", "content": "one more question"},
                {"role": "assistant", "content": "answer 7"},
            ]
            r = await c.post(f"/sessions/{sid}/messages", json={"messages": more})
            assert r.status_code == 201, r.text
        ollama.chat_replies = [summariser()]
        report = await run_rolling_summaries(state)
        assert (report.sessions, report.chunks, report.failed) == (1, 1, 0)
        assert _state(db_url, sid)[2:] == (0, None)
        assert _sql(db_url, "SELECT next_attempt_at FROM rolling_summaries") == [(None,)]
        assert _sql(db_url, "SELECT rolling_pending FROM sessions WHERE id = %s", sid) == [(False,)]


async def test_an_unreachable_model_is_not_counted(
    make_client, rolling_settings: Settings, db_url: str, ollama
) -> None:  # type: ignore[no-untyped-def]
    sids = [await _session(make_client, rolling_settings, "chat", exchanges=1) for _ in range(2)]
    fast = replace(rolling_settings, llm_max_attempts=1, llm_backoff_initial=0.0)
    ollama.fail("refuse")
    async with replica(db_url, fast) as state:
        report = await run_rolling_summaries(state)
    # the tick stops at the first session; nothing counted, nothing backed off
    assert report.sessions == 1 and report.failed == 1
    rows = _sql(db_url, "SELECT attempts, next_attempt_at FROM rolling_summaries")
    assert rows == [(0, None)]
    marks = _sql(db_url, "SELECT rolling_pending FROM sessions WHERE id = ANY(%s)", sids)
    assert marks == [(True,), (True,)]
