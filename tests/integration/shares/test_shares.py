from __future__ import annotations

import hashlib
import re
from typing import Any

from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import ADMIN_TOKEN, legacy_session, new_user, run_sql


async def _session(client: AsyncTestClient, headers=None, name: str | None = None) -> str:  # type: ignore[no-untyped-def]
    r = await client.post("/sessions", json={"profile_id": "code", "name": name}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _append(client, sid, messages, headers=None) -> None:  # type: ignore[no-untyped-def]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": messages}, headers=headers)
    assert r.status_code == 201, r.text


async def _share(client, sid, headers=None):  # type: ignore[no-untyped-def]
    return await client.post(f"/sessions/{sid}/share", headers=headers)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


async def test_owner_issues_one_idempotent_link(client: AsyncTestClient, db_url: str) -> None:
    uid, alice = await new_user(client, "alice")
    sid = await _session(client, alice, name="Trip plan")
    await _append(client, sid, [{"role": "user", "content": "hi"}], alice)
    r = await _share(client, sid, alice)
    assert r.status_code == 200, r.text
    token = r.json()["token"]
    assert len(token) >= 43 and r.json()["url"] == f"/#share={token}"
    again = await _share(client, sid, alice)
    assert again.json()["token"] == token
    rows = run_sql(
        db_url, "select token, token_hash from session_shares where session_id = %s", sid
    )
    assert rows == [(token, hashlib.sha256(token.encode()).hexdigest())]
    # the admin may publish it too (and gets the same link)
    assert (await _share(client, sid)).json()["token"] == token


async def test_who_may_publish(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    _, reader = await new_user(client, "reader", permissions=["navi.sessions.read_all"])
    sid = await _session(client, alice)
    await _append(client, sid, [{"role": "user", "content": "hi"}], alice)
    r = await _share(client, sid, bob)
    assert r.status_code == 404  # bob cannot see it: no confirmation it exists
    r = await _share(client, sid, reader)
    assert r.status_code == 403  # read_all reads, it does not publish
    assert "owner" in r.json()["detail"]
    assert (await client.get(f"/sessions/{sid}", headers=reader)).status_code == 200
    admin_own = await _session(client)
    await _append(client, admin_own, [{"role": "user", "content": "x"}])
    assert (await _share(client, admin_own)).status_code == 200
    assert (await _share(client, "00000000-0000-0000-0000-000000000000")).status_code == 404


async def test_pending_session_is_409(client: AsyncTestClient) -> None:
    sid = await _session(client)
    r = await _share(client, sid)
    assert r.status_code == 409 and "no message" in r.json()["detail"]


async def test_auth_disabled_only_ownerless_sessions(
    anon_client: AsyncTestClient, client: AsyncTestClient, db_url: str
) -> None:
    local = await _session(anon_client)  # user_id 'anonymous'
    legacy = legacy_session(db_url, "code")
    _, alice = await new_user(client, "alice")
    owned = await _session(client, alice)
    for sid in (local, legacy, owned):
        await _append(anon_client, sid, [{"role": "user", "content": "hi"}])
    assert (await _share(anon_client, local)).status_code == 200
    assert (await _share(anon_client, legacy)).status_code == 200
    r = await _share(anon_client, owned)
    assert r.status_code == 403


async def test_shared_view_pages_and_leaks_no_ids(
    client: AsyncTestClient, make_client, settings: Settings
) -> None:  # type: ignore[no-untyped-def]
    uid, alice = await new_user(client, "alice")
    sid = await _session(client, alice, name="About things")
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": f"see session_files/{sid}/a.pdf (mine: {uid})",
            "metadata": {"session": sid, "owner": uid},
        },
        {
            "role": "assistant",
            "content": "",
            "thinking": f"the session is {sid}",
            "tool_calls": [{"function": {"name": "read", "arguments": {"path": sid}}}],
        },
        {"role": "tool", "content": "file body", "name": "read", "tool_call_id": f"c-{sid}"},
        {"role": "assistant", "content": "the plan", "is_plan": True, "is_context": False},
        {"role": "system", "content": "summary", "is_compression": True, "is_context": False},
        {"role": "system", "content": "internal", "metadata": {"source": "debug"}},
        {"role": "user", "content": "hidden summary", "is_summary": True, "is_display": False},
    ]
    messages += [{"role": "user", "content": f"m{i}"} for i in range(6)]
    await _append(client, sid, messages, alice)
    token = (await _share(client, sid, alice)).json()["token"]

    async with make_client(settings) as public:  # no Authorization header at all
        r = await public.get(f"/shared/{token}?limit=4")
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {
            "name",
            "profile_id",
            "profile_name",
            "created_at",
            "last_active",
            "messages",
            "has_more",
            "next_before_seq",
        }
        assert body["profile_id"] == "code" and body["profile_name"]
        assert [m["content"] for m in body["messages"]] == ["m2", "m3", "m4", "m5"]
        assert body["has_more"] is True
        seen = list(body["messages"])
        before = body["next_before_seq"]
        pages = 1
        while before is not None:
            r = await public.get(f"/shared/{token}/messages?limit=4&before_seq={before}")
            assert r.status_code == 200, r.text
            page = r.json()
            seen = page["messages"] + seen
            before = page["next_before_seq"]
            pages += 1
            for s in _strings(page):
                assert sid not in s and uid not in s, s
        assert pages == 3  # 12 displayed rows, 4 a page
        contents = [m["content"] for m in seen]
        # system records other than compression are skipped, context-only rows never shown
        assert "internal" not in contents and "hidden summary" not in contents
        assert contents[:5] == [
            "see session_files/[session]/a.pdf (mine: [owner])",
            "",
            "file body",
            "the plan",
            "summary",
        ]
        assert seen[3]["is_plan"] and seen[4]["is_compression"]
        assert seen[1]["tool_calls"][0]["function"]["arguments"]["path"] == "[session]"
        for m in seen:
            assert "metadata" not in m and "tool_call_id" not in m and "files" not in m
        for s in _strings(body):
            assert sid not in s and uid not in s, s
        # no write method under /shared
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            r = await public.request(method, f"/shared/{token}")
            assert r.status_code in (404, 405), (method, r.status_code)
            r = await public.request(method, f"/shared/{token}/messages")
            assert r.status_code in (404, 405), (method, r.status_code)


