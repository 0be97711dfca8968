"""Records back to rows, for the import: one record's fields checked against its table's
columns and converted to the values an insert takes (`decode`), and the session records
of older files brought to the current shape (`split_legacy_planning`).

Pure (no I/O). A record that cannot be imported raises `RecordError` naming the field.
The format itself — the record kinds, the header and end records, rows as records — is
records.py's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Integer,
    String,
    Text,
    Uuid,
)
from sqlalchemy.dialects.postgresql import INT8MULTIRANGE, JSONB

from app.domain.transfer.records import Kind

_encoder = msgspec.json.Encoder()


class RecordError(ValueError):
    """A record that cannot be imported; the message names the field."""


def _text(col: Column[Any], v: Any) -> Any:
    if not isinstance(v, str):
        raise RecordError(f"{col.name}: expected a string")
    if "\x00" in v:
        raise RecordError(f"{col.name}: contains U+0000")
    length = getattr(col.type, "length", None)
    if length is not None and len(v) > length:
        raise RecordError(f"{col.name}: at most {length} characters")
    return v


def _int(col: Column[Any], v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int) or not -(2**63) <= v < 2**63:
        raise RecordError(f"{col.name}: expected an integer")
    if isinstance(col.type, Integer) and not isinstance(col.type, BigInteger):
        if not -(2**31) <= v < 2**31:
            raise RecordError(f"{col.name}: out of range")
    return v


def _bool(col: Column[Any], v: Any) -> Any:
    if not isinstance(v, bool):
        raise RecordError(f"{col.name}: expected true or false")
    return v


def _float(col: Column[Any], v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise RecordError(f"{col.name}: expected a number")
    return float(v)


def _datetime(col: Column[Any], v: Any) -> Any:
    try:
        parsed = datetime.fromisoformat(v)
    except (TypeError, ValueError):
        raise RecordError(f"{col.name}: expected an RFC 3339 timestamp") from None
    if parsed.tzinfo is None:
        raise RecordError(f"{col.name}: the timestamp needs a time zone")
    return parsed


def _uuid(col: Column[Any], v: Any) -> Any:
    try:
        return uuid.UUID(v)
    except (TypeError, ValueError, AttributeError):
        raise RecordError(f"{col.name}: expected a UUID") from None


def _json(col: Column[Any], v: Any) -> Any:
    if b"\\u0000" in _encoder.encode(v):
        raise RecordError(f"{col.name}: contains U+0000")
    return v


def _text_list(col: Column[Any], v: Any) -> Any:
    if not isinstance(v, list):
        raise RecordError(f"{col.name}: expected a list of strings")
    return [_text(col, x) for x in v]


def _multirange(col: Column[Any], v: Any) -> Any:
    # PostgreSQL parses it on insert (`CAST(… AS int8multirange)`); only its shape here.
    if not isinstance(v, str) or not v.startswith("{") or not v.endswith("}"):
        raise RecordError(f"{col.name}: expected a multirange like '{{[0,10)}}'")
    return v


def _converter(col: Column[Any]) -> Callable[[Column[Any], Any], Any]:
    t = col.type
    if isinstance(t, Vector):
        return _json  # checked against the dimension by `decode`
    if isinstance(t, DateTime):
        return _datetime
    if isinstance(t, Uuid):
        return _uuid
    if isinstance(t, Boolean):
        return _bool
    if isinstance(t, Integer):  # BigInteger included
        return _int
    if isinstance(t, Float):
        return _float
    if isinstance(t, JSONB):
        return _json
    if isinstance(t, ARRAY):
        return _text_list
    if isinstance(t, INT8MULTIRANGE):
        return _multirange
    if isinstance(t, String | Text):
        return _text
    raise TypeError(f"no converter for {col.table.name}.{col.name}: {t!r}")  # a new type


def _required(col: Column[Any]) -> bool:
    return not col.nullable and col.server_default is None and col.default is None


def decode(kind: Kind, record: dict[str, Any], dimension: int | None) -> dict[str, Any]:
    """The column values of `record` for an insert. `dimension`: the vector length
    expected, None to drop vectors. Raises RecordError naming the field."""
    names = {c.name for c in kind.columns}
    unknown = sorted(set(record) - names - {"type"})
    if unknown:
        raise RecordError(f"unknown field {unknown[0]!r}")
    out: dict[str, Any] = {}
    for col in kind.columns:
        if col.name not in record:
            if _required(col) and not (col.name == kind.vector and dimension is None):
                raise RecordError(f"{col.name}: missing")
            continue
        value = record[col.name]
        if col.name == kind.vector:
            out[col.name] = _vector(col, value, dimension)
            continue
        if value is None:
            if not col.nullable:
                raise RecordError(f"{col.name}: may not be null")
            out[col.name] = None
            continue
        out[col.name] = _converter(col)(col, value)
    if kind.type == "chunk" and dimension is None:
        out["vectors_stale"] = True  # its vectors are dropped: the background embedder's
        out["stale_since"] = datetime.now(UTC)
    return out


def split_legacy_planning(record: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A session record of a file made before planning logs had their own table (the
    list `planning_logs` in the session) as the session record and `planning_entry`
    records; any other record as it is, with no entries."""
    if record.get("type") != "session" or "planning_logs" not in record:
        return record, []
    session = dict(record)
    logs = session.pop("planning_logs")
    if not isinstance(logs, list):
        raise RecordError("planning_logs: expected a list")
    session.setdefault("next_planning_seq", len(logs))
    sid = session.get("id")
    entries = [
        {"type": "planning_entry", "session_id": sid, "seq": i, "entry": entry}
        for i, entry in enumerate(logs)
    ]
    return session, entries


def _vector(col: Column[Any], value: Any, dimension: int | None) -> list[float] | None:
    if dimension is None or value is None:
        return None
    if not isinstance(value, list) or len(value) != dimension:
        raise RecordError(f"{col.name}: expected a list of {dimension} numbers")
    try:
        return [_float(col, x) for x in value]
    except RecordError:
        raise RecordError(f"{col.name}: expected a list of {dimension} numbers") from None


__all__ = ["RecordError", "decode", "split_legacy_planning"]
