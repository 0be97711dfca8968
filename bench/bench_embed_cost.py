"""Tokens embedded per appended message, A/B between commits (issue 41 item 2):
`make bench-embed-cost`.

    .venv/bin/python bench/bench_embed_cost.py                      # this checkout vs be065d7
    .venv/bin/python bench/bench_embed_cost.py --ab fa40a74 --ab be065d7
    .venv/bin/python bench/bench_embed_cost.py --sessions 4 --turns 4   # a short run

What the live raw index costs in embeddings while conversations run: be065d7 re-embedded
the growing last segment of every open chunk about once a second per process while the
appends arrived; this checkout embeds a session's open chunk once the session has been
quiet `INDEX_QUIET_SECONDS`, in the indexer process `navi serve` starts. A commit from
before the live index (fa40a74) embeds a session's messages only later (compression, or
the idle-session job after 30 minutes): for such a commit the bench runs the checkout's
own `index-sessions --older-than 0` once the conversations are over (the idle job's work,
at once) and reports what that embedded, marked as embedded later.

The embedder is the fake Ollama (tests/fakes/ollama_server.py) in a process of its own,
one for the whole run: its `GET /_fake/stats` counts what `/api/embed` embedded (requests,
texts, chars, words, and the local model's WordPiece tokens when its tokenizer is
installed: what all-MiniLM reads, at most 256 a text), `POST /_fake/stats/reset` zeroes
it right before each commit's workload, so the setup's embeds do not count.

Each commit in turn (`--ab COMMIT`, repeatable; default be065d7; this checkout last),
only one server up at a time: a worktree `/tmp/navi-ab-<sha>` (`bench_wrk.worktree`),
a fresh empty database of its own (`navi_bench_embed_<sha>`) that its own server
migrates, the service as `make run` starts it (`_common.serve_navi`: `python -m app.cli
serve`, periodic jobs and the live indexer on, `--workers` web workers) with the bench's
settings (`bench_wrk.service_settings`: auth on, the fake Ollama as the LLM and the
embedder). The same workload for every commit: `--sessions` users with one session each,
a conversation of `--turns` turns (user then assistant: 2 × turns messages of 100–600
chars, sentences drawn from `--seed`), one message per `POST /sessions/{id}/messages`,
each session its next message every `--pace` seconds (±25 %, the same schedule for every
commit), all sessions at once. No memory_search and no facts: every embedding is index
work. Then it waits until the index has caught up: no chunk `vectors_stale`, every
message covered by a chunk (`raw_index_state.covered`), and the fake's embed count
unchanged for 5 s (at most `--max-wait` s after the last append).

Printed per commit: messages and chars appended; embed requests, texts, chars, words
(the fake's token count) and WordPiece tokens embedded; per appended message: tokens and
chars embedded, and chars embedded / chars appended (how many times each appended char
was embedded); the chunks and segments at the end (embedding each chunk's text once is
the floor); the time from the last append until the last embedding of the catch-up.
Then this checkout / each other commit.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from _agent import ADMIN_TOKEN, ok
from _app import configure_logging, get_settings
from _common import (
    app_package,
    auth,
    empty_database,
    fake_ollama_process,
    fmt_ratio,
    loadavg,
    print_table,
    provision,
    serve_navi,
    server_line,
    step,
    write_results,
)
from bench_wrk import REPO, Side, git, head_label, index_sessions, resolve_commit, worktree
from bench_wrk import service_settings as wrk_settings

STABLE_SECONDS = 5.0  # the fake's embed count unchanged this long: caught up
POLL_SECONDS = 0.25
JITTER = 0.25  # each gap between a session's appends: pace × (1 ± JITTER)

# ------------------------------------------------------------------ the conversations
TOPICS = [
    "billing migration", "release checklist", "Postgres upgrade", "onboarding guide",
    "latency regression", "backup policy", "Kubernetes cluster", "quarterly budget",
    "incident review", "search ranking", "mobile app", "data retention policy",
    "API rate limits", "holiday schedule", "vendor contract", "load test",
]  # fmt: skip
NAMES = ["Alice", "Bob", "Carmen", "Deepak", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week", "tomorrow"]
THINGS = [
    "the staging database", "the nightly job", "the dashboard", "the invoice export",
    "the error budget", "the deployment script", "the on-call rota", "the config file",
    "the cache layer", "the test suite", "the customer report", "the connection pool",
]  # fmt: skip
USER = [
    "Can you remind me what we decided about the {topic} on {day}?",
    "{name} says {thing} is still failing after the last change, any idea why?",
    "I think we should move the {topic} to {day}, because {name} is away until then.",
    "What would it take to make {thing} twice as fast without touching the {topic}?",
    "Please draft a short note for {name} explaining the {topic} in plain words.",
    "We measured {num} ms on {thing} yesterday, which is worse than last month.",
    "Is it safe to restart {thing} during business hours, or should we wait for {day}?",
    "Let's keep a list of open questions about the {topic}; the first is who owns it.",
    "I just talked to {name}: the {topic} needs sign-off from finance before {day}.",
    "How many customers would notice if {thing} were down for {num} minutes?",
]
ASSISTANT = [
    "Last time we agreed to split the {topic} into two steps, starting with {thing}.",
    "The most likely cause is {thing}: it was changed in the same release as the {topic}.",
    "{name} owns the {topic}; I would ask them before changing {thing}.",
    "A restart of {thing} takes about {num} seconds and drops no requests if done one "
    "node at a time.",
    "Here is a draft: the {topic} moves to {day}, {thing} stays as it is, and {name} "
    "reviews the result.",
    "The numbers suggest {thing} is the bottleneck; {num} ms is mostly spent waiting on "
    "the network.",
    "I would keep the {topic} as planned and add a check on {thing} so that we notice "
    "sooner next time.",
    "Two options: roll back {thing} now, or wait until {day} and fix it together with the {topic}.",
    "Noted. I added it to the open questions of the {topic}, next to the one about {thing}.",
    "Roughly {num} customers use {thing} in a typical hour, so a short outage on {day} "
    "would be noticed.",
]
MIN_CHARS, MAX_CHARS = 100, 600


def message_text(rng: random.Random, templates: list[str]) -> str:
    """Sentences from `templates` up to a length drawn in [MIN_CHARS, MAX_CHARS]."""
    target = rng.randint(MIN_CHARS, MAX_CHARS)
    text = ""
    while len(text) < target:
        sentence = rng.choice(templates).format(
            topic=rng.choice(TOPICS),
            thing=rng.choice(THINGS),
            name=rng.choice(NAMES),
            day=rng.choice(DAYS),
            num=rng.randint(2, 900),
        )
        text = f"{text} {sentence}" if text else sentence[0].upper() + sentence[1:]
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + "."
    return text


@dataclasses.dataclass(frozen=True)
class Conversation:
    messages: list[tuple[str, str]]  # (role, content)
    start: float  # seconds after the workload starts: its first append
    gaps: list[float]  # seconds from one append to the next


def conversations(args: argparse.Namespace) -> list[Conversation]:
    """The workload, the same for every commit: a conversation per session."""
    rng = random.Random(args.seed)
    out = []
    for _ in range(args.sessions):
        r = random.Random(rng.getrandbits(64))
        messages = []
        for _ in range(args.turns):
            messages.append(("user", message_text(r, USER)))
            messages.append(("assistant", message_text(r, ASSISTANT)))
        gaps = [args.pace * r.uniform(1 - JITTER, 1 + JITTER) for _ in messages[1:]]
        out.append(Conversation(messages, r.uniform(0, args.pace), gaps))
    return out


# ------------------------------------------------------------------ the fake's counters
def fake_stats(url: str) -> dict[str, Any]:
    return dict(httpx.get(url + "/_fake/stats", timeout=10).json())


def fake_reset(url: str) -> None:
    httpx.post(url + "/_fake/stats/reset", timeout=10).raise_for_status()


COUNTERS = (
    "embed_requests", "embed_texts", "embed_chars", "embed_tokens", "embed_wordpiece",
    "embed_wordpiece_full",
)  # fmt: skip


def minus(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    return {k: None if after.get(k) is None else after[k] - (before.get(k) or 0) for k in COUNTERS}


# ------------------------------------------------------------------ the database's side
def has_live_index(conninfo: str) -> bool:
    """Whether the commit has the live raw index (its chunks carry `vectors_stale`)."""
    with psycopg.connect(conninfo, autocommit=True) as c:
        row = c.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'memory_chunks'"
            " AND column_name = 'vectors_stale'"
        ).fetchone()
    return row is not None


UNCOVERED = """
SELECT count(*) FROM session_messages m
LEFT JOIN raw_index_state s ON s.session_id = m.session_id AND s.user_id = m.user_id
WHERE s.covered IS NULL OR NOT s.covered @> m.sequence_number::bigint
"""


def pending(conn: psycopg.Connection[Any], live: bool) -> tuple[int, int]:
    """(stale chunks, messages no chunk covers yet)."""
    stale = (0,)
    if live:  # an older schema has no such column
        stale = conn.execute("SELECT count(*) FROM memory_chunks WHERE vectors_stale").fetchone()
    uncovered = conn.execute(UNCOVERED).fetchone()
    return int(stale[0]) if stale else 0, int(uncovered[0]) if uncovered else 0


def index_facts(conninfo: str) -> dict[str, int]:
    with psycopg.connect(conninfo, autocommit=True) as c:
        chunks, chars = c.execute(
            "SELECT count(*), coalesce(sum(length(content)), 0) FROM memory_chunks"
        ).fetchone()  # type: ignore[misc]
        (segments,) = c.execute("SELECT count(*) FROM memory_chunk_vectors").fetchone()  # type: ignore[misc]
        (messages,) = c.execute("SELECT count(*) FROM session_messages").fetchone()  # type: ignore[misc]
    return {
        "chunks": int(chunks),
        "chunk_chars": int(chars),
        "segments": int(segments),
        "messages_stored": int(messages),
    }


# ------------------------------------------------------------------ the workload
@dataclasses.dataclass
class Appended:
    messages: int = 0
    chars: int = 0
    errors: int = 0
    first_at: float = float("inf")  # time.time()
    last_at: float = 0.0


async def make_sessions(base_url: str, n: int) -> list[tuple[str, str]]:
    """`n` users with one empty session each: (token, session id)."""
    headers = auth(ADMIN_TOKEN)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as admin:

        async def one(i: int) -> tuple[str, str]:
            user = ok(
                await admin.post("/admin/users", json={"name": f"embed-{i:03d}"}), "user", 201
            )
            issued = await admin.post(f"/admin/users/{user['id']}/tokens", json={"name": "b"})
            token = ok(issued, "token", 201)["token"]
            body = {"profile_id": "default", "name": f"conversation {i}"}
            created = await admin.post("/sessions", json=body, headers=auth(token))
            return token, ok(created, "session", 201)["id"]

        return list(await asyncio.gather(*(one(i) for i in range(n))))


async def workload(
    base_url: str, sessions: list[tuple[str, str]], convs: list[Conversation]
) -> Appended:
    """Every conversation at once, one message per request, on its schedule."""
    done = Appended()
    limits = httpx.Limits(max_connections=len(sessions) + 4)
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        t0 = loop.time()

        async def converse(token: str, sid: str, conv: Conversation) -> None:
            at = t0 + conv.start
            for k, (role, content) in enumerate(conv.messages):
                await asyncio.sleep(max(0.0, at - loop.time()))
                body = {"messages": [{"role": role, "content": content}]}
                r = await client.post(f"/sessions/{sid}/messages", json=body, headers=auth(token))
                now = time.time()
                if r.status_code != 201:
                    done.errors += 1
                    step(f"append: {r.status_code} {r.text[:200]}")
                else:
                    done.messages += 1
                    done.chars += len(content)
                    done.first_at = min(done.first_at, now)
                    done.last_at = max(done.last_at, now)
                if k < len(conv.gaps):
                    at += conv.gaps[k]

        await asyncio.gather(
            *(converse(t, s, c) for (t, s), c in zip(sessions, convs, strict=True))
        )
    return done


async def catch_up(
    conninfo: str, fake_url: str, live: bool, appended: Appended, args: argparse.Namespace
) -> dict[str, Any]:
    """Wait until the index has caught up (nothing stale, every message in a chunk) and
    the fake's embed count has not changed for STABLE_SECONDS; at most `--max-wait` s
    after the last append. A commit without the live index: only the count's calm."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, args.max_wait - (time.time() - appended.last_at))
    count, calm_since = -1, loop.time()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while True:
            stats = await asyncio.to_thread(fake_stats, fake_url)
            if stats["embed_requests"] != count:
                count, calm_since = stats["embed_requests"], loop.time()
            stale, uncovered = pending(conn, live)
            indexed = not live or (stale == 0 and uncovered == 0)
            if indexed and loop.time() - calm_since >= STABLE_SECONDS:
                break
            if loop.time() > deadline:
                step(
                    f"not caught up after {args.max_wait:g} s: {stale} stale, {uncovered} uncovered"
                )
                break
            await asyncio.sleep(POLL_SECONDS)
    last = stats["last_embed_at"]
    caught = indexed and live
    return {
        "caught_up": caught,
        "stale": stale,
        "uncovered": uncovered,
        "seconds": round(max(0.0, last - appended.last_at), 2) if caught and last else None,
    }


