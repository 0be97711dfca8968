"""Statements that may fan out to every shard, on purpose (the plan check's allow-list).

Keyed by the app code that runs them (`path:qualname`, as tests/citus/statement_log.py
attributes a statement), each with why a multi-shard plan is right there: admin
listings across all users, background jobs that scan for work. Everything else on user
data must route to one shard. An entry allows the caller's every statement, so only
callers whose user-scoped statements name the user anyway (and route to one shard) are
listed for their all-users form.
"""

from __future__ import annotations

_ADMIN = "an all-users viewer (admin, navi.sessions.read_all, local mode)"
_JOB = "a background job's scan for work across users, read without a lock"

ALLOWED: dict[str, str] = {
    # -- an id alone names no shard: resolved once, the statements after it name the user
    "app/domain/kernel/repositories.py:scope_owner": (
        f"{_ADMIN} names a session by id alone: its owner is looked up across shards once,"
        " every statement after it names the owner"
    ),
    "app/domain/kernel/repositories.py:SessionLookupRepository.owner": (
        f"{_ADMIN} names a session by id alone: its owner (the history page's tenant key)"
        " is looked up across shards once; a user's own session is not looked up"
    ),
    "app/domain/kernel/repositories.py:SessionLookupRepository.get": (
        f"{_ADMIN} reads a session by id alone (its owner is not known before)"
    ),
    "app/domain/sessions/repositories.py:SessionRepository.search_matches": (
        f"{_ADMIN}: the searched sessions' owners resolved by id, then one statement per owner"
    ),
    "app/domain/shares/repositories.py:ShareRepository.resolve": (
        "a public share link is resolved by its token's hash before any user is known"
    ),
    # -- admin listings across all users
    "app/domain/sessions/repositories.py:SessionRepository.list_page": (
        f"the session list of {_ADMIN}: every user's sessions, paged"
    ),
    "app/domain/sessions/repositories.py:SessionRepository.count_summaries": (
        f"the session list's total for {_ADMIN}"
    ),
    "app/domain/facts/repositories.py:FactRepository.get": (
        "an admin's read of a fact by id across users (all_users=True)"
    ),
    "app/domain/facts/repositories.py:FactRepository.list_facts": (
        "an admin's fact listing across users (all_users=True)"
    ),
    "app/domain/facts/repositories.py:FactRepository.count_facts": (
        "an admin's fact listing's total across users (all_users=True)"
    ),
    "app/domain/facts/extraction_repository.py:ExtractionRepository.troubled": (
        "the console's system page (an admin's): every user's sessions whose fact"
        " extraction failed, was parked or accepted an empty answer, and their count"
    ),
    "app/domain/facts/search_repository.py:FactSearchRepository.vector_search": (
        "an admin's fact search across users (all_users=True)"
    ),
    # -- background jobs: candidates across users, then each claimed by its key
    "app/domain/facts/extraction_repository.py:ExtractionRepository.candidates": (
        f"{_JOB}: sessions pending extraction (the partial index of the append's mark),"
        " each then locked by (user_id, session_id)"
    ),
    "app/domain/raw_history/state_repository.py:RawIndexRepository.ensure_idle_rows": (
        f"{_JOB}: the idle-session raw index gives idle sessions their state rows"
    ),
    "app/domain/raw_history/state_repository.py:RawIndexRepository.pending": (
        f"{_JOB}: the idle-session raw index's candidates, each then locked by its key"
    ),
    "app/domain/raw_history/state_repository.py:RawIndexRepository.live_pending": (
        f"{_JOB}: the live raw index's recently active sessions, each then locked by its key"
    ),
    "app/domain/raw_history/chunk_writer_repository.py:ChunkWriter.due_chunks": (
        f"{_JOB}: chunks whose vectors lag their text, each then claimed and written back"
        " by its key"
    ),
    "app/domain/kernel/repositories.py:EmbedBacklogRepository.backlog": (
        "the embedding queue's size and oldest wait across users (/health, /metrics)"
    ),
    "app/domain/forget/job_repository.py:ForgetJobRepository.stalled": (
        f"{_JOB}: running forget jobs no runner advanced lately, each then claimed by (user_id, id)"
    ),
    "app/domain/rolling/repositories.py:RollingRepository.candidates": (
        f"{_JOB}: rolling-summary candidates, each then locked by (user_id, session_id)"
    ),
    "app/domain/facts/backfill_repository.py:BackfillRepository.unembedded_candidates": (
        f"{_JOB}: facts without a vector, each user's share then locked by key"
    ),
    "app/domain/facts/backfill_repository.py:BackfillRepository.count_unembedded": (
        "the facts backfill's progress: facts without a vector across users"
    ),
    "app/domain/files/repositories.py:FilesRepository.existing_session_ids": (
        "the session-files sweep: which of the directories' session ids still exist"
    ),
    "app/domain/transfer/import_repository.py:ImportRepository.taken_session_ids": (
        "an import keeps the file's session ids: whether one is already any user's session"
    ),
    # -- purges of expired rows across users
    "app/domain/facts/repositories.py:FactRepository.purge_expired": (
        "the facts purge: the users with expired facts, then a delete per user"
    ),
    "app/domain/error_memory/repositories.py:ErrorMemoryRepository.expired_candidates": (
        "the error-memory purge: expired entries across users, then deleted by key"
    ),
    # -- `make reembed` (an operator's command over the whole database)
    "app/domain/reembed/repositories.py:EmbeddingRepository.align_dimensions": (
        "re-embedding after a dimension change drops every user's vectors of a column"
    ),
    "app/domain/reembed/repositories.py:EmbeddingRepository.count_pending": (
        "re-embedding's progress: rows without a vector across users"
    ),
    "app/domain/reembed/repositories.py:EmbeddingRepository.claim": (
        f"{_JOB}: re-embedding's candidates (user_id, id), then locked per user by key"
    ),
}
