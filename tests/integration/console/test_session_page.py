"""`/console/sessions/{id}`: the facts, the history with its compression, the context, the
planning log, the chart, and the rename/pin/share/delete forms, under the same ownership
rules as the REST API."""

from __future__ import annotations

import html
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.domain.compression import reset_registry
from app.domain.kernel.session_files import session_dir
from tests.conftest import ADMIN_TOKEN, new_user
from tests.fakes.ollama_server import FakeOllama
from tests.integration.console.support import post_form, sign_in

PROFILES = {"small": {"context_window": 4096, "compression_keep_recent": 4, "model": "fake-chat"}}
SUMMARY = "- the user asked ten questions about the proxy"
Headers = dict[str, str]


@pytest.fixture
async def cclient(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, tmp_path: Path
) -> AsyncIterator[AsyncTestClient]:
    """A client with a small-window profile (a forced compaction demotes all but 4 turns)."""
    reset_registry()
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(PROFILES))
    async with make_client(
        settings, profiles_file=str(path), llm_max_attempts=1, llm_backoff_initial=0.0
    ) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c
    reset_registry()


def _turn(i: int) -> list[dict[str, Any]]:
    words = " ".join(f"w{i}x{j}" for j in range(10))
    return [
        {"role": "user", "content": f"question {i}: {words}"},
        {"role": "assistant", "content": f"answer {i}: {words}"},
    ]


async def _session(client: AsyncTestClient, headers: Headers, turns: int = 0) -> str:
    r = await client.post("/sessions", json={"profile_id": "small"}, headers=headers)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    if turns:
        msgs = [m for i in range(turns) for m in _turn(i)]
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=headers)
        assert r.status_code == 201, r.text
    return str(sid)


async def _user(client: AsyncTestClient, name: str, perms: list[str] | None = None) -> Headers:
    _, headers = await new_user(client, name, perms)
    return headers


def _token(headers: Headers) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


def _history(page: str) -> str:
    """The history section of a session page (the context below it repeats messages)."""
    return page[page.index('id="history-h"') : page.index('<details id="context">')]


def _count(page: str, pattern: str) -> int:
    return len(re.findall(pattern, page))


async def test_own_session_shows_history_compression_context_planning_and_chart(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada, turns=10)
    ollama.chat_replies = [f"{SUMMARY}\nKEYS: nginx.conf, TICKET-9"]
    r = await cclient.post(f"/sessions/{sid}/compact", headers=ada)
    assert r.status_code == 200, r.text
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": _turn(10)}, headers=ada)
    assert r.status_code == 201
    r = await cclient.post(
        f"/sessions/{sid}/planning", json={"entry": {"step": "look <at> the proxy"}}, headers=ada
    )
    assert r.status_code == 204
    marker = next(
        m
        for m in (await cclient.get(f"/sessions/{sid}/messages", headers=ada)).json()["messages"]
        if m["is_compression"]
    )
    api = (await cclient.get(f"/sessions/{sid}", headers=ada)).json()

    await sign_in(cclient, _token(ada))
    r = await cclient.get(f"/console/sessions/{sid}")
    assert r.status_code == 200, r.text
    page = r.text
    # the facts
    assert 'id="fact-profile">small<' in page
    assert f'id="fact-messages">{api["display_message_count"]}<' in page
    assert f'id="fact-tokens">{api["context_token_count"]}<' in page
    assert 'id="fact-compressions">1<' in page
    # the compression, drawn where it took effect: summary, KEYS, tokens before → after
    assert _count(page, r'class="summary"') == 1
    summary = page[
        page.index('class="summary"') : page.index("</section>", page.index('class="summary"'))
    ]
    assert SUMMARY in html.unescape(summary)
    assert '<code class="key">nginx.conf</code>' in summary and "TICKET-9" in summary
    meta = marker["metadata"]
    assert f'class="tokens-before">{meta["tokens_before"]}<' in summary
    assert f'class="tokens-after">{meta["tokens_after"]}<' in summary
    # turns 0-5 were replaced by the summary, 6-10 were not
    compressed = re.findall(r'<li class="msg (user|assistant) compressed" id="m-(\d+)"', page)
    assert len(compressed) == 12
    assert _count(page, r'<li class="msg (?:user|assistant)" id="m-') == 10
    for i in range(6):
        assert re.search(rf'compressed" id="m-\d+"[^>]*>.*?question {i}:', page, re.S)
    # the marker sits between the replaced turns and the kept ones
    assert page.index("question 5:") < page.index('class="summary"') < page.index("question 10:")
    # the context now: the summary first, then the kept turns
    ctx = page[page.index('<details id="context">') : page.index('<details id="planning">')]
    assert SUMMARY in html.unescape(ctx) and "question 9:" in ctx and "question 2:" not in ctx
    # the planning log, escaped
    plan = page[page.index('<details id="planning">') :]
    assert "look &lt;at&gt; the proxy" in plan
    # the chart: one point per message that reaches the model, two at the compression
    assert 'id="tokens-chart"' in page and 'data-marks="1"' in page
    # one point per message (a bucket of 1 here) that reaches the model, 2 at the drop
    assert re.search(r"data-points=\"24\"", page), re.findall(r"data-points=\"\d+\"", page)


