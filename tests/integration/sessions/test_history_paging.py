"""History pages over the hot table and the archive together (issue 42, review item 4).

A row still in the LLM context stays hot however old it is (system notes survive every
compression verbatim), so the archive can hold rows *newer* than some hot ones. A page
that read the archive only when the hot table could not fill it ended on the old notes
and skipped every archived message: walking back with `limit=1` from the newest message
by `next_before_seq` never saw the archive. Every walk here, with any page size, must
visit each displayed message exactly once, in order — on the owner's history API and on
the public share page, which page with the same statement.
"""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.conftest import ADMIN_TOKEN, run_sql

# SESSION_MAX_HISTORY_BYTES for these tests: the compacted turns move to the archive. With
# 2 old notes, a page of `limit` L ended on a note (and skipped the archive) when the hot
# rows above the notes numbered L - 1 modulo L: always for L = 1; this limit keeps 27 of
# them hot, so for L = 7 too.
HOT_LIMIT = 51_000
TURNS = 40
NOTE = {"role": "system", "content": "note", "metadata": {"source": "synapse_event"}}


def _turn(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {i} " + "q" * 1500},
        {"role": "assistant", "content": f"answer {i} " + "a" * 1500},
    ]


async def _append(client: AsyncTestClient, sid: str, messages: list[dict[str, Any]]) -> None:
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text


async def _session_with_archive(client: AsyncTestClient, db_url: str) -> str:
    """Two stored service records early on, 40 large turns, a compaction, one more turn:
    the compacted turns move to the archive, the two notes (context rows) stay hot with
    sequence numbers below every archived row."""
    r = await client.post("/sessions", json={"profile_id": "default"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    await _append(client, sid, [NOTE, NOTE])
    for i in range(TURNS):
        await _append(client, sid, _turn(i))
    r = await client.post(f"/sessions/{sid}/compact")
    assert r.status_code == 200, r.text
    await _append(client, sid, _turn(TURNS))
    archived = run_sql(
        db_url,
        "select min(sequence_number) from session_messages_archive where session_id = %s",
        sid,
    )
    notes = run_sql(
        db_url,
        "select sequence_number from session_messages where session_id = %s"
        " and metadata->>'source' = 'synapse_event' order by 1",
        sid,
    )
    assert archived and archived[0][0] is not None, "nothing was archived"
    assert notes and [n[0] for n in notes] == [0, 1], "the notes did not stay hot"
    above = run_sql(
        db_url,
        "select count(*) from session_messages where session_id = %s"
        " and display_index is not null and sequence_number > 1",
        sid,
    )
    assert above and above[0][0] % 7 == 6  # a walk by 7 reaches the notes' edge case
    return sid


async def _walk(client: AsyncTestClient, first: str, more: str, limit: int) -> list[dict]:  # type: ignore[type-arg]
    """Every message of a walk back from the newest page by `next_before_seq`, oldest
    first (`first`: the newest page's URL, `more`: the older pages' URL)."""
    page = (await client.get(first, params={"limit": limit})).json()
    seen = list(page["messages"])
    for _ in range(1000):
        if page["next_before_seq"] is None:
            assert page["has_more"] is False
            return seen
        params = {"limit": limit, "before_seq": page["next_before_seq"]}
        r = await client.get(more, params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        seen = page["messages"] + seen
    raise AssertionError("the walk does not end")


@pytest.mark.parametrize("limit", [1, 7])
async def test_walking_back_visits_every_message_once(
    make_client, settings, db_url: str, limit: int
) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, session_max_history_bytes=HOT_LIMIT) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await _session_with_archive(c, db_url)
        count = (await c.get(f"/sessions/{sid}")).json()["display_message_count"]
        url = f"/sessions/{sid}/messages"
        seen = await _walk(c, url, url, limit)
        assert [m["display_index"] for m in seen] == list(range(count))
        seqs = [m["sequence_number"] for m in seen]
        assert seqs == sorted(set(seqs))
        archived = [m["sequence_number"] for m in seen if m["archived"]]
        stored = run_sql(
            db_url,
            "select sequence_number from session_messages_archive where session_id = %s"
            " and display_index is not null order by 1",
            sid,
        )
        assert archived and archived == [r[0] for r in stored or []]


@pytest.mark.parametrize("limit", [1, 7])
async def test_the_share_page_walks_back_through_the_archive(
    make_client, settings, db_url: str, limit: int
) -> None:  # type: ignore[no-untyped-def]
    """The public share page pages with the same statement (it shows the same messages
    here: the notes are `synapse_event` records, which it shows)."""
    async with make_client(settings, session_max_history_bytes=HOT_LIMIT) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await _session_with_archive(c, db_url)
        token = (await c.post(f"/sessions/{sid}/share")).json()["token"]
        async with make_client(settings) as public:  # no Authorization header
            shared = await _walk(public, f"/shared/{token}", f"/shared/{token}/messages", limit)
        stored = run_sql(
            db_url,
            "select sequence_number from session_messages where session_id = %s"
            " and display_index is not null union all select sequence_number"
            " from session_messages_archive where session_id = %s"
            " and display_index is not null order by 1",
            sid,
            sid,
        )
        assert [m["sequence_number"] for m in shared] == [r[0] for r in stored or []]


async def test_pages_of_any_size_tile_the_history(make_client, settings, db_url: str) -> None:  # type: ignore[no-untyped-def]
    """Any `before_seq` (not only those a walk hands out) and any page size: a page is
    the `limit` displayed messages right below it, hot and archived alike."""
    async with make_client(settings, session_max_history_bytes=HOT_LIMIT) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await _session_with_archive(c, db_url)
        url = f"/sessions/{sid}/messages"
        every = [m["sequence_number"] for m in await _walk(c, url, url, 200)]
        for before in (every[3], every[30], every[-1], every[-1] + 1):
            below = [s for s in every if s < before]
            for limit in (1, 2, 3, 5, 50):
                r = await c.get(url, params={"limit": limit, "before_seq": before})
                page = r.json()
                assert [m["sequence_number"] for m in page["messages"]] == below[-limit:]
                assert page["has_more"] is (len(below) > limit)
