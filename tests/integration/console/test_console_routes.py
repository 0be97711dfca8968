"""Who may do what in the console, over every console route (as the API's role matrix,
tests/integration/system/test_role_matrix.py, does for the API).

The route list comes from the app: a console route without a row in ROUTES fails, and so
does a row whose route is gone. Each row is called by each signed-in actor on alice's
resources, and without a cookie. Every form carries its page's CSRF value (the checks
of a missing or forged one are in each page's tests). No answer to an actor who may not
read alice's sessions or memory contains what she wrote.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from litestar.routes import HTTPRoute
from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import ADMIN_TOKEN, new_user
from tests.integration.console.support import sign_in

ACTORS = ("owner", "other", "sessions_reader", "memory_reader", "admin")
OK = "ok"  # 2xx, or a 303 that is not to the login page
SECRET = "console-secret-8ad1"
SKIP = None

RULES: dict[str, tuple[Any, ...]] = {
    #                     owner other sreader mreader admin
    "own": (OK, OK, OK, OK, OK),  # the caller's own pages and memory
    "session_read": (OK, 404, OK, 404, OK),
    "session_write": (OK, 404, 403, 404, OK),
    "alice_fact": (OK, 404, 404, 404, 404),  # /console/memory is the caller's own
    "not_theirs": (SKIP, 404, 404, 404, 404),
    "admin_area": (403, 403, OK, OK, OK),  # any of the reading permissions
    "read_all_memory": (403, 403, OK, OK, OK),  # a section per permission held
    "users_admin": (403, 403, 403, 403, OK),
    "system": (403, 403, 403, 403, OK),  # as /metrics
    "public": (OK, OK, OK, OK, OK),
    # the chat's upload takes a multipart body (the matrix posts a plain form): who may
    # write is refused as by session_write, who may is told what the body lacks
    "session_upload": (415, 404, 403, 404, 415),
    "sign_out": (SKIP,) * 5,  # ends the session: tests/integration/console/test_console_auth.py
    # an upload into the caller's own account; sent here without its file (refused):
    # tests/integration/chat_import has the upload
    "own_upload": (422,) * 5,
}
# who may see what alice wrote in a session (s) or her memory (m)
SEES_SESSION = {"owner", "sessions_reader", "admin"}
SEES_MEMORY = {"owner", "memory_reader", "admin"}


@dataclass
class World:
    alice_id: str
    alice: dict[str, str]
    sid: str
    fact_key: str
    fact_id: str
    admin: AsyncTestClient[Any]

    async def fresh_session(self) -> str:
        r = await self.admin.post("/sessions", json={"name": "throwaway"}, headers=self.alice)
        return str(r.json()["id"])

    async def alice_token(self) -> str:
        r = await self.admin.post(f"/admin/users/{self.alice_id}/tokens", json={"name": "x"})
        return str(r.json()["id"])


Call = Callable[[World], Awaitable[tuple[dict[str, str], dict[str, Any]]]]


def call(params: Callable[[World], dict[str, str]] | None = None, **form: Any) -> Call:
    async def build(w: World) -> tuple[dict[str, str], dict[str, Any]]:
        return (params(w) if params else {}), dict(form)

    return build


def fresh_session_call(**form: Any) -> Call:
    async def build(w: World) -> tuple[dict[str, str], dict[str, Any]]:
        return {"session_id": await w.fresh_session()}, dict(form)

    return build


_users = iter(range(1000))


def fresh_user_call() -> Call:
    async def build(w: World) -> tuple[dict[str, str], dict[str, Any]]:
        r = await w.admin.post("/admin/users", json={"name": f"doomed{next(_users)}"})
        return {"user_id": r.json()["id"]}, {}

    return build


def token_call() -> Call:
    async def build(w: World) -> tuple[dict[str, str], dict[str, Any]]:
        return {"user_id": w.alice_id, "token_id": await w.alice_token()}, {}

    return build


def stored_file_call() -> Call:
    async def build(w: World) -> tuple[dict[str, str], dict[str, Any]]:
        files = {"files": ("notes.txt", f"notes {SECRET}".encode(), "text/plain")}
        r = await w.admin.post(f"/sessions/{w.sid}/files", files=files, headers=w.alice)
        assert r.status_code == 201, r.text
        return {"session_id": w.sid, "name": r.json()["files"][0]["name"]}, {}

    return build


def sid(w: World) -> dict[str, str]:
    return {"session_id": w.sid}


def alice(w: World) -> dict[str, str]:
    return {"user_id": w.alice_id}


ROUTES: dict[tuple[str, str], tuple[str, Call]] = {
    ("GET", "/console/login"): ("public", call()),
    ("POST", "/console/login"): ("sign_out", call()),
    ("POST", "/console/logout"): ("sign_out", call()),
    ("GET", "/console/static/{name:str}"): ("public", call(lambda _: {"name": "console.css"})),
    ("GET", "/console"): ("own", call()),
    ("GET", "/console/sessions/{session_id:uuid}"): ("session_read", call(sid)),
    ("POST", "/console/sessions/{session_id:uuid}/rename"): (
        "session_write",
        call(sid, name="renamed"),
    ),
    ("POST", "/console/sessions/{session_id:uuid}/pin"): (
        "session_write",
        call(sid, pinned="true"),
    ),
    ("POST", "/console/sessions/{session_id:uuid}/share"): ("session_write", call(sid)),
    ("POST", "/console/sessions/{session_id:uuid}/rolling-summary"): (
        "session_write",  # a first summary (no cursor): a session without one per call
        fresh_session_call(current_discussion="c", cursor_seq=""),
    ),
    ("POST", "/console/sessions/{session_id:uuid}/delete"): (
        "session_write",
        fresh_session_call(),
    ),
    ("POST", "/console/chat"): ("own", call(profile_id="default")),
    ("GET", "/console/chat/{session_id:uuid}"): ("session_read", call(sid)),
    ("POST", "/console/chat/{session_id:uuid}/turn"): ("session_write", call(sid, content="hi")),
    ("POST", "/console/chat/{session_id:uuid}/files"): ("session_upload", call(sid)),
    ("GET", "/console/chat/{session_id:uuid}/files/{name:str}"): (
        "session_read",
        stored_file_call(),
    ),
    ("GET", "/console/memory"): ("own", call()),
    ("POST", "/console/memory/facts/save"): (
        "own",
        call(category="prefs", key="theme", value="dark"),
    ),
    ("POST", "/console/memory/facts/delete"): (
        "alice_fact",
        call(category="prefs", key="editor"),
    ),
    ("POST", "/console/memory/facts/unmerge"): (
        "not_theirs",
        call(lambda w: {}, fact_id="{fact_id}"),
    ),
    ("POST", "/console/memory/facts/restore"): (
        "not_theirs",  # alice's fact: 404 for anyone else, before the version is looked at
        call(lambda w: {}, fact_id="{fact_id}", version_id="1"),
    ),
    ("POST", "/console/memory/summary"): ("own", call(summary="likes tea")),
    ("GET", "/console/search"): ("own", call()),
    ("POST", "/console/import/chats"): ("own_upload", call()),
    ("POST", "/console/search/forget"): ("own", call(text=SECRET)),
    ("GET", "/console/admin"): ("admin_area", call()),
    ("GET", "/console/admin/lookup"): ("admin_area", call()),
    ("POST", "/console/admin/users"): ("users_admin", call(name="newcomer")),
    ("GET", "/console/admin/users/{user_id:str}"): ("users_admin", call(alice)),
    ("POST", "/console/admin/users/{user_id:str}/tokens"): (
        "users_admin",
        call(alice, name="issued"),
    ),
    ("POST", "/console/admin/users/{user_id:str}/tokens/{token_id:str}/revoke"): (
        "users_admin",
        token_call(),
    ),
    ("POST", "/console/admin/users/{user_id:str}/delete"): ("users_admin", fresh_user_call()),
    ("GET", "/console/admin/users/{user_id:str}/memory"): ("read_all_memory", call(alice)),
    ("GET", "/console/admin/system"): ("system", call()),
}
QUERIES = {"/console/admin/lookup": "?user_id={alice_id}"}


def console_routes(app: Any) -> set[tuple[str, str]]:
    out = set()
    for route in app.routes:
        if isinstance(route, HTTPRoute) and route.path.startswith("/console"):
            for handler in route.route_handlers:
                out |= {(m, route.path) for m in handler.http_methods if m != "OPTIONS"}
    return out


def concrete(path: str, params: dict[str, str]) -> str:
    return re.sub(r"\{(\w+):\w+\}", lambda m: params[m.group(1)], path)


def test_every_console_route_has_a_row(settings: Settings) -> None:
    from app.asgi import create_app

    served = console_routes(create_app(settings, background_jobs=False))
    assert served - set(ROUTES) == set(), "no row"
    assert set(ROUTES) - served == set(), "rows for routes the app does not serve"


def forms_without_csrf(html: str, csrf: str, where: str) -> list[str]:
    """Every POST form of a page carries the session's CSRF value (a form without it
    would be refused when a person submits it)."""
    out = []
    for chunk in html.split("<form")[1:]:
        form = chunk.split("</form>", 1)[0]
        if 'method="post"' in form.split(">", 1)[0] and f'name="csrf" value="{csrf}"' not in form:
            out.append(f"{where}: a form without the CSRF value: <form{form[:120]}")
    return out


CONTROL = re.compile(r"<(input|select|textarea)\b([^>]*)>")


def unlabelled_controls(html: str, where: str) -> list[str]:
    """Every visible form control has a <label for> or an aria-label (screen readers and
    keyboard users find it by its name)."""
    labels = set(re.findall(r'<label[^>]*\bfor="([^"]+)"', html))
    out = []
    for tag, attrs in CONTROL.findall(html):
        if 'type="hidden"' in attrs or "aria-label=" in attrs or "aria-labelledby=" in attrs:
            continue
        m = re.search(r'\bid="([^"]+)"', attrs)
        if not m or m.group(1) not in labels:
            out.append(f"{where}: an unlabelled <{tag}{attrs[:80]}>")
    return out


def allowed(expected: Any, status: int, location: str) -> bool:
    if expected == OK:
        return 200 <= status < 300 or (status == 303 and location != "/console/login")
    return status == expected


async def test_console_role_matrix(make_client, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings) as admin_api:
        admin_api.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        alice_id, alice_h = await new_user(admin_api, "alice")
        _, bob_h = await new_user(admin_api, "bob")
        _, sreader_h = await new_user(admin_api, "sreader", ["navi.sessions.read_all"])
        _, mreader_h = await new_user(admin_api, "mreader", ["navi.memory.read_all"])
        r = await admin_api.post("/sessions", json={"name": "alice's"}, headers=alice_h)
        session_id = r.json()["id"]
        r = await admin_api.post(
            f"/sessions/{session_id}/messages",
            json={"messages": [{"role": "user", "content": f"remember {SECRET}"}]},
            headers=alice_h,
        )
        assert r.status_code == 201
        r = await admin_api.post(
            "/memory/facts",
            json={"category": "prefs", "key": "editor", "value": f"vim {SECRET}"},
            headers=alice_h,
        )
        assert r.status_code == 201, r.text
        world = World(alice_id, alice_h, session_id, "editor", str(r.json()["id"]), admin_api)
        tokens = {
            "owner": alice_h,
            "other": bob_h,
            "sessions_reader": sreader_h,
            "memory_reader": mreader_h,
            "admin": {"Authorization": f"Bearer {ADMIN_TOKEN}"},
        }
        failures: list[str] = []
        async with make_client(settings) as nobody:
            for (method, path), (rule, build) in ROUTES.items():
                params, form = await build(world)
                url = concrete(path, params) + QUERIES.get(path, "").format(alice_id=alice_id)
                r = await nobody.request(method, url, data=form or None, follow_redirects=False)
                if (
                    rule != "public"
                    and not (r.status_code == 303 and r.headers["location"] == "/console/login")
                    and not (method, path) == ("POST", "/console/login")
                ):
                    failures.append(f"no cookie {method} {url}: {r.status_code}")
            for i, actor in enumerate(ACTORS):
                async with make_client(settings) as c:
                    csrf = await sign_in(c, tokens[actor]["Authorization"].removeprefix("Bearer "))
                    for (method, path), (rule, build) in ROUTES.items():
                        expected = RULES[rule][i]
                        if expected is SKIP:
                            continue
                        params, form = await build(world)
                        form = {k: v.format(fact_id=world.fact_id) for k, v in form.items()}
                        url = concrete(path, params) + QUERIES.get(path, "").format(
                            alice_id=alice_id
                        )
                        if method == "GET":
                            r = await c.get(url, follow_redirects=False)
                        else:
                            r = await c.post(
                                url, data={"csrf": csrf, **form}, follow_redirects=False
                            )
                        location = r.headers.get("location", "")
                        if method == "GET" and r.status_code == 200 and path != "/console/login":
                            failures += forms_without_csrf(r.text, csrf, f"{actor} {url}")
                            failures += unlabelled_controls(r.text, f"{actor} {url}")
                        if not allowed(expected, r.status_code, location):
                            failures.append(
                                f"{actor} {method} {url}: {r.status_code} (expected {expected})"
                            )
                        # (a user's admin page lists their sessions, with a preview)
                        shows_sessions = "session" in path or path.endswith("}/memory")
                        may_see = (
                            actor == "owner"
                            or (actor in SEES_SESSION and shows_sessions)
                            or (actor in SEES_MEMORY and path.endswith("}/memory"))
                        )
                        if SECRET in r.text and not may_see and "forget" not in path:
                            failures.append(f"{actor} {method} {url}: shows alice's secret")
                    # the fact alice's delete removed: put it back for the next actor
                    await admin_api.post(
                        "/memory/facts",
                        json={"category": "prefs", "key": "editor", "value": f"vim {SECRET}"},
                        headers=alice_h,
                    )
        assert failures == []
