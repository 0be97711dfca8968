"""The checker of `make soak` (bench/soak.py): once the workload stopped and the faults
were lifted, what the database holds (read directly with psycopg) and what the API
answers, against the ledger of what the clients were acknowledged (bench/_soak_load.py).
Each check returns its violations (strings); none is a pass."""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter, defaultdict
from typing import Any

import httpx
import psycopg
from _soak_load import CATEGORY, MARKER, Ledger

_MESSAGES = """
SELECT session_id::text, sequence_number, role, content FROM session_messages
 WHERE user_id = ANY(%(users)s)
UNION ALL
SELECT session_id::text, sequence_number, role, content FROM session_messages_archive
 WHERE user_id = ANY(%(users)s)
"""
_NOT_COVERED = """
SELECT s.id::text, s.next_seq, r.covered::text FROM sessions s
  LEFT JOIN raw_index_state r ON r.session_id = s.id AND r.user_id = s.user_id
 WHERE s.user_id = ANY(%(users)s) AND s.next_seq > 0
   AND (r.covered IS NULL OR NOT r.covered @> int8range(0, s.next_seq))
"""


def converge(conninfo: str, users: list[str], timeout: float) -> tuple[float, list[str]]:
    """Wait (at most `timeout` s) until no forget job runs and the raw index covers every
    session up to its `next_seq`: (seconds waited, what was still behind)."""
    started = time.monotonic()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while True:
            behind = [
                f"session {sid}: covered {covered} of next_seq {n}"
                for sid, n, covered in conn.execute(_NOT_COVERED, {"users": users})
            ]
            row = conn.execute(
                "SELECT count(*) FROM forget_jobs WHERE state = 'running' AND user_id = ANY(%s)",
                (users,),
            ).fetchone()
            if row and row[0]:
                behind.append(f"{row[0]} forget job(s) still running")
            waited = time.monotonic() - started
            if not behind or waited > timeout:
                return waited, behind
            time.sleep(0.5)


def check_messages(conn: psycopg.Connection[Any], ledger: Ledger, users: list[str]) -> list[str]:
    """Every acknowledged message stored exactly once (hot and archive together), an
    unknown one at most once; per session the sequence numbers 0..next_seq-1, each once."""
    out: list[str] = []
    seqs: dict[str, list[int]] = defaultdict(list)
    found: Counter[str] = Counter()
    for sid, seq, role, content in conn.execute(_MESSAGES, {"users": users}):
        seqs[sid].append(int(seq))
        m = MARKER.match(content or "")
        if m and role == ("assistant" if m.group(1) else role):
            found[(m.group(1) or "") + m.group(2)] += 1
    for sid, next_seq in conn.execute(
        "SELECT id::text, next_seq FROM sessions WHERE user_id = ANY(%s)", (users,)
    ):
        have = Counter(seqs.get(sid, []))
        dup = sorted(s for s, n in have.items() if n > 1)
        gaps = sorted(set(range(int(next_seq))) - set(have))
        past = sorted(s for s in have if s >= next_seq)
        if dup or gaps or past:
            out.append(f"session {sid}: seq duplicated {dup[:5]}, missing {gaps[:5]}, past next_seq {past[:5]}")  # fmt: skip
    for mk, acked in ledger.messages.items():
        n = found.get(mk, 0)
        if (acked and n != 1) or n > 1:
            out.append(f"message {mk} ({'acknowledged' if acked else 'unknown'}) stored {n} times")
    return out


