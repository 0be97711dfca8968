from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

PERM_MEMORY_READ_ALL = "navi.memory.read_all"
PERM_SESSIONS_READ_ALL = "navi.sessions.read_all"
PERM_USERS_ADMIN = "navi.users.admin"
ALL_PERMISSIONS = (PERM_MEMORY_READ_ALL, PERM_SESSIONS_READ_ALL, PERM_USERS_ADMIN)

ANONYMOUS_ID = "anonymous"
ADMIN_ID = "admin"
# Ensured at every start-up (app/domain/auth/services.py, bootstrap): never deleted, never
# demoted — the NAVI_ADMIN_TOKEN admin and the owner of local-mode sessions.
BUILT_IN_USERS = {
    ADMIN_ID: "the NAVI_ADMIN_TOKEN admin",
    ANONYMOUS_ID: "the user of local mode (NAVI_AUTH_ENABLED=false)",
}


@dataclass(frozen=True)
class Principal:
    """Who is making the request. Admins hold every permission.

    `token_expires_at` is the expiry of the bearer token the request came with (None: the
    token does not expire, or there is no token — local mode). A token that expires cannot
    mint tokens (`POST /me/tokens` answers 403), and the principal cache never serves it
    after that time (app/domain/kernel/principal_cache.py)."""

    id: str
    name: str
    is_admin: bool = False
    permissions: frozenset[str] = field(default_factory=frozenset)
    auth_disabled: bool = False
    token_expires_at: datetime | None = None

    def has(self, permission: str) -> bool:
        return self.is_admin or permission in self.permissions

    @property
    def can_read_all_sessions(self) -> bool:
        return self.has(PERM_SESSIONS_READ_ALL)

    @property
    def can_read_all_memory(self) -> bool:
        return self.has(PERM_MEMORY_READ_ALL)
