"""A forget is a resumable job: the user's sessions in batches, each batch its own short
transaction holding only its sessions' locks; a request answers 202 with the job's status
when it cannot finish in time, and the periodic resume finishes a job left behind."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import psycopg
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.db.engine import session_factory
from app.domain.forget.redact import text_hash
from app.domain.forget.runner import ForgetRunner, resume_stalled
from app.domain.kernel.runtime import Runtime
from tests.conftest import ADMIN_TOKEN, _libpq, new_user, run_sql
from tests.integration.forget.conftest import ok, session_with

SECRET = "K7-SECRET-91q"


async def _sessions(c: AsyncTestClient, h: dict[str, str], n: int) -> list[str]:
    sids = [
        await session_with(c, h, [{"role": "user", "content": f"note {i}: {SECRET}"}])
        for i in range(n)
    ]
    return sorted(sids, key=uuid.UUID)  # the order the job takes them in


def _holding(db_url: str, user_id: str) -> set[str]:
    """The user's sessions whose messages still hold the secret."""
    rows = run_sql(
        db_url,
        "SELECT DISTINCT session_id::text FROM session_messages WHERE user_id = %s"
        " AND content ILIKE %s",
        user_id,
        f"%{SECRET}%",
    )
    return {r[0] for r in rows or []}


def _job(db_url: str, job_id: str) -> dict[str, Any]:
    rows = run_sql(
        db_url,
        "SELECT state, text, sessions_done, after_session::text, stores_done, changed"
        " FROM forget_jobs WHERE id = %s",
        job_id,
    )
    assert rows
    keys = ("state", "text", "sessions_done", "after_session", "stores_done", "changed")
    return dict(zip(keys, rows[0], strict=True))


def _new_job(db_url: str, user_id: str, sessions: int) -> uuid.UUID:
    """A job as a request creates it, before any batch ran."""
    job_id = uuid.uuid4()
    run_sql(
        db_url,
        "INSERT INTO forget_jobs (user_id, id, text, text_sha256, via, actor, sessions_total,"
        " heartbeat) VALUES (%s, %s, %s, %s, 'api', %s, %s, %s)",
        user_id,
        job_id,
        SECRET,
        text_hash(SECRET),
        user_id,
        sessions,
        time.time(),
    )
    return job_id


async def test_a_forget_runs_in_batches_and_resumes_from_its_row(
    client: AsyncTestClient, settings: Settings, engine: Any, db_url: str
) -> None:
    uid, h = await new_user(client, "carol")
    sids = await _sessions(client, h, 5)
    job_id = str(_new_job(db_url, uid, 5))
    small = Settings(**{**settings.__dict__, "forget_batch_sessions": 2})
    runner = ForgetRunner(session_factory(engine), None, small)
    assert await runner.step(uid, uuid.UUID(job_id))  # one batch: the first two sessions
    assert _holding(db_url, uid) == set(sids[2:])
    job = _job(db_url, job_id)
    assert (job["state"], job["sessions_done"], job["after_session"]) == ("running", 2, sids[1])
    assert job["changed"]["messages"] == 2 and job["text"] == SECRET

    # the process dies here; the job's heartbeat goes stale, the periodic resume takes it
    run_sql(db_url, "UPDATE forget_jobs SET heartbeat = 0 WHERE id = %s", job_id)
    assert await resume_stalled(Runtime.of(small, session_factory(engine))) == 1
    assert _holding(db_url, uid) == set()
    job = _job(db_url, job_id)
    assert (job["state"], job["sessions_done"], job["stores_done"]) == ("done", 5, True)
    assert job["text"] is None  # erased at the end
    assert job["changed"]["messages"] == 5  # each batch counted once
    # a finished job is not taken again
    assert await resume_stalled(Runtime.of(small, session_factory(engine))) == 0


def _touch(db_url: str, user_id: str, sid: str) -> None:
    """The session row's update of an append (`message_repository.reserve`), from another
    connection, giving up after 2 s of waiting for a lock."""
    with psycopg.connect(_libpq(db_url)) as conn:
        conn.execute("SET lock_timeout = '2s'")
        conn.execute(
            "UPDATE sessions SET last_active = last_active WHERE user_id = %s AND id = %s",
            (user_id, sid),
        )


async def test_an_append_is_not_blocked_by_a_forget_of_other_sessions(
    client: AsyncTestClient, settings: Settings, engine: Any, db_url: str
) -> None:
    """One of the user's sessions is held (a long write, here another connection's lock):
    the forget waits for that session's batch only; an append to another session of the
    user goes through at once, not after the whole forget."""
    uid, h = await new_user(client, "dave")
    sids = await _sessions(client, h, 4)
    job_id = _new_job(db_url, uid, 4)
    small = Settings(**{**settings.__dict__, "forget_batch_sessions": 1})
    runner = ForgetRunner(session_factory(engine), None, small)
    with psycopg.connect(_libpq(db_url)) as held:
        held.execute(  # naming the user: on Citus a lock routes to one shard
            "SELECT 1 FROM sessions WHERE id = %s AND user_id = %s FOR UPDATE", (sids[-1], uid)
        )
        forget = asyncio.create_task(runner.run(uid, job_id))
        await asyncio.sleep(0.5)  # the forget has reached the held session
        started = time.monotonic()
        await asyncio.to_thread(_touch, db_url, uid, sids[0])
        waited = time.monotonic() - started
        assert waited < 1.5, f"the append waited {waited:.1f} s for the forget"
        assert not forget.done()  # went through while the forget was running
        assert _holding(db_url, uid) == {sids[-1]}  # the batches before it are committed
        held.rollback()
    await asyncio.wait_for(forget, 10)
    assert _holding(db_url, uid) == set()
    assert _job(db_url, str(job_id))["state"] == "done"


async def test_a_forget_that_cannot_finish_in_time_answers_202_with_its_status(
    make_client: Any, settings: Settings, db_url: str
) -> None:
    async with make_client(settings, forget_wait_seconds=0, forget_batch_sessions=2) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        uid, h = await new_user(c, "erin")
        _, other = await new_user(c, "frank")
        await _sessions(c, h, 3)
        r = await c.post("/memory/forget", json={"text": SECRET}, headers=h)
        assert r.status_code == 202, r.text
        job = r.json()
        assert job["state"] in ("running", "done")
        assert job["status_url"] == f"/memory/forget/jobs/{job['job_id']}"
        assert job["progress"]["sessions_total"] == 3
        assert SECRET not in r.text
        for _ in range(100):
            job = await ok(await c.get(job["status_url"], headers=h))
            if job["state"] == "done":
                break
            await asyncio.sleep(0.1)
        assert job["state"] == "done", job
        assert job["progress"] == {"sessions_done": 3, "sessions_total": 3, "stores_done": True}
        assert job["result"]["changed"]["messages"] == 3 and job["result"]["total"] == 3
        assert job["finished_at"] is not None
        assert _holding(db_url, uid) == set()
        assert run_sql(db_url, "SELECT text FROM forget_jobs WHERE user_id = %s", uid) == [(None,)]
        # another user's job is not found; an admin reads it under the user
        assert (await c.get(job["status_url"], headers=other)).status_code == 404
        r = await c.get(f"/admin/users/{uid}/forget/jobs/{job['job_id']}")
        assert r.status_code == 200 and r.json()["state"] == "done"
