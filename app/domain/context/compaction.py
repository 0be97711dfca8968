"""The compression triggers besides the pre-turn one, and the compression step all of
them share — `CompactionTriggers`, which :class:`~app.domain.context.services.ContextService`
extends with the pre/mid-turn prepare (services.py):

* **post-turn** (:meth:`CompactionTriggers.after_append`): record the real prompt size the
  reply's ``usage`` reports (calibration + session baseline) in the append's transaction,
  then, once that has committed, compress when over the threshold — or unconditionally
  when the prompt was truncated (:meth:`CompactionTriggers.compress_post_turn`);
* **profile switch** (:meth:`CompactionTriggers.profile_changed`): price the stored context
  against the new profile's window and compress now when it no longer fits;
* **forced** (:meth:`CompactionTriggers.compact`): compress regardless of the threshold;
* the step itself (``_compress``, ``_compress_before_turn``): the caller's transaction is
  committed first (``_release``), then the compression runs in a short transaction of its
  own (:mod:`~app.domain.context.compressor`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session
from app.domain.compression import Msg
from app.domain.context.compressor import (
    CompressionResult,
    Reason,
    compress_and_save_session,
)
from app.domain.context.loading import LoadedContext, load_context
from app.domain.context.pricing import Pricing
from app.domain.context.repositories import ContextRepository
from app.domain.context.schemas import CompactOut
from app.domain.context.summarizer import LLMSummarizer, Summarizer
from app.domain.context.writer import BASELINE_KEY
from app.domain.kernel.access import Viewer
from app.domain.kernel.commits import commit_now
from app.domain.kernel.events import CompressionStarted, ContextCompressed, ContextEvent, UsageIn
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.profiles import Profile
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.services import SessionService
from app.lib.errors import Conflict

__all__ = ["CompactionTriggers", "PostTurn"]

log = structlog.get_logger()


@dataclass(frozen=True)
class PostTurn:
    """A post-turn compression found due in the append's transaction, to run once that
    has committed (:meth:`ContextService.compress_post_turn`)."""

    session_id: uuid.UUID
    viewer: Viewer
    profile: Profile
    model: str
    loaded: LoadedContext
    tokens: int


def _compressed_event(result: CompressionResult, window: int) -> ContextCompressed:
    return ContextCompressed(
        summary=result.summary,
        messages_before=result.messages_before,
        messages_after=result.messages_after,
        context_tokens=result.tokens_after,
        max_context_tokens=window,
        method=result.method,
        reason=result.reason,
    )


class CompactionTriggers:
    """The post-turn, profile-switch and forced compressions of a session's stored
    context, and the compression step the pre-turn prepare shares (`ContextService`)."""

    def __init__(self, db: AsyncSession, runtime: Runtime) -> None:
        self.db = db
        self.runtime = runtime
        self.llm = runtime.llm
        self.settings = settings = runtime.settings
        self.profiles = runtime.profiles
        self.summarize: Summarizer = runtime.summarizer or LLMSummarizer(runtime.llm, settings)
        self.hooks = runtime.demotion_hooks
        self.price = Pricing(settings)

    async def _compress(
        self,
        session_id: uuid.UUID,
        viewer: Viewer,
        profile: Profile,
        *,
        model: str,
        reason: Reason,
        loaded: LoadedContext,
        tokens: int,
        keep_messages: int | None,
    ) -> CompressionResult | None:
        await self._release()
        return await compress_and_save_session(
            self.runtime.session_factory,
            self.settings,
            session_id=session_id,
            viewer=viewer,
            profile=profile,
            model=model,
            window=profile.context_window,
            reason=reason,
            summarize=self.summarize,
            keep_recent_messages=keep_messages,
            loaded=loaded,
            tokens_before=tokens,
            hooks=self.hooks,
            sessions=lambda db: SessionService.of(db, self.runtime),
        )

    async def _release(self) -> None:
        """Commit this service's transaction, if one is open, before a model call: its
        row locks and its pooled connection are given back (the next statement begins
        a new transaction)."""
        if self.db.in_transaction():
            await commit_now(self.db)

    async def _compress_before_turn(
        self,
        session: Session,
        viewer: Viewer,
        profile: Profile,
        model: str,
        loaded: LoadedContext,
        tokens: int,
        incoming: Msg | None,
        *,
        mid_turn: bool,
        reason: Reason | None = None,
    ) -> tuple[LoadedContext, int, list[ContextEvent]]:
        """Compress when over the threshold and the partition can shrink the context;
        the context is then reloaded and priced again (no baseline: it changed)."""
        window = profile.context_window
        keep_messages = profile.mid_turn_keep_messages() if mid_turn else None
        if not (
            self.settings.context_compression_enabled
            and self.price.over_threshold(tokens, window)
            and self.price.can_compress(
                loaded.msgs, profile, model, keep_messages, user_id=session.user_id
            )
        ):
            return loaded, tokens, []
        events: list[ContextEvent] = [
            CompressionStarted(context_tokens=tokens, max_context_tokens=window)
        ]
        result = await self._compress(
            session.id,
            viewer,
            profile,
            model=model,
            reason=reason or ("midturn" if mid_turn else "preturn"),
            loaded=loaded,
            tokens=tokens,
            keep_messages=keep_messages,
        )
        loaded = await load_context(self.db, session.user_id, session.id)
        tokens = self.price.tokens(
            loaded.msgs,
            user_id=session.user_id,
            model=model,
            window=window,
            metadata=None,
            extra=incoming,
            system_prompt=profile.system_prompt,
        )
        if result is not None:
            events.append(_compressed_event(result, window))
        return loaded, tokens, events

    # ------------------------------------------------------------------ post-turn
    async def after_append(
        self, session_id: uuid.UUID, viewer: Viewer, usage: UsageIn
    ) -> PostTurn | None:
        """Record the reported prompt size (in the append's transaction), then the
        post-turn check: the compression due, to run once that transaction has committed
        (:meth:`compress_post_turn`), or None."""
        session = await SessionAccess(self.db).get(session_id, viewer)
        profile = self.profiles.get(session.profile_id)
        if profile.context_mode == "rolling":
            # Rolling mode sends its own window (prepare): the stored context is not the
            # prompt, so neither calibration nor compression applies.
            return None
        window = profile.context_window
        loaded = await load_context(self.db, session.user_id, session_id)
        metadata = dict(session.session_metadata or {})
        prompt = profile.system_prompt
        user_id = session.user_id
        calibration = self.price.calibrate(
            loaded.msgs, usage, window, metadata, prompt, user_id=user_id
        )
        tokens = self.price.tokens(
            loaded.msgs,
            user_id=user_id,
            model=usage.model,
            window=window,
            metadata=metadata,
            system_prompt=prompt,
        )
        await ContextRepository(self.db).save_state(
            session_id,
            viewer,
            token_count=tokens,
            set_metadata=calibration.set_metadata,
            drop_metadata=calibration.drop_metadata,
        )
        if not self.settings.context_compression_enabled:
            return None
        if not (calibration.truncated or self.price.over_threshold(tokens, window)):
            return None
        keep_messages = profile.mid_turn_keep_messages()
        if not self.price.can_compress(
            loaded.msgs, profile, usage.model, keep_messages, user_id=user_id
        ):
            return None
        return PostTurn(session_id, viewer, profile, usage.model, loaded, tokens)

    async def compress_post_turn(self, due: PostTurn) -> list[ContextEvent]:
        """The post-turn compression (keeping the mid-turn share of recent messages),
        after the append committed: with no transaction held during the summary, in a
        transaction of its own. A failure is logged and answers no event: the stored
        messages stay, and the next pre-turn prepare compresses when still needed."""
        window = due.profile.context_window
        try:
            result = await self._compress(
                due.session_id,
                due.viewer,
                due.profile,
                model=due.model,
                reason="postturn",
                loaded=due.loaded,
                tokens=due.tokens,
                keep_messages=due.profile.mid_turn_keep_messages(),
            )
        except Exception as exc:
            log.warning(
                "context.postturn_failed",
                session_id=str(due.session_id),
                error_type=type(exc).__name__,
                error=str(exc)[:300],
            )
            return []
        events: list[ContextEvent] = [
            CompressionStarted(context_tokens=due.tokens, max_context_tokens=window)
        ]
        if result is not None:
            events.append(_compressed_event(result, window))
        return events

    # ------------------------------------------------------------------ profile switch
    async def profile_changed(self, session_id: uuid.UUID, viewer: Viewer) -> list[ContextEvent]:
        """The session now has another profile: its window applies at once — the stored
        context is priced against it (its prompt counted; the old baseline measured
        another prompt) and compressed now, as before a turn, when it no longer fits."""
        session = await SessionAccess(self.db).get(session_id, viewer)
        profile = self.profiles.get(session.profile_id)
        if profile.context_mode == "rolling":  # prepare sends its own window
            return []
        window, model = profile.context_window, profile.model
        loaded = await load_context(self.db, session.user_id, session_id)
        tokens = self.price.tokens(
            loaded.msgs,
            user_id=session.user_id,
            model=model,
            window=window,
            metadata=None,
            system_prompt=profile.system_prompt,
        )
        await ContextRepository(self.db).save_state(
            session_id, viewer, token_count=tokens, drop_metadata=[BASELINE_KEY]
        )
        *_, events = await self._compress_before_turn(
            session, viewer, profile, model, loaded, tokens, None, mid_turn=False, reason="profile"
        )
        return events

    # ------------------------------------------------------------------ forced
    async def compact(self, session: Session, viewer: Viewer, model: str | None) -> CompactOut:
        profile = self.profiles.get(session.profile_id)
        window = profile.context_window
        model = model or profile.model
        loaded = await load_context(self.db, session.user_id, session.id)
        tokens = self.price.tokens(
            loaded.msgs,
            user_id=session.user_id,
            model=model,
            window=window,
            metadata=session.session_metadata,
            system_prompt=profile.system_prompt,
        )
        result = await self._compress(
            session.id,
            viewer,
            profile,
            model=model,
            reason="forced",
            loaded=loaded,
            tokens=tokens,
            keep_messages=profile.mid_turn_keep_messages(),
        )
        if result is None:
            raise Conflict(
                f"nothing to compact: the context holds {len(loaded.msgs)} message(s), all "
                f"within the recent part profile {profile.id!r} keeps verbatim"
            )
        return CompactOut(
            session_id=session.id,
            events=[
                CompressionStarted(context_tokens=tokens, max_context_tokens=window),
                _compressed_event(result, window),
            ],
            context_token_count=result.tokens_after,
            window=window,
        )
