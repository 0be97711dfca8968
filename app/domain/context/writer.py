"""What a compression writes, once the summary (or the truncate) is decided: in a short
transaction of its own, under the session row's lock, the demotion, the summary that
leads the new context, the transcript marker, the session's new token count and
compression note, the archive move.

Steps of :func:`app.domain.context.compressor.compress_and_save_session`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Session
from app.domain.compression import Estimator, Msg
from app.domain.context.loading import LoadedContext
from app.domain.context.repositories import ContextRepository
from app.domain.kernel.access import Viewer
from app.domain.kernel.forgotten import MARKER, Forgotten
from app.domain.kernel.layout import CONTEXT_HEAD
from app.domain.kernel.messages import MessageIn
from app.domain.kernel.ownership import SessionAccess
from app.domain.sessions.message_repository import MessageRepository
from app.domain.sessions.repositories import SessionRepository
from app.domain.sessions.services import SessionService
from app.lib.metrics import COMPRESSIONS

__all__ = [
    "BASELINE_KEY",
    "REASONS",
    "TRUNCATED_KEY",
    "CompressionWriter",
    "Draft",
    "Reason",
    "Stored",
    "plan_system_first",
    "redact_draft",
]

log = structlog.get_logger()

Reason = Literal["preturn", "midturn", "postturn", "forced", "profile"]
REASONS: tuple[str, ...] = ("preturn", "midturn", "postturn", "forced", "profile")
BASELINE_KEY = "baseline"
TRUNCATED_KEY = "context_truncated"
LAST_COMPRESSION_KEY = "last_compression"


@dataclass
class Draft:
    """What the compression will store, decided before the session row is locked."""

    method: Literal["summary", "truncate"]
    kept: list[Msg]
    demoted: list[Msg]
    summary: str = ""
    keys: list[str] = field(default_factory=list)


@dataclass
class Stored:
    """The rebuilt context, the sequence numbers of the rows the run appended, and how
    many messages then moved to the archive."""

    context: list[Msg]
    tokens: int
    summary_seq: int | None
    marker_seq: int
    archived: int = 0


@dataclass
class CompressionWriter:
    """The steps of a compression that write, in the compression's own short transaction
    (the summary is already decided: no model call under its lock)."""

    db: AsyncSession
    settings: Settings
    sessions: SessionService  # appends the summary and the marker
    session_id: uuid.UUID
    viewer: Viewer
    reason: Reason
    # The session's user (its tenant key), known once `lock` has the row.
    owner: str | None = field(default=None, init=False)

    @property
    def user_id(self) -> str:
        if self.owner is None:
            raise RuntimeError("CompressionWriter: lock() first")
        return self.owner

    async def lock(self, draft: Draft) -> Session | None:
        """Lock the session row and re-check the draft against the stored context: None
        when a concurrent compression demoted some of these messages first."""
        session = await SessionRepository(self.db).lock(self.session_id, self.viewer)
        if session is None:
            await SessionAccess(self.db).refuse(self.session_id, self.viewer)
        self.owner = session.user_id
        current = await ContextRepository(self.db).context_sequence_numbers(
            session.user_id, self.session_id
        )
        if not {m.sequence_number for m in draft.demoted} <= current:
            log.info("compressor.conflict", session_id=str(self.session_id), reason=self.reason)
            return None
        return session

    async def write(
        self, draft: Draft, loaded: LoadedContext, estimate: Estimator, *, tokens_before: int
    ) -> Stored:
        """Demote, then append the summary (it leads the new context) and the marker."""
        await MessageRepository(self.db).set_context_flag(
            self.user_id,
            self.session_id,
            [m.sequence_number for m in draft.demoted] + loaded.strays,
            False,
        )
        new_context = list(draft.kept)
        to_append: list[MessageIn] = []
        if draft.method == "summary":
            summary, row = _summary(draft)
            new_context = plan_system_first(draft.kept, summary)
            to_append.append(row)
        after = estimate(new_context)
        marker_meta = {
            "source": "compression",
            "reason": self.reason,
            "method": draft.method,
            "messages_before": len(loaded.msgs),
            "messages_after": len(new_context),
            "tokens_before": tokens_before,
            "tokens_after": after,
            "demoted": len(draft.demoted),
        }
        text = _marker_text(len(loaded.msgs), len(new_context), draft.method, draft.summary)
        to_append.append(_marker_row(text, marker_meta))
        refs = await self.sessions.append(self.session_id, self.viewer, to_append)
        summary_seq = refs[0].sequence_number if draft.method == "summary" else None
        return Stored(new_context, after, summary_seq, refs[-1].sequence_number)

    async def record(self, method: str, stored: Stored) -> int:
        """Reset the token count, note the compression, drop the real-token baseline;
        archive what is past the hot window. Returns the number of archived messages.
        Every compression (each trigger, each method) is counted here, once."""
        COMPRESSIONS.labels(self.reason, method).inc()
        await ContextRepository(self.db).save_state(
            self.session_id,
            self.viewer,
            token_count=stored.tokens,
            set_metadata={
                LAST_COMPRESSION_KEY: {
                    "at": datetime.now(UTC).isoformat(),
                    "reason": self.reason,
                    "method": method,
                    "marker_sequence_number": stored.marker_seq,
                }
            },
            drop_metadata=(BASELINE_KEY, TRUNCATED_KEY),
        )
        threshold = stored.marker_seq + 1 - self.settings.session_messages_window
        if threshold <= 0:
            return 0
        return await MessageRepository(self.db).archive_old_messages(
            self.user_id, self.session_id, threshold
        )


def redact_draft(draft: Draft, forgotten: Forgotten) -> Draft:
    """The draft with every forgotten text replaced by the marker: the summary, its KEYS
    (a key that was all forgotten text is dropped) and the demoted messages as the hooks
    index them (the stored rows are the forget's business: it redacts them itself)."""
    if not forgotten:
        return draft
    keys = [k for k in (forgotten.redact(k) for k in draft.keys) if k and k != MARKER]
    demoted = [
        replace(m, content=forgotten.redact(m.content)) if forgotten.holds(m.content) else m
        for m in draft.demoted
    ]
    return replace(draft, summary=forgotten.redact(draft.summary), keys=keys, demoted=demoted)


def _summary(draft: Draft) -> tuple[Msg, MessageIn]:
    """The summary as the new context's head, and as the row that stores it."""
    seqs = [m.sequence_number for m in draft.demoted]
    summarized = {"count": len(draft.demoted), "from_seq": min(seqs), "to_seq": max(seqs)}
    metadata = {"breadcrumbs": draft.keys, CONTEXT_HEAD: True, "summarized": summarized}
    msg = Msg(
        role="user", content=draft.summary, is_summary=True, is_display=False, metadata=metadata
    )
    row = MessageIn(
        role="user",
        content=draft.summary,
        is_summary=True,
        is_display=False,
        is_context=True,
        metadata=metadata,
    )
    return msg, row


def _marker_row(text: str, metadata: dict[str, Any]) -> MessageIn:
    """The displayed ``is_compression`` system record of the transcript."""
    return MessageIn(
        role="system",
        content=text,
        is_compression=True,
        is_context=False,
        is_display=True,
        metadata=metadata,
    )


def _marker_text(before: int, after: int, method: str, summary: str) -> str:
    head = f"Context compressed: {before} → {after} messages"
    if method == "truncate":
        return head + " (older messages dropped without a summary)"
    return f"{head}\n\n{summary}"


def plan_system_first(kept: Sequence[Msg], summary: Msg) -> list[Msg]:
    """``system + [summary] + rest`` — the layout the stored context will have."""
    system = [m for m in kept if m.role == "system"]
    return system + [summary] + [m for m in kept if m.role != "system"]
