"""Append → findable by memory_search, under the mixed load (issues 29, 41): `make bench-freshness`.

    .venv/bin/python bench/bench_freshness.py --clients 16 --seconds 60
    .venv/bin/python bench/bench_freshness.py --clients 8 --seconds 20 --workers 2
    .venv/bin/python bench/bench_freshness.py --no-jobs   # "off": the request path alone

Two runs of `make bench-load-py`'s mixed load (bench/bench_load.py: N clients, each its
own user, append / list / search / history / memory_search), one after the other, each on
a fresh database and a fresh server started as `make run` starts it (`_common.serve_navi`:
`python -m app.cli serve --workers N` from this checkout, in a process group of its own,
the bench's settings as environment variables: auth on, the fake Ollama as the LLM and
the embedder; the periodic jobs at their defaults, the indexer processes `serve` starts
running):

- **off**: `RAW_INDEX_LIVE_INTERVAL_SECONDS=0`, as before the live indexer: appended
  messages are found only once compressed or idle; with `--no-jobs` (isolate the request
  path: no periodic jobs, no indexer) the app instead, under uvicorn without any
  background work, so that "on / off" is the whole cost of the background work;
- **on**: the live indexer as shipped (woken by each append, else every second).

The "on" run then runs the same load a second time with a probe beside it (the A/B
figures come from the first window, without the probe's own requests): a probe user
appends, one at a time, a message holding a
word said nowhere else to one of its sessions, then asks `POST /tools/memory_search`
from its other session (`X-Navi-Session-Id`) every 25 ms until the word is in the answer:
the time from the append's 201 to that answer is the message's freshness. Printed: each
run's table (bench_load's: req/s, p50/p95/p99 per operation, CPU per request), the
freshness p50 / p95 / max, and append throughput and memory_search p95 on against off.
The CPU per request of the app is that of the server's whole process tree (the web
workers and the indexer, which is also shown on its own).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import secrets
import time
from typing import Any

import httpx
from _agent import ADMIN_TOKEN, agent_settings, ok
from _app import Settings, configure_logging, get_settings
from _common import (
    NO_JOBS_HELP,
    fake_ollama_process,
    fmt_ms,
    fresh_database,
    percentile,
    print_table,
    serve_navi,
    server_line,
    step,
    write_results,
)
from bench_load import OPS, build_raw_index, cpu_probe, report, run_load, setup

PROBE_POLL_SECONDS = 0.025
PROBE_GIVE_UP_SECONDS = 30.0


@dataclasses.dataclass
class Freshness:
    seconds: list[float] = dataclasses.field(default_factory=list)
    missed: int = 0  # not found within PROBE_GIVE_UP_SECONDS


async def probe_loop(base_url: str, deadline: float, out: Freshness) -> None:
    """Append a unique word to session A, poll memory_search from session B until found."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as c:
        user = ok(await c.post("/admin/users", json={"name": "probe"}, headers=admin), "user", 201)
        issued = await c.post(
            f"/admin/users/{user['id']}/tokens", json={"name": "p"}, headers=admin
        )
        c.headers["Authorization"] = f"Bearer {ok(issued, 'token', 201)['token']}"
        a = ok(await c.post("/sessions", json={"name": "said here"}), "session", 201)["id"]
        b = ok(await c.post("/sessions", json={"name": "asked here"}), "session", 201)["id"]
        n = 0
        while time.perf_counter() < deadline:
            n += 1
            word = f"zq{n}x{secrets.token_hex(3)}"
            text = f"The combination for my gym locker number {n} is {word}, keep it."
            r = await c.post(f"/sessions/{a}/messages", json={"messages": [
                {"role": "user", "content": text}]})  # fmt: skip
            ok(r, "append", 201)
            said = time.perf_counter()
            while True:
                r = await c.post(
                    "/tools/memory_search",
                    json={"query": f"gym locker {word}", "k": 3},
                    headers={"X-Navi-Session-Id": b},
                )
                if r.status_code == 200 and word in r.json()["text"]:
                    out.seconds.append(time.perf_counter() - said)
                    break
                if time.perf_counter() - said > PROBE_GIVE_UP_SECONDS:
                    out.missed += 1
                    break
                await asyncio.sleep(PROBE_POLL_SECONDS)
            await asyncio.sleep(random.uniform(0.1, 0.3))


