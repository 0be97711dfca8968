"""The tenant key: `user_id NOT NULL` on every table of user data, in every key

The step every Citus change needs (docs/scaling.md, "Partitioning by user"): a
distributed table's primary and unique keys must include the distribution column, and
the foreign keys between co-located tables must carry it. On the single server the
keys serve the same lookups as before — the session-keyed tables' keys lead with
`session_id`, `user_id` comes last — so nothing reads differently.

* `sessions.user_id` is NOT NULL: sessions without a user (local mode before users
  existed) become `anonymous`'s, whose `navi_users` row is inserted if missing (the
  app's bootstrap inserts the same row at every start-up).
* `user_id text NOT NULL` is added to the tables that hang off a session (messages,
  archive, shares, message vectors, rolling summaries, extraction and raw-index state),
  filled from the session; `memory_chunks.user_id` (nullable until now) and
  `memory_chunk_vectors.user_id` become NOT NULL (a chunk whose session is gone and had
  no user goes to `anonymous`). `kv_store` rows of a session take the session's user.
* Primary keys: `sessions (id, user_id)` — `id` stays a random UUID, unique in practice
  but no longer by a constraint of its own (Citus allows none without `user_id`) —,
  `(id, user_id)` for the tables with a surrogate id, `(session_id, user_id)` for the
  one-row-per-session tables; unique keys gain `user_id` as their last column.
* Foreign keys to a session are `(session_id, user_id) → sessions (id, user_id)` ON
  DELETE CASCADE, as before; segment vectors → their chunk `(chunk_id, user_id)`.
  `memory_facts.merged_into` → `(merged_into, user_id)`, ON DELETE CASCADE instead of
  SET NULL (SET NULL would null `user_id` too): every delete of a fact already deletes
  the rows hidden behind it first, so no row ever took that path.

The chunk counts are recomputed at the end (the backfill of `memory_chunks.user_id`
fires no insert or delete trigger). Rewrites every message row: on a large database run
it in a maintenance window.

Revision ID: f2b8c6d4a1e7
Revises: d41c7e9b2f68
Create Date: 2026-12-02 12:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "f2b8c6d4a1e7"
down_revision: str | None = "d41c7e9b2f68"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Tables that hang off a session and get the column here.
ADDED = (
    "session_messages",
    "session_messages_archive",
    "session_shares",
    "message_embeddings",
    "rolling_summaries",
    "session_memory_state",
    "raw_index_state",
)
# Foreign keys to sessions(id): the tables above and kv_store.
SESSION_FKS = (*ADDED, "kv_store")

# table → (old primary key, new primary key)
PRIMARY_KEYS = {
    "sessions": ("id", "id, user_id"),
    "session_messages": ("id", "id, user_id"),
    "session_messages_archive": ("id", "id, user_id"),
    "session_shares": ("session_id", "session_id, user_id"),
    "message_embeddings": ("session_id, sequence_number", "session_id, sequence_number, user_id"),
    "rolling_summaries": ("session_id", "session_id, user_id"),
    "session_memory_state": ("session_id", "session_id, user_id"),
    "raw_index_state": ("session_id", "session_id, user_id"),
    "memory_chunks": ("id", "id, user_id"),
    "memory_chunk_vectors": ("chunk_id, part", "chunk_id, part, user_id"),
    "kv_store": ("id", "id, user_id"),
    "memory_facts": ("id", "id, user_id"),
    "error_memory": ("id", "id, user_id"),
}
# (table, old name, old columns, new name, new columns)
UNIQUES = (
    (
        "session_messages",
        "uq_session_messages_session_id_sequence_number",
        "session_id, sequence_number",
        "uq_session_messages_session_id_sequence_number_user_id",
        "session_id, sequence_number, user_id",
    ),
    (
        "session_messages_archive",
        "uq_session_messages_archive_session_id_sequence_number",
        "session_id, sequence_number",
        "uq_session_messages_archive_session_id_sequence_number_user_id",
        "session_id, sequence_number, user_id",
    ),
    (
        "session_shares",
        "uq_session_shares_token",
        "token",
        "uq_session_shares_token_user_id",
        "token, user_id",
    ),
    (
        "session_shares",
        "uq_session_shares_token_hash",
        "token_hash",
        "uq_session_shares_token_hash_user_id",
        "token_hash, user_id",
    ),
    (
        "memory_chunks",
        "uq_memory_chunks_session_id_content_hash",
        "session_id, content_hash",
        "uq_memory_chunks_session_id_content_hash_user_id",
        "session_id, content_hash, user_id",
    ),
)


def _fk(table: str) -> str:
    return f"fk_{table}_session_id_sessions"


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute(
        """
        INSERT INTO navi_users (id, name)
        SELECT 'anonymous', 'anonymous'
        WHERE EXISTS (SELECT 1 FROM sessions WHERE user_id IS NULL)
           OR EXISTS (SELECT 1 FROM memory_chunks WHERE user_id IS NULL)
        ON CONFLICT DO NOTHING
        """
    )
    op.execute("UPDATE sessions SET user_id = 'anonymous' WHERE user_id IS NULL")
    op.execute("ALTER TABLE sessions ALTER COLUMN user_id SET NOT NULL")

    for table in ADDED:
        op.execute(f"ALTER TABLE {table} ADD COLUMN user_id text")
        op.execute(
            f"UPDATE {table} AS t SET user_id = s.user_id FROM sessions s WHERE s.id = t.session_id"
        )
        op.execute(f"ALTER TABLE {table} ALTER COLUMN user_id SET NOT NULL")
    op.execute(
        "UPDATE kv_store AS k SET user_id = s.user_id FROM sessions s"
        " WHERE s.id = k.session_id AND k.user_id <> s.user_id"
    )
    op.execute(
        "UPDATE memory_chunks AS c SET user_id = s.user_id FROM sessions s"
        " WHERE c.user_id IS NULL AND s.id = c.session_id"
    )
    op.execute("UPDATE memory_chunks SET user_id = 'anonymous' WHERE user_id IS NULL")
    op.execute("ALTER TABLE memory_chunks ALTER COLUMN user_id SET NOT NULL")
    op.execute(
        "UPDATE memory_chunk_vectors AS v SET user_id = c.user_id FROM memory_chunks c"
        " WHERE c.id = v.chunk_id AND v.user_id IS DISTINCT FROM c.user_id"
    )
    op.execute("ALTER TABLE memory_chunk_vectors ALTER COLUMN user_id SET NOT NULL")

    # Keys: the foreign keys into a changing primary key go first.
    for table in SESSION_FKS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {_fk(table)}")
    op.execute(
        "ALTER TABLE memory_chunk_vectors"
        " DROP CONSTRAINT fk_memory_chunk_vectors_chunk_id_memory_chunks"
    )
    op.execute("ALTER TABLE memory_facts DROP CONSTRAINT fk_memory_facts_merged_into_memory_facts")
    for table, (_, new) in PRIMARY_KEYS.items():
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT pk_{table},"
            f" ADD CONSTRAINT pk_{table} PRIMARY KEY ({new})"
        )
    for table, old_name, _, new_name, new_cols in UNIQUES:
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {old_name},"
            f" ADD CONSTRAINT {new_name} UNIQUE ({new_cols})"
        )
    for table in SESSION_FKS:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {_fk(table)} FOREIGN KEY (session_id, user_id)"
            " REFERENCES sessions (id, user_id) ON DELETE CASCADE"
        )
    op.execute(
        "ALTER TABLE memory_chunk_vectors ADD CONSTRAINT"
        " fk_memory_chunk_vectors_chunk_id_memory_chunks FOREIGN KEY (chunk_id, user_id)"
        " REFERENCES memory_chunks (id, user_id) ON DELETE CASCADE"
    )
    op.execute(
        "ALTER TABLE memory_facts ADD CONSTRAINT fk_memory_facts_merged_into_memory_facts"
        " FOREIGN KEY (merged_into, user_id) REFERENCES memory_facts (id, user_id)"
        " ON DELETE CASCADE"
    )

    # The backfilled chunks were never counted.
    op.execute(
        """
        INSERT INTO memory_chunk_counts AS c (user_id, chunks, version)
        SELECT user_id, count(*), nextval('navi_chunk_count_versions')
        FROM memory_chunks GROUP BY user_id
        ON CONFLICT (user_id) DO UPDATE SET chunks = EXCLUDED.chunks, version = EXCLUDED.version
        WHERE c.chunks <> EXCLUDED.chunks
        """
    )


def downgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute("ALTER TABLE memory_facts DROP CONSTRAINT fk_memory_facts_merged_into_memory_facts")
    op.execute(
        "ALTER TABLE memory_chunk_vectors"
        " DROP CONSTRAINT fk_memory_chunk_vectors_chunk_id_memory_chunks"
    )
    for table in SESSION_FKS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {_fk(table)}")
    for table, old_name, old_cols, new_name, _ in UNIQUES:
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {new_name},"
            f" ADD CONSTRAINT {old_name} UNIQUE ({old_cols})"
        )
    for table, (old, _) in PRIMARY_KEYS.items():
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT pk_{table},"
            f" ADD CONSTRAINT pk_{table} PRIMARY KEY ({old})"
        )
    op.execute(
        "ALTER TABLE memory_facts ADD CONSTRAINT fk_memory_facts_merged_into_memory_facts"
        " FOREIGN KEY (merged_into) REFERENCES memory_facts (id) ON DELETE SET NULL"
    )
    op.execute(
        "ALTER TABLE memory_chunk_vectors ADD CONSTRAINT"
        " fk_memory_chunk_vectors_chunk_id_memory_chunks FOREIGN KEY (chunk_id)"
        " REFERENCES memory_chunks (id) ON DELETE CASCADE"
    )
    for table in SESSION_FKS:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {_fk(table)} FOREIGN KEY (session_id)"
            " REFERENCES sessions (id) ON DELETE CASCADE"
        )
    op.execute("ALTER TABLE memory_chunk_vectors ALTER COLUMN user_id DROP NOT NULL")
    op.execute("ALTER TABLE memory_chunks ALTER COLUMN user_id DROP NOT NULL")
    for table in ADDED:
        op.execute(f"ALTER TABLE {table} DROP COLUMN user_id")
    op.execute("ALTER TABLE sessions ALTER COLUMN user_id DROP NOT NULL")
