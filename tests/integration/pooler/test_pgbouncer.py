"""Behind a real PgBouncer in transaction mode (scripts/provision-pgbouncer.sh): with
DB_POOLER=transaction the statement limit of one client never reaches another through a
shared server connection, and no server-side prepared statement breaks when consecutive
transactions run on different server connections. The suites .ci/run runs through the
pooler (conftest's `engine` with TEST_DATABASE_POOLER_URL) cover the endpoints; these
check the two properties themselves."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import psycopg
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import create_engine, session_factory, transaction
from app.db.faults import statement_budget
from tests.conftest import ADMIN_TOKEN, new_user, pooler_url_of

pytestmark = pytest.mark.skipif(
    not os.environ.get("TEST_DATABASE_POOLER_URL"),
    reason="needs TEST_DATABASE_POOLER_URL (scripts/provision-pgbouncer.sh)",
)


def _pooled(db_url: str) -> str:
    url = pooler_url_of(db_url)
    assert url is not None
    return url


@pytest.fixture
async def pooled_engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(_pooled(db_url), Settings(db_pooler="transaction", db_pool_size=6))
    yield eng
    await eng.dispose()


def _raw_statement_timeouts(db_url: str, times: int) -> set[str]:
    """`statement_timeout` as another client of the pooler sees it, `times` transactions."""
    dsn = _pooled(db_url).replace("postgresql+psycopg://", "postgresql://")
    seen: set[str] = set()
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
        for _ in range(times):
            row = conn.execute("SHOW statement_timeout").fetchone()
            assert row is not None
            seen.add(row[0])
    return seen


async def test_a_statement_limit_stays_in_its_transaction(
    pooled_engine: AsyncEngine, db_url: str
) -> None:
    factory = session_factory(pooled_engine)
    for limit, shown in ((1.5, "1500ms"), (600, "10min"), (7, "7s")):
        with statement_budget(limit):
            async with transaction(factory) as db:
                assert (await db.execute(text("SHOW statement_timeout"))).scalar() == shown
                idle = (await db.execute(text("SHOW idle_in_transaction_session_timeout"))).scalar()
                assert idle == "5min"  # DB_IDLE_IN_TRANSACTION_SECONDS' default, 300
    # the server connections those transactions ran on, as the pooler's next client
    # gets them: the server's own default, none of the limits above
    seen = await asyncio.to_thread(_raw_statement_timeouts, db_url, 12)
    assert seen.isdisjoint({"1500ms", "10min", "7s"}), seen


async def test_a_side_read_has_its_limit_too(pooled_engine: AsyncEngine) -> None:
    """`in_own_session` (a search's side read) runs in a transaction behind a pooler: in
    autocommit its statements would run with whatever limit the server connection has."""
    from app.db.engine import in_own_session

    async def show(db):  # type: ignore[no-untyped-def]
        return (await db.execute(text("SHOW statement_timeout"))).scalar()

    with statement_budget(3):
        assert await in_own_session(session_factory(pooled_engine), show) == "3s"


async def test_repeated_statements_across_server_connections(pooled_engine: AsyncEngine) -> None:
    """More client connections than server ones, each running the same statement many
    times: psycopg would prepare it on the server from the fifth run, and a transaction
    on another server connection would then fail ('prepared statement … does not exist')."""
    factory = session_factory(pooled_engine)

    async def worker(n: int) -> int:
        done = 0
        for i in range(15):
            async with transaction(factory) as db:
                got = (
                    await db.execute(
                        text("SELECT CAST(:a AS int) + CAST(:b AS int)"), {"a": n, "b": i}
                    )
                ).scalar()
                assert got == n + i
                await asyncio.sleep(0)
                done += 1
        return done

    assert await asyncio.gather(*(worker(n) for n in range(6))) == [15] * 6


async def test_the_service_behind_the_pooler(
    pooled_engine: AsyncEngine, settings: Settings
) -> None:
    """Sessions, appends, history pages, search and prepare, many times over, with more
    concurrent requests than the pooler has server connections: no error."""
    import dataclasses

    from app.asgi import create_app

    app = create_app(
        dataclasses.replace(settings, db_pooler="transaction"),
        engine=pooled_engine,
        background_jobs=False,
    )
    async with AsyncTestClient(app, raise_server_exceptions=False) as admin:
        admin.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, headers = await new_user(admin, "pooled")
        admin.headers.update(headers)

        async def one(n: int) -> None:
            r = await admin.post("/sessions", json={"name": f"s{n}"})
            assert r.status_code == 201, r.text
            sid = r.json()["id"]
            for i in range(8):
                r = await admin.post(
                    f"/sessions/{sid}/messages",
                    json={
                        "messages": [{"role": "user", "content": f"message {n}-{i} about herons"}]
                    },
                )
                assert r.status_code in (200, 201), r.text
                r = await admin.get(f"/sessions/{sid}/messages", params={"limit": 3})
                assert r.status_code == 200, r.text
            r = await admin.get("/sessions", params={"limit": 5})
            assert r.status_code == 200, r.text
            r = await admin.post(
                f"/sessions/{sid}/prepare", json={"message": {"role": "user", "content": "herons?"}}
            )
            assert r.status_code == 200, r.text

        await asyncio.gather(*(one(n) for n in range(6)))
        r = await admin.post("/memory/search", json={"query": "herons", "scope": "all"})
        assert r.status_code == 200, r.text
