"""The forget records' check (pure): it finds a forgotten text where the forget's own
case-insensitive substring match finds it, and replaces it as the forget does."""

from __future__ import annotations

import re

import pytest

from app.domain.forget.redact import Needle, redact_text
from app.domain.kernel.forgotten import MARKER, NOTHING, Forgotten, entry_of

AT = "2026-12-05T00:00:00+00:00"


def of(*texts: str) -> Forgotten:
    return Forgotten.of(entry_of(t, AT) for t in texts)


def test_the_record_holds_no_text() -> None:
    e = entry_of("X9-PASS-77a", AT)
    assert set(e) == {"digest", "bytes", "sum", "at"}
    assert "pass" not in str(e).lower()
    assert e["bytes"] == len("x9-pass-77a")
    assert e == entry_of("x9-pass-77A", AT)  # normalised: case does not matter


@pytest.mark.parametrize(
    "text",
    [
        "My passport is X9-PASS-77a.",
        "x9-pass-77A, again: X9-PASS-77A",
        "prefixX9-PASS-77asuffix",  # a substring, as the forget matches it
        "nothing here",
        "X9-PASS-77",  # shorter: not it
        "Zürich X9-PASS-77a été",  # non-ASCII around it
        "",
    ],
)
def test_redacts_as_the_forget_does(text: str) -> None:
    needle = Needle("X9-PASS-77a")
    assert of("X9-PASS-77a").redact(text) == redact_text(needle, text)


def test_non_ascii_text_and_several_records() -> None:
    f = of("Ärger im Büro", "tel 555-0199")
    said = "ärger im büro, call TEL 555-0199 or ÄRGER IM BÜRO"
    assert f.redact(said) == f"{MARKER}, call {MARKER} or {MARKER}"
    assert f.holds(said) and not f.holds("Büro")


def test_overlapping_matches_leftmost_first() -> None:
    f = of("aba")
    assert f.redact("ababa") == re.sub("aba", MARKER, "ababa")


def test_json_values_redacted_keys_and_machinery_kept() -> None:
    f = of("lisbon")
    value = {"text": "trip to Lisbon", "lisbon": 3, "source": "Lisbon", "keys": ["LISBON", 1]}
    assert f.redact_json(value, ("source",)) == {
        "text": f"trip to {MARKER}",
        "lisbon": 3,
        "source": "Lisbon",
        "keys": [MARKER, 1],
    }


def test_no_records_change_nothing() -> None:
    assert not NOTHING
    assert NOTHING.redact("anything") == "anything"
    assert of("abc").with_entries([entry_of("xyz", AT)]).redact("abc xyz") == f"{MARKER} {MARKER}"
    assert Forgotten.of([{"digest": 1}, {"bytes": "x"}]) == NOTHING  # malformed: ignored
