"""Evidence recall of `memory_search` on LoCoMo, ingested through the HTTP API (issue 6).

    make bench-locomo                                  # embedded PostgreSQL, local MiniLM
    make bench-locomo ARGS="--sittings"                # one session per sitting, idle indexer
    .venv/bin/python bench/bench_locomo.py --conversations 2 --embedder fake
    .venv/bin/python bench/bench_locomo.py --reuse     # query the last ingest again
    .venv/bin/python bench/bench_locomo.py --reuse --ab before   # A/B (bench/_variants.py)

Data: the LoCoMo dev split (shared/bench/locomo/locomo_dev.json) — conversations 0–4 of
LoCoMo, "Evaluating Very Long-Term Conversational Memory of LLM Agents" (ACL 2024),
snap-research/LoCoMo, data/locomo10.json, CC BY-NC 4.0. Used for benchmarking only; keep
this attribution wherever the figures appear.

What it does by default (compressed ingest), per conversation, the way an agent runtime
would:

* one Navi user and one Navi session per conversation (its sessions are sittings of one
  long conversation); `speaker_a` is the user, `speaker_b` the assistant; every turn is
  its own message whose content is the turn's line verbatim (`"{speaker}: {text}"`, plus
  the photo caption), timestamped from the session's date;
* per user turn: `POST /sessions/{id}/prepare` with the incoming message (pre-turn
  compression; a 422 `context_too_large` is answered with `/compact` and a retry), then
  `POST /sessions/{id}/messages` with the user turn, the assistant's turns that follow,
  and `usage` (the prompt size prepare reported: the post-turn check);
* the profile has a small window (`--window`, 4,096 tokens), so compression runs again
  and again; the summarizer is the fake Ollama server's default reply;
* at the end the conversation "moves on" — six neutral closing exchanges — and a forced
  `POST /sessions/{id}/compact`, so every LoCoMo turn lives in raw chunks (a compaction
  keeps the last 12 messages verbatim);
* every question (categories 1–4) is asked with `POST /memory/search` (scope `raw`,
  `k` 5 — the tool's default) with the best window on and off; the response `text` is
  cut at 1,500 and 4,000 chars and scored with `locomo_data.evidence_recall`.

`--sittings` models a chat app instead: each LoCoMo sitting (`session_no`) is a new
conversation of the same user, so

* one Navi user per conversation and one Navi session per sitting, with a 32,768-token
  window (unless `--window` is given), messages sent exactly as above (prepare, then the
  round with `usage`; the 422 fallback is kept and counted) — no closing exchanges and no
  forced `/compact`, so compression should never run (the report counts it);
* there is no index step: the app's background jobs run during the ingest, the live
  indexer among them (`live_index.py`, woken by every append), and the bench only waits
  until it has covered every message and embedded every chunk (the wait after the last
  append is reported). `--idle-index` instead runs without background jobs and then the
  idle-session indexer (`idle_index.index_idle_sessions`, in-process, idle for 0
  minutes, no batch bound) once, as before; its time is reported, also per 1,000
  messages;
* the questions are asked as above. The ingest is cached apart (its own state file and
  database), so `--reuse` of one mode never picks up the other.

Embeddings: `--embedder local` (default) runs all-MiniLM-L6-v2 int8 in-process
(`EMBEDDING_PROVIDER=local`); `fake` uses the fake server's hashed word features. The
BM25 reference (single turns, no compression) is computed in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from _embedder import select_embedder  # noqa: E402

select_embedder(sys.argv[1:])  # before any app import

import psycopg  # noqa: E402
from _agent import agent_api, compressions, ok, prepare  # noqa: E402
from _app import IndexPassResult, index_idle_sessions  # noqa: E402
from _common import CACHE, Clock, fresh_database, print_table, provision, write_results  # noqa: E402
from _variants import applied, describe, parse  # noqa: E402
from locomo_data import (  # noqa: E402
    BUDGETS,
    Conversation,
    Message,
    _norm,
    bm25_recall,
    dated_recall,
    evidence_days,
    evidence_recall,
    load,
    messages_of,
    sitting_time,
)

DB_NAME = "navi_bench_locomo"
STATE_FILE = CACHE / "locomo-ingest.json"
SITTINGS_STATE_FILE = CACHE / "locomo-sittings-ingest.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
CLOSING = [
    ("user", "Thanks, that's all for today."),
    ("assistant", "You're welcome. Talk soon!"),
]
CLOSING_ROUNDS = 6
WINDOW = 4096  # the compressed ingest's profile window …
SITTINGS_WINDOW = 32768  # … and a chat app's, one session per sitting (--sittings)


# ------------------------------------------------------------------ replay
def _runs(msgs: list[Message], starts: Callable[[Message, Message], bool]) -> list[list[Message]]:
    """`msgs` cut where starts(previous, message) says a new run begins."""
    out: list[list[Message]] = []
    for m in msgs:
        if out and not starts(out[-1][-1], m):
            out[-1].append(m)
        else:
            out.append([m])
    return out


def rounds(msgs: list[Message]) -> list[list[Message]]:
    """Runs of user turns followed by the assistant turns that answer them."""
    return _runs(msgs, lambda last, m: m.role == "user" and last.role == "assistant")


def sittings(msgs: list[Message]) -> list[list[Message]]:
    """The messages of each sitting (LoCoMo's `session_no`), in order."""
    return _runs(msgs, lambda last, m: last.session_no != m.session_no)


@dataclasses.dataclass
class IngestStats:
    messages: int = 0
    sessions: int = 0
    prepares: int = 0
    compressions: int = 0
    forced: int = 0
    seconds: float = 0.0


def _payload(m: Message) -> dict[str, Any]:
    return {"role": m.role, "content": m.content, "created_at": m.created_at.isoformat() + "Z"}


async def new_session(client: Any, headers: dict[str, str], name: str, st: IngestStats) -> str:
    r = await client.post(
        "/sessions", json={"profile_id": "bench-locomo", "name": name}, headers=headers
    )
    st.sessions += 1
    return str((ok(r, "create session", 201))["id"])


async def send(
    client: Any, headers: dict[str, str], sid: str, msgs: list[Message], st: IngestStats
) -> None:
    """The messages as an agent runtime sends them: per user turn, prepare (a 422
    `context_too_large` is answered with `/compact` and a retry, counted in `forced`),
    then the round with `usage`."""
    for group in rounds(msgs):
        usage = None
        if group[0].role == "user":
            users = [m for m in group if m.role == "user"]
            message = {"message": {"role": "user", "content": users[-1].content}}
            r, forced = await prepare(client, sid, message, headers)
            body = ok(r, "prepare")
            st.forced += forced
            st.prepares += 1
            st.compressions += compressions(body)
            if group[-1].role == "assistant":
                usage = {"model": "fake-chat:latest", "prompt_eval_count": int(body["tokens"])}
        payload: dict[str, Any] = {"messages": [_payload(m) for m in group]}
        if usage:
            payload["usage"] = usage
        r = await client.post(f"/sessions/{sid}/messages", json=payload, headers=headers)
        body = ok(r, "append", 201)
        st.compressions += compressions(body)
        st.messages += len(group)


async def replay(client: Any, headers: dict[str, str], conv: Conversation, st: IngestStats) -> str:
    """The compressed ingest: the whole conversation in one session, closing exchanges,
    then a forced `/compact`; returns the session id."""
    sid = await new_session(client, headers, conv.sample_id, st)
    msgs = messages_of(conv)
    last = msgs[-1].created_at
    for i in range(CLOSING_ROUNDS):
        for role, text in CLOSING:
            at = last + timedelta(days=1, minutes=2 * i + (role == "assistant"))
            msgs.append(Message(role, text, at, -1))
    await send(client, headers, sid, msgs, st)
    r = await client.post(f"/sessions/{sid}/compact", json={}, headers=headers)
    ok(r, "compact")
    st.compressions += 1
    return sid


async def replay_sittings(
    client: Any, headers: dict[str, str], conv: Conversation, st: IngestStats
) -> list[str]:
    """The chat-app ingest: one session per sitting, nothing forced; the session ids."""
    sids = []
    for sitting in sittings(messages_of(conv)):
        name = f"{conv.sample_id} sitting {sitting[0].session_no}"
        sid = await new_session(client, headers, name, st)
        await send(client, headers, sid, sitting, st)
        sids.append(sid)
    return sids


async def run_indexer(app: Any, settings: Any) -> dict[str, Any]:
    """The idle-session indexer, once, in-process, over every session (idle for 0 min)."""

    def progress(r: IndexPassResult) -> None:
        if r.batches % 20 == 0:
            print(f"· indexer: {r.messages:,} messages, {r.chunks:,} chunks", file=sys.stderr)

    runtime = app.state.runtime
    result = await index_idle_sessions(
        runtime.session_factory,
        runtime.llm,
        settings,
        older_than_minutes=0,
        max_batches=None,
        progress=progress,
    )
    print(f"· indexer: {result.summary()}", file=sys.stderr, flush=True)
    return dataclasses.asdict(result)


def indexer_of(args: argparse.Namespace) -> str:
    """How a --sittings ingest gets indexed: the live indexer while it runs, or the
    idle-session indexer after it (--idle-index); "compression" without --sittings."""
    if not args.sittings:
        return "compression"
    return "idle" if args.idle_index else "live"


async def live_catch_up(conninfo: str, limit_seconds: float = 900) -> dict[str, Any]:
    """No index step: how long after the last append the live indexer (the app's own
    background job) still needed until every message was covered and every chunk had its
    vectors."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_seconds:
        with psycopg.connect(conninfo) as c:
            pending, stale = c.execute(
                "SELECT (SELECT count(*) FROM sessions s LEFT JOIN raw_index_state r"
                " ON r.session_id = s.id AND r.user_id = s.user_id WHERE s.next_seq > 0"
                " AND NOT coalesce(r.covered @> int8range(0, s.next_seq), false)),"
                " (SELECT count(*) FROM memory_chunks WHERE vectors_stale)"
            ).fetchone() or (0, 0)
        if not pending and not stale:
            break
        await asyncio.sleep(0.2)
    waited = time.perf_counter() - t0
    print(f"· live indexer caught up {waited:.1f} s after the last append", file=sys.stderr)
    return {"catch_up_seconds": round(waited, 1), "pending": pending, "stale": stale}


# ------------------------------------------------------------------ scoring
@dataclasses.dataclass
class Score:
    totals: dict[int, float] = dataclasses.field(
        default_factory=lambda: dict.fromkeys(BUDGETS, 0.0)
    )
    by_cat: dict[int, dict[int, float]] = dataclasses.field(
        default_factory=lambda: defaultdict(lambda: dict.fromkeys(BUDGETS, 0.0))
    )
    n: int = 0
    n_cat: dict[int, int] = dataclasses.field(default_factory=lambda: defaultdict(int))
    latencies: list[float] = dataclasses.field(default_factory=list)
    chars: list[int] = dataclasses.field(default_factory=list)
    # `dated_recall` (the evidence line shown with its own day), per category
    dated: dict[int, dict[int, float]] = dataclasses.field(
        default_factory=lambda: defaultdict(lambda: dict.fromkeys(BUDGETS, 0.0))
    )

    def add(
        self,
        shown: str,
        evidence: tuple[str, ...],
        category: int,
        days: dict[str, str] | None = None,
    ) -> None:
        self.n += 1
        self.n_cat[category] += 1
        self.chars.append(len(shown))
        for b in BUDGETS:
            v = evidence_recall(shown, evidence, b)
            self.totals[b] += v
            self.by_cat[category][b] += v
            if days is not None:
                self.dated[category][b] += dated_recall(shown, evidence, days, b)

    def dated_mean(self, b: int, category: int | None = None) -> float:
        if category is None:
            return sum(d[b] for d in self.dated.values()) / max(self.n, 1)
        return self.dated[category][b] / max(self.n_cat[category], 1)

    def p95(self) -> float:
        """The search latency at the 95th percentile (the nearest sample below), ms."""
        lat = sorted(self.latencies)
        return lat[int(0.95 * (len(lat) - 1))] if lat else float("nan")

    def mean(self, b: int, category: int | None = None) -> float:
        if category is None:
            return self.totals[b] / max(self.n, 1)
        return self.by_cat[category][b] / max(self.n_cat[category], 1)


async def ask_all(
    client: Any,
    users: list[dict[str, Any]],
    convs: list[Conversation],
    k: int,
    scope: str,
    dump: list[dict[str, Any]] | None,
    windows: tuple[bool, ...] = (True, False),
) -> dict[bool, Score]:
    scores = {w: Score() for w in windows}
    for conv, user in zip(convs, users, strict=True):
        headers = {"Authorization": f"Bearer {user['token']}"}
        # the question's time: the conversation's last sitting (LoCoMo's relative times
        # are the sittings', not today's)
        as_of = max(sitting_time(t.date) for t in conv.turns)
        days = evidence_days(conv)
        for q in conv.questions:
            for window in windows:
                with Clock() as c:
                    r = await client.post(
                        "/memory/search",
                        json={
                            "query": q.question,
                            "scope": scope,
                            "k": k,
                            "best_window": window,
                            "as_of": as_of.isoformat() + "Z",
                        },
                        headers=headers,
                    )
                body = ok(r, "memory_search")
                scores[window].latencies.append(c.ms)
                scores[window].add(body["text"], q.evidence_lines, q.category, days)
                if dump is not None and window:
                    dump.append(
                        {
                            "conv": conv.sample_id,
                            "question": q.question,
                            "category": q.category,
                            "evidence": list(q.evidence_lines),
                            "text": body["text"],
                            # per evidence line: the hit whose whole chunk holds it, or None
                            "in_hit": [
                                next(
                                    (
                                        n
                                        for n, h in enumerate(body["hits"])
                                        if _norm(line) in _norm(h["text"])
                                    ),
                                    None,
                                )
                                for line in q.evidence_lines
                            ],
                            "recall": {
                                b: evidence_recall(body["text"], q.evidence_lines, b)
                                for b in BUDGETS
                            },
                        }
                    )
    return scores


# ------------------------------------------------------------------ run
def cached_ingest(
    reuse: bool, state_file: Path, params: dict[str, Any], db_name: str, suffix: str
) -> tuple[dict[str, Any], Any]:
    """The last ingest's state and its database when `reuse` and it was made with these
    `params`; else no state and a fresh database."""
    state: dict[str, Any] = {}
    if reuse and state_file.exists():
        state = json.loads(state_file.read_text())
        if state.get("params") != params:
            print("· the cached ingest has other parameters: ingesting again", file=sys.stderr)
            state = {}
    target = provision(db_name, suffix=suffix) if state else fresh_database(db_name, suffix)
    return state, target


async def run(args: argparse.Namespace) -> None:
    convs = load()[: args.conversations]
    suffix = f"_{args.embedder}" + ("_sittings" if args.sittings else "")
    state_file = SITTINGS_STATE_FILE if args.sittings else STATE_FILE
    params = {
        "conversations": args.conversations,
        "window": args.window,
        "embedder": args.embedder,
        "sittings": args.sittings,
        "indexer": indexer_of(args),
        "index_version": INDEX_VERSION,
    }
    state, target = cached_ingest(args.reuse, state_file, params, DB_NAME, suffix)
    profiles = {"bench-locomo": {"context_window": args.window}}
    stats = IngestStats()
    live = indexer_of(args) == "live"
    async with agent_api(target, profiles, args.embedder, live_index=live) as api:
        client = api.client
        if not state:
            users = []
            started = time.perf_counter()
            for conv in convs:
                r = await client.post("/admin/users", json={"name": f"locomo-{conv.sample_id}"})
                uid = (ok(r, "user", 201))["id"]
                r = await client.post(f"/admin/users/{uid}/tokens", json={"name": "bench"})
                token = (ok(r, "token", 201))["token"]
                t0 = time.perf_counter()
                auth = {"Authorization": f"Bearer {token}"}
                if args.sittings:
                    sids = await replay_sittings(client, auth, conv, stats)
                    users.append({"id": uid, "token": token, "sessions": sids})
                else:
                    sid = await replay(client, auth, conv, stats)
                    users.append({"id": uid, "token": token, "session": sid})
                print(
                    f"· {conv.sample_id}: {len(conv.turns)} turns ingested in "
                    f"{time.perf_counter() - t0:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
            stats.seconds = time.perf_counter() - started
            state = {"params": params, "users": users, "ingest": dataclasses.asdict(stats)}
            if args.sittings:  # what compression indexed, then the idle indexer
                state["before_index"] = chunk_stats(target.conninfo)
                if live:  # no index step: the app's live indexer ran during the ingest
                    state["index"] = await live_catch_up(target.conninfo)
                else:
                    state["index"] = await run_indexer(api.app, api.settings)
            state_file.write_text(json.dumps(state, indent=1))
        else:
            stats = IngestStats(**state["ingest"])
        chunks = chunk_stats(target.conninfo)
        dump: list[dict[str, Any]] | None = [] if args.dump else None
        del client.headers["Authorization"]
        t0 = time.perf_counter()
        scores = await ask_all(client, state["users"], convs, args.k, args.scope, dump)
        ask_seconds = time.perf_counter() - t0
        variants: dict[str, Score] = {}
        for name in parse(args.ab):  # the same questions, the search with other settings
            with applied(name):
                asked = await ask_all(
                    client, state["users"], convs, args.k, args.scope, None, (True,)
                )
                variants[name] = asked[True]
    if dump is not None:
        write_results(f"locomo-{'sittings-' if args.sittings else ''}answers.json", dump, "answers")
    report(convs, scores, stats, chunks, args, ask_seconds, state)
    if variants:
        report_variants(scores[True], variants)


def chunk_stats(conninfo: str) -> dict[str, float]:
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT count(*), coalesce(avg(length(content)), 0), count(*) FILTER (WHERE EXISTS"
            " (SELECT FROM memory_chunk_vectors v WHERE v.chunk_id = memory_chunks.id))"
            " FROM memory_chunks"
        ).fetchone()
    assert row is not None
    return {"chunks": int(row[0]), "avg_chars": float(row[1]), "embedded": int(row[2])}


def report(
    convs: list[Conversation],
    scores: dict[bool, Score],
    stats: IngestStats,
    chunks: dict[str, float],
    args: argparse.Namespace,
    ask_seconds: float,
    state: dict[str, Any],
) -> None:
    bm25 = bm25_recall(convs)
    n_q = sum(len(c.questions) for c in convs)
    n_t = sum(len(c.turns) for c in convs)
    print(
        f"\nLoCoMo dev: {len(convs)} conversations, {n_t:,} turns, {n_q} questions "
        f"(categories 1-4); {'one session per sitting' if args.sittings else 'one session'};"
        f" window {args.window:,} tokens; embedder {args.embedder}; k={args.k}, scope={args.scope}"
    )
    print(
        f"ingest: {stats.seconds:.1f} s ({stats.messages:,} messages in {stats.sessions} "
        f"sessions, {stats.prepares:,} prepares, {stats.compressions} compressions, "
        f"{stats.forced} forced by 422) → {chunks['chunks']:.0f} raw chunks, "
        f"{chunks['avg_chars']:,.0f} chars on average, {chunks['embedded']:.0f} with a vector"
    )
    index = state.get("index")
    if index is not None and "catch_up_seconds" in index:
        print(
            f"live indexer (no index step): {state['before_index']['chunks']:.0f} raw chunks "
            f"when the last append returned; caught up {index['catch_up_seconds']} s later "
            f"(left: {index['pending']} sessions uncovered, {index['stale']} chunks stale)"
        )
    elif index is not None:
        per_k = 1000 * index["seconds"] / index["messages"] if index["messages"] else float("nan")
        print(
            f"idle indexer: {index['messages']:,} messages of {index['sessions']} sessions → "
            f"{index['chunks']:,} chunks in {index['batches']} batches, {index['seconds']:.1f} s "
            f"({per_k:.2f} s per 1,000 messages); {index['failed']} failed, "
            f"{index['without_vectors']} without vectors; raw chunks before it: "
            f"{state['before_index']['chunks']:.0f}"
        )
    rows: list[list[object]] = [
        ["BM25 over single turns (reference)", f"{bm25[1500]:.3f}", f"{bm25[4000]:.3f}", "-"],
    ]
    for window in (True, False):
        s = scores[window]
        p95 = s.p95()
        label = f"memory_search, best window {'ON' if window else 'OFF'}"
        rows.append([label, f"{s.mean(1500):.3f}", f"{s.mean(4000):.3f}", f"{p95:.0f}"])
    print_table(["retriever", "recall@1500", "recall@4000", "p95 ms"], rows)
    print()
    cat_rows = []
    for cat, name in CATEGORIES.items():
        n = scores[True].n_cat.get(cat, 0)
        if not n:
            continue
        on, off = scores[True], scores[False]
        cat_rows.append(
            [
                f"{cat} {name}",
                n,
                f"{on.mean(1500, cat):.3f}",
                f"{on.mean(4000, cat):.3f}",
                f"{off.mean(1500, cat):.3f}",
                f"{off.mean(4000, cat):.3f}",
            ]
        )
    print_table(
        ["category", "questions", "ON @1500", "ON @4000", "OFF @1500", "OFF @4000"], cat_rows
    )
    chars = sorted(scores[True].chars)
    print(
        f"\nresponse text: median {chars[len(chars) // 2]:,} chars; "
        f"{2 * n_q} searches in {ask_seconds:.1f} s (query embedding included)"
    )
    print("LoCoMo (snap-research/LoCoMo, ACL 2024) dev split, CC BY-NC 4.0 — benchmark use only.")
    write_results(
        f"locomo-{'sittings-' if args.sittings else ''}results.json",
        {
            "params": vars(args),
            "bm25": bm25,
            "on": {b: scores[True].mean(b) for b in BUDGETS},
            "off": {b: scores[False].mean(b) for b in BUDGETS},
            "categories": {
                cat: {b: scores[True].mean(b, cat) for b in BUDGETS} for cat in CATEGORIES
            },
            "ingest": dataclasses.asdict(stats),
            "chunks": chunks,
            "index": index,
        },
    )


def report_variants(base: Score, variants: dict[str, Score]) -> None:
    """The `--ab` variants beside the shipped search (best window on), per category."""
    cats = [c for c in CATEGORIES if base.n_cat.get(c)]
    head = ["search", "@1500", "@4000", *(f"{c} @4000" for c in cats)]
    head += ["dated @1500", "@4000", "2 dated @1500", "@4000", "p95 ms"]
    rows = []
    for name, s in {"shipped": base, **variants}.items():
        p95 = s.p95()
        label = name if name == "shipped" else f"{name} ({describe(name)})"
        rows.append(
            [
                label,
                f"{s.mean(1500):.3f}",
                f"{s.mean(4000):.3f}",
                *(f"{s.mean(4000, c):.3f}" for c in cats),
                *(f"{s.dated_mean(b):.3f}" for b in BUDGETS),
                *(f"{s.dated_mean(b, 2):.3f}" for b in BUDGETS),
                f"{p95:.0f}",
            ]
        )
    print()
    print_table(
        head,
        rows,
        title="A/B over the same ingest (" + ", ".join(f"{c} {CATEGORIES[c]}" for c in cats) + ")",
    )


INDEX_VERSION = 3  # bump when indexing (chunking, embedding) changes: --reuse ingests again


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=5, help="how many (1-5)")
    parser.add_argument(
        "--window",
        type=int,
        default=None,
        help=f"profile context window (default {WINDOW:,}; {SITTINGS_WINDOW:,} with --sittings)",
    )
    parser.add_argument(
        "--sittings",
        action="store_true",
        help=(
            "one session per LoCoMo sitting, no forced compaction, indexed by the live "
            "indexer while the ingest runs (no index step)"
        ),
    )
    parser.add_argument(
        "--idle-index",
        action="store_true",
        help="with --sittings: no live indexer; the idle-session indexer runs after the ingest",
    )
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
    parser.add_argument("--k", type=int, default=5, help="memory_search k")
    parser.add_argument("--scope", default="raw", choices=("raw", "all"))
    parser.add_argument("--reuse", action="store_true", help="reuse the last ingest")
    parser.add_argument("--dump", action="store_true", help="write every answer to .cache")
    parser.add_argument(
        "--ab", default="", help="variants (bench/_variants.py) asked again in the same run"
    )
    args = parser.parse_args(argv)
    parse(args.ab)
    if args.window is None:
        args.window = SITTINGS_WINDOW if args.sittings else WINDOW
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
