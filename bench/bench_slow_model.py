"""GET /sessions while compressions wait on a slow summary model (issue 42, review
item 2): `make bench-slow-model`.

    .venv/bin/python bench/bench_slow_model.py                       # 20 compressions, 30 s
    .venv/bin/python bench/bench_slow_model.py --compressions 5 --summary-seconds 5   # quick
    .venv/bin/python bench/bench_slow_model.py --cwd /path/to/other/checkout          # A/B

The service started as `make run` starts it (`_common.serve_navi`: `python -m app.cli
serve`, its periodic jobs and indexer, default settings but for auth, the profiles and the
fake Ollama as the model), `--workers` web workers (default 1: one worker's pool is what
the load targets). The fake Ollama runs in a process of its own; every chat call (a
summary: the bench's runtime never asks the service for a reply) takes
`--summary-seconds` (default 30). Note: an HTTP request's model calls stop at
`LLM_REQUEST_DEADLINE_SECONDS` (20 s by default): a summary that slow is then cut, and the
compression falls back to the hard truncate — the requests still wait that long on the
model.

1. `--compressions` sessions (plus one of the probe user's), each filled with 6 exchanges
   of a small-window profile.
2. **idle**: `--requests` `GET /sessions` back to back: p50 / p99.
3. **loaded**: one `POST /sessions/{id}/messages` with a `usage` report past the window's
   threshold on each session, all at once (each sets off the post-turn compression); once
   every summary call has reached the model, the same `GET /sessions` back to back while
   they wait (at most until the first compression answers): p50 / p99, how many 503.
4. The p99 ratio loaded / idle (the issue's goal: within 2×), and how the compressions
   ended.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agent import ADMIN_TOKEN, agent_settings  # noqa: E402
from _common import (  # noqa: E402
    ROOT,
    auth,
    empty_database,
    fake_ollama_process,
    fmt_ms,
    percentile,
    print_table,
    serve_navi,
    step,
)

WINDOW = 4096
PROFILES = {"default": {"context_window": WINDOW, "compression_keep_recent": 4}}
PAD = " ".join(f"word{i}" for i in range(40))


def exchanges(n: int) -> list[dict[str, str]]:
    return [
        m
        for i in range(n)
        for m in (
            {"role": "user", "content": f"question {i}: {PAD}"},
            {"role": "assistant", "content": f"answer {i}: {PAD}"},
        )
    ]


async def session_list(
    client: httpx.AsyncClient, n: int | None, until: float
) -> tuple[list[float], int]:
    """`GET /sessions` back to back, `n` times or until `until`: (latencies in ms, 503s)."""
    samples: list[float] = []
    unavailable = 0
    while (n is None or len(samples) < n) and time.monotonic() < until:
        started = time.perf_counter()
        r = await client.get("/sessions", params={"limit": 20})
        samples.append((time.perf_counter() - started) * 1000)
        if r.status_code == 503:
            unavailable += 1
        elif r.status_code != 200:
            raise RuntimeError(f"GET /sessions: {r.status_code} {r.text[:200]}")
    return samples, unavailable


async def fake_chats(fake_url: str) -> int:
    async with httpx.AsyncClient(base_url=fake_url) as c:
        return int((await c.get("/_fake/counts")).json().get("/api/chat", 0))


async def settle(c: httpx.AsyncClient, deadline: float) -> None:
    """Wait until the indexers have embedded what the fill wrote (`/health`'s backlog),
    so the idle figure is not taken while they work and the loaded one after."""
    while time.monotonic() < deadline:
        index = (await c.get("/health")).json().get("index") or {}
        if not index.get("backlog_chunks"):
            return
        await asyncio.sleep(0.5)


async def measure(base: str, fake_url: str, args: argparse.Namespace) -> None:
    async with httpx.AsyncClient(base_url=base, headers=auth(ADMIN_TOKEN), timeout=300) as c:
        step(f"{args.compressions} sessions of 6 exchanges")
        sids = []
        for _ in range(args.compressions):
            r = await c.post("/sessions", json={"profile_id": "default"})
            sid = r.json()["id"]
            r = await c.post(f"/sessions/{sid}/messages", json={"messages": exchanges(6)})
            assert r.status_code == 201, r.text
            sids.append(sid)
        step("settling: until the live index's backlog is embedded (at most 120 s)")
        await settle(c, time.monotonic() + 120)
        step(f"idle: {args.requests} GET /sessions")
        await session_list(c, 20, time.monotonic() + 60)  # warm-up
        idle, idle_503 = await session_list(c, args.requests, time.monotonic() + 300)
        step(
            f"loaded: {args.compressions} post-turn compressions, summaries of {args.summary_seconds} s"
        )
        chats = await fake_chats(fake_url)
        usage = {"model": "fake-chat:latest", "prompt_eval_count": WINDOW - 100}

        async def compress(sid: str) -> tuple[int, float, list[str]]:
            started = time.monotonic()
            body = {"messages": exchanges(1), "usage": usage}
            r = await c.post(f"/sessions/{sid}/messages", json=body)
            events = [e["type"] for e in r.json().get("events", [])] if r.status_code == 201 else []
            return r.status_code, time.monotonic() - started, events

        tasks = [asyncio.ensure_future(compress(s)) for s in sids]
        started = time.monotonic()
        while await fake_chats(fake_url) < chats + len(sids) and time.monotonic() - started < 30:
            if any(t.done() for t in tasks):
                break
            await asyncio.sleep(0.1)
        reached = await fake_chats(fake_url) - chats
        loaded_samples: list[float] = []
        loaded_503 = 0
        while not any(t.done() for t in tasks):
            got, n503 = await session_list(c, 10, time.monotonic() + 5)
            loaded_samples += got
            loaded_503 += n503
        done = await asyncio.gather(*tasks)
    statuses: dict[int, int] = {}
    for status, _, _ in done:
        statuses[status] = statuses.get(status, 0) + 1
    compressed = sum("ContextCompressed" in ev for _, _, ev in done)
    rows = []
    for label, samples, n503 in (
        ("idle", idle, idle_503),
        (f"during {len(sids)} compressions", loaded_samples, loaded_503),
    ):
        p50, p99 = percentile(samples, 50), percentile(samples, 99)
        rows.append([label, len(samples), fmt_ms(p50), fmt_ms(p99), n503])
    print_table(
        ["GET /sessions", "requests", "p50", "p99", "503"],
        rows,
        title=f"bench_slow_model ({args.workers} worker(s); summaries {args.summary_seconds} s)",
    )
    ratio = percentile(loaded_samples, 99) / percentile(idle, 99)
    print(f"p99 loaded / idle: {ratio:.2f}x (goal: <= 2x)")
    seconds = sorted(round(s, 1) for _, s, _ in done)
    print(
        f"summary calls that reached the model before the probe: {reached}/{len(sids)}; "
        f"compressions answered {json.dumps(statuses)}, {compressed} compressed, "
        f"in {seconds[0]}..{seconds[-1]} s"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--compressions", type=int, default=20)
    p.add_argument("--summary-seconds", type=float, default=30.0)
    p.add_argument("--requests", type=int, default=300, help="idle GET /sessions requests")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--cwd", type=Path, default=ROOT, help="the checkout whose service runs")
    p.add_argument(
        "--request-deadline",
        type=float,
        default=None,
        help="LLM_REQUEST_DEADLINE_SECONDS for the service (default: the setting's, 20 s, "
        "which cuts a 30 s summary; 60 lets the summaries take their whole time)",
    )
    args = p.parse_args()
    fake, fake_url = fake_ollama_process(768, slow_chat_seconds=args.summary_seconds)
    server = None
    try:
        target = empty_database("navi_bench_slow_model")
        settings: Any = agent_settings(fake_url, PROFILES, "fake")
        if args.request_deadline is not None:
            settings = dataclasses.replace(
                settings, llm_request_deadline_seconds=args.request_deadline
            )
        server = serve_navi(settings, target.url, args.workers, ADMIN_TOKEN, cwd=args.cwd)
        asyncio.run(measure(server.base_url, fake_url, args))
    finally:
        if server is not None:
            server.stop()
        fake.kill()


if __name__ == "__main__":
    main()
