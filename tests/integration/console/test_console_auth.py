"""Signing in to the console: the cookie, CSRF, sign-out, expiry, local mode."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import ADMIN_TOKEN, new_user, run_sql
from tests.integration.console.support import csrf_of, post_form, sign_in


async def test_pages_need_a_sign_in(client: AsyncTestClient) -> None:
    client.headers.pop("Authorization")
    for path in ("/console", "/console/memory", "/console/search", "/console/admin"):
        r = await client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/console/login", path
    # a bearer header is not a console session
    r = await client.get(
        "/console", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, follow_redirects=False
    )
    assert r.status_code == 303


async def test_sign_in_sets_a_strict_httponly_cookie_of_its_own(
    client: AsyncTestClient, db_url: str
) -> None:
    uid, headers = await new_user(client, "ada")
    token = headers["Authorization"].removeprefix("Bearer ")
    client.headers.pop("Authorization")
    r = await client.get("/console/login")
    assert 'name="token"' in r.text and 'for="token"' in r.text
    r = await client.post(
        "/console/login", data={"token": token, "csrf": csrf_of(r.text)}, follow_redirects=False
    )
    assert r.status_code == 303
    cookie = next(h for h in r.headers.get_list("set-cookie") if h.startswith("navi_console="))
    attrs = cookie.lower()
    assert "httponly" in attrs and "samesite=strict" in attrs and "path=/console" in attrs
    value = cookie.split(";")[0].split("=", 1)[1]
    assert value != token  # a token of the console's own
    rows = run_sql(
        db_url,
        "select name, expires_at from navi_api_tokens where user_id = %s and expires_at is not null",
        uid,
    )
    assert rows and rows[0][0] == "console sign-in"
    assert rows[0][1] > datetime.now(UTC) + timedelta(hours=11)
    r = await client.get("/console")
    assert r.status_code == 200 and "ada" in r.text
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert r.headers["cache-control"] == "no-store"


async def test_a_wrong_token_and_a_forged_login_form_are_refused(client: AsyncTestClient) -> None:
    client.headers.pop("Authorization")
    r = await client.get("/console/login")
    csrf = csrf_of(r.text)
    r = await client.post("/console/login", data={"token": "navi_nope", "csrf": csrf})
    assert r.status_code == 401 and "invalid or revoked" in r.text
    r = await client.post("/console/login", data={"token": "x" * 600, "csrf": csrf})
    assert r.status_code == 422
    r = await client.post("/console/login", data={"token": ADMIN_TOKEN, "csrf": "forged"})
    assert r.status_code == 403
    client.cookies.clear()
    r = await client.post("/console/login", data={"token": ADMIN_TOKEN, "csrf": csrf})
    assert r.status_code == 403  # no pre-session cookie: not this browser's form


async def test_every_write_needs_the_csrf_value(client: AsyncTestClient) -> None:
    csrf = await sign_in(client, ADMIN_TOKEN)
    r = await post_form(client, "/console/logout", "wrong")
    assert r.status_code == 403 and "CSRF" in r.text
    r = await client.post("/console/logout", data={}, follow_redirects=False)
    assert r.status_code == 403
    r = await client.post(
        "/console/logout",
        data={"csrf": csrf},
        headers={"Origin": "https://evil.example"},
        follow_redirects=False,
    )
    assert r.status_code == 403 and "cross-origin" in r.text
    assert (await client.get("/console")).status_code == 200  # still signed in


async def test_sign_out_revokes_the_cookie_token(client: AsyncTestClient, db_url: str) -> None:
    csrf = await sign_in(client, ADMIN_TOKEN)
    cookie = client.cookies.get("navi_console")
    assert cookie
    r = await post_form(client, "/console/logout", csrf)
    assert r.status_code == 303 and r.headers["location"] == "/console/login"
    rows = run_sql(
        db_url,
        "select revoked_at is not null from navi_api_tokens where name = 'console sign-in'",
    )
    assert rows == [(True,)]
    # the old cookie, replayed, is no session any more (and no bearer token either)
    client.cookies.set("navi_console", cookie, path="/console")
    r = await client.get("/console", follow_redirects=False)
    assert r.status_code == 303
    r = await client.get("/me", headers={"Authorization": f"Bearer {cookie}"})
    assert r.status_code == 401


async def test_an_expired_console_token_is_no_session(
    make_client, settings: Settings, db_url: str
) -> None:
    async with make_client(settings, auth_cache_ttl_seconds=0) as client:
        await sign_in(client, ADMIN_TOKEN)
        run_sql(
            db_url,
            "update navi_api_tokens set expires_at = now() - interval '1 second'"
            " where name = 'console sign-in'",
        )
        cookie = client.cookies.get("navi_console")
        assert (
            await client.get("/me", headers={"Authorization": f"Bearer {cookie}"})
        ).status_code == 401
        r = await client.get("/console", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/console/login"


async def test_local_mode_needs_no_token(anon_client: AsyncTestClient) -> None:
    r = await anon_client.get("/console/login")
    assert 'name="token"' not in r.text
    r = await anon_client.post(
        "/console/login", data={"csrf": csrf_of(r.text)}, follow_redirects=False
    )
    assert r.status_code == 303
    r = await anon_client.get("/console")
    assert r.status_code == 200 and "local mode" in r.text
    r = await anon_client.post("/console/logout", data={}, follow_redirects=False)
    assert r.status_code == 403  # CSRF holds in local mode too


async def test_mistakes_in_a_console_address_answer_pages(client: AsyncTestClient) -> None:
    """A person editing the URL gets a page naming the problem, never the API's JSON."""
    await sign_in(client, ADMIN_TOKEN)
    cases = {
        "/console?limit=999": (422, "limit: "),
        "/console?offset=-1": (422, "offset: "),
        "/console/memory?category=" + "c" * 200: (422, "category: "),
        "/console/sessions/not-a-uuid": (404, "Not Found"),
        "/console/no-such-page": (404, "Not Found"),
        "/console/static/..%2F..%2Fetc%2Fpasswd": (404, ""),
    }
    for path, (status, words) in cases.items():
        r = await client.get(path, follow_redirects=False)
        assert r.status_code == status, (path, r.text[:300])
        assert r.headers["content-type"].startswith("text/html"), path
        assert words in r.text and 'id="error-detail"' in r.text, (path, r.text[:300])
        assert "default-src 'none'" in r.headers["content-security-policy"], path
    r = await client.put("/console/memory", follow_redirects=False)
    assert r.status_code == 405 and r.headers["content-type"].startswith("text/html")
