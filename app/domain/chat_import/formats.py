"""Pure parsing of chat exports: one conversation's JSON (already decoded) → a transcript.

The shapes are described in /work/shared/notes/chat-export-formats.md (nobody publishes
a schema): every field is optional, unknown fields are ignored, and what cannot be read
is counted under a reason instead of guessed. A conversation that cannot be read at all
raises `RecordError` (the importer skips it and names it); a message that cannot be read
is skipped and counted on the conversation.

* ChatGPT: `mapping` is a tree of nodes linked by `parent`; the transcript is the branch
  the user kept — from `current_node` (else the newest leaf) up through the parents,
  reversed — walked with a visited set (cycles occur), hidden, system and tool nodes left
  out.
* Claude: `chat_messages` in array order, or, when the messages carry
  `parent_message_uuid`, the branch from the newest leaf up to the root.
* JSON Lines: one OpenAI-style message a line, grouped by `conversation_id`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

CHATGPT, CLAUDE, JSONL = "chatgpt", "claude", "jsonl"
FORMATS = (CHATGPT, CLAUDE, JSONL)
TITLE_MAX_CHARS = 200

# ChatGPT content types that are never the visible transcript (notes 1.5, 1.8)
_HIDDEN_TYPES = frozenset(
    {
        "user_editable_context",
        "model_editable_context",
        "thoughts",
        "reasoning_recap",
        "tether_browsing_display",
        "tether_quote",
        "system_error",
        "sonic_webpage",
        "code",
        "execution_output",
        "computer_output",
        "super_widget",
        "app_pairing_content",
    }
)
_IMAGE_PARTS = frozenset({"image_asset_pointer"})
# citation markers of ChatGPT answers: \ue200cite\ue202turn0search1\ue201 and 【11†source】
_CITATIONS = re.compile("\ue200[^\ue201]*\ue201|【[^】]*†[^】]*】")
_ROLES = {"human": "user", "user": "user", "assistant": "assistant"}


class RecordError(ValueError):
    """A conversation that cannot be imported (the message says why)."""


@dataclass
class Attachment:
    """A file a message refers to: `ref` is the export's id of its bytes (ChatGPT's
    asset id), `data` the bytes when the export carries them inline (Claude's extracted
    text)."""

    name: str
    ref: str | None = None
    mime: str | None = None
    data: bytes | None = None


@dataclass
class ChatMessage:
    key: str  # the source's message id, else a hash of role + text (re-import matching)
    role: str  # "user" | "assistant"
    content: str
    created_at: datetime | None
    thinking: str | None = None
    attachments: list[Attachment] = field(default_factory=list)
    time_inferred: bool = False


@dataclass
class Conversation:
    source: str
    source_id: str
    title: str
    created_at: datetime | None
    messages: list[ChatMessage]
    skipped: Counter[str] = field(default_factory=Counter)  # reason → messages
    notes: list[str] = field(default_factory=list)  # what the reader should know


def clean_text(text: str) -> str:
    """The text PostgreSQL can store (no NUL), citation markers removed, stripped."""
    return _CITATIONS.sub("", text.replace("\x00", "\ufffd")).strip()


def content_key(role: str, text: str) -> str:
    return "h:" + hashlib.sha1(f"{role}\n{text}".encode(), usedforsecurity=False).hexdigest()[:20]


def epoch_time(value: Any) -> datetime | None:
    """Float epoch seconds (ChatGPT) → an aware datetime; None when absent or absurd."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not 0 < value < 32_503_680_000:  # before year 3000
        return None
    return datetime.fromtimestamp(float(value), UTC)


def iso_time(value: Any) -> datetime | None:
    """ISO 8601 (Claude, `…Z`) → an aware datetime; None when absent or unreadable.
    Epoch numbers are accepted too (JSON Lines' `time`)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_time(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _title(raw: Any) -> str:
    if not isinstance(raw, str):
        return ""
    return " ".join(clean_text(raw).split())[:TITLE_MAX_CHARS]


def fill_times(messages: list[ChatMessage], start: datetime | None) -> None:
    """A message without a time takes its predecessor's (else the conversation's start),
    flagged `time_inferred`; never a time made up from nothing but the import's."""
    last = start
    for m in messages:
        if m.created_at is None:
            m.created_at, m.time_inferred = last, True
        else:
            last = m.created_at
    if any(m.created_at is None for m in messages):
        first = next((m.created_at for m in messages if m.created_at), None)
        for m in messages:
            if m.created_at is None:
                m.created_at, m.time_inferred = first, True


