"""Raw chunks: the verbatim record of messages that context compression demoted.

`build_chunks` turns the demoted messages into searchable chunks:

* `user`, `assistant` and `tool` messages are kept, prefixed `User: `, `Assistant: `,
  `Tool result (name): `; system messages, old summaries, compression markers and
  messages with no text are skipped;
* one message is capped at `CHUNK_MESSAGE_MAX_CHARS` with its middle elided (the head
  and tail of a long tool output are where its meaning usually is);
* messages are packed, in sequence order, into chunks of at most `CHUNK_MAX_CHARS`,
  separated by a blank line; a message that does not fit in one chunk on its own is
  split into chunks of its own on line boundaries (then whitespace, then characters);
* every chunk carries its turn range, time range, a sha256 of its content and the
  breadcrumbs of the compression that produced it.

The function is pure and deterministic: the same messages give the same chunks and
hashes, which is what makes re-indexing the same demoted range a no-op.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from app.domain.kernel.forgotten import MARKER, Forgotten

CHUNK_MAX_CHARS = 4000
CHUNK_MESSAGE_MAX_CHARS = 12_000
CHUNK_SEPARATOR = "\n\n"

_SPLIT_WORD_WINDOW = 200  # how far back from the limit a split looks for whitespace


@dataclass(frozen=True)
class ChunkMessage:
    """One demoted message, as compression hands it over."""

    role: str
    content: str
    sequence_number: int
    created_at: datetime | None = None
    name: str | None = None  # tool name, for `tool` messages
    is_summary: bool = False
    is_compression: bool = False


@dataclass(frozen=True)
class RawChunk:
    content: str
    start_seq: int
    end_seq: int
    started_at: datetime | None
    ended_at: datetime | None
    content_hash: str
    breadcrumbs: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Entry:
    text: str
    seq: int
    at: datetime | None


def build_chunks(
    messages: Iterable[ChunkMessage], breadcrumbs: Iterable[str] = ()
) -> list[RawChunk]:
    """Pack the demoted `messages` into chunks that each carry `breadcrumbs`."""
    return _pack(_entries(messages), tuple(breadcrumbs))


def append_chunks(
    tail: RawChunk | None,
    messages: Iterable[ChunkMessage],
    crumbs_of: Callable[[Sequence[str], list[str]], Sequence[str]] = lambda kept, texts: kept,
) -> tuple[RawChunk | None, list[RawChunk], bool]:
    """Pack `messages`, which follow `tail` (a session's open chunk, or None), the way
    `build_chunks` packs one run of messages: the leading ones that fit go into `tail`
    (returned updated; None when it takes none), the rest into new chunks. A chunk's
    breadcrumbs are `crumbs_of(the breadcrumbs it has, the texts added to it)`. Appending messages one call at a time gives the chunks one call with all of
    them would (but for the breadcrumbs: per chunk here, per call there). The third value
    says whether the last chunk may take more (not when it is a piece of a split message,
    after which `build_chunks` starts a new chunk)."""
    entries = _entries(messages)
    taken = 0
    if tail is not None:
        size = len(tail.content)
        for entry in entries:
            size += len(CHUNK_SEPARATOR) + len(entry.text)
            if len(entry.text) > CHUNK_MAX_CHARS or size > CHUNK_MAX_CHARS:
                break
            taken += 1
    updated = None
    if tail is not None and taken:
        head = entries[:taken]
        content = CHUNK_SEPARATOR.join([tail.content, *(e.text for e in head)])
        times = [e.at for e in head if e.at is not None]
        updated = RawChunk(
            content=content,
            start_seq=tail.start_seq,
            end_seq=head[-1].seq,
            started_at=tail.started_at or (times[0] if times else None),
            ended_at=times[-1] if times else tail.ended_at,
            content_hash=content_hash(content),
            breadcrumbs=tuple(crumbs_of(tail.breadcrumbs, [e.text for e in head])),
        )
    fresh = [
        replace(c, breadcrumbs=tuple(crumbs_of((), [c.content])))
        for c in _pack(entries[taken:], ())
    ]
    rest = entries[taken:]
    still_open = not rest or len(rest[-1].text) <= CHUNK_MAX_CHARS
    return updated, fresh, still_open


def _entries(messages: Iterable[ChunkMessage]) -> list[_Entry]:
    ordered = sorted(messages, key=lambda m: m.sequence_number)  # stable on ties
    return [e for e in (_entry(m) for m in ordered) if e is not None]


def _pack(entries: list[_Entry], crumbs: tuple[str, ...]) -> list[RawChunk]:
    chunks: list[RawChunk] = []
    group: list[_Entry] = []
    size = 0

    def flush() -> None:
        nonlocal group, size
        if group:
            chunks.append(_chunk(CHUNK_SEPARATOR.join(e.text for e in group), group, crumbs))
        group, size = [], 0

    for entry in entries:
        if len(entry.text) > CHUNK_MAX_CHARS:
            flush()
            for piece in split_text(entry.text, CHUNK_MAX_CHARS):
                if piece.strip():
                    chunks.append(_chunk(piece.strip(), [entry], crumbs))
            continue
        added = len(entry.text) + (len(CHUNK_SEPARATOR) if group else 0)
        if size + added > CHUNK_MAX_CHARS:
            flush()
            added = len(entry.text)
        group.append(entry)
        size += added
    flush()
    return chunks


TOOL_RESULT = "Tool result"  # how a tool message's line starts (see `message_prefix`)


def message_prefix(role: str, name: str | None = None) -> str | None:
    """The label a kept message is written with; None for roles that are not kept."""
    role = (role or "").strip().lower()
    if role == "user":
        return "User: "
    if role == "assistant":
        return "Assistant: "
    if role == "tool":
        return f"{TOOL_RESULT} ({name}): " if name else f"{TOOL_RESULT}: "
    return None


def elide_middle(text: str, limit: int = CHUNK_MESSAGE_MAX_CHARS) -> str:
    """`text` cut to `limit` chars by replacing its middle with `…[N chars elided]…`."""
    if len(text) <= limit:
        return text
    elided = len(text) - limit
    while True:  # the marker's own length depends on N; settles in two rounds at most
        marker = f"\n…[{elided} chars elided]…\n"
        keep = max(0, limit - len(marker))
        new_elided = len(text) - keep
        if new_elided == elided:
            break
        elided = new_elided
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` chars whose concatenation is `text`.

    Cuts after a newline when one is in reach, else after whitespace in the last
    `_SPLIT_WORD_WINDOW` chars before the limit, else at the limit itself.
    """
    if limit <= 0:
        raise ValueError("limit must be positive")
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[: limit + 1]
        cut = window.rfind("\n", 0, limit) + 1
        if cut <= 0:
            floor = max(0, limit - _SPLIT_WORD_WINDOW)
            cut = max(window.rfind(ws, floor, limit) for ws in (" ", "\t")) + 1
        if cut <= 0:
            cut = limit
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def entry_text(message: ChunkMessage) -> str | None:
    """The text `message` is written into a chunk with (its label, its content capped);
    None for a message the chunks leave out."""
    if message.is_summary or message.is_compression:
        return None
    prefix = message_prefix(message.role, message.name)
    content = (message.content or "").strip()
    if prefix is None or not content:
        return None
    return prefix + elide_middle(content)


def _entry(message: ChunkMessage) -> _Entry | None:
    text = entry_text(message)
    return None if text is None else _Entry(text, message.sequence_number, message.created_at)


def _chunk(content: str, group: list[_Entry], crumbs: tuple[str, ...]) -> RawChunk:
    times = [e.at for e in group if e.at is not None]
    return RawChunk(
        content=content,
        start_seq=group[0].seq,
        end_seq=group[-1].seq,
        started_at=times[0] if times else None,
        ended_at=times[-1] if times else None,
        content_hash=content_hash(content),
        breadcrumbs=crumbs,
    )


def redact_chunk(chunk: RawChunk, forgotten: Forgotten) -> RawChunk:
    """`chunk` itself when it holds no forgotten text; else a copy with its content and
    breadcrumbs redacted (a breadcrumb that was all forgotten text dropped) and the
    content's hash anew."""
    if not forgotten:
        return chunk
    content = forgotten.redact(chunk.content)
    crumbs = tuple(c for c in (forgotten.redact(b) for b in chunk.breadcrumbs) if c != MARKER)
    if content == chunk.content and crumbs == chunk.breadcrumbs:
        return chunk
    return replace(chunk, content=content, content_hash=content_hash(content), breadcrumbs=crumbs)
