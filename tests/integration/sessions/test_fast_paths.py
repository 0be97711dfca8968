"""The speed work of docs/performance.md ("Session store") keeps the answers: the list's
page + total in one statement, capped match positions (and the rare-term path giving the
same answer), the per-session search fence, and the cached token → principal lookup."""

from __future__ import annotations

import uuid

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import session_factory, transaction
from app.db.models import Session
from app.domain.kernel.access import Viewer
from app.domain.sessions.message_repository import MessageRepository
from app.domain.sessions.queries import MATCHES_RARE_SQL, MATCHES_SQL, search_filters
from app.domain.sessions.repositories import SessionRepository
from app.lib.sql import contains_pattern
from tests.conftest import new_user
from tests.integration.sessions.test_sessions import _append, _session


async def _owner(db, sid: str) -> str:  # type: ignore[no-untyped-def]
    """The session's user (the tenant key the message statements name)."""
    return (
        await db.execute(text("SELECT user_id FROM sessions WHERE id = :id"), {"id": sid})
    ).scalar_one()


async def test_list_total_from_the_same_statement(client: AsyncTestClient) -> None:
    ids = [await _session(client, name=f"s{i}") for i in range(5)]
    for sid in ids[:3]:
        await _append(client, sid, [{"role": "user", "content": f"needle in {sid}"}])
    body = (await client.get("/sessions", params={"limit": 2})).json()
    assert body["total"] == 5 and len(body["items"]) == 2 and body["has_more"]
    body = (await client.get("/sessions", params={"limit": 2, "offset": 4})).json()
    assert body["total"] == 5 and len(body["items"]) == 1 and not body["has_more"]
    # past the end: no row carries the window's total, it is counted on its own
    body = (await client.get("/sessions", params={"limit": 2, "offset": 9})).json()
    assert body["total"] == 5 and body["items"] == [] and not body["has_more"]
    body = (await client.get("/sessions", params={"search": "needle", "limit": 1})).json()
    assert body["total"] == 3 and len(body["items"]) == 1
    assert body["items"][0]["preview"].startswith("needle in")
    body = (await client.get("/sessions", params={"search": "nothing like it"})).json()
    assert body == {
        "items": [],
        "total": 0,
        "limit": 50,
        "offset": 0,
        "has_more": False,
        "next_cursor": None,
    }
    names = [
        s["name"]
        for s in (
            await client.get("/sessions", params={"sort_by": "name", "sort_order": "asc"})
        ).json()["items"]
    ]
    assert names == sorted(names)


async def test_match_positions_are_capped_in_display_order(
    client: AsyncTestClient, engine: AsyncEngine
) -> None:
    sid = await _session(client)
    msgs = []
    for i in range(12):
        content = f"step {i}: DePloy now" if i % 2 == 0 else f"step {i}: nothing"
        msgs.append({"role": "assistant", "content": content})
    msgs.insert(3, {"role": "tool", "content": "deploy hidden", "is_display": False})
    await _append(client, sid, msgs)
    # The older half moves to the archive: positions span both tables.
    async with transaction(session_factory(engine)) as s:
        await s.execute(text("UPDATE session_messages SET is_context = false"))
        owner = await _owner(s, sid)
        assert await MessageRepository(s).archive_old_messages(owner, uuid.UUID(sid), 7) == 7

    async def matches(**params):  # type: ignore[no-untyped-def]
        r = await client.get("/sessions/matches", params={"session_id": [sid], **params})
        assert r.status_code == 200, r.text
        return r.json()["sessions"]

    (full,) = await matches(q="deploy")
    assert full["positions"] == [0, 2, 4, 6, 8, 10]
    assert full["match_count"] == 6 and full["truncated"] is False
    assert "step 0: DePloy now" in full["snippet"]
    (capped,) = await matches(q="DEPLOY", max_positions=4)
    assert capped["positions"] == [0, 2, 4, 6]
    assert capped["match_count"] == 4 and capped["truncated"] is True
    (exact,) = await matches(q="deploy", max_positions=6)
    assert exact["truncated"] is False and exact["match_count"] == 6
    r = await client.get(
        "/sessions/matches", params={"q": "x", "session_id": [sid], "max_positions": 0}
    )
    assert r.status_code == 422 and "max_positions" in r.json()["detail"]
    r = await client.get(
        "/sessions/matches", params={"q": "x", "session_id": [sid], "max_positions": 1001}
    )
    assert r.status_code == 422


