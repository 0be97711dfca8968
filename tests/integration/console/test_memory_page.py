"""`/console/memory`: the signed-in user's facts by category (edit, delete, undo a merge),
the summary, the error memory, the scratchpads and the chart of facts learned per day."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jinja2 import Environment, FileSystemLoader
from litestar.testing import AsyncTestClient

from app.console.web import TEMPLATES
from app.domain.facts.schemas import MAX_SUMMARY, MAX_VALUE, FactOut
from tests.conftest import new_user, run_sql
from tests.integration.console.support import post_form, sign_in


async def _user(client: AsyncTestClient, name: str) -> tuple[str, dict[str, str]]:
    """A user; the client keeps the admin's bearer header for the API calls."""
    return await new_user(client, name)


async def _save(client: AsyncTestClient, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    r = await client.post("/memory/facts", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


async def _signed_in(client: AsyncTestClient, headers: dict[str, str]) -> str:
    token = headers["Authorization"].removeprefix("Bearer ")
    return await sign_in(client, token)


def _done(r: Any) -> str:
    assert r.status_code == 303, r.text
    url = urlsplit(r.headers["location"])
    assert url.path == "/console/memory"
    return parse_qs(url.query)["done"][0]


def _row(html: str, fact_id: int) -> str:
    m = re.search(rf'<tr id="fact-{fact_id}"[^>]*>(.*?)</tr>', html, re.S)
    assert m, f"no row fact-{fact_id}"
    return m.group(0)


async def _facts(client: AsyncTestClient, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    r = await client.get("/memory/facts", headers=headers)
    assert r.status_code == 200, r.text
    return {f["key"]: f for f in r.json()["items"]}


async def test_facts_are_listed_by_category_with_their_details(client: AsyncTestClient) -> None:
    _, alice = await _user(client, "alice")
    editor = await _save(
        client, alice, category="Preferences", key="Editor", value="neovim", source="user_explicit"
    )
    city = await _save(client, alice, category="home", key="city", value="Lyon", expires_days=10)
    shell = await _save(client, alice, category="preferences", key="shell", value="fish")
    client.headers.pop("Authorization")
    await _signed_in(client, alice)

    r = await client.get("/console/memory")
    assert r.status_code == 200, r.text
    html = r.text
    # one section per category, the counts from the categories listing
    assert 'id="category-preferences"' in html and 'id="category-home"' in html
    assert 'preferences <span class="muted">(2 facts)' in html
    prefs = html[html.index('id="category-preferences"') :]
    assert f'id="fact-{editor["id"]}"' in prefs and f'id="fact-{shell["id"]}"' in prefs
    assert html.index('id="category-home"') < html.index('id="category-preferences"')
    row = _row(html, editor["id"])
    assert "editor" in row and "neovim" in row and "Said by you" in row and "90" in row
    assert "saved directly" in row and "created" in row and "just now" in row
    assert ">never<" in row.replace("\n", "")
    city_row = _row(html, city["id"])
    assert "in 9 d" in city_row  # the expiry, 10 days from now
    # every control labelled, the edit form named by its fact
    assert f'<label for="value-{editor["id"]}">' in html
    assert f'id="edit-fact-{editor["id"]}" aria-label="Edit fact editor"' in html
    assert f'id="delete-fact-{editor["id"]}"' in html and "data-confirm=" in html
    assert '<label for="summary">' in html and '<label for="category">' in html
    # the chart of facts learned per day: 30 days, 3 today
    assert 'id="facts-chart"' in html and 'data-bars="30"' in html
    assert 'id="learned-count">3 facts learned' in html

    # filtered by category (as a save would store it), and paged
    r = await client.get("/console/memory", params={"category": "Preferences"})
    assert r.status_code == 200
    assert f'id="fact-{editor["id"]}"' in r.text and f'id="fact-{city["id"]}"' not in r.text
    assert 'id="fact-count">2 facts in “preferences”' in r.text
    r = await client.get("/console/memory", params={"limit": 1, "offset": 1})
    assert r.status_code == 200
    shown = re.findall(r'<tr id="fact-(\d+)"', r.text)
    assert len(shown) == 1 and 'rel="next"' in r.text and 'rel="prev"' in r.text
    r = await client.get("/console/memory", params={"limit": 0})
    assert r.status_code == 422 and "limit" in r.text
    r = await client.get("/console/memory", params={"category": "x" * 101})
    assert r.status_code == 422 and "category" in r.text


async def test_edit_a_fact_through_the_form(client: AsyncTestClient) -> None:
    _, alice = await _user(client, "alice")
    fact = await _save(client, alice, category="preferences", key="editor", value="neovim")
    client.headers.pop("Authorization")
    csrf = await _signed_in(client, alice)

    r = await post_form(
        client,
        "/console/memory/facts/save",
        csrf,
        category="preferences",
        key="editor",
        value="helix",
        source="user_explicit",
        confidence="85",
        expires_days="30",
        back_category="preferences",
    )
    assert "Saved preferences / editor" in _done(r)
    assert parse_qs(urlsplit(r.headers["location"]).query)["category"] == ["preferences"]
    got = (await _facts(client, alice))["editor"]
    assert got["id"] == fact["id"] and got["value"] == "helix"
    assert got["confidence"] == 85 and got["source"] == "user_explicit"
    assert got["expires_at"] is not None

    # a new fact, normalised as the API stores it; blank confidence: by source
    r = await post_form(
        client,
        "/console/memory/facts/save",
        csrf,
        category="Home Town",
        key=" City ",
        value="Lyon",
        source="tool_call",
        confidence="",
        expires_days="",
    )
    _done(r)
    city = (await _facts(client, alice))["city"]
    assert city["category"] == "home_town" and city["confidence"] == 95
    r = await client.get(r.headers["location"])
    assert r.status_code == 200 and "Saved home_town / city." in r.text


async def test_the_save_form_has_the_apis_limits(client: AsyncTestClient) -> None:
    _, alice = await _user(client, "alice")
    client.headers.pop("Authorization")
    csrf = await _signed_in(client, alice)
    base = {"category": "c", "key": "k", "value": "v"}
    cases = [
        ({"value": "x" * (MAX_VALUE + 1)}, "value: at most 10000 characters"),
        ({"value": ""}, "value: required"),
        ({"category": "c" * 101}, "category: at most 100"),
        ({"key": "k" * 201}, "key: at most 200"),
        ({"confidence": "101"}, "confidence: expected 0-100"),
        ({"confidence": "high"}, "confidence: expected a whole number"),
        ({"confidence": "--5"}, "confidence: expected a whole number"),
        ({"expires_days": "²"}, "expires_days: expected a whole number"),
        ({"expires_days": "0"}, "expires_days: expected 1-36500"),
        ({"source": "rumour"}, "source: expected one of"),
        ({"source_context": "s" * 2001}, "source_context: at most 2000"),
        ({"key": "a\x00b"}, "key: NUL"),
    ]
    for change, detail in cases:
        r = await post_form(client, "/console/memory/facts/save", csrf, **{**base, **change})
        assert r.status_code == 422, (change, r.status_code)
        assert detail in r.text, (change, r.text[-500:])
    assert await _facts(client, alice) == {}


async def test_delete_a_fact(client: AsyncTestClient) -> None:
    _, alice = await _user(client, "alice")
    await _save(client, alice, category="preferences", key="editor", value="neovim")
    await _save(client, alice, category="tools", key="editor", value="vscode")
    client.headers.pop("Authorization")
    csrf = await _signed_in(client, alice)

    r = await post_form(
        client, "/console/memory/facts/delete", csrf, key="editor", category="preferences"
    )
    assert _done(r) == "Deleted editor."
    left = (await client.get("/memory/facts", headers=alice)).json()["items"]
    assert [(f["category"], f["key"]) for f in left] == [("tools", "editor")]
    r = await post_form(
        client, "/console/memory/facts/delete", csrf, key="editor", category="preferences"
    )
    assert r.status_code == 404 and "no fact" in r.text
    r = await post_form(client, "/console/memory/facts/delete", csrf, key="")
    assert r.status_code == 422 and "key: required" in r.text


async def test_a_facts_history_is_shown_and_an_old_value_restored(
    client: AsyncTestClient,
) -> None:
    _, alice = await _user(client, "alice")
    _, bob = await _user(client, "bob")
    fact = await _save(client, alice, category="home", key="city", value="Lyon")
    await _save(client, alice, category="home", key="city", value="Berlin")
    single = await _save(client, alice, category="pets", key="cat", value="Mimi")
    bobs = await _save(client, bob, category="home", key="city", value="Oslo")
    await _save(client, bob, category="home", key="city", value="Rome")
    r = await client.get(f"/memory/facts/{fact['id']}/history", headers=alice)
    lyon = r.json()["items"][1]
    r = await client.get(f"/memory/facts/{bobs['id']}/history", headers=bob)
    oslo = r.json()["items"][1]
    client.headers.pop("Authorization")
    csrf = await _signed_in(client, alice)

    html = (await client.get("/console/memory")).text
    history = re.search(
        rf'<details class="fact-history" id="history-fact-{fact["id"]}">(.*?)</details>', html, re.S
    )
    assert history, "no history of the changed fact"
    assert "History (2)" in history.group(1)
    assert history.group(1).index("Berlin") < history.group(1).index("Lyon")  # newest first
    assert f'id="restore-version-{lyon["id"]}"' in history.group(1)
    assert "until now" in history.group(1)
    assert f'id="history-fact-{single["id"]}"' not in html  # one value: no history to show
    assert "Oslo" not in html and "Rome" not in html

    r = await post_form(
        client,
        "/console/memory/facts/restore",
        csrf,
        fact_id=str(fact["id"]),
        version_id=str(lyon["id"]),
    )
    assert _done(r) == "Restored city → Lyon."
    assert (await _facts(client, alice))["city"]["value"] == "Lyon"
    assert "History (3)" in (await client.get("/console/memory")).text
    # another user's fact or version: not found / not one of this fact's
    r = await post_form(
        client,
        "/console/memory/facts/restore",
        csrf,
        fact_id=str(bobs["id"]),
        version_id=str(oslo["id"]),
    )
    assert r.status_code == 404
    r = await post_form(
        client,
        "/console/memory/facts/restore",
        csrf,
        fact_id=str(fact["id"]),
        version_id=str(oslo["id"]),
    )
    assert r.status_code == 422 and "version_id" in r.text
    r = await post_form(client, "/console/memory/facts/restore", csrf, fact_id="x", version_id="1")
    assert r.status_code == 422 and "fact_id" in r.text


async def test_undo_a_merge(client: AsyncTestClient) -> None:
    _, alice = await _user(client, "alice")
    old = await _save(client, alice, category="preferences", key="language", value="Python")
    new = await _save(
        client, alice, category="preferences", key="preferred_language", value="Rust", dedupe=True
    )
    assert new["merged"] == [old["id"]]
    client.headers.pop("Authorization")
    csrf = await _signed_in(client, alice)

    html = (await client.get("/console/memory")).text
    # the hidden fact is shown under the one that absorbed it, with its undo button
    merged = _row(html, old["id"])
    assert f'data-merged-into="{new["id"]}"' in merged
    assert "merged into preferred_language" in merged and "Python" in merged
    assert html.index(f'id="fact-{new["id"]}"') < html.index(f'id="fact-{old["id"]}"')
    assert f'id="unmerge-fact-{old["id"]}"' in html
    assert 'preferences <span class="muted">(1 fact)' in html
    assert "and the facts merged into it?" in html  # the survivor's delete says so

    r = await post_form(client, "/console/memory/facts/unmerge", csrf, fact_id=str(old["id"]))
    assert "Restored language" in _done(r)
    assert set(await _facts(client, alice)) == {"language", "preferred_language"}
    html = (await client.get("/console/memory")).text
    assert "data-merged-into" not in html and f'id="edit-fact-{old["id"]}"' in html

    r = await post_form(client, "/console/memory/facts/unmerge", csrf, fact_id="abc")
    assert r.status_code == 422 and "fact_id" in r.text
    for bad in ("9" * 19, "²", "-1", ""):
        r = await post_form(client, "/console/memory/facts/unmerge", csrf, fact_id=bad)
        assert r.status_code == 422, bad
    r = await post_form(client, "/console/memory/facts/unmerge", csrf, fact_id="987654321")
    assert r.status_code == 404


async def test_the_undo_is_the_owners_only_even_for_an_admin(client: AsyncTestClient) -> None:
    _, alice = await _user(client, "alice")
    _, boss = await new_user(client, "boss", is_admin=True)
    old = await _save(client, alice, category="preferences", key="language", value="Python")
    await _save(
        client, alice, category="preferences", key="preferred_language", value="Go", dedupe=True
    )
    client.headers.pop("Authorization")
    csrf = await _signed_in(client, boss)
    r = await post_form(client, "/console/memory/facts/unmerge", csrf, fact_id=str(old["id"]))
    assert r.status_code == 404
    r = await post_form(client, "/console/memory/facts/delete", csrf, key="language")
    assert r.status_code == 404
    assert "language" not in await _facts(client, alice)  # still hidden
    every = await client.get("/admin/memory", params={"include_merged": "true"}, headers=boss)
    assert len(every.json()["items"]) == 2


async def test_edit_the_summary(client: AsyncTestClient) -> None:
    _, alice = await _user(client, "alice")
    client.headers.pop("Authorization")
    csrf = await _signed_in(client, alice)
    r = await post_form(
        client, "/console/memory/summary", csrf, summary="Alice writes Rust <b>daily</b>."
    )
    assert _done(r) == "Summary saved."
    got = (await client.get("/memory/summary", headers=alice)).json()
    assert got["content"] == "Alice writes Rust <b>daily</b>." and got["updated_at"]
    html = (await client.get("/console/memory")).text
    assert "Alice writes Rust &lt;b&gt;daily&lt;/b&gt;.</textarea>" in html  # escaped

    r = await post_form(client, "/console/memory/summary", csrf, summary="x" * (MAX_SUMMARY + 1))
    assert r.status_code == 422 and "summary: at most 50000 characters" in r.text
    r = await post_form(client, "/console/memory/summary", csrf)
    assert r.status_code == 422
    r = await post_form(client, "/console/memory/summary", csrf, summary="")
    assert _done(r) == "Summary cleared."
    assert (await client.get("/memory/summary", headers=alice)).json()["content"] == ""


async def test_another_users_memory_is_never_shown(client: AsyncTestClient, db_url: str) -> None:
    bob_id, bob = await _user(client, "bob")
    _, alice = await _user(client, "alice")
    secret = await _save(client, bob, category="secrets", key="pin", value="bob-pin-4321")
    mine = await _save(client, alice, category="secrets", key="editor", value="vim")
    r = await client.put("/memory/summary", json={"content": "Bob's own summary"}, headers=bob)
    assert r.status_code == 200
    r = await client.post(
        "/tools/write_error",
        json={"tool": "shell", "error": "bob-error-xyz", "fix": "bob-fix"},
        headers=bob,
    )
    assert r.status_code == 200, r.text
    run_sql(
        db_url,
        "insert into sessions (id, profile_id, user_id) values (gen_random_uuid(), 'default', %s)"
        " returning id",
        bob_id,
    )
    client.headers.pop("Authorization")
    csrf = await _signed_in(client, alice)

    html = (await client.get("/console/memory")).text
    assert f'id="fact-{mine["id"]}"' in html
    for text in ("bob-pin-4321", f'id="fact-{secret["id"]}"', "Bob's own summary", "bob-error"):
        assert text not in html, text
    assert 'id="learned-count">1 fact learned' in html
    html = (await client.get("/console/memory", params={"category": "secrets"})).text
    assert "bob-pin" not in html
    # her forms cannot reach his facts
    r = await post_form(client, "/console/memory/facts/delete", csrf, key="pin")
    assert r.status_code == 404
    r = await post_form(
        client,
        "/console/memory/facts/save",
        csrf,
        category="secrets",
        key="pin",
        value="overwritten",
    )
    _done(r)
    assert (await _facts(client, bob))["pin"]["value"] == "bob-pin-4321"


async def test_error_memory_and_scratchpads_are_shown(client: AsyncTestClient) -> None:
    _, alice = await _user(client, "alice")
    r = await client.post(
        "/tools/write_error",
        json={
            "tool": "shell",
            "error": "Permission denied: /var/log/app.log",
            "fix": "use sudo -u app",
            "context": "rotating logs",
        },
        headers=alice,
    )
    assert r.status_code == 200, r.text
    entry = r.json()["entry"]
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=alice)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    r = await client.put(
        f"/sessions/{sid}/scratchpad/plan", json={"value": "1. read logs"}, headers=alice
    )
    assert r.status_code == 200, r.text
    client.headers.pop("Authorization")
    await _signed_in(client, alice)

    html = (await client.get("/console/memory")).text
    row = re.search(rf'<tr id="error-{entry["id"]}">(.*?)</tr>', html, re.S)
    assert row and "Permission denied" in row.group(1) and "use sudo -u app" in row.group(1)
    assert "rotating logs" in row.group(1) and "0 hits" in row.group(1)
    assert 'id="error-count">1 entry' in html
    assert 'id="section-count">1 section' in html
    assert "1. read logs" in html and f'href="/console/sessions/{sid}"' in html
    # looking is not a hit: the entry is not renewed
    html = (await client.get("/console/memory")).text
    assert "0 hits" in html


async def test_every_form_needs_the_csrf_value(client: AsyncTestClient) -> None:
    _, alice = await _user(client, "alice")
    await _save(client, alice, category="preferences", key="editor", value="neovim")
    client.headers.pop("Authorization")
    await _signed_in(client, alice)
    forms = {
        "/console/memory/facts/save": {"category": "c", "key": "k", "value": "v"},
        "/console/memory/facts/delete": {"key": "editor"},
        "/console/memory/facts/unmerge": {"fact_id": "1"},
        "/console/memory/summary": {"summary": "hacked"},
    }
    for path, fields in forms.items():
        r = await client.post(path, data=fields, follow_redirects=False)
        assert r.status_code == 403 and "CSRF" in r.text, path
        r = await post_form(client, path, "forged", **fields)
        assert r.status_code == 403, path
    assert set(await _facts(client, alice)) == {"editor"}
    assert (await client.get("/memory/summary", headers=alice)).json()["content"] == ""


async def test_the_page_needs_a_sign_in(client: AsyncTestClient) -> None:
    client.headers.pop("Authorization")
    r = await client.get("/console/memory", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/console/login"
    r = await client.post(
        "/console/memory/facts/save", data={"category": "c"}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"] == "/console/login"


def test_the_facts_partial_readonly_has_no_form() -> None:
    """What the admin page reuses: `memory_facts.html` with `readonly=True` (and only
    `facts`) shows the facts, merged ones under their survivor, and no control."""
    now = datetime.now(UTC)

    def fact(fact_id: int, key: str, merged_into: int | None = None) -> FactOut:
        return FactOut(
            id=fact_id,
            user_id="u",
            category="preferences",
            key=key,
            value=f"value of {key}",
            source="conversation",
            confidence=70,
            expires_at=None,
            source_context=None,
            source_session_id=None,
            merged_into=merged_into,
            has_embedding=True,
            created_at=now,
            updated_at=now,
        )

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True)
    facts = [fact(1, "language"), fact(2, "lang", merged_into=1), fact(3, "os", merged_into=99)]
    for readonly in (True, False):
        html = env.get_template("console/memory_facts.html").render(
            facts=facts, readonly=readonly, csrf="x", csrf_field="csrf", sources=[]
        )
        assert re.findall(r'<tr id="fact-(\d+)"', html) == ["1", "2", "3"]
        assert 'data-merged-into="1"' in html and "merged into fact #99" in html
        assert ("<form" in html) is not readonly and ("Undo merge" in html) is not readonly
