"""The chunks' index function resolves the functions it calls with a pinned `search_path`.

`navi_chunk_user_tsv` (the chunks' text index expression) calls `navi_user_lexeme_key`
and `navi_chunk_search_text`. A call inside a function body is resolved at run time with
the session's `search_path`, and PostgreSQL 17+ runs maintenance — `CREATE INDEX`,
`REINDEX`, the index rebuild of `ALTER TABLE … TYPE` (which `make reembed` does when the
vector dimension changes) — with `search_path = pg_catalog, pg_temp`: the nested call
was not found ("function navi_user_lexeme_key(text) does not exist"). `SET search_path
FROM CURRENT` pins the schema the function was created in (the migration's own
`search_path`). `navi_user_tsquery` calls one too, but only ever runs in queries (the
session's `search_path`), and a SQL function with a `SET` clause is no longer inlined.

Revision ID: b6e2d8f41c57
Revises: 9d4c6b1e7a23
Create Date: 2026-12-01 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from app.db.migrate import pinned_search_path

revision: str = "b6e2d8f41c57"
down_revision: str | None = "9d4c6b1e7a23"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTIONS = ("navi_chunk_user_tsv(text, text, text[])",)


def upgrade() -> None:
    for fn in FUNCTIONS:
        op.execute(f"ALTER FUNCTION {fn} {pinned_search_path(op.get_bind())}")


def downgrade() -> None:
    for fn in FUNCTIONS:
        op.execute(f"ALTER FUNCTION {fn} RESET search_path")
