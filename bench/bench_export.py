"""What `GET /me/export` holds in memory while it streams a large account.

    .venv/bin/python bench/bench_export.py [--messages 100000] [--sessions 100]

Seeds one user with `--messages` messages (~500 chars each) over `--sessions` sessions
(COPY, kept between runs while the sizes stay the same), then runs the export the
service streams (`transfer.exporter.export_lines`: pages, each its own short read) and
discards its bytes, sampling the process's RSS at every chunk. Prints the RSS before,
the peak during, the bytes and lines written, and the rate — and, for scale, the RSS
growth of the naive way: every message row loaded at once.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import uuid

import psutil
import psycopg
from _common import print_table, provision, step

USER = "bench_export"


def seed(conninfo: str, messages: int, sessions: int) -> None:
    with psycopg.connect(conninfo) as conn:
        have = conn.execute(
            "SELECT count(*) FROM session_messages WHERE user_id = %s", (USER,)
        ).fetchone()
        sess = conn.execute("SELECT count(*) FROM sessions WHERE user_id = %s", (USER,)).fetchone()
        if have and sess and (have[0], sess[0]) == (messages, sessions):
            step(f"dataset kept: {messages} messages in {sessions} sessions")
            return
        step(f"seeding {messages} messages in {sessions} sessions")
        conn.execute("DELETE FROM navi_users WHERE id = %s", (USER,))
        conn.execute("INSERT INTO navi_users (id, name) VALUES (%s, %s)", (USER, USER))
        per = messages // sessions
        ids = [uuid.uuid4() for _ in range(sessions)]
        for sid in ids:
            conn.execute(
                "INSERT INTO sessions (id, user_id, profile_id, next_seq) VALUES (%s, %s, 'b', %s)",
                (sid, USER, per),
            )
        body = ("lorem ipsum dolor sit amet " * 20)[:500]
        with conn.cursor().copy(
            "COPY session_messages (session_id, user_id, sequence_number, role, content) FROM STDIN"
        ) as copy:
            for sid in ids:
                for i in range(per):
                    copy.write_row((sid, USER, i, ("user", "assistant")[i % 2], f"{i} {body}"))
        conn.commit()
        conn.execute("ANALYZE session_messages")
        conn.commit()


async def measure(url: str) -> dict[str, float]:
    from _app import Settings, create_engine, export_lines, read_snapshot, session_factory

    proc = psutil.Process()
    engine = create_engine(url)
    gc.collect()
    before = proc.memory_info().rss
    peak, written, lines, started = before, 0, 0, time.perf_counter()
    try:
        async for chunk in export_lines(session_factory(engine), Settings(), USER):
            written += len(chunk)
            lines += chunk.count(b"\n")
            peak = max(peak, proc.memory_info().rss)
        seconds = time.perf_counter() - started
        gc.collect()
        naive_before = proc.memory_info().rss
        async with read_snapshot(session_factory(engine)) as db:
            from sqlalchemy import text

            rows = (
                await db.execute(
                    text("SELECT * FROM session_messages WHERE user_id = :u"), {"u": USER}
                )
            ).all()
            naive_peak = proc.memory_info().rss
            del rows
    finally:
        await engine.dispose()
    return {
        "before": before,
        "peak": peak,
        "bytes": written,
        "lines": lines,
        "seconds": seconds,
        "naive": naive_peak - naive_before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=100)
    args = parser.parse_args()
    target = provision("navi_bench_export")
    seed(target.conninfo, args.messages, args.sessions)
    step("exporting")
    r = asyncio.run(measure(target.url))
    mb = 1024 * 1024
    print_table(
        [
            "messages",
            "export MB",
            "lines",
            "s",
            "lines/s",
            "RSS before MB",
            "RSS peak MB",
            "growth MB",
            "naive: all rows loaded, growth MB",
        ],
        [
            [
                args.messages,
                f"{r['bytes'] / mb:.1f}",
                int(r["lines"]),
                f"{r['seconds']:.1f}",
                f"{r['lines'] / r['seconds']:.0f}",
                f"{r['before'] / mb:.0f}",
                f"{r['peak'] / mb:.0f}",
                f"{(r['peak'] - r['before']) / mb:.1f}",
                f"{r['naive'] / mb:.0f}",
            ]
        ],
        title=f"export of one user ({target.label})",
    )


if __name__ == "__main__":
    main()
