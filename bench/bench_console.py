"""The console's pages at the seed's production scale (issue 35: ≤ 50 ms server time).

    make bench-console                        # the bench-sessions dataset (embedded PG)
    .venv/bin/python bench/bench_console.py --scale 0.05 --requests 20   # a quick check

Uses `make bench-sessions`' dataset (generated on first use: 50 users, 1,300 sessions,
~400 MB of messages; `--scale` multiplies it). Serves the real app under uvicorn in a
thread (ServerTiming: server-side wall time and CPU per response), signs in to the
console with the token of the owner of the largest session (the browser's way:
`POST /console/login`), and requests each page `--requests` times after a warm-up. In
the same run, the JSON endpoint each page is built on (the naive way to look at the
same data: the API a client would call) gives the page's overhead as a ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
import sys
import time
from typing import Any

import httpx
import psycopg
from _app import create_app
from _common import fake_ollama_process, provision, serve, server_cpu_ms, server_ms
from bench_sessions import (
    ADMIN_TOKEN,
    COMMON_TERM,
    Params,
    app_settings,
    ensure_dataset,
    load_facts,
)

GOAL_MS = 50.0
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def sign_in(http: httpx.Client, token: str) -> None:
    r = http.get("/console/login")
    csrf = CSRF.search(r.text)
    assert csrf, r.text[:300]
    r = http.post("/console/login", data={"token": token, "csrf": csrf.group(1)})
    assert r.status_code == 303, (r.status_code, r.text[:300])


def measure(
    http: httpx.Client,
    path: str,
    n: int,
    warm: int,
    headers: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, float]:
    def call() -> httpx.Response:
        if body is not None:
            return http.post(path, headers=headers, json=body)
        return http.get(path, headers=headers)

    for _ in range(warm):
        r = call()
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
    wall: list[float] = []
    cpu: list[float] = []
    started = time.perf_counter()
    for _ in range(n):
        r = call()
        assert r.status_code == 200, (path, r.status_code)
        wall.append(server_ms(r))
        cpu.append(server_cpu_ms(r))
    elapsed = time.perf_counter() - started
    wall.sort()
    return {
        "p50": statistics.median(wall),
        "p95": wall[min(len(wall) - 1, int(len(wall) * 0.95))],
        "cpu": statistics.mean(cpu),
        "rps": n / elapsed,
        "bytes": len(r.content),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args(argv)
    p = Params(scale=args.scale, seed=args.seed)
    suffix = "" if args.scale == 1.0 else "_s" + f"{args.scale:g}".replace(".", "_")
    target = provision("navi_bench", suffix=suffix)
    data, _ = ensure_dataset(target, p, regenerate=False)
    print(
        f"server: {target.label}; dataset: {p.sessions} sessions, {data.get('messages')} messages"
    )
    facts = load_facts(target, p)
    sid = facts.largest[0]
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        owner, n_msgs = conn.execute(
            "SELECT user_id, next_display_index FROM sessions WHERE id = %s", (sid,)
        ).fetchone()  # type: ignore[misc]
        owner_sessions = conn.execute(
            "SELECT count(*) FROM sessions WHERE user_id = %s", (owner,)
        ).fetchone()[0]  # type: ignore[index]
    print(
        f"signed in as {owner}: {owner_sessions} sessions; largest session {sid}, {n_msgs} messages"
    )
    # the fake Ollama (a process of its own) for the chat model and, unless the embedder
    # is the local one, for the query embedding of /console/search
    fake, fake_url = fake_ollama_process(app_settings().vector_dim)
    settings = dataclasses.replace(app_settings(), ollama_host=fake_url)
    app = create_app(settings, database_url=target.url, background_jobs=False)
    rows: list[tuple[str, str, dict[str, float], dict[str, float] | None]] = []
    with serve(app) as server:
        user = httpx.Client(base_url=server.base_url, timeout=60)
        admin = httpx.Client(base_url=server.base_url, timeout=60)
        sign_in(user, facts.tokens[owner])
        sign_in(admin, ADMIN_TOKEN)
        bearer = {"Authorization": f"Bearer {facts.tokens[owner]}"}
        n, w = args.requests, args.warmup
        pages: list[tuple[str, httpx.Client, str, str | None, dict[str, Any] | None]] = [
            ("sessions", user, "/console", "/sessions?limit=25", None),
            (
                "sessions search",
                user,
                f"/console?q={COMMON_TERM}",
                f"/sessions?limit=25&search={COMMON_TERM}",
                None,
            ),
            (
                "session",
                user,
                f"/console/sessions/{sid}",
                f"/sessions/{sid}/messages?limit=50",
                None,
            ),
            ("memory", user, "/console/memory", "/memory/facts?limit=50", None),
            (
                "search",
                user,
                f"/console/search?q={COMMON_TERM}",
                "/memory/search",
                {"query": COMMON_TERM, "scope": "all", "k": 5},
            ),
            ("admin", admin, "/console/admin", None, None),
        ]
        for name, client, page, api, body in pages:
            try:
                measured = measure(client, page, n, w)
            except AssertionError as exc:
                print(f"  {name}: FAILED {exc}")
                continue
            naive = None
            if api:
                headers = bearer if client is user else {"Authorization": f"Bearer {ADMIN_TOKEN}"}
                naive = measure(
                    httpx.Client(base_url=server.base_url, timeout=60), api, n, w, headers, body
                )
            rows.append((name, page, measured, naive))
    fake.kill()
    fake.wait()
    print(f"\nserver time per page, {args.requests} requests each (goal ≤ {GOAL_MS:.0f} ms):")
    print(
        f"{'page':<16} {'p50 ms':>8} {'p95 ms':>8} {'cpu ms':>8} {'KB':>6}   JSON API p50 / ratio"
    )
    for name, _, m, naive in rows:
        ratio = f"{naive['p50']:.1f} ms / {m['p50'] / naive['p50']:.2f}×" if naive else "–"
        flag = "" if m["p95"] <= GOAL_MS else "  (over the goal)"
        print(
            f"{name:<16} {m['p50']:8.1f} {m['p95']:8.1f} {m['cpu']:8.1f} {m['bytes'] / 1024:6.0f}   {ratio}{flag}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
