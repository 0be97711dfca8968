"""Who may see which session. A session you may not see answers 404 everywhere."""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.auth.principal import Principal


@dataclass(frozen=True)
class Viewer:
    """The scope of a session query: one user's sessions, or all (explicitly)."""

    user_id: str
    all_users: bool = False

    @classmethod
    def of(cls, principal: Principal) -> Viewer:
        # navi.sessions.read_all (admins hold it; local mode bypasses checks) sees every
        # session, including legacy ones with user_id NULL. Everyone else: their own.
        return cls(user_id=principal.id, all_users=principal.can_read_all_sessions)


# Stored system messages that may reach the LLM (seed 003, "Stored service records").
LLM_SYSTEM_SOURCES = frozenset({"task_note", "synapse_event"})


def reaches_llm(role: str, is_context: bool, metadata: dict | None) -> bool:
    if not is_context:
        return False
    if role != "system":
        return True
    return (metadata or {}).get("source") in LLM_SYSTEM_SOURCES
