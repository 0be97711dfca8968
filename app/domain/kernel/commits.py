"""Work that waits for the request's transaction to commit (dropping cached state the
transaction made stale, waking a job that reads what it wrote): registered on the session
here, run by the request's `db` provider (`kernel/deps.py`) once the commit succeeded,
never when it rolls back."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["after_commit", "commit_now", "run_after_commit"]

_AFTER_COMMIT = "navi.after_commit"


def after_commit(session: AsyncSession, callback: Callable[[], None]) -> None:
    """Run `callback` once the request's transaction has committed; never when it rolls
    back."""
    session.info.setdefault(_AFTER_COMMIT, []).append(callback)


def run_after_commit(session: AsyncSession) -> None:
    """The callbacks `after_commit` registered on `session`, once each (it committed)."""
    for callback in session.info.pop(_AFTER_COMMIT, ()):
        callback()


async def commit_now(session: AsyncSession) -> None:
    """Commit `session`'s transaction now and run its after-commit work: what follows
    (a model call: a compression's summary, an embedding) then runs with no transaction,
    row lock or pooled connection held. The next statement on `session` begins a new
    transaction, committed as usual by whoever owns the session."""
    await session.commit()
    run_after_commit(session)
