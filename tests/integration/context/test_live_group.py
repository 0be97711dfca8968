"""The live words pass takes many sessions per transaction (`index_live_group`): a
statement per step for the whole group, not eight round trips per session, and the chunks
it writes are the ones the chunker packs for each session alone."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import event

from app.config import Settings
from app.db.engine import session_factory
from app.domain.raw_history.chunks import ChunkMessage, build_chunks
from app.domain.raw_history.live_index import GROUP_MESSAGES, LivePassResult, index_live_sessions
from app.llm.factory import build_gateway
from tests.citus import cluster as citus
from tests.conftest import new_user
from tests.integration.context.conftest import append, new_session, turn


def _sql(db_url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        cur = c.execute(query, args)
        return cur.fetchall() if cur.description else []


async def _words_pass(engine: Any, settings: Settings) -> tuple[LivePassResult, int]:
    """One live words pass (no vectors) and the statements it sent."""
    sent: list[str] = []

    def count(*args: Any) -> None:
        sent.append(args[2])

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    llm = build_gateway(settings)
    try:
        result = await index_live_sessions(session_factory(engine), llm, settings, embed=False)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)
        await llm.aclose()
    return result, len(sent)


def _expected(sent: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    chunks = build_chunks(
        ChunkMessage(role=m["role"], content=m["content"], sequence_number=n)
        for n, m in enumerate(sent)
    )
    return [(c.start_seq, c.end_seq, c.content_hash) for c in chunks]


def _stored(db_url: str, sid: str) -> list[tuple[int, int, str]]:
    rows = _sql(
        db_url,
        "SELECT start_seq, end_seq, content_hash FROM memory_chunks WHERE session_id = %s"
        " ORDER BY start_seq",
        sid,
    )
    return [(int(a), int(b), str(h)) for a, b, h in rows]


async def test_one_pass_indexes_many_sessions_of_many_users_in_a_few_statements(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    sessions: dict[str, list[dict[str, Any]]] = {}
    headers = [(await new_user(cclient, f"grouped{n}"))[1] for n in range(3)]
    for n, h in enumerate(headers):
        for i in range(12):
            sid = await new_session(cclient, headers=h)
            sessions[sid] = turn(n * 100 + i, size=500)
            await append(cclient, sid, sessions[sid], headers=h)
    done, statements = await _words_pass(engine, settings)
    assert (done.sessions, done.failed) == (36, 0), done
    assert done.messages == 72 and done.chunks == 36
    # one session per transaction took ~8 round trips each (~290 here)
    limit = 120 if citus.citus_url() else 20  # a cluster: one group per user
    assert statements <= limit, statements
    for sid, sent in sessions.items():
        assert _stored(db_url, sid) == _expected(sent)
    # the open chunks grow (one statement for all of them), and close at the size limit
    for round_ in range(1, 7):
        for n, h in enumerate(headers):
            for i, sid in enumerate(list(sessions)[n * 12 : n * 12 + 12]):
                more = turn(n * 100 + i + 1000 * round_, size=500)
                sessions[sid] += more
                await append(cclient, sid, more, headers=h)
        grown, statements = await _words_pass(engine, settings)
        assert grown.failed == 0 and grown.messages == 72, grown
        assert statements <= limit, statements
    assert grown.extended + grown.chunks >= 36
    for sid, sent in sessions.items():
        stored = _stored(db_url, sid)
        assert stored == _expected(sent)
        assert len(stored) > 1  # an open chunk closed and the next began
    covered = _sql(
        db_url,
        "SELECT count(*) FROM raw_index_state r JOIN sessions s"
        " ON s.id = r.session_id AND s.user_id = r.user_id"
        " WHERE s.id = ANY(%s) AND r.covered @> int8range(0, s.next_seq)",
        list(sessions),
    )
    assert covered == [(36,)]


async def test_a_backlog_longer_than_a_round_is_taken_in_rounds(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    long = await new_session(cclient)
    short = await new_session(cclient)
    sent = [m for i in range(GROUP_MESSAGES + 15) for m in turn(i, size=60)]
    await append(cclient, long, sent)
    await append(cclient, short, turn(7))
    done, _ = await _words_pass(engine, settings)
    assert (done.sessions, done.failed, done.messages) == (2, 0, len(sent) + 2), done
    assert _stored(db_url, long) == _expected(sent)
    assert _stored(db_url, short) == _expected(turn(7))


@pytest.mark.skipif(
    citus.citus_url() is not None, reason="a trigger: none on a cluster's distributed tables"
)
async def test_a_failing_session_costs_its_group_nothing_but_itself(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    sids = [await new_session(cclient) for _ in range(4)]
    for n, sid in enumerate(sids):
        await append(cclient, sid, turn(n))
    poisoned = sids[2]
    _sql(
        db_url,
        "CREATE FUNCTION navi_test_poison() RETURNS trigger LANGUAGE plpgsql AS $$"
        f" BEGIN IF NEW.session_id = '{poisoned}' THEN RAISE EXCEPTION 'poisoned'; END IF;"
        " RETURN NEW; END $$;"
        " CREATE TRIGGER navi_test_poison BEFORE INSERT ON memory_chunks"
        " FOR EACH ROW EXECUTE FUNCTION navi_test_poison()",
    )
    try:
        done, _ = await _words_pass(engine, settings)
    finally:
        _sql(
            db_url,
            "DROP TRIGGER navi_test_poison ON memory_chunks; DROP FUNCTION navi_test_poison()",
        )
    assert (done.sessions, done.failed) == (4, 1), done
    for n, sid in enumerate(sids):
        assert _stored(db_url, sid) == ([] if sid == poisoned else _expected(turn(n)))
    state = _sql(
        db_url, "SELECT attempts, last_error FROM raw_index_state WHERE session_id = %s", poisoned
    )
    assert state[0][0] == 1 and "poisoned" in state[0][1]
    again, _ = await _words_pass(engine, settings)  # the next pass takes it
    assert again.failed == 0
    assert _stored(db_url, poisoned) == _expected(turn(2))
