"""A worker joins the cluster and another leaves it while the API serves (issue 48, item 2).

A cluster of its own (never the suite's, TEST_CITUS_URL's): scripts/provision-citus.sh with
NAVI_CITUS_PORT / NAVI_CITUS_DATA_DIR moved (a coordinator and two workers on
$NAVI_REBALANCE_PORT .. +2, default 5470, under $NAVI_REBALANCE_DATA_DIR), made afresh
every run and stopped at the end. The app's schema is migrated into its `navi_test`,
seed users' data is loaded by SQL (what the moves copy besides the load's rows), the app
runs in process against the coordinator, and a few users (at least one in every shard
group, so every move moves some of them) each run a loop of appends, fact saves,
searches, history reads and forgets (a fact saved, then its text forgotten), recording
every answer, its latency, its user and its phase. While that runs:

1. scripts/citus-add-worker.sh starts a third worker (port +3), adds it to every citus
   database and rebalances online (`citus_rebalance_start`, logical replication moves);
2. scripts/citus-drain-worker.sh drains worker1 (`citus_rebalance_start(drain_only)`)
   and removes it (`citus_remove_node`), then stops its server.

Then: every acknowledged message is stored exactly once, the sequence numbers of each
session run 0..n-1 with no gap, every acknowledged fact is there and every forgotten one
gone; no answer was an error other than a 503, which the client retried; the shards sit
on the new worker after the add and none on the drained one after the drain; and every
statement the app ran during the load plans to one shard (the plan check, against the
cluster as it is after each step). The figures (move durations, p50/p99 before and
during each move, the 503s) go into the run's summary line.

Runs in the Citus phase of .ci/run (TEST_CITUS_URL set), or alone with NAVI_REBALANCE_TEST=1
(`make test-rebalance`); needs root and Citus installed (scripts/provision-citus.sh).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.db import migrate
from app.db.engine import create_engine, normalize_url
from tests.citus import cluster
from tests.citus.multi_shard import ALLOWED
from tests.citus.plans import check
from tests.citus.statement_log import Entry, StatementLog

PG_BIN = Path("/usr/lib/postgresql/15/bin")
CITUS_SO = Path("/usr/lib/postgresql/15/lib/citus.so")
ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
BASE_PORT = int(os.environ.get("NAVI_REBALANCE_PORT", "5470"))
DATA_DIR = Path(
    os.environ.get("NAVI_REBALANCE_DATA_DIR", "/var/lib/postgresql/navi-citus-rebalance")
)
NEW_PORT = BASE_PORT + 3
DRAINED_PORT = BASE_PORT + 1  # worker1, a member from the start
HOST = "127.0.0.1"
ADMIN_TOKEN = "navi_rebalance_admin_token_0123456789abcdefghijkl"

USERS = int(os.environ.get("NAVI_REBALANCE_USERS", "6"))
MAX_USERS = 40  # more are added until every shard group holds some
# Users with data loaded by SQL before the load starts (not part of it): what the moves
# copy besides the load's rows. `make bench-rebalance` raises both.
SEED_USERS = int(os.environ.get("NAVI_REBALANCE_SEED_USERS", "20"))
SEED_ROWS = int(os.environ.get("NAVI_REBALANCE_SEED_ROWS", "100"))  # messages and facts each
PAUSE = 0.05  # between one user's requests: a steady load the 2 cores can carry
RETRY_503_PAUSE = 0.2
RETRY_503_MAX = 100
BEFORE_SECONDS = 4.0
BETWEEN_SECONDS = 2.0
FORGET_JOB_SECONDS = 60.0  # a forget that answered 202, followed to its end

pytestmark = [
    pytest.mark.citus,
    pytest.mark.skipif(
        cluster.citus_url() is None and not os.environ.get("NAVI_REBALANCE_TEST"),
        reason="needs TEST_CITUS_URL (the Citus phase of .ci/run) or NAVI_REBALANCE_TEST=1",
    ),
    pytest.mark.skipif(
        not CITUS_SO.exists() or os.geteuid() != 0,
        reason="builds a cluster of its own: needs root and Citus installed",
    ),
]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "NAVI_CITUS_PORT": str(BASE_PORT),
        "NAVI_CITUS_DATA_DIR": str(DATA_DIR),
    }


def _last_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _stop_all() -> None:
    if not DATA_DIR.is_dir():
        return
    for node in sorted(DATA_DIR.iterdir()):
        if (node / "postmaster.pid").exists():
            subprocess.run(
                [
                    "runuser",
                    "-u",
                    "postgres",
                    "--",
                    str(PG_BIN / "pg_ctl"),
                    "-D",
                    str(node),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
                check=False,
                capture_output=True,
            )


@pytest.fixture(scope="module")
def rebalance_cluster() -> Iterator[str]:
    """A fresh coordinator + 2 workers of the test's own; the URL of its navi_test."""
    _stop_all()
    shutil.rmtree(DATA_DIR, ignore_errors=True)
    started = time.perf_counter()
    run = subprocess.run(
        ["bash", str(SCRIPTS / "provision-citus.sh")],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = _last_line(run.stdout)
    assert line.startswith("TEST_CITUS_URL="), run.stdout
    provisioned = time.perf_counter() - started
    url = normalize_url(line.removeprefix("TEST_CITUS_URL="))
    migrate.upgrade(url)
    cluster.SUMMARY.append(
        f"rebalance: own cluster on {BASE_PORT}-{BASE_PORT + 2} provisioned in"
        f" {provisioned:.1f} s, migrated in {time.perf_counter() - started - provisioned:.1f} s"
    )
    try:
        yield url
    finally:
        _stop_all()


# ---------------------------------------------------------------------------
# The load
# ---------------------------------------------------------------------------


@dataclass
class Answer:
    op: str
    phase: str
    status: int
    seconds: float  # from the first try to the final answer (retries included)
    retried_503: int
    user: str


@dataclass
class UserLoad:
    user_id: str
    headers: dict[str, str]
    session_id: str
    messages: dict[str, int] = field(default_factory=dict)  # content -> acknowledged seq
    facts: dict[str, str] = field(default_factory=dict)  # key -> value, acknowledged
    forgotten: dict[str, str] = field(default_factory=dict)  # key -> secret, forgotten
    pending: dict[str, str] = field(default_factory=dict)  # key -> forget job answered 202


@dataclass
class Load:
    client: AsyncTestClient
    phase: str = "before"
    stop: bool = False
    answers: list[Answer] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # any answer but 2xx or a retried 503
    owners: dict[str, str] = field(default_factory=dict)  # Authorization -> user id

    async def call(self, op: str, method: str, url: str, **kwargs: Any) -> Any:
        """One request, retried on 503 (as a client honouring `Retry-After`, but sooner)."""
        phase = self.phase
        user = self.owners.get(kwargs.get("headers", {}).get("Authorization", ""), "")
        started = time.perf_counter()
        retried = 0
        while True:
            try:
                r = await self.client.request(method, url, **kwargs)
            except Exception as exc:  # noqa: BLE001 - every answer is reported
                self.failures.append(f"{phase} {op}: {type(exc).__name__}: {exc}")
                return None
            if r.status_code == 503 and retried < RETRY_503_MAX:
                retried += 1
                await asyncio.sleep(RETRY_503_PAUSE)
                continue
            break
        self.answers.append(
            Answer(op, phase, r.status_code, time.perf_counter() - started, retried, user)
        )
        if r.status_code >= 300:
            self.failures.append(f"{phase} {op}: {r.status_code} {r.text[:300]}")
            return None
        return r.json() if r.content else {}

    async def finish_forgets(self, u: UserLoad) -> None:
        """The forgets that answered 202, followed to their end (the job goes on)."""
        deadline = time.monotonic() + FORGET_JOB_SECONDS
        for key, job in list(u.pending.items()):
            while True:
                r = await self.client.get(f"/memory/forget/jobs/{job}", headers=u.headers)
                state = r.json().get("state") if r.status_code == 200 else None
                if state == "done":
                    u.forgotten[key] = job
                    break
                if state == "failed" or time.monotonic() > deadline:
                    self.failures.append(f"forget job {job}: {r.status_code} {r.text[:300]}")
                    break
                await asyncio.sleep(0.2)

    async def user_loop(self, u: UserLoad) -> None:
        i = 0
        while not self.stop:
            i += 1
            tag = uuid.uuid4().hex[:12]
            body = {
                "messages": [
                    {"role": "user", "content": f"walk {i} with the dog, note {tag}a"},
                    {"role": "assistant", "content": f"noted the walk {i}, note {tag}b"},
                ]
            }
            out = await self.call(
                "append", "POST", f"/sessions/{u.session_id}/messages", json=body, headers=u.headers
            )
            if out is not None:
                for sent, ref in zip(body["messages"], out["messages"], strict=True):
                    u.messages[sent["content"]] = int(ref["sequence_number"])
            await asyncio.sleep(PAUSE)
            key, value = f"k{i}", f"likes colour number {i} ({tag})"
            fact = {"category": "load", "key": key, "value": value}
            if await self.call("fact", "POST", "/memory/facts", json=fact, headers=u.headers):
                u.facts[key] = value
            await asyncio.sleep(PAUSE)
            await self.call(
                "search",
                "POST",
                "/memory/search",
                json={"query": f"walk {i} dog"},
                headers=u.headers,
            )
            await asyncio.sleep(PAUSE)
            await self.call(
                "history",
                "GET",
                f"/sessions/{u.session_id}/messages",
                params={"limit": 20},
                headers=u.headers,
            )
            await asyncio.sleep(PAUSE)
            if i % 3 == 0:  # a fact saved, then its text forgotten
                secret = f"zebra{tag}"
                skey = f"s{i}"
                saved = await self.call(
                    "fact",
                    "POST",
                    "/memory/facts",
                    json={"category": "secret", "key": skey, "value": f"code {secret}"},
                    headers=u.headers,
                )
                if saved:
                    out = await self.call(
                        "forget", "POST", "/memory/forget", json={"text": secret}, headers=u.headers
                    )
                    if out is not None and "job_id" in out:  # 202: still running, followed later
                        u.pending[skey] = str(out["job_id"])
                    elif out is not None:
                        u.forgotten[skey] = secret
                        if out.get("total", 0) < 1:
                            self.failures.append(f"forget {secret}: nothing forgotten: {out}")
                await asyncio.sleep(PAUSE)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def _phase_figures(
    answers: list[Answer], phase: str, only: set[str] | None = None
) -> dict[str, Any]:
    mine = [a for a in answers if a.phase == phase and (only is None or a.user in only)]
    seconds = [a.seconds for a in mine]
    return {
        "requests": len(mine),
        "p50_ms": round(_pct(seconds, 0.50), 1),
        "p99_ms": round(_pct(seconds, 0.99), 1),
        "max_ms": round(max(seconds) * 1000, 1) if seconds else 0.0,
        "retried_503": sum(a.retried_503 for a in mine),
        "errors": sum(1 for a in mine if a.status >= 300),
        "slowest": max(mine, key=lambda a: a.seconds).op if mine else "",
    }


async def _script(*args: str) -> tuple[str, float, str]:
    """Run one of the operator's scripts without blocking the load; (last line, s, log)."""
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        "bash", *args, env=_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    seconds = time.perf_counter() - started
    assert proc.returncode == 0, f"{args[0]} failed:\n{err.decode()[-3000:]}"
    return _last_line(out.decode()), seconds, err.decode()


def _q(conn: psycopg.Connection, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return conn.execute(sql, params).fetchall()


def _seed(conn: psycopg.Connection, users: int, rows: int) -> None:
    """`users` users of their own, each with a session of `rows` messages and `rows`
    facts, inserted by SQL (INSERT … SELECT across the shards: test data, not app SQL)."""
    if users <= 0:
        return
    conn.execute(
        "insert into navi_users (id, name) select 'seed' || g, 'seed' || g"
        " from generate_series(1, %s) g",
        (users,),
    )
    conn.execute(
        "insert into sessions (id, profile_id, user_id, next_seq, next_display_index)"
        " select gen_random_uuid(), 'default', 'seed' || g, %s, %s from generate_series(1, %s) g",
        (rows, rows, users),
    )
    conn.execute(
        "insert into session_messages (session_id, sequence_number, display_index, role,"
        " content, user_id)"
        " select s.id, n, n, case when n %% 2 = 0 then 'user' else 'assistant' end,"
        " 'seeded message ' || n || ' of ' || s.user_id || ': ' || repeat('we talked about"
        " the garden, the dog and the trip to the coast. ', 4), s.user_id"
        " from sessions s cross join generate_series(0, %s - 1) n where s.user_id like 'seed%%'",
        (rows,),
    )
    conn.execute(
        "insert into memory_facts (user_id, category, key, value)"
        " select 'seed' || g, 'seeded', 'k' || n, 'a seeded fact number ' || n || ' of seed' || g"
        " from generate_series(1, %s) g cross join generate_series(1, %s) n",
        (users, rows),
    )


def _shards_per_node(conn: psycopg.Connection) -> dict[int, int]:
    rows = _q(
        conn,
        "select s.nodeport, count(*) from citus_shards s join pg_dist_partition p"
        " on p.logicalrelid = s.table_name where p.partmethod = 'h' group by s.nodeport",
    )
    return {int(port): int(n) for port, n in rows}


def _moves(conn: psycopg.Connection) -> list[tuple[int, float]]:
    """(job id, seconds) of every rebalance job of this database, oldest first."""
    rows = _q(
        conn,
        "select job_id, extract(epoch from finished_at - started_at) from pg_dist_background_job"
        " where state = 'finished' order by job_id",
    )
    return [(int(j), float(s or 0)) for j, s in rows]


def _report(figures: dict[str, Any]) -> None:
    """The figures as JSON into $NAVI_REBALANCE_REPORT, when set (bench, docs)."""
    report = os.environ.get("NAVI_REBALANCE_REPORT")
    if report:
        Path(report).write_text(json.dumps(figures, indent=1) + "\n")


def _plan_check(url: str, entries: list[Entry], when: str) -> int:
    with psycopg.connect(cluster.libpq(url), autocommit=True) as conn:
        verdicts = check(conn, entries, ALLOWED)
    bad = [v for v in verdicts if not v.ok and v.unplanned is None]
    assert verdicts, "no app statement recorded during the load"
    assert not bad, f"{when}: statements that do not route to one shard:\n" + "\n".join(
        v.describe() for v in bad
    )
    return len(verdicts)


@pytest.fixture
async def served(
    rebalance_cluster: str, settings: Settings
) -> AsyncIterator[tuple[AsyncTestClient, str]]:
    from app.asgi import create_app

    engine = create_engine(rebalance_cluster)
    app = create_app(
        dataclasses.replace(settings, admin_token=ADMIN_TOKEN, db_pool_size=20),
        engine=engine,
        background_jobs=False,
    )
    async with AsyncTestClient(app, raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield client, rebalance_cluster
    await engine.dispose()


def _placements(conn: psycopg.Connection, users: list[UserLoad]) -> dict[str, tuple[int, int]]:
    """user id -> (the shard of their `sessions` rows: their group, the port holding it)."""
    out = {}
    for u in users:
        ((shard,),) = _q(
            conn, "select get_shard_id_for_distribution_column('sessions', %s::text)", u.user_id
        )
        ((port,),) = _q(conn, "select nodeport from citus_shards where shardid = %s", shard)
        out[u.user_id] = (int(shard), int(port))
    return out


async def _users(client: AsyncTestClient, conn: psycopg.Connection) -> list[UserLoad]:
    """USERS load users, more when needed until every shard group holds one (so every
    move moves some of the load's users)."""
    (groups,) = _q(
        conn, "select count(*) from pg_dist_shard where logicalrelid = 'sessions'::regclass"
    )[0]
    users: list[UserLoad] = []
    for n in range(MAX_USERS):
        if len(users) >= USERS and len({g for g, _ in _placements(conn, users).values()}) == groups:
            break
        r = await client.post(
            "/admin/users", json={"name": f"load{n}", "permissions": [], "is_admin": False}
        )
        assert r.status_code == 201, r.text
        uid = r.json()["id"]
        r = await client.post(f"/admin/users/{uid}/tokens", json={"name": "load"})
        assert r.status_code == 201, r.text
        headers = {"Authorization": f"Bearer {r.json()['token']}"}
        r = await client.post("/sessions", json={"profile_id": "default"}, headers=headers)
        assert r.status_code in (200, 201), r.text
        users.append(UserLoad(uid, headers, r.json()["id"]))
    return users


async def test_a_worker_joins_and_another_leaves_while_the_api_serves(
    served: tuple[AsyncTestClient, str],
) -> None:
    client, url = served
    conn = psycopg.connect(cluster.libpq(url), autocommit=True)
    users = await _users(client, conn)
    log = StatementLog()
    log.install()
    load = Load(client, owners={u.headers["Authorization"]: u.user_id for u in users})
    figures: dict[str, Any] = {"users": len(users)}
    try:
        placed = _placements(conn, users)
        started = time.perf_counter()
        _seed(conn, SEED_USERS, SEED_ROWS)
        figures["seed"] = {"users": SEED_USERS, "rows": SEED_ROWS}
        figures["seed_s"] = round(time.perf_counter() - started, 1)
        size = _q(conn, "select coalesce(sum(shard_size), 0) from citus_shards")
        figures["data_mb"] = round(int(size[0][0]) / 1e6, 1)
        before_shards = _shards_per_node(conn)
        assert set(before_shards) == {BASE_PORT + 1, BASE_PORT + 2}, before_shards
        tasks = [asyncio.create_task(load.user_loop(u)) for u in users]
        try:
            await asyncio.sleep(BEFORE_SECONDS)

            load.phase = "add"
            line, seconds, _ = await _script(str(SCRIPTS / "citus-add-worker.sh"), str(NEW_PORT))
            assert line.startswith(f"ADDED={HOST}:{NEW_PORT}"), line
            figures["add_script_s"] = round(seconds, 1)
            load.phase = "between"
            after_add = _shards_per_node(conn)
            assert after_add.get(NEW_PORT, 0) > 0, f"no shard moved to the new worker: {after_add}"
            figures["shards_after_add"] = after_add
            now = _placements(conn, users)
            moved_add = {u for u in now if now[u][1] != placed[u][1]}
            assert moved_add, "no load user's shard group moved in the add"
            placed = now
            # the statements so far, planned on 3 workers (in a thread: the load goes on)
            await asyncio.to_thread(_plan_check, url, list(log.entries.values()), "after the add")
            jobs = _moves(conn)
            assert jobs, "no rebalance job ran"
            figures["add_move_s"] = round(jobs[-1][1], 1)
            await asyncio.sleep(BETWEEN_SECONDS)

            load.phase = "drain"
            line, seconds, _ = await _script(
                str(SCRIPTS / "citus-drain-worker.sh"),
                HOST,
                str(DRAINED_PORT),
                str(DATA_DIR / "worker1"),
            )
            assert line.startswith(f"REMOVED={HOST}:{DRAINED_PORT}"), line
            figures["drain_script_s"] = round(seconds, 1)
            load.phase = "after"
            after_drain = _shards_per_node(conn)
            assert DRAINED_PORT not in after_drain, f"shards left on the drained one: {after_drain}"
            nodes = _q(conn, "select nodeport from pg_dist_node where groupid <> 0 order by 1")
            assert [int(p) for (p,) in nodes] == [BASE_PORT + 2, NEW_PORT], nodes
            figures["shards_after_drain"] = after_drain
            now = _placements(conn, users)
            moved_drain = {u for u in now if now[u][1] != placed[u][1]}
            assert moved_drain, "no load user's shard group moved in the drain"
            drain_jobs = _moves(conn)
            assert len(drain_jobs) > len(jobs), "no drain job ran"
            figures["drain_move_s"] = round(drain_jobs[-1][1], 1)
            await asyncio.sleep(BETWEEN_SECONDS)
        finally:
            load.stop = True
            await asyncio.gather(*tasks)
            for u in users:
                await load.finish_forgets(u)
            log.uninstall()

        for phase in ("before", "add", "between", "drain", "after"):
            figures[phase] = _phase_figures(load.answers, phase)
        # the users whose group moved, while it moved
        figures["add_moved_users"] = _phase_figures(load.answers, "add", moved_add)
        figures["add_moved_users"]["users"] = len(moved_add)
        figures["drain_moved_users"] = _phase_figures(load.answers, "drain", moved_drain)
        figures["drain_moved_users"]["users"] = len(moved_drain)
        figures["answers"] = len(load.answers)
        figures["retried_503"] = sum(a.retried_503 for a in load.answers)
        figures["errors"] = len(load.failures)
        print("\n" + json.dumps(figures, indent=1))

        # Every acknowledged write exactly once; sequence numbers without a gap
        lost: list[str] = []
        for u in users:
            rows = _q(
                conn,
                "select content, sequence_number from session_messages"
                " where user_id = %s and session_id = %s order by sequence_number",
                u.user_id,
                u.session_id,
            )
            seqs = [int(s) for _, s in rows]
            assert seqs == list(range(len(seqs))), f"{u.user_id}: gaps or repeats: {seqs}"
            stored: dict[str, int] = {}
            for content, _ in rows:
                stored[content] = stored.get(content, 0) + 1
            dup = {c: n for c, n in stored.items() if n > 1}
            assert not dup, f"{u.user_id}: messages stored more than once: {dup}"
            lost += [c for c in u.messages if c not in stored]
            extra = [c for c in stored if c not in u.messages]
            assert not extra, f"{u.user_id}: stored but never acknowledged: {extra}"
            assert all(u.messages[c] == seq for c, seq in rows), f"{u.user_id}: seq moved"
            facts = dict(
                _q(conn, "select key, value from memory_facts where user_id = %s", u.user_id)
            )
            lost += [f"fact {k}" for k, v in u.facts.items() if facts.get(k) != v]
            kept = [k for k in u.forgotten if k in facts]
            assert not kept, f"{u.user_id}: forgotten facts still there: {kept}"
        assert not lost, f"acknowledged writes lost: {lost[:20]}"
        written = sum(len(u.messages) + len(u.facts) + len(u.forgotten) for u in users)
        figures["acknowledged_writes"] = written
        figures["forgets_answered_202"] = sum(
            1 for u in users for k in u.forgotten if k in u.pending
        )

        # Per-user routing still one shard, on the cluster as it is now
        figures["statements_checked"] = _plan_check(
            url, list(log.entries.values()), "after the drain"
        )
    finally:
        conn.close()

    summary = (
        f"rebalance: {figures['data_mb']} MB in shards; {figures['answers']} answers from"
        f" {len(users)} users, {written} acknowledged"
        f" writes, 0 lost or duplicated; add: move {figures['add_move_s']} s (script"
        f" {figures['add_script_s']} s), p50/p99 {figures['add']['p50_ms']}/"
        f"{figures['add']['p99_ms']} ms vs before {figures['before']['p50_ms']}/"
        f"{figures['before']['p99_ms']} ms; drain+remove: move {figures['drain_move_s']} s"
        f" (script {figures['drain_script_s']} s), p50/p99 {figures['drain']['p50_ms']}/"
        f"{figures['drain']['p99_ms']} ms; retried 503s {figures['retried_503']},"
        f" other errors {figures['errors']}"
    )
    cluster.SUMMARY.append(summary)
    print("\n" + summary + "\n" + json.dumps(figures, indent=1))
    _report(figures)
    assert not load.failures, "answers other than 2xx or a retried 503:\n" + "\n".join(
        load.failures[:30]
    )
