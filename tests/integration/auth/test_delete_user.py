"""Deleting a user deletes everything they own: every row of every table with a
`user_id` (found in the metadata, so a new table is checked by itself) and their
session files on disk."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from typing import Any

import psycopg
from litestar.testing import AsyncTestClient
from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncEngine

import app.db.models  # noqa: F401 - registers every table
from app.config import Settings
from app.db.base import Base
from app.db.engine import session_factory
from app.domain.auth.deletion import delete_marked_user, finish_deletions, mark_for_deletion
from app.domain.kernel.runtime import Runtime
from tests.conftest import ADMIN_TOKEN, _libpq, new_user, run_sql
from tests.integration.fill import fill_every_store


def user_tables() -> list[Table]:
    return [t for t in Base.metadata.sorted_tables if "user_id" in t.columns]


def rows_of(db_url: str, user_id: str) -> dict[str, int]:
    counts = {}
    for t in user_tables():
        rows = run_sql(db_url, f'select count(*) from "{t.name}" where user_id = %s', user_id)
        assert rows is not None
        counts[t.name] = rows[0][0]
    return counts


async def test_deleting_a_user_leaves_no_row_and_no_file(client, engine, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    bob_id, bob = await new_user(client, "bob")
    filled = await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    kept = await fill_every_store(client, engine, settings, db_url, bob_id, bob)
    before = rows_of(db_url, alice_id)
    # the fill reaches every table but the users' own (navi_users is keyed by `id`)
    empty = sorted(name for name, n in before.items() if n == 0)
    assert empty == [], f"the fill wrote nothing to {empty}: extend tests/integration/fill.py"
    folder = settings.data_path / "session_files" / filled.sid
    assert any(folder.iterdir())

    r = await client.delete(f"/admin/users/{alice_id}")
    assert r.status_code == 204, r.text

    left = {name: n for name, n in rows_of(db_url, alice_id).items() if n}
    assert left == {}, f"rows of the deleted user remain: {left}"
    assert run_sql(db_url, "select count(*) from navi_users where id = %s", alice_id) == [(0,)]
    assert not folder.exists(), "the user's session files are still on disk"
    # bob's are untouched
    assert all(rows_of(db_url, bob_id).values())
    assert any((settings.data_path / "session_files" / kept.sid).iterdir())
    assert (await client.get("/me", headers=alice)).status_code == 401


async def _user_with_sessions(
    client: AsyncTestClient, settings: Settings, name: str, n: int
) -> tuple[str, dict[str, str], list[str]]:
    uid, h = await new_user(client, name)
    sids = []
    for i in range(n):
        r = await client.post("/sessions", json={"profile_id": "default"}, headers=h)
        sid = r.json()["id"]
        r = await client.post(
            f"/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": f"hello {i}"}]},
            headers=h,
        )
        assert r.status_code == 201, r.text
        files = {"files": ("a.txt", b"x", "text/plain")}
        assert (
            await client.post(f"/sessions/{sid}/files", files=files, headers=h)
        ).status_code == 201
        sids.append(sid)
    return uid, h, sorted(sids, key=uuid.UUID)


def _left(db_url: str, user_id: str) -> set[str]:
    rows = run_sql(db_url, "select id::text from sessions where user_id = %s", user_id)
    return {r[0] for r in rows or []}


async def test_deleting_a_user_goes_in_batches_and_resumes(
    client: AsyncTestClient, settings: Settings, engine: AsyncEngine, db_url: str
) -> None:
    """Batches of sessions, each committed (and its files removed) on its own; a
    deletion that stopped half-way is finished by the periodic job."""
    uid, _, sids = await _user_with_sessions(client, settings, "gina", 5)
    small = dataclasses.replace(settings, user_delete_batch_sessions=2)
    factory = session_factory(engine)
    await mark_for_deletion(factory, uid)
    with psycopg.connect(_libpq(db_url)) as held:  # a long write on the 4th session
        held.execute(  # naming the user: on Citus a lock routes to one shard
            "SELECT 1 FROM sessions WHERE id = %s AND user_id = %s FOR UPDATE", (sids[3], uid)
        )
        task = asyncio.create_task(delete_marked_user(factory, small, uid))
        await asyncio.sleep(1.0)
        # the first batch is committed and its files gone; the second waits on the lock
        assert _left(db_url, uid) == set(sids[2:])
        assert not (settings.data_path / "session_files" / sids[0]).exists()
        assert (settings.data_path / "session_files" / sids[4]).exists()
        r = await client.get(f"/admin/users/{uid}/deletion")
        assert r.json() == {
            "user_id": uid,
            "state": "deleting",
            "sessions_left": 3,
            "status_url": f"/admin/users/{uid}/deletion",
        }
        task.cancel()  # the process dies here
        with contextlib.suppress(asyncio.CancelledError):
            await task
        held.rollback()
    assert _left(db_url, uid) == set(sids[2:])
    # the periodic job takes up deletions marked a while ago
    run_sql(
        db_url,
        "update navi_users set deleting_since = now() - interval '5 minutes' where id = %s",
        uid,
    )
    assert await finish_deletions(Runtime.of(small, factory)) == 1
    assert _left(db_url, uid) == set()
    assert run_sql(db_url, "select count(*) from navi_users where id = %s", uid) == [(0,)]
    assert not any((settings.data_path / "session_files" / s).exists() for s in sids)
    assert (await client.get(f"/admin/users/{uid}/deletion")).json()["state"] == "deleted"


async def test_a_deletion_that_cannot_finish_in_time_answers_202(
    make_client: Any, settings: Settings, db_url: str
) -> None:
    async with make_client(settings, user_delete_wait_seconds=0) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        uid, h, sids = await _user_with_sessions(c, settings, "hugo", 3)
        r = await c.delete(f"/admin/users/{uid}")
        assert r.status_code == 202, r.text
        assert r.json()["status_url"] == f"/admin/users/{uid}/deletion"
        assert r.json()["state"] in ("deleting", "deleted")
        assert (await c.get("/me", headers=h)).status_code == 401
        for _ in range(100):
            state = (await c.get(f"/admin/users/{uid}/deletion")).json()
            if state["state"] == "deleted":
                break
            await asyncio.sleep(0.1)
        assert state["state"] == "deleted", state
        assert _left(db_url, uid) == set()
        # a second DELETE of a user already gone: 404
        assert (await c.delete(f"/admin/users/{uid}")).status_code == 404
