"""Bounded database faults: time limits on every statement, and which errors mean "the
database is unavailable" (HTTP 503 `unavailable` with `Retry-After`, never 500).

Three limits (docs/operations.md, "Database faults"):

* connect: libpq's `connect_timeout` (`DB_CONNECT_TIMEOUT_SECONDS`);
* pool checkout: SQLAlchemy's `pool_timeout` (`DB_POOL_TIMEOUT_SECONDS`);
* statement: PostgreSQL's `statement_timeout`, `DB_STATEMENT_TIMEOUT_SECONDS` inside an
  HTTP request (`statement_budget`, set by the request middleware) and
  `DB_JOB_STATEMENT_TIMEOUT_SECONDS` everywhere else (jobs, start-up, CLI). A server
  that does not answer at all (stopped with SIGSTOP, a dead network path) cannot enforce
  its own timeout, so :class:`GuardedConnection` also closes the socket of a connection
  that waited `GUARD_MARGIN` seconds past it: the waiting statement or commit fails at
  once with :class:`DatabaseTimeout`, and the pool replaces the connection.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import psycopg
import structlog
from sqlalchemy import exc as sa_exc

from app.config import Settings

log = structlog.get_logger()

#: Seconds the client-side guard waits past the statement timeout (the server's own
#: timeout answers first whenever the server runs at all).
GUARD_MARGIN = 2.0
#: `Retry-After` of a 503 `unavailable` answer (seconds).
RETRY_AFTER_SECONDS = 5

_budget: ContextVar[float | None] = ContextVar("navi_db_statement_budget", default=None)


@contextmanager
def statement_budget(seconds: float) -> Iterator[None]:
    """Statements run in this context (this task and the tasks it starts) get `seconds`
    of `statement_timeout` instead of the engine's job limit."""
    token = _budget.set(seconds)
    try:
        yield
    finally:
        _budget.reset(token)


def job_budget() -> None:
    """Back to the job limit in the current context (a background task a request started)."""
    _budget.set(None)


@dataclass(frozen=True, slots=True)
class DbTimeouts:
    connect: int
    pool: float
    job_statement: float  # 0 = none
    idle_in_transaction: float = 0.0  # 0 = none

    @classmethod
    def from_settings(cls, s: Settings) -> DbTimeouts:
        return cls(
            connect=s.db_connect_timeout_seconds,
            pool=s.db_pool_timeout_seconds,
            job_statement=s.db_job_statement_timeout_seconds,
            idle_in_transaction=s.db_idle_in_transaction_seconds,
        )

    def statement(self) -> float:
        """The statement limit of the current context (0 = none)."""
        budget = _budget.get()
        return self.job_statement if budget is None else budget

    def statement_ms(self) -> int:
        return int(self.statement() * 1000)

    def guard(self) -> float | None:
        limit = self.statement()
        return limit + GUARD_MARGIN if limit > 0 else None


class DatabaseTimeout(psycopg.OperationalError):
    """The server did not answer within the statement limit plus the guard margin; the
    connection was closed (the pool replaces it)."""


class GuardedConnection(psycopg.AsyncConnection[Any]):
    """psycopg's connection, every wait on the server bounded by the context's limit.

    All I/O of an open connection (execute, fetch, commit, rollback) goes through
    `wait()`. When it outlasts the guard, the socket is shut down: libpq sees the end of
    the stream, the connection becomes broken (SQLAlchemy invalidates it) and the caller
    gets :class:`DatabaseTimeout` at once — psycopg's own cancellation path would first
    spend up to 10 s asking the silent server to cancel."""

    timeouts: DbTimeouts  # set on the per-engine subclass (`guarded_connection_class`)
    _severed_after: float | None = None

    async def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        limit = self.timeouts.guard()
        if limit is None:
            return await super().wait(gen, *args, **kwargs)
        handle = asyncio.get_running_loop().call_later(limit, self._sever, limit)
        try:
            return await super().wait(gen, *args, **kwargs)
        except psycopg.Error as exc:
            if self._severed_after is not None:
                raise DatabaseTimeout(
                    f"no answer from the database within {self._severed_after:g}s; "
                    "connection closed"
                ) from exc
            raise
        finally:
            handle.cancel()

    def _sever(self, limit: float) -> None:
        self._severed_after = limit
        log.warning("db.no_answer", seconds=limit, hint="connection closed; the pool replaces it")
        try:
            dup = socket.socket(fileno=os.dup(self.pgconn.socket))
        except (OSError, psycopg.Error):
            return
        try:
            dup.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            dup.close()


def guarded_connection_class(timeouts: DbTimeouts) -> type[GuardedConnection]:
    return type("NaviConnection", (GuardedConnection,), {"timeouts": timeouts})


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


_LOST = (
    "psycopg.OperationalError",
    "psycopg.InterfaceError",
    "psycopg.errors.QueryCanceled",
    "DatabaseTimeout",
)


def _after_a_lost_connection(message: str) -> bool:
    if "reconnect" in message:
        return True
    _, found, original = message.partition("Original exception was:")
    return bool(found) and any(name in original for name in _LOST)


def unavailable_reason(exc: BaseException) -> str | None:
    """Why `exc` means the database is unavailable (a 503), or None when it does not."""
    for err in _chain(exc):
        if isinstance(err, sa_exc.TimeoutError):
            return "no database connection free in time (pool timeout)"
        if isinstance(err, DatabaseTimeout):
            return "the database did not answer in time"
        if isinstance(err, psycopg.errors.QueryCanceled):
            return "a database statement ran past its time limit"
        if isinstance(err, psycopg.OperationalError | psycopg.InterfaceError):
            return "the database is unreachable or the connection was lost"
        if isinstance(err, sa_exc.DBAPIError) and err.connection_invalidated:
            return "the database connection was lost"
        if isinstance(err, sa_exc.PendingRollbackError) and _after_a_lost_connection(str(err)):
            # a statement after one whose connection died (a hook that caught the loss):
            # "Can't reconnect until invalid transaction is rolled back", or a flush that
            # failed on it ("... Original exception was: (psycopg.OperationalError) ...")
            return "the database connection was lost"
    return None


def describe_db_error(exc: BaseException) -> str:
    """`Type: first line` of the driver's error under `exc`, for the log."""
    inner = exc
    for err in _chain(exc):
        if isinstance(err, psycopg.Error | sa_exc.TimeoutError):
            inner = err
            break
    text = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {text[0][:200]}" if text else type(inner).__name__
