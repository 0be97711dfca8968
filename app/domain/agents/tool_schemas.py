"""The built-in tools as a model sees them: a description written for the model and the
JSON schema of its arguments (the limits are the ones the tools enforce)."""

from __future__ import annotations

from typing import Any

from app.domain.error_memory.tool import MAX_QUERY as MAX_ERROR_QUERY
from app.domain.error_memory.tool import MAX_TEXT, MAX_TOOL
from app.domain.facts.schemas import (
    MAX_CATEGORY,
    MAX_EXPIRES_DAYS,
    MAX_FORGET_TEXT,
    MAX_KEY,
    MAX_QUERY,
    MAX_SEARCH_LIMIT,
    MAX_SOURCE_CONTEXT,
    MAX_VALUE,
    SOURCES,
)
from app.domain.history.tool import MAX_QUERY as MAX_HISTORY_QUERY
from app.domain.kernel.terms import SCOPES
from app.domain.search.tool import MAX_QUERY as MAX_SEARCH_QUERY
from app.domain.sketches.tool import MAX_SECTION, MAX_SKETCH

MAX_PATH = 4096  # a path or a file name the file tools take


def _string(description: str, max_length: int) -> dict[str, Any]:
    return {"type": "string", "description": description, "maxLength": max_length}


def _k(description: str) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": 20,
        "default": 5,
        "description": description,
    }


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


MEMORY_DESCRIPTION = (
    "Long-term facts about the user, kept across sessions. action=save stores or updates "
    "a fact (category, key, value; key is unique within its category); action=search finds "
    "saved facts by a query; action=forget with key deletes a fact (only when the user asks, "
    "or a fact is clearly wrong or outdated), with text erases that exact text (case-insensitive, at "
    "least 3 characters) from everything remembered about the user - conversations, facts, "
    "notes, summaries - when the user asks to forget it (e.g. a passport number); "
    "action=list names the categories that hold facts; action=history with key lists the "
    "values a fact held, newest first, with when each was true (e.g. where the user lived "
    "before). "
    "Confidence 0-100: tool output 95, the user's own statement 80, the web 50, a guess 30."
)
MEMORY = _object(
    {
        "action": {"type": "string", "enum": ["save", "search", "forget", "list", "history"]},
        "category": _string(
            "save/forget/history: e.g. preferences, projects, environment", MAX_CATEGORY
        ),
        "key": _string("save/forget/history: a short name for the fact, e.g. editor", MAX_KEY),
        "value": _string("save: the fact itself", MAX_VALUE),
        "source": {"type": "string", "enum": list(SOURCES), "description": "save: where from"},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
        "expires_days": {"type": "integer", "minimum": 1, "maximum": MAX_EXPIRES_DAYS},
        "source_context": _string("save: the words the fact came from", MAX_SOURCE_CONTEXT),
        "query": _string("search: what to look for", MAX_QUERY),
        "text": _string(
            "forget: the exact text to erase everywhere (instead of key)", MAX_FORGET_TEXT
        ),
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT},
    },
    ["action"],
)

MEMORY_SEARCH_DESCRIPTION = (
    "Search everything remembered — saved facts, earlier conversations (also the parts "
    "compressed out of your context) and this session's scratchpad — in one query. Use it "
    "when the user refers back to something you can no longer see ('as we discussed', "
    "'the port we picked', a name, a file, a number, a decision) before saying you do not "
    "remember; when the user mentions something personal (location, project, preference, "
    "recurring task) and you need the fact behind it; and to verify before assuming "
    "anything about the user's environment or preferences. Do not call it out of habit at "
    "the start of every session: what left your context is recalled automatically. Every "
    "hit says where it came from; prefer a newer fact over an older excerpt."
)
MEMORY_SEARCH = _object(
    {
        "query": _string(
            "what to look for: a name, file, command, value or topic", MAX_SEARCH_QUERY
        ),
        "scope": {"type": "string", "enum": list(SCOPES), "default": "all"},
        "k": _k("results per store"),
        "as_of": {
            "type": "string",
            "description": "the saved facts as they were at this time (ISO 8601 with zone, "
            "e.g. 2026-05-01T00:00:00Z): what was true then; the query's relative times "
            "('last week') are read from it too",
        },
    },
    ["query"],
)

