from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from app.domain.rolling.summary import (
    MAX_DECISIONS,
    SummaryParseError,
    TranscriptMessage,
    chunk_messages,
    exchanges,
    normalize_decision,
    normalize_summary,
    parse_noise,
    parse_summary,
    recent_window,
    render_message,
    summary_block,
)

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def msg(i: int, role: str, text: str = "x", minute: int | None = None) -> TranscriptMessage:
    return TranscriptMessage(i, role, text, T0 + timedelta(minutes=i if minute is None else minute))


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("Do: reply in English", "Do: reply in English"),
        ("do:reply in English", "Do: reply in English"),
        ("Don't: use tabs", "Don't: use tabs"),
        ("Dont: use tabs", "Don't: use tabs"),
        ("Don’t: use tabs", "Don't: use tabs"),
        ("Do not: push to main", "Don't: push to main"),
        ("- Do: keep tests green", "Do: keep tests green"),
        ("要：使用繁體中文", "Do: 使用繁體中文"),
        ("不要：使用簡體字", "Don't: 使用簡體字"),
        ("しない：絵文字", "Don't: 絵文字"),
        ("する：敬語を使う", "Do: 敬語を使う"),
        ("Never force-push", "Don't: force-push"),
        ("Use 4 spaces", "Do: Use 4 spaces"),
        ("1. Avoid long functions", "Do: Avoid long functions"),
        ("Do:   ", None),
        ("", None),
        (42, None),
    ],
)
def test_decisions_always_carry_the_english_marker(raw: object, want: str | None) -> None:
    assert normalize_decision(raw) == want


def test_at_most_eight_decisions_deduplicated() -> None:
    raw = {
        "key_decisions": [f"Do: rule {i}" for i in range(12)] + ["do: RULE 0"],
        "past_discussions": "one topic",
        "current_discussion": ["part a", "part b"],
    }
    doc = normalize_summary(raw)
    assert len(doc["key_decisions"]) == MAX_DECISIONS
    assert doc["key_decisions"][0] == "Do: rule 0"
    assert all(d.startswith(("Do: ", "Don't: ")) for d in doc["key_decisions"])
    assert doc["past_discussions"] == ["one topic"]
    assert doc["current_discussion"] == "part a part b"
    assert normalize_summary("garbage") == {
        "key_decisions": [],
        "past_discussions": [],
        "current_discussion": "",
    }


def test_parse_summary_tolerates_fences_and_rejects_junk() -> None:
    doc = parse_summary(
        '```json\n{"key_decisions": ["Never use tabs"], "current_discussion": "x"}\n```'
    )
    assert doc["key_decisions"] == ["Don't: use tabs"]
    with pytest.raises(SummaryParseError):
        parse_summary("I could not summarise this.")
    with pytest.raises(SummaryParseError):
        parse_summary('{"key_decisions": [')
    with pytest.raises(SummaryParseError):
        parse_summary('{"answer": 42}')


def test_chunks_never_end_on_a_user_message() -> None:
    msgs = [msg(i, ("user", "assistant")[i % 2], "w" * 300) for i in range(10)]
    per = len(render_message(msgs[0])) + 2
    chunks = chunk_messages(msgs, max_chars=per * 3)  # room for 3 messages
    assert [len(c) for c in chunks] == [2, 2, 2, 2, 2]
    assert all(c[-1].role != "user" for c in chunks)
    # a trailing user message waits for its answer
    chunks = chunk_messages(msgs[:5], max_chars=per * 3)
    assert [m.sequence_number for c in chunks for m in c] == [0, 1, 2, 3]


def test_chunks_respect_the_size_and_keep_tool_runs_together() -> None:
    msgs = [
        msg(0, "user", "a" * 100),
        msg(1, "assistant", "b" * 100),
        msg(2, "tool", "c" * 100),
        msg(3, "assistant", "d" * 100),
        msg(4, "user", "e" * 100),
        msg(5, "assistant", "f" * 100),
    ]
    size = sum(len(render_message(m)) + 2 for m in msgs[:4])
    chunks = chunk_messages(msgs, max_chars=size)
    assert [[m.sequence_number for m in c] for c in chunks] == [[0, 1, 2, 3], [4, 5]]
    assert all(sum(len(render_message(m)) + 2 for m in c) <= size for c in chunks)


def test_equal_timestamps_may_split_and_oversized_stretch() -> None:
    # one append: user + assistant share a timestamp with the next user message; the
    # cursor is a sequence number, so the chunk may end between them
    msgs = [msg(0, "user", minute=0), msg(1, "assistant", minute=1), msg(2, "user", minute=1)]
    msgs += [msg(3, "assistant", minute=2)]
    per = len(render_message(msgs[0])) + 2
    chunks = chunk_messages(msgs, max_chars=per * 2)
    assert [[m.sequence_number for m in c] for c in chunks] == [[0, 1], [2, 3]]
    # no allowed end within the size (a run of user messages): one oversized chunk
    msgs = [msg(0, "user"), msg(1, "user"), msg(2, "user"), msg(3, "assistant")]
    chunks = chunk_messages(msgs, max_chars=per * 2)
    assert [[m.sequence_number for m in c] for c in chunks] == [[0, 1, 2, 3]]


def test_exchanges_and_noise_answer() -> None:
    msgs = [msg(0, "assistant"), msg(1, "user"), msg(2, "assistant"), msg(3, "user")]
    assert [[m.sequence_number for m in g] for g in exchanges(msgs)] == [[0], [1, 2], [3]]
    prev = {
        "key_decisions": ["Do: a", "Do: b"],
        "past_discussions": ["p1"],
        "current_discussion": "",
    }
    drop, trimmed = parse_noise(
        '{"noise": [{"exchange": 2, "confidence": 0.9}, {"exchange": 3, "confidence": 0.5},'
        ' {"exchange": 9, "confidence": 1}], "superseded_decisions": [1]}',
        3,
        prev,
    )
    assert drop == {2}
    assert trimmed["key_decisions"] == ["Do: b"] and trimmed["past_discussions"] == ["p1"]
    with pytest.raises(SummaryParseError):
        parse_noise("no idea", 3, prev)


def test_summary_block_and_recent_window() -> None:
    assert summary_block(None) is None
    assert (
        summary_block({"key_decisions": [], "past_discussions": [], "current_discussion": ""})
        is None
    )
    block = summary_block({"key_decisions": ["reply briefly"], "current_discussion": "deploy"})
    assert block is not None and block.startswith("Prior summary (JSON)")
    assert '"Do: reply briefly"' in block and "```json" in block
    rows = [SimpleNamespace(role=r) for r in ["user", "assistant", "tool", "assistant", "user"]]
    assert [r.role for r in recent_window(rows, 3)] == ["assistant", "user"]
    assert [r.role for r in recent_window(rows, 4)] == ["assistant", "tool", "assistant", "user"]
    assert recent_window(rows, 0) == []
