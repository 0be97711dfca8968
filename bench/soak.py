"""A fault soak (issue 45 item 2): `make soak` (ARGS="--minutes 2").

    .venv/bin/python bench/soak.py --minutes 2          # the CI run
    .venv/bin/python bench/soak.py                      # 10 minutes, ~30 faults

Not a benchmark: a run that ends with a verdict (exit 1 on any violation). It lives in
bench/ because it starts the service exactly as the benches do (`_common.serve_navi`:
`python -m app.cli serve`, `--workers` web workers, the periodic jobs and the indexer
on, as `make run`) and takes every `app.*`/`tests.*` name through `_app.py`, which
tests/unit/test_bench_imports.py checks.

What it starts itself, so it can break it: a PostgreSQL of its own (tests/fakes/
pg_cluster.py: the embedded server's binaries, a temporary data directory, durable
commits — `synchronous_commit = on`, so an immediate shutdown loses nothing acknowledged)
and the fake Ollama in this process (a turn's model calls `memory_search`, then answers).

1. `--users` users, `--clients` asyncio clients each (httpx), drawing operations:
   appends (1–3 messages) to their sessions, turns with a tool round
   (`POST /sessions/{id}/turns`), fact saves and deletes, forgets of secrets planted
   earlier, compactions, memory searches, imports of an export (fresh ids and markers)
   into new users' accounts, uploads of small files (bench/_soak_load.py). Every answer is
   recorded: 2xx is acknowledged, anything else (or no answer) unknown.
2. Meanwhile the faults, one at a time, in turn: kill -9 of a web worker, kill -9 of
   the indexer, `pg_ctl restart -m immediate`, PostgreSQL frozen 10 s (SIGSTOP/SIGCONT
   of the postmaster and its children), the model server gone 10 s, the model answering
   garbage 10 s, the session files' disk full 10 s (a tmpfs mounted over the service's
   `session_files/` before it starts, filled with a ballast file: bench/_soak_disk.py;
   left out, saying why, where mounting is not permitted — it needs root).
3. Then the checker (bench/_soak_check.py), once the raw index converged: messages
   exactly once with gapless sequence numbers, facts as acknowledged, forgotten texts in
   no row of any table and not found through the API, the raw index covering every
   message exactly once, every acknowledged upload listed and downloading its bytes,
   no 5xx but 503 with Retry-After (or 507 while the disk was full), and per fault how
   long until each kind of request succeeded again. The table, the violations, exit 1
   if any.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agent import ADMIN_TOKEN, app_files  # noqa: E402
from _app import FakeOllama, PgCluster, get_settings  # noqa: E402
from _common import auth, loadavg, print_table, serve_navi, step, write_results  # noqa: E402
from _soak_check import (  # noqa: E402
    check_api,
    check_facts,
    check_files,
    check_forgotten,
    check_messages,
    check_raw_index,
    converge,
)
from _soak_disk import DISK_MB, disk_full, leftovers, mount_tmpfs, unmount  # noqa: E402
from _soak_load import KINDS, PROFILES, Client, Ledger, marker, model_reply  # noqa: E402

DATABASE = "navi_soak"
#: a kind that has not succeeded this long after its fault ended is a violation
RECOVERY_LIMIT_SECONDS = 30.0
# After a model fault the breaker lets a probe through only every LLM_BREAKER_RESET_SECONDS
# (30): a turn may wait that long after the model is back, by design, before the limit.
MODEL_FAULT_GRACE_SECONDS = 30.0
HOLD_SECONDS = 10.0
#: a session refusing turns (409) longer than a dead turn's lease (60 s) and 30 s more
TURN_REFUSED_LIMIT_SECONDS = 90.0


@dataclass
class Fault:
    name: str
    at: float  # seconds since the workload began
    held: float = 0.0  # how long the fault lasted
    detail: str = ""


@dataclass
class Rig:
    """What the faults act on."""

    server: Any  # _common.NaviServer
    cluster: PgCluster
    fake: FakeOllama
    ledger: Ledger
    rng: random.Random
    workers: int
    watchers: list[asyncio.Task[None]] = field(default_factory=list)
    leases_left: int = 0  # turn leases still held once the workload stopped
    files_root: Path | None = None  # the session files' tmpfs (None: not mounted)

    def children(self, needle: str) -> list[psutil.Process]:
        try:
            procs = psutil.Process(self.server.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        out = []
        for p in procs:
            try:
                if needle in " ".join(p.cmdline()):
                    out.append(p)
            except psutil.Error:
                pass
        return out


# ------------------------------------------------------------------ the faults
async def kill_child(rig: Rig, fault: Fault, needle: str, want: int) -> None:
    """kill -9 one of the service's children matching `needle`; a watcher notes how
    long until `want` of them run again (the supervisor's restart)."""
    victims = rig.children(needle)
    if not victims:
        fault.detail = f"no process matching {needle!r}"
        return
    victim = rig.rng.choice(victims)
    os.kill(victim.pid, signal.SIGKILL)
    killed = time.monotonic()

    async def watch() -> None:
        while time.monotonic() - killed < 60:
            await asyncio.sleep(0.2)
            alive = [p for p in rig.children(needle) if p.pid != victim.pid]
            if len(alive) >= want:
                fault.detail = (
                    f"pid {victim.pid}; a new one after {time.monotonic() - killed:.1f} s"
                )
                return
        fault.detail = f"pid {victim.pid}; not replaced within 60 s"

    fault.detail = f"pid {victim.pid}"
    rig.watchers.append(asyncio.create_task(watch()))


async def kill_worker(rig: Rig, fault: Fault) -> None:
    await kill_child(rig, fault, "spawn_main", rig.workers)


async def kill_indexer(rig: Rig, fault: Fault) -> None:
    await kill_child(rig, fault, "app.cli indexer", 1)


async def pg_restart(rig: Rig, fault: Fault) -> None:
    await asyncio.to_thread(rig.cluster.restart_immediate)


async def pg_freeze(rig: Rig, fault: Fault) -> None:
    await asyncio.to_thread(rig.cluster.freeze)
    try:
        await asyncio.sleep(HOLD_SECONDS)
    finally:
        await asyncio.to_thread(rig.cluster.thaw)


async def model_gone(rig: Rig, fault: Fault) -> None:
    await asyncio.to_thread(rig.fake.fail, "refuse")
    try:
        await asyncio.sleep(HOLD_SECONDS)
    finally:
        await asyncio.to_thread(rig.fake.recover)


async def model_garbage(rig: Rig, fault: Fault) -> None:
    rig.fake.fail("malformed")  # 200 with a body that is not JSON, every path
    try:
        await asyncio.sleep(HOLD_SECONDS)
    finally:
        rig.fake.recover()


async def data_disk_full(rig: Rig, fault: Fault) -> None:
    if rig.files_root is None:
        fault.detail = "no tmpfs mounted: nothing filled"
        return
    fault.detail = await disk_full(rig.files_root, rig.ledger, HOLD_SECONDS)


FAULTS: list[tuple[str, Callable[[Rig, Fault], Awaitable[None]], float]] = [
    ("kill -9 a web worker", kill_worker, 0.0),
    ("kill -9 the indexer", kill_indexer, 0.0),
    ("PostgreSQL restart -m immediate", pg_restart, 2.0),
    (f"PostgreSQL frozen {HOLD_SECONDS:g} s", pg_freeze, HOLD_SECONDS),
    (f"model server gone {HOLD_SECONDS:g} s", model_gone, HOLD_SECONDS),
    (f"model answers garbage {HOLD_SECONDS:g} s", model_garbage, HOLD_SECONDS),
    (f"data disk full {HOLD_SECONDS:g} s", data_disk_full, HOLD_SECONDS),
]
DISK_FAULT = FAULTS[-1][0]


async def run_faults(rig: Rig, seconds: float, only: str = "") -> list[Fault]:
    """The faults one after another, in turn, from after a warm-up until `seconds`,
    leaving a quiet tail to see the last one recover (`only`: those whose name holds it;
    the full disk only with its tmpfs mounted)."""
    ledger = rig.ledger
    kinds = [
        f
        for f in FAULTS
        if only.lower() in f[0].lower() and (rig.files_root is not None or f[0] != DISK_FAULT)
    ]
    warmup, tail = min(10.0, seconds / 10), min(20.0, seconds / 6)
    cycle = sum(h for _, _, h in kinds)
    gap = max(6.0, min(12.0, (seconds - warmup - tail - cycle) / len(kinds)))
    await asyncio.sleep(warmup)
    faults: list[Fault] = []
    while True:
        name, inject, held = kinds[len(faults) % len(kinds)]
        if ledger.now() + held + tail > seconds:
            break
        fault = Fault(name, ledger.now())
        step(f"fault {len(faults) + 1}: {name}")
        await inject(rig, fault)
        fault.held = ledger.now() - fault.at
        faults.append(fault)
        await asyncio.sleep(gap)
    await asyncio.sleep(max(0.0, seconds - ledger.now()))
    return faults


# ------------------------------------------------------------------ the run
async def import_template(admin: httpx.AsyncClient) -> str:
    """The export of a user with one session of 4 messages (each starting with its
    marker): what every import restores, its ids and markers replaced."""
    r = await admin.post("/admin/users", json={"name": "soak-template"})
    r.raise_for_status()
    user_id = r.json()["id"]
    r = await admin.post(f"/admin/users/{user_id}/tokens", json={"name": "soak"})
    r.raise_for_status()
    headers = auth(r.json()["token"])
    r = await admin.post("/sessions", json={"profile_id": "soak", "name": "imported"}, headers=headers)  # fmt: skip
    r.raise_for_status()
    sid = r.json()["id"]
    msgs = [
        {"role": ("user", "assistant")[i % 2], "content": f"{marker()} imported line {i}"}
        for i in range(4)
    ]
    r = await admin.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=headers)
    r.raise_for_status()
    r = await admin.get(f"/admin/users/{user_id}/export")
    r.raise_for_status()
    return r.text


