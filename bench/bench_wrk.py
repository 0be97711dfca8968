"""The hot paths under `wrk` (issue 33): `make bench-load`.

    .venv/bin/python bench/bench_wrk.py                      # every path, 8 connections × 20 s
    .venv/bin/python bench/bench_wrk.py --paths list,history --seconds 10
    .venv/bin/python bench/bench_wrk.py --py-spy /tmp/wrk    # a profile of each path's window

`wrk` (a C load generator, the Debian package; installed by `scripts/install-wrk.sh`
when missing) drives the server, so the load does not take the server's cores the way
the Python driver (`bench/bench_load.py`, `make bench-load-py`) did: one wrk thread, N
connections, a Lua script per path that sends each request as another user (their token,
their sessions in turn). The server is `make run`'s: uvicorn with `--workers` processes
(default `WEB_CONCURRENCY`), auth on, the local embedder unless `--embedder fake`, no
periodic jobs; the database a fresh `navi_bench_wrk` (embedded PostgreSQL, or
`DATABASE_URL`'s loopback server). Setup as bench_load's: `--users` users, 4 sessions of
24 messages each, 10 facts each, the raw index built.

Paths (`--paths`, in this order):
- append1 / append8: `POST /sessions/{id}/messages` with 1 or 8 messages, the users'
  sessions in turn (messages/s = requests/s × size);
- list: `GET /sessions?limit=20`; history: `GET /sessions/{id}/messages?limit=50`;
- memory_search: `POST /memory/search` scope all, k 5, 50 distinct queries in turn;
- mixed: every path above at random (append1 ×2, the others ×1), `--mixed-connections`.

Each path: `--warmup` seconds of the same load first (not counted), then `--seconds`
measured. Printed per path: requests/s, wrk's latency p50 / p90 / p99 (at the client,
loopback), non-2xx answers and socket errors, and CPU per request (user + system) of the
server processes, of PostgreSQL (its own postmaster's tree, or the bench database's
backends on a shared server) and of wrk itself.
"""

from __future__ import annotations

import argparse
import asyncio
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

from _agent import ADMIN_TOKEN, agent_settings
from _app import configure_logging, get_settings
from _common import (
    fake_ollama_process,
    fresh_database,
    loadavg,
    print_table,
    serve_workers,
    server_line,
    step,
    write_results,
)
from _profile import load as load_profile
from _profile import report as profile_report
from bench_load import (
    TOPICS,
    User,
    build_raw_index,
    check_loopback,
    cpu_probe,
    find_py_spy,
    sanity,
    setup,
    start_py_spy,
    worker_pids,
)

PATHS = ("append1", "append8", "list", "history", "memory_search", "mixed")
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
    return LUA % {"users": entries, "queries": queries, "path": path, "seed": seed}


