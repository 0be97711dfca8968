"""Issue 42, "Expiring tokens can mint permanent ones": a console sign-in's token (it
expires) cannot issue a token that outlives it, a user holds at most MAX_TOKENS_PER_USER
active tokens, and the principal cache never serves a token after its `expires_at`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from app.config import Settings
from tests.conftest import ADMIN_TOKEN, new_user, run_sql
from tests.integration.console.support import sign_in


async def _console_token(client: Any, token: str) -> str:
    """Sign in to the console with `token`; the cookie's token (it expires)."""
    await sign_in(client, token)
    cookie = client.cookies.get("navi_console")
    assert cookie
    return str(cookie)


def _token_count(db_url: str, uid: str) -> int:
    rows = run_sql(db_url, "select count(*) from navi_api_tokens where user_id = %s", uid)
    assert rows
    return int(rows[0][0])


async def test_an_expiring_token_cannot_mint_a_token(client: Any, db_url: str) -> None:
    uid, headers = await new_user(client, "ada")
    console_token = await _console_token(client, headers["Authorization"].removeprefix("Bearer "))
    before = _token_count(db_url, uid)
    r = await client.post(
        "/me/tokens", json={"name": "forever"}, headers={"Authorization": f"Bearer {console_token}"}
    )
    assert r.status_code == 403, r.text
    assert "expires" in r.json()["detail"]
    assert _token_count(db_url, uid) == before  # nothing was issued
    # the same user with a token that does not expire still can
    r = await client.post("/me/tokens", json={"name": "cli"}, headers=headers)
    assert r.status_code == 201, r.text


async def test_a_console_sign_in_never_outlives_the_token_it_was_opened_with(
    client: Any, db_url: str
) -> None:
    uid, headers = await new_user(client, "bea")
    first = await _console_token(client, headers["Authorization"].removeprefix("Bearer "))
    soon = datetime.now(UTC) + timedelta(minutes=30)
    run_sql(
        db_url,
        "update navi_api_tokens set expires_at = %s where user_id = %s and name = 'console sign-in'",
        soon,
        uid,
    )
    client.cookies.clear()
    second = await _console_token(client, first)
    assert second != first
    rows = run_sql(
        db_url,
        "select max(expires_at) from navi_api_tokens where user_id = %s",
        uid,
    )
    assert rows and rows[0][0] is not None and rows[0][0] <= soon


async def test_tokens_per_user_are_capped(make_client: Any, settings: Settings) -> None:
    async with make_client(settings, max_tokens_per_user=3) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, headers = await new_user(c, "cid")  # token 1
        ids = []
        for name in ("two", "three"):
            r = await c.post("/me/tokens", json={"name": name}, headers=headers)
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        r = await c.post("/me/tokens", json={"name": "four"}, headers=headers)
        assert r.status_code == 409, r.text
        assert "MAX_TOKENS_PER_USER=3" in r.json()["detail"]
        # the admin route counts against the same cap
        uid = (await c.get("/me", headers=headers)).json()["id"]
        r = await c.post(f"/admin/users/{uid}/tokens", json={"name": "five"})
        assert r.status_code == 409, r.text
        # a revoked token no longer counts
        r = await c.delete(f"/me/tokens/{ids[0]}", headers=headers)
        assert r.status_code == 204, r.text
        r = await c.post("/me/tokens", json={"name": "four"}, headers=headers)
        assert r.status_code == 201, r.text


async def test_the_token_cache_never_serves_a_token_after_it_expires(
    make_client: Any, settings: Settings, db_url: str
) -> None:
    async with make_client(settings, auth_cache_ttl_seconds=60) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        uid, headers = await new_user(c, "dee")
        expires_at = datetime.now(UTC) + timedelta(seconds=1.5)
        run_sql(
            db_url, "update navi_api_tokens set expires_at = %s where user_id = %s", expires_at, uid
        )
        r = await c.get("/me", headers=headers)  # resolved from the database, now cached
        assert r.status_code == 200, r.text
        await asyncio.sleep(max(0.0, (expires_at - datetime.now(UTC)).total_seconds()) + 0.2)
        r = await c.get("/me", headers=headers)  # within the 60 s TTL, but past expires_at
        assert r.status_code == 401, r.text
