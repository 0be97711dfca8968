"""The embedding queue: when a chunk's vectors fell behind, and who is embedding it

The live index's vectors are embedded by indexer processes of their own (`navi indexer`,
started by `navi serve`), several of which may share one database
(`raw_history/embed_queue.py`):

- `memory_chunks.stale_since`: when the chunk's vectors stopped matching its text (set
  with `vectors_stale`, cleared with it): the backlog's oldest age in `/metrics` and
  `/health`, and the queue's order (oldest first).
- `memory_chunks.embed_lease_until`: an indexer claimed the chunk until then; another one
  passes it over, so no segment is embedded twice. A crashed indexer's lease runs out.

Two new nullable columns: no table rewrite. The chunks already stale count from their
creation.

Revision ID: f1a2b3c4d5e6
Revises: c0a501e7a1b2
Create Date: 2026-12-05 01:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "f1a2b3c4d5e6"
down_revision: str | None = "c0a501e7a1b2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("memory_chunks", sa.Column("stale_since", sa.DateTime(timezone=True)))
    op.add_column("memory_chunks", sa.Column("embed_lease_until", sa.DateTime(timezone=True)))
    op.execute("UPDATE memory_chunks SET stale_since = created_at WHERE vectors_stale")


def downgrade() -> None:
    op.drop_column("memory_chunks", "embed_lease_until")
    op.drop_column("memory_chunks", "stale_since")
