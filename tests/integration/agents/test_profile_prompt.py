"""The profile's system prompt, sent fresh on every model call and never stored; a
session's profile switched with PATCH (its window at once); a turn names the session."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.served import serve
from tests.integration.sessions.test_auto_name import naming_tasks

from .conftest import MODEL, TURN_SETTINGS, messages, new_session

GUIDE = "You are Navi, a terse guide. Answer in one sentence."
OTHER = "You are Navi, a patient teacher who explains every step."
PROFILES = {
    "guide": {"context_window": 4096, "model": MODEL, "system_prompt": GUIDE},
    "other": {"context_window": 4096, "model": MODEL, "system_prompt_file": "other.txt"},
    "plain": {"context_window": 4096, "model": MODEL},
    "tiny": {
        "context_window": 1024,
        "compression_keep_recent": 1,
        "model": MODEL,
        "system_prompt": GUIDE,
    },
}


@dataclasses.dataclass
class Served:
    client: httpx.AsyncClient
    app: Litestar

    async def settle(self) -> None:
        await asyncio.gather(*naming_tasks(self.app), return_exceptions=True)


@pytest.fixture
async def served(engine: AsyncEngine, settings: Settings, tmp_path: Path) -> AsyncIterator[Served]:
    from app.asgi import create_app

    (tmp_path / "other.txt").write_text(OTHER + "\n")
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(PROFILES))
    s = dataclasses.replace(
        settings, profiles_file=str(path), session_auto_name_enabled=True, **TURN_SETTINGS
    )
    app = create_app(s, engine=engine, background_jobs=False)
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
            yield Served(client, app)


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


async def test_every_model_call_of_a_turn_starts_with_the_profile_prompt(
    served: Served, ollama: FakeOllama
) -> None:
    c = served.client
    sid = await new_session(c, "guide")
    search = {"name": "memory_search", "arguments": {"query": "shed"}}
    ollama.chat_replies += [ScriptedReply("", tool_calls=[search]), "It is in the garden."]
    r = await c.post(f"/sessions/{sid}/turns", json={"message": {"content": "where is it?"}})
    assert r.status_code == 200 and r.json()["rounds"] == 2, r.text
    calls = ollama.requests_for("/api/chat")[:2]  # the title call comes after
    assert len(calls) == 2
    for call in calls:
        assert call["messages"][0] == {"role": "system", "content": GUIDE}
        assert sum(m.get("content") == GUIDE for m in call["messages"]) == 1
    stored = await messages(c, sid)
    assert all(GUIDE not in m["content"] for m in stored)


async def test_prepare_leads_with_the_prompt_counted_and_never_stored(
    served: Served, ollama: FakeOllama
) -> None:
    c = served.client
    sid = await new_session(c, "guide")
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert (
        await c.post(f"/sessions/{sid}/messages", json={"messages": history})
    ).status_code == 201
    ask = {"message": {"content": "next"}}
    out = (await c.post(f"/sessions/{sid}/prepare", json=ask)).json()
    first = out["context"][0]
    assert (first["role"], first["content"]) == ("system", GUIDE)
    assert first["metadata"]["source"] == "profile_system_prompt"
    assert all(GUIDE not in m["content"] for m in await messages(c, sid))
    # counted: the same context under a profile without a prompt costs less
    r = await c.patch(f"/sessions/{sid}", json={"profile_id": "plain"})
    assert r.status_code == 200, r.text
    plain = (await c.post(f"/sessions/{sid}/prepare", json=ask)).json()
    assert all(m["content"] != GUIDE for m in plain["context"])
    assert out["tokens"] > plain["tokens"] + 5


async def test_switching_profile_changes_the_prompt_of_the_next_call(
    served: Served, ollama: FakeOllama
) -> None:
    c = served.client
    sid = await new_session(c, "guide")
    ollama.chat_replies += ["One.", "Two."]
    await c.post(f"/sessions/{sid}/turns", json={"message": {"content": "first"}})
    r = await c.patch(f"/sessions/{sid}", json={"profile_id": "other"})
    assert r.status_code == 200 and r.json()["profile_id"] == "other"
    await served.settle()  # the title call of the first exchange
    ollama.requests.clear()
    await c.post(f"/sessions/{sid}/turns", json={"message": {"content": "second"}})
    sent = ollama.requests_for("/api/chat")[0]["messages"]
    assert sent[0] == {"role": "system", "content": OTHER}
    assert all(m.get("content") != GUIDE for m in sent)


async def test_unknown_profile_is_refused_naming_it(served: Served) -> None:
    c = served.client
    sid = await new_session(c, "guide")
    r = await c.patch(f"/sessions/{sid}", json={"profile_id": "nope"})
    assert r.status_code == 422 and "'nope'" in r.text
    assert (await c.get(f"/sessions/{sid}")).json()["profile_id"] == "guide"


async def test_switching_to_a_smaller_window_compresses_at_once(
    served: Served, ollama: FakeOllama
) -> None:
    c = served.client
    sid = await new_session(c, "guide")
    history = [
        {"role": role, "content": f"{role} {i}: {words(40, f't{i}w')}"}
        for i in range(6)
        for role in ("user", "assistant")
    ]
    assert (
        await c.post(f"/sessions/{sid}/messages", json={"messages": history})
    ).status_code == 201
    await served.settle()  # the title
    ollama.chat_replies.append("- the early turns about t-words\nKEYS: t0w1")
    r = await c.patch(f"/sessions/{sid}", json={"profile_id": "tiny"})
    assert r.status_code == 200, r.text
    assert r.json()["context_token_count"] < 1024 * 0.9
    ctx = (await c.get(f"/sessions/{sid}/context")).json()["messages"]
    assert ctx[0]["is_summary"] and "t-words" in ctx[0]["content"]
    assert any(m["is_compression"] for m in await messages(c, sid))


async def test_a_turn_names_the_session(served: Served, ollama: FakeOllama) -> None:
    c = served.client
    sid = await new_session(c, "plain")
    ollama.chat_replies += ["Sheds are built of wood.", "Building a shed"]
    r = await c.post(f"/sessions/{sid}/turns", json={"message": {"content": "what is a shed?"}})
    assert r.status_code == 200, r.text
    await served.settle()
    assert (await c.get(f"/sessions/{sid}")).json()["name"] == "Building a shed"
