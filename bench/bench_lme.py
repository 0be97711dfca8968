"""Session and turn recall of `memory_search` on LongMemEval-S, ingested as a chat app (issue 31).

    make bench-lme                                        # embedded PostgreSQL, local MiniLM
    make bench-lme ARGS="--questions 5 --embedder fake"
    .venv/bin/python bench/bench_lme.py --questions 20 --reuse   # ask again over the last ingest
    .venv/bin/python bench/bench_lme.py --questions 18 --reuse --ab before   # A/B, one run
    .venv/bin/python bench/bench_lme.py --types single-session-assistant --dump
    make bench-lme ARGS="--questions 4 --idle-index"      # index throughput vs the model alone

Data: the LongMemEval-S dev split (shared/bench/longmemeval/lme-s-dev.json.gz) — 100
questions of LongMemEval-S (Wu et al., ICLR 2025; MIT licence, Copyright (c) 2024 Di Wu).
Abstention questions (`_abs`) are left out, as in the paper: 94 are scored, and
`--questions N` takes N of them round-robin over the question types (`lme_data.pick`).

The ingest is `bench_locomo.py --sittings`' (its `send`, its live-indexer wait), per
question:

* one Navi user, and one Navi session per haystack session (named after its dataset id),
  created in date order; every turn is its own message, verbatim, timestamped from the
  session's `haystack_dates` entry, a minute per turn;
* messages as a chat app sends them: per user turn `POST /sessions/{id}/prepare`, then
  `POST /sessions/{id}/messages` with the round and `usage` (a 422 is answered with
  `/compact` and counted); the profile's window is large (`--window`, 131,072 tokens), so
  nothing should compress — the report counts compressions;
* no index step: the app runs with its background jobs, the live indexer among them, and
  after the last append the bench waits until every message is covered and no chunk is
  `vectors_stale` (`bench_locomo.live_catch_up`), and reports that wait.

Then the question is asked as that user with `POST /memory/search` (scope raw, `--k`,
default 10) and scored (`lme_data`): session level, `recall_any@k` / `recall_all@k` for
k = 5 and 10 over the first k distinct sessions in the hits' order; turn level, the
`has_answer` turns found whole in the response text cut at 1,500 / 4,000 chars (and in
any hit's whole chunk: "in hits"). BM25 over whole sessions and over single turns is
computed in the same run (`lme_data.bm25_tallies`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import psycopg
from _embedder import select_embedder

select_embedder(sys.argv[1:])  # before any app import

from _agent import agent_api, ok  # noqa: E402
from _common import CACHE, Clock, Stats, print_table, write_results  # noqa: E402
from _variants import applied, describe, parse  # noqa: E402
from bench_load import cpu_delta, cpu_ms, postgres_processes, tree  # noqa: E402
from bench_locomo import (  # noqa: E402
    INDEX_VERSION,
    IngestStats,
    cached_ingest,
    chunk_stats,
    live_catch_up,
    run_indexer,
    send,
)
from lme_data import (  # noqa: E402
    KS,
    Question,
    Tally,
    bm25_tallies,
    distinct,
    in_date_order,
    load,
    messages_of,
    pick,
    scores,
)
from locomo_data import BUDGETS, _norm  # noqa: E402

DB_NAME = "navi_bench_lme"
STATE_FILE = CACHE / "lme-ingest.json"
IDLE_STATE_FILE = CACHE / "lme-idle-ingest.json"  # --idle-index: cached apart
PROFILE = "bench-lme"
WINDOW = 131072  # a chat app's large window: no session of the split comes near it
METRICS = [*(f"{m}@{k}" for k in KS for m in ("any", "all")), *(f"turns@{b}" for b in BUDGETS)]


# ------------------------------------------------------------------ ingest
async def ingest(client: Any, q: Question, st: IngestStats) -> dict[str, Any]:
    """One user for the question, one session per haystack session (in date order);
    the user's token and {navi session id: haystack session id}."""
    r = await client.post("/admin/users", json={"name": f"lme-{q.question_id}"})
    uid = ok(r, "user", 201)["id"]
    r = await client.post(f"/admin/users/{uid}/tokens", json={"name": "bench"})
    token = ok(r, "token", 201)["token"]
    auth = {"Authorization": f"Bearer {token}"}
    sessions: dict[str, str] = {}
    for no, hay in enumerate(in_date_order(q)):
        body = {"profile_id": PROFILE, "name": hay.session_id}
        sid = str(ok(await client.post("/sessions", json=body, headers=auth), "session", 201)["id"])
        st.sessions += 1
        await send(client, auth, sid, messages_of(hay, no), st)
        sessions[sid] = hay.session_id
    return {"id": uid, "token": token, "sessions": sessions}


