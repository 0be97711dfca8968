from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Index, String, Text, UniqueConstraint, Uuid, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.models.sessions import session_fk


class Sketch(Base):
    """Key-value working notes (the scratchpad). `session_id` NULL = user-wide in a scope."""

    __tablename__ = "kv_store"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    scope: Mapped[str] = mapped_column(String(64), nullable=False)
    # A session's sections belong to the session's user (the FK carries the tenant key).
    session_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    key: Mapped[str] = mapped_column(String(200), nullable=False)
    value: Mapped[str] = mapped_column(Text, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )

    __table_args__ = (
        UniqueConstraint(
            "user_id", "scope", "session_id", "key", postgresql_nulls_not_distinct=True
        ),
        session_fk(),
        Index("ix_kv_store_user_scope", "user_id", "scope"),
    )
