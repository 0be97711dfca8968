"""Claude's `conversations.json` element → its transcript (/work/shared/notes/
chat-export-formats.md, section 2): the `text` blocks of each message (the flattened
`text` only without blocks), in array order, or along the newest branch of the tree
`parent_message_uuid` draws (2026 exports)."""

from __future__ import annotations

from typing import Any

from app.domain.chat_import.formats import (
    CLAUDE,
    ROLES,
    Attachment,
    ChatMessage,
    Conversation,
    RecordError,
    clean_text,
    conversation_id,
    fill_times,
    iso_time,
    message_key,
    title_of,
)


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
    cid = conversation_id(conv.get("uuid"), "uuid")
    msgs = conv.get("chat_messages")
    if not isinstance(msgs, list):
        raise RecordError(f"conversation {cid}: `chat_messages` is not a list")
    out = Conversation(
        CLAUDE, cid, title_of(conv.get("name")), iso_time(conv.get("created_at")), []
    )
    ordered, cycle = _claude_order(msgs, conv.get("current_leaf_message_uuid"))
    if cycle:
        out.notes.append("a cycle in the message tree: the branch was cut where it looped")
    out.skipped["not a JSON object"] += len(msgs) - sum(isinstance(m, dict) for m in msgs)
    for msg in ordered:
        role = ROLES.get(msg.get("sender"))  # type: ignore[arg-type]
        if role is None:
            out.skipped[f"unknown sender {str(msg.get('sender'))[:40]!r}"] += 1
            continue
        text, thinking = _claude_text(msg)
        files = _claude_files(msg)
        if not text and not files:
            out.skipped["no text content"] += 1
            continue
        out.messages.append(
            ChatMessage(
                key=message_key(msg.get("uuid"), role, text),
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
