"""Per-user upload limits (issue 42): the storage quota over all of a user's sessions
(FILES_MAX_BYTES_PER_USER, 413 naming the quota and the usage) and the upload rate
(FILES_UPLOADS_PER_MINUTE, 429 with Retry-After)."""

from __future__ import annotations

from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import ADMIN_TOKEN, new_user


async def _session(client: AsyncTestClient, headers: dict[str, str]) -> str:
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _upload(client: AsyncTestClient, sid: str, name: str, size: int, headers):  # type: ignore[no-untyped-def]
    files = [("files", (name, b"a" * size, "text/plain"))]
    return await client.post(f"/sessions/{sid}/files", files=files, headers=headers)


async def test_quota_counts_every_session_of_the_user(make_client, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, files_max_bytes_per_user=10_000) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, alice = await new_user(client, "alice")
        _, bob = await new_user(client, "bob")
        first, second = await _session(client, alice), await _session(client, alice)
        assert (await _upload(client, first, "a.txt", 6_000, alice)).status_code == 201
        r = await _upload(client, second, "b.txt", 5_000, alice)  # 11,000 in all
        assert r.status_code == 413, r.text
        detail = r.json()["detail"]
        assert "10000 bytes" in detail and "FILES_MAX_BYTES_PER_USER" in detail
        assert "6000 are in use" in detail
        assert (await client.get(f"/sessions/{second}/files", headers=alice)).json()["total"] == 0
        assert (await _upload(client, second, "c.txt", 4_000, alice)).status_code == 201
        # full now: even a small file is refused; another user has a quota of their own
        r = await _upload(client, first, "d.txt", 1, alice)
        assert r.status_code == 413 and "0 left" in r.json()["detail"]
        assert (
            await _upload(client, await _session(client, bob), "e.txt", 9_000, bob)
        ).status_code == 201
        # deleting a session frees its bytes
        assert (await client.delete(f"/sessions/{first}", headers=alice)).status_code == 204
        assert (await _upload(client, second, "f.txt", 5_000, alice)).status_code == 201


async def test_upload_rate_is_limited_per_user(make_client, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, files_uploads_per_minute=3) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, alice = await new_user(client, "alice")
        _, bob = await new_user(client, "bob")
        sid = await _session(client, alice)
        for i in range(3):
            assert (await _upload(client, sid, f"{i}.txt", 10, alice)).status_code == 201
        r = await _upload(client, sid, "3.txt", 10, alice)
        assert r.status_code == 429, r.text
        assert r.json()["error"] == "rate_limited"
        assert "FILES_UPLOADS_PER_MINUTE" in r.json()["detail"]
        assert 1 <= int(r.headers["Retry-After"]) <= 20  # a token every 20 s
        # another user's bucket is their own
        assert (
            await _upload(client, await _session(client, bob), "b.txt", 10, bob)
        ).status_code == 201


async def test_the_default_limit_is_120_a_minute(client: AsyncTestClient) -> None:
    sid = await _session(client, {})
    codes = [(await _upload(client, sid, f"{i}.txt", 1, {})).status_code for i in range(160)]
    # 2 tokens a second come back meanwhile: 40 more uploads outrun them unless they
    # take 20 s
    assert codes[:120] == [201] * 120 and 429 in codes[120:]
