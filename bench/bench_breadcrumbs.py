"""Literals of an agent session after compression: does `memory_search` top-5 show them?

    make bench-breadcrumbs                          # embedded PostgreSQL, local MiniLM
    .venv/bin/python bench/bench_breadcrumbs.py --episodes 60 --embedder fake

A synthetic ops session (seeded, deterministic): `--episodes` small tasks, each about one
service with a unique name, each leaving one literal behind — a port, a path, a command,
a size, a ticket, an amount, an environment variable or a URL — said by the assistant
and echoed by a tool result, between distractors (log lines, listings, other numbers).
The session is replayed through the HTTP API as an agent runtime would (prepare with the
incoming message, then append the turn with `usage`), with a 4,096-token window, so it is
compressed many times (the fake summarizer answers `KEYS: NONE`: the breadcrumbs are
the deterministic extractor's only); a final `/compact` leaves everything in raw chunks.

Then, per literal, the question an agent would ask later — naming the service and what
was done, never the literal — goes to `POST /memory/search` (scope `raw`, k 5). Found =
the literal is in the response `text`. Reported: the share found, per kind, with the
best window on and off.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from _embedder import select_embedder  # noqa: E402

select_embedder(sys.argv[1:])  # before any app import

import psycopg  # noqa: E402
from _agent import agent_api, compressions, ok, prepare  # noqa: E402
from _common import fresh_database, print_table, write_results  # noqa: E402

DB_NAME = "navi_bench_breadcrumbs"
WINDOW = 4096
T0 = datetime(2026, 10, 1, 9, 0)

PREFIXES = """billing ledger search auth mailer invoice payroll catalog inventory checkout
report metrics gateway scheduler importer exporter thumbnail webhook notifier archive
geocoder pricing tracking booking loyalty onboarding audit compliance forecast routing
""".split()
SUFFIXES = ["api", "worker", "cron", "proxy", "db", "cache", "queue", "ui"]
FILES = ["config.yaml", "settings.toml", "app.conf", ".env", "docker-compose.yml", "nginx.conf"]
DIRS = ["/etc", "/opt", "/srv", "/var/lib", "~/projects", "/home/deploy"]
COMMANDS = [
    "systemctl reload {svc}",
    "docker compose -f /srv/{svc}/compose.yml up -d --no-deps {svc}",
    "kubectl rollout restart deployment/{svc} -n prod",
    "supervisorctl restart {svc}:*",
    "make -C /opt/{svc} deploy TARGET=blue",
]
NOISE = [
    "Tool output was long; the relevant part is above.",
    "Also, the coffee machine on floor 3 is broken again.",
    "CPU load is normal, nothing else to report.",
    "Let me know if you want the full log.",
]


@dataclasses.dataclass(frozen=True)
class Episode:
    kind: str
    service: str
    literal: str
    messages: list[dict[str, Any]]
    question: str


def _distractor_lines(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        pid = rng.randint(1000, 65000)
        out.append(
            f"{rng.choice(PREFIXES)}-{rng.choice(SUFFIXES)}  pid={pid}  "
            f"mem={rng.randint(20, 900)}MB  up {rng.randint(1, 40)}d"
        )
    return "\n".join(out)


def make_episode(rng: random.Random, kind: str, svc: str) -> Episode:
    u = "user"
    a = "assistant"
    noise = _distractor_lines(rng, rng.randint(2, 6))
    if kind == "port":
        lit = str(rng.randint(3000, 9999))
        msgs = [
            (u, f"Move {svc} to another port, 8080 clashes with the reverse proxy."),
            ("tool", f"$ ss -ltnp\n{noise}\n{svc} LISTEN 0.0.0.0:{lit}", "shell"),
            (a, f"Done: {svc} now listens on port {lit}; I updated its unit file."),
        ]
        q = f"which port is {svc} listening on now after we moved it?"
    elif kind == "path":
        lit = f"{rng.choice(DIRS)}/{svc}/{rng.choice(FILES)}"
        msgs = [
            (u, f"Where is the configuration file of {svc}? I need to change the timeout."),
            ("tool", f"$ locate {svc}\n{noise}\n{lit}", "shell"),
            (a, f"The {svc} configuration is at `{lit}`; the timeout key is near the top."),
        ]
        q = f"where does the {svc} configuration file live?"
    elif kind == "command":
        lit = rng.choice(COMMANDS).format(svc=svc)
        msgs = [
            (u, f"How do I restart {svc} without downtime?"),
            (a, f"Run `{lit}` — it replaces the workers one at a time."),
            ("tool", f"$ {lit}\n{noise}\nok", "shell"),
        ]
        q = f"what command restarts {svc} without downtime?"
    elif kind == "size":
        lit = f"{rng.randint(2, 900)},{rng.randint(1, 9)} GB"
        msgs = [
            (u, f"How much disk do the {svc} backups take?"),
            ("tool", f"$ du -sh /backups/{svc}\n{lit}\t/backups/{svc}\n{noise}", "shell"),
            (a, f"The {svc} backups take {lit} in total."),
        ]
        q = f"how big are the {svc} backups on disk?"
    elif kind == "ticket":
        lit = f"#{rng.randint(1000, 99999)}"
        msgs = [
            (u, f"Open a ticket for the {svc} timeout bug, assign it to ops."),
            ("tool", f"created issue {lit}: {svc} times out under load", "tracker"),
            (a, f"Filed as {lit} and assigned to ops."),
        ]
        q = f"which ticket tracks the {svc} timeout bug?"
    elif kind == "amount":
        lit = f"${rng.randint(100, 9999)}.{rng.randint(10, 99)}"
        msgs = [
            (u, f"What did hosting for {svc} cost last month?"),
            (
                "tool",
                f"invoice INV-{rng.randint(1000, 9999)}\n{noise}\n{svc} hosting: {lit}",
                "billing",
            ),
            (a, f"Hosting for {svc} cost {lit} last month."),
        ]
        q = f"how much was the {svc} hosting bill last month?"
    elif kind == "env":
        name = (
            f"{svc.upper().replace('-', '_')}_{rng.choice(['POOL_SIZE', 'MAX_CONN', 'TIMEOUT_MS'])}"
        )
        lit = f"{name}={rng.randint(2, 500)}"
        msgs = [
            (u, f"{svc} runs out of connections at peak; can you tune it?"),
            (a, f"I set `{lit}` in its environment and restarted it."),
            ("tool", f"$ env | grep {name}\n{lit}", "shell"),
        ]
        q = f"which environment setting did we change to tune the {svc} connections?"
    else:  # url
        lit = f"https://grafana.internal.example.com/d/{rng.randint(10000, 99999)}/{svc}"
        msgs = [
            (u, f"Is there a dashboard for {svc} latency?"),
            (a, f"Yes: {lit} — panels for p50/p95 and errors."),
            ("tool", f"GET {lit} 200\n{noise}", "http"),
        ]
        q = f"what is the link to the {svc} latency dashboard?"
    out = []
    for item in msgs:
        role, content = item[0], item[1]
        m: dict[str, Any] = {"role": role, "content": content}
        if role == "tool":
            m["name"] = item[2]
        out.append(m)
    if rng.random() < 0.5:
        out.append({"role": "assistant", "content": rng.choice(NOISE)})
    return Episode(kind, svc, lit, out, q)


KINDS = ("port", "path", "command", "size", "ticket", "amount", "env", "url")


def make_session(n: int, seed: int = 11) -> list[Episode]:
    rng = random.Random(seed)
    names = [f"{p}-{s}" for p in PREFIXES for s in SUFFIXES]
    rng.shuffle(names)
    if n > len(names):
        raise SystemExit(f"at most {len(names)} episodes")
    return [make_episode(rng, KINDS[i % len(KINDS)], names[i]) for i in range(n)]


# ------------------------------------------------------------------ replay
async def replay(client: Any, episodes: list[Episode]) -> tuple[str, int]:
    body = ok(await client.post("/sessions", json={"profile_id": "bench-bc"}), "session", 201)
    sid = str(body["id"])
    compressed = 0
    minute = 0
    closing = [
        {"role": "user", "content": "Thanks, that is all for today."},
        {"role": "assistant", "content": "You're welcome."},
    ] * 6
    turns: list[list[dict[str, Any]]] = [e.messages for e in episodes] + [closing]
    for msgs in turns:
        stamped = []
        for m in msgs:
            stamped.append({**m, "created_at": (T0 + timedelta(minutes=minute)).isoformat() + "Z"})
            minute += 1
        r, _ = await prepare(
            client, sid, {"message": {"role": "user", "content": msgs[0]["content"]}}
        )
        body = ok(r, "prepare")
        compressed += compressions(body)
        usage = {"model": "fake-chat:latest", "prompt_eval_count": int(body["tokens"])}
        r = await client.post(
            f"/sessions/{sid}/messages", json={"messages": stamped, "usage": usage}
        )
        compressed += compressions(ok(r, "append", 201))
    ok(await client.post(f"/sessions/{sid}/compact", json={}), "compact")
    return sid, compressed + 1


async def run(args: argparse.Namespace) -> None:
    episodes = make_session(args.episodes)
    target = fresh_database(DB_NAME, suffix=f"_{args.embedder}")
    profiles = {"bench-bc": {"context_window": WINDOW}}
    found: dict[bool, dict[str, list[bool]]] = {True: defaultdict(list), False: defaultdict(list)}
    misses: list[dict[str, Any]] = []
    async with agent_api(target, profiles, args.embedder) as api:
        client = api.client
        t0 = time.perf_counter()
        _, n_compressions = await replay(client, episodes)
        ingest = time.perf_counter() - t0
        with psycopg.connect(target.conninfo) as c:
            n_chunks = c.execute("SELECT count(*) FROM memory_chunks").fetchone()[0]  # type: ignore[index]
        for ep in episodes:
            for window in (True, False):
                r = await client.post(
                    "/memory/search",
                    json={"query": ep.question, "scope": "raw", "k": 5, "best_window": window},
                )
                text = ok(r, "search")["text"]
                found_it = ep.literal in text
                found[window][ep.kind].append(found_it)
                if window and not found_it:
                    misses.append({"question": ep.question, "literal": ep.literal, "text": text})
    n_msgs = sum(len(e.messages) for e in episodes)
    print(
        f"\nsynthetic ops session: {len(episodes)} episodes, {n_msgs} messages, window "
        f"{WINDOW:,} tokens; {n_compressions} compressions → {n_chunks} raw chunks; "
        f"ingest {ingest:.1f} s; embedder {args.embedder}"
    )
    rows = []
    for kind in KINDS:
        on, off = found[True][kind], found[False][kind]
        if on:
            rows.append([kind, len(on), _share(on), _share(off)])
    all_on = [x for v in found[True].values() for x in v]
    all_off = [x for v in found[False].values() for x in v]
    rows.append(["all", len(all_on), _share(all_on), _share(all_off)])
    print_table(["literal", "n", "found, best window ON", "OFF"], rows)
    write_results("breadcrumbs-misses.json", misses, label="misses")


def _share(found: list[bool]) -> str:
    return f"{100 * sum(found) / len(found):.1f}%"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=160, help="literals in the session")
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
    args = parser.parse_args(argv)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
