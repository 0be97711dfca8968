"""Words at once, meaning behind, seen from outside (issue 41): `make bench-burst`.

    .venv/bin/python bench/bench_burst.py                          # both parts, local embedder
    .venv/bin/python bench/bench_burst.py --parts burst --questions 18
    .venv/bin/python bench/bench_burst.py --parts load --clients 8 --seconds 40
    .venv/bin/python bench/bench_burst.py --questions 2 --seconds 10 --embedder fake   # quick
    .venv/bin/python bench/bench_burst.py --commit HEAD   # the server from HEAD's worktree

Issue 41's goal rows measured as a user sees them: the service started as `make run`
starts it (`_common.serve_navi`: `python -m app.cli serve --workers N` from this checkout,
the web workers with their live words pass, the indexer process that embeds behind them,
the periodic jobs at their defaults), the bench's settings as environment variables
(`_agent.agent_settings`: auth on with the bench's admin token, the fake Ollama as the LLM,
bench_lme's profile with a large window; the local embedder unless `--embedder fake`, the
fake Ollama then). Each part on a fresh database of its own and a server of its own.
`--commit COMMIT`: the server runs from COMMIT's worktree (`bench_wrk.worktree`,
/tmp/navi-ab-<sha>) instead of this checkout, e.g. HEAD while the working tree holds
changes in progress.
Nothing is indexed by the bench: no index step, only what the service does by itself.

**burst** (`--questions N` of LongMemEval-S dev, `lme_data.pick`): one Navi user per
question, one Navi session per haystack session, each session's turns verbatim in ONE
`POST /sessions/{id}/messages` (created, then appended), the sessions sent by
`--burst-clients` concurrent clients (default 8) as fast as the server takes them, or
spread evenly over `--burst-seconds` (the issue's burst: about 8,000 messages in 100 s).
Then:

- per session, the time from its append's return until its words are indexed
  (`raw_index_state.covered @> int8range(0, sessions.next_seq)`, one query for every
  session still waiting, every 0.1 s; the time of the first query that saw it) and until
  its chunks have their vectors (none `vectors_stale`, every 1 s): p50 / p95 / max, and
  how many took more than 5 s (the goal: none);
- exactly 10 s after the last append returned, every question asked as its user
  (`bench_lme.ask`: `POST /memory/search`, scope raw, `--k` 10; recall_any / recall_all @5
  and @10 over the first distinct sessions in hit order), the backlog (`GET /health`:
  chunks without vectors) noted then: "words only" (goal: recall_any@5 ≥ 0.90);
- until nothing is left (every session covered, no chunk `vectors_stale`; `drain`): the
  drain time from the last append; the backlog once every session is covered (no chunk is
  added from then on): the chunks waiting and their segments (counted from their text
  with the app's `segment_spans`: every segment of a chunk never embedded), the segments
  embedded from then to the end (`/metrics` `navi_index_embedded_segments_total`) and
  their rate, the backlog over that rate beside the drain time from then (and over the
  busiest 60 s's rate: the pace when nothing else held the cores); the longest
  any chunk waited (`stale_since` to the poll that no longer saw it stale, every 0.5 s, on
  the database's clock);
- every question asked again: "after the drain" (goal: at least BM25 over sessions,
  `lme_data.bm25_tallies`, computed in the same run).

**load**: `--clients` users (`bench_load.setup`: `--sessions` sessions of 24 messages
each, no facts), their setup's vectors waited for; then for `--seconds` each client
appends one message per request to its own sessions, back to back
(`bench_load.client_loop`, mix append only). Every 2 s beside it a probe user appends to a
new session of its own one message holding a word said nowhere else and a fact that can
be paraphrased, then that session stays quiet:

- words: from the append's return, `POST /tools/memory_search` from the probe user's
  other session (`X-Navi-Session-Id`) every 0.1 s until the word is in the answer
  (goal: p95 ≤ 1 s);
- meaning: from the same append's return until the probe session's chunk has its vectors
  (SQL, every 0.1 s; the session is quiet from that append on: goal ≤ 10 s);
- after the load stops: the backlog (`/health`: chunks, the oldest's age), then the drain
  as above (the segments counted are an upper bound for a grown chunk, which re-embeds
  only its changed segments): the longest any chunk waited beside the goal's bound (the
  backlog over the embedder's rate) and beside the oldest's age at the stop plus the
  drain time;
- once drained, each probe's paraphrase (no word of its fact but stopwords) asked with
  `POST /memory/search` scope raw k 5 from the other session: the share whose own fact's
  session is first, in the five, and how many found nothing (the fake embedder has no
  meaning: only the local model's figure says something).

Printed: a table per measure; the figures in bench/.cache/burst.json. LongMemEval (Wu et
al., ICLR 2025), MIT licence, Copyright (c) 2024 Di Wu.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import re
import secrets
import sys
import time
from typing import Any

import httpx
import psycopg
from _embedder import select_embedder

select_embedder(sys.argv[1:])  # before any app import: the vector columns follow it

from _agent import ADMIN_TOKEN, agent_settings, ok  # noqa: E402
from _app import FIELDS, STOPWORDS, configure_logging, get_settings, segment_spans  # noqa: E402
from _common import (  # noqa: E402
    Stats,
    app_package,
    fake_ollama_process,
    fmt_ms,
    fresh_database,
    print_table,
    serve_navi,
    server_line,
    step,
    write_results,
)
from bench_lme import PROFILE, WINDOW, ask  # noqa: E402
from bench_load import Results, Window, client_loop, setup  # noqa: E402
from bench_locomo import _payload  # noqa: E402
from bench_wrk import REPO, resolve_commit, worktree  # noqa: E402
from lme_data import (  # noqa: E402
    Question,
    Tally,
    bm25_tallies,
    in_date_order,
    load,
    messages_of,
    pick,
)

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
WORDS_GOAL_S = 5.0  # burst: every session's words findable within
ASK_AFTER_S = 10.0  # burst: the questions asked this long after the last append
PROBE_EVERY_S = 2.0  # load: a probe this often
PROBE_POLL_S = 0.1
PROBE_GIVE_UP_S = 30.0
MEANING_GOAL_S = 10.0
SEGMENTS_METRIC = "navi_index_embedded_segments_total"
RECALL = ("any@5", "any@10", "all@5", "all@10")

# The probes' facts and their paraphrases: no word in common but stopwords (checked).
FACTS = [
    ("My sister Rosalind moved to Lisbon last spring to research dolphins at the aquarium.",
     "Which relative relocated to Portugal to study marine mammals?"),
    ("I sold my old motorbike to pay for a cooking course in Bologna.",
     "What did I give up to fund culinary lessons in Italy?"),
    ("Our landlord raised the rent by fifteen percent, so we are hunting for a cheaper flat.",
     "Why are we searching for a new apartment with lower housing costs?"),
    ("The vet said my beagle needs surgery on his left knee next Tuesday.",
     "When is the dog's leg operation scheduled?"),
    ("I quit coffee in January and switched to green tea every morning.",
     "Which caffeinated drink did I abandon at the start of the year?"),
    ("My daughter won first prize at the regional chess tournament.",
     "Which child of mine triumphed in a board game competition?"),
    ("We booked a cabin in Norway to watch the northern lights in February.",
     "Where will we stay to see the aurora borealis this winter?"),
    ("The dentist found two cavities and I need fillings before summer.",
     "What dental treatment must happen before the warm season?"),
    ("I started learning the cello after hearing a concert by a famous soloist.",
     "Which string instrument did I take up recently?"),
    ("Our team missed the quarterly sales target by nearly a million dollars.",
     "How far short of the revenue goal did the group fall?"),
    ("My grandfather taught me to fish on a lake in Minnesota.",
     "Who showed me angling as a child near the Midwest?"),
    ("I broke my wrist skiing in the Alps during the holidays.",
     "What injury did I get on the slopes in Switzerland?"),
    ("The bakery on our corner closed because the owner retired.",
     "Why did the neighborhood bread shop shut down?"),
    ("I am allergic to peanuts, so I always carry an epinephrine pen.",
     "What food reaction requires me to keep emergency medication with me?"),
    ("My husband is training for a marathon in Berlin this autumn.",
     "Which long-distance race is my spouse preparing for in Germany?"),
    ("We adopted two kittens from the shelter and named them Pepper and Salt.",
     "What young cats did we bring home from a rescue?"),
    ("The pipes in our basement froze and flooded the laundry room.",
     "What plumbing problem caused water damage downstairs?"),
    ("I got promoted to head of engineering after the product launch.",
     "What new leadership role did I receive at work?"),
    ("My brother is getting married on a beach in Thailand in March.",
     "Where is my sibling's wedding ceremony taking place abroad?"),
    ("I planted tomatoes, basil and peppers in raised garden beds this year.",
     "Which vegetables and herbs did I grow outdoors?"),
]  # fmt: skip


def shared_words(a: str, b: str) -> set[str]:
    """The words of `a` and `b` alike (stopwords aside; five letters of a longer word
    stand for it, a crude stem)."""

    def words(text: str) -> set[str]:
        out = {w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOPWORDS}
        return {w[:5] if len(w) > 5 else w for w in out}

    return words(a) & words(b)


for _fact, _para in FACTS:
    assert not shared_words(_fact, _para), (_fact, shared_words(_fact, _para))


# ------------------------------------------------------------------ the service
def service_settings(fake_url: str, embedder: str) -> Any:
    """bench_lme's settings (its profile's large window: an append never compresses) with
    the periodic jobs at their defaults, as `make run` has them (agent_settings turns the
    extraction off)."""
    settings = agent_settings(fake_url, {PROFILE: {"context_window": WINDOW}}, embedder)
    name = "extraction_interval_seconds"
    return dataclasses.replace(settings, **{name: FIELDS[name].default})


def workers_default() -> int:
    return int(os.environ.get("WEB_CONCURRENCY") or min(os.cpu_count() or 1, 64))


async def health_index(c: httpx.AsyncClient) -> dict[str, Any]:
    """`GET /health`'s embedding queue: backlog_chunks, oldest_seconds…"""
    r = await c.get("/health", headers=ADMIN)
    return dict(r.json().get("index") or {})


