"""Per-key token buckets of one process (the upload rate limit).

Each key has `per_minute` tokens, refilled continuously at `per_minute / 60` a second; a
request takes one or is refused with the seconds until one is there. The buckets live in
this process only: with several workers (or replicas) a key may make up to that many
times the rate. At most `max_keys` keys are kept, the least recently used dropped (a
dropped key starts full again).
"""

from __future__ import annotations

import time
from collections import OrderedDict


class TokenBuckets:
    def __init__(self, max_keys: int = 10_000) -> None:
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def take(self, key: str, per_minute: int, now: float | None = None) -> float:
        """0 when `key` took a token; else the seconds until it has one (nothing taken)."""
        now = time.monotonic() if now is None else now
        rate = per_minute / 60
        tokens, at = self._buckets.pop(key, (float(per_minute), now))
        tokens = min(float(per_minute), tokens + max(0.0, now - at) * rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / rate
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait
