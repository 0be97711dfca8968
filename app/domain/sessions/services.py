"""Session rules: creation, the dual buffer, appends, history, ownership (via Viewer)."""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

import msgspec
import structlog
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Message, MessageArchive, Session
from app.domain.files.images import attach_pasted_images, check_pasted_image, with_context_note
from app.domain.kernel.access import Viewer, reaches_llm
from app.domain.kernel.layout import order_context
from app.domain.kernel.messages import MessageIn, MessageOut
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.profiles import Profiles
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.compaction import after_append
from app.domain.sessions.message_repository import MessageRepository
from app.domain.sessions.planning_repository import PlanningRepository
from app.domain.sessions.quota import USAGE, message_bytes, quota_bytes
from app.domain.sessions.quota import check_quota as check_quota_of
from app.domain.sessions.repositories import SessionRepository
from app.domain.sessions.schemas import MAX_APPEND, AppendedRef, HistoryPage
from app.lib.errors import PayloadTooLarge, Unprocessable
from app.lib.inputs import check_time, reject_nul, scrub

log = structlog.get_logger()

MAX_NAME = 200
MAX_PROFILE_ID = 200
PLANNING_LOGS_KEPT = 200
PLANNING_ENTRY_MAX_BYTES = 256 * 1024
# Set in a message's metadata when a NUL (U+0000) in its text was replaced by U+FFFD.
SANITIZED_KEY = "sanitized"
# Everything a message carries that a model or a tool wrote: kept, NUL replaced.
_FREE_TEXT = ("content", "thinking", "metadata", "tool_calls", "tool_call_id", "name", "files")


def message_out(row: Message | MessageArchive | Row[Any], archived: bool = False) -> MessageOut:
    return MessageOut(
        sequence_number=row.sequence_number,
        display_index=row.display_index,
        role=row.role,
        content=row.content,
        created_at=row.created_at,
        thinking=row.thinking,
        is_context=row.is_context,
        is_display=row.is_display,
        is_plan=row.is_plan,
        is_compression=row.is_compression,
        is_summary=row.is_summary,
        is_compression_critical=row.is_compression_critical,
        is_recall=row.is_recall,
        metadata=row.message_metadata or {},
        elapsed_seconds=row.elapsed_seconds,
        tool_call_count=row.tool_call_count,
        token_count=row.token_count,
        tool_calls=row.tool_calls,
        tool_call_id=row.tool_call_id,
        name=row.name,
        files=row.files,
        images=row.images,
        archived=archived,
    )


def _metadata(row: Message) -> dict[str, Any] | None:
    return row.message_metadata


def _check_name(name: str | None) -> str | None:
    if name is None:
        return None
    name = (reject_nul(name, "name") or "").strip()
    if len(name) > MAX_NAME:
        raise Unprocessable(f"name: at most {MAX_NAME} characters")
    return name or None


def _scrubbed(m: MessageIn) -> tuple[MessageIn, list[str]]:
    """The message with every NUL in its text replaced by U+FFFD (and marked), the
    fields that had one."""
    changes: dict[str, Any] = {}
    for field in _FREE_TEXT:
        value, changed = scrub(getattr(m, field))
        if changed:
            changes[field] = value
    if not changes:
        return m, []
    fields = list(changes)
    changes["metadata"] = {**changes.get("metadata", m.metadata), SANITIZED_KEY: True}
    return msgspec.structs.replace(m, **changes), fields


