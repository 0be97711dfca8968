# ruff: noqa: E402 (sys.path first: tests.fakes is imported from the project root)
"""Every `app.*` (and `tests.*`) name the benchmarks use, imported in this one place, so
a module of the app that moves is renamed here only.

Import it after the environment is settled: `_embedder.select_embedder` (and
bench_search) set `EMBEDDING_PROVIDER` first, as the vector columns follow the embedder.

`unified_search` is the one wiring of its own here: the app builds its unified search
from a `Runtime` (`UnifiedSearch.of`), the benches from a stub gateway and a factory.
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # for tests.fakes
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.asgi import create_app
from app.config import FIELDS, Settings, get_settings
from app.db import migrate as migrations
from app.db.engine import (
    create_engine,
    normalize_url,
    read_snapshot,
    session_factory,
    start_embedded,
    transaction,
)
from app.db.extensions import TRIGRAM_INDEXES
from app.db.models import Session
from app.db.models.memory import SEGMENT_BUCKETS
from app.domain.auth.tokens import display_prefix, hash_token
from app.domain.chat_import.chatgpt import parse_chatgpt
from app.domain.chat_import.reader import ExportReader
from app.domain.chat_import.services import import_chats
from app.domain.compression import (
    Msg,
    calibration_for,
    estimate_tokens,
    plan_compression,
    reset_registry,
)
from app.domain.context.compressor import compress_and_save_session
from app.domain.context.loading import estimator_for, load_context
from app.domain.context.summarizer import Summary
from app.domain.error_memory.services import unified_error_search
from app.domain.facts.backfill import backfill_embeddings
from app.domain.facts.memory_hits import search_fact_hits
from app.domain.facts.search_repository import FactSearchRepository
from app.domain.facts.services import FactService, query_words
from app.domain.kernel.access import Viewer
from app.domain.kernel.messages import MessageIn
from app.domain.kernel.profiles import Profile, load_profiles
from app.domain.kernel.stopwords import STOPWORDS
from app.domain.kernel.terms import query_terms
from app.domain.kernel.when import read_time
from app.domain.raw_history.chunks import ChunkMessage
from app.domain.raw_history.idle_index import IndexPassResult, index_idle_sessions
from app.domain.raw_history.line_days import with_days
from app.domain.raw_history.live_index import index_live_group, index_live_sessions
from app.domain.raw_history.ranking import first_person, idf, segment_spans, term_pattern
from app.domain.raw_history.repositories import Segment
from app.domain.raw_history.search import (
    TEXT_CANDIDATES,
    VECTOR_CANDIDATES,
    rank_candidates,
    search_raw,
    search_terms,
    text_candidates,
)
from app.domain.raw_history.speakers import query_names
from app.domain.rolling.services import run_rolling_summaries
from app.domain.search.render import format_hits
from app.domain.search.services import UnifiedSearch
from app.domain.sessions.compaction_repository import _SIZE as HISTORY_SIZE_SQL
from app.domain.sessions.controllers import DEFAULT_POSITIONS, MAX_POSITIONS
from app.domain.sessions.message_repository import MessageRepository
from app.domain.sessions.repositories import SessionRepository
from app.domain.sessions.services import SessionService
from app.domain.transfer.exporter import export_lines
from app.lib.logging import configure_logging
from app.lib.runtime import freeze_startup_heap
from app.lib.sql import contains_pattern
from app.llm.factory import build_gateway
from app.llm.gateway import LLMGateway
from app.llm.local_embedder import LocalEmbedder
from tests.citus.cluster import create_cluster_database, drop_cluster_database
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import DEFAULT_CHAT_REPLY, FakeOllama, fake_embedding
from tests.fakes.pg_cluster import PgCluster

__all__ = [
    "ChunkMessage",
    "with_days",
    "DEFAULT_CHAT_REPLY",
    "DEFAULT_POSITIONS",
    "ExportReader",
    "import_chats",
    "index_live_group",
    "index_live_sessions",
    "parse_chatgpt",
    "FIELDS",
    "HISTORY_SIZE_SQL",
    "MAX_POSITIONS",
    "SEGMENT_BUCKETS",
    "STOPWORDS",
    "TEXT_CANDIDATES",
    "TRIGRAM_INDEXES",
    "VECTOR_CANDIDATES",
    "FactSearchRepository",
    "FactService",
    "FakeOllama",
    "IndexPassResult",
    "LocalEmbedder",
    "MessageIn",
    "MessageRepository",
    "Msg",
    "PgCluster",
    "Profile",
    "ScriptedReply",
    "Segment",
    "Session",
    "SessionRepository",
    "SessionService",
    "Settings",
    "Summary",
    "Viewer",
    "backfill_embeddings",
    "build_gateway",
    "calibration_for",
    "compress_and_save_session",
    "configure_logging",
    "contains_pattern",
    "create_cluster_database",
    "drop_cluster_database",
    "create_app",
    "create_engine",
    "display_prefix",
    "estimate_tokens",
    "estimator_for",
    "export_lines",
    "fake_embedding",
    "format_hits",
    "freeze_startup_heap",
    "get_settings",
    "first_person",
    "query_names",
    "hash_token",
    "idf",
    "index_idle_sessions",
    "load_context",
    "load_profiles",
    "migrations",
    "normalize_url",
    "plan_compression",
    "query_terms",
    "query_words",
    "rank_candidates",
    "read_snapshot",
    "read_time",
    "reset_registry",
    "run_rolling_summaries",
    "search_raw",
    "search_terms",
    "segment_spans",
    "session_factory",
    "start_embedded",
    "term_pattern",
    "text_candidates",
    "transaction",
    "unified_search",
]


def unified_search(
    db: AsyncSession,
    llm: LLMGateway | None,
    settings: Settings,
    side_sessions: async_sessionmaker[AsyncSession] | None = None,
) -> UnifiedSearch:
    """The unified search over every store the service has (facts, errors, raw history,
    sketches), as `UnifiedSearch.of` wires it, on `llm` (a bench's stub gateway);
    `side_sessions`: the factory of the second connection that reads the facts and
    sketches while the raw index is searched (None: every store on `db`)."""
    return UnifiedSearch(
        db,
        llm,
        settings,
        facts=search_fact_hits,
        errors=unified_error_search(settings),
        side_sessions=side_sessions,
    )
