"""Export a user's memory as NDJSON: a page of lines at a time, each page read in a short
transaction of its own.

No connection and no snapshot is held between pages: the generator returns its pooled
connection before it yields, so a client that reads slowly (or not at all) holds none,
and the export holds back no vacuum. Instead of one snapshot the export reads up to a
**cut** taken at its start and per session:

- the header's `exported_at` is the database's clock at the start; sessions created
  after it are left out;
- a session's row is read once, and its messages (hot and archived, read together in
  one snapshot per page: a message the archiving moves is seen once), message
  embeddings and other per-sequence rows only below the `next_seq` of that row: what is
  appended while the export runs is not in it, and the file's session agrees with its
  messages (`next_seq` above every message, as on the server);
- a chunk's segment vectors are read for the chunks of the file only (so each one's
  chunk is in it before it).

What this does not give is one point in time for everything: a row changed in place
while the export runs (a session renamed, a fact edited, compression marking messages
out of the context, a chunk rewritten by the live indexer) is exported as it was when
its page was read. Every record is a committed state of its row, and the file always
imports; derived data (chunks, vectors, index state) may be a little ahead of the
messages, which the background jobs reconcile after an import.

Order: the header; the user's forget records (`forgotten`: hashes, never the text — an
import checks every record after it against them); per page of sessions the session rows and their one-row kinds, then
per session its messages, other per-session rows and files; then the user's other
tables in `KINDS` order (a chunk page followed by its vectors); the end record.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import read_snapshot
from app.domain.transfer.export_repository import PAGE_ROWS, ExportRepository
from app.domain.transfer.files_io import file_records
from app.domain.transfer.records import (
    END,
    FORGOTTEN,
    KINDS,
    Kind,
    header,
    line,
    row_record,
)

log = structlog.get_logger()

_MESSAGES = ("message", "archived_message")  # read together (`message_page`)


class _Export:
    def __init__(
        self, factory: async_sessionmaker[AsyncSession], settings: Settings, user_id: str
    ) -> None:
        self.factory = factory
        self.settings = settings
        self.user_id = user_id
        self.records = 0

    def lines(self, rows: list[tuple[Kind, Any]]) -> bytes:
        self.records += len(rows)
        return b"".join(line(row_record(kind, row)) for kind, row in rows)

    async def sessions(self, started: datetime) -> AsyncIterator[bytes]:
        one_row = [k for k in KINDS if k.by_session and not k.order]
        after: uuid.UUID | None = None
        while True:
            async with read_snapshot(self.factory) as db:
                repo = ExportRepository(db)
                page = await repo.session_page(self.user_id, started, after)
                rows: list[tuple[Kind, Any]] = [(KINDS[0], s) for s in page]
                ids = [s["id"] for s in page]
                for kind in one_row if page else ():
                    rows += [(kind, r) for r in await repo.of_sessions(kind, self.user_id, ids)]
            if not page:
                return
            yield self.lines(rows)
            for session in page:
                async for chunk in self.session_rows(session["id"], session["next_seq"]):
                    yield chunk
            if len(page) < PAGE_ROWS:
                return
            after = page[-1]["id"]

    async def session_rows(self, sid: uuid.UUID, below: int) -> AsyncIterator[bytes]:
        """One session's messages and keyed rows below its cut, then its files."""
        last = -1
        while True:
            page_rows = KINDS[1].page_rows
            async with read_snapshot(self.factory) as db:
                msgs = await ExportRepository(db).message_page(
                    self.user_id, sid, last, below, page_rows
                )
            if msgs:
                yield self.lines(msgs)
            if len(msgs) < page_rows:
                break
            last = msgs[-1][1]["sequence_number"]
        for kind in KINDS:
            if kind.by_session and kind.order and kind.type not in _MESSAGES:
                seq = "sequence_number" in kind.table.c
                async for rows in self.keyset(
                    kind, session_id=sid, below_seq=below if seq else None
                ):
                    yield self.lines([(kind, r) for r in rows])
        async for record in file_records(self.settings, sid):
            self.records += 1
            yield line(record)

    async def keyset(self, kind: Kind, **where: Any) -> AsyncIterator[list[Any]]:
        after: tuple[Any, ...] | None = None
        while True:
            async with read_snapshot(self.factory) as db:
                rows = await ExportRepository(db).keyset_page(
                    kind, self.user_id, after=after, page_rows=kind.page_rows, **where
                )
            if rows:
                yield rows
            if not kind.order or len(rows) < kind.page_rows:
                return
            after = tuple(rows[-1][name] for name in kind.order)

    async def forgotten_rows(self) -> AsyncIterator[bytes]:
        kind = next(k for k in KINDS if k.type == FORGOTTEN)
        async for rows in self.keyset(kind):
            kept = [r for r in rows if r["entries"]]  # a row no forget wrote to yet: none
            if kept:
                yield self.lines([(kind, r) for r in kept])

    async def user_rows(self) -> AsyncIterator[bytes]:
        vectors = next(k for k in KINDS if k.type == "chunk_vector")
        for kind in KINDS:
            if kind.by_session or kind is vectors or kind is KINDS[0] or kind.type == FORGOTTEN:
                continue
            async for rows in self.keyset(kind):
                yield self.lines([(kind, r) for r in rows])
                if kind.type == "chunk":  # its vectors, with the chunks of the file only
                    ids = [r["id"] for r in rows]
                    async for vrows in self.keyset(vectors, chunk_ids=ids):
                        yield self.lines([(vectors, r) for r in vrows])


async def export_lines(
    factory: async_sessionmaker[AsyncSession], settings: Settings, user_id: str
) -> AsyncIterator[bytes]:
    """The export of `user_id`, a page of lines at a time (see the module docstring)."""
    export = _Export(factory, settings, user_id)
    async with read_snapshot(factory) as db:
        started = await ExportRepository(db).now()
    yield line(header(user_id, started, settings))
    async for chunk in export.forgotten_rows():  # first: an import checks what follows
        yield chunk
    async for chunk in export.sessions(started):
        yield chunk
    async for chunk in export.user_rows():
        yield chunk
    yield line({"type": END, "records": export.records})
    log.info("transfer.exported", user_id=user_id, records=export.records)
