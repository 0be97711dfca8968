"""Fixtures of the turn-loop tests: small-window profiles, the app served by uvicorn
(streaming and disconnects need a real server), SSE parsing."""

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
from tests.conftest import ADMIN_TOKEN
from tests.fakes.served import serve
from tests.integration.context.conftest import _fresh_calibration  # noqa: F401 (autouse)

WINDOW = 4096
MODEL = "fake-chat"
PROFILES = {
    "small": {"context_window": WINDOW, "compression_keep_recent": 2, "model": MODEL},
    "notools": {"context_window": WINDOW, "model": MODEL, "tools": []},
}
TURN_SETTINGS = {"llm_max_attempts": 1, "llm_backoff_initial": 0.0, "turn_max_rounds": 4}


@pytest.fixture
def turn_settings(settings: Settings, tmp_path: Path) -> Settings:
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(PROFILES))
    return dataclasses.replace(settings, profiles_file=str(path), **TURN_SETTINGS)


@pytest.fixture
async def served(engine: AsyncEngine, turn_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app under uvicorn and a client with the admin token."""
    from app.asgi import create_app

    app = create_app(turn_settings, engine=engine, background_jobs=False)
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
            yield client


async def new_session(client: httpx.AsyncClient, profile: str = "small", headers=None) -> str:  # type: ignore[no-untyped-def]
    r = await client.post("/sessions", json={"profile_id": profile}, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``(event name, data)`` of each Server-Sent Event; the name is also in the data."""
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        data = json.loads(lines["data"])
        assert data["event"] == lines["event"]
        out.append((lines["event"], data))
    return out


async def messages(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await client.get(f"/sessions/{sid}/messages", params={"limit": 200})
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])
