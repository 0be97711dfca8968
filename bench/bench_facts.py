"""`search_facts` at 100k facts over 1k users, against the naive ILIKE scan (issue 4).

    make bench-facts                                   # embedded PostgreSQL, bench/.cache/pg
    DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/navi_bench make bench-facts
    .venv/bin/python bench/bench_facts.py --users 100  # a smaller dataset (its own database)

1. Provisions `navi_bench_facts` (see `_common.provision`) and, unless `bench_facts_dataset`
   says it exists with the same parameters, generates it: 1k users × 100 facts, words from
   a synthetic vocabulary, random 768-d vectors (embedding time is not what is measured),
   loaded with binary COPY with the HNSW and trigram indexes dropped, then rebuilt —
   the HNSW build time is recorded with the dataset and printed on every run.
2. Measures, in the same run, on warm caches, each query on its own transaction:
   - `search_facts` as the service runs it (`FactService.search_facts` with a
     pre-computed query vector): *vector hit* queries (a user's fact vector plus noise:
     answered by the per-user exact vector scan) and *fallback* queries (a random vector:
     no hit within the 0.3 cutoff, so the word search answers);
   - the all-users vector search (admin path, HNSW with iterative scan);
   - the naive way: ILIKE over category/key/value of every fact, any user, newest first
     (a full scan), and the same query with the trigram indexes allowed.
   Prints p50/p95 and the naive/service ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import struct
import time
from dataclasses import asdict, dataclass
from typing import Any

import psycopg
from _app import (
    TRIGRAM_INDEXES,
    FactSearchRepository,
    FactService,
    configure_logging,
    create_engine,
    get_settings,
    query_words,
    session_factory,
)
from _common import (
    Clock,
    Stats,
    Target,
    build_indexes,
    cached_dataset,
    drop_indexes,
    fmt_ms,
    fmt_ratio,
    print_table,
    provision,
    speedup,
    step,
)
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

GEN_VERSION = 1
HNSW_INDEX = "ix_memory_facts_embedding_hnsw"
HNSW_DDL = (
    f"CREATE INDEX {HNSW_INDEX} ON memory_facts USING hnsw (embedding vector_cosine_ops)"
    " WITH (m = 16, ef_construction = 64)"
)
TRGM_DDL = {
    name: f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING gin ({column} gin_trgm_ops)"
    for name, table, column in TRIGRAM_INDEXES
    if table == "memory_facts"
}
CATEGORIES = {
    "preferences": ["editor", "shell", "theme", "language", "font", "browser", "keyboard"],
    "location": ["home_city", "work_city", "timezone", "country", "neighbourhood"],
    "work": ["employer", "role", "team", "manager", "project", "stack"],
    "environment": ["os", "python_version", "node_version", "gpu", "laptop", "distro"],
    "personal": ["first_name", "birthday", "partner", "pet", "hobby", "sport"],
    "projects": ["main_repo", "side_project", "deadline", "ci_system", "database"],
    "routines": ["standup_time", "gym_day", "review_day", "deploy_window"],
    "skills": ["strongest_language", "learning", "certification", "domain"],
}


@dataclass(frozen=True)
class Params:
    users: int
    per_user: int
    dim: int
    seed: int = 7
    version: int = GEN_VERSION


def make_vocabulary(rng: random.Random, n: int = 3000) -> list[str]:
    syllables = ["ka", "to", "ri", "mo", "ne", "sa", "lu", "pe", "zo", "vi", "da", "gor", "lin"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _field(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _vector(rng: random.Random, dim: int) -> bytes:
    # pgvector's binary form: int16 dim, int16 unused, dim × float4 (big-endian).
    components = struct.unpack(f"{dim}b", rng.randbytes(dim))
    return struct.pack(f">hh{dim}f", dim, 0, *components)


def generate(target: Target, p: Params) -> dict[str, Any]:
    rng = random.Random(p.seed)
    vocab = make_vocabulary(rng)
    started = time.perf_counter()
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute("DELETE FROM memory_facts")
        conn.execute("DELETE FROM navi_users WHERE id LIKE 'bench-fact-user-%%'")
        drop_indexes(conn, [HNSW_INDEX, *TRGM_DDL])
        with conn.cursor().copy("COPY navi_users (id, name) FROM STDIN") as copy:
            for u in range(p.users):
                copy.write_row((f"bench-fact-user-{u:05d}", f"bench-fact-user-{u:05d}"))
        step(f"COPY {p.users * p.per_user:,} facts")
        header = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
        cols = "user_id, category, key, value, embedding, source, confidence, updated_at"
        with conn.cursor().copy(f"COPY memory_facts ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(header)
            epoch = 946_684_800  # PostgreSQL timestamps count microseconds from 2000-01-01
            now_pg = int((time.time() - epoch) * 1_000_000)
            for u in range(p.users):
                uid = f"bench-fact-user-{u:05d}".encode()
                seen: set[tuple[str, str]] = set()
                while len(seen) < p.per_user:
                    category = rng.choice(list(CATEGORIES))
                    key = f"{rng.choice(CATEGORIES[category])}_{rng.randint(1, 40)}"
                    if (category, key) in seen:
                        continue
                    seen.add((category, key))
                    value = " ".join(rng.choice(vocab) for _ in range(rng.randint(2, 12)))
                    age_us = rng.randint(0, 400 * 86_400) * 1_000_000
                    row = b"".join(
                        [
                            struct.pack(">h", 8),
                            _field(uid),
                            _field(category.encode()),
                            _field(key.encode()),
                            _field(value.encode()),
                            _field(_vector(rng, p.dim)),
                            _field(rng.choice([b"conversation", b"tool_call", b"user_explicit"])),
                            _field(struct.pack(">i", rng.choice([50, 70, 90, 95]))),
                            _field(struct.pack(">q", now_pg - age_us)),
                        ]
                    )
                    copy.write(row)
            copy.write(struct.pack(">h", -1))
        load_s = time.perf_counter() - started
        step(f"loaded in {load_s:.1f}s; building the HNSW index")
        hnsw_s = build_indexes(conn, {HNSW_INDEX: HNSW_DDL})[HNSW_INDEX]
        trgm_s = sum(build_indexes(conn, TRGM_DDL).values()) if target.pg_trgm else 0.0
        conn.execute("VACUUM ANALYZE memory_facts")
        size = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('memory_facts'))"
        ).fetchone()
        return {
            "facts": p.users * p.per_user,
            "load_s": round(load_s, 1),
            "hnsw_build_s": round(hnsw_s, 1),
            "trgm_build_s": round(trgm_s, 1),
            "table_size": size[0] if size else "?",
        }


def _parse_vector(raw: str) -> list[float]:
    return [float(x) for x in raw.strip("[]").split(",")]


def _noisy(vec: list[float], rng: random.Random, amount: float) -> list[float]:
    scale = max(abs(x) for x in vec) or 1.0
    return [x + rng.uniform(-amount, amount) * scale for x in vec]


def workload(
    target: Target, p: Params, n: int
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(vector-hit queries, fallback queries): (user_id, query text, query vector)."""
    rng = random.Random(1234)
    hits, misses = [], []
    with psycopg.connect(target.conninfo) as conn:
        for i in range(n):
            uid = f"bench-fact-user-{rng.randrange(p.users):05d}"
            rows = conn.execute(
                "SELECT category, key, value, embedding::text FROM memory_facts"
                " WHERE user_id = %s ORDER BY random() LIMIT 2",
                (uid,),
            ).fetchall()
            (c, k, v, emb), other = rows[0], rows[1]
            if i % 2 == 0:
                hits.append((uid, f"{c} {k} {v}", _noisy(_parse_vector(emb), rng, 0.3)))
            else:
                words = other[2].split()
                query = " ".join(rng.sample(words, min(2, len(words))))
                randvec = [rng.uniform(-1, 1) for _ in range(p.dim)]
                misses.append((uid, query, randvec))
    return hits, misses


