from datetime import UTC, datetime, timedelta, timezone

from app.domain.history.search import (
    HistoryHit,
    HistoryResult,
    HistoryRow,
    fmt_time,
    merge_keyword,
    normalize_call,
    pick_neighbours,
    render,
)

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def row(seq: int, role: str = "user", text: str = "", searchable: bool = True) -> HistoryRow:
    return HistoryRow(
        seq, role, text or f"m{seq}", T0 + timedelta(minutes=seq), seq < 3, None, searchable
    )


def test_normalize_call() -> None:
    assert normalize_call(None, None, "port", None) == normalize_call(
        "search", "keyword", "port", 5
    )
    c = normalize_call(None, "SEMANTIC", "  x ", "50")
    assert (c.mode, c.match, c.query, c.limit) == ("search", "semantic", "x", 20)
    c = normalize_call("weird", "fuzzy", "", True)
    assert (c.mode, c.match, c.limit) == ("recent", "keyword", 5)


def test_neighbours_skip_non_searchable_rows() -> None:
    rows = [row(5), row(6, "system", searchable=False), row(7), row(8), row(9), row(10), row(11)]
    before, after = pick_neighbours(9, rows)
    assert [r.sequence_number for r in before] == [7, 8]
    assert [r.sequence_number for r in after] == [10]
    before, after = pick_neighbours(8, rows)
    assert [r.sequence_number for r in before] == [5, 7]  # 6 is a system row
    before, after = pick_neighbours(11, rows)
    assert after == ()


def test_merge_keyword_dedupes_and_limits() -> None:
    hits = merge_keyword([row(4), row(2)], [row(2), row(9), row(1)], 3)
    assert [(h.row.sequence_number, h.kind) for h in hits] == [
        (4, "fulltext"),
        (2, "fulltext"),
        (9, "substring"),
    ]


def test_times_are_utc() -> None:
    local = datetime(2026, 11, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert fmt_time(local) == "2026-11-01T12:00:00Z"


def test_render() -> None:
    hit = HistoryHit(
        row=row(8, "assistant", "the port is 8098"),
        kind="semantic",
        score=0.8123,
        before=(row(6), row(7, "assistant")),
        after=(row(9),),
    )
    text = render(HistoryResult("search", "semantic", "port", 5, [hit]))
    lines = text.splitlines()
    assert lines[0] == 'chat_history search "port" (match=semantic): 1 hit(s)'
    assert lines[1] == "1. #8 assistant · 2026-11-01T12:08:00Z · similarity 0.81"
    assert lines[2:] == [
        "   #6 user: m6",
        "   #7 assistant: m7",
        " → #8 assistant:",
        "   the port is 8098",
        "   #9 user: m9",
    ]
    empty = render(HistoryResult("search", "keyword", "x", 5, [], fallback="why"))
    assert empty.splitlines()[1:] == ["note: why", "No messages found."]
    archived = render(HistoryResult("recent", None, "", 5, [HistoryHit(row(1), "recent")]))
    assert "#1 user · 2026-11-01T12:01:00Z · archived" in archived
