"""Who may see and who may change which session (docs/api.md, "Roles").

Two scopes, decided here and nowhere else:

- **view** (`Viewer.of`): the caller's own sessions; every session with
  `navi.sessions.read_all` (admins hold it; local mode is an admin).
- **modify** (`Viewer.editor`): the caller's own sessions; every session for an admin
  (and local mode). `navi.sessions.read_all` grants reading only.

A session outside the view scope is 404 everywhere. A session inside the view scope but
outside the modify scope is 403 on every write (`kernel.ownership.SessionAccess` tells the two
apart with `Viewer.reader` when a write finds nothing).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from app.domain.kernel.principal import Principal
from app.lib.errors import Unprocessable

# Names the caller's current session on a tool call (HTTP tools, MCP).
SESSION_HEADER = "x-navi-session-id"


@dataclass(frozen=True)
class Viewer:
    """The scope of a session query: one user's sessions, or all (explicitly).

    `all_users` is the scope the query matches. `reads_all` is what the caller may
    read; it only differs for an editor (`modifies`), whose scope is narrower."""

    user_id: str
    all_users: bool = False
    modifies: bool = False
    reads_all: bool = False

    @classmethod
    def of(cls, principal: Principal) -> Viewer:
        """Reading: own sessions, or every session (legacy ones with user_id NULL too)
        with navi.sessions.read_all."""
        every = principal.can_read_all_sessions
        return cls(user_id=principal.id, all_users=every, reads_all=every)

    @classmethod
    def editor(cls, principal: Principal) -> Viewer:
        """Changing (append, rename, delete, compact, scratchpad, files…): own sessions,
        or every session for an admin."""
        return cls(
            user_id=principal.id,
            all_users=principal.is_admin,
            modifies=True,
            reads_all=principal.can_read_all_sessions,
        )

    def reader(self) -> Viewer:
        """The view scope of the same caller (an editor refused a session it may read
        gets 403, not 404)."""
        return Viewer(user_id=self.user_id, all_users=self.reads_all, reads_all=self.reads_all)


# Stored system messages that may reach the LLM (seed 003, "Stored service records").
LLM_SYSTEM_SOURCES = frozenset({"task_note", "synapse_event"})


def reaches_llm(role: str, is_context: bool, metadata: dict | None) -> bool:
    if not is_context:
        return False
    if role != "system":
        return True
    return (metadata or {}).get("source") in LLM_SYSTEM_SOURCES


def session_id_of(value: object, field: str = "session_id") -> uuid.UUID | None:
    """A session id as a client or a model sent it: None when absent, 422 naming `field`
    when it is not a UUID."""
    if value is None or value == "":
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Unprocessable(f"{field}: not a session id") from None
