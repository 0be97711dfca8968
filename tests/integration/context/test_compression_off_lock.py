"""Compression under a slow or failing summary model (issue 42, review item 2): the
summary is made with no transaction, row lock or pooled connection held, after the
append it follows has committed.

Served by uvicorn (real concurrent HTTP requests), a real PostgreSQL, the fake Ollama in
its "slow" mode for the summary call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import create_engine
from app.domain.compression import Msg
from app.domain.kernel.profiles import Profile
from tests.conftest import ADMIN_TOKEN
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.served import serve

from .conftest import MODEL, WINDOW, turn

SUMMARY_SECONDS = 3.0
CUT = WINDOW // 4 + 10  # a prompt_eval_count that says the prompt was cut: compress now


@asynccontextmanager
async def served(
    engine: AsyncEngine, settings: Settings, **overrides: Any
) -> AsyncIterator[httpx.AsyncClient]:
    from app.asgi import create_app

    app = create_app(
        dataclasses.replace(settings, **overrides), engine=engine, background_jobs=False
    )
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


async def filled_session(c: httpx.AsyncClient, turns: int = 6) -> str:
    r = await c.post("/sessions", json={"profile_id": "small"})
    assert r.status_code == 201, r.text
    sid = str(r.json()["id"])
    msgs = [m for i in range(turns) for m in turn(i)]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    return sid


def compress_after(c: httpx.AsyncClient, sid: str) -> asyncio.Task[httpx.Response]:
    """A reply appended with a usage report that forces the post-turn compression."""
    body = {"messages": turn(7), "usage": {"model": MODEL, "prompt_eval_count": CUT}}
    return asyncio.ensure_future(c.post(f"/sessions/{sid}/messages", json=body))


async def until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def slow_summaries(ollama: FakeOllama, n: int) -> int:
    """The next `n` chat calls (the summaries) take SUMMARY_SECONDS; the chat calls so far."""
    ollama.slow_seconds = SUMMARY_SECONDS
    ollama.fail("slow", times=n, paths={"/api/chat"})
    return ollama.count("/api/chat")


async def test_writers_of_the_session_do_not_wait_for_a_slow_post_turn_summary(
    engine: AsyncEngine, settings: Settings, ctx_settings: dict[str, Any], ollama: FakeOllama
) -> None:
    async with served(engine, settings, **ctx_settings) as c:
        sid = await filled_session(c)
        before = slow_summaries(ollama, 1)
        compressing = compress_after(c, sid)
        await until(lambda: ollama.count("/api/chat") > before)  # the summary is under way
        started = time.monotonic()
        renamed = await c.patch(f"/sessions/{sid}", json={"name": "renamed meanwhile"})
        appended = await c.post(
            f"/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "appended meanwhile"}]},
        )
        waited = time.monotonic() - started
        assert renamed.status_code == 200, renamed.text
        assert appended.status_code == 201, appended.text
        # they never waited on the row lock of the compressing request
        assert waited < SUMMARY_SECONDS / 2, waited
        assert not compressing.done()
        res = await compressing
        assert res.status_code == 201, res.text
        assert [e["type"] for e in res.json()["events"]] == [
            "CompressionStarted",
            "ContextCompressed",
        ]
        ctx = (await c.get(f"/sessions/{sid}/context")).json()["messages"]
        assert ctx[0]["is_summary"]
        assert any(m["content"] == "appended meanwhile" for m in ctx)  # kept, not demoted
        s = (await c.get(f"/sessions/{sid}")).json()
        assert s["name"] == "renamed meanwhile"
        assert s["session_metadata"]["last_compression"]["reason"] == "postturn"


async def test_slow_compressions_leave_a_small_pool_free_for_other_requests(
    db_url: str, settings: Settings, ctx_settings: dict[str, Any], ollama: FakeOllama
) -> None:
    """Four compressions waiting on the summary model, a pool of two connections: the
    session list still answers (before: 503, no connection free in time)."""
    small = dataclasses.replace(
        settings, db_pool_size=2, db_max_overflow=0, db_pool_timeout_seconds=1.0
    )
    engine = create_engine(db_url, small)
    try:
        async with served(engine, small, **ctx_settings) as c:
            sids = [await filled_session(c) for _ in range(4)]
            before = slow_summaries(ollama, len(sids))
            compressing = [compress_after(c, sid) for sid in sids]
            await until(lambda: ollama.count("/api/chat") >= before + 2)
            for _ in range(3):  # past the pool timeout
                r = await c.get("/sessions")
                assert r.status_code == 200, r.text
                await asyncio.sleep(0.5)
            assert ollama.count("/api/chat") == before + len(sids)  # all four waiting
            done = await asyncio.gather(*compressing)
            for r in done:
                assert r.status_code == 201, r.text
                assert r.json()["events"][-1]["type"] == "ContextCompressed"
    finally:
        await engine.dispose()


async def test_a_turn_keeps_its_answer_when_the_post_turn_compression_fails(
    engine: AsyncEngine, settings: Settings, ctx_settings: dict[str, Any], ollama: FakeOllama
) -> None:
    async def broken(messages: Sequence[Msg], *, profile: Profile, window: int) -> Any:
        raise RuntimeError("the compression failed")

    async with served(engine, settings, **ctx_settings) as c:
        sid = await filled_session(c, turns=3)
        c.app.state.runtime.summarizer = broken  # type: ignore[attr-defined]
        # the real prompt size the model reports is past the threshold: compress after
        ollama.chat_replies.append(ScriptedReply("the final answer", prompt_eval_count=3900))
        r = await c.post(f"/sessions/{sid}/turns", json={"message": {"content": "and so?"}})
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "completed"
        assert r.json()["content"] == "the final answer"
        page = (await c.get(f"/sessions/{sid}/messages", params={"limit": 5})).json()
        assert [(m["role"], m["content"]) for m in page["messages"][-2:]] == [
            ("user", "and so?"),
            ("assistant", "the final answer"),
        ]
        s = (await c.get(f"/sessions/{sid}")).json()
        assert "last_compression" not in s["session_metadata"]  # it failed: nothing applied
