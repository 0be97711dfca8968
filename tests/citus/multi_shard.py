"""Statements that may fan out to every shard, on purpose (the plan check's allow-list).

Keyed by the app code that runs them (`path:qualname`, as tests/citus/statement_log.py
attributes a statement), each with why a multi-shard plan is right there: admin
listings across all users, background jobs that scan for work. Everything else on user
data must route to one shard.
"""

from __future__ import annotations

ALLOWED: dict[str, str] = {
    # filled in with the distributed schema (issue 21): admin listings, job scans
}
