"""`memory_search` at scale: 100k raw chunks (+ their segment vectors) and 100k facts.

    make bench-search                                   # 100k, then 300k chunks
    .venv/bin/python bench/bench_search.py --sizes 100000 --queries 300
    DATABASE_URL=postgresql+psycopg://… make bench-search

For each size (one database per size, `navi_bench_search_<n>`; generated once and reused
while the parameters stay the same — `--regenerate` forces it):

* **data**: `n` chunks of ~4,000 chars (~400 MB of text at 100k) — lines of
  `User:` / `Assistant:` / `Tool result (shell):` over a 30k-word synthetic vocabulary with
  a Zipf distribution, plus paths, numbers and identifiers — over 200 users with a skewed
  activity (the heaviest holds ~10 % of all chunks), every one demoted history with
  breadcrumbs and one vector per segment (`memory_chunk_vectors`, ~5 per chunk; 384-d,
  random: embedding time is not measured); 100k facts over 1k users.
  Loaded with COPY with the indexes dropped, then indexed (`INDEXES`: the text GIN on
  user-keyed lexemes, one HNSW graph per user bucket for the segments, the facts' HNSW);
  the build times and the `maintenance_work_mem` they ran with are recorded with the
  dataset and printed. A reused dataset is migrated to head first, with the same
  `maintenance_work_mem` (PGOPTIONS); the migration's time is printed.
* **queries**: users drawn by activity; a query names 2–4 words of one of the user's
  lines (rare and common) in a question; its vector (precomputed: the embedding model
  is stubbed out, so its time is excluded) is the line's segment vector plus noise for
  half of the queries and a random vector for the rest.
* **measured** after `freeze_startup_heap()` (as the service does once started), each
  query in its own transaction on warm caches: the unified search as
  the API runs it (`UnifiedSearch.search`, scope `all`: facts + sketches on a second
  connection while raw runs on the request's), the same with every store on one
  connection, raw only (`search_raw`), and the naive way measured in the same run: the seed's chunk
  search as a sequential scan (exact vector distance over the user's segment vectors —
  chunks have no vector of their own since migration d41c7e9b2f68 —, then `ILIKE` on
  their content — index scans disabled). p50/p95 and the ratio.

No server is started and no job runs: the searches are measured in this process, on SQL
(the query embedding stubbed out), so the periodic jobs and the indexer of `make run`
(issue 41) have no part in these figures; `--no-jobs` of bench-load and bench-freshness
does not apply here.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The benchmark's vectors are 384-d (the local embedder's): settle it before app imports.
os.environ["EMBEDDING_PROVIDER"] = "local"
os.environ.pop("EMBEDDING_DIM", None)

import numpy as np  # noqa: E402
import psycopg  # noqa: E402

# ab_search.py takes these names from this module (of each checkout it compares): keep them
from _app import (  # noqa: E402
    SEGMENT_BUCKETS,
    configure_logging,
    contains_pattern,
    create_engine,
    freeze_startup_heap,
    get_settings,
    query_terms,
    search_raw,
    segment_spans,
    session_factory,
    transaction,
    unified_search,
)
from _common import (  # noqa: E402
    Clock,
    Stats,
    Target,
    build_indexes,
    cached_dataset,
    drop_indexes,
    fmt_ms,
    fmt_ratio,
    loadavg,
    print_table,
    provision,
    speedup,
    step,
)
from pgvector.psycopg import register_vector  # noqa: E402

GEN_VERSION = 1
DIM = 384
CHUNK_USERS = 200
FACT_USERS = 1000
FACTS = 100_000
MAINTENANCE_WORK_MEM = "4GB"
INDEXES = {  # dropped before COPY, built after (name → definition)
    "ix_memory_chunks_user_terms": "CREATE INDEX ix_memory_chunks_user_terms ON memory_chunks "
    "USING gin (search_terms)",
    **{  # one graph per user bucket (migration 2026_12_01_0800)
        f"ix_memory_chunk_vectors_hnsw_b{n:02d}": f"CREATE INDEX ix_memory_chunk_vectors_hnsw_b{n:02d}"
        " ON memory_chunk_vectors USING hnsw (embedding vector_cosine_ops) WITH (m = 16,"
        f" ef_construction = 64) WHERE navi_user_bucket(user_id) = {n}"
        for n in range(SEGMENT_BUCKETS)
    },
    "ix_memory_facts_embedding_hnsw": "CREATE INDEX ix_memory_facts_embedding_hnsw ON "
    "memory_facts USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
}
SEG_FK = "fk_memory_chunk_vectors_chunk_id_memory_chunks"
USER = "bench-search-user-{:04d}"
SYLLABLES = "ka to ri mo ne sa lu pe zo vi da gor lin tar bes qui fen dro".split()
PREFIX = ["User: ", "Assistant: ", "Tool result (shell): "]
EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Params:
    chunks: int
    users: int = CHUNK_USERS
    facts: int = FACTS
    fact_users: int = FACT_USERS
    dim: int = DIM
    seed: int = 5
    version: int = GEN_VERSION


# ------------------------------------------------------------------ generation
class TextGen:
    def __init__(self, rng: np.random.Generator, vocab_size: int = 30_000) -> None:
        py = random.Random(int(rng.integers(1 << 30)))
        words: set[str] = set()
        while len(words) < vocab_size:
            words.add("".join(py.choice(SYLLABLES) for _ in range(py.randint(2, 4))))
        self.vocab = sorted(words)
        py.shuffle(self.vocab)  # rank order independent of spelling
        weights = 1.0 / np.arange(1, vocab_size + 1) ** 1.07
        self.cdf = np.cumsum(weights / weights.sum())
        self.rng = rng
        self.py = py

    def chunk(self, target: int = 4000) -> tuple[str, list[str]]:
        ids = np.searchsorted(self.cdf, self.rng.random(900))
        words = [self.vocab[i] for i in ids]
        lines: list[str] = []
        size, pos = 0, 0
        crumbs: list[str] = []
        while size < target - 200 and pos < len(words) - 40:
            n = self.py.randint(8, 38)
            body = words[pos : pos + n]
            pos += n
            if self.py.random() < 0.3:
                lit = self._literal()
                body.insert(self.py.randint(0, len(body)), lit)
                crumbs.append(lit)
            line = self.py.choice(PREFIX) + " ".join(body)
            lines.append(line)
            size += len(line) + 2
        return "\n\n".join(lines), crumbs[:8]

    def _literal(self) -> str:
        kind = self.py.randint(0, 3)
        w = self.vocab[self.py.randint(0, 5000)]
        if kind == 0:
            return f"/srv/{w}/{self.vocab[self.py.randint(0, 5000)]}.conf"
        if kind == 1:
            return str(self.py.randint(1000, 65000))
        if kind == 2:
            return f"{w}_{self.vocab[self.py.randint(0, 5000)]}"
        return f"#{self.py.randint(100, 99999)}"


def user_sizes(n: int, users: int) -> list[int]:
    weights = [1.0 / (r + 1) ** 0.8 for r in range(users)]
    total = sum(weights)
    sizes = [max(1, int(n * w / total)) for w in weights]
    sizes[0] += n - sum(sizes)
    return sizes


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def generate(
    target: Target,
    p: Params,
    indexes: dict[str, str] = INDEXES,
    builder: Callable[[psycopg.Connection[Any], dict[str, str], str], dict[str, float]] = (
        build_indexes
    ),
) -> dict[str, Any]:
    """`indexes`: those dropped before the COPY and built after (by `builder`); another
    schema than the single server's (a Citus cluster's) has other ones (bench_scale)."""
    rng = np.random.default_rng(p.seed)
    gen = TextGen(rng)
    started = time.perf_counter()
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        register_vector(conn)
        drop_indexes(conn, indexes)
        conn.execute("TRUNCATE memory_chunk_vectors, memory_chunks, memory_facts CASCADE")
        conn.execute("DELETE FROM navi_users WHERE id LIKE 'bench-search-user-%%'")
        with conn.cursor().copy("COPY navi_users (id, name) FROM STDIN") as copy:
            for u in range(max(p.users, p.fact_users)):
                copy.write_row((USER.format(u), USER.format(u)))
        step(f"COPY {p.chunks:,} chunks and their segment vectors")
        chunk_cols = (
            "id, user_id, session_id, content, content_hash, start_seq, end_seq, started_at, "
            "ended_at, breadcrumbs"
        )
        seg_cols = "chunk_id, part, user_id, session_id, start_char, end_char, embedding"
        n_segments = 0
        text_bytes = 0
        sizes = user_sizes(p.chunks, p.users)
        # One COPY per connection: the segments go through a second one, so their foreign
        # key (to chunks the first COPY has not committed yet) is dropped during the load.
        conn.execute(f"ALTER TABLE memory_chunk_vectors DROP CONSTRAINT IF EXISTS {SEG_FK}")
        conn2 = psycopg.connect(target.conninfo, autocommit=True)
        register_vector(conn2)
        with (
            conn2,
            conn.cursor() as c1,
            conn2.cursor() as c2,
            c1.copy(f"COPY memory_chunks ({chunk_cols}) FROM STDIN (FORMAT BINARY)") as chunks,
        ):
            chunks.set_types(
                ["uuid", "text", "uuid", "text", "varchar", "int8", "int8", "timestamptz",
                 "timestamptz", "text[]"]
            )  # fmt: skip
            segs_rows: list[tuple[Any, ...]] = []
            done = 0
            for u, size in enumerate(sizes):
                uid = USER.format(u)
                sessions = [uuid.uuid4() for _ in range(max(1, size // 40))]
                # drawn and unused since chunks lost their own vector: the random stream,
                # and so the generated dataset, stays that of earlier runs
                unit_vectors(rng, size, p.dim)
                for i in range(size):
                    content, crumbs = gen.chunk()
                    text_bytes += len(content)
                    cid = uuid.uuid4()
                    sid = sessions[i % len(sessions)]
                    ended = EPOCH - timedelta(minutes=int(rng.integers(0, 400 * 1440)))
                    chunks.write_row(
                        (cid, uid, sid, content, hashlib.sha256(content.encode()).hexdigest(),
                         i * 20, i * 20 + 19, ended - timedelta(minutes=30), ended, crumbs)
                    )  # fmt: skip
                    spans = segment_spans(content)
                    svecs = unit_vectors(rng, len(spans), p.dim)
                    for n, ((a, b), v) in enumerate(zip(spans, svecs, strict=True)):
                        segs_rows.append((cid, n, uid, sid, a, b, v))
                    n_segments += len(spans)
                    done += 1
                    if len(segs_rows) >= 20_000:
                        _copy_segments(c2, seg_cols, segs_rows)
                        segs_rows.clear()
                    if done % 20_000 == 0:
                        step(f"  {done:,} chunks ({time.perf_counter() - started:.0f} s)")
            _copy_segments(c2, seg_cols, segs_rows)
        conn.execute(
            f"ALTER TABLE memory_chunk_vectors ADD CONSTRAINT {SEG_FK}"
            " FOREIGN KEY (chunk_id, user_id) REFERENCES memory_chunks (id, user_id)"
            " ON DELETE CASCADE"
        )
        # the app keeps the counts as it writes chunks; a COPY must set them itself
        conn.execute("DELETE FROM memory_chunk_counts")
        conn.execute(
            "INSERT INTO memory_chunk_counts (user_id, chunks, version) SELECT user_id,"
            " count(*), nextval('navi_chunk_count_versions') FROM memory_chunks GROUP BY user_id"
        )
        step(f"COPY {p.facts:,} facts over {p.fact_users:,} users")
        facts_cols = "user_id, category, key, value, embedding, source, confidence, updated_at"
        with conn.cursor().copy(
            f"COPY memory_facts ({facts_cols}) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(
                ["text", "varchar", "varchar", "text", "vector", "varchar", "int4", "timestamptz"]
            )
            per_user = p.facts // p.fact_users
            fvecs = unit_vectors(rng, p.facts, p.dim)
            n = 0
            for u in range(p.fact_users):
                for j in range(per_user):
                    value = " ".join(
                        gen.vocab[int(i)] for i in np.searchsorted(gen.cdf, rng.random(6))
                    )
                    copy.write_row(
                        (USER.format(u), f"cat{j % 8}", f"key_{j}", value, fvecs[n],
                         "conversation", 70, EPOCH - timedelta(days=int(rng.integers(0, 400))))
                    )  # fmt: skip
                    n += 1
        load_s = time.perf_counter() - started
        step(
            f"loaded in {load_s:.0f} s; building indexes (maintenance_work_mem {MAINTENANCE_WORK_MEM})"
        )
        builds = builder(conn, indexes, MAINTENANCE_WORK_MEM)
        conn.execute("VACUUM ANALYZE memory_chunks")
        conn.execute("VACUUM ANALYZE memory_chunk_vectors")
        conn.execute("VACUUM ANALYZE memory_facts")
        sizes_row = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('memory_chunks')),"
            " pg_size_pretty(pg_total_relation_size('memory_chunk_vectors')),"
            " pg_size_pretty(pg_total_relation_size('memory_facts'))"
        ).fetchone()
        assert sizes_row is not None
        return {
            "chunks": p.chunks,
            "segments": n_segments,
            "text_mb": round(text_bytes / 1e6),
            "heaviest_user_chunks": sizes[0],
            "load_s": round(load_s),
            "index_build_s": builds,
            "maintenance_work_mem": MAINTENANCE_WORK_MEM,
            "sizes": {
                "memory_chunks": sizes_row[0],
                "memory_chunk_vectors": sizes_row[1],
                "memory_facts": sizes_row[2],
            },
        }


def _copy_segments(cur: Any, cols: str, rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    with cur.copy(f"COPY memory_chunk_vectors ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["uuid", "int4", "text", "uuid", "int4", "int4", "vector"])
        for row in rows:
            copy.write_row(row)


def ensure_dataset(target: Target, p: Params, regenerate: bool) -> tuple[dict[str, Any], bool]:
    """(stats, reused)."""
    build = lambda: generate(target, p)  # noqa: E731
    return cached_dataset(target, "bench_search_dataset", asdict(p), build, regenerate)


# ------------------------------------------------------------------ queries
@dataclass(frozen=True)
class Query:
    user_id: str
    text: str
    vector: list[float]
    kind: str  # "vector" (the line's segment vector + noise) or "text" (random vector)
    heavy: bool


def make_queries(target: Target, p: Params, n: int, seed: int = 3) -> list[Query]:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    sizes = user_sizes(p.chunks, p.users)
    users = rng.choices(range(p.users), weights=sizes, k=n)
    out = []
    with psycopg.connect(target.conninfo) as conn:
        register_vector(conn)
        for i, u in enumerate(users):
            uid = USER.format(u)
            row = conn.execute(
                "SELECT id, content FROM memory_chunks WHERE user_id = %s OFFSET %s LIMIT 1",
                (uid, rng.randrange(sizes[u])),
            ).fetchone()
            assert row is not None
            cid, content = row
            lines = [ln for ln in content.split("\n") if ln.strip()]
            line = rng.choice(lines)
            words = [
                w
                for w in query_terms(line)
                if w not in ("user", "assistant", "tool", "result", "shell")
            ]
            picked = rng.sample(words, min(len(words), rng.randint(2, 4)))
            text = f"what did we say about {' '.join(picked)}?"
            kind = "vector" if i % 2 == 0 else "text"
            if kind == "vector":
                start = content.index(line)
                seg = conn.execute(
                    "SELECT embedding FROM memory_chunk_vectors WHERE chunk_id = %s"
                    " AND start_char <= %s ORDER BY start_char DESC LIMIT 1",
                    (cid, start),
                ).fetchone()
                assert seg is not None
                stored = seg[0].to_numpy() if hasattr(seg[0], "to_numpy") else seg[0]
                v = np.asarray(stored, dtype=np.float32) + nrng.normal(0, 0.02, p.dim).astype(
                    np.float32
                )
            else:
                v = unit_vectors(nrng, 1, p.dim)[0]
            v = v / np.linalg.norm(v)
            out.append(Query(uid, text, [float(x) for x in v], kind, u == 0))
    return out


class StubLLM:
    """Returns the precomputed vector of the current query: embedding time is excluded."""

    def __init__(self) -> None:
        self.vector: list[float] = []
        self.embed_dim = DIM

    async def embed(self, texts: Any) -> list[list[float]]:
        return [self.vector for _ in texts]

    async def embed_one(self, text: str) -> list[float]:
        return self.vector


NAIVE_VECTOR = (
    "SELECT chunk_id FROM memory_chunk_vectors WHERE user_id = %s"
    " ORDER BY embedding <=> %s::vector LIMIT 5"
)
NAIVE_TEXT = (
    "SELECT id FROM memory_chunks WHERE user_id = %s AND (content ILIKE ANY(%s)"
    " OR array_to_string(breadcrumbs, ' ') ILIKE ANY(%s)) ORDER BY ended_at DESC LIMIT 5"
)


async def measure(target: Target, queries: list[Query], naive_n: int) -> dict[str, list[float]]:
    settings = get_settings()
    engine = create_engine(target.url, settings)
    factory = session_factory(engine)
    llm = StubLLM()
    out: dict[str, list[float]] = {
        k: []
        for k in (
            "unified",
            "unified_1conn",
            "raw",
            "unified_heavy",
            "unified_vector",
            "unified_text",
        )
    }
    hits = 0
    freeze_startup_heap()  # as the service does once started (app/lib/runtime.py)
    try:
        for rnd in range(2):  # a warm-up pass, then the measured one
            for q in queries:
                llm.vector = q.vector
                with Clock() as uni:
                    async with transaction(factory) as db:
                        res = await unified_search(db, llm, settings, factory).search(  # type: ignore[arg-type]
                            q.text, user_id=q.user_id, scope="all", k=5
                        )
                with Clock() as one:
                    async with transaction(factory) as db:  # every store on the one connection
                        await unified_search(db, llm, settings).search(  # type: ignore[arg-type]
                            q.text, user_id=q.user_id, scope="all", k=5
                        )
                with Clock() as raw:
                    async with transaction(factory) as db:
                        await search_raw(db, llm, q.user_id, q.text, 5, side_sessions=factory)  # type: ignore[arg-type]
                ms, one_ms, raw_ms = uni.ms, one.ms, raw.ms
                if rnd == 1:
                    out["unified"].append(ms)
                    out["unified_1conn"].append(one_ms)
                    out["raw"].append(raw_ms)
                    out[f"unified_{q.kind}"].append(ms)
                    if q.heavy:
                        out["unified_heavy"].append(ms)
                    hits += any(h.source_type == "raw" for h in res.hits)
    finally:
        await engine.dispose()
    out["naive"] = naive(target, queries[:naive_n])
    out["raw_hits"] = [hits / max(len(queries), 1)]
    return out


def naive(target: Target, queries: list[Query]) -> list[float]:
    """The seed's chunk search as a sequential scan (index scans off)."""
    times = []
    with psycopg.connect(target.conninfo) as conn:
        for q in queries:
            pats = [contains_pattern(t) for t in query_terms(q.text)]
            vec = "[" + ",".join(f"{x:.6f}" for x in q.vector) + "]"
            with Clock() as c, conn.transaction():
                conn.execute("SET LOCAL enable_indexscan = off")
                conn.execute("SET LOCAL enable_bitmapscan = off")
                conn.execute("SET LOCAL enable_indexonlyscan = off")
                conn.execute(NAIVE_VECTOR, (q.user_id, vec)).fetchall()
                conn.execute(NAIVE_TEXT, (q.user_id, pats, pats)).fetchall()
            times.append(c.ms)
    return times


