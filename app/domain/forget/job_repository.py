"""The SQL of the forget jobs (`forget_jobs`): created by a request, advanced batch by
batch under the row's lock, resumed by the periodic job. Every statement names the user
but `stalled`, the resume's deliberate scan across users (tests/citus/multi_shard.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ForgetJob


class ForgetJobRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create(self, job: ForgetJob) -> ForgetJob:
        self.session.add(job)
        await self.session.flush()
        return job

    async def get(self, user_id: str, job_id: uuid.UUID) -> ForgetJob | None:
        rows = await self.session.execute(
            select(ForgetJob).where(ForgetJob.user_id == user_id, ForgetJob.id == job_id)
        )
        return rows.scalar_one_or_none()

    async def lock(self, user_id: str, job_id: uuid.UUID) -> ForgetJob | None:
        """The job's row, locked until the batch commits: one runner advances it at a
        time (a second one, in this process or another, waits and then sees the new
        cursor)."""
        rows = await self.session.execute(
            select(ForgetJob)
            .where(ForgetJob.user_id == user_id, ForgetJob.id == job_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return rows.scalar_one_or_none()

    async def advance(
        self,
        user_id: str,
        job_id: uuid.UUID,
        *,
        after: uuid.UUID | None,
        sessions: int,
        changed: Mapping[str, int],
        files: Sequence[Mapping[str, str]],
        stores_done: bool,
        now: float,
    ) -> None:
        """Record a batch done (in the batch's transaction): the cursor, the counts added."""
        await self.session.execute(
            text(
                "UPDATE forget_jobs SET after_session = :after,"
                " sessions_done = sessions_done + :n, changed = CAST(:changed AS jsonb),"
                " files = files || CAST(:files AS jsonb), stores_done = :stores,"
                " attempts = 0, error = NULL, heartbeat = :now"
                " WHERE user_id = :uid AND id = :id"
            ),
            {
                "uid": user_id,
                "id": job_id,
                "after": after,
                "n": sessions,
                "changed": json.dumps(dict(changed)),
                "files": json.dumps(list(files)),
                "stores": stores_done,
                "now": now,
            },
        )

    async def finish(self, user_id: str, job_id: uuid.UUID, state: str, error: str | None) -> None:
        """The job ends (`done` or `failed`): its text is erased."""
        await self.session.execute(
            text(
                "UPDATE forget_jobs SET state = :state, text = NULL, error = :error,"
                " finished_at = :at WHERE user_id = :uid AND id = :id AND state = 'running'"
            ),
            {
                "uid": user_id,
                "id": job_id,
                "state": state,
                "error": error,
                "at": datetime.now(UTC),
            },
        )

    async def failed_attempt(self, user_id: str, job_id: uuid.UUID, error: str) -> int:
        """A batch failed: counted (the heartbeat is left, so the resume retries it once
        it is stale). The attempts in a row so far."""
        rows = await self.session.execute(
            text(
                "UPDATE forget_jobs SET attempts = attempts + 1, error = :error"
                " WHERE user_id = :uid AND id = :id AND state = 'running' RETURNING attempts"
            ),
            {"uid": user_id, "id": job_id, "error": error},
        )
        return int(rows.scalar_one_or_none() or 0)

    async def stalled(self, before: float, limit: int) -> list[tuple[str, uuid.UUID]]:
        """Running jobs no runner advanced since `before` (epoch seconds), oldest first:
        the resume's scan across users (read without a lock; each is then claimed)."""
        rows = await self.session.execute(
            text(
                "SELECT user_id, id FROM forget_jobs WHERE state = 'running'"
                " AND heartbeat < :before ORDER BY created_at LIMIT :n"
            ),
            {"before": before, "n": limit},
        )
        return [(r.user_id, r.id) for r in rows]

    async def claim(self, user_id: str, job_id: uuid.UUID, before: float, now: float) -> bool:
        """Take over a stalled job (one replica wins: the heartbeat is moved on)."""
        rows = await self.session.execute(
            text(
                "UPDATE forget_jobs SET heartbeat = :now WHERE user_id = :uid AND id = :id"
                " AND state = 'running' AND heartbeat < :before RETURNING id"
            ),
            {"uid": user_id, "id": job_id, "before": before, "now": now},
        )
        return rows.scalar_one_or_none() is not None


def job_files(found: Sequence[Any]) -> list[dict[str, str]]:
    """Found files (`scan.FoundFile`) as the job row keeps them."""
    return [{"session_id": str(f.session_id), "path": f.path} for f in found]
