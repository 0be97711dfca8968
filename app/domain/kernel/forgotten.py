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
* `sum`: a prefilter, the sum over those bytes of a fixed table of 32-bit values
  (`_TABLE`): it says no more than the digest does (anyone can test a guess against
  either), and lets a writer skip almost every window without hashing it;
* `at`: when the forget was asked for.

A writer normalises its own text the same way and looks at every window of `bytes`
bytes of it (one pass per distinct record length): the window sums come from one prefix
sum (C-speed `accumulate`), and only a window whose sum is a record's is hashed; one
whose digest is a record's is the forgotten text, found where the forget's
case-insensitive substring match would find it, and is replaced by the forget's marker,
`[forgotten]`. UTF-8 windows need no character bookkeeping: a byte string that is the
valid UTF-8 of the text can only match on character boundaries.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import sub
from typing import Any

#: What replaces a forgotten text (the forget's own marker, app/domain/forget/redact.py).
MARKER = "[forgotten]"
_PERSON = b"navi-forget-v1"  # the hash's domain: these digests mean nothing elsewhere
# A fixed 32-bit value per byte (the same on every server: a record's `sum` travels).
_TABLE = tuple(
    int.from_bytes(hashlib.blake2b(bytes([b]), digest_size=4, person=_PERSON).digest(), "big")
    for b in range(256)
)


def normalise(text: str) -> str:
    """Each character lowered alone (its length kept): how the forget's case-insensitive
    match compares characters, near enough (docs/memory.md names the exceptions)."""
    lowered = text.lower()
    if len(lowered) == len(text):  # no character grew (none ever shrinks): the same
        return lowered
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
    return {"digest": digest(raw), "bytes": len(raw), "sum": byte_sum(raw), "at": at}


def byte_sum(raw: bytes) -> int:
    return sum(map(_TABLE.__getitem__, raw))


@dataclass(frozen=True)
class Forgotten:
    """A user's records, ready to check a writer's text (empty: nothing to do)."""

    #: record length in bytes -> its prefilter sums -> the digests of that length and sum
    by_length: Mapping[int, Mapping[int, frozenset[str]]]

    @classmethod
    def of(cls, entries: Iterable[Mapping[str, Any]]) -> Forgotten:
        lengths: dict[int, dict[int, set[str]]] = {}
        for e in entries:
            n, total, d = e.get("bytes"), e.get("sum"), e.get("digest")
            if isinstance(n, int) and n > 0 and isinstance(total, int) and isinstance(d, str):
                lengths.setdefault(n, {}).setdefault(total, set()).add(d)
        return cls({n: {t: frozenset(ds) for t, ds in sums.items()} for n, sums in lengths.items()})

    def __bool__(self) -> bool:
        return bool(self.by_length)

    def with_entries(self, entries: Iterable[Mapping[str, Any]]) -> Forgotten:
        merged: dict[int, dict[int, set[str]]] = {}
        for part in (self, Forgotten.of(entries)):
            for n, sums in part.by_length.items():
                for t, ds in sums.items():
                    merged.setdefault(n, {}).setdefault(t, set()).update(ds)
        return Forgotten({n: {t: frozenset(ds) for t, ds in s.items()} for n, s in merged.items()})

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of `text` holding a forgotten text, leftmost first, not
        overlapping (as `re.sub` takes them)."""
        raw = normalise(text).encode("utf-8")
        found: list[tuple[int, int]] = []
        view = memoryview(raw)
        prefix = [0, *accumulate(map(_TABLE.__getitem__, raw))]
        for n, sums in self.by_length.items():
            if n > len(raw):
                continue
            # window i's sum is prefix[i + n] - prefix[i]; only a record's sum is hashed,
            # and most texts share none with a record (a set test at C speed)
            windows = list(map(sub, prefix[n:], prefix))
            if sums.keys().isdisjoint(windows):
                continue
            for i, total in enumerate(windows):
                if total in sums and digest(view[i : i + n]) in sums[total]:
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
