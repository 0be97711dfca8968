"""history search, error memory, rolling summaries

Full-text indexes over session_messages and session_messages_archive, message_embeddings
(semantic search over recent history), error_memory (resolved tool errors with a TTL) and
rolling_summaries (rolling context mode: summary + incremental cursor).

Revision ID: 5c1e7d2b9a40
Revises: a4247f079f32
Create Date: 2026-11-29 19:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

from alembic import op
from app.config import get_settings

revision: str = "5c1e7d2b9a40"
down_revision: str | None = "a4247f079f32"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The vector columns follow the configured embedding model, as in app/db/models/memory.py.
EMBEDDING_DIM = get_settings().vector_dim
HNSW = {
    "postgresql_using": "hnsw",
    "postgresql_with": {"m": 16, "ef_construction": 64},
    "postgresql_ops": {"embedding": "vector_cosine_ops"},
}


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    # (1) full-text search over all of a session's history, hot and archived
    op.create_index(
        "ix_session_messages_content_fts",
        "session_messages",
        [sa.literal_column("to_tsvector('simple', content)")],
        unique=False,
        postgresql_using="gin",
    )
    op.create_index(
        "ix_session_messages_archive_content_fts",
        "session_messages_archive",
        [sa.literal_column("to_tsvector('simple', content)")],
        unique=False,
        postgresql_using="gin",
    )
    # (2) error memory
    op.create_table(
        "error_memory",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("error_text", sa.Text(), nullable=False),
        sa.Column("fix", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=True),
        sa.Column("embedding", Vector(EMBEDDING_DIM), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_hit_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hit_count", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_error_memory_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_error_memory")),
    )
    op.create_index("ix_error_memory_user_id_expires_at", "error_memory", ["user_id", "expires_at"])
    op.create_index("ix_error_memory_expires_at", "error_memory", ["expires_at"])
    op.create_index("ix_error_memory_embedding_hnsw", "error_memory", ["embedding"], **HNSW)
    op.create_index(
        "ix_error_memory_text_fts",
        "error_memory",
        [sa.literal_column("to_tsvector('simple', (error_text || ' ') || fix)")],
        unique=False,
        postgresql_using="gin",
    )
    # (3) rolling summaries
    op.create_table(
        "rolling_summaries",
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("summary", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("cursor_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_rolling_summaries_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_rolling_summaries")),
    )
    # (4) embeddings of recent messages (a separate table keeps session_messages narrow;
    # searched per session by primary key and ranked exactly, so no ANN index)
    op.create_table(
        "message_embeddings",
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("sequence_number", sa.BigInteger(), nullable=False),
        sa.Column("embedding", Vector(EMBEDDING_DIM), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_message_embeddings_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "session_id", "sequence_number", name=op.f("pk_message_embeddings")
        ),
    )


def downgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.drop_table("message_embeddings")
    op.drop_table("rolling_summaries")
    op.drop_index("ix_error_memory_text_fts", table_name="error_memory")
    op.drop_index("ix_error_memory_embedding_hnsw", table_name="error_memory")
    op.drop_index("ix_error_memory_expires_at", table_name="error_memory")
    op.drop_index("ix_error_memory_user_id_expires_at", table_name="error_memory")
    op.drop_table("error_memory")
    op.drop_index("ix_session_messages_archive_content_fts", table_name="session_messages_archive")
    op.drop_index("ix_session_messages_content_fts", table_name="session_messages")