async def embedded_segments(c: httpx.AsyncClient) -> float:
    """`navi_index_embedded_segments_total` of `/metrics` (every process's, summed)."""
    r = await c.get("/metrics", headers=ADMIN)
    if r.status_code != 200:
        raise RuntimeError(f"/metrics: {r.status_code} {r.text[:200]}")
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in r.text.splitlines()
        if line.startswith(SEGMENTS_METRIC + " ") or line.startswith(SEGMENTS_METRIC + "{")
    )


def chunk_count(conninfo: str) -> int:
    with psycopg.connect(conninfo) as db:
        row = db.execute("SELECT count(*) FROM memory_chunks").fetchone()
    return int(row[0]) if row else 0


def waiting_segments(conninfo: str) -> int:
    """The segments of the chunks waiting for vectors (the app's `segment_spans`)."""
    with psycopg.connect(conninfo) as db:
        rows = db.execute("SELECT content FROM memory_chunks WHERE vectors_stale").fetchall()
    return sum(len(segment_spans(r[0]) or [(0, 0)]) for r in rows)


# ------------------------------------------------------------------ words and meaning per session
WORDS_SQL = """
SELECT s.id::text FROM sessions s
JOIN raw_index_state r ON r.session_id = s.id AND r.user_id = s.user_id
WHERE s.id = ANY(%s::uuid[]) AND r.covered @> int8range(0, s.next_seq)
"""
MEANING_SQL = """
SELECT s.id::text FROM unnest(%s::text[], %s::uuid[]) AS s(user_id, id)
WHERE EXISTS (SELECT FROM memory_chunks c WHERE c.user_id = s.user_id AND c.session_id = s.id)
  AND NOT EXISTS (SELECT FROM memory_chunks c
                  WHERE c.user_id = s.user_id AND c.session_id = s.id AND c.vectors_stale)
"""


