"""Issue 42 (leftover of review item 2): the built-in tools of a turn that embed
(`memory_search`, `chat_history` in its semantic mode, `write_error`, `error_history`)
embed before the round's
transaction opens — no pooled connection is held while the embedder runs — and the
transaction then makes no embedding call.

Served by uvicorn, a real PostgreSQL, the fake Ollama in its "slow" mode for the
tool's embedding."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import pool_stats
from tests.conftest import ADMIN_TOKEN
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.served import serve
from tests.integration.embed_first import until

from .conftest import messages, new_session

EMBED_SECONDS = 1.5

CALLS = {
    "memory_search": {"query": "nginx port for the proxy", "scope": "all"},
    "chat_history": {"mode": "search", "match": "semantic", "query": "nginx port"},
    "write_error": {"tool": "nginx", "error": "bind() to 0.0.0.0:80 failed", "fix": "use 8098"},
    "error_history": {"query": "nginx bind failed"},
}


@pytest.mark.parametrize("tool", sorted(CALLS))
async def test_a_tool_call_embeds_with_no_connection_held(
    engine: AsyncEngine, turn_settings: Settings, ollama: FakeOllama, tool: str
) -> None:
    from app.asgi import create_app

    settings = dataclasses.replace(turn_settings, ollama_timeout=10.0)
    app = create_app(settings, engine=engine, background_jobs=False)
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as c:
            sid = await new_session(c)
            msgs = [
                {"role": "user", "content": "Which port should nginx listen on?"},
                {"role": "assistant", "content": "Use port 8098 for the navi proxy."},
            ]
            r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
            assert r.status_code == 201, r.text
            call = {"name": tool, "arguments": CALLS[tool]}
            # the first reply streams for a while: time to make the next embedding slow
            ollama.chat_replies += [
                ScriptedReply(" ".join(["looking"] * 8), tool_calls=[call], token_delay=0.08),
                ScriptedReply("It is 8098."),
            ]
            chats = ollama.count("/api/chat")
            turn = asyncio.ensure_future(
                c.post(f"/sessions/{sid}/turns", json={"message": {"content": "the port?"}})
            )
            await until(lambda: ollama.count("/api/chat") > chats)
            embeds = ollama.count("/api/embed")
            ollama.slow_seconds = EMBED_SECONDS
            ollama.fail("slow", paths={"/api/embed"})
            await until(lambda: ollama.count("/api/embed") > embeds)  # the tool's embedding
            await asyncio.sleep(EMBED_SECONDS / 3)
            stats = pool_stats(engine)
            assert stats is not None
            in_use = stats.in_use  # connections checked out while the embedder runs
            ollama.recover()
            r = await turn
            assert r.status_code == 200, r.text
            assert r.json()["status"] == "completed", r.json()
            assert in_use == 0, f"{in_use} connection(s) held while the tool embedded"
            # the round's transaction made no embedding call of its own
            assert ollama.count("/api/embed") == embeds + 1
            [result] = [m for m in await messages(c, sid) if m["role"] == "tool"]
            assert not result["metadata"].get("is_error"), result
            if tool == "chat_history":  # the vectors made ahead were the ones searched
                assert "match=semantic" in result["content"], result["content"]
                assert "8098" in result["content"], result["content"]


async def test_a_tool_call_whose_embedding_fails_degrades(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    """The embedder down: memory_search answers from the text side, as without one."""
    c = served
    sid = await new_session(c)
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "Which port should nginx listen on?"},
        {"role": "assistant", "content": "Use port 8098 for the navi proxy."},
    ]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    call = {"name": "memory_search", "arguments": CALLS["memory_search"]}
    ollama.chat_replies += [ScriptedReply("", tool_calls=[call]), ScriptedReply("done")]
    ollama.fail("http500", paths={"/api/embed"})
    r = await c.post(f"/sessions/{sid}/turns", json={"message": {"content": "the port?"}})
    assert r.status_code == 200, r.text
    [result] = [m for m in await messages(c, sid) if m["role"] == "tool"]
    assert not result["metadata"].get("is_error"), result
