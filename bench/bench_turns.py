"""The turn endpoint's overhead over the model (issue 20): `make bench-turns`.

    .venv/bin/python bench/bench_turns.py --turns 150 --compress-turns 40

The app under uvicorn (bench/_common.py `serve`) on the bench database, the fake Ollama
server as the model (streamed replies, no delay), turns posted with
`Accept: text/event-stream` and read to their `done` event by an httpx client:

- **overhead** = the turn's wall time at the client − the time the fake model spent
  answering its chat calls (received → last byte, summaries included); what remains is
  Navi: auth, the pre-turn prepare (load, price, memory notes), the appends and their
  commits, the post-turn check, the SSE encoding, plus the loopback HTTP hop (so it is
  an upper bound of the server-side share);
- **TTFT overhead** = the client's time to the first `token` event − the model's own
  time to its first byte;
- **turns per second**: sequential, and with `--clients` concurrent clients;
- the same turns through the console's chat route (`POST /console/chat/{id}/turn`, the
  cookie and CSRF header the chat page sends): its overhead against the API's; and the
  page's redraw after each of them (`GET /console/chat/{id}`, as chat.js asks for the
  history once the `done` event came), timed on its own.

The server runs in a process of its own (`uvicorn --workers`, default 1), so the client
and the fake model (threads of the bench process) do not take its GIL; `--in-process`
serves from a thread instead (the earlier way, slower by that contention).

Turns without compression run on the default profile; turns with compression on a
4,096-token profile where a long user message makes the pre-turn check compress (the
rows are split by whether the turn's stream carried a `compression` event).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import time
from typing import Any

import httpx
from _agent import ADMIN_TOKEN, agent_settings
from _app import FakeOllama, create_app, create_engine, get_settings
from _common import (
    Stats,
    fmt_ms,
    fresh_database,
    print_table,
    serve,
    serve_workers,
    server_line,
)

PROFILES = {"small": {"context_window": 4096, "compression_keep_recent": 2}}
REPLY = " ".join(f"word{i}" for i in range(40))  # 40 streamed pieces


@dataclasses.dataclass
class Sample:
    wall_ms: float
    ttft_ms: float
    model_ms: float
    model_ttft_ms: float
    compressed: bool

    @property
    def overhead(self) -> float:
        return self.wall_ms - self.model_ms

    @property
    def ttft_overhead(self) -> float:
        return self.ttft_ms - self.model_ttft_ms


async def one_turn(
    client: httpx.AsyncClient, fake: FakeOllama, sid: str, text: str, console: str = ""
) -> Sample:
    """One turn through the API, or (`console`: the console's CSRF value, the client
    signed in) through the console's chat route, as the chat page posts it."""
    before = len(fake.chat_times)
    t0 = time.perf_counter()
    ttft = None
    compressed = False
    last = ""
    if console:
        path, body = f"/console/chat/{sid}/turn", {"content": text}
        headers = {"X-Navi-CSRF": console}
    else:
        path, body = f"/sessions/{sid}/turns", {"message": {"content": text}}
        headers = {"Accept": "text/event-stream"}
    async with client.stream("POST", path, json=body, headers=headers) as r:
        if r.status_code != 200:
            raise RuntimeError(f"turn: {r.status_code} {(await r.aread())[:300]!r}")
        async for line in r.aiter_lines():
            if ttft is None and line == "event: token":
                ttft = time.perf_counter()
            compressed |= line == "event: compression"
            if line in ("event: error", "event: done"):
                last = line
    wall = time.perf_counter()
    if last != "event: done":
        raise RuntimeError("the turn ended with an error event")
    calls = fake.chat_times[before:]
    first = next((c for c in calls if c[1] < c[2]), calls[0])  # the streamed call
    return Sample(
        wall_ms=(wall - t0) * 1000,
        ttft_ms=((ttft or wall) - t0) * 1000,
        model_ms=sum(c[2] - c[0] for c in calls) * 1000,
        model_ttft_ms=(first[1] - first[0]) * 1000 + _before_first(calls, first),
        compressed=compressed,
    )


