"""Rolling context mode — the pure half (seed 001, layer 1).

In `rolling` mode a session's LLM context is its last `max_history_messages` (16)
messages plus a `Prior summary` JSON block in the turn context (a user-role message
right before the incoming input). The summary is kept up to date incrementally by a
periodic job (`rolling/services.py`) with a cursor: the sequence number of the last
summarised message.

Here: the summary document and its normalisation (`key_decisions` ≤ 8, each starting
with the English marker `Do: ` or `Don't: `), the parsing of the model's answer, the
chunking of new messages (≤ ROLLING_SUMMARY_CHUNK_CHARS, never ending on a user
message),
the transcript, the noise filter's exchanges, and the rolling context itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.lib.inputs import scrub

MAX_DECISIONS = 8
MAX_PAST = 12
MAX_ITEM_CHARS = 600
MAX_CURRENT_CHARS = 2000
# Per-message caps in the transcript: a chunk always holds several exchanges.
MESSAGE_CHARS = 6000
TOOL_CHARS = 1200
NOISE_CONFIDENCE = 0.7

DO, DONT = "Do: ", "Don't: "
EMPTY_SUMMARY: dict[str, Any] = {
    "key_decisions": [],
    "past_discussions": [],
    "current_discussion": "",
}


class SummaryParseError(ValueError):
    """The model's answer is not a usable summary (the chunk then counts as failed)."""


@dataclass(frozen=True)
class TranscriptMessage:
    sequence_number: int
    role: str
    content: str
    created_at: datetime
    name: str | None = None
    # never summaries or markers (see `_SUMMARISABLE`); here so a chunk of the transcript
    # can be handed to the raw-history index like messages a compression demoted
    is_summary: bool = False
    is_compression: bool = False


# ------------------------------------------------------------------ the summary
_BULLET = r"^\s*(?:[-*•·]|\d+[.)])?\s*"
_DONT_MARK = re.compile(
    _BULLET + r"(?:don'?t|don’t|do\s+not|不要|不要做|別|しない|禁止)\s*[:：]\s*", re.I
)
_DO_MARK = re.compile(_BULLET + r"(?:do|要|應|する|必須)\s*[:：]\s*", re.I)
_NEGATIVE_LEAD = re.compile(_BULLET + r"(?:never|don'?t|don’t|do\s+not)\s+", re.I)
_PLAIN = re.compile(_BULLET)


def normalize_decision(entry: object) -> str | None:
    """One `key_decisions` entry with the English marker: `Do: …` or `Don't: …`.

    Localised or differently spelled markers (`Do not:`, `要：`, `しない：`) are rewritten;
    an unmarked rule becomes `Do: …`, or `Don't: …` when it starts with never / don't /
    do not (which is then dropped). Empty entries are None.
    """
    if not isinstance(entry, str):
        return None
    text = " ".join(entry.split())
    if (m := _DONT_MARK.match(text)) is not None:
        marker, rest = DONT, text[m.end() :]
    elif (m := _DO_MARK.match(text)) is not None:
        marker, rest = DO, text[m.end() :]
    elif (m := _NEGATIVE_LEAD.match(text)) is not None:
        marker, rest = DONT, text[m.end() :]
    else:
        marker, rest = DO, text[_PLAIN.match(text).end() :]  # type: ignore[union-attr]
    rest = rest.strip()
    if not rest:
        return None
    return marker + rest[:MAX_ITEM_CHARS]


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        if isinstance(item, str | int | float) and not isinstance(item, bool):
            text = " ".join(str(item).split())
            if text:
                out.append(text[:MAX_ITEM_CHARS])
    return out


def _dedupe(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.casefold()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def normalize_summary(raw: object) -> dict[str, Any]:
    """The stored shape, whatever the model wrote: at most 8 `Do:`/`Don't:` decisions,
    at most 12 past discussions (newest kept), one current discussion."""
    data = raw if isinstance(raw, dict) else {}
    decisions = _dedupe(
        [d for d in (normalize_decision(e) for e in _strings_raw(data.get("key_decisions"))) if d]
    )[:MAX_DECISIONS]
    past = _dedupe(_strings(data.get("past_discussions")))[-MAX_PAST:]
    current = data.get("current_discussion")
    if isinstance(current, list):
        current = " ".join(_strings(current))
    current = " ".join(current.split())[:MAX_CURRENT_CHARS] if isinstance(current, str) else ""
    summary = {"key_decisions": decisions, "past_discussions": past, "current_discussion": current}
    return scrub(summary)[0]  # stored as jsonb: a NUL the model wrote becomes U+FFFD


def _strings_raw(value: object) -> list[object]:
    if isinstance(value, str):
        return [value]
    return list(value) if isinstance(value, list) else []


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.I)