def check_facts(conn: psycopg.Connection[Any], ledger: Ledger) -> list[str]:
    """Acknowledged saves there (one live row with the value saved), acknowledged deletes
    and forgotten facts absent, unknown ones at most once."""
    out: list[str] = []
    rows: dict[tuple[str, str], list[tuple[str, Any]]] = defaultdict(list)
    for user, key, value, merged in conn.execute(
        "SELECT user_id, key, value, merged_into FROM memory_facts WHERE category = %s",
        (CATEGORY,),
    ):
        rows[(user, key)].append((value, merged))
    for uk, state in ledger.facts.items():
        have = rows.get(uk, [])
        if state == "saved":
            if len(have) != 1 or have[0][0] != ledger.fact_values[uk] or have[0][1] is not None:
                out.append(f"fact {uk[1]} of {uk[0]}: saved (2xx), stored as {have}")
        elif state in ("deleted", "forgotten") and have:
            out.append(f"fact {uk[1]} of {uk[0]}: {state} (2xx), still stored: {have}")
        elif len(have) > 1:
            out.append(f"fact {uk[1]} of {uk[0]}: {state}, stored {len(have)} times")
    return out


def check_forgotten(conn: psycopg.Connection[Any], ledger: Ledger) -> list[str]:
    """A forgotten text in no row of any table (each row read as text: every column, so
    messages, archive, chunks and breadcrumbs, facts, summaries, names, scratchpads,
    planning logs, error memory, job notes alike)."""
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
    ]
    out: list[str] = []
    for user, text in ledger.forgotten:
        for table in tables:
            row = conn.execute(
                f'SELECT count(*) FROM "{table}" x WHERE strpos(lower(x::text), %s) > 0',
                (text.lower(),),
            ).fetchone()
            if row and row[0]:
                out.append(f"forgotten {text} of {user}: {row[0]} row(s) of {table}")
                if table == "memory_chunks":
                    out += _where_in_chunks(conn, text)
    return out


def _where_in_chunks(conn: psycopg.Connection[Any], text: str) -> list[str]:
    """Which chunk holds it, in its text or its breadcrumbs, and what its messages now
    say: where a resurrection came from."""
    out = []
    for cid, sid, start, end, in_text, crumbs, stale in conn.execute(
        "SELECT id, session_id, start_seq, end_seq, strpos(lower(content), %s) > 0,"
        " breadcrumbs, vectors_stale FROM memory_chunks c"
        " WHERE strpos(lower(c::text), %s) > 0",
        (text.lower(), text.lower()),
    ):
        said = conn.execute(
            "SELECT sequence_number, strpos(lower(content), %s) > 0 FROM session_messages"
            " WHERE session_id = %s AND sequence_number BETWEEN %s AND %s"
            " UNION ALL SELECT sequence_number, strpos(lower(content), %s) > 0"
            " FROM session_messages_archive WHERE session_id = %s"
            " AND sequence_number BETWEEN %s AND %s ORDER BY 1",
            (text.lower(), sid, start, end, text.lower(), sid, start, end),
        ).fetchall()
        out.append(
            f"  chunk {cid} of session {sid}, turns {start}-{end}: in its text {in_text},"
            f" breadcrumbs {crumbs}, vectors stale {stale}; messages holding it now:"
            f" {[n for n, has in said if has]} of {len(said)}"
        )
    return out


def check_raw_index(conn: psycopg.Connection[Any], users: list[str]) -> list[str]:
    """No sequence number in two chunks of a session, and every message the clients
    wrote (its marker first) in exactly one."""
    ranges: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for sid, start, end in conn.execute(
        "SELECT session_id::text, start_seq, end_seq FROM memory_chunks WHERE user_id = ANY(%s)",
        (users,),
    ):
        ranges[sid].append((int(start), int(end)))
    out: list[str] = []
    for sid, spans in ranges.items():
        spans.sort()
        for (a0, a1), (b0, b1) in zip(spans, spans[1:], strict=False):
            if b0 <= a1:
                out.append(f"session {sid}: chunks [{a0}, {a1}] and [{b0}, {b1}] overlap")
    for sid, seq, _role, content in conn.execute(_MESSAGES, {"users": users}):
        if MARKER.match(content or ""):
            n = sum(a <= seq <= b for a, b in ranges.get(sid, []))
            if n != 1:
                out.append(f"session {sid}: message {seq} in {n} chunks")
    return out