def validate_messages(messages: list[MessageIn], settings: Settings) -> list[MessageIn]:
    """The messages as they will be stored: 4xx for what cannot be, NULs replaced."""
    if not messages:
        raise Unprocessable("messages: at least one message is required")
    if len(messages) > MAX_APPEND:
        raise Unprocessable(f"messages: at most {MAX_APPEND} per request")
    out = []
    for i, m in enumerate(messages):
        if len(m.content) > settings.message_max_chars:
            raise PayloadTooLarge(
                f"messages[{i}].content: {len(m.content)} characters, the limit is "
                f"{settings.message_max_chars} (MESSAGE_MAX_CHARS)"
            )
        if m.thinking and len(m.thinking) > settings.message_max_chars:
            raise PayloadTooLarge(
                f"messages[{i}].thinking: over {settings.message_max_chars} characters"
            )
        if m.role == "tool" and m.is_summary:
            raise Unprocessable(f"messages[{i}]: a tool result cannot be a summary")
        if m.created_at is not None:  # naive = UTC, stored as such
            at = check_time(m.created_at, f"messages[{i}].created_at")
            if at is not m.created_at:
                m = msgspec.structs.replace(m, created_at=at)
        # A tool result may be empty (the command printed nothing); nothing else may.
        if m.role != "tool" and not (m.content.strip() or m.tool_calls or m.images):
            raise Unprocessable(f"messages[{i}]: empty — needs content, tool_calls or images")
        for j, img in enumerate(m.images or []):
            try:
                data = base64.b64decode(img, validate=True)
            except (binascii.Error, ValueError):
                raise Unprocessable(f"messages[{i}].images[{j}]: not valid base64") from None
            check_pasted_image(data, f"messages[{i}].images[{j}]")
        clean, fields = _scrubbed(m)
        if fields:
            log.info("message.sanitized", index=i, role=m.role, fields=fields)
        out.append(clean)
    return out


def message_row(
    session_id: uuid.UUID,
    user_id: str,
    m: MessageIn,
    seq: int,
    display_index: int | None,
    at: datetime,
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "user_id": user_id,
        "sequence_number": seq,
        "display_index": display_index,
        "role": m.role,
        "content": m.content,
        "thinking": m.thinking,
        "is_context": m.is_context,
        "is_display": m.is_display,
        "is_plan": m.is_plan,
        "is_compression": m.is_compression,
        "is_summary": m.is_summary,
        "is_compression_critical": m.is_compression_critical,
        "is_recall": m.is_recall,
        "message_metadata": m.metadata,
        "elapsed_seconds": m.elapsed_seconds,
        "tool_call_count": m.tool_call_count,
        "token_count": m.token_count,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "files": m.files,
        "images": m.images,
        "created_at": m.created_at or at,
    }


def check_profile_id(profile_id: str, known: Collection[str]) -> str:
    """A profile id a session may name: 422 naming it when it is not a known profile."""
    profile_id = profile_id.strip()
    if not profile_id or len(profile_id) > MAX_PROFILE_ID:
        raise Unprocessable(f"profile_id: 1-{MAX_PROFILE_ID} characters")
    if profile_id not in known:
        raise Unprocessable(
            f"profile_id: unknown profile {profile_id!r}; known: {', '.join(sorted(known))}"
        )
    return profile_id


