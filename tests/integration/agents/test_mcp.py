"""The MCP server at /mcp, driven by the official SDK's own client over real HTTP (the
app under uvicorn on 127.0.0.1): list the tools, call each, another user's session
refused, no token → 401."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp.types as mt
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy.ext.asyncio import AsyncEngine

from app.asgi import create_app
from app.config import Settings
from app.domain.agents.tools import BUILTIN_TOOLS
from tests.conftest import ADMIN_TOKEN
from tests.fakes.served import serve
from tests.unit.compression.images import png


@dataclasses.dataclass
class Navi:
    base: str
    alice: dict[str, str]
    bob: dict[str, str]
    sid: str


async def _user(
    http: httpx.AsyncClient,
    name: str,
    headers: dict[str, str] | None = None,
    permissions: list[str] | None = None,
) -> dict[str, str]:
    r = await http.post(
        "/admin/users", json={"name": name, "permissions": permissions or []}, headers=headers
    )
    assert r.status_code == 201, r.text
    r = await http.post(
        f"/admin/users/{r.json()['id']}/tokens", json={"name": "mcp"}, headers=headers
    )
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


@pytest.fixture
async def navi(engine: AsyncEngine, settings: Settings) -> AsyncIterator[Navi]:
    app = create_app(settings, engine=engine, background_jobs=False)
    async with serve(app) as base:
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=admin, timeout=30) as http:
            alice, bob = await _user(http, "alice"), await _user(http, "bob")
            r = await http.post("/sessions", json={"profile_id": "default"}, headers=alice)
            sid = r.json()["id"]
            msgs = [{"role": "user", "content": "The staging database listens on port 6543."}]
            r = await http.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=alice)
            assert r.status_code == 201, r.text
            yield Navi(base, alice, bob, sid)


@asynccontextmanager
async def mcp_session(navi: Navi, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{navi.base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content)


async def test_lists_the_registry_tools(navi: Navi) -> None:
    async with mcp_session(navi, navi.alice) as mcp:
        tools = (await mcp.list_tools()).tools
    assert [t.name for t in tools] == list(BUILTIN_TOOLS)
    by_name = {t.name: t for t in tools}
    for name, spec in BUILTIN_TOOLS.items():
        assert by_name[name].description == spec.description
        assert by_name[name].input_schema["required"] == spec.parameters["required"]
    assert "session_id" in by_name["chat_history"].input_schema["properties"]
    # a saved value's version records the session it was said in
    assert "session_id" in by_name["memory"].input_schema["properties"]
    assert "session_id" not in by_name["write_error"].input_schema["properties"]


async def test_calls_every_tool_as_the_caller(navi: Navi) -> None:
    sid = navi.sid
    calls: list[tuple[str, dict[str, Any], str]] = [
        (
            "memory",
            {"action": "save", "category": "prefs", "key": "shell", "value": "fish"},
            "Saved [prefs] shell → fish",
        ),
        ("memory", {"action": "list"}, "Categories with saved facts: prefs (1)"),
        ("memory_search", {"query": "shell", "scope": "facts"}, "fish"),
        ("chat_history", {"query": "6543", "session_id": sid}, "6543"),
        (
            "write_error",
            {"tool": "psql", "error": "connection refused", "fix": "port 6543"},
            "write_error: recorded [psql]",
        ),
        ("error_history", {"query": "connection refused"}, "port 6543"),
        (
            "scratchpad_write",
            {"section": "plan", "value": "migrate staging", "session_id": sid},
            "Saved scratchpad section [plan]",
        ),
        ("scratchpad_read", {"section": "plan", "session_id": sid}, "migrate staging"),
    ]
    async with mcp_session(navi, navi.alice) as mcp:
        for name, args, expected in calls:
            result = await mcp.call_tool(name, args)
            assert not result.is_error, (name, _text(result))
            assert expected in _text(result), (name, _text(result))
        bad = await mcp.call_tool("memory", {"action": "save", "key": "x"})
        assert bad.is_error and _text(bad) == "category: required for action 'save'"
        none = await mcp.call_tool("scratchpad_read", {})
        assert none.is_error and "needs the current session" in _text(none)
    # committed, and alice's only: the REST API sees the fact and the section
    async with httpx.AsyncClient(base_url=navi.base, timeout=30) as http:
        r = await http.get("/memory/facts", headers=navi.alice)
        assert [f["key"] for f in r.json()["items"]] == ["shell"]
        r = await http.get("/memory/facts", headers=navi.bob)
        assert r.json()["items"] == []
        r = await http.get(f"/sessions/{sid}/scratchpad/plan", headers=navi.alice)
        assert r.json()["value"] == "migrate staging"


async def test_memory_saves_record_their_session_and_history_lists_them(navi: Navi) -> None:
    async with mcp_session(navi, {**navi.alice, "X-Navi-Session-Id": navi.sid}) as mcp:
        for value in ("5432", "6543"):
            args = {"action": "save", "category": "db", "key": "port", "value": value}
            assert not (await mcp.call_tool("memory", args)).is_error
        result = await mcp.call_tool("memory", {"action": "history", "key": "port"})
    assert not result.is_error
    assert "port = 6543" in _text(result) and "port = 5432" in _text(result)
    async with httpx.AsyncClient(base_url=navi.base, timeout=30) as http:
        fact = (await http.get("/memory/facts", headers=navi.alice)).json()["items"][0]
        r = await http.get(f"/memory/facts/{fact['id']}/history", headers=navi.alice)
    # the session and its newest user message (the fixture's one message: seq 0)
    assert [(v["value"], v["session_id"], v["message_seq"]) for v in r.json()["items"]] == [
        ("6543", navi.sid, 0),
        ("5432", navi.sid, 0),
    ]


async def test_session_from_the_header(navi: Navi) -> None:
    async with mcp_session(navi, {**navi.alice, "X-Navi-Session-Id": navi.sid}) as mcp:
        result = await mcp.call_tool("chat_history", {"mode": "recent"})
    assert not result.is_error and "6543" in _text(result)


async def test_another_users_session_is_refused(navi: Navi) -> None:
    async with mcp_session(navi, navi.bob) as mcp:
        for name in ("chat_history", "scratchpad_read", "memory_search"):
            result = await mcp.call_tool(name, {"query": "port", "session_id": navi.sid})
            assert result.is_error and _text(result) == f"no session {navi.sid}", name
        odd = await mcp.call_tool("chat_history", {"session_id": "not-a-uuid"})
        assert odd.is_error and _text(odd) == "session_id: not a session id"
    async with mcp_session(navi, {**navi.bob, "X-Navi-Session-Id": navi.sid}) as mcp:
        result = await mcp.call_tool("scratchpad_write", {"section": "x", "value": "y"})
        assert result.is_error and _text(result) == f"no session {navi.sid}"


async def test_no_token_or_a_bad_one_is_401(navi: Navi) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx.AsyncClient(base_url=navi.base, timeout=30) as http:
        for headers in ({}, {"Authorization": "Bearer navi_not_a_token"}, {"Authorization": "x"}):
            r = await http.post("/mcp", json=body, headers=headers)
            assert r.status_code == 401, (headers, r.text)
            assert r.json()["error"] == "unauthorized"
            assert r.headers["www-authenticate"].startswith("Bearer")


async def test_a_plain_json_rpc_post_works(navi: Navi) -> None:
    """Stateless: one POST, no initialize, JSON back (what the role matrix sends)."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "chat_history", "arguments": {"query": "6543", "session_id": navi.sid}},
    }
    headers = {**navi.alice, "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=navi.base, timeout=30) as http:
        r = await http.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert result["isError"] is False and "6543" in result["content"][0]["text"]


async def test_get_has_no_event_stream_to_open(navi: Navi) -> None:
    """Stateless, JSON answers: there is no server-to-client stream for a GET to open
    (the SDK would hold one open forever, sending nothing) nor a session to DELETE: 405,
    in the house error body; an anonymous request is still a 401."""
    async with httpx.AsyncClient(base_url=navi.base, timeout=10) as http:
        for method in ("GET", "DELETE", "PUT"):
            headers = {**navi.alice, "Accept": "text/event-stream"}
            r = await http.request(method, "/mcp", headers=headers)
            assert r.status_code == 405, (method, r.text)
            assert r.headers["allow"] == "POST" and r.json()["error"] == "method_not_allowed"
        r = await http.get("/mcp", headers={"Accept": "text/event-stream"})
        assert r.status_code == 401


async def test_file_tools_image_content_and_the_editor_check(navi: Navi) -> None:
    """image_view answers MCP image content; share_file needs an editor of the session
    (a reader of every session may publish, not share), as the HTTP endpoints do."""
    image = png(32, 32)
    b64 = base64.b64encode(image).decode()
    async with httpx.AsyncClient(base_url=navi.base, timeout=30) as http:
        msg = {"role": "user", "content": "see this", "images": [b64]}
        r = await http.post(
            f"/sessions/{navi.sid}/messages", json={"messages": [msg]}, headers=navi.alice
        )
        assert r.status_code == 201, r.text
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        reader = await _user(http, "auditor", admin, ["navi.sessions.read_all"])
    path = f"session_files/{navi.sid}/image_1.png"
    async with mcp_session(navi, {**navi.alice, "X-Navi-Session-Id": navi.sid}) as mcp:
        seen = await mcp.call_tool("image_view", {"path": path})
        assert not seen.is_error, _text_only(seen)
        text, picture = seen.content
        assert isinstance(picture, mt.ImageContent)
        assert picture.mime_type == "image/png" and picture.data == b64
        assert path in text.text  # type: ignore[union-attr]
        missing = await mcp.call_tool("image_view", {"path": "image_7.png"})
        assert missing.is_error and "no image 'image_7.png'" in _text_only(missing)
        card = await mcp.call_tool("content_publish", {"filename": "image_1.png"})
        assert not card.is_error and card.structured_content["type"] == "image"
        share = await mcp.call_tool("share_file", {"path": "/etc/hostname"})
        assert share.is_error and "SHARE_FILE_ROOTS is empty" in _text_only(share)
    async with mcp_session(navi, {**reader, "X-Navi-Session-Id": navi.sid}) as mcp:
        card = await mcp.call_tool("content_publish", {"filename": "image_1.png"})
        assert not card.is_error, _text_only(card)
        share = await mcp.call_tool("share_file", {"path": "/etc/hostname"})
        assert share.is_error and "may change it" in _text_only(share)
    async with mcp_session(navi, {**navi.bob, "X-Navi-Session-Id": navi.sid}) as mcp:
        other = await mcp.call_tool("image_view", {"path": path})
        assert other.is_error and _text_only(other) == f"no session {navi.sid}"


def _text_only(result: Any) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, mt.TextContent))
