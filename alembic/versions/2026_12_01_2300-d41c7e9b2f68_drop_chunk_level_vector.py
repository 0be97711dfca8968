"""memory_chunks.embedding dropped: searches read the segment vectors only

The chunk-level vector (the model's reading of a chunk's first ~1,000 chars) has had no
index since 2026_12_01_0730 and no reader: raw search reads `memory_chunk_vectors`.
Its NULL was `reembed`'s to-do marker; the marker is now the segment vectors' own: a
chunk with no `memory_chunk_vectors` row has no vectors yet (chunks embedded before
2026_11_29_2130 got their segment row from this column then).

Downgrade adds the column back empty (of the segment vectors' dimension): the older
`reembed` then embeds every chunk again.

Revision ID: d41c7e9b2f68
Revises: a3f9d2c7e815
Create Date: 2026-12-01 23:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "d41c7e9b2f68"
down_revision: str | None = "a3f9d2c7e815"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_column("memory_chunks", "embedding")


def downgrade() -> None:
    op.execute(
        """
        DO $$
        DECLARE vector_type text;
        BEGIN
            SELECT format_type(a.atttypid, a.atttypmod) INTO STRICT vector_type
            FROM pg_attribute a
            WHERE a.attrelid = 'memory_chunk_vectors'::regclass AND a.attname = 'embedding';
            EXECUTE format('ALTER TABLE memory_chunks ADD COLUMN embedding %s', vector_type);
        END $$
        """
    )