async def setup_users(base: str, args: argparse.Namespace, ledger: Ledger) -> list[Client]:
    clients = []
    async with httpx.AsyncClient(base_url=base, headers=auth(ADMIN_TOKEN), timeout=30) as admin:
        template = await import_template(admin)
        for u in range(args.users):
            r = await admin.post("/admin/users", json={"name": f"soak-{u}"})
            r.raise_for_status()
            user_id = r.json()["id"]
            r = await admin.post(f"/admin/users/{user_id}/tokens", json={"name": "soak"})
            r.raise_for_status()
            token = r.json()["token"]
            for c in range(args.clients):
                http = httpx.AsyncClient(base_url=base, headers=auth(token), timeout=60)
                rng = random.Random(args.seed * 1000 + u * 10 + c)
                client = Client(http, user_id, ledger, rng, token=token, template=template)
                client.admin = httpx.AsyncClient(base_url=base, headers=auth(ADMIN_TOKEN), timeout=60)  # fmt: skip
                await client.setup(args.sessions)
                clients.append(client)
    return clients


async def workload(rig: Rig, args: argparse.Namespace) -> tuple[list[Client], list[Fault]]:
    """The users set up, then their clients and the faults for `--minutes`."""
    clients = await setup_users(rig.server.base_url, args, rig.ledger)
    rig.ledger.t0 = time.monotonic()
    step(f"workload: {len(clients)} clients for {args.minutes:g} min, faults meanwhile")
    seconds = args.minutes * 60
    stop = asyncio.Event()
    tasks = [asyncio.create_task(c.run(stop)) for c in clients]
    try:
        faults = await run_faults(rig, seconds, args.only)
    finally:
        stop.set()
        rig.cluster.thaw()
        rig.fake.recover()
        await asyncio.wait(tasks, timeout=120)
        for watcher in rig.watchers:
            await asyncio.wait_for(watcher, timeout=60)
        for c in clients:
            c.end_refusal()
            await c.http.aclose()
            if c.admin is not None:
                await c.admin.aclose()
    return clients, faults


