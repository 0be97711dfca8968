from __future__ import annotations

import math

import pytest

from app.domain.compression import Calibration, Msg
from app.domain.compression.estimate import (
    ContextTooLargeError,
    added_tokens,
    check_context_size,
    context_chars,
    context_limit,
    estimate_tokens,
    message_chars,
    real_baseline_estimate,
    tool_calls_json,
    truncate_for_view,
    view_budget_tokens,
)

from .images import png


def fitted(overhead: int = 1000, slope: float = 0.5) -> Calibration:
    calib = Calibration()
    calib.record(10_000, int(overhead + 10_000 * slope))
    calib.record(20_000, int(overhead + 20_000 * slope))
    return calib


def test_message_chars_counts_role_content_calls_and_names() -> None:
    call = [{"function": {"name": "read_file", "arguments": {"path": "/tmp/x"}}}]
    msg = Msg("assistant", "hi", tool_calls=call)
    assert message_chars(msg) == len("assistant") + 2 + len(tool_calls_json(call))
    tool = Msg("tool", "result", name="read_file", tool_call_id="c1")
    assert message_chars(tool) == 4 + 6 + 9 + 2
    assert context_chars([msg, tool]) == message_chars(msg) + message_chars(tool)
    assert tool_calls_json(None) == ""


def test_message_chars_ignores_images() -> None:
    assert message_chars(Msg("user", "x", images=[png(100, 100)])) == message_chars(
        Msg("user", "x")
    )


def test_view_budget_defaults_to_a_sixth_of_the_window() -> None:
    assert view_budget_tokens(60_000, 0) == 10_000
    assert view_budget_tokens(60_000) == 10_000
    assert view_budget_tokens(60_000, 3000) == 3000
    assert view_budget_tokens(5, 0) == 1


def test_truncate_for_view_leaves_small_messages_alone() -> None:
    msg = Msg("tool", "x" * 100)
    assert truncate_for_view(msg, 100, Calibration()) is msg


def test_truncate_for_view_cuts_head_and_tail() -> None:
    calib = Calibration()  # 1.8 chars per token
    content = "H" * 50_000 + "M" * 100_000 + "T" * 50_000
    msg = Msg("tool", content, metadata={"k": 1})
    view = truncate_for_view(msg, 1000, calib)
    assert view is not msg
    assert msg.content == content  # input untouched
    assert len(view.content) <= 1800
    assert view.content.startswith("H" * 500)
    assert view.content.endswith("T" * 500)
    assert "chars omitted" in view.content
    assert view.metadata == {"k": 1, "view_truncated_from": len(content)}
    assert msg.metadata == {"k": 1}


def test_truncate_for_view_tiny_budget() -> None:
    view = truncate_for_view(Msg("user", "abcdefghij" * 10), 2, Calibration())
    assert view.content == "abc"  # 2 tokens → 3 chars, no room for a marker


def test_estimate_prices_the_view_not_the_raw_row() -> None:
    calib = Calibration()
    huge = Msg("tool", "x" * 1_000_000)
    window = 60_000
    est = estimate_tokens([huge], calib, window=window)
    # Budget: 10_000 tokens → 18_000 chars, not ~555k tokens.
    assert est <= math.ceil((18_000 + 4) / 1.8)
    assert est > 9_000
    assert estimate_tokens([huge], calib, window=window, message_budget=100) < 200


def test_estimate_adds_each_image_by_its_area() -> None:
    calib = Calibration()
    text_only = estimate_tokens([Msg("user", "look")], calib, window=100_000)
    with_images = estimate_tokens(
        [Msg("user", "look", images=[png(1024, 1024), png(512, 512), b"??"])],
        calib,
        window=100_000,
    )
    assert with_images == text_only + 1026 + 258 + 1024
    custom = estimate_tokens(
        [Msg("user", "look", images=[b"??"])], calib, window=100_000, image_fallback=10
    )
    assert custom == text_only + 10