async def one_run(args: argparse.Namespace, live: bool) -> dict[str, Any]:
    name = "on" if live else "off"
    target = fresh_database(f"navi_bench_fresh_{name}")
    args.embedded = target.embedded
    fake, fake_url = fake_ollama_process(get_settings().vector_dim)
    jobs = live or not args.no_jobs
    settings = agent_settings(fake_url, {}, "ollama")
    defaults = Settings()  # the periodic jobs as `make run` has them (agent_settings: quiet)
    settings = dataclasses.replace(
        settings,
        extraction_interval_seconds=defaults.extraction_interval_seconds,
        raw_index_live_interval_seconds=defaults.raw_index_live_interval_seconds if live else 0.0,
    )
    configure_logging(settings.log_level, settings.log_json)
    mode = f"--no-jobs: {NO_JOBS_HELP}"
    if jobs:
        mode = f"`python -m app.cli serve --workers {args.workers}`: periodic jobs and indexer on"
        mode += "" if live else ", RAW_INDEX_LIVE_INTERVAL_SECONDS=0"
    server = None
    fresh = Freshness()
    try:
        step(f"[{name}] starting the server ({mode}) …")
        server = serve_navi(settings, target.url, args.workers, ADMIN_TOKEN, jobs=jobs)
        step(f"[{name}] setup: {args.clients} users × {args.sessions} sessions …")
        users = await setup(server.base_url, args)
        step(f"[{name}] raw index: {await build_raw_index(target.url, settings)}")
        probe, _ = cpu_probe(server, target.conninfo, fake.pid)
        step(f"[{name}] warm-up {args.warmup:g} s, then {args.seconds:g} s measured")
        try:
            out = await run_load(server, users, args, probe, None)
            if live:  # the same load again, the probe beside it (its requests load the
                # server too: the A/B above runs without them)
                step(f"[{name}] the load again for {args.seconds:g} s, with the probe")
                end = time.perf_counter() + args.warmup + args.seconds
                prober = asyncio.create_task(probe_loop(server.base_url, end, fresh))
                await run_load(server, users, args, probe, None)
                await prober
        finally:
            probe.backends.close()
    finally:
        if server is not None:
            server.stop()
        fake.kill()
        fake.wait()
    print(f"\n== live indexer {name.upper()} ({mode})")
    data = report(out, args)
    data["server"] = server_line(target)
    data["mode"] = mode
    data["freshness"] = dataclasses.asdict(fresh)
    return data


def op(data: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(data["operations"][name])


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    off = await one_run(args, live=False)
    on = await one_run(args, live=True)
    fresh = on["freshness"]["seconds"]
    print(f"\n== freshness: append → found by memory_search from another session ({on['server']})")
    print_table(
        ["probes", "p50", "p95", "max", "not found in 30 s"],
        [
            [
                len(fresh),
                fmt_ms(1000 * percentile(fresh, 50)),
                fmt_ms(1000 * percentile(fresh, 95)),
                fmt_ms(1000 * max(fresh, default=0)),
                on["freshness"]["missed"],
            ]
        ],  # fmt: skip
    )
    rows = []
    for label, data in (("live indexer off", off), ("live indexer on", on)):
        a, m = op(data, "append"), op(data, "memory_search")
        rows.append([
            label, f"{a['req_per_s'] * args.append_size:.1f}", fmt_ms(a["p95_ms"]),
            f"{m['req_per_s']:.1f}", fmt_ms(m["p95_ms"]), f"{data['total']['req_per_s']:.1f}",
        ])  # fmt: skip
    a_on, a_off = op(on, "append"), op(off, "append")
    m_on, m_off = op(on, "memory_search"), op(off, "memory_search")
    rows.append([
        "on / off", f"{a_on['req_per_s'] / max(a_off['req_per_s'], 1e-9):.2f}",
        f"{a_on['p95_ms'] / max(a_off['p95_ms'], 1e-9):.2f}",
        f"{m_on['req_per_s'] / max(m_off['req_per_s'], 1e-9):.2f}",
        f"{m_on['p95_ms'] / max(m_off['p95_ms'], 1e-9):.2f}",
        f"{on['total']['req_per_s'] / max(off['total']['req_per_s'], 1e-9):.2f}",
    ])  # fmt: skip
    print("\n== the same load with and without the live indexer")
    print_table(
        [
            "run",
            "append msgs/s",
            "append p95",
            "memory_search req/s",
            "memory_search p95",
            "all req/s",
        ],  # fmt: skip
        rows,
    )
    return {"off": off, "on": on}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60, help="measured per run")
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("WEB_CONCURRENCY") or min(os.cpu_count() or 1, 64)),
        help="web worker processes (default as `make run`: WEB_CONCURRENCY, else one per core)",
    )
    parser.add_argument("--sessions", type=int, default=4, help="sessions per user")
    parser.add_argument("--facts", type=int, default=10, help="facts per user")
    parser.add_argument("--append-size", type=int, default=2, help="messages per append")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--no-jobs", action="store_true", help=f"the 'off' run: {NO_JOBS_HELP}")
    args = parser.parse_args()
    args.mix = {o: 1.0 for o in OPS}
    args.py_spy = None
    if not 1 <= args.clients <= 256 or not 0 < args.seconds <= 600 or not 1 <= args.workers <= 16:
        parser.error("--clients 1–256, --seconds up to 600, --workers 1–16")
    write_results("freshness.json", asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
