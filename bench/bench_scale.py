"""One PostgreSQL server vs a Citus cluster (coordinator + 2 workers) on the same machine.

    make bench-scale                                      # 5k chunks, then 4× the users
    .venv/bin/python bench/bench_scale.py --sizes 5000 --queries 50
    .venv/bin/python bench/bench_scale.py --single-url postgresql+psycopg://postgres@127.0.0.1:5432/x \\
        --cluster-url postgresql+psycopg://postgres@127.0.0.1:5460/navi_test

The single server is `--single-url` (default `DATABASE_URL`, else 127.0.0.1:5432), the
cluster's coordinator `--cluster-url` (default `TEST_CITUS_URL`, else 127.0.0.1:5460; a
database of it where `citus` knows the workers, as scripts/provision-citus.sh makes
navi_test). Both on loopback only. The database name of either URL is ignored: each level
has a database of its own on each side, `navi_bench_scale_<n>k_u<users>` — on the cluster
a cluster database (tests/citus/cluster.py's `create_cluster_database`: created on every
node, `citus` in it, the nodes registered) —, migrated to head (`alembic upgrade head`).

For each size `n` (`--sizes`) two levels: bench_search's users (200 with chunks, 1,000
with facts) and `--users-factor` times as many with the same chunks and facts per user
(`n × factor` chunks). At each level, on each side:

* **data**: bench_search's dataset (its `Params` and `generate`: chunks of ~4,000 chars
  over users of skewed activity, ~5 random 384-d segment vectors a chunk, facts; COPY with
  the indexes dropped, then built), kept while its parameters and the schema's index set
  stay the same (`--regenerate` forces it); plus sessions for the list: `--sessions`
  per chunk user on average, spread by the same activity as the chunks (the heaviest user
  has more than a page), each with a few displayed messages (the page's previews).
* **indexes**: those the migrated schema has on the three search tables — on the single
  server bench_search's `INDEXES` (the text GIN, one partial HNSW graph per user bucket,
  the facts' HNSW); on a distributed cluster whatever the migration made (one HNSW on
  memory_chunk_vectors, built per shard). Each build is timed (wall); on the cluster the
  workers' `pg_stat_progress_create_index` is polled meanwhile for each shard's own build
  time, and `pg_dist_shard` counts the shards. Both sides build with the same
  `maintenance_work_mem` (`--maintenance-work-mem`; auto: what the largest segment graph
  needs, not bench_search's 4GB, which a parallel HNSW build allocates in full as shared
  memory at every build — seconds each, 64 times on the single server); the cluster's
  database gets it with `ALTER DATABASE … SET` (propagated to the workers), as the shard
  builds run in the workers' sessions, not the client's.
* **measured**, the two sides taking turns query by query (one machine: its load drifts),
  each call in its own transaction on warm caches, a warm-up pass then the measured one:
  `memory_search` as bench_search measures it (`UnifiedSearch.search`, scope `all`, facts
  and sketches on a second connection; the query vector precomputed, embedding excluded)
  and the session list as the API runs it (`SessionService.list_page`: the user's first
  page of 50, pinned first, by last activity, with the total and the previews), for the
  query's user (drawn by activity).

When the migrations have not distributed the tables (`sessions` absent from
`pg_dist_partition`), everything lives on the coordinator: the bench says so and runs
anyway, the cluster's figures then being the coordinator alone.

Prints the latencies (p50/p95 ms, cluster ÷ single), the index builds, and how each side's
latency moves from one user count to the other; the figures as JSON (`--json`, default
bench/.cache/results-scale.json; `-` for stdout).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# bench_search's vectors are 384-d (the local embedder's): settled before app imports, as there.
os.environ["EMBEDDING_PROVIDER"] = "local"
os.environ.pop("EMBEDDING_DIM", None)

import bench_search  # noqa: E402
import psycopg  # noqa: E402
from _app import (  # noqa: E402
    SessionService,
    Viewer,
    configure_logging,
    create_cluster_database,
    create_engine,
    freeze_startup_heap,
    get_settings,
    load_profiles,
    migrations,
    normalize_url,
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
    fmt_ms,
    fmt_ratio,
    libpq_url,
    loadavg,
    print_table,
    step,
    with_database,
    write_results,
)
from bench_search import (  # noqa: E402
    EPOCH,
    INDEXES,
    USER,
    Params,
    Query,
    StubLLM,
    generate,
    make_queries,
    user_sizes,
)
from sqlalchemy.engine import make_url  # noqa: E402

SEARCH_TABLES = ("memory_chunks", "memory_chunk_vectors", "memory_facts")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
SINGLE_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
CLUSTER_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5460/navi_test"
MESSAGES_PER_SESSION = 3
PAGE = 50
MAX_CHUNKS = 1_000_000  # a level's bound (chunks), whatever the arguments say
SESSIONS_GEN = 1

_INDEX_SQL = """
SELECT ic.relname, pg_get_indexdef(i.indexrelid), am.amname, c.relname
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_am am ON am.oid = ic.relam
WHERE c.relnamespace = 'public'::regnamespace AND c.relname = ANY(%s)
ORDER BY c.relname, ic.relname
"""
_KEPT = (
    "CREATE TABLE IF NOT EXISTS bench_scale_indexes (revision text NOT NULL, name text NOT"
    " NULL, def text NOT NULL, ord int NOT NULL, PRIMARY KEY (revision, name))"
)


# ------------------------------------------------------------------ servers
@dataclass
class Side:
    """One side of the comparison at one level: its database and what was found there."""

    role: str  # "single" or "cluster"
    target: Target
    distributed: bool = False
    workers: list[tuple[str, int]] = field(default_factory=list)
    shards: dict[str, int] = field(default_factory=dict)  # table → shard count
    placements: dict[int, int] = field(default_factory=dict)  # worker port → shards


def check_loopback(url: str, what: str) -> None:
    host = make_url(url).host or ""
    if host not in LOOPBACK:
        raise SystemExit(f"{what}: {host!r} is not a loopback address (127.0.0.1, ::1)")


def _target(url: str, label: str) -> Target:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        trgm = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'").fetchone()
    return Target(url=url, label=label, embedded=False, version=version, pg_trgm=bool(trgm))


def provision_single(server: str, name: str) -> Side:
    url = with_database(server, name)
    with psycopg.connect(libpq_url(with_database(server, "postgres")), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    migrations.upgrade(url)
    return Side("single", _target(url, "single"))


def _workers(conn: psycopg.Connection[Any]) -> list[tuple[str, int]]:
    rows = conn.execute(
        "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND isactive"
        " ORDER BY nodeport"
    ).fetchall()
    return [(str(h), int(p)) for h, p in rows]


def provision_cluster(coordinator: str, name: str, work_mem: str) -> Side:
    """A cluster database (every node) migrated to head; `maintenance_work_mem` set for it
    (Citus propagates `ALTER DATABASE … SET` to the workers), as the index builds of a
    distributed table run in the workers' sessions."""
    url = with_database(coordinator, name)
    with psycopg.connect(libpq_url(coordinator), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            raise SystemExit(f"{coordinator}: no `citus` there (not a Citus coordinator database)")
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if not exists:
        step(f"cluster: creating the cluster database {name}")
        create_cluster_database(coordinator, name)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            raise SystemExit(
                f"{name} exists on the coordinator without `citus` (an interrupted creation):"
                " drop it on every node (tests/citus/cluster.py drop_cluster_database) and rerun"
            )
        workers = _workers(conn)
    if not workers:
        raise SystemExit(f"{name}: the coordinator knows no worker (pg_dist_node)")
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:  # propagated to the workers
        conn.execute(f"ALTER DATABASE \"{name}\" SET maintenance_work_mem = '{work_mem}'")
    base = make_url(url)
    for host, port in workers:
        check_loopback(f"postgresql://{host}:{port}/", "a cluster node")
        node = base.set(host=host, port=port).render_as_string(hide_password=False)
        with psycopg.connect(libpq_url(node), autocommit=True) as conn:
            mem = conn.execute("SHOW maintenance_work_mem").fetchone()[0]  # type: ignore[index]
        if mem != work_mem:
            step(f"cluster: maintenance_work_mem is {mem} on {host}:{port} (not propagated)")
    migrations.upgrade(url)
    side = Side("cluster", _target(url, "cluster"), workers=workers)
    inspect_cluster(side)
    return side


def inspect_cluster(side: Side) -> None:
    with psycopg.connect(side.target.conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT partmethod FROM pg_dist_partition WHERE logicalrelid = to_regclass('sessions')"
        ).fetchone()
        side.distributed = bool(row and row[0] == "h")
        side.shards = {
            str(t): int(n)
            for t, n in conn.execute(
                "SELECT logicalrelid::regclass::text, count(*) FROM pg_dist_shard"
                " WHERE logicalrelid::regclass::text = ANY(%s) GROUP BY 1",
                (list(SEARCH_TABLES) + ["sessions"],),
            ).fetchall()
        }
        side.placements = {
            int(p): int(n)
            for p, n in conn.execute(
                "SELECT nodeport, count(*) FROM citus_shards"
                " WHERE table_name = to_regclass('memory_chunk_vectors') GROUP BY 1 ORDER BY 1"
            ).fetchall()
        }


# ------------------------------------------------------------------ indexes
def schema_indexes(target: Target) -> dict[str, str]:
    """The indexes bench_search drops around its COPY, as this schema has them: those of
    `INDEXES` that exist, and any HNSW index on memory_chunk_vectors (a cluster's one in
    place of the per-bucket graphs). Kept in `bench_scale_indexes` per schema revision, so
    an interrupted load (the indexes dropped) rebuilds the same ones."""
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute(_KEPT)
        rev = str(conn.execute("SELECT version_num FROM alembic_version").fetchone()[0])  # type: ignore[index]
        order = {name: i for i, name in enumerate(INDEXES)}
        for name, ddl, am, table in conn.execute(_INDEX_SQL, (list(SEARCH_TABLES),)).fetchall():
            if name in INDEXES or (table == "memory_chunk_vectors" and am == "hnsw"):
                # the segment graphs before the facts' one, like INDEXES
                ord_ = order.get(name, order["ix_memory_facts_embedding_hnsw"] - 1)
                conn.execute(
                    "INSERT INTO bench_scale_indexes VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (rev, name, ddl, ord_),
                )
        rows = conn.execute(
            "SELECT name, def FROM bench_scale_indexes WHERE revision = %s ORDER BY ord, name",
            (rev,),
        ).fetchall()
    return {str(n): str(d) for n, d in rows} or dict(INDEXES)


def is_segment_hnsw(ddl: str) -> bool:
    low = ddl.lower()
    return "memory_chunk_vectors" in low and "using hnsw" in low


class ShardWatch:
    """Polls the workers' `pg_stat_progress_create_index` (every 50 ms) while a CREATE
    INDEX on a distributed table runs: each shard's build from the first to the last time
    it was seen building."""

    def __init__(self, side: Side) -> None:
        base = make_url(side.target.url)
        self.nodes = [
            libpq_url(base.set(host=h, port=p).render_as_string(hide_password=False))
            for h, p in side.workers
        ]
        self.seen: dict[tuple[int, str], list[float]] = {}
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ShardWatch:
        self._conns = [psycopg.connect(n, autocommit=True) for n in self.nodes]
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        for c in self._conns:
            c.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.perf_counter()
            running = 0
            for i, conn in enumerate(self._conns):
                rows = conn.execute(
                    "SELECT relid::regclass::text FROM pg_stat_progress_create_index"
                    " WHERE datname = current_database()"
                ).fetchall()
                for (rel,) in set(rows):  # a parallel build shows its workers too
                    span = self.seen.setdefault((i, str(rel)), [now, now])
                    span[1] = now
                    running += 1
            self.peak = max(self.peak, running)
            self._stop.wait(0.05)

    def summary(self) -> dict[str, Any]:
        spans = sorted(round(b - a, 1) for a, b in self.seen.values())
        return {
            "shards_seen": len(spans),
            "per_shard_s": spans,
            "per_shard_median_s": spans[len(spans) // 2] if spans else None,
            "concurrent_peak": self.peak,
        }


def make_builder(
    side: Side, work_mem: str, detail: dict[str, Any], notices: list[str]
) -> Callable[[psycopg.Connection[Any], dict[str, str], str], dict[str, float]]:
    """bench_search's `build_indexes` with this bench's `work_mem` (not bench_search's),
    one index at a time, the shards watched while the segment HNSW of a distributed table
    is built (into `detail`); the server's notices (a graph that outgrew the memory) kept."""

    def builder(conn: psycopg.Connection[Any], ddls: dict[str, str], _: str) -> dict[str, float]:
        def keep(diag: psycopg.errors.Diagnostic) -> None:
            notices.append(f"{diag.message_primary} {diag.message_detail or ''}".strip())

        conn.add_notice_handler(keep)
        step(f"  (this bench builds them with maintenance_work_mem {work_mem})")
        out: dict[str, float] = {}
        try:
            for name, ddl in ddls.items():
                if side.distributed and is_segment_hnsw(ddl):
                    with ShardWatch(side) as watch:
                        out.update(build_indexes(conn, {name: ddl}, work_mem))
                    detail[name] = watch.summary()
                    step(f"  {name}: shards {detail[name]['per_shard_s']} s")
                else:
                    out.update(build_indexes(conn, {name: ddl}, work_mem))
        finally:
            conn.remove_notice_handler(keep)
        return out

    return builder


def auto_work_mem(p: Params) -> str:
    """`maintenance_work_mem` that holds the largest HNSW graph of a level in memory: the
    facts' (one graph of all facts) or a cluster shard's of the segments (a quarter of
    them at 4 shards; the heaviest user bucket's is smaller), ~6.2 segments a chunk, ~3 kB
    a 384-d vector in pgvector's in-memory graph. Not bench_search's 4GB: a parallel HNSW
    build allocates all of it as shared memory, every build — seconds each, 64 times on
    the single server (measured: 0.1 s at 64MB, 5.6 s at 4GB for one bucket of 2k chunks
    on this machine). A graph that outgrows it is built on disk, far slower: pgvector's
    notice is printed with the figures."""
    need_mb = max(p.chunks * 6.2 / 4, p.facts) * 3 / 1024
    return f"{max(1, math.ceil(need_mb / 64)) * 64}MB"


def hnsw_figures(stats: dict[str, Any], side: Side) -> dict[str, Any]:
    """The segment HNSW build(s) of a dataset: wall seconds, graphs (single: the user
    buckets, built one after the other) or shards (cluster: built side by side)."""
    builds = {n: s for n, s in stats["index_build_s"].items() if is_segment_hnsw(stats["ddl"][n])}
    wall = sum(builds.values())
    out: dict[str, Any] = {"indexes": len(builds), "wall_s": round(wall, 1)}
    shard_info = [stats["shard_builds"][n] for n in builds if n in stats.get("shard_builds", {})]
    if side.distributed and shard_info:
        per = [s for info in shard_info for s in info["per_shard_s"]]
        out.update(
            unit="shards",
            units=side.shards.get("memory_chunk_vectors", len(per)),
            per_unit_s=sorted(per),
            per_unit_median_s=sorted(per)[len(per) // 2] if per else None,
            concurrent_peak=max(info["concurrent_peak"] for info in shard_info),
        )
    else:
        out.update(
            unit="graphs",
            units=len(builds),
            per_unit_median_s=sorted(builds.values())[len(builds) // 2] if builds else None,
        )
    return out


# ------------------------------------------------------------------ datasets
def search_dataset(
    side: Side, p: Params, work_mem: str, regenerate: bool
) -> tuple[dict[str, Any], bool]:
    """bench_search's dataset with the schema's own index set; (stats, reused)."""
    indexes = schema_indexes(side.target)
    detail: dict[str, Any] = {}
    notices: list[str] = []

    def build() -> dict[str, Any]:
        stats = generate(side.target, p, indexes, make_builder(side, work_mem, detail, notices))
        return {
            **stats,
            "maintenance_work_mem": work_mem,
            "ddl": indexes,
            "shard_builds": detail,
            "build_notices": notices,
        }

    params = {
        **asdict(p),
        "indexes": sorted(indexes),
        "distributed": side.distributed,
        "maintenance_work_mem": work_mem,
    }
    return cached_dataset(side.target, "bench_scale_dataset", params, build, regenerate)


def sessions_dataset(side: Side, p: Params, per_user: int, regenerate: bool) -> dict[str, Any]:
    """`per_user × users` sessions over the chunk users, by the chunks' activity, each with
    MESSAGES_PER_SESSION displayed messages. Regenerated when missing: bench_search's
    generator deletes its users, and their sessions with them."""
    total = per_user * p.users
    params = {"users": p.users, "sessions": total, "seed": p.seed, "version": SESSIONS_GEN}
    with psycopg.connect(side.target.conninfo, autocommit=True) as conn:
        have = conn.execute(
            "SELECT count(*) FROM sessions WHERE user_id LIKE 'bench-search-user-%%'"
        ).fetchone()[0]  # type: ignore[index]
    stats, _ = cached_dataset(
        side.target,
        "bench_scale_sessions",
        params,
        lambda: generate_sessions(side, p, total),
        regenerate or have != total,
    )
    return stats


def generate_sessions(side: Side, p: Params, total: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    rng = random.Random(p.seed)
    counts = user_sizes(total, p.users)
    words = "deploy build index shard graph query plan cache bucket vector notes review".split()
    with psycopg.connect(side.target.conninfo, autocommit=True) as conn:
        conn.execute("DELETE FROM sessions WHERE user_id LIKE 'bench-search-user-%%'")
    rows, messages = [], 0
    with psycopg.connect(side.target.conninfo) as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY sessions (id, profile_id, user_id, name, pinned, created_at, last_active,"
            " next_seq, next_display_index) FROM STDIN"
        ) as cp:
            for u, n in enumerate(counts):
                for i in range(n):
                    sid = uuid.uuid4()
                    start = EPOCH - timedelta(minutes=rng.randrange(400 * 1440))
                    last = start + timedelta(minutes=rng.randrange(1, 600))
                    row = (sid, "default", USER.format(u), f"Session {i}", rng.random() < 0.03)
                    cp.write_row((*row, start, last, MESSAGES_PER_SESSION, MESSAGES_PER_SESSION))
                    rows.append((sid, USER.format(u), start))
        with cur.copy(
            "COPY session_messages (session_id, user_id, sequence_number, display_index, role,"
            " content, created_at, token_count) FROM STDIN"
        ) as cp:
            for sid, uid, start in rows:
                for k in range(MESSAGES_PER_SESSION):
                    text = " ".join(rng.choices(words, k=rng.randint(8, 40)))
                    role = "user" if k % 2 == 0 else "assistant"
                    at = start + timedelta(minutes=k)
                    cp.write_row((sid, uid, k, k, role, text, at, len(text) // 4))
                    messages += 1
        conn.commit()
    with psycopg.connect(side.target.conninfo, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE sessions")
        conn.execute("VACUUM ANALYZE session_messages")
    return {
        "sessions": total,
        "messages": messages,
        "heaviest_user_sessions": counts[0],
        "load_s": round(time.perf_counter() - t0, 1),
    }


# ------------------------------------------------------------------ measurement
@dataclass
class Runner:
    """One side's engine, measuring one search and one list at a time."""

    side: Side
    settings: Any
    engine: Any = None
    factory: Any = None
    profiles: Any = None
    llm: StubLLM = field(default_factory=StubLLM)
    search_ms: list[float] = field(default_factory=list)
    list_ms: list[float] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.engine = create_engine(self.side.target.url, self.settings)
        self.factory = session_factory(self.engine)
        self.profiles = load_profiles(self.settings)

    async def search(self, q: Query, keep: bool) -> None:
        if "search" in self.errors:
            return
        self.llm.vector = q.vector
        try:
            with Clock() as c:
                async with transaction(self.factory) as db:
                    await unified_search(db, self.llm, self.settings, self.factory).search(  # type: ignore[arg-type]
                        q.text, user_id=q.user_id, scope="all", k=5
                    )
        except Exception as exc:  # a query the cluster refuses: reported, not fatal
            self.errors["search"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            return
        if keep:
            self.search_ms.append(c.ms)

    async def list(self, q: Query, keep: bool) -> None:
        if "list" in self.errors:
            return
        try:
            with Clock() as c:
                async with transaction(self.factory) as db:
                    rows, _ = await SessionService(db, self.settings, self.profiles).list_page(
                        Viewer(user_id=q.user_id), limit=PAGE, offset=0
                    )
            if not rows:
                raise RuntimeError(f"no session listed for {q.user_id}")
        except Exception as exc:
            self.errors["list"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            return
        if keep:
            self.list_ms.append(c.ms)


async def measure(sides: list[Side], queries: list[Query]) -> list[Runner]:
    """Both sides taking turns, query by query: a warm-up pass, then the measured one."""
    settings = get_settings()
    runners = [Runner(s, settings) for s in sides]
    freeze_startup_heap()  # as the service does once started (app/lib/runtime.py)
    try:
        for rnd in range(2):
            for i, q in enumerate(queries):
                order = runners if i % 2 == 0 else runners[::-1]
                for r in order:
                    await r.search(q, rnd == 1)
                for r in order:
                    await r.list(q, rnd == 1)
    finally:
        for r in runners:
            await r.engine.dispose()
    return runners


# ------------------------------------------------------------------ report
def _ratio(a: float, b: float) -> str:
    return fmt_ratio(a / b, 2) if b and not math.isnan(a) and not math.isnan(b) else "-"


def _stats(samples: list[float]) -> dict[str, Any]:
    s = Stats.of(samples)
    return {k: (None if math.isnan(v) else round(v, 3)) for k, v in asdict(s).items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5000", help="chunk counts of the first level")
    parser.add_argument(
        "--users-factor", type=int, default=4,
        help="the second level: this many times the users, same chunks per user (1: none)",
    )  # fmt: skip
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--facts", type=int, default=20_000, help="facts over 1k users")
    parser.add_argument("--sessions", type=int, default=20, help="sessions per chunk user")
    parser.add_argument("--single-url", default=None)
    parser.add_argument("--cluster-url", default=None)
    parser.add_argument(
        "--maintenance-work-mem", default="auto",
        help="of the index builds, both sides (auto: the largest segment graph's size)",
    )  # fmt: skip
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--json", default="results-scale.json", help="under bench/.cache; -")
    args = parser.parse_args(argv)
    configure_logging("warning", False)
    os.environ.setdefault("PGCONNECT_TIMEOUT", "10")
    pgoptions = os.environ.get("PGOPTIONS", "")
    single = normalize_url(args.single_url or os.environ.get("DATABASE_URL") or SINGLE_DEFAULT)
    cluster = normalize_url(args.cluster_url or os.environ.get("TEST_CITUS_URL") or CLUSTER_DEFAULT)
    check_loopback(single, "--single-url")
    check_loopback(cluster, "--cluster-url")
    if not 1 <= args.queries <= 5000:
        raise SystemExit("--queries: 1 to 5000")

    levels: list[tuple[int, int]] = []  # (chunks, factor)
    for n in [int(x) for x in args.sizes.split(",") if x.strip()]:
        for f in sorted({1, max(1, args.users_factor)}):
            if n * f > MAX_CHUNKS:
                raise SystemExit(f"{n * f:,} chunks: over this bench's bound of {MAX_CHUNKS:,}")
            levels.append((n, f))

    results: list[dict[str, Any]] = []
    warned = False
    for n, f in levels:
        p = Params(
            chunks=n * f,
            users=bench_search.CHUNK_USERS * f,
            facts=args.facts * f,
            fact_users=bench_search.FACT_USERS * f,
        )
        name = f"navi_bench_scale_{p.chunks // 1000}k_u{p.users}"
        mem = args.maintenance_work_mem
        mem = auto_work_mem(p) if mem == "auto" else mem
        # a migration run on a reused dataset builds its indexes with the same memory
        os.environ["PGOPTIONS"] = f"{pgoptions} -c maintenance_work_mem={mem}".strip()
        step(
            f"level {p.users} users, {p.chunks:,} chunks, {p.facts:,} facts ({name};"
            f" maintenance_work_mem {mem})"
        )
        sides = [provision_single(single, name), provision_cluster(cluster, name, mem)]
        if not sides[1].distributed and not warned:
            warned = True
            msg = (
                "WARNING: tables are not distributed (`sessions` is not in pg_dist_partition):"
                " the cluster figures are the coordinator alone"
            )
            step(msg)
            print(msg, flush=True)
        level: dict[str, Any] = {"params": asdict(p), "database": name, "sides": {}}
        for side in sides:
            t0 = time.perf_counter()
            stats, reused = search_dataset(side, p, mem, args.regenerate)
            sess = sessions_dataset(side, p, args.sessions, args.regenerate or not reused)
            step(
                f"  {side.role}: dataset {'reused' if reused else 'generated'}"
                f" ({time.perf_counter() - t0:.0f} s)"
            )
            if side.role == "cluster":
                inspect_cluster(side)  # shards of tables a migration just distributed
            level["sides"][side.role] = {
                "server": side.target.version,
                "distributed": side.distributed,
                "shards": side.shards,
                "placements": side.placements,
                "dataset": {k: v for k, v in stats.items() if k not in ("ddl", "sizes")},
                "dataset_reused": reused,
                "sessions": sess,
                "hnsw": hnsw_figures(stats, side),
                "maintenance_work_mem": stats.get("maintenance_work_mem"),
                "build_notices": stats.get("build_notices", []),
            }
        queries = make_queries(sides[0].target, p, args.queries)
        step(f"  measuring {len(queries)} searches and lists a side, taking turns")
        for r in asyncio.run(measure(sides, queries)):
            level["sides"][r.side.role].update(
                search=_stats(r.search_ms), list=_stats(r.list_ms), errors=r.errors
            )
        level["loadavg"] = loadavg()
        results.append(level)
    report(results, warned)
    data = {"levels": results, "not_distributed": warned}
    if args.json == "-":
        print(json.dumps(data, indent=1, default=str))
    elif os.path.isabs(args.json):
        Path(args.json).write_text(json.dumps(data, indent=1, default=str))
        print(f"results: {args.json}", flush=True)
    else:
        write_results(args.json, data)


def report(results: list[dict[str, Any]], warned: bool) -> None:
    rows = []
    for lv in results:
        p = lv["params"]
        s, c = lv["sides"]["single"], lv["sides"]["cluster"]
        for role, side in (("single", s), ("cluster", c)):
            h = side["hnsw"]
            rows.append(
                [
                    f"{p['users']:,}",
                    f"{p['chunks']:,}",
                    f"{side['dataset']['segments']:,}",
                    role + ("" if role == "single" or side["distributed"] else " (coord.)"),
                    _ms(side["search"]["p50"]),
                    _ms(side["search"]["p95"]),
                    _ms(side["list"]["p50"]),
                    _ms(side["list"]["p95"]),
                    f"{h['wall_s']:.1f}",
                    f"{h['units']} {h['unit']}",
                    "-" if h["per_unit_median_s"] is None else f"{h['per_unit_median_s']:.1f}",
                ]
            )
        rows.append(
            [
                "", "", "", "cluster/single",
                _ratio(_f(c["search"]["p50"]), _f(s["search"]["p50"])),
                _ratio(_f(c["search"]["p95"]), _f(s["search"]["p95"])),
                _ratio(_f(c["list"]["p50"]), _f(s["list"]["p50"])),
                _ratio(_f(c["list"]["p95"]), _f(s["list"]["p95"])),
                _ratio(c["hnsw"]["wall_s"], s["hnsw"]["wall_s"]), "", "",
            ]
        )  # fmt: skip
    print()
    print_table(
        ["users", "chunks", "segments", "server", "search p50", "p95", "list p50", "p95",
         "HNSW build s", "built as", "s each (median)"],
        rows,
        title=f"single PostgreSQL vs Citus (ms; embedding excluded; load {loadavg()})",
    )  # fmt: skip
    by_n: dict[int, list[dict[str, Any]]] = {}
    for lv in results:
        p = lv["params"]
        by_n.setdefault(p["chunks"] // (p["users"] // bench_search.CHUNK_USERS), []).append(lv)
    growth = []
    for n, lvs in by_n.items():
        if len(lvs) < 2:
            continue
        lo, hi = lvs[0], lvs[-1]
        for role in ("single", "cluster"):
            a, b = lo["sides"][role], hi["sides"][role]
            growth.append(
                [
                    f"{n:,}",
                    f"{lo['params']['users']} → {hi['params']['users']}",
                    role,
                    f"{_ms(a['search']['p50'])} → {_ms(b['search']['p50'])}",
                    _ratio(_f(b["search"]["p50"]), _f(a["search"]["p50"])),
                    _ratio(_f(b["search"]["p95"]), _f(a["search"]["p95"])),
                    f"{_ms(a['list']['p50'])} → {_ms(b['list']['p50'])}",
                    _ratio(_f(b["list"]["p50"]), _f(a["list"]["p50"])),
                    _ratio(_f(b["list"]["p95"]), _f(a["list"]["p95"])),
                ]
            )
    if growth:
        print()
        print_table(
            ["chunks/200 users", "users", "server", "search p50 ms", "×p50", "×p95",
             "list p50 ms", "×p50", "×p95"],
            growth,
            title="per-user latency as the users grow (same chunks and facts per user)",
        )  # fmt: skip
        for lvs in by_n.values():
            if len(lvs) > 1:
                heavy = [lv["sides"]["single"]["dataset"]["heaviest_user_chunks"] for lv in lvs]
                print(
                    f" · mean chunks per user the same; bench_search's skewed activity over more"
                    f" users makes the heaviest one heavier ({heavy[0]:,} → {heavy[-1]:,} chunks),"
                    " and the queries are drawn by activity"
                )
    for lv in results:
        p = lv["params"]
        for role, side in lv["sides"].items():
            d, h = side["dataset"], side["hnsw"]
            note = (
                f"{p['users']} users / {role}: heaviest user {d['heaviest_user_chunks']:,} chunks,"
                f" {side['sessions']['heaviest_user_sessions']} sessions;"
                f" {side['sessions']['sessions']:,} sessions; load {d['load_s']} s"
                f"{' (reused)' if side['dataset_reused'] else ''}; index builds "
                + bench_search.build_summary(d["index_build_s"])
            )
            if h["unit"] == "shards":
                note += (
                    f"; segment HNSW per shard {h['per_unit_s']} s, up to {h['concurrent_peak']}"
                    f" shard builds at once; shards a table {side['shards']}, per worker port"
                    f" {side['placements']}"
                )
            elif h["units"] > 1:
                note += f" (segment graphs b00…: {h['units']} built one after the other)"
            if side["build_notices"]:
                note += f"; build notices: {'; '.join(sorted(set(side['build_notices'])))}"
            for what, err in side.get("errors", {}).items():
                note += f"; {what} FAILED: {err}"
            print(" ·", note)
    if warned:
        print(
            " · WARNING: tables are not distributed: the cluster figures are the coordinator alone"
        )


def _f(v: float | None) -> float:
    return math.nan if v is None else float(v)


def _ms(v: float | None) -> str:
    return fmt_ms(_f(v))


if __name__ == "__main__":
    main()