class Watch:
    """Per session, the seconds from its (last) append's return until its words are
    indexed, and until its chunks have their vectors: the time of the first poll that saw
    it (the poll's snapshot is taken when it is sent), one query for all the sessions
    still waiting."""

    def __init__(self, conninfo: str, words_every: float, meaning_every: float) -> None:
        self.conninfo = conninfo
        self.words_every = words_every
        self.meaning_every = meaning_every
        self.appended: dict[str, tuple[str, float]] = {}  # session → (user, perf time)
        self.words: dict[str, float] = {}
        self.meaning: dict[str, float] = {}
        self.stop = asyncio.Event()

    def add(self, session_id: str, user_id: str, at: float) -> None:
        self.appended[session_id] = (user_id, at)

    def words_pending(self) -> list[str]:
        return [s for s in self.appended if s not in self.words]

    def meaning_pending(self) -> list[str]:
        return [s for s in self.words if s not in self.meaning]

    async def run(self) -> None:
        next_meaning = 0.0
        async with await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True) as db:
            while not self.stop.is_set():
                sent = time.perf_counter()
                if pending := self.words_pending():
                    rows = await (await db.execute(WORDS_SQL, (pending,))).fetchall()
                    for (sid,) in rows:
                        self.words[sid] = max(0.0, sent - self.appended[sid][1])
                if sent >= next_meaning and (pending := self.meaning_pending()):
                    next_meaning = sent + self.meaning_every
                    users = [self.appended[s][0] for s in pending]
                    rows = await (await db.execute(MEANING_SQL, (users, pending))).fetchall()
                    for (sid,) in rows:
                        self.meaning[sid] = max(0.0, sent - self.appended[sid][1])
                await asyncio.sleep(max(0.0, sent + self.words_every - time.perf_counter()))

    async def until(self, done: Any, limit: float) -> bool:
        """Wait until `done()` (or `limit` seconds): whether it came true."""
        deadline = time.perf_counter() + limit
        while not done():
            if time.perf_counter() > deadline:
                return False
            await asyncio.sleep(0.1)
        return True


# ------------------------------------------------------------------ the drain
UNCOVERED_SQL = """
SELECT extract(epoch FROM now())::float8, count(*) FROM sessions s
LEFT JOIN raw_index_state r ON r.session_id = s.id AND r.user_id = s.user_id
WHERE s.next_seq > 0 AND NOT coalesce(r.covered @> int8range(0, s.next_seq), false)
"""
STALE_SQL = (
    "SELECT id::text, extract(epoch FROM coalesce(stale_since, created_at))::float8"
    " FROM memory_chunks WHERE vectors_stale"
)


