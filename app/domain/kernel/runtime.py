"""The service's runtime: what every service, tool, job and the turn loop is built from,
made once at start-up (`app/asgi/lifespan.py`, `build_runtime`) and handed down explicitly.

It replaces the web framework's application state as the way the domain reaches the
model gateway, the database and the hooks: the HTTP providers (`*/deps.py`), the built-in
tools, the turn loop, MCP and the background jobs all take a `Runtime` and call each
service's one factory (`FactService.of(db, runtime)`, …), so the tool path and the
route path cannot wire a service differently.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.embedded import EmbeddedWatchdog
from app.db.replica import ReplicaRouter
from app.domain.kernel.access import Viewer
from app.domain.kernel.events import ContextEvent, UsageIn
from app.domain.kernel.hooks import DemotionHooks
from app.domain.kernel.jobs import Jobs
from app.domain.kernel.principal_cache import PrincipalCache
from app.domain.kernel.profiles import Profiles, load_profiles
from app.lib.rate_limit import TokenBuckets
from app.llm.gateway import LLMGateway

# (Imported at run time, not under TYPE_CHECKING: Litestar resolves the annotations of
# the dependencies it provides, the Runtime's fields among them.)

__all__ = ["AfterCommit", "NoSessionHooks", "Runtime", "SessionHooks", "SessionMaker"]

SessionMaker = async_sessionmaker[AsyncSession]
#: Work an append set off that must wait for the append's commit (the post-turn
#: compression): run by the handler once it committed, its events in the answer.
AfterCommit = Callable[[], Awaitable[list[ContextEvent]]]


class SessionHooks(ABC):
    """What a session's creation, appends and profile switch set off in other domains:
    declared here, implemented above (`context/lifecycle.py`), set on the runtime by the
    app root. Sessions never import the domains that react to them."""

    @abstractmethod
    def created(self, runtime: Runtime) -> None:
        """A session was created (the request has not committed yet)."""

    @abstractmethod
    async def appended(
        self,
        db: AsyncSession,
        runtime: Runtime,
        session_id: uuid.UUID,
        viewer: Viewer,
        usage: UsageIn,
    ) -> AfterCommit | None:
        """Messages were appended with the turn's usage report: the post-turn check, in
        the append's transaction; what it finds due (a compression) comes back, to be
        run once that transaction has committed."""

    @abstractmethod
    async def profile_changed(
        self, db: AsyncSession, runtime: Runtime, session_id: uuid.UUID, viewer: Viewer
    ) -> list[ContextEvent]:
        """The session's profile was switched: its window applies now."""


class NoSessionHooks(SessionHooks):
    """A runtime without the context domain's hooks (tools and benches that build one)."""

    def created(self, runtime: Runtime) -> None:
        return None

    async def appended(
        self,
        db: AsyncSession,
        runtime: Runtime,
        session_id: uuid.UUID,
        viewer: Viewer,
        usage: UsageIn,
    ) -> AfterCommit | None:
        return None

    async def profile_changed(
        self, db: AsyncSession, runtime: Runtime, session_id: uuid.UUID, viewer: Viewer
    ) -> list[ContextEvent]:
        return []


@dataclass(eq=False)
class Runtime:
    settings: Settings
    profiles: Profiles  # validated at start-up: a bad NAVI_PROFILES_FILE fails there
    llm: LLMGateway
    #: The primary's sessions (with a replica: sessions that note each commit's WAL
    #: position for read-your-writes, `db/replica.py`).
    session_factory: SessionMaker
    #: The primary's sessions in autocommit (READ_ONLY_STANDALONE routes); None: as above.
    autocommit_sessions: SessionMaker | None = None
    engine: AsyncEngine | None = None
    #: The periodic jobs' leader locks' sessions (kernel/leader.py): connections of their
    #: own, opened per tick (NullPool), so a lock held for a tick's length never takes a
    #: request's pooled connection; None: `session_factory`'s.
    leader_sessions: SessionMaker | None = None
    replica: ReplicaRouter | None = None
    demotion_hooks: DemotionHooks = field(default_factory=DemotionHooks)
    session_hooks: SessionHooks = field(default_factory=NoSessionHooks)
    principal_cache: PrincipalCache = field(default_factory=lambda: PrincipalCache(0))
    jobs: Jobs = field(default_factory=Jobs)
    embedded_watchdog: EmbeddedWatchdog | None = None
    #: A stand-in for the summary model call of compressions (benches and tests that
    #: measure without a model); None: the LLM summarizer on `llm`.
    summarizer: Any = None
    #: This process's upload rate limit, per user (FILES_UPLOADS_PER_MINUTE).
    upload_buckets: TokenBuckets = field(default_factory=TokenBuckets)

    def side_sessions(self, db: AsyncSession) -> SessionMaker:
        """The factory of extra read connections beside `db`: the replica's when `db`
        reads from the replica (`db/replica.py` marks such sessions), else the primary's."""
        side: SessionMaker | None = db.info.get("navi.side_sessions")
        return side or self.session_factory

    @classmethod
    def of(
        cls,
        settings: Settings,
        session_factory: SessionMaker,
        llm: LLMGateway | None = None,
        **fields: Any,
    ) -> Runtime:
        """A runtime from the settings and a session factory, the rest by default: the
        gateway the settings configure, the profiles they name (a CLI command, a bench)."""
        if llm is None:
            from app.llm.factory import build_gateway  # the gateway's own start-up cost

            llm = build_gateway(settings)
        profiles = fields.pop("profiles", None) or load_profiles(settings)
        return cls(settings, profiles, llm, session_factory, **fields)
