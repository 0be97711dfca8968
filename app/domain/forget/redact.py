"""Pure: how a forgotten text is found and replaced.

The text is matched literally and case-insensitively: a regular expression of the text
escaped (Python's `re`, the one replacement used for every store) and an ILIKE pattern
with `%`, `_` and `\\` escaped (what the repositories find candidate rows with). JSON
values are redacted inside their string values only, so they stay valid JSON; object keys
are kept."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.domain.kernel.forgotten import MARKER
from app.lib.errors import Unprocessable
from app.lib.inputs import reject_nul
from app.lib.sql import contains_pattern

MIN_TEXT = 3
MAX_TEXT = 1_000


def check_text(raw: str) -> str:
    """The text to forget, stripped; a 422 naming the problem otherwise."""
    text = raw.strip()
    if len(text) < MIN_TEXT:
        raise Unprocessable(f"text: at least {MIN_TEXT} characters (not counting spaces)")
    if len(text) > MAX_TEXT:
        raise Unprocessable(f"text: at most {MAX_TEXT} characters")
    reject_nul(text, "text")
    if text.casefold() in MARKER.casefold():
        raise Unprocessable(f"text: part of the marker {MARKER!r} that replaces forgotten text")
    return text


def text_hash(text: str) -> str:
    """What the log and metrics say instead of the text: a sha256 prefix."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Needle:
    """One forgotten text, ready for every store."""

    text: str

    @property
    def regex(self) -> re.Pattern[str]:
        return re.compile(re.escape(self.text), re.IGNORECASE)

    @property
    def like(self) -> str:
        """ILIKE pattern (ESCAPE '\\', PostgreSQL's default) of the text anywhere."""
        return contains_pattern(self.text)

    @property
    def json_like(self) -> str:
        """ILIKE pattern of the text as it appears inside a JSON document's text
        (`"` and `\\` and control characters escaped, non-ASCII as is, as jsonb prints)."""
        return contains_pattern(json.dumps(self.text, ensure_ascii=False)[1:-1])

    def found_in(self, value: str | None) -> bool:
        return bool(value) and self.regex.search(value or "") is not None


def redact_text(needle: Needle, value: str | None) -> str | None:
    """`value` with every occurrence replaced by the marker (None stays None)."""
    if value is None:
        return None
    return needle.regex.sub(MARKER, value)


def redact_json(needle: Needle, value: Any, keep_keys: Iterable[str] = ()) -> Any:
    """A JSON value with its string values redacted (recursively); object keys, numbers
    and the string values under `keep_keys` (machinery, e.g. a marker's `source`) kept."""
    kept = frozenset(keep_keys)
    if isinstance(value, str):
        return redact_text(needle, value)
    if isinstance(value, list):
        return [redact_json(needle, v, kept) for v in value]
    if isinstance(value, dict):
        return {
            k: v if k in kept and isinstance(v, str) else redact_json(needle, v, kept)
            for k, v in value.items()
        }
    return value