# ------------------------------------------------------------------ one commit
async def measure(
    side: Side, base: Any, fake_url: str, convs: list[Conversation], args: argparse.Namespace
) -> dict[str, Any]:
    side.target = empty_database(side.db)
    settings = dataclasses.replace(base, data_dir=tempfile.mkdtemp(prefix="navi-bench-embed-"))
    step(f"[{side.label}] starting `navi serve --workers {args.workers}` from {side.cwd} …")
    side.server = serve_navi(settings, side.target.url, args.workers, ADMIN_TOKEN, cwd=side.cwd)
    try:
        side.target = provision(side.db, migrate=False)  # migrated by its server now
        print(f"{side.label}: {server_line(side.target)}", flush=True)
        conninfo = side.target.conninfo
        live = has_live_index(conninfo)
        sessions = await make_sessions(side.server.base_url, args.sessions)
        await asyncio.sleep(1.0)  # whatever the setup set off has run
        await asyncio.to_thread(fake_reset, fake_url)
        step(
            f"[{side.label}] {args.sessions} sessions × {2 * args.turns} messages, one every "
            f"{args.pace:g} s ±{JITTER:.0%} …"
        )
        appended = await workload(side.server.base_url, sessions, convs)
        appending = minus(await asyncio.to_thread(fake_stats, fake_url), {})
        step(
            f"[{side.label}] {appended.messages} appended in "
            f"{appended.last_at - appended.first_at:.1f} s; waiting for the index …"
        )
        caught = await catch_up(conninfo, fake_url, live, appended, args)
        in_run = minus(await asyncio.to_thread(fake_stats, fake_url), {})
        later = None
        if not live:  # embedded only later: the idle job's work, run at once
            step(f"[{side.label}] no live index: `index-sessions --older-than 0` …")
            step(f"[{side.label}] {index_sessions(side, settings, args)}")
        total = minus(await asyncio.to_thread(fake_stats, fake_url), {})
        if not live:
            later = minus(total, in_run)
    finally:
        side.server.stop()
        side.server = None
    return {
        "label": side.label,
        "live_index": live,
        "appended": dataclasses.asdict(appended)
        | {"seconds": appended.last_at - appended.first_at},
        "while_appending": appending,
        "in_run": in_run,
        "later": later,
        "total": total,
        "catch_up": caught,
        "index": index_facts(conninfo),
    }