async def measure(
    factory: async_sessionmaker[AsyncSession],
    hits: list[tuple[Any, ...]],
    misses: list[tuple[Any, ...]],
) -> dict[str, dict[str, Any]]:
    results: dict[str, list[float]] = {
        "vector": [],
        "fallback": [],
        "all_users": [],
        "ilike_indexed": [],
        "naive": [],
    }
    found: dict[str, list[int]] = {k: [] for k in results}
    modes: dict[str, list[str]] = {"vector": [], "fallback": [], "all_users": []}

    async def timed(name: str, coro_fn: Any) -> None:
        async with factory() as db:
            with Clock() as c:
                n, mode = await coro_fn(db)
            results[name].append(c.ms)
            found[name].append(n)
            if name in modes:
                modes[name].append(mode)
            await db.rollback()

    def service(uid: str, q: str, vec: list[float], *, everyone: bool = False) -> Any:
        async def go(db: AsyncSession) -> tuple[int, str]:
            res = await FactService(db).search_facts(
                q, None if everyone else uid, 15, all_users=everyone, query_vector=vec
            )
            return len(res.hits), res.mode

        return go

    def naive(q: str, indexes: bool = False) -> Any:
        async def go(db: AsyncSession) -> tuple[int, str]:
            rows = await FactSearchRepository(db).naive_scan(query_words(q), 15, indexes=indexes)
            return len(rows), "naive"

        return go

    for warm in (True, False):  # one warm-up round over everything, then the measured one
        for uid, q, vec in hits:
            await timed("vector", service(uid, q, vec))
            await timed("all_users", service(uid, q, vec, everyone=True))
        for uid, q, vec in misses:
            await timed("fallback", service(uid, q, vec))
            await timed("naive", naive(q))
            await timed("ilike_indexed", naive(q, indexes=True))
        if warm:
            for k in results:
                results[k].clear()
                found[k].clear()
            for m in modes.values():
                m.clear()
    return {
        name: {
            "stats": Stats.of(samples),
            "avg_hits": sum(found[name]) / max(len(found[name]), 1),
            "modes": {m: modes.get(name, []).count(m) for m in sorted(set(modes.get(name, [])))},
        }
        for name, samples in results.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--per-user", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200, help="half vector hits, half fallback")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the dataset")
    args = parser.parse_args()
    dim = get_settings().vector_dim
    p = Params(users=args.users, per_user=args.per_user, dim=dim)
    suffix = "" if (p.users, p.per_user) == (1000, 100) else f"_{p.users}x{p.per_user}"
    configure_logging("warning", False)
    target = provision("navi_bench_facts", suffix=suffix)
    step(f"server {target.label} ({target.version}), pg_trgm={'yes' if target.pg_trgm else 'no'}")
    stats, reused = cached_dataset(
        target, "bench_facts_dataset", asdict(p), lambda: generate(target, p), args.regenerate
    )
    step(("reusing" if reused else "generated") + f" dataset: {stats}")
    hits, misses = workload(target, p, args.queries)

    async def run() -> dict[str, dict[str, Any]]:
        engine = create_engine(target.url)
        try:
            return await measure(session_factory(engine), hits, misses)
        finally:
            await engine.dispose()

    res = asyncio.run(run())
    naive = res["naive"]["stats"]
    rows = []
    labels = {
        "vector": "search_facts, vector hit (per-user exact scan)",
        "fallback": "search_facts, no vector hit → word search",
        "all_users": "search_facts, all users (HNSW, admin)",
        "ilike_indexed": "ILIKE over all facts, trigram indexes allowed",
        "naive": "naive ILIKE scan over all facts",
    }
    for name in ("vector", "fallback", "all_users", "ilike_indexed", "naive"):
        s: Stats = res[name]["stats"]
        ratio = speedup(naive, s) if name != "naive" else 1.0
        rows.append(
            [
                labels[name],
                s.n,
                fmt_ms(s.p50),
                fmt_ms(s.p95),
                f"{res[name]['avg_hits']:.1f}",
                fmt_ratio(ratio, 1, "x"),
            ]
        )
    print()
    print_table(
        ["query", "n", "p50 ms", "p95 ms", "avg hits", "naive p50 / p50"],
        rows,
        title=(
            f"facts: {stats['facts']:,} over {p.users:,} users, dim {p.dim}, {target.label}, "
            f"pg_trgm={'yes' if target.pg_trgm else 'no'}; HNSW build {stats['hnsw_build_s']}s"
            f"{' (when generated)' if reused else ''}, table {stats['table_size']}"
        ),
    )
    print(
        "answered by: "
        + "; ".join(f"{k}: {res[k]['modes']}" for k in ("vector", "fallback", "all_users"))
    )


if __name__ == "__main__":
    main()
