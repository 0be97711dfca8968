"""Indexers apart from the web workers, on the Citus cluster (issue 48, item 3): `make bench-indexers`.

    .venv/bin/python bench/bench_indexers.py                      # 1 then 2 indexers
    .venv/bin/python bench/bench_indexers.py --counts 1,2,1 --users 12
    .venv/bin/python bench/bench_indexers.py --url postgresql+psycopg://postgres@127.0.0.1:5432/x

The database: `--url` (default `TEST_CITUS_URL`, else the test cluster's coordinator,
127.0.0.1:5460, as scripts/provision-citus.sh makes it; its database name is ignored).
On a Citus coordinator the bench's database `--db` is a cluster database
(tests/citus/cluster.py's `create_cluster_database`: on every node, `citus` in it, the
nodes registered), migrated to head, so the app's tables are distributed by user; on a
plain PostgreSQL a plain database. Loopback only.

**The backlog** (kept while `--users`/`--sessions`/`--messages`/`--words` stay the same,
`--regenerate` forces it): `--users` users, each `--sessions` sessions of `--messages`
messages of about `--words` words, appended through the API (the app in process,
`INDEX_EMBEDDING=external` and no background job: the web side embeds nothing), 10
messages a request; then the live words pass (`index_live_sessions(embed=False)`, as the
web workers' job runs it) until every session is covered: the chunks exist, found by
their words, all `vectors_stale`, none embedded.

**Each run** (`--counts`, default 1 then 2) starts from that same backlog: the segment
vectors deleted, every chunk stale again (one multi-shard `DELETE` and `UPDATE`). Then N
× `python -m app.cli indexer` (what `navi indexer` is), each in a session and process
group of its own, `DATABASE_URL` the coordinator, the local MiniLM embedder (or with
`--embedder fake|both` the fake Ollama in a process of its own, at 384 dimensions, which
answers at once: what an indexer and the database cost per segment without the model),
`INDEXER_THREADS` `--threads` (default 1: two indexers fit two cores),
`INDEX_QUIET_SECONDS=0` (every chunk due), debug logs as JSON (their `indexer.round`
lines say how many segments each round embedded). Every 0.25 s: the chunks still stale,
the vector rows, the indexers' CPU (psutil: user + system of each process); PostgreSQL's
CPU is that of the bench database's backends on each node (from /proc, when the nodes
run on this machine: another database's work on the same servers is left out), less
what the bench's own polls cost (measured for 3 s before the indexers start). When no
chunk is stale the indexers are stopped (SIGTERM) and:

- **segments/s**: all segments ÷ the time from the start to the drain ("wall", which
  includes each indexer's start-up: Python, the app's imports, the model's load), and
  over the "steady" window, from the first poll that saw a vector to the drain
  (the segments embedded in it ÷ its length): the rate once the model is loaded;
- **CPU s per segment**: the indexers' CPU over the run ÷ the segments, and over the
  steady window; PostgreSQL's over the run, per node (coordinator + workers);
- **nothing embedded twice**: the segments the indexers' logs say they embedded, summed
  over the indexers, against the vector rows stored and the segments the backlog holds
  (the app's `segment_texts` over every chunk); the chunks the logs say each wrote, summed,
  against the chunks. A chunk embedded twice would show as logged segments above the
  stored rows (the second write replaces the first's rows).
- the ratio of each run's rates to the first run's (2 indexers ÷ 1), and the load average
  before and after (the machine may be shared: the CPU per segment is the steadier
  figure).

Printed as a table; the figures as JSON (`--json`, default bench/.cache/indexers.json;
`-` for stdout). Wrap a run in `flock /tmp/bench.lock` on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# the local embedder's 384-d vectors: settled before any app import
os.environ["EMBEDDING_PROVIDER"] = "local"
os.environ.pop("EMBEDDING_DIM", None)

import psutil  # noqa: E402
import psycopg  # noqa: E402
from _agent import agent_settings, in_process_api, ok  # noqa: E402
from _app import (  # noqa: E402
    build_gateway,
    create_cluster_database,
    create_engine,
    drop_cluster_database,
    index_live_sessions,
    migrations,
    segment_spans,
    session_factory,
)
from _common import (  # noqa: E402
    CACHE,
    ROOT,
    BackendCpu,
    Target,
    cached_dataset,
    fake_ollama_process,
    libpq_url,
    loadavg,
    print_table,
    step,
    with_database,
)
from bench_load import cpu_ms, sentence  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5460/navi_test"
LOOPBACK = {"localhost", "127.0.0.1", "::1"}
PROFILE = "bench-indexers"
WINDOW = 131072  # no append comes near it: nothing is compressed
PER_REQUEST = 10  # messages per append
POLL_SECONDS = 0.25


# ------------------------------------------------------------------ the database
@dataclasses.dataclass
class Db:
    target: Target
    citus: bool
    nodes: list[tuple[str, int]]  # every node (the coordinator first) or the one server


def _connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(libpq_url(url), autocommit=True)


def _check_loopback(host: str) -> None:
    if host not in LOOPBACK:
        raise SystemExit(f"bench-indexers runs on loopback only: {host!r}")


def provision(url: str, name: str, fresh: bool) -> Db:
    base = make_url(url)
    _check_loopback(base.host or "")
    with _connect(url) as conn:
        citus = bool(conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone())
        exists = bool(
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        )
    if exists and fresh:
        step(f"dropping {name}")
        if citus:
            drop_cluster_database(url, name)
        else:
            with _connect(url) as conn:
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        exists = False
    if not exists:
        step(f"creating {name} ({'a cluster database' if citus else 'a database'})")
        if citus:
            create_cluster_database(url, name)
        else:
            with _connect(url) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
    db_url = with_database(url, name)
    step("migrating to head")
    migrations.upgrade(db_url)
    with _connect(db_url) as conn:
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        nodes = [(base.host or "127.0.0.1", base.port or 5432)]
        if citus:
            distributed = conn.execute(
                "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('memory_chunks')"
            ).fetchone()
            if not distributed:
                raise SystemExit(f"{name}: memory_chunks is not distributed (no worker?)")
            rows = conn.execute(
                "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND isactive"
                " ORDER BY nodeport"
            ).fetchall()
            nodes += [(str(h), int(p)) for h, p in rows]
    for host, _ in nodes:
        _check_loopback(host)
    label = "citus" if citus else "pg"
    target = Target(url=db_url, label=label, embedded=False, version=version, pg_trgm=True)
    return Db(target, citus, nodes)


# ------------------------------------------------------------------ the backlog
async def load(target: Target, args: argparse.Namespace) -> dict[str, Any]:
    """Users, sessions and messages through the API (nothing embedded), then the words
    pass until every session is covered."""
    rng = random.Random(args.seed)

    def settings(fake_url: str) -> Any:
        base = agent_settings(fake_url, {PROFILE: {"context_window": WINDOW}}, "local")
        return dataclasses.replace(base, index_embedding="external")

    started = time.monotonic()
    messages = requests = 0
    async with in_process_api(target, settings) as api:
        c = api.client
        for u in range(args.users):
            user = ok(await c.post("/admin/users", json={"name": f"indexers-{u:03d}"}), "user", 201)
            issued = await c.post(f"/admin/users/{user['id']}/tokens", json={"name": "bench"})
            headers = {"Authorization": f"Bearer {ok(issued, 'token', 201)['token']}"}
            for s in range(args.sessions):
                body = {"profile_id": PROFILE, "name": f"session {u}.{s}"}
                sid = ok(await c.post("/sessions", json=body, headers=headers), "session", 201)[
                    "id"
                ]
                for first in range(0, args.messages, PER_REQUEST):
                    batch = [
                        {
                            "role": "user" if k % 2 == 0 else "assistant",
                            "content": sentence(rng, args.words),
                        }
                        for k in range(first, min(first + PER_REQUEST, args.messages))
                    ]
                    r = await c.post(
                        f"/sessions/{sid}/messages", json={"messages": batch}, headers=headers
                    )
                    ok(r, "append", 201)
                    messages += len(batch)
                    requests += 1
            step(f"  user {u + 1}/{args.users}: {messages} messages")
        appended = time.monotonic() - started
        engine = create_engine(target.url)
        llm = build_gateway(api.settings)
        try:
            passes = 0
            while True:
                done = await index_live_sessions(
                    session_factory(engine), llm, api.settings, embed=False
                )
                passes += 1
                if not done.sessions:
                    break
        finally:
            await llm.aclose()
            await engine.dispose()
    with _connect(target.url) as conn:
        stale, chunks = conn.execute(
            "SELECT count(*) FILTER (WHERE vectors_stale), count(*) FROM memory_chunks"
        ).fetchone()  # type: ignore[misc]
    if stale != chunks or not chunks:
        raise RuntimeError(f"the words pass left {stale} of {chunks} chunks stale")
    return {
        "messages": messages,
        "append_requests": requests,
        "append_seconds": round(appended, 1),
        "words_passes": passes,
        "load_seconds": round(time.monotonic() - started, 1),
    }


def backlog(target: Target) -> dict[str, Any]:
    """The chunks and their segments (every segment of a chunk never embedded), their
    characters."""
    with _connect(target.url) as conn:
        rows = conn.execute("SELECT content FROM memory_chunks").fetchall()
        users = conn.execute("SELECT count(DISTINCT user_id) FROM memory_chunks").fetchone()
    segments = sum(len(segment_spans(r[0]) or [(0, 0)]) for r in rows)
    chars = sum(len(r[0]) for r in rows)
    return {
        "chunks": len(rows),
        "segments": segments,
        "chars": chars,
        "users": int(users[0]) if users else 0,
    }


def reset(target: Target) -> None:
    """The same backlog again: no vector, every chunk stale, no lease."""
    with _connect(target.url) as conn:
        conn.execute("DELETE FROM memory_chunk_vectors")
        conn.execute(
            "UPDATE memory_chunks SET vectors_stale = true, stale_since = now(),"
            " embed_lease_until = NULL"
        )
        conn.execute("VACUUM ANALYZE memory_chunks")
        conn.execute("VACUUM ANALYZE memory_chunk_vectors")


# ------------------------------------------------------------------ CPU of the cluster's nodes
class NodeCpu:
    """CPU ms of the backends of the bench's database on each node (the coordinator
    first), from /proc (`_common.BackendCpu`): other databases' work on the same servers
    (another session's tests) is left out. Backends that exit during a run are lost (the
    indexers' pools and Citus' cached worker connections stay open)."""

    def __init__(self, db: Db) -> None:
        base = make_url(db.target.url)
        self.nodes = [
            BackendCpu(libpq_url(base.set(host=h, port=p).render_as_string(hide_password=False)))
            for h, p in db.nodes
        ]
        self.enabled = all(n.enabled for n in self.nodes)

    def snapshot(self) -> list[dict[int, float]]:
        return [n.snapshot() for n in self.nodes]

    def delta(self, before: list[dict[int, float]], after: list[dict[int, float]]) -> list[float]:
        return [n.delta(b, a) for n, b, a in zip(self.nodes, before, after, strict=True)]

    def close(self) -> None:
        for n in self.nodes:
            n.close()


POLL_SQL = (
    "SELECT (SELECT count(*) FROM memory_chunks WHERE vectors_stale),"
    " (SELECT count(*) FROM memory_chunk_vectors)"
)


def poll_cost(conn: psycopg.Connection[Any], cpu: NodeCpu, seconds: float = 3.0) -> list[float]:
    """CPU ms one poll costs each node (the poll alone, no indexer running): subtracted
    from a run's figures."""
    before = cpu.snapshot()
    polls = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        conn.execute(POLL_SQL).fetchone()
        polls += 1
        time.sleep(POLL_SECONDS)
    return [v / polls for v in cpu.delta(before, cpu.snapshot())]


