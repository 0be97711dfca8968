"""Small chat exports in the vendors' shapes (/work/shared/notes/chat-export-formats.md)."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def gpt_node(
    nid: str,
    parent: str | None,
    role: str | None,
    text: str | None = None,
    t: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    if role is None:
        return {"id": nid, "message": None, "parent": parent}
    content = extra.pop("content", None) or {"content_type": "text", "parts": [text or ""]}
    msg = {
        "id": nid,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": t,
        "content": content,
        "recipient": extra.pop("recipient", "all"),
        "metadata": extra.pop("metadata", {}),
        **extra,
    }
    return {"id": nid, "message": msg, "parent": parent}


def gpt_conversation(cid: str, title: str, nodes: list[dict[str, Any]], current: str) -> dict:
    return {
        "id": cid,
        "conversation_id": cid,
        "title": title,
        "create_time": T0,
        "update_time": T0 + 100,
        "current_node": current,
        "mapping": {n["id"]: n for n in nodes},
        "default_model_slug": "gpt-5",
        "some_future_field": {"x": 1},
    }


def tea(cid: str = "c1") -> dict[str, Any]:
    """The notes' example: a hidden system node, an image upload, a regenerated answer."""
    image = {
        "content_type": "image_asset_pointer",
        "asset_pointer": "sediment://file_00aa",
        "width": 800,
        "height": 600,
    }
    return gpt_conversation(
        cid,
        "Tea",
        [
            gpt_node("client-created-root", None, None),
            gpt_node(
                "s",
                "client-created-root",
                "system",
                "",
                None,
                weight=0.0,
                metadata={"is_visually_hidden_from_conversation": True},
            ),
            gpt_node(
                "u1",
                "s",
                "user",
                t=T0 + 1,
                content={
                    "content_type": "multimodal_text",
                    "parts": [image, "How long to steep this sencha?"],
                },
                metadata={
                    "attachments": [
                        {"id": "file_00aa", "name": "pot.jpg", "mime_type": "image/jpeg"}
                    ]
                },
            ),
            gpt_node("a1", "u1", "assistant", "3 min.", T0 + 2),
            gpt_node("a2", "u1", "assistant", "About 4 minutes at 80 C.", T0 + 50),
        ],
        "a2",
    )


def chatgpt_zip(conversations: list[dict[str, Any]], files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("conversations.json", json.dumps(conversations))
        z.writestr("conversation_asset_file_names.json", json.dumps({}))
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def claude_conversation(cid: str = "k1") -> dict[str, Any]:
    return {
        "uuid": cid,
        "name": "Green tea",
        "summary": "",
        "account": {"uuid": "acc1"},
        "created_at": "2026-01-01T10:00:00.000000Z",
        "updated_at": "2026-01-01T10:01:05.500000Z",
        "chat_messages": [
            {
                "uuid": "h1",
                "sender": "human",
                "created_at": "2026-01-01T10:00:01.000000Z",
                "text": "How long should green tea steep?",
                "content": [{"type": "text", "text": "How long should green tea steep?"}],
                "attachments": [
                    {
                        "file_name": "notes.txt",
                        "file_size": 13,
                        "file_type": "txt",
                        "extracted_content": "steep at 80 C",
                    }
                ],
                "files": [{"file_name": "pot.png"}],
            },
            {
                "uuid": "b1",
                "sender": "assistant",
                "created_at": "2026-01-01T10:00:02.000000Z",
                "text": "Thinking... 2-3 minutes at about 80 C.",
                "content": [
                    {"type": "thinking", "thinking": "Green tea is delicate."},
                    {"type": "text", "text": "2-3 minutes at about 80 C."},
                ],
                "attachments": [],
                "files": [],
            },
        ],
    }


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)
