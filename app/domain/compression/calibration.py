"""Per-model calibration of the character → real-token relation.

Every window decision is made in real prompt tokens. Ollama reports the real
size of each prompt (``prompt_eval_count``); we remember the last few pairs
``(chars of the built context, real tokens)`` per model and fit a straight
line ``tokens ≈ overhead + chars × tokens_per_char`` through them. Until a
trustworthy line exists, a conservative ``chars / 1.8`` is used.

The registry is module-level on purpose: the post-turn worker builds a fresh
compressor for every pass, and the calibration must outlive it.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

__all__ = [
    "FALLBACK_CHARS_PER_TOKEN",
    "MAX_OBSERVATIONS",
    "MAX_TOKENS_PER_CHAR",
    "MIN_SIZE_SPREAD",
    "MIN_TOKENS_PER_CHAR",
    "TRUNCATION_RATIO",
    "Calibration",
    "calibration_for",
    "is_truncated_prompt",
    "record_real_baseline",
    "reset_registry",
]

MAX_OBSERVATIONS = 8
# The smallest and largest observed prompt must differ by at least this factor,
# otherwise the slope of the fit is dominated by noise.
MIN_SIZE_SPREAD = 1.25
# Plausible slope range: between 1 token per 4 chars and 1 token per char.
MIN_TOKENS_PER_CHAR = 0.25
MAX_TOKENS_PER_CHAR = 1.0
FALLBACK_CHARS_PER_TOKEN = 1.8
# A reported prompt_eval_count below this share of what we sent means Ollama
# silently cut the head of the prompt.
TRUNCATION_RATIO = 0.70
# A cut prompt reports about half the context Ollama ran with (num_ctx: the window). A
# count far below that is not a cut but a count of part of the prompt (Ollama releases
# that left KV-cached tokens out, a proxy, a fake): below this share of the window a
# short count is ignored — neither recorded nor taken for a truncation.
TRUNCATED_MIN_WINDOW_SHARE = 0.25


@dataclass
class Calibration:
    """Observed ``(chars, real_tokens)`` pairs for one model and the fit over them."""

    model: str = ""
    observations: deque[tuple[int, int]] = field(
        default_factory=lambda: deque(maxlen=MAX_OBSERVATIONS)
    )

    def record(self, chars: int, real_tokens: int, *, had_images: bool = False) -> bool:
        """Remember one real measurement; returns True when it entered the fit.

        Prompts that carried images are never used: image tokens are not part
        of ``chars`` and would skew both the intercept and the slope.
        Non-positive values are ignored as well.
        """
        if had_images or chars <= 0 or real_tokens <= 0:
            return False
        self.observations.append((int(chars), int(real_tokens)))
        return True

    def fit(self) -> tuple[float, float] | None:
        """Least-squares ``(overhead, tokens_per_char)`` or None when not usable."""
        obs = list(self.observations)
        if len(obs) < 2:
            return None
        xs = [float(c) for c, _ in obs]
        ys = [float(t) for _, t in obs]
        if min(xs) <= 0 or max(xs) / min(xs) < MIN_SIZE_SPREAD:
            return None
        n = float(len(obs))
        mean_x = sum(xs) / n
        mean_y = sum(ys) / n
        sxx = sum((x - mean_x) ** 2 for x in xs)
        if sxx <= 0:
            return None
        sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
        slope = sxy / sxx
        if not (MIN_TOKENS_PER_CHAR <= slope <= MAX_TOKENS_PER_CHAR):
            return None
        overhead = mean_y - slope * mean_x
        return overhead, slope

    @property
    def is_fitted(self) -> bool:
        return self.fit() is not None

    def tokens_per_char(self) -> float:
        """Marginal cost of one character (the slope, or the fallback rate)."""
        line = self.fit()
        return line[1] if line is not None else 1.0 / FALLBACK_CHARS_PER_TOKEN

    def estimate(self, chars: int) -> int:
        """Real-token estimate of a whole built prompt of ``chars`` characters."""
        if chars <= 0:
            return 0
        line = self.fit()
        if line is None:
            return math.ceil(chars / FALLBACK_CHARS_PER_TOKEN)
        overhead, slope = line
        return max(0, math.ceil(overhead + chars * slope))

    def estimate_delta(self, chars: int) -> int:
        """Tokens added by ``chars`` more characters on top of a measured prompt.

        Unlike :meth:`estimate` this never adds the fitted overhead: the
        overhead (prompt template, tool schemas) is already inside a real
        baseline.
        """
        if chars <= 0:
            return 0
        return math.ceil(chars * self.tokens_per_char())

    def chars_for_tokens(self, tokens: int) -> int:
        """How many characters fit into ``tokens`` at the marginal rate."""
        if tokens <= 0:
            return 0
        return int(tokens / self.tokens_per_char())


_REGISTRY: dict[str, Calibration] = {}


def calibration_for(model: str) -> Calibration:
    """The calibration of ``model`` (created empty on first use)."""
    calib = _REGISTRY.get(model)
    if calib is None:
        calib = Calibration(model=model)
        _REGISTRY[model] = calib
    return calib


def reset_registry() -> None:
    """Forget every model's observations (tests, or a settings reload)."""
    _REGISTRY.clear()


def is_short_count(prompt_eval_count: int, sent_tokens: int) -> bool:
    """True when the server reports much less than we believe we sent."""
    return sent_tokens > 0 and prompt_eval_count < TRUNCATION_RATIO * sent_tokens


def is_truncated_prompt(prompt_eval_count: int, sent_tokens: int, window: int) -> bool:
    """True when a short count is the size of a cut prompt: about half the window, not a
    handful of tokens (see :data:`TRUNCATED_MIN_WINDOW_SHARE`)."""
    return is_short_count(prompt_eval_count, sent_tokens) and (
        prompt_eval_count >= TRUNCATED_MIN_WINDOW_SHARE * window
    )


def record_real_baseline(
    model: str,
    *,
    chars: int,
    prompt_eval_count: int,
    sent_tokens: int,
    had_images: bool,
) -> bool:
    """Feed a real ``prompt_eval_count`` back into the model's calibration.

    Returns False — recording nothing — when the count is below
    :data:`TRUNCATION_RATIO` of ``sent_tokens`` (our own estimate of the
    prompt that was sent): the caller keeps its previous baseline, and raises its
    ``context_truncated`` flag when :func:`is_truncated_prompt` says it was a cut.

    Returns True when the count is honest and may be kept as the session's
    baseline. The observation enters the fit only when the prompt carried no
    images (see :meth:`Calibration.record`).
    """
    if is_short_count(prompt_eval_count, sent_tokens):
        return False
    calibration_for(model).record(chars, prompt_eval_count, had_images=had_images)
    return True
