"""Public read-only share links (seed 003, "Public read-only share").

One capability token per session: `secrets.token_urlsafe(32)`, stored with its SHA-256.
A holder's lookup is by the hash through a unique index and the token is then compared
with `hmac.compare_digest`, so the time an answer takes says nothing about how close a
guess was. No expiry and no revoke, by decision: deleting the session deletes the row
(FK cascade) and the link stops resolving.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Message, MessageArchive, Session
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import ANONYMOUS_ID, Principal
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.message_repository import MessageRepository
from app.domain.shares.repositories import ShareRepository
from app.domain.shares.schemas import SharedMessage, SharedMessages, SharedSession
from app.lib.errors import Conflict, Forbidden, NotFound

log = structlog.get_logger()

_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
# Stored system records the transcript shows (every other one is skipped at display).
_SHOWN_SYSTEM_SOURCES = frozenset({"synapse_event"})
REDACTED_SESSION = "[session]"
REDACTED_OWNER = "[owner]"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def may_publish(principal: Principal, owner_id: str | None) -> bool:
    """The owner or an admin; `navi.sessions.read_all` permits reading, not publishing.
    With auth disabled only ownerless (local-mode) sessions qualify."""
    if principal.auth_disabled:
        return owner_id is None or owner_id == ANONYMOUS_ID
    return principal.is_admin or (owner_id is not None and owner_id == principal.id)


def _scrubber(session: Session):  # type: ignore[no-untyped-def]
    """Replace the session id (and a generated owner id) inside shown text, in any letter
    case, with or without dashes: a message can quote them, e.g. the
    "session_files/<id>/…" lines of an upload."""
    patterns = [(_id_pattern(str(session.id), session.id.hex), REDACTED_SESSION)]
    owner = session.user_id
    if owner and len(owner) >= 16:  # generated ids only: never rewrite words like "admin"
        patterns.append((_id_pattern(owner), REDACTED_OWNER))

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            for pattern, replacement in patterns:
                value = pattern.sub(replacement, value)
            return value
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {scrub(k): scrub(v) for k, v in value.items()}
        return value

    return scrub


def _id_pattern(*forms: str) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(f) for f in forms), re.IGNORECASE)


# Keys of a tool call that identify it (OpenAI `id: "call_…"`, Ollama/Anthropic variants):
# the share never carries them; the call's name and arguments are what a reader needs.
_TOOL_CALL_ID_KEYS = frozenset({"id", "call_id", "tool_call_id", "tool_use_id"})


def _shared_tool_calls(tool_calls: list[Any] | None, scrub: Any) -> list[Any] | None:
    if tool_calls is None:
        return None
    return [
        scrub({k: v for k, v in call.items() if k not in _TOOL_CALL_ID_KEYS})
        if isinstance(call, dict)
        else scrub(call)
        for call in tool_calls
    ]


def _shown(row: Message | MessageArchive) -> bool:
    if row.role != "system":
        return True
    return row.is_compression or (row.message_metadata or {}).get("source") in (
        _SHOWN_SYSTEM_SOURCES
    )


def shared_message(row: Message | MessageArchive, scrub: Any) -> SharedMessage:
    return SharedMessage(
        sequence_number=row.sequence_number,
        role=row.role,
        content=scrub(row.content),
        created_at=row.created_at,
        thinking=scrub(row.thinking),
        is_plan=row.is_plan,
        is_compression=row.is_compression,
        is_recall=row.is_recall,
        tool_calls=_shared_tool_calls(row.tool_calls, scrub),
        name=scrub(row.name),
        images=row.images,
    )


class ShareService:
    def __init__(self, db: AsyncSession, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.repo = ShareRepository(db)

    @classmethod
    def of(cls, db: AsyncSession, runtime: Runtime) -> ShareService:
        """The service on `db`."""
        return cls(db, runtime.settings)

    async def issue(self, session_id: uuid.UUID, principal: Principal) -> str:
        """The session's link token, created on the first call (idempotent)."""
        session = await SessionAccess(self.db).get(session_id, Viewer.of(principal))
        if not may_publish(principal, session.user_id):
            raise Forbidden("session: only its owner or an admin may share it")
        if session.next_seq == 0:
            raise Conflict("session: no message saved yet; share it after the first message")
        existing = await self.repo.token_for_session(session.user_id, session_id)
        if existing is not None:
            return existing
        token = secrets.token_urlsafe(32)
        stored = await self.repo.create(session.user_id, session_id, token, token_hash(token))
        log.info("share.issued", session_id=str(session_id))
        return stored

    async def link(self, session: Session, principal: Principal) -> str | None:
        """The session's link token when one was issued and `principal` may publish it
        (who may call `issue`); None otherwise. `session` is one the caller may see."""
        if not may_publish(principal, session.user_id):
            return None
        return await self.repo.token_for_session(session.user_id, session.id)

    async def _resolve(self, token: str) -> Session:
        if not _TOKEN_RE.match(token):
            raise NotFound("this share link does not exist (or its session was deleted)")
        found = await self.repo.resolve(token_hash(token))
        if found is None or not hmac.compare_digest(found[0].token.encode(), token.encode()):
            raise NotFound("this share link does not exist (or its session was deleted)")
        return found[1]

    async def _page(self, session: Session, before_seq: int | None, limit: int) -> SharedMessages:
        rows = await MessageRepository(self.db).history_page(
            session.user_id, session.id, before_seq, limit + 1
        )
        has_more = len(rows) > limit
        rows = rows[:limit]
        scrub = _scrubber(session)
        ordered = [r for r, _ in reversed(rows)]
        return SharedMessages(
            messages=[shared_message(r, scrub) for r in ordered if _shown(r)],
            has_more=has_more,
            next_before_seq=ordered[0].sequence_number if has_more and ordered else None,
        )

    async def view(self, token: str, limit: int) -> SharedSession:
        session = await self._resolve(token)
        page = await self._page(session, None, limit)
        return SharedSession(
            name=_scrubber(session)(session.name),
            profile_id=session.profile_id,
            profile_name=profile_name(session.profile_id),
            created_at=session.created_at,
            last_active=session.last_active,
            messages=page.messages,
            has_more=page.has_more,
            next_before_seq=page.next_before_seq,
        )

    async def messages(self, token: str, before_seq: int | None, limit: int) -> SharedMessages:
        session = await self._resolve(token)
        return await self._page(session, before_seq, limit)


def profile_name(profile_id: str) -> str:
    return profile_id
