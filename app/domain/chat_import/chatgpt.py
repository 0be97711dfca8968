"""ChatGPT's `conversations.json` element → the transcript of the branch the user kept
(/work/shared/notes/chat-export-formats.md, section 1): from `current_node` (else the
newest leaf) up through the `parent` links, reversed, walked with a visited set (cycles
occur); hidden, system and tool nodes left out and counted."""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.domain.chat_import.formats import (
    CHATGPT,
    Attachment,
    ChatMessage,
    Conversation,
    RecordError,
    clean_text,
    conversation_id,
    epoch_time,
    fill_times,
    message_key,
    title_of,
)

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
    return ChatMessage(
        key=message_key(msg.get("id"), role, text),
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
    cid = conversation_id(conv.get("conversation_id") or conv.get("id"), "id")
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict):
        raise RecordError(f"conversation {cid}: `mapping` is not an object")
    out = Conversation(
        CHATGPT, cid, title_of(conv.get("title")), epoch_time(conv.get("create_time")), []
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