async def test_history_pages_older_and_newer(cclient: AsyncTestClient) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada, turns=6)  # 12 messages
    await sign_in(cclient, _token(ada))
    base = f"/console/sessions/{sid}"
    newest = _history((await cclient.get(f"{base}?limit=5")).text)
    assert "answer 5:" in newest and "question 3:" not in newest and "Newer" not in newest
    older = re.search(r'class="older" href="([^"]+)"', newest)
    assert older
    middle = _history((await cclient.get(html.unescape(older.group(1)))).text)
    # seq 2-6: question 1 … question 3 (question i is seq 2i, its answer 2i + 1)
    assert "question 1:" in middle and "question 3:" in middle
    assert "answer 0:" not in middle and "answer 3:" not in middle
    newer = re.search(r'class="newer" href="([^"]+)"', middle)
    assert newer
    again = _history((await cclient.get(html.unescape(newer.group(1)))).text)
    assert "answer 3:" in again and "answer 5:" in again and "question 3:" not in again
    assert 'class="newer"' not in again  # the newest page again
    oldest = _history((await cclient.get(f"{base}?before=2&limit=5")).text)
    assert "question 0:" in oldest and "answer 0:" in oldest and 'class="older"' not in oldest
    newer = re.search(r'class="newer" href="([^"]+)"', oldest)
    assert newer
    nxt = _history((await cclient.get(html.unescape(newer.group(1)))).text)
    assert "question 1:" in nxt and "question 3:" in nxt and "answer 3:" not in nxt
    assert 'class="newer"' in nxt and 'class="older"' in nxt
    r = await cclient.get(f"{base}?before=5&after=3")
    assert r.status_code == 422 and "before, after" in r.text
    assert (await cclient.get(f"{base}?limit=0")).status_code in (400, 422)


async def test_rename_pin_share_and_delete_through_the_forms(
    cclient: AsyncTestClient, settings: Settings
) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada, turns=1)
    csrf = await sign_in(cclient, _token(ada))
    base = f"/console/sessions/{sid}"
    page = (await cclient.get(base)).text
    for form in ("rename-form", "pin-form", "share-form", "delete-form"):
        assert f'id="{form}"' in page
    assert 'for="rename-name"' in page and 'data-confirm="' in page

    r = await post_form(cclient, f"{base}/rename", csrf, name="  Proxy notes  ")
    assert r.status_code == 303 and r.headers["location"].startswith(f"{base}?done=")
    assert (await cclient.get(f"/sessions/{sid}", headers=ada)).json()["name"] == "Proxy notes"
    page = (await cclient.get(r.headers["location"])).text
    assert 'id="session-name">Proxy notes' in page and 'class="flash"' in page

    r = await post_form(cclient, f"{base}/pin", csrf, pinned="true")
    assert r.status_code == 303
    assert (await cclient.get(f"/sessions/{sid}", headers=ada)).json()["pinned"] is True
    assert 'name="pinned" value="false"' in (await cclient.get(base)).text
    r = await post_form(cclient, f"{base}/pin", csrf, pinned="false")
    assert (await cclient.get(f"/sessions/{sid}", headers=ada)).json()["pinned"] is False

    assert 'id="share-link"' not in (await cclient.get(base)).text
    r = await post_form(cclient, f"{base}/share", csrf)
    assert r.status_code == 303
    token = (await cclient.post(f"/sessions/{sid}/share", headers=ada)).json()["token"]
    page = (await cclient.get(base)).text
    assert f'data-copy="/#share={token}"' in page and f'value="/#share={token}"' in page
    assert 'id="share-form"' not in page  # issued: the link is shown instead
    assert (await cclient.get(f"/shared/{token}")).status_code == 200

    folder = session_dir(settings, uuid.UUID(sid))
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("x")
    r = await post_form(cclient, f"{base}/delete", csrf)
    assert r.status_code == 303 and r.headers["location"].startswith("/console?done=")
    assert (await cclient.get(f"/sessions/{sid}", headers=ada)).status_code == 404
    assert not folder.exists()
    assert (await cclient.get(base)).status_code == 404