# --- ChatGPT -------------------------------------------------------------------------


def _node_time(node: Any) -> float:
    msg = node.get("message") if isinstance(node, dict) else None
    t = msg.get("create_time") if isinstance(msg, dict) else None
    return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else -1.0


def kept_branch(mapping: dict[str, Any], current: Any) -> tuple[list[str], bool]:
    """The node ids from the root to the kept leaf (`current`, else the newest leaf), and
    whether a cycle cut the walk."""
    leaf = current if isinstance(current, str) and current in mapping else None
    if leaf is None:
        parents = {n.get("parent") for n in mapping.values() if isinstance(n, dict)}
        leaves = [nid for nid in mapping if nid not in parents]
        leaf = max(leaves or list(mapping), key=lambda nid: _node_time(mapping[nid]), default=None)
    path: list[str] = []
    seen: set[str] = set()
    cycle = False
    while isinstance(leaf, str) and leaf in mapping:
        if leaf in seen:
            cycle = True
            break
        seen.add(leaf)
        path.append(leaf)
        node = mapping[leaf]
        leaf = node.get("parent") if isinstance(node, dict) else None
    path.reverse()
    return path, cycle


def _asset_id(pointer: Any) -> str | None:
    if not isinstance(pointer, str) or not pointer:
        return None
    return pointer.split("://", 1)[-1] or None


def _chatgpt_parts(content: dict[str, Any]) -> tuple[list[str], list[Attachment], bool]:
    """Texts, attachments, and whether every object part was an image."""
    texts: list[str] = []
    files: list[Attachment] = []
    only_images = True
    parts = content.get("parts")
    if not isinstance(parts, list):
        text = content.get("text")
        return ([text] if isinstance(text, str) else []), files, False
    for part in parts:
        if isinstance(part, str):
            if part.strip():
                texts.append(part)
                only_images = False
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("content_type")
        if kind in _IMAGE_PARTS:
            ref = _asset_id(part.get("asset_pointer"))
            if ref:
                files.append(Attachment(name=ref, ref=ref))
            continue
        only_images = False
        if kind == "audio_asset_pointer":
            ref = _asset_id(part.get("asset_pointer"))
            if ref:
                files.append(Attachment(name=ref, ref=ref, mime="audio/wav"))
        elif kind == "real_time_user_audio_video_asset_pointer":
            audio = part.get("audio_asset_pointer")
            ref = _asset_id(audio.get("asset_pointer")) if isinstance(audio, dict) else None
            if ref:
                files.append(Attachment(name=ref, ref=ref, mime="audio/wav"))
        elif isinstance(part.get("text"), str):  # audio_transcription and the like
            texts.append(part["text"])
    return texts, files, only_images and bool(files)


def _chatgpt_attachments(meta: Any, files: list[Attachment]) -> list[Attachment]:
    """The parts' files, named by `metadata.attachments` (deduplicated by id)."""
    by_ref = {f.ref: f for f in files}
    listed = meta.get("attachments") if isinstance(meta, dict) else None
    for a in listed if isinstance(listed, list) else []:
        if not isinstance(a, dict) or not isinstance(a.get("id"), str):
            continue
        name: str = a["name"] if isinstance(a.get("name"), str) else a["id"]
        mime: str | None = a["mime_type"] if isinstance(a.get("mime_type"), str) else None
        if a["id"] in by_ref:
            by_ref[a["id"]].name, by_ref[a["id"]].mime = name, mime or by_ref[a["id"]].mime
        else:
            by_ref[a["id"]] = Attachment(name=name, ref=a["id"], mime=mime)
    return list(by_ref.values())


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _chatgpt_message(msg: dict[str, Any], skipped: Counter[str]) -> ChatMessage | None:
    author: dict[str, Any] = _obj(msg.get("author"))
    role = author.get("role")
    content: dict[str, Any] = _obj(msg.get("content"))
    kind = content.get("content_type")
    meta: dict[str, Any] = _obj(msg.get("metadata"))
    if role == "system":
        skipped["system message"] += 1
        return None
    if meta.get("is_visually_hidden_from_conversation") or msg.get("weight") == 0:
        skipped["hidden message"] += 1
        return None
    if kind in _HIDDEN_TYPES:
        skipped[f"{kind} (not part of the transcript)"] += 1
        return None
    texts, files, only_images = _chatgpt_parts(content)
    if role == "tool":
        if not only_images:
            skipped["tool output"] += 1
            return None
        role = "assistant"  # a DALL·E result: the assistant's picture
    elif role == "assistant" and msg.get("recipient") not in (None, "all"):
        skipped["tool call"] += 1
        return None
    if role not in ("user", "assistant"):
        skipped[f"unknown role {str(role)[:40]!r}"] += 1
        return None
    text = clean_text("\n".join(texts))
    files = _chatgpt_attachments(meta, files)
    if not text and not files:
        skipped["no text content"] += 1
        return None
    mid = msg.get("id")
    return ChatMessage(
        key=mid if isinstance(mid, str) and mid else content_key(role, text),
        role=role,
        content=text,
        created_at=epoch_time(msg.get("create_time")),
        attachments=files,
    )


