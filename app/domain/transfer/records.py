"""The export format: which tables make a user's memory, and one NDJSON line per row.

Pure (no I/O): the record kinds, the header and end records, and the conversion of a
row to a JSON object (back to a row, the import's checks: decoding.py). One record is one
line: `{"type": "<kind>", <columns>}` with the table's column names (`user_id` left out:
the importing account supplies it).

The first line is the header (`format`, `version`, `user_id`, `exported_at`, `embedder`),
the last one is `{"type": "end", "records": N}`: a file cut short is refused on import.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec
from pgvector.sqlalchemy import Vector
from sqlalchemy import Column, Table

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
    "embedder_of",
    "file_record",
    "header",
    "line",
    "row_record",
]