def parse_summary(answer: str) -> dict[str, Any]:
    """The JSON object in the model's answer (code fences and chatter around it are
    tolerated), normalised. Raises SummaryParseError when there is none."""
    text = _FENCE.sub("", (answer or "").strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise SummaryParseError("no JSON object in the summary answer")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise SummaryParseError(f"summary answer is not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise SummaryParseError("summary answer nests too deeply") from None
    if not isinstance(data, dict) or not (set(data) & set(EMPTY_SUMMARY)):
        raise SummaryParseError("summary answer has none of the summary fields")
    return normalize_summary(data)


# ------------------------------------------------------------------ transcript and chunks
def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + " […]"


def render_message(m: TranscriptMessage) -> str:
    who = {"user": "User", "assistant": "Assistant"}.get(m.role, "Tool")
    if m.role == "tool" and m.name:
        who = f"Tool ({m.name})"
    cap = TOOL_CHARS if m.role == "tool" else MESSAGE_CHARS
    stamp = m.created_at.strftime("%Y-%m-%d %H:%M")
    return f"[{stamp}] {who}: {_clip(m.content.strip(), cap)}"


def render_transcript(msgs: Sequence[TranscriptMessage]) -> str:
    return "\n\n".join(render_message(m) for m in msgs)


def _can_end_after(msgs: Sequence[TranscriptMessage], i: int) -> bool:
    """A chunk may end after msgs[i]: not a user message (its answer belongs with it).
    The cursor is a sequence number, so messages with equal times may be split."""
    return msgs[i].role != "user"


def chunk_messages(
    msgs: Sequence[TranscriptMessage], max_chars: int
) -> list[list[TranscriptMessage]]:
    """Cut `msgs` (sequence order) into chunks of at most `max_chars` rendered characters.

    A chunk never ends on a user message (its answer belongs with it). Messages after the last allowed end wait for
    the next run. A stretch without an allowed end longer than `max_chars` becomes one
    oversized chunk rather than being cut wrongly.
    """
    chunks: list[list[TranscriptMessage]] = []
    start = 0
    n = len(msgs)
    while start < n:
        size = 0
        last_end: int | None = None
        i = start
        while i < n:
            size += len(render_message(msgs[i])) + 2
            if size > max_chars and last_end is not None:
                break
            if _can_end_after(msgs, i):
                last_end = i
                if size > max_chars:  # oversized: the first allowed end
                    break
            i += 1
        if last_end is None:
            break  # no allowed end yet: wait for more messages
        chunks.append(list(msgs[start : last_end + 1]))
        start = last_end + 1
    return chunks


# ------------------------------------------------------------------ noise filter
def exchanges(msgs: Sequence[TranscriptMessage]) -> list[list[TranscriptMessage]]:
    """A user message and every reply up to the next user message (leading replies
    without a user message form an exchange of their own)."""
    groups: list[list[TranscriptMessage]] = []
    for m in msgs:
        if m.role == "user" or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    return groups


def parse_noise(
    answer: str, n_exchanges: int, summary: dict[str, Any]
) -> tuple[set[int], dict[str, Any]]:
    """(exchange numbers to drop, previous summary without superseded entries) from the
    decision model's answer. Exchanges are numbered from 1; only confidence ≥ 0.7
    counts. Raises SummaryParseError when the answer is unusable (keep everything)."""
    text = _FENCE.sub("", (answer or "").strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise SummaryParseError("no JSON object in the noise answer")
    try:
        data = json.loads(text[start : end + 1])
    except (json.JSONDecodeError, RecursionError):
        raise SummaryParseError("noise answer is not valid JSON") from None
    if not isinstance(data, dict):
        raise SummaryParseError("noise answer is not an object")
    drop: set[int] = set()
    for item in data.get("noise") or []:
        if not isinstance(item, dict):
            continue
        number, confidence = item.get("exchange"), item.get("confidence")
        if (
            isinstance(number, int)
            and 1 <= number <= n_exchanges
            and isinstance(confidence, int | float)
            and confidence >= NOISE_CONFIDENCE
        ):
            drop.add(number)
    trimmed = dict(summary)
    for field, key in (
        ("key_decisions", "superseded_decisions"),
        ("past_discussions", "superseded_past"),
    ):
        gone = {i for i in data.get(key) or [] if isinstance(i, int)}
        items = list(summary.get(field) or [])
        trimmed[field] = [x for n, x in enumerate(items, 1) if n not in gone]
    return drop, trimmed


def numbered_exchanges(groups: Sequence[Sequence[TranscriptMessage]]) -> str:
    return "\n\n".join(f"### Exchange {n}\n{render_transcript(g)}" for n, g in enumerate(groups, 1))


# ------------------------------------------------------------------ the rolling context
PRIOR_SUMMARY_HEAD = (
    "Prior summary (JSON) of the conversation before the recent messages. Follow "
    "key_decisions; treat the rest as background; answer questions about earlier "
    "discussions from it."
)


def summary_block(summary: dict[str, Any] | None) -> str | None:
    """The turn-context text carrying the summary, or None when there is nothing in it."""
    if not summary:
        return None
    doc = normalize_summary(summary)
    if not (doc["key_decisions"] or doc["past_discussions"] or doc["current_discussion"]):
        return None
    body = json.dumps({"prior_summary": doc}, ensure_ascii=False, indent=1)
    return f"{PRIOR_SUMMARY_HEAD}\n```json\n{body}\n```"


def recent_window(rows: Sequence[Any], max_messages: int) -> list[Any]:
    """The last `max_messages` rows (objects with `.role`), never starting with a tool
    result whose assistant call fell outside the window."""
    window = list(rows[-max_messages:]) if max_messages > 0 else []
    while window and window[0].role == "tool":
        window.pop(0)
    return window
