"""Shared dependencies: the runtime, and the request's database session (one transaction
per request)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from litestar import Request
from litestar.datastructures import State
from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.replica import MIN_LSN_HEADER, parse_lsn
from app.domain.kernel.commits import commit_now
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.runtime import Runtime
from app.lib.errors import Unprocessable


async def provide_db(runtime: Runtime, request: Request) -> AsyncGenerator[AsyncSession, None]:
    """Committed after the handler returns; rolled back when it raises.

    Services and repositories only flush(); a request commits here, or earlier through
    `commit_now` before a model call (compression, a turn's steps).
    The cleanup runs before the response is sent, so a failed commit is a 500, never a
    2xx for data that was not stored. (With a read replica the session is a
    `WriteTrackingSession`: a commit that wrote is remembered for read-your-writes.)
    """
    async with runtime.session_factory() as session:
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        else:
            await commit_now(session)


async def provide_primary_db(
    runtime: Runtime, request: Request
) -> AsyncGenerator[AsyncSession, None]:
    """`provide_db` under a second name: the primary's session of a READ_ONLY route that
    also writes a little (memory search renewing error-memory hits)."""
    async for session in provide_db(runtime, request):
        yield session


def _user_of(request: Request) -> str | None:
    principal = request.state.get("principal")
    return getattr(principal, "id", None)


async def provide_read_db(runtime: Runtime, request: Request) -> AsyncGenerator[AsyncSession, None]:
    """The session of a read-only endpoint: on the replica when one is configured, usable
    and has replayed the caller's last write (app/db/replica.py decides), else on the
    primary. Never committed (nothing to commit); rolled back on close."""
    async with await _read_session(runtime, request) as session:
        yield session


async def provide_route_read_db(
    runtime: Runtime, request: Request
) -> AsyncGenerator[AsyncSession, None]:
    """`provide_read_db` as a read-only route's `db` (Litestar wants one provider per key)."""
    async with await _read_session(runtime, request) as session:
        yield session


async def provide_route_standalone_read_db(
    runtime: Runtime, request: Request
) -> AsyncGenerator[AsyncSession, None]:
    """`provide_route_read_db` for a read-only route whose statements each stand alone
    (`READ_ONLY_STANDALONE`). Without a replica its session is on the primary in
    autocommit: under READ COMMITTED each statement sees a snapshot of its own inside a
    transaction too, so the answer is the same, without the `BEGIN` and `ROLLBACK` round
    trips around it (two of a page's three). The connection is checked out at the first
    statement, as before (a request refused before it touches no connection); the pool
    restores its isolation level when it is returned (as for `in_own_session`). With a
    replica configured, `provide_route_read_db`'s session as it is (the replica's first
    statement has begun its transaction)."""
    if runtime.replica is not None:
        async with await _read_session(runtime, request) as session:
            yield session
        return
    echoed_lsn(request)  # refused without a replica too, as in _read_session
    async with (runtime.autocommit_sessions or runtime.session_factory)() as session:
        yield session


def echoed_lsn(request: Request) -> int | None:
    """The request's `Navi-Min-LSN`, or None without one; a malformed one is a 422 with
    a replica or without (a client's mistake shows before a replica is added)."""
    header = request.headers.get(MIN_LSN_HEADER)
    echoed = parse_lsn(header)
    if header is not None and echoed is None:
        raise Unprocessable(
            f"Navi-Min-LSN: {header[:40]!r} is not a WAL position (the X/Y of a Navi-Write-LSN)"
        )
    return echoed


async def _read_session(runtime: Runtime, request: Request) -> AsyncSession:
    echoed = echoed_lsn(request)
    router = runtime.replica
    if router is None:
        return runtime.session_factory()
    return await router.read_session(router.min_lsn(_user_of(request), echoed))


#: `dependencies=READ_ONLY` on a read-only route: its `db` is `provide_read_db`'s.
READ_ONLY = {"db": Provide(provide_route_read_db)}
#: `READ_ONLY` for a route that only reads, no statement of which needs a transaction
#: around it (no `SET LOCAL`, no lock, no write), as the session list and history page.
READ_ONLY_STANDALONE = {"db": Provide(provide_route_standalone_read_db)}


def provide_runtime(state: State) -> Runtime:
    """The runtime built at start-up (`app/asgi/lifespan.py`): the one way from the web framework's
    application state into the domain."""
    runtime: Runtime = state.runtime
    return runtime


def provide_settings(runtime: Runtime) -> Settings:
    return runtime.settings


def provide_session_access(db: AsyncSession) -> SessionAccess:
    """The ownership check of every route under /sessions/{id} (kernel/ownership.py)."""
    return SessionAccess(db)