def check_api(base_url: str, tokens: dict[str, str], ledger: Ledger, users: list[str]) -> list[str]:
    """Through the API: each session's display history holds each acknowledged message
    once; the facts list holds the saved facts; memory_search and the facts list find no
    forgotten text."""
    out: list[str] = []
    by_session: dict[str, list[str]] = defaultdict(list)
    for mk, acked in ledger.messages.items():
        if acked:
            by_session[ledger.message_session[mk]].append(mk)
    owner = {}
    for user in users:
        with httpx.Client(base_url=base_url, headers={"authorization": f"Bearer {tokens[user]}"}, timeout=60) as c:  # fmt: skip
            sessions = c.get("/sessions", params={"limit": 200}).json()["items"]
            for s in sessions:
                owner[s["id"]] = user
                seen: Counter[str] = Counter()
                before: int | None = None
                while True:
                    params: dict[str, Any] = {"limit": 200}
                    if before is not None:
                        params["before_seq"] = before
                    page = c.get(f"/sessions/{s['id']}/messages", params=params).json()
                    for msg in page["messages"]:
                        m = MARKER.match(msg.get("content") or "")
                        if m:
                            seen[(m.group(1) or "") + m.group(2)] += 1
                    if not page["has_more"] or page["next_before_seq"] is None:
                        break
                    before = int(page["next_before_seq"])
                for mk in by_session.get(s["id"], []):
                    if seen.get(mk) != 1:
                        out.append(f"API: session {s['id']} shows {mk} {seen.get(mk, 0)} times")
            listed = set()
            offset = 0
            while True:
                page = c.get("/memory/facts", params={"category": CATEGORY, "limit": 200, "offset": offset}).json()  # fmt: skip
                listed |= {f["key"] for f in page["items"]}
                if not page["has_more"]:
                    break
                offset += 200
            for (u, key), state in ledger.facts.items():
                if u == user and state == "saved" and key not in listed:
                    out.append(f"API: saved fact {key} of {user} not listed")
                if u == user and state in ("deleted", "forgotten") and key in listed:
                    out.append(f"API: {state} fact {key} of {user} still listed")
            for u, text in ledger.forgotten:
                if u != user:
                    continue
                r = c.post("/memory/search", json={"query": text, "k": 20})
                hits = json.dumps(r.json().get("hits", [])).lower() + str(r.json().get("text", "")).lower().replace(f'"{text}"', "")  # fmt: skip
                if text.lower() in hits:
                    out.append(f"API: memory_search finds forgotten {text} of {user}")
                if c.get("/memory/facts", params={"search": text}).json()["total"]:
                    out.append(f"API: the facts list finds forgotten {text} of {user}")
    return out


def check_files(base_url: str, tokens: dict[str, str], ledger: Ledger) -> list[str]:
    """Through the API: every acknowledged upload is listed in its session and downloads
    with the bytes sent (their sha256)."""
    out: list[str] = []
    by_session: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for (user, sid, name), digest in ledger.uploads.items():
        by_session[(user, sid)][name] = digest
    for (user, sid), files in sorted(by_session.items()):
        with httpx.Client(base_url=base_url, headers={"authorization": f"Bearer {tokens[user]}"}, timeout=60) as c:  # fmt: skip
            listed: set[str] = set()
            offset = 0
            while True:
                page = c.get(f"/sessions/{sid}/files", params={"limit": 200, "offset": offset}).json()  # fmt: skip
                listed |= {f["name"] for f in page["items"]}
                if not page["has_more"]:
                    break
                offset += 200
            for name, digest in sorted(files.items()):
                if name not in listed:
                    out.append(f"API: uploaded file {name} of session {sid} not listed")
                    continue
                r = c.get(f"/sessions/{sid}/files/{name}")
                if r.status_code != 200 or hashlib.sha256(r.content).hexdigest() != digest:
                    out.append(f"API: uploaded file {name} of session {sid}: {r.status_code}, other bytes")  # fmt: skip
    return out