# ------------------------------------------------------------------ index throughput
@dataclasses.dataclass
class CpuClock:
    seconds: float = 0.0


@contextlib.contextmanager
def cpu_clock(conninfo: str) -> Iterator[CpuClock]:
    """The block's CPU seconds: this process (the app, its embedder) and the bench's
    PostgreSQL (`bench_load.postgres_processes`: its postmaster's tree, listed again at
    the end so a backend opened meanwhile counts; not the machine's other servers)."""
    how, fixed = postgres_processes(conninfo)
    pg_pid = fixed[0].pid if how.startswith("postmaster") else None

    def snapshot() -> dict[int, float]:
        pg = tree(pg_pid) if pg_pid else fixed
        return {**cpu_ms([psutil.Process()]), **cpu_ms(pg, reaped=pg_pid is not None)}

    clock = CpuClock()
    before = snapshot()
    try:
        yield clock
    finally:
        clock.seconds = round(cpu_delta(before, snapshot()) / 1000, 1)


def embedder_floor(conninfo: str, batch: int = 32) -> dict[str, Any]:
    """The model alone on the texts the indexer embedded: every stored chunk's segments
    (`indexer.segment_texts`), in calls of `batch` (the gateway's `EMBEDDING_BATCH_SIZE`),
    timed on the wall clock and in CPU."""
    from app.domain.raw_history.indexer import segment_texts
    from app.llm.local_embedder import LocalEmbedder

    with psycopg.connect(conninfo) as c:
        contents = [r[0] for r in c.execute("SELECT content FROM memory_chunks ORDER BY id")]
    texts, _ = segment_texts(contents)
    model = LocalEmbedder()
    model.load()
    with cpu_clock(conninfo) as cpu:
        t0 = time.perf_counter()
        for i in range(0, len(texts), batch):
            model.encode(texts[i : i + batch])
        seconds = time.perf_counter() - t0
    return {
        "segments": len(texts),
        "chars": sum(map(len, texts)),
        "seconds": round(seconds, 1),
        "cpu_seconds": cpu.seconds,
    }


# ------------------------------------------------------------------ ask
@dataclasses.dataclass
class Asked:
    tally: Tally = dataclasses.field(default_factory=Tally.new)
    latencies: list[float] = dataclasses.field(default_factory=list)
    chars: list[int] = dataclasses.field(default_factory=list)
    answers: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def search_body(q: Question, k: int) -> dict[str, Any]:
    """The search as the question's user, at the question's date (`as_of`: its relative
    times — "two weeks ago" — are read from it)."""
    body: dict[str, Any] = {"query": q.question, "scope": "raw", "k": k}
    if q.question_date is not None:
        body["as_of"] = q.question_date.isoformat() + "Z"
    return body


async def ask(
    client: Any, questions: list[Question], users: dict[str, Any], k: int, dump: bool
) -> Asked:
    out = Asked()
    for q in questions:
        user = users[q.question_id]
        headers = {"Authorization": f"Bearer {user['token']}"}
        with Clock() as c:
            r = await client.post(
                "/memory/search",
                json=search_body(q, k),
                headers=headers,
            )
        body = ok(r, "memory_search")
        out.latencies.append(c.ms)
        out.chars.append(len(body["text"]))
        ranked = [
            user["sessions"][h["session_id"]]
            for h in body["hits"]
            if h.get("session_id") in user["sessions"]
        ]
        values = scores(ranked, q.answer_sessions, body["text"], q.evidence)
        hits = [_norm(h["text"]) for h in body["hits"]]
        if q.evidence:  # the has_answer turns whole in any hit's chunk
            found = sum(any(_norm(e) in h for h in hits) for e in q.evidence)
            values["in hits"] = found / len(q.evidence)
        values["sessions"] = len(distinct(ranked))
        out.tally.add(q.question_type, values)
        if dump:
            out.answers.append(
                {
                    "question_id": q.question_id,
                    "type": q.question_type,
                    "question": q.question,
                    "answer_sessions": sorted(q.answer_sessions),
                    "ranked_sessions": distinct(ranked),
                    "evidence": list(q.evidence),
                    "text": body["text"],
                    "scores": values,
                }
            )
    return out


