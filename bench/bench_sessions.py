"""Session store benchmark at the seed's production scale (issue 3, item 6).

    make bench-sessions                      # embedded PostgreSQL in bench/.cache/pg
    DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/navi_bench make bench-sessions
    .venv/bin/python bench/bench_sessions.py --scale 0.05     # a small dataset, quick check

1. Provisions the database (see `_common.provision`) and generates the dataset with COPY
   unless a row in `bench_dataset` says it exists with the same parameters: 50 users,
   1,300 sessions, ~400 MB of message content (`--scale` multiplies users and sessions).
2. Measures each operation three ways, in the same run:
   - API: the real app (create_app) under uvicorn on 127.0.0.1, latency SERVER-SIDE
     (the `server-timing` header of `_common.ServerTiming`), auth on, per-user tokens;
   - SQL: the repository method alone on an open transaction (what the endpoint's
     queries cost, without HTTP/auth/serialisation);
   - naive: the way it is done without stored counts/positions/indexes (SQL level);
   and for each block the CPU per operation (Python thread + PostgreSQL backends, from
   /proc), which does not depend on what else runs on a shared machine.
   Appends: 8 concurrent clients, 1, 4 and 16 messages per request, msgs/s.
3. Writes `EXPLAIN (ANALYZE, BUFFERS)` of the key queries to bench/.cache/plans-<server>.txt
   and the figures to bench/.cache/results-<server>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
from _app import (
    DEFAULT_POSITIONS,
    MAX_POSITIONS,
    MessageIn,
    MessageRepository,
    Session,
    SessionRepository,
    SessionService,
    Settings,
    Viewer,
    contains_pattern,
    create_app,
    display_prefix,
    hash_token,
    load_profiles,
)
from _common import (
    BackendCpu,
    Measured,
    RunningServer,
    SqlFn,
    Stats,
    Target,
    Throughput,
    auth,
    cached_dataset,
    concurrently,
    fmt_ms,
    fmt_pair,
    fmt_ratio,
    loadavg,
    measure_api,
    measure_sql,
    park_secondary_indexes,
    print_table,
    provision,
    rebuild_parked_indexes,
    serve,
    serve_workers,
    server_ms,
    speedup,
    step,
    thread_cpu_ms,
    write_plans,
    write_results,
)
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

GEN_VERSION = 1
COMMON_TERM = "deploy"  # inserted into ~22 % of messages
COMMON_SHARE = 0.22
RARE_TERM = "zanzibar"  # a handful of messages
ADMIN_TOKEN = "navi_bench_admin_token_0123456789abcdefghij"
WINDOW = 2000  # Settings.session_messages_window: older rows of longer sessions are archived
BIG_LEN = 6000
APPEND_PROFILE = "bench-append"  # sessions the append benchmark creates (and deletes)
TARGETS = {"list": 10.0, "search": 25.0, "matches": 40.0, "append": 1000.0}

MESSAGE_TABLES = ("session_messages", "session_messages_archive")
MSG_COLUMNS = (
    "session_id, user_id, sequence_number, display_index, role, content, is_context, is_display, "
    "is_summary, created_at, token_count"
)


def user_id(i: int) -> str:
    return f"bench-user-{i:03d}"


def user_token(i: int) -> str:
    return f"navi_bench_user_{i:03d}_token_0123456789abcdef"


# =================================================================== dataset
@dataclass(frozen=True)
class Params:
    scale: float
    seed: int

    @property
    def users(self) -> int:
        return max(4, round(50 * self.scale))

    @property
    def sessions(self) -> int:
        return max(20, round(1300 * self.scale))

    @property
    def big(self) -> int:
        return max(1, round(5 * self.scale))

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": GEN_VERSION,
            "scale": self.scale,
            "seed": self.seed,
            "users": self.users,
            "sessions": self.sessions,
            "big_sessions": self.big,
            "common_term": COMMON_TERM,
            "rare_term": RARE_TERM,
        }


def _log_uniform(rng: random.Random, lo: float, hi: float) -> int:
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def make_vocabulary(rng: random.Random, n: int = 4000) -> list[str]:
    """Pseudo-words from syllables; ~12 % Cyrillic. None contains a search term."""
    latin = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
    cyr = [c + v for c in "бвгдзклмнпрстфх" for v in "аеиоуыя"]
    words: set[str] = set()
    while len(words) < n:
        syll = cyr if rng.random() < 0.12 else latin
        w = "".join(rng.choice(syll) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.3:
            w += rng.choice("nrstlk")
        if COMMON_TERM in w or RARE_TERM in w:
            continue
        words.add(w)
    return sorted(words)


def make_corpus(rng: random.Random, vocab: list[str], chars: int) -> str:
    """Zipf-weighted words with punctuation and (COPY-escaped) newlines."""
    weights = [1.0 / (r + 1) for r in range(len(vocab))]
    rng.shuffle(vocab)
    seps = [" "] * 14 + [". ", ", ", "\\n", ": ", " - ", "\\n\\n"]
    out: list[str] = []
    size = 0
    while size < chars:
        words = rng.choices(vocab, weights, k=50_000)
        gaps = rng.choices(seps, k=50_000)
        chunk = "".join(w + s for w, s in zip(words, gaps, strict=True))
        out.append(chunk)
        size += len(chunk)
    return "".join(out)[:chars]


def message_size(rng: random.Random, role: str) -> int:
    if role == "user":
        return _log_uniform(rng, 50, 800)
    if role == "assistant":
        return _log_uniform(rng, 60, 1800)
    if role == "tool":  # some tool results are large
        return (
            _log_uniform(rng, 5000, 50000) if rng.random() < 0.03 else _log_uniform(rng, 50, 2000)
        )
    return _log_uniform(rng, 800, 3000)  # summary


@dataclass
class SessionPlan:
    id: uuid.UUID
    user: str
    n: int
    start: datetime
    profile: str
    name: str
    pinned: bool
    # filled while the messages are generated
    seq: int = 0
    display: int = 0
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    rare: set[int] = field(default_factory=set)


def plan_sessions(rng: random.Random, p: Params) -> list[SessionPlan]:
    now = datetime.now(UTC)
    plans: list[SessionPlan] = []
    for i in range(p.sessions):
        if i < p.big:
            n = BIG_LEN + rng.randint(-150, 150)
        else:
            n = min(4000, max(8, int(rng.lognormvariate(math.log(220), 1.25))))
        # big sessions go to distinct users; the rest round-robin over everyone
        owner = i % p.users
        start = now - timedelta(days=120) + timedelta(seconds=rng.uniform(0, 100 * 86400))
        plans.append(
            SessionPlan(
                id=uuid.UUID(int=rng.getrandbits(128), version=4),
                user=user_id(owner),
                n=n,
                start=start,
                profile="coder" if rng.random() < 0.2 else "default",
                name=f"Session {i}: " + rng.choice(["planning", "debug", "notes", "review"]),
                pinned=rng.random() < 0.03,
            )
        )
    # the rare term: a handful of messages (one of them in the archived range of a big one)
    for plan in rng.sample(plans[p.big :], min(5, len(plans) - p.big)):
        plan.rare.add(rng.randrange(plan.n))
    plans[0].rare.add(rng.randrange(plans[0].n - WINDOW))
    rng.shuffle(plans)
    return plans


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.%f+00")


def message_lines(
    rng: random.Random, plans: list[SessionPlan], corpus: str, counters: dict[str, int]
) -> Iterator[tuple[bool, SessionPlan, str]]:
    """(archived, session, COPY line), interleaving ~32 sessions that are active at once,
    so one session's rows are spread over the heap as they are in production."""
    queue = deque(plans)
    active: list[SessionPlan] = []
    clen = len(corpus)
    variants = [COMMON_TERM] * 16 + [COMMON_TERM.capitalize()] * 3 + [COMMON_TERM.upper()]
    while queue or active:
        while len(active) < 32 and queue:
            nxt = queue.popleft()
            nxt.at = nxt.start
            active.append(nxt)
        k = rng.randrange(len(active))
        s = active[k]
        archive_below = s.n - WINDOW if s.n > WINDOW else 0
        for _ in range(rng.randint(1, 8)):
            seq = s.seq
            if seq == 0:
                role = "user"
            else:
                x = rng.random()
                role = (
                    "user"
                    if x < 0.30
                    else "assistant"
                    if x < 0.72
                    else "tool"
                    if x < 0.95
                    else "summary"
                )
            if seq in s.rare and role in ("summary", "tool"):
                role = "assistant"
            size = message_size(rng, role)
            off = rng.randrange(clen - size)
            content = corpus[off : off + size].rstrip("\\")
            if rng.random() < COMMON_SHARE:
                cut = rng.randrange(len(content) + 1)
                content = (
                    content[:cut].rstrip("\\") + " " + rng.choice(variants) + " " + content[cut:]
                )
                counters["common"] += 1
            if seq in s.rare:
                cut = rng.randrange(len(content) + 1)
                content = content[:cut].rstrip("\\") + " " + RARE_TERM + " " + content[cut:]
                counters["rare"] += 1
            summary = role == "summary"
            if summary:
                disp = "\\N"
                db_role = "assistant"
            else:
                disp = str(s.display)
                s.display += 1
                db_role = role
            archived = seq < archive_below
            in_context = "t" if (summary or seq >= s.n - 400) and not archived else "f"
            s.at += timedelta(seconds=rng.uniform(1, 240))
            counters["chars"] += len(content)
            counters["messages"] += 1
            yield (
                archived,
                s,
                f"{s.id}\t{s.user}\t{seq}\t{disp}\t{db_role}\t{content}\t{in_context}\t"
                f"{'f' if summary else 't'}\t{'t' if summary else 'f'}\t{_ts(s.at)}\t"
                f"{len(content) // 4}\n",
            )
            s.seq += 1
            if s.seq >= s.n:
                active[k] = active[-1]
                active.pop()
                break


