"""The live raw index: an open chunk per session, and chunks whose vectors are pending

Messages are indexed a moment after they are appended (`raw_history/live_index.py`),
not only when compression demotes them or the session has been idle for 30 minutes. The
live indexer appends a session's new messages to its **open chunk** (the last chunk it
wrote, while under the chunk size) and writes the chunk without vectors; the chunk is
found by its words at once and by meaning once the background embedder has caught up.

- `raw_index_state.open_chunk_id`: the chunk the live indexer appends to next (NULL: the
  next message starts a chunk). Compression and the idle job close it when they write.
- `memory_chunks.vectors_stale`: the chunk's segment vectors do not match its content yet
  (written by the live indexer or redacted by forget); the partial index is what the
  background embedder reads.

Both are new nullable / constant-default columns: no table rewrite.

Revision ID: a7c3e5f1b9d2
Revises: e4b7a2c9d1f3
Create Date: 2026-12-03 13:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "a7c3e5f1b9d2"
down_revision: str | None = "e4b7a2c9d1f3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("raw_index_state", sa.Column("open_chunk_id", sa.Uuid(), nullable=True))
    op.add_column(
        "memory_chunks",
        sa.Column("vectors_stale", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.create_index(
        "ix_memory_chunks_vectors_stale",
        "memory_chunks",
        ["user_id", "session_id"],
        postgresql_where=sa.text("vectors_stale"),
    )


def downgrade() -> None:
    op.drop_index("ix_memory_chunks_vectors_stale", table_name="memory_chunks")
    op.drop_column("memory_chunks", "vectors_stale")
    op.drop_column("raw_index_state", "open_chunk_id")
