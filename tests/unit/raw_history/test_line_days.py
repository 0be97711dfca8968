"""The day of each line of a chunk spanning several days (`line_days`), and its marks in
the interleaved excerpt (`window.interleave_windows`)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from app.domain.kernel.hits import MemoryHit
from app.domain.raw_history.chunks import (
    CHUNK_MAX_CHARS,
    CHUNK_MESSAGE_MAX_CHARS,
    ChunkMessage,
    build_chunks,
)
from app.domain.raw_history.line_days import day_at, day_mark, day_starts, multi_day, with_days
from app.domain.raw_history.ranking import line_spans
from app.domain.raw_history.window import Focused, interleave_windows


def _at(day: int, hour: int = 12) -> datetime:
    return datetime(2023, 5, day, hour, tzinfo=UTC)


def _msgs() -> list[ChunkMessage]:
    return [
        ChunkMessage("user", "I went hiking.\n\nIt rained.", 0, _at(7)),
        ChunkMessage("assistant", "Sounds wet.", 1, _at(7, 13)),
        ChunkMessage("system", "a summary", 2, _at(8), is_summary=True),
        ChunkMessage("user", "I painted a lake.", 3, _at(9)),
        ChunkMessage("assistant", "", 4, _at(9)),  # no text: not in the chunk
        ChunkMessage("assistant", "Which lake?", 5, _at(9, 14)),
    ]


def test_day_starts_follow_the_messages_through_blank_lines() -> None:
    [chunk] = build_chunks(_msgs())
    starts = day_starts(chunk.content, reversed(_msgs()))  # any order
    assert starts == (
        (0, date(2023, 5, 7)),
        (chunk.content.index("User: I painted"), date(2023, 5, 9)),
    )
    days = [day_at(starts, a) for a, _ in line_spans(chunk.content)]
    assert days == [date(2023, 5, 7)] * 3 + [date(2023, 5, 9)] * 2


def test_no_days_when_the_text_is_not_rebuilt_or_one_day() -> None:
    [chunk] = build_chunks(_msgs())
    assert day_starts(chunk.content.replace("lake", "pond"), _msgs()) == ()
    assert day_starts(chunk.content, _msgs()[:2]) == ()  # messages missing
    same_day = [ChunkMessage("user", "a", 0, _at(7)), ChunkMessage("user", "b", 1, _at(7, 20))]
    [one] = build_chunks(same_day)
    assert day_starts(one.content, same_day) == ()
    assert (
        not multi_day(_at(7), _at(7, 23))
        and multi_day(_at(7), _at(8))
        and not multi_day(None, _at(8))
    )


def test_a_message_split_over_chunks_gives_no_days() -> None:
    long = "x " * CHUNK_MESSAGE_MAX_CHARS
    msgs = [ChunkMessage("user", "hi", 0, _at(7)), ChunkMessage("tool", long, 1, _at(8), name="ls")]
    chunks = build_chunks(msgs)
    # the elided message is longer than a chunk: it is split, one message a piece
    assert all(day_starts(c.content, msgs) == () for c in chunks)
    short = [ChunkMessage("user", "hi", 0, _at(7)), ChunkMessage("user", "y" * 100, 1, _at(8))]
    [chunk] = build_chunks(short)
    assert len(chunk.content) < CHUNK_MAX_CHARS
    assert [d for _, d in day_starts(chunk.content, short)] == [date(2023, 5, 7), date(2023, 5, 8)]


def test_with_days_sets_only_multi_day_hits() -> None:
    [chunk] = build_chunks(_msgs())
    msgs = {("s1", m.sequence_number): m for m in _msgs()}

    def hit(start: datetime) -> MemoryHit:
        return MemoryHit(
            "raw",
            chunk.content,
            session_id="s1",
            timestamp=_at(9, 14),
            started_at=start,
            start_seq=0,
            end_seq=5,
        )

    multi, single = with_days([hit(_at(7)), hit(_at(9))], msgs)
    assert len(multi.day_starts) == 2 and single.day_starts == ()


def test_interleaved_lines_are_marked_with_their_day() -> None:
    [chunk] = build_chunks(_msgs())
    text = chunk.content
    spans = line_spans(text)
    starts = day_starts(text, _msgs())
    # the best line is of 9 May, then one of 7 May, then another of 7 May
    focus = (spans[3], spans[0], spans[1])
    [run] = interleave_windows([Focused(text, focus, (0.9, 0.8, 0.7), starts)], 4000, after=0)
    assert run.body.splitlines() == [
        "[05-09] User: I painted a lake.",
        "…",
        "[05-07] User: I went hiking.",
        "It rained.",
    ]
    # without days: as before
    [plain] = interleave_windows([Focused(text, focus, (0.9, 0.8, 0.7))], 4000, after=0)
    assert plain.body.splitlines()[0] == "User: I painted a lake."


def test_the_marks_count_in_the_budget() -> None:
    [chunk] = build_chunks(_msgs())
    text = chunk.content
    spans = line_spans(text)
    line = "User: I painted a lake."
    focus = (spans[3],)
    assert interleave_windows([Focused(text, focus, (0.9,))], len(line) + 1, after=0)
    marked = [Focused(text, focus, (0.9,), day_starts(text, _msgs()))]
    assert interleave_windows(marked, len(line) + 1, after=0) == []
    assert interleave_windows(marked, len(line) + 9, after=0)


def test_a_mark_names_the_year_when_the_chunk_crosses_one() -> None:
    starts = ((0, date(2022, 12, 31)), (10, date(2023, 1, 2)))
    assert day_mark(date(2023, 1, 2), starts) == "[2023-01-02] "
    assert day_mark(date(2023, 1, 2), ((0, date(2023, 1, 1)), (10, date(2023, 1, 2)))) == (
        "[01-02] "
    )