# ------------------------------------------------------------------ one run
@dataclasses.dataclass
class Sample:
    t: float  # seconds since the indexers were started
    stale: int
    vectors: int
    indexer_ms: float


def indexer_env(db: Db, threads: int, fake_url: str | None) -> dict[str, str]:
    """`navi indexer`'s environment: the local MiniLM, or (`fake_url`) the fake Ollama
    at 384 dimensions (the same vector columns), which answers at once."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROMETHEUS_")}
    env.pop("EMBEDDING_DIM", None)
    if fake_url:
        env.update(EMBEDDING_PROVIDER="ollama", EMBEDDING_DIM="384", EMBEDDING_OLLAMA_HOST=fake_url)
    else:
        env.update(EMBEDDING_PROVIDER="local")
    env.update(
        DATABASE_URL=db.target.url,
        INDEXER_THREADS=str(threads),
        INDEX_QUIET_SECONDS="0",
        LOG_LEVEL="debug",
        LOG_JSON="true",
        PYTHONUNBUFFERED="1",
    )
    return env


def parse_log(path: Path) -> dict[str, Any]:
    rounds = segments = chunks = 0
    started = stopped = False
    errors: list[str] = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        name = event.get("event")
        if name == "indexer.round":
            rounds += 1
            segments += int(event.get("segments", 0))
            chunks += int(event.get("chunks", 0))
        elif name == "indexer.started":
            started = True
        elif name == "indexer.stopped":
            stopped = True
        elif event.get("level") in ("error", "critical") or name in (
            "indexer.round_failed",
            "memory.live_embed_failed",
        ):
            errors.append(str(name))
    return {
        "rounds": rounds,
        "segments": segments,
        "chunks": chunks,
        "started": started,
        "stopped": stopped,
        "errors": errors,
    }


def run(
    db: Db,
    count: int,
    threads: int,
    expected: dict[str, Any],
    limit: float,
    fake_url: str | None = None,
) -> dict[str, Any]:
    reset(db.target)
    cpu_nodes = NodeCpu(db)
    conn = _connect(db.target.url)
    per_poll = poll_cost(conn, cpu_nodes) if cpu_nodes.enabled else []
    logs = [CACHE / f"indexers-{count}-{n + 1}.log" for n in range(count)]
    load_before = loadavg()
    pg0 = cpu_nodes.snapshot()
    t0 = time.monotonic()
    procs = []
    for path in logs:
        with open(path, "wb") as out:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "app.cli", "indexer"],
                    cwd=ROOT,
                    env=indexer_env(db, threads, fake_url),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a process group of its own, as on another machine
                )
            )
    handles = [psutil.Process(p.pid) for p in procs]
    samples: list[Sample] = []
    rss: dict[int, int] = {}
    try:
        while True:
            stale, vectors = conn.execute(POLL_SQL).fetchone()  # type: ignore[misc]
            cpu = sum(cpu_ms(handles).values())
            for h in handles:
                try:
                    rss[h.pid] = max(rss.get(h.pid, 0), h.memory_info().rss)
                except psutil.Error:
                    pass
            samples.append(Sample(time.monotonic() - t0, int(stale), int(vectors), cpu))
            if not stale:
                break
            dead = [p.pid for p in procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"indexer(s) {dead} exited: see {logs}")
            if samples[-1].t > limit:
                raise RuntimeError(
                    f"{count} indexer(s): {stale} chunks still stale after {limit} s"
                )
            time.sleep(POLL_SECONDS)
        pg1 = cpu_nodes.snapshot()  # at the drain, before the indexers stop
    finally:
        conn.close()
        cpu_nodes.close()
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    end = samples[-1]
    first = next(s for s in samples if s.vectors > 0)
    pg = (
        [d - len(samples) * c for d, c in zip(cpu_nodes.delta(pg0, pg1), per_poll, strict=True)]
        if cpu_nodes.enabled
        else []
    )
    segs = expected["segments"]
    steady_s = end.t - first.t
    steady_segments = end.vectors - first.vectors
    per = [parse_log(path) for path in logs]
    with _connect(db.target.url) as c:
        stored, distinct = c.execute(
            "SELECT count(*), count(DISTINCT (user_id, chunk_id, part)) FROM memory_chunk_vectors"
        ).fetchone()  # type: ignore[misc]
    logged = sum(p["segments"] for p in per)
    return {
        "indexers": count,
        "threads": threads,
        "embedder": "fake Ollama" if fake_url else "local MiniLM",
        "load_before": load_before,
        "load_after": loadavg(),
        "wall_seconds": round(end.t, 2),
        "first_vector_seconds": round(first.t, 2),
        "segments_per_second_wall": round(segs / end.t, 2),
        "steady_seconds": round(steady_s, 2),
        "steady_segments": steady_segments,
        "segments_per_second_steady": round(steady_segments / steady_s, 2) if steady_s else None,
        "indexer_cpu_seconds": round(end.indexer_ms / 1000, 2),
        "indexer_cpu_ms_per_segment": round(end.indexer_ms / segs, 1),
        "indexer_cpu_ms_per_segment_steady": (
            round((end.indexer_ms - first.indexer_ms) / steady_segments, 1)
            if steady_segments
            else None
        ),
        "indexer_cores_busy_steady": (
            round((end.indexer_ms - first.indexer_ms) / 1000 / steady_s, 2) if steady_s else None
        ),
        # PostgreSQL: the bench database's backends on each node (the coordinator first:
        # its share is the cluster's routing cost), the bench's own polls subtracted
        "pg_cpu_seconds": round(sum(pg) / 1000, 2) if pg else None,
        "pg_cpu_ms_per_segment": round(sum(pg) / segs, 2) if pg else None,
        "pg_cpu_ms_per_segment_by_node": [round(v / segs, 2) for v in pg],
        "polls": len(samples),
        "pg_cpu_ms_per_poll_by_node": [round(v, 2) for v in per_poll],
        "indexer_rss_mb": [round(v / 2**20) for v in rss.values()],
        "per_indexer": per,
        "logged_segments": logged,
        "logged_chunks": sum(p["chunks"] for p in per),
        "stored_vectors": int(stored),
        "distinct_vectors": int(distinct),
        "embedded_twice": logged - int(stored),
        "all_embedded": int(stored) == segs and sum(p["chunks"] for p in per) == expected["chunks"],
    }


# ------------------------------------------------------------------ the report
def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def ratio(run: dict[str, Any], base: dict[str, Any]) -> str:
    """This run's steady rate over the first run's (wall rate when a run had no steady
    window: drained within one poll)."""
    key = "segments_per_second_steady"
    if not run[key] or not base[key]:
        key = "segments_per_second_wall"
    return f"{run[key] / base[key]:.2f}×"


def report(db: Db, data: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    b = data["backlog"]
    print(
        f"\n{db.target.label} (PostgreSQL {db.target.version}; {len(db.nodes)} node(s):"
        f" {', '.join(f'{h}:{p}' for h, p in db.nodes)}); {os.cpu_count()} cores"
    )
    print(
        f"backlog: {b['users']} users, {b['chunks']} chunks, {b['segments']} segments,"
        f" {b['chars']:,} chars ({data['load']})"
    )
    rows = []
    for r in runs:
        base = next(b for b in runs if b["embedder"] == r["embedder"])
        shares = "/".join(str(p["segments"]) for p in r["per_indexer"])
        rows.append(
            [
                f"{r['indexers']} × {r['threads']} thread, {r['embedder']}",
                f"{r['wall_seconds']:.1f}",
                f"{r['segments_per_second_wall']:.1f}",
                _f(r["segments_per_second_steady"]),
                ratio(r, base),
                f"{r['indexer_cpu_ms_per_segment']:.0f} / {_f(r['indexer_cpu_ms_per_segment_steady'], 0)}",
                _f(r["indexer_cores_busy_steady"], 2),
                "-"
                if r["pg_cpu_ms_per_segment"] is None
                else f"{r['pg_cpu_ms_per_segment']:.1f}"
                f" ({' + '.join(f'{v:.1f}' for v in r['pg_cpu_ms_per_segment_by_node'])})",
                f"{shares} = {r['logged_segments']}; stored {r['stored_vectors']}",
                r["embedded_twice"],
                f"{r['load_before']} → {r['load_after']}",
            ]
        )
    print_table(
        [
            "indexers",
            "wall s",
            "seg/s wall",
            "seg/s steady",
            "steady ÷ first run",
            "indexer CPU ms/seg (all / steady)",
            "cores busy",
            "PostgreSQL CPU ms/seg (coordinator + workers)",
            "segments logged per indexer; stored",
            "twice",
            "load",
        ],
        rows,
    )
    for r in runs:
        if (
            r["embedded_twice"]
            or not r["all_embedded"]
            or r["distinct_vectors"] != r["stored_vectors"]
        ):
            print(f"!! {r['indexers']} indexer(s): a segment embedded twice or missing: {r}")
        for p in r["per_indexer"]:
            if p["errors"]:
                print(f"!! {r['indexers']} indexer(s): errors logged: {p['errors']}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", default=os.environ.get("TEST_CITUS_URL") or DEFAULT_URL)
    ap.add_argument("--db", default="navi_bench_indexers")
    ap.add_argument("--users", type=int, default=24)
    ap.add_argument("--sessions", type=int, default=4, help="per user")
    ap.add_argument("--messages", type=int, default=28, help="per session")
    ap.add_argument("--words", type=int, default=45, help="per message, about")
    ap.add_argument("--counts", default="1,2", help="indexers per run, in order")
    ap.add_argument("--threads", type=int, default=1, help="INDEXER_THREADS of each indexer")
    ap.add_argument(
        "--embedder",
        choices=("local", "fake", "both"),
        default="local",
        help="the local MiniLM; the fake Ollama (answers at once: the indexer's cost"
        " without the model's, as with a fast embedding host); both, local first",
    )
    ap.add_argument("--limit", type=float, default=180.0, help="seconds a run may take")
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--regenerate", action="store_true", help="a fresh database and backlog")
    ap.add_argument("--json", default=str(CACHE / "indexers.json"))
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.counts.split(",") if x.strip()]

    db = provision(args.url, args.db, fresh=args.regenerate)
    params = {k: getattr(args, k) for k in ("users", "sessions", "messages", "words", "seed")}
    loaded, reused = cached_dataset(
        db.target, "bench_indexers_dataset", params, lambda: asyncio.run(load(db.target, args))
    )
    step(f"backlog {'reused' if reused else 'loaded'}: {loaded}")
    data: dict[str, Any] = {"load": loaded, "backlog": backlog(db.target), "citus": db.citus}
    data["nodes"] = [f"{h}:{p}" for h, p in db.nodes]
    runs = []
    embedders = ["local", "fake"] if args.embedder == "both" else [args.embedder]
    for embedder in embedders:
        fake = fake_ollama_process(384) if embedder == "fake" else None
        try:
            for count in counts:
                step(f"{count} indexer(s), {args.threads} thread(s) each, {embedder} embedder")
                result = run(
                    db, count, args.threads, data["backlog"], args.limit, fake[1] if fake else None
                )
                step(
                    f"  drained in {result['wall_seconds']} s:"
                    f" {result['segments_per_second_steady']} segments/s steady"
                )
                runs.append(result)
        finally:
            if fake:
                fake[0].kill()
                fake[0].wait()
    data["runs"] = runs
    text = json.dumps(data, indent=2)
    if args.json != "-":
        Path(args.json).write_text(text)
        step(f"figures in {args.json}")
    report(db, data, runs)
    if args.json == "-":
        print(text)


if __name__ == "__main__":
    main()
