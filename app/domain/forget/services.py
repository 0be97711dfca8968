"""Forget a text: every occurrence in everything the user owns becomes `[forgotten]`.

A forget is a durable job (`forget_jobs`, run by `runner.py` batch by batch, each batch
its own short transaction): the request creates it, runs it in the background and waits
for it up to FORGET_WAIT_SECONDS — done by then, the answer is the counts as always
(`ForgetOut`); otherwise a `ForgetJobOut` (202) with the job's status URL, and the job
goes on (resumed by the periodic job after a restart).

Stores and what happens to them (docs/memory.md, "Forgetting a text"): messages hot and
archived (content, thinking, tool calls, metadata; their chat_history vectors dropped),
raw chunks (content, breadcrumbs, hash; segment vectors dropped, then embedded anew when
the embedder answers), facts holding it
(deleted, with the rows hidden behind them), the memory summary, rolling summaries,
scratchpad sections, error memory (re-embedded, or left without a vector), session names
and planning logs, the background jobs' failure notes (`last_error`). Session files holding it are listed. The log and metrics carry a
hash of the text, never the text."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import transaction
from app.db.models import ForgetJob
from app.domain.forget.job_repository import ForgetJobRepository
from app.domain.forget.memory_repository import ForgetMemoryRepository
from app.domain.forget.redact import check_text, text_hash
from app.domain.forget.runner import ForgetRunner
from app.domain.forget.schemas import (
    STORES,
    ForgetJobOut,
    ForgetOut,
    ForgetProgress,
    ForgottenFile,
)
from app.domain.kernel.forgotten import entry_of
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.kernel.jobs import spawn
from app.domain.kernel.repositories import UserSessionsRepository
from app.domain.kernel.runtime import Runtime
from app.lib.errors import NotFound


def status_url(job: ForgetJob) -> str:
    if job.via == "admin":
        return f"/admin/users/{job.user_id}/forget/jobs/{job.id}"
    return f"/memory/forget/jobs/{job.id}"


def job_result(job: ForgetJob) -> ForgetOut:
    """The job's counts (so far, or all of them once done) as a forget answers them."""
    changed = {s: int(job.changed.get(s, 0)) for s in STORES}
    return ForgetOut(
        dry_run=job.dry_run,
        changed=changed,
        files=[ForgottenFile(uuid.UUID(f["session_id"]), f["path"]) for f in job.files],
        total=sum(changed.values()),
    )


def job_out(job: ForgetJob) -> ForgetJobOut:
    return ForgetJobOut(
        job_id=job.id,
        state=job.state,
        status_url=status_url(job),
        progress=ForgetProgress(job.sessions_done, job.sessions_total, job.stores_done),
        result=job_result(job),
        attempts=job.attempts,
        error=job.error,
        created_at=job.created_at,
        finished_at=job.finished_at,
    )


class ForgetService:
    def __init__(self, db: AsyncSession, runtime: Runtime) -> None:
        self.db = db
        self.runtime = runtime
        self.settings = runtime.settings
        self.memory = ForgetMemoryRepository(db)

    @classmethod
    def of(cls, db: AsyncSession, runtime: Runtime) -> ForgetService:
        """The service on `db` (reads); the job runs on sessions of its own."""
        return cls(db, runtime)

    async def forget_for_admin(
        self, user_id: str, raw: str, *, dry_run: bool, actor: str
    ) -> ForgetOut | ForgetJobOut:
        if not await self.memory.user_exists(user_id):
            raise NotFound(f"user_id: no user {user_id!r}")
        return await self.forget(user_id, raw, dry_run=dry_run, via="admin", actor=actor)

    async def forget(
        self,
        user_id: str,
        raw: str,
        *,
        dry_run: bool = False,
        via: str = "api",
        actor: str | None = None,
    ) -> ForgetOut | ForgetJobOut:
        """Redact `raw` (checked: `redact.check_text`) from everything `user_id` owns;
        `via` and `actor` (who asked, when not the user) are logged. The counts when the
        job ends within FORGET_WAIT_SECONDS, else the running job's status."""
        text = check_text(raw)
        factory = self.runtime.session_factory
        async with transaction(factory) as db:  # committed before any batch runs
            if not dry_run:  # the record every writer of derived text checks (kernel/forgotten)
                entry = entry_of(text, datetime.now(UTC).isoformat())
                await ForgottenRepository(db).add(user_id, entry)
            total = await UserSessionsRepository(db).count(user_id)
            job = await ForgetJobRepository(db).create(
                ForgetJob(
                    user_id=user_id,
                    id=uuid.uuid4(),
                    dry_run=dry_run,
                    text=text,
                    text_sha256=text_hash(text),
                    via=via,
                    actor=actor or user_id,
                    sessions_total=total,
                    heartbeat=time.time(),
                )
            )
        runner = ForgetRunner.of(self.runtime)
        task = spawn(self.runtime.jobs, runner.run(user_id, job.id), "memory.forget")
        if self.settings.forget_wait_seconds > 0:
            await asyncio.wait({task}, timeout=self.settings.forget_wait_seconds)
        out = await self.job(user_id, job.id)
        return out.result if out.state == "done" else out

    async def job(self, user_id: str, job_id: uuid.UUID) -> ForgetJobOut:
        """A job of the user's, as it stands (404 when it is not theirs)."""
        job = await ForgetJobRepository(self.db).get(user_id, job_id)
        if job is None:
            raise NotFound(f"job_id: no forget job {job_id}")
        return job_out(job)