class SessionService:
    def __init__(self, db: AsyncSession, settings: Settings, profiles: Profiles) -> None:
        self.repo = SessionRepository(db)
        self.messages = MessageRepository(db)
        self.planning = PlanningRepository(db)
        self.access = SessionAccess(db)
        self.settings = settings
        self.profiles = profiles  # a pasted image is priced in its session's window

    @classmethod
    def of(cls, db: AsyncSession, runtime: Runtime) -> SessionService:
        """The service on `db`."""
        return cls(db, runtime.settings, runtime.profiles)

    async def create(
        self, profile_id: str, user_id: str, name: str | None, known: Collection[str]
    ) -> Session:
        profile_id = check_profile_id(profile_id, known)
        row = await self.repo.create(profile_id, user_id, _check_name(name))
        log.info("session.created", session_id=str(row.id), profile_id=profile_id)
        return row

    async def list_page(
        self, viewer: Viewer, *, limit: int, offset: int, **filters: Any
    ) -> tuple[list[Row[Any]], int]:
        """The sidebar: the viewer's sessions, pinned first, and the total (`filters`:
        profile_id, search, sort_by, sort_order of `SessionRepository.list_page`)."""
        return await self.repo.list_page(viewer, limit=limit, offset=offset, **filters)

    async def search_matches(
        self, session_ids: Sequence[uuid.UUID], viewer: Viewer, term: str, max_positions: int
    ) -> list[Row[Any]]:
        """Where `term` occurs in each visible session (display positions, a snippet)."""
        return await self.repo.search_matches(session_ids, viewer, term, max_positions)

    async def get(self, session_id: uuid.UUID, viewer: Viewer) -> Session:
        return await self.access.get(session_id, viewer)

    async def refuse(self, session_id: uuid.UUID, viewer: Viewer) -> NoReturn:
        await self.access.refuse(session_id, viewer)

    async def patch(self, session_id: uuid.UUID, viewer: Viewer, values: dict[str, Any]) -> Session:
        if "name" in values:
            values["name"] = _check_name(values["name"])
        if values and not await self.repo.update_fields(session_id, viewer, **values):
            await self.refuse(session_id, viewer)
        return await self.get(session_id, viewer)

    async def reload(self, session_id: uuid.UUID, viewer: Viewer) -> Session:
        """The session as stored now (after another service changed its row)."""
        return await self.repo.reload(await self.get(session_id, viewer))

    async def delete(self, session_id: uuid.UUID, viewer: Viewer) -> None:
        if not await self.repo.delete(session_id, viewer):
            await self.refuse(session_id, viewer)
        log.info("session.deleted", session_id=str(session_id))

    async def append(
        self,
        session_id: uuid.UUID,
        viewer: Viewer,
        messages: list[MessageIn],
        *,
        check_quota: bool = False,
    ) -> list[AppendedRef]:
        """Append atomically: all messages or none, consecutive sequence numbers in
        request order, display positions for displayed ones; bumps last_active and the
        session's `message_bytes`. `check_quota`: a user's own messages — 413 past
        USER_MESSAGE_STORAGE_MB (`quota.py`)."""
        messages = validate_messages(messages, self.settings)
        n_display = sum(1 for m in messages if m.is_display)
        has_user = any(m.role == "user" for m in messages)
        n_bytes = sum(
            message_bytes(m.content, m.thinking, m.tool_calls, m.images) for m in messages
        )
        reserved = await self.messages.reserve(
            session_id,
            viewer,
            len(messages),
            n_display,
            has_user=has_user,
            rolling=self.profiles.rolling_marks,
            n_bytes=n_bytes,
        )
        if reserved is None:
            await self.refuse(session_id, viewer)
        seq, disp, user_id = reserved
        quota = quota_bytes(self.settings) if check_quota else 0
        if quota:
            used = USAGE.estimate(user_id, quota, n_bytes)
            if used is None:  # read: this append is counted in the sum already
                used = await self.repo.message_bytes(user_id) - n_bytes
                USAGE.remember(user_id, used + n_bytes)
            check_quota_of(self.settings, used, n_bytes, "messages")
        # Pasted images → session files + the notice of the LLM copy (metadata).
        await attach_pasted_images(
            self.repo,
            self.messages,
            self.settings,
            self.profiles,
            user_id,
            session_id,
            viewer,
            messages,
        )
        at = datetime.now(UTC)
        rows, refs = [], []
        for m in messages:
            d = None
            if m.is_display:
                d, disp = disp, disp + 1
            rows.append(message_row(session_id, user_id, m, seq, d, at))
            refs.append(AppendedRef(sequence_number=seq, display_index=d))
            seq += 1
        await self.messages.insert_messages(rows)
        # Size-based compaction of the hot history (SESSION_MAX_HISTORY_BYTES).
        await after_append(
            self.repo.session,
            user_id,
            session_id,
            reserved[0],
            [(m.content, m.thinking) for m in messages],
            self.settings.session_max_history_bytes,
        )
        return refs

    async def history(
        self, session_id: uuid.UUID, viewer: Viewer, before_seq: int | None, limit: int
    ) -> HistoryPage:
        # One statement for the caller's own session: its rows name the caller as their
        # user, so a row found proves the session theirs; only an empty page asks whether
        # the session is there at all (404 or an empty page). An all-users viewer names
        # the session's owner first (the tenant key of the page's statement).
        user_id = await self.access.owner(session_id, viewer) if viewer.all_users else None
        rows = await self.messages.history_page(
            user_id or viewer.user_id, session_id, before_seq, limit + 1
        )
        if not rows and user_id is None:
            await self.access.owner(session_id, viewer)
        has_more = len(rows) > limit
        rows = rows[:limit]
        msgs = [message_out(r, archived) for r, archived in reversed(rows)]
        return HistoryPage(
            messages=msgs,
            has_more=has_more,
            next_before_seq=msgs[0].sequence_number if has_more and msgs else None,
        )

    # The console's session page (app/console/session_page.py): reads of a session the
    # caller already resolved with `get` (its `user_id` is the statements' tenant key).
    async def newer_bound(self, session: Session, after_seq: int, limit: int) -> int | None:
        """The `before_seq` of the `history` page of the `limit` displayed messages right
        after `after_seq`; None when that page is the newest."""
        return await self.messages.newer_bound(session.user_id, session.id, after_seq, limit)

    async def size_buckets(
        self, session: Session, first: int, width: int, chars_per_token: float
    ) -> list[tuple[int, int, int | None]]:
        """The tokens the session's displayed messages gave the model, summed per bucket
        of `width` display positions from `first` on: (last display index, tokens, the
        context the model counted after the bucket's newest measured turn or None), in
        order. No text leaves the database."""
        return await self.messages.size_buckets(
            session.user_id, session.id, first, width, chars_per_token
        )

    async def compression_records(self, session: Session, limit: int) -> list[Row[Any]]:
        """The newest `limit` compression markers and compression summaries (with their
        metadata: tokens before/after, breadcrumbs, the summarized range), oldest first."""
        return await self.messages.compression_records(session.user_id, session.id, limit)

    async def context(
        self, session_id: uuid.UUID, viewer: Viewer
    ) -> tuple[Session, list[MessageOut]]:
        """What the LLM sees: the is_context rows, stored system records only when their
        source is on the allowlist."""
        session = await self.get(session_id, viewer)
        rows = await self.messages.context_messages(session.user_id, session_id)
        visible = [r for r in rows if reaches_llm(r.role, r.is_context, r.message_metadata)]
        # A compression summary leads the context although its sequence number is newer.
        return session, [
            with_context_note(message_out(r)) for r in order_context(visible, _metadata)
        ]

    async def context_tail(self, session: Session, newest: int) -> tuple[int, list[MessageOut]]:
        """`context` for a long one: how many messages the model sees, and its summaries
        with the newest `newest` messages, in the order the model sees them."""
        total, rows = await self.messages.context_tail(session.user_id, session.id, newest)
        visible = [r for r in rows if reaches_llm(r.role, r.is_context, r.message_metadata)]
        return total, [with_context_note(message_out(r)) for r in order_context(visible, _metadata)]

    async def add_planning_log(
        self, session_id: uuid.UUID, viewer: Viewer, entry: dict[str, Any]
    ) -> None:
        entry, changed = scrub(entry)
        if changed:  # kept, marked like a message
            entry = {**entry, SANITIZED_KEY: True}
        size = len(msgspec.json.encode(entry))
        if size > PLANNING_ENTRY_MAX_BYTES:
            raise PayloadTooLarge(f"entry: {size} bytes, the limit is {PLANNING_ENTRY_MAX_BYTES}")
        seq = await self.planning.append(
            session_id,
            viewer,
            entry,
            keep=PLANNING_LOGS_KEPT,
            max_bytes=self.settings.planning_max_session_bytes,
        )
        if seq is None:
            await self.refuse(session_id, viewer)

    async def planning_page(
        self, session_id: uuid.UUID, viewer: Viewer, limit: int, offset: int
    ) -> tuple[list[Any], int]:
        """A page of the planning log, oldest first, and how many entries it keeps."""
        session = await self.get(session_id, viewer)
        return await self.planning.page(session.user_id, session_id, limit, offset)

    async def planning_newest(self, session: Session, limit: int) -> tuple[list[Any], int]:
        """The newest `limit` planning entries, newest first, and how many are kept."""
        return await self.planning.page(session.user_id, session.id, limit, 0, newest=True)