async def test_bad_input_and_missing_csrf_are_refused(cclient: AsyncTestClient) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada, turns=1)
    empty = await _session(cclient, ada)
    csrf = await sign_in(cclient, _token(ada))
    base = f"/console/sessions/{sid}"
    r = await post_form(cclient, f"{base}/rename", csrf, name="x" * 201)
    assert r.status_code == 422 and "name: at most 200" in r.text
    r = await post_form(cclient, f"{base}/rename", csrf, name="   ")
    assert r.status_code == 422 and "name: required" in r.text
    r = await post_form(cclient, f"{base}/pin", csrf, pinned="maybe")
    assert r.status_code == 422 and "pinned" in r.text
    r = await cclient.post(f"{base}/rename", data={"name": "no csrf"}, follow_redirects=False)
    assert r.status_code == 403 and "CSRF" in r.text
    r = await post_form(cclient, f"{base}/delete", "forged")
    assert r.status_code == 403
    r = await post_form(cclient, f"/console/sessions/{empty}/share", csrf)
    assert r.status_code == 409  # nothing to share yet (the API's rule)
    s = (await cclient.get(f"/sessions/{sid}", headers=ada)).json()
    assert s["name"] is None and s["pinned"] is False


async def test_another_users_session_is_not_found(cclient: AsyncTestClient) -> None:
    ada = await _user(cclient, "ada")
    bob = await _user(cclient, "bob")
    sid = await _session(cclient, ada, turns=1)
    csrf = await sign_in(cclient, _token(bob))
    base = f"/console/sessions/{sid}"
    assert (await cclient.get(base)).status_code == 404
    for action, fields in (("rename", {"name": "mine"}), ("pin", {"pinned": "true"})):
        assert (await post_form(cclient, f"{base}/{action}", csrf, **fields)).status_code == 404
    assert (await post_form(cclient, f"{base}/share", csrf)).status_code == 404
    assert (await post_form(cclient, f"{base}/delete", csrf)).status_code == 404
    assert (await cclient.get(f"/console/sessions/{uuid.uuid4()}")).status_code == 404
    assert (await cclient.get(f"/sessions/{sid}", headers=ada)).json()["name"] is None


async def test_a_reader_of_all_sessions_sees_but_may_not_change(cclient: AsyncTestClient) -> None:
    ada = await _user(cclient, "ada")
    eve = await _user(cclient, "eve", ["navi.sessions.read_all"])
    sid = await _session(cclient, ada, turns=2)
    csrf = await sign_in(cclient, _token(eve))
    base = f"/console/sessions/{sid}"
    r = await cclient.get(base)
    assert r.status_code == 200 and "question 1:" in r.text
    assert 'id="read-only"' in r.text and 'id="fact-owner"' in r.text
    for form in ("rename-form", "pin-form", "share-form", "delete-form"):
        assert f'id="{form}"' not in r.text
    r = await post_form(cclient, f"{base}/rename", csrf, name="eve was here")
    assert r.status_code == 403 and "only its owner or an admin" in r.text
    assert (await post_form(cclient, f"{base}/pin", csrf, pinned="true")).status_code == 403
    assert (await post_form(cclient, f"{base}/share", csrf)).status_code == 403
    assert (await post_form(cclient, f"{base}/delete", csrf)).status_code == 403
    s = (await cclient.get(f"/sessions/{sid}", headers=ada)).json()
    assert s["name"] is None and s["pinned"] is False


