"""Time in a question — the pure half of time-aware retrieval (issue 44).

`read_time(query, now)` finds what a question says about time, with a small rule set
(English): the **window** it names — absolute ("in May 2023", "on 7 July, 2023", "May 3",
"in 2022", "summer 2021", "between August 11 and August 15 2023") or relative to `now`
("yesterday", "last week", "two weeks ago", "last Tuesday", "last weekend", "in the past
3 months"; a relative expression next to a day date is read from that date: "the week
before August 3, 2023") — the **order** it asks for ("the first time", "initially" →
first; "most recently", "currently", "the latest" → last), and whether it **asks a time**
("when…", "how long ago…", "which month…").

`time_factors` turns that into a factor per raw chunk, from its messages' times: a chunk
outside the window is scaled by `OUTSIDE_WINDOW` (only when some candidate is inside it:
a window no message falls in changes nothing), and for first / last the candidates are
scaled from 1 (the oldest / newest) down to `1 − ORDER_WEIGHT` (the other end), by their
rank in time. `search_raw` applies the factors to every line score of the chunk, so they
move both the chunks' order and the lines shown first. why: docs/performance.md, "Time
in the question".

A message's time says when it was *said*; a question names when something *happened*. A
mention comes at or after the event, so windows are padded: a day by a day either side,
a relative week by half a week, a month by a few days.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

__all__ = ["ORDER_WEIGHT", "OUTSIDE_WINDOW", "TimeAsk", "read_time", "time_factors"]

OUTSIDE_WINDOW = 0.5  # a chunk none of whose messages is in the question's window
ORDER_WEIGHT = 0.0  # first / last: the far end in time scaled by 1 − this (0: off, the A/B)

Order = Literal["first", "last"]
Window = tuple[datetime, datetime]
DAY = timedelta(days=1)


@dataclass(frozen=True)
class TimeAsk:
    window: Window | None = None  # [start, end) the messages asked about were said in
    order: Order | None = None
    asks_time: bool = False  # the answer is a time: the reader needs the excerpts' dates

    def __bool__(self) -> bool:
        return self.window is not None or self.order is not None or self.asks_time


_MONTHS = {
    name: n
    for n, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        1,
    )
    for name in names
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
_UNITS = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}
_SEASONS = {"spring": (3, 3), "summer": (6, 3), "fall": (9, 3), "autumn": (9, 3), "winter": (12, 3)}

_MON = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_NUM = r"(?P<num>\d+|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"

# absolute expressions, tried in this order (a span taken is not read again)
_ISO = re.compile(r"\b(?P<year>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})\b")
_DAY_MONTH = re.compile(
    rf"\b(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MON}\b(?:(?:,\s*|\s+){_YEAR}\b)?", re.I
)
_MONTH_DAY = re.compile(
    rf"\b{_MON}\s+(?P<d>\d{{1,2}}){_ORD}\b(?!:)(?:(?:,\s*|\s+){_YEAR}\b)?", re.I
)
_MONTH_YEAR = re.compile(rf"\b{_MON},?\s+(?:of\s+)?{_YEAR}\b", re.I)
_SEASON = re.compile(
    r"\b(?:(?P<rel>last|this|next)\s+)?(?P<season>spring|summer|fall|autumn|winter)\b"
    rf"(?:\s+(?:of\s+)?{_YEAR}\b)?",
    re.I,
)
_IN_MONTH = re.compile(
    rf"\b(?:in|during|since|by|of|before|after|early|mid|late|until|through)\s+"
    rf"(?:the\s+month\s+of\s+)?{_MON}\b",
    re.I,
)
_YEAR_ALONE = re.compile(rf"\b{_YEAR}\b")
# relative expressions, read from the anchor (`now`, or a day date the question names)
_AGO = re.compile(rf"\b{_NUM}\s+{_UNIT}\s+(?P<dir>ago|before|earlier|prior)\b", re.I)
_PAST_N = re.compile(
    rf"\b(?:in|over|during|within|for)\s+the\s+(?:last|past|previous)\s+(?:{_NUM}\s+)?{_UNIT}",
    re.I,
)
_THE_UNIT_BEFORE = re.compile(r"\bthe\s+(?P<unit>day|week|weekend|month|year)\s+before\b", re.I)
_LAST_UNIT = re.compile(
    r"\b(?P<rel>last|previous|this\s+past|this)\s+(?P<unit>week|weekend|month|year)\b", re.I
)
_WEEKDAY = re.compile(
    r"\b(?:(?P<rel>last|this\s+past|previous|on|this)\s+)(?P<wd>" + "|".join(_WEEKDAYS) + r")\b",
    re.I,
)
_DAY_WORD = re.compile(
    r"\b(?P<w>yesterday|today|tonight|this\s+(?:morning|afternoon|evening))\b", re.I
)

_FIRST = re.compile(
    r"\b(?:(?:the\s+)?first\s+time|at\s+first|initially|originally|earliest)\b", re.I
)
_LAST = re.compile(
    r"\b(?:(?:the\s+)?last\s+time|most\s+recent(?:ly)?|latest|currently|current|nowadays|"
    r"these\s+days|right\s+now)\b",
    re.I,
)
_ASKS_TIME = re.compile(
    r"\b(?:when|what\s+(?:date|day|time|year|month|week)|which\s+(?:date|day|week|month|year)|"
    r"how\s+long|how\s+many\s+(?:days|weeks|months|years)|how\s+(?:old|recently))\b",
    re.I,
)


def read_time(query: str, now: datetime) -> TimeAsk:
    """What `query` says about time, relative expressions read from `now` (naive: UTC)."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    taken: list[tuple[int, int]] = []
    found: list[tuple[Window, bool]] = []  # (window, at day granularity)
    for pattern, rule in _ABSOLUTE:
        for m in pattern.finditer(query):
            if _overlaps(m.span(), taken):
                continue
            got = rule(m, now)
            if got is not None:
                taken.append(m.span())
                found.append(got)
    days = [w for w, day in found if day]
    anchor = max(w[0] for w in days) + DAY if days else now  # "… before 3 August": from it
    for pattern, relative in _RELATIVE:
        for m in pattern.finditer(query):
            if _overlaps(m.span(), taken):
                continue
            window = relative(m, anchor)
            if window is not None:
                taken.append(m.span())
                found.append((window, False))
    window = None
    if found:
        window = (min(w[0] for w, _ in found), max(w[1] for w, _ in found))
    order: Order | None = None
    if _FIRST.search(query):
        order = "first"
    elif _LAST.search(query):
        order = "last"
    return TimeAsk(window=window, order=order, asks_time=bool(_ASKS_TIME.search(query)))


