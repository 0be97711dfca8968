"""Embeddings backfill throughput against the fake Ollama server (issue 4).

    .venv/bin/python bench/bench_backfill.py [--facts 2000]

Loads `--facts` facts without embeddings into `navi_bench_backfill` (DATABASE_URL, else
the embedded server in bench/.cache/pg), then runs `backfill_embeddings` with no pause at
a few batch sizes, and two runs at once, printing facts/s. The fake computes its
bag-of-words vectors in Python, so the figures say what the backfill loop costs around
the embedding call (claim, write, commit per batch), not what a real model costs. With
the default pacing (`--pause 2.0`, batches of 8) the rate is capped at 4 facts/s by design.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import psycopg
from _app import (
    FakeOllama,
    Settings,
    backfill_embeddings,
    build_gateway,
    configure_logging,
    create_engine,
    session_factory,
)
from _common import print_table, provision

USER = "bench-backfill-user"


def reset(conninfo: str, n: int) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO navi_users (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING", (USER, USER)
        )
        conn.execute("DELETE FROM memory_facts WHERE user_id = %s", (USER,))
        with conn.cursor().copy(
            "COPY memory_facts (user_id, category, key, value) FROM STDIN"
        ) as cp:
            for i in range(n):
                cp.write_row(
                    (USER, f"cat{i % 13}", f"key_{i}", f"value number {i} of the backfill")
                )


async def run(target_url: str, settings: Settings, batch: int, runs: int) -> float:
    engine = create_engine(target_url)
    gateways = [build_gateway(settings) for _ in range(runs)]
    try:
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(
                backfill_embeddings(session_factory(engine), gw, batch_size=batch, pause=0)
                for gw in gateways
            )
        )
        seconds = time.perf_counter() - t0
        done = sum(r.embedded for r in results)
        assert all(r.error is None for r in results), [r.error for r in results]
        return done / seconds
    finally:
        for gw in gateways:
            await gw.aclose()
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", type=int, default=2000)
    args = parser.parse_args()
    configure_logging("warning", False)
    target = provision("navi_bench_backfill")
    rows = []
    with FakeOllama() as fake:
        settings = Settings(ollama_host=fake.url, log_level="warning")
        for batch, runs in ((8, 1), (32, 1), (8, 2)):
            reset(target.conninfo, args.facts)
            rate = asyncio.run(run(target.url, settings, batch, runs))
            rows.append([f"batch {batch}, {runs} run(s) at once", args.facts, f"{rate:.0f}"])
    print_table(
        ["backfill (pause 0)", "facts", "facts/s"],
        rows,
        title=f"backfill against the fake Ollama, {target.label}",
    )
    print("default pacing (batch 8, pause 2.0 s): at most 4 facts/s by design")


if __name__ == "__main__":
    main()
