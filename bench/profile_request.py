"""The app's CPU per request, by function (issue 22): cProfile over N requests in process.

    .venv/bin/python bench/profile_request.py --op append --requests 2000
    .venv/bin/python bench/profile_request.py --op list --top 30
    .venv/bin/python bench/profile_request.py --op memory_search --requests 300

The app (create_app, auth on, no background jobs) on a fresh `navi_bench_profile`
database, driven in this process and thread through httpx's ASGITransport (no socket,
no server), one request at a time, by one user with a token; the profile's clock is
`time.process_time`, so what the machine's other jobs take does not count. The app's
share is the time under `Litestar.__call__` (the client's own work is left out);
printed: the app's CPU ms per request and the top functions by inclusive and by self
time, as shares of it. For memory_search the user has bench-load's data (sessions of 24
messages, their raw index, 10 facts) and the fake Ollama runs in a process of its own
(its CPU is not the app's).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import random
import time
from typing import Any

import httpx
from _agent import ADMIN_TOKEN, agent_settings, ok
from _app import FakeOllama, create_app, create_engine, get_settings
from _common import fake_ollama_process, fresh_database
from bench_load import SETUP_MESSAGES, TOPICS, build_raw_index, sentence


async def run(args: argparse.Namespace) -> None:
    target = fresh_database("navi_bench_profile")
    if args.op == "memory_search":  # out of process: its vectors' CPU is not the app's
        proc, fake_url = fake_ollama_process(get_settings().vector_dim)
        stop_fake = proc.kill
    else:
        fake = FakeOllama(dim=get_settings().vector_dim)
        fake.start()
        fake_url, stop_fake = fake.url, fake.stop
    settings = agent_settings(fake_url, {}, "ollama")
    engine = create_engine(target.url, settings)
    app = create_app(settings, engine=engine, background_jobs=False)
    rng = random.Random(1)
    try:
        async with app.lifespan():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
                user = ok(await c.post("/admin/users", json={"name": "p"}, headers=admin), "u", 201)
                r = await c.post(
                    f"/admin/users/{user['id']}/tokens", json={"name": "p"}, headers=admin
                )
                headers = {"Authorization": f"Bearer {ok(r, 't', 201)['token']}"}
                sids = []
                for j in range(5):
                    body = {"profile_id": "default", "name": f"s{j}"}
                    sids.append(
                        ok(await c.post("/sessions", json=body, headers=headers), "s", 201)["id"]
                    )
                if args.op == "memory_search":
                    await seed_memory(c, headers, sids, rng)
                    await build_raw_index(target.url, settings)

                async def one() -> None:
                    if args.op == "append":
                        role = rng.choice(("user", "assistant"))
                        body = {"messages": [{"role": role, "content": "the deploy was slow " * 9}]}
                        r = await c.post(
                            f"/sessions/{rng.choice(sids)}/messages", json=body, headers=headers
                        )
                        assert r.status_code == 201, r.text
                    elif args.op == "list":
                        r = await c.get("/sessions", headers=headers)
                        assert r.status_code == 200, r.text
                    elif args.op == "memory_search":
                        query = f"what about the {rng.choice(TOPICS)} {rng.choice(TOPICS)}"
                        r = await c.post("/memory/search", json={"query": query}, headers=headers)
                        assert r.status_code == 200, r.text
                    else:
                        r = await c.get(
                            f"/sessions/{rng.choice(sids)}/messages?limit=50", headers=headers
                        )
                        assert r.status_code == 200, r.text

                for _ in range(args.warmup):
                    await one()
                prof = cProfile.Profile(time.process_time)
                if args.no_profile:  # the process's CPU per request only, several rounds
                    rounds = []
                    for _ in range(args.rounds):
                        cpu = time.process_time()
                        for _ in range(args.requests):
                            await one()
                        rounds.append((time.process_time() - cpu) * 1000 / args.requests)
                    print(
                        f"{args.op}: process CPU ms/request " + " ".join(f"{x:.3f}" for x in rounds)
                    )
                    return
                cpu = time.process_time()
                prof.enable()
                for _ in range(args.requests):
                    await one()
                prof.disable()
                total = (time.process_time() - cpu) * 1000 / args.requests
    finally:
        stop_fake()
        await engine.dispose()
    report(prof, args, total)


async def seed_memory(
    c: httpx.AsyncClient, headers: dict[str, str], sids: list[str], rng: random.Random
) -> None:
    """bench-load's data for one user: each session's messages and 10 facts."""
    for sid in sids:
        messages = [
            {"role": "user" if k % 2 == 0 else "assistant", "content": sentence(rng)}
            for k in range(SETUP_MESSAGES)
        ]
        r = await c.post(f"/sessions/{sid}/messages", json={"messages": messages}, headers=headers)
        ok(r, "messages", 201)
    for k in range(10):
        fact = {"category": "project", "key": f"note-{k}", "value": sentence(rng, 12)}
        ok(await c.post("/memory/facts", json=fact, headers=headers), "fact", 201)


def report(prof: cProfile.Profile, args: argparse.Namespace, total: float) -> None:
    stats = pstats.Stats(prof)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    app_ms = 0.0
    for (file, _, name), (_, _, _, ct, _) in raw.items():
        if name == "__call__" and file.endswith("litestar/app.py"):
            app_ms = max(app_ms, ct * 1000 / args.requests)
    print(
        f"{args.op}: {args.requests} requests; process CPU {total:.3f} ms/request, "
        f"of which the app (Litestar.__call__) {app_ms:.3f} ms/request"
    )
    rows = []
    for (file, line, name), (_, nc, tt, ct, _) in raw.items():
        short = "/".join(file.split("/")[-2:])
        rows.append(
            (
                f"{short}:{line}({name})",
                nc / args.requests,
                tt * 1000 / args.requests,
                ct * 1000 / args.requests,
            )
        )
    by_pkg: dict[str, float] = {}
    for (file, _, _), (_, _, tt, _, _) in raw.items():
        by_pkg[package_of(file)] = by_pkg.get(package_of(file), 0.0) + tt * 1000 / args.requests
    print("\nself time by package (ms per request, share of the process's)")
    for pkg, ms in sorted(by_pkg.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {ms:7.3f} {100 * ms / total:5.1f}%  {pkg}")
    for title, key in (("inclusive", 3), ("self", 2)):
        print(f"\ntop {args.top} by {title} time (ms per request, share of the app's)")
        for label, calls, tt, ct in sorted(rows, key=lambda r: -r[key])[: args.top]:
            v = ct if key == 3 else tt
            print(f"  {v:7.3f} {100 * v / app_ms:5.1f}%  calls {calls:6.1f}  {label}")


def package_of(file: str) -> str:
    if "site-packages/" in file:
        return file.split("site-packages/")[1].split("/")[0]
    if "/app/" in file:
        return "app/" + file.split("/app/")[1].split("/")[0]
    if file.startswith("~"):
        return "builtins"
    if "/python3" in file:
        return "stdlib/" + file.split("/")[-1]
    return file.split("/")[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--op", choices=("append", "list", "history", "memory_search"), default="append"
    )
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-profile", action="store_true", help="CPU per request only")
    parser.add_argument("--rounds", type=int, default=3, help="with --no-profile")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
