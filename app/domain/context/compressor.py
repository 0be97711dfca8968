"""compress_and_save_session: plan, summarize (or hard-truncate), persist — one transaction.

Every trigger (pre-turn, mid-turn, post-turn, forced) ends here, so the guarantees hold
on every path:

* ``session.messages`` is never altered: no row is deleted or rewritten; demoted rows
  only get ``is_context = false`` (by sequence number, context-only rows such as older
  summaries included — a summary can never come back on reload);
* a summarizer failure is never fatal: one retry with a wider keep window, then the
  token-budget hard truncate, which needs no LLM;
* the new summary (``role=user``, ``is_summary``, ``is_display=false``, KEYS in
  ``metadata["breadcrumbs"]``, ``metadata["context_head"]``) leads the rebuilt context
  (see :mod:`app.domain.kernel.layout`), and a displayed ``is_compression`` system
  marker records what happened in the transcript;
* the session's token count is reset to the calibrated estimate of the new context and
  its real-token baseline is dropped (the context it measured no longer exists);
* messages past ``session_messages_window`` move to the archive;
* the exact demoted messages and the KEYS go to the demotion hooks.

The LLM call happens before the session row is locked; the lock is then taken and the
plan re-checked against the stored context, so a concurrent compression of the same
session is detected (the second one gives up) instead of demoting twice.
"""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Message
from app.domain.compression import (
    Estimator,
    Msg,
    Plan,
    calibration_for,
    estimate_tokens,
    hard_truncate,
    plan_compression,
)
from app.domain.context.repositories import ContextRepository
from app.domain.context.summarizer import Summarizer, SummaryError, breadcrumbs_of, merge_keys
from app.domain.files.images import context_view
from app.domain.kernel.access import Viewer, reaches_llm
from app.domain.kernel.hooks import DemotionHooks, demotion_hooks
from app.domain.kernel.layout import CONTEXT_HEAD, order_context
from app.domain.kernel.messages import MessageIn
from app.domain.kernel.profiles import Profile
from app.domain.sessions.repositories import SessionRepository
from app.domain.sessions.services import SessionService
from app.llm.gateway import LLMError

__all__ = [
    "BASELINE_KEY",
    "REASONS",
    "TRUNCATED_KEY",
    "CompressionResult",
    "LoadedContext",
    "compress_and_save_session",
    "estimator_for",
    "load_context",
    "msg_from_row",
]

log = structlog.get_logger()

Reason = Literal["preturn", "midturn", "postturn", "forced"]
REASONS: tuple[str, ...] = ("preturn", "midturn", "postturn", "forced")
BASELINE_KEY = "baseline"
TRUNCATED_KEY = "context_truncated"
LAST_COMPRESSION_KEY = "last_compression"


# --------------------------------------------------------------------------- loading
def _decode_images(images: list[str] | None) -> list[bytes] | None:
    if not images:
        return None
    out = []
    for img in images:
        try:
            out.append(base64.b64decode(img))
        except (binascii.Error, ValueError, TypeError):
            continue  # validated on append; an unreadable one is priced by the fallback
    return out or None


def msg_from_row(row: Message) -> Msg:
    # As the LLM receives it: a pasted-image notice appended, only the admitted images.
    content, images = context_view(row.content or "", row.images, row.message_metadata)
    return Msg(
        role=row.role,
        content=content,
        sequence_number=row.sequence_number,
        is_context=row.is_context,
        is_display=row.is_display,
        is_summary=row.is_summary,
        is_compression=row.is_compression,
        is_compression_critical=row.is_compression_critical,
        is_plan=row.is_plan,
        tool_calls=row.tool_calls,
        tool_call_id=row.tool_call_id,
        name=row.name,
        images=_decode_images(images),
        metadata=dict(row.message_metadata or {}),
        created_at=row.created_at,
    )


@dataclass
class LoadedContext:
    """The LLM context of a session: stored rows and their :class:`Msg`, in order.

    ``strays`` are rows flagged is_context that never reach the model (stored system
    records outside the allowlist); compression demotes them with the history so they
    can be archived.
    """

    rows: list[Message]
    msgs: list[Msg]
    strays: list[int] = field(default_factory=list)


