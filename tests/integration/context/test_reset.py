"""`POST /sessions/{id}/reset` in compress mode: the messages, the compression summary and
the compression state go; the raw chunks (memory) stay and recall still finds them."""

from __future__ import annotations

import psycopg

from tests.integration.context.conftest import append, new_session
from tests.integration.context.test_raw_index_and_recall import fill


def _one(db_url: str, stmt: str, *args: object) -> tuple:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        return c.execute(stmt, args).fetchone()  # type: ignore[arg-type,return-value]


async def test_reset_after_compression_keeps_the_raw_chunks(cclient, db_url) -> None:  # type: ignore[no-untyped-def]
    sid = await new_session(cclient)
    await fill(cclient, sid)
    r = await cclient.post(f"/sessions/{sid}/compact", json={})
    assert r.status_code == 200, r.text
    chunks = _one(db_url, "select count(*) from memory_chunks where session_id = %s", sid)[0]
    assert chunks > 0
    r = await cclient.post(f"/sessions/{sid}/reset")
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["messages_cleared"] > 24  # the 24 turns' messages + the summary and marker
    assert "last_compression" in out["compression_state_cleared"]
    assert out["rolling_summary_kept"] is False
    assert (await cclient.get(f"/sessions/{sid}/context")).json()["messages"] == []
    assert (
        _one(db_url, "select count(*) from memory_chunks where session_id = %s", sid)[0] == chunks
    )
    meta, tokens = _one(
        db_url, "select session_metadata, context_token_count from sessions where id = %s", sid
    )
    assert "last_compression" not in meta and tokens == 0
    # what was said before the reset is still found
    r = await cclient.post(
        "/memory/search", json={"query": "nginx reverse proxy port", "scope": "raw"}
    )
    assert r.status_code == 200, r.text
    assert "8098" in r.text
    await append(cclient, sid, [{"role": "user", "content": "a fresh start"}])
    ctx = (await cclient.post(f"/sessions/{sid}/prepare", json={})).json()["context"]
    assert [m["content"] for m in ctx if m["sequence_number"] >= 0] == ["a fresh start"]
