"""The export format: which tables make a user's memory, and one NDJSON line per row.

Pure (no I/O): the record kinds, the header and end records, and the conversion of a
row to a JSON object and back. One record is one line: `{"type": "<kind>", <columns>}`
with the table's column names (`user_id` left out: the importing account supplies it).

The first line is the header (`format`, `version`, `user_id`, `exported_at`, `embedder`),
the last one is `{"type": "end", "records": N}`: a file cut short is refused on import.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
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
    Table,
    Text,
    Uuid,
)
from sqlalchemy.dialects.postgresql import INT8MULTIRANGE, JSONB

from app.config import Settings
from app.db.models import (
    ErrorMemory,
    FactVersion,
    ForgottenText,
    MemoryChunk,
    MemoryChunkVector,
    MemoryFact,
    MemorySummary,
    Message,
    MessageArchive,
    MessageEmbedding,
    PlanningEntry,
    RawIndexState,
    RollingSummary,
    Session,
    SessionMemoryState,
    SessionShare,
    Sketch,
)
from app.llm.local_embedder import LOCAL_MODEL

FORMAT = "navi-export"
VERSION = 1
HEADER = "header"
END = "end"
FILE = "file"
FORGOTTEN = "forgotten"  # the forget records: written first (after the header), read first
#: Bytes of a session file per `file` record (base64 makes a line about 1 MiB).
FILE_PART_BYTES = 768 * 1024


@dataclass(frozen=True)
class Kind:
    """A table exported as records of `type`, read in keyset pages on `order`.

    The columns of `order` follow an index that leads with `user_id`, so each page is one
    range of that index. A `by_session` kind is read a session at a time instead (its
    tables are keyed by `(session_id, …, user_id)`, with no index leading with `user_id`):
    `order` is then its key inside the session (empty: one row per session).

    `skip`: columns not exported (a serial id the import lets the database draw; a
    generated column). `vector`: the column dropped (NULL) when the file's embedder is not
    the server's; `vectors_only`: the rows are such vectors only, and are dropped then."""

    type: str
    table: Table
    order: tuple[str, ...]
    skip: frozenset[str] = frozenset()
    vector: str | None = None
    vectors_only: bool = False
    by_session: bool = False
    page_rows: int = 500  # rows per read (messages: up to MESSAGE_MAX_CHARS each)
    columns: tuple[Column[Any], ...] = field(init=False)

    def __post_init__(self) -> None:
        cols = tuple(
            c
            for c in self.table.columns
            if c.name != "user_id" and c.name not in self.skip and c.computed is None
        )
        object.__setattr__(self, "columns", cols)


def _t(model: Any) -> Table:
    return model.__table__  # type: ignore[no-any-return]


