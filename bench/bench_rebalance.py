"""A worker joins a Citus cluster, then one is drained and removed, under API load, with
more data than the test's (issue 48, item 2): `make bench-rebalance`.

    .venv/bin/python bench/bench_rebalance.py                              # 200 × 2,000
    .venv/bin/python bench/bench_rebalance.py --seed-users 50 --seed-rows 500   # quicker

The scenario is tests/citus/test_rebalance.py's, run through pytest (root; Citus installed
by scripts/provision-citus.sh): a cluster of its own (coordinator + 2 workers on
5470-5472, made afresh), the app's schema, `--seed-users` users with a session of
`--seed-rows` messages and as many facts each (loaded by SQL: what the moves copy), then
`--users` (12) clients running appends, fact saves, searches, history reads and forgets
against the API while scripts/citus-add-worker.sh adds a third worker (5473) and
rebalances onto it, and scripts/citus-drain-worker.sh drains worker1 and removes it. The
test's checks hold here too (every acknowledged write exactly once, no answer but 2xx
after retried 503s, the placements, the plan check).

Prints the move durations, p50/p99/max per phase (before, during the add, during the
drain), the retried 503s and the errors; `--json` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("before", "add", "between", "drain", "after")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed-users", type=int, default=200)
    ap.add_argument("--seed-rows", type=int, default=2000, help="messages and facts per seed user")
    ap.add_argument("--users", type=int, default=12, help="clients of the load, one user each")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "rebalance.json"
        env = {
            **os.environ,
            "NAVI_REBALANCE_TEST": "1",
            "NAVI_REBALANCE_USERS": str(args.users),
            "NAVI_REBALANCE_SEED_USERS": str(args.seed_users),
            "NAVI_REBALANCE_SEED_ROWS": str(args.seed_rows),
            "NAVI_REBALANCE_REPORT": str(report),
        }
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "tests/citus/test_rebalance.py",
            ],
            cwd=ROOT,
            env=env,
            check=False,
        )
        if not report.exists():
            print("bench-rebalance: the run wrote no figures", file=sys.stderr)
            return run.returncode or 1
        figures = json.loads(report.read_text())

    seed = figures["seed"]
    print(
        f"\n{seed['users']} seed users × {seed['rows']} messages + {seed['rows']} facts"
        f" ({figures['data_mb']} MB in shards, loaded in {figures['seed_s']} s);"
        f" {figures['users']} load clients, {figures['answers']} answers,"
        f" {figures['acknowledged_writes']} acknowledged writes"
    )
    print(
        f"add: script {figures['add_script_s']} s, rebalance job {figures['add_move_s']} s;"
        f" drain + remove: script {figures['drain_script_s']} s, drain job"
        f" {figures['drain_move_s']} s"
    )
    print("\n| phase | requests | p50 ms | p99 ms | max ms (op) | 503 retried | errors |")
    print("|---|---|---|---|---|---|---|")
    for phase in PHASES:
        f = figures[phase]
        print(
            f"| {phase} | {f['requests']} | {f['p50_ms']} | {f['p99_ms']} |"
            f" {f['max_ms']} ({f['slowest']}) | {f['retried_503']} | {f['errors']} |"
        )
    for step in ("add", "drain"):
        f = figures[f"{step}_moved_users"]
        print(
            f"| {step}, the {f['users']} users whose group moved | {f['requests']} | {f['p50_ms']}"
            f" | {f['p99_ms']} | {f['max_ms']} ({f['slowest']}) | {f['retried_503']}"
            f" | {f['errors']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
