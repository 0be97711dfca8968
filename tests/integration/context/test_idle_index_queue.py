"""The idle raw index's work queue: the append's mark (`sessions.raw_index_pending`) read
through a partial index, cleared once the quiet session is covered, set again by an
append."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.db.engine import session_factory, transaction
from app.domain.raw_history.state_repository import RawIndexRepository
from app.domain.transfer.import_repository import ImportRepository
from tests.citus import cluster as citus
from tests.integration.context.conftest import append, new_session
from tests.integration.context.test_idle_index import SHORT, _chunks, _pass, _sql
from tests.integration.facts.conftest import sql
from tests.integration.rolling.test_rolling_queue import plan_of


def _mark(db_url: str, sid: str) -> bool | None:
    return _sql(db_url, "SELECT raw_index_pending FROM sessions WHERE id = %s", sid)[0][0]  # type: ignore[no-any-return]


@pytest.mark.skipif(
    citus.citus_url() is not None,
    reason="the plan of a single server; on Citus each shard plans its part, and the statement"
    " plan check (tests/citus/test_statement_plans.py) covers the cluster",
)
async def test_the_idle_pass_reads_its_work_through_the_pending_index(
    cclient: AsyncTestClient, engine: Any, db_url: str
) -> None:
    """EXPLAIN of the repository's own statements on 5,000 sessions with state rows, 50
    of them marked: range scans of `ix_sessions_raw_index_pending`, not joins of every
    session with `raw_index_state`."""
    await new_session(cclient)  # the admin user exists
    sql(
        db_url,
        "INSERT INTO sessions (id, user_id, profile_id, last_active, next_seq,"
        " raw_index_pending)"
        " SELECT gen_random_uuid(), 'admin', 'small', now() - make_interval(mins => 60 + i), 4,"
        " CASE WHEN i %% 100 = 0 THEN true WHEN i %% 2 = 0 THEN false END"
        " FROM generate_series(1, 5000) AS i",
    )
    sql(
        db_url,
        "INSERT INTO raw_index_state (session_id, user_id) SELECT id, user_id FROM sessions"
        " WHERE NOT coalesce(raw_index_pending, false) OR last_active < now() - interval '1 day'",
    )
    sql(db_url, "ANALYZE sessions")
    sql(db_url, "ANALYZE raw_index_state")
    factory = session_factory(engine)
    before = datetime.now(UTC) - timedelta(minutes=30)
    listed: list[Any] = []

    async def ensure() -> None:
        async with transaction(factory) as db:
            await RawIndexRepository(db).ensure_idle_rows(before, None)

    async def pending() -> None:
        async with transaction(factory) as db:
            listed.extend(await RawIndexRepository(db).pending(before, None, [], 20))

    plan = await plan_of(engine, "INSERT INTO raw_index_state", ensure)
    assert "ix_sessions_raw_index_pending" in plan, plan
    plan = await plan_of(engine, "raw_index_pending", pending)
    assert len(listed) == 20 and not any(r.covered for r in listed)
    assert "ix_sessions_raw_index_pending" in plan, plan


async def test_the_mark_is_cleared_once_covered_and_set_again_by_an_append(
    cclient: AsyncTestClient, engine: Any, settings: Settings, db_url: str
) -> None:
    idle = dataclasses.replace(settings, raw_index_idle_minutes=0)
    sid = await new_session(cclient)
    assert _mark(db_url, sid) is None  # no message yet
    await append(cclient, sid, SHORT)
    assert _mark(db_url, sid) is True
    # active: the pass neither indexes nor unmarks it
    active = await _pass(engine, settings)
    assert (active.batches, _mark(db_url, sid)) == (0, True)
    # quiet: indexed, and the batch that completes it clears the mark
    done = await _pass(engine, idle, minutes_later=1)
    assert (done.sessions, done.chunks) == (1, 1)
    assert _mark(db_url, sid) is False
    # an append marks it again; covered meanwhile (as the live index does), the idle
    # pass only clears the mark: no batch, no chunk
    await append(cclient, sid, [{"role": "user", "content": "and tofu?"}])
    assert _mark(db_url, sid) is True
    _sql(
        db_url,
        "UPDATE raw_index_state SET covered = int8multirange(int8range(0, s.next_seq))"
        " FROM sessions s WHERE s.id = raw_index_state.session_id"
        " AND s.user_id = raw_index_state.user_id AND s.id = %s RETURNING 1",
        sid,
    )
    quiet = await _pass(engine, idle, minutes_later=1)
    assert (quiet.batches, quiet.chunks) == (0, 0)
    assert _mark(db_url, sid) is False and len(_chunks(db_url, sid)) == 1


async def test_an_append_after_the_listing_keeps_the_mark(
    cclient: AsyncTestClient, engine: Any, db_url: str
) -> None:
    """`unmark` names the `next_seq` it saw covered: an append since keeps the mark."""
    sid = await new_session(cclient)
    await append(cclient, sid, SHORT)
    seen = _sql(db_url, "SELECT next_seq FROM sessions WHERE id = %s", sid)[0][0]
    _sql(
        db_url,
        "INSERT INTO raw_index_state (session_id, user_id, covered)"
        " SELECT id, user_id, int8multirange(int8range(0, next_seq)) FROM sessions"
        " WHERE id = %s RETURNING 1",
        sid,
    )
    await append(cclient, sid, [{"role": "user", "content": "and tofu?"}])
    async with transaction(session_factory(engine)) as db:
        await RawIndexRepository(db).unmark("admin", uuid.UUID(sid), seen)
    assert _mark(db_url, sid) is True


async def test_an_import_marks_the_sessions_its_file_did_not(
    cclient: AsyncTestClient, engine: Any, db_url: str
) -> None:
    """A session from an older export (no marks) is pending for both jobs; one the file
    marked keeps its marks; one without messages is not marked."""
    await new_session(cclient)  # the admin user exists
    old, marked, empty = (str(uuid.uuid4()) for _ in range(3))
    sql(
        db_url,
        "INSERT INTO sessions (id, user_id, profile_id, next_seq, rolling_pending,"
        " raw_index_pending) VALUES (%s, 'admin', 'small', 4, NULL, NULL),"
        " (%s, 'admin', 'small', 4, false, false), (%s, 'admin', 'small', 0, NULL, NULL)",
        old,
        marked,
        empty,
    )
    async with transaction(session_factory(engine)) as db:
        await ImportRepository(db).mark_background_work("admin")
    rows = dict(
        (r[0], r[1:])
        for r in _sql(db_url, "SELECT id::text, rolling_pending, raw_index_pending FROM sessions")
    )
    assert (rows[old], rows[marked], rows[empty]) == ((True, True), (False, False), (None, None))
