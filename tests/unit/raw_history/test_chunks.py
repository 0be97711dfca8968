from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.raw_history.chunks import (
    CHUNK_MAX_CHARS,
    CHUNK_MESSAGE_MAX_CHARS,
    ChunkMessage,
    RawChunk,
    build_chunks,
    elide_middle,
    message_prefix,
    split_text,
)

T0 = datetime(2026, 11, 6, 18, 0, tzinfo=UTC)


def msg(seq: int, role: str = "user", content: str = "hello", **kw: object) -> ChunkMessage:
    created = kw.pop("created_at", T0 + timedelta(minutes=seq))
    return ChunkMessage(role, content, seq, created_at=created, **kw)  # type: ignore[arg-type]


def test_prefixes_and_packing_into_one_chunk() -> None:
    messages = [
        msg(1, "user", "Which port?"),
        msg(2, "assistant", "Use 8099."),
        msg(3, "tool", '{"ok": true}', name="shell"),
        msg(4, "tool", "done"),
    ]
    [chunk] = build_chunks(messages, ["8099", "server_port"])
    assert chunk.content == (
        "User: Which port?\n\nAssistant: Use 8099.\n\n"
        'Tool result (shell): {"ok": true}\n\nTool result: done'
    )
    assert (chunk.start_seq, chunk.end_seq) == (1, 4)
    assert chunk.started_at == T0 + timedelta(minutes=1)
    assert chunk.ended_at == T0 + timedelta(minutes=4)
    assert chunk.content_hash == hashlib.sha256(chunk.content.encode()).hexdigest()
    assert chunk.breadcrumbs == ("8099", "server_port")


@pytest.mark.parametrize(
    "skipped",
    [
        msg(2, "system", "You are Navi."),
        msg(2, "assistant", "Summary of earlier turns", is_summary=True),
        msg(2, "user", "[context compressed]", is_compression=True),
        msg(2, "assistant", ""),
        msg(2, "assistant", "   \n  "),
        msg(2, "developer", "internal"),
    ],
    ids=["system", "summary", "compression", "empty", "blank", "unknown-role"],
)
def test_skipped_messages(skipped: ChunkMessage) -> None:
    [chunk] = build_chunks([msg(1, "user", "a"), skipped, msg(3, "assistant", "b")])
    assert chunk.content == "User: a\n\nAssistant: b"
    assert (chunk.start_seq, chunk.end_seq) == (1, 3)


def test_nothing_to_keep_gives_no_chunks() -> None:
    assert build_chunks([]) == []
    assert build_chunks([msg(1, "system", "x"), msg(2, "user", "")]) == []


def test_role_case_insensitive() -> None:
    assert message_prefix("USER") == "User: "
    assert message_prefix(" Assistant ") == "Assistant: "
    assert message_prefix("tool", "grep") == "Tool result (grep): "
    assert message_prefix("system") is None


def test_packs_greedily_up_to_limit() -> None:
    body = "x" * 1990  # "User: " + 1990 = 1996 chars; two fit with the separator
    chunks = build_chunks([msg(i, "user", body) for i in range(1, 6)])
    assert [(c.start_seq, c.end_seq) for c in chunks] == [(1, 2), (3, 4), (5, 5)]
    assert all(len(c.content) <= CHUNK_MAX_CHARS for c in chunks)
    assert len(chunks[0].content) == 2 * 1996 + 2


def test_exactly_at_limit_fits() -> None:
    first = "a" * (CHUNK_MAX_CHARS - len("User: "))
    [only] = build_chunks([msg(1, "user", first)])
    assert len(only.content) == CHUNK_MAX_CHARS


def test_sorted_by_sequence_number() -> None:
    [chunk] = build_chunks([msg(2, "assistant", "second"), msg(1, "user", "first")])
    assert chunk.content == "User: first\n\nAssistant: second"
    assert (chunk.start_seq, chunk.end_seq) == (1, 2)


