"""Extraction's work queue: the append's mark read through a partial index, the retry
cap (parked, unparked by an append), and one leader per periodic job."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from structlog.testing import capture_logs

from app.config import Settings
from app.db.engine import create_engine, session_factory, transaction
from app.domain.facts.extraction import get_extraction_state, run_extraction_pass
from app.domain.facts.extraction_repository import ExtractionRepository
from app.domain.kernel.leader import run_as_leader
from app.domain.kernel.runtime import Runtime
from app.llm.gateway import LLMGateway
from app.routes import BACKGROUND_JOBS
from tests.citus import cluster as citus
from tests.conftest import new_user
from tests.fakes.ollama_server import FakeOllama
from tests.integration.facts.conftest import sql
from tests.integration.facts.test_extraction import (
    CONVERSATION,
    facts_json,
    scripted,
    stale_session,
)


@pytest.mark.skipif(
    citus.citus_url() is not None,
    reason="the plan of a single server; on Citus each shard plans its part, and the statement"
    " plan check (tests/citus/test_statement_plans.py) covers the cluster",
)
async def test_candidates_are_read_through_the_pending_index(
    client: AsyncTestClient,
    db_url: str,
    engine: AsyncEngine,
    factory: async_sessionmaker[AsyncSession],
) -> None:
    """The candidate query is a range scan of `ix_sessions_memory_pending`, not a scan
    (or a join) of every session: EXPLAIN of the repository's own statement on 5,000
    sessions, 50 of them pending."""
    alice_id, _ = await new_user(client, "alice")
    sql(
        db_url,
        "INSERT INTO sessions (id, user_id, profile_id, last_active, memory_pending)"
        " SELECT gen_random_uuid(), %s, 'default', now() - make_interval(mins => 60 + i),"
        " CASE WHEN i %% 100 = 0 THEN true WHEN i %% 2 = 0 THEN false END"
        " FROM generate_series(1, 5000) AS i",
        alice_id,
    )
    sql(db_url, "ANALYZE sessions")
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "memory_pending" in statement:
            seen.append((statement, params))

    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    try:
        async with transaction(factory) as db:
            rows = await ExtractionRepository(db).candidates(await _now(db, "30 minutes"), [], n=20)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", capture)
    assert len(rows) == 20
    statement, params = seen[-1]
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        cursor = raw.driver_connection.cursor()  # type: ignore[union-attr]
        await cursor.execute("SET enable_seqscan = off")
        await cursor.execute("EXPLAIN (FORMAT JSON) " + statement, params)
        plan = json.dumps((await cursor.fetchone())[0])
        await conn.rollback()
    assert "ix_sessions_memory_pending" in plan, plan


async def _now(db: AsyncSession, ago: str) -> Any:
    from sqlalchemy import text

    return (await db.execute(text(f"SELECT now() - interval '{ago}'"))).scalar_one()


async def test_sessions_without_a_user_message_are_never_marked(
    client: AsyncTestClient, db_url: str
) -> None:
    _, alice = await new_user(client, "alice")
    empty = await stale_session(client, db_url, alice, [])
    bot = await stale_session(client, db_url, alice, [{"role": "assistant", "content": "Hi!"}])
    talk = await stale_session(client, db_url, alice, CONVERSATION)
    marks = dict(sql(db_url, "SELECT id::text, memory_pending FROM sessions") or [])
    assert (marks[empty], marks[bot], marks[talk]) == (None, None, True)


async def test_a_failing_session_is_parked_then_unparked_by_an_append(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    alice_id, alice = await new_user(client, "alice")
    sid = await stale_session(client, db_url, alice, CONVERSATION)
    capped = dataclasses.replace(settings, extraction_max_attempts=2)
    runtime = Runtime.of(capped, factory, llm)
    ollama.chat_replies.extend([lambda _: "no JSON here"] * 8)

    for attempt in (1, 2):
        with capture_logs() as logs:
            result = await run_extraction_pass(runtime)
        assert (result.extracted, result.failed) == (0, 1)
        assert (await get_extraction_state(factory, sid, alice_id)).attempts == attempt
    parked = [e for e in logs if e["event"] == "memory.extraction_parked"]
    assert len(parked) == 1 and parked[0]["session_id"] == sid and parked[0]["attempts"] == 2
    assert sql(db_url, "SELECT memory_pending FROM sessions WHERE id = %s", sid) == [(False,)]

    # parked: the next passes ask the model nothing about it
    calls = ollama.count("/api/chat")
    assert (await run_extraction_pass(runtime)).failed == 0
    assert ollama.count("/api/chat") == calls

    # a new append unparks it; quiet again, it is read (and its count starts over)
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "I use helix now"}]},
        headers=alice,
    )
    assert r.status_code == 201
    sql(db_url, "UPDATE sessions SET last_active = now() - interval '1 hour' WHERE id = %s", sid)
    ollama.chat_replies.clear()
    ollama.chat_replies.extend(
        [scripted([facts_json(("preferences", "editor", "helix", "user_explicit"))])] * 2
    )
    assert (await run_extraction_pass(runtime)).extracted == 1
    state = await get_extraction_state(factory, sid, alice_id)
    assert state.attempts == 0 and state.extracted_at is not None
    assert sql(db_url, "SELECT memory_pending FROM sessions WHERE id = %s", sid) == [(False,)]


async def test_an_append_during_the_extraction_keeps_the_session_pending(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    """The extraction holds its claim while the model answers; an append then neither
    waits for it nor is lost: the session stays pending for the next pass."""
    _, alice = await new_user(client, "alice")
    sid = await stale_session(client, db_url, alice, CONVERSATION)
    in_model, appended = threading.Event(), threading.Event()

    def reply(body: dict[str, Any]) -> str:  # the fake server's thread
        in_model.set()
        appended.wait(10)
        return facts_json(("location", "home_city", "Porto", "user_explicit"))

    ollama.chat_replies.extend([scripted([reply])] * 2)

    async def append_meanwhile() -> None:
        assert await asyncio.to_thread(in_model.wait, 10)  # the pass holds its claim
        try:
            r = await asyncio.wait_for(
                client.post(
                    f"/sessions/{sid}/messages",
                    json={"messages": [{"role": "user", "content": "and I moved again"}]},
                    headers=alice,
                ),
                timeout=5,  # an append never waits for the extraction
            )
            assert r.status_code == 201
        finally:
            appended.set()

    result, _ = await asyncio.gather(
        run_extraction_pass(Runtime.of(settings, factory, llm)), append_meanwhile()
    )
    assert result.extracted == 1
    assert sql(db_url, "SELECT memory_pending FROM sessions WHERE id = %s", sid) == [(True,)]


async def test_one_leader_per_job_across_processes(db_url: str) -> None:
    """Two "processes" (engines, connection pools) on one database: while one runs a
    job's tick, the other's tick of that job is skipped at once; another job runs."""
    first, second = create_engine(db_url), create_engine(db_url)
    try:
        started, release = asyncio.Event(), asyncio.Event()

        async def long_tick() -> str:
            started.set()
            await release.wait()
            return "ran"

        async def quick_tick() -> str:
            return "ran"

        holder = asyncio.create_task(
            run_as_leader(session_factory(first), "memory.extraction", long_tick)
        )
        await asyncio.wait_for(started.wait(), 5)
        other = session_factory(second)
        assert await run_as_leader(other, "memory.extraction", quick_tick) == (False, None)
        assert await run_as_leader(other, "history.rolling_summary", quick_tick) == (True, "ran")
        release.set()
        assert await holder == (True, "ran")
        # released with the tick: the next tick runs wherever it comes first
        assert await run_as_leader(other, "memory.extraction", quick_tick) == (True, "ran")
    finally:
        await first.dispose()
        await second.dispose()


def test_which_jobs_have_a_leader(settings: Settings) -> None:
    keys = {job.name: job.leader_key(settings) for job in BACKGROUND_JOBS}
    assert keys["memory.extraction"] == "memory.extraction"
    assert keys["memory.idle_index"] == "memory.idle_index"
    assert keys["history.rolling_summary"] == "history.rolling_summary"
    assert keys["error_memory.purge"] == "error_memory.purge"
    assert str(settings.data_path.resolve()) in (keys["session_files.cleanup"] or "")
    assert keys["memory.live_index"] is None and keys["memory.live_embed"] is None


async def test_a_leader_lock_connection_has_no_idle_in_transaction_limit(client) -> None:  # type: ignore[no-untyped-def]
    """A lock's transaction sits idle for its whole tick (the work runs on other
    connections): DB_IDLE_IN_TRANSACTION_SECONDS, on every other connection of the app,
    would end it, and the lead with it, in a tick longer than that."""
    from sqlalchemy import text

    runtime = client.app.state.runtime
    async with runtime.session_factory() as db:
        assert (
            await db.execute(text("SHOW idle_in_transaction_session_timeout"))
        ).scalar() == "5min"
    async with runtime.leader_sessions() as db:
        assert (await db.execute(text("SHOW idle_in_transaction_session_timeout"))).scalar() == "0"