def recovery(ledger: Ledger, faults: list[Fault]) -> tuple[list[list[object]], list[str]]:
    """Per fault: its start, how long it held, the answers that were not 2xx until the
    next fault, and per kind the seconds from the fault to the first 2xx of a request
    sent after it."""
    rows: list[list[object]] = []
    violations: list[str] = []
    for i, f in enumerate(faults):
        until = faults[i + 1].at if i + 1 < len(faults) else float("inf")
        failed = [s for t, _, s in ledger.failures if f.at <= t < until]
        n503 = sum(s == 503 for s in failed)
        row: list[object] = [
            i + 1,
            f.name,
            f"{f.at:.0f}",
            f"{f.held:.1f}",
            n503,
            len(failed) - n503,
        ]
        worst = 0.0
        limit = RECOVERY_LIMIT_SECONDS + MODEL_FAULT_GRACE_SECONDS * f.name.startswith("model")
        for kind in KINDS:
            answered = [end for start, end in ledger.ok_times.get(kind, []) if start >= f.at]
            if not answered:
                # a kind nobody tried after the fault proves nothing either way; one that
                # kept failing is a violation once the run went on past the limit
                tried = [t for t, k, _ in ledger.failures if k == kind and t >= f.at]
                row.append("never" if tried else "-")
                if tried and max(tried) - (f.at + f.held) > limit:
                    violations.append(f"fault {i + 1} ({f.name}): no {kind} succeeded after it")
                continue
            took = min(answered) - f.at
            worst = max(worst, took - f.held)
            row.append(f"{took:.1f}")
            if took - f.held > limit:
                violations.append(f"fault {i + 1} ({f.name}): {kind} recovered {took - f.held:.1f} s after it ended")  # fmt: skip
        rows.append([*row, f"{worst:.1f}", f.detail])
    return rows, violations


