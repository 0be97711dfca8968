"""Per-user, per-model calibration of the character → real-token relation.

Every window decision is made in real prompt tokens. Ollama reports the real
size of each prompt (``prompt_eval_count``); we remember the last few pairs
``(chars of the built context, real tokens)`` per user and model and fit a straight
line ``tokens ≈ overhead + chars × tokens_per_char`` through them. Until a
trustworthy line exists, a conservative ``chars / 1.8`` is used.

The counts come from the client (``usage`` on an append), so nothing here trusts them
further than one user's own estimates, and not even those without a bound:

* **A user's own line.** The registry is keyed by ``(user_id, model)``: one user's
  reports (forged, or from a runtime whose prompts carry big tool schemas) never move
  another user's estimates. It is module-level on purpose (the post-turn worker builds a
  fresh compressor for every pass, and the calibration must outlive it), one per process,
  and an LRU of :data:`MAX_CALIBRATIONS` lines: distinct users and model names cannot
  grow it without bound. A line that falls out is relearnt from the next reports; a
  session's own real baseline (its metadata) does not depend on it.
* **Navi's characters, a possible count.** The characters of an observation are Navi's
  own count of the prompt it handed out, never the client's; a count no tokenizer could
  produce for them (:func:`is_plausible_count`: over :data:`MAX_COUNT_PER_CHAR` tokens a
  character — one per UTF-8 byte — plus the overhead bound) is neither fitted nor kept
  as a baseline.
* **A bounded line.** The slope stays within ``0.25..1`` token a character (else no fit)
  and the overhead a prompt costs beyond its characters (template, the runtime's tool
  schemas) is held to :data:`MAX_OVERHEAD_WINDOW_SHARE` of the window it is priced for
  (:func:`max_overhead`). Whatever a user reported, an estimate of ``chars`` characters
  is at most ``chars + window / 2`` tokens: a short prompt always fits its window.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field

__all__ = [
    "FALLBACK_CHARS_PER_TOKEN",
    "MAX_CALIBRATIONS",
    "MAX_COUNT_PER_CHAR",
    "MAX_OBSERVATIONS",
    "MAX_OVERHEAD_WINDOW_SHARE",
    "MAX_TOKENS_PER_CHAR",
    "MIN_SIZE_SPREAD",
    "MIN_TOKENS_PER_CHAR",
    "TRUNCATION_RATIO",
    "Calibration",
    "calibration_for",
    "is_plausible_count",
    "is_truncated_prompt",
    "max_overhead",
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
# The fitted overhead (what a prompt costs beyond its characters) is held to this share
# of the window the estimate is for: a prompt template and tool schemas that took more
# would leave no room for a conversation.
MAX_OVERHEAD_WINDOW_SHARE = 0.5
# No tokenizer makes more tokens of a text than it has UTF-8 bytes (byte-level BPE and
# SentencePiece's byte fallback emit at least one byte a token), and a character is at
# most 4 bytes: a reported count above 4 a character plus the overhead bound is not a
# count of that prompt.
MAX_COUNT_PER_CHAR = 4
# Lines kept per process (users × model names), least recently used dropped first.
MAX_CALIBRATIONS = 4096


def max_overhead(window: int) -> int:
    """The largest overhead an estimate for a prompt of ``window`` tokens adds."""
    return max(0, int(window * MAX_OVERHEAD_WINDOW_SHARE))


def is_plausible_count(prompt_eval_count: int, chars: int, window: int, images: int = 0) -> bool:
    """Whether a reported count can be the size of a prompt of ``chars`` characters (Navi's
    count) with ``images`` tokens of images, for a model of ``window`` tokens."""
    limit = MAX_COUNT_PER_CHAR * max(0, chars) + max_overhead(window) + max(0, images)
    return prompt_eval_count <= limit


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

    def fit(self, window: int | None = None) -> tuple[float, float] | None:
        """Least-squares ``(overhead, tokens_per_char)`` or None when not usable; for a
        ``window``, the overhead held to :func:`max_overhead` of it."""
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
        if window is not None:
            overhead = min(overhead, float(max_overhead(window)))
        return overhead, slope

    @property
    def is_fitted(self) -> bool:
        return self.fit() is not None

    def tokens_per_char(self) -> float:
        """Marginal cost of one character (the slope, or the fallback rate)."""
        line = self.fit()
        return line[1] if line is not None else 1.0 / FALLBACK_CHARS_PER_TOKEN

    def estimate(self, chars: int, window: int | None = None) -> int:
        """Real-token estimate of a whole built prompt of ``chars`` characters; for a
        model of ``window`` tokens (every estimate of the service names it), at most
        ``chars + window × MAX_OVERHEAD_WINDOW_SHARE``."""
        if chars <= 0:
            return 0
        line = self.fit(window)
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
        line = self.fit()
        if line is None:  # as `estimate` without a line: the same number of tokens
            return math.ceil(chars / FALLBACK_CHARS_PER_TOKEN)
        return math.ceil(chars * line[1])

    def chars_for_tokens(self, tokens: int) -> int:
        """How many characters fit into ``tokens`` at the marginal rate."""
        if tokens <= 0:
            return 0
        return int(tokens / self.tokens_per_char())


_REGISTRY: OrderedDict[tuple[str, str], Calibration] = OrderedDict()


def calibration_for(model: str, user_id: str = "") -> Calibration:
    """The calibration of ``model`` for the user ``user_id`` (the session's: its tenant
    key), created empty on first use. Every request path names the user; ``""`` is a
    calibration of no user's, for benches and tools."""
    key = (user_id, model)
    calib = _REGISTRY.get(key)
    if calib is None:
        calib = Calibration(model=model)
        _REGISTRY[key] = calib
        while len(_REGISTRY) > MAX_CALIBRATIONS:
            _REGISTRY.popitem(last=False)
    else:
        _REGISTRY.move_to_end(key)
    return calib


def reset_registry() -> None:
    """Forget every user's and model's observations (tests, or a settings reload)."""
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
    user_id: str = "",
) -> bool:
    """Feed a real ``prompt_eval_count`` back into the user's calibration of the model
    (``chars``: Navi's own count of the prompt's characters; the caller has checked the
    count with :func:`is_plausible_count`).

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
    calibration_for(model, user_id).record(chars, prompt_eval_count, had_images=had_images)
    return True
