"""Pure: the record a forget leaves, and how a writer of derived text checks it.

A forget (app/domain/forget) redacts a text everywhere the user's data holds it, matched
literally and case-insensitively as a substring. A writer that was already under way —
a model writing a summary, a fact extraction, a session name — could store the text
again after the forget went by. So a forget also leaves a record, kept for good (until
the user is deleted), that every writer of derived text checks in its commit
transaction (`ForgottenRepository.guard`): the record never holds the text, only

* `digest`: BLAKE2b-128 (personalised, unkeyed: docs/memory.md says why) of the text
  *normalised* — each character lowered on its own (`str.lower`, kept when lowering
  would change its length), as UTF-8;
* `bytes`: the length of that UTF-8 form;
* `at`: when the forget was asked for.

A writer normalises its own text the same way and hashes every window of `bytes` bytes
of it (one length per distinct record length): a window whose digest is a record's is
the forgotten text, found where the forget's case-insensitive substring match would
find it, and is replaced by the forget's marker, `[forgotten]`. UTF-8 windows need no
character bookkeeping: a byte string that is the valid UTF-8 of the text can only match
on character boundaries. The cost is one hash per byte of text per distinct record
length (plus the bytes hashed): a summary of a few KiB against a handful of records is
well under a millisecond or so each.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: What replaces a forgotten text (the forget's own marker, app/domain/forget/redact.py).
MARKER = "[forgotten]"
_PERSON = b"navi-forget-v1"  # the hash's domain: these digests mean nothing elsewhere


def normalise(text: str) -> str:
    """Each character lowered alone (its length kept): how the forget's case-insensitive
    match compares characters, near enough (docs/memory.md names the exceptions)."""
    out = []
    for ch in text:
        low = ch.lower()
        out.append(low if len(low) == 1 else ch)
    return "".join(out)


def digest(data: bytes | memoryview) -> str:
    return hashlib.blake2b(data, digest_size=16, person=_PERSON).hexdigest()


def entry_of(text: str, at: str) -> dict[str, Any]:
    """The record of forgetting `text` (already checked by the forget): no text in it."""
    raw = normalise(text).encode("utf-8")
    return {"digest": digest(raw), "bytes": len(raw), "at": at}


@dataclass(frozen=True)
class Forgotten:
    """A user's records, ready to check a writer's text (empty: nothing to do)."""

    by_length: Mapping[int, frozenset[str]]

    @classmethod
    def of(cls, entries: Iterable[Mapping[str, Any]]) -> Forgotten:
        lengths: dict[int, set[str]] = {}
        for e in entries:
            n, d = e.get("bytes"), e.get("digest")
            if isinstance(n, int) and n > 0 and isinstance(d, str):
                lengths.setdefault(n, set()).add(d)
        return cls({n: frozenset(ds) for n, ds in lengths.items()})

    def __bool__(self) -> bool:
        return bool(self.by_length)

    def with_entries(self, entries: Iterable[Mapping[str, Any]]) -> Forgotten:
        more = Forgotten.of(entries)
        merged = {
            n: self.by_length.get(n, frozenset()) | more.by_length.get(n, frozenset())
            for n in {*self.by_length, *more.by_length}
        }
        return Forgotten(merged)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of `text` holding a forgotten text, leftmost first, not
        overlapping (as `re.sub` takes them)."""
        raw = normalise(text).encode("utf-8")
        found: list[tuple[int, int]] = []
        view = memoryview(raw)
        for n, digests in self.by_length.items():
            for i in range(len(raw) - n + 1):
                if digest(view[i : i + n]) in digests:
                    found.append((i, i + n))
        if not found:
            return []
        found.sort()
        kept: list[tuple[int, int]] = []
        for a, b in found:
            if not kept or a >= kept[-1][1]:
                kept.append((a, b))
        # byte offsets -> character offsets (every span starts and ends on a boundary)
        chars = {0: 0}
        pos = 0
        for i, ch in enumerate(normalise(text)):
            pos += len(ch.encode("utf-8"))
            chars[pos] = i + 1
        return [(chars[a], chars[b]) for a, b in kept if a in chars and b in chars]

    def redact(self, text: str) -> str:
        """`text` with every forgotten text replaced by the marker."""
        if not self or not text:
            return text
        spans = self.spans(text)
        if not spans:
            return text
        out, last = [], 0
        for a, b in spans:
            out.append(text[last:a])
            out.append(MARKER)
            last = b
        out.append(text[last:])
        return "".join(out)

    def holds(self, text: str | None) -> bool:
        return bool(self) and bool(text) and bool(self.spans(text or ""))

    def redact_json(self, value: Any, keep_keys: Sequence[str] = ()) -> Any:
        """A JSON value with its string values redacted (object keys, numbers, and the
        strings under `keep_keys` kept), as the forget redacts JSON columns."""
        if not self:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_json(v, keep_keys) for v in value]
        if isinstance(value, dict):
            return {
                k: v if k in keep_keys and isinstance(v, str) else self.redact_json(v, keep_keys)
                for k, v in value.items()
            }
        return value


NOTHING = Forgotten({})
