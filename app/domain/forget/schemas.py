"""Request and answers of a forget (POST /memory/forget, POST /admin/users/{id}/forget),
and the status of its job (GET …/forget/jobs/{id})."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

import msgspec

from app.domain.forget.redact import MAX_TEXT

# Bounded here (a 422 naming `text` before anything runs); the 3-character minimum is
# checked on the stripped text (`redact.check_text`).
ForgetText = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]

#: The stores an answer counts, in this order (rows changed, or facts and versions deleted).
STORES = (
    "messages",
    "archived_messages",
    "chunks",
    "facts",
    "fact_versions",
    "memory_summary",
    "rolling_summaries",
    "sketches",
    "errors",
    "sessions",
    "job_errors",
)


class ForgetIn(msgspec.Struct, forbid_unknown_fields=True):
    text: ForgetText
    dry_run: bool = False


class ForgottenFile(msgspec.Struct):
    session_id: uuid.UUID
    path: str


class ForgetOut(msgspec.Struct):
    dry_run: bool
    changed: dict[str, int]  # per store (STORES): rows redacted, or facts deleted
    files: list[ForgottenFile]  # session files holding the text: listed, not changed
    total: int  # the sum of `changed`


class ForgetProgress(msgspec.Struct):
    sessions_done: int
    sessions_total: int  # the user's sessions when the job began
    stores_done: bool  # the user-wide stores (facts, summary, scratchpads, errors)


class ForgetJobOut(msgspec.Struct):
    """A forget that runs on in the background (202), or its status later."""

    job_id: uuid.UUID
    state: str  # running | done | failed
    status_url: str
    progress: ForgetProgress
    result: ForgetOut  # the counts so far (all of them once `done`)
    attempts: int  # failed steps in a row (retried by the resume)
    error: str | None  # the last failed step's error type
    created_at: datetime
    finished_at: datetime | None
