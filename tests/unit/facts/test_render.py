"""Memory injection: the summary message, one line per fact, age labels, fallback summary."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.facts.render import (
    MEMORY_HEADER,
    age_label,
    fact_line,
    fact_lines,
    fallback_summary,
    memory_message,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@dataclass
class F:
    category: str
    key: str
    value: str
    confidence: int = 90
    updated_at: datetime = NOW


def test_memory_message() -> None:
    assert memory_message(None) is None
    assert memory_message("  \n") is None
    msg = memory_message("  The user writes Rust.\n")
    assert msg == {
        "role": "system",
        "content": "## What I remember about the user\n\nThe user writes Rust.",
    }
    assert MEMORY_HEADER == "## What I remember about the user"


@pytest.mark.parametrize(
    ("ago", "label"),
    [
        (timedelta(seconds=0), "today"),
        (timedelta(hours=23, minutes=59), "today"),
        (timedelta(hours=-5), "today"),  # clock skew: in the future
        (timedelta(days=1), "1d ago"),
        (timedelta(days=34, hours=3), "34d ago"),
        (timedelta(days=59), "59d ago"),
        (timedelta(days=60), "2mo ago"),
        (timedelta(days=400), "13mo ago"),
        (timedelta(days=729), "24mo ago"),
        (timedelta(days=730), "2y ago"),
        (timedelta(days=3650), "10y ago"),
    ],
)
def test_age_label(ago: timedelta, label: str) -> None:
    assert age_label(NOW - ago, NOW) == label


def test_fact_line() -> None:
    fact = F("preferences", "editor", "neovim", 90, NOW - timedelta(days=34))
    assert fact_line(fact, NOW) == (
        "• [preferences] editor → neovim (confidence: 90%, updated 34d ago)"
    )
    fresh = F("location", "home_city", "Porto\n  (Portugal)", 70)
    assert fact_line(fresh, NOW) == (
        "• [location] home_city → Porto (Portugal) (confidence: 70%, updated today)"
    )
    long = fact_line(F("notes", "bio", "x" * 2000), NOW)
    assert "x" * 499 + "…" in long and "x" * 500 not in long
    assert fact_lines([fact, fresh], NOW).count("\n") == 1


def test_fallback_summary_groups_by_category() -> None:
    text = fallback_summary(
        [
            F("preferences", "editor", "neovim", 90),
            F("location", "home_city", "Porto", 70),
            F("preferences", "shell", "fish", 95),
        ]
    )
    assert text == (
        "Location:\n- home city: Porto\n\nPreferences:\n- shell: fish\n- editor: neovim"
    )
    assert fallback_summary([]) == ""