# ------------------------------------------------------------------ run
async def run(args: argparse.Namespace) -> None:
    kinds = {t.strip() for t in args.types.split(",") if t.strip()}
    questions = pick([q for q in load() if not kinds or q.question_type in kinds], args.questions)
    if not questions:
        raise SystemExit(f"--types {args.types}: no question of that type")
    suffix = f"_{args.embedder}" + ("_idle" if args.idle_index else "")
    state_file = IDLE_STATE_FILE if args.idle_index else STATE_FILE
    params = {
        "questions": [q.question_id for q in questions],
        "window": args.window,
        "embedder": args.embedder,
        "index_version": INDEX_VERSION,
        "indexer": "idle" if args.idle_index else "live",
    }
    state, target = cached_ingest(args.reuse, state_file, params, DB_NAME, suffix)
    profiles = {PROFILE: {"context_window": args.window}}
    live = not args.idle_index
    async with agent_api(target, profiles, args.embedder, live_index=live) as api:
        client = api.client
        if not state:
            stats = IngestStats()
            users: dict[str, Any] = {}
            started = time.perf_counter()
            for n, q in enumerate(questions, 1):
                t0 = time.perf_counter()
                users[q.question_id] = await ingest(client, q, stats)
                print(
                    f"· {n}/{len(questions)} {q.question_id}: {q.messages} messages in "
                    f"{len(q.sessions)} sessions, {time.perf_counter() - t0:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
            stats.seconds = time.perf_counter() - started
            state = {"params": params, "users": users, "ingest": dataclasses.asdict(stats)}
            state["before_index"] = chunk_stats(target.conninfo)
            if live:  # no index step: the app's live indexer ran during the ingest
                state["index"] = await live_catch_up(target.conninfo)
            else:  # the idle-session indexer after the ingest, beside the model alone
                with cpu_clock(target.conninfo) as cpu:
                    state["index"] = await run_indexer(api.app, api.settings)
                state["index"]["cpu_seconds"] = cpu.seconds
                if args.embedder == "local":
                    state["floor"] = await asyncio.to_thread(embedder_floor, target.conninfo)
            state_file.write_text(json.dumps(state, indent=1))
        elif live:  # a reused ingest left with stale chunks: every pass asks a complete index
            await live_catch_up(target.conninfo)
        chunks = chunk_stats(target.conninfo)
        del client.headers["Authorization"]
        t0 = time.perf_counter()
        asked = await ask(client, questions, state["users"], args.k, args.dump)
        ask_seconds = time.perf_counter() - t0
        variants: dict[str, Asked] = {}
        for name in parse(args.ab):  # the same questions, the search with other settings
            with applied(name):
                variants[name] = await ask(client, questions, state["users"], args.k, False)
    if args.dump:
        write_results("lme-answers.json", asked.answers, "answers")
    report(questions, asked, state, chunks, args, ask_seconds, variants)


def fmt(v: float) -> str:
    return "-" if v != v else f"{v:.3f}"  # NaN: the retriever shows no text


def report(
    questions: list[Question],
    asked: Asked,
    state: dict[str, Any],
    chunks: dict[str, float],
    args: argparse.Namespace,
    ask_seconds: float,
    variants: dict[str, Asked],
) -> None:
    st = IngestStats(**state["ingest"])
    index = state["index"]
    per_k = 1000 / max(st.messages, 1)
    types = sorted({q.question_type for q in questions})
    print(
        f"\nLongMemEval-S dev: {len(questions)} questions (abstention left out), "
        f"{st.messages:,} messages in {st.sessions:,} sessions; window {args.window:,} "
        f"tokens; embedder {args.embedder}; memory_search k={args.k}, scope raw"
    )
    print(
        f"ingest: {st.seconds:.1f} s ({st.seconds * per_k:.1f} s per 1,000 messages; "
        f"{st.prepares:,} prepares, {st.compressions} compressions, {st.forced} forced by 422)"
        f" → {chunks['chunks']:.0f} raw chunks, {chunks['avg_chars']:,.0f} chars on average, "
        f"{chunks['embedded']:.0f} with a vector"
    )
    if "catch_up_seconds" in index:
        print(
            f"live indexer (no index step): {state['before_index']['chunks']:.0f} raw chunks "
            f"when the last append returned; caught up {index['catch_up_seconds']} s later "
            f"({index['catch_up_seconds'] * per_k:.2f} s per 1,000 messages; left: "
            f"{index['pending']} sessions uncovered, {index['stale']} chunks stale)"
        )
    else:
        report_index(index, state.get("floor"))
    lat = Stats.of(asked.latencies)
    tallies = {
        f"memory_search k={args.k}": asked.tally,
        **{f"  A/B {n} ({describe(n)})": v.tally for n, v in variants.items()},
        **bm25_tallies(questions),
    }
    rows = [[name, *(fmt(t.mean(m)) for m in METRICS)] for name, t in tallies.items()]
    print()
    print_table(["retriever", *METRICS], rows)
    for name, t in tallies.items():
        print()
        type_rows = [[qt, t.counts[qt], *(fmt(t.mean(m, qt)) for m in METRICS)] for qt in types]
        print_table(["question type", "n", *METRICS], type_rows, title=name)
    chars = sorted(asked.chars)
    print(
        f"\nmemory_search: p50 {lat.p50:.0f} ms, p95 {lat.p95:.0f} ms ({len(questions)} "
        f"searches in {ask_seconds:.1f} s, query embedding included); response text median "
        f"{chars[len(chars) // 2]:,} chars; has_answer turns whole in any hit's chunk "
        f"{asked.tally.mean('in hits'):.3f}; distinct sessions in the hits "
        f"{asked.tally.mean('sessions'):.1f} on average"
    )
    for name, v in variants.items():
        vl = Stats.of(v.latencies)
        print(f"  A/B {name}: memory_search p50 {vl.p50:.0f} ms, p95 {vl.p95:.0f} ms")
    print("LongMemEval (Wu et al., ICLR 2025), MIT licence, Copyright (c) 2024 Di Wu.")
    write_results(
        "lme-idle-results.json" if args.idle_index else "lme-results.json",
        {
            "params": vars(args),
            "questions": [q.question_id for q in questions],
            "retrievers": {name: t.as_dict() for name, t in tallies.items()},
            "memory_search_ms": dataclasses.asdict(lat),
            "ingest": dataclasses.asdict(st),
            "ingest_s_per_1000": st.seconds * per_k,
            "index_s_per_1000": index.get("catch_up_seconds", index.get("seconds", 0)) * per_k,
            "chunks": chunks,
            "before_index": state["before_index"],
            "index": index,
            "floor": state.get("floor"),
        },
    )


def report_index(index: dict[str, Any], floor: dict[str, Any] | None) -> None:
    """The idle indexer's throughput beside the model alone on the same segments."""
    n = max(index["messages"], 1)
    seconds = max(index["seconds"], 1e-9)
    print(
        f"idle indexer: {index['messages']:,} messages → {index['chunks']:,} chunks in "
        f"{seconds:.1f} s = {n / seconds:.1f} messages/s "
        f"({1000 * seconds / n:.1f} s per 1,000), {index['cpu_seconds']:.0f} CPU-s = "
        f"{n / max(index['cpu_seconds'], 1e-9):.1f} messages per CPU-second "
        f"(app + PostgreSQL); {index['failed']} failed"
    )
    if floor is None:  # --embedder fake: no model to compare with
        return
    print(
        f"the model alone on the same {floor['segments']:,} segments ({floor['chars']:,} chars):"
        f" {floor['seconds']:.1f} s = {n / floor['seconds']:.1f} messages/s, "
        f"{n / max(floor['cpu_seconds'], 1e-9):.1f} per CPU-second → the indexer at "
        f"{seconds / floor['seconds']:.2f}× the embedder's floor (wall clock), "
        f"{index['cpu_seconds'] / max(floor['cpu_seconds'], 1e-9):.2f}× (CPU)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--questions", type=int, default=None, help="how many of the 94 scored (default all)"
    )
    parser.add_argument(
        "--types",
        default="",
        help="only these question types (comma-separated, e.g. single-session-assistant)",
    )
    parser.add_argument("--window", type=int, default=WINDOW, help="profile context window")
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
    parser.add_argument("--k", type=int, default=10, help="memory_search k")
    parser.add_argument("--reuse", action="store_true", help="reuse the last ingest")
    parser.add_argument(
        "--idle-index",
        action="store_true",
        help="no live indexer: the idle-session indexer after the ingest, and the model alone "
        "on the same segments (index throughput against the embedder's floor)",
    )
    parser.add_argument("--dump", action="store_true", help="write every answer to .cache")
    parser.add_argument(
        "--ab", default="", help="variants (bench/_variants.py) asked again in the same run"
    )
    args = parser.parse_args(argv)
    parse(args.ab)
    if args.questions is not None and args.questions < 1:
        parser.error("--questions: at least 1")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
