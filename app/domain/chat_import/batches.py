"""One batch of a chat import (`services.py: import_chats` runs them in turn).

`prepare_batch` readies a batch's conversations off the event loop (their messages that
fit, redacted by the user's forget records, and a new session's raw chunks); `store_batch`
writes it in one transaction: the user's import lock, the conversations already imported,
the new sessions and their messages, the topped-up ones, and their words in the raw index.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.chat_import.formats import ChatMessage, Conversation
from app.domain.chat_import.repositories import ChatImportRepository
from app.domain.chat_import.schemas import ChatImportReport, SkippedItem
from app.domain.kernel.forgotten import Forgotten
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.raw_history.breadcrumbs import extract_breadcrumbs, merge_breadcrumbs
from app.domain.raw_history.chunks import ChunkMessage, RawChunk, append_chunks
from app.domain.raw_history.live_index import index_live_group
from app.domain.raw_history.live_repository import stale_chunk_row
from app.domain.sessions.naming import fallback_title
from app.domain.sessions.quota import check_quota, message_bytes, quota_bytes

#: A batch (one transaction) holds about this many messages, or this many conversations.
BATCH_MESSAGES = 2000
BATCH_CONVERSATIONS = 200
LIST_MAX = 200  # entries of the answer's lists (skipped, missing files) at most


def top_up_start(keys: list[str], meta: dict[str, Any]) -> int | None:
    """Where a re-imported transcript's new messages start (len(keys): none new), or
    None when it no longer extends what was imported (an earlier turn edited)."""
    count, last = meta.get("count"), meta.get("last")
    if not isinstance(count, int) or count < 0 or count > len(keys):
        return None
    if count and keys[count - 1] != last:
        return None
    return count


@dataclass
class Prepared:
    """A conversation ready to store: its messages that fit, and their raw chunks for
    a new session (computed off the event loop, while the previous batch is written)."""

    conversation: Conversation
    messages: list[ChatMessage]
    chunks: list[RawChunk] | None  # None: not computed (the conversation was imported)
    still_open: bool
    forgotten: Forgotten  # the forget records its texts were redacted by


@dataclass
class Stored:
    session_id: uuid.UUID
    conversation: Conversation
    messages: list[ChatMessage]
    topped_up: bool = False


@dataclass
class ImportRun:
    user_id: str
    settings: Settings
    profile_id: str
    report: ChatImportReport
    by_reason: Counter[str] = field(default_factory=Counter)
    known: set[tuple[str, str]] = field(default_factory=set)  # imported before this run
    forgotten: Forgotten = field(default_factory=lambda: Forgotten({}))  # the user's forgets
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def skip(self, where: str, reason: str) -> None:
        self.report.conversations.skipped += 1
        if len(self.report.skipped) < LIST_MAX:
            self.report.skipped.append(SkippedItem(where, reason))


def in_batches(conversations: Iterator[Conversation]) -> Iterator[list[Conversation]]:
    batch: list[Conversation] = []
    size = 0
    for conv in conversations:
        batch.append(conv)
        size += len(conv.messages)
        if size >= BATCH_MESSAGES or len(batch) >= BATCH_CONVERSATIONS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _message_row(
    run: ImportRun, sid: uuid.UUID, m: ChatMessage, seq: int, source: str
) -> dict[str, Any]:
    meta: dict[str, Any] = {"source": f"import:{source}"}
    if m.time_inferred or m.created_at is None:
        meta["time_inferred"] = True
    if m.attachments:
        meta["attachments"] = [a.name.replace("\x00", "\ufffd")[:500] for a in m.attachments]
    return {
        "session_id": sid,
        "user_id": run.user_id,
        "sequence_number": seq,
        "display_index": seq,
        "role": m.role,
        "content": m.content,
        "thinking": m.thinking,
        "metadata": meta,
        "created_at": m.created_at or run.now,
    }


def _kept(run: ImportRun, conv: Conversation) -> list[ChatMessage]:
    """The messages that fit (MESSAGE_MAX_CHARS); the others counted as skipped."""
    limit = run.settings.message_max_chars
    kept = [m for m in conv.messages if len(m.content) <= limit]
    if len(kept) < len(conv.messages):
        conv.skipped["longer than MESSAGE_MAX_CHARS"] = len(conv.messages) - len(kept)
    return kept


def _crumbs(kept: Sequence[str], texts: list[str]) -> list[str]:
    return merge_breadcrumbs(kept, extract_breadcrumbs(texts))


def _redacted(forgotten: Forgotten, msgs: list[ChatMessage]) -> list[ChatMessage]:
    """`msgs` with every text the user had forgotten redacted (kernel/forgotten.py): an
    export made before a forget does not bring the text back."""
    if not forgotten:
        return msgs
    return [
        replace(
            m,
            content=forgotten.redact(m.content),
            thinking=None if m.thinking is None else forgotten.redact(m.thinking),
        )
        for m in msgs
    ]


def prepare_batch(run: ImportRun, batch: list[Conversation]) -> list[Prepared]:
    """The batch's conversations with their chunks as the live indexer would pack a new
    session's messages (`append_chunks` onto no open chunk), their texts redacted by the
    user's forget records. Pure CPU: a worker thread's."""
    out = []
    forgotten = run.forgotten
    for conv in batch:
        msgs = _redacted(forgotten, _kept(run, conv))
        if (conv.source, conv.source_id) in run.known:
            out.append(Prepared(conv, msgs, None, False, forgotten))
            continue
        chunk_msgs = [
            ChunkMessage(m.role, m.content, seq, m.created_at or run.now)
            for seq, m in enumerate(msgs)
        ]
        _, chunks, still_open = append_chunks(None, chunk_msgs, _crumbs)
        out.append(Prepared(conv, msgs, chunks, still_open, forgotten))
    return out


async def store_batch(db: AsyncSession, run: ImportRun, batch: list[Prepared]) -> list[Stored]:
    repo = ChatImportRepository(db)
    await repo.lock_user(run.user_id)
    # the forget records, held until this commits: a forget that landed since the batch
    # was prepared redacts it again (a forget after this commit redacts what it stored)
    forgotten = await ForgottenRepository(db).guard(run.user_id)
    if forgotten != batch[0].forgotten:
        run.forgotten = forgotten
        batch = prepare_batch(run, [p.conversation for p in batch])
    source = batch[0].conversation.source
    found = await repo.imported(run.user_id, source, [p.conversation.source_id for p in batch])
    new_sessions: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    stored: list[Stored] = []
    fresh: list[tuple[uuid.UUID, Prepared]] = []
    seen: set[str] = set()
    for prepared in batch:
        conv = prepared.conversation
        where = f"conversation {conv.source_id[:80]}"
        if conv.source_id in seen:
            run.skip(where, "the same conversation id twice in the file (the first kept)")
            continue
        seen.add(conv.source_id)
        msgs = prepared.messages
        keys = [m.key for m in msgs]
        if conv.notes:
            run.report.notes.extend(f"{where}: {n}" for n in conv.notes[:3])
        meta = {"source": source, "id": conv.source_id, "count": len(keys)}
        meta["last"] = keys[-1] if keys else None
        if conv.source_id in found:
            sid, next_seq, old = found[conv.source_id]
            start = top_up_start(keys, old)
            if start is None:
                run.skip(
                    where, "changed since it was imported (an earlier turn edited): not topped up"
                )
                continue
            if start >= len(msgs):
                run.report.conversations.unchanged += 1
                continue
            new = msgs[start:]
            last = max(m.created_at or run.now for m in new)
            has_user = any(m.role == "user" for m in new)
            added = sum(message_bytes(m.content, m.thinking, None, None) for m in new)
            await repo.top_up(run.user_id, sid, len(new), last, has_user, meta, added)
            rows += [_message_row(run, sid, m, next_seq + i, source) for i, m in enumerate(new)]
            run.report.conversations.topped_up += 1
            run.by_reason.update(conv.skipped)  # (their messages left out, counted again)
            stored.append(Stored(sid, conv, new, topped_up=True))
            continue
        if not msgs:
            run.skip(where, "no message with text to import")
            continue
        sid = uuid.uuid4()
        first_user = next((m.content for m in msgs if m.role == "user"), msgs[0].content)
        times = [m.created_at or run.now for m in msgs]
        new_sessions.append(
            {
                "id": sid,
                "profile_id": run.profile_id,
                "name": forgotten.redact(conv.title or fallback_title(first_user)),
                "created_at": conv.created_at or min(times),
                "last_active": max(times),
                "next_seq": len(msgs),
                "next_display_index": len(msgs),
                "message_bytes": sum(
                    message_bytes(m.content, m.thinking, None, None) for m in msgs
                ),
                "memory_pending": True if any(m.role == "user" for m in msgs) else None,
                "raw_index_pending": True,
                "import_source": source,
                "import_source_id": conv.source_id,
                "session_metadata": {"import": meta},
            }
        )
        rows += [_message_row(run, sid, m, i, source) for i, m in enumerate(msgs)]
        run.report.conversations.imported += 1
        run.by_reason.update(conv.skipped)
        stored.append(Stored(sid, conv, msgs))
        if prepared.chunks is not None:
            fresh.append((sid, prepared))
    created = {sid for sid, _ in fresh}
    if quota_bytes(run.settings) and rows:  # USER_MESSAGE_STORAGE_MB, as an append's
        adding = sum(message_bytes(r["content"], r["thinking"], None, None) for r in rows)
        check_quota(
            run.settings,
            await repo.message_bytes(run.user_id),
            adding,
            "chats: the next conversations (those before them are imported; importing the"
            " file again once there is room adds the rest)",
        )
    await repo.insert_sessions(run.user_id, new_sessions)
    await repo.insert_messages(run.user_id, rows)
    run.report.messages.imported += len(rows)
    # their words in the raw index, in this transaction: findable once it commits
    await _index_new(repo, run, fresh)
    for s in stored:
        if s.session_id in created:
            continue
        has_row = False
        key = (run.user_id, s.session_id)
        while done := (await index_live_group(db, {key: has_row}, run.user_id)).get(key):
            has_row = True
            if done.done:
                break
    await repo.durable_commit()  # the live claim turned the WAL wait off: messages need it
    return stored


async def _index_new(
    repo: ChatImportRepository, run: ImportRun, fresh: list[tuple[uuid.UUID, Prepared]]
) -> None:
    """New sessions' chunks (`prepare_batch`, written by COPY) and raw index state: nothing to
    read back or claim, the sessions being this transaction's own."""
    chunks: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    now = datetime.now(UTC)
    for sid, p in fresh:
        assert p.chunks is not None
        ids = [uuid.uuid4() for _ in p.chunks]
        hashes: set[str] = set()
        for cid, c in zip(ids, p.chunks, strict=True):
            # a content the session holds twice is one chunk (the unique key), as the
            # live indexer's ON CONFLICT DO NOTHING leaves it
            if c.content_hash in hashes:
                continue
            hashes.add(c.content_hash)
            chunks.append(stale_chunk_row(cid, sid, c, now))
        opened = ids[-1] if ids and p.still_open else None
        states.append({"sid": sid, "last": len(p.messages) - 1, "open": opened})
    await repo.insert_chunks(run.user_id, chunks)
    await repo.cover_new_sessions(run.user_id, states)