@dataclasses.dataclass
class Drain:
    """From `since` (perf time) until every session is covered and no chunk waits. The
    backlog is taken when every session is covered (from then on no chunk is added): the
    chunks and their segments waiting then, and the rate from then to the end."""

    seconds: float = math.nan  # NaN: not drained within the limit
    covered_at: float = math.nan  # every session covered, seconds after `since`
    chunks: int = 0  # waiting then
    waiting_segments: int = 0  # their segments (`waiting_segments`)
    segments: float = 0.0  # embedded from then to the end (/metrics)
    rate: float = math.nan  # those segments per second
    chunks_seen: int = 0  # chunks seen waiting by the polls
    max_wait: float = 0.0  # the longest a chunk seen waiting waited (stale_since → done)
    left: int = 0  # chunks still waiting at the limit
    #: (seconds since `since`, the /metrics counter), every second
    samples: list[tuple[float, float]] = dataclasses.field(default_factory=list)


async def drain(conninfo: str, c: httpx.AsyncClient, since: float, limit: float) -> Drain:
    """Poll every 0.5 s (the /metrics counter every 1 s) until nothing is left to index."""
    out = Drain()
    first = t_first = math.nan
    waiting: dict[str, float] = {}  # chunk → its stale_since (database clock)
    seen: set[str] = set()
    next_sample = time.perf_counter() + 1.0
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as db:
        while True:
            t = time.perf_counter()
            row = await (await db.execute(UNCOVERED_SQL)).fetchone()
            assert row is not None
            now, uncovered = float(row[0]), int(row[1])
            rows = await (await db.execute(STALE_SQL)).fetchall()
            stale = {cid: float(at) for cid, at in rows}
            if not uncovered and math.isnan(t_first):  # the backlog is all there now
                first, t_first = await embedded_segments(c), time.perf_counter()
                out.covered_at = t - since
                out.chunks = len(stale)
                out.waiting_segments = await asyncio.to_thread(waiting_segments, conninfo)
                out.samples.append((round(t_first - since, 2), first))
            for cid in [k for k in waiting if k not in stale]:
                out.max_wait = max(out.max_wait, now - waiting.pop(cid))
            for cid, at in stale.items():
                waiting.setdefault(cid, at)
                seen.add(cid)
            if not stale and not uncovered:
                out.seconds = t - since
                break
            if t - since > limit:
                out.left = len(stale)
                break
            if t >= next_sample:
                next_sample = t + 1.0
                out.samples.append((round(t - since, 2), await embedded_segments(c)))
            await asyncio.sleep(0.5)
    last, t_last = await embedded_segments(c), time.perf_counter()
    out.samples.append((round(t_last - since, 2), last))
    out.chunks_seen = len(seen)
    if not math.isnan(t_first):
        out.segments = last - first
        out.rate = out.segments / (t_last - t_first) if t_last > t_first else math.nan
    return out


def busiest_rate(d: Drain, span: float = 60.0) -> float:
    """The highest rate of the /metrics samples over `span` seconds or more, from the
    moment every session was covered (NaN: a shorter drain). The counter moves a round
    (32 chunks, a few seconds of work) at a time: a shorter span overstates the pace."""
    pts = [(t, n) for t, n in d.samples if t >= d.covered_at]
    best = math.nan
    for i, (t0, n0) in enumerate(pts):
        later = [(t, n) for t, n in pts[i + 1 :] if t - t0 >= span]
        if later:
            rate = (later[0][1] - n0) / (later[0][0] - t0)
            best = rate if math.isnan(best) else max(best, rate)
    return best


def drain_rows(label: str, backlog: dict[str, Any], d: Drain) -> list[list[object]]:
    """The drain table's rows: what waited, how long it took, against backlog / rate."""
    expected = d.waiting_segments / d.rate if d.rate and d.rate > 0 else math.nan
    after = d.seconds - d.covered_at
    busiest = busiest_rate(d)
    short = math.isnan(busiest)  # a drain under 60 s
    return [
        [f"{label}: chunks waiting (/health)", backlog.get("backlog_chunks", "-")],
        [f"{label}: oldest waiting (/health)", f"{backlog.get('oldest_seconds', 0):.1f} s"],
        ["every session covered (words) at", f"+{d.covered_at:.1f} s"],
        ["  then: chunks waiting", d.chunks],
        ["  then: their segments (counted from their text)", f"{d.waiting_segments:,}"],
        ["  from then: segments embedded (/metrics)", f"{d.segments:,.0f}"],
        ["  from then: rate", f"{d.rate:.1f} segments/s"],
        ["  segments waiting / rate", f"{expected:.1f} s"],
        ["  busiest 60 s of it: rate", "-" if short else f"{busiest:.1f} segments/s"],
        [
            "  segments waiting / that rate",
            "-" if short else f"{d.waiting_segments / busiest:.1f} s",
        ],
        ["  drain time from then (nothing stale)", f"{after:.1f} s"],
        ["drain time (nothing stale)", f"+{d.seconds:.1f} s"],
        ["chunks seen waiting (0.5 s polls)", d.chunks_seen],
        ["longest wait of a chunk seen (stale_since → done)", f"{d.max_wait:.1f} s"],
        ["chunks still waiting at the limit", d.left],
    ]


