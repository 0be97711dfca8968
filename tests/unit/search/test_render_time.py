"""A raw excerpt's time on its header (`render.RAW_TIME`, issue 44)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.kernel.hits import MemoryHit
from app.domain.search import render
from app.domain.search.render import format_hits


def raw(text: str, start: datetime | None, end: datetime | None) -> MemoryHit:
    return MemoryHit(
        "raw", text, session_id="s1", timestamp=end, started_at=start, start_seq=3, end_seq=5
    )


ONE_DAY = raw("User: we went hiking", datetime(2023, 5, 7, 9, 0), datetime(2023, 5, 7, 9, 30))
TWO_DAYS = raw("User: hiking again", datetime(2023, 5, 7, 9, 0, tzinfo=UTC), datetime(2023, 5, 8))
TWO_YEARS = raw("User: new year hike", datetime(2022, 12, 31), datetime(2023, 1, 1))
UNTIMED = raw("User: a hike", None, None)


def header(query: str, hit: MemoryHit) -> str:
    return format_hits(query, "raw", [hit], best_window_enabled=False).splitlines()[2]


def test_datetime_is_the_last_message_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "RAW_TIME", "datetime")
    assert header("hiking", ONE_DAY) == "1. raw · session s1 · turns 3–5 · 2023-05-07 09:30"
    assert header("hiking", UNTIMED) == "1. raw · session s1 · turns 3–5"


@pytest.mark.parametrize(
    ("hit", "shown"),
    [
        (ONE_DAY, " · 2023-05-07"),
        (TWO_DAYS, " · 2023-05-07…05-08"),
        (TWO_YEARS, " · 2022-12-31…2023-01-01"),
        (UNTIMED, ""),
    ],
)
def test_date_shows_the_days(hit: MemoryHit, shown: str) -> None:
    assert render.RAW_TIME == "date"  # the default
    assert header("where did we go hiking", hit) == "1. raw · session s1 · turns 3–5" + shown


def test_asked_shows_the_days_only_for_a_question_of_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "RAW_TIME", "asked")
    assert header("where did we go hiking", TWO_DAYS) == "1. raw · session s1 · turns 3–5"
    for query in (
        "when did we go hiking",
        "where did we hike in May 2023",
        "the first time we hiked",
    ):
        assert header(query, TWO_DAYS).endswith(" · 2023-05-07…05-08"), query
