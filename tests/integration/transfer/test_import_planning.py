"""An import applies the planning-log limits the API applies (issue 42 leftover, review
#5): an entry over PLANNING_ENTRY_MAX_BYTES is refused (422 naming the line); a session's
log past its kept count (200) or PLANNING_MAX_SESSION_BYTES is trimmed, oldest first, as
an append past them trims it, and the report says how many entries went."""

from __future__ import annotations

import json
from typing import Any

from litestar.testing import AsyncTestClient

from tests.conftest import ADMIN_TOKEN, new_user


async def _exported_session(c: AsyncTestClient) -> tuple[str, list[dict[str, Any]]]:
    """A user's export with one session holding one planning entry; the session deleted
    (its id free for the import)."""
    _, alice = await new_user(c, "alice")
    r = await c.post("/sessions", json={"profile_id": "default"}, headers=alice)
    sid = str(r.json()["id"])
    r = await c.post(f"/sessions/{sid}/planning", json={"entry": {"step": 0}}, headers=alice)
    assert r.status_code == 204, r.text
    body = (await c.get("/me/export", headers=alice)).content
    assert (await c.delete(f"/sessions/{sid}", headers=alice)).status_code == 204
    return sid, [json.loads(x) for x in body.decode().splitlines()]


def _with_entries(records: list[dict[str, Any]], entries: list[Any]) -> bytes:
    """The file with the session's planning log replaced by `entries` (seq 0…)."""
    [template] = [r for r in records if r["type"] == "planning_entry"]
    out: list[dict[str, Any]] = []
    for r in records:
        if r["type"] == "planning_entry":
            out += [{**template, "seq": i, "entry": e} for i, e in enumerate(entries)]
        elif r["type"] == "session":
            out.append({**r, "next_planning_seq": len(entries)})
        elif r["type"] == "end":
            out.append({"type": "end", "records": len(out) - 1})
        else:
            out.append(r)
    return "\n".join(json.dumps(r) for r in out).encode() + b"\n"


async def test_an_import_trims_a_planning_log_past_its_kept_count(client: AsyncTestClient) -> None:
    sid, records = await _exported_session(client)
    body = _with_entries(records, [{"step": i} for i in range(250)])
    _, bob = await new_user(client, "bob")
    r = await client.post("/me/import", content=body, headers=bob)
    assert r.status_code == 201, r.text
    assert r.json()["records"]["planning_entry"] == 250
    assert r.json()["trimmed_planning_entries"] == 50
    page = (await client.get(f"/sessions/{sid}/planning", headers=bob)).json()
    assert page["total"] == 200
    assert [e["step"] for e in page["planning_logs"]][:2] == [50, 51]  # the oldest went
    # the log goes on after the imported entries
    r = await client.post(f"/sessions/{sid}/planning", json={"entry": {"step": 250}}, headers=bob)
    assert r.status_code == 204, r.text
    page = (await client.get(f"/sessions/{sid}/planning", headers=bob)).json()
    assert page["total"] == 200 and page["planning_logs"][-1]["step"] == 250


async def test_an_import_trims_a_planning_log_past_its_bytes(make_client, settings) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, planning_max_session_bytes=256 * 1024) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid, records = await _exported_session(c)
        body = _with_entries(records, [{"step": i, "blob": "x" * 100_000} for i in range(5)])
        _, bob = await new_user(c, "bob")
        r = await c.post("/me/import", content=body, headers=bob)
        assert r.status_code == 201, r.text
        assert r.json()["trimmed_planning_entries"] == 3  # two of 100 KB fit in 256 KiB
        page = (await c.get(f"/sessions/{sid}/planning", headers=bob)).json()
        assert [e["step"] for e in page["planning_logs"]] == [3, 4]


async def test_an_import_refuses_a_planning_entry_the_api_would_refuse(
    client: AsyncTestClient,
) -> None:
    sid, records = await _exported_session(client)
    body = _with_entries(records, [{"step": 0}, {"blob": "x" * 300_000}])
    _, bob = await new_user(client, "bob")
    r = await client.post("/me/import", content=body, headers=bob)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith("line ") and "(planning_entry): entry:" in detail, detail
    assert "the limit is 262144" in detail, detail
    assert (await client.get("/sessions", headers=bob)).json()["total"] == 0
