"""LongMemEval-S dev split: loading, the question pick, the metrics and the BM25 references.

Data: shared/bench/longmemeval/lme-s-dev.json.gz — 100 questions of LongMemEval-S (Wu et
al., "LongMemEval: Benchmarking Chat Assistants on Long-Term Interactive Memory", ICLR
2025; MIT licence, Copyright (c) 2024 Di Wu), positions 0, 5, 10, … of
`longmemeval_s_cleaned.json`. Tune on this file only.

The metrics (the split's README, the paper's): session level, `recall_any@k` (the first k
distinct sessions retrieved include an answer session) and `recall_all@k` (they include
all of them); turn level, the turns marked `has_answer` found whole in the first 1,500 /
4,000 chars shown (`locomo_data.evidence_recall`). Abstention questions (`_abs` in the
id) are left out, as in the paper.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from locomo_data import BM25, BUDGETS, Message, evidence_recall

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "longmemeval"
DATA_FILE = DATA / "lme-s-dev.json.gz"
KS = (5, 10)  # session-level recall cut-offs
BM25_TURNS_SHOWN = 60  # turns joined in rank order for the turn-level BM25 text


@dataclass(frozen=True)
class Haystack:
    """One haystack session of a question."""

    session_id: str  # the dataset's id (may repeat within a haystack)
    date: datetime
    turns: list[dict]  # {role, content, has_answer?}


@dataclass(frozen=True)
class Question:
    question_id: str
    question_type: str
    question: str
    answer_sessions: frozenset[str]
    sessions: list[Haystack]  # in the haystack's order
    question_date: datetime | None = None  # when it is asked: its relative times read from it

    @property
    def evidence(self) -> tuple[str, ...]:
        """The turns marked `has_answer`, verbatim."""
        return tuple(t["content"] for s in self.sessions for t in s.turns if t.get("has_answer"))

    @property
    def messages(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def haystack_time(text: str) -> datetime:
    """A LongMemEval date ("2023/05/20 (Sat) 02:21"), naive."""
    return datetime.strptime(text.strip(), "%Y/%m/%d (%a) %H:%M")


def load(path: Path = DATA_FILE) -> list[Question]:
    out = []
    with gzip.open(path, "rt") as f:
        raw = json.load(f)
    for q in raw:
        sessions = [
            Haystack(sid, haystack_time(date), turns)
            for sid, date, turns in zip(
                q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True
            )
        ]
        out.append(
            Question(
                q["question_id"],
                q["question_type"],
                q["question"],
                frozenset(q["answer_session_ids"]),
                sessions,
                haystack_time(q["question_date"]) if q.get("question_date") else None,
            )
        )
    return out


def is_abstention(q: Question) -> bool:
    return "_abs" in q.question_id


def pick(questions: list[Question], n: int | None) -> list[Question]:
    """The first `n` scored questions (abstention left out), round-robin over the question
    types in file order (the file is grouped by type: a small `n` still covers them all)."""
    by_type: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        if not is_abstention(q):
            by_type[q.question_type].append(q)
    out: list[Question] = []
    queues = list(by_type.values())
    while queues and (n is None or len(out) < n):
        for queue in queues:
            if queue and (n is None or len(out) < n):
                out.append(queue.pop(0))
        queues = [q for q in queues if q]
    return out


def in_date_order(q: Question) -> list[Haystack]:
    """The haystack as a chat app lives it: the sessions by date (stable on ties)."""
    return sorted(q.sessions, key=lambda s: s.date)


def messages_of(session: Haystack, session_no: int) -> list[Message]:
    """One message per turn, verbatim, timed from the session's date, a minute per turn."""
    return [
        Message(t["role"], t["content"], session.date + timedelta(minutes=i), session_no)
        for i, t in enumerate(session.turns)
    ]


# ------------------------------------------------------------------ metrics
def distinct(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for x in items:
        seen.setdefault(x, None)
    return list(seen)


def session_recall(ranked: Iterable[str], answer: frozenset[str], k: int) -> tuple[float, float]:
    """(recall_any@k, recall_all@k) of the first k distinct sessions of `ranked`."""
    top = set(distinct(ranked)[:k])
    hit = answer & top
    return float(bool(hit)), float(hit == answer)


@dataclass
class Tally:
    """Sums of the metrics of one retriever, overall and per question type."""

    sums: dict[str, dict[str, float]]
    counts: dict[str, int]

    @classmethod
    def new(cls) -> Tally:
        return cls(defaultdict(lambda: defaultdict(float)), defaultdict(int))

    def add(self, qtype: str, values: dict[str, float]) -> None:
        for key in ("all", qtype):
            self.counts[key] += 1
            for name, v in values.items():
                self.sums[key][name] += v

    def mean(self, name: str, key: str = "all") -> float:
        n, sums = self.counts.get(key, 0), self.sums.get(key, {})
        return sums[name] / n if n and name in sums else float("nan")

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            key: {name: v / self.counts[key] for name, v in sums.items()}
            for key, sums in self.sums.items()
        }


def scores(
    ranked_sessions: Iterable[str],
    answer: frozenset[str],
    shown: str | None,
    evidence: tuple[str, ...],
) -> dict[str, float]:
    """The metrics of one answer: any@k / all@k for each k, and evidence@budget when a
    text is shown (turn level)."""
    ranked = list(ranked_sessions)
    out: dict[str, float] = {}
    for k in KS:
        out[f"any@{k}"], out[f"all@{k}"] = session_recall(ranked, answer, k)
    if shown is not None and evidence:
        for b in BUDGETS:
            out[f"turns@{b}"] = evidence_recall(shown, evidence, b)
    return out


# ------------------------------------------------------------------ BM25 references
def bm25_sessions(q: Question) -> list[str]:
    """BM25 over whole sessions (every turn's content): the session ids in rank order."""
    index = BM25(["\n".join(t["content"] for t in s.turns) for s in q.sessions])
    return [q.sessions[i].session_id for i in index.rank(q.question)]


def bm25_turns(q: Question) -> tuple[list[str], str]:
    """BM25 over single turns: their sessions in rank order, and the turns' text in rank
    order (the first BM25_TURNS_SHOWN, as `locomo_data.bm25_recall`)."""
    turns = [(s.session_id, t["content"]) for s in q.sessions for t in s.turns]
    order = BM25([text for _, text in turns]).rank(q.question)
    shown = "\n".join(turns[i][1] for i in order[:BM25_TURNS_SHOWN])
    return [turns[i][0] for i in order], shown


def bm25_tallies(questions: list[Question]) -> dict[str, Tally]:
    out = {"bm25 sessions": Tally.new(), "bm25 turns": Tally.new()}
    for q in questions:
        out["bm25 sessions"].add(
            q.question_type, scores(bm25_sessions(q), q.answer_sessions, None, ())
        )
        ranked, shown = bm25_turns(q)
        out["bm25 turns"].add(q.question_type, scores(ranked, q.answer_sessions, shown, q.evidence))
    return out


if __name__ == "__main__":
    qs = pick(load(), None)
    print(len(qs), "questions (abstention left out),", sum(q.messages for q in qs), "messages")
    for name, t in bm25_tallies(qs).items():
        print(name, {k: round(v, 3) for k, v in t.as_dict()["all"].items()})