def _thoughts(content: Any) -> str | None:
    items = content.get("thoughts") if isinstance(content, dict) else None
    if not isinstance(items, list):
        return None
    texts = [t.get("content") for t in items if isinstance(t, dict)]
    return "\n\n".join(t for t in texts if isinstance(t, str) and t) or None


def parse_chatgpt(conv: Any) -> Conversation:
    """One element of ChatGPT's `conversations.json` → its kept transcript."""
    if not isinstance(conv, dict):
        raise RecordError("not a JSON object")
    cid = conv.get("conversation_id") or conv.get("id")
    if not isinstance(cid, str) or not cid:
        raise RecordError("no `id` or `conversation_id`")
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict):
        raise RecordError(f"conversation {cid}: `mapping` is not an object")
    out = Conversation(
        CHATGPT, cid, _title(conv.get("title")), epoch_time(conv.get("create_time")), []
    )
    path, cycle = kept_branch(mapping, conv.get("current_node"))
    if cycle:
        out.notes.append("a cycle in the message tree: the branch was cut where it looped")
    thinking: str | None = None
    for nid in path:
        node = mapping[nid]
        msg = node.get("message") if isinstance(node, dict) else None
        if not isinstance(msg, dict):
            continue
        if (
            isinstance(msg.get("content"), dict)
            and msg["content"].get("content_type") == "thoughts"
        ):
            thinking = _thoughts(msg["content"]) or thinking
        m = _chatgpt_message(msg, out.skipped)
        if m is None:
            continue
        if m.role == "assistant" and thinking:
            m.thinking, thinking = clean_text(thinking), None
        out.messages.append(m)
    fill_times(out.messages, out.created_at)
    return out


# --- Claude --------------------------------------------------------------------------


def _claude_text(msg: dict[str, Any]) -> tuple[str, str | None]:
    blocks = msg.get("content")
    texts: list[str] = []
    thinking: list[str] = []
    if isinstance(blocks, list) and blocks:
        for b in blocks:
            if not isinstance(b, dict):
                continue
            if b.get("type") in ("text", "voice_note") and isinstance(b.get("text"), str):
                texts.append(b["text"])
            elif b.get("type") == "thinking" and isinstance(b.get("thinking"), str):
                thinking.append(b["thinking"])
    elif isinstance(msg.get("text"), str):  # the flattened render: only without blocks
        texts.append(msg["text"])
    return clean_text("\n\n".join(texts)), clean_text("\n\n".join(thinking)) or None


def _claude_files(msg: dict[str, Any]) -> list[Attachment]:
    out: list[Attachment] = []
    for a in msg.get("attachments") or []:
        if isinstance(a, dict) and isinstance(a.get("file_name"), str):
            data = a.get("extracted_content")
            out.append(
                Attachment(
                    name=a["file_name"],
                    mime=a.get("file_type") if isinstance(a.get("file_type"), str) else None,
                    data=data.replace("\x00", "").encode() if isinstance(data, str) else None,
                )
            )
    for f in msg.get("files") or []:
        if isinstance(f, dict) and isinstance(f.get("file_name"), str):
            ref = f.get("file_uuid") if isinstance(f.get("file_uuid"), str) else None
            out.append(Attachment(name=f["file_name"], ref=ref))
    return out


