"""An in-process cache of bearer token → Principal, so an authenticated request does not
open its own database session for the token lookup (docs/performance.md, "Session store").

- The key is the token's SHA-256 (the same value the database is searched by); the token
  itself is never kept. Only successful lookups are cached: an unknown or revoked token
  goes to the database every time, so guessing is not made cheaper.
- Entries live `AUTH_CACHE_TTL_SECONDS` (0 disables the cache). An entry keeps the
  token's own `expires_at` (`Principal.token_expires_at`), checked against the wall clock
  on every hit: a token is never accepted after it expires, however recently it was cached.
- Revoking a token or deleting a user drops that user's entries **after the transaction
  commits** (`app.domain.kernel.deps.after_commit`), so the next request of this process is checked
  against the database again. A lookup that read the database before such a commit and
  finishes after it does not store its (stale) answer: every drop bumps `epoch`, and
  `put` ignores answers read under an older epoch.
- Other worker processes (WEB_CONCURRENCY > 1, other replicas) have their own cache: a
  revoked token keeps working there for at most the TTL.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from app.domain.kernel.principal import Principal

DEFAULT_MAX_ENTRIES = 10_000


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PrincipalCache:
    def __init__(
        self,
        ttl_seconds: float,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self.clock = clock
        self.wall_clock = wall_clock
        self.epoch = 0
        # token hash → (principal, end of the entry's TTL on `clock`, token's expires_at)
        self._entries: dict[str, tuple[Principal, float, datetime | None]] = {}

    @property
    def enabled(self) -> bool:
        return self.ttl > 0

    def get(self, token_hash: str) -> Principal | None:
        entry = self._entries.get(token_hash)
        if entry is None:
            return None
        principal, deadline, token_expires_at = entry
        if self.clock() >= deadline or (
            token_expires_at is not None and self.wall_clock() >= token_expires_at
        ):
            self._entries.pop(token_hash, None)
            return None
        return principal

    def put(self, token_hash: str, principal: Principal, epoch: int) -> None:
        """Store an answer read from the database while `self.epoch` was `epoch`."""
        if not self.enabled or epoch != self.epoch:
            return
        if len(self._entries) >= self.max_entries:
            now = self.clock()
            for key in [k for k, (_, exp, _) in self._entries.items() if exp <= now]:
                del self._entries[key]
            while len(self._entries) >= self.max_entries:  # the oldest insertions go first
                del self._entries[next(iter(self._entries))]
        self._entries[token_hash] = (
            principal,
            self.clock() + self.ttl,
            principal.token_expires_at,
        )

    def drop_user(self, user_id: str) -> None:
        """Forget every token of `user_id` (called after a revoke/delete commits)."""
        self.epoch += 1
        for key in [k for k, (p, _, _) in self._entries.items() if p.id == user_id]:
            del self._entries[key]

    def clear(self) -> None:
        self.epoch += 1
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