# ------------------------------------------------------------------ report
def per_message(r: dict[str, Any]) -> dict[str, float | None]:
    n, t = max(r["appended"]["messages"], 1), r["total"]
    chars_in = max(r["appended"]["chars"], 1)
    wordpiece = t["embed_wordpiece"]
    return {
        "words": t["embed_tokens"] / n,
        "wordpiece": None if wordpiece is None else wordpiece / n,
        "chars": t["embed_chars"] / n,
        "times": t["embed_chars"] / chars_in,
        "requests": t["embed_requests"] / n,
        "texts": t["embed_texts"] / n,
    }


def chunk_share(r: dict[str, Any]) -> float:
    """The chunks' text over the appended text: embedding each chunk once."""
    return float(r["index"]["chunk_chars"]) / max(r["appended"]["chars"], 1)


def when(r: dict[str, Any]) -> str:
    return "live index" if r["live_index"] else "later (idle job)*"


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def report(rows: list[dict[str, Any]], args: argparse.Namespace, quiet: float) -> None:
    names = [r["short"] for r in rows]
    pm = [per_message(r) for r in rows]

    def line(name: str, values: list[Any]) -> list[Any]:
        return [name, *values]

    caught = []
    for r in rows:
        c = r["catch_up"]
        if not r["live_index"]:
            caught.append("- (later)*")
        elif c["caught_up"]:
            caught.append(fmt(c["seconds"]))
        else:
            caught.append(f"no: {c['stale']} stale")

    def count(part: str, key: str) -> list[str]:
        return [fmt(r[part][key], 0) for r in rows]

    table = [
        line("embedded by", [when(r) for r in rows]),
        line("messages appended", [f"{r['appended']['messages']:,}" for r in rows]),
        line("chars appended", [f"{r['appended']['chars']:,}" for r in rows]),
        line("append errors", [r["appended"]["errors"] for r in rows]),
        line("appends over (s)", [fmt(r["appended"]["seconds"]) for r in rows]),
        line("embed requests", count("total", "embed_requests")),
        line("  of which while the appends ran", count("while_appending", "embed_requests")),
        line("texts embedded", count("total", "embed_texts")),
        line("chars embedded", count("total", "embed_chars")),
        line("tokens embedded (words)", count("total", "embed_tokens")),
        line("tokens embedded (WordPiece)", count("total", "embed_wordpiece")),
        line("per message: tokens (words)", [fmt(p["words"]) for p in pm]),
        line("per message: tokens (WordPiece)", [fmt(p["wordpiece"]) for p in pm]),
        line("per message: chars embedded", [fmt(p["chars"]) for p in pm]),
        line("chars embedded / chars appended", [fmt(p["times"], 2) for p in pm]),
        line("chunks at the end", [r["index"]["chunks"] for r in rows]),
        line("segments at the end (vectors)", [r["index"]["segments"] for r in rows]),
        line("chunk chars / chars appended", [fmt(chunk_share(r), 2) for r in rows]),
        line("last append → caught up (s)", caught),
    ]
    print_table(
        ["", *names],
        table,
        title=(
            f"\n== tokens embedded per appended message: {args.sessions} sessions × "
            f"{2 * args.turns} messages (1 per request, one every {args.pace:g} s "
            f"±{JITTER:.0%}), {args.workers} web worker(s), the fake Ollama as the embedder, "
            f"INDEX_QUIET_SECONDS {quiet:g} (this checkout's); load average {loadavg()} on "
            f"{os.cpu_count()} cores"
        ),
    )
    for r in rows:
        print(f"  {r['short']}: {r['label']}")
    print(
        "  words: the fake's count (\\w+, as its prompt_eval_count); WordPiece: the local "
        "model's tokenizer, [CLS]/[SEP] included, at most 256 a text (what all-MiniLM reads)"
    )
    print(
        "  caught up: from the last append to the last embedding, once no chunk is stale "
        "and every message is in a chunk"
    )
    if any(not r["live_index"] for r in rows):
        print(
            "  * no live index: nothing is embedded while the conversations run; its chunks "
            "are embedded by compression or the idle-session job 30 min after the session "
            "went quiet — here its `index-sessions --older-than 0` run at once after the "
            "workload, whose embeds are the figures above"
        )
    head, head_pm = rows[-1], pm[-1]
    for r, p in zip(rows[:-1], pm[:-1], strict=True):
        keys = [
            ("tokens per message (words)", "words", 1),
            ("tokens per message (WordPiece)", "wordpiece", 1),
            ("chars embedded per message", "chars", 1),
            ("chars embedded / chars appended", "times", 2),
            ("texts per message", "texts", 2),
            ("embed requests per message", "requests", 3),
        ]
        ratio_rows = []
        for name, key, digits in keys:
            b, a = p[key], head_pm[key]
            ratio = a / b if a is not None and b else None
            ratio_rows.append([name, fmt(b, digits), fmt(a, digits), fmt_ratio(ratio, 3)])
        print_table(
            [
                "per appended message",
                f"before {r['short']}",
                f"after {head['short']}",
                "after/before",
            ],
            ratio_rows,
            title=f"\n== {head['short']} / {r['short']} (the same run, the same workload)",
        )


