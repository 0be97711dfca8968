import asyncio
import time

from litestar.testing import AsyncTestClient

from tests.conftest import ADMIN_TOKEN, new_user


async def test_health_reports_everything(client: AsyncTestClient) -> None:
    r = await client.get("/health", headers={"Authorization": ""})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["database"] is True
    assert body["at_head"] is True and body["revision"] == body["head"]
    assert body["extensions"]["vector"] is True
    assert body["extensions"]["vector_version"]
    assert body["ollama"] is True
    assert body["embedding"] == "ok"
    assert body["status"] == "ok"


async def test_health_with_ollama_down_answers_fast(client: AsyncTestClient, ollama) -> None:
    ollama.slow_seconds = 5
    ollama.fail("slow")
    started = time.perf_counter()
    r = await client.get("/health")
    elapsed = time.perf_counter() - started
    assert r.status_code == 200
    assert r.json()["ollama"] is False
    assert r.json()["status"] == "degraded"
    assert elapsed < 2.5


async def test_health_reports_wrong_embedding_dimension(client: AsyncTestClient, ollama) -> None:
    ollama.fail("wrong_dim")
    body = (await client.get("/health")).json()
    assert "dimension" in body["embedding"]


async def test_openapi_schema(client: AsyncTestClient) -> None:
    r = await client.get("/schema/openapi.json")
    assert r.status_code == 200
    assert "/health" in r.json()["paths"]


async def test_missing_invalid_and_revoked_tokens_are_401(client: AsyncTestClient) -> None:
    r = await client.get("/me", headers={"Authorization": ""})
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    r = await client.get("/me", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    r = await client.get("/me", headers={"Authorization": f"Basic {ADMIN_TOKEN}"})
    assert r.status_code == 401
    uid, headers = await new_user(client, "alice")
    assert (await client.get("/me", headers=headers)).json()["id"] == uid
    tokens = (await client.get("/me/tokens", headers=headers)).json()
    assert tokens["total"] == 1 and "token" not in tokens["items"][0]
    tid = tokens["items"][0]["id"]
    assert (await client.delete(f"/me/tokens/{tid}", headers=headers)).status_code == 204
    r = await client.get("/me", headers=headers)
    assert r.status_code == 401 and "revoked" in r.json()["detail"]


async def test_user_cannot_revoke_someone_elses_token(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    tid = (await client.get("/me/tokens", headers=alice)).json()["items"][0]["id"]
    assert (await client.delete(f"/me/tokens/{tid}", headers=bob)).status_code == 404
    assert (await client.get("/me", headers=alice)).status_code == 200


async def test_admin_endpoints_need_admin(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice", permissions=["navi.sessions.read_all"])
    r = await client.post("/admin/users", json={"name": "mallory"}, headers=alice)
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert (await client.get("/admin/users", headers=alice)).status_code == 403
    r = await client.get("/admin/users")
    assert r.status_code == 200 and r.json()["total"] >= 2


async def test_user_creation_validation(client: AsyncTestClient) -> None:
    r = await client.post("/admin/users", json={"name": "bad name!"})
    assert r.status_code == 422 and "name" in r.json()["detail"]
    r = await client.post("/admin/users", json={"name": "x", "permissions": ["navi.god"]})
    assert r.status_code == 422 and "navi.god" in r.json()["detail"]
    await new_user(client, "dup")
    assert (await client.post("/admin/users", json={"name": "dup"})).status_code == 409
    r = await client.post("/admin/users", json={"name": "y", "unexpected": 1})
    assert r.status_code in (400, 422)


async def test_every_non_public_route_requires_a_token(client: AsyncTestClient) -> None:
    """No route may forget the principal dependency."""
    spec = (await client.get("/schema/openapi.json")).json()
    public = ("/health", "/schema", "/shared", "/")
    checked = 0
    for path, ops in spec["paths"].items():
        if path == "/" or any(path.startswith(p) for p in public if p != "/"):
            continue
        concrete = path
        for part in path.split("/"):
            if part.startswith("{"):
                concrete = concrete.replace(part, "00000000-0000-0000-0000-000000000000")
        for method in ops:
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            r = await client.request(method.upper(), concrete, headers={"Authorization": ""})
            assert r.status_code == 401, (method, path, r.status_code)
            checked += 1
    assert checked >= 5


async def test_anonymous_mode(anon_client: AsyncTestClient) -> None:
    me = (await anon_client.get("/me")).json()
    assert me["id"] == "anonymous" and me["auth_enabled"] is False
    assert (await anon_client.post("/me/tokens", json={})).status_code == 403


async def test_request_id_header(client: AsyncTestClient) -> None:
    r = await client.get("/health", headers={"X-Request-ID": "abc123"})
    assert r.headers["x-request-id"] == "abc123"
    r = await client.get("/health")
    assert len(r.headers["x-request-id"]) == 32


async def test_concurrent_requests(client: AsyncTestClient) -> None:
    rs = await asyncio.gather(*(client.get("/me") for _ in range(20)))
    assert all(r.status_code == 200 for r in rs)


async def test_built_in_users_cannot_be_deleted(
    client: AsyncTestClient, make_client, settings
) -> None:  # type: ignore[no-untyped-def]
    _, second_admin = await new_user(client, "root2", is_admin=True)
    for headers in (None, second_admin):  # the bootstrap admin, and another admin
        for built_in in ("admin", "anonymous"):
            r = await client.delete(f"/admin/users/{built_in}", headers=headers)
            assert r.status_code == 409, (built_in, r.text)
            assert r.json()["error"] == "conflict"
            assert f"'{built_in}' is built in" in r.json()["detail"]
    # both still there; the bootstrap token still works; local mode still has its owner
    users = {u["id"]: u for u in (await client.get("/admin/users")).json()["items"]}
    assert users["admin"]["is_admin"] is True and "anonymous" in users
    assert (await client.get("/me")).json()["id"] == "admin"
    async with make_client(settings, auth_enabled=False) as local:
        r = await local.post("/sessions", json={"profile_id": "code"})
        assert r.status_code == 201 and r.json()["user_id"] == "anonymous"
    # an ordinary user can still be deleted; yourself still cannot
    uid, _ = await new_user(client, "temp")
    assert (await client.delete(f"/admin/users/{uid}")).status_code == 204
    me = (await client.get("/me", headers=second_admin)).json()["id"]
    r = await client.delete(f"/admin/users/{me}", headers=second_admin)
    assert r.status_code == 422 and "yourself" in r.json()["detail"]


async def test_nosniff_on_every_response(client: AsyncTestClient) -> None:
    """App-wide (a before_send hook): handlers, errors, the router's own 404/405."""
    responses = [
        await client.get("/health"),
        await client.get("/me"),
        await client.get("/me", headers={"Authorization": ""}),  # 401 from the guard
        await client.get("/nope"),  # 404 from the router
        await client.put("/health"),  # 405
        await client.post("/sessions", content=b"{", headers={"Content-Type": "application/json"}),
        await client.get("/schema/openapi.json"),
        await client.get("/"),
        await client.options("/sessions"),
    ]
    for r in responses:
        assert r.headers.get("x-content-type-options") == "nosniff", (r.request.url, r.status_code)
        assert r.headers.get_list("x-content-type-options") == ["nosniff"]