def _set_replica_role(conn: psycopg.Connection) -> None:
    """Skip the FK triggers while loading rows that are consistent by construction
    (superuser only; without it the load is slower, not wrong)."""
    try:
        conn.execute("SET session_replication_role = replica")
    except psycopg.Error:
        conn.rollback()


def generate(target: Target, p: Params) -> dict[str, Any]:
    t_start = time.perf_counter()
    rng = random.Random(p.seed)
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute("TRUNCATE sessions CASCADE")
        conn.execute("DELETE FROM navi_users WHERE id LIKE 'bench-user-%%'")
        park_secondary_indexes(conn, MESSAGE_TABLES)

    vocab = make_vocabulary(rng)
    corpus = make_corpus(rng, vocab, 8_000_000)
    plans = plan_sessions(rng, p)
    counters = {"common": 0, "rare": 0, "chars": 0, "messages": 0}
    archive: dict[uuid.UUID, list[str]] = {}

    with psycopg.connect(target.conninfo) as conn:
        _set_replica_role(conn)
        with conn.cursor() as cur:
            with cur.copy("COPY navi_users (id, name, is_admin, permissions) FROM STDIN") as cp:
                for i in range(p.users):
                    cp.write_row((user_id(i), user_id(i), False, []))
            with cur.copy(
                "COPY navi_api_tokens (id, user_id, name, token_hash, prefix) FROM STDIN"
            ) as cp:
                for i in range(p.users):
                    tok = user_token(i)
                    cp.write_row(
                        (uuid.uuid4(), user_id(i), "bench", hash_token(tok), display_prefix(tok))
                    )
            with cur.copy(
                "COPY sessions (id, profile_id, user_id, name, pinned, created_at, last_active, "
                "next_seq, next_display_index) FROM STDIN"
            ) as cp:
                for s in plans:
                    cp.write_row(
                        (s.id, s.profile, s.user, s.name, s.pinned, s.start, s.start, s.n, 0)
                    )
            t_copy = time.perf_counter()
            with cur.copy(f"COPY session_messages ({MSG_COLUMNS}) FROM STDIN") as cp:
                buf: list[str] = []
                size = 0
                for archived, s, line in message_lines(rng, plans, corpus, counters):
                    if archived:
                        archive.setdefault(s.id, []).append(line)
                        continue
                    buf.append(line)
                    size += len(line)
                    if size > 4_000_000:
                        cp.write("".join(buf))
                        buf, size = [], 0
                cp.write("".join(buf))
            with cur.copy(f"COPY session_messages_archive ({MSG_COLUMNS}) FROM STDIN") as cp:
                for lines in archive.values():
                    cp.write("".join(lines))
        conn.commit()
        t_loaded = time.perf_counter()

    with psycopg.connect(target.conninfo) as conn:
        conn.execute(
            "CREATE TEMP TABLE tmp_counts (id uuid, next_display_index bigint, last_active "
            "timestamptz) ON COMMIT DROP"
        )
        with conn.cursor().copy(
            "COPY tmp_counts (id, next_display_index, last_active) FROM STDIN"
        ) as cp:
            for s in plans:
                cp.write_row((s.id, s.display, s.at))
        conn.execute(
            "UPDATE sessions SET next_display_index = t.next_display_index, "
            "last_active = t.last_active FROM tmp_counts t WHERE t.id = sessions.id"
        )
        conn.commit()

    t_idx = time.perf_counter()
    rebuilt = rebuild_parked_indexes(target)
    t_vac = time.perf_counter()
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        for table in ("sessions", "session_messages", "session_messages_archive"):
            conn.execute(f"VACUUM (ANALYZE) {table}")
    t_end = time.perf_counter()
    return {
        "messages": counters["messages"],
        "archived_messages": sum(len(v) for v in archive.values()),
        "content_chars": counters["chars"],
        "common_share": round(counters["common"] / max(1, counters["messages"]), 4),
        "rare_messages": counters["rare"],
        "indexes_built_after_load": rebuilt,
        "seconds": {
            "total": round(t_end - t_start, 1),
            "generate_and_copy": round(t_loaded - t_copy, 1),
            "indexes": round(t_vac - t_idx, 1),
            "vacuum_analyze": round(t_end - t_vac, 1),
        },
    }


