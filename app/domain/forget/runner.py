"""The forget job: a text redacted from everything a user owns, batch by batch.

Each step is its own short transaction, begun from the job's row (`forget_jobs`), which
it locks and advances in the same transaction, so a job resumes where it stopped after
a crash or a failed batch:

1. the next `FORGET_BATCH_SESSIONS` sessions (id order, after the row's cursor): their
   files are searched first (no transaction open), then, in one transaction, only those
   sessions' rows are locked and their messages (hot and archived), raw chunks, rolling
   summaries, names and planning logs, and job failure notes are redacted; the cursor
   and the counts move on in the same commit. Changed chunks are embedded anew after the
   commit (no model call under a lock), in a transaction of their own;
2. when no session is left: the user-wide stores — facts, the memory summary, scratchpad
   sections, error memory, and chunks of no session — in one transaction; the error
   entries are embedded anew after it;
3. the job is `done`, and its text erased.

A dry run takes the same steps, writing nothing but the job's counts. A step that fails
is counted on the row (`attempts`: the error's type only — a driver's message may quote
the statement's parameters, the text) and left for the periodic resume
(`resume_stalled`), which takes over any running job whose heartbeat went stale; after
MAX_ATTEMPTS failures in a row the job fails and its text is erased.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.engine import transaction
from app.db.models import ForgetJob
from app.domain.error_memory.services import embed_text
from app.domain.forget.job_repository import ForgetJobRepository, job_files
from app.domain.forget.memory_repository import ChunkChange, ErrorChange, ForgetMemoryRepository
from app.domain.forget.redact import Needle
from app.domain.forget.repositories import MESSAGE_TABLES, ForgetSessionRepository
from app.domain.forget.scan import files_holding
from app.domain.forget.schemas import STORES
from app.domain.kernel.repositories import UserSessionsRepository
from app.domain.kernel.runtime import Runtime, SessionMaker
from app.domain.raw_history.indexer import embed_chunks
from app.lib.metrics import FORGETS, FORGOTTEN_ROWS
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()

#: Failed steps in a row before the job fails (its text erased).
MAX_ATTEMPTS = 5
#: A running job not advanced for this long is taken over by the resume.
STALE_SECONDS = 60.0
#: Stalled jobs one resume pass takes.
RESUME_LIMIT = 20
_MESSAGE_STORES = dict(zip(MESSAGE_TABLES, ("messages", "archived_messages"), strict=True))


@dataclass
class _Redacted:
    """One step's changes: counts per store, and what to embed after the commit."""

    changed: dict[str, int] = field(default_factory=dict)
    chunks: list[ChunkChange] = field(default_factory=list)
    errors: list[ErrorChange] = field(default_factory=list)


def _sum(before: dict[str, int], step: dict[str, int]) -> dict[str, int]:
    total = {s: int(before.get(s, 0)) for s in STORES}
    for store, n in step.items():
        total[store] += n
    return total


