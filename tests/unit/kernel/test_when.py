"""`kernel.when`: the time a question names, read with a small rule set (issue 44)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.kernel import when
from app.domain.kernel.when import TimeAsk, read_time, time_factors

NOW = datetime(2023, 8, 16, 14, 30, tzinfo=UTC)  # a Wednesday


def d(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def inside(ask: TimeAsk, day: str) -> bool:
    assert ask.window is not None
    return ask.window[0] <= d(day) < ask.window[1]


@pytest.mark.parametrize(
    ("question", "yes", "no"),
    [
        ("What did Maria donate in December 2022?", "2022-12-20", "2023-01-10"),
        ("Who did Maria have dinner with on May 3, 2023?", "2023-05-03", "2023-05-06"),
        ("What did Gina find on 1 February, 2023?", "2023-02-01", "2023-02-04"),
        ("What book did Tim finish on 8th December, 2023?", "2023-12-08", "2023-12-11"),
        ("Where was the picture shared on December 1,2023 taken?", "2023-12-01", "2023-11-28"),
        ("What happened on 2023-03-04?", "2023-03-04", "2023-03-07"),
        ("Which outdoor spot did Joanna visit in May?", "2023-05-15", "2022-05-15"),
        ("What did you plan in October?", "2022-10-15", "2023-10-15"),  # the last October
        ("How many times has Melanie gone to the beach in 2022?", "2022-07-01", "2023-02-01"),
        ("What state did Joanna visit in summer 2021?", "2021-07-15", "2021-11-01"),
        ("Where was John between August 11 and August 15 2023?", "2023-08-13", "2023-08-20"),
        ("What did John do the week before August 3, 2023?", "2023-07-29", "2023-07-20"),
        ("What is the puppy she got two weeks before August 11, 2023?", "2023-07-28", "2023-07-01"),
        ("What did Joanna finish last Friday on 23 January, 2022?", "2022-01-21", "2022-01-10"),
        ("What did I do yesterday?", "2023-08-15", "2023-08-12"),
        ("Who did I meet with during the lunch last Tuesday?", "2023-08-15", "2023-08-08"),
        ("What did I cook on Monday?", "2023-08-14", "2023-08-09"),
        ("Which book did I finish a week ago?", "2023-08-09", "2023-07-20"),
        ("What did I do two weeks ago?", "2023-08-02", "2023-08-14"),
        ("I visited a museum two months ago", "2023-06-17", "2023-08-10"),
        ("Where did Caroline move from 4 years ago?", "2019-08-16", "2022-08-16"),
        ("Which shoes did I clean last month?", "2023-07-20", "2023-06-20"),
        ("What did we talk about last week?", "2023-08-09", "2023-07-20"),
        ("What event did John volunteer at last weekend?", "2023-08-12", "2023-08-05"),
        ("Where did John go on a road trip last year?", "2022-06-01", "2023-03-01"),
        ("How many plants did I acquire in the last month?", "2023-07-20", "2023-06-10"),
        ("How many films did I watch in the past 3 months?", "2023-06-01", "2023-04-01"),
        ("How many videos have I watched in the past few weeks?", "2023-08-01", "2023-07-01"),
        ("What did John and Max enjoy together last summer?", "2022-07-15", "2023-07-15"),
    ],
)
def test_a_window_is_read_from_the_question(question: str, yes: str, no: str) -> None:
    ask = read_time(question, NOW)
    assert inside(ask, yes), ask
    assert not inside(ask, no), ask


@pytest.mark.parametrize(
    "question",
    [
        "What activities does Melanie do?",
        "I may go hiking at some point",  # "may" is a month only beside a date or a preposition
        "How many weeks ago did I meet up with my aunt?",  # no number: no window
        "What does Melanie do in the summer?",  # a season of no year
        "Which event happened first, my cousin's wedding or the engagement party?",
        "What did the 18th birthday party look like?",
    ],
)
def test_no_window(question: str) -> None:
    assert read_time(question, NOW).window is None


@pytest.mark.parametrize(
    ("question", "order"),
    [
        ("When was the first time I went skiing?", "first"),
        ("Where do I initially keep my old sneakers?", "first"),
        ("Which mode of transport did I use most recently?", "last"),
        ("How many Instagram followers do I currently have?", "last"),
        ("What is my current highest score in Ticket to Ride?", "last"),
        ("When did I last time see the dentist, the last time?", "last"),
        ("What did we discuss last week?", None),  # a window, not an order
        ("Which event happened first, the wedding or the party?", None),
    ],
)
def test_first_or_last(question: str, order: str | None) -> None:
    assert read_time(question, NOW).order == order


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("When did Caroline go to the support group?", True),
        ("How long ago was Caroline's 18th birthday?", True),
        ("How many days passed between the workshop and the planting?", True),
        ("Which month was John in Italy?", True),
        ("What year did John start surfing?", True),
        ("What activities does Melanie do?", False),
    ],
)
def test_asks_a_time(question: str, asks: bool) -> None:
    assert read_time(question, NOW).asks_time is asks


def test_a_naive_now_is_utc() -> None:
    ask = read_time("what did I do yesterday", datetime(2023, 8, 16, 9))
    assert ask.window is not None and ask.window[0].tzinfo is UTC


def test_time_factors_window() -> None:
    ask = read_time("what did I do in May 2023", NOW)
    times = {
        "may": (d("2023-05-10"), d("2023-05-10T01:00")),
        "june": (d("2023-06-20"), d("2023-06-20T01:00")),
        "spans": (d("2023-04-28"), d("2023-05-02")),  # one of its messages is in May
        "untimed": (None, None),
    }
    factors = time_factors(ask, times)
    assert factors == {"june": when.OUTSIDE_WINDOW, "untimed": when.OUTSIDE_WINDOW}
    # no candidate in the window: the window changes nothing
    assert time_factors(read_time("what did I do in May 2021", NOW), times) == {}
    assert time_factors(read_time("what did I do", NOW), times) == {}
    assert time_factors(None, times) == {}


def test_time_factors_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(when, "ORDER_WEIGHT", 0.3)
    times = {k: (d(f"2023-0{k}-01"), d(f"2023-0{k}-02")) for k in "123"}
    last = time_factors(read_time("what is my current score", NOW), times)
    assert last == pytest.approx({"1": 0.7, "2": 0.85})
    first = time_factors(read_time("the first time I played", NOW), times)
    assert first == pytest.approx({"3": 0.7, "2": 0.85})
    monkeypatch.setattr(when, "ORDER_WEIGHT", 0.0)
    assert time_factors(read_time("what is my current score", NOW), times) == {}