def ensure_dataset(target: Target, p: Params, regenerate: bool) -> tuple[dict[str, Any], bool]:
    """(stats, generated this run)."""
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        # left over from an interrupted run of the append benchmark
        conn.execute("DELETE FROM sessions WHERE profile_id = %s", (APPEND_PROFILE,))

    def build() -> dict[str, Any]:
        print(f"generating the dataset ({p.as_dict()}) …", flush=True)
        return generate(target, p)

    stats, reused = cached_dataset(target, "bench_dataset", p.as_dict(), build, regenerate)
    return stats, not reused


# =================================================================== measurement
@dataclass
class Result:
    key: str
    label: str
    target: str
    api: Measured | None = None
    sql: Measured | None = None
    naive: Measured | None = None
    naive_label: str = ""
    rate: float | None = None  # msgs/s (append)
    sql_rate: float | None = None
    naive_rate: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """naive ÷ ours: wall p50 at the SQL level (msgs/s ours ÷ naive for appends)."""
        if self.rate is not None:
            if self.sql_rate and self.naive_rate:
                return self.sql_rate / self.naive_rate
            return None
        return speedup(self.naive.wall, self.sql.wall) if self.sql and self.naive else None

    @property
    def cpu_ratio(self) -> float | None:
        if self.sql and self.naive and self.sql.cpu > 0 and not math.isnan(self.naive.cpu):
            return self.naive.cpu / self.sql.cpu
        return None

    def passed(self) -> bool | None:
        goal = TARGETS.get(self.key)
        if goal is None:
            return None
        if self.key == "append":
            return self.rate is not None and self.rate >= goal
        return self.api is not None and self.api.wall.p95 <= goal

    def passed_cpu(self) -> bool | None:
        """Would the target be met on an idle machine? A request served alone costs about
        its CPU time (app thread + PostgreSQL), so compare that with the target."""
        goal = TARGETS.get(self.key)
        if goal is None or self.key == "append" or self.api is None:
            return None
        if math.isnan(self.api.cpu):
            return None
        return self.api.cpu <= goal

    def as_dict(self) -> dict[str, Any]:
        def st(m: Measured | None) -> dict[str, Any] | None:
            return None if m is None else m.as_dict()

        return {
            "key": self.key,
            "label": self.label,
            "target": self.target,
            "api": st(self.api),
            "sql": st(self.sql),
            "naive": st(self.naive),
            "naive_label": self.naive_label,
            "msgs_per_s": self.rate,
            "sql_msgs_per_s": self.sql_rate,
            "naive_msgs_per_s": self.naive_rate,
            "ratio_wall_p50": self.ratio,
            "ratio_cpu": self.cpu_ratio,
            "passed_wall_p95": self.passed(),
            "passed_cpu": self.passed_cpu(),
            "note": self.note,
        }