def seconds_row(name: str, values: list[float], goal: float, missing: int) -> list[object]:
    s = Stats.of(values)
    over = sum(v > goal for v in values)
    return [
        name, s.n, fmt_ms(1000 * s.p50), fmt_ms(1000 * s.p95), fmt_ms(1000 * s.max),
        f"{over} (goal {goal:g} s)", missing,
    ]  # fmt: skip


SECONDS_HEADERS = ["measure", "n", "p50 ms", "p95 ms", "max ms", "over the goal", "never seen"]


# ------------------------------------------------------------------ part A: the burst
async def new_user(c: httpx.AsyncClient, name: str) -> tuple[str, str]:
    """(user id, token) of a new user."""
    user = ok(await c.post("/admin/users", json={"name": name}, headers=ADMIN), "user", 201)
    issued = await c.post(f"/admin/users/{user['id']}/tokens", json={"name": "b"}, headers=ADMIN)
    return str(user["id"]), str(ok(issued, "token", 201)["token"])


async def send_burst(
    base_url: str,
    questions: list[Question],
    users: dict[str, Any],
    watch: Watch,
    clients: int,
    spread: float = 0.0,
) -> dict[str, Any]:
    """Every haystack session: created, then its turns in one append, by `clients`
    concurrent clients taking the next session as they are done; with `spread` seconds,
    the n-th session is not sent before n × spread / sessions (the issue's burst: ~8,000
    messages in ~100 s)."""
    todo = [(q, no, hay) for q in questions for no, hay in enumerate(in_date_order(q))]
    gap = spread / max(len(todo), 1)
    jobs = iter(enumerate(todo))
    latencies: list[float] = []
    messages = 0
    start = time.perf_counter()

    async def client() -> None:
        nonlocal messages
        async with httpx.AsyncClient(base_url=base_url, timeout=300) as c:
            for n, (q, no, hay) in jobs:
                wait = start + n * gap - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                user = users[q.question_id]
                auth = {"Authorization": f"Bearer {user['token']}"}
                body = {"profile_id": PROFILE, "name": hay.session_id}
                sid = str(
                    ok(await c.post("/sessions", json=body, headers=auth), "session", 201)["id"]
                )
                payload = {"messages": [_payload(m) for m in messages_of(hay, no)]}
                t0 = time.perf_counter()
                r = await c.post(f"/sessions/{sid}/messages", json=payload, headers=auth)
                ok(r, "append", 201)
                done = time.perf_counter()
                watch.add(sid, user["id"], done)
                latencies.append(done - t0)
                user["sessions"][sid] = hay.session_id
                messages += len(payload["messages"])

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return {
        "seconds": time.perf_counter() - t0,
        "sessions": len(latencies),
        "messages": messages,
        "append": Stats.of(latencies),
    }


def recall_row(name: str, tally: Tally) -> list[object]:
    return [name, *(f"{tally.mean(m):.3f}" for m in RECALL)]


