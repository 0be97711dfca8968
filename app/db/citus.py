"""What differs when the database is a Citus coordinator (docs/scaling.md, "Partitioning by user").

The schema is the same on one server and on a cluster except for the segment vectors'
nearest-neighbour index: one PostgreSQL keeps 64 partial HNSW graphs, one per user
bucket (`ix_memory_chunk_vectors_hnsw_bNN`, `WHERE navi_user_bucket(user_id) = n`); a
cluster keeps one HNSW graph per shard (`ix_memory_chunk_vectors_hnsw`), the shard being
the user's bucket there. Migration `d8f3b2a6c4e1` makes that switch where `citus` is
installed; the query side asks `segment_buckets` once per engine which shape it has.
"""

from __future__ import annotations

import weakref

from sqlalchemy import Index, MetaData, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncSession

#: The cluster's one HNSW index on `memory_chunk_vectors` (built per shard by Citus).
SHARD_HNSW_INDEX = "ix_memory_chunk_vectors_hnsw"
#: The single server's per-bucket HNSW indexes: `…_b00` … `…_b63`.
BUCKET_HNSW_PREFIX = "ix_memory_chunk_vectors_hnsw_b"

_HAS_CITUS = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
# Any bucket graph in the search path's schema: the one-server shape.
_HAS_BUCKETS = (
    "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = current_schema()"
    f" AND tablename = 'memory_chunk_vectors' AND indexname LIKE '{BUCKET_HNSW_PREFIX}%')"
)


def has_citus(conn: Connection) -> bool:
    """Whether the current database has the `citus` extension (a coordinator, or a
    single node that distributes its tables)."""
    return bool(conn.execute(text(_HAS_CITUS)).scalar())


def cluster_metadata(metadata: MetaData) -> MetaData:
    """The schema a cluster has: `metadata` (the models) with the segment vectors' bucket
    graphs replaced by the one shard graph — what `alembic check` compares a
    coordinator with (alembic/env.py)."""
    copy = MetaData(naming_convention=metadata.naming_convention)
    for table in metadata.sorted_tables:
        table.to_metadata(copy)
    vectors = copy.tables["memory_chunk_vectors"]
    for index in [i for i in vectors.indexes if (i.name or "").startswith(BUCKET_HNSW_PREFIX)]:
        vectors.indexes.discard(index)
    Index(
        SHARD_HNSW_INDEX,
        vectors.c.embedding,
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    return copy


_bucket_shape: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


async def segment_buckets(session: AsyncSession) -> bool:
    """Whether the segment vectors have the per-bucket HNSW graphs (one server) rather
    than one graph per shard (a cluster): asked once per engine, the answer kept for
    the engine's life (the shape changes only with a migration, which a running app is
    not started across)."""
    bind = session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    known = _bucket_shape.get(engine)
    if known is None:
        known = bool((await session.execute(text(_HAS_BUCKETS))).scalar())
        _bucket_shape[engine] = known
    return known
