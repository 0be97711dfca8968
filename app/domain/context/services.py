"""The compression triggers an agent runtime drives over HTTP.

* **pre-turn / mid-turn** (:meth:`ContextService.prepare`): before an LLM call, price the
  stored context (real baseline + calibrated delta) plus the incoming message, compress
  when that reaches ``window × threshold`` and the partition can shrink the context, then
  hand back the context to send (as the model gets it) or refuse with
  :class:`ContextTooLargeError` when even that cannot fit;
* **post-turn** (:meth:`ContextService.after_append`): after the reply is stored with the
  ``usage`` its LLM reported, record the real prompt size (calibration + session
  baseline) unless the prompt was silently truncated, in the append's transaction; then,
  once that has committed, compress when over the threshold — or unconditionally when it
  was truncated (:meth:`ContextService.compress_post_turn`: a failure there is logged,
  never undoes the stored reply);
* **forced** (:meth:`ContextService.compact`): compress regardless of the threshold.

Every compression runs with the caller's transaction committed first (``_release``) and
in a short transaction of its own (:mod:`~app.domain.context.compressor`): no model call
(summary, chunk or query embedding) is made while this service's session holds a
transaction, a row lock or a pooled connection. The memory notes of a pre-turn prepare
embed their queries first, then read (:func:`~app.domain.context.injection.query_embeddings`).

Session state lives in ``sessions.session_metadata``: ``baseline`` =
``{"tokens", "count", "model"}`` (the real ``prompt_eval_count`` of a prompt that held
the first ``count`` messages of the context), ``context_truncated`` (the flag the
post-turn check consumes) and ``last_compression``.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Session
from app.domain.compression import Msg, check_context_size, context_limit
from app.domain.context.compressor import (
    CompressionResult,
    Reason,
    compress_and_save_session,
)
from app.domain.context.injection import build_injection, query_embeddings
from app.domain.context.loading import LoadedContext, load_context, msg_from_row
from app.domain.context.pricing import Pricing
from app.domain.context.repositories import ContextRepository
from app.domain.context.rolling_mode import prepare_rolling, summary_block_last
from app.domain.context.schemas import CompactOut, IncomingMessage, PrepareOut
from app.domain.context.summarizer import LLMSummarizer, Summarizer
from app.domain.context.system_prompt import prompt_note
from app.domain.context.writer import BASELINE_KEY
from app.domain.facts.services import FactService
from app.domain.kernel.access import Viewer, reaches_llm
from app.domain.kernel.commits import commit_now
from app.domain.kernel.events import CompressionStarted, ContextCompressed, ContextEvent, UsageIn
from app.domain.kernel.messages import MessageOut
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.profiles import Profile
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.message_repository import MessageRepository
from app.domain.sessions.services import SessionService
from app.lib.errors import Conflict, PayloadTooLarge, Unprocessable
from app.llm.gateway import LLMGateway

__all__ = ["ContextService", "PostTurn"]

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


def incoming_msg(message: IncomingMessage | None, settings: Settings) -> Msg | None:
    if message is None:
        return None
    if len(message.content) > settings.message_max_chars:
        raise PayloadTooLarge(
            f"message.content: {len(message.content)} characters, the limit is "
            f"{settings.message_max_chars} (MESSAGE_MAX_CHARS)"
        )
    images: list[bytes] = []
    for i, img in enumerate(message.images or []):
        try:
            images.append(base64.b64decode(img, validate=True))
        except (binascii.Error, ValueError):
            raise Unprocessable(f"message.images[{i}]: not valid base64") from None
    return Msg(
        role=message.role,
        content=message.content,
        name=message.name,
        tool_calls=message.tool_calls,
        images=images or None,
    )


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


class ContextService:
    def __init__(self, db: AsyncSession, runtime: Runtime) -> None:
        self.db = db
        self.runtime = runtime
        self.llm = runtime.llm
        self.settings = settings = runtime.settings
        self.profiles = runtime.profiles
        self.summarize: Summarizer = runtime.summarizer or LLMSummarizer(runtime.llm, settings)
        self.hooks = runtime.demotion_hooks
        self.price = Pricing(settings)

    @classmethod
    def of(cls, db: AsyncSession, runtime: Runtime) -> ContextService:
        """The service wired to the runtime's LLM gateway, profiles and demotion hooks
        (`runtime.summarizer` stands in for the summary model call when set)."""
        return cls(db, runtime)

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

    # ------------------------------------------------------------------ pre/mid-turn
    async def prepare(
        self,
        session: Session,
        viewer: Viewer,
        message: IncomingMessage | None,
        *,
        mid_turn: bool = False,
        model: str | None = None,
        admitted_images_only: bool = False,
    ) -> PrepareOut:
        """Compress when needed; raises ContextTooLargeError when the prompt cannot fit.

        The compression (if any) is persisted even when the size check then fails: the
        controller answers 422 without rolling it back. ``admitted_images_only``: price
        only the incoming images the image budget admits — the turn loop sends no other
        (its stored copy's notice names them); ``/prepare`` prices them all, since its
        runtime builds its own call.
        """
        profile = self.profiles.get(session.profile_id)
        window = profile.context_window
        model = model or profile.model
        incoming = incoming_msg(message, self.settings)
        if profile.context_mode == "rolling":  # last N messages + rolling summary
            return await self._prepare_rolling(
                session, viewer, profile, model, incoming, mid_turn=mid_turn
            )
        loaded = await load_context(self.db, session.user_id, session.id)
        priced: dict[str, Any] = {
            "user_id": session.user_id,
            "model": model,
            "window": window,
            "metadata": session.session_metadata,
            "system_prompt": profile.system_prompt,
        }
        if admitted_images_only:
            incoming = self.price.admitted_incoming(loaded.msgs, incoming, **priced)
        tokens = self.price.tokens(loaded.msgs, extra=incoming, **priced)
        loaded, tokens, events = await self._compress_before_turn(
            session, viewer, profile, model, loaded, tokens, incoming, mid_turn=mid_turn
        )
        view = self.price.view(loaded, model, window, user_id=session.user_id)
        if not mid_turn:  # once per turn: memory the stored context does not hold
            view, tokens = await self._inject(
                session, viewer, loaded.msgs, incoming, view, tokens, model=model, window=window
            )
        return self._prepared(session, profile, view, tokens, events)

    async def appended_view(
        self, session: Session, first: int, *, model: str | None = None
    ) -> list[MessageOut]:
        """The context messages from sequence number ``first`` on (what an append just
        wrote) as :meth:`prepare` hands them to the model: a pasted-image notice
        appended, only the admitted images, the per-message view cut."""
        profile = self.profiles.get(session.profile_id)
        rows = await MessageRepository(self.db).context_rows_from(
            session.user_id, session.id, first
        )
        rows = [r for r in rows if reaches_llm(r.role, r.is_context, r.message_metadata)]
        loaded = LoadedContext(rows, [msg_from_row(r) for r in rows])
        return self.price.view(
            loaded, model or profile.model, profile.context_window, user_id=session.user_id
        )

    def _prepared(
        self,
        session: Session,
        profile: Profile,
        view: list[MessageOut],
        tokens: int,
        events: list[ContextEvent],
    ) -> PrepareOut:
        """The size check, then the answer: the profile's system prompt first (fresh from
        the profile, never stored; counted in `tokens`)."""
        window = profile.context_window
        check_context_size(tokens, window, self.settings.output_reserve_tokens)
        lead = prompt_note(profile)
        return PrepareOut(
            session_id=session.id,
            context=[lead, *view] if lead else view,
            tokens=tokens,
            window=window,
            events=events,
        )

    async def _prepare_rolling(
        self,
        session: Session,
        viewer: Viewer,
        profile: Profile,
        model: str,
        incoming: Msg | None,
        *,
        mid_turn: bool,
    ) -> PrepareOut:
        """Rolling mode: its window + summary, then the same memory notes as compress
        mode (user summary, facts, recall), then the size check."""
        window = profile.context_window
        rolled = await prepare_rolling(self.db, self.settings, session, profile, model, incoming)
        view, tokens = rolled.context, rolled.tokens
        if not mid_turn:
            view, tokens = await self._inject(
                session,
                viewer,
                rolled.recall_context(),
                incoming,
                view,
                tokens,
                model=model,
                window=window,
            )
            view = summary_block_last(view)  # recall ahead of it: the block comes last
        return self._prepared(session, profile, view, tokens, [])

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

    async def _inject(
        self,
        session: Session,
        viewer: Viewer,
        context: Sequence[Msg],
        incoming: Msg | None,
        view: list[MessageOut],
        tokens: int,
        *,
        model: str,
        window: int,
    ) -> tuple[list[MessageOut], int]:
        """The view with the turn's memory notes when they fit; what they were recorded.
        The queries are embedded first, with this service's transaction committed."""
        await self._release()
        llm = cast(
            LLMGateway | None, await query_embeddings(self.llm, self.settings, context, incoming)
        )
        extra = await build_injection(
            self.db,
            llm,
            self.settings,
            FactService(self.db, llm),
            session=session,
            context=context,
            incoming=incoming,
            model=model,
            window=window,
        )
        room = context_limit(window, self.settings.output_reserve_tokens) - tokens
        view, tokens = extra.fit(view, tokens, room=room, metadata=session.session_metadata)
        if extra.metadata_patch:
            await ContextRepository(self.db).save_state(
                session.id, viewer, set_metadata=extra.metadata_patch
            )
        return view, tokens

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
