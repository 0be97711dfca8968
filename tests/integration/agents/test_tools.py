"""The built-in tool registry: every tool through `run_tool` against the real database,
answering what its `/tools/*` endpoint answers (one implementation behind both)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.db.engine import transaction
from app.domain.agents.tools import (
    BUILTIN_TOOLS,
    ToolContext,
    ToolResult,
    ollama_tool_defs,
    run_tool,
)
from app.domain.kernel.principal import Principal
from tests.conftest import new_user

NAMES = (
    "memory",
    "memory_search",
    "chat_history",
    "write_error",
    "error_history",
    "scratchpad_read",
    "scratchpad_write",
    "image_view",
    "share_file",
    "content_publish",
)


async def _tool(
    client: AsyncTestClient, who: Principal, sid: str | None, name: str, args: dict[str, Any]
) -> ToolResult:
    runtime = client.app.state.runtime
    async with transaction(runtime.session_factory) as db:
        ctx = ToolContext(db, runtime, who, uuid.UUID(sid) if sid else None)
        return await run_tool(name, ctx, args)


@pytest.fixture
async def alice(client: AsyncTestClient) -> tuple[Principal, dict[str, str], str]:
    uid, headers = await new_user(client, "alice")
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=headers)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    msgs = [
        {"role": "user", "content": "Which port should nginx listen on?"},
        {"role": "assistant", "content": "Use port 8098 for the navi proxy."},
    ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=headers)
    assert r.status_code == 201, r.text
    return Principal(id=uid, name="alice"), headers, sid


def test_registry_lists_the_ten_tools_for_ollama() -> None:
    assert tuple(BUILTIN_TOOLS) == NAMES
    defs = ollama_tool_defs()
    assert [d["function"]["name"] for d in defs] == list(NAMES)
    for d in defs:
        assert d["type"] == "function"
        assert d["function"]["parameters"]["type"] == "object"
        assert len(d["function"]["description"]) > 40
    assert [d["function"]["name"] for d in ollama_tool_defs(["memory"])] == ["memory"]
    with pytest.raises(KeyError):
        ollama_tool_defs(["shell"])


async def test_unknown_tool_is_a_key_error(client, alice) -> None:  # type: ignore[no-untyped-def]
    who, _, sid = alice
    with pytest.raises(KeyError):
        await _tool(client, who, sid, "shell", {})


async def test_memory_tool_same_as_http(client, alice) -> None:  # type: ignore[no-untyped-def]
    who, headers, sid = alice
    save = {"action": "save", "category": "prefs", "key": "editor", "value": "helix"}
    got = await _tool(client, who, sid, "memory", save)
    assert not got.is_error and got.text.startswith("Saved [prefs] editor → helix")
    http = await client.post(
        "/tools/memory", json={"action": "search", "query": "editor"}, headers=headers
    )
    tool = await _tool(client, who, sid, "memory", {"action": "search", "query": "editor"})
    assert tool.text == http.json()["text"] and "helix" in tool.text
    assert tool.data is not None and tool.data["facts"][0]["key"] == "editor"
    bad = await _tool(client, who, sid, "memory", {"action": "save", "key": "x"})
    assert bad.is_error and bad.text == "category: required for action 'save'"
    typed = await _tool(
        client, who, sid, "memory", {"action": "search", "query": "x", "limit": 999}
    )
    assert typed.is_error and typed.text.startswith("limit: Expected `int` <= 50")
    unknown = await _tool(client, who, sid, "memory", {"action": "fly"})
    assert unknown.is_error and unknown.text == "action: Invalid enum value 'fly'"


async def test_memory_search_and_chat_history(client, alice) -> None:  # type: ignore[no-untyped-def]
    who, headers, sid = alice
    args = {"query": "nginx port", "scope": "all", "k": 3}
    tool = await _tool(client, who, sid, "memory_search", args)
    http = await client.post(
        "/tools/memory_search", json=args, headers={**headers, "X-Navi-Session-Id": sid}
    )
    assert not tool.is_error and tool.text == http.json()["text"]
    empty = await _tool(client, who, sid, "memory_search", {"query": "  "})
    assert empty.is_error and empty.text == "query: required — what to look for"

    hist = await _tool(client, who, sid, "chat_history", {"query": "8098", "mode": "search"})
    assert not hist.is_error and "8098" in hist.text
    assert hist.data is not None and hist.data["session_id"] == sid
    http = await client.post(
        "/tools/chat_history",
        json={"query": "8098", "mode": "search", "session_id": sid},
        headers=headers,
    )
    assert hist.text == http.json()["text"]
    long = await _tool(client, who, sid, "chat_history", {"query": "x" * 2001})
    assert long.is_error and long.text == "query: at most 2000 characters"


async def test_session_tools_need_a_session(client, alice) -> None:  # type: ignore[no-untyped-def]
    who, _, _ = alice
    for name in ("chat_history", "scratchpad_read", "scratchpad_write"):
        got = await _tool(client, who, None, name, {"query": "x", "section": "s", "value": "v"})
        assert (
            got.is_error
            and got.text == f"{name}: needs the current session, and this call has none"
        )


async def test_another_users_session_is_not_found(client, alice) -> None:  # type: ignore[no-untyped-def]
    _, _, sid = alice
    bob_id, _ = await new_user(client, "bob")
    bob = Principal(id=bob_id, name="bob")
    for name, args in (
        ("chat_history", {"mode": "recent"}),
        ("memory_search", {"query": "port"}),
        ("scratchpad_read", {}),
        ("scratchpad_write", {"section": "plan", "value": "steal"}),
    ):
        got = await _tool(client, bob, sid, name, args)
        assert got.is_error and got.text == f"no session {sid}", (name, got)


async def test_error_memory_tools(client, alice) -> None:  # type: ignore[no-untyped-def]
    who, headers, sid = alice
    write = {"tool": "pip", "error": "No matching distribution for torch", "fix": "use 3.11"}
    got = await _tool(client, who, sid, "write_error", write)
    assert not got.is_error and got.text.startswith("write_error: recorded [pip]")
    assert got.data is not None and got.data["created"] is True
    hist = await _tool(client, who, sid, "error_history", {"query": "No matching distribution"})
    http = await client.post(
        "/tools/error_history", json={"query": "No matching distribution"}, headers=headers
    )
    assert not hist.is_error and "hits 1," in hist.text and "use 3.11" in hist.text
    # the same text, but for the hit the tool's own call counted
    assert hist.text.replace("hits 1,", "hits 2,") == http.json()["text"]
    none = await _tool(client, who, sid, "error_history", {})
    assert none.is_error and none.text == "query: required — the error to look up (or a tool)"
    big = await _tool(client, who, sid, "write_error", {**write, "fix": "x" * 20_001})
    assert big.is_error and big.text == "fix: at most 20000 characters"


async def test_scratchpad_tools(client, alice) -> None:  # type: ignore[no-untyped-def]
    who, headers, sid = alice
    empty = await _tool(client, who, sid, "scratchpad_read", {})
    assert empty.text == "The scratchpad of this session is empty."
    wrote = await _tool(client, who, sid, "scratchpad_write", {"section": "plan", "value": "1. a"})
    assert not wrote.is_error and wrote.text == "Saved scratchpad section [plan] (4 characters)."
    r = await client.get(f"/sessions/{sid}/scratchpad/plan", headers=headers)
    assert r.json()["value"] == "1. a"  # committed, and the REST route sees it
    one = await _tool(client, who, sid, "scratchpad_read", {"section": "plan"})
    assert one.text == "[plan]\n1. a" and one.data is not None and one.data["total"] == 1
    listed = await _tool(client, who, sid, "scratchpad_read", {})
    assert listed.text == "1 scratchpad section(s):\n- [plan] 1. a"
    missing = await _tool(client, who, sid, "scratchpad_read", {"section": "todo"})
    assert missing.is_error and missing.text == "no scratchpad section 'todo'"
    big = await _tool(
        client, who, sid, "scratchpad_write", {"section": "plan", "value": "x" * (64 * 1024 + 1)}
    )
    assert big.is_error and big.text == "value: at most 65536 characters"
    nameless = await _tool(client, who, sid, "scratchpad_write", {"section": " ", "value": "v"})
    assert nameless.is_error and nameless.text == "section: 1-200 characters"
