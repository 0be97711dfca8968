"""Deleting a user, batch by batch (`DELETE /admin/users/{id}`).

The user is first marked (`navi_users.deleting_since`, committed at once): from then on
no token of theirs authenticates (`TokenRepository.user_for_hash`). Then, each in its own
short transaction: USER_DELETE_BATCH_SESSIONS sessions at a time with their chunks and
everything that cascades from a session (messages, archive, vectors, states, shares,
scratchpads), their file directories removed after each commit; then the user-keyed rows
not under a session (chunks of no session, facts, error memory) ROWS_PER_BATCH at a time;
last the user's row, whose cascade takes the little left (tokens, summary, counts, forget
jobs). Every step is idempotent: a deletion that stopped (a crash, a failed statement) is
finished by the periodic `finish_deletions`, or by the next DELETE of the same user.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import structlog

from app.config import Settings
from app.db.engine import transaction
from app.domain.auth.repositories import UserDeletionRepository
from app.domain.kernel.jobs import spawn
from app.domain.kernel.repositories import UserSessionsRepository
from app.domain.kernel.runtime import Runtime, SessionMaker
from app.domain.kernel.session_files import remove_session_dirs

log = structlog.get_logger()

#: Rows of one user-keyed table deleted per transaction (after the sessions).
ROWS_PER_BATCH = 1000
#: A deletion whose mark has not moved for this long is taken up by the periodic job (its
#: runner died: a running one moves the mark with every batch of sessions).
STALE = timedelta(seconds=60)
#: Deletions one periodic pass finishes.
RESUME_LIMIT = 10


async def mark_for_deletion(factory: SessionMaker, user_id: str) -> None:
    """Committed before anything is deleted: the user can no longer sign in."""
    async with transaction(factory) as db:
        await UserDeletionRepository(db).mark(user_id, datetime.now(UTC))


async def delete_marked_user(factory: SessionMaker, settings: Settings, user_id: str) -> bool:
    """Delete everything of a user marked for deletion, batch by batch; whether their row
    went (False: not marked, or gone already)."""
    sessions = 0
    while True:
        async with transaction(factory) as db:
            repo = UserDeletionRepository(db)
            if not await repo.still_deleting(user_id, datetime.now(UTC)):
                return False
            ids = await UserSessionsRepository(db).ids(
                user_id, limit=settings.user_delete_batch_sessions
            )
            if ids:
                await repo.delete_sessions(user_id, ids)
        if not ids:
            break
        remove_session_dirs(settings, ids)  # after the commit: the rows are gone for good
        sessions += len(ids)
    while True:
        async with transaction(factory) as db:
            deleted = await UserDeletionRepository(db).delete_some(user_id, ROWS_PER_BATCH)
        if not deleted:
            break
    async with transaction(factory) as db:
        gone = await UserDeletionRepository(db).delete_user(user_id)
    log.info("auth.user_deleted", user_id=user_id, sessions=sessions, finished=gone)
    return gone


async def delete_user(runtime: Runtime, user_id: str) -> tuple[str, int]:
    """Mark the user (committed: their tokens stop working, in this process at once),
    delete their data in the background, and wait for it up to USER_DELETE_WAIT_SECONDS:
    `deleted`, or `deleting` with the sessions left (it goes on)."""
    await mark_for_deletion(runtime.session_factory, user_id)
    runtime.principal_cache.drop_user(user_id)
    task = spawn(
        runtime.jobs,
        delete_marked_user(runtime.session_factory, runtime.settings, user_id),
        "auth.user_deletion",
    )
    if runtime.settings.user_delete_wait_seconds > 0:
        await asyncio.wait({task}, timeout=runtime.settings.user_delete_wait_seconds)
    return await deletion_state(runtime.session_factory, user_id)


async def deletion_state(factory: SessionMaker, user_id: str) -> tuple[str, int]:
    """`deleting` (with the sessions left), `deleted` (no such user any more), or
    `active` (not being deleted)."""
    async with transaction(factory) as db:
        repo = UserDeletionRepository(db)
        deleting = await repo.deleting(user_id)
        left = await UserSessionsRepository(db).count(user_id) if deleting else 0
    if deleting is None:
        return "deleted", 0
    return ("deleting" if deleting else "active"), left


async def finish_deletions(runtime: Runtime) -> int:
    """The periodic job: finish the deletions marked more than STALE ago (their runner
    stopped: a restart, a failed statement). How many finished."""
    before = datetime.now(UTC) - STALE
    async with transaction(runtime.session_factory) as db:
        users = await UserDeletionRepository(db).marked_before(before, RESUME_LIMIT)
    done = 0
    for user_id in users:
        log.info("auth.user_deletion_resumed", user_id=user_id)
        done += await delete_marked_user(runtime.session_factory, runtime.settings, user_id)
    return done
