"""Signing a test client in to the console, and reading the forms of its pages."""

from __future__ import annotations

import re
from typing import Any

from litestar.testing import AsyncTestClient

CSRF_RE = re.compile(r'name="csrf" value="([^"]*)"')


def csrf_of(html: str) -> str:
    m = CSRF_RE.search(html)
    assert m, "no CSRF field on the page"
    return m.group(1)


async def sign_in(client: AsyncTestClient[Any], token: str) -> str:
    """Sign `client` in with `token` (as the login form does); returns the CSRF value of
    its forms."""
    client.headers.pop("Authorization", None)
    r = await client.get("/console/login")
    assert r.status_code == 200, r.text
    r = await client.post(
        "/console/login", data={"token": token, "csrf": csrf_of(r.text)}, follow_redirects=False
    )
    assert r.status_code == 303, r.text
    assert r.headers["location"] == "/console"
    r = await client.get("/console")
    assert r.status_code == 200, r.text
    return csrf_of(r.text)


async def post_form(client: AsyncTestClient[Any], path: str, csrf: str, **fields: Any) -> Any:
    """A console form's POST (no redirect followed)."""
    return await client.post(path, data={"csrf": csrf, **fields}, follow_redirects=False)
