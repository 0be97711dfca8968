"""Every controller and background job of the service, registered in one place."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.config import Settings
from app.console.routes import console_router
from app.domain.agents.controllers import TurnController, mcp_endpoint
from app.domain.auth.controllers import AdminUserController, MeController
from app.domain.auth.deletion import finish_deletions
from app.domain.chat_import.controllers import AdminChatImportController, ChatImportController
from app.domain.context.controllers import ContextController
from app.domain.context.lifecycle import EXTRACTION_JOB
from app.domain.error_memory.controllers import ErrorMemoryController
from app.domain.error_memory.services import purge_expired_errors
from app.domain.facts.controllers import AdminMemoryController, MemoryController
from app.domain.facts.extraction import extract_stale_sessions
from app.domain.files.controllers import SessionFilesController
from app.domain.files.services import cleanup_orphan_dirs
from app.domain.forget.controllers import (
    AdminForgetController,
    ForgetController,
    MemoryToolController,
)
from app.domain.forget.runner import resume_stalled
from app.domain.history.controllers import ChatHistoryController
from app.domain.kernel.jobs import LIVE_INDEX_JOB
from app.domain.kernel.runtime import Runtime
from app.domain.raw_history.embed_queue import embeds_in_process, live_embed_job
from app.domain.raw_history.idle_index import index_idle_job
from app.domain.raw_history.live_index import live_index_job
from app.domain.rolling.controllers import RollingSummaryController
from app.domain.rolling.services import run_rolling_summaries
from app.domain.search.controllers import MemorySearchController
from app.domain.sessions.controllers import SessionController
from app.domain.shares.controllers import (
    SharedController,
    ShareIssueController,
    SharePageController,
)
from app.domain.sketches.controllers import ScratchpadController
from app.domain.system.controllers import HealthController, MetricsController
from app.domain.transfer.controllers import AdminExportController, TransferController
from app.lib.docs_ui import swagger_static_router

ROUTE_HANDLERS: list[Any] = [
    SessionFilesController,
    ShareIssueController,
    SharedController,
    SharePageController,
    HealthController,
    MetricsController,
    swagger_static_router(),
    AdminUserController,
    MeController,
    TransferController,
    ChatImportController,
    AdminChatImportController,
    AdminExportController,
    SessionController,
    ContextController,
    RollingSummaryController,
    TurnController,
    MemorySearchController,
    ScratchpadController,
    MemoryController,
    AdminMemoryController,
    MemoryToolController,
    ForgetController,
    AdminForgetController,
    ChatHistoryController,
    ErrorMemoryController,
    mcp_endpoint,
    console_router(),
]


#: Who runs a job's tick (`Job.leader`): one process of all the replicas on the database,
#: one per host's data directory (work on local files), or every process (work this
#: process's own requests wake, or a queue leased out to many).
CLUSTER, HOST, PROCESS = "cluster", "host", "process"


@dataclass(frozen=True)
class Job:
    """A periodic background job: `run(runtime)` every `interval(settings)` seconds
    (0 = disabled). Every worker of every replica starts it; a tick runs where it leads
    (`leader`, an advisory lock: app/domain/kernel/leader.py). Jobs must still be safe
    with several processes running them at once (a lock can be lost with its
    connection mid-tick)."""

    name: str
    interval: Callable[[Settings], float]
    run: Callable[[Runtime], Awaitable[object]]
    leader: str = CLUSTER

    def leader_key(self, settings: Settings) -> str | None:
        """The advisory lock's key of a tick; None: every process runs its own."""
        if self.leader == PROCESS:
            return None
        if self.leader == HOST:
            return f"{self.name}:{socket.gethostname()}:{settings.data_path.resolve()}"
        return self.name


BACKGROUND_JOBS: list[Job] = [
    Job(
        "session_files.cleanup",
        lambda s: s.session_files_cleanup_seconds,
        cleanup_orphan_dirs,
        leader=HOST,  # the session directories are on this host's disk
    ),
    Job(
        EXTRACTION_JOB,
        lambda s: s.extraction_interval_seconds if s.extraction_enabled else 0,
        extract_stale_sessions,
    ),
    Job(
        "memory.idle_index",
        lambda s: (
            s.raw_index_idle_interval_seconds
            if s.raw_index_idle_enabled and s.memory_search_enabled
            else 0
        ),
        index_idle_job,
    ),
    Job(
        LIVE_INDEX_JOB,
        lambda s: s.raw_index_live_interval_seconds if s.memory_search_enabled else 0,
        live_index_job,
        leader=PROCESS,  # woken by this process's appends (`wake`): its own, at once
    ),
    Job(
        "memory.live_embed",
        lambda s: s.raw_index_live_interval_seconds if embeds_in_process(s) else 0,
        live_embed_job,
        leader=PROCESS,  # chunks leased one by one: several embedders share the queue
    ),
    Job("auth.user_deletion", lambda s: s.user_delete_resume_seconds, finish_deletions),
    Job("memory.forget_resume", lambda s: s.forget_resume_seconds, resume_stalled),
    Job("error_memory.purge", lambda s: s.error_memory_purge_seconds, purge_expired_errors),
    Job(
        "history.rolling_summary",
        lambda s: s.rolling_summary_interval_seconds,
        run_rolling_summaries,
    ),
]