CHAT_HISTORY_DESCRIPTION = (
    "This session's own history, including messages no longer in your context. "
    "mode=search finds messages matching a query (match=keyword for exact words, "
    "match=semantic for meaning), each with its neighbours; mode=recent lists the latest "
    "messages. Without a mode: search when there is a query, else recent."
)
CHAT_HISTORY = _object(
    {
        "mode": {"type": "string", "enum": ["search", "recent"]},
        "query": _string("search: what to look for", MAX_HISTORY_QUERY),
        "match": {"type": "string", "enum": ["keyword", "semantic"], "default": "keyword"},
        "limit": _k("how many messages"),
    },
    [],
)

WRITE_ERROR_DESCRIPTION = (
    "After you fixed a failing tool call, record the error and the fix, so the next time "
    "(in any session) error_history finds it. Kept for a while, renewed each time it helps."
)
WRITE_ERROR = _object(
    {
        "tool": _string("the tool that failed", MAX_TOOL),
        "error": _string("the error message, as the tool printed it", MAX_TEXT),
        "fix": _string("what made it work", MAX_TEXT),
        "context": _string("optional: what you were doing", MAX_TEXT),
    },
    ["tool", "error", "fix"],
)

ERROR_HISTORY_DESCRIPTION = (
    "When a tool call fails, look up past errors like this one and how they were fixed "
    "before trying something new. Give the error text as query, or a tool name, or both."
)
ERROR_HISTORY = _object(
    {
        "query": _string("the error text", MAX_ERROR_QUERY),
        "tool": _string("only errors of this tool", MAX_TOOL),
        "limit": _k("how many past errors"),
    },
    [],
)

SCRATCHPAD_READ_DESCRIPTION = (
    "Read this session's scratchpad: your working notes for the task at hand. With a "
    "section: that section in full; without: the sections there are, each with a preview."
)
SCRATCHPAD_READ = _object({"section": _string("the section to read", MAX_SECTION)}, [])

SCRATCHPAD_WRITE_DESCRIPTION = (
    "Write a section of this session's scratchpad (created, or replaced in full): a plan, "
    "a checklist, intermediate results — notes you will want later in this task."
)
SCRATCHPAD_WRITE = _object(
    {
        "section": _string("the section's name, e.g. plan", MAX_SECTION),
        "value": _string("the section's whole new text", MAX_SKETCH),
    },
    ["section", "value"],
)

IMAGE_VIEW_DESCRIPTION = (
    "Look at one of this session's images (pasted or uploaded) that is not in your "
    "context: give its path as the image notice lists it (session_files/<id>/image_2.png) "
    "or its file name. The image is attached to the tool result, for your next step only."
)
IMAGE_VIEW = _object(
    {"path": _string("the image: session_files/<id>/<name>, or the file name", MAX_PATH)},
    ["path"],
)

SHARE_FILE_DESCRIPTION = (
    "Give the user a file from this machine: copies the file at an absolute path (under "
    "the directories the service allows) into this session's files and returns its "
    "download link. The original is left where it is."
)
SHARE_FILE = _object(
    {"path": _string("the file's absolute path, e.g. /home/me/out/report.pdf", MAX_PATH)},
    ["path"],
)

CONTENT_PUBLISH_DESCRIPTION = (
    "Show a file that is already in this session's files to the user as an inline card "
    "(3D model, HTML, SVG, PDF, image, video, audio or text viewer). Copies nothing: "
    "use share_file first for a file elsewhere. Returns the card: type, size and URL."
)
CONTENT_PUBLISH = _object(
    {"filename": _string("the file's name in the session's files, e.g. model.stl", MAX_PATH)},
    ["filename"],
)
