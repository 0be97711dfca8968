"""What the size check of the hot history costs (SESSION_MAX_HISTORY_BYTES, issue 8 D).

    .venv/bin/python bench/bench_history_bytes.py

For sessions of 500 / 2,000 / 10,000 hot messages (~2 KB each, plus a few large tool
results that PostgreSQL TOASTs), measures in one run:

- `sum(octet_length(content) + octet_length(thinking))` over the session's hot rows —
  the measurement `app.domain.sessions.compaction` runs every CHECK_EVERY appends;
- the same sum with the content detoasted (`length(content::bytea)`), the naive way;
- one append (reserve + insert, SQL only) without and with the check, to put the
  check in proportion.
"""

from __future__ import annotations

import argparse
import random
import string
import time
import uuid

import psycopg
from _app import HISTORY_SIZE_SQL as _SIZE
from _common import Stats, fmt_ms, fmt_ratio, print_table, provision, speedup, timed_sync

SIZES = (500, 2000, 10_000)
REPEAT = 50


def _text(rng: random.Random, n: int) -> str:
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(200)]
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def seed(conn: psycopg.Connection, n: int, rng: random.Random) -> uuid.UUID:
    sid = uuid.uuid4()
    conn.execute(
        "INSERT INTO navi_users (id, name) VALUES ('bench', 'bench') ON CONFLICT DO NOTHING"
    )
    conn.execute(
        "INSERT INTO sessions (id, user_id, profile_id, next_seq) VALUES (%s, 'bench', 'bench', %s)",
        (sid, n),
    )
    with conn.cursor().copy(
        "COPY session_messages (session_id, user_id, sequence_number, role, content, is_context)"
        " FROM STDIN"
    ) as copy:
        for i in range(n):
            role = ("user", "assistant", "tool", "assistant")[i % 4]
            size = 60_000 if role == "tool" and i % 40 == 2 else 2000
            copy.write_row((sid, "bench", i, role, _text(rng, size), i >= n - 16))
    conn.commit()
    conn.execute("ANALYZE session_messages")
    return sid


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="hot messages per session, comma list"
    )
    parser.add_argument("--repeat", type=int, default=REPEAT, help="timed runs per measurement")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    target = provision("navi_bench_history_bytes")
    rng = random.Random(8)
    rows = []
    with psycopg.connect(target.conninfo) as conn:
        conn.execute("DELETE FROM sessions WHERE profile_id = 'bench'")
        conn.commit()
        for n in sizes:
            sid = seed(conn, n, rng)
            mib = conn.execute(
                f"SELECT sum({_SIZE}) / 1048576.0 FROM session_messages WHERE session_id = %s",
                (sid,),
            ).fetchone()[0]  # type: ignore[index]

            def check(sid: uuid.UUID = sid) -> None:
                conn.execute(
                    f"SELECT coalesce(sum({_SIZE}), 0) FROM session_messages WHERE session_id = %s",
                    (sid,),
                ).fetchone()

            def naive(sid: uuid.UUID = sid) -> None:
                conn.execute(
                    "SELECT sum(length(convert_to(content, 'UTF8'))) FROM session_messages "
                    "WHERE session_id = %s",
                    (sid,),
                ).fetchone()

            seq = [n]

            def append(
                sid: uuid.UUID = sid, with_check: bool = False, seq: list[int] = seq
            ) -> None:
                conn.execute("UPDATE sessions SET next_seq = next_seq + 1 WHERE id = %s", (sid,))
                conn.execute(
                    "INSERT INTO session_messages (session_id, user_id, sequence_number, role,"
                    " content) VALUES (%s, 'bench', %s, 'user', %s)",
                    (sid, seq[0], "a short question " * 10),
                )
                seq[0] += 1
                if with_check:
                    check(sid)
                conn.commit()

            t_check = Stats.of(timed_sync(check, args.repeat, warmup=3))
            t_naive = Stats.of(timed_sync(naive, args.repeat, warmup=3))
            t_plain = Stats.of(timed_sync(append, args.repeat, warmup=3))
            t_with = Stats.of(timed_sync(lambda: append(with_check=True), args.repeat, warmup=3))
            rows.append(
                (
                    f"{n:,}",
                    f"{mib:.1f}",
                    fmt_ms(t_check.p50),
                    fmt_ms(t_check.p95),
                    fmt_ms(t_naive.p50),
                    fmt_ratio(speedup(t_naive, t_check), 1, "x"),
                    fmt_ms(t_plain.p50),
                    fmt_ms(t_with.p50),
                )
            )
        conn.execute("DELETE FROM sessions WHERE profile_id = 'bench'")
        conn.commit()
    print(f"server: {target.label} ({target.version})  {time.strftime('%Y-%m-%d')}")
    print_table(
        (
            "hot msgs",
            "MiB",
            "check p50 ms",
            "check p95",
            "detoast p50",
            "ratio",
            "append p50",
            "append+check p50",
        ),
        rows,
        title="size check of the hot history (SQL level, ms)",
    )


if __name__ == "__main__":
    main()
