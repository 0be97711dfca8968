from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest

from app.domain.compression import calibration
from app.domain.compression.calibration import (
    MAX_OBSERVATIONS,
    MAX_OVERHEAD_WINDOW_SHARE,
    Calibration,
    calibration_for,
    is_plausible_count,
    is_truncated_prompt,
    max_overhead,
    record_real_baseline,
    reset_registry,
)


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    reset_registry()
    yield
    reset_registry()


def test_fallback_is_chars_over_1_8() -> None:
    calib = Calibration()
    assert calib.estimate(1800) == 1000
    assert calib.estimate(1) == 1
    assert calib.estimate(1000) == math.ceil(1000 / 1.8)
    assert calib.estimate(0) == 0
    assert not calib.is_fitted


def test_single_observation_is_not_enough() -> None:
    calib = Calibration()
    calib.record(10_000, 4000)
    assert calib.fit() is None
    assert calib.estimate(18_000) == 10_000


def test_fit_recovers_a_line() -> None:
    calib = Calibration()
    calib.record(10_000, 500 + 4000)
    calib.record(20_000, 500 + 8000)
    overhead, slope = calib.fit() or (0.0, 0.0)
    assert slope == pytest.approx(0.4)
    assert overhead == pytest.approx(500)
    assert calib.estimate(30_000) == 12_500


def test_needs_a_1_25x_spread() -> None:
    calib = Calibration()
    calib.record(10_000, 4_000)
    calib.record(12_000, 4_800)  # only 1.2× larger
    assert calib.fit() is None
    calib.record(12_500, 5_000)  # now 1.25×
    assert calib.fit() is not None


@pytest.mark.parametrize(
    ("second", "usable"),
    [
        (10_000 + 2_500 * 1, True),  # slope 1 token/char: upper bound accepted
        (10_000 + 2_500 * 2, False),  # 2 tokens/char: implausible
        (10_000 - 0, False),  # flat: 0 tokens/char
        (10_000 + 625, True),  # exactly 0.25 tokens/char
        (10_000 + 600, False),  # below 1 token per 4 chars
    ],
)
def test_slope_plausibility(second: int, usable: bool) -> None:
    calib = Calibration()
    calib.record(10_000, 10_000)
    calib.record(12_500, second)
    assert (calib.fit() is not None) is usable
    if not usable:
        assert calib.estimate(9000) == 5000  # fallback chars / 1.8


def test_observations_with_images_never_feed_the_fit() -> None:
    calib = Calibration()
    assert calib.record(10_000, 4_000)
    assert not calib.record(20_000, 60_000, had_images=True)
    assert len(calib.observations) == 1
    assert calib.fit() is None
    calib.record(20_000, 8_000)
    assert calib.fit() == pytest.approx((0.0, 0.4))


def test_nonpositive_values_are_ignored() -> None:
    calib = Calibration()
    assert not calib.record(0, 10)
    assert not calib.record(10, 0)
    assert not calib.record(-5, 10)
    assert len(calib.observations) == 0


def test_keeps_only_the_last_eight() -> None:
    calib = Calibration()
    # Old, implausible observations (2 tokens/char) …
    for i in range(MAX_OBSERVATIONS):
        calib.record(1000 * (i + 1), 2000 * (i + 1))
    assert calib.fit() is None
    # … are pushed out by eight honest ones.
    for i in range(MAX_OBSERVATIONS):
        calib.record(1000 * (i + 1), 100 + 500 * (i + 1))
    assert len(calib.observations) == MAX_OBSERVATIONS == 8
    assert calib.fit() == pytest.approx((100.0, 0.5))
    # The ninth observation evicts the oldest one.
    calib.record(9000, 100 + 500 * 9)
    assert len(calib.observations) == 8
    assert calib.observations[0] == (2000, 1100)
    assert calib.fit() == pytest.approx((100.0, 0.5))


def test_estimate_never_negative() -> None:
    calib = Calibration()
    calib.record(10_000, 1_000)
    calib.record(20_000, 6_000)  # slope 0.5, overhead -4000
    assert calib.estimate(100) == 0
    assert calib.estimate(20_000) == 6_000


def test_delta_and_char_conversion_use_the_marginal_rate() -> None:
    calib = Calibration()
    assert calib.estimate_delta(180) == 100
    assert calib.chars_for_tokens(100) == 180
    calib.record(10_000, 3_000 + 2_500)
    calib.record(20_000, 3_000 + 5_000)
    assert calib.estimate_delta(1000) == 250  # no overhead added
    assert calib.chars_for_tokens(250) == 1000
    assert calib.estimate_delta(0) == 0
    assert calib.chars_for_tokens(0) == 0


def test_registry_is_per_model_and_resettable() -> None:
    a = calibration_for("qwen")
    assert calibration_for("qwen") is a
    b = calibration_for("llama")
    assert b is not a
    a.record(10_000, 5_000)
    a.record(20_000, 10_000)
    assert a.is_fitted and not b.is_fitted
    reset_registry()
    assert calibration_for("qwen") is not a
    assert not calibration_for("qwen").is_fitted


def test_truncation_threshold_is_70_percent() -> None:
    assert is_truncated_prompt(6_999, 10_000, window=16_384)
    assert not is_truncated_prompt(7_000, 10_000, window=16_384)
    assert not is_truncated_prompt(12_000, 10_000, window=16_384)
    assert not is_truncated_prompt(5, 0, window=16_384)  # nothing to compare with