async def load_context(db: AsyncSession, session_id: uuid.UUID) -> LoadedContext:
    rows = await SessionRepository(db).context_messages(session_id)
    visible, strays = [], []
    for r in rows:
        if reaches_llm(r.role, r.is_context, r.message_metadata):
            visible.append(r)
        else:
            strays.append(r.sequence_number)
    ordered = order_context(visible, lambda r: r.message_metadata)
    return LoadedContext(ordered, [msg_from_row(r) for r in ordered], strays)


def estimator_for(model: str, window: int, settings: Settings) -> Estimator:
    """The calibrated real-token estimator of ``model`` over the view the model gets."""
    calib = calibration_for(model)

    def estimate(messages: list[Msg]) -> int:
        return estimate_tokens(
            messages,
            calib,
            window=window,
            message_budget=settings.context_message_token_budget,
            image_fallback=settings.context_image_tokens,
        )

    return estimate


# --------------------------------------------------------------------------- result
@dataclass
class CompressionResult:
    reason: str
    method: Literal["summary", "truncate"]
    summary: str
    keys: list[str]
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    demoted: list[Msg]
    summary_sequence_number: int | None
    marker_sequence_number: int
    archived: int = 0


def plan_for(
    msgs: Sequence[Msg],
    *,
    profile: Profile,
    settings: Settings,
    window: int,
    estimate: Estimator,
    keep_recent_messages: int | None,
    widen: int = 1,
) -> Plan:
    return plan_compression(
        msgs,
        keep_recent=profile.keep_recent * widen,
        keep_recent_messages=keep_recent_messages * widen if keep_recent_messages else None,
        window=window,
        target=settings.context_compression_target,
        estimate=estimate,
    )


async def _summarize_with_retry(
    summarize: Summarizer,
    plan: Plan,
    wider: Plan,
    *,
    profile: Profile,
    window: int,
    session_id: uuid.UUID,
) -> tuple[Plan, str, list[str]] | None:
    """Two attempts (the second over the wider plan); None when both failed."""
    for attempt, candidate in enumerate((plan, wider), start=1):
        try:
            summary = await summarize(candidate.to_summarize, profile=profile, window=window)
        except (LLMError, SummaryError) as exc:
            log.warning(
                "compressor.summary_failed",
                session_id=str(session_id),
                attempt=attempt,
                error_type=type(exc).__name__,
                error=str(exc)[:300],
            )
            continue
        olds = [m for m in candidate.to_summarize if m.is_summary]
        keys = merge_keys(summary.keys, *(breadcrumbs_of(m) for m in olds))
        return candidate, summary.text, keys
    return None


def _marker_text(before: int, after: int, method: str, summary: str) -> str:
    head = f"Context compressed: {before} → {after} messages"
    if method == "truncate":
        return head + " (older messages dropped without a summary)"
    return f"{head}\n\n{summary}"


