"""`/console/search`: the signed-in user's memory searched as an agent's `memory_search`
searches it, and a text forgotten everywhere after a dry run."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from litestar.testing import AsyncTestClient

from app.config import Settings
from app.db.engine import session_factory
from app.domain.raw_history.live_index import index_live_sessions
from app.llm.factory import build_gateway
from tests.conftest import new_user, wait_for_replica
from tests.integration.console.support import post_form, sign_in

SECRET = "4471-9902"
SAID = f"The combination for my gym locker is {SECRET}, please keep it."
FACT = f"gym locker combination {SECRET}"
HIT_RE = re.compile(r'<li class="hit" data-kind="([a-z]+)">')
COUNT_RE = re.compile(r'<strong id="forget-count">(\d+)</strong>')


async def _live_index(engine: Any, settings: Settings) -> None:
    """One pass of the live raw index (the service runs it woken by every append)."""
    llm = build_gateway(settings)
    try:
        await index_live_sessions(session_factory(engine), llm, settings, quiet_seconds=0)
    finally:
        await llm.aclose()
    wait_for_replica(engine.url.render_as_string(hide_password=False))


async def _user_with_memory(
    client: AsyncTestClient, engine: Any, settings: Settings, name: str, said: str, fact: str
) -> tuple[str, str]:
    """A user with a fact and a message made findable; (their token, the session id)."""
    _, headers = await new_user(client, name)
    r = await client.post(
        "/memory/facts",
        json={"category": "personal", "key": "gym_locker", "value": fact},
        headers=headers,
    )
    assert r.status_code == 201, r.text
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=headers)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": said},
                {"role": "assistant", "content": "Noted, I will not share it."},
            ]
        },
        headers=headers,
    )
    assert r.status_code == 201, r.text
    await _live_index(engine, settings)
    return headers["Authorization"].removeprefix("Bearer "), sid


def _kinds(html: str) -> list[str]:
    return HIT_RE.findall(html)


async def _search(client: AsyncTestClient, q: str, **params: Any) -> str:
    r = await client.get("/console/search", params={"q": q, **params})
    assert r.status_code == 200, r.text
    return r.text


async def test_search_shows_hits_with_provenance_and_the_agents_text(
    client: AsyncTestClient, engine: Any, settings: Settings
) -> None:
    token, sid = await _user_with_memory(client, engine, settings, "ada", SAID, FACT)
    csrf = await sign_in(client, token)
    # an empty query: the box alone
    r = await client.get("/console/search")
    assert r.status_code == 200
    assert 'id="q"' in r.text and 'for="q"' in r.text and 'for="scope"' in r.text
    assert 'id="hits"' not in r.text and 'id="agent-text"' not in r.text
    assert 'aria-current="page"' in r.text
    page = await _search(client, "gym locker combination")
    kinds = _kinds(page)
    assert "fact" in kinds and "raw" in kinds, page
    assert 'id="hits"' in page
    assert f'href="/console/sessions/{sid}"' in page  # the raw hit's session
    assert "personal" in page and "gym_locker" in page  # the fact's category and key
    assert "Turns" in page and "Terms matched" in page and "Score" in page
    # the text the model reads, as POST /memory/search answers it (HTML-escaped)
    assert 'id="agent-text"' in page and "memory_search &#34;gym locker combination&#34;" in page
    # the scope narrows as the API's does; an unknown one is `all`
    assert set(_kinds(await _search(client, "gym locker combination", scope="facts"))) == {"fact"}
    assert set(_kinds(await _search(client, "gym locker combination", scope="raw"))) == {"raw"}
    page = await _search(client, "gym locker combination", scope="bogus", k="0")
    assert '<option value="all" selected>' in page and 'value="5"' in page
    page = await _search(client, "gym locker combination", k="99")
    assert 'id="k" name="k" type="number" min="1" max="20" value="20"' in page
    # the search prefills the forget form, which carries the CSRF value
    assert page.count(f'name="csrf" value="{csrf}"') == 2  # sign-out, forget
    assert 'id="forget-text" name="text" type="text" value="gym locker combination"' in page


async def test_another_users_memory_never_appears(
    client: AsyncTestClient, engine: Any, settings: Settings
) -> None:
    await _user_with_memory(
        client, engine, settings, "bob", "My bicycle lock code is 8080-1234.", "bicycle lock 8080"
    )
    token, _ = await _user_with_memory(client, engine, settings, "ada", SAID, FACT)
    # the admin's own memory too
    r = await client.post(
        "/memory/facts", json={"category": "personal", "key": "bike", "value": "bicycle lock 8080"}
    )
    assert r.status_code == 201, r.text
    await sign_in(client, token)
    for scope in ("all", "facts", "raw", "sketches", "errors"):
        page = await _search(client, "bicycle lock code", scope=scope)
        assert "8080" not in page  # neither bob's message nor bob's or the admin's fact
        hits = page.split('id="agent-text"')[0].split('id="hits-heading"')[1]
        assert "bicycle" not in hits.split("</h2>", 1)[1]
    # ada's own, found the same way
    assert "fact" in _kinds(await _search(client, "gym locker combination"))


async def test_forget_dry_run_counts_then_confirmed_forget_removes(
    client: AsyncTestClient, engine: Any, settings: Settings
) -> None:
    token, _ = await _user_with_memory(client, engine, settings, "ada", SAID, FACT)
    bob, _ = await _user_with_memory(
        client, engine, settings, "bob", f"Bob's code is also {SECRET}.", f"bob code {SECRET}"
    )
    csrf = await sign_in(client, token)
    # the dry run: counts per store, a confirming form, nothing changed
    r = await post_form(client, "/console/search/forget", csrf, text=f"  {SECRET} ")
    assert r.status_code == 200, r.text
    m = COUNT_RE.search(r.text)
    assert m, r.text
    total = int(m.group(1))
    assert total >= 3  # the message, its raw chunk, the fact
    assert '<tr data-store="facts"><th scope="row">Facts (deleted)</th><td>1</td>' in r.text
    assert f"Forget {total} items" in r.text
    assert 'name="confirm" value="yes"' in r.text and "data-confirm=" in r.text
    assert r.text.count(f'name="csrf" value="{csrf}"') == 3  # sign-out, preview, confirm
    page = await _search(client, "gym locker combination")
    assert "fact" in _kinds(page) and SECRET in page
    # confirmed: forgotten, back to the page with the counts (never the text)
    r = await post_form(client, "/console/search/forget", csrf, text=SECRET, confirm="yes")
    assert r.status_code == 303, r.text
    location = urlsplit(r.headers["location"])
    assert location.path == "/console/search"
    done = parse_qs(location.query)["done"][0]
    assert done.startswith(f"Forgot that text everywhere: {total} record(s)") and SECRET not in done
    r = await client.get(r.headers["location"])
    assert r.status_code == 200 and 'role="status"' in r.text and "1 fact(s) deleted" in r.text
    wait_for_replica(engine.url.render_as_string(hide_password=False))
    page = await _search(client, "gym locker combination")
    assert "fact" not in _kinds(page)
    assert SECRET not in page and "[forgotten]" in page  # the raw chunk, redacted
    # a second dry run finds nothing left, and offers nothing to confirm
    r = await post_form(client, "/console/search/forget", csrf, text=SECRET)
    assert COUNT_RE.findall(r.text) == ["0"]
    assert 'id="forget-confirm"' not in r.text and 'id="forget-nothing"' in r.text
    # another user's memory is not touched
    client.cookies.clear()
    r = await client.post(
        "/memory/search",
        json={"query": "bob code", "scope": "facts"},
        headers={"Authorization": f"Bearer {bob}"},
    )
    assert r.status_code == 200 and SECRET in r.json()["text"]


async def test_forget_refuses_a_form_without_csrf_and_bad_texts(
    client: AsyncTestClient, engine: Any, settings: Settings
) -> None:
    token, _ = await _user_with_memory(client, engine, settings, "ada", SAID, FACT)
    csrf = await sign_in(client, token)
    for fields in ({"text": SECRET, "confirm": "yes"}, {"text": SECRET}):
        r = await client.post("/console/search/forget", data=fields, follow_redirects=False)
        assert r.status_code == 403 and "CSRF" in r.text
        r = await post_form(client, "/console/search/forget", "wrong", **fields)
        assert r.status_code == 403
    assert "fact" in _kinds(await _search(client, "gym locker combination"))
    # the API's limits, shown on the page (the field marked, the text kept)
    for text, detail in [
        ("ab", "text: at least 3 characters"),
        ("x" * 1001, "text: at most 1000 characters"),
        ("forgotten", "text: part of the marker"),
    ]:
        r = await post_form(client, "/console/search/forget", csrf, text=text, confirm="yes")
        assert r.status_code == 422, (text, r.status_code)
        assert 'id="forget-error"' in r.text and detail in r.text
        assert 'aria-invalid="true"' in r.text
    assert "fact" in _kinds(await _search(client, "gym locker combination"))


async def test_a_too_long_query_is_a_422_page(client: AsyncTestClient) -> None:
    _, headers = await new_user(client, "ada")
    await sign_in(client, headers["Authorization"].removeprefix("Bearer "))
    r = await client.get("/console/search", params={"q": "a" * 2001})
    assert r.status_code == 422
    assert 'id="search-error"' in r.text and "query: at most 2000 characters" in r.text
    assert 'id="hits"' not in r.text
    r = await client.get("/console/search", params={"q": "a" * 2000})
    assert r.status_code == 200 and 'id="no-hits"' in r.text
