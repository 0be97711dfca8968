"""Context compression benchmark (issue 5, item 6).

    make bench-compression
    .venv/bin/python bench/bench_compression.py --runs 5 --turns 1000

1. **Plan** — `plan_compression` over a 2,000-message context (1,000 turns, a tool call in
   every fourth turn) with the calibrated estimator, fitted and unfitted.
2. **Compress** — `compress_and_save_session` end to end on PostgreSQL (`DATABASE_URL`, else
   the embedded server in bench/.cache/): load the 2,000 context rows, plan, summarize with
   a stub summarizer (no LLM: its time is excluded), demote, append summary + marker,
   reset the state, archive, run the hooks — one transaction, rolled back after each run
   so every run sees the same session. `--no-db` skips it.
3. **Hysteresis** — a simulated agent of `--turns` turns (random sizes, default 32k window)
   compressing at 90 %: compressions per 1,000 turns with the 0.65 target against a target
   just under the threshold (what compression did without hysteresis).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from collections.abc import Sequence

from _app import (
    MessageIn,
    Msg,
    Profile,
    SessionService,
    Settings,
    Summary,
    Viewer,
    calibration_for,
    compress_and_save_session,
    estimate_tokens,
    estimator_for,
    load_context,
    load_profiles,
    plan_compression,
    reset_registry,
)
from _common import Clock, Stats, fmt_ms, print_table, provision, timed_sync
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

SETTINGS = Settings(log_level="warning")
MODEL = "bench-model"
MESSAGES = 2000
WINDOW = 32768
USER = "bench"  # the session's owner


def conversation(n_messages: int, rng: random.Random) -> list[Msg]:
    out: list[Msg] = []
    turn = 0
    while len(out) < n_messages:
        out.append(Msg("user", f"question {turn}: " + "lorem ipsum " * rng.randint(3, 80)))
        if turn % 4 == 3:
            call = [{"function": {"name": "sh", "arguments": {"cmd": f"make t{turn}"}}}]
            out.append(Msg("assistant", "", tool_calls=call))
            out.append(Msg("tool", "ok " * rng.randint(10, 400), name="sh"))
        out.append(Msg("assistant", f"answer {turn}: " + "dolor sit " * rng.randint(5, 150)))
        turn += 1
    return out[:n_messages]


def fit_calibration(model: str) -> None:
    calib = calibration_for(model)
    for chars in (4_000, 9_000, 20_000, 40_000):
        calib.record(chars, 120 + chars // 3)


def bench_plan(runs: int) -> list[list[object]]:
    rng = random.Random(1)
    msgs = conversation(MESSAGES, rng)
    rows: list[list[object]] = []
    for label, fitted in (("unfitted (chars/1.8)", False), ("fitted line", True)):
        reset_registry()
        if fitted:
            fit_calibration(MODEL)
        estimate = estimator_for(MODEL, WINDOW, SETTINGS)
        samples = timed_sync(
            lambda estimate=estimate: plan_compression(  # type: ignore[misc]
                msgs, keep_recent=4, window=WINDOW, target=0.65, estimate=estimate
            ),
            runs * 3,
            warmup=2,
        )
        plan = plan_compression(msgs, keep_recent=4, window=WINDOW, target=0.65, estimate=estimate)
        s = Stats.of(samples)
        rows.append(
            [
                f"plan, {label}",
                len(msgs),
                len(plan.to_summarize),
                fmt_ms(s.p50),
                fmt_ms(s.p95),
            ]
        )
    return rows


async def _stub_summary(messages: Sequence[Msg], *, profile: Profile, window: int) -> Summary:
    return Summary(text=f"- {len(messages)} messages summarized", keys=["bench"])


async def bench_compress(runs: int) -> list[list[object]]:
    target = provision("navi_bench_compression")
    engine = create_async_engine(target.url)
    factory = async_sessionmaker(engine, expire_on_commit=False)
    viewer = Viewer(user_id=USER, all_users=True)
    profiles = load_profiles(SETTINGS)
    profile = profiles.get("default")
    msgs = conversation(MESSAGES, random.Random(2))
    async with factory() as db:
        await db.execute(
            text("INSERT INTO navi_users (id, name) VALUES (:u, :u) ON CONFLICT DO NOTHING"),
            {"u": USER},
        )
        service = SessionService(db, SETTINGS, profiles)
        # the profile the session names needs no definition: compression gets `profile`
        row = await service.create("bench-compression", USER, "bench", {"bench-compression"})
        sid = row.id
        for start in range(0, len(msgs), 500):
            batch = [
                MessageIn(role=m.role, content=m.content, tool_calls=m.tool_calls, name=m.name)  # type: ignore[arg-type]
                for m in msgs[start : start + 500]
            ]
            await service.append(sid, viewer, batch)
        await db.commit()
    samples: list[float] = []
    summarized = 0
    try:
        for _ in range(runs):
            # the compression commits in a transaction of its own: here, a savepoint of
            # an outer transaction rolled back after, so the next run compresses the same
            # 2,000 messages
            async with engine.connect() as conn:
                outer = await conn.begin()
                bound = async_sessionmaker(
                    bind=conn, expire_on_commit=False, join_transaction_mode="create_savepoint"
                )
                with Clock() as c:
                    async with bound() as db:
                        loaded = await load_context(db, USER, sid)
                    result = await compress_and_save_session(
                        bound,
                        SETTINGS,
                        session_id=sid,
                        viewer=viewer,
                        profile=profile,
                        model=MODEL,
                        window=WINDOW,
                        reason="forced",
                        summarize=_stub_summary,
                        loaded=loaded,
                        sessions=lambda db: SessionService(db, SETTINGS, profiles),
                    )
                samples.append(c.ms)
                assert result is not None
                summarized = len(result.demoted)
                await outer.rollback()
    finally:
        async with factory() as db, db.begin():
            await SessionService(db, SETTINGS, profiles).delete(sid, viewer)
        await engine.dispose()
    s = Stats.of(samples)
    return [
        [
            f"compress_and_save_session ({target.label})",
            MESSAGES,
            summarized,
            fmt_ms(s.p50),
            fmt_ms(s.p95),
        ]
    ]


def _turn(i: int, rng: random.Random, workload: str) -> list[Msg]:
    """One turn: a chat exchange, or an agent turn with several tool calls."""
    msgs = [Msg("user", f"q{i} " + "word " * rng.randint(20, 300))]
    calls = rng.randint(0, 2) if workload == "chat" else rng.randint(1, 6)
    for c in range(calls):
        call = [{"function": {"name": "read", "arguments": {"path": f"/f{i}-{c}"}}}]
        msgs.append(Msg("assistant", "", tool_calls=call))
        size = rng.randint(50, 400) if workload == "chat" else rng.randint(100, 1000)
        msgs.append(Msg("tool", "data " * size, name="read"))
    msgs.append(Msg("assistant", f"a{i} " + "text " * rng.randint(50, 500)))
    return msgs


def simulate(
    turns: int, target: float, seed: int, workload: str, keep: int, threshold: float = 0.90
) -> tuple[int, float]:
    """Compressions and mean context fill over ``turns`` simulated turns (pre-turn check)."""
    rng = random.Random(seed)
    reset_registry()
    fit_calibration(MODEL)
    calib = calibration_for(MODEL)

    def estimate(messages: list[Msg]) -> int:
        return estimate_tokens(messages, calib, window=WINDOW)

    context: list[Msg] = []
    compressions = 0
    fill = 0.0
    for i in range(turns):
        turn = _turn(i, rng, workload)
        if estimate([*context, turn[0]]) >= WINDOW * threshold:
            plan = plan_compression(
                context, keep_recent=keep, window=WINDOW, target=target, estimate=estimate
            )
            if plan.would_compress:
                compressions += 1
                summary = Msg("user", "- summary " + "s" * 1500, is_summary=True)
                context = plan.system + [summary] + plan.to_keep
        context.extend(turn)
        fill += estimate(context) / WINDOW
    return compressions, fill / turns


def bench_hysteresis(turns: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for workload, keep in (("chat", 4), ("chat", 12), ("agent", 4), ("agent", 12)):
        for label, target in (("0.65 (hysteresis)", 0.65), ("0.89 (≈ threshold)", 0.89)):
            counts, fills = [], []
            for seed in range(3):
                c, f = simulate(turns, target, seed, workload, keep)
                counts.append(c * 1000 / turns)
                fills.append(f)
            rows.append(
                [
                    f"{workload}, keep {keep} turns",
                    label,
                    turns,
                    f"{sum(counts) / len(counts):.1f}",
                    f"{min(counts):.0f}-{max(counts):.0f}",
                    f"{100 * sum(fills) / len(fills):.0f}%",
                ]
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per measurement")
    parser.add_argument("--turns", type=int, default=1000, help="simulated turns")
    parser.add_argument("--no-db", action="store_true", help="skip the PostgreSQL part")
    args = parser.parse_args(argv)

    rows = bench_plan(args.runs)
    if not args.no_db:
        rows += asyncio.run(bench_compress(args.runs))
    print_table(
        ["operation (LLM excluded)", "messages", "summarized", "p50 ms", "p95 ms"],
        rows,
        title=f"Compressing a {MESSAGES:,}-message session, window {WINDOW:,}",
    )
    print()
    print_table(
        ["workload", "target", "turns", "compressions / 1k turns", "range (3 seeds)", "mean fill"],
        bench_hysteresis(args.turns),
        title=f"Compressions at 90 % of a {WINDOW:,} window, by hysteresis target",
    )
    reset_registry()
    return 0


if __name__ == "__main__":
    sys.exit(main())