def test_long_message_becomes_its_own_chunks_split_on_lines() -> None:
    lines = [f"line {i:04d} " + "y" * 90 for i in range(80)]  # 80 * 100 = ~8000 chars
    long_text = "\n".join(lines)
    chunks = build_chunks(
        [msg(1, "user", "short"), msg(2, "tool", long_text, name="cat"), msg(3, "user", "after")]
    )
    assert chunks[0].content == "User: short"
    middle = chunks[1:-1]
    assert len(middle) == 3
    assert all(len(c.content) <= CHUNK_MAX_CHARS for c in chunks)
    assert all((c.start_seq, c.end_seq) == (2, 2) for c in middle)
    assert middle[0].content.startswith("Tool result (cat): line 0000")
    assert all(c.content.split("\n")[-1].endswith("y" * 90) for c in middle)  # whole lines
    assert chunks[-1].content == "User: after"
    joined = "\n".join(c.content for c in middle)
    assert joined == "Tool result (cat): " + long_text


def test_single_message_capped_with_middle_elided() -> None:
    text = "HEAD" + "m" * 20_000 + "TAIL"
    capped = elide_middle(text)
    assert len(capped) == CHUNK_MESSAGE_MAX_CHARS
    assert capped.startswith("HEAD") and capped.endswith("TAIL")
    marker = re.search(r"\n…\[(\d+) chars elided\]…\n", capped)
    assert marker is not None
    assert int(marker[1]) == len(text) - (len(capped) - len(marker[0]))  # kept + elided = all
    chunks = build_chunks([msg(1, "assistant", text)])
    total = sum(len(c.content) for c in chunks)
    assert total <= CHUNK_MESSAGE_MAX_CHARS + len("Assistant: ")
    assert all(len(c.content) <= CHUNK_MAX_CHARS for c in chunks)
    assert "chars elided]" in "".join(c.content for c in chunks)


def test_elide_middle_keeps_short_text() -> None:
    assert elide_middle("short") == "short"
    assert elide_middle("x" * CHUNK_MESSAGE_MAX_CHARS) == "x" * CHUNK_MESSAGE_MAX_CHARS


def test_split_text_fallbacks() -> None:
    assert split_text("abcdefghij", 4) == ["abcd", "efgh", "ij"]  # no whitespace: hard cut
    assert split_text("aa bb cc dd", 6) == ["aa bb ", "cc dd"]  # word boundary
    assert split_text("a\nbbbbbbb", 4) == ["a\n", "bbbb", "bbb"]
    with pytest.raises(ValueError):
        split_text("x", 0)


def test_timestamps_none_tolerated() -> None:
    [chunk] = build_chunks(
        [msg(1, created_at=None), msg(2, created_at=T0), msg(3, created_at=None)]
    )
    assert chunk.started_at == T0 and chunk.ended_at == T0
    [empty] = build_chunks([msg(1, created_at=None)])
    assert empty.started_at is None and empty.ended_at is None


def test_deterministic_hashes() -> None:
    messages = [msg(i, "user" if i % 2 else "assistant", f"turn {i} " * 300) for i in range(10)]
    first, second = build_chunks(messages, ["k"]), build_chunks(list(messages), ["k"])
    assert first == second
    assert len({c.content_hash for c in first}) == len(first)


roles = st.sampled_from(["user", "assistant", "tool", "system"])
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=6000) | st.just("z" * 13_000)


@given(st.lists(st.tuples(roles, texts), max_size=8))
def test_chunk_properties(items: list[tuple[str, str]]) -> None:
    messages = [msg(i, role, content) for i, (role, content) in enumerate(items)]
    chunks = build_chunks(messages)
    assert all(isinstance(c, RawChunk) for c in chunks)
    assert all(0 < len(c.content) <= CHUNK_MAX_CHARS for c in chunks)
    assert all(c.start_seq <= c.end_seq for c in chunks)
    seqs = [(c.start_seq, c.end_seq) for c in chunks]
    assert seqs == sorted(seqs)
    assert chunks == build_chunks(messages)