async def test_match_terms_are_literal_and_both_paths_agree(
    client: AsyncTestClient, engine: AsyncEngine
) -> None:
    sid = await _session(client)
    await _append(
        client,
        sid,
        [
            {"role": "user", "content": "100% sure"},
            {"role": "user", "content": "100 percent"},
            {"role": "user", "content": "a_b and a\\b"},
            {"role": "user", "content": "axb"},
            {"role": "user", "content": "ÄRGER groß"},
        ],
    )
    expected = {"0%": [0], "%": [0], "a_b": [2], "_": [2], "a\\b": [2], "ärger": [4], "GROSS": []}
    for term, positions in expected.items():
        r = await client.get("/sessions/matches", params={"q": term, "session_id": [sid]})
        got = [s["positions"] for s in r.json()["sessions"]]
        assert got == ([positions] if positions else []), term
    # The rare-term statement (trigram index + ILIKE) gives the same answers.
    async with session_factory(engine)() as s:
        owner = await _owner(s, sid)
        for term in [*expected, "100"]:
            params = {
                "uid": owner,
                "ids": [uuid.UUID(sid)],
                "pattern": contains_pattern(term),
                "term": term,
            }
            ordered = (await s.execute(MATCHES_SQL, {**params, "cap": 2})).all()
            rare = (await s.execute(MATCHES_RARE_SQL, {**params, "cap": 2})).all()
            assert [(r.session_id, r.positions, r.snippet) for r in ordered] == [
                (r.session_id, r.positions, r.snippet) for r in rare
            ], term
            assert [min(r.match_count, 3) for r in ordered] == [
                min(r.match_count, 3) for r in rare
            ], term


async def test_user_search_keeps_its_offset_0_fence(
    client: AsyncTestClient, engine: AsyncEngine
) -> None:
    """Without the trigram index a user's search probes that user's sessions one by one:
    `OFFSET 0` in the EXISTS subqueries stops PostgreSQL from turning them into hashed
    subplans over every message (commit 1e4cfea: 10-14 s on the embedded server)."""
    uid, headers = await new_user(client, "fence")
    await _session(client, headers)
    viewer = Viewer(user_id=uid)

    def statement(per_session: bool):  # type: ignore[no-untyped-def]
        stmt = select(func.count()).select_from(Session).where(Session.user_id == uid)
        return search_filters(stmt, None, "rare term", per_session=per_session)

    async with session_factory(engine)() as s:
        repo = SessionRepository(s)
        indexed = await repo._trigram_indexed()
        assert await repo._per_session_search(viewer, "rare term") is (not indexed)
        assert await repo._per_session_search(Viewer(uid, all_users=True), "x") is False
        compiled = statement(True).compile(s.get_bind(), compile_kwargs={"literal_binds": True})
        assert str(compiled).count("OFFSET 0") == 2
        plan = "\n".join(
            r[0] for r in (await s.execute(text(f"EXPLAIN (COSTS OFF) {compiled}"))).all()
        )
        assert "hashed" not in plan and plan.count("SubPlan") >= 2, plan
        assert "session_id = sessions.id" in plan, plan  # probed per session
        # (the literal pattern renders as '%%…%%' here: the plan's shape is the point)
        unfenced = statement(False).compile(s.get_bind(), compile_kwargs={"literal_binds": True})
        assert "OFFSET" not in str(unfenced)
        plan2 = "\n".join(
            r[0] for r in (await s.execute(text(f"EXPLAIN (COSTS OFF) {unfenced}"))).all()
        )
        # … which is what the planner does without the fence, even on these empty tables
        assert "hashed SubPlan" in plan2, plan2


async def test_revoked_token_and_deleted_user_stop_at_once(
    client: AsyncTestClient,
) -> None:
    uid, headers = await new_user(client, "cached")
    assert (await client.get("/me", headers=headers)).status_code == 200
    cache = client.app.state.runtime.principal_cache
    assert len(cache) >= 1  # the token was resolved once and is now cached
    assert (await client.get("/me", headers=headers)).status_code == 200
    r = await client.delete(f"/admin/users/{uid}")
    assert r.status_code == 204
    r = await client.get("/me", headers=headers)
    assert r.status_code == 401 and "revoked" in r.json()["detail"]
    # A failed request (rolled back) drops nothing: a 404 revoke keeps the admin cached.
    assert (await client.delete(f"/me/tokens/{uuid.uuid4()}")).status_code == 404
    assert (await client.get("/me")).status_code == 200


@pytest.mark.parametrize("ttl", [30.0, 0.0])
async def test_other_processes_see_a_revoke_within_the_ttl(
    make_client, settings, ttl: float
) -> None:  # type: ignore[no-untyped-def]
    """Two app instances on one database stand for two worker processes: the one that
    revokes stops the token at once; the other within AUTH_CACHE_TTL_SECONDS (at once
    with 0, the cache off)."""
    from tests.conftest import ADMIN_TOKEN

    async with make_client(settings) as a, make_client(settings, auth_cache_ttl_seconds=ttl) as b:
        a.headers["Authorization"] = b.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, headers = await new_user(a, "roaming")
        assert (await b.get("/me", headers=headers)).status_code == 200
        tid = (await a.get("/me/tokens", headers=headers)).json()["items"][0]["id"]
        assert (await a.delete(f"/me/tokens/{tid}", headers=headers)).status_code == 204
        assert (await a.get("/me", headers=headers)).status_code == 401
        expected = 200 if ttl else 401
        assert (await b.get("/me", headers=headers)).status_code == expected
