"""One turn at a time per session (issue 42, below the cut): a second `POST /turns` while
one runs answers 409 Conflict, also from another worker process (the lease is a row in
the database, not a lock in memory); the first turn's messages are not interleaved."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from app.config import Settings
from tests.conftest import ADMIN_TOKEN, run_sql
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.served import serve

from .conftest import messages, new_session

BUSY = "a turn is already running on this session"


async def _until_chat(ollama: FakeOllama, n: int = 1) -> None:
    """Until the fake has received `n` chat calls (the first turn is in its model call)."""
    deadline = time.monotonic() + 10
    while ollama.count("/api/chat") < n:
        assert time.monotonic() < deadline, "the first turn never reached the model"
        await asyncio.sleep(0.02)


async def test_a_second_turn_on_the_session_answers_409_from_another_worker(
    served: httpx.AsyncClient,
    ollama: FakeOllama,
    turn_settings: Settings,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.asgi import create_app
    from app.db.engine import create_engine

    sid = await new_session(served)
    monkeypatch.setattr(ollama, "slow_seconds", 1.5)
    ollama.fail("slow", times=1, paths=["/api/chat"])
    ollama.chat_replies += ["first answer", "third answer"]
    first = asyncio.create_task(
        served.post(f"/sessions/{sid}/turns", json={"message": {"content": "first"}})
    )
    await _until_chat(ollama)
    # another worker process: its own app, its own engine and pool
    engine = create_engine(db_url)
    try:
        app = create_app(turn_settings, engine=engine, background_jobs=False)
        async with serve(app) as base:
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as other:
                body = {"message": {"content": "second"}}
                r = await other.post(f"/sessions/{sid}/turns", json=body)
                assert r.status_code == 409, r.text
                assert r.json() == {"error": "conflict", "detail": BUSY}
                r = await served.post(f"/sessions/{sid}/turns", json=body)  # same worker too
                assert r.status_code == 409, r.text
                done = await first
                assert done.status_code == 200, done.text
                assert done.json()["content"] == "first answer"
                # the lease is dropped with the turn: the next one runs, on either worker
                r = await other.post(f"/sessions/{sid}/turns", json={"message": {"content": "3"}})
                assert r.status_code == 200, r.text
    finally:
        await engine.dispose()
    stored = [(m["role"], m["content"]) for m in await messages(served, sid)]
    assert stored == [
        ("user", "first"),
        ("assistant", "first answer"),
        ("user", "3"),
        ("assistant", "third answer"),
    ]
    meta = (await served.get(f"/sessions/{sid}")).json()["session_metadata"]
    assert "running_turn" not in meta


async def test_a_crashed_turns_lease_expires(
    served: httpx.AsyncClient, ollama: FakeOllama, db_url: str
) -> None:
    """A process that died mid-turn leaves its lease: 409 until it expires, then a turn runs."""
    sid = await new_session(served)
    lease = "jsonb_build_object('running_turn', jsonb_build_object('id', 'dead', 'until', %s))"
    set_lease = f"update sessions set session_metadata = session_metadata || {lease} where id = %s"
    run_sql(db_url, set_lease.replace("%s", str(time.time() + 3600), 1), sid)
    body = {"message": {"content": "hello"}}
    r = await served.post(f"/sessions/{sid}/turns", json=body)
    assert r.status_code == 409, r.text
    run_sql(db_url, set_lease.replace("%s", str(time.time() - 1), 1), sid)
    r = await served.post(f"/sessions/{sid}/turns", json=body)
    assert r.status_code == 200, r.text
    meta = (await served.get(f"/sessions/{sid}")).json()["session_metadata"]
    assert "running_turn" not in meta


async def test_a_running_turn_renews_its_short_lease(
    served: httpx.AsyncClient, ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease lasts TURN_LEASE_SECONDS and the running turn renews it: a turn longer
    than the lease still refuses a second one; once it ends the lease is gone (a process
    killed mid-turn leaves one that expires within TURN_LEASE_SECONDS, `make soak`)."""
    from app.domain.agents import turn_lease

    monkeypatch.setattr(turn_lease, "TURN_LEASE_SECONDS", 0.6)
    monkeypatch.setattr(turn_lease, "TURN_LEASE_RENEW_SECONDS", 0.15)
    sid = await new_session(served)
    monkeypatch.setattr(ollama, "slow_seconds", 1.5)
    ollama.fail("slow", times=1, paths=["/api/chat"])
    ollama.chat_replies += ["first answer", "second answer"]
    first = asyncio.create_task(
        served.post(f"/sessions/{sid}/turns", json={"message": {"content": "first"}})
    )
    await _until_chat(ollama)
    await asyncio.sleep(1.0)  # past the lease's first expiry: renewed meanwhile
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "x"}})
    assert r.status_code == 409, r.text
    assert (await first).status_code == 200
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "second"}})
    assert r.status_code == 200, r.text
    meta = (await served.get(f"/sessions/{sid}")).json()["session_metadata"]
    assert "running_turn" not in meta


async def test_a_session_deleted_while_its_turn_runs_answers_404_not_500(
    served: httpx.AsyncClient, ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = await new_session(served)
    monkeypatch.setattr(ollama, "slow_seconds", 1.5)
    ollama.fail("slow", times=1, paths=["/api/chat"])
    ollama.chat_replies.append("an answer nobody keeps")
    turn = asyncio.create_task(
        served.post(f"/sessions/{sid}/turns", json={"message": {"content": "hello"}})
    )
    await _until_chat(ollama)
    r = await served.delete(f"/sessions/{sid}")
    assert r.status_code in (200, 204), r.text
    done = await turn
    assert done.status_code == 404, done.text
    assert done.json()["error"] == "not_found"
