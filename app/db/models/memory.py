from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    Computed,
    DateTime,
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
from sqlalchemy.dialects.postgresql import INT8MULTIRANGE, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, created_at_column
from app.db.models.sessions import session_fk

#: The vector columns' type. No dimension here: the columns' dimension is the configured
#: embedder's (EMBEDDING_DIM, else the provider's), set by the migrations and changed by
#: `reembed` (`align_dimensions`); the models read no settings at import time.
EMBEDDING = Vector()

# The text search document of a raw chunk: its content and breadcrumbs with ASCII
# punctuation turned into spaces, so `nginx.conf`, `/etc/nginx/x.conf`, `INV-2291` and
# `server_port` are indexed as the words a query names them by (`query_terms` splits the
# same way), each lexeme behind an 8-hex-digit key of the chunk's user: a prefix query
# then expands over that user's lexemes only (migration 2026_12_01_0730). The functions
# are IMMUTABLE SQL/plpgsql ones of migrations 2026_11_29_2130 and 2026_12_01_0730; the
# expression is written the way PostgreSQL reflects it. The chunk keeps it in a stored
# generated column (`search_terms`, migration 2026_12_02_1500) that the GIN index and the
# queries read (with `navi_user_tsquery(user_id, query)` on the query side): a row the
# planner reads through another index is then matched without re-parsing its text.
CHUNK_USER_TSV = "navi_chunk_user_tsv(user_id, content, breadcrumbs)"


def _hnsw(name: str, column: str = "embedding", where: str | None = None) -> Index:
    return Index(
        name,
        column,
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={column: "vector_cosine_ops"},
        postgresql_where=text(where) if where is not None else None,
    )


# The segment vectors have one HNSW graph per user bucket (6 bits of md5(user_id),
# `navi_user_bucket`, migrations 2026_12_01_0800 and _1500): a search walks its user's graph only.
SEGMENT_BUCKETS = 64


class MemoryFact(Base):
    __tablename__ = "memory_facts"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    category: Mapped[str] = mapped_column(String(100), nullable=False)
    key: Mapped[str] = mapped_column(String(200), nullable=False)
    value: Mapped[str] = mapped_column(Text, nullable=False)
    embedding: Mapped[list[float] | None] = mapped_column(EMBEDDING)
    source: Mapped[str] = mapped_column(String(32), nullable=False, server_default="conversation")
    confidence: Mapped[int] = mapped_column(Integer, nullable=False, server_default="70")
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_verified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    source_context: Mapped[str | None] = mapped_column(Text)
    # The live fact of the same user this row is hidden behind. Its key carries the
    # tenant key, so a delete cascades (SET NULL would null `user_id` too); every delete
    # of a fact deletes the rows hidden behind it first anyway (docs/memory.md).
    merged_into: Mapped[int | None] = mapped_column(BigInteger)
    source_session_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )

    __table_args__ = (
        UniqueConstraint("user_id", "category", "key"),
        ForeignKeyConstraint(
            ["merged_into", "user_id"],
            ["memory_facts.id", "memory_facts.user_id"],
            ondelete="CASCADE",
        ),
        _hnsw("ix_memory_facts_embedding_hnsw"),
        Index("ix_memory_facts_expires_at", "expires_at"),
        Index("ix_memory_facts_source_category", "source", "category"),
        Index("ix_memory_facts_merged_into", "merged_into"),
    )


class FactVersion(Base):
    """One value a fact held, and when (docs/memory.md, "Versions").

    A change of the fact's value closes the current version (`valid_to`) and adds one; a
    delete or an expiry closes it. No foreign key to the fact: the versions outlive a
    delete (an `as_of` read still answers with a deleted fact's value while it was
    valid); `category` and `key` are the fact's, kept here for that reason. At most one
    current version (`valid_to IS NULL`) per fact."""

    __tablename__ = "fact_versions"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    fact_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    category: Mapped[str] = mapped_column(String(100), nullable=False)
    key: Mapped[str] = mapped_column(String(200), nullable=False)
    value: Mapped[str] = mapped_column(Text, nullable=False)
    source: Mapped[str] = mapped_column(String(32), nullable=False)
    confidence: Mapped[int] = mapped_column(Integer, nullable=False)
    session_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    message_seq: Mapped[int | None] = mapped_column(BigInteger)
    valid_from: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    valid_to: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # the fact's expiry while this version is current (an `as_of` read honours it)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    recorded_at: Mapped[datetime] = created_at_column()

    __table_args__ = (
        Index("ix_fact_versions_user_fact", "user_id", "fact_id", "id"),
        Index("ix_fact_versions_user_valid_from", "user_id", "valid_from"),
        Index(
            "uq_fact_versions_current",
            "user_id",
            "fact_id",
            unique=True,
            postgresql_where=text("valid_to IS NULL"),
        ),
    )


class MemorySummary(Base):
    __tablename__ = "memory_summary"

    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    content: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )


class SessionMemoryState(Base):
    """Which sessions the extractor has processed, and when."""

    __tablename__ = "session_memory_state"

    session_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    extracted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (session_fk(),)


