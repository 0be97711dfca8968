"""initial schema

Revision ID: a4247f079f32
Revises:
Create Date: 2026-11-29 18:46:59.166184
"""

from collections.abc import Sequence

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

from alembic import op
from app.config import get_settings
from app.db import extensions

revision: str = "a4247f079f32"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The vector columns follow the configured embedding model: EMBEDDING_DIM, else the
# dimension of EMBEDDING_PROVIDER's model (settings.vector_dim).
EMBEDDING_DIM = get_settings().vector_dim


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "navi_users",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("is_admin", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("permissions", sa.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_navi_users")),
        sa.UniqueConstraint("name", name=op.f("uq_navi_users_name")),
    )
    op.create_table(
        "memory_chunks",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("start_seq", sa.BigInteger(), nullable=False),
        sa.Column("end_seq", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("breadcrumbs", sa.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("embedding", Vector(EMBEDDING_DIM), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_memory_chunks_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_chunks")),
        sa.UniqueConstraint(
            "session_id", "content_hash", name=op.f("uq_memory_chunks_session_id_content_hash")
        ),
    )
    op.create_index(
        "ix_memory_chunks_breadcrumbs",
        "memory_chunks",
        ["breadcrumbs"],
        unique=False,
        postgresql_using="gin",
    )
    op.create_index(
        "ix_memory_chunks_content_fts",
        "memory_chunks",
        [sa.literal_column("to_tsvector('simple', content)")],
        unique=False,
        postgresql_using="gin",
    )
    op.create_index(
        "ix_memory_chunks_embedding_hnsw",
        "memory_chunks",
        ["embedding"],
        unique=False,
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.create_index(
        "ix_memory_chunks_user_session_ended",
        "memory_chunks",
        ["user_id", "session_id", sa.literal_column("ended_at DESC")],
        unique=False,
    )
    op.create_table(
        "memory_facts",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("category", sa.String(length=100), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("embedding", Vector(EMBEDDING_DIM), nullable=True),
        sa.Column("source", sa.String(length=32), server_default="conversation", nullable=False),
        sa.Column("confidence", sa.Integer(), server_default="70", nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("source_context", sa.Text(), nullable=True),
        sa.Column("merged_into", sa.BigInteger(), nullable=True),
        sa.Column("source_session_id", sa.Uuid(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["merged_into"],
            ["memory_facts.id"],
            name=op.f("fk_memory_facts_merged_into_memory_facts"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_memory_facts_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_facts")),
        sa.UniqueConstraint(
            "user_id", "category", "key", name=op.f("uq_memory_facts_user_id_category_key")
        ),
    )
    op.create_index(
        "ix_memory_facts_embedding_hnsw",
        "memory_facts",
        ["embedding"],
        unique=False,
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.create_index("ix_memory_facts_expires_at", "memory_facts", ["expires_at"], unique=False)
    op.create_index("ix_memory_facts_merged_into", "memory_facts", ["merged_into"], unique=False)
    op.create_index(
        "ix_memory_facts_source_category", "memory_facts", ["source", "category"], unique=False
    )
    op.create_table(
        "memory_summary",
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), server_default="", nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_memory_summary_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_memory_summary")),
    )
    op.create_table(
        "navi_api_tokens",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("name", sa.String(length=200), server_default="", nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_navi_api_tokens_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_navi_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_navi_api_tokens_token_hash")),
    )
    op.create_index(
        op.f("ix_navi_api_tokens_user_id"), "navi_api_tokens", ["user_id"], unique=False
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("profile_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("pinned", sa.Boolean(), server_default="false", nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "last_active",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("context_token_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "session_metadata",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
        sa.Column(
            "planning_logs",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="[]",
            nullable=False,
        ),
        sa.Column("next_seq", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("next_display_index", sa.BigInteger(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_sessions_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    op.create_index("ix_sessions_last_active", "sessions", ["last_active"], unique=False)
    op.create_index(
        "ix_sessions_user_id_last_active", "sessions", ["user_id", "last_active"], unique=False
    )
    op.create_table(
        "kv_store",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=True),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_kv_store_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["navi_users.id"],
            name=op.f("fk_kv_store_user_id_navi_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kv_store")),
        sa.UniqueConstraint(
            "user_id",
            "scope",
            "session_id",
            "key",
            name=op.f("uq_kv_store_user_id_scope_session_id_key"),
            postgresql_nulls_not_distinct=True,
        ),
    )
    op.create_index("ix_kv_store_user_scope", "kv_store", ["user_id", "scope"], unique=False)
    op.create_table(
        "session_memory_state",
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("extracted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_memory_state_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_memory_state")),
    )
    op.create_table(
        "session_messages",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("sequence_number", sa.BigInteger(), nullable=False),
        sa.Column("display_index", sa.BigInteger(), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), server_default="", nullable=False),
        sa.Column("thinking", sa.Text(), nullable=True),
        sa.Column("is_context", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("is_display", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("is_plan", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("is_compression", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("is_summary", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("is_compression_critical", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("is_recall", sa.Boolean(), server_default="false", nullable=False),
        sa.Column(
            "metadata", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("elapsed_seconds", sa.Float(), nullable=True),
        sa.Column("tool_call_count", sa.Integer(), nullable=True),
        sa.Column("token_count", sa.Integer(), nullable=True),
        sa.Column("tool_calls", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("files", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("images", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_messages_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_messages")),
        sa.UniqueConstraint(
            "session_id",
            "sequence_number",
            name=op.f("uq_session_messages_session_id_sequence_number"),
        ),
    )
    op.create_index(
        "ix_session_messages_counts",
        "session_messages",
        ["session_id", "sequence_number", "is_display"],
        unique=False,
    )
    op.create_index(
        "ix_session_messages_display",
        "session_messages",
        ["session_id", "display_index"],
        unique=False,
        postgresql_where="display_index IS NOT NULL",
    )
    op.create_table(
        "session_messages_archive",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("sequence_number", sa.BigInteger(), nullable=False),
        sa.Column("display_index", sa.BigInteger(), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), server_default="", nullable=False),
        sa.Column("thinking", sa.Text(), nullable=True),
        sa.Column("is_context", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("is_display", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("is_plan", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("is_compression", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("is_summary", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("is_compression_critical", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("is_recall", sa.Boolean(), server_default="false", nullable=False),
        sa.Column(
            "metadata", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("elapsed_seconds", sa.Float(), nullable=True),
        sa.Column("tool_call_count", sa.Integer(), nullable=True),
        sa.Column("token_count", sa.Integer(), nullable=True),
        sa.Column("tool_calls", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("files", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("images", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_messages_archive_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_messages_archive")),
        sa.UniqueConstraint(
            "session_id",
            "sequence_number",
            name=op.f("uq_session_messages_archive_session_id_sequence_number"),
        ),
    )
    op.create_table(
        "session_shares",
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_shares_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_shares")),
        sa.UniqueConstraint("token", name=op.f("uq_session_shares_token")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_session_shares_token_hash")),
    )
    bind = op.get_bind()
    extensions.try_create_pg_trgm(bind)
    extensions.ensure_trigram_indexes(bind)


def downgrade() -> None:
    extensions.drop_trigram_indexes(op.get_bind())
    op.drop_table("session_shares")
    op.drop_table("session_messages_archive")
    op.drop_index(
        "ix_session_messages_display",
        table_name="session_messages",
        postgresql_where="display_index IS NOT NULL",
    )
    op.drop_index("ix_session_messages_counts", table_name="session_messages")
    op.drop_table("session_messages")
    op.drop_table("session_memory_state")
    op.drop_index("ix_kv_store_user_scope", table_name="kv_store")
    op.drop_table("kv_store")
    op.drop_index("ix_sessions_user_id_last_active", table_name="sessions")
    op.drop_index("ix_sessions_last_active", table_name="sessions")
    op.drop_table("sessions")
    op.drop_index(op.f("ix_navi_api_tokens_user_id"), table_name="navi_api_tokens")
    op.drop_table("navi_api_tokens")
    op.drop_table("memory_summary")
    op.drop_index("ix_memory_facts_source_category", table_name="memory_facts")
    op.drop_index("ix_memory_facts_merged_into", table_name="memory_facts")
    op.drop_index("ix_memory_facts_expires_at", table_name="memory_facts")
    op.drop_index(
        "ix_memory_facts_embedding_hnsw",
        table_name="memory_facts",
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.drop_table("memory_facts")
    op.drop_index("ix_memory_chunks_user_session_ended", table_name="memory_chunks")
    op.drop_index(
        "ix_memory_chunks_embedding_hnsw",
        table_name="memory_chunks",
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.drop_index(
        "ix_memory_chunks_content_fts", table_name="memory_chunks", postgresql_using="gin"
    )
    op.drop_index(
        "ix_memory_chunks_breadcrumbs", table_name="memory_chunks", postgresql_using="gin"
    )
    op.drop_table("memory_chunks")
    op.drop_table("navi_users")
    # The vector and pg_trgm extensions are left installed: other databases objects may
    # use them, and dropping pg_trgm may need privileges the service does not have.
