"""The pre-turn step of ``TurnLoop`` (``turns.py``): :meth:`TurnBegin.begin`, awaited by
the handler so bad input is a 4xx. It takes the session's turn lease, then in one
transaction runs the pre-turn prepare (compression, memory notes, recall) and stores the
user's message — its admitted images and their notice sent from the first round on — or,
on a resume, the client's tool results (the round's image_view images reloaded)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.agents.prompt import Prompt, pending_calls, round_results, to_ollama
from app.domain.agents.schemas import TurnRequest
from app.domain.agents.stream import Recall, TurnEvent, compression_events
from app.domain.agents.toolbox import Toolbox
from app.domain.agents.turn_state import TurnState
from app.domain.compression import ContextTooLargeError
from app.domain.context.schemas import IncomingMessage, PrepareOut
from app.domain.context.services import ContextService
from app.domain.files.notice import image_budget
from app.domain.kernel.messages import MessageIn
from app.domain.kernel.ownership import SessionAccess
from app.domain.sessions.services import SessionService
from app.lib.errors import Conflict, Unprocessable


class TurnBegin(TurnState):
    async def begin(self, req: TurnRequest) -> list[TurnEvent] | ContextTooLargeError:
        """Pre-turn: prepare and store the user's message (or the client's tool results)."""
        if (req.message is None) == (req.tool_results is None):
            raise Unprocessable("give either message (a new turn) or tool_results (a resume)")
        await self.lease.claim()  # 404 for a session out of reach, 409 while a turn runs
        try:
            first = await self._begin(req)
        except BaseException:
            await self.lease.release()
            raise
        if isinstance(first, ContextTooLargeError):
            await self.lease.release()
        return first

    async def _begin(self, req: TurnRequest) -> list[TurnEvent] | ContextTooLargeError:
        too_large: ContextTooLargeError | None = None
        with self._budget():  # the prepare spends the turn's budget too
            async with self._step() as (db, ctx):
                session = await SessionAccess(db).get(self.session_id, self.viewer)
                self.profile = self.runtime.profiles.get(session.profile_id)
                self.unnamed = (session.user_id, session.name is None)  # named after its answer
                self.toolbox = Toolbox.for_profile(self.runtime, self.profile, self.client_tools)
                try:
                    if req.message is not None:
                        out = await self._begin_turn(db, ctx, session, req)
                    else:
                        out = await self._begin_resume(db, ctx, session, req)
                except ContextTooLargeError as exc:  # a compression that ran stays committed
                    too_large = exc
        if too_large is not None:
            return too_large
        self.tokens = out.tokens
        if req.message is None:  # a resume: the round's image_view images ride now
            room = image_budget(self.profile.context_window, out.tokens)
            await self.tools.reload_viewed(self.session_id, round_results(out.context), room)
        events: list[TurnEvent] = []
        events.extend(compression_events(out.events, "preturn" if req.message else "midturn"))
        if self.prompt.recall_ids:
            chars = sum(len(m["content"]) for m in self.prompt.recall)
            events.append(Recall(chunk_ids=self.prompt.recall_ids, chars=chars))
        return events

    async def _begin_turn(
        self, db: AsyncSession, ctx: ContextService, session: Any, req: TurnRequest
    ) -> PrepareOut:
        assert req.message is not None
        msg = req.message
        incoming = IncomingMessage(role="user", content=msg.content, images=msg.images)
        out = await ctx.prepare(
            session, self.viewer, incoming, model=self.model, admitted_images_only=True
        )
        user = MessageIn(role="user", content=msg.content, images=msg.images)
        sessions = SessionService.of(db, self.runtime)
        [ref] = await sessions.append(self.session_id, self.viewer, [user], check_quota=True)
        self.prompt = Prompt.of(out.context)
        # The model copy as stored — the admitted images and their notice — from the
        # first round on, as every later round (a prepare's view) sends it.
        stored = await ctx.appended_view(session, ref.sequence_number, model=self.model)
        self.prompt.stored.extend(to_ollama(m) for m in stored)
        return out

    async def _begin_resume(
        self, db: AsyncSession, ctx: ContextService, session: Any, req: TurnRequest
    ) -> PrepareOut:
        assert req.tool_results is not None
        sessions = SessionService.of(db, self.runtime)
        _, context = await sessions.context(self.session_id, self.viewer)
        pending = pending_calls(context)
        if not pending:
            raise Conflict("tool_results: this session waits for no tool call")
        given = [r.tool_call_id for r in req.tool_results]
        if sorted(given) != sorted(pending) or len(set(given)) != len(given):
            raise Unprocessable(
                f"tool_results: expected one result for each of {sorted(pending)}, got {given}"
            )
        results = [
            MessageIn(
                role="tool",
                content=r.content,
                tool_call_id=r.tool_call_id,
                name=pending[r.tool_call_id][0],
                metadata={"is_error": True} if r.is_error else {},
            )
            for r in req.tool_results
        ]
        await sessions.append(self.session_id, self.viewer, results, check_quota=True)
        out = await ctx.prepare(session, self.viewer, None, mid_turn=True, model=self.model)
        self.prompt = Prompt.of(out.context)
        return out