def _before_first(calls: list[tuple[float, float, float]], first: tuple[float, ...]) -> float:
    """Model ms spent before the streamed call (a pre-turn summary), in ms."""
    return sum(c[2] - c[0] for c in calls if c[2] <= first[0]) * 1000


async def building_blocks(client: httpx.AsyncClient, sid: str, text: str) -> float:
    """The same turn the way a runtime does it over HTTP without the turn endpoint, the
    model left out: /prepare, then /messages with the reply and its usage (ms)."""
    t0 = time.perf_counter()
    r = await client.post(f"/sessions/{sid}/prepare", json={"message": {"content": text}})
    if r.status_code != 200:
        raise RuntimeError(f"prepare: {r.status_code} {r.text[:300]}")
    body = {
        "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": REPLY}],
        "usage": {"model": "fake-chat:latest", "prompt_eval_count": 200},
    }
    r = await client.post(f"/sessions/{sid}/messages", json=body)
    if r.status_code != 201:
        raise RuntimeError(f"append: {r.status_code} {r.text[:300]}")
    return (time.perf_counter() - t0) * 1000


async def console_sign_in(client: httpx.AsyncClient) -> str:
    """The console's cookie on `client` (as the login form signs in); its CSRF value."""
    r = await client.get("/console/login")
    r = await client.post(
        "/console/login", data={"token": ADMIN_TOKEN, "csrf": _csrf(r.text)}, follow_redirects=True
    )
    if r.status_code != 200:
        raise RuntimeError(f"console sign-in: {r.status_code} {r.text[:300]}")
    return _csrf(r.text)


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]*)"', html)
    if m is None:
        raise RuntimeError("no CSRF field on the console page")
    return m.group(1)


async def page_redraw(page: httpx.AsyncClient, sid: str) -> float:
    """The chat page's GET of itself after a turn's `done` (its history redrawn), ms."""
    t0 = time.perf_counter()
    r = await page.get(f"/console/chat/{sid}", headers={"Cache-Control": "no-store"})
    if r.status_code != 200:
        raise RuntimeError(f"chat page: {r.status_code} {r.text[:300]}")
    return (time.perf_counter() - t0) * 1000


async def sessions(client: httpx.AsyncClient, profile: str, n: int) -> list[str]:
    out = []
    for _ in range(n):
        r = await client.post("/sessions", json={"profile_id": profile})
        out.append(r.json()["id"])
    return out


async def run_turns(
    client: httpx.AsyncClient, fake: FakeOllama, sids: list[str], turns: int, text: str
) -> list[Sample]:
    return [await one_turn(client, fake, sids[i % len(sids)], f"{text} {i}") for i in range(turns)]


async def throughput(
    client: httpx.AsyncClient, fake: FakeOllama, sids: list[str], per_client: int
) -> float:
    t0 = time.perf_counter()
    await asyncio.gather(
        *(run_turns(client, fake, [sid], per_client, "hello again") for sid in sids)
    )
    return len(sids) * per_client / (time.perf_counter() - t0)


