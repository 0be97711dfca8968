# ruff: noqa: E402 (the embedder is settled through the environment before app imports)
"""Embeddings backfill throughput: the loop of main against this one, A/B in one run.

    .venv/bin/python bench/bench_backfill.py [--facts 2000] [--rounds 3]
    .venv/bin/python bench/bench_backfill.py --embedder local   # the in-process ONNX model

Loads `--facts` facts without embeddings into `navi_bench_backfill` (DATABASE_URL, else
the embedded server in bench/.cache/pg), then runs `backfill_embeddings` with no pause in
every variant, the variants taking turns `--rounds` times (the machine is shared: a range
per variant, never one run), and prints facts/s (min–max over the rounds, and the median).

`--embedder fake` (the default) embeds with the fake Ollama (tests/fakes: bag-of-words
vectors computed in Python) twice: in a process of its own (`fake_ollama_process`), as a
real local Ollama is — the realistic figure — and in the bench's process, the method of
the first figures (its Python CPU then competes with the loop measured for the GIL).
`--embedder local` embeds with the in-process ONNX model (EMBEDDING_PROVIDER=local,
384-d, database `navi_bench_backfill_local`): the model's CPU is the floor there.

Variants: `base` is the loop as it was — one worker, vectors sent in pgvector's text
format (a float repr each: `PackedVector` swapped for pgvector's text encoder) — at batch
32; the others are this loop (binary vectors) at batch 8/32/64/128 and 2 or 4 workers.
A row per embedder gives the embedder's own rate (no database), the ceiling of any loop.
With the default pacing (`--pause 2.0`, batches of 8) a run is capped at 4 facts/s by design.
"""

from __future__ import annotations

import sys

from _embedder import embedder_arg, select_embedder

if embedder_arg(sys.argv, "fake") == "local":
    select_embedder(sys.argv)  # 384-d vector columns: before app.config is read

import argparse
import asyncio
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from _app import (
    FakeOllama,
    Settings,
    backfill_embeddings,
    build_gateway,
    configure_logging,
    create_engine,
    get_settings,
    session_factory,
)
from _common import fake_ollama_process, print_table, provision, server_line, step
from pgvector import Vector

# the module itself (not a name of `_app`): `text_vectors` swaps its vector encoder
from app.domain.facts import backfill_repository

USER = "bench-backfill-user"


@dataclass(frozen=True)
class Variant:
    name: str
    batch: int
    concurrency: int = 1
    text_vectors: bool = False  # the write of main: vectors in pgvector's text format


FAKE_VARIANTS = (
    Variant("base (main): batch 32, 1 worker, text vectors", 32, 1, True),
    Variant("batch 32, 1 worker", 32),
    Variant("batch 8, 1 worker", 8),
    Variant("batch 64, 1 worker", 64),
    Variant("batch 128, 1 worker", 128),
    Variant("batch 32, 2 workers", 32, 2),
    Variant("batch 32, 4 workers", 32, 4),
    Variant("batch 128, 2 workers", 128, 2),
)
ALONE = "the embedder alone, batch 32 (texts/s, no database)"
LOCAL_VARIANTS = (
    Variant("base (main): batch 32, 1 worker, text vectors", 32, 1, True),
    Variant("batch 32, 1 worker", 32),
    Variant("batch 32, 2 workers", 32, 2),
)


def reset(conninfo: str, n: int) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO navi_users (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING", (USER, USER)
        )
        conn.execute("DELETE FROM memory_facts WHERE user_id = %s", (USER,))
        conn.execute("VACUUM memory_facts")  # every run starts from the same HNSW graph
        with conn.cursor().copy(
            "COPY memory_facts (user_id, category, key, value) FROM STDIN"
        ) as cp:
            for i in range(n):
                cp.write_row(
                    (USER, f"cat{i % 13}", f"key_{i}", f"value number {i} of the backfill")
                )


