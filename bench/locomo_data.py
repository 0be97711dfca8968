"""LoCoMo dev split: loading, the evidence-recall metric, and the BM25 reference.

Data: shared/bench/locomo/locomo_dev.json — conversations 0–4 of LoCoMo ("Evaluating Very
Long-Term Conversational Memory of LLM Agents", ACL 2024, snap-research/LoCoMo,
data/locomo10.json), CC BY-NC 4.0. Used for benchmarking only.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from _app import STOPWORDS

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo" / "locomo_dev.json"
BUDGETS = (1500, 4000)
_WORD = re.compile(r"\w+", re.UNICODE)
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass
class Message:
    """One message the benches replay from a LoCoMo conversation."""

    role: str
    content: str
    created_at: datetime
    session_no: int


def sitting_time(text: str) -> datetime:
    """A LoCoMo session's date ("1:56 pm on 8 May, 2023"), naive."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    line: str  # "{speaker}: {text}" (+ " [shares a photo: …]")
    session_no: int
    date: str


@dataclass(frozen=True)
class Question:
    question: str
    evidence_lines: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]


def turn_line(turn: dict) -> str:
    line = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        line += f" [shares a photo: {turn['blip_caption']}]"
    return line


def load(path: Path = DATA) -> list[Conversation]:
    out = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
        turns: list[Turn] = []
        for n in numbers:
            date = conv.get(f"session_{n}_date_time", "")
            for t in conv[f"session_{n}"]:
                turns.append(Turn(t["dia_id"], t["speaker"], turn_line(t), n, date))
        by_id = {t.dia_id: t.line for t in turns}
        questions = []
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            lines = tuple(by_id[e] for e in qa.get("evidence", []) if e in by_id)
            if lines:
                questions.append(Question(qa["question"], lines, qa["category"]))
        out.append(Conversation(sample["sample_id"], turns, questions))
    return out


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def evidence_recall(shown: str, evidence: tuple[str, ...], budget: int) -> float:
    """Share of evidence lines that appear whole in the first `budget` chars."""
    cut = _norm(shown[:budget])
    return sum(1 for line in evidence if _norm(line) in cut) / len(evidence)


_HEADER = re.compile(r"^(\d+)\. (?:\(continued\)|\S+ ·.*?(?: · (\d{4}-\d\d-\d\d)(…[\d-]+)?)?)$")
_DAY_MARK = re.compile(r"^\[(\d{4}-)?(\d\d-\d\d)\] ")


def dated_recall(shown: str, evidence: tuple[str, ...], days: dict[str, str], budget: int) -> float:
    """Share of evidence lines that appear whole in the first `budget` chars *with their
    own day* (`days`: line → "YYYY-MM-DD"): on their hit's header when it shows one day,
    else on the last day mark (`[YYYY-MM-DD] `) above them in that hit. What a "when
    did…" question needs read off the text: the line and its date."""
    day_of: dict[str, str | None] = {}  # hit number -> the day its next lines are of
    year_of: dict[str, str] = {}  # hit number -> its header's year (a mark without one)
    hit = ""
    found: set[str] = set()
    wanted = {_norm(line): days.get(line) for line in evidence}
    for raw in shown[:budget].splitlines():
        if m := _HEADER.match(raw):
            hit = m.group(1)
            if not raw.endswith("(continued)"):
                day_of[hit] = m.group(2) if m.group(2) and not m.group(3) else None
                year_of[hit] = (m.group(2) or "")[:5]
            continue
        line = raw.strip()
        if mark := _DAY_MARK.match(line):
            day_of[hit] = (mark.group(1) or year_of.get(hit, "")) + mark.group(2)
            line = line[mark.end() :]
        norm = _norm(line)
        for ev, day in wanted.items():
            if ev in norm and day is not None and day_of.get(hit) == day:
                found.add(ev)
    return len(found) / len(evidence)


def evidence_days(conv: Conversation) -> dict[str, str]:
    """Each turn's line → the day its message is timed (`messages_of`)."""
    return {m.content: f"{m.created_at:%Y-%m-%d}" for m in reversed(messages_of(conv))}


def tokens(text: str) -> list[str]:
    """Lower-cased words without stopwords (the reference BM25 drops them too)."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class BM25:
    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = docs
        self.tf = [Counter(tokens(d)) for d in docs]
        self.len = [sum(c.values()) for c in self.tf]
        self.avg = sum(self.len) / max(1, len(self.len))
        df: Counter[str] = Counter()
        for c in self.tf:
            df.update(c.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def rank(self, query: str) -> list[int]:
        q = [t for t in tokens(query) if t in self.idf]
        scores = []
        for i, c in enumerate(self.tf):
            s = 0.0
            for t in q:
                f = c.get(t, 0)
                if f:
                    s += (
                        self.idf[t]
                        * f
                        * (self.k1 + 1)
                        / (f + self.k1 * (1 - self.b + self.b * self.len[i] / self.avg))
                    )
            scores.append(s)
        return sorted(range(len(self.docs)), key=lambda i: -scores[i])


def bm25_recall(convs: list[Conversation]) -> dict[int, float]:
    """The reference: BM25 over single turns, text = lines in rank order."""
    totals = {b: 0.0 for b in BUDGETS}
    n = 0
    for conv in convs:
        lines = [t.line for t in conv.turns]
        index = BM25(lines)
        for q in conv.questions:
            order = index.rank(q.question)
            shown = "\n".join(lines[i] for i in order[:60])
            for b in BUDGETS:
                totals[b] += evidence_recall(shown, q.evidence_lines, b)
            n += 1
    return {b: totals[b] / n for b in BUDGETS}


if __name__ == "__main__":
    convs = load()
    print(sum(len(c.questions) for c in convs), "questions")
    print("BM25 over single turns:", {b: round(v, 3) for b, v in bm25_recall(convs).items()})


def messages_of(conv: Conversation) -> list[Message]:
    """One message per turn: speaker A = user, speaker B = assistant; line verbatim;
    timed from its sitting's date, a minute per turn."""
    first = conv.turns[0].speaker
    out: list[Message] = []
    last_session, minute = -1, 0
    for t in conv.turns:
        if t.session_no != last_session:
            base, minute, last_session = sitting_time(t.date), 0, t.session_no
        role = "user" if t.speaker == first else "assistant"
        out.append(Message(role, t.line, base + timedelta(minutes=minute), t.session_no))
        minute += 1
    return out
