"""The hot paths under `wrk` (issues 33, 41): `make bench-load`.

    .venv/bin/python bench/bench_wrk.py                      # every path, 8 connections × 20 s
    .venv/bin/python bench/bench_wrk.py --paths list,history --seconds 10
    .venv/bin/python bench/bench_wrk.py --ab fa40a74 --rounds 2   # this checkout vs fa40a74
    .venv/bin/python bench/bench_wrk.py --no-jobs            # the request path alone
    .venv/bin/python bench/bench_wrk.py --py-spy /tmp/wrk    # a profile of each path's window

`wrk` (a C load generator, the Debian package; installed by `scripts/install-wrk.sh`
when missing) drives the server, so the load does not take the server's cores the way
the Python driver (`bench/bench_load.py`, `make bench-load-py`) did: one wrk thread, N
connections, a Lua script per path that sends each request as another user (their token,
their sessions in turn).

The server is the service as `make run` starts it (`_common.serve_navi`): `python -m
app.cli serve --workers N --host 127.0.0.1 --port P` run from the checkout, in a process
group of its own (stopped with SIGTERM, then SIGKILL, to the whole group: no child is
left), configured through environment variables: the bench's settings
(`_agent.agent_settings`: auth on with the bench's admin token, the fake Ollama as the
LLM, log level warning, prepare's recall off), the local embedder unless `--embedder fake`
(the fake Ollama then), `WEB_CONCURRENCY` = `--workers`, everything else at its default:
the periodic jobs and the live indexer run. `--no-jobs` (isolate the request path: no
periodic jobs, no indexer): the database migrated by `python -m app.cli migrate head`,
then uvicorn `--workers N` on the app without its background work, as the bench measured
before issue 41. The database: a fresh, empty `navi_bench_wrk` (embedded PostgreSQL, or
`DATABASE_URL`'s loopback server) that the server migrates. Setup through the API:
`--users` users, 4 sessions of 24 messages each, 10 facts each; then the raw index built by
the checkout's own `python -m app.cli index-sessions --older-than 0`, and (with a live
index) the wait until no chunk waits for its vectors: every commit measured with its
setup complete, none with its indexer still catching up on it.

`--ab COMMIT` (repeatable, or a comma list): the same measurement against each COMMIT in
the same run. Each gets a worktree `/tmp/navi-ab-<sha>` (`git worktree add --detach`,
reused when it is there) and its server runs from there with the same .venv python: the
current directory precedes site-packages, so `-m app.cli` imports the worktree's `app`
(checked, and its path printed, for every checkout). Each commit has a fresh database of
its own (`navi_bench_wrk_<sha>`, migrated by its own server: an older commit has an older
schema) and the same setup (the same seed). The servers run side by side; while one is
measured the others are paused (SIGSTOP to their process group), so that an indexer
still draining the last window's appends takes no CPU from another commit's window. For
each path, every commit in turn, the bases first and this checkout last, `--rounds` times
(base, head, base, head …): a drift of the machine's speed falls on both. Printed: a table
per commit, then this checkout / each base: req/s, p99 and the server's CPU per request
(rounds pooled: mean req/s, mean p99, CPU over requests).

Paths (`--paths`, in this order):
- append1 / append8: `POST /sessions/{id}/messages` with 1 or 8 messages, the users'
  sessions in turn (messages/s = requests/s × size);
- list: `GET /sessions?limit=20`; history: `GET /sessions/{id}/messages?limit=50`;
- memory_search: `POST /memory/search` scope all, k 5, 50 distinct queries in turn;
- facts_list: `GET /memory/facts?limit=20`; facts_search: `GET /memory/facts/search?q=`
  one topic word in turn (issue 46: the versions must not slow the facts' reads);
- mixed: every path above at random (append1 ×2, the others ×1), `--mixed-connections`.

Each path: `--warmup` seconds of the same load first (not counted), then `--seconds`
measured. Printed per path: requests/s, wrk's latency p50 / p90 / p99 (at the client,
loopback), non-2xx answers and socket errors, and CPU per request (user + system) of the
server's whole process tree (the `serve` process, uvicorn's workers, the indexer child;
the indexer, a process whose command line says `indexer`, also on its own), of
PostgreSQL (its own postmaster's tree, or the bench database's backends on a shared
server) and of wrk itself.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from _agent import ADMIN_TOKEN, agent_settings
from _app import FIELDS, configure_logging, get_settings
from _common import (
    NO_JOBS_HELP,
    NaviServer,
    Target,
    app_package,
    empty_database,
    fake_ollama_process,
    fmt_ratio,
    loadavg,
    navi_env,
    print_table,
    provision,
    serve_navi,
    server_line,
    step,
    write_results,
)
from _profile import load as load_profile
from _profile import report as profile_report
from bench_load import (
    TOPICS,
    User,
    check_loopback,
    cpu_probe,
    find_py_spy,
    sanity,
    setup,
    start_py_spy,
    tree,
    worker_pids,
)

PATHS = (
    "append1",
    "append8",
    "list",
    "history",
    "memory_search",
    "facts_list",
    "facts_search",
    "mixed",
)
QUERIES = 50
REPO = Path(__file__).resolve().parent.parent


def ensure_wrk() -> str:
    """The `wrk` binary; `scripts/install-wrk.sh` (apt) when it is missing."""
    found = shutil.which("wrk")
    if found:
        return found
    step("wrk: not installed; scripts/install-wrk.sh …")
    subprocess.run(["bash", str(REPO / "scripts" / "install-wrk.sh")], check=True)
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("wrk: still not found after scripts/install-wrk.sh")
    return found


def lua_string(s: str) -> str:
    return json.dumps(s)  # a JSON string literal is a Lua string literal for these texts


def lua_script(path: str, users: list[User], seed: int) -> str:
    """The Lua of one path: each request another user, their sessions in turn."""
    entries = ",\n".join(
        "{t=" + lua_string(u.token) + ", s={" + ",".join(map(lua_string, u.sessions)) + "}}"
        for u in users
    )
    queries = ",\n".join(
        lua_string(f"what did we decide about the {TOPICS[i % len(TOPICS)]} "
                   f"{TOPICS[(i * 7 + 3) % len(TOPICS)]} (question {i})")
        for i in range(QUERIES)
    )  # fmt: skip
    topics = ", ".join(map(lua_string, TOPICS))
    return LUA % {
        "users": entries,
        "queries": queries,
        "topics": topics,
        "path": path,
        "seed": seed,
    }


LUA = r"""
local users = {
%(users)s
}
local queries = {
%(queries)s
}
local topics = {%(topics)s}
local path = "%(path)s"
local n = 0
local words = {"deploy", "invoice", "budget", "backup", "release", "latency", "billing"}
math.randomseed(%(seed)d)

