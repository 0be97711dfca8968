"""The rolling summary on `/console/sessions/{id}`: shown to a reader, its form to whoever
may change the session (the same edit as `PUT /sessions/{id}/rolling-summary`)."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.console.support import post_form, sign_in
from tests.integration.console.test_session_page import _token, _turn, _user


@pytest.fixture
async def console(make_client, settings: Settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[no-untyped-def]
    async with make_client(settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


async def _session(client: AsyncTestClient, headers: dict[str, str]) -> str:
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=headers)
    sid = r.json()["id"]
    msgs = _turn(0) + _turn(1)
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=headers)
    assert r.status_code == 201, r.text
    return str(sid)


async def test_the_summary_is_shown_and_its_form_saves_it(console: AsyncTestClient) -> None:
    ada = await _user(console, "ada")
    eve = await _user(console, "eve", ["navi.sessions.read_all"])
    bob = await _user(console, "bob")
    sid = await _session(console, ada)
    base = f"/console/sessions/{sid}"
    csrf = await sign_in(console, _token(ada))
    page = (await console.get(base)).text
    assert 'id="rolling-none"' in page and 'id="rolling-form"' in page
    r = await post_form(
        console,
        f"{base}/rolling-summary",
        csrf,
        key_decisions="never use tabs\n\nDo: indent with 4 spaces",
        past_discussions="moved the shed",
        current_discussion="roof <tiles>",
        cursor_seq="",
    )
    assert r.status_code == 303, r.text
    page = (await console.get(r.headers["location"])).text
    assert "<li>Don&#39;t: use tabs</li>" in page and "<li>moved the shed</li>" in page
    assert "roof &lt;tiles&gt;" in page  # escaped
    assert 'name="cursor_seq" value="3"' in page  # the newest message, for the next edit
    api = (await console.get(f"/sessions/{sid}/rolling-summary", headers=ada)).json()
    assert api["summary"]["current_discussion"] == "roof <tiles>" and api["cursor_seq"] == 3
    # an edit from a page loaded before the summary moved on is refused, nothing changes
    stale = dict(key_decisions="", past_discussions="", current_discussion="x", cursor_seq="1")
    assert (await post_form(console, f"{base}/rolling-summary", csrf, **stale)).status_code == 409
    too_many = "\n".join(f"Do: rule {i}" for i in range(9))
    r = await post_form(
        console,
        f"{base}/rolling-summary",
        csrf,
        key_decisions=too_many,
        past_discussions="",
        current_discussion="",
        cursor_seq="3",
    )
    assert r.status_code == 422 and "key_decisions" in html.unescape(r.text)
    after = (await console.get(f"/sessions/{sid}/rolling-summary", headers=ada)).json()
    assert after == api

    csrf = await sign_in(console, _token(eve))  # a reader: sees it, no form, 403
    page = (await console.get(base)).text
    assert "<li>moved the shed</li>" in page and 'id="rolling-form"' not in page
    ok = dict(key_decisions="", past_discussions="", current_discussion="eve", cursor_seq="3")
    assert (await post_form(console, f"{base}/rolling-summary", csrf, **ok)).status_code == 403
    csrf = await sign_in(console, _token(bob))  # another user: not found
    assert (await post_form(console, f"{base}/rolling-summary", csrf, **ok)).status_code == 404
    assert (await console.get(f"/sessions/{sid}/rolling-summary", headers=ada)).json() == api
