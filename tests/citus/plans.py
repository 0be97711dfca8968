"""Run recorded statements through Citus' EXPLAIN: does each route to one shard?

Citus' EXPLAIN shows a `Custom Scan (Citus …)` node with `Job → Task Count: N` for
every distributed step (and one per distributed subplan). A statement on user data that
names its user routes to one shard: every task count is 1. More than one task means the
coordinator fans out to several shards — fine for a deliberate admin listing or
background scan (the allow-list), a routing bug anywhere else. Statements on local or
catalog tables show no Citus node at all and pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tests.citus.statement_log import Entry

# The statements EXPLAIN can plan (after leading comments): the app's DML.
_DML = re.compile(
    r"^\s*(?:/\*.*?\*/\s*|--[^\n]*\n\s*)*(select|insert|update|delete|with|merge)\b", re.I | re.S
)


@dataclass
class Verdict:
    statement: str
    callers: list[str]
    task_counts: list[int] = field(default_factory=list)
    error: str | None = None
    allowed_by: str | None = None
    unplanned: str | None = None  # every parameter set was a data error here

    @property
    def multi_shard(self) -> bool:
        return any(n > 1 for n in self.task_counts)

    @property
    def ok(self) -> bool:
        return self.error is None and (not self.multi_shard or self.allowed_by is not None)

    def describe(self) -> str:
        what = self.error or f"task counts {self.task_counts}"
        sql = " ".join(self.statement.split())
        return f"{', '.join(self.callers)}: {what}\n    {sql[:300]}"


def is_dml(statement: str) -> bool:
    return _DML.match(statement) is not None


def task_counts(plan: Any) -> list[int]:
    """Every `Task Count` in an EXPLAIN (FORMAT JSON) plan, outermost first."""
    found: list[int] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key == "Task Count":
                    found.append(int(value))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(plan)
    return found


# What Citus answers to EXPLAIN of a distributed INSERT … SELECT or data-modifying CTE
# with bound parameters: it plans those once the values are known (at execution).
_PLANNED_AT_EXECUTION = "parameters in SQL functions"


def explain(conn: psycopg.Connection, statement: str, params: Any) -> Any:
    """The JSON plan of one statement with its parameters; nothing is executed.

    A statement Citus plans only with its values known is explained with the values
    written into it (psycopg's client-side binding), the plan an execution gets."""
    try:
        return _explain(conn, statement, params, psycopg.Cursor(conn))
    except psycopg.errors.FeatureNotSupported as exc:
        if params is None or _PLANNED_AT_EXECUTION not in str(exc):
            raise
    return _explain(conn, statement, params, psycopg.ClientCursor(conn))


def _explain(conn: psycopg.Connection, statement: str, params: Any, cur: psycopg.Cursor) -> Any:  # type: ignore[type-arg]
    with conn.transaction(force_rollback=True), cur:
        cur.execute("set local statement_timeout = '30s'")
        cur.execute("EXPLAIN (FORMAT JSON) " + statement, _adapt(params))  # type: ignore[arg-type]
        row = cur.fetchone()
    return row[0] if row else None


def _adapt(params: Any) -> Any:
    # SQLAlchemy hands psycopg dicts and lists for JSON columns already wrapped; a
    # recorded plain dict/list value is a JSON document too.
    if isinstance(params, Mapping):
        return {k: Jsonb(v) if isinstance(v, dict) else v for k, v in params.items()}
    return params


def check(
    conn: psycopg.Connection, entries: Iterable[Entry], allowed: Mapping[str, str]
) -> list[Verdict]:
    """A verdict for every recorded DML statement some app code ran.

    `allowed` maps a caller (`path:qualname`) to why its statements may fan out; a
    statement is allowed when every code path that ran it is.
    """
    verdicts: list[Verdict] = []
    for entry in entries:
        if not entry.callers or not is_dml(entry.statement):
            continue
        verdict = Verdict(entry.statement, sorted(entry.callers))
        unfit: list[str] = []
        for params in entry.parameter_sets():
            try:
                plan = explain(conn, entry.statement, params)
            except psycopg.errors.DataException as exc:
                # Parameters recorded against another schema (a test re-typed a vector
                # column): these cannot be planned here, the statement's others may.
                unfit.append(str(exc).strip())
                continue
            except psycopg.Error as exc:
                verdict.error = f"EXPLAIN failed: {type(exc).__name__}: {str(exc).strip()}"
                break
            verdict.task_counts.extend(task_counts(plan))
        if unfit and not verdict.task_counts and verdict.error is None:
            verdict.unplanned = f"no recorded parameters fit the schema: {unfit[0]}"
        reasons = [allowed.get(c) for c in verdict.callers]
        if all(reasons):
            verdict.allowed_by = "; ".join(sorted({r for r in reasons if r}))
        verdicts.append(verdict)
    return verdicts
