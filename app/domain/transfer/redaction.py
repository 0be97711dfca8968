"""Pure: an imported record checked against the account's forget records.

An import is a writer of the user's text like any other: a text forgotten in this
account (before the import, or by a forget that waits for the import's commit), or in
the account the file came from (its `forgotten` record, first in the file), is stored as
the marker. The columns redacted are the ones a forget redacts (app/domain/forget); a
row whose text changed loses what was computed from its old text: a chunk's hash is
recomputed and its vectors are left to the background embedder (its `chunk_vector`
records are dropped), a fact's or an error entry's vector is dropped, and so is the
`message_embedding` record of a redacted message. An imported fact holding the text is
kept, redacted (not deleted as a forget deletes it): the facts hidden behind it keep
their target."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.domain.kernel.forgotten import MARKER, Forgotten
from app.domain.raw_history.chunks import content_hash

#: Per record type: its text columns (`str`, a list of strings, or JSON) a forget redacts.
TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "session": ("name",),
    "message": ("content", "thinking", "tool_calls", "metadata"),
    "archived_message": ("content", "thinking", "tool_calls", "metadata"),
    "rolling_summary": ("summary", "last_error"),
    "extraction_state": ("last_error",),
    "raw_index_state": ("last_error",),
    "planning_entry": ("entry",),
    "sketch": ("value",),
    "chunk": ("content", "breadcrumbs"),
    "fact": ("category", "key", "value", "source_context"),
    "memory_summary": ("content",),
    "error": ("tool", "error_text", "fix", "context"),
}
#: String values of a message's metadata that are machinery (as the forget keeps them).
MACHINE_KEYS = ("source", "reason", "method")


@dataclass
class ImportRedaction:
    """One import's check: the records known so far, and what it redacted."""

    forgotten: Forgotten
    messages: set[tuple[uuid.UUID, int]] = field(default_factory=set)  # (session, seq)
    chunks: set[uuid.UUID] = field(default_factory=set)
    redacted: int = 0

    def drops(self, type_: str, values: dict[str, Any]) -> bool:
        """Whether a vector record goes: it was computed from a text now redacted."""
        if type_ == "message_embedding":
            return (values.get("session_id"), values.get("sequence_number")) in self.messages
        if type_ == "chunk_vector":
            return values.get("chunk_id") in self.chunks
        return False

    def apply(self, type_: str, values: dict[str, Any]) -> dict[str, Any]:
        """`values` (a decoded record) with its text columns redacted."""
        columns = TEXT_COLUMNS.get(type_)
        if not self.forgotten or not columns:
            return values
        out = dict(values)
        for name in columns:
            value = out.get(name)
            if isinstance(value, str):
                out[name] = self.forgotten.redact(value)
            elif name == "breadcrumbs" and isinstance(value, list):
                crumbs = [self.forgotten.redact(b) for b in value if isinstance(b, str)]
                out[name] = [b for b in crumbs if b != MARKER]
            elif value is not None:
                keep = MACHINE_KEYS if name == "metadata" else ()
                out[name] = self.forgotten.redact_json(value, keep)
        if out == values:
            return values
        self.redacted += 1
        return self._derived(type_, out)

    def _derived(self, type_: str, out: dict[str, Any]) -> dict[str, Any]:
        if type_ in ("message", "archived_message"):
            self.messages.add((out.get("session_id"), out.get("sequence_number")))  # type: ignore[arg-type]
        elif type_ == "chunk":
            out["content_hash"] = content_hash(out.get("content") or "")
            out["vectors_stale"] = True
            out["stale_since"] = datetime.now(UTC)
            if isinstance(out.get("id"), uuid.UUID):
                self.chunks.add(out["id"])
        elif type_ in ("fact", "error"):
            out["embedding"] = None
        return out


def check_entries(value: Any) -> list[dict[str, Any]]:
    """A file's forget records, checked (ValueError naming what is wrong)."""
    if not isinstance(value, list):
        raise ValueError("entries: expected a list")
    out = []
    for e in value:
        if not isinstance(e, dict):
            raise ValueError("entries: expected objects")
        d, n, at = e.get("digest"), e.get("bytes"), e.get("at")
        if not (isinstance(d, str) and len(d) == 32 and all(c in "0123456789abcdef" for c in d)):
            raise ValueError("entries: digest: expected 32 lower-case hex digits")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= 4 * 1_000:
            raise ValueError("entries: bytes: expected a length in bytes (1 to 4000)")
        total = e.get("sum")
        if isinstance(total, bool) or not isinstance(total, int) or total < 0:
            raise ValueError("entries: sum: expected a non-negative integer")
        if not isinstance(at, str):
            raise ValueError("entries: at: expected a timestamp")
        out.append({"digest": d, "bytes": n, "sum": total, "at": at})
    return out
