"""Every statement the app ran in a recorded run routes to one shard on the cluster.

Two steps (.ci/run does both):

    NAVI_STATEMENT_LOG=statements.pickle TEST_CITUS_URL=… pytest tests/integration
    NAVI_STATEMENT_PLANS=statements.pickle TEST_CITUS_URL=… pytest tests/citus/test_statement_plans.py

The second runs each recorded DML statement some app code ran through `EXPLAIN` with its
recorded parameters on a migrated cluster database, and fails on a plan with more than
one task unless the code that ran it is in tests/citus/multi_shard.py's allow-list, and
on a statement the cluster cannot plan at all.
"""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from tests.citus import cluster
from tests.citus.multi_shard import ALLOWED
from tests.citus.plans import check
from tests.citus.statement_log import load

PLANS_ENV = "NAVI_STATEMENT_PLANS"

pytestmark = [
    pytest.mark.citus,
    pytest.mark.skipif(
        cluster.citus_url() is None, reason="needs TEST_CITUS_URL (a Citus coordinator)"
    ),
    pytest.mark.skipif(
        not os.environ.get(PLANS_ENV), reason=f"needs {PLANS_ENV} (a recorded statement log)"
    ),
]


def test_every_recorded_app_statement_routes_to_one_shard(db_url: str) -> None:
    path = Path(os.environ[PLANS_ENV])
    assert path.exists(), (
        f"{path}: no statement log (run the suite with NAVI_STATEMENT_LOG={path} first)"
    )
    entries = load(path)
    with psycopg.connect(cluster.libpq(db_url), autocommit=True) as conn:
        verdicts = check(conn, entries.values(), ALLOWED)
    assert verdicts, "the log holds no DML statement run by app code"
    multi = [v for v in verdicts if v.multi_shard]
    allowed = [v for v in multi if v.ok]
    bad = [v for v in verdicts if not v.ok and v.unplanned is None]
    unplanned = [v for v in verdicts if v.unplanned is not None]
    print(
        f"\n{len(verdicts)} app statements explained: {len(verdicts) - len(multi) - len(unplanned)}"
        f" single-shard or local, {len(allowed)} multi-shard on the allow-list, {len(bad)} refused,"
        f" {len(unplanned)} not plannable with their recorded parameters:"
    )
    for v in unplanned:
        print(f"  {', '.join(v.callers)}: {v.unplanned}")
    assert not bad, "statements that do not route to one shard:\n" + "\n".join(
        v.describe() for v in bad
    )
