"""Read replicas against a real streaming replica (scripts/provision-replica.sh):
reads go there when it is caught up, read-your-writes holds, a lagging or stopped
replica sends reads to the primary (counted), never a 5xx."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.db.replica import ReplicaRouter, parse_lsn
from tests.conftest import ADMIN_TOKEN, new_user
from tests.fakes.chat_script import ScriptedReply

pytestmark = pytest.mark.skipif(
    not os.environ.get("TEST_DATABASE_REPLICA_URL"),
    reason="needs TEST_DATABASE_REPLICA_URL (scripts/provision-replica.sh)",
)

REPLICA_DIR = os.environ.get("NAVI_REPLICA_DIR", "/var/lib/postgresql/navi-replica")
PG_CTL = "/usr/lib/postgresql/15/bin/pg_ctl"


def _replica_admin() -> psycopg.Connection:
    url = make_url(os.environ["TEST_DATABASE_REPLICA_URL"]).set(database="postgres")
    dsn = url.render_as_string(hide_password=False).replace(
        "postgresql+psycopg://", "postgresql://"
    )
    return psycopg.connect(dsn, autocommit=True)


@pytest.fixture
def paused_replay(db_url: str) -> Iterator[None]:
    """Replay paused once the replica has everything up to now (the test's database)."""
    primary = make_url(db_url).render_as_string(hide_password=False)
    with psycopg.connect(primary.replace("postgresql+psycopg://", "postgresql://")) as conn:
        target = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]  # type: ignore[index]
    with _replica_admin() as conn:
        deadline = time.monotonic() + 30
        while not conn.execute(
            "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (str(target),)
        ).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, "replica does not replay"
            time.sleep(0.05)
        conn.execute("SELECT pg_wal_replay_pause()")
    try:
        yield
    finally:
        with _replica_admin() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")


def _fallbacks(reason: str) -> float:
    return REGISTRY.get_sample_value("navi_replica_fallbacks_total", {"reason": reason}) or 0.0


def _replica_reads() -> float:
    return REGISTRY.get_sample_value("navi_replica_reads_total") or 0.0


def _router(client: Any) -> ReplicaRouter:
    router = client.app.state.runtime.replica
    assert isinstance(router, ReplicaRouter)
    return router


async def _checked(router: ReplicaRouter, within: float = 10.0) -> Any:
    """The health the app's replica watch measures next. The router's engines belong to
    the app's event loop (the test client serves it from a thread of its own): calling
    `refresh()` from the test's loop would use their pooled connections from a second
    loop, which can hang."""
    seen = router.health
    deadline = time.monotonic() + within
    while router.health is seen:
        assert time.monotonic() < deadline, "the replica watch did not check"
        await asyncio.sleep(0.02)
    return router.health


async def _until_usable(router: ReplicaRouter, within: float = 30.0) -> None:
    """The test database was created on the primary a moment ago: wait for its replay."""
    deadline = time.monotonic() + within
    while not (await _checked(router)).usable:
        assert time.monotonic() < deadline, f"replica not usable: {router.health}"
        await asyncio.sleep(0.1)


async def _session_with_message(
    client: Any, headers: dict[str, str], text_: str
) -> tuple[str, str]:
    r = await client.post("/sessions/", json={"profile_id": "default"}, headers=headers)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": text_}]},
        headers=headers,
    )
    assert r.status_code == 201, r.text
    lsn = r.headers.get("navi-write-lsn")
    assert lsn and parse_lsn(lsn), r.headers
    return sid, lsn


async def test_caught_up_replica_serves_reads(client: Any) -> None:
    router = _router(client)
    await _until_usable(router)
    sid, lsn = await _session_with_message(client, {}, "hello from the primary")
    # wait until the replica has replayed the write, then the read is the replica's
    deadline = time.monotonic() + 10
    while (await _checked(router)).replay_lsn < (parse_lsn(lsn) or 0):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    before = _replica_reads()
    r = await client.get(f"/sessions/{sid}/messages")
    assert r.status_code == 200, r.text
    assert [m["content"] for m in r.json()["messages"]] == ["hello from the primary"]
    assert _replica_reads() == before + 1
    # and the session a read is given really is on a server in recovery
    session = await router.read_session(parse_lsn(lsn) or 0)
    async with session:
        assert await session.scalar(text("SELECT pg_is_in_recovery()")) is True
    # a GET that reads only never carries a write position
    assert "navi-write-lsn" not in r.headers


