"""Database faults under a bounded load, against a real PostgreSQL the test owns
(tests/fakes/pg_cluster.py): stopped and started, frozen (SIGSTOP) and thawed.

While the database is away every request answers within the configured limits with
503 `unavailable` and a `Retry-After` header, never a 500; once it is back the same app
(no restart) serves again. An append answered 201 is stored exactly once, one answered
503 at most once, and the sequence numbers stay gap-free.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import httpx
import psycopg
import pytest

from app.asgi import create_app
from app.config import Settings
from app.db import migrate
from tests.conftest import ADMIN_TOKEN
from tests.fakes.pg_cluster import PgCluster
from tests.fakes.served import serve

# The limits of these tests (the defaults are 5 / 5 / 10 s): connect, pool, statement.
LIMITS = {
    "db_connect_timeout_seconds": 2,
    "db_pool_timeout_seconds": 2.0,
    "db_statement_timeout_seconds": 2.0,
    "db_ping_idle_seconds": 0.5,
    "db_pool_size": 4,
    "db_max_overflow": 2,
}
#: The longest a request may take while the database is away: the statement limit + the
#: guard margin (4 s), or a pool wait (2 s) then a connect (2 s), plus scheduling slack
#: on a loaded 2-core machine.
WORST_CASE = 4.0 + 2.5
WORKERS = 4
HOLD = WORST_CASE + 1.0
_names = itertools.count()


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[PgCluster, str]]:
    """The private cluster and its migrated template database."""
    pg = PgCluster.create()
    try:
        template = pg.create_database("navi_tpl")
        migrate.upgrade(template)
        yield pg, "navi_tpl"
    finally:
        pg.destroy()


@pytest.fixture
def fault_db(cluster: tuple[PgCluster, str]) -> tuple[PgCluster, str]:
    pg, template = cluster
    pg.thaw()
    if pg.postmaster_pid() is None:
        pg.start()
    name = f"navi_f{next(_names)}"
    with psycopg.connect(pg.libpq_url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return pg, pg.url(name)


@dataclass
class Served:
    pg: PgCluster
    client: httpx.AsyncClient
    database: str


@pytest.fixture
async def fault_client(
    fault_db: tuple[PgCluster, str], settings: Settings
) -> AsyncIterator[Served]:
    """The app served by uvicorn in the test's event loop (the ASGI test client runs one
    request at a time), and a client with the admin token."""
    pg, url = fault_db
    database = url.rsplit("/", 1)[1]
    app = create_app(
        dataclasses.replace(settings, **LIMITS), database_url=url, background_jobs=False
    )
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        try:
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
                yield Served(pg, client, database)
        finally:  # before the server stops: it waits for the requests still running
            pg.thaw()
            if pg.postmaster_pid() is None:
                pg.start()


@dataclass
class Call:
    content: str
    status: int
    seconds: float
    body: dict = field(default_factory=dict)
    retry_after: str | None = None


@dataclass
class Load:
    """WORKERS loops appending one message each, until `stop` (bounded by `max_calls`)."""

    client: httpx.AsyncClient
    sid: str
    calls: list[Call] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    max_calls: int = 400

    async def worker(self, w: int) -> None:
        for k in range(self.max_calls):
            if self.stop.is_set():
                return
            content = f"w{w}-{k}"
            started = time.monotonic()
            r = await self.client.post(
                f"/sessions/{self.sid}/messages",
                json={"messages": [{"role": "user", "content": content}]},
            )
            body = (
                r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            )
            self.calls.append(
                Call(
                    content,
                    r.status_code,
                    time.monotonic() - started,
                    body,
                    r.headers.get("retry-after"),
                )
            )
            if r.status_code == 503:
                await asyncio.sleep(0.05)

    def since(self, moment: int) -> list[Call]:
        return self.calls[moment:]


async def _session(client: httpx.AsyncClient) -> str:
    r = await client.post("/sessions", json={"name": "faults"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _until(predicate, within: float) -> float:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < within, "condition not reached in time"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def _history(client: httpx.AsyncClient, sid: str) -> list[dict]:
    out: list[dict] = []
    before: int | None = None
    while True:
        q = f"?limit=200{f'&before_seq={before}' if before is not None else ''}"
        r = await client.get(f"/sessions/{sid}/messages{q}")
        assert r.status_code == 200, r.text
        page = r.json()
        out.extend(page["messages"])
        if not page.get("has_more"):
            return out
        before = page["next_before_seq"]


async def _check_nothing_lost_or_doubled(client: httpx.AsyncClient, load: Load) -> None:
    stored = await _history(client, load.sid)
    contents = [m["content"] for m in stored]
    seqs = sorted(m["sequence_number"] for m in stored)
    assert seqs == list(range(len(seqs))), "sequence numbers have a gap"
    assert len(contents) == len(set(contents)), "an append was stored twice"
    for call in load.calls:
        if call.status == 201:
            assert call.content in contents, f"{call.content} answered 201 but is not stored"
    assert {c.status for c in load.calls} <= {201, 503}, sorted({c.status for c in load.calls})


def _assert_unavailable(load: Load, calls: list[Call]) -> None:
    """503s were answered during the outage, and no request of the whole load — before,
    during or across it — took longer than the limits allow."""
    slowest = max(load.calls, key=lambda c: c.seconds)
    assert slowest.seconds < WORST_CASE, f"{slowest.content} took {slowest.seconds:.1f}s"
    failed = [c for c in calls if c.status == 503]
    assert failed, "no request saw the outage"
    for call in failed:
        assert call.body.get("error") == "unavailable", call.body
        assert call.retry_after is not None and int(call.retry_after) > 0


async def _outage(
    client: httpx.AsyncClient,
    pg: PgCluster,
    away,
    back,  # type: ignore[no-untyped-def]
) -> tuple[Load, list[Call], float]:
    """Appends under load: healthy, the database `away()` until 503s were seen for
    HOLD seconds (longer than WORST_CASE: a request left waiting would show), then
    `back()`; returns the load, the calls during the outage, and the seconds from
    `back()` to the first 201."""
    load = Load(client, await _session(client))
    workers = [asyncio.create_task(load.worker(w)) for w in range(WORKERS)]
    try:
        await _until(lambda: sum(c.status == 201 for c in load.calls) >= 20, 30)
        start = len(load.calls)
        await asyncio.to_thread(away)
        await _until(lambda: any(c.status == 503 for c in load.since(start)), 20)
        await asyncio.sleep(HOLD)
        during = list(load.since(start))
        await asyncio.to_thread(back)
        resumed = len(load.calls)
        recovery = await _until(lambda: any(c.status == 201 for c in load.since(resumed)), 30)
        await _until(lambda: sum(c.status == 201 for c in load.since(resumed)) >= 20, 30)
    finally:
        load.stop.set()
        _, hung = await asyncio.wait(workers, timeout=2 * WORST_CASE)
        for task in hung:
            task.cancel()
    assert not hung, "a request hung past the limits"
    return load, during, recovery


async def test_database_stopped_then_started_503_then_recovery(fault_client: Served) -> None:
    pg, client = fault_client.pg, fault_client.client
    load, during, recovery = await _outage(client, pg, pg.stop, pg.start)
    _assert_unavailable(load, during)
    assert recovery < 10, f"first 201 only {recovery:.1f}s after the database was back"
    r = await client.get("/health")
    assert r.status_code == 200, r.text
    await _check_nothing_lost_or_doubled(client, load)


async def test_database_frozen_then_thawed_503_within_the_limits(fault_client: Served) -> None:
    pg, client = fault_client.pg, fault_client.client
    load, during, recovery = await _outage(client, pg, pg.freeze, pg.thaw)
    _assert_unavailable(load, during)
    assert recovery < 10, f"first 201 only {recovery:.1f}s after the database was back"
    await _check_nothing_lost_or_doubled(client, load)


async def test_health_answers_503_quickly_while_the_database_is_frozen(
    fault_client: Served,
) -> None:
    pg, client = fault_client.pg, fault_client.client
    assert (await client.get("/health")).status_code == 200
    assert (await client.get("/health/ready")).status_code == 200
    pg.freeze()
    try:
        # /health answers from a probe at most HEALTH_CHECK_SECONDS old (issue 42, 9):
        # 200 from the last one, then 503 once a probe found the database frozen;
        # /health/ready's probe is at most 1 s old. Every answer within 3 s + margin.
        every = Settings().health_check_seconds
        for path, within in (("/health/ready", 1.0), ("/health", every)):
            frozen = time.monotonic()
            while True:
                started = time.monotonic()
                r = await client.get(path)
                took = time.monotonic() - started
                assert took < 3.0 + 1.5, f"{path} took {took:.1f}s"
                if r.status_code == 503:
                    break
                assert r.status_code == 200, r.text
                assert time.monotonic() - frozen < within + 3.0 + 1.5, f"{path} still 200"
                await asyncio.sleep(0.1)
            assert r.json()["error"].startswith("database"), r.text
        assert r.json()["database"] is False
        # A read of the API: 503 within the statement limit + guard, not a hang.
        started = time.monotonic()
        r = await client.get("/sessions")
        assert r.status_code == 503, r.text
        assert time.monotonic() - started < WORST_CASE
    finally:
        pg.thaw()
    await _until_ok(client, "/sessions")


async def _until_ok(client: httpx.AsyncClient, path: str, within: float = 15) -> None:
    started = time.monotonic()
    while (await client.get(path)).status_code != 200:
        assert time.monotonic() - started < within, f"{path} did not recover"
        await asyncio.sleep(0.1)


async def test_a_statement_past_the_limit_is_a_503_and_the_pool_survives(
    fault_client: Served,
) -> None:
    """A session whose row another transaction holds locked: the append waits on the
    lock, PostgreSQL cancels it at the statement limit (QueryCanceled) → 503, and the
    next request works on the same pool."""
    pg, client = fault_client.pg, fault_client.client
    sid = await _session(client)
    with psycopg.connect(pg.libpq_url(fault_client.database)) as locker:
        locker.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (sid,))
        started = time.monotonic()
        r = await client.post(
            f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "x"}]}
        )
        took = time.monotonic() - started
        locker.rollback()
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "unavailable" and r.headers["retry-after"]
    assert 1.5 < took < 2.0 + 2.5, f"{took:.1f}s"
    r = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "y"}]}
    )
    assert r.status_code == 201, r.text
