"""The pure parsers and the streaming reader of chat exports (no database)."""

from __future__ import annotations

import io
import json

import pytest

from app.domain.chat_import.batches import top_up_start
from app.domain.chat_import.chatgpt import kept_branch, parse_chatgpt
from app.domain.chat_import.claude import parse_claude
from app.domain.chat_import.formats import RecordError
from app.domain.chat_import.reader import ExportReader
from app.lib.errors import Unprocessable
from tests.chat_exports import (
    T0,
    chatgpt_zip,
    claude_conversation,
    gpt_conversation,
    gpt_node,
    jsonl,
    tea,
)


def test_chatgpt_follows_the_kept_branch_and_skips_hidden_nodes() -> None:
    conv = parse_chatgpt(tea())
    assert [(m.key, m.role, m.content) for m in conv.messages] == [
        ("u1", "user", "How long to steep this sencha?"),
        ("a2", "assistant", "About 4 minutes at 80 C."),
    ]
    assert conv.title == "Tea" and conv.source_id == "c1"
    assert conv.messages[0].created_at.timestamp() == T0 + 1  # type: ignore[union-attr]
    assert [(a.name, a.ref) for a in conv.messages[0].attachments] == [("pot.jpg", "file_00aa")]
    assert conv.skipped == {"system message": 1}


def test_chatgpt_without_current_node_takes_the_newest_leaf_and_rebuilds_children() -> None:
    raw = tea()
    del raw["current_node"]
    assert [m.key for m in parse_chatgpt(raw).messages] == ["u1", "a2"]


def test_chatgpt_cycle_is_cut_and_noted() -> None:
    nodes = [
        gpt_node("u1", "a1", "user", "loop question", T0 + 1),
        gpt_node("a1", "u1", "assistant", "loop answer", T0 + 2),
    ]
    conv = parse_chatgpt(gpt_conversation("cyc", "Loop", nodes, "a1"))
    assert [m.content for m in conv.messages] == ["loop question", "loop answer"]
    assert conv.notes and "cycle" in conv.notes[0]
    path, cycle = kept_branch({n["id"]: n for n in nodes}, "a1")
    assert cycle and path == ["u1", "a1"]


def test_chatgpt_tool_calls_thoughts_and_empty_messages_are_skipped_and_counted() -> None:
    nodes = [
        gpt_node("r", None, None),
        gpt_node("u", "r", "user", "run it", T0),
        gpt_node(
            "th",
            "u",
            "assistant",
            t=T0 + 1,
            content={"content_type": "thoughts", "thoughts": [{"content": "hmm"}]},
        ),
        gpt_node(
            "c",
            "th",
            "assistant",
            t=T0 + 2,
            recipient="python",
            content={"content_type": "code", "text": "1+1"},
        ),
        gpt_node(
            "o", "c", "tool", t=T0 + 3, content={"content_type": "execution_output", "text": "2"}
        ),
        gpt_node("e", "o", "assistant", "   ", T0 + 4),
        gpt_node(
            "a", "e", "assistant", "It is 2 \ue200cite\ue202turn0search1\ue201【11†source】.", None
        ),
    ]
    conv = parse_chatgpt(gpt_conversation("t", "Tools", nodes, "a"))
    assert [(m.role, m.content, m.thinking) for m in conv.messages] == [
        ("user", "run it", None),
        ("assistant", "It is 2 .", "hmm"),
    ]
    # no time on the answer: its predecessor's, flagged
    assert conv.messages[1].time_inferred and conv.messages[1].created_at.timestamp() == T0  # type: ignore[union-attr]
    assert conv.skipped["no text content"] == 1
    assert conv.skipped["execution_output (not part of the transcript)"] == 1
    assert conv.skipped["code (not part of the transcript)"] == 1


def test_chatgpt_malformed_conversation_raises_a_named_error() -> None:
    with pytest.raises(RecordError, match="mapping"):
        parse_chatgpt({"id": "x", "mapping": []})
    with pytest.raises(RecordError, match="id"):
        parse_chatgpt({"mapping": {}})


def test_claude_uses_text_blocks_not_the_polluted_text_and_keeps_attachments() -> None:
    conv = parse_claude(claude_conversation())
    assert [(m.role, m.content) for m in conv.messages] == [
        ("user", "How long should green tea steep?"),
        ("assistant", "2-3 minutes at about 80 C."),
    ]
    assert conv.messages[1].thinking == "Green tea is delicate."
    files = conv.messages[0].attachments
    assert [(f.name, f.data) for f in files] == [("notes.txt", b"steep at 80 C"), ("pot.png", None)]


def test_claude_tree_takes_the_newest_branch() -> None:
    raw = claude_conversation()
    root = "00000000-0000-4000-8000-000000000000"
    msgs = raw["chat_messages"]
    msgs[0]["parent_message_uuid"] = root
    msgs[1]["parent_message_uuid"] = "h1"
    old = {**msgs[1], "uuid": "b0", "created_at": "2026-01-01T10:00:01.500000Z"}
    old["content"] = [{"type": "text", "text": "abandoned"}]
    msgs.insert(1, old)
    assert [m.key for m in parse_claude(raw).messages] == ["h1", "b1"]


def _read(data: bytes, fmt: str | None = None) -> ExportReader:
    return ExportReader(io.BytesIO(data), fmt, 1 << 20)


