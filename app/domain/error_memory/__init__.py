"""Error memory (seed 001): resolved tool errors and their fixes, per user, across
sessions. Written by the `write_error` tool, read by `error_history` and by the unified
memory search (scope `errors`). Each entry lives ERROR_MEMORY_TTL_DAYS, renewed on every
hit; expired entries are never returned and are purged by a periodic job."""
