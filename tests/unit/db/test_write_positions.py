"""The host's table of users' last write positions (app/db/write_positions.py)."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from app.db.write_positions import ENV, SLOTS, WritePositions, create_shared, slot_of


def test_a_slot_keeps_the_largest_position() -> None:
    table = WritePositions()
    assert table.get("alice") == 0
    table.note("alice", 500)
    table.note("alice", 200)  # an older position never lowers it
    assert table.get("alice") == 500
    table.note("alice", 900)
    assert table.get("alice") == 900


def test_colliding_users_share_the_larger_position_toward_the_primary() -> None:
    first = "user-0"
    other = next(
        f"user-{i}" for i in range(1, 10 * SLOTS) if slot_of(f"user-{i}") == slot_of(first)
    )
    table = WritePositions()
    table.note(first, 1_000)
    table.note(other, 10)
    # `other` must wait for 1,000 (a read on the primary at worst), never for less
    assert table.get(other) == 1_000 and table.get(first) == 1_000


def test_the_table_has_a_fixed_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    path = create_shared(tmp_path)
    try:
        size = path.stat().st_size
        table = WritePositions(path)
        for i in range(20_000):
            table.note(f"u{i}", i + 1)
        assert path.stat().st_size == size == SLOTS * 8
    finally:
        path.unlink()


def _raise_slot(path: str, start: int, count: int) -> None:
    table = WritePositions(Path(path))
    for lsn in range(start, start + count):
        table.note("shared-user", lsn)


def test_processes_raising_one_slot_never_lose_the_largest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    path = create_shared(tmp_path)
    try:
        assert os.environ[ENV] == str(path)
        ctx = multiprocessing.get_context("spawn")
        procs = [
            ctx.Process(target=_raise_slot, args=(str(path), start, 3_000))
            for start in (1, 2_000, 4_000)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        assert WritePositions(path).get("shared-user") == 6_999
    finally:
        path.unlink()


def test_a_worker_without_the_table_falls_back_to_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "missing"))
    table = WritePositions.from_env()
    assert not table.shared
    table.note("bob", 7)
    assert table.get("bob") == 7