# In import order: a row's session before it (the foreign keys), a chunk before its
# segment vectors. Facts keep their ids in the file only: the import draws new ones and
# maps `merged_into`. Not exported, rebuilt instead: `memory_chunk_counts` (set by the
# import), users and tokens (credentials stay with the server).
KINDS: tuple[Kind, ...] = (
    # `message_bytes` (the storage quota's count) is not exported: the import counts it
    Kind("session", _t(Session), ("last_active", "id"), skip=frozenset({"message_bytes"})),
    Kind(
        "message",
        _t(Message),
        ("sequence_number",),
        skip=frozenset({"id"}),
        by_session=True,
        page_rows=100,
    ),
    Kind(
        "archived_message",
        _t(MessageArchive),
        ("sequence_number",),
        skip=frozenset({"id"}),
        by_session=True,
        page_rows=100,
    ),
    Kind(
        "message_embedding",
        _t(MessageEmbedding),
        ("sequence_number",),
        vector="embedding",
        vectors_only=True,
        by_session=True,
    ),
    Kind("rolling_summary", _t(RollingSummary), (), by_session=True),
    Kind("extraction_state", _t(SessionMemoryState), (), by_session=True),
    Kind("raw_index_state", _t(RawIndexState), (), by_session=True),
    Kind("share", _t(SessionShare), (), by_session=True),
    Kind("planning_entry", _t(PlanningEntry), ("seq",), by_session=True, page_rows=100),
    Kind("sketch", _t(Sketch), ("scope", "id")),  # ix (user_id, scope)
    # chunks have no foreign key to their session (it may be gone): read by user
    # (an indexer's lease on a chunk is this server's business: not exported)
    Kind("chunk", _t(MemoryChunk), ("session_id", "id"), skip=frozenset({"embed_lease_until"})),
    Kind(
        "chunk_vector",
        _t(MemoryChunkVector),
        ("session_id", "chunk_id", "part"),  # ix (user_id, session_id)
        vector="embedding",
        vectors_only=True,
    ),
    Kind("fact", _t(MemoryFact), ("category", "key"), vector="embedding"),  # uq (user_id, …)
    # after the facts: the import maps `fact_id` to the facts' new ids (a deleted fact's
    # versions get a new id of their own); ix (user_id, fact_id, id)
    Kind("fact_version", _t(FactVersion), ("fact_id", "id"), skip=frozenset({"id"})),
    Kind("memory_summary", _t(MemorySummary), ()),
    Kind(
        "error",
        _t(ErrorMemory),
        ("expires_at", "id"),  # ix (user_id, expires_at)
        skip=frozenset({"id"}),
        vector="embedding",
    ),
    # hashes of forgotten texts (kernel/forgotten); each entry has its own time
    Kind(FORGOTTEN, _t(ForgottenText), (), skip=frozenset({"updated_at"})),
)
KIND_BY_TYPE = {k.type: k for k in KINDS}
#: The tables with a `user_id` an export leaves out, and why (a unit test checks that
#: every table with a `user_id` is in `KINDS` or here).
NOT_EXPORTED = {
    "memory_chunk_counts": "a counter of the user's chunks: the import sets it",
    "navi_api_tokens": "credentials stay with the server: the new account has its own",
    "forget_jobs": "this server's forgets of a text (the text itself erased when one ends)",
}
RECORD_TYPES = (HEADER, *KIND_BY_TYPE, FILE, END)


def embedder_of(settings: Settings) -> dict[str, Any]:
    """What made the vectors: provider and model, and the dimension of the columns."""
    if settings.embedding_provider == "ollama":
        name = f"ollama:{settings.embedding_model}"
    elif settings.embedding_provider == "local":
        name = f"local:{LOCAL_MODEL}"
    else:
        name = "none"
    return {"name": name, "dimension": settings.vector_dim}


def header(user_id: str, exported_at: datetime, settings: Settings) -> dict[str, Any]:
    return {
        "type": HEADER,
        "format": FORMAT,
        "version": VERSION,
        "user_id": user_id,
        "exported_at": exported_at,
        "embedder": embedder_of(settings),
    }


_encoder = msgspec.json.Encoder()


def line(record: dict[str, Any]) -> bytes:
    return _encoder.encode(record) + b"\n"


def row_record(kind: Kind, row: Any) -> dict[str, Any]:
    """A database row (its mapping) as a record: vectors as lists, the rest as msgspec
    encodes them (datetimes RFC 3339, UUIDs as text, JSON as is)."""
    out: dict[str, Any] = {"type": kind.type}
    for col in kind.columns:
        value = row[col.name]
        if value is not None and isinstance(col.type, Vector):
            value = [float(x) for x in value]
        out[col.name] = value
    return out


def file_record(session_id: uuid.UUID, name: str, offset: int, data: bytes) -> dict[str, Any]:
    return {
        "type": FILE,
        "session_id": session_id,
        "name": name,
        "offset": offset,
        "data": base64.b64encode(data).decode("ascii"),
    }


# --- reading records back ------------------------------------------------------------


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


__all__ = [
    "END",
    "FILE",
    "FILE_PART_BYTES",
    "FORGOTTEN",
    "FORMAT",
    "HEADER",
    "KINDS",
    "KIND_BY_TYPE",
    "NOT_EXPORTED",
    "RECORD_TYPES",
    "VERSION",
    "Kind",
    "RecordError",
    "decode",
    "embedder_of",
    "file_record",
    "header",
    "line",
    "row_record",
    "split_legacy_planning",
]
