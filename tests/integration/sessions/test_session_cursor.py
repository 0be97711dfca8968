"""`GET /sessions?cursor=…`: keyset paging. Offsets over `last_active` skip and repeat
sessions when others become active while a client walks the pages; a cursor neither
skips nor repeats a session that did not move."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.conftest import new_user


async def _session(client: AsyncTestClient, headers: dict[str, str], **body: Any) -> str:
    r = await client.post("/sessions", json={"profile_id": "default", **body}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _touch(client: AsyncTestClient, sid: str, headers: dict[str, str]) -> None:
    body = {"messages": [{"role": "user", "content": "still here"}]}
    r = await client.post(f"/sessions/{sid}/messages", json=body, headers=headers)
    assert r.status_code == 201, r.text


async def _walk(
    client: AsyncTestClient,
    headers: dict[str, str],
    limit: int,
    between: Any = None,
    **params: Any,
) -> list[str]:
    """Every page by cursor; `between(page_number)` runs after each page."""
    seen: list[str] = []
    cursor = None
    for number in range(100):
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        r = await client.get("/sessions", params=query, headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["offset"] == 0
        seen += [s["id"] for s in body["items"]]
        if between is not None:
            await between(number)
        if not body["has_more"]:
            assert body["next_cursor"] is None
            return seen
        cursor = body["next_cursor"]
    raise AssertionError("the walk did not end")


async def test_a_walk_neither_skips_nor_repeats_while_sessions_become_active(
    client: AsyncTestClient,
) -> None:
    _, alice = await new_user(client, "alice")
    ids = [await _session(client, alice, name=f"s{i}") for i in range(8)]
    for sid in ids:  # oldest activity first: the list (newest first) is ids reversed
        await _touch(client, sid, alice)
    moved: set[str] = set()

    async def activity(page: int) -> None:
        if page == 0:  # two sessions not listed yet jump to the top
            for sid in ids[:2]:
                await _touch(client, sid, alice)
                moved.add(sid)

    seen = await _walk(client, alice, 3, activity)
    assert len(seen) == len(set(seen)), "a session came twice"
    assert set(ids) - moved <= set(seen), "a session that did not move was skipped"


async def test_every_order_walks_the_whole_list_in_order(client: AsyncTestClient) -> None:
    """Pinned first, names with nulls (last in either direction), equal names (the id
    breaks the tie): the cursor's walk is the one-page list, for each order."""
    _, bob = await new_user(client, "bob")
    names = ["b", None, "a", "b", None, "c", "a"]
    ids = [await _session(client, bob, **({"name": n} if n else {})) for n in names]
    for sid in (ids[1], ids[3]):
        r = await client.patch(f"/sessions/{sid}", json={"pinned": True}, headers=bob)
        assert r.status_code == 200, r.text
    for sort_by in ("name", "created_at", "last_active"):
        for sort_order in ("asc", "desc"):
            order = {"sort_by": sort_by, "sort_order": sort_order}
            r = await client.get("/sessions", params={"limit": 50, **order}, headers=bob)
            whole = [s["id"] for s in r.json()["items"]]
            assert len(whole) == 7
            assert await _walk(client, bob, 2, **order) == whole, order


async def test_the_total_counts_every_session_on_every_page(client: AsyncTestClient) -> None:
    _, carol = await new_user(client, "carol")
    for _ in range(5):
        await _session(client, carol)
    r = await client.get("/sessions", params={"limit": 2}, headers=carol)
    first = r.json()
    assert (first["total"], first["has_more"]) == (5, True)
    r = await client.get(
        "/sessions", params={"limit": 2, "cursor": first["next_cursor"]}, headers=carol
    )
    assert (r.json()["total"], len(r.json()["items"])) == (5, 2)


async def test_an_admin_walks_every_users_sessions(client: AsyncTestClient) -> None:
    _, dan = await new_user(client, "dan")
    _, erin = await new_user(client, "erin")
    for headers in (dan, erin, dan, erin, dan):
        await _session(client, headers)
    r = await client.get("/sessions", params={"limit": 100})
    whole = [s["id"] for s in r.json()["items"]]
    assert await _walk(client, {}, 2) == whole


async def test_a_bad_cursor_is_a_400_naming_it(client: AsyncTestClient) -> None:
    _, fay = await new_user(client, "fay")
    for _ in range(3):
        await _session(client, fay)
    r = await client.get("/sessions", params={"limit": 1}, headers=fay)
    cursor = r.json()["next_cursor"]
    for params, needle in [
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": cursor, "sort_by": "name"}, "sort_by=last_active"),
        ({"cursor": cursor, "offset": 1}, "offset"),
    ]:
        r = await client.get("/sessions", params={"limit": 1, **params}, headers=fay)
        assert r.status_code == 400, r.text
        assert needle in r.json()["detail"]