async def test_unknown_and_malformed_tokens_are_404(
    client: AsyncTestClient, make_client, settings: Settings
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _append(client, sid, [{"role": "user", "content": "x"}])
    token = (await _share(client, sid)).json()["token"]
    async with make_client(settings) as public:
        for bad in (
            token[:-1] + ("A" if token[-1] != "A" else "B"),
            "short",
            "x" * 200,
            "a%20b" * 5,
            hashlib.sha256(token.encode()).hexdigest(),  # the stored hash is not a token
        ):
            r = await public.get(f"/shared/{bad}")
            assert r.status_code == 404, bad
            assert (await public.get(f"/shared/{bad}/messages")).status_code == 404


async def test_deleting_the_session_kills_the_link(
    client: AsyncTestClient, make_client, settings: Settings, db_url: str
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _append(client, sid, [{"role": "user", "content": "x"}])
    token = (await _share(client, sid)).json()["token"]
    async with make_client(settings) as public:
        assert (await public.get(f"/shared/{token}")).status_code == 200
        assert (await client.delete(f"/sessions/{sid}")).status_code == 204
        assert (await public.get(f"/shared/{token}")).status_code == 404
        assert (await public.get(f"/shared/{token}/messages")).status_code == 404
    assert run_sql(db_url, "select count(*) from session_shares")[0][0] == 0


async def test_tokens_never_reach_the_logs(make_client, settings: Settings, capsys) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, log_level="info", log_json=True) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await _session(c)
        await _append(c, sid, [{"role": "user", "content": "x"}])
        token = (await _share(c, sid)).json()["token"]
        public_headers = {"Authorization": ""}
        assert (await c.get(f"/shared/{token}", headers=public_headers)).status_code == 200
        r = await c.get(f"/shared/{token}/messages?before_seq=5", headers=public_headers)
        assert r.status_code == 200
        assert (
            await c.get(f"/shared/{token}x/messages", headers=public_headers)
        ).status_code == 404
    out = capsys.readouterr()
    logs = out.out + out.err
    assert '"path": "/shared/[redacted]"' in logs or "/shared/[redacted]" in logs
    assert "share.issued" in logs
    assert token not in logs


async def test_page_is_served_publicly(make_client, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings) as public:
        r = await public.get("/")
        assert r.status_code == 200 and "text/html" in r.headers["content-type"]
        assert 'src="/static/share.js"' in r.text
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert r.headers["referrer-policy"] == "no-referrer"
        js = await public.get("/static/share.js")
        assert js.status_code == 200 and "javascript" in js.headers["content-type"]
        assert "innerHTML" not in js.text  # message text only ever goes through textContent
        assert (await public.get("/static/share.css")).status_code == 200
        assert (await public.get("/static/index.html")).status_code == 404
        assert (await public.get("/static/..%2Fconfig.py")).status_code == 404
        assert r.headers["x-content-type-options"] == "nosniff"


async def test_share_carries_no_tool_call_ids_and_no_ids_in_any_case(
    client: AsyncTestClient, make_client, settings: Settings
) -> None:  # type: ignore[no-untyped-def]
    uid, alice = await new_user(client, "alice")
    sid = await _session(client, alice)
    upper, bare = sid.upper(), sid.replace("-", "")
    r = await client.patch(f"/sessions/{sid}", json={"name": f"About {upper}"}, headers=alice)
    assert r.status_code == 200
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"A: {upper} B: {bare.upper()} C: {bare} D: {uid.upper()}"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_8f2c1a",
                    "type": "function",
                    "function": {"name": "read", "arguments": {"path": f"/x/{upper}/a"}},
                },
                {"call_id": "call_77", "function": {"name": "ls", "arguments": {}}},
            ],
        },
        {"role": "tool", "content": "ok", "name": "read", "tool_call_id": "call_8f2c1a"},
    ]
    await _append(client, sid, messages, alice)
    token = (await _share(client, sid, alice)).json()["token"]
    async with make_client(settings) as public:
        r = await public.get(f"/shared/{token}")
        assert r.status_code == 200, r.text
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["content-type"].startswith("application/json")
        body = r.json()
        page = (await public.get(f"/shared/{token}/messages")).json()
    for payload in (body, page):
        text = str(payload).lower()
        assert "call_" not in text
        assert sid not in text and bare not in text and uid not in text
        shown = payload["messages"]
        assert shown[0]["content"] == "A: [session] B: [session] C: [session] D: [owner]"
        calls = shown[1]["tool_calls"]
        assert calls[0] == {
            "type": "function",
            "function": {"name": "read", "arguments": {"path": "/x/[session]/a"}},
        }
        assert calls[1] == {"function": {"name": "ls", "arguments": {}}}
        for s in _strings(payload):
            assert not re.search(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}", s, re.I), s
    assert body["name"] == "About [session]"
