"""Importing a ChatGPT export (`POST /me/import/chats`' work): messages/s and memory.

    .venv/bin/python bench/bench_import.py [--conversations 10000] [--messages 500000]

Generates (once per size, kept in bench/.cache/) a synthetic ChatGPT `conversations.json`
shaped as the published exports are: a `client-created-root` node, a hidden system node,
a branching `mapping` tree (15 % of conversations hold a regenerated answer off the kept
branch), `current_node`, float epoch times, 80–600-character messages of common words
and one rare word per conversation. Then, in process on a fresh database
(`chat_import.import_chats`, the service's own path: streaming read, a batch of
conversations per transaction, the words written to the raw index in it):

1. the import: seconds, messages/s, the process's RSS growth (sampled every 50 ms);
2. the words of the first, a middle and the last conversation found by `memory_search`'s
   unified search (words only) after the import: seconds (goal: within 10 s), and the
   last one's in the raw index's text search;
3. the same file imported again: rows added (sessions, messages and chunks counted in
   the database; must be 0), seconds;
4. the naive way to the same end state on the first `--naive` conversations of the same
   file (a transaction per conversation, one INSERT per message, then the live indexer's
   per-session pass for the words): messages/s, and ours / naive.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import threading
import time
import uuid
from pathlib import Path

import psutil
import psycopg
from _common import CACHE, fresh_database, libpq_url, print_table, server_line, step, write_results

USER = "bench_import"
WORDS = (
    "tea kettle water garden python server window river mountain coffee market letter "
    "engine summer winter project budget travel ticket doctor library music bridge "
    "station camera report painting recipe bicycle harbor meeting schedule invoice"
).split()
T0 = 1_600_000_000.0


def _text(rng: random.Random) -> str:
    n = rng.randint(12, 90)
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _node(nid: str, parent: str | None, role: str | None, text: str, t: float) -> dict:
    if role is None:
        return {"id": nid, "message": None, "parent": parent, "children": []}
    return {
        "id": nid,
        "parent": parent,
        "children": [],
        "message": {
            "id": nid,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": t if role != "system" else None,
            "content": {"content_type": "text", "parts": [text]},
            "status": "finished_successfully",
            "weight": 0.0 if role == "system" else 1.0,
            "recipient": "all",
            "metadata": {"is_visually_hidden_from_conversation": role == "system"},
        },
    }


def conversation(i: int, per: int, rng: random.Random) -> dict:
    cid = f"conv-{i:07d}"
    t = T0 + i * 3600.0
    nodes = [
        _node("client-created-root", None, None, "", t),
        _node(f"{cid}-s", "client-created-root", "system", "", t),
    ]
    parent = f"{cid}-s"
    for k in range(per):
        role = ("user", "assistant")[k % 2]
        text = _text(rng)
        if k == per - 1:
            text += f" rareword{i:07d}"
        if role == "assistant" and k == 1 and rng.random() < 0.15:  # a regenerated answer
            nodes.append(_node(f"{cid}-x{k}", parent, role, "an abandoned answer", t + k))
        nid = f"{cid}-{k}"
        nodes.append(_node(nid, parent, role, text, t + k))
        parent = nid
    return {
        "id": cid,
        "conversation_id": cid,
        "title": f"Conversation {i}",
        "create_time": t,
        "update_time": t + per,
        "current_node": parent,
        "mapping": {n["id"]: n for n in nodes},
        "default_model_slug": "gpt-4o",
        "is_archived": False,
    }


def generate(conversations: int, messages: int) -> Path:
    path = CACHE / f"chatgpt_export_{conversations}_{messages}.json"
    if path.exists():
        step(f"export kept: {path} ({path.stat().st_size / 1e6:.0f} MB)")
        return path
    step(f"generating {conversations} conversations, {messages} messages")
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(47)
    per = max(1, messages // conversations)
    tmp = path.with_suffix(".part")
    with open(tmp, "w") as f:
        f.write("[")
        for i in range(conversations):
            if i:
                f.write(",")
            f.write(json.dumps(conversation(i, per, rng), separators=(",", ":")))
        f.write("]")
    tmp.rename(path)
    step(f"export written: {path.stat().st_size / 1e6:.0f} MB")
    return path


class RssSampler:
    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.peak = self.proc.memory_info().rss
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> RssSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


async def _rows(factory: object) -> int:
    """The rows an import writes: sessions, messages, raw chunks (a re-import adds 0)."""
    from _app import transaction
    from sqlalchemy import text

    async with transaction(factory) as db:  # type: ignore[arg-type]
        return int(
            (
                await db.execute(
                    text(
                        "SELECT (SELECT count(*) FROM sessions WHERE user_id = :u)"
                        " + (SELECT count(*) FROM session_messages WHERE user_id = :u)"
                        " + (SELECT count(*) FROM memory_chunks WHERE user_id = :u)"
                    ),
                    {"u": USER},
                )
            ).scalar_one()
        )


async def _found_by_memory_search(factory: object, settings: object, conversations: int) -> float:
    """Seconds from the import's end until `memory_search` (the unified search of
    `POST /memory/search`, words only: no embedder) finds the rare word of the first,
    a middle and the last conversation; -1 when not within 10 s."""
    from _app import transaction, unified_search

    started = time.perf_counter()
    words = [f"rareword{i:07d}" for i in sorted({0, conversations // 2, conversations - 1})]
    while time.perf_counter() - started < 10:
        found = 0
        for word in words:
            async with transaction(factory) as db:  # type: ignore[arg-type]
                res = await unified_search(db, None, settings).search(  # type: ignore[arg-type]
                    word, user_id=USER, scope="all", k=5
                )
            found += any(word in h.text for h in res.hits)
        if found == len(words):
            return time.perf_counter() - started
        await asyncio.sleep(0.5)
    return -1.0


def _cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.Error:  # a backend that ended: its time is lost (autovacuum's, say)
            continue
        total += t.user + t.system
    return total


async def _postmaster(factory: object) -> psutil.Process | None:
    """The server's postmaster (the parent of this bench's backend), when it runs here."""
    from _app import transaction
    from sqlalchemy import text

    async with transaction(factory) as db:  # type: ignore[arg-type]
        pid = int((await db.execute(text("SELECT pg_backend_pid()"))).scalar_one())
    try:
        return psutil.Process(pid).parent()
    except psutil.Error:
        return None


async def ours(url: str, path: Path, conversations: int) -> dict[str, float]:
    from _app import ExportReader, Settings, create_engine, import_chats, session_factory

    settings = Settings(embedding_provider="none", log_level="warning")
    engine = create_engine(url, settings)
    factory = session_factory(engine)
    out: dict[str, float] = {}
    try:
        for label in ("first", "again"):
            gc.collect()
            before = psutil.Process().memory_info().rss
            postmaster = await _postmaster(factory)
            server = postmaster.children() if postmaster else []
            me = psutil.Process()
            cpu_before = (_cpu_seconds([me]), _cpu_seconds(server))
            with open(path, "rb") as f, RssSampler() as rss:  # noqa: ASYNC230 (a bench)
                started = time.perf_counter()
                reader = ExportReader(f, None, 1 << 24)
                report = await import_chats(factory, settings, USER, reader)
                seconds = time.perf_counter() - started
            server = postmaster.children() if postmaster else []  # the pool's backends now
            out[f"{label}_cpu_python"] = _cpu_seconds([me]) - cpu_before[0]
            out[f"{label}_cpu_postgres"] = _cpu_seconds(server) - cpu_before[1]
            out[f"{label}_seconds"] = seconds
            out[f"{label}_messages"] = report.messages.imported
            out[f"{label}_growth_mb"] = (rss.peak - before) / 1e6
            out[f"{label}_unchanged"] = report.conversations.unchanged
            out[f"{label}_rows"] = await _rows(factory)
            step(f"import ({label}): {report.messages.imported} messages in {seconds:.1f} s")
            if label == "first":
                out["findable_seconds"] = await _found_by_memory_search(
                    factory, settings, conversations
                )
    finally:
        await engine.dispose()
    return out


def findable(conninfo: str, conversations: int) -> bool:
    """The last conversation's rare word in the raw index (its words' text search)."""
    word = f"rareword{conversations - 1:07d}"
    with psycopg.connect(conninfo) as c:
        row = c.execute(
            "SELECT count(*) FROM memory_chunks WHERE user_id = %s"
            " AND to_tsvector('simple', content) @@ plainto_tsquery('simple', %s)",
            (USER, word),
        ).fetchone()
    return bool(row and row[0])


async def naive(url: str, path: Path, limit: int) -> tuple[int, float]:
    """The same end state the straightforward way, on the first `limit` conversations:
    a transaction per conversation, one INSERT per message, then the live indexer's pass
    over the session (`index_live_group` with one session: read back, chunk, insert)."""
    import ijson
    from _app import (
        Settings,
        create_engine,
        index_live_group,
        parse_chatgpt,
        session_factory,
        transaction,
    )
    from sqlalchemy import text

    engine = create_engine(url, Settings(log_level="warning"))
    factory = session_factory(engine)
    n = 0
    try:
        async with transaction(factory) as db:
            await db.execute(text("INSERT INTO navi_users (id, name) VALUES ('naive', 'naive')"))
        with open(path, "rb") as f:  # noqa: ASYNC230 (a bench)
            started = time.perf_counter()
            for i, raw in enumerate(ijson.items(f, "item", use_float=True)):
                if i >= limit:
                    break
                conv = parse_chatgpt(raw)
                sid = uuid.uuid4()
                async with transaction(factory) as db:
                    await db.execute(
                        text(
                            "INSERT INTO sessions (id, user_id, profile_id, name, next_seq)"
                            " VALUES (:sid, 'naive', 'default', :name, :n)"
                        ),
                        {"sid": sid, "name": conv.title, "n": len(conv.messages)},
                    )
                    for seq, m in enumerate(conv.messages):
                        await db.execute(
                            text(
                                "INSERT INTO session_messages (session_id, user_id,"
                                " sequence_number, display_index, role, content, created_at)"
                                " VALUES (:sid, 'naive', :seq, :seq, :role, :content, :at)"
                            ),
                            {"sid": sid, "seq": seq, "role": m.role, "content": m.content,
                             "at": m.created_at},
                        )  # fmt: skip
                        n += 1
                    has_row = False
                    while done := await index_live_group(db, {("naive", sid): has_row}, "naive"):
                        has_row = True
                        if done[("naive", sid)].done:
                            break
            return n, time.perf_counter() - started
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--naive", type=int, default=500, help="conversations the naive way takes")
    args = parser.parse_args()
    path = generate(args.conversations, args.messages)
    target = fresh_database("navi_bench_import")
    conninfo = libpq_url(target.url)
    with psycopg.connect(conninfo, autocommit=True) as c:
        c.execute("INSERT INTO navi_users (id, name) VALUES (%s, %s)", (USER, USER))
    r = asyncio.run(ours(target.url, path, args.conversations))
    found = findable(conninfo, args.conversations)
    with psycopg.connect(conninfo) as c:
        rows = c.execute(
            "SELECT count(*) FROM session_messages WHERE user_id = %s", (USER,)
        ).fetchone()
    naive_n, naive_s = asyncio.run(naive(target.url, path, args.naive))
    rate = r["first_messages"] / r["first_seconds"]
    naive_rate = naive_n / naive_s
    print(server_line(target))
    print_table(
        ["import", "messages", "s", "messages/s", "RSS growth MB", "rows added"],
        [
            ["first", int(r["first_messages"]), f"{r['first_seconds']:.1f}", f"{rate:.0f}",
             f"{r['first_growth_mb']:.0f}", int(r["first_messages"])],
            ["again (same file)", int(r["again_messages"]), f"{r['again_seconds']:.1f}",
             "-", f"{r['again_growth_mb']:.0f}", int(r["again_rows"] - r["first_rows"])],
            [f"naive: 1 INSERT/message + live index pass ({args.naive} conv.)", naive_n, f"{naive_s:.1f}",
             f"{naive_rate:.0f}", "-", naive_n],
        ],
        title=f"ChatGPT export import, {args.conversations} conversations ({target.label})",
    )  # fmt: skip
    print(f"ours / naive (messages/s): {rate / naive_rate:.1f}x")
    print(f"messages stored: {rows[0] if rows else 0}; last conversation's rare word "
          f"findable at the end of the import: {'yes' if found else 'NO'}")  # fmt: skip
    py, pg = r["first_cpu_python"], r["first_cpu_postgres"]
    if pg > 0:  # the CPU the first import cost, whatever else ran on the machine
        bound = r["first_messages"] / max(py, pg, (py + pg) / 2)
        print(
            f"CPU of the first import: this process {py:.0f} s (Python: one core at most),"
            f" PostgreSQL {pg:.0f} s (its backends; a backend that ended is not counted);"
            f" on 2 otherwise idle cores that is at most {bound:.0f} messages/s"
        )
    seconds = r["findable_seconds"]
    print(
        "memory_search finds the first, a middle and the last conversation's rare word "
        + (f"{seconds:.2f} s after the import" if seconds >= 0 else "NOT within 10 s")
    )
    print(
        f"rows (sessions + messages + chunks) after the first import {int(r['first_rows'])},"
        f" after the second {int(r['again_rows'])}: added {int(r['again_rows'] - r['first_rows'])}"
    )
    write_results("bench_import.json", {**r, "naive_rate": naive_rate, "findable": found})


if __name__ == "__main__":
    main()
