"""`/console/admin`: users and tokens by form, a user's memory read only, health and jobs,
and who may see what (the REST API's rules)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from datetime import UTC, datetime
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.domain.kernel.jobs import LIVE_INDEX_JOB, Jobs, JobStatus, periodic
from tests.conftest import ADMIN_TOKEN, new_user, run_sql
from tests.integration.console.support import csrf_of, post_form, sign_in

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
TOKEN_RE = re.compile(r'id="new-token" type="text" readonly value="(navi_[^"]+)"')


def main_of(html: str) -> str:
    """The page's content, without the layout's header (its sign-out form)."""
    return html.split('<main id="main"', 1)[1]


def token_of(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


async def me(client: AsyncTestClient[Any], token: str) -> Any:
    return await client.get("/me", headers={"Authorization": f"Bearer {token}"})


async def test_admin_creates_a_user_issues_and_revokes_a_token(
    client: AsyncTestClient, db_url: str
) -> None:
    csrf = await sign_in(client, ADMIN_TOKEN)
    r = await client.get("/console/admin")
    assert r.status_code == 200
    html = main_of(r.text)
    assert 'id="user-list"' in html and ">admin<" in html  # the built-in admin is listed
    for field in ('for="user-name"', 'for="user-admin"', "<legend>Permissions</legend>"):
        assert field in html
    assert 'value="navi.memory.read_all"' in html

    r = await post_form(
        client,
        "/console/admin/users",
        csrf,
        name="grace",
        permissions=["navi.sessions.read_all"],
    )
    assert r.status_code == 303, r.text
    user_url = r.headers["location"].split("?")[0]
    uid = user_url.rsplit("/", 1)[1]
    assert run_sql(
        db_url, "select name, is_admin, permissions from navi_users where id = %s", uid
    ) == [("grace", False, ["navi.sessions.read_all"])]
    r = await client.get(r.headers["location"])
    assert r.status_code == 200 and "User grace created" in r.text and "No tokens." in r.text

    # issue: the token is in the POST's own answer (201), shown once, never in a URL
    r = await post_form(client, f"{user_url}/tokens", csrf, name="laptop")
    assert r.status_code == 201, r.text
    assert "location" not in r.headers
    assert r.headers["cache-control"] == "no-store"
    m = TOKEN_RE.search(r.text)
    assert m, r.text
    token = m.group(1)
    assert f'data-copy="{token}"' in r.text and "shown only this once" in r.text
    got = await me(client, token)
    assert got.status_code == 200 and got.json()["name"] == "grace"
    assert got.json()["permissions"] == ["navi.sessions.read_all"]

    # the user page lists it by prefix, never in full, with a confirmed revoke form
    r = await client.get(user_url)
    html = main_of(r.text)
    assert "laptop" in html and token[:11] in html and token not in html
    revoke = re.search(r'action="([^"]+/revoke)"\s+data-confirm="[^"]+"', html)
    assert revoke, html
    r = await post_form(client, revoke.group(1), csrf)
    assert r.status_code == 303 and r.headers["location"].startswith(user_url + "?done=")
    assert (await me(client, token)).status_code == 401
    r = await client.get(r.headers["location"])
    assert "Token revoked" in r.text and "/revoke" not in main_of(r.text)
    # revoking it again: it is no active token any more
    r = await post_form(client, revoke.group(1), csrf)
    assert r.status_code == 404 and "no such active token" in r.text


async def test_bad_input_answers_a_page_naming_the_problem(client: AsyncTestClient) -> None:
    uid, _ = await new_user(client, "mallory")
    csrf = await sign_in(client, ADMIN_TOKEN)
    r = await post_form(client, "/console/admin/users", csrf, name="no spaces!")
    assert r.status_code == 422 and "name: 1-64 characters" in r.text
    r = await post_form(client, "/console/admin/users", csrf, name="")
    assert r.status_code == 422 and "name: required" in r.text
    r = await post_form(
        client, "/console/admin/users", csrf, name="eve", permissions=["navi.everything"]
    )
    assert r.status_code == 422 and "permissions: unknown navi.everything" in r.text
    r = await post_form(client, "/console/admin/users", csrf, name="eve", is_admin="maybe")
    assert r.status_code == 422 and "is_admin" in r.text
    r = await post_form(client, "/console/admin/users", csrf, name="admin")
    assert r.status_code == 409 and "already exists" in r.text
    assert "<h1>409</h1>" in r.text
    # nothing was created by the refused forms
    assert (await client.get("/admin/users", headers=ADMIN)).json()["total"] == 3

    r = await post_form(client, f"/console/admin/users/{uid}/tokens", csrf, name="x" * 201)
    assert r.status_code == 422 and "name: at most 200" in r.text
    r = await post_form(client, f"/console/admin/users/{uid}/tokens/not-a-uuid/revoke", csrf)
    assert r.status_code == 422 and "token_id" in r.text


async def test_an_unknown_user_is_404(client: AsyncTestClient) -> None:
    csrf = await sign_in(client, ADMIN_TOKEN)
    for path in ("/console/admin/users/nobody", "/console/admin/users/nobody/memory"):
        r = await client.get(path)
        assert r.status_code == 404 and "no user &#39;nobody&#39;" in r.text, path
    r = await post_form(client, "/console/admin/users/nobody/tokens", csrf, name="t")
    assert r.status_code == 404 and "no user &#39;nobody&#39;" in r.text
    r = await post_form(
        client,
        "/console/admin/users/nobody/tokens/00000000-0000-0000-0000-000000000000/revoke",
        csrf,
    )
    assert r.status_code == 404
    r = await post_form(client, "/console/admin/users/nobody/delete", csrf)
    assert r.status_code == 404
    # the "open a user" form goes to the memory page, which says so
    r = await client.get("/console/admin/lookup?user_id=nobody", follow_redirects=True)
    assert r.status_code == 404 and "no user &#39;nobody&#39;" in r.text
    r = await client.get("/console/admin/lookup?user_id=")
    assert r.status_code == 422 and "user_id: required" in r.text


async def test_every_admin_write_needs_the_csrf_value(client: AsyncTestClient, db_url: str) -> None:
    uid, headers = await new_user(client, "heidi")
    token = token_of(headers)
    tokens = (await client.get("/admin/users", headers=ADMIN)).json()
    assert tokens["total"] == 3
    await sign_in(client, ADMIN_TOKEN)
    r = await client.post("/console/admin/users", data={"name": "sneaky"}, follow_redirects=False)
    assert r.status_code == 403 and "CSRF" in r.text
    r = await post_form(client, "/console/admin/users", "forged", name="sneaky")
    assert r.status_code == 403
    r = await post_form(client, f"/console/admin/users/{uid}/tokens", "forged", name="t")
    assert r.status_code == 403 and "navi_" not in main_of(r.text)
    token_id = run_sql(db_url, "select id::text from navi_api_tokens where user_id = %s", uid)
    assert token_id
    r = await post_form(
        client, f"/console/admin/users/{uid}/tokens/{token_id[0][0]}/revoke", "forged"
    )
    assert r.status_code == 403
    r = await post_form(client, f"/console/admin/users/{uid}/delete", "")
    assert r.status_code == 403
    assert (await client.get("/admin/users", headers=ADMIN)).json()["total"] == 3
    assert (await me(client, token)).status_code == 200


async def test_a_user_without_permissions_gets_403_everywhere(client: AsyncTestClient) -> None:
    uid, headers = await new_user(client, "ivan")
    other, _ = await new_user(client, "judy")
    csrf = await sign_in(client, token_of(headers))
    r = await client.get("/console")
    assert 'href="/console/admin"' not in r.text  # not in the navigation either
    for path in (
        "/console/admin",
        f"/console/admin/users/{other}",
        f"/console/admin/users/{other}/memory",
        "/console/admin/system",
        f"/console/admin/lookup?user_id={other}",
    ):
        r = await client.get(path, follow_redirects=False)
        assert r.status_code == 403, (path, r.status_code)
        assert "need an admin" in r.text or "needs an admin" in r.text, path
    r = await post_form(client, "/console/admin/users", csrf, name="newbie")
    assert r.status_code == 403
    r = await post_form(client, f"/console/admin/users/{other}/tokens", csrf, name="t")
    assert r.status_code == 403 and "navi_" not in main_of(r.text)
    r = await post_form(client, f"/console/admin/users/{other}/delete", csrf)
    assert r.status_code == 403
    assert (await client.get("/admin/users", headers=ADMIN)).json()["total"] == 4


async def test_a_memory_reader_sees_facts_read_only(client: AsyncTestClient) -> None:
    owner, owner_headers = await new_user(client, "kim")
    r = await client.post(
        "/memory/facts",
        json={"category": "preferences", "key": "tea", "value": "oolong <b>not bold</b>"},
        headers=owner_headers,
    )
    assert r.status_code == 201, r.text
    r = await client.post("/sessions", json={}, headers=owner_headers)
    assert r.status_code == 201, r.text
    _, reader = await new_user(client, "lee", ["navi.memory.read_all"])
    csrf = await sign_in(client, token_of(reader))

    r = await client.get("/console")
    assert 'href="/console/admin"' in r.text
    r = await client.get("/console/admin")
    assert r.status_code == 200
    html = main_of(r.text)
    assert 'id="user-list"' not in html and "need an admin" in html
    assert 'action="/console/admin/lookup"' in html and 'method="post"' not in html
    assert "/console/admin/system" not in html

    r = await client.get(f"/console/admin/lookup?user_id={owner}", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == f"/console/admin/users/{owner}/memory"
    r = await client.get(r.headers["location"])
    assert r.status_code == 200
    html = main_of(r.text)
    assert "kim" in html and "preferences" in html and "tea" in html
    assert "oolong &lt;b&gt;not bold&lt;/b&gt;" in html  # escaped
    assert "<form" not in html and "<button" not in html and "<input" not in html  # read only
    assert "1 fact" in html
    assert 'id="sessions-forbidden"' in html  # sessions need navi.sessions.read_all
    assert f'/console/admin/users/{owner}"' not in html  # no link to the tokens page

    # but no user management
    r = await post_form(client, "/console/admin/users", csrf, name="newbie")
    assert r.status_code == 403 and "this needs an admin" in r.text
    for path in (f"/console/admin/users/{owner}", "/console/admin/system"):
        assert (await client.get(path)).status_code == 403, path
    r = await post_form(client, f"/console/admin/users/{owner}/tokens", csrf, name="t")
    assert r.status_code == 403
    users = (await client.get("/admin/users", headers=ADMIN)).json()["items"]
    assert "newbie" not in {u["name"] for u in users}


async def test_a_sessions_reader_sees_a_users_sessions_not_their_facts(
    client: AsyncTestClient,
) -> None:
    owner, owner_headers = await new_user(client, "mia")
    await client.post(
        "/memory/facts",
        json={"category": "work", "key": "employer", "value": "ACME"},
        headers=owner_headers,
    )
    sid = (await client.post("/sessions", json={}, headers=owner_headers)).json()["id"]
    await client.patch(f"/sessions/{sid}", json={"name": "trip plans"}, headers=owner_headers)
    _, reader = await new_user(client, "ned", ["navi.sessions.read_all"])
    await sign_in(client, token_of(reader))
    r = await client.get(f"/console/admin/users/{owner}/memory")
    assert r.status_code == 200
    html = main_of(r.text)
    assert f'href="/console/sessions/{sid}"' in html and "trip plans" in html
    assert "ACME" not in html and 'id="facts-forbidden"' in html
    assert "<form" not in html


async def test_admin_sees_both_and_the_merged_toggle(client: AsyncTestClient) -> None:
    owner, owner_headers = await new_user(client, "olga")
    for i in range(3):
        r = await client.post(
            "/memory/facts",
            json={"category": "misc", "key": f"k{i}", "value": f"value {i}"},
            headers=owner_headers,
        )
        assert r.status_code == 201
    await sign_in(client, ADMIN_TOKEN)
    r = await client.get(f"/console/admin/users/{owner}/memory?limit=2")
    html = main_of(r.text)
    assert "3 facts" in html and "value 0" in html and "value 2" not in html
    assert 'rel="next"' in html and "1–2 of 3" in html
    assert 'id="session-list"' in html and "No sessions." in html
    r = await client.get(f"/console/admin/users/{owner}/memory?offset=2&limit=2")
    assert "value 2" in r.text
    r = await client.get(f"/console/admin/users/{owner}/memory?include_merged=true")
    assert r.status_code == 200 and "Merged into" in r.text
    r = await client.get(f"/console/admin/users/{owner}/memory?limit=0")
    assert r.status_code == 400 or r.status_code == 422


async def test_delete_a_user(client: AsyncTestClient) -> None:
    uid, headers = await new_user(client, "pat")
    csrf = await sign_in(client, ADMIN_TOKEN)
    r = await client.get(f"/console/admin/users/{uid}")
    assert 'data-confirm="Delete pat' in r.text
    r = await post_form(client, f"/console/admin/users/{uid}/delete", csrf)
    assert r.status_code == 303 and r.headers["location"].startswith("/console/admin?done=")
    assert (await client.get(f"/console/admin/users/{uid}")).status_code == 404
    assert (await me(client, token_of(headers))).status_code == 401
    # the built-in admin (also yourself here) cannot be deleted
    r = await client.get("/console/admin/users/admin")
    assert "cannot be deleted" in r.text and "/delete" not in main_of(r.text)
    r = await post_form(client, "/console/admin/users/admin/delete", csrf)
    assert r.status_code == 409 and "built in" in r.text


async def test_health_and_a_jobs_last_error(client: AsyncTestClient) -> None:
    runtime = client.app.state.runtime
    runtime.jobs.status["test.failing_job"] = JobStatus(
        interval=30,
        runs=2,
        failures=1,
        last_started=datetime.now(UTC),
        last_finished=datetime.now(UTC),
        last_seconds=0.5,
        last_failed=True,
        last_error="RuntimeError: <boom>",
        last_error_at=datetime.now(UTC),
    )
    await sign_in(client, ADMIN_TOKEN)
    r = await client.get("/console/admin")
    assert 'href="/console/admin/system"' in r.text
    r = await client.get("/console/admin/system")
    assert r.status_code == 200, r.text
    html = main_of(r.text)
    assert 'id="health-status">ok<' in html  # the fake Ollama is up, the schema at head
    assert "at head" in html
    assert "test.failing_job" in html and "RuntimeError: &lt;boom&gt;" in html
    assert 'class="job-failed"' in html
    assert "This worker process only" in html and "<form" not in html


async def test_health_says_what_is_down(client: AsyncTestClient, ollama: Any) -> None:
    ollama.fail("refuse")
    await sign_in(client, ADMIN_TOKEN)
    r = await client.get("/console/admin/system")
    assert r.status_code == 200
    assert 'id="health-status">degraded<' in r.text
    assert "unreachable" in r.text


async def test_the_jobs_of_a_running_service(engine: AsyncEngine, settings: Settings) -> None:
    """The periodic jobs this process runs are listed by name, their runs counted."""
    from app.asgi import create_app

    app = create_app(
        dataclasses.replace(settings, database_replica_url=""),
        engine=engine,
        background_jobs=True,
    )
    async with AsyncTestClient(app, raise_server_exceptions=False) as c:
        await sign_in(c, ADMIN_TOKEN)
        r = await c.get("/console/admin/system")
        html = main_of(r.text)
        for name in (LIVE_INDEX_JOB, "memory.idle_index", "error_memory.purge"):
            assert f"<code>{name}</code>" in html, name
        assert "memory.extraction" not in html.split('id="tasks"')[0]  # off in these tests
        # an append wakes the live index: its run is recorded
        sid = (await c.post("/sessions", json={}, headers=ADMIN)).json()["id"]
        r = await c.post(
            f"/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "hello there"}]},
            headers=ADMIN,
        )
        assert r.status_code == 201, r.text
        status = app.state.runtime.jobs.status[LIVE_INDEX_JOB]
        for _ in range(200):  # 10 s at most
            if status.runs and not status.running:
                break
            await asyncio.sleep(0.05)
        assert status.runs >= 1 and status.last_finished is not None
        html = main_of((await c.get("/console/admin/system")).text)
        row = html.split(f"<code>{LIVE_INDEX_JOB}</code>", 1)[1].split("</tr>", 1)[0]
        assert "<td>ok</td>" in row and "s ago" in row, row


async def test_periodic_records_runs_and_the_last_error() -> None:
    jobs = Jobs()
    calls = 0
    done = asyncio.Event()

    async def job() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ValueError("first run fails")
        done.set()
        await asyncio.sleep(3600)

    task = asyncio.create_task(periodic(jobs, "test.job", 0.01, job))
    await asyncio.wait_for(done.wait(), 5)
    status = jobs.status["test.job"]
    assert status.running and status.runs == 2 and status.failures == 1
    assert status.last_failed  # the running run has not finished yet
    assert status.last_error == "ValueError: first run fails"
    assert status.last_error_at is not None and status.last_started is not None
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not status.running and status.last_finished is not None


def assert_labelled(html: str) -> None:
    """Every visible control has a label (`for=` its id) or an aria-label."""
    for tag in re.findall(r"<(?:input|select|textarea)\b[^>]*>", html):
        if 'type="hidden"' in tag:
            continue
        m = re.search(r'id="([^"]+)"', tag)
        assert m and f'for="{m.group(1)}"' in html, tag
    for tag in re.findall(r"<button\b[^>]*>[^<]*</button>", html):
        assert re.search(r">\s*\S", tag) or "aria-label" in tag, tag


async def test_every_control_is_labelled(client: AsyncTestClient) -> None:
    uid, _ = await new_user(client, "quinn")
    csrf = await sign_in(client, ADMIN_TOKEN)
    for path in ("/console/admin", f"/console/admin/users/{uid}"):
        assert_labelled(main_of((await client.get(path)).text))
    r = await post_form(client, f"/console/admin/users/{uid}/tokens", csrf, name="ci")
    assert_labelled(main_of(r.text))
    assert 'aria-label="Copy the new token"' in r.text


async def test_local_mode_reads_but_manages_no_users(anon_client: AsyncTestClient) -> None:
    r = await anon_client.get("/console/login")
    await anon_client.post("/console/login", data={"csrf": csrf_of(r.text)}, follow_redirects=False)
    r = await anon_client.get("/console/admin")
    assert r.status_code == 200
    html = main_of(r.text)
    assert "NAVI_AUTH_ENABLED=true" in html and 'id="create-user"' not in html
    csrf = csrf_of(r.text)
    r = await post_form(anon_client, "/console/admin/users", csrf, name="x")
    assert r.status_code == 403 and "NAVI_AUTH_ENABLED=true" in r.text
    assert (await anon_client.get("/console/admin/users/anonymous")).status_code == 403
    r = await anon_client.get("/console/admin/users/anonymous/memory")
    assert r.status_code == 200 and 'id="fact-list"' in r.text
    r = await anon_client.get("/console/admin/system")
    assert r.status_code == 200 and "off (local mode)" in r.text
