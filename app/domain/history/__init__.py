"""A session's own history as a memory layer (seed 001, layers 2 and 3).

* `chat_history` tool: keyword search (PostgreSQL full text + substring fallback) over
  every message a session ever had, hot and archived; semantic search over its recent
  messages, each hit with its neighbours; the most recent messages.
* Compaction of the hot history by size (`SESSION_MAX_HISTORY_BYTES`).
* The rolling summary of sessions in `rolling` context mode (`rolling*.py`).

There is no second "archive" store to write to: PostgreSQL keeps every message (the hot
table plus `session_messages_archive`), so the seed's dual write is not needed.
"""
