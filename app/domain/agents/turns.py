"""The turn loop of ``POST /sessions/{id}/turns``, as named steps.

:meth:`TurnLoop.begin` (awaited by the handler, so bad input is a 4xx; ``turn_begin.py``):
the pre-turn prepare (compression, memory notes, recall) and the user's message — or, on
a resume, the client's tool results — stored in one transaction. :meth:`TurnLoop.run` (a
task of its own, see ``run.py``): rounds of *model call* (streamed) → *tools* (the
round's assistant message, the built-in calls run and their results, one transaction) →
*mid-turn* prepare; a reply without tool calls *finishes* the turn (the assistant
message with thinking, tool-call count and elapsed seconds, then the post-turn check
from the real ``prompt_eval_count``). Calls the service does not know end the turn with
``requires_action``. Every step commits on its own, so a client that goes away, or a
model that fails, loses only what was never produced.

One turn at a time per session: :meth:`TurnLoop.begin` first takes the session's turn
lease (``turn_lease.py``) or answers 409 Conflict; the run drops it when it ends, however
it ends. The turn's state and its step transaction: ``turn_state.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from app.domain.agents.prompt import INTERRUPTED_KEY, USAGE_KEY, call_id, stored_calls
from app.domain.agents.stream import Done, Thinking, Token, TurnEvent, Usage, compression_events
from app.domain.agents.turn_begin import TurnBegin
from app.domain.compression import ContextTooLargeError
from app.domain.context.services import PostTurn
from app.domain.files.notice import image_budget
from app.domain.forget.tool import redact_round
from app.domain.kernel.events import UsageIn
from app.domain.kernel.messages import MessageIn
from app.domain.kernel.ownership import SessionAccess
from app.domain.sessions.naming import start_naming
from app.domain.sessions.services import SessionService

log = structlog.get_logger("app.agents.turns")

Emit = Callable[[TurnEvent], None]


@dataclass
class Reply:
    """What one model call produced."""

    content: str = ""
    thinking: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    model: str = ""
    prompt_eval_count: int = 0
    eval_count: int = 0


class TurnLoop(TurnBegin):
    # ------------------------------------------------------------------ run
    def interrupt(self, task: asyncio.Task[Any]) -> None:
        """The client went away: stop at the next step; a model call is cut now (what it
        produced so far is saved, marked interrupted)."""
        self.interrupted = True
        if self.streaming:
            task.cancel()

    async def run(self, emit: Emit) -> Done:
        """The rounds, until a reply without tool calls, a call for the client's tools,
        or ``TURN_MAX_ROUNDS``; the turn's lease dropped at the end, whatever the end."""
        try:
            return await self._rounds(emit)
        finally:
            await self.lease.release()

    async def _rounds(self, emit: Emit) -> Done:
        with self._budget():
            while not self.interrupted:
                self.rounds += 1
                reply = await self._model_round(emit)
                emit(Usage(self.rounds, reply.model, reply.prompt_eval_count, reply.eval_count))
                if not reply.calls:
                    await self._finish(reply, emit)
                    return self._done("completed")
                pending = await self._tools_round(reply, emit)
                if pending:
                    return self._done("requires_action", pending)
                if self.rounds >= self.settings.turn_max_rounds:
                    await self._post_turn(reply, emit)  # the turn ends here: check it
                    return self._done("max_rounds")
                await self._mid_turn(emit)
        return self._done("interrupted")

    def _done(self, status: str, pending: list[dict[str, Any]] | None = None) -> Done:
        log.info(
            "turn.done",
            session_id=str(self.session_id),
            status=status,
            rounds=self.rounds,
            tool_calls=self.tool_call_count,
            elapsed=round(time.monotonic() - self.started, 3),
        )
        return Done(
            status=status,
            content=self.content,
            rounds=self.rounds,
            tool_call_count=self.tool_call_count,
            elapsed_seconds=round(time.monotonic() - self.started, 3),
            pending=pending or [],
        )

    async def _model_round(self, emit: Emit) -> Reply:
        """One streamed model call; cut by an interrupt, what came so far is saved."""
        assert self.profile is not None
        reply = Reply(model=self.model)
        stream = self.runtime.llm.chat_stream(
            self.tools.with_viewed_images(self.prompt.messages()),
            model=self.model,
            think=self.profile.think,
            options=self.profile.model_options(),
            tools=self.tools.definitions(),
        )
        self.streaming = True
        try:
            async for piece in stream:
                if piece.thinking:
                    reply.thinking += piece.thinking
                    emit(Thinking(piece.thinking))
                if piece.content:
                    reply.content += piece.content
                    emit(Token(piece.content))
                reply.calls.extend(piece.tool_calls)
                if piece.done:
                    reply.model = piece.model or reply.model
                    reply.prompt_eval_count = piece.prompt_eval_count
                    reply.eval_count = piece.eval_count
        except asyncio.CancelledError:
            await self._save_interrupted(reply)
            raise
        finally:
            self.streaming = False
        return reply

    def _assistant(self, reply: Reply, **extra: Any) -> MessageIn:
        limit = self.settings.message_max_chars
        meta: dict[str, Any] = {"model": reply.model, "round": self.rounds}
        if reply.prompt_eval_count or reply.eval_count:  # the chat page's per-turn usage
            meta[USAGE_KEY] = {"in": reply.prompt_eval_count, "out": reply.eval_count}
        if len(reply.content) > limit or len(reply.thinking) > limit:
            meta["truncated"] = True
        return MessageIn(
            role="assistant",
            content=reply.content[:limit],
            thinking=reply.thinking[:limit] or None,
            metadata={**meta, **extra.pop("metadata", {})},
            **extra,
        )

    async def _save_interrupted(self, reply: Reply) -> None:
        if not (reply.content or reply.thinking):
            return
        message = self._assistant(
            reply,
            metadata={INTERRUPTED_KEY: True},
            elapsed_seconds=round(time.monotonic() - self.started, 3),
        )
        async with self._step() as (db, _):
            await SessionService.of(db, self.runtime).append(
                self.session_id, self.viewer, [message]
            )
        log.info("turn.interrupted", session_id=str(self.session_id), chars=len(reply.content))

    async def _tools_round(self, reply: Reply, emit: Emit) -> list[dict[str, Any]]:
        """The assistant message with its calls and the built-in calls' results, in one
        transaction; the calls left for the client."""
        calls = [(call_id(), str(c["name"]), dict(c["arguments"])) for c in reply.calls]
        self.tool_call_count += len(calls)
        self.content = reply.content
        # What the next call has for the images image_view hands it: the real size of
        # this call's prompt and reply (the prepare's estimate when that is larger).
        used = max(self.tokens, reply.prompt_eval_count) + reply.eval_count
        assert self.profile is not None
        self.tools.image_room = image_budget(self.profile.context_window, used)
        # embedded first, with no connection held; then the round's short transaction
        embedded = await self.tools.embed_ahead(self.principal, self.session_id, calls)
        async with self._step() as (db, _):
            results = await self.tools.run_calls(
                db, self.principal, self.session_id, calls, emit, embedded
            )
            message = self._assistant(reply, tool_calls=stored_calls(calls))
            message = redact_round(message, calls, results)  # a `memory` forget by text
            await SessionService.of(db, self.runtime).append(
                self.session_id, self.viewer, [message, *results]
            )
        done = {m.tool_call_id for m in results}
        return [
            {"id": cid, "name": name, "arguments": args}
            for cid, name, args in calls
            if cid not in done
        ]

    async def _mid_turn(self, emit: Emit) -> None:
        """Between rounds: compress when needed; the next round sends the new view."""
        too_large: ContextTooLargeError | None = None
        async with self._step() as (db, ctx):
            session = await SessionAccess(db).get(self.session_id, self.viewer)
            try:
                out = await ctx.prepare(session, self.viewer, None, mid_turn=True, model=self.model)
            except ContextTooLargeError as exc:  # the compression that ran is kept
                too_large = exc
        if too_large is not None:
            raise too_large
        for ev in compression_events(out.events, "midturn"):
            emit(ev)
        self.tokens = out.tokens
        self.prompt.with_stored(out.context)

    async def _finish(self, reply: Reply, emit: Emit) -> None:
        """The turn's answer stored, then the post-turn check from the real prompt size."""
        self.content, self.thinking = reply.content, reply.thinking
        message = self._assistant(
            reply,
            tool_call_count=self.tool_call_count,
            elapsed_seconds=round(time.monotonic() - self.started, 3),
        )
        await self._post_turn(reply, emit, answer=message)

    async def _post_turn(self, reply: Reply, emit: Emit, answer: MessageIn | None = None) -> None:
        """The turn's answer stored and the post-turn check (calibration) in one step;
        the compression it finds due after that step committed, in its own (a failure
        there never loses the answer). A turn that ends after a tool round
        (``max_rounds``) has no answer to store."""
        due: PostTurn | None = None
        async with self._step() as (db, ctx):
            if answer is not None:
                await SessionService.of(db, self.runtime).append(
                    self.session_id, self.viewer, [answer]
                )
            if reply.prompt_eval_count > 0:  # calibration; the compression due, if any
                usage = UsageIn(model=reply.model, prompt_eval_count=reply.prompt_eval_count)
                due = await ctx.after_append(self.session_id, self.viewer, usage)
        if answer is not None and self.unnamed[1]:  # committed: the first exchange names it
            start_naming(self.runtime, self.unnamed[0], self.session_id)
        events = await ctx.compress_post_turn(due) if due is not None else []
        for ev in compression_events(events, "postturn"):
            emit(ev)
