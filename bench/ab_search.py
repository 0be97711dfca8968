"""A/B of `memory_search` between two checkouts, on bench-search's dataset, taking turns.

    git worktree add /tmp/base HEAD~1
    DATABASE_URL=postgresql+psycopg://… .venv/bin/python bench/ab_search.py /tmp/base .
    .venv/bin/python bench/ab_search.py /tmp/base . --queries 300 --rounds 2 --size 100000

This machine's speed drifts by 10–30 % over minutes, so two bench-search runs one after
the other compare the machine as much as the code. Here each checkout runs in a process
of its own (its own `app` package, engine and pool), both build the same queries and
warm up, then they take turns every `--block` queries, the order swapped each block, so
drift falls on both alike. Printed per checkout: the unified search (scope `all`, as
`bench_search.py` runs it) p50/p95 and its Python CPU time, `search_raw` alone, the
unified p50/p95 by the user's history size, and how many response texts are the same as
the first checkout's (a change meant to be faster only should say all of them).
`--fresh` warms up on other queries than the measured ones (what the search remembers
between searches then comes from those; with `--rounds 2` the second round repeats the
first's queries).
The dataset must exist (`make bench-search ARGS="--sizes N --generate-only"`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SIZES = ((0, 300), (300, 1000), (1000, 3000), (3000, 10**9))


def worker(size: int, queries: int, fresh: bool) -> None:
    """One checkout's side (run with that checkout first on sys.path): answers
    `start end` lines on stdin with a JSON list of [history size, unified ms, CPU ms,
    raw ms, text] per query."""
    # Everything of the checkout's own (its app, its harness) through its bench_search,
    # which imports these names in every version: this file may be newer than the checkout.
    import bench_search as bs

    async def run() -> None:
        bs.configure_logging("warning", False)
        target = bs.provision("navi_bench_search", suffix=f"_{size // 1000}k")
        p = bs.Params(chunks=size)
        qs = bs.make_queries(target, p, queries)
        sizes = bs.user_sizes(p.chunks, p.users)
        settings = bs.get_settings()
        engine = bs.create_engine(target.url, settings)
        factory = bs.session_factory(engine)
        llm = bs.StubLLM()
        bs.freeze_startup_heap()

        async def unified(q: Any) -> str:
            llm.vector = q.vector
            async with bs.transaction(factory) as db:
                search = bs.unified_search(db, llm, settings, factory)
                return (await search.search(q.text, user_id=q.user_id, scope="all", k=5)).text

        async def raw(q: Any) -> None:
            llm.vector = q.vector
            async with bs.transaction(factory) as db:
                await bs.search_raw(db, llm, q.user_id, q.text, 5, side_sessions=factory)

        # warm-up: the same queries, or (`--fresh`) as many others, so that what the
        # search remembers between searches is not what the measured queries ask
        for q in bs.make_queries(target, p, queries, seed=11) if fresh else qs:
            await unified(q)
            await raw(q)
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
            a, b = map(int, line.split())
            out = []
            for q in qs[a:b]:
                t, c = time.perf_counter(), time.process_time()
                text = await unified(q)
                ms, cpu = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
                t = time.perf_counter()
                await raw(q)
                out.append(
                    [sizes[int(q.user_id[-4:])], ms, cpu, (time.perf_counter() - t) * 1000, text]
                )
            print(json.dumps(out), flush=True)
        await engine.dispose()

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkouts", nargs=2, help="two directories holding the project")
    parser.add_argument("--size", type=int, default=100_000, help="the dataset's chunks")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument(
        "--fresh", action="store_true", help="warm up on other queries than those measured"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        root = Path(args.worker).resolve()
        sys.path[:0] = [str(root), str(root / "bench")]
        worker(args.size, args.queries, args.fresh)
        return
    # here: a worker imports its own checkout's _common
    from _common import percentile, server_url

    env = {**os.environ, "PYTHONPATH": ""}
    if not env.get("DATABASE_URL", "").strip():
        # both sides on one server: this checkout's embedded one (each checkout's own
        # bench/.cache/pg would hold a dataset of its own, or none)
        env["DATABASE_URL"] = server_url()
    roots = [str(Path(c).resolve()) for c in args.checkouts]
    cmd = [sys.executable, __file__, *args.checkouts, "--size", str(args.size)]
    cmd += ["--fresh"] if args.fresh else []
    procs = {
        r: subprocess.Popen(
            [*cmd, "--queries", str(args.queries), "--worker", r],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in roots
    }
    for r, p in procs.items():
        while not (line := p.stdout.readline()).startswith("ready"):  # type: ignore[union-attr]
            if not line:
                raise SystemExit(f"{r}: the worker stopped before it was ready")
    res: dict[str, list[list[Any]]] = {r: [] for r in roots}
    for rnd in range(args.rounds):
        for i, a in enumerate(range(0, args.queries, args.block)):
            for r in roots if (i + rnd) % 2 == 0 else roots[::-1]:
                p = procs[r]
                p.stdin.write(f"{a} {min(a + args.block, args.queries)}\n")  # type: ignore[union-attr]
                p.stdin.flush()  # type: ignore[union-attr]
                res[r].extend(json.loads(p.stdout.readline()))  # type: ignore[union-attr]
    for p in procs.values():
        p.stdin.write("\n")  # type: ignore[union-attr]
        p.stdin.flush()  # type: ignore[union-attr]
        p.wait()
    print(f"memory_search A/B, {args.size:,} chunks, {len(res[roots[0]])} searches each (ms)")
    for r, rows in res.items():
        ms = [x[1] for x in rows]
        line = (
            f"{r}\n  unified p50 {percentile(ms, 50):.1f} p95 {percentile(ms, 95):.1f} | Python CPU p50"
            f" {percentile([x[2] for x in rows], 50):.1f} | raw p50 {percentile([x[3] for x in rows], 50):.1f}"
            f" p95 {percentile([x[3] for x in rows], 95):.1f} | by history size:"
        )
        for lo, hi in SIZES:
            part = [x[1] for x in rows if lo <= x[0] < hi]
            line += f" {lo}+ {percentile(part, 50):.1f}/{percentile(part, 95):.1f}"
        print(line)
    first = res[roots[0]]
    same = sum(x[4] == y[4] for x, y in zip(first, res[roots[1]], strict=True))
    print(f"same response text as the first: {same}/{len(first)}")


if __name__ == "__main__":
    main()
