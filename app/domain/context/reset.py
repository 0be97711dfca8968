"""`POST /sessions/{id}/reset`: the conversation starts over, the memory stays.

Seed 001: a reset clears the message archive (and its cutoff), the rolling summary
survives. Here a reset deletes the session's messages — hot and archived, so the LLM
context and the display history alike — and their `chat_history` vectors, sets the
context token count to 0 and drops the compression state (baseline, truncation flag,
last compression, what recall already injected). It keeps the rolling summary and its
cursor (later messages are newer than the cursor, so the job summarises exactly them),
the raw-history chunks and every other memory (facts, sketches, error memory): what the
user said before the reset stays findable with `memory_search`. The live index's open
chunk is sealed, so the first messages after the reset start a chunk of their own
instead of joining one of the turns before it. Sequence numbers and
display positions keep counting, so breadcrumbs of old chunks never point at new
messages. A compress-mode summary is a stored message: it goes with the rest.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session
from app.domain.context.injection import INJECTED_CHARS_KEY
from app.domain.context.repositories import ContextRepository
from app.domain.context.schemas import ResetOut
from app.domain.context.writer import BASELINE_KEY, LAST_COMPRESSION_KEY, TRUNCATED_KEY
from app.domain.raw_history.state_repository import RawIndexRepository
from app.domain.rolling.repositories import RollingRepository
from app.domain.search.recall import INJECTED_KEY

RESET_KEYS = (BASELINE_KEY, TRUNCATED_KEY, LAST_COMPRESSION_KEY, INJECTED_CHARS_KEY, INJECTED_KEY)


async def reset_session(db: AsyncSession, session: Session) -> ResetOut:
    """Clear the session's conversation (the caller checked the editor permission)."""
    repo = ContextRepository(db)
    hot, archived, vectors = await repo.clear_history(session.user_id, session.id)
    metadata = session.session_metadata or {}
    dropped = [k for k in RESET_KEYS if k in metadata]
    await repo.reset_state(session.user_id, session.id, RESET_KEYS)
    await RawIndexRepository(db).close_open_chunk(session.user_id, session.id)
    rolling = await RollingRepository(db).get(session.user_id, session.id)
    return ResetOut(
        session_id=session.id,
        messages_cleared=hot,
        archived_cleared=archived,
        embeddings_cleared=vectors,
        compression_state_cleared=dropped,
        rolling_summary_kept=bool(rolling is not None and rolling.summary),
    )
