"""Names in app/ that `make lint`'s vulture reports as unused but that are used: read by a
framework or a library by name, looked up from a string, or used outside app/ (which the
dead-code check does not scan). Vulture matches by name only (`_.tags` covers every `tags`),
so list a name here only with the reason it is used; never import app/ code here (an
import would count as a use and hide dead code).
"""

# ruff: noqa: B018 — a vulture whitelist is made of expressions that only name things

from vulture.whitelists.whitelist_utils import Whitelist

_ = Whitelist()

# -- Litestar reads these Controller attributes by name
_.tags  # OpenAPI tags of a controller's routes
_.dependencies  # a controller's dependency providers
_.guards  # a controller's guards (system/controllers.py)
_.response_headers  # headers on every response of a controller (shares/controllers.py)
_.include_in_schema  # kept out of the OpenAPI schema (shares/controllers.py)

# -- msgspec response fields: set by keyword, serialized by Litestar/msgspec, never read here
_.phase  # agents/stream.py Compression: SSE `compression` event
_.messages_cleared, _.archived_cleared, _.embeddings_cleared  # context/schemas.py ResetOut
_.compression_state_cleared, _.rolling_summary_kept  # context/schemas.py ResetOut
_.category_count  # facts/schemas.py CategoriesOut (GET /memory/categories)
_.original_name  # files/schemas.py FileOut
_.message_block  # files/schemas.py UploadOut
_.vector_version  # system/controllers.py ExtensionsOut (GET /health)
_.database, _.extensions, _.llm_breakers, _.embedding_fallback  # system HealthOut (/health)
_.dropped_records  # transfer/services.py ImportReport (POST /me/import)
_.trimmed_planning_entries  # transfer/services.py ImportReport (POST /me/import)
_.planning_logs  # sessions/schemas.py PlanningOut (GET /sessions/{id}/planning)
_.backlog_chunks, _.backlog_bytes  # system/controllers.py IndexOut (GET /health)
_.checked_seconds_ago  # system/controllers.py HealthOut, ReadyOut (/health, /health/ready)
_.sessions_left  # auth/schemas.py UserDeletionOut (DELETE /admin/users/{id}: 202)
_.next_cursor  # sessions/schemas.py SessionPage (GET /sessions)
_.key_decisions, _.past_discussions, _.current_discussion  # rolling/schemas.py RollingSummaryDoc
_.skipped_by_reason  # chat_import/schemas.py ChatImportReport (POST /me/import/chats)

# -- SQLAlchemy mapped columns used only in raw SQL text (db/models/memory.py)
_.extracted_at  # session_memory_state: facts/extraction_repository.py
_.covered, _.indexed_at  # raw_index_state: raw_history/state_repository.py
_.stale_since, _.embed_lease_until  # memory_chunks: raw_history/chunk_writer_repository.py
_.heartbeat  # forget_jobs: forget/job_repository.py
_.rolling_pending  # sessions: set by the append's Core UPDATE, read in rolling/repositories.py
_.raw_index_pending  # sessions: set by the append, read in raw_history/state_repository.py

# -- third-party callbacks and settings
_.proxy  # 3rd argument of SQLAlchemy's pool "checkout" event (db/engine.py listeners)
_.graph_optimization_level  # onnxruntime SessionOptions (llm/local_embedder.py)
_.inter_op_num_threads  # onnxruntime SessionOptions (llm/local_embedder.py)
_.intra_op_num_threads  # onnxruntime SessionOptions (llm/local_embedder.py)
_.log_severity_level  # onnxruntime SessionOptions (llm/local_embedder.py)
_.on_header_field, _.on_header_value, _.on_header_end  # python-multipart callbacks, by name
_.on_headers_finished, _.on_part_data, _.on_part_end  # (chat_import/upload.py _FirstFilePart)

# -- looked up from a string
_.create_app_from_env  # uvicorn's factory "app.asgi:create_app_from_env" (app/cli.py)
# agents/tool_schemas.py: getattr(schemas, NAME) and f"{NAME}_DESCRIPTION" in tools._spec
_.MEMORY, _.MEMORY_DESCRIPTION  # tool memory
_.MEMORY_SEARCH, _.MEMORY_SEARCH_DESCRIPTION  # tool memory_search
_.CHAT_HISTORY, _.CHAT_HISTORY_DESCRIPTION  # tool chat_history
_.WRITE_ERROR, _.WRITE_ERROR_DESCRIPTION  # tool write_error
_.ERROR_HISTORY, _.ERROR_HISTORY_DESCRIPTION  # tool error_history
_.SCRATCHPAD_READ, _.SCRATCHPAD_READ_DESCRIPTION  # tool scratchpad_read
_.SCRATCHPAD_WRITE, _.SCRATCHPAD_WRITE_DESCRIPTION  # tool scratchpad_write
_.IMAGE_VIEW, _.IMAGE_VIEW_DESCRIPTION  # tool image_view
_.SHARE_FILE, _.SHARE_FILE_DESCRIPTION  # tool share_file
_.CONTENT_PUBLISH, _.CONTENT_PUBLISH_DESCRIPTION  # tool content_publish

# -- request fields accepted for compatibility, never read
_.sent_chars  # kernel/events.py UsageIn: the calibration counts characters itself (issue 42)

# -- used by the Alembic migrations (alembic/)
_.has_citus, _.cluster_metadata  # db/citus.py: alembic/env.py, distribute_by_user
_.try_create_pg_trgm, _.drop_trigram_indexes  # db/extensions.py: initial_schema
_.ensure_trigram_indexes  # db/extensions.py: initial_schema (in its transaction)
_.lock_migrations  # db/migrate.py: alembic/env.py (every migration run)
_.pinned_search_path  # db/migrate.py: pin_search_function_paths, chunk_counts*

# -- used by the benchmarks (bench/) as their naive baselines
_.naive_scan  # facts/search_repository.py: bench/bench_facts.py
_.all_messages  # sessions/message_repository.py: bench/bench_sessions.py

# -- used by the tests only (candidates for removal with their tests' use)
_.is_fitted  # compression/calibration.py: tests/unit/compression/test_calibration.py
_.embed_failed  # raw_history/live_index.py LivePassResult: tests/integration/context
_.images_sent, _.images_omitted  # context/summarizer.py: tests/unit/context/test_summarizer.py
_.get_extraction_state  # facts/extraction.py: tests/integration/facts/test_extraction.py
_.found_in  # forget/redact.py: tests/unit/forget/test_redact.py
_.unregister  # kernel/hooks.py: tests/integration/context/test_persistence.py
_.cursor_only  # rolling/services.py: tests/integration/rolling/test_rolling_summary.py
_.get_archived_messages, _.hot_message_count  # sessions/message_repository.py: test_sessions
_.replay_lsn  # db/replica.py: tests/integration/replica/test_replica_reads.py
_.load  # llm/local_embedder.py: tests/integration/system/test_embedding_providers.py

# -- read by the console's Jinja templates (app/console/templates/console/chat_card.html)
_.inline, _.context_after, _.compression  # console/chat_cards.py: Inline, Usage, Card