@contextmanager
def text_vectors(on: bool) -> Iterator[None]:
    """The write of main: each vector as pgvector's text (a float repr per value)."""
    packed = backfill_repository.PackedVector
    if on:
        backfill_repository.PackedVector = Vector._to_db  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        backfill_repository.PackedVector = packed  # type: ignore[misc]


async def run(target_url: str, settings: Settings, v: Variant) -> float:
    engine = create_engine(target_url)
    llm = build_gateway(settings)
    try:
        await llm.embed(["warm-up"])  # the local model loads once per process
        with text_vectors(v.text_vectors):
            t0 = time.perf_counter()
            result = await backfill_embeddings(
                session_factory(engine), llm, batch_size=v.batch, pause=0, concurrency=v.concurrency
            )
            seconds = time.perf_counter() - t0
        assert result.error is None and result.remaining == 0, result
        return result.embedded / seconds
    finally:
        await llm.aclose()
        await engine.dispose()


async def embedding_alone(settings: Settings, n: int, batch: int = 32) -> float:
    """Texts/s of the embedder by itself (no database): the ceiling of any backfill."""
    llm = build_gateway(settings)
    texts = [f"cat{i % 13} key_{i}: value number {i} of the backfill" for i in range(n)]
    try:
        await llm.embed(["warm-up"])
        t0 = time.perf_counter()
        for start in range(0, n, batch):
            await llm.embed(texts[start : start + batch])
        return n / (time.perf_counter() - t0)
    finally:
        await llm.aclose()


def settings_for(host: str | None) -> Settings:
    extra: dict[str, Any] = {"ollama_host": host} if host else {"embedding_provider": "local"}
    # one request per batch, whatever its size
    return Settings(log_level="warning", embedding_batch_size=128, **extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embedder", choices=("fake", "local"), default="fake")
    args = parser.parse_args()
    configure_logging("warning", False)
    local = args.embedder == "local"
    target = provision("navi_bench_backfill", suffix="_local" if local else "")
    print(server_line(target))
    rates: dict[tuple[str, str], list[float]] = {}
    variants = LOCAL_VARIANTS if local else FAKE_VARIANTS
    fake_proc, proc_url = (None, "") if local else fake_ollama_process(get_settings().vector_dim)
    try:
        with FakeOllama(dim=get_settings().vector_dim) as inline:
            embedders = (
                [("in-process ONNX model", settings_for(None))]
                if local
                else [
                    ("fake Ollama, own process", settings_for(proc_url)),
                    ("fake Ollama, in the bench's process", settings_for(inline.url)),
                ]
            )
            for r in range(args.rounds):
                order = variants if r % 2 == 0 else variants[::-1]  # no variant always first
                for label, settings in embedders:
                    rate = asyncio.run(embedding_alone(settings, args.facts))
                    rates.setdefault((label, ALONE), []).append(rate)
                    step(f"round {r + 1}: {label}, {ALONE}: {rate:.0f} texts/s")
                    for v in order:
                        reset(target.conninfo, args.facts)
                        rate = asyncio.run(run(target.url, settings, v))
                        rates.setdefault((label, v.name), []).append(rate)
                        step(f"round {r + 1}: {label}, {v.name}: {rate:.0f} facts/s")
    finally:
        if fake_proc is not None:
            fake_proc.kill()
            fake_proc.wait()
    rows = []
    for (label, name), xs in rates.items():
        base = statistics.median(rates[(label, variants[0].name)])
        if name == ALONE:
            rows.append(
                [label, name, f"{min(xs):.0f}–{max(xs):.0f}", f"{statistics.median(xs):.0f}", ""]
            )
            continue
        med = statistics.median(xs)
        rows.append(
            [label, name, f"{min(xs):.0f}–{max(xs):.0f}", f"{med:.0f}", f"{med / base:.2f}×"]
        )
    print_table(
        ["embedder", "backfill (pause 0)", "facts/s min–max", "median", "÷ base"],
        rows,
        title=f"backfill of {args.facts} facts, {args.rounds} rounds taking turns, {target.label}",
    )
    print("default pacing (batch 8, pause 2.0 s): at most 4 facts/s by design")


if __name__ == "__main__":
    main()
