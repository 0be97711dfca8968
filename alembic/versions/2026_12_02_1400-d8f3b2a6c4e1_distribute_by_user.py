"""Distribute every table of user data by `user_id` when the database is a Citus coordinator

Nothing happens on a database without the `citus` extension (one PostgreSQL server,
the embedded one): this revision only records itself there.

With `citus` (run `alembic upgrade head` on the coordinator):

* **Reference tables** (a full copy on every node, so any shard joins them locally):
  `navi_users` — every table of user data references it (`user_id` → `navi_users.id`
  ON DELETE CASCADE: a user's deletion reaches every shard), it is small, and it is
  read by id and by name, neither of which is a tenant key of its own; and
  `navi_api_tokens` — read by `token_hash` on every request, before the user is known
  (a distributed table by `user_id` would make that lookup a fan-out, and its unique
  `token_hash` cannot include `user_id`), small, and it references `navi_users`.
  No other table is shared: `alembic_version` stays a local table of the coordinator.
* **Distributed tables**, all by `user_id` and co-located with `sessions` (same shard
  count, same hash ranges: a user's rows of every table live on one node, so the
  foreign keys between them and the joins on `user_id` stay on one shard; the foreign
  keys among them are dropped while the tables are distributed one by one — Citus
  distributes no table a local table references — and added back after): `sessions`
  first, then the tables that reference it — `session_messages`,
  `session_messages_archive`, `session_shares`, `message_embeddings`,
  `rolling_summaries`, `session_memory_state`, `raw_index_state`, `kv_store` — then the
  user-keyed ones — `memory_chunks`, then `memory_chunk_vectors` (its foreign key to its
  chunk), `memory_chunk_counts`, `memory_summary`, `memory_facts` (its self-reference
  `merged_into` carries `user_id`), `error_memory`.

What Citus needs beyond the tenant key (migrations f2b8c6d4a1e7 and c5a1d9e3f7b2):

* No trigger and no check constraint is left on these tables (the chunk-count
  statement triggers went in c5a1d9e3f7b2); no foreign key runs from a reference table
  to a distributed one (`navi_api_tokens` → `navi_users` is reference → reference).
* The `bigserial` ids (messages, archive, facts, error memory) keep their sequences:
  Citus evaluates `nextval` on the coordinator for the rows it routes, and gives each
  worker a disjoint range for rows written there. `navi_chunk_count_versions` is a
  plain sequence read by `nextval` in the statements that change a user's chunks.
* The functions of the text search and of the buckets (`navi_chunk_search_text`,
  `navi_user_lexeme_key`, `navi_chunk_user_tsv`, `navi_user_tsquery`,
  `navi_user_bucket`) are used by index expressions and queries run on the workers'
  shards: Citus propagated them when they were created after the extension; a database
  that got `citus` later gets them distributed here (`create_distributed_function`).
* The segment vectors' 64 partial HNSW graphs (one per user bucket) become one HNSW
  index, which Citus builds on every shard: on a cluster the shard is the user's
  bucket. The bucket indexes are dropped before the table is distributed (they would
  be built on every shard for nothing), the shard index is built after (in parallel on
  the workers). The search then leaves out the bucket condition (`app.db.citus`).

Distributing copies a table's rows into its shards and then empties the coordinator's
local copy; on a large database run it in a maintenance window. The downgrade
undistributes every table (`undistribute_table`, rows back on the coordinator) and
restores the bucket graphs.

Revision ID: d8f3b2a6c4e1
Revises: c5a1d9e3f7b2
Create Date: 2026-12-02 14:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.db.citus import BUCKET_HNSW_PREFIX, SHARD_HNSW_INDEX, has_citus

revision: str = "d8f3b2a6c4e1"
down_revision: str | None = "c5a1d9e3f7b2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REFERENCE = ("navi_users", "navi_api_tokens")
ANCHOR = "sessions"
# Co-located with ANCHOR (distributed first: `colocate_with` names it). The foreign keys
# between these tables are dropped while they are distributed and added back after
# (`_links`); those to the reference tables stay (those are distributed before).
COLOCATED = (
    "session_messages",
    "session_messages_archive",
    "session_shares",
    "message_embeddings",
    "rolling_summaries",
    "session_memory_state",
    "raw_index_state",
    "kv_store",
    "memory_chunks",
    "memory_chunk_vectors",
    "memory_chunk_counts",
    "memory_summary",
    "memory_facts",
    "error_memory",
)
DISTRIBUTED = (ANCHOR, *COLOCATED)
FUNCTIONS = (
    "navi_chunk_search_text(text, text[])",
    "navi_user_lexeme_key(text)",
    "navi_chunk_user_tsv(text, text, text[])",
    "navi_user_tsquery(text, tsquery)",
    "navi_user_bucket(text)",
)
BUCKETS = 64  # app.db.models.memory.SEGMENT_BUCKETS at this revision
HNSW = "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"


def _citus_tables(conn: sa.Connection) -> set[str]:
    rows = conn.execute(sa.text("SELECT logicalrelid::regclass::text FROM pg_dist_partition"))
    return {r[0] for r in rows}


def _links(conn: sa.Connection) -> list[tuple[str, str, str]]:
    """(table, name, definition) of the foreign keys from one table of user data to
    another: Citus distributes no table that a local table references, so they are
    dropped while the tables are distributed one by one and added back after."""
    rows = conn.execute(
        sa.text(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
            " FROM pg_constraint WHERE contype = 'f' AND conrelid <> confrelid"
            " AND conrelid::regclass::text = ANY(:t) AND confrelid::regclass::text = ANY(:t)"
            " ORDER BY 1, 2"
        ),
        {"t": list(DISTRIBUTED)},
    )
    return [(r[0], r[1], r[2]) for r in rows]


def _distribute_functions(conn: sa.Connection) -> None:
    for signature in FUNCTIONS:
        known = conn.execute(
            sa.text(
                "SELECT EXISTS (SELECT 1 FROM pg_dist_object WHERE classid = 'pg_proc'::regclass"
                " AND objid = CAST(:f AS regprocedure))"
            ),
            {"f": signature},
        ).scalar()
        if not known:
            conn.execute(sa.text("SELECT create_distributed_function(:f)"), {"f": signature})


def _bucket_indexes(create: bool) -> None:
    for n in range(BUCKETS):
        name = f"{BUCKET_HNSW_PREFIX}{n:02d}"
        if create:
            op.execute(
                f"CREATE INDEX {name} ON memory_chunk_vectors {HNSW}"
                f" WHERE navi_user_bucket(user_id) = {n}"
            )
        else:
            op.execute(f"DROP INDEX IF EXISTS {name}")


def upgrade() -> None:
    conn = op.get_bind()
    if not has_citus(conn):
        return
    op.execute("SET LOCAL lock_timeout = '10s'")
    # one connection per worker for the DDL and copies of this transaction: the tables
    # are created and changed in the same transaction as they are distributed
    op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.execute("SET LOCAL client_min_messages = warning")  # the copies' NOTICEs
    _distribute_functions(conn)
    done = _citus_tables(conn)
    for table in REFERENCE:
        if table not in done:
            op.execute(f"SELECT create_reference_table('{table}')")
    _bucket_indexes(create=False)
    links = _links(conn)
    for table, name, _ in links:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    if ANCHOR not in done:
        op.execute(f"SELECT create_distributed_table('{ANCHOR}', 'user_id')")
    for table in COLOCATED:
        if table not in done:
            op.execute(
                f"SELECT create_distributed_table('{table}', 'user_id', colocate_with => '{ANCHOR}')"
            )
    for table, name, definition in links:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    op.execute(f"CREATE INDEX IF NOT EXISTS {SHARD_HNSW_INDEX} ON memory_chunk_vectors {HNSW}")
    # the rows copied into the shards stay in the coordinator's local tables until
    # removed (a no-op on tables that were empty)
    for table in (*REFERENCE, *DISTRIBUTED):
        op.execute(f"SELECT truncate_local_data_after_distributing_table('{table}')")


def downgrade() -> None:
    conn = op.get_bind()
    if not has_citus(conn):
        return
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.execute("SET LOCAL client_min_messages = warning")
    op.execute(f"DROP INDEX IF EXISTS {SHARD_HNSW_INDEX}")
    done = _citus_tables(conn)
    # referencing tables before the tables they reference
    for table in (*reversed(DISTRIBUTED), *reversed(REFERENCE)):
        if table in done:
            op.execute(f"SELECT undistribute_table('{table}', cascade_via_foreign_keys => true)")
            done = _citus_tables(conn)
    _bucket_indexes(create=True)