class RawIndexState(Base):
    """Which of a session's messages the raw index covers: the one source of truth of
    "indexed up to". `covered` is the set of sequence numbers already handed to the
    indexer (compression's demotions and the idle-session job alike, skipped roles
    included); both write chunks only for messages outside it, under this row's lock,
    so a message is never chunked twice. Failures of the idle job are counted here."""

    __tablename__ = "raw_index_state"

    session_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    covered: Mapped[Any] = mapped_column(
        INT8MULTIRANGE, nullable=False, server_default=text("'{}'::int8multirange")
    )
    indexed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    # The chunk the live indexer appends the session's next messages to (None: the next
    # message starts a chunk); the other writers close it (raw_history/live_index.py).
    open_chunk_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)

    __table_args__ = (session_fk(),)


class MemoryChunk(Base):
    """Verbatim demoted messages. No FK on session_id, by design (see docs/memory.md).

    A chunk has no vector of its own: it is embedded per segment (`MemoryChunkVector`),
    and a chunk without segment rows is one `make reembed` still has to embed."""

    __tablename__ = "memory_chunks"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    session_id: Mapped[uuid.UUID] = mapped_column(Uuid, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    start_seq: Mapped[int] = mapped_column(BigInteger, nullable=False)
    end_seq: Mapped[int] = mapped_column(BigInteger, nullable=False)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    breadcrumbs: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    created_at: Mapped[datetime] = created_at_column()
    # Its segment vectors do not match its content yet: the background embedder's work
    # (written by the live indexer, or changed by forget).
    vectors_stale: Mapped[bool] = mapped_column(
        Boolean, nullable=False, server_default=text("false")
    )
    # Since when the vectors lag (set and cleared with `vectors_stale`), and until when an
    # indexer holds the chunk (raw_history/embed_queue.py): no two embed it at once.
    stale_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    embed_lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Written by PostgreSQL, read by the term lookup's SQL only: never loaded.
    search_terms: Mapped[Any] = mapped_column(
        TSVECTOR, Computed(CHUNK_USER_TSV, persisted=True), deferred=True
    )

    __table_args__ = (
        UniqueConstraint("session_id", "content_hash", "user_id"),
        Index(
            "ix_memory_chunks_user_session_ended", "user_id", "session_id", text("ended_at DESC")
        ),
        Index("ix_memory_chunks_user_terms", "search_terms", postgresql_using="gin"),
        Index("ix_memory_chunks_breadcrumbs", "breadcrumbs", postgresql_using="gin"),
        Index(
            "ix_memory_chunks_vectors_stale",
            "user_id",
            "session_id",
            postgresql_where=text("vectors_stale"),
        ),
    )


class MemoryChunkCount(Base):
    """How many raw chunks each user has: the N of a raw search's IDF and what decides
    its exact or HNSW segment lookup, read by key instead of counted (a count grows with
    the user's chunks; docs/performance.md, "Measurements behind the code"). Kept by the
    statements that add and delete chunks, in their transaction
    (`kernel.repositories.ChunkCountRepository`; triggers until migration `c5a1d9e3f7b2`:
    Citus runs no statement-level trigger)."""

    __tablename__ = "memory_chunk_counts"

    user_id: Mapped[str] = mapped_column(
        ForeignKey("navi_users.id", ondelete="CASCADE"), primary_key=True
    )
    chunks: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    # a new value per change to the user's chunks (migration `8c4e2a7d5b19`):
    # what the raw search's memory of common terms is checked against
    version: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")


class MemoryChunkVector(Base):
    """One vector per segment of a raw chunk (whole lines up to `ranking.SEGMENT_CHARS`).

    A small embedding model reads a text's head only (all-MiniLM: 256 tokens, about
    1,000 chars), so one vector per 4,000-char chunk leaves most of it unsearchable by
    meaning; segments are read whole, and tell the search which lines matched. Derived
    data: rebuilt from the chunk by `make reembed` (after a dimension change its rows are
    deleted; a chunk without rows is what `reembed` embeds). `user_id`/`session_id` repeat
    the chunk's scope so a nearest-neighbour search filters without a join."""

    __tablename__ = "memory_chunk_vectors"

    chunk_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    part: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column(Uuid, nullable=False)
    start_char: Mapped[int] = mapped_column(Integer, nullable=False)
    end_char: Mapped[int] = mapped_column(Integer, nullable=False)
    embedding: Mapped[list[float]] = mapped_column(EMBEDDING, nullable=False)

    __table_args__ = (
        ForeignKeyConstraint(
            ["chunk_id", "user_id"],
            ["memory_chunks.id", "memory_chunks.user_id"],
            ondelete="CASCADE",
        ),
        Index("ix_memory_chunk_vectors_user_session", "user_id", "session_id"),
        *(
            _hnsw(
                f"ix_memory_chunk_vectors_hnsw_b{n:02d}", where=f"navi_user_bucket(user_id) = {n}"
            )
            for n in range(SEGMENT_BUCKETS)
        ),
    )
