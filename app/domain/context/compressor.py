"""compress_and_save_session: plan, summarize (or hard-truncate), then persist in one short
transaction of its own.

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
* the exact demoted messages and the KEYS go to the demotion hooks;
* a text forgotten while the model wrote is stored redacted: the summary, its KEYS and
  the demoted messages' copies handed to the hooks are checked against the user's forget
  records under the records' share lock (`kernel/forgotten.py`).

Every model call happens with no transaction open and no pooled connection held: the
caller has committed (or ended) its own transaction first (`kernel.commits.commit_now`),
the summary and the demotion hooks' ``prepare`` steps (the raw index's chunk
embeddings) run, and only then does a short transaction of its own take the session's
row lock, re-check the draft against the stored context — a concurrent compression of
the same session is detected (the second one gives up) instead of demoting twice — and
apply it. A slow model therefore delays only the compression: other writers of the
session, and the worker's connection pool, never wait on it.

The steps: load and plan (:mod:`~app.domain.context.loading`, :func:`plan_for`) →
summarize with retry, else truncate (:func:`_draft`) → the hooks' ``prepare`` → in its
own transaction: lock and re-check, demote and append the summary and the marker,
record the session state and archive
(:class:`~app.domain.context.writer.CompressionWriter`), the demotion hooks → the log.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import transaction
from app.domain.compression import Estimator, Msg, Plan, hard_truncate, plan_compression
from app.domain.context.loading import LoadedContext, estimator_for
from app.domain.context.summarizer import Summarizer, SummaryError, breadcrumbs_of, merge_keys
from app.domain.context.writer import CompressionWriter, Draft, Reason, Stored, redact_draft
from app.domain.kernel.access import Viewer
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.kernel.hooks import DemotionHooks, demotion_hooks
from app.domain.kernel.profiles import Profile
from app.domain.sessions.services import SessionService
from app.llm.gateway import LLMError

__all__ = ["CompressionResult", "Reason", "compress_and_save_session"]

log = structlog.get_logger()


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
    archived: int = 0


# --------------------------------------------------------------------------- the run
async def compress_and_save_session(
    factory: async_sessionmaker[AsyncSession],
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
    loaded: LoadedContext,
    tokens_before: int | None = None,
    hooks: DemotionHooks = demotion_hooks,
    sessions: Callable[[AsyncSession], SessionService],
) -> CompressionResult | None:
    """Compress the session's context and persist the outcome in a transaction of its own
    on `factory` (see module docstring). The caller holds no transaction: `loaded` was
    read (and committed) before.

    Returns None when there is nothing to compress, or when a concurrent compression of
    the same session won the race.
    """
    started = time.perf_counter()
    # priced by the calibration of the session's user (the tenant key its rows carry)
    user_id = loaded.rows[0].user_id if loaded.rows else ""
    estimate = estimator_for(model, window, settings, profile.system_prompt, user_id=user_id)
    plan_of = partial(
        plan_for,
        loaded.msgs,
        profile=profile,
        settings=settings,
        window=window,
        estimate=estimate,
        keep_recent_messages=keep_recent_messages,
    )
    plan = plan_of()
    if not plan.would_compress:
        return None
    before = tokens_before if tokens_before is not None else estimate(loaded.msgs)
    wider = plan_of(widen=2)
    draft = await _draft(
        summarize,
        plan,
        wider if wider.would_compress else plan,
        msgs=loaded.msgs,
        profile=profile,
        window=window,
        estimate=estimate,
        session_id=session_id,
    )
    ready = await hooks.prepare(factory, user_id, session_id, draft.demoted, draft.keys)
    async with transaction(factory) as db:  # short: no model call from here on
        run = CompressionWriter(db, settings, sessions(db), session_id, viewer, reason)
        session = await run.lock(draft)
        if session is None:
            return None
        # a forget that went by while the model wrote: its text stored redacted
        forgotten = await ForgottenRepository(db).guard(session.user_id)
        draft = redact_draft(draft, forgotten)
        stored = await run.write(draft, loaded, estimate, tokens_before=before)
        stored.archived = await run.record(draft.method, stored)
        await hooks.run(db, session.user_id, session_id, draft.demoted, draft.keys, ready)
    result = _result(reason, draft, stored, len(loaded.msgs), before)
    _log_compressed(result, session_id, window, started)
    return result


def _result(
    reason: Reason, draft: Draft, stored: Stored, before: int, tokens: int
) -> CompressionResult:
    return CompressionResult(
        reason=reason,
        method=draft.method,
        summary=draft.summary,
        keys=draft.keys,
        messages_before=before,
        messages_after=len(stored.context),
        tokens_before=tokens,
        tokens_after=stored.tokens,
        demoted=list(draft.demoted),
        archived=stored.archived,
    )


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
        critical_tools=profile.critical_tools,
    )


# --------------------------------------------------------------------------- summarize
async def _draft(
    summarize: Summarizer,
    plan: Plan,
    wider: Plan,
    *,
    msgs: list[Msg],
    profile: Profile,
    window: int,
    estimate: Estimator,
    session_id: uuid.UUID,
) -> Draft:
    """The summary (two attempts); the token-budget hard truncate when both failed."""
    outcome = await _summarize_with_retry(
        summarize, plan, wider, profile=profile, window=window, session_id=session_id
    )
    if outcome is not None:
        chosen, summary_text, keys = outcome
        return Draft("summary", chosen.kept, chosen.to_summarize, summary_text, keys)
    kept, demoted = hard_truncate(msgs, window=window, estimate=estimate)
    if not demoted:  # already under the hard budget: drop what the plan would summarize
        kept, demoted = plan.kept, plan.to_summarize
    log.warning("compressor.hard_truncated", session_id=str(session_id), dropped=len(demoted))
    return Draft("truncate", kept, demoted)


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


def _log_compressed(
    result: CompressionResult, session_id: uuid.UUID, window: int, started: float
) -> None:
    log.info(
        "compressor.compressed",
        session_id=str(session_id),
        reason=result.reason,
        method=result.method,
        messages_before=result.messages_before,
        messages_after=result.messages_after,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        window=window,
        keys=len(result.keys),
        archived=result.archived,
        ms=round((time.perf_counter() - started) * 1000, 1),
    )