def test_estimate_empty_and_fitted() -> None:
    assert estimate_tokens([], Calibration(), window=1000) == 0
    calib = fitted(overhead=1000, slope=0.5)
    msgs = [Msg("user", "a" * 996)]  # 1000 chars with the role
    assert estimate_tokens(msgs, calib, window=100_000) == 1500


def test_the_overhead_is_counted_once_per_prompt() -> None:
    """A part of the prompt priced apart (the system prompt, memory notes) adds its
    characters at the marginal rate: the prompt's overhead is in the rest's estimate."""
    calib = fitted(overhead=1000, slope=0.5)
    notes = [Msg("system", "n" * 994)]  # 1000 chars with the role
    assert added_tokens(notes, calib, window=100_000) == 500
    assert added_tokens([], calib, window=100_000) == 0
    msgs = [Msg("user", "a" * 996)]
    whole = estimate_tokens(msgs + notes, calib, window=100_000)
    assert whole == estimate_tokens(msgs, calib, window=100_000) + added_tokens(
        notes, calib, window=100_000
    )
    # the overhead of a forged line is held to half the window of the estimate
    forged = fitted(overhead=1_000_000, slope=0.3)
    assert estimate_tokens(msgs, forged, window=4096) == 2048 + 300


def test_real_baseline_adds_only_the_delta() -> None:
    calib = fitted(overhead=1000, slope=0.5)
    msgs = [Msg("user", "a" * 96), Msg("assistant", "b" * 91), Msg("user", "c" * 196)]
    est = real_baseline_estimate(
        msgs, baseline_tokens=5000, baseline_count=2, calib=calib, window=100_000
    )
    assert est == 5000 + 100  # 200 chars × 0.5, no second overhead


def test_real_baseline_delta_includes_images_and_view() -> None:
    calib = Calibration()
    msgs = [Msg("user", "hi"), Msg("tool", "z" * 1_000_000, images=[png(1024, 1024)])]
    est = real_baseline_estimate(
        msgs, baseline_tokens=100, baseline_count=1, calib=calib, window=6000, message_budget=50
    )
    assert est == 100 + math.ceil(message_chars(truncate_for_view(msgs[1], 50, calib)) / 1.8) + 1026


@pytest.mark.parametrize(("tokens", "count"), [(None, 2), (0, 2), (5000, 0), (5000, 5)])
def test_real_baseline_falls_back_to_full_estimate(tokens: int | None, count: int) -> None:
    calib = Calibration()
    msgs = [Msg("user", "a" * 100), Msg("assistant", "b" * 100)]
    est = real_baseline_estimate(
        msgs, baseline_tokens=tokens, baseline_count=count, calib=calib, window=10_000
    )
    assert est == estimate_tokens(msgs, calib, window=10_000)


def test_real_baseline_with_no_new_messages_is_the_baseline() -> None:
    msgs = [Msg("user", "a")]
    est = real_baseline_estimate(
        msgs, baseline_tokens=777, baseline_count=1, calib=Calibration(), window=10_000
    )
    assert est == 777


def test_context_limit_caps_reserve_at_a_quarter_window() -> None:
    assert context_limit(32_768, 2048) == 30_720
    assert context_limit(4000, 2048) == 3000  # reserve capped at 1000
    assert context_limit(4000, -5) == 4000


def test_check_context_size_passes_at_the_limit() -> None:
    check_context_size(30_720, 32_768, 2048)
    check_context_size(3000, 4000, 2048)


def test_check_context_size_raises_over_the_limit() -> None:
    with pytest.raises(ContextTooLargeError) as info:
        check_context_size(30_721, 32_768, 2048)
    err = info.value
    assert err.tokens == 30_721
    assert err.limit == 30_720
    assert "30,721" in err.message and "30,720" in err.message
    assert "/compact" in err.message
    assert str(err) == err.message


def test_small_window_is_not_blocked_by_a_big_reserve() -> None:
    check_context_size(1500, 2000, 2048)  # limit = 2000 - 500
    with pytest.raises(ContextTooLargeError):
        check_context_size(1501, 2000, 2048)