async def part_burst(args: argparse.Namespace) -> dict[str, Any]:
    questions = pick(load(), args.questions)
    target = fresh_database("navi_bench_burst")
    fake, fake_url = fake_ollama_process(get_settings().vector_dim)
    settings = service_settings(fake_url, args.embedder)
    configure_logging(settings.log_level, settings.log_json)
    server = None
    try:
        step(f"[burst] starting `python -m app.cli serve --workers {args.workers}` …")
        server = serve_navi(settings, target.url, args.workers, ADMIN_TOKEN, cwd=args.cwd)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=300) as c:
            users: dict[str, Any] = {}
            for q in questions:
                uid, token = await new_user(c, f"lme-{q.question_id}")
                users[q.question_id] = {"id": uid, "token": token, "sessions": {}}
            watch = Watch(target.conninfo, words_every=0.1, meaning_every=1.0)
            watcher = asyncio.create_task(watch.run())
            n_sessions = sum(len(q.sessions) for q in questions)
            step(f"[burst] {n_sessions} sessions, {args.burst_clients} clients …")
            seg0 = await embedded_segments(c)
            sent = await send_burst(
                server.base_url, questions, users, watch, args.burst_clients, args.burst_seconds
            )
            last = max(at for _, at in watch.appended.values())
            uncovered_at_last = len(watch.words_pending())
            at_last = await health_index(c)
            seg_burst = await embedded_segments(c) - seg0
            step(
                f"[burst] {sent['messages']:,} messages in {sent['seconds']:.1f} s; "
                f"{len(watch.words)} of {sent['sessions']} sessions covered; "
                f"asking at +{ASK_AFTER_S:g} s"
            )
            drainer = asyncio.create_task(drain(target.conninfo, c, last, args.max_wait))
            await asyncio.sleep(max(0.0, last + ASK_AFTER_S - time.perf_counter()))
            at_ask = await health_index(c)
            asked_at = time.perf_counter() - last
            uncovered_at_ask = len(watch.words_pending())
            chunks_at_ask = await asyncio.to_thread(chunk_count, target.conninfo)
            t0 = time.perf_counter()
            early = await ask(c, questions, users, args.k, False)
            ask_seconds = time.perf_counter() - t0
            step(f"[burst] asked in {ask_seconds:.1f} s; waiting for the drain …")
            drained = await drainer
            await watch.until(lambda: not watch.meaning_pending(), 5.0)
            watch.stop.set()
            await watcher
            late = await ask(c, questions, users, args.k, False)
    finally:
        if server is not None:
            server.stop()
        fake.kill()
        fake.wait()
    words = [watch.words[s] for s in watch.appended if s in watch.words]
    meaning = [watch.meaning[s] for s in watch.appended if s in watch.meaning]
    bm25 = bm25_tallies(questions)["bm25 sessions"]
    print(
        f"\n== burst: {len(questions)} LongMemEval-S dev questions, {sent['messages']:,} messages"
        f" in {sent['sessions']:,} new sessions (one append each), {args.burst_clients} clients; "
        f"embedder {args.embedder}; {server_line(target)}"
    )
    a: Stats = sent["append"]
    print_table(
        ["sessions", "messages", "seconds", "messages/s", "append p50 ms", "p95 ms", "max ms"],
        [
            [
                sent["sessions"],
                f"{sent['messages']:,}",
                f"{sent['seconds']:.1f}",
                f"{sent['messages'] / sent['seconds']:.0f}",
                fmt_ms(1000 * a.p50),
                fmt_ms(1000 * a.p95),
                fmt_ms(1000 * a.max),
            ]
        ],  # fmt: skip
    )
    print()
    print_table(
        SECONDS_HEADERS,
        [
            seconds_row(
                "append → words indexed", words, WORDS_GOAL_S, sent["sessions"] - len(words)
            ),
            seconds_row(
                "append → vectors written", meaning, MEANING_GOAL_S, sent["sessions"] - len(meaning)
            ),
        ],
        title="per session, from its append's return (polls: words 0.1 s, vectors 1 s)",
    )
    print()
    print_table(
        ["retriever", *(f"recall_{m}" for m in RECALL)],
        [
            recall_row(
                f"memory_search at +{asked_at:.0f} s ({at_ask.get('backlog_chunks')} of "
                f"{chunks_at_ask} chunks without vectors, {uncovered_at_ask} sessions uncovered)",
                early.tally,
            ),
            recall_row(f"memory_search after the drain (+{drained.seconds:.0f} s)", late.tally),
            recall_row("BM25 over sessions (lme_data)", bm25),
        ],
        title=f"session recall, k {args.k}, scope raw (goals: @5 ≥ 0.90 words only; ≥ BM25 after)",
    )
    print()
    print_table(
        ["after the last append", "value"],
        [
            ["segments embedded during the burst (/metrics)", f"{seg_burst:,.0f}"],
            ["sessions not yet covered at the last append (no chunks yet)", uncovered_at_last],
            *drain_rows("at the last append", at_last, drained),
        ],
        title="the drain (from the last append's return)",
    )
    return {
        "questions": [q.question_id for q in questions],
        "server": server_line(target),
        "sent": {**sent, "append": dataclasses.asdict(a)},
        "words_s": dataclasses.asdict(Stats.of(words)),
        "words_over_goal": sum(v > WORDS_GOAL_S for v in words),
        "words_never": sent["sessions"] - len(words),
        "vectors_s": dataclasses.asdict(Stats.of(meaning)),
        "asked_at_s": asked_at,
        "ask_seconds": ask_seconds,
        "backlog_at_last_append": at_last,
        "segments_embedded_during_burst": seg_burst,
        "backlog_at_ask": at_ask,
        "chunks_at_ask": chunks_at_ask,
        "uncovered_at_last_append": uncovered_at_last,
        "uncovered_at_ask": uncovered_at_ask,
        "recall_words_only": early.tally.as_dict()["all"],
        "recall_after_drain": late.tally.as_dict()["all"],
        "bm25_sessions": bm25.as_dict()["all"],
        "drain": dataclasses.asdict(drained),
    }


# ------------------------------------------------------------------ part B: under load
@dataclasses.dataclass
class Probe:
    n: int
    session: str
    word: str
    fact: int  # index in FACTS
    found_s: float | None = None  # by its word from the other session


async def probe(
    c: httpx.AsyncClient, n: int, uid: str, asker: str, watch: Watch, out: list[Probe]
) -> None:
    """A new session of the probe user: one message (a word said nowhere else and a
    fact), then quiet; memory_search from the other session until the word is found."""
    word = f"zq{n}x{secrets.token_hex(3)}"
    fact = n % len(FACTS)
    sid = ok(await c.post("/sessions", json={"name": f"probe {n}"}), "session", 201)["id"]
    text = f"{FACTS[fact][0]} Reference code {word}."
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": [
        {"role": "user", "content": text}]})  # fmt: skip
    ok(r, "append", 201)
    said = time.perf_counter()
    watch.add(str(sid), uid, said)
    p = Probe(n, str(sid), word, fact)
    out.append(p)
    while time.perf_counter() - said < PROBE_GIVE_UP_S:
        sent = time.perf_counter()
        r = await c.post(
            "/tools/memory_search",
            json={"query": f"reference code {word}", "k": 3},
            headers={"X-Navi-Session-Id": asker},
        )
        if r.status_code == 200 and word in r.json()["text"]:
            p.found_s = time.perf_counter() - said
            return
        await asyncio.sleep(max(0.0, sent + PROBE_POLL_S - time.perf_counter()))


