"""Planning logs in their own table (review 2026-12-04 #5): reading a session or its
share link reads none of its log, an entry is a row (count and byte caps trim the
oldest), the log is paged in SQL, and the migration moves existing arrays."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from litestar.testing import AsyncTestClient
from sqlalchemy import event
from sqlalchemy.engine import Engine

from app.config import Settings
from app.db import migrate
from app.domain.sessions.services import PLANNING_LOGS_KEPT
from tests.conftest import new_user, run_sql


async def _session(client: AsyncTestClient) -> str:
    r = await client.post("/sessions", json={"profile_id": "default"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _plan(client: AsyncTestClient, sid: str, entry: dict[str, Any]) -> None:
    r = await client.post(f"/sessions/{sid}/planning", json={"entry": entry})
    assert r.status_code == 204, r.text


@contextmanager
def _statements() -> Iterator[list[str]]:
    """Every SQL statement any engine of this process runs inside the block."""
    seen: list[str] = []

    def record(conn, cursor, statement, params, context, executemany) -> None:  # type: ignore[no-untyped-def]
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


async def test_session_and_share_reads_leave_the_planning_log_alone(
    client: AsyncTestClient, anon_client: AsyncTestClient
) -> None:
    sid = await _session(client)
    await client.post(
        f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    for i in range(8):  # about 1.6 MB of log
        await _plan(client, sid, {"step": i, "blob": "x" * 200_000})
    token = (await client.post(f"/sessions/{sid}/share")).json()["token"]
    with _statements() as seen:
        r = await client.get(f"/sessions/{sid}")
        assert r.status_code == 200 and "planning" not in r.text
        assert r.json()["id"] == sid
        shared = await anon_client.get(f"/shared/{token}", params={"limit": 1})
        assert shared.status_code == 200, shared.text
        assert "xxxxxxxx" not in shared.text
    reads = [s for s in seen if "planning_logs" in s or "session_planning_entries" in s]
    assert reads == []
    # the log itself: a page read in SQL
    with _statements() as seen:
        r = await client.get(f"/sessions/{sid}/planning", params={"limit": 2, "offset": 3})
    assert [e["step"] for e in r.json()["planning_logs"]] == [3, 4]
    pages = [s for s in seen if "FROM session_planning_entries" in s and "LIMIT" in s]
    assert len(pages) == 1 and "OFFSET" in pages[0]


async def test_count_cap_keeps_the_newest_and_pages_in_order(client: AsyncTestClient) -> None:
    sid = await _session(client)
    for i in range(PLANNING_LOGS_KEPT + 3):
        await _plan(client, sid, {"step": i})
    page = (await client.get(f"/sessions/{sid}/planning", params={"limit": 5})).json()
    assert page["planning_logs"] == [{"step": i} for i in range(3, 8)]
    assert (page["total"], page["has_more"]) == (PLANNING_LOGS_KEPT, True)
    last = (
        await client.get(f"/sessions/{sid}/planning", params={"limit": 5, "offset": 198})
    ).json()
    assert last["planning_logs"] == [{"step": 201}, {"step": 202}] and not last["has_more"]
    past = (await client.get(f"/sessions/{sid}/planning", params={"offset": 500})).json()
    assert past["planning_logs"] == [] and past["total"] == PLANNING_LOGS_KEPT
    assert not past["has_more"]


async def test_byte_cap_trims_the_oldest_entries(
    make_client, settings: Settings, db_url: str
) -> None:  # type: ignore[no-untyped-def]
    cap = 300_000  # three entries of 100 kB pass it, two do not
    async with make_client(settings, planning_max_session_bytes=cap) as client:
        client.headers["Authorization"] = f"Bearer {settings.admin_token}"
        sid = await _session(client)
        for i in range(5):
            await _plan(client, sid, {"step": i, "blob": "y" * 100_000})
        body = (await client.get(f"/sessions/{sid}/planning")).json()
    assert [e["step"] for e in body["planning_logs"]] == [3, 4] and body["total"] == 2
    stored = run_sql(
        db_url, "select sum(bytes) from session_planning_entries where session_id = %s", sid
    )
    assert stored and 200_000 < stored[0][0] <= cap


async def test_planning_log_goes_with_its_session(client: AsyncTestClient, db_url: str) -> None:
    sid = await _session(client)
    await _plan(client, sid, {"step": 1})
    assert (await client.delete(f"/sessions/{sid}")).status_code == 204
    rows = run_sql(
        db_url, "select count(*) from session_planning_entries where session_id = %s", sid
    )
    assert rows == [(0,)]


def test_migration_moves_the_arrays_and_back(empty_db_url: str) -> None:
    url = empty_db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    migrate.upgrade(empty_db_url, "b5d9e1f3a7c2")
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("insert into navi_users (id, name) values ('u1', 'u1')")
        c.execute(
            "insert into sessions (id, profile_id, user_id, planning_logs) values"
            " ('00000000-0000-0000-0000-000000000001', 'p', 'u1',"
            ' \'[{"step": 0}, {"step": 1}, {"step": 2}]\'),'
            " ('00000000-0000-0000-0000-000000000002', 'p', 'u1', '[]')"
        )
    migrate.upgrade(empty_db_url)
    with psycopg.connect(url, autocommit=True) as c:
        rows = c.execute(
            "select session_id::text, seq, entry, bytes from session_planning_entries"
            " order by session_id, seq"
        ).fetchall()
        seqs = c.execute("select next_planning_seq from sessions order by id").fetchall()
        columns = c.execute(
            "select column_name from information_schema.columns where table_name = 'sessions'"
        ).fetchall()
    sid = "00000000-0000-0000-0000-000000000001"
    assert [(r[0], r[1], r[2]) for r in rows] == [(sid, i, {"step": i}) for i in range(3)]
    assert all(r[3] == len('{"step": 0}') for r in rows)
    assert seqs == [(3,), (0,)]
    assert ("planning_logs",) not in columns
    migrate.downgrade(empty_db_url, "b5d9e1f3a7c2")
    with psycopg.connect(url, autocommit=True) as c:
        logs = c.execute("select planning_logs from sessions order by id").fetchall()
    assert logs == [([{"step": 0}, {"step": 1}, {"step": 2}],), ([],)]


async def test_import_of_an_older_export_moves_its_planning_logs(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice")
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=alice)
    sid = r.json()["id"]
    for i in range(3):
        r = await client.post(
            f"/sessions/{sid}/planning", json={"entry": {"step": i}}, headers=alice
        )
        assert r.status_code == 204
    records = [
        json.loads(x) for x in (await client.get("/me/export", headers=alice)).content.splitlines()
    ]
    # the file as this server wrote it before: the log an array in the session record
    entries = [r for r in records if r["type"] == "planning_entry"]
    assert [e["entry"] for e in entries] == [{"step": i} for i in range(3)]
    old = []
    for r in records:
        if r["type"] == "session":
            r = {k: v for k, v in r.items() if k != "next_planning_seq"}
            r["planning_logs"] = [e["entry"] for e in entries]
        if r["type"] == "end":
            r = {**r, "records": r["records"] - len(entries)}
        if r["type"] != "planning_entry":
            old.append(r)
    assert (await client.delete(f"/sessions/{sid}", headers=alice)).status_code == 204
    _, bob = await new_user(client, "bob")
    body = b"".join(json.dumps(r).encode() + b"\n" for r in old)
    r = await client.post("/me/import", content=body, headers=bob)
    assert r.status_code == 201, r.text
    assert r.json()["records"]["planning_entry"] == 3
    logs = (await client.get(f"/sessions/{sid}/planning", headers=bob)).json()
    assert logs["planning_logs"] == [{"step": i} for i in range(3)]
    r = await client.post(f"/sessions/{sid}/planning", json={"entry": {"step": 3}}, headers=bob)
    assert r.status_code == 204
    logs = (await client.get(f"/sessions/{sid}/planning", headers=bob)).json()
    assert logs["planning_logs"] == [{"step": i} for i in range(4)]
