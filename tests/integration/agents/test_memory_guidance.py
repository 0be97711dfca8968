"""The memory usage guidelines (seed 000, "Memory usage guidelines") reach the model on
every call: in the tool descriptions, and as the built-in system prompt of a profile
that has none of its own — which a profile's own prompt replaces whole."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.domain.kernel.profiles import memory_guidance
from tests.conftest import ADMIN_TOKEN
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.served import serve

from .conftest import MODEL, TURN_SETTINGS, new_session

OWN = "You are Navi, a terse guide. Answer in one sentence."
PROFILES = {
    "plain": {"context_window": 4096, "model": MODEL},
    "own": {"context_window": 4096, "model": MODEL, "system_prompt": OWN},
    "notools": {"context_window": 4096, "model": MODEL, "tools": []},
}
# What the seed's guidelines add to "look before saying you do not remember".
GUIDELINES = ("start of every session", "personal", "environment", "newer fact", "forget")


@pytest.fixture
async def client(
    engine: AsyncEngine, settings: Settings, tmp_path: Path
) -> AsyncIterator[httpx.AsyncClient]:
    from app.asgi import create_app

    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(PROFILES))
    s = dataclasses.replace(
        settings, profiles_file=str(path), memory_guidance_enabled=True, **TURN_SETTINGS
    )
    app = create_app(s, engine=engine, background_jobs=False)
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as c:
            yield c


def _tool(call: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t["function"] for t in call["tools"] if t["function"]["name"] == name)


async def test_every_model_call_carries_the_guidelines(
    client: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    guidance = memory_guidance()
    for words in GUIDELINES:
        assert words in guidance
    sid = await new_session(client, "plain")
    search = {"name": "memory_search", "arguments": {"query": "home city"}}
    ollama.chat_replies += [ScriptedReply("", tool_calls=[search]), "You live in Lisbon."]
    r = await client.post(
        f"/sessions/{sid}/turns", json={"message": {"content": "any good cafés near me?"}}
    )
    assert r.status_code == 200 and r.json()["rounds"] == 2, r.text
    calls = ollama.requests_for("/api/chat")
    assert len(calls) == 2
    for call in calls:
        assert call["messages"][0] == {"role": "system", "content": guidance}
        assert sum(m.get("content") == guidance for m in call["messages"]) == 1
        described = _tool(call, "memory_search")["description"]
        assert "start of every session" in described and "personal" in described
        assert "verify before assuming" in described and "environment" in described
        assert "only when the user asks" in _tool(call, "memory")["description"]
    stored = (await client.get(f"/sessions/{sid}/messages")).json()["messages"]
    assert all(guidance not in m["content"] for m in stored)


async def test_a_profile_prompt_replaces_the_guidance(
    client: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    guidance = memory_guidance()
    ask = {"message": {"content": "where did we leave the shed plans?"}}
    contexts = {}
    for profile in PROFILES:
        sid = await new_session(client, profile)
        r = await client.post(f"/sessions/{sid}/prepare", json=ask)
        assert r.status_code == 200, r.text
        contexts[profile] = r.json()
    lead = contexts["plain"]["context"][0]
    assert (lead["role"], lead["content"]) == ("system", guidance)
    assert lead["metadata"]["source"] == "profile_system_prompt"
    # counted in the price: the same context without it costs less
    assert contexts["plain"]["tokens"] > contexts["notools"]["tokens"] + 100
    own = contexts["own"]["context"]
    assert (own[0]["role"], own[0]["content"]) == ("system", OWN)
    assert all("start of every session" not in m["content"] for m in own)
    # no memory_search to guide: no guidance
    assert all(m["role"] != "system" for m in contexts["notools"]["context"])

    sid = await new_session(client, "own")
    ollama.chat_replies.append("In the garden.")
    r = await client.post(f"/sessions/{sid}/turns", json=ask)
    assert r.status_code == 200, r.text
    sent = ollama.requests_for("/api/chat")[-1]["messages"]
    assert sent[0] == {"role": "system", "content": OWN}
    assert all(guidance != m.get("content") for m in sent)