async def paraphrases(c: httpx.AsyncClient, probes: list[Probe], asker: str) -> dict[str, float]:
    """Each probe's paraphrase asked once: its fact's session (any probe with that fact)
    first in the hits, or among the five."""
    sessions: dict[int, set[str]] = {}
    for p in probes:
        sessions.setdefault(p.fact, set()).add(p.session)
    top1 = top5 = empty = 0
    for fact, mine in sessions.items():
        body = {"query": FACTS[fact][1], "scope": "raw", "k": 5, "current_session_id": asker}
        hits = ok(await c.post("/memory/search", json=body), "memory_search")["hits"]
        ranked = [h.get("session_id") for h in hits]
        top1 += bool(ranked) and ranked[0] in mine
        top5 += any(s in mine for s in ranked[:5])
        empty += not ranked
    n = max(len(sessions), 1)
    return {"facts": len(sessions), "hit@1": top1 / n, "hit@5": top5 / n, "no_hit": empty}


async def part_load(args: argparse.Namespace) -> dict[str, Any]:
    target = fresh_database("navi_bench_burst_load")
    fake, fake_url = fake_ollama_process(get_settings().vector_dim)
    settings = service_settings(fake_url, args.embedder)
    configure_logging(settings.log_level, settings.log_json)
    server = None
    try:
        step(f"[load] starting `python -m app.cli serve --workers {args.workers}` …")
        server = serve_navi(settings, target.url, args.workers, ADMIN_TOKEN, cwd=args.cwd)
        base = server.base_url
        setup_args = argparse.Namespace(
            clients=args.clients, sessions=args.sessions, facts=0, seed=args.seed
        )
        step(f"[load] setup: {args.clients} users × {args.sessions} sessions of 24 messages …")
        users = await setup(base, setup_args)
        async with httpx.AsyncClient(base_url=base, timeout=300) as c:
            setup_drain = await drain(target.conninfo, c, time.perf_counter(), args.max_wait)
            step(f"[load] the setup's vectors written in {setup_drain.seconds:.1f} s")
            uid, token = await new_user(c, "probe")
            c.headers["Authorization"] = f"Bearer {token}"
            asker = ok(await c.post("/sessions", json={"name": "asked here"}), "session", 201)["id"]
            watch = Watch(target.conninfo, words_every=PROBE_POLL_S, meaning_every=PROBE_POLL_S)
            watcher = asyncio.create_task(watch.run())
            seg0 = await embedded_segments(c)
            start = time.perf_counter()
            window = Window(start=start, end=start + args.seconds)
            results = Results()
            step(f"[load] {args.clients} clients × {args.seconds:g} s of appends, probes")
            loaders = [
                asyncio.create_task(
                    client_loop(base, u, args.seed + i, {"append": 1.0}, 1, window, results)
                )
                for i, u in enumerate(users)
            ]
            probes: list[Probe] = []
            probing = []
            n = 0
            while (tick := start + 1.0 + PROBE_EVERY_S * n) < window.end:
                await asyncio.sleep(max(0.0, tick - time.perf_counter()))
                probing.append(asyncio.create_task(probe(c, n, uid, asker, watch, probes)))
                n += 1
            await asyncio.gather(*loaders)
            stopped = time.perf_counter()
            at_stop = await health_index(c)
            seg_load = await embedded_segments(c) - seg0
            step(f"[load] stopped; {at_stop.get('backlog_chunks')} chunks waiting; draining …")
            drainer = asyncio.create_task(drain(target.conninfo, c, stopped, args.max_wait))
            await asyncio.gather(*probing)
            drained = await drainer
            await watch.until(
                lambda: not watch.words_pending() and not watch.meaning_pending(), 5.0
            )
            watch.stop.set()
            await watcher
            para = await paraphrases(c, probes, asker)
    finally:
        if server is not None:
            server.stop()
        fake.kill()
        fake.wait()
    load_s = stopped - start
    lat = results.latencies["append"]
    errors = sum(results.errors["append"].values())
    found = [p.found_s for p in probes if p.found_s is not None]
    meaning = [watch.meaning[p.session] for p in probes if p.session in watch.meaning]
    indexed = [watch.words[p.session] for p in probes if p.session in watch.words]
    la = Stats.of(lat)
    print(
        f"\n== under load: {args.clients} clients appending 1 message per request for "
        f"{args.seconds:g} s (their own sessions), a probe every {PROBE_EVERY_S:g} s; embedder "
        f"{args.embedder}; {server_line(target)}"
    )
    print_table(
        ["appends", "req/s", "p50 ms", "p95 ms", "max ms", "errors", "segments embedded meanwhile"],
        [
            [
                f"{len(lat):,}",
                f"{len(lat) / load_s:.1f}",
                fmt_ms(la.p50),
                fmt_ms(la.p95),
                fmt_ms(la.max),
                errors,
                f"{seg_load:,.0f} ({seg_load / load_s:.1f} /s)",
            ]
        ],  # fmt: skip
    )
    print()
    print_table(
        SECONDS_HEADERS,
        [
            seconds_row(
                "found by its word from another session", found, 1.0, len(probes) - len(found)
            ),
            seconds_row("append → words indexed (SQL)", indexed, 1.0, len(probes) - len(indexed)),
            seconds_row(
                "append → vectors written (quiet from then)",
                meaning,
                MEANING_GOAL_S,
                len(probes) - len(meaning),
            ),
        ],
        title=f"{len(probes)} probes, from the append's return (polls every {PROBE_POLL_S:g} s; "
        f"words goal p95 ≤ 1 s)",
    )
    print()
    print_table(
        ["after the load stopped", "value"],
        [
            *drain_rows("at the stop", at_stop, drained),
            [
                "bound: oldest at the stop + drain time",
                f"{at_stop.get('oldest_seconds', 0) + drained.seconds:.1f} s",
            ],
        ],
        title="the drain (goal: no segment waits longer than the backlog / the embedder's rate)",
    )
    print(
        f"\nparaphrases (no word of the fact but stopwords), memory_search scope raw k 5 after the "
        f"drain: {para['facts']} facts, their session first {para['hit@1']:.2f}, in the five "
        f"{para['hit@5']:.2f}; no hit at all for {para['no_hit']}"
    )
    return {
        "server": server_line(target),
        "setup_drain": dataclasses.asdict(setup_drain),
        "load_seconds": load_s,
        "appends": len(lat),
        "append_ms": dataclasses.asdict(la),
        "append_errors": {k: v for k, v in results.errors["append"].items()},
        "segments_embedded_during_load": seg_load,
        "probes": [dataclasses.asdict(p) for p in probes],
        "words_s": dataclasses.asdict(Stats.of(found)),
        "words_missed": len(probes) - len(found),
        "indexed_s": dataclasses.asdict(Stats.of(indexed)),
        "vectors_s": dataclasses.asdict(Stats.of(meaning)),
        "vectors_over_goal": sum(v > MEANING_GOAL_S for v in meaning),
        "backlog_at_stop": at_stop,
        "drain": dataclasses.asdict(drained),
        "paraphrases": para,
    }


