"""Statements of a session's history reads, over the hot table and the archive together:
a history page, its size buckets, the compression records and the bound of the page after
a message — built here once (Core, bound parameters), executed only by `MessageRepository`
(message_repository.py).

A row still in the LLM context (a system note, kept verbatim by every compression) stays
hot however old it is, so the archive may hold rows newer than some hot ones: each read
here has one arm per table, and the repository merges them.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import (
    Float,
    Integer,
    Numeric,
    Table,
    Text,
    and_,
    bindparam,
    case,
    false,
    func,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by

from app.db.models import Message, MessageArchive
from app.domain.kernel.access import LLM_SYSTEM_SOURCES

_MESSAGES = cast(Table, Message.__table__)
_ARCHIVE = cast(Table, MessageArchive.__table__)


#: The columns of a message a history page shows (`sessions.services.message_out`).
PAGE_FIELDS = (
    "sequence_number", "display_index", "role", "content", "created_at", "thinking",
    "is_context", "is_display", "is_plan", "is_compression", "is_summary",
    "is_compression_critical", "is_recall", "message_metadata", "elapsed_seconds",
    "tool_call_count", "token_count", "tool_calls", "tool_call_id", "name", "files", "images",
)  # fmt: skip


def _page_of(table: Table, archived: bool) -> Any:
    """The newest `lim` displayed rows of `table` below `bound` (one arm of `PAGE`)."""
    names = {"message_metadata": "metadata"}  # the ORM's attribute → the column
    return (
        select(
            *(table.c[names.get(f, f)].label(f) for f in PAGE_FIELDS),
            (true() if archived else false()).label("archived"),
        )
        .where(
            table.c.user_id == bindparam("uid"),
            table.c.session_id == bindparam("sid"),
            table.c.display_index.is_not(None),
            table.c.sequence_number < bindparam("bound"),
        )
        .order_by(table.c.sequence_number.desc())
        .limit(bindparam("lim"))
    )


def _page() -> Any:
    """A history page's statement, built once (Core, bound parameters): the newest `lim`
    displayed rows below `bound` of the hot table and the archive together.

    Both tables are always read, in one statement: a row still in the LLM context (a
    system note, kept verbatim by every compression) stays hot however old it is, so the
    archive may hold rows newer than some hot ones, and no test on the hot rows alone
    tells whether the archive has a newer one. Each arm is an index range scan
    (`session_id, sequence_number`) stopped after `lim` rows, the archive's usually
    empty; the merge sorts at most 2 × `lim` rows."""
    both = union_all(_page_of(_MESSAGES, False), _page_of(_ARCHIVE, True)).subquery("page")
    return select(both).order_by(both.c.sequence_number.desc()).limit(bindparam("lim"))


PAGE = _page()


def _size_buckets(table: Table) -> Any:
    """A session's displayed messages from display index `first` on, summed in buckets of
    `width` display positions: per bucket its last display index and the tokens its
    messages gave the model (the stored `token_count`, else the characters they give a
    prompt — `estimate.message_chars`, in bytes — at `cpt` characters a token; the size
    is only read when no count is stored). Compression markers and system records the model
    never sees count 0 (`kernel.access.reaches_llm`). With them, the context the model
    counted after the bucket's newest turn answer that has `metadata.usage` (its prompt
    and answer tokens) and that answer's display index, when one has."""
    # octet_length: the stored size, read from a TOASTed value's header without
    # decompressing it (length() would decompress every message; bytes ≥ characters)
    chars = (
        func.length(table.c.role)
        + func.octet_length(table.c.content)
        + func.coalesce(func.octet_length(table.c.tool_calls.cast(Text)), 0)
        + func.coalesce(func.length(table.c.name), 0)
        + func.coalesce(func.length(table.c.tool_call_id), 0)
    )
    seen = and_(
        table.c.is_compression.is_(False),
        or_(
            table.c.role != "system",
            table.c.metadata["source"].astext.in_(sorted(LLM_SYSTEM_SOURCES)),
        ),
    )
    tokens = case(
        (~seen, 0),
        (table.c.token_count.is_not(None), table.c.token_count),
        else_=func.ceil(chars / bindparam("cpt", type_=Float)),
    )
    # a turn's answer: the model's own count of its call (`metadata.usage`, agents/turns.py)
    usage = table.c.metadata["usage"]
    measured = and_(
        table.c.role == "assistant",
        func.jsonb_typeof(usage["in"]) == "number",
        func.jsonb_typeof(usage["out"]) == "number",
    )
    context = usage["in"].astext.cast(Numeric) + usage["out"].astext.cast(Numeric)
    bucket = (table.c.display_index // bindparam("width", type_=Integer)).label("bucket")
    return (
        select(
            bucket,
            func.max(table.c.display_index).label("last_index"),
            func.sum(tokens).label("tokens"),
            func.max(table.c.display_index).filter(measured).label("measured_at"),
            func.array_agg(aggregate_order_by(context, table.c.display_index.desc()))
            .filter(measured)
            .label("measured"),
        )
        .where(
            table.c.user_id == bindparam("uid"),
            table.c.session_id == bindparam("sid"),
            table.c.display_index >= bindparam("first"),
        )
        .group_by(bucket)
    )


def _compressions(table: Table) -> Any:
    """A session's compression records, newest first: the displayed `is_compression`
    markers and the summaries compression wrote (`metadata.summarized`)."""
    return (
        select(
            table.c.sequence_number,
            table.c.display_index,
            table.c.content,
            table.c.created_at,
            table.c.is_compression,
            table.c.is_summary,
            table.c.metadata.label("message_metadata"),
        )
        .where(
            table.c.user_id == bindparam("uid"),
            table.c.session_id == bindparam("sid"),
            or_(
                table.c.is_compression.is_(True),
                table.c.is_summary.is_(True) & table.c.metadata.has_key("summarized"),
            ),
        )
        .order_by(table.c.sequence_number.desc())
        .limit(bindparam("lim"))
    )


def _newer(table: Table) -> Any:
    """Sequence numbers of displayed messages after `after`, oldest first."""
    return (
        select(table.c.sequence_number)
        .where(
            table.c.user_id == bindparam("uid"),
            table.c.session_id == bindparam("sid"),
            table.c.display_index.is_not(None),
            table.c.sequence_number > bindparam("after"),
        )
        .order_by(table.c.sequence_number)
        .limit(bindparam("lim"))
    )


_TABLES = (_MESSAGES, _ARCHIVE)
SIZE_BUCKETS = [_size_buckets(t) for t in _TABLES]
COMPRESSIONS = [_compressions(t) for t in _TABLES]
NEWER = [_newer(t) for t in _TABLES]
