"""The `chat_history` tool: argument checks, the search of one session's history and the
text the model reads — one implementation for `POST /tools/chat_history` and the agents'
tool registry."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import in_own_session
from app.domain.history.schemas import (
    ChatHistoryIn,
    ChatHistoryOut,
    HistoryHitOut,
    HistoryMessageOut,
)
from app.domain.history.search import (
    HistoryResult,
    HistoryRow,
    clip_json,
    normalize_call,
    render,
    utc,
)
from app.domain.history.services import HistorySearch
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.lib.errors import AppError, Unprocessable
from app.llm.gateway import LLMGateway
from app.llm.query_embeddings import embedded_ahead

MAX_QUERY = 2000


def _message(row: HistoryRow) -> HistoryMessageOut:
    content, truncated = clip_json(row.content)
    return HistoryMessageOut(
        sequence_number=row.sequence_number,
        role=row.role,
        content=content,
        created_at=utc(row.created_at),
        archived=row.archived,
        name=row.name,
        truncated=truncated,
    )


def result_out(session_id: uuid.UUID, result: HistoryResult) -> ChatHistoryOut:
    hits = []
    for h in result.hits:
        content, truncated = clip_json(h.row.content)
        hits.append(
            HistoryHitOut(
                sequence_number=h.row.sequence_number,
                role=h.row.role,
                content=content,
                created_at=utc(h.row.created_at),
                archived=h.row.archived,
                kind=h.kind,
                score=h.score,
                before=[_message(r) for r in h.before],
                after=[_message(r) for r in h.after],
                name=h.row.name,
                truncated=truncated,
            )
        )
    return ChatHistoryOut(
        session_id=str(session_id),
        mode=result.mode,
        match=result.match,
        query=result.query,
        limit=result.limit,
        fallback=result.fallback,
        hits=hits,
        text=render(result),
    )


async def run_chat_history_tool(
    history: HistorySearch,
    access: SessionAccess,
    principal: Principal,
    call: ChatHistoryIn,
    session_id: uuid.UUID,
) -> ChatHistoryOut:
    """Search or list one session's own history (hot and archived); the session is
    resolved for the caller first (another user's answers 404)."""
    normalized = normalize_call(call.mode, call.match, call.query, call.limit)
    if len(normalized.query) > MAX_QUERY:
        raise Unprocessable(f"query: at most {MAX_QUERY} characters")
    session = await access.get(session_id, Viewer.of(principal))
    result = await history.run(session.user_id, session_id, normalized)
    return result_out(session_id, result)


async def semantic_texts_ahead(
    runtime: Runtime, principal: Principal, session_id: uuid.UUID, call: ChatHistoryIn
) -> list[str]:
    """What the semantic mode of `call` will embed (the recent messages without a vector,
    then the query), read on a connection of its own and given back before they are
    embedded: the caller embeds them with no connection held. Nothing for a call that
    embeds nothing; a query the run refuses or a session out of the caller's reach reads
    nothing (the call's run answers them)."""
    normalized = normalize_call(call.mode, call.match, call.query, call.limit)
    if len(normalized.query) > MAX_QUERY:
        return []

    async def read(db: AsyncSession) -> list[str]:
        session = await SessionAccess(db).get(session_id, Viewer.of(principal))
        return await HistorySearch.of(db, runtime).texts_ahead(
            session.user_id, session_id, normalized
        )

    try:
        return await in_own_session(runtime.session_factory, read)
    except AppError:  # a session out of reach: the run answers it
        return []


async def embed_ahead(
    runtime: Runtime, principal: Principal, session_id: uuid.UUID, call: ChatHistoryIn
) -> LLMGateway | None:
    """`POST /tools/chat_history`'s embeddings, made before the request's first statement
    (its session keeps a pooled connection from then to its end): the gateway the
    semantic mode then embeds through — sealed, it answers from what was made here and
    never calls the model (a failure is remembered: the search degrades to keyword as
    with a down embedder). None when the call embeds nothing."""
    if runtime.llm is None:
        return None
    texts = await semantic_texts_ahead(runtime, principal, session_id, call)
    return await embedded_ahead(runtime.llm, texts)
