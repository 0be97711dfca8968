"""Deleting a user deletes everything they own: every row of every table with a
`user_id` (found in the metadata, so a new table is checked by itself) and their
session files on disk."""

from __future__ import annotations

from sqlalchemy import Table

import app.db.models  # noqa: F401 - registers every table
from app.db.base import Base
from tests.conftest import new_user, run_sql
from tests.integration.fill import fill_every_store


def user_tables() -> list[Table]:
    return [t for t in Base.metadata.sorted_tables if "user_id" in t.columns]


def rows_of(db_url: str, user_id: str) -> dict[str, int]:
    counts = {}
    for t in user_tables():
        rows = run_sql(db_url, f'select count(*) from "{t.name}" where user_id = %s', user_id)
        assert rows is not None
        counts[t.name] = rows[0][0]
    return counts


async def test_deleting_a_user_leaves_no_row_and_no_file(client, engine, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    alice_id, alice = await new_user(client, "alice")
    bob_id, bob = await new_user(client, "bob")
    filled = await fill_every_store(client, engine, settings, db_url, alice_id, alice)
    kept = await fill_every_store(client, engine, settings, db_url, bob_id, bob)
    before = rows_of(db_url, alice_id)
    # the fill reaches every table but the users' own (navi_users is keyed by `id`)
    empty = sorted(name for name, n in before.items() if n == 0)
    assert empty == [], f"the fill wrote nothing to {empty}: extend tests/integration/fill.py"
    folder = settings.data_path / "session_files" / filled.sid
    assert any(folder.iterdir())

    r = await client.delete(f"/admin/users/{alice_id}")
    assert r.status_code == 204, r.text

    left = {name: n for name, n in rows_of(db_url, alice_id).items() if n}
    assert left == {}, f"rows of the deleted user remain: {left}"
    assert run_sql(db_url, "select count(*) from navi_users where id = %s", alice_id) == [(0,)]
    assert not folder.exists(), "the user's session files are still on disk"
    # bob's are untouched
    assert all(rows_of(db_url, bob_id).values())
    assert any((settings.data_path / "session_files" / kept.sid).iterdir())
    assert (await client.get("/me", headers=alice)).status_code == 401
