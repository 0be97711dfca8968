"""The compression triggers an agent runtime drives over HTTP.

* **pre-turn / mid-turn** (:meth:`ContextService.prepare`): before an LLM call, price the
  stored context (real baseline + calibrated delta) plus the incoming message, compress
  when that reaches ``window × threshold`` and the partition can shrink the context, then
  hand back the context to send (as the model gets it) or refuse with
  :class:`ContextTooLargeError` when even that cannot fit;
* **post-turn** (:meth:`ContextService.after_append`): after the reply is stored with the
  ``usage`` its LLM reported, record the real prompt size (calibration + session
  baseline) unless the prompt was silently truncated, then compress when over the
  threshold — or unconditionally when it was truncated;
* **forced** (:meth:`ContextService.compact`): compress regardless of the threshold.

Session state lives in ``sessions.session_metadata``: ``baseline`` =
``{"tokens", "count", "model"}`` (the real ``prompt_eval_count`` of a prompt that held
the first ``count`` messages of the context), ``context_truncated`` (the flag the
post-turn check consumes) and ``last_compression``.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Session
from app.domain.compression import (
    Msg,
    calibration_for,
    check_context_size,
    context_chars,
    context_limit,
    real_baseline_estimate,
    record_real_baseline,
    truncate_for_view,
    view_budget_tokens,
    would_compress,
)
from app.domain.context.compressor import (
    BASELINE_KEY,
    TRUNCATED_KEY,
    CompressionResult,
    LoadedContext,
    Reason,
    compress_and_save_session,
    estimator_for,
    load_context,
)
from app.domain.context.injection import build_injection
from app.domain.context.repositories import ContextRepository
from app.domain.context.schemas import CompactOut, IncomingMessage, PrepareOut
from app.domain.context.summarizer import LLMSummarizer, Summarizer
from app.domain.files.images import with_context_note
from app.domain.kernel.access import Viewer
from app.domain.kernel.events import CompressionStarted, ContextCompressed, ContextEvent, UsageIn
from app.domain.kernel.hooks import DemotionHooks, demotion_hooks
from app.domain.kernel.messages import MessageOut
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.profiles import Profile, Profiles, load_profiles
from app.domain.sessions.services import message_out
from app.lib.errors import Conflict, PayloadTooLarge, Unprocessable
from app.llm.gateway import LLMGateway

__all__ = ["ContextService", "baseline_of", "context_service"]


def baseline_of(metadata: Mapping[str, Any] | None, model: str) -> tuple[int | None, int]:
    """``(tokens, count)`` of the session's real-token baseline for ``model``."""
    raw = (metadata or {}).get(BASELINE_KEY)
    if not isinstance(raw, dict) or raw.get("model") != model:
        return None, 0
    try:
        return int(raw["tokens"]), int(raw["count"])
    except (KeyError, TypeError, ValueError):
        return None, 0


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
    def __init__(
        self,
        db: AsyncSession,
        settings: Settings,
        profiles: Profiles,
        summarize: Summarizer,
        hooks: DemotionHooks = demotion_hooks,
        llm: LLMGateway | None = None,
    ) -> None:
        self.db = db
        self.llm = llm
        self.settings = settings
        self.profiles = profiles
        self.summarize = summarize
        self.hooks = hooks

    # ------------------------------------------------------------------ helpers
    def _tokens(
        self,
        msgs: list[Msg],
        *,
        model: str,
        window: int,
        metadata: Mapping[str, Any] | None,
        extra: Msg | None = None,
    ) -> int:
        tokens, count = baseline_of(metadata, model)
        return real_baseline_estimate(
            msgs + ([extra] if extra is not None else []),
            baseline_tokens=tokens,
            baseline_count=count,
            calib=calibration_for(model),
            window=window,
            message_budget=self.settings.context_message_token_budget,
            image_fallback=self.settings.context_image_tokens,
        )

    def _can_compress(
        self, msgs: list[Msg], profile: Profile, model: str, keep_messages: int | None
    ) -> bool:
        window = profile.context_window
        return would_compress(
            msgs,
            keep_recent=profile.keep_recent,
            keep_recent_messages=keep_messages,
            window=window,
            target=self.settings.context_compression_target,
            estimate=estimator_for(model, window, self.settings),
        )

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
        return await compress_and_save_session(
            self.db,
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
        )

    def _over_threshold(self, tokens: int, window: int) -> bool:
        """At ``window × threshold`` — or earlier, when the prompt would not pass the size
        check anyway (small windows: window − reserve can be below 90 %)."""
        trigger = min(
            window * self.settings.context_compression_threshold,
            context_limit(window, self.settings.output_reserve_tokens) + 1,
        )
        return tokens >= trigger

    def _view(self, loaded: LoadedContext, model: str, window: int) -> list[MessageOut]:
        calib = calibration_for(model)
        budget = view_budget_tokens(window, self.settings.context_message_token_budget)
        out = []
        for row, msg in zip(loaded.rows, loaded.msgs, strict=True):
            item = with_context_note(message_out(row))
            view = truncate_for_view(msg, budget, calib)
            if view is not msg:
                item = msgspec.structs.replace(item, content=view.content, metadata=view.metadata)
            out.append(item)
        return out

    # ------------------------------------------------------------------ pre/mid-turn
    async def prepare(
        self,
        session: Session,
        viewer: Viewer,
        message: IncomingMessage | None,
        *,
        mid_turn: bool = False,
        model: str | None = None,
    ) -> PrepareOut:
        """Compress when needed; raises ContextTooLargeError when the prompt cannot fit.

        The compression (if any) is persisted even when the size check then fails: the
        controller answers 422 without rolling it back.
        """
        profile = self.profiles.get(session.profile_id)
        window = profile.context_window
        model = model or profile.model
        incoming = incoming_msg(message, self.settings)
        if profile.context_mode == "rolling":  # last N messages + rolling summary
            from app.domain.context.rolling_mode import prepare_rolling

            return await prepare_rolling(self.db, self.settings, session, profile, model, incoming)
        loaded = await load_context(self.db, session.id)
        tokens = self._tokens(
            loaded.msgs,
            model=model,
            window=window,
            metadata=session.session_metadata,
            extra=incoming,
        )
        events: list[ContextEvent] = []
        keep_messages = profile.mid_turn_keep_messages() if mid_turn else None
        if (
            self.settings.context_compression_enabled
            and self._over_threshold(tokens, window)
            and self._can_compress(loaded.msgs, profile, model, keep_messages)
        ):
            events.append(CompressionStarted(context_tokens=tokens, max_context_tokens=window))
            result = await self._compress(
                session.id,
                viewer,
                profile,
                model=model,
                reason="midturn" if mid_turn else "preturn",
                loaded=loaded,
                tokens=tokens,
                keep_messages=keep_messages,
            )
            loaded = await load_context(self.db, session.id)
            tokens = self._tokens(
                loaded.msgs, model=model, window=window, metadata=None, extra=incoming
            )
            if result is not None:
                events.append(_compressed_event(result, window))
        view = self._view(loaded, model, window)
        if not mid_turn:  # once per turn: memory the stored context does not hold
            extra = await build_injection(
                self.db,
                self.llm,
                self.settings,
                session=session,
                context=loaded.msgs,
                incoming=incoming,
                model=model,
                window=window,
            )
            # Injected memory is a bonus: it rides only when it fits under the size limit.
            room = context_limit(window, self.settings.output_reserve_tokens) - tokens
            injected = 0
            if extra.tokens and extra.tokens <= room:
                view = [*extra.before, *view, *extra.after]
                tokens += extra.tokens
                injected = sum(len(m.content) for m in [*extra.before, *extra.after])
            else:
                extra.metadata_patch.clear()
            # The runtime's next `usage` covers these notes too: after_append counts them.
            if injected or (session.session_metadata or {}).get(INJECTED_CHARS_KEY):
                extra.metadata_patch[INJECTED_CHARS_KEY] = injected
            if extra.metadata_patch:
                await ContextRepository(self.db).save_state(
                    session.id, viewer, set_metadata=extra.metadata_patch
                )
        check_context_size(tokens, window, self.settings.output_reserve_tokens)
        return PrepareOut(
            session_id=session.id, context=view, tokens=tokens, window=window, events=events
        )

    # ------------------------------------------------------------------ post-turn
    async def after_append(
        self, session_id: uuid.UUID, viewer: Viewer, usage: UsageIn
    ) -> list[ContextEvent]:
        """Record the reported prompt size, then run the post-turn check."""
        session = await SessionAccess(self.db).get(session_id, viewer)
        profile = self.profiles.get(session.profile_id)
        if profile.context_mode == "rolling":
            # Rolling mode sends its own window (prepare): the stored context is not the
            # prompt, so neither calibration nor compression applies.
            return []
        window = profile.context_window
        model = usage.model
        loaded = await load_context(self.db, session_id)
        msgs = loaded.msgs
        # The reported prompt produced the reply that closes this append: it held
        # every context message before that reply.
        count = len(msgs) - 1 if msgs and msgs[-1].role == "assistant" else len(msgs)
        prompt = msgs[:count]
        metadata = dict(session.session_metadata or {})
        truncated = False
        set_meta: dict[str, Any] = {}
        drop_meta: list[str] = []
        if usage.prompt_eval_count > 0 and count > 0:
            calib = calibration_for(model)
            budget = view_budget_tokens(window, self.settings.context_message_token_budget)
            our_chars = context_chars(truncate_for_view(m, budget, calib) for m in prompt)
            # the memory notes prepare injected were sent with that prompt, not stored
            our_chars += int(metadata.get(INJECTED_CHARS_KEY) or 0)
            sent_tokens = usage.sent_tokens or self._tokens(
                prompt, model=model, window=window, metadata=metadata
            )
            had_images = (
                usage.had_images if usage.had_images is not None else any(m.images for m in prompt)
            )
            honest = record_real_baseline(
                model,
                chars=usage.sent_chars or our_chars,
                prompt_eval_count=usage.prompt_eval_count,
                sent_tokens=sent_tokens,
                had_images=had_images,
            )
            if honest:
                baseline = {"tokens": usage.prompt_eval_count, "count": count, "model": model}
                metadata[BASELINE_KEY] = set_meta[BASELINE_KEY] = baseline
                drop_meta.append(TRUNCATED_KEY)
            else:
                truncated = True
                set_meta[TRUNCATED_KEY] = True
        tokens = self._tokens(msgs, model=model, window=window, metadata=metadata)
        await ContextRepository(self.db).save_state(
            session_id, viewer, token_count=tokens, set_metadata=set_meta, drop_metadata=drop_meta
        )
        if not self.settings.context_compression_enabled:
            return []
        if not (truncated or self._over_threshold(tokens, window)):
            return []
        keep_messages = profile.mid_turn_keep_messages()
        if not self._can_compress(msgs, profile, model, keep_messages):
            return []
        events: list[ContextEvent] = [
            CompressionStarted(context_tokens=tokens, max_context_tokens=window)
        ]
        result = await self._compress(
            session_id,
            viewer,
            profile,
            model=model,
            reason="postturn",
            loaded=loaded,
            tokens=tokens,
            keep_messages=keep_messages,
        )
        if result is not None:
            events.append(_compressed_event(result, window))
        return events

    # ------------------------------------------------------------------ forced
    async def compact(self, session: Session, viewer: Viewer, model: str | None) -> CompactOut:
        profile = self.profiles.get(session.profile_id)
        window = profile.context_window
        model = model or profile.model
        loaded = await load_context(self.db, session.id)
        tokens = self._tokens(
            loaded.msgs, model=model, window=window, metadata=session.session_metadata
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


#: session_metadata: chars of the memory notes the last pre-turn prepare injected.
INJECTED_CHARS_KEY = "injected_chars"


def context_service(db: AsyncSession, settings: Settings, state: State) -> ContextService:
    """The service wired to the app's LLM gateway and profiles."""
    profiles = getattr(state, "profiles", None) or load_profiles(settings)
    summarize = getattr(state, "summarizer", None) or LLMSummarizer(state.llm, settings)
    hooks = getattr(state, "demotion_hooks", None)
    return ContextService(
        db, settings, profiles, summarize, demotion_hooks if hooks is None else hooks, state.llm
    )