def test_reader_detects_each_format() -> None:
    gpt = _read(json.dumps([tea()]).encode())
    assert [c.source for c in gpt.conversations()] == ["chatgpt"]
    claude = _read(json.dumps([claude_conversation()]).encode())
    assert [c.source for c in claude.conversations()] == ["claude"]
    z = _read(chatgpt_zip([tea()], {"file_00aa-pot.jpg": b"\xff\xd8jpeg"}))
    convs = list(z.conversations())
    assert z.format == "chatgpt" and len(convs) == 1
    found = z.attachment(convs[0].messages[0].attachments[0])
    assert found is not None and found[1].filename == "file_00aa-pot.jpg"
    lines = jsonl(
        [
            {"conversation_id": "j1", "role": "user", "content": "hi", "time": T0, "title": "J"},
            {"conversation_id": "j1", "role": "assistant", "content": "hello", "time": T0 + 1},
            {
                "conversation_id": "j2",
                "role": "user",
                "content": "next",
                "created_at": "2026-01-02T00:00:00Z",
            },
        ]
    )
    got = list(_read(lines).conversations())
    assert [(c.source_id, c.title, len(c.messages)) for c in got] == [("j1", "J", 2), ("j2", "", 1)]


def test_reader_truncated_array_keeps_what_came_before() -> None:
    data = json.dumps([tea("a"), tea("b")]).encode()
    reader = _read(data[: len(data) - 40])
    got = [c.source_id for c in reader.conversations()]
    assert got == ["a"]
    assert reader.truncated and "after conversation 1" in reader.truncated


def test_reader_skips_and_names_a_malformed_record() -> None:
    reader = _read(json.dumps([tea("a"), {"id": "bad", "mapping": 3}, tea("c")]).encode())
    assert [c.source_id for c in reader.conversations()] == ["a", "c"]
    assert [(s.where, "mapping" in s.reason) for s in reader.skipped] == [
        ("conversation 2 (bad)", True)
    ]


def test_reader_refuses_what_it_cannot_recognise() -> None:
    with pytest.raises(Unprocessable, match="neither"):
        list(_read(b'[{"x": 1}]').conversations())
    with pytest.raises(Unprocessable, match="not a zip"):
        _read(b"hello")
    with pytest.raises(Unprocessable, match="format"):
        _read(b"[]", "word")


def test_top_up_start() -> None:
    assert top_up_start(["a", "b", "c"], {"count": 2, "last": "b"}) == 2
    assert top_up_start(["a", "b"], {"count": 2, "last": "b"}) == 2
    assert top_up_start(["a", "x", "c"], {"count": 2, "last": "b"}) is None
    assert top_up_start(["a"], {"count": 2, "last": "b"}) is None


def test_ids_too_long_for_the_index_are_refused_and_odd_times_not_trusted() -> None:
    raw = tea("x" * 300)
    with pytest.raises(RecordError, match="longer than"):
        parse_chatgpt(raw)
    conv = claude_conversation()
    conv["chat_messages"][0]["created_at"] = "0001-01-01T00:00:00Z"
    conv["chat_messages"][0]["uuid"] = "u" * 500
    first = parse_claude(conv).messages[0]
    assert first.time_inferred and first.created_at.year == 2026  # type: ignore[union-attr]
    assert first.key.startswith("h:")  # a hash of the text, not the 500-char id


def test_sharded_zip_in_manifest_order_with_dat_assets_and_a_missing_shard() -> None:
    import zipfile

    buf = io.BytesIO()
    manifest = {
        "version": 1,
        "logical_files": {
            "conversations.json": {
                "files": [
                    "conversations-001.json",
                    "conversations-000.json",
                    "conversations-002.json",
                ],
                "sharded": True,
            }
        },
    }
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("export_manifest.json", json.dumps(manifest))
        z.writestr("conversations-000.json", json.dumps([tea("a")]))
        z.writestr("conversations-001.json", json.dumps([tea("b")]))
        z.writestr(
            "conversation_asset_file_names.json", json.dumps({"file_00aa.dat": "teapot.jpg"})
        )
        z.writestr("file_00aa.dat", b"\xff\xd8")
    reader = _read(buf.getvalue())
    convs = list(reader.conversations())
    assert [c.source_id for c in convs] == ["b", "a"]
    assert reader.truncated and "conversations-002.json" in reader.truncated
    att = convs[0].messages[0].attachments[0]
    assert att.name == "pot.jpg"  # the message's own name for it wins
    att.name = att.ref or ""
    found = reader.attachment(att)
    assert found is not None and found[0] == "teapot.jpg" and found[1].filename == "file_00aa.dat"


def test_reader_streams_a_conversation_at_a_time() -> None:
    """Bounded memory: the reader has read a small window of the file when it yields a
    conversation, not the file (ijson over the array, a line at a time for JSON Lines)."""
    big = json.dumps([tea(f"c{i}") for i in range(3000)]).encode()
    lines = jsonl(
        [
            {"conversation_id": f"j{i // 2}", "role": "user", "content": "hi " * 50, "time": T0}
            for i in range(40_000)
        ]
    )
    for data in (big, lines):
        f = io.BytesIO(data)
        reader = ExportReader(f, None, 1 << 20)
        seen = []
        for n, conv in enumerate(reader.conversations(), 1):
            if n in (1, 1000):
                seen.append(f.tell())
            assert conv.messages
        assert len(data) > 4_000_000 and n >= 3000
        assert seen[0] < 200_000, seen  # the first conversation: one read buffer or two
        assert seen[1] < len(data) / 2, seen  # the 1000th: as far as it, no further
