"""The role matrix (docs/api.md, "Roles"), checked over every route of the app.

The route list comes from the Litestar app itself (`app.routes`, each handler's methods):
a route without a row in `ROUTES` fails the test, and so does a row whose route is gone.
Every route is called by every actor with real requests against a real database; each
row names a rule of `RULES`, the expected status class per actor.

Actors, all acting on resources of the owner `alice`:

- owner: alice; other: bob (no permission); sessions_reader: `navi.sessions.read_all`;
  memory_reader: `navi.memory.read_all`; admin: the NAVI_ADMIN_TOKEN admin;
- local: local mode (`NAVI_AUTH_ENABLED=false`, every request is `anonymous`) on the
  same database;
- link: no Authorization header at all (what a share-link holder has).

No response to an actor who may not read alice's sessions (or her memory) contains the
secret written into them: the cross-user isolation check rides along every call.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litestar import Litestar
from litestar.routes import ASGIRoute, HTTPRoute
from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import ADMIN_TOKEN, new_user

ACTORS = ("owner", "other", "sessions_reader", "memory_reader", "admin", "local", "link")
OK = "2xx"

# rule: the expected status per actor, in ACTORS order.
RULES: dict[str, tuple[str | int, ...]] = {
    #                 owner other sreader mreader admin local link
    "public": (OK, OK, OK, OK, OK, OK, OK),
    "own": (OK, OK, OK, OK, OK, OK, 401),  # the caller's own account, memory, sessions list
    "own_token_issue": (OK, OK, OK, OK, OK, 403, 401),  # local mode has no tokens
    "alice_token": (OK, 404, 404, 404, 404, 404, 401),  # revoke alice's token
    "alice_fact": (OK, 404, 404, 404, 404, 404, 401),  # /memory is the caller's own
    "session_read": (OK, 404, OK, 404, OK, OK, 401),
    "session_write": (OK, 404, 403, 404, OK, OK, 401),  # append, rename, delete, files…
    "session_share": (OK, 404, 403, 404, OK, 403, 401),  # local: ownerless sessions only
    "memory_read_all": (403, 403, 403, OK, OK, OK, 401),
    "fact_admin": (OK, 404, 404, 403, OK, OK, 401),  # PATCH /admin/memory/{id}
    "users_admin": (403, 403, 403, 403, OK, 403, 401),
    # every actor may import into their own (empty) account; the body here is refused
    # whole (its line 1), so no account changes: tests/integration/transfer has the rest
    "own_import": (422, 422, 422, 422, 422, 422, 401),
    "metrics": (403, 403, 403, 403, OK, OK, 401),  # or METRICS_TOKEN (test_metrics.py)
}

# Who may see what alice wrote (the leak check). Whoever calls /shared/{token} with the
# token is a link holder: those routes show the session to anyone.
SEES_SESSIONS = {"owner", "sessions_reader", "admin", "local", "link"}
LINK_ROUTES = {"/shared/{token:str}", "/shared/{token:str}/messages"}
SEES_MEMORY = {"owner", "memory_reader", "admin", "local"}
SESSION_SECRET = "alice-session-secret-0451"
FACT_SECRET = "alice-fact-secret-0452"


@dataclass
class Req:
    """A concrete request: path parameters and the rest of the client call."""

    params: dict[str, str] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class World:
    """alice's resources, built once; `fresh_*` builds one per call for routes that
    consume it (a delete that succeeds)."""

    admin: AsyncTestClient
    alice_id: str
    alice: dict[str, str]
    sid: str
    fact_id: int
    share_token: str
    share_root: Path
    names: itertools.count = field(default_factory=itertools.count)
    forget_job: str = ""  # one of alice's forget jobs (the matrix's FORGET_WAIT_SECONDS: 0)
    version_id: int = 0  # the current version of alice's fact

    def name(self, prefix: str) -> str:
        return f"{prefix}{next(self.names)}"

    async def fresh_session(self, turns: int = 1) -> str:
        r = await self.admin.post("/sessions", json={"profile_id": "code"}, headers=self.alice)
        sid = r.json()["id"]
        messages = [
            {"role": role, "content": f"{SESSION_SECRET} {i}"}
            for i in range(turns)
            for role in ("user", "assistant")
        ]
        r = await self.admin.post(
            f"/sessions/{sid}/messages", json={"messages": messages}, headers=self.alice
        )
        assert r.status_code == 201, r.text
        return sid

    async def fresh_section(self) -> str:
        section = self.name("section")
        r = await self.admin.put(
            f"/sessions/{self.sid}/scratchpad/{section}",
            json={"value": SESSION_SECRET},
            headers=self.alice,
        )
        assert r.status_code == 200, r.text
        return section

    async def fresh_fact(self) -> str:
        key = self.name("key")
        r = await self.admin.post(
            "/memory/facts",
            json={"category": "prefs", "key": key, "value": FACT_SECRET},
            headers=self.alice,
        )
        assert r.status_code == 201, r.text
        return key

    async def fresh_alice_token(self) -> str:
        r = await self.admin.post(f"/admin/users/{self.alice_id}/tokens", json={"name": "t"})
        return str(r.json()["id"])

    async def fresh_user(self) -> str:
        r = await self.admin.post("/admin/users", json={"name": self.name("victim")})
        return str(r.json()["id"])


Build = Callable[[World], Awaitable[Req]]


def req(path: Callable[[World], dict[str, str]] | None = None, **kwargs: Any) -> Build:
    """A request: path parameters and client keywords (values may be callables of the
    world)."""

    async def build(w: World) -> Req:
        return Req(
            path(w) if path else {},
            {k: v(w) if callable(v) else v for k, v in kwargs.items()},
        )

    return build


def on_session(**kwargs: Any) -> Build:
    return req(lambda w: {"session_id": w.sid}, **kwargs)


def fresh(make: Callable[[World], Awaitable[dict[str, str]]]) -> Build:
    async def build(w: World) -> Req:
        return Req(await make(w))

    return build


async def _fresh_section(w: World) -> dict[str, str]:
    return {"session_id": w.sid, "section": await w.fresh_section()}


async def _rolling_edit(w: World) -> Req:
    """A first summary (`cursor_seq` null) needs a session without one: one per call."""
    body = {"summary": {"current_discussion": "c"}, "cursor_seq": None}
    return Req({"session_id": await w.fresh_session()}, {"json": body})


async def _upload(w: World) -> Req:
    return Req({"session_id": w.sid}, {"files": {"files": ("up.txt", b"hello", "text/plain")}})


SESSION_HEADER = "X-Navi-Session-Id"
ROUTES: dict[tuple[str, str], tuple[str, Build]] = {
    # system and the share page
    ("GET", "/health"): ("public", req()),
    ("GET", "/health/ready"): ("public", req()),
    ("GET", "/health/live"): ("public", req()),
    ("GET", "/"): ("public", req()),
    ("GET", "/static/{name:str}"): ("public", req(lambda _: {"name": "share.js"})),
    ("GET", "/shared/{token:str}"): ("public", req(lambda w: {"token": w.share_token})),
    ("GET", "/shared/{token:str}/messages"): (
        "public",
        req(lambda w: {"token": w.share_token}),
    ),
    # the caller's own account
    ("GET", "/me"): ("own", req()),
    ("GET", "/me/tokens"): ("own", req()),
    ("POST", "/me/tokens"): ("own_token_issue", req(json={"name": "mine"})),
    ("DELETE", "/me/tokens/{token_id:uuid}"): (
        "alice_token",
        fresh(lambda w: _param("token_id", w.fresh_alice_token())),
    ),
    # users (admin)
    ("GET", "/admin/users"): ("users_admin", req()),
    ("POST", "/admin/users"): ("users_admin", req(json=lambda w: {"name": w.name("new")})),
    ("POST", "/admin/users/{user_id:str}/tokens"): (
        "users_admin",
        req(lambda w: {"user_id": w.alice_id}, json={"name": "t"}),
    ),
    ("DELETE", "/admin/users/{user_id:str}"): (
        "users_admin",
        fresh(lambda w: _param("user_id", w.fresh_user())),
    ),
    ("POST", "/admin/users/{user_id:str}/forget"): (
        "users_admin",
        req(lambda w: {"user_id": w.alice_id}, json={"text": "not-said-anywhere"}),
    ),
    ("GET", "/admin/users/{user_id:str}/forget/jobs/{job_id:uuid}"): (
        "users_admin",
        req(lambda w: {"user_id": w.alice_id, "job_id": w.forget_job}),
    ),
    ("GET", "/admin/users/{user_id:str}/deletion"): (
        "users_admin",
        req(lambda w: {"user_id": w.alice_id}),
    ),
    ("GET", "/admin/users/{user_id:str}/export"): (
        "users_admin",
        req(lambda w: {"user_id": w.alice_id}),
    ),
    # export and import: the caller's own account
    ("GET", "/me/export"): ("own", req()),
    ("POST", "/me/import"): ("own_import", req(content=b"not an export\n")),
    ("POST", "/me/import/chats"): ("own_import", req(content=b"not an export\n")),
    ("POST", "/admin/users/{user_id:str}/import/chats"): (
        "users_admin",
        req(lambda w: {"user_id": w.alice_id}, content=b"[]"),  # an empty export: 0 imported
    ),
    # sessions: the caller's own list
    ("POST", "/sessions"): ("own", req(json={"profile_id": "code"})),
    ("GET", "/sessions"): ("own", req()),
    ("GET", "/sessions/matches"): (
        "own",  # lists only what the caller may read
        req(params=lambda w: {"q": "secret", "session_id": [w.sid]}),
    ),
    # one session: read
    ("GET", "/sessions/{session_id:uuid}"): ("session_read", on_session()),
    ("GET", "/sessions/{session_id:uuid}/messages"): ("session_read", on_session()),
    ("GET", "/sessions/{session_id:uuid}/context"): ("session_read", on_session()),
    ("GET", "/sessions/{session_id:uuid}/planning"): ("session_read", on_session()),
    ("GET", "/sessions/{session_id:uuid}/scratchpad"): ("session_read", on_session()),
    ("GET", "/sessions/{session_id:uuid}/scratchpad/{section:str}"): (
        "session_read",
        req(lambda w: {"session_id": w.sid, "section": "notes"}),
    ),
    ("GET", "/sessions/{session_id:uuid}/rolling-summary"): ("session_read", on_session()),
    ("GET", "/sessions/{session_id:uuid}/files"): ("session_read", on_session()),
    ("GET", "/sessions/{session_id:uuid}/files/{filename:str}"): (
        "session_read",
        req(lambda w: {"session_id": w.sid, "filename": "notes.txt"}),
    ),
    ("POST", "/sessions/{session_id:uuid}/publish"): (
        "session_read",  # stores nothing: the card of a file already there
        on_session(json={"filename": "notes.txt"}),
    ),
    ("POST", "/tools/chat_history"): (
        "session_read",
        req(json=lambda w: {"session_id": w.sid, "query": "secret"}),
    ),
    ("POST", "/memory/search"): (
        "session_read",
        req(json=lambda w: {"query": "secret", "session_id": w.sid}),
    ),
    ("POST", "/tools/memory_search"): (
        "session_read",
        req(json={"query": "secret"}, headers=lambda w: {SESSION_HEADER: w.sid}),
    ),
    # one session: write and delete
    ("PATCH", "/sessions/{session_id:uuid}"): ("session_write", on_session(json={"name": "n"})),
    ("DELETE", "/sessions/{session_id:uuid}"): (
        "session_write",
        fresh(lambda w: _param("session_id", w.fresh_session())),
    ),
    ("POST", "/sessions/{session_id:uuid}/messages"): (
        "session_write",
        on_session(json={"messages": [{"role": "user", "content": "more"}]}),
    ),
    ("POST", "/sessions/{session_id:uuid}/planning"): (
        "session_write",
        on_session(json={"entry": {"step": 1}}),
    ),
    ("POST", "/sessions/{session_id:uuid}/compact"): (
        "session_write",  # a session with something to compact for every call
        fresh(lambda w: _param("session_id", w.fresh_session(turns=8))),
    ),
    ("POST", "/sessions/{session_id:uuid}/reset"): (
        "session_write",  # clears the conversation: a session of its own for every call
        fresh(lambda w: _param("session_id", w.fresh_session(turns=2))),
    ),
    ("PUT", "/sessions/{session_id:uuid}/rolling-summary"): ("session_write", _rolling_edit),
    ("POST", "/sessions/{session_id:uuid}/prepare"): (
        "session_write",
        on_session(json={"message": {"content": "next"}}),
    ),
    # a turn runs the (fake) model: a write, refused before any model call
    ("POST", "/sessions/{session_id:uuid}/turns"): (
        "session_write",
        on_session(json={"message": {"content": "next"}}),
    ),
    ("PUT", "/sessions/{session_id:uuid}/scratchpad/{section:str}"): (
        "session_write",
        req(lambda w: {"session_id": w.sid, "section": "notes"}, json={"value": "v"}),
    ),
    ("DELETE", "/sessions/{session_id:uuid}/scratchpad/{section:str}"): (
        "session_write",
        fresh(_fresh_section),
    ),
    ("POST", "/sessions/{session_id:uuid}/files"): ("session_write", _upload),
    ("POST", "/sessions/{session_id:uuid}/share_file"): (
        "session_write",
        on_session(json=lambda w: {"path": str(w.share_root / "result.csv")}),
    ),
    ("POST", "/sessions/{session_id:uuid}/share"): ("session_share", on_session()),
    # memory: the caller's own
    ("GET", "/memory/facts"): ("own", req()),
    ("POST", "/memory/facts"): (
        "own",
        req(json={"category": "prefs", "key": "shell", "value": "zsh"}),
    ),
    ("GET", "/memory/facts/search"): ("own", req(params={"q": "secret"})),
    ("DELETE", "/memory/facts/{key:str}"): (
        "alice_fact",
        fresh(lambda w: _param("key", w.fresh_fact())),
    ),
    ("GET", "/memory/facts/{fact_id:str}/history"): (
        "alice_fact",
        req(lambda w: {"fact_id": str(w.fact_id)}),
    ),
    ("POST", "/memory/facts/{fact_id:str}/restore"): (
        "alice_fact",
        req(lambda w: {"fact_id": str(w.fact_id)}, json=lambda w: {"version_id": w.version_id}),
    ),
    ("GET", "/memory/categories"): ("own", req()),
    ("GET", "/memory/summary"): ("own", req()),
    ("PUT", "/memory/summary"): ("own", req(json={"content": "about me"})),
    ("POST", "/tools/memory"): ("own", req(json={"action": "search", "query": "secret"})),
    ("POST", "/memory/forget"): ("own", req(json={"text": "not-said-anywhere"})),
    ("GET", "/memory/forget/jobs/{job_id:uuid}"): (
        "alice_fact",  # the caller's own: anyone else's job is not found
        req(lambda w: {"job_id": w.forget_job}),
    ),
    ("POST", "/tools/write_error"): (
        "own",
        req(json={"tool": "pip", "error": "denied", "fix": "use --user"}),
    ),
    ("POST", "/tools/error_history"): ("own", req(json={"query": "denied"})),
    # memory: every user's
    ("GET", "/admin/memory"): ("memory_read_all", req()),
    ("GET", "/admin/memory/search"): ("memory_read_all", req(params={"q": "secret"})),
    ("PATCH", "/admin/memory/{fact_id:str}"): (
        "fact_admin",
        req(lambda w: {"fact_id": str(w.fact_id)}, json={"merged_into": None}),
    ),
    # the OpenAPI pages (Litestar's)
    **{
        ("GET", f"/schema{p}"): ("public", req())
        for p in (
            "",
            "/openapi.json",
            "/openapi.yaml",
            "/openapi.yml",
            "/swagger",
            "/oauth2-redirect.html",
        )
    },
    ("GET", "/schema/{path:str}"): ("public_missing", req(lambda _: {"path": "nope"})),
    # the MCP server (a mounted ASGI app): a tool error is a 200 JSON-RPC answer, so the
    # status says only "authenticated"; the leak check says whose session it read
    ("POST", "/mcp"): (
        "own",
        req(
            json=lambda w: {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "chat_history",
                    "arguments": {"query": SESSION_SECRET, "session_id": w.sid},
                },
            },
            headers={"Accept": "application/json, text/event-stream"},
        ),
    ),
    ("GET", "/metrics"): ("metrics", req()),
    **{
        (m, "/static/swagger-ui/{file_path:path}"): (
            "public",
            req(lambda _: {"file_path": "swagger-ui.css"}),
        )
        for m in ("GET", "HEAD")
    },
}
# Litestar generates an OPTIONS handler for every path: public (it names the allowed
# methods; with CORS_ALLOW_ORIGINS a preflight is answered before routing).
OPTIONS_RULE = "public"
RULES["public_missing"] = (404,) * len(ACTORS)


async def _param(name: str, value: Awaitable[str]) -> dict[str, str]:
    return {name: await value}


def app_routes(app: Litestar) -> set[tuple[str, str]]:
    """(method, path) of every route handler the app serves, OPTIONS included; a mounted
    ASGI app (the MCP server) as POST, the method its clients call it with."""
    out = set()
    for route in app.routes:
        if route.path.startswith("/console"):
            continue  # cookie-signed pages: tests/integration/console/test_console_routes.py
        if isinstance(route, ASGIRoute):
            out.add(("POST", route.path))
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                for method in handler.http_methods:
                    out.add((method, route.path))
    return out


def concrete(path: str, params: dict[str, str]) -> str:
    def fill(m: re.Match[str]) -> str:
        return params.get(m.group(1), "00000000-0000-0000-0000-000000000000")

    return re.sub(r"\{(\w+):\w+\}", fill, path)


def matches(expected: str | int, status: int) -> bool:
    return 200 <= status < 300 if expected == OK else status == expected


async def build_world(admin: AsyncTestClient, share_root: Path) -> tuple[World, dict]:
    alice_id, alice = await new_user(admin, "alice")
    _, bob = await new_user(admin, "bob")
    _, sreader = await new_user(admin, "sreader", ["navi.sessions.read_all"])
    _, mreader = await new_user(admin, "mreader", ["navi.memory.read_all"])
    r = await admin.post("/sessions", json={"profile_id": "code", "name": "a"}, headers=alice)
    sid = r.json()["id"]
    messages = [
        {"role": "user", "content": f"remember {SESSION_SECRET}"},
        {"role": "assistant", "content": f"noted: {SESSION_SECRET}"},
    ]
    r = await admin.post(f"/sessions/{sid}/messages", json={"messages": messages}, headers=alice)
    assert r.status_code == 201, r.text
    r = await admin.put(
        f"/sessions/{sid}/scratchpad/notes", json={"value": SESSION_SECRET}, headers=alice
    )
    assert r.status_code == 200, r.text
    files = {"files": ("notes.txt", SESSION_SECRET.encode(), "text/plain")}
    r = await admin.post(f"/sessions/{sid}/files", files=files, headers=alice)
    assert r.status_code == 201, r.text
    r = await admin.post(
        "/memory/facts",
        json={"category": "prefs", "key": "editor", "value": FACT_SECRET},
        headers=alice,
    )
    assert r.status_code == 201, r.text
    fact_id = r.json()["id"]
    share_token = (await admin.post(f"/sessions/{sid}/share", headers=alice)).json()["token"]
    world = World(admin, alice_id, alice, sid, fact_id, share_token, share_root)
    r = await admin.get(f"/memory/facts/{fact_id}/history", headers=alice)
    world.version_id = r.json()["items"][0]["id"]
    r = await admin.post("/memory/forget", json={"text": "not-said-anywhere"}, headers=alice)
    assert r.status_code == 202, r.text
    world.forget_job = r.json()["job_id"]
    headers = {
        "owner": alice,
        "other": bob,
        "sessions_reader": sreader,
        "memory_reader": mreader,
        "admin": {"Authorization": f"Bearer {ADMIN_TOKEN}"},
        "local": {},
        "link": {"Authorization": ""},
    }
    return world, headers


def test_every_route_has_a_row(settings: Settings) -> None:
    """A new route without a row in ROUTES (or a row for a route that is gone) fails."""
    from app.asgi import create_app

    served = app_routes(create_app(settings, background_jobs=False))
    rows = set(ROUTES)
    assert served - {r for r in served if r[0] == "OPTIONS"} - rows == set(), "no row"
    assert rows - served == set(), "rows for routes the app does not serve"
    assert all(rule in RULES for rule, _ in ROUTES.values())
    assert all(len(outcomes) == len(ACTORS) for outcomes in RULES.values())


async def test_role_matrix_over_every_route(
    make_client, settings: Settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    share_root = tmp_path / "share"
    share_root.mkdir()
    (share_root / "result.csv").write_text("a,b\n")
    s = Settings(
        **{**settings.__dict__, "share_file_roots": str(share_root), "forget_wait_seconds": 0}
    )
    async with make_client(s) as admin, make_client(s, auth_enabled=False) as local:
        admin.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        world, headers = await build_world(admin, share_root)
        served = app_routes(admin.app)
        failures: list[str] = []
        calls = 0
        for method, path in sorted(served):
            rule, build = (OPTIONS_RULE, req()) if method == "OPTIONS" else ROUTES[(method, path)]
            for actor, expected in zip(ACTORS, RULES[rule], strict=True):
                request = await build(world)
                client = local if actor == "local" else admin
                kwargs = dict(request.kwargs)
                kwargs["headers"] = {**headers[actor], **kwargs.get("headers", {})}
                url = concrete(path, request.params)
                r = await client.request(method, url, **kwargs)
                calls += 1
                where = f"{method} {path} as {actor}"
                if not matches(expected, r.status_code):
                    failures.append(
                        f"{where}: {r.status_code}, expected {expected}: {r.text[:200]}"
                    )
                body = r.text
                shared = path in LINK_ROUTES
                if actor not in SEES_SESSIONS and not shared and SESSION_SECRET in body:
                    failures.append(f"{where}: leaks alice's session")
                if actor not in SEES_MEMORY and FACT_SECRET in body:
                    failures.append(f"{where}: leaks alice's memory")
        assert not failures, "\n".join(failures)
        assert calls == len(served) * len(ACTORS) >= 7 * 100
        # the writes a reader was refused left nothing behind
        r = await admin.get(f"/sessions/{world.sid}", headers=world.alice)
        assert r.status_code == 200