def _claude_order(msgs: list[Any], current: Any) -> tuple[list[Any], bool]:
    """The messages in transcript order: the array's, or the newest branch of the tree
    `parent_message_uuid` draws."""
    dicts = [m for m in msgs if isinstance(m, dict)]
    if not any("parent_message_uuid" in m for m in dicts):
        return dicts, False
    by_id = {m["uuid"]: m for m in dicts if isinstance(m.get("uuid"), str)}
    leaf = current if isinstance(current, str) and current in by_id else None
    if leaf is None:
        parents = {m.get("parent_message_uuid") for m in dicts}
        leaves = [i for i, m in enumerate(dicts) if m.get("uuid") not in parents]
        if leaves:  # the newest leaf; the later one in the array on a tie
            best = max(leaves, key=lambda i: (str(dicts[i].get("created_at") or ""), i))
            leaf = dicts[best].get("uuid")
    path, seen, cycle = [], set(), False
    while isinstance(leaf, str) and leaf in by_id:
        if leaf in seen:
            cycle = True
            break
        seen.add(leaf)
        path.append(by_id[leaf])
        leaf = by_id[leaf].get("parent_message_uuid")
    path.reverse()
    return path, cycle


def parse_claude(conv: Any) -> Conversation:
    """One element of Claude's `conversations.json` → its transcript."""
    if not isinstance(conv, dict):
        raise RecordError("not a JSON object")
    cid = conv.get("uuid")
    if not isinstance(cid, str) or not cid:
        raise RecordError("no `uuid`")
    msgs = conv.get("chat_messages")
    if not isinstance(msgs, list):
        raise RecordError(f"conversation {cid}: `chat_messages` is not a list")
    out = Conversation(CLAUDE, cid, _title(conv.get("name")), iso_time(conv.get("created_at")), [])
    ordered, cycle = _claude_order(msgs, conv.get("current_leaf_message_uuid"))
    if cycle:
        out.notes.append("a cycle in the message tree: the branch was cut where it looped")
    out.skipped["not a JSON object"] += len(msgs) - sum(isinstance(m, dict) for m in msgs)
    for msg in ordered:
        role = _ROLES.get(msg.get("sender"))  # type: ignore[arg-type]
        if role is None:
            out.skipped[f"unknown sender {str(msg.get('sender'))[:40]!r}"] += 1
            continue
        text, thinking = _claude_text(msg)
        files = _claude_files(msg)
        if not text and not files:
            out.skipped["no text content"] += 1
            continue
        mid = msg.get("uuid")
        out.messages.append(
            ChatMessage(
                key=mid if isinstance(mid, str) and mid else content_key(role, text),
                role=role,
                content=text,
                created_at=iso_time(msg.get("created_at")),
                thinking=thinking if role == "assistant" else None,
                attachments=files,
            )
        )
    out.skipped = +out.skipped
    fill_times(out.messages, out.created_at)
    return out


# --- JSON Lines ----------------------------------------------------------------------


@dataclass
class JsonlLine:
    conversation_id: str
    title: str
    message: ChatMessage | None
    skip: str | None = None


def parse_jsonl_line(record: Any) -> JsonlLine:
    """One line `{conversation_id, role, content, created_at|time, title?}`; RecordError
    when it has no conversation id."""
    if not isinstance(record, dict):
        raise RecordError("not a JSON object")
    cid = record.get("conversation_id")
    if isinstance(cid, int) and not isinstance(cid, bool):
        cid = str(cid)
    if not isinstance(cid, str) or not cid:
        raise RecordError("no `conversation_id`")
    title = _title(record.get("title"))
    role = _ROLES.get(record.get("role"))  # type: ignore[arg-type]
    if role is None:
        return JsonlLine(cid, title, None, f"role {str(record.get('role'))[:40]!r}")
    raw = record.get("content")
    if isinstance(raw, list):  # OpenAI content parts
        raw = "\n".join(
            p.get("text", "") for p in raw if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    text = clean_text(raw) if isinstance(raw, str) else ""
    if not text:
        return JsonlLine(cid, title, None, "no text content")
    at = iso_time(record.get("created_at", record.get("time")))
    mid = record.get("id") if isinstance(record.get("id"), str) else None
    return JsonlLine(cid, title, ChatMessage(mid or content_key(role, text), role, text, at))
