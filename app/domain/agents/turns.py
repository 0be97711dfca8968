"""The turn loop of ``POST /sessions/{id}/turns``, as named steps.

:meth:`TurnLoop.begin` (awaited by the handler, so bad input is a 4xx): the pre-turn
prepare (compression, memory notes, recall) and the user's message — or, on a resume,
the client's tool results — stored in one transaction. :meth:`TurnLoop.run` (a task of
its own, see ``run.py``): rounds of *model call* (streamed) → *tools* (the round's
assistant message, the built-in calls run and their results, one transaction) →
*mid-turn* prepare; a reply without tool calls *finishes* the turn (the assistant
message with thinking, tool-call count and elapsed seconds, then the post-turn check
from the real ``prompt_eval_count``). Calls the service does not know end the turn with
``requires_action``. Every step commits on its own, so a client that goes away, or a
model that fails, loses only what was never produced.

One turn at a time per session: :meth:`TurnLoop.begin` first takes the session's turn
lease (a conditional UPDATE of ``session_metadata``, so it holds across worker processes,
with no connection or row lock held during the turn) or answers 409 Conflict; the run
drops it when it ends, however it ends.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import transaction
from app.domain.agents.prompt import (
    INTERRUPTED_KEY,
    USAGE_KEY,
    Prompt,
    call_id,
    pending_calls,
    round_results,
    stored_calls,
    to_ollama,
)
from app.domain.agents.schemas import TurnRequest
from app.domain.agents.stream import (
    Done,
    Recall,
    Thinking,
    Token,
    TurnEvent,
    Usage,
    compression_events,
)
from app.domain.agents.toolbox import Toolbox
from app.domain.compression import ContextTooLargeError
from app.domain.context.schemas import IncomingMessage, PrepareOut
from app.domain.context.services import ContextService, PostTurn
from app.domain.files.notice import image_budget
from app.domain.forget.tool import redact_round
from app.domain.kernel.access import Viewer
from app.domain.kernel.events import UsageIn
from app.domain.kernel.jobs import LIVE_INDEX_JOB, spawn, wake
from app.domain.kernel.messages import MessageIn
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.kernel.profiles import Profile
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.naming import start_naming
from app.domain.sessions.repositories import TURN_LEASE_KEY, SessionRepository
from app.domain.sessions.services import SessionService
from app.lib.errors import Conflict, Unprocessable
from app.llm.deadline import llm_deadline_at

TURN_BUDGET = "TURN_DEADLINE_SECONDS"
#: Seconds between the retries of a lease release that failed (about a minute in all).
LEASE_RELEASE_RETRIES = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
#: A turn's lease on its session lasts this long and the running turn renews it every
#: TURN_LEASE_RENEW_SECONDS: a process that dies mid-turn (kill -9) leaves a lease that
#: expires within a minute, not at the turn's deadline (`make soak` found sessions
#: refusing turns for TURN_DEADLINE_SECONDS + 60 s, 6 minutes by default).
TURN_LEASE_SECONDS = 60.0
TURN_LEASE_RENEW_SECONDS = 15.0

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


class TurnLoop:
    def __init__(
        self,
        runtime: Runtime,
        principal: Principal,
        session_id: uuid.UUID,
        client_tools: list[dict[str, Any]],
    ) -> None:
        self.runtime, self.settings, self.session_id = runtime, runtime.settings, session_id
        self.principal = principal
        self.viewer = Viewer.editor(principal)  # a turn writes
        self.client_tools = client_tools
        self.toolbox: Toolbox | None = None
        self.profile: Profile | None = None
        self.prompt = Prompt()
        self.rounds = self.tool_call_count = 0
        self.tokens = 0  # the last prepare's estimate of the context (for image_view)
        self.started = time.monotonic()
        # One budget for every model call of the turn, the pre-turn prepare included.
        self.deadline = self.started + self.settings.turn_deadline_seconds
        self.content = ""
        self.thinking = ""
        self.interrupted = False
        self.streaming = False
        self.unnamed: tuple[str, bool] = ("", False)
        #: the turn's lease on the session (`_claim`): its token, the session's owner
        self.lease = uuid.uuid4().hex
        self.owner = ""
        self._renewal: asyncio.Task[Any] | None = None  # keeps the lease while the turn runs

    @asynccontextmanager
    async def _step(self) -> AsyncIterator[tuple[AsyncSession, ContextService]]:
        """One step's transaction, committed when the step ends; what it appended is then
        taken by the live raw index at once (`kernel.jobs.wake`)."""
        async with transaction(self.runtime.session_factory) as db:
            yield db, ContextService.of(db, self.runtime)
        wake(self.runtime.jobs, LIVE_INDEX_JOB)

    def _budget(self) -> AbstractContextManager[None]:
        """The turn's deadline (`TURN_DEADLINE_SECONDS` from its start) in place of the
        request's."""
        return llm_deadline_at(self.deadline, TURN_BUDGET)

    @property
    def tools(self) -> Toolbox:
        assert self.toolbox is not None, "begin() first"
        return self.toolbox

    @property
    def model(self) -> str:
        assert self.profile is not None
        return self.profile.model

    # ------------------------------------------------------------------ begin
    async def begin(self, req: TurnRequest) -> list[TurnEvent] | ContextTooLargeError:
        """Pre-turn: prepare and store the user's message (or the client's tool results)."""
        if (req.message is None) == (req.tool_results is None):
            raise Unprocessable("give either message (a new turn) or tool_results (a resume)")
        await self._claim()  # 404 for a session out of reach, 409 while a turn runs
        try:
            first = await self._begin(req)
        except BaseException:
            await self.release()
            raise
        if isinstance(first, ContextTooLargeError):
            await self.release()
        return first

    async def _claim(self) -> None:
        """Take the session's turn lease (``session_metadata["running_turn"]``) in a
        transaction of its own: one conditional UPDATE, so one turn at a time per session
        across processes, and no connection or row lock held while the turn runs. The
        lease lasts ``TURN_LEASE_SECONDS``, renewed while the turn runs (`_renew`): a
        process that dies mid-turn leaves a lease that soon expires."""
        seconds = TURN_LEASE_SECONDS
        async with transaction(self.runtime.session_factory) as db:
            session = await SessionAccess(db).get(self.session_id, self.viewer)
            self.owner = session.user_id
            taken = await SessionRepository(db).take_lease(
                self.owner, self.session_id, TURN_LEASE_KEY, self.lease, seconds
            )
        if not taken:
            raise Conflict("a turn is already running on this session")
        self._renewal = spawn(self.runtime.jobs, self._renew(), "agents.turn_lease_renew")

    async def _renew(self) -> None:
        """Keep this turn's lease until `release` cancels this; a renewal the database
        misses is tried again at the next tick."""
        owner = self.owner
        while True:
            await asyncio.sleep(TURN_LEASE_RENEW_SECONDS)
            try:
                async with transaction(self.runtime.session_factory) as db:
                    held = await SessionRepository(db).renew_lease(
                        owner, self.session_id, TURN_LEASE_KEY, self.lease, TURN_LEASE_SECONDS
                    )
            except Exception:
                log.warning("turn.lease_renew_failed", session_id=str(self.session_id))
                continue
            if not held:
                log.warning("turn.lease_lost", session_id=str(self.session_id))
                return

    async def release(self) -> None:
        """Drop this turn's lease (another turn's, taken after ours expired, is kept)."""
        if not self.owner:
            return
        owner, self.owner = self.owner, ""
        if self._renewal is not None:
            self._renewal.cancel()
        try:
            await self._drop_lease(owner)
        except Exception:  # the database is away: try again in the background
            log.warning("turn.lease_release_failed", session_id=str(self.session_id))
            spawn(self.runtime.jobs, self._release_later(owner), "agents.turn_lease_release")

    async def _drop_lease(self, owner: str) -> None:
        async with transaction(self.runtime.session_factory) as db:
            await SessionRepository(db).drop_lease(
                owner, self.session_id, TURN_LEASE_KEY, self.lease
            )

    async def _release_later(self, owner: str) -> None:
        """A release that failed (the database restarting), retried for about a minute:
        left alone, the lease would refuse the session's next turns (409) until it
        expires (`make soak`)."""
        for delay in LEASE_RELEASE_RETRIES:
            await asyncio.sleep(delay)
            try:
                await self._drop_lease(owner)
            except Exception:
                continue
            log.info("turn.lease_released_late", session_id=str(self.session_id))
            return

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
            await self.release()

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
