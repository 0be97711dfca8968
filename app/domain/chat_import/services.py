"""Import a chat export: each conversation a session, each message with its own time.

`import_chats` reads the export a batch of conversations at a time (`reader.py`, in a
worker thread) and stores each batch in one short transaction of its own (`batches.py`): the user's
import lock, the conversations already imported looked up by their source id (the
unique index `ux_sessions_import_source`), the new sessions (a multi-row INSERT) and
every message (COPY), the sessions that grew topped up (only their new messages appended),
and their words written to the raw index (a new session's chunks packed as the live
indexer packs them, in a worker thread while the previous batch is written, then
COPied; a topped-up one through `live_index.index_live_group`) — so an
imported message is findable by `memory_search` as soon as its batch commits, whatever
its age (the live pass only lists recently active sessions). The vectors follow from the
embed queue like any live chunk's. The session's `last_active` is its last message's
time: the session list shows the history in its order, and fact extraction (which takes
pending sessions quietest first) learns from the oldest conversation first, so a newer
statement supersedes an older one. Each session is named by its title (else its first
words): auto-naming only names sessions without a name. The attachments the zip carries
are written as session files once their batch has committed.

A conversation that cannot be read is skipped and named; a cut file imports what came
before the cut and says so (422 when nothing could be read at all).
"""

from __future__ import annotations

import asyncio
import time

import anyio.to_thread
import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import transaction
from app.domain.chat_import.batches import (
    LIST_MAX,
    ImportRun,
    Prepared,
    Stored,
    in_batches,
    prepare_batch,
    store_batch,
)
from app.domain.chat_import.files import FileStore
from app.domain.chat_import.reader import ExportReader
from app.domain.chat_import.repositories import ChatImportRepository
from app.domain.chat_import.schemas import (
    ChatImportReport,
    ConversationCounts,
    FileCounts,
    MessageCounts,
    MissingFile,
)
from app.domain.files.quota import usage_bytes
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.kernel.profiles import DEFAULT_PROFILE_ID
from app.domain.kernel.repositories import UserSessionsRepository
from app.lib.errors import Unprocessable
from app.lib.metrics import CHAT_IMPORTED

log = structlog.get_logger()


def _count_progress(stored: list[Stored]) -> None:
    """`/metrics`: an import's progress, a committed batch at a time."""
    topped_up = sum(s.topped_up for s in stored)
    CHAT_IMPORTED.labels("conversations").inc(len(stored) - topped_up)
    CHAT_IMPORTED.labels("topped_up").inc(topped_up)
    CHAT_IMPORTED.labels("messages").inc(sum(len(s.messages) for s in stored))


async def _quota_left(
    factory: async_sessionmaker[AsyncSession], settings: Settings, user_id: str
) -> int | None:
    quota = settings.files_max_bytes_per_user
    if not quota:
        return None
    async with transaction(factory) as db:
        ids = await UserSessionsRepository(db).ids(user_id)
    return quota - await anyio.to_thread.run_sync(usage_bytes, settings, ids)


async def import_chats(
    factory: async_sessionmaker[AsyncSession],
    settings: Settings,
    user_id: str,
    reader: ExportReader,
    *,
    profile_id: str = DEFAULT_PROFILE_ID,
) -> ChatImportReport:
    """Import the export `reader` reads into `user_id`'s account, a batch per
    transaction; the answer counts what was imported, topped up, left and skipped."""
    started = time.monotonic()
    report = ChatImportReport(
        user_id=user_id,
        format=reader.format or "unknown",
        conversations=ConversationCounts(),
        messages=MessageCounts(),
        files=FileCounts(),
        skipped=[],
        missing_files=[],
        truncated=None,
        notes=[],
        seconds=0.0,
    )
    run = ImportRun(user_id, settings, profile_id, report)
    async with transaction(factory) as db:  # no chunking for what a re-import finds
        run.known = await ChatImportRepository(db).imported_ids(user_id)
        run.forgotten = await ForgottenRepository(db).guard(user_id)
    files = FileStore(settings, reader, await _quota_left(factory, settings, user_id))
    batches = in_batches(reader.conversations())

    def prepare_next() -> list[Prepared] | None:
        batch = next(batches, None)
        return None if batch is None else prepare_batch(run, batch)

    # the next batch is read and chunked in a worker thread while this one is written
    ahead = asyncio.ensure_future(anyio.to_thread.run_sync(prepare_next))
    while (batch := await ahead) is not None:
        ahead = asyncio.ensure_future(anyio.to_thread.run_sync(prepare_next))
        try:
            async with transaction(factory) as db:
                stored = await store_batch(db, run, batch)
        except BaseException:
            await asyncio.gather(ahead, return_exceptions=True)  # the thread's reading ends
            raise
        _count_progress(stored)
        for s in stored:  # the sessions are committed: their files go into place
            for m in s.messages:
                for att in m.attachments:
                    missing = await files.store(s.session_id, att)
                    if missing is None:
                        report.files.stored += 1
                        CHAT_IMPORTED.labels("files").inc()
                        continue
                    report.files.missing += 1
                    if len(report.missing_files) < LIST_MAX:
                        report.missing_files.append(
                            MissingFile(s.conversation.source_id, att.name, missing)
                        )
    report.format = reader.format or "unknown"
    for skip in reader.skipped:
        run.skip(skip.where, skip.reason)
    report.truncated = reader.truncated
    report.notes.extend(reader.notes)
    report.messages.skipped_by_reason = dict(run.by_reason)
    report.messages.skipped = sum(run.by_reason.values())
    report.seconds = round(time.monotonic() - started, 3)
    touched = report.conversations.imported + report.conversations.topped_up
    if reader.truncated and not touched and not report.conversations.unchanged:
        raise Unprocessable(f"file: {reader.truncated} (nothing could be imported)")
    log.info(
        "chat_import.done",
        user_id=user_id,
        format=report.format,
        imported=report.conversations.imported,
        topped_up=report.conversations.topped_up,
        messages=report.messages.imported,
        truncated=bool(reader.truncated),
    )
    return report