async def compress_and_save_session(
    db: AsyncSession,
    settings: Settings,
    *,
    session_id: uuid.UUID,
    viewer: Viewer,
    profile: Profile,
    model: str,
    window: int,
    reason: Reason,
    summarize: Summarizer,
    keep_recent_messages: int | None = None,
    loaded: LoadedContext | None = None,
    tokens_before: int | None = None,
    hooks: DemotionHooks = demotion_hooks,
) -> CompressionResult | None:
    """Compress the session's context and persist the outcome (see module docstring).

    Returns None when there is nothing to compress, or when a concurrent compression of
    the same session won the race.
    """
    started = time.perf_counter()
    loaded = loaded or await load_context(db, session_id)
    msgs = loaded.msgs
    estimate = estimator_for(model, window, settings)
    plan = plan_for(
        msgs,
        profile=profile,
        settings=settings,
        window=window,
        estimate=estimate,
        keep_recent_messages=keep_recent_messages,
    )
    if not plan.would_compress:
        return None
    before = tokens_before if tokens_before is not None else estimate(msgs)
    wider = plan_for(
        msgs,
        profile=profile,
        settings=settings,
        window=window,
        estimate=estimate,
        keep_recent_messages=keep_recent_messages,
        widen=2,
    )
    outcome = await _summarize_with_retry(
        summarize,
        plan,
        wider if wider.would_compress else plan,
        profile=profile,
        window=window,
        session_id=session_id,
    )
    summary_text = ""
    keys: list[str] = []
    if outcome is not None:
        chosen, summary_text, keys = outcome
        method: Literal["summary", "truncate"] = "summary"
        kept, demoted = chosen.kept, chosen.to_summarize
    else:
        method = "truncate"
        kept, demoted = hard_truncate(msgs, window=window, estimate=estimate)
        if not demoted:  # already under the hard budget: drop what the plan would summarize
            kept, demoted = plan.kept, plan.to_summarize
        log.warning("compressor.hard_truncated", session_id=str(session_id), dropped=len(demoted))

    repo = SessionRepository(db)
    ctx_repo = ContextRepository(db)
    session = await repo.lock(session_id, viewer)
    if session is None:
        await SessionService(db, settings).refuse(session_id, viewer)
    current = await ctx_repo.context_sequence_numbers(session_id)
    if not {m.sequence_number for m in demoted} <= current:
        log.info("compressor.conflict", session_id=str(session_id), reason=reason)
        return None

    await repo.set_context_flag(
        session_id, [m.sequence_number for m in demoted] + loaded.strays, False
    )
    new_context = list(kept)
    to_append: list[MessageIn] = []
    if method == "summary":
        seqs = [m.sequence_number for m in demoted]
        summary_msg = Msg(
            role="user",
            content=summary_text,
            is_summary=True,
            is_display=False,
            metadata={
                "breadcrumbs": keys,
                CONTEXT_HEAD: True,
                "summarized": {"count": len(demoted), "from_seq": min(seqs), "to_seq": max(seqs)},
            },
        )
        new_context = plan_system_first(kept, summary_msg)
        to_append.append(
            MessageIn(
                role="user",
                content=summary_text,
                is_summary=True,
                is_display=False,
                is_context=True,
                metadata=summary_msg.metadata,
            )
        )
    after = estimate(new_context)
    marker_meta = {
        "source": "compression",
        "reason": reason,
        "method": method,
        "messages_before": len(msgs),
        "messages_after": len(new_context),
        "tokens_before": before,
        "tokens_after": after,
        "demoted": len(demoted),
    }
    to_append.append(
        MessageIn(
            role="system",
            content=_marker_text(len(msgs), len(new_context), method, summary_text),
            is_compression=True,
            is_context=False,
            is_display=True,
            metadata=marker_meta,
        )
    )
    refs = await SessionService(db, settings).append(session_id, viewer, to_append)
    summary_seq = refs[0].sequence_number if method == "summary" else None
    marker_seq = refs[-1].sequence_number
    await ctx_repo.save_state(
        session_id,
        viewer,
        token_count=after,
        set_metadata={
            LAST_COMPRESSION_KEY: {
                "at": datetime.now(UTC).isoformat(),
                "reason": reason,
                "method": method,
                "marker_sequence_number": marker_seq,
            }
        },
        drop_metadata=(BASELINE_KEY, TRUNCATED_KEY),
    )
    archived = 0
    threshold = marker_seq + 1 - settings.session_messages_window
    if threshold > 0:
        archived = await repo.archive_old_messages(session_id, threshold)
    await hooks.run(db, session.user_id, session_id, demoted, keys)
    log.info(
        "compressor.compressed",
        session_id=str(session_id),
        reason=reason,
        method=method,
        messages_before=len(msgs),
        messages_after=len(new_context),
        tokens_before=before,
        tokens_after=after,
        window=window,
        keys=len(keys),
        archived=archived,
        ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return CompressionResult(
        reason=reason,
        method=method,
        summary=summary_text,
        keys=keys,
        messages_before=len(msgs),
        messages_after=len(new_context),
        tokens_before=before,
        tokens_after=after,
        demoted=list(demoted),
        summary_sequence_number=summary_seq,
        marker_sequence_number=marker_seq,
        archived=archived,
    )


def plan_system_first(kept: Sequence[Msg], summary: Msg) -> list[Msg]:
    """``system + [summary] + rest`` — the layout the stored context will have."""
    system = [m for m in kept if m.role == "system"]
    return system + [summary] + [m for m in kept if m.role != "system"]