def test_which_compression_replaced_a_message() -> None:
    """A summary claims the out-of-context messages of its range; a hard truncate (which
    records no range) the older ones no summary claims; messages in the context, markers
    and records the model never saw are not marked."""
    from datetime import UTC, datetime

    from app.console.session_page import Compression, replaced_by
    from app.domain.kernel.messages import MessageOut

    def comp(number: int, seq: int, method: str, span: tuple[int, int] | None) -> Compression:
        return Compression(
            number=number, seq=seq, position=None, created_at=datetime.now(UTC), reason="forced",
            method=method, tokens_before=100, tokens_after=10, messages_before=None,
            messages_after=None, demoted=None, summary="", keys=[],
            from_seq=span[0] if span else None, to_seq=span[1] if span else None, replaced=None,
        )  # fmt: skip

    def msg(seq: int, *, in_context: bool = False, role: str = "user", **kw: Any) -> MessageOut:
        return MessageOut(
            sequence_number=seq, display_index=seq, role=role, content="x",
            created_at=datetime.now(UTC), is_context=in_context, **kw,
        )  # fmt: skip

    truncate, summary = comp(1, 10, "truncate", None), comp(2, 30, "summary", (11, 20))
    both = [truncate, summary]
    assert replaced_by(msg(3), both) is truncate
    assert replaced_by(msg(15), both) is summary
    assert replaced_by(msg(15, in_context=True), both) is None
    assert replaced_by(msg(25), both) is None  # out of the context, in no range
    assert replaced_by(msg(10, role="system", is_compression=True), both) is None
    assert replaced_by(msg(5, role="system"), both) is None  # a record the model never saw


async def test_a_long_context_shows_its_end_and_all_on_request(cclient: AsyncTestClient) -> None:
    ada = await _user(cclient, "ada")
    r = await cclient.post("/sessions", json={"name": "long"}, headers=ada)
    sid = r.json()["id"]
    msgs = [{"role": "user", "content": f"line {i}"} for i in range(75)]
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=ada)
    assert r.status_code == 201, r.text
    await sign_in(cclient, _token(ada))
    page = (await cclient.get(f"/console/sessions/{sid}")).text
    context = page[page.index('<details id="context"') : page.index('<details id="planning"')]
    assert "75 messages" in context and 'id="context-partial"' in context
    assert "line 74" in context and ">line 14<" not in context and "line 15" in context
    page = (await cclient.get(f"/console/sessions/{sid}?context=true")).text
    context = page[page.index('<details id="context"') : page.index('<details id="planning"')]
    assert 'id="context-partial"' not in context and '<details id="context" open>' in context
    assert all(f"line {i}<" in context for i in range(75))


async def test_the_chart_ends_a_turn_at_the_context_the_model_counted(
    cclient: AsyncTestClient,
) -> None:
    """A chat answer's `metadata.usage` (the model's prompt and answer tokens) sets the
    line there; a usage that is not numbers (a client may store any metadata) is ignored."""
    ada = await _user(cclient, "counted")
    sid = await _session(cclient, ada, turns=3)
    answers = [
        {"role": "user", "content": "and now?"},
        {"role": "assistant", "content": "counted", "metadata": {"usage": {"in": 9000, "out": 21}}},
        {"role": "user", "content": "odd"},
        {"role": "assistant", "content": "odd", "metadata": {"usage": {"in": "x", "out": []}}},
    ]
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": answers}, headers=ada)
    assert r.status_code == 201, r.text
    await sign_in(cclient, _token(ada))
    page = (await cclient.get(f"/console/sessions/{sid}")).text
    desc = re.search(r'<desc id="tokens-chart-d">([^<]*)</desc>', page)
    assert desc is not None, page
    # the count, then the two short messages after it (the estimate alone: a few hundred)
    assert "highest 9.0k." in desc.group(1), desc.group(1)
