"""Durable jobs of user data: a forget that runs batch by batch (`forget_jobs`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Double,
    ForeignKey,
    Integer,
    String,
    Text,
    Uuid,
)
from sqlalchemy import text as sql
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, created_at_column


class ForgetJob(Base):
    """One forget of a text (app/domain/forget/runner.py): the user's sessions are done
    in batches, in id order after `after_session`, each batch in its own transaction
    with this row's progress; then the user-wide stores (`stores_done`). `text` is kept
    only while the job runs (a resumed job needs it) and erased when it ends; the log and
    the answer name it by `text_sha256` only. Distributed by `user_id` on Citus."""

    __tablename__ = "forget_jobs"

    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    #: running | done | failed
    state: Mapped[str] = mapped_column(String(16), nullable=False, server_default="running")
    dry_run: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    text: Mapped[str | None] = mapped_column(Text)
    text_sha256: Mapped[str] = mapped_column(String(16), nullable=False)
    via: Mapped[str] = mapped_column(String(16), nullable=False)
    actor: Mapped[str] = mapped_column(Text, nullable=False)
    #: the last session done (sessions are taken in id order); NULL: none yet
    after_session: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    sessions_done: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    sessions_total: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    stores_done: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    #: rows changed per store so far (app/domain/forget/schemas.py STORES)
    changed: Mapped[Any] = mapped_column(JSONB, nullable=False, server_default=sql("'{}'"))
    #: session files holding the text so far: [{"session_id", "path"}]
    files: Mapped[Any] = mapped_column(JSONB, nullable=False, server_default=sql("'[]'"))
    #: failed batches in a row; past the limit the job fails
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    #: when a runner last advanced it (epoch seconds, bound by the app): a job not
    #: advanced for a while is taken over by the periodic resume
    heartbeat: Mapped[float] = mapped_column(Double, nullable=False, server_default="0")
    created_at: Mapped[datetime] = created_at_column()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ForgottenText(Base):
    """The records of a user's forgets (app/domain/kernel/forgotten.py): one row per user,
    `entries` a list of `{"digest", "bytes", "at"}` — a hash of each forgotten text, never
    the text. Every writer of derived text locks the row (`FOR SHARE`) and checks its
    output against it in its commit transaction; a forget appends to it (row lock), so
    the two are ordered. Deleted with the user (the foreign key's cascade). Distributed
    by `user_id` on Citus."""

    __tablename__ = "forgotten_texts"

    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    entries: Mapped[Any] = mapped_column(JSONB, nullable=False, server_default=sql("'[]'"))
    updated_at: Mapped[datetime] = created_at_column()
