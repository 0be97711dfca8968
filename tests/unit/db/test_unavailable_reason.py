"""What counts as "the database is unavailable" (a 503 with Retry-After, never a 500):
the cases `make soak` found answered 500 after `pg_ctl restart -m immediate`."""

from __future__ import annotations

import psycopg
from sqlalchemy import exc as sa_exc

from app.db.faults import unavailable_reason
from app.domain.agents.run import error_event
from app.lib.errors import Conflict, NotFound


def lost_connection() -> sa_exc.OperationalError:
    """As SQLAlchemy raises it: the driver's error as its cause."""
    orig = psycopg.OperationalError("server closed the connection unexpectedly")
    try:
        raise sa_exc.OperationalError("SELECT 1", {}, orig) from orig
    except sa_exc.OperationalError as exc:
        return exc


def test_a_statement_after_a_lost_connection_is_unavailable() -> None:
    # a hook caught the loss; the request's next statement finds the transaction invalid
    err = sa_exc.PendingRollbackError(
        "Can't reconnect until invalid transaction is rolled back.  Please rollback() fully"
    )
    assert unavailable_reason(err) == "the database connection was lost"


def test_another_pending_rollback_is_a_bug() -> None:
    err = sa_exc.PendingRollbackError("This Session's transaction has been rolled back")
    assert unavailable_reason(err) is None


def test_a_turn_that_loses_the_database_answers_503() -> None:
    ev = error_event(lost_connection())
    assert (ev.error, ev.status) == ("unavailable", 503)


def test_a_turn_that_fails_otherwise_is_internal() -> None:
    ev = error_event(ValueError("boom"))
    assert (ev.error, ev.status) == ("internal", 500)


def test_a_turn_refused_midway_answers_its_own_status() -> None:
    # e.g. the session deleted while its turn ran: the step's lookup answers 404, not 500
    ev = error_event(NotFound("session not found"))
    assert (ev.error, ev.status, ev.detail) == ("not_found", 404, "session not found")
    assert error_event(Conflict("busy")).status == 409


def test_a_rollback_pending_after_a_lost_connection_is_unavailable() -> None:
    # a flush the lost connection failed, then the session used again: SQLAlchemy names
    # the first error only in the message
    err = sa_exc.PendingRollbackError(
        "This Session's transaction has been rolled back due to a previous exception "
        "during flush. To begin a new transaction with this Session, first issue "
        "Session.rollback(). Original exception was: (psycopg.OperationalError) "
        "consuming input failed: server closed the connection unexpectedly"
    )
    assert unavailable_reason(err) == "the database connection was lost"
