"""Tokens that expire: `navi_api_tokens.expires_at`

A console sign-in (`/console/login`) mints a token of its own for the browser's session
cookie; it ends at logout (revoked) or at `expires_at`, whichever comes first. Tokens
issued through the API keep `expires_at` NULL (no expiry), as before.

A new nullable column: no table rewrite (on Citus the reference table's copies change
with it).

Revision ID: c0a501e7a1b2
Revises: a7c3e5f1b9d2
Create Date: 2026-12-03 23:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "c0a501e7a1b2"
down_revision: str | None = "a7c3e5f1b9d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "navi_api_tokens", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("navi_api_tokens", "expires_at")
