"""Idle sessions are indexed: a conversation that never compressed becomes findable once
it has been idle for `RAW_INDEX_IDLE_MINUTES`, and no message is ever in two chunks —
whichever of the idle job and compression comes first."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.db.engine import session_factory, transaction
from app.domain.raw_history.idle_index import EMBED_ATTEMPTS, IndexPassResult, index_idle_sessions
from app.domain.raw_history.indexer import embed_demoted, index_demoted
from app.domain.raw_history.state_repository import RawIndexRepository
from app.llm.factory import build_gateway
from tests.conftest import ROOT, new_user
from tests.fakes.ollama_server import FakeOllama
from tests.integration.context.conftest import append, new_session
from tests.integration.context.test_raw_index_and_recall import fill
from tests.integration.raw_history.test_raw_and_search import Demoted

SHORT = [
    {"role": "user", "content": "I'm vegetarian, and I cook with tempeh a lot."},
    {"role": "assistant", "content": "Noted: vegetarian recipes with tempeh from now on."},
]


def _sql(db_url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        return c.execute(query, args).fetchall()


def _chunks(db_url: str, sid: str) -> list[tuple[int, int, str]]:
    return _sql(  # type: ignore[return-value]
        db_url,
        "SELECT start_seq, end_seq, content FROM memory_chunks WHERE session_id = %s"
        " ORDER BY start_seq",
        sid,
    )


async def _pass(
    engine: Any, settings: Settings, *, minutes_later: float = 0, **kw: Any
) -> IndexPassResult:
    llm = build_gateway(settings)
    try:
        return await index_idle_sessions(
            session_factory(engine),
            llm,
            settings,
            now=datetime.now(UTC) + timedelta(minutes=minutes_later),
            **kw,
        )
    finally:
        await llm.aclose()


async def _search(client: AsyncTestClient, query: str, **body: Any) -> dict[str, Any]:
    r = await client.post("/memory/search", json={"query": query, "scope": "raw", **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


def _assert_disjoint(chunks: list[tuple[int, int, str]]) -> None:
    for (_, end, _), (start, _, _) in zip(chunks, chunks[1:], strict=False):
        assert start > end, f"chunks overlap: {chunks!r}"


async def test_short_session_becomes_findable_after_the_idle_threshold(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    sid = await new_session(cclient)
    await append(cclient, sid, SHORT)
    assert (await _search(cclient, "vegetarian"))["hits"] == []
    # not idle long enough (default: the extraction's 30 minutes): nothing is indexed
    early = await _pass(engine, settings, minutes_later=29)
    assert (early.sessions, early.chunks) == (0, 0)
    assert (await _search(cclient, "vegetarian"))["hits"] == []
    done = await _pass(engine, settings, minutes_later=31)
    assert (done.sessions, done.messages, done.chunks, done.failed) == (1, 2, 1, 0)
    body = await _search(cclient, "vegetarian")
    assert [h["session_id"] for h in body["hits"]] == [sid]
    assert "I'm vegetarian" in body["text"]
    # segment vectors were written: the search by meaning works as for compressed chunks
    assert _sql(db_url, "SELECT count(*) FROM memory_chunk_vectors WHERE session_id = %s", sid)[0][
        0
    ]
    # nothing left: a second pass does nothing
    again = await _pass(engine, settings, minutes_later=31)
    assert (again.batches, again.chunks) == (0, 0)
    # the session goes on: only the new messages are indexed, once idle again
    await append(cclient, sid, [{"role": "user", "content": "My sister Ingrid visits in May."}])
    more = await _pass(engine, settings, minutes_later=31)
    assert (more.messages, more.chunks) == (1, 1)
    chunks = _chunks(db_url, sid)
    assert [(a, b) for a, b, _ in chunks] == [(0, 1), (2, 2)]
    assert (await _search(cclient, "Ingrid"))["hits"][0]["start_seq"] == 2


async def test_idle_minutes_setting_and_switch(
    cclient: AsyncTestClient, engine: Any, settings: Settings
) -> None:
    sid = await new_session(cclient)
    await append(cclient, sid, SHORT)
    five = dataclasses.replace(settings, raw_index_idle_minutes=5)
    assert (await _pass(engine, five, minutes_later=4)).chunks == 0
    assert (await _pass(engine, five, minutes_later=6)).chunks == 1
    # the job does nothing when switched off (the pass itself is what the CLI runs)
    from app.domain.kernel.runtime import Runtime
    from app.domain.raw_history.idle_index import index_idle_job

    off = dataclasses.replace(settings, raw_index_idle_enabled=False)
    assert await index_idle_job(Runtime.of(off, session_factory(engine))) is None


async def test_one_users_sessions_only(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    alice, alice_h = await new_user(cclient, "alice")
    _, bob_h = await new_user(cclient, "bob")
    a = await new_session(cclient, headers=alice_h)
    b = await new_session(cclient, headers=bob_h)
    await append(cclient, a, SHORT, headers=alice_h)
    await append(cclient, b, SHORT, headers=bob_h)
    only = await _pass(engine, settings, minutes_later=31, user_id=alice)
    assert only.sessions == 1
    assert _chunks(db_url, a) and not _chunks(db_url, b)
    # alice's chunk is hers alone
    r = await cclient.post("/memory/search", json={"query": "tempeh"}, headers=bob_h)
    assert r.json()["hits"] == []


async def test_indexed_while_idle_then_resumed_and_compressed_yields_no_duplicates(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, n=6)
    first = await _pass(engine, settings, minutes_later=31)
    assert first.messages == 12 and first.chunks >= 2
    idle_chunks = _chunks(db_url, sid)
    # the session resumes, grows, and a compaction demotes old (indexed) and new turns
    await fill(cclient, sid, n=12, start=6)
    r = await cclient.post(f"/sessions/{sid}/compact", json={})
    assert r.status_code == 200, r.text
    summarized = r.json()
    chunks = _chunks(db_url, sid)
    assert chunks[: len(idle_chunks)] == idle_chunks  # the idle chunks stay as they were
    assert len(chunks) > len(idle_chunks)  # the compaction added the newly demoted turns
    _assert_disjoint(chunks)
    # the rest goes in once idle again, still without overlap
    await _pass(engine, settings, minutes_later=31)
    chunks = _chunks(db_url, sid)
    _assert_disjoint(chunks)
    text = "\n".join(c for _, _, c in chunks)
    for i in range(18):  # every message is in exactly one chunk
        assert text.count(f"User: note {i}: ") == 1, i
        assert text.count(f"Assistant: Noted {i}: ") == 1, i
    # a search never returns the same message twice
    body = await _search(cclient, "deploy_prod.sh FORCE_MIGRATE fridays", k=20)
    seen: list[int] = []
    for hit in body["hits"]:
        seen += range(hit["start_seq"], hit["end_seq"] + 1)
    assert len(seen) == len(set(seen)), body["hits"]
    assert summarized  # the compaction answered with its outcome


async def test_compression_after_idle_index_writes_nothing_twice(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    """The demotion hook, handed messages the idle job already indexed, adds nothing."""

    sid = await new_session(cclient)
    await append(cclient, sid, SHORT)
    await _pass(engine, settings, minutes_later=31)
    demoted = [Demoted(m["role"], m["content"], n, None) for n, m in enumerate(SHORT)]
    llm = build_gateway(settings)
    try:
        where = {"user_id": "admin", "session_id": uuid.UUID(sid), "demoted": demoted}
        factory = session_factory(engine)
        vectors = await embed_demoted(factory, llm, **where, keys=["k"])  # type: ignore[arg-type]
        async with transaction(factory) as db:
            written = await index_demoted(db, **where, keys=["k"], vectors=vectors)  # type: ignore[arg-type]
    finally:
        await llm.aclose()
    assert written == 0
    assert len(_chunks(db_url, sid)) == 1


async def test_two_workers_never_index_one_session_twice(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str, ollama: FakeOllama
) -> None:
    sids = [await new_session(cclient) for _ in range(4)]
    for k, sid in enumerate(sids):
        await fill(cclient, sid, n=5, start=10 * k)
    ollama.reset()
    results = await asyncio.gather(*(_pass(engine, settings, minutes_later=31) for _ in range(3)))
    assert sum(r.sessions for r in results) == 4
    assert sum(r.messages for r in results) == 40
    for k, sid in enumerate(sids):
        chunks = _chunks(db_url, sid)
        _assert_disjoint(chunks)
        text = "\n".join(c for _, _, c in chunks)
        assert all(text.count(f"User: note {i}: ") == 1 for i in range(10 * k, 10 * k + 5))
    # and no text was embedded twice
    texts = [t for body in ollama.requests_for("/api/embed") for t in body["input"]]
    assert len(texts) == len(set(texts))


async def test_a_session_held_by_one_worker_is_passed_over(
    cclient: AsyncTestClient, engine: Any, settings: Settings
) -> None:
    sid = await new_session(cclient)
    await append(cclient, sid, SHORT)
    before = datetime.now(UTC) + timedelta(minutes=1)
    factory = session_factory(engine)
    async with transaction(factory) as held:
        repo = RawIndexRepository(held)
        await repo.ensure_idle_rows(before, None)
    async with transaction(factory) as held:
        assert await RawIndexRepository(held).claim("admin", uuid.UUID(sid), before) is not None
        other = await _pass(
            engine, dataclasses.replace(settings, raw_index_idle_minutes=0), minutes_later=1
        )
        assert (other.batches, other.chunks) == (0, 0)
    after = await _pass(
        engine, dataclasses.replace(settings, raw_index_idle_minutes=0), minutes_later=1
    )
    assert after.chunks == 1


async def test_a_failing_embedder_leaves_the_session_to_retry(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str, ollama: FakeOllama
) -> None:
    fast = dataclasses.replace(settings, llm_max_attempts=1, llm_backoff_initial=0.0)
    sid = await new_session(cclient)
    await append(cclient, sid, SHORT)
    ollama.fail("http500")
    failed = await _pass(engine, fast, minutes_later=31)
    assert (failed.failed, failed.chunks, failed.sessions) == (1, 0, 0)
    assert not _chunks(db_url, sid)
    attempts, error = _sql(
        db_url, "SELECT attempts, last_error FROM raw_index_state WHERE session_id = %s", sid
    )[0]
    assert attempts == 1 and error
    ollama.recover()
    retried = await _pass(engine, fast, minutes_later=31)
    assert (retried.failed, retried.chunks, retried.without_vectors) == (0, 1, 0)
    assert _sql(
        db_url, "SELECT attempts, last_error FROM raw_index_state WHERE session_id = %s", sid
    )[0] == (0, None)


async def test_an_embedder_that_keeps_failing_ends_in_text_only_chunks(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str, ollama: FakeOllama
) -> None:
    fast = dataclasses.replace(settings, llm_max_attempts=1, llm_backoff_initial=0.0)
    sid = await new_session(cclient)
    await append(cclient, sid, SHORT)
    ollama.fail("refuse")
    for _ in range(EMBED_ATTEMPTS - 1):
        r = await _pass(engine, fast, minutes_later=31)
        assert (r.failed, r.chunks, r.stopped_early) == (1, 0, True)
    last = await _pass(engine, fast, minutes_later=31)
    assert (last.failed, last.chunks, last.without_vectors) == (0, 1, 1)
    ollama.recover()
    # found by its words; `make reembed` fills the vectors later
    assert (await _search(cclient, "tempeh"))["hits"]


async def test_deleting_a_session_deletes_its_idle_chunks(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    sid = await new_session(cclient)
    await append(cclient, sid, SHORT)
    await _pass(engine, settings, minutes_later=31)
    assert _chunks(db_url, sid)
    assert (await cclient.delete(f"/sessions/{sid}")).status_code == 204
    assert not _chunks(db_url, sid)
    assert not _sql(db_url, "SELECT 1 FROM raw_index_state WHERE session_id = %s", sid)
    assert (await _search(cclient, "vegetarian"))["hits"] == []


async def test_recall_never_echoes_turns_still_in_the_live_context(
    cclient: AsyncTestClient, engine: Any, settings: Settings
) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, n=12)
    await _pass(engine, settings, minutes_later=31)  # every turn indexed, all in context
    r = await cclient.post(f"/sessions/{sid}/compact", json={})
    assert r.status_code == 200, r.text
    ask = {"message": {"role": "user", "content": "the deploy script deploy_prod.sh on fridays?"}}
    ctx = (await cclient.post(f"/sessions/{sid}/prepare", json=ask)).json()["context"]
    live = [
        m["sequence_number"]
        for m in ctx
        if m["role"] in ("user", "assistant")
        and m["sequence_number"] >= 0
        and not m["metadata"].get("source")
        and not m["content"].startswith("[")
    ]
    recalled = [m for m in ctx if m["metadata"].get("source") == "memory_recall"]
    assert recalled, "the compressed part holds deploy_prod.sh: something is recalled"
    ends = [int(e) for e in re.findall(r"\[turns \d+–(\d+) ·", recalled[0]["content"])]
    assert ends and max(ends) < min(live), (ends, min(live))
    # memory_search with the current session: live turns are not `before_summary`
    body = await _search(cclient, "deploy_prod.sh FORCE_MIGRATE", k=20, current_session_id=sid)
    for hit in body["hits"]:
        assert hit["before_summary"] == (hit["end_seq"] < min(live)), hit


async def test_cli_index_sessions(
    cclient: AsyncTestClient, db_url: str, ollama: FakeOllama
) -> None:
    sid = await new_session(cclient)
    await append(cclient, sid, SHORT)
    _sql(db_url, "UPDATE sessions SET last_active = now() - interval '2 hours' RETURNING id")
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "OLLAMA_HOST": ollama.url,
        "NAVI_ADMIN_TOKEN": "",
        "LOG_LEVEL": "warning",
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app.cli", "index-sessions", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    none = cli("--older-than", "180")
    assert none.returncode == 0, none.stderr
    assert "0 session(s), 0 message(s) to index" in none.stderr
    done = cli("--older-than", "60", "--user", "admin")
    assert done.returncode == 0, done.stderr
    assert "1 session(s), 2 message(s) to index" in done.stderr
    assert "2/2 messages" in done.stderr  # the progress bar
    assert done.stdout.startswith("index-sessions: 1 session(s), 2 message(s) → 1 chunk(s)")
    again = cli("--older-than", "0")
    assert again.stdout.startswith("index-sessions: 0 session(s), 0 message(s)")