LUA = r"""
local users = {
%(users)s
}
local queries = {
%(queries)s
}
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
    before, client0, t0 = probe.snapshot(), children_cpu_ms(), time.perf_counter()
    text = run_wrk(wrk, server.base_url, script, connections, args.seconds)
    after, client1, wall = probe.snapshot(), children_cpu_ms(), time.perf_counter() - t0
    out = parse_wrk(text)
    n = max(out.get("requests", 0), 1)
    cpu = type(probe).delta(before, after)
    pg = cpu["postgres" if args.embedded else "postgres_db_backends"]
    out.update(
        path=path,
        connections=connections,
        seconds=round(wall, 1),
        app_ms=round(cpu["app"] / n, 3),
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


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    table = []
    for r in rows:
        size = 8 if r["path"] == "append8" else 1
        rate = f"{r.get('req_per_s', 0):,.0f}"
        if r["path"].startswith("append"):
            rate += f" ({r.get('req_per_s', 0) * size:,.0f} msgs/s)"
        table.append([
            r["path"], r["connections"], rate, r.get("p50_ms"), r.get("p90_ms"),
            r.get("p99_ms"), r["non_2xx"] + r["socket_errors"], r["app_ms"], r["pg_ms"],
            r["wrk_ms"],
        ])  # fmt: skip
    print_table(
        ["path", "conns", "req/s", "p50 ms", "p90 ms", "p99 ms", "errors",
         "app CPU ms/req", "PG CPU ms/req", "wrk CPU ms/req"],
        table,
        title=(
            f"\nwrk 1 thread, {args.seconds:g} s a path after {args.warmup:g} s of warm-up; "
            f"{args.workers} worker(s), embedder {args.embedder}; load average {loadavg()} "
            f"on {os.cpu_count()} cores"
        ),
    )  # fmt: skip
    for r in rows:
        if "profile" in r:
            print(f"\npy-spy, {r['path']}:\n{r['profile']}")


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    wrk = ensure_wrk()
    args.spy_binary = find_py_spy() if args.py_spy else None
    if os.environ.get("DATABASE_URL", "").strip():
        check_loopback(os.environ["DATABASE_URL"])
    target = fresh_database("navi_bench_wrk")
    args.embedded = target.embedded
    print(server_line(target))
    fake, fake_url = fake_ollama_process(get_settings().vector_dim)
    settings = agent_settings(fake_url, {}, args.embedder)
    if args.replica:
        settings = with_replica(settings, args.replica, target.url)
    configure_logging(settings.log_level, settings.log_json)
    server = None
    rows = []
    try:
        server = serve_workers(
            settings, target.url, args.workers, ADMIN_TOKEN, timing=False, server_kind="uvicorn"
        )
        args.clients, args.sessions, args.facts = args.users, 4, 10
        step(f"setup: {args.users} users × 4 sessions of 24 messages, 10 facts each …")
        users = await setup(server.base_url, args)
        step(f"raw index: {await build_raw_index(target.url, settings)}")
        step(f"check: {await sanity(server.base_url, users[0])}")
        probe, pg_how = cpu_probe(server, target.conninfo, fake.pid)
        step(f"PostgreSQL CPU: {pg_how}")
        with tempfile.TemporaryDirectory() as tmp:
            try:
                for path in args.paths:
                    script = Path(tmp) / f"{path}.lua"
                    script.write_text(lua_script(path, users, args.seed))
                    step(f"{path}: {args.warmup:g} s warm-up, {args.seconds:g} s measured …")
                    rows.append(measure(wrk, server, probe, path, script, args))
            finally:
                probe.backends.close()
    finally:
        if server is not None:
            server.stop()
        fake.kill()
        fake.wait()
    report(rows, args)
    return rows


def with_replica(settings: Any, replica: str, primary_url: str) -> Any:
    """Reads on the streaming replica `replica` (a server URL; the bench database's name
    is put in it), as `navi serve` runs with one: the workers share the users' write
    positions (issue 36) when this checkout has the table."""
    import dataclasses

    from sqlalchemy.engine import make_url

    database = make_url(primary_url).database
    url = make_url(replica).set(database=database).render_as_string(hide_password=False)
    try:
        from app.db.write_positions import create_shared
    except ImportError:  # a checkout from before issue 36: positions are per process
        step("replica: write positions per process (no shared table in this checkout)")
    else:
        step(
            f"replica: write positions shared by the workers ({create_shared(Path(tempfile.gettempdir()))})"
        )
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
        help="uvicorn workers (default as `make run`: WEB_CONCURRENCY, else one per core)",
    )
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
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
    if args.embedder == "local":  # the database's vector columns in the model's dimension
        os.environ["EMBEDDING_PROVIDER"] = "local"
        os.environ.pop("EMBEDDING_DIM", None)
        get_settings.cache_clear()
    rows = asyncio.run(bench(args))
    data = {"paths": rows, "workers": args.workers, "embedder": args.embedder}
    write_results("wrk.json", data)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1, default=str))
    sys.exit(1 if any(r["non_2xx"] + r["socket_errors"] for r in rows) else 0)


if __name__ == "__main__":
    main()
