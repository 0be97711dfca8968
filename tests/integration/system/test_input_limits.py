"""Integers past their column, JSON nested past 32 levels, an unknown profile, an empty
message, a pasted file that is not an image: each a clear 4xx naming the field, never a
500, and nothing stored."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.unit.compression.images import png

INT4_OVER = 2**31
INT8_OVER = 99999999999999999999


async def _session(client: AsyncTestClient) -> str:
    r = await client.post("/sessions", json={"profile_id": "default"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _count(client: AsyncTestClient, sid: str) -> int:
    r = await client.get(f"/sessions/{sid}/messages")
    assert r.status_code == 200, r.text
    return len(r.json()["messages"])


def _expect(r: Any, status: int, field: str) -> None:
    assert r.status_code == status, (field, r.status_code, r.text)
    assert field in r.json()["detail"], (field, r.json())


async def test_integers_past_their_bounds_are_422_naming_the_field(
    client: AsyncTestClient,
) -> None:
    sid = await _session(client)
    for url in (
        "/sessions",
        "/me/tokens",
        "/admin/users",
        "/memory/facts",
        "/admin/memory",
        f"/sessions/{sid}/scratchpad",
        f"/sessions/{sid}/files",
    ):
        for offset in (INT4_OVER, INT8_OVER):
            _expect(await client.get(f"{url}?offset={offset}"), 422, "offset")
        assert (await client.get(f"{url}?offset={INT4_OVER - 1}")).status_code == 200, url
    for url in (f"/sessions/{sid}/messages", "/shared/some-token/messages"):
        r = await client.get(f"{url}?before_seq={INT8_OVER}")
        _expect(r, 422, "before_seq")
    assert (await client.get(f"/sessions/{sid}/messages?before_seq={2**63 - 1}")).status_code == 200

    one = {"role": "assistant", "content": "x"}
    for field in ("token_count", "tool_call_count"):
        body = {"messages": [{**one, field: 10**30}]}
        _expect(
            await client.post(f"/sessions/{sid}/messages", json=body), 422, f"messages[0].{field}"
        )
    for field in ("prompt_eval_count", "sent_chars", "sent_tokens"):
        usage = {"model": "m", "prompt_eval_count": 10, field: 10**20}
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": [one], "usage": usage})
        _expect(r, 422, f"usage.{field}")
    r = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [{**one, "token_count": INT4_OVER - 1}]}
    )
    assert r.status_code == 201, r.text
    assert await _count(client, sid) == 1  # only the one within bounds

    fact = (
        await client.post("/memory/facts", json={"category": "c", "key": "k", "value": "v"})
    ).json()
    r = await client.patch(f"/admin/memory/{fact['id']}", json={"merged_into": 10**30})
    _expect(r, 422, "merged_into")
    r = await client.post("/memory/search", json={"query": "x", "k": 10**30})
    _expect(r, 422, "k")
    # 100 characters that lower-case to 200 do not fit the category column.
    r = await client.post("/memory/facts", json={"category": "İ" * 100, "key": "k", "value": "v"})
    _expect(r, 422, "category: at most 100 characters once lower-cased")


async def test_timestamps_python_could_not_read_back_are_422(client: AsyncTestClient) -> None:
    # PostgreSQL stores year 10000; every later read of the session would fail.
    sid = await _session(client)
    for at in ("9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00"):
        msg = {"role": "user", "content": "x", "created_at": at}
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": [msg]})
        _expect(r, 422, "messages[0].created_at: out of range")
    msg = {"role": "user", "content": "x", "created_at": "9999-12-30T00:00:00Z"}
    assert (
        await client.post(f"/sessions/{sid}/messages", json={"messages": [msg]})
    ).status_code == 201
    r = await client.get(f"/sessions/{sid}/messages")
    assert r.status_code == 200 and r.json()["messages"][0]["created_at"].startswith("9999-12-30")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def test_json_nested_past_32_levels_is_422(client: AsyncTestClient) -> None:
    sid = await _session(client)
    headers = {"content-type": "application/json"}

    def message(meta: str) -> str:
        return '{"messages":[{"role":"user","content":"x","metadata":{"a":@}}]}'.replace("@", meta)

    # body, messages, the message, metadata: 4 levels; "a" may nest 28 more.
    r = await client.post(
        f"/sessions/{sid}/messages", content=message(_nested(28)), headers=headers
    )
    assert r.status_code == 201, r.text
    for depth in (29, 900, 5_000, 100_000):
        r = await client.post(
            f"/sessions/{sid}/messages", content=message(_nested(depth)), headers=headers
        )
        assert r.status_code == 422, (depth, r.status_code, r.text[:200])
        assert "nested more than 32 levels" in r.json()["detail"]
    r = await client.post(
        f"/sessions/{sid}/messages", content=message(_nested(29)), headers=headers
    )
    assert r.json()["detail"].startswith("messages[0].metadata.a[0]"), r.json()

    deep = _nested(100_000)
    for url, body in (
        (f"/sessions/{sid}/planning", '{"entry":{"a":@}}'),
        (f"/sessions/{sid}/prepare", '{"message":{"content":"x","tool_calls":[{"a":@}]}}'),
        ("/tools/write_error", '{"tool":"t","error":@,"fix":"f"}'),
        ("/tools/chat_history", '{"query":@,"session_id":"%s"}'.replace("%s", sid)),
        ("/memory/facts", "@"),
    ):
        r = await client.post(url, content=body.replace("@", deep), headers=headers)
        assert r.status_code == 422, (url, r.status_code, r.text[:200])
    assert await _count(client, sid) == 1


async def test_unknown_profile_is_422_listing_the_known_ones(
    client: AsyncTestClient, make_client: Any, settings: Settings, tmp_path: Any
) -> None:
    r = await client.post("/sessions", json={"profile_id": "nope"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == "profile_id: unknown profile 'nope'; known: code, default"
    assert (await client.get("/sessions")).json()["total"] == 0
    profiles = tmp_path / "profiles.json"
    profiles.write_text('{"chat": {"context_window": 4096}}')
    async with make_client(settings, profiles_file=str(profiles)) as c:
        c.headers.update(client.headers)
        assert (await c.post("/sessions", json={"profile_id": "chat"})).status_code == 201
        r = await c.post("/sessions", json={"profile_id": "nope"})
        assert r.json()["detail"].endswith("known: chat, code, default")


async def test_a_message_needs_content_tool_calls_or_images(client: AsyncTestClient) -> None:
    sid = await _session(client)
    for empty in (
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "  \n", "thinking": "only thought"},
        {"role": "system"},
        {"role": "user", "content": "", "tool_calls": [], "images": []},
    ):
        batch = [{"role": "user", "content": "fine"}, empty]
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": batch})
        _expect(r, 422, "messages[1]: empty")
    assert await _count(client, sid) == 0  # the batch is refused whole
    call = {"id": "call_1", "function": {"name": "ls", "arguments": {}}}
    ok = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "", "tool_call_id": "call_1", "name": "ls"},  # printed nothing
        {"role": "user", "content": "", "images": [base64.b64encode(png(2, 2)).decode()]},
    ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": ok})
    assert r.status_code == 201, r.text


async def test_pasted_images_must_be_images(client: AsyncTestClient, settings: Settings) -> None:
    sid = await _session(client)
    for data, says in (
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 57, "executable files are refused (content is a ELF"),
        (b"#!/bin/sh\nrm -rf /\n", "executable files are refused (content is a script"),
        (b"MZ" + b"\x00" * 62, "executable files are refused (content is a Windows"),
        (b"just some text", "not a supported image (PNG, JPEG, GIF or WebP)"),
    ):
        images = [base64.b64encode(png(2, 2)).decode(), base64.b64encode(data).decode()]
        msg = {"role": "user", "content": "look", "images": images}
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": [msg]})
        assert r.status_code == 415, (says, r.status_code, r.text)
        assert r.json() == {
            "error": "unsupported_media_type",
            "detail": r.json()["detail"],
        } and r.json()["detail"].startswith(f"messages[0].images[1]: {says}"), r.json()
    assert await _count(client, sid) == 0
    assert not (settings.data_path / "session_files" / sid).exists()  # no image_1.bin


async def test_a_malformed_navi_min_lsn_is_422_on_every_read_route(
    client: AsyncTestClient,
) -> None:
    """The read-your-writes header is checked whether or not a replica is configured, so
    a client echoing the wrong value learns it before a replica is added."""
    sid = await _session(client)
    msg = {"messages": [{"role": "user", "content": "x"}]}
    assert (await client.post(f"/sessions/{sid}/messages", json=msg)).status_code == 201
    share = await client.post(f"/sessions/{sid}/share")
    assert share.status_code == 200, share.text
    token = share.json()["token"]
    reads: list[tuple[str, str, dict[str, Any] | None]] = [
        ("GET", "/sessions", None),
        ("GET", f"/sessions/{sid}/messages", None),
        ("GET", f"/sessions/matches?q=x&session_id={sid}", None),
        ("POST", "/memory/search", {"query": "x"}),
        ("POST", "/tools/memory_search", {"query": "x"}),
        ("GET", "/memory/facts/search?q=x", None),
        ("GET", f"/shared/{token}", None),
        ("GET", f"/shared/{token}/messages", None),
    ]
    for bad in ("garbage", "", "0/0/0", "-1/0", "1/", "/1", "0/G", "123456789/0", "1" * 100):
        for method, path, body in reads:
            r = await client.request(method, path, json=body, headers={"Navi-Min-LSN": bad})
            _expect(r, 422, "Navi-Min-LSN")
    for good in ("0/0", "0/16B3748", "FFFFFFFF/FFFFFFFF"):
        for method, path, body in reads:
            r = await client.request(method, path, json=body, headers={"Navi-Min-LSN": good})
            assert r.status_code == 200, (good, path, r.text)


async def test_a_missing_required_parameter_is_named_without_echoing_the_url(
    client: AsyncTestClient,
) -> None:
    long_q = "a" * 5000
    for path, name in (
        (f"/sessions/matches?q={long_q}", "session_id"),
        ("/memory/facts/search", "q"),
        ("/admin/memory/search", "q"),
    ):
        r = await client.get(path)
        assert r.status_code == 422, (path, r.text)
        assert r.json() == {
            "error": "unprocessable",
            "detail": f"{name}: a required query parameter is missing",
        }


async def test_a_naive_created_at_is_utc_whatever_the_server_zone(
    make_client, settings, db_url: str
) -> None:  # type: ignore[no-untyped-def]
    """The docs promise naive times are UTC; PostgreSQL would read them in its session's
    TimeZone."""
    import psycopg
    from sqlalchemy.engine import make_url

    plain = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    name = make_url(db_url).database
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE \"{name}\" SET timezone = 'America/New_York'")
    try:
        async with make_client(settings) as c:
            c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
            sid = await _session(c)
            msg = {"role": "user", "content": "x", "created_at": "2026-07-01T12:00:00"}
            r = await c.post(f"/sessions/{sid}/messages", json={"messages": [msg]})
            assert r.status_code == 201, r.text
            r = await c.get(f"/sessions/{sid}/messages")
            at = datetime.fromisoformat(r.json()["messages"][0]["created_at"])
        assert at == datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
        with psycopg.connect(plain) as conn:
            stored = conn.execute(
                "select created_at from session_messages where session_id = %s", (sid,)
            ).fetchone()
        assert stored is not None and stored[0] == datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" RESET timezone')
