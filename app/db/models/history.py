"""Conversation history search, error memory and rolling summaries (seed 001).

* `message_embeddings` — vectors of a session's recent messages for semantic history
  search. A table of its own (not a column on `session_messages`) keeps the hot message
  table narrow, works for archived rows too (rows move between the hot table and the
  archive; the key is the sequence number), and lets vectors that fall out of the recent
  window be dropped without touching the messages.
* `error_memory` — resolved tool errors and their fixes, per user, across sessions, with a
  TTL renewed on every hit.
* `rolling_summaries` — the rolling summary of a session in `rolling` context mode and the
  incremental cursor (time of the last summarised message).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, ForeignKey, Index, Integer, String, Text, Uuid, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, created_at_column
from app.db.models.memory import EMBEDDING, _hnsw
from app.db.models.sessions import session_fk

# The expression of the error-memory text index, parenthesised the way PostgreSQL
# reflects it (so `alembic check` sees no difference). Queries use it verbatim
# for the planner to use the index.
ERROR_TSV = "to_tsvector('simple', (error_text || ' ') || fix)"


class MessageEmbedding(Base):
    __tablename__ = "message_embeddings"

    session_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    sequence_number: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    embedding: Mapped[list[float]] = mapped_column(EMBEDDING, nullable=False)
    created_at: Mapped[datetime] = created_at_column()
    # No ANN index: a search reads one session's recent window (≤ HISTORY_EMBED_RECENT
    # rows, found by the primary key) and ranks it exactly. A global HNSW index filtered
    # down to one session would be slower and could miss.

    __table_args__ = (session_fk(),)


class ErrorMemory(Base):
    __tablename__ = "error_memory"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    tool: Mapped[str] = mapped_column(String(200), nullable=False)
    error_text: Mapped[str] = mapped_column(Text, nullable=False)
    fix: Mapped[str] = mapped_column(Text, nullable=False)
    context: Mapped[str | None] = mapped_column(Text)
    embedding: Mapped[list[float] | None] = mapped_column(EMBEDDING)
    created_at: Mapped[datetime] = created_at_column()
    last_hit_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    hit_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")

    __table_args__ = (
        Index("ix_error_memory_user_id_expires_at", "user_id", "expires_at"),
        Index("ix_error_memory_expires_at", "expires_at"),
        _hnsw("ix_error_memory_embedding_hnsw"),
        Index("ix_error_memory_text_fts", text(ERROR_TSV), postgresql_using="gin"),
    )


class RollingSummary(Base):
    __tablename__ = "rolling_summaries"

    session_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # sequence_number of the last summarised message: the cursor (the job reads the
    # messages after it). NULL = never summarised (or a summary brought in without one:
    # the next run only sets it; with a `cursor_at` only, from an older release or
    # export, the next run derives it from that time).
    cursor_seq: Mapped[int | None] = mapped_column(BigInteger)
    # created_at of the last summarised message (information: clients set message times,
    # so a time cannot be the cursor).
    cursor_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = created_at_column()
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    # No retry before this time (a failed chunk backs off: ROLLING_SUMMARY_RETRY_*).
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (session_fk(),)
