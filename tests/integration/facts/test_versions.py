"""Fact versions over HTTP: a change adds a version and closes the previous one, the same
value confirms, a delete closes; the history (paged, per user), `as_of`, restore, a
merge and its undo, the memory tool's `history`; the migration's backfill."""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
from litestar.testing import AsyncTestClient

from app.db import migrate
from tests.conftest import new_user
from tests.integration.facts.conftest import sql


async def _save(client: AsyncTestClient, headers=None, **body) -> dict:  # type: ignore[no-untyped-def]
    r = await client.post("/memory/facts", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


async def _history(client: AsyncTestClient, fact_id: int, headers=None, **params) -> dict:  # type: ignore[no-untyped-def]
    r = await client.get(f"/memory/facts/{fact_id}/history", params=params, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def _t(raw: str) -> datetime:
    return datetime.fromisoformat(raw)


async def test_a_change_adds_a_version_the_same_value_confirms_a_delete_closes(
    client: AsyncTestClient, db_url: str
) -> None:
    first = await _save(client, category="home", key="city", value="Lyon")
    verified = sql(db_url, "select last_verified_at from memory_facts where id = %s", first["id"])
    again = await _save(client, category="home", key="city", value="Lyon")
    assert again["id"] == first["id"]
    history = await _history(client, first["id"])
    assert history["total"] == 1 and history["items"][0]["current"]
    assert sql(db_url, "select last_verified_at from memory_facts where id = %s", first["id"]) != (
        verified
    )

    await _save(client, category="home", key="city", value="Berlin")
    items = (await _history(client, first["id"]))["items"]
    assert [v["value"] for v in items] == ["Berlin", "Lyon"]  # newest first
    new, old = items
    assert new["current"] and new["valid_to"] is None
    assert not old["current"] and old["valid_to"] == new["valid_from"]
    assert (new["category"], new["key"], new["fact_id"]) == ("home", "city", first["id"])

    assert (await client.delete("/memory/facts/city")).status_code == 204
    items = (await _history(client, first["id"]))["items"]  # a deleted fact keeps its history
    assert [v["value"] for v in items] == ["Berlin", "Lyon"]
    assert items[0]["valid_to"] is not None and not items[0]["current"]
    assert _t(items[0]["valid_to"]) >= _t(items[0]["valid_from"])
    open_ = sql(db_url, "select count(*) from fact_versions where valid_to is null")
    assert open_ == [(0,)]


async def test_the_session_of_a_save_is_kept_on_its_version(client: AsyncTestClient) -> None:
    sid = (await client.post("/sessions", json={"profile_id": "default"})).json()["id"]
    fact = await _save(client, category="job", key="employer", value="Acme", source_session_id=sid)
    assert (await _history(client, fact["id"]))["items"][0]["session_id"] == sid


async def test_history_is_paged_newest_first_and_another_users_fact_is_404(
    client: AsyncTestClient,
) -> None:
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    fact = {}
    for i in range(5):
        fact = await _save(client, alice, category="budget", key="monthly", value=f"{i}00 EUR")
    first = await _history(client, fact["id"], alice, limit=2)
    assert [v["value"] for v in first["items"]] == ["400 EUR", "300 EUR"]
    assert first["total"] == 5 and first["has_more"] and first["next_cursor"]
    second = await _history(client, fact["id"], alice, limit=2, cursor=first["next_cursor"])
    assert [v["value"] for v in second["items"]] == ["200 EUR", "100 EUR"]
    last = await _history(client, fact["id"], alice, limit=2, cursor=second["next_cursor"])
    assert [v["value"] for v in last["items"]] == ["000 EUR"]
    assert not last["has_more"] and last["next_cursor"] is None

    r = await client.get(f"/memory/facts/{fact['id']}/history", headers=bob)
    assert r.status_code == 404
    r = await client.get("/memory/facts/999999/history", headers=alice)
    assert r.status_code == 404
    r = await client.get("/memory/facts/abc/history", headers=alice)
    assert r.status_code == 422
    r = await client.get(
        f"/memory/facts/{fact['id']}/history", params={"cursor": "x"}, headers=alice
    )
    assert r.status_code == 422


async def test_as_of_answers_with_the_values_true_then(client: AsyncTestClient) -> None:
    lyon = await _save(client, category="home", key="city", value="Lyon")
    await _save(client, category="pets", key="cat", value="Mimi")
    await _save(client, category="home", key="city", value="Berlin")
    versions = (await _history(client, lyon["id"]))["items"]
    berlin_from = _t(versions[0]["valid_from"])
    lyon_from = _t(versions[1]["valid_from"])

    async def as_of(at: datetime, **params: str) -> dict[str, str]:
        r = await client.get("/memory/facts", params={"as_of": at.isoformat(), **params})
        assert r.status_code == 200, r.text
        return {f["key"]: f["value"] for f in r.json()["items"]}

    assert await as_of(lyon_from - timedelta(seconds=1)) == {}
    assert await as_of(berlin_from - timedelta(microseconds=1)) == {"city": "Lyon", "cat": "Mimi"}
    assert await as_of(berlin_from) == {"city": "Berlin", "cat": "Mimi"}
    assert await as_of(berlin_from, category="home") == {"city": "Berlin"}
    assert await as_of(berlin_from, search="mim") == {"cat": "Mimi"}

    assert (await client.delete("/memory/facts/cat")).status_code == 204
    after = datetime.fromisoformat((await _history(client, lyon["id"]))["items"][0]["valid_from"])
    assert "cat" in await as_of(after)  # still valid then, though deleted since
    page = (await client.get("/memory/facts", params={"as_of": "2999-01-01T00:00:00Z"})).json()
    assert [(f["key"], f["value"]) for f in page["items"]] == [("city", "Berlin")]
    item = page["items"][0]
    assert item["id"] == lyon["id"] and item["version_id"] == versions[0]["id"]
    assert item["valid_to"] is None and item["valid_from"] == versions[0]["valid_from"]
    r = await client.get("/memory/facts", params={"as_of": "2026-01-01T00:00:00"})
    assert r.status_code == 422  # no time zone


async def test_restore_makes_an_old_value_current_as_a_new_version(
    client: AsyncTestClient,
) -> None:
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    fact = await _save(client, alice, category="tools", key="database", value="Postgres 15")
    await _save(client, alice, category="tools", key="database", value="MySQL")
    old = (await _history(client, fact["id"], alice))["items"][1]
    assert old["value"] == "Postgres 15"

    r = await client.post(
        f"/memory/facts/{fact['id']}/restore", json={"version_id": old["id"]}, headers=alice
    )
    assert r.status_code == 200, r.text
    assert r.json()["value"] == "Postgres 15" and r.json()["id"] == fact["id"]
    items = (await _history(client, fact["id"], alice))["items"]
    assert [v["value"] for v in items] == ["Postgres 15", "MySQL", "Postgres 15"]
    assert items[0]["id"] != old["id"] and items[2]["valid_to"] is not None  # nothing rewritten
    listed = (await client.get("/memory/facts", headers=alice)).json()["items"]
    assert [f["value"] for f in listed] == ["Postgres 15"]

    r = await client.post(
        f"/memory/facts/{fact['id']}/restore", json={"version_id": old["id"]}, headers=bob
    )
    assert r.status_code == 404
    other = await _save(client, alice, category="tools", key="editor", value="vim")
    r = await client.post(
        f"/memory/facts/{other['id']}/restore", json={"version_id": old["id"]}, headers=alice
    )
    assert r.status_code == 422 and "version_id" in r.json()["detail"]


async def test_a_deleted_fact_is_restored_as_a_new_fact(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    fact = await _save(client, alice, category="home", key="city", value="Lyon")
    await _save(client, alice, category="home", key="city", value="Berlin")
    assert (await client.delete("/memory/facts/city", headers=alice)).status_code == 204
    lyon = (await _history(client, fact["id"], alice))["items"][1]
    assert lyon["value"] == "Lyon"
    url = f"/memory/facts/{fact['id']}/restore"
    assert (await client.post(url, json={"version_id": lyon["id"]}, headers=bob)).status_code == 404

    r = await client.post(url, json={"version_id": lyon["id"]}, headers=alice)
    assert r.status_code == 200, r.text
    restored = r.json()
    assert (restored["category"], restored["key"], restored["value"]) == ("home", "city", "Lyon")
    assert restored["id"] != fact["id"]  # a new fact, as a save after a delete is
    listed = (await client.get("/memory/facts", headers=alice)).json()["items"]
    assert [(f["id"], f["value"]) for f in listed] == [(restored["id"], "Lyon")]
    old = (await _history(client, fact["id"], alice))["items"]
    assert [v["value"] for v in old] == ["Berlin", "Lyon"]  # the old id's history untouched
    assert [v["value"] for v in (await _history(client, restored["id"], alice))["items"]] == [
        "Lyon"
    ]


async def test_a_merge_and_its_undo_keep_both_facts_versions(client: AsyncTestClient) -> None:
    old = await _save(client, category="preferences", key="language", value="Go")
    await _save(client, category="preferences", key="language", value="Rust")
    new = await _save(
        client, category="preferences", key="preferred_language", value="Rust", dedupe=True
    )
    assert new["merged"] == [old["id"]]
    assert [v["value"] for v in (await _history(client, old["id"]))["items"]] == ["Rust", "Go"]
    assert [v["value"] for v in (await _history(client, new["id"]))["items"]] == ["Rust"]
    # a hidden re-spelling is not answered twice by as_of
    now = (await client.get("/memory/facts", params={"as_of": "2999-01-01T00:00:00Z"})).json()
    assert [f["key"] for f in now["items"]] == ["preferred_language"]

    r = await client.patch(f"/admin/memory/{old['id']}", json={"merged_into": None})
    assert r.status_code == 200
    assert [v["value"] for v in (await _history(client, old["id"]))["items"]] == ["Rust", "Go"]
    assert [v["value"] for v in (await _history(client, new["id"]))["items"]] == ["Rust"]
    now = (await client.get("/memory/facts", params={"as_of": "2999-01-01T00:00:00Z"})).json()
    assert sorted(f["key"] for f in now["items"]) == ["language", "preferred_language"]


async def test_the_memory_tool_has_a_history_action(client: AsyncTestClient) -> None:
    for value in ("Lyon", "Berlin"):
        r = await client.post(
            "/tools/memory",
            json={"action": "save", "category": "home", "key": "city", "value": value},
        )
        assert r.status_code == 200, r.text
    r = await client.post("/tools/memory", json={"action": "history", "key": "City"})
    body = r.json()
    assert r.status_code == 200 and body["ok"]
    assert [v["value"] for v in body["versions"]] == ["Berlin", "Lyon"]
    assert "Berlin" in body["text"] and "Lyon" in body["text"] and "until now" in body["text"]
    r = await client.post("/tools/memory", json={"action": "history"})
    assert r.status_code == 422 and "key" in r.json()["detail"]
    r = await client.post("/tools/memory", json={"action": "history", "key": "nope"})
    assert r.json()["ok"] is False and r.json()["versions"] == []


async def test_the_purge_of_expired_facts_closes_their_versions_at_the_expiry(
    client: AsyncTestClient,
    db_url: str,
    factory,  # type: ignore[no-untyped-def]
) -> None:
    from app.db.engine import transaction
    from app.domain.facts.repositories import FactRepository

    fact = await _save(client, category="trip", key="hotel", value="Ibis", expires_days=1)
    sql(
        db_url,
        "update memory_facts set expires_at = now() - interval '10 days' where id = %s",
        fact["id"],
    )
    expiry = sql(db_url, "select expires_at from memory_facts where id = %s", fact["id"])
    async with transaction(factory) as db:
        assert await FactRepository(db).purge_expired(datetime.now().astimezone()) == 1
    rows = sql(db_url, "select valid_to from fact_versions where fact_id = %s", fact["id"])
    assert rows == expiry  # the fact's expiry, not the purge's time


def test_the_migration_gives_every_existing_fact_a_version_and_goes_back(
    empty_db_url: str,
) -> None:
    url = empty_db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    migrate.upgrade(empty_db_url, "b1c2d3e4f5a6")
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("insert into navi_users (id, name) values ('u1', 'u1'), ('u2', 'u2')")
        c.execute(
            "insert into memory_facts (user_id, category, key, value, source_session_id,"
            " expires_at) values"
            " ('u1', 'home', 'city', 'Berlin', '00000000-0000-0000-0000-000000000001', null),"
            " ('u1', 'trip', 'hotel', 'Ibis', null, now() - interval '1 day'),"
            " ('u2', 'home', 'city', 'Oslo', null, now() + interval '1 day')"
        )
    migrate.upgrade(empty_db_url)
    with psycopg.connect(url, autocommit=True) as c:
        rows = c.execute(
            "select v.user_id, v.key, v.value, v.session_id::text, v.valid_to is null,"
            " v.valid_from = f.updated_at, v.fact_id = f.id"
            " from fact_versions v join memory_facts f on f.user_id = v.user_id and f.id = v.fact_id"
            " order by v.user_id, v.key"
        ).fetchall()
    assert rows == [
        ("u1", "city", "Berlin", "00000000-0000-0000-0000-000000000001", True, True, True),
        ("u1", "hotel", "Ibis", None, False, True, True),  # expired: closed at its expiry
        ("u2", "city", "Oslo", None, True, True, True),
    ]
    migrate.downgrade(empty_db_url, "b1c2d3e4f5a6")
    with psycopg.connect(url, autocommit=True) as c:
        tables = {r[0] for r in c.execute("select tablename from pg_tables").fetchall()}
        facts = c.execute("select count(*) from memory_facts").fetchone()
    assert "fact_versions" not in tables and facts == (3,)
    migrate.upgrade(empty_db_url)
    migrate.check(empty_db_url)


async def test_memory_search_as_of_answers_with_the_facts_true_then(
    client: AsyncTestClient,
) -> None:
    lyon = await _save(client, category="home", key="city", value="Lyon")
    await _save(client, category="home", key="city", value="Berlin")
    berlin_from = _t((await _history(client, lyon["id"]))["items"][0]["valid_from"])
    before = (berlin_from - timedelta(microseconds=1)).isoformat()

    async def fact_texts(path: str, **body: object) -> list[str]:
        r = await client.post(path, json={"query": "home city", "scope": "facts", **body})
        assert r.status_code == 200, r.text
        return [h["text"] for h in r.json()["hits"] if h["source_type"] == "fact"]

    assert await fact_texts("/memory/search", as_of=before) == ["city: Lyon"]
    assert await fact_texts("/memory/search") == ["city: Berlin"]
    assert await fact_texts("/tools/memory_search", as_of=before) == ["city: Lyon"]
    r = await client.post("/tools/memory_search", json={"query": "city", "as_of": "yesterday"})
    assert r.status_code == 422 and "as_of" in r.json()["detail"]


async def test_forget_leaves_the_text_in_no_version(client: AsyncTestClient, db_url: str) -> None:
    passport = await _save(client, category="ids", key="passport", value="X1234567")
    await _save(client, category="ids", key="passport", value="Y7654321")  # the text's in v1
    other = await _save(client, category="notes", key="travel", value="old passport X1234567")
    await _save(client, category="notes", key="travel", value="renewed")
    kept = await _save(client, category="home", key="city", value="Lyon")
    r = await client.post("/memory/forget", json={"text": "x1234567"})
    assert r.status_code == 200, r.text
    changed = r.json()["changed"]
    # the fact now holding the text is deleted with its whole history; the other fact
    # keeps its versions but the one that held the text
    assert changed["facts"] == 0  # no fact holds it now
    rows = sql(db_url, "select fact_id, value from fact_versions order by id")
    assert rows is not None
    assert not [r for r in rows if "1234567" in r[1]]
    assert (passport["id"], "Y7654321") in rows and (kept["id"], "Lyon") in rows
    assert [v for f, v in rows if f == other["id"]] == ["renewed"]
    assert changed["fact_versions"] == 2
    r = await client.post("/memory/forget", json={"text": "Y7654321"})
    assert r.json()["changed"]["facts"] == 1 and r.json()["changed"]["fact_versions"] == 1
    assert sql(db_url, "select count(*) from fact_versions where fact_id = %s", passport["id"]) == [
        (0,)
    ]


async def test_export_and_import_carry_the_versions(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice")
    city = await _save(client, alice, category="home", key="city", value="Lyon")
    await _save(client, alice, category="home", key="city", value="Berlin")
    await _save(client, alice, category="pets", key="cat", value="Mimi")
    assert (await client.delete("/memory/facts/cat", headers=alice)).status_code == 204
    await _save(client, alice, category="pets", key="cat", value="Felix")  # a new fact, new id
    before = (await _history(client, city["id"], alice))["items"]
    before_cat = (
        await client.post("/tools/memory", json={"action": "history", "key": "cat"}, headers=alice)
    ).json()

    body = (await client.get("/me/export", headers=alice)).content
    records = [r for r in body.decode().splitlines() if '"fact_version"' in r]
    assert len(records) == 4
    _, bob = await new_user(client, "bob")
    r = await client.post("/me/import", content=body, headers=bob)
    assert r.status_code == 201, r.text
    assert r.json()["records"]["fact_version"] == 4

    facts = (await client.get("/memory/facts", headers=bob)).json()["items"]
    new_city = next(f for f in facts if f["key"] == "city")
    after = (await _history(client, new_city["id"], bob))["items"]
    drop = ("id", "fact_id")
    assert [{k: v for k, v in x.items() if k not in drop} for x in after] == [
        {k: v for k, v in x.items() if k not in drop} for x in before
    ]
    after_cat = (
        await client.post("/tools/memory", json={"action": "history", "key": "cat"}, headers=bob)
    ).json()
    assert after_cat["text"] == before_cat["text"]  # the deleted fact's version came too
    # the deleted fact's versions have an id of their own, not the live fact's
    ids = {v["fact_id"] for v in after_cat["versions"]}
    cat_id = next(f["id"] for f in facts if f["key"] == "cat")
    assert len(ids) == 2 and cat_id in ids


async def test_an_import_of_a_file_without_versions_gives_each_fact_one(
    client: AsyncTestClient,
) -> None:
    _, alice = await new_user(client, "alice")
    await _save(client, alice, category="home", key="city", value="Lyon")
    await _save(client, alice, category="home", key="city", value="Berlin")
    lines = (await client.get("/me/export", headers=alice)).content.decode().splitlines()
    kept = [x for x in lines if '"fact_version"' not in x]
    kept[-1] = f'{{"type":"end","records":{len(kept) - 2}}}'
    _, bob = await new_user(client, "bob")
    r = await client.post("/me/import", content="\n".join(kept).encode(), headers=bob)
    assert r.status_code == 201, r.text
    fact = (await client.get("/memory/facts", headers=bob)).json()["items"][0]
    items = (await _history(client, fact["id"], bob))["items"]
    assert [(v["value"], v["current"]) for v in items] == [("Berlin", True)]
