"""Export and import under a slow or stalled client (issue 42): neither holds a pooled
connection at the client's pace, both are bounded in time, an export is consistent with
its cut, and an import's files survive the orphan cleanup.

The app is driven over ASGI directly where the test must play the network: a `send`
that stops taking bytes is a client that stopped reading; a `receive` that hands out
the body a byte at a time is a trickling upload. The pool has one connection (no
overflow), so a request that held it would starve every other one.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import anyio
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from app.asgi import create_app
from app.config import Settings
from app.db.engine import create_engine
from app.domain.files.services import cleanup_orphan_dirs
from app.domain.kernel.session_files import session_dir
from app.domain.transfer.records import file_record, header, line
from tests.conftest import new_user

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]


@asynccontextmanager
async def _app(
    db_url: str, settings: Settings, pool: int = 1, **overrides: Any
) -> AsyncIterator[tuple[AsyncTestClient, AsyncEngine]]:
    """The app on a pool of `pool` connections (1 s to wait for one), with `overrides`."""
    s = dataclasses.replace(
        settings, db_pool_size=pool, db_max_overflow=0, db_pool_timeout_seconds=1.0, **overrides
    )
    engine = create_engine(db_url, s)
    try:
        async with AsyncTestClient(
            create_app(s, engine=engine, background_jobs=False), raise_server_exceptions=False
        ) as client:
            client.headers["Authorization"] = f"Bearer {settings.admin_token}"
            yield client, engine
    finally:
        await engine.dispose()


def _scope(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
        "state": {},
    }


class _Reader:
    """A client reading a streamed response: takes `until` body messages, then stops
    reading (its `send` never returns) until `resume` is set."""

    def __init__(self, until: int) -> None:
        self.until = until
        self.status: int | None = None
        self.body = bytearray()
        self.messages = 0
        self.stalled = anyio.Event()
        self.resume = anyio.Event()
        self.complete = anyio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            return
        self.body += message.get("body", b"")
        self.messages += 1
        if not message.get("more_body", False):
            self.complete.set()
        if self.messages == self.until:
            self.stalled.set()
            await self.resume.wait()

    async def receive(self) -> dict[str, Any]:
        await self.complete.wait()  # the client hangs up once it has the whole response
        return {"type": "http.disconnect"}

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in bytes(self.body).decode().splitlines()]


async def _session_with_messages(client: AsyncTestClient, headers: dict[str, str], n: int) -> str:
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=headers)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    await _append(client, headers, sid, n)
    return str(sid)


async def _append(client: AsyncTestClient, headers: dict[str, str], sid: str, n: int) -> None:
    for start in range(0, n, 100):
        msgs = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
            for i in range(start, min(n, start + 100))
        ]
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=headers)
        assert r.status_code == 201, r.text


async def test_a_stalled_export_holds_no_connection_and_is_cut(db_url, settings) -> None:  # type: ignore[no-untyped-def]
    async with _app(db_url, settings, export_idle_seconds=1.5) as (client, engine):
        _, alice = await new_user(client, "alice")
        await _session_with_messages(client, alice, 250)  # three pages of messages
        # from here on the app is called on this test's event loop only: a fresh pool,
        # whose wait queue is not the one the test client's own loop has waited on
        await engine.dispose()
        app = client.app
        reader = _Reader(until=3)  # header, the session page, then one page of messages
        finished = anyio.Event()

        async def export() -> None:
            await app(_scope("GET", "/me/export", alice), reader.receive, reader.send)
            finished.set()

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(export)
            with anyio.fail_after(10):
                await reader.stalled.wait()
            # the client has stopped reading between pages: no connection is held
            assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
            # the one connection is free: another request gets it (called on this event
            # loop, as the export is: the test client serves from a loop of its own, and
            # one pool waited on from two loops fails on its own)
            listing = _Reader(until=0)
            with anyio.fail_after(10):
                await app(_scope("GET", "/sessions", alice), listing.receive, listing.send)
            assert listing.status == 200, bytes(listing.body)
            with anyio.fail_after(10):  # EXPORT_IDLE_SECONDS cuts the stalled stream
                await finished.wait()
        assert time.monotonic() - started < 10
        records = reader.records()
        assert reader.status == 200
        assert records[0]["type"] == "header"
        assert records[-1]["type"] != "end"  # cut: an import refuses the file
        assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_export_of_a_session_appended_to_meanwhile_keeps_its_cut(db_url, settings) -> None:  # type: ignore[no-untyped-def]
    async with _app(db_url, settings, pool=3) as (client, engine):
        _, alice = await new_user(client, "alice")
        sid = await _session_with_messages(client, alice, 150)
        reader = _Reader(until=2)  # header, the session page: stalled before its messages
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                client.app, _scope("GET", "/me/export", alice), reader.receive, reader.send
            )
            with anyio.fail_after(10):
                await reader.stalled.wait()
            await _append(client, alice, sid, 20)  # appended while the export runs
            reader.resume.set()
            with anyio.fail_after(20):
                await reader.complete.wait()
        records = reader.records()
        session = next(r for r in records if r["type"] == "session")
        seqs = [
            r["sequence_number"] for r in records if r["type"] in ("message", "archived_message")
        ]
        assert session["next_seq"] == 150
        assert seqs == list(range(150))  # nothing past the cut, nothing missing
        assert records[-1] == {"type": "end", "records": len(records) - 2}
        # the file imports as it is
        body = bytes(reader.body)
        await client.delete(f"/sessions/{sid}", headers=alice)
        _, bob = await new_user(client, "bob")
        r = await client.post("/me/import", content=body, headers=bob)
        assert r.status_code == 201, r.text
        assert r.json()["records"]["message"] == 150


def _small_export(sid: uuid.UUID, settings: Settings, file_bytes: bytes) -> list[bytes]:
    """An export file of one session and one file, as lines."""
    now = datetime.now(UTC)
    return [
        line(header("someone", now, settings)),
        line({"type": "session", "id": sid, "profile_id": "default"}),
        line(file_record(sid, "notes.txt", 0, file_bytes)),
        line({"type": "end", "records": 2}),
    ]


class _Uploader:
    """A client uploading `body`: `pieces` of it at once, then a byte every `every` s
    (or none at all: `every=None`), optionally waiting for `go` after `pause_after`
    bytes."""

    def __init__(self, body: bytes, every: float | None, pause_after: int | None = None) -> None:
        self.body = body
        self.every = every
        self.pause_after = pause_after
        self.paused = anyio.Event()
        self.go = anyio.Event()
        self.sent = 0
        self.started = anyio.Event()
        self.status: int | None = None
        self.response = bytearray()

    async def receive(self) -> dict[str, Any]:
        if self.sent >= len(self.body):
            await anyio.Event().wait()
        if self.pause_after is not None and self.sent == self.pause_after:
            self.paused.set()
            await self.go.wait()
            piece = self.body[self.sent :]
        elif self.pause_after is not None and self.sent < self.pause_after:
            piece = self.body[: self.pause_after]
        else:
            if self.sent:
                if self.every is None:
                    await anyio.Event().wait()
                await anyio.sleep(self.every)
            piece = self.body[self.sent : self.sent + 1]
        self.sent += len(piece)
        self.started.set()
        return {"type": "http.request", "body": piece, "more_body": self.sent < len(self.body)}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        else:
            self.response += message.get("body", b"")


async def _upload(client: AsyncTestClient, headers: dict[str, str], up: _Uploader) -> None:
    h = {**headers, "Content-Type": "application/x-ndjson"}
    await client.app(_scope("POST", "/me/import", h), up.receive, up.send)


async def test_a_trickling_import_holds_no_connection_and_is_cut(db_url, settings) -> None:  # type: ignore[no-untyped-def]
    overrides = {"import_idle_seconds": 1.0, "import_body_seconds": 2.0}
    async with _app(db_url, settings, **overrides) as (client, engine):
        _, alice = await new_user(client, "alice")
        body = b"".join(_small_export(uuid.uuid4(), settings, b"hello"))
        for every, limit in ((0.3, "IMPORT_BODY_SECONDS"), (None, "IMPORT_IDLE_SECONDS")):
            up = _Uploader(body, every)
            started = time.monotonic()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_upload, client, alice, up)
                with anyio.fail_after(5):
                    await up.started.wait()
                await anyio.sleep(0.2)
                assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
                r = await client.get("/sessions", headers=alice)  # the one connection is free
                assert r.status_code == 200, r.text
            assert time.monotonic() - started < 5
            assert up.status == 408, bytes(up.response)
            error = json.loads(bytes(up.response))
            assert error["error"] == "request_timeout" and limit in error["detail"]
        # nothing was stored: the account is still empty
        r = await client.get("/sessions", headers=alice)
        assert r.json()["items"] == []


async def test_the_orphan_cleanup_during_an_import_deletes_none_of_its_files(
    db_url, settings
) -> None:  # type: ignore[no-untyped-def]
    async with _app(db_url, settings, pool=3) as (client, engine):
        _, alice = await new_user(client, "alice")
        sid = uuid.uuid4()
        lines = _small_export(sid, settings, b"kept")
        pause = sum(len(x) for x in lines[:3]) + 10  # the file record and a bit more
        up = _Uploader(b"".join(lines), every=0, pause_after=pause)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_upload, client, alice, up)
            with anyio.fail_after(5):
                await up.paused.wait()
            await anyio.sleep(0.3)  # whatever the import does with what it has, it has done
            await cleanup_orphan_dirs(client.app.state.runtime)  # the hourly job
            up.go.set()
        assert up.status == 201, bytes(up.response)
        assert (session_dir(settings, sid) / "notes.txt").read_bytes() == b"kept"


async def test_app_connections_have_an_idle_in_transaction_timeout(db_url, settings) -> None:  # type: ignore[no-untyped-def]
    s = dataclasses.replace(settings, db_idle_in_transaction_seconds=42.0)
    engine = create_engine(db_url, s)
    try:
        async with engine.connect() as conn:
            shown = (
                await conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout")
            ).scalar()
        assert shown == "42s"
    finally:
        await engine.dispose()
