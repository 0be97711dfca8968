"""A NUL (U+0000) anywhere in a request: free text is kept with U+FFFD (a message is
marked `metadata.sanitized`), an identifier, key or parameter is a 422 naming it.
Never a 500 (PostgreSQL text and jsonb cannot hold a NUL)."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from app.config import Settings

NUL = "a\u0000b"
KEPT = "a\ufffdb"


async def _session(client: AsyncTestClient) -> str:
    r = await client.post("/sessions", json={"profile_id": "default", "name": "s"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _history(client: AsyncTestClient, sid: str) -> list[dict[str, Any]]:
    r = await client.get(f"/sessions/{sid}/messages")
    assert r.status_code == 200, r.text
    return r.json()["messages"]


async def test_nul_in_every_message_field_is_kept_and_the_message_marked(
    client: AsyncTestClient,
) -> None:
    sid = await _session(client)
    call = {"id": "call_1", "function": {"name": "run", "arguments": {"cmd": NUL, NUL: 1}}}
    messages = [
        {"role": "user", "content": "clean"},
        {"role": "user", "content": NUL, "metadata": {"note": NUL, NUL: "key"}},
        {"role": "assistant", "content": "", "thinking": NUL, "tool_calls": [call]},
        {"role": "tool", "content": NUL, "tool_call_id": NUL, "name": NUL, "files": [NUL]},
    ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text  # the whole turn is stored, nothing refused

    clean, user, assistant, tool = await _history(client, sid)
    assert "sanitized" not in clean["metadata"]
    assert user["content"] == KEPT
    assert user["metadata"] == {"note": KEPT, KEPT: "key", "sanitized": True}
    assert assistant["thinking"] == KEPT and assistant["metadata"] == {"sanitized": True}
    assert assistant["tool_calls"][0]["function"]["arguments"] == {"cmd": KEPT, KEPT: 1}
    assert tool["content"] == KEPT and tool["tool_call_id"] == KEPT and tool["name"] == KEPT
    assert tool["files"] == [KEPT] and tool["metadata"]["sanitized"] is True
    # The LLM copy is the same row.
    ctx = (await client.get(f"/sessions/{sid}/context")).json()["messages"]
    assert [m["content"] for m in ctx][-3:] == [KEPT, "", KEPT]


async def test_nul_in_free_text_of_memory_and_tools_is_kept(client: AsyncTestClient) -> None:
    sid = await _session(client)
    r = await client.post(
        "/memory/facts",
        json={"category": "c", "key": "k", "value": NUL, "source_context": NUL},
    )
    assert r.status_code == 201, r.text
    assert r.json()["value"] == KEPT and r.json()["source_context"] == KEPT
    r = await client.post(
        "/tools/memory", json={"action": "save", "category": "c", "key": "k2", "value": NUL}
    )
    assert r.status_code == 200 and r.json()["fact"]["value"] == KEPT, r.text

    r = await client.put("/memory/summary", json={"content": NUL})
    assert r.status_code == 200 and r.json()["content"] == KEPT, r.text
    assert (await client.get("/memory/summary")).json()["content"] == KEPT

    r = await client.put(f"/sessions/{sid}/scratchpad/plan", json={"value": NUL})
    assert r.status_code == 200, r.text
    assert (await client.get(f"/sessions/{sid}/scratchpad/plan")).json()["value"] == KEPT

    r = await client.post(f"/sessions/{sid}/planning", json={"entry": {"step": NUL}})
    assert r.status_code == 204, r.text
    logs = (await client.get(f"/sessions/{sid}/planning")).json()["planning_logs"]
    assert logs == [{"step": KEPT, "sanitized": True}]

    r = await client.post(
        "/tools/write_error", json={"tool": "sh", "error": NUL, "fix": NUL, "context": NUL}
    )
    assert r.status_code == 200, r.text
    entry = r.json()["entry"]
    assert (entry["error"], entry["fix"], entry["context"]) == (KEPT, KEPT, KEPT)
    r = await client.post("/tools/error_history", json={"query": NUL})
    assert r.status_code == 200 and r.json()["query"] == KEPT, r.text

    await client.post(
        f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": NUL}]}
    )
    r = await client.post("/tools/chat_history", json={"query": NUL, "session_id": sid})
    assert r.status_code == 200, r.text
    assert r.json()["query"] == KEPT and r.json()["hits"][0]["content"] == KEPT


async def test_a_search_query_that_is_only_a_nul_is_searched_not_a_500(
    client: AsyncTestClient,
) -> None:
    """A query with no word in it reaches the text searches whole (no tokens to pick),
    so a lone NUL must be replaced before any of them sees it."""
    sid = await _session(client)
    await client.post(
        f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "x"}]}
    )
    await client.post("/memory/facts", json={"category": "c", "key": "k", "value": "v"})
    for query in ("\u0000", " \u0000 ", "\u0000\u0000"):
        kept = query.replace("\u0000", "\ufffd")
        for scope in ("all", "facts", "sketches", "raw", "errors"):
            r = await client.post("/memory/search", json={"query": query, "scope": scope})
            assert r.status_code == 200, (scope, r.text)
            assert r.json()["query"] == kept
        r = await client.post("/tools/memory_search", json={"query": query})
        assert r.status_code == 200 and r.json()["query"] == kept, r.text
        r = await client.post("/tools/error_history", json={"query": query})
        assert r.status_code in (200, 422), r.text
        r = await client.post("/tools/chat_history", json={"query": query, "session_id": sid})
        assert r.status_code in (200, 422), r.text


# Identifiers with a rule of their own say so; every other one names the NUL.
OWN_RULE = ("unknown profile", "letters, digits")


async def _expect_422(r: Any, field: str) -> None:
    assert r.status_code == 422, (field, r.status_code, r.text)
    body = r.json()
    assert body["error"] == "unprocessable"
    assert body["detail"].startswith(f"{field}: ") or f".{field}: " in body["detail"], body
    assert "NUL" in body["detail"] or any(p in body["detail"] for p in OWN_RULE), body


async def test_nul_in_identifiers_of_bodies_is_422_naming_the_field(
    client: AsyncTestClient, make_client: Any, settings: Settings, tmp_path: Any
) -> None:
    sid = await _session(client)
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        ("POST", "/sessions", {"name": NUL}, "name"),
        ("POST", "/sessions", {"profile_id": NUL}, "profile_id"),
        ("PATCH", f"/sessions/{sid}", {"name": NUL}, "name"),
        ("POST", "/me/tokens", {"name": NUL}, "name"),
        ("POST", "/admin/users", {"name": NUL}, "name"),
        ("POST", "/memory/facts", {"category": NUL, "key": "k", "value": "v"}, "category"),
        ("POST", "/memory/facts", {"category": "c", "key": NUL, "value": "v"}, "key"),
        (
            "POST",
            "/tools/memory",
            {"action": "save", "category": NUL, "key": "k", "value": "v"},
            "category",
        ),
        ("POST", "/tools/memory", {"action": "forget", "key": NUL}, "key"),
        ("POST", "/tools/write_error", {"tool": NUL, "error": "e", "fix": "f"}, "tool"),
        ("POST", "/tools/error_history", {"tool": NUL}, "tool"),
        ("POST", f"/sessions/{sid}/prepare", {"model": NUL}, "model"),
        ("POST", f"/sessions/{sid}/compact", {"model": NUL}, "model"),
        ("POST", f"/sessions/{sid}/publish", {"filename": NUL}, "filename"),
        ("POST", f"/sessions/{sid}/share_file", {"path": "/tmp/" + NUL}, "path"),
        (
            "POST",
            f"/sessions/{sid}/messages",
            {
                "messages": [{"role": "assistant", "content": "x"}],
                "usage": {"model": NUL, "prompt_eval_count": 1},
            },
            "model",
        ),
    ]
    for method, url, body, field in cases:
        await _expect_422(await client.request(method, url, json=body), field)
    # share_file with roots configured: still refused before the path reaches the OS.
    async with make_client(settings, share_file_roots=str(tmp_path)) as c:
        c.headers.update(client.headers)
        r = await c.post(f"/sessions/{sid}/share_file", json={"path": f"{tmp_path}/{NUL}"})
        await _expect_422(r, "path")
    assert (await _history(client, sid)) == []  # the refused append stored nothing


PARAMETER_CASES = [
    ("GET", "/sessions?search=a%00b", "search"),
    ("GET", "/sessions?profile_id=a%00b", "profile_id"),
    ("GET", "/sessions/matches?q=a%00b&session_id={sid}", "q"),
    ("GET", "/memory/facts?search=a%00b", "search"),
    ("GET", "/memory/facts/search?q=a%00b", "q"),
    ("DELETE", "/memory/facts/k?category=a%00b", "category"),
    ("DELETE", "/memory/facts/a%00b", "key"),
    ("GET", "/admin/memory?user_id=a%00b", "user_id"),
    ("GET", "/admin/memory/search?q=x&user_id=a%00b", "user_id"),
    ("PUT", "/sessions/{sid}/scratchpad/a%00b", "section"),
    ("GET", "/sessions/{sid}/scratchpad/a%00b", "section"),
    ("DELETE", "/sessions/{sid}/scratchpad/a%00b", "section"),
    ("GET", "/sessions/{sid}/files/a%00b.txt", "filename"),
    ("POST", "/admin/users/a%00b/tokens", "user_id"),
    ("DELETE", "/admin/users/a%00b", "user_id"),
    ("GET", "/shared/a%00b", "token"),
    ("GET", "/shared/a%00b/messages", "token"),
]


async def test_nul_in_query_and_path_parameters_is_422_naming_them(
    client: AsyncTestClient,
) -> None:
    sid = await _session(client)
    for method, url, field in PARAMETER_CASES:
        body = {"value": "v"} if method == "PUT" else None
        r = await client.request(method, url.format(sid=sid), json=body)
        await _expect_422(r, field)
