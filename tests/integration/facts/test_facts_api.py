"""Facts over HTTP: CRUD, isolation per user, admin paths, dedupe + undo, expiry."""

from __future__ import annotations

from litestar.testing import AsyncTestClient

from app.domain.kernel.principal import PERM_MEMORY_READ_ALL
from tests.conftest import new_user
from tests.fakes.ollama_server import FakeOllama
from tests.integration.facts.conftest import sql


async def _save(client: AsyncTestClient, headers=None, **body) -> dict:  # type: ignore[no-untyped-def]
    r = await client.post("/memory/facts", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


async def test_save_list_search_delete(client: AsyncTestClient) -> None:
    fact = await _save(
        client, category="Preferences", key=" Editor ", value="neovim", source="user_explicit"
    )
    # stored normalised; confidence by source; embedded through the gateway
    assert (fact["category"], fact["key"], fact["confidence"]) == ("preferences", "editor", 90)
    assert fact["has_embedding"] and fact["merged"] == []
    again = await _save(client, category="preferences", key="editor", value="helix", confidence=40)
    assert again["id"] == fact["id"] and again["value"] == "helix" and again["confidence"] == 40

    page = (await client.get("/memory/facts")).json()
    assert page["total"] == 1 and page["items"][0]["value"] == "helix"

    r = await client.get("/memory/facts/search", params={"q": "preferences editor: helix"})
    assert r.status_code == 200
    assert r.json()["mode"] == "vector" and r.json()["items"][0]["key"] == "editor"

    assert (
        await client.delete("/memory/facts/editor", params={"category": "other"})
    ).status_code == 404
    assert (await client.delete("/memory/facts/editor")).status_code == 204
    assert (await client.delete("/memory/facts/editor")).status_code == 404
    assert (await client.get("/memory/facts")).json()["total"] == 0


async def test_list_paging_sorting_search(client: AsyncTestClient) -> None:
    for i, (cat, key) in enumerate([("b", "k1"), ("a", "k2"), ("c", "k3")]):
        await _save(client, category=cat, key=key, value=f"value {i} 100%_x", confidence=10 * i)
    page = (await client.get("/memory/facts", params={"limit": 2})).json()
    # newest first by default: the last saved (c), then a
    assert [f["category"] for f in page["items"]] == ["c", "a"] and page["has_more"]
    await _save(client, category="b", key="k1", value="value 0 100%_x", confidence=0)
    newest = (await client.get("/memory/facts")).json()["items"]
    assert [f["category"] for f in newest] == ["b", "c", "a"]  # an update moves it first
    admin = (await client.get("/admin/memory")).json()["items"]
    assert [f["category"] for f in admin] == ["b", "c", "a"]
    by_cat = (
        await client.get("/memory/facts", params={"sort_by": "category", "sort_order": "asc"})
    ).json()
    assert [f["category"] for f in by_cat["items"]] == ["a", "b", "c"]
    desc = (
        await client.get("/memory/facts", params={"sort_by": "confidence", "sort_order": "desc"})
    ).json()
    assert [f["confidence"] for f in desc["items"]] == [20, 10, 0]
    # LIKE wildcards in the search term are literal
    assert (await client.get("/memory/facts", params={"search": "100%_x"})).json()["total"] == 3
    assert (await client.get("/memory/facts", params={"search": "0%x"})).json()["total"] == 0
    bad = await client.get("/memory/facts", params={"sort_by": "value"})
    assert bad.status_code == 422 and "sort_by" in bad.json()["detail"]


async def test_list_by_exact_category_and_key(client: AsyncTestClient) -> None:
    """`category` / `key` match exactly, normalised as a save stores them (a key-value
    store over facts — the LangGraph adapter — reads one item this way)."""
    for cat, key in [("users/1/prefs", "Editor"), ("users/1/prefs", "shell"), ("users/12", "x")]:
        await _save(client, category=cat, key=key, value=f"{cat} {key}")
    by_cat = (await client.get("/memory/facts", params={"category": "users/1/prefs"})).json()
    assert by_cat["total"] == 2 and {f["key"] for f in by_cat["items"]} == {"editor", "shell"}
    one = (
        await client.get("/memory/facts", params={"category": " USERS/1/prefs", "key": "editor "})
    ).json()
    assert [(f["category"], f["key"]) for f in one["items"]] == [("users/1/prefs", "editor")]
    assert one["total"] == 1
    assert (await client.get("/memory/facts", params={"key": "x"})).json()["total"] == 1
    none = await client.get("/memory/facts", params={"category": "users/1", "key": "shell"})
    assert none.json()["total"] == 0  # not a prefix match
    bad = await client.get("/memory/facts", params={"key": ""})
    assert bad.status_code == 422 and "key" in bad.json()["detail"]


async def test_input_limits_name_the_field(client: AsyncTestClient) -> None:
    cases = [
        ({"category": "c", "key": "k" * 201, "value": "v"}, "key"),
        ({"category": "c" * 101, "key": "k", "value": "v"}, "category"),
        ({"category": "c", "key": "k", "value": "v" * 10_001}, "value"),
        ({"category": "c", "key": "k", "value": "v", "confidence": 101}, "confidence"),
        ({"category": "c", "key": "k", "value": "v", "expires_days": 0}, "expires_days"),
        ({"category": "c", "key": "k", "value": "v", "source": "web"}, "source"),
        ({"category": "c", "key": "   ", "value": "v"}, "key"),
        ({"category": "c", "key": "k"}, "value"),
        ({"category": "c", "key": "k", "value": "v", "colour": 1}, "colour"),
    ]
    for body, field in cases:
        r = await client.post("/memory/facts", json=body)
        assert r.status_code == 422, (body, r.text)
        assert field in r.json()["detail"], (field, r.json())
    r = await client.get("/memory/facts/search", params={"q": " "})
    assert r.status_code == 422 and "q" in r.json()["detail"]
    r = await client.get("/memory/facts/search", params={"q": "x", "limit": 51})
    assert r.status_code == 422 and "limit" in r.json()["detail"]
    r = await client.put("/memory/summary", json={"content": "x" * 50_001})
    assert r.status_code == 422 and "content" in r.json()["detail"]


async def test_isolation_per_user_on_every_endpoint(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    fact = await _save(client, alice, category="location", key="home_city", value="Lisbon")
    r = await client.put(
        "/memory/summary", json={"content": "Alice lives in Lisbon."}, headers=alice
    )
    assert r.status_code == 200

    assert (await client.get("/memory/facts", headers=bob)).json()["total"] == 0
    found = (await client.get("/memory/facts/search", params={"q": "Lisbon"}, headers=bob)).json()
    assert found["items"] == [] and found["mode"] == "none"
    exact = {"q": "location home_city: Lisbon"}
    assert (await client.get("/memory/facts/search", params=exact, headers=bob)).json()[
        "items"
    ] == []
    assert (await client.get("/memory/categories", headers=bob)).json() == {
        "categories": [],
        "total": 0,
        "category_count": 0,
        "limit": 200,
        "offset": 0,
        "has_more": False,
    }
    assert (await client.get("/memory/summary", headers=bob)).json()["content"] == ""
    assert (await client.delete("/memory/facts/home_city", headers=bob)).status_code == 404
    patch = await client.patch(
        f"/admin/memory/{fact['id']}", json={"merged_into": None}, headers=bob
    )
    assert patch.status_code == 404
    assert (await client.get("/admin/memory", headers=bob)).status_code == 403
    assert (
        await client.get("/admin/memory/search", params={"q": "Lisbon"}, headers=bob)
    ).status_code == 403
    for call in (
        {"action": "search", "query": "Lisbon"},
        {"action": "list"},
        {"action": "forget", "key": "home_city"},
    ):
        out = (await client.post("/tools/memory", json=call, headers=bob)).json()
        assert not out.get("facts") and not out.get("categories") and not out.get("deleted"), out

    # Alice still has everything
    assert (await client.get("/memory/facts", headers=alice)).json()["total"] == 1
    cats = (await client.get("/memory/categories", headers=alice)).json()
    assert cats["categories"] == [{"category": "location", "count": 1}] and cats["total"] == 1
    assert (await client.get("/memory/summary", headers=alice)).json()[
        "content"
    ] == "Alice lives in Lisbon."


async def test_admin_views_need_read_all(client: AsyncTestClient) -> None:
    alice_id, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    _, auditor = await new_user(client, "auditor", permissions=[PERM_MEMORY_READ_ALL])
    await _save(client, alice, category="work", key="employer", value="Acme Corp")
    await _save(client, bob, category="work", key="employer", value="Globex Corp")

    r = await client.get("/admin/memory", headers=auditor)
    assert r.status_code == 200 and r.json()["total"] == 2
    only = (await client.get("/admin/memory", params={"user_id": alice_id}, headers=auditor)).json()
    assert [f["value"] for f in only["items"]] == ["Acme Corp"]
    hits = (await client.get("/admin/memory/search", params={"q": "Corp"}, headers=auditor)).json()
    assert {h["value"] for h in hits["items"]} == {"Acme Corp", "Globex Corp"}
    vec = {"q": "work employer: Globex Corp"}
    hits = (await client.get("/admin/memory/search", params=vec, headers=auditor)).json()
    assert hits["mode"] == "vector" and hits["items"][0]["value"] == "Globex Corp"
    assert (
        await client.get("/admin/memory/search", params={"q": "Corp"}, headers=bob)
    ).status_code == 403
    # the admin token holds every permission
    assert (await client.get("/admin/memory")).json()["total"] == 2


async def test_dedupe_merge_and_undo(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice")
    _, auditor = await new_user(client, "auditor", permissions=[PERM_MEMORY_READ_ALL])
    old = await _save(client, alice, category="preferences", key="language", value="Python")
    await _save(client, alice, category="preferences", key="home_city", value="Python")
    new = await _save(
        client, alice, category="preferences", key="preferred_language", value="Rust", dedupe=True
    )
    assert new["merged"] == [old["id"]]

    items = (await client.get("/memory/facts", headers=alice)).json()["items"]
    assert {f["key"] for f in items} == {"preferred_language", "home_city"}
    hits = (await client.get("/memory/facts/search", params={"q": "Python"}, headers=alice)).json()
    assert [h["key"] for h in hits["items"]] == ["home_city"]  # the hidden row never shows
    assert (await client.get("/memory/categories", headers=alice)).json()["total"] == 2

    every = (await client.get("/admin/memory", params={"include_merged": "true"})).json()["items"]
    hidden = {f["key"]: f["merged_into"] for f in every}
    assert hidden == {"language": new["id"], "home_city": None, "preferred_language": None}
    assert (await client.get("/admin/memory")).json()["total"] == 2

    # a reader of all memory is not its owner: may look, may not change
    r = await client.patch(
        f"/admin/memory/{old['id']}", json={"merged_into": None}, headers=auditor
    )
    assert r.status_code == 403
    r = await client.patch("/admin/memory/abc", json={"merged_into": None}, headers=alice)
    assert r.status_code == 422 and "fact_id" in r.json()["detail"]
    r = await client.patch(f"/admin/memory/{old['id']}", json={}, headers=alice)
    assert r.status_code == 422 and "merged_into" in r.json()["detail"]
    r = await client.patch(f"/admin/memory/{old['id']}", json={"merged_into": None}, headers=alice)
    assert r.status_code == 200 and r.json()["merged_into"] is None
    items = (await client.get("/memory/facts", headers=alice)).json()["items"]
    assert {f["key"] for f in items} == {"language", "preferred_language", "home_city"}

    # manual merge back (admin), then deleting the survivor takes the hidden row with it
    r = await client.patch(f"/admin/memory/{old['id']}", json={"merged_into": old["id"]})
    assert r.status_code == 422 and "merged_into" in r.json()["detail"]
    r = await client.patch(f"/admin/memory/{old['id']}", json={"merged_into": new["id"]})
    assert r.status_code == 200 and r.json()["merged_into"] == new["id"]
    assert (
        await client.delete("/memory/facts/preferred_language", headers=alice)
    ).status_code == 204
    every = (await client.get("/admin/memory", params={"include_merged": "true"})).json()["items"]
    assert [f["key"] for f in every] == ["home_city"]


async def test_rewrite_revives_hidden_row(client: AsyncTestClient) -> None:
    old = await _save(client, category="env", key="os", value="Debian 12")
    new = await _save(client, category="env", key="operating_system", value="macOS", dedupe=True)
    assert new["merged"] == [old["id"]]
    again = await _save(client, category="env", key="os", value="Arch Linux", dedupe=True)
    assert again["id"] == old["id"] and again["merged_into"] is None
    assert again["merged"] == [new["id"]]
    items = (await client.get("/memory/facts")).json()["items"]
    assert [(f["key"], f["value"]) for f in items] == [("os", "Arch Linux")]


async def test_expired_facts_are_invisible(client: AsyncTestClient, db_url: str) -> None:
    fact = await _save(client, category="plans", key="trip", value="Tokyo in May", expires_days=3)
    assert fact["expires_at"] is not None
    await _save(client, category="plans", key="gym", value="Tokyo gym on Mondays")
    sql(
        db_url,
        "UPDATE memory_facts SET expires_at = now() - interval '1 hour' WHERE id = %s",
        fact["id"],
    )

    assert [f["key"] for f in (await client.get("/memory/facts")).json()["items"]] == ["gym"]
    for q in ("Tokyo", "plans trip: Tokyo in May"):
        hits = (await client.get("/memory/facts/search", params={"q": q})).json()["items"]
        assert [h["key"] for h in hits] == ["gym"], q
    assert (await client.get("/memory/categories")).json()["total"] == 1
    every = (await client.get("/admin/memory", params={"include_merged": "true"})).json()
    assert every["total"] == 1
    r = await client.patch(f"/admin/memory/{fact['id']}", json={"merged_into": None})
    assert r.status_code == 404
    # re-saving the key makes it a live fact again (and without expiry)
    again = await _save(client, category="plans", key="trip", value="Osaka in June")
    assert again["id"] == fact["id"] and again["expires_at"] is None


async def test_search_degrades_when_ollama_is_down(
    client: AsyncTestClient, ollama: FakeOllama
) -> None:
    await _save(client, category="preferences", key="editor", value="neovim")
    ollama.fail("refuse")
    stored = await _save(client, category="preferences", key="shell", value="fish")
    assert stored["has_embedding"] is False  # stored anyway, embedded later by backfill
    hits = (await client.get("/memory/facts/search", params={"q": "which editor, neovim?"})).json()
    assert hits["mode"] == "text" and [h["key"] for h in hits["items"]] == ["editor"]
    hits = (await client.get("/memory/facts/search", params={"q": "shell fish"})).json()
    assert [h["key"] for h in hits["items"]] == ["shell"] and hits["items"][0]["score"] >= 2
    ollama.recover()
    # same value, embedding failed earlier: a later save embeds it
    again = await _save(client, category="preferences", key="shell", value="fish")
    assert again["has_embedding"] is True


async def test_categories_are_paged_most_facts_first(client: AsyncTestClient) -> None:
    for category, n in (("a", 1), ("b", 3), ("c", 2)):
        for i in range(n):
            fact = {"category": category, "key": f"k{i}", "value": f"v{i}"}
            assert (await client.post("/memory/facts", json=fact)).status_code == 201
    r = await client.get("/memory/categories", params={"limit": 2})
    assert r.json() == {
        "categories": [{"category": "b", "count": 3}, {"category": "c", "count": 2}],
        "total": 6,
        "category_count": 3,
        "limit": 2,
        "offset": 0,
        "has_more": True,
    }
    rest = (await client.get("/memory/categories", params={"limit": 2, "offset": 2})).json()
    assert rest["categories"] == [{"category": "a", "count": 1}] and not rest["has_more"]
    assert (await client.get("/memory/categories", params={"limit": 201})).status_code == 422
