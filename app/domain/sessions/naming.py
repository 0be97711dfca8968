"""Sessions are named after their first exchange (seed 003: `name`, "auto-generated
display name (set after first exchange)").

When an unnamed session gets an assistant reply after a user message (an append, or a
turn of the turn endpoint), :func:`name_after_commit` spawns :func:`name_session` once
the request has committed. The task asks the profile's model for a short title (within
``SESSION_AUTO_NAME_TIMEOUT_SECONDS``); when no model answers — an error, the deadline, an
empty or unusable reply — the title is the first words of the user's message. It is set
by one conditional UPDATE (``WHERE name IS NULL``): a name the user set meanwhile is never
overwritten. ``SESSION_AUTO_NAME_ENABLED=false`` switches it off.

The first exchange is read from the hot history and the archive together: a long
session's first messages may have been compacted into the archive before the name is
set, and an import writes a session's messages straight into both tables. An import
names the account's unnamed sessions once it has committed (:func:`start_naming_imported`:
one task, one session after another, at most ``NAMES_PER_IMPORT``; the others at their
next exchange).

The model is asked at most once per session: before the call the task takes the session's
naming lease (``session_metadata["auto_naming"]``, one conditional UPDATE, so one task
wins across processes; the others leave), dropped once the name is set.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import transaction
from app.domain.kernel.commits import after_commit
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.kernel.jobs import spawn
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.repositories import NAMING_LEASE_KEY, SessionRepository
from app.llm.deadline import llm_deadline
from app.llm.errors import LLMError

__all__ = [
    "clean_title",
    "fallback_title",
    "name_after_commit",
    "name_session",
    "start_naming",
    "start_naming_imported",
]

log = structlog.get_logger("app.sessions.naming")

#: The naming's lease outlives its model call (``SESSION_AUTO_NAME_TIMEOUT_SECONDS``) by
#: this much; a process that died mid-naming leaves it to expire, then an append retries.
NAMING_LEASE_MARGIN_SECONDS = 30.0
TITLE_MAX_CHARS = 60
FALLBACK_WORDS = 6
#: Sessions an import names in the background, one after another (one model call each).
NAMES_PER_IMPORT = 200
#: Characters of each message of the exchange the title model reads.
EXCERPT_CHARS = 2000
_PROMPT = (
    "Write a title of 2 to 6 words for the conversation below, in its language. "
    "Answer with the title only: no quotes, no punctuation at the end, no explanation."
)
_QUOTES = "\"'`«»“”„‘’*#"
_LABEL = re.compile(r"^(title|titre|titel|название|заголовок)\s*:\s*", re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def _cap(text: str) -> str:
    if len(text) <= TITLE_MAX_CHARS:
        return text
    cut = text[:TITLE_MAX_CHARS]
    head = cut.rsplit(" ", 1)[0] if " " in cut else cut
    return head.rstrip(" ,;:-")


def fallback_title(user_text: str) -> str:
    """The first words of the user's message (whitespace collapsed, capped)."""
    words = user_text.split()
    return _cap(" ".join(words[:FALLBACK_WORDS])) or "New session"


def clean_title(reply: str) -> str | None:
    """The model's reply as a title: its first non-empty line, a ``Title:`` label and
    quotes stripped, capped; None when nothing usable is left."""
    text = _THINK.sub("", reply)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = _LABEL.sub("", line.lstrip("-•* ")).strip(_QUOTES + " ")
    line = line.rstrip(".!?:;,").strip(_QUOTES + " ")
    line = " ".join(line.split())
    if not any(ch.isalnum() for ch in line):
        return None
    if len(line.split()) > 15:  # an answer, not a title
        return None
    return _cap(line) or None


async def _ask_model(runtime: Runtime, model: str, user_text: str, reply: str) -> str | None:
    settings = runtime.settings
    exchange = f"User: {user_text[:EXCERPT_CHARS]}\n\nAssistant: {reply[:EXCERPT_CHARS]}"
    try:
        with llm_deadline(
            settings.session_auto_name_timeout_seconds, "SESSION_AUTO_NAME_TIMEOUT_SECONDS"
        ):
            result = await runtime.llm.chat(
                [{"role": "system", "content": _PROMPT}, {"role": "user", "content": exchange}],
                model=model,
                max_tokens=32,
                think=False,
            )
    except LLMError as exc:
        log.info("session.auto_name_fallback", reason=type(exc).__name__)
        return None
    return clean_title(result.content)


async def name_session(runtime: Runtime, user_id: str, session_id: uuid.UUID) -> str | None:
    """Name the session after its first exchange unless it has a name; the name set."""
    lease = runtime.settings.session_auto_name_timeout_seconds + NAMING_LEASE_MARGIN_SECONDS
    async with transaction(runtime.session_factory) as db:
        repo = SessionRepository(db)
        found = await repo.unnamed_first_exchange(user_id, session_id)
        # One caller names the session (several appends while it is unnamed, several
        # processes): the others find the lease taken and leave.
        if found is None or not await repo.take_lease(
            user_id, session_id, NAMING_LEASE_KEY, "naming", lease, unnamed=True
        ):
            return None
    profile_id, user_text, reply = found
    model = runtime.profiles.get(profile_id).model
    title = await _ask_model(runtime, model, user_text, reply)
    source = "model" if title else "fallback"
    title = title or fallback_title(user_text)
    async with transaction(runtime.session_factory) as db:
        repo = SessionRepository(db)
        # a forget that went by while the model named it: the name redacted
        title = (await ForgottenRepository(db).guard(user_id)).redact(title)
        named = await repo.name_if_unnamed(user_id, session_id, title)
        await repo.drop_lease(user_id, session_id, NAMING_LEASE_KEY)
    log.info("session.auto_named", session_id=str(session_id), source=source, named=named)
    return title if named else None


def start_naming(runtime: Runtime, user_id: str, session_id: uuid.UUID) -> None:
    """Spawn :func:`name_session` (call it once the exchange is committed)."""
    if runtime.settings.session_auto_name_enabled:
        spawn(runtime.jobs, name_session(runtime, user_id, session_id), "session.auto_name")


async def name_imported_sessions(runtime: Runtime, user_id: str) -> int:
    """Name the user's unnamed sessions that have a first exchange, one after another
    (an import's: they never had an append to set it off); how many were named."""
    async with transaction(runtime.session_factory) as db:
        ids = await SessionRepository(db).unnamed_ids(user_id, NAMES_PER_IMPORT)
    named = 0
    for session_id in ids:
        named += await name_session(runtime, user_id, session_id) is not None
    return named


def start_naming_imported(runtime: Runtime, user_id: str) -> None:
    """Spawn :func:`name_imported_sessions` (call it once the import has committed)."""
    if runtime.settings.session_auto_name_enabled:
        spawn(runtime.jobs, name_imported_sessions(runtime, user_id), "session.auto_name")


def name_after_commit(db: AsyncSession, runtime: Runtime, session: Any) -> None:
    """After the request commits, name `session` in the background when it has no name
    (the caller appended an assistant reply: maybe its first exchange)."""
    if session.name is not None:
        return
    user_id, session_id = session.user_id, session.id
    after_commit(db, lambda: start_naming(runtime, user_id, session_id))
