"""Queries embedded together vs one by one (issue 41): the local MiniLM's query lane.

    .venv/bin/python bench/bench_embed_together.py --threads 4 --queries 60 --rounds 2

`--threads` threads each embed `--queries` short queries, one call per query, as
concurrent searches do; in turn, in the same run, with `_Model.encode_together` (calls
that wait at the same moment share a model run) and without it (each call its own run,
the naive way). Prints the process's CPU per query, queries/s and the ratio. The model
alone: no server, no database (the service-level A/B is `make bench-load`)."""

from __future__ import annotations

import argparse
import threading
import time

from app.llm import local_embedder

QUERIES = [
    "what did I say about the deploy on friday",
    "where does my sister live now",
    "favourite hiking trail near the lake",
    "the budget for the kitchen renovation",
    "when is the dentist appointment",
    "which laptop did I buy last year",
    "book recommendations from Anna",
    "how many plants do I have",
]


def measure(
    embedder: local_embedder.LocalEmbedder, together: bool, threads: int, per: int
) -> tuple[float, float]:
    """(CPU ms per query, queries/s)."""
    local_embedder.TOGETHER_MAX_TEXTS = 8 if together else 0

    def work(k: int) -> None:
        for i in range(per):
            embedder.encode([f"{QUERIES[(i + k) % len(QUERIES)]} {i}"])

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    cpu, wall = time.process_time(), time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    n = threads * per
    return (time.process_time() - cpu) / n * 1000, n / (time.perf_counter() - wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--queries", type=int, default=60, help="per thread")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    embedder = local_embedder.LocalEmbedder()
    embedder.load()
    embedder.encode(QUERIES)  # warm
    rows: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(args.rounds):
        for together in (False, True):
            rows[together].append(measure(embedder, together, args.threads, args.queries))
    print(f"{args.threads} threads × {args.queries} queries, {args.rounds} round(s)")
    print(f"{'way':<12} {'CPU ms/query':>14} {'queries/s':>10}")
    for together, label in ((False, "one by one"), (True, "together")):
        for cpu, qps in rows[together]:
            print(f"{label:<12} {cpu:>14.2f} {qps:>10.0f}")
    cpu = [sum(r[0] for r in rows[t]) / len(rows[t]) for t in (False, True)]
    qps = [sum(r[1] for r in rows[t]) / len(rows[t]) for t in (False, True)]
    print(f"together / one by one: CPU {cpu[1] / cpu[0]:.2f}×, queries/s {qps[1] / qps[0]:.2f}×")


if __name__ == "__main__":
    main()
