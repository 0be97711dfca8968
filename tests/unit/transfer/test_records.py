"""The export format without a database: which tables, records back to rows, NDJSON lines."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

import app.db.models  # noqa: F401 - registers every table
from app.config import Settings
from app.db.base import Base
from app.domain.transfer.decoding import RecordError, decode
from app.domain.transfer.export_repository import PAGE_ROWS
from app.domain.transfer.ndjson import ndjson_lines
from app.domain.transfer.records import KIND_BY_TYPE, KINDS, NOT_EXPORTED, embedder_of
from app.lib.errors import PayloadTooLarge


def test_every_table_with_a_user_id_is_exported_or_said_why_not() -> None:
    user_tables = {t.name for t in Base.metadata.sorted_tables if "user_id" in t.columns}
    exported = {k.table.name for k in KINDS}
    assert user_tables - exported - set(NOT_EXPORTED) == set()
    assert exported & set(NOT_EXPORTED) == set()


def test_export_reads_modest_pages() -> None:
    assert 100 <= PAGE_ROWS <= 1000
    assert all(10 <= k.page_rows <= 1000 for k in KINDS)
    assert KIND_BY_TYPE["message"].page_rows <= 100  # a message may be 1M chars


def test_user_id_and_generated_columns_are_not_in_records() -> None:
    for kind in KINDS:
        names = {c.name for c in kind.columns}
        assert "user_id" not in names
    assert "search_terms" not in {c.name for c in KIND_BY_TYPE["chunk"].columns}
    assert "id" not in {c.name for c in KIND_BY_TYPE["message"].columns}


def test_decode_converts_and_names_the_bad_field() -> None:
    kind = KIND_BY_TYPE["session"]
    sid = uuid.uuid4()
    row = decode(
        kind,
        {
            "type": "session",
            "id": str(sid),
            "profile_id": "default",
            "created_at": "2026-11-01T12:00:00Z",
            "next_planning_seq": 1,
            "next_seq": 4,
        },
        768,
    )
    assert row["id"] == sid and row["created_at"] == datetime(2026, 11, 1, 12, tzinfo=UTC)
    assert row["next_seq"] == 4 and row["next_planning_seq"] == 1
    bad = [
        ({"id": str(sid)}, "profile_id: missing"),
        ({"id": "x", "profile_id": "p"}, "id: expected a UUID"),
        ({"id": str(sid), "profile_id": "p", "next_seq": "1"}, "next_seq: expected an integer"),
        ({"id": str(sid), "profile_id": "p", "pinned": 1}, "pinned: expected true or false"),
        ({"id": str(sid), "profile_id": "p", "created_at": "2026-11-01"}, "time zone"),
        ({"id": str(sid), "profile_id": "p", "color": "red"}, "unknown field 'color'"),
        ({"id": str(sid), "profile_id": "p" * 201}, "profile_id: at most 200 characters"),
        ({"id": str(sid), "profile_id": "a\x00"}, "profile_id: contains U+0000"),
    ]
    for record, message in bad:
        with pytest.raises(RecordError, match=re.escape(message)):
            decode(kind, {"type": "session", **record}, 768)


def test_vectors_are_checked_or_dropped() -> None:
    kind = KIND_BY_TYPE["fact"]
    record = {"type": "fact", "id": 1, "category": "c", "key": "k", "value": "v"}
    assert decode(kind, {**record, "embedding": [0.5, 1]}, 2)["embedding"] == [0.5, 1.0]
    assert decode(kind, {**record, "embedding": [0.5, 1]}, None)["embedding"] is None
    with pytest.raises(RecordError, match="embedding: expected a list of 3 numbers"):
        decode(kind, {**record, "embedding": [0.5, 1]}, 3)


def test_embedder_names_provider_model_and_dimension() -> None:
    assert embedder_of(Settings()) == {"name": "ollama:nomic-embed-text:latest", "dimension": 768}
    assert embedder_of(Settings(embedding_provider="local"))["dimension"] == 384
    assert embedder_of(Settings(embedding_provider="none"))["name"] == "none"


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for p in parts:
        yield p


async def _lines(*parts: bytes, max_bytes: int = 1000, max_line: int = 100) -> list[bytes]:
    return [x async for x in ndjson_lines(_chunks(*parts), max_bytes, max_line=max_line)]


async def test_ndjson_lines_across_chunks() -> None:
    assert await _lines(b'{"a"', b":1}\r\n\n{", b'"b":2}') == [b'{"a":1}', b"", b'{"b":2}']
    assert await _lines(b"x\n") == [b"x"]


async def test_ndjson_limits_are_413() -> None:
    with pytest.raises(PayloadTooLarge, match="IMPORT_MAX_MB"):
        await _lines(b"x\n" * 600)
    with pytest.raises(PayloadTooLarge, match="a line longer than 100 bytes"):
        await _lines(b"y" * 101)