local function messages(k)
  local out = {}
  for i = 1, k do
    local role = (i %% 2 == 1) and "user" or "assistant"
    out[i] = '{"role":"' .. role .. '","content":"message ' .. n .. '.' .. i ..
      ' about the ' .. words[(n + i) %% #words + 1] .. ' we should check again tomorrow"}'
  end
  return '{"messages":[' .. table.concat(out, ",") .. ']}'
end

local function one(op)
  n = n + 1
  local u = users[n %% #users + 1]
  local sid = u.s[math.floor(n / #users) %% #u.s + 1]
  local h = {["Authorization"] = "Bearer " .. u.t, ["Content-Type"] = "application/json"}
  if op == "append1" then
    return wrk.format("POST", "/sessions/" .. sid .. "/messages", h, messages(1))
  elseif op == "append8" then
    return wrk.format("POST", "/sessions/" .. sid .. "/messages", h, messages(8))
  elseif op == "list" then
    return wrk.format("GET", "/sessions?limit=20", h)
  elseif op == "history" then
    return wrk.format("GET", "/sessions/" .. sid .. "/messages?limit=50", h)
  elseif op == "facts_list" then
    return wrk.format("GET", "/memory/facts?limit=20", h)
  elseif op == "facts_search" then
    return wrk.format("GET", "/memory/facts/search?q=" .. topics[n %% #topics + 1], h)
  else
    local q = queries[n %% #queries + 1]
    return wrk.format("POST", "/memory/search", h,
      '{"query":"' .. q .. '","scope":"all","k":5}')
  end
end

local mix = {"append1", "append1", "list", "history", "memory_search"}

request = function()
  if path == "mixed" then
    return one(mix[math.random(#mix)])
  end
  return one(path)
end
"""

_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def parse_wrk(text: str) -> dict[str, Any]:
    """requests/s, the latency percentiles (ms), requests, non-2xx and socket errors."""

    def ms(value: str) -> float:
        m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", value)
        return float(m.group(1)) * _UNITS[m.group(2)] if m else float("nan")

    out: dict[str, Any] = {"non_2xx": 0, "socket_errors": 0}
    for q, value in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)$", text, re.M):
        out[f"p{q}_ms"] = round(ms(value), 2)
    if m := re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M):
        out["req_per_s"] = float(m.group(1))
    if m := re.search(r"^\s+(\d+) requests in", text, re.M):
        out["requests"] = int(m.group(1))
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", text):
        out["non_2xx"] = int(m.group(1))
    if m := re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text
    ):
        out["socket_errors"] = sum(int(x) for x in m.groups())
    return out


def children_cpu_ms() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1000


def run_wrk(wrk: str, url: str, script: Path, connections: int, seconds: float) -> str:
    cmd = [
        wrk, "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency",
        "--timeout", "10s", "-s", str(script), url,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"wrk failed ({done.returncode}): {done.stderr[-500:]}")
    return done.stdout


def measure(
    wrk: str, server: Any, probe: Any, path: str, script: Path, args: argparse.Namespace
) -> dict[str, Any]:
    connections = args.mixed_connections if path == "mixed" else args.connections
    if args.warmup > 0:
        run_wrk(wrk, server.base_url, script, connections, args.warmup)
    spies = []
    if args.py_spy and args.spy_binary:
        target = args.py_spy.with_name(f"{args.py_spy.name}.{path}")
        spies = start_py_spy(args.spy_binary, target, worker_pids(server), args.seconds)
    pids = {p.pid for p in tree(server.proc.pid)}
    before, client0, t0 = probe.snapshot(), children_cpu_ms(), time.perf_counter()
    text = run_wrk(wrk, server.base_url, script, connections, args.seconds)
    after, client1, wall = probe.snapshot(), children_cpu_ms(), time.perf_counter() - t0
    if new := {p.pid for p in tree(server.proc.pid)} - pids:
        step(f"{path}: process(es) {sorted(new)} started in the server's tree during the window")
    out = parse_wrk(text)
    n = max(out.get("requests", 0), 1)
    cpu = type(probe).delta(before, after)
    pg = cpu["postgres" if args.embedded else "postgres_db_backends"]
    out.update(
        path=path,
        connections=connections,
        seconds=round(wall, 1),
        app_ms=round(cpu["app"] / n, 3),
        indexer_ms=round(cpu["indexer"] / n, 3),
        pg_ms=round(pg / n, 3),
        wrk_ms=round((client1 - client0) / n, 3),
        fake_ms=round(cpu["fake_ollama"] / n, 3),
    )
    files = []
    for proc, target in spies:
        proc.wait(timeout=60)
        if target.exists():
            files.append(target)
    if files:
        out["profile"] = profile_report(load_profile(files), 20)
    return out


# ------------------------------------------------------------------ the checkouts under test
@dataclasses.dataclass
class Side:
    """One checkout under test: this one, or the worktree of an `--ab` commit."""

    label: str
    cwd: Path
    db: str
    server: NaviServer | None = None
    target: Target | None = None
    probe: Any = None
    users: list[User] = dataclasses.field(default_factory=list)
    rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def resolve_commit(ref: str) -> str:
    try:
        return git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except RuntimeError:
        raise SystemExit(f"--ab {ref}: not a commit of this repository") from None


def worktree(sha: str) -> Path:
    """/tmp/navi-ab-<sha>: a detached worktree at `sha`, added when missing."""
    path = Path(tempfile.gettempdir()) / f"navi-ab-{sha[:12]}"
    if path.exists():
        try:
            at = git("rev-parse", "HEAD", cwd=path)
        except RuntimeError:
            at = ""
        if at != sha:
            raise SystemExit(
                f"{path} is there but is not a worktree at {sha[:12]}: "
                f"`git worktree remove --force {path}` (or remove it), then run again"
            )
        step(f"worktree {path}: reused")
        return path
    git("worktree", "prune")
    git("worktree", "add", "--detach", str(path), sha)
    step(f"worktree {path}: added at {sha[:12]}")
    return path


def head_label() -> str:
    sha = git("rev-parse", "--short=7", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"this checkout ({sha}{' + uncommitted changes' if dirty else ''})"


def service_settings(fake_url: str, args: argparse.Namespace) -> Any:
    """The bench's settings (auth on, the fake Ollama as the LLM); with the jobs on, the
    periodic jobs at their defaults as `make run` has them (agent_settings turns the
    extraction off)."""
    settings = agent_settings(fake_url, {}, args.embedder)
    if args.no_jobs:
        return settings
    name = "extraction_interval_seconds"
    return dataclasses.replace(settings, **{name: FIELDS[name].default})


def index_sessions(side: Side, settings: Any, args: argparse.Namespace) -> str:
    """The raw index over every session, by the checkout's own `index-sessions` (an
    older commit's schema and indexer: the same setup for every commit)."""
    assert side.target is not None
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "index-sessions", "--older-than", "0"],
        cwd=side.cwd,
        env=navi_env(settings, side.target.url, args.workers),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"[{side.label}] index-sessions failed: {done.stderr[-800:]}")
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else "(nothing printed)"


def vectors_caught_up(conninfo: str, timeout: float = 600.0) -> str:
    """Wait until no chunk waits for its vectors (`vectors_stale`, since the live index;
    a commit before it has no such column and embeds in its index step): the setup is
    complete, for every commit alike, before anything is measured."""
    started = time.monotonic()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        has = conn.execute(
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_name = 'memory_chunks' AND column_name = 'vectors_stale'"
        ).fetchone()
        if has is None:
            return "no vectors_stale column: embedded by the index step"
        while True:
            row = conn.execute("SELECT count(*) FROM memory_chunks WHERE vectors_stale").fetchone()
            waiting = int(row[0]) if row else 0
            if not waiting:
                return f"every chunk embedded after {time.monotonic() - started:.1f} s"
            if time.monotonic() - started > timeout:
                raise SystemExit(f"{waiting} chunks still wait for vectors after {timeout:g} s")
            time.sleep(0.5)


async def start_side(side: Side, base: Any, fake_pid: int, args: argparse.Namespace) -> None:
    side.target = empty_database(side.db)
    # a data directory each: `serve` keeps its /metrics files there
    settings = dataclasses.replace(base, data_dir=tempfile.mkdtemp(prefix="navi-bench-wrk-"))
    if args.replica:
        settings = with_replica(settings, args.replica, side.target.url, args.no_jobs)
    step(f"[{side.label}] starting the server ({'--no-jobs' if args.no_jobs else 'navi serve'}) …")
    side.server = serve_navi(
        settings,
        side.target.url,
        args.workers,
        ADMIN_TOKEN,
        cwd=side.cwd,
        jobs=not args.no_jobs,
    )
    side.target = provision(side.db, migrate=False)  # migrated by the server now
    print(f"{side.label}: {server_line(side.target)}", flush=True)
    step(f"[{side.label}] setup: {args.users} users × 4 sessions of 24 messages, 10 facts …")
    side.users = await setup(side.server.base_url, args)
    step(f"[{side.label}] raw index: {index_sessions(side, settings, args)}")
    step(f"[{side.label}] vectors: {vectors_caught_up(side.target.conninfo)}")
    step(f"[{side.label}] check: {await sanity(side.server.base_url, side.users[0])}")
    side.probe, pg_how = cpu_probe(side.server, side.target.conninfo, fake_pid)
    step(f"[{side.label}] PostgreSQL CPU: {pg_how}")


def server_mode(args: argparse.Namespace) -> str:
    if args.no_jobs:
        return (
            f"--no-jobs ({NO_JOBS_HELP}): uvicorn --workers {args.workers} on the app "
            "without its background work"
        )
    return (
        f"`python -m app.cli serve --workers {args.workers}` as `make run` starts it: "
        "periodic jobs and the live indexer on"
    )


# ------------------------------------------------------------------ report
def report(side: Side, args: argparse.Namespace) -> None:
    table = []
    for r in side.rows:
        size = 8 if r["path"] == "append8" else 1
        rate = f"{r.get('req_per_s', 0):,.0f}"
        if r["path"].startswith("append"):
            rate += f" ({r.get('req_per_s', 0) * size:,.0f} msgs/s)"
        name = r["path"] if args.rounds == 1 else f"{r['path']} #{r['round']}"
        row = [
            name, r["connections"], rate, r.get("p50_ms"), r.get("p90_ms"), r.get("p99_ms"),
            r["non_2xx"] + r["socket_errors"], r["app_ms"],
        ]  # fmt: skip
        if not args.no_jobs:
            row.append(r["indexer_ms"])
        table.append([*row, r["pg_ms"], r["wrk_ms"]])
    headers = ["path", "conns", "req/s", "p50 ms", "p90 ms", "p99 ms", "errors", "app CPU ms/req"]
    if not args.no_jobs:
        headers.append("of which indexer")
    print_table(
        [*headers, "PG CPU ms/req", "wrk CPU ms/req"],
        table,
        title=(
            f"\n== {side.label}\nwrk 1 thread, {args.seconds:g} s a path after "
            f"{args.warmup:g} s of warm-up; {args.workers} worker(s), embedder "
            f"{args.embedder}; server: {server_mode(args)}; load average {loadavg()} on "
            f"{os.cpu_count()} cores"
        ),
    )
    for r in side.rows:
        if "profile" in r:
            print(f"\npy-spy, {side.label}, {r['path']}:\n{r['profile']}")


def pooled(rows: list[dict[str, Any]], path: str) -> dict[str, float]:
    """A path's rounds together: mean req/s, mean p99, the server's CPU over requests."""
    rs = [r for r in rows if r["path"] == path]
    n = sum(max(r.get("requests", 0), 1) for r in rs)
    return {
        "req_per_s": sum(r.get("req_per_s", 0.0) for r in rs) / len(rs),
        "p99_ms": sum(r.get("p99_ms", float("nan")) for r in rs) / len(rs),
        "app_ms": sum(r["app_ms"] * max(r.get("requests", 0), 1) for r in rs) / n,
    }


def ratios(head: Side, base: Side, args: argparse.Namespace) -> list[dict[str, Any]]:
    table, out = [], []
    for path in args.paths:
        h, b = pooled(head.rows, path), pooled(base.rows, path)
        ratio = {k: h[k] / b[k] if b[k] else float("nan") for k in h}
        out.append({"path": path, "head": h, "base": b, "ratio": ratio})
        table.append([
            path,
            f"{b['req_per_s']:,.0f} → {h['req_per_s']:,.0f}", fmt_ratio(ratio["req_per_s"], 2),
            f"{b['p99_ms']:.1f} → {h['p99_ms']:.1f}", fmt_ratio(ratio["p99_ms"], 2),
            f"{b['app_ms']:.2f} → {h['app_ms']:.2f}", fmt_ratio(ratio["app_ms"], 2),
        ])  # fmt: skip
    print_table(
        ["path", "req/s", "×", "p99 ms", "×", "server CPU ms/req", "×"],
        table,
        title=(
            f"\n== {head.label} / {base.label} (base → head; {args.rounds} round(s), the "
            "same run, the commits in turn)"
        ),
    )
    return out


# ------------------------------------------------------------------ main
async def bench(args: argparse.Namespace) -> dict[str, Any]:
    wrk = ensure_wrk()
    args.spy_binary = find_py_spy() if args.py_spy else None
    if os.environ.get("DATABASE_URL", "").strip():
        check_loopback(os.environ["DATABASE_URL"])
    sides = [Side(sha[:7], worktree(sha), f"navi_bench_wrk_{sha[:7]}") for sha in args.ab]
    sides.append(Side(head_label(), REPO, "navi_bench_wrk"))
    head = sides[-1]
    for side in sides:
        step(f"[{side.label}] `python -m app.cli` from {side.cwd} imports {app_package(side.cwd)}")
    print(f"server: {server_mode(args)}", flush=True)
    fake, fake_url = fake_ollama_process(get_settings().vector_dim)
    settings = service_settings(fake_url, args)
    configure_logging(settings.log_level, settings.log_json)
    paused = len(sides) > 1
    try:
        for side in sides:
            await start_side(side, settings, fake.pid, args)
            if paused:
                side.server.pause()  # type: ignore[union-attr]
        args.embedded = head.target.embedded  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory() as tmp:
            for path in args.paths:
                for round_ in range(1, args.rounds + 1):
                    for side in sides:
                        assert side.server is not None
                        script = Path(tmp) / f"{side.db}.{path}.lua"
                        if not script.exists():
                            script.write_text(lua_script(path, side.users, args.seed))
                        step(
                            f"[{side.label}] {path}"
                            + (f" round {round_}" if args.rounds > 1 else "")
                            + f": {args.warmup:g} s warm-up, {args.seconds:g} s measured …"
                        )
                        if paused:
                            side.server.resume()
                        try:
                            row = measure(wrk, side.server, side.probe, path, script, args)
                        finally:
                            if paused:
                                side.server.pause()
                        side.rows.append({**row, "round": round_})
    finally:
        for side in sides:
            if side.probe is not None:
                side.probe.backends.close()
            if side.server is not None:
                side.server.stop()
        fake.kill()
        fake.wait()
    for side in sides:
        report(side, args)
    compared = {base.label: ratios(head, base, args) for base in sides[:-1]}
    return {"commits": {s.label: s.rows for s in sides}, "ratios": compared, "head": head.label}


def with_replica(settings: Any, replica: str, primary_url: str, no_jobs: bool) -> Any:
    """Reads on the streaming replica `replica` (a server URL; the bench database's name
    is put in it), as `navi serve` runs with one. `navi serve` shares the users' write
    positions between its workers itself (issue 36); under `--no-jobs` (uvicorn on the
    app) the bench creates that table when this checkout has it."""
    from sqlalchemy.engine import make_url

    database = make_url(primary_url).database
    url = make_url(replica).set(database=database).render_as_string(hide_password=False)
    if no_jobs:
        try:
            from app.db.write_positions import create_shared
        except ImportError:  # a checkout from before issue 36: positions are per process
            step("replica: write positions per process (no shared table in this checkout)")
        else:
            shared = create_shared(Path(tempfile.gettempdir()))
            step(f"replica: write positions shared by the workers ({shared})")
    return dataclasses.replace(settings, database_replica_url=url, replica_max_lag_seconds=30.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paths", default=",".join(PATHS), help=f"of {','.join(PATHS)}")
    parser.add_argument("--seconds", type=float, default=20, help="measured, per path (≤ 300)")
    parser.add_argument("--warmup", type=float, default=3, help="seconds of load not counted")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections (1–256)")
    parser.add_argument("--mixed-connections", type=int, default=16)
    parser.add_argument("--users", type=int, default=16, help="users (4 sessions each), 1–64")
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("WEB_CONCURRENCY") or min(os.cpu_count() or 1, 64)),
        help="web worker processes (default as `make run`: WEB_CONCURRENCY, else one per core)",
    )
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
    parser.add_argument("--no-jobs", action="store_true", help=NO_JOBS_HELP)
    parser.add_argument(
        "--ab",
        action="append",
        default=[],
        metavar="COMMIT",
        help="also measure COMMIT (repeatable, or a comma list) in the same run, each from a "
        "worktree /tmp/navi-ab-<sha> on a database of its own; ratios this checkout / COMMIT",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="each path this many times per commit, in turn"
    )
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument(
        "--replica",
        help="a streaming replica of DATABASE_URL's server (postgresql+psycopg://…:5433/x): "
        "read-only paths read there",
    )
    parser.add_argument("--py-spy", type=Path, help="py-spy raw profiles, PATH.<path>.<pid>")
    parser.add_argument("--json", type=Path, help="also write the figures there")
    args = parser.parse_args()
    args.paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if unknown := [p for p in args.paths if p not in PATHS]:
        parser.error(f"--paths: unknown {unknown}; the paths are {','.join(PATHS)}")
    if not 0 < args.seconds <= 300 or not 0 <= args.warmup <= 60:
        parser.error("--seconds: up to 300; --warmup: up to 60")
    if not 1 <= args.connections <= 256 or not 1 <= args.mixed_connections <= 256:
        parser.error("--connections, --mixed-connections: 1–256")
    if not 1 <= args.users <= 64 or not 1 <= args.workers <= 16:
        parser.error("--users: 1–64; --workers: 1–16")
    if not 1 <= args.rounds <= 10:
        parser.error("--rounds: 1–10")
    shas = [resolve_commit(c.strip()) for a in args.ab for c in a.split(",") if c.strip()]
    args.ab = list(dict.fromkeys(shas))
    args.clients, args.sessions, args.facts = args.users, 4, 10  # bench_load.setup's
    if args.py_spy and args.ab:
        parser.error("--py-spy: without --ab (one profile file per path)")
    if args.embedder == "local":  # the database's vector columns in the model's dimension
        os.environ["EMBEDDING_PROVIDER"] = "local"
        os.environ.pop("EMBEDDING_DIM", None)
        get_settings.cache_clear()
    data = asyncio.run(bench(args))
    rows = [r for side in data["commits"].values() for r in side]
    data.update(
        paths=data["commits"][data["head"]],
        workers=args.workers,
        embedder=args.embedder,
        jobs=not args.no_jobs,
        rounds=args.rounds,
    )
    write_results("wrk.json", data)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1, default=str))
    sys.exit(1 if any(r["non_2xx"] + r["socket_errors"] for r in rows) else 0)


if __name__ == "__main__":
    main()
