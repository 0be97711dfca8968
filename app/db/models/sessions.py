from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, created_at_column

# An immutable expression (a generated column): the bytes of the entry's JSON text.
PLANNING_ENTRY_BYTES = "octet_length(CAST(entry AS text))"


class Session(Base):
    __tablename__ = "sessions"

    # The key is (id, user_id): `user_id` is the tenant key every table of user data
    # carries (Citus distributes by it, docs/scaling.md); `id` is a random UUID, unique
    # in practice, and still the first column so a lookup by id alone is a key lookup.
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    profile_id: Mapped[str] = mapped_column(String(200), nullable=False)
    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str | None] = mapped_column(Text)
    pinned: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    created_at: Mapped[datetime] = created_at_column()
    last_active: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )
    context_token_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    session_metadata: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, server_default="{}"
    )
    # The next planning log entry's `seq` (session_planning_entries), bumped on append.
    next_planning_seq: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    # Next sequence number and next display position; bumped under the row lock on append.
    next_seq: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    next_display_index: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    #: bytes its messages keep (`sessions.quota.message_bytes`), added by each append:
    #: the user's message-storage usage is the sum over their sessions
    message_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    # Fact extraction's work marker, set by the append itself (`MessageRepository.reserve`):
    # NULL = no user message yet (nothing to learn), true = activity the extraction has
    # not read, false = read (or parked after too many failures, until the next append).
    memory_pending: Mapped[bool | None] = mapped_column(Boolean)
    # The rolling summary's work marker, set by the append (`MessageRepository.reserve`)
    # for a session whose profile is in rolling mode (not `temp-…`): true = messages the
    # summary has not read; false/NULL = none (or parked after too many failures, until
    # the next append).
    rolling_pending: Mapped[bool | None] = mapped_column(Boolean)
    # The idle raw-history index's work marker, set by every append: true = the session
    # may hold messages the raw index does not cover; the idle pass clears it once the
    # quiet session is covered (`RawIndexRepository.clear_idle_mark`).
    raw_index_pending: Mapped[bool | None] = mapped_column(Boolean)
    # An imported conversation's origin (`chatgpt`, `claude`, `jsonl`) and its id there:
    # a re-import finds the session by them (app/domain/chat_import). NULL otherwise.
    import_source: Mapped[str | None] = mapped_column(Text)
    import_source_id: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_sessions_user_id_last_active", "user_id", "last_active"),
        Index("ix_sessions_last_active", "last_active"),
        # the extraction's queue: pending sessions by quietness (a range scan, not a join)
        Index(
            "ix_sessions_memory_pending",
            "last_active",
            postgresql_where=text("memory_pending"),
        ),
        # the rolling summary's queue and the idle raw index's (range scans, not joins)
        Index(
            "ix_sessions_rolling_pending",
            "last_active",
            postgresql_where=text("rolling_pending"),
        ),
        Index(
            "ix_sessions_raw_index_pending",
            "last_active",
            postgresql_where=text("raw_index_pending"),
        ),
        # one session per imported conversation and user (the tenant key leads: Citus)
        Index(
            "ux_sessions_import_source",
            "user_id",
            "import_source",
            "import_source_id",
            unique=True,
            postgresql_where=text("import_source_id IS NOT NULL"),
        ),
    )


class _MessageColumns:
    """Columns shared by the hot table and the archive (same shape, rows move between them)."""

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    session_id: Mapped[uuid.UUID] = mapped_column(Uuid, nullable=False)

    sequence_number: Mapped[int] = mapped_column(BigInteger, nullable=False)
    # Position in the display history (0-based), stored at append; NULL when not displayed.
    display_index: Mapped[int | None] = mapped_column(BigInteger)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    thinking: Mapped[str | None] = mapped_column(Text)
    is_context: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="true")
    is_display: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="true")
    is_plan: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    is_compression: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    is_summary: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    is_compression_critical: Mapped[bool] = mapped_column(
        Boolean, nullable=False, server_default="false"
    )
    is_recall: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    message_metadata: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, nullable=False, server_default="{}"
    )
    elapsed_seconds: Mapped[float | None] = mapped_column(Float)
    tool_call_count: Mapped[int | None] = mapped_column(Integer)
    token_count: Mapped[int | None] = mapped_column(Integer)
    tool_calls: Mapped[list[Any] | None] = mapped_column(JSONB)
    tool_call_id: Mapped[str | None] = mapped_column(Text)
    name: Mapped[str | None] = mapped_column(Text)
    files: Mapped[list[Any] | None] = mapped_column(JSONB)
    images: Mapped[list[Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = created_at_column()
    # The session's user (the tenant key), last so the keys lead with the session.
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)


def session_fk() -> ForeignKeyConstraint:
    """A table's `(session_id, user_id)` → its session, deleted with it."""
    return ForeignKeyConstraint(
        ["session_id", "user_id"], ["sessions.id", "sessions.user_id"], ondelete="CASCADE"
    )


class Message(_MessageColumns, Base):
    __tablename__ = "session_messages"
    __table_args__ = (
        session_fk(),
        UniqueConstraint("session_id", "sequence_number", "user_id"),
        # Covering index: display counts and position numbering are index-only scans.
        Index("ix_session_messages_counts", "session_id", "sequence_number", "is_display"),
        Index(
            "ix_session_messages_display",
            "session_id",
            "display_index",
            postgresql_where="display_index IS NOT NULL",
        ),
        # Full-text search of a session's history (chat_history keyword mode).
        Index(
            "ix_session_messages_content_fts",
            text("to_tsvector('simple', content)"),
            postgresql_using="gin",
        ),
    )


class MessageArchive(_MessageColumns, Base):
    __tablename__ = "session_messages_archive"
    __table_args__ = (
        session_fk(),
        UniqueConstraint("session_id", "sequence_number", "user_id"),
        Index(
            "ix_session_messages_archive_content_fts",
            text("to_tsvector('simple', content)"),
            postgresql_using="gin",
        ),
    )


class SessionShare(Base):
    """One public read-only link per session. Lookup is by the token's SHA-256."""

    __tablename__ = "session_shares"

    session_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    token: Mapped[str] = mapped_column(Text, nullable=False)
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[datetime] = created_at_column()

    # Unique with the tenant key (32 random bytes: unique in practice across users).
    __table_args__ = (
        session_fk(),
        UniqueConstraint("token", "user_id"),
        UniqueConstraint("token_hash", "user_id"),
    )


class PlanningEntry(Base):
    """One entry of a session's planning log (append-only, oldest trimmed): its own row,
    so reading a session never reads its log and appending writes one row."""

    __tablename__ = "session_planning_entries"

    session_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    entry: Mapped[Any] = mapped_column(JSONB, nullable=False)
    # The entry's size as JSON text: what the per-session byte cap counts.
    bytes: Mapped[int] = mapped_column(
        Integer, Computed(PLANNING_ENTRY_BYTES, persisted=True), nullable=False
    )
    created_at: Mapped[datetime] = created_at_column()

    __table_args__ = (session_fk(),)
