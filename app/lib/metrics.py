"""Navi's own Prometheus metrics (prometheus_client), in one module every layer may import.

The request metrics (latency histogram per route template and status, counts, in
progress) are Litestar's Prometheus plugin's (`litestar_*`, app/asgi/__init__.py); these are the
service's, each incremented in the one place the thing happens:

- model and embedding calls: `app/llm/policy.py` (`CallPolicy.call`);
- compressions: `app/domain/context/writer.py` (`CompressionWriter.record`);
- fact extraction's replies, failures and parked sessions:
  `app/domain/facts/extraction.py`;
- background jobs: `app/domain/kernel/jobs.py` (`periodic`);
- raw chunks: `app/domain/raw_history/indexer.py` (`index_demoted`) and
  `idle_index.py` (the idle-session job);
- forget requests and the rows they changed: `app/domain/forget/services.py`;
- read replica routing: `app/db/replica.py` (`ReplicaRouter`);
- the DB pool: read at scrape time from the engine (`app/db/engine.py:pool_stats`).

Every label takes values from a closed set (operations, error kinds, triggers, methods,
job names): the series are bounded. With several worker processes prometheus_client's
multiprocess mode aggregates them (`PROMETHEUS_MULTIPROC_DIR`, set by `navi serve`;
docs/operations.md, "Metrics").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

#: Model calls take from milliseconds (an embedding) to minutes (a long summary).
LLM_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

LLM_CALL_SECONDS = Histogram(
    "navi_llm_call_seconds",
    "Model (chat) and embedding calls through the gateway's call policy, retries included.",
    ["operation", "outcome"],
    buckets=LLM_BUCKETS,
)
LLM_CALL_FAILURES = Counter(
    "navi_llm_call_failures",
    "Model and embedding calls that failed, by the kind of failure (timeout, connect, "
    "http503, breaker_open, deadline, ...).",
    ["operation", "kind"],
)
COMPRESSIONS = Counter(
    "navi_compressions",
    "Context compressions written, by trigger (preturn, midturn, postturn, forced, profile) and "
    "method (summary, truncate).",
    ["trigger", "method"],
)
EXTRACTION_REPLIES = Counter(
    "navi_memory_extraction_replies",
    "Fact extraction's model replies, by outcome: ok, empty, empty_retried (an empty list "
    "for a transcript where the user states a fact: asked again), empty_accepted (still "
    "empty on the last attempt: kept, noted on the session), not_json, cut_off, "
    "invalid_item (unusable: asked again, or the session fails).",
    ["outcome"],
)
EXTRACTION_FAILURES = Counter(
    "navi_memory_extraction_failures",
    "Sessions whose fact extraction failed in a pass (after every attempt), by reason: "
    "not_json, cut_off, invalid_item, timeout, model_error, unavailable (the last not "
    "counted against the session).",
    ["reason"],
)
EXTRACTION_PARKED = Counter(
    "navi_memory_extraction_parked",
    "Sessions parked after MEMORY_EXTRACTION_MAX_ATTEMPTS failed extractions in a row.",
)
JOB_RUNS = Counter("navi_job_runs", "Runs of the periodic background jobs.", ["job"])
JOB_FAILURES = Counter(
    "navi_job_failures", "Runs of the periodic background jobs that raised.", ["job"]
)
JOB_LAG_SECONDS = Gauge(
    "navi_job_lag_seconds",
    "How late the job's last run started against its schedule (the previous start plus "
    "the interval): the previous run's length plus the event loop's delay.",
    ["job"],
    multiprocess_mode="max",
)
JOB_SECONDS = Histogram(
    "navi_job_seconds",
    "Duration of the periodic background jobs' runs.",
    ["job"],
    buckets=(0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 900),
)
RAW_CHUNKS_INDEXED = Counter(
    "navi_raw_chunks_indexed",
    "Raw history chunks written, by path: demotion (a compression's demoted messages) or "
    "idle (the idle-session job) or live (the live indexer, moments after an append).",
    ["path"],
)
CHAT_IMPORTED = Counter(
    "navi_chat_import",
    "What chat-export imports (POST /me/import/chats, the console's upload, the CLI) "
    "stored, by what: conversations (new sessions), topped_up, messages, files.",
    ["what"],
)
FORGETS = Counter(
    "navi_forgets",
    "Forget requests (POST /memory/forget, the admin's, the memory tool's), by dry_run "
    "(true, false). The text is never a label; the log carries a hash of it.",
    ["dry_run"],
)
FORGOTTEN_ROWS = Counter(
    "navi_forgotten_rows",
    "Rows changed or deleted by forget requests (not dry runs), by store (messages, "
    "chunks, facts, ...).",
    ["store"],
)

REPLICA_READS = Counter(
    "navi_replica_reads",
    "Read-only requests served by the read replica (DATABASE_REPLICA_URL).",
)
REPLICA_FALLBACKS = Counter(
    "navi_replica_fallbacks",
    "Read-only requests sent to the primary although a replica is configured, by reason: "
    "lag (replay behind past REPLICA_MAX_LAG_SECONDS), unreachable, not_ready (not yet "
    "measured, not in recovery), behind_write (the replica has not replayed the "
    "caller's last write yet).",
    ["reason"],
)
REPLICA_LAG_SECONDS = Gauge(
    "navi_replica_lag_seconds",
    "The replica's replay lag at the last check (an upper bound, within REPLICA_CHECK_SECONDS).",
    multiprocess_mode="max",
)


@dataclass(frozen=True)
class PoolStats:
    """The database pool of this process at one instant."""

    size: int
    in_use: int
    overflow: int
    waiting: int


class PoolCollector(Collector):
    """The DB pool's gauges, read when Prometheus scrapes (not sampled in between).

    `watch` hands it the reader of the serving app's engine; one collector per process,
    registered once (a second app in the process, as in tests, takes over the reader)."""

    def __init__(self) -> None:
        self._read: Callable[[], PoolStats | None] | None = None

    def watch(self, read: Callable[[], PoolStats | None] | None) -> None:
        self._read = read

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # no sample at registration time: no engine yet

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stats = self._read() if self._read is not None else None
        if stats is None:
            return
        for name, doc, value in (
            ("navi_db_pool_size", "Connections the pool keeps.", stats.size),
            ("navi_db_pool_in_use", "Connections checked out of the pool.", stats.in_use),
            ("navi_db_pool_overflow", "Connections open past the pool size.", stats.overflow),
            ("navi_db_pool_waiting", "Callers waiting for a connection.", stats.waiting),
        ):
            yield GaugeMetricFamily(name, doc, value=value)


POOL = PoolCollector()
REGISTRY.register(POOL)


def fresh_multiprocess_dir(path: Path) -> Path:
    """`path`, emptied of an earlier run's metric files: the directory
    PROMETHEUS_MULTIPROC_DIR names when `navi serve` runs several workers (the workers
    write their samples there; a scrape of any of them sums them all)."""
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.db"):
        old.unlink()
    return path


INDEX_EMBED_ROUNDS = Counter(
    "navi_index_embed_rounds",
    "Rounds of the live index's embedding queue that embedded something (indexer "
    "processes, or an app's own job; raw_history/embed_queue.py).",
)
INDEX_EMBEDDED_SEGMENTS = Counter(
    "navi_index_embedded_segments",
    "Chunk segments the embedding queue embedded (a segment is embedded again only when "
    "its text changed).",
)
INDEX_EMBEDDED_CHARS = Counter(
    "navi_index_embedded_chars",
    "Characters of chunk text the embedding queue embedded.",
)
INDEX_BACKLOG_CHUNKS = Gauge(
    "navi_index_backlog_chunks",
    "Chunks waiting for vectors (found by their words meanwhile), read at scrape time.",
    multiprocess_mode="mostrecent",
)
INDEX_BACKLOG_OLDEST_SECONDS = Gauge(
    "navi_index_backlog_oldest_seconds",
    "How long the oldest chunk waiting for vectors has waited, read at scrape time.",
    multiprocess_mode="mostrecent",
)