# =================================================================== naive versions
NAIVE_SEARCH = """
WITH hits AS MATERIALIZED (
    SELECT session_id FROM session_messages
    WHERE display_index IS NOT NULL AND content ILIKE :pattern ESCAPE '\\'
    UNION
    SELECT session_id FROM session_messages_archive
    WHERE display_index IS NOT NULL AND content ILIKE :pattern ESCAPE '\\'
)
SELECT s.id, s.name, s.pinned, s.last_active, count(*) OVER () AS total
FROM sessions s
WHERE s.user_id = :uid AND s.id IN (SELECT session_id FROM hits)
ORDER BY s.pinned DESC, s.last_active DESC, s.id
LIMIT 50
"""

NAIVE_MATCHES = """
WITH numbered AS (
    SELECT session_id, content,
           row_number() OVER (PARTITION BY session_id ORDER BY sequence_number) - 1 AS pos
    FROM (
        SELECT session_id, sequence_number, content FROM session_messages
        WHERE session_id = ANY(:ids) AND is_display
        UNION ALL
        SELECT session_id, sequence_number, content FROM session_messages_archive
        WHERE session_id = ANY(:ids) AND is_display
    ) all_rows
)
SELECT session_id, (array_agg(pos ORDER BY pos))[1:1000] AS positions, count(*) AS match_count,
       min(substr(content, greatest(1, strpos(lower(content), lower(:term)) - 60), 200))
FROM numbered WHERE content ILIKE :pattern ESCAPE '\\'
GROUP BY session_id
"""

NAIVE_HISTORY = """
SELECT * FROM (
    SELECT m.*, false AS archived FROM session_messages m WHERE m.session_id = :sid
    UNION ALL
    SELECT a.*, true AS archived FROM session_messages_archive a WHERE a.session_id = :sid
) h
WHERE is_display
ORDER BY sequence_number DESC
OFFSET :off LIMIT :lim
"""


async def naive_list(s: AsyncSession, uid: str) -> list[tuple[Any, int, str | None]]:
    """The sidebar the way it was built before stored counts: load every history."""
    repo = MessageRepository(s)
    sessions = (
        await s.execute(
            select(Session)
            .where(Session.user_id == uid)
            .order_by(Session.pinned.desc(), Session.last_active.desc(), Session.id)
            .limit(50)
        )
    ).scalars()
    out = []
    for row in sessions:
        msgs = await repo.all_messages(uid, row.id)
        shown = [m for m in msgs if m.is_display]
        out.append((row.id, len(shown), shown[-1].content[:160] if shown else None))
    return out


# =================================================================== the benchmark
@dataclass
class Facts:
    users: list[str]
    tokens: dict[str, str]
    largest: list[uuid.UUID]  # the 20 largest sessions
    big: list[tuple[uuid.UUID, str, int, int]]  # (id, owner, next_seq, next_display_index)


def load_facts(target: Target, p: Params) -> Facts:
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        largest = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM sessions WHERE user_id LIKE 'bench-user-%%' "
                "ORDER BY next_seq DESC, id LIMIT 20"
            )
        ]
        big = [
            (r[0], r[1], int(r[2]), int(r[3]))
            for r in conn.execute(
                "SELECT id, user_id, next_seq, next_display_index FROM sessions "
                "WHERE next_seq >= %s AND user_id LIKE 'bench-user-%%' ORDER BY id",
                (BIG_LEN - 200,),
            )
        ]
    users = [user_id(i) for i in range(p.users)]
    return Facts(
        users=users,
        tokens={user_id(i): user_token(i) for i in range(p.users)},
        largest=largest,
        big=big,
    )


def app_settings() -> Settings:
    return Settings(
        auth_enabled=True,
        admin_token=ADMIN_TOKEN,
        log_level="warning",
        ollama_host="http://127.0.0.1:9",  # never called by these endpoints
        extraction_enabled=False,
        memory_recall_enabled=False,
        db_pool_size=10,
        db_max_overflow=10,
    )