class ForgetRunner:
    def __init__(self, factory: SessionMaker, llm: LLMGateway | None, settings: Settings) -> None:
        self.factory = factory
        self.llm = llm
        self.settings = settings

    @classmethod
    def of(cls, runtime: Runtime) -> ForgetRunner:
        return cls(runtime.session_factory, runtime.llm, runtime.settings)

    async def run(self, user_id: str, job_id: uuid.UUID) -> None:
        """Advance the job step by step until it ends, or a step fails (left for the
        resume)."""
        while True:
            try:
                if not await self.step(user_id, job_id):
                    return
            except Exception as exc:
                await self._failed(user_id, job_id, exc)
                return

    async def step(self, user_id: str, job_id: uuid.UUID) -> bool:
        """One step (a batch of sessions, or the user-wide stores, or the end); whether
        there is more to do."""
        async with transaction(self.factory) as db:
            job = await ForgetJobRepository(db).get(user_id, job_id)
            sids = []
            if job is not None and job.state == "running" and not job.stores_done:
                sids = await UserSessionsRepository(db).ids(
                    user_id, after=job.after_session, limit=self.settings.forget_batch_sessions
                )
        if job is None or job.state != "running" or job.text is None:
            return False
        needle = Needle(job.text)
        if job.stores_done:
            await self._finish(job)
            return False
        if sids:
            await self._sessions(job, needle, sids)
        else:
            await self._stores(job, needle)
        return True

    async def _sessions(self, job: ForgetJob, needle: Needle, sids: list[uuid.UUID]) -> None:
        found = await anyio.to_thread.run_sync(files_holding, self.settings, sids, needle)
        async with transaction(self.factory) as db:
            jobs = ForgetJobRepository(db)
            locked = await jobs.lock(job.user_id, job.id)
            if locked is None or not _unchanged(locked, job):
                return  # another runner took this batch meanwhile: read the row again
            done = _Redacted()
            sessions = ForgetSessionRepository(db)
            live = await sessions.lock_sessions(job.user_id, sids) if not job.dry_run else sids
            if live:
                done = await self._redact_sessions(db, job, needle, live)
            kept = set(live)
            await jobs.advance(
                job.user_id,
                job.id,
                after=sids[-1],
                sessions=len(sids),
                changed=_sum(locked.changed, done.changed),
                files=job_files([f for f in found if f.session_id in kept]),
                stores_done=False,
                now=time.time(),
            )
        await self._embed_chunks(job.user_id, done.chunks)

    async def _redact_sessions(
        self, db: AsyncSession, job: ForgetJob, needle: Needle, sids: Sequence[uuid.UUID]
    ) -> _Redacted:
        user_id, write = job.user_id, not job.dry_run
        sessions, memory = ForgetSessionRepository(db), ForgetMemoryRepository(db)
        out = _Redacted()
        for table, store in _MESSAGE_STORES.items():
            messages = await sessions.find_messages(table, user_id, sids, needle)
            out.changed[store] = len(messages)
            if write:
                await sessions.write_messages(table, user_id, messages)
                await sessions.drop_message_vectors(user_id, messages)
        chunks = await memory.find_chunks(user_id, sids, needle)
        rolling = await sessions.find_rolling(user_id, sids, needle)
        named = await sessions.find_sessions(user_id, sids, needle)
        job_errors = await sessions.find_job_errors(user_id, sids, needle)
        out.changed.update(
            chunks=len(chunks),
            rolling_summaries=len(rolling),
            sessions=len(named),
            job_errors=len(job_errors),
        )
        if write:
            await memory.write_chunks(user_id, chunks)
            await sessions.write_rolling(user_id, rolling)
            await sessions.write_sessions(user_id, named)
            await sessions.write_job_errors(user_id, job_errors)
            out.chunks = chunks
        return out

    async def _stores(self, job: ForgetJob, needle: Needle) -> None:
        user_id, write = job.user_id, not job.dry_run
        async with transaction(self.factory) as db:
            jobs = ForgetJobRepository(db)
            locked = await jobs.lock(user_id, job.id)
            if locked is None or not _unchanged(locked, job):
                return
            memory = ForgetMemoryRepository(db)
            chunks = await memory.find_chunks(user_id, None, needle)  # of no session
            facts = await memory.find_facts(user_id, needle)
            versions = await memory.find_fact_versions(user_id, needle, facts)
            summary = await memory.find_summary(user_id, needle)
            sketches = await memory.find_sketches(user_id, needle)
            errors = await memory.find_errors(user_id, needle)
            if write:
                await memory.write_chunks(user_id, chunks)
                await memory.delete_facts(user_id, facts)
                await memory.delete_fact_versions(user_id, versions)
                await memory.write_summary(user_id, summary)
                await memory.write_sketches(user_id, sketches)
                # without a vector until embedded anew, after the commit
                await memory.write_errors(user_id, errors, [None] * len(errors))
            step = {
                "chunks": len(chunks),
                "facts": len(facts),
                "fact_versions": len(versions),
                "memory_summary": int(summary is not None),
                "sketches": len(sketches),
                "errors": len(errors),
            }
            await jobs.advance(
                user_id,
                job.id,
                after=job.after_session,
                sessions=0,
                changed=_sum(locked.changed, step),
                files=[],
                stores_done=True,
                now=time.time(),
            )
        if write:
            await self._embed_chunks(user_id, chunks)
            await self._embed_errors(user_id, errors)

    async def _finish(self, job: ForgetJob) -> None:
        async with transaction(self.factory) as db:
            await ForgetJobRepository(db).finish(job.user_id, job.id, "done", None)
        FORGETS.labels("true" if job.dry_run else "false").inc()
        changed = {s: int(job.changed.get(s, 0)) for s in STORES}
        if not job.dry_run:
            for store, n in changed.items():
                if n:
                    FORGOTTEN_ROWS.labels(store).inc(n)
        log.info(
            "memory.forgotten",
            user_id=job.user_id,
            actor=job.actor,
            job_id=str(job.id),
            text_sha256=job.text_sha256,
            dry_run=job.dry_run,
            via=job.via,
            sessions=job.sessions_done,
            total=sum(changed.values()),
            files=len(job.files),
            **{k: v for k, v in changed.items() if v},
        )

    async def _failed(self, user_id: str, job_id: uuid.UUID, exc: Exception) -> None:
        """Counted on the row, by the error's type only (never its message: a driver's
        may quote the statement's parameters, the text)."""
        error = type(exc).__name__
        async with transaction(self.factory) as db:
            jobs = ForgetJobRepository(db)
            attempts = await jobs.failed_attempt(user_id, job_id, error)
            if attempts >= MAX_ATTEMPTS:
                await jobs.finish(user_id, job_id, "failed", error)
        log.warning(
            "memory.forget_step_failed",
            user_id=user_id,
            job_id=str(job_id),
            error=error,
            attempts=attempts,
            gave_up=attempts >= MAX_ATTEMPTS,
        )

    async def _embed_chunks(self, user_id: str, chunks: Sequence[ChunkChange]) -> None:
        """The redacted chunks' segment vectors, after their text committed; without an
        embedder (or failing) they stay `vectors_stale`, for the background embedder."""
        if self.llm is None or not chunks:
            return
        segments = await embed_chunks(self.llm, [c.content for c in chunks])
        async with transaction(self.factory) as db:
            await ForgetMemoryRepository(db).write_segments(user_id, chunks, segments)

    async def _embed_errors(self, user_id: str, errors: Sequence[ErrorChange]) -> None:
        """New vectors of the redacted error entries; without an embedder they are left
        without one (found by their words, as one written while the embedder was down)."""
        if self.llm is None or not errors:
            return
        try:
            vectors = list(await self.llm.embed([embed_text(e.tool, e.error_text) for e in errors]))
        except LLMError as exc:
            log.info("memory.forget_embedding_unavailable", error=type(exc).__name__)
            return
        async with transaction(self.factory) as db:
            await ForgetMemoryRepository(db).write_error_vectors(user_id, errors, vectors)


def _unchanged(locked: ForgetJob, seen: ForgetJob) -> bool:
    """Whether the row is still where this step began (no other runner advanced it)."""
    return (
        locked.state == "running"
        and locked.after_session == seen.after_session
        and locked.stores_done == seen.stores_done
    )


async def resume_stalled(runtime: Runtime) -> int:
    """The periodic job: take over the running forget jobs no runner advanced for
    STALE_SECONDS (a restart, a failed step) and run each to its end. How many ran."""
    runner = ForgetRunner.of(runtime)
    now = time.time()
    before = now - STALE_SECONDS
    async with transaction(runtime.session_factory) as db:
        stalled = await ForgetJobRepository(db).stalled(before, RESUME_LIMIT)
    ran = 0
    for user_id, job_id in stalled:
        async with transaction(runtime.session_factory) as db:
            claimed = await ForgetJobRepository(db).claim(user_id, job_id, before, time.time())
        if claimed:
            log.info("memory.forget_resumed", user_id=user_id, job_id=str(job_id))
            await runner.run(user_id, job_id)
            ran += 1
    return ran