# ------------------------------------------------------------------ main
async def bench(args: argparse.Namespace) -> dict[str, Any]:
    sides = [Side(sha[:7], worktree(sha), f"navi_bench_embed_{sha[:7]}") for sha in args.ab]
    sides.append(Side(head_label(), REPO, "navi_bench_embed"))
    # the column names: this checkout's commit now (others may commit during the run)
    shorts = [*(s.label for s in sides[:-1]), git("rev-parse", "--short=7", "HEAD")]
    for side in sides:
        step(f"[{side.label}] `python -m app.cli` from {side.cwd} imports {app_package(side.cwd)}")
    args.embedder, args.no_jobs = "fake", False  # bench_wrk.service_settings's
    dim = dataclasses.replace(get_settings(), embedding_provider="ollama").vector_dim
    fake, fake_url = fake_ollama_process(dim, wordpiece=True)
    base = wrk_settings(fake_url, args)
    configure_logging(base.log_level, base.log_json)
    convs = conversations(args)
    rows = []
    try:
        for side, short in zip(sides, shorts, strict=True):
            row = await measure(side, base, fake_url, convs, args)
            rows.append({**row, "short": short})
    finally:
        fake.kill()
        fake.wait()
    report(rows, args, base.index_quiet_seconds)
    return {
        "sessions": args.sessions,
        "turns": args.turns,
        "pace": args.pace,
        "seed": args.seed,
        "workers": args.workers,
        "index_quiet_seconds": base.index_quiet_seconds,
        "commits": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=16, help="one user each (1–256)")
    parser.add_argument("--turns", type=int, default=15, help="per session: 2 messages each")
    parser.add_argument(
        "--pace", type=float, default=1.0, help="seconds between a session's appends"
    )
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("WEB_CONCURRENCY") or min(os.cpu_count() or 1, 64)),
        help="web worker processes (default as `make run`: WEB_CONCURRENCY, else one per core)",
    )
    parser.add_argument(
        "--max-wait", type=float, default=120.0, help="seconds after the last append"
    )
    parser.add_argument(
        "--ab",
        action="append",
        default=[],
        metavar="COMMIT",
        help="measure COMMIT too (repeatable, or a comma list; default be065d7), each from a "
        "worktree /tmp/navi-ab-<sha> on a database of its own, before this checkout",
    )
    parser.add_argument("--json", type=Path, help="also write the figures there")
    args = parser.parse_args()
    if not 1 <= args.sessions <= 256 or not 1 <= args.turns <= 500:
        parser.error("--sessions: 1–256; --turns: 1–500")
    if not 0 < args.pace <= 60 or not 1 <= args.workers <= 16:
        parser.error("--pace: (0, 60]; --workers: 1–16")
    refs = [c.strip() for a in args.ab or ["be065d7"] for c in a.split(",") if c.strip()]
    args.ab = list(dict.fromkeys(resolve_commit(c) for c in refs))
    data = asyncio.run(bench(args))
    write_results("embed_cost.json", data)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1, default=str))
    failed = any(r["appended"]["errors"] for r in data["commits"])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