def build_summary(builds: dict[str, float]) -> str:
    """`name N s, …`, the per-bucket segment graphs summed into one entry."""
    out: dict[str, float] = {}
    for name, secs in builds.items():
        if name.startswith("ix_memory_chunk_vectors_hnsw_b"):
            name = f"ix_memory_chunk_vectors_hnsw_b00…b{SEGMENT_BUCKETS - 1:02d} (sum)"
        out[name] = out.get(name, 0.0) + secs
    return ", ".join(f"{k} {v:.0f} s" for k, v in out.items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,300000", help="chunk counts, comma-separated")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--naive", type=int, default=20, help="naive (seq scan) queries")
    parser.add_argument("--facts", type=int, default=FACTS, help="facts over 1k users")
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument(
        "--generate-only", action="store_true", help="build the datasets, measure nothing"
    )
    args = parser.parse_args(argv)
    configure_logging("warning", False)
    rows = []
    notes = []
    # A reused dataset is migrated to head by `provision`: its index builds get the same
    # maintenance_work_mem as the generator's (through libpq's PGOPTIONS).
    os.environ["PGOPTIONS"] = (
        os.environ.get("PGOPTIONS", "") + f" -c maintenance_work_mem={MAINTENANCE_WORK_MEM}"
    ).strip()
    for n in [int(x) for x in args.sizes.split(",") if x.strip()]:
        p = Params(chunks=n, facts=args.facts)
        t0 = time.perf_counter()
        target = provision("navi_bench_search", suffix=f"_{n // 1000}k")
        migrate_s = time.perf_counter() - t0
        if migrate_s > 5:
            step(f"{n:,} chunks: migrated to head in {migrate_s:.0f} s")
        t0 = time.perf_counter()
        stats, reused = ensure_dataset(target, p, args.regenerate)
        step(
            f"{n:,} chunks: dataset {'reused' if reused else 'generated'} ({time.perf_counter() - t0:.0f} s)"
        )
        if args.generate_only:
            continue
        queries = make_queries(target, p, args.queries)
        res = asyncio.run(measure(target, queries, args.naive))
        uni, raw, nv = Stats.of(res["unified"]), Stats.of(res["raw"]), Stats.of(res["naive"])
        heavy = Stats.of(res["unified_heavy"])
        rows.append(
            [
                f"{n:,}",
                f"{stats['segments']:,}",
                fmt_ms(uni.p50),
                fmt_ms(uni.p95),
                fmt_ms(raw.p50),
                fmt_ms(raw.p95),
                f"{fmt_ms(heavy.p95)} (n={heavy.n})",
                fmt_ms(nv.p50),
                fmt_ms(nv.p95),
                fmt_ratio(speedup(nv, uni), 0),
            ]
        )
        builds = stats["index_build_s"]
        notes.append(
            f"{n:,} chunks ({stats['text_mb']} MB of text, heaviest user {stats['heaviest_user_chunks']:,}"
            f" chunks; memory_chunks {stats['sizes']['memory_chunks']}, memory_chunk_vectors "
            f"{stats['sizes']['memory_chunk_vectors']}, memory_facts {stats['sizes']['memory_facts']}): "
            f"index builds {build_summary(builds)}, "
            "maintenance_work_mem "
            f"{stats['maintenance_work_mem']}; load {stats['load_s']} s; "
            f"queries with a raw hit {100 * res['raw_hits'][0]:.0f} %; unified p95 vector-side "
            f"{fmt_ms(Stats.of(res['unified_vector']).p95)} / text-side "
            f"{fmt_ms(Stats.of(res['unified_text']).p95)} ms; unified on one connection (the "
            f"stores one after the other) p50 {fmt_ms(Stats.of(res['unified_1conn']).p50)} / p95 "
            f"{fmt_ms(Stats.of(res['unified_1conn']).p95)} ms"
            + (f"; migrated to head in {migrate_s:.0f} s first" if migrate_s > 5 else "")
        )
    if not rows:
        return
    print()
    print_table(
        ["chunks", "segments", "unified p50", "p95", "raw p50", "p95", "heaviest user p95",
         "seq scan p50", "p95", "ratio p50"],
        rows,
        title=f"memory_search (ms, embedding excluded; PostgreSQL {target.version}, load {loadavg()})",
    )  # fmt: skip
    for note in notes:
        print(" ·", note)


if __name__ == "__main__":
    main()
