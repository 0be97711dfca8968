"""The mixed load (issue 22): `make bench-load`.

    .venv/bin/python bench/bench_load.py --clients 16 --seconds 60
    .venv/bin/python bench/bench_load.py --mix append=4,list=1,memory_search=1 --workers 2
    .venv/bin/python bench/bench_load.py --append-size 1 --mix append=1 --clients 8
    DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/x make bench-load

N clients for S seconds, each its own user with its own token, each looping until the
deadline: an operation picked at random by the `--mix` weights, sent, its latency
(at the client: the loopback HTTP hop included) and status recorded.

- append: `POST /sessions/{id}/messages`, a turn (a user and an assistant message; one
  message with `--append-size 1`, N alternating ones with N) to one of the user's sessions;
- list: `GET /sessions`; search: `GET /sessions?search=<word>` (a word the user's
  sessions hold);
- history: `GET /sessions/{id}/messages?limit=50` (the newest page);
- memory_search: `POST /memory/search` (a query over the user's facts and raw chunks).

The server is `navi serve` as `make run` starts it (`_common.serve_navi`: `--workers`,
default as `make run`; the periodic jobs, the live indexer and the indexer process on;
`--no-jobs` isolates the request path), auth on, the environment's other settings; the
model is the fake Ollama (tests/fakes), in a process of its own so that it takes neither
the server's nor the clients' GIL, and the embedder the local MiniLM (`--embedder fake`:
the fake's). The database is a fresh `navi_bench_load` on the embedded
PostgreSQL, or on `DATABASE_URL`'s server (loopback only). Before the measured window:
one user and token per client (admin API), `--sessions` sessions each with 24 messages,
`--facts` facts each, the raw index built over those sessions (the idle-session indexer,
in this process), then `--warmup` seconds of the same load, not counted.

CPU per request: the server's whole process tree (uvicorn and its workers; under `navi
serve` (bench_wrk, bench_freshness) the indexer child too, which is also shown on its own)
and PostgreSQL's (the
postmaster and every child: backends, WAL writer, checkpointer…, and the children that
exited meanwhile — the pool closes its overflow connections, and their backends' CPU is
then the postmaster's children time; on a shared server all that is everyone's, so the
bench database's live backends are shown too), user + system, from psutil (and /proc)
before and after the window; and the connections the database had meanwhile. How long
the server's and PostgreSQL's threads were runnable but waiting for a CPU (/proc
schedstat) says how far the latencies are the machine's rather than Navi's: on a shared
machine the CPU per request is the figure to compare, and the req/s it implies for an
idle machine is printed. The bench's own (clients) and the fake's CPU are
shown too: on a 2-core machine they take from the same cores.

`--py-spy PATH`: when a `py-spy` binary is found (`$PY_SPY`, the venv's bin/, `PATH`),
each server worker is recorded over the measured window (`--format raw`, `--nonblocking`,
one file per worker) and the top functions by inclusive and by self share are printed
(`bench/_profile.py`, which also reads such files on its own).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
from _agent import ADMIN_TOKEN, agent_settings, ok
from _app import (
    build_gateway,
    configure_logging,
    create_engine,
    get_settings,
    index_idle_sessions,
    session_factory,
)
from _common import (
    NO_JOBS_HELP,
    BackendCpu,
    WorkerServer,
    fake_ollama_process,
    fmt_ms,
    fresh_database,
    loadavg,
    percentile,
    print_table,
    serve_navi,
    serve_workers,
    server_line,
    step,
    write_results,
)
from _profile import load as load_profile
from _profile import report as profile_report
from sqlalchemy.engine import make_url

OPS = ("append", "list", "search", "history", "memory_search")
MAX_SECONDS = 600
MAX_CLIENTS = 256
LOOPBACK = {"localhost", "127.0.0.1", "::1"}
SETUP_MESSAGES = 24  # per session
HISTORY_PAGE = 50
CPU_LABELS = {
    "app": "app (the server's process tree: uvicorn, its workers, the indexer)",
    "indexer": "  of which the indexer process(es)",
    "postgres": "PostgreSQL (postmaster and children)",
    "postgres_db_backends": "  of which the bench db's live backends",
    "bench_clients": "bench clients (this process)",
    "fake_ollama": "fake Ollama",
}
SPY_RATE = 100  # py-spy record's default samples per second

# The words of the generated messages: a handful of topics shared by every user (what
# `search` and memory_search look for) in a filler vocabulary.
TOPICS = [
    "deploy", "migration", "invoice", "kubernetes", "postgres", "budget", "roadmap",
    "backup", "latency", "onboarding", "refactor", "release", "incident", "billing",
    "pipeline", "certificate", "dashboard", "vacation", "benchmark", "firmware",
]  # fmt: skip
FILLER = [
    "the", "we", "should", "check", "again", "tomorrow", "after", "lunch", "because",
    "it", "was", "slow", "last", "week", "and", "then", "maybe", "try", "another", "way",
    "with", "team", "about", "plan", "notes", "for", "next", "call", "fixed", "broken",
]  # fmt: skip


def sentence(rng: random.Random, words: int = 18) -> str:
    out = [rng.choice(FILLER) for _ in range(words)]
    for _ in range(2):
        out[rng.randrange(words)] = rng.choice(TOPICS)
    return " ".join(out).capitalize() + "."


def parse_mix(text: str) -> dict[str, float]:
    """`append=2,list=1` → weights (operations left out weigh 0)."""
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, weight = part.partition("=")
        if name not in OPS:
            raise argparse.ArgumentTypeError(f"unknown operation {name!r} (known: {OPS})")
        try:
            mix[name] = float(weight or 1)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad weight in {part!r}") from None
        if mix[name] < 0:
            raise argparse.ArgumentTypeError(f"negative weight in {part!r}")
    if not any(mix.values()):
        raise argparse.ArgumentTypeError("the mix has no operation with a weight above 0")
    return mix


def check_loopback(url: str) -> None:
    """The bench only loads a server on this machine (the database's, and its own)."""
    u = make_url(url)
    host = u.host or u.query.get("host") or ""
    host = host[0] if isinstance(host, tuple) else host
    if host and not host.startswith("/") and host not in LOOPBACK:
        raise SystemExit(f"bench-load runs on loopback only: DATABASE_URL's host is {host!r}")


# ------------------------------------------------------------------ processes and CPU
def tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def cpu_ms(procs: list[psutil.Process], reaped: bool = False) -> dict[int, float]:
    """user + system ms per process (processes that exited are left out); `reaped`: the
    first one's children that exited too (their CPU is added to their parent's when it
    waits for them: a backend the pool closed), under the key -pid."""
    out = {}
    for i, p in enumerate(procs):
        try:
            t = p.cpu_times()
            out[p.pid] = (t.user + t.system) * 1000
            if reaped and i == 0:
                out[-p.pid] = (t.children_user + t.children_system) * 1000
        except psutil.Error:
            continue
    return out


def runqueue_ms(procs: list[psutil.Process]) -> dict[int, float]:
    """ms each process's threads spent runnable but waiting for a CPU (/proc schedstat)."""
    out = {}
    for p in procs:
        total = 0.0
        try:
            for task in os.listdir(f"/proc/{p.pid}/task"):
                with open(f"/proc/{p.pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[1]) / 1e6
        except (OSError, IndexError, ValueError):
            continue
        out[p.pid] = total
    return out


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU ms between two snapshots (a process that appeared counts from 0)."""
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


def postgres_processes(conninfo: str) -> tuple[str, list[psutil.Process]]:
    """The PostgreSQL server's processes: the postmaster (the parent of our backend) and
    its children; if the backend is not visible here, every `postgres` user's process."""
    with psycopg.connect(conninfo) as conn:
        backend = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        try:
            parent = psutil.Process(backend).parent()
            if parent is not None and "postgres" in " ".join(parent.cmdline()).lower():
                return f"postmaster {parent.pid} and its children", tree(parent.pid)
        except psutil.Error:
            pass
    procs = [p for p in psutil.process_iter(["username"]) if p.info["username"] == "postgres"]
    return "the processes of the postgres user", procs


@dataclasses.dataclass
class CpuProbe:
    """The process groups whose CPU the bench reports (re-listed at each snapshot: a
    worker or a backend that started meanwhile is counted)."""

    server: WorkerServer
    pg_pid: int | None
    pg_fixed: list[psutil.Process]
    fake_pid: int
    backends: BackendCpu  # the bench database's backends only (a shared server's others)

    def snapshot(self) -> dict[str, dict[int, float]]:
        pg = tree(self.pg_pid) if self.pg_pid else self.pg_fixed
        app = tree(self.server.proc.pid)
        return {
            "app": cpu_ms(app, reaped=True),
            "indexer": cpu_ms([p for p in app[1:] if is_indexer(p)]),
            "postgres": cpu_ms(pg, reaped=self.pg_pid is not None),
            "postgres_db_backends": self.backends.snapshot(),
            "bench_clients": cpu_ms([psutil.Process()]),
            "fake_ollama": cpu_ms(tree(self.fake_pid)),
            "app_runqueue": runqueue_ms(app),
            "postgres_runqueue": runqueue_ms(pg),
        }

    def sessions(self) -> int:
        """Connections the bench database has had (pg_stat_database, PostgreSQL 14+)."""
        try:
            row = self.backends.conn.execute(
                "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
            return int(row[0]) if row else -1
        except psycopg.Error:
            return -1

    @staticmethod
    def delta(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]):  # type: ignore[no-untyped-def]
        return {k: cpu_delta(before[k], after[k]) for k in after}


def cpu_probe(server: WorkerServer, conninfo: str, fake_pid: int) -> tuple[CpuProbe, str]:
    """The CPU probe of a load run on `server` and its database, and how PostgreSQL's CPU
    is counted (its own postmaster's children, or only the bench database's backends)."""
    pg_how, pg_procs = postgres_processes(conninfo)
    pg_pid = pg_procs[0].pid if pg_how.startswith("postmaster") else None
    return CpuProbe(server, pg_pid, pg_procs, fake_pid, BackendCpu(conninfo)), pg_how


def worker_pids(server: WorkerServer) -> list[int]:
    """The processes that serve requests: uvicorn's workers (the children of its
    supervisor that run the app), or with `--workers 1` the one process."""
    procs = tree(server.proc.pid)
    workers = [
        p.pid for p in procs[1:] if "spawn_main" in " ".join(_cmdline(p)) and not is_indexer(p)
    ]
    return workers or [server.proc.pid]


def is_indexer(p: psutil.Process) -> bool:
    """A process of the server's tree that indexes (`python -m app.cli indexer`, which
    `navi serve` starts beside its workers)."""
    return any("indexer" in part for part in _cmdline(p))


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def find_py_spy() -> str | None:
    candidates = [os.environ.get("PY_SPY", ""), str(Path(sys.executable).parent / "py-spy")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return shutil.which("py-spy")


# ------------------------------------------------------------------ setup
@dataclasses.dataclass
class User:
    id: str
    token: str
    sessions: list[str]


async def setup_user(
    admin: httpx.AsyncClient, i: int, sessions: int, facts: int, rng: random.Random
) -> User:
    user = ok(await admin.post("/admin/users", json={"name": f"load-{i:03d}"}), "user", 201)
    issued = await admin.post(f"/admin/users/{user['id']}/tokens", json={"name": "bench-load"})
    token = ok(issued, "token", 201)["token"]
    headers = {"Authorization": f"Bearer {token}"}
    sids = []
    for j in range(sessions):
        topic = rng.choice(TOPICS)
        body = {"profile_id": "default", "name": f"{topic} {i}.{j}"}
        sid = ok(await admin.post("/sessions", json=body, headers=headers), "session", 201)["id"]
        messages = [
            {"role": "user" if k % 2 == 0 else "assistant", "content": sentence(rng)}
            for k in range(SETUP_MESSAGES)
        ]
        r = await admin.post(
            f"/sessions/{sid}/messages", json={"messages": messages}, headers=headers
        )
        ok(r, "messages", 201)
        sids.append(sid)
    for k in range(facts):
        fact = {"category": "project", "key": f"note-{k}", "value": sentence(rng, 12)}
        ok(await admin.post("/memory/facts", json=fact, headers=headers), "fact", 201)
    return User(user["id"], token, sids)


async def setup(base_url: str, args: argparse.Namespace) -> list[User]:
    rng = random.Random(args.seed)
    seeds = [random.Random(rng.getrandbits(64)) for _ in range(args.clients)]
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    limit = asyncio.Semaphore(8)

    async def one(i: int) -> User:
        async with limit:
            return await setup_user(admin, i, args.sessions, args.facts, seeds[i])

    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=120) as admin:
        return list(await asyncio.gather(*(one(i) for i in range(args.clients))))


async def build_raw_index(url: str, settings: Any) -> str:
    """The idle-session indexer over every session (idle for 0 min): memory_search has
    raw chunks to find, as on a service whose sessions went quiet once."""
    engine = create_engine(url)
    try:
        result = await index_idle_sessions(
            session_factory(engine),
            build_gateway(settings),
            settings,
            older_than_minutes=0,
            max_batches=None,
        )
    finally:
        await engine.dispose()
    return str(result.summary())


async def sanity(base_url: str, user: User) -> str:
    """What one user's search and memory_search find (the load must find things)."""
    headers = {"Authorization": f"Bearer {user.token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as c:
        listed = ok(await c.get("/sessions", params={"search": TOPICS[0]}), "search")
        body = {"query": f"what about the {TOPICS[0]} {TOPICS[1]}", "k": 5}
        found = ok(await c.post("/memory/search", json=body), "memory_search")
    kinds = Counter(h["source_type"] for h in found["hits"])
    hits = ", ".join(f"{n} {k}" for k, n in kinds.items()) or "nothing"
    return f"search {TOPICS[0]!r}: {listed['total']} of {len(user.sessions)} sessions; memory_search: {hits}"


# ------------------------------------------------------------------ the load
@dataclasses.dataclass
class Window:
    start: float = math.inf  # perf_counter; samples that start from here on count
    end: float = math.inf  # no request starts from here on


@dataclasses.dataclass
class Results:
    latencies: dict[str, list[float]] = dataclasses.field(
        default_factory=lambda: {op: [] for op in OPS}
    )
    errors: dict[str, Counter[str]] = dataclasses.field(
        default_factory=lambda: {op: Counter() for op in OPS}
    )


def request_of(op: str, user: User, rng: random.Random, append_size: int) -> tuple[str, str, Any]:
    """(method, path, JSON body or query params) of one operation."""
    sid = rng.choice(user.sessions)
    if op == "append":
        messages = [
            {"role": "user" if k % 2 == 0 else "assistant", "content": sentence(rng)}
            for k in range(append_size)
        ]
        return "POST", f"/sessions/{sid}/messages", {"messages": messages}
    if op == "list":
        return "GET", "/sessions", None
    if op == "search":
        return "GET", "/sessions", {"search": rng.choice(TOPICS)}
    if op == "history":
        return "GET", f"/sessions/{sid}/messages", {"limit": HISTORY_PAGE}
    query = f"what did we decide about the {rng.choice(TOPICS)} {rng.choice(TOPICS)}"
    return "POST", "/memory/search", {"query": query, "k": 5}


EXPECTED = {"append": 201, "memory_search": 200}


async def client_loop(
    base_url: str,
    user: User,
    seed: int,
    mix: dict[str, float],
    append_size: int,
    window: Window,
    results: Results,
) -> None:
    rng = random.Random(seed)
    ops = [op for op in OPS if mix.get(op, 0) > 0]
    weights = [mix[op] for op in ops]
    headers = {"Authorization": f"Bearer {user.token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
        while (t0 := time.perf_counter()) < window.end:
            op = rng.choices(ops, weights)[0]
            method, path, payload = request_of(op, user, rng, append_size)
            error = None
            try:
                if method == "GET":
                    r = await client.get(path, params=payload)
                else:
                    r = await client.post(path, json=payload)
                if r.status_code != EXPECTED.get(op, 200):
                    error = f"{r.status_code} {r.text[:120]}"
            except httpx.HTTPError as exc:
                error = type(exc).__name__
            if t0 >= window.start:
                results.latencies[op].append((time.perf_counter() - t0) * 1000)
                if error:
                    results.errors[op][error] += 1


def start_py_spy(binary: str, path: Path, pids: list[int], seconds: float) -> list[Any]:
    """One `py-spy record` per worker; the files are `path` (one worker) or `path.<pid>`."""
    out = []
    for pid in pids:
        target = path if len(pids) == 1 else path.with_name(f"{path.name}.{pid}")
        cmd = [
            binary, "record", "--nonblocking", "--format", "raw", "-o", str(target),
            "-d", str(max(1, round(seconds))), "-p", str(pid),
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        out.append((proc, target))
    return out


async def run_load(
    server: WorkerServer,
    users: list[User],
    args: argparse.Namespace,
    probe: CpuProbe,
    spy: str | None,
) -> dict[str, Any]:
    window = Window()
    results = Results()
    t_begin = time.perf_counter()
    window.start = t_begin + args.warmup
    window.end = window.start + args.seconds
    tasks = [
        asyncio.create_task(
            client_loop(
                server.base_url, u, args.seed + i, args.mix, args.append_size, window, results
            )
        )
        for i, u in enumerate(users)
    ]
    await asyncio.sleep(max(0.0, window.start - time.perf_counter()))
    step(f"measuring {args.seconds:g} s …")
    before, wall0, sessions0 = probe.snapshot(), time.perf_counter(), probe.sessions()
    spies = []
    if args.py_spy and spy:
        spies = start_py_spy(spy, args.py_spy, worker_pids(server), args.seconds)
    await asyncio.sleep(max(0.0, window.end - time.perf_counter()))
    after, wall1 = probe.snapshot(), time.perf_counter()
    await asyncio.sleep(1)  # the backends report their sessions at most once a second
    opened = probe.sessions() - sessions0 if sessions0 >= 0 else None
    await asyncio.gather(*tasks)
    spy_files = []
    for proc, target in spies:
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if proc.returncode != 0 or not target.exists():
            step(f"py-spy on {target.name}: exit {proc.returncode}: {err.decode()[-300:]}")
        else:
            spy_files.append(target)
    return {
        "results": results,
        "seconds": wall1 - wall0,
        "cpu": CpuProbe.delta(before, after),
        "connections_opened": opened,
        "profiles": spy_files,
    }


# ------------------------------------------------------------------ report
def op_row(name: str, lat: list[float], errors: int, seconds: float) -> list[object]:
    return [
        name,
        f"{len(lat):,}",
        f"{len(lat) / seconds:.1f}",
        fmt_ms(percentile(lat, 50)),
        fmt_ms(percentile(lat, 95)),
        fmt_ms(percentile(lat, 99)),
        errors,
    ]


def idle_estimate(app_ms: float, pg_ms: float, workers: int) -> float:
    """req/s the server could sustain with the cores to itself: a worker runs one request
    at a time (one core at most), PostgreSQL shares the cores with the workers."""
    cores = os.cpu_count() or 1
    if app_ms <= 0 or math.isnan(app_ms + pg_ms):
        return math.nan
    return min(min(workers, cores) * 1000 / app_ms, cores * 1000 / (app_ms + pg_ms))


def report(out: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    res: Results = out["results"]
    seconds = out["seconds"]
    rows, per_op = [], {}
    everything: list[float] = []
    for op in OPS:
        lat = res.latencies[op]
        if not lat:
            continue
        errors = sum(res.errors[op].values())
        rows.append(op_row(op, lat, errors, seconds))
        everything += lat
        per_op[op] = {
            "n": len(lat),
            "req_per_s": round(len(lat) / seconds, 2),
            "p50_ms": round(percentile(lat, 50), 2),
            "p95_ms": round(percentile(lat, 95), 2),
            "p99_ms": round(percentile(lat, 99), 2),
            "errors": dict(res.errors[op]),
        }
    total_errors = sum(sum(c.values()) for c in res.errors.values())
    rows.append(op_row("total", everything, total_errors, seconds))
    print_table(
        ["operation", "n", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors"],
        rows,
        title=(
            f"{args.clients} clients × {seconds:.0f} s, {args.workers} worker(s), mix "
            f"{','.join(f'{k}={v:g}' for k, v in args.mix.items())}, append size "
            f"{args.append_size} (latency at the client)"
        ),
    )
    if "append" in per_op:
        msgs = per_op["append"]["req_per_s"] * args.append_size
        print(f"append: {msgs:.0f} msgs/s ({args.append_size} per request)")
    for op in OPS:
        for reason, n in res.errors[op].most_common(5):
            print(f"  error {op}: {n} × {reason}")
    n = max(len(everything), 1)
    cpu = {k: v for k, v in out["cpu"].items() if not k.endswith("_runqueue")}
    waits = {k: v for k, v in out["cpu"].items() if k.endswith("_runqueue")}
    print_table(
        ["CPU (user + system)", "ms per request", "cores busy"],
        [[CPU_LABELS[k], f"{v / n:.2f}", f"{v / 1000 / seconds:.2f}"] for k, v in cpu.items()],
        title=f"\nCPU over the window; load average {loadavg()} on {os.cpu_count()} cores",
    )
    print(
        "waiting for a CPU (runnable, not running; /proc schedstat), threads on average: "
        f"app {waits['app_runqueue'] / 1000 / seconds:.2f}, PostgreSQL "
        f"{waits['postgres_runqueue'] / 1000 / seconds:.2f} (0 on a machine to itself)"
    )
    if out["connections_opened"] is not None:
        print(
            f"connections opened to the bench database during the window: "
            f"{out['connections_opened']:,} (the pool's overflow ones are closed when returned)"
        )
    # a server of its own: all its processes; a shared one: the bench database's backends
    pg_ms = cpu["postgres" if args.embedded else "postgres_db_backends"] / n
    idle = idle_estimate(cpu["app"] / n, pg_ms, args.workers)
    print(
        f"an idle {os.cpu_count()}-core machine, from these CPU figures (clients elsewhere): "
        f"≈ {idle:.0f} req/s (each worker on one core at most, app + PostgreSQL on all)"
    )
    profile = None
    if out["profiles"]:
        prof = load_profile(out["profiles"])
        profile = profile_report(prof, 25)
        print(f"\npy-spy profile ({', '.join(str(p) for p in out['profiles'])}):")
        print(profile)
        busy = prof.samples / (SPY_RATE * seconds * len(out["profiles"]))
        app_cores = cpu["app"] / 1000 / seconds / len(out["profiles"])
        print(
            f"(the main threads were sampled active {busy:.0%} of the window, and ran on a "
            f"CPU {app_cores:.0%} of it: py-spy counts a thread waiting for a CPU as active, "
            "so on a busy machine this profile is one of wall time, not of CPU)"
        )
    return {
        "clients": args.clients,
        "seconds": round(seconds, 2),
        "workers": args.workers,
        "mix": args.mix,
        "append_size": args.append_size,
        "operations": per_op,
        "total": {
            "n": len(everything),
            "req_per_s": round(len(everything) / seconds, 2),
            "p50_ms": round(percentile(everything, 50), 2),
            "p95_ms": round(percentile(everything, 95), 2),
            "p99_ms": round(percentile(everything, 99), 2),
            "errors": total_errors,
        },
        "cpu_ms_per_request": {k: round(v / n, 3) for k, v in cpu.items()},
        "connections_opened": out["connections_opened"],
        "cpu_cores_busy": {k: round(v / 1000 / seconds, 3) for k, v in cpu.items()},
        "runqueue_threads": {k: round(v / 1000 / seconds, 3) for k, v in waits.items()},
        "idle_estimate_req_per_s": None if math.isnan(idle) else round(idle),
        "loadavg": loadavg(),
        "profiles": [str(p) for p in out["profiles"]],
    }


# ------------------------------------------------------------------ main
async def bench(args: argparse.Namespace) -> dict[str, Any]:
    if os.environ.get("DATABASE_URL", "").strip():
        check_loopback(os.environ["DATABASE_URL"])
    spy = None
    if args.py_spy:
        spy = find_py_spy()
        if spy is None:
            print("py-spy: no binary found ($PY_SPY, the venv's bin/, PATH): no profile")
    target = fresh_database("navi_bench_load")
    args.embedded = target.embedded
    check_loopback(target.url)
    print(server_line(target))
    fake, fake_url = fake_ollama_process(get_settings().vector_dim)
    settings = agent_settings(fake_url, {}, args.embedder)
    configure_logging(settings.log_level, settings.log_json)  # the indexer's, here
    server = None
    try:
        if args.server == "uvicorn":  # as `make run` starts it, unless --no-jobs
            server = serve_navi(
                settings, target.url, args.workers, ADMIN_TOKEN, jobs=not args.no_jobs
            )
        else:
            server = serve_workers(
                settings, target.url, args.workers, ADMIN_TOKEN, timing=False, server_kind="granian"
            )
        step(f"setup: {args.clients} users × {args.sessions} sessions, {args.facts} facts …")
        users = await setup(server.base_url, args)
        step(f"raw index: {await build_raw_index(target.url, settings)}")
        step(f"check: {await sanity(server.base_url, users[0])}")
        probe, pg_how = cpu_probe(server, target.conninfo, fake.pid)
        step(f"warm-up {args.warmup:g} s; PostgreSQL CPU: {pg_how}")
        try:
            out = await run_load(server, users, args, probe, spy)
        finally:
            probe.backends.close()
    finally:
        if server is not None:
            server.stop()
        fake.kill()
        fake.wait()
    data = report(out, args)
    data["server"] = server_line(target)
    data["label"] = target.label
    data["postgres_cpu_of"] = pg_how
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16, help=f"1–{MAX_CLIENTS}")
    parser.add_argument("--seconds", type=float, default=60, help=f"measured, ≤ {MAX_SECONDS}")
    parser.add_argument("--warmup", type=float, default=5, help="seconds of load not counted")
    parser.add_argument(
        "--mix",
        type=parse_mix,
        default=parse_mix(",".join(f"{op}=1" for op in OPS)),
        help="weights, e.g. append=2,list=1,search=1,history=1,memory_search=1",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("WEB_CONCURRENCY") or min(os.cpu_count() or 1, 64)),
        help="web worker processes (default as `make run`: WEB_CONCURRENCY, else one per core)",
    )
    parser.add_argument("--append-size", type=int, default=2, help="messages per append (1–500)")
    parser.add_argument("--sessions", type=int, default=4, help="sessions per user")
    parser.add_argument("--facts", type=int, default=10, help="facts per user")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument(
        "--server",
        choices=("uvicorn", "granian"),
        default="uvicorn",
        help="uvicorn: `navi serve` as `make run` starts it; granian: the app alone, no jobs",
    )
    parser.add_argument("--no-jobs", action="store_true", help=NO_JOBS_HELP)
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
    parser.add_argument("--json", type=Path, help="also write the figures there")
    parser.add_argument(
        "--py-spy", type=Path, help="py-spy raw profile of the server workers (if installed)"
    )
    args = parser.parse_args()
    if not 1 <= args.clients <= MAX_CLIENTS:
        parser.error(f"--clients: 1–{MAX_CLIENTS}")
    if not 0 < args.seconds <= MAX_SECONDS or not 0 <= args.warmup <= 60:
        parser.error(f"--seconds: up to {MAX_SECONDS}; --warmup: up to 60")
    if not 1 <= args.workers <= 16 or not 1 <= args.append_size <= 500:
        parser.error("--workers: 1–16; --append-size: 1–500")
    if not 1 <= args.sessions <= 50 or not 0 <= args.facts <= 200:
        parser.error("--sessions: 1–50; --facts: 0–200")
    if args.embedder == "local":  # the database's vector columns in the model's dimension
        os.environ["EMBEDDING_PROVIDER"] = "local"
        os.environ.pop("EMBEDDING_DIM", None)
        get_settings.cache_clear()
    data = asyncio.run(bench(args))
    write_results(f"load-{data['label']}.json", data)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1, default=str))
        print(f"results: {args.json}")


if __name__ == "__main__":
    main()
