from app.domain.kernel.principal import Principal
from app.domain.kernel.principal_cache import PrincipalCache

ALICE = Principal(id="alice", name="alice")
BOB = Principal(id="bob", name="bob")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_hit_until_the_ttl_runs_out() -> None:
    clock = Clock()
    cache = PrincipalCache(5.0, clock=clock)
    cache.put("h1", ALICE, cache.epoch)
    assert cache.get("h1") is ALICE
    clock.now += 4.9
    assert cache.get("h1") is ALICE
    clock.now += 0.2
    assert cache.get("h1") is None and len(cache) == 0


def test_ttl_zero_disables_the_cache() -> None:
    cache = PrincipalCache(0)
    cache.put("h1", ALICE, cache.epoch)
    assert not cache.enabled and cache.get("h1") is None


def test_drop_user_forgets_only_that_users_tokens() -> None:
    cache = PrincipalCache(60)
    cache.put("a1", ALICE, cache.epoch)
    cache.put("a2", ALICE, cache.epoch)
    cache.put("b1", BOB, cache.epoch)
    cache.drop_user("alice")
    assert cache.get("a1") is None and cache.get("a2") is None
    assert cache.get("b1") is BOB


def test_an_answer_read_before_a_drop_is_not_stored() -> None:
    """A lookup that read the database before a revoke committed must not re-cache the
    token after the revoke dropped it."""
    cache = PrincipalCache(60)
    epoch = cache.epoch  # the lookup starts, reads "valid" from the database …
    cache.drop_user("alice")  # … the revoke commits and drops the user …
    cache.put("a1", ALICE, epoch)  # … the stale answer arrives
    assert cache.get("a1") is None
    cache.put("a1", ALICE, cache.epoch)  # a lookup after the drop is stored again
    assert cache.get("a1") is ALICE


def test_bounded_size_evicts_expired_then_oldest() -> None:
    clock = Clock()
    cache = PrincipalCache(10, max_entries=3, clock=clock)
    cache.put("old", ALICE, cache.epoch)
    clock.now += 11  # "old" has expired
    for key in ("k1", "k2", "k3"):
        cache.put(key, BOB, cache.epoch)
    assert len(cache) == 3 and cache.get("old") is None
    cache.put("k4", BOB, cache.epoch)
    assert len(cache) == 3 and cache.get("k1") is None and cache.get("k4") is BOB


def test_a_hit_is_refused_once_the_token_expires() -> None:
    """The entry keeps the token's own `expires_at`: the TTL never stretches it."""
    from datetime import UTC, datetime, timedelta

    now = [datetime(2026, 12, 5, 12, 0, tzinfo=UTC)]
    cache = PrincipalCache(60, wall_clock=lambda: now[0])
    expiring = Principal(id="alice", name="alice", token_expires_at=now[0] + timedelta(seconds=2))
    cache.put("a1", expiring, cache.epoch)
    assert cache.get("a1") is expiring
    now[0] += timedelta(seconds=2)
    assert cache.get("a1") is None and len(cache) == 0
