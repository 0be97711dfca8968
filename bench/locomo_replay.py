"""Replay `memory_search`'s raw ranking and rendering over the last `make bench-locomo` ingest.

    make bench-locomo                      # once: ingests into navi_bench_locomo_local
    .venv/bin/python bench/locomo_replay.py            # k 5
    .venv/bin/python bench/locomo_replay.py --k 10

The offline twin of bench_locomo.py for trying ranking and rendering changes in seconds:
it reads the stored chunks and segment vectors of each LoCoMo user, embeds the
questions with the local model, and runs the pure half of `search_raw` — candidates
(the `TEXT_CANDIDATES` chunks with the highest summed IDF, plus the chunks of the
`VECTOR_CANDIDATES` nearest segments), `ranking.rank_chunks`, `render.format_hits` —
then scores the text with the bench's metric. The one approximation: a chunk contains a
term when `term_pattern` finds it in its text or breadcrumbs (the database asks its text
index); it reproduces the API's figures within 0.001 on the dev split.

Data: LoCoMo (snap-research/LoCoMo, ACL 2024) dev split, CC BY-NC 4.0 — benchmark use only.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import uuid
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

STATE_FILE = Path(__file__).resolve().parent / ".cache" / "locomo-ingest.json"
STATE: dict[str, Any] = json.loads(STATE_FILE.read_text()) if STATE_FILE.exists() else {}
EMBEDDER = STATE.get("params", {}).get("embedder", "local")
if EMBEDDER == "local":  # the ingest's vectors are the local model's: before app imports
    os.environ["EMBEDDING_PROVIDER"] = "local"
    os.environ.pop("EMBEDDING_DIM", None)

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from _app import (  # noqa: E402
    TEXT_CANDIDATES,
    VECTOR_CANDIDATES,
    ChunkMessage,
    LocalEmbedder,
    Segment,
    fake_embedding,
    first_person,
    format_hits,
    idf,
    query_names,
    rank_candidates,
    read_time,
    search_terms,
    term_pattern,
    text_candidates,
    with_days,
)
from _common import libpq_url, server_url, with_database  # noqa: E402
from locomo_data import (  # noqa: E402
    BUDGETS,
    dated_recall,
    evidence_days,
    evidence_recall,
    load,
    sitting_time,
)
from psycopg.rows import namedtuple_row  # noqa: E402

DB = f"navi_bench_locomo_{EMBEDDER}"  # bench_locomo's database of that ingest


class User:
    """One LoCoMo user's raw chunks and segment vectors, as stored."""

    def __init__(self, conn: psycopg.Connection[Any], user_id: str) -> None:
        with conn.cursor(row_factory=namedtuple_row) as cur:
            cur.execute(
                "SELECT id, session_id, content, start_seq, end_seq, started_at, ended_at,"
                " breadcrumbs FROM memory_chunks WHERE user_id = %s",
                (user_id,),
            )
            self.chunks = {r.id: r for r in cur}
        self.segments: dict[uuid.UUID, list[tuple[int, int, np.ndarray]]] = defaultdict(list)
        for cid, a, b, emb in conn.execute(
            "SELECT chunk_id, start_char, end_char, embedding::text FROM memory_chunk_vectors"
            " WHERE user_id = %s",
            (user_id,),
        ):
            self.segments[cid].append((a, b, np.asarray(json.loads(emb), dtype=np.float32)))
        # the messages, for the days of the lines (`ChunkRepository.range_messages`)
        self.messages: dict[tuple[str, int], ChunkMessage] = {}
        for table in ("session_messages", "session_messages_archive"):
            with conn.cursor(row_factory=namedtuple_row) as cur:
                cur.execute(
                    "SELECT session_id, sequence_number, role, content, created_at, name,"
                    f" is_summary, is_compression FROM {table} WHERE user_id = %s",
                    (user_id,),
                )
                for r in cur:
                    self.messages[(str(r.session_id), r.sequence_number)] = ChunkMessage(
                        r.role,
                        r.content or "",
                        r.sequence_number,
                        r.created_at,
                        r.name,
                        r.is_summary,
                        r.is_compression,
                    )

    def search(
        self,
        query: str,
        qv: np.ndarray,
        k: int,
        now: datetime | None = None,
        line_days: bool = True,
    ) -> str:
        """`search_raw`'s steps, with the text index and the segment lookup done here."""
        terms = search_terms(query)
        matches = [
            [
                str(cid)
                for cid, c in self.chunks.items()
                if (p := term_pattern([t])) and p.search(c.content + " " + " ".join(c.breadcrumbs))
            ]
            for t in terms
        ]
        weights = {
            t: idf(len(ids), len(self.chunks)) for t, ids in zip(terms, matches, strict=True) if ids
        }
        top, matched = text_candidates(terms, matches, weights, TEXT_CANDIDATES)
        ids = [uuid.UUID(c) for c in top]
        near = sorted(
            ((cid, float(e @ qv)) for cid, segs in self.segments.items() for _, _, e in segs),
            key=lambda x: -x[1],
        )[:VECTOR_CANDIDATES]
        ids += [c for c in dict.fromkeys(c for c, _ in near) if str(c) not in matched]
        loaded = [
            (
                self.chunks[c],
                [Segment(a, b, float(e @ qv)) for a, b, e in self.segments[c]],
            )
            for c in ids
        ]
        when = read_time(query, now) if now is not None else None
        hits = rank_candidates(
            loaded, weights, k, mine=first_person(query), names=query_names(query), when=when
        )
        if line_days:
            hits = with_days(hits, self.messages)
        return format_hits(query, "raw", hits)


@functools.cache
def _local_embedder() -> LocalEmbedder:
    return LocalEmbedder()


def embed(texts: list[str], user: User) -> list[Any]:
    """The questions' vectors, by the ingest's embedder (the fake's hashed word features
    at the stored vectors' dimension)."""
    if EMBEDDER == "local":
        return list(_local_embedder().encode(texts))
    dim = next((len(e) for segs in user.segments.values() for _, _, e in segs), 768)
    return [fake_embedding(t, dim) for t in texts]


def as_of(conv: Any) -> datetime:
    """A LoCoMo question's time: its conversation's last sitting (its dates are relative
    to the sittings, not to today)."""
    return max(sitting_time(t.date) for t in conv.turns)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument(
        "--conversations", type=int, default=None, help="replay the first N (default: all)"
    )
    parser.add_argument(
        "--no-time", action="store_true", help="the question's time unread (as before issue 44)"
    )
    parser.add_argument(
        "--no-line-days", action="store_true", help="no day marks on the lines (before)"
    )
    parser.add_argument("--variant", default=None, help="a bench/_variants.py variant")
    args = parser.parse_args(argv)
    if args.variant:
        from _variants import applied, parse

        with applied(parse(args.variant)[0]):
            return _replay(args)
    return _replay(args)


def _replay(args: argparse.Namespace) -> None:
    if not STATE:
        sys.exit("no ingest yet: run `make bench-locomo` first")
    users = STATE["users"][: args.conversations]
    server = server_url()
    totals = dict.fromkeys(BUDGETS, 0.0)
    by_cat: dict[int, dict[int, float]] = defaultdict(lambda: dict.fromkeys(BUDGETS, 0.0))
    n_cat: dict[int, int] = defaultdict(int)
    dated: dict[int, dict[int, float]] = defaultdict(lambda: dict.fromkeys(BUDGETS, 0.0))
    with psycopg.connect(libpq_url(with_database(server, DB))) as conn:
        for conv, user in zip(load(), users, strict=False):
            u = User(conn, user["id"])
            vectors = embed([q.question.strip() for q in conv.questions], u)
            now = None if args.no_time else as_of(conv)
            days = evidence_days(conv)
            for q, qv in zip(conv.questions, vectors, strict=True):
                qv_ = np.asarray(qv, dtype=np.float32)
                text = u.search(q.question, qv_, args.k, now, not args.no_line_days)
                n_cat[q.category] += 1
                for b in BUDGETS:
                    v = evidence_recall(text, q.evidence_lines, b)
                    totals[b] += v
                    by_cat[q.category][b] += v
                    dated[q.category][b] += dated_recall(text, q.evidence_lines, days, b)
    n = sum(n_cat.values())
    print(f"k={args.k}: " + ", ".join(f"recall@{b} {totals[b] / n:.3f}" for b in BUDGETS))
    all_dated = {b: sum(d[b] for d in dated.values()) / n for b in BUDGETS}
    print(
        "  dated (the line with its own day): "
        + ", ".join(f"@{b} {all_dated[b]:.3f}" for b in BUDGETS)
    )
    for cat in sorted(n_cat):
        cells = ", ".join(f"@{b} {by_cat[cat][b] / n_cat[cat]:.3f}" for b in BUDGETS)
        cells += "; dated " + ", ".join(f"@{b} {dated[cat][b] / n_cat[cat]:.3f}" for b in BUDGETS)
        print(f"  category {cat} ({n_cat[cat]} questions): {cells}")
    print("LoCoMo (snap-research/LoCoMo, ACL 2024) dev split, CC BY-NC 4.0 — benchmark use only.")


if __name__ == "__main__":
    main()
