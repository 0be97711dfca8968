"""Export and import (`GET /me/export`, `POST /me/import`, `GET /admin/users/{id}/export`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

from litestar.testing import AsyncTestClient

from app.db.engine import read_snapshot, session_factory
from app.domain.transfer.export_repository import ExportRepository
from app.domain.transfer.records import KIND_BY_TYPE
from tests.conftest import ADMIN_TOKEN, ROOT, new_user, run_sql
from tests.integration.fill import FILE_BYTES, fill_every_store

QUERIES = [
    ("nginx config", "all"),
    ("port 8098 proxy_pass", "raw"),
    ("preferred language", "facts"),
    ("nginx moved notes", "all"),
]


def _records(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(x) for x in body.decode().splitlines()]


def _comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records without what an import changes: the header's user and time, fact ids
    (drawn anew; `merged_into` named by the target's key instead)."""
    keys = {r["id"]: r["key"] for r in records if r["type"] == "fact"}
    out = []
    versions = []
    for r in records:
        if r["type"] == "header":
            r = {k: v for k, v in r.items() if k not in ("user_id", "exported_at")}
        if r["type"] == "fact":
            r = {**r, "merged_into": keys.get(r["merged_into"])}
            del r["id"]
        if r["type"] == "fact_version":  # in the order of their facts' new ids: sorted
            if not versions:
                out.append({"type": "fact_version"})  # where they go
            versions.append({k: v for k, v in r.items() if k != "fact_id"})
            continue
        out.append(r)
    if versions:
        at = out.index({"type": "fact_version"})
        versions.sort(key=lambda v: (v["category"], v["key"], v["valid_from"]))
        out[at : at + 1] = versions
    return out


async def _answers(client: AsyncTestClient, headers: dict[str, str]) -> list[Any]:
    out = []
    for query, scope in QUERIES:
        r = await client.post(
            "/memory/search", json={"query": query, "scope": scope}, headers=headers
        )
        assert r.status_code == 200, r.text
        out.append(
            [(h["source_type"], h["text"], h["key"], h["session_id"]) for h in r.json()["hits"]]
        )
    return out


