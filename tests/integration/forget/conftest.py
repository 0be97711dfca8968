"""Helpers of the forget tests: a checked response, a session with messages."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient


async def ok(r: Any, status: int = 200) -> Any:
    """The response's JSON, once its status is `status`."""
    assert r.status_code == status, r.text
    return r.json() if r.content else None


async def session_with(
    c: AsyncTestClient, h: dict[str, str], messages: list[dict[str, Any]]
) -> str:
    """A new `code` session of the caller `h`, holding `messages`."""
    sid = (await ok(await c.post("/sessions", json={"profile_id": "code"}, headers=h), 201))["id"]
    await ok(await c.post(f"/sessions/{sid}/messages", json={"messages": messages}, headers=h), 201)
    return str(sid)