# ------------------------------------------------------------------ main
async def bench(args: argparse.Namespace) -> dict[str, Any]:
    data: dict[str, Any] = {"params": vars(args)}
    if "burst" in args.parts:
        data["burst"] = await part_burst(args)
    if "load" in args.parts:
        data["load"] = await part_load(args)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="burst,load", help="burst, load or both (comma list)")
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
    parser.add_argument("--workers", type=int, default=workers_default(),
                        help="web worker processes (default as `make run`)")  # fmt: skip
    parser.add_argument("--questions", type=int, default=18, help="burst: LongMemEval questions")
    parser.add_argument("--burst-clients", type=int, default=8, help="burst: concurrent clients")
    parser.add_argument(
        "--burst-seconds",
        type=float,
        default=0.0,
        help="burst: spread the sessions over this long (the issue's: ~100); 0 = at once",
    )
    parser.add_argument("--k", type=int, default=10, help="burst: memory_search k")
    parser.add_argument("--clients", type=int, default=8, help="load: appending clients")
    parser.add_argument("--seconds", type=float, default=40, help="load: seconds of appends")
    parser.add_argument("--sessions", type=int, default=4, help="load: sessions per client")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument(
        "--commit", help="run the server from this commit's worktree (default: this checkout)"
    )
    parser.add_argument(
        "--max-wait", type=float, default=1800, help="seconds a drain may take at most"
    )
    args = parser.parse_args()
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not args.parts or set(args.parts) - {"burst", "load"}:
        parser.error("--parts: burst, load or burst,load")
    if not 1 <= args.questions <= 94 or not 1 <= args.burst_clients <= 64:
        parser.error("--questions: 1–94; --burst-clients: 1–64")
    if not 1 <= args.clients <= 64 or not 0 < args.seconds <= 600 or not 1 <= args.workers <= 16:
        parser.error("--clients: 1–64; --seconds: up to 600; --workers: 1–16")
    args.cwd = worktree(resolve_commit(args.commit)) if args.commit else REPO
    step(f"the server's app: {app_package(args.cwd)}")
    write_results("burst.json", asyncio.run(bench(args)))
    print("LongMemEval (Wu et al., ICLR 2025), MIT licence, Copyright (c) 2024 Di Wu.")


if __name__ == "__main__":
    main()
