"""Fixtures for the context-compression tests: small-window profiles, fast LLM retries."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.domain.compression import reset_registry
from tests.conftest import ADMIN_TOKEN

WINDOW = 4096
LIMIT = WINDOW - WINDOW // 4  # output_reserve_tokens (2048) is capped at window // 4
MODEL = "fake-chat"
PROFILES = {
    "small": {"context_window": WINDOW, "compression_keep_recent": 4, "model": MODEL},
    "small2": {"context_window": WINDOW, "compression_keep_recent": 2, "model": MODEL},
}


@pytest.fixture(autouse=True)
def _fresh_calibration() -> Iterator[None]:
    reset_registry()
    yield
    reset_registry()


@pytest.fixture
def profiles_file(tmp_path: Path) -> str:
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(PROFILES))
    return str(path)


@pytest.fixture
def ctx_settings(settings: Settings, profiles_file: str) -> dict[str, Any]:
    """Overrides for make_client: the profiles above, one LLM attempt, tiny backoff."""
    return {"profiles_file": profiles_file, "llm_max_attempts": 1, "llm_backoff_initial": 0.0}


@pytest.fixture
async def cclient(make_client, settings: Settings, ctx_settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[no-untyped-def]
    async with make_client(settings, **ctx_settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


def real_tokens(messages: list[dict[str, Any]]) -> int:
    """The 'real' tokenizer of the simulated runtime LLM: 40 + chars / 3."""
    chars = sum(len(m["role"]) + len(m.get("content") or "") for m in messages)
    return 40 + math.ceil(chars / 3)


async def new_session(client: AsyncTestClient, profile_id: str = "small", headers=None) -> str:  # type: ignore[no-untyped-def]
    r = await client.post("/sessions", json={"profile_id": profile_id}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def append(client: AsyncTestClient, sid: str, messages, usage=None, headers=None) -> dict:  # type: ignore[no-untyped-def]
    body: dict[str, Any] = {"messages": messages}
    if usage is not None:
        body["usage"] = usage
    r = await client.post(f"/sessions/{sid}/messages", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


def turn(i: int, size: int = 300) -> list[dict[str, Any]]:
    words = " ".join(f"w{i}x{j}" for j in range(size // 6))
    return [
        {"role": "user", "content": f"question {i}: {words}"},
        {"role": "assistant", "content": f"answer {i}: {words}"},
    ]


async def fill(
    client: AsyncTestClient, sid: str, turns: int, size: int = 300, start: int = 0
) -> None:
    msgs = [m for i in range(start, start + turns) for m in turn(i, size)]
    await append(client, sid, msgs)


async def context(client: AsyncTestClient, sid: str) -> list[dict[str, Any]]:
    r = await client.get(f"/sessions/{sid}/context")
    assert r.status_code == 200, r.text
    return r.json()["messages"]


async def history(client: AsyncTestClient, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    before = None
    while True:
        params = {"limit": 200} | ({"before_seq": before} if before is not None else {})
        page = (await client.get(f"/sessions/{sid}/messages", params=params)).json()
        out = page["messages"] + out
        if not page["has_more"]:
            return out
        before = page["next_before_seq"]