async def test_read_your_writes_while_replay_is_paused(
    client: Any, make_client: Any, settings: Any, paused_replay: None
) -> None:
    router = _router(client)
    await _until_usable(router)
    behind = _fallbacks("behind_write")
    sid, lsn = await _session_with_message(client, {}, "written while replay is paused")
    # the replica has not replayed it: the writer's reads go to the primary, and see it
    r = await client.get(f"/sessions/{sid}/messages")
    assert r.status_code == 200, r.text
    assert [m["content"] for m in r.json()["messages"]] == ["written while replay is paused"]
    r = await client.get("/sessions/", params={"search": "paused"})
    assert r.status_code == 200 and r.json()["total"] == 1, r.text
    assert _fallbacks("behind_write") >= behind + 2
    # another process (no memory of this write) honours the echoed Navi-Min-LSN
    async with make_client(settings) as other:
        other.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        await _until_usable(_router(other))
        r = await other.get(f"/sessions/{sid}/messages", headers={"Navi-Min-LSN": lsn})
        assert r.status_code == 200, r.text
        assert len(r.json()["messages"]) == 1
        # without the header that process reads the (paused) replica: the write is not there
        r = await other.get(f"/sessions/{sid}/messages")
        assert r.status_code == 404, r.text


async def test_lag_past_the_bound_falls_back(
    make_client: Any, settings: Any, paused_replay: None
) -> None:
    async with make_client(
        settings, replica_max_lag_seconds=0.5, replica_check_seconds=0.1
    ) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        router = _router(client)
        # usable right after the pause (nothing written since), then the primary moves on
        await _until_usable(router)
        _, reader = await new_user(client, "reader")  # a write the replica does not see
        await asyncio.sleep(1.0)
        health = await _checked(router)
        assert not health.usable and health.reason == "lag", health
        assert health.lag_seconds is not None and health.lag_seconds > 0.5
        lag = _fallbacks("lag")
        r = await client.get("/sessions/", headers=reader)  # reader wrote nothing himself
        assert r.status_code == 200, r.text
        assert _fallbacks("lag") == lag + 1


def _pg_ctl(*args: str) -> None:
    subprocess.run(
        ["runuser", "-u", "postgres", "--", PG_CTL, "-D", REPLICA_DIR, *args],
        check=True,
        capture_output=True,
        timeout=90,
    )


async def test_stopped_replica_falls_back_without_errors(client: Any) -> None:
    router = _router(client)
    await _until_usable(router)
    sid, _ = await _session_with_message(client, {}, "before the replica stops")
    unreachable = _fallbacks("unreachable")
    _pg_ctl("-m", "fast", "-w", "stop")
    try:
        for _ in range(3):  # the first finds the dead connection, the next the marked state
            started = time.monotonic()
            r = await client.get(f"/sessions/{sid}/messages")
            assert r.status_code == 200, r.text
            assert len(r.json()["messages"]) == 1
            assert time.monotonic() - started < 5
        assert _fallbacks("unreachable") >= unreachable + 3
        health = await _checked(router)
        assert not health.usable and health.reason == "unreachable"
    finally:
        _pg_ctl("-l", f"{REPLICA_DIR}/server.log", "-w", "-t", "60", "start")
    await _until_usable(router)
    r = await client.get(f"/sessions/{sid}/messages")
    assert r.status_code == 200


async def test_a_turns_own_commits_are_read_back_while_replay_is_paused(
    client: Any, ollama: Any, paused_replay: None
) -> None:
    """A turn writes in steps of its own (not the request's session): each commit that
    wrote is remembered for the caller, so the history read right after is the primary's
    and holds the answer; the response names the last write's position."""
    router = _router(client)
    await _until_usable(router)
    r = await client.post("/sessions/", json={"profile_id": "default"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    ollama.chat_replies.append(ScriptedReply("Paris is the capital."))
    behind = _fallbacks("behind_write")
    r = await client.post(f"/sessions/{sid}/turns", json={"message": {"content": "capital?"}})
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text
    lsn = parse_lsn(r.headers.get("navi-write-lsn"))
    assert lsn is not None and lsn > router.health.replay_lsn, r.headers
    r = await client.get(f"/sessions/{sid}/messages")
    assert r.status_code == 200, r.text
    assert [m["content"] for m in r.json()["messages"]] == ["capital?", "Paris is the capital."]
    assert _fallbacks("behind_write") == behind + 1
