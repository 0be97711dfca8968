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

This module holds the pre/mid-turn half; the post-turn, profile-switch and forced
triggers and the compression step they share with it are `CompactionTriggers`'
(compaction.py), which `ContextService` extends.

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
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Session
from app.domain.compression import Msg, check_context_size, context_limit
from app.domain.context.compaction import CompactionTriggers, PostTurn
from app.domain.context.injection import build_injection, query_embeddings
from app.domain.context.loading import LoadedContext, load_context, msg_from_row
from app.domain.context.repositories import ContextRepository
from app.domain.context.rolling_mode import prepare_rolling, summary_block_last
from app.domain.context.schemas import IncomingMessage, PrepareOut
from app.domain.context.system_prompt import prompt_note
from app.domain.facts.services import FactService
from app.domain.kernel.access import Viewer, reaches_llm
from app.domain.kernel.events import ContextEvent
from app.domain.kernel.messages import MessageOut
from app.domain.kernel.profiles import Profile
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.message_repository import MessageRepository
from app.lib.errors import PayloadTooLarge, Unprocessable
from app.llm.gateway import LLMGateway

# PostTurn is re-exported: the turn loop (agents/turns.py) takes it from here
__all__ = ["ContextService", "PostTurn"]


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


class ContextService(CompactionTriggers):
    """The context an LLM call is sent (pre/mid-turn `prepare`), over the compaction
    triggers it extends (`CompactionTriggers`: post-turn, profile switch, forced)."""

    @classmethod
    def of(cls, db: AsyncSession, runtime: Runtime) -> ContextService:
        """The service wired to the runtime's LLM gateway, profiles and demotion hooks
        (`runtime.summarizer` stands in for the summary model call when set)."""
        return cls(db, runtime)

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