def row(label: str, samples: list[Sample]) -> list[object]:
    over, ttft = (
        Stats.of([s.overhead for s in samples]),
        Stats.of([s.ttft_overhead for s in samples]),
    )
    wall = Stats.of([s.wall_ms for s in samples])
    return [
        label,
        len(samples),
        f"{fmt_ms(wall.p50)} / {fmt_ms(wall.p95)}",
        f"{fmt_ms(over.p50)} / {fmt_ms(over.p95)}",
        f"{fmt_ms(ttft.p50)} / {fmt_ms(ttft.p95)}",
    ]


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    target = fresh_database("navi_bench_turns")  # every run on the same, empty store
    print(server_line(target))
    fake = FakeOllama(dim=get_settings().vector_dim, default_reply=REPLY).start()
    settings = dataclasses.replace(
        agent_settings(fake.url, PROFILES, "ollama"),
        memory_recall_enabled=True,
        extraction_enabled=False,  # a new session would start extraction in the background
    )
    engine = None
    if args.in_process:
        engine = create_engine(target.url)
        server: Any = serve(create_app(settings, engine=engine, background_jobs=False))
    else:  # its own process: the client and the fake model do not share its GIL
        server = serve_workers(settings, target.url, args.workers, ADMIN_TOKEN)
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60) as c:
            plain = await sessions(c, "default", 10)
            await run_turns(c, fake, plain, 10, "warm up")
            # API and console turns interleaved, so both meet the same load and history
            fast, chat, redraw = [], [], []
            async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as page:
                csrf = await console_sign_in(page)
                for i in range(args.turns):
                    sid, text = plain[i % 10], f"what did we decide about it {i}"
                    fast.append(await one_turn(c, fake, sid, text))
                    chat.append(await one_turn(page, fake, sid, text, csrf))
                    redraw.append(await page_redraw(page, sid))
            blocks_sids = await sessions(c, "default", 10)
            blocks = [
                await building_blocks(c, blocks_sids[i % 10], f"what did we decide about it {i}")
                for i in range(args.turns)
            ]
            small = await sessions(c, "small", 4)
            long_text = " ".join(f"detail{i}" for i in range(900))
            mixed = await run_turns(c, fake, small, args.compress_turns, long_text)
            tps = await throughput(c, fake, await sessions(c, "default", args.clients), 10)
    finally:
        server.stop()
        fake.stop()
        if engine is not None:
            await engine.dispose()
    with_c = [s for s in mixed if s.compressed]
    uncompressed = [s for s in fast if not s.compressed]
    print_table(
        ["turns", "n", "wall ms p50/p95", "overhead ms p50/p95", "TTFT overhead ms p50/p95"],
        [
            row("no compression", uncompressed),
            row("console chat route, no compression", [s for s in chat if not s.compressed]),
            row("default window, compressed", [s for s in fast if s.compressed]),
            row("with compression", with_c),
            row("small window, none", [s for s in mixed if not s.compressed]),
        ],
        title="POST /sessions/{id}/turns over the fake model (streamed, SSE)",
    )
    bb = Stats.of(blocks)
    print(
        f"building blocks (/prepare + /messages with usage, no model): p50/p95 "
        f"{fmt_ms(bb.p50)} / {fmt_ms(bb.p95)} ms — the turn loop's own share is the "
        f"overhead above minus this"
    )
    api_over = Stats.of([s.overhead for s in uncompressed])
    chat_over = Stats.of([s.overhead for s in chat if not s.compressed])
    rd = Stats.of(redraw)
    print(
        f"console chat route − API endpoint, overhead: p50 {chat_over.p50 - api_over.p50:+.1f} ms,"
        f" p95 {chat_over.p95 - api_over.p95:+.1f} ms; the page's redraw after done "
        f"(GET /console/chat/{{id}}): p50/p95 {fmt_ms(rd.p50)} / {fmt_ms(rd.p95)} ms"
    )
    seq = len(fast) / (sum(s.wall_ms for s in fast) / 1000)
    print(f"turns/s: {seq:.1f} sequential, {tps:.1f} with {args.clients} concurrent clients")
    return {
        "overhead_p95_ms": Stats.of([s.overhead for s in uncompressed]).p95,
        "compression_overhead_p95_ms": Stats.of([s.overhead for s in with_c]).p95,
        "building_blocks_p95_ms": bb.p95,
        "building_blocks_p50_ms": bb.p50,
        "overhead_p50_ms": Stats.of([s.overhead for s in uncompressed]).p50,
        "console_overhead_p50_ms": Stats.of([s.overhead for s in chat if not s.compressed]).p50,
        "console_overhead_p95_ms": Stats.of([s.overhead for s in chat if not s.compressed]).p95,
        "console_redraw_p50_ms": rd.p50,
        "console_redraw_p95_ms": rd.p95,
        "turns_per_second": seq,
        "turns_per_second_concurrent": tps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=150, help="turns without compression")
    parser.add_argument("--compress-turns", type=int, default=40, help="small-window turns")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="serve from a thread of the bench process (shares the client's and fake's GIL)",
    )
    out = asyncio.run(bench(parser.parse_args()))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