def tamper(conninfo: str, ledger: Ledger) -> None:
    """`--tamper`: what the checker must catch, done to the database behind the
    service's back — an acknowledged message deleted, an acknowledged fact deleted, a
    forgotten text written back into a raw chunk."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        mk = next(m for m, acked in ledger.messages.items() if acked and not m.startswith("re"))
        for table in ("session_messages", "session_messages_archive"):
            conn.execute(f"DELETE FROM {table} WHERE content LIKE %s", (mk + "%",))
        (user, key) = next(uk for uk, state in ledger.facts.items() if state == "saved")
        conn.execute("DELETE FROM memory_facts WHERE user_id = %s AND key = %s", (user, key))
        user, text = ledger.forgotten[0]
        conn.execute(
            "UPDATE memory_chunks SET content = content || ' ' || %s"
            " WHERE id = (SELECT id FROM memory_chunks WHERE user_id = %s LIMIT 1)",
            (text, user),
        )
    step(f"tampered: message {mk} deleted, fact {key} deleted, {text} written into a chunk")


def check(rig: Rig, clients: list[Client], conninfo: str, converge_seconds: float, tampered: bool = False) -> dict[str, list[str]]:  # fmt: skip
    tokens = {c.user_id: c.token for c in clients} | rig.ledger.import_users
    users = sorted(tokens)
    step(
        f"converging: the raw index to every next_seq, forget jobs (at most {converge_seconds:g} s)"
    )
    waited, behind = converge(conninfo, users, converge_seconds)
    step(f"converged after {waited:.1f} s" if not behind else f"not converged after {waited:.1f} s")
    found: dict[str, list[str]] = {"converged: raw index, forget jobs": behind}
    if tampered:
        tamper(conninfo, rig.ledger)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        found["messages exactly once, gapless seq"] = check_messages(conn, rig.ledger, users)
        found["facts as acknowledged"] = check_facts(conn, rig.ledger)
        found["forgotten texts in no table"] = check_forgotten(conn, rig.ledger)
        found["raw index: each message in one chunk"] = check_raw_index(conn, users)
        row = conn.execute(
            "SELECT count(*) FROM sessions WHERE user_id = ANY(%s) AND session_metadata ? 'running_turn'",
            (users,),
        ).fetchone()
        rig.leases_left = int(row[0]) if row else 0
    alive = rig.server.proc.poll() is None
    found["the service still runs"] = [] if alive else [f"exited with {rig.server.proc.returncode}"]
    try:
        found["the API agrees"] = check_api(rig.server.base_url, tokens, rig.ledger, users)
        found["uploads listed, bytes intact"] = check_files(rig.server.base_url, tokens, rig.ledger)
    except httpx.HTTPError as exc:
        found["the API agrees"] = [f"the API did not answer: {exc!r}"]
    found["no 5xx but 503 + Retry-After (507: disk full)"] = list(rig.ledger.bad)
    if rig.files_root is not None:
        found["no temporary file left on disk"] = leftovers(rig.files_root)
    found["no 4xx against an acknowledged write"] = list(rig.ledger.odd)
    return found


def report(rig: Rig, clients: list[Client], faults: list[Fault], found: dict[str, list[str]], leases_left: int, args: argparse.Namespace) -> bool:  # fmt: skip
    ledger = rig.ledger
    rows, slow = recovery(ledger, faults)
    found["every fault recovered within 30 s"] = slow
    print_table(
        [
            "#",
            "fault",
            "at s",
            "held s",
            "503",
            "other non-2xx",
            *KINDS,
            "worst after end",
            "detail",
        ],  # fmt: skip
        rows,
        title=(
            f"\n== soak: {args.minutes:g} min, {args.users} users x {args.clients} clients, "
            f"{args.workers} web workers + indexer; seconds from each fault to the first 2xx "
            f"of each kind sent after it; load average {loadavg()} on {os.cpu_count()} cores"
        ),
    )
    per_kind = []
    for kind in KINDS:
        n = {s: c for (k, s), c in ledger.statuses.items() if k == kind}
        ok = sum(c for s, c in n.items() if 200 <= s < 300)
        other = ", ".join(f"{s or 'no answer'}: {c}" for s, c in sorted(n.items()) if not 200 <= s < 300)  # fmt: skip
        per_kind.append([kind, sum(n.values()), ok, other or "-"])
    print_table(["kind", "requests", "2xx", "not 2xx"], per_kind, title="\n== answers")
    refused = sorted((c.refused_longest for c in clients), reverse=True)
    print(
        f"\nturn sessions that refused turns (409 'a turn is already running'): "
        f"{sum(r > 0 for r in refused)} of {len(clients)}, the longest {refused[0]:.0f} s; "
        f"turn leases left at the end: {leases_left}"
    )
    if refused[0] > TURN_REFUSED_LIMIT_SECONDS:
        found["every fault recovered within 30 s"].append(
            f"a turn session refused turns (409) for {refused[0]:.0f} s"
        )
    acked = sum(ledger.messages.values())
    print(
        f"\nmessages acknowledged {acked}, unknown {len(ledger.messages) - acked}; facts "
        f"{dict(sorted(_count(ledger.facts.values()).items()))}; forgotten texts {len(ledger.forgotten)}"
    )
    if ledger.details:
        print("\nnot 2xx, by kind and detail:")
        for line, n in ledger.details.most_common(15):
            print(f"  {n:5d}  {line}")
    check_rows = [[name, "ok" if not v else f"{len(v)} VIOLATION(S)"] for name, v in found.items()]
    print_table(["check", "result"], check_rows, title="\n== checks")
    for name, v in found.items():
        for line in v[:20]:
            print(f"  {name}: {line}")
        if len(v) > 20:
            print(f"  {name}: … {len(v) - 20} more")
    write_results(
        "soak.json",
        {"faults": [dataclasses.asdict(f) for f in faults], "recovery": rows,
         "statuses": {f"{k} {s}": c for (k, s), c in ledger.statuses.items()}, "violations": found,
         "failures": ledger.failures, "details": dict(ledger.details)},
    )  # fmt: skip
    return not any(found.values())


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def start_postgres() -> PgCluster:
    """The soak's own server, durable (every commit flushed before it is answered) and
    with room for two workers' pools, the indexer's and the jobs'."""
    cluster = PgCluster.create()
    with psycopg.connect(cluster.libpq_url("postgres"), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET synchronous_commit = on")
        conn.execute("ALTER SYSTEM SET max_connections = 200")
    cluster.stop()
    cluster.start()
    cluster.create_database(DATABASE)
    return cluster


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="the workload's length")
    p.add_argument("--users", type=int, default=3)
    p.add_argument("--clients", type=int, default=2, help="asyncio clients per user")
    p.add_argument("--sessions", type=int, default=3, help="sessions each client appends to")
    p.add_argument("--workers", type=int, default=2, help="web workers")
    p.add_argument(
        "--converge-seconds",
        type=float,
        default=120.0,
        help="how long to wait, once the workload stopped, for the raw index to cover every "
        "message and every forget job to end (a forget step the database failed is resumed "
        "once its heartbeat is 60 s old, by a job every FORGET_RESUME_SECONDS, 30)",
    )
    p.add_argument("--seed", type=int, default=45)
    p.add_argument(
        "--only",
        default="",
        metavar="WORDS",
        help="only the faults whose name holds WORDS (e.g. 'frozen'), to chase one kind",
    )
    p.add_argument(
        "--tamper",
        action="store_true",
        help="a check of the checker: before it runs, delete an acknowledged message and "
        "fact and write a forgotten text into a chunk (the run must FAIL)",
    )
    args = p.parse_args()
    if not 0.5 <= args.minutes <= 240:
        p.error("--minutes: 0.5–240")
    if not any(args.only.lower() in name.lower() for name, _, _ in FAULTS):
        p.error(f"--only: no fault's name holds {args.only!r}")
    random.seed(args.seed)
    settings = get_settings()
    fake = FakeOllama(dim=settings.vector_dim, default_reply=model_reply)
    fake.start()
    cluster = server = files_root = None
    try:
        step("PostgreSQL of the soak's own (initdb, durable commits)")
        cluster = start_postgres()
        settings = dataclasses.replace(
            settings,
            auth_enabled=True,
            admin_token=ADMIN_TOKEN,
            ollama_host=fake.url,
            ollama_model="fake-chat:latest",
            embedding_provider="ollama",
            log_level="warning",
            log_json=False,
            **app_files(PROFILES, prefix="navi-soak-"),
        )
        files_root = Path(settings.data_dir) / "session_files"
        why = mount_tmpfs(files_root)
        if why:
            files_root = None
            step(f"the fault '{DISK_FAULT}' is left out: {why} (it needs root)")
            if not any(args.only.lower() in n.lower() for n, _, _ in FAULTS if n != DISK_FAULT):
                sys.exit(f"soak: --only {args.only!r} leaves no fault to run")
        else:
            step(f"the session files on a tmpfs of {DISK_MB} MB (for '{DISK_FAULT}')")
        step(f"the service: python -m app.cli serve --workers {args.workers} (jobs, indexer)")
        server = serve_navi(settings, cluster.url(DATABASE), args.workers, ADMIN_TOKEN)
        ledger = Ledger()
        rig = Rig(server, cluster, fake, ledger, random.Random(args.seed), args.workers)
        rig.files_root = files_root
        clients, faults = asyncio.run(workload(rig, args))
        found = check(rig, clients, cluster.libpq_url(DATABASE), args.converge_seconds, args.tamper)
        passed = report(rig, clients, faults, found, rig.leases_left, args)
    finally:
        if server is not None:
            server.stop()
        fake.stop()
        if cluster is not None:
            cluster.destroy()
        if files_root is not None:
            unmount(files_root)
    print("\nsoak: PASS" if passed else "\nsoak: FAIL", flush=True)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