def test_a_count_far_below_a_cut_prompt_is_not_a_truncation() -> None:
    """A cut prompt reports about half the window; a count under a quarter of it is a
    partial count (cached tokens left out), not a cut."""
    assert is_truncated_prompt(4_096, 10_000, window=16_384)
    assert not is_truncated_prompt(4_095, 10_000, window=16_384)
    assert not is_truncated_prompt(40, 10_000, window=16_384)


def test_record_real_baseline_rejects_truncated_prompts() -> None:
    recorded = record_real_baseline(
        "m", chars=100_000, prompt_eval_count=16_000, sent_tokens=40_000, had_images=False
    )
    assert recorded is False
    assert len(calibration_for("m").observations) == 0


def test_record_real_baseline_records_honest_prompts() -> None:
    assert record_real_baseline(
        "m", chars=10_000, prompt_eval_count=5_000, sent_tokens=5_500, had_images=False
    )
    assert list(calibration_for("m").observations) == [(10_000, 5_000)]
    assert len(calibration_for("other").observations) == 0


def test_record_real_baseline_with_images_is_honest_but_not_fitted() -> None:
    assert record_real_baseline(
        "m", chars=10_000, prompt_eval_count=9_000, sent_tokens=9_100, had_images=True
    )
    assert len(calibration_for("m").observations) == 0


# -- issue 42, review item 1: a user's own line, bounded --------------------------------


def test_each_user_has_their_own_line() -> None:
    alice = calibration_for("qwen", "alice")
    assert calibration_for("qwen", "alice") is alice
    bob = calibration_for("qwen", "bob")
    unscoped = calibration_for("qwen")
    assert bob is not alice and unscoped is not alice and unscoped is not bob
    alice.record(1000, 1_000_300)
    alice.record(2000, 1_000_600)
    assert alice.is_fitted and not bob.is_fitted
    assert bob.estimate(18, window=4096) == 10
    assert record_real_baseline(
        "qwen", chars=10_000, prompt_eval_count=5_000, sent_tokens=0, had_images=False,
        user_id="bob",
    )  # fmt: skip
    assert list(bob.observations) == [(10_000, 5_000)]
    assert len(alice.observations) == 2


def test_the_registry_keeps_the_most_recently_used_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibration, "MAX_CALIBRATIONS", 3)
    a, b, c = (calibration_for("m", u) for u in ("a", "b", "c"))
    assert calibration_for("m", "a") is a  # used again: now the most recent
    calibration_for("m", "d")  # over the cap: the least recently used goes (b)
    assert len(calibration._REGISTRY) == 3
    assert calibration_for("m", "a") is a and calibration_for("m", "c") is c
    assert calibration_for("m", "b") is not b


def test_the_overhead_is_held_to_half_the_window() -> None:
    calib = Calibration()
    calib.record(1000, 1_000_300)  # the review's forged reports: slope 0.3, 1M overhead
    calib.record(2000, 1_000_600)
    overhead, slope = calib.fit() or (0.0, 0.0)
    assert overhead == pytest.approx(1_000_000) and slope == pytest.approx(0.3)
    assert calib.fit(window=4096) == pytest.approx((2048, 0.3))
    assert max_overhead(4096) == 2048 == MAX_OVERHEAD_WINDOW_SHARE * 4096
    assert calib.estimate(10, window=4096) == 2051
    assert calib.estimate(10, window=32_768) == 16_387
    # an honest line below the bound is not changed by it
    honest = Calibration()
    honest.record(10_000, 500 + 4000)
    honest.record(20_000, 500 + 8000)
    assert honest.estimate(30_000, window=4096) == honest.estimate(30_000) == 12_500


@pytest.mark.parametrize("window", [2048, 4096, 32_768, 131_072])
def test_no_reports_push_an_estimate_past_its_bound(window: int) -> None:
    """Whatever a client reports, an estimate of `chars` characters for a `window`-token
    model is at most `chars` (1 token a character) + half the window."""
    rng = random.Random(window)
    for _ in range(300):
        calib = Calibration()
        for _ in range(rng.randint(2, MAX_OBSERVATIONS)):
            calib.record(rng.randint(1, 200_000), rng.choice([1, 10**3, 10**6, 2**31 - 1]))
            calib.record(rng.randint(1, 200_000), rng.randint(1, 2**31 - 1))
        for chars in (1, 10, 1000, 50_000):
            assert calib.estimate(chars, window=window) <= chars + window // 2 + 1
            assert calib.estimate_delta(chars) <= chars


def test_a_count_no_tokenizer_could_make_is_implausible() -> None:
    # at most 4 tokens a character (one a UTF-8 byte) + half the window (+ the images)
    assert is_plausible_count(4 * 1000 + 2048, 1000, 4096)
    assert not is_plausible_count(4 * 1000 + 2049, 1000, 4096)
    assert is_plausible_count(4 * 1000 + 2049, 1000, 4096, images=1)
    assert not is_plausible_count(1_000_300, 1000, 4096)  # the review's probe
    assert is_plausible_count(60_000, 10, 131_072)  # a huge tool schema on a big window