def turn_payload(rng: random.Random, words: list[str], n: int) -> bytes:
    roles = ["user", "assistant", "tool", "assistant"]
    msgs = []
    for k in range(n):
        role = roles[k % 4]
        size = min(message_size(rng, role), 8000)
        content = " ".join(rng.choices(words, k=max(1, size // 7)))
        msgs.append({"role": role, "content": content})
    return json.dumps({"messages": msgs}).encode()


async def bench_append(
    target: Target,
    client: httpx.AsyncClient,
    server: RunningServer,
    factory: async_sessionmaker[AsyncSession],
    pg: BackendCpu,
    facts: Facts,
    args: argparse.Namespace,
) -> tuple[list[Result], dict[str, Throughput]]:
    """8 concurrent clients, each appending to its own session."""
    rng = random.Random(11)
    words = make_vocabulary(random.Random(5), 800)
    clients = 8
    per_client = args.append_requests
    owners = [facts.users[c % len(facts.users)] for c in range(clients)]
    settings = app_settings()
    profiles = load_profiles(settings)

    async def create_sessions(name: str) -> list[uuid.UUID]:
        async with factory() as s:
            ids = []
            for uid in owners:
                ids.append((await SessionRepository(s).create(APPEND_PROFILE, uid, name)).id)
            await s.commit()
        return ids

    async def api_run(
        batch: int, client: httpx.AsyncClient = client, server: Any = server
    ) -> Throughput:
        sids = await create_sessions(f"append api x{batch}")
        bodies = [[turn_payload(rng, words, batch) for _ in range(per_client)] for _ in owners]
        samples: list[float] = []

        async def worker(c: int, todo: list[bytes]) -> None:
            headers = {**auth(facts.tokens[owners[c]]), "content-type": "application/json"}
            for body in todo:
                r = await client.post(
                    f"/sessions/{sids[c]}/messages", content=body, headers=headers
                )
                if r.status_code != 201:
                    raise RuntimeError(f"append: {r.status_code} {r.text[:300]}")
                samples.append(server_ms(r))

        await asyncio.gather(*(worker(c, bodies[c][:2]) for c in range(clients)))  # warm-up
        samples.clear()
        t = await concurrently(
            pg,
            server.thread_cpu_ms,
            clients * (per_client - 2) * batch,
            [worker(c, bodies[c][2:]) for c in range(clients)],
        )
        t.latency = Stats.of(samples)
        return t

    async def sql_run() -> Throughput:
        """The service's append (reserve + one multi-row INSERT) + commit, no HTTP."""
        ids = await create_sessions("append sql")
        turns = [
            [
                MessageIn(role=m["role"], content=m["content"])
                for m in json.loads(turn_payload(rng, words, 4))["messages"]
            ]
            for _ in range(per_client)
        ]

        async def worker(c: int) -> None:
            viewer = Viewer(user_id=owners[c])
            for msgs in turns:
                async with factory() as s:
                    await SessionService(s, settings, profiles).append(ids[c], viewer, msgs)
                    await s.commit()

        return await concurrently(
            pg, thread_cpu_ms, clients * per_client * 4, [worker(c) for c in range(clients)]
        )

    async def naive_run() -> Throughput:
        """One transaction per message: lock the session row, max()+1, INSERT, commit."""
        ids = await create_sessions("append naive")
        contents = [" ".join(rng.choices(words, k=60)) for _ in range(per_client * 2)]
        conns = [await psycopg.AsyncConnection.connect(target.conninfo) for _ in range(clients)]

        async def worker(c: int) -> None:
            conn = conns[c]
            for content in contents:
                async with conn.transaction():
                    await conn.execute(
                        "SELECT id FROM sessions WHERE id = %s FOR UPDATE", (ids[c],)
                    )
                    cur = await conn.execute(
                        "SELECT coalesce(max(sequence_number) + 1, 0), "
                        "coalesce(max(display_index) + 1, 0) "
                        "FROM session_messages WHERE session_id = %s",
                        (ids[c],),
                    )
                    seq, disp = (await cur.fetchone()) or (0, 0)
                    await conn.execute(
                        "INSERT INTO session_messages (session_id, user_id, sequence_number, "
                        "display_index, role, content) SELECT id, user_id, %s, %s, 'assistant', %s"
                        " FROM sessions WHERE id = %s",
                        (seq, disp, content, ids[c]),
                    )
                    await conn.execute(
                        "UPDATE sessions SET last_active = now(), next_seq = %s + 1, "
                        "next_display_index = %s + 1 WHERE id = %s",
                        (seq, disp, ids[c]),
                    )

        try:
            return await concurrently(
                pg, thread_cpu_ms, clients * len(contents), [worker(c) for c in range(clients)]
            )
        finally:
            for conn in conns:
                await conn.close()

    extra: dict[str, Throughput] = {}
    try:
        step("· append: API, 4 messages per request …")
        turn = await api_run(4)
        step("· append: API, 1 message per request …")
        single = await api_run(1)
        step("· append: API, 16 messages per request …")
        big_batch = await api_run(16)
        if args.workers > 1:
            step(f"· append: API with {args.workers} worker processes …")
            workers = serve_workers(settings, target.url, args.workers, ADMIN_TOKEN)
            try:
                async with httpx.AsyncClient(base_url=workers.base_url, timeout=120) as wc:
                    for batch in (4, 8, 16):
                        extra[f"api_w{args.workers}_x{batch}"] = await api_run(batch, wc, workers)
            finally:
                workers.stop()
        step("· append: SQL (service, no HTTP) …")
        sql = await sql_run()
        step("· append: naive …")
        naive = await naive_run()
    finally:
        async with factory() as s:
            await s.execute(
                text("DELETE FROM sessions WHERE profile_id = :p"), {"p": APPEND_PROFILE}
            )
            await s.commit()
    n_req = clients * (per_client - 2)
    results = [
        Result(
            "append",
            "append, 8 clients × 4 msgs/request",
            "≥ 1000 msgs/s",
            rate=round(turn.msgs_per_s),
            sql_rate=round(sql.msgs_per_s),
            naive_rate=round(naive.msgs_per_s),
            naive_label="1 transaction per message, max(seq)+1 under the session row lock",
            note=f"{n_req} requests",
        ),
        Result(
            "append1",
            "append, 8 clients × 1 msg/request",
            "(info)",
            rate=round(single.msgs_per_s),
            note=f"{n_req} requests",
        ),
    ]
    return results, {
        **extra,
        "api_x4": turn,
        "api_x1": single,
        "api_x16": big_batch,
        "sql_x4": sql,
        "naive_x1": naive,
    }


async def run_bench(
    target: Target, p: Params, args: argparse.Namespace
) -> tuple[list[Result], dict[str, Throughput]]:
    facts = load_facts(target, p)
    n, ns, nn, warm = args.requests, args.sql_requests, args.naive_requests, args.warmup
    engine = create_async_engine(target.url, pool_size=10, max_overflow=10)
    factory = async_sessionmaker(engine, expire_on_commit=False)
    pg = BackendCpu(target.conninfo)
    rng = random.Random(3)
    admin_viewer = Viewer(user_id="admin", all_users=True)
    users = facts.users
    big = facts.big or [(facts.largest[0], "", 0, 0)]

    def history_point(i: int) -> tuple[uuid.UUID, str, int, int]:
        sid, owner, next_seq, next_disp = big[i % len(big)]
        before = int(next_seq * rng.uniform(0.4, 0.6))
        offset = int(next_disp * (1 - before / max(1, next_seq)))
        return sid, owner, before, offset

    async def sql_list(s: AsyncSession, i: int, search: str | None = None) -> None:
        viewer = Viewer(user_id=users[i % len(users)])
        await SessionRepository(s).list_page(viewer, limit=50, offset=0, search=search)

    async def sql_search(s: AsyncSession, i: int) -> None:
        await sql_list(s, i, COMMON_TERM)

    async def sql_rare(s: AsyncSession, i: int) -> None:
        await sql_list(s, i, RARE_TERM)

    async def sql_matches(s: AsyncSession, i: int, term: str = COMMON_TERM) -> None:
        await SessionRepository(s).search_matches(
            facts.largest, admin_viewer, term, DEFAULT_POSITIONS
        )

    async def sql_matches_all(s: AsyncSession, i: int) -> None:
        await SessionRepository(s).search_matches(
            facts.largest, admin_viewer, COMMON_TERM, MAX_POSITIONS
        )

    async def sql_matches_rare(s: AsyncSession, i: int) -> None:
        await sql_matches(s, i, RARE_TERM)

    async def sql_history(s: AsyncSession, i: int) -> None:
        sid, owner, before, _ = history_point(i)
        await MessageRepository(s).history_page(owner, sid, before, 51)

    async def nv_list(s: AsyncSession, i: int) -> None:
        await naive_list(s, users[i % len(users)])

    async def nv_search(s: AsyncSession, i: int, term: str = COMMON_TERM) -> None:
        await s.execute(text("SET LOCAL enable_bitmapscan = off"))
        await s.execute(
            text(NAIVE_SEARCH), {"pattern": contains_pattern(term), "uid": users[i % len(users)]}
        )

    async def nv_rare(s: AsyncSession, i: int) -> None:
        await nv_search(s, i, RARE_TERM)

    async def nv_matches(s: AsyncSession, i: int) -> None:
        await s.execute(
            text(NAIVE_MATCHES),
            {"ids": facts.largest, "pattern": contains_pattern(COMMON_TERM), "term": COMMON_TERM},
        )

    async def nv_history(s: AsyncSession, i: int) -> None:
        sid, _, _, off = history_point(i)
        rows = await s.execute(text(NAIVE_HISTORY), {"sid": sid, "off": off, "lim": 51})
        rows.all()

    def user_get(path: str) -> Callable[[int], tuple[str, dict[str, str]]]:
        return lambda i: (path, auth(facts.tokens[users[i % len(users)]]))

    def history_get(i: int) -> tuple[str, dict[str, str]]:
        sid, owner, before, _ = history_point(i)
        return f"/sessions/{sid}/messages?before_seq={before}&limit=50", auth(facts.tokens[owner])

    match_qs = "&".join(f"session_id={sid}" for sid in facts.largest)
    specs: list[Spec] = [
        Spec(
            "list",
            "list page (one user's sidebar)",
            "p95 ≤ 10 ms",
            sql_list,
            nv_list,
            "load every history (ORM), count + preview in Python",
            user_get("/sessions?limit=50"),
        ),
        Spec(
            "search",
            f"list + common term {COMMON_TERM!r}",
            "p95 ≤ 25 ms",
            sql_search,
            nv_search,
            "ILIKE scan of all messages (no trigram index), then the user's",
            user_get(f"/sessions?limit=50&search={COMMON_TERM}"),
        ),
        Spec(
            "rare",
            f"list + rare term {RARE_TERM!r}",
            "(info)",
            sql_rare,
            nv_rare,
            "ILIKE scan of all messages (no trigram index), then the user's",
            user_get(f"/sessions?limit=50&search={RARE_TERM}"),
        ),
        Spec(
            "matches",
            f"match positions {COMMON_TERM!r}, 20 largest",
            "p95 ≤ 40 ms",
            sql_matches,
            nv_matches,
            "row_number() over all display rows in a CTE",
            lambda i: (f"/sessions/matches?q={COMMON_TERM}&{match_qs}", auth(ADMIN_TOKEN)),
        ),
        Spec(
            "matches1000",
            f"match positions {COMMON_TERM!r}, max_positions={MAX_POSITIONS}",
            "(info)",
            sql_matches_all,
            None,
            "",
            lambda i: (
                f"/sessions/matches?q={COMMON_TERM}&max_positions={MAX_POSITIONS}&{match_qs}",
                auth(ADMIN_TOKEN),
            ),
        ),
        Spec(
            "matchesrare",
            f"match positions {RARE_TERM!r} (no hit), 20 largest",
            "(info)",
            sql_matches_rare,
            None,
            "",
            lambda i: (f"/sessions/matches?q={RARE_TERM}&{match_qs}", auth(ADMIN_TOKEN)),
        ),
        Spec(
            "history",
            "history page, middle of a 6k session",
            "(info)",
            sql_history,
            nv_history,
            "OFFSET paging over hot ∪ archive",
            history_get,
        ),
    ]
    only = set(args.only.split(",")) if args.only else None
    specs = [sp for sp in specs if only is None or sp.key in only]
    results: list[Result] = []
    throughput: dict[str, Throughput] = {}

    for sp in [] if args.plans_only else specs:
        step(f"· SQL   {sp.label} …")
        sql = await measure_sql(factory, pg, sp.ours, ns, warm)
        naive = None
        if sp.naive is not None:
            step(f"· naive {sp.label} …")
            naive = await measure_sql(factory, pg, sp.naive, nn, min(warm, 2))
        results.append(
            Result(sp.key, sp.label, sp.target, sql=sql, naive=naive, naive_label=sp.naive_label)
        )

    app = create_app(app_settings(), database_url=target.url, background_jobs=False)
    with serve(app) if not args.plans_only else contextlib.nullcontext() as server:
        async with httpx.AsyncClient(
            base_url=server.base_url if server else "", timeout=120
        ) as client:
            by_key = {r.key: r for r in results}
            for sp in specs:
                if sp.request is None or server is None:
                    continue
                step(f"· API   {sp.label} …")
                by_key[sp.key].api = await measure_api(client, pg, sp.request, n, warm)
            if server is not None and (only is None or "append" in only):
                appended, throughput = await bench_append(
                    target, client, server, factory, pg, facts, args
                )
                results.extend(appended)

    step("· EXPLAIN (ANALYZE, BUFFERS) …")
    explained: list[tuple[str, SqlFn]] = [
        ("list page (list_page: page + total in one statement)", sql_list),
        (f"list + common term {COMMON_TERM!r}", sql_search),
        (f"list + rare term {RARE_TERM!r}", sql_rare),
        (f"match positions {COMMON_TERM!r}, 20 largest (search_matches)", sql_matches),
        (f"match positions {COMMON_TERM!r}, max_positions={MAX_POSITIONS}", sql_matches_all),
        (f"match positions {RARE_TERM!r}, 20 largest", sql_matches_rare),
        ("history page (history_page)", sql_history),
        ("NAIVE list: sessions page + every history", nv_list),
        ("NAIVE search (global ILIKE scan)", nv_search),
        ("NAIVE match positions (numbering in a CTE)", nv_matches),
        ("NAIVE history (OFFSET)", nv_history),
    ]
    if only is not None:
        explained = [e for e in explained if any(k in e[0].lower() for k in only)] or explained
    await write_plans(target, engine, explained, f"plans-{target.label}{_partial(args)}.txt")
    pg.close()
    await engine.dispose()
    return results, throughput


@dataclass
class Spec:
    key: str
    label: str
    target: str
    ours: SqlFn
    naive: SqlFn | None
    naive_label: str
    request: Callable[[int], tuple[str, dict[str, str]]] | None


def _partial(args: argparse.Namespace) -> str:
    """File-name suffix of a run limited by --only (the full run's files stay intact)."""
    return "-" + args.only.replace(",", "-") if args.only else ""


def _ms(m: Measured | None) -> str:
    return "-" if m is None else fmt_pair(m.wall.p50, m.wall.p95)


def _cpu(m: Measured | None) -> str:
    if m is None or math.isnan(m.cpu):
        return "-"
    return f"{fmt_ms(m.py_cpu)} + {fmt_ms(m.pg_cpu)}"


def report(
    target: Target,
    p: Params,
    data: dict[str, Any],
    fresh: bool,
    results: list[Result],
    throughput: dict[str, Throughput],
    args: argparse.Namespace,
) -> None:
    verdict = {True: "yes", False: "NO", None: ""}
    rows = []
    for r in results:
        if r.rate is not None:
            continue
        ratio, cpu_ratio = fmt_ratio(r.ratio), fmt_ratio(r.cpu_ratio)
        rows.append(
            [
                r.label,
                _ms(r.api),
                _cpu(r.api),
                _ms(r.sql),
                _cpu(r.sql),
                _ms(r.naive),
                _cpu(r.naive),
                f"{ratio} / {cpu_ratio}",
                r.target,
                f"{verdict[r.passed()]} / {verdict[r.passed_cpu()]}",
            ]
        )
    n_api = next((r.api.wall.n for r in results if r.api), 0)
    n_naive = next((r.naive.wall.n for r in results if r.naive), 0)
    n_sql = next((r.sql.wall.n for r in results if r.sql), 0)
    title = (
        f"\n{target.label}: PostgreSQL {target.version}, pg_trgm "
        f"{'installed (trigram indexes)' if target.pg_trgm else 'ABSENT (plain ILIKE fallback)'}"
        f"; {data['messages']:,} messages ({data['archived_messages']:,} archived), "
        f"{data['content_chars'] / 1e6:.0f} M chars; load average {loadavg()} on "
        f"{os.cpu_count()} cores\nAPI: server-side ms (n={n_api}); SQL: the repository "
        f"queries alone (n={n_sql}); naive (n={n_naive}); CPU = ms per operation, app "
        f"thread + PostgreSQL; ratio = naive ÷ SQL (wall p50 / CPU); met = target on the "
        f"wall p95 / on the CPU (what an idle machine would see)"
    )
    print_table(
        [
            "operation",
            "API p50/p95",
            "API CPU",
            "SQL p50/p95",
            "SQL CPU",
            "naive p50/p95",
            "naive CPU",
            "ratio",
            "target",
            "met",
        ],
        rows,
        title=title,
    )
    if throughput:
        trows = []
        workers = [
            (
                key,
                f"API, {key.split('_')[1][1:]} workers, 8 clients × {key.split('_x')[1]} msgs/req",
            )
            for key in throughput
            if key.startswith("api_w")
        ]
        for key, label in (
            ("api_x4", "API, 8 clients × 4 msgs/request"),
            ("api_x1", "API, 8 clients × 1 msg/request"),
            ("api_x16", "API, 8 clients × 16 msgs/request"),
            *workers,
            ("sql_x4", "service + SQL, 8 × 4 msgs/txn"),
            ("naive_x1", "naive SQL, 8 × 1 msg/txn, max()+1"),
        ):
            t = throughput.get(key)
            if t is None:
                continue
            est = t.idle_estimate()
            trows.append(
                [
                    label,
                    f"{t.msgs_per_s:.0f}",
                    f"{fmt_ms(t.py_cpu_per_msg)} + {fmt_ms(t.pg_cpu_per_msg)}",
                    "-" if math.isnan(est) else f"{est:.0f}",
                    "-" if t.latency is None else fmt_pair(t.latency.p50, t.latency.p95),
                ]
            )
        sql_x4, naive_x1 = throughput.get("sql_x4"), throughput.get("naive_x1")
        extra = ""
        if sql_x4 and naive_x1:
            extra = f" (service ÷ naive: {sql_x4.msgs_per_s / naive_x1.msgs_per_s:.1f}×)"
        print_table(
            ["append", "msgs/s", "CPU ms/msg (app + pg)", "idle est. msgs/s", "req p50/p95 ms"],
            trows,
            title=f"\nappend throughput, target ≥ 1000 msgs/s with 8 clients{extra}",
        )
    out = {
        "server": target.label,
        "version": target.version,
        "pg_trgm": target.pg_trgm,
        "params": p.as_dict(),
        "dataset": data,
        "dataset_generated_this_run": fresh,
        "loadavg_end": loadavg(),
        "results": [r.as_dict() for r in results],
        "append": {k: v.as_dict() for k, v in throughput.items()},
        "at": datetime.now(UTC).isoformat(),
    }
    write_results(f"results-{target.label}{_partial(args)}.json", out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="dataset size (1.0 = the seed's)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--regenerate", action="store_true", help="rebuild the dataset")
    ap.add_argument("--requests", type=int, default=200, help="measured API requests per operation")
    ap.add_argument("--sql-requests", type=int, default=100, help="measured repository calls")
    ap.add_argument("--naive-requests", type=int, default=10, help="measured naive runs")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--append-requests", type=int, default=60, help="requests per append client")
    ap.add_argument(
        "--only",
        default="",
        help="comma list: list,search,rare,matches,matches1000,matchesrare,history,append",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="also measure appends against `uvicorn --workers N` (a subprocess), 4/8/16 per request",
    )
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument(
        "--plans-only", action="store_true", help="only write the EXPLAIN (ANALYZE) file"
    )
    args = ap.parse_args(argv)

    p = Params(scale=args.scale, seed=args.seed)
    suffix = "" if args.scale == 1.0 else "_s" + f"{args.scale:g}".replace(".", "_")
    target = provision("navi_bench", suffix=suffix)
    return _main(args, p, target)


def _main(args: argparse.Namespace, p: Params, target: Target) -> int:
    print(
        f"server: {target.label} (PostgreSQL {target.version}), pg_trgm "
        f"{'installed' if target.pg_trgm else 'ABSENT: search falls back to ILIKE without trigram indexes'}",
        flush=True,
    )
    t0 = time.perf_counter()
    data, fresh = ensure_dataset(target, p, args.regenerate)
    if fresh:
        print(f"dataset generated in {time.perf_counter() - t0:.1f} s: {json.dumps(data)}")
    else:
        print(
            f"dataset reused (generated earlier in {data['seconds']['total']} s): {json.dumps(data)}"
        )
    if args.generate_only:
        return 0
    results, throughput = asyncio.run(run_bench(target, p, args))
    if not args.plans_only:
        report(target, p, data, fresh, results, throughput, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
