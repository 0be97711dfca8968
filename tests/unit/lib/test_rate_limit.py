"""The token buckets of the upload rate limit (app.lib.rate_limit)."""

from __future__ import annotations

from app.lib.rate_limit import TokenBuckets


def test_token_bucket_refills_at_its_rate() -> None:
    buckets = TokenBuckets(max_keys=2)
    assert [buckets.take("u", 60, now=0.0) for _ in range(60)] == [0.0] * 60
    assert buckets.take("u", 60, now=0.0) == 1.0  # one token a second
    assert buckets.take("u", 60, now=0.5) == 0.5
    assert buckets.take("u", 60, now=1.0) == 0.0
    buckets.take("v", 60, now=1.0)
    buckets.take("w", 60, now=1.0)  # past max_keys: the least recently used ("u") goes
    assert buckets.take("u", 60, now=1.0) == 0.0  # full again