def time_factors(
    ask: TimeAsk | None, times: Mapping[str, tuple[datetime | None, datetime | None]]
) -> dict[str, float]:
    """Per chunk key (its messages' first and last time): the factor its line scores take
    (see the module docstring); empty when the question says nothing usable."""
    if ask is None or not times:
        return {}
    out = dict.fromkeys(times, 1.0)
    if ask.window is not None:
        start, end = ask.window
        inside = {k for k, (a, b) in times.items() if _within(a, b, start, end)}
        if inside:
            for k in out:
                if k not in inside:
                    out[k] *= OUTSIDE_WINDOW
    if ask.order is not None and ORDER_WEIGHT > 0:
        timed = sorted((b or a, k) for k, (a, b) in times.items() if (b or a) is not None)
        if len(timed) > 1:
            for i, (_, k) in enumerate(timed):
                pos = i / (len(timed) - 1)  # 0 the oldest, 1 the newest
                near = pos if ask.order == "last" else 1.0 - pos
                out[k] *= 1.0 - ORDER_WEIGHT * (1.0 - near)
    return {k: f for k, f in out.items() if f != 1.0}


def _within(a: datetime | None, b: datetime | None, start: datetime, end: datetime) -> bool:
    a = _aware(a or b)
    b = _aware(b or a)
    return a is not None and b is not None and a < end and b >= start


def _aware(t: datetime | None) -> datetime | None:
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < b and a < span[1] for a, b in taken)


# ------------------------------------------------------------------ absolute
def _day(year: int, month: int, day: int) -> tuple[Window, bool] | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None
    return (start - DAY, start + 2 * DAY), True


def _month(year: int, month: int, pad_days: int = 3) -> Window:
    last = calendar.monthrange(year, month)[1]
    start = datetime(year, month, 1, tzinfo=UTC)
    return start - DAY, start + timedelta(days=last + pad_days)


def _year_of(month: int, day: int, now: datetime) -> int:
    """The year of a date named without one: the latest at or before `now`."""
    return now.year if (month, day) <= (now.month, now.day) else now.year - 1


def _iso(m: re.Match[str], now: datetime) -> tuple[Window, bool] | None:
    return _day(int(m["year"]), int(m["m"]), int(m["d"]))


def _day_month(m: re.Match[str], now: datetime) -> tuple[Window, bool] | None:
    month, day = _MONTHS[m["mon"].lower().rstrip(".")], int(m["d"])
    year = int(m["year"]) if m["year"] else _year_of(month, day, now)
    return _day(year, month, day)


def _month_year(m: re.Match[str], now: datetime) -> tuple[Window, bool] | None:
    return _month(int(m["year"]), _MONTHS[m["mon"].lower().rstrip(".")]), False


def _season(m: re.Match[str], now: datetime) -> tuple[Window, bool] | None:
    first, months = _SEASONS[m["season"].lower()]
    rel = (m["rel"] or "").lower()
    if m["year"]:
        year = int(m["year"])
    elif rel == "this":
        year = now.year if first <= now.month else now.year - 1
    elif rel == "last":  # the latest that has ended
        year = now.year if first + months <= now.month else now.year - 1
    else:
        return None  # "summer" alone, "next summer": no window
    start = datetime(year, first, 1, tzinfo=UTC)
    end_month = first + months
    end = datetime(year + (end_month > 12), (end_month - 1) % 12 + 1, 1, tzinfo=UTC)
    return (start - DAY, end + 7 * DAY), False


def _in_month(m: re.Match[str], now: datetime) -> tuple[Window, bool] | None:
    month = _MONTHS[m["mon"].lower().rstrip(".")]
    return _month(_year_of(month, 1, now), month), False


def _year(m: re.Match[str], now: datetime) -> tuple[Window, bool] | None:
    year = int(m["year"])
    return (datetime(year, 1, 1, tzinfo=UTC) - DAY, datetime(year + 1, 1, 8, tzinfo=UTC)), False


# ------------------------------------------------------------------ relative
def _count(text: str | None) -> int:
    if not text:
        return 1
    text = " ".join(text.lower().split())
    return int(text) if text.isdigit() else _NUMBERS.get(text, 1)


def _ago(m: re.Match[str], anchor: datetime) -> Window | None:
    n, unit = _count(m["num"]), _UNITS[m["unit"].lower()]
    if n > 400:
        return None
    centre = _midnight(anchor) - timedelta(days=n * unit)
    half = timedelta(days=max(1.0, unit / 2 + n * unit / 10))
    return centre - half, centre + half + DAY


def _past_n(m: re.Match[str], anchor: datetime) -> Window | None:
    n, unit = _count(m["num"]), _UNITS[m["unit"].lower()]
    return anchor - timedelta(days=n * unit + 1), anchor + DAY


def _the_unit_before(m: re.Match[str], anchor: datetime) -> Window | None:
    unit = _UNITS[m["unit"].lower()]
    return _midnight(anchor) - timedelta(days=unit + 2), anchor + DAY


def _last_unit(m: re.Match[str], anchor: datetime) -> Window | None:
    rel, unit = " ".join(m["rel"].lower().split()), m["unit"].lower()
    today = _midnight(anchor)
    this = rel == "this"
    if unit in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday())
        start = monday if this else monday - timedelta(days=7)
        if unit == "weekend":
            start += timedelta(days=5)
            if this and start > today:
                start -= timedelta(days=7)
            return start - DAY, start + timedelta(days=4)
        return start - DAY, start + timedelta(days=10)
    if unit == "month":
        year, month = today.year, today.month
        if not this:
            year, month = (year, month - 1) if month > 1 else (year - 1, 12)
        return _month(year, month, pad_days=7)
    year = today.year if this else today.year - 1
    return datetime(year, 1, 1, tzinfo=UTC) - DAY, datetime(year + 1, 1, 15, tzinfo=UTC)


def _weekday(m: re.Match[str], anchor: datetime) -> Window | None:
    today = _midnight(anchor)
    back = (today.weekday() - _WEEKDAYS.index(m["wd"].lower())) % 7 or 7
    day = today - timedelta(days=back)
    return day - DAY, day + 2 * DAY


def _day_word(m: re.Match[str], anchor: datetime) -> Window | None:
    today = _midnight(anchor)
    day = today - DAY if m["w"].lower() == "yesterday" else today
    return day - DAY, day + 2 * DAY


def _midnight(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


_ABSOLUTE = (
    (_ISO, _iso),
    (_DAY_MONTH, _day_month),
    (_MONTH_DAY, _day_month),
    (_MONTH_YEAR, _month_year),
    (_SEASON, _season),
    (_IN_MONTH, _in_month),
    (_YEAR_ALONE, _year),
)
_RELATIVE = (
    (_AGO, _ago),
    (_PAST_N, _past_n),
    (_THE_UNIT_BEFORE, _the_unit_before),
    (_LAST_UNIT, _last_unit),
    (_WEEKDAY, _weekday),
    (_DAY_WORD, _day_word),
)