async def _export(client: AsyncTestClient, headers: dict[str, str]) -> bytes:
    r = await client.get("/me/export", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    return r.content


async def test_export_then_import_gives_the_same_memory(client, engine, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    filled = await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    answers = await _answers(client, alice)
    assert all(answers), answers
    messages = (await client.get(f"/sessions/{filled.sid}/messages", headers=alice)).json()
    facts = (await client.get("/memory/facts", headers=alice)).json()["items"]

    body = await _export(client, alice)
    records = _records(body)
    header = records[0]
    assert header["type"] == "header" and header["version"] == 1
    assert header["user_id"] == alice_id and header["exported_at"]
    assert header["embedder"] == {"name": "ollama:nomic-embed-text:latest", "dimension": 768}
    assert records[-1] == {"type": "end", "records": len(records) - 2}
    types = {r["type"] for r in records}
    assert set(KIND_BY_TYPE) | {"header", "file", "end"} == types, types
    assert any(r["type"] == "fact" and r["merged_into"] for r in records)

    # the move: the account is deleted, its export imported into another
    assert (await client.delete(f"/admin/users/{alice_id}")).status_code == 204
    bob_id, bob = await new_user(client, "bob")
    r = await client.post("/me/import", content=body, headers=bob)
    assert r.status_code == 201, r.text
    report = r.json()
    assert report["vectors"] == "kept" and report["dropped_records"] == 0
    assert report["records"]["message"] == 4 and report["records"]["file"] == 2

    assert await _answers(client, bob) == answers
    assert (await client.get(f"/sessions/{filled.sid}/messages", headers=bob)).json() == messages
    imported = (await client.get("/memory/facts", headers=bob)).json()["items"]
    strip = lambda fs: sorted(  # noqa: E731
        ({k: v for k, v in f.items() if k not in ("id", "merged_into", "user_id")} for f in fs),
        key=lambda f: f["key"],
    )
    assert strip(imported) == strip(facts)
    r = await client.get(f"/sessions/{filled.sid}/files/notes.txt", headers=bob)
    assert r.status_code == 200 and r.content == FILE_BYTES
    assert run_sql(db_url, "select chunks from memory_chunk_counts where user_id = %s", bob_id) == [
        (1,)
    ]
    # the session goes on where it stopped
    r = await client.post(
        f"/sessions/{filled.sid}/messages",
        json={"messages": [{"role": "user", "content": "next"}]},
        headers=bob,
    )
    assert r.status_code == 201, r.text
    # and the export of the new account is the same file
    again = _records(await _export(client, bob))
    before = [r for r in _comparable(records) if r["type"] not in ("header",)]
    after = [r for r in _comparable(again) if r["type"] not in ("header",)]
    after_without_new = [
        r for r in after if not (r["type"] == "message" and r["content"] == "next")
    ]
    session_before = next(r for r in before if r["type"] == "session")
    session_after = next(r for r in after_without_new if r["type"] == "session")
    assert session_after["next_seq"] == session_before["next_seq"] + 1
    for r in (session_before, session_after):
        for k in ("next_seq", "next_display_index", "last_active", "context_token_count"):
            r.pop(k)
    after_without_new[-1] = {**after_without_new[-1], "records": before[-1]["records"]}
    assert after_without_new == before


async def test_import_refuses_a_nonempty_account(client, engine, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    body = await _export(client, alice)
    # into itself: not empty
    r = await client.post("/me/import", content=body, headers=alice)
    assert r.status_code == 409 and r.json()["error"] == "conflict", r.text
    # into an empty account, while alice still has the sessions: their ids are taken
    _, bob = await new_user(client, "bob")
    r = await client.post("/me/import", content=body, headers=bob)
    assert r.status_code == 409 and "already a session" in r.json()["detail"], r.text
    # an account with only a sketch is not empty either
    _, carol = await new_user(client, "carol")
    sid = (await client.post("/sessions", json={"profile_id": "default"}, headers=carol)).json()
    r = await client.post("/me/import", content=body, headers=carol)
    assert r.status_code == 409 and "sessions" in r.json()["detail"], (sid, r.text)


async def test_malformed_lines_are_422_naming_the_line_and_leave_nothing(
    client, engine, settings, db_url
) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    filled = await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    lines = (await _export(client, alice)).splitlines()
    assert (await client.delete(f"/admin/users/{alice_id}")).status_code == 204
    bob_id, bob = await new_user(client, "bob")

    async def refused(body: bytes, needle: str) -> None:
        r = await client.post("/me/import", content=body, headers=bob)
        assert r.status_code == 422, r.text
        assert needle in r.json()["detail"], r.json()
        # all or nothing: the account is still empty, no file was left behind
        assert _records(await _export(client, bob))[1:] == [{"type": "end", "records": 0}]
        assert not (settings.data_path / "session_files" / filled.sid).exists()

    n = len(lines)
    bad = b"\n".join([*lines[:-1], b"{not json", lines[-1]])
    await refused(bad, f"line {n}: not JSON")
    unknown = b"\n".join([*lines[:-1], b'{"type": "mystery"}', lines[-1]])
    await refused(unknown, f"line {n}: unknown record type 'mystery'")
    header = json.loads(lines[0])
    v2 = b"\n".join([json.dumps({**header, "version": 2}).encode(), *lines[1:]])
    await refused(v2, "line 1: version: 2 is not supported")
    await refused(b"\n".join(lines[:-1]), "without its end record")
    message = next(i for i, x in enumerate(lines) if b'"type":"message"' in x)
    broken = json.loads(lines[message])
    broken["sequence_number"] = "seven"
    body = b"\n".join([*lines[:message], json.dumps(broken).encode(), *lines[message + 1 :]])
    await refused(body, f"line {message + 1} (message): sequence_number: expected an integer")
    # the intact file still imports afterwards
    r = await client.post("/me/import", content=b"\n".join(lines) + b"\n", headers=bob)
    assert r.status_code == 201, r.text


async def test_import_from_another_embedder_drops_the_vectors(
    client, engine, settings, db_url
) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    lines = (await _export(client, alice)).splitlines()
    assert (await client.delete(f"/admin/users/{alice_id}")).status_code == 204
    header = json.loads(lines[0])
    header["embedder"] = {"name": "local:all-MiniLM-L6-v2-int8", "dimension": 384}
    bob_id, bob = await new_user(client, "bob")
    body = b"\n".join([json.dumps(header).encode(), *lines[1:]])
    r = await client.post("/me/import", content=body, headers=bob)
    assert r.status_code == 201, r.text
    assert r.json()["vectors"] == "dropped" and r.json()["dropped_records"] >= 2
    rows = run_sql(
        db_url,
        "select (select count(*) from memory_facts where user_id = %s and embedding is not null),"
        " (select count(*) from memory_chunk_vectors where user_id = %s),"
        " (select count(*) from memory_chunks where user_id = %s)",
        bob_id,
        bob_id,
        bob_id,
    )
    assert rows == [(0, 0, 1)]
    # still found by text
    r = await client.post("/memory/search", json={"query": "nginx", "scope": "raw"}, headers=bob)
    assert r.json()["hits"], r.text


async def test_admin_export(client, engine, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    r = await client.get(f"/admin/users/{alice_id}/export")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    mine = await _export(client, alice)
    assert _records(r.content)[1:] == _records(mine)[1:]
    assert (await client.get("/admin/users/nobody/export")).status_code == 404
    assert (await client.get(f"/admin/users/{alice_id}/export", headers=alice)).status_code == 403


async def test_export_reads_in_pages(client, engine, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    filled = await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    sid = uuid.UUID(filled.sid)
    pages = []
    last = -1
    while True:  # each page in a short transaction of its own, as the export reads
        async with read_snapshot(session_factory(engine)) as db:
            page = await ExportRepository(db).message_page(alice_id, sid, last, 10**9, 3)
        if page:
            pages.append([r["sequence_number"] for _, r in page])
        if len(page) < 3:
            break
        last = page[-1][1]["sequence_number"]
    assert pages == [[0, 1, 2], [3, 4]]  # hot and archived messages together, in order
    # sessions a page at a time too (made before the cut only)
    for _ in range(3):
        await client.post("/sessions", json={"profile_id": "default"}, headers=alice)
    async with read_snapshot(session_factory(engine)) as db:
        repo = ExportRepository(db)
        now = await repo.now()
        first = await repo.session_page(alice_id, now, None, 3)
        rest = await repo.session_page(alice_id, now, first[-1]["id"], 3)
        fact = KIND_BY_TYPE["fact"]
        facts = await repo.keyset_page(fact, alice_id, after=None, page_rows=3)
        after = (facts[-1]["category"], facts[-1]["key"])
        more = await repo.keyset_page(fact, alice_id, after=after, page_rows=3)
    assert (len(first), len(rest)) == (3, 1)
    assert sorted(s["id"] for s in first) == [s["id"] for s in first]
    assert [[r["key"] for r in facts], [r["key"] for r in more]] == [
        ["editor", "language", "preferred_language"],
        ["shell"],
    ]


def _cli(db_url: str, settings, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EMBEDDING_", "OLLAMA_", "NAVI_", "DATABASE_URL"))
    }
    env.update(
        DATABASE_URL=db_url,
        NAVI_DATA_DIR=str(settings.data_path),
        LOG_LEVEL="warning",
        PYTHONPATH=str(ROOT),
    )
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=settings.data_path.parent,  # no .env from the work tree
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


async def test_cli_export_and_import(client, engine, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    filled = await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    out = settings.data_path.parent / "alice.ndjson"
    proc = _cli(db_url, settings, "export", "--user", alice_id, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert _records(out.read_bytes())[1:] == _records(await _export(client, alice))[1:]
    proc = _cli(db_url, settings, "export", "--user", "nobody")
    assert proc.returncode == 1 and "no user 'nobody'" in proc.stderr

    assert (await client.delete(f"/admin/users/{alice_id}")).status_code == 204
    bob_id, bob = await new_user(client, "bob")
    proc = _cli(db_url, settings, "import", "--user", bob_id, str(out))
    assert proc.returncode == 0, proc.stderr
    assert "4 message" in proc.stdout and "vectors kept" in proc.stdout
    r = await client.get(f"/sessions/{filled.sid}/files/notes.txt", headers=bob)
    assert r.content == FILE_BYTES
    proc = _cli(db_url, settings, "import", "--user", bob_id, str(out))
    assert proc.returncode == 1 and "conflict" in proc.stderr


async def test_import_over_the_limit_is_413(make_client, settings) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, import_max_mb=1) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, bob = await new_user(c, "bob")
        r = await c.post("/me/import", content=b"x" * (1024 * 1024 + 1), headers=bob)
        assert r.status_code == 413, r.text
        assert "IMPORT_MAX_MB" in r.json()["detail"]


async def test_rows_the_database_refuses_are_422_naming_the_lines(client) -> None:  # type: ignore[no-untyped-def]
    _, bob = await new_user(client, "bob")
    header = _records(await _export(client, bob))[0]
    orphan = {
        "type": "message",
        "session_id": str(uuid.uuid4()),
        "sequence_number": 0,
        "role": "user",
        "content": "no session",
    }
    body = b"\n".join(
        json.dumps(r).encode()
        for r in (
            header,
            {"type": "sketch", "id": str(uuid.uuid4()), "scope": "s", "key": "k", "value": "v"},
            orphan,
            {"type": "end", "records": 2},
        )
    )
    r = await client.post("/me/import", content=b"\n\n" + body, headers=bob)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("lines 5-5 (message): insert or update on table"), r.text
    assert _records(await _export(client, bob))[1:] == [{"type": "end", "records": 0}]


async def test_import_into_a_fresh_database_gives_the_same_answers(  # type: ignore[no-untyped-def]
    client, engine, settings, db_url, pg_server, template_db
) -> None:
    """The move to another Navi: an export imported on another server's database (a
    second database here; on the cluster, which has one, this test does not apply)."""
    import dataclasses

    import pytest

    from app.asgi import create_app
    from app.db.engine import create_engine
    from tests.citus import cluster as citus
    from tests.conftest import _admin, _clone, _with_db

    if citus.citus_url() is not None:
        pytest.skip("the cluster has one test database")
    alice_id, alice = await new_user(client, "alice")
    await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    answers = await _answers(client, alice)
    body = await _export(client, alice)

    name = _clone(pg_server, template_db)
    other = create_engine(_with_db(pg_server, name))
    try:
        # its own files; no replica (the configured one replicates the first database)
        data = dataclasses.replace(
            settings, data_dir=settings.data_dir + "-other", database_replica_url=""
        )
        app = create_app(data, engine=other, background_jobs=False)
        async with AsyncTestClient(app, raise_server_exceptions=False) as there:
            there.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
            _, carol = await new_user(there, "carol")
            r = await there.post("/me/import", content=body, headers=carol)
            assert r.status_code == 201, r.text
            assert await _answers(there, carol) == answers
    finally:
        await other.dispose()
        with _admin(pg_server) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
